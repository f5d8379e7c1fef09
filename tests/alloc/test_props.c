/*
 * test_props.c - properties every allocator keeps over bounded random
 * alloc/free/record_stream/empty_cache sequences (alloc_test.h): no overlap
 * and no physical aliasing (tags written through every pointer into a
 * simulated device backed by host memory), statistics that agree with the
 * live set and with the device, the capacity never exceeded (OOM is
 * TS_ENOSPC), everything given back at the end, and no driver object left
 * behind once the allocator and the device are gone. Fixed seeds; each run
 * is a few thousand calls.
 */
#include "alloc_test.h"

#define PROP_DEVICE_BYTES (256ull << 20)
#define PROP_CAPACITY_BYTES (192ull << 20)
#define PROP_MAX_LARGE_BYTES (16ull << 20)
#define PROP_STEPS 2500

static void run_kind(ts_memalloc_kind kind, uint64_t seed)
{
    ts_err err = {0, ""};
    ts_memdev_sim_config dc = {.capacity_bytes = PROP_DEVICE_BYTES, .backed = 1};
    ts_memdev *dev = NULL;
    assert_int_equal(ts_memdev_sim_new(&dc, &dev, &err), 0);
    ts_memalloc_config ac = {.kind = kind, .capacity_bytes = PROP_CAPACITY_BYTES};
    ts_memalloc *a = NULL;
    if (ts_memalloc_new(&ac, dev, &a, &err) != 0)
        fail_msg("new: %s", err.msg);
    at_run(a, dev, seed, PROP_STEPS, PROP_MAX_LARGE_BYTES, PROP_CAPACITY_BYTES, 1);
    ts_memalloc_destroy(a);
    ts_memdev_sim_live live;
    ts_memdev_sim_get_live(dev, &live);
    assert_int_equal(live.mallocs, 0);
    assert_int_equal(live.reservations, 0);
    assert_int_equal(live.handles, 0);
    assert_int_equal(live.mapped_bytes, 0);
    assert_int_equal(live.events, 0);
    ts_memdev_free(dev);
}

static void test_tessera(void **state)
{
    (void)state;
    run_kind(TS_MEMALLOC_TESSERA, 1);
    run_kind(TS_MEMALLOC_TESSERA, 2);
}

static void test_pytorch(void **state)
{
    (void)state;
    run_kind(TS_MEMALLOC_PYTORCH, 1);
    run_kind(TS_MEMALLOC_PYTORCH, 2);
}

static void test_pytorch_expandable(void **state)
{
    (void)state;
    run_kind(TS_MEMALLOC_PYTORCH_EXPANDABLE, 1);
    run_kind(TS_MEMALLOC_PYTORCH_EXPANDABLE, 2);
}

/* Destroying an allocator with live allocations gives everything back. */
static void test_destroy_with_live(void **state)
{
    (void)state;
    for (int kind = 0; kind < 3; kind++) {
        ts_err err = {0, ""};
        ts_memdev_sim_config dc = {.capacity_bytes = PROP_DEVICE_BYTES, .backed = 1};
        ts_memdev *dev = NULL;
        assert_int_equal(ts_memdev_sim_new(&dc, &dev, &err), 0);
        ts_memalloc_config ac = {.kind = (ts_memalloc_kind)kind};
        ts_memalloc *a = NULL;
        assert_int_equal(ts_memalloc_new(&ac, dev, &a, &err), 0);
        uint64_t p[8];
        for (int i = 0; i < 8; i++)
            assert_int_equal(ts_memalloc_malloc(a, (uint64_t)(i + 1) * 3 * AT_MIB + 100, 0, &p[i],
                                                &err), 0);
        assert_int_equal(ts_memalloc_record_stream(a, p[1], 5, &err), 0);
        ts_memdev_sim_hold_stream(dev, 5, 1);
        assert_int_equal(ts_memalloc_free(a, p[1], 0, &err), 0); /* pending on stream 5 */
        for (int i = 0; i < 8; i += 2)
            assert_int_equal(ts_memalloc_free(a, p[i], 0, &err), 0);
        ts_memalloc_destroy(a);
        ts_memdev_sim_live live;
        ts_memdev_sim_get_live(dev, &live);
        assert_int_equal(live.handles + live.mallocs + live.reservations + live.events, 0);
        assert_int_equal(live.mapped_bytes, 0);
        ts_memdev_free(dev);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tessera),
        cmocka_unit_test(test_pytorch),
        cmocka_unit_test(test_pytorch_expandable),
        cmocka_unit_test(test_destroy_with_live),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
