/*
 * steps_internal.h - what steps.c, steps_view.c and steps_restore.c share:
 * a step as the controller keeps it, and the helpers they use. Under c->mu
 * unless it says otherwise.
 */
#ifndef TS_CTLD_STEPS_INTERNAL_H
#define TS_CTLD_STEPS_INTERNAL_H

#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "ctld/ctld.h"
#include "ctld/http.h"

enum { STEP_RUNNING = 0, STEP_COMPLETED, STEP_FAILED, STEP_CANCELLED };

/* A step's command, up to 64 KiB: one block, never changed once made, that a
 * list of the job's steps takes a reference on under c->mu and renders
 * after releasing it (steps_view.c), so no reader waits for 4096 of them. */
typedef struct ctld_step_cmd {
    atomic_int refs;
    int argc;
    char *argv[]; /* [argc], each in the same block */
} ctld_step_cmd;

/* The command cmd (a JSON list of strings) as a block with one reference;
 * NULL when out of memory. */
ctld_step_cmd *ctld_step_cmd_new(const json_t *cmd);
/* Drops a reference (any thread, with or without c->mu); the last frees. */
void ctld_step_cmd_put(ctld_step_cmd *cmd);

/* One task of a step. */
typedef struct ctld_step_task {
    int rank;          /* the job's rank it runs in */
    uint8_t st;        /* CTLD_RANK_* */
    int code;          /* exit status (128 + signal), -1 unknown */
    double end;        /* when it ended */
    char *out, *err;   /* the last of its output, NULL none */
} ctld_step_task;

typedef struct ctld_step {
    int id;
    double run;        /* the job's start_s of the run it belongs to */
    int n;             /* its tasks */
    ctld_step_task *task; /* [n] */
    ctld_step_cmd *cmd;
    int state;
    double start_s, end_s;
    char why[160];     /* why it ended without its tasks' ends ("" otherwise) */
} ctld_step;

struct ctld_steps {
    ctld_step *v;
    int n, cap;
};

/* Frees what a step owns (not the step). */
void ctld_step_fini(ctld_step *s);
/* s's s->n tasks, on the job's ranks rank[0..n), and argv (from cmd) made,
 * and room for one more step in steps; false when out of memory
 * (ctld_step_fini frees what was made). */
bool ctld_step_alloc(ctld_step *s, const int *rank, const json_t *cmd,
                     struct ctld_steps *steps);
/* steps_view.c: step id of j (NULL: none); the node rank runs on ("" when j
 * holds none); step s's document (with each task's output when tasks),
 * NULL when out of memory; GET /v1/jobs/{id}/steps (takes mu itself, a list
 * rendered with it released). */
ctld_step *ctld_step_find(const cjob *j, int id);
const char *ctld_step_node(const ctld *c, const cjob *j, int rank);
json_t *ctld_step_json(const ctld *c, const cjob *j, const ctld_step *s, bool tasks,
                       double now);
void ctld_steps_get(ctld *c, const ctld_request *rq, ctld_reply *r);
/* A job's steps from its events of that kind ("step-started", "step-ended"):
 * their detail documents; NULL when the store failed (r answered 503). */
json_t *ctld_step_events(ctld *c, int64_t id, const char *kind, ctld_reply *r);

#endif
