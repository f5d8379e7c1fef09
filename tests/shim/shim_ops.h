/*
 * shim_ops.h - every device-memory allocation path of the driver API as one
 * "allocate an object of kind K and size S / free it" pair, with the bytes
 * the fake driver takes for it (what the shim must charge), for the shim's
 * property test and its allocation storms.
 *
 * Sizes follow the fake (tests/fakes/README.md): everything rounds up to
 * OPS_GRAN_BYTES; pitched rows and array rows (W x channels x element) are
 * padded to OPS_PITCH_ALIGN_BYTES. Header-only, static, no global state.
 */
#ifndef TS_TEST_SHIM_OPS_H
#define TS_TEST_SHIM_OPS_H

#include <stdint.h>
#include <string.h>

#include "shim/cuda_api.h"

#define OPS_GRAN_BYTES (2ULL << 20)
#define OPS_PITCH_ALIGN_BYTES 1024ULL

enum ops_kind {
    OPS_MEM_ALLOC,
    OPS_MEM_ALLOC_PITCH,
    OPS_MEM_ALLOC_MANAGED,
    OPS_MEM_ALLOC_ASYNC,
    OPS_MEM_ALLOC_POOL_ASYNC,
    OPS_VMM,              /* create + reserve + map + set access; free: unmap, release */
    OPS_VMM_RELEASE_EARLY, /* free: release while mapped, then unmap */
    OPS_ARRAY,
    OPS_ARRAY3D,
    OPS_MIPMAP,
    OPS_KINDS,
};

static const char *const ops_kind_name[OPS_KINDS] = {
    "cuMemAlloc", "cuMemAllocPitch", "cuMemAllocManaged", "cuMemAllocAsync",
    "cuMemAllocFromPoolAsync", "cuMemCreate+map", "cuMemCreate+release-early",
    "cuArrayCreate", "cuArray3DCreate", "cuMipmappedArrayCreate",
};

struct ops_obj {
    int kind;
    uint64_t handle; /* pointer, VMM handle or array */
    uint64_t va;     /* VMM: reserved range */
    uint64_t span;   /* VMM: bytes mapped */
    uint64_t charge; /* what the driver takes */
};

static inline uint64_t ops_round(uint64_t v, uint64_t to) { return (v + to - 1) / to * to; }

/* Allocates one object; on success fills o (charge included). */
static inline CUresult ops_alloc(const struct cu_api *cu, int kind, uint64_t size, CUstream s,
                                 CUmemoryPool pool, struct ops_obj *o)
{
    memset(o, 0, sizeof *o);
    o->kind = kind;
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    CUdeviceptr p = 0;
    switch (kind) {
    case OPS_MEM_ALLOC:
        r = cu->cuMemAlloc_v2(&p, size);
        o->charge = ops_round(size, OPS_GRAN_BYTES);
        break;
    case OPS_MEM_ALLOC_PITCH: {
        size_t pitch = 0, w = size / 64 + 1;
        r = cu->cuMemAllocPitch_v2(&p, &pitch, w, 64, 4);
        o->charge = ops_round(ops_round(w, OPS_PITCH_ALIGN_BYTES) * 64, OPS_GRAN_BYTES);
        break;
    }
    case OPS_MEM_ALLOC_MANAGED:
        r = cu->cuMemAllocManaged(&p, size, TS_CU_MEM_ATTACH_GLOBAL);
        o->charge = ops_round(size, OPS_GRAN_BYTES);
        break;
    case OPS_MEM_ALLOC_ASYNC:
        r = cu->cuMemAllocAsync(&p, size, s);
        o->charge = ops_round(size, OPS_GRAN_BYTES);
        break;
    case OPS_MEM_ALLOC_POOL_ASYNC:
        r = cu->cuMemAllocFromPoolAsync(&p, size, pool, s);
        o->charge = ops_round(size, OPS_GRAN_BYTES);
        break;
    case OPS_VMM:
    case OPS_VMM_RELEASE_EARLY: {
        CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                    .location = {CU_MEM_LOCATION_TYPE_DEVICE, 0}};
        CUdevice dev = 0;
        cu->cuCtxGetDevice(&dev);
        prop.location.id = dev;
        uint64_t bytes = ops_round(size, OPS_GRAN_BYTES);
        o->charge = bytes;
        CUmemGenericAllocationHandle h = 0;
        r = cu->cuMemCreate(&h, bytes, &prop, 0);
        if (r != CUDA_SUCCESS)
            break;
        CUdeviceptr va = 0;
        CUmemAccessDesc acc = {.location = prop.location,
                               .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
        if (cu->cuMemAddressReserve(&va, bytes, 0, 0, 0) != CUDA_SUCCESS ||
            cu->cuMemMap(va, bytes, 0, h, 0) != CUDA_SUCCESS ||
            cu->cuMemSetAccess(va, bytes, &acc, 1) != CUDA_SUCCESS) {
            cu->cuMemRelease(h);
            return CUDA_ERROR_UNKNOWN; /* the fake refused a valid sequence */
        }
        ((volatile char *)(uintptr_t)va)[bytes - 1] = 1; /* it is memory */
        p = h;
        o->va = va;
        o->span = bytes;
        break;
    }
    case OPS_ARRAY: {
        CUDA_ARRAY_DESCRIPTOR d = {.Width = size / 4096 + 1, .Height = 1024,
                                   .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 1};
        CUarray a = NULL;
        r = cu->cuArrayCreate_v2(&a, &d);
        p = (uintptr_t)a;
        o->charge = ops_round(ops_round((uint64_t)d.Width * 4, OPS_PITCH_ALIGN_BYTES) * 1024,
                              OPS_GRAN_BYTES);
        break;
    }
    case OPS_ARRAY3D: {
        CUDA_ARRAY3D_DESCRIPTOR d = {.Width = size / 8192 + 1, .Height = 256, .Depth = 4,
                                     .Format = CU_AD_FORMAT_HALF, .NumChannels = 4};
        CUarray a = NULL;
        r = cu->cuArray3DCreate_v2(&a, &d);
        p = (uintptr_t)a;
        o->charge = ops_round(ops_round((uint64_t)d.Width * 2 * 4, OPS_PITCH_ALIGN_BYTES) * 256 * 4,
                              OPS_GRAN_BYTES);
        break;
    }
    case OPS_MIPMAP: {
        CUDA_ARRAY3D_DESCRIPTOR d = {.Width = size / 1024 + 1, .Height = 1024,
                                     .Format = CU_AD_FORMAT_UNSIGNED_INT8, .NumChannels = 1};
        CUmipmappedArray m = NULL;
        r = cu->cuMipmappedArrayCreate(&m, &d, 3);
        p = (uintptr_t)m;
        uint64_t w = d.Width, h = 1024, sum = 0;
        for (int l = 0; l < 3; l++) {
            sum += ops_round(w, OPS_PITCH_ALIGN_BYTES) * h;
            w = w > 1 ? w / 2 : 1;
            h = h > 1 ? h / 2 : 1;
        }
        o->charge = ops_round(sum, OPS_GRAN_BYTES);
        break;
    }
    }
    o->handle = p;
    return r;
}

/* The first half of freeing an OPS_VMM_RELEASE_EARLY object: the handle is
 * released while still mapped, so the memory (and its charge) must stay. */
static inline CUresult ops_release_early(const struct cu_api *cu, struct ops_obj *o)
{
    CUresult r = cu->cuMemRelease(o->handle);
    if (r == CUDA_SUCCESS)
        o->kind = OPS_KINDS; /* now only the unmap is left */
    return r;
}

static inline CUresult ops_free(const struct cu_api *cu, const struct ops_obj *o, CUstream s)
{
    if (o->kind == OPS_KINDS) { /* released early: unmapping frees it */
        CUresult r = cu->cuMemUnmap(o->va, o->span);
        CUresult r2 = cu->cuMemAddressFree(o->va, o->span);
        return r != CUDA_SUCCESS ? r : r2;
    }
    switch (o->kind) {
    case OPS_MEM_ALLOC:
    case OPS_MEM_ALLOC_PITCH:
    case OPS_MEM_ALLOC_MANAGED:
        return cu->cuMemFree_v2(o->handle);
    case OPS_MEM_ALLOC_ASYNC:
    case OPS_MEM_ALLOC_POOL_ASYNC: {
        /* the pool keeps the memory cached until a synchronisation gives back
         * what exceeds its release threshold (0 here) */
        CUresult r = cu->cuMemFreeAsync(o->handle, s);
        CUresult r2 = cu->cuStreamSynchronize(s);
        return r != CUDA_SUCCESS ? r : r2;
    }
    case OPS_VMM: {
        CUresult r = cu->cuMemUnmap(o->va, o->span);
        CUresult r2 = cu->cuMemRelease(o->handle);
        CUresult r3 = cu->cuMemAddressFree(o->va, o->span);
        return r != CUDA_SUCCESS ? r : r2 != CUDA_SUCCESS ? r2 : r3;
    }
    case OPS_VMM_RELEASE_EARLY: {
        CUresult r = cu->cuMemRelease(o->handle);
        CUresult r2 = cu->cuMemUnmap(o->va, o->span);
        CUresult r3 = cu->cuMemAddressFree(o->va, o->span);
        return r != CUDA_SUCCESS ? r : r2 != CUDA_SUCCESS ? r2 : r3;
    }
    case OPS_ARRAY:
    case OPS_ARRAY3D:
        return cu->cuArrayDestroy((CUarray)(uintptr_t)o->handle);
    case OPS_MIPMAP:
        return cu->cuMipmappedArrayDestroy((CUmipmappedArray)(uintptr_t)o->handle);
    }
    return CUDA_ERROR_INVALID_VALUE;
}

#endif
