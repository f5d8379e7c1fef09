/*
 * shim_gpu_check.c - a small CUDA driver-API program for bench/shim-gpu-check:
 * run once without and once under libtessera-cuda.so on a real GPU, it shows
 * what the process is told (cuMemGetInfo, cuDeviceTotalMem) and where its
 * allocations are refused.
 *
 * It loads the driver the way CUDA runtimes do (dlopen libcuda.so.1, then
 * dlsym and cuGetProcAddress_v2), so the run under the shim also exercises
 * both of the shim's side doors. No CUDA headers or toolkit are needed: the
 * ABI comes from the shim's own declarations (src/shim/cuda_types.h).
 *   shim_gpu_check [CHUNK_MIB]
 * Prints one "key=value" line per step; exit status 0 unless the driver fails.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shim/cuda_types.h"

#define MIB (1024ULL * 1024ULL)
#define DEFAULT_CHUNK_MIB 256
#define MAX_CHUNKS 4096

#define SYM(h, name, var)                                                                     \
    do {                                                                                      \
        void *p_ = dlsym(h, name);                                                            \
        if (!p_) {                                                                            \
            fprintf(stderr, "shim_gpu_check: %s missing\n", name);                            \
            return 1;                                                                         \
        }                                                                                     \
        memcpy(&(var), &p_, sizeof p_);                                                       \
    } while (0)

#define CHECK(call)                                                                           \
    do {                                                                                      \
        CUresult r_ = (call);                                                                 \
        if (r_ != CUDA_SUCCESS) {                                                             \
            fprintf(stderr, "shim_gpu_check: %s: CUresult %d\n", #call, (int)r_);             \
            return 1;                                                                         \
        }                                                                                     \
    } while (0)

int main(int argc, char **argv)
{
    unsigned long long chunk = (argc > 1 ? strtoull(argv[1], NULL, 10) : DEFAULT_CHUNK_MIB) * MIB;
    void *h = dlopen("libcuda.so.1", RTLD_NOW);
    if (!h) {
        fprintf(stderr, "shim_gpu_check: no driver: %s\n", dlerror());
        return 77;
    }
    ts_cu_pfn_cuInit init;
    ts_cu_pfn_cuGetProcAddress_v2 proc;
    SYM(h, "cuInit", init);
    SYM(h, "cuGetProcAddress_v2", proc);
    CHECK(init(0));
    /* everything else as a CUDA 12 runtime gets it */
    ts_cu_pfn_cuDeviceGet dget;
    ts_cu_pfn_cuDeviceGetName dname;
    ts_cu_pfn_cuDeviceTotalMem_v2 dtotal;
    ts_cu_pfn_cuDevicePrimaryCtxRetain retain;
    ts_cu_pfn_cuCtxSetCurrent setcur;
    ts_cu_pfn_cuMemGetInfo_v2 info;
    ts_cu_pfn_cuMemAlloc_v2 alloc;
    ts_cu_pfn_cuMemFree_v2 mfree;
    ts_cu_pfn_cuMemGetAllocationGranularity gran;
#define PROC(name, var)                                                                       \
    do {                                                                                      \
        void *p_ = NULL;                                                                      \
        CHECK(proc(name, &p_, 12000, 0, NULL));                                               \
        if (!p_)                                                                              \
            return 1;                                                                         \
        memcpy(&(var), &p_, sizeof p_);                                                       \
    } while (0)
    PROC("cuDeviceGet", dget);
    PROC("cuDeviceGetName", dname);
    PROC("cuDeviceTotalMem", dtotal);
    PROC("cuDevicePrimaryCtxRetain", retain);
    PROC("cuCtxSetCurrent", setcur);
    PROC("cuMemGetInfo", info);
    PROC("cuMemAlloc", alloc);
    PROC("cuMemFree", mfree);
    PROC("cuMemGetAllocationGranularity", gran);

    CUdevice dev;
    char name[128];
    size_t total_dev = 0, fr = 0, total = 0, g = 0;
    CHECK(dget(&dev, 0));
    CHECK(dname(name, sizeof name, dev));
    CHECK(dtotal(&total_dev, dev));
    printf("device=\"%s\" cuDeviceTotalMem=%zu\n", name, total_dev);
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {CU_MEM_LOCATION_TYPE_DEVICE, dev}};
    if (gran(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) == CUDA_SUCCESS)
        printf("granularity=%zu\n", g);
    CUcontext ctx;
    CHECK(retain(&ctx, dev));
    CHECK(setcur(ctx));
    CHECK(info(&fr, &total));
    /* on an otherwise idle GPU, total - free right after the context is what
     * the context itself holds: the figure for TESSERA_CUDA_CTX_BYTES */
    printf("after_context cuMemGetInfo free=%zu total=%zu in_use=%zu\n", fr, total, total - fr);

    static CUdeviceptr chunks[MAX_CHUNKS];
    int n = 0;
    CUresult r = CUDA_SUCCESS;
    while (n < MAX_CHUNKS && (r = alloc(&chunks[n], chunk)) == CUDA_SUCCESS)
        n++;
    const char *text = "?";
    ts_cu_pfn_cuGetErrorName ename;
    void *pe = dlsym(h, "cuGetErrorName");
    if (pe) {
        memcpy(&ename, &pe, sizeof pe);
        ename(r, &text);
    }
    printf("allocated %d x %llu MiB = %llu MiB, then %s (%d)\n", n, chunk / MIB,
           (unsigned long long)n * (chunk / MIB), text, (int)r);
    CHECK(info(&fr, &total));
    printf("at_refusal cuMemGetInfo free=%zu total=%zu\n", fr, total);
    while (n > 0)
        CHECK(mfree(chunks[--n]));
    CHECK(info(&fr, &total));
    printf("after_free cuMemGetInfo free=%zu total=%zu\n", fr, total);
    return 0;
}
