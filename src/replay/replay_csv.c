/*
 * replay_csv.c - Tessera's own job list for a replay.
 *
 * The Pollux and Philly files are other people's formats, each with its
 * quirks (a start-up inside the duration, calendar timestamps, virtual
 * clusters). This one is ours and says only what a replay needs:
 *
 *     name,submit_s,gpus,duration_s[,tenant]
 *
 * submit_s is seconds from the start of the replay; duration_s is the work,
 * run time with no start-up; tenant names one of the tenants the caller
 * loaded (a tenants YAML). The header is fixed (columns in that order, the
 * last optional), which is also how the file is told apart from the others.
 * Rows may come in any order: jobs are sorted by submit time, ties keeping
 * file order. Parsing is strict and from memory; every error names
 * file:line: column. Nothing here does I/O.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/csv_reader.h"
#include "replay/replay.h"

#define HEADER "name,submit_s,gpus,duration_s"
#define HEADER_TENANT HEADER ",tenant"
#define NCOLS_MAX 5
#define LINE_MAX_BYTES 1024
#define GPUS_MAX 100000
#define TIME_MAX_S 1e12

enum { C_NAME, C_SUBMIT, C_GPUS, C_DUR, C_TENANT };
static const char *const cols[NCOLS_MAX] = {"name", "submit_s", "gpus", "duration_s", "tenant"};

/* The first line of buf, CR stripped, into row; false if it does not fit. */
static bool first_line(const char *buf, size_t len, char *row, size_t cap)
{
    const char *nl = memchr(buf, '\n', len);
    size_t n = nl ? (size_t)(nl - buf) : len;
    if (n > 0 && buf[n - 1] == '\r')
        n--;
    if (n >= cap)
        return false;
    memcpy(row, buf, n);
    row[n] = '\0';
    return true;
}

/* 4 or 5 (with tenant) for a header of ours, else 0. */
static int header_columns(const char *buf, size_t len)
{
    char row[LINE_MAX_BYTES];
    if (!first_line(buf, len, row, sizeof row))
        return 0;
    if (strcmp(row, HEADER) == 0)
        return 4;
    if (strcmp(row, HEADER_TENANT) == 0)
        return 5;
    return 0;
}

bool ts_replay_is_jobs_csv(const char *buf, size_t len)
{
    return header_columns(buf, len) > 0;
}

typedef struct row_job {
    int seq;
    ts_replay_job job;
} row_job;

static int cmp_row(const void *a, const void *b)
{
    const row_job *x = a, *y = b;
    if (x->job.submit_s != y->job.submit_s)
        return x->job.submit_s < y->job.submit_s ? -1 : 1;
    return (x->seq > y->seq) - (x->seq < y->seq);
}

static int parse_row(char **f, int ncols, const char *fname, int line,
                     const ts_replay_tenant *tenants, int ntenants, ts_replay_job *job,
                     ts_err *err)
{
    double t, g, dur;
    int rc;
    for (int c = 0; c < ncols; c++)
        if (!*f[c] && (c != C_TENANT || ntenants > 0))
            return ts_err_set(err, TS_EINVAL, "%s:%d: %s: must not be empty", fname, line,
                              cols[c]);
    if (strlen(f[C_NAME]) >= TS_REPLAY_NAME_MAX)
        return ts_err_set(err, TS_EINVAL, "%s:%d: name: longer than %d bytes", fname, line,
                          TS_REPLAY_NAME_MAX - 1);
    if ((rc = ts_csv_number(fname, line, cols[C_SUBMIT], f[C_SUBMIT], 0, TIME_MAX_S, false, &t,
                            err)) ||
        (rc = ts_csv_number(fname, line, cols[C_GPUS], f[C_GPUS], 1, GPUS_MAX, true, &g, err)) ||
        (rc = ts_csv_number(fname, line, cols[C_DUR], f[C_DUR], 0, TIME_MAX_S, false, &dur, err)))
        return rc;
    memset(job, 0, sizeof *job);
    snprintf(job->name, sizeof job->name, "%s", f[C_NAME]);
    job->submit_s = t;
    job->gpus = (int)g;
    job->work_s = dur;
    if (ntenants == 0)
        return 0;
    for (int k = 0; k < ntenants; k++)
        if (strcmp(tenants[k].name, f[C_TENANT]) == 0) {
            job->tenant = k;
            return 0;
        }
    return ts_err_set(err, TS_EINVAL, "%s:%d: tenant: \"%s\" is not one of the %d tenants", fname,
                      line, f[C_TENANT], ntenants);
}

int ts_replay_load_jobs_csv(const char *buf, size_t len, const char *fname,
                            const ts_replay_tenant *tenants, int ntenants, ts_replay_trace **out,
                            ts_err *err)
{
    int ncols = header_columns(buf, len);
    if (len == 0)
        return ts_err_set(err, TS_EINVAL, "%s:1: header: file is empty", fname);
    if (ncols == 0)
        return ts_err_set(err, TS_EINVAL, "%s:1: header: expected " HEADER "[,tenant]", fname);
    if (ntenants > 0 && ncols < 5)
        return ts_err_set(err, TS_EINVAL,
                          "%s:1: header: tenant: column needed to replay with tenants", fname);
    ts_replay_trace *t = NULL;  /* made once the rows are read */
    row_job *rows = NULL;
    int cap = 0, n = 0, rc = 0;
    char row[LINE_MAX_BYTES];
    ts_csv_lines lines = {.buf = buf, .fname = fname, .len = len};
    char *f[NCOLS_MAX];
    while ((rc = ts_csv_row(&lines, row, sizeof row, NULL, f, ncols, err)) > 0) {
        if ((rc = ts_csv_reserve((void **)&rows, &cap, n, 256, sizeof *rows, fname, err)) != 0 ||
            (rc = parse_row(f, ncols, fname, lines.line, tenants, ntenants, &rows[n].job,
                            err)) != 0)
            break;
        rows[n].seq = n, n++;
    }
    if (rc == 0 && n == 0)
        rc = ts_err_set(err, TS_EINVAL, "%s: no jobs", fname);
    if ((rc = replay_trace_end(&t, rc, "jobs", rows, n, sizeof *rows, cmp_row, tenants, ntenants,
                               fname, err)) != 0)
        return rc;
    for (int i = 0; i < n; i++)
        t->wl->jobs[i] = rows[i].job;
    free(rows);
    *out = t;
    return 0;
}
