/*
 * test_store_compat.c - a store written by an older tessera opens, upgrades
 * and reads back unchanged, on SQLite and (with TS_TEST_PG_URL) PostgreSQL.
 *
 * The fixtures in tests/data/store were made by the code before the one SQL
 * layer (store_stmts.c), at schema version 7: a finished job with a
 * placement, a result, a "run-ended" event and a roll-up to backfill, a
 * pending job, a live and a revoked token, the tenants document, a secret
 * setting and a large array whose element ids are reserved. Opening one
 * runs migrations 8 to 10 with today's code; every row must read back as it
 * was written, the accounting must be rolled up from it, and new ids must
 * still skip the array's reserved ones.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "store/store_fixture.h"

#define FIXTURE_DB TS_TEST_DATA "/store/v7-main.db"
#define FIXTURE_PG TS_TEST_DATA "/store/v7-main.pg.sql"
#define FIXTURE_SCRIPT_MAX (64 * 1024)
/* The array in the fixture: job 3, 100 elements, so ids 3..102 are taken. */
#define FIXTURE_NEXT_ID 103

static int copy_file(const char *from, const char *to)
{
    FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
    char buf[8192];
    size_t n;
    int rc = in && out ? 0 : -1;
    while (rc == 0 && (n = fread(buf, 1, sizeof buf, in)) > 0)
        rc = fwrite(buf, 1, n, out) == n ? 0 : -1;
    if (in)
        fclose(in);
    if (out && fclose(out))
        rc = -1;
    return rc;
}

static int load_pg(const store_fixture *fx)
{
    static char script[FIXTURE_SCRIPT_MAX];
    FILE *f = fopen(FIXTURE_PG, "rb");
    if (!f)
        return -1;
    size_t n = fread(script, 1, sizeof script - 1, f);
    fclose(f);
    script[n] = '\0';
    return store_fixture_raw(fx, script, NULL);
}

static ts_store *open_fixture(void **state)
{
    store_fixture *fx = *state;
    assert_int_equal(fx->pg ? load_pg(fx) : copy_file(FIXTURE_DB, fx->path), 0);
    long long v = 0;
    assert_int_equal(store_fixture_raw(fx, "SELECT MAX(version) FROM schema_version", &v), 0);
    assert_int_equal(v, 7);
    ts_store *s = NULL;
    ts_err err = {0};
    assert_int_equal(ts_store_open(fx->url, &s, &err), 0);
    assert_int_equal(ts_store_schema_version(s), 10);
    return s;
}

static void test_rows_read_back(void **state)
{
    ts_store *s = open_fixture(state);
    ts_err err = {0};
    ts_job_row j;
    assert_int_equal(ts_store_job_get(s, 1, &j, &err), 0);
    assert_string_equal(j.tenant, "ml");
    assert_string_equal(j.idem_key, "k1");
    assert_int_equal(j.state, TS_JOB_COMPLETED);
    assert_true(j.submit_s == 1764547200.123456789);
    assert_true(j.start_s == 1764550800.5 && j.end_s == 1764558000.25);
    assert_string_equal(j.gpu_model, "H100-80GB");
    assert_string_equal(j.placement_json, "{\"n-001\":[0,1,2,3]}");
    assert_string_equal(j.result_json, "{\"exit\":0}");
    assert_null(j.why);
    assert_string_equal(j.run_user, "alice");
    assert_int_equal(j.run_uid, 1001);
    assert_int_equal(j.gen, 2);
    ts_job_row_fini(&j);

    ts_event_row *ev = NULL;
    int n = 0;
    assert_int_equal(ts_store_event_list(s, 1, 0, 10, &ev, &n, &err), 0);
    assert_int_equal(n, 2);
    assert_string_equal(ev[0].kind, "started");
    assert_string_equal(ev[1].kind, "run-ended");
    ts_store_free_events(ev, n);

    ts_token_row *t = NULL;
    assert_int_equal(ts_store_token_list(s, NULL, &t, &n, &err), 0);
    assert_int_equal(n, 2);
    ts_token_row live;
    assert_int_equal(ts_store_token_by_hash(s, t[0].hash, &live, &err), 0);
    assert_string_equal(live.name, "alice");
    assert_int_equal(live.uid, 1001);
    assert_true(t[1].revoked_s == 1764547999.0);
    assert_int_equal(ts_store_token_by_hash(s, t[1].hash, &live, &err), TS_ENOENT);
    free(t);

    char *v = NULL;
    assert_int_equal(ts_store_tenants_get(s, &v, &err), 0);
    assert_string_equal(v, "tenants:\n  ml: {}\n  cv: {}\n");
    free(v);
    assert_int_equal(ts_store_setting_get(s, "secrets", &v, &err), 0);
    assert_string_equal(v, "ciphertext");
    free(v);
    ts_array_row *a = NULL;
    assert_int_equal(ts_store_arrays_open(s, &a, &n, &err), 0);
    assert_int_equal(n, 1);
    assert_int_equal(a[0].id, 3);
    assert_int_equal(a[0].size, 100);
    assert_int_equal(a[0].next, 2);
    free(a);
    ts_store_close(s);
}

static void test_rolled_up_and_writable(void **state)
{
    ts_store *s = open_fixture(state);
    ts_err err = {0};
    /* migration 8 rolled up the job's run and the run-ended event's */
    ts_usage_row *u = NULL;
    int n = 0;
    assert_int_equal(ts_store_usage(s, 1764500000, 1764600000, &u, &n, &err), 0);
    assert_int_equal(n, 1);
    assert_string_equal(u[0].tenant, "ml");
    assert_true(u[0].gpu_s > 36798.999 && u[0].gpu_s < 36799.001);
    free(u);

    ts_job_row j = store_fixture_job("ml", "alice", "");
    bool existed = true;
    assert_int_equal(ts_store_job_insert(s, &j, &existed, &err), 0);
    assert_false(existed);
    assert_int_equal(j.id, FIXTURE_NEXT_ID);
    ts_job_row again = store_fixture_job("ml", "alice", "k1");
    assert_int_equal(ts_store_job_insert(s, &again, &existed, &err), 0);
    assert_true(existed);
    assert_int_equal(again.id, 1);
    ts_job_row_fini(&again);

    ts_resv_row r = {.start_s = 1764600000, .end_s = 1764700000, .created_s = 1764547000};
    snprintf(r.name, sizeof r.name, "maint");
    snprintf(r.nodes, sizeof r.nodes, "n-[001-004]");
    assert_int_equal(ts_store_resv_insert(s, &r, &err), 0);
    assert_int_equal(ts_store_resv_insert(s, &r, &err), TS_EEXIST);
    assert_string_equal(err.msg, "reservation \"maint\": exists");
    ts_store_close(s);
}

#define COMPAT_TESTS(setup)                                                                    \
    cmocka_unit_test_setup_teardown(test_rows_read_back, setup, store_fixture_teardown),       \
        cmocka_unit_test_setup_teardown(test_rolled_up_and_writable, setup,                    \
                                        store_fixture_teardown)

int main(void)
{
    const struct CMUnitTest sqlite_tests[] = {COMPAT_TESTS(store_fixture_sqlite)};
    int failed = cmocka_run_group_tests_name("store_compat/sqlite", sqlite_tests, NULL, NULL);
    const char *pg = getenv("TS_TEST_PG_URL");
    if (!pg || !*pg) {
        printf("store_compat/postgresql: skipped: set TS_TEST_PG_URL (scripts/pg-test-server "
               "start prints one)\n");
        return failed;
    }
    const struct CMUnitTest pg_tests[] = {COMPAT_TESTS(store_fixture_pg)};
    return failed + cmocka_run_group_tests_name("store_compat/postgresql", pg_tests, NULL, NULL);
}
