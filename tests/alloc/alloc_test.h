/*
 * alloc_test.h - helpers shared by the allocator tests: a bounded random
 * alloc/free workload that checks, after every call, the properties every
 * allocator must keep, on any device (simulated with host memory behind it,
 * or the CUDA backend over the fake libcuda):
 *   - no two live allocations overlap, and none is aliased to another's
 *     physical memory (each writes a tag every 64 KiB and checks them at free);
 *   - requested, allocated and reserved bytes agree with the live set and the
 *     device (reserved = physical memory the device says is held);
 *   - reserved never passes the configured capacity, and an allocation that
 *     fails does so with TS_ENOSPC;
 *   - after freeing everything and empty_cache, nothing is held.
 * Static functions in a header: each test file includes it once.
 */
#ifndef TS_TEST_ALLOC_TEST_H
#define TS_TEST_ALLOC_TEST_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "tessera/alloc.h"

#define AT_MAX_LIVE 256
#define AT_TAG_STRIDE_BYTES 65536u
#define AT_MIB (1ull << 20)

typedef struct at_live {
    uint64_t ptr, size, stream, tag;
} at_live;

typedef struct at_state {
    at_live live[AT_MAX_LIVE];
    int n;
    uint64_t requested;
    uint64_t next_tag;
    int backed; /* pointers are host memory we may write */
    uint64_t rng;
    uint64_t ooms, allocs;
} at_state;

static inline uint64_t at_rand(at_state *s)
{
    s->rng ^= s->rng << 13;
    s->rng ^= s->rng >> 7;
    s->rng ^= s->rng << 17;
    return s->rng;
}

static inline void at_write_tags(const at_live *l)
{
    for (uint64_t o = 0; o < l->size; o += AT_TAG_STRIDE_BYTES) {
        uint64_t v = l->tag ^ o, room = l->size - o < 8 ? l->size - o : 8;
        memcpy((char *)(uintptr_t)l->ptr + o, &v, (size_t)room);
    }
    uint64_t v = ~l->tag;
    if (l->size >= 16)
        memcpy((char *)(uintptr_t)(l->ptr + l->size - 8), &v, 8);
}

static inline void at_check_tags(const at_live *l)
{
    for (uint64_t o = 0; o + 8 <= l->size - (l->size >= 16 ? 8 : 0); o += AT_TAG_STRIDE_BYTES) {
        uint64_t v;
        memcpy(&v, (char *)(uintptr_t)l->ptr + o, 8);
        if (v != (l->tag ^ o))
            fail_msg("allocation %#llx (+%llu bytes): tag at +%llu overwritten",
                     (unsigned long long)l->ptr, (unsigned long long)l->size,
                     (unsigned long long)o);
    }
    if (l->size >= 16) {
        uint64_t v;
        memcpy(&v, (char *)(uintptr_t)(l->ptr + l->size - 8), 8);
        if (v != ~l->tag)
            fail_msg("allocation %#llx: last bytes overwritten", (unsigned long long)l->ptr);
    }
}

static inline void at_check_stats(const at_state *s, ts_memalloc *a, uint64_t cap)
{
    ts_memalloc_stats st;
    ts_memalloc_get_stats(a, &st);
    assert_int_equal(st.requested_bytes, s->requested);
    assert_int_equal(st.live_allocs, (uint64_t)s->n);
    assert_true(st.allocated_bytes >= st.requested_bytes);
    assert_true(st.reserved_bytes >= st.allocated_bytes);
    assert_int_equal(st.reserved_bytes, st.dev.used_bytes);
    assert_true(st.peak_reserved_bytes >= st.reserved_bytes);
    assert_true(st.peak_requested_bytes >= st.requested_bytes);
    if (cap)
        assert_true(st.peak_reserved_bytes <= cap);
}

static inline uint64_t at_size(at_state *s, uint64_t max_large)
{
    uint64_t r = at_rand(s) % 100;
    if (r < 45)
        return 1 + at_rand(s) % (64 * 1024);            /* tiny */
    if (r < 60)
        return 1 + at_rand(s) % AT_MIB;                 /* small pool */
    if (r < 90)
        return AT_MIB + 1 + at_rand(s) % (9 * AT_MIB);  /* mid: 20 MiB segments */
    return 1 + at_rand(s) % max_large;                  /* anything */
}

static inline void at_alloc(at_state *s, ts_memalloc *a, uint64_t size, uint64_t stream)
{
    uint64_t p = 0;
    ts_err err = {0, ""};
    int rc = ts_memalloc_malloc(a, size, stream, &p, &err);
    if (rc == TS_ENOSPC) {
        s->ooms++;
        return;
    }
    if (rc != 0)
        fail_msg("malloc(%llu): %s", (unsigned long long)size, err.msg);
    assert_true(p != 0 && p % 512 == 0);
    for (int i = 0; i < s->n; i++) {
        const at_live *l = &s->live[i];
        if (p < l->ptr + l->size && l->ptr < p + size)
            fail_msg("malloc(%llu) = %#llx overlaps live %#llx (+%llu)",
                     (unsigned long long)size, (unsigned long long)p,
                     (unsigned long long)l->ptr, (unsigned long long)l->size);
    }
    at_live *l = &s->live[s->n++];
    *l = (at_live){p, size, stream, ++s->next_tag * 0x9e3779b97f4a7c15ull};
    s->requested += size;
    s->allocs++;
    if (s->backed)
        at_write_tags(l);
}

static inline void at_free(at_state *s, ts_memalloc *a, int i, uint64_t stream)
{
    at_live l = s->live[i];
    if (s->backed)
        at_check_tags(&l);
    ts_err err = {0, ""};
    if (ts_memalloc_free(a, l.ptr, stream, &err) != 0)
        fail_msg("free(%#llx): %s", (unsigned long long)l.ptr, err.msg);
    s->live[i] = s->live[--s->n];
    s->requested -= l.size;
}

/* steps random operations on the 3 streams (NULL: ids 0, 1, 2); capacity
 * cap (0 = device). Stream 2 is held now and then (simulated devices). */
static inline void at_run_on(ts_memalloc *a, ts_memdev *dev, uint64_t seed, int steps,
                      uint64_t max_large, uint64_t cap, int backed, const uint64_t *streams)
{
    static const uint64_t ids[3] = {0, 1, 2};
    if (!streams)
        streams = ids;
    at_state *s = calloc(1, sizeof *s);
    assert_non_null(s);
    s->rng = seed * 2654435761u + 1;
    s->backed = backed;
    ts_err err = {0, ""};
    for (int step = 0; step < steps; step++) {
        uint64_t r = at_rand(s) % 100;
        uint64_t si = at_rand(s) % 3, stream = streams[si];
        if (r < 52 && s->n < AT_MAX_LIVE) {
            at_alloc(s, a, at_size(s, max_large), stream);
        } else if (r < 96 && s->n) {
            int i = (int)(at_rand(s) % (uint64_t)s->n);
            at_free(s, a, i, s->live[i].stream);
        } else if (r < 98 && s->n) {
            int i = (int)(at_rand(s) % (uint64_t)s->n);
            assert_int_equal(
                ts_memalloc_record_stream(a, s->live[i].ptr, streams[(si + 1) % 3], &err), 0);
        } else if (r < 99) {
            ts_memdev_sim_hold_stream(dev, streams[2], (int)(at_rand(s) % 2));
        } else {
            assert_int_equal(ts_memalloc_empty_cache(a, &err), 0);
        }
        at_check_stats(s, a, cap);
    }
    ts_memdev_sim_hold_stream(dev, streams[2], 0);
    while (s->n)
        at_free(s, a, s->n - 1, s->live[s->n - 1].stream);
    if (ts_memalloc_empty_cache(a, &err) != 0)
        fail_msg("empty_cache: %s", err.msg);
    ts_memalloc_stats st;
    ts_memalloc_get_stats(a, &st);
    assert_int_equal(st.requested_bytes, 0);
    assert_int_equal(st.allocated_bytes, 0);
    assert_int_equal(st.reserved_bytes, 0);
    assert_int_equal(st.dev.used_bytes, 0);
    assert_true(s->allocs > (uint64_t)steps / 4);
    free(s);
}

static inline void at_run(ts_memalloc *a, ts_memdev *dev, uint64_t seed, int steps, uint64_t max_large,
                   uint64_t cap, int backed)
{
    at_run_on(a, dev, seed, steps, max_large, cap, backed, NULL);
}

#endif
