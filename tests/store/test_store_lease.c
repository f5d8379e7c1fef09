/*
 * test_store_lease.c - the lease and epoch fencing that let several
 * tesserad share one PostgreSQL store (docs/ha.md), against PostgreSQL only
 * (TS_TEST_PG_URL; without it the PostgreSQL cases are skipped).
 *
 * Acquiring takes a free lease with a new epoch, renewing keeps it, another
 * holder is refused while it lasts and takes it over with the next epoch
 * once it expired (short leases, real sleeps, the database's clock), and a
 * store fenced at the old epoch can no longer commit a write, while the new
 * epoch's store can; each event and job records the epoch that wrote it. On SQLite every lease call is refused with a message
 * naming PostgreSQL.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <time.h>

#include "store/store_fixture.h"

static ts_store *open_store(void **state)
{
    store_fixture *fx = *state;
    ts_store *s = NULL;
    ts_err err = {0};
    if (ts_store_open(fx->url, &s, &err))
        fail_msg("open %s: %s", fx->url, err.msg);
    return s;
}

static void sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

static void test_acquire_renew_takeover(void **state)
{
    ts_store *a = open_store(state), *b = open_store(state);
    ts_err err = {0};
    ts_lease_info li;
    assert_int_equal(ts_store_lease_read(a, &li, &err), 0);
    assert_int_equal(li.epoch, 0);
    assert_string_equal(li.holder, "");

    int64_t ea = 0, eb = 0;
    assert_int_equal(ts_store_lease_acquire(a, "ctl-a", "http://127.0.0.1:1", 0.8, &ea, &err),
                     0);
    assert_int_equal(ea, 1);
    /* acquiring again what we hold keeps the epoch */
    assert_int_equal(ts_store_lease_acquire(a, "ctl-a", "http://127.0.0.1:1", 0.8, &ea, &err),
                     0);
    assert_int_equal(ea, 1);
    /* held: b is refused, told who holds it */
    assert_int_equal(ts_store_lease_acquire(b, "ctl-b", "http://127.0.0.1:2", 0.8, &eb, &err),
                     TS_ECONFLICT);
    assert_non_null(strstr(err.msg, "held by \"ctl-a\" at epoch 1"));
    assert_int_equal(ts_store_lease_read(b, &li, &err), 0);
    assert_string_equal(li.holder, "ctl-a");
    assert_string_equal(li.url, "http://127.0.0.1:1");
    assert_true(li.remaining_s > 0.3 && li.remaining_s <= 0.8);

    /* renewing keeps it past its first expiry */
    for (int i = 0; i < 3; i++) {
        sleep_s(0.4);
        assert_int_equal(ts_store_lease_renew(a, "ctl-a", 1, 0.8, &err), 0);
    }
    assert_int_equal(ts_store_lease_acquire(b, "ctl-b", "", 0.8, &eb, &err), TS_ECONFLICT);

    /* a stops renewing: once expired, b takes it with the next epoch */
    sleep_s(1.0);
    assert_int_equal(ts_store_lease_acquire(b, "ctl-b", "http://127.0.0.1:2", 5, &eb, &err), 0);
    assert_int_equal(eb, 2);
    assert_int_equal(ts_store_lease_renew(a, "ctl-a", 1, 0.8, &err), TS_ECONFLICT);
    assert_non_null(strstr(err.msg, "held by \"ctl-b\" at epoch 2"));
    /* a release by the deposed holder changes nothing */
    assert_int_equal(ts_store_lease_release(a, "ctl-a", 1, &err), 0);
    assert_int_equal(ts_store_lease_read(a, &li, &err), 0);
    assert_string_equal(li.holder, "ctl-b");
    assert_true(li.remaining_s > 1);
    /* b's release frees it at once: a takes it back with epoch 3 */
    assert_int_equal(ts_store_lease_release(b, "ctl-b", 2, &err), 0);
    assert_int_equal(ts_store_lease_acquire(a, "ctl-a", "", 5, &ea, &err), 0);
    assert_int_equal(ea, 3);
    ts_store_close(a);
    ts_store_close(b);
}

static void test_fencing(void **state)
{
    ts_store *a = open_store(state), *b = open_store(state);
    ts_err err = {0};
    int64_t ea = 0, eb = 0;
    assert_int_equal(ts_store_lease_acquire(a, "ctl-a", "", 0.5, &ea, &err), 0);
    assert_int_equal(ts_store_set_epoch(a, ea, &err), 0);
    ts_job_row r = store_fixture_job("team-a", "alice", "k1");
    bool existed = true;
    assert_int_equal(ts_store_job_insert(a, &r, &existed, &err), 0);
    int64_t id = r.id;
    ts_event_row ev = {.job_id = id, .t_s = 1, .kind = "submitted"};
    assert_int_equal(ts_store_event_append(a, &ev, &err), 0);

    /* a is deposed without noticing: b takes over at the next epoch */
    sleep_s(0.8);
    assert_int_equal(ts_store_lease_acquire(b, "ctl-b", "", 5, &eb, &err), 0);
    assert_int_equal(eb, ea + 1);
    assert_int_equal(ts_store_set_epoch(b, eb, &err), 0);

    /* every write of the old epoch is refused and leaves nothing behind */
    ts_job_row r2 = store_fixture_job("team-a", "alice", "k2");
    assert_int_equal(ts_store_job_insert(a, &r2, &existed, &err), TS_EFENCED);
    char want[64];
    snprintf(want, sizeof want, "fenced: epoch %lld is not the lease's %lld", (long long)ea,
             (long long)eb);
    assert_non_null(strstr(err.msg, want));
    ts_job_row got;
    assert_int_equal(ts_store_job_get(a, id, &got, &err), 0);
    got.state = TS_JOB_CANCELLED;
    assert_int_equal(ts_store_job_update(a, &got, &err), TS_EFENCED);
    assert_int_equal(ts_store_setting_put(a, "x", "1", &err), TS_EFENCED);
    assert_int_equal(ts_store_event_append(a, &ev, &err), TS_EFENCED);
    ts_job_row_fini(&got);
    int64_t counts[TS_JOB_STATES];
    assert_int_equal(ts_store_job_counts(b, NULL, counts, &err), 0);
    assert_int_equal(counts[TS_JOB_PENDING], 1);
    assert_int_equal(counts[TS_JOB_CANCELLED], 0);

    /* the new epoch writes */
    ts_job_row r3 = store_fixture_job("team-a", "alice", "k3");
    assert_int_equal(ts_store_job_insert(b, &r3, &existed, &err), 0);
    assert_false(existed);
    assert_int_equal(ts_store_event_append(b, &ev, &err), 0);
    /* each event and job carries the epoch that wrote it (migration 4): one
     * of the old epoch, before (by id) the one of the new; the refused
     * writes left none */
    store_fixture *fx = *state;
    static const char *const tables[] = {"events", "jobs"};
    for (int t = 0; t < 2; t++) {
        char sql[200];
        long long v = -1;
        snprintf(sql, sizeof sql, "SELECT COUNT(*) FROM %s WHERE epoch = %lld", tables[t],
                 (long long)ea);
        assert_int_equal(store_fixture_raw(fx, sql, &v), 0);
        assert_int_equal(v, 1);
        snprintf(sql, sizeof sql, "SELECT COUNT(*) FROM %s WHERE epoch = %lld", tables[t],
                 (long long)eb);
        assert_int_equal(store_fixture_raw(fx, sql, &v), 0);
        assert_int_equal(v, 1);
        snprintf(sql, sizeof sql,
                 "SELECT COUNT(*) FROM %s o, %s n WHERE o.epoch = %lld AND n.epoch = %lld "
                 "AND o.id > n.id",
                 tables[t], tables[t], (long long)ea, (long long)eb);
        assert_int_equal(store_fixture_raw(fx, sql, &v), 0);
        assert_int_equal(v, 0);
    }
    /* reads still work on the fenced store; with the check off it writes */
    assert_int_equal(ts_store_set_epoch(a, 0, &err), 0);
    assert_int_equal(ts_store_setting_put(a, "x", "1", &err), 0);
    ts_store_close(a);
    ts_store_close(b);
}

static void test_sqlite_refused(void **state)
{
    ts_store *s = open_store(state);
    ts_err err = {0};
    int64_t e = 0;
    assert_int_equal(ts_store_lease_acquire(s, "ctl-a", "", 5, &e, &err), TS_EINVAL);
    assert_non_null(strstr(err.msg, "needs a PostgreSQL store"));
    assert_int_equal(ts_store_set_epoch(s, 1, &err), TS_EINVAL);
    assert_non_null(strstr(err.msg, "PostgreSQL"));
    ts_store_close(s);
}

static void test_bad_inputs(void **state)
{
    ts_store *s = open_store(state);
    ts_err err = {0};
    int64_t e = 0;
    assert_int_equal(ts_store_lease_acquire(s, "", "", 5, &e, &err), TS_EINVAL);
    assert_non_null(strstr(err.msg, "lease holder: must not be empty"));
    assert_int_equal(ts_store_lease_acquire(s, "a", "", 0, &e, &err), TS_EINVAL);
    assert_int_equal(ts_store_lease_acquire(s, "a", "", 1e9, &e, &err), TS_EINVAL);
    char big[TS_LEASE_HOLDER_MAX + 1];
    memset(big, 'h', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    assert_int_equal(ts_store_lease_acquire(s, big, "", 5, &e, &err), TS_EINVAL);
    assert_non_null(strstr(err.msg, "longer than"));
    ts_store_close(s);
}

int main(void)
{
    const struct CMUnitTest sqlite_tests[] = {cmocka_unit_test_setup_teardown(
        test_sqlite_refused, store_fixture_sqlite, store_fixture_teardown)};
    int failed = cmocka_run_group_tests_name("store lease/sqlite", sqlite_tests, NULL, NULL);
    const char *pg = getenv("TS_TEST_PG_URL");
    if (!pg || !*pg) {
        printf("store lease/postgresql: skipped: set TS_TEST_PG_URL "
               "(scripts/pg-test-server start prints one)\n");
        return failed;
    }
    const struct CMUnitTest pg_tests[] = {
        cmocka_unit_test_setup_teardown(test_acquire_renew_takeover, store_fixture_pg,
                                        store_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_fencing, store_fixture_pg, store_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_bad_inputs, store_fixture_pg,
                                        store_fixture_teardown),
    };
    return failed + cmocka_run_group_tests_name("store lease/postgresql", pg_tests, NULL, NULL);
}
