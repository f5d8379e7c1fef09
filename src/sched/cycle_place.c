/*
 * cycle_place.c - placing one job, all or nothing, on a cluster and its gang
 * index: the real cluster during a cycle, or the scratch copy when planning.
 *
 * Gangs of two or more whole-GPU tasks go to ts_gang_place (smallest subtree
 * at the required level, packed by best fit, nodes with equal free GPUs in
 * order of least growth of the same fragmentation measure, rail-aligned on
 * request). Other jobs (one
 * task of any shape, CPU-only tasks, GPU shares, MIG instances, or a mix)
 * are placed task by task through
 * the placement policy's scorer (sched.h; configuration field placement,
 * default TS_PLACEMENT_DEFAULT): the same placer, filter, scores and tie rule
 * as `tessera-sim fgd` measures, with drained nodes and the CPU reserved for
 * idle GPUs filtered out. "node" is the only topology constraint they honour
 * (every task on one node); a task that does not fit rolls the earlier ones
 * back. A GPU task first tries the nodes of its tier's side (loans away from
 * guaranteed work, guaranteed work away from nodes of loans only), then any:
 * nodes of loans only stay reclaimable whole. The fragmentation measure
 * needs an expected workload: the shell's
 * (ts_sched_set_expected) or one learned from the tasks the cycle is asked
 * to place (see sched.h for the rule). A job with an image breaks the
 * policy's ties by the seconds its image would take to pull on each node
 * (score_image.c), in both paths.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched/cycle_internal.h"
#include "tessera/node_select.h"

#define TS_CYCLE_RES_SCAN_MAX 64 /* reservations one job is kept off at once */
#include "tessera/sched.h"

#define CLASS_MAX 4096          /* request classes with a cached score row */
#define CLASS_HASH 8192         /* open addressing, power of two > CLASS_MAX */
#define LEARN_REBUILD_MAX 4096  /* attempts between rebuilds at most */
#define LEARN_WINDOW 65536      /* counts are halved once they weigh more */
#define LEARN_SAME_P 0.02       /* a rebuilt list this close keeps the caches */
#define PLACER_SEED 0x7e55e7aULL

struct cycle_scoring {
    const struct ts_scorer_ops *ops;
    ts_placer *real, *scratch;  /* on s->c and on s->sc (uncached) */
    const ts_typical *set;      /* the shell's expected workload, borrowed */
    ts_typical learned;         /* else this, owned */
    ts_request cls[CLASS_MAX];
    int64_t count[CLASS_MAX];   /* attempts per class, halved past LEARN_WINDOW */
    int ncls;
    int32_t hash[CLASS_HASH];   /* class index + 1, 0 = empty */
    int64_t since, next_at;     /* attempts since the last rebuild; rebuild at */
};

static uint64_t request_hash(const ts_request *r)
{
    uint64_t h = 1469598103934665603ULL;
    const int64_t v[] = {r->cpu_milli, r->mem_mib,    r->num_gpu,     r->gpu_milli,
                         r->gpu_mem_mib, r->model_mask, r->mig_profile, r->share_key};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        h ^= (uint64_t)v[i];
        h *= 1099511628211ULL;
        h ^= h >> 29;
    }
    return h;
}

static bool same_request(const ts_request *a, const ts_request *b)
{
    return a->cpu_milli == b->cpu_milli && a->mem_mib == b->mem_mib &&
           a->num_gpu == b->num_gpu && a->gpu_milli == b->gpu_milli &&
           a->gpu_mem_mib == b->gpu_mem_mib && a->model_mask == b->model_mask &&
           a->mig_profile == b->mig_profile && a->share_key == b->share_key;
}

/* The class index of r (added if new), or -1 when the table is full. */
static int class_of(struct cycle_scoring *k, const ts_request *r)
{
    uint64_t h = request_hash(r);
    for (uint64_t i = 0; i < CLASS_HASH; i++) {
        int32_t *slot = &k->hash[(h + i) & (CLASS_HASH - 1)];
        if (*slot == 0) {
            if (k->ncls == CLASS_MAX)
                return -1;
            k->cls[k->ncls] = *r;
            *slot = ++k->ncls;
            return k->ncls - 1;
        }
        if (same_request(&k->cls[*slot - 1], r))
            return *slot - 1;
    }
    return -1;
}

static void placers_drop(struct cycle_scoring *k)
{
    ts_placer_free(k->real);
    ts_placer_free(k->scratch);
    k->real = k->scratch = NULL;
}

void cycle_scoring_free(ts_sched *s)
{
    struct cycle_scoring *k = s->scoring;
    if (!k)
        return;
    placers_drop(k);
    ts_typical_free(&k->learned);
    free(k);
    s->scoring = NULL;
}

static struct cycle_scoring *scoring_get(ts_sched *s)
{
    if (s->scoring)
        return s->scoring;
    struct cycle_scoring *k = calloc(1, sizeof *k);
    if (!k)
        return NULL;
    k->ops = s->cfg.placement ? s->cfg.placement : ts_scorer_find(TS_PLACEMENT_DEFAULT);
    s->scoring = k;
    return k;
}

int ts_sched_set_expected(ts_sched *s, const ts_typical *t, ts_err *err)
{
    if (!s)
        return ts_err_set(err, TS_EINVAL, "expected workload: no scheduler");
    struct cycle_scoring *k = scoring_get(s);
    if (!k)
        return ts_err_set(err, TS_ENOMEM, "expected workload: out of memory");
    k->set = t;
    placers_drop(k);
    return 0;
}

/* Two lists close enough that rebuilding the scores is not worth it. */
static bool same_typical(const ts_typical *a, const ts_typical *b)
{
    if (a->n != b->n)
        return false;
    for (int i = 0; i < a->n; i++) {
        double d = a->p[i] - b->p[i];
        if (!same_request(&a->req[i], &b->req[i]) || d > LEARN_SAME_P || d < -LEARN_SAME_P ||
            a->mem_mib[i] != b->mem_mib[i])
            return false;
    }
    return true;
}

/* Counts job's tasks as attempts of their classes; rebuilds the learned list
 * when due. 0 or TS_ENOMEM. */
static int learn(struct cycle_scoring *k, const ts_job *job)
{
    if (k->set)
        return 0;
    for (int i = 0; i < job->ntasks; i++) {
        int cls = class_of(k, &job->tasks[i]);
        if (cls >= 0)
            k->count[cls]++;
    }
    k->since += job->ntasks;
    if (k->since < k->next_at)
        return 0;
    int *cnt = malloc((size_t)(k->ncls ? k->ncls : 1) * sizeof *cnt);
    if (!cnt)
        return TS_ENOMEM;
    int64_t total = 0;
    for (int i = 0; i < k->ncls; i++)
        total += k->count[i];
    bool halve = total > LEARN_WINDOW;
    for (int i = 0; i < k->ncls; i++) {
        if (halve)
            k->count[i] /= 2;
        cnt[i] = (int)k->count[i];
    }
    ts_workload w = {.specs = k->cls, .spec_count = cnt, .nspecs = k->ncls};
    ts_typical t;
    ts_err err;
    int rc = ts_typical_build(&w, TS_TYPICAL_COVERAGE_DEFAULT, TS_TYPICAL_BY_COUNT, &t, &err);
    free(cnt);
    if (rc != 0)
        return rc;
    k->since = 0;
    k->next_at = total < 1 ? 1 : total > LEARN_REBUILD_MAX ? LEARN_REBUILD_MAX : total;
    if (k->learned.req && same_typical(&k->learned, &t)) {
        ts_typical_free(&t);
        return 0;
    }
    ts_typical_free(&k->learned);
    k->learned = t;
    placers_drop(k);
    return 0;
}

/* The placer for cluster c (the real one or the scratch copy), made when
 * first needed. */
static ts_placer *placer_for(ts_sched *s, struct cycle_scoring *k, ts_cluster *c)
{
    bool real = c == s->c;
    ts_placer **pp = real ? &k->real : &k->scratch;
    if (*pp)
        return *pp;
    ts_sched_env env = {.cluster = c, .typical = k->set ? k->set : &k->learned,
                        .no_cache = !real};
    ts_err err;
    *pp = ts_placer_new(c, k->ops, &env, real ? CLASS_MAX : 0, PLACER_SEED, &err);
    return *pp;
}

static bool whole_gpu_task(const ts_request *r)
{
    return r->num_gpu >= 1 && r->gpu_milli >= TS_MILLI_PER_GPU && r->mig_profile < 0;
}

int64_t cycle_job_gpus(const ts_job *job)
{
    int64_t n = 0;
    for (int i = 0; i < job->ntasks; i++)
        n += job->tasks[i].mig_profile >= 0 ? 1 : job->tasks[i].num_gpu;
    return n;
}

/* A CPU-only task may use a GPU node only beyond what its idle GPUs keep. */
static bool proportional_ok(const ts_sched *s, const ts_node *n, const ts_request *r)
{
    if (r->num_gpu > 0 || r->mig_profile >= 0 || n->model < 0 || n->gpus_free == 0)
        return true;
    int64_t keep_cpu = s->cfg.reserve_cpu_milli_per_gpu[n->model] * n->gpus_free;
    int64_t keep_mem = s->cfg.reserve_mem_mib_per_gpu[n->model] * n->gpus_free;
    return n->cpu_milli - n->cpu_used - r->cpu_milli >= keep_cpu &&
           n->mem_mib - n->mem_used - r->mem_mib >= keep_mem;
}

typedef struct node_filter {
    ts_sched *s;
    const ts_cluster *c;
    const ts_gang_index *ix;
    const ts_request *r;
    int only;
    int side;   /* a first pass on the nodes of this tier's side, or SIDE_ANY */
    bool reserve_hit;
    const ts_alloc *mine;   /* a job publishing ports: its tasks bound so far, */
    int nmine;              /* whose nodes the next one avoids (NULL: none) */
} node_filter;

/* Loans and guarantees on separate nodes: a GPU task first tries its side
 * (an opportunistic job's: the nodes without guaranteed work; a guaranteed
 * job's: every node but those holding loans only); only if none fits does
 * it go anywhere. A node of loans only can then be taken
 * back whole once its loans are past their minimum runtime, where one
 * guaranteed GPU among the loans kept an 8-GPU guaranteed job off the node
 * (docs/simulator.md, Philly at 8x). With one tier, or no running jobs
 * passed, nothing is filtered: the scorer's choice is unchanged. */
enum { SIDE_ANY = -1 };

static bool node_ok(void *ctx, int i)
{
    node_filter *f = ctx;
    if ((f->only >= 0 && i != f->only) || !ts_gang_index_node_enabled(f->ix, i))
        return false;
    for (int t = 0; t < f->nmine; t++)
        if (f->mine[t].node == i)
            return false;
    if (f->side != SIDE_ANY) {
        const uint16_t *held = &f->s->node_tier[(size_t)i * TS_TIERS];
        if (f->side == TS_TIER_OPPORTUNISTIC ? held[TS_TIER_GUARANTEED] > 0
                                             : held[TS_TIER_OPPORTUNISTIC] > 0 &&
                                                   held[TS_TIER_GUARANTEED] == 0)
            return false;
    }
    if (!proportional_ok(f->s, &f->c->nodes[i], f->r)) {
        f->reserve_hit = true;
        return false;
    }
    return true;
}

/* Tasks first..ntasks-1 each on the node the policy picks (only >= 0: all
 * on that one). Returns how many were bound, or TS_ENOMEM; on a shortfall
 * the caller rolls back. */
static int bind_tasks(ts_sched *s, ts_cluster *c, ts_gang_index *ix, const ts_job *job,
                      int only, const double *pull_s, ts_alloc *allocs, bool *reserve_hit)
{
    struct cycle_scoring *k = scoring_get(s);
    if (!k || !k->ops)
        return TS_ENOMEM;
    int done = 0;
    for (; done < job->ntasks; done++) {
        const ts_request *r = &job->tasks[done];
        int cls = class_of(k, r);
        ts_placer *pl = placer_for(s, k, c);
        if (!pl)
            return TS_ENOMEM;
        node_filter f = {.s = s, .c = c, .ix = ix, .r = r, .only = only, .side = SIDE_ANY,
                         .mine = job->nhost_ports > 0 ? allocs : NULL,
                         .nmine = job->nhost_ports > 0 ? done : 0};
        ts_alloc a;
        int at = -1;
        if (c == s->c && s->node_tier && (r->num_gpu > 0 || r->mig_profile >= 0) &&
            (job->tier == TS_TIER_GUARANTEED || job->tier == TS_TIER_OPPORTUNISTIC)) {
            f.side = job->tier;
            at = ts_placer_choose_keyed(pl, r, cls, node_ok, &f, pull_s, &a);
            f.side = SIDE_ANY;
        }
        if (at < 0)
            at = ts_placer_choose_keyed(pl, r, cls, node_ok, &f, pull_s, &a);
        *reserve_hit = *reserve_hit || f.reserve_hit;
        if (at < 0 || ts_node_assign(&c->nodes[at], r, &a) != 0)
            break;
        allocs[done] = a;
        ts_gang_index_node_changed(ix, at);
    }
    return done;
}

static void unbind(ts_cluster *c, ts_gang_index *ix, ts_alloc *allocs, int n)
{
    while (n-- > 0) {
        ts_node_release(&c->nodes[allocs[n].node], &allocs[n]);
        ts_gang_index_node_changed(ix, allocs[n].node);
    }
}

/* Whole GPUs r could use are free in total, only not enough on one node. */
static bool fragmented(const ts_cluster *c, const ts_gang_index *ix, const ts_request *r,
                       char *why, size_t whylen)
{
    if (r->num_gpu < 2 || r->mig_profile >= 0)
        return false;
    int64_t total = 0;
    int most = 0;
    for (int i = 0; i < c->nnodes; i++) {
        const ts_node *n = &c->nodes[i];
        if (!ts_gang_index_node_enabled(ix, i) || n->model < 0 ||
            (r->model_mask && !((r->model_mask >> n->model) & 1u)))
            continue;
        total += n->gpus_free;
        most = n->gpus_free > most ? n->gpus_free : most;
    }
    if (total < r->num_gpu)
        return false;
    snprintf(why, whylen, "tasks[0]: %lld GPUs it may use are free, at most %d on one node; "
             "it asks for %d on one node", (long long)total, most, r->num_gpu);
    return true;
}

static int place_tasks(ts_sched *s, ts_cluster *c, ts_gang_index *ix, const ts_job *job,
                       const double *pull_s, ts_alloc *allocs, int *reason, char *why,
                       size_t whylen)
{
    bool one_node = job->required_level == TS_GANG_LEVEL_NODE && job->ntasks > 1;
    bool reserve_hit = false;
    int most = 0;
    struct cycle_scoring *k = scoring_get(s);
    if (!k || (c == s->c && learn(k, job) != 0)) {
        *reason = TS_PEND_CAPACITY;
        snprintf(why, whylen, "placement: out of memory");
        return TS_ENOSPC;
    }
    if (one_node) {
        for (int i = 0; i < c->nnodes; i++) {
            if (!ts_node_fits(&c->nodes[i], &job->tasks[0]))
                continue;
            int done = bind_tasks(s, c, ix, job, i, pull_s, allocs, &reserve_hit);
            if (done < 0)
                break;
            if (done == job->ntasks)
                return 0;
            unbind(c, ix, allocs, done);
            most = done > most ? done : most;
        }
    } else {
        int done = bind_tasks(s, c, ix, job, -1, pull_s, allocs, &reserve_hit);
        if (done == job->ntasks)
            return 0;
        unbind(c, ix, allocs, done);
        most = done;
    }
    if (most > 0) {
        *reason = TS_PEND_GANG;
        snprintf(why, whylen, "%d of %d tasks fit%s; the job starts all at once or not at all",
                 most, job->ntasks, one_node                ? " on one node"
                                    : job->nhost_ports > 0 ? " one per node (network.publish)"
                                                           : "");
    } else if (reserve_hit) {
        *reason = TS_PEND_CAPACITY;
        snprintf(why, whylen, "tasks[0]: the CPU and memory left on GPU nodes are kept for "
                 "their idle GPUs");
    } else if (!one_node && fragmented(c, ix, &job->tasks[0], why, whylen)) {
        *reason = TS_PEND_FRAGMENTATION;
    } else {
        *reason = TS_PEND_CAPACITY;
        snprintf(why, whylen, "tasks[0]: no node has the CPU, memory and GPU room it asks for");
    }
    return TS_ENOSPC;
}

static int place_any(ts_sched *s, ts_cluster *c, ts_gang_index *ix, const ts_job *job,
                     ts_alloc *allocs, int *reason, char *why, size_t whylen)
{
    /* one task is one node: the policy places it whatever its shape; so is
     * a job publishing ports, whose tasks need a node each (the gang
     * planner packs) */
    bool gang = job->ntasks > 1 && job->nhost_ports == 0;
    for (int i = 0; i < job->ntasks && gang; i++)
        gang = whole_gpu_task(&job->tasks[i]);
    const double *pull_s = cycle_image_costs(s, job); /* ties go where its image is */
    if (!gang)
        return place_tasks(s, c, ix, job, pull_s, allocs, reason, why, whylen);
    struct cycle_scoring *k = scoring_get(s);
    if (!k || (c == s->c && learn(k, job) != 0)) {
        *reason = TS_PEND_CAPACITY;
        snprintf(why, whylen, "placement: out of memory");
        return TS_ENOSPC;
    }
    ts_gang_spec spec = {
        .tasks = job->tasks,
        .ntasks = job->ntasks,
        .required_level = job->required_level,
        .preferred_level = job->preferred_level,
        .rail_aligned = job->rail_aligned,
        .typical = k->set ? k->set : &k->learned,
        .node_cost_s = pull_s,
    };
    ts_gang_result res;
    ts_err err;
    int rc = ts_gang_place(ix, &spec, allocs, &res, &err);
    if (rc == 0)
        return 0;
    if (rc != TS_ENOSPC) {
        *reason = TS_PEND_INVALID;
        snprintf(why, whylen, "%s", err.msg);
        return TS_ENOSPC;
    }
    switch (res.reason) {
    case TS_GANG_TOPOLOGY:
        *reason = TS_PEND_TOPOLOGY;
        break;
    case TS_GANG_FRAGMENTATION:
        *reason = job->ntasks > 1 ? TS_PEND_GANG : TS_PEND_FRAGMENTATION;
        break;
    default:
        *reason = TS_PEND_CAPACITY;
        break;
    }
    snprintf(why, whylen, "%s", res.why);
    return TS_ENOSPC;
}

/* A job limited to some nodes (its node_mask, its own reservation's nodes)
 * or kept off some (reservations it is not part of whose window its time
 * limit would run into) is placed with the other nodes taken out of the
 * index as a drained node is, so every placement path (the gang planner,
 * the scorers' filter, the reservation plan on the shadow cluster) honours
 * it without a test of its own; they are put back after. O(nodes x depth)
 * per attempt, paid only by such jobs; a job with no mask in a cluster
 * without reservations goes straight to place_any. */
typedef struct node_limits {
    const uint64_t *mask;       /* job->node_mask or NULL */
    uint64_t *ports;            /* nodes where its published ports are taken, or NULL */
    uint32_t port;              /* one such port (for the why) */
    const sched_res *mine;      /* the reservation it runs in, or NULL */
    const sched_res *other[TS_CYCLE_RES_SCAN_MAX]; /* windows it would run into */
    int nother;
} node_limits;

static bool limits_allow(const node_limits *lim, int i)
{
    if (!ts_node_mask_has(lim->mask, i) || (lim->mine && !ts_node_mask_has(lim->mine->nodes, i)))
        return false;
    for (int k = 0; k < lim->nother; k++)
        if (ts_node_mask_has(lim->other[k]->nodes, i))
            return false;
    return true;
}

/* Fills lim (lim->ports the caller's to free); 1 when the job may not start
 * at all now (reason and why set). */
static int limits_of(const ts_sched *s, const ts_cluster *c, const ts_job *job,
                     node_limits *lim, int *reason, char *why, size_t whylen)
{
    memset(lim, 0, sizeof *lim);
    lim->mask = job->node_mask;
    if (job->nhost_ports > 0 && s->nhports > 0) {
        lim->ports = calloc(ts_node_mask_words(c->nnodes) + 1, sizeof *lim->ports);
        if (!lim->ports) {
            *reason = TS_PEND_CAPACITY;
            snprintf(why, whylen, "placement: out of memory");
            return 1;
        }
        if (cycle_ports_taken(s, job, c != s->c, lim->ports, c->nnodes, &lim->port) == 0) {
            free(lim->ports);
            lim->ports = NULL;
        }
    }
    double limit = job->time_limit_s > 0 ? job->time_limit_s : s->cfg.default_time_limit_s;
    double now = s->now, end = now + limit;
    for (int k = 0; k < s->nres; k++) {
        const sched_res *r = &s->res[k];
        if (r->id == job->reservation)
            lim->mine = r;
        else if (now < r->end_s && end > r->start_s && lim->nother < TS_CYCLE_RES_SCAN_MAX)
            lim->other[lim->nother++] = r;
    }
    if (job->reservation == 0)
        return 0;
    *reason = TS_PEND_RESERVATION;
    if (!lim->mine) {
        snprintf(why, whylen, "reservation: %lld does not exist (or has ended)",
                 (long long)job->reservation);
        return 1;
    }
    if (now < lim->mine->start_s) {
        snprintf(why, whylen, "reservation: %lld starts in %.0f s", (long long)job->reservation,
                 lim->mine->start_s - now);
        return 1;
    }
    if (now >= lim->mine->end_s) {
        snprintf(why, whylen, "reservation: %lld has ended", (long long)job->reservation);
        return 1;
    }
    return 0;
}

int cycle_place(ts_sched *s, ts_cluster *c, ts_gang_index *ix, const ts_job *job,
                ts_alloc *allocs, int *reason, char *why, size_t whylen)
{
    if (!job->node_mask && s->nres == 0 && job->reservation == 0 && job->nhost_ports == 0)
        return place_any(s, c, ix, job, allocs, reason, why, whylen);
    node_limits lim;
    if (limits_of(s, c, job, &lim, reason, why, whylen) != 0) {
        free(lim.ports);
        return TS_ENOSPC;
    }
    if (!lim.mask && !lim.mine && lim.nother == 0 && !lim.ports)
        return place_any(s, c, ix, job, allocs, reason, why, whylen);
    size_t words = ts_node_mask_words(c->nnodes);
    uint64_t *off = calloc(words ? words : 1, sizeof *off);
    if (!off) {
        free(lim.ports);
        *reason = TS_PEND_CAPACITY;
        snprintf(why, whylen, "placement: out of memory");
        return TS_ENOSPC;
    }
    int allowed = 0, held = 0, ported = 0;
    for (int i = 0; i < c->nnodes; i++) {
        if (!ts_gang_index_node_enabled(ix, i))
            continue;
        bool may = limits_allow(&lim, i);
        if (may && !(lim.ports && ts_node_mask_has(lim.ports, i))) {
            allowed++;
            continue;
        }
        if (may)
            ported++;
        else
            held += ts_node_mask_has(lim.mask, i) && !lim.mine;
        off[i >> 6] |= UINT64_C(1) << (i & 63);
        ts_gang_index_node_enable(ix, i, false);
    }
    int rc = TS_ENOSPC;
    char inner[TS_CYCLE_WHY_MAX];
    const char *what = lim.mine   ? "its reservation holds"
                       : lim.mask ? "its constraint, nodelist and exclude allow"
                                  : "it may use";
    char port[96] = "";
    if (ported > 0)
        snprintf(port, sizeof port, "network.publish: %u/%s is published on %d nodes by other "
                 "tasks; ", TS_HOST_PORT_NUMBER(lim.port),
                 TS_HOST_PORT_UDP(lim.port) ? "udp" : "tcp", ported);
    if (allowed == 0 && ported > 0 && held == 0) {
        *reason = lim.mine ? TS_PEND_RESERVATION : lim.mask ? TS_PEND_CONSTRAINT : TS_PEND_CAPACITY;
        snprintf(why, whylen, "network.publish: %u/%s is published by another task on every "
                 "node %s (%d)", TS_HOST_PORT_NUMBER(lim.port),
                 TS_HOST_PORT_UDP(lim.port) ? "udp" : "tcp",
                 what, ported);
    } else if (allowed == 0) {
        *reason = lim.mine || held > 0 ? TS_PEND_RESERVATION
                  : lim.mask           ? TS_PEND_CONSTRAINT
                                       : TS_PEND_CAPACITY;
        if (held > 0)
            snprintf(why, whylen, "its time limit runs into a reservation on every node it "
                     "may use (%d)", held);
        else
            snprintf(why, whylen, "no node %s takes work now (all drained or down)", what);
    } else {
        rc = place_any(s, c, ix, job, allocs, reason, inner, sizeof inner);
        if (rc != 0 && *reason == TS_PEND_INVALID) {
            snprintf(why, whylen, "%s", inner);
        } else if (rc != 0 && (lim.mask || lim.mine)) {
            *reason = lim.mine ? TS_PEND_RESERVATION : TS_PEND_CONSTRAINT;
            snprintf(why, whylen, "%son the %d nodes %s: %s", port, allowed, what, inner);
        } else if (rc != 0 && ported > 0 && held == 0) {
            snprintf(why, whylen, "%son the other %d: %s", port, allowed, inner);
        } else if (rc != 0) {
            snprintf(why, whylen, "%s%d nodes kept for reservations its time limit runs into; %s",
                     port, held, inner);
        }
    }
    for (int i = 0; i < c->nnodes; i++)
        if (off[i >> 6] >> (i & 63) & 1u)
            ts_gang_index_node_enable(ix, i, true);
    free(off);
    free(lim.ports);
    return rc;
}

int cycle_unplace(ts_cluster *c, ts_gang_index *ix, const ts_job *job, const ts_alloc *allocs)
{
    int rc = 0;
    for (int i = 0; i < job->ntasks; i++) {
        const ts_alloc *a = &allocs[i];
        if (a->node < 0 || a->node >= c->nnodes)
            return TS_EINVAL;
        int r = ts_node_release(&c->nodes[a->node], a);
        if (r != 0)
            rc = r;
        ts_gang_index_node_changed(ix, a->node);
    }
    return rc;
}
