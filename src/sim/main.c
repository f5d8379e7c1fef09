/*
 * main.c - tessera-sim, the trace-driven simulator's command line.
 *
 *   tessera-sim fgd --nodes NODES.csv --pods PODS.csv --policy P[,P...]
 *       [--seeds 42-51] [--tune 1.3] [--published SUMMARY.csv]
 *       [--json OUT.json] [--csv OUT.csv] [--jobs N] [--quiet]
 *   tessera-sim replay ...   (time-based replay: see replay_main.c)
 *   tessera-sim gen-openb ... (openb-style workload variants: gen_openb.c)
 *   tessera-sim gen-cluster ... (cluster variants of a node list: gen_cluster.c)
 *   tessera-sim bound --nodes NODES.csv --pods PODS.csv [--seeds 42-51]
 *       [--tune 1.3] [--packing OUT.csv] [--place-cpu-pods]   (offline bound)
 *
 * NODES may also be a cluster in Tessera's YAML format (*.yaml, *.yml).
 * Loads the trace, builds the typical-pod list from the pod file as given,
 * runs every (policy, seed) on the production placer and prints the table.
 * Bad input (unknown option, bad number, malformed file) exits 2 with a
 * message naming the file, line and field; nothing is run.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sim/bound.h"
#include "sim/experiment.h"
#include "sim/fileio.h"
#include "sim/gen_cluster.h"
#include "sim/gen_openb.h"
#include "sim/replay.h"
#include "sim/report.h"
#include "tessera/frag.h"
#include "tessera/version.h"

#define EXIT_BAD_INPUT 2
#define SEEDS_MAX 1024
#define POLICIES_MAX 16

static void usage(FILE *f)
{
    fprintf(f,
            "usage: tessera-sim fgd --nodes NODES.csv|CLUSTER.yaml --pods PODS.csv --policy P[,P...]\n"
            "         [--seeds 42-51] [--tune 1.3] [--published SUMMARY.csv]\n"
            "         [--json OUT.json] [--csv OUT.csv] [--jobs N] [--quiet]\n"
            "       tessera-sim replay --jobs JOBS.csv [--set NAME] --policy P[,P...] ...\n"
            "         (tessera-sim replay --help for its options)\n"
            "       tessera-sim gen-openb --pods BASE.csv --out OUT.csv [--seed N] ...\n"
            "         (tessera-sim gen-openb --help for its options)\n"
            "       tessera-sim gen-cluster --nodes BASE.csv --out OUT.csv ...\n"
            "         (tessera-sim gen-cluster --help for its options)\n"
            "       tessera-sim bound --nodes NODES.csv|CLUSTER.yaml --pods PODS.csv\n"
            "         [--seeds 42-51] [--tune 1.3] [--packing OUT.csv] [--place-cpu-pods]\n"
            "fgd policies: core (the scheduling cycle, default configuration; places as %s),\n"
            "  core-learned (the same, learning its expected workload online),",
            TS_PLACEMENT_DEFAULT);
    for (const struct ts_scorer_ops *const *p = ts_scorer_all(); *p; p++)
        fprintf(f, " %s", (*p)->name);
    fprintf(f, "\n");
}

static int bad(const char *fmt, const char *arg)
{
    return sim_bad("tessera-sim", fmt, arg);
}

/* "42-51", "42", or "1,5,9" */
static int parse_seeds(const char *s, uint64_t *seeds, int *n)
{
    *n = 0;
    char *copy = strdup(s), *save = NULL;
    if (!copy)
        return -1;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *end;
        errno = 0;
        unsigned long long a = strtoull(tok, &end, 10), b = a;
        if (end == tok || errno || tok[0] == '-')
            goto fail;
        if (*end == '-') {
            char *e2;
            b = strtoull(end + 1, &e2, 10);
            if (e2 == end + 1 || *e2 || b < a)
                goto fail;
        } else if (*end) {
            goto fail;
        }
        for (unsigned long long v = a; v <= b; v++) {
            if (*n == SEEDS_MAX)
                goto fail;
            seeds[(*n)++] = v;
        }
    }
    free(copy);
    return *n > 0 ? 0 : -1;
fail:
    free(copy);
    return -1;
}

/* A cluster given as Tessera's YAML (docs/cluster-format.md) rather than the
 * openb node CSV. */
static bool is_yaml(const char *path)
{
    size_t l = strlen(path);
    return (l > 5 && strcmp(path + l - 5, ".yaml") == 0) ||
           (l > 4 && strcmp(path + l - 4, ".yml") == 0);
}

/* workload name: the pod file's base name without ".csv" */
static void workload_name(const char *path, char *out, size_t cap)
{
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    snprintf(out, cap, "%s", b);
    size_t l = strlen(out);
    if (l > 4 && strcmp(out + l - 4, ".csv") == 0)
        out[l - 4] = '\0';
}

/* The options of `tessera-sim fgd`. */
typedef struct {
    const char *nodes_path, *pods_path, *policies, *seeds_arg, *published, *json_path, *csv_path;
    double tune;
    long jobs;
    int quiet;
} fgd_opts;

/* 0, or the exit code after saying what is wrong. */
static int fgd_parse(int argc, char **argv, fgd_opts *o)
{
    *o = (fgd_opts){.seeds_arg = "42-51", .tune = 1.3, .jobs = sysconf(_SC_NPROCESSORS_ONLN)};
    for (int i = 2; i < argc; i++) {
        const char *k = argv[i];
        if (strcmp(k, "--quiet") == 0) {
            o->quiet = 1;
            continue;
        }
        if (i + 1 >= argc)
            return bad("%s: needs a value", k);
        const char *v = argv[++i];
        const struct { const char *name; const char **to; } paths[] = {
            {"--nodes", &o->nodes_path}, {"--pods", &o->pods_path},
            {"--policy", &o->policies},  {"--seeds", &o->seeds_arg},
            {"--published", &o->published}, {"--json", &o->json_path},
            {"--csv", &o->csv_path}};
        size_t p = 0;
        while (p < sizeof paths / sizeof paths[0] && strcmp(k, paths[p].name) != 0)
            p++;
        char *end;
        if (p < sizeof paths / sizeof paths[0]) {
            *paths[p].to = v;
        } else if (strcmp(k, "--tune") == 0) {
            o->tune = strtod(v, &end);
            if (*end || end == v || !(o->tune > 0 && o->tune <= 10))
                return bad("--tune: must be a number in (0, 10], got \"%s\"", v);
        } else if (strcmp(k, "--jobs") == 0) {
            o->jobs = strtol(v, &end, 10);
            if (*end || end == v || o->jobs < 1 || o->jobs > 64)
                return bad("--jobs: must be 1..64, got \"%s\"", v);
        } else {
            return bad("unknown option \"%s\"", k);
        }
    }
    if (!o->nodes_path)
        return bad("%s", "--nodes: required");
    if (!o->pods_path)
        return bad("%s", "--pods: required");
    if (!o->policies)
        return bad("%s", "--policy: required");
    return 0;
}

/* The scorers of a comma list into pol; 0, or the exit code. */
static int fgd_policies(const char *policies, const struct ts_scorer_ops **pol, int *npol)
{
    *npol = 0;
    char *pcopy = strdup(policies), *save = NULL;
    if (!pcopy)
        return bad("%s", "out of memory");
    for (char *t = strtok_r(pcopy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        const struct ts_scorer_ops *ops =
            strcmp(t, sim_policy_core.name) == 0           ? &sim_policy_core
            : strcmp(t, sim_policy_core_learned.name) == 0 ? &sim_policy_core_learned
                                                           : ts_scorer_find(t);
        if (!ops) {
            fprintf(stderr, "tessera-sim: --policy: unknown policy \"%s\"\n", t);
            usage(stderr);
            free(pcopy);
            return EXIT_BAD_INPUT;
        }
        if (*npol == POLICIES_MAX) {
            free(pcopy);
            return bad("--policy: at most %s policies", "16");
        }
        pol[(*npol)++] = ops;
    }
    free(pcopy);
    return *npol == 0 ? bad("%s", "--policy: empty list") : 0;
}

/* The cluster and the pods; 0, or the exit code (nothing left to free). */
static int fgd_load(const fgd_opts *o, ts_cluster **cluster, ts_workload **wl)
{
    ts_err err = {0};
    *wl = NULL;
    if (!(*cluster = sim_load_cluster(o->nodes_path, is_yaml(o->nodes_path), &err)) ||
        !(*wl = sim_load_pods(o->pods_path, &err))) {
        ts_cluster_free(*cluster);
        fprintf(stderr, "tessera-sim: %s\n", err.msg);
        return EXIT_BAD_INPUT;
    }
    if ((*cluster)->total_gpus == 0) {
        ts_cluster_free(*cluster);
        ts_workload_free(*wl);
        return bad("%s: the cluster has no GPUs", o->nodes_path);
    }
    return 0;
}

/* Summarises the runs, adds the published figures and writes the reports. */
static int fgd_report(const fgd_opts *o, const char *wname, int gpus, sim_run *runs,
                      int npol, int nseeds, sim_summary *sum)
{
    ts_err err = {0};
    int rc = 0;
    for (int i = 0; i < npol * nseeds; i++)
        if (runs[i].rc != 0) {
            fprintf(stderr, "tessera-sim: %s seed %llu: %s\n", runs[i].policy->name,
                    (unsigned long long)runs[i].seed, runs[i].err.msg);
            rc = 1;
        }
    if (rc)
        return rc;
    for (int p = 0; p < npol; p++)
        sim_summarise(&runs[p * nseeds], nseeds, &sum[p]);
    if (o->published && sim_published_load(o->published, wname, sum, npol, &err) != 0) {
        fprintf(stderr, "tessera-sim: %s\n", err.msg);
        return EXIT_BAD_INPUT;
    }
    sim_print_table(stdout, wname, gpus, sum, npol);
    if (o->json_path && sim_write_json(o->json_path, wname, gpus, sum, npol, &err) != 0)
        rc = 1;
    if (o->csv_path && sim_write_csv(o->csv_path, wname, sum, npol, &err) != 0)
        rc = 1;
    if (rc)
        fprintf(stderr, "tessera-sim: %s\n", err.msg);
    return rc;
}

/* `tessera-sim fgd`: every policy on every seed, summarised. */
static int fgd_main(int argc, char **argv)
{
    fgd_opts o;
    int rc = fgd_parse(argc, argv, &o);
    if (rc)
        return rc;
    uint64_t seeds[SEEDS_MAX];
    int nseeds;
    if (parse_seeds(o.seeds_arg, seeds, &nseeds) != 0)
        return bad("--seeds: expected A-B or a comma list of non-negative integers, got \"%s\"",
                   o.seeds_arg);
    const struct ts_scorer_ops *pol[POLICIES_MAX];
    int npol;
    ts_cluster *cluster;
    ts_workload *wl;
    if ((rc = fgd_policies(o.policies, pol, &npol)) != 0 ||
        (rc = fgd_load(&o, &cluster, &wl)) != 0)
        return rc;
    ts_err err = {0};
    ts_typical typ;
    if (ts_typical_from_workload(wl, TS_TYPICAL_COVERAGE_DEFAULT, &typ, &err) != 0) {
        fprintf(stderr, "tessera-sim: %s\n", err.msg);
        ts_cluster_free(cluster);
        ts_workload_free(wl);
        return 1;
    }
    int nruns = npol * nseeds;
    sim_run *runs = calloc((size_t)nruns, sizeof *runs);
    sim_summary *sum = calloc((size_t)npol, sizeof *sum);
    if (!runs || !sum) {
        fprintf(stderr, "tessera-sim: out of memory\n");
        rc = 1;
    } else {
        for (int p = 0; p < npol; p++)
            for (int s = 0; s < nseeds; s++) {
                runs[p * nseeds + s].policy = pol[p];
                runs[p * nseeds + s].seed = seeds[s];
            }
        sim_input in = {.cluster = cluster, .pods = wl, .typical = &typ, .tune = o.tune};
        char wname[256];
        workload_name(o.pods_path, wname, sizeof wname);
        if (!o.quiet)
            fprintf(stderr, "tessera-sim: %s: %d pods, %d classes (%d typical); %d nodes, %lld "
                            "GPUs; %d runs on %ld threads\n",
                    wname, wl->npods, wl->nspecs, typ.n, cluster->nnodes,
                    (long long)cluster->total_gpus, nruns, o.jobs);
        sim_run_all(&in, runs, nruns, (int)o.jobs, !o.quiet && isatty(2));
        rc = fgd_report(&o, wname, (int)cluster->total_gpus, runs, npol, nseeds, sum);
    }
    free(runs);
    free(sum);
    ts_typical_free(&typ);
    ts_cluster_free(cluster);
    ts_workload_free(wl);
    return rc;
}

/* The pods of seed's run that have arrived when the fgd experiment reads its
 * figure: every pod up to the last event of bin 100 (of bin 101 when bin 100
 * has none). The offline optimum grows with the set, so its bound holds for
 * every event that bin averages. */
static int arrived_prefix(const sim_input *in, const int *seq, int nseq)
{
    int64_t cap = in->cluster->total_gpus * TS_MILLI_PER_GPU, arrived = 0;
    int last100 = -1, last101 = -1;
    for (int i = 0; i < nseq; i++) {
        const ts_request *r = &in->pods->pods[seq[i]].req;
        arrived += (int64_t)r->num_gpu * r->gpu_milli;
        double pct = nearbyint(100.0 * (double)arrived / (double)cap);
        if (pct <= SIM_ARRIVED_REPORT)
            last100 = i;
        if (pct <= SIM_ARRIVED_REPORT + 1)
            last101 = i;
    }
    /* bin 100 is empty when the last event at or below it is below 99.5 % */
    int64_t at = 0;
    for (int i = 0; i <= last100; i++)
        at += (int64_t)in->pods->pods[seq[i]].req.num_gpu * in->pods->pods[seq[i]].req.gpu_milli;
    bool bin100_empty = nearbyint(100.0 * (double)at / (double)cap) < SIM_ARRIVED_REPORT;
    return (bin100_empty ? last101 : last100) + 1;
}

static int bound_write_packing(FILE *f, const ts_cluster *c, const ts_workload *w, uint64_t seed,
                               const sim_bound *b)
{
    for (int i = 0; i < b->npods; i++) {
        const ts_alloc *a = &b->allocs[i];
        fprintf(f, "%llu,%d,%s,%s,", (unsigned long long)seed, i, w->pods[b->pods[i]].name,
                a->node >= 0 ? c->nodes[a->node].name : "");
        for (int g = 0; a->node >= 0 && g < a->ngpu; g++)
            fprintf(f, "%s%d", g ? "|" : "", a->gpu[g]);
        fprintf(f, "\n");
    }
    return ferror(f) ? -1 : 0;
}

/* Per spec: whether a pod of it fits some node of the empty cluster c. */
static bool *specs_placeable(const ts_cluster *c, const ts_workload *w)
{
    bool *ok = calloc((size_t)w->nspecs + 1, sizeof *ok);
    for (int k = 0; ok && k < w->nspecs; k++)
        for (int j = 0; j < c->nnodes && !ok[k]; j++)
            ok[k] = ts_node_fits(&c->nodes[j], &w->specs[k]);
    return ok;
}

/* The bound of the figure the fgd experiment reports: the mean, over the
 * events of bin 100 (seq[0..n) ends with its last), of what each could have
 * allocated - at most the LP optimum at the first of BIN_BOUND_STEPS events
 * spread over the bin, or of its last, at or after it (the optimum only grows
 * as pods arrive), and at most the GPU that pods fitting an empty
 * node had asked for by then - rounded to 0.01 % as the experiment rounds
 * each event and the bin's mean. The optima are of the LP that may leave
 * CPU-only pods out (lp_milli: the last event's), which never falls as pods
 * arrive. The LP optimum alone where bin 100 has no event. */
#define BIN_BOUND_STEPS 4 /* LP optima solved inside bin 100 besides its last event's */

static double bin_bound_pct(const sim_input *in, const int *seq, int n, double lp_milli,
                            const bool *placeable, unsigned flags)
{
    if (flags & SIM_BOUND_PLACE_CPU_PODS) { /* lp_milli made them a must */
        sim_bound lb;
        ts_err le = {0};
        lp_milli = sim_bound_solve(in->cluster, in->pods, seq, n, SIM_BOUND_LP_ONLY, &lb, &le) == 0
                       ? lb.lp_milli
                       : INFINITY;
        sim_bound_fini(&lb);
    }
    double cap = (double)in->cluster->total_gpus * TS_MILLI_PER_GPU, sum = 0;
    int64_t arrived = 0;
    int first = -1;
    for (int i = 0; i < n && first < 0; i++) {
        const ts_pod *p = &in->pods->pods[seq[i]];
        arrived += (int64_t)p->req.num_gpu * p->req.gpu_milli;
        if (nearbyint(100.0 * (double)arrived / cap) == SIM_ARRIVED_REPORT)
            first = i;
    }
    if (first < 0)
        return 100.0 * lp_milli / cap;
    /* the optimum at BIN_BOUND_STEPS events spread over the bin: each bounds
     * every event up to it */
    int at[BIN_BOUND_STEPS + 1];
    double opt[BIN_BOUND_STEPS + 1];
    for (int s = 0; s < BIN_BOUND_STEPS; s++) {
        at[s] = first + (int)((int64_t)(n - 1 - first) * s / BIN_BOUND_STEPS);
        sim_bound b;
        ts_err err = {0};
        opt[s] = sim_bound_solve(in->cluster, in->pods, seq, at[s] + 1, SIM_BOUND_LP_ONLY, &b,
                                   &err) == 0
                     ? b.lp_milli
                     : lp_milli;
        sim_bound_fini(&b);
    }
    at[BIN_BOUND_STEPS] = n - 1;
    opt[BIN_BOUND_STEPS] = lp_milli;
    int64_t fit = 0;
    int events = 0, s = 0;
    arrived = 0;
    for (int i = 0; i < n; i++) {
        const ts_pod *p = &in->pods->pods[seq[i]];
        int64_t m = (int64_t)p->req.num_gpu * p->req.gpu_milli;
        arrived += m;
        fit += placeable[p->spec_key] ? m : 0;
        while (s < BIN_BOUND_STEPS && at[s] < i)
            s++;
        if (nearbyint(100.0 * (double)arrived / cap) == SIM_ARRIVED_REPORT) {
            sum += nearbyint(100.0 * 100.0 * fmin(opt[s], (double)fit) / cap) / 100.0;
            events++;
        }
    }
    return nearbyint(100.0 * sum / events) / 100.0; /* the experiment rounds the bin's mean */
}

/* A mean and sample SD over the seeds. */
typedef struct seed_stat {
    double sum, sum2;
    int n;
} seed_stat;

static void stat_add(seed_stat *st, double x) { st->sum += x, st->sum2 += x * x, st->n++; }

static double stat_mean(const seed_stat *st) { return st->n ? st->sum / st->n : 0; }

static double stat_sd(const seed_stat *st)
{
    double m = stat_mean(st);
    return st->n > 1 ? sqrt(fmax(0, (st->sum2 - st->n * m * m) / (st->n - 1))) : 0;
}

/* `tessera-sim bound`: the offline bound and packing of each seed's pods. */
static int bound_main(int argc, char **argv)
{
    fgd_opts o = {.seeds_arg = "42-51", .tune = 1.3};
    const char *packing_path = NULL;
    unsigned flags = 0;
    for (int i = 2; i < argc; i++) {
        const char *k = argv[i];
        if (strcmp(k, "--place-cpu-pods") == 0) {
            flags |= SIM_BOUND_PLACE_CPU_PODS;
            continue;
        }
        if (strcmp(k, "--help") == 0) {
            usage(stdout);
            return 0;
        }
        if (i + 1 >= argc)
            return bad("%s: needs a value", k);
        const char *v = argv[++i];
        char *end;
        if (strcmp(k, "--nodes") == 0) {
            o.nodes_path = v;
        } else if (strcmp(k, "--pods") == 0) {
            o.pods_path = v;
        } else if (strcmp(k, "--seeds") == 0) {
            o.seeds_arg = v;
        } else if (strcmp(k, "--packing") == 0) {
            packing_path = v;
        } else if (strcmp(k, "--tune") == 0) {
            o.tune = strtod(v, &end);
            if (*end || end == v || !(o.tune > 0 && o.tune <= 10))
                return bad("--tune: must be a number in (0, 10], got \"%s\"", v);
        } else {
            return bad("unknown option \"%s\"", k);
        }
    }
    if (!o.nodes_path)
        return bad("%s", "--nodes: required");
    if (!o.pods_path)
        return bad("%s", "--pods: required");
    uint64_t seeds[SEEDS_MAX];
    int nseeds;
    if (parse_seeds(o.seeds_arg, seeds, &nseeds) != 0)
        return bad("--seeds: expected A-B or a comma list of non-negative integers, got \"%s\"",
                   o.seeds_arg);
    ts_cluster *cluster;
    ts_workload *wl;
    int rc = fgd_load(&o, &cluster, &wl);
    if (rc)
        return rc;
    FILE *pf = NULL;
    if (packing_path && (!(pf = fopen(packing_path, "w")) ||
                         fprintf(pf, "seed,arrival,pod,node,gpus\n") < 0)) {
        fprintf(stderr, "tessera-sim: --packing: %s: cannot write\n", packing_path);
        rc = 1;
    }
    char wname[256];
    workload_name(o.pods_path, wname, sizeof wname);
    sim_input in = {.cluster = cluster, .pods = wl, .tune = o.tune};
    double cap = (double)cluster->total_gpus * TS_MILLI_PER_GPU;
    seed_stat sb = {0}, sp = {0}, sbin = {0};
    bool *placeable = rc == 0 ? specs_placeable(cluster, wl) : NULL;
    if (rc == 0 && !placeable) {
        fprintf(stderr, "tessera-sim: out of memory\n");
        rc = 1;
    }
    if (rc == 0)
        printf("%-28s %5s %6s %8s %8s %8s %7s %8s %6s %7s  %s\n", "workload", "seed", "pods",
               "arrived%", "bound%", "packing%", "placed", "patterns", "rounds", "bin%",
               "check");
    for (int s = 0; s < nseeds && rc == 0; s++) {
        int *seq = NULL, nseq = 0;
        ts_err err = {0};
        if (sim_sequence(&in, seeds[s], &seq, &nseq) != 0) {
            fprintf(stderr, "tessera-sim: out of memory\n");
            rc = 1;
            break;
        }
        int n = arrived_prefix(&in, seq, nseq);
        sim_bound b;
        if ((rc = sim_bound_solve(cluster, wl, seq, n, flags, &b, &err)) == 0)
            rc = sim_bound_check(cluster, wl, &b, &err);
        if (rc == 0) {
            double bp = 100.0 * b.lp_milli / cap, pp = 100.0 * (double)b.pack_milli / cap;
            double bb = bin_bound_pct(&in, seq, n, b.lp_milli, placeable, flags);
            stat_add(&sb, bp), stat_add(&sp, pp), stat_add(&sbin, bb);
            printf("%-28s %5llu %6d %8.2f %8.2f %8.2f %7d %8d %6d %7.2f  feasible\n", wname,
                   (unsigned long long)seeds[s], n, 100.0 * (double)b.arrived_milli / cap, bp,
                   pp, b.placed, b.patterns, b.rounds, bb);
            if (b.cpu_pods_out > 0)
                fprintf(stderr, "tessera-sim: %s seed %llu: the packing left %d pods that ask "
                                "no GPU out; it is not held to the bound\n",
                        wname, (unsigned long long)seeds[s], b.cpu_pods_out);
            if (pf && bound_write_packing(pf, cluster, wl, seeds[s], &b) != 0)
                rc = ts_err_set(&err, TS_EIO, "--packing: %s: write failed", packing_path);
        }
        if (rc)
            fprintf(stderr, "tessera-sim: %s seed %llu: %s\n", wname,
                    (unsigned long long)seeds[s], err.msg);
        rc = rc ? 1 : 0;
        sim_bound_fini(&b);
        free(seq);
    }
    if (rc == 0)
        printf("%-28s %5s %6s %8s %8.2f %8.2f   (mean; SD %.2f / %.2f over %d seeds); bin "
               "%.2f (SD %.2f)\n",
               wname, "all", "", "", stat_mean(&sb), stat_mean(&sp), stat_sd(&sb),
               stat_sd(&sp), nseeds, stat_mean(&sbin), stat_sd(&sbin));
    if (pf && fclose(pf) != 0 && rc == 0) {
        fprintf(stderr, "tessera-sim: --packing: %s: write failed\n", packing_path);
        rc = 1;
    }
    free(placeable);
    ts_cluster_free(cluster);
    ts_workload_free(wl);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--version") == 0)
        return puts("tessera-sim " TS_VERSION) < 0;
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? EXIT_BAD_INPUT : 0;
    }
    if (strcmp(argv[1], "replay") == 0)
        return replay_main(argc, argv);
    if (strcmp(argv[1], "gen-openb") == 0)
        return gen_openb_main(argc, argv);
    if (strcmp(argv[1], "fgd") == 0)
        return fgd_main(argc, argv);
    if (strcmp(argv[1], "bound") == 0)
        return bound_main(argc, argv);
    if (strcmp(argv[1], "gen-cluster") == 0)
        return gen_cluster_main(argc, argv);
    return bad("unknown experiment \"%s\" (expected: fgd, bound, replay, gen-openb or "
               "gen-cluster)", argv[1]);
}
