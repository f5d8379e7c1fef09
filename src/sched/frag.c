/*
 * frag.c - the fragmentation measure (see frag.h for the definition).
 *
 * The typical-pod list is computed once per workload; the per-node amount is
 * a short double loop over classes and GPUs on a small value type
 * (ts_frag_shape), so scorers can ask "what would F be if this pod went to
 * GPU 3" by editing a copy of the shape, with no allocation and no effect on
 * the cluster. The tracker keeps sum F and sum U for the whole cluster and
 * is updated per touched node, which is what makes logging the measure after
 * every one of ~10,000 pod events cheap. A scorer that measures the same
 * shapes over and over (a scan of a cluster whose nodes of one type sit in
 * the same state) keeps the results in a memo keyed by the shape with its
 * GPUs sorted (the measure is integer sums over GPUs, so their order cannot
 * change a bit of it): on 4-GPU nodes with shares of any size one seed
 * asks 972,000 measures of 80,000 distinct shapes.
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
    /* a < k * b is a / b < k for b > 0, k >= 0, without a division (for a
     * in (-b, 0) the two differ, but both leave k at 0) */
    int64_t k = by_gpu;
    if (q->cpu_milli > 0 && s->cpu_left < k * q->cpu_milli)
        k = s->cpu_left / q->cpu_milli;
    if (mem > 0 && s->mem_left < k * mem)
        k = s->mem_left / mem;
    if (k < 0)
        k = 0;
    return (by_gpu - k) * q->num_gpu * q->gpu_milli;
}

/* At least as many pods of q as the GPUs alone take (stranded_of's by_gpu):
 * a share's sum of floors is at most the floor of the sum. */
static int64_t most_by_gpu(const ts_request *q, int64_t idle, int fit)
{
    return q->gpu_milli > 0 && q->gpu_milli < TS_MILLI_PER_GPU ? idle / q->gpu_milli : fit;
}

/* Do CPU or memory hold fewer than most pods of q? Where they do not, they
 * strand nothing of q, and the measure skips adding that 0 (S only sums
 * terms >= +0, so the skipped addition would not change a bit of it). */
static bool bounded_below(const ts_frag_shape *s, const ts_request *q, int64_t mem,
                          int64_t most)
{
    return (q->cpu_milli > 0 && s->cpu_left < most * q->cpu_milli) ||
           (mem > 0 && s->mem_left < most * mem);
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
            if (stranded && fit >= q->num_gpu &&
                bounded_below(s, q, mem, most_by_gpu(q, idle, fit))) {
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

/* 2^15 slots of 104 bytes: a scan of the largest clusters we simulate
 * (1,555 nodes) meets ~80,000 shapes over a whole share-heavy run, but few
 * at once. */
#define MEMO_SLOTS_LOG2 15

typedef struct memo_key {
    int32_t model, ngpu;
    int64_t cpu_left, mem_left;
    int32_t free[TS_NODE_MAX_GPUS]; /* sorted ascending, zero past ngpu */
} memo_key;

typedef struct memo_slot {
    memo_key key; /* ngpu 0 when the slot is empty (such shapes are not kept) */
    double f, stranded;
} memo_slot;

struct ts_frag_memo {
    memo_slot *slot;
};

ts_frag_memo *ts_frag_memo_new(void)
{
    ts_frag_memo *m = malloc(sizeof *m);
    if (!m)
        return NULL;
    m->slot = calloc((size_t)1 << MEMO_SLOTS_LOG2, sizeof *m->slot);
    if (!m->slot) {
        free(m);
        return NULL;
    }
    return m;
}

void ts_frag_memo_free(ts_frag_memo *m)
{
    if (m)
        free(m->slot);
    free(m);
}

static void memo_key_of(const ts_frag_shape *s, memo_key *k)
{
    memset(k, 0, sizeof *k);
    k->model = s->model;
    k->ngpu = s->ngpu;
    k->cpu_left = s->cpu_left;
    k->mem_left = s->mem_left;
    for (int i = 0; i < s->ngpu; i++) {
        int32_t v = s->free[i];
        int j = i - 1;
        while (j >= 0 && k->free[j] > v) {
            k->free[j + 1] = k->free[j];
            j--;
        }
        k->free[j + 1] = v;
    }
}

static size_t memo_hash(const memo_key *k)
{
    uint64_t h = (uint64_t)(uint32_t)k->model * UINT64_C(0x9e3779b97f4a7c15) ^ (uint64_t)k->ngpu;
    h = (h ^ (uint64_t)k->cpu_left) * UINT64_C(0xff51afd7ed558ccd);
    h = (h ^ (uint64_t)k->mem_left) * UINT64_C(0xc4ceb9fe1a85ec53);
    for (int i = 0; i < k->ngpu; i++)
        h = (h ^ (uint32_t)k->free[i]) * UINT64_C(0x100000001b3);
    h ^= h >> 29;
    return (size_t)(h >> (64 - MEMO_SLOTS_LOG2));
}

double ts_frag_memo_measure(ts_frag_memo *m, const ts_frag_shape *s, const ts_typical *t,
                            double *stranded)
{
    if (!m || s->ngpu <= 0 || s->ngpu > TS_NODE_MAX_GPUS)
        return ts_frag_shape_measure(s, t, stranded);
    memo_key k;
    memo_key_of(s, &k);
    memo_slot *e = &m->slot[memo_hash(&k)];
    if (memcmp(&e->key, &k, sizeof k) != 0) {
        e->f = ts_frag_shape_measure(s, t, &e->stranded);
        e->key = k;
    }
    if (stranded)
        *stranded = e->stranded;
    return e->f;
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
