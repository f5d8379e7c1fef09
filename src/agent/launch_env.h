/*
 * launch_env.h - building a task's environment (internal to the launcher).
 * A ts_envv owns its "NAME=value" strings; v is NULL-terminated once non-empty,
 * ready for execve. Zero-initialise, free with agent_envv_free.
 */
#ifndef TS_AGENT_LAUNCH_ENV_H
#define TS_AGENT_LAUNCH_ENV_H

#include <sys/types.h>

#include "launch.h"

typedef struct ts_envv {
    char **v;
    size_t n, cap;
} ts_envv;

struct ts_env_user {
    const char *name, *home;
};

/* The job's env, defaults, then the computed variables. 0, or -1 when out of memory. */
int agent_envv_build(ts_envv *e, const ts_task_spec *s, const struct ts_env_user *u,
                  const char *ack_path);
int agent_envv_set(ts_envv *e, const char *name, const char *value, int replace);
const char *agent_envv_get(const ts_envv *e, const char *name); /* NULL when unset */
void agent_envv_free(ts_envv *e);

#endif
