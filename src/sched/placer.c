/*
 * placer.c - the placement loop shared by every policy.
 *
 * For one request: walk the nodes in index order, skip those that cannot take
 * it (ts_node_fits), score the rest and keep the first strictly better one.
 * Cacheable scorers are looked up in a (node x class) table whose entries are
 * valid while the node's version matches, so a placement costs one filter and
 * one table read per untouched node. A scorer may rank nodes of equal score
 * a second time (its tie op) by state outside the node, read once per
 * placement, which the cache does not hold. A class's row is allocated when the class
 * is first placed, so a placer sized for thousands of classes (the scheduling
 * cycle's) costs memory only for those it meets. The binding step re-checks the fit
 * inside ts_node_assign, so a scorer bug cannot oversubscribe a node.
 */
#include "tessera/sched.h"

#include <stdlib.h>
#include <string.h>

#define SCORE_NOFIT INT64_MIN /* the node cannot take the class */

/* One class's row: the scan reads only ver and score (16 bytes a node); the
 * GPU choice is read for the winner. */
typedef struct cache_row {
    uint64_t *ver;     /* node version + 1 when valid, 0 when empty */
    int64_t *score;    /* SCORE_NOFIT when the node does not fit */
    ts_alloc *choice;
} cache_row;

struct ts_placer {
    ts_cluster *c;
    const struct ts_scorer_ops *ops;
    void *state;
    int nclasses;
    int cache_nodes;
    cache_row *cache; /* [cls], rows allocated when the class is first placed */
    ts_rng rng;
    ts_placer_stats st;
};

ts_placer *ts_placer_new(ts_cluster *c, const struct ts_scorer_ops *ops,
                         const ts_sched_env *env, int nclasses, uint64_t seed, ts_err *err)
{
    ts_placer *p = calloc(1, sizeof *p);
    if (!p) {
        ts_err_set(err, TS_ENOMEM, "out of memory");
        return NULL;
    }
    p->c = c;
    p->ops = ops;
    ts_rng_seed(&p->rng, seed);
    ts_sched_env e = *env;
    e.cluster = c;
    if (ops->init && ops->init(&p->state, &e, err) != 0) {
        free(p);
        return NULL;
    }
    if (ops->cacheable && !env->no_cache && nclasses > 0 && c->nnodes > 0) {
        p->nclasses = nclasses;
        p->cache_nodes = c->nnodes;
        p->cache = calloc((size_t)nclasses, sizeof *p->cache);
        if (!p->cache) {
            ts_placer_free(p);
            ts_err_set(err, TS_ENOMEM, "out of memory for the score cache");
            return NULL;
        }
    }
    return p;
}

void ts_placer_free(ts_placer *p)
{
    if (!p)
        return;
    if (p->ops->fini)
        p->ops->fini(p->state);
    for (int k = 0; p->cache && k < p->nclasses; k++) {
        free(p->cache[k].ver);
        free(p->cache[k].score);
        free(p->cache[k].choice);
    }
    free(p->cache);
    free(p);
}

static int64_t score_node(ts_placer *p, int i, const ts_request *r, ts_alloc *a)
{
    p->st.scored++;
    return p->ops->score(p->state, &p->c->nodes[i], r, a, &p->rng);
}

/* The class's row, allocated on first use; NULL when uncached. */
static cache_row *row_of(ts_placer *p, int cls)
{
    if (!p->cache || cls < 0 || cls >= p->nclasses)
        return NULL;
    cache_row *w = &p->cache[cls];
    if (!w->ver) {
        size_t n = (size_t)p->cache_nodes;
        w->ver = calloc(n, sizeof *w->ver);
        w->score = malloc(n * sizeof *w->score);
        w->choice = malloc(n * sizeof *w->choice);
        if (!w->ver || !w->score || !w->choice) {
            free(w->ver);
            free(w->score);
            free(w->choice);
            memset(w, 0, sizeof *w);
            return NULL;
        }
    }
    return w;
}

/* Nodes a task may swap between without changing what the cluster looks
 * like: same capacity and the same use, GPU by GPU (MIG layouts aside,
 * which a keyed choice leaves to node order). */
static bool interchangeable(const ts_node *a, const ts_node *b)
{
    if (a->model != b->model || a->ngpu != b->ngpu || a->cpu_milli != b->cpu_milli ||
        a->mem_mib != b->mem_mib || a->cpu_used != b->cpu_used || a->mem_used != b->mem_used ||
        a->mig_gpus != 0 || b->mig_gpus != 0 || a->share_one_user != b->share_one_user)
        return false;
    for (int g = 0; g < a->ngpu; g++)
        if (a->gpu[g].milli_used != b->gpu[g].milli_used ||
            a->gpu[g].mem_used_mib != b->gpu[g].mem_used_mib ||
            a->gpu[g].ntasks != b->gpu[g].ntasks ||
            a->gpu[g].share_key != b->gpu[g].share_key)
            return false;
    return true;
}

/* The filter ok runs only on a node that would become the best so far,
 * which chooses the same node as filtering first. With a key, a node that
 * scores the same as the best so far, is interchangeable with it and has a
 * lower key takes its place: the key never outranks a score, and the node
 * chosen is in the state the unkeyed choice is in, so the cluster after the
 * placement holds the same node states either way (only which node is
 * which differs). The early stop at the bound then waits for a node whose
 * key is 0, the lowest a key can be. */
typedef struct rank {
    int64_t score, tie; /* tie: the scorer's second rank, 0 when unused */
    double key;
} rank;

static bool better(const ts_node *nodes, int i, rank c, int best, rank b, const double *keyed)
{
    if (best < 0 || c.score > b.score)
        return true;
    if (c.score < b.score || c.tie != b.tie)
        return c.score == b.score && c.tie < b.tie;
    return keyed && c.key < b.key && interchangeable(&nodes[i], &nodes[best]);
}

/* The scorer's second rank of node i for r and its choice a, when in use. */
static int64_t tie_of(ts_placer *p, bool ties, int i, const ts_request *r, const ts_alloc *a)
{
    return ties ? p->ops->tie(p->state, &p->c->nodes[i], r, a) : 0;
}

int ts_placer_choose_keyed(ts_placer *p, const ts_request *r, int cls,
                           bool (*ok)(void *ctx, int node), void *ctx, const double *key,
                           ts_alloc *out)
{
    int best = -1;
    rank b = {0, 0, 0.0};
    ts_alloc cand, best_alloc;
    cache_row *w = row_of(p, cls);
    const ts_node *nodes = p->c->nodes;
    bool ties = p->ops->tie && p->ops->tie_begin && p->ops->tie_begin(p->state, r);
    /* a later node of the bound's score may still rank first by its tie */
    int64_t bound = p->ops->bound && !ties ? p->ops->bound(p->state, r) : INT64_MAX;
    if (w) {
        for (int i = 0; i < p->c->nnodes; i++) {
            rank c = {0, 0, key ? key[i] : 0.0};
            if (w->ver[i] == nodes[i].version + 1) {
                p->st.cache_hits++;
                c.score = w->score[i];
            } else {
                c.score = ts_node_fits(&nodes[i], r) ? score_node(p, i, r, &w->choice[i])
                                                     : SCORE_NOFIT;
                w->score[i] = c.score;
                w->ver[i] = nodes[i].version + 1;
            }
            if (c.score == SCORE_NOFIT || (best >= 0 && c.score < b.score))
                continue;
            c.tie = tie_of(p, ties, i, r, &w->choice[i]);
            if (!better(nodes, i, c, best, b, key) || (ok && !ok(ctx, i)))
                continue;
            best = i;
            b = c;
            if (c.score >= bound && c.key <= 0.0)
                break;
        }
        if (best >= 0)
            best_alloc = w->choice[best];
    } else {
        for (int i = 0; i < p->c->nnodes; i++) {
            if (!ts_node_fits(&nodes[i], r) || (ok && !ok(ctx, i)))
                continue;
            rank c = {score_node(p, i, r, &cand), 0, key ? key[i] : 0.0};
            if (best >= 0 && c.score < b.score)
                continue;
            c.tie = tie_of(p, ties, i, r, &cand);
            if (better(nodes, i, c, best, b, key)) {
                best = i;
                b = c;
                best_alloc = cand;
                if (c.score >= bound && c.key <= 0.0)
                    break;
            }
        }
    }
    if (best < 0)
        return TS_ENOSPC;
    best_alloc.node = best;
    best_alloc.cpu_milli = r->cpu_milli;
    best_alloc.mem_mib = r->mem_mib;
    best_alloc.gpu_mem_mib = r->gpu_mem_mib;
    *out = best_alloc;
    return best;
}

int ts_placer_choose(ts_placer *p, const ts_request *r, int cls,
                     bool (*ok)(void *ctx, int node), void *ctx, ts_alloc *out)
{
    return ts_placer_choose_keyed(p, r, cls, ok, ctx, NULL, out);
}

int ts_placer_place(ts_placer *p, const ts_request *r, int cls, ts_alloc *out)
{
    ts_alloc a;
    int best = ts_placer_choose(p, r, cls, NULL, NULL, &a);
    if (best < 0) {
        p->st.failed++;
        return TS_ENOSPC;
    }
    int rc = ts_node_assign(&p->c->nodes[best], r, &a);
    if (rc != 0) {
        p->st.failed++;
        return rc;
    }
    p->st.placed++;
    *out = a;
    return best;
}

int ts_placer_release(ts_placer *p, const ts_alloc *a)
{
    if (a->node < 0 || a->node >= p->c->nnodes)
        return TS_EINVAL;
    return ts_node_release(&p->c->nodes[a->node], a);
}

void ts_placer_get_stats(const ts_placer *p, ts_placer_stats *s) { *s = p->st; }
