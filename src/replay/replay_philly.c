/*
 * replay_philly.c - loading the Philly job list and its virtual clusters.
 *
 * philly_jobs_pollux.csv (timestamp,duration,num_gpus,gpu_time,cluster) is
 * one row per job; the cluster is the job's virtual cluster, which the
 * replay treats as a tenant with its own partition of 8-GPU nodes sized by
 * philly_vc_nodes_helios.csv. The filtering is the Helios procedure's (README
 * "Experiment procedures" A, step 1-3): rows of VCs outside the VC file and
 * rows with no GPU are dropped, the window keeps whole days, and time starts at
 * the first kept job. Rows are not in time order in the file, so jobs are
 * sorted (ties keep file order). Parsing is strict and from memory; every
 * error names file:line: field. Nothing here does I/O.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/csv_reader.h"
#include "replay/replay.h"
#include "tessera/fmt.h"

#define PHILLY_HEADER "timestamp,duration,num_gpus,gpu_time,cluster"
#define VC_HEADER "vc,node num"
#define NCOLS 5
#define LINE_MAX_BYTES 1024
#define GPUS_MAX 1024
#define VC_NODES_MAX 100000
#define DURATION_MAX_S 1e9
#define SECONDS_PER_DAY 86400L
/* gpu_time is duration x num_gpus as written; allow float rounding */
#define GPU_TIME_SLACK_GPU_S 1.0

static const char *const cols[NCOLS] = {"timestamp", "duration", "num_gpus", "gpu_time",
                                        "cluster"};
enum { C_TS, C_DUR, C_GPUS, C_GPUTIME, C_VC };

bool ts_replay_is_philly(const char *buf, size_t len)
{
    size_t h = strlen(PHILLY_HEADER);
    return len >= h && memcmp(buf, PHILLY_HEADER, h) == 0 &&
           (len == h || buf[h] == '\n' || buf[h] == '\r');
}

static bool leap(long y)
{
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

/* "YYYY-MM-DD" prefix of s; *rest points after it. */
static bool parse_date(const char *s, long *day, const char **rest)
{
    static const int mdays[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int y, m, d, n = 0;
    if (sscanf(s, "%4d-%2d-%2d%n", &y, &m, &d, &n) != 3 || n != 10 || s[4] != '-' ||
        s[7] != '-')
        return false;
    if (m < 1 || m > 12 || d < 1 || d > mdays[m - 1] + (m == 2 && leap(y)))
        return false;
    *day = ts_days_from_civil(y, m, d);
    *rest = s + n;
    return true;
}

int ts_replay_parse_day(const char *s, long *day, ts_err *err)
{
    const char *rest;
    if (!parse_date(s, day, &rest) || *rest)
        return ts_err_set(err, TS_EINVAL, "date: must be YYYY-MM-DD, got \"%s\"", s);
    return 0;
}

/* "YYYY-MM-DD HH:MM:SS" -> Unix seconds (the file has no zone; taken as UTC) */
static bool parse_timestamp(const char *s, long *day, double *epoch_s)
{
    const char *r;
    int hh, mm, ss, n = 0;
    if (!parse_date(s, day, &r) || sscanf(r, " %2d:%2d:%2d%n", &hh, &mm, &ss, &n) != 3 ||
        r[n] || r[0] != ' ' || hh > 23 || mm > 59 || ss > 60 || hh < 0 || mm < 0 || ss < 0)
        return false;
    *epoch_s = (double)(*day * SECONDS_PER_DAY + hh * 3600L + mm * 60L + ss);
    return true;
}

int ts_replay_load_vc_nodes(const char *buf, size_t len, const char *fname,
                            ts_replay_tenant **out, int *n, ts_err *err)
{
    char row[LINE_MAX_BYTES];
    int cap = 0, cnt = 0, rc = 0;
    ts_replay_tenant *t = NULL;
    ts_csv_lines lines = {.buf = buf, .fname = fname, .len = len};
    while ((rc = ts_csv_row(&lines, row, sizeof row, VC_HEADER, NULL, 0, err)) > 0) {
        int line = lines.line;
        char *f[2];
        double nodes;
        if (ts_csv_split(row, f, 2) != 2 || !f[0][0] || strlen(f[0]) >= TS_REPLAY_NAME_MAX) {
            rc = ts_err_set(err, TS_EINVAL, "%s:%d: expected vc,node num", fname, line);
            break;
        }
        if ((rc = ts_csv_number(fname, line, "node num", f[1], 1, VC_NODES_MAX, true, &nodes,
                                err)))
            break;
        for (int i = 0; i < cnt && rc == 0; i++)
            if (strcmp(t[i].name, f[0]) == 0)
                rc = ts_err_set(err, TS_EINVAL, "%s:%d: vc: %s listed twice", fname, line, f[0]);
        if (rc)
            break;
        if ((rc = ts_csv_reserve((void **)&t, &cap, cnt, 16, sizeof *t, fname, err)) != 0)
            break;
        memset(&t[cnt], 0, sizeof t[cnt]);
        snprintf(t[cnt].name, sizeof t[cnt].name, "%s", f[0]);
        t[cnt++].gpus = (int)nodes * TS_REPLAY_PHILLY_GPUS_PER_NODE;
    }
    if (rc == 0 && cnt == 0)
        rc = ts_err_set(err, TS_EINVAL, "%s: no virtual clusters", fname);
    if (rc) {
        free(t);
        return rc;
    }
    *out = t;
    *n = cnt;
    return 0;
}

typedef struct row_job {
    double epoch_s;
    int seq;  /* file order, for ties */
    ts_replay_job job;
} row_job;

static int cmp_row(const void *a, const void *b)
{
    const row_job *x = a, *y = b;
    if (x->epoch_s != y->epoch_s)
        return x->epoch_s < y->epoch_s ? -1 : 1;
    return (x->seq > y->seq) - (x->seq < y->seq);
}

static int find_tenant(const ts_replay_tenant *t, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcmp(t[i].name, name) == 0)
            return i;
    return -1;
}

/* Parses one data row; *keep false when the procedure drops it. */
static int parse_row(char **f, const char *fname, int line, const ts_replay_tenant *tenants,
                     int ntenants, long from_day, long to_day, ts_replay_trace *t, row_job *r,
                     bool *keep, ts_err *err)
{
    double dur, g, gt;
    long day;
    int rc;
    *keep = false;
    for (int c = 0; c < NCOLS; c++)
        if (!*f[c])
            return ts_err_set(err, TS_EINVAL, "%s:%d: %s: must not be empty", fname, line,
                              cols[c]);
    if (!parse_timestamp(f[C_TS], &day, &r->epoch_s))
        return ts_err_set(err, TS_EINVAL, "%s:%d: timestamp: must be YYYY-MM-DD HH:MM:SS, got \"%s\"",
                          fname, line, f[C_TS]);
    if ((rc = ts_csv_number(fname, line, cols[C_DUR], f[C_DUR], 0, DURATION_MAX_S, false, &dur,
                            err)) ||
        (rc = ts_csv_number(fname, line, cols[C_GPUS], f[C_GPUS], 0, GPUS_MAX, true, &g, err)) ||
        (rc = ts_csv_number(fname, line, cols[C_GPUTIME], f[C_GPUTIME], 0,
                            DURATION_MAX_S * GPUS_MAX, false, &gt, err)))
        return rc;
    if (fabs(gt - dur * g) > GPU_TIME_SLACK_GPU_S)
        return ts_err_set(err, TS_EINVAL, "%s:%d: gpu_time: must be duration x num_gpus (%.0f), got %s",
                          fname, line, dur * g, f[C_GPUTIME]);
    int k = find_tenant(tenants, ntenants, f[C_VC]);
    if (k < 0) {
        t->dropped_vc++;
        return 0;
    }
    if (g == 0) {
        t->dropped_no_gpu++;
        return 0;
    }
    if (day < from_day || day > to_day) {
        t->dropped_window++;
        return 0;
    }
    long part = tenants[k].gpus;
    if (g > part)
        return ts_err_set(err, TS_EINVAL,
                          "%s:%d: num_gpus: %.0f exceeds virtual cluster %s's %ld GPUs "
                          "(the procedure could never start it)",
                          fname, line, g, f[C_VC], part);
    memset(&r->job, 0, sizeof r->job);
    snprintf(r->job.name, sizeof r->job.name, "%s:%d", f[C_VC], line);
    r->job.gpus = (int)g;
    r->job.work_s = dur;
    r->job.tenant = k;
    *keep = true;
    return 0;
}

int ts_replay_load_philly(const char *buf, size_t len, const char *fname,
                          const ts_replay_tenant *tenants, int ntenants, long from_day,
                          long to_day, ts_replay_trace **out, ts_err *err)
{
    ts_replay_trace *t = calloc(1, sizeof *t);
    row_job *rows = NULL;
    int cap = 0, n = 0, rc = 0;
    char row[LINE_MAX_BYTES];
    if (!t)
        return ts_err_set(err, TS_ENOMEM, "%s: out of memory", fname);
    ts_csv_lines lines = {.buf = buf, .fname = fname, .len = len};
    char *f[NCOLS];
    while ((rc = ts_csv_row(&lines, row, sizeof row, PHILLY_HEADER, f, NCOLS, err)) > 0) {
        bool keep;
        if ((rc = ts_csv_reserve((void **)&rows, &cap, n, 1024, sizeof *rows, fname, err)) != 0 ||
            (rc = parse_row(f, fname, lines.line, tenants, ntenants, from_day, to_day, t,
                            &rows[n], &keep, err)) != 0)
            break;
        if (keep)
            rows[n].seq = n, n++;
    }
    if (rc == 0 && lines.line == 0)
        rc = ts_err_set(err, TS_EINVAL, "%s:1: header: file is empty", fname);
    if (rc == 0 && n == 0)
        rc = ts_err_set(err, TS_EINVAL, "%s: no jobs of the virtual clusters in the window", fname);
    if ((rc = replay_trace_end(&t, rc, "philly", rows, n, sizeof *rows, cmp_row, tenants,
                               ntenants, fname, err)) != 0)
        return rc;
    t->origin_epoch_s = rows[0].epoch_s;
    for (int i = 0; i < n; i++) {
        t->wl->jobs[i] = rows[i].job;
        t->wl->jobs[i].submit_s = rows[i].epoch_s - t->origin_epoch_s;
    }
    free(rows);
    *out = t;
    return 0;
}
