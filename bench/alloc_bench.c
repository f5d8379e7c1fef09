/*
 * alloc_bench.c - tessera-bench-alloc: every figure of the allocator issue
 * in one run, on the simulated device (bench/alloc drives it).
 *
 *   tessera-bench-alloc SHARED_TRACES_DIR DATA_DIR OUT.json [--quick]
 *
 * 1. Fidelity: the PyTorch model replayed on the eight recorded traces, warm
 *    (from the recorded segments: addresses and segment allocations against
 *    the trace) and cold (from nothing: segments and reserved bytes at the
 *    end against the snapshot's).
 * 2. Fragmentation, 1 - peak requested / peak reserved, of tessera, PyTorch
 *    and PyTorch with expandable segments on every trace and on generated
 *    ones (variable sequence lengths, several models on one GPU).
 * 3. Capacity: on generated traces with a hard capacity, the largest batch
 *    and the longest sequence each allocator runs without running out.
 * 4. Speed: median cost of an alloc and a free (interleaved repetitions, the
 *    median of the per-run medians) and device calls per 1,000 operations.
 * Human-readable tables go to stdout, every number to OUT.json.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tessera/alloc.h"

#define MIB (1024.0 * 1024.0)
#define GIB (1ull << 30)
#define PATH_BYTES 1024
#define NKIND 3
#define SPEED_REPS 5
#define GEN_STEPS 6
#define GEN_SEED 1

static const char *const traces[] = {
    "medium_128_inference", "medium_256_inference", "medium_512_inference",
    "medium_1024_inference", "medium_128_training",  "medium_256_training",
    "medium_512_training",  "medium_1024_training",
};
#define NTRACES (sizeof traces / sizeof traces[0])

static const char *const presets[] = {"varlen-gpt2m", "varlen-1b-flash", "fixed-gpt2m",
                                      "multi-4"};
#define NPRESETS (sizeof presets / sizeof presets[0])

static FILE *js;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void die(const char *what, const ts_err *err)
{
    fprintf(stderr, "tessera-bench-alloc: %s: %s\n", what, err->msg);
    exit(1);
}

static int load_trace(const char *shared, const char *data, const char *name, ts_memtrace *t)
{
    char ev[PATH_BYTES], live[PATH_BYTES], seg[PATH_BYTES];
    snprintf(ev, sizeof ev, "%s/cs336-medium-wedsonlin/csv/%s_memory_snapshot.events.csv",
             shared, name);
    snprintf(live, sizeof live,
             "%s/cs336-medium-wedsonlin/csv/%s_memory_snapshot.initial_live.csv", shared, name);
    snprintf(seg, sizeof seg, "%s/%s.segments.csv", data, name);
    ts_err err = {0, ""};
    if (ts_memtrace_load(ev, live, seg, t, &err) != 0) {
        fprintf(stderr, "tessera-bench-alloc: %s\n", err.msg);
        return -1;
    }
    return 0;
}

static void gen_trace(const char *preset, int batch, int seq_max, ts_memtrace *t)
{
    ts_memgen_model m[TS_MEMGEN_MAX_MODELS];
    ts_err err = {0, ""};
    int n = ts_memgen_preset(preset, m, TS_MEMGEN_MAX_MODELS, &err);
    if (n < 0)
        die(preset, &err);
    for (int i = 0; i < n; i++) {
        if (batch)
            m[i].batch = batch;
        if (seq_max) {
            m[i].seq_median = m[i].seq_median * seq_max / m[i].seq_max;
            m[i].seq_max = seq_max;
            if (m[i].seq_min > seq_max)
                m[i].seq_min = seq_max;
        }
    }
    ts_memgen_config cfg = {.models = m, .nmodels = n, .steps = GEN_STEPS, .seed = GEN_SEED};
    if (ts_memgen_run(&cfg, t, &err) != 0)
        die(preset, &err);
}

static void run(const ts_memtrace *t, int kind, int warm, uint64_t cap, int timed,
                ts_memreplay_result *r)
{
    ts_memreplay_opts o = {.kind = (ts_memalloc_kind)kind, .capacity_bytes = cap, .warm = warm,
                           .clock_ns = timed ? now_ns : NULL};
    ts_err err = {0, ""};
    if (ts_memreplay_run(t, &o, r, &err) != 0)
        die("replay", &err);
}

static double pct(double a, double b)
{
    return b ? 100.0 * (a - b) / b : 0;
}

/* ---- 1. fidelity ------------------------------------------------------- */

static void fidelity(const char *shared, const char *data)
{
    printf("\n== Fidelity of the PyTorch model on the recorded traces ==\n");
    printf("warm: started from the recorded segments; cold: from an empty device\n");
    printf("%-22s %7s | %-13s %-16s %-17s | %-14s %-19s %-17s\n", "trace", "allocs",
           "warm addr", "warm seg_alloc", "warm reserved end", "cold segments",
           "cold segment bytes", "cold reserved end");
    fprintf(js, "\"fidelity\":[");
    for (size_t i = 0; i < NTRACES; i++) {
        ts_memtrace t;
        if (load_trace(shared, data, traces[i], &t) != 0)
            exit(1);
        uint64_t seg_bytes = 0;
        for (size_t k = 0; k < t.nseg; k++)
            seg_bytes += t.seg[k].size;
        ts_memreplay_result w, c;
        run(&t, TS_MEMALLOC_PYTORCH, 1, 0, 0, &w);
        run(&t, TS_MEMALLOC_PYTORCH, 0, 0, 0, &c);
        char wa[32], ws[32], wr[32], cs[32], cb[40], cr[40];
        snprintf(wa, sizeof wa, "%llu/%llu", (unsigned long long)w.addr_matches,
                 (unsigned long long)w.allocs);
        snprintf(ws, sizeof ws, "%llu/%llu", (unsigned long long)w.model_segment_allocs,
                 (unsigned long long)w.trace_segment_allocs);
        snprintf(wr, sizeof wr, "%.0f/%.0f MiB", w.reserved_end / MIB, w.trace_reserved_end / MIB);
        snprintf(cs, sizeof cs, "%llu/%zu %+.1f%%", (unsigned long long)c.stats.segment_allocs,
                 t.nseg, pct((double)c.stats.segment_allocs, (double)t.nseg));
        snprintf(cb, sizeof cb, "%.0f/%.0f %+.2f%%", c.stats.segment_alloc_bytes / MIB,
                 seg_bytes / MIB, pct((double)c.stats.segment_alloc_bytes, (double)seg_bytes));
        snprintf(cr, sizeof cr, "%.0f/%.0f %+.2f%%", c.reserved_end / MIB,
                 c.trace_reserved_end / MIB, pct((double)c.reserved_end, (double)c.trace_reserved_end));
        printf("%-22s %7llu | %-13s %-16s %-17s | %-14s %-19s %-17s\n", traces[i],
               (unsigned long long)w.allocs, wa, ws, wr, cs, cb, cr);
        fprintf(js,
                "%s{\"trace\":\"%s\",\"allocs\":%llu,\"warm_addr_matches\":%llu,"
                "\"warm_model_segment_allocs\":%llu,\"warm_model_segment_alloc_bytes\":%llu,"
                "\"trace_segment_allocs\":%llu,\"trace_segment_alloc_bytes\":%llu,"
                "\"warm_reserved_end\":%llu,\"recorded_reserved_end\":%llu,"
                "\"cold_segments\":%llu,\"recorded_segments\":%zu,\"cold_segment_bytes\":%llu,"
                "\"recorded_segment_bytes\":%llu,\"cold_reserved_end\":%llu}",
                i ? "," : "", traces[i], (unsigned long long)w.allocs,
                (unsigned long long)w.addr_matches, (unsigned long long)w.model_segment_allocs,
                (unsigned long long)w.model_segment_alloc_bytes,
                (unsigned long long)w.trace_segment_allocs,
                (unsigned long long)w.trace_segment_alloc_bytes,
                (unsigned long long)w.reserved_end, (unsigned long long)w.trace_reserved_end,
                (unsigned long long)c.stats.segment_allocs, t.nseg,
                (unsigned long long)c.stats.segment_alloc_bytes, (unsigned long long)seg_bytes,
                (unsigned long long)c.reserved_end);
        ts_memtrace_free(&t);
    }
    fprintf(js, "],\n");
}

/* ---- 2 and 4. fragmentation, speed, device calls ------------------------ */

typedef struct row {
    char name[40];
    uint64_t peak_req, ops;
    ts_memreplay_result r[NKIND];
    double pair_ns[NKIND]; /* median over runs of the per-run median alloc + free */
} row;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void measure(const char *name, const ts_memtrace *t, int reps, row *out)
{
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "%s", name);
    double v[NKIND][SPEED_REPS];
    for (int rep = 0; rep < reps; rep++) /* interleaved, so drift hits all alike */
        for (int k = 0; k < NKIND; k++) {
            ts_memreplay_result r;
            run(t, k, 0, 0, 1, &r);
            v[k][rep] = r.median_alloc_ns + r.median_free_ns;
            if (rep == 0)
                out->r[k] = r;
        }
    for (int k = 0; k < NKIND; k++) {
        qsort(v[k], (size_t)reps, sizeof v[k][0], cmp_double);
        out->pair_ns[k] = v[k][reps / 2];
    }
    out->peak_req = out->r[0].peak_requested;
    out->ops = out->r[0].allocs + out->r[0].frees;
}

static double per_k(uint64_t calls, uint64_t ops)
{
    return ops ? 1000.0 * (double)calls / (double)ops : 0;
}

static void report(row *rows, size_t n)
{
    printf("\n== Fragmentation: 1 - peak requested / peak reserved ==\n");
    printf("%-22s %11s | %-21s | %-21s | %-21s\n", "trace", "peak req", "tessera",
           "pytorch", "pytorch-expandable");
    for (size_t i = 0; i < n; i++) {
        printf("%-22s %7.0f MiB |", rows[i].name, rows[i].peak_req / MIB);
        for (int k = 0; k < NKIND; k++)
            printf(" %7.0f MiB %6.2f %% |", rows[i].r[k].peak_reserved / MIB,
                   100.0 * rows[i].r[k].fragmentation);
        printf("\n");
    }
    printf("\n== Speed (median alloc + free, ns, sim device) and device calls ==\n");
    printf("device calls = create+release+map+unmap+malloc+free per 1,000 alloc/free "
           "operations (whole trace; second half of it)\n");
    printf("%-22s %8s | %-26s | %-26s | %-26s | %5s\n", "trace", "ops", "tessera ns calls/1k",
           "pytorch ns calls/1k", "expandable ns calls/1k", "ratio");
    double ratios[64];
    for (size_t i = 0; i < n; i++) {
        printf("%-22s %8llu |", rows[i].name, (unsigned long long)rows[i].ops);
        for (int k = 0; k < NKIND; k++) {
            const ts_memreplay_result *r = &rows[i].r[k];
            printf(" %5.0f %8.1f; %8.1f |", rows[i].pair_ns[k],
                   per_k(r->device_calls, r->allocs + r->frees),
                   per_k(r->device_calls_late, r->ops_late));
        }
        ratios[i] = rows[i].pair_ns[1] ? rows[i].pair_ns[0] / rows[i].pair_ns[1] : 0;
        printf(" %5.2f\n", ratios[i]);
    }
    qsort(ratios, n, sizeof ratios[0], cmp_double);
    printf("median ratio tessera / pytorch over these traces: %.2f (worst %.2f)\n",
           ratios[n / 2], ratios[n - 1]);
    /* each timed call includes one clock read; its own cost, for reference */
    static double gaps[10001];
    for (int i = 0; i < 10001; i++) {
        uint64_t t0 = now_ns();
        gaps[i] = (double)(now_ns() - t0);
    }
    qsort(gaps, 10001, sizeof gaps[0], cmp_double);
    printf("(each figure includes the timer: back-to-back clock reads take %.0f ns, median)\n",
           gaps[5000]);
    fprintf(js, "\"timer_ns\":%.1f,\n", gaps[5000]);
    fprintf(js, "\"traces\":[");
    for (size_t i = 0; i < n; i++) {
        fprintf(js, "%s{\"trace\":\"%s\",\"peak_requested\":%llu,\"ops\":%llu", i ? "," : "",
                rows[i].name, (unsigned long long)rows[i].peak_req,
                (unsigned long long)rows[i].ops);
        for (int k = 0; k < NKIND; k++) {
            const ts_memreplay_result *r = &rows[i].r[k];
            fprintf(js,
                    ",\"%s\":{\"peak_reserved\":%llu,\"fragmentation\":%.6f,"
                    "\"median_pair_ns\":%.1f,\"mean_op_ns\":%.1f,\"device_calls\":%llu,"
                    "\"calls_per_1000_ops\":%.2f,\"calls_per_1000_ops_late\":%.2f,"
                    "\"stitched\":%llu,\"stitch_cache_hits\":%llu,\"events_waited\":%llu}",
                    ts_memalloc_kind_name((ts_memalloc_kind)k),
                    (unsigned long long)r->peak_reserved, r->fragmentation, rows[i].pair_ns[k],
                    r->mean_op_ns, (unsigned long long)r->device_calls,
                    per_k(r->device_calls, r->allocs + r->frees),
                    per_k(r->device_calls_late, r->ops_late),
                    (unsigned long long)r->stats.stitched_allocs,
                    (unsigned long long)r->stats.stitch_cache_hits,
                    (unsigned long long)r->stats.dev.calls[TS_MEMDEV_STREAM_WAIT]);
        }
        fprintf(js, ",\"ratio_tessera_pytorch\":%.4f}", rows[i].pair_ns[1] ?
                rows[i].pair_ns[0] / rows[i].pair_ns[1] : 0);
    }
    fprintf(js, "],\n\"median_speed_ratio\":%.4f,\n", ratios[n / 2]);
}

/* ---- 3. capacity ------------------------------------------------------- */

/* Largest value in [lo, hi] (step) every allocator-run below which fits. */
static void sweep(const char *title, const char *preset, uint64_t cap, int batch_sweep, int lo,
                  int hi, int step, int fixed)
{
    int best[NKIND] = {0, 0, 0}, alive[NKIND] = {1, 1, 1};
    uint64_t first_oom_seq[NKIND] = {0, 0, 0};
    for (int v = lo; v <= hi && (alive[0] || alive[1] || alive[2]); v += step) {
        ts_memtrace t;
        gen_trace(preset, batch_sweep ? v : fixed, batch_sweep ? fixed : v, &t);
        for (int k = 0; k < NKIND; k++) {
            if (!alive[k])
                continue;
            ts_memreplay_result r;
            run(&t, k, 0, cap, 0, &r);
            if (r.oom) {
                alive[k] = 0;
                first_oom_seq[k] = (uint64_t)r.oom_seq;
            } else {
                best[k] = v;
            }
        }
        ts_memtrace_free(&t);
    }
    printf("%-46s | %8d | %8d | %8d\n", title, best[0], best[1], best[2]);
    fprintf(js, "{\"sweep\":\"%s\",\"preset\":\"%s\",\"capacity\":%llu,\"tessera\":%d,"
                "\"pytorch\":%d,\"pytorch-expandable\":%d}",
            title, preset, (unsigned long long)cap, best[0], best[1], best[2]);
    (void)first_oom_seq;
}

#define MINCAP_STEP_BYTES (32ull << 20)

/* Smallest capacity (to MINCAP_STEP_BYTES) under which trace t runs. */
static uint64_t min_capacity(const ts_memtrace *t, int kind, uint64_t peak_req, uint64_t unlimited)
{
    uint64_t lo = peak_req / MINCAP_STEP_BYTES, hi = unlimited / MINCAP_STEP_BYTES + 1;
    while (lo + 1 < hi) { /* lo fails (or is the floor), hi runs */
        uint64_t mid = (lo + hi) / 2;
        ts_memreplay_result r;
        run(t, kind, 0, mid * MINCAP_STEP_BYTES, 0, &r);
        if (r.oom)
            lo = mid;
        else
            hi = mid;
    }
    return hi * MINCAP_STEP_BYTES;
}

static void min_capacities(int quick)
{
    printf("\n== Smallest capacity each allocator runs the generated trace in (32 MiB steps) ==\n");
    printf("%-22s %11s | %11s | %11s | %11s\n", "trace", "peak req", "tessera", "pytorch",
           "expandable");
    fprintf(js, "\"min_capacity\":[");
    for (size_t i = 0; i < (quick ? 1 : NPRESETS); i++) {
        ts_memtrace t;
        gen_trace(presets[i], 0, 0, &t);
        uint64_t req = ts_memtrace_peak_requested(&t);
        printf("%-22s %7.0f MiB |", presets[i], req / MIB);
        fprintf(js, "%s{\"trace\":\"%s\",\"peak_requested\":%llu", i ? "," : "", presets[i],
                (unsigned long long)req);
        for (int k = 0; k < NKIND; k++) {
            ts_memreplay_result r;
            run(&t, k, 0, 0, 0, &r);
            uint64_t c = min_capacity(&t, k, req, r.peak_reserved);
            printf(" %7.0f MiB |", c / MIB);
            fprintf(js, ",\"%s\":%llu", ts_memalloc_kind_name((ts_memalloc_kind)k),
                    (unsigned long long)c);
        }
        printf("\n");
        fprintf(js, "}");
        ts_memtrace_free(&t);
    }
    fprintf(js, "],\n");
}

static void capacity(int quick)
{
    static const struct {
        const char *preset;
        int batch_sweep, lo, hi, step, fixed;
        unsigned cap_gib;
    } sw[] = {
        {"varlen-gpt2m", 1, 1, 48, 1, 1024, 16},  {"varlen-gpt2m", 1, 1, 48, 1, 1024, 24},
        {"varlen-gpt2m", 1, 1, 48, 1, 1024, 32},  {"varlen-gpt2m", 0, 128, 4096, 32, 8, 16},
        {"varlen-gpt2m", 0, 128, 4096, 32, 8, 24}, {"varlen-1b-flash", 1, 1, 16, 1, 4096, 48},
        {"varlen-1b-flash", 1, 1, 16, 1, 4096, 64}, {"varlen-1b-flash", 0, 512, 8192, 128, 4, 48},
        {"multi-4", 1, 1, 48, 1, 1024, 16},       {"multi-4", 1, 1, 48, 1, 1024, 24},
        {"multi-4", 1, 1, 48, 1, 1024, 32},       {"multi-4", 0, 128, 4096, 32, 8, 24},
    };
    printf("\n== Capacity: the largest batch / sequence length that runs without OOM ==\n");
    printf("%-46s | %8s | %8s | %8s\n", "workload (hard capacity)", "tessera", "pytorch",
           "expandbl");
    fprintf(js, "\"capacity\":[");
    size_t n = quick ? 2 : sizeof sw / sizeof sw[0];
    for (size_t i = 0; i < n; i++) {
        char title[96];
        if (sw[i].batch_sweep)
            snprintf(title, sizeof title, "%s: batch, seq <= %d (%u GiB)", sw[i].preset,
                     sw[i].fixed, sw[i].cap_gib);
        else
            snprintf(title, sizeof title, "%s: max seq, batch %d (%u GiB)", sw[i].preset,
                     sw[i].fixed, sw[i].cap_gib);
        sweep(title, sw[i].preset, (uint64_t)sw[i].cap_gib * GIB, sw[i].batch_sweep, sw[i].lo,
              sw[i].hi, sw[i].step, sw[i].fixed);
        fprintf(js, i + 1 < n ? "," : "");
    }
    fprintf(js, "],\n");
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: tessera-bench-alloc SHARED_TRACES_DIR DATA_DIR OUT.json [--quick]\n");
        return 2;
    }
    const char *shared = argv[1], *data = argv[2];
    int quick = argc > 4 && strcmp(argv[4], "--quick") == 0;
    js = fopen(argv[3], "w");
    if (!js) {
        fprintf(stderr, "tessera-bench-alloc: cannot write %s\n", argv[3]);
        return 1;
    }
    fprintf(js, "{\n");
    fidelity(shared, data);
    int reps = quick ? 1 : SPEED_REPS;
    row *rows = calloc(NTRACES + NPRESETS, sizeof *rows);
    size_t n = 0;
    for (size_t i = 0; i < NTRACES; i++) {
        ts_memtrace t;
        if (load_trace(shared, data, traces[i], &t) != 0)
            return 1;
        measure(traces[i], &t, reps, &rows[n++]);
        ts_memtrace_free(&t);
    }
    for (size_t i = 0; i < NPRESETS; i++) {
        ts_memtrace t;
        gen_trace(presets[i], 0, 0, &t);
        char name[40];
        snprintf(name, sizeof name, "gen:%s", presets[i]);
        measure(name, &t, reps, &rows[n++]);
        ts_memtrace_free(&t);
    }
    report(rows, n);
    free(rows);
    min_capacities(quick);
    capacity(quick);
    fprintf(js, "\"generated_steps\":%d,\"generated_seed\":%d\n}\n", GEN_STEPS, GEN_SEED);
    fclose(js);
    return 0;
}
