/*
 * test_trace.c - the trace files and the generator: the loader reads the
 * shipped excerpts (counts checked against the files) and names file, line
 * and column for bad input; a written trace loads back identically; the
 * generator is deterministic for a seed, varies lengths step to step, frees
 * only what is live (a replay accepts it), keeps each model on its stream,
 * and refuses bad configurations with the field named.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tessera/alloc.h"

#define DATA TS_TEST_DATA "/alloc"
#define PATH_BYTES 256

static char tmpdir[PATH_BYTES];

static int setup(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ts-test-trace-%d", (int)getpid());
    char cmd[PATH_BYTES * 2];
    snprintf(cmd, sizeof cmd, "mkdir -p %s", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[PATH_BYTES * 2];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

static const char *write_file(const char *name, const char *text)
{
    static char path[PATH_BYTES * 2];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    return path;
}

static void test_load_excerpt(void **state)
{
    (void)state;
    ts_memtrace t;
    ts_err err = {0, ""};
    assert_int_equal(ts_memtrace_load(DATA "/medium_128_inference.events.csv",
                                      DATA "/medium_128_inference.initial_live.csv",
                                      DATA "/medium_128_inference.segments.csv", &t, &err), 0);
    size_t allocs = 0, frees = 0;
    for (size_t i = 0; i < t.nev; i++) {
        allocs += t.ev[i].op == TS_MEMTRACE_ALLOC;
        frees += t.ev[i].op == TS_MEMTRACE_FREE;
    }
    assert_int_equal(allocs, 674);
    assert_int_equal(frees, 663);
    assert_int_equal(t.nlive, 223);
    assert_int_equal(t.nseg, 98);
    for (size_t i = 1; i < t.nlive; i++)
        assert_true(t.live[i - 1].addr < t.live[i].addr);
    ts_memtrace_free(&t);
}

static void expect_error(const char *events, const char *live, const char *segs, const char *want)
{
    ts_memtrace t;
    ts_err err = {0, ""};
    assert_int_equal(ts_memtrace_load(events, live, segs, &t, &err), TS_EINVAL);
    if (!strstr(err.msg, want))
        fail_msg("error \"%s\" does not say \"%s\"", err.msg, want);
}

static void test_load_errors(void **state)
{
    (void)state;
    const char *hdr = "seq,time_us,action,addr,size,stream\n";
    char buf[512];
    expect_error(write_file("a.csv", "seq,action,size,stream\n"), NULL, NULL,
                 "a.csv:1: header: no column \"addr\"");
    snprintf(buf, sizeof buf, "%s0,1,alloc,4096,512,0\n1,2,alloc,8192,-5,0\n", hdr);
    expect_error(write_file("b.csv", buf), NULL, NULL,
                 "b.csv:3: size: must be a non-negative integer, got \"-5\"");
    snprintf(buf, sizeof buf, "%s0,1,alloc,4096,0,0\n", hdr);
    expect_error(write_file("c.csv", buf), NULL, NULL, "c.csv:2: size: an alloc must be > 0");
    snprintf(buf, sizeof buf, "%s0,1,alloc,4096,512\n", hdr);
    expect_error(write_file("d.csv", buf), NULL, NULL, "d.csv:2: stream: missing");
    snprintf(buf, sizeof buf, "%s0,1,alloc,4096,512,0\n", hdr);
    char ok[PATH_BYTES * 2];
    snprintf(ok, sizeof ok, "%s", write_file("e.csv", buf));
    expect_error(ok, NULL, write_file("s.csv", "addr,total_size,stream,pool\n1,2097152,0,tiny\n"),
                 "s.csv:2: pool: must be small or large");
    expect_error(ok, write_file("l.csv", "addr,requested_size,block_size,stream\nx,1,,0\n"), NULL,
                 "l.csv:2: addr:");
    /* each numeric column by its name; only block_size may be empty (unknown) */
    expect_error(ok, write_file("m.csv", "addr,requested_size,block_size,stream\n1,1,-1,0\n"),
                 NULL, "m.csv:2: block_size:");
    expect_error(ok, write_file("n.csv", "addr,requested_size,block_size,stream\n1,,,0\n"),
                 NULL, "n.csv:2: requested_size:");
    expect_error(ok, NULL, write_file("t.csv", "addr,total_size,stream,pool\n1,2,-1,small\n"),
                 "t.csv:2: stream:");
    ts_memtrace t;
    ts_err err = {0, ""};
    assert_int_equal(ts_memtrace_load("/nonexistent.csv", NULL, NULL, &t, &err), TS_EIO);
    assert_non_null(strstr(err.msg, "/nonexistent.csv"));
}

static ts_memgen_model small_model(void)
{
    ts_memgen_model m = {2, 64, 4, 0, 100, 2, 8, 64, 24.0, 0.8, 8, 2, 4, 0, 1, 0};
    return m;
}

static void test_write_round_trip(void **state)
{
    (void)state;
    ts_memgen_model m = small_model();
    ts_memgen_config cfg = {.models = &m, .nmodels = 1, .steps = 3, .seed = 5};
    ts_memtrace t, back;
    ts_err err = {0, ""};
    assert_int_equal(ts_memgen_run(&cfg, &t, &err), 0);
    char ev[PATH_BYTES * 2], live[PATH_BYTES * 2];
    snprintf(ev, sizeof ev, "%s/g.events.csv", tmpdir);
    snprintf(live, sizeof live, "%s/g.initial_live.csv", tmpdir);
    assert_int_equal(ts_memtrace_write(&t, ev, live, &err), 0);
    assert_int_equal(ts_memtrace_load(ev, live, NULL, &back, &err), 0);
    assert_int_equal(back.nev, t.nev);
    assert_int_equal(back.nlive, 0);
    for (size_t i = 0; i < t.nev; i++) {
        assert_int_equal(back.ev[i].op, t.ev[i].op);
        assert_int_equal(back.ev[i].addr, t.ev[i].addr);
        assert_int_equal(back.ev[i].size, t.ev[i].size);
        assert_int_equal(back.ev[i].stream, t.ev[i].stream);
    }
    assert_int_equal(ts_memtrace_peak_requested(&back), ts_memtrace_peak_requested(&t));
    ts_memtrace_free(&t);
    ts_memtrace_free(&back);
}

static void test_generator(void **state)
{
    (void)state;
    ts_memgen_model m[2] = {small_model(), small_model()};
    m[1].train = 0;
    m[1].stream = 7;
    ts_memgen_config cfg = {.models = m, .nmodels = 2, .steps = 6, .seed = 11};
    ts_memtrace a, b, c;
    ts_err err = {0, ""};
    assert_int_equal(ts_memgen_run(&cfg, &a, &err), 0);
    assert_int_equal(ts_memgen_run(&cfg, &b, &err), 0);
    cfg.seed = 12;
    assert_int_equal(ts_memgen_run(&cfg, &c, &err), 0);
    assert_int_equal(a.nev, b.nev);
    assert_memory_equal(a.ev, b.ev, a.nev * sizeof *a.ev);
    int differs = a.nev != c.nev;
    for (size_t i = 0; !differs && i < a.nev; i++)
        differs = a.ev[i].size != c.ev[i].size || a.ev[i].stream != c.ev[i].stream;
    assert_true(differs);
    /* streams as configured; lengths vary: the qkv activation (3 x hidden x
     * batch x seq x 2 bytes) takes several sizes */
    uint64_t sizes[64];
    int nsizes = 0;
    for (size_t i = 0; i < a.nev; i++) {
        assert_true(a.ev[i].stream == 0 || a.ev[i].stream == 7);
        uint64_t s = a.ev[i].size;
        if (a.ev[i].op == TS_MEMTRACE_ALLOC && a.ev[i].stream == 0 && s % (3 * 64 * 2 * 2) == 0 &&
            s / (3 * 64 * 2 * 2) >= 8 && s / (3 * 64 * 2 * 2) <= 64) {
            int seen = 0;
            for (int k = 0; k < nsizes; k++)
                seen |= sizes[k] == s;
            if (!seen && nsizes < 64)
                sizes[nsizes++] = s;
        }
    }
    assert_true(nsizes >= 3);
    /* every free is of a live block: the replay accepts the trace */
    ts_memreplay_opts o = {.kind = TS_MEMALLOC_TESSERA};
    ts_memreplay_result r;
    assert_int_equal(ts_memreplay_run(&a, &o, &r, &err), 0);
    assert_false(r.oom);
    assert_int_equal(r.allocs, r.frees + r.stats.live_allocs);
    ts_memtrace_free(&a);
    ts_memtrace_free(&b);
    ts_memtrace_free(&c);
}

static void test_generator_errors(void **state)
{
    (void)state;
    ts_memgen_model m = small_model();
    ts_memtrace t;
    ts_err err = {0, ""};
    ts_memgen_config cfg = {.models = &m, .nmodels = 0, .steps = 1, .seed = 1};
    assert_int_equal(ts_memgen_run(&cfg, &t, &err), TS_EINVAL);
    assert_non_null(strstr(err.msg, "nmodels"));
    cfg.nmodels = 1;
    m.seq_max = 4;
    assert_int_equal(ts_memgen_run(&cfg, &t, &err), TS_EINVAL);
    assert_non_null(strstr(err.msg, "models[0].seq_max"));
    ts_memgen_model ms[TS_MEMGEN_MAX_MODELS];
    assert_int_equal(ts_memgen_preset("multi-4", ms, TS_MEMGEN_MAX_MODELS, &err), 4);
    assert_int_equal(ts_memgen_preset("varlen-gpt2m", ms, TS_MEMGEN_MAX_MODELS, &err), 1);
    assert_int_equal(ts_memgen_preset("nope", ms, TS_MEMGEN_MAX_MODELS, &err), TS_EINVAL);
    assert_non_null(strstr(err.msg, "varlen-gpt2m"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_load_excerpt),
        cmocka_unit_test(test_load_errors),
        cmocka_unit_test(test_write_round_trip),
        cmocka_unit_test(test_generator),
        cmocka_unit_test(test_generator_errors),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
