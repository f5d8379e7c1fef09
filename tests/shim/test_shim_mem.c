/*
 * test_shim_mem.c - the shim's memory quota, in process, against the fake
 * driver: every allocation path is charged exactly what the driver takes,
 * frees give back exactly that, contexts are charged and take their
 * allocations with them, over-quota calls fail with CUDA_ERROR_OUT_OF_MEMORY
 * without reaching the driver, and cuMemGetInfo / cuDeviceTotalMem report the
 * quota.
 *
 * The property: after every step of random sequences of allocations, frees,
 * bad frees, context creations and destructions, what the shim says the
 * tenant uses equals what the fake device really holds, never exceeds the
 * quota, and never wraps below zero.
 *
 * The shim is dlopen()ed (not preloaded) with TESSERA_CUDA_DRIVER naming the
 * fake, so this process sees both: `sh` calls through the shim, `fk` straight
 * into the fake to read what the device really holds.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shim/shim_ops.h"

#define MIB (1024ULL * 1024ULL)
#define QUOTA_BYTES (1024 * MIB)
#define CTX_BYTES (64 * MIB)
#define DEVICE_BYTES (64ULL << 30)
#define MAX_OBJS 64
#define PROPERTY_SEEDS 40
#define PROPERTY_STEPS 250

static struct cu_api sh, fk;
static char ledger_path[128];
static CUcontext primary;
static CUstream stream;
static CUmemoryPool pool;

/* What the fake device holds (all of it is this process's). */
static uint64_t device_used(void)
{
    size_t fr, total;
    assert_int_equal(fk.cuMemGetInfo_v2(&fr, &total), CUDA_SUCCESS);
    return total - fr;
}

/* What the shim says the tenant uses (the quota minus what it reports free). */
static uint64_t shim_used(void)
{
    size_t fr, total;
    assert_int_equal(sh.cuMemGetInfo_v2(&fr, &total), CUDA_SUCCESS);
    assert_int_equal(total, QUOTA_BYTES);
    return total - fr;
}

static void expect_used(uint64_t bytes)
{
    assert_int_equal(device_used(), bytes);
    assert_int_equal(shim_used(), bytes);
}

static void test_quota_reported_and_enforced(void **state)
{
    (void)state;
    expect_used(CTX_BYTES); /* the primary context, charged at its first retain */
    size_t total = 0;
    assert_int_equal(sh.cuDeviceTotalMem_v2(&total, 0), CUDA_SUCCESS);
    assert_int_equal(total, QUOTA_BYTES);

    CUdeviceptr a, b;
    assert_int_equal(sh.cuMemAlloc_v2(&a, 1), CUDA_SUCCESS);
    expect_used(CTX_BYTES + OPS_GRAN_BYTES);
    uint64_t left = QUOTA_BYTES - CTX_BYTES - OPS_GRAN_BYTES;
    assert_int_equal(sh.cuMemAlloc_v2(&b, left + 1), CUDA_ERROR_OUT_OF_MEMORY);
    expect_used(CTX_BYTES + OPS_GRAN_BYTES); /* refused before the driver saw it */
    assert_int_equal(sh.cuMemAlloc_v2(&b, left), CUDA_SUCCESS);
    expect_used(QUOTA_BYTES);
    size_t fr, tot;
    assert_int_equal(sh.cuMemGetInfo_v2(&fr, &tot), CUDA_SUCCESS);
    assert_int_equal(fr, 0);
    CUdeviceptr c;
    assert_int_equal(sh.cuMemAlloc_v2(&c, 1), CUDA_ERROR_OUT_OF_MEMORY);
    assert_int_equal(sh.cuMemFree_v2(b), CUDA_SUCCESS);
    assert_int_equal(sh.cuMemFree_v2(a), CUDA_SUCCESS);
    assert_int_equal(sh.cuMemFree_v2(a), CUDA_ERROR_INVALID_VALUE); /* the driver's answer */
    expect_used(CTX_BYTES);
    /* calls the shim does not charge still reach the driver unchanged */
    assert_int_equal(sh.cuMemAlloc_v2(&c, 0), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(sh.cuMemAlloc_v2(NULL, 1), CUDA_ERROR_INVALID_VALUE);
}

static void test_every_path_charged_exactly(void **state)
{
    (void)state;
    const uint64_t sizes[] = {1, 3 * MIB + 1, 40 * MIB};
    for (int k = 0; k < OPS_KINDS; k++) {
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
            struct ops_obj o;
            assert_int_equal(ops_alloc(&sh, k, sizes[i], stream, pool, &o), CUDA_SUCCESS);
            for (int half = 0; half < 2; half++) {
                if (device_used() != CTX_BYTES + o.charge || shim_used() != CTX_BYTES + o.charge)
                    fail_msg("%s(%llu)%s: device holds %llu, shim charged %llu, expected %llu",
                             ops_kind_name[k], (unsigned long long)sizes[i],
                             half ? " released, still mapped" : "",
                             (unsigned long long)(device_used() - CTX_BYTES),
                             (unsigned long long)(shim_used() - CTX_BYTES),
                             (unsigned long long)o.charge);
                if (k != OPS_VMM_RELEASE_EARLY)
                    break;
                if (!half)
                    assert_int_equal(ops_release_early(&sh, &o), CUDA_SUCCESS);
            }
            assert_int_equal(ops_free(&sh, &o, stream), CUDA_SUCCESS);
            expect_used(CTX_BYTES);
        }
        /* over the quota: out of memory, nothing reaches the device */
        struct ops_obj o;
        CUresult r = ops_alloc(&sh, k, QUOTA_BYTES, stream, pool, &o);
        if (r != CUDA_ERROR_OUT_OF_MEMORY)
            fail_msg("%s over quota: got %d", ops_kind_name[k], (int)r);
        expect_used(CTX_BYTES);
    }
}

static void test_contexts_charged_and_take_their_memory(void **state)
{
    (void)state;
    CUcontext c;
    assert_int_equal(sh.cuCtxCreate_v2(&c, 0, 0), CUDA_SUCCESS); /* pushed: now current */
    expect_used(2 * CTX_BYTES);
    struct ops_obj o1, o2;
    assert_int_equal(ops_alloc(&sh, OPS_MEM_ALLOC, 10 * MIB, NULL, NULL, &o1), CUDA_SUCCESS);
    assert_int_equal(ops_alloc(&sh, OPS_ARRAY, 5 * MIB, NULL, NULL, &o2), CUDA_SUCCESS);
    expect_used(2 * CTX_BYTES + o1.charge + o2.charge);
    assert_int_equal(sh.cuCtxDestroy_v2(c), CUDA_SUCCESS);
    assert_int_equal(sh.cuCtxSetCurrent(primary), CUDA_SUCCESS);
    expect_used(CTX_BYTES);
    /* a context that does not fit is refused like any allocation */
    CUdeviceptr big;
    assert_int_equal(sh.cuMemAlloc_v2(&big, QUOTA_BYTES - CTX_BYTES - 32 * MIB), CUDA_SUCCESS);
    assert_int_equal(sh.cuCtxCreate_v2(&c, 0, 0), CUDA_ERROR_OUT_OF_MEMORY);
    expect_used(QUOTA_BYTES - 32 * MIB);
    assert_int_equal(sh.cuMemFree_v2(big), CUDA_SUCCESS);
    /* the primary context: released to zero, it and its memory are gone */
    struct ops_obj o3;
    assert_int_equal(ops_alloc(&sh, OPS_MEM_ALLOC_MANAGED, 7 * MIB, NULL, NULL, &o3), CUDA_SUCCESS);
    assert_int_equal(sh.cuDevicePrimaryCtxRelease_v2(0), CUDA_SUCCESS);
    assert_int_equal(sh.cuDevicePrimaryCtxRetain(&primary, 0), CUDA_SUCCESS);
    assert_int_equal(sh.cuCtxSetCurrent(primary), CUDA_SUCCESS);
    expect_used(CTX_BYTES);
    assert_int_equal(sh.cuStreamCreate(&stream, 0), CUDA_SUCCESS);
}

/* xorshift64*: the sequences are reproducible from the seed in a failure. */
static uint64_t rnd(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ULL;
}

static void test_property_random_sequences(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= PROPERTY_SEEDS; seed++) {
        uint64_t s = seed * 0x9e3779b97f4a7c15ULL;
        struct ops_obj objs[MAX_OBJS];
        int n = 0;
        uint64_t model = 0;
        CUcontext extra = NULL; /* a second context holding objs[i].kind >= 0x100 */
        struct ops_obj extra_objs[MAX_OBJS];
        int nextra = 0;
        for (int step = 0; step < PROPERTY_STEPS; step++) {
            unsigned what = (unsigned)(rnd(&s) % 100);
            if (what < 50 && n < MAX_OBJS) {
                int k = (int)(rnd(&s) % OPS_KINDS);
                uint64_t size = 1 + rnd(&s) % (96 * MIB);
                struct ops_obj o;
                CUresult r = ops_alloc(&sh, k, size, stream, pool, &o);
                uint64_t need = CTX_BYTES + model + o.charge + (extra ? CTX_BYTES : 0);
                for (int i = 0; i < nextra; i++)
                    need += extra_objs[i].charge;
                if (need <= QUOTA_BYTES) {
                    if (r != CUDA_SUCCESS)
                        fail_msg("seed %llu step %d: %s(%llu) fits but got %d",
                                 (unsigned long long)seed, step, ops_kind_name[k],
                                 (unsigned long long)size, (int)r);
                    objs[n++] = o;
                    model += o.charge;
                } else if (r != CUDA_ERROR_OUT_OF_MEMORY) {
                    fail_msg("seed %llu step %d: %s(%llu) over quota but got %d",
                             (unsigned long long)seed, step, ops_kind_name[k],
                             (unsigned long long)size, (int)r);
                }
            } else if (what < 80 && n > 0) {
                int i = (int)(rnd(&s) % (unsigned)n);
                if (objs[i].kind == OPS_VMM_RELEASE_EARLY) { /* a step of its own */
                    assert_int_equal(ops_release_early(&sh, &objs[i]), CUDA_SUCCESS);
                } else {
                    assert_int_equal(ops_free(&sh, &objs[i], stream), CUDA_SUCCESS);
                    model -= objs[i].charge;
                    objs[i] = objs[--n];
                }
            } else if (what < 88) {
                /* frees the driver refuses change nothing */
                CUdeviceptr bogus = 0x10000ULL + (rnd(&s) % 4096) * 4096;
                assert_int_equal(sh.cuMemFree_v2(bogus), CUDA_ERROR_INVALID_VALUE);
                assert_int_equal(sh.cuMemRelease(bogus), CUDA_ERROR_INVALID_VALUE);
                assert_int_equal(sh.cuArrayDestroy((CUarray)(uintptr_t)bogus),
                                 CUDA_ERROR_INVALID_HANDLE);
            } else if (what < 94 && !extra) {
                if (sh.cuCtxCreate_v2(&extra, 0, 0) != CUDA_SUCCESS) {
                    extra = NULL;
                } else {
                    for (int j = 0; j < 3; j++) {
                        struct ops_obj o;
                        if (ops_alloc(&sh, OPS_MEM_ALLOC, 1 + rnd(&s) % (8 * MIB), NULL, NULL,
                                      &o) == CUDA_SUCCESS)
                            extra_objs[nextra++] = o;
                    }
                    CUcontext popped;
                    assert_int_equal(sh.cuCtxPopCurrent_v2(&popped), CUDA_SUCCESS);
                    assert_ptr_equal(popped, extra);
                }
            } else if (extra) {
                /* destroyed with live allocations: all of it comes back */
                assert_int_equal(sh.cuCtxDestroy_v2(extra), CUDA_SUCCESS);
                assert_int_equal(sh.cuCtxSetCurrent(primary), CUDA_SUCCESS);
                extra = NULL;
                nextra = 0;
            }
            uint64_t want = CTX_BYTES + model + (extra ? CTX_BYTES : 0);
            for (int i = 0; i < nextra; i++)
                want += extra_objs[i].charge;
            uint64_t dev = device_used(), shim = shim_used();
            if (dev != want || shim != want || shim > QUOTA_BYTES)
                fail_msg("seed %llu step %d: device %llu, shim %llu, model %llu",
                         (unsigned long long)seed, step, (unsigned long long)dev,
                         (unsigned long long)shim, (unsigned long long)want);
        }
        while (n > 0)
            assert_int_equal(ops_free(&sh, &objs[--n], stream), CUDA_SUCCESS);
        if (extra) {
            assert_int_equal(sh.cuCtxDestroy_v2(extra), CUDA_SUCCESS);
            assert_int_equal(sh.cuCtxSetCurrent(primary), CUDA_SUCCESS);
        }
        expect_used(CTX_BYTES);
    }
}

static int setup(void **state)
{
    (void)state;
    snprintf(ledger_path, sizeof ledger_path, "/tmp/ts-shim-mem-%d.ledger", (int)getpid());
    unlink(ledger_path);
    setenv("TESSERA_FAKE_CUDA_DEVICES", "1", 1);
    setenv("TESSERA_FAKE_CUDA_MEM_BYTES", "64G", 1);
    setenv("TESSERA_FAKE_CUDA_CTX_BYTES", "64M", 1);
    unsetenv("TESSERA_FAKE_CUDA_STATE");
    setenv("TESSERA_CUDA_DRIVER", TS_FAKE_CUDA, 1);
    setenv("TESSERA_CUDA_MEM_LIMIT", "1G", 1);
    setenv("TESSERA_CUDA_CTX_BYTES", "64M", 1);
    setenv("TESSERA_CUDA_LEDGER", ledger_path, 1);
    unsetenv("TESSERA_CUDA_COMPUTE_PERCENT");
    void *fake = dlopen(TS_FAKE_CUDA, RTLD_NOW | RTLD_LOCAL);
    void *shim = dlopen(TS_SHIM_LIB, RTLD_NOW | RTLD_LOCAL);
    if (!fake || !shim) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return -1;
    }
    if (cu_api_load(&fk, fake) != 0)
        return -1;
    cu_api_load(&sh, shim);
    /* what the shim does not wrap, the process gets from the driver */
#define FILL(name, params, args)                                                              \
    if (!sh.name)                                                                             \
        sh.name = fk.name;
    TS_CU_API(FILL)
#undef FILL
    if (sh.cuInit(0) != CUDA_SUCCESS || sh.cuDevicePrimaryCtxRetain(&primary, 0) != CUDA_SUCCESS ||
        sh.cuCtxSetCurrent(primary) != CUDA_SUCCESS ||
        sh.cuStreamCreate(&stream, 0) != CUDA_SUCCESS ||
        sh.cuDeviceGetDefaultMemPool(&pool, 0) != CUDA_SUCCESS)
        return -1;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    unlink(ledger_path);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_quota_reported_and_enforced),
        cmocka_unit_test(test_every_path_charged_exactly),
        cmocka_unit_test(test_contexts_charged_and_take_their_memory),
        cmocka_unit_test(test_property_random_sequences),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
