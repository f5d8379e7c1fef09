/*
 * pluggable.c - libtessera-alloc as a PyTorch pluggable allocator: the entry
 * points torch.cuda.memory.CUDAPluggableAllocator loads from a shared library
 * (docs/allocator.md, "In PyTorch"), over the tessera allocator on the CUDA
 * driver backend.
 *
 * PyTorch calls tessera_alloc(size, device, stream) and tessera_free(ptr,
 * size, device, stream) from any thread; each device gets its own allocator,
 * created at its first allocation, with a lock of its own. Its capacity is the
 * tenant's quota as libtessera-cuda applies it (TESSERA_CUDA_MEM_LIMIT less
 * the context charge), else the device's memory, so the allocator runs out
 * where the shim would. Memory is stream-ordered: a free on the stream of the
 * allocation is reusable there at once; a free on another stream also waits
 * for that stream's work (recorded as a stream use). tessera_empty_cache is
 * the hook for torch.cuda.empty_cache. Failures return NULL / do nothing and
 * leave a message for tessera_alloc_last_error() (the calling thread's last
 * alloc or free, empty after a success); nothing prints.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>

#include "alloc/ptrmap.h"
#include "tessera/alloc.h"

#define PLUG_EXPORT __attribute__((visibility("default")))
#define PLUG_MAX_DEVICES 64 /* a device ordinal at or above this is refused */

typedef struct CUstream_st *cudaStream_t; /* the runtime's type is the driver's CUstream */

typedef struct plug_dev {
    pthread_mutex_t lock;
    int ready;              /* dev and a exist */
    ts_memdev *dev;
    ts_memalloc *a;
    ts_ptrmap streams;      /* live pointer -> its allocation stream, when not 0 */
} plug_dev;

static pthread_mutex_t plug_init_lock = PTHREAD_MUTEX_INITIALIZER;
static plug_dev plug_devs[PLUG_MAX_DEVICES];
static int plug_locks_made;
static _Thread_local char plug_last_error[256];

__attribute__((format(printf, 1, 2))) static void plug_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(plug_last_error, sizeof plug_last_error, fmt, ap);
    va_end(ap);
}

/* Device i's state where it was made (its allocator is live), else NULL:
 * what the calls for every device visit. */
static plug_dev *plug_ready(int i)
{
    pthread_mutex_lock(&plug_init_lock);
    int ready = plug_devs[i].ready;
    pthread_mutex_unlock(&plug_init_lock);
    return ready ? &plug_devs[i] : NULL;
}

/* The device's state, created on first use; NULL with the reason recorded. */
static plug_dev *plug_get(int device, int create)
{
    if (device < 0 || device >= PLUG_MAX_DEVICES) {
        plug_fail("device %d: not a device ordinal below %d", device, PLUG_MAX_DEVICES);
        return NULL;
    }
    plug_dev *d = &plug_devs[device];
    pthread_mutex_lock(&plug_init_lock);
    if (!plug_locks_made) {
        for (int i = 0; i < PLUG_MAX_DEVICES; i++)
            pthread_mutex_init(&plug_devs[i].lock, NULL);
        plug_locks_made = 1;
    }
    if (!d->ready && create) {
        ts_err err = {0, ""};
        uint64_t quota = 0;
        int rc = ts_memalloc_quota_from_env(device, &quota, &err);
        if (rc != 0 && rc != TS_ENOENT) {
            plug_fail("tessera_alloc: %s (device %d)", err.msg, device);
            pthread_mutex_unlock(&plug_init_lock);
            return NULL;
        }
        if (ts_memdev_cuda_new(NULL, device, &d->dev, &err) != 0) {
            plug_fail("tessera_alloc: %s (device %d)", err.msg, device);
            pthread_mutex_unlock(&plug_init_lock);
            return NULL;
        }
        ts_memalloc_config cfg = {.kind = TS_MEMALLOC_TESSERA, .capacity_bytes = quota};
        if (ts_memalloc_new(&cfg, d->dev, &d->a, &err) != 0) {
            plug_fail("tessera_alloc: %s (device %d)", err.msg, device);
            ts_memdev_free(d->dev);
            d->dev = NULL;
            pthread_mutex_unlock(&plug_init_lock);
            return NULL;
        }
        alloc_ptrmap_init(&d->streams);
        d->ready = 1;
    }
    int ready = d->ready;
    pthread_mutex_unlock(&plug_init_lock);
    if (!ready && !create)
        plug_fail("device %d: nothing was allocated on it", device);
    return ready ? d : NULL;
}

PLUG_EXPORT void *tessera_alloc(ssize_t size, int device, cudaStream_t stream)
{
    plug_last_error[0] = 0;
    if (size <= 0)
        return NULL; /* PyTorch asks nothing of a zero-size tensor's storage */
    plug_dev *d = plug_get(device, 1);
    if (!d)
        return NULL;
    ts_err err = {0, ""};
    uint64_t p = 0, s = (uint64_t)(uintptr_t)stream;
    pthread_mutex_lock(&d->lock);
    int rc = ts_memalloc_malloc(d->a, (uint64_t)size, s, &p, &err);
    if (rc == 0 && s != 0 && alloc_ptrmap_put(&d->streams, p, (void *)stream) != 0) {
        ts_memalloc_free(d->a, p, s, &err);
        snprintf(err.msg, sizeof err.msg, "out of host memory for the pointer table");
        rc = TS_ENOMEM;
    }
    pthread_mutex_unlock(&d->lock);
    if (rc != 0) {
        plug_fail("tessera_alloc: %s (size %ld)", err.msg, (long)size);
        return NULL;
    }
    return (void *)(uintptr_t)p;
}

PLUG_EXPORT void tessera_free(void *ptr, ssize_t size, int device, cudaStream_t stream)
{
    (void)size; /* the allocator knows each block's size */
    plug_last_error[0] = 0;
    if (!ptr)
        return;
    plug_dev *d = plug_get(device, 0);
    if (!d)
        return;
    ts_err err = {0, ""};
    uint64_t p = (uint64_t)(uintptr_t)ptr, s = (uint64_t)(uintptr_t)stream;
    pthread_mutex_lock(&d->lock);
    int rc = TS_EINVAL;
    if (ts_memalloc_size_of(d->a, p) == 0) {
        snprintf(err.msg, sizeof err.msg, "ptr: not a live allocation of this device");
    } else {
        uint64_t home = (uint64_t)(uintptr_t)alloc_ptrmap_del(&d->streams, p);
        /* freed on another stream than its own: its memory also waits for
         * the work queued on that stream */
        rc = s != home ? ts_memalloc_record_stream(d->a, p, s, &err) : 0;
        if (rc == 0)
            rc = ts_memalloc_free(d->a, p, home, &err);
    }
    pthread_mutex_unlock(&d->lock);
    if (rc != 0)
        plug_fail("tessera_free: %s (device %d)", err.msg, device);
}

/* One device's part of a call for every device, under its lock; *mine set
 * where this device held what the call was about (the visit then stops). */
typedef int (*plug_op)(plug_dev *d, void *ctx, bool *mine, ts_err *err);

/* Runs op on every ready device in turn, each failure recorded naming the
 * call (what) and the device. Whether a device said the call was its own. */
static bool plug_each(const char *what, plug_op op, void *ctx)
{
    for (int i = 0; i < PLUG_MAX_DEVICES; i++) {
        plug_dev *d = plug_ready(i);
        if (!d)
            continue;
        ts_err err = {0, ""};
        bool mine = false;
        pthread_mutex_lock(&d->lock);
        int rc = op(d, ctx, &mine, &err);
        pthread_mutex_unlock(&d->lock);
        if (rc != 0)
            plug_fail("%s: %s (device %d)", what, err.msg, i);
        if (mine)
            return true;
    }
    return false;
}

/* ctx: the pointer and the stream, as two uint64_t */
static int plug_record_op(plug_dev *d, void *ctx, bool *mine, ts_err *err)
{
    const uint64_t *ptr_stream = ctx;
    *mine = ts_memalloc_size_of(d->a, ptr_stream[0]) != 0;
    return *mine ? ts_memalloc_record_stream(d->a, ptr_stream[0], ptr_stream[1], err) : 0;
}

PLUG_EXPORT void tessera_record_stream(void *ptr, cudaStream_t stream)
{
    uint64_t ptr_stream[2] = {(uint64_t)(uintptr_t)ptr, (uint64_t)(uintptr_t)stream};
    if (!plug_each("tessera_record_stream", plug_record_op, ptr_stream))
        plug_fail("tessera_record_stream: ptr 0x%llx is not a live allocation",
                  (unsigned long long)ptr_stream[0]);
}

static int plug_empty_op(plug_dev *d, void *ctx, bool *mine, ts_err *err)
{
    (void)ctx;
    (void)mine;
    return ts_memalloc_empty_cache(d->a, err);
}

PLUG_EXPORT void tessera_empty_cache(void)
{
    plug_each("tessera_empty_cache", plug_empty_op, NULL);
}

PLUG_EXPORT int tessera_alloc_stats(int device, ts_memalloc_stats *out)
{
    plug_dev *d = plug_get(device, 0);
    if (!d || !out)
        return -1;
    pthread_mutex_lock(&d->lock);
    ts_memalloc_get_stats(d->a, out);
    pthread_mutex_unlock(&d->lock);
    return 0;
}

PLUG_EXPORT const char *tessera_alloc_last_error(void)
{
    return plug_last_error;
}

PLUG_EXPORT void tessera_alloc_shutdown(void)
{
    for (int i = 0; i < PLUG_MAX_DEVICES; i++) {
        plug_dev *d = &plug_devs[i];
        pthread_mutex_lock(&plug_init_lock);
        if (d->ready) {
            pthread_mutex_lock(&d->lock);
            ts_memalloc_destroy(d->a);
            ts_memdev_free(d->dev);
            alloc_ptrmap_destroy(&d->streams);
            d->a = NULL;
            d->dev = NULL;
            d->ready = 0;
            pthread_mutex_unlock(&d->lock);
        }
        pthread_mutex_unlock(&plug_init_lock);
    }
}
