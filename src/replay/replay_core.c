/*
 * replay_core.c - the `tessera` (alias `core`) replay policy: the production
 * scheduling cycle (tessera/cycle.h, the code tesserad runs) with tesserad's
 * default configuration, deciding the replay.
 *
 * The policy keeps its own model of the replayed cluster: nodes of
 * gpus_per_node GPUs (no topology: the replays count GPUs), one tenant per
 * replay tenant under one organisation, guaranteed its GPUs, borrowing and
 * lending freely, its fair-share weight its guarantee over the mean
 * guarantee (what it is lent then follows its guarantee, as the fairness
 * figure measures it); without tenants, one tenant with no quota. A job of g GPUs
 * is one task of g GPUs, or a gang of node-sized tasks and the remainder.
 * Each job's attained service (GPU-seconds over its finished runs) and the
 * time it began to wait again are kept here, as tesserad keeps them. At each
 * decision a waiting job is `guaranteed` when it fits its tenant's unused
 * guarantee, taken in the order the cycle ranks a tenant's jobs (las level,
 * then arrival, by default), else `opportunistic`; it knows no durations (every job
 * has the default time limit). Victims stop at once (the replay has no
 * grace: the engine charges restarts and lost progress, and what a
 * preemption loses is passed as the time since the last checkpoint), and
 * the cycle runs again in the same decision, at most CORE_CYCLES_MAX times,
 * so that their preemptors start. `tessera-img` and `tessera-img-blind` add
 * the image model of replay_images.c (the cycle told where images are, or
 * not) and print what starts waited for their images.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay/replay.h"
#include "replay/replay_images.h"
#include "tessera/grow.h"
#include "tessera/cycle.h"

#define CORE_MODEL "H100-80GB"         /* a label: the replays count GPUs only */
#define CORE_NODE_CPU_MILLI 1000000
#define CORE_NODE_MEM_MIB 100000000
#define CORE_CYCLES_MAX 16              /* cycles in one decision, while some preempt */

typedef struct core_job {
    ts_request task[2];   /* [0] full tasks, [1] the remainder task */
    ts_request *tasks;    /* ntasks, built at its size (room for its largest) */
    int ntasks;
    int min, size;        /* its GPUs asked in the view, and held or asked now (elastic) */
    int before;           /* resized: the size it held before, 0 = not resized */
    ts_alloc *allocs;     /* while running */
    int tier;
    double start_s;
    double attained_gpu_s; /* GPU-s of its finished runs */
    double queued_s;       /* when it last began to wait (0: its submission) */
    double submit_s;
    bool seen;             /* it has been in a cycle */
    double est_s;          /* the cycle's start estimate in its first cycle, or -1 */
    double first_start_s;  /* -1 until it starts */
    double preempted_at[4];
    double pull_s;         /* its image's wait at its last start (tessera-img) */
    bool stopped;          /* preempted in this decision */
} core_job;

typedef struct wkey {
    int level;
    double attained;
    int j;
} wkey;

typedef struct core_state {
    int njobs, ntenants;
    bool built;
    ts_cluster *c;
    ts_tenants *ts;
    ts_quota *q;
    ts_sched *s;
    ts_decision d;
    core_job *jobs;
    ts_request *tasks;     /* storage for every job's tasks */
    bool *running;
    ts_job *wv, *rv;
    int *wi, *ri;
    wkey *wk;
    int gpn;
    bool fifo_level;       /* the config ranks a las level by arrival */
    int64_t *gsum;         /* [tenants] guaranteed use, as this decision assigns tiers */
    int lastnw;            /* waiting jobs in the last cycle */
    struct probe *probe;   /* TS_REPLAY_DEFICIT_PROBE set: where guarantees wait */
    int images;            /* 0 none; tessera-img: 2, told to the cycle; -blind: 1, not */
    replay_images *img;    /* the pull-time model (replay_images.c), once built */
    void *block;           /* jobs, running, wv..wk and gsum, sized once */
    long moves, time_shares; /* the decisions' preemptions of those kinds */
} core_state;

/* ---- deficit probe (TS_REPLAY_DEFICIT_PROBE=1): where a guarantee waits --
 * After each decision, per tenant in deficit as replay_timeline.c counts it
 * (its smallest waiting job fits its unused guarantee), the deficit GPUs
 * times the time to the next decision go to a bucket named by that job's
 * pending reason and the start of its why (digits dropped); printed to
 * stderr when the policy is freed. A debugging aid for the sim only. */
#define PROBE_BUCKETS 512
#define PROBE_KEY_CHARS 72
typedef struct probe_bucket {
    char key[PROBE_KEY_CHARS + 24];
    double gpu_s;
    long n;
} probe_bucket;
typedef struct probe {
    double last_s;
    int nt;
    double *deficit; /* [ntenants] GPUs short after the last decision */
    int *bucket;     /* [ntenants] its bucket */
    double *tgpu_s;  /* [ntenants] deficit GPU-s so far */
    probe_bucket b[PROBE_BUCKETS];
    int nb;
    void *block;     /* deficit, bucket and tgpu_s: one allocation */
} probe;

static int probe_bucket_of(probe *pr, const char *reason, const char *why)
{
    char key[sizeof pr->b[0].key];
    int n = snprintf(key, sizeof key, "%s: ", reason);
    for (const char *c = why; *c && n < (int)sizeof key - 1 && c - why < PROBE_KEY_CHARS; c++)
        if (!(*c >= '0' && *c <= '9'))
            key[n++] = *c;
    key[n] = 0;
    for (int k = 0; k < pr->nb; k++)
        if (strcmp(pr->b[k].key, key) == 0)
            return k;
    if (pr->nb == PROBE_BUCKETS)
        return PROBE_BUCKETS - 1;
    snprintf(pr->b[pr->nb].key, sizeof pr->b[0].key, "%s", key);
    return pr->nb++;
}

static void probe_account(core_state *s, double now)
{
    probe *pr = s->probe;
    for (int t = 0; t < pr->nt; t++) {
        double g = pr->deficit[t] * (now - pr->last_s);
        if (g > 0) {
            pr->b[pr->bucket[t]].gpu_s += g;
            pr->b[pr->bucket[t]].n++;
            pr->tgpu_s[t] += g;
        }
        pr->deficit[t] = 0;
    }
    pr->last_s = now;
}

/* Whether one node could hold g GPUs for tenant st: A with free GPUs and
 * loans older than the reclaim floor, B only with younger loans too, C not
 * even then (other tenants' guaranteed or non-loan work in the way); G for
 * a job wider than a node. */
static const char *probe_room(core_state *s, const ts_replay_view *v, int st, long g)
{
    if (g > s->gpn)
        return "G";
    int dim = ts_res_gpu(ts_gpu_model_lookup(CORE_MODEL));
    int nn = s->c->nnodes;
    int *old = calloc((size_t)nn * 2, sizeof *old);
    if (!old)
        return "?";
    int *young = old + nn;
    for (int i = 0; i < v->npending; i++) {
        int j = v->pending[i];
        const core_job *cj = &s->jobs[j];
        int jt = 1 + v->jobs[j].tenant;
        if (!s->running[j] || jt == st || cj->tier != TS_TIER_OPPORTUNISTIC ||
            ts_quota_borrowed(s->q, jt, dim) <= 0)
            continue;
        int recent = 0;
        for (int k = 0; k < 4; k++)
            recent += cj->preempted_at[k] > 0.0 && v->now_s - cj->preempted_at[k] < 3600.0;
        if (recent >= 3)
            continue; /* at its hour limit: counted as no room */
        for (int k = 0; k < cj->ntasks; k++)
            (v->now_s - cj->start_s >= 60.0 ? old : young)[cj->allocs[k].node] +=
                cj->allocs[k].ngpu;
    }
    const char *r = "C";
    for (int n = 0; n < nn; n++) {
        int f = s->c->nodes[n].gpus_free;
        if (f + old[n] >= g) {
            r = "A";
            break;
        }
        if (f + old[n] + young[n] >= g)
            r = "B";
    }
    free(old);
    return r;
}

/* After a decision's cycles: each tenant's deficit and why (the last
 * cycle's pending reasons, for the jobs that still wait). */
static void probe_note(core_state *s, const ts_replay_view *v, int nw)
{
    probe *pr = s->probe;
    int dim = ts_res_gpu(ts_gpu_model_lookup(CORE_MODEL));
    for (int t = 0; t < pr->nt; t++) {
        int st = 1 + t;
        long held = (long)(ts_quota_usage(s->q, st, dim) / TS_MILLI_PER_GPU);
        long guar = (long)(ts_quota_tenants(s->q)->t[st].guaranteed[dim] / TS_MILLI_PER_GPU);
        long dem = held, small = 0;
        int smallk = -1;
        for (int k = 0; k < nw; k++) {
            int j = s->wi[k];
            if (v->jobs[j].tenant != t || s->running[j])
                continue;
            dem += v->jobs[j].gpus;
            if (smallk < 0 || v->jobs[j].gpus < small) {
                small = v->jobs[j].gpus;
                smallk = k;
            }
        }
        long ent = dem < guar ? dem : guar;
        if (smallk < 0 || small > guar - held || ent <= held)
            continue;
        pr->deficit[t] = (double)(ent - held);
        const ts_cycle_pending *p = &s->d.pending[smallk];
        char reason[64];
        snprintf(reason, sizeof reason, "%s g%ld %s", probe_room(s, v, st, small),
                 small, ts_pending_name(p->reason));
        pr->bucket[t] = probe_bucket_of(pr, reason, p->why ? p->why : "");
    }
}

static int cmp_bucket(const void *a, const void *b)
{
    const probe_bucket *x = a, *y = b;
    return (x->gpu_s < y->gpu_s) - (x->gpu_s > y->gpu_s);
}

static void probe_print(probe *pr)
{
    double total = 0;
    for (int t = 0; t < pr->nt; t++)
        total += pr->tgpu_s[t];
    fprintf(stderr, "deficit probe: %.0f GPU-s\n", total);
    for (int t = 0; t < pr->nt; t++)
        if (pr->tgpu_s[t] > 0)
            fprintf(stderr, "  tenant %d: %.0f\n", t, pr->tgpu_s[t]);
    qsort(pr->b, (size_t)pr->nb, sizeof *pr->b, cmp_bucket);
    for (int k = 0; k < pr->nb && k < 40; k++)
        fprintf(stderr, "  %12.0f %8ld  %s\n", pr->b[k].gpu_s, pr->b[k].n, pr->b[k].key);
}

static void core_free(void *p)
{
    core_state *s = p;
    if (!s)
        return;
    ts_decision_fini(&s->d);
    ts_sched_free(s->s);
    ts_quota_free(s->q);
    ts_tenants_free(s->ts);
    ts_cluster_free(s->c);
    for (int j = 0; s->jobs && j < s->njobs; j++)
        free(s->jobs[j].allocs);
    free(s->block);
    free(s->tasks);
    if (s->probe) {
        probe_print(s->probe);
        free(s->probe->block);
        free(s->probe);
    }
    replay_images_print(s->img, stderr, s->images == 2 ? "tessera-img" : "tessera-img-blind");
    replay_images_free(s->img);
    free(s);
}

static int core_init(void **out, int njobs, int ntenants, ts_err *err)
{
    core_state *s = calloc(1, sizeof *s);
    size_t n = (size_t)(njobs > 0 ? njobs : 1);
    if (s) {
        s->njobs = njobs;
        s->ntenants = ntenants;
        ts_decision_init(&s->d);
        ts_block_part parts[] = {
            TS_BLOCK_PART(s->jobs, n), TS_BLOCK_PART(s->running, n), TS_BLOCK_PART(s->wv, n),
            TS_BLOCK_PART(s->rv, n),   TS_BLOCK_PART(s->wi, n),      TS_BLOCK_PART(s->ri, n),
            TS_BLOCK_PART(s->wk, n),   TS_BLOCK_PART(s->gsum, (size_t)ntenants + 2)};
        s->block = ts_block_alloc(parts, sizeof parts / sizeof *parts);
    }
    if (!s || !s->block) {
        core_free(s);
        return ts_err_set(err, TS_ENOMEM, "replay policy core: out of memory");
    }
    const char *pv = getenv("TS_REPLAY_DEFICIT_PROBE");
    if (pv && *pv && ntenants > 0) {
        probe *pr = calloc(1, sizeof *pr);
        if (pr) {
            size_t nt = (size_t)ntenants;
            ts_block_part parts[] = {TS_BLOCK_PART(pr->deficit, nt),
                                     TS_BLOCK_PART(pr->bucket, nt),
                                     TS_BLOCK_PART(pr->tgpu_s, nt)};
            pr->nt = ntenants;
            if (!(pr->block = ts_block_alloc(parts, sizeof parts / sizeof *parts))) {
                free(pr); /* a debugging aid: without memory for it, no probe */
                pr = NULL;
            }
        }
        s->probe = pr;
    }
    *out = s;
    return 0;
}

/* The cluster, tenants and scheduler, once the first view says their sizes. */
/* Tasks a job of g GPUs is: node-sized ones and the remainder. */
static int tasks_for(const core_state *s, int g)
{
    return g <= s->gpn ? 1 : (g + s->gpn - 1) / s->gpn;
}

/* The most GPUs job j may hold (its elastic maximum, else its size). */
static int largest(const ts_replay_view *v, int j)
{
    int g = v->jobs[j].gpus;
    return v->elastic_max && v->elastic_max[j] > g ? v->elastic_max[j] : g;
}

/* Builds cj's tasks for g GPUs (room for them was kept at build). */
static void set_size(const core_state *s, core_job *cj, int g)
{
    cj->size = g;
    cj->ntasks = tasks_for(s, g);
    for (int t = 0; t < cj->ntasks; t++) {
        int take = g - t * s->gpn < s->gpn ? g - t * s->gpn : s->gpn;
        cj->tasks[t] = (ts_request){.cpu_milli = 1000, .mem_mib = 1024, .num_gpu = take,
                                    .gpu_milli = TS_MILLI_PER_GPU, .mig_profile = -1};
    }
}

static int build(core_state *s, const ts_replay_view *v)
{
    ts_err err;
    s->gpn = v->gpus_per_node > 0 ? v->gpus_per_node : TS_REPLAY_PHILLY_GPUS_PER_NODE;
    int nodes = v->total_gpus / s->gpn;
    s->c = ts_cluster_new();
    s->ts = ts_tenants_new();
    if (!s->c || !s->ts)
        return TS_ENOMEM;
    for (int i = 0; i < nodes; i++) {
        char name[32];
        snprintf(name, sizeof name, "n%05d", i);
        ts_node_spec ns = {.name = name, .gpu_model = CORE_MODEL, .ngpu = s->gpn,
                           .cpu_milli = CORE_NODE_CPU_MILLI, .mem_mib = CORE_NODE_MEM_MIB,
                           .gpu_mode = TS_GPU_WHOLE};
        if (ts_cluster_add_node(s->c, &ns, &err) < 0)
            return err.code;
    }
    int dim = ts_res_gpu(ts_gpu_model_lookup(CORE_MODEL));
    int org = ts_tenant_add(s->ts, "replay", NULL, &err);
    if (org < 0)
        return org;
    int64_t total = 0;
    for (int t = 0; t < v->ntenants; t++)
        total += (int64_t)v->tenants[t].gpus * TS_MILLI_PER_GPU;
    if (total > 0 &&
        ts_tenant_set_quota(s->ts, org, dim, total, TS_QUOTA_UNLIMITED, TS_QUOTA_UNLIMITED,
                            &err) != 0)
        return err.code;
    for (int t = 0; t < (v->ntenants > 0 ? v->ntenants : 1); t++) {
        char name[TS_NAME_MAX];
        snprintf(name, sizeof name, "t%d", t);
        int id = ts_tenant_add(s->ts, name, "replay", &err);
        if (id < 0)
            return id;
        if (v->ntenants > 0 &&
            ts_tenant_set_quota(s->ts, id, dim, (int64_t)v->tenants[t].gpus * TS_MILLI_PER_GPU,
                                TS_QUOTA_UNLIMITED, TS_QUOTA_UNLIMITED, &err) != 0)
            return err.code;
        /* fair share of what is lent in proportion to the guarantee, as the
         * replay's fairness figure weighs it (tenants_file weight) */
        if (v->ntenants > 0 && total > 0 &&
            ts_tenant_set_weight(s->ts, id, (double)v->tenants[t].gpus * TS_MILLI_PER_GPU *
                                                v->ntenants / (double)total, &err) != 0)
            return err.code;
    }
    /* tesserad's default configuration unless the replay was given one
     * (jobs give no grace: the engine charges restarts and lost progress
     * itself) */
    ts_sched_config cfg;
    if (v->sched)
        cfg = *v->sched;
    else
        ts_sched_config_default(&cfg);
    s->fifo_level = cfg.las_fifo_within_level;
    int rc = ts_quota_new(s->ts, TS_HALF_LIFE_DEFAULT_S, &s->q, &err);
    if (rc == 0)
        rc = ts_sched_new(s->c, s->q, &cfg, &s->s, &err);
    if (rc != 0)
        return rc;
    int total_tasks = 0;
    for (int j = 0; j < s->njobs; j++)
        total_tasks += tasks_for(s, largest(v, j));
    s->tasks = calloc((size_t)(total_tasks > 0 ? total_tasks : 1), sizeof *s->tasks);
    if (!s->tasks)
        return TS_ENOMEM;
    int k = 0;
    for (int j = 0; j < s->njobs; j++) {
        core_job *cj = &s->jobs[j];
        int g = v->jobs[j].gpus;
        cj->submit_s = v->jobs[j].submit_s;
        cj->est_s = cj->first_start_s = -1.0;
        cj->tasks = &s->tasks[k];
        k += tasks_for(s, largest(v, j));
        cj->min = g;
        set_size(s, cj, g);
    }
    if (s->images && !(s->img = replay_images_new(s->njobs, nodes)))
        return TS_ENOMEM;
    s->built = true;
    return 0;
}

static ts_job view_job(const core_state *s, const ts_replay_view *v, int j)
{
    const core_job *cj = &s->jobs[j];
    int tenant = v->ntenants > 0 ? 1 + v->jobs[j].tenant : 1;
    bool elastic = v->elastic_max && v->elastic_max[j] > cj->min;
    return (ts_job){.elastic_min_gpus = elastic ? cj->min : 0,
                    .elastic_max_gpus = elastic ? v->elastic_max[j] : 0,
                    .elastic_speedup = elastic && v->elastic_speedup ? v->elastic_speedup[j]
                                                                     : NULL,
                    .elastic_left_s = elastic && v->elastic_left_s ? v->elastic_left_s[j] : 0,.id = j + 1, .tenant = tenant, .tier = cj->tier,
                    .submit_s = v->jobs[j].submit_s, .tasks = cj->tasks, .ntasks = cj->ntasks,
                    /* as a job spec that names no level: compact first
                     * (docs/job-spec.md, topology) */
                    .required_level = TS_GANG_LEVEL_ANY, .preferred_level = TS_GANG_LEVEL_NODE,
                    .ckpt_grace_s = 0.0, .allocs = cj->allocs, .start_s = cj->start_s,
                    .last_ckpt_s = cj->start_s, .attained_gpu_s = cj->attained_gpu_s,
                    .queued_s = cj->queued_s, .image = replay_images_of(s->img, j)};
}

/* A job stops (finished or preempted): its GPUs go back, its run counts as
 * attained service, and it waits again from now. */
static void stop(core_state *s, const ts_replay_view *v, int j)
{
    core_job *cj = &s->jobs[j];
    ts_job job = view_job(s, v, j);
    ts_sched_stop(s->s, &job, v->now_s, NULL);
    cj->attained_gpu_s += (v->now_s - cj->start_s) * cj->size;
    cj->queued_s = v->now_s;
    free(cj->allocs);
    cj->allocs = NULL;
    s->running[j] = false;
}

static int cmp_wkey(const void *a, const void *b)
{
    const wkey *x = a, *y = b;
    if (x->level != y->level)
        return x->level - y->level;
    if (x->attained != y->attained) /* 0 for all when a level is in arrival order */
        return x->attained < y->attained ? -1 : 1;
    return (x->j > y->j) - (x->j < y->j);
}

/* The waiting jobs, tiered as a user would submit them: in the order the
 * scheduler ranks a tenant's jobs (las level, then arrival; or attained
 * service, then arrival, without cfg.las_fifo_within_level),
 * those that fit the tenant's unused guarantee are guaranteed, the rest may
 * only borrow. Fills s->wv/s->wi; returns how many. */
static int waiting_view(core_state *s, const ts_replay_view *v)
{
    int dim = ts_res_gpu(ts_gpu_model_lookup(CORE_MODEL));
    for (int t = 0; t < ts_quota_tenants(s->q)->n; t++)
        s->gsum[t] = ts_quota_usage_tier(s->q, t, TS_TIER_GUARANTEED, dim);
    int n = 0;
    for (int i = 0; i < v->npending; i++) {
        int j = v->pending[i];
        if (!s->running[j])
            s->wk[n++] = (wkey){ts_sched_las_level(s->s, s->jobs[j].attained_gpu_s),
                                s->fifo_level ? 0.0 : s->jobs[j].attained_gpu_s, j};
    }
    qsort(s->wk, (size_t)n, sizeof *s->wk, cmp_wkey);
    for (int k = 0; k < n; k++) {
        int j = s->wk[k].j;
        core_job *cj = &s->jobs[j];
        int t = v->ntenants > 0 ? 1 + v->jobs[j].tenant : 1;
        int64_t need = (int64_t)cj->size * TS_MILLI_PER_GPU;
        int64_t guar = ts_quota_tenants(s->q)->t[t].guaranteed[dim];
        cj->tier = s->gsum[t] + need <= guar ? TS_TIER_GUARANTEED : TS_TIER_OPPORTUNISTIC;
        if (cj->tier == TS_TIER_GUARANTEED)
            s->gsum[t] += need;
        s->wi[k] = j;
        s->wv[k] = view_job(s, v, j);
    }
    return n;
}

/* One cycle; its victims stop at once (the replay has no grace); returns how
 * many were preempted, or -1 when the cycle failed. */
static int core_cycle(core_state *s, const ts_replay_view *v)
{
    int nr = 0;
    for (int i = 0; i < v->npending; i++) {
        int j = v->pending[i];
        core_job *cj = &s->jobs[j];
        if (!s->running[j])
            continue;
        s->ri[nr] = j;
        s->rv[nr] = view_job(s, v, j);
        int recent = 0;
        for (int k = 0; k < 4; k++)
            recent += cj->preempted_at[k] > 0.0 && v->now_s - cj->preempted_at[k] < 3600.0;
        s->rv[nr].preemptions_hour = recent;
        /* what a preemption now would lose, as the engine counts it */
        double risk = v->at_risk_s ? v->at_risk_s[j] : 0.0;
        s->rv[nr++].last_ckpt_s = v->now_s - risk > cj->start_s ? v->now_s - risk : cj->start_s;
    }
    int nw = waiting_view(s, v);
    s->lastnw = nw;
    ts_err err;
    replay_images_settle(s->img, v->now_s);
    if (s->images == 2 && ts_sched_set_images(s->s, replay_images_table(s->img), &err) != 0)
        return -1;
    if (ts_sched_cycle(s->s, v->now_s, s->wv, nw, s->rv, nr, &s->d, &err) != 0)
        return -1;
    /* the estimate a job is given when it first waits (issue: measured
     * against when it really starts) */
    for (int k = 0; k < nw; k++) {
        core_job *cj = &s->jobs[s->wi[k]];
        if (!cj->seen) {
            cj->seen = true;
            cj->est_s = s->d.pending[k].estimated_s;
        }
    }
    /* the nodes the decision names begin pulling the planned job's image
     * (the agents' prefetch of a reservation or an estimate) */
    if (s->img)
        replay_images_prefetch(s->img, &s->d, s->wi, v->now_s);
    for (int k = 0; k < s->d.npreempts; k++) {
        int j = s->ri[s->d.preempts[k].victim];
        core_job *cj = &s->jobs[j];
        memmove(cj->preempted_at + 1, cj->preempted_at, 3 * sizeof *cj->preempted_at);
        cj->preempted_at[0] = v->now_s;
        cj->stopped = true;
        s->moves += s->d.preempts[k].move;
        s->time_shares += s->d.preempts[k].time_sharing;
        stop(s, v, j);
    }
    for (int k = 0; k < s->d.nstarts; k++) {
        int j = s->wi[s->d.starts[k].job];
        core_job *cj = &s->jobs[j];
        cj->allocs = malloc((size_t)cj->ntasks * sizeof *cj->allocs);
        if (!cj->allocs) {
            ts_job job = view_job(s, v, j);
            job.allocs = s->d.starts[k].allocs;
            ts_sched_stop(s->s, &job, v->now_s, NULL);
            continue;
        }
        memcpy(cj->allocs, s->d.starts[k].allocs, (size_t)cj->ntasks * sizeof *cj->allocs);
        /* queued: it had waited in the queue (not started at its arrival) */
        bool queued = v->now_s > cj->queued_s && v->now_s > cj->submit_s;
        cj->start_s = v->now_s;
        if (s->img)
            cj->pull_s = replay_images_start(s->img, j, cj->allocs, cj->ntasks, queued,
                                             v->now_s);
        if (cj->first_start_s < 0.0)
            cj->first_start_s = v->now_s;
        s->running[j] = true;
    }
    /* an elastic job resized: it stops (its checkpoint, as a preemption's)
     * and waits at its new size; the next cycle of this decision places it */
    for (int k = 0; k < s->d.nresizes; k++) {
        int j = s->ri[s->d.resizes[k].job];
        if (!s->running[j])
            continue;
        stop(s, v, j);
        if (s->jobs[j].before == 0)
            s->jobs[j].before = s->jobs[j].size;
        set_size(s, &s->jobs[j], s->d.resizes[k].gpus);
    }
    return s->d.npreempts + s->d.nresizes;
}

static void core_decide(void *p, const ts_replay_view *v, bool *run)
{
    core_state *s = p;
    if (!s->built && build(s, v) != 0)
        return; /* nothing runs; the engine reports a stuck replay */
    /* what finished since the last decision gives its GPUs back */
    int pi = 0;
    for (int j = 0; j < s->njobs; j++) {
        while (pi < v->npending && v->pending[pi] < j)
            pi++;
        bool pending = pi < v->npending && v->pending[pi] == j;
        s->jobs[j].stopped = false;
        if (s->running[j] && !pending)
            stop(s, v, j);
    }
    /* a preemption's victims are gone at once: the preemptors start in the
     * next cycle of the same decision (as tesserad's next cycle after the
     * grace) */
    if (s->probe)
        probe_account(s, v->now_s);
    int nw = 0;
    for (int round = 0; round < CORE_CYCLES_MAX; round++)
        if ((nw = core_cycle(s, v)) <= 0)
            break;
    /* a job resized this decision that the cycles could not place at its
     * new size asks for the size it had (its GPUs were freed for it): one
     * more cycle, which resizes nothing */
    bool back = false;
    for (int j = 0; j < s->njobs; j++) {
        core_job *cj = &s->jobs[j];
        if (!s->running[j] && cj->before > 0 && cj->size != cj->before) {
            set_size(s, cj, cj->before);
            back = true;
        }
        cj->before = 0;
    }
    if (back && nw >= 0) {
        ts_replay_view rigid = *v;
        rigid.elastic_max = NULL;
        nw = core_cycle(s, &rigid);
    }
    if (s->probe && nw >= 0)
        probe_note(s, v, s->lastnw);
    /* one still not placed asks for its minimum again */
    for (int j = 0; j < s->njobs; j++)
        if (!s->running[j] && s->jobs[j].size != s->jobs[j].min)
            set_size(s, &s->jobs[j], s->jobs[j].min);
    for (int i = 0; i < v->npending; i++)
        run[v->pending[i]] = s->running[v->pending[i]];
}

/* Stopped by this decision and running again: moved. */
static bool core_restarted(void *p, int j)
{
    const core_state *s = p;
    return s->built && s->running[j] && s->jobs[j].stopped;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Jobs that waited (first started after the decision they arrived at): how
 * many had an estimate then, and its absolute error against the start. */
static void core_estimates(void *p, ts_replay_result *res)
{
    core_state *s = p;
    double *err = malloc((size_t)(s->njobs > 0 ? s->njobs : 1) * sizeof *err);
    int n = 0, waited = 0;
    for (int j = 0; err && j < s->njobs; j++) {
        const core_job *cj = &s->jobs[j];
        if (cj->first_start_s < 0.0 || cj->first_start_s <= cj->submit_s)
            continue;
        waited++;
        if (cj->est_s > 0.0)
            err[n++] = fabs(cj->est_s - cj->first_start_s);
    }
    qsort(err, (size_t)n, sizeof *err, cmp_double);
    res->est_waited = waited;
    res->est_jobs = n;
    res->est_median_err_s = n ? replay_percentile(err, n, 50) : 0.0;
    res->est_p90_err_s = n ? replay_percentile(err, n, 90) : 0.0;
    res->moves = s->moves;
    res->time_shares = s->time_shares;
    free(err);
}

static int core_placement(void *state, int j, int *per_node, int nodes)
{
    core_state *s = state;
    const core_job *cj = &s->jobs[j];
    int g = 0;
    for (int k = 0; cj->allocs && k < cj->ntasks; k++)
        if (cj->allocs[k].node >= 0 && cj->allocs[k].node < nodes) {
            per_node[cj->allocs[k].node] += cj->allocs[k].ngpu;
            g += cj->allocs[k].ngpu;
        }
    return g;
}

static int core_size(void *state, int j)
{
    const core_state *s = state;
    return s->running[j] ? s->jobs[j].size : 0;
}

/* The same cycle with the image model (replay_images.c): told where images
 * are (tessera-img) or not (tessera-img-blind), the figures to stderr. */
static int core_init_img(void **out, int njobs, int ntenants, ts_err *err)
{
    int rc = core_init(out, njobs, ntenants, err);
    if (rc == 0)
        ((core_state *)*out)->images = 2;
    return rc;
}

static int core_init_img_blind(void **out, int njobs, int ntenants, ts_err *err)
{
    int rc = core_init(out, njobs, ntenants, err);
    if (rc == 0)
        ((core_state *)*out)->images = 1;
    return rc;
}

const ts_replay_policy_ops ts_replay_tessera_img_ops = {
    "tessera-img", true, core_init_img, core_decide, NULL, core_free, core_estimates,
    core_placement, core_size, core_restarted};
const ts_replay_policy_ops ts_replay_tessera_img_blind_ops = {
    "tessera-img-blind", true, core_init_img_blind, core_decide, NULL, core_free,
    core_estimates, core_placement, core_size, core_restarted};

const ts_replay_policy_ops ts_replay_core_ops = {"core", true, core_init, core_decide, NULL,
                                                 core_free, core_estimates, core_placement,
                                                 core_size, core_restarted};
/* `tessera` in every table is the same: the production cycle */
const ts_replay_policy_ops ts_replay_tessera_ops = {"tessera", true, core_init, core_decide,
                                                    NULL, core_free, core_estimates,
                                                    core_placement, core_size, core_restarted};

bool ts_replay_runs_cycle(const ts_replay_policy_ops *ops)
{
    return ops == &ts_replay_tessera_ops || ops == &ts_replay_core_ops ||
           ops == &ts_replay_tessera_img_ops || ops == &ts_replay_tessera_img_blind_ops;
}

double replay_start_delay_s(const ts_replay_policy_ops *ops, void *state, int j)
{
    if (ops != &ts_replay_tessera_img_ops && ops != &ts_replay_tessera_img_blind_ops)
        return 0.0;
    const core_state *s = state;
    return s && j >= 0 && j < s->njobs ? s->jobs[j].pull_s : 0.0;
}
