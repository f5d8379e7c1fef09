/*
 * test_node_select.c - which nodes a job may use (tessera/node_select.h) and
 * the cycle honouring it.
 *
 * The cluster: r-1..r-4 (4 H100 each; r-1 and r-2 labelled ib and
 * pool=train, r-3 pool=infer) and s-1 (2 A100, label ib). The masks are
 * worked out on paper from those labels; the cycle tests check that a
 * job limited to some nodes lands only there, waits with reason
 * "constraint" when they are full, and that its memo is not shared with an
 * unconstrained twin.
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
#include "tessera/node_select.h"
#include "tessera/tenant_load.h"

static const char CLUSTER_YAML[] =
    "node_classes:\n"
    "  g4: {gpu_model: H100-80GB, gpus: 4, cpu_milli: 64000, memory_mib: 524288}\n"
    "  a2: {gpu_model: A100-80GB, gpus: 2, cpu_milli: 32000, memory_mib: 262144}\n"
    "nodes:\n"
    "  - {names: 'r-[1-2]', class: g4, labels: {ib: 'yes', pool: train}}\n"
    "  - {name: r-3, class: g4, labels: {pool: infer}}\n"
    "  - {name: r-4, class: g4}\n"
    "  - {name: s-1, class: a2, labels: {ib: 'yes'}}\n";

static const char TENANTS_YAML[] = "tenants:\n"
                                   "  ta: {guaranteed: {gpu: {H100-80GB: 16, A100-80GB: 2}}}\n";

enum { R1, R2, R3, R4, S1 };

static ts_cluster *cluster(void)
{
    ts_cluster *c = NULL;
    ts_err err;
    assert_int_equal(
        ts_load_cluster_yaml(CLUSTER_YAML, sizeof CLUSTER_YAML - 1, "c.yaml", &c, &err), 0);
    return c;
}

/* The mask as a bit string per node index, r-1 first. */
static unsigned select_bits(const ts_cluster *c, const char *cons, const char *list,
                            const char *excl, int want_rc, const char *want_msg)
{
    uint64_t mask[1] = {0};
    ts_err err = {0};
    int rc = ts_node_select(c, cons, list, excl, mask, &err);
    assert_int_equal(rc, want_rc);
    if (want_msg && !strstr(err.msg, want_msg))
        fail_msg("error \"%s\" lacks \"%s\"", err.msg, want_msg);
    return rc == 0 ? (unsigned)mask[0] : 0;
}

#define BIT(n) (1u << (n))

static void test_constraint_syntax(void **state)
{
    (void)state;
    ts_err err;
    assert_int_equal(ts_constraint_check("ib", &err), 0);
    assert_int_equal(ts_constraint_check("ib&pool=train|H100-80GB", &err), 0);
    assert_int_equal(ts_constraint_check("", &err), TS_EINVAL);
    assert_int_equal(ts_constraint_check("a&&b", &err), TS_EINVAL);
    assert_non_null(strstr(err.msg, "empty feature name at byte 2"));
    assert_int_equal(ts_constraint_check("a|", &err), TS_EINVAL);
    assert_int_equal(ts_constraint_check("(a|b)&c", &err), TS_EINVAL);
    assert_non_null(strstr(err.msg, "'(' at byte 0"));
    assert_int_equal(ts_constraint_check("=x", &err), TS_EINVAL);
    assert_int_equal(ts_constraint_check("a=b=c", &err), TS_EINVAL);
    assert_non_null(strstr(err.msg, "name or key=value"));
}

static void test_hostlist_syntax(void **state)
{
    (void)state;
    ts_err err;
    assert_int_equal(ts_hostlist_check("r-1", &err), 0);
    assert_int_equal(ts_hostlist_check("r-[1-4,7],s-1", &err), 0);
    assert_int_equal(ts_hostlist_check("r-[4-1]", &err), TS_EINVAL);
    assert_non_null(strstr(err.msg, "\"r-[4-1]\""));
    assert_int_equal(ts_hostlist_check("a,,b", &err), TS_EINVAL);
    assert_int_equal(ts_hostlist_check("a,", &err), TS_EINVAL);
    assert_non_null(strstr(err.msg, "ends with a comma"));
    assert_int_equal(ts_hostlist_check("", &err), TS_EINVAL);
}

static void test_masks(void **state)
{
    (void)state;
    ts_cluster *c = cluster();
    /* a bare name matches a label key, a label value or the GPU model */
    assert_int_equal(select_bits(c, "ib", NULL, NULL, 0, NULL), BIT(R1) | BIT(R2) | BIT(S1));
    assert_int_equal(select_bits(c, "infer", NULL, NULL, 0, NULL), BIT(R3));
    assert_int_equal(select_bits(c, "A100-80GB", NULL, NULL, 0, NULL), BIT(S1));
    /* & binds tighter than | */
    assert_int_equal(select_bits(c, "ib&H100-80GB|pool=infer", NULL, NULL, 0, NULL),
                     BIT(R1) | BIT(R2) | BIT(R3));
    assert_int_equal(select_bits(c, "pool=infer|ib&A100-80GB", NULL, NULL, 0, NULL),
                     BIT(R3) | BIT(S1));
    /* key=value is exact */
    assert_int_equal(select_bits(c, "pool=train", NULL, NULL, 0, NULL), BIT(R1) | BIT(R2));
    select_bits(c, "pool=gpu", NULL, NULL, TS_EINVAL, "constraint: no node has the features");
    /* host lists */
    assert_int_equal(select_bits(c, NULL, "r-[2-4]", NULL, 0, NULL), BIT(R2) | BIT(R3) | BIT(R4));
    assert_int_equal(select_bits(c, NULL, "r-[1-4],s-1", "r-3", 0, NULL),
                     BIT(R1) | BIT(R2) | BIT(R4) | BIT(S1));
    assert_int_equal(select_bits(c, NULL, NULL, "r-[1-2]", 0, NULL),
                     BIT(R3) | BIT(R4) | BIT(S1));
    assert_int_equal(select_bits(c, "ib", "r-[2-3]", NULL, 0, NULL), BIT(R2));
    select_bits(c, NULL, "r-[1-5]", NULL, TS_EINVAL, "nodelist: no node \"r-5\" in the cluster");
    select_bits(c, NULL, NULL, "x-1", TS_EINVAL, "exclude: no node \"x-1\"");
    select_bits(c, NULL, NULL, "r-[1-4],s-1", TS_EINVAL, "exclude: leaves no node");
    select_bits(c, "ib", "r-3", NULL, TS_EINVAL, "no node of the nodelist has the features");
    ts_cluster_free(c);
}

/* ---- the cycle ------------------------------------------------------------- */

typedef struct fx {
    ts_cluster *c;
    ts_tenants *ts;
    ts_quota *q;
    ts_sched *s;
    ts_decision d;
    ts_request tasks[8][2];
    ts_job jobs[8];
    uint64_t masks[8];
    int n;
} fx;

static int setup(void **state)
{
    fx *f = calloc(1, sizeof *f);
    ts_sched_config cfg;
    ts_sched_config_default(&cfg);
    cfg.order = TS_ORDER_FIFO;
    if (!f)
        return -1;
    f->c = cluster();
    if (sched_world_open(NULL, TENANTS_YAML, &cfg, &f->c, &f->ts, &f->q, &f->s, &f->d) != 0)
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

/* A job of ntasks tasks of k whole GPUs, limited as the strings say. */
static ts_job *job(fx *f, int ntasks, int k, const char *cons, const char *list)
{
    int n = f->n++;
    ts_job *j = &f->jobs[n];
    sched_world_job(j, n, ts_tenant_find(f->ts, "ta"), f->tasks[n], ntasks, k, 100);
    if (cons || list) {
        ts_err err;
        assert_int_equal(ts_node_select(f->c, cons, list, NULL, &f->masks[n], &err), 0);
        j->node_mask = &f->masks[n];
    }
    return j;
}

static int cycle_at(fx *f, double now, ts_job *const *w, int nw)
{
    ts_job wv[8];
    for (int i = 0; i < nw; i++)
        wv[i] = *w[i];
    ts_err err;
    return ts_sched_cycle(f->s, now, wv, nw, NULL, 0, &f->d, &err);
}

static int cycle(fx *f, ts_job *const *w, int nw) { return cycle_at(f, 0, w, nw); }

/* Reservation id on the nodes of list, from start_s to end_s. */
static void reserve(fx *f, int64_t id, const char *list, double start_s, double end_s)
{
    uint64_t mask[1];
    ts_err err;
    assert_int_equal(ts_node_select(f->c, NULL, list, NULL, mask, &err), 0);
    ts_reservation r = {.id = id, .nodes = mask, .start_s = start_s, .end_s = end_s};
    assert_int_equal(ts_sched_set_reservations(f->s, &r, 1, &err), 0);
}

static int node_of_start(const fx *f, int k, int task) { return f->d.starts[k].allocs[task].node; }

static void test_cycle_places_inside_mask(void **state)
{
    fx *f = *state;
    ts_job *a = job(f, 1, 2, "pool=infer", NULL);        /* r-3 only */
    ts_job *b = job(f, 2, 4, NULL, "r-[2-4]");            /* two of r-2..r-4 */
    ts_job *c = job(f, 1, 1, "ib&A100-80GB", NULL);      /* s-1 */
    ts_job *w[] = {a, b, c};
    assert_int_equal(cycle(f, w, 3), 0);
    assert_int_equal(f->d.nstarts, 3);
    for (int k = 0; k < f->d.nstarts; k++) {
        const ts_job *j = w[f->d.starts[k].job];
        for (int t = 0; t < j->ntasks; t++) {
            int node = node_of_start(f, k, t);
            assert_true(ts_node_mask_has(j->node_mask, node));
        }
    }
    /* b's two whole nodes are r-2 and r-4 (r-3 holds a) */
    int k_b = f->d.starts[0].job == 1 ? 0 : f->d.starts[1].job == 1 ? 1 : 2;
    int n0 = node_of_start(f, k_b, 0), n1 = node_of_start(f, k_b, 1);
    assert_true((n0 == R2 && n1 == R4) || (n0 == R4 && n1 == R2));
    /* the nodes it excluded are still placeable for others */
    for (int i = 0; i < f->c->nnodes; i++)
        assert_true(ts_sched_node_schedulable(f->s, i));
}

static void test_cycle_waits_for_constraint(void **state)
{
    fx *f = *state;
    ts_job *a = job(f, 1, 4, "pool=infer", NULL);  /* fills r-3 */
    ts_job *b = job(f, 1, 1, "pool=infer", NULL);  /* nothing left on r-3 */
    ts_job *c = job(f, 1, 1, NULL, NULL);          /* anywhere: starts */
    ts_job *w[] = {a, b, c};
    assert_int_equal(cycle(f, w, 3), 0);
    assert_int_equal(f->d.nstarts, 2);
    assert_int_equal(f->d.pending[1].reason, TS_PEND_CONSTRAINT);
    assert_string_equal(ts_pending_name(TS_PEND_CONSTRAINT), "constraint");
    assert_non_null(strstr(f->d.pending[1].why, "on the 1 nodes its constraint"));
    assert_int_equal(f->d.pending[2].reason, TS_PEND_NONE);
}

static void test_memo_not_shared_with_unconstrained_twin(void **state)
{
    fx *f = *state;
    ts_job *fill = job(f, 1, 4, NULL, "r-3");
    ts_job *a = job(f, 1, 2, NULL, "r-3"); /* fails */
    ts_job *b = job(f, 1, 2, NULL, NULL);  /* same shape, no limit: starts */
    ts_job *w[] = {fill, a, b};
    assert_int_equal(cycle(f, w, 3), 0);
    assert_int_equal(f->d.nstarts, 2);
    assert_int_equal(f->d.pending[1].reason, TS_PEND_CONSTRAINT);
    assert_int_equal(f->d.pending[2].reason, TS_PEND_NONE);
}

/* ---- reservations ----------------------------------------------------------- */

static void test_reservation_keeps_long_jobs_off(void **state)
{
    fx *f = *state;
    reserve(f, 7, "r-3", 1000, 2000);
    ts_job *shortj = job(f, 1, 1, NULL, "r-3");
    shortj->time_limit_s = 900; /* ends before the window: backfills */
    ts_job *longj = job(f, 1, 1, NULL, "r-3");
    longj->time_limit_s = 1500; /* would run into it */
    ts_job *w[] = {shortj, longj};
    assert_int_equal(cycle(f, w, 2), 0);
    assert_int_equal(f->d.nstarts, 1);
    assert_int_equal(f->d.starts[0].job, 0);
    assert_int_equal(f->d.pending[1].reason, TS_PEND_RESERVATION);
    assert_non_null(strstr(f->d.pending[1].why, "runs into a reservation"));
    /* a job that may go anywhere goes elsewhere rather than wait */
    ts_job *any = job(f, 1, 4, NULL, NULL);
    any->time_limit_s = 5000;
    assert_int_equal(cycle(f, &any, 1), 0);
    assert_int_equal(f->d.nstarts, 1);
    assert_int_not_equal(f->d.starts[0].allocs[0].node, R3);
}

static void test_reservation_member_waits_for_window(void **state)
{
    fx *f = *state;
    reserve(f, 7, "r-3", 1000, 2000);
    ts_job *m = job(f, 1, 2, NULL, NULL);
    m->reservation = 7;
    assert_int_equal(cycle_at(f, 0, &m, 1), 0);
    assert_int_equal(f->d.nstarts, 0);
    assert_int_equal(f->d.pending[0].reason, TS_PEND_RESERVATION);
    assert_non_null(strstr(f->d.pending[0].why, "reservation: 7 starts in 1000 s"));
    /* in the window it runs on the reserved node only */
    assert_int_equal(cycle_at(f, 1000, &m, 1), 0);
    assert_int_equal(f->d.nstarts, 1);
    assert_int_equal(f->d.starts[0].allocs[0].node, R3);
    /* a non-member is kept off it during the window, however short */
    ts_job *other = job(f, 1, 1, NULL, "r-3");
    other->time_limit_s = 10;
    assert_int_equal(cycle_at(f, 1500, &other, 1), 0);
    assert_int_equal(f->d.nstarts, 0);
    assert_int_equal(f->d.pending[0].reason, TS_PEND_RESERVATION);
    /* an unknown reservation waits, saying so */
    ts_job *lost = job(f, 1, 1, NULL, NULL);
    lost->reservation = 99;
    assert_int_equal(cycle_at(f, 1500, &lost, 1), 0);
    assert_non_null(strstr(f->d.pending[0].why, "reservation: 99 does not exist"));
}

static void test_maintenance_drains_ahead(void **state)
{
    fx *f = *state;
    /* every H100 node down for maintenance from 1000 to 2000 */
    reserve(f, 3, "r-[1-4]", 1000, 2000);
    ts_job *longj = job(f, 1, 1, "H100-80GB", NULL);
    longj->time_limit_s = 1200;
    ts_job *shortj = job(f, 1, 1, "H100-80GB", NULL);
    shortj->time_limit_s = 600;
    ts_job *w[] = {longj, shortj};
    assert_int_equal(cycle_at(f, 100, w, 2), 0);
    assert_int_equal(f->d.nstarts, 1);
    assert_int_equal(f->d.starts[0].job, 1);
    assert_int_equal(f->d.pending[0].reason, TS_PEND_RESERVATION);
    /* after the window everything may start again */
    assert_int_equal(cycle_at(f, 2000, &longj, 1), 0);
    assert_int_equal(f->d.nstarts, 1);
    ts_err err;
    ts_reservation bad = {.id = 1, .nodes = f->masks, .start_s = 5, .end_s = 5};
    assert_int_equal(ts_sched_set_reservations(f->s, &bad, 1, &err), TS_EINVAL);
    assert_non_null(strstr(err.msg, "reservations[0]: must end after it starts"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_constraint_syntax),
        cmocka_unit_test(test_hostlist_syntax),
        cmocka_unit_test(test_masks),
        cmocka_unit_test_setup_teardown(test_cycle_places_inside_mask, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cycle_waits_for_constraint, setup, teardown),
        cmocka_unit_test_setup_teardown(test_memo_not_shared_with_unconstrained_twin, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_reservation_keeps_long_jobs_off, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reservation_member_waits_for_window, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_maintenance_drains_ahead, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
