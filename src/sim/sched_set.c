/*
 * sched_set.c - `tessera-sim replay --sched NAME=VALUE`: one field of the
 * tessera policy's scheduler configuration (ts_sched_config, tesserad's
 * default otherwise), by its name in include/tessera/cycle.h, so that a
 * replay measures a setting tesserad can be given (docs/tesserad.md names
 * its key) without a build of its own. The table holds the fields the
 * guarantee's experiments vary (docs/simulator.md); a name outside it is an
 * error that lists them.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/replay_cli.h"
#include "tessera/cycle.h"

enum set_kind { SET_NUMBER, SET_INT, SET_BOOL }; /* seconds and GPU-seconds are numbers */

typedef struct set_field {
    const char *name;
    enum set_kind kind;
    size_t off;
    double lo, hi; /* the range of a number, seconds or integer */
} set_field;

#define F(name, kind, lo, hi) {#name, kind, offsetof(ts_sched_config, name), lo, hi}
static const set_field FIELDS[] = {
    F(min_runtime_s, SET_NUMBER, 0, 1e7),
    F(max_preemptions_hour, SET_INT, 0, 1000),
    F(reclaim_min_runtime_s, SET_NUMBER, -1, 1e7),
    F(max_preemptors_cycle, SET_INT, 0, 1000),
    F(starve_after_s, SET_NUMBER, 0, 1e9),
    F(fair_reclaim, SET_BOOL, 0, 1),
    F(fair_moves, SET_BOOL, 0, 1),
    F(las_level_gpu_s, SET_NUMBER, 1, 1e10),
    F(las_split_gpu_s, SET_NUMBER, 0, 1e10),
    F(las_split_backlog, SET_NUMBER, 0, 1e6),
    F(las_split_horizon_s, SET_NUMBER, 0, 1e9),
    F(las_split_mid_gpu_s, SET_NUMBER, 0, 1e9),
    F(las_split_min_gpu_s, SET_NUMBER, 0, 1e10),
    F(las_split_min_runtime_s, SET_NUMBER, -1, 1e7),
    F(las_split_max_preemptions_hour, SET_INT, -1, 1000),
    F(las_split_cross_tier, SET_BOOL, 0, 1),
};
#undef F

static void list_fields(void)
{
    fprintf(stderr, "  fields:");
    for (size_t k = 0; k < sizeof FIELDS / sizeof FIELDS[0]; k++)
        fprintf(stderr, " %s", FIELDS[k].name);
    fprintf(stderr, "\n");
}

int sim_sched_set(ts_sched_config *cfg, const char *arg)
{
    const char *eq = strchr(arg, '=');
    size_t n = eq ? (size_t)(eq - arg) : 0;
    const set_field *f = NULL;
    for (size_t k = 0; eq && k < sizeof FIELDS / sizeof FIELDS[0] && !f; k++)
        if (strlen(FIELDS[k].name) == n && strncmp(FIELDS[k].name, arg, n) == 0)
            f = &FIELDS[k];
    if (!f) {
        fprintf(stderr, "tessera-sim replay: --sched: %s \"%s\" (NAME=VALUE, a field of "
                        "ts_sched_config)\n", eq ? "unknown field in" : "expected NAME=VALUE, got",
                arg);
        list_fields();
        return -1;
    }
    const char *v = eq + 1;
    char *at = (char *)cfg + f->off;
    if (f->kind == SET_BOOL) {
        if (strcmp(v, "true") != 0 && strcmp(v, "false") != 0) {
            fprintf(stderr, "tessera-sim replay: --sched: %s: must be true or false, got \"%s\"\n",
                    f->name, v);
            return -1;
        }
        *(bool *)at = strcmp(v, "true") == 0;
        return 0;
    }
    char what[64];
    snprintf(what, sizeof what, "--sched: %s", f->name);
    bool integer = f->kind == SET_INT;
    double x;
    if (replay_parse_num(what, v, f->lo, f->hi, integer, &x) != 0)
        return -1;
    if (integer)
        *(int *)at = (int)x;
    else
        *(double *)at = x;
    return 0;
}
