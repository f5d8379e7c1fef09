/*
 * cycle.h - the scheduling cycle: given the jobs that wait and the jobs that
 * run, decide which start now and where, which waiting job holds the
 * reservation, which running jobs are preempted for whom, and why every other
 * job waits.
 *
 * One cycle: order the waiting jobs (held and backed-off jobs aside; jobs
 * past the starvation bound first, oldest first; then tenants interleaved by
 * weighted dominant share with decayed usage, each tenant's jobs by priority
 * class, tier, submit time); for each, check quota, then place the whole
 * gang or nothing. The first job that cannot start for lack of room gets a
 * reservation at the earliest time the running jobs' time limits free enough
 * room in a subtree of its level (EASY backfill: a later job starts now only
 * if it ends before that time or stays off the reserved GPUs). Guaranteed
 * work that cannot fit takes room back from opportunistic work: whole gangs
 * only, most over-share tenant first, the least work lost since checkpoints,
 * never before a victim's minimum runtime nor beyond its preemptions per
 * hour; the preemptor keeps those GPUs reserved while the victims use their
 * grace. Costs, the starvation bound and what is approximated: cycle.c.
 *
 * The core decides on its own copy: ts_sched_sync brings the scheduler's
 * copy of the cluster and quota to the live ones (only what changed);
 * ts_sched_plan plans there (each start bound on the copy, so the next job
 * sees it) and returns the decisions, never touching the live cluster and
 * quota. ts_sched_apply then binds the starts on the live cluster and
 * charges the live quota, in the decisions' order: the shell's short step
 * once it has recorded them (a shell that does not record them applies
 * nothing and undoes nothing). ts_sched_cycle is the three at once.
 * Preemptions are not applied: victims keep their GPUs until the shell
 * reports them stopped with ts_sched_stop.
 *
 * Ownership: a ts_sched borrows the cluster and the quota (they must outlive
 * it; nothing else may change them while it lives except through
 * ts_sched_start/ts_sched_stop/ts_sched_apply) and owns its copies of them,
 * their index and scratch space. Jobs passed to a cycle are the caller's
 * and are only read. Not thread-safe, with one exception for a shell that
 * plans with its lock released: while ts_sched_plan runs, the live cluster
 * and quota may change through ts_sched_start, ts_sched_stop,
 * ts_sched_node_set_schedulable, ts_sched_node_set_share_one_user and
 * ts_sched_gpu_share_key_note, and
 * ts_sched_check_job, ts_sched_job_rate,
 * ts_sched_node_schedulable and ts_sched_gang_index may be called (all of
 * them touch only the live state); nothing else.
 */
#ifndef TESSERA_CYCLE_H
#define TESSERA_CYCLE_H

#include <stdbool.h>
#include <stdint.h>

#include "tessera/error.h"
#include "tessera/gang.h"
#include "tessera/model.h"
#include "tessera/tenant.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Why a job waits; "held", "quota", ... as written by ts_pending_name. */
enum ts_pending_reason {
    TS_PEND_NONE = 0,         /* started (or not looked at) */
    TS_PEND_HELD = 1,         /* held by a user, or backing off after a preemption */
    TS_PEND_QUOTA = 2,        /* its tenant's quota or borrowing limits */
    TS_PEND_CAPACITY = 3,     /* not enough free resources in the cluster */
    TS_PEND_TOPOLOGY = 4,     /* enough in total, not inside one subtree of its level */
    TS_PEND_FRAGMENTATION = 5,/* a subtree has the GPUs, not in a shape it can use */
    TS_PEND_GANG = 6,         /* some of its tasks would fit, not all: all or nothing */
    TS_PEND_RESERVATION = 7,  /* it would fit, but would delay the reserved job */
    TS_PEND_PREEMPTING = 8,   /* victims are checkpointing to make room for it */
    TS_PEND_INVALID = 9,      /* the spec can never run here (why says which field) */
    TS_PEND_DEPENDENCY = 10,  /* its dependency does not hold yet (tesserad, not the cycle) */
    TS_PEND_CONSTRAINT = 11,  /* the nodes its constraint/nodelist/exclude allow have no room */
};
#define TS_PEND_LAST TS_PEND_CONSTRAINT
const char *ts_pending_name(int reason);

#define TS_CYCLE_WHY_MAX 192
#define TS_PRIORITY_MIN (-1000000)
#define TS_PRIORITY_MAX 1000000
#define TS_SIGNAL_DEFAULT 10 /* SIGUSR1 on Linux */

/* A published host port as the cycle compares them: the number and its
 * protocol (udp or tcp) in one key. */
#define TS_HOST_PORT(port, udp) ((uint32_t)(port) | ((udp) ? UINT32_C(1) << 16 : 0))
#define TS_HOST_PORT_NUMBER(key) ((unsigned)((key) & 0xffffu))
#define TS_HOST_PORT_UDP(key) (((key) >> 16 & 1u) != 0)
#define TS_HOST_PORTS_MAX 16

/* A job, waiting or running. Waiting jobs ignore the running-only fields. */
typedef struct ts_job {
    int64_t id;                /* the caller's; unique among one cycle's jobs */
    int tenant;                /* index into the quota's tenants */
    int tier;                  /* enum ts_tier */
    int priority;              /* class within the tenant, higher first */
    double submit_s;
    double time_limit_s;       /* > 0; 0 means the scheduler's default */
    bool held;
    double eligible_s;         /* a requeued job backs off until then */
    /* Attained service, for the las order (docs/scheduler.md): GPU-seconds
     * held in earlier runs (a running job's current run is added by the
     * cycle), and when the job last began to wait (its submission, or its
     * requeue; 0 = submit_s). Whole GPUs count 1 per second, a share its
     * fraction, a MIG instance its slices over the GPU's. */
    double attained_gpu_s;
    double queued_s;
    const ts_request *tasks;   /* ntasks, rank order; borrowed */
    int ntasks;
    int required_level;        /* TS_GANG_LEVEL_* or a topology depth */
    int preferred_level;
    bool rail_aligned;
    /* the nodes it may use (node_select.h: bit i = node i), NULL = any;
     * borrowed, ts_node_mask_words(nnodes) words */
    const uint64_t *node_mask;
    int64_t reservation;       /* 0, or the id of the reservation it runs in */
    /* host ports each of its tasks publishes (TS_HOST_PORT keys; borrowed,
     * nhost_ports of them): a per-node resource, so no two tasks holding one
     * port share a node, its own tasks included (docs/network.md) */
    const uint32_t *host_ports;
    int nhost_ports;
    int ckpt_signal;           /* 0 = TS_SIGNAL_DEFAULT */
    int image;                 /* 1 + index into the image table (image_place.h), 0 = none */
    double ckpt_grace_s;       /* < 0 = the scheduler's default */
    /* running jobs only */
    const ts_alloc *allocs;    /* ntasks, as bound */
    double start_s;
    double last_ckpt_s;        /* the start if it never checkpointed */
    int preemptions_hour;      /* times preempted in the last hour */
    bool stopping;             /* already signalled; releases by stop_by_s */
    double stop_by_s;
    /* Elastic jobs (docs/scheduler.md, "Elastic jobs"); elastic_max_gpus 0 =
     * rigid. A waiting job's tasks are the size it asks for (its minimum, or
     * the size a resize gave it), placed all or nothing as any job's; a
     * running job's tasks and allocs are the size it runs at. It may run
     * with elastic_min_gpus..elastic_max_gpus whole GPUs, in steps of
     * elastic_step_gpus (a gang grows by whole tasks; 0 = 1).
     * elastic_speedup[g] for g in [0, elastic_max_gpus]: its goodput at g
     * GPUs over its goodput at its minimum (borrowed; NULL = linear).
     * elastic_left_s: its estimated time left at its current size (0 =
     * unknown: its time limit's rest). */
    int elastic_min_gpus, elastic_max_gpus, elastic_step_gpus;
    const double *elastic_speedup;
    double elastic_left_s;
} ts_job;

/* Expands a Slurm-style array: n copies of tmpl with ids first_id + i. */
int ts_job_array_expand(const ts_job *tmpl, int n, int64_t first_id, ts_job *out, ts_err *err);

/* How a tenant's own jobs are ordered (after priority class and tier). */
enum ts_order {
    TS_ORDER_DEFAULT = 0, /* a tenant's: its parent's; the config's: las */
    TS_ORDER_LAS = 1,     /* least attained service in levels, duration-blind */
    TS_ORDER_FIFO = 2,    /* submission time */
};
const char *ts_order_name(int order);
/* TS_ORDER_LAS or TS_ORDER_FIFO by name ("las", "fifo"); -1 otherwise. */
int ts_order_parse(const char *name);

#define TS_LAS_LEVELS_MAX 8

struct ts_scorer_ops;

typedef struct ts_sched_config {
    int order;                     /* enum ts_order, for tenants that set none */
    /* las: a job is at level k once it attained las_level_gpu_s * 2^(k-1)
     * GPU-seconds (level 0 below las_level_gpu_s), at most las_levels - 1;
     * a waiting job that has waited las_promote_factor times the time it
     * has run is back at level 0 (0 = never promoted). */
    double las_level_gpu_s;
    int las_levels;
    double las_promote_factor;
    /* las: jobs of one level in submission order (true, the default: the
     * first come first served of Tiresias' discretised LAS; the levels alone
     * let short jobs ahead) or by GPU-seconds attained (false: inside the
     * last level that puts the jobs furthest along behind every other) */
    bool las_fifo_within_level;
    /* las: a tenant with a guarantee whose first level overflows splits
     * it: its jobs below las_split_gpu_s of service go before, and may
     * time-share, its jobs between that and las_level_gpu_s (0: never
     * split). It overflows while the level-0 work its waiting jobs have
     * left (each job's las_level_gpu_s less its service) exceeds
     * las_split_backlog times las_level_gpu_s per GPU it holds (at least
     * its guarantee; at 1, its first level would take longer to drain than
     * one GPU takes through the level; the default is 0.5, tesserad's
     * scheduler.las.split_backlog). Other tenants' jobs see the level as
     * one, and tenants with no guarantee never split. */
    double las_split_gpu_s;
    double las_split_backlog;
    /* With las_split_horizon_s > 0 (0, the default: the step is fixed) a
     * split tenant's step follows its backlog: the largest, up to
     * las_split_gpu_s and at least las_split_min_gpu_s, at which each of its
     * waiting first-level jobs could take it within the horizon on the
     * GPUs it holds (at least its guarantee). */
    double las_split_horizon_s;
    double las_split_min_gpu_s;
    /* A second step inside a split first level (0, the default: none):
     * a split tenant's jobs past las_split_mid_gpu_s (when it is above the
     * step) go after its jobs past the step, which may time-share them, and
     * so do its jobs promoted by their wait. */
    double las_split_mid_gpu_s;
    /* Inside a split tenant its own jobs take each other's room (reclaim by
     * class, time-sharing) after las_split_min_runtime_s of run and up to
     * las_split_max_preemptions_hour times an hour (< 0, the default:
     * min_runtime_s and max_preemptions_hour), which keep protecting its
     * work from other tenants' jobs either way; with las_split_cross_tier
     * (off by default) an opportunistic job of it may time-share its
     * guaranteed work: there the levels decide, not the tiers (a tenant at
     * its guarantee that queues its overflow as opportunistic, its running
     * work guaranteed, could otherwise never time-share it). */
    double las_split_min_runtime_s;
    int las_split_max_preemptions_hour;
    bool las_split_cross_tier;
    double default_time_limit_s;   /* for jobs that give none */
    double starve_after_s;         /* a job waiting longer goes to the head */
    double min_runtime_s;          /* a job is not preempted before this */
    int max_preemptions_hour;      /* a job preempted this often is left alone */
    double default_grace_s;        /* checkpoint grace when the job gives none */
    double backoff_base_s;         /* requeue backoff: base * 2^(preemptions_hour-1) */
    int max_preemptors_cycle;      /* preemption searches per cycle (as many
                                    * again for jobs within their guarantee) */
    /* Taking other tenants' loans back (docs/scheduler.md, "Reclaim"); all
     * on by default (ts_sched_config_default), each can be turned off to
     * measure what it does:
     * reclaim_min_runtime_s: the minimum runtime of a loan (an
     * opportunistic job of a tenant that holds more than its guarantee)
     * taken back by a job within its tenant's guarantee (60 s by default,
     * so work just started is not stopped again at once; 0: at once,
     * always with its checkpoint grace; < 0: min_runtime_s).
     * Time-sharing and a tenant's own jobs keep min_runtime_s;
     * reclaim_any_tier: a job of either tier whose tenant, all tiers held
     * and the job included, stays within its guarantee passes the quota as
     * guaranteed work and takes other tenants' loans back (Kueue's rule for
     * a queue under its nominal quota); it never takes guaranteed work;
     * reclaim_ignores_hour_limit: max_preemptions_hour does not protect a
     * loan from guaranteed-tier work within its guarantee;
     * guarantee_over_reservation: such a job (tier or quota guaranteed) may
     * start on GPUs held for another tenant's reserved job (a guarantee is
     * not another tenant's to hold back);
     * preemptor_searches_again: a preemptor whose victims have all stopped
     * and which still does not fit (another job took the room) searches for
     * victims again instead of waiting out its preemptor-table entry. */
    double reclaim_min_runtime_s;
    bool reclaim_any_tier;
    bool reclaim_ignores_hour_limit;
    bool guarantee_over_reservation;
    bool preemptor_searches_again;
    /* guarantee_moves: a job within its tenant's guarantee that needs whole
     * nodes' room (one task, or a gang of tasks of a node at most), which no
     * set of loans past their minimum runtime gives, may also stop smaller
     * one-node jobs of any tenant on the nodes it is given, loans or not,
     * when each restarts at once on room left elsewhere
     * (its tenant keeps what it holds; the decision marks them `move`):
     * other tenants' small guaranteed jobs spread over every node otherwise
     * keep a node-sized guarantee out indefinitely (docs/scheduler.md, "The
     * guarantee"). A moved job was running reclaim_min_runtime_s at least,
     * within its max_preemptions_hour, and holds fewer GPUs than the job it
     * moves for, so chains of moves end. */
    bool guarantee_moves;
    /* fair_reclaim: a job whose tenant would borrow (it is past its
     * guarantee) and that passes the quota but lacks room may take back
     * another tenant's loan when its tenant, the job started, still holds
     * fewer GPUs per unit of fair-share weight than the loan's tenant holds
     * once the loan is gone, by one more such job at least (the loan's job
     * cannot take it back in turn, nor one job ending elsewhere turn the
     * comparison round), the loan's tenant keeping its guarantee. The victim
     * has run an hour and keeps max_preemptions_hour. What
     * is lent then goes by weight, not by who borrowed first
     * (docs/scheduler.md, step 6, "Fair reclaim"). */
    bool fair_reclaim;
    /* fair_moves (with fair_reclaim; off by default): a job of a tenant past
     * its guarantee that needs whole nodes' room, for which fair reclaim
     * finds no set, may move smaller one-node jobs as guarantee_moves does,
     * on free room alone (no loan is taken for it), when its tenant, the
     * job started, would still hold fewer GPUs per unit of weight than some
     * borrower holds: GPUs free in ones and twos over many nodes otherwise
     * stay idle while gangs of the tenants behind their share wait. */
    bool fair_moves;
    /* starving_borrowers_by_share: a job past starve_after_s that would
     * borrow (it does not count as guaranteed work against other tenants'
     * loans) waits for its tenant's turn in the share order, first of its
     * tenant's jobs of its tier, instead of going before every tenant by
     * age: first, it took the GPUs freed in a cycle as young loans ahead of
     * the guaranteed work of the tenants it borrowed from, and loans went to
     * the tenants that borrowed most (docs/scheduler.md, step 2). */
    bool starving_borrowers_by_share;
    /* Victims of equal work at risk: the fewest GPUs first (true, the
     * default: a preemption stops no more than it must, and a big job is the
     * hardest to place again) before the most service attained; false:
     * most service first, so a 1-GPU preemptor may stop an 8-GPU job when
     * no work is at risk (every candidate just checkpointed). */
    bool victims_fewest_gpus;
    /* resource proportionality per GPU model (index = model id): CPU and
     * memory kept on a node per idle GPU for GPU work, and the most a GPU
     * task may ask per GPU (0 = no cap) */
    int64_t reserve_cpu_milli_per_gpu[TS_MAX_GPU_MODELS];
    int64_t reserve_mem_mib_per_gpu[TS_MAX_GPU_MODELS];
    int64_t cap_cpu_milli_per_gpu[TS_MAX_GPU_MODELS];
    int64_t cap_mem_mib_per_gpu[TS_MAX_GPU_MODELS];
    /* Elastic jobs: what a change of size costs a job (its checkpoint,
     * stop and restart), seconds; a resize must gain TS_ELASTIC_GAIN_OVER_COST
     * times that (src/sched/elastic.h). < 0: elastic jobs never grow above
     * what they ask. */
    double elastic_resize_cost_s;
    /* placement policy for non-gang tasks (sched.h's scorers, by name with
     * ts_scorer_find); NULL = TS_PLACEMENT_DEFAULT */
    const struct ts_scorer_ops *placement;
} ts_sched_config;

/* Defaults: las order (levels at 8 and 16 GPU-hours, 3 levels, promotion
 * after waiting as long as it ran, a level in submission order), 24 h
 * limit, 24 h starvation bound, 10 min minimum runtime (1 min for a loan
 * taken back), 3 preemptions per hour, 60 s grace, 60 s backoff base, 8
 * preemptors a cycle, every reclaim rule on, guarantee moves on, victims of equal work at
 * risk by fewest GPUs, no reservations or caps, 60 s per elastic resize. */
void ts_sched_config_default(ts_sched_config *cfg);

typedef struct ts_sched ts_sched;

int ts_sched_new(ts_cluster *c, ts_quota *q, const ts_sched_config *cfg, ts_sched **out,
                 ts_err *err);
void ts_sched_free(ts_sched *s);

/* Is job valid for this cluster and tenancy (tenant, tier, tasks, levels,
 * caps)? TS_EINVAL naming the field: "tasks[2].cpu_milli: 64000 per GPU is
 * above the cap of 16000 for H100-80GB". */
int ts_sched_check_job(const ts_sched *s, const ts_job *job, ts_err *err);

/* How long a job preempted for the n-th time within the hour (n >= 1) backs
 * off before it may start again (the shell sets its eligible_s to now plus
 * this): backoff_base_s * 2^(n-1), at most an hour. */
double ts_sched_backoff_s(const ts_sched *s, int preemptions_hour);

/* GPUs a job holds, in whole-GPU equivalents (a share its fraction, a MIG
 * instance its compute slices over 7; job->allocs, when set, tells the MIG
 * GPU's geometry): what one second of its run adds to attained_gpu_s. */
double ts_sched_job_rate(const ts_sched *s, const ts_job *job);
/* The las level of a job that attained this much service. */
int ts_sched_las_level(const ts_sched *s, double attained_gpu_s);

/* An elastic job's speedup curve (ts_job.elastic_speedup) from the step
 * times it reported: step_s[g] for g in [0, max_gpus] its seconds per step
 * at g GPUs (0 = not measured; a step the same work at every size). Fits
 * step(g) = a + b / g (a part that does not shrink with more GPUs, one that
 * does; a, b >= 0) to the sizes measured in [min_gpus, max_gpus] and fills
 * speedup[0..max_gpus] with step(min_gpus) / step(g) (0 below min_gpus).
 * Returns the sizes measured; below 2 it leaves speedup as it was (one size
 * says nothing of another: the caller keeps the linear default). Pure. */
int ts_elastic_fit(const double *step_s, int min_gpus, int max_gpus, double *speedup);

/* Record work the cycle did not start (state restored after a restart) and
 * work that stopped. start binds job->allocs and charges the quota; stop
 * releases and credits. */
int ts_sched_start(ts_sched *s, const ts_job *job, double now, ts_err *err);
int ts_sched_stop(ts_sched *s, const ts_job *job, double now, ts_err *err);

typedef struct ts_cycle_start {
    int job;            /* index into the cycle's waiting jobs */
    ts_alloc *allocs;   /* its ntasks allocations (owned by the decision) */
    bool backfilled;    /* started ahead of the reserved job */
} ts_cycle_start;

typedef struct ts_cycle_preempt {
    int victim;         /* index into the cycle's running jobs */
    int preemptor;      /* index into the waiting jobs */
    int signal;
    double grace_s;
    double lost_gpu_s;  /* GPU-seconds since the victim's last checkpoint */
    /* false: guaranteed work reclaims room; true: time-sharing, a job of a
     * lower las level takes the room of one that attained more */
    bool time_sharing;
    /* true: a move (cfg.guarantee_moves): the victim is planned to restart at
     * once elsewhere, so the shell requeues it without a backoff */
    bool move;
    int victim_level, preemptor_level;
} ts_cycle_preempt;

/* A running elastic job's new size (docs/scheduler.md, "Elastic jobs"):
 * the shell stops it with its checkpoint signal and grace and requeues it,
 * without a backoff, asking for gpus whole GPUs (its tasks scaled); the
 * cycle does not unbind it (ts_sched_stop when it stopped). */
typedef struct ts_cycle_resize {
    int job;            /* index into the cycle's running jobs */
    int gpus;           /* its new size, in [elastic_min_gpus, elastic_max_gpus] */
    int from_gpus;      /* its size now */
    /* true: GPUs above its minimum taken back for waiting work (no gain
     * test, no minimum runtime); false: a grant where goodput gains */
    bool reclaim;
} ts_cycle_resize;

typedef struct ts_cycle_pending {
    int reason;                 /* enum ts_pending_reason */
    double reserved_at_s;       /* the reserved job: when it should start; else -1 */
    /* When it could start as the running jobs end (their time limits or
     * grace), for the reserved job and the one job a cycle plans without
     * holding; -1 for the others (not planned this cycle). */
    double estimated_s;
    /* Where it stood in this cycle's order (-1 for jobs decided before the
     * order: held, backing off, invalid): how many of its tenant's jobs and
     * how many jobs in all were looked at before it, and its las level (-1
     * under fifo; promoted jobs are at 0). */
    int tenant_position;
    int cluster_position;
    int level;
    /* one line with the numbers behind the reason, at most TS_CYCLE_WHY_MAX
     * bytes; owned by the decision, valid until its next cycle or fini.
     * Identical jobs that failed alike share one line. */
    const char *why;
} ts_cycle_pending;

typedef struct ts_cycle_stats {
    int considered;      /* waiting jobs looked at */
    int placements;      /* placement attempts made */
    int memo_hits;       /* answered from an identical job's failure */
    int started, backfilled, preempted;
    int grown, shrunk;   /* elastic resizes decided */
} ts_cycle_stats;

#define TS_CYCLE_RESERVED_NODES_MAX 64
/* Jobs whose images are fetched ahead: one, as tesserad's desired state
 * names (bench/image-place with two: 91.2 % of planned starts ready and
 * more of them, for twice the bytes fetched ahead) */
#define TS_CYCLE_PREFETCH_JOBS 1
/* Their nodes: at most this many times the planned ones (bench/image-place,
 * planned starts whose image was ready: 66.0 % on the planned nodes alone,
 * 87.6 % at 4 times, 89.6 % at 8, 91.0 % at 16) */
#define TS_CYCLE_PREFETCH_FACTOR 16

/* A waiting job's image fetched ahead on nodes (ts_decision.prefetch). */
typedef struct ts_cycle_prefetch {
    int job;                                /* index into the waiting jobs */
    int nodes[TS_CYCLE_RESERVED_NODES_MAX]; /* distinct */
    int nnodes;
} ts_cycle_prefetch;

typedef struct ts_decision {
    ts_cycle_start *starts;
    int nstarts;
    ts_cycle_preempt *preempts;
    int npreempts;
    ts_cycle_resize *resizes;   /* elastic jobs' new sizes, at most one per job */
    int nresizes;
    ts_cycle_pending *pending;  /* one per waiting job, parallel to the input */
    int reserved;               /* waiting job holding the reservation, or -1 */
    double reserved_at_s;
    /* The waiting job whose start this cycle planned on named nodes (the
     * reserved job, else the one job planned without holding), or -1, and
     * those nodes (the first TS_CYCLE_RESERVED_NODES_MAX distinct ones), so
     * that the shell can ready them before it starts (its image fetched
     * ahead). */
    int planned;
    int planned_nodes[TS_CYCLE_RESERVED_NODES_MAX];
    int nplanned_nodes;
    /* Where images are fetched ahead: the first TS_CYCLE_PREFETCH_JOBS
     * waiting jobs this cycle planned (the reserved job and the estimates,
     * in the cycle's order), each with its planned nodes, then, up to
     * TS_CYCLE_PREFETCH_FACTOR times those, the nodes with a free GPU and,
     * for a start as running jobs end, the nodes of those jobs in the order
     * the plan expects them to end: the plan follows time limits, jobs end
     * before them, and a job starts where room opens first. */
    ts_cycle_prefetch prefetch[TS_CYCLE_PREFETCH_JOBS];
    int nprefetch;
    ts_cycle_stats stats;
    /* storage, reused from cycle to cycle */
    ts_alloc *alloc_pool;
    int alloc_cap, starts_cap, preempts_cap, pending_cap, resizes_cap;
    char *why_buf;
    size_t why_len, why_cap;
} ts_decision;

void ts_decision_init(ts_decision *d);
void ts_decision_fini(ts_decision *d);

/* One cycle at time now. waiting[0..nwaiting-1] and running[0..nrunning-1]
 * must be exactly the jobs the shell knows (running ones bound with
 * ts_sched_start or started by an earlier cycle). Fills d. Returns 0,
 * TS_ENOMEM, or TS_EINVAL (err names the job and field) for input that
 * breaks the contract; after an error nothing the cycle bound stays bound
 * and d holds no decision. A job that is invalid for the cluster is not an
 * error: it waits with TS_PEND_INVALID. */
int ts_sched_cycle(ts_sched *s, double now, const ts_job *waiting, int nwaiting,
                   const ts_job *running, int nrunning, ts_decision *d, ts_err *err);

/* Brings the scheduler's copy to the live cluster and quota (drained nodes
 * included): O(nodes) plus the nodes that changed since the last sync (on
 * either side) and the quota's arrays. TS_ENOMEM. */
int ts_sched_sync(ts_sched *s, ts_err *err);
/* The decisions, planned on the scheduler's copy as of the last
 * ts_sched_sync; the live cluster and quota untouched. ts_sched_cycle's
 * contract and errors. */
int ts_sched_plan(ts_sched *s, double now, const ts_job *waiting, int nwaiting,
                  const ts_job *running, int nrunning, ts_decision *d, ts_err *err);
/* Its second half: binds d's starts (those with keep[k], keep NULL = all)
 * on the live cluster and charges the live quota at now, the jobs as given
 * to ts_sched_plan (waiting). Changes made to the live state since the plan
 * may leave a start no room: TS_EINVAL naming the first such job, every
 * other start applied. */
int ts_sched_apply(ts_sched *s, const ts_decision *d, const ts_job *waiting, const bool *keep,
                   double now, ts_err *err);

/* A window in which some nodes are kept for some jobs (docs/scheduler.md,
 * "Reservations"): from start_s to end_s only the jobs that name it
 * (ts_job.reservation == id) start on its nodes, and no other job whose time
 * limit would run into the window starts on them before it either. A job
 * that names it starts only inside the window and only on its nodes. A
 * maintenance window is a reservation no job names: its nodes drain ahead of
 * time, each job's own time limit ahead. Which jobs may name a reservation
 * (tenant, users) is the shell's to check. */
typedef struct ts_reservation {
    int64_t id;             /* > 0, unique */
    const uint64_t *nodes;  /* node mask (node_select.h), copied */
    double start_s, end_s;  /* start_s < end_s */
} ts_reservation;

/* Replaces the scheduler's reservations with r[0..n-1] (copied); n = 0
 * clears them. TS_EINVAL naming the entry (a bad window, id, or no node). */
int ts_sched_set_reservations(ts_sched *s, const ts_reservation *r, int n, ts_err *err);

/* Drains a node (on = false: no new work lands on it; what runs stays) or
 * puts it back. TS_EINVAL for a bad index. */
int ts_sched_node_set_schedulable(ts_sched *s, int node, bool on, ts_err *err);
bool ts_sched_node_schedulable(const ts_sched *s, int node);
/* Whether the node's shared GPUs take one user's shares at a time
 * (ts_node.share_one_user: an MPS node), from the next plan on; shares
 * already there stay. TS_EINVAL for a bad index. */
int ts_sched_node_set_share_one_user(ts_sched *s, int node, bool on, ts_err *err);
bool ts_sched_node_share_one_user(const ts_sched *s, int node);
/* The user key of the shares already on a GPU of such a node (placed before
 * it said so, or restored at a restart), where the GPU holds shares and no
 * key yet; else nothing. */
void ts_sched_gpu_share_key_note(ts_sched *s, int node, int gpu, int64_t key);

/* Recomputes what s holds from jobs[0..njobs-1], every job that holds
 * allocations (running and stopping), and compares: each node's CPU, memory
 * and tasks and each GPU's milli, GPU memory and tasks against the sums of
 * the allocations on it; each tenant's usage per tier against its jobs'
 * demand (and its sub-tenants'); the gang index's free GPUs per node
 * against the node. 0, or TS_EINVAL naming the first difference (TS_ENOMEM).
 * For test builds and tests, after every change; it costs a pass over
 * every node, task and tenant. */
int ts_sched_check(const ts_sched *s, const ts_job *jobs, int njobs, ts_err *err);

/* The index the cycle keeps (for tests and for explain). */
const ts_gang_index *ts_sched_gang_index(const ts_sched *s);

#ifdef __cplusplus
}
#endif
#endif
