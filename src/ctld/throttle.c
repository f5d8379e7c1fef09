/*
 * throttle.c - an array's throttle (spec array_throttle, sbatch's --array
 * ...%N): at most N of its elements run at once.
 *
 * An array's elements are created together, element i named "NAME[i]" with
 * consecutive ids, so element i of the array whose first element is id F has
 * id F + i: that first id names the array. Before each cycle, one pass counts
 * the running (and stopping) elements of every throttled array; then each
 * pending element is admitted to the cycle only while its array has room left
 * (lowest index first, the order the jobs are kept in), and the others wait
 * as held with the reason said. Throttled arrays are few, so a short list
 * searched in line is enough.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctld/ctld.h"

typedef struct throttled {
    int64_t array;  /* its first element's id */
    int room;       /* elements that may still start */
    int limit;
} throttled;

struct ctld_throttle {
    throttled *a;
    int n, cap;
};

/* The array a job belongs to (its first element's id), or 0. */
static int64_t array_of(const cjob *j)
{
    if (!j->spec || j->spec->array_throttle <= 0)
        return 0;
    const char *b = strrchr(j->row.name, '[');
    char *end = NULL;
    long idx = b ? strtol(b + 1, &end, 10) : -1;
    if (!b || idx < 0 || !end || end[0] != ']' || end[1] != '\0' || idx >= j->row.id)
        return 0;
    return j->row.id - idx;
}

static throttled *find(ctld_throttle *t, int64_t array, int limit)
{
    for (int i = 0; i < t->n; i++)
        if (t->a[i].array == array)
            return &t->a[i];
    if (t->n == t->cap) {
        int cap = t->cap ? 2 * t->cap : 8;
        throttled *a = realloc(t->a, (size_t)cap * sizeof *a);
        if (!a)
            return NULL;
        t->a = a;
        t->cap = cap;
    }
    t->a[t->n] = (throttled){array, limit, limit};
    return &t->a[t->n++];
}

ctld_throttle *ctld_throttle_scan(ctld *c)
{
    ctld_throttle *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    for (int i = 0; i < c->njobs; i++) {
        ctld_yield_some(c, i);
        const cjob *j = c->jobs[i];
        int64_t a = array_of(j);
        if (!a || (j->row.state != TS_JOB_RUNNING && j->row.state != TS_JOB_STOPPING))
            continue;
        throttled *e = find(t, a, j->spec->array_throttle);
        if (e)
            e->room--;
    }
    return t;
}

bool ctld_throttle_waits(ctld_throttle *t, cjob *j)
{
    int64_t a = t ? array_of(j) : 0;
    if (!a || j->row.state != TS_JOB_PENDING)
        return false;
    throttled *e = find(t, a, j->spec->array_throttle);
    if (!e)
        return false; /* out of memory: the throttle is not applied this cycle */
    if (e->room > 0) {
        e->room--;
        return false;
    }
    char why[160];
    snprintf(why, sizeof why, "array throttle: at most %d of array %lld's elements run at once",
             e->limit, (long long)a);
    snprintf(j->row.reason, sizeof j->row.reason, "%s", ts_pending_name(TS_PEND_HELD));
    if (!j->row.why || strcmp(j->row.why, why) != 0) {
        free(j->row.why);
        j->row.why = strdup(why);
    }
    return true;
}

void ctld_throttle_free(ctld_throttle *t)
{
    if (t)
        free(t->a);
    free(t);
}
