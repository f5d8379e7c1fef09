/*
 * topology.h - the cluster's network as a tree with named levels.
 *
 * Levels are named top-down, for example {"spine", "leaf", "nvlink", "gpu"}; the
 * last level is always the GPU. Every vertex knows its parent and depth, so the
 * distance between two GPUs - the height of their lowest common ancestor above
 * the GPU level (0 same GPU, 1 same NVLink domain, 2 same leaf, 3 across the
 * spine with the levels above) - is computed in O(depth) by walking both up.
 * An NVLink domain is an ordinary vertex, so it may hold the GPUs of several
 * nodes (NVL72 racks). Vertices are created on first mention of a path and are
 * never removed. The tree owns its names; not thread-safe.
 */
#ifndef TESSERA_TOPOLOGY_H
#define TESSERA_TOPOLOGY_H

#include <stdint.h>

#include "tessera/error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TS_TOPO_MAX_LEVELS 8
#define TS_TOPO_NAME_MAX 64

typedef struct ts_topo ts_topo;

/* levels: top-down level names, 2..TS_TOPO_MAX_LEVELS of them, the last one
 * the GPU level. Returns NULL (err filled) on bad names. */
ts_topo *ts_topo_new(const char *const *levels, int nlevels, ts_err *err);
void ts_topo_free(ts_topo *topo);
/* Deep copy (vertex ids are preserved); NULL on allocation failure or NULL in. */
ts_topo *ts_topo_clone(const ts_topo *topo);

int ts_topo_nlevels(const ts_topo *topo);
const char *ts_topo_level_name(const ts_topo *topo, int level);
/* Index of a level name, or -1. */
int ts_topo_level_index(const ts_topo *topo, const char *name);

/* Returns the vertex for path names[0..n-1] (names[i] is the vertex's name at
 * level i), creating missing vertices; n <= nlevels. The root level may have
 * several vertices (several spines): they then meet only at the implicit top,
 * distance nlevels-1 + 1. Returns the vertex id (>= 0) or a negative code. */
int ts_topo_path(ts_topo *topo, const char *const *names, int n, ts_err *err);

/* Like ts_topo_path but never creates: the vertex id, TS_ENOENT when some
 * vertex of the path does not exist, TS_EINVAL on a malformed path. */
int ts_topo_find(const ts_topo *topo, const char *const *names, int n);

int ts_topo_nvertices(const ts_topo *topo);
int ts_topo_parent(const ts_topo *topo, int vertex); /* -1 for a top vertex */
int ts_topo_depth(const ts_topo *topo, int vertex);  /* 0 for a top vertex */
const char *ts_topo_name(const ts_topo *topo, int vertex);
/* The ancestor of vertex at depth (vertex itself at its own depth), or -1 when
 * depth is deeper than the vertex or out of range. */
int ts_topo_ancestor(const ts_topo *topo, int vertex, int depth);

/* Distance between two vertices of the GPU level (see above). Vertices at
 * other depths are allowed: the distance is then counted from the deeper one's
 * level as if it were a GPU. */
int ts_topo_distance(const ts_topo *topo, int a, int b);

#ifdef __cplusplus
}
#endif
#endif
