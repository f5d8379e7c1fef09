/*
 * test_host_ports.c - published host ports as a per-node resource of the
 * cycle (cycle_ports.c, docs/network.md "Published ports").
 *
 * The cluster: n-1..n-3, 4 H100 each. Jobs of one GPU would be packed onto
 * one node by the default scorer; a job that publishes a port must instead
 * land where no other task holds that port (a running job's or one started
 * earlier in the same cycle, its own other tasks included), and wait saying
 * which port when every node has it taken. A port of the other protocol, or
 * a job without ports, is not held back.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "sched/sched_world.h"
#include "tessera/cycle.h"
#include "tessera/load.h"
#include "tessera/tenant_load.h"

static const char CLUSTER_YAML[] =
    "node_classes:\n"
    "  g4: {gpu_model: H100-80GB, gpus: 4, cpu_milli: 64000, memory_mib: 524288}\n"
    "nodes:\n"
    "  - {names: 'n-[1-3]', class: g4}\n";

static const char TENANTS_YAML[] = "tenants:\n"
                                   "  ta: {guaranteed: {gpu: {H100-80GB: 12}}}\n";

#define JOBS_MAX 8
#define TASKS_MAX 4

typedef struct fx {
    ts_cluster *c;
    ts_tenants *ts;
    ts_quota *q;
    ts_sched *s;
    ts_decision d;
    ts_request tasks[JOBS_MAX][TASKS_MAX];
    uint32_t ports[JOBS_MAX][2];
    ts_job jobs[JOBS_MAX];
    int n;
} fx;

static int setup(void **state)
{
    fx *f = calloc(1, sizeof *f);
    ts_sched_config cfg;
    ts_sched_config_default(&cfg);
    cfg.order = TS_ORDER_FIFO;
    if (!f || sched_world_open(CLUSTER_YAML, TENANTS_YAML, &cfg, &f->c, &f->ts, &f->q, &f->s,
                               &f->d) != 0)
        return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    sched_world_close(f->c, f->ts, f->q, f->s, &f->d);
    free(f);
    return 0;
}

/* A job of ntasks one-GPU tasks publishing port (0: none) over tcp or udp. */
static ts_job *job(fx *f, int ntasks, unsigned port, bool udp)
{
    int n = f->n++;
    ts_job *j = &f->jobs[n];
    sched_world_job(j, n, ts_tenant_find(f->ts, "ta"), f->tasks[n], ntasks, 1, 100);
    if (port) {
        f->ports[n][0] = TS_HOST_PORT(port, udp);
        j->host_ports = f->ports[n];
        j->nhost_ports = 1;
    }
    return j;
}

static int cycle(fx *f, ts_job *const *w, int nw, const ts_job *r, int nr)
{
    ts_job wv[JOBS_MAX];
    for (int i = 0; i < nw; i++)
        wv[i] = *w[i];
    ts_err err;
    return ts_sched_cycle(f->s, 0, wv, nw, r, nr, &f->d, &err);
}

/* The start of waiting job index w in the last decision, or NULL. */
static const ts_cycle_start *start_of(const fx *f, int w)
{
    for (int k = 0; k < f->d.nstarts; k++)
        if (f->d.starts[k].job == w)
            return &f->d.starts[k];
    return NULL;
}

static void test_same_port_spreads_and_third_waits(void **state)
{
    fx *f = *state;
    ts_job *a = job(f, 1, 8000, false), *b = job(f, 1, 8000, false);
    ts_job *c = job(f, 1, 8000, false), *d = job(f, 1, 8000, false);
    ts_job *plain = job(f, 1, 0, false); /* same shape, no port: not held back */
    ts_job *w[] = {a, b, c, d, plain};
    assert_int_equal(cycle(f, w, 5, NULL, 0), 0);
    assert_int_equal(f->d.nstarts, 4);
    int seen = 0;
    for (int i = 0; i < 3; i++) {
        const ts_cycle_start *st = start_of(f, i);
        assert_non_null(st);
        int node = st->allocs[0].node;
        assert_false(seen >> node & 1); /* three jobs, three nodes */
        seen |= 1 << node;
    }
    assert_null(start_of(f, 3));
    if (f->d.pending[3].reason != TS_PEND_CAPACITY)
        fail_msg("reason %d: %s", f->d.pending[3].reason, f->d.pending[3].why);
    if (!strstr(f->d.pending[3].why, "network.publish: 8000/tcp is published by another task "
                                     "on every node it may use (3)"))
        fail_msg("why: %s", f->d.pending[3].why);
    assert_non_null(start_of(f, 4));
}

static void test_other_protocol_shares_a_node(void **state)
{
    fx *f = *state;
    ts_job *a = job(f, 1, 8000, false), *b = job(f, 1, 8000, true), *c = job(f, 1, 9000, false);
    ts_job *w[] = {a, b, c};
    assert_int_equal(cycle(f, w, 3, NULL, 0), 0);
    assert_int_equal(f->d.nstarts, 3);
    /* nothing keeps them apart: the scorer packs them onto one node */
    int node = start_of(f, 0)->allocs[0].node;
    assert_int_equal(start_of(f, 1)->allocs[0].node, node);
    assert_int_equal(start_of(f, 2)->allocs[0].node, node);
}

static void test_running_job_holds_its_port(void **state)
{
    fx *f = *state;
    ts_job *a = job(f, 1, 8000, false);
    ts_job *w[] = {a};
    assert_int_equal(cycle(f, w, 1, NULL, 0), 0);
    assert_int_equal(f->d.nstarts, 1);
    ts_alloc held = f->d.starts[0].allocs[0];
    ts_job run = *a;
    run.allocs = &held;
    run.start_s = 0;
    ts_job *b = job(f, 1, 8000, false);
    ts_job *w2[] = {b};
    assert_int_equal(cycle(f, w2, 1, &run, 1), 0);
    assert_int_equal(f->d.nstarts, 1);
    assert_int_not_equal(f->d.starts[0].allocs[0].node, held.node);
}

static void test_own_tasks_one_per_node(void **state)
{
    fx *f = *state;
    ts_job *a = job(f, 3, 8000, false);
    ts_job *b = job(f, 2, 9000, false); /* 2 tasks on 3 nodes: fits beside a */
    ts_job *c = job(f, 4, 7000, false); /* 4 tasks, 3 nodes: never, even idle */
    ts_job *w[] = {a, b, c};
    assert_int_equal(cycle(f, w, 3, NULL, 0), 0);
    assert_int_equal(f->d.nstarts, 2);
    for (int j = 0; j < 2; j++) {
        const ts_cycle_start *st = start_of(f, j);
        assert_non_null(st);
        for (int t = 0; t < w[j]->ntasks; t++)
            for (int u = 0; u < t; u++)
                assert_int_not_equal(st->allocs[t].node, st->allocs[u].node);
    }
    /* a node each, on an idle cluster too: it never fits, and says why */
    assert_int_equal(f->d.pending[2].reason, TS_PEND_INVALID);
    if (!strstr(f->d.pending[2].why, "3 of 4 tasks fit one per node (network.publish)"))
        fail_msg("why: %s", f->d.pending[2].why);
}

static void test_check_refuses_one_node_gang(void **state)
{
    fx *f = *state;
    ts_job *a = job(f, 2, 8000, false);
    a->required_level = TS_GANG_LEVEL_NODE;
    ts_err err;
    assert_int_equal(ts_sched_check_job(f->s, a, &err), TS_EINVAL);
    assert_non_null(strstr(err.msg, "topology.required: a job publishing ports"));
    ts_job *b = job(f, 1, 8000, false);
    f->ports[f->n - 1][0] = TS_HOST_PORT(0, false);
    assert_int_equal(ts_sched_check_job(f->s, b, &err), TS_EINVAL);
    assert_non_null(strstr(err.msg, "network.publish[0]: not a port"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_same_port_spreads_and_third_waits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_other_protocol_shares_a_node, setup, teardown),
        cmocka_unit_test_setup_teardown(test_running_job_holds_its_port, setup, teardown),
        cmocka_unit_test_setup_teardown(test_own_tasks_one_per_node, setup, teardown),
        cmocka_unit_test_setup_teardown(test_check_refuses_one_node_gang, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
