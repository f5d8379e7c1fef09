/*
 * gang.c - all-or-nothing placement of a gang inside one topology subtree.
 *
 * Index: per topology vertex above the GPU level, free whole GPUs, fully free
 * nodes and a histogram of its nodes by free whole GPUs (0..16); per vertex
 * the nodes of its subtree in index order (CSR); globally one bitset of nodes
 * per free count. A node change costs O(ngpu + depth). A gang query, per
 * level tried: "any" reads the global counts; a topology depth d reads the
 * V_d vertices' histograms, O(V_d * 17), never their nodes; "node" walks the
 * bitsets from the needed free count up, O(nodes/64 + candidates). Then it
 * packs inside the chosen subtree only: O(n_sub log n_sub + tasks) for
 * identical tasks (best fit is one pass over nodes sorted by free GPUs), plus
 * O(touched x ngpu) to commit; "any" takes its sorted list from the bitsets.
 * Planning runs on scratch copies of the touched nodes, so a gang that fails
 * leaves the cluster untouched byte for byte and nothing needs rolling back.
 * With an expected workload (spec->typical, gang_order.c), nodes with equal
 * free GPUs are taken least growth of the fragmentation measure first; only
 * the head of each run that packing can reach (tasks left + FRAG_HEAD_EXTRA
 * nodes) is measured, so the cost stays O(17 x (tasks + extra) x classes x
 * GPUs).
 * With an image price per node (spec->node_cost_s), as many nodes again of
 * each run that hold more of the image join the measured head, and equal
 * growths go to the node with the fewest pull seconds.
 */
#include "sched/gang_internal.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tessera/grow.h"

#define SHADOW_INITIAL_NODES 16
#define FRAG_HEAD_EXTRA 8 /* nodes measured beyond the tasks left, per run */

/* ---- levels and reasons ------------------------------------------------ */

int ts_gang_level_parse(const ts_cluster *c, const char *name, ts_err *err)
{
    if (name && strcmp(name, "node") == 0)
        return TS_GANG_LEVEL_NODE;
    if (name && strcmp(name, "any") == 0)
        return TS_GANG_LEVEL_ANY;
    int lv = c->topo && name ? ts_topo_level_index(c->topo, name) : -1;
    if (lv < 0 || lv >= ts_topo_nlevels(c->topo) - 1)
        return ts_err_set(err, TS_EINVAL, "topology level \"%s\": expected node, any or a "
                          "level of the cluster above gpu", name ? name : "(null)");
    return lv;
}

const char *ts_gang_level_name(const ts_cluster *c, int level)
{
    if (level == TS_GANG_LEVEL_NODE)
        return "node";
    if (level == TS_GANG_LEVEL_ANY)
        return "any";
    const char *s = c->topo && level >= 0 ? ts_topo_level_name(c->topo, level) : NULL;
    return s ? s : "?";
}

const char *ts_gang_reason_name(int reason)
{
    static const char *const names[] = {"placed", "capacity", "topology", "fragmentation"};
    return reason >= 0 && reason <= TS_GANG_FRAGMENTATION ? names[reason] : "?";
}

/* Levels ordered narrow to wide: node 0, then depths bottom-up, any last. */
static int top_rank(const ts_gang_index *ix) { return ix->topo ? ix->nlevels : 1; }

static int level_rank(const ts_gang_index *ix, int level)
{
    if (level == TS_GANG_LEVEL_NODE)
        return 0;
    if (level == TS_GANG_LEVEL_ANY)
        return top_rank(ix);
    if (ix->topo && level >= 0 && level <= ix->nlevels - 2)
        return ix->nlevels - 1 - level;
    return -1;
}

static int rank_level(const ts_gang_index *ix, int rank)
{
    if (rank == 0)
        return TS_GANG_LEVEL_NODE;
    if (rank == top_rank(ix))
        return TS_GANG_LEVEL_ANY;
    return ix->nlevels - 1 - rank;
}

/* ---- the index --------------------------------------------------------- */

static void bit_set(uint64_t *w, int i) { w[i / 64] |= UINT64_C(1) << (i % 64); }
static void bit_clear(uint64_t *w, int i) { w[i / 64] &= ~(UINT64_C(1) << (i % 64)); }

void ts_gang_index_node_changed(ts_gang_index *ix, int node)
{
    if (node < 0 || node >= ix->nnodes)
        return;
    const ts_node *n = &ix->c->nodes[node];
    int f, cap;
    gang_node_whole(n, &f, &cap);
    if (ix->n_off[node])
        f = 0;
    int full = cap > 0 && f == cap;
    int of = ix->n_free[node], ofull = ix->n_full[node];
    if (f == of && full == ofull)
        return;
    int df = f - of, dfull = full - ofull;
    ix->free += df;
    ix->full += dfull;
    ix->hist[of]--;
    ix->hist[f]++;
    bit_clear(ix->bucket + (size_t)of * (size_t)ix->words, node);
    bit_set(ix->bucket + (size_t)f * (size_t)ix->words, node);
    for (int v = ix->topo ? n->topo_vertex : -1; v >= 0; v = ts_topo_parent(ix->topo, v)) {
        ix->v_free[v] += df;
        ix->v_full[v] += dfull;
        ix->v_hist[(size_t)v * NBUCKET + (size_t)of]--;
        ix->v_hist[(size_t)v * NBUCKET + (size_t)f]++;
    }
    ix->n_free[node] = (uint8_t)f;
    ix->n_full[node] = (uint8_t)full;
}

void ts_gang_index_node_enable(ts_gang_index *ix, int node, bool on)
{
    if (node < 0 || node >= ix->nnodes || ix->n_off[node] == !on)
        return;
    ix->n_off[node] = !on;
    ts_gang_index_node_changed(ix, node);
}

bool ts_gang_index_node_enabled(const ts_gang_index *ix, int node)
{
    return node >= 0 && node < ix->nnodes && !ix->n_off[node];
}

void ts_gang_index_free(ts_gang_index *ix)
{
    if (!ix)
        return;
    free(ix->v_nodes);
    free(ix->block);
    free(ix);
}

/* Subtree node lists and per-depth vertex lists; all counts start at "every
 * node has 0 free", then each node is read once through node_changed. */
static int index_build(ts_gang_index *ix)
{
    ts_cluster *c = ix->c;
    size_t nv = (size_t)ix->nv, nn = (size_t)ix->nnodes;
    ts_block_part parts[] = {
        TS_BLOCK_PART(ix->v_free, nv + 1),
        TS_BLOCK_PART(ix->v_full, nv + 1),
        TS_BLOCK_PART(ix->v_hist, (nv + 1) * NBUCKET),
        TS_BLOCK_PART(ix->v_nstart, nv + 2),
        TS_BLOCK_PART(ix->d_start, (size_t)ix->nlevels + 2),
        TS_BLOCK_PART(ix->d_verts, nv + 1),
        TS_BLOCK_PART(ix->n_free, nn + 1),
        TS_BLOCK_PART(ix->n_off, nn + 1),
        TS_BLOCK_PART(ix->n_full, nn + 1),
        TS_BLOCK_PART(ix->bucket, (size_t)NBUCKET * (size_t)ix->words + 1),
        TS_BLOCK_PART(ix->slot, nn + 1)};
    if (!(ix->block = ts_block_alloc(parts, sizeof parts / sizeof *parts)))
        return TS_ENOMEM;
    for (size_t i = 0; i < nn; i++)
        ix->slot[i] = -1;
    /* subtree membership, counted then filled in node order */
    size_t total = 0;
    for (int i = 0; i < ix->nnodes; i++)
        for (int v = ix->topo ? c->nodes[i].topo_vertex : -1; v >= 0;
             v = ts_topo_parent(ix->topo, v)) {
            ix->v_nstart[v + 1]++;
            total++;
        }
    for (int v = 0; v < ix->nv; v++)
        ix->v_nstart[v + 1] += ix->v_nstart[v];
    ix->v_nodes = malloc((total + 1) * sizeof *ix->v_nodes);
    int *fill = malloc((nv + 1) * sizeof *fill);
    if (!ix->v_nodes || !fill) {
        free(fill);
        return TS_ENOMEM;
    }
    memcpy(fill, ix->v_nstart, nv * sizeof *fill);
    for (int i = 0; i < ix->nnodes; i++)
        for (int v = ix->topo ? c->nodes[i].topo_vertex : -1; v >= 0;
             v = ts_topo_parent(ix->topo, v))
            ix->v_nodes[fill[v]++] = i;
    free(fill);
    /* vertices by depth (levels above the GPUs only) */
    for (int v = 0; v < ix->nv; v++) {
        int d = ts_topo_depth(ix->topo, v);
        if (d >= 0 && d <= ix->nlevels - 2)
            ix->d_start[d + 1]++;
        ix->v_hist[(size_t)v * NBUCKET] = ix->v_nstart[v + 1] - ix->v_nstart[v];
    }
    for (int d = 0; d < ix->nlevels; d++)
        ix->d_start[d + 1] += ix->d_start[d];
    int dfill[TS_TOPO_MAX_LEVELS + 1];
    for (int d = 0; d <= ix->nlevels && d <= TS_TOPO_MAX_LEVELS; d++)
        dfill[d] = ix->d_start[d];
    for (int v = 0; v < ix->nv; v++) {
        int d = ts_topo_depth(ix->topo, v);
        if (d >= 0 && d <= ix->nlevels - 2)
            ix->d_verts[dfill[d]++] = v;
    }
    ix->hist[0] = ix->nnodes;
    for (int i = 0; i < ix->nnodes; i++)
        bit_set(ix->bucket, i);
    for (int i = 0; i < ix->nnodes; i++)
        ts_gang_index_node_changed(ix, i);
    return 0;
}

ts_gang_index *ts_gang_index_new(ts_cluster *c, ts_err *err)
{
    ts_gang_index *ix = calloc(1, sizeof *ix);
    if (!ix) {
        ts_err_set(err, TS_ENOMEM, "out of memory for the gang index");
        return NULL;
    }
    ix->c = c;
    ix->topo = c->topo;
    ix->nlevels = c->topo ? ts_topo_nlevels(c->topo) : 0;
    ix->nv = c->topo ? ts_topo_nvertices(c->topo) : 0;
    ix->nnodes = c->nnodes;
    ix->words = (c->nnodes + 63) / 64;
    if (index_build(ix) != 0) {
        ts_gang_index_free(ix);
        ts_err_set(err, TS_ENOMEM, "out of memory for the gang index");
        return NULL;
    }
    return ix;
}

int64_t ts_gang_index_free_gpus(const ts_gang_index *ix, int vertex)
{
    if (vertex == -1)
        return ix->free;
    return vertex >= 0 && vertex < ix->nv ? ix->v_free[vertex] : -1;
}

int64_t ts_gang_index_free_nodes(const ts_gang_index *ix, int vertex)
{
    if (vertex == -1)
        return ix->full;
    return vertex >= 0 && vertex < ix->nv ? ix->v_full[vertex] : -1;
}

int ts_gang_index_node_free(const ts_gang_index *ix, int node)
{
    return node >= 0 && node < ix->nnodes ? ix->n_free[node] : -1;
}

/* ---- planning on scratch copies ----------------------------------------- */

static void plan_reset(plan *p)
{
    for (int s = 0; s < p->nshadow; s++)
        p->ix->slot[p->shadow_node[s]] = -1;
    p->nshadow = 0;
    memset(p->tmpl_set, 0, sizeof p->tmpl_set);
}

static int shadow_slot(plan *p, int node)
{
    int s = p->ix->slot[node];
    if (s >= 0)
        return s;
    ts_block_part parts[] = {TS_GROW_PART(p->shadow), TS_GROW_PART(p->shadow_node),
                             TS_GROW_PART(p->shadow_tasks)};
    if (ts_grow_parts(parts, 3, &p->shadow_cap, p->nshadow + 1, SHADOW_INITIAL_NODES) != 0)
        return TS_ENOMEM;
    s = p->nshadow++;
    p->shadow[s] = p->ix->c->nodes[node];
    p->shadow_node[s] = node;
    p->shadow_tasks[s] = 0;
    p->ix->slot[node] = s;
    return s;
}

/* Tries task t on node (as planned so far): 1 placed, 0 does not fit,
 * negative on allocation failure. */
static int try_task(plan *p, int node, int t)
{
    const ts_request *r = &p->sp->tasks[t];
    const ts_node *n = gang_view(p, node);
    if (!ts_node_fits(n, r))
        return 0;
    ts_alloc a;
    if (ts_node_choose_gpus(n, r, &a) != 0)
        return 0;
    int k = p->ix->slot[node] >= 0 ? p->shadow_tasks[p->ix->slot[node]] : 0;
    if (p->sp->rail_aligned && k < TS_NODE_MAX_GPUS && p->tmpl_set[k]) {
        for (int j = 0; j < r->num_gpu; j++) {
            int g = p->tmpl[k][j];
            if (g >= n->ngpu || n->gpu[g].mode == TS_GPU_MIG || n->gpu[g].ntasks != 0 ||
                n->gpu[g].milli_used != 0)
                return 0;
            a.gpu[j] = (int8_t)g;
        }
    }
    int s = shadow_slot(p, node);
    if (s < 0)
        return s;
    a.node = node;
    if (ts_node_assign(&p->shadow[s], r, &a) != 0)
        return 0;
    if (p->sp->rail_aligned && k < TS_NODE_MAX_GPUS && !p->tmpl_set[k]) {
        memcpy(p->tmpl[k], a.gpu, sizeof p->tmpl[k]);
        p->tmpl_set[k] = true;
    }
    p->shadow_tasks[s]++;
    p->out[t] = a;
    return 1;
}

static int cmp_key_then_node(const void *a, const void *b)
{
    const int *x = a, *y = b; /* pairs {key, node} */
    if (x[0] != y[0])
        return x[0] < y[0] ? -1 : 1;
    return x[1] < y[1] ? -1 : x[1] > y[1];
}

/* Re-sorts the candidates by free GPUs as planned so far (best fit first). */
static void cand_sort(plan *p)
{
    for (int i = 0; i < p->ncand; i++) {
        p->cand_key[2 * i] = gang_node_free(gang_view(p, p->cand[i]));
        p->cand_key[2 * i + 1] = p->cand[i];
    }
    qsort(p->cand_key, (size_t)p->ncand, 2 * sizeof(int), cmp_key_then_node);
    for (int i = 0; i < p->ncand; i++)
        p->cand[i] = p->cand_key[2 * i + 1];
}

/* Fills p->cand with the subtree's nodes that can take the smallest task.
 * "any" reads them from the bitsets, already ordered. */
static void cand_collect(plan *p, int level, int sub)
{
    ts_gang_index *ix = p->ix;
    p->ncand = 0;
    if (level == TS_GANG_LEVEL_NODE) {
        p->cand[p->ncand++] = sub;
    } else if (level == TS_GANG_LEVEL_ANY) {
        for (int b = p->kmin; b < NBUCKET; b++) {
            const uint64_t *w = ix->bucket + (size_t)b * (size_t)ix->words;
            for (int i = 0; i < ix->words; i++)
                for (uint64_t m = w[i]; m; m &= m - 1)
                    p->cand[p->ncand++] = i * 64 + __builtin_ctzll(m);
        }
        return;
    } else {
        for (int j = ix->v_nstart[sub]; j < ix->v_nstart[sub + 1]; j++)
            if (ix->n_free[ix->v_nodes[j]] >= p->kmin)
                p->cand[p->ncand++] = ix->v_nodes[j];
    }
    cand_sort(p);
}


/* Best-fit packing inside one subtree. Tasks go most GPUs first; within a
 * run of equal sizes the cursor never moves back (a node that could not take
 * the task still cannot), so identical tasks cost one pass. */
static int pack(plan *p, int level, int sub)
{
    plan_reset(p);
    cand_collect(p, level, sub);
    int cursor = 0, prev_k = -1;
    for (int oi = 0; oi < p->sp->ntasks; oi++) {
        int t = p->order[oi];
        int k = p->sp->tasks[t].num_gpu;
        if (k != prev_k) {
            if (prev_k >= 0)
                cand_sort(p);
            gang_frag_order(p, &p->sp->tasks[t], p->sp->ntasks - oi + FRAG_HEAD_EXTRA);
            cursor = 0;
            prev_k = k;
        }
        int placed = 0;
        for (; cursor < p->ncand; cursor++) {
            placed = try_task(p, p->cand[cursor], t);
            if (placed)
                break;
        }
        if (placed < 0)
            return placed;
        if (!placed) {
            p->packed = oi;
            return 0;
        }
    }
    p->packed = p->sp->ntasks;
    return 1;
}

/* Can the histogram hold the gang's shape (ignoring CPU, memory, model)? */
static bool hist_holds(const plan *p, const int32_t *hist)
{
    if (p->identical) {
        int64_t tasks = 0;
        for (int b = p->kmin; b < NBUCKET; b++)
            tasks += (int64_t)hist[b] * (b / p->kmin);
        return tasks >= p->sp->ntasks;
    }
    for (int b = p->kmax; b < NBUCKET; b++)
        if (hist[b] > 0)
            return true;
    return false;
}

static int cmp_free_then_vertex(const void *a, const void *b)
{
    const int64_t *x = a, *y = b; /* pairs {free, vertex} */
    if (x[0] != y[0])
        return x[0] < y[0] ? -1 : 1;
    return x[1] < y[1] ? -1 : x[1] > y[1];
}

/* Tries one level: subtrees smallest leftover first, first that packs wins.
 * 1 placed (*sub set), 0 not at this level, negative on allocation failure. */
static int try_level(plan *p, int level, int *sub)
{
    ts_gang_index *ix = p->ix;
    if (level == TS_GANG_LEVEL_ANY) {
        if (ix->free < p->need || !hist_holds(p, ix->hist))
            return 0;
        *sub = -1;
        return pack(p, level, -1);
    }
    if (level == TS_GANG_LEVEL_NODE) {
        for (int b = p->need; b < NBUCKET; b++) {
            const uint64_t *w = ix->bucket + (size_t)b * (size_t)ix->words;
            for (int i = 0; i < ix->words; i++)
                for (uint64_t m = w[i]; m; m &= m - 1) {
                    int node = i * 64 + __builtin_ctzll(m);
                    int rc = pack(p, level, node);
                    if (rc != 0) {
                        *sub = node;
                        return rc;
                    }
                }
        }
        return 0;
    }
    int lo = ix->d_start[level], hi = ix->d_start[level + 1];
    int64_t *vs = malloc((size_t)(hi - lo + 1) * 2 * sizeof *vs);
    if (!vs)
        return TS_ENOMEM;
    int n = 0;
    for (int j = lo; j < hi; j++) {
        int v = ix->d_verts[j];
        if (ix->v_free[v] >= p->need && hist_holds(p, ix->v_hist + (size_t)v * NBUCKET)) {
            vs[2 * n] = ix->v_free[v];
            vs[2 * n + 1] = v;
            n++;
        }
    }
    qsort(vs, (size_t)n, 2 * sizeof *vs, cmp_free_then_vertex);
    int rc = 0;
    for (int j = 0; j < n && rc == 0; j++) {
        rc = pack(p, level, (int)vs[2 * j + 1]);
        if (rc == 1)
            *sub = (int)vs[2 * j + 1];
    }
    free(vs);
    return rc;
}

/* ---- explaining a failure ---------------------------------------------- */

static const char *sub_name(const ts_gang_index *ix, int level, int sub)
{
    if (level == TS_GANG_LEVEL_NODE)
        return ix->c->nodes[sub].name;
    if (level == TS_GANG_LEVEL_ANY)
        return "the cluster";
    return ts_topo_name(ix->topo, sub);
}

/* Lowest-index node with exactly b free whole GPUs, or -1. */
static int first_node(const ts_gang_index *ix, int b)
{
    const uint64_t *w = ix->bucket + (size_t)b * (size_t)ix->words;
    for (int i = 0; i < ix->words; i++)
        if (w[i])
            return i * 64 + __builtin_ctzll(w[i]);
    return -1;
}

/* ", 3 of 4 tasks fit in l0": how far the gang gets in subtree sub of level
 * (the whole cluster for TS_GANG_LEVEL_ANY) on a trial pack, for the why. */
static void explain_tasks(plan *p, int level, int sub, const char *where, ts_gang_result *res)
{
    if (p->sp->ntasks < 2 || (level != TS_GANG_LEVEL_ANY && sub < 0))
        return;
    int rc = pack(p, level, sub);
    int fit = rc < 0 ? -1 : p->packed;
    plan_reset(p);
    size_t len = strlen(res->why);
    if (fit >= 0 && len < sizeof res->why)
        snprintf(res->why + len, sizeof res->why - len, "; %d of %d tasks fit in %s", fit,
                 p->sp->ntasks, where);
}

static void explain(plan *p, int level, ts_gang_result *res)
{
    const ts_gang_index *ix = p->ix;
    const char *lname = ts_gang_level_name(ix->c, level);
    res->level = level;
    res->subtree = -1;
    if (ix->free < p->need) {
        res->reason = TS_GANG_CAPACITY;
        snprintf(res->why, sizeof res->why, "needs %d GPUs, %lld free in the cluster",
                 p->need, (long long)ix->free);
        explain_tasks(p, TS_GANG_LEVEL_ANY, -1, "the cluster", res);
        return;
    }
    /* the widest subtree at the required level, and the smallest that holds it */
    int64_t most = -1, fit = -1;
    int most_sub = -1, fit_sub = -1;
    if (level == TS_GANG_LEVEL_ANY) {
        most = fit = ix->free;
    } else if (level == TS_GANG_LEVEL_NODE) {
        for (int b = 0; b < NBUCKET; b++) {
            int first = first_node(ix, b);
            if (first < 0)
                continue;
            most = b;
            most_sub = first;
            if (b >= p->need && fit < 0) {
                fit = b;
                fit_sub = first;
            }
        }
    } else {
        for (int j = ix->d_start[level]; j < ix->d_start[level + 1]; j++) {
            int v = ix->d_verts[j];
            if (ix->v_free[v] > most)
                most = ix->v_free[v], most_sub = v;
            if (ix->v_free[v] >= p->need && (fit < 0 || ix->v_free[v] < fit))
                fit = ix->v_free[v], fit_sub = v;
        }
    }
    if (most < p->need) {
        res->reason = TS_GANG_TOPOLOGY;
        snprintf(res->why, sizeof res->why,
                 "needs %d GPUs within one %s; the most free in any %s is %lld (%s)", p->need,
                 lname, lname, (long long)(most < 0 ? 0 : most),
                 most_sub >= 0 ? sub_name(ix, level, most_sub) : "none");
        if (most_sub >= 0)
            explain_tasks(p, level, most_sub, sub_name(ix, level, most_sub), res);
        return;
    }
    res->reason = TS_GANG_FRAGMENTATION;
    res->subtree = fit_sub;
    snprintf(res->why, sizeof res->why,
             "%s %s has %lld free GPUs for %d, but not in a usable shape for %d task%s of "
             "%s%d GPU%s%s", lname, sub_name(ix, level, fit_sub), (long long)fit, p->need,
             p->sp->ntasks, p->sp->ntasks == 1 ? "" : "s", p->identical ? "" : "up to ",
             p->kmax, p->kmax == 1 ? "" : "s", p->sp->rail_aligned ? " (rail-aligned)" : "");
    explain_tasks(p, level, fit_sub,
                  level == TS_GANG_LEVEL_ANY ? "the cluster" : sub_name(ix, level, fit_sub), res);
}

/* ---- placing and releasing -------------------------------------------- */

static int check_spec(const ts_gang_index *ix, const ts_gang_spec *sp, ts_err *err)
{
    if (!sp->tasks || sp->ntasks < 1 || sp->ntasks > TS_GANG_MAX_TASKS)
        return ts_err_set(err, TS_EINVAL, "gang.ntasks: must be 1..%d", TS_GANG_MAX_TASKS);
    for (int i = 0; i < sp->ntasks; i++) {
        const ts_request *r = &sp->tasks[i];
        int rc = ts_request_check(r, err);
        if (rc != 0) {
            ts_err_prefix(err, "gang.tasks[%d]: ", i);
            return rc;
        }
        if (r->num_gpu < 1 || r->gpu_milli < TS_MILLI_PER_GPU || r->mig_profile >= 0)
            return ts_err_set(err, TS_EINVAL, "gang.tasks[%d]: gang tasks must request whole "
                              "GPUs", i);
        if (sp->rail_aligned && r->num_gpu != sp->tasks[0].num_gpu)
            return ts_err_set(err, TS_EINVAL, "gang.tasks[%d]: rail alignment needs every "
                              "task to request the same number of GPUs", i);
    }
    int req = level_rank(ix, sp->required_level), pref = level_rank(ix, sp->preferred_level);
    if (req < 0)
        return ts_err_set(err, TS_EINVAL, "gang.required_level: %d is not a level of this "
                          "cluster", sp->required_level);
    if (pref < 0 || pref > req)
        return ts_err_set(err, TS_EINVAL, "gang.preferred_level: must be a level no wider "
                          "than the required one (%s)",
                          ts_gang_level_name(ix->c, sp->required_level));
    return 0;
}

static int cmp_task_desc(const void *a, const void *b, const ts_request *tasks)
{
    int x = *(const int *)a, y = *(const int *)b;
    if (tasks[x].num_gpu != tasks[y].num_gpu)
        return tasks[x].num_gpu > tasks[y].num_gpu ? -1 : 1;
    return x < y ? -1 : x > y;
}

/* Insertion sort of task order (qsort has no context argument in C11; gangs
 * are usually identical, which is the sorted case, O(n)). */
static void order_tasks(int *order, int n, const ts_request *tasks)
{
    for (int i = 0; i < n; i++) {
        int t = order[i] = i, j = i;
        while (j > 0 && cmp_task_desc(&order[j - 1], &t, tasks) > 0) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = t;
    }
}

static int commit(plan *p, ts_err *err)
{
    ts_cluster *c = p->ix->c;
    const ts_gang_spec *sp = p->sp;
    for (int t = 0; t < sp->ntasks; t++) {
        int rc = ts_node_assign(&c->nodes[p->out[t].node], &sp->tasks[t], &p->out[t]);
        if (rc != 0) { /* the plan ran on copies of these very nodes: a bug */
            assert(!"gang commit diverged from its plan");
            while (--t >= 0)
                ts_node_release(&c->nodes[p->out[t].node], &p->out[t]);
            return ts_err_set(err, rc, "gang: commit diverged from the plan");
        }
    }
    for (int s = 0; s < p->nshadow; s++)
        ts_gang_index_node_changed(p->ix, p->shadow_node[s]);
    return 0;
}

int ts_gang_place(ts_gang_index *ix, const ts_gang_spec *sp, ts_alloc *out,
                  ts_gang_result *res, ts_err *err)
{
    ts_gang_result scratch;
    if (!res)
        res = &scratch;
    memset(res, 0, sizeof *res);
    res->subtree = -1;
    int rc = check_spec(ix, sp, err);
    if (rc != 0)
        return rc;
    plan p;
    memset(&p, 0, sizeof p);
    p.ix = ix;
    p.sp = sp;
    p.out = out;
    p.kmin = TS_NODE_MAX_GPUS + 1;
    p.identical = true;
    for (int i = 0; i < sp->ntasks; i++) {
        int k = sp->tasks[i].num_gpu;
        p.need += k;
        p.kmin = k < p.kmin ? k : p.kmin;
        p.kmax = k > p.kmax ? k : p.kmax;
        p.identical = p.identical && k == sp->tasks[0].num_gpu;
    }
    p.order = malloc((size_t)sp->ntasks * sizeof *p.order);
    p.cand = malloc((size_t)(ix->nnodes + 1) * sizeof *p.cand);
    p.cand_key = malloc((size_t)(ix->nnodes + 1) * 2 * sizeof *p.cand_key);
    rc = !p.order || !p.cand || !p.cand_key ? TS_ENOMEM : 0;
    if (rc == 0 && ((sp->typical && sp->typical->n > 0) || sp->node_cost_s)) {
        if (sp->typical && sp->typical->n > 0) {
            p.typ = *sp->typical;
            p.typ.mem_aware = p.typ.mem_mib != NULL;
            p.w = ts_frag_stranded_weight(&p.typ);
        }
        p.fkey = malloc((size_t)(ix->nnodes + 1) * sizeof *p.fkey);
        rc = p.fkey ? 0 : TS_ENOMEM;
    }
    if (rc == 0) {
        order_tasks(p.order, sp->ntasks, sp->tasks);
        int req = level_rank(ix, sp->required_level);
        for (int r = level_rank(ix, sp->preferred_level); r <= req && rc == 0; r++) {
            int level = rank_level(ix, r), sub = -1;
            rc = try_level(&p, level, &sub);
            if (rc == 1) {
                res->reason = TS_GANG_PLACED;
                res->level = level;
                res->subtree = sub;
                res->nodes = p.nshadow;
                snprintf(res->why, sizeof res->why, "placed on %d node%s within %s %s",
                         p.nshadow, p.nshadow == 1 ? "" : "s",
                         ts_gang_level_name(ix->c, level), sub_name(ix, level, sub));
                rc = commit(&p, err);
                if (rc == 0)
                    rc = 1;
            }
        }
    }
    if (rc == 0)
        explain(&p, sp->required_level, res); /* it did not fit: say why, while p is whole */
    plan_reset(&p);
    free(p.order);
    free(p.cand);
    free(p.cand_key);
    free(p.fkey);
    free(p.shadow);
    free(p.shadow_node);
    free(p.shadow_tasks);
    if (rc == TS_ENOMEM)
        return ts_err_set(err, TS_ENOMEM, "out of memory placing a gang");
    if (rc == 1)
        return 0;
    if (rc < 0)
        return rc;
    return ts_err_set(err, TS_ENOSPC, "gang of %d: %s: %s", sp->ntasks,
                      ts_gang_reason_name(res->reason), res->why);
}

int ts_gang_release(ts_gang_index *ix, const ts_request *tasks, const ts_alloc *allocs,
                    int ntasks, ts_err *err)
{
    for (int t = 0; t < ntasks; t++)
        if (allocs[t].node < 0 || allocs[t].node >= ix->nnodes ||
            allocs[t].shape != ts_request_shape(&tasks[t]))
            return ts_err_set(err, TS_EINVAL, "gang.allocs[%d]: not an allocation of "
                              "tasks[%d] in this cluster", t, t);
    for (int t = ntasks - 1; t >= 0; t--) {
        int rc = ts_node_release(&ix->c->nodes[allocs[t].node], &allocs[t]);
        if (rc != 0)
            return ts_err_set(err, rc, "gang.allocs[%d]: release failed", t);
        ts_gang_index_node_changed(ix, allocs[t].node);
    }
    return 0;
}
