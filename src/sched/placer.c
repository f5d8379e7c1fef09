/*
 * placer.c - the placement loop shared by every policy.
 *
 * For one request: walk the nodes in index order, skip those that cannot take
 * it (ts_node_fits), score the rest and keep the first strictly better one.
 * Cacheable scorers are looked up in a (node x class) table whose entries are
 * valid while the node's version matches, so a placement costs one filter and
 * one table read per untouched node. The binding step re-checks the fit
 * inside ts_node_assign, so a scorer bug cannot oversubscribe a node.
 */
#include "tessera/sched.h"

#include <stdlib.h>

typedef struct cache_entry {
    uint64_t version; /* node version + 1 when valid, 0 when empty */
    int64_t score;
    ts_alloc choice;
} cache_entry;

struct ts_placer {
    ts_cluster *c;
    const struct ts_scorer_ops *ops;
    void *state;
    int nclasses;
    int cache_nodes;
    cache_entry *cache; /* [node * nclasses + cls] */
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
    if (ops->cacheable && nclasses > 0 && c->nnodes > 0) {
        p->nclasses = nclasses;
        p->cache_nodes = c->nnodes;
        p->cache = calloc((size_t)c->nnodes * (size_t)nclasses, sizeof *p->cache);
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
    free(p->cache);
    free(p);
}

static int64_t score_node(ts_placer *p, int i, const ts_request *r, int cls, ts_alloc *a)
{
    const ts_node *n = &p->c->nodes[i];
    if (p->cache && cls >= 0 && cls < p->nclasses && i < p->cache_nodes) {
        cache_entry *e = &p->cache[(size_t)i * (size_t)p->nclasses + (size_t)cls];
        if (e->version == n->version + 1) {
            p->st.cache_hits++;
            *a = e->choice;
            return e->score;
        }
        e->score = p->ops->score(p->state, n, r, &e->choice, &p->rng);
        e->version = n->version + 1;
        p->st.scored++;
        *a = e->choice;
        return e->score;
    }
    p->st.scored++;
    return p->ops->score(p->state, n, r, a, &p->rng);
}

int ts_placer_place(ts_placer *p, const ts_request *r, int cls, ts_alloc *out)
{
    int best = -1;
    int64_t best_score = 0;
    ts_alloc cand, best_alloc;
    for (int i = 0; i < p->c->nnodes; i++) {
        if (!ts_node_fits(&p->c->nodes[i], r))
            continue;
        int64_t s = score_node(p, i, r, cls, &cand);
        if (best < 0 || s > best_score) {
            best = i;
            best_score = s;
            best_alloc = cand;
        }
    }
    if (best < 0) {
        p->st.failed++;
        return TS_ENOSPC;
    }
    best_alloc.node = best;
    best_alloc.cpu_milli = r->cpu_milli;
    best_alloc.mem_mib = r->mem_mib;
    best_alloc.gpu_mem_mib = r->gpu_mem_mib;
    int rc = ts_node_assign(&p->c->nodes[best], r, &best_alloc);
    if (rc != 0) {
        p->st.failed++;
        return rc;
    }
    p->st.placed++;
    *out = best_alloc;
    return best;
}

int ts_placer_release(ts_placer *p, const ts_alloc *a)
{
    if (a->node < 0 || a->node >= p->c->nnodes)
        return TS_EINVAL;
    return ts_node_release(&p->c->nodes[a->node], a);
}

void ts_placer_get_stats(const ts_placer *p, ts_placer_stats *s) { *s = p->st; }
