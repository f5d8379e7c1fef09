/*
 * test_fake_cuda.c - the fake libcuda (tests/fakes/fake_cuda.c) behaves like
 * the driver where the shim's and the allocator's tests depend on it.
 *
 * Proves: calls before cuInit and without a context fail with the driver's
 * codes; memory is charged at the allocation granularity against the
 * simulated capacity (contexts included) and comes back on free, on context
 * destruction and on primary-context release; VMM is real host memory
 * (reserve, create, map, set access, read/write, unmap, deferred release,
 * overlap refused); kernels take the time their parameters say, events see
 * it, graphs (built or captured) run their nodes back to back; the engine is
 * shared by processes naming one state file; cuGetProcAddress hands out the
 * versioned and per-thread entry points like the driver.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "shim/cuda_api.h"

#define MIB (1024ULL * 1024ULL)
#define CAPACITY_BYTES (1024 * MIB)
#define CTX_BYTES (64 * MIB)
#define GRAN_BYTES (2 * MIB)
#define SLEEP_KERNEL "ts_fake_sleep"

static struct cu_api cu;
static void *lib;
static char state_path[128];

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static size_t free_bytes(void)
{
    size_t fr = 0, total = 0;
    assert_int_equal(cu.cuMemGetInfo_v2(&fr, &total), CUDA_SUCCESS);
    assert_int_equal(total, CAPACITY_BYTES);
    return fr;
}

static CUfunction sleep_fn(void)
{
    static const char image[] = "fake";
    CUmodule mod;
    CUfunction f;
    assert_int_equal(cu.cuModuleLoadData(&mod, image), CUDA_SUCCESS);
    assert_int_equal(cu.cuModuleGetFunction(&f, mod, SLEEP_KERNEL), CUDA_SUCCESS);
    assert_int_equal(cu.cuModuleGetFunction(&f, mod, "no_such_kernel"), CUDA_ERROR_NOT_FOUND);
    assert_int_equal(cu.cuModuleGetFunction(&f, mod, SLEEP_KERNEL), CUDA_SUCCESS);
    return f;
}

static void test_before_init(void **state)
{
    (void)state;
    CUdeviceptr p;
    int n;
    assert_int_equal(cu.cuMemAlloc_v2(&p, 1), CUDA_ERROR_NOT_INITIALIZED);
    assert_int_equal(cu.cuDeviceGetCount(&n), CUDA_ERROR_NOT_INITIALIZED);
    assert_int_equal(cu.cuInit(1), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cu.cuInit(0), CUDA_SUCCESS);
    assert_int_equal(cu.cuMemAlloc_v2(&p, 1), CUDA_ERROR_INVALID_CONTEXT); /* no context */
    const char *s = NULL;
    assert_int_equal(cu.cuGetErrorString(CUDA_ERROR_OUT_OF_MEMORY, &s), CUDA_SUCCESS);
    assert_string_equal(s, "out of memory");
    assert_int_equal(cu.cuGetErrorName(CUDA_ERROR_OUT_OF_MEMORY, &s), CUDA_SUCCESS);
    assert_string_equal(s, "CUDA_ERROR_OUT_OF_MEMORY");
}

static void test_devices(void **state)
{
    (void)state;
    int n = 0, v = 0;
    assert_int_equal(cu.cuDeviceGetCount(&n), CUDA_SUCCESS);
    assert_int_equal(n, 2);
    assert_int_equal(cu.cuDriverGetVersion(&v), CUDA_SUCCESS);
    assert_int_equal(v, 12040);
    CUdevice d;
    assert_int_equal(cu.cuDeviceGet(&d, 2), CUDA_ERROR_INVALID_DEVICE);
    assert_int_equal(cu.cuDeviceGet(&d, 1), CUDA_SUCCESS);
    size_t total = 0;
    assert_int_equal(cu.cuDeviceTotalMem_v2(&total, d), CUDA_SUCCESS);
    assert_int_equal(total, CAPACITY_BYTES);
    char name[64];
    assert_int_equal(cu.cuDeviceGetName(name, sizeof name, d), CUDA_SUCCESS);
    assert_string_equal(name, "NVIDIA H100 80GB HBM3");
    CUuuid u0, u1;
    assert_int_equal(cu.cuDeviceGetUuid(&u0, 0), CUDA_SUCCESS);
    assert_int_equal(cu.cuDeviceGetUuid_v2(&u1, 1), CUDA_SUCCESS);
    assert_memory_not_equal(u0.bytes, u1.bytes, 16);
}

static void test_memory_charged_at_granularity(void **state)
{
    (void)state;
    CUcontext ctx;
    assert_int_equal(cu.cuDevicePrimaryCtxRetain(&ctx, 0), CUDA_SUCCESS);
    assert_int_equal(cu.cuCtxSetCurrent(ctx), CUDA_SUCCESS);
    assert_int_equal(free_bytes(), CAPACITY_BYTES - CTX_BYTES);

    CUdeviceptr a, b, c, m;
    assert_int_equal(cu.cuMemAlloc_v2(&a, 0), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cu.cuMemAlloc_v2(&a, 1), CUDA_SUCCESS);
    assert_int_equal(free_bytes(), CAPACITY_BYTES - CTX_BYTES - GRAN_BYTES);
    size_t pitch = 0;
    assert_int_equal(cu.cuMemAllocPitch_v2(&b, &pitch, 1000, 3000, 3), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cu.cuMemAllocPitch_v2(&b, &pitch, 1000, 3000, 4), CUDA_SUCCESS);
    assert_int_equal(pitch, 1024);
    assert_int_equal(free_bytes(), CAPACITY_BYTES - CTX_BYTES - 3 * GRAN_BYTES); /* 3 MB -> 4 */
    assert_int_equal(cu.cuMemAllocManaged(&m, 5 * MIB, TS_CU_MEM_ATTACH_GLOBAL), CUDA_SUCCESS);
    assert_int_equal(free_bytes(), CAPACITY_BYTES - CTX_BYTES - 6 * GRAN_BYTES);

    /* the memory is real: write it, read it back */
    unsigned char buf[16] = {0};
    assert_int_equal(cu.cuMemsetD8_v2(a, 0x5a, sizeof buf), CUDA_SUCCESS);
    assert_int_equal(cu.cuMemcpyDtoH_v2(buf, a, sizeof buf), CUDA_SUCCESS);
    assert_int_equal(buf[15], 0x5a);

    /* past the capacity: out of memory, nothing charged */
    size_t before = free_bytes();
    assert_int_equal(cu.cuMemAlloc_v2(&c, before + 1), CUDA_ERROR_OUT_OF_MEMORY);
    assert_int_equal(free_bytes(), before);
    assert_int_equal(cu.cuMemAlloc_v2(&c, before), CUDA_SUCCESS);
    assert_int_equal(free_bytes(), 0);
    assert_int_equal(cu.cuMemFree_v2(c), CUDA_SUCCESS);
    assert_int_equal(cu.cuMemFree_v2(c), CUDA_ERROR_INVALID_VALUE); /* twice */

    /* arrays: W x H x channels x element size, rounded */
    CUDA_ARRAY_DESCRIPTOR ad = {.Width = 1024, .Height = 1024, .Format = CU_AD_FORMAT_FLOAT,
                                .NumChannels = 4}; /* 16 MiB */
    CUarray arr;
    assert_int_equal(cu.cuArrayCreate_v2(&arr, &ad), CUDA_SUCCESS);
    assert_int_equal(free_bytes(), before - 16 * MIB);
    CUDA_ARRAY_MEMORY_REQUIREMENTS req;
    assert_int_equal(cu.cuArrayGetMemoryRequirements(&req, arr, 0), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cu.cuArrayDestroy(arr), CUDA_SUCCESS);
    /* deferred mapping: no memory of its own, and the driver says what it needs */
    CUDA_ARRAY3D_DESCRIPTOR dd = {.Width = 1024, .Height = 1024, .Format = CU_AD_FORMAT_FLOAT,
                                  .NumChannels = 4, .Flags = TS_CU_ARRAY3D_DEFERRED_MAPPING};
    assert_int_equal(cu.cuArray3DCreate_v2(&arr, &dd), CUDA_SUCCESS);
    assert_int_equal(free_bytes(), before);
    assert_int_equal(cu.cuArrayGetMemoryRequirements(&req, arr, 0), CUDA_SUCCESS);
    assert_int_equal(req.size, 16 * MIB);
    assert_int_equal(cu.cuArrayDestroy(arr), CUDA_SUCCESS);
    assert_int_equal(free_bytes(), before);
    /* three levels: 1 MiB + 256 KiB + 64 KiB -> one 2 MiB granule */
    CUDA_ARRAY3D_DESCRIPTOR md = {.Width = 1024, .Height = 1024,
                                  .Format = CU_AD_FORMAT_UNSIGNED_INT8, .NumChannels = 1};
    CUmipmappedArray mip;
    assert_int_equal(cu.cuMipmappedArrayCreate(&mip, &md, 3), CUDA_SUCCESS);
    assert_int_equal(free_bytes(), before - GRAN_BYTES);
    assert_int_equal(cu.cuMipmappedArrayDestroy(mip), CUDA_SUCCESS);
    assert_int_equal(free_bytes(), before);

    /* releasing the primary context frees what it held, context included */
    assert_int_equal(cu.cuMemFree_v2(a), CUDA_SUCCESS);
    assert_int_equal(cu.cuDevicePrimaryCtxRelease_v2(0), CUDA_SUCCESS);
    assert_int_equal(cu.cuDevicePrimaryCtxRetain(&ctx, 0), CUDA_SUCCESS);
    assert_int_equal(free_bytes(), CAPACITY_BYTES - CTX_BYTES);
}

static void test_vmm_is_real_memory(void **state)
{
    (void)state;
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {CU_MEM_LOCATION_TYPE_DEVICE, 0}};
    size_t gran = 0;
    assert_int_equal(
        cu.cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
        CUDA_SUCCESS);
    assert_int_equal(gran, GRAN_BYTES);
    size_t base_free = free_bytes();

    CUdeviceptr va;
    assert_int_equal(cu.cuMemAddressReserve(&va, 3 * gran, 0, 0, 0), CUDA_SUCCESS);
    assert_int_equal(cu.cuMemAddressFree(va, 3 * gran), CUDA_SUCCESS);
    assert_int_equal(cu.cuMemAddressReserve(&va, 8 * gran, 8 * gran, 0, 0), CUDA_SUCCESS);
    assert_int_equal(va % (8 * gran), 0);
    CUmemGenericAllocationHandle h, h2;
    assert_int_equal(cu.cuMemCreate(&h, gran + 1, &prop, 0), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cu.cuMemCreate(&h, 2 * gran, &prop, 0), CUDA_SUCCESS);
    assert_int_equal(free_bytes(), base_free - 2 * gran);
    assert_int_equal(cu.cuMemMap(va + gran, 2 * gran, 0, h, 0), CUDA_SUCCESS);
    CUmemAccessDesc acc = {.location = {CU_MEM_LOCATION_TYPE_DEVICE, 0},
                           .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    assert_int_equal(cu.cuMemSetAccess(va + gran, 2 * gran, &acc, 1), CUDA_SUCCESS);
    unsigned char *p = (unsigned char *)(uintptr_t)(va + gran);
    p[0] = 1;
    p[2 * gran - 1] = 2;
    assert_int_equal(p[0] + p[2 * gran - 1], 3);

    /* a second mapping over it is refused; beside it is fine and shares nothing */
    assert_int_equal(cu.cuMemCreate(&h2, gran, &prop, 0), CUDA_SUCCESS);
    assert_int_equal(cu.cuMemMap(va + 2 * gran, gran, 0, h2, 0), CUDA_ERROR_ALREADY_MAPPED);
    assert_int_equal(cu.cuMemMap(va + 3 * gran, gran, 0, h2, 0), CUDA_SUCCESS);
    /* partial unmap of a mapping is refused */
    assert_int_equal(cu.cuMemUnmap(va + gran, gran), CUDA_ERROR_INVALID_VALUE);
    /* the address range cannot be freed while mapped */
    assert_int_equal(cu.cuMemAddressFree(va, 8 * gran), CUDA_ERROR_INVALID_VALUE);

    /* release while mapped: the memory stays (and charged) until unmapped */
    assert_int_equal(cu.cuMemRelease(h), CUDA_SUCCESS);
    assert_int_equal(free_bytes(), base_free - 3 * gran);
    assert_int_equal(p[2 * gran - 1], 2);
    assert_int_equal(cu.cuMemUnmap(va + gran, 3 * gran), CUDA_SUCCESS);
    assert_int_equal(free_bytes(), base_free - gran);
    assert_int_equal(cu.cuMemRelease(h2), CUDA_SUCCESS);
    assert_int_equal(free_bytes(), base_free);

    /* unmapped again means inaccessible again: touching it faults */
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        signal(SIGSEGV, SIG_DFL);
        p[0] = 7;
        _exit(0);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_false(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    assert_int_equal(cu.cuMemAddressFree(va, 8 * gran), CUDA_SUCCESS);
}

static void launch_sleep(CUfunction f, uint64_t ns, unsigned blocks, CUstream s)
{
    void *params[] = {&ns};
    assert_int_equal(cu.cuLaunchKernel(f, blocks, 1, 1, 128, 1, 1, 0, s, params, NULL),
                     CUDA_SUCCESS);
}

static float elapsed_ms(CUevent a, CUevent b)
{
    float ms = -1;
    assert_int_equal(cu.cuEventSynchronize(b), CUDA_SUCCESS);
    assert_int_equal(cu.cuEventElapsedTime(&ms, a, b), CUDA_SUCCESS);
    return ms;
}

static void test_kernels_take_their_time(void **state)
{
    (void)state;
    CUfunction f = sleep_fn();
    CUstream s;
    CUevent a, b, nt;
    assert_int_equal(cu.cuStreamCreate(&s, 0), CUDA_SUCCESS);
    assert_int_equal(cu.cuEventCreate(&a, TS_CU_EVENT_DEFAULT), CUDA_SUCCESS);
    assert_int_equal(cu.cuEventCreate(&b, TS_CU_EVENT_DEFAULT), CUDA_SUCCESS);
    assert_int_equal(cu.cuEventCreate(&nt, TS_CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
    assert_int_equal(cu.cuEventQuery(a), CUDA_SUCCESS); /* never recorded */

    /* 4 blocks x 500 us = 2 ms */
    assert_int_equal(cu.cuEventRecord(a, s), CUDA_SUCCESS);
    launch_sleep(f, 500000, 4, s);
    assert_int_equal(cu.cuEventRecord(b, s), CUDA_SUCCESS);
    float ms = elapsed_ms(a, b);
    assert_true(ms >= 2.0f && ms < 1000.0f);

    /* a long kernel is not done at once; synchronising waits for it */
    assert_int_equal(cu.cuEventRecord(a, s), CUDA_SUCCESS);
    launch_sleep(f, 300000000, 1, s);
    assert_int_equal(cu.cuEventRecord(b, s), CUDA_SUCCESS);
    assert_int_equal(cu.cuEventQuery(b), CUDA_ERROR_NOT_READY);
    assert_int_equal(cu.cuStreamQuery(s), CUDA_ERROR_NOT_READY);
    float early;
    assert_int_equal(cu.cuEventElapsedTime(&early, a, b), CUDA_ERROR_NOT_READY);
    assert_int_equal(cu.cuStreamSynchronize(s), CUDA_SUCCESS);
    assert_int_equal(cu.cuEventQuery(b), CUDA_SUCCESS);
    assert_true(elapsed_ms(a, b) >= 300.0f);
    assert_int_equal(cu.cuEventRecord(nt, s), CUDA_SUCCESS);
    assert_int_equal(cu.cuEventElapsedTime(&early, a, nt), CUDA_ERROR_INVALID_HANDLE);

    /* kernelParams or the packed `extra` buffer, and cuLaunchKernelEx */
    uint64_t packed[1] = {1000000};
    size_t sz = sizeof packed;
    void *extra[] = {TS_CU_LAUNCH_PARAM_BUFFER_POINTER, packed, TS_CU_LAUNCH_PARAM_BUFFER_SIZE,
                     &sz, TS_CU_LAUNCH_PARAM_END};
    assert_int_equal(cu.cuEventRecord(a, s), CUDA_SUCCESS);
    assert_int_equal(cu.cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, NULL, extra), CUDA_SUCCESS);
    uint64_t ns = 1000000;
    void *params[] = {&ns};
    CUlaunchAttribute coop = {.id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE, .value.cooperative = 1};
    CUlaunchConfig cfg = {.gridDimX = 2, .gridDimY = 1, .gridDimZ = 1, .blockDimX = 1,
                          .blockDimY = 1, .blockDimZ = 1, .hStream = s, .attrs = &coop,
                          .numAttrs = 1};
    assert_int_equal(cu.cuLaunchKernelEx(&cfg, f, params, NULL), CUDA_SUCCESS);
    assert_int_equal(cu.cuLaunchCooperativeKernel(f, 1, 1, 1, 1, 1, 1, 0, s, params),
                     CUDA_SUCCESS);
    assert_int_equal(cu.cuLaunchCooperativeKernel(f, 100000, 1, 1, 1, 1, 1, 0, s, params),
                     CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE);
    assert_int_equal(cu.cuEventRecord(b, s), CUDA_SUCCESS);
    assert_true(elapsed_ms(a, b) >= 4.0f); /* 1 + 2 + 1 ms */
    assert_int_equal(cu.cuStreamDestroy_v2(s), CUDA_SUCCESS);
}

static void test_graphs_run_their_nodes(void **state)
{
    (void)state;
    CUfunction f = sleep_fn();
    CUstream s;
    CUevent a, b;
    assert_int_equal(cu.cuStreamCreate(&s, 0), CUDA_SUCCESS);
    assert_int_equal(cu.cuEventCreate(&a, 0), CUDA_SUCCESS);
    assert_int_equal(cu.cuEventCreate(&b, 0), CUDA_SUCCESS);

    /* captured: three 1 ms kernels become nodes, nothing runs yet */
    CUstreamCaptureStatus cs;
    assert_int_equal(cu.cuStreamBeginCapture_v2(NULL, CU_STREAM_CAPTURE_MODE_GLOBAL),
                     CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    assert_int_equal(cu.cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    assert_int_equal(cu.cuStreamIsCapturing(s, &cs), CUDA_SUCCESS);
    assert_int_equal(cs, CU_STREAM_CAPTURE_STATUS_ACTIVE);
    for (int i = 0; i < 3; i++)
        launch_sleep(f, 1000000, 1, s);
    assert_int_equal(cu.cuStreamSynchronize(s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CUgraph gr;
    assert_int_equal(cu.cuStreamEndCapture(s, &gr), CUDA_SUCCESS);
    assert_int_equal(cu.cuStreamIsCapturing(s, &cs), CUDA_SUCCESS);
    assert_int_equal(cs, CU_STREAM_CAPTURE_STATUS_NONE);
    assert_int_equal(cu.cuStreamQuery(s), CUDA_SUCCESS);

    /* built: one 2 ms node added by hand */
    uint64_t ns = 1000000;
    void *params[] = {&ns};
    CUDA_KERNEL_NODE_PARAMS_v2 np = {.func = f, .gridDimX = 2, .gridDimY = 1, .gridDimZ = 1,
                                     .blockDimX = 1, .blockDimY = 1, .blockDimZ = 1,
                                     .kernelParams = params};
    CUgraphNode node;
    assert_int_equal(cu.cuGraphAddKernelNode_v2(&node, gr, NULL, 0, &np), CUDA_SUCCESS);
    CUgraphExec x;
    assert_int_equal(cu.cuGraphInstantiateWithFlags(&x, gr, 0), CUDA_SUCCESS);
    assert_int_equal(cu.cuEventRecord(a, s), CUDA_SUCCESS);
    assert_int_equal(cu.cuGraphLaunch(x, s), CUDA_SUCCESS);
    assert_int_equal(cu.cuEventRecord(b, s), CUDA_SUCCESS);
    assert_true(elapsed_ms(a, b) >= 5.0f);
    assert_int_equal(cu.cuGraphExecDestroy(x), CUDA_SUCCESS);
    assert_int_equal(cu.cuGraphDestroy(gr), CUDA_SUCCESS);
    assert_int_equal(cu.cuStreamDestroy_v2(s), CUDA_SUCCESS);
}

/* A second process on the same state file waits behind the first's work. */
static void test_engine_shared_between_processes(void **state)
{
    (void)state;
    CUfunction f = sleep_fn();
    launch_sleep(f, 400000000, 1, NULL); /* 400 ms on device 0 */
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int64_t t0 = mono_ns();
        CUfunction cf = f;
        uint64_t ns = 1000;
        void *params[] = {&ns};
        if (cu.cuLaunchKernel(cf, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL) != CUDA_SUCCESS)
            _exit(2);
        /* a fresh stream in the child has no tail of its own */
        CUstream s;
        if (cu.cuStreamCreate(&s, 0) != CUDA_SUCCESS)
            _exit(3);
        if (cu.cuLaunchKernel(cf, 1, 1, 1, 1, 1, 1, 0, s, params, NULL) != CUDA_SUCCESS ||
            cu.cuStreamSynchronize(s) != CUDA_SUCCESS)
            _exit(4);
        _exit(mono_ns() - t0 >= 300000000LL ? 0 : 5);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    assert_int_equal(cu.cuCtxSynchronize(), CUDA_SUCCESS);
}

static void test_proc_address(void **state)
{
    (void)state;
    void *p = NULL;
    CUdriverProcAddressQueryResult st;
    assert_int_equal(cu.cuGetProcAddress_v2("cuMemAlloc", &p, 12000, 0, &st), CUDA_SUCCESS);
    assert_int_equal(st, CU_GET_PROC_ADDRESS_SUCCESS);
    assert_ptr_equal(p, dlsym(lib, "cuMemAlloc_v2"));
    assert_int_equal(cu.cuGetProcAddress_v2("cuLaunchKernel", &p, 12000,
                                            TS_CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st),
                     CUDA_SUCCESS);
    assert_ptr_equal(p, dlsym(lib, "cuLaunchKernel_ptsz"));
    assert_int_equal(cu.cuGetProcAddress_v2("cuLaunchKernel", &p, 12000,
                                            TS_CU_GET_PROC_ADDRESS_LEGACY_STREAM, &st),
                     CUDA_SUCCESS);
    assert_ptr_equal(p, dlsym(lib, "cuLaunchKernel"));
    assert_int_equal(cu.cuGetProcAddress_v2("cuGetProcAddress", &p, 12000, 0, &st), CUDA_SUCCESS);
    assert_ptr_equal(p, dlsym(lib, "cuGetProcAddress_v2"));
    assert_int_equal(cu.cuGetProcAddress("cuGetProcAddress", &p, 11080, 0), CUDA_SUCCESS);
    assert_ptr_equal(p, dlsym(lib, "cuGetProcAddress"));
    assert_int_equal(cu.cuGetProcAddress_v2("cuNoSuchThing", &p, 12000, 0, &st), CUDA_SUCCESS);
    assert_null(p);
    assert_int_equal(st, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    assert_int_equal(cu.cuGetProcAddress_v2("cuMemAllocAsync", &p, 11000, 0, &st), CUDA_SUCCESS);
    assert_null(p);
    assert_int_equal(st, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    assert_int_equal(cu.cuGetProcAddress_v2("cuMemAlloc", &p, 13000, 0, &st),
                     CUDA_ERROR_INVALID_VALUE); /* newer than the driver */
}

/* Pools as the driver's: freed memory stays reserved (and on the device)
 * until a synchronisation gives back what exceeds the release threshold, or
 * cuMemPoolTrimTo; the attributes say what the pool reserves and uses. */
static void test_pools_cache_until_synchronised(void **state)
{
    (void)state;
    CUcontext ctx;
    CUstream s;
    CUmemoryPool pool;
    assert_int_equal(cu.cuDevicePrimaryCtxRetain(&ctx, 0), CUDA_SUCCESS);
    assert_int_equal(cu.cuCtxSetCurrent(ctx), CUDA_SUCCESS);
    assert_int_equal(cu.cuStreamCreate(&s, 0), CUDA_SUCCESS);
    assert_int_equal(cu.cuDeviceGetMemPool(&pool, 0), CUDA_SUCCESS);
    size_t base = free_bytes();
    CUdeviceptr a, b;
    assert_int_equal(cu.cuMemAllocAsync(&a, 10 * MIB + 1, s), CUDA_SUCCESS);
    assert_int_equal(base - free_bytes(), 12 * MIB);
    assert_int_equal(cu.cuMemFreeAsync(a, s), CUDA_SUCCESS);
    assert_int_equal(base - free_bytes(), 12 * MIB); /* cached */
    cuuint64_t v = 0;
    assert_int_equal(cu.cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &v),
                     CUDA_SUCCESS);
    assert_int_equal(v, 12 * MIB);
    assert_int_equal(cu.cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &v),
                     CUDA_SUCCESS);
    assert_int_equal(v, 0);
    assert_int_equal(cu.cuMemAllocAsync(&b, 4 * MIB, s), CUDA_SUCCESS); /* from the cache */
    assert_int_equal(base - free_bytes(), 12 * MIB);
    assert_int_equal(cu.cuMemFreeAsync(b, s), CUDA_SUCCESS);
    v = 8 * MIB;
    assert_int_equal(cu.cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &v),
                     CUDA_SUCCESS);
    assert_int_equal(cu.cuStreamSynchronize(s), CUDA_SUCCESS);
    assert_int_equal(base - free_bytes(), 8 * MIB); /* down to the threshold */
    assert_int_equal(cu.cuMemPoolTrimTo(pool, 0), CUDA_SUCCESS);
    assert_int_equal(base - free_bytes(), 0);
    v = 1;
    assert_int_equal(cu.cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, &v),
                     CUDA_ERROR_INVALID_VALUE); /* a high mark resets only to 0 */
    v = 0;
    assert_int_equal(cu.cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &v),
                     CUDA_SUCCESS);
    assert_int_equal(cu.cuStreamDestroy_v2(s), CUDA_SUCCESS);
    assert_int_equal(cu.cuDevicePrimaryCtxRelease_v2(0), CUDA_SUCCESS);
}

/* Graph memory is mapped at the first launch, kept by the device's graph
 * pool after the instance goes, and given back by cuDeviceGraphMemTrim;
 * host and NUMA locations charge no device; the pre-3.2 entry points are
 * handed out for old versions. */
static void test_graph_memory_host_locations_legacy(void **state)
{
    (void)state;
    CUcontext ctx;
    CUstream s;
    assert_int_equal(cu.cuDevicePrimaryCtxRetain(&ctx, 0), CUDA_SUCCESS);
    assert_int_equal(cu.cuCtxSetCurrent(ctx), CUDA_SUCCESS);
    assert_int_equal(cu.cuStreamCreate(&s, 0), CUDA_SUCCESS);
    size_t base = free_bytes();
    CUgraph g;
    CUgraphNode n;
    CUgraphExec x;
    CUDA_MEM_ALLOC_NODE_PARAMS p;
    memset(&p, 0, sizeof p);
    p.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    p.bytesize = 20 * MIB;
    assert_int_equal(cu.cuGraphCreate(&g, 0), CUDA_SUCCESS);
    assert_int_equal(cu.cuGraphAddMemAllocNode(&n, g, NULL, 0, &p), CUDA_SUCCESS);
    assert_true(p.dptr != 0);
    assert_int_equal(cu.cuGraphInstantiateWithFlags(&x, g, 0), CUDA_SUCCESS);
    assert_int_equal(base - free_bytes(), 0);
    assert_int_equal(cu.cuGraphLaunch(x, s), CUDA_SUCCESS);
    assert_int_equal(base - free_bytes(), 20 * MIB);
    assert_int_equal(cu.cuGraphExecDestroy(x), CUDA_SUCCESS);
    assert_int_equal(base - free_bytes(), 20 * MIB); /* the graph pool keeps it */
    assert_int_equal(cu.cuDeviceGraphMemTrim(0), CUDA_SUCCESS);
    assert_int_equal(base - free_bytes(), 0);
    assert_int_equal(cu.cuGraphDestroy(g), CUDA_SUCCESS);

    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
    prop.location.id = 5;
    CUmemGenericAllocationHandle h;
    assert_int_equal(cu.cuMemCreate(&h, 2 * GRAN_BYTES, &prop, 0), CUDA_SUCCESS);
    assert_int_equal(base - free_bytes(), 0);
    assert_int_equal(cu.cuMemRelease(h), CUDA_SUCCESS);
    prop.location.id = 64; /* past the NUMA nodes there are */
    assert_int_equal(cu.cuMemCreate(&h, 2 * GRAN_BYTES, &prop, 0), CUDA_ERROR_INVALID_VALUE);

    void *fn = NULL;
    CUdriverProcAddressQueryResult q;
    assert_int_equal(cu.cuGetProcAddress_v2("cuMemAlloc", &fn, 3000, 0, &q), CUDA_SUCCESS);
    assert_ptr_equal(fn, CU_FN_PTR(cu.cuMemAlloc));
    assert_int_equal(cu.cuGetProcAddress_v2("cuMemAlloc", &fn, 3020, 0, &q), CUDA_SUCCESS);
    assert_ptr_equal(fn, CU_FN_PTR(cu.cuMemAlloc_v2));
    unsigned int f32, t32;
    assert_int_equal(cu.cuMemGetInfo(&f32, &t32), CUDA_SUCCESS);
    assert_int_equal(t32, CAPACITY_BYTES);
    assert_int_equal(cu.cuStreamDestroy_v2(s), CUDA_SUCCESS);
    assert_int_equal(cu.cuDevicePrimaryCtxRelease_v2(0), CUDA_SUCCESS);
}

static int setup(void **state)
{
    (void)state;
    snprintf(state_path, sizeof state_path, "/tmp/ts-fake-cuda-test-%d.state", (int)getpid());
    unlink(state_path);
    setenv("TESSERA_FAKE_CUDA_STATE", state_path, 1);
    setenv("TESSERA_FAKE_CUDA_DEVICES", "2", 1);
    setenv("TESSERA_FAKE_CUDA_MEM_BYTES", "1G", 1);
    setenv("TESSERA_FAKE_CUDA_CTX_BYTES", "64M", 1);
    unsetenv("TESSERA_FAKE_CUDA_GRANULARITY");
    lib = dlopen(TS_FAKE_CUDA, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "cannot load %s: %s\n", TS_FAKE_CUDA, dlerror());
        return -1;
    }
    return cu_api_load(&cu, lib) == 0 ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    unlink(state_path);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_before_init),
        cmocka_unit_test(test_devices),
        cmocka_unit_test(test_memory_charged_at_granularity),
        cmocka_unit_test(test_vmm_is_real_memory),
        cmocka_unit_test(test_kernels_take_their_time),
        cmocka_unit_test(test_graphs_run_their_nodes),
        cmocka_unit_test(test_engine_shared_between_processes),
        cmocka_unit_test(test_proc_address),
        cmocka_unit_test(test_pools_cache_until_synchronised),
        cmocka_unit_test(test_graph_memory_host_locations_legacy),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
