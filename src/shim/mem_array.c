/* mem_array.c - the device-memory quota for CUDA arrays and mipmapped
 * arrays, whose size the driver decides. The rules: mem.c. */

#include "shim/mem_internal.h"

#include <string.h>

static CUresult undo_array(uint64_t a) { return PASS(cuArrayDestroy, (CUarray)(uintptr_t)a); }
static CUresult undo_mipmap(uint64_t a)
{
    return PASS(cuMipmappedArrayDestroy, (CUmipmappedArray)(uintptr_t)a);
}

#define ARRAY_ELEMENT_MAX_BYTES 16 /* unknown formats: the widest element */

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
        d = shim_mem_quota_dev(o = shim_current_ordinal(&ctx));
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
    uint64_t bytes = shim_mem_rounded(need ? need : array_arithmetic(&desc, levels), d->gran);
    if (shim_mem_reserve(d, bytes) != 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = ARRAY_CALL();
#undef ARRAY_CALL
    return shim_mem_settle(r, d, levels ? TS_REC_MIPMAP : TS_REC_ARRAY,
                  r == CUDA_SUCCESS ? (uintptr_t)*out : 0, bytes, (uintptr_t)ctx,
                  levels ? undo_mipmap : undo_array);
}

TS_SHIM_EXPORT CUresult cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *p)
{
    shim_ready();
    return array_create((void **)pHandle, p, NULL, 0);
}

TS_SHIM_EXPORT CUresult cuArray3DCreate_v2(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *p)
{
    shim_ready();
    return array_create((void **)pHandle, NULL, p, 0);
}

TS_SHIM_EXPORT CUresult cuMipmappedArrayCreate(CUmipmappedArray *pHandle,
                                               const CUDA_ARRAY3D_DESCRIPTOR *p,
                                               unsigned int numMipmapLevels)
{
    shim_ready();
    if (numMipmapLevels == 0)
        return PASS(cuMipmappedArrayCreate, pHandle, p, numMipmapLevels);
    return array_create((void **)pHandle, NULL, p, numMipmapLevels);
}

TS_SHIM_EXPORT CUresult cuArrayDestroy(CUarray hArray)
{
    shim_ready();
    if (!ts_shim.cfg.mem_on)
        return PASS(cuArrayDestroy, hArray);
    return shim_mem_charged_free(TS_REC_ARRAY, (uintptr_t)hArray, undo_array);
}

TS_SHIM_EXPORT CUresult cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray)
{
    shim_ready();
    if (!ts_shim.cfg.mem_on)
        return PASS(cuMipmappedArrayDestroy, hMipmappedArray);
    return shim_mem_charged_free(TS_REC_MIPMAP, (uintptr_t)hMipmappedArray, undo_mipmap);
}
