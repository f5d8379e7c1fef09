/*
 * dev.h - internal: the device ops table behind ts_memdev and the counted
 * calls the allocators make through it.
 *
 * A backend fills struct ts_memdev_ops (dev_sim.c: the simulated device;
 * dev_cuda.c: the CUDA driver) and alloc_memdev_wrap makes the device. The
 * allocators never call the ops directly: every ts_memdev_* wrapper below
 * counts the call (ts_memdev_stats.calls) and keeps the physical bytes held,
 * so both backends are measured identically. Each call returns 0, TS_ENOSPC
 * when the device is out of memory (create, mem_alloc), or another TS_E* code
 * with err filled. Sizes given to release and mem_free are those of the
 * create / mem_alloc they undo.
 */
#ifndef TS_ALLOC_DEV_H
#define TS_ALLOC_DEV_H

#include <stdint.h>

#include "tessera/alloc.h"

struct ts_memdev_ops {
    const char *name;
    int (*mem_alloc)(void *impl, uint64_t size, uint64_t *ptr, ts_err *err);
    int (*mem_free)(void *impl, uint64_t ptr, uint64_t size, ts_err *err);
    int (*va_reserve)(void *impl, uint64_t size, uint64_t align, uint64_t *va, ts_err *err);
    int (*va_free)(void *impl, uint64_t va, uint64_t size, ts_err *err);
    int (*create)(void *impl, uint64_t size, uint64_t *handle, ts_err *err);
    int (*release)(void *impl, uint64_t handle, uint64_t size, ts_err *err);
    int (*map)(void *impl, uint64_t va, uint64_t size, uint64_t handle, ts_err *err);
    int (*unmap)(void *impl, uint64_t va, uint64_t size, ts_err *err);
    int (*set_access)(void *impl, uint64_t va, uint64_t size, ts_err *err);
    /* an event (taken from the backend's pool) recorded on stream */
    int (*event_record)(void *impl, uint64_t stream, uint64_t *event, ts_err *err);
    int (*event_query)(void *impl, uint64_t event, int *done, ts_err *err);
    int (*event_sync)(void *impl, uint64_t event, ts_err *err);
    void (*event_release)(void *impl, uint64_t event); /* back to the pool; not a call */
    int (*stream_sync)(void *impl, uint64_t stream, ts_err *err);
    int (*stream_wait)(void *impl, uint64_t stream, uint64_t event, ts_err *err);
    void (*destroy)(void *impl);
};

struct ts_memdev {
    const struct ts_memdev_ops *ops;
    void *impl;
    ts_memdev_stats st;
    int is_sim;
};

/* Takes ownership of impl (ops->destroy frees it, also on failure). */
int alloc_memdev_wrap(const struct ts_memdev_ops *ops, void *impl, uint64_t capacity_bytes,
                   int is_sim, ts_memdev **out, ts_err *err);

int alloc_memdev_mem_alloc(ts_memdev *d, uint64_t size, uint64_t *ptr, ts_err *err);
int alloc_memdev_mem_free(ts_memdev *d, uint64_t ptr, uint64_t size, ts_err *err);
int alloc_memdev_va_reserve(ts_memdev *d, uint64_t size, uint64_t align, uint64_t *va, ts_err *err);
int alloc_memdev_va_free(ts_memdev *d, uint64_t va, uint64_t size, ts_err *err);
int alloc_memdev_create(ts_memdev *d, uint64_t size, uint64_t *handle, ts_err *err);
int alloc_memdev_release(ts_memdev *d, uint64_t handle, uint64_t size, ts_err *err);
int alloc_memdev_map(ts_memdev *d, uint64_t va, uint64_t size, uint64_t handle, ts_err *err);
int alloc_memdev_unmap(ts_memdev *d, uint64_t va, uint64_t size, ts_err *err);
int alloc_memdev_set_access(ts_memdev *d, uint64_t va, uint64_t size, ts_err *err);
int alloc_memdev_event_record(ts_memdev *d, uint64_t stream, uint64_t *event, ts_err *err);
int alloc_memdev_event_query(ts_memdev *d, uint64_t event, int *done, ts_err *err);
int alloc_memdev_event_sync(ts_memdev *d, uint64_t event, ts_err *err);
void alloc_memdev_event_release(ts_memdev *d, uint64_t event);
int alloc_memdev_stream_sync(ts_memdev *d, uint64_t stream, ts_err *err);
int alloc_memdev_stream_wait(ts_memdev *d, uint64_t stream, uint64_t event, ts_err *err);

/* The backend's own memory counting for adopted segments (sim only). */
void alloc_memdev_note_used(ts_memdev *d, int64_t delta);

#endif
