/*
 * test_store_durability.c - the store under concurrency, across versions and
 * across crashes, on SQLite and (with TS_TEST_PG_URL) PostgreSQL.
 *
 * Group commit must be invisible except in its cost: 16 threads inserting
 * at once get distinct ids, every row lands, and the store used far fewer
 * transactions than writes. Idempotency must hold when the retries race
 * (8 threads, one key: one row, one id). A group holding a failing op must
 * commit the others and fail only that one: the test queues a known group
 * (the committer is held while it fills) so this is checked exactly, not
 * hoped for. Migrations bring an old store forward with its rows and refuse
 * a newer one. And an acknowledged write must survive the writer being
 * killed at any moment: a child process inserts from several threads and
 * reports each acknowledged id down a pipe until it is SIGKILLed at a random
 * time; every id it reported must be in the store when it is reopened.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>

#include "store/store_fixture.h"
#include "store/store_internal.h"
#include "tessera/rng.h"

static ts_store *open_store(void **state)
{
    store_fixture *fx = *state;
    ts_store *s = NULL;
    ts_err err = {0};
    if (ts_store_open(fx->url, &s, &err))
        fail_msg("open %s: %s", fx->url, err.msg);
    return s;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void sleep_ms(int ms)
{
    struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

/* All ids in the store, ascending (*n of them; free the array). */
static int64_t *all_ids(ts_store *s, int *n)
{
    int64_t *ids = NULL;
    int cap = 0;
    *n = 0;
    for (int64_t after = 0;;) {
        ts_job_row *rows;
        int got;
        ts_err err = {0};
        if (ts_store_job_list(s, NULL, after, TS_STORE_LIST_MAX, &rows, &got, &err))
            fail_msg("list: %s", err.msg);
        if (got == 0)
            return ids;
        for (int i = 0; i < got; i++) {
            int64_t *slot = store_grow((void **)&ids, *n, &cap, sizeof *ids);
            assert_non_null(slot);
            *slot = rows[i].id;
            (*n)++;
        }
        after = rows[got - 1].id;
        ts_store_free_jobs(rows, got);
    }
}

/* ---- many writers ---- */

#define WRITER_THREADS 16
#define INSERTS_PER_THREAD 200

typedef struct inserter {
    ts_store *s;
    int64_t ids[INSERTS_PER_THREAD];
    int failures;
    ts_err err;
} inserter;

static void *insert_loop(void *arg)
{
    inserter *w = arg;
    for (int i = 0; i < INSERTS_PER_THREAD; i++) {
        ts_job_row r = store_fixture_job("team-c", "carol", "");
        bool existed;
        if (ts_store_job_insert(w->s, &r, &existed, &w->err) || existed)
            w->failures++;
        w->ids[i] = r.id;
    }
    return NULL;
}

static void test_concurrent_inserts(void **state)
{
    store_fixture *fx = *state;
    ts_store *s = open_store(state);
    static inserter w[WRITER_THREADS];
    pthread_t th[WRITER_THREADS];
    ts_store_stats before, after;
    ts_store_get_stats(s, &before);
    double t0 = now_s();
    for (int i = 0; i < WRITER_THREADS; i++) {
        memset(&w[i], 0, sizeof w[i]);
        w[i].s = s;
        assert_int_equal(pthread_create(&th[i], NULL, insert_loop, &w[i]), 0);
    }
    for (int i = 0; i < WRITER_THREADS; i++)
        pthread_join(th[i], NULL);
    double dt = now_s() - t0;
    ts_store_get_stats(s, &after);

    enum { TOTAL = WRITER_THREADS * INSERTS_PER_THREAD };
    static int64_t ids[TOTAL];
    for (int i = 0; i < WRITER_THREADS; i++) {
        if (w[i].failures)
            fail_msg("thread %d: %d failed inserts, last: %s", i, w[i].failures, w[i].err.msg);
        memcpy(&ids[i * INSERTS_PER_THREAD], w[i].ids, sizeof w[i].ids);
    }
    qsort(ids, TOTAL, sizeof ids[0], cmp_i64);
    for (int i = 1; i < TOTAL; i++)
        assert_true(ids[i] > ids[i - 1]);
    int64_t counts[TS_JOB_STATES];
    ts_err err = {0};
    assert_int_equal(ts_store_job_counts(s, "team-c", counts, &err), 0);
    assert_int_equal(counts[TS_JOB_PENDING], TOTAL);
    int n;
    int64_t *stored = all_ids(s, &n);
    assert_int_equal(n, TOTAL);
    assert_memory_equal(stored, ids, sizeof ids);
    free(stored);

    uint64_t writes = after.writes - before.writes, commits = after.commits - before.commits;
    assert_int_equal(writes, TOTAL);
    printf("group commit (%s): %llu writes in %llu commits, %.1f writes per commit, "
           "%.0f writes/s\n",
           fx->pg ? "postgresql" : "sqlite", (unsigned long long)writes,
           (unsigned long long)commits, (double)writes / (double)commits, (double)writes / dt);
    /* one transaction per write would be `writes`; 16 waiters share each */
    assert_true(commits * 4 <= writes);
    ts_store_close(s);
}

#define IDEM_THREADS 8
#define IDEM_ROUNDS 25

typedef struct idem_racer {
    ts_store *s;
    pthread_barrier_t *start;
    int64_t ids[IDEM_ROUNDS];
    bool existed[IDEM_ROUNDS];
    int failures;
    ts_err err;
} idem_racer;

static void *idem_loop(void *arg)
{
    idem_racer *r = arg;
    for (int round = 0; round < IDEM_ROUNDS; round++) {
        char key[32];
        snprintf(key, sizeof key, "submit-%d", round);
        ts_job_row row = store_fixture_job("team-a", "alice", key);
        pthread_barrier_wait(r->start);
        if (ts_store_job_insert(r->s, &row, &r->existed[round], &r->err))
            r->failures++;
        r->ids[round] = row.id;
        if (r->existed[round])
            ts_job_row_fini(&row);
    }
    return NULL;
}

static void test_concurrent_idempotency(void **state)
{
    ts_store *s = open_store(state);
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, IDEM_THREADS);
    static idem_racer r[IDEM_THREADS];
    pthread_t th[IDEM_THREADS];
    for (int i = 0; i < IDEM_THREADS; i++) {
        memset(&r[i], 0, sizeof r[i]);
        r[i].s = s;
        r[i].start = &start;
        assert_int_equal(pthread_create(&th[i], NULL, idem_loop, &r[i]), 0);
    }
    for (int i = 0; i < IDEM_THREADS; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&start);
    for (int round = 0; round < IDEM_ROUNDS; round++) {
        int created = 0;
        for (int i = 0; i < IDEM_THREADS; i++) {
            if (r[i].failures)
                fail_msg("racer %d: %s", i, r[i].err.msg);
            assert_int_equal(r[i].ids[round], r[0].ids[round]);
            created += !r[i].existed[round];
        }
        assert_int_equal(created, 1);
    }
    int64_t counts[TS_JOB_STATES];
    ts_err err = {0};
    assert_int_equal(ts_store_job_counts(s, NULL, counts, &err), 0);
    assert_int_equal(counts[TS_JOB_PENDING], IDEM_ROUNDS);
    ts_store_close(s);
}

/* ---- one group, some ops failing ---- */

enum group_kind { G_INSERT, G_UPDATE, G_TOKEN, G_EVENT, G_REVOKE };

typedef struct group_op {
    ts_store *s;
    enum group_kind kind;
    ts_job_row row;
    ts_token_row tok;
    ts_event_row ev;
    int rc;
    ts_err err;
} group_op;

static void *group_op_run(void *arg)
{
    group_op *g = arg;
    bool existed;
    switch (g->kind) {
    case G_INSERT: g->rc = ts_store_job_insert(g->s, &g->row, &existed, &g->err); break;
    case G_UPDATE: g->rc = ts_store_job_update(g->s, &g->row, &g->err); break;
    case G_TOKEN: g->rc = ts_store_token_insert(g->s, &g->tok, &g->err); break;
    case G_EVENT: g->rc = ts_store_event_append(g->s, &g->ev, &g->err); break;
    case G_REVOKE: g->rc = ts_store_token_revoke(g->s, g->tok.name, 5, &g->err); break;
    }
    return NULL;
}

static void test_failure_fails_alone(void **state)
{
    ts_store *s = open_store(state);
    ts_err err = {0};
    bool existed;
    ts_job_row j = store_fixture_job("t", "o", "");
    assert_int_equal(ts_store_job_insert(s, &j, &existed, &err), 0);
    ts_token_row taken = {.role = TS_ROLE_USER, .created_s = 1, .name = "taken"};
    assert_int_equal(ts_store_token_insert(s, &taken, &err), 0);

    enum { OPS = 8 };
    static group_op g[OPS];
    memset(g, 0, sizeof g);
    g[0].kind = G_INSERT, g[0].row = store_fixture_job("t", "o", "");
    g[1].kind = G_UPDATE, g[1].row = j, g[1].row.state = TS_JOB_RUNNING;
    g[2].kind = G_UPDATE, g[2].row = j, g[2].row.state = TS_JOB_HELD; /* one of 1, 2 is stale */
    g[3].kind = G_TOKEN, g[3].tok = taken, g[3].tok.hash[0] = 1;      /* name taken */
    g[4].kind = G_INSERT, g[4].row = store_fixture_job("t", "o", "");
    g[5].kind = G_UPDATE, g[5].row = j, g[5].row.id = j.id + 1000;    /* no such job */
    g[6].kind = G_REVOKE, snprintf(g[6].tok.name, sizeof g[6].tok.name, "nobody");
    g[7].kind = G_EVENT, g[7].ev = (ts_event_row){.job_id = j.id, .t_s = 1, .kind = "started"};

    /* hold the committer until all eight are queued: they form one group */
    pthread_mutex_lock(&s->qmu);
    s->hold = true;
    pthread_mutex_unlock(&s->qmu);
    pthread_t th[OPS];
    for (int i = 0; i < OPS; i++) {
        g[i].s = s;
        assert_int_equal(pthread_create(&th[i], NULL, group_op_run, &g[i]), 0);
    }
    double deadline = now_s() + 30;
    for (;;) {
        pthread_mutex_lock(&s->qmu);
        int queued = s->nqueued;
        pthread_mutex_unlock(&s->qmu);
        if (queued == OPS)
            break;
        assert_true(now_s() < deadline);
        sleep_ms(1);
    }
    ts_store_stats before, after;
    ts_store_get_stats(s, &before);
    pthread_mutex_lock(&s->qmu);
    s->hold = false;
    pthread_cond_signal(&s->qcv);
    pthread_mutex_unlock(&s->qmu);
    for (int i = 0; i < OPS; i++)
        pthread_join(th[i], NULL);
    ts_store_get_stats(s, &after);

    assert_int_equal(g[0].rc, 0);
    assert_int_equal(g[4].rc, 0);
    assert_true(g[0].row.id != g[4].row.id);
    assert_int_equal(g[1].rc + g[2].rc, TS_ECONFLICT); /* exactly one won */
    group_op *lost = g[1].rc ? &g[1] : &g[2], *won = g[1].rc ? &g[2] : &g[1];
    assert_non_null(strstr(lost->err.msg, "stale"));
    assert_int_equal(g[3].rc, TS_EEXIST);
    assert_string_equal(g[3].err.msg, "token 'taken': name already taken");
    assert_int_equal(g[5].rc, TS_ENOENT);
    assert_int_equal(g[6].rc, TS_ENOENT);
    assert_int_equal(g[7].rc, 0);
    /* one transaction carried the four that succeeded */
    assert_int_equal(after.commits - before.commits, 1);
    assert_int_equal(after.writes - before.writes, 4);

    ts_job_row got;
    assert_int_equal(ts_store_job_get(s, j.id, &got, &err), 0);
    assert_int_equal(got.gen, 2);
    assert_int_equal(got.state, won->row.state);
    ts_job_row_fini(&got);
    assert_int_equal(ts_store_job_get(s, g[4].row.id, &got, &err), 0);
    ts_job_row_fini(&got);
    ts_event_row *evs;
    int n;
    assert_int_equal(ts_store_event_list(s, j.id, 0, 10, &evs, &n, &err), 0);
    assert_int_equal(n, 1);
    ts_store_free_events(evs, n);
    ts_store_close(s);
}

/* ---- migrations ---- */

static long long raw_int(const store_fixture *fx, const char *sql)
{
    long long v = -1;
    if (store_fixture_raw(fx, sql, &v))
        fail_msg("raw query failed: %s", sql);
    return v;
}

static void test_migrations(void **state)
{
    store_fixture *fx = *state;
    const char *has_index =
        fx->pg ? "SELECT COUNT(*) FROM pg_indexes WHERE schemaname = current_schema() "
                 "AND indexname = 'jobs_tenant_state'"
               : "SELECT COUNT(*) FROM sqlite_master WHERE name = 'jobs_tenant_state'";
    ts_store *s = NULL;
    ts_err err = {0};
    /* a store as version 1 of tessera left it, with a job in it (written
     * in version 1's columns: today's statements name later ones) */
    assert_int_equal(store_open_version(fx->url, 1, &s, &err), 0);
    assert_int_equal(ts_store_schema_version(s), 1);
    ts_store_close(s);
    assert_int_equal(store_fixture_raw(fx, "INSERT INTO jobs (tenant, owner, idem_key, state, "
                                           "tier, spec_json) VALUES ('team-a', 'alice', 'k', 0, "
                                           "0, '{}')", NULL), 0);
    long long id = raw_int(fx, "SELECT id FROM jobs WHERE idem_key = 'k'");
    assert_true(id > 0);
    assert_int_equal(raw_int(fx, has_index), 0);

    s = open_store(state);
    assert_int_equal(ts_store_schema_version(s), TS_SCHEMA_VERSION);
    ts_job_row got;
    assert_int_equal(ts_store_job_get(s, id, &got, &err), 0);
    assert_string_equal(got.idem_key, "k");
    /* migration 5: an older job has no Unix identity */
    assert_string_equal(got.run_user, "");
    assert_int_equal(got.run_uid, -1);
    ts_job_row_fini(&got);
    ts_store_close(s);
    assert_int_equal(raw_int(fx, has_index), 1);
    assert_int_equal(raw_int(fx, "SELECT version FROM schema_version"), TS_SCHEMA_VERSION);
    assert_int_equal(raw_int(fx, "SELECT COUNT(*) FROM schema_version"), 1);

    /* written by a newer tessera: refused, and left as it is */
    assert_int_equal(store_fixture_raw(fx, "UPDATE schema_version SET version = 99", NULL), 0);
    assert_int_equal(ts_store_open(fx->url, &s, &err), TS_EINVAL);
    assert_null(s);
    char want[80];
    snprintf(want, sizeof want, "version 99 is newer than this tessera knows (%d)",
             TS_SCHEMA_VERSION);
    assert_non_null(strstr(err.msg, want));
    assert_int_equal(raw_int(fx, "SELECT version FROM schema_version"), 99);
    /* put back as it was: it opens again */
    char put_back[64];
    snprintf(put_back, sizeof put_back, "UPDATE schema_version SET version = %d",
             TS_SCHEMA_VERSION);
    assert_int_equal(store_fixture_raw(fx, put_back, NULL), 0);
    s = open_store(state);
    ts_store_close(s);

    if (!fx->pg) {
        /* an empty file (touched by an installer, say) becomes a store */
        char path[600];
        snprintf(path, sizeof path, "sqlite:%s/empty.db", fx->dir);
        FILE *f = fopen(path + strlen("sqlite:"), "w");
        assert_non_null(f);
        fclose(f);
        assert_int_equal(ts_store_open(path, &s, &err), 0);
        assert_int_equal(ts_store_schema_version(s), TS_SCHEMA_VERSION);
        ts_store_close(s);
    }
}

/* ---- sessions lost ---- */

/* The server killed every session of this store (a restart, a failover, an
 * idle-session reaper): the next write and the next read reconnect. */
static void test_pg_sessions_lost(void **state)
{
    store_fixture *fx = *state;
    if (!fx->pg)
        skip();
    ts_store *s = open_store(state);
    ts_err err = {0};
    ts_job_row r = store_fixture_job("t", "o", ""), got;
    bool existed;
    assert_int_equal(ts_store_job_insert(s, &r, &existed, &err), 0);
    assert_int_equal(ts_store_job_get(s, r.id, &got, &err), 0); /* a reader exists now */
    ts_job_row_fini(&got);
    char sql[256], count[256];
    snprintf(sql, sizeof sql,
             "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = "
             "'%s'", fx->schema);
    snprintf(count, sizeof count,
             "SELECT COUNT(*) FROM pg_stat_activity WHERE application_name = '%s'", fx->schema);
    assert_int_equal(store_fixture_pg_admin(sql), 0);
    store_fixture probe = *fx; /* the admin URL: not one of the store's sessions */
    snprintf(probe.url, sizeof probe.url, "%s", getenv("TS_TEST_PG_URL"));
    for (double deadline = now_s() + 10; raw_int(&probe, count) > 0;) {
        assert_true(now_s() < deadline);
        sleep_ms(10);
    }
    ts_job_row r2 = store_fixture_job("t", "o", "");
    if (ts_store_job_insert(s, &r2, &existed, &err))
        fail_msg("insert after the sessions were killed: %s", err.msg);
    if (ts_store_job_get(s, r.id, &got, &err))
        fail_msg("read after the sessions were killed: %s", err.msg);
    ts_job_row_fini(&got);
    ts_store_close(s);
}

/* ---- crash durability ---- */

#define CRASH_ROUNDS 10
#define CRASH_THREADS 4
#define CRASH_INSERTS_MAX 20000  /* per child thread, so a stuck kill still ends */
#define CRASH_KILL_MIN_MS 10
#define CRASH_KILL_SPAN_MS 150
#define CRASH_FIRST_ID_WAIT_S 20

typedef struct crash_writer {
    ts_store *s;
    int fd;
} crash_writer;

static void *crash_insert_loop(void *arg)
{
    crash_writer *w = arg;
    for (int i = 0; i < CRASH_INSERTS_MAX; i++) {
        ts_job_row r = store_fixture_job("team-k", "killer", "");
        bool existed;
        if (ts_store_job_insert(w->s, &r, &existed, NULL))
            break;
        /* acknowledged: tell the parent (8 bytes: an atomic pipe write) */
        if (write(w->fd, &r.id, sizeof r.id) != (ssize_t)sizeof r.id)
            break;
    }
    return NULL;
}

static void crash_child(const char *url, int fd)
{
    ts_store *s = NULL;
    if (ts_store_open(url, &s, NULL))
        _exit(3);
    crash_writer w = {s, fd};
    pthread_t th[CRASH_THREADS];
    for (int i = 0; i < CRASH_THREADS; i++)
        pthread_create(&th[i], NULL, crash_insert_loop, &w);
    for (int i = 0; i < CRASH_THREADS; i++)
        pthread_join(th[i], NULL);
    ts_store_close(s);
    _exit(0);
}

typedef struct id_reader {
    unsigned char buf[4096];
    size_t have;
    int64_t *ids;
    int n, cap;
} id_reader;

/* Reads what the pipe holds now; false at end of file. */
static bool read_ids(int fd, id_reader *r)
{
    ssize_t got = read(fd, r->buf + r->have, sizeof r->buf - r->have);
    if (got < 0 && errno == EINTR)
        return true;
    if (got <= 0)
        return false;
    r->have += (size_t)got;
    size_t off = 0;
    for (; r->have - off >= sizeof(int64_t); off += sizeof(int64_t)) {
        int64_t *slot = store_grow((void **)&r->ids, r->n, &r->cap, sizeof *r->ids);
        assert_non_null(slot);
        memcpy(slot, r->buf + off, sizeof *slot);
        r->n++;
    }
    memmove(r->buf, r->buf + off, r->have - off);
    r->have -= off;
    return true;
}

static void test_crash_durability(void **state)
{
    store_fixture *fx = *state;
    ts_rng rng;
    uint64_t seed = (uint64_t)time(NULL) ^ (uint64_t)getpid();
    ts_rng_seed(&rng, seed);
    int64_t acked_total = 0;
    for (int round = 0; round < CRASH_ROUNDS; round++) {
        int p[2];
        assert_int_equal(pipe(p), 0);
        fflush(NULL);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            close(p[0]);
            crash_child(fx->url, p[1]);
        }
        close(p[1]);
        id_reader r = {0};
        /* the clock starts at the first acknowledgement, so every round
         * kills a child that is writing, not one still opening the store */
        struct pollfd pfd = {p[0], POLLIN, 0};
        double deadline = now_s() + CRASH_FIRST_ID_WAIT_S;
        while (r.n == 0 && now_s() < deadline)
            if (poll(&pfd, 1, 100) > 0 && !read_ids(p[0], &r))
                break;
        if (r.n == 0)
            fail_msg("round %d: the child acknowledged nothing", round);
        double kill_at = now_s() + (CRASH_KILL_MIN_MS +
                                    (double)ts_rng_below(&rng, CRASH_KILL_SPAN_MS)) / 1000;
        while (now_s() < kill_at)
            if (poll(&pfd, 1, 5) > 0 && !read_ids(p[0], &r))
                break;
        kill(pid, SIGKILL);
        int status;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        while (read_ids(p[0], &r))
            ;
        close(p[0]);
        if (!WIFSIGNALED(status))
            fail_msg("round %d: the child ended before the kill (status %d)", round, status);

        ts_store *s = open_store(state);
        int n;
        int64_t *stored = all_ids(s, &n);
        ts_store_close(s);
        for (int i = 0; i < r.n; i++)
            if (!bsearch(&r.ids[i], stored, (size_t)n, sizeof *stored, cmp_i64))
                fail_msg("round %d (seed %llu): acknowledged job %lld is missing", round,
                         (unsigned long long)seed, (long long)r.ids[i]);
        assert_true(n >= acked_total + r.n);
        acked_total += r.n;
        free(stored);
        free(r.ids);
    }
    printf("crash (%s): %d kills, %lld acknowledged jobs, all present after reopen\n",
           fx->pg ? "postgresql" : "sqlite", CRASH_ROUNDS, (long long)acked_total);
}

#define DURABILITY_TESTS(setup)                                                                \
    cmocka_unit_test_setup_teardown(test_concurrent_inserts, setup, store_fixture_teardown),   \
        cmocka_unit_test_setup_teardown(test_concurrent_idempotency, setup,                    \
                                        store_fixture_teardown),                               \
        cmocka_unit_test_setup_teardown(test_failure_fails_alone, setup,                       \
                                        store_fixture_teardown),                               \
        cmocka_unit_test_setup_teardown(test_migrations, setup, store_fixture_teardown),       \
        cmocka_unit_test_setup_teardown(test_pg_sessions_lost, setup, store_fixture_teardown), \
        cmocka_unit_test_setup_teardown(test_crash_durability, setup, store_fixture_teardown)

int main(void)
{
    const struct CMUnitTest sqlite_tests[] = {DURABILITY_TESTS(store_fixture_sqlite)};
    int failed = cmocka_run_group_tests_name("store durability/sqlite", sqlite_tests, NULL, NULL);
    const char *pg = getenv("TS_TEST_PG_URL");
    if (!pg || !*pg) {
        printf("store durability/postgresql: skipped: set TS_TEST_PG_URL "
               "(scripts/pg-test-server start prints one)\n");
        return failed;
    }
    const struct CMUnitTest pg_tests[] = {DURABILITY_TESTS(store_fixture_pg)};
    return failed + cmocka_run_group_tests_name("store durability/postgresql", pg_tests, NULL,
                                                NULL);
}
