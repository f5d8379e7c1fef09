/*
 * fuzz_replay.c - libFuzzer target for the replay's job loaders: our job list
 * (with and without tenants), the Philly job list and the Pollux workloads.
 *
 * The same bytes go to each loader, which must never read past len, crash,
 * hang or leak. On failure *out is untouched, the code is TS_EINVAL (or
 * TS_ENOMEM) and the message is a terminated string starting with the file
 * name. On success every workload has jobs in arrival order with at least
 * one GPU, finite non-negative times and a tenant in range, which is what
 * the engine relies on. Seeded by scripts/run-fuzz from tests/data/replay-*.csv.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* internal to libtessera (the fuzz targets see only include/): by path */
#include "../../src/replay/replay.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const ts_replay_tenant tenants[3] = {{"aa", 8}, {"bb", 16}, {"vision", 8}};

static void check(int rc, const ts_replay_trace *t, const ts_err *err, int ntenants)
{
    if (rc < 0) {
        if (t || (rc != TS_EINVAL && rc != TS_ENOMEM) || err->code != rc ||
            memchr(err->msg, '\0', sizeof err->msg) == NULL || strncmp(err->msg, "f.csv", 5) != 0)
            abort();
        return;
    }
    if (!t || t->nwl < 1 || t->ntenants != ntenants)
        abort();
    for (int w = 0; w < t->nwl; w++) {
        const ts_replay_workload *W = &t->wl[w];
        if (W->njobs < 1)
            abort();
        for (int j = 0; j < W->njobs; j++) {
            const ts_replay_job *J = &W->jobs[j];
            if (J->gpus < 1 || !(J->submit_s >= 0) || !isfinite(J->submit_s) ||
                !(J->work_s >= 0) || !isfinite(J->work_s) || J->tenant < 0 ||
                (ntenants > 0 && J->tenant >= ntenants) ||
                (j > 0 && J->submit_s < W->jobs[j - 1].submit_s) ||
                memchr(J->name, '\0', sizeof J->name) == NULL)
                abort();
        }
    }
    ts_replay_trace_free((ts_replay_trace *)t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* a private copy, so ASan catches any read past size */
    char *buf = malloc(size ? size : 1);
    if (!buf)
        return 0;
    if (size)
        memcpy(buf, data, size);
    for (int with = 0; with < 2; with++) {
        ts_replay_trace *t = NULL;
        ts_err err = {0};
        int n = with ? 3 : 0;
        int rc = ts_replay_load_jobs_csv(buf, size, "f.csv", with ? tenants : NULL, n, &t, &err);
        check(rc, t, &err, n);
    }
    ts_replay_trace *t = NULL;
    ts_err err = {0};
    int rc = ts_replay_load_philly(buf, size, "f.csv", tenants, 2, -1000000, 1000000, &t, &err);
    check(rc, t, &err, 2);
    t = NULL;
    rc = ts_replay_load_pollux(buf, size, "f.csv", NULL, &t, &err);
    check(rc, t, &err, 0);
    free(buf);
    return 0;
}
