/*
 * alloc.h - libtessera-alloc: GPU memory allocators over device backends, the
 * allocation-trace format, its replay and a trace generator.
 *
 * Three allocators share one interface (ts_memalloc) and one device layer
 * (ts_memdev, an ops table with a simulated device and the CUDA driver's
 * virtual-memory API behind it):
 *   - TS_MEMALLOC_TESSERA: stream-ordered caching allocator over 2 MiB
 *     physical granules mapped into reserved virtual ranges; a request that no
 *     free run can hold is served by stitching free granules that lie anywhere
 *     into one virtual range (docs/allocator.md).
 *   - TS_MEMALLOC_PYTORCH / _PYTORCH_EXPANDABLE: a model of PyTorch's CUDA
 *     caching allocator as users run it (default settings, and with
 *     expandable_segments), used as the baseline and checked against real
 *     traces.
 *
 * Pointers are device addresses (uint64_t); streams are opaque 64-bit ids
 * (the CUDA backend reads them as CUstream handles, 0 = the default stream).
 * Ownership: every *_new hands out an object the caller frees with the
 * matching *_free / *_destroy; an allocator must be destroyed before its
 * device. Objects are not thread-safe: one thread (or the caller's lock) per
 * allocator. Nothing here prints; failures come back as TS_E* codes with a
 * message in ts_err. TS_ENOSPC from ts_memalloc_malloc means out of memory.
 */
#ifndef TESSERA_ALLOC_H
#define TESSERA_ALLOC_H

#include <stddef.h>
#include <stdint.h>

#include "tessera/error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TS_MEM_GRANULE_BYTES (2ull << 20) /* physical granule of the tessera allocator */

/* ---- devices ----------------------------------------------------------- */

typedef struct ts_memdev ts_memdev;

/* Driver calls, counted the same way on every backend. */
enum ts_memdev_call {
    TS_MEMDEV_MALLOC,       /* cuMemAlloc (a PyTorch segment) */
    TS_MEMDEV_FREE,         /* cuMemFree */
    TS_MEMDEV_RESERVE,      /* cuMemAddressReserve */
    TS_MEMDEV_UNRESERVE,    /* cuMemAddressFree */
    TS_MEMDEV_CREATE,       /* cuMemCreate */
    TS_MEMDEV_RELEASE,      /* cuMemRelease */
    TS_MEMDEV_MAP,          /* cuMemMap */
    TS_MEMDEV_UNMAP,        /* cuMemUnmap */
    TS_MEMDEV_SET_ACCESS,   /* cuMemSetAccess */
    TS_MEMDEV_EVENT_RECORD, /* cuEventRecord */
    TS_MEMDEV_EVENT_QUERY,  /* cuEventQuery */
    TS_MEMDEV_STREAM_SYNC,  /* cuStreamSynchronize / cuEventSynchronize */
    TS_MEMDEV_STREAM_WAIT,  /* cuStreamWaitEvent */
    TS_MEMDEV_NCALLS
};

typedef struct ts_memdev_stats {
    uint64_t calls[TS_MEMDEV_NCALLS];
    uint64_t used_bytes;      /* physical memory held: cuMemAlloc'd + cuMemCreate'd */
    uint64_t peak_used_bytes;
    uint64_t capacity_bytes;  /* what the device says it has */
} ts_memdev_stats;

/* Calls that change mappings or physical memory (create, release, malloc,
 * free, map, unmap): the "device calls" figure of the benchmarks. */
uint64_t ts_memdev_stats_vmm_calls(const ts_memdev_stats *s);
const char *ts_memdev_call_name(int call);

typedef struct ts_memdev_sim_config {
    uint64_t capacity_bytes; /* physical memory of the simulated device (> 0) */
    int backed;              /* 1: every mapping is host memory the caller may read and
                                write (tests; capacity must fit in RAM); 0: addresses
                                only, any capacity (replay of large traces) */
} ts_memdev_sim_config;

/* A simulated device: checks every call the way the driver would (mapping
 * into a reservation, no double mapping, sizes whole handles) and fails the
 * call with TS_EINVAL naming the rule broken, so allocator bugs surface. */
int ts_memdev_sim_new(const ts_memdev_sim_config *cfg, ts_memdev **out, ts_err *err);

/* The CUDA driver through dlopen: library NULL or "" means the environment
 * variable TS_MEMDEV_CUDA_LIBRARY, else "libcuda.so.1". */
#define TS_MEMDEV_CUDA_LIBRARY_ENV "TS_MEMDEV_CUDA_LIBRARY"
int ts_memdev_cuda_new(const char *library, int ordinal, ts_memdev **out, ts_err *err);

void ts_memdev_free(ts_memdev *dev);
void ts_memdev_get_stats(const ts_memdev *dev, ts_memdev_stats *out);
const char *ts_memdev_name(const ts_memdev *dev);

/* Simulated device only (no effect elsewhere). A held stream does not run:
 * events recorded on it stay pending until it is released or synchronised. */
void ts_memdev_sim_hold_stream(ts_memdev *dev, uint64_t stream, int hold);
/* The next cuMemAlloc of exactly size bytes returns addr (replay of a
 * recorded trace at its own addresses). Not for backed devices. */
void ts_memdev_sim_next_addr(ts_memdev *dev, uint64_t addr, uint64_t size);
/* Host handles still live (allocations, mappings, reservations, handles,
 * pending events): all zero after a clean teardown. */
typedef struct ts_memdev_sim_live {
    uint64_t mallocs, reservations, handles, mapped_bytes, events;
} ts_memdev_sim_live;
void ts_memdev_sim_get_live(const ts_memdev *dev, ts_memdev_sim_live *out);

/* ---- allocators -------------------------------------------------------- */

typedef struct ts_memalloc ts_memalloc;

typedef enum ts_memalloc_kind {
    TS_MEMALLOC_TESSERA = 0,
    TS_MEMALLOC_PYTORCH = 1,
    TS_MEMALLOC_PYTORCH_EXPANDABLE = 2,
} ts_memalloc_kind;

/* "tessera", "pytorch", "pytorch-expandable"; -1 if none. */
int ts_memalloc_kind_parse(const char *name);
const char *ts_memalloc_kind_name(ts_memalloc_kind kind);

typedef struct ts_memalloc_config {
    ts_memalloc_kind kind;
    uint64_t capacity_bytes;  /* hard cap on reserved physical memory; 0 = the device's.
                                 Set it to the tenant's quota so the shim and the
                                 allocator refuse at the same point. */
    uint64_t max_split_bytes; /* PyTorch max_split_size; 0 = unlimited (its default) */
} ts_memalloc_config;

typedef struct ts_memalloc_stats {
    uint64_t requested_bytes, peak_requested_bytes; /* as the caller asked */
    uint64_t allocated_bytes, peak_allocated_bytes; /* handed out after rounding */
    uint64_t reserved_bytes, peak_reserved_bytes;   /* physical memory held */
    uint64_t live_allocs;
    uint64_t num_allocs, num_frees, num_ooms, num_alloc_retries;
    uint64_t segment_allocs, segment_alloc_bytes;  /* cuMemAlloc'd segments / pages mapped
                                                     (PyTorch), granules created (tessera) */
    uint64_t segment_frees, segment_free_bytes;
    uint64_t stitched_allocs;   /* tessera: requests served by stitching */
    uint64_t stitch_cache_hits; /* tessera: stitched ranges reused without a driver call */
    double fragmentation;       /* 1 - peak_requested / peak_reserved (0 if nothing reserved) */
    ts_memdev_stats dev;        /* the device's counters at the time of the call */
} ts_memalloc_stats;

int ts_memalloc_new(const ts_memalloc_config *cfg, ts_memdev *dev, ts_memalloc **out,
                    ts_err *err);
/* The capacity that makes the allocator refuse where libtessera-cuda's quota
 * would: TESSERA_CUDA_MEM_LIMIT for CUDA device `ordinal` (include/tessera/
 * shim.h) less the per-context charge (TESSERA_CUDA_CTX_BYTES or its
 * default). TS_ENOENT when no limit is set for that device, TS_EINVAL when
 * the variable does not parse (the message names it). */
int ts_memalloc_quota_from_env(int ordinal, uint64_t *bytes, ts_err *err);

/* Frees every allocation still live and gives all memory back to the device. */
void ts_memalloc_destroy(ts_memalloc *a);

/* Allocates size bytes (> 0) ordered on stream; *ptr is 512-byte aligned.
 * TS_ENOSPC: out of memory (after giving back what the cache holds). */
int ts_memalloc_malloc(ts_memalloc *a, uint64_t size, uint64_t stream, uint64_t *ptr,
                       ts_err *err);
/* Frees ptr, ordered on stream (normally the stream it was allocated on);
 * the memory is reused on other streams only once that work is done. */
int ts_memalloc_free(ts_memalloc *a, uint64_t ptr, uint64_t stream, ts_err *err);
/* ptr is also used on stream: after the free, its memory is not reused until
 * the work queued on stream at free time has finished (an event). */
int ts_memalloc_record_stream(ts_memalloc *a, uint64_t ptr, uint64_t stream, ts_err *err);
/* Gives back to the device all cached memory no live allocation uses. */
int ts_memalloc_empty_cache(ts_memalloc *a, ts_err *err);
void ts_memalloc_get_stats(const ts_memalloc *a, ts_memalloc_stats *out);
/* Requested size of a live allocation, 0 if ptr is not one. */
uint64_t ts_memalloc_size_of(const ts_memalloc *a, uint64_t ptr);

/* PyTorch model only, for replaying a trace recorded after warm-up: adopt a
 * segment that already exists at addr (the device must be simulated and not
 * backed), then blocks inside it that are already allocated. */
int ts_memalloc_adopt_segment(ts_memalloc *a, uint64_t addr, uint64_t size, uint64_t stream,
                              int small_pool, ts_err *err);
int ts_memalloc_adopt_block(ts_memalloc *a, uint64_t addr, uint64_t block_size,
                            uint64_t requested, uint64_t stream, ts_err *err);

/* ---- traces (the CSV format of ../shared/traces/alloc) ----------------- */

enum ts_memtrace_op { TS_MEMTRACE_ALLOC, TS_MEMTRACE_FREE, TS_MEMTRACE_SEGMENT_ALLOC,
                      TS_MEMTRACE_SEGMENT_FREE };

typedef struct ts_memtrace_ev {
    uint64_t addr, size, stream;
    int64_t seq;
    int op; /* enum ts_memtrace_op */
} ts_memtrace_ev;

typedef struct ts_memtrace_live { /* a block allocated before recording began */
    uint64_t addr, requested, block_size /* 0 = unknown */, stream;
} ts_memtrace_live;

typedef struct ts_memtrace_seg { /* a segment of the recorded allocator */
    uint64_t addr, size, stream;
    int small_pool;
} ts_memtrace_seg;

typedef struct ts_memtrace {
    ts_memtrace_ev *ev;
    size_t nev;
    ts_memtrace_live *live; /* sorted by address */
    size_t nlive;
    ts_memtrace_seg *seg;   /* segments at the end of recording (optional) */
    size_t nseg;
} ts_memtrace;

/* Reads X.events.csv (alloc and free_completed rows are played, segment_*
 * rows kept, other actions skipped) and, if not NULL, X.initial_live.csv and
 * X.segments.csv (addr,total_size,stream,pool). Errors name file:line:column. */
int ts_memtrace_load(const char *events_csv, const char *initial_live_csv,
                     const char *segments_csv, ts_memtrace *out, ts_err *err);
/* Writes events (with free_requested/free_completed pairs) and initial live. */
int ts_memtrace_write(const ts_memtrace *t, const char *events_csv,
                      const char *initial_live_csv, ts_err *err);
void ts_memtrace_free(ts_memtrace *t);
/* Peak of (initial live + live requested bytes) over the trace. */
uint64_t ts_memtrace_peak_requested(const ts_memtrace *t);

/* ---- replay ------------------------------------------------------------- */

typedef struct ts_memreplay_opts {
    ts_memalloc_kind kind;
    uint64_t capacity_bytes; /* 0: unlimited (a device far larger than the trace) */
    int warm;                /* PyTorch only: start from the recorded segments (t->seg) */
    uint64_t (*clock_ns)(void); /* times each call when not NULL */
} ts_memreplay_opts;

typedef struct ts_memreplay_result {
    uint64_t peak_requested, peak_reserved, reserved_end;
    double fragmentation;
    uint64_t allocs, frees;
    int oom;            /* the replay stopped at an allocation that failed */
    int64_t oom_seq;    /* seq of that event */
    uint64_t oom_size;
    /* segment_alloc events: the model's (after the initial blocks) and the trace's */
    uint64_t model_segment_allocs, model_segment_alloc_bytes;
    uint64_t trace_segment_allocs, trace_segment_alloc_bytes;
    uint64_t trace_reserved_end; /* sum of t->seg sizes */
    uint64_t addr_matches;       /* warm: allocations placed where the trace has them */
    uint64_t device_calls;       /* map/unmap/create/release/malloc/free over the events */
    uint64_t device_calls_late, ops_late; /* the same over the second half of the events
                                             (steady state, once the peak is reached) */
    ts_memalloc_stats stats;
    double median_alloc_ns, median_free_ns, mean_op_ns; /* when clock_ns was given */
} ts_memreplay_result;

int ts_memreplay_run(const ts_memtrace *t, const ts_memreplay_opts *o, ts_memreplay_result *r,
                     ts_err *err);

/* ---- generator ---------------------------------------------------------- */

typedef struct ts_memgen_model {
    int layers, hidden, heads, ffn, vocab; /* ffn 0 = 4 x hidden */
    int batch;
    int seq_min, seq_max;     /* sample lengths, clipped */
    double seq_median;        /* lognormal median of a sample's length */
    double seq_sigma;         /* lognormal sigma (0: every sample seq_max) */
    int pad_multiple;         /* a batch is padded to its longest sample, rounded up to this */
    int act_bytes, param_bytes; /* activation and parameter element sizes */
    int flash_attention;      /* 0: attention scores are materialised (b x heads x s x s) */
    int train;                /* 1: forward, backward, AdamW step; 0: forward only */
    uint64_t stream;
} ts_memgen_model;

typedef struct ts_memgen_config {
    const ts_memgen_model *models;
    int nmodels;     /* several models share the allocator, each on its own stream */
    int steps;       /* steps per model */
    uint64_t seed;
} ts_memgen_config;

/* A trace of cfg (cold start: no initial live blocks). Free with ts_memtrace_free. */
int ts_memgen_run(const ts_memgen_config *cfg, ts_memtrace *out, ts_err *err);

/* Named workloads (docs/allocator.md): fills up to max models, returns how
 * many (> 0) or a TS_E* code. ts_memgen_preset_names lists them, ", "-joined. */
#define TS_MEMGEN_MAX_MODELS 8
int ts_memgen_preset(const char *name, ts_memgen_model *models, int max, ts_err *err);
const char *ts_memgen_preset_names(void);

#ifdef __cplusplus
}
#endif
#endif
