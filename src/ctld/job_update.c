/*
 * job_update.c - PATCH /v1/jobs/{id}: changing a job after its submission
 * (Slurm's `scontrol update job`, docs/api.md "Updating a job").
 *
 * A queued (pending or held) job may change its time limit, its size (tasks
 * and GPUs per task of a spec with one task group), its priority class, its
 * nice and its dependency; a running or stopping one only lowers its time limit, as
 * Slurm lets its users. The body's fields are written into the job's stored
 * canonical spec and the result is parsed and checked exactly as a
 * submission is (the spec parser, the tenant, the cluster's and tenant's fit,
 * the dependency's visibility), so an update can never make a job that a
 * submission would have refused. The new spec, priority and GPUs are written
 * with an "updated" event in one transaction (the FSM's CTLD_JE_UPDATE,
 * checked against the gen read), then the parsed spec replaces the live
 * job's under the same lock, so the next cycle sees only the new job. "hold"
 * in the body holds or releases the job after that, as POST .../hold does.
 *
 * Who: the job's owner, its tenant's tenant-admins and admins. A plain user
 * may lower its job's priority (its class, or a larger nice), never raise it:
 * that is for the tenant's admins (the priority orders the tenant's own
 * jobs), as Slurm lets only operators raise one.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctld/ctld.h"
#include "ctld/http.h"
#include "ctld/depend.h"
#include "ctld/job_end.h"
#include "ctld/input.h"
#include "ctld/job_fsm.h"
#include "tessera/depend.h"

/* The fields an update may carry. */
static const char *const FIELDS[] = {"time_limit", "tasks", "gpus", "priority_class", "nice",
                                     "dependency", "hold"};
#define NFIELDS (sizeof FIELDS / sizeof *FIELDS)
#define FIELDS_TEXT "time_limit, tasks, gpus, priority_class, nice, dependency, hold"

/* Replies 400 with every spec error, as a refused submission does. */
static void reply_spec_errors(ctld_reply *r, const ts_spec_errors *errs)
{
    json_t *fields = json_array();
    for (int i = 0; i < errs->n; i++) {
        const char *m = errs->msg[i];
        const char *colon = strstr(m, ": ");
        json_array_append_new(fields, colon ? json_pack("{s:s%,s:s}", "path", m,
                                                        (size_t)(colon - m), "reason", colon + 2)
                                            : json_pack("{s:s,s:s}", "path", "", "reason", m));
    }
    char line[1024];
    ts_spec_errors_join(errs, line, sizeof line);
    ctld_reply_json(r, 400, json_pack("{s:{s:s,s:s,s:o}}", "error", "code", "invalid", "message",
                                      line, "fields", fields));
}

/* Replies 400 naming the field err's message starts with ("path: why"). */
static void reply_err_field(ctld_reply *r, const ts_err *err)
{
    const char *colon = strstr(err->msg, ": ");
    ctld_reply_json(r, 400, json_pack("{s:{s:s,s:s,s:[{s:s%,s:s}]}}", "error", "code", "invalid",
                                      "message", err->msg, "fields", "path", err->msg,
                                      colon ? (size_t)(colon - err->msg) : (size_t)0, "reason",
                                      colon ? colon + 2 : err->msg));
}

/* Writes patch's spec fields into spec (the stored canonical spec, parsed).
 * false (r answered) when a field cannot apply to this spec. */
static bool patch_spec(json_t *spec, json_t *patch, ctld_reply *r)
{
    json_t *v;
    if ((v = json_object_get(patch, "time_limit")))
        json_object_set(spec, "time_limit", v);
    if ((v = json_object_get(patch, "priority_class")))
        json_object_set(spec, "priority_class", v);
    if ((v = json_object_get(patch, "nice")))
        json_object_set(spec, "nice", v);
    if ((v = json_object_get(patch, "dependency")))
        json_object_set(spec, "dependency", v);
    json_t *tasks = json_object_get(spec, "tasks");
    const char *size_keys[] = {"tasks", "gpus"};
    const char *spec_keys[] = {"count", "gpus"};
    for (int k = 0; k < 2; k++) {
        if (!(v = json_object_get(patch, size_keys[k])))
            continue;
        if (!json_is_array(tasks) || json_array_size(tasks) != 1) {
            ctld_field_error(r, size_keys[k], "the job has %zu task groups: its size is changed "
                             "in one group only (cancel and resubmit it)",
                             json_is_array(tasks) ? json_array_size(tasks) : (size_t)0);
            return false;
        }
        json_object_set(json_array_get(tasks, 0), spec_keys[k], v);
    }
    return true;
}

/* The value of priority class cls ("" = the default), or 0 if unknown. */
static int class_value(const ctld *c, const char *cls)
{
    const char *want = cls && *cls ? cls : "default";
    for (int i = 0; i < c->cfg.nclasses; i++)
        if (strcmp(c->cfg.classes[i].name, want) == 0)
            return c->cfg.classes[i].value;
    return 0;
}

/* Under mu, after the update was committed and applied to j's row: j takes
 * the new spec and, queued, the probe's tasks and scheduler view. */
static void swap_in(ctld *c, cjob *j, ts_job_spec *spec, cjob *probe, bool queued, bool new_dep)
{
    if (j->spec_share) {
        ctld_spec_share_put(j->spec_share);
        j->spec_share = NULL;
    } else {
        ts_spec_free(j->spec);
    }
    j->spec = spec;
    if (!queued) { /* only its time limit changed (the tasks run as they were) */
        j->sj.time_limit_s = spec->time_limit_s;
        double end = j->sj.start_s + ctld_job_run_s(j);
        if (j->is_virtual && end < j->end_s)
            j->end_s = end;
        return;
    }
    free(j->tasks);
    free(j->node_mask);
    j->tasks = probe->tasks;
    j->ntasks = probe->ntasks;
    j->node_mask = probe->node_mask;
    probe->tasks = NULL;
    probe->node_mask = NULL;
    ts_job old = j->sj;
    j->sj = probe->sj;
    memcpy(j->host_ports, probe->host_ports, sizeof j->host_ports);
    if (j->sj.host_ports)
        j->sj.host_ports = j->host_ports; /* the probe's copy goes with it */
    j->sj.held = old.held;
    j->sj.eligible_s = old.eligible_s;
    j->sj.attained_gpu_s = old.attained_gpu_s;
    j->sj.queued_s = old.queued_s;
    j->sj.preemptions_hour = old.preemptions_hour;
    j->has_dep = probe->has_dep;
    if (new_dep) { /* a new dependency is waited for afresh */
        j->dep_met = false;
        j->dep_sig = 0;
    }
    j->reserved_at_s = j->estimated_s = -1.0;
    j->queue_tenant = j->queue_cluster = j->las_level = -1;
    (void)c;
}

/* What a spec update starts from, read under mu. */
struct update_from {
    char *stored; /* the stored spec's JSON (owned) */
    int state;
    int64_t gen; /* the update applies only if the job is still at it */
    double limit_now;
    int class_now;
    bool queued; /* pending or held: every field may change */
};

/* The job as the update starts from it, and whether the patch may change
 * what it names in the job's state; false: r answered (409). */
static bool update_from_read(ctld *c, int64_t id, json_t *patch, struct update_from *f,
                             ctld_reply *r)
{
    pthread_mutex_lock(&c->mu);
    cjob *j = ctld_job_wait_unpinned(c, id);
    f->stored = j ? strdup(j->row.spec_json) : NULL;
    f->state = j ? j->row.state : -1;
    f->gen = j ? j->row.gen : 0;
    f->limit_now = j ? ctld_job_limit_s(c, j) : 0.0;
    f->class_now = j ? j->sj.priority : 0;
    pthread_mutex_unlock(&c->mu);
    if (!j) {
        ctld_reply_error(r, 409, "conflict", "job %lld has ended: only an active job can be "
                         "updated", (long long)id);
        return false;
    }
    f->queued = f->state == TS_JOB_PENDING || f->state == TS_JOB_HELD;
    if (!f->queued) {
        const char *other = NULL;
        for (size_t i = 0; i < NFIELDS && !other; i++)
            if (strcmp(FIELDS[i], "time_limit") != 0 && strcmp(FIELDS[i], "hold") != 0 &&
                json_object_get(patch, FIELDS[i]))
                other = FIELDS[i];
        if (other) {
            ctld_reply_error(r, 409, "conflict", "%s: job %lld is %s: only a pending or held "
                             "job changes its %s (a running one may only lower its time_limit)",
                             other, (long long)id, ts_job_state_name(f->state), other);
            free(f->stored);
            return false;
        }
    }
    return true;
}

/* The stored spec (freed here) with the patch applied, checked as a
 * submission is; NULL: r answered (400 naming the fields, or 503). */
static ts_job_spec *update_parse(int64_t id, json_t *patch, char *stored, ctld_reply *r)
{
    json_error_t je;
    json_t *doc = stored ? json_loads(stored, 0, &je) : NULL;
    free(stored);
    if (!doc) {
        ctld_reply_error(r, 503, "unavailable", "job %lld: its stored spec cannot be read",
                         (long long)id);
        return NULL;
    }
    if (!patch_spec(doc, patch, r)) {
        json_decref(doc);
        return NULL;
    }
    char *text = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    ts_job_spec *spec = NULL;
    ts_spec_errors errs;
    if (!text || ts_spec_parse(text, strlen(text), &spec, &errs) != 0) {
        if (text)
            reply_spec_errors(r, &errs);
        else
            ctld_reply_error(r, 503, "unavailable", "out of memory");
        free(text);
        return NULL;
    }
    free(text);
    return spec;
}

/* What the new spec may not do: raise a running job's time limit, make the
 * job wait for itself, or wait for jobs the caller does not see. */
static bool update_spec_ok(ctld *c, const ctld_caller *w, int64_t id, json_t *patch,
                           const ts_job_spec *spec, const struct update_from *f, ctld_reply *r)
{
    if (!f->queued && !(spec->time_limit_s > 0.0 && spec->time_limit_s < f->limit_now)) {
        ctld_field_error(r, "time_limit", "job %lld is %s: its time limit may only be lowered "
                         "(it is %.0f s now)", (long long)id, ts_job_state_name(f->state),
                         f->limit_now);
        return false;
    }
    bool ok = true;
    if (json_object_get(patch, "dependency") && spec->dependency) {
        ts_dependency d;
        if (ts_dep_parse(spec->dependency, &d, NULL, 0) == 0)
            for (int i = 0; ok && i < d.n; i++)
                if (d.items[i].type != TS_DEP_SINGLETON && d.items[i].job == id) {
                    ctld_field_error(r, "dependency", "job %lld cannot wait for itself",
                                     (long long)id);
                    ok = false;
                }
        ok = ok && ctld_dependency_ok(c, w, spec, r);
    }
    return ok;
}

/* Plan, write, apply: under mu, from the gen read at the start. The job
 * takes *spec (set NULL) when the update is written; false: r answered
 * (409 when the job moved meanwhile, 403 for a user raising its priority,
 * 400 when the new spec does not fit, 503). */
static bool update_commit(ctld *c, const ctld_caller *w, int64_t id, json_t *patch,
                          ts_job_spec **specp, const char *canon, const struct update_from *f,
                          ctld_reply *r)
{
    ts_job_spec *spec = *specp;
    ts_err err;
    int rc;
    bool ok = true;
    cjob probe = {0};
    pthread_mutex_lock(&c->mu);
    cjob *j = ctld_job_wait_unpinned(c, id);
    if (!j || j->row.gen != f->gen) {
        ctld_reply_error(r, 409, "conflict", "job %lld changed while it was being updated (it "
                         "is %s now): read it and retry", (long long)id,
                         j ? ts_job_state_name(j->row.state) : "ended");
        ok = false;
    }
    int priority = f->class_now;
    if (ok && f->queued) {
        probe.row = j->row;
        probe.row.state = f->state;
        probe.spec = spec;
        rc = ctld_job_build(c, &probe, &err);
        if (rc == 0)
            rc = ctld_fit_check(c, &probe, &err);
        if (rc != 0) {
            reply_err_field(r, &err);
            ok = false;
        }
        priority = probe.sj.priority;
    }
    int64_t grow = ok && f->queued ? (int64_t)strlen(canon) - j->queued_bytes : 0;
    char what[64];
    snprintf(what, sizeof what, "the update's %lld bytes more", (long long)grow);
    if (grow > 0 && ctld_queued_bytes_check(c, j->row.tenant, grow, what, &err) != 0) {
        ctld_reply_error(r, 413, "queued_specs_too_large", "%s", err.msg);
        ok = false;
    }
    if (ok && priority > f->class_now && w->role == TS_ROLE_USER) {
        const char *field = json_object_get(patch, "priority_class") ? "priority_class" : "nice";
        ctld_reply_error(r, 403, "forbidden", "%s: the job's priority would rise from %d to %d "
                         "(class \"%s\" %d, nice %d): a user may lower its job's priority; "
                         "raising it is for its tenant's admins", field, f->class_now, priority,
                         spec->priority_class[0] ? spec->priority_class : "default",
                         class_value(c, spec->priority_class), spec->nice);
        ok = false;
    }
    if (ok) {
        char *detail = json_dumps(patch, JSON_COMPACT | JSON_SORT_KEYS);
        ctld_fsm_args a = {.detail = detail,
                           .spec_json = canon,
                           .priority = priority,
                           .gpus = (int)ts_spec_gpus(spec)};
        ctld_txn t = {0};
        double now = ctld_now();
        rc = ctld_fsm_plan(c, &t, j, CTLD_JE_UPDATE, &a, now, &err);
        if (rc == 0)
            rc = ctld_txn_commit_unlocked(c, &t, now, &err);
        ctld_txn_fini(&t);
        free(detail);
        if (rc == 0) {
            swap_in(c, j, spec, &probe, f->queued, json_object_get(patch, "dependency") != NULL);
            *specp = NULL;
            ctld_kick(c);
        } else if (rc == TS_ECONFLICT) {
            ctld_reply_error(r, 409, "conflict", "%s", err.msg);
            ok = false;
        } else {
            ctld_reply_error(r, 503, "unavailable", "%s", err.msg);
            ok = false;
        }
    }
    pthread_mutex_unlock(&c->mu);
    free(probe.tasks);
    free(probe.node_mask);
    return ok;
}

/* The spec part of an update. true when done (or nothing to do); false
 * when r was answered with a refusal. */
static bool update_spec(ctld *c, const ctld_caller *w, int64_t id, json_t *patch, ctld_reply *r)
{
    bool any = false;
    for (size_t i = 0; i < NFIELDS; i++)
        any = any || (strcmp(FIELDS[i], "hold") != 0 && json_object_get(patch, FIELDS[i]));
    if (!any)
        return true;
    ts_err err;
    int rc = ctld_array_take(c, id, &err); /* a large array's element becomes a job */
    if (rc != 0) {
        ctld_reply_error(r, 503, "unavailable", "%s", err.msg);
        return false;
    }
    struct update_from f;
    if (!update_from_read(c, id, patch, &f, r))
        return false;
    ts_job_spec *spec = update_parse(id, patch, f.stored, r);
    if (!spec)
        return false;
    char *canon = ts_spec_to_json(spec);
    bool ok = canon != NULL;
    if (!ok)
        ctld_reply_error(r, 503, "unavailable", "out of memory");
    ok = ok && update_spec_ok(c, w, id, patch, spec, &f, r) &&
         update_commit(c, w, id, patch, &spec, canon, &f, r);
    ts_spec_free(spec);
    free(canon);
    return ok;
}

void ctld_job_patch(ctld *c, const ctld_request *rq, const ts_job_row *row, bool content,
                    ctld_reply *r)
{
    const ctld_caller *w = rq->who;
    int64_t id = row->id;
    if (w->role == TS_ROLE_VIEWER) {
        ctld_reply_error(r, 403, "forbidden", "role viewer cannot change jobs");
        return;
    }
    if (!ctld_may_manage(w, row->owner)) {
        ctld_reply_not_owner(r, "job", id, row->owner, "update");
        return;
    }
    json_error_t je;
    json_t *patch = rq->body && rq->len ? json_loadb(rq->body, rq->len, 0, &je) : NULL;
    if (!json_is_object(patch) || json_object_size(patch) == 0) {
        ctld_field_error(r, "body", "a JSON object with at least one of " FIELDS_TEXT);
        json_decref(patch);
        return;
    }
    const char *key;
    json_t *v;
    json_object_foreach(patch, key, v)
    {
        bool known = false;
        for (size_t i = 0; i < NFIELDS; i++)
            known = known || strcmp(key, FIELDS[i]) == 0;
        if (!known) {
            ctld_field_error(r, key, "not a field an update changes (" FIELDS_TEXT ")");
            json_decref(patch);
            return;
        }
    }
    json_t *hold = json_object_get(patch, "hold");
    if (hold && !json_is_boolean(hold)) {
        ctld_field_error(r, "hold", "true (hold the job) or false (release it)");
        json_decref(patch);
        return;
    }
    if (!update_spec(c, w, id, patch, r)) {
        json_decref(patch);
        return;
    }
    ts_err err;
    int rc = 0;
    if (hold) {
        bool want = json_is_true(hold);
        ts_job_row now;
        int state = row->state;
        if (ts_store_job_get(c->store, id, &now, NULL) == 0) {
            state = now.state;
            ts_job_row_fini(&now);
        }
        if ((state == TS_JOB_HELD) != want || (state != TS_JOB_PENDING && state != TS_JOB_HELD))
            rc = ctld_job_action(c, id, want ? "hold" : "release", rq->who->name, &err);
        if (rc == TS_ENOENT || rc == TS_ECONFLICT)
            ctld_reply_error(r, 409, "conflict", "hold: job %lld is %s: only a pending job "
                             "can be held, a held one released", (long long)id,
                             ts_job_state_name(state));
        else if (rc != 0)
            ctld_reply_error(r, 503, "unavailable", "%s", err.msg);
        if (rc != 0) {
            json_decref(patch);
            return;
        }
    }
    json_decref(patch);
    ts_job_row now;
    if (ts_store_job_get(c->store, id, &now, NULL) != 0) {
        ctld_reply_json(r, 200, NULL);
        return;
    }
    json_t *spec = ctld_render_spec(&now); /* before the lock */
    ctld_lock_reader(c);
    json_t *doc = ctld_render_job_parsed(c, &now, ctld_job_find(c, id), spec);
    pthread_mutex_unlock(&c->mu);
    if (doc && !content)
        ctld_privacy_redact_job(doc);
    ctld_reply_json(r, 200, json_pack("{s:o}", "job", doc));
    ts_job_row_fini(&now);
}
