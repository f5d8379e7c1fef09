/*
 * sched_world.h - the scheduler tests' common set-up: a cluster and tenants
 * read from YAML, their quota (a one-hour usage window), a scheduler on
 * them and a decision to plan into; and their teardown, in reverse. Each
 * test keeps its own fixture and names these fields in it.
 */
#ifndef TESTS_SCHED_WORLD_H
#define TESTS_SCHED_WORLD_H

#include <string.h>

#include "test_util.h"
#include "tessera/cycle.h"
#include "tessera/load.h"
#include "tessera/tenant_load.h"

/* *c (from cluster_yaml, or left as the caller made it when cluster_yaml is
 * NULL), *ts, *q and *s; d initialised. 0, or -1 with what was made kept
 * for sched_world_close. */
static inline int sched_world_open(const char *cluster_yaml, const char *tenants_yaml,
                                   const ts_sched_config *cfg, ts_cluster **c, ts_tenants **ts,
                                   ts_quota **q, ts_sched **s, ts_decision *d)
{
    ts_err err;
    ts_decision_init(d);
    if (cluster_yaml &&
        ts_load_cluster_yaml(cluster_yaml, strlen(cluster_yaml), "c.yaml", c, &err) != 0)
        return -1;
    if (ts_load_tenants_yaml(tenants_yaml, strlen(tenants_yaml), "t.yaml", ts, &err) != 0 ||
        ts_quota_new(*ts, 3600.0, q, &err) != 0 || ts_sched_new(*c, *q, cfg, s, &err) != 0)
        return -1;
    return 0;
}

static inline void sched_world_close(ts_cluster *c, ts_tenants *ts, ts_quota *q, ts_sched *s,
                                     ts_decision *d)
{
    ts_decision_fini(d);
    ts_sched_free(s);
    ts_quota_free(q);
    ts_tenants_free(ts);
    ts_cluster_free(c);
}

/* j: the n-th job of a test, guaranteed, of tenant, submitted at n s with a
 * time limit of limit_s, of ntasks tasks of k whole GPUs (one CPU and 1 GiB
 * each) written to tasks, at any level of the topology. */
static inline void sched_world_job(ts_job *j, int n, int tenant, ts_request *tasks, int ntasks,
                                   int k, double limit_s)
{
    memset(j, 0, sizeof *j);
    j->id = 100 + n;
    j->tenant = tenant;
    j->tier = TS_TIER_GUARANTEED;
    j->time_limit_s = limit_s;
    j->ckpt_grace_s = -1.0;
    j->submit_s = n;
    j->tasks = tasks;
    j->ntasks = ntasks;
    j->required_level = j->preferred_level = TS_GANG_LEVEL_ANY;
    for (int t = 0; t < ntasks; t++)
        tasks[t] = (ts_request){.cpu_milli = 1000, .mem_mib = 1024, .num_gpu = k,
                                .gpu_milli = TS_MILLI_PER_GPU, .mig_profile = -1};
}

/* Fills a as the allocation of task t on node's GPUs from first_gpu on
 * (ts_test_alloc with consecutive GPUs). */
static inline void sched_world_alloc(ts_alloc *a, const ts_request *t, int node, int first_gpu)
{
    int gpus[TS_NODE_MAX_GPUS];
    for (int g = 0; g < t->num_gpu && g < TS_NODE_MAX_GPUS; g++)
        gpus[g] = first_gpu + g;
    *a = ts_test_alloc(t, node, gpus, t->num_gpu);
}

/* Starts the one-task job j at start_s on node's GPUs from first_gpu on,
 * its allocation written to a; ts_sched_start's result. */
static inline int sched_world_start(ts_sched *s, ts_job *j, ts_alloc *a, int node,
                                     int first_gpu, double start_s)
{
    sched_world_alloc(a, &j->tasks[0], node, first_gpu);
    j->allocs = a;
    j->start_s = j->last_ckpt_s = start_s;
    ts_err err;
    return ts_sched_start(s, j, start_s, &err);
}

#endif
