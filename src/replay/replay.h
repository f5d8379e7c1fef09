/*
 * replay.h - internal: the time-based replay engine behind `tessera-sim replay`.
 *
 * A replay runs one workload (a list of rigid jobs: submit time, GPU count,
 * work) on a cluster of identical nodes, in virtual time, under one policy.
 * The engine owns time, progress, restart costs, count-only placement and the
 * metrics; a policy (small ops table, replay_policies.c) only answers "which
 * of the submitted, unfinished jobs run now". With tenants a replay is
 * either siloed (one engine run per tenant on its own partition) or shared
 * (one run on the pooled cluster, the tenants and their guarantees in the
 * policy's view); the engine logs every hold, and one sweep over the log
 * (replay_timeline.c) measures fairness and draws the time series for both,
 * so they compare. Everything here is pure: no clock, no I/O, no globals,
 * so a replay is a function of its input. It is simulator code, its own
 * library (tessera_replay) beside libtessera so that the unit tests link it
 * directly; the shell (src/sim/replay_main.c) reads files and prints. Its
 * `tessera` policy is no policy of its own: it drives the core's
 * scheduling cycle (replay_core.c).
 *
 * Ownership: the caller owns every array passed in; ts_replay_trace from the
 * loaders is freed with ts_replay_trace_free, a ts_replay_log with
 * ts_replay_log_free, a ts_replay_series with ts_replay_series_free. Not
 * thread-safe per object; separate replays share nothing.
 */
#ifndef TS_REPLAY_REPLAY_H
#define TS_REPLAY_REPLAY_H

#include <stdbool.h>
#include <stddef.h>

#include "tessera/error.h"

/* The Pollux artifact's measured durations include one start-up of this
 * length (README "Experiment procedures" B); the loader subtracts it so a
 * job's work is pure progress and the engine charges every start itself. */
#define TS_REPLAY_POLLUX_STARTUP_S 30.0
#define TS_REPLAY_ROUND_DEFAULT_S 60.0
#define TS_REPLAY_RESTART_DEFAULT_S 30.0
/* Tiresias demotes a job from Q0 to Q1 at this attained service. */
#define TS_REPLAY_TIRESIAS_DEMOTE_GPU_S (16.0 * 3600.0)
#define TS_REPLAY_NAME_MAX 64
/* Helios SRTF checkpoint cost paid at a restart after a preemption (README A) */
#define TS_REPLAY_CKPT_1GPU_S 7.0
#define TS_REPLAY_CKPT_NODE_S 30.0  /* 2..8 GPUs */
#define TS_REPLAY_CKPT_MULTI_S 60.0 /* more than 8 GPUs */
/* Philly virtual clusters are partitions of 8-GPU nodes (README A) */
#define TS_REPLAY_PHILLY_GPUS_PER_NODE 8

typedef struct ts_replay_job {
    char name[TS_REPLAY_NAME_MAX];
    double submit_s;
    int gpus;
    double work_s;  /* progress needed, start-up excluded; >= 0 */
    int tenant;     /* index into the trace's tenants; 0 when it has none */
} ts_replay_job;

/* A tenant: a name and the GPUs it is guaranteed. In a siloed replay the
 * guarantee is a partition only its jobs use; in a shared one it is what the
 * tenant may always reclaim of the pooled cluster. */
typedef struct ts_replay_tenant {
    char name[TS_REPLAY_NAME_MAX];
    int gpus;
} ts_replay_tenant;

struct ts_sched_config;

typedef struct ts_replay_config {
    int nodes;
    int gpus_per_node;
    double round_s;        /* 0: decide on every event */
    double restart_cost_s; /* charged, without progress, at every start and restart */
    bool ckpt_cost_by_gpus; /* restarts also pay replay_ckpt_cost_s(gpus) */
    /* 0: a preempted job checkpoints as it stops and loses nothing; N > 0: it
     * checkpoints every N s of progress and a preemption loses the progress
     * made since the last one (work to do again, counted in lost_gpu_s). */
    double checkpoint_s;
    /* Tenants the policy sees (may be NULL / 0: one pool, no tenants); with
     * them, every jobs[].tenant must be in [0, ntenants) and the guarantees
     * must fit in the cluster. Borrowed, not owned. */
    const ts_replay_tenant *tenants;
    int ntenants;
    /* The tessera policy's scheduler configuration (borrowed; NULL:
     * tesserad's default, ts_sched_config_default). */
    const struct ts_sched_config *sched;
} ts_replay_config;

/* 7 s for 1 GPU, 30 s for 2..8, 60 s above (Helios SRTF, README A). */
double replay_ckpt_cost_s(int gpus);
/* q-th percentile of sorted[0..n-1], numpy's linear interpolation; 0 if n is 0. */
double replay_percentile(const double *sorted, int n, double q);

/* What a policy sees at a decision. Jobs are in arrival order (submit time,
 * then input order); pending[] lists the submitted, unfinished ones. */
typedef struct ts_replay_view {
    double now_s;
    double since_s;              /* time of the previous decision (0 at the first) */
    const ts_replay_job *jobs;
    int njobs;
    const int *pending;          /* indices into jobs, ascending */
    int npending;
    const bool *holding;         /* holding[j]: j has GPUs since the previous decision */
    const double *work_left_s;   /* oracle knowledge: srtf/sjf only */
    int total_gpus;
    /* Observed, not oracle: per job, the progress (s) a preemption now would
     * lose (made since its last checkpoint; 0 without checkpoint_s). May be
     * NULL in hand-made views. */
    const double *at_risk_s;
    /* The config's tenants (NULL / 0 when the replay has none). */
    const ts_replay_tenant *tenants;
    int ntenants;
    int gpus_per_node;           /* the replayed nodes' size */
    const struct ts_sched_config *sched; /* the config's (NULL: the default) */
    /* Optional (NULL: every job rigid), the Pollux job model's elastic runs:
     * per job the most GPUs it may hold (jobs[j].gpus is its minimum; equal
     * or 0: rigid), its speedup curve (elastic_speedup[j][g], g in
     * 0..elastic_max[j]: goodput at g GPUs over goodput at its minimum) and
     * its estimated time left. A policy with `size` resizes running jobs. */
    const int *elastic_max;
    const double *const *elastic_speedup;
    const double *elastic_left_s;
} ts_replay_view;

/* init gets the job count and the tenant count (0: none) of the replay, so
 * that a policy allocates everything up front and decide never fails.
 * A policy sets run[j] for every pending j (run[] is cleared by the engine).
 * The engine preempts holders not chosen and places the newly chosen; the
 * chosen must fit in total_gpus. next_event_s (may be NULL) says when, in
 * event-driven mode, the policy wants to decide again without an arrival or
 * completion (tiresias: a demotion); return a value <= now for "never". */
struct ts_replay_result; /* below */

typedef struct ts_replay_policy_ops {
    const char *name;
    bool preemptive;
    int (*init)(void **state, int njobs, int ntenants, ts_err *err);
    void (*decide)(void *state, const ts_replay_view *v, bool *run);
    double (*next_event_s)(void *state, const ts_replay_view *v);
    void (*free)(void *state);
    /* optional: fills res's est_* figures and its preemption kinds (moves,
     * time_shares) once the replay is over */
    void (*estimates)(void *state, struct ts_replay_result *res);
    /* optional: where the policy put running job j, GPUs per node into
     * per_node[0..nodes) (zeroed by the caller); returns the GPUs counted, 0
     * when it does not know. The Pollux job model's replay (pollux_run.c)
     * reads it: a spread placement steps slower there. */
    int (*placement)(void *state, int j, int *per_node, int nodes);
    /* optional: the GPUs running job j holds (an elastic job resized by the
     * policy: the view's elastic_*), 0 when it does not hold any */
    int (*size)(void *state, int j);
    /* optional: running job j was stopped in this decision and started
     * again (a move): the engine counts the preemption, its lost work and
     * its restart as for any other */
    bool (*restarted)(void *state, int j);
} ts_replay_policy_ops;

/* NULL-terminated list of the built-in policies; lookup by name or NULL. */
const ts_replay_policy_ops *const *ts_replay_policy_all(void);
const ts_replay_policy_ops *ts_replay_policy_find(const char *name);
/* replay_core.c: the production cycle with tesserad's default configuration,
 * under the name `tessera` (and `core`) */
extern const ts_replay_policy_ops ts_replay_tessera_ops;
/* replay_core.c: the production scheduling cycle (tessera/cycle.h) */
extern const ts_replay_policy_ops ts_replay_core_ops;
/* replay_core.c: the cycle with a pull-time image model, told where images
 * are (tessera-img) or not (tessera-img-blind) */
extern const ts_replay_policy_ops ts_replay_tessera_img_ops;
extern const ts_replay_policy_ops ts_replay_tessera_img_blind_ops;
/* Whether ops is one of these: the production cycle, which shares one
 * cluster between tenants */
bool ts_replay_runs_cycle(const ts_replay_policy_ops *ops);
/* Seconds job j, started by the last decide of policy ops (state: its
 * state), holds its GPUs without progress before it runs, on top of
 * restart_cost_s: the image pull of tessera-img and tessera-img-blind
 * (replay_images.c); 0 for every other policy. */
double replay_start_delay_s(const ts_replay_policy_ops *ops, void *state, int j);

/* Per job, what happened. */
typedef struct ts_replay_outcome {
    double finish_s;
    double jct_s;
    double queue_s;     /* time submitted and holding no GPUs */
    int starts;
    int preemptions;
    double lost_work_s; /* progress lost to preemptions (done again) */
} ts_replay_outcome;

/* One workload's (or, averaged, one set's) figures. */
typedef struct ts_replay_result {
    int jobs;
    double avg_jct_s, p50_jct_s, p99_jct_s;
    double avg_queue_s, max_wait_s;
    /* gang wait: mean queueing delay of the jobs larger than one node (all
     * or nothing across nodes); 0 with none */
    int gang_jobs;
    double avg_gang_wait_s;
    double utilization_pct; /* GPU-s held (incl. restarts) / (GPUs x makespan) */
    long preemptions;
    /* of them, from policies that tell (estimates): moves (a job stopped to
     * restart at once elsewhere) and time-sharing; the rest reclaim room */
    long moves, time_shares;
    double lost_gpu_s;      /* GPU-s of restart delay beyond each job's first start,
                               plus progress lost to preemptions */
    double makespan_s;      /* latest completion, from time 0 */
    /* Start estimates (policies that give them: the cycle's): of the jobs
     * that waited, how many had an estimate at the first decision after
     * their submission, and the median and p90 absolute error of that
     * estimate against their first start, in seconds (0 with none). */
    int est_waited, est_jobs;
    double est_median_err_s, est_p90_err_s;
} ts_replay_result;

/* Replays jobs[0..njobs-1] (sorted by submit_s, ties in input order) under
 * policy. out (may be NULL) gets one outcome per job. Returns 0, TS_EINVAL on
 * a bad config or a job that can never fit, TS_ENOMEM, or TS_ENOSPC if the
 * policy leaves an idle cluster idle while jobs wait (it would never end). */
int replay_run(const ts_replay_config *cfg, const ts_replay_policy_ops *policy,
                  const ts_replay_job *jobs, int njobs, ts_replay_outcome *out,
                  ts_replay_result *res, ts_err *err);

/* One stretch of time a job held its GPUs: [start_s, end_s]; done when it
 * ended because the job finished (else it was preempted). */
typedef struct ts_replay_hold {
    int job;
    double start_s, end_s;
    bool done;
} ts_replay_hold;

/* Every hold of a replay, in the order they ended. Owned by the caller:
 * zero-initialise, pass to the runs, then ts_replay_log_free. */
typedef struct ts_replay_log {
    ts_replay_hold *holds;
    int n, cap;
} ts_replay_log;

void ts_replay_log_free(ts_replay_log *log);

/* replay_run that also appends every hold to log (may be NULL). */
int ts_replay_run_logged(const ts_replay_config *cfg, const ts_replay_policy_ops *policy,
                         const ts_replay_job *jobs, int njobs, ts_replay_outcome *out,
                         ts_replay_result *res, ts_replay_log *log, ts_err *err);

/* The Pollux set's way of averaging: mean of the workloads' figures for the
 * averages, percentiles, utilisation and makespan; sums for preemptions and
 * lost GPU-s and jobs; max for max_wait_s. */
void ts_replay_result_mean(const ts_replay_result *per, int n, ts_replay_result *out);

/* A loaded trace: workloads, each a job list in arrival order. */
typedef struct ts_replay_workload {
    char name[TS_REPLAY_NAME_MAX];
    ts_replay_job *jobs;
    int njobs;
} ts_replay_workload;

typedef struct ts_replay_trace {
    char set[TS_REPLAY_NAME_MAX];
    ts_replay_workload *wl;
    int nwl;
    /* Philly only (else NULL / 0): the tenants jobs[].tenant points into, and
     * what the loader left out (README A, step 1 and the window). */
    ts_replay_tenant *tenants;
    int ntenants;
    long dropped_vc, dropped_no_gpu, dropped_window;
    double origin_epoch_s; /* submit_s 0 = this Unix time (the first kept job) */
} ts_replay_trace;

/* pollux_rigid_durations.csv (columns workload_set, workload, name, time,
 * application, num_gpus, batch_size, duration, gpu_time, in that order).
 * set: keep only rows of that workload_set; NULL means the file must hold a
 * single set. Errors name fname:line: field. On success *out is new. */
int ts_replay_load_pollux(const char *buf, size_t len, const char *fname, const char *set,
                          ts_replay_trace **out, ts_err *err);
void ts_replay_trace_free(ts_replay_trace *t);

/* True when buf's first line is the Philly job list's header
 * (timestamp,duration,num_gpus,gpu_time,cluster). */
bool ts_replay_is_philly(const char *buf, size_t len);

/* "YYYY-MM-DD" -> days since 1970-01-01 (proleptic Gregorian). 0 or TS_EINVAL. */
int ts_replay_parse_day(const char *s, long *day, ts_err *err);

/* philly_vc_nodes_helios.csv (header vc,node num): one tenant per VC,
 * guaranteed its node num x TS_REPLAY_PHILLY_GPUS_PER_NODE GPUs. *out is new
 * (free()). */
int ts_replay_load_vc_nodes(const char *buf, size_t len, const char *fname,
                            ts_replay_tenant **out, int *n, ts_err *err);

/* The Philly job list (README A): keeps rows whose cluster is one of
 * tenants[] and whose num_gpus > 0, submitted on a day in [from_day, to_day]
 * (inclusive whole days, UTC-naive as the file is); shifts time so the first
 * kept job is at 0; one workload "philly", jobs in arrival order (ties in file
 * order), work = duration as written. The trace gets a copy of tenants. A job
 * larger than its tenant's guarantee is an error: the procedure's simulator
 * could never start it in the tenant's partition. */
int ts_replay_load_philly(const char *buf, size_t len, const char *fname,
                          const ts_replay_tenant *tenants, int ntenants, long from_day,
                          long to_day, ts_replay_trace **out, ts_err *err);

/* True when buf's first line starts with Tessera's own job list header
 * (name,submit_s,gpus,duration_s, then optionally tenant). */
bool ts_replay_is_jobs_csv(const char *buf, size_t len);

/* Tessera's job list (docs/simulator.md): columns name,submit_s,gpus,
 * duration_s[,tenant]; work = duration_s; one workload named after the file's
 * set ("jobs"), in arrival order (ties in file order). With tenants (ntenants
 * > 0) every row must name one of them in its tenant column, which the file
 * must then have; without, the column is ignored and jobs[].tenant is 0. The
 * trace gets a copy of tenants. Errors name fname:line: field. */
int ts_replay_load_jobs_csv(const char *buf, size_t len, const char *fname,
                            const ts_replay_tenant *tenants, int ntenants, ts_replay_trace **out,
                            ts_err *err);

/* ---- tenants: fairness over time (replay_timeline.c) --------------------
 *
 * At every instant, per tenant k: demand_k = GPUs its submitted, unfinished
 * jobs ask for; held_k = GPUs its jobs hold (restart delays included);
 * entitled_k = min(guarantee_k, demand_k); fair_k = the weighted max-min
 * water-fill of the cluster's GPUs over the demands, guarantees as weights
 * (tenants guaranteed nothing share only what the others leave); deficit_k =
 * max(0, entitled_k - held_k) while the tenant's smallest waiting job fits in
 * its unused guarantee (guarantee_k - held_k), else 0. Each is integrated
 * over time between the first submit and the last completion. */
typedef struct ts_replay_tenant_result {
    int jobs;
    double avg_jct_s;
    double held_gpu_s, entitled_gpu_s, fair_gpu_s, deficit_gpu_s;
    double share_vs_guarantee; /* held / entitled (0 without demand); > 1: it borrowed */
    double fair_ratio;         /* held / fair (0 without demand) */
    /* The older measure: held / time with demand / guarantee. */
    double demand_s;
    double share_while_active;
} ts_replay_tenant_result;

typedef struct ts_replay_fairness {
    double jain;        /* Jain's index over fair_ratio of tenants with demand */
    double jain_active; /* Jain's index over share_while_active of tenants with jobs */
    double deficit_gpu_s; /* sum over tenants */
} ts_replay_fairness;

/* A one-workload loader's end, rc its result so far: *t (a new trace where
 * *t is NULL) gets its one workload, called name (the trace's set too), of
 * the n rows' jobs (njobs set; the loader copies them in), and a copy of the
 * ntenants tenants; the rows (each size bytes) are sorted into arrival order
 * by cmp. On failure (rc, or TS_ENOMEM naming fname) rows and *t are freed,
 * *t is NULL and that code is returned. */
int replay_trace_end(ts_replay_trace **t, int rc, const char *name, void *rows, int n,
                     size_t size, int (*cmp)(const void *, const void *),
                     const ts_replay_tenant *tenants, int ntenants, const char *fname,
                     ts_err *err);

/* The figures above from a finished replay: its jobs, their outcomes and
 * the log of their holds, on a cluster of total_gpus. tres gets ntenants
 * entries; fair may be NULL. TS_EINVAL (a job's tenant out of range), TS_ENOMEM. */
int replay_tenant_metrics(const ts_replay_job *jobs, int njobs, const ts_replay_outcome *out,
                             const ts_replay_log *log, const ts_replay_tenant *tenants,
                             int ntenants, long total_gpus, ts_replay_tenant_result *tres,
                             ts_replay_fairness *fair, ts_err *err);

/* A replay's state over time: point i holds over [t_s[i], t_s[i+1]) (the
 * last until the last completion, end_s). With at most max_points distinct
 * event times, one point per event time; else max_points equal buckets, each
 * the time-weighted mean over its bucket. */
typedef struct ts_replay_series {
    int npoints, ntenants;
    double end_s;
    long total_gpus;
    double *t_s;
    double *busy_gpus;  /* GPUs held */
    double *queue_jobs; /* submitted, unfinished jobs holding no GPUs */
    double *held;       /* npoints x ntenants, row-major: GPUs each tenant holds */
    void *block;        /* the four arrays above, one allocation */
} ts_replay_series;

/* ntenants may be 0 (no per-tenant columns). *out is new (ts_replay_series_free). */
int ts_replay_series_build(const ts_replay_job *jobs, int njobs, const ts_replay_outcome *out,
                           const ts_replay_log *log, int ntenants, long total_gpus,
                           int max_points, ts_replay_series **series, ts_err *err);
void ts_replay_series_free(ts_replay_series *s);

/* Jain's fairness index (sum x)^2 / (n sum x^2); 1 when n is 0 or all x are 0. */
double replay_jain(const double *x, int n);

/* Weighted max-min fair shares: fills share[0..n-1] with what each of n
 * tenants gets of capacity, given its demand and weight (>= 0): every
 * tenant gets min(demand, level x weight) for the one level that hands out
 * all of capacity (or everyone's demand); tenants of weight 0 then share
 * what is left equally (max-min). */
void replay_water_fill(double capacity, const double *demand, const double *weight, int n,
                          double *share);

/* ---- tenants: siloed and shared replays --------------------------------- */

/* How a replay with tenants places them. */
typedef enum ts_replay_tenancy {
    /* Each tenant alone on its own partition of tenants[k].gpus GPUs (as
     * nodes of base->gpus_per_node when it divides them, else one node): a
     * tenant never uses another's GPUs. res pools every job (averages
     * weighted by job count, as Helios' "all"); utilisation is over all
     * partitions' GPUs. */
    TS_REPLAY_SILOED,
    /* Every tenant on one pooled cluster (base's nodes) with the tenants and
     * their guarantees in the policy's view (the sum of guarantees must fit
     * in the cluster). */
    TS_REPLAY_SHARED,
} ts_replay_tenancy;

/* Replays jobs with tenants placed as tenancy says. jobs are in arrival
 * order with .tenant in [0, ntenants). base->nodes x gpus_per_node (or a
 * siloed replay's partitions, if they are more) is the cluster the fairness
 * figures are measured against. tres gets ntenants entries. out, fair and
 * log (holds of every run, job indices into jobs) may be NULL. */
int ts_replay_run_tenants(const ts_replay_config *base, const ts_replay_policy_ops *policy,
                          ts_replay_tenancy tenancy, const ts_replay_job *jobs, int njobs,
                          const ts_replay_tenant *tenants, int ntenants, ts_replay_outcome *out,
                          ts_replay_result *res, ts_replay_tenant_result *tres,
                          ts_replay_fairness *fair, ts_replay_log *log, ts_err *err);

#endif
