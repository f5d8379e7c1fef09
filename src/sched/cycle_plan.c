/*
 * cycle_plan.c - what-if planning on a scratch copy of the cluster, and the
 * blockers that hold a reservation's GPUs on the real one.
 *
 * The scratch copy is the real cluster's nodes (same topology) with its own
 * gang index. Before each plan it is brought in step node by node: a node is
 * copied again only if the real one changed since (version stamp) or a plan
 * touched the copy, so a plan costs O(nodes) compares plus what changed. At
 * most one reservation and 2 * cfg.max_preemptors_cycle victim searches a
 * cycle (half of them for jobs within their tenant's guarantee).
 *
 * Reservation: release the running jobs in order of their end (time limit,
 * or the end of a stopping job's grace) and try the job after each release
 * that leaves enough free GPUs; the first success is its time and GPUs.
 * After PLAN_DENSE_TRIES failed tries only every PLAN_SPARSE_STEP-th release
 * is tried (and the last): the time found may then be later than the
 * earliest, which only lets more short jobs backfill; the job still fits at
 * that time on those GPUs, which is what the reservation promises.
 *
 * Victims: release the candidates in the caller's order of preference until
 * the job fits, then give back, most lost work first, every victim the job
 * can do without. The result is minimal (no victim can be spared) though not
 * necessarily the least lost work of all sets; the greedy order puts the
 * cheap victims of the most over-share tenant first. A candidate marked as a
 * move counts as released only if, the job placed, it fits again on what is
 * left (it restarts there at once): the test of every step then places the
 * job and the moves, O(moves) placements more.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched/cycle_internal.h"

static bool room_apply(ts_sched *s);

#define PLAN_DENSE_TRIES 64
#define PLAN_SPARSE_STEP 16

/* The scratch copy brought in step with the real one, with the room held
 * there (a victim search: it is no one else's to count on) or free (a
 * reservation's plan: its owner starts and frees it before long). */
static int scratch_sync(ts_sched *s, bool room)
{
    int n = s->c->nnodes;
    if (!s->sync_ver) {
        s->sync_ver = calloc((size_t)n, sizeof *s->sync_ver);
        s->sdirty = malloc((size_t)n);
        if (!s->sync_ver || !s->sdirty)
            return TS_ENOMEM;
        memset(s->sdirty, 1, (size_t)n);
    }
    bool was_on = s->blk_on;
    if (was_on)
        blockers_off(s);
    s->room_paused = !room;
    room_apply(s);
    cycle_ports_scratch(s, NULL, false); /* every holder bound again, as on the real one */
    bool fresh = s->six == NULL;
    for (int i = 0; i < n; i++) {
        const ts_node *real = &s->c->nodes[i];
        if (!s->sdirty[i] && real->version == s->sync_ver[i])
            continue;
        s->sc->nodes[i] = *real;
        s->sync_ver[i] = real->version;
        s->sdirty[i] = 0;
        if (!fresh)
            ts_gang_index_node_changed(s->six, i);
    }
    s->room_paused = false;
    room_apply(s);
    if (was_on)
        blockers_on(s);
    if (fresh) {
        ts_err err;
        s->six = ts_gang_index_new(s->sc, &err);
        for (int i = 0; s->six && i < n; i++)
            if (!ts_gang_index_node_enabled(s->ix, i))
                ts_gang_index_node_enable(s->six, i, false);
    }
    return s->six ? 0 : TS_ENOMEM;
}

static void mark_dirty(ts_sched *s, const ts_job *job, const ts_alloc *allocs)
{
    for (int i = 0; i < job->ntasks; i++)
        s->sdirty[allocs[i].node] = 1;
}

static void scratch_release(ts_sched *s, const plan_job *p)
{
    mark_dirty(s, p->job, p->allocs);
    cycle_unplace(s->sc, s->six, p->job, p->allocs);
    if (s->nhports > 0)
        cycle_ports_scratch(s, p->job, true);
}

static int scratch_rebind(ts_sched *s, const plan_job *p)
{
    for (int i = 0; i < p->job->ntasks; i++) {
        const ts_alloc *a = &p->allocs[i];
        int rc = ts_node_assign(&s->sc->nodes[a->node], &p->job->tasks[i], a);
        if (rc != 0)
            return rc;
        ts_gang_index_node_changed(s->six, a->node);
    }
    if (s->nhports > 0)
        cycle_ports_scratch(s, p->job, false);
    return 0;
}

/* Does job fit on the scratch cluster now? On success plan (may be NULL)
 * gets the placement, which is undone again. */
static bool scratch_fits(ts_sched *s, const ts_job *job, ts_alloc *plan, ts_alloc *tmp)
{
    int reason;
    char why[TS_CYCLE_WHY_MAX];
    if (cycle_job_gpus(job) > 0 && ts_gang_index_free_gpus(s->six, -1) < cycle_job_gpus(job) &&
        job->tasks[0].mig_profile < 0 && job->tasks[0].gpu_milli >= TS_MILLI_PER_GPU)
        return false;
    if (cycle_place(s, s->sc, s->six, job, tmp, &reason, why, sizeof why) != 0)
        return false;
    mark_dirty(s, job, tmp);
    if (plan)
        memcpy(plan, tmp, (size_t)job->ntasks * sizeof *tmp);
    cycle_unplace(s->sc, s->six, job, tmp);
    return true;
}

static bool job_wants_mig(const ts_job *job)
{
    for (int i = 0; i < job->ntasks; i++)
        if (job->tasks[i].mig_profile >= 0)
            return true;
    return false;
}

/* Removes every idle MIG instance from the scratch copy. */
static void strip_idle_mig(ts_sched *s)
{
    for (int i = 0; i < s->sc->nnodes; i++) {
        ts_node *n = &s->sc->nodes[i];
        bool changed = false;
        for (int g = 0; g < n->ngpu; g++) {
            ts_mig_layout *l = &n->gpu[g].mig;
            if (n->gpu[g].mode != TS_GPU_MIG)
                continue;
            int k = 0;
            for (int j = 0; j < l->n; j++)
                if (l->inst[j].busy)
                    l->inst[k++] = l->inst[j];
            changed = changed || k != l->n;
            l->n = k;
        }
        if (changed) {
            s->sdirty[i] = 1;
            ts_gang_index_node_changed(s->six, i);
        }
    }
}

int plan_reservation(ts_sched *s, const ts_job *job, const plan_job *ends, int nends,
                     ts_alloc *plan, double *at_s)
{
    if (scratch_sync(s, false) != 0)
        return TS_ENOMEM;
    ts_alloc *tmp = malloc((size_t)job->ntasks * sizeof *tmp);
    if (!tmp)
        return TS_ENOMEM;
    int tries = 0, rc = TS_ENOSPC;
    for (int i = 0; i < nends; i++) {
        scratch_release(s, &ends[i]);
        if (i + 1 < nends && ends[i + 1].end_s == ends[i].end_s)
            continue;
        if (tries >= PLAN_DENSE_TRIES && i % PLAN_SPARSE_STEP != 0 && i + 1 < nends)
            continue;
        tries++;
        if (scratch_fits(s, job, plan, tmp)) {
            *at_s = ends[i].end_s;
            rc = 0;
            break;
        }
    }
    if (rc != 0 && nends >= 0 && job_wants_mig(job)) {
        /* Dynamic MIG (mig_plan.h): idle instances of other profiles can be
         * destroyed, so on the emptied copy a MIG GPU holds any layout. */
        strip_idle_mig(s);
        if (scratch_fits(s, job, plan, tmp)) {
            *at_s = nends > 0 ? ends[nends - 1].end_s : 0.0;
            rc = 0;
        }
    }
    free(tmp);
    return rc;
}

int plan_fits_with_nodes_up(ts_sched *s, const ts_job *job)
{
    int n = s->sc->nnodes, down = 0;
    for (int i = 0; i < n; i++)
        down += !ts_gang_index_node_enabled(s->six, i);
    if (down == 0)
        return 0;
    ts_alloc *tmp = malloc((size_t)job->ntasks * sizeof *tmp);
    if (!tmp)
        return 0;
    bool *was = calloc((size_t)n, sizeof *was);
    for (int i = 0; was && i < n; i++)
        if (!(was[i] = ts_gang_index_node_enabled(s->six, i)))
            ts_gang_index_node_enable(s->six, i, true);
    bool fits = was && scratch_fits(s, job, NULL, tmp);
    for (int i = 0; was && i < n; i++)
        if (!was[i])
            ts_gang_index_node_enable(s->six, i, false);
    free(was);
    free(tmp);
    return fits ? down : 0;
}

static int cmp_lost_desc(const void *a, const void *b, const double *lost)
{
    int x = *(const int *)a, y = *(const int *)b;
    if (lost[x] != lost[y])
        return lost[x] > lost[y] ? -1 : 1;
    return (x > y) - (x < y);
}

/* The moves' test: with job placed on the scratch copy as it is (the
 * victims released), does every released candidate marked move (gone[k] &&
 * move[k]) fit again on what is left? The copy is left as it was. */
static bool moves_fit(ts_sched *s, const ts_job *job, const plan_job *cand, const bool *move,
                      const bool *gone, int n, ts_alloc *tmp)
{
    int reason;
    char why[TS_CYCLE_WHY_MAX];
    if (cycle_place(s, s->sc, s->six, job, tmp, &reason, why, sizeof why) != 0)
        return false;
    mark_dirty(s, job, tmp);
    ts_alloc *moved = malloc((size_t)(n > 0 ? n : 1) * sizeof *moved);
    int *owner = malloc((size_t)(n > 0 ? n : 1) * sizeof *owner);
    int placed = 0;
    bool ok = moved && owner;
    for (int k = 0; ok && k < n; k++) {
        if (!gone[k] || !move[k])
            continue;
        const ts_job *v = cand[k].job;
        if (v->ntasks != 1 ||
            cycle_place(s, s->sc, s->six, v, &moved[placed], &reason, why, sizeof why) != 0) {
            ok = false;
            break;
        }
        mark_dirty(s, v, &moved[placed]);
        owner[placed++] = k;
    }
    while (placed-- > 0)
        cycle_unplace(s->sc, s->six, cand[owner[placed]].job, &moved[placed]);
    cycle_unplace(s->sc, s->six, job, tmp);
    free(moved);
    free(owner);
    return ok;
}

/* job fits on the copy, and the released moves fit again around it */
static bool victims_fit(ts_sched *s, const ts_job *job, const plan_job *cand, const bool *move,
                        const bool *gone, int n, ts_alloc *plan, ts_alloc *tmp)
{
    if (!scratch_fits(s, job, plan, tmp))
        return false;
    bool any = false;
    for (int k = 0; move && k < n && !any; k++)
        any = gone[k] && move[k];
    return !any || moves_fit(s, job, cand, move, gone, n, tmp);
}

int plan_victims(ts_sched *s, const ts_job *job, const plan_job *cand, const double *lost,
                 const bool *move, int n, const plan_job *stopping, int nstopping, int *chosen,
                 ts_alloc *plan)
{
    if (n == 0 || scratch_sync(s, true) != 0)
        return 0;
    ts_alloc *tmp = malloc((size_t)job->ntasks * sizeof *tmp);
    bool *gone = calloc((size_t)n, sizeof *gone);
    if (!tmp || !gone) {
        free(tmp);
        free(gone);
        return 0;
    }
    for (int i = 0; i < nstopping; i++)
        scratch_release(s, &stopping[i]);
    int k = 0;
    bool fits = false;
    for (int i = 0; i < n && !fits; i++) {
        scratch_release(s, &cand[i]);
        gone[i] = true;
        chosen[k++] = i;
        fits = victims_fit(s, job, cand, move, gone, n, NULL, tmp);
    }
    if (!fits) {
        free(tmp);
        free(gone);
        return 0;
    }
    /* give back what is not needed, the most lost work first */
    for (int pass = 0; pass < k; pass++) {
        int best = -1;
        for (int j = 0; j < k; j++)
            if (chosen[j] >= 0 && (best < 0 || cmp_lost_desc(&chosen[j], &chosen[best], lost) < 0))
                best = j;
        int c = chosen[best];
        chosen[best] = -1 - c; /* visited, provisionally kept */
        if (scratch_rebind(s, &cand[c]) != 0) {
            scratch_release(s, &cand[c]);
            continue;
        }
        gone[c] = false;
        if (victims_fit(s, job, cand, move, gone, n, NULL, tmp)) {
            chosen[best] = INT32_MIN; /* spared */
        } else {
            scratch_release(s, &cand[c]);
            gone[c] = true;
        }
    }
    int m = 0;
    for (int j = 0; j < k; j++)
        if (chosen[j] != INT32_MIN)
            chosen[m++] = -1 - chosen[j];
    if (!victims_fit(s, job, cand, move, gone, n, plan, tmp))
        m = 0; /* cannot happen: the pruned set was tested last */
    free(tmp);
    free(gone);
    return m;
}

/* ---- blockers ------------------------------------------------------------ */

int blockers_set(ts_sched *s, const ts_job *job, const ts_alloc *plan)
{
    blockers_clear(s);
    if (job->ntasks > s->blk_cap) {
        blocker *b = realloc(s->blk, (size_t)job->ntasks * sizeof *b);
        if (!b)
            return TS_ENOMEM;
        s->blk = b;
        s->blk_cap = job->ntasks;
    }
    for (int i = 0; i < job->ntasks; i++) {
        blocker *b = &s->blk[i];
        memset(b, 0, sizeof *b);
        b->alloc = plan[i]; /* the plan; blockers_on derives the held part */
        b->req.num_gpu = -1; /* not bound */
    }
    s->nblk = job->ntasks;
    return 0;
}

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* Holds b's currently free part on the copy: its whole GPUs that are idle,
 * and the CPU and memory free there up to its own; the GPUs held. */
static int blocker_hold(ts_sched *s, blocker *b)
{
    const ts_alloc *p = &b->alloc;
    ts_node *n = &s->c->nodes[p->node];
    ts_request r = {.mig_profile = -1};
    ts_alloc a;
    memset(&a, 0, sizeof a);
    a.node = p->node;
    a.mig_profile = -1;
    a.mig_start = -1;
    for (int k = 0; k < p->ngpu && p->mig_profile < 0 && p->gpu_milli >= TS_MILLI_PER_GPU; k++) {
        const ts_gpu *g = &n->gpu[p->gpu[k]];
        if (g->mode != TS_GPU_MIG && g->milli_used == 0 && g->ntasks == 0)
            a.gpu[a.ngpu++] = p->gpu[k];
    }
    int64_t cpu = p->cpu_milli, mem = p->mem_mib;
    if (b->room) {
        /* a preemptor's room: what its stopped victims freed, their CPU and
         * memory in step with their GPUs (the free CPU beside a victim that
         * still runs is not its to hold) */
        if (a.ngpu == 0)
            return 0;
        cpu = cpu * a.ngpu / p->ngpu;
        mem = mem * a.ngpu / p->ngpu;
    }
    r.num_gpu = a.ngpu;
    r.gpu_milli = a.ngpu > 0 ? TS_MILLI_PER_GPU : 0;
    r.cpu_milli = min64(cpu, n->cpu_milli - n->cpu_used);
    r.mem_mib = min64(mem, n->mem_mib - n->mem_used);
    a.gpu_milli = r.gpu_milli;
    a.cpu_milli = r.cpu_milli;
    a.mem_mib = r.mem_mib;
    a.shape = (int8_t)ts_request_shape(&r);
    b->req.num_gpu = -1;
    if (a.ngpu == 0 && r.cpu_milli <= 0 && r.mem_mib <= 0)
        return 0;
    if (ts_node_assign(n, &r, &a) != 0)
        return 0;
    ts_gang_index_node_changed(s->ix, p->node);
    b->req = r;
    b->held = a;
    return a.ngpu;
}

/* Lets go of what b holds; the GPUs let go. */
static int blocker_release(ts_sched *s, blocker *b)
{
    if (b->req.num_gpu < 0)
        return 0;
    ts_node_release(&s->c->nodes[b->held.node], &b->held);
    ts_gang_index_node_changed(s->ix, b->held.node);
    b->req.num_gpu = -1;
    return b->held.ngpu;
}

void blockers_on(ts_sched *s)
{
    if (s->blk_on)
        return;
    s->blk_on = true;
    for (int i = 0; i < s->nblk; i++)
        s->blk_gpus += blocker_hold(s, &s->blk[i]);
}

void blockers_off(ts_sched *s)
{
    if (!s->blk_on)
        return;
    s->blk_on = false;
    s->blk_gpus = 0;
    for (int i = s->nblk - 1; i >= 0; i--)
        blocker_release(s, &s->blk[i]);
}

void blockers_clear(ts_sched *s)
{
    blockers_off(s);
    s->nblk = 0;
}

/* ---- room ---------------------------------------------------------------- */

int room_add(ts_sched *s, int64_t owner, const preemptor_room *r)
{
    if (r->node < 0 || r->node >= s->c->nnodes)
        return 0;
    if (s->nroom == s->room_cap) {
        int cap = s->room_cap ? 2 * s->room_cap : 64;
        blocker *b = realloc(s->room, (size_t)cap * sizeof *b);
        if (!b)
            return TS_ENOMEM;
        s->room = b;
        s->room_cap = cap;
    }
    blocker *b = &s->room[s->nroom++];
    memset(b, 0, sizeof *b);
    b->alloc.node = r->node;
    b->alloc.mig_profile = -1;
    b->alloc.mig_start = -1;
    b->alloc.gpu_milli = TS_MILLI_PER_GPU;
    for (int g = 0; g < TS_NODE_MAX_GPUS; g++)
        if (r->gpus >> g & 1)
            b->alloc.gpu[b->alloc.ngpu++] = (int8_t)g;
    b->alloc.cpu_milli = r->cpu_milli;
    b->alloc.mem_mib = r->mem_mib;
    b->req.num_gpu = -1;
    b->owner = owner;
    b->want = true;
    b->room = true;
    s->room_gpus += blocker_hold(s, b);
    return 0;
}

/* Held as wanted, or all let go while paused. */
static bool room_apply(ts_sched *s)
{
    bool freed = false;
    for (int i = 0; i < s->nroom; i++) {
        blocker *b = &s->room[i];
        bool hold = b->want && !s->room_paused;
        if (hold && b->req.num_gpu < 0) {
            s->room_gpus += blocker_hold(s, b);
        } else if (!hold && b->req.num_gpu >= 0) {
            s->room_gpus -= blocker_release(s, b);
            freed = true;
        }
    }
    return freed;
}

void room_want(ts_sched *s, int64_t owner, bool want)
{
    bool any = false;
    for (int i = 0; i < s->nroom; i++)
        if (s->room[i].owner == owner && s->room[i].want != want) {
            s->room[i].want = want;
            any = true;
        }
    /* the reservation's blockers are held again as a job needs them: let
     * them go first, so they never take what the room wants back */
    if (any) {
        blockers_off(s);
        if (room_apply(s)) {
            s->epoch++;
            s->room_freed++;
        }
    }
}

void room_clear(ts_sched *s)
{
    for (int i = s->nroom - 1; i >= 0; i--)
        s->room_gpus -= blocker_release(s, &s->room[i]);
    s->nroom = 0;
    s->room_paused = false;
}
