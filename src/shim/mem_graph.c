/* mem_graph.c - the device-memory quota for graph memory nodes and
 * allocations made on a capturing stream. The rules: mem.c. */

#include "shim/mem_internal.h"

#include <string.h>

/* ---- graph memory nodes ------------------------------------------------------ *
 * A graph's memory nodes (cuGraphAddMemAllocNode, or cuMemAllocAsync on a
 * capturing stream) hold no memory until the graph is instantiated and
 * launched; the driver then maps them from the device's graph memory pool,
 * which keeps them after the instance is destroyed until
 * cuDeviceGraphMemTrim. The shim sums a graph's nodes (uncharged) and
 * charges an instance the sum from its instantiation (an upper bound: before
 * its first launch it holds nothing yet) to its destruction, when it trims
 * the device's graph pool so the driver gives the memory back too. An
 * instantiation that would pass the quota fails with
 * CUDA_ERROR_OUT_OF_MEMORY. */

int shim_mem_stream_capturing(CUstream s)
{
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    return REAL.cuStreamIsCapturing && REAL.cuStreamIsCapturing(s, &st) == CUDA_SUCCESS &&
           st == CU_STREAM_CAPTURE_STATUS_ACTIVE;
}

/* Adds `bytes` to the uncharged tally of kind (a graph, or a capturing
 * stream) `key` on CUDA ordinal o. */
static void tally_add(uint32_t kind, uint64_t key, int ldev, int o, uint64_t bytes)
{
    pthread_mutex_lock(&ts_shim.lock);
    struct ts_shim_rec *rec = shim_rec_get(&ts_shim.recs, kind, key);
    if (rec) {
        rec->bytes = rec->bytes > UINT64_MAX - bytes ? UINT64_MAX : rec->bytes + bytes;
    } else {
        struct ts_shim_rec r = {.key = key, .kind = kind, .ldev = ldev, .bytes = bytes,
                                .pool = (uint64_t)o, .refs = 1};
        shim_rec_put(&ts_shim.recs, &r);
    }
    pthread_mutex_unlock(&ts_shim.lock);
}

void shim_mem_capture_add(CUstream s, const struct ts_shim_dev *d, int o, uint64_t bytes)
{
    tally_add(TS_REC_CAPTURE, (uintptr_t)s, d->ledger_dev, o, bytes);
}

void shim_mem_capture_end(CUstream s, CUgraph graph)
{
    struct ts_shim_rec t;
    if (shim_mem_unrecord(TS_REC_CAPTURE, (uintptr_t)s, &t) != 0 || !graph)
        return;
    tally_add(TS_REC_GRAPH, (uintptr_t)graph, t.ldev, (int)t.pool, t.bytes);
}

TS_SHIM_EXPORT CUresult cuGraphAddMemAllocNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                               const CUgraphNode *dependencies,
                                               size_t numDependencies,
                                               CUDA_MEM_ALLOC_NODE_PARAMS *nodeParams)
{
    shim_ready();
    CUresult r = PASS(cuGraphAddMemAllocNode, phGraphNode, hGraph, dependencies, numDependencies,
                      nodeParams);
    const struct ts_shim_dev *d;
    if (r == CUDA_SUCCESS && ts_shim.cfg.mem_on && nodeParams &&
        nodeParams->poolProps.location.type == CU_MEM_LOCATION_TYPE_DEVICE &&
        (d = shim_mem_quota_dev(nodeParams->poolProps.location.id)))
        tally_add(TS_REC_GRAPH, (uintptr_t)hGraph, d->ledger_dev,
                  nodeParams->poolProps.location.id, shim_mem_rounded(nodeParams->bytesize, d->gran));
    return r;
}

TS_SHIM_EXPORT CUresult cuGraphDestroy(CUgraph hGraph)
{
    shim_ready();
    CUresult r = PASS(cuGraphDestroy, hGraph);
    if (r == CUDA_SUCCESS && ts_shim.cfg.mem_on)
        shim_mem_unrecord(TS_REC_GRAPH, (uintptr_t)hGraph, NULL);
    return r;
}

/* Reserves graph's memory for an instance about to be made: 0 and *held the
 * bytes (0: nothing to charge), or -1 over the quota. */
static int graph_reserve(CUgraph graph, struct ts_shim_rec *held)
{
    memset(held, 0, sizeof *held);
    if (!ts_shim.cfg.mem_on)
        return 0;
    pthread_mutex_lock(&ts_shim.lock);
    struct ts_shim_rec *g = shim_rec_get(&ts_shim.recs, TS_REC_GRAPH, (uintptr_t)graph);
    if (g)
        *held = *g;
    pthread_mutex_unlock(&ts_shim.lock);
    const struct ts_shim_dev *d = held->bytes ? shim_mem_quota_dev((int)held->pool) : NULL;
    if (!d) {
        held->bytes = 0;
        return 0;
    }
    return shim_mem_reserve(d, held->bytes) == 0 ? 0 : -1;
}

static CUresult graph_settle(CUresult r, CUgraphExec *exec, const struct ts_shim_rec *held)
{
    if (!held->bytes)
        return r;
    if (r != CUDA_SUCCESS || !exec) {
        shim_mem_release(held->ldev, held->bytes);
        return r;
    }
    struct ts_shim_rec x = {.key = (uintptr_t)*exec, .kind = TS_REC_GEXEC, .ldev = held->ldev,
                            .bytes = held->bytes, .pool = held->pool, .refs = 1};
    pthread_mutex_lock(&ts_shim.lock);
    int rc = shim_rec_put(&ts_shim.recs, &x);
    pthread_mutex_unlock(&ts_shim.lock);
    if (rc != 0) {
        PASS(cuGraphExecDestroy, *exec);
        shim_mem_release(held->ldev, held->bytes);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    return r;
}

TS_SHIM_EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph,
                                                    unsigned long long flags)
{
    shim_ready();
    struct ts_shim_rec held;
    if (graph_reserve(hGraph, &held) != 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = PASS(cuGraphInstantiateWithFlags, phGraphExec, hGraph, flags);
    return graph_settle(r, phGraphExec, &held);
}

#define GRAPH_INSTANTIATE_PARAMS(name)                                                        \
    TS_SHIM_EXPORT CUresult name(CUgraphExec *phGraphExec, CUgraph hGraph,                    \
                                 CUDA_GRAPH_INSTANTIATE_PARAMS *params)                       \
    {                                                                                         \
        shim_ready();                                                                      \
        struct ts_shim_rec held;                                                              \
        if (graph_reserve(hGraph, &held) != 0) {                                              \
            if (params)                                                                       \
                params->result_out = CUDA_GRAPH_INSTANTIATE_ERROR;                            \
            return CUDA_ERROR_OUT_OF_MEMORY;                                                  \
        }                                                                                     \
        CUresult r = PASS(name, phGraphExec, hGraph, params);                                 \
        return graph_settle(r, phGraphExec, &held);                                           \
    }
GRAPH_INSTANTIATE_PARAMS(cuGraphInstantiateWithParams)
GRAPH_INSTANTIATE_PARAMS(cuGraphInstantiateWithParams_ptsz)

#define GRAPH_INSTANTIATE_LEGACY(name)                                                        \
    TS_SHIM_EXPORT CUresult name(CUgraphExec *phGraphExec, CUgraph hGraph,                    \
                                 CUgraphNode *phErrorNode, char *logBuffer, size_t bufferSize) \
    {                                                                                         \
        shim_ready();                                                                      \
        struct ts_shim_rec held;                                                              \
        if (graph_reserve(hGraph, &held) != 0)                                                \
            return CUDA_ERROR_OUT_OF_MEMORY;                                                  \
        CUresult r = PASS(name, phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize);     \
        return graph_settle(r, phGraphExec, &held);                                           \
    }
GRAPH_INSTANTIATE_LEGACY(cuGraphInstantiate)
GRAPH_INSTANTIATE_LEGACY(cuGraphInstantiate_v2)

TS_SHIM_EXPORT CUresult cuGraphExecDestroy(CUgraphExec hGraphExec)
{
    shim_ready();
    struct ts_shim_rec x;
    int had = ts_shim.cfg.mem_on && shim_mem_unrecord(TS_REC_GEXEC, (uintptr_t)hGraphExec, &x) == 0;
    CUresult r = PASS(cuGraphExecDestroy, hGraphExec);
    if (!had)
        return r;
    if (r != CUDA_SUCCESS) {
        shim_mem_record(x.kind, x.key, x.ldev, x.bytes, x.owner);
        return r;
    }
    /* the driver's graph pool would keep the memory cached: give it back */
    PASS(cuDeviceGraphMemTrim, (CUdevice)x.pool);
    shim_mem_release(x.ldev, x.bytes);
    return r;
}
