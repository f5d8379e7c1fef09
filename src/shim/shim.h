/*
 * shim.h - what the parts of libtessera-cuda.so share: the real driver's entry
 * points, the configuration, the tenant ledger, per-device facts and the
 * process's record of what it has charged.
 *
 * Everything here is hidden inside the library (built with default-hidden
 * visibility); only the intercepted CUDA names and dlsym are exported. One
 * process-global instance, `ts_shim`, because an LD_PRELOAD library stands in
 * for the driver, which is process-global by nature. It boots on the first
 * intercepted call (shim_ready), never in a constructor, so a process that
 * never touches CUDA never loads the driver.
 *
 * Locking: ts_shim.lock guards the process tables (records, devices, context
 * cache); the ledger has its own cross-process lock. Neither is held across a
 * call into the real driver.
 */
#ifndef TS_SHIM_SHIM_H
#define TS_SHIM_SHIM_H

#include <pthread.h>
#include <stdint.h>

#include "shim/config.h"
#include "shim/cuda_types.h"
#include "shim/ledger.h"

#define TS_SHIM_EXPORT __attribute__((visibility("default")))

/* The real driver, one pointer per TS_CU_API entry (NULL where it lacks one). */
struct ts_shim_real {
#define TS_SHIM_REAL_FIELD(name, params, args) ts_cu_pfn_##name name;
    TS_CU_API(TS_SHIM_REAL_FIELD)
#undef TS_SHIM_REAL_FIELD
};

/* Every driver entry point, declared with its real signature: a wrapper that
 * strays from it does not compile. Only the ones defined here are exported. */
#define TS_SHIM_PROTO(name, params, args) TS_SHIM_EXPORT CUresult name params;
TS_CU_API(TS_SHIM_PROTO)
#undef TS_SHIM_PROTO

/* What the shim knows about one CUDA ordinal of this process. */
struct ts_shim_dev {
    int ready;       /* looked up (even if it has no limits) */
    int ledger_dev;  /* index in the ledger; -1: none */
    uint64_t gran;   /* allocation granularity, bytes */
    int64_t limit;   /* quota bytes; -1: none */
    int pct;         /* compute share; 100: none */
    unsigned char uuid[TS_LEDGER_UUID_BYTES]; /* set when it has a limit */
};

/* Kinds of charged objects in the process table. */
enum ts_shim_kind {
    TS_REC_EMPTY = 0,
    TS_REC_PTR,     /* cuMemAlloc family, key = device address */
    TS_REC_HANDLE,  /* cuMemCreate, key = handle */
    TS_REC_ARRAY,   /* cuArrayCreate / cuArray3DCreate */
    TS_REC_MIPMAP,  /* cuMipmappedArrayCreate */
    TS_REC_MAP,     /* a cuMemMap of a handle, key = virtual address */
    TS_REC_CTX,     /* a context's own charge, key = CUcontext */
    TS_REC_POOL,    /* a stream-ordered pool: bytes = what it reserves, key = pool */
    TS_REC_POOLPTR, /* an allocation from a pool (charged with the pool), key = address */
    TS_REC_GRAPH,   /* a graph's memory nodes, key = CUgraph, bytes = their sum */
    TS_REC_GEXEC,   /* an instantiated graph's memory nodes, charged, key = CUgraphExec */
    TS_REC_CAPTURE, /* memory nodes of a capture in progress, key = CUstream */
};

struct ts_shim_rec {
    uint64_t key;
    uint32_t kind;
    int32_t ldev;    /* ledger device charged; -1: not charged */
    uint64_t bytes;  /* charged (or, for a mapping, its length) */
    uint64_t owner;  /* context of a charge; handle of a mapping */
    int32_t refs;    /* handles: creation + retains not yet released */
    int32_t maps;    /* handles: live mappings; pools: 1 once destroyed */
    uint64_t pool;   /* pool allocations: their pool; pools: the CUdevice */
};

struct ts_shim_tab {
    struct ts_shim_rec *e;
    size_t cap, n;
};

struct ts_shim {
    int booted;
    int config_rc;               /* 0, or why the environment was refused */
    char config_msg[TS_ERR_MSG_MAX];
    ts_shim_config cfg;
    void *dl;
    struct ts_shim_real real;
    pthread_mutex_t lock;
    ts_ledger *ledger;           /* opened on the first device with a limit */
    int ledger_rc;
    struct ts_shim_dev dev[TS_SHIM_MAX_DEVICES];
    struct ts_shim_tab recs;
    int primary_refs[TS_SHIM_MAX_DEVICES]; /* primary-context retains seen */
    uint64_t primary_ctx[TS_SHIM_MAX_DEVICES];
};

extern struct ts_shim ts_shim;

void shim_boot(void);

/* Makes the library behind handle the driver if none was found at boot. */
void shim_adopt_driver(void *handle);

static inline void shim_ready(void)
{
    if (!__atomic_load_n(&ts_shim.booted, __ATOMIC_ACQUIRE))
        shim_boot();
}

/* Facts about CUDA ordinal d, looked up on first use; NULL if d is out of
 * range. The ledger is opened here when d has a limit. */
const struct ts_shim_dev *shim_device(int d);

/* The CUDA ordinal of ctx (cached; ctx must be alive), or -1. */
int shim_ctx_ordinal(CUcontext ctx);
void shim_ctx_forget(CUcontext ctx);

/* Ordinal of the current context (-1: none or error). */
int shim_current_ordinal(CUcontext *ctx_out);

/* The context work on stream s runs in (the current one for the legacy and
 * per-thread default streams), or NULL. */
CUcontext shim_stream_ctx(CUstream s);

/* ---- records (ts_shim.lock held by the caller) ------------------------- */
struct ts_shim_rec *shim_rec_get(struct ts_shim_tab *t, uint32_t kind, uint64_t key);
int shim_rec_put(struct ts_shim_tab *t, const struct ts_shim_rec *r);
int shim_rec_del(struct ts_shim_tab *t, uint32_t kind, uint64_t key, struct ts_shim_rec *out);
void shim_rec_clear(struct ts_shim_tab *t);

/* ---- memory accounting (mem.c) ------------------------------------------ */
/* A stream capture ended in graph (NULL: it failed): its memory nodes become
 * the graph's. */
void shim_mem_capture_end(CUstream s, CUgraph graph);
/* Releases everything charged against ctx (it was destroyed or reset). */
void shim_mem_ctx_gone(uint64_t ctx);

/* ---- compute limiter (limiter.c) ---------------------------------------- */
void shim_limiter_after_fork(void);
/* Drops the events and pending measurements of a destroyed context. */
void shim_limiter_ctx_gone(CUcontext ctx);

/* ---- entry points (procaddr.c) ------------------------------------------ */
/* Our wrapper for a real driver entry point, or NULL if we do not wrap it. */
void *shim_wrapper_for(void *real_fn);

/* ---- NVML (nvml.c) -------------------------------------------------------- */
/* dlsym(handle, name) for an nvml* name: our wrapper, or NULL. */
void *shim_nvml_wrapper(void *handle, const char *name);

/* ---- function pointer <-> void * (ISO C has no cast; POSIX same size) ---- */
static inline void *shim_fn_to_ptr(void (*fn)(void))
{
    void *p;
    __builtin_memcpy(&p, &fn, sizeof p);
    return p;
}
#define TS_SHIM_FN(f) shim_fn_to_ptr((void (*)(void))(f))

#endif
