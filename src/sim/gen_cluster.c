/*
 * gen_cluster.c - tessera-sim gen-cluster: cluster variants of an openb node
 * list, for placement experiments on clusters of other shapes than the one
 * the scorers were tuned on (docs/simulator.md, "Generated clusters"):
 *
 *   --gpus-per-node G  every GPU model's GPUs regrouped into nodes of G GPUs
 *                      (the last node of a model holds what is left);
 *   --models M:F,...   the GPUs redistributed over models by these fractions
 *                      of the cluster's GPUs (node shape: G, or 8 when G is
 *                      not given);
 *   --cpu-per-gpu F    every node's CPU scaled by F (tight < 1 < generous);
 *   --mem-per-gpu F    every node's memory scaled by F.
 *
 * The cluster's GPU count is kept, and a model's CPU and memory per GPU are
 * the base's for that model (the cluster's average for a model the base does
 * not have) before scaling; CPU rounds to whole cores, memory to GiB. Nodes
 * without GPUs are kept, scaled. Deterministic: no seed.
 */
#include "sim/gen_cluster.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/fileio.h"
#include "tessera/load.h"

#define EXIT_BAD_INPUT 2
#define GEN_SCALE_MIN 0.1
#define GEN_SCALE_MAX 10.0
#define GEN_SHAPE_DEFAULT_GPUS 8
#define CPU_MILLI_PER_CORE 1000
#define MEM_MIB_PER_GIB 1024

typedef struct model_sum {
    int64_t gpus, cpu, mem; /* in the base */
    int64_t out_gpus;       /* in the variant */
} model_sum;

typedef struct gen_opts {
    int gpus_per_node;      /* 0: keep the base's node shapes */
    double cpu_scale, mem_scale;
    double share[TS_MAX_GPU_MODELS];
    bool models;            /* --models given */
} gen_opts;

static int64_t round_to(double v, int64_t unit)
{
    int64_t r = (int64_t)llround(v / (double)unit) * unit;
    return r < unit ? unit : r;
}

static void gen_usage(FILE *f)
{
    fprintf(f, "usage: tessera-sim gen-cluster --nodes BASE.csv --out OUT.csv\n"
               "         [--gpus-per-node G] [--models M:F[,M:F...]] [--cpu-per-gpu F]\n"
               "         [--mem-per-gpu F]\n"
               "  G: 1..%d GPUs per node; --models: fractions of the cluster's GPUs by model\n"
               "  (summing to 1); --cpu-per-gpu, --mem-per-gpu: scale factors in [%.1f, %.0f].\n",
            TS_NODE_MAX_GPUS, GEN_SCALE_MIN, GEN_SCALE_MAX);
}

/* "T4:0.5,G2:0.5" into o->share; 0 or -1 after saying what is wrong. */
static int parse_models(const char *v, gen_opts *o)
{
    char *copy = strdup(v), *save = NULL;
    double sum = 0;
    if (!copy)
        return -1;
    for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        char *colon = strchr(t, ':'), *end;
        if (!colon) {
            fprintf(stderr, "tessera-sim: --models: \"%s\": expected MODEL:FRACTION\n", t);
            free(copy);
            return -1;
        }
        *colon = '\0';
        int m = ts_gpu_model_lookup(t);
        errno = 0;
        double f = strtod(colon + 1, &end);
        if (m < 0 || end == colon + 1 || *end || errno || !(f > 0 && f <= 1)) {
            fprintf(stderr, "tessera-sim: --models: \"%s\": %s\n", t,
                    m < 0 ? "unknown GPU model" : "fraction must be in (0, 1]");
            free(copy);
            return -1;
        }
        o->share[m] += f;
        sum += f;
    }
    free(copy);
    if (fabs(sum - 1.0) > 1e-6) {
        fprintf(stderr, "tessera-sim: --models: fractions sum to %.4f, not 1\n", sum);
        return -1;
    }
    o->models = true;
    return 0;
}

static int parse_scale(const char *opt, const char *v, double *out)
{
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (end == v || *end || errno || !(x >= GEN_SCALE_MIN && x <= GEN_SCALE_MAX)) {
        fprintf(stderr, "tessera-sim: %s: must be a number in [%.1f, %.0f], got \"%s\"\n", opt,
                GEN_SCALE_MIN, GEN_SCALE_MAX, v);
        return -1;
    }
    *out = x;
    return 0;
}

/* The GPUs of each model in the variant: the base's, or --models' fractions
 * of the total with the rounding left over given to the largest share. */
static void plan_models(const gen_opts *o, model_sum *ms, int64_t total)
{
    int nm = ts_gpu_model_count(), largest = -1;
    int64_t given = 0;
    for (int m = 0; m < nm; m++) {
        ms[m].out_gpus = o->models ? (int64_t)floor(o->share[m] * (double)total) : ms[m].gpus;
        given += ms[m].out_gpus;
        if (o->models && o->share[m] > 0 && (largest < 0 || o->share[m] > o->share[largest]))
            largest = m;
    }
    if (largest >= 0)
        ms[largest].out_gpus += total - given;
}

static int write_node(FILE *f, int *k, int64_t cpu, int64_t mem, int gpus, const char *model)
{
    return fprintf(f, "gen-node-%05d,%lld,%lld,%d,%s\n", (*k)++, (long long)cpu, (long long)mem,
                   gpus, model) < 0;
}

static int write_variant(const char *path, const ts_cluster *c, const gen_opts *o, ts_err *err)
{
    model_sum ms[TS_MAX_GPU_MODELS] = {{0}};
    int64_t total = 0, cpu_all = 0, mem_all = 0;
    for (int n = 0; n < c->nnodes; n++) {
        const ts_node *nd = &c->nodes[n];
        if (nd->ngpu == 0 || nd->model < 0)
            continue;
        ms[nd->model].gpus += nd->ngpu;
        ms[nd->model].cpu += nd->cpu_milli;
        ms[nd->model].mem += nd->mem_mib;
        total += nd->ngpu;
        cpu_all += nd->cpu_milli;
        mem_all += nd->mem_mib;
    }
    if (total == 0)
        return ts_err_set(err, TS_EINVAL, "the base cluster has no GPUs");
    plan_models(o, ms, total);
    FILE *f = fopen(path, "w");
    if (!f)
        return ts_err_set(err, TS_EIO, "%s: %s", path, strerror(errno));
    int bad = fprintf(f, "sn,cpu_milli,memory_mib,gpu,model\n") < 0, k = 0;
    bool regroup = o->gpus_per_node > 0 || o->models;
    for (int n = 0; n < c->nnodes && !bad; n++) {
        const ts_node *nd = &c->nodes[n];
        if (regroup && nd->ngpu > 0)
            continue;
        bad = write_node(f, &k, round_to((double)nd->cpu_milli * o->cpu_scale, CPU_MILLI_PER_CORE),
                         round_to((double)nd->mem_mib * o->mem_scale, MEM_MIB_PER_GIB), nd->ngpu,
                         nd->model >= 0 ? ts_gpu_model_get(nd->model)->name : "");
    }
    int G = o->gpus_per_node > 0 ? o->gpus_per_node : GEN_SHAPE_DEFAULT_GPUS;
    for (int m = 0; regroup && m < ts_gpu_model_count() && !bad; m++) {
        double cpu_per = ms[m].gpus ? (double)ms[m].cpu / (double)ms[m].gpus
                                    : (double)cpu_all / (double)total;
        double mem_per = ms[m].gpus ? (double)ms[m].mem / (double)ms[m].gpus
                                    : (double)mem_all / (double)total;
        for (int64_t left = ms[m].out_gpus; left > 0 && !bad;) {
            int g = left < G ? (int)left : G;
            bad = write_node(f, &k, round_to(cpu_per * g * o->cpu_scale, CPU_MILLI_PER_CORE),
                             round_to(mem_per * g * o->mem_scale, MEM_MIB_PER_GIB), g,
                             ts_gpu_model_get(m)->name);
            left -= g;
        }
    }
    if (fclose(f) != 0 || bad)
        return ts_err_set(err, TS_EIO, "%s: write failed", path);
    return 0;
}

/* gen-cluster's options. */
typedef struct cluster_args {
    const char *nodes, *out;
    gen_opts o;
} cluster_args;

static int parse_gpus_per_node(const char *v, gen_opts *o)
{
    char *end;
    long g = strtol(v, &end, 10);
    if (end == v || *end || g < 1 || g > TS_NODE_MAX_GPUS) {
        fprintf(stderr, "tessera-sim: --gpus-per-node: must be 1..%d, got \"%s\"\n",
                TS_NODE_MAX_GPUS, v);
        return -1;
    }
    o->gpus_per_node = (int)g;
    return 0;
}

static int set_option(void *ctx, const char *k, const char *v)
{
    cluster_args *a = ctx;
    if (strcmp(k, "--nodes") == 0)
        a->nodes = v;
    else if (strcmp(k, "--out") == 0)
        a->out = v;
    else if (strcmp(k, "--gpus-per-node") == 0)
        return parse_gpus_per_node(v, &a->o);
    else if (strcmp(k, "--models") == 0)
        return parse_models(v, &a->o);
    else if (strcmp(k, "--cpu-per-gpu") == 0)
        return parse_scale(k, v, &a->o.cpu_scale);
    else if (strcmp(k, "--mem-per-gpu") == 0)
        return parse_scale(k, v, &a->o.mem_scale);
    else
        return SIM_OPT_UNKNOWN;
    return 0;
}

int gen_cluster_main(int argc, char **argv)
{
    cluster_args a = {.o = {.cpu_scale = 1.0, .mem_scale = 1.0}};
    int bad = sim_opt_pairs(argc, argv, "tessera-sim", gen_usage, set_option, &a);
    if (bad)
        return bad < 0 ? 0 : bad;
    if (!a.nodes || !a.out)
        return sim_required("tessera-sim", a.nodes ? "--out" : "--nodes", gen_usage);
    ts_err err = {0};
    ts_cluster *c = sim_load_cluster(a.nodes, false, &err);
    if (!c) {
        fprintf(stderr, "tessera-sim: %s\n", err.msg);
        return EXIT_BAD_INPUT;
    }
    int rc = write_variant(a.out, c, &a.o, &err);
    if (rc)
        fprintf(stderr, "tessera-sim: %s\n", err.msg);
    ts_cluster_free(c);
    return rc == 0 ? 0 : rc == TS_EINVAL ? EXIT_BAD_INPUT : 1;
}
