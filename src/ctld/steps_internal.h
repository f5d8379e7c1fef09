/*
 * steps_internal.h - what steps.c and steps_restore.c share: a step as the
 * controller keeps it, and the helpers both use. Under c->mu.
 */
#ifndef TS_CTLD_STEPS_INTERNAL_H
#define TS_CTLD_STEPS_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "ctld/ctld.h"
#include "ctld/http.h"

enum { STEP_RUNNING = 0, STEP_COMPLETED, STEP_FAILED, STEP_CANCELLED };

typedef struct ctld_step {
    int id;
    double run;        /* the job's start_s of the run it belongs to */
    int n;             /* its tasks */
    int *rank;         /* [n] the job's rank each task runs in */
    uint8_t *st;       /* [n] CTLD_RANK_* */
    int *code;         /* [n] exit status (128 + signal), -1 unknown */
    double *end;       /* [n] when each ended */
    char **out, **err; /* [n] the last of each task's output, NULL none */
    char **argv;
    int argc;
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
/* s's per-task arrays and argv (from cmd) made for its s->n tasks, and room
 * for one more step in steps; false when out of memory (ctld_step_fini frees
 * what was made). */
bool ctld_step_alloc(ctld_step *s, const json_t *cmd, struct ctld_steps *steps);
/* A job's steps from its events of that kind ("step-started", "step-ended"):
 * their detail documents; NULL when the store failed (r answered 503). */
json_t *ctld_step_events(ctld *c, int64_t id, const char *kind, ctld_reply *r);

#endif
