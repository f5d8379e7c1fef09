/*
 * launch.c - starting a task through its keeper, the stop state machine, and
 * adopting the tasks an earlier agent left running.
 *
 * Everything that can fail in an explainable way (spec, user, workdir, command
 * lookup, log files, cgroup, the record's text) is done in the agent before
 * fork; the keeper (launch_keeper.c) and the task before its exec run only
 * async-signal-safe calls. The keeper answers once: started (task pid and
 * start time, keeper start time; the record is already written) or the step
 * that failed with its errno. EOF without an answer means the keeper died.
 *
 * The task leads its own session and process group, so signals go to -pid and
 * reach whatever the task started. When the task ends, its keeper kills the
 * rest of the group (and cgroup) and writes the exit file. The agent learns
 * the end from that file, whether it forked the keeper (then it also reaps
 * it) or adopted the task from its record (launch_record.c). A task whose
 * keeper is gone without an exit file is watched through /proc until it ends,
 * and is then reported lost: its status is unknowable.
 *
 * A pid is only signalled while /proc does not show another process under it
 * (same start time, or no process: what is left is the task's own group).
 *
 * _GNU_SOURCE: getgrouplist and pipe2 are not POSIX.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "launch.h"
#include "launch_cgroup.h"
#include "launch_env.h"
#include "launch_container.h"
#include "launch_files.h"
#include "launch_keeper.h"
#include "launch_record.h"
#include "agent/clock.h"

_Static_assert(TS_TASK_LOST_SIGNAL == SIGKILL, "launch.h documents a lost task as SIGKILL");

#define POLL_INTERVAL_NS 10000000L /* blocking helpers poll every 10 ms */
#define CGROUP_RMDIR_TRIES 100    /* x 10 ms while killed processes exit */

struct ts_task {
    ts_rec r;                /* what the record holds; r.phase is the task's phase */
    ts_rec_paths paths;
    ts_stop_outcome outcome;
    int exit_code, term_signal;
    long long oom_kills;
    int cut_off;             /* who stopped it (TS_CUT_*, the exit file says so) */
    double ended_at;         /* its exit file's time, Unix s; 0 unknown */
    bool lost, cgroup_left;
    bool keeper_child;       /* this agent forked the keeper and has not reaped it */
    bool keeper_gone;
    ts_cg_dirs cg;           /* the task's cgroup directories (n == 0: none) */
};

static const char *const STEP_NAME[TS_STEP_COUNT] = {
    [TS_STEP_STARTED] = "start", [TS_STEP_KEEPER] = "keeper set-up",
    [TS_STEP_FORK] = "fork", [TS_STEP_PROC] = "reading its start time",
    [TS_STEP_RECORD] = "record", [TS_STEP_SETSID] = "setsid",
    [TS_STEP_CGROUP] = "joining the cgroup", [TS_STEP_STDIO] = "redirecting stdio",
    [TS_STEP_GROUPS] = "setgroups", [TS_STEP_GID] = "setgid", [TS_STEP_UID] = "setuid",
    [TS_STEP_CHDIR] = "workdir", [TS_STEP_EXEC] = "exec"};

void agent_launch_probe(const char *cgroup_parent, ts_launch_caps *caps)
{
    memset(caps, 0, sizeof *caps);
    caps->root = geteuid() == 0;
    agent_cg_probe(cgroup_parent, caps);
}

const ts_task_info *agent_task_info_get(const ts_task *t)
{
    return &t->r.info;
}

const char *agent_task_meta(const ts_task *t)
{
    return t->r.meta != NULL ? t->r.meta : "";
}

static int valid_env_name(const char *s, size_t n)
{
    if (n == 0 || (s[0] >= '0' && s[0] <= '9'))
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!(s[i] == '_' || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= 'a' && s[i] <= 'z') ||
              (s[i] >= '0' && s[i] <= '9')))
            return 0;
    return 1;
}

static int check_env_list(const char *const *list, const char *what, ts_err *err)
{
    for (size_t i = 0; list != NULL && list[i] != NULL; i++) {
        const char *eq = strchr(list[i], '=');
        if (eq == NULL || !valid_env_name(list[i], (size_t)(eq - list[i])))
            return ts_err_set(err, TS_EINVAL, "%s[%zu]: \"%s\" is not NAME=value", what, i,
                              list[i]);
    }
    return 0;
}

static int check_id(const char *id, ts_err *err)
{
    if (id == NULL || id[0] == '\0' || strlen(id) > TS_TASK_ID_MAX)
        return ts_err_set(err, TS_EINVAL, "task_id: must be 1..%d characters", TS_TASK_ID_MAX);
    if (id[strspn(id, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")] ||
        strcmp(id, ".") == 0 || strcmp(id, "..") == 0)
        return ts_err_set(err, TS_EINVAL, "task_id: \"%s\": only A-Z a-z 0-9 . _ -", id);
    return 0;
}

static int check_spec(const ts_task_spec *s, ts_err *err)
{
    const char *id = s->task_id;
    int rc = check_id(id, err);
    if (rc)
        return rc;
    bool bare = s->image == NULL; /* a container may run its image's command, in its workdir */
    if (bare && (s->argv == NULL || s->argv[0] == NULL || s->argv[0][0] == '\0'))
        return ts_err_set(err, TS_EINVAL, "task %s: argv: empty command", id);
    if (bare && (s->workdir == NULL || s->workdir[0] == '\0'))
        return ts_err_set(err, TS_EINVAL, "task %s: workdir: required", id);
    if (s->log_dir == NULL || s->log_dir[0] == '\0')
        return ts_err_set(err, TS_EINVAL, "task %s: log_dir: required", id);
    if (s->ngpu > 0 && s->gpu_uuids == NULL)
        return ts_err_set(err, TS_EINVAL, "task %s: gpu_uuids: NULL with ngpu %zu", id, s->ngpu);
    for (size_t i = 0; i < s->ngpu; i++)
        if (s->gpu_uuids[i] == NULL || s->gpu_uuids[i][0] == '\0' || strchr(s->gpu_uuids[i], ','))
            return ts_err_set(err, TS_EINVAL, "task %s: gpu_uuids[%zu]: empty or has a comma",
                              id, i);
    if (s->world_size < 0 || (s->world_size > 0 && (s->rank < 0 || s->rank >= s->world_size)) ||
        s->local_rank < 0)
        return ts_err_set(err, TS_EINVAL, "task %s: rank %d / local_rank %d: must be in 0..%d",
                          id, s->rank, s->local_rank, s->world_size - 1);
    if (s->master_port < 0 || s->master_port > 65535)
        return ts_err_set(err, TS_EINVAL, "task %s: master_port: must be 0..65535", id);
    if (s->mps_thread_pct < 0 || s->mps_thread_pct > 100)
        return ts_err_set(err, TS_EINVAL, "task %s: mps_thread_pct: must be 1..100 (0: unset)",
                          id);
    if (s->cpu_milli < 0 || s->memory_bytes < 0 || s->pids_max < 0 || s->term_grace_s < 0)
        return ts_err_set(err, TS_EINVAL, "task %s: limits and grace must not be negative", id);
    if (s->ngpu_devs > 0 && s->gpu_devs == NULL)
        return ts_err_set(err, TS_EINVAL, "task %s: gpu_devs: NULL with ngpu_devs %zu", id,
                          s->ngpu_devs);
    if (s->meta != NULL && strlen(s->meta) > TS_TASK_META_MAX_BYTES)
        return ts_err_set(err, TS_EINVAL, "task %s: meta: longer than %d bytes", id,
                          TS_TASK_META_MAX_BYTES);
    rc = check_env_list(s->env, "env", err);
    return rc ? rc : check_env_list(s->shim_env, "shim_env", err);
}

static int pick_user(const ts_task_spec *s, struct ts_run_as *ra, ts_task_info *info, ts_err *err)
{
    struct passwd pw, *res = NULL;
    char buf[16384];
    const char *want = s->user;
    int rc;
    if (want != NULL && want[0] != '\0')
        rc = getpwnam_r(want, &pw, buf, sizeof buf, &res);
    else
        rc = getpwuid_r(geteuid(), &pw, buf, sizeof buf, &res);
    if (want != NULL && want[0] != '\0' && res == NULL)
        return ts_err_set(err, TS_ENOENT, "task %s: user \"%s\": %s", s->task_id, want,
                          rc ? strerror(rc) : "no such user");
    ra->uid = geteuid();
    ra->gid = getegid();
    agent_say(ra->name, sizeof ra->name, "%s", res ? res->pw_name : "");
    agent_say(ra->home, sizeof ra->home, "%s", res ? res->pw_dir : "/");
    if (res == NULL || want == NULL || want[0] == '\0')
        return 0;
    if (geteuid() != 0) {
        if (res->pw_uid != geteuid()) {
            struct passwd *me = getpwuid(geteuid());
            agent_say(ra->name, sizeof ra->name, "%s", me ? me->pw_name : "");
            agent_say(info->user_note, sizeof info->user_note,
                     "agent is not root: runs as uid %ld, not as \"%s\"", (long)geteuid(), want);
        }
        return 0;
    }
    ra->uid = res->pw_uid;
    ra->gid = res->pw_gid;
    ra->change = true;
    int n = 32;
    for (;;) {
        gid_t *g = realloc(ra->groups, (size_t)n * sizeof *g);
        if (g == NULL)
            return ts_err_set(err, TS_ENOMEM, "task %s: group list", s->task_id);
        ra->groups = g;
        int got = n;
        if (getgrouplist(res->pw_name, res->pw_gid, g, &got) >= 0) {
            ra->ngroups = got;
            return 0;
        }
        n = got > n ? got : n * 2;
    }
}

/* ---- records left by earlier starts ---------------------------------------------- */

/* Removes an old record of this id and its task's folder, unless its task
 * or keeper still runs. */
static int clear_record(const ts_rec_paths *p, const char *id, ts_err *err)
{
    ts_rec old;
    int rc = agent_rec_read(p->record, &old, NULL);
    bool running = rc == 0 && (agent_rec_alive(old.info.keeper_pid, old.info.keeper_start_ticks) ||
                               agent_rec_alive(old.info.pid, old.info.start_ticks));
    long pid = (long)old.info.pid;
    agent_rec_clear(&old);
    if (running)
        return ts_err_set(err, TS_EEXIST, "task %s: still runs here (pid %ld, record %s)", id,
                          pid, p->record);
    if (rc == 0)
        agent_task_dir_remove(old.info.task_dir, id);
    if (agent_rec_remove(p) != 0)
        return ts_err_set(err, TS_EIO, "task %s: removing the old record %s: %s", id, p->record,
                          strerror(errno));
    return 0;
}

static int record_paths(const char *record_dir, const char *id, ts_rec_paths *p, ts_err *err)
{
    if (record_dir == NULL || record_dir[0] == '\0')
        return ts_err_set(err, TS_EINVAL, "task %s: record_dir: required", id);
    if (agent_rec_paths_make(record_dir, id, p) != 0)
        return ts_err_set(err, TS_EINVAL, "task %s: record_dir: path too long", id);
    return 0;
}

int agent_task_record_forget(const char *record_dir, const char *task_id, ts_err *err)
{
    ts_rec_paths p;
    int rc = check_id(task_id, err);
    if (rc == 0)
        rc = record_paths(record_dir, task_id, &p, err);
    return rc ? rc : clear_record(&p, task_id, err);
}

/* ---- starting ------------------------------------------------------------------- */

static int check_dir(const char *id, const char *what, const char *dir, ts_err *err)
{
    struct stat st;
    if (stat(dir, &st) != 0)
        return ts_err_set(err, TS_ENOENT, "task %s: %s %s: %s", id, what, dir, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return ts_err_set(err, TS_ENOENT, "task %s: %s %s: not a directory", id, what, dir);
    return 0;
}

/* The task's user, then its workdir checked as root only for a task that
 * runs as root: for its user the keeper's chdir, once it is the user, says
 * what is wrong (root's stat would tell a user what lies in folders closed
 * to it). */
static int pick_user_and_dir(const ts_task_spec *s, struct ts_run_as *ra, ts_task_info *info,
                             ts_err *err)
{
    int rc = pick_user(s, ra, info, err);
    if (!rc && s->image == NULL && !ra->change)
        rc = check_dir(s->task_id, "workdir", s->workdir, err);
    return rc;
}

/* The keeper's answer: 0 when the task runs (t filled), else the failed step. */
static int read_report(int fd, pid_t keeper, const ts_task_spec *s, const char *exe, ts_task *t,
                       ts_err *err)
{
    ts_keeper_report r;
    ssize_t n;
    do
        n = read(fd, &r, sizeof r);
    while (n < 0 && errno == EINTR);
    if (n == (ssize_t)sizeof r && r.step == TS_STEP_STARTED) {
        ts_task_info *in = &t->r.info;
        in->pid = r.pid;
        in->start_ticks = r.start_ticks;
        in->keeper_pid = keeper;
        in->keeper_start_ticks = r.keeper_start_ticks;
        t->keeper_child = true;
        return 0;
    }
    int status;
    while (waitpid(keeper, &status, 0) < 0 && errno == EINTR)
        ;
    agent_rec_remove(&t->paths);
    if (n != (ssize_t)sizeof r || r.step <= TS_STEP_STARTED || r.step >= TS_STEP_COUNT)
        return ts_err_set(err, TS_EIO, "task %s: lost the start report from its keeper",
                          s->task_id);
    const char *what = r.step == TS_STEP_CHDIR    ? s->workdir
                       : r.step == TS_STEP_EXEC   ? exe
                       : r.step == TS_STEP_RECORD ? t->paths.record
                                                  : "";
    int code = r.err == ENOENT ? TS_ENOENT : TS_EIO;
    if (r.step == TS_STEP_EXEC && r.err == ENOENT) /* what a shell would say */
        return ts_err_set(err, code, "task %s: command not found: %s", s->task_id, exe);
    return ts_err_set(err, code, "task %s: %s%s%s: %s", s->task_id, STEP_NAME[r.step],
                      what[0] ? " " : "", what, strerror(r.err));
}

/* A new task's record: its id, grace, record and exit files (an old
 * record of the same id cleared) and its meta. */
static int task_record_init(ts_task *t, const ts_task_spec *s, const char *record_dir,
                            ts_err *err)
{
    int rc;
    t->exit_code = -1;
    t->r.term_grace_s = s->term_grace_s > 0 ? s->term_grace_s : TS_TERM_GRACE_DEFAULT_S;
    ts_task_info *info = &t->r.info;
    agent_say(info->task_id, sizeof info->task_id, "%s", s->task_id);
    if ((rc = record_paths(record_dir, s->task_id, &t->paths, err)) != 0 ||
        (rc = clear_record(&t->paths, s->task_id, err)) != 0)
        return rc;
    agent_say(info->record_path, sizeof info->record_path, "%s", t->paths.record);
    agent_say(info->exit_path, sizeof info->exit_path, "%s", t->paths.exit);
    if ((t->r.meta = strdup(s->meta != NULL ? s->meta : "")) == NULL)
        return ts_err_set(err, TS_ENOMEM, "task %s: meta: out of memory", s->task_id);
    return 0;
}

/* The task's own folder, made anew (so no old ack counts) for whoever the
 * task runs as: its image user's numbers in a container that has one, else
 * its Unix user; and its checkpoint ack's path there. */
static int make_task_dir(const ts_task_spec *s, const char *record_dir,
                         const struct ts_run_as *ra, ts_task_info *info, ts_err *err)
{
    char root[PATH_MAX];
    if (s->task_dirs && s->task_dirs[0])
        agent_say(root, sizeof root, "%s", s->task_dirs);
    else if (snprintf(root, sizeof root, "%s/tasks", record_dir) >= (int)sizeof root)
        return ts_err_set(err, TS_EINVAL, "task %s: record_dir: path too long", s->task_id);
    uid_t uid = ra->uid;
    gid_t gid = ra->gid;
    unsigned cu, cg;
    if (s->image != NULL && s->container_user != NULL &&
        sscanf(s->container_user, "%u:%u", &cu, &cg) == 2) {
        uid = (uid_t)cu;
        gid = (gid_t)cg;
    }
    info->run_uid = uid;
    int rc = agent_task_dir_make(root, s->task_id, uid, gid, s->task_files, s->ntask_files,
                                 info->task_dir, sizeof info->task_dir, err);
    if (rc == 0 && snprintf(info->ack_path, sizeof info->ack_path, "%s/" TS_TASK_ACK_NAME,
                            info->task_dir) >= (int)sizeof info->ack_path)
        rc = ts_err_set(err, TS_EINVAL, "task %s: task_dirs: path too long", s->task_id);
    return rc;
}

/* What the keeper executes: an image's runtime (*cpp, its bundle prepared)
 * or the command found on the task's PATH (exe, with *argvp a copy of the
 * spec's argv). */
static int pick_exe(const ts_task_spec *s, const struct ts_run_as *ra, const ts_envv *env,
                    const char *task_dir, char *exe, size_t exe_size, ts_container_plan **cpp,
                    char ***argvp, ts_err *err)
{
    if (s->image != NULL) {
        ts_container_plan *cp = malloc(sizeof *cp);
        if (cp == NULL)
            return ts_err_set(err, TS_ENOMEM, "task %s: out of memory", s->task_id);
        int rc = agent_container_prepare(s, ra, (const char *const *)env->v, task_dir, cp, err);
        if (rc != 0) {
            free(cp);
            return rc;
        }
        agent_say(exe, exe_size, "%s", cp->exe);
        *cpp = cp;
        return 0;
    }
    /* found by the task itself, as its user, from its workdir (a relative
     * ./run.sh there, a bare name on its PATH): the agent, root, looks at
     * nothing a user could not */
    if (snprintf(exe, exe_size, "%s", s->argv[0]) >= (int)exe_size)
        return ts_err_set(err, TS_EINVAL, "task %s: argv[0]: longer than %zu bytes", s->task_id,
                          exe_size - 1);
    size_t argc = 0;
    while (s->argv[argc] != NULL)
        argc++;
    char **argv = calloc(argc + 1, sizeof *argv);
    if (argv == NULL)
        return ts_err_set(err, TS_ENOMEM, "task %s: out of memory", s->task_id);
    memcpy(argv, s->argv, argc * sizeof *argv); /* execve's prototype is not const-correct */
    *argvp = argv;
    return 0;
}

/* The task's stdin, stdout and stderr into fds[0..2]: /dev/null and its
 * two log files (made ra's), or an interactive task's stream for all three.
 * On failure the caller closes what fds holds. */
static int open_stdio(const ts_task_spec *s, const struct ts_run_as *ra, ts_task_info *info,
                      int fds[3], ts_err *err)
{
    if ((fds[1] = agent_log_open(s->log_dir, s->task_id, "out", info->stdout_path,
                                 sizeof info->stdout_path, ra, err)) < 0 ||
        (fds[2] = agent_log_open(s->log_dir, s->task_id, "err", info->stderr_path,
                                 sizeof info->stderr_path, ra, err)) < 0)
        return err ? err->code : TS_EIO;
    if (s->stdio_given) { /* an interactive task: its stream instead */
        close(fds[1]);
        close(fds[2]);
        fds[1] = fds[2] = -1;
        if ((fds[0] = fcntl(s->stdio_fd, F_DUPFD_CLOEXEC, 3)) < 0 ||
            (fds[1] = fcntl(s->stdio_fd, F_DUPFD_CLOEXEC, 3)) < 0 ||
            (fds[2] = fcntl(s->stdio_fd, F_DUPFD_CLOEXEC, 3)) < 0)
            return ts_err_set(err, TS_EIO, "task %s: its stream: %s", s->task_id,
                              strerror(errno));
    } else if ((fds[0] = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0) {
        return ts_err_set(err, TS_EIO, "task %s: /dev/null: %s", s->task_id, strerror(errno));
    }
    return 0;
}

/* The task's own cgroup and its device limits where the node offers them;
 * where it does not, why not, in the task's info. */
static void isolate(const ts_launch_caps *caps, const ts_task_spec *s, ts_task *t)
{
    ts_task_info *info = &t->r.info;
    if (caps == NULL)
        agent_say(info->isolation_reason, sizeof info->isolation_reason, "cgroups not probed");
    else if (!caps->cgroup)
        agent_say(info->isolation_reason, sizeof info->isolation_reason, "%s",
                 caps->cgroup_reason);
    else if (agent_cg_create(caps, s, info->cgroup_path, sizeof info->cgroup_path, &t->cg,
                          info->isolation_reason, sizeof info->isolation_reason) == 0) {
        info->isolated = true;
        info->cgroup_v1 = caps->cgroup_v1;
    }
    if (!s->limit_devices)
        agent_say(info->devices_reason, sizeof info->devices_reason, "not requested");
    else if (!info->isolated)
        agent_say(info->devices_reason, sizeof info->devices_reason, "no task cgroup");
    else if (!caps->devices)
        agent_say(info->devices_reason, sizeof info->devices_reason, "%s", caps->devices_reason);
    else if (agent_cg_limit_devices(&t->cg, s->gpu_devs, s->ngpu_devs, info->devices_reason,
                                 sizeof info->devices_reason) == 0)
        info->devices_isolated = true;
}

int agent_task_start(const ts_launch_caps *caps, const ts_task_spec *s, ts_task **out, ts_err *err)
{
    *out = NULL;
    int rc = check_spec(s, err);
    if (rc)
        return rc;
    const char *record_dir = s->record_dir && s->record_dir[0] ? s->record_dir : s->log_dir;
    if ((rc = check_dir(s->task_id, "record_dir", record_dir, err)) != 0)
        return rc;

    ts_task *t = calloc(1, sizeof *t);
    struct ts_run_as ra = {0};
    ts_envv env = {0};
    char **argv = NULL, *body = NULL;
    ts_container_plan *cp = NULL;
    /* in, out, err, (unused), task report r/w, keeper report r/w */
    int fds[8] = {-1, -1, -1, -1, -1, -1, -1, -1};
    if (t == NULL)
        return ts_err_set(err, TS_ENOMEM, "task %s: out of memory", s->task_id);
    ts_task_info *info = &t->r.info;
    if ((rc = task_record_init(t, s, record_dir, err)) != 0)
        goto fail;

    if ((rc = pick_user_and_dir(s, &ra, info, err)) != 0)
        goto fail;
    info->uid = ra.uid;
    if ((rc = make_task_dir(s, record_dir, &ra, info, err)) != 0)
        goto fail;
    struct ts_env_user eu = {ra.name, ra.home};
    if (agent_envv_build(&env, s, &eu, info->ack_path) != 0) {
        rc = ts_err_set(err, TS_ENOMEM, "task %s: environment: out of memory", s->task_id);
        goto fail;
    }
    char exe[PATH_MAX];
    if ((rc = pick_exe(s, &ra, &env, info->task_dir, exe, sizeof exe, &cp, &argv, err)) != 0 ||
        (rc = open_stdio(s, &ra, info, fds, err)) != 0)
        goto fail;
    isolate(caps, s, t);

    if ((body = agent_rec_body(&t->r)) == NULL) {
        rc = ts_err_set(err, TS_ENOMEM, "task %s: record: out of memory", s->task_id);
        goto fail;
    }
    if (pipe2(&fds[4], O_CLOEXEC) != 0 || pipe2(&fds[6], O_CLOEXEC) != 0) {
        rc = ts_err_set(err, TS_EIO, "task %s: pipe: %s", s->task_id, strerror(errno));
        goto fail;
    }
    int netns = -1;
    if (s->netns_path && (netns = open(s->netns_path, O_RDONLY | O_CLOEXEC)) < 0) {
        rc = ts_err_set(err, TS_EIO, "task %s: network namespace %s: %s", s->task_id,
                        s->netns_path, strerror(errno));
        goto fail;
    }
    char deadline[PATH_MAX];
    bool named = snprintf(deadline, sizeof deadline, "%s/%s", record_dir,
                          TS_TASK_DEADLINE_FILE) < (int)sizeof deadline;
    ts_keeper_plan plan = {
        .deadline_path = named ? deadline : NULL,
        .in = fds[0], .out = fds[1], .err = fds[2], .stdio_tty = s->stdio_given && s->stdio_tty,
        .task_report_rd = fds[4], .task_report_wr = fds[5], .agent_report_wr = fds[7],
        .run_as = &ra, .workdir = s->workdir, .exe = exe, .argv = argv, .envp = env.v,
        .task_id = s->task_id, .paths = &t->paths, .record_body = body,
        .cgroup = &t->cg, .netns = netns, .path = agent_envv_get(&env, "PATH")};
    if (cp != NULL) {
        plan.path = NULL;
        plan.run_as = &cp->root;
        plan.workdir = cp->bundle;
        plan.argv = cp->argv;
        plan.envp = cp->envp;
        plan.cleanup_exe = cp->exe;
        plan.cleanup_argv = cp->cleanup_argv;
        plan.runtime_cgroup = &cp->cg;
    }
    pid_t keeper = fork();
    if (keeper < 0) {
        rc = ts_err_set(err, TS_EIO, "task %s: fork: %s", s->task_id, strerror(errno));
        if (netns >= 0)
            close(netns);
        goto fail;
    }
    if (keeper == 0)
        agent_keeper_run(&plan);
    if (netns >= 0)
        close(netns);
    for (int i = 0; i < 8; i++)
        if (i != 6) {
            close(fds[i]);
            fds[i] = -1;
        }
    if ((rc = read_report(fds[6], keeper, s, exe, t, err)) != 0)
        goto fail;
    t->r.phase = TS_TASK_RUNNING;
    close(fds[6]);
    free(cp);
    free(body);
    free(argv);
    agent_envv_free(&env);
    free(ra.groups);
    *out = t;
    return 0;
fail:
    for (int i = 0; i < 8; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    if (info->isolated) {
        agent_cg_kill(&t->cg); /* a task that joined before its start failed */
        agent_cg_remove(&t->cg);
    }
    if (cp != NULL)
        agent_bundle_remove(cp->bundle);
    agent_task_dir_remove(info->task_dir, s->task_id);
    free(cp);
    free(body);
    free(argv);
    agent_envv_free(&env);
    free(ra.groups);
    agent_rec_clear(&t->r);
    free(t);
    return rc;
}

/* ---- adopting ------------------------------------------------------------------- */

/* The cgroup agent_cg_create makes for this task id: <parent>/tessera-<id>. */
static bool named_for(const char *cgroup_path, const char *id)
{
    static const char PREFIX[] = "tessera-";
    const char *base = strrchr(cgroup_path, '/');
    return base != NULL && strncmp(base + 1, PREFIX, sizeof PREFIX - 1) == 0 &&
           strcmp(base + sizeof PREFIX, id) == 0;
}

int agent_task_adopt(const ts_launch_caps *caps, const char *record_dir, const char *task_id,
                  ts_task **out, ts_err *err)
{
    (void)caps; /* the record names the task's cgroup; nothing else of the node is needed */
    *out = NULL;
    int rc = check_id(task_id, err);
    if (rc)
        return rc;
    ts_task *t = calloc(1, sizeof *t);
    if (t == NULL)
        return ts_err_set(err, TS_ENOMEM, "task %s: out of memory", task_id);
    if ((rc = record_paths(record_dir, task_id, &t->paths, err)) == 0)
        rc = agent_rec_read(t->paths.record, &t->r, err);
    ts_task_info *in = &t->r.info;
    if (rc == 0 && strcmp(in->task_id, task_id) != 0)
        rc = ts_err_set(err, TS_EINVAL, "record %s: id: \"%s\", not \"%s\"", t->paths.record,
                        in->task_id, task_id);
    /* a damaged record must not point the agent at another cgroup to kill */
    if (rc == 0 && in->isolated && !named_for(in->cgroup_path, task_id))
        rc = ts_err_set(err, TS_EINVAL, "record %s: cgroup: %s is not named tessera-%s",
                        t->paths.record, in->cgroup_path, task_id);
    if (rc != 0) {
        agent_rec_clear(&t->r);
        free(t);
        return rc;
    }
    in->adopted = true;
    if (in->isolated)
        agent_cg_dirs_of(in->cgroup_path, in->cgroup_v1, &t->cg); /* n == 0 if unresolvable */
    agent_say(in->record_path, sizeof in->record_path, "%s", t->paths.record);
    agent_say(in->exit_path, sizeof in->exit_path, "%s", t->paths.exit);
    if (t->r.term_grace_s <= 0)
        t->r.term_grace_s = TS_TERM_GRACE_DEFAULT_S;
    t->exit_code = -1;
    *out = t;
    return 0;
}

/* ---- watching and stopping ------------------------------------------------------ */

/* /proc shows no other process under the task's pid: the task itself, its
 * zombie, or nothing (then -pid can only be what is left of its group). */
static bool pid_is_ours(const ts_task *t)
{
    unsigned long long start;
    char state;
    return agent_rec_proc_stat(t->r.info.pid, &start, &state) != 0 ||
           start == t->r.info.start_ticks;
}

/* 0, or the errno of kill. */
static int signal_group(ts_task *t, int sig)
{
    int e = 0;
    if (pid_is_ours(t) && kill(-t->r.info.pid, sig) != 0 && errno != ESRCH)
        e = errno;
    if (sig == SIGKILL && t->r.info.isolated)
        agent_cg_kill(&t->cg);
    return e;
}

static void remove_cgroup(ts_task *t, int tries)
{
    if (!t->r.info.isolated || !t->cgroup_left)
        return;
    for (int i = 0; i < tries; i++) {
        if (agent_cg_remove(&t->cg) == 0) {
            t->cgroup_left = false;
            return;
        }
        if (i + 1 < tries)
            nanosleep(&(struct timespec){0, POLL_INTERVAL_NS}, NULL);
    }
}

static void reap_keeper(ts_task *t, bool block)
{
    if (!t->keeper_child)
        return;
    pid_t r;
    while ((r = waitpid(t->r.info.keeper_pid, NULL, block ? 0 : WNOHANG)) < 0 && errno == EINTR)
        ;
    if (r != 0) { /* reaped, or ECHILD: someone else did */
        t->keeper_child = false;
        t->keeper_gone = true;
    }
}

static bool keeper_gone(ts_task *t)
{
    const ts_task_info *in = &t->r.info;
    if (t->keeper_child)
        reap_keeper(t, false);
    if (t->keeper_gone || t->keeper_child)
        return t->keeper_gone;
    unsigned long long start;
    char state;
    if (agent_rec_proc_stat(in->keeper_pid, &start, &state) == 0 &&
        start == in->keeper_start_ticks) {
        if (state != 'Z' && state != 'X')
            return false;
        waitpid(in->keeper_pid, NULL, WNOHANG); /* ours where this agent is a subreaper */
    }
    t->keeper_gone = true;
    return true;
}

/* Anything of that name counts, a link too: the task's word, in its folder. */
static bool ack_present(const ts_task *t)
{
    struct stat sb;
    return lstat(t->r.info.ack_path, &sb) == 0;
}

static void finish(ts_task *t, int code, int sig, bool lost)
{
    t->exit_code = code;
    t->term_signal = sig;
    t->lost = lost;
    if (t->r.stopping) {
        t->r.ack_seen = t->r.ack_seen || ack_present(t);
        t->outcome = t->r.ack_seen                          ? TS_STOP_CHECKPOINTED
                     : t->r.phase == TS_TASK_CHECKPOINTING ? TS_STOP_EXITED
                     : t->r.phase == TS_TASK_TERMINATING   ? TS_STOP_TERMINATED
                                                            : TS_STOP_KILLED;
    }
    /* the keeper has done this already, unless it is gone too */
    signal_group(t, SIGKILL);
    t->r.phase = TS_TASK_EXITED;
    t->cgroup_left = t->r.info.isolated;
    remove_cgroup(t, 1);
}

/* Finishes the task if it ended. The keeper is looked at first: once it is
 * gone, its exit file is either there or will never be. */
static void settle(ts_task *t)
{
    const ts_task_info *in = &t->r.info;
    bool gone = keeper_gone(t);
    int code, sig;
    if (agent_rec_exit_read(t->paths.exit, in->pid, in->start_ticks, &code, &sig,
                         &t->oom_kills, &t->cut_off) == 1) {
        struct stat st; /* written as the task ended, whether or not an agent ran */
        if (stat(t->paths.exit, &st) == 0)
            t->ended_at = (double)st.st_mtim.tv_sec + st.st_mtim.tv_nsec / 1e9;
        finish(t, code, sig, false);
    }
    else if (gone && !agent_rec_alive(in->pid, in->start_ticks))
        finish(t, -1, TS_TASK_LOST_SIGNAL, true);
}

/* Best effort: a stop goes on without its record; an agent adopting the task
 * later resumes from the last phase that was recorded. */
static void record_stop(ts_task *t)
{
    agent_rec_write(&t->r, &t->paths, NULL);
}

int agent_task_preempt_begin(ts_task *t, int sig, double grace_s, double now, ts_err *err)
{
    if (t->r.stopping || t->r.phase == TS_TASK_EXITED)
        return 0;
    if (sig == 0)
        sig = SIGUSR1;
    if (sig < 1 || sig >= NSIG || sig == SIGKILL || sig == SIGSTOP)
        return ts_err_set(err, TS_EINVAL, "checkpoint signal %d: not a catchable signal", sig);
    t->r.stopping = true;
    t->r.stop_signal = sig;
    t->r.stop_grace_s = grace_s < 0 ? TS_CHECKPOINT_GRACE_DEFAULT_S : grace_s;
    t->r.stop_begun_s = now;
    t->r.phase = TS_TASK_CHECKPOINTING;
    t->r.deadline_s = now + t->r.stop_grace_s;
    record_stop(t); /* before the signal: an agent that dies now still finds the stop */
    int e = signal_group(t, sig);
    if (e != 0)
        return ts_err_set(err, TS_EIO, "task pid %ld: signal %d: %s", (long)t->r.info.pid, sig,
                          strerror(e));
    return 0;
}

int agent_task_timeout_begin(ts_task *t, int sig, double grace_s, double now, ts_err *err)
{
    if (t->r.phase == TS_TASK_EXITED)
        return 0;
    double end = now + (grace_s < 0 ? TS_CHECKPOINT_GRACE_DEFAULT_S : grace_s);
    if (t->r.stopping) { /* a preemption's stop goes on, ending by the limit's end */
        if (!t->r.stop_hard || end < t->r.deadline_s) {
            t->r.stop_hard = true;
            if (end < t->r.deadline_s)
                t->r.deadline_s = end;
            record_stop(t);
        }
        return 0;
    }
    t->r.stop_hard = true;
    return agent_task_preempt_begin(t, sig == 0 ? SIGTERM : sig, grace_s, now, err);
}

/* One step of a stop in progress at `now`: the next signal when its phase ends. */
static void stop_step(ts_task *t, double now)
{
    if (t->r.stop_hard && t->r.phase != TS_TASK_KILLING && now >= t->r.deadline_s) {
        signal_group(t, SIGKILL); /* a time limit's grace is not extended */
        t->r.phase = TS_TASK_KILLING;
        record_stop(t);
    } else if (t->r.phase == TS_TASK_CHECKPOINTING && (ack_present(t) || now >= t->r.deadline_s)) {
        t->r.ack_seen = ack_present(t);
        signal_group(t, SIGTERM);
        t->r.phase = TS_TASK_TERMINATING;
        if (!t->r.stop_hard || now + t->r.term_grace_s < t->r.deadline_s)
            t->r.deadline_s = now + t->r.term_grace_s;
        record_stop(t);
    } else if (t->r.phase == TS_TASK_TERMINATING && now >= t->r.deadline_s) {
        signal_group(t, SIGKILL);
        t->r.phase = TS_TASK_KILLING;
        record_stop(t);
    }
}

int agent_task_poll(ts_task *t, double now, ts_task_state *st, ts_err *err)
{
    (void)err; /* nothing here fails: what cannot be known is reported as lost */
    if (t->r.phase != TS_TASK_EXITED)
        settle(t);
    if (t->r.phase == TS_TASK_EXITED) {
        reap_keeper(t, false);
        remove_cgroup(t, 1);
    } else if (t->r.stopping) {
        stop_step(t, now);
    }
    if (st != NULL) {
        st->phase = t->r.phase;
        st->exit_code = t->exit_code;
        st->term_signal = t->term_signal;
        st->outcome = t->outcome;
        st->ack_seen = t->r.ack_seen;
        st->lost = t->lost;
        st->oom_kills = t->oom_kills;
        st->cut_off = t->cut_off;
        st->ended_at = t->ended_at;
        st->hard_stop = t->r.stop_hard;
        st->phase_end_s = t->r.stopping && (t->r.phase == TS_TASK_CHECKPOINTING ||
                                            t->r.phase == TS_TASK_TERMINATING)
                              ? t->r.deadline_s
                              : 0.0;
    }
    return 0;
}

int agent_task_wait(ts_task *t, double timeout_s, ts_task_state *st, ts_err *err)
{
    double end = agent_mono_s() + timeout_s;
    for (;;) {
        ts_task_state s;
        int rc = agent_task_poll(t, agent_mono_s(), &s, err);
        if (st != NULL)
            *st = s;
        if (rc != 0 || s.phase == TS_TASK_EXITED) {
            if (rc == 0)
                remove_cgroup(t, CGROUP_RMDIR_TRIES);
            return rc;
        }
        if (timeout_s >= 0 && agent_mono_s() >= end)
            return TS_ENOSPC;
        nanosleep(&(struct timespec){0, POLL_INTERVAL_NS}, NULL);
    }
}

int agent_task_preempt(ts_task *t, int sig, double grace_s, ts_stop_outcome *outcome, ts_err *err)
{
    int rc = agent_task_preempt_begin(t, sig, grace_s, agent_mono_s(), err);
    ts_task_state st = {0};
    if (rc == 0)
        rc = agent_task_wait(t, -1, &st, err);
    if (outcome != NULL)
        *outcome = rc == 0 ? st.outcome : TS_STOP_NONE;
    return rc;
}

void agent_task_free(ts_task *t)
{
    if (t == NULL)
        return;
    if (t->r.phase != TS_TASK_EXITED) {
        signal_group(t, SIGKILL);
        reap_keeper(t, true); /* a keeper ends right after its task */
        double end = agent_mono_s() + TS_TASK_FREE_WAIT_S;
        for (settle(t); t->r.phase != TS_TASK_EXITED && agent_mono_s() < end; settle(t))
            nanosleep(&(struct timespec){0, POLL_INTERVAL_NS}, NULL);
        if (t->r.phase != TS_TASK_EXITED)
            finish(t, -1, TS_TASK_LOST_SIGNAL, true);
    }
    reap_keeper(t, true);
    remove_cgroup(t, CGROUP_RMDIR_TRIES);
    agent_task_dir_remove(t->r.info.task_dir, t->r.info.task_id);
    agent_rec_remove(&t->paths);
    agent_rec_clear(&t->r);
    free(t);
}

int agent_task_mark_left(ts_task *t) { return agent_rec_exit_mark_left(&t->paths); }

void agent_task_detach(ts_task *t)
{
    if (t == NULL)
        return;
    reap_keeper(t, false); /* only a keeper that already ended */
    agent_rec_clear(&t->r);
    free(t);
}
