/*
 * cycle_internal.h - internal: the scheduler object shared by cycle.c (its
 * life, starts and stops on the live cluster), cycle_own.c (the plan's own
 * copy of the cluster and quota, and the apply), the cycle itself
 * (cycle_loop.c, cycle_job.c, cycle_preempt.c: cycle_loop.h),
 * cycle_place.c (placing one job on a cluster and its index) and
 * cycle_plan.c (what-if planning on a scratch copy of the cluster: the
 * reservation's time and GPUs, and preemption victims).
 */
#ifndef TS_SCHED_CYCLE_INTERNAL_H
#define TS_SCHED_CYCLE_INTERNAL_H

#include "tessera/cycle.h"

/* A job a preemption was decided for: it goes first while its victims stop
 * (nvictims < 0: more than PREEMPTOR_VICTIMS_MAX, not kept), and the room
 * its victims free is kept for it (nroom < 0: on more than
 * PREEMPTOR_ROOM_MAX nodes, not kept). */
#define PREEMPTOR_VICTIMS_MAX 256
#define PREEMPTOR_ROOM_MAX 128
typedef struct preemptor_room {
    int32_t node;
    uint16_t gpus;      /* the victims' whole GPUs there, a bit per index */
    int64_t cpu_milli;  /* and their CPU and memory there */
    int64_t mem_mib;
} preemptor_room;

typedef struct preemptor_entry {
    int64_t id;
    double until_s;
    int nvictims;
    int64_t victims[PREEMPTOR_VICTIMS_MAX];
    int nroom;
    preemptor_room room[PREEMPTOR_ROOM_MAX];
} preemptor_entry;

#define PREEMPTOR_TABLE_MAX 64

/* A failure remembered for identical jobs within one cycle. Within a cycle
 * free resources only shrink (starts bind, nothing is released), so a job
 * that failed fails again until the blockers change (epoch); a "reservation"
 * failure ("fits now, except for the reserved GPUs") holds only until the
 * next start (starts). */
typedef struct memo_entry {
    uint64_t key;
    uint64_t epoch;   /* the epoch it is valid for; 0 = empty */
    uint64_t starts;
    int reason;
    int why_off;      /* into the decision's why arena */
} memo_entry;

#define MEMO_SLOTS 4096

/* Reserved GPUs held back from long jobs (EASY backfill), or a waiting
 * preemptor's room held back from every other job. */
typedef struct blocker {
    ts_alloc alloc;  /* the reserved job's planned allocation on one node */
    ts_request req;  /* what is held now (num_gpu < 0: nothing) */
    ts_alloc held;
    int64_t owner;   /* room: the preemptor it is kept for */
    bool want;       /* room: held while its owner is not the job deciding */
    bool room;       /* a preemptor's room, not the reservation's */
} blocker;

/* A host port a task holds on a node, this cycle (cycle_ports.c). */
typedef struct cycle_host_port {
    int node;
    uint32_t key;        /* TS_HOST_PORT */
    const ts_job *job;   /* its holder (the cycle's running or waiting job) */
    bool gone;           /* its holder is released on the scratch copy */
} cycle_host_port;

typedef struct sched_res {
    int64_t id;
    double start_s, end_s;
    uint64_t *nodes;            /* ts_node_mask_words(nnodes) words, owned */
    int nnodes;                 /* bits set */
} sched_res;

struct ts_sched {
    /* What the cycle plans on: the scheduler's own copies of the live
     * cluster and quota and an index over the copy (plan.c syncs them at
     * each plan's start); the live ones are only read there and written by
     * ts_sched_apply, ts_sched_start and ts_sched_stop. */
    ts_cluster *c;
    ts_quota *q;
    ts_gang_index *ix;
    ts_cluster *live_c;         /* borrowed */
    ts_quota *live_q;           /* borrowed */
    ts_gang_index *live_ix;     /* owned: kept in step with live_c */
    uint64_t *own_ver;          /* [nnodes] live version when copied into c */
    uint64_t *own_at;           /* [nnodes] c's version just after that copy */
    ts_sched_config cfg;
    int64_t cap[TS_RES_DIMS];   /* cluster totals, for in-cycle shares */
    uint32_t models_present;    /* GPU models the cluster has (bit = id) */
    /* scratch copy for planning */
    ts_cluster *sc;
    ts_gang_index *six;         /* NULL until the first plan */
    uint64_t *sync_ver;         /* [nnodes] real version when last copied */
    uint8_t *sdirty;            /* [nnodes] copy touched by a plan since */
    /* per cycle */
    uint64_t epoch;             /* bumped when blockers are set, and per cycle */
    uint64_t starts;            /* bumped by every start */
    memo_entry memo[MEMO_SLOTS];
    /* per-cycle scratch kept between cycles (no page faults per cycle) */
    void *keys;
    int keys_cap;
    void *keys_tmp;             /* the order's sort buffer, as keys */
    int keys_tmp_cap;
    uint8_t *keys_grp;          /* each key's group in the counting pass */
    int keys_grp_cap;
    uint8_t *done;
    int done_cap;
    void *js;
    int js_cap;
    int *why_off;
    int why_off_cap;
    blocker *blk;
    int nblk, blk_cap;
    bool blk_on;
    int64_t blk_gpus;           /* GPUs the blockers hold while on */
    /* the waiting preemptors' room: what their stopped victims freed,
     * held on the copy for the cycle (cycle_plan.c, "room") */
    blocker *room;
    int nroom, room_cap;
    bool room_paused;           /* released while the scratch copy syncs */
    int64_t room_gpus;          /* GPUs held as room now */
    uint64_t room_freed;        /* times room was let go for its owner */
    int cpu_cursor;             /* next-fit start for CPU-only tasks */
    preemptor_entry pre[PREEMPTOR_TABLE_MAX];
    int npre;
    struct cycle_scoring *scoring; /* placement policy state: cycle_place.c */
    /* [nnodes * TS_TIERS] GPUs held on each node by each tier (index
     * node * TS_TIERS + tier): rebuilt each cycle from the running jobs and
     * kept up with its starts (cycle_place.c keeps loans and guarantees on
     * separate nodes with it); NULL until the first cycle */
    uint16_t *node_tier;
    /* published host ports held, rebuilt each cycle from the running jobs
     * and kept up with its starts (cycle_ports.c) */
    cycle_host_port *hports;
    int nhports, hports_cap;
    /* reservations (ts_sched_set_reservations) and the current cycle's
     * time, which cycle_place tests their windows against */
    sched_res *res;
    int nres;
    double now;
    /* the shell's image table (borrowed) and the job's pull seconds per
     * node: score_image.c */
    const struct ts_image_table *images;
    double *image_cost;         /* [nnodes], allocated on first use */
    int image_cost_of;          /* the job image it holds (0 none), until the next table */
    bool image_cost_differ;     /* its nodes are not all the same */
};

/* cycle.c ------------------------------------------------------------------ */

/* What job charges placed on allocs, on cluster c (NULL: the plan's). */
int cycle_job_demand_on(const ts_sched *s, const ts_cluster *c, const ts_job *job,
                        const ts_alloc *allocs, int model, int64_t demand[TS_RES_DIMS]);

/* What job charges placed on allocs, or (allocs NULL) on GPUs of model. */
int cycle_job_demand(const ts_sched *s, const ts_job *job, const ts_alloc *allocs, int model,
                     int64_t demand[TS_RES_DIMS]);
/* Binds job->allocs on the live cluster and charges the live quota: a start
 * the plan decided (ts_sched_apply) or one restored (ts_sched_start). */
int cycle_apply_start(ts_sched *s, const ts_job *job, double now, ts_err *err);
/* Grows *p (elements of size bytes) to hold need; TS_ENOMEM. */
int cycle_grow(void **p, int *cap, int need, size_t size);

/* cycle_loop.c ------------------------------------------------------------ */

/* The cycle itself on s->c, s->q and s->ix (the plan's copies, synced by
 * the caller): ts_sched_cycle's contract, binding its starts on the copies
 * only. */
int cycle_decide(ts_sched *s, double now, const ts_job *waiting, int nwaiting,
                 const ts_job *running, int nrunning, ts_decision *d, ts_err *err);

/* cycle_place.c ----------------------------------------------------------- */

/* Places job on cluster c (index ix kept in step) all or nothing; fills
 * allocs[0..ntasks-1] and returns 0, or TS_ENOSPC with *reason (enum
 * ts_pending_reason) and why set and c unchanged. */
int cycle_place(ts_sched *s, ts_cluster *c, ts_gang_index *ix, const ts_job *job,
                ts_alloc *allocs, int *reason, char *why, size_t whylen);
/* Releases what cycle_place bound (or a running job's allocs). */
int cycle_unplace(ts_cluster *c, ts_gang_index *ix, const ts_job *job, const ts_alloc *allocs);
/* Frees the placement policy's state (scorers, learned workload). */
void cycle_scoring_free(ts_sched *s);
/* Whole GPUs the job needs (0 for CPU-only and shares count as one each). */
int64_t cycle_job_gpus(const ts_job *job);

/* cycle_ports.c ----------------------------------------------------------- */

/* Empties the table of held ports (a cycle's start). */
void cycle_ports_reset(ts_sched *s);
/* Adds the ports job holds on the nodes of allocs; 0 or TS_ENOMEM. */
int cycle_ports_add(ts_sched *s, const ts_job *job, const ts_alloc *allocs);
/* Sets in taken (ts_node_mask_words(nnodes) words, zeroed by the caller)
 * the nodes where another task holds one of job's ports (scratch: on the
 * scratch copy, whose released holders hold none); returns how many, *first
 * one such port (0: none). */
int cycle_ports_taken(const ts_sched *s, const ts_job *job, bool scratch, uint64_t *taken,
                      int nnodes, uint32_t *first);
/* A holder released on (gone) or bound again to the scratch copy; with job
 * NULL, every holder bound again (the copy synced to the real cluster). */
void cycle_ports_scratch(ts_sched *s, const ts_job *job, bool gone);
/* The job's ports are well formed and it can be placed one task per node. */
int cycle_ports_check(const ts_job *job, ts_err *err);

/* score_image.c ----------------------------------------------------------- */

/* Seconds before job's image is whole on each node ([nnodes], owned by s,
 * valid until the next call), or NULL when there is no preference to make:
 * no table, no image, or every node the same. Kept for the image until
 * ts_sched_set_images: what a cycle places does not change the table. */
const double *cycle_image_costs(ts_sched *s, const ts_job *job);

/* cycle_mig.c ------------------------------------------------------------- */

/* Whether destroying idle MIG instances (ts_mig_plan, as tesserad runs it
 * after the cycle: at most TS_MIG_PLAN_CHANGES_DEFAULT GPUs, drained nodes
 * left out) gives every MIG task of job room on s->c: 1 and *ngpus the GPUs
 * reshaped, 0 when no reshape does (or none is needed: what the job lacks is
 * something else), TS_ENOMEM. */
int cycle_mig_reshape(const ts_sched *s, const ts_job *job, int *ngpus);

/* cycle_fair.c ------------------------------------------------------------ */

/* GPUs (milli) tenant t holds now, every model present. */
int64_t cycle_held_gpu_milli(const ts_sched *s, int t);
/* Tenant t's guarantee in GPU milli, every model present. */
int64_t cycle_guaranteed_gpu_milli(const ts_sched *s, int t);
/* Fair reclaim: may tenant a, holding a_held and gaining a_gain GPU milli,
 * take b_loss of tenant b's loans (b holding b_held)? True when b keeps its
 * guarantee and a's GPUs per unit of weight after, one more a_gain added,
 * stay strictly below b's after. */
bool cycle_fair_takes(const ts_sched *s, int a, int64_t a_held, int64_t a_gain, int b,
                      int64_t b_held, int64_t b_loss);
/* Fair reclaim: may a job of tenant a gaining a_gain GPU milli stop running
 * job v (v_gpu_milli GPUs; v_borrows: its tenant holds more than its
 * guarantee)? v is another tenant's loan that has run an hour and
 * cycle_fair_takes holds for it alone; held[t]: GPU milli tenant t holds. */
bool cycle_fair_loan(const ts_sched *s, double now, const ts_job *v, int64_t v_gpu_milli,
                     bool v_borrows, int a, int64_t a_gain, const int64_t *held);

/* cycle_plan.c ------------------------------------------------------------ */

typedef struct plan_job {
    const ts_job *job;
    const ts_alloc *allocs;
    double end_s;
} plan_job;

/* Earliest time at which job fits once the jobs of ends[] (sorted by end_s)
 * released theirs; the scratch placement at that time in plan[]. Returns 0
 * and *at_s, or TS_ENOSPC when it never fits. */
/* After plan_reservation found no time: how many nodes are down or drained
 * (not schedulable) if job would fit on the emptied cluster with them up
 * again, else 0 (it never fits here). */
int plan_fits_with_nodes_up(ts_sched *s, const ts_job *job);
int plan_reservation(ts_sched *s, const ts_job *job, const plan_job *ends, int nends,
                     ts_alloc *plan, double *at_s);
/* Chooses victims among cand[0..n-1] (already in preference order; each one
 * whole job) so that job fits once they are gone, plus the jobs in free[]
 * (already stopping); prunes victims not needed, most lost work first.
 * move (NULL: none) marks candidates (one task each) that must restart at
 * once elsewhere: a set holds only if, job placed, every chosen one of them
 * fits again on what is left. chosen[] gets the victims' indices into cand;
 * returns how many (0 if no set works). plan gets the placement. */
int plan_victims(ts_sched *s, const ts_job *job, const plan_job *cand, const double *lost,
                 const bool *move, int n, const plan_job *stopping, int nstopping, int *chosen,
                 ts_alloc *plan);

/* Blockers: the reserved placement's currently free parts held on the real
 * cluster so that long jobs stay off them. */
int blockers_set(ts_sched *s, const ts_job *job, const ts_alloc *plan);
void blockers_on(ts_sched *s);
void blockers_off(ts_sched *s);
void blockers_clear(ts_sched *s);

/* Room: each waiting preemptor's share of what its stopped victims freed,
 * held on the copy so that no other job (another preemptor included)
 * starts there; its owner's is let go while the owner decides. A victim
 * search sees the room held, a reservation's plan sees it free (it is
 * freed again as its owner starts). */
int room_add(ts_sched *s, int64_t owner, const preemptor_room *r);
/* Wants the owner's room held (or not) and applies it; a release bumps the
 * epoch (more room: the memo's failures no longer hold). */
void room_want(ts_sched *s, int64_t owner, bool want);
void room_clear(ts_sched *s);

#endif
