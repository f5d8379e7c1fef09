/*
 * launch.h - how the agent starts a task and stops it.
 *
 * A task is one process (and the process group it leads) started from a
 * ts_task_spec: the job's argv/env/workdir plus what the agent computed for
 * this node (GPU UUIDs, ranks, NCCL rail and QoS values, MPS directories, the
 * sharing shim, cgroup limits). ts_launch_probe finds out once whether per-task
 * cgroup v2 limits and GPU device filtering are possible here; when they are
 * not, tasks still run, and their info says isolated=false and why.
 *
 * Stopping follows the checkpoint acknowledgement contract (docs/agent-tasks.md):
 * checkpoint signal, wait for $TESSERA_CHECKPOINT_DONE or the grace, SIGTERM,
 * a short termination grace, SIGKILL. ts_task_poll drives that as a state
 * machine so the agent's loop never blocks; ts_task_preempt and ts_task_wait
 * are blocking conveniences built on it.
 *
 * Ownership: the spec and everything it points to belong to the caller and are
 * only read during ts_task_start. A ts_task is allocated by ts_task_start and
 * freed by ts_task_free (which kills the group if it still runs). Nothing here
 * is thread-safe per task; different tasks may be used from different threads.
 * Nothing prints: errors come back in the ts_err.
 */
#ifndef TS_AGENT_LAUNCH_H
#define TS_AGENT_LAUNCH_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "tessera/error.h"

#define TS_CHECKPOINT_GRACE_DEFAULT_S 60.0 /* job-spec default (docs/job-spec.md) */
#define TS_TERM_GRACE_DEFAULT_S 10.0       /* SIGTERM to SIGKILL */
#define TS_LAUNCH_REASON_MAX 256

/* What this node allows: filled by ts_launch_probe. */
typedef struct ts_launch_caps {
    bool cgroup;                            /* per-task cgroups with cpu/memory/pids limits */
    char cgroup_parent[512];                /* where task cgroups are created */
    char cgroup_reason[TS_LAUNCH_REASON_MAX];  /* why not, when !cgroup */
    bool devices;                           /* BPF device filter attachable */
    char devices_reason[TS_LAUNCH_REASON_MAX]; /* why not, when !devices */
    bool root;                              /* may run tasks as other users */
} ts_launch_caps;

/* A character device number (e.g. 195:0 for /dev/nvidia0). */
typedef struct ts_devnum {
    unsigned major, minor;
} ts_devnum;

typedef struct ts_task_spec {
    const char *task_id;          /* required: 1..63 of A-Z a-z 0-9 . _ - */
    const char *const *argv;      /* required, NULL-terminated; argv[0] a path or found on PATH */
    const char *const *env;       /* NULL-terminated "NAME=value", may be NULL */
    const char *workdir;          /* required, an existing directory */
    const char *user;             /* NULL: the agent's own user */
    const char *log_dir;          /* required: <log_dir>/<task_id>.out / .err */
    const char *ack_dir;          /* where the ack file lives; NULL: log_dir */

    const char *const *gpu_uuids; /* CUDA_VISIBLE_DEVICES, ngpu entries */
    size_t ngpu;

    int world_size;               /* 0: not distributed, no RANK etc. */
    int rank, local_rank;
    const char *master_addr;
    int master_port;

    const char *nccl_ib_hca, *nccl_ib_tc, *nccl_ib_sl; /* NULL or "": not set */

    const char *mps_pipe_dir, *mps_log_dir; /* NULL: not set */
    int mps_thread_pct;                     /* 1..100, 0: not set */

    const char *preload_shim;     /* LD_PRELOAD path, NULL: none */
    const char *const *shim_env;  /* NULL-terminated "NAME=value" limits for the shim */

    long long cpu_milli;          /* cpu.max; 0: no limit */
    long long memory_bytes;       /* memory.max; 0: no limit */
    long long pids_max;           /* pids.max; 0: no limit */
    const ts_devnum *gpu_devs;    /* the GPUs the task may open (see docs) */
    size_t ngpu_devs;
    bool limit_devices;           /* false: no device filter at all */

    double term_grace_s;          /* SIGTERM->SIGKILL; 0: TS_TERM_GRACE_DEFAULT_S */
} ts_task_spec;

typedef struct ts_task_info {
    pid_t pid;                    /* also the process group id */
    uid_t uid;                    /* who the task runs as */
    char user_note[TS_LAUNCH_REASON_MAX]; /* non-empty when not run as spec->user */
    bool isolated;                /* in its own cgroup with the limits */
    char isolation_reason[TS_LAUNCH_REASON_MAX]; /* why not, when !isolated */
    bool devices_isolated;
    char devices_reason[TS_LAUNCH_REASON_MAX];
    char cgroup_path[768];        /* "" when !isolated */
    char stdout_path[768], stderr_path[768], ack_path[768];
} ts_task_info;

typedef struct ts_task ts_task; /* opaque: one started task */

typedef enum ts_task_phase {
    TS_TASK_RUNNING,
    TS_TASK_CHECKPOINTING,   /* checkpoint signal sent, waiting for ack or grace */
    TS_TASK_TERMINATING,     /* SIGTERM sent */
    TS_TASK_KILLING,         /* SIGKILL sent */
    TS_TASK_EXITED,
} ts_task_phase;

typedef enum ts_stop_outcome {
    TS_STOP_NONE,            /* not stopped by the agent (exited on its own) */
    TS_STOP_CHECKPOINTED,    /* acknowledged its checkpoint, then ended */
    TS_STOP_EXITED,          /* exited after the signal without acknowledging */
    TS_STOP_TERMINATED,      /* ended by SIGTERM (or exited during its grace) */
    TS_STOP_KILLED,          /* needed SIGKILL */
} ts_stop_outcome;

typedef struct ts_task_state {
    ts_task_phase phase;
    int exit_code;           /* 0..255 when it exited, -1 otherwise */
    int term_signal;         /* the signal that ended it, 0 otherwise */
    ts_stop_outcome outcome;
    bool ack_seen;
} ts_task_state;

/* Fills caps. cgroup_parent: a delegated cgroup2 directory, or NULL to use the
 * agent's own cgroup. Never fails: what is missing is in the reasons. */
void ts_launch_probe(const char *cgroup_parent, ts_launch_caps *caps);

/* Monotonic seconds, the clock ts_task_poll expects. */
double ts_launch_now(void);

/* Starts the task. caps may be NULL (then no cgroups: the info says so).
 * Errors: TS_EINVAL (spec), TS_ENOENT (workdir, command, user, log dir),
 * TS_EIO (fork, cgroup, exec: the message names the step and errno). */
int ts_task_start(const ts_launch_caps *caps, const ts_task_spec *spec, ts_task **out,
                  ts_err *err);

const ts_task_info *ts_task_info_get(const ts_task *t);

/* Begins the stop sequence: sends sig (0: SIGUSR1) to the group; grace_s < 0
 * means TS_CHECKPOINT_GRACE_DEFAULT_S. Does nothing if already stopping or exited. */
int ts_task_preempt_begin(ts_task *t, int sig, double grace_s, double now, ts_err *err);

/* Advances the state machine at time `now` (ts_launch_now) and reports it;
 * never blocks. Once EXITED the group is killed and the cgroup removed. */
int ts_task_poll(ts_task *t, double now, ts_task_state *st, ts_err *err);

/* Blocking: the whole stop sequence; outcome may be NULL. */
int ts_task_preempt(ts_task *t, int sig, double grace_s, ts_stop_outcome *outcome, ts_err *err);

/* Blocking: waits up to timeout_s (<0: forever) for the task to exit.
 * Returns TS_OK when it exited (st filled), TS_ENOSPC when it is still running. */
int ts_task_wait(ts_task *t, double timeout_s, ts_task_state *st, ts_err *err);

/* Kills the group if still running, reaps it, removes its cgroup, frees. NULL ok. */
void ts_task_free(ts_task *t);

#endif
