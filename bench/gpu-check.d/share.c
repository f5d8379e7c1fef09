/*
 * share.c - bench/gpu-check's compute-share and launch-overhead checks,
 * through the driver API (no toolkit needed to build it):
 *
 *   gpu-check-share IMAGE calibrate KERNEL_US
 *       alone on the GPU: finds the parameter of ts_fake_sleep (from IMAGE:
 *       the fatbin of sleep_kernel.cu on a GPU, a fixed amount of arithmetic
 *       per unit; any file on the fake driver, nanoseconds) that makes one
 *       kernel take KERNEL_US, timing kernels with events: "param= kernel_ns=".
 *   gpu-check-share IMAGE greedy SECONDS PARAM KERNEL_NS
 *       launches such kernels back to back for SECONDS and prints the GPU
 *       time they took (count x the calibrated KERNEL_NS: each kernel is a
 *       fixed amount of work, whatever else shares the GPU) over the wall
 *       time, "share=%". Run two at once under the shim, with 30 % and 70 %.
 *       (An event bracket around each kernel would also count the other
 *       process's work queued between the two events.)
 *   gpu-check-share IMAGE launch BATCHES
 *       the median CPU time of one cuLaunchKernel of a zero-length kernel over
 *       BATCHES batches of 256: "launch_ns=" (run with and without the shim).
 * Exit status 77 without a driver, 1 when a call fails.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "shim/cuda_types.h"

#define BATCH 256
#define RING 64

static struct {
#define FIELD(name, params, args) ts_cu_pfn_##name name;
    TS_CU_API(FIELD)
#undef FIELD
} cu;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

#define CHECK(call)                                                                           \
    do {                                                                                      \
        CUresult r_ = (call);                                                                 \
        if (r_ != CUDA_SUCCESS) {                                                             \
            fprintf(stderr, "gpu-check-share: %s: CUresult %d\n", #call, (int)r_);            \
            exit(1);                                                                          \
        }                                                                                     \
    } while (0)

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    if (buf)
        buf[n] = 0;
    fclose(f);
    return buf;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: gpu-check-share IMAGE calibrate KERNEL_US | IMAGE greedy "
                        "SECONDS PARAM KERNEL_NS | IMAGE launch BATCHES\n");
        return 2;
    }
    void *h = dlopen("libcuda.so.1", RTLD_NOW);
    if (!h)
        return 77;
#define LOAD(name, params, args)                                                              \
    do {                                                                                      \
        void *p_ = dlsym(h, #name);                                                           \
        memcpy(&cu.name, &p_, sizeof p_);                                                     \
    } while (0);
    TS_CU_API(LOAD)
#undef LOAD
    char *image = read_file(argv[1]);
    if (!image) {
        fprintf(stderr, "gpu-check-share: cannot read %s\n", argv[1]);
        return 1;
    }
    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    CUfunction f;
    CUstream s;
    CHECK(cu.cuInit(0));
    CHECK(cu.cuDeviceGet(&dev, 0));
    CHECK(cu.cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK(cu.cuCtxSetCurrent(ctx));
    CHECK(cu.cuModuleLoadData(&mod, image));
    CHECK(cu.cuModuleGetFunction(&f, mod, "ts_fake_sleep"));
    CHECK(cu.cuStreamCreate(&s, 0));
    if (strcmp(argv[2], "launch") == 0) {
        int batches = atoi(argv[3]);
        if (batches < 1 || batches > 100000)
            batches = 100;
        uint64_t *per = malloc((size_t)batches * sizeof *per);
        unsigned long long zero = 0;
        void *params[] = {&zero};
        for (int b = 0; b < batches; b++) {
            uint64_t t0 = now_ns();
            for (int i = 0; i < BATCH; i++)
                CHECK(cu.cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, params, NULL));
            per[b] = (now_ns() - t0) / BATCH;
            CHECK(cu.cuStreamSynchronize(s));
        }
        qsort(per, (size_t)batches, sizeof *per, cmp_u64);
        printf("launch_ns=%llu batches=%d\n", (unsigned long long)per[batches / 2], batches);
        return 0;
    }
    CUevent ev[RING][2];
    for (int i = 0; i < RING; i++) {
        CHECK(cu.cuEventCreate(&ev[i][0], TS_CU_EVENT_DEFAULT));
        CHECK(cu.cuEventCreate(&ev[i][1], TS_CU_EVENT_DEFAULT));
    }
    if (strcmp(argv[2], "calibrate") == 0) {
        double target = atof(argv[3]) * 1000.0;
        if (target <= 0 || target > 1e9) {
            fprintf(stderr, "gpu-check-share: KERNEL_US must be 0..1e6\n");
            return 2;
        }
        unsigned long long param = (unsigned long long)target; /* the fake: ns */
        double per = 0;
        for (int round = 0; round < 4; round++) {
            void *params[] = {&param};
            for (int i = 0; i < RING; i++) {
                CHECK(cu.cuEventRecord(ev[i][0], s));
                CHECK(cu.cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, params, NULL));
                CHECK(cu.cuEventRecord(ev[i][1], s));
            }
            CHECK(cu.cuStreamSynchronize(s));
            double sum = 0;
            for (int i = 0; i < RING; i++) {
                float ms = 0;
                CHECK(cu.cuEventElapsedTime(&ms, ev[i][0], ev[i][1]));
                sum += ms * 1e6;
            }
            per = sum / RING;
            if (per <= 0)
                break;
            double scale = target / per;
            if (scale > 0.98 && scale < 1.02)
                break;
            param = (unsigned long long)((double)param * scale) + 1;
        }
        printf("param=%llu kernel_ns=%.0f\n", param, per);
        return 0;
    }
    double seconds = atof(argv[3]);
    unsigned long long param = argc > 4 ? strtoull(argv[4], NULL, 10) : 0;
    double kernel_ns = argc > 5 ? atof(argv[5]) : 0;
    if (seconds <= 0 || seconds > 600 || param == 0 || kernel_ns <= 0) {
        fprintf(stderr, "gpu-check-share: greedy SECONDS(0..600) PARAM KERNEL_NS\n");
        return 2;
    }
    void *params[] = {&param};
    unsigned long long kernels = 0;
    uint64_t t0 = now_ns(), end = t0 + (uint64_t)(seconds * 1e9);
    while (now_ns() < end) {
        for (int i = 0; i < RING; i++)
            CHECK(cu.cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, params, NULL));
        CHECK(cu.cuStreamSynchronize(s));
        kernels += RING;
    }
    double gpu_ms = (double)kernels * kernel_ns / 1e6;
    double wall_ms = (double)(now_ns() - t0) / 1e6;
    printf("share=%.1f gpu_ms=%.0f wall_ms=%.0f kernels=%llu kernel_us=%.0f\n",
           100.0 * gpu_ms / wall_ms, gpu_ms, wall_ms, kernels, kernel_ns / 1000.0);
    return 0;
}
