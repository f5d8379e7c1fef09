/*
 * replay_report.c - what `tessera-sim replay` prints and writes.
 *
 * Two shapes of run share these writers. Without tenants (the Pollux sets,
 * our job lists without --tenants) every policy runs each workload on the
 * pooled cluster and the table shows each workload's average JCT and the
 * summary (for a set: the mean of the workload figures, as published). With
 * tenants (Philly, our job lists with --tenants) each policy runs once over
 * all tenants, siloed or shared, and the tables add per-tenant JCT, share
 * against guarantee, held against fair share, the deficit below guarantee
 * and Jain's index (definitions in replay_timeline.c and docs/simulator.md).
 * The JSON document has the same shape either way (jain null and tenants
 * empty without tenants); --series writes every point of every run, and
 * --jobs-out every job's outcome, a workload at a time as the runs end.
 */
#include <jansson.h>
#include <string.h>

#include "model/csv_reader.h"
#include "sim/replay_cli.h"

static const char *clock_text(const ts_replay_config *cfg, char *buf, size_t size)
{
    if (cfg->round_s == 0)
        snprintf(buf, size, "event-driven");
    else
        snprintf(buf, size, "round %g s", cfg->round_s);
    return buf;
}

/* The start estimates of the policies that give them (the cycle's). */
static void print_estimates(FILE *f, const replay_report *r)
{
    for (int p = 0; p < r->npol; p++) {
        const ts_replay_result *m = &r->pr[p].mean;
        if (r->pr[p].ops->estimates && m->est_waited > 0)
            fprintf(f, "start estimates (%s): %d of the %d jobs that waited had one at their "
                       "first cycle; |estimate - start| median %.0f s, p90 %.0f s\n",
                    r->pr[p].ops->name, m->est_jobs, m->est_waited, m->est_median_err_s,
                    m->est_p90_err_s);
        if (r->pr[p].ops->estimates && m->preemptions > 0)
            fprintf(f, "preemptions (%s): %ld, of them %ld moves and %ld time-sharing; the "
                       "rest took room back\n",
                    r->pr[p].ops->name, m->preemptions, m->moves, m->time_shares);
    }
}

static void print_pooled(FILE *f, const replay_report *r)
{
    const ts_replay_trace *t = r->t;
    const ts_replay_config *cfg = r->cfg;
    const replay_policy_run *pr = r->pr;
    char clk[64];
    fprintf(f, "replay: set %s, %d workloads; %d nodes x %d GPUs; %s; restart %g s", t->set,
            t->nwl, cfg->nodes, cfg->gpus_per_node, clock_text(cfg, clk, sizeof clk),
            cfg->restart_cost_s);
    if (cfg->checkpoint_s > 0)
        fprintf(f, "; checkpoint every %g s", cfg->checkpoint_s);
    if (r->load != 1)
        fprintf(f, "; load x%g (arrivals compressed)", r->load);
    fprintf(f, "\n\navg JCT per workload (s)\n%-14s", "workload");
    for (int p = 0; p < r->npol; p++)
        fprintf(f, " %10s", pr[p].ops->name);
    fprintf(f, "\n");
    for (int w = 0; w < t->nwl; w++) {
        fprintf(f, "%-14s", t->wl[w].name);
        for (int p = 0; p < r->npol; p++)
            fprintf(f, " %10.0f", pr[p].per[w].avg_jct_s);
        fprintf(f, "\n");
    }
    fprintf(f, "\n%-10s %5s %10s %10s %10s %10s %8s %11s %6s\n", "policy", "jobs", "avg_jct_s",
            "p50_jct_s", "p99_jct_s", "avg_queue", "preempt", "makespan_s", "util%");
    for (int p = 0; p < r->npol; p++) {
        const ts_replay_result *m = &pr[p].mean;
        fprintf(f, "%-10s %5d %10.0f %10.0f %10.0f %10.0f %8ld %11.0f %6.1f\n", pr[p].ops->name,
                m->jobs, m->avg_jct_s, m->p50_jct_s, m->p99_jct_s, m->avg_queue_s,
                m->preemptions, m->makespan_s, m->utilization_pct);
    }
    if (t->nwl > 1)
        fprintf(f, "(averages, percentiles, makespan and utilisation: mean over the %d workloads; "
                   "preemptions: total)\n",
                t->nwl);
    print_estimates(f, r);
}

typedef double (*tenant_field)(const ts_replay_tenant_result *tr);
static double f_jct(const ts_replay_tenant_result *tr) { return tr->avg_jct_s; }
static double f_share(const ts_replay_tenant_result *tr) { return tr->share_vs_guarantee; }
static double f_fair(const ts_replay_tenant_result *tr) { return tr->fair_ratio; }
static double f_deficit(const ts_replay_tenant_result *tr) { return tr->deficit_gpu_s; }

static void tenant_table(FILE *f, const replay_report *r, const char *title, tenant_field get,
                         const char *fmt)
{
    const ts_replay_trace *t = r->t;
    fprintf(f, "\n%-8s %6s %6s", title, "GPUs", "jobs");
    for (int p = 0; p < r->npol; p++)
        fprintf(f, " %10s", r->pr[p].ops->name);
    fprintf(f, "\n");
    for (int k = 0; k < t->ntenants; k++) {
        fprintf(f, "%-8s %6d %6d", t->tenants[k].name, t->tenants[k].gpus, r->pr[0].tres[k].jobs);
        for (int p = 0; p < r->npol; p++)
            fprintf(f, fmt, get(&r->pr[p].tres[k]));
        fprintf(f, "\n");
    }
}

static void print_tenanted(FILE *f, const replay_report *r)
{
    const ts_replay_trace *t = r->t;
    const ts_replay_config *cfg = r->cfg;
    long guaranteed = 0;
    for (int k = 0; k < t->ntenants; k++)
        guaranteed += t->tenants[k].gpus;
    char clk[64];
    fprintf(f, "replay: %s, %d jobs, %d tenants guaranteed %ld GPUs; cluster %d nodes x %d GPUs; "
               "%s; restart %g s%s; ",
            r->format, t->wl[0].njobs, t->ntenants, guaranteed, cfg->nodes, cfg->gpus_per_node,
            clock_text(cfg, clk, sizeof clk), cfg->restart_cost_s,
            cfg->ckpt_cost_by_gpus ? " + checkpoint 7/30/60 s after a preemption" : "");
    if (cfg->checkpoint_s > 0)
        fprintf(f, "checkpoints every %g s of progress\n", cfg->checkpoint_s);
    else
        fprintf(f, "checkpoint at preemption (no progress lost)\n");
    for (int p = 0; p < r->npol; p++)
        fprintf(f, "%s%s %s", p ? ", " : "policies: ", r->pr[p].ops->name, r->pr[p].mode);
    if (r->load != 1)
        fprintf(f, "; load x%g (arrivals compressed)", r->load);
    fprintf(f, "\n");
    if (strcmp(r->format, "philly") == 0)
        fprintf(f, "dropped: %ld rows of other virtual clusters, %ld with no GPU, %ld outside the "
                   "window\n",
                t->dropped_vc, t->dropped_no_gpu, t->dropped_window);
    tenant_table(f, r, "avg JCT", f_jct, " %10.0f");
    tenant_table(f, r, "share vs guarantee", f_share, " %10.3f");
    tenant_table(f, r, "held / fair share", f_fair, " %10.3f");
    tenant_table(f, r, "deficit GPU-s", f_deficit, " %10.0f");
    fprintf(f, "\n%-8s %-6s %6s %9s %9s %9s %9s %9s %7s %10s %10s %5s %6s %10s\n", "policy",
            "mode", "jobs", "avg_jct_s", "p50_jct_s", "p99_jct_s", "avg_queue", "gang_wait",
            "preempt", "lost_gpu_s", "makespan_s", "util%", "jain", "deficit");
    for (int p = 0; p < r->npol; p++) {
        const replay_policy_run *pr = &r->pr[p];
        const ts_replay_result *m = &pr->mean;
        fprintf(f,
                "%-8s %-6s %6d %9.0f %9.0f %9.0f %9.0f %9.0f %7ld %10.0f %10.0f %5.1f %6.3f "
                "%10.0f\n",
                pr->ops->name, pr->mode, m->jobs, m->avg_jct_s, m->p50_jct_s, m->p99_jct_s,
                m->avg_queue_s, m->avg_gang_wait_s, m->preemptions, m->lost_gpu_s, m->makespan_s,
                m->utilization_pct, pr->fair.jain, pr->fair.deficit_gpu_s);
    }
    fprintf(f, "(averages pooled over all jobs of all tenants, as Helios' \"all\" row; jain over "
               "held / fair share; deficit in GPU-s below guarantee while a job fitted in it)\n");
    print_estimates(f, r);
}

void replay_print(FILE *f, const replay_report *r)
{
    if (r->t->ntenants > 0)
        print_tenanted(f, r);
    else
        print_pooled(f, r);
}

static json_t *tenants_json(const replay_report *r, const replay_policy_run *pr)
{
    json_t *a = json_array();
    for (int k = 0; pr->tres && k < r->t->ntenants; k++) {
        const ts_replay_tenant_result *tr = &pr->tres[k];
        json_array_append_new(
            a, json_pack("{s:s,s:i,s:i,s:f,s:f,s:f,s:f,s:f,s:f,s:f}", "name", r->t->tenants[k].name,
                         "guarantee_gpus", r->t->tenants[k].gpus, "jobs", tr->jobs, "avg_jct_s",
                         tr->avg_jct_s, "share_vs_guarantee", tr->share_vs_guarantee,
                         "fair_ratio", tr->fair_ratio, "deficit_gpu_s", tr->deficit_gpu_s,
                         "held_gpu_s", tr->held_gpu_s, "entitled_gpu_s", tr->entitled_gpu_s,
                         "share_while_active", tr->share_while_active));
    }
    return a;
}

int replay_write_json(const char *path, const replay_report *r)
{
    const ts_replay_trace *t = r->t;
    bool tenanted = t->ntenants > 0;
    json_t *results = json_array();
    for (int p = 0; p < r->npol; p++) {
        const replay_policy_run *pr = &r->pr[p];
        const ts_replay_result *m = &pr->mean;
        json_t *wls = json_array();
        for (int w = 0; w < t->nwl; w++)
            json_array_append_new(wls, json_pack("{s:s,s:i,s:f,s:f}", "name", t->wl[w].name,
                                                 "jobs", pr->per[w].jobs, "avg_jct_s",
                                                 pr->per[w].avg_jct_s, "makespan_s",
                                                 pr->per[w].makespan_s));
        json_t *o = json_pack(
            "{s:s,s:s,s:i,s:f,s:f,s:f,s:f,s:f,s:o,s:o,s:o,s:I,s:f,s:f,s:f,s:o,s:o}", "policy",
            pr->ops->name, "mode", pr->mode, "jobs", m->jobs, "avg_jct_s", m->avg_jct_s,
            "p50_jct_s", m->p50_jct_s, "p99_jct_s", m->p99_jct_s, "avg_queue_s", m->avg_queue_s,
            "utilization_pct", m->utilization_pct, "jain",
            tenanted ? json_real(pr->fair.jain) : json_null(), "jain_active",
            tenanted ? json_real(pr->fair.jain_active) : json_null(), "deficit_gpu_s",
            tenanted ? json_real(pr->fair.deficit_gpu_s) : json_null(), "preemptions",
            (json_int_t)m->preemptions, "lost_gpu_s", m->lost_gpu_s, "max_wait_s", m->max_wait_s,
            "makespan_s", m->makespan_s, "tenants", tenants_json(r, pr), "workloads", wls);
        if (o)
            json_object_set_new(o, "gang_wait_s", json_real(m->avg_gang_wait_s));
        if (o && pr->ops->estimates)
            json_object_set_new(o, "preemption_kinds",
                                json_pack("{s:I,s:I}", "moves", (json_int_t)m->moves,
                                          "time_sharing", (json_int_t)m->time_shares));
        if (o && pr->ops->estimates)
            json_object_set_new(o, "start_estimates",
                                json_pack("{s:i,s:i,s:f,s:f}", "jobs_waited", m->est_waited,
                                          "with_estimate", m->est_jobs, "median_abs_err_s",
                                          m->est_median_err_s, "p90_abs_err_s",
                                          m->est_p90_err_s));
        if (!o) {
            json_decref(results);
            return -1;
        }
        json_array_append_new(results, o);
    }
    json_t *sched = json_array(); /* what tessera ran under besides the defaults */
    for (int k = 0; sched && k < r->nsched; k++)
        json_array_append_new(sched, json_string(r->sched[k]));
    json_t *doc = json_pack("{s:s,s:o,s:s,s:{s:i,s:i},s:f,s:f,s:o,s:o*}", "jobs_file",
                            r->jobs_file, "set", r->set ? json_string(r->set) : json_null(),
                            "format", r->format, "cluster", "nodes", r->cfg->nodes,
                            "gpus_per_node", r->cfg->gpus_per_node, "checkpoint_s",
                            r->cfg->checkpoint_s, "load", r->load, "results", results, "sched",
                            sched);
    if (!doc)
        return -1;
    int rc = json_dump_file(doc, path, JSON_INDENT(1) | JSON_REAL_PRECISION(10));
    json_decref(doc);
    return rc;
}

void replay_write_jobs(FILE *f, const char *policy, const ts_replay_workload *W,
                           const ts_replay_trace *t, const ts_replay_outcome *out)
{
    for (int j = 0; j < W->njobs; j++) {
        const ts_replay_job *jb = &W->jobs[j];
        const ts_replay_outcome *r = &out[j];
        fprintf(f, "%s,", policy);
        ts_csv_put_field(f, W->name);
        fputc(',', f);
        ts_csv_put_field(f, jb->name);
        fputc(',', f);
        ts_csv_put_field(f, t->ntenants > 0 ? t->tenants[jb->tenant].name : "");
        fprintf(f, ",%d,%.3f,%.3f,%.3f,%.3f,%.3f,%d,%d,%.3f\n", jb->gpus, jb->submit_s,
                jb->work_s, r->finish_s, r->jct_s, r->queue_s, r->starts, r->preemptions,
                r->lost_work_s);
    }
}

void replay_write_jobs_header(FILE *f)
{
    fputs("policy,workload,job,tenant,gpus,submit_s,work_s,finish_s,jct_s,queue_s,starts,"
          "preemptions,lost_work_s\n",
          f);
}

int replay_write_series(const char *path, const replay_report *r)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    const ts_replay_trace *t = r->t;
    fprintf(f, "policy,workload,t_s,busy_gpus,utilization_pct,queue_jobs");
    for (int k = 0; k < t->ntenants; k++)
        fprintf(f, ",held_%s", t->tenants[k].name);
    fprintf(f, "\n");
    for (int p = 0; p < r->npol; p++)
        for (int w = 0; w < t->nwl; w++) {
            const ts_replay_series *s = r->pr[p].series ? r->pr[p].series[w] : NULL;
            for (int i = 0; s && i < s->npoints; i++) {
                fprintf(f, "%s,%s,%.10g,%.10g,%.6g,%.10g", r->pr[p].ops->name, t->wl[w].name,
                        s->t_s[i], s->busy_gpus[i],
                        s->total_gpus > 0 ? 100.0 * s->busy_gpus[i] / (double)s->total_gpus : 0.0,
                        s->queue_jobs[i]);
                for (int k = 0; k < s->ntenants; k++)
                    fprintf(f, ",%.10g", s->held[(size_t)i * (size_t)s->ntenants + (size_t)k]);
                fprintf(f, "\n");
            }
        }
    int bad = ferror(f);
    return fclose(f) != 0 || bad ? -1 : 0;
}
