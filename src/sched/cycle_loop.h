/*
 * cycle_loop.h - internal: what the files of one scheduling cycle share:
 * the cycle's working state (struct loop: the jobs, the decision being
 * filled, per-job summaries and per-cycle scratch), the memo of failures'
 * keys, the why arena, and the functions each file offers the others.
 *
 * The cycle is split by concept: cycle_loop.c orders the waiting jobs and
 * drives the cycle (cycle_decide), cycle_job.c decides one job (quota,
 * placement, reservation, the memo of failures), cycle_preempt.c searches
 * for victims (reclaim, time-sharing, fair reclaim, moves) and records a
 * preemption. cycle_internal.h has the scheduler object they share with
 * placement and planning.
 */
#ifndef TS_SCHED_CYCLE_LOOP_H
#define TS_SCHED_CYCLE_LOOP_H

#include "sched/cycle_internal.h"

#define PREEMPTOR_SLACK_S 60.0 /* a preemptor keeps its place this long past the grace */
#define ESTIMATES_PER_CYCLE 8  /* jobs planned a cycle besides the reserved one */
#define MEMO_SEARCH_FAILED (-2) /* memo reason: a victim search found no set */
#define MEMO_RESHAPE_FAILED (-3) /* memo reason: no MIG reshape gives the room */

/* The cycle's las levels: level k is LAS_SCALE * k, so a tenant's split
 * first level has room below level 1 for its parts past the step (1) and
 * past the mid step (2) (split_levels in cycle_loop.c). */
#define LAS_SCALE 4

/* Per waiting job, computed once in memory order (the ordered pass then
 * touches this and the job only when it tries a placement). */
typedef struct jsum {
    uint64_t key;        /* memo key without the blocked bit */
    int64_t cpu, mem;    /* the job's total demand ... */
    int64_t gpu_milli;   /* ... and GPU milli (whole jobs and shares) */
    int64_t gpus;        /* cycle_job_gpus */
    double limit_s;      /* its time limit, the default applied */
    uint32_t allowed;    /* GPU models it may use, present in the cluster */
    int tenant, tier;
    /* las levels are scaled in the cycle: LAS_SCALE k for level k, 1 for a
     * split first level past its step (cfg.las_split_gpu_s), 2 past its mid
     * step (cfg.las_split_mid_gpu_s) */
    int level;           /* las level (0 when promoted), 0 under fifo */
    int earned;          /* las level by its service alone: time-sharing's */
    double attained;     /* GPU-s attained, 0 under fifo (an order key only
                          * without las_fifo_within_level; promotion's) */
    bool las;            /* its tenant orders by attained service */
    bool gpu, mig, whole;
    bool preemptor;      /* in the preemptor table: its victims stop for it */
    bool by_size;        /* fresh in a split first level: fewest GPUs first */
} jsum;

typedef struct loop {
    ts_sched *s;
    double now;
    const ts_job *w;
    int nw;
    const ts_job *r;
    int nr;
    ts_decision *d;
    int npool;
    int *start_off;     /* [nw] pool offset of each start's allocs */
    ts_alloc *tmp;      /* [max ntasks] */
    ts_alloc *plan;     /* [max ntasks] */
    plan_job *pj;       /* [nr + nw + 1] */
    double *lost;       /* [nr] */
    int *cand;          /* [nr] */
    int *chosen;        /* [nr] */
    bool *victim;       /* [nr] */
    int *table_pos;     /* [PREEMPTOR_TABLE_MAX] waiting index of each entry, -1 */
    double *dom;        /* [ntenants] dominant share started this cycle */
    jsum *js;           /* [nw] what the pre-pass learnt of each job */
    int *why_off;       /* [nw] offset of each job's why in d->why_buf */
    int *tord;          /* [ntenants] each tenant's order, inheritance resolved */
    int *tseen;         /* [ntenants] its jobs looked at so far in the order */
    bool *tborrows;     /* [ntenants] it holds more than its guarantee: set per search */
    int64_t *theld;     /* [ntenants] GPU milli it holds: set per fair search */
    double *tleft;      /* [ntenants] level-0 GPU-s its waiting jobs have left (las) */
    uint8_t *tsplit;    /* [ntenants] its first las level is split this cycle */
    int *tfresh;        /* [ntenants] its waiting jobs at their first level (las) */
    double *tstep;      /* [ntenants] where its split first level steps, this cycle */
    double *rattained;  /* [nr] each running job's GPU-s attained, its current run included */
    int *rlevel;        /* [nr] and the las level that makes (scaled) */
    int *stopping;      /* [nr] the running jobs that are stopping, nstopping of them */
    int nstopping;
    int max_running_level;
    /* [ntenants * TS_TIERS] the highest level a swap search may take there,
     * -1 none; NULL until the cycle's first swap search (cycle_preempt.c) */
    int *swap_top;
    /* the job searching for victims: its tenant stays within its guarantee
     * (loans included) once it runs, so other tenants' loans may go for it */
    bool reclaim_others;
    /* the job searching is past its tenant's guarantee and may take loans
     * of tenants holding more per unit of weight (cfg.fair_reclaim) */
    bool fair;
    /* tenants that borrow, counted at s->starts == borrow_starts */
    bool borrow_known;
    uint64_t borrow_starts;
    int nborrow, borrow_one;
    uint64_t epoch0;    /* the scheduler's epoch when the cycle began */
    int seen;           /* jobs looked at so far in the order */
    int searches;
    int reclaim_searches; /* searches for jobs within their tenant's guarantee */
    int reshapes;       /* MIG reshape questions asked (cycle_mig.c) */
    int plans;          /* plans made for jobs that do not hold the reservation */
    /* elastic take-back before preemption (elastic.h): the GPUs above
     * elastic jobs' minimums (counted at el_npre preemptions decided), and
     * what the jobs that wait for them were promised so far */
    int64_t el_extras, el_owed;
    int el_npre;
    bool have_res;
    double res_at;
    int64_t res_id;
    /* the last reclaim search that failed, when other tenants' loans too
     * young for it would make its room (cycle_preempt.c, young_loans): its
     * job (-1 none), by when the youngest loan of the set may be taken back
     * and by when, their grace over, they would have stopped */
    int young_for;
    double young_at, young_stop;
} loop;

static inline uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + UINT64_C(0x9e3779b97f4a7c15) + (h << 6) + (h >> 2);
    return h;
}

static inline memo_entry *memo_slot(ts_sched *s, uint64_t key)
{
    return &s->memo[key % MEMO_SLOTS];
}

static inline double limit_of(const loop *l, const ts_job *j)
{
    return j->time_limit_s > 0.0 ? j->time_limit_s : l->s->cfg.default_time_limit_s;
}

/* How long job j has waited in all since its submission: its age less the
 * time it ran (its attained service over its rate), and at least its wait
 * since it last began to wait (the starvation bound's clock: a job that ran
 * is not starving for the time it ran). */
static inline double waited_s(const loop *l, const ts_job *j)
{
    double since = l->now - (j->queued_s > 0.0 ? j->queued_s : j->submit_s);
    if (!(j->attained_gpu_s > 0.0))
        return since;
    double rate = ts_sched_job_rate(l->s, j);
    double total = l->now - j->submit_s - (rate > 0.0 ? j->attained_gpu_s / rate : 0.0);
    return total > since ? total : since;
}

static inline const char *why_of(const loop *l, int i) { return l->d->why_buf + l->why_off[i]; }

#define pend(l, i, reason_, ...)                                                              \
    do {                                                                                      \
        (l)->d->pending[i].reason = (reason_);                                                \
        (l)->why_off[i] = loop_why_add((l), __VA_ARGS__);                                          \
    } while (0)

static inline double job_grace(const loop *l, const ts_job *j)
{
    return j->ckpt_grace_s >= 0.0 ? j->ckpt_grace_s : l->s->cfg.default_grace_s;
}

/* Appends a formatted line to the decision's why arena; its offset (the
 * empty string at 0 when memory runs out). */
int loop_why_add(loop *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* cycle_job.c ------------------------------------------------------------- */

/* Whether job i counts as guaranteed work against other tenants' loans. */
bool loop_reclaims(const loop *l, int i);
/* Whether job i's tenant, this job included, stays within its guarantee on
 * some GPU model the job may use. */
bool loop_within_guarantee(const loop *l, int i);
/* Counts a job's GPUs on the nodes it holds, under its tier. */
void loop_node_tier_add(ts_sched *s, const ts_job *job, const ts_alloc *allocs);
/* Waiting job i's plan, the distinct nodes of it, into the decision. */
void loop_planned_set(ts_decision *d, int i, const ts_alloc *plan, int ntasks, bool hold);
/* Waiting job i's image fetched ahead (ts_decision.prefetch) on its plan
 * (l->plan) and the nodes of ends[0..n) (the plan's end order; none for a
 * preemptor, whose victims stop now), while fewer jobs are. */
void loop_prefetch_add(loop *l, int i, const plan_job *ends, int n);
/* Job i in its turn: quota, placement, else preemption, reservation or an
 * estimate. 0, or < 0 (TS_ENOMEM). */
int loop_process(loop *l, int i);

/* cycle_preempt.c --------------------------------------------------------- */

/* What a running job has attained, its current run included. */
double loop_running_attained(const loop *l, const ts_job *v);
/* Whether a preemptor's victims have all stopped. */
bool loop_victims_gone(const loop *l, int64_t id);
/* The latest time by which a preemptor's victims still stopping are to have
 * stopped (their stop_by_s); -1 when none is known. */
double loop_victims_stop_by(const loop *l, int64_t id);
/* Victims for job i; true if a preemption was decided (swap: its quota is
 * what it lacks, only its own tenant's jobs of its tier may go). */
bool loop_try_preempt(loop *l, int i, bool swap);

#endif
