/*
 * spec_equal.h - field-by-field equality of two job specs, for the unit test
 * and the fuzz target (both check that parsing the canonical JSON gives the
 * spec back). Names the first field that differs, for the failure message.
 */
#ifndef TS_TEST_SPEC_EQUAL_H
#define TS_TEST_SPEC_EQUAL_H

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "tessera/spec.h"

static inline bool ts_test_str_eq(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

/* True when a and b are equal; else false with the differing field in why. */
static inline bool ts_test_spec_equal(const ts_job_spec *a, const ts_job_spec *b, char *why,
                                      size_t size)
{
#define SPEC_DIFF(cond, field)                                                                     \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            snprintf(why, size, "%s differs", field);                                              \
            return false;                                                                          \
        }                                                                                          \
    } while (0)
    SPEC_DIFF(strcmp(a->tenant, b->tenant) == 0, "tenant");
    SPEC_DIFF(strcmp(a->name, b->name) == 0, "name");
    SPEC_DIFF(a->tier == b->tier, "tier");
    SPEC_DIFF(strcmp(a->priority_class, b->priority_class) == 0, "priority_class");
    SPEC_DIFF(a->ntasks == b->ntasks, "ntasks");
    for (int i = 0; i < a->ntasks; i++) {
        const ts_task_spec *x = &a->tasks[i], *y = &b->tasks[i];
        SPEC_DIFF(x->count == y->count, "tasks[].count");
        SPEC_DIFF(x->gpus == y->gpus, "tasks[].gpus");
        SPEC_DIFF(x->count_max == y->count_max, "tasks[].count.max");
        SPEC_DIFF(x->gpus_max == y->gpus_max, "tasks[].gpus.max");
        SPEC_DIFF(x->gpu_milli == y->gpu_milli, "tasks[].gpu_milli");
        SPEC_DIFF(x->gpu_mem_mib == y->gpu_mem_mib, "tasks[].gpu_mem_mib");
        SPEC_DIFF(strcmp(x->gpu_model, y->gpu_model) == 0, "tasks[].gpu_model");
        SPEC_DIFF(strcmp(x->mig_profile, y->mig_profile) == 0, "tasks[].mig_profile");
        SPEC_DIFF(x->cpu_milli == y->cpu_milli, "tasks[].cpu_milli");
        SPEC_DIFF(x->mem_mib == y->mem_mib, "tasks[].mem_mib");
    }
    SPEC_DIFF(strcmp(a->required_level, b->required_level) == 0, "required_level");
    SPEC_DIFF(strcmp(a->preferred_level, b->preferred_level) == 0, "preferred_level");
    SPEC_DIFF(a->rail_aligned == b->rail_aligned, "rail_aligned");
    SPEC_DIFF(a->time_limit_s == b->time_limit_s, "time_limit_s");
    SPEC_DIFF(a->duration_s == b->duration_s, "duration_s");
    SPEC_DIFF(a->ckpt_signal == b->ckpt_signal, "ckpt_signal");
    SPEC_DIFF(a->ckpt_grace_s == b->ckpt_grace_s, "ckpt_grace_s");
    SPEC_DIFF(a->idle_timeout_s == b->idle_timeout_s, "idle_timeout_s");
    SPEC_DIFF(a->argc == b->argc, "argc");
    for (int i = 0; i < a->argc; i++)
        SPEC_DIFF(strcmp(a->argv[i], b->argv[i]) == 0, "argv[]");
    SPEC_DIFF(a->nenv == b->nenv, "nenv");
    for (int i = 0; i < a->nenv; i++)
        SPEC_DIFF(strcmp(a->env[i], b->env[i]) == 0, "env[]");
    SPEC_DIFF(ts_test_str_eq(a->workdir, b->workdir), "workdir");
    SPEC_DIFF(ts_test_str_eq(a->image, b->image), "image");
    SPEC_DIFF(strcmp(a->image_secret, b->image_secret) == 0, "image_pull_secret");
    SPEC_DIFF(a->nmounts == b->nmounts, "mounts");
    for (int i = 0; i < a->nmounts; i++)
        SPEC_DIFF(strcmp(a->mounts[i].host, b->mounts[i].host) == 0 &&
                      strcmp(a->mounts[i].path, b->mounts[i].path) == 0 &&
                      a->mounts[i].write == b->mounts[i].write,
                  "mounts[i]");
    SPEC_DIFF(a->array_size == b->array_size, "array_size");
    SPEC_DIFF(a->array_throttle == b->array_throttle, "array_throttle");
    SPEC_DIFF(ts_test_str_eq(a->dependency, b->dependency), "dependency");
    SPEC_DIFF(a->host_network == b->host_network, "host_network");
    SPEC_DIFF(a->dedicated_nics == b->dedicated_nics, "dedicated_nics");
    SPEC_DIFF(a->npublish == b->npublish, "npublish");
    for (int i = 0; i < a->npublish && i < b->npublish; i++)
        SPEC_DIFF(a->publish[i].port == b->publish[i].port &&
                      a->publish[i].udp == b->publish[i].udp,
                  "publish");
    SPEC_DIFF(a->nsecrets == b->nsecrets, "nsecrets");
    for (int i = 0; i < a->nsecrets; i++)
        SPEC_DIFF(strcmp(a->secrets[i].name, b->secrets[i].name) == 0 &&
                      strcmp(a->secrets[i].target, b->secrets[i].target) == 0 &&
                      a->secrets[i].file == b->secrets[i].file,
                  "secrets[]");
    SPEC_DIFF(ts_test_str_eq(a->notify_url, b->notify_url), "notify.url");
    SPEC_DIFF(a->notify_on == b->notify_on, "notify.on");
    SPEC_DIFF(ts_test_str_eq(a->notify_mail, b->notify_mail), "notify.mail");
    SPEC_DIFF(a->hold == b->hold, "hold");
    SPEC_DIFF(a->nice == b->nice, "nice");
#undef SPEC_DIFF
    if (size)
        why[0] = '\0';
    return true;
}

#endif
