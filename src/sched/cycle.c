/*
 * cycle.c - the scheduler object: configuration, job checks, recording work
 * started and stopped outside a cycle, and the decision's storage. The cycle
 * itself (order, quota, placement, reservation, preemption) is in
 * cycle_loop.c.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched/cycle_internal.h"
#include "sched/elastic.h"
#include "tessera/grow.h"
#include "tessera/node_select.h"

/* The las defaults (docs/scheduler.md has the sweep behind them). */
#define LAS_LEVEL_DEFAULT_GPU_S (8.0 * 3600.0)
/* A tenant's first level splits as soon as a fresh job of it waits, at 120
 * GPU-s, with a second step at a GPU-hour (docs/scheduler.md, "The
 * defaults since issue 33"; docs/simulator.md, "The defaults since
 * 2026-12-07", has the grid and held-out cells behind them). */
#define LAS_SPLIT_DEFAULT_GPU_S 120.0 /* the first step of an overflowing first level */
#define LAS_SPLIT_DEFAULT_MIN_GPU_S 120.0 /* the shortest step a backlog brings */
#define LAS_SPLIT_DEFAULT_BACKLOG 0.0 /* its trigger: any fresh job waiting */
#define LAS_SPLIT_DEFAULT_MID_GPU_S 3600.0 /* the mid step */
#define LAS_SPLIT_DEFAULT_MIN_RUNTIME_S 60.0 /* a split tenant's own jobs, each other */
#define LAS_SPLIT_DEFAULT_MAX_PREEMPTIONS_HOUR 10
#define LAS_LEVELS_DEFAULT 3
#define LAS_PROMOTE_DEFAULT 1.0
/* A loan runs this long before a reclaim may take it back: work that was
 * just started is not stopped again at once, as the default backoff keeps a
 * preempted job from coming straight back (docs/scheduler.md, step 6). */
#define RECLAIM_MIN_RUNTIME_DEFAULT_S 60.0

const char *ts_pending_name(int reason)
{
    static const char *const names[] = {"none",  "held",   "quota",       "capacity",
                                        "topology", "fragmentation", "gang", "reservation",
                                        "preempting", "invalid", "dependency", "constraint"};
    if (reason < 0 || reason > TS_PEND_LAST)
        return "unknown";
    return names[reason];
}

const char *ts_order_name(int order)
{
    switch (order) {
    case TS_ORDER_LAS:
        return "las";
    case TS_ORDER_FIFO:
        return "fifo";
    default:
        return "default";
    }
}

int ts_order_parse(const char *name)
{
    if (name && strcmp(name, "las") == 0)
        return TS_ORDER_LAS;
    if (name && strcmp(name, "fifo") == 0)
        return TS_ORDER_FIFO;
    return -1;
}

void ts_sched_config_default(ts_sched_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->order = TS_ORDER_LAS;
    cfg->las_level_gpu_s = LAS_LEVEL_DEFAULT_GPU_S;
    cfg->las_levels = LAS_LEVELS_DEFAULT;
    cfg->las_promote_factor = LAS_PROMOTE_DEFAULT;
    cfg->default_time_limit_s = 24.0 * 3600.0;
    cfg->starve_after_s = 48.0 * 3600.0; /* docs/scheduler.md, "Starvation bound" */
    cfg->min_runtime_s = 600.0;
    cfg->max_preemptions_hour = 3;
    cfg->default_grace_s = 60.0;
    cfg->backoff_base_s = 60.0;
    cfg->max_preemptors_cycle = 8;
    cfg->reclaim_min_runtime_s = RECLAIM_MIN_RUNTIME_DEFAULT_S;
    cfg->reclaim_any_tier = true;
    cfg->reclaim_ignores_hour_limit = true;
    cfg->guarantee_over_reservation = true;
    cfg->preemptor_searches_again = true;
    cfg->guarantee_moves = true;
    cfg->fair_reclaim = true; /* docs/scheduler.md, step 6 */
    cfg->fair_moves = true;
    cfg->starving_borrowers_by_share = true;
    cfg->las_fifo_within_level = true;
    cfg->las_split_gpu_s = LAS_SPLIT_DEFAULT_GPU_S;
    cfg->las_split_backlog = LAS_SPLIT_DEFAULT_BACKLOG;
    cfg->las_split_horizon_s = 0.0; /* a fixed step */
    cfg->las_split_min_gpu_s = LAS_SPLIT_DEFAULT_MIN_GPU_S;
    cfg->las_split_mid_gpu_s = LAS_SPLIT_DEFAULT_MID_GPU_S;
    cfg->las_split_min_runtime_s = LAS_SPLIT_DEFAULT_MIN_RUNTIME_S;
    cfg->las_split_max_preemptions_hour = LAS_SPLIT_DEFAULT_MAX_PREEMPTIONS_HOUR;
    cfg->las_split_cross_tier = true;
    cfg->victims_fewest_gpus = true;
    cfg->elastic_resize_cost_s = TS_ELASTIC_RESIZE_COST_DEFAULT_S;
}

int ts_job_array_expand(const ts_job *tmpl, int n, int64_t first_id, ts_job *out, ts_err *err)
{
    if (!tmpl || !out || n < 1)
        return ts_err_set(err, TS_EINVAL, "array_size: must be >= 1");
    for (int i = 0; i < n; i++) {
        out[i] = *tmpl;
        out[i].id = first_id + i;
    }
    return 0;
}

/* ---- the scheduler object ------------------------------------------------ */

int ts_sched_new(ts_cluster *c, ts_quota *q, const ts_sched_config *cfg, ts_sched **out,
                 ts_err *err)
{
    if (!c || !q || !out)
        return ts_err_set(err, TS_EINVAL, "sched: cluster, quota and out are required");
    ts_sched *s = calloc(1, sizeof *s);
    if (!s)
        return ts_err_set(err, TS_ENOMEM, "sched: out of memory");
    s->live_c = c;
    s->live_q = q;
    if (cfg)
        s->cfg = *cfg;
    else
        ts_sched_config_default(&s->cfg);
    if (s->cfg.order != TS_ORDER_LAS && s->cfg.order != TS_ORDER_FIFO)
        s->cfg.order = TS_ORDER_LAS;
    if (!(s->cfg.las_level_gpu_s > 0.0))
        s->cfg.las_level_gpu_s = LAS_LEVEL_DEFAULT_GPU_S;
    if (s->cfg.las_levels < 1 || s->cfg.las_levels > TS_LAS_LEVELS_MAX)
        s->cfg.las_levels = LAS_LEVELS_DEFAULT;
    if (!(s->cfg.las_promote_factor >= 0.0))
        s->cfg.las_promote_factor = 0.0;
    s->live_ix = ts_gang_index_new(c, err);
    s->c = ts_cluster_clone(c);
    s->ix = s->c ? ts_gang_index_new(s->c, err) : NULL;
    s->own_ver = calloc((size_t)c->nnodes + 1, sizeof *s->own_ver);
    s->own_at = calloc((size_t)c->nnodes + 1, sizeof *s->own_at);
    s->sc = ts_cluster_clone(c);
    if (!s->live_ix || !s->c || !s->ix || !s->own_ver || !s->own_at || !s->sc ||
        ts_quota_copy(&s->q, q) != 0) {
        ts_sched_free(s);
        return ts_err_set(err, TS_ENOMEM, "sched: out of memory");
    }
    for (int i = 0; i < c->nnodes; i++) {
        s->own_ver[i] = s->own_at[i] = c->nodes[i].version;
        const ts_node *n = &c->nodes[i];
        s->cap[TS_RES_CPU] += n->cpu_milli;
        s->cap[TS_RES_MEM] += n->mem_mib;
        if (n->model >= 0) {
            s->cap[ts_res_gpu(n->model)] += (int64_t)n->ngpu * TS_MILLI_PER_GPU;
            s->models_present |= UINT32_C(1) << n->model;
        }
    }
    *out = s;
    return 0;
}

void ts_sched_free(ts_sched *s)
{
    if (!s)
        return;
    blockers_clear(s);
    room_clear(s);
    cycle_scoring_free(s);
    ts_gang_index_free(s->ix);
    ts_gang_index_free(s->live_ix);
    ts_cluster_free(s->c);
    ts_quota_free(s->q);
    free(s->own_ver);
    free(s->own_at);
    ts_gang_index_free(s->six);
    ts_cluster_free(s->sc);
    free(s->sync_ver);
    free(s->sdirty);
    free(s->blk);
    free(s->room);
    free(s->keys);
    free(s->keys_tmp);
    free(s->keys_grp);
    free(s->done);
    free(s->js);
    free(s->why_off);
    free(s->node_tier);
    free(s->hports);
    free(s->image_cost);
    for (int i = 0; i < s->nres; i++)
        free(s->res[i].nodes);
    free(s->res);
    free(s);
}

int ts_sched_set_reservations(ts_sched *s, const ts_reservation *r, int n, ts_err *err)
{
    if (n < 0 || (n > 0 && !r))
        return ts_err_set(err, TS_EINVAL, "reservations: bad arguments");
    size_t words = ts_node_mask_words(s->live_c->nnodes);
    for (int i = 0; i < n; i++) {
        if (r[i].id <= 0)
            return ts_err_set(err, TS_EINVAL, "reservations[%d].id: must be > 0", i);
        if (!(r[i].start_s < r[i].end_s))
            return ts_err_set(err, TS_EINVAL, "reservations[%d]: must end after it starts", i);
        if (!r[i].nodes)
            return ts_err_set(err, TS_EINVAL, "reservations[%d].nodes: required", i);
        for (int k = 0; k < i; k++)
            if (r[k].id == r[i].id)
                return ts_err_set(err, TS_EINVAL, "reservations[%d].id: %lld given twice", i,
                                  (long long)r[i].id);
    }
    sched_res *nr = n ? calloc((size_t)n, sizeof *nr) : NULL;
    if (n && !nr)
        return ts_err_set(err, TS_ENOMEM, "out of memory");
    for (int i = 0; i < n; i++) {
        nr[i] = (sched_res){.id = r[i].id, .start_s = r[i].start_s, .end_s = r[i].end_s};
        nr[i].nodes = calloc(words ? words : 1, sizeof *nr[i].nodes);
        if (!nr[i].nodes) {
            for (int k = 0; k < i; k++)
                free(nr[k].nodes);
            free(nr);
            return ts_err_set(err, TS_ENOMEM, "out of memory");
        }
        memcpy(nr[i].nodes, r[i].nodes, words * sizeof *nr[i].nodes);
        if (s->live_c->nnodes & 63)
            nr[i].nodes[words - 1] &= (UINT64_C(1) << (s->live_c->nnodes & 63)) - 1;
        for (size_t w = 0; w < words; w++)
            nr[i].nnodes += __builtin_popcountll(nr[i].nodes[w]);
    }
    for (int i = 0; i < s->nres; i++)
        free(s->res[i].nodes);
    free(s->res);
    s->res = nr;
    s->nres = n;
    s->epoch++; /* failures remembered under the old windows no longer hold */
    return 0;
}

const ts_gang_index *ts_sched_gang_index(const ts_sched *s) { return s->live_ix; }

int ts_sched_node_set_schedulable(ts_sched *s, int node, bool on, ts_err *err)
{
    if (node < 0 || node >= s->live_c->nnodes)
        return ts_err_set(err, TS_EINVAL, "node: %d is not a node of the cluster", node);
    ts_gang_index_node_enable(s->live_ix, node, on); /* the plan's copy at its next sync */
    return 0;
}

int ts_sched_node_set_share_one_user(ts_sched *s, int node, bool on, ts_err *err)
{
    if (node < 0 || node >= s->live_c->nnodes)
        return ts_err_set(err, TS_EINVAL, "node: %d is not a node of the cluster", node);
    ts_node *n = &s->live_c->nodes[node];
    if (n->share_one_user != on) {
        n->share_one_user = on;
        n->version++; /* the plan's copy takes it at its next sync */
    }
    return 0;
}

void ts_sched_gpu_share_key_note(ts_sched *s, int node, int gpu, int64_t key)
{
    if (node < 0 || node >= s->live_c->nnodes)
        return;
    ts_node *n = &s->live_c->nodes[node];
    if (gpu < 0 || gpu >= n->ngpu || n->gpu[gpu].mode != TS_GPU_SHARED || n->gpu[gpu].ntasks == 0 ||
        n->gpu[gpu].share_key != 0)
        return;
    n->gpu[gpu].share_key = key;
    n->version++;
}

bool ts_sched_node_share_one_user(const ts_sched *s, int node)
{
    return node >= 0 && node < s->live_c->nnodes && s->live_c->nodes[node].share_one_user;
}

bool ts_sched_node_schedulable(const ts_sched *s, int node)
{
    return ts_gang_index_node_enabled(s->live_ix, node);
}

static bool level_ok(const ts_cluster *c, int level)
{
    if (level == TS_GANG_LEVEL_ANY || level == TS_GANG_LEVEL_NODE)
        return true;
    return c->topo && level >= 0 && level < ts_topo_nlevels(c->topo) - 1;
}

static bool same_request(const ts_request *a, const ts_request *b)
{
    return a->cpu_milli == b->cpu_milli && a->mem_mib == b->mem_mib &&
           a->num_gpu == b->num_gpu && a->gpu_milli == b->gpu_milli &&
           a->gpu_mem_mib == b->gpu_mem_mib && a->model_mask == b->model_mask &&
           a->mig_profile == b->mig_profile && a->share_key == b->share_key;
}

int ts_sched_check_job(const ts_sched *s, const ts_job *job, ts_err *err)
{
    const ts_tenants *ts = ts_quota_tenants(s->live_q);
    if (job->tenant < 0 || job->tenant >= ts->n)
        return ts_err_set(err, TS_EINVAL, "tenant: %d is not a tenant", job->tenant);
    if (job->tier != TS_TIER_GUARANTEED && job->tier != TS_TIER_OPPORTUNISTIC)
        return ts_err_set(err, TS_EINVAL, "tier: must be guaranteed or opportunistic");
    if (job->priority < TS_PRIORITY_MIN || job->priority > TS_PRIORITY_MAX)
        return ts_err_set(err, TS_EINVAL, "priority: must be %d..%d", TS_PRIORITY_MIN,
                          TS_PRIORITY_MAX);
    if (!(isfinite(job->time_limit_s) && job->time_limit_s >= 0.0))
        return ts_err_set(err, TS_EINVAL, "time_limit_s: must be >= 0 (0 = the default)");
    if (!isfinite(job->submit_s))
        return ts_err_set(err, TS_EINVAL, "submit_s: must be a finite time");
    if (job->ntasks < 1 || job->ntasks > TS_GANG_MAX_TASKS || !job->tasks)
        return ts_err_set(err, TS_EINVAL, "tasks: must hold 1..%d tasks", TS_GANG_MAX_TASKS);
    if (!level_ok(s->live_c, job->required_level))
        return ts_err_set(err, TS_EINVAL, "topology.required: not a level of this cluster");
    if (!level_ok(s->live_c, job->preferred_level))
        return ts_err_set(err, TS_EINVAL, "topology.preferred: not a level of this cluster");
    if (cycle_ports_check(job, err) != 0)
        return TS_EINVAL;
    for (int i = 0; i < job->ntasks; i++) {
        const ts_request *r = &job->tasks[i];
        if (i > 0 && same_request(r, r - 1))
            continue; /* a gang's ranks are usually alike: checked once */
        ts_err e;
        if (ts_request_check(r, &e) != 0)
            return ts_err_set(err, TS_EINVAL, "tasks[%d].%s", i, e.msg);
        if (r->num_gpu < 1)
            continue;
        /* the models present it may use, lowest first (the first refusal's
         * message names the lowest, as a walk over every model did) */
        uint32_t may = s->models_present & (r->model_mask ? r->model_mask : UINT32_MAX);
        for (; may; may &= may - 1) {
            int m = __builtin_ctz(may);
            int64_t cap_cpu = s->cfg.cap_cpu_milli_per_gpu[m];
            int64_t cap_mem = s->cfg.cap_mem_mib_per_gpu[m];
            if (cap_cpu > 0 && r->cpu_milli > cap_cpu * r->num_gpu)
                return ts_err_set(err, TS_EINVAL, "tasks[%d].cpu_milli: %lld per GPU is above "
                                  "the cap of %lld for %s", i,
                                  (long long)(r->cpu_milli / r->num_gpu), (long long)cap_cpu,
                                  ts_gpu_model_get(m)->name);
            if (cap_mem > 0 && r->mem_mib > cap_mem * r->num_gpu)
                return ts_err_set(err, TS_EINVAL, "tasks[%d].mem_mib: %lld per GPU is above "
                                  "the cap of %lld for %s", i,
                                  (long long)(r->mem_mib / r->num_gpu), (long long)cap_mem,
                                  ts_gpu_model_get(m)->name);
        }
    }
    return 0;
}

#define BACKOFF_MAX_S 3600.0

double ts_sched_job_rate(const ts_sched *s, const ts_job *job)
{
    double rate = 0.0;
    for (int i = 0; i < job->ntasks; i++) {
        const ts_request *r = &job->tasks[i];
        if (r->mig_profile >= 0) {
            int slices = 1;
            const ts_cluster *c = s->live_c;
            if (job->allocs && job->allocs[i].node >= 0 && job->allocs[i].node < c->nnodes) {
                int model = c->nodes[job->allocs[i].node].model;
                const ts_mig_profile *p =
                    model >= 0 ? ts_mig_profile_get(ts_gpu_model_get(model)->mig_geometry,
                                                    r->mig_profile)
                               : NULL;
                if (p)
                    slices = p->compute_slices;
            }
            rate += slices / (double)TS_MIG_MAX_INSTANCES;
        } else {
            rate += (double)r->num_gpu * r->gpu_milli / TS_MILLI_PER_GPU;
        }
    }
    return rate;
}

int ts_sched_las_level(const ts_sched *s, double attained_gpu_s)
{
    int level = 0;
    double threshold = s->cfg.las_level_gpu_s;
    /* attained service is a sum of increments: a hair below a threshold is at it */
    while (level < s->cfg.las_levels - 1 && attained_gpu_s >= threshold * (1.0 - 1e-9)) {
        level++;
        threshold *= 2.0;
    }
    return level;
}

double ts_sched_backoff_s(const ts_sched *s, int preemptions_hour)
{
    double b = s->cfg.backoff_base_s;
    for (int i = 1; i < preemptions_hour && b < BACKOFF_MAX_S; i++)
        b *= 2.0;
    return b < BACKOFF_MAX_S ? b : BACKOFF_MAX_S;
}

/* What job charges once placed on allocs (GPU model of each task's node). */
int cycle_job_demand_on(const ts_sched *s, const ts_cluster *c, const ts_job *job,
                        const ts_alloc *allocs, int model_if_unplaced,
                        int64_t demand[TS_RES_DIMS])
{
    if (!c)
        c = s->c;
    memset(demand, 0, TS_RES_DIMS * sizeof *demand);
    for (int i = 0; i < job->ntasks; i++) {
        int64_t d[TS_RES_DIMS];
        int model = allocs ? c->nodes[allocs[i].node].model : model_if_unplaced;
        ts_err e;
        if (ts_quota_demand(&job->tasks[i], job->tasks[i].num_gpu > 0 ? model : -1, d, &e) != 0)
            return TS_EINVAL;
        for (int k = 0; k < TS_RES_DIMS; k++)
            demand[k] += d[k];
    }
    return 0;
}

int cycle_job_demand(const ts_sched *s, const ts_job *job, const ts_alloc *allocs,
                     int model_if_unplaced, int64_t demand[TS_RES_DIMS])
{
    return cycle_job_demand_on(s, s->c, job, allocs, model_if_unplaced, demand);
}

/* Binds job->allocs on the live cluster and its index, all or nothing. */
static int bind(ts_sched *s, const ts_job *job, ts_err *err)
{
    ts_cluster *c = s->live_c;
    int i = 0;
    for (; i < job->ntasks; i++) {
        const ts_alloc *a = &job->allocs[i];
        if (a->node < 0 || a->node >= c->nnodes ||
            ts_node_assign(&c->nodes[a->node], &job->tasks[i], a) != 0)
            break;
        ts_gang_index_node_changed(s->live_ix, a->node);
    }
    if (i == job->ntasks)
        return 0;
    while (i-- > 0) {
        ts_node_release(&c->nodes[job->allocs[i].node], &job->allocs[i]);
        ts_gang_index_node_changed(s->live_ix, job->allocs[i].node);
    }
    return ts_err_set(err, TS_EINVAL, "job %lld: allocs: do not fit the cluster as it is",
                      (long long)job->id);
}

/* What a bound (or to be bound) job charges, after checking its allocations
 * name nodes of the cluster. */
static int bound_demand(const ts_sched *s, const ts_job *job, int64_t demand[TS_RES_DIMS],
                        ts_err *err)
{
    if (!job->allocs || job->ntasks < 1 || !job->tasks)
        return ts_err_set(err, TS_EINVAL, "job %lld: allocs: required", (long long)job->id);
    for (int i = 0; i < job->ntasks; i++)
        if (job->allocs[i].node < 0 || job->allocs[i].node >= s->live_c->nnodes)
            return ts_err_set(err, TS_EINVAL, "job %lld: allocs[%d].node: out of range",
                              (long long)job->id, i);
    if (cycle_job_demand_on(s, s->live_c, job, job->allocs, -1, demand) != 0)
        return ts_err_set(err, TS_EINVAL, "job %lld: tasks: bad demand", (long long)job->id);
    return 0;
}

/* Binds and charges a job on the live cluster and quota (no validation:
 * ts_sched_start's, or a plan's start). */
int cycle_apply_start(ts_sched *s, const ts_job *job, double now, ts_err *err)
{
    int64_t demand[TS_RES_DIMS];
    int rc = bound_demand(s, job, demand, err);
    if (rc == 0)
        rc = bind(s, job, err);
    if (rc != 0)
        return rc;
    if ((rc = ts_quota_charge(s->live_q, job->tenant, job->tier, demand, now, err)) != 0) {
        cycle_unplace(s->live_c, s->live_ix, job, job->allocs);
        return rc;
    }
    return 0;
}

int ts_sched_start(ts_sched *s, const ts_job *job, double now, ts_err *err)
{
    int rc = ts_sched_check_job(s, job, err);
    return rc != 0 ? rc : cycle_apply_start(s, job, now, err);
}

int ts_sched_stop(ts_sched *s, const ts_job *job, double now, ts_err *err)
{
    int64_t demand[TS_RES_DIMS];
    int rc = bound_demand(s, job, demand, err);
    if (rc == 0)
        rc = ts_quota_credit(s->live_q, job->tenant, job->tier, demand, now, err);
    if (rc != 0)
        return rc;
    if (cycle_unplace(s->live_c, s->live_ix, job, job->allocs) != 0)
        return ts_err_set(err, TS_EINVAL, "job %lld: allocs: not bound on the cluster",
                          (long long)job->id);
    return 0;
}

/* ---- decisions ----------------------------------------------------------- */

void ts_decision_init(ts_decision *d)
{
    memset(d, 0, sizeof *d);
    d->reserved = -1;
    d->planned = -1;
}

void ts_decision_fini(ts_decision *d)
{
    free(d->starts);
    free(d->preempts);
    free(d->resizes);
    free(d->pending);
    free(d->alloc_pool);
    free(d->why_buf);
    ts_decision_init(d);
}

int cycle_grow(void **p, int *cap, int need, size_t size)
{
    return ts_grow(p, cap, need, 16, size);
}
