/*
 * depend.c - job dependencies in tesserad (depend.h; the syntax is
 * tessera/depend.h, the rules docs/job-spec.md "dependency").
 *
 * Each cycle, before the core sees the queue, every pending job whose
 * dependency has not held yet is decided here from the named jobs' states:
 * active jobs from memory, ended jobs from the store, read first with the
 * controller's lock released (deps_prefetch), once each (an ended
 * job's outcome never changes, so it is cached in a small id -> state
 * table for the controller's life). Once a dependency holds it stays met
 * (j->dep_met; as Slurm, which then forgets it): a job that depended on
 * another's start does not stop waiting-and-starting again if that job is
 * requeued. After a restart dep_met is false again and the dependency is
 * decided anew from the store's rows. A dependency that can never hold
 * fails the job through the state machine with the reason in its event.
 * An array's id (its first element's) stands for every element, as in
 * Slurm: the elements are F..F+n-1, read one by one. Cycles are
 * impossible: the API accepts only ids of jobs that exist at submission,
 * which are all earlier than the new job (an array's elements all exist
 * once its first does).
 */
#include "ctld/depend.h"
#include "ctld/http.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tessera/depend.h"

#define WHY_MAX 384       /* the why of a waiting job, "and N more" past it */
#define GONE (-2)         /* a job the store no longer has */

/* A job's outcome as the dependency pass reads it: its state (GONE: the
 * store has no such job; -1: the store failed) and the elements of the
 * array it is the first of (1: none). */
typedef struct dep_entry {
    int64_t id;
    int32_t span;
    int8_t state;
} dep_entry;

/* Outcomes of ended jobs by id, open addressing (id 0 = empty). */
typedef struct dep_cache {
    dep_entry *e;
    int n, cap;
} dep_cache;

static uint64_t hash_id(int64_t id) { return (uint64_t)id * 0x9e3779b97f4a7c15ULL; }

/* The slot of id, or -1. */
static int cache_find(dep_cache *k, int64_t id)
{
    if (!k->cap)
        return -1;
    for (uint64_t h = hash_id(id) % (uint64_t)k->cap;; h = (h + 1) % (uint64_t)k->cap) {
        if (k->e[h].id == id)
            return (int)h;
        if (k->e[h].id == 0)
            return -1;
    }
}

static void cache_put(dep_cache *k, const dep_entry *in)
{
    if ((k->n + 1) * 2 > k->cap) {
        int cap = k->cap ? k->cap * 2 : 256;
        dep_entry *e = calloc((size_t)cap, sizeof *e);
        if (!e)
            return; /* not cached: asked again next time */
        for (int i = 0; i < k->cap; i++) {
            if (!k->e[i].id)
                continue;
            uint64_t h = hash_id(k->e[i].id) % (uint64_t)cap;
            while (e[h].id)
                h = (h + 1) % (uint64_t)cap;
            e[h] = k->e[i];
        }
        free(k->e);
        k->e = e;
        k->cap = cap;
    }
    uint64_t h = hash_id(in->id) % (uint64_t)k->cap;
    while (k->e[h].id && k->e[h].id != in->id)
        h = (h + 1) % (uint64_t)k->cap;
    if (!k->e[h].id)
        k->n++;
    k->e[h] = *in;
}

void ctld_deps_free(ctld *c)
{
    dep_cache *k = c->deps;
    if (!k)
        return;
    free(k->e);
    free(k);
    c->deps = NULL;
}

int ctld_dep_array_span(const ts_job_row *row)
{
    size_t n = strlen(row->name);
    if (n < 3 || strcmp(row->name + n - 3, "[0]") != 0 || !row->spec_json)
        return 1;
    ts_job_spec *spec = NULL;
    ts_spec_errors se;
    if (ts_spec_parse(row->spec_json, strlen(row->spec_json), &spec, &se) != 0)
        return 1;
    int span = spec->array_size > 1 ? spec->array_size : 1;
    ts_spec_free(spec);
    return span;
}

/* The state of job id: active from memory, else the store's (cached);
 * GONE when the store has no such job, -1 when the store failed. span (if
 * not NULL) gets the elements of the array it is the first of, else 1. */
static int job_state_span(ctld *c, int64_t id, int *span)
{
    const cjob *a = ctld_job_find(c, id);
    if (a) {
        if (span)
            *span = ctld_array_index(a) == 0 ? a->spec->array_size : 1;
        return a->row.state;
    }
    if (ctld_array_lazy(c, id)) { /* a large array's element, not a job yet */
        if (span)
            *span = 1;
        return TS_JOB_PENDING;
    }
    if (!c->deps && !(c->deps = calloc(1, sizeof(dep_cache))))
        return -1;
    dep_cache *k = c->deps;
    int hit = cache_find(k, id);
    if (hit >= 0) {
        if (span)
            *span = k->e[hit].span;
        return k->e[hit].state;
    }
    ts_job_row row;
    ts_err e;
    int rc = ts_store_job_get(c->store, id, &row, &e);
    int st, sp = 1;
    if (rc == TS_ENOENT) {
        st = GONE;
    } else if (rc != 0) {
        fprintf(stderr, "tesserad: dependency on job %lld: %s; deciding next cycle\n",
                (long long)id, e.msg);
        return -1;
    } else {
        st = row.state;
        sp = ctld_dep_array_span(&row);
        ts_job_row_fini(&row);
    }
    /* a job not active in memory has ended: its outcome is final */
    if (st == GONE || ts_job_state_terminal(st))
        cache_put(k, &(dep_entry){.id = id, .span = sp, .state = (int8_t)st});
    if (span)
        *span = sp;
    return st;
}

static int job_state(ctld *c, int64_t id) { return job_state_span(c, id, NULL); }

/* ---- prefetch: the store read with mu released ---------------------------------- */

#define PREFETCH_MAX 4096 /* ids read per round; the rest are read in place */
#define PREFETCH_ROUNDS 3 /* an array's first element, then its others */

typedef struct prefetch {
    dep_entry *e;
    int n;
} prefetch;

/* Whether the state of job id would be read from the store. */
static bool needs_store(ctld *c, int64_t id)
{
    return id > 0 && !ctld_job_find(c, id) && !ctld_array_lazy(c, id) &&
           (!c->deps || cache_find(c->deps, id) < 0);
}

static void prefetch_add(prefetch *p, ctld *c, int64_t id)
{
    if (p->n < PREFETCH_MAX && needs_store(c, id))
        p->e[p->n++].id = id;
}

/* Under mu: the ids the waiting jobs name whose state only the store has,
 * with the elements of ended arrays whose first element is known. */
static void prefetch_collect(ctld *c, int n0, prefetch *p)
{
    for (int i = 0; i < n0 && p->n < PREFETCH_MAX; i++) {
        ctld_yield_some(c, i);
        const cjob *j = c->jobs[i];
        ts_dependency d;
        char why[64];
        if (!ctld_dep_waits(j) || j->pinned || ts_dep_parse(j->spec->dependency, &d, why,
                                                           sizeof why) != 0)
            continue;
        for (int k = 0; k < d.n; k++) {
            int64_t id = d.items[k].job;
            if (d.items[k].type == TS_DEP_SINGLETON)
                continue;
            prefetch_add(p, c, id);
            dep_cache *kc = c->deps;
            int hit = kc ? cache_find(kc, id) : -1;
            for (int e = 1; hit >= 0 && e < kc->e[hit].span; e++)
                prefetch_add(p, c, id + e);
        }
    }
}

static int cmp_id(const void *a, const void *b)
{
    int64_t x = ((const dep_entry *)a)->id, y = ((const dep_entry *)b)->id;
    return (x > y) - (x < y);
}

/* Reads the ended jobs the waiting jobs depend on from the store with mu
 * released, into the cache, so the pass below reads the store under mu
 * only for what did not fit (more than PREFETCH_MAX ids). Only in the
 * cycle: jobs do not leave while it runs, and an ended job's outcome is
 * final, so what is read stays true. */
static void deps_prefetch(ctld *c, int n0)
{
    if (!c->cycling || (!c->deps && !(c->deps = calloc(1, sizeof(dep_cache)))))
        return;
    prefetch p = {.e = malloc(PREFETCH_MAX * sizeof *p.e)};
    for (int round = 0; p.e && round < PREFETCH_ROUNDS; round++) {
        p.n = 0;
        prefetch_collect(c, n0, &p);
        if (p.n == 0)
            break;
        qsort(p.e, (size_t)p.n, sizeof *p.e, cmp_id);
        int u = 0;
        for (int i = 0; i < p.n; i++)
            if (u == 0 || p.e[u - 1].id != p.e[i].id)
                p.e[u++] = p.e[i];
        p.n = u;
        pthread_mutex_unlock(&c->mu);
        for (int i = 0; i < p.n; i++) {
            ts_job_row row;
            ts_err e;
            int rc = ts_store_job_get(c->store, p.e[i].id, &row, &e);
            p.e[i].state = rc == TS_ENOENT ? GONE : rc != 0 ? -1 : (int8_t)row.state;
            p.e[i].span = 1;
            if (rc == 0) {
                p.e[i].span = ctld_dep_array_span(&row);
                ts_job_row_fini(&row);
            }
        }
        ctld_lock_reader(c);
        for (int i = 0; i < p.n; i++) /* ended: final; the rest is read again in place */
            if (p.e[i].state == GONE ||
                (p.e[i].state >= 0 && ts_job_state_terminal(p.e[i].state)))
                cache_put(c->deps, &p.e[i]);
    }
    free(p.e);
}

/* ---- singleton: the earliest active job per (name, owner) ------------------- */

typedef struct first_map {
    const cjob **v; /* slot -> the earliest active job of its (name, owner) */
    int cap;
} first_map;

static uint64_t hash_str(uint64_t h, const char *s)
{
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 0x100000001b3ULL;
    return h * 0x100000001b3ULL;
}

static uint64_t hash_key(const cjob *j)
{
    return hash_str(hash_str(0xcbf29ce484222325ULL, j->row.name), j->row.owner);
}

static bool same_key(const cjob *a, const cjob *b)
{
    return strcmp(a->row.name, b->row.name) == 0 && strcmp(a->row.owner, b->row.owner) == 0;
}

static const cjob **first_slot(first_map *m, const cjob *j)
{
    uint64_t h = hash_key(j) % (uint64_t)m->cap;
    while (m->v[h] && !same_key(m->v[h], j))
        h = (h + 1) % (uint64_t)m->cap;
    return &m->v[h];
}

static int first_build(ctld *c, first_map *m, int n)
{
    m->cap = n * 2 + 1;
    if (!(m->v = calloc((size_t)m->cap, sizeof *m->v)))
        return TS_ENOMEM;
    for (int i = 0; i < n; i++) {
        const cjob *j = c->jobs[i];
        const cjob **s = first_slot(m, j);
        if (!*s || j->row.id < (*s)->row.id)
            *s = j;
    }
    return 0;
}

/* ---- one job's verdict --------------------------------------------------------- */

enum { MET, WAIT, NEVER, UNKNOWN };

static const char *wanted(int type)
{
    switch (type) {
    case TS_DEP_AFTER:
        return "to start";
    case TS_DEP_AFTERANY:
        return "to end";
    case TS_DEP_AFTEROK:
        return "to end ok";
    default:
        return "to fail or be cancelled";
    }
}

static int item_verdict(int type, int st)
{
    if (st == GONE) /* its outcome is unknown: only "started" and "ended" hold */
        return type == TS_DEP_AFTER || type == TS_DEP_AFTERANY ? MET : NEVER;
    bool ended = ts_job_state_terminal(st);
    switch (type) {
    case TS_DEP_AFTER:
        return st == TS_JOB_PENDING || st == TS_JOB_HELD ? WAIT : MET;
    case TS_DEP_AFTERANY:
        return ended ? MET : WAIT;
    case TS_DEP_AFTEROK:
        return !ended ? WAIT : st == TS_JOB_COMPLETED ? MET : NEVER;
    default: /* afternotok */
        return !ended ? WAIT : st == TS_JOB_COMPLETED ? NEVER : MET;
    }
}

static void appendf(char *buf, size_t size, int *shown, int *more, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void appendf(char *buf, size_t size, int *shown, int *more, const char *fmt, ...)
{
    size_t used = strlen(buf);
    char one[192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(one, sizeof one, fmt, ap);
    va_end(ap);
    if (used + strlen(one) + 24 >= size) {
        (*more)++;
        return;
    }
    snprintf(buf + used, size - used, "%s%s", *shown ? ", " : "", one);
    (*shown)++;
}

/* One item's verdict. An array's id stands for every element (as Slurm's
 * array job id does): after, afterany and afterok hold once they hold for
 * each element, and never once one element never will; afternotok holds
 * once every element ended and one of them did not end ok. */
typedef struct item_result {
    int v;       /* MET, WAIT, NEVER or UNKNOWN (the store failed) */
    int span;    /* the elements the id stands for; 1: a job of its own */
    int64_t job; /* the job shown: the id, or the element that decided never */
    int st;      /* its state */
    int left;    /* an array: the elements it still waits for */
} item_result;

/* One cycle's walks of the arrays waiting jobs name. A dependency may name
 * a large array many times over (its text allows ~580 repeats of a 6-digit
 * id) and many jobs may name the same array: without it each naming walked
 * every element, every cycle, with the lock held. Direct-mapped on the id
 * (a collision only costs a second walk); id 0 is no job, so an empty
 * slot. A state that changes at a yield within the cycle is seen next
 * cycle (a stale answer only delays: MET and NEVER are final). */
#define MEMO_SLOTS 1024
typedef struct dep_memo {
    int64_t sig_id[MEMO_SLOTS];
    uint64_t sig[MEMO_SLOTS];
    int64_t res_id[MEMO_SLOTS];
    int res_type[MEMO_SLOTS];
    item_result res[MEMO_SLOTS];
} dep_memo;

static size_t memo_slot(int64_t id)
{
    return (size_t)((uint64_t)id * 0x9e3779b97f4a7c15ULL >> 54); /* 10 bits: MEMO_SLOTS */
}

static void item_eval_walk(ctld *c, const ts_dep_item *it, item_result *r);

/* item_eval_walk, an array's verdict taken from memo when it has it */
static void item_eval(ctld *c, const ts_dep_item *it, item_result *r, dep_memo *memo)
{
    size_t k = memo_slot(it->job);
    if (memo && memo->res_id[k] == it->job && memo->res_type[k] == it->type) {
        *r = memo->res[k];
        return;
    }
    item_eval_walk(c, it, r);
    if (memo && r->span > 1 && r->v != UNKNOWN) {
        memo->res_id[k] = it->job;
        memo->res_type[k] = it->type;
        memo->res[k] = *r;
    }
}

static void item_eval_walk(ctld *c, const ts_dep_item *it, item_result *r)
{
    int span = 1;
    int st = job_state_span(c, it->job, &span);
    *r = (item_result){.v = UNKNOWN, .span = span, .job = it->job, .st = st};
    if (st == -1)
        return;
    if (span <= 1) {
        r->v = item_verdict(it->type, st);
        return;
    }
    int met = 0, ended = 0, never = 0;
    for (int k = 0; k < span; k++) {
        int s = k == 0 ? st : job_state(c, it->job + k);
        if (s == -1)
            return;
        int v = item_verdict(it->type, s);
        met += v == MET;
        ended += s == GONE || ts_job_state_terminal(s);
        if (v == NEVER && it->type != TS_DEP_AFTERNOTOK && never++ == 0) {
            r->job = it->job + k;
            r->st = s;
        }
    }
    if (it->type == TS_DEP_AFTERNOTOK) {
        r->left = span - ended;
        r->v = ended < span ? WAIT : met > 0 ? MET : NEVER;
    } else {
        r->left = span - met;
        r->v = never ? NEVER : met == span ? MET : WAIT;
    }
}

static const char *state_text(int st)
{
    return st == GONE ? "gone from the store" : ts_job_state_name(st);
}

/* MET, WAIT (why filled), NEVER (why filled) or UNKNOWN (the store failed). */
static int verdict(ctld *c, const cjob *j, const ts_dependency *d, first_map *first,
                   dep_memo *memo, char *why, size_t size)
{
    char waits[WHY_MAX] = "", nevers[WHY_MAX] = "";
    int nw = 0, mw = 0, nn = 0, mn = 0, met = 0, never = 0;
    for (int i = 0; i < d->n; i++) {
        const ts_dep_item *it = &d->items[i];
        if (it->type == TS_DEP_SINGLETON) {
            const cjob *f = first->v ? *first_slot(first, j) : NULL;
            if (f && f->row.id < j->row.id) {
                appendf(waits, sizeof waits, &nw, &mw,
                        "job %lld (%s, an earlier job named %s of the same owner) to end",
                        (long long)f->row.id, ts_job_state_name(f->row.state), j->row.name);
            } else {
                met++;
            }
            continue;
        }
        item_result r;
        item_eval(c, it, &r, memo);
        const char *type = ts_dep_type_name(it->type);
        if (r.v == UNKNOWN)
            return UNKNOWN;
        if (r.v == MET) {
            met++;
            continue;
        }
        if (r.v == WAIT && r.span > 1)
            appendf(waits, sizeof waits, &nw, &mw, "array %lld (%d of its %d elements) %s",
                    (long long)it->job, r.left, r.span, wanted(it->type));
        else if (r.v == WAIT)
            appendf(waits, sizeof waits, &nw, &mw, "job %lld (%s) %s", (long long)it->job,
                    state_text(r.st), wanted(it->type));
        else if (r.span > 1 && it->type == TS_DEP_AFTERNOTOK)
            appendf(nevers, sizeof nevers, &nn, &mn, "every element of array %lld completed "
                    "(%s:%lld)", (long long)it->job, type, (long long)it->job);
        else if (r.span > 1)
            appendf(nevers, sizeof nevers, &nn, &mn, "job %lld %s, element %lld of array %lld "
                    "(%s:%lld)", (long long)r.job, state_text(r.st),
                    (long long)(r.job - it->job), (long long)it->job, type, (long long)it->job);
        else
            appendf(nevers, sizeof nevers, &nn, &mn, "job %lld %s (%s:%lld)", (long long)it->job,
                    state_text(r.st), type, (long long)it->job);
        never += r.v == NEVER;
    }
    char more[32] = "";
    if (d->any ? met > 0 : met == d->n)
        return MET;
    if (d->any ? never == d->n : never > 0) {
        if (mn)
            snprintf(more, sizeof more, " and %d more", mn);
        snprintf(why, size, "dependency can never be met: %s%s", nevers, more);
        return NEVER;
    }
    if (mw)
        snprintf(more, sizeof more, " and %d more", mw);
    snprintf(why, size, "waits for %s%s%s", d->any && nw + mw > 1 ? "any of " : "", waits, more);
    return WAIT;
}

/* The states of every element of the array whose first element is id (its
 * state st0, span elements) in one number; 0 when one is unknown */
static uint64_t array_states(ctld *c, int64_t id, int st0, int span, dep_memo *memo)
{
    size_t slot = memo_slot(id);
    if (memo && memo->sig_id[slot] == id)
        return memo->sig[slot];
    uint64_t h = 0xcbf29ce484222325ULL;
    for (int k = 0; k < span; k++) {
        int st = k == 0 ? st0 : job_state(c, id + k);
        if (st == -1)
            return 0;
        h = (h ^ (uint64_t)(st + 3)) * 0x100000001b3ULL;
    }
    h |= 1;
    if (memo) {
        memo->sig_id[slot] = id;
        memo->sig[slot] = h;
    }
    return h;
}

/* The states of the jobs d names (every element of an array it names, and
 * the earlier singleton job): while it is the same as when j last waited,
 * j still waits for the same reason and nothing needs writing. 0 when a
 * state is unknown (the store failed). */
static uint64_t signature(ctld *c, const cjob *j, const ts_dependency *d, first_map *first,
                          dep_memo *memo)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (int i = 0; i < d->n; i++) {
        if (d->items[i].type == TS_DEP_SINGLETON) {
            const cjob *f = first->v ? *first_slot(first, j) : NULL;
            int64_t v = f ? f->row.id * 8 + f->row.state : 0;
            h = (h ^ (uint64_t)v) * 0x100000001b3ULL;
            continue;
        }
        int span = 1;
        int st = job_state_span(c, d->items[i].job, &span);
        if (st == -1)
            return 0;
        uint64_t v = span > 1 ? array_states(c, d->items[i].job, st, span, memo)
                              : (uint64_t)(st + 3);
        if (v == 0)
            return 0;
        h = (h ^ v) * 0x100000001b3ULL;
    }
    return h | 1;
}

static int set_why(cjob *j, const char *why)
{
    snprintf(j->row.reason, sizeof j->row.reason, "%s", ts_pending_name(TS_PEND_DEPENDENCY));
    if (j->row.why && strcmp(j->row.why, why) == 0)
        return 0;
    char *w = strdup(why);
    if (!w)
        return TS_ENOMEM;
    free(j->row.why);
    j->row.why = w;
    return 0;
}

bool ctld_dep_waits(const cjob *j)
{
    return j->has_dep && !j->dep_met && j->row.state == TS_JOB_PENDING;
}

int ctld_deps_plan(ctld *c, double now, ctld_txn *t, ts_err *err)
{
    first_map first = {0};
    dep_memo *memo = NULL; /* made at the first waiting job */
    bool singleton = false;
    /* the jobs there are now: a submission let in at a yield is appended
     * after them and decided next cycle, against a table that has it (a
     * singleton decided against a table built before it came would run
     * beside its namesake) */
    int n0 = c->njobs;
    for (int i = 0; i < n0 && !singleton; i++) {
        ctld_yield_some(c, i);
        singleton = ctld_dep_waits(c->jobs[i]) && strstr(c->jobs[i]->spec->dependency,
                                                         "singleton") != NULL;
    }
    if (singleton && first_build(c, &first, n0) != 0)
        return ts_err_set(err, TS_ENOMEM, "out of memory");
    ctld_test_pause(c);
    deps_prefetch(c, n0);
    int rc = 0;
    for (int i = 0; rc == 0 && i < n0; i++) {
        ctld_yield_some(c, i); /* readers and submissions go on; no job leaves meanwhile */
        cjob *j = c->jobs[i];
        if (!ctld_dep_waits(j) || j->pinned)
            continue;
        ts_dependency d;
        char why[WHY_MAX + 64];
        if (ts_dep_parse(j->spec->dependency, &d, why, sizeof why) != 0) {
            /* stored by an older parser: it can never be decided */
            char tmp[WHY_MAX + 64];
            snprintf(tmp, sizeof tmp, "dependency \"%.64s\" is not valid: %.200s",
                     j->spec->dependency, why);
            snprintf(why, sizeof why, "%s", tmp);
        } else {
            /* most waiting jobs wait for the same as last cycle: no strings */
            if (!memo && !(memo = calloc(1, sizeof *memo))) {
                rc = ts_err_set(err, TS_ENOMEM, "out of memory");
                break;
            }
            uint64_t sig = signature(c, j, &d, &first, memo);
            if (sig == 0)
                continue; /* the store failed: decided again next cycle */
            if (sig == j->dep_sig)
                continue;
            int v = verdict(c, j, &d, &first, memo, why, sizeof why);
            if (v == UNKNOWN)
                continue;
            if (v == MET) {
                j->dep_met = true;
                continue;
            }
            if (v == WAIT) {
                rc = set_why(j, why);
                j->dep_sig = rc == 0 ? sig : 0;
                continue;
            }
        }
        j->dep_sig = 0;
        rc = set_why(j, why);
        ctld_fsm_args a = {.detail = why};
        if (rc == 0)
            rc = ctld_fsm_plan(c, t, j, CTLD_JE_DEPFAIL, &a, now, err);
        if (rc == TS_ECONFLICT) /* memory disagrees about it: the next cycle */
            rc = 0;
        if (rc == TS_ENOMEM)
            ts_err_set(err, TS_ENOMEM, "out of memory");
    }
    free(first.v);
    free(memo);
    return rc;
}
