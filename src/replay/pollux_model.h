/*
 * pollux_model.h - internal: the job model of the Pollux simulator (Qiao et
 * al., OSDI '21; artifact petuum/adaptdl, branch osdi21-artifact, folder
 * simulator), written here in C from the description in
 * ../shared/traces/philly/README.md section B and a reading of the artifact.
 *
 * A job of an application trains for a fixed number of epochs. How fast it
 * goes comes from the application's measured profiles:
 *  - placements.csv: step time and gradient-sync time per placement (GPUs on
 *    each node, as a digit string) and per-GPU batch size; scalability.csv:
 *    the same by (nodes, replicas, per-GPU batch size) for more than 4 nodes;
 *  - validation-<B>.csv: per epoch, the progress an epoch is worth (in steps of
 *    the smallest validated batch size) and the gradient statistics (squared
 *    norm, variance) at batch size B.
 * Progress per second = efficiency gain of the batch size (from the gradient
 * noise scale) / time of one step (accumulation steps included). Every change
 * of allocation costs TS_PM_RESCALE_S without progress; completion is exact to
 * the second (the time to the last epoch boundary is rounded, half to even).
 *
 * Ownership: ts_pm_app is built by ts_pm_app_new + ts_pm_app_add_* +
 * ts_pm_app_finish from caller-owned buffers (copied), freed by
 * ts_pm_app_free. A finished app is read-only (shareable between runs on one
 * thread at a time: the job keeps its own cache). No I/O, no globals.
 */
#ifndef TS_REPLAY_POLLUX_MODEL_H
#define TS_REPLAY_POLLUX_MODEL_H

#include <stdbool.h>
#include <stddef.h>

#include "tessera/error.h"

#define TS_PM_RESCALE_S 30        /* lost at every change of allocation */
#define TS_PM_ROUND_S 60          /* the artifact's scheduling interval */
#define TS_PM_NODES_MAX 64        /* nodes one placement may span */
#define TS_PM_APP_NAME_MAX 32

typedef struct ts_pm_app ts_pm_app;

/* The artifact's epochs per application (bert 2, cifar10 100, ncf 10,
 * imagenet 90, deepspeech2 80, yolov3 50) and largest per-GPU batch (0: the
 * largest profiled; yolov3 8). TS_ENOENT for another name. */
int ts_pm_app_defaults(const char *name, int *epochs, int *max_local_bsz);

int ts_pm_app_new(const char *name, int epochs, int max_local_bsz, ts_pm_app **out, ts_err *err);
void ts_pm_app_free(ts_pm_app *a);
const char *replay_pm_app_name(const ts_pm_app *a);
/* Columns placement,local_bsz,step_time,sync_time (header line first). */
int ts_pm_app_add_placements(ts_pm_app *a, const char *buf, size_t len, const char *fname,
                             ts_err *err);
/* Columns num_nodes,num_replicas,local_bsz,step_time,sync_time. */
int ts_pm_app_add_scalability(ts_pm_app *a, const char *buf, size_t len, const char *fname,
                              ts_err *err);
/* Columns progress,iteration,metric,grad_sqr,grad_var, one row per epoch. */
int ts_pm_app_add_validation(ts_pm_app *a, int batch_size, const char *buf, size_t len,
                             const char *fname, ts_err *err);
/* Checks the app is complete (placements, >= 1 validation, each with >= epochs
 * rows) and derives the batch-size bounds and the progress per epoch. */
int ts_pm_app_finish(ts_pm_app *a, ts_err *err);

int replay_pm_app_init_bsz(const ts_pm_app *a);  /* the smallest validated batch */
int replay_pm_app_max_bsz(const ts_pm_app *a);   /* the largest validated batch */
int replay_pm_app_epochs(const ts_pm_app *a);
int replay_pm_app_min_local_bsz(const ts_pm_app *a); /* the smallest profiled per-GPU batch */
int replay_pm_app_max_local_bsz(const ts_pm_app *a); /* the largest usable (yolov3: 8) */

/* Step and sync time (s) of one step on placement (count[i] GPUs on node i,
 * zeros ignored) at local_bsz per GPU. Placements profiled are interpolated
 * in local_bsz only; others (5+ nodes) from the mean by (nodes, replicas) of
 * the profiles and scalability.csv, multilinear in nodes, replicas, local_bsz
 * (the artifact triangulates instead; see docs/simulator.md). */
void replay_pm_step_time(const ts_pm_app *a, const int *count, int n, int local_bsz,
                     double *step_s, double *sync_s);
/* The gradient statistics during epoch (from 0) at batch_size, linear between
 * the validated batch sizes around it (clamped to the validated range). */
void replay_pm_grad_stats(const ts_pm_app *a, int batch_size, int epoch, double *sqr, double *var);
/* Progress per step at batch_size relative to one step at the smallest
 * validated batch: (var + sqr) / (var / scale + sqr), scale = B / B0. */
double replay_pm_gain(const ts_pm_app *a, int batch_size, int epoch);
/* Progress at the end of epoch (1..epochs); 0 for epoch 0. */
double replay_pm_epoch_progress(const ts_pm_app *a, int epoch);

typedef struct ts_pm_goodput ts_pm_goodput;

/* One job under the model. */
typedef struct ts_pm_job {
    const ts_pm_app *app;
    int submit_s;
    int batch_size;   /* the job's fixed (TunedJobs) total batch size */
    int count[TS_PM_NODES_MAX];
    int nnodes;       /* 0: no allocation */
    int atomic_bsz, accum_steps;
    int rescale_s;    /* left of the current allocation change */
    int restarts;     /* allocation changes after the first */
    int epoch;
    double progress;
    long now_s;
    long done_s;      /* completion time; -1 while running */
    /* cache of the step time of (placement, atomic_bsz) */
    int c_atomic, c_nnodes, c_count[TS_PM_NODES_MAX];
    double c_step, c_sync;
    /* NULL: the batch is fixed. Else the job takes, at every change of
     * allocation and every epoch, the batch this says is best for its GPUs
     * (as the artifact's Pollux jobs do between epochs). Borrowed. */
    ts_pm_goodput *adapt;
} ts_pm_job;

void replay_pm_job_init(ts_pm_job *j, const ts_pm_app *a, int submit_s, int batch_size);
/* A new allocation (count per node, n nodes; n 0: none). A non-empty one
 * starts the TS_PM_RESCALE_S countdown. */
void replay_pm_job_reallocate(ts_pm_job *j, const int *count, int n);
/* Advances the job seconds of virtual time on its allocation. */
void replay_pm_job_step(ts_pm_job *j, int seconds);
/* One round (TS_PM_ROUND_S) of every job pj[0..n) on its allocation: each
 * stepped; the GPU-seconds the unfinished ones held during it. */
long replay_pm_round(ts_pm_job *pj, int n);

/* A Pollux workload row (name,time,application,num_replicas,batch_size). */
typedef struct ts_pm_wjob {
    char name[64];
    int submit_s;
    int app;          /* index into the apps array */
    int replicas;
    int batch_size;
} ts_pm_wjob;

/* Parses a Pollux workload; apps[0..napps) name the known applications.
 * *out is new (free()). */
int ts_pm_load_workload(const char *buf, size_t len, const char *fname,
                        const ts_pm_app *const *apps, int napps, ts_pm_wjob **out, int *n,
                        ts_err *err);

typedef struct ts_pm_stats {
    double avg_jct_s;
    long makespan_s;      /* latest completion (from workload start) */
    double util_pct;      /* GPU-seconds held / (GPUs x makespan) */
    long restarts;        /* allocation changes after the first, all jobs */
} ts_pm_stats;

/* Adds up to want GPUs to row[0..nodes) from node_free, the node with the
 * most free first, as many as it has (the artifact's most-free-node
 * placement); how many it added. */
int replay_pm_fill_most_free(int *row, int *node_free, int nodes, int want);
/* A job's GPUs per node (row[0..nodes)) as the model takes them: the nodes
 * it uses, largest count first, into cnt (TS_PM_NODES_MAX); how many. */
int replay_pm_counts(const int *row, int nodes, int *cnt);
/* The run's figures once every job is done: each job's JCT into jct_s (may
 * be NULL), their mean, the makespan, the restarts, and held_gpu_s over
 * total_gpus x makespan. */
void replay_pm_summarise(const ts_pm_wjob *jobs, const ts_pm_job *pj, int n, long held_gpu_s,
                     long total_gpus, long *jct_s, ts_pm_stats *st);

/* The artifact's Tiresias (+TunedJobs) on nodes x gpus_per_node through the
 * model: 60-s rounds; two queues, demotion at 16 GPU-hours of whole-round
 * running time x GPUs; count-only check walking Q0 then Q1, preemptive; GPUs
 * of a newly started job taken from the node with the most free GPUs, node by
 * node; no starvation promotion. jct_s[i] (may be NULL) gets job i's JCT. */
int ts_pm_run_tiresias(const ts_pm_app *const *apps, const ts_pm_wjob *jobs, int n, int nodes,
                       int gpus_per_node, long *jct_s, ts_pm_stats *st, ts_err *err);

/* What an elastic job reports (pollux_goodput.c): its best goodput (progress
 * per second) at g GPUs packed on nodes of gpus_per_node, over the batch
 * sizes it may use, at an epoch; *batch (may be NULL) gets that batch. Built
 * once per application (replay_pm_goodput_new times every candidate), filled
 * lazily per epoch; one thread at a time. */
int replay_pm_goodput_new(const ts_pm_app *a, int gpus_per_node, int max_gpus,
                      ts_pm_goodput **out, ts_err *err);
void replay_pm_goodput_free(ts_pm_goodput *g);
double replay_pm_goodput_best(ts_pm_goodput *g, int gpus, int epoch, int *batch);
/* The most GPUs an elastic job of the application may use, as the artifact
 * lets Pollux give: its largest batch over its smallest per-GPU batch, at most
 * cap; ncf 1. */
int replay_pm_app_max_gpus(const ts_pm_app *a, int cap);

struct ts_replay_policy_ops; /* replay.h */
typedef enum ts_pm_jobs_kind {
    TS_PM_RIGID,             /* the workload's GPUs and batch */
    TS_PM_ELASTIC_FROM_ONE,  /* 1 GPU asked of the policy, more granted */
    TS_PM_ELASTIC_FROM_TUNED /* the workload's GPUs asked of the policy, more granted */
} ts_pm_jobs_kind;
/* A replay policy (fifo, sjf, srtf, the replay's tiresias, tessera) deciding
 * the workload in 60-s rounds, the jobs advancing by the model; a started
 * job goes where the policy put it (its placement op) or, without one, on the
 * nodes with the most free GPUs (pollux_run.c). Rigid: each job the GPUs and
 * batch of the workload. Elastic: each job asks the policy for its minimum
 * (1 GPU, or the workload's count), holds up to replay_pm_app_max_gpus, the spare GPUs granted by ts_elastic_grant
 * (src/sched/elastic.h) on its reported goodput, taken back first where the
 * policy starts a job, its batch the best for its size. */
int ts_pm_run_policy(const ts_pm_app *const *apps, const ts_pm_wjob *jobs, int n, int nodes,
                     int gpus_per_node, const struct ts_replay_policy_ops *ops,
                     ts_pm_jobs_kind kind, long *jct_s, ts_pm_stats *st, ts_err *err);

#endif
