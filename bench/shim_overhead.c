/*
 * shim_overhead.c - what libtessera-cuda.so costs per intercepted call, on the
 * fake driver, measured in one process against direct calls into the same
 * driver (bench/shim-overhead runs it under each configuration).
 *
 *   tessera-bench-shim FAKE_LIBCUDA SHIM alloc [BATCHES]
 *       cuMemAlloc_v2 / cuMemFree_v2 of 4 KiB, direct and through the shim,
 *       in alternating batches; prints the median ns per call of each, the
 *       overhead (difference) and the ratio.
 *   tessera-bench-shim FAKE_LIBCUDA SHIM launch [BATCHES]
 *       the same for cuLaunchKernel of a zero-length kernel.
 *   tessera-bench-shim FAKE_LIBCUDA SHIM greedy NS SECONDS [NODES]
 *       launches NS-long kernels (a NODES-kernel graph if NODES > 1) through
 *       the shim as fast as it allows; prints the share of the GPU the work
 *       took ("share=%").
 * The shim takes its configuration from the environment, as in production.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "shim/cuda_types.h"

#define BATCH 256
#define DEFAULT_BATCHES 400
#define ALLOC_BYTES 4096

struct api {
#define FIELD(name, params, args) ts_cu_pfn_##name name;
    TS_CU_API(FIELD)
#undef FIELD
};

static void load(struct api *a, void *h, const struct api *fallback)
{
#define LOAD(name, params, args)                                                              \
    do {                                                                                      \
        void *sym = dlsym(h, #name);                                                          \
        memcpy(&a->name, &sym, sizeof sym);                                                   \
        if (!a->name && fallback)                                                             \
            a->name = fallback->name;                                                         \
    } while (0);
    TS_CU_API(LOAD)
#undef LOAD
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp);
    return v[n / 2];
}

static void check(CUresult r, const char *what)
{
    if (r != CUDA_SUCCESS) {
        fprintf(stderr, "tessera-bench-shim: %s: CUresult %d\n", what, (int)r);
        exit(1);
    }
}

static void report(const char *what, double *direct, double *shim, int n)
{
    double d = median(direct, n), s = median(shim, n);
    printf("%-14s direct %7.1f ns  shim %7.1f ns  overhead %6.1f ns  ratio %.3f\n", what, d, s,
           s - d, s / d);
}

static void bench_alloc(const struct api *direct, const struct api *shim, int batches)
{
    static CUdeviceptr p[BATCH];
    double *da = calloc((size_t)batches, sizeof *da), *sa = calloc((size_t)batches, sizeof *sa);
    double *df = calloc((size_t)batches, sizeof *df), *sf = calloc((size_t)batches, sizeof *sf);
    if (!da || !sa || !df || !sf)
        exit(1);
    for (int b = 0; b < batches; b++) {
        for (int side = 0; side < 2; side++) {
            const struct api *a = side ? shim : direct;
            int64_t t0 = now_ns();
            for (int i = 0; i < BATCH; i++)
                check(a->cuMemAlloc_v2(&p[i], ALLOC_BYTES), "cuMemAlloc_v2");
            int64_t t1 = now_ns();
            for (int i = 0; i < BATCH; i++)
                check(a->cuMemFree_v2(p[i]), "cuMemFree_v2");
            int64_t t2 = now_ns();
            (side ? sa : da)[b] = (double)(t1 - t0) / BATCH;
            (side ? sf : df)[b] = (double)(t2 - t1) / BATCH;
        }
    }
    report("cuMemAlloc_v2", da, sa, batches);
    report("cuMemFree_v2", df, sf, batches);
    free(da), free(sa), free(df), free(sf);
}

static CUfunction sleep_kernel(const struct api *a)
{
    static const char image[] = "fake";
    CUmodule m;
    CUfunction f;
    check(a->cuModuleLoadData(&m, image), "cuModuleLoadData");
    check(a->cuModuleGetFunction(&f, m, "ts_fake_sleep"), "cuModuleGetFunction");
    return f;
}

static void bench_launch(const struct api *direct, const struct api *shim, int batches)
{
    CUfunction f = sleep_kernel(direct);
    CUstream s;
    check(direct->cuStreamCreate(&s, 0), "cuStreamCreate");
    uint64_t ns = 0;
    void *params[] = {&ns};
    double *d = calloc((size_t)batches, sizeof *d), *sh = calloc((size_t)batches, sizeof *sh);
    if (!d || !sh)
        exit(1);
    for (int b = 0; b < batches; b++)
        for (int side = 0; side < 2; side++) {
            const struct api *a = side ? shim : direct;
            int64_t t0 = now_ns();
            for (int i = 0; i < BATCH; i++)
                check(a->cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, params, NULL),
                      "cuLaunchKernel");
            (side ? sh : d)[b] = (double)(now_ns() - t0) / BATCH;
            check(a->cuStreamSynchronize(s), "cuStreamSynchronize");
        }
    report("cuLaunchKernel", d, sh, batches);
    free(d), free(sh);
}

static void greedy(const struct api *a, uint64_t ns, double seconds, int nodes)
{
    CUfunction f = sleep_kernel(a);
    CUstream s;
    check(a->cuStreamCreate(&s, 0), "cuStreamCreate");
    void *params[] = {&ns};
    CUgraphExec x = NULL;
    if (nodes > 1) {
        CUgraph g;
        check(a->cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL), "capture");
        for (int i = 0; i < nodes; i++)
            check(a->cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, params, NULL), "launch");
        check(a->cuStreamEndCapture(s, &g), "end capture");
        check(a->cuGraphInstantiateWithFlags(&x, g, 0), "instantiate");
    }
    int64_t t0 = now_ns(), until = t0 + (int64_t)(seconds * 1e9);
    uint64_t launches = 0;
    while (now_ns() < until) {
        if (x)
            check(a->cuGraphLaunch(x, s), "cuGraphLaunch");
        else
            check(a->cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, params, NULL), "cuLaunchKernel");
        launches++;
    }
    check(a->cuStreamSynchronize(s), "cuStreamSynchronize");
    double wall = (double)(now_ns() - t0);
    printf("share=%.2f launches=%llu\n", 100.0 * (double)(launches * ns * (uint64_t)nodes) / wall,
           (unsigned long long)launches);
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: tessera-bench-shim FAKE_LIBCUDA SHIM alloc|launch [BATCHES] | "
                        "greedy NS SECONDS [NODES]\n");
        return 2;
    }
    setenv("TESSERA_CUDA_DRIVER", argv[1], 1);
    void *fake = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    void *shim = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
    if (!fake || !shim) {
        fprintf(stderr, "tessera-bench-shim: %s\n", dlerror());
        return 1;
    }
    struct api direct, through;
    load(&direct, fake, NULL);
    load(&through, shim, &direct);
    CUcontext ctx;
    check(through.cuInit(0), "cuInit");
    check(through.cuDevicePrimaryCtxRetain(&ctx, 0), "cuDevicePrimaryCtxRetain");
    check(through.cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
    int batches = argc > 4 ? atoi(argv[4]) : DEFAULT_BATCHES;
    if (strcmp(argv[3], "alloc") == 0)
        bench_alloc(&direct, &through, batches > 0 ? batches : DEFAULT_BATCHES);
    else if (strcmp(argv[3], "launch") == 0)
        bench_launch(&direct, &through, batches > 0 ? batches : DEFAULT_BATCHES);
    else if (strcmp(argv[3], "greedy") == 0 && argc >= 6)
        greedy(&through, strtoull(argv[4], NULL, 10), atof(argv[5]),
               argc > 6 ? atoi(argv[6]) : 1);
    else
        return 2;
    return 0;
}
