/*
 * test_fidelity.c - the PyTorch model against real traces of PyTorch's own
 * allocator (tests/data/alloc: excerpts shipped with the repository; the
 * full traces of ../shared/traces/alloc when they are there).
 *
 * Warm start (the model begins with the segments and live blocks the real
 * allocator had): every allocation lands at the address the trace recorded,
 * the model allocates exactly the segments the trace did (count and bytes),
 * and ends with the recorded reserved bytes. Cold start (from an empty
 * device, live blocks first): reserved bytes at the end, and the bytes of the
 * segments the model creates, within 2 % of the recorded segments. The
 * trace loader's peak of requested bytes matches the traces' README.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tessera/alloc.h"

#ifndef TS_ALLOC_SHARED_TRACES
#define TS_ALLOC_SHARED_TRACES ""
#endif

#define DATA TS_TEST_DATA "/alloc"
#define PATH_BYTES 1024
#define TOLERANCE 0.02
#define MIB (1024.0 * 1024.0)

static void load(const char *events, const char *live, const char *segs, ts_memtrace *t)
{
    ts_err err = {0, ""};
    if (ts_memtrace_load(events, live, segs, t, &err) != 0)
        fail_msg("load: %s", err.msg);
}

static void replay(const ts_memtrace *t, ts_memalloc_kind kind, int warm, ts_memreplay_result *r)
{
    ts_err err = {0, ""};
    ts_memreplay_opts o = {.kind = kind, .warm = warm};
    if (ts_memreplay_run(t, &o, r, &err) != 0)
        fail_msg("replay: %s", err.msg);
    assert_false(r->oom);
}

static void within(double got, double want, const char *what)
{
    if (fabs(got - want) > TOLERANCE * want)
        fail_msg("%s: %.1f, recorded %.1f (more than 2 %% apart)", what, got, want);
}

static void warm_checks(const ts_memtrace *t, uint64_t want_segs, uint64_t want_seg_bytes)
{
    ts_memreplay_result r;
    replay(t, TS_MEMALLOC_PYTORCH, 1, &r);
    assert_true(r.allocs > 0);
    if (r.addr_matches != r.allocs)
        fail_msg("%llu of %llu allocations where the trace has them",
                 (unsigned long long)r.addr_matches, (unsigned long long)r.allocs);
    assert_int_equal(r.trace_segment_allocs, want_segs);
    assert_int_equal(r.trace_segment_alloc_bytes, want_seg_bytes);
    assert_int_equal(r.model_segment_allocs, r.trace_segment_allocs);
    assert_int_equal(r.model_segment_alloc_bytes, r.trace_segment_alloc_bytes);
}

/* The excerpts in the repository: every allocation where PyTorch put it. */
static void test_excerpts_warm(void **state)
{
    (void)state;
    ts_memtrace t;
    load(DATA "/medium_128_inference.events.csv", DATA "/medium_128_inference.initial_live.csv",
         DATA "/medium_128_inference.segments.csv", &t);
    warm_checks(&t, 0, 0);
    ts_memtrace_free(&t);
    load(DATA "/medium_512_training.events.csv", DATA "/medium_512_training.initial_live.csv",
         DATA "/medium_512_training.segments.csv", &t);
    warm_checks(&t, 1, 64ull << 20);
    ts_memtrace_free(&t);
}

/* The model must be able to disagree: a live block left out makes the
 * recorded addresses unreachable. */
static void test_warm_detects_divergence(void **state)
{
    (void)state;
    ts_memtrace t;
    load(DATA "/medium_128_inference.events.csv", DATA "/medium_128_inference.initial_live.csv",
         DATA "/medium_128_inference.segments.csv", &t);
    /* move the first segment's pool: its blocks then serve the wrong sizes */
    for (size_t i = 0; i < t.nseg; i++)
        t.seg[i].small_pool = !t.seg[i].small_pool;
    ts_memreplay_opts o = {.kind = TS_MEMALLOC_PYTORCH, .warm = 1};
    ts_memreplay_result r;
    ts_err err = {0, ""};
    int rc = ts_memreplay_run(&t, &o, &r, &err);
    assert_true(rc != 0 || r.addr_matches < r.allocs);
    ts_memtrace_free(&t);
}

static const struct trace_row {
    const char *name;
    double peak_req_mib; /* ../shared/traces/alloc/README.md */
} traces[] = {
    {"medium_128_inference", 1656.5},  {"medium_256_inference", 1710.7},
    {"medium_512_inference", 1859.0},  {"medium_1024_inference", 2744.1},
    {"medium_128_training", 6688.4},   {"medium_256_training", 8681.8},
    {"medium_512_training", 11851.0},  {"medium_1024_training", 23085.8},
};

static int shared_path(char *out, size_t n, const char *name, const char *what)
{
    snprintf(out, n, "%s/cs336-medium-wedsonlin/csv/%s_memory_snapshot.%s.csv",
             TS_ALLOC_SHARED_TRACES, name, what);
    return access(out, R_OK) == 0;
}

/* The full traces: warm start exact, cold start within 2 %. */
static void test_full_traces(void **state)
{
    (void)state;
    char ev[PATH_BYTES], live[PATH_BYTES], segs[PATH_BYTES];
    if (!TS_ALLOC_SHARED_TRACES[0] || !shared_path(ev, sizeof ev, traces[0].name, "events"))
        skip();
    for (size_t i = 0; i < sizeof traces / sizeof traces[0]; i++) {
        const char *n = traces[i].name;
        assert_true(shared_path(ev, sizeof ev, n, "events"));
        assert_true(shared_path(live, sizeof live, n, "initial_live"));
        snprintf(segs, sizeof segs, "%s/%s.segments.csv", DATA, n);
        ts_memtrace t;
        load(ev, live, segs, &t);
        if (fabs((double)ts_memtrace_peak_requested(&t) / MIB - traces[i].peak_req_mib) > 0.05)
            fail_msg("%s: peak requested %.2f MiB, README %.1f", n,
                     (double)ts_memtrace_peak_requested(&t) / MIB, traces[i].peak_req_mib);
        uint64_t seg_bytes = 0;
        for (size_t k = 0; k < t.nseg; k++)
            seg_bytes += t.seg[k].size;
        ts_memreplay_result r;
        replay(&t, TS_MEMALLOC_PYTORCH, 1, &r);
        if (r.addr_matches != r.allocs)
            fail_msg("%s warm: %llu of %llu addresses as recorded", n,
                     (unsigned long long)r.addr_matches, (unsigned long long)r.allocs);
        assert_int_equal(r.model_segment_allocs, r.trace_segment_allocs);
        assert_int_equal(r.model_segment_alloc_bytes, r.trace_segment_alloc_bytes);
        assert_int_equal(r.reserved_end, r.trace_reserved_end);
        replay(&t, TS_MEMALLOC_PYTORCH, 0, &r);
        within((double)r.reserved_end, (double)r.trace_reserved_end, "cold reserved at end");
        within((double)r.stats.segment_alloc_bytes, (double)seg_bytes, "cold segment bytes");
        ts_memtrace_free(&t);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_excerpts_warm),
        cmocka_unit_test(test_warm_detects_divergence),
        cmocka_unit_test(test_full_traces),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
