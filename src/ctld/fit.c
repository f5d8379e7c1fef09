/*
 * fit.c - a job that could never run is refused at submission
 * (docs/job-spec.md "Requests that can never fit").
 *
 * The cluster's capacity is every node cluster.yaml declares, whatever its
 * state now: a drained node, or one whose agent is down, still counts, as
 * it may come back. For each task group the nodes a task could ever land on
 * are filtered one requirement at a time (GPU model or MIG profile, GPUs
 * per task, GPU memory, CPU, memory); the first requirement that leaves no
 * node names the field, with the largest the cluster offers. Then the tasks
 * the whole cluster could hold at once (each node empty) must reach the
 * group's count, on one node with topology.required: node. Last, the
 * tenant's ceiling: guaranteed work above the guarantee of the tenant or an
 * ancestor, or any work above guarantee plus borrowing limit where that
 * limit is set, can never be admitted. Only the provably impossible is
 * refused: what merely does not fit now waits as before.
 */
#include <stdio.h>
#include <string.h>

#include "ctld/ctld.h"
#include "tessera/gang.h"
#include "tessera/mig.h"

/* The filters, in the order their fields are reported. */
enum { F_MODEL, F_GPUS, F_GPU_MEM, F_CPU, F_MEM, F_N };

static bool model_ok(const ts_request *r, int m)
{
    if (r->num_gpu < 1 && r->mig_profile < 0)
        return true;
    if (m < 0 || (r->model_mask && !(r->model_mask >> m & 1)))
        return false;
    return r->mig_profile < 0 ||
           ts_mig_profile_get(ts_gpu_model_get(m)->mig_geometry, r->mig_profile) != NULL;
}

/* The GPUs of node n a task of r may use, by their sharing mode (model.h):
 * MIG instances only on MIG GPUs, shares only on shared ones, whole GPUs on
 * any but MIG GPUs. */
static int usable_gpus(const ts_node *n, const ts_request *r)
{
    int k = 0;
    for (int g = 0; g < n->ngpu; g++) {
        int mode = n->gpu[g].mode;
        k += r->mig_profile >= 0                                   ? mode == TS_GPU_MIG
             : r->num_gpu > 0 && r->gpu_milli < TS_MILLI_PER_GPU ? mode == TS_GPU_SHARED
                                                                  : mode != TS_GPU_MIG;
    }
    return k;
}

/* Whether node passes filter f for r. */
static bool passes(const ts_node *n, const ts_request *r, int f)
{
    bool gpu = r->num_gpu > 0 && r->mig_profile < 0;
    int64_t gmem = n->model >= 0 ? ts_gpu_model_get(n->model)->mem_mib : 0;
    switch (f) {
    case F_MODEL:
        return model_ok(r, n->model) && (r->num_gpu < 1 || usable_gpus(n, r) > 0);
    case F_GPUS:
        return !gpu || usable_gpus(n, r) >= r->num_gpu;
    case F_GPU_MEM:
        return !gpu || r->gpu_mem_mib <= 0 || gmem <= 0 || gmem >= r->gpu_mem_mib;
    case F_CPU:
        return n->cpu_milli >= r->cpu_milli;
    default:
        return n->mem_mib >= r->mem_mib;
    }
}

static int64_t per_node(const ts_node *n, const ts_request *r)
{
    for (int f = 0; f < F_N; f++)
        if (!passes(n, r, f))
            return 0;
    int64_t k = INT64_MAX;
    if (r->cpu_milli > 0)
        k = n->cpu_milli / r->cpu_milli;
    if (r->mem_mib > 0 && n->mem_mib / r->mem_mib < k)
        k = n->mem_mib / r->mem_mib;
    int64_t g = INT64_MAX;
    if (r->mig_profile >= 0) {
        g = (int64_t)usable_gpus(n, r) *
            ts_mig_profile_get(ts_gpu_model_get(n->model)->mig_geometry, r->mig_profile)->max_count;
    } else if (r->num_gpu > 0 && r->gpu_milli < TS_MILLI_PER_GPU) {
        int64_t each = TS_MILLI_PER_GPU / r->gpu_milli;
        int64_t gmem = ts_gpu_model_get(n->model)->mem_mib;
        if (r->gpu_mem_mib > 0 && gmem > 0 && gmem / r->gpu_mem_mib < each)
            each = gmem / r->gpu_mem_mib;
        g = usable_gpus(n, r) * each;
    } else if (r->num_gpu > 0) {
        g = usable_gpus(n, r) / r->num_gpu;
    }
    return g < k ? g : k;
}

static const char *FIELD[F_N] = {"gpu_model", "gpus", "gpu_memory_mib", "cpu_milli",
                                 "memory_mib"};

/* No node passes every filter: names the first filter that leaves none. */
static int shape_error(const ts_cluster *cl, const ts_request *r, int g, ts_err *err)
{
    int64_t best = -1;
    int f = 0;
    for (; f < F_N; f++) {
        bool any = false;
        best = -1;
        for (int i = 0; i < cl->nnodes; i++) {
            const ts_node *n = &cl->nodes[i];
            bool before = true;
            for (int p = 0; p < f && before; p++)
                before = passes(n, r, p);
            if (!before)
                continue;
            int64_t gmem = n->model >= 0 ? ts_gpu_model_get(n->model)->mem_mib : 0;
            int64_t have = f == F_GPUS ? usable_gpus(n, r) : f == F_GPU_MEM ? gmem
                           : f == F_CPU ? n->cpu_milli : n->mem_mib;
            best = have > best ? have : best;
            any = any || passes(n, r, f);
        }
        if (!any)
            break;
    }
    if (f == F_MODEL) {
        char have[256] = "";
        uint32_t seen = 0;
        for (int i = 0; i < cl->nnodes; i++) {
            int m = cl->nodes[i].model;
            if (m < 0 || (seen >> m & 1))
                continue;
            seen |= UINT32_C(1) << m;
            size_t l = strlen(have);
            snprintf(have + l, sizeof have - l, "%s%s", l ? ", " : "", ts_gpu_model_get(m)->name);
        }
        const char *what = r->mig_profile >= 0 ? "offers this MIG profile in MIG mode"
                           : r->gpu_milli < TS_MILLI_PER_GPU ? "of that model is shared by fractions"
                                                             : "is of that model";
        return ts_err_set(err, TS_EINVAL, "tasks[%d].%s: no GPU of the cluster %s (it has %s)", g,
                          r->mig_profile >= 0 ? "mig_profile" : "gpu_model", what,
                          have[0] ? have : "no GPUs");
    }
    static const char *unit[F_N] = {"", " GPUs", " MiB of GPU memory", " milli-CPUs",
                                    " MiB of memory"};
    int64_t asked = f == F_GPUS ? r->num_gpu : f == F_GPU_MEM ? r->gpu_mem_mib
                    : f == F_CPU ? r->cpu_milli : r->mem_mib;
    return ts_err_set(err, TS_EINVAL, "tasks[%d].%s: %lld%s per task asked, the largest the "
                      "cluster has for it is %lld%s (all of a task is on one node)", g, FIELD[f],
                      (long long)asked, unit[f], (long long)best, unit[f]);
}

/* "1000 tasks of 1 GPU of H100-80GB" into buf. */
static void describe(const ts_request *r, int count, char *buf, size_t size)
{
    char model[64] = " of any model";
    for (int m = 0; r->model_mask && m < ts_gpu_model_count(); m++)
        if (r->model_mask >> m & 1)
            snprintf(model, sizeof model, " of %s", ts_gpu_model_get(m)->name);
    if (r->mig_profile >= 0)
        snprintf(buf, size, "%d tasks of one MIG instance", count);
    else if (r->num_gpu > 0 && r->gpu_milli < TS_MILLI_PER_GPU)
        snprintf(buf, size, "%d tasks of %.3g GPU%s", count, r->gpu_milli / 1000.0, model);
    else if (r->num_gpu > 0)
        snprintf(buf, size, "%d tasks of %d GPU%s%s (%lld GPUs)", count, r->num_gpu,
                 r->num_gpu > 1 ? "s" : "", model, (long long)count * r->num_gpu);
    else
        snprintf(buf, size, "%d tasks without GPUs", count);
}

static int cluster_check(const ctld *c, const ts_job_spec *sp, const ts_request *tasks, ts_err *err,
                         bool one_node)
{
    const ts_cluster *cl = c->cluster;
    for (int g = 0, k = 0; g < sp->ntasks; k += sp->tasks[g].count, g++) {
        const ts_request *r = &tasks[k];
        int count = sp->tasks[g].count;
        int64_t total = 0, most = 0;
        for (int i = 0; i < cl->nnodes; i++) {
            int64_t n = per_node(&cl->nodes[i], r);
            most = n > most ? n : most;
            total = total > INT64_MAX - n ? INT64_MAX : total + n;
        }
        if (most == 0)
            return shape_error(cl, r, g, err);
        char what[128];
        describe(r, count, what, sizeof what);
        if (one_node && most < count)
            return ts_err_set(err, TS_EINVAL, "tasks[%d].count: %s asked on one node "
                              "(topology.required: node), the largest node holds %lld", g, what,
                              (long long)most);
        if (total < count)
            return ts_err_set(err, TS_EINVAL, "tasks[%d].count: %s asked, the cluster holds "
                              "%lld such tasks; at most %lld can ever run", g, what,
                              (long long)total, (long long)total);
    }
    return 0;
}

/* The tenant's ceiling in dimension k for tier: the least, over the tenant
 * and its ancestors, of the guarantee (guaranteed work) or the guarantee
 * plus a set borrowing limit; INT64_MAX when none bounds it. */
static int64_t ceiling(const ts_tenants *ts, int t, int tier, int k, int *who)
{
    int64_t best = INT64_MAX;
    for (int a = t; a >= 0; a = ts->t[a].parent) {
        const ts_tenant *x = &ts->t[a];
        int64_t cap = tier == TS_TIER_GUARANTEED                 ? x->guaranteed[k]
                      : x->borrow_limit[k] == TS_QUOTA_UNLIMITED ? INT64_MAX
                                                                 : x->guaranteed[k] +
                                                                       x->borrow_limit[k];
        if (cap < best) {
            best = cap;
            *who = a;
        }
    }
    return best;
}

/* What the organisations guarantee in all in dimension k; 0: nobody is
 * guaranteed anything there and admission does not manage it. No work
 * takes more: capacity that is nobody's guarantee is not lent (tenant.h). */
static int64_t guaranteed_all(const ts_tenants *ts, int k)
{
    int64_t sum = 0;
    for (int i = 0; i < ts->n; i++)
        if (ts->t[i].parent < 0)
            sum += ts->t[i].guaranteed[k];
    return sum;
}

/* For GPU model m (-1: CPU-only job): 0 if the job's demand fits the
 * tenant's ceilings, else TS_EINVAL with err naming the limit. */
static int tenant_check_model(const ctld *c, const cjob *j, int m, ts_err *err)
{
    int64_t sum[TS_RES_DIMS] = {0}, d[TS_RES_DIMS];
    for (int i = 0; i < j->ntasks; i++) {
        ts_err e;
        if (ts_quota_demand(&j->tasks[i], m, d, &e) != 0)
            return 0; /* not for this model: the placement decides */
        for (int k = 0; k < TS_RES_DIMS; k++)
            sum[k] += d[k];
    }
    const ts_tenants *ts = c->tenants;
    for (int k = 0; k < TS_RES_DIMS; k++) {
        int who = j->sj.tenant;
        int64_t all = guaranteed_all(ts, k);
        int64_t cap = sum[k] > 0 && all > 0 ? ceiling(ts, j->sj.tenant, j->sj.tier, k, &who)
                                            : INT64_MAX;
        if (sum[k] <= cap && (all == 0 || sum[k] <= all))
            continue;
        char dim[64];
        if (k >= TS_RES_GPU0)
            snprintf(dim, sizeof dim, "GPUs of %s", ts_gpu_model_get(k - TS_RES_GPU0)->name);
        else
            ts_res_name(k, dim, sizeof dim);
        double scale = k >= TS_RES_GPU0 ? 1.0 / TS_MILLI_PER_GPU : 1.0;
        bool g = j->sj.tier == TS_TIER_GUARANTEED;
        if (sum[k] <= cap) /* within its own ceiling, above everyone's guarantees */
            return ts_err_set(err, TS_EINVAL, "tasks: %g %s asked in all; the tenants' "
                              "guarantees add up to %g, and capacity that is nobody's guarantee "
                              "is not lent, so at most %g can ever run", (double)sum[k] * scale,
                              dim, (double)all * scale, (double)all * scale);
        return ts_err_set(err, TS_EINVAL, "tasks: %g %s asked in all as %s work; tenant %s's %s "
                          "is %g, so at most %g can ever run%s", (double)sum[k] * scale, dim,
                          g ? "guaranteed" : "opportunistic", ts->t[who].name,
                          g ? "guarantee" : "guarantee plus borrowing limit", (double)cap * scale,
                          (double)cap * scale,
                          g ? " (opportunistic work may borrow beyond it)" : "");
    }
    return 0;
}

/* Fits for at least one GPU model the job could land on. */
static int tenant_check(const ctld *c, const cjob *j, ts_err *err)
{
    bool gpus = false;
    uint32_t mask = 0;
    for (int i = 0; i < j->ntasks; i++) {
        gpus = gpus || j->tasks[i].num_gpu > 0 || j->tasks[i].mig_profile >= 0;
        mask |= j->tasks[i].model_mask;
    }
    if (!gpus)
        return tenant_check_model(c, j, -1, err);
    int rc = 0;
    uint32_t seen = 0;
    for (int i = 0; i < c->cluster->nnodes; i++) {
        int m = c->cluster->nodes[i].model;
        if (m < 0 || (mask && !(mask >> m & 1)) || (seen >> m & 1))
            continue;
        seen |= UINT32_C(1) << m;
        rc = tenant_check_model(c, j, m, err);
        if (rc == 0)
            return 0;
    }
    return rc;
}

int ctld_fit_check(const ctld *c, const cjob *j, ts_err *err)
{
    int rc = cluster_check(c, j->spec, j->tasks, err, j->sj.required_level == TS_GANG_LEVEL_NODE);
    if (rc == 0 && j->sj.nhost_ports > 0 && j->ntasks > c->cluster->nnodes) /* a node each */
        rc = ts_err_set(err, TS_EINVAL, "network.publish: its %d tasks need a node each (a "
                        "node's port is one task's), and the cluster has %d nodes", j->ntasks,
                        c->cluster->nnodes);
    return rc != 0 ? rc : tenant_check(c, j, err);
}
