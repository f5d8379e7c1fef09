/*
 * bound.c - the offline upper bound of a placement experiment and a packing
 * that comes close to it (see bound.h and docs/simulator.md).
 *
 * The LP maximises allocated milli-GPU. Its variables are x[c,t], the number
 * of pods of class c (a distinct request) placed on nodes of type t (same GPU
 * model, count, mode, CPU and memory), and y[p,t], the number of GPUs of type
 * t filled with share pattern p (a multiset of share sizes summing to at most
 * one GPU). Rows: each class at most its arrived count; per type the CPU,
 * memory and GPUs of all its nodes; each share size placed on a type at most
 * what its patterns hold; and cuts every integral packing obeys (at most one
 * pod per node that takes more than half its GPUs, CPU or memory; at most
 * floor(G/k) k-GPU pods per node). Share patterns are too many to list, so
 * they are priced in by column generation: a pattern enters when the duals
 * of its share sizes exceed the dual of a GPU (an unbounded knapsack over
 * one GPU's milli). Which class fits which type is asked of ts_node_fits on
 * an empty node of the type, the rule the simulator places by.
 *
 * The packing takes from the LP how many shares of each size (or pods of
 * each class, or of each class on each node type) to place, places the pods largest first, each on the
 * node where the model's own GPU choice leaves the least behind and the
 * node's CPU and memory stay in proportion to its GPUs, then offers every
 * pod left out to any node; of the three roundings it keeps the best.
 */
#include "sim/bound.h"

#include <glpk.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tessera/grow.h"

#define BOUND_ROUNDS_MAX 2000
#define BOUND_REDUCED_COST_EPS 1e-7
#define BOUND_ROUND_EPS 1e-6
#define BOUND_SHARE_SIZES_MAX TS_MILLI_PER_GPU
/* the packing's node score (place_score): a milli of sliver outweighs any
 * imbalance; imbalance outweighs a whole pod's GPU fit (measured on openb
 * default seeds 42-44: weight 30-100 packs best, 96.39-96.44 %) */
#define BOUND_SLIVER_WEIGHT 1000.0
#define BOUND_IMBALANCE_WEIGHT 100.0

typedef struct ntype {
    int rep;     /* a node of the type (empty in the caller's cluster) */
    int count;
    int gpu_row, cpu_row, mem_row, big_gpu_row, big_cpu_row, big_mem_row;
    int k_row[TS_NODE_MAX_GPUS + 1]; /* k-GPU pods; 0 when none */
    int *link_row;                   /* per share size; 0 when no class of it fits */
} ntype;

typedef struct lp_ctx {
    const ts_cluster *c;
    const ts_workload *w;
    bool cpu_pods;      /* SIM_BOUND_PLACE_CPU_PODS */
    glp_prob *lp;
    ntype *types;
    int ntypes;
    int *type_of;       /* per node */
    int *count;         /* per class: arrived pods */
    int *class_row;     /* per class; 0 when the class asks no GPU or none arrived */
    int *share_idx;     /* per class: index into sizes, -1 when not a share */
    int sizes[BOUND_SHARE_SIZES_MAX];
    int size_class[BOUND_SHARE_SIZES_MAX]; /* per size: the first class of it */
    int nsizes;
    int *xcol;          /* per class x type: column, 0 when it does not fit */
    void *node_block;   /* types and type_of, sized once (ts_block_alloc) */
    void *class_block;  /* count, class_row, share_idx and xcol, likewise */
} lp_ctx;

static int64_t req_milli(const ts_request *r) { return (int64_t)r->num_gpu * r->gpu_milli; }

static bool same_type(const ts_node *a, const ts_node *b)
{
    if (a->model != b->model || a->ngpu != b->ngpu || a->cpu_milli != b->cpu_milli ||
        a->mem_mib != b->mem_mib)
        return false;
    for (int i = 0; i < a->ngpu; i++)
        if (a->gpu[i].mode != b->gpu[i].mode)
            return false;
    return true;
}

static int build_types(lp_ctx *x)
{
    const ts_cluster *c = x->c;
    ts_block_part parts[] = {TS_BLOCK_PART(x->types, (size_t)c->nnodes),
                             TS_BLOCK_PART(x->type_of, (size_t)c->nnodes)};
    if (!(x->node_block = ts_block_alloc(parts, sizeof parts / sizeof *parts)))
        return TS_ENOMEM;
    for (int n = 0; n < c->nnodes; n++) {
        int t = 0;
        while (t < x->ntypes && !same_type(&c->nodes[x->types[t].rep], &c->nodes[n]))
            t++;
        if (t == x->ntypes)
            x->types[x->ntypes++].rep = n;
        x->types[t].count++;
        x->type_of[n] = t;
    }
    return 0;
}

static int add_row(glp_prob *lp, double ub)
{
    int r = glp_add_rows(lp, 1);
    glp_set_row_bnds(lp, r, GLP_UP, 0.0, ub);
    return r;
}

/* The rows; classes and share sizes must be known. */
static int build_rows(lp_ctx *x)
{
    const ts_workload *w = x->w;
    for (int k = 0; k < w->nspecs; k++)
        if (x->count[k] > 0 && req_milli(&w->specs[k]) > 0) {
            x->class_row[k] = add_row(x->lp, x->count[k]);
        } else if (x->count[k] > 0 && x->cpu_pods) {
            x->class_row[k] = add_row(x->lp, x->count[k]);
            glp_set_row_bnds(x->lp, x->class_row[k], GLP_FX, x->count[k], x->count[k]);
        }
    for (int t = 0; t < x->ntypes; t++) {
        ntype *ty = &x->types[t];
        const ts_node *n = &x->c->nodes[ty->rep];
        ty->gpu_row = add_row(x->lp, (double)ty->count * n->ngpu);
        ty->cpu_row = add_row(x->lp, (double)ty->count * (double)n->cpu_milli);
        ty->mem_row = add_row(x->lp, (double)ty->count * (double)n->mem_mib);
        ty->big_gpu_row = add_row(x->lp, ty->count);
        ty->big_cpu_row = add_row(x->lp, ty->count);
        ty->big_mem_row = add_row(x->lp, ty->count);
        for (int k = 2; k <= n->ngpu; k++)
            ty->k_row[k] = add_row(x->lp, (double)ty->count * (n->ngpu / k));
        ty->link_row = calloc((size_t)x->nsizes + 1, sizeof *ty->link_row);
        if (!ty->link_row)
            return TS_ENOMEM;
    }
    return 0;
}

/* x[k,t]: the class's rows on the type, when the class fits an empty node. */
static int add_class_cols(lp_ctx *x)
{
    const ts_workload *w = x->w;
    for (int k = 0; k < w->nspecs; k++) {
        if (!x->class_row[k])
            continue;
        const ts_request *r = &w->specs[k];
        for (int t = 0; t < x->ntypes; t++) {
            ntype *ty = &x->types[t];
            const ts_node *n = &x->c->nodes[ty->rep];
            if (!ts_node_fits(n, r))
                continue;
            int ind[10];
            double val[10];
            int len = 0;
            ind[++len] = x->class_row[k], val[len] = 1.0;
            ind[++len] = ty->cpu_row, val[len] = (double)r->cpu_milli;
            ind[++len] = ty->mem_row, val[len] = (double)r->mem_mib;
            if (2 * r->cpu_milli > n->cpu_milli)
                ind[++len] = ty->big_cpu_row, val[len] = 1.0;
            if (2 * r->mem_mib > n->mem_mib)
                ind[++len] = ty->big_mem_row, val[len] = 1.0;
            if (x->share_idx[k] >= 0) {
                int s = x->share_idx[k];
                if (!ty->link_row[s])
                    ty->link_row[s] = add_row(x->lp, 0.0);
                ind[++len] = ty->link_row[s], val[len] = 1.0;
            } else if (r->num_gpu > 0) {
                ind[++len] = ty->gpu_row, val[len] = r->num_gpu;
                if (2 * r->num_gpu > n->ngpu)
                    ind[++len] = ty->big_gpu_row, val[len] = 1.0;
                if (r->num_gpu >= 2)
                    ind[++len] = ty->k_row[r->num_gpu], val[len] = 1.0;
            }
            int col = glp_add_cols(x->lp, 1);
            glp_set_col_bnds(x->lp, col, GLP_LO, 0.0, 0.0);
            glp_set_obj_coef(x->lp, col, (double)req_milli(r));
            glp_set_mat_col(x->lp, col, len, ind, val);
            x->xcol[k * x->ntypes + t] = col;
        }
    }
    return 0;
}

/* A GPU of type t filled with cnt[s] pods of each share size s. */
static void add_pattern(lp_ctx *x, int t, const int *cnt)
{
    ntype *ty = &x->types[t];
    int *ind = malloc(((size_t)x->nsizes + 2) * sizeof *ind);
    double *val = malloc(((size_t)x->nsizes + 2) * sizeof *val);
    if (!ind || !val) {
        free(ind);
        free(val);
        return;
    }
    int len = 0;
    ind[++len] = ty->gpu_row, val[len] = 1.0;
    for (int s = 0; s < x->nsizes; s++)
        if (cnt[s] > 0 && ty->link_row[s])
            ind[++len] = ty->link_row[s], val[len] = -cnt[s];
    int col = glp_add_cols(x->lp, 1);
    glp_set_col_bnds(x->lp, col, GLP_LO, 0.0, 0.0);
    glp_set_mat_col(x->lp, col, len, ind, val);
    free(ind);
    free(val);
}

/* Pricing for type t: the pattern of greatest dual value (unbounded
 * knapsack over one GPU's milli); adds it when it beats the GPU's dual.
 * Returns 1 when a column was added. */
static int price_type(lp_ctx *x, int t, double *best, int *from, int *cnt)
{
    ntype *ty = &x->types[t];
    double gpu_dual = glp_get_row_dual(x->lp, ty->gpu_row);
    for (int m = 0; m <= TS_MILLI_PER_GPU; m++) {
        best[m] = 0.0;
        from[m] = -1;
    }
    bool any = false;
    for (int m = 1; m <= TS_MILLI_PER_GPU; m++) {
        best[m] = best[m - 1];
        from[m] = -1;
        for (int s = 0; s < x->nsizes; s++) {
            if (!ty->link_row[s] || x->sizes[s] > m)
                continue;
            any = true;
            double v = best[m - x->sizes[s]] + glp_get_row_dual(x->lp, ty->link_row[s]);
            if (v > best[m] + 1e-12) {
                best[m] = v;
                from[m] = s;
            }
        }
    }
    if (!any || best[TS_MILLI_PER_GPU] <= gpu_dual + BOUND_REDUCED_COST_EPS)
        return 0;
    memset(cnt, 0, (size_t)x->nsizes * sizeof *cnt);
    for (int m = TS_MILLI_PER_GPU; m > 0;) {
        if (from[m] < 0) {
            m--;
            continue;
        }
        cnt[from[m]]++;
        m -= x->sizes[from[m]];
    }
    add_pattern(x, t, cnt);
    return 1;
}

static int solve_lp(lp_ctx *x, sim_bound *b, ts_err *err)
{
    glp_smcp parm;
    glp_init_smcp(&parm);
    parm.msg_lev = GLP_MSG_OFF;
    double best[TS_MILLI_PER_GPU + 1];
    int from[TS_MILLI_PER_GPU + 1];
    int *cnt = calloc((size_t)x->nsizes + 1, sizeof *cnt);
    if (!cnt)
        return ts_err_set(err, TS_ENOMEM, "out of memory");
    /* one pod of each size alone on a GPU: every share can be placed */
    for (int t = 0; t < x->ntypes; t++)
        for (int s = 0; s < x->nsizes; s++)
            if (x->types[t].link_row[s]) {
                memset(cnt, 0, (size_t)x->nsizes * sizeof *cnt);
                cnt[s] = 1;
                add_pattern(x, t, cnt);
                b->patterns++;
            }
    int rc = 0;
    for (b->rounds = 1;; b->rounds++) {
        int ret = glp_simplex(x->lp, &parm);
        if (ret == 0 && x->cpu_pods && glp_get_status(x->lp) == GLP_NOFEAS) {
            rc = ts_err_set(err, TS_ENOSPC, "bound: the pods that ask no GPU do not all fit "
                                            "the cluster, even alone");
            break;
        }
        if (ret != 0 || glp_get_status(x->lp) != GLP_OPT) {
            rc = ts_err_set(err, TS_EIO, "bound: the LP solver failed (status %d)",
                            glp_get_status(x->lp));
            break;
        }
        int added = 0;
        for (int t = 0; t < x->ntypes; t++)
            added += price_type(x, t, best, from, cnt);
        b->patterns += added;
        if (!added || b->rounds == BOUND_ROUNDS_MAX)
            break;
    }
    free(cnt);
    if (rc == 0)
        b->lp_milli = glp_get_obj_val(x->lp);
    return rc;
}

/* Lower is better. A share goes where the model's own GPU choice leaves the
 * least of that GPU; a whole-GPU pod where the fewest GPUs stay free. Ties,
 * and most of a whole pod's choice, go to the node whose CPU and memory left
 * stay in proportion to its GPU left: a node that runs out of CPU with GPUs
 * free strands them (openb's whole-GPU pods ask up to 1.5x a node's CPU per
 * GPU, its 810-milli shares a quarter). */
static double place_score(const ts_node *n, const ts_request *r, const ts_alloc *a)
{
    double gpu_left = (double)(n->milli_free - req_milli(r)) /
                      (double)(n->ngpu > 0 ? n->ngpu * TS_MILLI_PER_GPU : 1);
    double cpu_left = (double)(n->cpu_milli - n->cpu_used - r->cpu_milli) /
                      (double)(n->cpu_milli > 0 ? n->cpu_milli : 1);
    double mem_left = (double)(n->mem_mib - n->mem_used - r->mem_mib) /
                      (double)(n->mem_mib > 0 ? n->mem_mib : 1);
    double imbalance = fabs(cpu_left - gpu_left) + fabs(mem_left - gpu_left);
    if (ts_request_is_share(r)) {
        int sliver = TS_MILLI_PER_GPU - n->gpu[a->gpu[0]].milli_used - r->gpu_milli;
        return (double)sliver * BOUND_SLIVER_WEIGHT + imbalance;
    }
    return (double)(n->gpus_free - r->num_gpu) + imbalance * BOUND_IMBALANCE_WEIGHT;
}

/* The node where r scores best (-1 when it fits none), and its GPUs; with
 * type_quota, only on node types whose quota is left. */
static int best_node(ts_cluster *pc, const int *type_of, const double *type_quota,
                     const ts_request *r, ts_alloc *out)
{
    int best = -1;
    double best_score = 0.0;
    for (int n = 0; n < pc->nnodes; n++) {
        const ts_node *nd = &pc->nodes[n];
        if (type_quota && type_quota[type_of[n]] < 1.0 - BOUND_ROUND_EPS)
            continue;
        ts_alloc a;
        if (!ts_node_fits(nd, r) || ts_node_choose_gpus(nd, r, &a) != 0)
            continue;
        double s = place_score(nd, r, &a);
        if (best < 0 || s < best_score) {
            best = n;
            best_score = s;
            *out = a;
        }
    }
    if (best >= 0)
        out->node = best;
    return best;
}

/* The packing's order: more GPU first, then more CPU, then arrival. */
typedef struct pack_item {
    int64_t milli, cpu;
    int j;
} pack_item;

static int cmp_item(const void *pa, const void *pb)
{
    const pack_item *a = pa, *b = pb;
    if (a->milli != b->milli)
        return a->milli > b->milli ? -1 : 1;
    if (a->cpu != b->cpu)
        return a->cpu > b->cpu ? -1 : 1;
    return a->j - b->j;
}

/* The roundings pack_once knows: what the first pass takes from the LP. */
enum pack_quota {
    QUOTA_SHARE_SIZES, /* how many shares of each size (whole pods unlimited) */
    QUOTA_CLASSES,     /* how many pods of each class */
    QUOTA_CLASS_TYPES, /* how many of each class on each node type (where CPU
                        * per GPU differs by type and CPU is short) */
    QUOTA_KINDS
};

/* One rounding of the LP to a packing into allocs (npods entries). The first
 * pass places pods within the quota (the LP leaves out, say, the 810-milli
 * shares whose 190-milli slivers nothing fills, or on a cluster short of CPU
 * the pods that ask much CPU per GPU); the second offers every pod still out
 * to any node, which can only add. */
static int pack_once(lp_ctx *x, const sim_bound *b, enum pack_quota kind, ts_alloc *allocs,
                     const pack_item *order, int64_t *milli, int *placed, ts_err *err)
{
    const ts_workload *w = x->w;
    int T = x->ntypes;
    double *quota = calloc((size_t)w->nspecs * (size_t)T + 1, sizeof *quota);
    ts_cluster *pc = ts_cluster_clone(x->c);
    int rc = 0;
    *milli = 0;
    *placed = 0;
    if (!quota || !pc) {
        rc = ts_err_set(err, TS_ENOMEM, "out of memory");
        goto out;
    }
    /* a class's quota; QUOTA_SHARE_SIZES keeps it on the class of the
     * size's first index, shared by every class of that size */
    for (int k = 0; k < w->nspecs * T; k++) {
        int c = k / T;
        if (!x->xcol[k])
            continue;
        if (kind == QUOTA_CLASS_TYPES)
            quota[k] = glp_get_col_prim(x->lp, x->xcol[k]);
        else if (kind == QUOTA_CLASSES)
            quota[c] += glp_get_col_prim(x->lp, x->xcol[k]);
        else if (x->share_idx[c] >= 0)
            quota[x->size_class[x->share_idx[c]]] += glp_get_col_prim(x->lp, x->xcol[k]);
    }
    for (int i = 0; i < b->npods; i++)
        allocs[i].node = -1;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < b->npods; i++) {
            int j = order[i].j;
            const ts_pod *p = &w->pods[b->pods[j]];
            int c = (int)p->spec_key, si = x->share_idx[c];
            int q = kind == QUOTA_CLASSES ? c : si >= 0 ? x->size_class[si] : -1;
            const double *tq = NULL;
            if (kind == QUOTA_CLASS_TYPES)
                q = -1, tq = pass == 0 ? &quota[(size_t)c * (size_t)T] : NULL;
            if (allocs[j].node >= 0 || (req_milli(&p->req) == 0 && !x->cpu_pods) ||
                (pass == 0 && q >= 0 && quota[q] < 1.0 - BOUND_ROUND_EPS))
                continue;
            ts_alloc a;
            int n = best_node(pc, x->type_of, tq, &p->req, &a);
            if (n < 0)
                continue;
            if (tq)
                quota[(size_t)c * (size_t)T + (size_t)x->type_of[n]] -= 1.0;
            if (ts_node_assign(&pc->nodes[n], &p->req, &a) != 0) {
                rc = ts_err_set(err, TS_EINVAL, "bound: %s: the model refused its own choice",
                                p->name);
                goto out;
            }
            if (q >= 0)
                quota[q] -= 1.0;
            allocs[j] = a;
            (*placed)++;
            *milli += req_milli(&p->req);
        }
out:
    ts_cluster_free(pc);
    free(quota);
    return rc;
}

/* Every rounding; b keeps the packing that allocates most. */
static int pack(lp_ctx *x, sim_bound *b, ts_err *err)
{
    const ts_workload *w = x->w;
    pack_item *order = malloc((size_t)b->npods * sizeof *order + 1);
    ts_alloc *trial = malloc(((size_t)b->npods + 1) * sizeof *trial);
    int rc = 0;
    if (!order || !trial) {
        rc = ts_err_set(err, TS_ENOMEM, "out of memory");
        goto out;
    }
    for (int i = 0; i < b->npods; i++) {
        const ts_request *r = &w->pods[b->pods[i]].req;
        /* pods that must be placed go first, where the LP puts them */
        int64_t key = req_milli(r) == 0 && x->cpu_pods ? INT64_MAX : req_milli(r);
        order[i] = (pack_item){.milli = key, .cpu = r->cpu_milli, .j = i};
        b->allocs[i].node = -1;
    }
    qsort(order, (size_t)b->npods, sizeof *order, cmp_item);
    b->pack_milli = -1;
    for (int kind = 0; kind < QUOTA_KINDS && rc == 0; kind++) {
        int64_t milli;
        int placed;
        rc = pack_once(x, b, (enum pack_quota)kind, trial, order, &milli, &placed, err);
        int out_cpu = 0;
        for (int i = 0; x->cpu_pods && i < b->npods; i++)
            out_cpu += trial[i].node < 0 && req_milli(&w->pods[b->pods[i]].req) == 0;
        if (rc == 0 && (b->pack_milli < 0 || out_cpu < b->cpu_pods_out ||
                        (out_cpu == b->cpu_pods_out && milli > b->pack_milli))) {
            memcpy(b->allocs, trial, (size_t)b->npods * sizeof *trial);
            b->pack_milli = milli;
            b->placed = placed;
            b->cpu_pods_out = out_cpu;
        }
    }
out:
    free(trial);
    free(order);
    return rc;
}

static void ctx_free(lp_ctx *x)
{
    if (x->lp)
        glp_delete_prob(x->lp);
    for (int t = 0; t < x->ntypes; t++)
        free(x->types[t].link_row);
    free(x->node_block);
    free(x->class_block);
}

/* Classes' counts and the distinct share sizes; TS_EINVAL for MIG. */
static int build_classes(lp_ctx *x, const sim_bound *b, ts_err *err)
{
    const ts_workload *w = x->w;
    size_t nspecs = (size_t)w->nspecs;
    ts_block_part parts[] = {TS_BLOCK_PART(x->count, nspecs), TS_BLOCK_PART(x->class_row, nspecs),
                             TS_BLOCK_PART(x->share_idx, nspecs),
                             TS_BLOCK_PART(x->xcol, nspecs * (size_t)x->ntypes)};
    if (!(x->class_block = ts_block_alloc(parts, sizeof parts / sizeof *parts)))
        return ts_err_set(err, TS_ENOMEM, "out of memory");
    for (int i = 0; i < b->npods; i++) {
        const ts_pod *p = &w->pods[b->pods[i]];
        if (p->req.mig_profile >= 0)
            return ts_err_set(err, TS_EINVAL, "%s: mig_profile: the bound does not model MIG",
                              p->name);
        x->count[p->spec_key]++;
    }
    for (int k = 0; k < w->nspecs; k++) {
        x->share_idx[k] = -1;
        if (!x->count[k] || !ts_request_is_share(&w->specs[k]) || w->specs[k].gpu_milli <= 0)
            continue;
        int s = 0;
        while (s < x->nsizes && x->sizes[s] != w->specs[k].gpu_milli)
            s++;
        if (s == x->nsizes) {
            x->size_class[s] = k;
            x->sizes[x->nsizes++] = w->specs[k].gpu_milli;
        }
        x->share_idx[k] = s;
    }
    return 0;
}

int sim_bound_solve(const ts_cluster *c, const ts_workload *w, const int *pods, int npods,
                    unsigned flags, sim_bound *b, ts_err *err)
{
    memset(b, 0, sizeof *b);
    b->pods = pods;
    b->npods = npods;
    b->cap_milli = c->total_gpus * TS_MILLI_PER_GPU;
    for (int i = 0; i < npods; i++)
        b->arrived_milli += req_milli(&w->pods[pods[i]].req);
    lp_ctx x = {.c = c, .w = w, .cpu_pods = (flags & SIM_BOUND_PLACE_CPU_PODS) != 0};
    int rc;
    b->allocs = calloc((size_t)npods + 1, sizeof *b->allocs);
    if (!b->allocs || (rc = build_types(&x)) != 0) {
        rc = ts_err_set(err, TS_ENOMEM, "out of memory");
        goto out;
    }
    if ((rc = build_classes(&x, b, err)) != 0)
        goto out;
    glp_term_out(GLP_OFF);
    x.lp = glp_create_prob();
    glp_set_obj_dir(x.lp, GLP_MAX);
    if ((rc = build_rows(&x)) != 0 || (rc = add_class_cols(&x)) != 0) {
        ts_err_set(err, rc, "out of memory");
        goto out;
    }
    b->ntypes = x.ntypes;
    for (int k = 0; k < w->nspecs; k++)
        b->nclasses += x.class_row[k] != 0;
    if ((rc = solve_lp(&x, b, err)) != 0 ||
        (!(flags & SIM_BOUND_LP_ONLY) && (rc = pack(&x, b, err)) != 0))
        goto out;
out:
    ctx_free(&x);
    return rc;
}

int sim_bound_check(const ts_cluster *c, const ts_workload *w, const sim_bound *b, ts_err *err)
{
    ts_cluster *pc = ts_cluster_clone(c);
    if (!pc)
        return ts_err_set(err, TS_ENOMEM, "out of memory");
    ts_cluster_reset(pc);
    int64_t milli = 0;
    int rc = 0;
    for (int i = 0; i < b->npods && rc == 0; i++) {
        const ts_alloc *a = &b->allocs[i];
        const ts_pod *p = &w->pods[b->pods[i]];
        if (a->node < 0)
            continue;
        if (a->node >= pc->nnodes)
            rc = ts_err_set(err, TS_EINVAL, "packing: %s: node %d out of range", p->name,
                            a->node);
        else if (!ts_node_fits(&pc->nodes[a->node], &p->req) ||
                 (ts_request_is_share(&p->req) &&
                  !ts_node_gpu_takes_share(&pc->nodes[a->node], a->gpu[0], &p->req)) ||
                 ts_node_assign(&pc->nodes[a->node], &p->req, a) != 0)
            rc = ts_err_set(err, TS_EINVAL, "packing: %s: does not fit node %s", p->name,
                            pc->nodes[a->node].name);
        else
            milli += req_milli(&p->req);
    }
    if (rc == 0 && milli != b->pack_milli)
        rc = ts_err_set(err, TS_EINVAL, "packing: allocates %lld milli, reported %lld",
                        (long long)milli, (long long)b->pack_milli);
    if (rc == 0 && b->cpu_pods_out == 0 &&
        (double)milli > b->lp_milli + 1e-6 * (double)b->cap_milli)
        rc = ts_err_set(err, TS_EINVAL, "packing: %lld milli passes the bound %.1f",
                        (long long)milli, b->lp_milli);
    ts_cluster_free(pc);
    return rc;
}

void sim_bound_fini(sim_bound *b)
{
    free(b->allocs);
    b->allocs = NULL;
}
