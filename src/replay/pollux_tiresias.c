/*
 * pollux_tiresias.c - a Pollux workload file, and the Pollux artifact's
 * Tiresias(+TunedJobs) run through the job model (pollux_model.h), so that
 * the model can be checked against the published per-workload means
 * (README section B: 2,092 / 4,038 / 6,182 / 10,040 s).
 */
#include <stdlib.h>
#include <string.h>

#include "model/csv_reader.h"
#include "replay/pollux_model.h"

#define ROW_MAX 512
#define FIELDS_MAX 8
#define DEMOTE_GPU_S (16 * 3600) /* Q0 -> Q1 at this much GPU time */
#define SUBMIT_MAX_S 1e8
#define GPUS_MAX 100000

int ts_pm_load_workload(const char *buf, size_t len, const char *fname,
                        const ts_pm_app *const *apps, int napps, ts_pm_wjob **out, int *n,
                        ts_err *err)
{
    ts_csv_lines it = {buf, fname, len, 0, 0};
    char row[ROW_MAX], *f[FIELDS_MAX];
    ts_pm_wjob *jobs = NULL;
    int nj = 0, cap = 0, rc;
    *out = NULL;
    *n = 0;
    while ((rc = ts_csv_next(&it, row, sizeof row, err)) == 1) {
        if (it.line == 1 || row[0] == '\0')
            continue;
        int nf = ts_csv_split(row, f, FIELDS_MAX);
        if (nf != 5) {
            rc = ts_err_set(err, TS_EINVAL,
                            "%s:%d: expected 5 columns (name,time,application,num_replicas,"
                            "batch_size), got %d", fname, it.line, nf);
            break;
        }
        if (nj == cap) {
            cap = cap ? cap * 2 : 256;
            ts_pm_wjob *p = realloc(jobs, (size_t)cap * sizeof *p);
            if (!p) {
                rc = ts_err_set(err, TS_ENOMEM, "out of memory");
                break;
            }
            jobs = p;
        }
        ts_pm_wjob *j = &jobs[nj];
        if (strlen(f[0]) >= sizeof j->name) {
            rc = ts_err_set(err, TS_EINVAL, "%s:%d: name: longer than %zu bytes", fname, it.line,
                            sizeof j->name - 1);
            break;
        }
        strcpy(j->name, f[0]);
        j->app = -1;
        for (int a = 0; a < napps; a++)
            if (strcmp(replay_pm_app_name(apps[a]), f[2]) == 0)
                j->app = a;
        if (j->app < 0) {
            rc = ts_err_set(err, TS_EINVAL, "%s:%d: application: no profile for \"%s\"", fname,
                            it.line, f[2]);
            break;
        }
        double t, r, b;
        if ((rc = ts_csv_number(fname, it.line, "time", f[1], 0, SUBMIT_MAX_S, true, &t, err)) ||
            (rc = ts_csv_number(fname, it.line, "num_replicas", f[3], 1, GPUS_MAX, true, &r,
                                err)) ||
            (rc = ts_csv_number(fname, it.line, "batch_size", f[4], 1, 1e9, true, &b, err)))
            break;
        if (nj > 0 && (int)t < jobs[nj - 1].submit_s) {
            rc = ts_err_set(err, TS_EINVAL,
                            "%s:%d: time: must not be earlier than the row above's (%d), got %s",
                            fname, it.line, jobs[nj - 1].submit_s, f[1]);
            break;
        }
        j->submit_s = (int)t;
        j->replicas = (int)r;
        j->batch_size = (int)b;
        nj++;
    }
    if (rc < 0) {
        free(jobs);
        return rc;
    }
    *out = jobs;
    *n = nj;
    return 0;
}

typedef struct tjob {
    bool seen, running, in_q0, demoted;
    long last_check, executed;
} tjob;

typedef struct tstate {
    int *q0, *q1; /* job indices, in queue order */
    int n0, n1;
    tjob *t;
} tstate;

static void queue_remove(int *q, int *n, int j)
{
    for (int i = 0; i < *n; i++)
        if (q[i] == j) {
            memmove(&q[i], &q[i + 1], (size_t)(*n - i - 1) * sizeof *q);
            (*n)--;
            return;
        }
}

/* One decision of the policy at time now: the new allocation per job
 * (alloc[j * nodes + node] = GPUs) for the active jobs. */
static void tiresias_round(tstate *s, const ts_pm_wjob *jobs, const bool *active, int n, long now,
                           int nodes, int gpus_per_node, int *alloc)
{
    for (int k = 0; k < s->n0;) /* completed jobs leave */
        if (!active[s->q0[k]])
            queue_remove(s->q0, &s->n0, s->q0[k]);
        else
            k++;
    for (int k = 0; k < s->n1;)
        if (!active[s->q1[k]])
            queue_remove(s->q1, &s->n1, s->q1[k]);
        else
            k++;
    for (int j = 0; j < n; j++) {
        if (!active[j])
            continue;
        tjob *t = &s->t[j];
        if (!t->seen) {
            t->seen = true;
            t->in_q0 = true;
            s->q0[s->n0++] = j;
        }
        long dt = now - t->last_check;
        t->last_check = now;
        if (t->running) {
            t->executed += dt;
            if (t->in_q0 && t->executed * jobs[j].replicas >= DEMOTE_GPU_S) {
                queue_remove(s->q0, &s->n0, j);
                s->q1[s->n1++] = j;
                t->in_q0 = false;
            }
        }
    }
    /* count-only check, Q0 then Q1; a job that does not fit is preempted */
    int free_gpus = nodes * gpus_per_node;
    for (int q = 0; q < 2; q++) {
        const int *qq = q ? s->q1 : s->q0;
        int nq = q ? s->n1 : s->n0;
        for (int k = 0; k < nq; k++) {
            int j = qq[k];
            if (jobs[j].replicas <= free_gpus) {
                s->t[j].running = true;
                free_gpus -= jobs[j].replicas;
            } else {
                s->t[j].running = false;
                memset(&alloc[(size_t)j * nodes], 0, (size_t)nodes * sizeof *alloc);
            }
        }
    }
    int *node_free = calloc((size_t)nodes, sizeof *node_free);
    if (!node_free)
        return;
    for (int i = 0; i < nodes; i++)
        node_free[i] = gpus_per_node;
    for (int j = 0; j < n; j++)
        if (active[j])
            for (int i = 0; i < nodes; i++)
                node_free[i] -= alloc[(size_t)j * nodes + i];
    /* a job started now takes whole nodes' free GPUs, most free first (the
     * first such node on ties), until it has its count */
    for (int q = 0; q < 2; q++) {
        const int *qq = q ? s->q1 : s->q0;
        int nq = q ? s->n1 : s->n0;
        for (int k = 0; k < nq; k++) {
            int j = qq[k], *row = &alloc[(size_t)j * nodes], have = 0;
            if (!s->t[j].running)
                continue;
            for (int i = 0; i < nodes; i++)
                have += row[i];
            if (have > 0)
                continue;
            replay_pm_fill_most_free(row, node_free, nodes, jobs[j].replicas); /* row is empty */
        }
    }
    free(node_free);
}

int ts_pm_run_tiresias(const ts_pm_app *const *apps, const ts_pm_wjob *jobs, int n, int nodes,
                       int gpus_per_node, long *jct_s, ts_pm_stats *st, ts_err *err)
{
    memset(st, 0, sizeof *st);
    if (nodes < 1 || gpus_per_node < 1 || nodes > TS_PM_NODES_MAX)
        return ts_err_set(err, TS_EINVAL, "cluster: nodes must be in [1, %d], GPUs per node >= 1",
                          TS_PM_NODES_MAX);
    for (int j = 0; j < n; j++)
        if (jobs[j].replicas > nodes * gpus_per_node)
            return ts_err_set(err, TS_EINVAL, "%s: num_replicas: %d, more than the cluster's %d",
                              jobs[j].name, jobs[j].replicas, nodes * gpus_per_node);
    ts_pm_job *pj = calloc((size_t)n + 1, sizeof *pj);
    bool *active = calloc((size_t)n + 1, sizeof *active);
    int *alloc = calloc((size_t)(n + 1) * nodes, sizeof *alloc);
    int *prev = calloc((size_t)(n + 1) * nodes, sizeof *prev);
    tstate s = {calloc((size_t)n + 1, sizeof(int)), calloc((size_t)n + 1, sizeof(int)), 0, 0,
                calloc((size_t)n + 1, sizeof(tjob))};
    int rc = 0;
    if (!pj || !active || !alloc || !prev || !s.q0 || !s.q1 || !s.t) {
        rc = ts_err_set(err, TS_ENOMEM, "out of memory");
        goto out;
    }
    for (int j = 0; j < n; j++)
        replay_pm_job_init(&pj[j], apps[jobs[j].app], jobs[j].submit_s, jobs[j].batch_size);
    long now = 0, held_gpu_s = 0;
    int left = n;
    while (left > 0) {
        held_gpu_s += replay_pm_round(pj, n);
        now += TS_PM_ROUND_S;
        int nact = 0;
        left = 0;
        for (int j = 0; j < n; j++) {
            active[j] = pj[j].done_s < 0 && jobs[j].submit_s <= now;
            nact += active[j];
            left += pj[j].done_s < 0;
        }
        if (nact == 0)
            continue;
        for (int j = 0; j < n; j++)
            if (!active[j])
                memset(&alloc[(size_t)j * nodes], 0, (size_t)nodes * sizeof *alloc);
        memcpy(prev, alloc, (size_t)n * nodes * sizeof *alloc);
        tiresias_round(&s, jobs, active, n, now, nodes, gpus_per_node, alloc);
        for (int j = 0; j < n; j++) {
            int *row = &alloc[(size_t)j * nodes], *p = &prev[(size_t)j * nodes];
            if (memcmp(row, p, (size_t)nodes * sizeof *row) == 0)
                continue;
            /* the nodes in the order their GPUs were taken, most free first:
             * the counts never grow along it, so sorting them down gives it */
            int cnt[TS_PM_NODES_MAX];
            replay_pm_job_reallocate(&pj[j], cnt, replay_pm_counts(row, nodes, cnt));
        }
        if (now > 100L * 24 * 3600) {
            rc = ts_err_set(err, TS_EINVAL, "replay: not done after 100 days of virtual time");
            goto out;
        }
    }
    replay_pm_summarise(jobs, pj, n, held_gpu_s, (long)nodes * gpus_per_node, jct_s, st);
out:
    free(pj);
    free(active);
    free(alloc);
    free(prev);
    free(s.q0);
    free(s.q1);
    free(s.t);
    return rc;
}
