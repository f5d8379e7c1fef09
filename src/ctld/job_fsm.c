/*
 * job_fsm.c - the job state machine (job_fsm.h): the transition table, the
 * planning of one event into a transaction, its commit and its application.
 *
 * The table is the only place that says which state an event leads to and
 * what else must happen (free the job's GPUs, wake its agents, back off,
 * record the end of a run, leave memory). Planning copies the job's row and
 * changes the copy; commit hands the copies and the events to the store in
 * one ts_store_apply; application moves the copies into the live jobs. So
 * "written, then applied" is what the code does, not a rule each caller has
 * to remember, and a failed write has exactly one meaning: nothing happened.
 */
#include "ctld/job_fsm.h"
#include "ctld/http.h"
#include "ctld/ended_runs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tessera/grow.h"

/* Effects, applied after the commit. */
#define FX_UNBIND 0x01u     /* its allocations go back (agents told) */
#define FX_BIND 0x02u       /* it takes the cycle's allocations */
#define FX_STOPPING 0x04u   /* stop signal now, grace until stop_by_s */
#define FX_RUN_ENDED 0x08u  /* a "run-ended" event first (usage counts the run) */
#define FX_BACKOFF 0x10u    /* eligible again at eligible_s */
#define FX_REMOVE 0x20u     /* terminal: leaves memory */
#define FX_PREEMPTED 0x40u  /* counts as a preemption (backoff, acct) */
#define FX_TIMES_END 0x80u  /* end_s = now */
#define FX_TIMES_RESET 0x100u /* start_s = 0 (back to waiting) */
#define FX_TIMED_OUT 0x200u /* its time limit ends it: reason "timeout" until it ends */
#define FX_CANCEL_REASON 0x400u /* cancelled while its ranks stop: reason "cancel" until then */
#define FX_RESPEC 0x800u    /* its spec, priority and GPUs are the args' (state stays) */
#define FX_HELD_REASON 0x1000u /* reason "held" at once, not only from the next cycle */
#define FX_CLEAR_REASON 0x2000u /* its reason goes (the next cycle says why it waits) */
#define FX_RESTART 0x4000u  /* its run stopped to run again: restarts (TESSERA_RESTARTS) */

/* A transition whose state stays what it was. */
#define TO_SAME (-1)

/* The reason a job keeps from its time limit on (restored with it). */
#define TIMEOUT_REASON "timeout"
/* The reason a cancelled job keeps while its ranks stop (restored with it). */
#define CANCEL_REASON "cancel"
/* The reason of a held job (the cycle's TS_PEND_HELD says the same). */
#define HELD_REASON "held"

#define S(x) (1u << (x))
#define ACTIVE (S(TS_JOB_PENDING) | S(TS_JOB_HELD) | S(TS_JOB_RUNNING) | S(TS_JOB_STOPPING))

typedef struct transition {
    const char *name;   /* the event, in messages */
    unsigned from;      /* states it applies to */
    int to;
    unsigned fx;
    const char *kind;   /* the event row it writes */
    const char *need;   /* what the message says when the state does not allow it */
} transition;

static const transition TABLE[CTLD_JE_EVENTS] = {
    [CTLD_JE_HOLD] = {"hold", S(TS_JOB_PENDING), TS_JOB_HELD, FX_HELD_REASON, "hold",
                      "only a pending job can be held"},
    [CTLD_JE_RELEASE] = {"release", S(TS_JOB_HELD), TS_JOB_PENDING, FX_CLEAR_REASON, "release",
                         "only a held job can be released"},
    [CTLD_JE_CANCEL] = {"cancel", ACTIVE, TS_JOB_CANCELLED,
                        FX_UNBIND | FX_REMOVE | FX_TIMES_END | FX_CANCEL_REASON, "cancel",
                        "only an active job can be cancelled"},
    [CTLD_JE_REQUEUE] = {"requeue", S(TS_JOB_RUNNING), TS_JOB_PENDING,
                         FX_UNBIND | FX_RUN_ENDED | FX_TIMES_RESET | FX_RESTART, "requeue",
                         "only a running job can be requeued"},
    [CTLD_JE_START] = {"start", S(TS_JOB_PENDING), TS_JOB_RUNNING, FX_BIND, "started",
                       "only a pending job can start"},
    [CTLD_JE_PREEMPT] = {"preempt", S(TS_JOB_RUNNING), TS_JOB_STOPPING,
                         FX_STOPPING | FX_PREEMPTED, "preempted",
                         "only a running job can be preempted"},
    [CTLD_JE_REAP] = {"reap", S(TS_JOB_RUNNING), TS_JOB_STOPPING, FX_STOPPING, "reaped",
                      "only a running job can be reaped"},
    [CTLD_JE_STRAGGLE] = {"restart", S(TS_JOB_RUNNING), TS_JOB_STOPPING,
                          FX_STOPPING | FX_PREEMPTED, "stopping",
                          "only a running job can be restarted"},
    [CTLD_JE_FINISH] = {"finish", S(TS_JOB_RUNNING), TS_JOB_COMPLETED,
                        FX_UNBIND | FX_REMOVE | FX_TIMES_END, "finished",
                        "only a running job can finish"},
    [CTLD_JE_FAIL] = {"fail", S(TS_JOB_RUNNING), TS_JOB_FAILED,
                      FX_UNBIND | FX_REMOVE | FX_TIMES_END, "failed",
                      "only a running job can fail"},
    [CTLD_JE_STOPPED] = {"requeue", S(TS_JOB_STOPPING), TS_JOB_PENDING,
                         FX_UNBIND | FX_RUN_ENDED | FX_BACKOFF | FX_TIMES_RESET | FX_RESTART,
                         "requeued",
                         "only a stopping job can requeue"},
    [CTLD_JE_EVICT] = {"evict", S(TS_JOB_RUNNING) | S(TS_JOB_STOPPING), TS_JOB_PENDING,
                       FX_UNBIND | FX_RUN_ENDED | FX_TIMES_RESET | FX_RESTART, "requeued",
                       "only a job with allocations can be evicted"},
    [CTLD_JE_DEPFAIL] = {"fail", S(TS_JOB_PENDING), TS_JOB_FAILED, FX_REMOVE | FX_TIMES_END,
                         "failed", "only a pending job fails on its dependency"},
    [CTLD_JE_EXPIRE] = {"time limit", S(TS_JOB_RUNNING), TS_JOB_STOPPING,
                        FX_STOPPING | FX_TIMED_OUT, "time-limit",
                        "only a running job reaches its time limit"},
    [CTLD_JE_TIMEOUT] = {"timeout", S(TS_JOB_RUNNING) | S(TS_JOB_STOPPING), TS_JOB_TIMEOUT,
                         FX_UNBIND | FX_REMOVE | FX_TIMES_END | FX_TIMED_OUT, "timeout",
                         "only a job with allocations can time out"},
    [CTLD_JE_CANCEL_STOP] = {"cancel", S(TS_JOB_RUNNING) | S(TS_JOB_STOPPING), TS_JOB_STOPPING,
                             FX_STOPPING | FX_CANCEL_REASON, "cancel",
                             "only an active job can be cancelled"},
    [CTLD_JE_REQUEUE_STOP] = {"requeue", S(TS_JOB_RUNNING), TS_JOB_STOPPING, FX_STOPPING,
                              "requeue", "only a running job can be requeued"},
    [CTLD_JE_STOPPED_CANCEL] = {"cancel", S(TS_JOB_STOPPING), TS_JOB_CANCELLED,
                                FX_UNBIND | FX_REMOVE | FX_TIMES_END, "cancelled",
                                "only a stopping job ends cancelled"},
    [CTLD_JE_UPDATE] = {"update", ACTIVE, TO_SAME, FX_RESPEC, "updated",
                        "only an active job can be updated"},
};

/* A user's cancel or requeue of a job with ranks on agents waits for them
 * to stop (the GPUs are the job's until then, docs/cli.md), and whatever
 * stops or evicts a job being cancelled ends it cancelled. */
static int fsm_event_for(const cjob *j, int event)
{
    bool on_agents = j->allocs && !j->is_virtual;
    bool live = j->row.state == TS_JOB_RUNNING || j->row.state == TS_JOB_STOPPING;
    if (event == CTLD_JE_CANCEL && on_agents && live)
        return CTLD_JE_CANCEL_STOP;
    if (event == CTLD_JE_REQUEUE && on_agents && j->row.state == TS_JOB_RUNNING)
        return CTLD_JE_REQUEUE_STOP;
    if ((event == CTLD_JE_STOPPED || event == CTLD_JE_EVICT) && j->cancel_stop &&
        j->row.state == TS_JOB_STOPPING)
        return CTLD_JE_STOPPED_CANCEL;
    return event;
}

const char *ctld_job_event_name(int event)
{
    return event >= 0 && event < CTLD_JE_EVENTS ? TABLE[event].name : "unknown";
}

bool ctld_txn_has(const ctld_txn *t, const cjob *j)
{
    for (int i = 0; i < t->n; i++)
        if (t->ch[i].j == j)
            return true;
    return false;
}

int ctld_txn_event(ctld_txn *t, int64_t job, double now, const char *kind, const char *detail)
{
    if (ts_grow((void **)&t->ev, &t->evcap, t->nev + 1, 16, sizeof *t->ev) != 0)
        return TS_ENOMEM;
    ts_event_row *e = &t->ev[t->nev];
    memset(e, 0, sizeof *e);
    e->job_id = job;
    e->t_s = now;
    snprintf(e->kind, sizeof e->kind, "%s", kind);
    if (detail && !(e->detail = strdup(detail)))
        return TS_ENOMEM;
    t->nev++;
    return 0;
}

static char *dup_or_null(const char *s, bool *oom)
{
    if (!s)
        return NULL;
    char *d = strdup(s);
    if (!d)
        *oom = true;
    return d;
}

/* Why the event may not be planned now, or 0: the job's state, a change of
 * it already in this transaction or being written, or missing arguments. */
static int fsm_refusal(const ctld_txn *t, const cjob *j, int event, const transition *tr,
                       const ctld_fsm_args *a, ts_err *err)
{
    int from = j->row.state;
    if (from < 0 || from >= TS_JOB_STATES || !(tr->from & S(from)))
        return ts_err_set(err, TS_ECONFLICT, "job %lld is %s: %s", (long long)j->row.id,
                          ts_job_state_name(from), tr->need);
    if (ctld_txn_has(t, j))
        return ts_err_set(err, TS_ECONFLICT, "job %lld: already changed in this transaction",
                          (long long)j->row.id);
    if (j->pinned)
        return ts_err_set(err, TS_ECONFLICT, "job %lld: another change of it is being written",
                          (long long)j->row.id);
    if (event == CTLD_JE_START && !a->allocs)
        return ts_err_set(err, TS_EINVAL, "start: allocations are required");
    if ((tr->fx & FX_RESPEC) && !a->spec_json)
        return ts_err_set(err, TS_EINVAL, "update: the new spec is required");
    return 0;
}

/* Room for one more change in the transaction. */
static int txn_reserve(ctld_txn *t, ts_err *err)
{
    if (ts_grow((void **)&t->ch, &t->cap, t->n + 1, 16, sizeof *t->ch) != 0)
        return ts_err_set(err, TS_ENOMEM, "out of memory");
    return 0;
}

/* The change's header: the job, its generation, the event, the state it
 * goes to and, for a stop, by when it must have stopped. */
static void change_begin(const ctld *c, ctld_change *ch, cjob *j, int event,
                         const transition *tr, const ctld_fsm_args *a, double now)
{
    int from = j->row.state;
    memset(ch, 0, sizeof *ch);
    ch->j = j;
    ch->base_gen = j->row.gen;
    ch->event = event;
    ch->fx = tr->fx;
    ch->to = tr->to == TO_SAME ? from : tr->to;
    ch->stop_by_s = a->stop_by_s;
    ch->restart_now = a->restart_now;
    if (event == CTLD_JE_CANCEL_STOP || event == CTLD_JE_REQUEUE_STOP) {
        /* the job's checkpoint grace, never later than a stop already under way */
        double g = j->sj.ckpt_grace_s >= 0 ? j->sj.ckpt_grace_s : c->cfg.sched.default_grace_s;
        ch->stop_by_s = now + g;
        if (j->row.state == TS_JOB_STOPPING && j->sj.stop_by_s > 0 &&
            j->sj.stop_by_s < ch->stop_by_s)
            ch->stop_by_s = j->sj.stop_by_s;
    }
    ch->eligible_s = a->eligible_s;
    if (event == CTLD_JE_STOPPED && j->reaped)
        ch->to = TS_JOB_HELD; /* the idle policy's stop ends held */
}

/* The new row: a copy of the job's, with its own strings, and the
 * transition's effects (times, reasons, placement) applied. Returns false
 * when a copy ran out of memory. */
static bool row_with_effects(ts_job_row *r, const cjob *j, const transition *tr, int to,
                             const ctld_fsm_args *a, double now)
{
    bool oom = false;
    *r = j->row;
    r->spec_json = NULL; /* unchanged, but by an update */
    if (tr->fx & FX_RESPEC) {
        r->spec_json = dup_or_null(a->spec_json, &oom);
        r->priority = a->priority;
        r->gpus = a->gpus;
    }
    if (tr->fx & FX_HELD_REASON)
        snprintf(r->reason, sizeof r->reason, "%s", HELD_REASON);
    if (tr->fx & FX_CLEAR_REASON)
        r->reason[0] = '\0';
    r->placement_json = NULL;
    r->result_json = NULL;
    r->why = dup_or_null(j->row.why, &oom);
    r->state = to;
    if (tr->fx & FX_TIMES_END) /* its agents' time where they said it (an outage) */
        r->end_s = a->end_s > 0 && a->end_s < now ? a->end_s : now;
    if (tr->fx & FX_TIMES_RESET)
        r->start_s = 0;
    if (tr->fx & FX_PREEMPTED)
        r->preemptions++;
    if (tr->fx & FX_RESTART)
        r->restarts++;
    if (!(tr->fx & FX_UNBIND))
        r->placement_json = dup_or_null(j->row.placement_json, &oom);
    if (tr->fx & FX_TIMED_OUT)
        snprintf(r->reason, sizeof r->reason, "%s", TIMEOUT_REASON);
    if (tr->fx & FX_CANCEL_REASON)
        snprintf(r->reason, sizeof r->reason, "%s", CANCEL_REASON);
    if (a->end_reason)
        snprintf(r->reason, sizeof r->reason, "%s", a->end_reason);
    /* cancelled at once: what it waited for is no longer why */
    const char *why = a->end_why ? a->end_why
                      : (tr->fx & FX_CANCEL_REASON) && to == TS_JOB_CANCELLED ? "cancelled"
                                                                              : NULL;
    if (why) {
        free(r->why);
        r->why = dup_or_null(why, &oom);
    }
    r->result_json = dup_or_null(a->result_json, &oom);
    return !oom;
}

/* A start: the change keeps a copy of the allocations, and the row its
 * start time, GPU model and placement. Returns false when out of memory. */
static bool row_started(const ctld *c, ctld_change *ch, const cjob *j, const ctld_fsm_args *a,
                        double now)
{
    bool oom = false;
    ts_job_row *r = &ch->row;
    ch->allocs = malloc((size_t)j->ntasks * sizeof *ch->allocs);
    if (ch->allocs)
        memcpy(ch->allocs, a->allocs, (size_t)j->ntasks * sizeof *ch->allocs);
    else
        oom = true;
    r->start_s = now;
    r->reason[0] = '\0';
    free(r->why);
    r->why = NULL;
    int m = c->cluster->nodes[a->allocs[0].node].model;
    snprintf(r->gpu_model, sizeof r->gpu_model, "%s", m >= 0 ? ts_gpu_model_get(m)->name : "");
    free(r->placement_json);
    r->placement_json = ctld_placement_json_allocs(c, a->allocs, j->ntasks);
    return !oom && r->placement_json;
}

int ctld_fsm_plan(ctld *c, ctld_txn *t, cjob *j, int event, const ctld_fsm_args *a, double now,
                  ts_err *err)
{
    static const ctld_fsm_args none = {0};
    if (!a)
        a = &none;
    if (event < 0 || event >= CTLD_JE_EVENTS)
        return ts_err_set(err, TS_EINVAL, "event: %d is not a job event", event);
    event = fsm_event_for(j, event);
    const transition *tr = &TABLE[event];
    int rc = fsm_refusal(t, j, event, tr, a, err);
    if (rc == 0)
        rc = txn_reserve(t, err);
    if (rc != 0)
        return rc;
    ctld_change *ch = &t->ch[t->n];
    change_begin(c, ch, j, event, tr, a, now);
    ts_job_row *r = &ch->row;
    bool oom = !row_with_effects(r, j, tr, ch->to, a, now);
    if (event == CTLD_JE_START)
        oom = !row_started(c, ch, j, a, now) || oom;
    bool on_agents = false; /* a tenant network is for real nodes' tasks */
    for (int k = 0; event == CTLD_JE_START && k < j->ntasks && !oom; k++)
        on_agents = on_agents || !c->node_virtual[a->allocs[k].node];
    int ord; /* a host-network job has no address, but its partition key all the same */
    if (on_agents && c->cfg.net_isolation &&
        (j->spec->host_network ? c->cfg.net_ib_partitions &&
                                     (rc = ctld_net_tenant(c, j->row.tenant, &ord, err)) != 0
                               : (rc = ctld_net_place(c, t, j, &r->placement_json, err)) != 0)) {
        ts_job_row_fini(r);
        free(ch->allocs);
        return rc;
    }
    if (!oom && (tr->fx & FX_RUN_ENDED)) {
        char *d = ctld_run_detail(j, now);
        rc = d ? ctld_txn_event(t, j->row.id, now, "run-ended", d) : TS_ENOMEM;
        free(d);
    }
    const char *kind = event == CTLD_JE_STOPPED && ch->to == TS_JOB_HELD ? "held" : tr->kind;
    if (!oom && rc == 0)
        rc = ctld_txn_event(t, j->row.id, now, kind, a->detail);
    if (oom || rc != 0) {
        ts_job_row_fini(r);
        free(ch->allocs);
        return ts_err_set(err, TS_ENOMEM, "out of memory");
    }
    t->n++;
    return 0;
}

int ctld_txn_commit(ctld *c, ctld_txn *t, ts_err *err)
{
    t->committed = false;
    if (t->n == 0 && t->nev == 0) {
        t->committed = true;
        return 0;
    }
    ts_job_row *rows = t->n ? malloc((size_t)t->n * sizeof *rows) : NULL;
    if (t->n && !rows)
        return ts_err_set(err, TS_ENOMEM, "out of memory");
    for (int i = 0; i < t->n; i++)
        rows[i] = t->ch[i].row;
    int rc = ts_store_apply(c->store, rows, t->n, t->ev, t->nev, err);
    if (rc == 0) {
        for (int i = 0; i < t->n; i++)
            t->ch[i].row.gen = rows[i].gen;
        t->committed = true;
    }
    free(rows);
    return rc;
}

static int recent_preemptions(const cjob *j, double now)
{
    int n = 0;
    for (int i = 0; i < j->npreempted && i < CTLD_PREEMPT_MEMORY; i++)
        n += now - j->preempted_at[i] < 3600.0;
    return n;
}

static void apply_one(ctld *c, ctld_change *ch, double now)
{
    cjob *j = ch->j;
    if (j->row.gen != ch->base_gen) {
        /* cannot happen while the store checks gens; refuse rather than guess */
        fprintf(stderr, "tesserad: job %lld: changed since its %s was planned; not applied\n",
                (long long)j->row.id, ctld_job_event_name(ch->event));
        return;
    }
    if (ch->event == CTLD_JE_FAIL && !j->is_virtual)
        ctld_ended_note(c, j, now); /* its other ranks' last output comes after it */
    if (ch->fx & FX_UNBIND)
        ctld_job_unbind(c, j, now); /* frees the old placement too */
    /* the row: the committed copy, with the job's own spec (an update's
     * new one: job_update.c swaps the parsed spec under the same lock) */
    char *spec_json = ch->row.spec_json ? ch->row.spec_json : j->row.spec_json;
    if (ch->row.spec_json)
        free(j->row.spec_json);
    int was = j->row.state;
    ctld_notify_change(c, j, j->row.state, &ch->row, now);
    free(j->row.placement_json);
    free(j->row.why);
    free(j->row.result_json);
    j->row = ch->row;
    j->row.spec_json = spec_json;
    memset(&ch->row, 0, sizeof ch->row); /* ownership moved */
    ctld_queued_note(c, j, was, j->row.state); /* its new spec's bytes (an update's) */
    j->sj.held = j->row.state == TS_JOB_HELD;
    switch (ch->event) {
    case CTLD_JE_START:
        j->allocs = ch->allocs;
        ch->allocs = NULL;
        j->sj.allocs = j->allocs;
        ctld_net_bind(j);
        if (ctld_node_index_add(c, j) != 0) /* its agents would not see it */
            fprintf(stderr, "tesserad: job %lld: out of memory indexing its nodes\n",
                    (long long)j->row.id);
        j->sj.start_s = now;
        j->sj.last_ckpt_s = now;
        j->sj.stopping = false;
        j->is_virtual = true;
        for (int t = 0; t < j->ntasks; t++)
            j->is_virtual = j->is_virtual && c->node_virtual[j->allocs[t].node];
        j->end_s = now + ctld_job_run_s(j);
        if (!j->is_virtual)
            ctld_nodes_touch_job(c, j); /* their agents start the ranks */
        c->m.started++;
        break;
    case CTLD_JE_PREEMPT:
        j->preempted_at[j->npreempted++ % CTLD_PREEMPT_MEMORY] = now;
        c->m.preempted++;
        if (ch->restart_now)
            j->restart_now = true; /* a move: it starts again elsewhere at once */
        break;
    case CTLD_JE_REAP:
        j->reaped = true;
        break;
    case CTLD_JE_STRAGGLE:
        j->restart_now = true;
        break;
    case CTLD_JE_FINISH:
        c->m.finished++;
        break;
    case CTLD_JE_CANCEL:
    case CTLD_JE_STOPPED_CANCEL:
        c->m.cancelled++;
        break;
    case CTLD_JE_CANCEL_STOP:
        j->cancel_stop = true;
        break;
    case CTLD_JE_REQUEUE_STOP:
        j->restart_now = true; /* a user's requeue waits for no backoff */
        break;
    case CTLD_JE_EXPIRE:
        j->timed_out = true;
        break;
    default:
        break;
    }
    if (ch->fx & FX_STOPPING) {
        j->sj.stopping = true;
        j->sj.stop_by_s = ch->stop_by_s;
        if (!j->is_virtual)
            ctld_nodes_touch_job(c, j); /* their agents signal the ranks */
    }
    if (ch->fx & FX_BACKOFF) {
        if (ch->eligible_s > 0) {
            j->sj.eligible_s = ch->eligible_s;
        } else if (j->restart_now) {
            j->sj.eligible_s = now;
        } else {
            int n = recent_preemptions(j, now);
            j->sj.eligible_s = now + ts_sched_backoff_s(c->sched, n > 0 ? n : 1);
        }
        j->restart_now = false;
        j->reaped = false;
        ts_err e;
        if (ctld_elastic_apply(c, j, &e) != 0) /* a resize: its tasks at the new size */
            fprintf(stderr, "tesserad: job %lld: resize: %s\n", (long long)j->row.id, e.msg);
    }
    if (ch->fx & FX_REMOVE)
        ctld_job_remove(c, j);
    ch->j = NULL;
}

void ctld_txn_apply(ctld *c, ctld_txn *t, double now)
{
    if (!t->committed)
        return;
    for (int i = 0; i < t->n; i++)
        apply_one(c, &t->ch[i], now);
    if (t->n > 0 && !t->quiet)
        ctld_kick(c);
}

void ctld_txn_fini(ctld_txn *t)
{
    for (int i = 0; i < t->n; i++) {
        ts_job_row_fini(&t->ch[i].row);
        free(t->ch[i].allocs);
    }
    free(t->ch);
    for (int i = 0; i < t->nev; i++)
        free(t->ev[i].detail);
    free(t->ev);
    memset(t, 0, sizeof *t);
}

int ctld_txn_commit_unlocked(ctld *c, ctld_txn *t, double now, ts_err *err)
{
    for (int i = 0; i < t->n; i++)
        t->ch[i].j->pinned++;
    ctld_inflight_enter(c);
    int rc = ctld_txn_commit(c, t, err);
    ctld_inflight_leave(c);
    for (int i = 0; i < t->n; i++)
        t->ch[i].j->pinned--;
    if (rc == 0)
        ctld_txn_apply(c, t, now);
    ctld_phase_moved(c); /* its jobs are unpinned */
    return rc;
}

cjob *ctld_job_wait_unpinned(ctld *c, int64_t id)
{
    for (;;) {
        ctld_commit_wait(c);
        cjob *j = ctld_job_find(c, id);
        if (!j || !j->pinned)
            return j;
        ctld_changer_wait(c); /* its change in flight */
    }
}

int ctld_fsm_run(ctld *c, cjob *j, int event, const ctld_fsm_args *a, double now, ts_err *err)
{
    ctld_txn t = {0};
    int rc = ctld_fsm_plan(c, &t, j, event, a, now, err);
    if (rc == 0)
        rc = ctld_txn_commit(c, &t, err);
    if (rc == 0)
        ctld_txn_apply(c, &t, now);
    ctld_txn_fini(&t);
    return rc;
}
