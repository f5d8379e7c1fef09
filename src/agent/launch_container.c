/*
 * launch_container.c - a container task's start: bundle, runtime command
 * line, cleanup command line (launch_container.h says how it fits the
 * keeper).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "launch_container.h"

#define MOUNTS_MAX 64
#define RUNTIME_STATE_ROOT "/run/runc" /* runc's default --root, as root */
#define RUNTIME_DIRS "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#define RUNTIME_PATH "PATH=" RUNTIME_DIRS
#define CGROUP2_MOUNT "/sys/fs/cgroup" /* where runc and crun find the unified hierarchy */

static int find_runtime(const char *name, char *out, size_t n)
{
    if (strchr(name, '/')) {
        snprintf(out, n, "%s", name);
        return access(out, X_OK);
    }
    const char *path = RUNTIME_DIRS;
    for (const char *p = path; *p;) {
        const char *e = strchr(p, ':');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        snprintf(out, n, "%.*s/%s", (int)len, p, name);
        if (access(out, X_OK) == 0)
            return 0;
        p += len + (e ? 1 : 0);
    }
    return -1;
}

/* runtime delete --force <id>: a container of the same id left by a crash
 * (its state directory under the runtime's root is there). */
static void delete_stale(ts_container_plan *cp)
{
    char state[PATH_MAX];
    struct stat sb;
    snprintf(state, sizeof state, "%s/%s", RUNTIME_STATE_ROOT, cp->id);
    if (lstat(state, &sb) != 0)
        return;
    pid_t pid = fork();
    if (pid == 0) {
        execve(cp->exe, cp->cleanup_argv, cp->envp);
        _exit(127);
    }
    int st;
    if (pid > 0)
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
            ;
}

/* Where the runtime makes the container's cgroup for cgroupsPath `path`: in
 * the v1 hierarchies where the memory controller is bound to one (as runc
 * and crun do), else below the cgroup2 mount. n == 0 when neither is known. */
static void container_cgroup(const char *path, ts_cg_dirs *d)
{
    if (agent_cg_dirs_of(path, true, d) == 0 && d->at[TS_CG_MEMORY] >= 0)
        return;
    char full[TS_CG_PATH_MAX];
    if (snprintf(full, sizeof full, "%s%s", CGROUP2_MOUNT, path) >= (int)sizeof full ||
        agent_cg_dirs_of(full, false, d) != 0)
        memset(d, 0, sizeof *d);
}

/* The runtime's name for a task's container (and its cgroup's): the task id,
 * then the FNV-1a hash of the bundle's folder. A runtime's names are
 * host-wide, and two agents on one host (two clusters' tests, or nodes that
 * share a host) each have a task j1-r0: one's delete must never end the
 * other's container. The bundle's folder is the agent's own and the same
 * after its restart. */
static void scoped_id(const char *id, const char *bundle, char *out, size_t n)
{
    unsigned long long h = FNV64_OFFSET;
    for (const unsigned char *p = (const unsigned char *)bundle; *p; p++)
        h = (h ^ *p) * FNV64_PRIME;
    snprintf(out, n, "%s-%016llx", id, h);
}

int agent_container_prepare(const ts_task_spec *s, const struct ts_run_as *ra,
                         const char *const *env, const char *task_dir, ts_container_plan *cp,
                         ts_err *err)
{
    memset(cp, 0, sizeof *cp);
    const char *id = s->task_id;
    if (!s->bundle_dir || !*s->bundle_dir)
        return ts_err_set(err, TS_EINVAL, "task %s: bundle_dir: required with an image", id);
    if (s->nmounts > MOUNTS_MAX - 1)
        return ts_err_set(err, TS_EINVAL, "task %s: mounts: at most %d", id, MOUNTS_MAX - 1);
    const char *rt = s->runtime && *s->runtime ? s->runtime : "runc";
    if (find_runtime(rt, cp->exe, sizeof cp->exe) != 0)
        return ts_err_set(err, TS_ENOENT, "task %s: the container runtime %s is not installed",
                          id, rt);
    snprintf(cp->bundle, sizeof cp->bundle, "%s", s->bundle_dir);
    scoped_id(id, cp->bundle, cp->id, sizeof cp->id);
    static char run[] = "run", keep[] = "--keep", bundle_opt[] = "--bundle", del[] = "delete",
                force[] = "--force";
    char *a0 = strrchr(cp->exe, '/') + 1;
    char *argv[] = {a0, run, keep, bundle_opt, cp->bundle, cp->id, NULL};
    char *cargv[] = {a0, del, force, cp->id, NULL};
    memcpy(cp->argv, argv, sizeof argv);
    memcpy(cp->cleanup_argv, cargv, sizeof cargv);
    static char path_env[] = RUNTIME_PATH;
    cp->envp[0] = path_env;
    cp->root.uid = getuid();
    cp->root.gid = getgid();
    cp->root.change = false;
    delete_stale(cp);
    struct stat sb;
    if (lstat(cp->bundle, &sb) == 0) /* an earlier run's, left by a crash */
        agent_bundle_remove(cp->bundle);

    ts_bundle_mount m[MOUNTS_MAX];
    size_t nm = 0;
    /* its own folder only: the log folder holds every task's output and
     * records, and a container's root could read, forge or plant links
     * there; its stdout and stderr come as descriptors */
    m[nm++] = (ts_bundle_mount){task_dir, task_dir, true};
    for (size_t i = 0; i < s->nmounts; i++)
        m[nm++] = s->mounts[i];
    char user[64];
    snprintf(user, sizeof user, "%u:%u", (unsigned)ra->uid, (unsigned)ra->gid);
    char cg[128];
    snprintf(cg, sizeof cg, TS_CONTAINER_CGROUP_PREFIX "%s", cp->id);
    container_cgroup(cg, &cp->cg);
    ts_bundle_spec b = {
        .dir = cp->bundle, .container_id = id, .image = s->image,
        .argv = s->argv && s->argv[0] ? s->argv : NULL, .env = env,
        .workdir = s->workdir && *s->workdir ? s->workdir : NULL,
        .user = s->container_user ? s->container_user : s->user || ra->change ? user : NULL,
        .mounts = m, .nmounts = nm,
        .memory_bytes = s->memory_bytes, .cpu_milli = s->cpu_milli, .pids_max = s->pids_max,
        .cgroups_path = cg, .cdi_edits = s->cdi_edits, .path_first = NULL,
        .write_limit_mib = s->container_write_mib,
        /* runc in the foreground with a terminal: the process gets a PTY of
         * the container's own devpts, runc relays it to its stdio (the
         * session's PTY, which it sets raw) and passes window changes on */
        .terminal = s->stdio_given && s->stdio_tty};
    for (size_t i = 0; env && env[i] && s->slurm_bin_dir; i++)
        if (strncmp(env[i], "SLURM_JOB_NAME=", 15) == 0) /* its srun (docs/slurm.md) */
            b.path_first = s->slurm_bin_dir;
    int rc = agent_bundle_make(&b, err);
    if (rc)
        ts_err_prefix(err, "task %s: ", id);
    return rc;
}
