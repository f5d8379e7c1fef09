/*
 * render.c - the JSON the API answers with: jobs (docs/api.md "Job"),
 * nodes ("Node") and tenants. Under c->mu where it reads memory.
 */
#include <stdio.h>
#include <string.h>

#include "ctld/ctld.h"
#include "ctld/http.h"
#include "ctld/depend.h"
#include "tessera/mig.h"

static json_t *time_or_null(double t) { return t > 0.0 ? json_real(t) : json_null(); }

static json_t *str_or_null(const char *s) { return s && *s ? json_string(s) : json_null(); }

/* A rank's share of its GPUs: gpu_milli below 1000 for part of one GPU, and
 * the MIG profile and first slice for a MIG instance (null otherwise). */
static void placement_share(const ctld *c, const json_t *t, json_t *e)
{
    json_t *milli = json_object_get(t, "gpu_milli");
    if (json_is_integer(milli))
        json_object_set(e, "gpu_milli", milli);
    int prof = (int)json_integer_value(json_object_get(t, "mig_profile"));
    const char *node = json_string_value(json_object_get(t, "node"));
    int n = node ? ts_cluster_find_node(c->cluster, node) : -1;
    const ts_mig_profile *p = NULL;
    if (n >= 0 && c->cluster->nodes[n].model >= 0 && prof > 0)
        p = ts_mig_profile_get(ts_gpu_model_get(c->cluster->nodes[n].model)->mig_geometry, prof);
    json_object_set_new(e, "mig_profile", p ? json_string(p->name) : json_null());
    json_object_set(e, "mig_start", p ? json_object_get(t, "mig_start") : json_null());
}

/* How an ended job ended (its result_json, job_end.c): "exit_code",
 * "signal" and "ranks", each null while it runs or when nothing is known
 * (a virtual run, a cancel). */
static void render_result(const ts_job_row *row, json_t *doc)
{
    json_error_t je;
    json_t *res = row->result_json ? json_loads(row->result_json, 0, &je) : NULL;
    static const char *const KEYS[] = {"exit_code", "signal", "ranks"};
    for (size_t k = 0; k < sizeof KEYS / sizeof KEYS[0]; k++) {
        json_t *v = json_object_get(res, KEYS[k]);
        json_object_set_new(doc, KEYS[k], v ? json_incref(v) : json_null());
    }
    json_decref(res);
}

/* The one way a job's GPUs are written, for the CLI and the console alike
 * (docs/api.md "Job" gpus_text): per task group "8×H100-80GB" (whole GPUs
 * in all), "4×0.25 H100-80GB (1 GPU)" (shares, and the GPUs they add up
 * to), "2×1g.10gb" (MIG instances); groups joined by " + "; "-" without
 * GPUs. The model is the one the job runs on (or asked for), else "any". */
/* A number, or an elastic range's minimum ({min, max}). */
static long long int_or_min(const json_t *v)
{
    return json_integer_value(json_is_object(v) ? json_object_get(v, "min") : v);
}

/* An elastic job's range and the size it runs at or asks for (docs/api.md
 * "Job" elastic), or null. */
static json_t *elastic_doc(const ts_job_row *live, const cjob *active, const json_t *placement)
{
    if (!active || active->sj.elastic_max_gpus <= 0)
        return json_null();
    int now = 0;
    size_t i;
    json_t *t;
    json_array_foreach(placement, i, t) now += (int)json_array_size(json_object_get(t, "gpus"));
    if (!live->placement_json)
        now = active->elastic_gpus;
    return json_pack("{s:i,s:i,s:i,s:i}", "min_gpus", active->sj.elastic_min_gpus, "max_gpus",
                     active->sj.elastic_max_gpus, "gpus", now, "resize_to", active->resize_to);
}

static json_t *gpus_text(const json_t *spec, const char *model)
{
    char out[1024] = "";
    size_t used = 0;
    const char *m = model && *model ? model : "any";
    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(spec, "tasks"), i, t) {
        long long count = int_or_min(json_object_get(t, "count"));
        long long gpus = int_or_min(json_object_get(t, "gpus"));
        const json_t *frac = json_object_get(t, "gpu_fraction");
        const char *mig = json_string_value(json_object_get(t, "mig_profile"));
        char one[320];
        if (mig) {
            snprintf(one, sizeof one, "%lld×%s", count, mig);
        } else if (json_is_number(frac)) {
            double f = json_number_value(frac), total = (double)count * f;
            snprintf(one, sizeof one, "%lld×%g %s (%g GPU%s)", count, f, m, total,
                     total == 1.0 ? "" : "s");
        } else if (gpus > 0) {
            snprintf(one, sizeof one, "%lld×%s", count * gpus, m);
        } else {
            continue;
        }
        int w = snprintf(out + used, sizeof out - used, "%s%s", used ? " + " : "", one);
        if (w < 0 || (size_t)w >= sizeof out - used)
            break;
        used += (size_t)w;
    }
    return json_string(used ? out : "-");
}

json_t *ctld_render_job(const ctld *c, const ts_job_row *row, const cjob *active)
{
    return ctld_render_job_parsed(c, row, active, ctld_render_spec(row));
}

json_t *ctld_render_spec(const ts_job_row *row)
{
    json_error_t je;
    return row->spec_json ? json_loads(row->spec_json, 0, &je) : NULL;
}

json_t *ctld_render_job_parsed(const ctld *c, const ts_job_row *row, const cjob *active,
                               json_t *spec)
{
    json_error_t je;
    json_t *placement = json_null();
    /* an active job as memory has it: the store row may already hold a
     * change written but not yet applied (the cycle's starts, between their
     * commit and its apply), which the nodes, usage and /metrics do not show
     * until it is (loop.c); memory changes with them, under mu */
    const ts_job_row *live = active ? &active->row : row;
    const char *pj = live->placement_json;
    if (pj) {
        json_t *p = json_loads(pj, 0, &je);
        if (p) {
            json_decref(placement);
            placement = json_array();
            size_t i;
            json_t *t;
            json_array_foreach(p, i, t)
            {
                json_t *e = json_pack("{s:O,s:O}", "node", json_object_get(t, "node"),
                                      "gpus", json_object_get(t, "gpus"));
                placement_share(c, t, e); /* the console draws shares and MIG slices */
                json_array_append_new(placement, e);
            }
            json_decref(p);
        }
    }
    json_t *doc = json_pack("{s:I,s:s,s:s,s:s,s:s,s:s,s:i,s:i,s:o,s:o,s:o,s:o,s:i,s:o,s:o,s:o,s:o}",
                     "id", (json_int_t)row->id, "name", row->name, "tenant", row->tenant,
                     "owner", row->owner, "state", ts_job_state_name(live->state), "tier",
                     row->tier == TS_TIER_GUARANTEED ? "guaranteed" : "opportunistic",
                     "priority", row->priority, "gpus", row->gpus, "gpu_model",
                     str_or_null(row->gpu_model), "submit_time", time_or_null(row->submit_s),
                     "start_time", time_or_null(live->start_s), "end_time",
                     time_or_null(live->end_s), "preemptions", live->preemptions, "reason",
                     str_or_null(live->reason), "why", str_or_null(live->why), "placement",
                     placement, "spec", spec ? spec : json_null());
    if (doc) /* runs stopped to run again (TESSERA_RESTARTS) */
        json_object_set_new(doc, "restarts", json_integer(live->restarts));
    if (doc) {
        render_result(active ? &active->row : row, doc);
        /* the Unix identity its tasks run as (docs/api.md "Tokens") */
        json_object_set_new(doc, "run_as", row->run_user[0]
                                               ? json_pack("{s:s,s:I}", "unix_user", row->run_user,
                                                           "uid", (json_int_t)row->run_uid)
                                               : json_null());
        json_object_set_new(doc, "gpus_text", gpus_text(spec, row->gpu_model));
        json_object_set_new(doc, "elastic", elastic_doc(live, active, placement));
        if (active && active->pull_seen_s > 0 && live->state == TS_JOB_RUNNING) {
            /* started, its image still coming to a node (docs/images.md) */
            json_object_set_new(doc, "image_pull",
                                json_pack("{s:i,s:I,s:I,s:o}", "rank", active->pull_rank,
                                          "done_bytes", (json_int_t)active->pull_done,
                                          "total_bytes", (json_int_t)active->pull_total, "note",
                                          active->pull_note[0] ? json_string(active->pull_note)
                                                               : json_null()));
            if (!live->reason[0])
                json_object_set_new(doc, "reason", json_string("image_pull"));
        }
        if (active && live->state == TS_JOB_PENDING && c->prefetch_job == row->id &&
            c->nprefetch_nodes > 0) {
            /* its image fetched ahead where its start is planned (docs/images.md) */
            json_t *nodes = json_array(), *ready = json_array();
            for (int i = 0; i < c->nprefetch_nodes; i++) {
                int n = c->prefetch_nodes[i];
                json_t *name = json_string(c->cluster->nodes[n].name);
                if (__atomic_load_n(&c->agents[n].prefetch_ready, __ATOMIC_RELAXED) == row->id)
                    json_array_append(ready, name);
                json_array_append_new(nodes, name);
            }
            json_object_set_new(doc, "image_prefetch",
                                json_pack("{s:o,s:o}", "nodes", nodes, "ready", ready));
        }
        ctld_render_queue(c, active, doc);
    }
    return doc;
}

void ctld_render_queue(const ctld *c, const cjob *j, json_t *doc)
{
    bool pending = j && j->row.state == TS_JOB_PENDING;
    json_t *pos = json_null(), *est = json_null(), *las = json_null();
    char standing[160] = "";
    if (pending && j->queue_tenant >= 0)
        pos = json_pack("{s:i,s:i}", "tenant", j->queue_tenant + 1, "cluster",
                        j->queue_cluster + 1);
    if (pending && j->estimated_s > 0.0)
        est = json_pack("{s:f,s:s}", "time", j->estimated_s, "basis",
                        j->reserved_at_s > 0.0 && j->estimated_s >= j->reserved_at_s
                            ? "reservation"
                            : "plan");
    else if (pending)
        est = json_pack("{s:s}", "reason",
                        j->queue_tenant < 0 ? ctld_dep_waits(j)
                                                  ? "not ranked: waits for its dependency"
                                                  : "not ranked: held, backing off or invalid"
                                            : "not planned: only the first 8 jobs that lack "
                                              "room are planned each cycle");
    double h = 0.0;
    if (j) {
        /* its finished runs, and the current one while it runs */
        double run = j->allocs && j->sj.start_s > 0.0 ? ctld_now() - j->sj.start_s : 0.0;
        h = (j->sj.attained_gpu_s + (run > 0.0 ? run * ts_sched_job_rate(c->sched, &j->sj)
                                               : 0.0)) / 3600.0;
        las = json_pack("{s:o,s:f}", "level",
                        j->las_level >= 0 ? json_integer(j->las_level) : json_null(),
                        "attained_gpu_hours", h);
    }
    if (pending && j->queue_tenant >= 0 && j->las_level >= 0)
        snprintf(standing, sizeof standing, "level %d: attained %.3g GPU-h; %d job%s ahead in %s",
                 j->las_level, h, j->queue_tenant, j->queue_tenant == 1 ? "" : "s",
                 j->row.tenant);
    else if (pending && j->queue_tenant >= 0)
        snprintf(standing, sizeof standing, "%d job%s ahead in %s (fifo)", j->queue_tenant,
                 j->queue_tenant == 1 ? "" : "s", j->row.tenant);
    json_object_set_new(doc, "queue_position", pos);
    json_object_set_new(doc, "estimated_start", est);
    json_object_set_new(doc, "las", las);
    json_object_set_new(doc, "standing", standing[0] ? json_string(standing) : json_null());
}

/* Where a node sits ("topology": level name -> vertex name, the nearest
 * level first, the node's own vertex left out) and each GPU's mode and use ("gpu_devices"),
 * for the console's cluster map. */
static void node_layout(const ctld *c, int node, json_t *doc)
{
    const ts_node *n = &c->cluster->nodes[node];
    const ts_topo *topo = c->cluster->topo;
    json_t *where = json_object();
    for (int v = topo ? n->topo_vertex : -1; v >= 0; v = ts_topo_parent(topo, v))
        if (strcmp(ts_topo_name(topo, v), n->name) != 0) /* the node's own vertex */
            json_object_set_new(where, ts_topo_level_name(topo, ts_topo_depth(topo, v)),
                                json_string(ts_topo_name(topo, v)));
    json_object_set_new(doc, "topology", where);
    json_t *gpus = json_array();
    for (int g = 0; g < n->ngpu; g++) {
        const ts_gpu *u = &n->gpu[g];
        json_array_append_new(gpus, json_pack("{s:i,s:s,s:i,s:i}", "gpu", g, "mode",
                                              ts_gpu_mode_name(u->mode), "used_milli",
                                              (int)u->milli_used, "tasks", (int)u->ntasks));
    }
    json_object_set_new(doc, "gpu_devices", gpus);
}

json_t *ctld_render_node(const ctld *c, int node)
{
    const ts_node *n = &c->cluster->nodes[node];
    json_t *labels = json_object();
    for (int i = 0; i < n->nlabels; i++)
        json_object_set_new(labels, n->labels[i].key, json_string(n->labels[i].value));
    json_t *mig = json_array();
    int geo = n->model >= 0 ? ts_gpu_model_get(n->model)->mig_geometry : TS_MIG_NONE;
    for (int g = 0; g < n->ngpu; g++) {
        if (n->gpu[g].mode != TS_GPU_MIG)
            continue;
        json_t *inst = json_array();
        for (int k = 0; k < n->gpu[g].mig.n; k++) {
            const ts_mig_instance *mi = &n->gpu[g].mig.inst[k];
            const ts_mig_profile *p = ts_mig_profile_get(geo, mi->profile_id);
            json_array_append_new(inst, json_pack("{s:s,s:i,s:b}", "profile",
                                                  p ? p->name : "?", "start", mi->start, "used",
                                                  mi->busy != 0));
        }
        json_array_append_new(mig, json_pack("{s:i,s:o}", "gpu", g, "instances", inst));
    }
    /* the node's own jobs (the per-node index), not every active job: a
     * resume of each of 1,000 nodes with 100,000 jobs queued scanned them
     * all, under the lock, for every answer */
    json_t *jobs = json_array();
    const ctld_node_jobs *nj = &c->node_jobs[node];
    int64_t prev = 0;
    for (int k = 0; k < nj->n; k++) { /* ascending ids: the smallest above prev, each time */
        int64_t next = INT64_MAX;
        for (int i = 0; i < nj->n; i++)
            if (nj->v[i]->row.id > prev && nj->v[i]->row.id < next)
                next = nj->v[i]->row.id;
        json_array_append_new(jobs, json_integer(next));
        prev = next;
    }
    bool up = ts_sched_node_schedulable(c->sched, node);
    /* health comes from the node agent (its own issue); a virtual node has
     * no hardware to be sick, a real one is unknown until an agent reports */
    const ctld_agent *ag = &c->agents[node];
    pthread_mutex_t *agmu = &c->agents[node].mu; /* the agent's own lock: last_seen_s */
    pthread_mutex_lock(agmu);
    double last_seen = ag->last_seen_s;
    pthread_mutex_unlock(agmu);
    static const char *const HEALTH[] = {"ok", "degraded", "failed"};
    json_t *health =
        c->node_virtual[node]
            ? json_pack("{s:s,s:s}", "state", "ok", "source", "virtual node")
        : ag->registered
            ? json_pack("{s:s,s:s,s:s,s:f}", "state", HEALTH[ag->health], "source", "agent",
                        "reasons", ag->health_why, "last_seen", last_seen)
            : json_pack("{s:s,s:s}", "state", "unknown", "source", "no agent");
    const char *why = up                        ? NULL
                      : c->admin_drained[node]  ? (ag->drain_why[0] ? ag->drain_why
                                                                    : "drained by an admin")
                      : !c->node_virtual[node] && !ag->registered ? "no agent"
                      : ag->health != CTLD_HEALTHY ? ag->health_why
                                                   : NULL;
    json_t *doc = json_pack("{s:s,s:s,s:o,s:b,s:o,s:o,s:i,s:i,s:I,s:I,s:I,s:I,s:o,s:o,s:o}", "name",
                     n->name, "state", up ? "up" : "drained", "drain_reason",
                     why ? json_string(why) : json_null(), "virtual", c->node_virtual[node], "health",
                     health,
                     "gpu_model",
                     n->model >= 0 ? json_string(ts_gpu_model_get(n->model)->name) : json_null(),
                     "gpus", n->ngpu, "gpus_free", n->gpus_free, "cpu_milli",
                     (json_int_t)n->cpu_milli, "cpu_free_milli",
                     (json_int_t)(n->cpu_milli - n->cpu_used), "memory_mib",
                     (json_int_t)n->mem_mib, "memory_free_mib",
                     (json_int_t)(n->mem_mib - n->mem_used), "mig", mig, "jobs", jobs, "labels",
                     labels);
    if (doc)
        node_layout(c, node, doc);
    /* the agent could not make NVML match the MIG layout (docs/agent-mig-mps.md) */
    if (doc && ag->mig_error[0])
        json_object_set_new(doc, "mig_error", json_string(ag->mig_error));
    return doc;
}
