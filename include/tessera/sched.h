/*
 * sched.h - placement: which node (and which GPUs on it) a request goes to.
 *
 * Policy lives behind a small ops table (struct ts_scorer_ops) so a site can
 * swap scoring without touching the loop. The placer filters every node with
 * ts_node_fits, asks the scorer for an integer score and a GPU choice, and
 * takes the highest score; on equal scores the scorer's second rank (its
 * optional tie op), then the lowest node index wins, so a decision is a
 * function of the cluster's state, its node order and the seed.
 *
 * A scorer that declares itself cacheable promises its score and GPU choice
 * are a pure function of the node's state and the request's class (not its
 * memory); the placer then keeps one entry per (node, class) stamped with the
 * node's version, and a placement recomputes only the node it changed. That
 * is what lets FGD-style scorers place tens of thousands of pods per second.
 *
 * Ownership: the placer borrows the cluster and what env points to (all
 * must outlive it) and owns its cache and scorer state. Not thread-safe; one
 * placer per thread.
 */
#ifndef TESSERA_SCHED_H
#define TESSERA_SCHED_H

#include <stdint.h>

#include "tessera/frag.h"
#include "tessera/load.h"
#include "tessera/model.h"
#include "tessera/rng.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a scorer may look at besides the node. */
typedef struct ts_sched_env {
    const ts_cluster *cluster;
    const ts_typical *typical;   /* may be NULL for scorers that do not use it */
    const ts_workload *workload; /* the expected request mix, may be NULL */
    /* node versions may repeat with a different state (a scratch copy that
     * is re-synced from the real cluster): scorers keep no per-node cache */
    bool no_cache;
} ts_sched_env;

struct ts_scorer_ops {
    const char *name;
    const char *summary;
    bool cacheable;
    /* optional: set up *state (may stay NULL) */
    int (*init)(void **state, const ts_sched_env *env, ts_err *err);
    void (*fini)(void *state);
    /* Score a node that passed ts_node_fits for r; fill a->gpu/ngpu/mig_*.
     * Higher is better. */
    int64_t (*score)(void *state, const ts_node *n, const ts_request *r, ts_alloc *a,
                     ts_rng *rng);
    /* optional: a score no node can pass for r (INT64_MAX when unknown); the
     * placer stops at the first node that reaches it, which is the node a
     * full scan would choose (ties go to the lowest index) */
    int64_t (*bound)(void *state, const ts_request *r);
    /* optional: a second rank among nodes of equal score, lower first (before
     * the lowest index). tie_begin is asked once per placement and says
     * whether r uses it (it may read the cluster then); tie ranks a node by
     * its choice a (the cached one for a cacheable scorer), so it may read
     * state outside the node. When it is used the scan does not stop at the
     * bound. */
    bool (*tie_begin)(void *state, const ts_request *r);
    int64_t (*tie)(void *state, const ts_node *n, const ts_request *r, const ts_alloc *a);
};

/* Built-in scorers: "random", "dotprod", "clustering", "packing", "bestfit",
 * "fgd", "tessera". NULL if unknown. */
const struct ts_scorer_ops *ts_scorer_find(const char *name);
/* NULL-terminated list of all built-in scorers. */
const struct ts_scorer_ops *const *ts_scorer_all(void);

typedef struct ts_placer ts_placer;

/* nclasses: how many request classes cacheable scores are kept for (the
 * workload's nspecs); 0 disables the cache. A class's table (one entry per
 * node) is allocated the first time the class is placed. */
ts_placer *ts_placer_new(ts_cluster *c, const struct ts_scorer_ops *ops,
                         const ts_sched_env *env, int nclasses, uint64_t seed, ts_err *err);
void ts_placer_free(ts_placer *p);

/* Places r (class id `cls` in 0..nclasses-1, or -1 for none): picks the best
 * node, binds the allocation and returns its node index, or TS_ENOSPC when no
 * node fits (the cluster is then unchanged). */
int ts_placer_place(ts_placer *p, const ts_request *r, int cls, ts_alloc *out);
/* What ts_placer_place would choose among the nodes ok(ctx, i) accepts (ok
 * NULL: every node), without binding: fills out (node, GPUs, CPU, memory) and
 * returns the node index, or TS_ENOSPC. The caller binds with ts_node_assign
 * (the scheduling cycle, which keeps its own index in step). */
int ts_placer_choose(ts_placer *p, const ts_request *r, int cls,
                     bool (*ok)(void *ctx, int node), void *ctx, ts_alloc *out);
/* ts_placer_choose where, among nodes of equal score in the same state as
 * the node ts_placer_choose would pick (capacity and use, GPU by GPU), the
 * lowest key[i] (>= 0; [nnodes]) wins before the lowest index: a tie-break
 * that never outranks a score and leaves the cluster's node states what
 * they would be without it (image_place.h's pull seconds). key NULL:
 * ts_placer_choose. */
int ts_placer_choose_keyed(ts_placer *p, const ts_request *r, int cls,
                           bool (*ok)(void *ctx, int node), void *ctx, const double *key,
                           ts_alloc *out);
/* Releases an allocation made by this placer. */
int ts_placer_release(ts_placer *p, const ts_alloc *a);

/* Statistics: nodes scored, cache hits. */
typedef struct ts_placer_stats {
    uint64_t placed, failed, scored, cache_hits;
} ts_placer_stats;
void ts_placer_get_stats(const ts_placer *p, ts_placer_stats *s);

/* The policy ts_sched_cycle places non-gang tasks with when its
 * configuration names none, and what tesserad's scheduler.placement defaults
 * to: the best measured one (docs/policies.md). */
#define TS_PLACEMENT_DEFAULT "tessera"

/* The scheduling cycle (cycle.h) measures fragmentation against an expected
 * workload. By default it learns one from the tasks it is asked to place
 * (the class of every task it tries to place; the list is rebuilt after as
 * many new attempts as it has weight, at least every 4096, and the counts
 * are halved when they weigh more than 65536); a shell that knows the
 * mix (the simulator replaying a trace) sets it here instead. t is borrowed
 * and must outlive s or the next call; NULL returns to learning. */
typedef struct ts_sched ts_sched;
int ts_sched_set_expected(ts_sched *s, const ts_typical *t, ts_err *err);

#ifdef __cplusplus
}
#endif
#endif
