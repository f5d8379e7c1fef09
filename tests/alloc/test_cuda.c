/*
 * test_cuda.c - the CUDA driver backend (dev_cuda.c) against the fake
 * libcuda of tests/fakes/fake_cuda.c, whose virtual memory calls are real
 * in host memory: cuMemMap maps a memfd into a PROT_NONE reservation and only
 * cuMemSetAccess makes it writable, so a range used before its access is set
 * faults, and two ranges on one handle see each other's bytes.
 *
 * Proves: a missing library is reported with its path; the backend maps a
 * handle where asked and memory written through one mapping of a handle is
 * read through another (what stitching relies on); each allocator passes the
 * property workload of alloc_test.h on the fake (real CUstreams, events,
 * cuMemAlloc, VMM), capacity enforced by the fake's own out-of-memory; and
 * nothing is left mapped or charged when the allocators are gone. Skipped
 * when the fake is not built.
 */
#include "alloc_test.h"

#include <dlfcn.h>
#include <stdio.h>
#include <unistd.h>

#include "alloc/dev.h"

#ifndef TS_ALLOC_FAKE_CUDA
#define TS_ALLOC_FAKE_CUDA ""
#endif

#define FAKE_MEM_BYTES "192M"
#define FAKE_CAPACITY_BYTES (192ull << 20)
#define CUDA_STEPS 1200
#define CUDA_MAX_LARGE_BYTES (12ull << 20)

typedef int (*stream_create_fn)(void **stream, unsigned int flags);
typedef int (*stream_destroy_fn)(void *stream);
typedef int (*mem_info_fn)(size_t *free_bytes, size_t *total);

static int have_fake(void)
{
    return TS_ALLOC_FAKE_CUDA[0] && access(TS_ALLOC_FAKE_CUDA, R_OK) == 0;
}

static ts_memdev *open_fake(void)
{
    setenv("TESSERA_FAKE_CUDA_MEM_BYTES", FAKE_MEM_BYTES, 1);
    ts_err err = {0, ""};
    ts_memdev *dev = NULL;
    if (ts_memdev_cuda_new(TS_ALLOC_FAKE_CUDA, 0, &dev, &err) != 0)
        fail_msg("open %s: %s", TS_ALLOC_FAKE_CUDA, err.msg);
    return dev;
}

static void fn_of(void *dl, const char *name, void *slot)
{
    void *sym = dlsym(dl, name);
    assert_non_null(sym);
    memcpy(slot, &sym, sizeof sym);
}

static void test_missing_library(void **state)
{
    (void)state;
    ts_err err = {0, ""};
    ts_memdev *dev = NULL;
    assert_int_equal(ts_memdev_cuda_new("/nonexistent/libcuda.so.1", 0, &dev, &err), TS_ENOENT);
    assert_null(dev);
    assert_non_null(strstr(err.msg, "/nonexistent/libcuda.so.1"));
}

/* One handle mapped at two addresses: the same bytes. */
static void test_alias_mapping(void **state)
{
    (void)state;
    if (!have_fake())
        skip();
    ts_memdev *dev = open_fake();
    ts_err err = {0, ""};
    uint64_t va = 0, h = 0, g = TS_MEM_GRANULE_BYTES;
    assert_int_equal(alloc_memdev_va_reserve(dev, 4 * g, g, &va, &err), 0);
    assert_int_equal(alloc_memdev_create(dev, g, &h, &err), 0);
    assert_int_equal(alloc_memdev_map(dev, va, g, h, &err), 0);
    assert_int_equal(alloc_memdev_map(dev, va + 2 * g, g, h, &err), 0);
    assert_int_equal(alloc_memdev_set_access(dev, va, g, &err), 0);
    assert_int_equal(alloc_memdev_set_access(dev, va + 2 * g, g, &err), 0);
    memcpy((void *)(uintptr_t)(va + 4096), "stitched", 9);
    assert_string_equal((const char *)(uintptr_t)(va + 2 * g + 4096), "stitched");
    /* mapping over a mapped page is refused by the driver */
    assert_int_not_equal(alloc_memdev_map(dev, va, g, h, &err), 0);
    assert_int_equal(alloc_memdev_unmap(dev, va, g, &err), 0);
    assert_int_equal(alloc_memdev_unmap(dev, va + 2 * g, g, &err), 0);
    assert_int_equal(alloc_memdev_release(dev, h, g, &err), 0);
    assert_int_equal(alloc_memdev_va_free(dev, va, 4 * g, &err), 0);
    ts_memdev_stats st;
    ts_memdev_get_stats(dev, &st);
    assert_int_equal(st.calls[TS_MEMDEV_MAP], 3);
    assert_int_equal(st.used_bytes, 0);
    ts_memdev_free(dev);
}

static void run_kind(ts_memalloc_kind kind)
{
    if (!have_fake())
        skip();
    ts_memdev *dev = open_fake();
    void *dl = dlopen(TS_ALLOC_FAKE_CUDA, RTLD_NOW | RTLD_LOCAL);
    assert_non_null(dl);
    stream_create_fn screate;
    stream_destroy_fn sdestroy;
    mem_info_fn minfo;
    fn_of(dl, "cuStreamCreate", &screate);
    fn_of(dl, "cuStreamDestroy_v2", &sdestroy);
    fn_of(dl, "cuMemGetInfo_v2", &minfo);
    void *s1 = NULL, *s2 = NULL;
    assert_int_equal(screate(&s1, 0), 0);
    assert_int_equal(screate(&s2, 0), 0);
    uint64_t streams[3] = {0, (uint64_t)(uintptr_t)s1, (uint64_t)(uintptr_t)s2};
    ts_err err = {0, ""};
    ts_memalloc_config ac = {.kind = kind};
    ts_memalloc *a = NULL;
    if (ts_memalloc_new(&ac, dev, &a, &err) != 0)
        fail_msg("new: %s", err.msg);
    at_run_on(a, dev, 7, CUDA_STEPS, CUDA_MAX_LARGE_BYTES, FAKE_CAPACITY_BYTES, 1, streams);
    ts_memalloc_destroy(a);
    size_t free_b = 0, total = 0;
    assert_int_equal(minfo(&free_b, &total), 0);
    assert_int_equal(free_b, total); /* the fake holds nothing for us any more */
    assert_int_equal(sdestroy(s1), 0);
    assert_int_equal(sdestroy(s2), 0);
    dlclose(dl);
    ts_memdev_free(dev);
}

static void test_tessera(void **state)
{
    (void)state;
    run_kind(TS_MEMALLOC_TESSERA);
}

static void test_pytorch(void **state)
{
    (void)state;
    run_kind(TS_MEMALLOC_PYTORCH);
}

static void test_pytorch_expandable(void **state)
{
    (void)state;
    run_kind(TS_MEMALLOC_PYTORCH_EXPANDABLE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_missing_library),
        cmocka_unit_test(test_alias_mapping),
        cmocka_unit_test(test_tessera),
        cmocka_unit_test(test_pytorch),
        cmocka_unit_test(test_pytorch_expandable),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
