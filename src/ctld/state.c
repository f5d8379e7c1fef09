/*
 * state.c - the controller's jobs in memory: building the scheduler's view
 * of a job from its stored spec, the id map, the queued jobs per tenant,
 * the jobs by node, and submission (durable before it is acknowledged).
 * restore.c opens and restores, actions.c acts on what exists.
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
#include "ctld/http.h"
#include "ctld/input.h"
#include "ctld/steps.h"
#include "ctld/secrets.h"
#include "ctld/depend.h"
#include "ctld/job_fsm.h"
#include "tessera/load.h"
#include "tessera/mig.h"
#include "tessera/mig_plan.h"
#include "tessera/node_select.h"
#include "tessera/tenant_load.h"
#include "ctld/state.h"
#include "tessera/grow.h"



/* ---- id map ------------------------------------------------------------------ */

static uint64_t hash_id(int64_t id)
{
    uint64_t x = (uint64_t)id * UINT64_C(0x9e3779b97f4a7c15);
    return x ^ (x >> 29);
}

int ctld_map_rebuild(ctld *c, int cap)
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

int ctld_job_add(ctld *c, cjob *j)
{
    if (ts_grow((void **)&c->jobs, &c->jobs_cap, c->njobs + 1, 256, sizeof *c->jobs) != 0)
        return TS_ENOMEM;
    /* the map grows first: if it cannot, the job is in neither */
    if ((int64_t)(c->njobs + 1) * 2 > c->map_cap &&
        ctld_map_rebuild(c, c->map_cap ? c->map_cap * 2 : 1024) != 0)
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

void ctld_cjob_free(cjob *j)
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
    ctld_steps_free(j);
    free(j->straggle_since);
    free(j->elastic_step);
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
    ctld_cjob_free(j);
}

/* ---- queued jobs per tenant -------------------------------------------------- */

static bool is_queued(int state) { return state == TS_JOB_PENDING || state == TS_JOB_HELD; }

void ctld_queued_note(ctld *c, cjob *j, int from, int to)
{
    int t = j->sj.tenant;
    if (t < 0 || t >= c->nqueued)
        return;
    c->queue[t].queued += (int)is_queued(to) - (int)is_queued(from);
    if (from >= 0 && from < TS_JOB_STATES)
        c->queue[t].by_state[from]--;
    if (to >= 0 && to < TS_JOB_STATES)
        c->queue[t].by_state[to]++;
    if (is_queued(from))
        c->queue[t].queued_bytes -= j->queued_bytes;
    j->queued_bytes = 0;
    if (is_queued(to) && j->row.spec_json)
        c->queue[t].queued_bytes += j->queued_bytes = (int64_t)strlen(j->row.spec_json);
}

int ctld_tenant_queued(const ctld *c, const char *tenant)
{
    int t = ts_tenant_find(c->tenants, tenant);
    /* a large array's elements that are not jobs yet count too, each one */
    return (t >= 0 && t < c->nqueued ? c->queue[t].queued : 0) + ctld_arrays_queued(c, tenant);
}

int64_t ctld_tenant_queued_bytes(const ctld *c, const char *tenant)
{
    int t = ts_tenant_find(c->tenants, tenant);
    return (t >= 0 && t < c->nqueued ? c->queue[t].queued_bytes : 0) +
           ctld_arrays_queued_bytes(c, tenant);
}

int ctld_queued_bytes_check(const ctld *c, const char *tenant, int64_t more, const char *what,
                            ts_err *err)
{
    /* each queued job's spec is a row a cancel, an update or a start writes */
    int t = ts_tenant_find(c->tenants, tenant);
    int64_t held = ctld_tenant_queued_bytes(c, tenant) +
                   (t >= 0 && t < c->nqueued ? c->queue[t].claimed_bytes : 0);
    if (held + more <= c->cfg.queued_spec_bytes)
        return 0;
    return ts_err_set(err, TS_ENOSPC, "tenant \"%s\": its pending and held jobs' specs take "
                      "%lld bytes; %s would pass the budget of %lld MiB "
                      "(limits.queued_spec_mib_per_tenant)", tenant, (long long)held, what,
                      (long long)(c->cfg.queued_spec_bytes >> 20));
}

/* Under mu, at a submission's check: claims n queued jobs of tenant (index
 * t), each spec of `bytes`, until they are added, or refuses them if they
 * would pass limits.queued_jobs_per_tenant (TS_ELIMIT) or
 * limits.queued_spec_mib_per_tenant (TS_ENOSPC) with the queued jobs and
 * the other claims: two submissions checked at once cannot both pass. */
static int queued_claim(ctld *c, const char *tenant, int t, int n, int64_t bytes,
                        ts_err *err)
{
    bool known = t >= 0 && t < c->nqueued;
    long have = (long)ctld_tenant_queued(c, tenant) + (known ? c->queue[t].claimed : 0);
    if (have + n > (long)c->cfg.queued_per_tenant)
        return ts_err_set(err, TS_ELIMIT, "tenant \"%s\": %ld jobs pending or held, %d more "
                          "would pass the cap of %d (limits.queued_jobs_per_tenant)",
                          tenant, have, n, c->cfg.queued_per_tenant);
    char what[96];
    snprintf(what, sizeof what, "%d more of %lld bytes each", n, (long long)bytes);
    int rc = ctld_queued_bytes_check(c, tenant, (int64_t)n * bytes, what, err);
    if (rc != 0)
        return rc;
    if (known) {
        c->queue[t].claimed += n;
        c->queue[t].claimed_bytes += (int64_t)n * bytes;
    }
    return 0;
}

/* Sizes the counts for the tenants now in c->tenants and counts again. */
int ctld_queued_recount(ctld *c)
{
    int n = c->tenants->n;
    struct ctld_queue_count *q = calloc((size_t)n + 1, sizeof *q);
    if (!q)
        return TS_ENOMEM;
    free(c->queue); /* none claimed: a replacement waits for every submission's add */
    c->queue = q;
    c->nqueued = n;
    for (int i = 0; i < c->njobs; i++)
        ctld_queued_note(c, c->jobs[i], -1, c->jobs[i]->row.state);
    return 0;
}

#ifdef TS_STORE_FAULTS_ENV
bool ctld_counts_check(const ctld *c, char *why, size_t n)
{
    int *bs = calloc((size_t)(c->nqueued + 1) * TS_JOB_STATES, sizeof *bs);
    bool ok = true;
    for (int i = 0; bs && i < c->njobs; i++) {
        int t = c->jobs[i]->sj.tenant, st = c->jobs[i]->row.state;
        if (t >= 0 && t < c->nqueued && st >= 0 && st < TS_JOB_STATES)
            bs[t * TS_JOB_STATES + st]++;
    }
    for (int k = 0; bs && ok && k < c->nqueued * TS_JOB_STATES; k++) {
        int t = k / TS_JOB_STATES, st = k % TS_JOB_STATES;
        if (bs[k] != c->queue[t].by_state[st]) {
            snprintf(why, n, "tenant %d, state %s: %d jobs counted as they changed, %d there", t,
                     ts_job_state_name(st), c->queue[t].by_state[st], bs[k]);
            ok = false;
        }
    }
    free(bs);
    return ok;
}
#endif

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
        if (ts_grow((void **)&nj->v, &nj->cap, nj->n + 1, 8, sizeof *nj->v) != 0)
            return TS_ENOMEM;
        nj->v[nj->n++] = j;
    }
    return 0;
}

void ctld_node_index_del(ctld *c, const cjob *j)
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

int64_t ctld_share_key(const ctld *c, const cjob *j, const ts_request *r)
{
    if (c->nshare_one_user == 0 || !ts_request_is_share(r))
        return 0; /* no node tells users apart: shares stay one class */
    /* the user MPS sees: inside an image with a `user`, that one */
    const char *inside = j->spec && j->spec->image && j->spec->user[0] ? j->spec->user : NULL;
    return ts_share_user_key(j->row.run_uid, inside, j->row.id);
}

/* A registration's GPU sharing: on an MPS node (one user's server a GPU at
 * a time, gpu-facts.md 4.1) the scheduler keeps one user's shares a GPU.
 * The first such node gives every job's shares their user's key (a running
 * one's for when it waits again), the last one gone leaves them (harmless:
 * no node reads them); a GPU of the node already holding shares (restored
 * at a restart, before its agent registered) is their user's. Under c->mu,
 * no plan running (ctld_commit_wait). */
void ctld_share_one_user(ctld *c, int n, const ts_discovery *d)
{
    bool on = d && (d->present & TS_DC_BIT(TS_DC_GPU_SHARING)) &&
              d->gpu_sharing == TS_SHARING_MPS;
    if (ts_sched_node_share_one_user(c->sched, n) == on)
        return;
    ts_sched_node_set_share_one_user(c->sched, n, on, NULL);
    c->nshare_one_user += on ? 1 : -1;
    c->dirty = true;
    if (!on)
        return;
    for (int i = 0; i < c->njobs; i++) {
        cjob *j = c->jobs[i];
        for (int k = 0; k < j->ntasks; k++) {
            ts_request *r = &j->tasks[k];
            if (c->nshare_one_user == 1)
                r->share_key = ctld_share_key(c, j, r);
            /* what already runs there: its GPU is its user's */
            if (j->allocs && j->allocs[k].node == n && r->share_key)
                ts_sched_gpu_share_key_note(c->sched, n, j->allocs[k].gpu[0], r->share_key);
        }
    }
}

/* Builds j->tasks and j->sj from j->spec and j->row; err names the field. */
int ctld_job_build(ctld *c, cjob *j, ts_err *err)
{
    const ts_job_spec *sp = j->spec;
    j->has_dep = sp->dependency != NULL;
    /* not ranked yet (the cycle sets these while the job waits) */
    j->reserved_at_s = j->estimated_s = -1.0;
    j->queue_tenant = j->queue_cluster = j->las_level = -1;
    ctld_elastic_build(j); /* the size it asks for: its tasks below */
    int n = 0;
    for (int g = 0; g < sp->ntasks; g++)
        n += ctld_elastic_group(j, g).count;
    j->tasks = calloc((size_t)n, sizeof *j->tasks);
    if (!j->tasks)
        return ts_err_set(err, TS_ENOMEM, "out of memory");
    j->ntasks = n;
    int k = 0;
    for (int g = 0; g < sp->ntasks; g++) {
        ts_task_spec tg = ctld_elastic_group(j, g);
        const ts_task_spec *t = &tg;
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
            r.share_key = ctld_share_key(c, j, &r);
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
    s->priority -= sp->nice; /* Slurm's --nice: a positive one lowers it */
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
    _Static_assert(TS_SPEC_PUBLISH_MAX <= TS_HOST_PORTS_MAX, "a spec's ports fit the job's");
    for (int i = 0; i < sp->npublish; i++)
        j->host_ports[i] = TS_HOST_PORT(sp->publish[i].port, sp->publish[i].udp);
    if (sp->npublish > 0) { /* a per-node resource the cycle places around */
        s->host_ports = j->host_ports;
        s->nhost_ports = sp->npublish;
    }
    /* who may use it is checked at submission (ctld_submit); here its id */
    if (sp->reservation[0] &&
        ctld_resv_job(c, sp->reservation, NULL, NULL, NULL, &s->reservation, err) != 0)
        return TS_EINVAL;
    s->ckpt_signal = sp->ckpt_signal;
    s->ckpt_grace_s = sp->ckpt_grace_s;
    ctld_elastic_build(j); /* its range, into sj */
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

int ctld_placement_parse(const ctld *c, cjob *j, ts_err *err)
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
            /* the message before the document goes: node points into it */
            ts_err_set(err, TS_EINVAL, "job %lld: placement[%d]: node \"%s\" is gone",
                       (long long)j->row.id, i, node ? node : "?");
            json_decref(a);
            return TS_EINVAL;
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

/* ---- submission ---------------------------------------------------------------------- */

/* A submission checked against the cluster and tenants once, before
 * anything is written: the spec builds, its reservation is the tenant's and
 * user's, it fits (never runs: refused now, not left waiting) and the
 * tenant's queued cap holds `claim` more of the n (claimed: the caller gives
 * them back; 0 for an idempotent retry, whose jobs are stored already).
 * 0 opens a submission (ctld_submission_begin); *priority is the jobs'
 * priority, *tq the tenant's index. */
static int submit_check(ctld *c, const ts_job_spec *spec, int64_t spec_bytes,
                        const char *owner, const char *run_user, int n, int claim,
                        int *priority, int *tq, ts_err *err)
{
    /* a large array's elements past its window are not jobs yet and would
     * become jobs pending (array_lazy.c), starting: held, it would start
     * all but its first CTLD_ARRAY_WINDOW */
    if (spec->hold && n > CTLD_ARRAY_WINDOW)
        return ts_err_set(err, TS_EINVAL, "hold: an array of %d elements cannot be submitted "
                          "held (at most %d: a larger array's elements past its first %d are "
                          "not jobs yet); make it wait on a dependency (a job you hold) "
                          "instead", n, CTLD_ARRAY_WINDOW, CTLD_ARRAY_WINDOW);
    cjob probe = {0};
    probe.row.submit_s = ctld_now();
    probe.spec = (ts_job_spec *)spec;
    ctld_lock_reader(c);
    ctld_swap_wait(c); /* checked against the tenants that will be */
    int rc = ctld_job_build(c, &probe, err);
    int64_t rid;
    if (rc == 0 && spec->reservation[0]) /* the tenant and user may use it */
        rc = ctld_resv_job(c, spec->reservation, spec->tenant, owner, run_user, &rid, err);
    if (rc == 0)
        rc = ctld_fit_check(c, &probe, err); /* never runs: refused now, not left waiting */
    *tq = ts_tenant_find(c->tenants, spec->tenant);
    if (rc == 0 && claim > 0)
        rc = queued_claim(c, spec->tenant, *tq, claim, spec_bytes, err);
    if (rc == 0)
        ctld_submission_begin(c);
    pthread_mutex_unlock(&c->mu);
    free(probe.tasks);
    free(probe.node_mask);
    *priority = probe.sj.priority;
    return rc;
}

/* Under mu: the jobs made of the n stored rows join the controller, each
 * into rendered (brief past CTLD_ARRAY_BRIEF); one that cannot be built is
 * freed (stored but not loaded: an error). rc is the submission's result so
 * far: not 0, the jobs are only freed. The result after. */
static int submit_add(ctld *c, cjob **jobs, const ts_job_row *rows, int n, int n_all,
                      json_t *rendered, int rc, ts_err *err)
{
    for (int i = 0; i < n; i++) {
        cjob *j = jobs ? jobs[i] : NULL; /* NULL: out of memory before any was made */
        if (!j)
            continue;
        ts_err e;
        int brc = rc == 0 ? ctld_job_build(c, j, &e) : TS_EINVAL;
        if (brc == 0)
            brc = ctld_job_add(c, j);
        if (brc != 0) {
            ctld_cjob_free(j);
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
    return rc;
}

/* How many of a submission's n jobs claim room under the tenant's queued
 * cap: n for a new key (or none); 0 when idem_key repeats a stored
 * submission with the same body (its first element's key is the owner's
 * already: its jobs are there, so a client that retries a submission
 * answered too late is given them even with the tenant at its cap);
 * TS_EEXIST with *existed set when the stored jobs carry another body,
 * before anything is written; else the store's error. */
static int idem_claim(ctld *c, const char *owner, const char *idem_key, int n,
                      const char *spec_json, bool *existed, ts_err *err)
{
    if (!idem_key || !*idem_key)
        return n;
    char key0[TS_STORE_KEY_MAX];
    ctld_idem_element(key0, idem_key, 0);
    int64_t id0 = 0;
    int rc = ts_store_job_by_idem(c->store, owner, key0, &id0, err);
    if (rc != 0)
        return rc;
    ts_job_row row;
    if (id0 <= 0 || ts_store_job_get(c->store, id0, &row, NULL) != 0)
        return n; /* new, or gone since: the insert tells */
    bool same = row.spec_json && strcmp(row.spec_json, spec_json) == 0;
    ts_job_row_fini(&row);
    if (same)
        return 0;
    *existed = true;
    return ts_err_set(err, TS_EEXIST, "Idempotency-Key: already used by token \"%s\" for "
                      "another request body", owner);
}

/* submit_check, and where it meets the queued cap with an Idempotency-Key,
 * the key's answer instead: a retry's jobs are there, so it is checked
 * again claiming no room (*claim 0); another body under the key is its
 * conflict (idem_claim). The key is looked up only at the cap: below it the
 * insert finds a retry, without a read on every keyed submission. */
static int submit_admit(ctld *c, const ts_job_spec *spec, const char *spec_json,
                        const char *owner, const char *run_user, const char *idem_key, int n,
                        int *claim, int *priority, int *tq, bool *existed, ts_err *err)
{
    int64_t bytes = (int64_t)strlen(spec_json);
    *claim = n;
    int rc = submit_check(c, spec, bytes, owner, run_user, n, n, priority, tq, err);
    if ((rc != TS_ELIMIT && rc != TS_ENOSPC) || !idem_key || !*idem_key)
        return rc;
    int again = idem_claim(c, owner, idem_key, n, spec_json, existed, err);
    if (again != 0)
        return again < 0 ? again : rc; /* a new key: the cap's answer */
    *claim = 0;
    return submit_check(c, spec, bytes, owner, run_user, n, 0, priority, tq, err);
}

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
    int claim = n, priority = 0, tq = 0;
    int rc = submit_admit(c, spec, spec_json, owner, run_user, idem_key, n, &claim, &priority,
                          &tq, existed, err);
    if (rc != 0)
        return rc;
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
        ctld_idem_element(r->idem_key, idem_key, i);
        r->state = spec->hold ? TS_JOB_HELD : TS_JOB_PENDING;
        if (spec->hold) /* the cycle says the same of every held job */
            snprintf(r->reason, sizeof r->reason, "held");
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
    rc = submit_add(c, jobs, rows, n, n_all, rendered, rc, err);
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
    if (tq >= 0 && tq < c->nqueued) { /* added now, counted in queued */
        c->queue[tq].claimed -= claim;
        c->queue[tq].claimed_bytes -= (int64_t)claim * (int64_t)strlen(spec_json);
    }
    ctld_submission_end(c);
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
        int brc = ctld_job_build(c, j, &e);
        if (brc == 0)
            brc = ctld_job_add(c, j);
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
        ctld_cjob_free(jobs[i]);
    free(jobs);
    return rc;
}
