/*
 * metrics.c - /metrics in the Prometheus text format (version 0.0.4):
 * jobs by state and tenant, GPUs by state, each tenant's usage against its
 * guarantee, the queue-wait and scheduling-cycle histograms, fragmentation,
 * preemptions, HTTP answers. docs/metrics.md lists every series.
 *
 * A tenant's own token (viewer, user, tenant-admin) reads a page scoped to
 * its tenant: its tenant's series, and the cluster-wide series that count
 * nothing of another tenant (capacity, which GET /v1/nodes shows any token,
 * and the controller's own machinery). Series that add up every tenant's jobs
 * or requests (the job counters, the queue-wait histogram, HTTP answers,
 * reads served) are left out of it; the waiting reasons count its own jobs.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctld/ctld.h"
#include "ctld/http.h"
#include "ctld/ha.h"

typedef struct sbuf {
    char *p;
    size_t len, cap;
} sbuf;

static void put(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(sbuf *b, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0)
            return;
        if (b->p && b->len + (size_t)n < b->cap) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = b->cap ? b->cap * 2 : 16384;
        while (cap < b->len + (size_t)n + 1)
            cap *= 2;
        char *np = realloc(b->p, cap);
        if (!np)
            return;
        b->p = np;
        b->cap = cap;
    }
}

static void head(sbuf *b, const char *name, const char *type, const char *help)
{
    put(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void hist(sbuf *b, const char *name, const char *help, const uint64_t *h,
                 const double *bounds, int nb, double sum)
{
    head(b, name, "histogram", help);
    for (int i = 0; i < nb; i++)
        put(b, "%s_bucket{le=\"%g\"} %llu\n", name, bounds[i], (unsigned long long)h[i]);
    put(b, "%s_bucket{le=\"+Inf\"} %llu\n", name, (unsigned long long)h[nb]);
    put(b, "%s_sum %.6f\n%s_count %llu\n", name, sum, name, (unsigned long long)h[nb]);
}

/* Whether tenant t's series go on a page scoped to `only` (NULL: all). */
static bool shown(const ctld *c, int t, const char *only)
{
    return !only || strcmp(c->tenants->t[t].name, only) == 0;
}

/* Active jobs by state and tenant; the queue by why it waits (every reason,
 * 0 included, so a dashboard's query always has its series). */
static void metrics_jobs(ctld *c, sbuf *b, const char *only)
{
    /* counted as jobs change (state.c): a page costs the tenants, not the jobs */
    int nt = c->tenants->n < c->nqueued ? c->tenants->n : c->nqueued;
    head(b, "tessera_jobs", "gauge", "Active jobs by state and tenant.");
    for (int t = 0; c->queue && t < nt; t++)
        for (int s = 0; s < TS_JOB_STATES; s++)
            if (!ts_job_state_terminal(s) && shown(c, t, only))
                put(b, "tessera_jobs{state=\"%s\",tenant=\"%s\"} %lld\n", ts_job_state_name(s),
                    c->tenants->t[t].name, (long long)c->queue[t].by_state[s]);
    head(b, "tessera_jobs_waiting", "gauge",
         "Pending and held jobs by the reason they wait (the last cycle's).");
    int64_t by_reason[TS_PEND_LAST + 1] = {0};
    int last = -1; /* the reason matched last: most waiting jobs share a few */
    for (int i = 0; i < c->njobs; i++) {
        const cjob *j = c->jobs[i];
        if ((j->row.state != TS_JOB_PENDING && j->row.state != TS_JOB_HELD) ||
            (only && strcmp(j->row.tenant, only) != 0))
            continue;
        int r = j->row.state == TS_JOB_HELD ? TS_PEND_HELD : TS_PEND_NONE;
        if (last > 0 && strcmp(j->row.reason, ts_pending_name(last)) == 0)
            r = last;
        else
            for (int k = 1; k <= TS_PEND_LAST && j->row.reason[0]; k++)
                if (strcmp(j->row.reason, ts_pending_name(k)) == 0)
                    r = last = k;
        by_reason[r]++;
    }
    for (int k = 0; k <= TS_PEND_LAST; k++)
        put(b, "tessera_jobs_waiting{reason=\"%s\"} %lld\n",
            k == TS_PEND_NONE ? "not-yet-ranked" : ts_pending_name(k), (long long)by_reason[k]);
}

/* The controller's counters (those counting every tenant's jobs only on
 * the whole page). */
static void metrics_counters(ctld *c, sbuf *b, const char *only)
{
    const ctld_metrics *m = &c->m;
    static const struct {
        const char *name, *help;
        size_t off;
        bool jobs; /* counts every tenant's jobs: not on a tenant's page */
    } ctr[] = {
        {"tessera_jobs_submitted_total", "Jobs accepted.", offsetof(ctld_metrics, submitted),
         true},
        {"tessera_jobs_started_total", "Job starts (restarts included).",
         offsetof(ctld_metrics, started), true},
        {"tessera_jobs_finished_total", "Jobs that completed.", offsetof(ctld_metrics, finished),
         true},
        {"tessera_jobs_cancelled_total", "Jobs cancelled.", offsetof(ctld_metrics, cancelled),
         true},
        {"tessera_preemptions_total", "Jobs preempted for guaranteed work.",
         offsetof(ctld_metrics, preempted), true},
        {"tessera_scheduling_cycles_total", "Scheduling cycles run.",
         offsetof(ctld_metrics, cycles), false},
        {"tessera_webhooks_delivered_total", "Job webhooks delivered (a 2xx answer).",
         offsetof(ctld_metrics, notify_delivered), true},
        {"tessera_webhooks_failed_total", "Job webhooks given up after every try.",
         offsetof(ctld_metrics, notify_failed), true},
        {"tessera_webhooks_dropped_total", "Job webhooks dropped: their queue was full.",
         offsetof(ctld_metrics, notify_dropped), true},
        {"tessera_store_write_failures_total",
         "Durable writes the store refused (nothing was applied; retried or answered 503).",
         offsetof(ctld_metrics, store_failures), false},
    };
    for (size_t i = 0; i < sizeof ctr / sizeof ctr[0]; i++) {
        if (only && ctr[i].jobs)
            continue;
        head(b, ctr[i].name, "counter", ctr[i].help);
        /* atomic: some are counted outside c->mu (the webhook workers') */
        put(b, "%s %llu\n", ctr[i].name,
            (unsigned long long)__atomic_load_n((const uint64_t *)((const char *)m + ctr[i].off),
                                                __ATOMIC_RELAXED));
    }
    if (!only) { /* every tenant's sessions */
        head(b, "tessera_sessions_open", "gauge",
             "Interactive sessions the controller relays or waits for an agent to open "
             "(docs/interactive.md).");
        put(b, "tessera_sessions_open %d\n", ctld_sessions_count(c));
    }
}

/* GPUs by state and how stranded the free ones are. */
static void metrics_gpus(ctld *c, sbuf *b)
{
    int64_t total = 0, free_g = 0, drained = 0, whole_free = 0;
    for (int n = 0; n < c->cluster->nnodes; n++) {
        const ts_node *nd = &c->cluster->nodes[n];
        total += nd->ngpu;
        if (!ts_sched_node_schedulable(c->sched, n)) {
            drained += nd->ngpu;
            continue;
        }
        free_g += nd->gpus_free;
        if (nd->ngpu > 0 && nd->gpus_free == nd->ngpu)
            whole_free += nd->ngpu;
    }
    head(b, "tessera_gpus", "gauge", "GPUs by state.");
    put(b, "tessera_gpus{state=\"free\"} %lld\n", (long long)free_g);
    put(b, "tessera_gpus{state=\"allocated\"} %lld\n", (long long)(total - free_g - drained));
    put(b, "tessera_gpus{state=\"drained\"} %lld\n", (long long)drained);
    head(b, "tessera_gpu_fragmentation_ratio", "gauge",
         "Share of free GPUs that are not on completely free nodes (0: none stranded).");
    put(b, "tessera_gpu_fragmentation_ratio %.6f\n",
        free_g > 0 ? 1.0 - (double)whole_free / (double)free_g : 0.0);
}

/* Each tenant's GPUs used, guaranteed and owed. */
static void metrics_tenants(ctld *c, sbuf *b, const char *only)
{
    int nt = c->tenants->n;
    head(b, "tessera_tenant_gpus_used", "gauge", "GPUs a tenant's running jobs hold, by model.");
    for (int t = 0; t < nt; t++)
        for (int mo = 0; mo < TS_MAX_GPU_MODELS && shown(c, t, only); mo++) {
            const ts_gpu_model_info *info = ts_gpu_model_get(mo);
            int64_t u = ts_quota_usage(c->quota, t, ts_res_gpu(mo));
            if (info && (u > 0 || c->tenants->t[t].guaranteed[ts_res_gpu(mo)] > 0))
                put(b, "tessera_tenant_gpus_used{tenant=\"%s\",gpu_model=\"%s\"} %.3f\n",
                    c->tenants->t[t].name, info->name, (double)u / 1000.0);
        }
    head(b, "tessera_tenant_gpus_guaranteed", "gauge", "A tenant's guaranteed GPUs, by model.");
    for (int t = 0; t < nt; t++)
        for (int mo = 0; mo < TS_MAX_GPU_MODELS && shown(c, t, only); mo++) {
            const ts_gpu_model_info *info = ts_gpu_model_get(mo);
            int64_t g = c->tenants->t[t].guaranteed[ts_res_gpu(mo)];
            if (info && g > 0)
                put(b, "tessera_tenant_gpus_guaranteed{tenant=\"%s\",gpu_model=\"%s\"} %.3f\n",
                    c->tenants->t[t].name, info->name, (double)g / 1000.0);
        }
    head(b, "tessera_guarantee_deficit_gpus", "gauge",
         "GPUs a tenant is owed now: below its guarantee while a pending job of it fits in the "
         "guarantee it leaves unused (docs/scheduler.md, The guarantee).");
    double *owed = calloc((size_t)nt + 1, sizeof *owed);
    if (owed)
        ctld_owed_gpus(c, owed, only ? ts_tenant_find(c->tenants, only) : -1);
    for (int t = 0; owed && t < nt; t++) {
        if (!shown(c, t, only))
            continue;
        bool guaranteed = false;
        for (int mo = 0; mo < TS_MAX_GPU_MODELS; mo++)
            guaranteed = guaranteed || c->tenants->t[t].guaranteed[ts_res_gpu(mo)] > 0;
        if (guaranteed)
            put(b, "tessera_guarantee_deficit_gpus{tenant=\"%s\"} %.3f\n", c->tenants->t[t].name,
                owed[t]);
    }
    free(owed);
}

/* Waits, cycles, HTTP answers, agent syncs, the read view and HA. */
static void metrics_runtime(ctld *c, sbuf *b, const char *only)
{
    static const double CYCLE_B[] = {0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0};
    static const double WAIT_B[] = {1, 10, 60, 300, 900, 3600, 4 * 3600, 24 * 3600};
    const ctld_metrics *m = &c->m;
    if (!only)
        hist(b, "tessera_queue_wait_seconds", "Time from submission to start.", m->wait_hist,
             WAIT_B, sizeof WAIT_B / sizeof *WAIT_B, m->wait_s_sum);
    hist(b, "tessera_scheduling_cycle_seconds", "Duration of one scheduling cycle.",
         m->cycle_hist, CYCLE_B, sizeof CYCLE_B / sizeof *CYCLE_B, m->cycle_s_sum);
    if (!only)
        head(b, "tessera_http_responses_total", "counter", "HTTP responses by status class.");
    for (int k = 1; k <= 5 && !only; k++)
        put(b, "tessera_http_responses_total{code=\"%dxx\"} %llu\n", k,
            (unsigned long long)__atomic_load_n(&m->http_requests[k], __ATOMIC_RELAXED));
    head(b, "tessera_agent_syncs_total", "counter",
         "Agent syncs and registrations: applied (under the controller's lock) or same (a "
         "report equal to the last one applied: only the node's own lock).");
    for (int k = 0; k < 2; k++)
        put(b, "tessera_agent_syncs_total{path=\"%s\"} %llu\n", k ? "same" : "applied",
            (unsigned long long)__atomic_load_n(&m->agent_syncs[k], __ATOMIC_RELAXED));
    head(b, "tessera_agent_reports_refused_total", "counter",
         "Task reports outside the agent protocol, left out of their syncs (the rest of "
         "each sync was applied; tesserad's log names the field).");
    put(b, "tessera_agent_reports_refused_total %llu\n",
        (unsigned long long)__atomic_load_n(&m->agent_reports_refused, __ATOMIC_RELAXED));
    if (!only) {
        head(b, "tessera_read_view_answers_total", "counter",
             "Reads answered while a cycle planned (it plans on its own copy of the "
             "cluster and quota, so reads do not wait for its end).");
        put(b, "tessera_read_view_answers_total %llu\n",
            (unsigned long long)c->m.reads_in_cycle);
    }
    char ha[512];
    ctld_ha_metrics(ha, sizeof ha); /* role and epoch, with ha: only */
    put(b, "%s", ha);
}

/* Tenant names are [A-Za-z0-9._-]: nothing to escape in a label value. */
char *ctld_metrics_text(ctld *c, const char *only)
{
    sbuf b = {0};
    ctld_lock_reader(c); /* nodes and usage: live, which a cycle's plan leaves alone */
    metrics_jobs(c, &b, only);
    metrics_counters(c, &b, only);
    metrics_gpus(c, &b);
    metrics_tenants(c, &b, only);
    metrics_runtime(c, &b, only);
    pthread_mutex_unlock(&c->mu);
    return b.p ? b.p : strdup("");
}
