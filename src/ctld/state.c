/*
 * state.c - the controller's jobs in memory: building the scheduler's view
 * of a job from its stored spec, restoring every active job at start,
 * submission (durable before it is acknowledged), user actions, drains and
 * tenant changes.
 *
 * Active jobs live in an array plus an open-addressing map from id to slot;
 * finished jobs leave memory (the store keeps them). A job's ranks become
 * ts_request entries once, at build; its placement is written to the store as
 * JSON ({"node", "gpus", "gpu_milli", "gpu_mem_mib", "cpu_milli", "mem_mib",
 * "mig_profile", "mig_start"} per rank) so a restarted controller binds
 * exactly what ran.
 *
 * Nodes that are not virtual get no work until an agent serves them (the
 * agent issue): they are drained at start, with that reason.
 */
#include <errno.h>
#include <fnmatch.h>
#include <math.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "ctld/ctld.h"
#include "ctld/secrets.h"
#include "ctld/depend.h"
#include "ctld/job_fsm.h"
#include "tessera/load.h"
#include "tessera/mig.h"
#include "tessera/mig_plan.h"
#include "tessera/node_select.h"
#include "tessera/tenant_load.h"

double ctld_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void ctld_cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, double until)
{
    struct timespec ts;
    ts.tv_sec = (time_t)until;
    ts.tv_nsec = (long)((until - floor(until)) * 1e9);
    pthread_cond_timedwait(cv, mu, &ts);
}

/* ---- id map ------------------------------------------------------------------ */

static uint64_t hash_id(int64_t id)
{
    uint64_t x = (uint64_t)id * UINT64_C(0x9e3779b97f4a7c15);
    return x ^ (x >> 29);
}

static int map_rebuild(ctld *c, int cap)
{
    int64_t *ids = malloc((size_t)cap * sizeof *ids);
    int *idx = malloc((size_t)cap * sizeof *idx);
    if (!ids || !idx) {
        free(ids);
        free(idx);
        return TS_ENOMEM;
    }
    for (int i = 0; i < cap; i++)
        ids[i] = 0;
    free(c->map_ids);
    free(c->map_idx);
    c->map_ids = ids;
    c->map_idx = idx;
    c->map_cap = cap;
    for (int k = 0; k < c->njobs; k++) {
        uint64_t h = hash_id(c->jobs[k]->row.id) % (uint64_t)cap;
        while (ids[h] != 0)
            h = (h + 1) % (uint64_t)cap;
        ids[h] = c->jobs[k]->row.id;
        idx[h] = k;
    }
    return 0;
}

static int map_slot(const ctld *c, int64_t id)
{
    if (c->map_cap == 0)
        return -1;
    for (uint64_t h = hash_id(id) % (uint64_t)c->map_cap; c->map_ids[h] != 0;
         h = (h + 1) % (uint64_t)c->map_cap)
        if (c->map_ids[h] == id)
            return (int)h;
    return -1;
}

cjob *ctld_job_find(ctld *c, int64_t id)
{
    int h = map_slot(c, id);
    return h < 0 ? NULL : c->jobs[c->map_idx[h]];
}

static int job_add(ctld *c, cjob *j)
{
    if (c->njobs == c->jobs_cap) {
        int cap = c->jobs_cap ? c->jobs_cap * 2 : 256;
        cjob **nj = realloc(c->jobs, (size_t)cap * sizeof *nj);
        if (!nj)
            return TS_ENOMEM;
        c->jobs = nj;
        c->jobs_cap = cap;
    }
    /* the map grows first: if it cannot, the job is in neither */
    if ((int64_t)(c->njobs + 1) * 2 > c->map_cap &&
        map_rebuild(c, c->map_cap ? c->map_cap * 2 : 1024) != 0)
        return TS_ENOMEM;
    c->jobs[c->njobs++] = j;
    ctld_queued_note(c, j, -1, j->row.state);
    uint64_t h = hash_id(j->row.id) % (uint64_t)c->map_cap;
    while (c->map_ids[h] != 0)
        h = (h + 1) % (uint64_t)c->map_cap;
    c->map_ids[h] = j->row.id;
    c->map_idx[h] = c->njobs - 1;
    return 0;
}

static void cjob_free(cjob *j)
{
    if (!j)
        return;
    ts_job_row_fini(&j->row);
    if (j->spec_share)
        ctld_spec_share_put(j->spec_share);
    else
        ts_spec_free(j->spec);
    free(j->tasks);
    free(j->node_mask);
    free(j->allocs);
    free(j->net_host);
    free(j->rank_state);
    json_decref(j->rank_end);
    free(j->straggle_since);
    free(j);
}

/* Removes and frees j (swap with the last; the map is rebuilt lazily by
 * deleting with backward-shift). */
void ctld_job_remove(ctld *c, cjob *j)
{
    int h = map_slot(c, j->row.id);
    if (h < 0)
        return;
    int k = c->map_idx[h];
    /* delete from the map: backward-shift the cluster after h */
    uint64_t cap = (uint64_t)c->map_cap;
    uint64_t i = (uint64_t)h;
    c->map_ids[i] = 0;
    for (uint64_t n = (i + 1) % cap; c->map_ids[n] != 0; n = (n + 1) % cap) {
        uint64_t home = hash_id(c->map_ids[n]) % cap;
        bool move = (i <= n) ? (home <= i || home > n) : (home <= i && home > n);
        if (move) {
            c->map_ids[i] = c->map_ids[n];
            c->map_idx[i] = c->map_idx[n];
            c->map_ids[n] = 0;
            i = n;
        }
    }
    ctld_queued_note(c, j, j->row.state, -1);
    int last = c->njobs - 1;
    if (k != last) {
        c->jobs[k] = c->jobs[last];
        int hl = map_slot(c, c->jobs[k]->row.id);
        if (hl >= 0)
            c->map_idx[hl] = k;
    }
    c->njobs--;
    cjob_free(j);
}

/* ---- queued jobs per tenant -------------------------------------------------- */

static bool is_queued(int state) { return state == TS_JOB_PENDING || state == TS_JOB_HELD; }

void ctld_queued_note(ctld *c, const cjob *j, int from, int to)
{
    int t = j->sj.tenant;
    if (t >= 0 && t < c->nqueued)
        c->queued[t] += (int)is_queued(to) - (int)is_queued(from);
}

int ctld_tenant_queued(const ctld *c, const char *tenant)
{
    int t = ts_tenant_find(c->tenants, tenant);
    /* a large array's elements that are not jobs yet count too, each one */
    return (t >= 0 && t < c->nqueued ? c->queued[t] : 0) + ctld_arrays_queued(c, tenant);
}

/* Sizes the counts for the tenants now in c->tenants and counts again. */
static int queued_recount(ctld *c)
{
    int n = c->tenants->n;
    int *q = calloc((size_t)n + 1, sizeof *q);
    if (!q)
        return TS_ENOMEM;
    free(c->queued);
    c->queued = q;
    c->nqueued = n;
    for (int i = 0; i < c->njobs; i++)
        ctld_queued_note(c, c->jobs[i], -1, c->jobs[i]->row.state);
    return 0;
}

/* ---- jobs by node -------------------------------------------------------------- */

int ctld_node_index_add(ctld *c, cjob *j)
{
    for (int t = 0; j->allocs && t < j->ntasks; t++) {
        int n = j->allocs[t].node;
        bool seen = false;
        for (int u = 0; u < t && !seen; u++)
            seen = j->allocs[u].node == n;
        if (seen)
            continue;
        ctld_node_jobs *nj = &c->node_jobs[n];
        if (nj->n == nj->cap) {
            int cap = nj->cap ? nj->cap * 2 : 8;
            cjob **v = realloc(nj->v, (size_t)cap * sizeof *v);
            if (!v)
                return TS_ENOMEM;
            nj->v = v;
            nj->cap = cap;
        }
        nj->v[nj->n++] = j;
    }
    return 0;
}

static void node_index_del(ctld *c, const cjob *j)
{
    for (int t = 0; j->allocs && t < j->ntasks; t++) {
        ctld_node_jobs *nj = &c->node_jobs[j->allocs[t].node];
        for (int k = 0; k < nj->n; k++)
            if (nj->v[k] == j) {
                nj->v[k] = nj->v[--nj->n];
                break;
            }
    }
}

/* ---- a job's scheduler view ------------------------------------------------ */

static int priority_of(const ctld *c, const char *cls, int *out)
{
    if (!cls || !*cls) {
        *out = 0;
        for (int i = 0; i < c->cfg.nclasses; i++)
            if (strcmp(c->cfg.classes[i].name, "default") == 0)
                *out = c->cfg.classes[i].value;
        return 0;
    }
    for (int i = 0; i < c->cfg.nclasses; i++)
        if (strcmp(c->cfg.classes[i].name, cls) == 0) {
            *out = c->cfg.classes[i].value;
            return 0;
        }
    return TS_ENOENT;
}

static int mig_geometry_any(const ctld *c, const char *model)
{
    if (model && *model)
        return ts_mig_geometry_of(model);
    for (int i = 0; i < c->cluster->nnodes; i++) {
        int m = c->cluster->nodes[i].model;
        if (m >= 0 && ts_gpu_model_get(m)->mig_geometry != TS_MIG_NONE)
            return ts_gpu_model_get(m)->mig_geometry;
    }
    return TS_MIG_NONE;
}

/* Builds j->tasks and j->sj from j->spec and j->row; err names the field. */
static int job_build(ctld *c, cjob *j, ts_err *err)
{
    const ts_job_spec *sp = j->spec;
    j->has_dep = sp->dependency != NULL;
    /* not ranked yet (the cycle sets these while the job waits) */
    j->reserved_at_s = j->estimated_s = -1.0;
    j->queue_tenant = j->queue_cluster = j->las_level = -1;
    int n = 0;
    for (int g = 0; g < sp->ntasks; g++)
        n += sp->tasks[g].count;
    j->tasks = calloc((size_t)n, sizeof *j->tasks);
    if (!j->tasks)
        return ts_err_set(err, TS_ENOMEM, "out of memory");
    j->ntasks = n;
    int k = 0;
    for (int g = 0; g < sp->ntasks; g++) {
        const ts_task_spec *t = &sp->tasks[g];
        ts_request r = {.cpu_milli = t->cpu_milli, .mem_mib = t->mem_mib, .mig_profile = -1};
        if (t->gpu_model[0]) {
            int m = ts_gpu_model_lookup(t->gpu_model);
            if (m < 0)
                return ts_err_set(err, TS_EINVAL, "tasks[%d].gpu_model: unknown GPU model \"%s\"",
                                  g, t->gpu_model);
            r.model_mask = UINT32_C(1) << m;
        }
        if (t->mig_profile[0]) {
            int geo = mig_geometry_any(c, t->gpu_model);
            ts_err e;
            int pid = geo == TS_MIG_NONE ? TS_EINVAL : ts_mig_profile_parse(geo, t->mig_profile, &e);
            if (pid < 0)
                return ts_err_set(err, TS_EINVAL, "tasks[%d].mig_profile: %s", g,
                                  geo == TS_MIG_NONE ? "no MIG-capable GPU in the cluster"
                                                     : e.msg);
            r.mig_profile = pid;
            r.num_gpu = 1;
            r.gpu_milli = 0;
        } else if (t->gpus > 0 || t->gpu_milli < TS_MILLI_PER_GPU) {
            r.num_gpu = t->gpus > 0 ? t->gpus : 1;
            r.gpu_milli = t->gpu_milli > 0 ? t->gpu_milli : TS_MILLI_PER_GPU;
            r.gpu_mem_mib = t->gpu_mem_mib;
        }
        for (int i = 0; i < t->count; i++)
            j->tasks[k++] = r;
    }
    ts_job *s = &j->sj;
    memset(s, 0, sizeof *s);
    s->id = j->row.id;
    s->tenant = ts_tenant_find(c->tenants, sp->tenant);
    if (s->tenant < 0)
        return ts_err_set(err, TS_EINVAL, "tenant: no tenant \"%s\"", sp->tenant);
    s->tier = sp->tier;
    if (priority_of(c, sp->priority_class, &s->priority) != 0)
        return ts_err_set(err, TS_EINVAL, "priority_class: no class \"%s\" in the configuration",
                          sp->priority_class);
    s->submit_s = j->row.submit_s;
    s->time_limit_s = sp->time_limit_s;
    s->tasks = j->tasks;
    s->ntasks = j->ntasks;
    ts_err e;
    s->required_level = sp->required_level[0]
                            ? ts_gang_level_parse(c->cluster, sp->required_level, &e)
                            : TS_GANG_LEVEL_ANY;
    if (s->required_level < TS_GANG_LEVEL_NODE)
        return ts_err_set(err, TS_EINVAL, "topology.required: %s", e.msg);
    s->preferred_level = sp->preferred_level[0]
                             ? ts_gang_level_parse(c->cluster, sp->preferred_level, &e)
                             : s->required_level;
    if (s->preferred_level < TS_GANG_LEVEL_NODE)
        return ts_err_set(err, TS_EINVAL, "topology.preferred: %s", e.msg);
    s->rail_aligned = sp->rail_aligned;
    if (sp->constraint || sp->nodelist || sp->exclude) {
        free(j->node_mask);
        j->node_mask = calloc(ts_node_mask_words(c->cluster->nnodes) + 1, sizeof *j->node_mask);
        if (!j->node_mask)
            return ts_err_set(err, TS_ENOMEM, "out of memory");
        if (ts_node_select(c->cluster, sp->constraint, sp->nodelist, sp->exclude, j->node_mask,
                           err) != 0)
            return TS_EINVAL;
        s->node_mask = j->node_mask;
    }
    /* who may use it is checked at submission (ctld_submit); here its id */
    if (sp->reservation[0] &&
        ctld_resv_job(c, sp->reservation, NULL, NULL, NULL, &s->reservation, err) != 0)
        return TS_EINVAL;
    s->ckpt_signal = sp->ckpt_signal;
    s->ckpt_grace_s = sp->ckpt_grace_s;
    s->held = j->row.state == TS_JOB_HELD;
    j->reserved_at_s = -1.0;
    j->queue_tenant = j->queue_cluster = j->las_level = -1;
    j->estimated_s = -1.0;
    return ts_sched_check_job(c->sched, s, err);
}

/* ---- placement JSON ------------------------------------------------------------ */

char *ctld_placement_json_allocs(const ctld *c, const ts_alloc *allocs, int n)
{
    json_t *a = json_array();
    for (int i = 0; i < n; i++) {
        const ts_alloc *al = &allocs[i];
        json_t *g = json_array();
        for (int k = 0; k < al->ngpu; k++)
            json_array_append_new(g, json_integer(al->gpu[k]));
        json_array_append_new(
            a, json_pack("{s:s,s:o,s:i,s:I,s:I,s:I,s:i,s:i}", "node",
                         c->cluster->nodes[al->node].name, "gpus", g, "gpu_milli", al->gpu_milli,
                         "gpu_mem_mib", (json_int_t)al->gpu_mem_mib, "cpu_milli",
                         (json_int_t)al->cpu_milli, "mem_mib", (json_int_t)al->mem_mib,
                         "mig_profile", al->mig_profile, "mig_start", al->mig_start));
    }
    char *s = json_dumps(a, JSON_COMPACT);
    json_decref(a);
    return s;
}

static int placement_parse(const ctld *c, cjob *j, ts_err *err)
{
    json_error_t je;
    json_t *a = j->row.placement_json ? json_loads(j->row.placement_json, 0, &je) : NULL;
    if (!json_is_array(a) || (int)json_array_size(a) != j->ntasks) {
        json_decref(a);
        return ts_err_set(err, TS_EINVAL, "job %lld: placement: unreadable", (long long)j->row.id);
    }
    j->allocs = calloc((size_t)j->ntasks, sizeof *j->allocs);
    if (!j->allocs) {
        json_decref(a);
        return ts_err_set(err, TS_ENOMEM, "out of memory");
    }
    for (int i = 0; i < j->ntasks; i++) {
        json_t *t = json_array_get(a, (size_t)i), *g = json_object_get(t, "gpus");
        const char *node = json_string_value(json_object_get(t, "node"));
        int n = node ? ts_cluster_find_node(c->cluster, node) : -1;
        if (n < 0 || !json_is_array(g) || json_array_size(g) > TS_NODE_MAX_GPUS) {
            json_decref(a);
            return ts_err_set(err, TS_EINVAL, "job %lld: placement[%d]: node \"%s\" is gone",
                              (long long)j->row.id, i, node ? node : "?");
        }
        ts_alloc *al = &j->allocs[i];
        al->node = n;
        al->ngpu = (int)json_array_size(g);
        for (int k = 0; k < al->ngpu; k++)
            al->gpu[k] = (int8_t)json_integer_value(json_array_get(g, (size_t)k));
        al->gpu_milli = (int32_t)json_integer_value(json_object_get(t, "gpu_milli"));
        al->gpu_mem_mib = json_integer_value(json_object_get(t, "gpu_mem_mib"));
        al->cpu_milli = json_integer_value(json_object_get(t, "cpu_milli"));
        al->mem_mib = json_integer_value(json_object_get(t, "mem_mib"));
        al->mig_profile = (int8_t)json_integer_value(json_object_get(t, "mig_profile"));
        al->mig_start = (int8_t)json_integer_value(json_object_get(t, "mig_start"));
        al->shape = (int8_t)ts_request_shape(&j->tasks[i]);
    }
    json_decref(a);
    return 0;
}

char *ctld_placement_json(const ctld *c, const cjob *j)
{
    return ctld_placement_json_allocs(c, j->allocs, j->ntasks);
}

/* A job whose every rank runs on virtual nodes finishes by itself. */
double ctld_job_run_s(const cjob *j)
{
    if (j->spec->duration_s > 0.0)
        return j->spec->duration_s;
    return j->sj.time_limit_s > 0.0 ? j->sj.time_limit_s : 3600.0;
}

/* ---- open and restore -------------------------------------------------------------- */

static int read_file(const char *path, char **buf, size_t *len, ts_err *err)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return ts_err_set(err, TS_EIO, "%s: %s", path, strerror(errno));
    size_t cap = 65536, n = 0;
    char *b = malloc(cap);
    while (b) {
        size_t k = fread(b + n, 1, cap - n, f);
        n += k;
        if (n < cap)
            break;
        char *nb = realloc(b, cap * 2);
        if (!nb) {
            free(b);
            b = NULL;
            break;
        }
        b = nb;
        cap *= 2;
    }
    fclose(f);
    if (!b)
        return ts_err_set(err, TS_ENOMEM, "%s: out of memory", path);
    *buf = b;
    *len = n;
    return 0;
}

#define DRAINED_KEY "drained_nodes"

static const char DEFAULT_TENANTS[] = "tenants:\n  default: {}\n";

/* Shares are fractions of the guarantees, or of the cluster's GPUs of a
 * model nobody is guaranteed (docs/scheduler.md "Order"): else a cluster
 * without GPU guarantees has no fair share at all. CPU and memory stay
 * counted only where guaranteed, as a GPU-only tenants file means. */
static void quota_capacity(const ctld *c, ts_quota *q)
{
    int64_t cap[TS_RES_DIMS] = {0};
    for (int i = 0; i < c->cluster->nnodes; i++) {
        const ts_node *n = &c->cluster->nodes[i];
        if (n->model >= 0 && n->model < TS_MAX_GPU_MODELS)
            cap[ts_res_gpu(n->model)] += (int64_t)n->ngpu * TS_MILLI_PER_GPU;
    }
    ts_quota_set_capacity(q, cap);
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
    } else if (c->cfg.tenants_file[0]) {
        if ((rc = read_file(c->cfg.tenants_file, &yaml, &len, err)) != 0)
            return rc;
        fname = c->cfg.tenants_file;
    }
    rc = ts_load_tenants_yaml(yaml ? yaml : DEFAULT_TENANTS,
                              yaml ? len : sizeof DEFAULT_TENANTS - 1, fname, &c->tenants, err);
    free(yaml);
    if (rc == 0)
        rc = ts_quota_new(c->tenants, c->cfg.half_life_s, &c->quota, err);
    if (rc == 0)
        quota_capacity(c, c->quota);
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
    int rc = placement_parse(c, j, err);
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
    ts_job_filter f = {.state = -1, .active_only = true};
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
                brc = job_build(c, j, &e);
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
                cjob_free(j);
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
            if ((rc = job_add(c, j)) != 0) {
                cjob_free(j);
                ts_store_free_jobs(rows, n);
                return ts_err_set(err, rc, "out of memory");
            }
        }
        ts_store_free_jobs(rows, n);
        if (n < 10000)
            return 0;
    }
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
    int rc = read_file(cfg->cluster_file, &buf, &len, err);
    if (rc != 0)
        return rc;
    rc = ts_load_cluster_yaml(buf, len, cfg->cluster_file, &c->cluster, err);
    free(buf);
    if (rc == 0)
        rc = ts_store_open(cfg->store_url, &c->store, err);
    if (rc == 0 && cfg->ha_epoch > 0) /* a leader (ha.c): fenced before its first write */
        rc = ts_store_set_epoch(c->store, cfg->ha_epoch, err);
    if (rc == 0) /* no key for the secrets stored: refuse to start (docs/secrets.md) */
        rc = ctld_secrets_open(c->store, cfg->secrets_key_file, true, &c->secrets, err);
    if (rc == 0 && ctld_notify_open(c) != 0)
        rc = ts_err_set(err, TS_ENOMEM, "out of memory");
    if (rc == 0 && ctld_p2p_open(c) != 0)
        rc = ts_err_set(err, TS_ENOMEM, "out of memory");
    if (rc == 0)
        rc = load_tenants(c, err);
    if (rc == 0)
        rc = ts_sched_new(c->cluster, c->quota, &c->cfg.sched, &c->sched, err);
    if (rc != 0)
        return rc;
    size_t nn = (size_t)c->cluster->nnodes + 1;
    c->node_virtual = calloc(nn, sizeof *c->node_virtual);
    c->admin_drained = calloc(nn, sizeof *c->admin_drained);
    c->agents = calloc(nn, sizeof *c->agents);
    c->node_jobs = calloc(nn, sizeof *c->node_jobs);
    if (!c->node_virtual || !c->admin_drained || !c->agents || !c->node_jobs ||
        ctld_view_init(c) != 0)
        return ts_err_set(err, TS_ENOMEM, "out of memory");
    for (int i = 0; i < c->cluster->nnodes; i++) {
        c->node_virtual[i] = node_is_virtual(c, c->cluster->nodes[i].name);
        pthread_mutex_init(&c->agents[i].mu, NULL);
        pthread_cond_init(&c->agents[i].moved, NULL);
    }
    char *drained = NULL;
    if ((rc = ts_store_setting_get(c->store, DRAINED_KEY, &drained, err)) != 0)
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
    if ((rc = map_rebuild(c, 1024)) != 0 || (rc = queued_recount(c)) != 0)
        return ts_err_set(err, rc, "out of memory");
    if ((rc = ctld_resv_load(c, err)) != 0) /* before the jobs that name them */
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
    ctld_oidc_fini(c);
    for (int i = 0; i < c->njobs; i++)
        cjob_free(c->jobs[i]);
    free(c->jobs);
    free(c->net_tenants);
    free(c->net_partitions);
    free(c->map_ids);
    free(c->map_idx);
    free(c->node_virtual);
    free(c->admin_drained);
    ctld_resv_free(c);
    for (int i = 0; c->agents && i < c->cluster->nnodes; i++) {
        json_decref(c->agents[i].discovery);
        json_decref(c->agents[i].doc);
        free(c->agents[i].readings);
        pthread_cond_destroy(&c->agents[i].moved);
        pthread_mutex_destroy(&c->agents[i].mu);
    }
    free(c->agents);
    for (int i = 0; c->node_jobs && i < c->cluster->nnodes; i++)
        free(c->node_jobs[i].v);
    free(c->node_jobs);
    ctld_view_fini(c);
    free(c->queued);
    ctld_arrays_free(c);
    ctld_deps_free(c);
    ts_decision_fini(&c->d);
    ts_sched_free(c->sched);
    ts_quota_free(c->quota);
    ts_tenants_free(c->tenants);
    ts_cluster_free(c->cluster);
    ctld_notify_close(c); /* its thread reads secrets */
    ctld_p2p_close(c);
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

void ctld_changer_wait(ctld *c)
{
    /* counted, so that the next cycle lets it in first (loop.c) */
    c->changers_waiting++;
    pthread_cond_wait(&c->committed, &c->mu);
    if (--c->changers_waiting == 0)
        pthread_cond_broadcast(&c->committed);
}

void ctld_commit_wait(ctld *c)
{
    while (c->committing || c->cycling || c->swapping)
        ctld_changer_wait(c);
}

void ctld_settled_wait(ctld *c)
{
    while (c->cycling)
        ctld_changer_wait(c);
}

void ctld_lock_reader(ctld *c)
{
    atomic_fetch_add(&c->readers_arrived, 1);
    pthread_mutex_lock(&c->mu);
    atomic_fetch_add(&c->readers_entered, 1);
}

/* How long the cycle leaves mu to readers at one yield, at most. */
#define YIELD_MAX_S 0.005

void ctld_yield(ctld *c)
{
    /* the readers that came before this yield, not those coming during it
     * (a flood of readers would otherwise hold every yield to its limit) */
    uint64_t due = atomic_load(&c->readers_arrived);
    if (!c->cycling || atomic_load(&c->readers_entered) >= due)
        return;
    pthread_mutex_unlock(&c->mu);
    /* a mutex is not fair: taken back at once, the waiters would never get
     * it; each reader holds it for a fraction of a millisecond */
    double until = ctld_now() + YIELD_MAX_S;
    while (atomic_load(&c->readers_entered) < due && ctld_now() < until)
        sched_yield();
    pthread_mutex_lock(&c->mu);
}

void ctld_kick(ctld *c)
{
    c->dirty = true;
    pthread_cond_signal(&c->wake);
}

/* ---- submission ---------------------------------------------------------------------- */

int ctld_submit(ctld *c, const ts_job_spec *spec, const char *spec_json, const char *owner,
                const char *run_user, int64_t run_uid, const char *idem_key, int64_t *ids_out,
                int *nids, bool *existed, json_t *rendered, ts_err *err)
{
    int n = spec->array_size > 0 ? spec->array_size : 1;
    *nids = 0;
    *existed = false;
    char suffix[24];
    snprintf(suffix, sizeof suffix, "[%d]", n - 1);
    if (n > 1 && strlen(spec->name) + strlen(suffix) >= TS_STORE_NAME_MAX)
        return ts_err_set(err, TS_EINVAL, "name: too long for an array of %d (at most %zu "
                          "characters)", n, TS_STORE_NAME_MAX - 1 - strlen(suffix));
    /* validate against the cluster and tenants once, before anything is written */
    cjob probe = {0};
    probe.row.submit_s = ctld_now();
    probe.spec = (ts_job_spec *)spec;
    ctld_lock_reader(c);
    while (c->swapping) /* checked against the tenants that will be */
        pthread_cond_wait(&c->committed, &c->mu);
    int rc = job_build(c, &probe, err);
    int64_t rid;
    if (rc == 0 && spec->reservation[0]) /* the tenant and user may use it */
        rc = ctld_resv_job(c, spec->reservation, spec->tenant, owner, run_user, &rid, err);
    if (rc == 0)
        rc = ctld_fit_check(c, &probe, err); /* never runs: refused now, not left waiting */
    if (rc == 0)
        c->submitting++; /* no tenant leaves until its jobs are added */
    pthread_mutex_unlock(&c->mu);
    free(probe.tasks);
    free(probe.node_mask);
    if (rc != 0)
        return rc;
    int priority = probe.sj.priority;
    double now = ctld_now();
    /* a large array: its first elements are jobs now, the others stay one
     * record in memory and one row in the store (array_lazy.c) */
    int n_all = n;
    ts_array_row arr = {.size = n_all, .next = CTLD_ARRAY_WINDOW, .open = true};
    ctld_lazy *lazy = NULL;
    if (n > CTLD_ARRAY_WINDOW)
        n = CTLD_ARRAY_WINDOW;
    cjob **jobs = calloc((size_t)n, sizeof *jobs);
    ts_job_row *rows = calloc((size_t)n, sizeof *rows);
    bool *ex = calloc((size_t)n, sizeof *ex);
    char **mine = calloc((size_t)n, sizeof *mine);
    rc = jobs && rows && ex && mine ? 0 : ts_err_set(err, TS_ENOMEM, "out of memory");
    for (int i = 0; rc == 0 && i < n; i++) {
        ts_job_row *r = &rows[i];
        snprintf(r->tenant, sizeof r->tenant, "%s", spec->tenant);
        if (snprintf(r->name, sizeof r->name, n_all > 1 ? "%s[%d]" : "%s", spec->name, i) >=
            (int)sizeof r->name)
            rc = ts_err_set(err, TS_EINVAL, "name: too long");
        snprintf(r->owner, sizeof r->owner, "%s", owner);
        snprintf(r->run_user, sizeof r->run_user, "%s", run_user ? run_user : "");
        r->run_uid = r->run_user[0] ? run_uid : -1;
        if (idem_key && *idem_key) {
            if (n_all > 1)
                snprintf(r->idem_key, sizeof r->idem_key, "%.100s#%d", idem_key, i);
            else
                snprintf(r->idem_key, sizeof r->idem_key, "%s", idem_key);
        }
        r->state = TS_JOB_PENDING;
        r->tier = spec->tier;
        r->gpus = (int)ts_spec_gpus(spec);
        r->priority = priority;
        r->submit_s = now;
        mine[i] = r->spec_json = strdup(spec_json);
        if (!r->spec_json)
            rc = ts_err_set(err, TS_ENOMEM, "out of memory");
    }
    /* one queued group: an array of n costs about one commit */
    if (rc == 0 && n < n_all)
        rc = ts_store_array_insert(c->store, rows, n, ex, &arr, err);
    else if (rc == 0)
        rc = ts_store_job_insert_many(c->store, rows, n, ex, err);
    if (rc == 0 && n < n_all && !ex[0] &&
        !(lazy = ctld_lazy_new(&rows[0], n_all, n, spec->array_throttle)))
        rc = ts_err_set(err, TS_ENOMEM, "array %lld stored but not loaded: restart the "
                        "controller", (long long)rows[0].id);
    for (int i = 0; rc == 0 && i < n; i++) {
        ids_out[(*nids)++] = rows[i].id;
        if (ex[i]) {
            *existed = true;
            if (rendered)
                json_array_append_new(rendered, ctld_render_job(c, &rows[i], NULL));
            ts_job_row_fini(&rows[i]); /* the stored row the store handed back */
            free(mine[i]);
            mine[i] = NULL;
            continue;
        }
        cjob *j = calloc(1, sizeof *j);
        ts_spec_errors se;
        if (!j || ts_spec_parse(spec_json, strlen(spec_json), &j->spec, &se) != 0) {
            free(j);
            rc = ts_err_set(err, TS_ENOMEM, "out of memory");
            break;
        }
        j->row = rows[i];
        mine[i] = NULL; /* owned by the job now */
        jobs[i] = j;
    }
    ctld_lock_reader(c);
    for (int i = 0; i < n; i++) {
        cjob *j = jobs ? jobs[i] : NULL; /* NULL: out of memory before any was made */
        if (!j)
            continue;
        ts_err e;
        int brc = rc == 0 ? job_build(c, j, &e) : TS_EINVAL;
        if (brc == 0)
            brc = job_add(c, j);
        if (brc != 0) {
            cjob_free(j);
            if (rc == 0)
                rc = ts_err_set(err, TS_ENOMEM, "job %lld stored but not loaded: restart the "
                                "controller", (long long)rows[i].id);
            continue;
        }
        c->m.submitted++;
        if (rendered && n_all > CTLD_ARRAY_BRIEF)
            json_array_append_new(rendered, json_pack("{s:I,s:s,s:s}", "id",
                                                      (json_int_t)j->row.id, "name", j->row.name,
                                                      "state", ts_job_state_name(j->row.state)));
        else if (rendered)
            json_array_append_new(rendered, ctld_render_job(c, &j->row, j));
    }
    if (lazy && ctld_lazy_add(c, lazy) != 0) { /* it freed lazy */
        lazy = NULL;
        if (rc == 0)
            rc = ts_err_set(err, TS_ENOMEM, "array %lld stored but not loaded: restart the "
                            "controller", (long long)rows[0].id);
    }
    /* the others' ids (their {id, name, state} are written by the caller,
     * routes.c, as text: 100,000 JSON objects would cost more than the array) */
    for (int i = n; rc == 0 && n < n_all && i < n_all; i++)
        ids_out[(*nids)++] = rows[0].id + i;
    if (lazy)
        c->m.submitted += (uint64_t)(n_all - n);
    ctld_kick(c);
    if (--c->submitting == 0)
        pthread_cond_broadcast(&c->committed);
    pthread_mutex_unlock(&c->mu);
    for (int i = 0; mine && i < n; i++)
        free(mine[i]);
    free(mine);
    free(jobs);
    free(rows);
    free(ex);
    return rc;
}

void ctld_spec_share_put(ctld_spec_share *s)
{
    if (s && atomic_fetch_sub(&s->refs, 1) == 1) {
        ts_spec_free(s->spec);
        free(s);
    }
}

int ctld_jobs_adopt(ctld *c, ts_job_row *rows, int n, ctld_spec_share *share, int *added,
                    ts_err *err)
{
    *added = 0;
    cjob **jobs = calloc((size_t)n + 1, sizeof *jobs);
    int rc = jobs ? 0 : ts_err_set(err, TS_ENOMEM, "out of memory");
    for (int i = 0; rc == 0 && i < n; i++) { /* parsed with mu released */
        ts_spec_errors se;
        jobs[i] = calloc(1, sizeof *jobs[i]);
        if (jobs[i] && share) {
            atomic_fetch_add(&share->refs, 1);
            jobs[i]->spec = share->spec;
            jobs[i]->spec_share = share;
        } else if (!jobs[i] || ts_spec_parse(rows[i].spec_json, strlen(rows[i].spec_json),
                                             &jobs[i]->spec, &se) != 0)
            rc = ts_err_set(err, TS_ENOMEM, "job %lld stored but not loaded: restart the "
                            "controller", (long long)rows[i].id);
    }
    ctld_lock_reader(c);
    for (int i = 0; rc == 0 && i < n; i++) {
        cjob *j = jobs[i];
        j->row = rows[i];
        ts_err e;
        int brc = job_build(c, j, &e);
        if (brc == 0)
            brc = job_add(c, j);
        if (brc != 0) {
            j->row = (ts_job_row){0}; /* the caller keeps what was not adopted */
            rc = ts_err_set(err, brc, "job %lld stored but not loaded: restart the "
                            "controller", (long long)rows[i].id);
            break;
        }
        memset(&rows[i], 0, sizeof rows[i]);
        jobs[i] = NULL;
        (*added)++;
    }
    if (*added > 0)
        ctld_kick(c);
    pthread_mutex_unlock(&c->mu);
    for (int i = 0; jobs && i < n; i++)
        cjob_free(jobs[i]);
    free(jobs);
    return rc;
}

/* ---- actions ------------------------------------------------------------------------- */

char *ctld_run_detail(const cjob *j, double now)
{
    char buf[256];
    snprintf(buf, sizeof buf, "start=%.3f end=%.3f gpus=%d model=%s tier=%d", j->row.start_s, now,
             j->row.gpus, j->row.gpu_model[0] ? j->row.gpu_model : "-", j->row.tier);
    return strdup(buf);
}

double ctld_sched_clock(ctld *c, double now)
{
    if (now > c->sched_clock_s)
        c->sched_clock_s = now;
    return c->sched_clock_s;
}

/* Stops a running job's use of the cluster (virtual: at once). */
void ctld_job_unbind(ctld *c, cjob *j, double now)
{
    if (!j->allocs)
        return;
    now = ctld_sched_clock(c, now); /* applied maybe after a later cycle */
    ctld_nodes_touch_job(c, j); /* its agents stop what no longer should run */
    node_index_del(c, j);
    j->sj.allocs = j->allocs;
    ctld_service_run_ended(c, j, now); /* the las order keeps what it attained */
    ts_err e;
    if (ts_sched_stop(c->sched, &j->sj, now, &e) != 0) /* its GPUs would stay taken */
        fprintf(stderr, "tesserad: job %lld: releasing its allocation: %s\n",
                (long long)j->row.id, e.msg);
    free(j->allocs);
    j->allocs = NULL;
    j->sj.allocs = NULL;
    ctld_net_unbind(j);
    free(j->row.placement_json);
    j->row.placement_json = NULL;
    free(j->rank_state);
    j->rank_state = NULL;
    json_decref(j->rank_end);
    j->rank_end = NULL;
    j->timed_out = false; /* a run that ends otherwise (evicted) starts afresh */
    free(j->straggle_since);
    j->straggle_since = NULL;
    j->straggler_flagged = false;
    j->idle_since_s = 0;
    j->idle_warned = false;
}

int ctld_job_action(ctld *c, int64_t id, const char *action, ts_err *err)
{
    static const struct {
        const char *name;
        int event;
    } ACTIONS[] = {{"cancel", CTLD_JE_CANCEL},
                   {"hold", CTLD_JE_HOLD},
                   {"release", CTLD_JE_RELEASE},
                   {"requeue", CTLD_JE_REQUEUE}};
    int event = -1;
    for (size_t i = 0; i < sizeof ACTIONS / sizeof *ACTIONS; i++)
        if (strcmp(action, ACTIONS[i].name) == 0)
            event = ACTIONS[i].event;
    if (event < 0)
        return ts_err_set(err, TS_EINVAL, "action: unknown \"%s\"", action);
    /* a large array's element that is not a job yet becomes one first */
    int trc = ctld_array_take(c, id, err);
    if (trc != 0)
        return trc;
    pthread_mutex_lock(&c->mu);
    cjob *j = ctld_job_wait_unpinned(c, id); /* one change of a job at a time */
    int rc;
    if (!j) {
        rc = ts_err_set(err, TS_ENOENT, "job %lld is not active", (long long)id);
    } else {
        /* written (with mu released), then applied: a failed write changes nothing */
        ctld_txn t = {0};
        double now = ctld_now();
        rc = ctld_fsm_plan(c, &t, j, event, NULL, now, err);
        if (rc == 0)
            rc = ctld_txn_commit_unlocked(c, &t, now, err);
        ctld_txn_fini(&t);
    }
    pthread_mutex_unlock(&c->mu);
    return rc;
}

/* The list of drained nodes as stored, with node n drained or not (n < 0:
 * want[i] says for every node). */
static char *drained_list(const ctld *c, int n, bool drain, const bool *want)
{
    json_t *a = json_array();
    for (int i = 0; i < c->cluster->nnodes; i++)
        if (n < 0 ? want[i] : i == n ? drain : c->admin_drained[i])
            json_array_append_new(a, json_string(c->cluster->nodes[i].name));
    char *txt = json_dumps(a, JSON_COMPACT);
    json_decref(a);
    return txt;
}

/* Once the list is written: the node follows it. */
static void drain_applied(ctld *c, int n, bool drain)
{
    c->admin_drained[n] = drain;
    if (!drain)
        c->agents[n].drain_why[0] = '\0';
    ctld_node_refresh(c, n);
    ctld_agent_moved(c, n);
    ctld_kick(c);
}

int ctld_node_drain_cycle(ctld *c, int n, bool drain, ts_err *err)
{
    if (c->admin_drained[n] == drain)
        return 0;
    /* drain writers take turns (ctld_node_drain writes with mu released) */
    if (pthread_mutex_trylock(&c->drain_mu) != 0)
        return ts_err_set(err, TS_ETIMEDOUT, "node %s: another drain is being written",
                          c->cluster->nodes[n].name);
    char *txt = drained_list(c, n, drain, NULL);
    int rc;
    if (!txt) {
        rc = ts_err_set(err, TS_ENOMEM, "out of memory");
    } else {
        /* written with mu released, as the cycle's own commits: readers go
         * on, changers wait (committing); nothing else changes
         * admin_drained meanwhile: it needs drain_mu */
        ctld_yield(c);
        c->committing = true;
        pthread_mutex_unlock(&c->mu);
        rc = ts_store_setting_put(c->store, DRAINED_KEY, txt, err);
        pthread_mutex_lock(&c->mu);
        c->committing = false;
        pthread_cond_broadcast(&c->committed);
    }
    free(txt);
    if (rc == 0) /* written, then applied */
        drain_applied(c, n, drain);
    pthread_mutex_unlock(&c->drain_mu);
    return rc;
}

/* One drain or resume waiting to be written (on its caller's stack). */
typedef struct ctld_drain_req {
    struct ctld_drain_req *next;
    int n;
    bool drain, done;
    int rc;
    ts_err err;
} ctld_drain_req;

/* Under mu, holding drain_mu: writes every queued drain and resume as one
 * list (with mu released), applies them once written, and tells each
 * waiter its outcome. */
static void drain_write_batch(ctld *c)
{
    ctld_drain_req *batch = c->drain_q;
    c->drain_q = NULL;
    int nn = c->cluster->nnodes;
    bool *want = malloc((size_t)nn + 1);
    ts_err e;
    int rc = want ? 0 : ts_err_set(&e, TS_ENOMEM, "out of memory");
    bool changed = false;
    if (want) {
        memcpy(want, c->admin_drained, (size_t)nn);
        for (ctld_drain_req *r = batch; r; r = r->next)
            want[r->n] = r->drain; /* in the order they came */
        for (int i = 0; i < nn && !changed; i++)
            changed = want[i] != c->admin_drained[i];
    }
    if (rc == 0 && changed) {
        char *txt = drained_list(c, -1, false, want);
        if (!txt) {
            rc = ts_err_set(&e, TS_ENOMEM, "out of memory");
        } else {
            /* nothing else changes admin_drained meanwhile: it needs drain_mu */
            pthread_mutex_unlock(&c->mu);
            rc = ts_store_setting_put(c->store, DRAINED_KEY, txt, &e);
            pthread_mutex_lock(&c->mu);
            ctld_settled_wait(c); /* the nodes change only between cycles */
            free(txt);
        }
    }
    for (int i = 0; rc == 0 && changed && i < nn; i++)
        if (want[i] != c->admin_drained[i]) /* written, then applied */
            drain_applied(c, i, want[i]);
    for (ctld_drain_req *r = batch; r; r = r->next) {
        r->rc = rc;
        if (rc)
            r->err = e;
        r->done = true;
    }
    free(want);
}

int ctld_node_drain(ctld *c, const char *node, bool drain, ts_err *err)
{
    /* the list is written with mu released (an fsync must not stop the
     * readers); drain writers take turns on drain_mu, so none writes a list
     * another has not applied yet, and whoever writes takes every drain and
     * resume queued meanwhile with it (a rack of 1,000 nodes resumed one
     * request at a time took 20 s, a write each) */
    pthread_mutex_lock(&c->mu);
    int n = ts_cluster_find_node(c->cluster, node);
    if (n < 0) {
        pthread_mutex_unlock(&c->mu);
        return ts_err_set(err, TS_ENOENT, "node \"%s\" does not exist", node);
    }
    ctld_drain_req me = {.n = n, .drain = drain};
    ctld_drain_req **tail = &c->drain_q;
    while (*tail)
        tail = &(*tail)->next;
    *tail = &me;
    while (!me.done) {
        if (pthread_mutex_trylock(&c->drain_mu) == 0) {
            drain_write_batch(c);
            pthread_mutex_unlock(&c->drain_mu);
            pthread_cond_broadcast(&c->drain_cv);
        } else {
            pthread_cond_wait(&c->drain_cv, &c->mu);
        }
    }
    pthread_mutex_unlock(&c->mu);
    if (me.rc && err)
        *err = me.err;
    return me.rc;
}

int ctld_tenants_replace(ctld *c, const char *yaml, size_t len, ts_err *err)
{
    ts_tenants *ts = NULL;
    ts_quota *q = NULL;
    ts_sched *s = NULL;
    int rc = ts_load_tenants_yaml(yaml, len, "tenants", &ts, err);
    if (rc == 0)
        rc = ts_quota_new(ts, c->cfg.half_life_s, &q, err);
    if (rc == 0)
        quota_capacity(c, q); /* the cluster never changes: no lock needed */
    if (rc != 0) {
        ts_quota_free(q);
        ts_tenants_free(ts);
        return rc;
    }
    pthread_mutex_lock(&c->mu);
    while (c->swapping) /* one replacement at a time */
        pthread_cond_wait(&c->committed, &c->mu);
    /* the scheduler is swapped below: from here no new change or
     * submission starts, and those in flight end first */
    c->swapping = true;
    while (c->committing || c->cycling || c->inflight || c->submitting)
        pthread_cond_wait(&c->committed, &c->mu);
    /* every active job's tenant must still exist */
    for (int i = 0; rc == 0 && i < c->njobs; i++)
        if (ts_tenant_find(ts, c->jobs[i]->row.tenant) < 0)
            rc = ts_err_set(err, TS_EEXIST, "tenants: \"%s\" still has active jobs (job %lld)",
                            c->jobs[i]->row.tenant, (long long)c->jobs[i]->row.id);
    if (rc == 0) {
        /* written with mu released: reads go on, the rest waits (swapping) */
        pthread_mutex_unlock(&c->mu);
        rc = ts_store_tenants_put(c->store, yaml, err);
        pthread_mutex_lock(&c->mu);
    }
    c->swapping = false;
    pthread_cond_broadcast(&c->committed);
    if (rc == 0) {
        /* unbind everything, swap, bind again under the new quota */
        double now = ctld_sched_clock(c, ctld_now());
        bool *drained = calloc((size_t)c->cluster->nnodes + 1, sizeof *drained);
        for (int n = 0; drained && n < c->cluster->nnodes; n++)
            drained[n] = !ts_sched_node_schedulable(c->sched, n);
        for (int i = 0; i < c->njobs; i++)
            if (c->jobs[i]->allocs) {
                c->jobs[i]->sj.allocs = c->jobs[i]->allocs;
                ts_sched_stop(c->sched, &c->jobs[i]->sj, now, NULL);
            }
        ts_sched_free(c->sched);
        ts_quota_free(c->quota);
        ts_tenants_free(c->tenants);
        c->tenants = ts;
        c->quota = q;
        rc = ts_sched_new(c->cluster, q, &c->cfg.sched, &s, err);
        c->sched = s;
        for (int n = 0; rc == 0 && n < c->cluster->nnodes; n++)
            ctld_node_refresh(c, n);
        ctld_agents_docs_stale(c); /* a tenant's NCCL class may have changed */
        free(drained);
        for (int i = 0; rc == 0 && i < c->njobs; i++) {
            cjob *j = c->jobs[i];
            j->sj.tenant = ts_tenant_find(ts, j->row.tenant);
            if (j->allocs)
                ts_sched_start(s, &j->sj, now, NULL);
        }
        if (rc == 0 && queued_recount(c) != 0) /* by the new tenants' indexes */
            rc = ts_err_set(err, TS_ENOMEM, "out of memory");
        ctld_kick(c);
        pthread_mutex_unlock(&c->mu);
        return rc;
    }
    pthread_mutex_unlock(&c->mu);
    ts_quota_free(q);
    ts_tenants_free(ts);
    return rc;
}
