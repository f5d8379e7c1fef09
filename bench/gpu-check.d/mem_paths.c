/*
 * mem_paths.c - bench/gpu-check's quota check through the driver API, run
 * under LD_PRELOAD=libtessera-cuda.so with TESSERA_CUDA_MEM_LIMIT=QUOTA on
 * CUDA device 0. It reaches the driver the way runtimes do (dlopen
 * libcuda.so.1, then cuGetProcAddress_v2 for every entry point) and checks:
 *   report    cuMemGetInfo_v2 total is the quota
 *   alloc     cuMemAlloc_v2 of the quota is refused with out-of-memory, a
 *             quarter of it is not
 *   async     cuMemAllocAsync: a freed (cached) block still counts; the quota
 *             is refused
 *   managed   cuMemAllocManaged of the quota is refused
 *   graph     a graph whose memory node is the quota cannot be instantiated;
 *             one of a quarter is, runs and is destroyed
 *   nvml      nvmlDeviceGetMemoryInfo on the same GPU reports the quota
 *             (skipped when NVML is not there)
 *   mem_paths QUOTA_BYTES [LIBNVIDIA_ML]
 * One "check=NAME result=ok|FAIL|skip ..." line each; exit status = failures
 * (77: no driver). Needs no CUDA toolkit (src/shim/cuda_types.h).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shim/cuda_types.h"

static struct {
#define FIELD(name, params, args) ts_cu_pfn_##name name;
    TS_CU_API(FIELD)
#undef FIELD
} cu;

static int fails;

static void result(const char *check, int ok, const char *fmt, unsigned long long a,
                   unsigned long long b)
{
    printf("check=%s result=%s ", check, ok ? "ok" : "FAIL");
    printf(fmt, a, b);
    putchar('\n');
    fails += !ok;
}

/* Resolves an entry point as a CUDA 12 runtime does. */
static void get(const char *base, int version, void *out)
{
    void *fn = NULL;
    CUdriverProcAddressQueryResult q;
    if (cu.cuGetProcAddress_v2(base, &fn, version, 0, &q) != CUDA_SUCCESS)
        fn = NULL;
    memcpy(out, &fn, sizeof fn);
}

typedef int (*nvml_init_fn)(void);
typedef int (*nvml_handle_fn)(unsigned, void **);
typedef int (*nvml_mem_fn)(void *, unsigned long long *);

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: mem_paths QUOTA_BYTES [LIBNVIDIA_ML]\n");
        return 2;
    }
    unsigned long long q = strtoull(argv[1], NULL, 10), quarter = q / 4;
    void *h = dlopen("libcuda.so.1", RTLD_NOW);
    if (!h) {
        fprintf(stderr, "mem_paths: no driver: %s\n", dlerror());
        return 77;
    }
    void *p = dlsym(h, "cuGetProcAddress_v2");
    memcpy(&cu.cuGetProcAddress_v2, &p, sizeof p);
    if (!cu.cuGetProcAddress_v2)
        return 77;
    get("cuInit", 12000, &cu.cuInit);
    get("cuDeviceGet", 12000, &cu.cuDeviceGet);
    get("cuDevicePrimaryCtxRetain", 12000, &cu.cuDevicePrimaryCtxRetain);
    get("cuCtxSetCurrent", 12000, &cu.cuCtxSetCurrent);
    get("cuMemGetInfo", 12000, &cu.cuMemGetInfo_v2);
    get("cuMemAlloc", 12000, &cu.cuMemAlloc_v2);
    get("cuMemFree", 12000, &cu.cuMemFree_v2);
    get("cuMemAllocAsync", 12000, &cu.cuMemAllocAsync);
    get("cuMemFreeAsync", 12000, &cu.cuMemFreeAsync);
    get("cuMemAllocManaged", 12000, &cu.cuMemAllocManaged);
    get("cuStreamCreate", 12000, &cu.cuStreamCreate);
    get("cuStreamSynchronize", 12000, &cu.cuStreamSynchronize);
    get("cuGraphCreate", 12000, &cu.cuGraphCreate);
    get("cuGraphAddMemAllocNode", 12000, &cu.cuGraphAddMemAllocNode);
    get("cuGraphAddMemFreeNode", 12000, &cu.cuGraphAddMemFreeNode);
    get("cuGraphInstantiateWithFlags", 12000, &cu.cuGraphInstantiateWithFlags);
    get("cuGraphLaunch", 12000, &cu.cuGraphLaunch);
    get("cuGraphExecDestroy", 12000, &cu.cuGraphExecDestroy);
    get("cuGraphDestroy", 12000, &cu.cuGraphDestroy);
    CUdevice dev;
    CUcontext ctx;
    CUstream s;
    if (!cu.cuInit || cu.cuInit(0) != CUDA_SUCCESS || cu.cuDeviceGet(&dev, 0) != CUDA_SUCCESS ||
        cu.cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS ||
        cu.cuCtxSetCurrent(ctx) != CUDA_SUCCESS || cu.cuStreamCreate(&s, 0) != CUDA_SUCCESS) {
        fprintf(stderr, "mem_paths: cannot open device 0\n");
        return 77;
    }
    size_t fr = 0, tot = 0;
    cu.cuMemGetInfo_v2(&fr, &tot);
    result("report", tot == q, "total=%llu quota=%llu", (unsigned long long)tot, q);

    CUdeviceptr a = 0, b = 0;
    CUresult r1 = cu.cuMemAlloc_v2(&a, q), r2 = cu.cuMemAlloc_v2(&b, quarter);
    result("alloc", r1 == CUDA_ERROR_OUT_OF_MEMORY && r2 == CUDA_SUCCESS,
           "quota=%llu(cu %llu) quarter=ok", (unsigned long long)r1, (unsigned long long)r2);
    if (r2 == CUDA_SUCCESS)
        cu.cuMemFree_v2(b);

    size_t f0 = 0, f1 = 0;
    cu.cuMemGetInfo_v2(&f0, &tot);
    r2 = cu.cuMemAllocAsync(&b, quarter, s);
    if (r2 == CUDA_SUCCESS)
        cu.cuMemFreeAsync(b, s);
    cu.cuMemGetInfo_v2(&f1, &tot); /* freed, not synchronised: still in the pool */
    r1 = cu.cuMemAllocAsync(&a, q, s);
    cu.cuStreamSynchronize(s);
    size_t f2 = 0;
    cu.cuMemGetInfo_v2(&f2, &tot); /* synchronised: the pool gave it back */
    result("async", r1 == CUDA_ERROR_OUT_OF_MEMORY && r2 == CUDA_SUCCESS && f0 - f1 >= quarter &&
                        f2 == f0,
           "quota=cu %llu cached_charged=%llu", (unsigned long long)r1,
           (unsigned long long)(f0 - f1));
    printf("# after the synchronisation: free=%llu (before: %llu)\n", (unsigned long long)f2,
           (unsigned long long)f0);

    r1 = cu.cuMemAllocManaged(&a, q, TS_CU_MEM_ATTACH_GLOBAL);
    r2 = cu.cuMemAllocManaged(&b, quarter, TS_CU_MEM_ATTACH_GLOBAL);
    result("managed", r1 == CUDA_ERROR_OUT_OF_MEMORY && r2 == CUDA_SUCCESS,
           "quota=cu %llu quarter=cu %llu", (unsigned long long)r1, (unsigned long long)r2);
    if (r2 == CUDA_SUCCESS)
        cu.cuMemFree_v2(b);

    CUresult gi[2] = {CUDA_ERROR_UNKNOWN, CUDA_ERROR_UNKNOWN}, gl = CUDA_ERROR_UNKNOWN;
    unsigned long long sizes[2] = {q, quarter};
    for (int i = 0; i < 2; i++) {
        CUgraph g;
        CUgraphNode n, fn;
        CUgraphExec x;
        CUDA_MEM_ALLOC_NODE_PARAMS np;
        memset(&np, 0, sizeof np);
        np.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
        np.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        np.poolProps.location.id = dev;
        np.bytesize = sizes[i];
        if (cu.cuGraphCreate(&g, 0) != CUDA_SUCCESS ||
            cu.cuGraphAddMemAllocNode(&n, g, NULL, 0, &np) != CUDA_SUCCESS ||
            cu.cuGraphAddMemFreeNode(&fn, g, &n, 1, np.dptr) != CUDA_SUCCESS)
            break;
        gi[i] = cu.cuGraphInstantiateWithFlags(&x, g, 0);
        if (gi[i] == CUDA_SUCCESS) {
            gl = cu.cuGraphLaunch(x, s);
            cu.cuStreamSynchronize(s);
            cu.cuGraphExecDestroy(x);
        }
        cu.cuGraphDestroy(g);
    }
    result("graph", gi[0] == CUDA_ERROR_OUT_OF_MEMORY && gi[1] == CUDA_SUCCESS && gl == CUDA_SUCCESS,
           "instantiate quota=cu %llu quarter=cu %llu", (unsigned long long)gi[0],
           (unsigned long long)gi[1]);

    void *nh = dlopen(argc > 2 ? argv[2] : "libnvidia-ml.so.1", RTLD_NOW);
    nvml_init_fn ninit = NULL;
    nvml_handle_fn nhandle = NULL;
    nvml_mem_fn nmem = NULL;
    if (nh) {
        void *f = dlsym(nh, "nvmlInit_v2");
        memcpy(&ninit, &f, sizeof f);
        f = dlsym(nh, "nvmlDeviceGetHandleByIndex_v2");
        memcpy(&nhandle, &f, sizeof f);
        f = dlsym(nh, "nvmlDeviceGetMemoryInfo");
        memcpy(&nmem, &f, sizeof f);
    }
    void *nd = NULL;
    unsigned long long m[3] = {0, 0, 0}; /* nvmlMemory_t: total, free, used */
    if (ninit && nhandle && nmem && ninit() == 0 && nhandle(0, &nd) == 0 && nmem(nd, m) == 0)
        result("nvml", m[0] == q, "total=%llu quota=%llu", m[0], q);
    else
        printf("check=nvml result=skip no NVML device 0\n");
    return fails;
}
