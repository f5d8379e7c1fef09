/*
 * replay_main.c - the shell of `tessera-sim replay`.
 *
 *   tessera-sim replay --jobs POLLUX_RIGID.csv [--set NAME] --policy P[,P...]
 *       [--nodes 16] [--gpus-per-node 4] [--round-s 60] [--restart-cost-s 30]
 *       [--json OUT.json]
 *   tessera-sim replay --jobs philly_jobs_pollux.csv [--vc-nodes VC.csv]
 *       [--from YYYY-MM-DD] [--to YYYY-MM-DD] --policy P[,P...] [--round-s 0]
 *       [--restart-cost-s 0] [--json OUT.json]
 *
 * Reads the file, replays each workload of the set under each policy with the
 * pure engine in libtessera, and prints a per-workload average-JCT table and
 * the summary (for a Pollux set: the mean of the workload means, as
 * published). Only this file does I/O. Bad input (unknown option, bad number,
 * malformed CSV) exits 2 with file:line: field before anything runs. This is
 * the first slice of issue 3 section 4: no --cluster/--tenants yet. The file
 * format is told by its header. A Pollux set has no tenants (`jain` null,
 * `tenants` empty). The Philly job list follows the Helios procedure (README
 * A): its virtual clusters are tenants, each siloed on its own partition of
 * 8-GPU nodes (sizes from philly_vc_nodes_helios.csv beside the jobs file
 * unless --vc-nodes), event-driven (the procedure's 1-s ticks) with no
 * start-up cost unless told, and srtf restarts pay the checkpoint cost.
 */
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched/replay.h"
#include "sim/fileio.h"
#include "sim/replay.h"

#define EXIT_BAD_INPUT 2
#define POLICIES_MAX 16
#define NODES_MAX 100000
#define GPUS_PER_NODE_MAX 64
#define ROUND_MAX_S 86400.0
#define RESTART_MAX_S 86400.0

static void usage(FILE *f)
{
    fprintf(f, "usage: tessera-sim replay --jobs POLLUX_RIGID.csv [--set NAME] --policy P[,P...]\n"
               "         [--nodes 16] [--gpus-per-node 4] [--round-s 60] [--restart-cost-s 30]\n"
               "         [--json OUT.json]\n"
               "       tessera-sim replay --jobs PHILLY.csv [--vc-nodes VC.csv] [--from YYYY-MM-DD]\n"
               "         [--to YYYY-MM-DD] --policy P[,P...] [--round-s 0] [--restart-cost-s 0]\n"
               "         [--json OUT.json]\n"
               "  --round-s 0 decides on every event instead of in rounds\n"
               "policies:");
    for (const ts_replay_policy_ops *const *p = ts_replay_policy_all(); *p; p++)
        fprintf(f, " %s", (*p)->name);
    fprintf(f, "\n");
}

static int bad(const char *fmt, const char *arg)
{
    fprintf(stderr, "tessera-sim replay: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n");
    return EXIT_BAD_INPUT;
}

/* Reads a whole file, printing the reason when it cannot. */
static char *slurp(const char *path, size_t *len)
{
    ts_err err = {0};
    char *buf = sim_read_file(path, len, &err);
    if (!buf)
        fprintf(stderr, "tessera-sim replay: %s\n", err.msg);
    return buf;
}

static int parse_num(const char *opt, const char *v, double min, double max, bool integer,
                     double *out)
{
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (end == v || *end || errno || !isfinite(x) || x < min || x > max ||
        (integer && x != floor(x))) {
        fprintf(stderr, "tessera-sim replay: %s: must be %s in [%g, %g], got \"%s\"\n", opt,
                integer ? "an integer" : "a number", min, max, v);
        return -1;
    }
    *out = x;
    return 0;
}

typedef struct policy_result {
    const ts_replay_policy_ops *ops;
    ts_replay_result *per;  /* one per workload */
    ts_replay_result mean;
} policy_result;

static void print_tables(FILE *f, const ts_replay_trace *t, const ts_replay_config *cfg,
                         const policy_result *pr, int npol)
{
    fprintf(f, "replay: set %s, %d workloads; %d nodes x %d GPUs; round %g s%s; restart %g s\n",
            t->set, t->nwl, cfg->nodes, cfg->gpus_per_node, cfg->round_s,
            cfg->round_s == 0 ? " (event-driven)" : "", cfg->restart_cost_s);
    fprintf(f, "\navg JCT per workload (s)\n%-14s", "workload");
    for (int p = 0; p < npol; p++)
        fprintf(f, " %10s", pr[p].ops->name);
    fprintf(f, "\n");
    for (int w = 0; w < t->nwl; w++) {
        fprintf(f, "%-14s", t->wl[w].name);
        for (int p = 0; p < npol; p++)
            fprintf(f, " %10.0f", pr[p].per[w].avg_jct_s);
        fprintf(f, "\n");
    }
    fprintf(f, "\n%-10s %5s %10s %10s %10s %10s %8s %11s %6s\n", "policy", "jobs", "avg_jct_s",
            "p50_jct_s", "p99_jct_s", "avg_queue", "preempt", "makespan_s", "util%");
    for (int p = 0; p < npol; p++) {
        const ts_replay_result *r = &pr[p].mean;
        fprintf(f, "%-10s %5d %10.0f %10.0f %10.0f %10.0f %8ld %11.0f %6.1f\n", pr[p].ops->name,
                r->jobs, r->avg_jct_s, r->p50_jct_s, r->p99_jct_s, r->avg_queue_s,
                r->preemptions, r->makespan_s, r->utilization_pct);
    }
    if (t->nwl > 1)
        fprintf(f, "(averages, percentiles, makespan and utilisation: mean over the %d workloads; "
                   "preemptions: total)\n",
                t->nwl);
}

static int write_json(const char *path, const char *jobs_file, const char *set,
                      const ts_replay_trace *t, const policy_result *pr, int npol)
{
    json_t *results = json_array();
    for (int p = 0; p < npol; p++) {
        const ts_replay_result *r = &pr[p].mean;
        json_t *wls = json_array();
        for (int w = 0; w < t->nwl; w++)
            json_array_append_new(wls, json_pack("{s:s,s:i,s:f,s:f}", "name", t->wl[w].name,
                                                 "jobs", pr[p].per[w].jobs, "avg_jct_s",
                                                 pr[p].per[w].avg_jct_s, "makespan_s",
                                                 pr[p].per[w].makespan_s));
        json_t *o = json_pack(
            "{s:s,s:i,s:f,s:f,s:f,s:f,s:f,s:n,s:I,s:f,s:f,s:f,s:[],s:o}", "policy",
            pr[p].ops->name, "jobs", r->jobs, "avg_jct_s", r->avg_jct_s, "p50_jct_s",
            r->p50_jct_s, "p99_jct_s", r->p99_jct_s, "avg_queue_s", r->avg_queue_s,
            "utilization_pct", r->utilization_pct, "jain", "preemptions",
            (json_int_t)r->preemptions, "lost_gpu_s", r->lost_gpu_s, "max_wait_s", r->max_wait_s,
            "makespan_s", r->makespan_s, "tenants", "workloads", wls);
        if (!o) {
            json_decref(results);
            return -1;
        }
        json_array_append_new(results, o);
    }
    json_t *doc = json_pack("{s:s,s:o,s:o}", "jobs_file", jobs_file, "set",
                            set ? json_string(set) : json_null(), "results", results);
    if (!doc)
        return -1;
    int rc = json_dump_file(doc, path, JSON_INDENT(1) | JSON_REAL_PRECISION(10));
    json_decref(doc);
    return rc;
}

#define VC_FILE_NAME "philly_vc_nodes_helios.csv"
#define PATH_MAX_BYTES 4096

typedef struct philly_result {
    const ts_replay_policy_ops *ops;
    ts_replay_result res;
    ts_replay_tenant_result *tres;
    double jain;
} philly_result;

static void print_philly(FILE *f, const ts_replay_trace *t, const ts_replay_config *cfg,
                         const philly_result *pr, int npol)
{
    const ts_replay_workload *w = &t->wl[0];
    long gpus = 0;
    for (int k = 0; k < t->ntenants; k++)
        gpus += (long)t->tenants[k].nodes * TS_REPLAY_PHILLY_GPUS_PER_NODE;
    fprintf(f, "replay: philly, %d jobs in %d virtual clusters (siloed, %ld GPUs of %d-GPU nodes); "
               "round %g s%s; restart %g s%s\n",
            w->njobs, t->ntenants, gpus, TS_REPLAY_PHILLY_GPUS_PER_NODE, cfg->round_s,
            cfg->round_s == 0 ? " (event-driven)" : "", cfg->restart_cost_s,
            cfg->ckpt_cost_by_gpus ? "; preemptive restarts + checkpoint 7/30/60 s" : "");
    fprintf(f, "dropped: %ld rows of other virtual clusters, %ld with no GPU, %ld outside the window\n",
            t->dropped_vc, t->dropped_no_gpu, t->dropped_window);
    fprintf(f, "\n%-8s %5s %6s", "tenant", "nodes", "jobs");
    for (int p = 0; p < npol; p++)
        fprintf(f, " %10s", pr[p].ops->name);
    for (int p = 0; p < npol; p++)
        fprintf(f, " %7s", pr[p].ops->name);
    fprintf(f, "\n%-21s avg JCT (s) per policy, then share vs guarantee\n", "");
    for (int k = 0; k < t->ntenants; k++) {
        fprintf(f, "%-8s %5d %6d", t->tenants[k].name, t->tenants[k].nodes, pr[0].tres[k].jobs);
        for (int p = 0; p < npol; p++)
            fprintf(f, " %10.0f", pr[p].tres[k].avg_jct_s);
        for (int p = 0; p < npol; p++)
            fprintf(f, " %7.3f", pr[p].tres[k].share_vs_guarantee);
        fprintf(f, "\n");
    }
    fprintf(f, "\n%-10s %6s %10s %10s %10s %10s %8s %11s %6s %6s\n", "policy", "jobs",
            "avg_jct_s", "p50_jct_s", "p99_jct_s", "avg_queue", "preempt", "makespan_s", "util%",
            "jain");
    for (int p = 0; p < npol; p++) {
        const ts_replay_result *r = &pr[p].res;
        fprintf(f, "%-10s %6d %10.0f %10.0f %10.0f %10.0f %8ld %11.0f %6.1f %6.3f\n",
                pr[p].ops->name, r->jobs, r->avg_jct_s, r->p50_jct_s, r->p99_jct_s,
                r->avg_queue_s, r->preemptions, r->makespan_s, r->utilization_pct, pr[p].jain);
    }
    fprintf(f, "(averages pooled over all jobs of all virtual clusters, as Helios' \"all\" row)\n");
}

static int write_philly_json(const char *path, const char *jobs_file, const ts_replay_trace *t,
                             const philly_result *pr, int npol)
{
    json_t *results = json_array();
    for (int p = 0; p < npol; p++) {
        const ts_replay_result *r = &pr[p].res;
        json_t *ten = json_array();
        for (int k = 0; k < t->ntenants; k++)
            json_array_append_new(ten, json_pack("{s:s,s:i,s:f,s:f}", "name", t->tenants[k].name,
                                                 "jobs", pr[p].tres[k].jobs, "avg_jct_s",
                                                 pr[p].tres[k].avg_jct_s, "share_vs_guarantee",
                                                 pr[p].tres[k].share_vs_guarantee));
        json_t *o = json_pack("{s:s,s:i,s:f,s:f,s:f,s:f,s:f,s:f,s:I,s:f,s:f,s:f,s:o}", "policy",
                              pr[p].ops->name, "jobs", r->jobs, "avg_jct_s", r->avg_jct_s,
                              "p50_jct_s", r->p50_jct_s, "p99_jct_s", r->p99_jct_s,
                              "avg_queue_s", r->avg_queue_s, "utilization_pct",
                              r->utilization_pct, "jain", pr[p].jain, "preemptions",
                              (json_int_t)r->preemptions, "lost_gpu_s", r->lost_gpu_s,
                              "max_wait_s", r->max_wait_s, "makespan_s", r->makespan_s,
                              "tenants", ten);
        if (!o) {
            json_decref(results);
            return -1;
        }
        json_array_append_new(results, o);
    }
    json_t *doc = json_pack("{s:s,s:n,s:o}", "jobs_file", jobs_file, "set", "results", results);
    if (!doc)
        return -1;
    int rc = json_dump_file(doc, path, JSON_INDENT(1) | JSON_REAL_PRECISION(10));
    json_decref(doc);
    return rc;
}

/* The VC file beside the jobs file unless given. */
static int load_vcs(const char *jobs_path, const char *vc_path, ts_replay_tenant **vcs, int *n)
{
    char def[PATH_MAX_BYTES];
    if (!vc_path) {
        const char *slash = strrchr(jobs_path, '/');
        int dir = slash ? (int)(slash - jobs_path) + 1 : 0;
        if (snprintf(def, sizeof def, "%.*s%s", dir, jobs_path, VC_FILE_NAME) >= (int)sizeof def)
            return bad("%s: path too long", jobs_path);
        vc_path = def;
    }
    size_t len;
    char *buf = slurp(vc_path, &len);
    if (!buf)
        return EXIT_BAD_INPUT;
    ts_err err = {0};
    int rc = ts_replay_load_vc_nodes(buf, len, vc_path, vcs, n, &err);
    free(buf);
    if (rc)
        return bad("%s", err.msg);
    return 0;
}

static int run_philly(const char *buf, size_t len, const char *jobs_path, const char *vc_path,
                      const char *from, const char *to, ts_replay_config *cfg,
                      const ts_replay_policy_ops **ops, int npol, const char *json_path)
{
    ts_err err = {0};
    long from_day = LONG_MIN, to_day = LONG_MAX;
    if ((from && ts_replay_parse_day(from, &from_day, &err)) ||
        (to && ts_replay_parse_day(to, &to_day, &err)))
        return bad("--from/--to: %s", err.msg);
    ts_replay_tenant *vcs = NULL;
    int nvc = 0, rc = load_vcs(jobs_path, vc_path, &vcs, &nvc);
    if (rc)
        return rc;
    ts_replay_trace *t = NULL;
    rc = ts_replay_load_philly(buf, len, jobs_path, vcs, nvc, from_day, to_day, &t, &err);
    free(vcs);
    if (rc)
        return bad("%s", err.msg);
    cfg->gpus_per_node = TS_REPLAY_PHILLY_GPUS_PER_NODE;
    philly_result pr[POLICIES_MAX];
    memset(pr, 0, sizeof pr);
    for (int p = 0; p < npol && rc == 0; p++) {
        pr[p].ops = ops[p];
        pr[p].tres = calloc((size_t)t->ntenants, sizeof *pr[p].tres);
        ts_replay_config c = *cfg;
        c.ckpt_cost_by_gpus = ops[p]->preemptive;  /* Helios SRTF's checkpoint cost */
        if (!pr[p].tres) {
            fprintf(stderr, "tessera-sim replay: out of memory\n");
            rc = 1;
        } else if (ts_replay_run_siloed(&c, ops[p], t->wl[0].jobs, t->wl[0].njobs, t->tenants,
                                        t->ntenants, NULL, &pr[p].res, pr[p].tres, &pr[p].jain,
                                        &err) != 0) {
            fprintf(stderr, "tessera-sim replay: %s: %s\n", ops[p]->name, err.msg);
            rc = 1;
        }
    }
    if (rc == 0) {
        cfg->ckpt_cost_by_gpus = true;
        print_philly(stdout, t, cfg, pr, npol);
        if (json_path && write_philly_json(json_path, jobs_path, t, pr, npol) != 0) {
            fprintf(stderr, "tessera-sim replay: %s: cannot write JSON\n", json_path);
            rc = 1;
        }
    }
    for (int p = 0; p < npol; p++)
        free(pr[p].tres);
    ts_replay_trace_free(t);
    return rc;
}

int replay_main(int argc, char **argv)
{
    const char *jobs_path = NULL, *set = NULL, *policies = NULL, *json_path = NULL;
    const char *vc_path = NULL, *from = NULL, *to = NULL;
    bool round_given = false, restart_given = false;
    double nodes = 16, gpn = 4;
    ts_replay_config cfg = {.round_s = TS_REPLAY_ROUND_DEFAULT_S,
                            .restart_cost_s = TS_REPLAY_RESTART_DEFAULT_S};
    for (int i = 2; i < argc; i++) {
        const char *o = argv[i];
        if (strcmp(o, "--help") == 0 || strcmp(o, "-h") == 0) {
            usage(stdout);
            return 0;
        }
        if (i + 1 >= argc)
            return bad("%s: needs a value", o);
        const char *v = argv[++i];
        if (strcmp(o, "--jobs") == 0)
            jobs_path = v;
        else if (strcmp(o, "--set") == 0)
            set = v;
        else if (strcmp(o, "--policy") == 0)
            policies = v;
        else if (strcmp(o, "--json") == 0)
            json_path = v;
        else if (strcmp(o, "--vc-nodes") == 0)
            vc_path = v;
        else if (strcmp(o, "--from") == 0)
            from = v;
        else if (strcmp(o, "--to") == 0)
            to = v;
        else if (strcmp(o, "--nodes") == 0) {
            if (parse_num(o, v, 1, NODES_MAX, true, &nodes))
                return EXIT_BAD_INPUT;
        } else if (strcmp(o, "--gpus-per-node") == 0) {
            if (parse_num(o, v, 1, GPUS_PER_NODE_MAX, true, &gpn))
                return EXIT_BAD_INPUT;
        } else if (strcmp(o, "--round-s") == 0) {
            if (parse_num(o, v, 0, ROUND_MAX_S, false, &cfg.round_s))
                return EXIT_BAD_INPUT;
            round_given = true;
        } else if (strcmp(o, "--restart-cost-s") == 0) {
            if (parse_num(o, v, 0, RESTART_MAX_S, false, &cfg.restart_cost_s))
                return EXIT_BAD_INPUT;
            restart_given = true;
        } else {
            fprintf(stderr, "tessera-sim replay: unknown option \"%s\"\n", o);
            usage(stderr);
            return EXIT_BAD_INPUT;
        }
    }
    cfg.nodes = (int)nodes;
    cfg.gpus_per_node = (int)gpn;
    if (!jobs_path)
        return bad("%s", "--jobs: required");
    if (!policies)
        return bad("%s", "--policy: required");

    policy_result pr[POLICIES_MAX];
    memset(pr, 0, sizeof pr);
    int npol = 0;
    char *pcopy = strdup(policies), *save = NULL;
    if (!pcopy)
        return 1;
    for (char *tok = strtok_r(pcopy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        const ts_replay_policy_ops *ops = ts_replay_policy_find(tok);
        if (!ops || npol == POLICIES_MAX) {
            fprintf(stderr, "tessera-sim replay: --policy: %s \"%s\"\n",
                    ops ? "too many policies at" : "unknown policy", tok);
            usage(stderr);
            free(pcopy);
            return EXIT_BAD_INPUT;
        }
        pr[npol++].ops = ops;
    }
    free(pcopy);
    if (npol == 0)
        return bad("%s", "--policy: empty list");

    size_t len;
    char *buf = slurp(jobs_path, &len);
    if (!buf)
        return EXIT_BAD_INPUT;
    if (ts_replay_is_philly(buf, len)) {
        const ts_replay_policy_ops *ops[POLICIES_MAX];
        for (int p = 0; p < npol; p++)
            ops[p] = pr[p].ops;
        if (!round_given)
            cfg.round_s = 0;  /* the procedure's 1-s ticks: decide at every event */
        if (!restart_given)
            cfg.restart_cost_s = 0;
        int prc = run_philly(buf, len, jobs_path, vc_path, from, to, &cfg, ops, npol, json_path);
        free(buf);
        return prc;
    }
    if (vc_path || from || to) {
        free(buf);
        return bad("%s", "--vc-nodes/--from/--to: only for the Philly job list");
    }
    ts_err err = {0};
    ts_replay_trace *t = NULL;
    int rc = ts_replay_load_pollux(buf, len, jobs_path, set, &t, &err);
    free(buf);
    if (rc != 0) {
        fprintf(stderr, "tessera-sim replay: %s\n", err.msg);
        return EXIT_BAD_INPUT;
    }
    long total = (long)cfg.nodes * cfg.gpus_per_node;
    for (int w = 0; w < t->nwl; w++)
        for (int j = 0; j < t->wl[w].njobs; j++)
            if (t->wl[w].jobs[j].gpus > total) {
                fprintf(stderr,
                        "tessera-sim replay: %s: job %s of %s needs %d GPUs, the cluster has %ld\n",
                        jobs_path, t->wl[w].jobs[j].name, t->wl[w].name, t->wl[w].jobs[j].gpus,
                        total);
                ts_replay_trace_free(t);
                return EXIT_BAD_INPUT;
            }

    rc = 0;
    for (int p = 0; p < npol && rc == 0; p++) {
        pr[p].per = calloc((size_t)t->nwl, sizeof *pr[p].per);
        if (!pr[p].per) {
            fprintf(stderr, "tessera-sim replay: out of memory\n");
            rc = 1;
            break;
        }
        for (int w = 0; w < t->nwl && rc == 0; w++)
            if (ts_replay_run(&cfg, pr[p].ops, t->wl[w].jobs, t->wl[w].njobs, NULL,
                              &pr[p].per[w], &err) != 0) {
                fprintf(stderr, "tessera-sim replay: %s, %s: %s\n", pr[p].ops->name,
                        t->wl[w].name, err.msg);
                rc = 1;
            }
        ts_replay_result_mean(pr[p].per, t->nwl, &pr[p].mean);
    }
    if (rc == 0) {
        print_tables(stdout, t, &cfg, pr, npol);
        if (json_path && write_json(json_path, jobs_path, set, t, pr, npol) != 0) {
            fprintf(stderr, "tessera-sim replay: %s: cannot write JSON\n", json_path);
            rc = 1;
        }
    }
    for (int p = 0; p < npol; p++)
        free(pr[p].per);
    ts_replay_trace_free(t);
    return rc;
}
