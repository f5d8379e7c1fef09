/*
 * launch_keeper.h - the keeper process and the task's own start-up (internal
 * to the launcher).
 *
 * The agent prepares everything (user, environment, command path, log files,
 * cgroup, the record's text) in a ts_keeper_plan, forks, and the child runs
 * agent_keeper_run: it becomes the keeper, forks the task, sends the agent one
 * ts_keeper_report (started, with pids and start ticks; or the step that
 * failed and its errno), waits for the task, and leaves the exit file.
 *
 * Both the keeper and the task before its exec are forks of an agent that may
 * have had threads, so the code behind this header calls only
 * async-signal-safe functions, and everything it reads is in the plan.
 *
 * Ownership: the plan and what it points to belong to the agent; the keeper
 * has its own copy-on-write view of them.
 */
#ifndef TS_AGENT_LAUNCH_KEEPER_H
#define TS_AGENT_LAUNCH_KEEPER_H

#include <limits.h>
#include <stdbool.h>
#include <sys/types.h>

#include "launch_cgroup.h"
#include "launch_record.h"

/* Who the task runs as (filled by the agent before the fork). */
struct ts_run_as {
    uid_t uid;
    gid_t gid;
    gid_t *groups;
    int ngroups;
    bool change;              /* switch to uid/gid/groups */
    char name[256], home[PATH_MAX];
};

/* Where a start stopped; TS_STEP_STARTED is success. Names in launch.c. */
enum ts_start_step {
    TS_STEP_STARTED,
    TS_STEP_KEEPER,           /* the keeper's own set-up (session, descriptors) */
    TS_STEP_FORK,
    TS_STEP_PROC,             /* reading the task's start time */
    TS_STEP_RECORD,           /* writing the record */
    TS_STEP_SETSID,           /* from here on: in the task, before exec */
    TS_STEP_CGROUP,
    TS_STEP_STDIO,
    TS_STEP_GROUPS,
    TS_STEP_GID,
    TS_STEP_UID,
    TS_STEP_CHDIR,
    TS_STEP_EXEC,
    TS_STEP_COUNT
};

/* The keeper's one message to the agent. */
typedef struct ts_keeper_report {
    int step;                 /* enum ts_start_step */
    int err;                  /* errno of the failed step */
    pid_t pid;                /* the task (= its process group) */
    unsigned long long start_ticks, keeper_start_ticks;
} ts_keeper_report;

typedef struct ts_keeper_plan {
    int in, out, err;         /* the task's stdin/stdout/stderr */
    bool stdio_tty;           /* in is a terminal: the task's controlling terminal */
    int task_report_rd, task_report_wr; /* the task's exec report (close-on-exec pipe) */
    int agent_report_wr;      /* where the ts_keeper_report goes */
    const struct ts_run_as *run_as;
    const char *workdir, *exe;
    /* exe without a '/': looked for on this PATH (the task's), as the task's
     * user, the first one it may execute, as a shell does; with a '/' it is
     * run as named, a relative one from the workdir. NULL (no PATH): a name
     * without '/' is not found. */
    const char *path;
    char *const *argv, *const *envp;
    const char *task_id;
    const ts_rec_paths *paths;
    const char *record_body;  /* agent_rec_body of the new task */
    const ts_cg_dirs *cgroup; /* the task's cgroup (n == 0: none); it joins each */
    int netns;                /* the task's network namespace, -1: the agent's */
    /* run (and waited for) after the task was killed, before its exit file:
     * the container runtime's delete, so no container outlives its exit file
     * (the runtime runs with --keep, so its container is left until then) */
    const char *cleanup_exe;  /* NULL: none */
    char *const *cleanup_argv;
    /* the container's own cgroup, whose OOM kills count with the task's
     * (read before the delete removes it); NULL: none */
    const ts_cg_dirs *runtime_cgroup;
    /* the agent's controller deadline (TS_TASK_DEADLINE_FILE); NULL: none */
    const char *deadline_path;
} ts_keeper_plan;

/* Runs in the agent's child and never returns. */
_Noreturn void agent_keeper_run(const ts_keeper_plan *plan);

/* In a fork about to exec a user's program (a task, a session's shell):
 * every signal's handler back to the default, none blocked, every
 * descriptor above 2 closed on exec, so nothing of the agent's leaks into
 * it. Async-signal-safe. */
void agent_exec_reset(void);

/* Execs name as a shell finds it, as the user this process now is: with a
 * '/', as named (a relative one from the current directory); else the
 * first of path's directories (':'-separated, empty ones passed over; NULL:
 * none, so not found) whose file it may execute, as execvp does, with the
 * caller's path rather than this process's. Returns only on failure, errno
 * EACCES when one was there but not executable, ENOENT when none, or the
 * error of one found that cannot run (ENOEXEC, E2BIG, ...). No allocation:
 * async-signal-safe. */
void agent_exec_search(const char *name, const char *path, char *const *argv,
                       char *const *envp);

#endif
