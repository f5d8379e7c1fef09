/*
 * array_lazy.c - large arrays whose pending elements are not jobs yet, as
 * Slurm keeps an array's pending tasks in one record until it starts them.
 *
 * An array of more than CTLD_ARRAY_WINDOW elements is stored as its first
 * CTLD_ARRAY_WINDOW elements' job rows plus one row in the store's arrays
 * table (docs/store.md "Arrays"); the ids of all its elements are reserved
 * at once, so element i is still job F + i, as every other part of tesserad
 * (throttle.c, depend.c, arrays.c, the CLI) expects. Its other elements are
 * a ctld_range in memory: a few bytes however large the array.
 *
 * An element becomes a job (its row, its cjob, its events) when
 *  - the scheduler is about to want it: after each cycle, an array with
 *    fewer than its window of pending elements gets the next lowest ones
 *    (ctld_arrays_fill, on loop.c's filler thread, while the next cycle
 *    plans), so the throttle still starts the lowest index first and a
 *    dependency, a hold or the queue see real jobs; the elements share one
 *    parsed spec (ctld_spec_share), so a job costs its row and a few bytes;
 *  - a user acts on that one element (ctld_array_take: cancel, hold, ...);
 *  - the whole array is cancelled: the rest are stored as cancelled rows,
 *    in chunks, and never enter memory (ctld_array_cancel_rest).
 * A write is made with mu released while the array is marked busy (nobody
 * else writes it meanwhile), and applied under mu once it committed.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctld/array_range.h"
#include "ctld/ctld.h"
#include "ctld/http.h"
#include "ctld/input.h"
#include "tessera/grow.h"

/* Pending elements turned into rows per write when the whole array is cancelled. */
#define CANCEL_CHUNK_ROWS 4096

struct ctld_lazy {
    int64_t id;             /* its first element's, the array's */
    ctld_range r;           /* its elements that are not jobs yet */
    ts_job_row tmpl;        /* what each element copies; name: the array's (no index) */
    int64_t spec_bytes;     /* strlen(tmpl.spec_json): each element's in the queued budget */
    char idem[TS_STORE_KEY_MAX]; /* the submission's Idempotency-Key ("" none) */
    int throttle;           /* its spec's array_throttle (0 none) */
    int window;             /* elements it keeps waiting as jobs (wanted()) */
    bool busy;              /* being written with mu released */
    ctld_spec_share *share; /* the spec its elements share, parsed at the first fill */
};

static void lazy_free(ctld_lazy *a)
{
    if (!a)
        return;
    ctld_range_fini(&a->r);
    ts_job_row_fini(&a->tmpl);
    ctld_spec_share_put(a->share);
    free(a);
}

/* The array whose elements include job id, or NULL. */
static ctld_lazy *lazy_of(ctld *c, int64_t id)
{
    for (int i = 0; i < c->nlazy; i++) {
        ctld_lazy *a = c->lazy[i];
        if (id >= a->id && id < a->id + a->r.size)
            return a;
    }
    return NULL;
}

static void lazy_remove(ctld *c, ctld_lazy *a)
{
    for (int i = 0; i < c->nlazy; i++)
        if (c->lazy[i] == a) {
            memmove(c->lazy + i, c->lazy + i + 1, (size_t)(c->nlazy - i - 1) * sizeof *c->lazy);
            c->nlazy--;
            break;
        }
    lazy_free(a);
}

ctld_lazy *ctld_lazy_new(const ts_job_row *first, int size, int next, int throttle)
{
    ctld_lazy *a = calloc(1, sizeof *a);
    if (!a)
        return NULL;
    a->id = first->id;
    a->r = (ctld_range){.size = size, .next = next};
    a->throttle = throttle;
    a->window = CTLD_ARRAY_WINDOW;
    a->tmpl = *first;
    a->tmpl.spec_json = strdup(first->spec_json ? first->spec_json : "");
    a->tmpl.placement_json = a->tmpl.why = a->tmpl.result_json = NULL;
    /* what element 0 has done since its submission is its own (restored
     * from the store, it may have run): the others start as it was */
    a->tmpl.state = TS_JOB_PENDING;
    a->tmpl.start_s = a->tmpl.end_s = 0;
    a->tmpl.preemptions = 0;
    a->tmpl.restarts = 0;
    a->tmpl.gpu_model[0] = a->tmpl.reason[0] = '\0';
    a->tmpl.gen = 0;
    a->spec_bytes = a->tmpl.spec_json ? (int64_t)strlen(a->tmpl.spec_json) : 0;
    if (!a->tmpl.spec_json) {
        free(a);
        return NULL;
    }
    char *b = strrchr(a->tmpl.name, '[');
    if (b)
        *b = '\0';
    snprintf(a->idem, sizeof a->idem, "%s", first->idem_key);
    char *h = strrchr(a->idem, '#');
    if (h)
        *h = '\0';
    return a;
}

int ctld_lazy_add(ctld *c, ctld_lazy *a)
{
    if (ts_grow((void **)&c->lazy, &c->lazy_cap, c->nlazy + 1, 8, sizeof *c->lazy) != 0) {
        lazy_free(a);
        return TS_ENOMEM;
    }
    c->lazy[c->nlazy++] = a;
    return 0;
}

void ctld_arrays_free(ctld *c)
{
    for (int i = 0; i < c->nlazy; i++)
        lazy_free(c->lazy[i]);
    free(c->lazy);
    c->lazy = NULL;
    c->nlazy = c->lazy_cap = 0;
}

/* Element idx's new row; spec_json is the template's (not owned). */
static void element_row(const ctld_lazy *a, int idx, ts_job_row *out)
{
    *out = a->tmpl;
    out->id = a->id + idx;
    out->gen = 0;
    out->state = TS_JOB_PENDING;
    /* fits: the submission checked the name with its largest index */
    char name[TS_STORE_NAME_MAX + 16];
    snprintf(name, sizeof name, "%s[%d]", a->tmpl.name, idx);
    snprintf(out->name, sizeof out->name, "%.*s", (int)sizeof out->name - 1, name);
    ctld_idem_element(out->idem_key, a->idem, idx);
}

bool ctld_array_lazy(ctld *c, int64_t id)
{
    const ctld_lazy *a = lazy_of(c, id);
    return a && ctld_range_has(&a->r, (int)(id - a->id));
}

int ctld_array_lazy_row(ctld *c, int64_t id, ts_job_row *out)
{
    const ctld_lazy *a = lazy_of(c, id);
    memset(out, 0, sizeof *out);
    if (!a || !ctld_range_has(&a->r, (int)(id - a->id)))
        return TS_ENOENT;
    element_row(a, (int)(id - a->id), out);
    char why[200];
    if (a->throttle > 0)
        snprintf(why, sizeof why, "array %lld: its pending elements become jobs the lowest "
                 "index first, as the scheduler takes them (array throttle: at most %d run at "
                 "once)", (long long)a->id, a->throttle);
    else
        snprintf(why, sizeof why, "array %lld: its pending elements become jobs the lowest "
                 "index first, as the scheduler takes them", (long long)a->id);
    snprintf(out->reason, sizeof out->reason, "%s", ts_pending_name(TS_PEND_HELD));
    out->spec_json = strdup(a->tmpl.spec_json);
    out->why = strdup(why);
    if (!out->spec_json || !out->why) {
        ts_job_row_fini(out);
        return TS_ENOMEM;
    }
    return 0;
}

int ctld_arrays_queued(const ctld *c, const char *tenant)
{
    int n = 0;
    for (int i = 0; i < c->nlazy; i++)
        if (strcmp(c->lazy[i]->tmpl.tenant, tenant) == 0)
            n += ctld_range_count(&c->lazy[i]->r);
    return n;
}

int64_t ctld_arrays_queued_bytes(const ctld *c, const char *tenant)
{
    int64_t n = 0;
    for (int i = 0; i < c->nlazy; i++)
        if (strcmp(c->lazy[i]->tmpl.tenant, tenant) == 0)
            n += (int64_t)ctld_range_count(&c->lazy[i]->r) * c->lazy[i]->spec_bytes;
    return n;
}

/* Marks the array holding id busy for the caller (waiting for another
 * writer first); NULL when id is no array's pending element any more. */
static ctld_lazy *claim(ctld *c, int64_t array, int64_t id)
{
    pthread_mutex_lock(&c->mu);
    ctld_lazy *a;
    for (;;) {
        a = lazy_of(c, array);
        if (!a || (id > 0 && !ctld_range_has(&a->r, (int)(id - a->id)))) {
            a = NULL;
            break;
        }
        if (!a->busy) {
            a->busy = true;
            break;
        }
        ctld_phase_wait_until(c, ctld_now() + 0.05); /* another taker of its elements */
    }
    pthread_mutex_unlock(&c->mu);
    return a;
}

/* Stores elements idx[0..k) of a (busy, claimed by the caller) as new rows
 * in `state` and, for pending ones, adds them as jobs; then, under mu,
 * takes them from the range (dropping the array once none is left) and
 * releases the claim unless keep. *gone_out (if not NULL): the array
 * was dropped (a is freed). */
static int store_elements(ctld *c, ctld_lazy *a, const int *idx, int k, int state, bool keep,
                          bool *gone_out, ts_err *err)
{
    ts_job_row *rows = calloc((size_t)k + 1, sizeof *rows);
    bool *ex = calloc((size_t)k + 1, sizeof *ex);
    int rc = rows && ex ? 0 : ts_err_set(err, TS_ENOMEM, "out of memory");
    /* what the range will be once they are taken (the claim keeps it ours) */
    ctld_range after = a->r;
    after.taken = NULL;
    after.cap = 0;
    after.ntaken = 0;
    if (rc == 0 && a->r.ntaken > 0) {
        after.taken = malloc((size_t)a->r.ntaken * sizeof *after.taken);
        if (after.taken) {
            memcpy(after.taken, a->r.taken, (size_t)a->r.ntaken * sizeof *after.taken);
            after.ntaken = after.cap = a->r.ntaken;
        } else {
            rc = ts_err_set(err, TS_ENOMEM, "out of memory");
        }
    }
    double now = ctld_now();
    for (int i = 0; rc == 0 && i < k; i++) {
        element_row(a, idx[i], &rows[i]);
        rows[i].state = state;
        if (state == TS_JOB_CANCELLED) /* as a cancelled pending job reads */
            rows[i].end_s = now;
        if (ctld_range_take(&after, idx[i]) != 0)
            rc = ts_err_set(err, TS_ENOMEM, "out of memory");
    }
    ts_array_row ar = {.id = a->id, .size = a->r.size, .next = after.next,
                       .open = ctld_range_count(&after) > 0};
    if (rc == 0)
        rc = ts_store_array_insert(c->store, rows, k, ex, &ar, err);
    bool stored = rc == 0;
    ctld_range_fini(&after);
    if (stored && state == TS_JOB_PENDING) {
        /* the rows share the template's spec: each job gets its own copy */
        for (int i = 0; i < k; i++)
            rows[i].spec_json = NULL;
        for (int i = 0; rc == 0 && i < k; i++)
            if (!(rows[i].spec_json = strdup(a->tmpl.spec_json)))
                rc = ts_err_set(err, TS_ENOMEM, "out of memory");
        /* parsed once for all its elements (a's own reference; the claim
         * keeps a, and the share is set only here) */
        if (rc == 0 && !a->share) {
            ctld_spec_share *sh = calloc(1, sizeof *sh);
            ts_spec_errors se;
            if (sh && ts_spec_parse(a->tmpl.spec_json, strlen(a->tmpl.spec_json), &sh->spec,
                                    &se) == 0) {
                atomic_init(&sh->refs, 1);
                a->share = sh;
            } else {
                free(sh); /* each job parses its own */
            }
        }
        int added = 0;
        if (rc == 0)
            rc = ctld_jobs_adopt(c, rows, k, a->share, &added, err);
        for (int i = added; i < k; i++)
            free(rows[i].spec_json);
    }
    pthread_mutex_lock(&c->mu);
    /* stored (even if not all loaded: those come back at a restart) */
    for (int i = 0; stored && i < k; i++)
        if (ctld_range_has(&a->r, idx[i]) && ctld_range_take(&a->r, idx[i]) != 0 && rc == 0)
            rc = ts_err_set(err, TS_ENOMEM, "out of memory");
    bool gone = ctld_range_count(&a->r) == 0;
    if (!keep || gone || rc != 0)
        a->busy = false;
    if (gone)
        lazy_remove(c, a);
    if (gone_out)
        *gone_out = gone;
    ctld_phase_moved(c);
    pthread_mutex_unlock(&c->mu);
    free(rows);
    free(ex);
    return rc;
}

int ctld_array_take(ctld *c, int64_t id, ts_err *err)
{
    pthread_mutex_lock(&c->mu);
    ctld_lazy *a = lazy_of(c, id);
    int64_t array = a ? a->id : 0;
    pthread_mutex_unlock(&c->mu);
    if (!array || !(a = claim(c, array, id)))
        return 0;
    int idx = (int)(id - a->id);
    return store_elements(c, a, &idx, 1, TS_JOB_PENDING, false, NULL, err);
}

int ctld_array_cancel_rest(ctld *c, int64_t array, int *cancelled, ts_err *err)
{
    ctld_lazy *a = claim(c, array, 0);
    if (!a)
        return 0;
    int *idx = malloc(CANCEL_CHUNK_ROWS * sizeof *idx);
    if (!idx) {
        pthread_mutex_lock(&c->mu);
        a->busy = false;
        pthread_mutex_unlock(&c->mu);
        return ts_err_set(err, TS_ENOMEM, "out of memory");
    }
    int rc = 0;
    for (bool more = true; rc == 0 && more;) {
        pthread_mutex_lock(&c->mu); /* the claim keeps a: read under mu all the same */
        int k = ctld_range_lowest(&a->r, CANCEL_CHUNK_ROWS, idx);
        more = ctld_range_count(&a->r) > k;
        pthread_mutex_unlock(&c->mu);
        if (k == 0)
            break;
        rc = store_elements(c, a, idx, k, TS_JOB_CANCELLED, more, NULL, err);
        if (rc == 0)
            *cancelled += k;
    }
    free(idx);
    if (rc == 0) {
        pthread_mutex_lock(&c->mu);
        c->m.cancelled += (uint64_t)*cancelled;
        pthread_mutex_unlock(&c->mu);
    }
    return rc;
}

/* How many more of a's elements the cycle should have as jobs (under mu):
 * its window (or throttle, if smaller) less those already waiting. The
 * window doubles when the cycle started every element it was given (a large
 * idle cluster drains the array as fast as without the laziness) and halves
 * while most of them still wait, down to CTLD_ARRAY_WINDOW. */
static int wanted(ctld *c, ctld_lazy *a)
{
    int have = 0;
    int span = 2 * a->window;
    int lo = a->r.next > span ? a->r.next - span : 0;
    for (int i = lo; i < a->r.next; i++) {
        const cjob *j = ctld_job_find(c, a->id + i);
        have += j && j->row.state == TS_JOB_PENDING;
    }
    for (int t = 0; t < a->r.ntaken; t++) {
        const cjob *j = ctld_job_find(c, a->id + a->r.taken[t]);
        have += j && j->row.state == TS_JOB_PENDING;
    }
    if (have == 0 && a->window < CTLD_ARRAY_WINDOW_MAX)
        a->window *= 2;
    else if (have > a->window / 2 && a->window > CTLD_ARRAY_WINDOW)
        a->window /= 2;
    int want = a->throttle > 0 && a->throttle < a->window ? a->throttle : a->window;
    return want - have;
}

void ctld_arrays_fill(ctld *c)
{
    int *idx = malloc(CTLD_ARRAY_WINDOW_MAX * sizeof *idx);
    for (int i = 0; idx; i++) {
        pthread_mutex_lock(&c->mu);
        if (i >= c->nlazy) {
            pthread_mutex_unlock(&c->mu);
            break;
        }
        ctld_lazy *a = c->lazy[i];
        int k = a->busy ? 0 : wanted(c, a);
        if (k > 0) {
            k = ctld_range_lowest(&a->r, k, idx);
            a->busy = true;
        }
        pthread_mutex_unlock(&c->mu);
        if (k <= 0)
            continue;
        ts_err e;
        bool gone = false;
        int64_t id = a->id;
        if (store_elements(c, a, idx, k, TS_JOB_PENDING, false, &gone, &e) != 0)
            fprintf(stderr, "tesserad: array %lld: its next elements not added: %s; trying "
                    "again next cycle\n", (long long)id, e.msg);
        if (gone)
            i--; /* the next array moved into its place */
    }
    free(idx);
}

/* a's elements at or above next that have rows already (taken out of turn
 * before a restart): the store's jobs with ids in that part of its range. */
static int restore_taken(ctld *c, ctld_lazy *a, ts_err *err)
{
    ts_job_filter f = {0};
    int64_t after = a->id + a->r.next - 1, end = a->id + a->r.size;
    for (;;) {
        ts_job_row *rows = NULL;
        int n = 0;
        int rc = ts_store_job_list(c->store, &f, after, 1000, &rows, &n, err);
        if (rc != 0)
            return rc;
        bool past = n < 1000;
        for (int i = 0; rc == 0 && i < n; i++) {
            after = rows[i].id;
            if (rows[i].id >= end) {
                past = true;
                break;
            }
            int idx = (int)(rows[i].id - a->id);
            if (ctld_range_has(&a->r, idx) && ctld_range_take(&a->r, idx) != 0)
                rc = ts_err_set(err, TS_ENOMEM, "out of memory");
        }
        ts_store_free_jobs(rows, n);
        if (rc != 0 || past)
            return rc;
    }
}

int ctld_arrays_restore(ctld *c, ts_err *err)
{
    ts_array_row *v = NULL;
    int n = 0;
    int rc = ts_store_arrays_open(c->store, &v, &n, err);
    for (int i = 0; rc == 0 && i < n; i++) {
        ts_job_row first;
        int grc = ts_store_job_get(c->store, v[i].id, &first, err);
        if (grc == TS_ENOENT) {
            fprintf(stderr, "tesserad: array %lld: its first element is not stored; its "
                    "pending elements are left out\n", (long long)v[i].id);
            continue;
        }
        if (grc != 0) {
            rc = grc;
            break;
        }
        ts_job_spec *spec = NULL;
        ts_spec_errors se;
        int throttle = 0;
        if (ts_spec_parse(first.spec_json, strlen(first.spec_json), &spec, &se) == 0)
            throttle = spec->array_throttle;
        ts_spec_free(spec);
        ctld_lazy *a = ctld_lazy_new(&first, v[i].size, v[i].next, throttle);
        ts_job_row_fini(&first);
        if (!a) {
            rc = ts_err_set(err, TS_ENOMEM, "out of memory");
            break;
        }
        rc = restore_taken(c, a, err);
        if (rc == 0 && ctld_range_count(&a->r) == 0) {
            /* every element has its row: the array's row is closed */
            ts_array_row ar = {.id = a->id, .size = a->r.size, .next = a->r.size};
            rc = ts_store_array_insert(c->store, NULL, 0, NULL, &ar, err);
            lazy_free(a);
            continue;
        }
        if (rc != 0)
            lazy_free(a);
        else if (ctld_lazy_add(c, a) != 0)
            rc = ts_err_set(err, TS_ENOMEM, "out of memory");
    }
    free(v);
    return rc;
}

json_t *ctld_arrays_render(ctld *c, const char *tenant, const char *owner)
{
    json_t *out = json_array();
    for (int i = 0; out && i < c->nlazy; i++) {
        const ctld_lazy *a = c->lazy[i];
        if ((tenant && strcmp(tenant, a->tmpl.tenant) != 0) ||
            (owner && strcmp(owner, a->tmpl.owner) != 0))
            continue;
        char text[128];
        ctld_range_text(&a->r, text, sizeof text);
        json_array_append_new(
            out, json_pack("{s:I,s:s,s:s,s:s,s:s,s:i,s:i,s:s,s:i,s:f}", "array",
                           (json_int_t)a->id, "tenant", a->tmpl.tenant, "owner", a->tmpl.owner,
                           "name", a->tmpl.name, "state", "pending", "pending",
                           ctld_range_count(&a->r), "size", a->r.size, "indices", text, "gpus",
                           a->tmpl.gpus, "submit_time", a->tmpl.submit_s));
    }
    return out;
}
