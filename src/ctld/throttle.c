/*
 * throttle.c - an array's identity and its throttle (spec array_throttle,
 * sbatch's --array ...%N): at most N of its elements run at once.
 *
 * An array's elements are created together, element i named "NAME[i]" with
 * consecutive ids, so element i of the array whose first element is id F has
 * id F + i: that first id names the array (ctld_array_index). Before each
 * cycle, one pass counts the running (and stopping) elements of every
 * throttled array and collects its pending ones; then only the lowest
 * pending indices that fit the room left are admitted to the cycle, and the
 * others wait as held with the reason said. The jobs are kept in no
 * particular order (a removal moves the last one into the gap), so the
 * order is taken from the ids, never from the scan. Throttled arrays are
 * few, so a short list searched in line is enough.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctld/ctld.h"
#include "ctld/depend.h"
#include "tessera/grow.h"

typedef struct throttled {
    int64_t array;  /* its first element's id */
    int room;       /* elements that may still start */
    int limit;
    int64_t *pend;  /* its pending elements' ids that the cycle could take */
    int npend, cappend;
    int64_t cutoff; /* after the scan: the highest id admitted (0: none) */
} throttled;

struct ctld_throttle {
    throttled *a;
    int n, cap;
};

long ctld_array_index(const cjob *j)
{
    if (!j->spec || j->spec->array_size <= 1)
        return -1;
    const char *b = strrchr(j->row.name, '[');
    char *end = NULL;
    long idx = b ? strtol(b + 1, &end, 10) : -1;
    if (!b || idx < 0 || !end || end[0] != ']' || end[1] != '\0' || idx >= j->row.id ||
        idx >= j->spec->array_size)
        return -1;
    return idx;
}

/* The throttled array a job belongs to (its first element's id), or 0. */
static int64_t array_of(const cjob *j)
{
    if (!j->spec || j->spec->array_throttle <= 0)
        return 0;
    long idx = ctld_array_index(j);
    return idx < 0 ? 0 : j->row.id - idx;
}

static throttled *find(ctld_throttle *t, int64_t array, int limit, bool add)
{
    for (int i = 0; i < t->n; i++)
        if (t->a[i].array == array)
            return &t->a[i];
    if (!add)
        return NULL;
    if (ts_grow((void **)&t->a, &t->cap, t->n + 1, 8, sizeof *t->a) != 0)
        return NULL;
    t->a[t->n] = (throttled){.array = array, .room = limit, .limit = limit};
    return &t->a[t->n++];
}

static int pend_add(throttled *e, int64_t id)
{
    if (ts_grow((void **)&e->pend, &e->cappend, e->npend + 1, 16, sizeof *e->pend) != 0)
        return -1;
    e->pend[e->npend++] = id;
    return 0;
}

static int cmp_id(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

ctld_throttle *ctld_throttle_scan(ctld *c)
{
    ctld_throttle *t = calloc(1, sizeof *t);
    bool ok = t != NULL;
    for (int i = 0; ok && i < c->njobs; i++) {
        ctld_yield_some(c, i);
        const cjob *j = c->jobs[i];
        int64_t a = array_of(j);
        bool runs = j->row.state == TS_JOB_RUNNING || j->row.state == TS_JOB_STOPPING;
        bool could = j->row.state == TS_JOB_PENDING && !j->pinned && !ctld_dep_waits(j);
        if (!a || (!runs && !could))
            continue;
        throttled *e = find(t, a, j->spec->array_throttle, true);
        if (!e)
            ok = false;
        else if (runs)
            e->room--;
        else if (pend_add(e, j->row.id) != 0)
            ok = false;
    }
    if (!ok) {
        ctld_throttle_free(t);
        return NULL;
    }
    for (int i = 0; i < t->n; i++) {
        throttled *e = &t->a[i];
        if (e->npend > 1)
            qsort(e->pend, (size_t)e->npend, sizeof *e->pend, cmp_id);
        e->cutoff = e->room <= 0 ? 0 : e->npend <= e->room ? INT64_MAX : e->pend[e->room - 1];
    }
    return t;
}

bool ctld_throttle_waits(ctld_throttle *t, cjob *j)
{
    int64_t a = t ? array_of(j) : 0;
    if (!a || j->row.state != TS_JOB_PENDING)
        return false;
    throttled *e = find(t, a, j->spec->array_throttle, false);
    if (!e)
        return true; /* came after the scan (a submission at a yield): the next cycle */
    if (j->row.id <= e->cutoff)
        return false;
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
    for (int i = 0; t && i < t->n; i++)
        free(t->a[i].pend);
    if (t)
        free(t->a);
    free(t);
}
