/*
 * agents.c - the controller's side of the node agents (docs/agent-protocol.md).
 *
 * Level-triggered: an agent registers (its node's description), then calls
 * sync in a loop, reporting what runs and what it sees (each task's state,
 * the node's health); the controller answers what should run there (every
 * rank of every running job placed on the node, with a stop request for
 * ranks of jobs being preempted) and whether the node is drained. Each node
 * has a generation that moves on every change of its desired state; a sync
 * whose generation is current waits (long-poll, CTLD_SYNC_WAIT_S) for the
 * next change, so an agent behind NAT needs no inbound connection. A lost,
 * repeated or reordered message converges: every answer is the whole
 * desired state, and every report the whole observed state.
 *
 * What the reports change: a rank that exits is recorded; a job whose ranks
 * all exited 0 completes; a rank that fails fails the whole gang (its other
 * ranks leave the desired state, so their agents stop them); a preempted
 * job requeues once every rank stopped. Health: degraded takes the node
 * out of placement, failed also requeues its jobs. An agent silent for
 * CTLD_NODE_LOST_S is lost: its node is drained and its jobs requeue (not
 * earlier: their processes may still run there, and must not run twice).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctld/ctld.h"
#include "ctld/http.h"
#include "ctld/ended_runs.h"
#include "ctld/imgloc.h"
#include "ctld/job_end.h"
#include "ctld/job_fsm.h"
#include "ctld/steps.h"
#include "tessera/agent_proto.h"

void ctld_node_refresh(ctld *c, int n)
{
    const ctld_agent *a = &c->agents[n];
    bool up = !c->admin_drained[n] &&
              (c->node_virtual[n] || (a->registered && a->health == CTLD_HEALTHY));
    if (ts_sched_node_schedulable(c->sched, n) != up) {
        ts_sched_node_set_schedulable(c->sched, n, up, NULL);
        c->dirty = true;
        ctld_agent_moved(c, n); /* its desired document says "drained" */
    }
}

void ctld_agent_moved(ctld *c, int n)
{
    ctld_agent *a = &c->agents[n];
    pthread_mutex_lock(&a->mu);
    a->gen++;
    a->doc_ok = false;
    pthread_cond_broadcast(&a->moved);
    pthread_mutex_unlock(&a->mu);
}

void ctld_agents_docs_stale(ctld *c)
{
    for (int n = 0; n < c->cluster->nnodes; n++) {
        pthread_mutex_lock(&c->agents[n].mu);
        c->agents[n].doc_ok = false;
        pthread_mutex_unlock(&c->agents[n].mu);
    }
}

void ctld_agents_wake_all(ctld *c)
{
    for (int n = 0; c->agents && n < c->cluster->nnodes; n++) {
        ctld_agent *a = &c->agents[n];
        pthread_mutex_lock(&a->mu);
        pthread_cond_broadcast(&a->moved);
        for (ctld_logreq *q = a->logreqs; q; q = q->next)
            pthread_cond_signal(&q->cv); /* output requests stop waiting too */
        pthread_mutex_unlock(&a->mu);
    }
}

bool ctld_rank_reading(ctld *c, const cjob *j, int rank, float *util, float *step_s)
{
    if (!j->allocs || rank < 0 || rank >= j->ntasks)
        return false;
    int n = j->allocs[rank].node;
    if (c->node_virtual[n])
        return false;
    ctld_agent *a = &c->agents[n];
    bool found = false;
    pthread_mutex_lock(&a->mu);
    for (int k = 0; k < a->nreadings && !found; k++) {
        const ctld_reading *rd = &a->readings[k];
        if (rd->job != j->row.id || rd->rank != rank || rd->at_s < j->row.start_s)
            continue; /* another rank, or a reading of an earlier run */
        found = true;
        if (util)
            *util = rd->util;
        if (step_s)
            *step_s = rd->step_s;
    }
    pthread_mutex_unlock(&a->mu);
    return found;
}

void ctld_nodes_touch_job(ctld *c, const cjob *j)
{
    for (int t = 0; j->allocs && t < j->ntasks; t++) {
        int n = j->allocs[t].node;
        if (t == 0 || n != j->allocs[t - 1].node)
            ctld_agent_moved(c, n);
    }
}

bool ctld_has_agent_nodes(const ctld *c)
{
    for (int n = 0; n < c->cluster->nnodes; n++)
        if (!c->node_virtual[n])
            return true;
    return false;
}

/* ---- what the agent reports ---------------------------------------------------- */

/* A register or sync body, its task reports decoded once at the door
 * (tessera/agent_proto.h); the reports borrow their strings from doc. */
typedef struct sync_msg {
    json_t *doc;
    ts_sync s; /* the body, decoded (its strings borrowed from doc) */
    ts_task_report *tasks;
    size_t ntasks;
    bool has_tasks; /* "tasks" was sent: an empty list says nothing runs */
} sync_msg;

static int rank_state_of(enum ts_report_state s)
{
    switch (s) {
    case TS_REPORT_RUNNING:
        return CTLD_RANK_RUNNING;
    case TS_REPORT_EXITED:
        return CTLD_RANK_DONE; /* refined by the exit code */
    case TS_REPORT_FAILED:
        return CTLD_RANK_FAILED;
    case TS_REPORT_STOPPED:
        return CTLD_RANK_STOPPED;
    default:
        return -1;
    }
}

/* A rank's state as it was before this report (undone if the report's
 * writes fail, so that the agent's next report is applied again). */
typedef struct rank_undo {
    int64_t job, gen; /* gen: undone only while the job is as it was */
    int rank;
    uint8_t was;
} rank_undo;

/* Applies one sync's task reports: every change they cause (job ends,
 * output tails) is written in one transaction, then applied. Returns the
 * store's error when that write failed (nothing applied; the agent is
 * answered 503 and reports again). *whole: false when a report was left
 * for the next one (its job's change was being written). */
/* An ended rank's last output (its report's "output"), kept with the job's
 * events, each stream's end from a whole character; TS_ENOMEM. */
static int output_events(int64_t job, int rank, const ts_task_report *tk, double now,
                         ctld_txn *t)
{
    static const char *const NAMES[] = {"stdout", "stderr"};
    for (int k = 0; k < 2; k++) {
        const char *text = k == 0 ? tk->out_stdout : tk->out_stderr;
        if (!text || !*text)
            continue;
        size_t tl = strlen(text);
        if (tl > CTLD_TASK_OUTPUT_MAX_BYTES) {
            text += tl - CTLD_TASK_OUTPUT_MAX_BYTES;
            while (((unsigned char)*text & 0xC0) == 0x80)
                text++;
        }
        size_t len = strlen(text) + 48;
        char *d = malloc(len);
        if (!d)
            return TS_ENOMEM;
        snprintf(d, len, "rank %d %s\n%s", rank, NAMES[k], text);
        int rc = ctld_txn_event(t, job, now, "output", d);
        free(d);
        if (rc != 0)
            return TS_ENOMEM;
    }
    return 0;
}

static int apply_reports(ctld *c, int n, const sync_msg *m, double now, bool *whole,
                         ts_err *err)
{
    ctld_txn t = {0};
    rank_undo *undo = calloc(m->ntasks + 1, sizeof *undo);
    int nundo = 0, rc = undo ? 0 : ts_err_set(err, TS_ENOMEM, "out of memory");
    bool started_secret = false;
    for (size_t i = 0; i < m->ntasks && rc == 0; i++) {
        const ts_task_report *tk = &m->tasks[i];
        int64_t id = tk->job;
        int rank = tk->rank;
        int st = rank_state_of(tk->state);
        cjob *j = ctld_job_find(c, id);
        if (j && tk->step >= 0) { /* a step's task (steps.c) */
            if (j->pinned) /* a change of its job is being written: the next report counts */
                *whole = false;
            else if (ctld_steps_report(c, j, n, tk, now, &t) != 0)
                rc = ts_err_set(err, TS_ENOMEM, "out of memory");
            continue;
        }
        if (!j && tk->step < 0 && st >= 0 && st != CTLD_RANK_RUNNING &&
            st != CTLD_RANK_PENDING && ctld_ended_take(c, id, rank, n, tk->has_run, tk->run, now) &&
            output_events(id, rank, tk, now, &t) != 0) /* a failed gang's other rank */
            rc = ts_err_set(err, TS_ENOMEM, "out of memory");
        if (!j || !j->allocs || rank < 0 || rank >= j->ntasks || j->allocs[rank].node != n ||
            st < 0)
            continue; /* not ours (any more): the desired state tells the agent */
        if (tk->has_run && tk->run != j->row.start_s)
            continue; /* an earlier run's task, not yet forgotten by its agent */
        if (j->pinned || (!j->rank_state && !(j->rank_state = calloc((size_t)j->ntasks, 1)))) {
            *whole = false; /* a change of it is being written: the next report counts */
            continue;
        }
        if (st == CTLD_RANK_DONE && tk->exit_code != 0)
            st = CTLD_RANK_FAILED;
        if (st != CTLD_RANK_RUNNING && tk->ended_at > j->ended_at_s)
            j->ended_at_s = tk->ended_at;
        /* stopped by its agent while no controller answered (a controller
         * down for half of node_lost_after), or as the agent stopped: not
         * the job's failure, a stop the controller did not ask for; a
         * running job requeues, as on a lost node, never started again on
         * the same run */
        bool cut_off = st == CTLD_RANK_FAILED && tk->launch_end &&
                       (strcmp(tk->launch_end, "controller_lost") == 0 ||
                        strcmp(tk->launch_end, "agent_stopped") == 0);
        if (cut_off)
            st = CTLD_RANK_STOPPED;
        bool pulling = tk->has_image_pull;
        if (pulling && st == CTLD_RANK_RUNNING) { /* its image is coming */
            j->pull_seen_s = now;
            j->pull_rank = rank;
            j->pull_done = tk->pull_done_bytes;
            j->pull_total = tk->pull_total_bytes;
            snprintf(j->pull_note, sizeof j->pull_note, "%s", tk->pull_note ? tk->pull_note : "");
        } else if (j->pull_seen_s > 0 && j->pull_rank == rank) {
            j->pull_seen_s = 0;
        }
        if (j->spec->image && (st == CTLD_RANK_RUNNING || st == CTLD_RANK_DONE)) {
            /* where its image is, for placement: all of it once no pull shows */
            ctld_imgloc_note(c, n, j->spec->image, pulling ? j->pull_done : -1,
                             pulling ? j->pull_total : 0);
        }
        if (tk->outcome && st == CTLD_RANK_STOPPED)
            snprintf(j->stop_outcome, sizeof j->stop_outcome, "%s",
                     ts_report_outcome_name(tk->outcome));
        if (j->rank_state[rank] == st)
            continue;
        undo[nundo++] =
            (rank_undo){.job = id, .gen = j->row.gen, .rank = rank, .was = j->rank_state[rank]};
        j->rank_state[rank] = (uint8_t)st;
        /* its document drops the values */
        started_secret |= j->spec->nsecrets > 0 || j->spec->image_secret[0];
        if (rc == 0 && st != CTLD_RANK_RUNNING && output_events(id, rank, tk, now, &t) != 0)
            rc = ts_err_set(err, TS_ENOMEM, "out of memory");
        if (rc == 0 && st != CTLD_RANK_RUNNING && ctld_rank_end_note(c, j, rank, tk) != 0)
            rc = ts_err_set(err, TS_ENOMEM, "out of memory");
        /* a task its agent would not start says why (a refused user, a
         * missing command): the job's events keep it */
        const char *launch = tk->error;
        if (rc == 0 && st == CTLD_RANK_FAILED && launch && *launch) {
            char d[TS_ERR_MSG_MAX + 32];
            snprintf(d, sizeof d, "rank %d on %s: %s", rank, c->cluster->nodes[n].name, launch);
            if (ctld_txn_event(&t, j->row.id, now, "launch-error", d) != 0)
                rc = ts_err_set(err, TS_ENOMEM, "out of memory");
        }
        if (rc == 0 && cut_off && j->row.state == TS_JOB_RUNNING && !ctld_txn_has(&t, j)) {
            char d[TS_ERR_MSG_MAX + 64];
            snprintf(d, sizeof d, "rank %d on %s: %s", rank, c->cluster->nodes[n].name,
                     tk->error ? tk->error : "stopped by its agent");
            ctld_fsm_args ea = {.detail = d};
            rc = ctld_fsm_plan(c, &t, j, CTLD_JE_EVICT, &ea, now, err);
        }
        if (rc == 0 && st != CTLD_RANK_RUNNING && rank == 0 && ctld_job_is_batch(j))
            ctld_steps_run_ended(c, j, now, &t); /* the script ended: its steps end with it */
        if (rc == 0 && st != CTLD_RANK_RUNNING)
            rc = ctld_job_settle(c, j, now, &t, err);
    }
    if (started_secret)
        ctld_agent_moved(c, n);
    if (rc == 0 && (t.n > 0 || t.nev > 0))
        rc = ctld_txn_commit_unlocked(c, &t, now, err); /* applied there if written */
    if (rc != 0) {
        /* not written: the ranks read as before, so the next report counts */
        for (int k = nundo - 1; k >= 0; k--) {
            cjob *j = ctld_job_find(c, undo[k].job);
            if (j && j->rank_state && j->row.gen == undo[k].gen)
                j->rank_state[undo[k].rank] = undo[k].was;
        }
        /* a concurrent sync of the same report, which found these ranks
         * already as reported and recorded its digest, must not make the
         * next one read as the same: the node's generation moves */
        if (nundo > 0)
            ctld_agent_moved(c, n);
        c->m.store_failures++;
    }
    ctld_txn_fini(&t);
    free(undo);
    return rc;
}

/* Requeues every job with a rank on node n, in one transaction, written
 * with mu released; under mu. Nothing is applied if the write fails (the
 * caller tries again). From the scheduling thread (in_cycle: a lost node)
 * through ctld_cycle_commit; from an agent's report (a failed node) with
 * the jobs pinned (ctld_txn_commit_unlocked), once no cycle plans or
 * commits and no change of one of them is being written (a concurrent
 * report of the same node then finds them requeued). */
static int evict_node(ctld *c, int n, const char *why, double now, bool in_cycle, ts_err *err)
{
    const ctld_node_jobs *nj = &c->node_jobs[n]; /* planning leaves it as it is */
    for (bool pinned = !in_cycle; pinned;) {
        ctld_commit_wait(c); /* as any change, and none of its jobs being written */
        pinned = false;
        for (int i = 0; i < nj->n && !pinned; i++)
            pinned = nj->v[i]->pinned > 0;
        if (pinned)
            ctld_changer_wait(c);
    }
    ctld_txn t = {0};
    int rc = 0;
    for (int i = 0; rc == 0 && i < nj->n; i++) {
        cjob *j = nj->v[i];
        ctld_fsm_args a = {.detail = why};
        rc = ctld_fsm_plan(c, &t, j, CTLD_JE_EVICT, &a, now, err);
    }
    if (rc == 0 && in_cycle) {
        rc = ctld_cycle_commit(c, &t, err);
        if (rc == 0)
            ctld_txn_apply(c, &t, now);
    } else if (rc == 0 && t.n > 0) {
        rc = ctld_txn_commit_unlocked(c, &t, now, err); /* applied there if written */
    }
    if (rc != 0)
        c->m.store_failures++;
    ctld_txn_fini(&t);
    ctld_kick(c);
    return rc;
}

/* The node's health as its agent reports it: whether it takes work, and
 * its agent's long-poll wakes. Under mu. */
static void set_health(ctld *c, int n, int health)
{
    c->agents[n].health = health;
    ctld_node_refresh(c, n);
    ctld_agent_moved(c, n);
}

static int apply_health(ctld *c, int n, const ts_node_health *h, double now, ts_err *err)
{
    int health = h->verdict == TS_VERDICT_FAILED     ? CTLD_FAILED
                 : h->verdict == TS_VERDICT_DEGRADED ? CTLD_DEGRADED
                                                     : CTLD_HEALTHY;
    ctld_agent *a = &c->agents[n];
    char why[256] = "";
    for (int i = 0; i < h->reasons.n; i++) {
        const char *s = h->reasons.v[i];
        if (strlen(why) + strlen(s) + 3 < sizeof why)
            snprintf(why + strlen(why), sizeof why - strlen(why), "%s%s", why[0] ? "; " : "", s);
    }
    snprintf(a->health_why, sizeof a->health_why, "%s", why);
    if (health == a->health)
        return 0;
    int was = a->health;
    /* the node takes no new work from here: a cycle during the eviction's
     * write must not place a job there */
    set_health(c, n, health);
    if (health == CTLD_FAILED) {
        /* its jobs requeue: if that is not written, the node gets its
         * health back and the agent's next report tries again */
        char d[TS_NAME_MAX + sizeof why + 16];
        snprintf(d, sizeof d, "node %s failed: %s", c->cluster->nodes[n].name, why);
        int rc = evict_node(c, n, d, now, false, err);
        if (rc != 0 && a->health == health)
            set_health(c, n, was);
        return rc;
    }
    return 0;
}

/* The agent asks for its node to be drained: its prolog or epilog failed
 * (docs/tessera-agent.md "Prolog and epilog"). Drained as an admin drains,
 * with the agent's reason, until an admin resumes it: before the report's
 * tasks are applied, so that nothing the report ends is placed there again.
 * Under mu. */
static int apply_drain(ctld *c, int n, const char *why, ts_err *err)
{
    if (c->admin_drained[n])
        return 0; /* already: the first reason stands */
    char *d = c->agents[n].drain_why;
    snprintf(d, sizeof c->agents[n].drain_why, "%s", why);
    for (; *d; d++) /* the agent's text, shown by the API: printable ASCII */
        if ((unsigned char)*d < 0x20 || (unsigned char)*d >= 0x7f)
            *d = '?';
    fprintf(stderr, "tesserad: node %s drained at its agent's request: %s\n",
            c->cluster->nodes[n].name, c->agents[n].drain_why);
    int rc = ctld_node_drain_cycle(c, n, true, err);
    if (rc != 0)
        c->agents[n].drain_why[0] = '\0';
    return rc;
}

/* ---- the endpoints --------------------------------------------------------------- */

int ctld_agent_node(const ctld *c, const ctld_request *rq, const char *name, ctld_reply *r)
{
    int n = name ? ts_cluster_find_node(c->cluster, name) : -1;
    if (!name)
        ctld_reply_error(r, 400, "invalid", "node: required");
    else if (n < 0)
        ctld_reply_error(r, 404, "not_found", "node \"%s\" is not in the cluster", name);
    else if (strcmp(rq->who->name, name) != 0)
        ctld_reply_error(r, 403, "forbidden", "node credential \"%s\" cannot speak for \"%s\"",
                         rq->who->name, name);
    else
        return n;
    return -1;
}

static int node_of(ctld *c, const ctld_request *rq, const ts_sync *in, ctld_reply *r)
{
    int n = ctld_agent_node(c, rq, in->node, r);
    if (n >= 0 && c->node_virtual[n]) {
        ctld_reply_error(r, 409, "conflict", "node \"%s\" is virtual in the configuration",
                         in->node);
        return -1;
    }
    return n;
}

json_t *ctld_agent_body(const ctld_request *rq, ctld_reply *r)
{
    if (rq->who->role != TS_ROLE_NODE) {
        ctld_reply_error(r, 403, "forbidden", "only a node credential may use %s", rq->url);
        return NULL;
    }
    json_error_t je;
    json_t *in = json_loadb(rq->body, rq->len, 0, &je);
    if (!json_is_object(in)) {
        ctld_reply_error(r, 400, "invalid", "body: not a JSON object (%s)", je.text);
        json_decref(in);
        return NULL;
    }
    return in;
}

/* A digest of what in a report can change the controller's state: each
 * task's job, rank, state, exit code and outcome, and its image pull's
 * progress (a pull that ended is a rank that runs: its reason image_pull
 * goes), the health verdict and its reasons, the MIG error (FNV-1a over
 * their text). Readings (GPU
 * utilisation, step time) are left out: they are kept under the agent's
 * own lock whatever the digest. */
static uint64_t fnv(uint64_t h, const char *s)
{
    for (; s && *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return (h ^ 0xff) * 1099511628211ULL; /* a separator: "ab","c" != "a","bc" */
}

static uint64_t report_digest(const sync_msg *m)
{
    uint64_t h = 14695981039346656037ULL;
    char num[96];
    size_t i;
    h = fnv(h, m->has_tasks ? "tasks" : "no tasks");
    for (i = 0; i < m->ntasks; i++) {
        const ts_task_report *tk = &m->tasks[i];
        snprintf(num, sizeof num, "%lld/%d/%d/%d", (long long)tk->job, tk->rank, tk->step,
                 tk->exit_code);
        h = fnv(h, num);
        h = fnv(h, ts_report_state_name(tk->state));
        h = fnv(h, ts_report_outcome_name(tk->outcome));
        if (tk->has_image_pull) { /* its pull's progress, and its end, are news */
            snprintf(num, sizeof num, "pull %lld/%lld", (long long)tk->pull_done_bytes,
                     (long long)tk->pull_total_bytes);
            h = fnv(h, num);
            h = fnv(h, tk->pull_note);
        }
    }
    const ts_node_health *health = m->s.health;
    h = fnv(h, health ? "health" : "no health");
    h = fnv(h, health ? ts_verdict_name(health->verdict) : NULL);
    for (int k = 0; health && k < health->reasons.n; k++)
        h = fnv(h, health->reasons.v[k]);
    h = fnv(h, m->s.drain);
    return fnv(h, m->s.mig_error);
}

/* The report's readings replace the node's; under a->mu. Only running
 * ranks count (a stopped one reads as nothing). */
static void keep_readings(ctld_agent *a, const sync_msg *m, double now)
{
    size_t nt = m->ntasks;
    ctld_reading *rd = nt ? malloc(nt * sizeof *rd) : NULL;
    if (nt && !rd)
        return; /* out of memory: the last readings stay */
    int n = 0;
    for (size_t i = 0; i < nt; i++) {
        const ts_task_report *tk = &m->tasks[i];
        if (tk->state != TS_REPORT_RUNNING)
            continue;
        rd[n++] = (ctld_reading){.job = tk->job,
                                 .rank = tk->rank,
                                 .util = tk->gpu_util >= 0 ? (float)tk->gpu_util : -1.0f,
                                 .step_s = tk->step_s > 0 ? (float)tk->step_s : -1.0f,
                                 .at_s = now};
    }
    free(a->readings);
    a->readings = rd;
    a->nreadings = n;
}

/* The answers to output requests the report carries; under a->mu. */
static void take_log_answers(ctld_agent *a, const ts_sync *in)
{
    for (int i = 0; i < in->nlogs; i++) {
        const ts_sync_log *ans = &in->logs[i];
        for (ctld_logreq *q = a->logreqs; q; q = q->next)
            if (q->id == ans->id && !q->done) {
                q->done = true;
                /* its own copy: the reader frees it in another thread
                 * than the one freeing the report; one larger than an
                 * answer may be is dropped (docs/agent-protocol.md) */
                q->answer = ans->data_len <= CTLD_LOG_ANSWER_MAX_BYTES
                                ? ts_sync_log_encode(ans)
                                : json_pack("{s:s}", "error", "the agent's answer was larger "
                                            "than the agent protocol allows; dropped");
                pthread_cond_signal(&q->cv);
            }
    }
}

static void reply_register_first(ctld_reply *r)
{
    ctld_reply_error(r, 409, "conflict", "register first (the controller restarted or the node "
                     "was declared lost)");
}

/* The generation a report is applied against: the node's, less the moves
 * of output requests, which change nothing a report is applied against.
 * Under a->mu. */
static uint64_t report_gen(const ctld_agent *a) { return a->gen - a->log_moves; }

/* Applies what a registration or a report changes in the controller's
 * state, under c->mu, once no cycle plans or commits. Returns 0, or -1
 * with r answered. */
void ctld_agent_forget_discovery(ctld_agent *a)
{
    for (int i = 0; i < a->nib_guids; i++)
        free(a->ib_guids[i]);
    free(a->ib_guids);
    free(a->net_addr);
    a->ib_guids = NULL;
    a->nib_guids = 0;
    a->net_addr = NULL;
}

/* Keeps what the controller reads of a registration's discovery (d, NULL
 * none): copies, so that neither the document nor the rest of it stays for
 * the agent's life. Out of memory: what was copied. Under c->mu. */
static void keep_discovery(ctld_agent *a, const ts_discovery *d)
{
    ctld_agent_forget_discovery(a);
    if (!d)
        return;
    a->net_addr = d->net_addr ? strdup(d->net_addr) : NULL;
    a->ib_guids = d->nib_ports ? calloc((size_t)d->nib_ports, sizeof *a->ib_guids) : NULL;
    for (int i = 0; a->ib_guids && i < d->nib_ports; i++)
        if ((a->ib_guids[a->nib_guids] = strdup(d->ib_ports[i].guid)))
            a->nib_guids++;
}

static int apply_sync(ctld *c, int n, bool reg, const sync_msg *m, uint64_t digest,
                      uint64_t seq, double now, ctld_reply *r)
{
    ctld_agent *a = &c->agents[n];
    const ts_sync *in = &m->s;
    pthread_mutex_lock(&c->mu);
    ctld_commit_wait(c);
    if (seq > 0 && !reg && seq <= a->applied_seq) {
        /* stale: a newer report of the node was applied meanwhile (or is
         * being written); applied now, it would undo what that one said */
        pthread_mutex_unlock(&c->mu);
        return 0;
    }
    if (seq > 0) /* a registration starts the count again (a restarted agent) */
        a->applied_seq = seq;
    /* the generation the report is applied against: a move by anyone
     * during the apply (its writes release c->mu) makes the next same
     * report apply again */
    pthread_mutex_lock(&a->mu);
    uint64_t gen0 = report_gen(a);
    pthread_mutex_unlock(&a->mu);
    if (reg) {
        keep_discovery(a, in->discovery);
        ctld_share_one_user(c, n, in->discovery);
        bool was = a->registered;
        pthread_mutex_lock(&a->mu);
        a->registered = true;
        pthread_mutex_unlock(&a->mu);
        ctld_agent_moved(c, n);
        ctld_node_refresh(c, n);
        if (!was)
            ctld_kick(c);
    } else if (!a->registered) {
        pthread_mutex_unlock(&c->mu);
        reply_register_first(r);
        return -1;
    }
    ts_err err;
    int wrc = 0;
    bool whole = !reg;
    if (in->health)
        wrc = apply_health(c, n, in->health, now, &err);
    if (wrc == 0 && in->drain)
        wrc = apply_drain(c, n, in->drain, &err);
    if (wrc == 0 && m->has_tasks)
        wrc = apply_reports(c, n, m, now, &whole, &err);
    if (wrc != 0) {
        /* not durable: nothing applied; the agent reports again */
        pthread_mutex_unlock(&c->mu);
        ctld_reply_error(r, 503, "unavailable", "%s", err.msg);
        return -1;
    }
    snprintf(a->mig_error, sizeof a->mig_error, "%s", in->mig_error ? in->mig_error : "");
    if (in->leaving) { /* its agent stops: no work placed there until one registers */
        pthread_mutex_lock(&a->mu);
        a->registered = false;
        a->holder_seen_s = 0; /* another agent may register at once */
        pthread_mutex_unlock(&a->mu);
        ctld_agent_moved(c, n);
        ctld_node_refresh(c, n);
    }
    pthread_mutex_lock(&a->mu);
    /* every change of a job on the node moves gen, and so does undoing a
     * report whose write failed; a newer report applied while this one's
     * writes released c->mu records itself */
    if (seq == 0 || seq == a->applied_seq) {
        a->applied_ok = whole;
        a->applied_digest = digest;
        a->applied_gen = gen0;
    }
    pthread_mutex_unlock(&a->mu);
    pthread_mutex_unlock(&c->mu);
    return 0;
}

/* Says what of node n's sync was left out, at most once a minute a node. */
static void say_refused(ctld *c, int n, const char *what, const char *why)
{
    ctld_agent *a = &c->agents[n];
    double now = ctld_now();
    pthread_mutex_lock(&a->mu);
    bool say = now - a->refused_said_s >= 60.0;
    if (say)
        a->refused_said_s = now;
    pthread_mutex_unlock(&a->mu);
    if (say)
        fprintf(stderr, "tesserad: node %s: %s: %s\n", c->cluster->nodes[n].name, what, why);
}

/* Decodes a register or sync body (tessera/agent_proto.h) into m->s. A
 * member outside the protocol is left out and the rest decoded again, as a
 * task report is (a newer agent's value must not keep a node's reports out
 * until it is declared lost); *left holds the first such error, but a
 * discovery's, which goes in *disc (said on its own: it is sent once, at
 * registration, and a node without one has no underlay address or IB
 * ports). False, with r answered, for a "node" or "tasks" outside it (400:
 * nothing can be applied without them) or out of memory. */
static bool decode_body(sync_msg *m, ts_err *left, ts_err *disc, ctld_reply *r)
{
    ts_err err;
    for (int tries = 0; tries <= TS_SY_NFIELDS; tries++) {
        int rc = ts_sync_decode(m->doc, &m->s, &err);
        if (rc == 0) {
            m->has_tasks = m->s.present & TS_SY_BIT(TS_SY_TASKS);
            return true;
        }
        /* the member is the error's path up to its first '.', '[' or ':' */
        size_t len = strcspn(err.msg, ".[:");
        char key[32];
        snprintf(key, sizeof key, "%.*s", (int)(len < sizeof key ? len : sizeof key - 1),
                 err.msg);
        if (rc != TS_EINVAL || !strcmp(key, "node") || !strcmp(key, "tasks") ||
            json_object_del(m->doc, key) != 0)
            break;
        if (!strcmp(key, "discovery"))
            *disc = err;
        else if (!left->msg[0])
            *left = err;
    }
    ctld_reply_error(r, err.code == TS_ENOMEM ? 503 : 400,
                     err.code == TS_ENOMEM ? "unavailable" : "invalid", "%s", err.msg);
    return false;
}

/* Decodes the body's task reports into m; false with r answered (400
 * naming the field) when one is not what the protocol allows. */
/* Decodes a sync's task reports. A report outside the protocol is left
 * out, and the rest of the sync is applied: refusing the whole sync would
 * keep the node's health and every other task's end from the controller
 * until it declared the node lost and requeued all its jobs, for one task's
 * report (a bug, or an agent newer than its controller sending a value this
 * one does not know). The log names the field, at most once a minute a
 * node; a metric counts them. False (answered) only for a "tasks" that is
 * not a list, or out of memory. */
static bool decode_sync(ctld *c, int n, sync_msg *m, ctld_reply *r)
{
    const json_t *tasks = m->s.tasks;
    size_t len = json_array_size(tasks), refused = 0;
    m->tasks = len ? calloc(len, sizeof *m->tasks) : NULL;
    if (len && !m->tasks) {
        ctld_reply_error(r, 503, "unavailable", "out of memory");
        return false;
    }
    ts_err first = {0};
    for (size_t i = 0; i < len; i++) {
        char where[32];
        ts_err err;
        snprintf(where, sizeof where, "tasks[%zu]", i);
        if (ts_task_report_decode(json_array_get(tasks, i), where, &m->tasks[m->ntasks], &err) == 0)
            m->ntasks++;
        else if (refused++ == 0)
            first = err;
    }
    if (refused > 0) {
        __atomic_fetch_add(&c->m.agent_reports_refused, refused, __ATOMIC_RELAXED);
        char what[160];
        snprintf(what, sizeof what, "%zu task report(s) outside the agent protocol left out "
                 "(the rest of its sync applied)", refused);
        say_refused(c, n, what, first.msg);
    }
    return true;
}

static void sync_msg_fini(sync_msg *m)
{
    free(m->tasks);
    ts_sync_fini(&m->s);
    json_decref(m->doc);
}

void ctld_agent_route(ctld *c, const ctld_request *rq, ctld_reply *r)
{
    if (rq->who->role == TS_ROLE_NODE && strcmp(rq->method, "POST") != 0) {
        ctld_reply_error(r, 405, "method_not_allowed", "%s %s", rq->method, rq->url);
        return;
    }
    json_t *in = ctld_agent_body(rq, r);
    if (!in)
        return;
    bool reg = strcmp(rq->url, "/v1/agent/register") == 0;
    if (!reg && strcmp(rq->url, "/v1/agent/sync") != 0) {
        ctld_reply_error(r, 404, "not_found", "%s %s: no such endpoint", rq->method, rq->url);
        json_decref(in);
        return;
    }
    sync_msg m = {.doc = in};
    ts_err left = {0}, disc = {0};
    if (!decode_body(&m, &left, &disc, r)) {
        json_decref(in);
        return;
    }
    int n = node_of(c, rq, &m.s, r); /* the cluster's nodes are fixed: no lock */
    if (n >= 0 && disc.msg[0])
        fprintf(stderr, "tesserad: node %s: its discovery is outside the agent protocol, left "
                "out (no underlay address or IB ports known for it): %s\n",
                c->cluster->nodes[n].name, disc.msg);
    if (n >= 0 && left.msg[0])
        say_refused(c, n, "a member of its sync outside the agent protocol left out (the rest "
                          "applied)", left.msg);
    if (n < 0 || !decode_sync(c, n, &m, r)) {
        sync_msg_fini(&m);
        return;
    }
    ctld_agent *a = &c->agents[n];
    double now = ctld_now();
    uint64_t digest = report_digest(&m);
    /* 0: an agent that does not number its reports */
    uint64_t seq = m.s.present & TS_SY_BIT(TS_SY_SEQ) ? (uint64_t)m.s.seq : 0;
    /* the agent's own bookkeeping, under its own lock */
    pthread_mutex_lock(&a->mu);
    if (reg && ctld_agent_second(c, n, &m.s, now, r)) {
        pthread_mutex_unlock(&a->mu);
        sync_msg_fini(&m);
        return;
    }
    a->last_seen_s = now;
    bool known = a->registered;
    if (reg)
        snprintf(a->identity, sizeof a->identity, "%s",
                 m.s.present & TS_SY_BIT(TS_SY_AGENT) && m.s.agent ? m.s.agent : "");
    if (reg || known)
        a->holder_seen_s = now;
    /* older than a report already received: what it read is not the node's now */
    bool stale = seq > 0 && !reg && seq < a->seen_seq;
    if (seq > 0 && !stale)
        a->seen_seq = seq;
    /* the report applied last, again, with nothing moved on the node since:
     * it changes nothing, and neither c->mu nor the cycle is waited for */
    bool same = !reg && known && !m.s.leaving && a->applied_ok && a->applied_digest == digest &&
                a->applied_gen == report_gen(a);
    if ((known || reg) && !stale) {
        keep_readings(a, &m, now);
        int64_t ready = 0;
        for (int i = 0; !ready && i < m.s.nprefetch; i++)
            if (m.s.prefetch[i].state == TS_PREFETCH_READY)
                ready = m.s.prefetch[i].job;
        __atomic_store_n(&a->prefetch_ready, ready, __ATOMIC_RELAXED);
    }
    if (known || reg) /* answers, however late, are answers */
        take_log_answers(a, &m.s);
    pthread_mutex_unlock(&a->mu);
    /* before the tasks' notes below, which may add pulls; no list: as last listed */
    if ((known || reg) && !stale && (m.s.present & TS_SY_BIT(TS_SY_IMAGES)))
        ctld_imgloc_store(c, n, m.s.images, m.s.nimages);
    if (!reg && !known) {
        sync_msg_fini(&m);
        reply_register_first(r);
        return;
    }
    if (!same && apply_sync(c, n, reg, &m, digest, seq, now, r) != 0) {
        sync_msg_fini(&m);
        return;
    }
    __atomic_fetch_add(&c->m.agent_syncs[same], 1, __ATOMIC_RELAXED);
    int64_t seen = m.s.gen;
    /* long-poll: wait for the node's desired state to move */
    double wait = CTLD_SYNC_WAIT_S < c->cfg.node_lost_s / 2 ? CTLD_SYNC_WAIT_S
                                                            : c->cfg.node_lost_s / 2;
    /* an agent with tasks to watch asks for shorter waits */
    if ((m.s.present & TS_SY_BIT(TS_SY_WAIT_S)) && m.s.wait_s < wait)
        wait = m.s.wait_s;
    sync_msg_fini(&m);
    double until = now + wait;
    pthread_mutex_lock(&a->mu);
    while (!reg && (uint64_t)seen >= a->gen && !__atomic_load_n(&c->stop, __ATOMIC_ACQUIRE) &&
           ctld_now() < until)
        ctld_cond_wait_until(&a->moved, &a->mu, until);
    a->last_seen_s = ctld_now();
    ctld_agent_answer(c, n, r);
}

void ctld_agents_expire(ctld *c, double now)
{
    ctld_idle_check(c, now);
    ctld_straggler_check(c, now);
    for (int n = 0; n < c->cluster->nnodes; n++) {
        ctld_agent *a = &c->agents[n];
        pthread_mutex_lock(&a->mu);
        double seen = a->last_seen_s;
        pthread_mutex_unlock(&a->mu);
        if (!a->registered || now - seen < c->cfg.node_lost_s)
            continue;
        char d[200];
        snprintf(d, sizeof d, "node %s lost: no word from its agent for %.0f s",
                 c->cluster->nodes[n].name, now - seen);
        ts_err err;
        /* its jobs requeue first; if that is not written the node stays
         * (its jobs keep their GPUs) and the next cycle tries again */
        if (evict_node(c, n, d, now, true, &err) != 0) {
            fprintf(stderr, "tesserad: %s: %s; trying again at the next cycle\n", d, err.msg);
            continue;
        }
        pthread_mutex_lock(&a->mu);
        a->registered = false;
        a->applied_ok = false;
        pthread_mutex_unlock(&a->mu);
        ctld_node_refresh(c, n);
    }
}
