/* GPUs each tenant is owed now (http.h, ctld_owed_gpus): what
 * tessera_guarantee_deficit_gpus and GET /v1/tenants show. Read under mu
 * (ctld_lock_reader): the live quota, which a cycle does not change while
 * it plans (tessera/cycle.h: it plans on its own copy). */
#include <stdlib.h>
#include <string.h>

#include "ctld/ctld.h"
#include "ctld/http.h"

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
void ctld_owed_gpus(const ctld *c, double *owed)
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
            int64_t unused = tn->guaranteed[dim] - ts_quota_usage(c->quota, t, dim);
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
            int64_t u = c->tenants->t[t].guaranteed[dim] - ts_quota_usage(c->quota, t, dim);
            unused += u > 0 ? u : 0;
        }
        if (owed[t] > (double)unused / 1000.0)
            owed[t] = (double)unused / 1000.0;
    }
}
