/*
 * job.h - internal: the jobs in memory (cjob) and what reads and changes them: state.c
 * (jobs, submission), restore.c, actions.c, policies.c, net.c, throttle.c,
 * service.c. Under ctld.mu unless a comment says otherwise.
 */
#ifndef TS_CTLD_JOB_H
#define TS_CTLD_JOB_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "ctld/dtask.h"
#include "tessera/cycle.h"
#include "tessera/spec.h"
#include "tessera/store.h"
#include "tessera/tenant.h"

typedef struct ctld ctld;

/* The agent protocol's sizes the controller keeps (docs/agent-protocol.md
 * "Sizes"): the output one answer to an output request carries (a longer
 * one is dropped), and the last output of an ended task kept per stream
 * (a longer one keeps its end). */
#define CTLD_LOG_ANSWER_MAX_BYTES (256 * 1024)
#define CTLD_TASK_OUTPUT_MAX_BYTES (16 * 1024)
/* A submitted array larger than this is answered with {id, name, state} per job. */
#define CTLD_ARRAY_BRIEF 100
/* An array larger than this is materialised lazily (array_lazy.c): this
 * many of its elements are jobs at submission, and after each cycle it
 * gets jobs for its next lowest pending elements until this many (or its
 * throttle, if smaller) wait as jobs. */
#define CTLD_ARRAY_WINDOW 64
/* ... and the most it keeps waiting as jobs, when the cycles start all it
 * is given (a large idle cluster): wanted() in array_lazy.c. */
#define CTLD_ARRAY_WINDOW_MAX 16384
typedef struct ctld_lazy ctld_lazy;
/* One parsed spec that a large array's elements share read-only; freed with
 * its last reference (ctld_spec_share_put, any thread). */
typedef struct ctld_spec_share {
    ts_job_spec *spec;
    _Atomic int refs;
} ctld_spec_share;
void ctld_spec_share_put(ctld_spec_share *s);


/* ---- jobs in memory (state.c) -------------------------------------------- */

#define CTLD_PREEMPT_MEMORY 8

/* Per rank of a job on agent-served nodes: what its agent last reported. */
enum ctld_rank_state {
    CTLD_RANK_PENDING = 0,   /* asked to run, not reported yet */
    CTLD_RANK_RUNNING = 1,
    CTLD_RANK_DONE = 2,      /* exited 0 */
    CTLD_RANK_FAILED = 3,    /* exited non-zero or by a signal */
    CTLD_RANK_STOPPED = 4,   /* stopped on request (preempted, cancelled) */
};

typedef struct cjob {
    ts_job_row row;             /* the store's row, kept in step */
    ts_job_spec *spec;          /* parsed from row.spec_json */
    struct ctld_spec_share *spec_share; /* spec is this share's (a large array's
                                 * elements parse it once: array_lazy.c), or NULL: its own */
    ts_request *tasks;          /* one per rank */
    int ntasks;
    uint64_t *node_mask;        /* sj.node_mask: the nodes its spec allows, NULL = all */
    ts_alloc *allocs;           /* ntasks while running or stopping, else NULL */
    ts_job sj;                  /* the scheduler's view of it */
    uint32_t host_ports[TS_HOST_PORTS_MAX]; /* sj.host_ports: spec network.publish */
    double end_s;               /* virtual: when it finishes */
    double preempted_at[CTLD_PREEMPT_MEMORY]; /* recent preemption times */
    int npreempted;
    double reserved_at_s;       /* -1 */
    /* From the last cycle (-1: not ranked, e.g. held or started): how many of
     * its tenant's jobs and of all jobs were looked at before it, its las
     * level, and when it could start (-1: not planned this cycle). */
    int queue_tenant, queue_cluster, las_level;
    double estimated_s;
    bool is_virtual;            /* runs on virtual nodes only */
    int32_t *net_host;          /* per rank: its host number in its tenant's block (net.c);
                                 * NULL: no tenant network */
    uint8_t *rank_state;        /* ntasks, enum ctld_rank_state, while it runs on agents */
    double idle_since_s;        /* every rank idle since; 0 = not idle */
    bool idle_warned, reaped;
    char stop_outcome[32];      /* how the last rank stopped (checkpointed, terminated, ...) */
    double ended_at_s;          /* the latest end its agents reported (their clocks), 0 none */
    /* its image is being pulled (docs/images.md): the last report saying so,
     * its rank and its bytes; 0 = none pulling. Not stored: reports renew it */
    double pull_seen_s;
    int pull_rank;
    int64_t pull_done, pull_total;
    char pull_note[256];        /* why its last try failed (registry down...), "" none */
    struct ctld_steps *steps;   /* steps.c: its steps (a batch job's), NULL none */
    json_t *rank_end;           /* ntasks: each rank's end as reported (job_end.c), null
                                 * until it ended; while it runs on agents */
    bool timed_out;             /* its time limit stops it (job_end.c) */
    double *straggle_since;     /* ntasks, since when the rank straggles; 0 = it does not */
    bool straggler_flagged;     /* the straggler event was written for this run */
    bool restart_now;           /* stopping to restart elsewhere at once (no backoff) */
    bool cancel_stop;           /* stopping because it was cancelled: ends cancelled */
    int pinned;                 /* a change of it is being written with mu released */
    int64_t queued_bytes;       /* its spec's bytes in its tenant's queued count (0: none) */
    bool has_dep;               /* its spec names a dependency (set by job_build: the
                                 * passes over every job read it, not the spec) */
    bool dep_met;               /* its dependency held once (depend.c): it stays met */
    uint64_t dep_sig;           /* depend.c: the named jobs' states when it last waited */
    /* elastic jobs (elastic.c): the whole GPUs its tasks ask for now (0 =
     * its minimum), and the size the cycle resized it to, taken when its
     * run has stopped (0 = none) */
    int elastic_gpus, resize_to;
    int elastic_prev;           /* the size it had before its last resize, 0 = none */
    /* its step times by size, then the speedup curve fitted to them (each
     * elastic_step_max + 1 entries, one allocation; NULL until it ran) */
    double *elastic_step;
    int elastic_step_max;
    /* the reading noted last and its size: the agents report a rank's step
     * time at every sync and the cycle reads it at every pass, so a reading
     * is noted once, when it differs from the last one noted */
    float elastic_noted_s;
    int elastic_noted_g;
} cjob;

/* elastic.c, under c->mu: */
/* Task group g of j's spec at the size j asks for now (an elastic group's
 * count or GPUs grown by j->elastic_gpus over the minimum). */
ts_task_spec ctld_elastic_group(const cjob *j, int g);
/* Sets j->sj's elastic range from its spec; when j holds a placement that
 * is not its minimum (a grown job found running at a restart), takes the
 * size from it. Called by ctld_job_build before it expands the tasks. */
void ctld_elastic_build(cjob *j);
/* Plans the cycle's resize of running job j into t: a preemption with its
 * checkpoint signal and grace, requeued at once; j->resize_to noted.
 * TS_ECONFLICT as ctld_fsm_plan. */
struct ctld_txn;
int ctld_elastic_plan(ctld *c, struct ctld_txn *t, cjob *j, const ts_cycle_resize *rs,
                      double now, ts_err *err);
/* After a cycle, waiting job j lacked room for the reason given: a job
 * grown by a resize that does not fit at its new size asks for the size it
 * had, then for its minimum (true: its tasks changed, another cycle is due). */
bool ctld_elastic_fallback(ctld *c, cjob *j, int reason);
/* A resized job's run has stopped: its tasks are built again at
 * j->resize_to (what the scheduler tracks of it kept). */
int ctld_elastic_apply(ctld *c, cjob *j, ts_err *err);
/* Before a cycle, running elastic job j: the step time its ranks report
 * now (the slowest rank's) is noted for its size, and once two sizes are
 * measured j->sj.elastic_speedup is the curve fitted to them
 * (ts_elastic_fit; before that NULL: linear). */
void ctld_elastic_observe(ctld *c, cjob *j);


/* Under c->mu: */
cjob *ctld_job_find(ctld *c, int64_t id);
/* Turns a spec (already valid syntactically) into one job per array element,
 * checks it against the cluster and tenants (err names the field), writes
 * the jobs durably and adds them. ids_out gets their ids (array_size
 * entries) and rendered (if not NULL) the JSON of those that are jobs now
 * (a large array's first CTLD_ARRAY_WINDOW: array_lazy.c). Not under mu: takes it
 * itself. idem_key: the stored Idempotency-Key (ctld_idem_stored; "" none),
 * to which each element's row adds "#<i>" (ctld_idem_element). existed: an
 * idempotent retry, which takes no room under the tenant's queued cap;
 * TS_EEXIST with existed set: at that cap, idem_key is the owner's for
 * another body (nothing written). */
TS_MUST_CHECK
int ctld_submit(ctld *c, const ts_job_spec *spec, const char *spec_json, const char *owner,
                const char *run_user, int64_t run_uid, const char *idem_key, int64_t *ids_out,
                int *nids, bool *existed, json_t *rendered, ts_err *err);
/* Actions on an active job ("cancel", "hold", "release", "requeue") by the
 * token named by (its event says so; NULL: the controller's own); not under
 * mu. TS_ENOENT (not active: maybe finished), TS_ECONFLICT (state does not
 * allow it: 409), else the store's error (503: nothing changed). */
TS_MUST_CHECK int ctld_job_action(ctld *c, int64_t id, const char *action, const char *by,
                                  ts_err *err);
/* Under mu: builds j->tasks, j->node_mask and j->sj from j->spec and j->row
 * as a submission does (err names the field); the caller frees tasks and
 * node_mask of a probe it does not keep. */
TS_MUST_CHECK int ctld_job_build(ctld *c, cjob *j, ts_err *err);
/* A share's user key (ts_request.share_key) for j's request r while an MPS
 * node is registered (ctld.nshare_one_user; else 0): the user MPS sees,
 * ts_share_user_key. */
int64_t ctld_share_key(const ctld *c, const cjob *j, const ts_request *r);
/* A registration of node n with discovery d (NULL: none): whether its
 * shared GPUs keep one user's shares each (an MPS node). Under c->mu. */
struct ts_discovery;
void ctld_share_one_user(ctld *c, int n, const struct ts_discovery *d);
/* Drain/resume a node by name; not under mu. */
TS_MUST_CHECK int ctld_node_drain(ctld *c, const char *node, bool drain, ts_err *err);
/* The same for node index n, under mu, in the scheduling thread while its
 * cycle runs (the straggler policy): written with mu released
 * (committing), then applied (resuming clears drain_why); TS_ETIMEDOUT
 * while another drain is being written (try again later). */
TS_MUST_CHECK int ctld_node_drain_cycle(ctld *c, int n, bool drain, ts_err *err);
/* Replaces the tenants (YAML); not under mu. An invalid document is
 * TS_EINVAL with every error of it in bad (caller-owned) and the first in
 * err; nothing changes then. */
TS_MUST_CHECK int ctld_tenants_replace(ctld *c, const char *yaml, size_t len, ts_errs *bad,
                                       ts_err *err);
/* Under mu: the index in names[0..n) of the tenant or of its nearest
 * ancestor named there, else -1. */
int ctld_tenant_match(const ctld *c, const char *tenant, const char *const *names, int n);
/* Under mu, once a cycle (policies.c): the idle policy and stragglers. */
void ctld_idle_check(ctld *c, double now);
void ctld_straggler_check(ctld *c, double now);
/* Under c->mu: how many of the tenant's jobs are pending or held (kept
 * with every state change, not counted: the per-tenant cap reads it on
 * every submission). */
int ctld_tenant_queued(const ctld *c, const char *tenant);
/* Under c->mu: the bytes of the specs of the tenant's pending and held jobs,
 * a large array's elements not yet jobs each counted (its spec's bytes). */
int64_t ctld_tenant_queued_bytes(const ctld *c, const char *tenant);
/* Under c->mu: 0 when the tenant's queued specs (and those claimed by
 * submissions being written) take `more` bytes more within
 * limits.queued_spec_mib_per_tenant; else TS_ENOSPC, err naming the tenant,
 * what it holds, what (the words for `more`) and the budget. */
int ctld_queued_bytes_check(const ctld *c, const char *tenant, int64_t more, const char *what,
                            ts_err *err);
/* Under c->mu: j's state goes from `from` to `to` (-1: not an active job);
 * its spec's bytes, counted while it is queued, are read at `to` (a spec
 * changed by an update is noted after the change). */
void ctld_queued_note(ctld *c, cjob *j, int from, int to);
#ifdef TS_STORE_FAULTS_ENV
/* Test builds, after each cycle (loop.c): the jobs by tenant and state kept
 * as they change (ctld_queued_note) equal a count of every job; false with
 * why naming the first that differs. */
bool ctld_counts_check(const ctld *c, char *why, size_t n);
#endif
/* Under c->mu: removes and frees an active job. */
void ctld_job_remove(ctld *c, cjob *j);
/* Under c->mu: j got its allocations (j->allocs): the per-node index
 * learns it (job_fsm.c on a start; restore). TS_ENOMEM. */
int ctld_node_index_add(ctld *c, cjob *j);
/* Under c->mu: the time to hand the scheduler for a change at `now`: never
 * earlier than one it was already given. Its quota refuses time that runs
 * backwards, and with writes committed outside the lock a change planned
 * at t0 can be applied after a cycle ran at t1 > t0 (an agent's report
 * whose commit waited): its GPUs would never go back. */
double ctld_sched_clock(ctld *c, double now);
/* Under c->mu: releases a running job's resources at once (job_fsm.c
 * calls it once the change is written; nothing else should). */
void ctld_job_unbind(ctld *c, cjob *j, double now);
/* Under c->mu: whether node n may take new work (admin drain, agent,
 * health), applied to the scheduler. */
void ctld_node_refresh(ctld *c, int n);
/* Under c->mu: the nodes a job's ranks use get a new desired-state
 * generation, and waiting agents wake. */
void ctld_nodes_touch_job(ctld *c, const cjob *j);
/* Under c->mu, once a cycle: the idle and straggler policies, and agents
 * not heard from for node_lost_s are lost. What the store refuses is
 * logged and tried again at the next cycle. */
void ctld_agents_expire(ctld *c, double now);

/* The placement of a running job as stored (malloc'd); the same for n
 * allocations not yet bound to a job. */
char *ctld_placement_json(const ctld *c, const cjob *j);
char *ctld_placement_json_allocs(const ctld *c, const ts_alloc *allocs, int n);

/* net.c: tenant networks (docs/network.md); under c->mu */
/* The cluster's VNI base (c->net_vni_base) and InfiniBand partition key base
 * (c->net_pkey_base), each from the store, else network.vni_base /
 * network.ib_pkey_base or chosen at random, and written there; a configured
 * one that differs from the kept one is refused. At ctld_open, before the
 * jobs are read back. */
int ctld_net_open(ctld *c, ts_err *err);
int ctld_net_tenant(ctld *c, const char *tenant, int *ordinal, ts_err *err);
void ctld_net_bind(cjob *j);   /* j->net_host from its placement */
void ctld_net_unbind(cjob *j);
/* The underlay addresses of the nodes whose agents reported one, into out
 * (room for c->cluster->nnodes), borrowed from the agents' discovery (valid
 * under mu); how many. */
int ctld_net_peers(const ctld *c, const char **out);
/* Fills d's net_services (every tenant's) and net_tenant_services (those
 * only some tenants may reach), borrowed from the configuration; the lists
 * are freed with ts_desired_fini. Under mu. 0, -1 out of memory. */
int ctld_net_services(const ctld *c, ts_desired *d);
/* a task's "net" and its overlay master_addr, when the cluster isolates, and
 * its tenant's "ib_pkey" (host-network tasks too) with network.ib_partitions,
 * into the desired task dt (its strings in dt's arena) */
void ctld_net_task(const ctld *c, const cjob *j, int rank, ctld_dtask *dt);
void ctld_net_restore(ctld *c, cjob *j); /* a running job read back from the store */
/* The loop, after a cycle, without mu: rewrites network.ib_partitions_file
 * when the tenants' ports changed. */
void ctld_net_partitions_sync(ctld *c);
/* The loop, after a cycle, without mu: when the underlay addresses of the
 * registered nodes changed (an agent registered, left, was lost, or came
 * back at another address), every node's desired state moves, so each
 * agent gets the new list (its VXLANs' flood entries) at once: one wake
 * per change seen, however many agents registered meanwhile. */
void ctld_net_peers_sync(ctld *c);
/* The "run-ended" event's detail for a run that ends now without ending the
 * job (preempted and requeued, or requeued by a user): usage reads it. */
char *ctld_run_detail(const cjob *j, double now);
/* render.c: a pending job's place in the queue for the job JSON and explain:
 * queue_position {tenant, cluster} (1 = first), estimated_start ({time} or
 * {reason}), las {level, attained_gpu_hours}, and a one-line "standing". */
void ctld_render_queue(const ctld *c, const cjob *j, json_t *doc);
/* fit.c: under mu, for a job built by job_build: TS_EINVAL (err naming the
 * field and the most that could ever fit) when it could never run, on the
 * cluster as declared (every node, drained or not) or within its tenant's
 * guarantee (guaranteed work) or guarantee plus borrowing limit. */
TS_MUST_CHECK int ctld_fit_check(const ctld *c, const cjob *j, ts_err *err);
/* throttle.c: j's index in its array (0-based; its array's id, the first
 * element's, is j->row.id less it), or -1 when j is not an array element. */
long ctld_array_index(const cjob *j);
/* throttle.c: arrays' throttles. scan counts, under mu, the running elements
 * of throttled arrays and their pending ones (NULL: out of memory, nothing
 * throttled this cycle); waits says whether pending job j must stay out of
 * this cycle (its reason set): only the lowest pending indices that fit its
 * array's room are let in. */
typedef struct ctld_throttle ctld_throttle;
ctld_throttle *ctld_throttle_scan(ctld *c);
bool ctld_throttle_waits(ctld_throttle *t, cjob *j);
void ctld_throttle_free(ctld_throttle *t);
/* service.c: the GPU-seconds a job attained, for the las order. run_ended
 * adds the run that ends now (called as its GPUs go); restore rebuilds the
 * sum of a job that ran before from its run-ended events (after a restart). */
void ctld_service_run_ended(ctld *c, cjob *j, double now);
int ctld_service_restore(ctld *c, cjob *j, ts_err *err);
/* How long a job runs on virtual nodes. */
double ctld_job_run_s(const cjob *j);

#endif
