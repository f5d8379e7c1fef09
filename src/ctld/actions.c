/*
 * actions.c - what users and admins do to what exists: a job's cancel,
 * hold, release and requeue, a node's drain and resume (batched, written
 * with the lock released), the tenants replaced (state.c has the jobs in
 * memory, lock.h the phases these writes announce).
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
    ctld_node_index_del(c, j);
    j->sj.allocs = j->allocs;
    ctld_service_run_ended(c, j, now); /* the las order keeps what it attained */
    ctld_steps_run_ended(c, j, now, NULL); /* its steps' tasks stop with it */
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

void ctld_actor_init(ctld_actor *x, int event, const char *by)
{
    memset(x, 0, sizeof *x);
    if (!by)
        return;
    snprintf(x->detail, sizeof x->detail, "by=%s", by);
    x->args.detail = x->detail;
    if (event == CTLD_JE_CANCEL) {
        snprintf(x->why, sizeof x->why, "cancelled by %s", by);
        x->args.end_why = x->why;
    }
}

int ctld_event_round(ctld *c, int event, const char *by, cjob *(*next)(ctld *c, void *ctx),
                     void *ctx, int64_t **ids, int *n, int *busy, ts_err *err)
{
    ctld_actor who;
    ctld_actor_init(&who, event, by);
    pthread_mutex_lock(&c->mu);
    ctld_commit_wait(c);
    ctld_txn t = {0};
    double now = ctld_now();
    int rc = 0;
    *n = *busy = 0;
    for (cjob *j; rc == 0 && (j = next(c, ctx)) != NULL;) {
        if (j->pinned) {
            (*busy)++;
            continue;
        }
        ts_err e;
        int prc = ctld_fsm_plan(c, &t, j, event, &who.args, now, &e);
        if (prc != 0 && prc != TS_ECONFLICT) /* a conflict: the event does not apply */
            rc = ts_err_set(err, prc, "%s", e.msg);
    }
    int64_t *planned = NULL; /* taken before the commit: applying it moves the rows out */
    if (rc == 0 && ids && t.n > 0 && !(planned = malloc((size_t)t.n * sizeof *planned)))
        rc = ts_err_set(err, TS_ENOMEM, "out of memory");
    for (int i = 0; planned && i < t.n; i++)
        planned[i] = t.ch[i].row.id;
    if (rc == 0 && t.n > 0)
        rc = ctld_txn_commit_unlocked(c, &t, now, err);
    if (rc == 0)
        *n = t.n;
    ctld_txn_fini(&t);
    pthread_mutex_unlock(&c->mu);
    if (rc != 0) {
        free(planned);
        planned = NULL;
    }
    if (ids)
        *ids = planned;
    return rc;
}

int ctld_job_action(ctld *c, int64_t id, const char *action, const char *by, ts_err *err)
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
        ctld_actor who;
        ctld_actor_init(&who, event, by);
        rc = ctld_fsm_plan(c, &t, j, event, &who.args, now, err);
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
        ctld_commit_enter(c);
        rc = ts_store_setting_put(c->store, CTLD_DRAINED_KEY, txt, err);
        ctld_commit_leave(c);
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
            rc = ts_store_setting_put(c->store, CTLD_DRAINED_KEY, txt, &e);
            pthread_mutex_lock(&c->mu); /* a cycle may plan: on its copy (loop.c) */
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

int ctld_tenants_replace(ctld *c, const char *yaml, size_t len, ts_errs *bad, ts_err *err)
{
    ts_tenants *ts = NULL;
    ts_quota *q = NULL;
    ts_sched *s = NULL;
    int rc = ts_load_tenants_yaml_all(yaml, len, "tenants", &ts, bad);
    if (rc != 0)
        ts_err_set(err, rc, "%s", bad->n ? bad->msg[0] : "tenants: invalid");
    ts_err why;
    if (rc == 0 && ctld_config_services_tenants(&c->cfg, ts, &why) != 0) /* 409, nothing changes */
        rc = ts_err_set(err, TS_EEXIST, "tenants: the replacement would leave tesserad.yaml's "
                        "%s; change the configuration first", why.msg);
    if (rc == 0)
        rc = ts_quota_new(ts, c->cfg.half_life_s, &q, err);
    if (rc == 0)
        ctld_quota_capacity(c, q); /* the cluster never changes: no lock needed */
    if (rc != 0) {
        ts_quota_free(q);
        ts_tenants_free(ts);
        return rc;
    }
    pthread_mutex_lock(&c->mu);
    ctld_swap_enter(c); /* the scheduler is swapped below */
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
    ctld_swap_leave(c);
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
        if (rc == 0 && ctld_queued_recount(c) != 0) /* by the new tenants' indexes */
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
