/*
 * launch_container.h - what agent_task_start does differently for a task that
 * runs in an image: the bundle is made (image_bundle.c) and the keeper runs
 * the OCI runtime in the foreground instead of the command, as root; the
 * container gets the task's user, environment, limits and files (its own
 * folder, never the agent's log and record folder). The
 * runtime forwards the keeper's and the agent's signals to the container's
 * first process and exits with its status (128 + n for a signal n, which the
 * keeper reports as that signal), so the keeper, the record, the stop
 * sequence and adoption work unchanged. The runtime runs with --keep: the
 * container and its cgroup (cgroupsPath, outside the task's cgroup) outlive
 * its exit, so the keeper reads the container cgroup's OOM kills, then runs
 * the runtime's delete, so nothing of the container outlives the exit file.
 * Private to launch*.c.
 */
#ifndef TS_AGENT_LAUNCH_CONTAINER_H
#define TS_AGENT_LAUNCH_CONTAINER_H

#include <limits.h>

#include "launch.h"
#include "launch_cgroup.h"
#include "launch_keeper.h"

#define TS_CONTAINER_CGROUP_PREFIX "/tessera-tasks/"
#define TS_CONTAINER_SCOPE_CHARS 17 /* "-" and 16 hex digits after the task id */

typedef struct ts_container_plan {
    char exe[PATH_MAX];              /* the runtime */
    char *argv[8], *cleanup_argv[8]; /* point into the strings below */
    char bundle[PATH_MAX], id[TS_TASK_ID_MAX + 1 + TS_CONTAINER_SCOPE_CHARS];
    char *envp[2];                   /* the runtime's own environment */
    struct ts_run_as root;           /* the keeper starts the runtime as itself */
    ts_cg_dirs cg;                   /* the container's own cgroup (the runtime makes
                                      * it), read for OOM kills before the delete */
} ts_container_plan;

/* Makes the bundle and fills cp. ra: who the task runs as; env: its
 * environment; task_dir: its own folder (its checkpoint ack), the one
 * agent folder bound in. TS_EINVAL names the
 * field, TS_ENOENT: no runtime, TS_EIO: the bundle. */
int agent_container_prepare(const ts_task_spec *s, const struct ts_run_as *ra,
                         const char *const *env, const char *task_dir, ts_container_plan *cp,
                         ts_err *err);

#endif
