/*
 * frag.c - the fragmentation measure (see frag.h for the definition).
 *
 * The typical-pod list is computed once per workload; the per-node amount is
 * a short double loop over classes and GPUs on a small value type
 * (ts_frag_shape), so scorers can ask "what would F be if this pod went to
 * GPU 3" by editing a copy of the shape, with no allocation and no effect on
 * the cluster. The tracker keeps sum F and sum U for the whole cluster and
 * is updated per touched node, which is what makes logging the measure after
 * every one of ~10,000 pod events cheap.
 */
#include "tessera/frag.h"

#include <stdlib.h>
#include <string.h>

typedef struct class_rank {
    int idx;
    int64_t count;
} class_rank;

static int cmp_int64_desc(int64_t a, int64_t b) { return a > b ? -1 : a < b ? 1 : 0; }

/* Orders classes by count, then by larger cpu, share, GPU count and model
 * mask, so equal counts keep a fixed order independent of input order. */
static int rank_cmp(const class_rank *x, const class_rank *y, const ts_request *groups)
{
    if (x->count != y->count)
        return x->count > y->count ? -1 : 1;
    const ts_request *a = &groups[x->idx], *b = &groups[y->idx];
    int c;
    if ((c = cmp_int64_desc(a->cpu_milli, b->cpu_milli)) ||
        (c = cmp_int64_desc(a->gpu_milli, b->gpu_milli)) ||
        (c = cmp_int64_desc(a->num_gpu, b->num_gpu)) ||
        (c = cmp_int64_desc(a->model_mask, b->model_mask)))
        return c;
    return 0;
}

static bool same_group(const ts_request *a, const ts_request *b)
{
    return a->cpu_milli == b->cpu_milli && a->gpu_milli == b->gpu_milli &&
           a->num_gpu == b->num_gpu && a->model_mask == b->model_mask &&
           a->mig_profile == b->mig_profile;
}

int ts_typical_from_workload(const ts_workload *w, double coverage, ts_typical *out,
                             ts_err *err)
{
    return ts_typical_build(w, coverage, TS_TYPICAL_BY_COUNT, out, err);
}

static int64_t class_weight(const ts_request *q, int64_t count, int weight)
{
    return weight == TS_TYPICAL_BY_GPU ? count * q->num_gpu * q->gpu_milli : count;
}

int ts_typical_build(const ts_workload *w, double coverage, int weight, ts_typical *out,
                     ts_err *err)
{
    memset(out, 0, sizeof *out);
    size_t cap = (size_t)(w->nspecs ? w->nspecs : 1);
    ts_request *greq = malloc(cap * sizeof *greq);
    double *gmem = calloc(cap, sizeof *gmem);
    class_rank *r = malloc(cap * sizeof *r);
    int ng = 0;
    if (!greq || !gmem || !r)
        goto oom;
    /* group the workload's classes, ignoring memory */
    for (int k = 0; k < w->nspecs; k++) {
        int g = 0;
        while (g < ng && !same_group(&greq[g], &w->specs[k]))
            g++;
        if (g == ng) {
            greq[g] = w->specs[k];
            greq[g].mem_mib = 0;
            r[g] = (class_rank){g, 0};
            ng++;
        }
        r[g].count += w->spec_count[k];
        gmem[g] += (double)w->specs[k].mem_mib * w->spec_count[k];
    }
    int64_t total = 0;
    for (int g = 0; g < ng; g++) {
        gmem[g] /= r[g].count;
        r[g].count = class_weight(&greq[g], r[g].count, weight);
        total += r[g].count;
    }
    /* insertion sort: a few hundred groups at most, and no global comparator
     * state (qsort has no context argument in C11) */
    for (int i = 1; i < ng; i++) {
        class_rank v = r[i];
        int j = i - 1;
        while (j >= 0 && rank_cmp(&v, &r[j], greq) < 0) {
            r[j + 1] = r[j];
            j--;
        }
        r[j + 1] = v;
    }
    int64_t cum = 0;
    int n = 0;
    while (n < ng && r[n].count > 0 && (double)cum < coverage * (double)total)
        cum += r[n++].count;
    size_t nn = (size_t)(n ? n : 1);
    out->req = malloc(nn * sizeof *out->req);
    out->p = malloc(nn * sizeof *out->p);
    out->count = malloc(nn * sizeof *out->count);
    out->mem_mib = malloc(nn * sizeof *out->mem_mib);
    if (!out->req || !out->p || !out->count || !out->mem_mib)
        goto oom;
    for (int i = 0; i < n; i++) {
        out->req[i] = greq[r[i].idx];
        out->count[i] = r[i].count;
        out->p[i] = (double)r[i].count / (double)cum;
        out->mem_mib[i] = (int64_t)gmem[r[i].idx];
    }
    out->n = n;
    free(greq);
    free(gmem);
    free(r);
    return 0;
oom:
    free(greq);
    free(gmem);
    free(r);
    ts_typical_free(out);
    return ts_err_set(err, TS_ENOMEM, "out of memory");
}

void ts_typical_free(ts_typical *t)
{
    free(t->req);
    free(t->p);
    free(t->count);
    free(t->mem_mib);
    memset(t, 0, sizeof *t);
}

void ts_frag_shape_of(const ts_node *n, ts_frag_shape *s)
{
    s->model = n->model;
    s->ngpu = n->ngpu;
    s->cpu_left = n->cpu_milli - n->cpu_used;
    s->mem_left = n->mem_mib - n->mem_used;
    for (int i = 0; i < n->ngpu; i++)
        s->free[i] = ts_gpu_free_milli(&n->gpu[i]);
}

double ts_frag_shape_amount(const ts_frag_shape *s, const ts_typical *t)
{
    return ts_frag_shape_measure(s, t, NULL);
}

/* GPU of class q that CPU and memory keep off a shape: what q could take by
 * GPU count alone (by_gpu pods) minus what it can take once CPU and memory
 * bound the number of pods. */
static int64_t stranded_of(const ts_frag_shape *s, const ts_request *q, int64_t mem,
                           int64_t by_gpu)
{
    int64_t k = by_gpu;
    if (q->cpu_milli > 0 && s->cpu_left / q->cpu_milli < k)
        k = s->cpu_left / q->cpu_milli;
    if (mem > 0 && s->mem_left / mem < k)
        k = s->mem_left / mem;
    if (k < 0)
        k = 0;
    return (by_gpu - k) * q->num_gpu * q->gpu_milli;
}

double ts_frag_shape_measure(const ts_frag_shape *s, const ts_typical *t, double *stranded)
{
    int64_t idle = 0;
    for (int i = 0; i < s->ngpu; i++)
        idle += s->free[i];
    if (stranded)
        *stranded = 0.0;
    if (idle == 0)
        return 0.0;
    double f = 0.0, st = 0.0;
    for (int j = 0; j < t->n; j++) {
        const ts_request *q = &t->req[j];
        int64_t frag_j = idle;
        bool allowed = q->model_mask == 0 || (s->model >= 0 && ((q->model_mask >> s->model) & 1u));
        if (q->num_gpu > 0 && allowed) {
            int fit = 0;
            int64_t sliver = 0;
            for (int i = 0; i < s->ngpu; i++) {
                if (s->free[i] >= q->gpu_milli)
                    fit++;
                else
                    sliver += s->free[i];
            }
            int64_t mem = t->mem_aware ? t->mem_mib[j] : 0;
            if (fit >= q->num_gpu && s->cpu_left >= q->cpu_milli && s->mem_left >= mem)
                frag_j = sliver;
            if (stranded && fit >= q->num_gpu) {
                /* pods by GPU alone: whole GPUs are the fit ones; a share
                 * may stack several on one GPU */
                int64_t by_gpu = fit / q->num_gpu;
                if (q->gpu_milli > 0 && q->gpu_milli < TS_MILLI_PER_GPU) {
                    /* (a MIG request has no milli: whole GPUs, as above) */
                    by_gpu = 0;
                    for (int i = 0; i < s->ngpu; i++)
                        by_gpu += s->free[i] / q->gpu_milli;
                }
                st += t->p[j] * (double)stranded_of(s, q, mem, by_gpu);
            }
        }
        f += t->p[j] * (double)frag_j;
    }
    if (stranded)
        *stranded = st;
    return f;
}

#define STRANDED_MULTI_SLOPE 1.5

double ts_frag_stranded_weight(const ts_typical *t)
{
    double all = 0.0, multi = 0.0;
    for (int j = 0; j < t->n; j++) {
        double g = t->p[j] * (double)t->req[j].num_gpu * (double)t->req[j].gpu_milli;
        all += g;
        multi += t->req[j].num_gpu > 1 ? g : 0.0;
    }
    double w = 1.0 - STRANDED_MULTI_SLOPE * (all > 0.0 ? multi / all : 0.0);
    return w > 0.0 ? w : 0.0;
}

double ts_frag_shape_placement(const ts_frag_shape *s, const ts_typical *t, double w)
{
    double stranded;
    double f = ts_frag_shape_measure(s, t, &stranded);
    return f + w * stranded;
}

double ts_frag_node(const ts_node *n, const ts_typical *t)
{
    ts_frag_shape s;
    ts_frag_shape_of(n, &s);
    return ts_frag_shape_amount(&s, t);
}

int64_t ts_frag_idle(const ts_node *n) { return n->milli_free; }

int ts_frag_tracker_init(ts_frag_tracker *t, const ts_cluster *c, const ts_typical *typ,
                         ts_err *err)
{
    memset(t, 0, sizeof *t);
    t->typ = typ;
    t->nnodes = c->nnodes;
    t->node_f = calloc((size_t)(c->nnodes ? c->nnodes : 1), sizeof *t->node_f);
    t->node_u = calloc((size_t)(c->nnodes ? c->nnodes : 1), sizeof *t->node_u);
    if (!t->node_f || !t->node_u) {
        ts_frag_tracker_free(t);
        return ts_err_set(err, TS_ENOMEM, "out of memory");
    }
    for (int i = 0; i < c->nnodes; i++) {
        t->node_f[i] = ts_frag_node(&c->nodes[i], typ);
        t->node_u[i] = ts_frag_idle(&c->nodes[i]);
        t->sum_f += t->node_f[i];
        t->sum_u += t->node_u[i];
    }
    return 0;
}

void ts_frag_tracker_update(ts_frag_tracker *t, const ts_cluster *c, int i)
{
    double f = ts_frag_node(&c->nodes[i], t->typ);
    int64_t u = ts_frag_idle(&c->nodes[i]);
    t->sum_f += f - t->node_f[i];
    t->sum_u += u - t->node_u[i];
    t->node_f[i] = f;
    t->node_u[i] = u;
}

void ts_frag_tracker_free(ts_frag_tracker *t)
{
    free(t->node_f);
    free(t->node_u);
    t->node_f = NULL;
    t->node_u = NULL;
}
