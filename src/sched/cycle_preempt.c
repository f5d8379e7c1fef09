/*
 * cycle_preempt.c - the cycle's victim searches (cycle_loop.h): which
 * running jobs a waiting job may stop (reclaim of loans by guaranteed work,
 * time-sharing between las levels, fair reclaim between borrowers, and
 * moves of small jobs that restart at once elsewhere), in which order of
 * preference, the smallest set whose room makes it fit (planned on the
 * scratch copy, cycle_plan.c), and the preemption recorded: each victim's
 * signal and grace, the preemptor table that puts the job first while its
 * victims stop, and its reservation of the room they free.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched/cycle_loop.h"
#include "tessera/fmt.h"

/* What a running job has attained, its current run included. */
double loop_running_attained(const loop *l, const ts_job *v)
{
    double run = l->now > v->start_s ? l->now - v->start_s : 0.0;
    return v->attained_gpu_s + run * ts_sched_job_rate(l->s, v);
}

static bool tenant_borrows(const ts_quota *q, int t)
{
    for (int k = 0; k < TS_RES_DIMS; k++)
        if (ts_quota_borrowed(q, t, k) > 0)
            return true;
    return false;
}

/* Whether a tenant other than t borrows GPUs (fair reclaim has a loan to
 * look at): without one, a fair search would only spend the cycle's bound.
 * Recounted only after a start (usage changes with starts alone within a
 * cycle), not per waiting job. */
static bool another_borrows(loop *l, int t)
{
    if (!l->borrow_known || l->borrow_starts != l->s->starts) {
        l->nborrow = 0;
        for (int u = 0; u < ts_quota_tenants(l->s->q)->n; u++)
            for (int m = 0; m < TS_MAX_GPU_MODELS; m++)
                if ((l->s->models_present >> m & 1) &&
                    ts_quota_borrowed(l->s->q, u, ts_res_gpu(m)) > 0) {
                    l->nborrow++;
                    l->borrow_one = u;
                    break;
                }
        l->borrow_starts = l->s->starts;
        l->borrow_known = true;
    }
    return l->nborrow > 1 || (l->nborrow == 1 && l->borrow_one != t);
}

static bool fair_loan(const loop *l, int i, const ts_job *v);

/* The minimum runtime and preemptions per hour that protect a job from
 * the job searching: a split tenant's own jobs' (own_split) or the others'. */
static double min_runtime(const ts_sched_config *cfg, bool own_split)
{
    return own_split && cfg->las_split_min_runtime_s >= 0.0 ? cfg->las_split_min_runtime_s
                                                            : cfg->min_runtime_s;
}

static int per_hour(const ts_sched_config *cfg, bool own_split)
{
    return own_split && cfg->las_split_max_preemptions_hour >= 0
               ? cfg->las_split_max_preemptions_hour
               : cfg->max_preemptions_hour;
}

/* Is job i of a tenant whose first las level is split this cycle? Its own
 * jobs then take each other's room under the split's limits. */
static bool split_own(const loop *l, int i)
{
    return l->js[i].las && l->tsplit[l->js[i].tenant];
}

/* May job i, in a swap search, take its own tenant's running job v of the
 * other tier? Only an opportunistic job of a split tenant, its guaranteed
 * work, with cfg.las_split_cross_tier (the levels decide there). */
static bool swap_cross_tier(const loop *l, int i, const ts_job *v)
{
    return l->s->cfg.las_split_cross_tier && split_own(l, i) &&
           l->js[i].tier == TS_TIER_OPPORTUNISTIC && v->tier == TS_TIER_GUARANTEED;
}

/* GPU milli a job holds (whole GPUs and shares; MIG instances not). */
static int64_t job_gpu_milli(const ts_job *v)
{
    int64_t g = 0;
    for (int t = 0; t < v->ntasks; t++)
        if (v->tasks[t].num_gpu > 0)
            g += (int64_t)v->tasks[t].num_gpu * v->tasks[t].gpu_milli;
    return g;
}

/* May waiting job i take running job v's room? Reclaim: guaranteed work
 * takes opportunistic work's (any tenant's, but not its own tenant's higher
 * classes) and its own tenant's lower classes. Time-sharing (las tenants): a
 * job takes the room of a job that attained a higher level, of its own
 * tenant (an opportunistic job only from opportunistic work, never from a
 * higher class) or opportunistic work of another tenant; so guaranteed work
 * is never a time-sharing victim of another tenant, nor of its own tenant's
 * opportunistic work unless the tenant's first level is split and
 * cfg.las_split_cross_tier holds (in a split tenant the levels decide, not
 * the tiers). Either way never before the victim's minimum runtime
 * nor past its preemptions per hour, except another tenant's loan taken back
 * for a job within its tenant's guarantee (of either tier with
 * reclaim_any_tier): cfg.reclaim_min_runtime_s is its floor (60 s by default),
 * and against guaranteed-tier work the per-hour limit does not hold
 * (reclaim_ignores_hour_limit). Fair reclaim (l->fair): a job past its
 * tenant's guarantee takes another borrowing tenant's loan when its tenant
 * still holds less per unit of weight after (cycle_fair.c), the loan past
 * min_runtime_s and within its preemptions per hour. A split tenant's own
 * jobs (reclaim by class or time-sharing) keep the split's limits instead
 * (cfg.las_split_min_runtime_s, las_split_max_preemptions_hour). *ts set when only
 * time-sharing allows it, *fair when only fair reclaim does. */
static bool victim_ok(const loop *l, int i, const ts_job *v, int vlevel, bool *ts, bool *fair)
{
    const ts_job *job = &l->w[i];
    const jsum *js = &l->js[i];
    const ts_sched_config *cfg = &l->s->cfg;
    *ts = false;
    *fair = false;
    if (v->stopping)
        return false;
    bool same = v->tenant == job->tenant;
    /* a split tenant's own jobs take each other's room under the split's
     * limits (cfg.las_split_min_runtime_s and _max_preemptions_hour): its
     * overflow is ordered within it, other tenants' work keeps the others */
    bool own_split = same && split_own(l, i);
    /* another tenant's loan, taken back for a job within its guarantee: its
     * tenant borrows, so once taken back it cannot take the room back in
     * turn (the preemptor's tenant stays within its guarantee, and
     * opportunistic work of a tenant within its own is no loan): two
     * tenants' opportunistic jobs never preempt each other in a loop */
    bool loan = !same && v->tier != TS_TIER_GUARANTEED && l->reclaim_others &&
                l->tborrows[v->tenant];
    double floor = loan && cfg->reclaim_min_runtime_s >= 0.0 ? cfg->reclaim_min_runtime_s
                                                             : min_runtime(cfg, own_split);
    if (l->now - v->start_s < floor)
        return false;
    if (v->preemptions_hour >= per_hour(cfg, own_split) &&
        !(loan && cfg->reclaim_ignores_hour_limit && js->tier == TS_TIER_GUARANTEED))
        return false;
    if (loan)
        return true;
    /* with cross-tier time-sharing a split tenant's levels decide, not its
     * tiers: its guaranteed job of a class does not take back the room of
     * its opportunistic job of that class and a lower level (which may have
     * time-shared it: the two would preempt each other in turn) */
    bool levels_decide = own_split && cfg->las_split_cross_tier && vlevel < js->earned;
    bool reclaim = js->tier == TS_TIER_GUARANTEED &&
                   (v->tier == TS_TIER_GUARANTEED ? same && v->priority < job->priority
                    : same ? v->priority < job->priority ||
                                 (v->priority == job->priority && !levels_decide)
                           : l->reclaim_others);
    if (reclaim)
        return true;
    /* levels are scaled by LAS_SCALE in the cycle (split_levels): the split of a
     * tenant's first level is its own, other tenants' jobs see one level */
    if (js->las && (same ? vlevel > js->earned : vlevel / LAS_SCALE > js->earned / LAS_SCALE) &&
        (same ? v->priority <= job->priority &&
                    (js->tier == TS_TIER_GUARANTEED || v->tier == TS_TIER_OPPORTUNISTIC ||
                     (own_split && cfg->las_split_cross_tier))
              : v->tier == TS_TIER_OPPORTUNISTIC)) {
        *ts = true;
        return true;
    }
    *fair = fair_loan(l, i, v);
    return *fair;
}

/* Fair reclaim (cfg.fair_reclaim): may job i, its tenant past its
 * guarantee, take running job v's room? (cycle_fair.c) */
static bool fair_loan(const loop *l, int i, const ts_job *v)
{
    return l->fair && cycle_fair_loan(l->s, l->now, v, job_gpu_milli(v), l->tborrows[v->tenant],
                                      l->js[i].tenant, l->js[i].gpu_milli, l->theld);
}

typedef struct vkey {
    int borrowing;
    double share;
    int priority;
    int level;
    int guaranteed;     /* the victim's tier: opportunistic work goes first */
    double lost;
    int64_t gpus;       /* 0 when the config does not prefer the fewest */
    double attained;
    bool ts;
    bool fair;          /* only fair reclaim lets it go */
    int j;
} vkey;

/* Victims in preference order: borrowing tenants, the most over-share,
 * the lowest class, the highest las level, opportunistic before guaranteed
 * work (a guaranteed job stopped for its own tenant's job would, waiting,
 * take an equal opportunistic job's room back at once: two stops for one),
 * the least work lost, the fewest GPUs (cfg.victims_fewest_gpus), the most
 * service attained. */
static int cmp_vkey(const void *a, const void *b)
{
    const vkey *x = a, *y = b;
    if (x->borrowing != y->borrowing)
        return y->borrowing - x->borrowing;
    if (x->share != y->share)
        return x->share > y->share ? -1 : 1;
    if (x->priority != y->priority)
        return x->priority < y->priority ? -1 : 1;
    if (x->level != y->level)
        return x->level > y->level ? -1 : 1;
    if (x->guaranteed != y->guaranteed)
        return x->guaranteed - y->guaranteed;
    if (x->lost != y->lost)
        return x->lost < y->lost ? -1 : 1;
    if (x->gpus != y->gpus)
        return x->gpus < y->gpus ? -1 : 1;
    if (x->attained != y->attained)
        return x->attained > y->attained ? -1 : 1;
    return (x->j > y->j) - (x->j < y->j);
}

/* Victim v's room into e's: its whole GPUs, CPU and memory per node (a
 * MIG instance or a share is not held: what is left of such a GPU is
 * anyone's). */
static void room_of(preemptor_entry *e, const ts_job *v)
{
    for (int t = 0; t < v->ntasks && e->nroom >= 0; t++) {
        const ts_alloc *a = &v->allocs[t];
        if (a->node < 0)
            continue;
        int q = 0;
        while (q < e->nroom && e->room[q].node != a->node)
            q++;
        if (q == e->nroom) {
            if (q == PREEMPTOR_ROOM_MAX) {
                e->nroom = -1;
                return;
            }
            e->room[e->nroom++] = (preemptor_room){.node = a->node};
        }
        preemptor_room *r = &e->room[q];
        if (a->mig_profile < 0 && a->gpu_milli >= TS_MILLI_PER_GPU)
            for (int g = 0; g < a->ngpu; g++)
                r->gpus |= (uint16_t)(1u << a->gpu[g]);
        r->cpu_milli += a->cpu_milli;
        r->mem_mib += a->mem_mib;
    }
}

/* Records preemptor id with the victims chosen for it (d->preempts from
 * first on), and the room they free. */
static int table_add(ts_sched *s, int64_t id, double until_s, const loop *l, int first)
{
    preemptor_entry e = {.id = id, .until_s = until_s};
    int m = l->d->npreempts - first;
    e.nvictims = m <= PREEMPTOR_VICTIMS_MAX ? m : -1;
    for (int k = 0; k < m && e.nvictims >= 0; k++)
        e.victims[k] = l->r[l->d->preempts[first + k].victim].id;
    for (int k = 0; k < m && e.nroom >= 0; k++)
        room_of(&e, &l->r[l->d->preempts[first + k].victim]);
    for (int k = 0; k < s->npre; k++)
        if (s->pre[k].id == id) {
            s->pre[k] = e;
            return 0;
        }
    if (s->npre == PREEMPTOR_TABLE_MAX)
        return TS_ENOSPC;
    s->pre[s->npre++] = e;
    return 0;
}

/* The preemptor table's entry of job id; NULL when it has none. */
static const preemptor_entry *entry_of(const ts_sched *s, int64_t id)
{
    for (int k = 0; k < s->npre; k++)
        if (s->pre[k].id == id)
            return &s->pre[k];
    return NULL;
}

/* Whether a preemptor's victims have all stopped (none of them is among
 * the running jobs still stopping): its room was freed, so if it does not
 * fit, another job took that room. */
bool loop_victims_gone(const loop *l, int64_t id)
{
    const preemptor_entry *e = entry_of(l->s, id);
    if (!e || e->nvictims < 0)
        return false;
    for (int j = 0; j < l->nstopping; j++)
        for (int k = 0; k < e->nvictims; k++)
            if (l->r[l->stopping[j]].id == e->victims[k])
                return false;
    return true;
}

double loop_victims_stop_by(const loop *l, int64_t id)
{
    const preemptor_entry *e = entry_of(l->s, id);
    double by = -1.0;
    for (int j = 0; e && j < l->nstopping; j++) {
        const ts_job *v = &l->r[l->stopping[j]];
        for (int k = 0; k < e->nvictims; k++)
            if (v->id == e->victims[k] && v->stop_by_s > by)
                by = v->stop_by_s;
    }
    return by;
}

/* A job moved for fair share (cfg.fair_moves) has run this long: without
 * it, Philly October-November 8x stopped 150,917 jobs (77,865 of them
 * moves) for Jain 0.998; with 1 hour 93,155 (0.997), with 4 hours 49,016
 * (0.992, and 30 s less avg JCT); with no fair moves 30,057 (0.971). A
 * guarantee's moves keep the reclaim floor (docs/scheduler.md, "Fair
 * moves"). */
#define FAIR_MOVE_MIN_AGE_S (4.0 * 3600.0)

/* Moves (cfg.guarantee_moves): may running job v (not a candidate of the
 * ordinary search) stop for job i to restart at once elsewhere? One task of
 * whole GPUs, fewer in all than job i's (chains of moves end), running for
 * the loan's minimum runtime (and min_age_s) at least, within its
 * preemptions per hour. */
static bool move_ok(const loop *l, int i, const ts_job *v, double min_age_s)
{
    const ts_sched_config *cfg = &l->s->cfg;
    const ts_request *r = &v->tasks[0];
    if (v->stopping || v->ntasks != 1 || r->num_gpu < 1 || r->gpu_milli < TS_MILLI_PER_GPU ||
        r->mig_profile >= 0 || r->num_gpu >= l->js[i].gpus)
        return false;
    double floor = cfg->reclaim_min_runtime_s >= 0.0 ? cfg->reclaim_min_runtime_s
                                                     : cfg->min_runtime_s;
    if (floor < min_age_s)
        floor = min_age_s;
    return l->now - v->start_s >= floor && v->preemptions_hour < cfg->max_preemptions_hour;
}

/* The ordinary search found no set for job i (within its tenant's
 * guarantee; one task, or a gang of tasks of at most a node each): the
 * nodes that could hold a task of it once their candidates and movable jobs
 * go, the best few of them (the most GPUs free or held by candidates, then
 * the fewest to move; a task's count plus MOVE_NODES_SPARE), give their
 * movable jobs as extra candidates after the ordinary ones (keys[0..n-1],
 * sorted), which also make room for the moves. Returns the victims
 * (l->chosen into keys, (*move)[k] marks a move) or 0; *move is the
 * caller's to free. */
#define MOVE_NODES_SPARE 3
#define MOVE_NODES_MAX 16
static int plan_moves(loop *l, int i, vkey *keys, int n, double min_age_s, bool **move)
{
    ts_sched *s = l->s;
    const ts_job *job = &l->w[i];
    if (!l->js[i].whole || l->js[i].gpus < 2 || job->ntasks + MOVE_NODES_SPARE > MOVE_NODES_MAX)
        return 0;
    int64_t need = 0;
    for (int t = 0; t < job->ntasks; t++)
        need = job->tasks[t].num_gpu > need ? job->tasks[t].num_gpu : need;
    int nn = s->c->nnodes;
    int *room = calloc((size_t)nn * 2, sizeof *room); /* free + candidates', movable */
    *move = calloc((size_t)(l->nr > 0 ? l->nr : 1), sizeof **move);
    if (!room || !*move) {
        free(room);
        return 0;
    }
    int *mov = room + nn;
    for (int x = 0; x < nn; x++)
        room[x] = ts_gang_index_node_enabled(s->ix, x) ? s->c->nodes[x].gpus_free : -1;
    for (int k = 0; k < n; k++) {
        const ts_job *v = &l->r[keys[k].j];
        for (int t = 0; t < v->ntasks; t++)
            room[v->allocs[t].node] += v->allocs[t].ngpu;
    }
    bool *cand = *move; /* scratch: which running jobs are ordinary candidates */
    for (int k = 0; k < n; k++)
        cand[keys[k].j] = true;
    for (int j = 0; j < l->nr; j++)
        if (!cand[j] && !l->victim[j] && move_ok(l, i, &l->r[j], min_age_s))
            mov[l->r[j].allocs[0].node] += l->r[j].allocs[0].ngpu;
    int want = job->ntasks + MOVE_NODES_SPARE;
    int best[MOVE_NODES_MAX], nbest = 0;
    for (int x = 0; x < nn; x++) {
        /* a node with room enough already, for one task, was the ordinary
         * search's */
        if (room[x] < 0 || room[x] + mov[x] < need || mov[x] == 0 ||
            (job->ntasks == 1 && room[x] >= need))
            continue;
        int at = nbest < want ? nbest++ : want;
        while (at > 0 && (room[x] > room[best[at - 1]] ||
                          (room[x] == room[best[at - 1]] && mov[x] < mov[best[at - 1]]))) {
            if (at < want)
                best[at] = best[at - 1];
            at--;
        }
        if (at < want)
            best[at] = x;
    }
    int total = n;
    for (int b = 0; b < nbest; b++) {
        int first = total;
        for (int j = 0; j < l->nr; j++) {
            const ts_job *v = &l->r[j];
            if (cand[j] || l->victim[j] || v->allocs[0].node != best[b] ||
                !move_ok(l, i, v, min_age_s))
                continue;
            double since = v->last_ckpt_s > v->start_s ? v->last_ckpt_s : v->start_s;
            int64_t g = cycle_job_gpus(v);
            /* a move restarts at once: its tier is no reason (0) */
            keys[total++] = (vkey){0, 0.0, v->priority, l->rlevel[j], 0,
                                   (double)g * (l->now - since), g, l->rattained[j], false,
                                   false, j};
        }
        /* on a node, in the ordinary order (class, level, work lost, GPUs) */
        qsort(keys + first, (size_t)(total - first), sizeof *keys, cmp_vkey);
    }
    free(room);
    if (total == n)
        return 0;
    bool *mk = calloc((size_t)total, sizeof *mk);
    if (!mk)
        return 0;
    for (int k = 0; k < total; k++) {
        l->pj[k] = (plan_job){&l->r[keys[k].j], l->r[keys[k].j].allocs, 0.0};
        l->lost[k] = keys[k].lost;
        mk[k] = k >= n;
    }
    int m = plan_victims(s, job, l->pj, l->lost, mk, total, NULL, 0, l->chosen, l->plan);
    /* *move indexed like keys from here on */
    free(*move);
    *move = mk;
    return m;
}

/* The victims chosen (l->chosen into keys, m of them) that only fair
 * reclaim lets go, taken together: does each victim tenant, all its fair
 * victims gone, still hold more per unit of weight than job i's tenant with
 * job i started? (Each was checked alone.) */
static bool fair_set_holds(const loop *l, int i, const vkey *keys, int m)
{
    for (int k = 0; k < m; k++) {
        const vkey *x = &keys[l->chosen[k]];
        if (!x->fair)
            continue;
        int b = l->r[x->j].tenant;
        int64_t loss = 0;
        for (int q = 0; q < m; q++) {
            const vkey *y = &keys[l->chosen[q]];
            const ts_job *v = &l->r[y->j];
            if (y->fair && v->tenant == b)
                loss += job_gpu_milli(v);
        }
        int a = l->js[i].tenant;
        if (!cycle_fair_takes(l->s, a, l->theld[a], l->js[i].gpu_milli, b, l->theld[b], loss))
            return false;
    }
    return true;
}

/* Fair moves (cfg.fair_moves): would job i's tenant, the job started,
 * still hold fewer GPUs per unit of weight than some borrower holds now?
 * (l->theld and l->tborrows as the fair search counted them) */
static bool fair_behind(const loop *l, int i)
{
    int a = l->js[i].tenant;
    for (int b = 0; b < ts_quota_tenants(l->s->q)->n; b++)
        if (l->tborrows[b] &&
            cycle_fair_takes(l->s, a, l->theld[a], l->js[i].gpu_milli, b, l->theld[b], 0))
            return true;
    return false;
}

/* Running job j as a candidate: its preference keys. */
static vkey vkey_of(const loop *l, int j, bool ts, bool fair)
{
    const ts_job *v = &l->r[j];
    const ts_sched *s = l->s;
    double since = v->last_ckpt_s > v->start_s ? v->last_ckpt_s : v->start_s;
    int64_t g = cycle_job_gpus(v);
    return (vkey){l->tborrows[v->tenant], ts_quota_share(s->q, v->tenant, l->now),
                  v->priority, l->rlevel[j], v->tier == TS_TIER_GUARANTEED,
                  (double)g * (l->now - since), s->cfg.victims_fewest_gpus ? g : 0,
                  l->rattained[j], ts, fair, j};
}

/* The running jobs job i may stop, into keys (l->nr at most) in no order;
 * how many. Who borrows (and, for a fair search, what each tenant holds)
 * is counted first. */
static int preempt_candidates(loop *l, int i, bool swap, vkey *keys)
{
    ts_sched *s = l->s;
    const ts_job *job = &l->w[i];
    /* who borrows, once per search rather than per candidate (usage grows
     * with the cycle's starts, so not once per cycle) */
    for (int t = 0; t < ts_quota_tenants(s->q)->n; t++) {
        l->tborrows[t] = tenant_borrows(s->q, t);
        if (l->fair)
            l->theld[t] = cycle_held_gpu_milli(s, t);
    }
    int n = 0;
    for (int j = 0; j < l->nr; j++) {
        const ts_job *v = &l->r[j];
        /* a job already stopping frees its room for the job it was
         * preempted for (which goes first and holds that room), not for
         * this one: neither a candidate nor room to count on */
        if (v->stopping || l->victim[j])
            continue;
        bool ts, fair;
        if (swap && (v->tenant != job->tenant ||
                     (v->tier != job->tier && !swap_cross_tier(l, i, v))))
            continue;
        if (!victim_ok(l, i, v, l->rlevel[j], &ts, &fair) || (swap && !ts))
            continue;
        keys[n++] = vkey_of(l, j, ts, fair);
    }
    return n;
}

typedef struct young_key {
    double start_s;
    vkey k;
} young_key;

static int cmp_young(const void *a, const void *b)
{
    const young_key *x = a, *y = b;
    if (x->start_s != y->start_s)
        return x->start_s < y->start_s ? -1 : 1;
    return (x->k.j > y->k.j) - (x->k.j < y->k.j);
}

/* A reclaim search found no set: would other tenants' loans that are only
 * too young for it (reclaim_min_runtime_s) make its room, with the
 * candidates of keys[0, n)? Then l->young_* say by when the youngest of a
 * set reaches the floor and its victims would stop; else l->young_for is -1.
 * An estimate only: nothing is preempted. */
static void young_loans(loop *l, int i, vkey *keys, int n)
{
    const ts_sched_config *cfg = &l->s->cfg;
    l->young_for = -1;
    double floor = cfg->reclaim_min_runtime_s;
    int m = n;
    for (int j = 0; j < l->nr && floor > 0.0; j++) {
        const ts_job *v = &l->r[j];
        if (v->stopping || l->victim[j] || v->tenant == l->js[i].tenant ||
            v->tier == TS_TIER_GUARANTEED || !l->tborrows[v->tenant] ||
            l->now - v->start_s >= floor ||
            (v->preemptions_hour >= cfg->max_preemptions_hour &&
             !(cfg->reclaim_ignores_hour_limit && l->js[i].tier == TS_TIER_GUARANTEED)))
            continue;
        keys[m++] = vkey_of(l, j, false, false);
    }
    if (m == n)
        return;
    /* the candidates in their order, then the young loans oldest first: the
     * shortest prefix that makes room is the earliest time a set may go */
    qsort(keys, (size_t)n, sizeof *keys, cmp_vkey);
    young_key *y = malloc((size_t)(m - n) * sizeof *y);
    if (!y)
        return;
    for (int k = n; k < m; k++)
        y[k - n] = (young_key){l->r[keys[k].j].start_s, keys[k]};
    qsort(y, (size_t)(m - n), sizeof *y, cmp_young);
    for (int k = n; k < m; k++)
        keys[k] = y[k - n].k;
    free(y);
    for (int k = 0; k < m; k++) {
        l->pj[k] = (plan_job){&l->r[keys[k].j], l->r[keys[k].j].allocs, 0.0};
        l->lost[k] = keys[k].lost;
    }
    int c = plan_victims(l->s, &l->w[i], l->pj, l->lost, NULL, m, NULL, 0, l->chosen, l->plan);
    double at = l->now, stop = l->now;
    for (int k = 0; k < c; k++) {
        const ts_job *v = &l->r[keys[l->chosen[k]].j];
        double ready = v->start_s + floor > l->now ? v->start_s + floor : l->now;
        at = ready > at ? ready : at;
    }
    for (int k = 0; k < c; k++) {
        double by = at + job_grace(l, &l->r[keys[l->chosen[k]].j]);
        stop = by > stop ? by : stop;
    }
    if (c > 0 && at > l->now) {
        l->young_for = i;
        l->young_at = at;
        l->young_stop = stop;
    }
}

/* The preemption decided for job i: its m victims (l->chosen into keys;
 * move[k] marks a move, move NULL: none) into the decision with their
 * signal and grace, the preemptor table, the reservation of their room if
 * none is held, and job i's reason. */
static void preempt_record(loop *l, int i, const vkey *keys, int m, const bool *move)
{
    ts_sched *s = l->s;
    const ts_job *job = &l->w[i];
    ts_decision *d = l->d;
    double until = l->now;
    for (int k = 0; k < m; k++) {
        int j = keys[l->chosen[k]].j;
        const ts_job *v = &l->r[j];
        l->victim[j] = true;
        double grace = job_grace(l, v);
        d->preempts[d->npreempts++] = (ts_cycle_preempt){
            .victim = j,
            .preemptor = i,
            .signal = v->ckpt_signal > 0 ? v->ckpt_signal : TS_SIGNAL_DEFAULT,
            .grace_s = grace,
            .lost_gpu_s = keys[l->chosen[k]].lost,
            .time_sharing = keys[l->chosen[k]].ts,
            .move = move && move[l->chosen[k]],
            .victim_level = keys[l->chosen[k]].level / LAS_SCALE,
            .preemptor_level = l->js[i].earned / LAS_SCALE,
        };
        if (l->now + grace > until)
            until = l->now + grace;
    }
    d->stats.preempted += m;
    table_add(s, job->id, until + PREEMPTOR_SLACK_S, l, d->npreempts - m);
    /* a moved job goes first too once stopped, so that it restarts on the
     * room planned for it before anyone else takes that room */
    for (int k = 0; move && k < m && s->npre < PREEMPTOR_TABLE_MAX; k++)
        if (move[l->chosen[k]])
            table_add(s, l->r[keys[l->chosen[k]].j].id, until + PREEMPTOR_SLACK_S, l,
                      d->npreempts);
    if (!l->have_res) {
        l->have_res = true;
        l->res_at = until;
        l->res_id = job->id;
        d->reserved = i;
        d->reserved_at_s = until;
        d->pending[i].reserved_at_s = until;
        d->pending[i].estimated_s = until;
        loop_planned_set(d, i, l->plan, job->ntasks, true);
        loop_prefetch_add(l, i, NULL, 0);
        if (blockers_set(s, job, l->plan) == 0)
            s->epoch++;
    }
    double lost = 0.0;
    bool sharing = false, fairly = false, split = false;
    int moved = 0;
    for (int k = 0; k < m; k++) {
        lost += keys[l->chosen[k]].lost;
        sharing = sharing || keys[l->chosen[k]].ts;
        /* a part of a split first level past its step */
        split = split || (keys[l->chosen[k]].ts && keys[l->chosen[k]].level % LAS_SCALE != 0);
        fairly = fairly || keys[l->chosen[k]].fair;
        moved += move && move[l->chosen[k]];
    }
    char by[32], in[32], lost_h[32];
    ts_fmt_time(until, by, sizeof by);
    ts_fmt_duration(until - l->now, in, sizeof in);
    snprintf(lost_h, sizeof lost_h, "%.2f", lost / 3600.0);
    if (moved > 0)
        pend(l, i, TS_PEND_PREEMPTING, "%s: preempting %d job%s, %d of them moved to restart "
             "at once elsewhere so that one node holds it (%s GPU-hours since their "
             "checkpoints); they stop by %s (in %s)",
             l->fair ? "its tenant holds less per unit of weight than a borrower"
                     : "owed its tenant's guarantee",
             m, m == 1 ? "" : "s", moved, lost_h, by, in);
    else if (fairly && !sharing)
        pend(l, i, TS_PEND_PREEMPTING, "fair share: its tenant holds fewer GPUs per unit of "
             "weight than the tenants it borrows from; preempting %d loan%s of theirs (%s "
             "GPU-hours since their checkpoints); they stop by %s (in %s)", m,
             m == 1 ? "" : "s", lost_h, by, in);
    else if (split)
        pend(l, i, TS_PEND_PREEMPTING, "time-sharing: its tenant's first las level overflows "
             "and is split; preempting %d job%s past its first step (%s GPU-hours since their "
             "checkpoints); they stop by %s (in %s)", m, m == 1 ? "" : "s", lost_h, by, in);
    else if (sharing)
        pend(l, i, TS_PEND_PREEMPTING, "time-sharing: preempting %d job%s of a higher las "
             "level than its %d (%s GPU-hours since their checkpoints); they stop by %s "
             "(in %s)", m, m == 1 ? "" : "s", l->js[i].earned / LAS_SCALE, lost_h, by, in);
    else
        pend(l, i, TS_PEND_PREEMPTING, "preempting %d opportunistic job%s (%s GPU-hours "
             "since their checkpoints); they stop by %s (in %s)", m, m == 1 ? "" : "s", lost_h,
             by, in);
}

/* A swap search (job i's quota refuses it; it may time-share its own
 * tenant's jobs of its tier) can only take a job of a higher las level, past
 * the minimum runtime and under the hour limit. The highest such level per
 * tenant and tier is counted at the cycle's first swap search, and for a
 * tenant whose first level is split (its fresh jobs many, each refused by
 * its quota) a search that cannot have a candidate is not made: it would
 * spend the cycle's bound on a scan of the running jobs that finds nothing
 * (on Philly at 32 times its arrivals, two thirds of the largest virtual
 * cluster's swap searches did), leaving none for the jobs behind it that
 * could time-share. Victims chosen later only take candidates away, so the
 * count may say "maybe" where the search then finds none, never the other
 * way round. Only split tenants: made for every tenant, the searches it
 * saves went to time-sharing at the real levels, which cost 54 s of average
 * JCT at 8x under the trigger of 2 and Jain at 32x (0.925, below siloed
 * srtf's 0.933) under the defaults now (docs/simulator.md). */
static bool swap_may_find(loop *l, int i)
{
    const ts_sched_config *cfg = &l->s->cfg;
    if (!l->swap_top) {
        size_t n = (size_t)ts_quota_tenants(l->s->q)->n * TS_TIERS;
        l->swap_top = malloc((n > 0 ? n : 1) * sizeof *l->swap_top);
        if (!l->swap_top)
            return true; /* without the memory, search as before */
        for (size_t k = 0; k < n; k++)
            l->swap_top[k] = -1;
        for (int j = 0; j < l->nr; j++) {
            const ts_job *v = &l->r[j];
            bool split = l->tsplit[v->tenant]; /* its own jobs' limits: victim_ok */
            if (v->stopping || l->victim[j] || v->tier < 0 || v->tier >= TS_TIERS ||
                l->now - v->start_s < min_runtime(cfg, split) ||
                v->preemptions_hour >= per_hour(cfg, split))
                continue;
            int *top = &l->swap_top[(size_t)v->tenant * TS_TIERS + (size_t)v->tier];
            if (l->rlevel[j] > *top)
                *top = l->rlevel[j];
        }
    }
    const jsum *js = &l->js[i];
    if (js->tier < 0 || js->tier >= TS_TIERS)
        return false;
    const int *top = &l->swap_top[(size_t)js->tenant * TS_TIERS];
    /* an opportunistic job of a split tenant may take its guaranteed work
     * too (swap_cross_tier) */
    return top[js->tier] > js->earned ||
           (cfg->las_split_cross_tier && js->tier == TS_TIER_OPPORTUNISTIC &&
            top[TS_TIER_GUARANTEED] > js->earned);
}

/* A level in the memo's key: 2k for level k and 2k + 1 past a split step,
 * as when the cycle doubled its levels (the same key, so the same slots, for
 * every setting that has no mid step), the part past a mid step above bit 40. */
static uint64_t level_key(int earned)
{
    int part = earned % LAS_SCALE;
    uint64_t k = (uint64_t)(2 * (earned / LAS_SCALE) + (part != 0));
    return part > 1 ? k | (uint64_t)part << 40 : k;
}

/* Victims for job i (reclaim by guaranteed work, or time-sharing by a job
 * of a lower las level); true if a preemption was decided. swap: the job's
 * quota is what it lacks, so only its own tenant's jobs of its tier that
 * hold at least what it needs may go (their release makes its room in the
 * quota too). */
bool loop_try_preempt(loop *l, int i, bool swap)
{
    ts_sched *s = l->s;
    const jsum *js = &l->js[i];
    /* time-sharing (swap) takes loans back for guaranteed work only */
    bool others = loop_reclaims(l, i) && (!swap || js->tier == TS_TIER_GUARANTEED);
    /* reclaim_any_tier: an opportunistic job within its guarantee reclaims */
    bool any = others && !swap && js->tier != TS_TIER_GUARANTEED;
    /* searches for jobs within their tenant's guarantee have a bound of
     * their own: time-sharing and starving jobs, ordered first, cannot use
     * up the searches a guarantee needs (at most twice the bound a cycle) */
    int *searches = others ? &l->reclaim_searches : &l->searches;
    /* fair reclaim: a job past its tenant's guarantee (of either tier) may
     * take loans of tenants holding more per unit of weight */
    bool fair = s->cfg.fair_reclaim && !others && !swap && js->gpu &&
                another_borrows(l, js->tenant);
    if (swap && l->tsplit[js->tenant] && !swap_may_find(l, i))
        return false;
    if ((js->tier != TS_TIER_GUARANTEED && !js->las && !any && !fair) || (swap && !js->las) ||
        *searches >= s->cfg.max_preemptors_cycle || s->npre == PREEMPTOR_TABLE_MAX)
        return false;
    const ts_job *job = &l->w[i];
    /* no running job above its level: time-sharing has no victim */
    if ((swap || js->tier != TS_TIER_GUARANTEED) && !any && !fair &&
        l->max_running_level <= js->earned)
        return false;
    l->reclaim_others = others;
    l->fair = fair;
    /* A search that failed fails again for an identical job (same tasks,
     * tenant, tier, class, level, the same right to other tenants' loans):
     * within a cycle candidates only leave (victims chosen) and free room
     * only shrinks; a reservation's blockers do not matter (the search
     * plans on the scratch copy without them), so the entry holds for the
     * whole cycle. Answered from the memo, it costs no search: without
     * it, a tenant's many identical jobs that could take nothing back used
     * up the cycle's searches before another tenant's job that could. */
    /* (a preemptor's room let go while it decides is free room that was
     * not: the memo's failures from before do not hold for it) */
    uint64_t skey = mix(mix(mix(mix(js->key, (uint64_t)js->tenant + 17),
                                (uint64_t)js->tier * 64 + (uint64_t)level_key(js->earned) * 4 +
                                    (uint64_t)swap * 2 + l->reclaim_others),
                            (uint64_t)(int64_t)job->priority + 0x5eed),
                        s->room_freed);
    memo_entry *ms = memo_slot(s, skey);
    if (ms->epoch == l->epoch0 && ms->key == skey && ms->reason == MEMO_SEARCH_FAILED) {
        l->d->stats.memo_hits++;
        return false;
    }
    /* every search that scans the running jobs counts against its bound */
    (*searches)++;
    vkey *keys = malloc((size_t)(l->nr > 0 ? l->nr : 1) * sizeof *keys);
    if (!keys)
        return false;
    int n = preempt_candidates(l, i, swap, keys);
    int m = 0;
    if (n > 0) {
        qsort(keys, (size_t)n, sizeof *keys, cmp_vkey);
        for (int k = 0; k < n; k++) {
            l->pj[k] = (plan_job){&l->r[keys[k].j], l->r[keys[k].j].allocs, 0.0};
            l->lost[k] = keys[k].lost;
        }
        m = plan_victims(s, job, l->pj, l->lost, NULL, n, NULL, 0, l->chosen, l->plan);
    }
    if (swap && m > 0) {
        double freed = 0.0;
        for (int k = 0; k < m; k++)
            freed += ts_sched_job_rate(s, &l->r[keys[l->chosen[k]].j]);
        if (freed < ts_sched_job_rate(s, job) - 1e-9)
            m = 0; /* its room, but not its quota */
    }
    if (fair && m > 0 && !fair_set_holds(l, i, keys, m))
        m = 0;
    bool *move = NULL;
    if (m == 0 && others && !swap && s->cfg.guarantee_moves)
        m = plan_moves(l, i, keys, n, 0.0, &move);
    else if (m == 0 && fair && s->cfg.fair_moves && fair_behind(l, i))
        m = plan_moves(l, i, keys, 0, FAIR_MOVE_MIN_AGE_S, &move); /* on free room alone */
    if (m == 0) {
        if (others && !swap)
            young_loans(l, i, keys, n);
        free(keys);
        free(move);
        *ms = (memo_entry){.key = skey, .epoch = l->epoch0, .reason = MEMO_SEARCH_FAILED};
        return false;
    }
    preempt_record(l, i, keys, m, move);
    free(keys);
    free(move);
    return true;
}
