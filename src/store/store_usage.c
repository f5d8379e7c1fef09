/*
 * store_usage.c - rolled-up accounting: GPU-seconds by tenant, tier and GPU
 * model over any window [from, to) without reading the events.
 *
 * A closed run (a job's own run once its row has an end, or a run a
 * "run-ended" event records) is written once, in the transaction that
 * closes it, to usage_runs, and added to buckets (usage_buckets) per group:
 * the GPU-seconds inside each bucket it overlaps, and for its edge buckets
 * the GPUs carried in (runs that started before the bucket and had not ended
 * before it began). A run up to LONG_RUN_S long is "short": its buckets are
 * hours, days and 32 days, its edges hours. A longer one is "long": days and
 * 32 days, edges days, so closing it touches at most a few hundred buckets
 * however long it ran. For each span (short, long) a window reads
 *
 *   sum of the buckets from the edge bucket of `from` to that of `to`
 *     (the widest that fit in the middle, narrower ones towards the edges)
 *   - P(edge of from, from) + P(edge of to, to)
 *
 * where P(E, a), the usage in [E, a) inside edge bucket E, is exact from its
 * carried GPUs and the runs that start or end in [E, a):
 *
 *   P(E, a) = carried(E) (a - E) + sum_starts g (a - s) - sum_ends g (a - e)
 *
 * Jobs still running are read from the jobs table (they are few), at the
 * caller's now; all of it in one read snapshot. The answer is the one
 * ts_store_usage_scan computes from every job and event, up to rounding and
 * groups whose sum is zero.
 */
#include "store/store_internal.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tessera/grow.h"

#define HOUR_S 3600.0
#define DAY_S 86400.0
/* Runs longer than this are "long": bucketed by days, not hours. */
#define LONG_RUN_S (7 * DAY_S)
/* A group whose GPU-seconds are smaller than this is left out (sums of
 * added and removed runs come back to zero only up to rounding). */
#define ZERO_GPU_S 1e-6

/* SQLite page cache while the migration fills (negative: KiB), and the
 * library's default it goes back to. */
#define BACKFILL_CACHE_KIB "-262144"
#define SQLITE_CACHE_DEFAULT_KIB "-2000"

enum { SPAN_SHORT = 0, SPAN_LONG = 1, SPANS = 2 };
/* Bucket widths per span, narrowest (the edge) first, each a multiple of
 * the one before. */
#define WIDTHS_MAX 3
static const double WIDTHS_S[SPANS][WIDTHS_MAX] = {{HOUR_S, DAY_S, 32 * DAY_S},
                                                   {DAY_S, 32 * DAY_S, 0}};
static const int WIDTHS[SPANS] = {3, 2};

const char *const TS_RU_SHAPES[TS_RU_STMTS][2] = {
    [TS_RU_RUN_OF_JOB] = {"j", "titrrrtrrr"},
    [TS_RU_RUN_DEL] = {"j", ""},
    [TS_RU_RUN_ADD] = {"jtim0123", ""},
    [TS_RU_BUCKET_ADD] = {"stim0123", ""},
    [TS_RU_BUCKETS] = {"s012", "titr"},
    [TS_RU_EDGE_AT] = {"s01", "titrr"},
    [TS_RU_POINTS] = {"s01", "titr"},
    [TS_RU_RUNNING] = {"012", "titr"},
    [TS_RU_OLD_JOBS] = {"", "titrrrr"},
    [TS_RU_OLD_RUNS] = {"", "ttr"},
    [TS_RU_READ_BEGIN] = {"", ""},
    [TS_RU_READ_END] = {"", ""},
};

typedef struct ru_run {
    const char *tenant;
    int tier;
    const char *model;
    double gpus, start_s, end_s;
} ru_run;

/* ---- the migration's buckets, summed in memory ---- */

/* Backfilling millions of runs one bucket upsert at a time costs minutes;
 * the migration sums them here first and writes each bucket once. */
typedef struct agg_slot {
    int64_t start;  /* bucket start, whole seconds (widths are whole) */
    uint32_t group; /* 1 + index in groups; 0: empty slot */
    uint8_t span, width;
    double gpu_s, carried;
} agg_slot;

typedef struct agg {
    agg_slot *slot;
    size_t cap, n;  /* cap: a power of two */
    char (*groups)[3 * TS_STORE_NAME_MAX];
    int ngroups, gcap;
    int last_group; /* runs come in runs of the same group often enough */
} agg;

/* "tenant\ttier\tmodel" of a run, interned. */
static int agg_group(agg *g, const ru_run *r)
{
    char key[3 * TS_STORE_NAME_MAX];
    snprintf(key, sizeof key, "%s\t%d\t%s", r->tenant, r->tier, r->model);
    if (g->last_group >= 0 && strcmp(g->groups[g->last_group], key) == 0)
        return g->last_group;
    for (int i = 0; i < g->ngroups; i++)
        if (strcmp(g->groups[i], key) == 0)
            return g->last_group = i;
    if (ts_grow((void **)&g->groups, &g->gcap, g->ngroups + 1, 64, sizeof *g->groups) != 0)
        return -1;
    memcpy(g->groups[g->ngroups], key, sizeof key);
    return g->last_group = g->ngroups++;
}

static size_t agg_hash(int64_t start, uint32_t group, int span, int width)
{
    uint64_t h = (uint64_t)start * 0x9e3779b97f4a7c15ull;
    h ^= ((uint64_t)group << 8 | (uint64_t)span << 4 | (uint64_t)width) * 0xc2b2ae3d27d4eb4full;
    return (size_t)(h ^ (h >> 29));
}

static agg_slot *agg_find(agg *g, int64_t start, uint32_t group, int span, int width)
{
    size_t i = agg_hash(start, group, span, width) & (g->cap - 1);
    for (;; i = (i + 1) & (g->cap - 1)) {
        agg_slot *x = &g->slot[i];
        if (!x->group || (x->start == start && x->group == group && x->span == span &&
                          x->width == width))
            return x;
    }
}

static bool agg_grow(agg *g)
{
    agg old = *g;
    size_t cap = old.cap ? 2 * old.cap : 1u << 16;
    g->slot = calloc(cap, sizeof *g->slot);
    if (!g->slot) {
        g->slot = old.slot;
        return false;
    }
    g->cap = cap;
    for (size_t i = 0; i < old.cap; i++)
        if (old.slot[i].group)
            *agg_find(g, old.slot[i].start, old.slot[i].group, old.slot[i].span,
                      old.slot[i].width) = old.slot[i];
    free(old.slot);
    return true;
}

static int agg_add(agg *g, int gid, int span, int width, double start, double gpu_s,
                   double carried, ts_err *err)
{
    if ((g->n + 1) * 2 > g->cap && !agg_grow(g))
        return ts_err_set(err, TS_ENOMEM, "store: out of memory rolling up usage");
    agg_slot *x = agg_find(g, (int64_t)start, (uint32_t)gid + 1, span, width);
    if (!x->group) {
        *x = (agg_slot){(int64_t)start, (uint32_t)gid + 1, (uint8_t)span, (uint8_t)width, 0, 0};
        g->n++;
    }
    x->gpu_s += gpu_s;
    x->carried += carried;
    return 0;
}

static int slot_cmp(const void *pa, const void *pb)
{
    const agg_slot *a = pa, *b = pb;
    if (a->span != b->span)
        return a->span < b->span ? -1 : 1;
    if (a->width != b->width)
        return a->width < b->width ? -1 : 1;
    if (a->start != b->start)
        return a->start < b->start ? -1 : 1;
    return (a->group > b->group) - (a->group < b->group);
}

/* Writes every summed bucket, in the table's key order (inserts that land
 * next to each other instead of all over the table). */
static int agg_flush(store_conn *conn, agg *g, ts_err *err)
{
    size_t n = 0;
    for (size_t i = 0; i < g->cap; i++)
        if (g->slot[i].group)
            g->slot[n++] = g->slot[i];
    if (n > 1)
        qsort(g->slot, n, sizeof *g->slot, slot_cmp);
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        const agg_slot *x = &g->slot[i];
        char key[3 * TS_STORE_NAME_MAX], *tab1, *tab2;
        memcpy(key, g->groups[x->group - 1], sizeof key);
        if (!(tab1 = strchr(key, '\t')) || !(tab2 = strchr(tab1 + 1, '\t')))
            continue;
        *tab1 = *tab2 = '\0';
        ts_ru_args a = {.span = x->span,
                        .tenant = key,
                        .tier = atoi(tab1 + 1),
                        .model = tab2 + 1,
                        .d = {(double)x->start, x->gpu_s, x->carried,
                              WIDTHS_S[x->span][x->width]}};
        rc = store_rollup(conn, TS_RU_BUCKET_ADD, &a, NULL, NULL, err);
    }
    return rc;
}

/* ---- recording runs ---- */

static bool run_counts(const ru_run *r)
{
    return r->gpus != 0 && isfinite(r->start_s) && isfinite(r->end_s) && r->end_s > r->start_s;
}

/* Adds (sign 1) or takes away (sign -1) a closed run's buckets and record;
 * with g (the migration), its buckets are summed there instead. */
static int run_apply(store_conn *conn, int64_t job, bool whole,
                     const ru_run *r, double sign, agg *g, ts_err *err)
{
    if (!run_counts(r))
        return 0;
    int span = r->end_s - r->start_s <= LONG_RUN_S ? SPAN_SHORT : SPAN_LONG;
    ts_ru_args a = {.job = job, .span = span, .tenant = r->tenant, .tier = r->tier,
                    .model = r->model};
    int rc;
    if (sign > 0) {
        a.d[0] = r->gpus;
        a.d[1] = r->start_s;
        a.d[2] = r->end_s;
        a.d[3] = (whole ? 1 : 0) + 2 * span;
        rc = store_rollup(conn, TS_RU_RUN_ADD, &a, NULL, NULL, err);
    } else {
        rc = store_rollup(conn, TS_RU_RUN_DEL, &a, NULL, NULL, err);
    }
    int gid = g && rc == 0 ? agg_group(g, r) : 0;
    if (gid < 0)
        rc = ts_err_set(err, TS_ENOMEM, "store: out of memory rolling up usage");
    for (int w = 0; rc == 0 && w < WIDTHS[span]; w++) {
        double width = WIDTHS_S[span][w];
        for (double h = floor(r->start_s / width) * width; rc == 0 && h <= r->end_s;
             h += width) {
            double lo = r->start_s > h ? r->start_s : h;
            double hi = r->end_s < h + width ? r->end_s : h + width;
            /* GPUs carried in: for edge buckets only */
            double carried = w == 0 && r->start_s < h ? r->gpus : 0;
            if (hi <= lo && carried == 0)
                continue;
            double gpu_s = sign * r->gpus * (hi > lo ? hi - lo : 0);
            if (g) {
                rc = agg_add(g, gid, span, w, h, gpu_s, sign * carried, err);
                continue;
            }
            a.d[0] = h;
            a.d[1] = gpu_s;
            a.d[2] = sign * carried;
            a.d[3] = width;
            rc = store_rollup(conn, TS_RU_BUCKET_ADD, &a, NULL, NULL, err);
        }
    }
    return rc;
}

static int job_row(void *ctx, const ts_ru_row *row, ts_err *err)
{
    (void)err;
    *(ts_ru_row *)ctx = *row;
    return 0;
}

int store_rollup_job(store_conn *conn, int64_t job_id, ts_err *err)
{
    ts_ru_row row;
    memset(&row, 0, sizeof row);
    row.i = -1;
    ts_ru_args a = {.job = job_id};
    int rc = store_rollup(conn, TS_RU_RUN_OF_JOB, &a, job_row, &row, err);
    if (rc || row.i < 0)
        return rc;
    /* the row's run: only one that has ended is rolled up */
    ru_run now = {row.text[0], (int)row.i, row.text[1], row.v[0], row.v[1], row.v[2]};
    if (!(now.start_s > 0 && now.end_s > 0))
        now.gpus = 0;
    ru_run was = {row.text[0], (int)row.i, row.text[2], row.v[3], row.v[4], row.v[5]};
    if (now.gpus == was.gpus && now.start_s == was.start_s && now.end_s == was.end_s &&
        strcmp(now.model, was.model) == 0)
        return 0;
    if (was.gpus != 0 && (rc = run_apply(conn, job_id, true, &was, -1, NULL, err)))
        return rc;
    return run_apply(conn, job_id, true, &now, 1, NULL, err);
}

/* The run a "run-ended" event's detail (ctld_run_detail) describes. */
static bool run_detail(const char *detail, ts_run_ended *out)
{
    return detail && sscanf(detail, "start=%lf end=%lf gpus=%d model=%63s tier=%d",
                            &out->start_s, &out->end_s, &out->gpus, out->gpu_model,
                            &out->tier) == 5;
}

bool ts_run_ended_parse(const ts_event_row *ev, ts_run_ended *out)
{
    return strcmp(ev->kind, "run-ended") == 0 && run_detail(ev->detail, out);
}

int store_rollup_event(store_conn *conn, const ts_event_row *ev,
                          ts_err *err)
{
    ts_run_ended run;
    if (ev->job_id <= 0 || !ts_run_ended_parse(ev, &run))
        return 0;
    ts_ru_row row;
    memset(&row, 0, sizeof row);
    row.i = -1;
    ts_ru_args a = {.job = ev->job_id};
    int rc = store_rollup(conn, TS_RU_RUN_OF_JOB, &a, job_row, &row, err);
    if (rc || row.i < 0)
        return rc;
    ru_run r = {row.text[0], run.tier, run.gpu_model, run.gpus, run.start_s, run.end_s};
    return run_apply(conn, ev->job_id, false, &r, 1, NULL, err);
}

/* ---- migration ---- */

typedef struct backfill {
    store_conn *conn;
    agg sums;
} backfill;

static int backfill_job(void *ctx, const ts_ru_row *row, ts_err *err)
{
    backfill *b = ctx;
    ru_run r = {row->text[0], (int)row->i, row->text[1], row->v[0], row->v[1], row->v[2]};
    return run_apply(b->conn, (int64_t)row->v[3], true, &r, 1, &b->sums, err);
}

static int backfill_event(void *ctx, const ts_ru_row *row, ts_err *err)
{
    backfill *b = ctx;
    ts_run_ended run;
    if (!run_detail(row->text[1], &run)) /* the query took run-ended events only */
        return 0;
    ru_run r = {row->text[0], run.tier, run.gpu_model, run.gpus, run.start_s, run.end_s};
    return run_apply(b->conn, (int64_t)row->v[0], false, &r, 1, &b->sums, err);
}

int store_rollup_backfill(store_conn *conn, ts_err *err)
{
    backfill b = {conn, {.last_group = -1}};
    ts_ru_args none = {0};
    /* SQLite: a page cache for the migration's one big transaction (its
     * default of 2 MB spills it to the log and reads it back) */
    bool sqlite = conn->be->dialect == STORE_SQLITE;
    int rc = sqlite ? store_exec(conn, "PRAGMA cache_size = " BACKFILL_CACHE_KIB, err) : 0;
    if (rc == 0)
        rc = store_rollup(conn, TS_RU_OLD_JOBS, &none, backfill_job, &b, err);
    if (rc == 0)
        rc = store_rollup(conn, TS_RU_OLD_RUNS, &none, backfill_event, &b, err);
    if (rc == 0)
        rc = agg_flush(conn, &b.sums, err);
    if (rc == 0 && sqlite)
        rc = store_exec(conn, "PRAGMA cache_size = " SQLITE_CACHE_DEFAULT_KIB, err);
    free(b.sums.slot);
    free(b.sums.groups);
    return rc;
}

/* ---- the answer ---- */

typedef struct acc {
    ts_usage_row *rows;
    int n, cap;
    double scale; /* what each row's value is multiplied by */
    double offset_from; /* TS_RU_EDGE_AT: P(E, a) = carried (a - E) */
} acc;

static int acc_add(acc *x, const ts_ru_row *row, double v, ts_err *err)
{
    if (v == 0)
        return 0;
    ts_usage_row *u = store_grow((void **)&x->rows, x->n, &x->cap, sizeof *x->rows);
    if (!u)
        return ts_err_set(err, TS_ENOMEM, "store: out of memory computing usage");
    memset(u, 0, sizeof *u);
    store_copy_field(u->tenant, sizeof u->tenant, row->text[0], strlen(row->text[0]));
    u->tier = (int)row->i;
    store_copy_field(u->gpu_model, sizeof u->gpu_model, row->text[1], strlen(row->text[1]));
    u->gpu_s = v;
    x->n++;
    return 0;
}

static int acc_sum(void *ctx, const ts_ru_row *row, ts_err *err)
{
    acc *x = ctx;
    return acc_add(x, row, x->scale * row->v[0], err);
}

static int acc_carried(void *ctx, const ts_ru_row *row, ts_err *err)
{
    acc *x = ctx;
    return acc_add(x, row, x->scale * row->v[1] * x->offset_from, err);
}

static int group_cmp(const void *pa, const void *pb)
{
    const ts_usage_row *a = pa, *b = pb;
    int c = strcmp(a->tenant, b->tenant);
    if (c == 0)
        c = (a->tier > b->tier) - (a->tier < b->tier);
    return c ? c : strcmp(a->gpu_model, b->gpu_model);
}

/* Adds sign * P(e, a) by group, e an edge bucket of the span. */
static int partial(store_conn *conn, int span, double e, double a,
                   double sign, acc *x, ts_err *err)
{
    if (a <= e)
        return 0;
    ts_ru_args at = {.span = span, .d = {WIDTHS_S[span][0], e}}, q = {.span = span, .d = {e, a}};
    x->scale = sign;
    x->offset_from = a - e;
    int rc = store_rollup(conn, TS_RU_EDGE_AT, &at, acc_carried, x, err);
    return rc ? rc : store_rollup(conn, TS_RU_POINTS, &q, acc_sum, x, err);
}

/* Adds the span's buckets that tile [lo, hi) (both on edge boundaries): the
 * widest that fit in the middle, narrower ones (width index below w) at the
 * sides. */
static int cover(store_conn *conn, int span, double lo, double hi, int w,
                 acc *x, ts_err *err)
{
    if (lo >= hi)
        return 0;
    double width = WIDTHS_S[span][w];
    double a = w ? ceil(lo / width) * width : lo, b = w ? floor(hi / width) * width : hi;
    if (a >= b)
        return cover(conn, span, lo, hi, w - 1, x, err);
    ts_ru_args q = {.span = span, .d = {width, a, b}};
    x->scale = 1;
    int rc = store_rollup(conn, TS_RU_BUCKETS, &q, acc_sum, x, err);
    if (rc == 0 && w > 0)
        rc = cover(conn, span, lo, a, w - 1, x, err);
    if (rc == 0 && w > 0)
        rc = cover(conn, span, b, hi, w - 1, x, err);
    return rc;
}

int store_rollup_usage(store_conn *conn, double from_s, double to_s,
                          double now_s, ts_usage_row **rows, int *n, ts_err *err)
{
    acc x = {.scale = 1};
    ts_ru_args window = {.d = {from_s, to_s, now_s}}, none = {0};
    /* one snapshot: a run that closes meanwhile is counted once, as running
     * or as closed, never both or neither */
    int rc = store_rollup(conn, TS_RU_READ_BEGIN, &none, NULL, NULL, err);
    if (rc)
        return rc;
    for (int span = 0; rc == 0 && span < SPANS; span++) {
        double edge = WIDTHS_S[span][0];
        double ef = floor(from_s / edge) * edge, et = floor(to_s / edge) * edge;
        rc = cover(conn, span, ef, et, WIDTHS[span] - 1, &x, err);
        if (rc == 0)
            rc = partial(conn, span, ef, from_s, -1, &x, err);
        if (rc == 0)
            rc = partial(conn, span, et, to_s, 1, &x, err);
    }
    x.scale = 1;
    if (rc == 0)
        rc = store_rollup(conn, TS_RU_RUNNING, &window, acc_sum, &x, err);
    ts_err end_err;
    int end = store_rollup(conn, TS_RU_READ_END, &none, NULL, NULL, &end_err);
    if (rc == 0 && end) {
        rc = end;
        if (err)
            *err = end_err;
    }
    if (rc) {
        free(x.rows);
        return rc;
    }
    /* one row per group, in the full scan's order */
    if (x.n > 1)
        qsort(x.rows, (size_t)x.n, sizeof *x.rows, group_cmp);
    int m = 0;
    for (int i = 0; i < x.n;) {
        int j = i;
        double sum = 0;
        for (; j < x.n && group_cmp(&x.rows[i], &x.rows[j]) == 0; j++)
            sum += x.rows[j].gpu_s;
        if (fabs(sum) >= ZERO_GPU_S) {
            x.rows[m] = x.rows[i];
            x.rows[m++].gpu_s = sum;
        }
        i = j;
    }
    if (m == 0) {
        free(x.rows);
        x.rows = NULL;
    }
    *rows = x.rows;
    *n = m;
    return 0;
}
