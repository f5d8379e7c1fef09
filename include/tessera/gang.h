/*
 * gang.h - gang placement: N tasks of one job placed all or nothing, inside
 * one topology subtree, packed so that whole nodes stay whole.
 *
 * A ts_gang_index sits beside a cluster and keeps, for every topology vertex
 * above the GPU level, the free whole GPUs in its subtree, the nodes whose
 * GPUs are all free and a histogram of nodes by free whole GPUs; globally it
 * keeps one bitset of nodes per free count. Placements and releases made here
 * update it in O(depth) per touched node, so choosing a subtree reads
 * aggregates instead of nodes (costs in gang.c). A node changed by anything
 * else (the per-task placer, a reconciliation) must be reported with
 * ts_gang_index_node_changed, or the index goes stale.
 *
 * Ownership: the index borrows the cluster (which must outlive it and keep
 * its node count and topology) and owns its arrays. Not thread-safe.
 */
#ifndef TESSERA_GANG_H
#define TESSERA_GANG_H

#include <stdbool.h>
#include <stdint.h>

#include "tessera/error.h"
#include "tessera/frag.h"
#include "tessera/model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Topology levels a gang may be confined to: one node, a topology depth
 * (0 = the top level, up to nlevels-2 = the level directly above the GPUs,
 * e.g. the NVLink domain), or anywhere in the cluster. */
#define TS_GANG_LEVEL_ANY (-1)
#define TS_GANG_LEVEL_NODE (-2)

/* "node", "any" or the name of a topology level above "gpu"; the level or
 * TS_EINVAL (err naming the word). */
int ts_gang_level_parse(const ts_cluster *c, const char *name, ts_err *err);
/* Printable name of a level ("node", "any", "leaf", ...); never NULL. */
const char *ts_gang_level_name(const ts_cluster *c, int level);

enum ts_gang_reason {
    TS_GANG_PLACED = 0,
    TS_GANG_CAPACITY = 1,      /* fewer free whole GPUs in the cluster than needed */
    TS_GANG_TOPOLOGY = 2,      /* enough in total, no subtree at the required level has it */
    TS_GANG_FRAGMENTATION = 3, /* a subtree has enough free GPUs, not in a usable shape */
};
/* "placed", "capacity", "topology", "fragmentation". */
const char *ts_gang_reason_name(int reason);

typedef struct ts_gang_spec {
    const ts_request *tasks; /* ntasks whole-GPU requests (rank order); borrowed */
    int ntasks;              /* 1..TS_GANG_MAX_TASKS */
    int required_level;      /* every rank inside one subtree at this level */
    int preferred_level;     /* tried first; no wider than required_level */
    bool rail_aligned;       /* the k-th task on every node uses the same GPU indices */
    /* optional: among nodes with equal free GPUs, those whose fragmentation
     * measure (frag.h: ts_frag_shape_placement) grows least take the tasks
     * first; NULL = node order. Borrowed. */
    const ts_typical *typical;
    /* optional [nnodes]: the seconds before the gang's image is whole on
     * each node (image_place.h); among nodes still equal after the rule
     * above, the cheapest take the tasks first. NULL = no preference. */
    const double *node_cost_s;
} ts_gang_spec;

#define TS_GANG_MAX_TASKS 65536
#define TS_GANG_WHY_MAX 256

typedef struct ts_gang_result {
    int reason;    /* enum ts_gang_reason */
    int level;     /* level placed at (or the required level on failure) */
    int subtree;   /* vertex id, node index for LEVEL_NODE, -1 for ANY/none */
    int nodes;     /* distinct nodes used */
    char why[TS_GANG_WHY_MAX]; /* one line, for the pending reason */
} ts_gang_result;

typedef struct ts_gang_index ts_gang_index;

/* Builds the index from the cluster's current state: O(nodes x depth). */
ts_gang_index *ts_gang_index_new(ts_cluster *c, ts_err *err);
void ts_gang_index_free(ts_gang_index *ix);
/* Re-reads one node after a change made outside this module: O(ngpu + depth). */
void ts_gang_index_node_changed(ts_gang_index *ix, int node);

/* Takes a node out of (on = false) or back into placement: a node out of it
 * counts no free GPUs and is never chosen (a drained node). O(depth). */
void ts_gang_index_node_enable(ts_gang_index *ix, int node, bool on);
bool ts_gang_index_node_enabled(const ts_gang_index *ix, int node);

/* Aggregates, for tests and for pending-reason text. vertex -1 = the whole
 * cluster. Free whole GPUs count non-MIG GPUs with no task on them; a node is
 * fully free when it has such GPUs and all of them are free. */
int64_t ts_gang_index_free_gpus(const ts_gang_index *ix, int vertex);
int64_t ts_gang_index_free_nodes(const ts_gang_index *ix, int vertex);
/* Free whole GPUs of one node as the index last saw them. */
int ts_gang_index_node_free(const ts_gang_index *ix, int node);

/* Places the gang all or nothing. On success fills out[0..ntasks-1] (task i's
 * allocation, bound with ts_node_assign) and res, returns 0. When it does not
 * fit returns TS_ENOSPC with res->reason and res->why set and the cluster
 * byte-for-byte unchanged (the plan is made on scratch copies and committed
 * only when complete). TS_EINVAL for a bad spec (err names the field).
 * res may be NULL. */
int ts_gang_place(ts_gang_index *ix, const ts_gang_spec *spec, ts_alloc *out,
                  ts_gang_result *res, ts_err *err);

/* Undoes a placement exactly (every field of every node but its version
 * stamp, which moves forward). tasks/allocs as given to and returned by
 * ts_gang_place. */
int ts_gang_release(ts_gang_index *ix, const ts_request *tasks, const ts_alloc *allocs,
                    int ntasks, ts_err *err);

#ifdef __cplusplus
}
#endif
#endif
