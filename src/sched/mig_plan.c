/*
 * mig_plan.c - dynamic MIG: the planner that destroys idle MIG instances so
 * waiting MIG requests fit, and the helper that writes its changes into a
 * cluster.
 *
 * The planner works on a copy-on-write overlay of the cluster: a node is
 * copied the first time the plan places an instance on it or cuts one of its
 * GPUs, so a call costs one int per node plus the nodes it touches. The
 * overlay always shows what the shell will see: the cluster with the changes
 * so far applied, and the demand so far placed in order, each instance where
 * ts_mig_plan_node puts it, bound (busy) so that later demand never counts on
 * the same room and no cut removes what earlier demand relies on. Each
 * demanded instance, in order, is placed if it fits; if it fits nowhere, the
 * best cuts (the fewest idle instances removed from one GPU, see cut_better)
 * are tried in turn, each verified by rebuilding the overlay from the
 * cluster with the cut added: every earlier demand must still place at least
 * as often as before (a new hole can attract an earlier instance away from
 * the room it used) and this instance must place. The first cut that passes
 * is kept; so a plan never serves an earlier demand less to serve a later
 * one, and every change serves something. Rebuilds are bounded by
 * CUT_TRIES per allowed change.
 * A GPU's layout has at most 7 instances on 8 slots, so a cut is found per
 * allowed start: the instances overlapping the new instance's slots must go
 * (all idle, or that start is out), and nothing else has to (the per-profile
 * limits follow from the start masks; the one +me limit only matters for a
 * +me request, which would have taken an idle +me instead).
 */
#include "tessera/mig_plan.h"

#include <assert.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tessera/grow.h"

#define PROFILE_ID_SPAN 32 /* profile ids (0..20) index bit masks */
#define OVERLAY_INITIAL_CAP 8
/* Cuts tried for one instance, and verifications per allowed change. */
#define CUT_TRIES 4

/* ---- the overlay -------------------------------------------------------- */

typedef struct plan {
    const ts_cluster *c;
    const bool *excluded;
    bool idle_gpus_only;
    int *slot;       /* per node: index into copy, -1 = not copied; NULL = read-only */
    ts_node *copy;   /* touched nodes */
    int *node_of;    /* copy index -> node index */
    int ncopy, capcopy;
    ts_mig_change *out;
    size_t nout, k;  /* changes made, the most allowed */
    size_t rebuilds_left; /* verifications of tentative cuts still allowed */
} plan;

static const ts_node *plan_node(const plan *p, int i)
{
    if (p->slot && p->slot[i] >= 0)
        return &p->copy[p->slot[i]];
    return &p->c->nodes[i];
}

/* The writable copy of node i (made on first use); NULL when out of memory.
 * The pointer is valid until the next plan_touch. */
static ts_node *plan_touch(plan *p, int i)
{
    if (p->slot[i] >= 0)
        return &p->copy[p->slot[i]];
    ts_block_part parts[] = {TS_GROW_PART(p->copy), TS_GROW_PART(p->node_of)};
    if (ts_grow_parts(parts, 2, &p->capcopy, p->ncopy + 1, OVERLAY_INITIAL_CAP) != 0)
        return NULL;
    p->copy[p->ncopy] = p->c->nodes[i];
    p->node_of[p->ncopy] = i;
    p->slot[i] = p->ncopy;
    return &p->copy[p->ncopy++];
}

static void plan_reset(plan *p)
{
    for (int k = 0; k < p->ncopy; k++)
        p->slot[p->node_of[k]] = -1;
    p->ncopy = 0;
}

/* ---- where a request goes ---------------------------------------------- */

/* The node's MIG geometry if it could take r by model, CPU and memory, else
 * TS_MIG_NONE. */
static int node_admits(const ts_node *n, const ts_request *r)
{
    if (n->model < 0 || n->mig_gpus == 0)
        return TS_MIG_NONE;
    if (r->model_mask && !((r->model_mask >> n->model) & 1u))
        return TS_MIG_NONE;
    if (n->cpu_milli - n->cpu_used < r->cpu_milli || n->mem_mib - n->mem_used < r->mem_mib)
        return TS_MIG_NONE;
    const ts_gpu_model_info *m = ts_gpu_model_get(n->model);
    return m ? m->mig_geometry : TS_MIG_NONE;
}

static bool has_idle(const ts_gpu *g, int profile)
{
    for (int k = 0; k < g->mig.n; k++)
        if (g->mig.inst[k].profile_id == profile && !g->mig.inst[k].busy)
            return true;
    return false;
}

static unsigned slot_bits(int start, int size)
{
    return ((1u << size) - 1u) << start;
}

/* Memory slots the layout's instances occupy, as a bit mask. */
static unsigned used_slots(int geo, const ts_mig_layout *l)
{
    unsigned used = 0;
    for (int k = 0; k < l->n; k++) {
        const ts_mig_profile *q = ts_mig_profile_get(geo, l->inst[k].profile_id);
        if (q)
            used |= slot_bits(l->inst[k].start, q->mem_slices);
    }
    return used;
}

static int free_slices(int geo, const ts_mig_layout *l)
{
    unsigned used = used_slots(geo, l);
    int n = 0;
    for (int s = 0; s < TS_MIG_MEM_SLICES; s++)
        n += !(used & (1u << s));
    return n;
}

static bool has_room(int geo, const ts_mig_layout *l, const ts_mig_profile *p)
{
    for (int s = 0; s < TS_MIG_MEM_SLICES; s++)
        if ((p->start_mask & (1u << s)) && ts_mig_can_place(geo, l, p->id, s))
            return true;
    return false;
}

/* Node i as planned (*n), its MIG geometry for r (*geo) and r's profile
 * there; NULL when the node is excluded or cannot take r. */
static const ts_mig_profile *node_profile(const plan *p, int i, const ts_request *r,
                                          const ts_node **n, int *geo)
{
    if (p->excluded && p->excluded[i])
        return NULL;
    *n = plan_node(p, i);
    *geo = node_admits(*n, r);
    return ts_mig_profile_get(*geo, r->mig_profile);
}

/* A walk over the MIG GPUs (node i, GPU j) of the nodes that admit r's
 * profile (prof, in geometry geo on node n): start at {.j = -1}. */
typedef struct mig_walk {
    int i, j, geo;
    const ts_node *n;
    const ts_mig_profile *prof;
} mig_walk;

/* The walk's next GPU; false after the last. */
static bool mig_walk_next(const plan *p, const ts_request *r, mig_walk *w)
{
    while (w->i < p->c->nnodes) {
        if (w->j < 0 && !(w->prof = node_profile(p, w->i, r, &w->n, &w->geo))) {
            w->i++;
            continue;
        }
        while (++w->j < w->n->ngpu)
            if (w->n->gpu[w->j].mode == TS_GPU_MIG)
                return true;
        w->i++;
        w->j = -1;
    }
    return false;
}

/* Rule (also ts_mig_plan_node): an idle instance of the profile anywhere
 * first, lowest node; else the GPU with room and the fewest free memory
 * slices (best fit keeps big holes for big requests), lowest node on ties.
 * Within the node ts_node_choose_gpus then picks the GPU and start. */
static int pick_node(const plan *p, const ts_request *r)
{
    int best = TS_ENOSPC, best_free = INT_MAX;
    for (mig_walk w = {.j = -1}; mig_walk_next(p, r, &w);) {
        const ts_gpu *g = &w.n->gpu[w.j];
        if (has_idle(g, r->mig_profile))
            return w.i;
        int f = free_slices(w.geo, &g->mig);
        if (f < w.prof->mem_slices || f >= best_free)
            continue;
        if (has_room(w.geo, &g->mig, w.prof)) {
            best = w.i;
            best_free = f;
        }
    }
    return best;
}

/* Binds one instance of r on node i of the overlay: 0, TS_ENOSPC, TS_ENOMEM. */
static int plan_place(plan *p, int i, const ts_request *r)
{
    ts_node *n = plan_touch(p, i);
    if (!n)
        return TS_ENOMEM;
    ts_alloc a;
    if (ts_node_choose_gpus(n, r, &a) != 0)
        return TS_ENOSPC;
    a.node = i;
    return ts_node_assign(n, r, &a) == 0 ? 0 : TS_ENOSPC;
}

/* ---- cuts --------------------------------------------------------------- */

typedef struct cut {
    int node, gpu;
    int count;      /* instances removed */
    int demanded;   /* of which other waiting demand wants the profile */
    int slices;     /* memory slices they held */
    int carve;      /* instances on the GPU now */
    ts_mig_instance rm[TS_MIG_MAX_INSTANCES]; /* the instances removed */
} cut;

/* Within one GPU: fewest removed, then fewest demanded, then fewest memory
 * slices torn down; the first start found (lowest) wins remaining ties. */
static bool cut_better_on_gpu(const cut *a, const cut *b)
{
    if (a->count != b->count)
        return a->count < b->count;
    if (a->demanded != b->demanded)
        return a->demanded < b->demanded;
    return a->slices < b->slices;
}

/* Between GPUs: fewest removed, then fewest demanded, then the GPU already
 * most carved up (most instances); GPUs come in node, GPU order, so the
 * lowest index wins remaining ties. */
static bool cut_better(const cut *a, const cut *b)
{
    if (a->count != b->count)
        return a->count < b->count;
    if (a->demanded != b->demanded)
        return a->demanded < b->demanded;
    return a->carve > b->carve;
}

/* The best cut on one GPU for profile p; false when every start is blocked
 * by a busy instance. wanted: profile ids (bits) other demand waits for. */
static bool gpu_cut(int geo, const ts_gpu *g, const ts_mig_profile *p, uint32_t wanted,
                    cut *out)
{
    bool found = false;
    for (int s = 0; s < TS_MIG_MEM_SLICES; s++) {
        if (!(p->start_mask & (1u << s)))
            continue;
        unsigned span = slot_bits(s, p->mem_slices);
        ts_mig_layout rest = {.n = 0};
        cut c = {.carve = g->mig.n};
        bool blocked = false;
        for (int k = 0; k < g->mig.n && !blocked; k++) {
            const ts_mig_instance *in = &g->mig.inst[k];
            const ts_mig_profile *q = ts_mig_profile_get(geo, in->profile_id);
            if (!q) {
                blocked = true; /* not a layout we understand: leave it alone */
            } else if (slot_bits(in->start, q->mem_slices) & span) {
                blocked = in->busy;
                c.rm[c.count++] = *in;
                c.slices += q->mem_slices;
                c.demanded += (int)((wanted >> in->profile_id) & 1u);
            } else {
                rest.inst[rest.n++] = *in;
            }
        }
        if (blocked || c.count == 0 || !ts_mig_can_place(geo, &rest, p->id, s))
            continue;
        if (!found || cut_better_on_gpu(&c, out)) {
            *out = c;
            found = true;
        }
    }
    return found;
}

static int change_of(const plan *p, int node, int gpu)
{
    for (size_t k = 0; k < p->nout; k++)
        if (p->out[k].node == node && p->out[k].gpu == gpu)
            return (int)k;
    return -1;
}

/* The CUT_TRIES best cuts for r on the overlay, best first (one per GPU);
 * once K changes exist only GPUs already changed qualify. wanted[m]: profile
 * bits other demand wants on model m. Returns how many were found. */
static int find_cuts(const plan *p, const ts_request *r, const uint32_t *wanted,
                     cut best[CUT_TRIES])
{
    int nbest = 0;
    bool may_add = p->nout < p->k;
    for (mig_walk w = {.j = -1}; mig_walk_next(p, r, &w);) {
        int i = w.i, j = w.j;
        const ts_gpu *g = &w.n->gpu[j];
        if (g->mig.n == 0 || (!may_add && change_of(p, i, j) < 0))
            continue;
        /* as the GPU is now, not after this plan's own placements */
        if (p->idle_gpus_only && p->c->nodes[i].gpu[j].ntasks > 0)
            continue;
        cut c;
        if (!gpu_cut(w.geo, g, w.prof, wanted[w.n->model], &c))
            continue;
        c.node = i;
        c.gpu = j;
        /* insertion into the short list; equal keys keep index order */
        int at = nbest;
        while (at > 0 && cut_better(&c, &best[at - 1]))
            at--;
        if (at >= CUT_TRIES)
            continue;
        int last = nbest < CUT_TRIES ? nbest : CUT_TRIES - 1;
        memmove(&best[at + 1], &best[at], (size_t)(last - at) * sizeof best[0]);
        best[at] = c;
        if (nbest < CUT_TRIES)
            nbest++;
    }
    return nbest;
}

static bool same_instance(const ts_mig_instance *a, const ts_mig_instance *b)
{
    return a->profile_id == b->profile_id && a->start == b->start;
}

/* What a tentative cut overwrote, to take it back. */
typedef struct cut_undo {
    int change;            /* index in out */
    bool appended;         /* the change is new */
    ts_mig_change before;  /* else its previous value */
} cut_undo;

/* Records the cut in its GPU's change (made on first cut). The removed
 * instances are idle on the overlay, hence untouched since planning began
 * and still in the change's layout. */
static void cut_record(plan *p, const cut *ct, int demand, cut_undo *undo)
{
    int ch = change_of(p, ct->node, ct->gpu);
    undo->appended = ch < 0;
    if (ch < 0) {
        assert(p->nout < p->k);
        ts_mig_change *nc = &p->out[p->nout];
        memset(nc, 0, sizeof *nc);
        nc->node = ct->node;
        nc->gpu = ct->gpu;
        nc->layout = p->c->nodes[ct->node].gpu[ct->gpu].mig;
        nc->first_demand = demand;
        ch = (int)p->nout++;
    } else {
        undo->before = p->out[ch];
    }
    undo->change = ch;
    ts_mig_change *chg = &p->out[ch];
    for (int k = 0; k < ct->count; k++) {
        int at = -1;
        for (int m = 0; m < chg->layout.n; m++)
            if (same_instance(&chg->layout.inst[m], &ct->rm[k]))
                at = m;
        assert(at >= 0 && !chg->layout.inst[at].busy);
        if (at < 0)
            continue;
        memmove(&chg->layout.inst[at], &chg->layout.inst[at + 1],
                (size_t)(chg->layout.n - at - 1) * sizeof chg->layout.inst[0]);
        chg->layout.n--;
        chg->removed[chg->nremoved++] = ct->rm[k];
    }
}

static void cut_undo_apply(plan *p, const cut_undo *undo)
{
    if (undo->appended)
        p->nout--;
    else
        p->out[undo->change] = undo->before;
}

/* ---- demand bookkeeping -------------------------------------------------- */

/* waiting[m][id]: instances of profile id still wanted on model m. */
typedef struct wants {
    int64_t waiting[TS_MAX_GPU_MODELS][PROFILE_ID_SPAN];
} wants;

static void wants_add(wants *w, const ts_request *r, int64_t units)
{
    int nm = ts_gpu_model_count();
    for (int m = 0; m < nm && m < TS_MAX_GPU_MODELS; m++)
        if (r->model_mask == 0 || ((r->model_mask >> m) & 1u))
            w->waiting[m][r->mig_profile] += units;
}

static void wants_mask(const wants *w, uint32_t *mask)
{
    for (int m = 0; m < TS_MAX_GPU_MODELS; m++) {
        mask[m] = 0;
        for (int id = 0; id < PROFILE_ID_SPAN; id++)
            if (w->waiting[m][id] > 0)
                mask[m] |= 1u << id;
    }
}

static int check_demand(const ts_mig_demand *d, size_t i, ts_err *err)
{
    const ts_request *r = &d->req;
    if (d->count < 1 || d->count > TS_MIG_DEMAND_COUNT_MAX)
        return ts_err_set(err, TS_EINVAL, "demand[%zu].count: must be 1..%d, not %d", i,
                          TS_MIG_DEMAND_COUNT_MAX, d->count);
    if (r->mig_profile < 0 || r->mig_profile >= PROFILE_ID_SPAN ||
        !ts_mig_profile_get(0, r->mig_profile))
        return ts_err_set(err, TS_EINVAL, "demand[%zu].req.mig_profile: %d is not a MIG "
                          "profile id", i, r->mig_profile);
    int rc = ts_request_check(r, err);
    if (rc < 0) {
        ts_err_prefix(err, "demand[%zu].req.", i);
        return rc;
    }
    return 0;
}

/* ---- the planner ---------------------------------------------------------- */

/* Rebuilds the overlay as the shell will see it: the cluster, every change
 * applied, then demands 0..i-1 placed in order, each as many times as it fits
 * (up to its count; got[j] says how many), then `target` instances of demand
 * i. 0 when demand i reaches target and no earlier demand places fewer than
 * placed[j]; TS_ENOSPC otherwise; TS_ENOMEM. */
static int plan_rebuild(plan *p, const ts_mig_demand *demand, size_t i, int target,
                        const int *placed, int *got)
{
    plan_reset(p);
    for (size_t k = 0; k < p->nout; k++) {
        ts_node *nd = plan_touch(p, p->out[k].node);
        if (!nd)
            return TS_ENOMEM;
        nd->gpu[p->out[k].gpu].mig = p->out[k].layout;
    }
    for (size_t j = 0; j <= i; j++) {
        int want = j < i ? demand[j].count : target;
        got[j] = 0;
        while (got[j] < want) {
            int node = pick_node(p, &demand[j].req);
            if (node < 0)
                break;
            int rc = plan_place(p, node, &demand[j].req);
            if (rc == TS_ENOMEM)
                return rc;
            if (rc != 0)
                break;
            got[j]++;
        }
        if (got[j] < (j < i ? placed[j] : target))
            return TS_ENOSPC;
    }
    return 0;
}

/* One instance of demand i fits nowhere: tries the best cuts, each verified
 * by a rebuild in which every earlier demand places at least as often as
 * before and demand i once more. *kept when one was kept (placed[] and the
 * overlay then show it); else changes and overlay are as they were. */
static int plan_cut_for(plan *p, const ts_mig_demand *demand, int *placed, int *got, size_t i,
                        const uint32_t *wanted, bool *kept)
{
    *kept = false;
    cut cand[CUT_TRIES];
    int nc = find_cuts(p, &demand[i].req, wanted, cand);
    int tried = 0;
    for (int t = 0; t < nc && p->rebuilds_left > 0; t++) {
        p->rebuilds_left--;
        tried++;
        cut_undo undo;
        cut_record(p, &cand[t], (int)i, &undo);
        int rc = plan_rebuild(p, demand, i, placed[i] + 1, placed, got);
        if (rc == 0) {
            memcpy(placed, got, (i + 1) * sizeof *placed);
            *kept = true;
            return 0;
        }
        cut_undo_apply(p, &undo);
        if (rc == TS_ENOMEM)
            return rc;
    }
    if (tried == 0)
        return 0;
    int rc = plan_rebuild(p, demand, i, placed[i], placed, got);
    /* the state before the tries was reached this same way */
    assert(rc != TS_ENOSPC);
    assert(rc != 0 || memcmp(placed, got, (i + 1) * sizeof *placed) == 0);
    return rc == TS_ENOMEM ? rc : 0;
}

static int plan_run(plan *p, const ts_mig_demand *demand, size_t n, int *placed, int *got)
{
    wants *w = calloc(1, sizeof *w);
    if (!w)
        return TS_ENOMEM;
    uint32_t wanted[TS_MAX_GPU_MODELS];
    for (size_t i = 0; i < n; i++)
        wants_add(w, &demand[i].req, demand[i].count);
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        const ts_request *r = &demand[i].req;
        wants_add(w, r, -demand[i].count); /* "other" demand only */
        wants_mask(w, wanted);
        while (placed[i] < demand[i].count) {
            int node = pick_node(p, r);
            if (node >= 0) {
                rc = plan_place(p, node, r);
                /* pick_node checked what ts_node_choose_gpus checks */
                assert(rc != TS_ENOSPC);
                if (rc != 0)
                    break;
                placed[i]++;
                continue;
            }
            /* Nothing changes when this fails, so its twins fail too. */
            bool kept;
            rc = plan_cut_for(p, demand, placed, got, i, wanted, &kept);
            if (rc != 0 || !kept)
                break;
        }
        if (rc == TS_ENOSPC)
            rc = 0;
        /* What stays unplaced still waits, and is demand for those after
         * (a later rebuild may place some of it after all: the count is
         * only a tie-breaker). */
        wants_add(w, r, demand[i].count - placed[i]);
    }
    free(w);
    return rc;
}

int ts_mig_plan(const ts_cluster *c, const ts_mig_demand *demand, size_t n,
                const ts_mig_plan_opts *opts, ts_mig_change *out, size_t cap, size_t *nout,
                int *served, ts_err *err)
{
    if (nout)
        *nout = 0;
    if (served)
        for (size_t i = 0; i < n; i++)
            served[i] = 0;
    if (!c || !nout)
        return ts_err_set(err, TS_EINVAL, "MIG plan: %s is NULL", c ? "nout" : "cluster");
    if (n > 0 && !demand)
        return ts_err_set(err, TS_EINVAL, "MIG plan: demand is NULL with n = %zu", n);
    if (cap > 0 && !out)
        return ts_err_set(err, TS_EINVAL, "MIG plan: out is NULL with cap = %zu", cap);
    for (size_t i = 0; i < n; i++) {
        int rc = check_demand(&demand[i], i, err);
        if (rc < 0)
            return rc;
    }
    if (n == 0 || c->nnodes == 0)
        return 0;

    plan p = {.c = c, .out = out, .k = cap};
    if (opts) {
        p.excluded = opts->excluded;
        p.idle_gpus_only = opts->idle_gpus_only;
        if (opts->max_changes > 0 && opts->max_changes < cap)
            p.k = opts->max_changes;
    }
    p.rebuilds_left = p.k <= SIZE_MAX / CUT_TRIES ? p.k * CUT_TRIES : SIZE_MAX;
    p.slot = malloc((size_t)c->nnodes * sizeof *p.slot);
    int *placed = calloc(n, sizeof *placed);
    int *got = calloc(n, sizeof *got);
    int rc = TS_ENOMEM;
    if (p.slot && placed && got) {
        for (int i = 0; i < c->nnodes; i++)
            p.slot[i] = -1;
        rc = plan_run(&p, demand, n, placed, got);
    }
    free(got);
    free(p.slot);
    free(p.copy);
    free(p.node_of);
    if (rc == 0 && served)
        memcpy(served, placed, n * sizeof *served);
    free(placed);
    if (rc < 0)
        return ts_err_set(err, rc, "MIG plan: out of memory (%d nodes, %zu demands)",
                          c->nnodes, n);
    *nout = p.nout;
    return 0;
}

int ts_mig_plan_node(const ts_cluster *c, const ts_request *req, const ts_mig_plan_opts *opts)
{
    if (!c || !req || req->mig_profile < 0 || !ts_mig_profile_get(0, req->mig_profile))
        return TS_EINVAL;
    plan p = {.c = c, .excluded = opts ? opts->excluded : NULL};
    return pick_node(&p, req);
}

/* ---- applying ------------------------------------------------------------ */

static int find_instance(const ts_mig_layout *l, const ts_mig_instance *in)
{
    for (int k = 0; k < l->n; k++)
        if (same_instance(&l->inst[k], in))
            return k;
    return -1;
}

static int check_change(const ts_cluster *c, const ts_mig_change *chs, size_t i, ts_err *err)
{
    const ts_mig_change *ch = &chs[i];
    if (ch->node < 0 || ch->node >= c->nnodes)
        return ts_err_set(err, TS_EINVAL, "changes[%zu].node: %d is not a node index (0..%d)",
                          i, ch->node, c->nnodes - 1);
    const ts_node *n = &c->nodes[ch->node];
    if (ch->gpu < 0 || ch->gpu >= n->ngpu)
        return ts_err_set(err, TS_EINVAL, "changes[%zu].gpu: %d is not a GPU of node \"%s\" "
                          "(it has %d)", i, ch->gpu, n->name, n->ngpu);
    const ts_gpu *g = &n->gpu[ch->gpu];
    if (g->mode != TS_GPU_MIG)
        return ts_err_set(err, TS_EINVAL, "changes[%zu].gpu: node \"%s\" gpu %d is in %s "
                          "mode, not mig", i, n->name, ch->gpu, ts_gpu_mode_name(g->mode));
    for (size_t j = 0; j < i; j++)
        if (chs[j].node == ch->node && chs[j].gpu == ch->gpu)
            return ts_err_set(err, TS_EINVAL, "changes[%zu]: node \"%s\" gpu %d is already "
                              "changed by changes[%zu]", i, n->name, ch->gpu, j);
    const ts_gpu_model_info *m = ts_gpu_model_get(n->model);
    int geo = m ? m->mig_geometry : TS_MIG_NONE;
    int rc = ts_mig_layout_validate(geo, &ch->layout, err);
    if (rc < 0) {
        ts_err_prefix(err, "changes[%zu].layout: ", i);
        return rc;
    }
    for (int k = 0; k < ch->layout.n; k++) {
        const ts_mig_instance *in = &ch->layout.inst[k];
        if (find_instance(&g->mig, in) < 0) {
            const ts_mig_profile *q = ts_mig_profile_get(geo, in->profile_id);
            return ts_err_set(err, TS_ENOENT, "changes[%zu].layout: instance %d (%s at slot "
                              "%d) is not on node \"%s\" gpu %d (the plan is stale)", i, k,
                              q ? q->name : "?", in->start, n->name, ch->gpu);
        }
    }
    for (int k = 0; k < g->mig.n; k++) {
        const ts_mig_instance *in = &g->mig.inst[k];
        if (in->busy && find_instance(&ch->layout, in) < 0) {
            const ts_mig_profile *q = ts_mig_profile_get(geo, in->profile_id);
            return ts_err_set(err, TS_EINVAL, "changes[%zu]: would remove the busy %s at slot "
                              "%d on node \"%s\" gpu %d (the plan is stale)", i,
                              q ? q->name : "?", in->start, n->name, ch->gpu);
        }
    }
    return 0;
}

int ts_mig_plan_apply(ts_cluster *c, const ts_mig_change *changes, size_t n, ts_err *err)
{
    if (!c || (n > 0 && !changes))
        return ts_err_set(err, TS_EINVAL, "MIG plan apply: %s is NULL",
                          c ? "changes" : "cluster");
    for (size_t i = 0; i < n; i++) {
        int rc = check_change(c, changes, i, err);
        if (rc < 0)
            return rc;
    }
    for (size_t i = 0; i < n; i++) {
        ts_node *nd = &c->nodes[changes[i].node];
        ts_gpu *g = &nd->gpu[changes[i].gpu];
        ts_mig_layout l = changes[i].layout;
        for (int k = 0; k < l.n; k++)
            l.inst[k].busy = g->mig.inst[find_instance(&g->mig, &l.inst[k])].busy;
        g->mig = l;
        nd->version++;
    }
    return 0;
}
