/*
 * score_tessera.c - Tessera's own placement policy: the fragmentation
 * gradient, extended to the CPU and memory that strand GPUs.
 *
 * FGD (score_fgd.c) scores a node by how much a pod grows the fragmentation
 * F of the expected workload, but F looks only at GPU slivers and CPU, and at
 * whether *one* pod of each typical class still fits. On the openb traces
 * almost every pod that fails does so on a node that still has free GPUs but
 * has run out of CPU or memory. So the measure here is
 *
 *   M(n) = F_mem(n) + w S(n)
 *   F_mem: FGD's F, where a class also fails on a node lacking its mean memory;
 *   S:     GPU stranded by CPU and memory - for each typical class j, the GPU
 *          that j could take on n by GPU count alone, minus what it could
 *          take once n's CPU and memory bound the number of j pods, weighted
 *          by p_j;
 *   w:     1 - 1.5 m (at least 0), m the share of the typical list's GPU
 *          demand that multi-GPU classes carry: S presses small pods towards
 *          nodes with CPU to spare, which are the whole nodes large pods need
 *          (frag.c: ts_frag_shape_placement, shared with gang placement).
 *
 * A pod's score is 100 * sigmoid(delta / D), truncated to a whole number:
 * coarser buckets than FGD's, so placements consolidate in node order (ties
 * go to the lowest index) unless a node is clearly better. D is 4000 where
 * the cluster has a node of 8 GPUs or more (what it was chosen on), else
 * 500 per GPU of its largest node: a node's M moves by at most its idle
 * GPU milli, so on 2- and 4-GPU nodes 4000 put almost every placement in
 * the buckets next to 50 and left node order alone to decide (on the tuning
 * set, 4-GPU nodes with CPU cut to 60 %: +0.92 point). delta is M before
 * - M after; for a GPU share it is a (F before - F after) + b w (S before -
 * S after), the weights set by the typical list: (1/2, 1) if it pins at
 * least 3 % of its GPU demand to GPU models; else (1, 1) if at least 18 % of
 * its pods are CPU-only; else (1/2, 1/2), i.e. buckets twice as wide. Shares
 * try every GPU that can take them. docs/policies.md has the measurements
 * that chose the weights.
 *
 * On mixes whose shares weigh (1/2, 1/2), among nodes of equal score a
 * share goes where the sum of squares of the
 * cluster's gap counts grows least (issue 31; the sum-of-squares rule of
 * online bin packing, Csirik et al., "On the Sum-of-Squares Algorithm for
 * Bin Packing", JACM 2006): partly used GPUs are counted by gap type, how
 * many typical share sizes fit in their free milli, and a share prefers to
 * leave a gap of a type the cluster has few of, or to take a gap of a type
 * it has many of. The change is ranked in steps of 100 (about 50 GPUs of
 * one type), so small differences keep the lowest index and placements
 * consolidate as before. The counts are read from the cluster at each
 * placement (tie_begin), outside the score cache.
 *
 * The scorer adapts to its cluster: where the typical mix asks more CPU per
 * GPU (CPU-only pods included) than the cluster has per GPU (its GPU nodes'
 * CPU over their GPUs), a class asking more CPU per GPU than the cluster has
 * weighs p_j (supply / asked)^6 in F and S instead of p_j. There CPU, not
 * GPUs, runs out first: keeping room for such a class costs GPUs that
 * leaner classes would fill (the offline packing gives the hungry classes
 * the CPU-rich nodes and leaves the rest out), and its S pressed small pods
 * onto the CPU-rich nodes that the large lean pods need. Where CPU is not
 * short (the openb cluster: 17.2 cores per GPU against 14.0 asked by the
 * default mix) every weight is as given. The exponent was chosen on a
 * tuning set of CPU-short clusters (docs/policies.md). Both ratios are read
 * when the scorer is set up, which tesserad's cycle does again whenever its
 * learned mix changes; a node joining in between is counted from then on.
 *
 * On such a cluster a pod that asks no GPU goes first to a node with no fully
 * free GPU (or no GPU), lowest index first; only where none can take it does
 * M decide. M cannot see the CPU a CPU-only pod takes from beside whole free
 * GPUs while the node still has plenty (M does not move, the score is 50),
 * but the whole-GPU pods that come later need it (issue 31; on the tuning
 * set's openb x 25 % CPU-only point +0.66, docs/policies.md).
 */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "sched/scorers.h"

#define TESSERA_SCORE_BUCKETS 100
#define TESSERA_DELTA_SCALE_MILLI 4000.0
#define TESSERA_SCALE_GPUS 8 /* largest node the scale above is for */
#define TESSERA_SHARE_HALF 0.5 /* a GPU share's lighter weight of a term */
#define TESSERA_PINNED_FEW 0.03 /* pinned share of the typical GPU demand */
#define TESSERA_CPU_HEAVY 0.18  /* CPU-only share of the typical pods */
#define TESSERA_LEAN_EXP 6.0    /* exponent of a CPU-hungry class's discount */
#define TESSERA_GAP_TYPES 64    /* share sizes the tie-break tells apart, + 1 */
#define TESSERA_GAP_UNIT 100    /* sum-of-squares change per step of the tie */
/* a CPU-only pod's score on a node with no fully free GPU, on a cluster
 * short of CPU: above 50, the most any other node can give it */
#define TESSERA_SCORE_NO_IDLE (TESSERA_SCORE_BUCKETS / 2 + 1)

typedef struct before_entry {
    uint64_t version; /* node version + 1 when valid */
    double f, s;      /* F_mem(n) and S(n) */
} before_entry;

/* The cluster's partly used shared GPUs counted by the largest typical share
 * size their free milli takes, kept in step with the nodes' versions. */
typedef struct gap_book {
    int32_t type_of[TS_MILLI_PER_GPU + 1]; /* free milli -> sizes that fit */
    int64_t count[TESSERA_GAP_TYPES];      /* partly used GPUs by type */
    uint64_t *ver;  /* [cap] node version + 1 the counts hold, 0 when none */
    uint8_t *types; /* [cap * TS_NODE_MAX_GPUS] a GPU's type + 1 as counted, 0 = none */
    int cap;
    bool sizes;     /* the typical list has shares */
    bool trusted;   /* versions identify states (no scratch copies) */
} gap_book;

typedef struct tessera {
    ts_typical typ; /* shallow copy of the env's list, memory-aware, p owned */
    const ts_cluster *cluster;
    before_entry *before; /* F and S per node, valid while the node is unchanged */
    int nbefore;
    double w_stranded;    /* w: the weight of S in M */
    double share_f, share_s; /* weights of F's and w S's drops for a GPU share */
    ts_frag_memo *memo;   /* F_mem and S by shape; NULL (out of memory) computes each */
    gap_book gaps;        /* the tie-break among equal scores of a share */
    double delta_scale;   /* milli-GPU of M per sigmoid unit */
    bool cpu_short;       /* the mix asks more CPU per GPU than the cluster has */
} tessera;

/* The share of the typical list's GPU demand (sum p_j * GPUs_j) that is
 * pinned to GPU models. */
static double pinned_share(const ts_typical *typ)
{
    double all = 0.0, pinned = 0.0;
    for (int j = 0; j < typ->n; j++) {
        double g = typ->p[j] * (double)typ->req[j].num_gpu * (double)typ->req[j].gpu_milli;
        all += g;
        pinned += typ->req[j].model_mask ? g : 0.0;
    }
    return all > 0.0 ? pinned / all : 0.0;
}

/* CPU milli per GPU over the cluster's nodes with GPUs; 0 when none. */
static double cluster_cpu_per_gpu(const ts_cluster *c)
{
    double cpu = 0.0, gpus = 0.0;
    for (int i = 0; c && i < c->nnodes; i++)
        if (c->nodes[i].ngpu > 0) {
            cpu += (double)c->nodes[i].cpu_milli;
            gpus += c->nodes[i].ngpu;
        }
    return gpus > 0.0 ? cpu / gpus : 0.0;
}

/* CPU milli the typical mix asks per GPU it asks, CPU-only pods included;
 * 0 when it asks no GPU. */
static double typical_cpu_per_gpu(const ts_typical *typ)
{
    double cpu = 0.0, gpus = 0.0;
    for (int j = 0; j < typ->n; j++) {
        cpu += typ->p[j] * (double)typ->req[j].cpu_milli;
        gpus += typ->p[j] * (double)typ->req[j].num_gpu * (double)typ->req[j].gpu_milli /
                TS_MILLI_PER_GPU;
    }
    return gpus > 0.0 ? cpu / gpus : 0.0;
}

/* p: the typical weights; on a cluster with less CPU per GPU than the mix
 * asks, a class asking more CPU per GPU than the cluster has is discounted
 * by (supply / asked)^TESSERA_LEAN_EXP (the file's header says why).
 * Unchanged where CPU is not short, without a cluster or GPU nodes. */
/* The mix asks more CPU per GPU than the cluster's GPU nodes have; false
 * without a cluster or GPU nodes. */
static bool cpu_short_for(const ts_typical *typ, const ts_cluster *c)
{
    double supply = cluster_cpu_per_gpu(c);
    return supply > 0.0 && typical_cpu_per_gpu(typ) > supply;
}

static void weigh_by_cluster(const ts_typical *typ, const ts_cluster *c, double *p)
{
    double supply = cpu_short_for(typ, c) ? cluster_cpu_per_gpu(c) : 0.0;
    for (int j = 0; j < typ->n; j++) {
        const ts_request *q = &typ->req[j];
        double gpus = (double)q->num_gpu * (double)q->gpu_milli / TS_MILLI_PER_GPU;
        double asked = gpus > 0.0 ? (double)q->cpu_milli / gpus : 0.0;
        p[j] = typ->p[j];
        if (supply > 0.0 && asked > supply)
            p[j] *= pow(supply / asked, TESSERA_LEAN_EXP);
    }
}

/* The sigmoid's scale in milli-GPU: TESSERA_DELTA_SCALE_MILLI on a cluster
 * with a node of TESSERA_SCALE_GPUS GPUs or more (or no cluster), else that
 * in proportion to the GPUs of its largest node (the file's header says
 * why). Read when the scorer is set up, as the CPU ratio is. */
static double delta_scale_of(const ts_cluster *c)
{
    int most = 0;
    for (int i = 0; c && i < c->nnodes; i++)
        most = c->nodes[i].ngpu > most ? c->nodes[i].ngpu : most;
    if (most <= 0 || most >= TESSERA_SCALE_GPUS)
        return TESSERA_DELTA_SCALE_MILLI;
    return TESSERA_DELTA_SCALE_MILLI * (double)most / TESSERA_SCALE_GPUS;
}

/* The share of the typical list's pods (sum p_j) that ask for no GPU. */
static double cpu_only_share(const ts_typical *typ)
{
    double cpu = 0.0;
    for (int j = 0; j < typ->n; j++)
        cpu += typ->req[j].num_gpu == 0 && typ->req[j].mig_profile < 0 ? typ->p[j] : 0.0;
    return cpu;
}

/* Gap types: a GPU with y milli free is of the type "k typical share sizes
 * fit in y" (k = 0: none does), capped at TESSERA_GAP_TYPES - 1. */
static void gap_setup(gap_book *g, const ts_typical *typ, const ts_sched_env *env)
{
    int32_t size[TESSERA_GAP_TYPES];
    int n = 0;
    for (int j = 0; j < typ->n && n < TESSERA_GAP_TYPES; j++) {
        int32_t m = typ->req[j].gpu_milli;
        int k = 0;
        if (!ts_request_is_share(&typ->req[j]))
            continue;
        while (k < n && size[k] != m)
            k++;
        size[n] = m;
        n += k == n;
    }
    for (int y = 0; y <= TS_MILLI_PER_GPU; y++) {
        int32_t k = 0;
        for (int i = 0; i < n; i++)
            k += size[i] <= y;
        g->type_of[y] = k < TESSERA_GAP_TYPES ? k : TESSERA_GAP_TYPES - 1;
    }
    /* a mix of more sizes than the types counted (sizes of any milli, which
     * leave each type few GPUs) keeps the lowest index: on share sizes
     * uniform in 100-900 milli the rule lost 0.20 point */
    g->sizes = n > 0 && n < TESSERA_GAP_TYPES;
    g->trusted = !env->no_cache;
}

static void gap_free(gap_book *g)
{
    free(g->ver);
    free(g->types);
}

/* Room for n nodes' records; false when out of memory. */
static bool gap_room(gap_book *g, int n)
{
    if (n <= g->cap)
        return true;
    uint64_t *v = realloc(g->ver, (size_t)n * sizeof *v);
    if (v)
        g->ver = v;
    uint8_t *ty = realloc(g->types, (size_t)n * TS_NODE_MAX_GPUS);
    if (ty)
        g->types = ty;
    if (!v || !ty)
        return false;
    memset(g->ver + g->cap, 0, (size_t)(n - g->cap) * sizeof *v);
    memset(g->types + (size_t)g->cap * TS_NODE_MAX_GPUS, 0,
           (size_t)(n - g->cap) * TS_NODE_MAX_GPUS);
    g->cap = n;
    return true;
}

/* Brings node i's GPUs into the counts: takes out what was counted for it,
 * counts what it is now. */
static void gap_recount(gap_book *g, const ts_node *n, int i)
{
    uint8_t *ty = g->types + (size_t)i * TS_NODE_MAX_GPUS;
    for (int k = 0; k < TS_NODE_MAX_GPUS; k++) {
        if (ty[k])
            g->count[ty[k] - 1]--;
        ty[k] = 0;
        if (k >= n->ngpu || n->gpu[k].mode != TS_GPU_SHARED || n->gpu[k].milli_used <= 0 ||
            n->gpu[k].milli_used >= TS_MILLI_PER_GPU)
            continue;
        int32_t t = g->type_of[TS_MILLI_PER_GPU - n->gpu[k].milli_used];
        g->count[t]++;
        ty[k] = (uint8_t)(t + 1);
    }
    g->ver[i] = n->version + 1;
}

/* A share ranks nodes of equal score by the tie-break; the counts are
 * brought up to date once per placement (a node whose version is unchanged
 * is skipped, unless versions may repeat). */
static bool tessera_tie_begin(void *st, const ts_request *r)
{
    tessera *t = st;
    gap_book *g = &t->gaps;
    if (!ts_request_is_share(r) || !g->sizes || !t->cluster ||
        !gap_room(g, t->cluster->nnodes))
        return false;
    for (int i = 0; i < t->cluster->nnodes; i++) {
        const ts_node *n = &t->cluster->nodes[i];
        if (!g->trusted || g->ver[i] != n->version + 1)
            gap_recount(g, n, i);
    }
    return true;
}

/* The sum-of-squares change, over gap types, of the share r going to its
 * GPU on n (the GPU leaves its type x for type y; a fresh GPU enters the
 * counts, a filled one leaves them), in steps of TESSERA_GAP_UNIT, lower
 * first: among equal scores a share goes where it leaves a gap of a type
 * the cluster has few of, or takes one of a type it has many of. */
static int64_t tessera_tie(void *st, const ts_node *n, const ts_request *r, const ts_alloc *a)
{
    const gap_book *g = &((tessera *)st)->gaps;
    int32_t x = ts_gpu_free_milli(&n->gpu[a->gpu[0]]), y = x - r->gpu_milli;
    int64_t ss = 0;
    if (y > 0)
        ss += 2 * g->count[g->type_of[y]] + 1;
    if (x < TS_MILLI_PER_GPU)
        ss -= 2 * g->count[g->type_of[x]] - 1;
    return ss / TESSERA_GAP_UNIT;
}

static int tessera_init(void **state, const ts_sched_env *env, ts_err *err)
{
    if (!env->typical)
        return ts_err_set(err, TS_EINVAL, "tessera: needs a typical-pod list");
    tessera *t = calloc(1, sizeof *t);
    if (!t)
        return ts_err_set(err, TS_ENOMEM, "out of memory");
    t->cluster = env->cluster;
    t->nbefore = env->cluster && !env->no_cache ? env->cluster->nnodes : 0;
    t->before = calloc((size_t)(t->nbefore ? t->nbefore : 1), sizeof *t->before);
    if (!t->before) {
        free(t);
        return ts_err_set(err, TS_ENOMEM, "out of memory");
    }
    t->typ = *env->typical;
    t->typ.mem_aware = t->typ.mem_mib != NULL;
    double *p = malloc((size_t)(t->typ.n ? t->typ.n : 1) * sizeof *p);
    if (!p) {
        free(t->before);
        free(t);
        return ts_err_set(err, TS_ENOMEM, "out of memory");
    }
    t->w_stranded = ts_frag_stranded_weight(&t->typ);
    t->delta_scale = delta_scale_of(env->cluster);
    /* a share's weights: (1/2, 1) with pins, (1, 1) on CPU-heavy mixes
     * without, (1/2, 1/2) otherwise */
    bool pinned = pinned_share(&t->typ) >= TESSERA_PINNED_FEW;
    bool cpu_heavy = cpu_only_share(&t->typ) >= TESSERA_CPU_HEAVY;
    t->share_f = pinned || !cpu_heavy ? TESSERA_SHARE_HALF : 1.0;
    t->share_s = !pinned && !cpu_heavy ? TESSERA_SHARE_HALF : 1.0;
    t->cpu_short = cpu_short_for(&t->typ, env->cluster);
    /* the weights above read the list as given; F and S read it weighed */
    weigh_by_cluster(&t->typ, env->cluster, p);
    t->typ.p = p;
    t->memo = ts_frag_memo_new();
    gap_setup(&t->gaps, env->typical, env);
    /* the tie-break is used where it was measured to gain, the mixes whose
     * shares weigh (1/2, 1/2); on the pinned and CPU-heavy points of the
     * tuning grid it moved nothing beyond 0.1 point either way, and there
     * those mixes place as before */
    t->gaps.sizes = t->gaps.sizes && !pinned && !cpu_heavy;
    *state = t;
    return 0;
}

static void tessera_fini(void *state)
{
    tessera *t = state;
    if (t) {
        free(t->before);
        free(t->typ.p);
        ts_frag_memo_free(t->memo);
        gap_free(&t->gaps);
    }
    free(t);
}

/* The measure is symmetric in the GPUs, so a GPU with the same free milli as
 * an earlier candidate scores the same; the earlier one would win the tie. */
static bool same_free_tried(const ts_node *n, int i, const ts_request *r)
{
    for (int k = 0; k < i; k++)
        if (n->gpu[k].milli_used == n->gpu[i].milli_used && ts_node_gpu_takes_share(n, k, r))
            return true;
    return false;
}

static int64_t score_of_delta(const tessera *t, double delta)
{
    return (int64_t)(TESSERA_SCORE_BUCKETS / (1.0 + exp(-delta / t->delta_scale)));
}

/* F_mem(n) and S(n) depend on the node alone, so one pair serves every class
 * scored against the node until it changes. */
static before_entry measure_before(tessera *t, const ts_node *n, const ts_frag_shape *s)
{
    ptrdiff_t i = t->cluster ? n - t->cluster->nodes : -1;
    before_entry tmp, *e = i < 0 || i >= t->nbefore ? &tmp : &t->before[i];
    if (e == &tmp || e->version != n->version + 1) {
        e->f = ts_frag_memo_measure(t->memo, s, &t->typ, &e->s);
        e->version = n->version + 1;
    }
    return *e;
}

static bool asks_no_gpu(const ts_request *r) { return r->num_gpu == 0 && r->mig_profile < 0; }

static bool has_whole_free_gpu(const ts_node *n)
{
    for (int k = 0; k < n->ngpu; k++)
        if (ts_gpu_free_milli(&n->gpu[k]) == TS_MILLI_PER_GPU)
            return true;
    return false;
}

static int64_t tessera_score(void *st, const ts_node *n, const ts_request *r, ts_alloc *a,
                             ts_rng *rng)
{
    (void)rng;
    tessera *t = st;
    ts_node_choose_gpus(n, r, a);
    if (t->cpu_short && asks_no_gpu(r) && !has_whole_free_gpu(n))
        return TESSERA_SCORE_NO_IDLE;
    ts_frag_shape s;
    ts_frag_shape_of(n, &s);
    before_entry b = measure_before(t, n, &s);
    double strand;
    s.cpu_left -= r->cpu_milli;
    s.mem_left -= r->mem_mib;
    if (ts_request_is_share(r)) {
        int64_t best = INT64_MIN;
        for (int i = 0; i < n->ngpu; i++) {
            if (!ts_node_gpu_takes_share(n, i, r) || same_free_tried(n, i, r))
                continue;
            s.free[i] -= r->gpu_milli;
            double f = ts_frag_memo_measure(t->memo, &s, &t->typ, &strand);
            int64_t v = score_of_delta(t, t->share_f * (b.f - f) +
                                       t->share_s * t->w_stranded * (b.s - strand));
            s.free[i] += r->gpu_milli;
            if (v > best) {
                best = v;
                a->gpu[0] = (int8_t)i;
            }
        }
        return best;
    }
    for (int k = 0; k < a->ngpu && r->mig_profile < 0; k++)
        s.free[a->gpu[k]] -= a->gpu_milli;
    double f = ts_frag_memo_measure(t->memo, &s, &t->typ, &strand);
    return score_of_delta(t, (b.f + t->w_stranded * b.s) - (f + t->w_stranded * strand));
}

/* A pod without GPUs only takes CPU and memory, which can make classes fail
 * and strand more GPUs but never less: M cannot drop, so the score is at most
 * that of no change, which a node whose M stays the same reaches; on a
 * cluster short of CPU, at most that of a node with no fully free GPU. */
static int64_t tessera_bound(void *st, const ts_request *r)
{
    const tessera *t = st;
    if (!asks_no_gpu(r))
        return INT64_MAX;
    return t->cpu_short ? TESSERA_SCORE_NO_IDLE : (int64_t)(TESSERA_SCORE_BUCKETS / 2);
}

const struct ts_scorer_ops ts_scorer_tessera = {
    .name = "tessera",
    .summary = "fragmentation gradient counting GPUs stranded by CPU and memory",
    .cacheable = true,
    .init = tessera_init,
    .fini = tessera_fini,
    .score = tessera_score,
    .bound = tessera_bound,
    .tie_begin = tessera_tie_begin,
    .tie = tessera_tie,
};
