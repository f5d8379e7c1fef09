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
 * (src/replay/replay_timeline.c) integrates the same quantity over time.
 *
 * A pass over every job, under mu, on every /metrics page and every pending
 * job's explain: so the unused guarantee is taken once per tenant and model,
 * and a tenant with none, or owed all of it already, costs a job two reads,
 * whatever its queue (100,000 pending jobs of a tenant at its guarantee made
 * each page 50 ms of the lock). */
void ctld_owed_gpus(const ctld *c, double *owed, int only)
{
    int nt = c->tenants->n;
    int64_t(*unused)[TS_MAX_GPU_MODELS] = calloc((size_t)nt + 1, sizeof *unused);
    double *most = calloc((size_t)nt + 1, sizeof *most);
    for (int t = 0; t < nt; t++) {
        owed[t] = 0.0;
        for (int m = 0; unused && most && (only < 0 || t == only) && m < TS_MAX_GPU_MODELS;
             m++) {
            int dim = ts_res_gpu(m);
            unused[t][m] = c->tenants->t[t].guaranteed[dim] - ts_quota_usage(c->quota, t, dim);
            most[t] += unused[t][m] > 0 ? (double)unused[t][m] / 1000.0 : 0.0;
        }
    }
    for (int i = 0; unused && most && i < c->njobs; i++) {
        const cjob *j = c->jobs[i];
        int t = j->sj.tenant;
        if (j->row.state != TS_JOB_PENDING || t < 0 || t >= nt || (only >= 0 && t != only) ||
            owed[t] >= most[t] || !j->tasks)
            continue;
        if (strcmp(j->row.reason, "held") == 0 || strcmp(j->row.reason, "invalid") == 0 ||
            strcmp(j->row.reason, "dependency") == 0)
            continue;
        for (int m = 0; m < TS_MAX_GPU_MODELS; m++) {
            int64_t need = unused[t][m] > 0 ? job_gpu_milli_on(j, m) : -1;
            if (need > 0 && need <= unused[t][m]) {
                owed[t] += (double)need / 1000.0;
                break;
            }
        }
    }
    for (int t = 0; most && t < nt; t++)
        if (owed[t] > most[t])
            owed[t] = most[t];
    free(unused);
    free(most);
}
