/*
 * test_job_fsm.c - the job state machine of tesserad (src/ctld/job_fsm.c):
 * every (state, event) pair is allowed exactly as the table says, planning
 * never touches the job, a commit the store refuses (injected failure)
 * leaves the job as it was and applies nothing, and a committed change is
 * applied with its effects (unbind, removal) and the row's new gen. The
 * rest of the controller is stubbed here: only the table, the plan, the
 * commit against a real SQLite store, and the application are under test.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "ctld/job_fsm.c"
#include "tessera/load.h"

/* ---- stubs of the rest of tesserad ---------------------------------------- */

#include "ctld/fsm_stubs.h"

/* ---- fixture -------------------------------------------------------------------- */

typedef struct fx {
    char dir[64];
    ctld c;
    bool node_virtual[2];
} fx;

static int setup(void **state)
{
    fx *f = calloc(1, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "/tmp/tessera-fsm-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    char url[128];
    snprintf(url, sizeof url, "sqlite:%s/t.db", f->dir);
    ts_err err;
    assert_int_equal(ts_store_open(url, &f->c.store, &err), 0);
    static const char CL[] = "node_classes:\n  g: {gpu_model: H100-80GB, gpus: 8, cpu_milli: "
                             "64000, memory_mib: 65536}\nnodes:\n  - {name: n1, class: g}\n";
    assert_int_equal(ts_load_cluster_yaml(CL, sizeof CL - 1, "c.yaml", &f->c.cluster, &err), 0);
    f->c.node_virtual = f->node_virtual;
    f->node_virtual[0] = true;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    ts_store_close(f->c.store);
    ts_cluster_free(f->c.cluster);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", f->dir);
    assert_int_equal(system(cmd), 0);
    free(f);
    return 0;
}

/* A stored job in `state` (running ones with one allocation on node 0). */
static cjob *job_in(fx *f, int state)
{
    cjob *j = calloc(1, sizeof *j);
    ts_job_row *r = &j->row;
    snprintf(r->tenant, sizeof r->tenant, "t");
    snprintf(r->name, sizeof r->name, "j");
    r->state = state;
    r->submit_s = 100;
    r->spec_json = strdup("{}");
    bool existed;
    ts_err err;
    assert_int_equal(ts_store_job_insert(f->c.store, r, &existed, &err), 0);
    j->ntasks = 1;
    if (state == TS_JOB_RUNNING || state == TS_JOB_STOPPING) {
        j->allocs = calloc(1, sizeof *j->allocs);
        r->placement_json = strdup("[{\"node\":\"n1\"}]");
        r->start_s = 150;
        j->is_virtual = true; /* the table as it is; agents_stop_first for agents */
    }
    return j;
}

static void job_free(cjob *j)
{
    ts_job_row_fini(&j->row);
    free(j->allocs);
    free(j);
}

/* ---- tests ---------------------------------------------------------------------- */

/* Every (state, event) pair: planned iff the table allows it, else
 * TS_ECONFLICT; planning never changes the job. */
static void table_is_the_rule(void **state)
{
    fx *f = *state;
    static const unsigned allowed[CTLD_JE_EVENTS] = {
        [CTLD_JE_HOLD] = S(TS_JOB_PENDING),
        [CTLD_JE_RELEASE] = S(TS_JOB_HELD),
        [CTLD_JE_CANCEL] = ACTIVE,
        [CTLD_JE_REQUEUE] = S(TS_JOB_RUNNING),
        [CTLD_JE_START] = S(TS_JOB_PENDING),
        [CTLD_JE_PREEMPT] = S(TS_JOB_RUNNING),
        [CTLD_JE_REAP] = S(TS_JOB_RUNNING),
        [CTLD_JE_STRAGGLE] = S(TS_JOB_RUNNING),
        [CTLD_JE_FINISH] = S(TS_JOB_RUNNING),
        [CTLD_JE_FAIL] = S(TS_JOB_RUNNING),
        [CTLD_JE_STOPPED] = S(TS_JOB_STOPPING),
        [CTLD_JE_EVICT] = S(TS_JOB_RUNNING) | S(TS_JOB_STOPPING),
        [CTLD_JE_DEPFAIL] = S(TS_JOB_PENDING),
        [CTLD_JE_EXPIRE] = S(TS_JOB_RUNNING),
        [CTLD_JE_TIMEOUT] = S(TS_JOB_RUNNING) | S(TS_JOB_STOPPING),
        [CTLD_JE_CANCEL_STOP] = S(TS_JOB_RUNNING) | S(TS_JOB_STOPPING),
        [CTLD_JE_REQUEUE_STOP] = S(TS_JOB_RUNNING),
        [CTLD_JE_STOPPED_CANCEL] = S(TS_JOB_STOPPING),
        [CTLD_JE_UPDATE] = ACTIVE,
    };
    ts_alloc al = {.node = 0, .ngpu = 1};
    for (int st = 0; st < TS_JOB_STATES; st++)
        for (int ev = 0; ev < CTLD_JE_EVENTS; ev++) {
            cjob *j = job_in(f, st);
            ts_job_row before = j->row;
            ctld_txn t = {0};
            ts_err err;
            ctld_fsm_args a = {.allocs = &al, .eligible_s = 1, .spec_json = "{}"};
            int rc = ctld_fsm_plan(&f->c, &t, j, ev, &a, 200, &err);
            if (allowed[ev] & S(st)) {
                assert_int_equal(rc, 0);
                assert_int_equal(t.n, 1);
                assert_true(t.nev >= 1);
            } else {
                assert_int_equal(rc, TS_ECONFLICT);
                assert_non_null(strstr(err.msg, ts_job_state_name(st)));
                assert_int_equal(t.n, 0);
            }
            /* the job itself is as it was */
            assert_int_equal(j->row.state, before.state);
            assert_int_equal(j->row.gen, before.gen);
            assert_true(j->row.placement_json == before.placement_json);
            assert_true(j->row.end_s == before.end_s);
            ctld_txn_fini(&t);
            job_free(j);
        }
}

/* An update keeps the state and writes the new spec, priority and GPUs with
 * an "updated" event; another event's row leaves the stored spec as it was. */
static void update_writes_the_spec(void **state)
{
    fx *f = *state;
    cjob *j = job_in(f, TS_JOB_HELD);
    ts_err err;
    ctld_fsm_args a = {.spec_json = "{\"v\":2}", .priority = 7, .gpus = 4, .detail = "{}"};
    assert_int_equal(ctld_fsm_run(&f->c, j, CTLD_JE_UPDATE, &a, 200, &err), 0);
    assert_int_equal(j->row.state, TS_JOB_HELD);
    assert_string_equal(j->row.spec_json, "{\"v\":2}");
    ts_job_row stored;
    assert_int_equal(ts_store_job_get(f->c.store, j->row.id, &stored, &err), 0);
    assert_string_equal(stored.spec_json, "{\"v\":2}");
    assert_int_equal(stored.priority, 7);
    assert_int_equal(stored.gpus, 4);
    assert_int_equal(stored.state, TS_JOB_HELD);
    ts_job_row_fini(&stored);
    assert_int_equal(ctld_fsm_run(&f->c, j, CTLD_JE_RELEASE, NULL, 201, &err), 0);
    assert_int_equal(ts_store_job_get(f->c.store, j->row.id, &stored, &err), 0);
    assert_string_equal(stored.spec_json, "{\"v\":2}");
    assert_int_equal(stored.state, TS_JOB_PENDING);
    ts_job_row_fini(&stored);
    ts_event_row *ev = NULL;
    int n = 0;
    assert_int_equal(ts_store_event_list(f->c.store, j->row.id, 0, 10, &ev, &n, &err), 0);
    assert_int_equal(n, 2);
    assert_string_equal(ev[0].kind, "updated");
    ts_store_free_events(ev, n);
    job_free(j);
}

/* A refused write: nothing is applied, the job still runs on its allocation. */
static void failed_commit_changes_nothing(void **state)
{
    fx *f = *state;
    cjob *j = job_in(f, TS_JOB_RUNNING);
    ts_alloc *allocs = j->allocs;
    ts_err err;
    assert_int_equal(ts_store_faults_set(f->c.store, "nth=1,kind=full", &err), 0);
    unbinds = removes = 0;
    int rc = ctld_fsm_run(&f->c, j, CTLD_JE_CANCEL, NULL, 200, &err);
    assert_int_equal(rc, TS_EIO);
    assert_non_null(strstr(err.msg, "full"));
    assert_int_equal(j->row.state, TS_JOB_RUNNING);
    assert_true(j->allocs == allocs);
    assert_non_null(j->row.placement_json);
    assert_int_equal(unbinds, 0);
    assert_int_equal(removes, 0);
    ts_job_row stored;
    assert_int_equal(ts_store_job_get(f->c.store, j->row.id, &stored, &err), 0);
    assert_int_equal(stored.state, TS_JOB_RUNNING);
    assert_int_equal(stored.gen, j->row.gen);
    ts_job_row_fini(&stored);
    assert_int_equal(ts_store_faults_injected(f->c.store), 1);
    /* the same cancel once the store takes it: written, then applied */
    rc = ctld_fsm_run(&f->c, j, CTLD_JE_CANCEL, NULL, 201, &err);
    assert_int_equal(rc, 0);
    assert_int_equal(j->row.state, TS_JOB_CANCELLED);
    assert_null(j->allocs);
    assert_int_equal(unbinds, 1);
    assert_int_equal(removes, 1);
    assert_true(j->row.end_s == 201);
    assert_int_equal(ts_store_job_get(f->c.store, j->row.id, &stored, &err), 0);
    assert_int_equal(stored.state, TS_JOB_CANCELLED);
    assert_int_equal(stored.gen, j->row.gen);
    assert_null(stored.placement_json);
    ts_job_row_fini(&stored);
    job_free(j);
}

/* A job whose ranks run on agents: a cancel or a requeue stops them first
 * and keeps the GPUs bound until every rank has stopped; what then stops or
 * evicts a cancelled job ends it cancelled, a requeued one waits no backoff. */
static void agents_stop_first(void **state)
{
    fx *f = *state;
    ts_err err;
    for (int ev = 0; ev < 2; ev++) {
        cjob *j = job_in(f, TS_JOB_RUNNING);
        j->is_virtual = false;
        unbinds = removes = 0;
        assert_int_equal(ctld_fsm_run(&f->c, j, CTLD_JE_CANCEL, NULL, 300, &err), 0);
        assert_int_equal(j->row.state, TS_JOB_STOPPING);
        assert_string_equal(j->row.reason, "cancel");
        assert_true(j->cancel_stop);
        assert_int_equal(unbinds, 0);
        assert_non_null(j->allocs);
        /* its ranks stop (or its node is lost): cancelled, unbound, gone */
        int end = ev == 0 ? CTLD_JE_STOPPED : CTLD_JE_EVICT;
        assert_int_equal(ctld_fsm_run(&f->c, j, end, NULL, 303, &err), 0);
        assert_int_equal(j->row.state, TS_JOB_CANCELLED);
        assert_int_equal(unbinds, 1);
        assert_int_equal(removes, 1);
        job_free(j);
    }
    cjob *j = job_in(f, TS_JOB_RUNNING);
    j->is_virtual = false;
    assert_int_equal(ctld_fsm_run(&f->c, j, CTLD_JE_REQUEUE, NULL, 300, &err), 0);
    assert_int_equal(j->row.state, TS_JOB_STOPPING);
    assert_true(j->restart_now);
    assert_int_equal(ctld_fsm_run(&f->c, j, CTLD_JE_STOPPED, NULL, 302, &err), 0);
    assert_int_equal(j->row.state, TS_JOB_PENDING);
    assert_true(j->sj.eligible_s <= 302);
    job_free(j);
}

/* A requeue writes the end of the run and the requeue in one transaction. */
static void requeue_writes_run_end(void **state)
{
    fx *f = *state;
    cjob *j = job_in(f, TS_JOB_RUNNING);
    ts_err err;
    assert_int_equal(ctld_fsm_run(&f->c, j, CTLD_JE_REQUEUE, NULL, 300, &err), 0);
    assert_int_equal(j->row.state, TS_JOB_PENDING);
    assert_true(j->row.start_s == 0);
    ts_event_row *ev;
    int n;
    assert_int_equal(ts_store_event_list(f->c.store, j->row.id, 0, 10, &ev, &n, &err), 0);
    assert_int_equal(n, 2);
    assert_string_equal(ev[0].kind, "run-ended");
    assert_string_equal(ev[1].kind, "requeue");
    ts_store_free_events(ev, n);
    job_free(j);
}

/* One change per job and transaction; a stale gen fails the commit. */
static void one_change_per_job_and_gen_checked(void **state)
{
    fx *f = *state;
    cjob *j = job_in(f, TS_JOB_PENDING);
    ctld_txn t = {0};
    ts_err err;
    assert_int_equal(ctld_fsm_plan(&f->c, &t, j, CTLD_JE_HOLD, NULL, 10, &err), 0);
    assert_int_equal(ctld_fsm_plan(&f->c, &t, j, CTLD_JE_CANCEL, NULL, 10, &err), TS_ECONFLICT);
    /* someone else wrote the job since it was planned */
    ts_job_row other = j->row;
    other.spec_json = NULL;
    other.state = TS_JOB_HELD;
    assert_int_equal(ts_store_job_update(f->c.store, &other, &err), 0);
    assert_int_equal(ctld_txn_commit(&f->c, &t, &err), TS_ECONFLICT);
    ctld_txn_apply(&f->c, &t, 11);
    assert_int_equal(j->row.state, TS_JOB_PENDING); /* nothing applied */
    ctld_txn_fini(&t);
    job_free(j);
}

/* A start binds the cycle's allocations once written; a stopped job that
 * the idle policy reaped ends held. */
static void start_and_reaped_stop(void **state)
{
    fx *f = *state;
    cjob *j = job_in(f, TS_JOB_PENDING);
    ts_alloc al = {.node = 0, .ngpu = 1};
    ts_err err;
    ctld_fsm_args a = {.allocs = &al, .detail = "on n1"};
    assert_int_equal(ctld_fsm_run(&f->c, j, CTLD_JE_START, &a, 500, &err), 0);
    assert_int_equal(j->row.state, TS_JOB_RUNNING);
    assert_non_null(j->allocs);
    assert_true(j->is_virtual);
    assert_string_equal(j->row.gpu_model, "H100-80GB");
    ctld_fsm_args r = {.stop_by_s = 560};
    assert_int_equal(ctld_fsm_run(&f->c, j, CTLD_JE_REAP, &r, 510, &err), 0);
    assert_int_equal(j->row.state, TS_JOB_STOPPING);
    assert_true(j->sj.stopping && j->reaped && j->sj.stop_by_s == 560);
    ctld_fsm_args s = {.eligible_s = 600};
    assert_int_equal(ctld_fsm_run(&f->c, j, CTLD_JE_STOPPED, &s, 520, &err), 0);
    assert_int_equal(j->row.state, TS_JOB_HELD);
    assert_true(j->sj.held);
    assert_false(j->reaped);
    assert_null(j->allocs);
    job_free(j);
}

/* A time limit: running -> stopping with reason "timeout" and its event,
 * then timeout, which keeps its reason, its why and its result in the store. */
static void time_limit_then_timeout(void **state)
{
    fx *f = *state;
    cjob *j = job_in(f, TS_JOB_RUNNING);
    ts_err err;
    ctld_fsm_args x = {.detail = "time limit 5s reached", .stop_by_s = 260};
    assert_int_equal(ctld_fsm_run(&f->c, j, CTLD_JE_EXPIRE, &x, 250, &err), 0);
    assert_int_equal(j->row.state, TS_JOB_STOPPING);
    assert_string_equal(j->row.reason, "timeout");
    assert_true(j->timed_out && j->sj.stopping && j->sj.stop_by_s == 260);
    assert_non_null(j->allocs); /* its ranks stop on their own allocation */
    static const char RESULT[] = "{\"exit_code\":null,\"signal\":9,\"ranks\":[]}";
    ctld_fsm_args e = {.detail = "time limit 5s reached: SIGTERM, then SIGKILL after 2s",
                       .result_json = RESULT, .end_reason = "timeout",
                       .end_why = "time limit 5s reached: SIGTERM, then SIGKILL after 2s"};
    removes = 0;
    assert_int_equal(ctld_fsm_run(&f->c, j, CTLD_JE_TIMEOUT, &e, 262, &err), 0);
    assert_int_equal(j->row.state, TS_JOB_TIMEOUT);
    assert_int_equal(removes, 1);
    assert_null(j->allocs);
    ts_job_row stored;
    assert_int_equal(ts_store_job_get(f->c.store, j->row.id, &stored, &err), 0);
    assert_string_equal(ts_job_state_name(stored.state), "timeout");
    assert_string_equal(stored.reason, "timeout");
    assert_string_equal(stored.why, e.end_why);
    assert_string_equal(stored.result_json, RESULT);
    assert_true(stored.end_s == 262);
    ts_job_row_fini(&stored);
    ts_event_row *ev;
    int n;
    assert_int_equal(ts_store_event_list(f->c.store, j->row.id, 0, 10, &ev, &n, &err), 0);
    assert_int_equal(n, 2);
    assert_string_equal(ev[0].kind, "time-limit");
    assert_string_equal(ev[1].kind, "timeout");
    assert_string_equal(ev[1].detail, e.end_why);
    ts_store_free_events(ev, n);
    /* a finished job is not stopped by a late time limit */
    assert_int_equal(ctld_fsm_run(&f->c, j, CTLD_JE_EXPIRE, &x, 263, &err), TS_ECONFLICT);
    job_free(j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(table_is_the_rule, setup, teardown),
        cmocka_unit_test_setup_teardown(failed_commit_changes_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(update_writes_the_spec, setup, teardown),
        cmocka_unit_test_setup_teardown(requeue_writes_run_end, setup, teardown),
cmocka_unit_test_setup_teardown(agents_stop_first, setup, teardown),
        cmocka_unit_test_setup_teardown(one_change_per_job_and_gen_checked, setup, teardown),
        cmocka_unit_test_setup_teardown(start_and_reaped_stop, setup, teardown),
        cmocka_unit_test_setup_teardown(time_limit_then_timeout, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
