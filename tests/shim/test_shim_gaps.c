/*
 * test_shim_gaps.c - the allocation paths a naive quota misses, in process,
 * against the fake driver (which models them as the real driver behaves):
 *
 * - stream-ordered pools keep what their frees return cached until a
 *   synchronisation gives back what exceeds the release threshold, so a pool
 *   is charged what it reserves, not what is live; cuMemPoolTrimTo and the
 *   release threshold move the charge with the device; a cache never makes
 *   an allocation fail (the shim trims the tenant's own pools first);
 * - cuMemCreate with a host or NUMA location is host memory: not charged,
 *   and its location id (a NUMA node, not a device) is never used as one;
 * - managed memory is charged on the current device and refused past it;
 * - a process using two GPUs is held to each device's own quota;
 * - graph memory nodes, added by hand or captured from cuMemAllocAsync,
 *   are charged when the graph is instantiated and refused past the quota;
 * - the pre-_v2 entry points are handled: frees and reports like _v2,
 *   allocations refused while a quota is set (they cannot address it).
 *
 * `sh` calls through the dlopen()ed shim, `fk` straight into the fake to read
 * what each device really holds.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "shim/shim_ops.h"

#define MIB (1024ULL * 1024ULL)
#define QUOTA0 (512 * MIB)
#define QUOTA1 (128 * MIB)
#define CTX_BYTES (32 * MIB)

static struct cu_api sh, fk;
static char ledger_path[128];
static CUcontext primary[2];
static CUstream stream;

static uint64_t device_used(int dev)
{
    size_t fr, total;
    CUcontext cur;
    assert_int_equal(fk.cuCtxGetCurrent(&cur), CUDA_SUCCESS);
    assert_int_equal(fk.cuCtxSetCurrent(primary[dev]), CUDA_SUCCESS);
    assert_int_equal(fk.cuMemGetInfo_v2(&fr, &total), CUDA_SUCCESS);
    assert_int_equal(fk.cuCtxSetCurrent(cur), CUDA_SUCCESS);
    return total - fr;
}

static uint64_t shim_used(int dev, uint64_t quota)
{
    size_t fr, total;
    CUcontext cur;
    assert_int_equal(sh.cuCtxGetCurrent(&cur), CUDA_SUCCESS);
    assert_int_equal(sh.cuCtxSetCurrent(primary[dev]), CUDA_SUCCESS);
    assert_int_equal(sh.cuMemGetInfo_v2(&fr, &total), CUDA_SUCCESS);
    assert_int_equal(sh.cuCtxSetCurrent(cur), CUDA_SUCCESS);
    assert_int_equal(total, quota);
    return total - fr;
}

/* Device 0 holds, and the shim charges, exactly `bytes` beyond the context. */
static void expect0(uint64_t bytes)
{
    uint64_t dev = device_used(0), shim = shim_used(0, QUOTA0);
    if (dev != CTX_BYTES + bytes || shim != CTX_BYTES + bytes)
        fail_msg("device 0 holds %llu MiB, shim charges %llu MiB, expected %llu MiB",
                 (unsigned long long)((dev - CTX_BYTES) / MIB),
                 (unsigned long long)((shim - CTX_BYTES) / MIB),
                 (unsigned long long)(bytes / MIB));
}

static uint64_t pool_attr(CUmemoryPool p, CUmemPool_attribute a)
{
    cuuint64_t v = 0;
    assert_int_equal(sh.cuMemPoolGetAttribute(p, a, &v), CUDA_SUCCESS);
    return v;
}

static void test_pool_cache_is_charged(void **state)
{
    (void)state;
    CUmemoryPool pool;
    assert_int_equal(sh.cuDeviceGetMemPool(&pool, 0), CUDA_SUCCESS);
    CUdeviceptr a, b;
    assert_int_equal(sh.cuMemAllocAsync(&a, 100 * MIB, stream), CUDA_SUCCESS);
    expect0(100 * MIB);
    /* freed but cached: the device still holds it, so the shim still charges it */
    assert_int_equal(sh.cuMemFreeAsync(a, stream), CUDA_SUCCESS);
    expect0(100 * MIB);
    assert_int_equal(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 100 * MIB);
    assert_int_equal(pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 0);
    /* served from the cache: nothing new charged */
    assert_int_equal(sh.cuMemAllocAsync(&b, 60 * MIB, stream), CUDA_SUCCESS);
    expect0(100 * MIB);
    assert_int_equal(sh.cuMemFreeAsync(b, stream), CUDA_SUCCESS);
    /* a synchronisation gives back what exceeds the threshold (0) */
    assert_int_equal(sh.cuStreamSynchronize(stream), CUDA_SUCCESS);
    expect0(0);
}

static void test_pool_release_threshold_and_trim(void **state)
{
    (void)state;
    CUmemoryPool pool;
    assert_int_equal(sh.cuDeviceGetMemPool(&pool, 0), CUDA_SUCCESS);
    cuuint64_t keep = 64 * MIB;
    assert_int_equal(sh.cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep),
                     CUDA_SUCCESS);
    CUdeviceptr a;
    assert_int_equal(sh.cuMemAllocAsync(&a, 200 * MIB, stream), CUDA_SUCCESS);
    assert_int_equal(sh.cuMemFreeAsync(a, stream), CUDA_SUCCESS);
    assert_int_equal(sh.cuCtxSynchronize(), CUDA_SUCCESS);
    expect0(64 * MIB); /* the pool keeps its threshold across the synchronisation */
    assert_int_equal(sh.cuMemPoolTrimTo(pool, 16 * MIB), CUDA_SUCCESS);
    expect0(16 * MIB);
    assert_int_equal(sh.cuMemPoolTrimTo(pool, 0), CUDA_SUCCESS);
    expect0(0);
    keep = 0;
    assert_int_equal(sh.cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep),
                     CUDA_SUCCESS);
}

static void test_pool_cache_never_causes_oom(void **state)
{
    (void)state;
    CUmemoryPool pool;
    assert_int_equal(sh.cuDeviceGetMemPool(&pool, 0), CUDA_SUCCESS);
    cuuint64_t keep = QUOTA0; /* the pool would keep everything */
    assert_int_equal(sh.cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep),
                     CUDA_SUCCESS);
    CUdeviceptr a, b;
    assert_int_equal(sh.cuMemAllocAsync(&a, 400 * MIB, stream), CUDA_SUCCESS);
    assert_int_equal(sh.cuMemFreeAsync(a, stream), CUDA_SUCCESS);
    assert_int_equal(sh.cuStreamSynchronize(stream), CUDA_SUCCESS);
    expect0(400 * MIB);
    /* 400 MiB cached + 200 MiB > the quota: the shim trims the tenant's own cache */
    assert_int_equal(sh.cuMemAlloc_v2(&b, 200 * MIB), CUDA_SUCCESS);
    expect0(200 * MIB);
    /* past the quota with nothing cached: refused before the driver */
    CUdeviceptr c;
    assert_int_equal(sh.cuMemAllocAsync(&c, 400 * MIB, stream), CUDA_ERROR_OUT_OF_MEMORY);
    expect0(200 * MIB);
    assert_int_equal(sh.cuMemFree_v2(b), CUDA_SUCCESS);
    /* refused while the pool holds a cache: the refusal charges nothing */
    assert_int_equal(sh.cuMemAllocAsync(&c, 100 * MIB, stream), CUDA_SUCCESS);
    assert_int_equal(sh.cuMemFreeAsync(c, stream), CUDA_SUCCESS);
    assert_int_equal(sh.cuMemAllocAsync(&c, QUOTA0, stream), CUDA_ERROR_OUT_OF_MEMORY);
    keep = 0;
    assert_int_equal(sh.cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep),
                     CUDA_SUCCESS);
    assert_int_equal(sh.cuStreamSynchronize(stream), CUDA_SUCCESS);
    expect0(0);
    keep = 0;
    assert_int_equal(sh.cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep),
                     CUDA_SUCCESS);
    expect0(0);
}

/* Threads allocating from and freeing to one pool at once, synchronising
 * now and then: the shim's charge follows the pool without drifting. */
struct pool_worker {
    unsigned seed;
    int failed;
};

static void *pool_churn(void *arg)
{
    struct pool_worker *w = arg;
    CUstream s;
    if (sh.cuCtxSetCurrent(primary[0]) != CUDA_SUCCESS || sh.cuStreamCreate(&s, 0) != CUDA_SUCCESS) {
        w->failed = 1;
        return NULL;
    }
    for (int i = 0; i < 150; i++) {
        w->seed = w->seed * 1103515245u + 12345u;
        CUdeviceptr p;
        CUresult r = sh.cuMemAllocAsync(&p, (1 + (w->seed >> 16) % 40) * MIB, s);
        if (r == CUDA_SUCCESS)
            r = sh.cuMemFreeAsync(p, s);
        else if (r != CUDA_ERROR_OUT_OF_MEMORY)
            w->failed = 1;
        if (i % 7 == 0)
            sh.cuStreamSynchronize(s);
        size_t fr, total;
        if (sh.cuMemGetInfo_v2(&fr, &total) != CUDA_SUCCESS || total != QUOTA0)
            w->failed = 1;
    }
    sh.cuStreamSynchronize(s);
    sh.cuStreamDestroy_v2(s);
    return NULL;
}

static void test_pool_threads(void **state)
{
    (void)state;
    struct pool_worker w[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (struct pool_worker){.seed = 7u + (unsigned)i};
        assert_int_equal(pthread_create(&th[i], NULL, pool_churn, &w[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        assert_false(w[i].failed);
    }
    assert_int_equal(sh.cuStreamSynchronize(stream), CUDA_SUCCESS);
    expect0(0);
}

static void test_destroyed_pool_keeps_live_allocations(void **state)
{
    (void)state;
    CUmemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = 0;
    CUmemoryPool pool;
    assert_int_equal(sh.cuMemPoolCreate(&pool, &props), CUDA_SUCCESS);
    CUdeviceptr a, b;
    assert_int_equal(sh.cuMemAllocFromPoolAsync(&a, 30 * MIB, pool, stream), CUDA_SUCCESS);
    assert_int_equal(sh.cuMemAllocFromPoolAsync(&b, 50 * MIB, pool, stream), CUDA_SUCCESS);
    assert_int_equal(sh.cuMemFreeAsync(b, stream), CUDA_SUCCESS);
    expect0(80 * MIB);
    assert_int_equal(sh.cuMemPoolDestroy(pool), CUDA_SUCCESS);
    expect0(30 * MIB); /* the cache went with the pool; `a` lives on */
    assert_int_equal(sh.cuMemFreeAsync(a, stream), CUDA_SUCCESS);
    expect0(0);
}

static void test_host_and_numa_locations_not_charged(void **state)
{
    (void)state;
    static const CUmemLocationType types[] = {CU_MEM_LOCATION_TYPE_HOST,
                                              CU_MEM_LOCATION_TYPE_HOST_NUMA,
                                              CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        CUmemAllocationProp prop;
        memset(&prop, 0, sizeof prop);
        prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
        prop.location.type = types[i];
        prop.location.id = 7; /* a NUMA node: no such device */
        CUmemGenericAllocationHandle h;
        /* bigger than any quota: host memory is not the device's */
        assert_int_equal(sh.cuMemCreate(&h, QUOTA0 + 64 * MIB, &prop, 0), CUDA_SUCCESS);
        expect0(0);
        assert_int_equal(sh.cuMemRelease(h), CUDA_SUCCESS);
    }
    /* a device location still is */
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    CUmemGenericAllocationHandle h;
    assert_int_equal(sh.cuMemCreate(&h, QUOTA0, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
    assert_int_equal(sh.cuMemCreate(&h, 64 * MIB, &prop, 0), CUDA_SUCCESS);
    expect0(64 * MIB);
    assert_int_equal(sh.cuMemRelease(h), CUDA_SUCCESS);
    expect0(0);
}

static void test_managed_memory(void **state)
{
    (void)state;
    CUdeviceptr a, b;
    assert_int_equal(sh.cuMemAllocManaged(&a, 300 * MIB, TS_CU_MEM_ATTACH_GLOBAL), CUDA_SUCCESS);
    expect0(300 * MIB);
    assert_int_equal(sh.cuMemAllocManaged(&b, 200 * MIB, TS_CU_MEM_ATTACH_HOST),
                     CUDA_ERROR_OUT_OF_MEMORY);
    expect0(300 * MIB);
    assert_int_equal(sh.cuMemFree_v2(a), CUDA_SUCCESS);
    expect0(0);
}

static void test_each_gpu_its_own_quota(void **state)
{
    (void)state;
    CUdeviceptr a, b, c;
    assert_int_equal(sh.cuCtxSetCurrent(primary[1]), CUDA_SUCCESS);
    size_t total = 0;
    assert_int_equal(sh.cuDeviceTotalMem_v2(&total, 1), CUDA_SUCCESS);
    assert_int_equal(total, QUOTA1);
    /* 128 MiB on device 1 (32 MiB of it its context): 100 MiB does not fit */
    assert_int_equal(sh.cuMemAlloc_v2(&a, 100 * MIB), CUDA_ERROR_OUT_OF_MEMORY);
    assert_int_equal(sh.cuMemAlloc_v2(&a, 90 * MIB), CUDA_SUCCESS);
    assert_int_equal(device_used(1), CTX_BYTES + 90 * MIB);
    assert_int_equal(shim_used(1, QUOTA1), CTX_BYTES + 90 * MIB);
    /* device 0 is untouched by device 1's use, and has its own room */
    assert_int_equal(sh.cuCtxSetCurrent(primary[0]), CUDA_SUCCESS);
    expect0(0);
    assert_int_equal(sh.cuMemAlloc_v2(&b, 400 * MIB), CUDA_SUCCESS);
    assert_int_equal(sh.cuMemAlloc_v2(&c, 100 * MIB), CUDA_ERROR_OUT_OF_MEMORY);
    expect0(400 * MIB);
    assert_int_equal(sh.cuMemFree_v2(b), CUDA_SUCCESS);
    assert_int_equal(sh.cuMemFree_v2(a), CUDA_SUCCESS); /* freed from another device's context */
    assert_int_equal(shim_used(1, QUOTA1), CTX_BYTES);
    expect0(0);
}

static CUDA_MEM_ALLOC_NODE_PARAMS node_params(uint64_t bytes)
{
    CUDA_MEM_ALLOC_NODE_PARAMS p;
    memset(&p, 0, sizeof p);
    p.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    p.poolProps.location.id = 0;
    p.bytesize = bytes;
    return p;
}

static void test_graph_memory_nodes(void **state)
{
    (void)state;
    CUgraph graph;
    CUgraphNode node;
    CUgraphExec exec;
    assert_int_equal(sh.cuGraphCreate(&graph, 0), CUDA_SUCCESS);
    CUDA_MEM_ALLOC_NODE_PARAMS p = node_params(100 * MIB);
    assert_int_equal(sh.cuGraphAddMemAllocNode(&node, graph, NULL, 0, &p), CUDA_SUCCESS);
    assert_true(p.dptr != 0);
    expect0(0); /* a node holds nothing */
    assert_int_equal(sh.cuGraphInstantiateWithFlags(&exec, graph, 0), CUDA_SUCCESS);
    /* charged from instantiation; the device maps it at the first launch */
    assert_int_equal(shim_used(0, QUOTA0), CTX_BYTES + 100 * MIB);
    assert_int_equal(device_used(0), CTX_BYTES);
    assert_int_equal(sh.cuGraphLaunch(exec, stream), CUDA_SUCCESS);
    assert_int_equal(sh.cuStreamSynchronize(stream), CUDA_SUCCESS);
    expect0(100 * MIB);
    /* destroyed: the shim trims the device's graph pool, which would keep it */
    assert_int_equal(sh.cuGraphExecDestroy(exec), CUDA_SUCCESS);
    expect0(0);
    /* past the quota: the instantiation is refused */
    CUDA_MEM_ALLOC_NODE_PARAMS big = node_params(QUOTA0);
    assert_int_equal(sh.cuGraphAddMemAllocNode(&node, graph, NULL, 0, &big), CUDA_SUCCESS);
    assert_int_equal(sh.cuGraphInstantiateWithFlags(&exec, graph, 0), CUDA_ERROR_OUT_OF_MEMORY);
    CUDA_GRAPH_INSTANTIATE_PARAMS ip;
    memset(&ip, 0, sizeof ip);
    assert_int_equal(sh.cuGraphInstantiateWithParams(&exec, graph, &ip),
                     CUDA_ERROR_OUT_OF_MEMORY);
    assert_int_equal(ip.result_out, CUDA_GRAPH_INSTANTIATE_ERROR);
    assert_int_equal(sh.cuGraphInstantiate_v2(&exec, graph, NULL, NULL, 0),
                     CUDA_ERROR_OUT_OF_MEMORY);
    expect0(0);
    assert_int_equal(sh.cuGraphDestroy(graph), CUDA_SUCCESS);
}

static void test_captured_allocations_are_graph_memory(void **state)
{
    (void)state;
    CUgraph graph;
    CUgraphExec exec;
    CUdeviceptr a;
    assert_int_equal(sh.cuStreamBeginCapture_v2(stream, CU_STREAM_CAPTURE_MODE_RELAXED),
                     CUDA_SUCCESS);
    assert_int_equal(sh.cuMemAllocAsync(&a, 80 * MIB, stream), CUDA_SUCCESS);
    assert_int_equal(sh.cuMemFreeAsync(a, stream), CUDA_SUCCESS);
    assert_int_equal(sh.cuStreamEndCapture(stream, &graph), CUDA_SUCCESS);
    expect0(0); /* captured, not allocated */
    assert_int_equal(sh.cuGraphInstantiateWithFlags(&exec, graph, 0), CUDA_SUCCESS);
    assert_int_equal(shim_used(0, QUOTA0), CTX_BYTES + 80 * MIB);
    assert_int_equal(sh.cuGraphLaunch(exec, stream), CUDA_SUCCESS);
    assert_int_equal(sh.cuStreamSynchronize(stream), CUDA_SUCCESS);
    expect0(80 * MIB);
    assert_int_equal(sh.cuGraphExecDestroy(exec), CUDA_SUCCESS);
    assert_int_equal(sh.cuGraphDestroy(graph), CUDA_SUCCESS);
    expect0(0);
    /* a captured allocation past the quota: its graph cannot be instantiated */
    assert_int_equal(sh.cuStreamBeginCapture_v2(stream, CU_STREAM_CAPTURE_MODE_RELAXED),
                     CUDA_SUCCESS);
    assert_int_equal(sh.cuMemAllocAsync(&a, QUOTA0, stream), CUDA_SUCCESS);
    assert_int_equal(sh.cuStreamEndCapture(stream, &graph), CUDA_SUCCESS);
    assert_int_equal(sh.cuGraphInstantiateWithFlags(&exec, graph, 0), CUDA_ERROR_OUT_OF_MEMORY);
    assert_int_equal(sh.cuGraphDestroy(graph), CUDA_SUCCESS);
    expect0(0);
}

static void test_legacy_entry_points(void **state)
{
    (void)state;
    /* a runtime asking for the CUDA 3.0 ABI gets the shim's legacy wrapper */
    void *fn = NULL;
    CUdriverProcAddressQueryResult q;
    assert_int_equal(sh.cuGetProcAddress_v2("cuMemAlloc", &fn, 3000, 0, &q), CUDA_SUCCESS);
    assert_ptr_equal(fn, CU_FN_PTR(sh.cuMemAlloc));
    assert_ptr_not_equal(fn, CU_FN_PTR(fk.cuMemAlloc));
    unsigned int f32, t32;
    assert_int_equal(sh.cuMemGetInfo(&f32, &t32), CUDA_SUCCESS);
    assert_int_equal(t32, QUOTA0);
    assert_int_equal(f32, QUOTA0 - CTX_BYTES);
    unsigned int total32;
    assert_int_equal(sh.cuDeviceTotalMem(&total32, 1), CUDA_SUCCESS);
    assert_int_equal(total32, QUOTA1);
#ifdef MAP_32BIT
    CUdeviceptr_v1 p;
    assert_int_equal(sh.cuMemAlloc(&p, 48 * MIB), CUDA_SUCCESS);
    expect0(48 * MIB);
    assert_int_equal(sh.cuMemAlloc(&p, (unsigned)QUOTA0), CUDA_ERROR_OUT_OF_MEMORY);
    assert_int_equal(sh.cuMemFree(p), CUDA_SUCCESS);
    expect0(0);
#endif
    /* sizes the driver picks itself: refused while there is a quota */
    CUdeviceptr_v1 q1;
    unsigned int pitch;
    assert_int_equal(sh.cuMemAllocPitch(&q1, &pitch, 1000, 10, 4), CUDA_ERROR_NOT_SUPPORTED);
    CUDA_ARRAY_DESCRIPTOR_v1 ad = {.Width = 64, .Height = 64, .Format = CU_AD_FORMAT_FLOAT,
                                   .NumChannels = 1};
    CUarray arr;
    assert_int_equal(sh.cuArrayCreate(&arr, &ad), CUDA_ERROR_NOT_SUPPORTED);
    /* contexts through the old names: charged and returned */
    CUcontext c;
    assert_int_equal(sh.cuCtxCreate(&c, 0, 0), CUDA_SUCCESS);
    assert_int_equal(sh.cuCtxSetCurrent(primary[0]), CUDA_SUCCESS);
    expect0(CTX_BYTES);
    assert_int_equal(sh.cuCtxDestroy(c), CUDA_SUCCESS);
    assert_int_equal(sh.cuCtxSetCurrent(primary[0]), CUDA_SUCCESS);
    expect0(0);
}

static int setup(void **state)
{
    (void)state;
    snprintf(ledger_path, sizeof ledger_path, "/tmp/ts-shim-gaps-%d.ledger", (int)getpid());
    unlink(ledger_path);
    setenv("TESSERA_FAKE_CUDA_DEVICES", "2", 1);
    setenv("TESSERA_FAKE_CUDA_MEM_BYTES", "8G", 1);
    setenv("TESSERA_FAKE_CUDA_CTX_BYTES", "32M", 1);
    unsetenv("TESSERA_FAKE_CUDA_STATE");
    setenv("TESSERA_CUDA_DRIVER", TS_FAKE_CUDA, 1);
    setenv("TESSERA_CUDA_MEM_LIMIT", "0=512M,1=128M", 1);
    setenv("TESSERA_CUDA_CTX_BYTES", "32M", 1);
    setenv("TESSERA_CUDA_LEDGER", ledger_path, 1);
    unsetenv("TESSERA_CUDA_COMPUTE_PERCENT");
    void *fake = dlopen(TS_FAKE_CUDA, RTLD_NOW | RTLD_LOCAL);
    void *shim = dlopen(TS_SHIM_LIB, RTLD_NOW | RTLD_LOCAL);
    if (!fake || !shim) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return -1;
    }
    if (cu_api_load(&fk, fake) != 0)
        return -1;
    cu_api_load(&sh, shim);
#define FILL(name, params, args)                                                              \
    if (!sh.name)                                                                             \
        sh.name = fk.name;
    TS_CU_API(FILL)
#undef FILL
    if (sh.cuInit(0) != CUDA_SUCCESS || sh.cuDevicePrimaryCtxRetain(&primary[0], 0) != CUDA_SUCCESS ||
        sh.cuDevicePrimaryCtxRetain(&primary[1], 1) != CUDA_SUCCESS ||
        sh.cuCtxSetCurrent(primary[0]) != CUDA_SUCCESS ||
        sh.cuStreamCreate(&stream, 0) != CUDA_SUCCESS)
        return -1;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    unlink(ledger_path);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pool_cache_is_charged),
        cmocka_unit_test(test_pool_release_threshold_and_trim),
        cmocka_unit_test(test_pool_cache_never_causes_oom),
        cmocka_unit_test(test_pool_threads),
        cmocka_unit_test(test_destroyed_pool_keeps_live_allocations),
        cmocka_unit_test(test_host_and_numa_locations_not_charged),
        cmocka_unit_test(test_managed_memory),
        cmocka_unit_test(test_each_gpu_its_own_quota),
        cmocka_unit_test(test_graph_memory_nodes),
        cmocka_unit_test(test_captured_allocations_are_graph_memory),
        cmocka_unit_test(test_legacy_entry_points),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
