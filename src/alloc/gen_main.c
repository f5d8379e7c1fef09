/*
 * gen_main.c - tessera-alloc-gen: writes a generated allocation trace in the
 * format of ../shared/traces/alloc, for tessera-alloc-replay.
 *
 *   tessera-alloc-gen --preset NAME --out PREFIX [--steps N] [--seed S]
 *       [--batch B] [--seq-max N]
 *
 * Writes PREFIX.events.csv and PREFIX.initial_live.csv (no rows: a
 * generated trace starts cold). --batch and --seq-max override every model
 * of the preset (seq-max also scales the median length with it).
 * Exit codes: 0 written, 1 error, 2 usage.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tessera/alloc.h"

#define PATH_MAX_BYTES 1024

static void usage(FILE *f)
{
    fprintf(f, "usage: tessera-alloc-gen --preset NAME --out PREFIX [--steps N] [--seed S]\n"
               "       [--batch B] [--seq-max N]\npresets: %s\n", ts_memgen_preset_names());
}

int main(int argc, char **argv)
{
    const char *preset = NULL, *out = NULL;
    int steps = 8, batch = 0, seq_max = 0;
    unsigned long long seed = 1;
    for (int i = 1; i < argc; i += 2) { /* every option takes a value */
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        }
        if (!v) {
            usage(stderr);
            return 2;
        }
        if (strcmp(a, "--preset") == 0)
            preset = v;
        else if (strcmp(a, "--out") == 0)
            out = v;
        else if (strcmp(a, "--steps") == 0)
            steps = atoi(v);
        else if (strcmp(a, "--seed") == 0)
            seed = strtoull(v, NULL, 10);
        else if (strcmp(a, "--batch") == 0)
            batch = atoi(v);
        else if (strcmp(a, "--seq-max") == 0)
            seq_max = atoi(v);
        else {
            fprintf(stderr, "tessera-alloc-gen: unknown argument: %s\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (!preset || !out || steps < 1 || steps > 10000 || batch < 0 || seq_max < 0) {
        usage(stderr);
        return 2;
    }
    ts_err err = {0, ""};
    ts_memgen_model models[TS_MEMGEN_MAX_MODELS];
    int n = ts_memgen_preset(preset, models, TS_MEMGEN_MAX_MODELS, &err);
    if (n < 0) {
        fprintf(stderr, "tessera-alloc-gen: %s\n", err.msg);
        return 2;
    }
    for (int i = 0; i < n; i++) {
        if (batch)
            models[i].batch = batch;
        if (seq_max) {
            models[i].seq_median = models[i].seq_median * seq_max / models[i].seq_max;
            models[i].seq_max = seq_max;
            if (models[i].seq_min > seq_max)
                models[i].seq_min = seq_max;
        }
    }
    ts_memgen_config cfg = {.models = models, .nmodels = n, .steps = steps, .seed = seed};
    ts_memtrace t;
    if (ts_memgen_run(&cfg, &t, &err) != 0) {
        fprintf(stderr, "tessera-alloc-gen: %s\n", err.msg);
        return 1;
    }
    char ev[PATH_MAX_BYTES], live[PATH_MAX_BYTES];
    snprintf(ev, sizeof ev, "%s.events.csv", out);
    snprintf(live, sizeof live, "%s.initial_live.csv", out);
    int rc = ts_memtrace_write(&t, ev, live, &err);
    if (rc == 0)
        printf("%s: %zu events, peak requested %.1f MiB\n", ev, t.nev,
               (double)ts_memtrace_peak_requested(&t) / (1024.0 * 1024.0));
    else
        fprintf(stderr, "tessera-alloc-gen: %s\n", err.msg);
    ts_memtrace_free(&t);
    return rc ? 1 : 0;
}
