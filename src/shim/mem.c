/*
 * mem.c - the device-memory quota: every allocation path of the driver API is
 * charged to the tenant's ledger at the size the driver takes (rounded up to
 * the device's allocation granularity) before the driver is asked, and every
 * free returns exactly what its allocation charged.
 *
 * Order of a charged call: reserve in the ledger (over quota: return
 * CUDA_ERROR_OUT_OF_MEMORY, the driver is never asked), call the driver,
 * then record the object (key -> bytes, ledger device, owning context) or,
 * if the driver failed, release the reservation. Sizes the driver decides
 * itself are reserved at an upper bound, so the device never holds more than
 * was reserved: an array's size is asked of the driver first (a
 * deferred-mapping twin, which holds no memory, answers
 * cuArrayGetMemoryRequirements); a pitch is bounded by a learned alignment
 * and the excess returned once the driver has answered. A
 * free removes the record first (so an address reused by a concurrent
 * allocation cannot be confused with it), then calls the driver, then
 * releases, or puts the record back if the driver refused.
 *
 * VMM: a physical handle is charged at cuMemCreate and released when the
 * last reference goes: its creation and retains must all be released and all
 * its mappings unmapped, as the driver frees it then and not before. A
 * context charges TESSERA_CUDA_CTX_BYTES from creation (primary: first
 * retain) to destruction (primary: last release or reset), and its
 * destruction returns what was allocated in it.
 */
#include "shim/shim.h"

#include <stdlib.h>
#include <string.h>

#define PITCH_ALIGN_FIRST_BYTES 4096 /* guess above any driver's pitch alignment */
#define ARRAY_ELEMENT_MAX_BYTES 16 /* unknown formats: the widest element */

#define REAL ts_shim.real
#define PASS(name, ...) (REAL.name ? REAL.name(__VA_ARGS__) : CUDA_ERROR_NOT_SUPPORTED)

/* The device if it has a quota, else NULL. */
static const struct ts_shim_dev *quota_dev(int ordinal)
{
    const struct ts_shim_dev *d = ts_shim_device(ordinal);
    return d && d->limit >= 0 && d->ledger_dev >= 0 ? d : NULL;
}

/* bytes rounded up to gran; UINT64_MAX when that overflows (never fits). */
static uint64_t rounded(uint64_t bytes, uint64_t gran)
{
    if (bytes > UINT64_MAX - gran)
        return UINT64_MAX;
    return (bytes + gran - 1) / gran * gran;
}

static void pools_refresh(int ldev, int trim);
static void pools_refresh_locked(int ldev, int trim);

/* Over the quota, the tenant's own stream-ordered pools on the device give
 * their cached memory back first (it is this process's, and unused), then
 * the reservation is tried once more. */
static int reserve(const struct ts_shim_dev *d, uint64_t bytes)
{
    if (ts_ledger_reserve(ts_shim.ledger, d->ledger_dev, bytes, (uint64_t)d->limit) == 0)
        return 0;
    pools_refresh(d->ledger_dev, 1);
    return ts_ledger_reserve(ts_shim.ledger, d->ledger_dev, bytes, (uint64_t)d->limit);
}

static void release(int ldev, uint64_t bytes)
{
    if (ldev >= 0 && bytes)
        ts_ledger_release(ts_shim.ledger, ldev, bytes);
}

static int record(uint32_t kind, uint64_t key, int ldev, uint64_t bytes, uint64_t owner)
{
    struct ts_shim_rec r = {.key = key, .kind = kind, .ldev = ldev, .bytes = bytes,
                            .owner = owner, .refs = 1};
    pthread_mutex_lock(&ts_shim.lock);
    int rc = ts_shim_rec_put(&ts_shim.recs, &r);
    pthread_mutex_unlock(&ts_shim.lock);
    return rc;
}

static int unrecord(uint32_t kind, uint64_t key, struct ts_shim_rec *out)
{
    pthread_mutex_lock(&ts_shim.lock);
    int rc = ts_shim_rec_del(&ts_shim.recs, kind, key, out);
    pthread_mutex_unlock(&ts_shim.lock);
    return rc;
}

/* After a charged allocation call: keep the charge with a record, or give it
 * back. If the record cannot be kept, the object is freed with undo() so it
 * cannot live uncharged. */
static CUresult settle(CUresult r, const struct ts_shim_dev *d, uint32_t kind, uint64_t key,
                       uint64_t bytes, uint64_t owner, CUresult (*undo)(uint64_t key))
{
    if (r != CUDA_SUCCESS) {
        release(d->ledger_dev, bytes);
        return r;
    }
    if (record(kind, key, d->ledger_dev, bytes, owner) != 0) {
        undo(key);
        release(d->ledger_dev, bytes);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    return CUDA_SUCCESS;
}

/* Brings a reservation of `est` to `actual` (both rounded); on failure the
 * caller frees the object. */
static int true_up(const struct ts_shim_dev *d, uint64_t est, uint64_t actual)
{
    if (actual > est)
        return reserve(d, actual - est);
    release(d->ledger_dev, est - actual);
    return 0;
}

static CUresult undo_free(uint64_t p) { return PASS(cuMemFree_v2, (CUdeviceptr)p); }
static int pool_free(CUdeviceptr dptr, CUresult (*call)(uint64_t), CUresult *r);
static CUresult undo_array(uint64_t a) { return PASS(cuArrayDestroy, (CUarray)(uintptr_t)a); }
static CUresult undo_mipmap(uint64_t a)
{
    return PASS(cuMipmappedArrayDestroy, (CUmipmappedArray)(uintptr_t)a);
}
static CUresult undo_handle(uint64_t h) { return PASS(cuMemRelease, h); }
static CUresult undo_ctx(uint64_t c) { return PASS(cuCtxDestroy_v2, (CUcontext)(uintptr_t)c); }

/* A free of a recorded object: record out first, driver, then release. */
static CUresult charged_free(uint32_t kind, uint64_t key, CUresult (*call)(uint64_t key))
{
    struct ts_shim_rec rec;
    int had = unrecord(kind, key, &rec) == 0;
    CUresult r = call(key);
    if (had) {
        if (r == CUDA_SUCCESS)
            release(rec.ldev, rec.bytes);
        else
            record(rec.kind, rec.key, rec.ldev, rec.bytes, rec.owner);
    }
    return r;
}

/* The driver pitches rows to a power-of-two alignment of its own. Every pitch
 * it returns is a multiple of that alignment, so the largest power of two
 * dividing all pitches seen (starting from a generous guess) is never below
 * it: a width rounded up to it bounds the pitch from above, and the
 * reservation made before the call always covers what the driver takes. */
static uint64_t pitch_align[TS_SHIM_MAX_DEVICES]; /* 0: nothing seen yet */

static void learn_pitch(int o, uint64_t pitch)
{
    uint64_t low = pitch & (~pitch + 1); /* the largest power of two dividing it */
    uint64_t cur = __atomic_load_n(&pitch_align[o], __ATOMIC_RELAXED);
    while (low) {
        uint64_t base = cur ? cur : PITCH_ALIGN_FIRST_BYTES;
        uint64_t want = low < base ? low : base;
        if (want == cur || __atomic_compare_exchange_n(&pitch_align[o], &cur, want, 0,
                                                       __ATOMIC_RELAXED, __ATOMIC_RELAXED))
            return;
    }
}

/* ---- cuMemAlloc family --------------------------------------------------- */

TS_SHIM_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    ts_shim_ready();
    CUcontext ctx;
    const struct ts_shim_dev *d;
    if (!ts_shim.cfg.mem_on || !dptr || bytesize == 0 ||
        !(d = quota_dev(ts_shim_current_ordinal(&ctx))))
        return PASS(cuMemAlloc_v2, dptr, bytesize);
    uint64_t bytes = rounded(bytesize, d->gran);
    if (reserve(d, bytes) != 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = PASS(cuMemAlloc_v2, dptr, bytesize);
    return settle(r, d, TS_REC_PTR, r == CUDA_SUCCESS ? *dptr : 0, bytes, (uintptr_t)ctx,
                  undo_free);
}

TS_SHIM_EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    ts_shim_ready();
    CUcontext ctx;
    const struct ts_shim_dev *d;
    if (!ts_shim.cfg.mem_on || !dptr || bytesize == 0 ||
        !(d = quota_dev(ts_shim_current_ordinal(&ctx))))
        return PASS(cuMemAllocManaged, dptr, bytesize, flags);
    uint64_t bytes = rounded(bytesize, d->gran); /* charged as if resident on the device */
    if (reserve(d, bytes) != 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = PASS(cuMemAllocManaged, dptr, bytesize, flags);
    return settle(r, d, TS_REC_PTR, r == CUDA_SUCCESS ? *dptr : 0, bytes, (uintptr_t)ctx,
                  undo_free);
}

TS_SHIM_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes,
                                           size_t Height, unsigned int ElementSizeBytes)
{
    ts_shim_ready();
    CUcontext ctx;
    int o = -1;
    const struct ts_shim_dev *d = NULL;
    if (ts_shim.cfg.mem_on && dptr && pPitch && WidthInBytes && Height)
        d = quota_dev(o = ts_shim_current_ordinal(&ctx));
    if (!d)
        return PASS(cuMemAllocPitch_v2, dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
    uint64_t align = __atomic_load_n(&pitch_align[o], __ATOMIC_RELAXED);
    uint64_t row = rounded(WidthInBytes, align ? align : PITCH_ALIGN_FIRST_BYTES);
    uint64_t est = row > UINT64_MAX / Height ? UINT64_MAX : rounded(row * Height, d->gran);
    if (reserve(d, est) != 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = PASS(cuMemAllocPitch_v2, dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
    if (r != CUDA_SUCCESS) {
        release(d->ledger_dev, est);
        return r;
    }
    learn_pitch(o, *pPitch);
    /* never more than reserved, unless the driver's alignment beats the guess */
    uint64_t actual = rounded((uint64_t)*pPitch * Height, d->gran);
    if (true_up(d, est, actual) != 0) {
        undo_free(*dptr);
        release(d->ledger_dev, est);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    return settle(r, d, TS_REC_PTR, *dptr, actual, (uintptr_t)ctx, undo_free);
}

TS_SHIM_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    ts_shim_ready();
    if (!ts_shim.cfg.mem_on || dptr == 0)
        return PASS(cuMemFree_v2, dptr);
    CUresult r;
    if (pool_free(dptr, undo_free, &r)) /* a stream-ordered allocation freed in order */
        return r;
    return charged_free(TS_REC_PTR, dptr, undo_free);
}

/* ---- stream-ordered pools ------------------------------------------------- *
 * A pool holds device memory beyond its live allocations: what its frees
 * return stays cached (reserved) until a synchronisation releases what
 * exceeds the pool's release threshold, or cuMemPoolTrimTo trims it. So a
 * pool is charged what it reserves (CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, as
 * the driver reports it), not what is live: an allocation reserves up front
 * what the pool may have to grow by (its rounded size less what the pool has
 * cached), and after the call the pool's charge is brought to what the
 * driver says it reserves; a free changes nothing until the pool is seen to
 * shrink. Pools are looked at again after every synchronisation the shim
 * sees (cuStreamSynchronize, cuCtxSynchronize, cuEventSynchronize), after
 * cuMemPoolTrimTo and cuMemPoolSetAttribute, and before cuMemGetInfo answers.
 * An allocation that does not fit first trims the tenant's own pools on that
 * device to what they use (the cache is the tenant's, not another's), then
 * fails. Allocations made while a stream is being captured are graph memory
 * nodes (see the graph section), not pool allocations. */

/* One pooled allocation or pool re-read at a time in the process: an
 * allocation's reservation and the pool's recorded charge must change
 * together. Held by this thread: the re-read inside an allocation. */
static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static _Thread_local int pool_mu_mine;
static int pools_seen; /* a pool was ever charged: until then re-reads cost nothing */

static void pool_lock(void)
{
    pthread_mutex_lock(&pool_mu);
    pool_mu_mine = 1;
}

static void pool_unlock(void)
{
    pool_mu_mine = 0;
    pthread_mutex_unlock(&pool_mu);
}

static uint64_t pool_attr(CUmemoryPool p, CUmemPool_attribute a, int *ok)
{
    cuuint64_t v = 0;
    int good = REAL.cuMemPoolGetAttribute && REAL.cuMemPoolGetAttribute(p, a, &v) == CUDA_SUCCESS;
    if (ok)
        *ok &= good;
    return good ? v : 0;
}

/* Brings pool p's charge to `reserved`; growth beyond the quota is charged
 * anyway (the memory is held: the ledger must say so). Returns the old one. */
static uint64_t pool_observe(CUmemoryPool p, int ldev, uint64_t reserved)
{
    uint64_t old = 0;
    pthread_mutex_lock(&ts_shim.lock);
    struct ts_shim_rec *rec = ts_shim_rec_get(&ts_shim.recs, TS_REC_POOL, (uintptr_t)p);
    if (rec) {
        old = rec->bytes;
        rec->bytes = reserved;
    } else if (reserved) {
        struct ts_shim_rec r = {.key = (uintptr_t)p, .kind = TS_REC_POOL, .ldev = ldev,
                                .bytes = reserved};
        if (ts_shim_rec_put(&ts_shim.recs, &r) != 0)
            reserved = 0; /* cannot track it: leave it uncharged rather than leak */
        else
            __atomic_store_n(&pools_seen, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&ts_shim.lock);
    if (reserved > old)
        ts_ledger_reserve(ts_shim.ledger, ldev, reserved - old, UINT64_MAX);
    else
        release(ldev, old - reserved);
    return old;
}

/* Every pool the process has charged (on ledger device ldev; -1: all), read
 * again from the driver. Destroyed pools keep their charge until their last
 * allocation is freed. */
static void pools_refresh(int ldev, int trim)
{
    if (!__atomic_load_n(&pools_seen, __ATOMIC_ACQUIRE))
        return;
    int lock = !pool_mu_mine;
    if (lock)
        pool_lock();
    pools_refresh_locked(ldev, trim);
    if (lock)
        pool_unlock();
}

static void pools_refresh_locked(int ldev, int trim)
{
    enum { BATCH = 64 };
    CUmemoryPool pools[BATCH];
    int ldevs[BATCH], n = 0;
    pthread_mutex_lock(&ts_shim.lock);
    for (size_t i = 0; i < ts_shim.recs.cap && n < BATCH; i++) {
        const struct ts_shim_rec *e = &ts_shim.recs.e[i];
        if (e->kind == TS_REC_POOL && !e->maps && (ldev < 0 || e->ldev == ldev)) {
            pools[n] = (CUmemoryPool)(uintptr_t)e->key;
            ldevs[n++] = e->ldev;
        }
    }
    pthread_mutex_unlock(&ts_shim.lock);
    for (int i = 0; i < n; i++) {
        int ok = 1;
        if (trim && REAL.cuMemPoolTrimTo)
            REAL.cuMemPoolTrimTo(pools[i], 0);
        uint64_t reserved = pool_attr(pools[i], CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &ok);
        if (ok)
            pool_observe(pools[i], ldevs[i], reserved);
    }
}

/* The pool cuMemAllocAsync draws from on the stream's device. */
static CUmemoryPool current_pool(int ordinal)
{
    CUmemoryPool p = NULL;
    if (!REAL.cuDeviceGetMemPool || REAL.cuDeviceGetMemPool(&p, (CUdevice)ordinal) != CUDA_SUCCESS)
        return NULL;
    return p;
}

static int stream_capturing(CUstream s);
static void capture_add(CUstream s, const struct ts_shim_dev *d, int o, uint64_t bytes);

typedef CUresult (*pool_alloc_fn)(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                  CUstream hStream);

static CUresult pooled_alloc(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                             CUstream hStream, pool_alloc_fn call)
{
    CUcontext ctx = ts_shim_stream_ctx(hStream);
    int o = ts_shim_ctx_ordinal(ctx);
    const struct ts_shim_dev *d = quota_dev(o);
    if (!d)
        return call(dptr, bytesize, pool, hStream);
    uint64_t bytes = rounded(bytesize, d->gran);
    if (stream_capturing(hStream)) {
        /* a memory node of the graph being captured: charged with the graph */
        CUresult r = call(dptr, bytesize, pool, hStream);
        if (r == CUDA_SUCCESS)
            capture_add(hStream, d, o, bytes);
        return r;
    }
    CUmemoryPool p = pool ? pool : current_pool(o);
    int ok = p != NULL;
    pool_lock();
    /* No reservation is held across a pools_refresh: it re-reads and
     * re-charges pools itself, this pool included. */
    uint64_t need = 0;
    for (int attempt = 0;; attempt++) {
        uint64_t reserved = ok ? pool_attr(p, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &ok) : 0;
        uint64_t used = ok ? pool_attr(p, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &ok) : 0;
        /* a pool the driver will not describe: charge the whole size */
        uint64_t cached = ok && reserved > used ? reserved - used : 0;
        need = bytes > cached ? bytes - cached : 0;
        if (!need || ts_ledger_reserve(ts_shim.ledger, d->ledger_dev, need,
                                       (uint64_t)d->limit) == 0)
            break;
        if (attempt == 1) {
            pool_unlock();
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        pools_refresh(d->ledger_dev, 1); /* the tenant's own caches first */
    }
    CUresult r = call(dptr, bytesize, pool, hStream);
    if (!ok) { /* plain per-allocation charge */
        pool_unlock();
        return settle(r, d, TS_REC_PTR, r == CUDA_SUCCESS ? *dptr : 0, bytes, (uintptr_t)ctx,
                      undo_free);
    }
    int ok2 = 1;
    uint64_t now = pool_attr(p, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &ok2);
    pthread_mutex_lock(&ts_shim.lock);
    struct ts_shim_rec *rec = ts_shim_rec_get(&ts_shim.recs, TS_REC_POOL, (uintptr_t)p);
    uint64_t charged = rec ? rec->bytes : 0;
    pthread_mutex_unlock(&ts_shim.lock);
    uint64_t held = charged + need; /* in the ledger for this pool right now */
    if (!ok2)
        now = held;
    if (r != CUDA_SUCCESS) {
        release(d->ledger_dev, need);
        pool_observe(p, d->ledger_dev, now);
        pool_unlock();
        return r;
    }
    if (now > held && ts_ledger_reserve(ts_shim.ledger, d->ledger_dev, now - held,
                                        (uint64_t)d->limit) != 0) {
        /* the pool grew by more than was reserved and that does not fit:
         * undo, and let the pool give back what it now holds unused */
        PASS(cuMemFreeAsync, *dptr, hStream);
        if (REAL.cuStreamSynchronize)
            REAL.cuStreamSynchronize(hStream);
        pthread_mutex_lock(&ts_shim.lock);
        rec = ts_shim_rec_get(&ts_shim.recs, TS_REC_POOL, (uintptr_t)p);
        if (rec)
            rec->bytes = held;
        pthread_mutex_unlock(&ts_shim.lock);
        if (!rec)
            release(d->ledger_dev, held); /* untracked: nothing to re-read against */
        pools_refresh(d->ledger_dev, 1);
        pool_unlock();
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (now < held)
        release(d->ledger_dev, held - now);
    /* the ledger now holds `now` for this pool: record it so */
    pthread_mutex_lock(&ts_shim.lock);
    rec = ts_shim_rec_get(&ts_shim.recs, TS_REC_POOL, (uintptr_t)p);
    int lost = 0;
    if (rec) {
        rec->bytes = now;
    } else if (now) {
        struct ts_shim_rec pr = {.key = (uintptr_t)p, .kind = TS_REC_POOL, .ldev = d->ledger_dev,
                                 .bytes = now, .pool = (uint64_t)o};
        lost = ts_shim_rec_put(&ts_shim.recs, &pr) != 0;
        if (!lost)
            __atomic_store_n(&pools_seen, 1, __ATOMIC_RELEASE);
    }
    struct ts_shim_rec ar = {.key = *dptr, .kind = TS_REC_POOLPTR, .ldev = d->ledger_dev,
                             .bytes = bytes, .owner = (uintptr_t)ctx, .pool = (uintptr_t)p,
                             .refs = 1};
    ts_shim_rec_put(&ts_shim.recs, &ar); /* only needed once the pool is destroyed */
    pthread_mutex_unlock(&ts_shim.lock);
    if (lost)
        release(d->ledger_dev, now);
    pool_unlock();
    return r;
}

static CUresult real_alloc_async(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                 CUstream s)
{
    (void)pool;
    return PASS(cuMemAllocAsync, dptr, bytesize, s);
}
static CUresult real_alloc_async_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                      CUstream s)
{
    (void)pool;
    return PASS(cuMemAllocAsync_ptsz, dptr, bytesize, s);
}
static CUresult real_alloc_pool(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                CUstream s)
{
    return PASS(cuMemAllocFromPoolAsync, dptr, bytesize, pool, s);
}
static CUresult real_alloc_pool_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                     CUstream s)
{
    return PASS(cuMemAllocFromPoolAsync_ptsz, dptr, bytesize, pool, s);
}

TS_SHIM_EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    ts_shim_ready();
    if (!ts_shim.cfg.mem_on || !dptr || !bytesize)
        return PASS(cuMemAllocAsync, dptr, bytesize, hStream);
    return pooled_alloc(dptr, bytesize, NULL, hStream, real_alloc_async);
}

TS_SHIM_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    ts_shim_ready();
    if (!ts_shim.cfg.mem_on || !dptr || !bytesize)
        return PASS(cuMemAllocAsync_ptsz, dptr, bytesize, hStream);
    return pooled_alloc(dptr, bytesize, NULL, hStream, real_alloc_async_ptsz);
}

TS_SHIM_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize,
                                                CUmemoryPool pool, CUstream hStream)
{
    ts_shim_ready();
    if (!ts_shim.cfg.mem_on || !dptr || !bytesize || !pool)
        return PASS(cuMemAllocFromPoolAsync, dptr, bytesize, pool, hStream);
    return pooled_alloc(dptr, bytesize, pool, hStream, real_alloc_pool);
}

TS_SHIM_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize,
                                                     CUmemoryPool pool, CUstream hStream)
{
    ts_shim_ready();
    if (!ts_shim.cfg.mem_on || !dptr || !bytesize || !pool)
        return PASS(cuMemAllocFromPoolAsync_ptsz, dptr, bytesize, pool, hStream);
    return pooled_alloc(dptr, bytesize, pool, hStream, real_alloc_pool_ptsz);
}

/* A pool allocation going back to its pool: nothing to release (the pool
 * keeps it cached) unless the pool was destroyed, when its memory goes for
 * good. Returns 1 if dptr was a recorded pool allocation. */
static int pool_free(CUdeviceptr dptr, CUresult (*call)(uint64_t), CUresult *r)
{
    struct ts_shim_rec a;
    if (unrecord(TS_REC_POOLPTR, dptr, &a) != 0)
        return 0;
    *r = call(dptr);
    if (*r != CUDA_SUCCESS) {
        pthread_mutex_lock(&ts_shim.lock);
        ts_shim_rec_put(&ts_shim.recs, &a);
        pthread_mutex_unlock(&ts_shim.lock);
        return 1;
    }
    uint64_t back = 0;
    int ldev = -1;
    pthread_mutex_lock(&ts_shim.lock);
    struct ts_shim_rec *pr = ts_shim_rec_get(&ts_shim.recs, TS_REC_POOL, a.pool);
    if (pr && pr->maps) { /* destroyed: what it still held goes with its allocations */
        back = a.bytes < pr->bytes ? a.bytes : pr->bytes;
        pr->bytes -= back;
        ldev = pr->ldev;
        if (pr->bytes == 0)
            ts_shim_rec_del(&ts_shim.recs, TS_REC_POOL, a.pool, NULL);
    }
    pthread_mutex_unlock(&ts_shim.lock);
    release(ldev, back);
    return 1;
}

static _Thread_local CUstream tl_free_stream; /* the stream of the free in progress */
static CUresult call_free_async(uint64_t p) { return PASS(cuMemFreeAsync, p, tl_free_stream); }
static CUresult call_free_async_ptsz(uint64_t p)
{
    return PASS(cuMemFreeAsync_ptsz, p, tl_free_stream);
}

TS_SHIM_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
    ts_shim_ready();
    if (!ts_shim.cfg.mem_on || dptr == 0)
        return PASS(cuMemFreeAsync, dptr, hStream);
    tl_free_stream = hStream;
    CUresult r;
    if (pool_free(dptr, call_free_async, &r))
        return r;
    return charged_free(TS_REC_PTR, dptr, call_free_async);
}

TS_SHIM_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
    ts_shim_ready();
    if (!ts_shim.cfg.mem_on || dptr == 0)
        return PASS(cuMemFreeAsync_ptsz, dptr, hStream);
    tl_free_stream = hStream;
    CUresult r;
    if (pool_free(dptr, call_free_async_ptsz, &r))
        return r;
    return charged_free(TS_REC_PTR, dptr, call_free_async_ptsz);
}

TS_SHIM_EXPORT CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep)
{
    ts_shim_ready();
    CUresult r = PASS(cuMemPoolTrimTo, pool, minBytesToKeep);
    if (ts_shim.cfg.mem_on)
        pools_refresh(-1, 0);
    return r;
}

TS_SHIM_EXPORT CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr,
                                              void *value)
{
    ts_shim_ready();
    CUresult r = PASS(cuMemPoolSetAttribute, pool, attr, value);
    if (ts_shim.cfg.mem_on)
        pools_refresh(-1, 0);
    return r;
}

/* A destroyed pool gives its cache back at once; its live allocations keep
 * their memory until freed (the driver defers the destruction until then). */
TS_SHIM_EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool)
{
    ts_shim_ready();
    if (!ts_shim.cfg.mem_on)
        return PASS(cuMemPoolDestroy, pool);
    int ok = 1;
    uint64_t used = pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &ok);
    CUresult r = PASS(cuMemPoolDestroy, pool);
    if (r != CUDA_SUCCESS || !ok)
        return r;
    uint64_t back = 0;
    int ldev = -1;
    pthread_mutex_lock(&ts_shim.lock);
    struct ts_shim_rec *pr = ts_shim_rec_get(&ts_shim.recs, TS_REC_POOL, (uintptr_t)pool);
    if (pr) {
        ldev = pr->ldev;
        back = pr->bytes > used ? pr->bytes - used : 0;
        pr->bytes -= back;
        pr->maps = 1;
        if (pr->bytes == 0)
            ts_shim_rec_del(&ts_shim.recs, TS_REC_POOL, (uintptr_t)pool, NULL);
    }
    pthread_mutex_unlock(&ts_shim.lock);
    release(ldev, back);
    return r;
}

/* Synchronisations: where pools give memory back. */
TS_SHIM_EXPORT CUresult cuStreamSynchronize(CUstream hStream)
{
    ts_shim_ready();
    CUresult r = PASS(cuStreamSynchronize, hStream);
    if (ts_shim.cfg.mem_on)
        pools_refresh(-1, 0);
    return r;
}

TS_SHIM_EXPORT CUresult cuStreamSynchronize_ptsz(CUstream hStream)
{
    ts_shim_ready();
    CUresult r = PASS(cuStreamSynchronize_ptsz, hStream);
    if (ts_shim.cfg.mem_on)
        pools_refresh(-1, 0);
    return r;
}

TS_SHIM_EXPORT CUresult cuCtxSynchronize(void)
{
    ts_shim_ready();
    CUresult r = REAL.cuCtxSynchronize ? REAL.cuCtxSynchronize() : CUDA_ERROR_NOT_SUPPORTED;
    if (ts_shim.cfg.mem_on)
        pools_refresh(-1, 0);
    return r;
}

TS_SHIM_EXPORT CUresult cuEventSynchronize(CUevent hEvent)
{
    ts_shim_ready();
    CUresult r = PASS(cuEventSynchronize, hEvent);
    if (ts_shim.cfg.mem_on)
        pools_refresh(-1, 0);
    return r;
}

/* ---- graph memory nodes ------------------------------------------------------ *
 * A graph's memory nodes (cuGraphAddMemAllocNode, or cuMemAllocAsync on a
 * capturing stream) hold no memory until the graph is instantiated and
 * launched; the driver then maps them from the device's graph memory pool,
 * which keeps them after the instance is destroyed until
 * cuDeviceGraphMemTrim. The shim sums a graph's nodes (uncharged) and
 * charges an instance the sum from its instantiation (an upper bound: before
 * its first launch it holds nothing yet) to its destruction, when it trims
 * the device's graph pool so the driver gives the memory back too. An
 * instantiation that would pass the quota fails with
 * CUDA_ERROR_OUT_OF_MEMORY. */

static int stream_capturing(CUstream s)
{
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    return REAL.cuStreamIsCapturing && REAL.cuStreamIsCapturing(s, &st) == CUDA_SUCCESS &&
           st == CU_STREAM_CAPTURE_STATUS_ACTIVE;
}

/* Adds `bytes` to the uncharged tally of kind (a graph, or a capturing
 * stream) `key` on CUDA ordinal o. */
static void tally_add(uint32_t kind, uint64_t key, int ldev, int o, uint64_t bytes)
{
    pthread_mutex_lock(&ts_shim.lock);
    struct ts_shim_rec *rec = ts_shim_rec_get(&ts_shim.recs, kind, key);
    if (rec) {
        rec->bytes = rec->bytes > UINT64_MAX - bytes ? UINT64_MAX : rec->bytes + bytes;
    } else {
        struct ts_shim_rec r = {.key = key, .kind = kind, .ldev = ldev, .bytes = bytes,
                                .pool = (uint64_t)o, .refs = 1};
        ts_shim_rec_put(&ts_shim.recs, &r);
    }
    pthread_mutex_unlock(&ts_shim.lock);
}

static void capture_add(CUstream s, const struct ts_shim_dev *d, int o, uint64_t bytes)
{
    tally_add(TS_REC_CAPTURE, (uintptr_t)s, d->ledger_dev, o, bytes);
}

void ts_shim_mem_capture_end(CUstream s, CUgraph graph)
{
    struct ts_shim_rec t;
    if (unrecord(TS_REC_CAPTURE, (uintptr_t)s, &t) != 0 || !graph)
        return;
    tally_add(TS_REC_GRAPH, (uintptr_t)graph, t.ldev, (int)t.pool, t.bytes);
}

TS_SHIM_EXPORT CUresult cuGraphAddMemAllocNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                               const CUgraphNode *dependencies,
                                               size_t numDependencies,
                                               CUDA_MEM_ALLOC_NODE_PARAMS *nodeParams)
{
    ts_shim_ready();
    CUresult r = PASS(cuGraphAddMemAllocNode, phGraphNode, hGraph, dependencies, numDependencies,
                      nodeParams);
    const struct ts_shim_dev *d;
    if (r == CUDA_SUCCESS && ts_shim.cfg.mem_on && nodeParams &&
        nodeParams->poolProps.location.type == CU_MEM_LOCATION_TYPE_DEVICE &&
        (d = quota_dev(nodeParams->poolProps.location.id)))
        tally_add(TS_REC_GRAPH, (uintptr_t)hGraph, d->ledger_dev,
                  nodeParams->poolProps.location.id, rounded(nodeParams->bytesize, d->gran));
    return r;
}

TS_SHIM_EXPORT CUresult cuGraphDestroy(CUgraph hGraph)
{
    ts_shim_ready();
    CUresult r = PASS(cuGraphDestroy, hGraph);
    if (r == CUDA_SUCCESS && ts_shim.cfg.mem_on)
        unrecord(TS_REC_GRAPH, (uintptr_t)hGraph, NULL);
    return r;
}

/* Reserves graph's memory for an instance about to be made: 0 and *held the
 * bytes (0: nothing to charge), or -1 over the quota. */
static int graph_reserve(CUgraph graph, struct ts_shim_rec *held)
{
    memset(held, 0, sizeof *held);
    if (!ts_shim.cfg.mem_on)
        return 0;
    pthread_mutex_lock(&ts_shim.lock);
    struct ts_shim_rec *g = ts_shim_rec_get(&ts_shim.recs, TS_REC_GRAPH, (uintptr_t)graph);
    if (g)
        *held = *g;
    pthread_mutex_unlock(&ts_shim.lock);
    const struct ts_shim_dev *d = held->bytes ? quota_dev((int)held->pool) : NULL;
    if (!d) {
        held->bytes = 0;
        return 0;
    }
    return reserve(d, held->bytes) == 0 ? 0 : -1;
}

static CUresult graph_settle(CUresult r, CUgraphExec *exec, const struct ts_shim_rec *held)
{
    if (!held->bytes)
        return r;
    if (r != CUDA_SUCCESS || !exec) {
        release(held->ldev, held->bytes);
        return r;
    }
    struct ts_shim_rec x = {.key = (uintptr_t)*exec, .kind = TS_REC_GEXEC, .ldev = held->ldev,
                            .bytes = held->bytes, .pool = held->pool, .refs = 1};
    pthread_mutex_lock(&ts_shim.lock);
    int rc = ts_shim_rec_put(&ts_shim.recs, &x);
    pthread_mutex_unlock(&ts_shim.lock);
    if (rc != 0) {
        PASS(cuGraphExecDestroy, *exec);
        release(held->ldev, held->bytes);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    return r;
}

TS_SHIM_EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph,
                                                    unsigned long long flags)
{
    ts_shim_ready();
    struct ts_shim_rec held;
    if (graph_reserve(hGraph, &held) != 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = PASS(cuGraphInstantiateWithFlags, phGraphExec, hGraph, flags);
    return graph_settle(r, phGraphExec, &held);
}

#define GRAPH_INSTANTIATE_PARAMS(name)                                                        \
    TS_SHIM_EXPORT CUresult name(CUgraphExec *phGraphExec, CUgraph hGraph,                    \
                                 CUDA_GRAPH_INSTANTIATE_PARAMS *params)                       \
    {                                                                                         \
        ts_shim_ready();                                                                      \
        struct ts_shim_rec held;                                                              \
        if (graph_reserve(hGraph, &held) != 0) {                                              \
            if (params)                                                                       \
                params->result_out = CUDA_GRAPH_INSTANTIATE_ERROR;                            \
            return CUDA_ERROR_OUT_OF_MEMORY;                                                  \
        }                                                                                     \
        CUresult r = PASS(name, phGraphExec, hGraph, params);                                 \
        return graph_settle(r, phGraphExec, &held);                                           \
    }
GRAPH_INSTANTIATE_PARAMS(cuGraphInstantiateWithParams)
GRAPH_INSTANTIATE_PARAMS(cuGraphInstantiateWithParams_ptsz)

#define GRAPH_INSTANTIATE_LEGACY(name)                                                        \
    TS_SHIM_EXPORT CUresult name(CUgraphExec *phGraphExec, CUgraph hGraph,                    \
                                 CUgraphNode *phErrorNode, char *logBuffer, size_t bufferSize) \
    {                                                                                         \
        ts_shim_ready();                                                                      \
        struct ts_shim_rec held;                                                              \
        if (graph_reserve(hGraph, &held) != 0)                                                \
            return CUDA_ERROR_OUT_OF_MEMORY;                                                  \
        CUresult r = PASS(name, phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize);     \
        return graph_settle(r, phGraphExec, &held);                                           \
    }
GRAPH_INSTANTIATE_LEGACY(cuGraphInstantiate)
GRAPH_INSTANTIATE_LEGACY(cuGraphInstantiate_v2)

TS_SHIM_EXPORT CUresult cuGraphExecDestroy(CUgraphExec hGraphExec)
{
    ts_shim_ready();
    struct ts_shim_rec x;
    int had = ts_shim.cfg.mem_on && unrecord(TS_REC_GEXEC, (uintptr_t)hGraphExec, &x) == 0;
    CUresult r = PASS(cuGraphExecDestroy, hGraphExec);
    if (!had)
        return r;
    if (r != CUDA_SUCCESS) {
        record(x.kind, x.key, x.ldev, x.bytes, x.owner);
        return r;
    }
    /* the driver's graph pool would keep the memory cached: give it back */
    PASS(cuDeviceGraphMemTrim, (CUdevice)x.pool);
    release(x.ldev, x.bytes);
    return r;
}

/* ---- the pre-CUDA-3.2 entry points ------------------------------------------ *
 * 32-bit sizes and pointers. Charged and freed like their _v2 successors;
 * reports clamp the quota to what 32 bits hold. The pitched and array
 * allocations, whose sizes the driver decides, are refused while the device
 * has a quota (CUDA_ERROR_NOT_SUPPORTED): no current program uses them. */

static CUresult undo_free_v1(uint64_t p) { return PASS(cuMemFree, (CUdeviceptr_v1)p); }

TS_SHIM_EXPORT CUresult cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytesize)
{
    ts_shim_ready();
    CUcontext ctx;
    const struct ts_shim_dev *d;
    if (!ts_shim.cfg.mem_on || !dptr || bytesize == 0 ||
        !(d = quota_dev(ts_shim_current_ordinal(&ctx))))
        return PASS(cuMemAlloc, dptr, bytesize);
    uint64_t bytes = rounded(bytesize, d->gran);
    if (reserve(d, bytes) != 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = PASS(cuMemAlloc, dptr, bytesize);
    return settle(r, d, TS_REC_PTR, r == CUDA_SUCCESS ? *dptr : 0, bytes, (uintptr_t)ctx,
                  undo_free_v1);
}

TS_SHIM_EXPORT CUresult cuMemFree(CUdeviceptr_v1 dptr)
{
    ts_shim_ready();
    if (!ts_shim.cfg.mem_on || dptr == 0)
        return PASS(cuMemFree, dptr);
    return charged_free(TS_REC_PTR, dptr, undo_free_v1);
}

#define LEGACY_REFUSED(name, proto, ...)                                                      \
    TS_SHIM_EXPORT CUresult name proto                                                        \
    {                                                                                         \
        ts_shim_ready();                                                                      \
        if (ts_shim.cfg.mem_on && quota_dev(ts_shim_current_ordinal(NULL)))                   \
            return CUDA_ERROR_NOT_SUPPORTED;                                                  \
        return PASS(name, __VA_ARGS__);                                                       \
    }
LEGACY_REFUSED(cuMemAllocPitch,
               (CUdeviceptr_v1 * dptr, unsigned int *pPitch, unsigned int WidthInBytes,
                unsigned int Height, unsigned int ElementSizeBytes),
               dptr, pPitch, WidthInBytes, Height, ElementSizeBytes)
LEGACY_REFUSED(cuArrayCreate, (CUarray * pHandle, const CUDA_ARRAY_DESCRIPTOR_v1 *p), pHandle, p)
LEGACY_REFUSED(cuArray3DCreate, (CUarray * pHandle, const CUDA_ARRAY3D_DESCRIPTOR_v1 *p),
               pHandle, p)

/* ---- arrays -------------------------------------------------------------- */

static uint64_t element_bytes(CUarray_format f)
{
    switch (f) {
    case CU_AD_FORMAT_UNSIGNED_INT8: case CU_AD_FORMAT_SIGNED_INT8: return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16: case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF: return 2;
    case CU_AD_FORMAT_UNSIGNED_INT32: case CU_AD_FORMAT_SIGNED_INT32:
    case CU_AD_FORMAT_FLOAT: return 4;
    default: break; /* cuda.h has more formats (packed, block-compressed) */
    }
    return ARRAY_ELEMENT_MAX_BYTES;
}

/* W x H x D x channels x element, saturating. */
static uint64_t array_estimate(size_t w, size_t h, size_t z, CUarray_format f, unsigned ch)
{
    uint64_t v = element_bytes(f) * (ch ? ch : 1);
    size_t dims[3] = {w, h ? h : 1, z ? z : 1};
    for (int i = 0; i < 3; i++) {
        if (dims[i] && v > UINT64_MAX / dims[i])
            return UINT64_MAX;
        v *= dims[i];
    }
    return v;
}

/* The bytes an array of this description takes, asked of the driver before
 * anything is allocated: a deferred-mapping twin holds no memory but answers
 * cuArrayGetMemoryRequirements (which the driver refuses for ordinary
 * arrays). 0 when the driver cannot say (no deferred mapping on this device
 * or driver): the caller falls back to its own arithmetic. */
static uint64_t array_requirement(const CUDA_ARRAY3D_DESCRIPTOR *desc, unsigned levels, int dev)
{
    CUDA_ARRAY3D_DESCRIPTOR twin = *desc;
    twin.Flags |= TS_CU_ARRAY3D_DEFERRED_MAPPING;
    CUDA_ARRAY_MEMORY_REQUIREMENTS req;
    memset(&req, 0, sizeof req);
    if (levels) {
        CUmipmappedArray m;
        if (PASS(cuMipmappedArrayCreate, &m, &twin, levels) != CUDA_SUCCESS)
            return 0;
        if (PASS(cuMipmappedArrayGetMemoryRequirements, &req, m, dev) != CUDA_SUCCESS)
            req.size = 0;
        PASS(cuMipmappedArrayDestroy, m);
    } else {
        CUarray a;
        if (PASS(cuArray3DCreate_v2, &a, &twin) != CUDA_SUCCESS)
            return 0;
        if (PASS(cuArrayGetMemoryRequirements, &req, a, dev) != CUDA_SUCCESS)
            req.size = 0;
        PASS(cuArrayDestroy, a);
    }
    return req.size;
}

/* W x H x D x channels x element summed over the levels: the fallback. */
static uint64_t array_arithmetic(const CUDA_ARRAY3D_DESCRIPTOR *d3, unsigned levels)
{
    uint64_t raw = 0;
    size_t w = d3->Width, h = d3->Height, z = d3->Depth;
    for (unsigned l = 0; l < (levels ? levels : 1) && raw != UINT64_MAX; l++) {
        uint64_t b = array_estimate(w, h, z, d3->Format, d3->NumChannels);
        raw = b > UINT64_MAX - raw ? UINT64_MAX : raw + b;
        w = w > 1 ? w / 2 : w;
        h = h > 1 ? h / 2 : h;
        z = z > 1 ? z / 2 : z;
    }
    return raw;
}

/* Creates an array (3D when d3, mipmapped when levels > 0) charged at what
 * the driver says it needs, reserved before it is created. Sparse and
 * deferred-mapping arrays hold no memory of their own (what is mapped into
 * them comes from cuMemCreate, charged there): not charged. */
static CUresult array_create(void **out, const CUDA_ARRAY_DESCRIPTOR *d2,
                             const CUDA_ARRAY3D_DESCRIPTOR *d3, unsigned levels)
{
#define ARRAY_CALL()                                                                          \
    (levels ? PASS(cuMipmappedArrayCreate, (CUmipmappedArray *)out, d3, levels)               \
     : d3   ? PASS(cuArray3DCreate_v2, (CUarray *)out, d3)                                    \
            : PASS(cuArrayCreate_v2, (CUarray *)out, d2))
    CUcontext ctx;
    const struct ts_shim_dev *d = NULL;
    int o = -1;
    if (ts_shim.cfg.mem_on && out && (d2 || d3) &&
        !(d3 && (d3->Flags & (TS_CU_ARRAY3D_DEFERRED_MAPPING | TS_CU_ARRAY3D_SPARSE))))
        d = quota_dev(o = ts_shim_current_ordinal(&ctx));
    if (!d)
        return ARRAY_CALL();
    CUDA_ARRAY3D_DESCRIPTOR desc;
    if (d3) {
        desc = *d3;
    } else {
        memset(&desc, 0, sizeof desc);
        desc.Width = d2->Width;
        desc.Height = d2->Height;
        desc.Format = d2->Format;
        desc.NumChannels = d2->NumChannels;
    }
    uint64_t need = array_requirement(&desc, levels, o);
    uint64_t bytes = rounded(need ? need : array_arithmetic(&desc, levels), d->gran);
    if (reserve(d, bytes) != 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = ARRAY_CALL();
#undef ARRAY_CALL
    return settle(r, d, levels ? TS_REC_MIPMAP : TS_REC_ARRAY,
                  r == CUDA_SUCCESS ? (uintptr_t)*out : 0, bytes, (uintptr_t)ctx,
                  levels ? undo_mipmap : undo_array);
}

TS_SHIM_EXPORT CUresult cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *p)
{
    ts_shim_ready();
    return array_create((void **)pHandle, p, NULL, 0);
}

TS_SHIM_EXPORT CUresult cuArray3DCreate_v2(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *p)
{
    ts_shim_ready();
    return array_create((void **)pHandle, NULL, p, 0);
}

TS_SHIM_EXPORT CUresult cuMipmappedArrayCreate(CUmipmappedArray *pHandle,
                                               const CUDA_ARRAY3D_DESCRIPTOR *p,
                                               unsigned int numMipmapLevels)
{
    ts_shim_ready();
    if (numMipmapLevels == 0)
        return PASS(cuMipmappedArrayCreate, pHandle, p, numMipmapLevels);
    return array_create((void **)pHandle, NULL, p, numMipmapLevels);
}

TS_SHIM_EXPORT CUresult cuArrayDestroy(CUarray hArray)
{
    ts_shim_ready();
    if (!ts_shim.cfg.mem_on)
        return PASS(cuArrayDestroy, hArray);
    return charged_free(TS_REC_ARRAY, (uintptr_t)hArray, undo_array);
}

TS_SHIM_EXPORT CUresult cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray)
{
    ts_shim_ready();
    if (!ts_shim.cfg.mem_on)
        return PASS(cuMipmappedArrayDestroy, hMipmappedArray);
    return charged_free(TS_REC_MIPMAP, (uintptr_t)hMipmappedArray, undo_mipmap);
}

/* ---- virtual memory management ---------------------------------------------- */

TS_SHIM_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                                    const CUmemAllocationProp *prop, unsigned long long flags)
{
    ts_shim_ready();
    const struct ts_shim_dev *d = NULL;
    if (ts_shim.cfg.mem_on && handle && prop && size &&
        prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE)
        d = quota_dev(prop->location.id);
    if (!d)
        return PASS(cuMemCreate, handle, size, prop, flags);
    uint64_t bytes = rounded(size, d->gran);
    if (reserve(d, bytes) != 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = PASS(cuMemCreate, handle, size, prop, flags);
    return settle(r, d, TS_REC_HANDLE, r == CUDA_SUCCESS ? *handle : 0, bytes, 0, undo_handle);
}

/* Drops one reference (a release or an unmap) of a recorded handle; returns
 * the charge to give back once nothing holds it. Lock held. */
static uint64_t handle_unref_locked(uint64_t h, int is_map, int *ldev)
{
    struct ts_shim_rec *rec = ts_shim_rec_get(&ts_shim.recs, TS_REC_HANDLE, h);
    if (!rec)
        return 0;
    if (is_map)
        rec->maps -= rec->maps > 0;
    else
        rec->refs -= rec->refs > 0;
    if (rec->refs > 0 || rec->maps > 0)
        return 0;
    struct ts_shim_rec gone;
    ts_shim_rec_del(&ts_shim.recs, TS_REC_HANDLE, h, &gone);
    *ldev = gone.ldev;
    return gone.bytes;
}

TS_SHIM_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    ts_shim_ready();
    CUresult r = PASS(cuMemRelease, handle);
    if (r != CUDA_SUCCESS || !ts_shim.cfg.mem_on)
        return r;
    int ldev = -1;
    pthread_mutex_lock(&ts_shim.lock);
    uint64_t back = handle_unref_locked(handle, 0, &ldev);
    pthread_mutex_unlock(&ts_shim.lock);
    release(ldev, back);
    return r;
}

TS_SHIM_EXPORT CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle,
                                                    void *addr)
{
    ts_shim_ready();
    CUresult r = PASS(cuMemRetainAllocationHandle, handle, addr);
    if (r != CUDA_SUCCESS || !ts_shim.cfg.mem_on)
        return r;
    pthread_mutex_lock(&ts_shim.lock);
    struct ts_shim_rec *rec = ts_shim_rec_get(&ts_shim.recs, TS_REC_HANDLE, *handle);
    if (rec)
        rec->refs++;
    pthread_mutex_unlock(&ts_shim.lock);
    return r;
}

TS_SHIM_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                                 CUmemGenericAllocationHandle handle, unsigned long long flags)
{
    ts_shim_ready();
    CUresult r = PASS(cuMemMap, ptr, size, offset, handle, flags);
    if (r != CUDA_SUCCESS || !ts_shim.cfg.mem_on)
        return r;
    pthread_mutex_lock(&ts_shim.lock);
    struct ts_shim_rec *rec = ts_shim_rec_get(&ts_shim.recs, TS_REC_HANDLE, handle);
    if (rec) {
        rec->maps++;
        struct ts_shim_rec m = {.key = ptr, .kind = TS_REC_MAP, .ldev = -1, .bytes = size,
                                .owner = handle};
        if (ts_shim_rec_put(&ts_shim.recs, &m) != 0)
            rec->maps--; /* untracked mapping: the handle is freed at its release */
    }
    pthread_mutex_unlock(&ts_shim.lock);
    return r;
}

/* Unmaps every recorded mapping inside [ptr, ptr+size): walks from ptr by
 * mapping lengths (the driver unmaps whole mappings), falling back to a scan
 * where the walk finds a hole. */
TS_SHIM_EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    ts_shim_ready();
    CUresult r = PASS(cuMemUnmap, ptr, size);
    if (r != CUDA_SUCCESS || !ts_shim.cfg.mem_on)
        return r;
    uint64_t back[TS_LEDGER_MAX_DEVICES] = {0};
    pthread_mutex_lock(&ts_shim.lock);
    uint64_t va = ptr, end = ptr + size;
    int hole = 0;
    while (va < end) {
        struct ts_shim_rec m;
        if (ts_shim_rec_del(&ts_shim.recs, TS_REC_MAP, va, &m) != 0) {
            hole = 1;
            break;
        }
        int ldev = -1;
        uint64_t b = handle_unref_locked(m.owner, 1, &ldev);
        if (ldev >= 0 && ldev < TS_LEDGER_MAX_DEVICES)
            back[ldev] += b;
        va += m.bytes ? m.bytes : 1;
    }
    for (size_t i = 0; hole && i < ts_shim.recs.cap;) {
        struct ts_shim_rec *e = &ts_shim.recs.e[i];
        if (e->kind == TS_REC_MAP && e->key >= ptr && e->key < end) {
            struct ts_shim_rec m;
            ts_shim_rec_del(&ts_shim.recs, TS_REC_MAP, e->key, &m);
            int ldev = -1;
            uint64_t b = handle_unref_locked(m.owner, 1, &ldev);
            if (ldev >= 0 && ldev < TS_LEDGER_MAX_DEVICES)
                back[ldev] += b;
            i = 0; /* deletion shifts entries: rescan */
        } else {
            i++;
        }
    }
    pthread_mutex_unlock(&ts_shim.lock);
    for (int d = 0; d < TS_LEDGER_MAX_DEVICES; d++)
        release(d, back[d]);
    return r;
}

/* ---- contexts ------------------------------------------------------------------ */

void ts_shim_mem_ctx_gone(uint64_t ctx)
{
    uint64_t back[TS_LEDGER_MAX_DEVICES] = {0};
    pthread_mutex_lock(&ts_shim.lock);
    for (size_t i = 0; i < ts_shim.recs.cap;) {
        struct ts_shim_rec *e = &ts_shim.recs.e[i];
        int owned = (e->kind == TS_REC_PTR || e->kind == TS_REC_ARRAY ||
                     e->kind == TS_REC_MIPMAP) && e->owner == ctx;
        owned |= e->kind == TS_REC_CTX && e->key == ctx;
        owned |= e->kind == TS_REC_POOLPTR && e->owner == ctx; /* the pool holds the charge */
        if (owned) {
            struct ts_shim_rec gone;
            ts_shim_rec_del(&ts_shim.recs, e->kind, e->key, &gone);
            if (gone.kind != TS_REC_POOLPTR && gone.ldev >= 0 && gone.ldev < TS_LEDGER_MAX_DEVICES)
                back[gone.ldev] += gone.bytes;
            continue; /* entry i now holds a shifted one: look again */
        }
        i++;
    }
    pthread_mutex_unlock(&ts_shim.lock);
    for (int d = 0; d < TS_LEDGER_MAX_DEVICES; d++)
        release(d, back[d]);
    ts_shim_ctx_forget((CUcontext)(uintptr_t)ctx);
}

static const struct ts_shim_dev *ctx_charge_dev(CUdevice dev)
{
    return ts_shim.cfg.mem_on && ts_shim.cfg.ctx_bytes ? quota_dev(dev) : NULL;
}

#define CTX_CREATE(name, proto, args)                                                         \
    TS_SHIM_EXPORT CUresult name proto                                                        \
    {                                                                                         \
        ts_shim_ready();                                                                      \
        const struct ts_shim_dev *d = pctx ? ctx_charge_dev(dev) : NULL;                      \
        if (!d)                                                                               \
            return PASS(name, TS_SHIM_UNPAREN args);                                          \
        if (reserve(d, ts_shim.cfg.ctx_bytes) != 0)                                           \
            return CUDA_ERROR_OUT_OF_MEMORY;                                                  \
        CUresult r = PASS(name, TS_SHIM_UNPAREN args);                                        \
        return settle(r, d, TS_REC_CTX, r == CUDA_SUCCESS ? (uintptr_t)*pctx : 0,             \
                      ts_shim.cfg.ctx_bytes, r == CUDA_SUCCESS ? (uintptr_t)*pctx : 0,        \
                      undo_ctx);                                                              \
    }
#define TS_SHIM_UNPAREN(...) __VA_ARGS__
CTX_CREATE(cuCtxCreate_v2, (CUcontext * pctx, unsigned int flags, CUdevice dev),
           (pctx, flags, dev))
CTX_CREATE(cuCtxCreate, (CUcontext * pctx, unsigned int flags, CUdevice dev), (pctx, flags, dev))
CTX_CREATE(cuCtxCreate_v3,
           (CUcontext * pctx, CUexecAffinityParam *paramsArray, int numParams,
            unsigned int flags, CUdevice dev),
           (pctx, paramsArray, numParams, flags, dev))
CTX_CREATE(cuCtxCreate_v4,
           (CUcontext * pctx, CUctxCreateParams *ctxCreateParams, unsigned int flags,
            CUdevice dev),
           (pctx, ctxCreateParams, flags, dev))

static CUresult ctx_destroyed(CUcontext ctx, CUresult r)
{
    if (r == CUDA_SUCCESS) {
        ts_shim_limiter_ctx_gone(ctx);
        ts_shim_mem_ctx_gone((uintptr_t)ctx);
    }
    return r;
}

TS_SHIM_EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx)
{
    ts_shim_ready();
    return ctx_destroyed(ctx, PASS(cuCtxDestroy_v2, ctx));
}

TS_SHIM_EXPORT CUresult cuCtxDestroy(CUcontext ctx) /* pre-4.0: the same object */
{
    ts_shim_ready();
    return ctx_destroyed(ctx, PASS(cuCtxDestroy, ctx));
}

TS_SHIM_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    ts_shim_ready();
    const struct ts_shim_dev *d = pctx ? ctx_charge_dev(dev) : NULL;
    if (dev < 0 || dev >= TS_SHIM_MAX_DEVICES)
        return PASS(cuDevicePrimaryCtxRetain, pctx, dev);
    pthread_mutex_lock(&ts_shim.lock);
    int first = ts_shim.primary_refs[dev]++ == 0;
    pthread_mutex_unlock(&ts_shim.lock);
    int charged = first && d && reserve(d, ts_shim.cfg.ctx_bytes) == 0;
    CUresult r = first && d && !charged ? CUDA_ERROR_OUT_OF_MEMORY
                                        : PASS(cuDevicePrimaryCtxRetain, pctx, dev);
    pthread_mutex_lock(&ts_shim.lock);
    if (r != CUDA_SUCCESS) {
        ts_shim.primary_refs[dev]--;
    } else {
        ts_shim.primary_ctx[dev] = (uintptr_t)*pctx;
        if (charged) {
            struct ts_shim_rec c = {.key = (uintptr_t)*pctx, .kind = TS_REC_CTX,
                                    .ldev = d->ledger_dev, .bytes = ts_shim.cfg.ctx_bytes,
                                    .owner = (uintptr_t)*pctx};
            if (ts_shim_rec_put(&ts_shim.recs, &c) != 0)
                charged = -1; /* cannot track: give the charge back below */
        }
    }
    pthread_mutex_unlock(&ts_shim.lock);
    if (charged && (r != CUDA_SUCCESS || charged < 0))
        release(d->ledger_dev, ts_shim.cfg.ctx_bytes);
    return r;
}

static CUresult primary_down(CUdevice dev, CUresult r, int reset)
{
    if (r != CUDA_SUCCESS || dev < 0 || dev >= TS_SHIM_MAX_DEVICES)
        return r;
    pthread_mutex_lock(&ts_shim.lock);
    int gone = ts_shim.primary_refs[dev] > 0 && (reset || --ts_shim.primary_refs[dev] == 0);
    if (reset)
        ts_shim.primary_refs[dev] = 0;
    uint64_t ctx = ts_shim.primary_ctx[dev];
    pthread_mutex_unlock(&ts_shim.lock);
    if (gone && ctx) {
        ts_shim_limiter_ctx_gone((CUcontext)(uintptr_t)ctx);
        ts_shim_mem_ctx_gone(ctx);
    }
    return r;
}

TS_SHIM_EXPORT CUresult cuDevicePrimaryCtxRelease(CUdevice dev)
{
    ts_shim_ready();
    return primary_down(dev, PASS(cuDevicePrimaryCtxRelease, dev), 0);
}

TS_SHIM_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    ts_shim_ready();
    return primary_down(dev, PASS(cuDevicePrimaryCtxRelease_v2, dev), 0);
}

TS_SHIM_EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
    ts_shim_ready();
    return primary_down(dev, PASS(cuDevicePrimaryCtxReset_v2, dev), 1);
}

TS_SHIM_EXPORT CUresult cuDevicePrimaryCtxReset(CUdevice dev)
{
    ts_shim_ready();
    return primary_down(dev, PASS(cuDevicePrimaryCtxReset, dev), 1);
}

/* ---- what the process is told ------------------------------------------------------- */

/* Total: the quota (or the device, if smaller). Free: what the tenant has
 * left, or what the device has left if that is less (other tenants). */
TS_SHIM_EXPORT CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total)
{
    ts_shim_ready();
    if (ts_shim.cfg.mem_on)
        pools_refresh(-1, 0);
    CUresult r = PASS(cuMemGetInfo_v2, free_bytes, total);
    const struct ts_shim_dev *d;
    if (r != CUDA_SUCCESS || !ts_shim.cfg.mem_on || !(d = quota_dev(ts_shim_current_ordinal(NULL))))
        return r;
    uint64_t q = (uint64_t)d->limit, used = ts_ledger_used(ts_shim.ledger, d->ledger_dev);
    uint64_t left = used >= q ? 0 : q - used;
    if (q < *total)
        *total = (size_t)q;
    if (left < *free_bytes)
        *free_bytes = (size_t)left;
    return r;
}

TS_SHIM_EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    ts_shim_ready();
    CUresult r = PASS(cuDeviceTotalMem_v2, bytes, dev);
    const struct ts_shim_dev *d;
    if (r == CUDA_SUCCESS && ts_shim.cfg.mem_on && (d = quota_dev(dev)) &&
        (uint64_t)d->limit < *bytes)
        *bytes = (size_t)d->limit;
    return r;
}

/* The pre-3.2 reports: the same figures, clamped to 32 bits. */
TS_SHIM_EXPORT CUresult cuMemGetInfo(unsigned int *free_bytes, unsigned int *total)
{
    ts_shim_ready();
    size_t f, t;
    if (!free_bytes || !total || !ts_shim.cfg.mem_on)
        return PASS(cuMemGetInfo, free_bytes, total);
    CUresult r = PASS(cuMemGetInfo, free_bytes, total); /* the driver's own checks */
    if (r != CUDA_SUCCESS || cuMemGetInfo_v2(&f, &t) != CUDA_SUCCESS)
        return r;
    *free_bytes = f > 0xffffffffULL ? 0xffffffffu : (unsigned)f;
    *total = t > 0xffffffffULL ? 0xffffffffu : (unsigned)t;
    return r;
}

TS_SHIM_EXPORT CUresult cuDeviceTotalMem(unsigned int *bytes, CUdevice dev)
{
    ts_shim_ready();
    CUresult r = PASS(cuDeviceTotalMem, bytes, dev);
    const struct ts_shim_dev *d;
    if (r == CUDA_SUCCESS && ts_shim.cfg.mem_on && (d = quota_dev(dev)) &&
        (uint64_t)d->limit < *bytes)
        *bytes = (unsigned)d->limit;
    return r;
}
