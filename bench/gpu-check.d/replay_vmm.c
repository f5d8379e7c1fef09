/*
 * replay_vmm.c - bench/gpu-check's allocator check: a recorded PyTorch trace
 * (tests/data/alloc) replayed by the tessera allocator on the CUDA VMM
 * backend (src/alloc/dev_cuda.c: cuMemCreate/cuMemMap on the real device, or
 * on the fake libcuda in a dry run), beside the PyTorch caching-allocator
 * model replaying the same trace on the simulated device.
 *
 *   gpu-check-replay LIBCUDA TRACE.events.csv [TRACE.initial_live.csv]
 *
 * The trace's stream ids are the recording process's pointers: each distinct
 * one is given a stream of its own (cuStreamCreate), 0 stays the legacy
 * stream. One line per allocator, "key=value" pairs: peak requested and
 * reserved bytes, fragmentation (1 - peak requested / peak reserved), driver
 * calls that map or allocate, the replay's wall time and per-operation
 * median and 99th percentile. Exit 1 on any error, 77 if LIBCUDA is missing.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alloc/ptrmap.h"
#include "tessera/alloc.h"

#define MAX_STREAMS 64

typedef int (*stream_create_fn)(void **stream, unsigned flags);
typedef int (*ctx_sync_fn)(void);

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static uint64_t pct(uint64_t *v, size_t n, double p)
{
    if (!n)
        return 0;
    qsort(v, n, sizeof *v, cmp_u64);
    size_t i = (size_t)(p * (double)(n - 1));
    return v[i];
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: gpu-check-replay LIBCUDA TRACE.events.csv [INITIAL_LIVE.csv]\n");
        return 2;
    }
    ts_err err = {0, ""};
    ts_memtrace t;
    if (ts_memtrace_load(argv[2], argc > 3 ? argv[3] : NULL, NULL, &t, &err) != 0) {
        fprintf(stderr, "gpu-check-replay: %s\n", err.msg);
        return 1;
    }
    /* the model, on the simulated device */
    ts_memreplay_opts mo = {.kind = TS_MEMALLOC_PYTORCH, .clock_ns = now_ns};
    ts_memreplay_result mr;
    if (ts_memreplay_run(&t, &mo, &mr, &err) != 0) {
        fprintf(stderr, "gpu-check-replay: pytorch model: %s\n", err.msg);
        return 1;
    }
    printf("allocator=pytorch-model device=sim peak_requested=%llu peak_reserved=%llu "
           "fragmentation=%.4f device_calls=%llu median_op_ns=%.0f\n",
           (unsigned long long)mr.peak_requested, (unsigned long long)mr.peak_reserved,
           mr.fragmentation, (unsigned long long)mr.device_calls,
           (mr.median_alloc_ns + mr.median_free_ns) / 2);

    /* tessera on the driver's VMM */
    ts_memdev *dev = NULL;
    int rc = ts_memdev_cuda_new(argv[1], 0, &dev, &err);
    if (rc != 0) {
        fprintf(stderr, "gpu-check-replay: %s\n", err.msg);
        return rc == TS_ENOENT ? 77 : 1;
    }
    void *dl = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    stream_create_fn screate = NULL;
    ctx_sync_fn csync = NULL;
    void *sym = dl ? dlsym(dl, "cuStreamCreate") : NULL;
    memcpy(&screate, &sym, sizeof sym);
    sym = dl ? dlsym(dl, "cuCtxSynchronize") : NULL;
    memcpy(&csync, &sym, sizeof sym);
    if (!screate || !csync) {
        fprintf(stderr, "gpu-check-replay: %s lacks cuStreamCreate/cuCtxSynchronize\n", argv[1]);
        return 1;
    }
    uint64_t ids[MAX_STREAMS], handles[MAX_STREAMS];
    int nstreams = 0;
    ts_memalloc_config ac = {.kind = TS_MEMALLOC_TESSERA};
    ts_memalloc *a = NULL;
    if (ts_memalloc_new(&ac, dev, &a, &err) != 0) {
        fprintf(stderr, "gpu-check-replay: %s\n", err.msg);
        return 1;
    }
    ts_ptrmap map;
    alloc_ptrmap_init(&map);
    uint64_t *op = malloc((t.nev + t.nlive + 1) * sizeof *op);
    size_t nop = 0;
    uint64_t t0 = now_ns();
    for (size_t i = 0; i < t.nlive + t.nev && rc == 0; i++) {
        int is_live = i < t.nlive;
        const ts_memtrace_ev *e = is_live ? NULL : &t.ev[i - t.nlive];
        uint64_t sid = is_live ? t.live[i].stream : e->stream, s = 0;
        if (sid) {
            int k = 0;
            while (k < nstreams && ids[k] != sid)
                k++;
            if (k == nstreams) {
                void *h = NULL;
                if (nstreams == MAX_STREAMS || screate(&h, 0) != 0) {
                    fprintf(stderr, "gpu-check-replay: more than %d streams\n", MAX_STREAMS);
                    rc = 1;
                    break;
                }
                ids[k] = sid;
                handles[k] = (uint64_t)(uintptr_t)h;
                nstreams++;
            }
            s = handles[k];
        }
        uint64_t s0 = now_ns(), p = 0;
        if (is_live || e->op == TS_MEMTRACE_ALLOC) {
            uint64_t size = is_live ? t.live[i].requested : e->size;
            uint64_t key = is_live ? t.live[i].addr : e->addr;
            rc = ts_memalloc_malloc(a, size, s, &p, &err);
            if (rc == 0)
                rc = alloc_ptrmap_put(&map, key, (void *)(uintptr_t)p);
        } else if (e->op == TS_MEMTRACE_FREE) {
            p = (uint64_t)(uintptr_t)alloc_ptrmap_del(&map, e->addr);
            rc = p ? ts_memalloc_free(a, p, s, &err) : 0;
        } else {
            continue;
        }
        op[nop++] = now_ns() - s0;
    }
    csync();
    uint64_t wall = now_ns() - t0;
    if (rc != 0) {
        fprintf(stderr, "gpu-check-replay: tessera on %s: %s\n", argv[1], err.msg);
        return 1;
    }
    ts_memalloc_stats st;
    ts_memalloc_get_stats(a, &st);
    uint64_t calls = ts_memdev_stats_vmm_calls(&st.dev);
    printf("allocator=tessera device=cuda peak_requested=%llu peak_reserved=%llu "
           "fragmentation=%.4f device_calls=%llu creates=%llu maps=%llu unmaps=%llu "
           "releases=%llu wall_ms=%.1f median_op_ns=%llu p99_op_ns=%llu ops=%zu\n",
           (unsigned long long)st.peak_requested_bytes, (unsigned long long)st.peak_reserved_bytes,
           st.fragmentation, (unsigned long long)calls,
           (unsigned long long)st.dev.calls[TS_MEMDEV_CREATE],
           (unsigned long long)st.dev.calls[TS_MEMDEV_MAP],
           (unsigned long long)st.dev.calls[TS_MEMDEV_UNMAP],
           (unsigned long long)st.dev.calls[TS_MEMDEV_RELEASE], (double)wall / 1e6,
           (unsigned long long)pct(op, nop, 0.5), (unsigned long long)pct(op, nop, 0.99), nop);
    free(op);
    alloc_ptrmap_destroy(&map);
    ts_memalloc_destroy(a);
    ts_memdev_free(dev);
    ts_memtrace_free(&t);
    return 0;
}
