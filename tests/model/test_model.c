/*
 * test_model.c - the node bookkeeping every placement goes through.
 *
 * Proves that ts_cluster_add_node rejects bad nodes with a message naming the
 * field; that the default GPU choice is the documented one (whole requests take
 * the lowest-index free GPUs, a share the least sufficient free milli with the
 * lowest index on ties, MIG an idle instance first, else a new one at
 * ts_mig_best_start); that WHOLE, SHARED and MIG GPUs only take the requests
 * their mode allows; that CPU, memory, GPU memory and model masks are
 * enforced; and, by 20,000 seeded random assign/release steps, that the
 * aggregates filters rely on (gpus_free, milli_free, max_gpu_free, cpu/mem
 * used, shape_tasks) always equal a recomputation from scratch, that
 * ts_node_fits agrees with ts_node_choose_gpus, and that releasing everything
 * returns every node to empty. Scorers cache on these numbers, so a drift here
 * silently corrupts every policy.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tessera/fmt.h"
#include "tessera/load.h"
#include "tessera/model.h"
#include "tessera/rng.h"

/* ---- helpers ------------------------------------------------------------ */

static int add(ts_cluster *c, const char *name, const char *model, int ngpu, int64_t cpu,
               int64_t mem, int mode)
{
    ts_node_spec s = {.name = name,
                      .gpu_model = model,
                      .ngpu = ngpu,
                      .cpu_milli = cpu,
                      .mem_mib = mem,
                      .gpu_mode = mode};
    ts_err err = {0};
    int rc = ts_cluster_add_node(c, &s, &err);
    if (rc < 0)
        fail_msg("add %s: %s", name, err.msg);
    return rc;
}

static ts_request req_cpu(int64_t cpu)
{
    return (ts_request){.cpu_milli = cpu, .mem_mib = 0, .mig_profile = -1};
}

static ts_request req_whole(int k)
{
    return (ts_request){.cpu_milli = 1000, .mem_mib = 1024, .num_gpu = k,
                        .gpu_milli = TS_MILLI_PER_GPU, .mig_profile = -1};
}

static ts_request req_share(int32_t milli)
{
    return (ts_request){.cpu_milli = 500, .mem_mib = 512, .num_gpu = 1, .gpu_milli = milli,
                        .mig_profile = -1};
}

static ts_request req_mig(int profile)
{
    return (ts_request){.cpu_milli = 100, .mem_mib = 128, .num_gpu = 1, .mig_profile = profile};
}

/* choose + assign, asserting both succeed; returns the alloc */
static ts_alloc place(ts_node *n, const ts_request *r)
{
    ts_alloc a;
    assert_true(ts_node_fits(n, r));
    assert_int_equal(ts_node_choose_gpus(n, r, &a), 0);
    assert_int_equal(ts_node_assign(n, r, &a), 0);
    return a;
}

static void expect_err(int rc, int code, const ts_err *err, const char *needle)
{
    assert_int_equal(rc, code);
    if (!strstr(err->msg, needle))
        fail_msg("message \"%s\" does not name \"%s\"", err->msg, needle);
}

/* ---- adding nodes ------------------------------------------------------- */

static void test_add_node_errors(void **state)
{
    (void)state;
    ts_cluster *c = ts_cluster_new();
    assert_int_equal(add(c, "n0", "T4", 2, 8000, 16384, TS_GPU_SHARED), 0);
    assert_int_equal(add(c, "cpu0", NULL, 0, 8000, 16384, TS_GPU_WHOLE), 1);
    assert_int_equal(c->total_gpus, 2);
    assert_int_equal(c->nodes[1].model, -1);
    ts_err err = {0};
    ts_node_spec s = {.name = "n0", .gpu_model = "T4", .ngpu = 1, .cpu_milli = 1,
                      .mem_mib = 1, .gpu_mode = TS_GPU_SHARED};
    expect_err(ts_cluster_add_node(c, &s, &err), TS_EEXIST, &err, "name");
    assert_non_null(strstr(err.msg, "n0"));
    s.name = "";
    expect_err(ts_cluster_add_node(c, &s, &err), TS_EINVAL, &err, "name");
    s.name = "n1";
    s.gpu_model = "K80";
    expect_err(ts_cluster_add_node(c, &s, &err), TS_EINVAL, &err, "model");
    assert_non_null(strstr(err.msg, "K80"));
    s.gpu_model = "";
    expect_err(ts_cluster_add_node(c, &s, &err), TS_EINVAL, &err, "model");
    s.gpu_model = "T4";
    s.cpu_milli = -1;
    expect_err(ts_cluster_add_node(c, &s, &err), TS_EINVAL, &err, "cpu_milli");
    s.cpu_milli = 1;
    s.mem_mib = -5;
    expect_err(ts_cluster_add_node(c, &s, &err), TS_EINVAL, &err, "memory_mib");
    s.mem_mib = 1;
    s.ngpu = -1;
    expect_err(ts_cluster_add_node(c, &s, &err), TS_EINVAL, &err, "gpus");
    s.ngpu = TS_NODE_MAX_GPUS + 1;
    expect_err(ts_cluster_add_node(c, &s, &err), TS_EINVAL, &err, "gpus");
    s.ngpu = 1;
    s.gpu_mode = TS_GPU_MIG; /* T4 has no MIG */
    expect_err(ts_cluster_add_node(c, &s, &err), TS_EINVAL, &err, "gpu_mode");
    s.gpu_mode = 7;
    expect_err(ts_cluster_add_node(c, &s, &err), TS_EINVAL, &err, "gpu_mode");

    /* impossible layout: two 4g instances both need slot 0 */
    ts_mig_layout two4g = {.n = 2, .inst = {{TS_MIG_P_4G, 0, 0}, {TS_MIG_P_4G, 0, 0}}};
    s.gpu_model = "A100-40GB";
    s.gpu_mode = TS_GPU_MIG;
    s.ngpu = 2;
    s.mig_layout = &two4g;
    expect_err(ts_cluster_add_node(c, &s, &err), TS_EINVAL, &err, "mig_layout: gpu 0");
    /* per-GPU layouts: only gpu 1's is bad, and the message says so */
    ts_mig_layout per[2] = {{.n = 1, .inst = {{TS_MIG_P_7G, 0, 0}}}, two4g};
    s.mig_layout = NULL;
    s.per_gpu_mig = per;
    expect_err(ts_cluster_add_node(c, &s, &err), TS_EINVAL, &err, "mig_layout: gpu 1");
    assert_int_equal(c->nnodes, 2); /* nothing half-added */
    assert_int_equal(c->total_gpus, 2);

    /* the good one goes in, busy flags cleared whatever the caller wrote */
    per[1] = (ts_mig_layout){.n = 1, .inst = {{TS_MIG_P_3G, 4, 1}}};
    assert_int_equal(ts_cluster_add_node(c, &s, &err), 2);
    assert_int_equal(c->nodes[2].gpu[1].mig.n, 1);
    assert_int_equal(c->nodes[2].gpu[1].mig.inst[0].busy, 0);
    assert_int_equal(ts_cluster_find_node(c, "n1"), 2);
    assert_int_equal(ts_cluster_find_node(c, "nope"), -1);
    assert_int_equal(c->total_gpus, 4);
    ts_cluster_free(c);
}

/* ---- whole GPUs and shares ---------------------------------------------- */

static void test_whole_lowest_index(void **state)
{
    (void)state;
    ts_cluster *c = ts_cluster_new();
    add(c, "n", "V100M32", 8, 64000, 262144, TS_GPU_SHARED);
    ts_node *n = &c->nodes[0];
    assert_int_equal(n->gpus_free, 8);
    assert_int_equal(n->milli_free, 8000);
    assert_int_equal(n->max_gpu_free, 1000);

    ts_request sh = req_share(300);
    ts_alloc s0 = place(n, &sh);
    assert_int_equal(s0.gpu[0], 0);
    ts_request w2 = req_whole(2), w3 = req_whole(3), w1 = req_whole(1);
    ts_alloc a2 = place(n, &w2);
    assert_int_equal(a2.ngpu, 2);
    assert_int_equal(a2.gpu[0], 1);
    assert_int_equal(a2.gpu[1], 2);
    ts_alloc a3 = place(n, &w3);
    assert_int_equal(a3.gpu[0], 3);
    assert_int_equal(a3.gpu[2], 5);
    assert_int_equal(n->gpus_free, 2);
    assert_int_equal(n->milli_free, 700 + 2000);
    assert_int_equal(n->max_gpu_free, 1000);
    assert_int_equal(n->shape_tasks[TS_SHAPE_SHARE], 1);
    assert_int_equal(n->shape_tasks[TS_SHAPE_WHOLE + 1], 1);
    assert_int_equal(n->shape_tasks[TS_SHAPE_WHOLE + 2], 1);
    assert_int_equal(n->cpu_used, 500 + 2000);

    /* a hole at 1..2 is refilled lowest-first */
    assert_int_equal(ts_node_release(n, &a2), 0);
    ts_alloc a1 = place(n, &w1);
    assert_int_equal(a1.gpu[0], 1);
    ts_request w4 = req_whole(4); /* free now: 2, 6, 7 */
    ts_alloc tmp;
    assert_false(ts_node_fits(n, &w4));
    assert_int_equal(ts_node_choose_gpus(n, &w4, &tmp), TS_ENOSPC);
    ts_request w3b = req_whole(3);
    ts_alloc a3b = place(n, &w3b);
    assert_int_equal(a3b.gpu[0], 2);
    assert_int_equal(a3b.gpu[1], 6);
    assert_int_equal(a3b.gpu[2], 7);
    assert_int_equal(n->gpus_free, 0);
    assert_int_equal(n->max_gpu_free, 700);
    /* the GPU carrying a share is never handed out whole */
    assert_false(ts_node_fits(n, &w1));
    ts_cluster_free(c);
}

/* A node whose shared GPUs keep one user's shares each (an MPS node: MPS
 * runs one user's server a GPU at a time): another user's share goes to
 * another GPU, or does not fit; an emptied GPU takes anyone again. Without
 * the flag, keys change nothing. */
static void test_share_one_user_per_gpu(void **state)
{
    (void)state;
    ts_cluster *c = ts_cluster_new();
    add(c, "n", "G2", 2, 64000, 262144, TS_GPU_SHARED);
    ts_node *n = &c->nodes[0];
    n->share_one_user = true;
    ts_request alice = req_share(300), bob = req_share(300);
    alice.share_key = 11;
    bob.share_key = 12;
    ts_alloc a1 = place(n, &alice);
    ts_alloc a2 = place(n, &alice);
    assert_int_equal(a1.gpu[0], a2.gpu[0]); /* best fit: alice's GPU again */
    assert_int_equal(n->gpu[a1.gpu[0]].share_key, 11);
    ts_alloc b1 = place(n, &bob);
    assert_int_not_equal(b1.gpu[0], a1.gpu[0]); /* not beside alice, though 400 are free */
    assert_int_equal(n->gpu[b1.gpu[0]].share_key, 12);
    ts_request carol = req_share(100);
    carol.share_key = 13;
    ts_alloc tmp;
    assert_false(ts_node_fits(n, &carol)); /* both GPUs hold another user's shares */
    assert_int_equal(ts_node_choose_gpus(n, &carol, &tmp), TS_ENOSPC);
    tmp = a1;
    tmp.gpu[0] = a1.gpu[0];
    assert_int_equal(ts_node_assign(n, &carol, &tmp), TS_ENOSPC); /* a forced choice too */
    assert_int_equal(ts_node_release(n, &b1), 0);
    assert_int_equal(n->gpu[b1.gpu[0]].share_key, 0);
    ts_alloc c1 = place(n, &carol); /* the emptied GPU is anyone's */
    assert_int_equal(c1.gpu[0], b1.gpu[0]);
    /* without the flag the same keys share a GPU */
    n->share_one_user = false;
    assert_true(ts_node_fits(n, &bob));
    ts_cluster_free(c);
}

static void test_share_best_fit(void **state)
{
    (void)state;
    ts_cluster *c = ts_cluster_new();
    add(c, "n", "G2", 4, 64000, 262144, TS_GPU_SHARED);
    ts_node *n = &c->nodes[0];
    /* load GPUs 0..2 with 500, 700, 500 used (GPU 3 free) by steering allocs */
    const int32_t used[3] = {500, 700, 500};
    for (int i = 0; i < 3; i++) {
        ts_request r = req_share(used[i]);
        ts_alloc a;
        assert_int_equal(ts_node_choose_gpus(n, &r, &a), 0);
        a.gpu[0] = (int8_t)i;
        assert_int_equal(ts_node_assign(n, &r, &a), 0);
    }
    assert_int_equal(n->milli_free, 500 + 300 + 500 + 1000);
    assert_int_equal(n->max_gpu_free, 1000);
    assert_int_equal(n->gpus_free, 1);
    ts_alloc a;
    ts_request r300 = req_share(300);
    assert_int_equal(ts_node_choose_gpus(n, &r300, &a), 0);
    assert_int_equal(a.gpu[0], 1); /* exactly 300 free there */
    ts_request r301 = req_share(301);
    assert_int_equal(ts_node_choose_gpus(n, &r301, &a), 0);
    assert_int_equal(a.gpu[0], 0); /* 500 free on 0 and 2: lowest index */
    ts_request r600 = req_share(600);
    assert_int_equal(ts_node_choose_gpus(n, &r600, &a), 0);
    assert_int_equal(a.gpu[0], 3);
    assert_int_equal(a.gpu_milli, 600);
    assert_int_equal(a.shape, TS_SHAPE_SHARE);
    /* fill GPU 3; now 600 fits nowhere although 1300 milli are free */
    ts_alloc a3 = place(n, &r600);
    assert_int_equal(a3.gpu[0], 3);
    assert_false(ts_node_fits(n, &r600));
    assert_int_equal(ts_node_choose_gpus(n, &r600, &a), TS_ENOSPC);
    assert_int_equal(n->max_gpu_free, 500);
    /* a hand-built alloc that overfills a GPU is refused without change */
    uint64_t v = n->version;
    ts_alloc bad;
    ts_request r500 = req_share(500);
    assert_int_equal(ts_node_choose_gpus(n, &r500, &bad), 0);
    bad.gpu[0] = 1;
    assert_int_equal(ts_node_assign(n, &r500, &bad), TS_ENOSPC);
    assert_int_equal(n->version, v);
    assert_int_equal(n->gpu[1].milli_used, 700);
    ts_cluster_free(c);
}

static void test_gpu_memory(void **state)
{
    (void)state;
    ts_cluster *c = ts_cluster_new();
    add(c, "v", "V100M16", 2, 64000, 262144, TS_GPU_SHARED); /* 16384 MiB per GPU */
    add(c, "g", "G1", 1, 64000, 262144, TS_GPU_SHARED);      /* undisclosed: unaccounted */
    ts_node *n = &c->nodes[0];
    ts_request r = req_share(200);
    r.gpu_mem_mib = 10000;
    ts_alloc a0 = place(n, &r);
    assert_int_equal(a0.gpu[0], 0);
    assert_int_equal(n->gpu[0].mem_used_mib, 10000);
    /* GPU 0 has the milli but not the memory: best fit moves to GPU 1 */
    ts_alloc a1 = place(n, &r);
    assert_int_equal(a1.gpu[0], 1);
    ts_request r7 = req_share(100);
    r7.gpu_mem_mib = 7000;
    ts_alloc a;
    assert_false(ts_node_fits(n, &r7));
    assert_int_equal(ts_node_choose_gpus(n, &r7, &a), TS_ENOSPC);
    r7.gpu_mem_mib = 6384; /* exactly what is left */
    ts_alloc a2 = place(n, &r7);
    assert_int_equal(a2.gpu[0], 0);
    assert_int_equal(n->gpu[0].mem_used_mib, 16384);
    /* assign itself refuses an alloc that would oversubscribe GPU memory */
    ts_alloc over;
    ts_request r1 = req_share(100);
    r1.gpu_mem_mib = 1;
    assert_int_equal(ts_node_choose_gpus(n, &r1, &over), 0);
    over.gpu[0] = 0;
    uint64_t v = n->version;
    assert_int_equal(ts_node_assign(n, &r1, &over), TS_ENOSPC);
    assert_int_equal(n->version, v);
    assert_int_equal(n->gpu[0].mem_used_mib, 16384);
    assert_int_equal(ts_node_release(n, &a2), 0);
    assert_int_equal(n->gpu[0].mem_used_mib, 10000);
    /* whole GPUs: memory beyond the model's is refused */
    assert_int_equal(ts_node_release(n, &a1), 0);
    ts_request w = req_whole(1);
    w.gpu_mem_mib = 16385;
    assert_false(ts_node_fits(n, &w));
    w.gpu_mem_mib = 16384;
    ts_alloc aw = place(n, &w);
    assert_int_equal(aw.gpu[0], 1);
    /* G1 discloses no memory, so any requirement is admitted */
    ts_request big = req_share(100);
    big.gpu_mem_mib = 1 << 20;
    assert_true(ts_node_fits(&c->nodes[1], &big));
    ts_cluster_free(c);
}

static void test_model_mask_and_host_limits(void **state)
{
    (void)state;
    ts_cluster *c = ts_cluster_new();
    add(c, "t4", "T4", 2, 4000, 8192, TS_GPU_SHARED);
    add(c, "cpu", NULL, 0, 4000, 8192, TS_GPU_WHOLE);
    ts_node *n = &c->nodes[0], *cpu = &c->nodes[1];
    int t4 = ts_gpu_model_lookup("T4"), v16 = ts_gpu_model_lookup("V100M16");
    assert_true(t4 >= 0 && v16 >= 0);
    ts_request r = req_share(100);
    r.model_mask = 1u << v16;
    assert_false(ts_node_fits(n, &r));
    ts_alloc a;
    assert_int_equal(ts_node_choose_gpus(n, &r, &a), TS_ENOSPC);
    r.model_mask |= 1u << t4;
    assert_true(ts_node_fits(n, &r));
    r.model_mask = 0;
    assert_true(ts_node_fits(n, &r));
    /* a GPU request never fits a CPU-only node; a CPU request ignores masks */
    assert_false(ts_node_fits(cpu, &r));
    ts_request rc = req_cpu(1000);
    rc.model_mask = 1u << v16;
    assert_true(ts_node_fits(cpu, &rc));

    /* CPU and memory capacity, to the unit */
    ts_request big = req_cpu(4001);
    assert_false(ts_node_fits(n, &big));
    big.cpu_milli = 4000;
    big.mem_mib = 8193;
    assert_false(ts_node_fits(n, &big));
    big.mem_mib = 8192;
    ts_alloc ab = place(n, &big);
    assert_int_equal(ab.ngpu, 0);
    assert_int_equal(n->cpu_used, 4000);
    assert_int_equal(n->mem_used, 8192);
    assert_int_equal(n->shape_tasks[TS_SHAPE_CPU], 1);
    ts_request one = req_cpu(1);
    assert_false(ts_node_fits(n, &one));
    ts_request nomem = req_cpu(0);
    nomem.mem_mib = 1;
    assert_false(ts_node_fits(n, &nomem));
    /* a stale alloc over capacity is refused and changes nothing */
    uint64_t v = n->version;
    ts_alloc stale = ab;
    assert_int_equal(ts_node_assign(n, &big, &stale), TS_ENOSPC);
    assert_int_equal(n->version, v);
    assert_int_equal(n->ntasks, 1);
    assert_int_equal(ts_node_release(n, &ab), 0);
    assert_int_equal(n->cpu_used, 0);
    assert_int_equal(n->mem_used, 0);
    assert_true(n->version > v);
    ts_cluster_free(c);
}

/* ---- sharing modes ------------------------------------------------------- */

static void test_modes(void **state)
{
    (void)state;
    ts_cluster *c = ts_cluster_new();
    add(c, "whole", "A10", 2, 64000, 262144, TS_GPU_WHOLE);
    add(c, "shared", "A10", 2, 64000, 262144, TS_GPU_SHARED);
    add(c, "mig", "A100-40GB", 2, 64000, 262144, TS_GPU_MIG);
    ts_node *wn = &c->nodes[0], *sn = &c->nodes[1], *mn = &c->nodes[2];
    ts_request sh = req_share(500), w1 = req_whole(1), w2 = req_whole(2);
    ts_request m1 = req_mig(TS_MIG_P_1G);
    ts_alloc a;

    /* WHOLE: shares never land; whole requests do */
    assert_false(ts_node_fits(wn, &sh));
    assert_int_equal(ts_node_choose_gpus(wn, &sh, &a), TS_ENOSPC);
    assert_int_equal(ts_node_choose_gpus(sn, &sh, &a), 0); /* a share alloc ... */
    assert_int_equal(ts_node_assign(wn, &sh, &a), TS_ENOSPC); /* ... refused on WHOLE */
    assert_int_equal(wn->ntasks, 0);
    ts_alloc aw = place(wn, &w2);
    assert_int_equal(aw.gpu[1], 1);
    assert_int_equal(wn->milli_free, 0);
    assert_int_equal(ts_node_release(wn, &aw), 0);
    assert_false(ts_node_fits(wn, &m1));

    /* SHARED: a whole request takes only a completely free GPU */
    ts_alloc as = place(sn, &sh);
    assert_int_equal(as.gpu[0], 0);
    assert_false(ts_node_fits(sn, &w2));
    assert_int_equal(ts_node_choose_gpus(sn, &w2, &a), TS_ENOSPC);
    ts_alloc a1 = place(sn, &w1);
    assert_int_equal(a1.gpu[0], 1);
    assert_false(ts_node_fits(sn, &m1));
    ts_request sh2 = req_share(500);
    ts_alloc as2 = place(sn, &sh2); /* fills GPU 0 exactly */
    assert_int_equal(as2.gpu[0], 0);
    assert_int_equal(sn->milli_free, 0);

    /* MIG: no shares, no whole GPUs, even while every GPU is free */
    assert_int_equal(mn->gpus_free, 2);
    assert_int_equal(mn->milli_free, 0);
    assert_int_equal(mn->max_gpu_free, 0);
    assert_false(ts_node_fits(mn, &sh));
    assert_false(ts_node_fits(mn, &w1));
    assert_int_equal(ts_node_choose_gpus(mn, &w1, &a), TS_ENOSPC);
    assert_int_equal(ts_node_choose_gpus(wn, &w1, &a), 0);
    assert_int_equal(ts_node_assign(mn, &w1, &a), TS_ENOSPC);
    assert_true(ts_node_fits(mn, &m1));
    /* MIG requests need MIG mode even on a MIG capable model */
    ts_cluster *c2 = ts_cluster_new();
    add(c2, "a100", "A100-40GB", 1, 64000, 262144, TS_GPU_SHARED);
    assert_false(ts_node_fits(&c2->nodes[0], &m1));
    assert_int_equal(ts_node_choose_gpus(&c2->nodes[0], &m1, &a), TS_ENOSPC);
    ts_cluster_free(c2);
    ts_cluster_free(c);
}

/* ---- MIG ----------------------------------------------------------------- */

static void test_mig_reuse_create_release(void **state)
{
    (void)state;
    int geo = ts_mig_geometry_of("A100-40GB");
    ts_mig_layout per[2] = {{.n = 1, .inst = {{TS_MIG_P_3G, 0, 0}}}, {.n = 0}};
    ts_node_spec s = {.name = "m", .gpu_model = "A100-40GB", .ngpu = 2, .cpu_milli = 64000,
                      .mem_mib = 262144, .gpu_mode = TS_GPU_MIG, .per_gpu_mig = per};
    ts_cluster *c = ts_cluster_new();
    ts_err err = {0};
    assert_int_equal(ts_cluster_add_node(c, &s, &err), 0);
    ts_node *n = &c->nodes[0];

    /* an idle 3g exists on GPU 0: reused, not created */
    ts_request r3 = req_mig(TS_MIG_P_3G);
    ts_alloc a3 = place(n, &r3);
    assert_int_equal(a3.gpu[0], 0);
    assert_int_equal(a3.mig_start, 0);
    assert_int_equal(a3.mig_created, 0);
    assert_int_equal(a3.shape, TS_SHAPE_MIG);
    assert_int_equal(n->gpu[0].mig.n, 1);
    assert_int_equal(n->gpu[0].mig.inst[0].busy, 1);
    assert_int_equal(n->gpus_free, 1);
    assert_int_equal(n->shape_tasks[TS_SHAPE_MIG], 1);

    /* no idle 1g: one is created, on the GPU already carved (GPU 0), at the
     * start best_start picks */
    ts_request r1 = req_mig(TS_MIG_P_1G);
    ts_alloc a1;
    assert_int_equal(ts_node_choose_gpus(n, &r1, &a1), 0);
    assert_int_equal(a1.gpu[0], 0);
    assert_int_equal(a1.mig_created, 1);
    assert_int_equal(a1.mig_start, ts_mig_best_start(geo, &n->gpu[0].mig, TS_MIG_P_1G));
    assert_true(a1.mig_start >= 4);
    ts_mig_layout before = n->gpu[0].mig;
    assert_int_equal(ts_node_assign(n, &r1, &a1), 0);
    assert_int_equal(n->gpu[0].mig.n, 2);
    assert_int_equal(n->gpu[0].ntasks, 2);
    assert_int_equal(ts_mig_layout_validate(geo, &n->gpu[0].mig, NULL), 0);

    /* 7g needs an empty GPU: GPU 1; a second one fits nowhere */
    ts_request r7 = req_mig(TS_MIG_P_7G);
    ts_alloc a7 = place(n, &r7);
    assert_int_equal(a7.gpu[0], 1);
    assert_int_equal(a7.mig_start, 0);
    assert_int_equal(a7.mig_created, 1);
    assert_int_equal(n->gpus_free, 0);
    assert_false(ts_node_fits(n, &r7));
    ts_alloc tmp;
    assert_int_equal(ts_node_choose_gpus(n, &r7, &tmp), TS_ENOSPC);

    /* releasing a created instance removes it; a reused one stays, idle */
    assert_int_equal(ts_node_release(n, &a1), 0);
    assert_int_equal(n->gpu[0].mig.n, before.n);
    assert_int_equal(n->gpu[0].mig.inst[0].profile_id, TS_MIG_P_3G);
    assert_int_equal(n->gpu[0].mig.inst[0].busy, 1);
    assert_int_equal(ts_node_release(n, &a3), 0);
    assert_int_equal(n->gpu[0].mig.n, 1);
    assert_int_equal(n->gpu[0].mig.inst[0].busy, 0);
    assert_int_equal(ts_node_release(n, &a7), 0);
    assert_int_equal(n->gpu[1].mig.n, 0);
    assert_int_equal(n->gpus_free, 2);
    assert_int_equal(n->ntasks, 0);
    assert_int_equal(n->shape_tasks[TS_SHAPE_MIG], 0);
    /* releasing again finds no busy instance */
    assert_int_equal(ts_node_release(n, &a3), TS_ENOENT);
    /* the idle 3g is reused again, now that it is free */
    ts_alloc again = place(n, &r3);
    assert_int_equal(again.mig_created, 0);
    ts_cluster_free(c);
}

/* ---- randomized invariants ------------------------------------------------ */

#define RANDOM_STEPS 20000
#define RANDOM_SEED 20240611u
#define LIVE_MAX 512

typedef struct live {
    ts_alloc a;
    ts_request r;
} live;

static ts_request random_request(ts_rng *g)
{
    static const int mig_profiles[] = {TS_MIG_P_1G, TS_MIG_P_1G_ME, TS_MIG_P_1G_2X,
                                       TS_MIG_P_2G, TS_MIG_P_3G,    TS_MIG_P_4G,
                                       TS_MIG_P_7G};
    ts_request r = req_cpu((int64_t)ts_rng_below(g, 8000));
    r.mem_mib = (int64_t)ts_rng_below(g, 16384);
    switch (ts_rng_below(g, 4)) {
    case 0: /* CPU only */
        break;
    case 1:
        r.num_gpu = 1;
        r.gpu_milli = 1 + (int32_t)ts_rng_below(g, TS_MILLI_PER_GPU - 1);
        r.gpu_mem_mib = ts_rng_below(g, 2) ? (int64_t)ts_rng_below(g, 12000) : 0;
        break;
    case 2:
        r.num_gpu = 1 + (int32_t)ts_rng_below(g, 4);
        r.gpu_milli = TS_MILLI_PER_GPU;
        r.gpu_mem_mib = ts_rng_below(g, 4) == 0 ? (int64_t)ts_rng_below(g, 20000) : 0;
        break;
    default:
        r.num_gpu = 1;
        r.mig_profile = mig_profiles[ts_rng_below(g, 7)];
        break;
    }
    if (ts_rng_below(g, 8) == 0)
        r.model_mask = 1u << ts_rng_below(g, (uint64_t)ts_gpu_model_count());
    return r;
}

/* Recomputes every aggregate of node ni from its GPUs and the live allocs. */
static void check_node(const ts_cluster *c, int ni, const live *lv, int nlive)
{
    const ts_node *n = &c->nodes[ni];
    int64_t cpu = 0, mem = 0;
    int ntasks = 0;
    int32_t shapes[TS_SHAPES] = {0};
    int32_t milli[TS_NODE_MAX_GPUS] = {0}, gtasks[TS_NODE_MAX_GPUS] = {0};
    int64_t gmem[TS_NODE_MAX_GPUS] = {0};
    for (int k = 0; k < nlive; k++) {
        const ts_alloc *a = &lv[k].a;
        if (a->node != ni)
            continue;
        cpu += a->cpu_milli;
        mem += a->mem_mib;
        ntasks++;
        shapes[a->shape]++;
        for (int j = 0; j < a->ngpu; j++) {
            milli[a->gpu[j]] += a->gpu_milli;
            gmem[a->gpu[j]] += a->gpu_mem_mib;
            gtasks[a->gpu[j]]++;
        }
    }
    assert_int_equal(n->cpu_used, cpu);
    assert_int_equal(n->mem_used, mem);
    assert_true(cpu <= n->cpu_milli && mem <= n->mem_mib);
    assert_int_equal(n->ntasks, ntasks);
    assert_memory_equal(n->shape_tasks, shapes, sizeof shapes);
    int gpus_free = 0;
    int32_t milli_free = 0, max_free = 0;
    int64_t cap = ts_gpu_model_get(n->model) ? ts_gpu_model_get(n->model)->mem_mib : 0;
    for (int i = 0; i < n->ngpu; i++) {
        const ts_gpu *g = &n->gpu[i];
        assert_int_equal(g->ntasks, gtasks[i]);
        if (g->ntasks == 0)
            gpus_free++;
        if (g->mode == TS_GPU_MIG) {
            int busy = 0;
            for (int k = 0; k < g->mig.n; k++)
                busy += g->mig.inst[k].busy;
            assert_int_equal(busy, g->ntasks);
            assert_int_equal(g->milli_used, 0);
            const ts_gpu_model_info *m = ts_gpu_model_get(n->model);
            assert_int_equal(ts_mig_layout_validate(m->mig_geometry, &g->mig, NULL), 0);
            continue;
        }
        assert_int_equal(g->milli_used, milli[i]);
        assert_int_equal(g->mem_used_mib, gmem[i]);
        assert_true(g->milli_used >= 0 && g->milli_used <= TS_MILLI_PER_GPU);
        if (cap)
            assert_true(g->mem_used_mib <= cap);
        if (g->mode == TS_GPU_WHOLE)
            assert_true(g->milli_used == 0 || (g->milli_used == 1000 && g->ntasks == 1));
        int32_t f = TS_MILLI_PER_GPU - g->milli_used;
        milli_free += f;
        if (f > max_free)
            max_free = f;
    }
    assert_int_equal(n->gpus_free, gpus_free);
    assert_int_equal(n->milli_free, milli_free);
    assert_int_equal(n->max_gpu_free, max_free);
}

static void test_random_invariants(void **state)
{
    (void)state;
    ts_cluster *c = ts_cluster_new();
    add(c, "v100", "V100M16", 4, 32000, 65536, TS_GPU_SHARED);
    add(c, "t4", "T4", 2, 16000, 32768, TS_GPU_WHOLE);
    add(c, "g2", "G2", 8, 64000, 131072, TS_GPU_SHARED);
    add(c, "cpu", NULL, 0, 16000, 32768, TS_GPU_WHOLE);
    ts_mig_layout pre = {.n = 3, .inst = {{TS_MIG_P_3G, 0, 0}, {TS_MIG_P_2G, 4, 0},
                                          {TS_MIG_P_1G, 6, 0}}};
    ts_mig_layout per[2] = {pre, {.n = 0}};
    ts_node_spec ms = {.name = "mig", .gpu_model = "A100-80GB", .ngpu = 2, .cpu_milli = 32000,
                       .mem_mib = 65536, .gpu_mode = TS_GPU_MIG, .per_gpu_mig = per};
    assert_int_equal(ts_cluster_add_node(c, &ms, NULL), 4);
    ts_cluster *empty = ts_cluster_clone(c);
    assert_non_null(empty);

    static live lv[LIVE_MAX];
    int nlive = 0, placed = 0, refused = 0, released = 0;
    ts_rng g;
    ts_rng_seed(&g, RANDOM_SEED);
    for (int step = 0; step < RANDOM_STEPS; step++) {
        bool do_assign = nlive == 0 || (nlive < LIVE_MAX && ts_rng_below(&g, 100) < 55);
        if (do_assign) {
            ts_request r = random_request(&g);
            assert_int_equal(ts_request_check(&r, NULL), 0);
            int ni = (int)ts_rng_below(&g, (uint64_t)c->nnodes);
            ts_node *n = &c->nodes[ni];
            ts_alloc a;
            bool fits = ts_node_fits(n, &r);
            int rc = ts_node_choose_gpus(n, &r, &a);
            if (fits != (rc == 0))
                fail_msg("step %d node %s: fits=%d but choose=%d (shape %d)", step, n->name,
                         fits, rc, ts_request_shape(&r));
            if (rc != 0) {
                assert_int_equal(rc, TS_ENOSPC);
                refused++;
                continue;
            }
            a.node = ni;
            uint64_t v = n->version;
            assert_int_equal(ts_node_assign(n, &r, &a), 0);
            assert_true(n->version > v);
            lv[nlive++] = (live){a, r};
            placed++;
        } else {
            int k = (int)ts_rng_below(&g, (uint64_t)nlive);
            ts_node *n = &c->nodes[lv[k].a.node];
            uint64_t v = n->version;
            assert_int_equal(ts_node_release(n, &lv[k].a), 0);
            assert_true(n->version > v);
            lv[k] = lv[--nlive];
            released++;
        }
        for (int i = 0; i < c->nnodes; i++)
            check_node(c, i, lv, nlive);
    }
    /* the walk must have exercised both outcomes of every kind of step */
    assert_true(placed > 2000 && refused > 500 && released > 2000);
    while (nlive > 0) {
        int k = (int)ts_rng_below(&g, (uint64_t)nlive);
        assert_int_equal(ts_node_release(&c->nodes[lv[k].a.node], &lv[k].a), 0);
        lv[k] = lv[--nlive];
    }
    for (int i = 0; i < c->nnodes; i++) {
        ts_node *n = &c->nodes[i], *e = &empty->nodes[i];
        check_node(c, i, lv, 0);
        assert_int_equal(n->gpus_free, n->ngpu);
        assert_int_equal(n->milli_free, e->milli_free);
        assert_int_equal(n->max_gpu_free, e->max_gpu_free);
        for (int j = 0; j < n->ngpu; j++) {
            assert_int_equal(n->gpu[j].mem_used_mib, 0);
            /* MIG: created instances gone; pre-existing ones kept (order may differ) */
            assert_int_equal(n->gpu[j].mig.n, e->gpu[j].mig.n);
            const ts_mig_layout *got = &n->gpu[j].mig, *want = &e->gpu[j].mig;
            for (int k = 0; k < got->n; k++) {
                int found = 0;
                for (int m = 0; m < want->n; m++)
                    found += got->inst[k].profile_id == want->inst[m].profile_id &&
                             got->inst[k].start == want->inst[m].start;
                assert_int_equal(found, 1);
                assert_int_equal(got->inst[k].busy, 0);
            }
        }
    }
    ts_cluster_free(empty);
    ts_cluster_free(c);
}

/* ---- cluster copy and reset ----------------------------------------------- */

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    static char buf[1 << 16];
    *len = fread(buf, 1, sizeof buf, f);
    fclose(f);
    return buf;
}

static void test_clone_deep(void **state)
{
    (void)state;
    size_t len;
    char *buf = slurp(TS_TEST_DATA "/cluster-small.yaml", &len);
    ts_cluster *c = NULL;
    ts_err err = {0};
    if (ts_load_cluster_yaml(buf, len, "cluster-small.yaml", &c, &err) != 0)
        fail_msg("%s", err.msg);
    ts_cluster *d = ts_cluster_clone(c);
    assert_non_null(d);
    assert_ptr_not_equal(d->nodes, c->nodes);
    assert_non_null(c->topo);
    assert_non_null(d->topo);
    assert_ptr_not_equal(d->topo, c->topo);
    assert_int_equal(ts_topo_nvertices(d->topo), ts_topo_nvertices(c->topo));
    assert_int_equal(d->nnodes, c->nnodes);
    assert_int_equal(d->total_gpus, c->total_gpus);
    assert_memory_equal(d->nodes, c->nodes, (size_t)c->nnodes * sizeof *c->nodes);

    /* changes to the copy stay in the copy, both ways */
    ts_request w = req_whole(1);
    int ni = -1;
    for (int i = 0; i < d->nnodes && ni < 0; i++)
        if (ts_node_fits(&d->nodes[i], &w))
            ni = i;
    assert_true(ni >= 0);
    ts_node snapshot = c->nodes[ni];
    place(&d->nodes[ni], &w);
    assert_memory_equal(&c->nodes[ni], &snapshot, sizeof snapshot);
    assert_int_equal(d->nodes[ni].ntasks, 1);
    int before = c->nnodes;
    ts_node_spec s = {.name = "extra", .gpu_model = "T4", .ngpu = 1, .cpu_milli = 1,
                      .mem_mib = 1, .gpu_mode = TS_GPU_SHARED};
    assert_true(ts_cluster_add_node(d, &s, NULL) >= 0);
    assert_int_equal(c->nnodes, before);
    assert_int_equal(ts_cluster_find_node(c, "extra"), -1);
    ts_cluster_free(c); /* the copy outlives its source (ASan would see a use) */
    assert_true(ts_topo_nvertices(d->topo) > 0);

    /* reset empties every node */
    ts_cluster_reset(d);
    assert_int_equal(d->nodes[ni].ntasks, 0);
    assert_int_equal(d->nodes[ni].gpus_free, d->nodes[ni].ngpu);
    ts_cluster_free(d);

    /* a cluster without a topology clones to one without */
    ts_cluster *e = ts_cluster_new();
    ts_cluster *f = ts_cluster_clone(e);
    assert_non_null(f);
    assert_null(f->topo);
    assert_int_equal(f->nnodes, 0);
    ts_cluster_free(e);
    ts_cluster_free(f);
}

/* ---- request validation ---------------------------------------------------- */

static void test_request_check(void **state)
{
    (void)state;
    ts_err err = {0};
    ts_request ok[] = {req_cpu(0), req_share(1), req_share(999), req_whole(1),
                       req_whole(TS_NODE_MAX_GPUS), req_mig(TS_MIG_P_1G)};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        assert_int_equal(ts_request_check(&ok[i], &err), 0);
    struct {
        ts_request r;
        const char *field;
    } bad[] = {
        {{.cpu_milli = -1, .mig_profile = -1}, "cpu_milli"},
        {{.mem_mib = -1, .mig_profile = -1}, "memory_mib"},
        {{.gpu_mem_mib = -1, .num_gpu = 1, .gpu_milli = 500, .mig_profile = -1},
         "gpu_memory_mib"},
        {{.num_gpu = -1, .mig_profile = -1}, "num_gpu"},
        {{.num_gpu = TS_NODE_MAX_GPUS + 1, .gpu_milli = 1000, .mig_profile = -1}, "num_gpu"},
        {{.num_gpu = 0, .gpu_milli = 500, .mig_profile = -1}, "gpu_milli"},
        {{.num_gpu = 1, .gpu_milli = 0, .mig_profile = -1}, "gpu_milli"},
        {{.num_gpu = 1, .gpu_milli = 1001, .mig_profile = -1}, "gpu_milli"},
        {{.num_gpu = 2, .gpu_milli = 500, .mig_profile = -1}, "gpu_milli"},
        {{.num_gpu = 2, .mig_profile = TS_MIG_P_1G}, "num_gpu"},
        {{.num_gpu = 1, .gpu_milli = 500, .mig_profile = TS_MIG_P_1G}, "gpu_milli"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err.msg[0] = '\0';
        int rc = ts_request_check(&bad[i].r, &err);
        if (rc != TS_EINVAL || strncmp(err.msg, bad[i].field, strlen(bad[i].field)) != 0)
            fail_msg("case %zu: rc %d, message \"%s\", expected it to start with \"%s\"", i,
                     rc, err.msg, bad[i].field);
    }
    assert_int_equal(ts_request_check(&bad[0].r, NULL), TS_EINVAL);
}

/* What explanations print: local ISO times, durations, GPUs (fmt.h). */
static void test_fmt(void **state)
{
    (void)state;
    char b[64];
    setenv("TZ", "UTC", 1);
    tzset();
    ts_fmt_time(1796330654.0, b, sizeof b);
    assert_string_equal(b, "2026-12-03 20:44:14");
    ts_fmt_time(1000.0, b, sizeof b); /* a simulation's clock */
    assert_string_equal(b, "t=1000s");
    ts_fmt_duration(12 * 60 + 10, b, sizeof b);
    assert_string_equal(b, "12 min");
    ts_fmt_duration(45.4, b, sizeof b);
    assert_string_equal(b, "45 s");
    ts_fmt_duration(3 * 3600 + 5 * 60, b, sizeof b);
    assert_string_equal(b, "3 h 05 min");
    ts_fmt_duration(2 * 86400 + 4 * 3600, b, sizeof b);
    assert_string_equal(b, "2 d 04 h");
    ts_fmt_duration(-5, b, sizeof b);
    assert_string_equal(b, "0 s");
    ts_fmt_gpus(992750, b, sizeof b);
    assert_string_equal(b, "992.75 GPUs");
    ts_fmt_gpus(1000, b, sizeof b);
    assert_string_equal(b, "1 GPU");
    ts_fmt_gpus(250, b, sizeof b);
    assert_string_equal(b, "0.25 GPUs");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_add_node_errors),
        cmocka_unit_test(test_whole_lowest_index),
        cmocka_unit_test(test_share_one_user_per_gpu),
        cmocka_unit_test(test_share_best_fit),
        cmocka_unit_test(test_gpu_memory),
        cmocka_unit_test(test_model_mask_and_host_limits),
        cmocka_unit_test(test_modes),
        cmocka_unit_test(test_mig_reuse_create_release),
        cmocka_unit_test(test_random_invariants),
        cmocka_unit_test(test_clone_deep),
        cmocka_unit_test(test_request_check),
        cmocka_unit_test(test_fmt),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
