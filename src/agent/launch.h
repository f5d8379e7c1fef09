/*
 * launch.h - how the agent starts a task, stops it, and finds it again after
 * an agent restart.
 *
 * A task is one process (and the process group it leads) started from a
 * ts_task_spec: the job's argv/env/workdir plus what the agent computed for
 * this node (GPU UUIDs, ranks, NCCL rail and QoS values, MPS directories, the
 * sharing shim, cgroup limits). agent_launch_probe finds out once whether per-task
 * cgroup limits (cgroup v2 where it is usable, else the cgroup v1 hierarchies)
 * and GPU device filtering are possible here; when they are not, tasks still
 * run, and their info says isolated=false and why.
 *
 * Each task has a keeper: a small process of its own (own session, signals
 * ignored) that the agent forks and that forks the task and waits for it, so
 * the task's exit status survives the agent. The keeper writes
 * <record dir>/<task id>.task (who the task is: pids, start times, paths,
 * the stop in progress, the caller's meta) before the start returns, and
 * <record dir>/<task id>.exit when the task ends. A restarted agent lists the
 * records (agent_task_records) and adopts each (agent_task_adopt); everything below
 * then works the same on an adopted task. docs/agent-tasks.md has the files.
 *
 * Each task also has a folder of its own, <task_dirs>/<task id>/, made
 * fresh for it (0700, its user's) and removed with it: the only place the
 * task writes that the agent reads (its checkpoint ack, its step file, its
 * shim's mark, its output note), and the only agent folder bound into its
 * container. The log and record folder is the agent's alone.
 *
 * Stopping follows the checkpoint acknowledgement contract (docs/agent-tasks.md):
 * checkpoint signal, wait for $TESSERA_CHECKPOINT_DONE or the grace, SIGTERM,
 * a short termination grace, SIGKILL. agent_task_poll drives that as a state
 * machine so the agent's loop never blocks; agent_task_preempt and agent_task_wait
 * are blocking conveniences built on it. The stop's progress is kept in the
 * record, so an adopted task that was stopping carries on from where it was.
 *
 * Ownership: the spec and everything it points to belong to the caller and are
 * only read during agent_task_start. A ts_task is allocated by agent_task_start or
 * agent_task_adopt and released by exactly one of agent_task_free (kills the task if
 * it still runs and removes its record: the task is done with) or
 * agent_task_detach (touches nothing: the task runs on, adoptable later). Nothing
 * here is thread-safe per task; different tasks may be used from different
 * threads. One agent per record directory. Nothing prints: errors come back in
 * the ts_err.
 */
#ifndef TS_AGENT_LAUNCH_H
#define TS_AGENT_LAUNCH_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "agent/image.h"
#include "tessera/error.h"

#define TS_CHECKPOINT_GRACE_DEFAULT_S 60.0 /* job-spec default (docs/job-spec.md) */
#define TS_TERM_GRACE_DEFAULT_S 10.0       /* SIGTERM to SIGKILL */
#define TS_TASK_FREE_WAIT_S 10.0           /* agent_task_free: a killed task's end, at most */
#define TS_LAUNCH_REASON_MAX 256
#define TS_TASK_ID_MAX 63
#define TS_TASK_META_MAX_BYTES 65536       /* the caller's meta string, see ts_task_spec */
#define TS_TASK_LOST_SIGNAL 9              /* SIGKILL: what a lost task reports (see lost) */
/* In the record dir: "DEADLINE_MS GRACE_MS\n", CLOCK_MONOTONIC milliseconds
 * by which the agent must have heard from a controller again, and the
 * termination grace; past it (the agent killed or gone) each task's keeper
 * stops its task, as a cut-off agent does (launch_keeper.c). */
#define TS_TASK_DEADLINE_FILE "controller-deadline"

/* What this node allows: filled by agent_launch_probe. */
typedef struct ts_launch_caps {
    bool cgroup;                            /* per-task cgroups with cpu/memory/pids limits */
    bool cgroup_v1;                         /* ... in the cgroup v1 hierarchies, not cgroup2 */
    char cgroup_parent[512];                /* where task cgroups are created: a cgroup2
                                             * directory, or (v1) a cgroup path such as
                                             * /tessera, the same in every hierarchy */
    char cgroup_reason[TS_LAUNCH_REASON_MAX];  /* why not, when !cgroup */
    bool devices;                           /* GPU device filter: BPF (v2), devices (v1) */
    char devices_reason[TS_LAUNCH_REASON_MAX]; /* why not, when !devices */
    bool root;                              /* may run tasks as other users */
} ts_launch_caps;

/* A character device number (e.g. 195:0 for /dev/nvidia0). */
typedef struct ts_devnum {
    unsigned major, minor;
} ts_devnum;

/* A file the agent makes, empty, in the task's own folder for the task's
 * user before the task or anyone of its user may write there: nothing in
 * it was put there by another (ts_task_spec.task_files). dev and ino, when
 * not NULL, get the file's identity. */
typedef struct ts_task_file {
    const char *name;             /* one component: no '/', not "." or ".." */
    dev_t *dev;
    ino_t *ino;
} ts_task_file;

typedef struct ts_task_spec {
    const char *task_id;          /* required: 1..TS_TASK_ID_MAX of A-Z a-z 0-9 . _ - */
    const char *const *argv;      /* required, NULL-terminated; argv[0] a path or found on PATH */
    const char *const *env;       /* NULL-terminated "NAME=value", may be NULL */
    const char *workdir;          /* required, an existing directory */
    const char *user;             /* NULL: the agent's own user */
    const char *log_dir;          /* required: <log_dir>/<task_id>.out / .err */
    const char *slurm_bin_dir;    /* first on a Slurm batch job's PATH (its srun); NULL: none */
    const char *task_dirs;        /* where the task's own folder <task_dirs>/<task_id> is made
                                   * (0700, the task's user's; made 0711 when missing): its
                                   * checkpoint ack, the one agent folder a container gets;
                                   * removed with the task; NULL: <record_dir>/tasks */
    const ts_task_file *task_files; /* empty files made in that folder before it is the
                                     * task's (its step file, its shim's mark) */
    size_t ntask_files;

    const char *const *gpu_uuids; /* CUDA_VISIBLE_DEVICES, ngpu entries */
    size_t ngpu;

    int world_size;               /* 0: not distributed, no RANK etc. */
    int rank, local_rank;
    const char *master_addr;
    int master_port;

    const char *nccl_ib_hca, *nccl_ib_tc, *nccl_ib_sl; /* NULL or "": not set */
    const char *nccl_ib_pkey;     /* the tenant's partition's index (docs/network.md); NULL: not set */

    const char *mps_pipe_dir, *mps_log_dir; /* NULL: not set */
    int mps_thread_pct;                     /* 1..100, 0: not set */

    const char *preload_shim;     /* LD_PRELOAD path, NULL: none */
    const char *const *shim_env;  /* NULL-terminated "NAME=value" limits for the shim */

    long long cpu_milli;          /* cpu.max / cpu.cfs_quota_us; 0: no limit */
    long long memory_bytes;       /* memory.max / memory.limit_in_bytes; 0: no limit */
    long long pids_max;           /* pids.max; 0: no limit */
    const ts_devnum *gpu_devs;    /* the GPUs the task may open (see docs) */
    size_t ngpu_devs;
    bool limit_devices;           /* false: no device filter at all */

    double term_grace_s;          /* SIGTERM->SIGKILL; 0: TS_TERM_GRACE_DEFAULT_S */

    const char *netns_path;       /* the network namespace the task joins; NULL: the agent's */
    /* A container task (docs/images.md): with an image, argv runs inside it
     * through the OCI runtime (argv NULL: the image's own command); workdir,
     * user and the limits above apply inside; the task's own folder is
     * bound into it at the same path (never log_dir or record_dir: stdout
     * and stderr come as descriptors). */
    const ts_image *image;        /* NULL: a bare process on the node's filesystem */
    const char *bundle_dir;       /* with image: made here; agent_bundle_remove when done */
    const char *runtime;          /* the OCI runtime; NULL: "runc" found on PATH */
    const ts_bundle_mount *mounts;/* more binds into the container */
    size_t nmounts;
    const json_t *cdi_edits;      /* its GPUs from the node's CDI spec (agent/cdi.h); NULL: none */
    const char *container_user;   /* "uid:gid" inside the image (its job's `user`, checked
                                   * by the caller); NULL: user's identity */
    long long container_write_mib; /* with an image: its writable layer's size on a
                                    * filesystem of its own; 0: on the state disk, unbounded */

    /* An interactive task (docs/interactive.md): stdin, stdout and stderr
     * are stdio_fd (a PTY's slave side, or a socket) instead of /dev/null
     * and the log files; with stdio_tty it becomes the task's controlling
     * terminal. The caller keeps the other end. */
    bool stdio_given;
    int stdio_fd;
    bool stdio_tty;

    const char *record_dir;       /* <record_dir>/<task_id>.task and .exit; NULL: log_dir */
    const char *meta;             /* opaque, kept in the record for the caller (e.g. JSON:
                                   * job, rank, GPUs), any bytes but NUL, at most
                                   * TS_TASK_META_MAX_BYTES; NULL: "" */
} ts_task_spec;

typedef struct ts_task_info {
    char task_id[TS_TASK_ID_MAX + 1];
    pid_t pid;                    /* also the process group id */
    unsigned long long start_ticks;        /* field 22 of /proc/<pid>/stat: tells a reused pid */
    pid_t keeper_pid;             /* the keeper that waits for the task */
    unsigned long long keeper_start_ticks; /* the same for the keeper */
    bool adopted;                 /* from agent_task_adopt, not agent_task_start */
    char record_path[768], exit_path[768];
    uid_t uid;                    /* who the task runs as */
    /* who its processes are: its container user's uid where it runs as one
     * (user: "uid:gid"), else uid; the owner of its folder and of what the
     * task writes that the agent reads (step file, output note, shim mark) */
    uid_t run_uid;
    char user_note[TS_LAUNCH_REASON_MAX]; /* non-empty when not run as spec->user */
    bool isolated;                /* in its own cgroup with the limits */
    bool cgroup_v1;               /* cgroup_path is a v1 cgroup path, in every hierarchy */
    char isolation_reason[TS_LAUNCH_REASON_MAX]; /* why not, when !isolated */
    bool devices_isolated;
    char devices_reason[TS_LAUNCH_REASON_MAX];
    char cgroup_path[768];        /* "" when !isolated; v2: the directory; v1: the path
                                   * below each hierarchy's mount (launch_cgroup.h) */
    char stdout_path[768], stderr_path[768], ack_path[768];
    char task_dir[768];           /* its own folder; "" in records of older agents */
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

/* Who stopped a task that was not asked to stop (its exit file's cut_off). */
enum ts_cut { TS_CUT_NONE = 0, TS_CUT_KEEPER = 1, TS_CUT_AGENT_LEFT = 2 };

typedef struct ts_task_state {
    ts_task_phase phase;
    int exit_code;           /* 0..255 when it exited, -1 otherwise */
    int term_signal;         /* the signal that ended it, 0 otherwise */
    ts_stop_outcome outcome;
    bool ack_seen;
    /* EXITED, but how is unknown: neither the task nor its keeper exists and
     * there is no exit file (the keeper was killed, or the node rebooted, or
     * a record's pid now belongs to another process). Reported as ended by
     * TS_TASK_LOST_SIGNAL with exit_code -1, so a caller that does not look
     * at this flag still never takes a lost task for a success. */
    bool lost;
    long long oom_kills;     /* processes of its cgroup the kernel's OOM killer ended */
    int cut_off;             /* enum ts_cut. TS_CUT_KEEPER: its keeper, the controller's
                                deadline passed; TS_CUT_AGENT_LEFT: its agent, as it stopped
                                with no controller to tell */
    double ended_at;         /* EXITED: when (Unix s: its exit file's time), 0 unknown */
    bool hard_stop;          /* stopped by agent_task_timeout_begin (its time limit) */
    double phase_end_s;      /* a stop's current phase ends then (agent_mono_s); 0: none */
} ts_task_state;

/* Fills caps. cgroup_parent: a delegated cgroup2 directory, or on a cgroup v1
 * host a cgroup path (e.g. /tessera) used in every hierarchy; NULL: the
 * agent's own cgroup2 directory, else /tessera in the v1 hierarchies.
 * Never fails: what is missing is in the reasons. */
void agent_launch_probe(const char *cgroup_parent, ts_launch_caps *caps);

/* Starts the task (through its keeper) and writes its record. caps may be
 * NULL (then no cgroups: the info says so). An old record and exit file of
 * the same id are removed first, unless that task still runs.
 * Errors: TS_EINVAL (spec), TS_ENOENT (workdir, command, user, log dir),
 * TS_EEXIST (a task with this id still runs here: adopt it instead),
 * TS_EIO (fork, cgroup, exec, record: the message names the step and errno). */
int agent_task_start(const ts_launch_caps *caps, const ts_task_spec *spec, ts_task **out,
                  ts_err *err);

/* Rebuilds a task from <record_dir>/<task_id>.task, as left by an agent that
 * exited or died. The task comes back running (its pid still has the recorded
 * start time), stopping (the recorded stop continues at the next poll),
 * exited (the keeper's exit file: its status), or lost (state.lost: none of
 * those). caps: the adopting agent's probe, may be NULL; the record itself
 * says which cgroup the task has. Nothing is signalled here.
 * Errors: TS_EINVAL (task_id, record_dir, or a damaged record: the message
 * names the file and the field), TS_ENOENT (no record), TS_ENOMEM. */
int agent_task_adopt(const ts_launch_caps *caps, const char *record_dir, const char *task_id,
                  ts_task **out, ts_err *err);

/* Calls fn(task_id, ctx) for each record in record_dir, in no particular
 * order; fn returning non-zero stops the listing. Returns how many were
 * listed (>= 0), or TS_ENOENT / TS_EIO when the directory cannot be read. */
int agent_task_records(const char *record_dir, int (*fn)(const char *task_id, void *ctx),
                    void *ctx, ts_err *err);

/* Removes the folders in task_dirs (ts_task_spec) whose task has no record
 * in record_dir: left by an agent that died while starting or forgetting
 * it. For an agent's start, after it adopted what the records hold. */
void agent_task_dirs_sweep(const char *task_dirs, const char *record_dir);

/* Removes a record, exit file and task folder that no handle owns (a record
 * that could not be adopted, or whose task the controller no longer knows). Refuses with
 * TS_EEXIST while the recorded task or its keeper still runs; a damaged
 * record is removed. 0 also when there was nothing to remove. */
int agent_task_record_forget(const char *record_dir, const char *task_id, ts_err *err);

const ts_task_info *agent_task_info_get(const ts_task *t);

/* The spec's meta as recorded ("" when none); valid until the task is released. */
const char *agent_task_meta(const ts_task *t);

/* Begins the stop sequence: sends sig (0: SIGUSR1) to the group; grace_s < 0
 * means TS_CHECKPOINT_GRACE_DEFAULT_S. Does nothing if already stopping or exited. */
int agent_task_preempt_begin(ts_task *t, int sig, double grace_s, double now, ts_err *err);

/* A stop whose grace is a hard limit (a job's time limit, docs/job-spec.md):
 * sig (0: SIGTERM) to the group now, SIGKILL to the group (and cgroup) when
 * grace_s (< 0: TS_CHECKPOINT_GRACE_DEFAULT_S) is over; an acknowledged
 * checkpoint brings SIGTERM forward, never the end of the grace further. A
 * stop already begun becomes hard, keeping its own end if that is sooner.
 * The record keeps it, so an adopting agent kills on time too. */
int agent_task_timeout_begin(ts_task *t, int sig, double grace_s, double now, ts_err *err);

/* Advances the state machine at time `now` (agent_mono_s) and reports it;
 * never blocks, and does not fail today (err is for the future). The task's
 * end comes from its keeper's exit file (or is "lost", see ts_task_state).
 * Once EXITED the group is killed and the cgroup removed. Rewriting the record
 * when a stop changes phase is best effort: if it fails the stop goes on, and
 * an agent adopting the task later resumes from the last recorded phase. */
int agent_task_poll(ts_task *t, double now, ts_task_state *st, ts_err *err);

/* Blocking: the whole stop sequence; outcome may be NULL. */
int agent_task_preempt(ts_task *t, int sig, double grace_s, ts_stop_outcome *outcome, ts_err *err);

/* Blocking: waits up to timeout_s (<0: forever) for the task to exit.
 * Returns TS_OK when it exited (st filled), TS_ENOSPC when it is still running. */
int agent_task_wait(ts_task *t, double timeout_s, ts_task_state *st, ts_err *err);

/* The task is done with: kills the group if still running, waits for it and
 * its keeper (an adopted task's exit file at most TS_TASK_FREE_WAIT_S, then
 * it counts as lost), removes its cgroup, its own folder, its record and its
 * exit file, frees. A
 * record must not outlive a task the controller dropped, so this is what the
 * agent calls when it forgets a task. NULL ok. */
void agent_task_free(ts_task *t);

/* Frees the handle only: the task, its keeper, record and exit file stay, for
 * a later agent_task_adopt. What an agent that exits leaving its tasks running
 * calls. A keeper this process forked and that is still running becomes a
 * zombie of this process when it ends, so detach where the process exits.
 * NULL ok. */
void agent_task_detach(ts_task *t);
/* An ended task its agent stopped as the agent stopped, no controller told:
 * its exit file says so (agent_rec_exit_mark_left), for the next agent. */
int agent_task_mark_left(ts_task *t);

#endif
