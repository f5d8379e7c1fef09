/*
 * restore.c - the controller opened: configuration, tenants and cluster
 * loaded, every active job restored from the store and bound again exactly
 * where it ran (state.c has the jobs in memory); and closed.
 */

#include <fnmatch.h>
#include <math.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "ctld/ctld.h"
#include "ctld/http.h"
#include "ctld/ended_runs.h"
#include "ctld/imgloc.h"
#include "ctld/secrets.h"
#include "ctld/depend.h"
#include "ctld/job_fsm.h"
#include "tessera/load.h"
#include "tessera/mig.h"
#include "tessera/mig_plan.h"
#include "tessera/node_select.h"
#include "tessera/tenant_load.h"
#include "ctld/state.h"
#include "ctld/steps.h"
#include "io/read_file.h"

/* ---- open and restore -------------------------------------------------------------- */

/* The cluster and tenants files are the admin's own: read whole, unbounded. */
#define CTLD_ADMIN_FILE_MAX_BYTES (SIZE_MAX - 1)

static const char DEFAULT_TENANTS[] = "tenants:\n  default: {}\n";

/* Shares are fractions of the guarantees, or of the cluster's GPUs of a
 * model nobody is guaranteed (docs/scheduler.md "Order"): else a cluster
 * without GPU guarantees has no fair share at all. CPU and memory stay
 * counted only where guaranteed, as a GPU-only tenants file means. */
void ctld_quota_capacity(const ctld *c, ts_quota *q)
{
    int64_t cap[TS_RES_DIMS] = {0};
    for (int i = 0; i < c->cluster->nnodes; i++) {
        const ts_node *n = &c->cluster->nodes[i];
        if (n->model >= 0 && n->model < TS_MAX_GPU_MODELS)
            cap[ts_res_gpu(n->model)] += (int64_t)n->ngpu * TS_MILLI_PER_GPU;
    }
    ts_quota_set_capacity(q, cap);
}

/* A tenants document tesserad does not start with: its one error as err,
 * or every one on stderr (the first TS_ERRS_MAX) and their count as err. */
static void tenants_invalid(const char *fname, const ts_errs *bad, int rc, ts_err *err)
{
    int total = bad->n + bad->more;
    if (total <= 1) {
        ts_err_set(err, rc, "%s", bad->n ? bad->msg[0] : "tenants: invalid");
        return;
    }
    for (int i = 0; i < bad->n; i++)
        fprintf(stderr, "tesserad: %s\n", bad->msg[i]);
    if (bad->more)
        ts_err_set(err, rc, "%s: %d errors, the first %d above", fname, total, bad->n);
    else
        ts_err_set(err, rc, "%s: %d errors, each above", fname, total);
}

static int load_tenants(ctld *c, ts_err *err)
{
    char *yaml = NULL;
    size_t len = 0;
    const char *fname = "(built-in)";
    int rc = ts_store_tenants_get(c->store, &yaml, err);
    if (rc != 0)
        return rc;
    if (yaml) {
        fname = "tenants (set through the API)";
        len = strlen(yaml);
        if (c->cfg.tenants_file[0]) /* an admin who edited the file learns why it is not in force */
            fprintf(stderr, "tesserad: %s not read: the tenants set through the API "
                    "(PUT /v1/tenants, stored) are in force; change them there (tessera "
                    "quota set -f %s)\n", c->cfg.tenants_file, c->cfg.tenants_file);
    } else if (c->cfg.tenants_file[0]) {
        rc = io_read_file(c->cfg.tenants_file, CTLD_ADMIN_FILE_MAX_BYTES, &yaml, &len, err);
        if (rc != 0)
            return rc;
        fname = c->cfg.tenants_file;
    }
    ts_errs *bad = calloc(1, sizeof *bad);
    rc = !bad ? ts_err_set(err, TS_ENOMEM, "out of memory")
              : ts_load_tenants_yaml_all(yaml ? yaml : DEFAULT_TENANTS,
                                         yaml ? len : sizeof DEFAULT_TENANTS - 1, fname,
                                         &c->tenants, bad);
    free(yaml);
    if (bad && rc != 0)
        tenants_invalid(fname, bad, rc, err);
    free(bad);
    if (rc == 0)
        rc = ts_quota_new(c->tenants, c->cfg.half_life_s, &c->quota, err);
    if (rc == 0)
        ctld_quota_capacity(c, c->quota);
    return rc;
}

static bool node_is_virtual(const ctld *c, const char *name)
{
    if (c->cfg.virtual_all)
        return true;
    for (int i = 0; i < c->cfg.nvirtual; i++)
        if (fnmatch(c->cfg.virtual_nodes[i], name, 0) == 0)
            return true;
    return false;
}

/* Binds a running job restored from the store; on failure the job fails. */
/* A running job's MIG instance may sit where the cluster file's layout has
 * idle instances: dynamic MIG destroyed them before the controller
 * restarted (the planner's changes are not stored). The placement wins;
 * the idle instances in its way go, as they did on the GPU. */
static void mig_make_room(ctld *c, const cjob *j)
{
    for (int t = 0; t < j->ntasks; t++) {
        const ts_alloc *a = &j->allocs[t];
        if (a->mig_profile < 0 || a->ngpu != 1)
            continue;
        const ts_node *n = &c->cluster->nodes[a->node];
        const ts_gpu *g = &n->gpu[a->gpu[0]];
        const ts_gpu_model_info *mi = n->model >= 0 ? ts_gpu_model_get(n->model) : NULL;
        const ts_mig_profile *p = mi ? ts_mig_profile_get(mi->mig_geometry, a->mig_profile) : NULL;
        if (g->mode != TS_GPU_MIG || !p)
            continue;
        ts_mig_change ch = {.node = a->node, .gpu = a->gpu[0]};
        for (int k = 0; k < g->mig.n; k++) {
            const ts_mig_instance *in = &g->mig.inst[k];
            const ts_mig_profile *q = ts_mig_profile_get(mi->mig_geometry, in->profile_id);
            bool same = in->profile_id == a->mig_profile && in->start == a->mig_start;
            bool overlaps = q && in->start < a->mig_start + p->mem_slices &&
                            a->mig_start < in->start + q->mem_slices;
            if (!same && overlaps && !in->busy)
                ch.removed[ch.nremoved++] = *in;
            else
                ch.layout.inst[ch.layout.n++] = *in;
        }
        ts_err e;
        if (ch.nremoved > 0 && ts_mig_plan_apply(c->cluster, &ch, 1, &e) != 0)
            fprintf(stderr, "tesserad: job %lld: MIG layout of %s GPU %d: %s\n",
                    (long long)j->row.id, n->name, a->gpu[0], e.msg);
    }
}

static int restore_running(ctld *c, cjob *j, double now, ts_err *err)
{
    int rc = ctld_placement_parse(c, j, err);
    if (rc == 0)
        ctld_net_restore(c, j);
    if (rc == 0)
        mig_make_room(c, j);
    if (rc == 0) {
        j->sj.allocs = j->allocs;
        j->sj.start_s = j->row.start_s;
        j->sj.last_ckpt_s = j->row.start_s;
        rc = ts_sched_start(c->sched, &j->sj, ctld_sched_clock(c, now), err);
    }
    if (rc == 0 && ctld_node_index_add(c, j) != 0)
        rc = ts_err_set(err, TS_ENOMEM, "out of memory");
    if (rc == 0 && ctld_steps_restore(c, j, now, err) != 0) /* they run on: kept */
        fprintf(stderr, "tesserad: job %lld: steps not restored (%s): a running step's tasks "
                        "stop\n", (long long)j->row.id, err->msg);
    if (rc == 0) {
        j->end_s = j->row.start_s + ctld_job_run_s(j);
        j->is_virtual = true; /* as when it started (job_fsm.c): a timer if all virtual */
        for (int t = 0; t < j->ntasks; t++)
            j->is_virtual = j->is_virtual && c->node_virtual[j->allocs[t].node];
        /* its time-limit stop goes on (job_fsm.c keeps the reason) */
        j->timed_out = j->row.state == TS_JOB_STOPPING && strcmp(j->row.reason, "timeout") == 0;
        j->cancel_stop = j->row.state == TS_JOB_STOPPING && strcmp(j->row.reason, "cancel") == 0;
        return 0;
    }
    free(j->allocs);
    j->allocs = NULL;
    return rc;
}

static int restore_jobs(ctld *c, ts_err *err)
{
    ts_job_filter f = {.active_only = true};
    int64_t after = 0;
    double now = ctld_now();
    for (;;) {
        ts_job_row *rows = NULL;
        int n = 0;
        int rc = ts_store_job_list(c->store, &f, after, 10000, &rows, &n, err);
        if (rc != 0)
            return rc;
        for (int i = 0; i < n; i++) {
            after = rows[i].id;
            cjob *j = calloc(1, sizeof *j);
            if (!j) {
                ts_store_free_jobs(rows, n);
                return ts_err_set(err, TS_ENOMEM, "out of memory");
            }
            j->row = rows[i];
            memset(&rows[i], 0, sizeof rows[i]); /* ownership moved */
            ts_spec_errors se;
            ts_err e;
            int brc = ts_spec_parse(j->row.spec_json, strlen(j->row.spec_json), &j->spec, &se);
            if (brc == 0)
                brc = ctld_job_build(c, j, &e);
            else
                ts_spec_errors_join(&se, e.msg, sizeof e.msg);
            if (brc == 0 && (j->row.state == TS_JOB_RUNNING || j->row.state == TS_JOB_STOPPING))
                brc = restore_running(c, j, now, &e);
            ts_err se2;
            if (brc == 0 && ctld_service_restore(c, j, &se2) != 0) /* it starts at level 0 */
                fprintf(stderr, "tesserad: job %lld: attained service not restored: %s\n",
                        (long long)j->row.id, se2.msg);
            if (brc != 0) {
                /* a job that cannot come back fails, with the reason kept (it
                 * never enters memory, so this is the one state change made
                 * outside the state machine; if it is not written, the start
                 * is refused and the next start tries again) */
                j->row.state = TS_JOB_FAILED;
                j->row.end_s = now;
                free(j->row.why);
                j->row.why = strdup(e.msg);
                ts_event_row ev = {.job_id = j->row.id, .t_s = now, .kind = "failed",
                                   .detail = e.msg};
                rc = ts_store_apply(c->store, &j->row, 1, &ev, 1, err);
                ctld_cjob_free(j);
                if (rc != 0) {
                    ts_store_free_jobs(rows, n);
                    return rc;
                }
                continue;
            }
            if (j->row.state == TS_JOB_STOPPING) { /* its grace ended while we were down */
                j->sj.stopping = true;
                j->sj.stop_by_s = now;
            }
            if ((rc = ctld_job_add(c, j)) != 0) {
                ctld_cjob_free(j);
                ts_store_free_jobs(rows, n);
                return ts_err_set(err, rc, "out of memory");
            }
        }
        ts_store_free_jobs(rows, n);
        if (n < 10000)
            return 0;
    }
}

/* A controller without ha: on a PostgreSQL store an HA set leads (its lease
 * live) would run beside the leader unfenced: jobs it accepts the leader
 * never schedules. Refused, naming the leader; a lease run out (a set
 * stopped, or a store once used by one) does not stop it. */
static int not_beside_a_leader(ts_store *s, ts_err *err)
{
    ts_lease_info li;
    if (strcmp(ts_store_backend(s), "postgresql") != 0 || ts_store_lease_read(s, &li, err) != 0 ||
        li.epoch == 0 || li.remaining_s <= 0)
        return 0;
    return ts_err_set(err, TS_ECONFLICT, "store: a controller of an HA set leads it (%s, epoch "
                      "%lld, its lease %.1f s more): this one, without ha:, would run beside it "
                      "unfenced; add ha: to join the set as a standby (docs/ha.md)",
                      li.url[0] ? li.url : li.holder, (long long)li.epoch, li.remaining_s);
}

int ctld_open(ctld *c, const ctld_config *cfg, ts_err *err)
{
    memset(c, 0, sizeof *c);
    c->cfg = *cfg;
    pthread_mutex_init(&c->mu, NULL);
    pthread_mutex_init(&c->drain_mu, NULL);
    pthread_mutex_init(&c->resv_mu, NULL);
    pthread_cond_init(&c->drain_cv, NULL);
    pthread_cond_init(&c->wake, NULL);
    pthread_cond_init(&c->committed, NULL);
    pthread_cond_init(&c->fill_wake, NULL);
    ts_decision_init(&c->d);
    char *buf;
    size_t len;
    mkdir(c->cfg.state_dir, 0700);
    int rc = io_read_file(cfg->cluster_file, CTLD_ADMIN_FILE_MAX_BYTES, &buf, &len, err);
    if (rc != 0)
        return rc;
    rc = ts_load_cluster_yaml(buf, len, cfg->cluster_file, &c->cluster, err);
    free(buf);
    if (rc == 0)
        rc = ts_store_open(cfg->store_url, &c->store, err);
    if (rc == 0 && cfg->ha_epoch > 0) /* a leader (ha.c): fenced before its first write */
        rc = ts_store_set_epoch(c->store, cfg->ha_epoch, err);
    else if (rc == 0)
        rc = not_beside_a_leader(c->store, err);
    if (rc == 0) /* the step credentials' key (steps.h) */
        rc = ctld_step_key_load(c, err);
    if (rc == 0) /* no key for the secrets stored: refuse to start (docs/secrets.md) */
        rc = ctld_secrets_open(c->store, cfg->secrets_key_file, true, &c->secrets, err);
    if (rc == 0 && ctld_notify_open(c) != 0)
        rc = ts_err_set(err, TS_ENOMEM, "out of memory");
    if (rc == 0 && ctld_p2p_open(c) != 0)
        rc = ts_err_set(err, TS_ENOMEM, "out of memory");
    if (rc == 0 && ctld_imgloc_open(c) != 0)
        rc = ts_err_set(err, TS_ENOMEM, "out of memory");
    if (rc == 0)
        rc = load_tenants(c, err);
    ts_err why;
    if (rc == 0 && ctld_config_services_tenants(cfg, c->tenants, &why) != 0) /* a typo: said now */
        rc = ts_err_set(err, TS_EINVAL, "%s in the tenants in force (the tenants file, or those "
                        "set through PUT /v1/tenants): a service for a name no job can have "
                        "reaches no task", why.msg);
    if (rc == 0)
        rc = ts_sched_new(c->cluster, c->quota, &c->cfg.sched, &c->sched, err);
    if (rc != 0)
        return rc;
    size_t nn = (size_t)c->cluster->nnodes + 1;
    c->node_virtual = calloc(nn, sizeof *c->node_virtual);
    c->admin_drained = calloc(nn, sizeof *c->admin_drained);
    c->agents = calloc(nn, sizeof *c->agents);
    c->node_jobs = calloc(nn, sizeof *c->node_jobs);
    if (!c->node_virtual || !c->admin_drained || !c->agents || !c->node_jobs)
        return ts_err_set(err, TS_ENOMEM, "out of memory");
    for (int i = 0; i < c->cluster->nnodes; i++) {
        c->node_virtual[i] = node_is_virtual(c, c->cluster->nodes[i].name);
        pthread_mutex_init(&c->agents[i].mu, NULL);
        pthread_cond_init(&c->agents[i].moved, NULL);
    }
    char *drained = NULL;
    if ((rc = ts_store_setting_get(c->store, CTLD_DRAINED_KEY, &drained, err)) != 0)
        return rc;
    json_error_t je;
    json_t *dl = drained ? json_loads(drained, 0, &je) : NULL;
    size_t di;
    json_t *dv;
    json_array_foreach(dl, di, dv)
    {
        int n = json_string_value(dv) ? ts_cluster_find_node(c->cluster, json_string_value(dv))
                                      : -1;
        if (n >= 0)
            c->admin_drained[n] = true;
    }
    json_decref(dl);
    free(drained);
    for (int i = 0; i < c->cluster->nnodes; i++)
        ctld_node_refresh(c, i);
    if ((rc = ctld_map_rebuild(c, 1024)) != 0 || (rc = ctld_queued_recount(c)) != 0)
        return ts_err_set(err, rc, "out of memory");
    if ((rc = ctld_resv_load(c, err)) != 0) /* before the jobs that name them */
        return rc;
    if ((rc = ctld_net_open(c, err)) != 0) /* the tenants' VNIs, before their jobs */
        return rc;
    if ((rc = restore_jobs(c, err)) != 0 || (rc = ctld_arrays_restore(c, err)) != 0)
        return rc;
    if ((rc = ctld_oidc_init(c, err)) != 0 || (rc = ctld_bootstrap_admin(c, err)) != 0)
        return rc;
    c->dirty = true;
    return 0;
}

void ctld_close(ctld *c)
{
    ctld_ended_free(c);
    ctld_oidc_fini(c);
    for (int i = 0; i < c->njobs; i++)
        ctld_cjob_free(c->jobs[i]);
    free(c->jobs);
    free(c->net_tenants);
    free(c->net_partitions);
    free(c->map_ids);
    free(c->map_idx);
    free(c->node_virtual);
    free(c->admin_drained);
    ctld_resv_free(c);
    for (int i = 0; c->agents && i < c->cluster->nnodes; i++) {
        ctld_agent_forget_discovery(&c->agents[i]);
        json_decref(c->agents[i].doc);
        free(c->agents[i].readings);
        pthread_cond_destroy(&c->agents[i].moved);
        pthread_mutex_destroy(&c->agents[i].mu);
    }
    free(c->agents);
    for (int i = 0; c->node_jobs && i < c->cluster->nnodes; i++)
        free(c->node_jobs[i].v);
    free(c->node_jobs);
    free(c->queue);
    ctld_arrays_free(c);
    ctld_deps_free(c);
    ts_decision_fini(&c->d);
    ts_sched_free(c->sched);
    ts_quota_free(c->quota);
    ts_tenants_free(c->tenants);
    ts_cluster_free(c->cluster);
    ctld_notify_close(c); /* its thread reads secrets */
    ctld_p2p_close(c);
    ctld_imgloc_close(c);
    ctld_secrets_close(c->secrets);
    ts_store_close(c->store);
    ctld_config_fini(&c->cfg);
    pthread_mutex_destroy(&c->mu);
    pthread_mutex_destroy(&c->drain_mu);
    pthread_mutex_destroy(&c->resv_mu);
    pthread_cond_destroy(&c->drain_cv);
    pthread_cond_destroy(&c->wake);
    pthread_cond_destroy(&c->committed);
    pthread_cond_destroy(&c->fill_wake);
}
