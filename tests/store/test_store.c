/*
 * test_store.c - what each store call promises (store.h), on SQLite and, when
 * TS_TEST_PG_URL names a PostgreSQL database, the same suite on PostgreSQL.
 *
 * Every call is exercised through the public interface on a fresh store:
 * rows come back field for field (times to the bit, NULL strings as NULL);
 * an idempotency key returns the first job and never a second row; a stale
 * gen is refused without touching the row; an apply is all or nothing;
 * lists page by id with each filter; tokens resolve by hash only while live;
 * usage clips running intervals to the window. Bad input is refused with a
 * message naming the field before anything is written. Concurrency, group
 * commit, migrations and crash durability are in test_store_durability.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <math.h>

#include "store/store_fixture.h"
#include "tessera/store.h"

static ts_store *open_store(void **state)
{
    store_fixture *fx = *state;
    ts_store *s = NULL;
    ts_err err = {0};
    int rc = ts_store_open(fx->url, &s, &err);
    if (rc)
        fail_msg("open %s: %s", fx->url, err.msg);
    return s;
}

static int64_t insert(ts_store *s, ts_job_row *r)
{
    ts_err err = {0};
    bool existed = true;
    int rc = ts_store_job_insert(s, r, &existed, &err);
    if (rc)
        fail_msg("insert: %s", err.msg);
    assert_false(existed);
    return r->id;
}

/* An array stored lazily (store.h ts_store_array_insert): its first rows
 * get consecutive ids, the others are reserved (the next plain insert gets
 * an id past them), a later element is stored on its own id, the array's
 * row lists while open and not once closed; an idempotent repeat writes
 * nothing and names the first element. */
static void test_array_lazy(void **state)
{
    ts_store *s = open_store(state);
    ts_err err = {0};
    ts_job_row rows[2] = {store_fixture_job("a", "alice", "k#0"),
                          store_fixture_job("a", "alice", "k#1")};
    bool ex[2];
    ts_array_row ar = {.size = 1000, .next = 2, .open = true};
    if (ts_store_array_insert(s, rows, 2, ex, &ar, &err))
        fail_msg("array insert: %s", err.msg);
    assert_true(ar.id > 0);
    assert_int_equal(rows[0].id, ar.id);
    assert_int_equal(rows[1].id, ar.id + 1);
    ts_job_row other = store_fixture_job("a", "alice", "");
    assert_true(insert(s, &other) >= ar.id + 1000);
    ts_array_row *open = NULL;
    int n = 0;
    assert_int_equal(ts_store_arrays_open(s, &open, &n, &err), 0);
    assert_int_equal(n, 1);
    assert_int_equal(open[0].id, ar.id);
    assert_int_equal(open[0].size, 1000);
    assert_int_equal(open[0].next, 2);
    free(open);
    /* element 500, out of turn, on its reserved id */
    ts_job_row e = store_fixture_job("a", "alice", "k#500");
    e.id = ar.id + 500;
    ts_array_row upd = {.id = ar.id, .size = 1000, .next = 2, .open = true};
    assert_int_equal(ts_store_array_insert(s, &e, 1, ex, &upd, &err), 0);
    assert_int_equal(e.id, ar.id + 500);
    ts_job_row got;
    assert_int_equal(ts_store_job_get(s, ar.id + 500, &got, &err), 0);
    assert_string_equal(got.idem_key, "k#500");
    ts_job_row_fini(&got);
    /* an id outside the array is refused, naming the row */
    ts_job_row bad = store_fixture_job("a", "alice", "");
    bad.id = ar.id + 1000;
    assert_int_equal(ts_store_array_insert(s, &bad, 1, ex, &upd, &err), TS_EINVAL);
    assert_non_null(strstr(err.msg, "rows[0].id"));
    /* closed: no longer listed */
    ts_array_row closed = {.id = ar.id, .size = 1000, .next = 1000, .open = false};
    assert_int_equal(ts_store_array_insert(s, NULL, 0, NULL, &closed, &err), 0);
    assert_int_equal(ts_store_arrays_open(s, &open, &n, &err), 0);
    assert_int_equal(n, 0);
    free(open);
    /* the same request again: nothing new, the first element named */
    ts_job_row again[2] = {store_fixture_job("a", "alice", "k#0"),
                           store_fixture_job("a", "alice", "k#1")};
    ts_array_row ar2 = {.size = 1000, .next = 2, .open = true};
    assert_int_equal(ts_store_array_insert(s, again, 2, ex, &ar2, &err), 0);
    assert_true(ex[0] && ex[1]);
    assert_int_equal(ar2.id, ar.id);
    ts_job_row_fini(&again[0]);
    ts_job_row_fini(&again[1]);
    assert_int_equal(ts_store_arrays_open(s, &open, &n, &err), 0);
    assert_int_equal(n, 0);
    free(open);
    ts_store_close(s);
}

/* Reservations: insert, a taken name refused, list by start, delete, and a
 * second delete refused. */
static void test_reservations(void **state)
{
    ts_store *s = open_store(state);
    ts_err err;
    ts_resv_row a = {.name = "train-a", .nodes = "r-[1-2]", .start_s = 2000, .end_s = 3000,
                     .tenant = "team-a", .users = "alice,bob", .created_s = 1000};
    ts_resv_row m = {.name = "maint", .nodes = "r-3", .start_s = 1500, .end_s = 1600,
                     .maintenance = true, .created_s = 1000};
    assert_int_equal(ts_store_resv_insert(s, &a, &err), 0);
    assert_int_equal(ts_store_resv_insert(s, &m, &err), 0);
    assert_int_equal(ts_store_resv_insert(s, &a, &err), TS_EEXIST);
    ts_resv_row bad = a;
    bad.end_s = bad.start_s;
    assert_int_equal(ts_store_resv_insert(s, &bad, &err), TS_EINVAL);
    ts_resv_row *rows = NULL;
    int n = 0;
    assert_int_equal(ts_store_resv_list(s, &rows, &n, &err), 0);
    assert_int_equal(n, 2);
    assert_string_equal(rows[0].name, "maint");
    assert_true(rows[0].maintenance);
    assert_string_equal(rows[1].name, "train-a");
    assert_string_equal(rows[1].nodes, "r-[1-2]");
    assert_string_equal(rows[1].tenant, "team-a");
    assert_string_equal(rows[1].users, "alice,bob");
    assert_true(rows[1].start_s == 2000 && rows[1].end_s == 3000 && rows[1].created_s == 1000);
    assert_false(rows[1].maintenance);
    free(rows);
    assert_int_equal(ts_store_resv_delete(s, "maint", &err), 0);
    assert_int_equal(ts_store_resv_delete(s, "maint", &err), TS_ENOENT);
    ts_store_close(s);
    /* stored: a reopened store still has the other */
    s = open_store(state);
    assert_int_equal(ts_store_resv_list(s, &rows, &n, &err), 0);
    assert_int_equal(n, 1);
    assert_string_equal(rows[0].name, "train-a");
    free(rows);
    ts_store_close(s);
}

static void test_open_and_names(void **state)
{
    store_fixture *fx = *state;
    ts_store *s = open_store(state);
    assert_string_equal(ts_store_backend(s), fx->pg ? "postgresql" : "sqlite");
    assert_int_equal(ts_store_schema_version(s), 10);
    ts_store_close(s);
    /* reopening an existing store migrates nothing and keeps its rows */
    s = open_store(state);
    ts_job_row r = store_fixture_job("a", "alice", "");
    int64_t id = insert(s, &r);
    ts_store_close(s);
    s = open_store(state);
    ts_job_row got;
    ts_err err = {0};
    assert_int_equal(ts_store_job_get(s, id, &got, &err), 0);
    ts_job_row_fini(&got);
    ts_store_close(s);

    for (int i = 0; i < TS_JOB_STATES; i++)
        assert_int_equal(ts_job_state_parse(ts_job_state_name(i)), i);
    assert_string_equal(ts_job_state_name(TS_JOB_STOPPING), "stopping");
    assert_int_equal(ts_job_state_parse("done"), -1);
    assert_int_equal(ts_job_state_parse(NULL), -1);
    assert_string_equal(ts_job_state_name(99), "unknown");
    assert_string_equal(ts_role_name(TS_ROLE_TENANT_ADMIN), "tenant-admin");
    assert_int_equal(ts_role_parse("viewer"), TS_ROLE_VIEWER);
    assert_int_equal(ts_role_parse("root"), -1);
    /* token names (the API and the CLI share the rule) */
    char longest[TS_STORE_NAME_MAX];
    memset(longest, 'x', sizeof longest - 1);
    longest[sizeof longest - 1] = '\0';
    assert_true(ts_token_name_ok(longest));
    assert_true(ts_token_name_ok("a") && ts_token_name_ok("9a.b_c-"));
    char over[TS_STORE_NAME_MAX + 1];
    memset(over, 'x', sizeof over - 1);
    over[sizeof over - 1] = '\0';
    assert_false(ts_token_name_ok(over));
    assert_false(ts_token_name_ok(""));
    assert_false(ts_token_name_ok(NULL));
    assert_false(ts_token_name_ok("-lead") || ts_token_name_ok(".a") || ts_token_name_ok("a/b") ||
                 ts_token_name_ok("a\tb") || ts_token_name_ok("a b"));
}

/* URLs the store refuses or accepts, whatever the backend under test. */
static void test_urls(void **state)
{
    store_fixture *fx = *state;
    if (fx->pg)
        skip();
    ts_store *s = NULL;
    ts_err err = {0};
    char url[600];
    snprintf(url, sizeof url, "%s/bare.db", fx->dir); /* a bare path */
    assert_int_equal(ts_store_open(url, &s, &err), 0);
    assert_string_equal(ts_store_backend(s), "sqlite");
    /* the file belongs to one writer: a second open is refused naming the
     * holder's pid (a second tesserad on the same state directory), and
     * taken once the first closed */
    ts_store *again = NULL;
    assert_int_equal(ts_store_open(url, &again, &err), TS_EEXIST);
    assert_null(again);
    char pid[32];
    snprintf(pid, sizeof pid, "pid %ld,", (long)getpid());
    assert_non_null(strstr(err.msg, pid));
    assert_non_null(strstr(err.msg, "in use by another process"));
    ts_store_close(s);
    assert_int_equal(ts_store_open(url, &s, &err), 0);
    ts_store_close(s);
    /* a damaged file: the error names it */
    snprintf(url, sizeof url, "%s/damaged.db", fx->dir);
    assert_int_equal(ts_store_open(url, &s, &err), 0);
    for (int i = 0; i < 2000; i++) {
        ts_job_row r = store_fixture_job("a", "alice", "");
        insert(s, &r);
    }
    ts_store_close(s);
    FILE *f = fopen(url, "r+b");
    assert_non_null(f);
    char junk[256];
    memset(junk, 0xff, sizeof junk);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    for (long at = size / 2 / 4096 * 4096; at < size; at += 4096) { /* the jobs' rows' pages */
        fseek(f, at, SEEK_SET);
        fwrite(junk, 1, sizeof junk, f);
    }
    fclose(f);
    int rc = ts_store_open(url, &s, &err);
    if (rc == 0) {
        ts_job_row *rows = NULL;
        int n = 0;
        rc = ts_store_job_list(s, NULL, 0, 1000, &rows, &n, &err);
        if (rc == 0)
            ts_store_free_jobs(rows, n);
        ts_store_close(s);
    }
    assert_int_not_equal(rc, 0);
    assert_non_null(strstr(err.msg, "damaged.db"));
    snprintf(url, sizeof url, "sqlite://%s/slashes.db", fx->dir);
    assert_int_equal(ts_store_open(url, &s, &err), 0);
    ts_store_close(s);
    snprintf(url, sizeof url, "%s/slashes.db", fx->dir);
    assert_int_equal(access(url, F_OK), 0);

    assert_int_equal(ts_store_open("", &s, &err), TS_EINVAL);
    assert_null(s);
    assert_int_equal(ts_store_open("mysql://db/x", &s, &err), TS_EINVAL);
    assert_non_null(strstr(err.msg, "unknown scheme 'mysql'"));
    assert_int_equal(ts_store_open("sqlite::memory:", &s, &err), TS_EINVAL);
    assert_non_null(strstr(err.msg, "plain file path"));
    assert_int_equal(ts_store_open("sqlite:", &s, &err), TS_EINVAL);
    assert_int_equal(ts_store_open("/nonexistent-dir/x/store.db", &s, &err), TS_EIO);
    assert_non_null(strstr(err.msg, "sqlite: open"));
    /* nothing listens on port 1: refused at once */
    assert_int_equal(ts_store_open("postgresql://127.0.0.1:1/x?connect_timeout=2", &s, &err),
                     TS_EIO);
    assert_non_null(strstr(err.msg, "postgresql: connect"));
}

static void test_job_roundtrip(void **state)
{
    ts_store *s = open_store(state);
    ts_err err = {0};
    ts_job_row r = store_fixture_job("team-a", "alice", "");
    snprintf(r.gpu_model, sizeof r.gpu_model, "H100");
    r.state = TS_JOB_RUNNING;
    r.tier = 1;
    r.priority = -7;
    r.gpus = 16;
    r.start_s = 1764400100.0000002;
    r.preemptions = 3;
    snprintf(r.reason, sizeof r.reason, "capacity");
    r.why = (char *)"needs 16 whole GPUs, 8 free";
    r.placement_json = (char *)"[{\"node\":\"r1-n03\",\"gpus\":[0,1,2,3]}]";
    snprintf(r.run_user, sizeof r.run_user, "alice");
    r.run_uid = 4294967294LL;
    int64_t id = insert(s, &r);
    assert_true(id > 0);
    assert_int_equal(r.gen, 1);
    ts_job_row r2 = store_fixture_job("team-a", "alice", "");
    int64_t id2 = insert(s, &r2);
    assert_true(id2 > id);

    ts_job_row g;
    assert_int_equal(ts_store_job_get(s, id, &g, &err), 0);
    assert_int_equal(g.id, id);
    assert_string_equal(g.tenant, "team-a");
    assert_string_equal(g.name, "train");
    assert_string_equal(g.owner, "alice");
    assert_string_equal(g.run_user, "alice");
    assert_true(g.run_uid == 4294967294LL);
    assert_string_equal(g.idem_key, "");
    assert_int_equal(g.state, TS_JOB_RUNNING);
    assert_int_equal(g.tier, 1);
    assert_int_equal(g.priority, -7);
    assert_int_equal(g.gpus, 16);
    assert_string_equal(g.gpu_model, "H100");
    assert_true(g.submit_s == r.submit_s);
    assert_true(g.start_s == r.start_s); /* to the bit */
    assert_true(g.end_s == 0);
    assert_int_equal(g.preemptions, 3);
    assert_string_equal(g.reason, "capacity");
    assert_string_equal(g.why, r.why);
    assert_string_equal(g.spec_json, r.spec_json);
    assert_string_equal(g.placement_json, r.placement_json);
    assert_int_equal(g.gen, 1);
    ts_job_row_fini(&g);
    assert_int_equal(ts_store_job_get(s, id2, &g, &err), 0);
    assert_null(g.why);
    assert_null(g.placement_json);
    ts_job_row_fini(&g);
    assert_int_equal(ts_store_job_get(s, id2 + 100, &g, &err), TS_ENOENT);
    assert_non_null(strstr(err.msg, "no such job"));
    assert_int_equal(ts_store_job_get(s, 0, &g, &err), TS_ENOENT);
    ts_store_close(s);
}

static void test_idempotency(void **state)
{
    ts_store *s = open_store(state);
    ts_err err = {0};
    bool existed;
    ts_job_row a = store_fixture_job("team-a", "alice", "k1");
    int64_t id = insert(s, &a);
    /* the retry differs (a client bug or a changed body): the first job wins */
    ts_job_row b = store_fixture_job("team-a", "alice", "k1");
    snprintf(b.name, sizeof b.name, "retry");
    b.spec_json = (char *)"{}";
    assert_int_equal(ts_store_job_insert(s, &b, &existed, &err), 0);
    assert_true(existed);
    assert_int_equal(b.id, id);
    assert_string_equal(b.name, "train");
    assert_string_equal(b.spec_json, a.spec_json);
    assert_int_equal(b.gen, 1);
    ts_job_row_fini(&b); /* the store's copies */
    /* the key is per owner; no key means no deduplication */
    ts_job_row c = store_fixture_job("team-a", "bob", "k1");
    assert_true(insert(s, &c) != id);
    ts_job_row d = store_fixture_job("team-a", "alice", "");
    ts_job_row e = store_fixture_job("team-a", "alice", "");
    assert_true(insert(s, &d) != insert(s, &e));
    /* asked before a submission claims queue room: the owner's key only */
    int64_t found = -1;
    assert_int_equal(ts_store_job_by_idem(s, "alice", "k1", &found, &err), 0);
    assert_int_equal(found, id);
    assert_int_equal(ts_store_job_by_idem(s, "carol", "k1", &found, &err), 0);
    assert_int_equal(found, 0);
    assert_int_equal(ts_store_job_by_idem(s, "alice", "k2", &found, &err), 0);
    assert_int_equal(found, 0);
    assert_int_equal(ts_store_job_by_idem(s, "alice", "", &found, &err), 0);
    assert_int_equal(found, 0); /* no key: never a retry, though keyless jobs exist */
    int64_t counts[TS_JOB_STATES];
    assert_int_equal(ts_store_job_counts(s, NULL, counts, &err), 0);
    assert_int_equal(counts[TS_JOB_PENDING], 4);
    ts_store_close(s);
}

static void test_update_gen(void **state)
{
    ts_store *s = open_store(state);
    ts_err err = {0};
    ts_job_row r = store_fixture_job("team-a", "alice", "");
    insert(s, &r);
    ts_job_row stale = r;
    r.state = TS_JOB_RUNNING;
    r.start_s = 1764400200.5;
    snprintf(r.gpu_model, sizeof r.gpu_model, "A100");
    r.placement_json = (char *)"[{\"node\":\"n1\",\"gpus\":[0]}]";
    r.why = (char *)"placed";
    assert_int_equal(ts_store_job_update(s, &r, &err), 0);
    assert_int_equal(r.gen, 2);
    /* an update from a copy read before: refused, the row stays as it is */
    stale.state = TS_JOB_CANCELLED;
    assert_int_equal(ts_store_job_update(s, &stale, &err), TS_ECONFLICT);
    assert_non_null(strstr(err.msg, "gen 1 is stale"));
    assert_int_equal(stale.gen, 1);
    ts_job_row g;
    assert_int_equal(ts_store_job_get(s, r.id, &g, &err), 0);
    assert_int_equal(g.state, TS_JOB_RUNNING);
    assert_int_equal(g.gen, 2);
    assert_true(g.start_s == 1764400200.5);
    assert_string_equal(g.gpu_model, "A100");
    assert_string_equal(g.placement_json, r.placement_json);
    assert_string_equal(g.why, "placed");
    ts_job_row_fini(&g);
    /* fields an update may clear */
    r.why = NULL;
    r.placement_json = NULL;
    r.state = TS_JOB_COMPLETED;
    r.end_s = 1764400300;
    assert_int_equal(ts_store_job_update(s, &r, &err), 0);
    assert_int_equal(ts_store_job_get(s, r.id, &g, &err), 0);
    assert_null(g.why);
    assert_null(g.placement_json);
    assert_int_equal(g.gen, 3);
    ts_job_row_fini(&g);
    /* a spec, priority and GPUs of their own (an update of the job,
     * job_update.c); a NULL spec keeps the stored one */
    r.spec_json = (char *)"{\"v\":2}";
    r.priority = 7;
    r.gpus = 6;
    assert_int_equal(ts_store_job_update(s, &r, &err), 0);
    r.spec_json = NULL;
    r.reason[0] = '\0';
    assert_int_equal(ts_store_job_update(s, &r, &err), 0);
    assert_int_equal(ts_store_job_get(s, r.id, &g, &err), 0);
    assert_string_equal(g.spec_json, "{\"v\":2}");
    assert_int_equal(g.priority, 7);
    assert_int_equal(g.gpus, 6);
    assert_int_equal(g.gen, 5);
    ts_job_row_fini(&g);
    ts_job_row ghost = r;
    ghost.id = r.id + 1000;
    assert_int_equal(ts_store_job_update(s, &ghost, &err), TS_ENOENT);
    assert_non_null(strstr(err.msg, "no such job"));
    ts_store_close(s);
}

static void test_apply_all_or_nothing(void **state)
{
    ts_store *s = open_store(state);
    ts_err err = {0};
    ts_job_row rows[2] = {store_fixture_job("t", "o", ""), store_fixture_job("t", "o", "")};
    insert(s, &rows[0]);
    insert(s, &rows[1]);
    rows[0].state = TS_JOB_RUNNING;
    rows[1].state = TS_JOB_HELD;
    ts_event_row ev[2] = {{.job_id = rows[0].id, .t_s = 10, .kind = "started"},
                          {.job_id = rows[1].id, .t_s = 11, .kind = "held", .detail = "by admin"}};
    assert_int_equal(ts_store_apply(s, rows, 2, ev, 2, &err), 0);
    assert_int_equal(rows[0].gen, 2);
    assert_int_equal(rows[1].gen, 2);

    /* the second row is stale: nothing of this apply may land */
    ts_job_row again[2] = {rows[0], rows[1]};
    again[0].state = TS_JOB_COMPLETED;
    again[1].gen = 1;
    ts_event_row ev2 = {.job_id = rows[0].id, .t_s = 12, .kind = "completed"};
    assert_int_equal(ts_store_apply(s, again, 2, &ev2, 1, &err), TS_ECONFLICT);
    assert_non_null(strstr(err.msg, "rows[1]: "));
    assert_int_equal(again[0].gen, 2);
    ts_job_row g;
    assert_int_equal(ts_store_job_get(s, rows[0].id, &g, &err), 0);
    assert_int_equal(g.state, TS_JOB_RUNNING);
    assert_int_equal(g.gen, 2);
    ts_job_row_fini(&g);
    ts_event_row *evs;
    int n;
    assert_int_equal(ts_store_event_list(s, 0, 0, 100, &evs, &n, &err), 0);
    assert_int_equal(n, 2);
    ts_store_free_events(evs, n);
    /* bad input is refused before anything is queued */
    ts_event_row bad = {.job_id = rows[0].id, .t_s = 1};
    assert_int_equal(ts_store_apply(s, rows, 2, &bad, 1, &err), TS_EINVAL);
    assert_string_equal(err.msg, "events[0].kind: must not be empty");
    assert_int_equal(ts_store_apply(s, NULL, 0, NULL, 0, &err), 0);
    ts_store_close(s);
}

static void test_list_and_counts(void **state)
{
    ts_store *s = open_store(state);
    ts_err err = {0};
    enum { JOBS = 40, STATES_USED = 7 }; /* the cases below count on seven states */
    int64_t ids[JOBS];
    char tenant[8], owner[8];
    for (int i = 0; i < JOBS; i++) {
        snprintf(tenant, sizeof tenant, "t%d", i % 3);
        snprintf(owner, sizeof owner, "o%d", i % 2);
        ts_job_row r = store_fixture_job(tenant, owner, "");
        r.state = i % STATES_USED;
        ids[i] = insert(s, &r);
    }
    /* pages of 7 by cursor cover every job once, ascending */
    int seen = 0;
    int64_t after = 0;
    for (;;) {
        ts_job_row *rows;
        int n;
        assert_int_equal(ts_store_job_list(s, NULL, after, 7, &rows, &n, &err), 0);
        if (n == 0) {
            assert_null(rows);
            break;
        }
        assert_true(n <= 7);
        for (int i = 0; i < n; i++)
            assert_int_equal(rows[i].id, ids[seen++]);
        after = rows[n - 1].id;
        ts_store_free_jobs(rows, n);
    }
    assert_int_equal(seen, JOBS);

    struct {
        ts_job_filter f;
        int want;
    } cases[] = {
        {{.tenant = "t1"}, 13},
        {{.owner = "o0", .states = 1u << TS_JOB_RUNNING}, 3},  /* i = 2, 16, 30 */
        {{.tenant = "t0", .owner = "o1"}, 7},
        {{.active_only = true}, 24},
        {{.tenant = "t2", .active_only = true}, 8},
        {{.tenant = "nobody"}, 0},
        /* several states: a mask (i = 2, 16, 30 running; 12, 26 failed) */
        {{.owner = "o0", .states = 1u << TS_JOB_RUNNING | 1u << TS_JOB_FAILED}, 5},
        /* one used, one not (i = 0, 7, ..., 35 pending; no job timed out) */
        {{.states = 1u << TS_JOB_PENDING | 1u << TS_JOB_TIMEOUT}, 6},
        {{.tenant = "t1", .newest_first = true}, 13},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        ts_job_row *rows;
        int n;
        assert_int_equal(ts_store_job_list(s, &cases[c].f, 0, 1000, &rows, &n, &err), 0);
        assert_int_equal(n, cases[c].want);
        for (int i = 0; i < n; i++) {
            const ts_job_filter *f = &cases[c].f;
            assert_true(!f->tenant || strcmp(rows[i].tenant, f->tenant) == 0);
            assert_true(!f->owner || strcmp(rows[i].owner, f->owner) == 0);
            assert_true(!f->states || (f->states & (1u << rows[i].state)));
            assert_true(!f->active_only || !ts_job_state_terminal(rows[i].state));
            assert_true(i == 0 || (f->newest_first ? rows[i].id < rows[i - 1].id
                                                   : rows[i].id > rows[i - 1].id));
        }
        ts_store_free_jobs(rows, n);
    }
    ts_job_row *rows;
    int n;
    assert_int_equal(ts_store_job_list(s, NULL, 0, 0, &rows, &n, &err), TS_EINVAL);
    assert_string_equal(err.msg, "limit: must be 1..10000");
    assert_int_equal(ts_store_job_list(s, NULL, 0, 10001, &rows, &n, &err), TS_EINVAL);
    ts_job_filter badf = {.states = 1u << TS_JOB_STATES};
    unsigned set;
    char bad[16];
    assert_int_equal(ts_job_states_parse("pending,running", &set, bad, sizeof bad), 0);
    assert_int_equal(set, 1u << TS_JOB_PENDING | 1u << TS_JOB_RUNNING);
    assert_int_equal(ts_job_states_parse("timeout", &set, bad, sizeof bad), 0);
    assert_int_equal(set, 1u << TS_JOB_TIMEOUT);
    assert_int_equal(ts_job_states_parse("pending,runing", &set, bad, sizeof bad), -1);
    assert_string_equal(bad, "runing");
    assert_int_equal(ts_job_states_parse("", &set, bad, sizeof bad), -1);
    assert_int_equal(ts_job_states_parse("pending,", &set, bad, sizeof bad), -1);
    assert_string_equal(bad, "");
    assert_int_equal(ts_store_job_list(s, &badf, 0, 10, &rows, &n, &err), TS_EINVAL);

    int64_t counts[TS_JOB_STATES];
    assert_int_equal(ts_store_job_counts(s, NULL, counts, &err), 0);
    for (int st = 0; st < TS_JOB_STATES; st++)
        assert_int_equal(counts[st], st >= STATES_USED            ? 0
                                     : st < JOBS % STATES_USED ? 6
                                                               : 5);
    assert_int_equal(ts_store_job_counts(s, "t0", counts, &err), 0);
    int64_t total = 0;
    for (int st = 0; st < TS_JOB_STATES; st++)
        total += counts[st];
    assert_int_equal(total, 14);
    assert_int_equal(counts[TS_JOB_PENDING], 2); /* i = 0, 21 */
    assert_int_equal(ts_store_job_counts(s, "nobody", counts, &err), 0);
    for (int st = 0; st < TS_JOB_STATES; st++)
        assert_int_equal(counts[st], 0);
    ts_store_close(s);
}

static void test_events(void **state)
{
    ts_store *s = open_store(state);
    ts_err err = {0};
    ts_job_row a = store_fixture_job("t", "o", ""), b = store_fixture_job("t", "o", "");
    insert(s, &a);
    insert(s, &b);
    const char *kinds[] = {"submitted", "reserved", "started", "preempted", "requeued"};
    for (int i = 0; i < 5; i++) {
        ts_event_row ev = {.job_id = a.id, .t_s = 100 + i, .detail = i == 3 ? NULL : "d"};
        snprintf(ev.kind, sizeof ev.kind, "%s", kinds[i]);
        assert_int_equal(ts_store_event_append(s, &ev, &err), 0);
        ev.job_id = b.id;
        if (i < 2)
            assert_int_equal(ts_store_event_append(s, &ev, &err), 0);
    }
    ts_event_row *rows;
    int n;
    assert_int_equal(ts_store_event_list(s, a.id, 0, 3, &rows, &n, &err), 0);
    assert_int_equal(n, 3);
    assert_string_equal(rows[0].kind, "submitted");
    assert_string_equal(rows[2].kind, "started");
    assert_true(rows[1].t_s == 101);
    assert_string_equal(rows[1].detail, "d");
    int64_t after = rows[2].id;
    ts_store_free_events(rows, n);
    assert_int_equal(ts_store_event_list(s, a.id, after, 100, &rows, &n, &err), 0);
    assert_int_equal(n, 2);
    assert_string_equal(rows[0].kind, "preempted");
    assert_null(rows[0].detail);
    assert_int_equal(rows[1].job_id, a.id);
    ts_store_free_events(rows, n);
    /* job 0: every job's events, in the order they were written */
    assert_int_equal(ts_store_event_list(s, 0, 0, 100, &rows, &n, &err), 0);
    assert_int_equal(n, 7);
    for (int i = 1; i < n; i++)
        assert_true(rows[i].id > rows[i - 1].id);
    ts_store_free_events(rows, n);
    /* job 0: an event about no job (the secret store's audit), listed alone */
    ts_event_row none = {.job_id = 0, .t_s = 2, .kind = "secret-set", .detail = "tenant=t"};
    assert_int_equal(ts_store_event_append(s, &none, &err), 0);
    assert_int_equal(ts_store_event_list(s, TS_EVENTS_NO_JOB, 0, 100, &rows, &n, &err), 0);
    assert_int_equal(n, 1);
    assert_int_equal(rows[0].job_id, 0);
    assert_string_equal(rows[0].kind, "secret-set");
    ts_store_free_events(rows, n);
    ts_event_row bad = {.job_id = -1, .t_s = 1, .kind = "x"};
    assert_int_equal(ts_store_event_append(s, &bad, &err), TS_EINVAL);
    assert_string_equal(err.msg, "event.job_id: must be >= 0 (0: about no job)");
    ts_store_close(s);
}

static ts_token_row token(const char *name, int role, const char *tenant, uint8_t seed)
{
    ts_token_row t;
    memset(&t, 0, sizeof t);
    snprintf(t.name, sizeof t.name, "%s", name);
    snprintf(t.tenant, sizeof t.tenant, "%s", tenant);
    t.role = role;
    for (int i = 0; i < TS_TOKEN_HASH_BYTES; i++)
        t.hash[i] = (uint8_t)(seed * 31 + i * 7);
    t.hash[5] = 0; /* binary, not text: a NUL inside must survive */
    t.created_s = 1764400000.5 + seed;
    return t;
}

static void test_tokens(void **state)
{
    ts_store *s = open_store(state);
    ts_err err = {0};
    ts_token_row t[4] = {token("root", TS_ROLE_ADMIN, "", 1),
                         token("alice", TS_ROLE_USER, "team-a", 2),
                         token("ann", TS_ROLE_TENANT_ADMIN, "team-a", 3),
                         token("vic", TS_ROLE_VIEWER, "team-b", 4)};
    /* alice has a Unix identity and an expiry; the others none */
    snprintf(t[1].unix_user, sizeof t[1].unix_user, "alice");
    t[1].uid = 4294967294LL; /* the largest: no 32-bit column may cut it */
    t[1].expires_s = 1764900000.25;
    for (int i = 0; i < 4; i++) {
        assert_int_equal(ts_store_token_insert(s, &t[i], &err), 0);
        assert_true(t[i].id > 0);
    }
    ts_token_row dup = token("alice", TS_ROLE_USER, "team-a", 9);
    assert_int_equal(ts_store_token_insert(s, &dup, &err), TS_EEXIST);
    assert_string_equal(err.msg, "token 'alice': name already taken");
    ts_token_row same_hash = token("eve", TS_ROLE_USER, "team-a", 2);
    assert_int_equal(ts_store_token_insert(s, &same_hash, &err), TS_EEXIST);
    assert_non_null(strstr(err.msg, "hash already used"));

    ts_token_row g;
    assert_int_equal(ts_store_token_by_hash(s, t[1].hash, &g, &err), 0);
    assert_string_equal(g.name, "alice");
    assert_int_equal(g.role, TS_ROLE_USER);
    assert_string_equal(g.tenant, "team-a");
    assert_memory_equal(g.hash, t[1].hash, TS_TOKEN_HASH_BYTES);
    assert_true(g.created_s == t[1].created_s);
    assert_true(g.revoked_s == 0);
    assert_int_equal(g.id, t[1].id);
    assert_string_equal(g.unix_user, "alice");
    assert_true(g.uid == 4294967294LL);
    assert_true(g.expires_s == 1764900000.25);
    assert_int_equal(ts_store_token_by_hash(s, t[0].hash, &g, &err), 0);
    assert_string_equal(g.unix_user, "");
    assert_true(g.expires_s == 0);
    uint8_t unknown[TS_TOKEN_HASH_BYTES] = {0};
    assert_int_equal(ts_store_token_by_hash(s, unknown, &g, &err), TS_ENOENT);

    assert_int_equal(ts_store_token_revoke(s, "alice", 1764500000, &err), 0);
    assert_int_equal(ts_store_token_by_hash(s, t[1].hash, &g, &err), TS_ENOENT);
    assert_int_equal(ts_store_token_revoke(s, "alice", 1764600000, &err), 0);
    assert_int_equal(ts_store_token_revoke(s, "nobody", 1764500000, &err), TS_ENOENT);
    assert_string_equal(err.msg, "token 'nobody': no such token");

    ts_token_row *rows;
    int n;
    assert_int_equal(ts_store_token_list(s, NULL, &rows, &n, &err), 0);
    assert_int_equal(n, 4);
    for (int i = 0; i < 4; i++)
        assert_string_equal(rows[i].name, t[i].name);
    assert_true(rows[1].revoked_s == 1764500000); /* the first revocation stands */
    free(rows);
    assert_int_equal(ts_store_token_list(s, "team-a", &rows, &n, &err), 0);
    assert_int_equal(n, 2);
    assert_string_equal(rows[1].name, "ann");
    free(rows);
    assert_int_equal(ts_store_token_list(s, "nobody", &rows, &n, &err), 0);
    assert_int_equal(n, 0);
    free(rows);
    ts_token_row bad = token("x", 7, "", 5);
    assert_int_equal(ts_store_token_insert(s, &bad, &err), TS_EINVAL);
    assert_string_equal(err.msg, "token.role: 7 is not a role");
    ts_store_close(s);
}

static void test_tenants(void **state)
{
    ts_store *s = open_store(state);
    ts_err err = {0};
    char *yaml = (char *)"x";
    assert_int_equal(ts_store_tenants_get(s, &yaml, &err), 0);
    assert_null(yaml);
    const char *v1 = "tenants:\n  - name: team-a\n    weight: 2\n";
    const char *v2 = "tenants: []\n";
    assert_int_equal(ts_store_tenants_put(s, v1, &err), 0);
    assert_int_equal(ts_store_tenants_get(s, &yaml, &err), 0);
    assert_string_equal(yaml, v1);
    free(yaml);
    assert_int_equal(ts_store_tenants_put(s, v2, &err), 0);
    assert_int_equal(ts_store_tenants_get(s, &yaml, &err), 0);
    assert_string_equal(yaml, v2);
    free(yaml);
    assert_int_equal(ts_store_tenants_put(s, NULL, &err), TS_EINVAL);
    ts_store_close(s);
}

static void test_usage(void **state)
{
    ts_store *s = open_store(state);
    ts_err err = {0};
    struct {
        const char *tenant;
        int tier;
        const char *model;
        int gpus;
        double start, end;
    } jobs[] = {
        {"a", 0, "H100", 8, 500, 1500},   /* clipped to [1000, 1500): 4000 */
        {"a", 0, "H100", 2, 1200, 1300},  /* 200 */
        {"a", 1, "A100", 4, 1900, 0},     /* still running: [1900, 2000) = 400 */
        {"b", 0, "H100", 1, 2500, 0},     /* starts after the window */
        {"b", 0, "H100", 1, 0, 0},        /* never started */
        {"b", 0, "A100", 3, 100, 900},    /* ended before it */
        {"b", 0, "A100", 1, 1000, 2000},  /* exactly the window: 1000 */
    };
    for (size_t i = 0; i < sizeof jobs / sizeof jobs[0]; i++) {
        ts_job_row r = store_fixture_job(jobs[i].tenant, "o", "");
        r.tier = jobs[i].tier;
        snprintf(r.gpu_model, sizeof r.gpu_model, "%s", jobs[i].model);
        r.gpus = jobs[i].gpus;
        r.start_s = jobs[i].start;
        r.end_s = jobs[i].end;
        r.state = jobs[i].start == 0 ? TS_JOB_PENDING
                  : jobs[i].end == 0 ? TS_JOB_RUNNING
                                     : TS_JOB_COMPLETED;
        insert(s, &r);
    }
    ts_usage_row *u;
    int n;
    assert_int_equal(ts_store_usage(s, 1000, 2000, &u, &n, &err), 0);
    assert_int_equal(n, 3);
    assert_string_equal(u[0].tenant, "a");
    assert_int_equal(u[0].tier, 0);
    assert_string_equal(u[0].gpu_model, "H100");
    assert_true(fabs(u[0].gpu_s - 4200) < 1e-6);
    assert_string_equal(u[1].tenant, "a");
    assert_int_equal(u[1].tier, 1);
    assert_true(fabs(u[1].gpu_s - 400) < 1e-6);
    assert_string_equal(u[2].tenant, "b");
    assert_string_equal(u[2].gpu_model, "A100");
    assert_true(fabs(u[2].gpu_s - 1000) < 1e-6);
    free(u);
    assert_int_equal(ts_store_usage(s, 3000, 3000, &u, &n, &err), TS_EINVAL);
    assert_int_equal(ts_store_usage(s, NAN, 3000, &u, &n, &err), TS_EINVAL);
    ts_store_close(s);
}

static void test_bad_input(void **state)
{
    ts_store *s = open_store(state);
    ts_err err = {0};
    bool existed;
    ts_job_row r = store_fixture_job("", "o", "");
    assert_int_equal(ts_store_job_insert(s, &r, &existed, &err), TS_EINVAL);
    assert_string_equal(err.msg, "job.tenant: must not be empty");
    r = store_fixture_job("t", "o", "");
    memset(r.name, 'x', sizeof r.name); /* no terminator */
    assert_int_equal(ts_store_job_insert(s, &r, &existed, &err), TS_EINVAL);
    assert_string_equal(err.msg, "job.name: longer than 63 bytes");
    r = store_fixture_job("t", "o", "");
    r.spec_json = NULL;
    assert_int_equal(ts_store_job_insert(s, &r, &existed, &err), TS_EINVAL);
    assert_string_equal(err.msg, "job.spec_json: must not be NULL");
    r = store_fixture_job("t", "o", "");
    r.tier = 5;
    assert_int_equal(ts_store_job_insert(s, &r, &existed, &err), TS_EINVAL);
    assert_string_equal(err.msg, "job.tier: 5 is not a tier");
    r = store_fixture_job("t", "o", "");
    r.state = TS_JOB_STATES;
    assert_int_equal(ts_store_job_insert(s, &r, &existed, &err), TS_EINVAL);
    assert_string_equal(err.msg, "job.state: 8 is not a job state");
    r = store_fixture_job("t", "o", "");
    r.end_s = INFINITY;
    assert_int_equal(ts_store_job_insert(s, &r, &existed, &err), TS_EINVAL);
    assert_non_null(strstr(err.msg, "job.end_s: must be a finite time"));
    r = store_fixture_job("t", "o", "");
    r.gpus = -1;
    assert_int_equal(ts_store_job_insert(s, &r, &existed, &err), TS_EINVAL);
    assert_string_equal(err.msg, "job.gpus: must be >= 0");
    r = store_fixture_job("t", "o", "");
    r.id = 1;
    r.gen = 0;
    assert_int_equal(ts_store_job_update(s, &r, &err), TS_EINVAL);
    assert_non_null(strstr(err.msg, "job.gen: must be > 0"));
    ts_token_row t;
    memset(&t, 0, sizeof t);
    assert_int_equal(ts_store_token_insert(s, &t, &err), TS_EINVAL);
    assert_string_equal(err.msg, "token.name: must not be empty");
    assert_int_equal(ts_store_token_revoke(s, "", 1, &err), TS_EINVAL);
    /* none of it reached the store */
    ts_store_stats st;
    ts_store_get_stats(s, &st);
    assert_int_equal(st.writes, 0);
    assert_int_equal(st.commits, 0);
    /* NULL ts_err is allowed everywhere */
    r = store_fixture_job("", "o", "");
    assert_int_equal(ts_store_job_insert(s, &r, NULL, NULL), TS_EINVAL);
    ts_job_row g;
    assert_int_equal(ts_store_job_get(s, 12345, &g, NULL), TS_ENOENT);
    ts_store_close(s);
}

#define STORE_TESTS(setup)                                                                     \
    cmocka_unit_test_setup_teardown(test_open_and_names, setup, store_fixture_teardown),       \
        cmocka_unit_test_setup_teardown(test_urls, setup, store_fixture_teardown),             \
        cmocka_unit_test_setup_teardown(test_job_roundtrip, setup, store_fixture_teardown),    \
        cmocka_unit_test_setup_teardown(test_idempotency, setup, store_fixture_teardown),      \
        cmocka_unit_test_setup_teardown(test_update_gen, setup, store_fixture_teardown),       \
        cmocka_unit_test_setup_teardown(test_apply_all_or_nothing, setup,                      \
                                        store_fixture_teardown),                               \
        cmocka_unit_test_setup_teardown(test_list_and_counts, setup, store_fixture_teardown),  \
        cmocka_unit_test_setup_teardown(test_events, setup, store_fixture_teardown),           \
        cmocka_unit_test_setup_teardown(test_tokens, setup, store_fixture_teardown),           \
        cmocka_unit_test_setup_teardown(test_tenants, setup, store_fixture_teardown),          \
        cmocka_unit_test_setup_teardown(test_usage, setup, store_fixture_teardown),            \
        cmocka_unit_test_setup_teardown(test_bad_input, setup, store_fixture_teardown),        \
        cmocka_unit_test_setup_teardown(test_array_lazy, setup, store_fixture_teardown),       \
        cmocka_unit_test_setup_teardown(test_reservations, setup, store_fixture_teardown)

int main(void)
{
    const struct CMUnitTest sqlite_tests[] = {STORE_TESTS(store_fixture_sqlite)};
    int failed = cmocka_run_group_tests_name("store/sqlite", sqlite_tests, NULL, NULL);
    const char *pg = getenv("TS_TEST_PG_URL");
    if (!pg || !*pg) {
        printf("store/postgresql: skipped: set TS_TEST_PG_URL (scripts/pg-test-server "
               "start prints one)\n");
        return failed;
    }
    const struct CMUnitTest pg_tests[] = {STORE_TESTS(store_fixture_pg)};
    return failed + cmocka_run_group_tests_name("store/postgresql", pg_tests, NULL, NULL);
}
