/*
 * test_job_end.c - how a job on agents ends and why (src/ctld/job_end.c):
 * the rank ends its agents report become the job's end, its reason, its why
 * and its result; time limits are planned at the limit, for jobs on agents
 * only. Planning only: the transaction is inspected, not committed (the
 * commit path is test_job_fsm's).
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "ctld/job_end.c"
#include "ctld/job_fsm.c"
#include "tessera/load.h"

/* ---- stubs of the rest of tesserad ---------------------------------------- */

#include "ctld/fsm_stubs.h"

/* ---- fixture -------------------------------------------------------------------- */

typedef struct fx {
    char dir[64];
    ctld c;
    bool node_virtual[2];
    ts_job_spec spec;
    cjob *jobs[8];
} fx;

static int setup(void **state)
{
    fx *f = calloc(1, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "/tmp/tessera-end-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    char url[128];
    snprintf(url, sizeof url, "sqlite:%s/t.db", f->dir);
    ts_err err;
    assert_int_equal(ts_store_open(url, &f->c.store, &err), 0);
    static const char CL[] = "node_classes:\n  g: {gpu_model: H100-80GB, gpus: 8, cpu_milli: "
                             "64000, memory_mib: 65536}\nnodes:\n  - {name: n1, class: g}\n"
                             "  - {name: n2, class: g}\n";
    assert_int_equal(ts_load_cluster_yaml(CL, sizeof CL - 1, "c.yaml", &f->c.cluster, &err), 0);
    f->c.node_virtual = f->node_virtual;
    f->c.cfg.sched.default_time_limit_s = 86400;
    f->c.cfg.sched.default_grace_s = 60;
    f->c.jobs = f->jobs;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    for (int i = 0; i < f->c.njobs; i++) {
        ts_job_row_fini(&f->jobs[i]->row);
        free(f->jobs[i]->allocs);
        free(f->jobs[i]->rank_state);
        json_decref(f->jobs[i]->rank_end);
        free(f->jobs[i]);
    }
    ts_store_close(f->c.store);
    ts_cluster_free(f->c.cluster);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", f->dir);
    assert_int_equal(system(cmd), 0);
    free(f);
    return 0;
}

/* A running job on agents of `ranks` ranks, rank r on node r % 2, started at
 * 100 with a time limit of limit_s and a grace of 2 s. */
static cjob *running(fx *f, int ranks, double limit_s)
{
    cjob *j = calloc(1, sizeof *j);
    j->row.id = f->c.njobs + 1;
    j->row.state = TS_JOB_RUNNING;
    j->row.start_s = 100;
    j->spec = &f->spec;
    j->ntasks = ranks;
    j->sj.time_limit_s = limit_s;
    j->sj.ckpt_grace_s = 2;
    j->allocs = calloc((size_t)ranks, sizeof *j->allocs);
    for (int r = 0; r < ranks; r++)
        j->allocs[r].node = r % 2;
    j->rank_state = calloc((size_t)ranks, 1);
    f->jobs[f->c.njobs++] = j;
    return j;
}

/* What apply_reports (agents.c) does with one rank's report. */
static int report(fx *f, cjob *j, int rank, const char *json, ctld_txn *t, double now)
{
    json_error_t je;
    json_t *rep = json_loads(json, 0, &je);
    assert_non_null(rep);
    const char *s = json_string_value(json_object_get(rep, "state"));
    int st = strcmp(s, "stopped") == 0 ? CTLD_RANK_STOPPED
             : strcmp(s, "failed") == 0 ? CTLD_RANK_FAILED
             : json_integer_value(json_object_get(rep, "exit_code")) != 0 ? CTLD_RANK_FAILED
                                                                         : CTLD_RANK_DONE;
    j->rank_state[rank] = (uint8_t)st;
    /* as tesserad reads it: decoded by the protocol's codec */
    json_object_set_new(rep, "job", json_integer(j->row.id));
    json_object_set_new(rep, "rank", json_integer(rank));
    ts_task_report tr;
    ts_err derr;
    assert_int_equal(ts_task_report_decode(rep, "report", &tr, &derr), 0);
    assert_int_equal(ctld_rank_end_note(&f->c, j, rank, &tr), 0);
    json_decref(rep);
    ts_err err;
    return ctld_job_settle(&f->c, j, now, t, &err);
}

static json_t *result_of(const ctld_txn *t)
{
    json_error_t je;
    json_t *r = json_loads(t->ch[0].row.result_json, 0, &je);
    assert_non_null(r);
    return r;
}

/* ---- tests ---------------------------------------------------------------------- */

/* A gang whose rank 1 exited 3: failed, reason exit-code, why names the rank,
 * its node, the code and its last output; the result has both ranks. */
static void failed_rank_names_itself(void **state)
{
    fx *f = *state;
    cjob *j = running(f, 2, 0);
    ctld_txn t = {0};
    assert_int_equal(report(f, j, 1, "{\"state\":\"exited\",\"exit_code\":3,\"output\":"
                                     "{\"stderr\":\"loading\\nbad input\\n\"}}", &t, 200), 0);
    assert_int_equal(t.n, 1);
    assert_int_equal(t.ch[0].to, TS_JOB_FAILED);
    assert_string_equal(t.ch[0].row.reason, "exit-code");
    assert_string_equal(t.ch[0].row.why, "rank 1 on n2 exited with code 3; last output: bad input");
    assert_true(strncmp(t.ev[0].detail, "1 of 2 ranks failed; the gang stops as one: rank 1", 50)
                == 0);
    json_t *r = result_of(&t);
    assert_int_equal(json_integer_value(json_object_get(r, "exit_code")), 3);
    assert_true(json_is_null(json_object_get(r, "signal")));
    assert_true(json_is_null(json_array_get(json_object_get(r, "ranks"), 0)));
    json_t *r1 = json_array_get(json_object_get(r, "ranks"), 1);
    assert_string_equal(json_string_value(json_object_get(r1, "end")), "exited");
    assert_string_equal(json_string_value(json_object_get(r1, "node")), "n2");
    json_decref(r);
    ctld_txn_fini(&t);
}

/* A signal, an OOM kill, a start that failed, an image the registry does
 * not know and one it refused the credentials for: each its own reason. */
static void signal_oom_and_launch_reasons(void **state)
{
    fx *f = *state;
    static const struct {
        const char *report, *reason, *why;
        int code, sig;
    } CASES[] = {
        {"{\"state\":\"failed\",\"signal\":11}", "signal",
         "rank 0 on n1 killed by signal 11 (SIGSEGV)", -1, 11},
        {"{\"state\":\"failed\",\"signal\":9,\"oom_kills\":1}", "oom",
         "rank 0 on n1 killed by the kernel's OOM killer (1 kill in its cgroup; memory_mib 0)",
         -1, 9},
        {"{\"state\":\"failed\",\"error\":\"command not found: pyhton\",\"launch\":true}",
         "launch", "rank 0 on n1 could not start: command not found: pyhton", -1, 0},
        {"{\"state\":\"failed\",\"error\":\"image r.example/a:1: manifest not found (the "
         "registry answered 404)\",\"launch\":true,\"launch_end\":\"image_not_found\"}",
         "image_not_found", "rank 0 on n1 could not start: image r.example/a:1: manifest not "
         "found (the registry answered 404)", -1, 0},
        {"{\"state\":\"failed\",\"error\":\"registry r.example: the token service answered "
         "401\",\"launch\":true,\"launch_end\":\"image_auth\"}",
         "image_auth", "rank 0 on n1 could not start: registry r.example: the token service "
         "answered 401", -1, 0},
    };
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        cjob *j = running(f, 1, 0);
        ctld_txn t = {0};
        assert_int_equal(report(f, j, 0, CASES[i].report, &t, 200), 0);
        assert_int_equal(t.n, 1);
        assert_int_equal(t.ch[0].to, TS_JOB_FAILED);
        assert_string_equal(t.ch[0].row.reason, CASES[i].reason);
        assert_string_equal(t.ch[0].row.why, CASES[i].why);
        json_t *r = result_of(&t);
        assert_true(json_is_null(json_object_get(r, "exit_code")));
        if (CASES[i].sig)
            assert_int_equal(json_integer_value(json_object_get(r, "signal")), CASES[i].sig);
        json_decref(r);
        ctld_txn_fini(&t);
    }
}

/* Every rank exited 0: completed, exit code 0. */
static void success_is_exit_code_zero(void **state)
{
    fx *f = *state;
    cjob *j = running(f, 2, 0);
    ctld_txn t = {0};
    assert_int_equal(report(f, j, 0, "{\"state\":\"exited\",\"exit_code\":0}", &t, 200), 0);
    assert_int_equal(t.n, 0); /* rank 1 still runs */
    assert_int_equal(report(f, j, 1, "{\"state\":\"exited\",\"exit_code\":0}", &t, 201), 0);
    assert_int_equal(t.n, 1);
    assert_int_equal(t.ch[0].to, TS_JOB_COMPLETED);
    json_t *r = result_of(&t);
    assert_int_equal(json_integer_value(json_object_get(r, "exit_code")), 0);
    json_decref(r);
    ctld_txn_fini(&t);
}

/* A rank its agent stopped at the time limit: a gang with a rank still
 * running is stopped (time-limit), a job whose ranks all ended times out,
 * without an exit code of its own. */
static void agent_timeout_ends_the_job_as_timeout(void **state)
{
    fx *f = *state;
    static const char STOPPED[] = "{\"state\":\"stopped\",\"outcome\":\"killed\",\"signal\":9,"
                                  "\"timeout\":true,\"time_limit_s\":5}";
    cjob *g = running(f, 2, 5);
    ctld_txn t = {0};
    assert_int_equal(report(f, g, 0, STOPPED, &t, 107), 0);
    assert_int_equal(t.n, 1);
    assert_int_equal(t.ch[0].event, CTLD_JE_EXPIRE);
    assert_string_equal(t.ch[0].row.reason, "timeout");
    assert_true(g->timed_out);
    ctld_txn_fini(&t);

    cjob *j = running(f, 1, 5400);
    t = (ctld_txn){0};
    assert_int_equal(report(f, j, 0, STOPPED, &t, 5507), 0);
    assert_int_equal(t.n, 1);
    assert_int_equal(t.ch[0].to, TS_JOB_TIMEOUT);
    assert_string_equal(t.ch[0].row.reason, "timeout");
    assert_string_equal(t.ch[0].row.why, "time limit 1h30m reached: SIGTERM, then SIGKILL after 2s");
    json_t *r = result_of(&t);
    assert_true(json_is_null(json_object_get(r, "exit_code")));
    assert_int_equal(json_integer_value(json_object_get(r, "signal")), 9);
    json_decref(r);
    ctld_txn_fini(&t);
}

/* The controller's own time limit: planned at the limit, not before, with
 * the job's checkpoint signal when it has one; never for a virtual run. */
static void time_limits_planned_at_the_limit(void **state)
{
    fx *f = *state;
    cjob *j = running(f, 1, 5);
    cjob *v = running(f, 1, 5);
    v->is_virtual = true;
    ts_err err;
    ctld_txn t = {0};
    assert_int_equal(ctld_time_limits(&f->c, 104.9, &t, &err), 0);
    assert_int_equal(t.n, 0);
    assert_true(ctld_next_limit_s(&f->c) == 105);
    f->spec.ckpt_signal = SIGUSR2;
    assert_int_equal(ctld_time_limits(&f->c, 105.0, &t, &err), 0);
    assert_int_equal(t.n, 1);
    assert_true(t.ch[0].j == j);
    assert_int_equal(t.ch[0].event, CTLD_JE_EXPIRE);
    assert_true(t.ch[0].stop_by_s == 107.0);
    assert_string_equal(t.ev[0].detail, "time limit 5s reached: SIGUSR2 to every rank, SIGKILL "
                                        "after 2s");
    ctld_txn_fini(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(failed_rank_names_itself, setup, teardown),
        cmocka_unit_test_setup_teardown(signal_oom_and_launch_reasons, setup, teardown),
        cmocka_unit_test_setup_teardown(success_is_exit_code_zero, setup, teardown),
        cmocka_unit_test_setup_teardown(agent_timeout_ends_the_job_as_timeout, setup, teardown),
        cmocka_unit_test_setup_teardown(time_limits_planned_at_the_limit, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
