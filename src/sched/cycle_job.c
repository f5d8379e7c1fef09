/*
 * cycle_job.c - one waiting job's turn in the cycle (cycle_loop.h): the
 * quota checked before placement (refused only if refused on every GPU
 * model it may use), the placement, all or nothing, with a failure
 * remembered for identical jobs until the blockers change, the why arena
 * its reasons go into, then for a job that lacks room a victim search
 * (cycle_preempt.c), a MIG reshape, the reservation or an estimate of when
 * it could start. A started job is bound on the plan's copy at once
 * (tessera/cycle.h), so the next job sees its room taken.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched/cycle_loop.h"
#include "sched/elastic.h"
#include "tessera/fmt.h"

int loop_why_add(loop *l, const char *fmt, ...)
{
    ts_decision *d = l->d;
    if (d->why_cap - d->why_len < TS_CYCLE_WHY_MAX) {
        size_t cap = d->why_cap ? d->why_cap * 2 : 65536;
        char *b = realloc(d->why_buf, cap);
        if (!b)
            return 0;
        d->why_buf = b;
        d->why_cap = cap;
    }
    int off = (int)d->why_len;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(d->why_buf + off, TS_CYCLE_WHY_MAX, fmt, ap);
    va_end(ap);
    if (n < 0)
        n = 0;
    d->why_len += (size_t)(n < TS_CYCLE_WHY_MAX ? n : TS_CYCLE_WHY_MAX - 1) + 1;
    return off;
}

/* Whether job i counts as guaranteed work against other tenants' loans (it
 * takes them back, and is not held off by another tenant's reservation):
 * its tenant, all tiers and the job included, stays within its guarantee,
 * and it is guaranteed work or reclaim_any_tier lets any tier. */
bool loop_reclaims(const loop *l, int i)
{
    return (l->js[i].tier == TS_TIER_GUARANTEED || l->s->cfg.reclaim_any_tier) &&
           loop_within_guarantee(l, i);
}

/* The tier the quota checks a job as: one that reclaims passes as
 * guaranteed work, whatever its own tier. */
static int quota_tier(const loop *l, int i)
{
    const jsum *js = &l->js[i];
    return js->tier == TS_TIER_OPPORTUNISTIC && loop_reclaims(l, i) ? TS_TIER_GUARANTEED : js->tier;
}

/* Quota before placement: refused only if refused on every GPU model the job
 * may land on (exact: any placement is on one of them). */
static bool quota_precheck(loop *l, int i)
{
    ts_sched *s = l->s;
    const ts_job *job = &l->w[i];
    const jsum *js = &l->js[i];
    /* usage only grows within a cycle: a refused job's twins (same tasks,
     * tenant and tier) are refused too */
    uint64_t qkey = mix(mix(js->key, (uint64_t)js->tenant + 11), (uint64_t)js->tier + 5);
    memo_entry *mq = memo_slot(s, qkey);
    if (mq->epoch == s->epoch && mq->key == qkey && mq->reason == TS_PEND_QUOTA) {
        l->d->stats.memo_hits++;
        l->d->pending[i].reason = TS_PEND_QUOTA;
        l->why_off[i] = mq->why_off;
        return false;
    }
    ts_quota_verdict first = {0};
    bool have_first = false;
    /* each model it may use, lowest first; a job without GPUs once, as -1 */
    for (uint32_t may = js->gpu ? js->allowed : 1u; may; may &= may - 1) {
        int m = js->gpu ? __builtin_ctz(may) : -1;
        int64_t demand[TS_RES_DIMS] = {0};
        if (js->mig) {
            if (cycle_job_demand(s, job, NULL, m, demand) != 0) {
                pend(l, i, TS_PEND_INVALID, "tasks: cannot be charged to a quota");
                return false;
            }
        } else {
            demand[TS_RES_CPU] = js->cpu;
            demand[TS_RES_MEM] = js->mem;
            if (m >= 0)
                demand[ts_res_gpu(m)] = js->gpu_milli;
        }
        ts_quota_verdict v;
        if (ts_quota_check(s->q, js->tenant, quota_tier(l, i), demand, &v) != TS_QUOTA_REFUSED)
            return true;
        if (!have_first) {
            first = v;
            have_first = true;
        }
    }
    char buf[TS_CYCLE_WHY_MAX];
    ts_quota_explain(ts_quota_tenants(s->q), &first, buf, sizeof buf);
    pend(l, i, TS_PEND_QUOTA, "%s", buf);
    *mq = (memo_entry){.key = qkey, .epoch = s->epoch, .starts = s->starts,
                       .reason = TS_PEND_QUOTA, .why_off = l->why_off[i]};
    return false;
}

/* Counts a job's GPUs on the nodes it holds, under its tier. */
void loop_node_tier_add(ts_sched *s, const ts_job *job, const ts_alloc *allocs)
{
    if (job->tier != TS_TIER_GUARANTEED && job->tier != TS_TIER_OPPORTUNISTIC)
        return;
    for (int t = 0; t < job->ntasks; t++) {
        if (allocs[t].node < 0 || allocs[t].node >= s->c->nnodes)
            continue;
        uint16_t *n = &s->node_tier[(size_t)allocs[t].node * TS_TIERS + (size_t)job->tier];
        *n = (uint16_t)(*n + allocs[t].ngpu);
    }
}

static int record_start(loop *l, int i, const ts_alloc *allocs)
{
    ts_decision *d = l->d;
    const ts_job *job = &l->w[i];
    if (cycle_grow((void **)&d->alloc_pool, &d->alloc_cap, l->npool + job->ntasks,
                   sizeof *d->alloc_pool) != 0)
        return TS_ENOMEM;
    memcpy(d->alloc_pool + l->npool, allocs, (size_t)job->ntasks * sizeof *allocs);
    l->start_off[d->nstarts] = l->npool;
    l->npool += job->ntasks;
    d->starts[d->nstarts++] = (ts_cycle_start){.job = i, .backfilled = l->have_res};
    d->stats.started++;
    if (l->have_res)
        d->stats.backfilled++;
    return 0;
}

/* Tries to start job i; 1 started, 0 waits (p set), < 0 error. */
static int try_start(loop *l, int i)
{
    ts_sched *s = l->s;
    const ts_job *job = &l->w[i];
    ts_cycle_pending *p = &l->d->pending[i];
    const jsum *js = &l->js[i];
    double limit = js->limit_s;
    bool blocked = l->have_res && l->now + limit > l->res_at;
    if (blocked && s->cfg.guarantee_over_reservation && l->d->reserved >= 0 &&
        l->d->reserved != i && l->w[l->d->reserved].tenant != job->tenant && loop_reclaims(l, i))
        blocked = false;
    if (l->have_res) {
        if (blocked)
            blockers_on(s);
        else
            blockers_off(s);
    }
    uint64_t key = blocked ? mix(js->key, 1) : js->key;
    memo_entry *m = memo_slot(s, key);
    if (m->epoch == s->epoch && m->key == key &&
        (m->reason != TS_PEND_RESERVATION || m->starts == s->starts)) {
        l->d->stats.memo_hits++;
        p->reason = m->reason;
        l->why_off[i] = m->why_off;
        return 0;
    }
    int64_t gpus = js->gpus;
    int64_t free_gpus = ts_gang_index_free_gpus(s->ix, -1);
    int reason = 0;
    char why[TS_CYCLE_WHY_MAX];
    int rc = TS_ENOSPC;
    if (js->whole && gpus > free_gpus + s->blk_gpus) {
        reason = TS_PEND_CAPACITY;
        int w = snprintf(why, sizeof why, "needs %lld whole GPUs, %lld free in the cluster",
                         (long long)gpus, (long long)free_gpus);
        if (s->room_gpus > 0 && w > 0 && (size_t)w < sizeof why)
            snprintf(why + w, sizeof why - (size_t)w, " (%lld more kept for the jobs that "
                     "preempted to free them)", (long long)s->room_gpus);
    } else {
        l->d->stats.placements++;
        rc = cycle_place(s, s->c, s->ix, job, l->tmp, &reason, why, sizeof why);
    }
    if (rc == 0) {
        int64_t demand[TS_RES_DIMS];
        ts_quota_verdict v;
        ts_err e;
        if (cycle_job_demand(s, job, l->tmp, -1, demand) != 0 ||
            ts_quota_check(s->q, job->tenant, quota_tier(l, i), demand, &v) == TS_QUOTA_REFUSED) {
            cycle_unplace(s->c, s->ix, job, l->tmp);
            ts_quota_explain(ts_quota_tenants(s->q), &v, why, sizeof why);
            pend(l, i, TS_PEND_QUOTA, "%s", why);
            return 0;
        }
        if (ts_quota_charge(s->q, job->tenant, job->tier, demand, l->now, &e) != 0) {
            cycle_unplace(s->c, s->ix, job, l->tmp);
            pend(l, i, TS_PEND_QUOTA, "%s", e.msg);
            return 0;
        }
        if (record_start(l, i, l->tmp) != 0 || cycle_ports_add(s, job, l->tmp) != 0)
            return TS_ENOMEM;
        loop_node_tier_add(s, job, l->tmp);
        double dom = 0.0;
        for (int k = 0; k < TS_RES_DIMS; k++)
            if (s->cap[k] > 0 && (double)demand[k] / (double)s->cap[k] > dom)
                dom = (double)demand[k] / (double)s->cap[k];
        l->dom[job->tenant] += dom / ts_quota_tenants(s->q)->t[job->tenant].weight;
        s->starts++;
        p->reason = TS_PEND_NONE;
        l->why_off[i] = 0;
        return 1;
    }
    if (blocked && reason != TS_PEND_INVALID) {
        /* would it fit without the reservation's GPUs held back? */
        blockers_off(s);
        int r2;
        char w2[TS_CYCLE_WHY_MAX];
        if (cycle_place(s, s->c, s->ix, job, l->tmp, &r2, w2, sizeof w2) == 0) {
            cycle_unplace(s->c, s->ix, job, l->tmp);
            reason = TS_PEND_RESERVATION;
            char lim[32], at[32];
            ts_fmt_duration(limit, lim, sizeof lim);
            ts_fmt_time(l->res_at, at, sizeof at);
            snprintf(why, sizeof why, "fits now, but its time limit (%s) runs past %s, "
                     "when job %lld is reserved to start on those GPUs", lim, at,
                     (long long)l->res_id);
        }
        blockers_on(s);
    }
    pend(l, i, reason, "%s", why);
    m->key = key;
    m->epoch = s->epoch;
    m->starts = s->starts;
    m->reason = reason;
    m->why_off = l->why_off[i];
    return 0;
}

/* Reclaim exists to give a tenant back the guarantee it lacks: a guaranteed
 * job takes other tenants' loans only while its tenant, this job and its
 * own loans included, stays within its guarantee on some GPU model the job
 * may use. A tenant that borrows itself takes its own loans back first (they
 * are its victims either way); without this, a tenant holding more than its
 * guarantee took other borrowers' room, and the reservation and victims of
 * tenants below their guarantee with them. */
bool loop_within_guarantee(const loop *l, int i)
{
    const jsum *js = &l->js[i];
    if (!js->gpu)
        return true;
    const ts_tenant *t = &ts_quota_tenants(l->s->q)->t[js->tenant];
    for (uint32_t may = js->allowed; may; may &= may - 1) {
        int k = ts_res_gpu(__builtin_ctz(may));
        if (ts_quota_usage(l->s->q, js->tenant, k) + js->gpu_milli <= t->guaranteed[k])
            return true;
    }
    return false;
}

/* Waiting job i's plan, the distinct nodes of it, into the decision: the
 * reserved job's always, an estimate's while no job holds one. */
void loop_planned_set(ts_decision *d, int i, const ts_alloc *plan, int ntasks, bool hold)
{
    if (!hold && d->planned >= 0)
        return;
    d->planned = i;
    d->nplanned_nodes = 0;
    for (int k = 0; k < ntasks && d->nplanned_nodes < TS_CYCLE_RESERVED_NODES_MAX; k++) {
        bool seen = false;
        for (int q = 0; q < d->nplanned_nodes && !seen; q++)
            seen = d->planned_nodes[q] == plan[k].node;
        if (!seen && plan[k].node >= 0)
            d->planned_nodes[d->nplanned_nodes++] = plan[k].node;
    }
}

/* Under the cap: node added to f once, if it takes work (not drained, its
 * agent registered). */
static void prefetch_node(const ts_sched *s, ts_cycle_prefetch *f, int node, int cap)
{
    bool seen = node < 0 || f->nnodes >= cap || !ts_sched_node_schedulable(s, node);
    for (int q = 0; q < f->nnodes && !seen; q++)
        seen = f->nodes[q] == node;
    if (!seen)
        f->nodes[f->nnodes++] = node;
}

void loop_prefetch_add(loop *l, int i, const plan_job *ends, int n)
{
    ts_decision *d = l->d;
    if (d->nprefetch >= TS_CYCLE_PREFETCH_JOBS)
        return;
    ts_cycle_prefetch *f = &d->prefetch[d->nprefetch++];
    f->job = i;
    f->nnodes = 0;
    for (int k = 0; k < l->w[i].ntasks; k++)
        prefetch_node(l->s, f, l->plan[k].node, TS_CYCLE_RESERVED_NODES_MAX);
    int cap = TS_CYCLE_PREFETCH_FACTOR * f->nnodes;
    cap = cap < TS_CYCLE_RESERVED_NODES_MAX ? cap : TS_CYCLE_RESERVED_NODES_MAX;
    /* nodes with a free GPU now (a job ending beside it makes the room),
     * then those of the running jobs as the plan expects them to end */
    const ts_cluster *c = l->s->c;
    for (int node = 0; node < c->nnodes && f->nnodes < cap; node++)
        if (c->nodes[node].gpus_free > 0)
            prefetch_node(l->s, f, node, cap);
    for (int e = 0; e < n && f->nnodes < cap; e++)
        for (int k = 0; k < ends[e].job->ntasks; k++)
            prefetch_node(l->s, f, ends[e].allocs[k].node, cap);
}

static int cmp_end(const void *a, const void *b)
{
    const plan_job *x = a, *y = b;
    if (x->end_s != y->end_s)
        return x->end_s < y->end_s ? -1 : 1;
    return (x->job->id > y->job->id) - (x->job->id < y->job->id);
}

/* Plans job i's earliest start on the scratch copy; a job that does not fit
 * even there is invalid. hold: it gets the reservation (its planned GPUs are
 * held back from later long jobs); else the plan only says when it could
 * start if nothing else started first. */
static void reserve(loop *l, int i, bool hold)
{
    ts_sched *s = l->s;
    const ts_job *job = &l->w[i];
    ts_decision *d = l->d;
    int n = 0;
    for (int j = 0; j < l->nr; j++) {
        const ts_job *v = &l->r[j];
        double end = v->stopping ? v->stop_by_s
                     : l->victim[j] ? l->now + job_grace(l, v)
                                    : v->start_s + limit_of(l, v);
        l->pj[n++] = (plan_job){v, v->allocs, end > l->now ? end : l->now};
    }
    for (int k = 0; k < d->nstarts; k++) {
        const ts_job *v = &l->w[d->starts[k].job];
        l->pj[n++] = (plan_job){v, d->alloc_pool + l->start_off[k], l->now + limit_of(l, v)};
    }
    qsort(l->pj, (size_t)n, sizeof *l->pj, cmp_end);
    double at;
    ts_cycle_pending *p = &d->pending[i];
    if (plan_reservation(s, job, l->pj, n, l->plan, &at) != 0) {
        char was[TS_CYCLE_WHY_MAX];
        snprintf(was, sizeof was, "%s: %s", ts_pending_name(p->reason), why_of(l, i));
        /* nodes that are down (no agent yet: a controller that just
         * started) or drained are the cluster's still: waiting for them is
         * capacity, not a spec that can never run */
        int down = p->reason != TS_PEND_PREEMPTING ? plan_fits_with_nodes_up(s, job) : 0;
        if (down > 0)
            pend(l, i, TS_PEND_CAPACITY, "fits only once nodes that are down or drained are "
                 "up again (%d of the cluster's %d now) (%s)", down, s->sc->nnodes, was);
        else if (p->reason != TS_PEND_PREEMPTING)
            pend(l, i, TS_PEND_INVALID, "does not fit even on the idle cluster (%s)", was);
        return;
    }
    if (at < l->now)
        at = l->now; /* fits on the emptied cluster with nothing running */
    p->estimated_s = at;
    if (!hold) {
        loop_planned_set(d, i, l->plan, job->ntasks, false);
        loop_prefetch_add(l, i, l->pj, n);
        char was[TS_CYCLE_WHY_MAX];
        snprintf(was, sizeof was, "%s", why_of(l, i));
        char when[32], in[32];
        ts_fmt_time(at, when, sizeof when);
        ts_fmt_duration(at - l->now, in, sizeof in);
        l->why_off[i] = loop_why_add(l, "%s; could start by %s (in %s) as running jobs end", was,
                                when, in);
        return;
    }
    l->have_res = true;
    l->res_at = at;
    l->res_id = job->id;
    d->reserved = i;
    d->reserved_at_s = at;
    p->reserved_at_s = at;
    char was[TS_CYCLE_WHY_MAX];
    snprintf(was, sizeof was, "%s", why_of(l, i));
    char when[32], in[32];
    ts_fmt_time(at, when, sizeof when);
    ts_fmt_duration(at - l->now, in, sizeof in);
    l->why_off[i] = loop_why_add(l, "%s; reserved to start by %s (in %s)", was, when, in);
    loop_planned_set(d, i, l->plan, job->ntasks, true);
    loop_prefetch_add(l, i, l->pj, n);
    if (blockers_set(s, job, l->plan) == 0)
        s->epoch++;
}

/* Reshape before preemption: a MIG job that lacks room waits for idle
 * instances of other profiles to be destroyed (by tesserad after the cycle,
 * through the same planner) rather than preempt running work, when that
 * gives it room. At most max_preemptors_cycle questions a cycle, as victim
 * searches; a failed one is remembered for identical jobs (free room only
 * shrinks within a cycle). True if the job waits for a reshape (p set). */
static bool reshape_first(loop *l, int i)
{
    ts_sched *s = l->s;
    if (l->reshapes >= s->cfg.max_preemptors_cycle)
        return false;
    uint64_t key = mix(l->js[i].key, 0x3e5a9e);
    memo_entry *m = memo_slot(s, key);
    if (m->epoch == l->epoch0 && m->key == key && m->reason == MEMO_RESHAPE_FAILED) {
        l->d->stats.memo_hits++;
        return false;
    }
    l->reshapes++;
    int ngpus = 0;
    if (cycle_mig_reshape(s, &l->w[i], &ngpus) != 1) {
        *m = (memo_entry){.key = key, .epoch = l->epoch0, .reason = MEMO_RESHAPE_FAILED};
        return false;
    }
    pend(l, i, TS_PEND_FRAGMENTATION, "no free MIG instance fits; destroying idle instances "
         "on %d GPU%s makes room, so nothing is preempted", ngpus, ngpus == 1 ? "" : "s");
    return true;
}

/* Extras before victims: GPUs above elastic jobs' minimums are taken back
 * (cycle_elastic, after the ordered pass) before any job is preempted for
 * room. A whole-GPU job that lacks room waits for them, and searches no
 * victims, while the free GPUs and the extras cover it and what earlier
 * jobs of this cycle were promised (counts, not places: a take-back is a
 * requeue at the smaller size, placed again as any job). */
static bool extras_cover(loop *l, int i)
{
    const jsum *js = &l->js[i];
    if (!js->whole || !js->gpu)
        return false;
    if (l->el_npre != l->d->npreempts || l->el_extras < 0) {
        l->el_extras = cycle_elastic_extras(l->r, l->nr, l->victim);
        l->el_npre = l->d->npreempts;
    }
    if (l->el_extras == 0)
        return false;
    int64_t room = ts_gang_index_free_gpus(l->s->ix, -1) + l->el_extras;
    if (room < l->el_owed + js->gpus)
        return false;
    l->el_owed += js->gpus;
    char was[TS_CYCLE_WHY_MAX];
    snprintf(was, sizeof was, "%s", why_of(l, i));
    pend(l, i, l->d->pending[i].reason, "%s; GPUs above elastic jobs' minimums are taken back "
         "for it (before any preemption)", was);
    return true;
}

/* Job i's reclaim search found only loans too young to take back yet
 * (l->young_*): its why (base, what it lacks; the plan's estimate left out)
 * and start estimate say when they may go. */
static void young_loans_why(loop *l, int i, const char *base)
{
    ts_cycle_pending *p = &l->d->pending[i];
    if (p->reason == TS_PEND_INVALID || p->reason == TS_PEND_PREEMPTING)
        return;
    char by[32], in[32], floor[32];
    ts_fmt_time(l->young_at, by, sizeof by);
    ts_fmt_duration(l->young_at - l->now, in, sizeof in);
    ts_fmt_duration(l->s->cfg.reclaim_min_runtime_s, floor, sizeof floor);
    l->why_off[i] = loop_why_add(l, "%s; owed its guarantee: the loans in its way ran under "
                                 "%s (reclaim_min_runtime), may go by %s (in %s)", base, floor,
                                 by, in);
    if (p->estimated_s <= 0.0 || l->young_stop < p->estimated_s)
        p->estimated_s = l->young_stop;
}

int loop_process(loop *l, int i)
{
    ts_cycle_pending *p = &l->d->pending[i];
    if (!quota_precheck(l, i)) {
        if (l->js[i].las && !l->js[i].preemptor)
            loop_try_preempt(l, i, true);
        return 0;
    }
    int rc = try_start(l, i);
    if (rc != 0)
        return rc < 0 ? rc : 0;
    switch (p->reason) {
    case TS_PEND_CAPACITY:
    case TS_PEND_TOPOLOGY:
    case TS_PEND_FRAGMENTATION:
    case TS_PEND_GANG:
    case TS_PEND_CONSTRAINT:
        break;
    default:
        return 0;
    }
    /* a preemptor waits for its victims to stop; once they all have and it
     * still does not fit, another job took that room: it searches again
     * rather than wait out its entry */
    bool again = l->js[i].preemptor && l->s->cfg.preemptor_searches_again &&
                 loop_victims_gone(l, l->w[i].id);
    if (l->js[i].preemptor && !again) {
        char was[TS_CYCLE_WHY_MAX], by[32], in[32];
        snprintf(was, sizeof was, "%s", ts_pending_name(p->reason));
        double until = loop_victims_stop_by(l, l->w[i].id);
        if (until > l->now) { /* when it starts: as its victims' grace ends */
            ts_fmt_time(until, by, sizeof by);
            ts_fmt_duration(until - l->now, in, sizeof in);
            pend(l, i, TS_PEND_PREEMPTING, "waiting for the jobs preempted for it to stop "
                 "(%s); they stop by %s (in %s)", was, by, in);
            p->estimated_s = until;
        } else {
            pend(l, i, TS_PEND_PREEMPTING, "waiting for the jobs preempted for it to stop (%s)",
                 was);
        }
    } else if (l->js[i].mig && reshape_first(l, i)) {
        return 0; /* tesserad reshapes after the cycle; it places at a later one */
    } else if (extras_cover(l, i)) {
        /* no victims: cycle_elastic takes the extras back, so no estimate
         * of when running jobs end either */
        return 0;
    } else {
        loop_try_preempt(l, i, false);
    }
    /* under las the order itself moves a waiting job forward (time-sharing
     * takes room from jobs that attained more; promotion lifts the long
     * waiting): only jobs past the starvation bound hold a reservation,
     * which would otherwise idle GPUs for a job that time-sharing serves */
    /* the first job that may hold the reservation takes it; the next few that
     * lack room are planned without holding anything (their start estimate,
     * and a job that fits nowhere is found invalid), a bounded number a cycle */
    bool hold = !l->have_res &&
                (!l->js[i].las || waited_s(l, &l->w[i]) >= l->s->cfg.starve_after_s);
    char base[TS_CYCLE_WHY_MAX];
    if (l->young_for == i)
        snprintf(base, sizeof base, "%s", why_of(l, i));
    if (hold) {
        reserve(l, i, true);
    } else if (l->plans < ESTIMATES_PER_CYCLE && p->reason != TS_PEND_PREEMPTING) {
        l->plans++;
        reserve(l, i, false);
    }
    if (l->young_for == i)
        young_loans_why(l, i, base);
    return 0;
}
