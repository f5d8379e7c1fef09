/* mem_vmm.c - the device-memory quota for virtual memory management:
 * physical handles charged from creation to their last reference. The
 * rules: mem.c. */

#include "shim/mem_internal.h"

static CUresult undo_handle(uint64_t h) { return PASS(cuMemRelease, h); }

/* ---- virtual memory management ---------------------------------------------- */

TS_SHIM_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                                    const CUmemAllocationProp *prop, unsigned long long flags)
{
    shim_ready();
    const struct ts_shim_dev *d = NULL;
    if (ts_shim.cfg.mem_on && handle && prop && size &&
        prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE)
        d = shim_mem_quota_dev(prop->location.id);
    if (!d)
        return PASS(cuMemCreate, handle, size, prop, flags);
    uint64_t bytes = shim_mem_rounded(size, d->gran);
    if (shim_mem_reserve(d, bytes) != 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = PASS(cuMemCreate, handle, size, prop, flags);
    return shim_mem_settle(r, d, TS_REC_HANDLE, r == CUDA_SUCCESS ? *handle : 0, bytes, 0, undo_handle);
}

/* Drops one reference (a release or an unmap) of a recorded handle; returns
 * the charge to give back once nothing holds it. Lock held. */
static uint64_t handle_unref_locked(uint64_t h, int is_map, int *ldev)
{
    struct ts_shim_rec *rec = shim_rec_get(&ts_shim.recs, TS_REC_HANDLE, h);
    if (!rec)
        return 0;
    if (is_map)
        rec->maps -= rec->maps > 0;
    else
        rec->refs -= rec->refs > 0;
    if (rec->refs > 0 || rec->maps > 0)
        return 0;
    struct ts_shim_rec gone;
    shim_rec_del(&ts_shim.recs, TS_REC_HANDLE, h, &gone);
    *ldev = gone.ldev;
    return gone.bytes;
}

TS_SHIM_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    shim_ready();
    CUresult r = PASS(cuMemRelease, handle);
    if (r != CUDA_SUCCESS || !ts_shim.cfg.mem_on)
        return r;
    int ldev = -1;
    pthread_mutex_lock(&ts_shim.lock);
    uint64_t back = handle_unref_locked(handle, 0, &ldev);
    pthread_mutex_unlock(&ts_shim.lock);
    shim_mem_release(ldev, back);
    return r;
}

TS_SHIM_EXPORT CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle,
                                                    void *addr)
{
    shim_ready();
    CUresult r = PASS(cuMemRetainAllocationHandle, handle, addr);
    if (r != CUDA_SUCCESS || !ts_shim.cfg.mem_on)
        return r;
    pthread_mutex_lock(&ts_shim.lock);
    struct ts_shim_rec *rec = shim_rec_get(&ts_shim.recs, TS_REC_HANDLE, *handle);
    if (rec)
        rec->refs++;
    pthread_mutex_unlock(&ts_shim.lock);
    return r;
}

TS_SHIM_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                                 CUmemGenericAllocationHandle handle, unsigned long long flags)
{
    shim_ready();
    CUresult r = PASS(cuMemMap, ptr, size, offset, handle, flags);
    if (r != CUDA_SUCCESS || !ts_shim.cfg.mem_on)
        return r;
    pthread_mutex_lock(&ts_shim.lock);
    struct ts_shim_rec *rec = shim_rec_get(&ts_shim.recs, TS_REC_HANDLE, handle);
    if (rec) {
        rec->maps++;
        struct ts_shim_rec m = {.key = ptr, .kind = TS_REC_MAP, .ldev = -1, .bytes = size,
                                .owner = handle};
        if (shim_rec_put(&ts_shim.recs, &m) != 0)
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
    shim_ready();
    CUresult r = PASS(cuMemUnmap, ptr, size);
    if (r != CUDA_SUCCESS || !ts_shim.cfg.mem_on)
        return r;
    uint64_t back[TS_LEDGER_MAX_DEVICES] = {0};
    pthread_mutex_lock(&ts_shim.lock);
    uint64_t va = ptr, end = ptr + size;
    int hole = 0;
    while (va < end) {
        struct ts_shim_rec m;
        if (shim_rec_del(&ts_shim.recs, TS_REC_MAP, va, &m) != 0) {
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
            shim_rec_del(&ts_shim.recs, TS_REC_MAP, e->key, &m);
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
        shim_mem_release(d, back[d]);
    return r;
}
