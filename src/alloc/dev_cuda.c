/*
 * dev_cuda.c - the CUDA driver backend: the ops of dev.h on the driver's
 * virtual memory management API (cuMemAddressReserve, cuMemCreate, cuMemMap,
 * cuMemSetAccess, ...) and cuMemAlloc, loaded with dlopen so the library
 * builds and runs where no driver is installed (the open then fails with a
 * message). Tests point it at the fake libcuda built by the shim's tests.
 *
 * The device's primary context is retained and made current at open; each
 * call maps the driver's CUresult to TS_ENOSPC (out of memory) or TS_EIO with
 * the driver's name for the error. Events come from a pool of
 * TS_CU_EVENT_DISABLE_TIMING events, handed out as 1-based indices. Streams are
 * the caller's CUstream handles passed as integers.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/cuda_api.h"
#include "alloc/dev.h"

#define CUDA_DEFAULT_LIBRARY "libcuda.so.1"

#define TS_CUDA_FN_TYPE(name, req, args) typedef CUresult(*name##_fn) args;
TS_CUDA_FUNCS(TS_CUDA_FN_TYPE)
#undef TS_CUDA_FN_TYPE

typedef struct cuda {
    void *dl;
    char path[256];
#define TS_CUDA_FIELD(name, req, args) name##_fn name;
    TS_CUDA_FUNCS(TS_CUDA_FIELD)
#undef TS_CUDA_FIELD
    CUdevice dev;
    int ordinal;
    int ctx_retained;
    CUmemAllocationProp prop;
    CUevent *ev;
    size_t nev, capev;
    uint64_t *evfree;
    size_t nevfree;
} cuda;

static const char *cu_name(cuda *c, CUresult r)
{
    const char *s = NULL;
    if (c->cuGetErrorString && c->cuGetErrorString(r, &s) == CUDA_SUCCESS && s)
        return s;
    return "unknown CUDA error";
}

static int cu_fail(cuda *c, ts_err *err, const char *call, CUresult r)
{
    if (r == CUDA_ERROR_OUT_OF_MEMORY)
        return ts_err_set(err, TS_ENOSPC, "cuda: %s: out of memory", call);
    return ts_err_set(err, TS_EIO, "cuda: %s failed: %s (%d)", call, cu_name(c, r), (int)r);
}

#define CU_CALL(c, err, fn, ...)                              \
    do {                                                      \
        CUresult r_ = (c)->fn(__VA_ARGS__);                   \
        if (r_ != CUDA_SUCCESS)                               \
            return cu_fail((c), (err), #fn, r_);              \
    } while (0)

static int cu_mem_alloc(void *impl, uint64_t size, uint64_t *ptr, ts_err *err)
{
    cuda *c = impl;
    CUdeviceptr p = 0;
    CU_CALL(c, err, cuMemAlloc_v2, &p, (size_t)size);
    *ptr = p;
    return 0;
}

static int cu_mem_free(void *impl, uint64_t ptr, uint64_t size, ts_err *err)
{
    cuda *c = impl;
    (void)size;
    CU_CALL(c, err, cuMemFree_v2, (CUdeviceptr)ptr);
    return 0;
}

static int cu_va_reserve(void *impl, uint64_t size, uint64_t align, uint64_t *va, ts_err *err)
{
    cuda *c = impl;
    CUdeviceptr p = 0;
    CU_CALL(c, err, cuMemAddressReserve, &p, (size_t)size, (size_t)align, 0, 0);
    *va = p;
    return 0;
}

static int cu_va_free(void *impl, uint64_t va, uint64_t size, ts_err *err)
{
    cuda *c = impl;
    CU_CALL(c, err, cuMemAddressFree, (CUdeviceptr)va, (size_t)size);
    return 0;
}

static int cu_create(void *impl, uint64_t size, uint64_t *handle, ts_err *err)
{
    cuda *c = impl;
    CUmemGenericAllocationHandle h = 0;
    CU_CALL(c, err, cuMemCreate, &h, (size_t)size, &c->prop, 0);
    *handle = h;
    return 0;
}

static int cu_release(void *impl, uint64_t handle, uint64_t size, ts_err *err)
{
    cuda *c = impl;
    (void)size;
    CU_CALL(c, err, cuMemRelease, (CUmemGenericAllocationHandle)handle);
    return 0;
}

static int cu_map(void *impl, uint64_t va, uint64_t size, uint64_t handle, ts_err *err)
{
    cuda *c = impl;
    CU_CALL(c, err, cuMemMap, (CUdeviceptr)va, (size_t)size, 0,
            (CUmemGenericAllocationHandle)handle, 0);
    return 0;
}

static int cu_unmap(void *impl, uint64_t va, uint64_t size, ts_err *err)
{
    cuda *c = impl;
    CU_CALL(c, err, cuMemUnmap, (CUdeviceptr)va, (size_t)size);
    return 0;
}

static int cu_set_access(void *impl, uint64_t va, uint64_t size, ts_err *err)
{
    cuda *c = impl;
    CUmemAccessDesc d;
    memset(&d, 0, sizeof d);
    d.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    d.location.id = c->ordinal;
    d.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CU_CALL(c, err, cuMemSetAccess, (CUdeviceptr)va, (size_t)size, &d, 1);
    return 0;
}

static CUstream as_stream(uint64_t s)
{
    return (CUstream)(uintptr_t)s;
}

static int cu_event_record(void *impl, uint64_t stream, uint64_t *event, ts_err *err)
{
    cuda *c = impl;
    uint64_t idx;
    if (c->nevfree) {
        idx = c->evfree[--c->nevfree];
    } else {
        if (c->nev == c->capev) {
            size_t nc = c->capev ? c->capev * 2 : 32;
            CUevent *ne = realloc(c->ev, nc * sizeof *ne);
            uint64_t *nf = realloc(c->evfree, nc * sizeof *nf);
            if (ne)
                c->ev = ne;
            if (nf)
                c->evfree = nf;
            if (!ne || !nf)
                return ts_err_set(err, TS_ENOMEM, "cuda: out of host memory");
            c->capev = nc;
        }
        CUevent e = NULL;
        CU_CALL(c, err, cuEventCreate, &e, TS_CU_EVENT_DISABLE_TIMING);
        idx = c->nev;
        c->ev[c->nev++] = e;
    }
    CUresult r = c->cuEventRecord(c->ev[idx], as_stream(stream));
    if (r != CUDA_SUCCESS) {
        c->evfree[c->nevfree++] = idx;
        return cu_fail(c, err, "cuEventRecord", r);
    }
    *event = idx + 1;
    return 0;
}

static int cu_event_query(void *impl, uint64_t event, int *done, ts_err *err)
{
    cuda *c = impl;
    CUresult r = c->cuEventQuery(c->ev[event - 1]);
    if (r == CUDA_SUCCESS || r == CUDA_ERROR_NOT_READY) {
        *done = r == CUDA_SUCCESS;
        return 0;
    }
    return cu_fail(c, err, "cuEventQuery", r);
}

static int cu_event_sync(void *impl, uint64_t event, ts_err *err)
{
    cuda *c = impl;
    CU_CALL(c, err, cuEventSynchronize, c->ev[event - 1]);
    return 0;
}

static void cu_event_release(void *impl, uint64_t event)
{
    cuda *c = impl;
    if (event && event <= c->nev)
        c->evfree[c->nevfree++] = event - 1;
}

static int cu_stream_sync(void *impl, uint64_t stream, ts_err *err)
{
    cuda *c = impl;
    CU_CALL(c, err, cuStreamSynchronize, as_stream(stream));
    return 0;
}

static int cu_stream_wait(void *impl, uint64_t stream, uint64_t event, ts_err *err)
{
    cuda *c = impl;
    CU_CALL(c, err, cuStreamWaitEvent, as_stream(stream), c->ev[event - 1], 0);
    return 0;
}

static void cu_destroy(void *impl)
{
    cuda *c = impl;
    if (!c)
        return;
    for (size_t i = 0; i < c->nev; i++)
        if (c->cuEventDestroy_v2)
            c->cuEventDestroy_v2(c->ev[i]);
    if (c->ctx_retained && c->cuDevicePrimaryCtxRelease_v2)
        c->cuDevicePrimaryCtxRelease_v2(c->dev);
    if (c->dl)
        dlclose(c->dl);
    free(c->ev);
    free(c->evfree);
    free(c);
}

static const struct ts_memdev_ops cuda_ops = {
    .name = "cuda",
    .mem_alloc = cu_mem_alloc,
    .mem_free = cu_mem_free,
    .va_reserve = cu_va_reserve,
    .va_free = cu_va_free,
    .create = cu_create,
    .release = cu_release,
    .map = cu_map,
    .unmap = cu_unmap,
    .set_access = cu_set_access,
    .event_record = cu_event_record,
    .event_query = cu_event_query,
    .event_sync = cu_event_sync,
    .event_release = cu_event_release,
    .stream_sync = cu_stream_sync,
    .stream_wait = cu_stream_wait,
    .destroy = cu_destroy,
};

/* dlsym gives void *; ISO C has no conversion to a function pointer. */
static void store_fn(void *slot, void *sym)
{
    _Static_assert(sizeof(void (*)(void)) == sizeof(void *), "function pointers fit void *");
    memcpy(slot, &sym, sizeof sym);
}

static int cu_open(cuda *c, const char *path, int ordinal, uint64_t *total, ts_err *err)
{
    /* never unloaded: a driver keeps process-wide state (the real one, and
     * the fake, whose memory would otherwise look leaked) */
    c->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (!c->dl) {
        const char *why = dlerror();
        return ts_err_set(err, TS_ENOENT, "cuda: cannot load %s: %s", path,
                          why ? why : "unknown dlopen error");
    }
#define TS_CUDA_RESOLVE(name, req, args)                                                    \
    {                                                                                       \
        void *sym = dlsym(c->dl, #name);                                                    \
        if (!sym && (req))                                                                  \
            return ts_err_set(err, TS_EIO, "cuda: %s lacks %s", path, #name);               \
        if (sym)                                                                            \
            store_fn(&c->name, sym);                                                        \
    }
    TS_CUDA_FUNCS(TS_CUDA_RESOLVE)
#undef TS_CUDA_RESOLVE
    CU_CALL(c, err, cuInit, 0);
    CU_CALL(c, err, cuDeviceGet, &c->dev, ordinal);
    CUcontext ctx = NULL;
    CU_CALL(c, err, cuDevicePrimaryCtxRetain, &ctx, c->dev);
    c->ctx_retained = 1;
    CU_CALL(c, err, cuCtxSetCurrent, ctx);
    size_t bytes = 0;
    CU_CALL(c, err, cuDeviceTotalMem_v2, &bytes, c->dev);
    c->ordinal = ordinal;
    memset(&c->prop, 0, sizeof c->prop);
    c->prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    c->prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE;
    c->prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    c->prop.location.id = ordinal;
    size_t gran = 0;
    CU_CALL(c, err, cuMemGetAllocationGranularity, &gran, &c->prop,
            CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    if (!gran || TS_MEM_GRANULE_BYTES % gran)
        return ts_err_set(err, TS_EIO, "cuda: granularity %zu does not divide the 2 MiB granule",
                          gran);
    *total = bytes;
    return 0;
}

int ts_memdev_cuda_new(const char *library, int ordinal, ts_memdev **out, ts_err *err)
{
    *out = NULL;
    if (!library || !*library)
        library = getenv(TS_MEMDEV_CUDA_LIBRARY_ENV);
    if (!library || !*library)
        library = CUDA_DEFAULT_LIBRARY;
    cuda *c = calloc(1, sizeof *c);
    if (!c)
        return ts_err_set(err, TS_ENOMEM, "cuda: out of memory");
    snprintf(c->path, sizeof c->path, "%s", library);
    uint64_t total = 0;
    int rc = cu_open(c, library, ordinal, &total, err);
    if (rc != 0) {
        cu_destroy(c);
        return rc;
    }
    return alloc_memdev_wrap(&cuda_ops, c, total, 0, out, err);
}
