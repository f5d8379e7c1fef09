/*
 * spec_elastic.c - an elastic job's range in its spec (docs/job-spec.md,
 * "Elastic jobs"): a gang grows by whole tasks, one task by GPUs:
 *
 *   tasks: [{count: {min: 2, max: 4}, gpus: 1}]     a gang of 2 to 4 ranks
 *   tasks: [{gpus: {min: 1, max: 8}}]               one task of 1 to 8 GPUs
 *
 * The minimum is what the job asks for and is placed all or nothing as any
 * job's; what the scheduler gives above it is opportunistic
 * (docs/scheduler.md, "Elastic jobs"). One range per job, on one group; a
 * range of GPUs is for a single whole-GPU task (count 1, no share, no MIG),
 * so that every size is a shape the placement knows.
 */
#include <stdio.h>
#include <string.h>

#include "api/spec_walk.h"
#include "tessera/model.h"

enum { R_MIN, R_MAX, R_N };
static const char *const RANGE_KEYS[R_N] = {"min", "max"};

/* {min, max} with lo <= min <= max <= hi; false (error recorded) otherwise. */
static bool read_range(spec_parser *P, const yaml_node_t *map, const char *path, int64_t lo,
                       int64_t hi, int *min, int *max)
{
    yaml_node_t *v[R_N];
    unsigned given;
    char sub[R_N][SPEC_PATH_MAX];
    if (!spec_map_fields(P, map, path, RANGE_KEYS, R_N, v, &given))
        return false;
    bool ok = true;
    int64_t x[R_N] = {0, 0};
    for (int k = 0; k < R_N; k++) {
        ts_yaml_pathf(sub[k], sizeof sub[k], "%s.%s", path, RANGE_KEYS[k]);
        if (!v[k]) {
            if (!(given & BIT(k)))
                spec_fail(P, sub[k], "required in a range {min, max}");
            ok = false;
        } else if (!spec_int(P, v[k], sub[k], lo, hi, &x[k])) {
            ok = false;
        }
    }
    if (ok && x[R_MAX] < x[R_MIN]) {
        spec_fail(P, sub[R_MAX], "%lld is below min %lld", (long long)x[R_MAX],
                  (long long)x[R_MIN]);
        ok = false;
    }
    if (ok) {
        *min = (int)x[R_MIN];
        *max = (int)x[R_MAX];
    }
    return ok;
}

/* Is one of the groups before t elastic already? */
static bool earlier_range(const spec_parser *P, const ts_task_spec *t)
{
    for (const ts_task_spec *g = P->spec->tasks; g && g < t; g++)
        if (g->count_max > 0 || g->gpus_max > 0)
            return true;
    return false;
}

unsigned spec_elastic_group(spec_parser *P, const char *path, yaml_node_t **count,
                            yaml_node_t **gpus, bool share_or_mig, ts_task_spec *t)
{
    bool crange = *count && (*count)->type == YAML_MAPPING_NODE;
    bool grange = *gpus && (*gpus)->type == YAML_MAPPING_NODE;
    if (!crange && !grange)
        return 0;
    char cpath[SPEC_PATH_MAX], gpath[SPEC_PATH_MAX];
    ts_yaml_pathf(cpath, sizeof cpath, "%s.count", path);
    ts_yaml_pathf(gpath, sizeof gpath, "%s.gpus", path);
    unsigned taken = 0;
    if (crange && grange) {
        spec_fail(P, gpath, "a range with count a range too: a job grows by tasks or by "
                            "GPUs, not both");
        *count = *gpus = NULL;
        return 0;
    }
    if (earlier_range(P, t)) {
        spec_fail(P, crange ? cpath : gpath, "a second range: one group of a job may be elastic");
        *count = *gpus = NULL;
        return 0;
    }
    if (crange) {
        if (read_range(P, *count, cpath, 1, TS_SPEC_MAX_TASKS, &t->count, &t->count_max))
            taken |= SPEC_ELASTIC_COUNT;
        *count = NULL;
        return taken;
    }
    const char *c = *count ? spec_scalar_text(*count) : NULL;
    if (*count && (!c || strcmp(c, "1") != 0)) {
        spec_fail(P, gpath, "a range of GPUs is for one task: needs count: 1 (a gang grows "
                            "by count: {min, max})");
    } else if (share_or_mig) {
        spec_fail(P, gpath, "a range of whole GPUs cannot be combined with gpu_fraction or "
                            "mig_profile");
    } else if (read_range(P, *gpus, gpath, 1, TS_NODE_MAX_GPUS, &t->gpus, &t->gpus_max)) {
        taken |= SPEC_ELASTIC_GPUS;
    }
    *gpus = NULL;
    return taken;
}

bool ts_spec_elastic(const ts_job_spec *spec, int *min_gpus, int *max_gpus, int *step_gpus)
{
    int64_t min = ts_spec_gpus(spec), extra = 0, step = 0;
    for (int i = 0; i < spec->ntasks; i++) {
        const ts_task_spec *t = &spec->tasks[i];
        int per = t->mig_profile[0] ? 1 : t->gpus;
        if (t->count_max > t->count && per > 0) {
            extra = (int64_t)(t->count_max - t->count) * per;
            step = per;
        } else if (t->gpus_max > t->gpus) {
            extra = t->gpus_max - t->gpus;
            step = 1;
        }
    }
    if (extra == 0 || min < 1 || min + extra > INT32_MAX)
        return false;
    *min_gpus = (int)min;
    *max_gpus = (int)(min + extra);
    *step_gpus = (int)step;
    return true;
}
