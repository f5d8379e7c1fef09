/*
 * gen_openb.c - tessera-sim gen-openb: openb-style workload variants, derived
 * from a base pod list the way the fragmentation study derived its own
 * (docs/simulator.md, "Generated workloads"):
 *
 *   --gpushare F  fraction of GPU pods (by count) that are GPU shares: random
 *                 one-whole-GPU pods are replaced by shares drawn from the
 *                 base's shares (or the reverse), the pod count kept;
 *   --halves F    fraction of the one-whole-GPU pods turned into half-GPU
 *                 shares (500 milli), their CPU and memory kept: a mix of
 *                 shares twice as hungry for CPU per GPU as the pods they
 *                 came from, which openb's shares (a third of them 810
 *                 milli) do not give;
 *   --multigpu F  fraction of the GPU demand carried by multi-GPU pods: pods
 *                 drawn from the base's multi-GPU pods are added (or random
 *                 ones removed) until it is reached;
 *   --cpu F       fraction of pods (by count) that need no GPU: CPU-only pods
 *                 drawn from the base are added, or random ones removed;
 *   --gpuspec F   fraction of GPU pods pinned to GPU models: that many random
 *                 GPU pods get a model list drawn from the mix the study's
 *                 gpuspec files carry (GEN_SPECS below);
 *   --share-milli LO-HI  every share's size drawn uniformly from LO..HI
 *                 milli-GPU in steps of GEN_SHARE_STEP_MILLI (another
 *                 share-size distribution than openb's, which is 810 for
 *                 a third of its shares).
 *
 * Applied in that order, each with the one seeded generator, so the output
 * is a function of the base file, the options and the seed. Pods are written
 * in a seeded shuffled order with fresh names (gen-pod-NNNNNN).
 */
#include "sim/gen_openb.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/fileio.h"
#include "tessera/load.h"
#include "tessera/rng.h"
#include "tessera/grow.h"

#define EXIT_BAD_INPUT 2
#define GEN_PODS_MAX 1000000 /* pods written at most */
#define GEN_SHARE_STEP_MILLI 10
#define GEN_HALF_MILLI (TS_MILLI_PER_GPU / 2)

/* Model lists of the pinned pods of the study's gpuspec20 workload, by how
 * often they occur there (counted from the published file). */
static const struct {
    const char *spec;
    int weight;
} GEN_SPECS[] = {
    {"T4", 718},
    {"G2", 213},
    {"P100", 212},
    {"V100M16|V100M32", 111},
    {"P100|V100M16|V100M32", 54},
    {"G3", 51},
    {"G2|P100|T4|V100M16|V100M32", 20},
    {"V100M32", 15},
    {"P100|T4|V100M16|V100M32", 14},
    {"A10|G2|T4|V100M16|V100M32", 11},
    {"A10|T4", 9},
};
#define GEN_NSPECS ((int)(sizeof GEN_SPECS / sizeof GEN_SPECS[0]))

typedef struct gen {
    ts_request *p;
    int n, cap;
    ts_rng rng;
} gen;

static int64_t gpu_of(const ts_request *r) { return (int64_t)r->num_gpu * r->gpu_milli; }
static bool is_share(const ts_request *r) { return r->num_gpu == 1 && r->gpu_milli < 1000; }
static bool is_one(const ts_request *r) { return r->num_gpu == 1 && r->gpu_milli >= 1000; }
static bool is_multi(const ts_request *r) { return r->num_gpu > 1; }
static bool is_cpu(const ts_request *r) { return r->num_gpu == 0; }

static int push(gen *g, const ts_request *r)
{
    if (g->n == GEN_PODS_MAX)
        return TS_EINVAL;
    if (ts_grow((void **)&g->p, &g->cap, g->n + 1, 1024, sizeof *g->p) != 0)
        return TS_ENOMEM;
    g->p[g->n++] = *r;
    return 0;
}

static void drop(gen *g, int i) { g->p[i] = g->p[--g->n]; }

/* A random pod of the base that pred accepts, or NULL if it has none. */
static const ts_request *draw(const ts_workload *w, bool (*pred)(const ts_request *),
                              ts_rng *rng)
{
    int n = 0;
    for (int i = 0; i < w->npods; i++)
        n += pred(&w->pods[i].req);
    if (n == 0)
        return NULL;
    int k = (int)ts_rng_below(rng, (uint64_t)n);
    for (int i = 0; i < w->npods; i++)
        if (pred(&w->pods[i].req) && k-- == 0)
            return &w->pods[i].req;
    return NULL;
}

/* Index of a random pod of g that pred accepts, or -1. */
static int pick(gen *g, bool (*pred)(const ts_request *))
{
    int n = 0;
    for (int i = 0; i < g->n; i++)
        n += pred(&g->p[i]);
    if (n == 0)
        return -1;
    int k = (int)ts_rng_below(&g->rng, (uint64_t)n);
    for (int i = 0; i < g->n; i++)
        if (pred(&g->p[i]) && k-- == 0)
            return i;
    return -1;
}

static int count(const gen *g, bool (*pred)(const ts_request *))
{
    int n = 0;
    for (int i = 0; i < g->n; i++)
        n += pred(&g->p[i]);
    return n;
}

static int set_gpushare(gen *g, const ts_workload *w, double f, ts_err *err)
{
    const ts_request *s0 = draw(w, is_share, &g->rng), *o0 = draw(w, is_one, &g->rng);
    int share = count(g, is_share), gpu = share + count(g, is_one) + count(g, is_multi);
    int want = (int)(f * gpu + 0.5);
    if ((want > share && !s0) || (want < share && !o0))
        return ts_err_set(err, TS_EINVAL, "--gpushare: the base has no %s pods to draw",
                          want > share ? "GPU-share" : "one-GPU");
    while (share < want) {
        int i = pick(g, is_one);
        if (i < 0)
            return ts_err_set(err, TS_EINVAL, "--gpushare: %.2f needs more one-GPU pods to "
                              "replace than there are", f);
        g->p[i] = *draw(w, is_share, &g->rng);
        share++;
    }
    while (share > want) {
        g->p[pick(g, is_share)] = *draw(w, is_one, &g->rng);
        share--;
    }
    return 0;
}

/* A fraction f of the one-whole-GPU pods, chosen at random, become halves. */
static void set_halves(gen *g, double f)
{
    int want = (int)(f * count(g, is_one) + 0.5);
    for (int k = 0; k < want; k++)
        g->p[pick(g, is_one)].gpu_milli = GEN_HALF_MILLI;
}

static int set_multigpu(gen *g, const ts_workload *w, double f, ts_err *err)
{
    int64_t multi = 0, total = 0;
    for (int i = 0; i < g->n; i++) {
        total += gpu_of(&g->p[i]);
        multi += is_multi(&g->p[i]) ? gpu_of(&g->p[i]) : 0;
    }
    if (!draw(w, is_multi, &g->rng) && f > 0)
        return ts_err_set(err, TS_EINVAL, "--multigpu: the base has no multi-GPU pods to draw");
    while ((double)multi < f * (double)total) {
        const ts_request *r = draw(w, is_multi, &g->rng);
        int rc = push(g, r);
        if (rc)
            return ts_err_set(err, rc, "--multigpu: more than %d pods", GEN_PODS_MAX);
        multi += gpu_of(r);
        total += gpu_of(r);
    }
    while (multi > 0 && (double)multi > f * (double)total) {
        int i = pick(g, is_multi);
        multi -= gpu_of(&g->p[i]);
        total -= gpu_of(&g->p[i]);
        drop(g, i);
    }
    return 0;
}

static int set_cpu(gen *g, const ts_workload *w, double f, ts_err *err)
{
    int cpu = count(g, is_cpu);
    if (!draw(w, is_cpu, &g->rng) && f > 0)
        return ts_err_set(err, TS_EINVAL, "--cpu: the base has no CPU-only pods to draw");
    while ((double)cpu < f * (double)g->n) {
        int rc = push(g, draw(w, is_cpu, &g->rng));
        if (rc)
            return ts_err_set(err, rc, "--cpu: more than %d pods", GEN_PODS_MAX);
        cpu++;
    }
    while (cpu > 0 && (double)cpu > f * (double)g->n + 1.0) {
        drop(g, pick(g, is_cpu));
        cpu--;
    }
    return 0;
}

static bool is_gpu_free(const ts_request *r) { return r->num_gpu > 0 && r->model_mask == 0; }
static bool is_gpu_pinned(const ts_request *r) { return r->num_gpu > 0 && r->model_mask != 0; }

static int set_gpuspec(gen *g, double f, ts_err *err)
{
    uint32_t masks[GEN_NSPECS];
    int total = 0;
    for (int k = 0; k < GEN_NSPECS; k++) {
        if (ts_gpu_model_mask_parse(GEN_SPECS[k].spec, &masks[k], err) != 0)
            return TS_EINVAL;
        total += GEN_SPECS[k].weight;
    }
    int pinned = count(g, is_gpu_pinned), gpu = pinned + count(g, is_gpu_free);
    int want = (int)(f * gpu + 0.5);
    while (pinned < want) {
        int i = pick(g, is_gpu_free);
        int k = (int)ts_rng_below(&g->rng, (uint64_t)total), s = 0;
        while (k >= GEN_SPECS[s].weight)
            k -= GEN_SPECS[s++].weight;
        g->p[i].model_mask = masks[s];
        pinned++;
    }
    while (pinned > want) {
        g->p[pick(g, is_gpu_pinned)].model_mask = 0;
        pinned--;
    }
    return 0;
}

static int write_csv(const char *path, const gen *g, ts_err *err)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return ts_err_set(err, TS_EIO, "%s: %s", path, strerror(errno));
    fprintf(f, "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\n");
    for (int i = 0; i < g->n; i++) {
        const ts_request *r = &g->p[i];
        fprintf(f, "gen-pod-%06d,%lld,%lld,%d,%d,", i, (long long)r->cpu_milli,
                (long long)r->mem_mib, r->num_gpu, r->gpu_milli);
        const char *sep = "";
        for (int m = 0; m < ts_gpu_model_count(); m++)
            if ((r->model_mask >> m) & 1u) {
                fprintf(f, "%s%s", sep, ts_gpu_model_get(m)->name);
                sep = "|";
            }
        fprintf(f, "\n");
    }
    if (fclose(f) != 0)
        return ts_err_set(err, TS_EIO, "%s: %s", path, strerror(errno));
    return 0;
}

/* Every share's size redrawn uniformly from lo..hi. */
static void set_share_milli(gen *g, int lo, int hi)
{
    uint64_t steps = (uint64_t)(hi - lo) / GEN_SHARE_STEP_MILLI + 1;
    for (int i = 0; i < g->n; i++)
        if (is_share(&g->p[i]))
            g->p[i].gpu_milli = lo + (int32_t)ts_rng_below(&g->rng, steps) * GEN_SHARE_STEP_MILLI;
}

/* "LO-HI": share sizes in milli-GPU, 1 <= LO <= HI < 1000. */
static int share_range(const char *v, int *lo, int *hi)
{
    char *end, *end2 = NULL;
    errno = 0;
    long a = strtol(v, &end, 10), b = *end == '-' ? strtol(end + 1, &end2, 10) : -1;
    if (end == v || *end != '-' || *end2 || errno || a < 1 || b < a ||
        b >= TS_MILLI_PER_GPU) {
        fprintf(stderr, "tessera-sim: --share-milli: expected LO-HI with 1 <= LO <= HI <= "
                        "999 milli-GPU, got \"%s\"\n", v);
        return -1;
    }
    *lo = (int)a;
    *hi = (int)b;
    return 0;
}

/* "F" in [0, max] */
static int fraction(const char *opt, const char *v, double max, double *out)
{
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (end == v || *end || errno || !(x >= 0.0 && x <= max)) {
        fprintf(stderr, "tessera-sim: %s: must be a fraction in [0, %.2f], got \"%s\"\n", opt,
                max, v);
        return -1;
    }
    *out = x;
    return 0;
}

static void gen_usage(FILE *f)
{
    fprintf(f, "usage: tessera-sim gen-openb --pods BASE.csv --out OUT.csv [--seed N]\n"
               "         [--gpushare F] [--multigpu F] [--cpu F] [--gpuspec F]\n"
               "         [--halves F] [--share-milli LO-HI]\n"
               "  F: gpushare = shares / GPU pods, multigpu = multi-GPU pods' share of GPU\n"
               "  demand (< 0.95), cpu = CPU-only pods / pods (< 0.95), gpuspec = pinned / GPU\n"
               "  pods; --halves: one-GPU pods turned into 500-milli shares (CPU and memory\n"
               "  kept), applied after --gpushare; --share-milli: share sizes uniform in LO..HI milli-GPU (steps of 10);\n"
               "  an option left out keeps the base's value. At most %d pods.\n",
            GEN_PODS_MAX);
}

/* gen-openb's options; a fraction < 0 (and share_lo 0) is one not given. */
typedef struct openb_args {
    const char *pods, *out;
    double share, halves, multi, cpu, spec;
    int share_lo, share_hi;
    uint64_t seed;
} openb_args;

static int parse_seed(const char *v, uint64_t *seed)
{
    char *end;
    errno = 0;
    *seed = strtoull(v, &end, 10);
    if (end == v || *end || errno || v[0] == '-') {
        fprintf(stderr, "tessera-sim: --seed: expected a non-negative integer, got "
                        "\"%s\"\n", v);
        return -1;
    }
    return 0;
}

static int set_option(void *ctx, const char *o, const char *v)
{
    openb_args *a = ctx;
    if (strcmp(o, "--pods") == 0)
        a->pods = v;
    else if (strcmp(o, "--out") == 0)
        a->out = v;
    else if (strcmp(o, "--seed") == 0)
        return parse_seed(v, &a->seed);
    else if (strcmp(o, "--gpushare") == 0)
        return fraction(o, v, 1.0, &a->share);
    else if (strcmp(o, "--halves") == 0)
        return fraction(o, v, 1.0, &a->halves);
    else if (strcmp(o, "--multigpu") == 0)
        return fraction(o, v, 0.95, &a->multi);
    else if (strcmp(o, "--cpu") == 0)
        return fraction(o, v, 0.95, &a->cpu);
    else if (strcmp(o, "--gpuspec") == 0)
        return fraction(o, v, 1.0, &a->spec);
    else if (strcmp(o, "--share-milli") == 0)
        return share_range(v, &a->share_lo, &a->share_hi);
    else
        return SIM_OPT_UNKNOWN;
    return 0;
}

int gen_openb_main(int argc, char **argv)
{
    openb_args a = {.share = -1, .halves = -1, .multi = -1, .cpu = -1, .spec = -1, .seed = 1};
    int bad = sim_opt_pairs(argc, argv, "tessera-sim", gen_usage, set_option, &a);
    if (bad)
        return bad < 0 ? 0 : bad;
    if (!a.pods || !a.out)
        return sim_required("tessera-sim", a.pods ? "--out" : "--pods", gen_usage);
    ts_err err = {0};
    ts_workload *w = sim_load_pods(a.pods, &err);
    if (!w) {
        fprintf(stderr, "tessera-sim: %s\n", err.msg);
        return EXIT_BAD_INPUT;
    }
    gen g = {0};
    ts_rng_seed(&g.rng, a.seed);
    int rc = 0;
    for (int i = 0; i < w->npods && rc == 0; i++)
        rc = push(&g, &w->pods[i].req);
    if (rc)
        ts_err_set(&err, rc, "%s: more than %d pods", a.pods, GEN_PODS_MAX);
    if (rc == 0 && a.share >= 0)
        rc = set_gpushare(&g, w, a.share, &err);
    if (rc == 0 && a.halves >= 0)
        set_halves(&g, a.halves);
    if (rc == 0 && a.multi >= 0)
        rc = set_multigpu(&g, w, a.multi, &err);
    if (rc == 0 && a.cpu >= 0)
        rc = set_cpu(&g, w, a.cpu, &err);
    if (rc == 0 && a.spec >= 0)
        rc = set_gpuspec(&g, a.spec, &err);
    if (rc == 0 && a.share_lo > 0)
        set_share_milli(&g, a.share_lo, a.share_hi);
    if (rc == 0) {
        ts_rng_shuffle(&g.rng, g.p, g.n, sizeof *g.p);
        rc = write_csv(a.out, &g, &err);
    }
    if (rc)
        fprintf(stderr, "tessera-sim: %s\n", err.msg);
    free(g.p);
    ts_workload_free(w);
    return rc == 0 ? 0 : rc == TS_EINVAL ? EXIT_BAD_INPUT : 1;
}
