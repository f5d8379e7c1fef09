/*
 * steps.c - steps inside an allocation (see steps.h; the credential is
 * steps_cred.c, the documents and reads steps_view.c): the steps a job has
 * run and runs, their tasks in the agents' desired state, the agents'
 * reports of them, and POST /v1/jobs/{id}/steps.
 *
 * A step picks its tasks from the job's ranks the way srun does inside an
 * allocation: the nodes in the order the job holds them (its first
 * rank's node first), at most --nodes of them, at most --ntasks-per-node
 * tasks on each unless --ntasks asks for more (--ntasks wins, as in srun),
 * at most --ntasks in all; with none of these, every task. (`tessera steps run`
 * sends the job's SLURM_NTASKS as --ntasks when none is given, as srun
 * reads it from its environment.)
 * Its tasks keep the rank's GPUs, CPUs, memory and user, and get the step's
 * own numbering (SLURM_PROCID 0.. within the step, SLURM_STEP_ID). The
 * step's exit status is its tasks' highest (128 + the signal for a task a
 * signal ended), as srun's is.
 */
#define _DEFAULT_SOURCE /* strdup */
#include "ctld/steps.h"
#include "ctld/http.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctld/input.h"
#include "ctld/router.h"
#include "ctld/steps_internal.h"
#include "tessera/grow.h"

#define STEP_ARGV_MAX 256
#define STEP_ARG_MAX_BYTES 65536

/* ---- one step ------------------------------------------------------------------- */

ctld_step_cmd *ctld_step_cmd_new(const json_t *cmd)
{
    size_t argc = json_array_size(cmd), bytes = 0;
    for (size_t i = 0; i < argc; i++) {
        const char *a = json_string_value(json_array_get(cmd, i));
        bytes += a ? strlen(a) + 1 : 1;
    }
    ctld_step_cmd *c = malloc(sizeof *c + argc * sizeof c->argv[0] + bytes);
    if (!c)
        return NULL;
    atomic_init(&c->refs, 1);
    c->argc = (int)argc;
    char *at = (char *)&c->argv[argc];
    for (size_t i = 0; i < argc; i++) {
        const char *a = json_string_value(json_array_get(cmd, i));
        size_t len = a ? strlen(a) + 1 : 1; /* a restored event's: checked when posted */
        c->argv[i] = memcpy(at, a ? a : "", len);
        at += len;
    }
    return c;
}

void ctld_step_cmd_put(ctld_step_cmd *cmd)
{
    if (cmd && atomic_fetch_sub(&cmd->refs, 1) == 1)
        free(cmd);
}

void ctld_step_fini(ctld_step *s)
{
    for (int i = 0; s->task && i < s->n; i++) {
        free(s->task[i].out);
        free(s->task[i].err);
    }
    ctld_step_cmd_put(s->cmd);
    free(s->task);
}

void ctld_steps_free(cjob *j)
{
    if (!j->steps)
        return;
    for (int i = 0; i < j->steps->n; i++)
        ctld_step_fini(&j->steps->v[i]);
    free(j->steps->v);
    free(j->steps);
    j->steps = NULL;
}

/* The step-ended event's detail: what accounting reads once the job is gone. */
static int plan_end_event(const ctld *c, const cjob *j, const ctld_step *s, double now,
                          ctld_txn *t)
{
    json_t *o = ctld_step_json(c, j, s, false, now);
    char *d = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    int rc = d ? ctld_txn_event(t, j->row.id, now, "step-ended", d) : TS_ENOMEM;
    free(d);
    return rc;
}

static void step_settle(ctld *c, cjob *j, ctld_step *s, double now, ctld_txn *t)
{
    int failed = 0, stopped = 0;
    for (int i = 0; i < s->n; i++) {
        if (s->task[i].st != CTLD_RANK_DONE && s->task[i].st != CTLD_RANK_FAILED &&
            s->task[i].st != CTLD_RANK_STOPPED)
            return;
        failed += s->task[i].st != CTLD_RANK_DONE;
        stopped += s->task[i].st == CTLD_RANK_STOPPED;
    }
    s->state = failed ? STEP_FAILED : STEP_COMPLETED;
    if (stopped && j->row.state != TS_JOB_RUNNING) {
        /* its tasks were stopped because the job's run is ending (requeued,
         * preempted, cancelled): the step is cancelled with the run, whether
         * the agents' reports of the stops or the run's end come first */
        s->state = STEP_CANCELLED;
        snprintf(s->why, sizeof s->why, "the job's run ended before the step");
    }
    s->end_s = now;
    if (t && plan_end_event(c, j, s, now, t) != 0)
        snprintf(s->why, sizeof s->why, "its end was not recorded (out of memory)");
}

/* ---- the desired state and the reports ------------------------------------------ */

/* The step task o's environment as its rank's (base_env, the rank task's
 * encoded "env", whose strings are shared, not copied) followed by what o
 * has (the step's own variables). 0, or -1 when out of memory. */
static int step_env_share(json_t *o, const json_t *base_env)
{
    const json_t *own = json_object_get(o, "env");
    json_t *env = json_array();
    int rc = env ? 0 : -1;
    for (size_t i = 0; rc == 0 && i < json_array_size(base_env); i++)
        rc = json_array_append(env, json_array_get(base_env, i));
    for (size_t i = 0; rc == 0 && i < json_array_size(own); i++)
        rc = json_array_append(env, json_array_get(own, i));
    return rc == 0 ? json_object_set_new(o, "env", env) : (json_decref(env), -1);
}

/* Step task q of s on its rank's task `base`: the same resources and
 * identity, the step's command and numbering; no secret values (the rank
 * had them), no hold, no step credential (those are the script's) and no
 * terminal (an interactive rank 0's stream is its own).
 * base_env (NULL: none) is the rank task's encoded environment: its
 * strings are shared with the step task's, not encoded again, so a job's
 * steps cost the controller their own variables, however large the job's
 * environment (the answer's text still carries it in each task). */
static json_t *step_task(const cjob *j, const ctld_step *s, int q, int nnodes,
                         const char *first, const ctld_dtask *base, const json_t *base_env)
{
    ctld_dtask dt = {.t = base->t};
    ts_desired_task *t = &dt.t;
    bool share = json_array_size(base_env) == (size_t)base->t.env.n && base->t.env.n > 0;
    if (share)
        ctld_dtask_env_init(&dt, NULL, 0);
    else
        ctld_dtask_env_init(&dt, base->t.env.v, base->t.env.n);
    ctld_dtask_env_add(&dt, "SLURM_STEP_ID=%d", s->id);
    ctld_dtask_env_add(&dt, "SLURM_STEP_NUM_TASKS=%d", s->n);
    ctld_dtask_env_add(&dt, "SLURM_STEP_NUM_NODES=%d", nnodes);
    ctld_dtask_env_add(&dt, "TESSERA_STEP_ID=%d", s->id);
    t->command = (ts_strv){(const char **)s->cmd->argv, s->cmd->argc};
    t->action = TS_ACTION_RUN;
    CTLD_DT_SET(&dt, STEP);
    t->step = s->id;
    CTLD_DT_SET(&dt, TASK_RANK);
    t->task_rank = q;
    t->world_size = s->n;
    t->local_rank = 0;
    for (int p = 0; p < q; p++)
        t->local_rank += j->allocs[s->task[p].rank].node == j->allocs[s->task[q].rank].node;
    t->master_addr = first;
    CTLD_DT_CLEAR(&dt, STEP_TOKEN);
    CTLD_DT_CLEAR(&dt, HOLD);
    CTLD_DT_CLEAR(&dt, SECRETS);
    CTLD_DT_CLEAR(&dt, INTERACTIVE); /* an salloc's rank 0 is the terminal's; its steps log */
    json_t *o = ctld_dtask_encode(&dt);
    ctld_dtask_fini(&dt);
    if (o && share && step_env_share(o, base_env) != 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* What a step task adds to its rank's task beyond the command: its four
 * variables and its numbering (the rank's hold and step credential go) */
#define STEP_TASK_EXTRA_BYTES 512

/* The most bytes argv takes in a task's JSON: quotes, commas, escapes (a
 * control character at most 6: \u0000). */
static size_t argv_json_bytes(char *const *argv, int argc)
{
    size_t n = 2;
    for (int i = 0; i < argc; i++) {
        n += 3;
        for (const unsigned char *p = (const unsigned char *)argv[i]; *p; p++)
            n += *p == '"' || *p == '\\' ? 2 : *p < 0x20 ? 6 : 1;
    }
    return n;
}

int ctld_steps_desired(const ctld *c, const cjob *j, int n, const ctld_dtask *ranks,
                       json_t *const *rank_env, const size_t *rank_bytes, int nranks,
                       json_t *tasks, size_t *est, int max)
{
    if (!j->steps || j->row.state != TS_JOB_RUNNING || !j->allocs)
        return 0;
    size_t job_cmd = argv_json_bytes(j->spec->argv, j->spec->argc);
    int got = 0;
    for (int k = 0; k < j->steps->n && got < max; k++) {
        const ctld_step *s = &j->steps->v[k];
        if (s->state != STEP_RUNNING || s->run != j->row.start_s)
            continue;
        int nnodes = 0;
        for (int q = 0; q < s->n; q++) {
            bool seen = false;
            for (int p = 0; p < q && !seen; p++)
                seen = j->allocs[s->task[p].rank].node == j->allocs[s->task[q].rank].node;
            nnodes += !seen;
        }
        const char *first = ctld_step_node(c, j, s->task[0].rank);
        size_t cmd = est ? argv_json_bytes(s->cmd->argv, s->cmd->argc) : 0;
        for (int q = 0; q < s->n && got < max; q++) {
            int r = s->task[q].rank;
            if (j->allocs[r].node != n || s->task[q].st > CTLD_RANK_RUNNING)
                continue;
            int b = 0;
            while (b < nranks && (ranks[b].t.rank != r || ranks[b].oom))
                b++;
            if (b == nranks) /* its rank's task was not written (out of memory) */
                continue;
            if (tasks)
                json_array_append_new(tasks, step_task(j, s, q, nnodes, first, &ranks[b],
                                                       rank_env ? rank_env[b] : NULL));
            if (est) /* the rank's task with the step's command for the job's */
                est[got] = (rank_bytes[b] > job_cmd ? rank_bytes[b] - job_cmd : 0) + cmd +
                           STEP_TASK_EXTRA_BYTES;
            got++;
        }
    }
    return got;
}

static char *tail_of(const char *text)
{
    size_t tl = strlen(text);
    if (tl > CTLD_STEP_OUTPUT_MAX_BYTES) { /* its end, from a whole character */
        text += tl - CTLD_STEP_OUTPUT_MAX_BYTES;
        while (((unsigned char)*text & 0xC0) == 0x80)
            text++;
    }
    return strdup(text);
}

int ctld_steps_report(ctld *c, cjob *j, int n, const ts_task_report *tk, double now,
                      ctld_txn *t)
{
    int id = tk->step, rank = tk->rank;
    ctld_step *s = ctld_step_find(j, id);
    if (!s || s->state != STEP_RUNNING || tk->state == TS_REPORT_NONE || !j->allocs)
        return 0;
    if (tk->has_run && tk->run != s->run)
        return 0;
    int q = -1;
    for (int k = 0; k < s->n && q < 0; k++)
        if (s->task[k].rank == rank && j->allocs[rank].node == n)
            q = k;
    if (q < 0 || s->task[q].st > CTLD_RANK_RUNNING)
        return 0;
    if (tk->state == TS_REPORT_RUNNING) {
        s->task[q].st = CTLD_RANK_RUNNING;
        return 0;
    }
    int ec = tk->signal > 0         ? 128 + tk->signal
             : tk->has_exit_code    ? tk->exit_code
             : tk->state == TS_REPORT_EXITED ? 0
                                             : 1;
    s->task[q].code = ec;
    s->task[q].end = now;
    s->task[q].st = tk->state == TS_REPORT_STOPPED ? CTLD_RANK_STOPPED
               : ec == 0                      ? CTLD_RANK_DONE
                                              : CTLD_RANK_FAILED;
    const char *so = tk->out_stdout, *se = tk->out_stderr, *launch = tk->error;
    if (so && !(s->task[q].out = tail_of(so)))
        return TS_ENOMEM;
    if (launch && *launch) { /* it could not start: srun says why */
        size_t len = strlen(launch) + 64;
        if (!(s->task[q].err = malloc(len)))
            return TS_ENOMEM;
        snprintf(s->task[q].err, len, "srun: task %d on %s: %s\n", q, c->cluster->nodes[n].name,
                 launch);
    } else if (se && !(s->task[q].err = tail_of(se))) {
        return TS_ENOMEM;
    }
    step_settle(c, j, s, now, t);
    return 0;
}

void ctld_steps_run_ended(ctld *c, cjob *j, double now, ctld_txn *t)
{
    for (int k = 0; j->steps && k < j->steps->n; k++) {
        ctld_step *s = &j->steps->v[k];
        if (s->state != STEP_RUNNING)
            continue;
        s->state = STEP_CANCELLED;
        s->end_s = now;
        snprintf(s->why, sizeof s->why, "the job's run ended before the step");
        if (t && plan_end_event(c, j, s, now, t) != 0)
            continue;
    }
}

#define STEP_EVENTS_PAGE 1000

/* A job's steps from its events of that kind (step-ended: an ended job's
 * steps, their detail the step's document without its tasks; step-started:
 * every step begun). NULL when the store failed (answered). */
json_t *ctld_step_events(ctld *c, int64_t id, const char *kind, ctld_reply *r)
{
    json_t *a = json_array();
    int64_t after = 0;
    for (int page = 0; page < CTLD_STEPS_MAX; page++) { /* bounded: steps a job may have */
        ts_event_row *ev = NULL;
        int n = 0;
        ts_err err;
        if (ts_store_event_list(c->store, id, after, STEP_EVENTS_PAGE, &ev, &n, &err) != 0) {
            ctld_reply_error(r, 503, "unavailable", "%s", err.msg);
            json_decref(a);
            return NULL;
        }
        for (int i = 0; i < n; i++) {
            json_error_t je;
            json_t *o = strcmp(ev[i].kind, kind) == 0 && ev[i].detail
                            ? json_loads(ev[i].detail, 0, &je)
                            : NULL;
            if (json_is_object(o))
                json_array_append_new(a, o);
            else
                json_decref(o);
        }
        if (n > 0)
            after = ev[n - 1].id;
        ts_store_free_events(ev, n);
        if (n < STEP_EVENTS_PAGE)
            break;
    }
    return a;
}

/* ---- the API -------------------------------------------------------------------- */

/* The tasks a step of these options runs in (see the file's comment): srun's
 * block distribution, every node chosen gets a task first, then the first
 * nodes fill up; in rank order. Their count, or -1 with a 400 answered. */
static int pick_tasks(const cjob *j, int want_n, int want_nodes, int per_node, int *rank,
                      ctld_reply *r)
{
    int *order = malloc((size_t)j->ntasks * sizeof *order), nn = 0;
    int *cap = calloc((size_t)j->ntasks, sizeof *cap), *take = calloc((size_t)j->ntasks,
                                                                       sizeof *take);
    int k = -1;
    if (!order || !cap || !take) {
        ctld_reply_error(r, 503, "unavailable", "out of memory");
        goto out;
    }
    for (int q = 0; q < j->ntasks; q++) {
        int p = 0;
        while (p < nn && order[p] != j->allocs[q].node)
            p++;
        if (p == nn)
            order[nn++] = j->allocs[q].node;
        cap[p]++;
    }
    if (want_nodes > nn) {
        ctld_field_error(r, "nodes", "%d nodes asked; the job holds %d", want_nodes, nn);
        goto out;
    }
    int use = want_nodes > 0 ? want_nodes : nn, room = 0, capped = 0;
    for (int p = 0; p < use; p++) {
        room += cap[p];
        capped += per_node > 0 && cap[p] > per_node ? per_node : cap[p];
    }
    if (want_n <= 0 || capped >= want_n) { /* --ntasks-per-node holds unless -n wants more */
        for (int p = 0; p < use; p++)
            cap[p] = per_node > 0 && cap[p] > per_node ? per_node : cap[p];
        room = capped;
    }
    int n = want_n > 0 ? want_n : room;
    if (n > room) {
        ctld_field_error(r, "ntasks", "%d tasks asked; the job's tasks on the %d node(s) chosen "
                         "are %d (a step runs in the job's own tasks)", n, use, room);
        goto out;
    }
    if (want_nodes <= 0 && n < use)
        use = n; /* srun -n N alone: at most N nodes */
    if (n < use) {
        ctld_field_error(r, "ntasks", "%d tasks on %d nodes: at least one task a node", n, use);
        goto out;
    }
    int left = n;
    for (int p = 0; p < use; p++, left--)
        take[p] = 1;
    for (int p = 0; p < use && left > 0; p++) {
        int more = cap[p] - 1 < left ? cap[p] - 1 : left;
        take[p] += more;
        left -= more;
    }
    k = 0;
    for (int q = 0; q < j->ntasks; q++) {
        int p = 0;
        while (order[p] != j->allocs[q].node)
            p++;
        if (p < use && take[p] > 0) {
            take[p]--;
            rank[k++] = q;
        }
    }
out:
    free(order);
    free(cap);
    free(take);
    return k;
}

static bool opt_int(ctld_reply *r, json_t *body, const char *key, int max, int *out)
{
    json_t *v = json_object_get(body, key);
    *out = 0;
    if (!v || json_is_null(v))
        return true;
    if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > max) {
        ctld_field_error(r, key, "must be a whole number 1..%d", max);
        return false;
    }
    *out = (int)json_integer_value(v);
    return true;
}

/* POST's body {command, ntasks, nodes, ntasks_per_node}, checked: the body
 * (the caller frees it), or NULL with r answered 400 naming the field. */
static json_t *step_body(const ctld_request *rq, ctld_reply *r, int *want_n, int *want_nodes,
                         int *per_node)
{
    json_error_t je;
    json_t *body = json_loadb(rq->body, rq->len, JSON_REJECT_DUPLICATES, &je);
    if (!json_is_object(body)) {
        ctld_field_error(r, "body", "a JSON object {command, ntasks, nodes, ntasks_per_node}: "
                         "%s", body ? "not an object" : je.text);
        json_decref(body);
        return NULL;
    }
    const char *k;
    json_t *v;
    json_object_foreach(body, k, v)
    {
        if (strcmp(k, "command") && strcmp(k, "ntasks") && strcmp(k, "nodes") &&
            strcmp(k, "ntasks_per_node")) {
            ctld_field_error(r, k, "unknown field (command, ntasks, nodes, ntasks_per_node)");
            json_decref(body);
            return NULL;
        }
    }
    json_t *cmd = json_object_get(body, "command");
    size_t total = 0;
    bool ok = json_is_array(cmd) && json_array_size(cmd) >= 1 &&
              json_array_size(cmd) <= STEP_ARGV_MAX;
    for (size_t i = 0; ok && i < json_array_size(cmd); i++) {
        const char *a = json_string_value(json_array_get(cmd, i));
        ok = a != NULL && (i > 0 || *a);
        total += a ? strlen(a) + 1 : 0;
    }
    if (!ok || total > STEP_ARG_MAX_BYTES) {
        ctld_field_error(r, "command", "must be 1..%d strings, the first not empty, %d bytes "
                         "in all at most", STEP_ARGV_MAX, STEP_ARG_MAX_BYTES);
        json_decref(body);
        return NULL;
    }
    if (!opt_int(r, body, "ntasks", 65536, want_n) ||
        !opt_int(r, body, "nodes", 65536, want_nodes) ||
        !opt_int(r, body, "ntasks_per_node", 65536, per_node)) {
        json_decref(body);
        return NULL;
    }
    return body;
}

/* The id of the job's first step this controller sees goes on from those its
 * events have (a restarted controller); read before mu. False: r answered. */
static bool first_step_id(ctld *c, const ctld_request *rq, ctld_reply *r, int *next_id)
{
    ctld_lock_reader(c);
    const cjob *seen = ctld_job_find(c, rq->id);
    bool first = seen && !seen->steps;
    pthread_mutex_unlock(&c->mu);
    *next_id = 0;
    if (!first)
        return true;
    json_t *begun = ctld_step_events(c, rq->id, "step-started", r);
    if (!begun)
        return false;
    size_t k;
    json_t *b;
    json_array_foreach(begun, k, b)
    {
        json_int_t bid = json_integer_value(json_object_get(b, "id"));
        if (bid >= *next_id && bid < CTLD_STEPS_MAX)
            *next_id = (int)bid + 1;
    }
    json_decref(begun);
    return true;
}

/* Under mu: whether job j (NULL: gone) cannot take a step now; r answered 409. */
static bool step_refused(const ctld *c, const cjob *j, int64_t id, ctld_reply *r)
{
    if (!j || j->row.state != TS_JOB_RUNNING || !j->allocs || j->is_virtual) {
        ctld_reply_error(r, 409, "not_running", "job %lld is not running on agents: a step runs "
                         "in a running job's tasks", (long long)id);
        return true;
    }
    if (c->cfg.net_isolation) {
        ctld_reply_error(r, 409, "not_supported", "steps: not available where tenants' networks "
                         "are isolated (a step task would run outside its rank's namespace)");
        return true;
    }
    if (!ctld_job_is_batch(j)) {
        ctld_reply_error(r, 409, "not_a_batch_job", "job %lld was not submitted by `tessera "
                         "sbatch`: its tasks all run its command, none waits for steps",
                         (long long)id);
        return true;
    }
    int running = 0;
    for (int k = 0; j->steps && k < j->steps->n; k++)
        running += j->steps->v[k].state == STEP_RUNNING && j->steps->v[k].run == j->row.start_s;
    int most = j->ntasks * CTLD_STEPS_RUNNING_PER_RANK;
    if (most < CTLD_STEPS_RUNNING_MAX)
        most = CTLD_STEPS_RUNNING_MAX;
    if (running >= most) { /* each copies its ranks' tasks to their nodes */
        ctld_reply_error(r, 409, "too_many_running_steps", "job %lld runs %d steps, the most it "
                         "runs at once (64, or 8 per rank of the job where more); a step starts "
                         "once one has ended", (long long)id, most);
        return true;
    }
    if (j->steps && j->steps->n >= CTLD_STEPS_MAX) {
        ctld_reply_error(r, 409, "too_many_steps", "job %lld has run %d steps, the most a job "
                         "may", (long long)id, CTLD_STEPS_MAX);
        return true;
    }
    return false;
}

/* s's tasks (s->n, on the job's ranks rank[0..n)) and its argv from cmd,
 * and room for one more step in steps; false when out of memory
 * (ctld_step_fini frees what s holds). */
bool ctld_step_alloc(ctld_step *s, const int *rank, const json_t *cmd, struct ctld_steps *steps)
{
    int n = s->n;
    s->task = calloc((size_t)n, sizeof *s->task);
    s->cmd = ctld_step_cmd_new(cmd);
    if (!s->task || !s->cmd)
        return false;
    for (int i = 0; i < n; i++) {
        s->task[i].rank = rank[i];
        s->task[i].code = -1;
    }
    if (ts_grow((void **)&steps->v, &steps->cap, steps->n + 1, 8, sizeof *steps->v) != 0)
        return false;
    return true;
}

/* Under mu, released while the step's start is written (durable before
 * acknowledged: it is a job event): then the step joins job j (which owns
 * it from there; j is found again, it may have moved) and its nodes' agents
 * are woken. The step's document, or NULL with r answered (503, or 409 when
 * the job stopped meanwhile). */
static json_t *step_commit(ctld *c, cjob *j, const ctld_step *s, ctld_reply *r)
{
    int64_t id = j->row.id;
    json_t *doc = ctld_step_json(c, j, s, false, s->start_s);
    /* what a restarted controller rebuilds the step from (ctld_steps_restore):
     * the job's ranks it runs in and the run it belongs to */
    json_t *ev = doc ? json_deep_copy(doc) : NULL, *ranks = json_array();
    for (int q = 0; ev && q < s->n; q++)
        json_array_append_new(ranks, json_integer(s->task[q].rank));
    if (ev) {
        json_object_set_new(ev, "ranks", ranks);
        json_object_set_new(ev, "run", json_real(s->run));
    } else {
        json_decref(ranks);
    }
    char *d = ev ? json_dumps(ev, JSON_COMPACT) : NULL;
    json_decref(ev);
    ctld_txn t = {0};
    ts_err err;
    int rc = d ? ctld_txn_event(&t, j->row.id, s->start_s, "step-started", d) : TS_ENOMEM;
    free(d);
    /* one step's start written at a time per job: the job stays pinned
     * meanwhile (an events-only write pins nothing), so a second srun of
     * the same script waits (ctld_job_wait_unpinned) instead of taking the
     * same id and the one slot of room this step was given */
    j->pinned++;
    if (rc == 0)
        rc = ctld_txn_commit_unlocked(c, &t, s->start_s, &err);
    else
        ts_err_set(&err, rc, "out of memory");
    j->pinned--;
    ctld_phase_moved(c); /* the job is unpinned */
    ctld_txn_fini(&t);
    /* the job may have moved while the event was written with mu released */
    j = ctld_job_find(c, id);
    if (rc != 0 || !j || j->row.state != TS_JOB_RUNNING || !j->steps || s->run != j->row.start_s) {
        json_decref(doc);
        if (rc != 0)
            ctld_reply_error(r, 503, "unavailable", "%s", err.msg);
        else
            ctld_reply_error(r, 409, "not_running", "job %lld stopped running", (long long)id);
        return NULL;
    }
    j->steps->v[j->steps->n++] = *s;
    for (int q = 0; q < s->n; q++) {
        bool seen = false;
        for (int p = 0; p < q && !seen; p++)
            seen = j->allocs[s->task[p].rank].node == j->allocs[s->task[q].rank].node;
        if (!seen)
            ctld_agent_moved(c, j->allocs[s->task[q].rank].node);
    }
    return doc;
}

static void step_post(ctld *c, const ctld_request *rq, ctld_reply *r)
{
    int want_n, want_nodes, per_node, next_id;
    json_t *body = step_body(rq, r, &want_n, &want_nodes, &per_node);
    if (!body)
        return;
    if (!first_step_id(c, rq, r, &next_id)) {
        json_decref(body);
        return;
    }
    json_t *cmd = json_object_get(body, "command");
    pthread_mutex_lock(&c->mu);
    cjob *j = ctld_job_wait_unpinned(c, rq->id);
    ctld_step s = {0};
    int *rank = NULL;
    if (step_refused(c, j, rq->id, r))
        goto out;
    if (!j->steps && !(j->steps = calloc(1, sizeof *j->steps)))
        goto oom;
    if (!(rank = malloc((size_t)j->ntasks * sizeof *rank)))
        goto oom;
    int n = pick_tasks(j, want_n, want_nodes, per_node, rank, r);
    if (n < 0)
        goto out;
    s.id = j->steps->n > 0 ? j->steps->v[j->steps->n - 1].id + 1 : next_id;
    s.run = j->row.start_s;
    s.n = n;
    s.start_s = ctld_now();
    bool made = ctld_step_alloc(&s, rank, cmd, j->steps);
    free(rank);
    rank = NULL;
    if (!made)
        goto oom;
    json_t *doc = step_commit(c, j, &s, r);
    if (!doc)
        goto out;
    memset(&s, 0, sizeof s);
    pthread_mutex_unlock(&c->mu);
    json_decref(body);
    ctld_reply_json(r, 201, json_pack("{s:o}", "step", doc));
    return;
oom:
    ctld_reply_error(r, 503, "unavailable", "out of memory");
out:
    pthread_mutex_unlock(&c->mu);
    free(rank);
    ctld_step_fini(&s);
    json_decref(body);
}

/* What a caller who may not read the job's content reads of its steps:
 * no command, no output (docs/secrets.md, as the job's own). */
static void redact(json_t *doc)
{
    json_t *steps = json_object_get(doc, "steps"), *one = json_object_get(doc, "step");
    size_t k, q;
    json_t *s, *t;
    if (one)
        json_array_append(steps = json_array(), one);
    else
        json_incref(steps);
    json_array_foreach(steps, k, s)
    {
        json_object_set_new(s, "command", json_array());
        json_array_foreach(json_object_get(s, "tasks"), q, t)
        {
            json_object_set_new(t, "stdout", json_string("hidden"));
            json_object_set_new(t, "stderr", json_string("hidden"));
        }
    }
    json_decref(steps);
}

void ctld_steps_route(ctld *c, const ctld_request *rq, ctld_reply *r)
{
    const ctld_caller *w = rq->who;
    bool content = true;
    if (w->step_job != 0 && w->step_job != rq->id) {
        ctld_reply_error(r, 403, "forbidden", "a step credential is job %lld's only",
                         (long long)w->step_job);
        return;
    }
    if (w->step_job == 0) { /* an API token: the job must be its tenant's (or it sees all) */
        ts_job_row row;
        ts_err err;
        int rc = ts_store_job_get(c->store, rq->id, &row, &err);
        bool all = w->role == TS_ROLE_ADMIN || (w->role == TS_ROLE_VIEWER && !w->tenant[0]);
        bool ok = rc == 0 && (all || strcmp(w->tenant, row.tenant) == 0);
        if (ok) {
            ctld_lock_reader(c); /* the tenants' privacy policy */
            content = ctld_sees_content(c, w, row.tenant, row.owner);
            pthread_mutex_unlock(&c->mu);
        }
        if (rc == 0)
            ts_job_row_fini(&row);
        if (rc != 0 && rc != TS_ENOENT) {
            ctld_reply_error(r, 503, "unavailable", "%s", err.msg);
            return;
        }
        if (!ok) {
            ctld_reply_error(r, 404, "not_found", "job %lld does not exist", (long long)rq->id);
            return;
        }
        if (strcmp(rq->method, "POST") == 0 && w->role == TS_ROLE_VIEWER) {
            ctld_reply_error(r, 403, "forbidden", "a viewer starts no step");
            return;
        }
    }
    if (strcmp(rq->method, "POST") == 0 && !content) {
        ctld_reply_error(r, 403, "forbidden", "job %lld: only who may read its content starts "
                         "its steps", (long long)rq->id);
        return;
    }
    if (strcmp(rq->method, "POST") == 0) {
        step_post(c, rq, r);
        return;
    }
    ctld_steps_get(c, rq, r);
    if (!content && r->status == 200 && r->body) { /* its answer, without the content */
        json_error_t je;
        json_t *doc = json_loads(r->body, 0, &je);
        free(r->body);
        r->body = NULL;
        if (doc) {
            redact(doc);
            ctld_reply_json(r, 200, doc);
        } else { /* never the unredacted answer */
            ctld_reply_error(r, 503, "unavailable", "out of memory");
        }
    }
}
