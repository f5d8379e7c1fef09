/*
 * steps_view.c - a job's steps as the API shows them (GET /v1/jobs/{id}/steps,
 * the step events' detail, accounting): their documents, and the reads.
 *
 * A job may have 4096 steps of 64 KiB commands: rendering them all under
 * c->mu on every list made every reader, every agent's sync and the cycle
 * wait for one tenant's loop of lists. So a list takes, under c->mu, a view
 * of each step - its numbers, its nodes' names (the cluster's nodes are
 * fixed) and a reference on its command, which never changes once made
 * (steps_internal.h) - and renders the views after releasing it. One step
 * with its tasks' output (?step=N) is rendered under c->mu: it is one step.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctld/http.h"
#include "ctld/router.h"
#include "ctld/steps.h"
#include "ctld/steps_internal.h"

static const char *const STEP_STATES[] = {"running", "completed", "failed", "cancelled"};

/* What a step's document shows but its tasks: taken under c->mu, rendered
 * with or without it. */
typedef struct step_view {
    int id, state, ntasks, exit_code;
    int64_t job;
    double start_s, end_s, gpu_s;
    char why[160];
    ctld_step_cmd *cmd;   /* a reference */
    const char **nodes;   /* [nnodes] the cluster's names (fixed) */
    int nnodes;
} step_view;

ctld_step *ctld_step_find(const cjob *j, int id)
{
    for (int i = 0; j->steps && i < j->steps->n; i++)
        if (j->steps->v[i].id == id)
            return &j->steps->v[i];
    return NULL;
}

const char *ctld_step_node(const ctld *c, const cjob *j, int rank)
{
    return j->allocs && rank < j->ntasks ? c->cluster->nodes[j->allocs[rank].node].name : "";
}

static double task_gpus(const cjob *j, int rank)
{
    const ts_alloc *a = &j->allocs[rank];
    if (a->ngpu == 1 && a->gpu_milli > 0 && a->gpu_milli < 1000)
        return a->gpu_milli / 1000.0;
    return a->ngpu;
}

static double step_gpu_s(const cjob *j, const ctld_step *s, double now)
{
    double sum = 0;
    for (int i = 0; i < s->n; i++) {
        double end = s->task[i].end > 0 ? s->task[i].end : s->end_s > 0 ? s->end_s : now;
        if (j->allocs && s->task[i].rank < j->ntasks && end > s->start_s)
            sum += task_gpus(j, s->task[i].rank) * (end - s->start_s);
    }
    return sum;
}

static int step_exit(const ctld_step *s)
{
    int code = 0;
    for (int i = 0; i < s->n; i++)
        if (s->task[i].code > code)
            code = s->task[i].code;
    return code;
}

static void view_fini(step_view *v)
{
    ctld_step_cmd_put(v->cmd);
    free(v->nodes);
    memset(v, 0, sizeof *v);
}

/* Under c->mu: step s of job j as v; false when out of memory. */
static bool view_of(const ctld *c, const cjob *j, const ctld_step *s, double now, step_view *v)
{
    *v = (step_view){.id = s->id, .state = s->state, .ntasks = s->n, .exit_code = step_exit(s),
                     .job = j->row.id, .start_s = s->start_s, .end_s = s->end_s,
                     .gpu_s = step_gpu_s(j, s, now), .cmd = s->cmd};
    snprintf(v->why, sizeof v->why, "%s", s->why);
    atomic_fetch_add(&v->cmd->refs, 1);
    if (s->n > 0 && !(v->nodes = malloc((size_t)s->n * sizeof *v->nodes))) {
        view_fini(v);
        return false;
    }
    for (int i = 0; i < s->n; i++) {
        const char *nd = ctld_step_node(c, j, s->task[i].rank);
        bool seen = false;
        for (int k = 0; k < v->nnodes && !seen; k++)
            seen = v->nodes[k] == nd; /* one name per node: the same pointer */
        if (!seen)
            v->nodes[v->nnodes++] = nd;
    }
    return true;
}

/* The step's document without its tasks (with or without c->mu). */
static json_t *view_json(const step_view *v)
{
    json_t *cmd = json_array(), *nodes = json_array();
    for (int i = 0; i < v->cmd->argc; i++)
        json_array_append_new(cmd, json_string(v->cmd->argv[i]));
    for (int i = 0; i < v->nnodes; i++)
        json_array_append_new(nodes, json_string(v->nodes[i]));
    char name[48];
    snprintf(name, sizeof name, "%lld.%d", (long long)v->job, v->id);
    json_t *o = json_pack(
        "{s:i,s:I,s:s,s:s,s:o,s:i,s:o,s:f,s:o,s:o,s:f}", "id", v->id, "job", (json_int_t)v->job,
        "name", name, "state", STEP_STATES[v->state], "command", cmd, "ntasks", v->ntasks,
        "nodes", nodes, "start", v->start_s, "end",
        v->end_s > 0 ? json_real(v->end_s) : json_null(), "exit_code",
        v->state == STEP_RUNNING ? json_null() : json_integer(v->exit_code), "gpu_seconds",
        v->gpu_s);
    if (o && v->why[0])
        json_object_set_new(o, "reason", json_string(v->why));
    return o;
}

/* Each task's rank, node, state, exit status and output, for one step. */
static json_t *tasks_json(const ctld *c, const cjob *j, const ctld_step *s)
{
    json_t *t = json_array();
    for (int i = 0; i < s->n; i++) {
        const ctld_step_task *k = &s->task[i];
        int st = k->st;
        const char *sn = st == CTLD_RANK_DONE      ? "completed"
                         : st == CTLD_RANK_FAILED  ? "failed"
                         : st == CTLD_RANK_STOPPED ? "stopped"
                         : st == CTLD_RANK_RUNNING ? "running"
                                                   : "pending";
        json_array_append_new(
            t, json_pack("{s:i,s:i,s:s,s:s,s:o,s:s,s:s}", "task", i, "rank", k->rank, "node",
                         ctld_step_node(c, j, k->rank), "state", sn, "exit_code",
                         k->code >= 0 ? json_integer(k->code) : json_null(), "stdout",
                         k->out ? k->out : "", "stderr", k->err ? k->err : ""));
    }
    return t;
}

json_t *ctld_step_json(const ctld *c, const cjob *j, const ctld_step *s, bool tasks, double now)
{
    step_view v;
    if (!view_of(c, j, s, now, &v))
        return NULL;
    json_t *o = view_json(&v);
    view_fini(&v);
    if (o && tasks)
        json_object_set_new(o, "tasks", tasks_json(c, j, s));
    return o;
}

/* Under c->mu, which this releases: the list of job j's steps, rendered
 * once mu is released. NULL when out of memory. */
static json_t *list_unlocked(ctld *c, const cjob *j)
{
    int n = j->steps ? j->steps->n : 0, nv = 0;
    step_view *v = n > 0 ? calloc((size_t)n, sizeof *v) : NULL;
    double now = ctld_now();
    bool ok = n == 0 || v;
    for (int k = 0; ok && k < n; k++)
        if ((ok = view_of(c, j, &j->steps->v[k], now, &v[k])))
            nv++;
    pthread_mutex_unlock(&c->mu);
    json_t *a = ok ? json_array() : NULL;
    for (int k = 0; k < nv; k++) {
        if (a && json_array_append_new(a, view_json(&v[k])) != 0) {
            json_decref(a);
            a = NULL;
        }
        view_fini(&v[k]);
    }
    free(v);
    return a;
}

json_t *ctld_steps_of(ctld *c, int64_t id, ts_err *err)
{
    ctld_lock_reader(c);
    const cjob *j = ctld_job_find(c, id);
    if (j) {
        json_t *a = list_unlocked(c, j);
        if (!a)
            ts_err_set(err, TS_ENOMEM, "out of memory");
        return a;
    }
    pthread_mutex_unlock(&c->mu);
    ctld_reply r = {0};
    json_t *a = ctld_step_events(c, id, "step-ended", &r);
    if (!a)
        ts_err_set(err, TS_EIO, "the store: %s", r.body ? r.body : "unavailable");
    free(r.body);
    return a;
}

/* An ended job's steps, or one of them (one >= 0), from its events. */
static void ended_get(ctld *c, const ctld_request *rq, int64_t one, ctld_reply *r)
{
    json_t *a = ctld_step_events(c, rq->id, "step-ended", r);
    if (!a)
        return;
    if (one < 0) {
        ctld_reply_json(r, 200, json_pack("{s:o}", "steps", a));
        return;
    }
    size_t k;
    json_t *s;
    json_array_foreach(a, k, s)
    {
        if (json_integer_value(json_object_get(s, "id")) == one) {
            ctld_reply_json(r, 200, json_pack("{s:O}", "step", s));
            json_decref(a);
            return;
        }
    }
    json_decref(a);
    ctld_reply_error(r, 404, "not_found", "job %lld has no step %lld", (long long)rq->id,
                     (long long)one);
}

void ctld_steps_get(ctld *c, const ctld_request *rq, ctld_reply *r)
{
    int64_t one = -1;
    if (rq->q.step && !ctld_parse_number(rq->q.step, "step", 0, CTLD_STEPS_MAX, &one, r))
        return;
    ctld_lock_reader(c);
    const cjob *j = ctld_job_find(c, rq->id);
    if (!j) { /* ended: what its events keep */
        pthread_mutex_unlock(&c->mu);
        ended_get(c, rq, one, r);
        return;
    }
    if (one >= 0) {
        const ctld_step *s = ctld_step_find(j, (int)one);
        json_t *o = s ? ctld_step_json(c, j, s, true, ctld_now()) : NULL;
        pthread_mutex_unlock(&c->mu);
        if (o)
            ctld_reply_json(r, 200, json_pack("{s:o}", "step", o));
        else if (s)
            ctld_reply_error(r, 503, "unavailable", "out of memory");
        else
            ctld_reply_error(r, 404, "not_found", "job %lld has no step %lld",
                             (long long)rq->id, (long long)one);
        return;
    }
    json_t *a = list_unlocked(c, j);
    if (a)
        ctld_reply_json(r, 200, json_pack("{s:o}", "steps", a));
    else
        ctld_reply_error(r, 503, "unavailable", "out of memory");
}
