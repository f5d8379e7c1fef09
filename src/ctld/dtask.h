/*
 * dtask.h - internal: one desired task as tesserad writes it (agents_desired.c,
 * net.c, secrets_api.c, steps.c): the protocol's struct (tessera/agent_proto.h),
 * which the codec's one encoder turns into the wire form, and the storage of
 * what the controller computes for it.
 *
 * The struct only points at its strings and lists. Most of them live in the
 * controller's state (the job's spec and row, the agents' discovery) and stay
 * valid under c->mu, which the whole build and its encoding holds; the rest
 * (environment entries made here, the GPU list, the overlay addresses, the
 * secret values) are made in the task's own arena, a chain of chunks freed at
 * once by ctld_dtask_fini. A task that held a secret has every chunk wiped
 * (explicit_bzero) before it is freed, so no value outlives its encoding in
 * this memory.
 *
 * Not thread-safe: one builder a task. An allocation that fails sets oom and
 * returns NULL; the builder carries on, and the task is then not sent
 * (ctld_dtask_encode returns NULL), as a partial task must never start.
 */
#ifndef TS_CTLD_DTASK_H
#define TS_CTLD_DTASK_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "tessera/agent_proto.h"

/* Room left in a task's env for what the controller adds to the job's own
 * (checkpoint folder, job id, restarts, last stop, Slurm nodes, array: 9)
 * and a step's numbering (4). */
#define CTLD_DTASK_ENV_EXTRA 16

typedef struct ctld_dtask_chunk ctld_dtask_chunk;

typedef struct ctld_dtask {
    ts_desired_task t;
    ctld_dtask_chunk *chunks; /* the arena; NULL: nothing made yet */
    int env_cap;              /* room in t.env.v */
    bool oom;                 /* an allocation failed: the task is not sent */
    bool wipe;                /* a secret value is in the arena */
} ctld_dtask;

/* Marks member F (a TS_DT_ name without its prefix) present. */
#define CTLD_DT_SET(dt, F) ((dt)->t.present |= TS_DT_BIT(TS_DT_##F))
#define CTLD_DT_CLEAR(dt, F) ((dt)->t.present &= ~TS_DT_BIT(TS_DT_##F))

/* n bytes in dt's arena, zeroed and aligned for any member; NULL (oom set). */
void *ctld_dtask_alloc(ctld_dtask *dt, size_t n);
/* A formatted string in the arena; NULL (oom set) when out of memory. */
const char *ctld_dtask_printf(ctld_dtask *dt, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* A secret's len bytes (they may hold NUL) copied into the arena, which is
 * then wiped at fini; NULL (oom set) when out of memory. */
const char *ctld_dtask_secret(ctld_dtask *dt, const char *value, size_t len);
/* Makes t.env the n strings of env (borrowed) with CTLD_DTASK_ENV_EXTRA
 * more slots; ctld_dtask_env_add fills one with a formatted string and
 * returns it (NULL, oom set, when out of memory or the room is spent). */
void ctld_dtask_env_init(ctld_dtask *dt, const char *const *env, int n);
const char *ctld_dtask_env_add(ctld_dtask *dt, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* The task as a JSON object (a new reference); NULL when oom or out of memory. */
json_t *ctld_dtask_encode(const ctld_dtask *dt);
/* Frees the arena, wiping it first when it held a secret; dt is then empty. */
void ctld_dtask_fini(ctld_dtask *dt);

#endif
