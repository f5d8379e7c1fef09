/*
 * test_tessera.c - the tessera allocator's own behaviour, case by case, on
 * a simulated device backed by host memory (so data written through a
 * stitched pointer is checked byte for byte):
 *   - free holes anywhere serve a request no hole holds (stitching), without
 *     new memory, where the PyTorch model runs out of memory;
 *   - the part of a request that is not whole granules comes from the start
 *     (tail) or the end (head) of a partly used granule;
 *   - a stitched range freed and asked for again is reused without a call;
 *   - small blocks live in their own granules and never split a large hole;
 *     emptied small granules go back to large requests;
 *   - memory freed on one stream is reused on another after one event wait;
 *   - record_stream holds memory until that stream's work is done;
 *   - the hard capacity, and empty_cache giving back all free granules;
 *   - the capacity read from the shim's quota variables.
 */
#include "alloc_test.h"

#include <stdio.h>

#include "tessera/shim.h"

#define G TS_MEM_GRANULE_BYTES

typedef struct fx {
    ts_memdev *dev;
    ts_memalloc *a;
} fx;

static fx make(ts_memalloc_kind kind, uint64_t device_bytes, uint64_t cap)
{
    fx f = {NULL, NULL};
    ts_err err = {0, ""};
    ts_memdev_sim_config dc = {.capacity_bytes = device_bytes, .backed = 1};
    assert_int_equal(ts_memdev_sim_new(&dc, &f.dev, &err), 0);
    ts_memalloc_config ac = {.kind = kind, .capacity_bytes = cap};
    if (ts_memalloc_new(&ac, f.dev, &f.a, &err) != 0)
        fail_msg("new: %s", err.msg);
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

static void put(fx *f, uint64_t p, uint64_t stream)
{
    ts_err err = {0, ""};
    if (ts_memalloc_free(f->a, p, stream, &err) != 0)
        fail_msg("free: %s", err.msg);
}

static ts_memalloc_stats stats(fx *f)
{
    ts_memalloc_stats s;
    ts_memalloc_get_stats(f->a, &s);
    return s;
}

static void fill(uint64_t p, uint64_t size, unsigned char v)
{
    memset((void *)(uintptr_t)p, v, (size_t)size);
}

static void expect(uint64_t p, uint64_t size, unsigned char v)
{
    const unsigned char *c = (const unsigned char *)(uintptr_t)p;
    for (uint64_t i = 0; i < size; i += 4096)
        if (c[i] != v)
            fail_msg("byte %llu of %#llx is %u, want %u", (unsigned long long)i,
                     (unsigned long long)p, c[i], v);
    if (c[size - 1] != v)
        fail_msg("last byte of %#llx is %u, want %u", (unsigned long long)p, c[size - 1], v);
}

#define HOLES_N 40

/* 40 blocks of 2 MiB fill 80 MiB; every other one freed leaves 40 MiB in
 * 2 MiB holes. A 20 MiB request: tessera stitches ten holes, PyTorch cannot. */
static void test_stitch_serves_holes(void **state)
{
    (void)state;
    for (int kind = 0; kind < 2; kind++) {
        fx f = make(kind ? TS_MEMALLOC_PYTORCH : TS_MEMALLOC_TESSERA, 96ull << 20, 80ull << 20);
        uint64_t p[HOLES_N];
        for (int i = 0; i < HOLES_N; i++) {
            p[i] = get(&f, G, 0);
            fill(p[i], G, (unsigned char)i);
        }
        for (int i = 0; i < HOLES_N; i += 2)
            put(&f, p[i], 0);
        ts_memalloc_stats before = stats(&f);
        uint64_t big = 0;
        ts_err err = {0, ""};
        int rc = ts_memalloc_malloc(f.a, 20ull << 20, 0, &big, &err);
        if (kind == 1) { /* PyTorch: holes inside segments are not usable */
            assert_int_equal(rc, TS_ENOSPC);
            assert_non_null(strstr(err.msg, "out of memory"));
            done(&f);
            continue;
        }
        assert_int_equal(rc, 0);
        ts_memalloc_stats after = stats(&f);
        assert_int_equal(after.stitched_allocs, before.stitched_allocs + 1);
        assert_int_equal(after.reserved_bytes, before.reserved_bytes); /* no new memory */
        fill(big, 20ull << 20, 0xAB);
        expect(big, 20ull << 20, 0xAB);
        for (int i = 1; i < HOLES_N; i += 2)
            expect(p[i], G, (unsigned char)i);
        done(&f);
    }
}

/* Remainders: 5 MiB from two 3 MiB holes takes two whole granules and the
 * 1 MiB start of a third (tail); holes that begin mid-granule give a head. */
static void test_tail_and_head(void **state)
{
    (void)state;
    for (int head = 0; head < 2; head++) {
        fx f = make(TS_MEMALLOC_TESSERA, 16ull << 20, 12ull << 20);
        uint64_t m3 = 3ull << 20, p[4];
        for (int i = 0; i < 4; i++) {
            p[i] = get(&f, m3, 0);
            fill(p[i], m3, (unsigned char)(0x10 + i));
        }
        /* tail case frees [0,3) and [6,9) MiB; head case [3,6) and [9,12) */
        put(&f, p[head], 0);
        put(&f, p[head + 2], 0);
        ts_memalloc_stats before = stats(&f);
        uint64_t q = get(&f, 5ull << 20, 0);
        ts_memalloc_stats after = stats(&f);
        assert_int_equal(after.stitched_allocs, before.stitched_allocs + 1);
        assert_int_equal(after.reserved_bytes, 12ull << 20);
        assert_int_equal(q % G, head ? G - (1ull << 20) : 0); /* a head starts mid-granule */
        fill(q, 5ull << 20, 0xEE);
        expect(p[1 - head], m3, (unsigned char)(0x10 + 1 - head));
        expect(p[3 - head], m3, (unsigned char)(0x10 + 3 - head));
        expect(q, 5ull << 20, 0xEE);
        done(&f);
    }
}

/* A stitched range freed and asked for again: no driver call. */
static void test_stitch_cache(void **state)
{
    (void)state;
    fx f = make(TS_MEMALLOC_TESSERA, 64ull << 20, 32ull << 20);
    uint64_t p[16];
    for (int i = 0; i < 16; i++)
        p[i] = get(&f, G, 0);
    for (int i = 0; i < 16; i += 2)
        put(&f, p[i], 0);
    uint64_t q = get(&f, 6ull << 20, 0);
    put(&f, q, 0);
    ts_memalloc_stats s1 = stats(&f);
    uint64_t q2 = get(&f, 6ull << 20, 0);
    ts_memalloc_stats s2 = stats(&f);
    assert_int_equal(q2, q);
    assert_int_equal(s2.stitch_cache_hits, s1.stitch_cache_hits + 1);
    assert_int_equal(ts_memdev_stats_vmm_calls(&s2.dev), ts_memdev_stats_vmm_calls(&s1.dev));
    put(&f, q2, 0);
    done(&f);
}

/* Small blocks do not land between large ones: two freed 10 MiB blocks
 * around a 4 KiB one merge into one 20 MiB hole. */
static void test_small_no_pin(void **state)
{
    (void)state;
    fx f = make(TS_MEMALLOC_TESSERA, 64ull << 20, 24ull << 20);
    uint64_t l1 = get(&f, 10ull << 20, 0);
    uint64_t s = get(&f, 4096, 0);
    uint64_t l2 = get(&f, 10ull << 20, 0);
    fill(s, 4096, 0x5A);
    put(&f, l1, 0);
    put(&f, l2, 0);
    ts_memalloc_stats before = stats(&f);
    uint64_t big = get(&f, 20ull << 20, 0);
    ts_memalloc_stats after = stats(&f);
    assert_int_equal(after.stitched_allocs, before.stitched_allocs); /* contiguous */
    assert_int_equal(after.reserved_bytes, 22ull << 20);             /* + one small granule */
    expect(s, 4096, 0x5A);
    put(&f, big, 0);
    put(&f, s, 0);
    /* emptied small granules serve large requests again */
    uint64_t sm[600];
    for (int i = 0; i < 600; i++)
        sm[i] = get(&f, 8192, 0);
    for (int i = 0; i < 600; i++)
        put(&f, sm[i], 0);
    uint64_t all = get(&f, 24ull << 20, 0);
    assert_int_equal(stats(&f).reserved_bytes, 24ull << 20);
    put(&f, all, 0);
    done(&f);
}

/* Freed on stream 1, reused on stream 2 after one event wait; again on
 * stream 2, no further wait. PyTorch keeps per-stream pools instead. */
static void test_cross_stream(void **state)
{
    (void)state;
    for (int kind = 0; kind < 2; kind++) {
        fx f = make(kind ? TS_MEMALLOC_PYTORCH : TS_MEMALLOC_TESSERA, 64ull << 20, 0);
        uint64_t p = get(&f, 4ull << 20, 1);
        put(&f, p, 1);
        ts_memalloc_stats s0 = stats(&f);
        uint64_t q = get(&f, 4ull << 20, 2);
        ts_memalloc_stats s1 = stats(&f);
        if (kind == 1) {
            assert_true(s1.reserved_bytes > s0.reserved_bytes);
            done(&f);
            continue;
        }
        assert_int_equal(q, p);
        assert_int_equal(s1.reserved_bytes, s0.reserved_bytes);
        assert_int_equal(s1.dev.calls[TS_MEMDEV_STREAM_WAIT], s0.dev.calls[TS_MEMDEV_STREAM_WAIT] + 1);
        put(&f, q, 2);
        uint64_t r = get(&f, 4ull << 20, 2);
        ts_memalloc_stats s2 = stats(&f);
        assert_int_equal(r, p);
        assert_int_equal(s2.dev.calls[TS_MEMDEV_STREAM_WAIT], s1.dev.calls[TS_MEMDEV_STREAM_WAIT]);
        put(&f, r, 2);
        done(&f);
    }
}

/* record_stream: the block is not reused while stream 3 has not run. */
static void test_record_stream(void **state)
{
    (void)state;
    for (int kind = 0; kind < 2; kind++) {
        fx f = make(kind ? TS_MEMALLOC_PYTORCH : TS_MEMALLOC_TESSERA, 64ull << 20, 0);
        ts_err err = {0, ""};
        uint64_t p = get(&f, 4ull << 20, 1);
        assert_int_equal(ts_memalloc_record_stream(f.a, p, 3, &err), 0);
        ts_memdev_sim_hold_stream(f.dev, 3, 1);
        put(&f, p, 1);
        uint64_t q = get(&f, 4ull << 20, 1);
        assert_int_not_equal(q, p);
        ts_memdev_sim_hold_stream(f.dev, 3, 0);
        uint64_t r = get(&f, 4ull << 20, 1);
        assert_int_equal(r, p);
        put(&f, q, 1);
        put(&f, r, 1);
        assert_int_equal(ts_memalloc_record_stream(f.a, 12345, 3, &err), TS_EINVAL);
        done(&f);
    }
}

static void test_capacity_and_empty_cache(void **state)
{
    (void)state;
    fx f = make(TS_MEMALLOC_TESSERA, 64ull << 20, 8ull << 20);
    ts_err err = {0, ""};
    uint64_t a = get(&f, 6ull << 20, 0), b = 0;
    fill(a, 6ull << 20, 0x77);
    assert_int_equal(ts_memalloc_malloc(f.a, 4ull << 20, 0, &b, &err), TS_ENOSPC);
    assert_non_null(strstr(err.msg, "out of memory"));
    assert_int_equal(stats(&f).num_ooms, 1);
    assert_true(stats(&f).peak_reserved_bytes <= 8ull << 20);
    uint64_t c = get(&f, 1ull << 20, 0); /* a small granule still fits */
    put(&f, c, 0);
    assert_int_equal(ts_memalloc_empty_cache(f.a, &err), 0);
    expect(a, 6ull << 20, 0x77); /* live memory untouched by empty_cache */
    assert_int_equal(stats(&f).reserved_bytes, 6ull << 20);
    put(&f, a, 0);
    assert_int_equal(ts_memalloc_empty_cache(f.a, &err), 0);
    assert_int_equal(stats(&f).reserved_bytes, 0);
    assert_int_equal(stats(&f).dev.used_bytes, 0);
    uint64_t d = get(&f, 8ull << 20, 0);
    put(&f, d, 0);
    assert_int_equal(ts_memalloc_free(f.a, d, 0, &err), TS_EINVAL); /* double free */
    assert_int_equal(ts_memalloc_malloc(f.a, 0, 0, &b, &err), TS_EINVAL);
    assert_non_null(strstr(err.msg, "size"));
    done(&f);
}

static void test_quota_from_env(void **state)
{
    (void)state;
    ts_err err = {0, ""};
    uint64_t b = 0;
    unsetenv("TESSERA_CUDA_MEM_LIMIT");
    unsetenv("TESSERA_CUDA_CTX_BYTES");
    assert_int_equal(ts_memalloc_quota_from_env(0, &b, &err), TS_ENOENT);
    setenv("TESSERA_CUDA_MEM_LIMIT", "8G", 1);
    assert_int_equal(ts_memalloc_quota_from_env(3, &b, &err), 0);
    assert_int_equal(b, (8ull << 30) - TS_SHIM_CTX_BYTES_DEFAULT); /* less the default context charge */
    setenv("TESSERA_CUDA_CTX_BYTES", "0", 1);
    setenv("TESSERA_CUDA_MEM_LIMIT", "0=8G,1=512M", 1);
    assert_int_equal(ts_memalloc_quota_from_env(1, &b, &err), 0);
    assert_int_equal(b, 512ull << 20);
    assert_int_equal(ts_memalloc_quota_from_env(2, &b, &err), TS_ENOENT);
    assert_non_null(strstr(err.msg, "device 2"));
    setenv("TESSERA_CUDA_MEM_LIMIT", "0=8Q", 1);
    assert_int_equal(ts_memalloc_quota_from_env(0, &b, &err), TS_EINVAL);
    assert_non_null(strstr(err.msg, "TESSERA_CUDA_MEM_LIMIT"));
    unsetenv("TESSERA_CUDA_MEM_LIMIT");
    unsetenv("TESSERA_CUDA_CTX_BYTES");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stitch_serves_holes),
        cmocka_unit_test(test_tail_and_head),
        cmocka_unit_test(test_stitch_cache),
        cmocka_unit_test(test_small_no_pin),
        cmocka_unit_test(test_cross_stream),
        cmocka_unit_test(test_record_stream),
        cmocka_unit_test(test_capacity_and_empty_cache),
        cmocka_unit_test(test_quota_from_env),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
