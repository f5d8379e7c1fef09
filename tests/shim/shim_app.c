/*
 * shim_app.c - a CUDA "application" the shim's tests run under
 * LD_PRELOAD=libtessera-cuda.so, linked against the fake libcuda.so.1 the way
 * a real program links the driver.
 *
 * It reaches the driver the way $TS_APP_VIA says, so each door the shim must
 * guard is exercised: "export" (calls by exported name), "dlsym" (dlopen
 * libcuda.so.1 + dlsym, as runtimes do), "procaddr" (cuGetProcAddress_v2 for
 * every entry point, as CUDA 12 runtimes do) and "procaddr_ptsz" (the same
 * with the per-thread default stream flag, so launches and async
 * allocations come back as their _ptsz variants).
 *
 *   shim_app paths                  quota script: prints "total=T free=F",
 *                                   fills the quota, checks the next byte is
 *                                   refused, runs every allocation kind once
 *   shim_app storm OPS SEED MAXMB   random allocations and frees; any answer
 *                                   other than success or out-of-memory fails
 *   shim_app hold BYTES             allocates, prints "held", waits to be killed
 *   shim_app nvml local|global      NVML memory info of GPUs 0 and 1 ($TS_APP_NVML)
 *   shim_app compute NS SECONDS KIND [NODES]
 *                                   launches NS-long kernels (KIND: kernel, ex,
 *                                   coop, graph of NODES kernels) as fast as
 *                                   allowed for SECONDS; prints the GPU time
 *                                   its work took and the wall time
 * Exit status 0 on success; a message on stderr otherwise.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "shim/shim_ops.h"

/* Linked against libcuda.so.1 (the fake): every entry point by name. */
#define APP_PROTO(name, params, args) CUresult name params;
TS_CU_API(APP_PROTO)
#undef APP_PROTO

#define DRIVER_VERSION 12040
#define MIB (1024ULL * 1024ULL)
#define MAX_OBJS 256
#define CTX_WAIT_MS 20000

static struct cu_api cu;

static int die(const char *what, CUresult r)
{
    fprintf(stderr, "shim_app: %s: CUresult %d\n", what, (int)r);
    exit(1);
}

#define CHECK(call)                                                                           \
    do {                                                                                      \
        CUresult r_ = (call);                                                                 \
        if (r_ != CUDA_SUCCESS)                                                               \
            die(#call, r_);                                                                   \
    } while (0)

/* The base name and ABI version cuGetProcAddress needs for an export name. */
static void base_of(const char *export_name, char *base, size_t len, int *version)
{
    static const struct {
        const char *name;
        int version;
    } pinned[] = {
        {"cuCtxCreate_v2", 11000},          {"cuCtxCreate_v3", 11040},
        {"cuDeviceGetUuid", 11000},         {"cuDevicePrimaryCtxRelease", 10000},
        {"cuGraphAddKernelNode", 11000},    {"cuGetProcAddress", 11080},
    };
    *version = DRIVER_VERSION;
    for (size_t i = 0; i < sizeof pinned / sizeof pinned[0]; i++)
        if (strcmp(export_name, pinned[i].name) == 0)
            *version = pinned[i].version;
    snprintf(base, len, "%s", export_name);
    static const char *const suffixes[] = {"_v2_ptsz", "_ptsz", "_v2", "_v3", "_v4"};
    for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
        size_t n = strlen(base), k = strlen(suffixes[i]);
        if (n > k && strcmp(base + n - k, suffixes[i]) == 0) {
            base[n - k] = '\0';
            break;
        }
    }
}

static void load_api(const char *via)
{
    if (strcmp(via, "export") == 0) {
#define BY_NAME(name, params, args) cu.name = name;
        TS_CU_API(BY_NAME)
#undef BY_NAME
        return;
    }
    if (strcmp(via, "dlsym") == 0) {
        void *h = dlopen("libcuda.so.1", RTLD_NOW);
        if (!h) {
            fprintf(stderr, "shim_app: dlopen libcuda.so.1: %s\n", dlerror());
            exit(1);
        }
        cu_api_load(&cu, h);
        return;
    }
    int ptsz = strcmp(via, "procaddr_ptsz") == 0;
    if (!ptsz && strcmp(via, "procaddr") != 0) {
        fprintf(stderr, "shim_app: TS_APP_VIA=%s: unknown\n", via);
        exit(2);
    }
    CHECK(cuInit(0));
    cuuint64_t flags = ptsz ? TS_CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
                            : TS_CU_GET_PROC_ADDRESS_DEFAULT;
#define BY_PROC(name, params, args)                                                           \
    do {                                                                                      \
        char base[96];                                                                        \
        int ver;                                                                              \
        void *p = NULL;                                                                       \
        base_of(#name, base, sizeof base, &ver);                                              \
        CUdriverProcAddressQueryResult st;                                                    \
        if (cuGetProcAddress_v2(base, &p, ver, flags, &st) == CUDA_SUCCESS && p)              \
            memcpy(&cu.name, &p, sizeof p);                                                   \
    } while (0);
    TS_CU_API(BY_PROC)
#undef BY_PROC
}

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* The context is charged to the quota like any allocation: with
 * TS_APP_WAIT_CTX set, wait (bounded) for room instead of failing, as a
 * test starting several storms at once needs. */
static CUcontext start(void)
{
    CUcontext ctx;
    CHECK(cu.cuInit(0));
    int patience_ms = getenv("TS_APP_WAIT_CTX") ? CTX_WAIT_MS : 0;
    CUresult r;
    while ((r = cu.cuDevicePrimaryCtxRetain(&ctx, 0)) == CUDA_ERROR_OUT_OF_MEMORY &&
           patience_ms-- > 0)
        usleep(1000);
    CHECK(r);
    CHECK(cu.cuCtxSetCurrent(ctx));
    return ctx;
}

static int run_paths(void)
{
    start();
    CUstream s;
    CUmemoryPool pool;
    CHECK(cu.cuStreamCreate(&s, 0));
    CHECK(cu.cuDeviceGetDefaultMemPool(&pool, 0));
    size_t fr, total;
    CHECK(cu.cuMemGetInfo_v2(&fr, &total));
    printf("total=%zu free=%zu\n", total, fr);
    CUdeviceptr all, more;
    CHECK(cu.cuMemAlloc_v2(&all, fr));
    CUresult r = cu.cuMemAlloc_v2(&more, 1);
    printf("over=%d\n", (int)r);
    r = cu.cuMemAllocAsync(&more, 1, NULL); /* _ptsz under procaddr_ptsz */
    printf("over_async=%d\n", (int)r);
    CHECK(cu.cuMemFree_v2(all));
    for (int k = 0; k < OPS_KINDS; k++) {
        struct ops_obj o;
        r = ops_alloc(&cu, k, 3 * MIB + 1, s, pool, &o);
        if (r != CUDA_SUCCESS)
            die(ops_kind_name[k], r);
        CHECK(ops_free(&cu, &o, s));
    }
    CHECK(cu.cuMemGetInfo_v2(&fr, &total));
    printf("after total=%zu free=%zu\n", total, fr);
    return 0;
}

static uint64_t rnd(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ULL;
}

static int run_storm(int ops, uint64_t seed, uint64_t max_bytes)
{
    start();
    CUstream s;
    CUmemoryPool pool;
    CHECK(cu.cuStreamCreate(&s, 0));
    CHECK(cu.cuDeviceGetDefaultMemPool(&pool, 0));
    printf("go\n"); /* a test killing us mid-storm waits for this */
    struct ops_obj objs[MAX_OBJS];
    int n = 0, allocs = 0, ooms = 0;
    uint64_t st = seed * 0x9e3779b97f4a7c15ULL + 1;
    for (int i = 0; i < ops; i++) {
        if (n < MAX_OBJS && (n == 0 || rnd(&st) % 100 < 55)) {
            int k = (int)(rnd(&st) % OPS_KINDS);
            CUresult r = ops_alloc(&cu, k, 1 + rnd(&st) % max_bytes, s, pool, &objs[n]);
            if (r == CUDA_SUCCESS) {
                n++;
                allocs++;
            } else if (r == CUDA_ERROR_OUT_OF_MEMORY) {
                ooms++;
            } else {
                die(ops_kind_name[k], r);
            }
        } else {
            int j = (int)(rnd(&st) % (unsigned)n);
            CHECK(ops_free(&cu, &objs[j], s));
            objs[j] = objs[--n];
        }
    }
    while (n > 0)
        CHECK(ops_free(&cu, &objs[--n], s));
    printf("allocs=%d ooms=%d\n", allocs, ooms);
    return 0;
}

static int run_hold(uint64_t bytes)
{
    start();
    CUdeviceptr p;
    CHECK(cu.cuMemAlloc_v2(&p, bytes));
    printf("held\n");
    fflush(stdout);
    for (;;)
        pause();
    return 0;
}

/* Greedy: queue kernels as fast as the shim lets us; the GPU time our work
 * took is what completed, counted from the fake's exact durations. */
static int run_compute(uint64_t ns, double seconds, const char *kind, int nodes)
{
    start();
    static const char image[] = "fake";
    CUmodule mod;
    CUfunction f;
    CUstream s;
    CHECK(cu.cuModuleLoadData(&mod, image));
    CHECK(cu.cuModuleGetFunction(&f, mod, "ts_fake_sleep"));
    CHECK(cu.cuStreamCreate(&s, 0));
    void *params[] = {&ns};
    CUgraphExec exec = NULL;
    uint64_t per_launch = ns;
    if (strcmp(kind, "graph") == 0) {
        CUgraph g;
        CHECK(cu.cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
        for (int i = 0; i < nodes; i++)
            CHECK(cu.cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, params, NULL));
        CHECK(cu.cuStreamEndCapture(s, &g));
        CHECK(cu.cuGraphInstantiateWithFlags(&exec, g, 0));
        per_launch = ns * (uint64_t)nodes;
    }
    CUlaunchConfig cfg = {.gridDimX = 1, .gridDimY = 1, .gridDimZ = 1, .blockDimX = 32,
                          .blockDimY = 1, .blockDimZ = 1, .hStream = s};
    int64_t t0 = mono_ns(), until = t0 + (int64_t)(seconds * 1e9);
    uint64_t launches = 0;
    while (mono_ns() < until) {
        if (exec)
            CHECK(cu.cuGraphLaunch(exec, s));
        else if (strcmp(kind, "coop") == 0)
            CHECK(cu.cuLaunchCooperativeKernel(f, 1, 1, 1, 32, 1, 1, 0, s, params));
        else if (strcmp(kind, "ex") == 0)
            CHECK(cu.cuLaunchKernelEx(&cfg, f, params, NULL));
        else
            CHECK(cu.cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, params, NULL));
        launches++;
    }
    CHECK(cu.cuStreamSynchronize(s));
    int64_t wall = mono_ns() - t0;
    printf("busy_ns=%llu wall_ns=%lld launches=%llu\n",
           (unsigned long long)(launches * per_launch), (long long)wall,
           (unsigned long long)launches);
    return 0;
}

typedef int (*nvml_init_fn)(void);
typedef int (*nvml_handle_fn)(unsigned int, void **);
typedef int (*nvml_mem_fn)(void *, unsigned long long *);

/* NVML as a monitoring library would use it, without touching CUDA first:
 * dlopen $TS_APP_NVML, then the memory query found in its handle (local) or
 * process-wide (global: libnvidia-ml opened RTLD_GLOBAL, name looked up with
 * RTLD_DEFAULT, as for a program linked against it). */
static int run_nvml(const char *scope)
{
    int global = strcmp(scope, "global") == 0;
    void *h = dlopen(getenv("TS_APP_NVML"), RTLD_NOW | (global ? RTLD_GLOBAL : RTLD_LOCAL));
    if (!h) {
        fprintf(stderr, "shim_app: dlopen NVML: %s\n", dlerror());
        return 1;
    }
    void *pi = dlsym(h, "nvmlInit_v2"), *ph = dlsym(h, "nvmlDeviceGetHandleByIndex_v2");
    void *pm = dlsym(global ? RTLD_DEFAULT : h, "nvmlDeviceGetMemoryInfo");
    nvml_init_fn init;
    nvml_handle_fn handle;
    nvml_mem_fn mem;
    memcpy(&init, &pi, sizeof pi);
    memcpy(&handle, &ph, sizeof ph);
    memcpy(&mem, &pm, sizeof pm);
    if (!init || !handle || !mem || init() != 0)
        return 1;
    for (unsigned i = 0; i < 2; i++) {
        void *dev;
        unsigned long long m[3]; /* nvmlMemory_t: total, free, used */
        if (handle(i, &dev) != 0 || mem(dev, m) != 0)
            return 1;
        printf("nvml%u total=%llu free=%llu used=%llu\n", i, m[0], m[1], m[2]);
    }
    return 0;
}

int main(int argc, char **argv)
{
    const char *via = getenv("TS_APP_VIA");
    load_api(via && *via ? via : "export");
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc >= 3 && strcmp(argv[1], "nvml") == 0)
        return run_nvml(argv[2]);
    if (argc >= 2 && strcmp(argv[1], "paths") == 0)
        return run_paths();
    if (argc >= 5 && strcmp(argv[1], "storm") == 0)
        return run_storm(atoi(argv[2]), strtoull(argv[3], NULL, 10),
                         strtoull(argv[4], NULL, 10) * MIB);
    if (argc >= 3 && strcmp(argv[1], "hold") == 0)
        return run_hold(strtoull(argv[2], NULL, 10));
    if (argc >= 5 && strcmp(argv[1], "compute") == 0)
        return run_compute(strtoull(argv[2], NULL, 10), atof(argv[3]), argv[4],
                           argc >= 6 ? atoi(argv[5]) : 1);
    fprintf(stderr, "usage: shim_app paths | storm OPS SEED MAXMB | hold BYTES | "
                    "compute NS SECONDS kernel|ex|coop|graph [NODES]\n");
    return 2;
}
