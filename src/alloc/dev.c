/*
 * dev.c - ts_memdev: the counted wrappers over a backend's ops table and the
 * device-level public functions of alloc.h. Counting lives here, not in the
 * backends, so the simulated device and the CUDA driver report the same
 * figures for the same sequence of calls.
 */
#include "alloc/dev.h"

#include <stdlib.h>
#include <string.h>

static const char *const call_names[TS_MEMDEV_NCALLS] = {
    "malloc", "free", "reserve", "unreserve", "create", "release", "map",
    "unmap",  "set_access", "event_record", "event_query", "sync", "wait",
};

const char *ts_memdev_call_name(int call)
{
    return call >= 0 && call < TS_MEMDEV_NCALLS ? call_names[call] : "?";
}

uint64_t ts_memdev_stats_vmm_calls(const ts_memdev_stats *s)
{
    return s->calls[TS_MEMDEV_MALLOC] + s->calls[TS_MEMDEV_FREE] + s->calls[TS_MEMDEV_CREATE] +
           s->calls[TS_MEMDEV_RELEASE] + s->calls[TS_MEMDEV_MAP] + s->calls[TS_MEMDEV_UNMAP];
}

int alloc_memdev_wrap(const struct ts_memdev_ops *ops, void *impl, uint64_t capacity_bytes,
                   int is_sim, ts_memdev **out, ts_err *err)
{
    *out = NULL;
    ts_memdev *d = calloc(1, sizeof *d);
    if (!d) {
        ops->destroy(impl);
        return ts_err_set(err, TS_ENOMEM, "memdev: out of memory");
    }
    d->ops = ops;
    d->impl = impl;
    d->st.capacity_bytes = capacity_bytes;
    d->is_sim = is_sim;
    *out = d;
    return 0;
}

void ts_memdev_free(ts_memdev *d)
{
    if (!d)
        return;
    d->ops->destroy(d->impl);
    free(d);
}

void ts_memdev_get_stats(const ts_memdev *d, ts_memdev_stats *out)
{
    *out = d->st;
}

const char *ts_memdev_name(const ts_memdev *d)
{
    return d->ops->name;
}

void alloc_memdev_note_used(ts_memdev *d, int64_t delta)
{
    d->st.used_bytes = (uint64_t)((int64_t)d->st.used_bytes + delta);
    if (d->st.used_bytes > d->st.peak_used_bytes)
        d->st.peak_used_bytes = d->st.used_bytes;
}

/* A device call's result rc, its change of the memory in use (delta bytes)
 * noted where it succeeded. */
static int alloc_memdev_used_if(ts_memdev *d, int rc, int64_t delta)
{
    if (rc == 0)
        alloc_memdev_note_used(d, delta);
    return rc;
}

int alloc_memdev_mem_alloc(ts_memdev *d, uint64_t size, uint64_t *ptr, ts_err *err)
{
    d->st.calls[TS_MEMDEV_MALLOC]++;
    return alloc_memdev_used_if(d, d->ops->mem_alloc(d->impl, size, ptr, err), (int64_t)size);
}

int alloc_memdev_mem_free(ts_memdev *d, uint64_t ptr, uint64_t size, ts_err *err)
{
    d->st.calls[TS_MEMDEV_FREE]++;
    return alloc_memdev_used_if(d, d->ops->mem_free(d->impl, ptr, size, err), -(int64_t)size);
}

int alloc_memdev_va_reserve(ts_memdev *d, uint64_t size, uint64_t align, uint64_t *va, ts_err *err)
{
    d->st.calls[TS_MEMDEV_RESERVE]++;
    return d->ops->va_reserve(d->impl, size, align, va, err);
}

int alloc_memdev_va_free(ts_memdev *d, uint64_t va, uint64_t size, ts_err *err)
{
    d->st.calls[TS_MEMDEV_UNRESERVE]++;
    return d->ops->va_free(d->impl, va, size, err);
}

int alloc_memdev_create(ts_memdev *d, uint64_t size, uint64_t *handle, ts_err *err)
{
    d->st.calls[TS_MEMDEV_CREATE]++;
    return alloc_memdev_used_if(d, d->ops->create(d->impl, size, handle, err), (int64_t)size);
}

int alloc_memdev_release(ts_memdev *d, uint64_t handle, uint64_t size, ts_err *err)
{
    d->st.calls[TS_MEMDEV_RELEASE]++;
    return alloc_memdev_used_if(d, d->ops->release(d->impl, handle, size, err), -(int64_t)size);
}

int alloc_memdev_map(ts_memdev *d, uint64_t va, uint64_t size, uint64_t handle, ts_err *err)
{
    d->st.calls[TS_MEMDEV_MAP]++;
    return d->ops->map(d->impl, va, size, handle, err);
}

int alloc_memdev_unmap(ts_memdev *d, uint64_t va, uint64_t size, ts_err *err)
{
    d->st.calls[TS_MEMDEV_UNMAP]++;
    return d->ops->unmap(d->impl, va, size, err);
}

int alloc_memdev_set_access(ts_memdev *d, uint64_t va, uint64_t size, ts_err *err)
{
    d->st.calls[TS_MEMDEV_SET_ACCESS]++;
    return d->ops->set_access(d->impl, va, size, err);
}

int alloc_memdev_event_record(ts_memdev *d, uint64_t stream, uint64_t *event, ts_err *err)
{
    d->st.calls[TS_MEMDEV_EVENT_RECORD]++;
    return d->ops->event_record(d->impl, stream, event, err);
}

int alloc_memdev_event_query(ts_memdev *d, uint64_t event, int *done, ts_err *err)
{
    d->st.calls[TS_MEMDEV_EVENT_QUERY]++;
    return d->ops->event_query(d->impl, event, done, err);
}

int alloc_memdev_event_sync(ts_memdev *d, uint64_t event, ts_err *err)
{
    d->st.calls[TS_MEMDEV_STREAM_SYNC]++;
    return d->ops->event_sync(d->impl, event, err);
}

void alloc_memdev_event_release(ts_memdev *d, uint64_t event)
{
    d->ops->event_release(d->impl, event);
}

int alloc_memdev_stream_sync(ts_memdev *d, uint64_t stream, ts_err *err)
{
    d->st.calls[TS_MEMDEV_STREAM_SYNC]++;
    return d->ops->stream_sync(d->impl, stream, err);
}

int alloc_memdev_stream_wait(ts_memdev *d, uint64_t stream, uint64_t event, ts_err *err)
{
    d->st.calls[TS_MEMDEV_STREAM_WAIT]++;
    return d->ops->stream_wait(d->impl, stream, event, err);
}
