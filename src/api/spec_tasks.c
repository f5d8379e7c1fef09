/*
 * spec_tasks.c - a job spec's `tasks` (docs/job-spec.md): the list of task
 * groups, each a count of ranks with what one rank needs (whole GPUs, a
 * fraction or a MIG slice of one, GPU memory, a GPU model, CPU and memory).
 *
 * Kept apart from spec.c because it is the one section that knows the GPU
 * models and MIG geometries (src/model): a profile is checked against the
 * model asked for, or against every MIG-capable one when none is.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/spec_scalar.h"
#include "api/spec_walk.h"
#include "tessera/mig.h"
#include "tessera/model.h"

#define SPEC_CPU_MILLI_DEFAULT 1000
#define SPEC_MEM_MIB_DEFAULT 1024
#define SPEC_CPU_MILLI_MAX (4096LL * 1000) /* 4096 cores per task */
#define SPEC_MEM_MIB_MAX (64LL << 20)      /* 64 TiB per task */
#define SPEC_GPU_MEM_MIB_MAX (1LL << 20)   /* 1 TiB per GPU */

enum { T_COUNT, T_GPUS, T_FRACTION, T_GPU_MEM, T_MODEL, T_MIG, T_CPU, T_MEM, T_N };
static const char *const TASK_KEYS[T_N] = {"count",          "gpus",      "gpu_fraction",
                                           "gpu_memory_mib", "gpu_model", "mig_profile",
                                           "cpu_milli",      "memory_mib"};

/* MIG names are short ASCII; checking that first keeps mig.c's messages,
 * which quote the name, free of anything odd. */
static bool mig_chars_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n >= TS_SPEC_NAME_MAX)
        return false;
    for (const char *p = s; *p; p++) {
        char c = *p;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '+' || c == '-' || c == '_'))
            return false;
    }
    return true;
}

/* A MIG profile name, for the given model (-1: any MIG-capable model). */
static void check_mig(spec_parser *P, const yaml_node_t *n, const char *path, int model)
{
    const char *s = (const char *)n->data.scalar.value;
    if (mig_chars_ok(s) && model >= 0) {
        int geometry = ts_gpu_model_get(model)->mig_geometry;
        ts_err e = {0};
        if (geometry == TS_MIG_NONE)
            spec_fail(P, path, "GPU model %s has no MIG", ts_gpu_model_get(model)->name);
        else if (ts_mig_profile_parse(geometry, s, &e) < 0)
            spec_fail(P, path, "%s", e.msg);
        return;
    }
    for (int g = 0; mig_chars_ok(s) && g < TS_MIG_NGEOMETRY; g++)
        if (ts_mig_profile_parse(g, s, NULL) >= 0)
            return;
    char got[SPEC_SHOW_BUF];
    spec_show_name(n, got, sizeof got);
    spec_fail(P, path,
              "unknown MIG profile %s (e.g. 1g.10gb, 3g.40gb or a short form: 1g, 1g+me, "
              "1gx2, 2g, 3g, 4g, 7g)",
              got);
}

static void unknown_model(spec_parser *P, const yaml_node_t *n, const char *path)
{
    char known[256] = "", got[SPEC_SHOW_BUF];
    for (int i = 0; i < ts_gpu_model_count(); i++) {
        size_t used = strlen(known);
        snprintf(known + used, sizeof known - used, "%s%s", i ? ", " : "",
                 ts_gpu_model_get(i)->name);
    }
    spec_show_name(n, got, sizeof got);
    spec_fail(P, path, "unknown GPU model %s (known: %s)", got, known);
}

/* One group; false when its count is unknown (so the total is not checked). */
static bool walk_group(spec_parser *P, const yaml_node_t *map, const char *path, ts_task_spec *t)
{
    t->count = 1;
    t->gpu_milli = TS_MILLI_PER_GPU;
    t->cpu_milli = SPEC_CPU_MILLI_DEFAULT;
    t->mem_mib = SPEC_MEM_MIB_DEFAULT;
    yaml_node_t *v[T_N];
    unsigned given;
    char sub[T_N][SPEC_PATH_MAX];
    if (!spec_map_fields(P, map, path, TASK_KEYS, T_N, v, &given))
        return false;
    for (int k = 0; k < T_N; k++)
        ts_yaml_pathf(sub[k], sizeof sub[k], "%s.%s", path, TASK_KEYS[k]);
    unsigned ok = 0; /* bit k: key k given and valid */
    int64_t x;
    bool share_or_mig = v[T_FRACTION] || v[T_MIG];
    unsigned el = spec_elastic_group(P, path, &v[T_COUNT], &v[T_GPUS], share_or_mig, t);
    ok |= (el & SPEC_ELASTIC_COUNT ? BIT(T_COUNT) : 0) | (el & SPEC_ELASTIC_GPUS ? BIT(T_GPUS) : 0);
    if (v[T_COUNT] && spec_int(P, v[T_COUNT], sub[T_COUNT], 1, TS_SPEC_MAX_TASKS, &x)) {
        t->count = (int)x;
        ok |= BIT(T_COUNT);
    }
    if (v[T_GPUS] && spec_int(P, v[T_GPUS], sub[T_GPUS], 0, TS_NODE_MAX_GPUS, &x)) {
        t->gpus = (int)x;
        ok |= BIT(T_GPUS);
    }
    int32_t milli = 0;
    if (v[T_FRACTION]) {
        const char *s = spec_scalar_text(v[T_FRACTION]);
        double f = 0;
        bool plain = s && v[T_FRACTION]->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
        if (plain && api_spec_number(s, &f) && f > 0 && f < 1)
            milli = (int32_t)(f * TS_MILLI_PER_GPU + 0.5);
        if (milli >= 1 && milli < TS_MILLI_PER_GPU)
            ok |= BIT(T_FRACTION);
        else
            spec_fail_got(P, v[T_FRACTION], sub[T_FRACTION],
                          "a number between 0 and 1 that rounds to 0.001..0.999");
    }
    if (v[T_GPU_MEM] && spec_int(P, v[T_GPU_MEM], sub[T_GPU_MEM], 0, SPEC_GPU_MEM_MIB_MAX, &x)) {
        t->gpu_mem_mib = x;
        ok |= BIT(T_GPU_MEM);
    }
    int model = -1;
    if (v[T_MODEL]) {
        const char *s = spec_text(P, v[T_MODEL], sub[T_MODEL]);
        model = s ? ts_gpu_model_lookup(s) : -1;
        if (s && model < 0)
            unknown_model(P, v[T_MODEL], sub[T_MODEL]);
        if (model >= 0) {
            snprintf(t->gpu_model, sizeof t->gpu_model, "%s", s);
            ok |= BIT(T_MODEL);
        }
    }
    if (v[T_MIG]) {
        const char *s = spec_text(P, v[T_MIG], sub[T_MIG]);
        if (s && !(given & BIT(T_MODEL) && !(ok & BIT(T_MODEL)))) {
            int errors = P->errs->n + P->errs->more;
            check_mig(P, v[T_MIG], sub[T_MIG], model);
            if (P->errs->n + P->errs->more == errors) {
                snprintf(t->mig_profile, sizeof t->mig_profile, "%s", s);
                ok |= BIT(T_MIG);
            }
        }
    }
    if (v[T_CPU] && spec_int(P, v[T_CPU], sub[T_CPU], 0, SPEC_CPU_MILLI_MAX, &x))
        t->cpu_milli = x;
    if (v[T_MEM] && spec_int(P, v[T_MEM], sub[T_MEM], 0, SPEC_MEM_MIB_MAX, &x))
        t->mem_mib = x;

    /* How the GPU keys combine: a share is one GPU; a MIG instance is no
     * whole GPU; memory per GPU needs a GPU. Checked only between keys that
     * were valid on their own, so one mistake gives one error. */
    bool gpus_set = ok & BIT(T_GPUS), gpus_bad = (given & BIT(T_GPUS)) && !gpus_set;
    if (ok & BIT(T_FRACTION) && !(given & BIT(T_MIG))) {
        if (gpus_set && t->gpus != 1)
            spec_fail(P, sub[T_FRACTION], "needs gpus: 1 (or gpus left out), got gpus: %d",
                      t->gpus);
        else if (!gpus_bad) {
            t->gpus = 1;
            t->gpu_milli = milli;
        }
    }
    if (ok & BIT(T_MIG)) {
        if (gpus_set && t->gpus != 0)
            spec_fail(P, sub[T_MIG], "needs gpus: 0 (or gpus left out), got gpus: %d", t->gpus);
        if (given & BIT(T_FRACTION))
            spec_fail(P, sub[T_MIG], "cannot be combined with gpu_fraction");
        if (ok & BIT(T_GPU_MEM) && t->gpu_mem_mib > 0)
            spec_fail(P, sub[T_GPU_MEM],
                      "cannot be combined with mig_profile (the profile sets the "
                      "memory)");
    }
    bool whole_or_share = !(given & (BIT(T_MIG) | BIT(T_FRACTION)));
    if (ok & BIT(T_GPU_MEM) && t->gpu_mem_mib > 0 && whole_or_share) {
        if (!(given & BIT(T_GPUS)))
            t->gpus = 1;
        else if (gpus_set && t->gpus == 0)
            spec_fail(P, sub[T_GPU_MEM], "needs a GPU, got gpus: 0");
    }
    if (ok & BIT(T_MODEL) && whole_or_share && !gpus_bad && t->gpus == 0)
        spec_fail(P, sub[T_MODEL], "needs gpus, gpu_fraction or mig_profile");
    return !(given & BIT(T_COUNT)) || (ok & BIT(T_COUNT));
}

void spec_walk_tasks(spec_parser *P, const yaml_node_t *n)
{
    if (n->type != YAML_SEQUENCE_NODE) {
        spec_fail_got(P, n, "tasks", "a list of task groups");
        return;
    }
    ptrdiff_t ngroups = n->data.sequence.items.top - n->data.sequence.items.start;
    if (ngroups == 0) {
        spec_fail(P, "tasks", "must list at least one task group");
        return;
    }
    if (ngroups > TS_SPEC_MAX_TASKS) {
        spec_fail(P, "tasks", "%td task groups, at most %d", ngroups, TS_SPEC_MAX_TASKS);
        return;
    }
    ts_task_spec *t = calloc((size_t)ngroups, sizeof *t);
    if (!t) {
        spec_fail_oom(P);
        return;
    }
    P->spec->tasks = t;
    P->spec->ntasks = (int)ngroups;
    int64_t ranks = 0;
    bool counted = true;
    char path[SPEC_PATH_MAX];
    for (ptrdiff_t i = 0; i < ngroups; i++) {
        ts_yaml_pathf(path, sizeof path, "tasks[%td]", i);
        bool reused;
        yaml_node_t *g = spec_child(P, n->data.sequence.items.start[i], path, &reused);
        if (!g || !walk_group(P, g, path, &t[i]))
            counted = false;
        ranks += t[i].count;
    }
    if (counted && ranks > TS_SPEC_MAX_TASKS)
        spec_fail(P, "tasks", "%lld ranks in all (the counts' sum), at most %d", (long long)ranks,
                  TS_SPEC_MAX_TASKS);
}
