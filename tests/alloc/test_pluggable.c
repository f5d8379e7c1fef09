/*
 * test_pluggable.c - libtessera-alloc.so as PyTorch loads it
 * (torch.cuda.memory.CUDAPluggableAllocator: dlopen, then the alloc and free
 * entry points by name, called with a size, a device ordinal and a
 * cudaStream_t), against the fake libcuda (tests/fakes/fake_cuda.c), whose
 * virtual memory is real host memory.
 *
 * Proves: bad arguments fail cleanly with a reason; memory is usable and
 * never aliased; a free on another stream than the allocation's and a
 * recorded stream use are honoured; each device has its own allocator; the
 * shim's quota (TESSERA_CUDA_MEM_LIMIT) caps what the library holds; the
 * empty_cache hook gives cached memory back; and replaying the recorded
 * traces of tests/data/alloc through the entry points gives the
 * fragmentation of `tessera-alloc-replay --allocator tessera` within 0.1
 * point (both figures printed), also with frees moved to another stream;
 * with ../shared present, the eight full traces too.
 * Skipped when the fake or the library is not built.
 */
#include "alloc_test.h"

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <unistd.h>

#include "alloc/ptrmap.h"

#ifndef TS_ALLOC_FAKE_CUDA
#define TS_ALLOC_FAKE_CUDA ""
#endif
#ifndef TS_ALLOC_SHARED_TRACES
#define TS_ALLOC_SHARED_TRACES ""
#endif
#ifndef TS_ALLOC_PLUGGABLE_LIB
#define TS_ALLOC_PLUGGABLE_LIB ""
#endif

typedef void *(*alloc_fn)(ssize_t size, int device, void *stream);
typedef void (*free_fn)(void *ptr, ssize_t size, int device, void *stream);
typedef void (*record_fn)(void *ptr, void *stream);
typedef void (*void_fn)(void);
typedef int (*stats_fn)(int device, ts_memalloc_stats *out);
typedef const char *(*err_fn)(void);
typedef int (*stream_create_fn)(void **stream, unsigned int flags);
typedef int (*stream_destroy_fn)(void *stream);
typedef int (*mem_info_fn)(size_t *free_bytes, size_t *total);
typedef int (*ctx_fn)(void *ctx);

static struct {
    void *lib, *cuda;
    alloc_fn alloc;
    free_fn free;
    record_fn record;
    void_fn empty_cache, shutdown;
    stats_fn stats;
    err_fn last_error;
    stream_create_fn stream_create;
    stream_destroy_fn stream_destroy;
    mem_info_fn mem_info;
} P;

static void sym(void *dl, const char *name, void *slot)
{
    void *s = dlsym(dl, name);
    if (!s)
        fail_msg("%s: not exported", name);
    memcpy(slot, &s, sizeof s);
}

static int setup(void **state)
{
    (void)state;
    if (!TS_ALLOC_FAKE_CUDA[0] || access(TS_ALLOC_FAKE_CUDA, R_OK) != 0 ||
        !TS_ALLOC_PLUGGABLE_LIB[0] || access(TS_ALLOC_PLUGGABLE_LIB, R_OK) != 0)
        return 0;
    /* two 32 GiB devices; the library finds the driver as PyTorch's process
     * would have it, here through the variable the CUDA backend reads */
    setenv("TESSERA_FAKE_CUDA_DEVICES", "2", 1);
    setenv("TESSERA_FAKE_CUDA_MEM_BYTES", "32G", 1);
    setenv(TS_MEMDEV_CUDA_LIBRARY_ENV, TS_ALLOC_FAKE_CUDA, 1);
    setenv("TESSERA_CUDA_MEM_LIMIT", "1=256M", 1); /* device 1 has a quota */
    setenv("TESSERA_CUDA_CTX_BYTES", "0", 1);
    /* a physical granule is one memfd in the fake: the big trace needs ~6000 */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max < 65536 ? rl.rlim_max : 65536;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    P.cuda = dlopen(TS_ALLOC_FAKE_CUDA, RTLD_NOW | RTLD_GLOBAL);
    P.lib = dlopen(TS_ALLOC_PLUGGABLE_LIB, RTLD_NOW | RTLD_LOCAL);
    if (!P.cuda || !P.lib)
        fail_msg("dlopen: %s", dlerror());
    sym(P.lib, "tessera_alloc", &P.alloc);
    sym(P.lib, "tessera_free", &P.free);
    sym(P.lib, "tessera_record_stream", &P.record);
    sym(P.lib, "tessera_empty_cache", &P.empty_cache);
    sym(P.lib, "tessera_alloc_shutdown", &P.shutdown);
    sym(P.lib, "tessera_alloc_stats", &P.stats);
    sym(P.lib, "tessera_alloc_last_error", &P.last_error);
    sym(P.cuda, "cuStreamCreate", &P.stream_create);
    sym(P.cuda, "cuStreamDestroy_v2", &P.stream_destroy);
    sym(P.cuda, "cuMemGetInfo_v2", &P.mem_info);
    return 0;
}

static int have(void)
{
    if (!P.lib)
        print_message("skipped: the fake libcuda or libtessera-alloc.so is not built\n");
    return P.lib != NULL;
}

static ts_memalloc_stats stats_of(int device)
{
    ts_memalloc_stats st;
    memset(&st, 0, sizeof st);
    assert_int_equal(P.stats(device, &st), 0);
    return st;
}

/* Everything given back to the fake device (its own accounting). */
static void assert_device_empty(int device)
{
    P.shutdown();
    void *ctx = NULL;
    int (*retain)(void **, int) = NULL;
    int (*set_current)(void *) = NULL;
    int (*release)(int) = NULL;
    sym(P.cuda, "cuDevicePrimaryCtxRetain", &retain);
    sym(P.cuda, "cuCtxSetCurrent", &set_current);
    sym(P.cuda, "cuDevicePrimaryCtxRelease_v2", &release);
    assert_int_equal(retain(&ctx, device), 0);
    assert_int_equal(set_current(ctx), 0);
    size_t fr = 0, total = 0;
    assert_int_equal(P.mem_info(&fr, &total), 0);
    assert_int_equal(fr, total);
    assert_int_equal(release(device), 0);
}

static void test_bad_arguments(void **state)
{
    (void)state;
    if (!have())
        return;
    assert_null(P.alloc(0, 0, NULL));   /* a zero-size storage needs no memory */
    assert_null(P.alloc(-5, 0, NULL));
    assert_null(P.alloc(4096, 64, NULL));
    assert_non_null(strstr(P.last_error(), "device 64"));
    assert_null(P.alloc(4096, -1, NULL));
    assert_null(P.alloc(4096, 7, NULL)); /* the fake has two devices */
    assert_non_null(strstr(P.last_error(), "device 7"));
    P.free(NULL, 0, 0, NULL);            /* nothing */
    void *p = P.alloc(1000, 0, NULL);
    assert_non_null(p);
    int x;
    P.free(&x, 4, 0, NULL);              /* not ours: refused, said why */
    assert_non_null(strstr(P.last_error(), "not a live allocation"));
    P.free(p, 1000, 0, NULL);
    P.free(p, 1000, 0, NULL);            /* twice: the second is refused */
    assert_non_null(strstr(P.last_error(), "not a live allocation"));
    assert_int_equal(stats_of(0).live_allocs, 0);
    assert_device_empty(0);
}

/* Tags written through every live pointer: an aliased block shows as a tag
 * overwritten by another's. */
static void test_streams_and_cache(void **state)
{
    (void)state;
    if (!have())
        return;
    void *s1 = NULL, *s2 = NULL;
    enum { N = 64 };
    void *p[N];
    size_t sz[N];
    /* the first call makes the device's context current on this thread */
    void *first = P.alloc(512, 0, NULL);
    assert_non_null(first);
    assert_int_equal(P.stream_create(&s1, 0), 0);
    assert_int_equal(P.stream_create(&s2, 0), 0);
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < N; i++) {
            sz[i] = (size_t)(i % 4 == 0 ? (3u << 20) + 4096u * (unsigned)i : 1024u * (unsigned)(i + 1));
            p[i] = P.alloc((ssize_t)sz[i], 0, i % 2 ? s1 : s2);
            assert_non_null(p[i]);
            assert_int_equal((uintptr_t)p[i] % 512, 0);
            memset(p[i], (unsigned char)(i + 1), sz[i]);
        }
        for (int i = 0; i < N; i++)
            for (size_t k = 0; k < sz[i]; k += 509)
                assert_int_equal(((unsigned char *)p[i])[k], (unsigned char)(i + 1));
        /* as PyTorch frees: each on its allocation stream; every third on
         * the other stream instead, every fifth after a recorded use */
        for (int i = 0; i < N; i++) {
            void *home = i % 2 ? s1 : s2, *other = i % 2 ? s2 : s1;
            if (i % 5 == 0)
                P.record(p[i], other);
            P.free(p[i], (ssize_t)sz[i], 0, i % 3 == 0 ? other : home);
            assert_string_equal(P.last_error(), "");
        }
    }
    ts_memalloc_stats st = stats_of(0);
    assert_int_equal(st.live_allocs, 1);
    assert_true(st.reserved_bytes >= 2 * TS_MEM_GRANULE_BYTES);
    assert_true(st.dev.calls[TS_MEMDEV_EVENT_RECORD] > 0); /* the cross-stream frees */
    P.empty_cache();
    st = stats_of(0);
    assert_int_equal(st.reserved_bytes, TS_MEM_GRANULE_BYTES); /* only `first`'s granule */
    P.free(first, 512, 0, NULL);
    P.empty_cache();
    assert_int_equal(stats_of(0).reserved_bytes, 0);
    assert_int_equal(P.stream_destroy(s1), 0);
    assert_int_equal(P.stream_destroy(s2), 0);
    assert_device_empty(0);
}

/* Device 1 has a 256 MiB quota, device 0 none: per-device allocators, and
 * device 1 refuses at its quota, not at the fake device's 32 GiB. */
static void test_quota_per_device(void **state)
{
    (void)state;
    if (!have())
        return;
    void *big0 = P.alloc(1ll << 30, 0, NULL); /* 1 GiB on device 0: no quota */
    assert_non_null(big0);
    enum { MAXN = 64 };
    void *p[MAXN];
    int n = 0;
    while (n < MAXN && (p[n] = P.alloc(20 << 20, 1, NULL)) != NULL)
        n++;
    assert_int_equal(n, 12); /* 12 x 20 MiB = 240 MiB; a 13th passes 256 MiB */
    assert_non_null(strstr(P.last_error(), "tessera_alloc:"));
    ts_memalloc_stats st = stats_of(1);
    assert_true(st.reserved_bytes <= (256ull << 20));
    assert_int_equal(st.num_ooms, 1);
    assert_true(stats_of(0).reserved_bytes >= (1ull << 30));
    for (int i = 0; i < n; i++)
        P.free(p[i], 20 << 20, 1, NULL);
    P.free(big0, 1ll << 30, 0, NULL);
    assert_device_empty(1);
}

/* One recorded trace through the entry points: the initial live blocks,
 * then alloc / free_completed in order. frees_elsewhere: every third free
 * is made on another stream (a recorded use of it). */
static double replay_pluggable(const ts_memtrace *t, int frees_elsewhere, void *other)
{
    ts_ptrmap map;
    alloc_ptrmap_init(&map);
    for (size_t i = 0; i < t->nlive; i++) {
        void *p = P.alloc((ssize_t)t->live[i].requested, 0, (void *)(uintptr_t)t->live[i].stream);
        if (!p)
            fail_msg("initial live block %zu: %s", i, P.last_error());
        assert_int_equal(alloc_ptrmap_put(&map, t->live[i].addr, p), 0);
    }
    size_t nfree = 0;
    for (size_t i = 0; i < t->nev; i++) {
        const ts_memtrace_ev *e = &t->ev[i];
        if (e->op == TS_MEMTRACE_ALLOC) {
            void *p = P.alloc((ssize_t)e->size, 0, (void *)(uintptr_t)e->stream);
            if (!p)
                fail_msg("seq %lld: %s", (long long)e->seq, P.last_error());
            assert_int_equal(alloc_ptrmap_put(&map, e->addr, p), 0);
        } else if (e->op == TS_MEMTRACE_FREE) {
            void *p = alloc_ptrmap_del(&map, e->addr);
            assert_non_null(p);
            void *s = frees_elsewhere && ++nfree % 3 == 0 ? other
                                                           : (void *)(uintptr_t)e->stream;
            P.free(p, (ssize_t)e->size, 0, s);
            assert_string_equal(P.last_error(), "");
        }
    }
    ts_memalloc_stats st = stats_of(0);
    assert_int_equal(st.peak_requested_bytes, ts_memtrace_peak_requested(t));
    /* empty_cache leaves only the granules live blocks use */
    uint64_t before = st.reserved_bytes;
    P.empty_cache();
    ts_memalloc_stats after = stats_of(0);
    assert_true(after.reserved_bytes <= before);
    assert_true(after.reserved_bytes >= after.requested_bytes);
    size_t pos = 0;
    uint64_t key;
    void *val;
    while (alloc_ptrmap_next(&map, &pos, &key, &val))
        P.free(val, 0, 0, (void *)(uintptr_t)0);
    alloc_ptrmap_destroy(&map);
    return st.fragmentation;
}

/* One trace, both ways: what `tessera-alloc-replay --allocator tessera`
 * reports (ts_memreplay_run, the simulated device) against the entry points
 * on the fake libcuda, plain and with every third free on another stream. */
static void compare_trace(const char *name, const char *ev, const char *live)
{
    ts_memtrace t;
    ts_err err = {0, ""};
    if (ts_memtrace_load(ev, live, NULL, &t, &err) != 0)
        fail_msg("%s", err.msg);
    ts_memreplay_opts o = {.kind = TS_MEMALLOC_TESSERA};
    ts_memreplay_result r;
    if (ts_memreplay_run(&t, &o, &r, &err) != 0)
        fail_msg("%s", err.msg);
    double plug = replay_pluggable(&t, 0, NULL);
    assert_device_empty(0);
    void *s1 = NULL;
    void *warm = P.alloc(512, 0, NULL); /* the context, for the stream */
    assert_int_equal(P.stream_create(&s1, 0), 0);
    P.free(warm, 512, 0, NULL);
    double plug_x = replay_pluggable(&t, 1, s1);
    assert_int_equal(P.stream_destroy(s1), 0);
    assert_device_empty(0);
    print_message("%s: fragmentation replay %.3f %%, pluggable %.3f %%, pluggable with "
                  "every third free on another stream %.3f %%\n", name,
                  100 * r.fragmentation, 100 * plug, 100 * plug_x);
    assert_true(fabs(plug - r.fragmentation) <= 0.001);
    assert_true(fabs(plug_x - r.fragmentation) <= 0.001);
    ts_memtrace_free(&t);
}

/* The excerpts shipped in tests/data/alloc. */
static void test_replay_traces(void **state)
{
    (void)state;
    if (!have())
        return;
    static const char *const traces[] = {"medium_128_inference", "medium_512_training"};
    for (size_t k = 0; k < sizeof traces / sizeof traces[0]; k++) {
        char ev[512], live[512];
        snprintf(ev, sizeof ev, "%s/alloc/%s.events.csv", TS_TEST_DATA, traces[k]);
        snprintf(live, sizeof live, "%s/alloc/%s.initial_live.csv", TS_TEST_DATA, traces[k]);
        compare_trace(traces[k], ev, live);
    }
}

/* The eight full traces, when ../shared is there (up to 23 GiB at peak:
 * about 11,600 granules, one memfd each in the fake). */
static void test_full_traces(void **state)
{
    (void)state;
    if (!have())
        return;
    static const char *const traces[] = {
        "medium_128_inference", "medium_256_inference", "medium_512_inference",
        "medium_1024_inference", "medium_128_training", "medium_256_training",
        "medium_512_training", "medium_1024_training"};
    char ev[512], live[512];
    snprintf(ev, sizeof ev, "%s/cs336-medium-wedsonlin/csv/%s_memory_snapshot.events.csv",
             TS_ALLOC_SHARED_TRACES, traces[0]);
    if (!TS_ALLOC_SHARED_TRACES[0] || access(ev, R_OK) != 0) {
        print_message("skipped: no full traces in %s\n", TS_ALLOC_SHARED_TRACES);
        return;
    }
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur < 16384) {
        print_message("skipped: the full traces need 16384 descriptors (the fake's memfds)\n");
        return;
    }
    for (size_t k = 0; k < sizeof traces / sizeof traces[0]; k++) {
        const char *base = "%s/cs336-medium-wedsonlin/csv/%s_memory_snapshot.%s.csv";
        snprintf(ev, sizeof ev, base, TS_ALLOC_SHARED_TRACES, traces[k], "events");
        snprintf(live, sizeof live, base, TS_ALLOC_SHARED_TRACES, traces[k], "initial_live");
        compare_trace(traces[k], ev, live);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_streams_and_cache),
        cmocka_unit_test(test_quota_per_device),
        cmocka_unit_test(test_replay_traces),
        cmocka_unit_test(test_full_traces),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
