/*
 * gang_internal.h - internal: the gang index and a gang's plan, shared by
 * gang.c (the index, the search by level and subtree, packing, explaining
 * a failure) and gang_order.c (the order of equal-free-GPU candidates by the
 * fragmentation measure and the image's pull seconds). A plan works on
 * scratch copies (shadows) of the nodes it touched; gang_view reads a node
 * as planned so far.
 */
#ifndef TS_SCHED_GANG_INTERNAL_H
#define TS_SCHED_GANG_INTERNAL_H

#include "tessera/gang.h"

#define NBUCKET (TS_NODE_MAX_GPUS + 1)

struct ts_gang_index {
    ts_cluster *c;
    const ts_topo *topo; /* NULL when the cluster has no tree */
    int nlevels;         /* topology levels (GPU level included), 0 without */
    int nv, nnodes, words;
    int64_t *v_free;     /* [nv] free whole GPUs in the subtree */
    int32_t *v_full;     /* [nv] fully free nodes in the subtree */
    int32_t *v_hist;     /* [nv * NBUCKET] nodes by free whole GPUs */
    int *v_nstart;       /* [nv + 1] CSR: subtree nodes of each vertex */
    int *v_nodes;
    int *d_start;        /* [nlevels + 1] CSR: vertices by depth */
    int *d_verts;
    uint8_t *n_free;     /* [nnodes] free whole GPUs as last seen */
    uint8_t *n_full;
    uint8_t *n_off;      /* [nnodes] taken out of placement (drained) */
    int64_t free, full;
    int32_t hist[NBUCKET];
    uint64_t *bucket;    /* [NBUCKET * words] node bitset per free count */
    int *slot;           /* [nnodes] shadow slot while planning, -1 */
    void *block;         /* the arrays sized once at build (all but v_nodes) */
};

typedef struct plan {
    ts_gang_index *ix;
    const ts_gang_spec *sp;
    ts_alloc *out;
    int *order;        /* task indices, most GPUs first */
    int need, kmin, kmax;
    bool identical;
    ts_node *shadow;   /* copies of the nodes the plan touched */
    int *shadow_node, *shadow_tasks;
    int nshadow, shadow_cap;
    int8_t tmpl[TS_NODE_MAX_GPUS][TS_NODE_MAX_GPUS]; /* rail: GPUs of the k-th task */
    bool tmpl_set[TS_NODE_MAX_GPUS];
    int *cand;         /* candidate nodes of the subtree, best fit first */
    int *cand_key;
    int ncand;
    ts_typical typ;    /* spec->typical, memory-aware; n = 0 when none */
    double w;          /* its stranded-GPU weight */
    double *fkey;      /* [nnodes + 1] growth of the measure per candidate */
    int packed;        /* tasks the last pack placed before it stopped */
} plan;

/* Free and usable (not MIG) whole GPUs of n. */
static inline void gang_node_whole(const ts_node *n, int *free_out, int *cap_out)
{
    int f = 0, cap = 0;
    for (int i = 0; i < n->ngpu; i++) {
        const ts_gpu *g = &n->gpu[i];
        if (g->mode == TS_GPU_MIG)
            continue;
        cap++;
        if (g->ntasks == 0 && g->milli_used == 0)
            f++;
    }
    *free_out = f;
    *cap_out = cap;
}

static inline int gang_node_free(const ts_node *n)
{
    int f, cap;
    gang_node_whole(n, &f, &cap);
    return f;
}

/* Node as planned so far: its shadow when the plan touched it. */
static inline const ts_node *gang_view(const plan *p, int node)
{
    int s = p->ix->slot[node];
    return s >= 0 ? &p->shadow[s] : &p->ix->c->nodes[node];
}

/* Within each run of candidates with equal free GPUs (the order best fit
 * gives), the first `head` that can take task r are reordered by least
 * growth of the measure, then (with an image price) fewest pull seconds,
 * then node index (gang_order.c). */
void gang_frag_order(plan *p, const ts_request *r, int head);

#endif
