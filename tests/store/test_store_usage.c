/*
 * test_store_usage.c - rolled-up accounting answers what the full scan
 * answers: random histories of jobs that start, end, requeue (a "run-ended"
 * event), run on, run longer than a week and get their end corrected, with
 * windows whose edges fall inside hours, on hour boundaries, inside one
 * hour and across weeks. The same history written to a store of the last
 * schema without the roll-up, then migrated, gives the same answers too (the
 * migration's backfill). SQLite always, PostgreSQL when TS_TEST_PG_URL is set.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>

#include "store/store_fixture.h"
#include "store/store_internal.h"
#include "tessera/store.h"

#define HOUR_S 3600.0
#define DAY_S 86400.0
/* Histories live far in the past, so "now" never clips a window. */
#define T0_S 1000000.0
#define WINDOWS 150

typedef struct rng {
    uint64_t s;
} rng;

static uint64_t next(rng *r)
{
    r->s ^= r->s << 13;
    r->s ^= r->s >> 7;
    r->s ^= r->s << 17;
    return r->s;
}

static double unit(rng *r) { return (double)(next(r) >> 11) / 9007199254740992.0; }
static int pick(rng *r, int n) { return (int)(next(r) % (uint64_t)n); }

static ts_store *open_url(const char *url, int version)
{
    ts_store *s = NULL;
    ts_err err = {0};
    int rc = version ? store_open_version(url, version, &s, &err) : ts_store_open(url, &s, &err);
    if (rc)
        fail_msg("open %s: %s", url, err.msg);
    return s;
}

/* A start time: anywhere, or on an hour boundary. */
static double when(rng *r)
{
    double t = T0_S + unit(r) * 20 * DAY_S;
    return pick(r, 4) == 0 ? floor(t / HOUR_S) * HOUR_S : t;
}

/* A run's length: seconds, hours, days, more than the week runs are
 * bucketed for, or exactly whole hours. */
static double length(rng *r)
{
    switch (pick(r, 5)) {
    case 0: return unit(r) * 600;
    case 1: return unit(r) * 5 * HOUR_S;
    case 2: return unit(r) * 3 * DAY_S;
    case 3: return 7 * DAY_S + unit(r) * 5 * DAY_S;
    default: return (1 + pick(r, 30)) * HOUR_S;
    }
}

static void apply(ts_store *s, ts_job_row *row, const ts_event_row *ev)
{
    ts_err err = {0};
    int rc = ts_store_apply(s, row, 1, ev, ev ? 1 : 0, &err);
    if (rc)
        fail_msg("apply: %s", err.msg);
}

/* Writes njobs random jobs' lives through the store's API. */
static void history(ts_store *s, uint64_t seed, int njobs)
{
    static const char *tenants[] = {"a", "b", "c"};
    static const char *models[] = {"H100", "A100", ""};
    static const int gpus[] = {0, 1, 2, 8};
    rng r = {seed};
    for (int i = 0; i < njobs; i++) {
        ts_job_row j = store_fixture_job(tenants[pick(&r, 3)], "o", "");
        j.tier = pick(&r, 2);
        snprintf(j.gpu_model, sizeof j.gpu_model, "%s", models[pick(&r, 3)]);
        j.gpus = gpus[pick(&r, 4)];
        int life = pick(&r, 6);
        if (life == 0) { /* inserted already ended (an import) */
            j.start_s = when(&r);
            j.end_s = j.start_s + length(&r);
            j.state = TS_JOB_COMPLETED;
        }
        ts_err err = {0};
        bool existed;
        if (ts_store_job_insert(s, &j, &existed, &err))
            fail_msg("insert: %s", err.msg);
        if (life == 0 || life == 1) /* never starts, or ended at insert */
            continue;
        /* runs that end without ending the job: requeues */
        int requeues = life == 5 ? 1 + pick(&r, 3) : 0;
        double t = when(&r);
        for (int q = 0; q < requeues; q++) {
            j.state = TS_JOB_RUNNING;
            j.start_s = t;
            apply(s, &j, NULL);
            double end = t + length(&r);
            char detail[256];
            snprintf(detail, sizeof detail, "start=%.3f end=%.3f gpus=%d model=%s tier=%d",
                     j.start_s, end, j.gpus, j.gpu_model[0] ? j.gpu_model : "-", j.tier);
            ts_event_row ev = {.job_id = j.id, .t_s = end, .detail = detail};
            snprintf(ev.kind, sizeof ev.kind, "run-ended");
            j.state = TS_JOB_PENDING;
            j.start_s = 0;
            apply(s, &j, &ev);
            t = end + unit(&r) * HOUR_S;
        }
        j.state = TS_JOB_RUNNING;
        j.start_s = t;
        apply(s, &j, NULL);
        if (life == 2) /* still running */
            continue;
        j.state = TS_JOB_COMPLETED;
        j.end_s = t + length(&r);
        apply(s, &j, NULL);
        if (life == 4) { /* its end corrected afterwards */
            j.end_s = t + length(&r);
            apply(s, &j, NULL);
        }
    }
}

static double value_of(const ts_usage_row *rows, int n, const ts_usage_row *key)
{
    for (int i = 0; i < n; i++)
        if (rows[i].tier == key->tier && strcmp(rows[i].tenant, key->tenant) == 0 &&
            strcmp(rows[i].gpu_model, key->gpu_model) == 0)
            return rows[i].gpu_s;
    return 0;
}

static bool close_enough(double a, double b) { return fabs(a - b) <= 1e-6 * fmax(1, fabs(b)); }

/* Both answers, group by group (a group missing from one counts as 0). */
static void same_answer(ts_store *s, double from, double to)
{
    ts_err err = {0};
    ts_usage_row *fast = NULL, *scan = NULL;
    int nf = 0, ns = 0;
    if (ts_store_usage(s, from, to, &fast, &nf, &err))
        fail_msg("usage: %s", err.msg);
    if (ts_store_usage_scan(s, from, to, &scan, &ns, &err))
        fail_msg("usage scan: %s", err.msg);
    for (int i = 0; i < ns; i++) {
        double v = value_of(fast, nf, &scan[i]);
        if (!close_enough(v, scan[i].gpu_s))
            fail_msg("[%.3f, %.3f) %s/%d/%s: rolled up %.6f, scanned %.6f", from, to,
                     scan[i].tenant, scan[i].tier, scan[i].gpu_model, v, scan[i].gpu_s);
    }
    for (int i = 0; i < nf; i++) {
        double v = value_of(scan, ns, &fast[i]);
        if (!close_enough(fast[i].gpu_s, v))
            fail_msg("[%.3f, %.3f) %s/%d/%s: rolled up %.6f, scanned %.6f", from, to,
                     fast[i].tenant, fast[i].tier, fast[i].gpu_model, fast[i].gpu_s, v);
        if (i > 0)
            assert_true(strcmp(fast[i - 1].tenant, fast[i].tenant) <= 0);
    }
    free(fast);
    free(scan);
}

static void random_windows(ts_store *s, uint64_t seed)
{
    rng r = {seed};
    for (int i = 0; i < WINDOWS; i++) {
        double from = T0_S - 2 * DAY_S + unit(&r) * 40 * DAY_S;
        if (pick(&r, 4) == 0)
            from = floor(from / HOUR_S) * HOUR_S;
        static const double spans[] = {600, 3 * HOUR_S, 3 * DAY_S, 30 * DAY_S};
        double to = from + 1e-3 + unit(&r) * spans[pick(&r, 4)];
        if (pick(&r, 4) == 0)
            to = ceil(to / HOUR_S) * HOUR_S;
        same_answer(s, from, to);
    }
    /* the whole history at once, and one hour exactly */
    same_answer(s, 0, T0_S + 100 * DAY_S);
    same_answer(s, T0_S + 36000, T0_S + 39600);
}

static void test_random_histories(void **state)
{
    store_fixture *fx = *state;
    ts_store *s = open_url(fx->url, 0);
    for (uint64_t seed = 1; seed <= 3; seed++) {
        history(s, 0x9e3779b97f4a7c15ull * seed, 60);
        random_windows(s, seed * 7919);
    }
    ts_store_close(s);
}

static void test_migration_backfills(void **state)
{
    store_fixture *fx = *state;
    ts_store *s = open_url(fx->url, TS_SCHEMA_ROLLUP - 1);
    /* today's statements write the old store's history: the column a later
     * migration adds is there for them, and gone again before it runs */
    static const char ADD[] = "ALTER TABLE jobs ADD COLUMN restarts INTEGER NOT NULL DEFAULT 0";
    assert_int_equal(store_fixture_raw(fx, ADD, NULL), 0);
    history(s, 42, 150);
    ts_store_close(s);
    assert_int_equal(store_fixture_raw(fx, "ALTER TABLE jobs DROP COLUMN restarts", NULL), 0);
    s = open_url(fx->url, 0);
    assert_int_equal(ts_store_schema_version(s), TS_SCHEMA_VERSION);
    random_windows(s, 4242);
    /* and it keeps rolling up what happens after */
    history(s, 43, 40);
    random_windows(s, 4343);
    ts_store_close(s);
}

static void test_known_answer(void **state)
{
    store_fixture *fx = *state;
    ts_store *s = open_url(fx->url, 0);
    /* 2 GPUs from 00:30 to 02:15 of hour-aligned T, and a requeued run of 1
     * GPU from 01:50 to 01:55 */
    double t = floor(T0_S / HOUR_S) * HOUR_S;
    ts_job_row j = store_fixture_job("a", "o", "");
    j.gpus = 2;
    snprintf(j.gpu_model, sizeof j.gpu_model, "H100");
    ts_err err = {0};
    bool existed;
    assert_int_equal(ts_store_job_insert(s, &j, &existed, &err), 0);
    j.start_s = t + 1800;
    j.end_s = t + 8100;
    j.state = TS_JOB_COMPLETED;
    apply(s, &j, NULL);
    char detail[128];
    snprintf(detail, sizeof detail, "start=%.3f end=%.3f gpus=1 model=H100 tier=0", t + 6600,
             t + 6900);
    ts_event_row ev = {.job_id = j.id, .t_s = t + 6900, .detail = detail};
    snprintf(ev.kind, sizeof ev.kind, "run-ended");
    assert_int_equal(ts_store_event_append(s, &ev, &err), 0);
    ts_usage_row *u = NULL;
    int n = 0;
    /* [00:45, 01:52): 2 x 4020 + 1 x 120 */
    assert_int_equal(ts_store_usage(s, t + 2700, t + 6720, &u, &n, &err), 0);
    assert_int_equal(n, 1);
    assert_string_equal(u[0].tenant, "a");
    assert_string_equal(u[0].gpu_model, "H100");
    assert_true(fabs(u[0].gpu_s - 8160) < 1e-6);
    free(u);
    /* inside one hour: [01:10, 01:20) = 2 x 600 */
    assert_int_equal(ts_store_usage(s, t + 4200, t + 4800, &u, &n, &err), 0);
    assert_int_equal(n, 1);
    assert_true(fabs(u[0].gpu_s - 1200) < 1e-6);
    free(u);
    /* after everything: nothing */
    assert_int_equal(ts_store_usage(s, t + 9000, t + 20000, &u, &n, &err), 0);
    assert_int_equal(n, 0);
    ts_store_close(s);
}

#define USAGE_TESTS(setup)                                                                     \
    cmocka_unit_test_setup_teardown(test_known_answer, setup, store_fixture_teardown),         \
        cmocka_unit_test_setup_teardown(test_random_histories, setup, store_fixture_teardown), \
        cmocka_unit_test_setup_teardown(test_migration_backfills, setup, store_fixture_teardown)

int main(void)
{
    const struct CMUnitTest sqlite_tests[] = {USAGE_TESTS(store_fixture_sqlite)};
    int failed = cmocka_run_group_tests_name("store_usage/sqlite", sqlite_tests, NULL, NULL);
    const char *pg = getenv("TS_TEST_PG_URL");
    if (!pg || !*pg) {
        printf("store_usage/postgresql: skipped: set TS_TEST_PG_URL (scripts/pg-test-server "
               "start prints one)\n");
        return failed;
    }
    const struct CMUnitTest pg_tests[] = {USAGE_TESTS(store_fixture_pg)};
    return failed + cmocka_run_group_tests_name("store_usage/postgresql", pg_tests, NULL, NULL);
}
