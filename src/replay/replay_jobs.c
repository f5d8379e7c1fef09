/*
 * replay_jobs.c - loading the Pollux rigid workloads for a replay.
 *
 * pollux_rigid_durations.csv (README "Experiment procedures" B) holds, per
 * job of each load set, its submit time, GPU count and isolated run time.
 * That run time already contains one 30-s start-up, so a job's work is
 * duration - TS_REPLAY_POLLUX_STARTUP_S and the engine charges every start
 * (the first included) itself: a job alone still takes exactly `duration`.
 * Rows are grouped by `workload` in order of first appearance; inside a
 * workload jobs are put in arrival order (stable, so equal submit times keep
 * file order). Parsing is from memory, strict (fixed header, 9 fields, no
 * quoting) and every error names file:line: field. A trace's one workload
 * and tenants, and the sorted rows, as every loader ends (replay_trace_end),
 * are made here too.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/csv_reader.h"
#include "replay/replay.h"
#include "tessera/grow.h"

#define NCOLS 9
#define LINE_MAX_BYTES 4096
#define GPUS_MAX 1024
/* gpu_time is written rounded; allow that much disagreement with duration x gpus */
#define GPU_TIME_SLACK_GPU_S 1.0

static const char *const cols[NCOLS] = {"workload_set", "workload", "name", "time", "application",
                                        "num_gpus", "batch_size", "duration", "gpu_time"};
#define HEADER "workload_set,workload,name,time,application,num_gpus,batch_size,duration,gpu_time"
enum { C_SET, C_WL, C_NAME, C_TIME, C_APP, C_GPUS, C_BSZ, C_DUR, C_GPUTIME };

static int replay_trace_fill(ts_replay_trace *t, const char *name, int njobs,
                             const ts_replay_tenant *tenants, int ntenants, const char *fname,
                             ts_err *err)
{
    t->wl = calloc(1, sizeof *t->wl);
    if (t->wl) {
        t->nwl = 1;
        t->wl->jobs = malloc(sizeof *t->wl->jobs * (size_t)(njobs > 0 ? njobs : 1));
    }
    if (ntenants > 0)
        t->tenants = malloc(sizeof *t->tenants * (size_t)ntenants);
    if (!t->wl || !t->wl->jobs || (ntenants > 0 && !t->tenants))
        return ts_err_set(err, TS_ENOMEM, "%s: out of memory", fname);
    snprintf(t->set, sizeof t->set, "%s", name);
    snprintf(t->wl->name, sizeof t->wl->name, "%s", name);
    t->wl->njobs = njobs;
    if (ntenants > 0)
        memcpy(t->tenants, tenants, sizeof *t->tenants * (size_t)ntenants);
    t->ntenants = ntenants;
    return 0;
}

int replay_trace_end(ts_replay_trace **t, int rc, const char *name, void *rows, int n,
                     size_t size, int (*cmp)(const void *, const void *),
                     const ts_replay_tenant *tenants, int ntenants, const char *fname,
                     ts_err *err)
{
    if (rc == 0 && !*t && !(*t = calloc(1, sizeof **t)))
        rc = ts_err_set(err, TS_ENOMEM, "%s: out of memory", fname);
    if (rc == 0)
        rc = replay_trace_fill(*t, name, n, tenants, ntenants, fname, err);
    if (rc) {
        free(rows);
        ts_replay_trace_free(*t);
        *t = NULL;
        return rc;
    }
    qsort(rows, (size_t)n, size, cmp);
    return 0;
}

void ts_replay_trace_free(ts_replay_trace *t)
{
    if (!t)
        return;
    for (int i = 0; i < t->nwl; i++)
        free(t->wl[i].jobs);
    free(t->wl);
    free(t->tenants);
    free(t);
}

static int find_or_add_workload(ts_replay_trace *t, const char *name, int *cap)
{
    for (int i = 0; i < t->nwl; i++)
        if (strcmp(t->wl[i].name, name) == 0)
            return i;
    if (ts_grow((void **)&t->wl, cap, t->nwl + 1, 8, sizeof *t->wl) != 0)
        return -1;
    ts_replay_workload *w = &t->wl[t->nwl];
    memset(w, 0, sizeof *w);
    snprintf(w->name, sizeof w->name, "%s", name);
    return t->nwl++;
}

/* stable insertion sort by submit time: workloads are small and nearly sorted */
static void sort_arrivals(ts_replay_workload *w)
{
    for (int i = 1; i < w->njobs; i++) {
        ts_replay_job v = w->jobs[i];
        int k = i - 1;
        while (k >= 0 && w->jobs[k].submit_s > v.submit_s) {
            w->jobs[k + 1] = w->jobs[k];
            k--;
        }
        w->jobs[k + 1] = v;
    }
}

static int parse_row(char **f, const char *fname, int line, ts_replay_job *job, ts_err *err)
{
    double t, g, bsz, dur, gt;
    for (int c = 0; c < NCOLS; c++)
        if (!*f[c])
            return ts_err_set(err, TS_EINVAL, "%s:%d: %s: must not be empty", fname, line,
                              cols[c]);
    if (strlen(f[C_NAME]) >= TS_REPLAY_NAME_MAX)
        return ts_err_set(err, TS_EINVAL, "%s:%d: name: longer than %d bytes", fname, line,
                          TS_REPLAY_NAME_MAX - 1);
    int rc;
    if ((rc = ts_csv_number(fname, line, cols[C_TIME], f[C_TIME], 0, 1e12, false, &t, err)) ||
        (rc = ts_csv_number(fname, line, cols[C_GPUS], f[C_GPUS], 1, GPUS_MAX, true, &g, err)) ||
        (rc = ts_csv_number(fname, line, cols[C_BSZ], f[C_BSZ], 1, 1e12, true, &bsz, err)) ||
        (rc = ts_csv_number(fname, line, cols[C_DUR], f[C_DUR], TS_REPLAY_POLLUX_STARTUP_S, 1e12,
                            false, &dur, err)) ||
        (rc = ts_csv_number(fname, line, cols[C_GPUTIME], f[C_GPUTIME], 0, 1e15, false, &gt,
                            err)))
        return rc;
    if (fabs(gt - dur * g) > GPU_TIME_SLACK_GPU_S)
        return ts_err_set(err, TS_EINVAL, "%s:%d: gpu_time: must be duration x num_gpus (%.0f), got %s",
                          fname, line, dur * g, f[C_GPUTIME]);
    memset(job, 0, sizeof *job);
    snprintf(job->name, sizeof job->name, "%s", f[C_NAME]);
    job->submit_s = t;
    job->gpus = (int)g;
    job->work_s = dur - TS_REPLAY_POLLUX_STARTUP_S;
    return 0;
}

int ts_replay_load_pollux(const char *buf, size_t len, const char *fname, const char *set,
                          ts_replay_trace **out, ts_err *err)
{
    ts_replay_trace *t = calloc(1, sizeof *t);
    int *jcap = NULL;  /* capacity of each workload's job array */
    int wcap = 0, jcap_n = 0, rc = 0;
    char first_set[TS_REPLAY_NAME_MAX] = "";
    char row[LINE_MAX_BYTES];
    if (!t)
        return ts_err_set(err, TS_ENOMEM, "%s: out of memory", fname);
    ts_csv_lines lines = {.buf = buf, .fname = fname, .len = len};
    char *f[NCOLS];
    while ((rc = ts_csv_row(&lines, row, sizeof row, HEADER, f, NCOLS, err)) > 0) {
        int line = lines.line;
        if (set ? strcmp(f[C_SET], set) != 0 : false)
            continue;
        if (!set) {
            if (!first_set[0])
                snprintf(first_set, sizeof first_set, "%s", f[C_SET]);
            else if (strcmp(first_set, f[C_SET]) != 0) {
                rc = ts_err_set(err, TS_EINVAL,
                                "%s:%d: workload_set: file holds several sets (%s, %s); "
                                "pick one with --set",
                                fname, line, first_set, f[C_SET]);
                break;
            }
        }
        ts_replay_job job;
        if ((rc = parse_row(f, fname, line, &job, err)) != 0)
            break;
        int w = find_or_add_workload(t, f[C_WL], &wcap);
        if (w >= 0 && wcap > jcap_n) {
            int *nj = realloc(jcap, sizeof *nj * (size_t)wcap);
            if (!nj)
                w = -1;
            else {
                memset(nj + jcap_n, 0, sizeof *nj * (size_t)(wcap - jcap_n));
                jcap = nj;
                jcap_n = wcap;
            }
        }
        if (w < 0) {
            rc = ts_err_set(err, TS_ENOMEM, "%s: out of memory", fname);
            break;
        }
        ts_replay_workload *W = &t->wl[w];
        if ((rc = ts_csv_reserve((void **)&W->jobs, &jcap[w], W->njobs, 64, sizeof *W->jobs,
                                 fname, err)) != 0)
            break;
        W->jobs[W->njobs++] = job;
    }
    free(jcap);
    if (rc == 0 && lines.line == 0)
        rc = ts_err_set(err, TS_EINVAL, "%s:1: header: file is empty", fname);
    if (rc == 0 && t->nwl == 0)
        rc = set ? ts_err_set(err, TS_EINVAL, "%s: workload_set: no rows of set \"%s\"", fname, set)
                 : ts_err_set(err, TS_EINVAL, "%s: no jobs", fname);
    if (rc != 0) {
        ts_replay_trace_free(t);
        return rc;
    }
    snprintf(t->set, sizeof t->set, "%s", set ? set : first_set);
    for (int i = 0; i < t->nwl; i++)
        sort_arrivals(&t->wl[i]);
    *out = t;
    return 0;
}
