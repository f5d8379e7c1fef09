/*
 * replay_policies.c - the baseline policies a replay can run.
 *
 * Each policy only marks which pending jobs run; the engine (replay_engine.c)
 * does time, restarts and count-only placement. The checks here are by GPU
 * count alone, as the published baselines do.
 *   fifo     non-preemptive; running jobs keep running, waiting ones start in
 *            arrival order until the first that does not fit (no skipping).
 *   sjf      the same, waiting jobs in order of total work (oracle).
 *   srtf     preemptive oracle: all pending jobs by remaining work; every job
 *            that still fits runs, the rest wait or are preempted.
 *   tiresias the Pollux artifact's discretised 2D-LAS (README B): Q0 in
 *            arrival order, Q1 in order of demotion; a job moves to Q1 once
 *            its held time x GPUs reaches 16 GPU-hours (held time counted
 *            between decisions, restart delays included); no promotion back;
 *            Q0 then Q1 walked, a job runs if it fits in what is unclaimed.
 */
#include <stdlib.h>
#include <string.h>

#include "replay/replay.h"

/* Attained service is a sum of float increments in event-driven mode. */
#define SERVICE_EPS_GPU_S 1e-6

/* ---- shared ---------------------------------------------------------- */

typedef struct order_state {
    int *idx;              /* scratch: pending indices in the policy's order */
    int njobs;
    /* tiresias only */
    unsigned char *queue;  /* 0 or 1 */
    long *demoted_seq;     /* order within Q1 */
    double *attained_gpu_s;
    long next_seq;
    double *keybuf;        /* sort key per job */
    struct keyed { double key; int job; } *kv; /* scratch for sort_by_key */
} order_state;

static void order_free(void *p)
{
    order_state *s = p;
    if (!s)
        return;
    free(s->idx);
    free(s->queue);
    free(s->demoted_seq);
    free(s->attained_gpu_s);
    free(s->keybuf);
    free(s->kv);
    free(s);
}

static int order_init(void **out, int njobs, int ntenants, ts_err *err)
{
    (void)ntenants; /* the baselines ignore tenants: siloed replays run them per partition */
    order_state *s = calloc(1, sizeof *s);
    size_t n = (size_t)(njobs > 0 ? njobs : 1);
    if (s) {
        s->njobs = njobs;
        s->idx = malloc(sizeof *s->idx * n);
        s->queue = calloc(n, sizeof *s->queue);
        s->demoted_seq = calloc(n, sizeof *s->demoted_seq);
        s->attained_gpu_s = calloc(n, sizeof *s->attained_gpu_s);
        s->keybuf = calloc(n, sizeof *s->keybuf);
        s->kv = malloc(sizeof *s->kv * n);
    }
    if (!s || !s->idx || !s->queue || !s->demoted_seq || !s->attained_gpu_s || !s->keybuf ||
        !s->kv) {
        order_free(s);
        return ts_err_set(err, TS_ENOMEM, "replay policy: out of memory");
    }
    *out = s;
    return 0;
}

static int cmp_keyed(const void *a, const void *b)
{
    const struct keyed *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return (x->job > y->job) - (x->job < y->job);
}

/* Sort idx[0..n-1] by keybuf[job], ties by job index (= arrival order), so
 * the order is total and the result does not depend on qsort's stability.
 * O(n log n): the Philly replay's queues reach thousands of jobs. */
static void sort_by_key(order_state *s, int n)
{
    for (int i = 0; i < n; i++)
        s->kv[i] = (struct keyed){s->keybuf[s->idx[i]], s->idx[i]};
    if (n > 1)
        qsort(s->kv, (size_t)n, sizeof *s->kv, cmp_keyed);
    for (int i = 0; i < n; i++)
        s->idx[i] = s->kv[i].job;
}

/* Non-preemptive: holders keep running; waiters in idx order until one does
 * not fit. */
static void run_blocking(order_state *s, const ts_replay_view *v, bool *run, int nwait)
{
    int free_gpus = v->total_gpus;
    for (int i = 0; i < v->npending; i++) {
        int j = v->pending[i];
        if (v->holding[j]) {
            run[j] = true;
            free_gpus -= v->jobs[j].gpus;
        }
    }
    for (int i = 0; i < nwait; i++) {
        int j = s->idx[i];
        if (v->jobs[j].gpus > free_gpus)
            break;
        run[j] = true;
        free_gpus -= v->jobs[j].gpus;
    }
}

/* Preemptive: everyone in idx order, each job runs if it still fits. */
static void run_skipping(const order_state *s, const ts_replay_view *v, bool *run, int n)
{
    int free_gpus = v->total_gpus;
    for (int i = 0; i < n; i++) {
        int j = s->idx[i];
        if (v->jobs[j].gpus <= free_gpus) {
            run[j] = true;
            free_gpus -= v->jobs[j].gpus;
        }
    }
}

/* ---- fifo / sjf ------------------------------------------------------ */

static void fifo_decide(void *p, const ts_replay_view *v, bool *run)
{
    order_state *s = p;
    int n = 0;
    for (int i = 0; i < v->npending; i++)
        if (!v->holding[v->pending[i]])
            s->idx[n++] = v->pending[i];
    run_blocking(s, v, run, n);
}

static void sjf_decide(void *p, const ts_replay_view *v, bool *run)
{
    order_state *s = p;
    int n = 0;
    for (int i = 0; i < v->npending; i++) {
        int j = v->pending[i];
        if (!v->holding[j]) {
            s->idx[n++] = j;
            s->keybuf[j] = v->jobs[j].work_s;
        }
    }
    sort_by_key(s, n);
    run_blocking(s, v, run, n);
}

/* ---- srtf ------------------------------------------------------------ */

static void srtf_decide(void *p, const ts_replay_view *v, bool *run)
{
    order_state *s = p;
    for (int i = 0; i < v->npending; i++) {
        int j = v->pending[i];
        s->idx[i] = j;
        s->keybuf[j] = v->work_left_s[j];
    }
    sort_by_key(s, v->npending);
    run_skipping(s, v, run, v->npending);
}

/* ---- tiresias -------------------------------------------------------- */

static void tiresias_decide(void *p, const ts_replay_view *v, bool *run)
{
    order_state *s = p;
    double held = v->now_s - v->since_s;
    /* account the interval just ended, demote in Q0 (arrival) order */
    for (int i = 0; i < v->npending; i++) {
        int j = v->pending[i];
        if (v->holding[j])
            s->attained_gpu_s[j] += held * v->jobs[j].gpus;
        if (s->queue[j] == 0 &&
            s->attained_gpu_s[j] >= TS_REPLAY_TIRESIAS_DEMOTE_GPU_S - SERVICE_EPS_GPU_S) {
            s->queue[j] = 1;
            s->demoted_seq[j] = s->next_seq++;
        }
    }
    int n = 0;
    for (int i = 0; i < v->npending; i++)
        if (s->queue[v->pending[i]] == 0)
            s->idx[n++] = v->pending[i];
    int n0 = n;
    for (int i = 0; i < v->npending; i++) {
        int j = v->pending[i];
        if (s->queue[j] == 1) {
            s->idx[n++] = j;
            s->keybuf[j] = (double)s->demoted_seq[j];
        }
    }
    /* sort only the Q1 part */
    order_state tail = *s;
    tail.idx = s->idx + n0;
    sort_by_key(&tail, n - n0);
    run_skipping(s, v, run, n);
}

/* Event-driven mode: the next time a running Q0 job reaches the threshold. */
static double tiresias_next_event(void *p, const ts_replay_view *v)
{
    order_state *s = p;
    double next = v->now_s;  /* "never" unless a demotion is ahead */
    for (int i = 0; i < v->npending; i++) {
        int j = v->pending[i];
        if (!v->holding[j] || s->queue[j] != 0)
            continue;
        double t = v->now_s +
                   (TS_REPLAY_TIRESIAS_DEMOTE_GPU_S - s->attained_gpu_s[j]) / v->jobs[j].gpus;
        if (next <= v->now_s || t < next)
            next = t;
    }
    return next;
}

/* ---- registry -------------------------------------------------------- */

static const ts_replay_policy_ops fifo_ops = {"fifo", false, order_init, fifo_decide, NULL,
                                              order_free, NULL, NULL, NULL, NULL};
static const ts_replay_policy_ops sjf_ops = {"sjf", false, order_init, sjf_decide, NULL,
                                             order_free, NULL, NULL, NULL, NULL};
static const ts_replay_policy_ops srtf_ops = {"srtf", true, order_init, srtf_decide, NULL,
                                              order_free, NULL, NULL, NULL, NULL};
static const ts_replay_policy_ops tiresias_ops = {"tiresias", true, order_init, tiresias_decide,
                                                  tiresias_next_event, order_free, NULL, NULL,
                                                  NULL, NULL};

static const ts_replay_policy_ops *const all_policies[] = {&fifo_ops, &sjf_ops, &srtf_ops,
                                                           &tiresias_ops, &ts_replay_tessera_ops,
                                                           &ts_replay_core_ops,
                                                           &ts_replay_tessera_img_ops,
                                                           &ts_replay_tessera_img_blind_ops,
                                                           NULL};

const ts_replay_policy_ops *const *ts_replay_policy_all(void)
{
    return all_policies;
}

const ts_replay_policy_ops *ts_replay_policy_find(const char *name)
{
    for (const ts_replay_policy_ops *const *p = all_policies; *p; p++)
        if (strcmp((*p)->name, name) == 0)
            return *p;
    return NULL;
}
