/*
 * node_select.h - which nodes a job may use: a Slurm-style `constraint` on
 * node features, a `nodelist` it is limited to and an `exclude` list it keeps
 * off (docs/job-spec.md). The result is a node mask, one bit per node of the
 * cluster, computed once per job when the controller builds it, so the
 * scheduling cycle only tests a bit per node it looks at.
 *
 * Constraint syntax: feature terms joined by `&` (and) and `|` (or), `&`
 * binding tighter ("a&b|c" is "(a&b)|c"), no parentheses. A term `key=value`
 * matches a node with that label; a bare term `name` matches a node with a
 * label whose key or value is name, or whose GPU model is name. Host lists:
 * names and ranges ("r-[1-4,7]") separated by commas.
 *
 * Ownership: the caller owns every buffer; nothing allocates. Pure and
 * thread-safe.
 */
#ifndef TESSERA_NODE_SELECT_H
#define TESSERA_NODE_SELECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tessera/error.h"
#include "tessera/model.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TS_NODE_SELECT_MAX_BYTES 1024 /* longest constraint or host list */
#define TS_CONSTRAINT_MAX_TERMS 64

/* Words of a node mask for n nodes. */
static inline size_t ts_node_mask_words(int nnodes) { return ((size_t)nnodes + 63) / 64; }
static inline bool ts_node_mask_has(const uint64_t *mask, int node)
{
    return !mask || (mask[node >> 6] >> (node & 63) & 1u);
}

/* Syntax alone (no cluster): TS_EINVAL with err's message the reason only
 * ("empty feature name after '&'"), for the caller to prefix with the field. */
int ts_constraint_check(const char *expr, ts_err *err);
int ts_hostlist_check(const char *list, ts_err *err);

/* Fills mask (ts_node_mask_words(c->nnodes) words) with the nodes that match
 * constraint, are in nodelist and are not in exclude (each NULL or "" = no
 * limit). TS_EINVAL naming the field ("nodelist: no node \"r-9\" in the
 * cluster", "constraint: no node has the features \"a&b\"", or the three
 * together leave no node). */
int ts_node_select(const ts_cluster *c, const char *constraint, const char *nodelist,
                   const char *exclude, uint64_t *mask, ts_err *err);

#ifdef __cplusplus
}
#endif
#endif
