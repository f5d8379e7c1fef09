/*
 * replay_main.c - the shell of `tessera-sim replay`: options, inputs, runs.
 *
 *   tessera-sim replay --jobs JOBS.csv --policy P[,P...] [--set NAME]
 *       [--cluster CLUSTER.yaml | --nodes N --gpus-per-node G]
 *       [--tenants TENANTS.yaml | --vc-nodes VC.csv] [--from DAY --to DAY]
 *       [--round-s S] [--restart-cost-s S] [--checkpoint-s S] [--load X]
 *       [--json OUT.json] [--series OUT.csv] [--plot OUT.svg] [--jobs-out OUT.csv]
 *       [--sched NAME=VALUE]...
 *
 * The jobs file's header tells its format: the Pollux rigid workloads, the
 * Philly job list, or our own job list (name,submit_s,gpus,duration_s
 * [,tenant]; docs/simulator.md). A Pollux set replays each workload on one
 * pooled cluster (16 x 4 GPUs, 60-s rounds, 30-s restarts by default, as
 * published). Philly follows the Helios procedure (README A): its virtual
 * clusters are tenants (sizes from philly_vc_nodes_helios.csv beside the jobs
 * file, --vc-nodes, or --tenants), event-driven with no start-up cost unless
 * told, and restarts after a preemption pay the checkpoint cost. Our job list
 * replays the same way, with tenants when --tenants names them. With
 * tenants, policy tessera runs all of them on one shared cluster (guarantees
 * first, idle GPUs lent, reclaimed by preemption) and every other policy
 * runs siloed, each tenant on a partition of its guarantee; without, every
 * policy runs pooled. Only this file and its siblings do I/O; bad input
 * (unknown option, bad number, malformed file) exits 2 with file:line: field
 * before anything runs.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay/replay.h"
#include "sim/fileio.h"
#include "sim/replay.h"
#include "sim/replay_cli.h"
#include "tessera/cycle.h"

#define EXIT_BAD_INPUT 2
#define POLICIES_MAX 16
#define NODES_MAX 100000
#define GPUS_PER_NODE_MAX 64
#define ROUND_MAX_S 86400.0
#define RESTART_MAX_S 86400.0
#define CHECKPOINT_MAX_S 1e9
#define LOAD_MIN 0.01
#define LOAD_MAX 100.0
#define POLLUX_NODES_DEFAULT 16
#define POLLUX_GPUS_PER_NODE_DEFAULT 4
#define SERIES_POINTS_MAX 2000
#define VC_FILE_NAME "philly_vc_nodes_helios.csv"
#define PATH_MAX_BYTES 4096
#define SCHED_SET_MAX 32
#define SCHED_SET_MAX_S "32"

static void usage(FILE *f)
{
    fprintf(f, "usage: tessera-sim replay --jobs JOBS.csv --policy P[,P...] [--set NAME]\n"
               "         [--cluster CLUSTER.yaml | --nodes N --gpus-per-node G]\n"
               "         [--tenants TENANTS.yaml | --vc-nodes VC.csv] [--from YYYY-MM-DD]\n"
               "         [--to YYYY-MM-DD] [--round-s S] [--restart-cost-s S] [--checkpoint-s S]\n"
               "         [--load X] [--json OUT.json] [--series OUT.csv] [--plot OUT.svg]\n"
               "         [--jobs-out OUT.csv] [--sched NAME=VALUE]...\n"
               "  JOBS.csv: pollux_rigid_durations.csv, philly_jobs_pollux.csv, or a job list\n"
               "    name,submit_s,gpus,duration_s[,tenant] (told apart by the header)\n"
               "  --round-s 0 decides on every event instead of in rounds\n"
               "  --checkpoint-s 0 (default): a preempted job loses no progress\n"
               "  --load X: jobs arrive X times as fast (submit times / X; default 1)\n"
               "  --jobs-out: one CSV row per job and policy (when it ran, waited, finished)\n"
               "  with tenants, tessera shares one cluster; other policies run siloed\n"
               "  --sched NAME=VALUE: a field of tessera's scheduler configuration\n"
               "    (ts_sched_config; tesserad's default otherwise), e.g. fair_reclaim=false\n"
               "policies:");
    for (const ts_replay_policy_ops *const *p = ts_replay_policy_all(); *p; p++)
        fprintf(f, " %s", (*p)->name);
    fprintf(f, "\n");
}

static int bad(const char *fmt, const char *arg)
{
    return sim_bad("tessera-sim replay", fmt, arg);
}

int replay_parse_num(const char *opt, const char *v, double min, double max, bool integer,
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

typedef struct options {
    const char *jobs, *set, *policies, *json, *series, *plot, *jobs_out;
    const char *vc_nodes, *from, *to, *cluster, *tenants;
    bool round_given, restart_given, nodes_given;
    double nodes, gpus_per_node, load;
    ts_replay_config cfg;
    ts_sched_config sched; /* --sched: cfg.sched points here once one is given */
    const char *sched_set[SCHED_SET_MAX];
    int nsched_set;
    const ts_replay_policy_ops *ops[POLICIES_MAX];
    int npol;
    FILE *jobs_out_f; /* --jobs-out, open while the policies run */
} options;

static int parse_policies(options *o)
{
    char *copy = strdup(o->policies), *save = NULL;
    if (!copy)
        return 1;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        const ts_replay_policy_ops *ops = ts_replay_policy_find(tok);
        if (!ops || o->npol == POLICIES_MAX) {
            fprintf(stderr, "tessera-sim replay: --policy: %s \"%s\"\n",
                    ops ? "too many policies at" : "unknown policy", tok);
            usage(stderr);
            free(copy);
            return EXIT_BAD_INPUT;
        }
        o->ops[o->npol++] = ops;
    }
    free(copy);
    return o->npol == 0 ? bad("%s", "--policy: empty list") : 0;
}

/* argv[2..] into o; 0, or the exit status (-1: --help printed, exit 0). */
static int parse_options(int argc, char **argv, options *o)
{
    memset(o, 0, sizeof *o);
    o->nodes = POLLUX_NODES_DEFAULT;
    o->gpus_per_node = POLLUX_GPUS_PER_NODE_DEFAULT;
    o->load = 1;
    o->cfg.round_s = TS_REPLAY_ROUND_DEFAULT_S;
    o->cfg.restart_cost_s = TS_REPLAY_RESTART_DEFAULT_S;
    ts_sched_config_default(&o->sched);
    struct { const char *name; const char **dst; } paths[] = {
        {"--jobs", &o->jobs},       {"--set", &o->set},         {"--policy", &o->policies},
        {"--json", &o->json},       {"--series", &o->series},   {"--plot", &o->plot},
        {"--vc-nodes", &o->vc_nodes}, {"--from", &o->from},     {"--to", &o->to},
        {"--cluster", &o->cluster}, {"--tenants", &o->tenants}, {"--jobs-out", &o->jobs_out},
    };
    for (int i = 2; i < argc; i++) {
        const char *opt = argv[i];
        if (strcmp(opt, "--help") == 0 || strcmp(opt, "-h") == 0) {
            usage(stdout);
            return -1;
        }
        if (i + 1 >= argc)
            return bad("%s: needs a value", opt);
        const char *v = argv[++i];
        bool known = false;
        for (size_t k = 0; k < sizeof paths / sizeof paths[0] && !known; k++)
            if (strcmp(opt, paths[k].name) == 0) {
                *paths[k].dst = v;
                known = true;
            }
        if (known)
            continue;
        int rc = 0;
        if (strcmp(opt, "--nodes") == 0) {
            rc = replay_parse_num(opt, v, 1, NODES_MAX, true, &o->nodes);
            o->nodes_given = true;
        } else if (strcmp(opt, "--gpus-per-node") == 0) {
            rc = replay_parse_num(opt, v, 1, GPUS_PER_NODE_MAX, true, &o->gpus_per_node);
            o->nodes_given = true;
        } else if (strcmp(opt, "--round-s") == 0) {
            rc = replay_parse_num(opt, v, 0, ROUND_MAX_S, false, &o->cfg.round_s);
            o->round_given = true;
        } else if (strcmp(opt, "--restart-cost-s") == 0) {
            rc = replay_parse_num(opt, v, 0, RESTART_MAX_S, false, &o->cfg.restart_cost_s);
            o->restart_given = true;
        } else if (strcmp(opt, "--checkpoint-s") == 0) {
            rc = replay_parse_num(opt, v, 0, CHECKPOINT_MAX_S, false, &o->cfg.checkpoint_s);
        } else if (strcmp(opt, "--load") == 0) {
            rc = replay_parse_num(opt, v, LOAD_MIN, LOAD_MAX, false, &o->load);
        } else if (strcmp(opt, "--sched") == 0) {
            if (o->nsched_set == SCHED_SET_MAX)
                return bad("--sched: at most %s", SCHED_SET_MAX_S);
            rc = sim_sched_set(&o->sched, v);
            o->sched_set[o->nsched_set++] = v;
            o->cfg.sched = &o->sched;
        } else {
            fprintf(stderr, "tessera-sim replay: unknown option \"%s\"\n", opt);
            usage(stderr);
            return EXIT_BAD_INPUT;
        }
        if (rc)
            return EXIT_BAD_INPUT;
    }
    if (!o->jobs)
        return bad("%s", "--jobs: required");
    if (!o->policies)
        return bad("%s", "--policy: required");
    if (o->cluster && o->nodes_given)
        return bad("%s", "--cluster: give either --cluster or --nodes/--gpus-per-node");
    if (o->tenants && o->vc_nodes)
        return bad("%s", "--tenants: give either --tenants or --vc-nodes");
    return parse_policies(o);
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
    char *buf = replay_slurp(vc_path, &len);
    if (!buf)
        return EXIT_BAD_INPUT;
    ts_err err = {0};
    int rc = ts_replay_load_vc_nodes(buf, len, vc_path, vcs, n, &err);
    free(buf);
    return rc ? bad("%s", err.msg) : 0;
}

/* Reads the jobs file in its format, with its tenants, into *t. */
static int load_trace(options *o, const char **format, ts_replay_trace **t)
{
    size_t len;
    char *buf = replay_slurp(o->jobs, &len);
    if (!buf)
        return EXIT_BAD_INPUT;
    bool philly = ts_replay_is_philly(buf, len), ours = ts_replay_is_jobs_csv(buf, len);
    ts_replay_tenant *ten = NULL;
    int nten = 0, rc = 0;
    ts_err err = {0};
    if (!philly && (o->vc_nodes || o->from || o->to))
        rc = bad("%s", "--vc-nodes/--from/--to: only for the Philly job list");
    else if (!philly && !ours && o->tenants)
        rc = bad("%s", "--tenants: only for the Philly job list and our job lists");
    else if (o->set && (philly || ours))
        rc = bad("%s", "--set: only for the Pollux workloads");
    else if (o->tenants)
        rc = replay_load_tenants(o->tenants, &ten, &nten);
    else if (philly)
        rc = load_vcs(o->jobs, o->vc_nodes, &ten, &nten);
    if (rc == 0 && philly) {
        long from_day = LONG_MIN, to_day = LONG_MAX;
        *format = "philly";
        if ((o->from && ts_replay_parse_day(o->from, &from_day, &err)) ||
            (o->to && ts_replay_parse_day(o->to, &to_day, &err)))
            rc = bad("--from/--to: %s", err.msg);
        else if (ts_replay_load_philly(buf, len, o->jobs, ten, nten, from_day, to_day, t, &err))
            rc = bad("%s", err.msg);
    } else if (rc == 0 && ours) {
        *format = "jobs";
        if (ts_replay_load_jobs_csv(buf, len, o->jobs, ten, nten, t, &err))
            rc = bad("%s", err.msg);
    } else if (rc == 0) {
        *format = "pollux";
        if (ts_replay_load_pollux(buf, len, o->jobs, o->set, t, &err))
            rc = bad("%s", err.msg);
    }
    free(ten);
    free(buf);
    return rc;
}

/* The cluster, clock and costs: given, or the format's defaults. */
static int settle_config(options *o, const char *format, const ts_replay_trace *t)
{
    ts_replay_config *cfg = &o->cfg;
    bool helios = strcmp(format, "pollux") != 0;
    if (helios && !o->round_given)
        cfg->round_s = 0; /* the procedure's 1-s ticks: decide at every event */
    if (helios && !o->restart_given)
        cfg->restart_cost_s = 0;
    cfg->ckpt_cost_by_gpus = helios;
    if (o->cluster) {
        int rc = replay_load_cluster(o->cluster, &cfg->nodes, &cfg->gpus_per_node);
        if (rc)
            return rc;
    } else if (!o->nodes_given && t->ntenants > 0) {
        /* the tenants' guarantees, in the procedure's 8-GPU nodes */
        long g = 0;
        for (int k = 0; k < t->ntenants; k++)
            g += t->tenants[k].gpus;
        cfg->gpus_per_node = TS_REPLAY_PHILLY_GPUS_PER_NODE;
        cfg->nodes = (int)((g + TS_REPLAY_PHILLY_GPUS_PER_NODE - 1) / TS_REPLAY_PHILLY_GPUS_PER_NODE);
        if (cfg->nodes < 1)
            cfg->nodes = 1;
    } else {
        cfg->nodes = (int)o->nodes;
        cfg->gpus_per_node = (int)o->gpus_per_node;
    }
    long total = (long)cfg->nodes * cfg->gpus_per_node, guaranteed = 0;
    for (int k = 0; k < t->ntenants; k++)
        guaranteed += t->tenants[k].gpus;
    if (guaranteed > total) {
        fprintf(stderr,
                "tessera-sim replay: %s: tenants: guarantees add up to %ld GPUs, the cluster has "
                "%ld\n",
                o->tenants ? o->tenants : o->jobs, guaranteed, total);
        return EXIT_BAD_INPUT;
    }
    /* siloed, a tenant's jobs must fit in its own guarantee */
    const ts_replay_policy_ops *siloed = NULL;
    for (int p = 0; p < o->npol && t->ntenants > 0; p++)
        if (!ts_replay_runs_cycle(o->ops[p]))
            siloed = o->ops[p];
    for (int j = 0; siloed && j < t->wl[0].njobs; j++) {
        const ts_replay_job *J = &t->wl[0].jobs[j];
        const ts_replay_tenant *T = &t->tenants[J->tenant];
        if (J->gpus > T->gpus) {
            fprintf(stderr,
                    "tessera-sim replay: %s: tenants.%s: guaranteed %d GPUs, job %s needs %d: "
                    "%s runs each tenant siloed on its guarantee and could never start it "
                    "(tessera, which shares the cluster, can)\n",
                    o->tenants ? o->tenants : o->jobs, T->name, T->gpus, J->name, J->gpus,
                    siloed->name);
            return EXIT_BAD_INPUT;
        }
    }
    for (int w = 0; w < t->nwl; w++)
        for (int j = 0; j < t->wl[w].njobs; j++)
            if (t->wl[w].jobs[j].gpus > total) {
                fprintf(stderr,
                        "tessera-sim replay: %s: job %s of %s needs %d GPUs, the cluster has %ld\n",
                        o->jobs, t->wl[w].jobs[j].name, t->wl[w].name, t->wl[w].jobs[j].gpus,
                        total);
                return EXIT_BAD_INPUT;
            }
    return 0;
}

/* Runs one policy over every workload (or once over the tenants). */
static int run_policy(const options *o, const ts_replay_trace *t, replay_policy_run *pr)
{
    ts_err err = {0};
    bool tenanted = t->ntenants > 0, want_series = o->series || o->plot;
    pr->per = calloc((size_t)t->nwl, sizeof *pr->per);
    pr->series = calloc((size_t)t->nwl, sizeof *pr->series);
    pr->tres = tenanted ? calloc((size_t)t->ntenants, sizeof *pr->tres) : NULL;
    if (!pr->per || !pr->series || (tenanted && !pr->tres)) {
        fprintf(stderr, "tessera-sim replay: out of memory\n");
        return 1;
    }
    bool shared =
        tenanted && ts_replay_runs_cycle(pr->ops);
    pr->mode = !tenanted ? "pooled" : shared ? "shared" : "siloed";
    ts_replay_config cfg = o->cfg;
    cfg.ckpt_cost_by_gpus = o->cfg.ckpt_cost_by_gpus && pr->ops->preemptive;
    int rc = 0;
    for (int w = 0; w < t->nwl && rc == 0; w++) {
        const ts_replay_workload *W = &t->wl[w];
        ts_replay_outcome *out = calloc((size_t)(W->njobs > 0 ? W->njobs : 1), sizeof *out);
        ts_replay_log log = {0};
        if (!out)
            rc = ts_err_set(&err, TS_ENOMEM, "out of memory");
        else if (shared || tenanted)
            rc = ts_replay_run_tenants(&cfg, pr->ops,
                                       shared ? TS_REPLAY_SHARED : TS_REPLAY_SILOED, W->jobs,
                                       W->njobs, t->tenants, t->ntenants, out, &pr->per[w],
                                       pr->tres, &pr->fair, &log, &err);
        else
            rc = ts_replay_run_logged(&cfg, pr->ops, W->jobs, W->njobs, out, &pr->per[w],
                                      want_series ? &log : NULL, &err);
        if (rc == 0 && o->jobs_out_f)
            replay_write_jobs(o->jobs_out_f, pr->ops->name, W, t, out);
        if (rc == 0 && want_series)
            rc = ts_replay_series_build(W->jobs, W->njobs, out, &log, t->ntenants,
                                        (long)cfg.nodes * cfg.gpus_per_node, SERIES_POINTS_MAX,
                                        &pr->series[w], &err);
        if (rc)
            fprintf(stderr, "tessera-sim replay: %s, %s: %s\n", pr->ops->name, W->name, err.msg);
        ts_replay_log_free(&log);
        free(out);
    }
    ts_replay_result_mean(pr->per, t->nwl, &pr->mean);
    return rc ? 1 : 0;
}

static void free_runs(replay_policy_run *pr, int npol, int nwl)
{
    for (int p = 0; p < npol; p++) {
        for (int w = 0; pr[p].series && w < nwl; w++)
            ts_replay_series_free(pr[p].series[w]);
        free(pr[p].series);
        free(pr[p].per);
        free(pr[p].tres);
    }
}

int replay_main(int argc, char **argv)
{
    for (int i = 2; i < argc; i++)
        if (strcmp(argv[i], "--job-model") == 0)
            return replay_pollux_main(argc, argv);
    options o;
    int rc = parse_options(argc, argv, &o);
    if (rc)
        return rc < 0 ? 0 : rc;
    const char *format = NULL;
    ts_replay_trace *t = NULL;
    if ((rc = load_trace(&o, &format, &t)) != 0)
        return rc;
    /* a heavier (or lighter) load of the same jobs: arrivals compressed */
    for (int w = 0; w < t->nwl && o.load != 1; w++)
        for (int j = 0; j < t->wl[w].njobs; j++)
            t->wl[w].jobs[j].submit_s /= o.load;
    if ((rc = settle_config(&o, format, t)) != 0) {
        ts_replay_trace_free(t);
        return rc;
    }
    if (o.jobs_out) {
        o.jobs_out_f = fopen(o.jobs_out, "w");
        if (!o.jobs_out_f) {
            fprintf(stderr, "tessera-sim replay: --jobs-out: %s: %s\n", o.jobs_out,
                    strerror(errno));
            ts_replay_trace_free(t);
            return 1;
        }
        replay_write_jobs_header(o.jobs_out_f);
    }
    replay_policy_run pr[POLICIES_MAX];
    memset(pr, 0, sizeof pr);
    for (int p = 0; p < o.npol && rc == 0; p++) {
        pr[p].ops = o.ops[p];
        rc = run_policy(&o, t, &pr[p]);
    }
    replay_report rep = {o.jobs, o.set, format, t, &o.cfg, o.load, pr, o.npol,
                         o.sched_set, o.nsched_set};
    if (rc == 0) {
        replay_print(stdout, &rep);
        const char *failed = NULL;
        if (o.json && replay_write_json(o.json, &rep) != 0)
            failed = o.json;
        else if (o.series && replay_write_series(o.series, &rep) != 0)
            failed = o.series;
        else if (o.plot && sim_plot_replay(o.plot, &rep) != 0)
            failed = o.plot;
        else if (o.jobs_out_f && (fflush(o.jobs_out_f) != 0 || ferror(o.jobs_out_f)))
            failed = o.jobs_out;
        if (failed) {
            fprintf(stderr, "tessera-sim replay: %s: cannot write\n", failed);
            rc = 1;
        }
    }
    if (o.jobs_out_f && fclose(o.jobs_out_f) != 0 && rc == 0) {
        fprintf(stderr, "tessera-sim replay: %s: cannot write\n", o.jobs_out);
        rc = 1;
    }
    free_runs(pr, o.npol, t->nwl);
    ts_replay_trace_free(t);
    return rc;
}
