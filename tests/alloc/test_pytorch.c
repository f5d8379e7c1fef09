/*
 * test_pytorch.c - the PyTorch caching-allocator model, rule by rule (the
 * rules are listed in src/alloc/pytorch.c), with the arithmetic of each
 * expected figure next to it: 512-byte rounding and the small / large pools,
 * the 2 MiB / 20 MiB / rounded segment sizes, when a block is split, best
 * fit with the lowest address on a tie, merging on free, per-stream pools,
 * the two retries before out-of-memory, max_split_size, and expandable
 * segments mapping 20 MiB pages on demand and unmapping them on empty_cache.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "tessera/alloc.h"

#define MIB (1ull << 20)

typedef struct fx {
    ts_memdev *dev;
    ts_memalloc *a;
} fx;

static fx make(ts_memalloc_kind kind, uint64_t device, uint64_t cap, uint64_t max_split)
{
    fx f = {NULL, NULL};
    ts_err err = {0, ""};
    ts_memdev_sim_config dc = {.capacity_bytes = device, .backed = 0};
    assert_int_equal(ts_memdev_sim_new(&dc, &f.dev, &err), 0);
    ts_memalloc_config ac = {.kind = kind, .capacity_bytes = cap, .max_split_bytes = max_split};
    assert_int_equal(ts_memalloc_new(&ac, f.dev, &f.a, &err), 0);
    return f;
}

static void done(fx *f)
{
    ts_memalloc_destroy(f->a);
    ts_memdev_free(f->dev);
}

static uint64_t get(fx *f, uint64_t size, uint64_t stream)
{
    uint64_t p = 0;
    ts_err err = {0, ""};
    if (ts_memalloc_malloc(f->a, size, stream, &p, &err) != 0)
        fail_msg("malloc(%llu): %s", (unsigned long long)size, err.msg);
    return p;
}

static void put(fx *f, uint64_t p)
{
    ts_err err = {0, ""};
    assert_int_equal(ts_memalloc_free(f->a, p, 0, &err), 0);
}

static ts_memalloc_stats st(fx *f)
{
    ts_memalloc_stats s;
    ts_memalloc_get_stats(f->a, &s);
    return s;
}

static void test_rounding_pools_segments(void **state)
{
    (void)state;
    fx f = make(TS_MEMALLOC_PYTORCH, 1ull << 30, 0, 0);
    get(&f, 1, 0); /* 512 B block in a new 2 MiB small segment */
    assert_int_equal(st(&f).allocated_bytes, 512);
    assert_int_equal(st(&f).reserved_bytes, 2 * MIB);
    get(&f, MIB, 0); /* 1 MiB is still small: same segment (2 MiB - 512 left) */
    assert_int_equal(st(&f).reserved_bytes, 2 * MIB);
    get(&f, MIB + 1, 0); /* 1 MiB + 512: large pool, under 10 MiB -> 20 MiB segment */
    assert_int_equal(st(&f).reserved_bytes, 22 * MIB);
    get(&f, 10 * MIB, 0); /* fits the 19 MiB - 512 rest of that segment */
    assert_int_equal(st(&f).reserved_bytes, 22 * MIB);
    get(&f, 12 * MIB - 100, 0); /* >= 10 MiB: its own segment, rounded to 2 MiB = 12 MiB */
    assert_int_equal(st(&f).reserved_bytes, 34 * MIB);
    assert_int_equal(st(&f).segment_allocs, 3);
    assert_int_equal(st(&f).dev.calls[TS_MEMDEV_MALLOC], 3);
    done(&f);
}

static void test_split_rules(void **state)
{
    (void)state;
    fx f = make(TS_MEMALLOC_PYTORCH, 1ull << 30, 0, 0);
    /* 19 MiB + 1 -> 19 MiB + 512 from a 20 MiB segment: 1 MiB - 512 left,
     * not > 1 MiB, so the block keeps it */
    get(&f, 19 * MIB + 1, 0);
    assert_int_equal(st(&f).allocated_bytes, 20 * MIB);
    /* 8 MiB from a new 20 MiB segment: 12 MiB left (> 1 MiB), split */
    get(&f, 8 * MIB, 0);
    assert_int_equal(st(&f).allocated_bytes, 28 * MIB);
    get(&f, 12 * MIB, 0); /* the 12 MiB rest serves this: no new segment */
    assert_int_equal(st(&f).reserved_bytes, 40 * MIB);
    /* the small pool splits down to 512 B: a 2 MiB segment serves 1 MiB,
     * then 1 MiB - 1024 (rounded up from 1 MiB - 1112), then two of 512 */
    get(&f, MIB, 0);
    get(&f, MIB - 1112, 0);
    get(&f, 512, 0);
    get(&f, 512, 0);
    assert_int_equal(st(&f).reserved_bytes, 42 * MIB);
    done(&f);
}

static void test_best_fit_and_merge(void **state)
{
    (void)state;
    fx f = make(TS_MEMALLOC_PYTORCH, 1ull << 30, 0, 0);
    uint64_t p[6];
    for (int i = 0; i < 6; i++)
        p[i] = get(&f, 3 * MIB, 0); /* one 20 MiB segment: 6 x 3 MiB + 2 MiB free */
    assert_int_equal(st(&f).segment_allocs, 1);
    put(&f, p[1]); /* holes of 3 MiB at p[1] and p[4], 2 MiB at the end */
    put(&f, p[4]);
    uint64_t q = get(&f, 3 * MIB, 0); /* tie of two 3 MiB holes: the lower address */
    assert_int_equal(q, p[1]);
    uint64_t r = get(&f, 2 * MIB, 0); /* best fit is the 2 MiB tail, not p[4] */
    assert_int_equal(r, p[5] + 3 * MIB);
    put(&f, q);
    put(&f, p[2]);
    put(&f, p[3]);
    /* p[1..4] merged: 12 MiB hole at p[1] */
    uint64_t big = get(&f, 12 * MIB - 512, 0);
    assert_int_equal(big, p[1]);
    assert_int_equal(st(&f).segment_allocs, 1);
    done(&f);
}

static void test_streams_have_own_pools(void **state)
{
    (void)state;
    fx f = make(TS_MEMALLOC_PYTORCH, 1ull << 30, 0, 0);
    uint64_t p = get(&f, 4 * MIB, 1);
    put(&f, p);
    uint64_t q = get(&f, 4 * MIB, 2); /* stream 1's cached segment is not stream 2's */
    assert_int_not_equal(q, p);
    assert_int_equal(st(&f).reserved_bytes, 40 * MIB);
    uint64_t r = get(&f, 4 * MIB, 1);
    assert_int_equal(r, p);
    done(&f);
}

static void test_oom_retries(void **state)
{
    (void)state;
    fx f = make(TS_MEMALLOC_PYTORCH, 1ull << 30, 40 * MIB, 0);
    uint64_t p = get(&f, 5 * MIB, 0); /* 20 MiB segment */
    put(&f, p);                      /* cached */
    /* 25 MiB -> a 26 MiB segment: 20 + 26 > 40, refused; the cached whole
     * segment is freed and the retry succeeds */
    get(&f, 25 * MIB, 0);
    ts_memalloc_stats s = st(&f);
    assert_int_equal(s.num_alloc_retries, 1);
    assert_int_equal(s.segment_frees, 1);
    assert_int_equal(s.reserved_bytes, 26 * MIB);
    uint64_t x = 0;
    ts_err err = {0, ""};
    assert_int_equal(ts_memalloc_malloc(f.a, 20 * MIB, 0, &x, &err), TS_ENOSPC);
    assert_int_equal(st(&f).num_ooms, 1);
    assert_non_null(strstr(err.msg, "out of memory"));
    done(&f);
}

static void test_max_split_size(void **state)
{
    (void)state;
    fx f = make(TS_MEMALLOC_PYTORCH, 1ull << 30, 0, 8 * MIB);
    uint64_t p = get(&f, 12 * MIB, 0); /* oversize (>= 8 MiB): its own 12 MiB segment */
    put(&f, p);
    uint64_t q = get(&f, 4 * MIB, 0); /* may not split the cached oversize block */
    assert_int_not_equal(q, p);
    assert_int_equal(st(&f).reserved_bytes, 32 * MIB);
    uint64_t r = get(&f, 12 * MIB, 0); /* an oversize request takes it whole */
    assert_int_equal(r, p);
    assert_int_equal(st(&f).allocated_bytes, 16 * MIB);
    done(&f);
}

static void test_expandable_pages(void **state)
{
    (void)state;
    fx f = make(TS_MEMALLOC_PYTORCH_EXPANDABLE, 1ull << 30, 0, 0);
    uint64_t a = get(&f, 15 * MIB, 0); /* maps one 20 MiB page */
    assert_int_equal(st(&f).reserved_bytes, 20 * MIB);
    uint64_t b = get(&f, 15 * MIB, 0); /* [15, 30) MiB: one more page, contiguous */
    assert_int_equal(b, a + 15 * MIB);
    assert_int_equal(st(&f).reserved_bytes, 40 * MIB);
    put(&f, a);
    uint64_t c = get(&f, 10 * MIB, 0); /* the freed 15 MiB hole, split at 512 B */
    assert_int_equal(c, a);
    put(&f, c);
    put(&f, b);
    ts_err err = {0, ""};
    assert_int_equal(ts_memalloc_empty_cache(f.a, &err), 0);
    ts_memalloc_stats s = st(&f);
    assert_int_equal(s.reserved_bytes, 0);
    assert_int_equal(s.dev.calls[TS_MEMDEV_CREATE], 2);
    assert_int_equal(s.dev.calls[TS_MEMDEV_MAP], 2);
    assert_int_equal(s.dev.calls[TS_MEMDEV_UNMAP], 2);
    assert_int_equal(s.dev.calls[TS_MEMDEV_RELEASE], 2);
    assert_int_equal(s.dev.calls[TS_MEMDEV_RESERVE], 1);
    assert_int_equal(s.dev.calls[TS_MEMDEV_UNRESERVE], 1); /* empty segment given back */
    /* small requests: their own segment with 2 MiB pages */
    get(&f, 4096, 0);
    assert_int_equal(st(&f).reserved_bytes, 2 * MIB);
    done(&f);
}

static void test_adopt_only_pytorch(void **state)
{
    (void)state;
    fx f = make(TS_MEMALLOC_TESSERA, 1ull << 30, 0, 0);
    ts_err err = {0, ""};
    assert_int_equal(ts_memalloc_adopt_segment(f.a, 1ull << 34, 2 * MIB, 0, 1, &err), TS_EINVAL);
    done(&f);
    f = make(TS_MEMALLOC_PYTORCH, 1ull << 30, 0, 0);
    assert_int_equal(ts_memalloc_adopt_segment(f.a, 1ull << 34, 20 * MIB, 0, 0, &err), 0);
    assert_int_equal(ts_memalloc_adopt_block(f.a, (1ull << 34) + 4 * MIB, 4 * MIB, 4000000, 0,
                                             &err), 0);
    /* a block outside any free block is refused */
    assert_int_equal(ts_memalloc_adopt_block(f.a, (1ull << 34) + 5 * MIB, MIB, MIB, 0, &err),
                     TS_EINVAL);
    assert_int_equal(ts_memalloc_size_of(f.a, (1ull << 34) + 4 * MIB), 4000000);
    uint64_t p = get(&f, 4 * MIB, 0); /* best fit: the 4 MiB hole below it */
    assert_int_equal(p, 1ull << 34);
    done(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rounding_pools_segments),
        cmocka_unit_test(test_split_rules),
        cmocka_unit_test(test_best_fit_and_merge),
        cmocka_unit_test(test_streams_have_own_pools),
        cmocka_unit_test(test_oom_retries),
        cmocka_unit_test(test_max_split_size),
        cmocka_unit_test(test_expandable_pages),
        cmocka_unit_test(test_adopt_only_pytorch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
