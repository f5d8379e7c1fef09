/* What readers of the nodes and of the tenants' usage see while a cycle
 * plans (ctld.h, ctld_view).
 *
 * ts_sched_cycle runs with mu released and binds its starts into the live
 * cluster and quota as it plans; those binds are not durable until the
 * cycle's commit, and some are undone. Just before it, the cycle copies what
 * a reader of nodes, /metrics or GET /v1/tenants needs (the nodes that
 * changed since the last copy, each node's schedulable flag, each tenant's
 * usage and share) and marks the copies on; readers use them until the
 * decisions are applied (or undone), then the live state again. Every change
 * acknowledged to a client was applied before the copy (changes wait for
 * the cycle's end), so a client reads its own writes; what the cycle decides
 * is seen once it is applied, at the moment its jobs read as running (job
 * reads take an active job's state from memory, not from the store row its
 * commit wrote a moment before the apply: render.c). */
#include <stdlib.h>
#include <string.h>

#include "ctld/ctld.h"
#include "ctld/http.h"

int ctld_view_init(ctld *c)
{
    int nn = c->cluster->nnodes;
    c->view.nodes = malloc((size_t)(nn + 1) * sizeof *c->view.nodes);
    c->view.up = calloc((size_t)nn + 1, sizeof *c->view.up);
    if (!c->view.nodes || !c->view.up)
        return -1;
    memcpy(c->view.nodes, c->cluster->nodes, (size_t)nn * sizeof *c->view.nodes);
    return 0;
}

void ctld_view_fini(ctld *c)
{
    free(c->view.nodes);
    free(c->view.up);
    free(c->view.use);
    free(c->view.share);
    memset(&c->view, 0, sizeof c->view);
}

void ctld_view_publish(ctld *c, double now)
{
    ctld_view *v = &c->view;
    v->planning = true;
    v->on = false;
    int nt = c->tenants->n;
    if (nt > v->cap_tenants) {
        int64_t *use = realloc(v->use, (size_t)nt * TS_RES_DIMS * sizeof *use);
        if (use)
            v->use = use;
        double *share = realloc(v->share, (size_t)nt * sizeof *share);
        if (share)
            v->share = share;
        if (!use || !share)
            return; /* readers wait for the cycle's end, as before */
        v->cap_tenants = nt;
    }
    /* only what moved: a cycle with nothing to start copies nothing */
    for (int n = 0; n < c->cluster->nnodes; n++) {
        const ts_node *live = &c->cluster->nodes[n];
        if (v->nodes[n].version != live->version)
            memcpy(&v->nodes[n], live, sizeof *live);
        v->up[n] = ts_sched_node_schedulable(c->sched, n);
    }
    v->ntenants = nt;
    for (int t = 0; t < nt; t++) {
        for (int k = 0; k < TS_RES_DIMS; k++)
            v->use[(size_t)t * TS_RES_DIMS + k] = ts_quota_usage(c->quota, t, k);
        v->share[t] = ts_quota_share(c->quota, t, now);
    }
    v->on = true;
}

void ctld_view_close(ctld *c)
{
    c->view.planning = false;
    c->view.on = false;
}

void ctld_lock_view_reader(ctld *c)
{
    ctld_lock_reader(c);
    if (c->view.planning && !c->view.on)
        ctld_settled_wait(c); /* no copies (out of memory): the cycle's end */
    if (c->view.on)
        c->view.served++;
}

const ts_node *ctld_view_node(const ctld *c, int n)
{
    return c->view.on ? &c->view.nodes[n] : &c->cluster->nodes[n];
}

bool ctld_view_up(const ctld *c, int n)
{
    return c->view.on ? c->view.up[n] : ts_sched_node_schedulable(c->sched, n);
}

int64_t ctld_view_usage(const ctld *c, int t, int dim)
{
    if (!c->view.on)
        return ts_quota_usage(c->quota, t, dim);
    return t >= 0 && t < c->view.ntenants ? c->view.use[(size_t)t * TS_RES_DIMS + dim] : 0;
}

/* While the copies are on, the share as of the copy (the cycle's clock). */
double ctld_view_share(const ctld *c, int t, double now)
{
    if (!c->view.on)
        return ts_quota_share(c->quota, t, now);
    return t >= 0 && t < c->view.ntenants ? c->view.share[t] : 0.0;
}

/* What a pending job of t asks of GPU model m, in GPU-milli (a MIG instance
 * its slices' share of a GPU, as the quota charges it); -1 when it may not
 * use m, 0 when it asks for no GPU. */
static int64_t job_gpu_milli_on(const cjob *j, int m)
{
    int64_t sum = 0;
    for (int k = 0; k < j->ntasks; k++) {
        const ts_request *r = &j->tasks[k];
        if (r->num_gpu < 1 && r->mig_profile < 0)
            continue;
        if (r->model_mask && !(r->model_mask >> m & 1))
            return -1;
        int64_t d[TS_RES_DIMS];
        ts_err e;
        if (ts_quota_demand(r, m, d, &e) != 0)
            return -1;
        sum += d[ts_res_gpu(m)];
    }
    return sum;
}

/* A tenant is owed GPUs while it holds less than its guarantee and one of
 * its pending jobs (not held, not waiting on a dependency, not invalid)
 * fits in the guarantee it leaves unused on some GPU model the job may use:
 * then it is owed the smaller of that unused guarantee (over all models)
 * and what its fitting pending jobs ask. The replay's deficit
 * (src/replay/replay_timeline.c) integrates the same quantity over time. */
void ctld_view_owed_gpus(const ctld *c, double *owed)
{
    int nt = c->tenants->n;
    for (int t = 0; t < nt; t++)
        owed[t] = 0.0;
    /* unused guarantee per tenant and model, computed on first need */
    for (int i = 0; i < c->njobs; i++) {
        const cjob *j = c->jobs[i];
        int t = j->sj.tenant;
        if (j->row.state != TS_JOB_PENDING || t < 0 || t >= nt || !j->tasks)
            continue;
        if (strcmp(j->row.reason, "held") == 0 || strcmp(j->row.reason, "invalid") == 0 ||
            strcmp(j->row.reason, "dependency") == 0)
            continue;
        const ts_tenant *tn = &c->tenants->t[t];
        for (int m = 0; m < TS_MAX_GPU_MODELS; m++) {
            int dim = ts_res_gpu(m);
            int64_t unused = tn->guaranteed[dim] - ctld_view_usage(c, t, dim);
            int64_t need = unused > 0 ? job_gpu_milli_on(j, m) : -1;
            if (need > 0 && need <= unused) {
                owed[t] += (double)need / 1000.0;
                break;
            }
        }
    }
    for (int t = 0; t < nt; t++) {
        if (owed[t] <= 0.0)
            continue;
        int64_t unused = 0;
        for (int m = 0; m < TS_MAX_GPU_MODELS; m++) {
            int dim = ts_res_gpu(m);
            int64_t u = c->tenants->t[t].guaranteed[dim] - ctld_view_usage(c, t, dim);
            unused += u > 0 ? u : 0;
        }
        if (owed[t] > (double)unused / 1000.0)
            owed[t] = (double)unused / 1000.0;
    }
}
