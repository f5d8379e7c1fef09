/*
 * steps_restore.c - a restarted controller's steps (steps.h,
 * ctld_steps_restore): a running batch job's steps rebuilt from their
 * started and ended events; the current run's steps without an end run on,
 * their tasks kept in the desired state, and the agents' reports settle
 * them (docs/slurm.md "Steps").
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctld/steps.h"
#include "ctld/steps_internal.h"

/* One step rebuilt from its started event b and, if it ended, its ended
 * event e (NULL: it runs, in the job's current run, or its run ended while
 * no controller ran). */
static int step_rebuilt(cjob *j, const json_t *b, const json_t *e, double now)
{
    const json_t *ranks = json_object_get(b, "ranks");
    ctld_step s = {0};
    s.id = (int)json_integer_value(json_object_get(b, "id"));
    s.run = json_number_value(json_object_get(b, "run"));
    s.start_s = json_number_value(json_object_get(b, "start"));
    s.n = (int)json_array_size(ranks);
    if (s.n <= 0 || s.n > j->ntasks || s.id < 0 || s.id >= CTLD_STEPS_MAX)
        return 0; /* an event of an older tesserad (no ranks): left to accounting */
    int *rank = malloc((size_t)s.n * sizeof *rank);
    if (!rank)
        return TS_ENOMEM;
    for (int q = 0; q < s.n; q++) {
        json_int_t r = json_integer_value(json_array_get(ranks, (size_t)q));
        rank[q] = r >= 0 && r < j->ntasks ? (int)r : 0;
    }
    bool ok = ctld_step_alloc(&s, rank, json_object_get(b, "command"), j->steps);
    free(rank);
    if (!ok) {
        ctld_step_fini(&s);
        return TS_ENOMEM;
    }
    const char *state = e ? json_string_value(json_object_get(e, "state")) : NULL;
    if (state) { /* ended: as its end was written */
        s.state = strcmp(state, "completed") == 0 ? STEP_COMPLETED
                  : strcmp(state, "cancelled") == 0 ? STEP_CANCELLED
                                                    : STEP_FAILED;
        s.end_s = json_number_value(json_object_get(e, "end"));
        int code = (int)json_integer_value(json_object_get(e, "exit_code"));
        for (int q = 0; q < s.n; q++) {
            s.task[q].st = s.state == STEP_COMPLETED ? CTLD_RANK_DONE : CTLD_RANK_FAILED;
            s.task[q].code = code;
            s.task[q].end = s.end_s;
        }
        const char *why = json_string_value(json_object_get(e, "reason"));
        snprintf(s.why, sizeof s.why, "%s", why ? why : "");
    } else if (s.run != j->row.start_s) { /* its run ended while no controller ran */
        s.state = STEP_CANCELLED;
        s.end_s = now;
        snprintf(s.why, sizeof s.why, "the job's run ended before the step");
    } /* else running: its tasks' reports (the agents register again) settle it */
    j->steps->v[j->steps->n++] = s;
    return 0;
}

int ctld_steps_restore(ctld *c, cjob *j, double now, ts_err *err)
{
    if (!ctld_job_is_batch(j) || !j->allocs)
        return 0;
    ctld_reply r = {0};
    json_t *begun = ctld_step_events(c, j->row.id, "step-started", &r);
    json_t *ended = begun ? ctld_step_events(c, j->row.id, "step-ended", &r) : NULL;
    if (!begun || !ended) {
        json_decref(begun);
        ts_err_set(err, TS_EIO, "the store: %s", r.body ? r.body : "unavailable");
        free(r.body);
        return TS_EIO;
    }
    int rc = 0;
    if (json_array_size(begun) > 0 && !(j->steps = calloc(1, sizeof *j->steps)))
        rc = TS_ENOMEM;
    size_t k, q;
    json_t *b, *e;
    json_array_foreach(begun, k, b)
    {
        const json_t *end = NULL;
        json_array_foreach(ended, q, e)
        {
            if (json_integer_value(json_object_get(e, "id")) ==
                json_integer_value(json_object_get(b, "id")))
                end = e;
        }
        if (rc == 0)
            rc = step_rebuilt(j, b, end, now);
    }
    json_decref(begun);
    json_decref(ended);
    if (j->steps && j->steps->n == 0) { /* only older events (no ranks): the next step's */
        free(j->steps->v);             /* id is found from the events, as for a first */
        free(j->steps);
        j->steps = NULL;
    }
    if (rc == TS_ENOMEM)
        ts_err_set(err, TS_ENOMEM, "out of memory");
    return rc;
}
