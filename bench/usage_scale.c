/*
 * usage_scale.c - tessera-bench-usage: a SQLite store with millions of
 * events, for bench/usage-scale.
 *
 *   tessera-bench-usage fill PATH EVENTS   a store of the last schema without
 *       the roll-up, filled in one transaction (bulk SQL, not the API) with
 *       jobs of 24 tenants x 2 tiers x 3 models submitted over a year in
 *       id order, ~5 events each, a third of them requeued once (a "run-ended" event), 1 % of
 *       runs longer than a week; then opened by the store, whose migration
 *       rolls it all up. Prints both times.
 *   tessera-bench-usage compare PATH FROM TO   times the full scan (what
 *       /v1/usage did before) and the rolled-up answer on [FROM, TO) and
 *       says whether they agree.
 *
 * Times are wall seconds on this machine; the script prints the ratios.
 */
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "store/store_internal.h"
#include "tessera/store.h"

#define TENANTS 24
#define DAY_S 86400.0
#define YEAR_START_S 1735689600.0 /* 2025-01-01 */
#define EVENTS_PER_JOB_MAX 7

static double wall(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static double unit(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) / 9007199254740992.0;
}

static int die(const char *what, const char *msg)
{
    fprintf(stderr, "tessera-bench-usage: %s: %s\n", what, msg);
    return 1;
}

static int event(sqlite3_stmt *st, long long job, double t, const char *kind, const char *detail)
{
    sqlite3_bind_int64(st, 1, job);
    sqlite3_bind_double(st, 2, t);
    sqlite3_bind_text(st, 3, kind, -1, SQLITE_STATIC);
    if (detail)
        sqlite3_bind_text(st, 4, detail, -1, SQLITE_TRANSIENT);
    else
        sqlite3_bind_null(st, 4);
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    return rc == SQLITE_DONE ? 0 : -1;
}

/* A run's length: log-uniform from a minute to three days, 1 % over a week. */
static double run_length(void)
{
    if (unit() < 0.01)
        return 7 * DAY_S + unit() * 14 * DAY_S;
    return 60.0 * pow(3 * DAY_S / 60.0, unit());
}

static int fill(const char *path, long long events)
{
    static const char *models[] = {"H100-80GB", "A100-80GB", "L40S"};
    char url[1100];
    snprintf(url, sizeof url, "sqlite:%s", path);
    ts_store *s = NULL;
    ts_err err = {0};
    if (store_open_version(url, TS_SCHEMA_ROLLUP - 1, &s, &err))
        return die("open", err.msg);
    ts_store_close(s);
    sqlite3 *db = NULL;
    if (sqlite3_open(path, &db) != SQLITE_OK)
        return die("open", sqlite3_errmsg(db));
    sqlite3_exec(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=OFF; BEGIN", NULL, NULL, NULL);
    sqlite3_stmt *job = NULL, *ev = NULL;
    if (sqlite3_prepare_v2(db,
                           "INSERT INTO jobs (id, tenant, name, owner, state, tier, gpus, "
                           "gpu_model, submit_s, start_s, end_s, spec_json) VALUES (?1, ?2, "
                           "'bench', 'bench', ?3, ?4, ?5, ?6, ?7, ?8, ?9, '{}')",
                           -1, &job, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(db, "INSERT INTO events (job_id, t_s, kind, detail) VALUES (?1, ?2, "
                               "?3, ?4)",
                           -1, &ev, NULL) != SQLITE_OK)
        return die("prepare", sqlite3_errmsg(db));
    double t0 = wall();
    long long n = 0, id = 0, runs_ended = 0;
    char tenant[32], detail[256];
    while (n < events) {
        id++;
        snprintf(tenant, sizeof tenant, "team-%02d", (int)(unit() * TENANTS));
        int tier = unit() < 0.7 ? 0 : 1;
        const char *model = models[(int)(unit() * 3)];
        int gpus = 1 << (int)(unit() * 4);
        /* submitted over the year in id order, as a real store grows */
        double submit = YEAR_START_S + ((double)n / (double)events) * 365 * DAY_S + unit() * 3600;
        double start = submit + unit() * 600;
        if (event(ev, id, submit, "submitted", NULL) || event(ev, id, submit + 1, "reserved", NULL))
            return die("insert event", sqlite3_errmsg(db));
        n += 2;
        if (unit() < 1.0 / 3) {
            double end = start + run_length();
            snprintf(detail, sizeof detail, "start=%.3f end=%.3f gpus=%d model=%s tier=%d", start,
                     end, gpus, model, tier);
            if (event(ev, id, start, "started", NULL) || event(ev, id, end, "run-ended", detail) ||
                event(ev, id, end, "requeued", NULL))
                return die("insert event", sqlite3_errmsg(db));
            n += 3;
            runs_ended++;
            start = end + unit() * 600;
        }
        double end = start + run_length();
        if (event(ev, id, start, "started", NULL) || event(ev, id, end, "finished", NULL))
            return die("insert event", sqlite3_errmsg(db));
        n += 2;
        sqlite3_bind_int64(job, 1, id);
        sqlite3_bind_text(job, 2, tenant, -1, SQLITE_TRANSIENT);
        sqlite3_bind_int(job, 3, TS_JOB_COMPLETED);
        sqlite3_bind_int(job, 4, tier);
        sqlite3_bind_int(job, 5, gpus);
        sqlite3_bind_text(job, 6, model, -1, SQLITE_STATIC);
        sqlite3_bind_double(job, 7, submit);
        sqlite3_bind_double(job, 8, start);
        sqlite3_bind_double(job, 9, end);
        if (sqlite3_step(job) != SQLITE_DONE)
            return die("insert job", sqlite3_errmsg(db));
        sqlite3_reset(job);
    }
    sqlite3_finalize(job);
    sqlite3_finalize(ev);
    if (sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
        return die("commit", sqlite3_errmsg(db));
    sqlite3_close(db);
    double t1 = wall();
    printf("filled: %lld events, %lld jobs, %lld run-ended events in %.1f s\n", n, id,
           runs_ended, t1 - t0);
    fflush(stdout);
    if (ts_store_open(url, &s, &err))
        return die("migrate", err.msg);
    ts_store_close(s);
    printf("migration %d (roll-up backfill): %.1f s\n", TS_SCHEMA_ROLLUP, wall() - t1);
    return 0;
}

static double value_of(const ts_usage_row *rows, int n, const ts_usage_row *key)
{
    for (int i = 0; i < n; i++)
        if (rows[i].tier == key->tier && strcmp(rows[i].tenant, key->tenant) == 0 &&
            strcmp(rows[i].gpu_model, key->gpu_model) == 0)
            return rows[i].gpu_s;
    return 0;
}

static int compare(const char *path, double from, double to)
{
    char url[1100];
    snprintf(url, sizeof url, "sqlite:%s", path);
    ts_store *s = NULL;
    ts_err err = {0};
    if (ts_store_open(url, &s, &err))
        return die("open", err.msg);
    ts_usage_row *scan = NULL, *fast = NULL;
    int ns = 0, nf = 0;
    double t0 = wall();
    if (ts_store_usage_scan(s, from, to, &scan, &ns, &err))
        return die("scan", err.msg);
    double t1 = wall();
    if (ts_store_usage(s, from, to, &fast, &nf, &err))
        return die("usage", err.msg);
    double t2 = wall();
    int bad = 0;
    for (int i = 0; i < ns; i++) {
        double v = value_of(fast, nf, &scan[i]);
        bad += fabs(v - scan[i].gpu_s) > 1e-6 * fmax(1, fabs(scan[i].gpu_s));
    }
    printf("full scan %.3f s, rolled up %.4f s, %d groups, %s\n", t1 - t0, t2 - t1, ns,
           bad || nf != ns ? "DIFFERENT" : "same answer");
    free(scan);
    free(fast);
    ts_store_close(s);
    return bad || nf != ns;
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "fill") == 0)
        return fill(argv[2], atoll(argv[3]));
    if (argc == 5 && strcmp(argv[1], "compare") == 0)
        return compare(argv[2], atof(argv[3]), atof(argv[4]));
    fprintf(stderr, "usage: tessera-bench-usage fill PATH EVENTS | compare PATH FROM TO\n");
    return 2;
}
