/*
 * store_usage.c - rolled-up accounting: GPU-seconds by tenant, tier and GPU
 * model over any window [from, to) without reading the events.
 *
 * A closed run (a job's own run once its row has an end, or a run a
 * "run-ended" event records) is written once, in the transaction that
 * closes it, to usage_runs, and added to buckets (usage_buckets) per group:
 * the GPU-seconds inside each hour, day and 32 days it overlaps, and for
 * hours the GPUs carried in (runs that started before the hour and had not
 * ended before it began). A window then reads
 *
 *   sum of the buckets from the hour of `from` up to the hour of `to`
 *     (32-day buckets in the middle, days and hours towards the edges)
 *   - P(hour of from, from) + P(hour of to, to)
 *
 * where P(H, a), the usage in [H, a) inside hour H, is exact from that
 * hour's buckets and the runs that start or end in [H, a):
 *
 *   P(H, a) = carried(H) (a - H) + sum_starts g (a - s) - sum_ends g (a - e)
 *
 * Runs longer than LONG_RUN_S are not bucketed (they would touch too many
 * hours when they close); they are few and clipped to the window directly.
 * Jobs still running are read from the jobs table (they are few), at the
 * caller's now. The answer is the one ts_store_usage_scan computes from every
 * job and event, up to rounding and groups whose sum is zero.
 */
#include "store/store_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Widths of the buckets, each a multiple of the one before: an hour, a day,
 * 32 days. A run adds to the buckets of every width it overlaps; a window
 * sums the widest buckets inside it and narrower ones towards its edges. */
#define BUCKET_S 3600.0
static const double WIDTHS_S[] = {BUCKET_S, 86400.0, 32 * 86400.0};
#define WIDTHS ((int)(sizeof WIDTHS_S / sizeof WIDTHS_S[0]))
/* Runs longer than this are kept out of the buckets (at most this many
 * hours of buckets are touched when a run closes). */
#define LONG_RUN_S (7 * 86400.0)
/* A group whose GPU-seconds are smaller than this is left out (sums of
 * added and removed runs come back to zero only up to rounding). */
#define ZERO_GPU_S 1e-6

const char *const TS_RU_SHAPES[TS_RU_STMTS][2] = {
    [TS_RU_RUN_OF_JOB] = {"j", "titrrrtrrr"},
    [TS_RU_RUN_DEL] = {"j", ""},
    [TS_RU_RUN_ADD] = {"jtim0123", ""},
    [TS_RU_BUCKET_ADD] = {"tim0123", ""},
    [TS_RU_BUCKETS] = {"012", "titr"},
    [TS_RU_HOUR_AT] = {"01", "titrr"},
    [TS_RU_POINTS] = {"01", "titr"},
    [TS_RU_LONG] = {"01", "titr"},
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

static bool run_counts(const ru_run *r)
{
    return r->gpus != 0 && isfinite(r->start_s) && isfinite(r->end_s) && r->end_s > r->start_s;
}

/* Adds (sign 1) or takes away (sign -1) a closed run's buckets and record. */
static int run_apply(const struct ts_store_ops *o, void *conn, int64_t job, bool whole,
                     const ru_run *r, double sign, ts_err *err)
{
    if (!run_counts(r))
        return 0;
    bool bucketed = r->end_s - r->start_s <= LONG_RUN_S;
    ts_ru_args a = {.job = job, .tenant = r->tenant, .tier = r->tier, .model = r->model};
    int rc;
    if (sign > 0) {
        a.d[0] = r->gpus;
        a.d[1] = r->start_s;
        a.d[2] = r->end_s;
        a.d[3] = (whole ? 1 : 0) + (bucketed ? 2 : 0);
        rc = o->rollup(conn, TS_RU_RUN_ADD, &a, NULL, NULL, err);
    } else {
        rc = o->rollup(conn, TS_RU_RUN_DEL, &a, NULL, NULL, err);
    }
    if (rc || !bucketed)
        return rc;
    for (int w = 0; w < WIDTHS; w++) {
        double width = WIDTHS_S[w];
        for (double h = floor(r->start_s / width) * width; rc == 0 && h <= r->end_s;
             h += width) {
            double lo = r->start_s > h ? r->start_s : h;
            double hi = r->end_s < h + width ? r->end_s : h + width;
            /* GPUs carried in: kept for hours only (the edges are hours) */
            double carried = w == 0 && r->start_s < h ? r->gpus : 0;
            if (hi <= lo && carried == 0)
                continue;
            a.d[0] = h;
            a.d[1] = sign * r->gpus * (hi > lo ? hi - lo : 0);
            a.d[2] = sign * carried;
            a.d[3] = width;
            rc = o->rollup(conn, TS_RU_BUCKET_ADD, &a, NULL, NULL, err);
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

int ts_store_rollup_job(const struct ts_store_ops *o, void *conn, int64_t job_id, ts_err *err)
{
    ts_ru_row row;
    memset(&row, 0, sizeof row);
    row.i = -1;
    ts_ru_args a = {.job = job_id};
    int rc = o->rollup(conn, TS_RU_RUN_OF_JOB, &a, job_row, &row, err);
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
    if (was.gpus != 0 && (rc = run_apply(o, conn, job_id, true, &was, -1, err)))
        return rc;
    return run_apply(o, conn, job_id, true, &now, 1, err);
}

/* The run a "run-ended" event's detail (ctld_run_detail) describes. */
static bool parse_run_ended(const char *detail, double *s, double *e, int *g, char *model,
                            int *tier)
{
    return detail &&
           sscanf(detail, "start=%lf end=%lf gpus=%d model=%63s tier=%d", s, e, g, model, tier) ==
               5;
}

int ts_store_rollup_event(const struct ts_store_ops *o, void *conn, const ts_event_row *ev,
                          ts_err *err)
{
    double s, e;
    int g, tier;
    char model[TS_STORE_NAME_MAX];
    if (strcmp(ev->kind, "run-ended") != 0 || ev->job_id <= 0 ||
        !parse_run_ended(ev->detail, &s, &e, &g, model, &tier))
        return 0;
    ts_ru_row row;
    memset(&row, 0, sizeof row);
    row.i = -1;
    ts_ru_args a = {.job = ev->job_id};
    int rc = o->rollup(conn, TS_RU_RUN_OF_JOB, &a, job_row, &row, err);
    if (rc || row.i < 0)
        return rc;
    ru_run r = {row.text[0], tier, model, g, s, e};
    return run_apply(o, conn, ev->job_id, false, &r, 1, err);
}

/* ---- migration ---- */

typedef struct backfill {
    const struct ts_store_ops *o;
    void *conn;
} backfill;

static int backfill_job(void *ctx, const ts_ru_row *row, ts_err *err)
{
    backfill *b = ctx;
    ru_run r = {row->text[0], (int)row->i, row->text[1], row->v[0], row->v[1], row->v[2]};
    return run_apply(b->o, b->conn, (int64_t)row->v[3], true, &r, 1, err);
}

static int backfill_event(void *ctx, const ts_ru_row *row, ts_err *err)
{
    backfill *b = ctx;
    double s, e;
    int g, tier;
    char model[TS_STORE_NAME_MAX];
    if (!parse_run_ended(row->text[1], &s, &e, &g, model, &tier))
        return 0;
    ru_run r = {row->text[0], tier, model, g, s, e};
    return run_apply(b->o, b->conn, (int64_t)row->v[0], false, &r, 1, err);
}

int ts_store_rollup_backfill(const struct ts_store_ops *o, void *conn, ts_err *err)
{
    backfill b = {o, conn};
    ts_ru_args none = {0};
    int rc = o->rollup(conn, TS_RU_OLD_JOBS, &none, backfill_job, &b, err);
    return rc ? rc : o->rollup(conn, TS_RU_OLD_RUNS, &none, backfill_event, &b, err);
}

/* ---- the answer ---- */

typedef struct acc {
    ts_usage_row *rows;
    int n, cap;
    double scale; /* what each row's value is multiplied by */
    double offset_from; /* TS_RU_HOUR_AT: P(H, a) = carried (a - H) */
} acc;

static int acc_add(acc *x, const ts_ru_row *row, double v, ts_err *err)
{
    if (v == 0)
        return 0;
    ts_usage_row *u = ts_store_grow((void **)&x->rows, x->n, &x->cap, sizeof *x->rows);
    if (!u)
        return ts_err_set(err, TS_ENOMEM, "store: out of memory computing usage");
    memset(u, 0, sizeof *u);
    ts_store_copy_field(u->tenant, sizeof u->tenant, row->text[0], strlen(row->text[0]));
    u->tier = (int)row->i;
    ts_store_copy_field(u->gpu_model, sizeof u->gpu_model, row->text[1], strlen(row->text[1]));
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

/* Adds sign * P(h, a) by group. */
static int partial(const struct ts_store_ops *o, void *conn, double h, double a, double sign,
                   acc *x, ts_err *err)
{
    if (a <= h)
        return 0;
    ts_ru_args at = {.d = {BUCKET_S, h}}, q = {.d = {h, a}};
    x->scale = sign;
    x->offset_from = a - h;
    int rc = o->rollup(conn, TS_RU_HOUR_AT, &at, acc_carried, x, err);
    return rc ? rc : o->rollup(conn, TS_RU_POINTS, &q, acc_sum, x, err);
}

/* Adds the buckets that tile [lo, hi) (both on hour boundaries): the widest
 * that fit in the middle, narrower ones (width index below w) at the sides. */
static int cover(const struct ts_store_ops *o, void *conn, double lo, double hi, int w, acc *x,
                 ts_err *err)
{
    if (lo >= hi)
        return 0;
    double width = WIDTHS_S[w];
    double a = ceil(lo / width) * width, b = floor(hi / width) * width;
    if (w == 0 || a < b) {
        if (w == 0) {
            a = lo;
            b = hi;
        }
        ts_ru_args q = {.d = {width, a, b}};
        x->scale = 1;
        int rc = o->rollup(conn, TS_RU_BUCKETS, &q, acc_sum, x, err);
        if (rc || w == 0)
            return rc;
        rc = cover(o, conn, lo, a, w - 1, x, err);
        return rc ? rc : cover(o, conn, b, hi, w - 1, x, err);
    }
    return cover(o, conn, lo, hi, w - 1, x, err);
}

int ts_store_rollup_usage(const struct ts_store_ops *o, void *conn, double from_s, double to_s,
                          double now_s, ts_usage_row **rows, int *n, ts_err *err)
{
    acc x = {.scale = 1};
    double hf = floor(from_s / BUCKET_S) * BUCKET_S, ht = floor(to_s / BUCKET_S) * BUCKET_S;
    ts_ru_args window = {.d = {from_s, to_s, now_s}}, none = {0};
    /* one snapshot: a run that closes meanwhile is counted once, as running
     * or as closed, never both or neither */
    int rc = o->rollup(conn, TS_RU_READ_BEGIN, &none, NULL, NULL, err);
    if (rc)
        return rc;
    rc = cover(o, conn, hf, ht, WIDTHS - 1, &x, err);
    if (rc == 0)
        rc = partial(o, conn, hf, from_s, -1, &x, err);
    if (rc == 0)
        rc = partial(o, conn, ht, to_s, 1, &x, err);
    x.scale = 1;
    if (rc == 0)
        rc = o->rollup(conn, TS_RU_LONG, &window, acc_sum, &x, err);
    if (rc == 0)
        rc = o->rollup(conn, TS_RU_RUNNING, &window, acc_sum, &x, err);
    ts_err end_err;
    int end = o->rollup(conn, TS_RU_READ_END, &none, NULL, NULL, &end_err);
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
