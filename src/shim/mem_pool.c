/* mem_pool.c - the device-memory quota for stream-ordered pools
 * (cuMemAllocAsync and its family, pool trims and destruction, the
 * synchronisations where pools give memory back). The rules: mem.c. */

#include "shim/mem_internal.h"

#include <stdbool.h>

static void pools_refresh_locked(int ldev, int trim);

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
    struct ts_shim_rec *rec = shim_rec_get(&ts_shim.recs, TS_REC_POOL, (uintptr_t)p);
    if (rec) {
        old = rec->bytes;
        rec->bytes = reserved;
    } else if (reserved) {
        struct ts_shim_rec r = {.key = (uintptr_t)p, .kind = TS_REC_POOL, .ldev = ldev,
                                .bytes = reserved};
        if (shim_rec_put(&ts_shim.recs, &r) != 0)
            reserved = 0; /* cannot track it: leave it uncharged rather than leak */
        else
            __atomic_store_n(&pools_seen, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&ts_shim.lock);
    if (reserved > old)
        shim_ledger_reserve(ts_shim.ledger, ldev, reserved - old, UINT64_MAX);
    else
        shim_mem_release(ldev, old - reserved);
    return old;
}

/* Every pool the process has charged (on ledger device ldev; -1: all), read
 * again from the driver. Destroyed pools keep their charge until their last
 * allocation is freed. */
void shim_mem_pools_refresh(int ldev, int trim)
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

typedef CUresult (*pool_alloc_fn)(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                  CUstream hStream);

static CUresult pooled_alloc(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                             CUstream hStream, pool_alloc_fn call)
{
    CUcontext ctx = shim_stream_ctx(hStream);
    int o = shim_ctx_ordinal(ctx);
    const struct ts_shim_dev *d = shim_mem_quota_dev(o);
    if (!d)
        return call(dptr, bytesize, pool, hStream);
    uint64_t bytes = shim_mem_rounded(bytesize, d->gran);
    if (shim_mem_stream_capturing(hStream)) {
        /* a memory node of the graph being captured: charged with the graph */
        CUresult r = call(dptr, bytesize, pool, hStream);
        if (r == CUDA_SUCCESS)
            shim_mem_capture_add(hStream, d, o, bytes);
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
        if (!need || shim_ledger_reserve(ts_shim.ledger, d->ledger_dev, need,
                                       (uint64_t)d->limit) == 0)
            break;
        if (attempt == 1) {
            pool_unlock();
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        shim_mem_pools_refresh(d->ledger_dev, 1); /* the tenant's own caches first */
    }
    CUresult r = call(dptr, bytesize, pool, hStream);
    if (!ok) { /* plain per-allocation charge */
        pool_unlock();
        return shim_mem_settle(r, d, TS_REC_PTR, r == CUDA_SUCCESS ? *dptr : 0, bytes, (uintptr_t)ctx,
                      shim_mem_undo_free);
    }
    int ok2 = 1;
    uint64_t now = pool_attr(p, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &ok2);
    pthread_mutex_lock(&ts_shim.lock);
    struct ts_shim_rec *rec = shim_rec_get(&ts_shim.recs, TS_REC_POOL, (uintptr_t)p);
    uint64_t charged = rec ? rec->bytes : 0;
    pthread_mutex_unlock(&ts_shim.lock);
    uint64_t held = charged + need; /* in the ledger for this pool right now */
    if (!ok2)
        now = held;
    if (r != CUDA_SUCCESS) {
        shim_mem_release(d->ledger_dev, need);
        pool_observe(p, d->ledger_dev, now);
        pool_unlock();
        return r;
    }
    if (now > held && shim_ledger_reserve(ts_shim.ledger, d->ledger_dev, now - held,
                                        (uint64_t)d->limit) != 0) {
        /* the pool grew by more than was reserved and that does not fit:
         * undo, and let the pool give back what it now holds unused */
        PASS(cuMemFreeAsync, *dptr, hStream);
        if (REAL.cuStreamSynchronize)
            REAL.cuStreamSynchronize(hStream);
        pthread_mutex_lock(&ts_shim.lock);
        rec = shim_rec_get(&ts_shim.recs, TS_REC_POOL, (uintptr_t)p);
        if (rec)
            rec->bytes = held;
        pthread_mutex_unlock(&ts_shim.lock);
        if (!rec)
            shim_mem_release(d->ledger_dev, held); /* untracked: nothing to re-read against */
        shim_mem_pools_refresh(d->ledger_dev, 1);
        pool_unlock();
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (now < held)
        shim_mem_release(d->ledger_dev, held - now);
    /* the ledger now holds `now` for this pool: record it so */
    pthread_mutex_lock(&ts_shim.lock);
    rec = shim_rec_get(&ts_shim.recs, TS_REC_POOL, (uintptr_t)p);
    int lost = 0;
    if (rec) {
        rec->bytes = now;
    } else if (now) {
        struct ts_shim_rec pr = {.key = (uintptr_t)p, .kind = TS_REC_POOL, .ldev = d->ledger_dev,
                                 .bytes = now, .pool = (uint64_t)o};
        lost = shim_rec_put(&ts_shim.recs, &pr) != 0;
        if (!lost)
            __atomic_store_n(&pools_seen, 1, __ATOMIC_RELEASE);
    }
    struct ts_shim_rec ar = {.key = *dptr, .kind = TS_REC_POOLPTR, .ldev = d->ledger_dev,
                             .bytes = bytes, .owner = (uintptr_t)ctx, .pool = (uintptr_t)p,
                             .refs = 1};
    shim_rec_put(&ts_shim.recs, &ar); /* only needed once the pool is destroyed */
    pthread_mutex_unlock(&ts_shim.lock);
    if (lost)
        shim_mem_release(d->ledger_dev, now);
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

/* The four exported pool allocations (stream-ordered or from a pool, each
 * with its per-thread-default-stream twin) differ only in the driver's
 * function they end in: one entry, given it. A call the shim does not
 * charge (no quota, no pointer, nothing asked, from_pool without a pool)
 * goes to the driver as it came. */
static CUresult pool_entry(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                           bool from_pool, CUstream hStream, pool_alloc_fn call)
{
    shim_ready();
    if (!ts_shim.cfg.mem_on || !dptr || !bytesize || (from_pool && !pool))
        return call(dptr, bytesize, pool, hStream);
    return pooled_alloc(dptr, bytesize, pool, hStream, call);
}

TS_SHIM_EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    return pool_entry(dptr, bytesize, NULL, false, hStream, real_alloc_async);
}

TS_SHIM_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    return pool_entry(dptr, bytesize, NULL, false, hStream, real_alloc_async_ptsz);
}

TS_SHIM_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize,
                                                CUmemoryPool pool, CUstream hStream)
{
    return pool_entry(dptr, bytesize, pool, true, hStream, real_alloc_pool);
}

TS_SHIM_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize,
                                                     CUmemoryPool pool, CUstream hStream)
{
    return pool_entry(dptr, bytesize, pool, true, hStream, real_alloc_pool_ptsz);
}

/* A pool allocation going back to its pool: nothing to release (the pool
 * keeps it cached) unless the pool was destroyed, when its memory goes for
 * good. Returns 1 if dptr was a recorded pool allocation. */
int shim_mem_pool_free(CUdeviceptr dptr, CUresult (*call)(uint64_t), CUresult *r)
{
    struct ts_shim_rec a;
    if (shim_mem_unrecord(TS_REC_POOLPTR, dptr, &a) != 0)
        return 0;
    *r = call(dptr);
    if (*r != CUDA_SUCCESS) {
        pthread_mutex_lock(&ts_shim.lock);
        shim_rec_put(&ts_shim.recs, &a);
        pthread_mutex_unlock(&ts_shim.lock);
        return 1;
    }
    uint64_t back = 0;
    int ldev = -1;
    pthread_mutex_lock(&ts_shim.lock);
    struct ts_shim_rec *pr = shim_rec_get(&ts_shim.recs, TS_REC_POOL, a.pool);
    if (pr && pr->maps) { /* destroyed: what it still held goes with its allocations */
        back = a.bytes < pr->bytes ? a.bytes : pr->bytes;
        pr->bytes -= back;
        ldev = pr->ldev;
        if (pr->bytes == 0)
            shim_rec_del(&ts_shim.recs, TS_REC_POOL, a.pool, NULL);
    }
    pthread_mutex_unlock(&ts_shim.lock);
    shim_mem_release(ldev, back);
    return 1;
}

static _Thread_local CUstream tl_free_stream; /* the stream of the free in progress */
static CUresult call_free_async(uint64_t p) { return PASS(cuMemFreeAsync, p, tl_free_stream); }
static CUresult call_free_async_ptsz(uint64_t p)
{
    return PASS(cuMemFreeAsync_ptsz, p, tl_free_stream);
}

/* Both frees (call: the driver's, for the one the program called): an
 * allocation of a pool the shim charged goes back to its pool's count, any
 * other charged one to the ledger. */
static CUresult free_async(CUdeviceptr dptr, CUstream hStream, CUresult (*call)(uint64_t))
{
    tl_free_stream = hStream;
    if (!ts_shim.cfg.mem_on || dptr == 0)
        return call(dptr);
    CUresult r;
    if (shim_mem_pool_free(dptr, call, &r))
        return r;
    return shim_mem_charged_free(TS_REC_PTR, dptr, call);
}

TS_SHIM_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
    shim_ready();
    return free_async(dptr, hStream, call_free_async);
}

TS_SHIM_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
    shim_ready();
    return free_async(dptr, hStream, call_free_async_ptsz);
}

/* A call after which the pools may hold less (a trim, a new release
 * threshold, a synchronisation): its result, once their figures are read
 * again. */
static CUresult shim_pools_after(CUresult r)
{
    if (ts_shim.cfg.mem_on)
        shim_mem_pools_refresh(-1, 0);
    return r;
}

TS_SHIM_EXPORT CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep)
{
    shim_ready();
    return shim_pools_after(PASS(cuMemPoolTrimTo, pool, minBytesToKeep));
}

TS_SHIM_EXPORT CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr,
                                              void *value)
{
    shim_ready();
    return shim_pools_after(PASS(cuMemPoolSetAttribute, pool, attr, value));
}

/* A destroyed pool gives its cache back at once; its live allocations keep
 * their memory until freed (the driver defers the destruction until then). */
TS_SHIM_EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool)
{
    shim_ready();
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
    struct ts_shim_rec *pr = shim_rec_get(&ts_shim.recs, TS_REC_POOL, (uintptr_t)pool);
    if (pr) {
        ldev = pr->ldev;
        back = pr->bytes > used ? pr->bytes - used : 0;
        pr->bytes -= back;
        pr->maps = 1;
        if (pr->bytes == 0)
            shim_rec_del(&ts_shim.recs, TS_REC_POOL, (uintptr_t)pool, NULL);
    }
    pthread_mutex_unlock(&ts_shim.lock);
    shim_mem_release(ldev, back);
    return r;
}

/* Synchronisations: where pools give memory back. */
TS_SHIM_EXPORT CUresult cuStreamSynchronize(CUstream hStream)
{
    shim_ready();
    return shim_pools_after(PASS(cuStreamSynchronize, hStream));
}

TS_SHIM_EXPORT CUresult cuStreamSynchronize_ptsz(CUstream hStream)
{
    shim_ready();
    return shim_pools_after(PASS(cuStreamSynchronize_ptsz, hStream));
}

TS_SHIM_EXPORT CUresult cuCtxSynchronize(void)
{
    shim_ready();
    return shim_pools_after(REAL.cuCtxSynchronize ? REAL.cuCtxSynchronize()
                                                 : CUDA_ERROR_NOT_SUPPORTED);
}

TS_SHIM_EXPORT CUresult cuEventSynchronize(CUevent hEvent)
{
    shim_ready();
    return shim_pools_after(PASS(cuEventSynchronize, hEvent));
}
