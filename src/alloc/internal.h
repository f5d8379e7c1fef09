/*
 * internal.h - internal: what the allocator front (memalloc.c) and the
 * allocator implementations (tessera.c, pytorch.c) share: the table each
 * implementation fills, and the bookkeeping of the common statistics so
 * every allocator counts requested, allocated and reserved bytes the same way.
 */
#ifndef TS_ALLOC_INTERNAL_H
#define TS_ALLOC_INTERNAL_H

#include "alloc/dev.h"
#include "tessera/alloc.h"

struct ts_memalloc_impl_ops {
    int (*malloc)(void *impl, uint64_t size, uint64_t stream, uint64_t *ptr, ts_err *err);
    int (*free)(void *impl, uint64_t ptr, uint64_t stream, ts_err *err);
    int (*record_stream)(void *impl, uint64_t ptr, uint64_t stream, ts_err *err);
    int (*empty_cache)(void *impl, ts_err *err);
    uint64_t (*size_of)(const void *impl, uint64_t ptr);
    void (*destroy)(void *impl);
    /* optional (NULL: not supported) */
    int (*adopt_segment)(void *impl, uint64_t addr, uint64_t size, uint64_t stream, int small,
                         ts_err *err);
    int (*adopt_block)(void *impl, uint64_t addr, uint64_t size, uint64_t requested,
                       uint64_t stream, ts_err *err);
};

/* Each implementation's constructor: fills *ops and *impl; st is the front's
 * statistics block, which the implementation keeps current. */
int alloc_pt_new(const ts_memalloc_config *cfg, ts_memdev *dev, ts_memalloc_stats *st,
              const struct ts_memalloc_impl_ops **ops, void **impl, ts_err *err);
int alloc_tess_new(const ts_memalloc_config *cfg, ts_memdev *dev, ts_memalloc_stats *st,
                const struct ts_memalloc_impl_ops **ops, void **impl, ts_err *err);

/* record_stream's rule, the same in every allocator: stream joins the set
 * (*uses, *nuses) of the streams a block was used on unless it is the
 * block's own (own) or already there. who names the allocator in the
 * out-of-memory error. */
int alloc_uses_add(uint64_t **uses, int *nuses, uint64_t own, uint64_t stream, const char *who,
                   ts_err *err);

static inline void alloc_stats_alloc(ts_memalloc_stats *s, uint64_t requested, uint64_t allocated)
{
    s->requested_bytes += requested;
    s->allocated_bytes += allocated;
    s->live_allocs++;
    s->num_allocs++;
    if (s->requested_bytes > s->peak_requested_bytes)
        s->peak_requested_bytes = s->requested_bytes;
    if (s->allocated_bytes > s->peak_allocated_bytes)
        s->peak_allocated_bytes = s->allocated_bytes;
}

static inline void alloc_stats_free(ts_memalloc_stats *s, uint64_t requested, uint64_t allocated)
{
    s->requested_bytes -= requested;
    s->allocated_bytes -= allocated;
    s->live_allocs--;
    s->num_frees++;
}

static inline void alloc_stats_reserve(ts_memalloc_stats *s, int64_t delta)
{
    s->reserved_bytes = (uint64_t)((int64_t)s->reserved_bytes + delta);
    if (s->reserved_bytes > s->peak_reserved_bytes)
        s->peak_reserved_bytes = s->reserved_bytes;
}

#endif
