/* mem_ctx.c - what a context costs (TESSERA_CUDA_CTX_BYTES) and what its
 * destruction gives back. The rules: mem.c. */

#include "shim/mem_internal.h"

static CUresult undo_ctx(uint64_t c) { return PASS(cuCtxDestroy_v2, (CUcontext)(uintptr_t)c); }

/* ---- contexts ------------------------------------------------------------------ */

void shim_mem_ctx_gone(uint64_t ctx)
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
            shim_rec_del(&ts_shim.recs, e->kind, e->key, &gone);
            if (gone.kind != TS_REC_POOLPTR && gone.ldev >= 0 && gone.ldev < TS_LEDGER_MAX_DEVICES)
                back[gone.ldev] += gone.bytes;
            continue; /* entry i now holds a shifted one: look again */
        }
        i++;
    }
    pthread_mutex_unlock(&ts_shim.lock);
    for (int d = 0; d < TS_LEDGER_MAX_DEVICES; d++)
        shim_mem_release(d, back[d]);
    shim_ctx_forget((CUcontext)(uintptr_t)ctx);
}

static const struct ts_shim_dev *ctx_charge_dev(CUdevice dev)
{
    return ts_shim.cfg.mem_on && ts_shim.cfg.ctx_bytes ? shim_mem_quota_dev(dev) : NULL;
}

#define CTX_CREATE(name, proto, args)                                                         \
    TS_SHIM_EXPORT CUresult name proto                                                        \
    {                                                                                         \
        shim_ready();                                                                      \
        const struct ts_shim_dev *d = pctx ? ctx_charge_dev(dev) : NULL;                      \
        if (!d)                                                                               \
            return PASS(name, TS_SHIM_UNPAREN args);                                          \
        if (shim_mem_reserve(d, ts_shim.cfg.ctx_bytes) != 0)                                           \
            return CUDA_ERROR_OUT_OF_MEMORY;                                                  \
        CUresult r = PASS(name, TS_SHIM_UNPAREN args);                                        \
        return shim_mem_settle(r, d, TS_REC_CTX, r == CUDA_SUCCESS ? (uintptr_t)*pctx : 0,             \
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
        shim_limiter_ctx_gone(ctx);
        shim_mem_ctx_gone((uintptr_t)ctx);
    }
    return r;
}

TS_SHIM_EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx)
{
    shim_ready();
    return ctx_destroyed(ctx, PASS(cuCtxDestroy_v2, ctx));
}

TS_SHIM_EXPORT CUresult cuCtxDestroy(CUcontext ctx) /* pre-4.0: the same object */
{
    shim_ready();
    return ctx_destroyed(ctx, PASS(cuCtxDestroy, ctx));
}

TS_SHIM_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    shim_ready();
    const struct ts_shim_dev *d = pctx ? ctx_charge_dev(dev) : NULL;
    if (dev < 0 || dev >= TS_SHIM_MAX_DEVICES)
        return PASS(cuDevicePrimaryCtxRetain, pctx, dev);
    pthread_mutex_lock(&ts_shim.lock);
    int first = ts_shim.primary_refs[dev]++ == 0;
    pthread_mutex_unlock(&ts_shim.lock);
    int charged = first && d && shim_mem_reserve(d, ts_shim.cfg.ctx_bytes) == 0;
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
            if (shim_rec_put(&ts_shim.recs, &c) != 0)
                charged = -1; /* cannot track: give the charge back below */
        }
    }
    pthread_mutex_unlock(&ts_shim.lock);
    if (charged && (r != CUDA_SUCCESS || charged < 0))
        shim_mem_release(d->ledger_dev, ts_shim.cfg.ctx_bytes);
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
        shim_limiter_ctx_gone((CUcontext)(uintptr_t)ctx);
        shim_mem_ctx_gone(ctx);
    }
    return r;
}

TS_SHIM_EXPORT CUresult cuDevicePrimaryCtxRelease(CUdevice dev)
{
    shim_ready();
    return primary_down(dev, PASS(cuDevicePrimaryCtxRelease, dev), 0);
}

TS_SHIM_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    shim_ready();
    return primary_down(dev, PASS(cuDevicePrimaryCtxRelease_v2, dev), 0);
}

TS_SHIM_EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
    shim_ready();
    return primary_down(dev, PASS(cuDevicePrimaryCtxReset_v2, dev), 1);
}

TS_SHIM_EXPORT CUresult cuDevicePrimaryCtxReset(CUdevice dev)
{
    shim_ready();
    return primary_down(dev, PASS(cuDevicePrimaryCtxReset, dev), 1);
}
