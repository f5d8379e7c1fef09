/*
 * pollux_model.c - the Pollux simulator's job model (see pollux_model.h):
 * profiles read from memory, step time by placement and per-GPU batch size,
 * the efficiency gain of a batch size from the gradient statistics, and one
 * job advanced through time. The arithmetic follows the artifact's order of
 * operations so that a replay through it gives the same seconds.
 */
#include "replay/pollux_model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/csv_reader.h"
#include "tessera/grow.h"

#define ROW_MAX 512
#define FIELDS_MAX 8
#define BSZ_EPS 1e-8 /* tolerance of the artifact's ceil() of a batch share */
#define SPREAD_NODES_MAX 16 /* the artifact clamps the node count it interpolates at */

typedef struct prow {
    char pid[TS_PM_NODES_MAX + 1]; /* GPUs per node, one digit each */
    int local_bsz;
    double step, sync;
} prow;

typedef struct trow {
    int nodes, replicas, local_bsz;
    double step, sync;
} trow;

typedef struct vcurve {
    int bsz, n;
    double *progress, *sqr, *var;
} vcurve;

struct ts_pm_app {
    char name[TS_PM_APP_NAME_MAX];
    int epochs, max_local_cfg;
    prow *p;
    int np;
    trow *scal;
    int nscal;
    trow *t; /* mean of the placements by (nodes, replicas, local_bsz) + scal, sorted */
    int nt;
    vcurve *v; /* sorted by bsz after finish */
    int nv;
    int init_bsz, max_bsz, min_local, max_local;
    double *epoch_prog; /* [0..epochs] */
};

static const struct {
    const char *name;
    int epochs, max_local;
} APP_DEFAULTS[] = {
    {"bert", 2, 0},      {"cifar10", 100, 0},     {"ncf", 10, 0},
    {"imagenet", 90, 0}, {"deepspeech2", 80, 0},  {"yolov3", 50, 8},
};

int ts_pm_app_defaults(const char *name, int *epochs, int *max_local_bsz)
{
    for (size_t i = 0; i < sizeof APP_DEFAULTS / sizeof APP_DEFAULTS[0]; i++)
        if (strcmp(APP_DEFAULTS[i].name, name) == 0) {
            *epochs = APP_DEFAULTS[i].epochs;
            *max_local_bsz = APP_DEFAULTS[i].max_local;
            return 0;
        }
    return TS_ENOENT;
}

int ts_pm_app_new(const char *name, int epochs, int max_local_bsz, ts_pm_app **out, ts_err *err)
{
    if (strlen(name) >= TS_PM_APP_NAME_MAX)
        return ts_err_set(err, TS_EINVAL, "application: name longer than %d bytes",
                          TS_PM_APP_NAME_MAX - 1);
    if (epochs < 1)
        return ts_err_set(err, TS_EINVAL, "%s: epochs: must be >= 1, got %d", name, epochs);
    ts_pm_app *a = calloc(1, sizeof *a);
    if (!a)
        return ts_err_set(err, TS_ENOMEM, "out of memory");
    strcpy(a->name, name);
    a->epochs = epochs;
    a->max_local_cfg = max_local_bsz;
    *out = a;
    return 0;
}

void ts_pm_app_free(ts_pm_app *a)
{
    if (!a)
        return;
    for (int i = 0; i < a->nv; i++) {
        free(a->v[i].progress);
        free(a->v[i].sqr);
        free(a->v[i].var);
    }
    free(a->v);
    free(a->p);
    free(a->scal);
    free(a->t);
    free(a->epoch_prog);
    free(a);
}

const char *replay_pm_app_name(const ts_pm_app *a) { return a->name; }
int replay_pm_app_init_bsz(const ts_pm_app *a) { return a->init_bsz; }
int replay_pm_app_max_bsz(const ts_pm_app *a) { return a->max_bsz; }
int replay_pm_app_epochs(const ts_pm_app *a) { return a->epochs; }
int replay_pm_app_min_local_bsz(const ts_pm_app *a) { return a->min_local; }
int replay_pm_app_max_local_bsz(const ts_pm_app *a) { return a->max_local; }

int replay_pm_app_max_gpus(const ts_pm_app *a, int cap)
{
    if (strcmp(a->name, "ncf") == 0)
        return 1; /* as the artifact: ncf never scales out */
    int g = a->max_bsz / a->min_local;
    return g < 1 ? 1 : g > cap ? cap : g;
}

/* Grows *arr (of *cap elements of size sz) to hold n + 1. */
static int grow(void **arr, int *cap, int n, size_t sz)
{
    return ts_grow(arr, cap, n + 1, 64, sz) != 0 ? -1 : 0;
}

/* Splits the next data row into want fields; 1 with a row, 0 at the end. */
static int next_row(ts_csv_lines *it, char *row, char **f, int want, ts_err *err)
{
    for (;;) {
        int rc = ts_csv_next(it, row, ROW_MAX, err);
        if (rc <= 0)
            return rc;
        if (it->line == 1 || row[0] == '\0')
            continue; /* the header, blank lines */
        int nf = ts_csv_split(row, f, FIELDS_MAX);
        if (nf != want)
            return ts_err_set(err, TS_EINVAL, "%s:%d: expected %d columns, got %d", it->fname,
                              it->line, want, nf);
        return 1;
    }
}

static int num(const ts_csv_lines *it, const char *col, const char *s, double lo, double hi,
               bool integer, double *out, ts_err *err)
{
    return ts_csv_number(it->fname, it->line, col, s, lo, hi, integer, out, err);
}

int ts_pm_app_add_placements(ts_pm_app *a, const char *buf, size_t len, const char *fname,
                             ts_err *err)
{
    ts_csv_lines it = {buf, fname, len, 0, 0};
    char row[ROW_MAX], *f[FIELDS_MAX];
    int cap = a->np, rc;
    while ((rc = next_row(&it, row, f, 4, err)) == 1) {
        size_t pl = strlen(f[0]);
        if (pl == 0 || pl > TS_PM_NODES_MAX || strspn(f[0], "1234") != pl)
            return ts_err_set(err, TS_EINVAL,
                              "%s:%d: placement: must be 1-%d digits 1-4 (GPUs per node), got \"%s\"",
                              fname, it.line, TS_PM_NODES_MAX, f[0]);
        double b, st, sy;
        if (num(&it, "local_bsz", f[1], 1, 1e9, true, &b, err) ||
            num(&it, "step_time", f[2], 0, 1e9, false, &st, err) ||
            num(&it, "sync_time", f[3], 0, 1e9, false, &sy, err))
            return TS_EINVAL;
        if (grow((void **)&a->p, &cap, a->np, sizeof *a->p))
            return ts_err_set(err, TS_ENOMEM, "out of memory");
        prow *p = &a->p[a->np++];
        memcpy(p->pid, f[0], pl + 1);
        p->local_bsz = (int)b;
        p->step = st;
        p->sync = sy;
    }
    return rc;
}

int ts_pm_app_add_scalability(ts_pm_app *a, const char *buf, size_t len, const char *fname,
                              ts_err *err)
{
    ts_csv_lines it = {buf, fname, len, 0, 0};
    char row[ROW_MAX], *f[FIELDS_MAX];
    int cap = a->nscal, rc;
    while ((rc = next_row(&it, row, f, 5, err)) == 1) {
        double n, r, b, st, sy;
        if (num(&it, "num_nodes", f[0], 1, 1e6, true, &n, err) ||
            num(&it, "num_replicas", f[1], n, 1e6, true, &r, err) ||
            num(&it, "local_bsz", f[2], 1, 1e9, true, &b, err) ||
            num(&it, "step_time", f[3], 0, 1e9, false, &st, err) ||
            num(&it, "sync_time", f[4], 0, 1e9, false, &sy, err))
            return TS_EINVAL;
        if (grow((void **)&a->scal, &cap, a->nscal, sizeof *a->scal))
            return ts_err_set(err, TS_ENOMEM, "out of memory");
        a->scal[a->nscal++] = (trow){(int)n, (int)r, (int)b, st, sy};
    }
    return rc;
}

int ts_pm_app_add_validation(ts_pm_app *a, int batch_size, const char *buf, size_t len,
                             const char *fname, ts_err *err)
{
    if (batch_size < 1)
        return ts_err_set(err, TS_EINVAL, "%s: batch size: must be >= 1, got %d", fname,
                          batch_size);
    for (int i = 0; i < a->nv; i++)
        if (a->v[i].bsz == batch_size)
            return ts_err_set(err, TS_EEXIST, "%s: batch size %d: given twice", fname, batch_size);
    vcurve *nv = realloc(a->v, (size_t)(a->nv + 1) * sizeof *nv);
    if (!nv)
        return ts_err_set(err, TS_ENOMEM, "out of memory");
    a->v = nv;
    vcurve *c = &a->v[a->nv++];
    memset(c, 0, sizeof *c);
    c->bsz = batch_size;
    ts_csv_lines it = {buf, fname, len, 0, 0};
    char row[ROW_MAX], *f[FIELDS_MAX];
    int cap = 0, cap2 = 0, cap3 = 0, rc;
    while ((rc = next_row(&it, row, f, 5, err)) == 1) {
        double pr, sq, va;
        if (num(&it, "progress", f[0], 0, 1e15, false, &pr, err) ||
            num(&it, "grad_sqr", f[3], 0, 1e300, false, &sq, err) ||
            num(&it, "grad_var", f[4], 0, 1e300, false, &va, err))
            return TS_EINVAL;
        if (grow((void **)&c->progress, &cap, c->n, sizeof(double)) ||
            grow((void **)&c->sqr, &cap2, c->n, sizeof(double)) ||
            grow((void **)&c->var, &cap3, c->n, sizeof(double)))
            return ts_err_set(err, TS_ENOMEM, "out of memory");
        c->progress[c->n] = pr;
        c->sqr[c->n] = sq;
        c->var[c->n] = va;
        c->n++;
    }
    return rc;
}

static int cmp_curve(const void *x, const void *y)
{
    const vcurve *a = x, *b = y;
    return (a->bsz > b->bsz) - (a->bsz < b->bsz);
}

static int cmp_trow(const void *x, const void *y)
{
    const trow *a = x, *b = y;
    if (a->nodes != b->nodes)
        return a->nodes < b->nodes ? -1 : 1;
    if (a->replicas != b->replicas)
        return a->replicas < b->replicas ? -1 : 1;
    return (a->local_bsz > b->local_bsz) - (a->local_bsz < b->local_bsz);
}

static int digit_sum(const char *pid)
{
    int s = 0;
    for (const char *c = pid; *c; c++)
        s += *c - '0';
    return s;
}

/* The table for placements not profiled: the profiles' mean by (nodes,
 * replicas, local_bsz), then scalability.csv, sorted. */
static int build_table(ts_pm_app *a, ts_err *err)
{
    a->t = malloc((size_t)(a->np + a->nscal) * sizeof *a->t);
    int *cnt = calloc((size_t)a->np + 1, sizeof *cnt);
    if (!a->t || !cnt) {
        free(cnt);
        return ts_err_set(err, TS_ENOMEM, "out of memory");
    }
    for (int i = 0; i < a->np; i++) {
        trow r = {(int)strlen(a->p[i].pid), digit_sum(a->p[i].pid), a->p[i].local_bsz,
                  a->p[i].step, a->p[i].sync};
        int k = 0;
        while (k < a->nt && cmp_trow(&a->t[k], &r) != 0)
            k++;
        if (k == a->nt)
            a->t[a->nt++] = (trow){r.nodes, r.replicas, r.local_bsz, 0, 0};
        a->t[k].step += r.step;
        a->t[k].sync += r.sync;
        cnt[k]++;
    }
    for (int k = 0; k < a->nt; k++) {
        a->t[k].step /= cnt[k];
        a->t[k].sync /= cnt[k];
    }
    free(cnt);
    for (int i = 0; i < a->nscal; i++)
        a->t[a->nt++] = a->scal[i];
    qsort(a->t, (size_t)a->nt, sizeof *a->t, cmp_trow);
    return 0;
}

int ts_pm_app_finish(ts_pm_app *a, ts_err *err)
{
    if (a->np == 0)
        return ts_err_set(err, TS_EINVAL, "%s: placements.csv: no rows", a->name);
    if (a->nv == 0)
        return ts_err_set(err, TS_EINVAL, "%s: no validation-<batch>.csv", a->name);
    qsort(a->v, (size_t)a->nv, sizeof *a->v, cmp_curve);
    for (int i = 0; i < a->nv; i++)
        if (a->v[i].n < a->epochs)
            return ts_err_set(err, TS_EINVAL,
                              "%s: validation-%d.csv: %d epochs needed, the file has %d rows",
                              a->name, a->v[i].bsz, a->epochs, a->v[i].n);
    a->init_bsz = a->v[0].bsz;
    a->max_bsz = a->v[a->nv - 1].bsz;
    a->min_local = a->max_local = a->p[0].local_bsz;
    for (int i = 1; i < a->np; i++) {
        if (a->p[i].local_bsz < a->min_local)
            a->min_local = a->p[i].local_bsz;
        if (a->p[i].local_bsz > a->max_local)
            a->max_local = a->p[i].local_bsz;
    }
    if (a->max_local_cfg > 0)
        a->max_local = a->max_local_cfg;
    a->epoch_prog = calloc((size_t)a->epochs + 1, sizeof(double));
    if (!a->epoch_prog)
        return ts_err_set(err, TS_ENOMEM, "out of memory");
    for (int e = 1; e <= a->epochs; e++) {
        double m = a->v[0].progress[e - 1];
        for (int i = 1; i < a->nv; i++)
            if (a->v[i].progress[e - 1] < m)
                m = a->v[i].progress[e - 1];
        a->epoch_prog[e] = m;
    }
    return build_table(a, err);
}

double replay_pm_epoch_progress(const ts_pm_app *a, int epoch)
{
    if (epoch <= 0)
        return 0.0;
    return a->epoch_prog[epoch > a->epochs ? a->epochs : epoch];
}

/* Linear in x between the two points around xq, as the artifact's 1-D
 * interpolator computes it (from the point below, the bracket found by the
 * first x >= xq); clamped outside [x0, xn-1]. x ascending, n >= 1. */
static void interp1(const int *x, const double *y0, const double *y1, int n, int xq, double *o0,
                    double *o1)
{
    if (n == 1 || xq < x[0]) {
        *o0 = y0[0];
        *o1 = y1[0];
        return;
    }
    if (xq > x[n - 1]) {
        *o0 = y0[n - 1];
        *o1 = y1[n - 1];
        return;
    }
    int i = 0;
    while (i < n && x[i] < xq)
        i++;
    if (i < 1)
        i = 1;
    if (i > n - 1)
        i = n - 1;
    int lo = i - 1;
    double dx = (double)(x[i] - x[lo]);
    double s0 = (y0[i] - y0[lo]) / dx, s1 = (y1[i] - y1[lo]) / dx;
    *o0 = s0 * (double)(xq - x[lo]) + y0[lo];
    *o1 = s1 * (double)(xq - x[lo]) + y1[lo];
}

/* 1-D over the table rows [k, k + m) (one (nodes, replicas)), by local_bsz. */
static void interp_rows(const trow *t, int m, int b, double *st, double *sy)
{
    int x[512];
    double y0[512], y1[512];
    if (m > 512)
        m = 512;
    for (int i = 0; i < m; i++) {
        x[i] = t[i].local_bsz;
        y0[i] = t[i].step;
        y1[i] = t[i].sync;
    }
    interp1(x, y0, y1, m, b, st, sy);
}

/* At a node count present in the table: linear in replicas between the
 * nearest replica counts it has (clamped). */
static void at_nodes(const ts_pm_app *a, int nodes, int r, int b, double *st, double *sy)
{
    int lo_k = -1, lo_m = 0, hi_k = -1, hi_m = 0;
    for (int k = 0; k < a->nt;) {
        int m = 1;
        while (k + m < a->nt && a->t[k + m].nodes == a->t[k].nodes &&
               a->t[k + m].replicas == a->t[k].replicas)
            m++;
        if (a->t[k].nodes == nodes) {
            if (a->t[k].replicas <= r) {
                lo_k = k;
                lo_m = m;
            }
            if (a->t[k].replicas >= r && hi_k < 0) {
                hi_k = k;
                hi_m = m;
            }
        }
        k += m;
    }
    if (lo_k < 0) {
        lo_k = hi_k;
        lo_m = hi_m;
    }
    if (hi_k < 0) {
        hi_k = lo_k;
        hi_m = lo_m;
    }
    double s0, y0, s1, y1;
    interp_rows(&a->t[lo_k], lo_m, b, &s0, &y0);
    if (hi_k == lo_k) {
        *st = s0;
        *sy = y0;
        return;
    }
    interp_rows(&a->t[hi_k], hi_m, b, &s1, &y1);
    double w = (double)(r - a->t[lo_k].replicas) / (a->t[hi_k].replicas - a->t[lo_k].replicas);
    *st = s0 + w * (s1 - s0);
    *sy = y0 + w * (y1 - y0);
}

static void spread_time(const ts_pm_app *a, int nodes, int r, int b, double *st, double *sy)
{
    if (nodes > SPREAD_NODES_MAX)
        nodes = SPREAD_NODES_MAX;
    int lo = -1, hi = -1;
    for (int k = 0; k < a->nt; k++) {
        int n = a->t[k].nodes;
        if (n <= nodes && n > lo)
            lo = n;
        if (n >= nodes && (hi < 0 || n < hi))
            hi = n;
    }
    if (lo < 0)
        lo = hi;
    if (hi < 0)
        hi = lo;
    double s0, y0, s1, y1;
    at_nodes(a, lo, r, b, &s0, &y0);
    if (hi == lo) {
        *st = s0;
        *sy = y0;
        return;
    }
    at_nodes(a, hi, r, b, &s1, &y1);
    double w = (double)(nodes - lo) / (hi - lo);
    *st = s0 + w * (s1 - s0);
    *sy = y0 + w * (y1 - y0);
}

void replay_pm_step_time(const ts_pm_app *a, const int *count, int n, int local_bsz,
                     double *step_s, double *sync_s)
{
    /* the placement as digits, zeros dropped, turned to its smallest rotation
     * (a ring of nodes reads the same from any of them) */
    char s[TS_PM_NODES_MAX + 1], best[TS_PM_NODES_MAX + 1], rot[TS_PM_NODES_MAX + 1];
    int m = 0, replicas = 0;
    for (int i = 0; i < n && m < TS_PM_NODES_MAX; i++)
        if (count[i] > 0) {
            s[m++] = (char)('0' + (count[i] > 9 ? 9 : count[i]));
            replicas += count[i];
        }
    s[m] = '\0';
    strcpy(best, s);
    for (int i = 1; i < m; i++) {
        memcpy(rot, s + i, (size_t)(m - i));
        memcpy(rot + m - i, s, (size_t)i);
        rot[m] = '\0';
        if (strcmp(rot, best) < 0)
            strcpy(best, rot);
    }
    int x[512];
    double y0[512], y1[512];
    int k = 0;
    for (int i = 0; i < a->np && k < 512; i++)
        if (strcmp(a->p[i].pid, best) == 0) {
            x[k] = a->p[i].local_bsz;
            y0[k] = a->p[i].step;
            y1[k] = a->p[i].sync;
            k++;
        }
    if (k > 0) {
        interp1(x, y0, y1, k, local_bsz, step_s, sync_s);
        return;
    }
    spread_time(a, m, replicas, local_bsz, step_s, sync_s);
}

void replay_pm_grad_stats(const ts_pm_app *a, int batch_size, int epoch, double *sqr, double *var)
{
    int lo = 0, hi = a->nv - 1;
    for (int i = 0; i < a->nv; i++) {
        if (a->v[i].bsz <= batch_size)
            lo = i;
        if (a->v[i].bsz >= batch_size) {
            hi = i;
            break;
        }
    }
    if (batch_size < a->v[0].bsz)
        hi = 0;
    const vcurve *l = &a->v[lo], *u = &a->v[hi];
    int el = epoch < l->n ? epoch : l->n - 1, eu = epoch < u->n ? epoch : u->n - 1;
    if (lo == hi || batch_size <= l->bsz || batch_size >= u->bsz) {
        const vcurve *c = batch_size >= u->bsz ? u : l;
        int e = c == u ? eu : el;
        *sqr = c->sqr[e];
        *var = c->var[e];
        return;
    }
    double wu = (double)(batch_size - l->bsz), wl = (double)(u->bsz - batch_size);
    double d = (double)(u->bsz - l->bsz);
    *sqr = (wu * u->sqr[eu] + wl * l->sqr[el]) / d;
    *var = (wu * u->var[eu] + wl * l->var[el]) / d;
}

double replay_pm_gain(const ts_pm_app *a, int batch_size, int epoch)
{
    double sqr, var;
    replay_pm_grad_stats(a, batch_size, epoch, &sqr, &var);
    double scale = (double)batch_size / (double)a->init_bsz;
    return (var + sqr) / (var / scale + sqr);
}

void replay_pm_job_init(ts_pm_job *j, const ts_pm_app *a, int submit_s, int batch_size)
{
    memset(j, 0, sizeof *j);
    j->app = a;
    j->submit_s = submit_s;
    j->batch_size = batch_size;
    j->restarts = -1;
    j->done_s = -1;
    j->c_nnodes = -1;
}

static int replicas_of(const ts_pm_job *j)
{
    int r = 0;
    for (int i = 0; i < j->nnodes; i++)
        r += j->count[i];
    return r;
}

/* Per-GPU batch and accumulation steps for the total batch on r GPUs (an
 * adapting job first takes the best batch for r at its epoch). */
static void update_local_bsz(ts_pm_job *j)
{
    const ts_pm_app *a = j->app;
    int r = replicas_of(j);
    if (r == 0)
        return;
    int best = 0;
    if (j->adapt && replay_pm_goodput_best(j->adapt, r, j->epoch, &best) > 0 && best > 0)
        j->batch_size = best;
    int local = (int)ceil((double)j->batch_size / r - BSZ_EPS);
    int accum = (int)ceil((double)local / a->max_local - BSZ_EPS) - 1;
    if (r == 1 && j->batch_size > a->init_bsz && accum < 1)
        accum = 1; /* one GPU above the base batch accumulates (as the artifact) */
    int atomic = (int)ceil((double)local / (accum + 1) - BSZ_EPS);
    int cnt = r * (accum + 1);
    int cap = (int)((double)a->max_bsz / cnt);
    j->accum_steps = accum;
    j->atomic_bsz = atomic < cap ? atomic : cap;
}

void replay_pm_job_reallocate(ts_pm_job *j, const int *count, int n)
{
    if (n > TS_PM_NODES_MAX)
        n = TS_PM_NODES_MAX;
    if (n <= 0) {
        j->nnodes = 0;
        j->atomic_bsz = 0;
        return;
    }
    memcpy(j->count, count, (size_t)n * sizeof *count);
    j->nnodes = n;
    update_local_bsz(j);
    j->rescale_s = TS_PM_RESCALE_S;
    j->restarts++;
}

static void step_time_cached(ts_pm_job *j, double *st, double *sy)
{
    if (j->c_atomic != j->atomic_bsz || j->c_nnodes != j->nnodes ||
        memcmp(j->c_count, j->count, (size_t)j->nnodes * sizeof *j->count) != 0) {
        replay_pm_step_time(j->app, j->count, j->nnodes, j->atomic_bsz, &j->c_step, &j->c_sync);
        j->c_atomic = j->atomic_bsz;
        j->c_nnodes = j->nnodes;
        memcpy(j->c_count, j->count, (size_t)j->nnodes * sizeof *j->count);
    }
    *st = j->c_step;
    *sy = j->c_sync;
}

void replay_pm_job_step(ts_pm_job *j, int seconds)
{
    if (j->nnodes == 0) {
        j->now_s += seconds;
        return;
    }
    int delay = j->rescale_s < seconds ? j->rescale_s : seconds;
    j->now_s += delay;
    j->rescale_s -= delay;
    seconds -= delay;
    const ts_pm_app *a = j->app;
    while (seconds > 0 && j->done_s < 0) {
        int r = replicas_of(j);
        int batch = r * j->atomic_bsz * (j->accum_steps + 1);
        double st, sy;
        step_time_cached(j, &st, &sy);
        double accum_time = st - sy;
        double gain = replay_pm_gain(a, batch, j->epoch);
        double total = st + accum_time * j->accum_steps;
        double goodput = gain / total;
        double next = replay_pm_epoch_progress(a, j->epoch + 1);
        if (j->progress + goodput * seconds < next) {
            j->progress += goodput * seconds;
            j->now_s += seconds;
            seconds = 0;
        } else {
            j->epoch++;
            int delta = (int)nearbyint((next - j->progress) / goodput);
            if (delta > seconds)
                delta = seconds;
            if (j->epoch >= a->epochs)
                j->done_s = j->now_s + delta;
            j->progress = next;
            j->now_s += delta;
            seconds -= delta;
        }
        update_local_bsz(j);
    }
    j->now_s += seconds;
}

int replay_pm_fill_most_free(int *row, int *node_free, int nodes, int want)
{
    int have = 0;
    while (have < want) {
        int best = -1;
        for (int i = 0; i < nodes; i++)
            if (node_free[i] > 0 && (best < 0 || node_free[i] > node_free[best]))
                best = i;
        if (best < 0)
            break;
        int take = want - have < node_free[best] ? want - have : node_free[best];
        row[best] += take;
        node_free[best] -= take;
        have += take;
    }
    return have;
}

long replay_pm_round(ts_pm_job *pj, int n)
{
    long held = 0;
    for (int j = 0; j < n; j++) {
        int g = 0;
        for (int i = 0; i < pj[j].nnodes; i++)
            g += pj[j].count[i];
        if (pj[j].done_s < 0)
            held += (long)g * TS_PM_ROUND_S;
        replay_pm_job_step(&pj[j], TS_PM_ROUND_S);
    }
    return held;
}

int replay_pm_counts(const int *row, int nodes, int *cnt)
{
    int m = 0;
    for (int i = 0; i < nodes && m < TS_PM_NODES_MAX; i++)
        if (row[i] > 0) {
            int k = m++;
            while (k > 0 && cnt[k - 1] < row[i]) {
                cnt[k] = cnt[k - 1];
                k--;
            }
            cnt[k] = row[i];
        }
    return m;
}

void replay_pm_summarise(const ts_pm_wjob *jobs, const ts_pm_job *pj, int n, long held_gpu_s,
                     long total_gpus, long *jct_s, ts_pm_stats *st)
{
    double sum = 0;
    for (int j = 0; j < n; j++) {
        long jct = pj[j].done_s - jobs[j].submit_s;
        if (jct_s)
            jct_s[j] = jct;
        sum += (double)jct;
        if (pj[j].done_s > st->makespan_s)
            st->makespan_s = pj[j].done_s;
        st->restarts += pj[j].restarts > 0 ? pj[j].restarts : 0;
    }
    st->avg_jct_s = n ? sum / n : 0;
    st->util_pct = st->makespan_s ? 100.0 * (double)held_gpu_s /
                                        ((double)total_gpus * (double)st->makespan_s)
                                  : 0;
}
