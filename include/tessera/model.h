/*
 * model.h - the cluster as the scheduler sees it: nodes, their GPUs and how
 * each GPU is shared, requests, and the allocations that bind them.
 *
 * Units are fixed everywhere: CPU in milli-cores, memory in MiB, GPU share in
 * milli-GPU (TS_MILLI_PER_GPU = one whole GPU), GPU memory in MiB.
 *
 * Each GPU is in one sharing mode:
 *   TS_GPU_WHOLE   - exclusive: only requests for whole GPUs use it;
 *   TS_GPU_SHARED  - fractional (time-sliced or MPS): milli-GPU and GPU memory
 *                    are accounted per task; a whole-GPU request takes only a
 *                    completely free GPU;
 *   TS_GPU_MIG     - partitioned into MIG instances (tessera/mig.h); only MIG
 *                    requests use it.
 *
 * A node keeps small aggregates (fully free GPUs, free milli, largest free
 * GPU) updated on every assign/release so filters answer in O(1) for the
 * common case. Every change bumps node->version, which lets scorers cache a
 * node's score until the node changes. The cluster owns its nodes; nothing here
 * is thread-safe (the shells own the locks).
 */
#ifndef TESSERA_MODEL_H
#define TESSERA_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "tessera/error.h"
#include "tessera/mig.h"
#include "tessera/topology.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TS_MILLI_PER_GPU 1000
#define TS_NODE_MAX_GPUS 16
#define TS_NAME_MAX 64
#define TS_NODE_MAX_LABELS 16
#define TS_MAX_GPU_MODELS 32

/* ---- GPU models -------------------------------------------------------- */

typedef struct ts_gpu_model_info {
    const char *name;    /* as written in files: "T4", "A100-80GB", ... */
    int64_t mem_mib;     /* per GPU; 0 when not disclosed (openb G1/G2/G3) */
    int mig_geometry;    /* enum ts_mig_geometry, TS_MIG_NONE if not MIG capable */
} ts_gpu_model_info;

/* Built-in model table: index by model id (0..ts_gpu_model_count()-1). */
int ts_gpu_model_count(void);
const ts_gpu_model_info *ts_gpu_model_get(int model);
/* Model id of a name (exact, case-sensitive), or -1 if unknown. */
int ts_gpu_model_lookup(const char *name);
/* Parses "V100M16|V100M32" into a bitmask of model ids (empty string = 0 =
 * any). TS_EINVAL naming the unknown model. */
int ts_gpu_model_mask_parse(const char *spec, uint32_t *mask, ts_err *err);

/* ---- nodes and GPUs ---------------------------------------------------- */

enum ts_gpu_mode { TS_GPU_WHOLE = 0, TS_GPU_SHARED = 1, TS_GPU_MIG = 2 };
const char *ts_gpu_mode_name(int mode);
int ts_gpu_mode_parse(const char *name); /* "whole"|"shared"|"mig" or -1 */

typedef struct ts_gpu {
    uint8_t mode;          /* enum ts_gpu_mode */
    int32_t milli_used;    /* 0..TS_MILLI_PER_GPU (WHOLE/SHARED) */
    int64_t mem_used_mib;  /* GPU memory promised to tasks */
    int32_t ntasks;        /* tasks holding this GPU (or one of its instances) */
    int64_t share_key;     /* on a node that keeps one user per GPU: the key of the shares
                              on it while it has any; 0 otherwise */
    ts_mig_layout mig;     /* mode == TS_GPU_MIG */
    int topo_vertex;       /* this GPU's vertex in the topology, -1 if none */
} ts_gpu;

/* Request shapes: TS_SHAPE_CPU (no GPU), TS_SHAPE_SHARE (part of one GPU),
 * TS_SHAPE_MIG, or k whole GPUs = TS_SHAPE_WHOLE + k - 1 (k = 1..16). */
enum { TS_SHAPE_CPU = 0, TS_SHAPE_SHARE = 1, TS_SHAPE_MIG = 2, TS_SHAPE_WHOLE = 3 };
#define TS_SHAPES (TS_SHAPE_WHOLE + TS_NODE_MAX_GPUS)

typedef struct ts_label {
    char key[TS_NAME_MAX];
    char value[TS_NAME_MAX];
} ts_label;

#define TS_NODE_NET_MBIT_MAX 10000000 /* 10 Tbit/s: a node's link at most */

typedef struct ts_node {
    char name[TS_NAME_MAX];
    int model;             /* GPU model id, -1 for a CPU-only node */
    int ngpu;
    int64_t cpu_milli;     /* capacity */
    int64_t mem_mib;
    /* the node's network link in Mbit/s (the cluster file's
     * network.bandwidth_mbit); 0: not given, the shell's default. Prices
     * the seconds an image's pull costs and paces its prefetch. */
    int64_t net_mbit;
    int64_t cpu_used;
    int64_t mem_used;
    ts_gpu gpu[TS_NODE_MAX_GPUS];
    int nlabels;
    ts_label labels[TS_NODE_MAX_LABELS];
    int topo_vertex;       /* the node's own vertex's parent chain, -1 if none */
    /* its shared GPUs take the shares of one user at a time (an MPS node:
     * MPS runs one user's server a device, the others' clients wait):
     * shares of another ts_request.share_key go to another GPU */
    bool share_one_user;
    /* aggregates, kept by assign/release */
    int gpus_free;         /* GPUs with nothing on them (any mode) */
    int mig_gpus;          /* GPUs in MIG mode (fixed when the node is added) */
    int32_t milli_free;    /* sum over non-MIG GPUs of free milli */
    int32_t max_gpu_free;  /* largest free milli on one non-MIG GPU */
    int ntasks;
    /* tasks on the node by GPU shape (ts_request_shape): what kind of work
     * already shares it, for policies that keep like with like */
    int32_t shape_tasks[TS_SHAPES];
    uint64_t version;      /* bumped on every change */
} ts_node;

/* What a new node looks like; gpu_mode applies to every GPU; mig_layout (if
 * gpu_mode is MIG) to every GPU unless per_gpu_mig is set. */
typedef struct ts_node_spec {
    const char *name;
    const char *gpu_model;  /* NULL or "" for CPU-only */
    int ngpu;
    int64_t cpu_milli;
    int64_t mem_mib;
    int gpu_mode;           /* enum ts_gpu_mode */
    const ts_mig_layout *mig_layout;        /* may be NULL */
    const ts_mig_layout *per_gpu_mig;       /* NULL or ngpu layouts */
    const ts_label *labels;
    int nlabels;
    int64_t net_mbit;       /* 0: not given; else 1..TS_NODE_NET_MBIT_MAX */
} ts_node_spec;

/* ---- requests and allocations ------------------------------------------ */

typedef struct ts_request {
    int64_t cpu_milli;
    int64_t mem_mib;
    int32_t num_gpu;        /* 0 for CPU-only */
    int32_t gpu_milli;      /* per GPU: TS_MILLI_PER_GPU = whole, less = a share */
    int64_t gpu_mem_mib;    /* per GPU, 0 = no requirement */
    uint32_t model_mask;    /* allowed GPU models (bit = model id), 0 = any */
    int mig_profile;        /* -1, or a MIG profile id: one instance of it */
    int64_t share_key;      /* a share's user (the run-as uid + 1), for nodes that keep one
                               user per GPU (ts_node.share_one_user); 0 = none */
} ts_request;

/* Validates a request's own fields (ranges, MIG xor milli); TS_EINVAL naming
 * the field. */
int ts_request_check(const ts_request *req, ts_err *err);
static inline bool ts_request_is_share(const ts_request *r)
{
    return r->mig_profile < 0 && r->num_gpu == 1 && r->gpu_milli < TS_MILLI_PER_GPU;
}

static inline int ts_request_shape(const ts_request *r)
{
    if (r->mig_profile >= 0)
        return TS_SHAPE_MIG;
    if (r->num_gpu == 0)
        return TS_SHAPE_CPU;
    if (r->gpu_milli < TS_MILLI_PER_GPU)
        return TS_SHAPE_SHARE;
    return TS_SHAPE_WHOLE + r->num_gpu - 1;
}

typedef struct ts_alloc {
    int node;                       /* index in the cluster */
    int ngpu;
    int8_t gpu[TS_NODE_MAX_GPUS];   /* GPU indices on the node */
    int32_t gpu_milli;              /* per GPU */
    int64_t gpu_mem_mib;            /* per GPU */
    int64_t cpu_milli;
    int64_t mem_mib;
    int8_t mig_profile;             /* -1 or the instance's profile */
    int8_t mig_start;               /* its start slot */
    int8_t mig_created;             /* 1 if placing created the instance */
    int8_t shape;                   /* ts_request_shape of the request */
} ts_alloc;

/* ---- the cluster ------------------------------------------------------- */

typedef struct ts_cluster {
    ts_node *nodes;
    int nnodes;
    int cap;
    int64_t total_gpus;
    ts_topo *topo;          /* may be NULL; owned */
} ts_cluster;

ts_cluster *ts_cluster_new(void);
void ts_cluster_free(ts_cluster *c);
/* Adds a node; returns its index or a negative code (duplicate name, unknown
 * model, bad sizes, impossible MIG layout), err naming the field. */
int ts_cluster_add_node(ts_cluster *c, const ts_node_spec *spec, ts_err *err);
int ts_cluster_find_node(const ts_cluster *c, const char *name);
/* Deep copy (topology included); NULL on allocation failure. */
ts_cluster *ts_cluster_clone(const ts_cluster *c);
/* Returns every node to empty (no tasks; MIG instances marked idle). */
void ts_cluster_reset(ts_cluster *c);

/* Can req be placed on node at all (CPU, memory, GPU model, GPU count and
 * share, GPU memory, MIG)? Pure filter, no side effects. */
bool ts_node_fits(const ts_node *node, const ts_request *req);

/* The default GPU choice on a node: whole-GPU requests take the lowest-index
 * fully free GPUs; a share takes the GPU with the least sufficient free milli
 * (best fit, lowest index on ties); MIG takes an idle instance of the profile or
 * creates one at ts_mig_best_start. Fills alloc (node index left to caller).
 * Returns TS_ENOSPC if the request does not fit. */
int ts_node_choose_gpus(const ts_node *node, const ts_request *req, ts_alloc *alloc);

/* Can GPU i of node take the share r (SHARED mode, enough free milli and GPU
 * memory)? For scorers that choose the GPU of a share themselves. */
bool ts_node_gpu_takes_share(const ts_node *node, int i, const ts_request *req);

/* Binds alloc (which must come from a fit check) to the node, updating the
 * aggregates and version. TS_ENOSPC (and no change) if it does not fit. */
int ts_node_assign(ts_node *node, const ts_request *req, const ts_alloc *alloc);
/* Undoes ts_node_assign exactly. */
int ts_node_release(ts_node *node, const ts_alloc *alloc);

/* Free milli of GPU i (0 for MIG GPUs). */
static inline int32_t ts_gpu_free_milli(const ts_gpu *g)
{
    return g->mode == TS_GPU_MIG ? 0 : TS_MILLI_PER_GPU - g->milli_used;
}

#ifdef __cplusplus
}
#endif
#endif
