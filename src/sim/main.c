/*
 * main.c - tessera-sim, the trace-driven simulator's command line.
 *
 *   tessera-sim fgd --nodes NODES.csv --pods PODS.csv --policy P[,P...]
 *       [--seeds 42-51] [--tune 1.3] [--published SUMMARY.csv]
 *       [--json OUT.json] [--csv OUT.csv] [--jobs N] [--quiet]
 *   tessera-sim replay ...   (time-based replay: see replay_main.c)
 *   tessera-sim gen-openb ... (openb-style workload variants: gen_openb.c)
 *
 * NODES may also be a cluster in Tessera's YAML format (*.yaml, *.yml).
 * Loads the trace, builds the typical-pod list from the pod file as given,
 * runs every (policy, seed) on the production placer and prints the table.
 * Bad input (unknown option, bad number, malformed file) exits 2 with a
 * message naming the file, line and field; nothing is run.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sim/experiment.h"
#include "sim/fileio.h"
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
            "fgd policies: core (the scheduling cycle, default configuration; places as %s),\n"
            "  core-learned (the same, learning its expected workload online),",
            TS_PLACEMENT_DEFAULT);
    for (const struct ts_scorer_ops *const *p = ts_scorer_all(); *p; p++)
        fprintf(f, " %s", (*p)->name);
    fprintf(f, "\n");
}

static int bad(const char *fmt, const char *arg)
{
    fprintf(stderr, "tessera-sim: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n");
    return EXIT_BAD_INPUT;
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
    if (strcmp(argv[1], "fgd") != 0)
        return bad("unknown experiment \"%s\" (expected: fgd, replay or gen-openb)", argv[1]);
    const char *nodes_path = NULL, *pods_path = NULL, *policies = NULL, *seeds_arg = "42-51";
    const char *published = NULL, *json_path = NULL, *csv_path = NULL;
    double tune = 1.3;
    long jobs = sysconf(_SC_NPROCESSORS_ONLN);
    int quiet = 0;
    for (int i = 2; i < argc; i++) {
        const char *o = argv[i];
        if (strcmp(o, "--quiet") == 0) {
            quiet = 1;
            continue;
        }
        if (i + 1 >= argc)
            return bad("%s: needs a value", o);
        const char *v = argv[++i];
        if (strcmp(o, "--nodes") == 0)
            nodes_path = v;
        else if (strcmp(o, "--pods") == 0)
            pods_path = v;
        else if (strcmp(o, "--policy") == 0)
            policies = v;
        else if (strcmp(o, "--seeds") == 0)
            seeds_arg = v;
        else if (strcmp(o, "--published") == 0)
            published = v;
        else if (strcmp(o, "--json") == 0)
            json_path = v;
        else if (strcmp(o, "--csv") == 0)
            csv_path = v;
        else if (strcmp(o, "--tune") == 0) {
            char *end;
            tune = strtod(v, &end);
            if (*end || end == v || !(tune > 0 && tune <= 10))
                return bad("--tune: must be a number in (0, 10], got \"%s\"", v);
        } else if (strcmp(o, "--jobs") == 0) {
            char *end;
            jobs = strtol(v, &end, 10);
            if (*end || end == v || jobs < 1 || jobs > 64)
                return bad("--jobs: must be 1..64, got \"%s\"", v);
        } else
            return bad("unknown option \"%s\"", o);
    }
    if (!nodes_path)
        return bad("%s", "--nodes: required");
    if (!pods_path)
        return bad("%s", "--pods: required");
    if (!policies)
        return bad("%s", "--policy: required");

    uint64_t seeds[SEEDS_MAX];
    int nseeds;
    if (parse_seeds(seeds_arg, seeds, &nseeds) != 0)
        return bad("--seeds: expected A-B or a comma list of non-negative integers, got \"%s\"",
                   seeds_arg);
    const struct ts_scorer_ops *pol[POLICIES_MAX];
    int npol = 0;
    char *pcopy = strdup(policies), *save = NULL;
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
        if (npol == POLICIES_MAX) {
            free(pcopy);
            return bad("--policy: at most %s policies", "16");
        }
        pol[npol++] = ops;
    }
    free(pcopy);
    if (npol == 0)
        return bad("%s", "--policy: empty list");

    ts_err err = {0};
    size_t len;
    ts_cluster *cluster = NULL;
    ts_workload *wl = NULL;
    char *buf = sim_read_file(nodes_path, &len, &err);
    if (!buf || (is_yaml(nodes_path) ? ts_load_cluster_yaml(buf, len, nodes_path, &cluster, &err)
                                      : ts_load_nodes_csv(buf, len, nodes_path, &cluster, &err)) != 0) {
        free(buf);
        fprintf(stderr, "tessera-sim: %s\n", err.msg);
        return EXIT_BAD_INPUT;
    }
    free(buf);
    buf = sim_read_file(pods_path, &len, &err);
    if (!buf || ts_load_pods_csv(buf, len, pods_path, &wl, &err) != 0) {
        free(buf);
        ts_cluster_free(cluster);
        fprintf(stderr, "tessera-sim: %s\n", err.msg);
        return EXIT_BAD_INPUT;
    }
    free(buf);
    if (cluster->total_gpus == 0) {
        ts_cluster_free(cluster);
        ts_workload_free(wl);
        return bad("%s: the cluster has no GPUs", nodes_path);
    }

    int rc = 0;
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
        return 1;
    }
    for (int p = 0; p < npol; p++)
        for (int s = 0; s < nseeds; s++) {
            runs[p * nseeds + s].policy = pol[p];
            runs[p * nseeds + s].seed = seeds[s];
        }
    sim_input in = {.cluster = cluster, .pods = wl, .typical = &typ, .tune = tune};
    char wname[256];
    workload_name(pods_path, wname, sizeof wname);
    if (!quiet)
        fprintf(stderr, "tessera-sim: %s: %d pods, %d classes (%d typical); %d nodes, %lld GPUs; "
                        "%d runs on %ld threads\n",
                wname, wl->npods, wl->nspecs, typ.n, cluster->nnodes,
                (long long)cluster->total_gpus, nruns, jobs);
    sim_run_all(&in, runs, nruns, (int)jobs, !quiet && isatty(2));
    for (int i = 0; i < nruns; i++)
        if (runs[i].rc != 0) {
            fprintf(stderr, "tessera-sim: %s seed %llu: %s\n", runs[i].policy->name,
                    (unsigned long long)runs[i].seed, runs[i].err.msg);
            rc = 1;
        }
    if (rc == 0) {
        for (int p = 0; p < npol; p++)
            sim_summarise(&runs[p * nseeds], nseeds, &sum[p]);
        if (published && sim_published_load(published, wname, sum, npol, &err) != 0) {
            fprintf(stderr, "tessera-sim: %s\n", err.msg);
            rc = EXIT_BAD_INPUT;
        }
    }
    if (rc == 0) {
        sim_print_table(stdout, wname, (int)cluster->total_gpus, sum, npol);
        if (json_path &&
            sim_write_json(json_path, wname, (int)cluster->total_gpus, sum, npol, &err) != 0)
            rc = 1;
        if (csv_path && sim_write_csv(csv_path, wname, sum, npol, &err) != 0)
            rc = 1;
        if (rc)
            fprintf(stderr, "tessera-sim: %s\n", err.msg);
    }
    free(runs);
    free(sum);
    ts_typical_free(&typ);
    ts_cluster_free(cluster);
    ts_workload_free(wl);
    return rc;
}
