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
#include "shim/mem_internal.h"

#include <stdlib.h>
#include <string.h>

#define PITCH_ALIGN_FIRST_BYTES 4096 /* guess above any driver's pitch alignment */

/* The device if it has a quota, else NULL. */
const struct ts_shim_dev *shim_mem_quota_dev(int ordinal)
{
    const struct ts_shim_dev *d = shim_device(ordinal);
    return d && d->limit >= 0 && d->ledger_dev >= 0 ? d : NULL;
}

/* bytes rounded up to gran; UINT64_MAX when that overflows (never fits). */
uint64_t shim_mem_rounded(uint64_t bytes, uint64_t gran)
{
    if (bytes > UINT64_MAX - gran)
        return UINT64_MAX;
    return (bytes + gran - 1) / gran * gran;
}

/* Over the quota, the tenant's own stream-ordered pools on the device give
 * their cached memory back first (it is this process's, and unused), then
 * the reservation is tried once more. */
int shim_mem_reserve(const struct ts_shim_dev *d, uint64_t bytes)
{
    if (shim_ledger_reserve(ts_shim.ledger, d->ledger_dev, bytes, (uint64_t)d->limit) == 0)
        return 0;
    shim_mem_pools_refresh(d->ledger_dev, 1);
    return shim_ledger_reserve(ts_shim.ledger, d->ledger_dev, bytes, (uint64_t)d->limit);
}

void shim_mem_release(int ldev, uint64_t bytes)
{
    if (ldev >= 0 && bytes)
        shim_ledger_release(ts_shim.ledger, ldev, bytes);
}

int shim_mem_record(uint32_t kind, uint64_t key, int ldev, uint64_t bytes, uint64_t owner)
{
    struct ts_shim_rec r = {.key = key, .kind = kind, .ldev = ldev, .bytes = bytes,
                            .owner = owner, .refs = 1};
    pthread_mutex_lock(&ts_shim.lock);
    int rc = shim_rec_put(&ts_shim.recs, &r);
    pthread_mutex_unlock(&ts_shim.lock);
    return rc;
}

int shim_mem_unrecord(uint32_t kind, uint64_t key, struct ts_shim_rec *out)
{
    pthread_mutex_lock(&ts_shim.lock);
    int rc = shim_rec_del(&ts_shim.recs, kind, key, out);
    pthread_mutex_unlock(&ts_shim.lock);
    return rc;
}

/* After a charged allocation call: keep the charge with a shim_mem_record, or give it
 * back. If the record cannot be kept, the object is freed with undo() so it
 * cannot live uncharged. */
CUresult shim_mem_settle(CUresult r, const struct ts_shim_dev *d, uint32_t kind, uint64_t key,
                       uint64_t bytes, uint64_t owner, CUresult (*undo)(uint64_t key))
{
    if (r != CUDA_SUCCESS) {
        shim_mem_release(d->ledger_dev, bytes);
        return r;
    }
    if (shim_mem_record(kind, key, d->ledger_dev, bytes, owner) != 0) {
        undo(key);
        shim_mem_release(d->ledger_dev, bytes);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    return CUDA_SUCCESS;
}

/* Brings a reservation of `est` to `actual` (both shim_mem_rounded); on failure the
 * caller frees the object. */
int shim_mem_true_up(const struct ts_shim_dev *d, uint64_t est, uint64_t actual)
{
    if (actual > est)
        return shim_mem_reserve(d, actual - est);
    shim_mem_release(d->ledger_dev, est - actual);
    return 0;
}

CUresult shim_mem_undo_free(uint64_t p) { return PASS(cuMemFree_v2, (CUdeviceptr)p); }
/* The same for an allocation of the pre-3.2 entry points (32-bit addresses). */
static CUresult undo_free_v1(uint64_t p) { return PASS(cuMemFree, (CUdeviceptr_v1)p); }

/* A free of a recorded object: record out first, driver, then release. */
CUresult shim_mem_charged_free(uint32_t kind, uint64_t key, CUresult (*call)(uint64_t key))
{
    struct ts_shim_rec rec;
    int had = shim_mem_unrecord(kind, key, &rec) == 0;
    CUresult r = call(key);
    if (had) {
        if (r == CUDA_SUCCESS)
            shim_mem_release(rec.ldev, rec.bytes);
        else
            shim_mem_record(rec.kind, rec.key, rec.ldev, rec.bytes, rec.owner);
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

/* The plain allocations differ only in the driver's entry point and the
 * width of the address it writes: the charge is the same. */
enum plain_alloc { PLAIN_V2, PLAIN_MANAGED, PLAIN_V1 };

static CUresult plain_call(enum plain_alloc kind, void *dptr, size_t bytesize, unsigned int flags)
{
    switch (kind) {
    case PLAIN_V1:
        return PASS(cuMemAlloc, dptr, (unsigned int)bytesize);
    case PLAIN_MANAGED:
        return PASS(cuMemAllocManaged, dptr, bytesize, flags);
    default:
        return PASS(cuMemAlloc_v2, dptr, bytesize);
    }
}

static CUresult charged_plain(enum plain_alloc kind, void *dptr, size_t bytesize,
                              unsigned int flags)
{
    shim_ready();
    CUcontext ctx;
    const struct ts_shim_dev *d;
    if (!ts_shim.cfg.mem_on || !dptr || bytesize == 0 ||
        !(d = shim_mem_quota_dev(shim_current_ordinal(&ctx))))
        return plain_call(kind, dptr, bytesize, flags);
    /* managed memory is charged as if resident on the device */
    uint64_t bytes = shim_mem_rounded(bytesize, d->gran);
    if (shim_mem_reserve(d, bytes) != 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = plain_call(kind, dptr, bytesize, flags);
    uint64_t p = 0;
    if (r == CUDA_SUCCESS)
        p = kind == PLAIN_V1 ? *(const CUdeviceptr_v1 *)dptr : *(const CUdeviceptr *)dptr;
    return shim_mem_settle(r, d, TS_REC_PTR, p, bytes, (uintptr_t)ctx,
                           kind == PLAIN_V1 ? undo_free_v1 : shim_mem_undo_free);
}

TS_SHIM_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    return charged_plain(PLAIN_V2, dptr, bytesize, 0);
}

TS_SHIM_EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    return charged_plain(PLAIN_MANAGED, dptr, bytesize, flags);
}

TS_SHIM_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes,
                                           size_t Height, unsigned int ElementSizeBytes)
{
    shim_ready();
    CUcontext ctx;
    int o = -1;
    const struct ts_shim_dev *d = NULL;
    if (ts_shim.cfg.mem_on && dptr && pPitch && WidthInBytes && Height)
        d = shim_mem_quota_dev(o = shim_current_ordinal(&ctx));
    if (!d)
        return PASS(cuMemAllocPitch_v2, dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
    uint64_t align = __atomic_load_n(&pitch_align[o], __ATOMIC_RELAXED);
    uint64_t row = shim_mem_rounded(WidthInBytes, align ? align : PITCH_ALIGN_FIRST_BYTES);
    uint64_t est = row > UINT64_MAX / Height ? UINT64_MAX : shim_mem_rounded(row * Height, d->gran);
    if (shim_mem_reserve(d, est) != 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = PASS(cuMemAllocPitch_v2, dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
    if (r != CUDA_SUCCESS) {
        shim_mem_release(d->ledger_dev, est);
        return r;
    }
    learn_pitch(o, *pPitch);
    /* never more than reserved, unless the driver's alignment beats the guess */
    uint64_t actual = shim_mem_rounded((uint64_t)*pPitch * Height, d->gran);
    if (shim_mem_true_up(d, est, actual) != 0) {
        shim_mem_undo_free(*dptr);
        shim_mem_release(d->ledger_dev, est);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    return shim_mem_settle(r, d, TS_REC_PTR, *dptr, actual, (uintptr_t)ctx, shim_mem_undo_free);
}

TS_SHIM_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    shim_ready();
    if (!ts_shim.cfg.mem_on || dptr == 0)
        return PASS(cuMemFree_v2, dptr);
    CUresult r;
    if (shim_mem_pool_free(dptr, shim_mem_undo_free, &r)) /* a stream-ordered allocation freed in order */
        return r;
    return shim_mem_charged_free(TS_REC_PTR, dptr, shim_mem_undo_free);
}

/* ---- the pre-CUDA-3.2 entry points ------------------------------------------ *
 * 32-bit sizes and pointers. Charged and freed like their _v2 successors;
 * reports clamp the quota to what 32 bits hold. The pitched and array
 * allocations, whose sizes the driver decides, are refused while the device
 * has a quota (CUDA_ERROR_NOT_SUPPORTED): no current program uses them. */

TS_SHIM_EXPORT CUresult cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytesize)
{
    return charged_plain(PLAIN_V1, dptr, bytesize, 0);
}

TS_SHIM_EXPORT CUresult cuMemFree(CUdeviceptr_v1 dptr)
{
    shim_ready();
    if (!ts_shim.cfg.mem_on || dptr == 0)
        return PASS(cuMemFree, dptr);
    return shim_mem_charged_free(TS_REC_PTR, dptr, undo_free_v1);
}

#define LEGACY_REFUSED(name, proto, ...)                                                      \
    TS_SHIM_EXPORT CUresult name proto                                                        \
    {                                                                                         \
        shim_ready();                                                                      \
        if (ts_shim.cfg.mem_on && shim_mem_quota_dev(shim_current_ordinal(NULL)))                   \
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

/* ---- what the process is told ------------------------------------------------------- */

/* Total: the quota (or the device, if smaller). Free: what the tenant has
 * left, or what the device has left if that is less (other tenants). */
TS_SHIM_EXPORT CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total)
{
    shim_ready();
    if (ts_shim.cfg.mem_on)
        shim_mem_pools_refresh(-1, 0);
    CUresult r = PASS(cuMemGetInfo_v2, free_bytes, total);
    const struct ts_shim_dev *d;
    if (r != CUDA_SUCCESS || !ts_shim.cfg.mem_on || !(d = shim_mem_quota_dev(shim_current_ordinal(NULL))))
        return r;
    uint64_t q = (uint64_t)d->limit, used = shim_ledger_used(ts_shim.ledger, d->ledger_dev);
    uint64_t left = used >= q ? 0 : q - used;
    if (q < *total)
        *total = (size_t)q;
    if (left < *free_bytes)
        *free_bytes = (size_t)left;
    return r;
}

/* bytes, what the driver says dev holds, or dev's quota if that is less. */
static uint64_t total_for_quota(CUdevice dev, uint64_t bytes)
{
    const struct ts_shim_dev *d;
    if (ts_shim.cfg.mem_on && (d = shim_mem_quota_dev(dev)) && (uint64_t)d->limit < bytes)
        return (uint64_t)d->limit;
    return bytes;
}

TS_SHIM_EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    shim_ready();
    CUresult r = PASS(cuDeviceTotalMem_v2, bytes, dev);
    if (r == CUDA_SUCCESS)
        *bytes = (size_t)total_for_quota(dev, *bytes);
    return r;
}

/* The pre-3.2 reports: the same figures, clamped to 32 bits. */
TS_SHIM_EXPORT CUresult cuMemGetInfo(unsigned int *free_bytes, unsigned int *total)
{
    shim_ready();
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
    shim_ready();
    CUresult r = PASS(cuDeviceTotalMem, bytes, dev);
    if (r == CUDA_SUCCESS)
        *bytes = (unsigned)total_for_quota(dev, *bytes);
    return r;
}
