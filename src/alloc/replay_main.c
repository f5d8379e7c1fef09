/*
 * replay_main.c - tessera-alloc-replay: plays an allocation trace through one
 * allocator on the simulated device and prints what it cost.
 *
 *   tessera-alloc-replay TRACE.events.csv --allocator tessera|pytorch|pytorch-expandable
 *       [--initial FILE] [--segments FILE] [--warm] [--capacity BYTES]
 *       [--time] [--repeat N] [--json]
 *
 * The initial-live file defaults to TRACE's name with .initial_live.csv for
 * .events.csv (used when it exists). --warm (pytorch only) starts from the
 * recorded segments and reports how closely the model follows the trace.
 * BYTES takes K, M, G, T suffixes (powers of 1024, optional "iB"/"B").
 * Exit codes: 0 ran (an OOM is a result, not a failure), 1 bad input or an
 * allocator error, 2 usage.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tessera/alloc.h"

#define PATH_MAX_BYTES 1024
#define MIB (1024.0 * 1024.0)

static void usage(FILE *f)
{
    fprintf(f, "usage: tessera-alloc-replay TRACE.events.csv --allocator "
               "tessera|pytorch|pytorch-expandable\n"
               "       [--initial FILE] [--segments FILE] [--warm] [--capacity BYTES]\n"
               "       [--time] [--repeat N] [--json]\n");
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int parse_bytes(const char *s, uint64_t *out)
{
    char *end = NULL;
    double v = strtod(s, &end);
    if (end == s || v <= 0)
        return -1;
    double mult = 1;
    switch (*end) {
    case 'K': case 'k': mult = 1024.0; end++; break;
    case 'M': case 'm': mult = MIB; end++; break;
    case 'G': case 'g': mult = MIB * 1024.0; end++; break;
    case 'T': case 't': mult = MIB * MIB; end++; break;
    default: break;
    }
    if (*end == 'i')
        end++;
    if (*end == 'B')
        end++;
    if (*end)
        return -1;
    *out = (uint64_t)(v * mult);
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* What one replay printed: its options and its result. */
typedef struct {
    const char *events, *alloc_name;
    int kind, warm, timed, repeat, has_segments;
    uint64_t capacity;
    double pair_ns;
    const ts_memreplay_result *r;
} replay_report;

static void print_json(const replay_report *p, double calls_per_k, const char *frag)
{
    const ts_memreplay_result *r = p->r;
    printf("{\"trace\":\"%s\",\"allocator\":\"%s\",\"allocs\":%llu,\"frees\":%llu,"
           "\"peak_requested\":%llu,\"peak_reserved\":%llu,\"reserved_end\":%llu,"
           "\"fragmentation\":%s,\"device_calls\":%llu,\"calls_per_1000_ops\":%.3f,"
           "\"oom\":%s,\"oom_seq\":%lld,\"oom_size\":%llu,"
           "\"model_segment_allocs\":%llu,\"model_segment_alloc_bytes\":%llu,"
           "\"trace_segment_allocs\":%llu,\"trace_segment_alloc_bytes\":%llu,"
           "\"trace_reserved_end\":%llu,\"addr_matches\":%llu,"
           "\"segment_allocs_total\":%llu,\"segment_alloc_bytes_total\":%llu,"
           "\"stitched_allocs\":%llu,\"stitch_cache_hits\":%llu,"
           "\"median_alloc_ns\":%.1f,\"median_free_ns\":%.1f,\"median_pair_ns\":%.1f,"
           "\"mean_op_ns\":%.1f",
           p->events, p->alloc_name, (unsigned long long)r->allocs, (unsigned long long)r->frees,
           (unsigned long long)r->peak_requested, (unsigned long long)r->peak_reserved,
           (unsigned long long)r->reserved_end, frag,
           (unsigned long long)r->device_calls, calls_per_k, r->oom ? "true" : "false",
           (long long)r->oom_seq, (unsigned long long)r->oom_size,
           (unsigned long long)r->model_segment_allocs,
           (unsigned long long)r->model_segment_alloc_bytes,
           (unsigned long long)r->trace_segment_allocs,
           (unsigned long long)r->trace_segment_alloc_bytes,
           (unsigned long long)r->trace_reserved_end, (unsigned long long)r->addr_matches,
           (unsigned long long)r->stats.segment_allocs,
           (unsigned long long)r->stats.segment_alloc_bytes,
           (unsigned long long)r->stats.stitched_allocs,
           (unsigned long long)r->stats.stitch_cache_hits, r->median_alloc_ns,
           r->median_free_ns, p->pair_ns, r->mean_op_ns);
    printf(",\"calls\":{");
    for (int c = 0; c < TS_MEMDEV_NCALLS; c++)
        printf("%s\"%s\":%llu", c ? "," : "", ts_memdev_call_name(c),
               (unsigned long long)r->stats.dev.calls[c]);
    printf("}}\n");
}

static void print_text(const replay_report *p, double calls_per_k)
{
    const ts_memreplay_result *r = p->r;
    printf("trace: %s (%llu allocs, %llu frees played)\n", p->events,
           (unsigned long long)r->allocs, (unsigned long long)r->frees);
    printf("allocator: %s%s\n", p->alloc_name, p->warm ? " (warm start from recorded segments)" : "");
    printf("peak requested: %.1f MiB\n", (double)r->peak_requested / MIB);
    printf("peak reserved: %.1f MiB\n", (double)r->peak_reserved / MIB);
    if (r->oom)
        printf("fragmentation: - (the replay ran out of memory)\n");
    else
        printf("fragmentation: %.2f %%\n", 100.0 * r->fragmentation);
    printf("reserved at end: %.1f MiB\n", (double)r->reserved_end / MIB);
    printf("device calls: %llu (%.1f per 1,000 operations):", (unsigned long long)r->device_calls,
           calls_per_k);
    for (int c = 0; c < TS_MEMDEV_NCALLS; c++)
        if (r->stats.dev.calls[c])
            printf(" %s %llu", ts_memdev_call_name(c), (unsigned long long)r->stats.dev.calls[c]);
    printf("\n");
    if (p->kind == TS_MEMALLOC_TESSERA)
        printf("stitched: %llu allocations, %llu reused without a driver call\n",
               (unsigned long long)r->stats.stitched_allocs,
               (unsigned long long)r->stats.stitch_cache_hits);
    if (p->timed)
        printf("ns per operation: mean %.0f, median alloc %.0f, median free %.0f, "
               "alloc+free %.0f (median of %d runs)\n",
               r->mean_op_ns, r->median_alloc_ns, r->median_free_ns, p->pair_ns, p->repeat);
    if (p->warm || p->has_segments)
        printf("segment_alloc: model %llu (%.1f MiB), trace %llu (%.1f MiB); "
               "recorded reserved at end %.1f MiB\n",
               (unsigned long long)r->model_segment_allocs,
               (double)r->model_segment_alloc_bytes / MIB,
               (unsigned long long)r->trace_segment_allocs,
               (double)r->trace_segment_alloc_bytes / MIB,
               (double)r->trace_reserved_end / MIB);
    if (p->warm)
        printf("addresses matching the trace: %llu of %llu\n",
               (unsigned long long)r->addr_matches, (unsigned long long)r->allocs);
    if (p->capacity) {
        if (r->oom)
            printf("OOM: yes, at event seq %lld (%llu bytes)\n", (long long)r->oom_seq,
                   (unsigned long long)r->oom_size);
        else
            printf("OOM: no\n");
    }
}

int main(int argc, char **argv)
{
    const char *events = NULL, *initial = NULL, *segments = NULL, *alloc_name = NULL;
    uint64_t capacity = 0;
    int warm = 0, timed = 0, json = 0, repeat = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--allocator") == 0 && v) {
            alloc_name = v;
            i++;
        } else if (strcmp(a, "--initial") == 0 && v) {
            initial = v;
            i++;
        } else if (strcmp(a, "--segments") == 0 && v) {
            segments = v;
            i++;
        } else if (strcmp(a, "--capacity") == 0 && v) {
            if (parse_bytes(v, &capacity) != 0) {
                fprintf(stderr, "tessera-alloc-replay: --capacity: not a size: %s\n", v);
                return 2;
            }
            i++;
        } else if (strcmp(a, "--repeat") == 0 && v) {
            repeat = atoi(v);
            if (repeat < 1 || repeat > 1000) {
                fprintf(stderr, "tessera-alloc-replay: --repeat: must be 1..1000\n");
                return 2;
            }
            i++;
        } else if (strcmp(a, "--warm") == 0) {
            warm = 1;
        } else if (strcmp(a, "--time") == 0) {
            timed = 1;
        } else if (strcmp(a, "--json") == 0) {
            json = 1;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (a[0] != '-' && !events) {
            events = a;
        } else {
            fprintf(stderr, "tessera-alloc-replay: unknown or incomplete argument: %s\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (!events || !alloc_name) {
        usage(stderr);
        return 2;
    }
    int kind = ts_memalloc_kind_parse(alloc_name);
    if (kind < 0) {
        fprintf(stderr, "tessera-alloc-replay: --allocator: unknown allocator %s\n", alloc_name);
        return 2;
    }
    char guess[PATH_MAX_BYTES];
    size_t n = strlen(events);
    const char *sfx = ".events.csv";
    if (!initial && n > strlen(sfx) && n < sizeof guess - 32 &&
        strcmp(events + n - strlen(sfx), sfx) == 0) {
        snprintf(guess, sizeof guess, "%.*s.initial_live.csv", (int)(n - strlen(sfx)), events);
        if (access(guess, R_OK) == 0)
            initial = guess;
    }
    ts_err err = {0, ""};
    ts_memtrace t;
    if (ts_memtrace_load(events, initial, segments, &t, &err) != 0) {
        fprintf(stderr, "tessera-alloc-replay: %s\n", err.msg);
        return 1;
    }
    ts_memreplay_opts o = {.kind = (ts_memalloc_kind)kind, .capacity_bytes = capacity,
                           .warm = warm, .clock_ns = timed ? now_ns : NULL};
    ts_memreplay_result r;
    double *med = calloc((size_t)repeat, sizeof *med);
    int rc = 0;
    for (int k = 0; k < repeat && rc == 0 && med; k++) {
        rc = ts_memreplay_run(&t, &o, &r, &err);
        med[k] = r.median_alloc_ns + r.median_free_ns;
    }
    if (!med || rc != 0) {
        fprintf(stderr, "tessera-alloc-replay: %s\n", med ? err.msg : "out of memory");
        free(med);
        ts_memtrace_free(&t);
        return 1;
    }
    qsort(med, (size_t)repeat, sizeof *med, cmp_double);
    double pair_ns = med[repeat / 2];
    free(med);
    uint64_t ops = r.allocs + r.frees;
    double calls_per_k = ops ? 1000.0 * (double)r.device_calls / (double)ops : 0;
    char frag[32] = "null"; /* none when the replay ran out of memory */
    if (!r.oom)
        snprintf(frag, sizeof frag, "%.6f", r.fragmentation);
    replay_report p = {.events = events, .alloc_name = alloc_name, .kind = kind, .warm = warm,
                       .timed = timed, .repeat = repeat, .has_segments = t.nseg != 0,
                       .capacity = capacity, .pair_ns = pair_ns, .r = &r};
    if (json)
        print_json(&p, calls_per_k, frag);
    else
        print_text(&p, calls_per_k);
    ts_memtrace_free(&t);
    return 0;
}
