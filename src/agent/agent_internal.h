/*
 * agent_internal.h - internal to the agent's loop: the state agent.c (the
 * protocol exchange), agent_start.c (one task's start) and agent_task.c
 * (adoption, MIG, MPS, shim, output and metrics) share. Not for other modules: they use agent.h.
 * One thread owns a ts_agent; nothing here is thread-safe.
 */
#ifndef TS_AGENT_AGENT_INTERNAL_H
#define TS_AGENT_AGENT_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <curl/curl.h>
#include <jansson.h>

#include "agent/agent.h"
#include "agent/image.h"
#include "agent/p2p.h"
#include "agent/sync_fit.h"
#include "tessera/agent_proto.h"

#define TS_AGENT_DATA_MAX 8 /* a job spec's data (TS_SPEC_MAX_DATA) */
#define TS_AGENT_IMAGES_LISTED_MAX 256 /* images a sync lists (the controller keeps 256) */
/* The files of a task's own folder <task_dirs>/<task id>/ (launch.h) that the
 * agent names in its environment: its step times (TESSERA_STEP_FILE), its
 * shim's mark (TESSERA_CUDA_LOADED), where it says its output went
 * (TESSERA_OUTPUT_NOTE), a bare task's sharing ledger (TESSERA_CUDA_LEDGER,
 * its rank's for a step). The first two the agent makes; the others the
 * task (its shim). */
#define AGENT_STEP_FILE_NAME "step-times"
#define AGENT_SHIM_MARK_NAME "shim-loaded"
#define AGENT_OUT_NOTE_NAME "output-note"
#define AGENT_LEDGER_NAME "cuda-ledger"

typedef struct local_task {
    int64_t job;
    int rank;
    bool is_step;          /* a step's task in the rank's resources (ctld/steps.h) */
    int step;              /* its step, when is_step */
    int gpu[16];           /* its GPU indices, for its utilisation */
    int ngpu;
    bool idle_warned;
    ts_task *t;            /* NULL when it could not start */
    char start_error[TS_ERR_MSG_MAX]; /* why it could not start */
    bool stop_requested;
    bool stopped_unstarted; /* stopped before anything of it ran here (a stop of a task
                             * never heard of, or whose image was still coming):
                             * reported stopped, so that its job's stop completes */
    ts_task_state st;
    char step_file[700];   /* where the task writes its step times (its own folder) */
    char out_note[710];    /* where a task whose output it redirects names the files
                            * (TESSERA_OUTPUT_NOTE, docs/agent-tasks.md) */
    char workdir[1024];    /* its working directory: a relative name there is read */
    char bundle[720];      /* a container task's bundle folder, "" for a bare one: the
                            * names its note gives are the container's (bundle_path.h) */
    dev_t step_dev;        /* the step file the agent made, while it is there; 0: none */
    ino_t step_ino;        /* made (or an adopted task's: gone with its folder) */
    char tenant[64];
    char mig_uuid[96];     /* a MIG task's instance, "" otherwise */
    int mig_profile, mig_start; /* -1 unless a MIG task */
    bool fractional;       /* shares its GPU (gpu_milli < 1000) */
    int gpu_milli;         /* its share of its GPU */
    long long gpu_mem_mib; /* its GPU memory, 0 = not limited */
    /* its job's time limit (docs/job-spec.md), enforced here so that no
     * controller outage extends it: at deadline_unix (CLOCK_REALTIME, kept in
     * the record's meta across agent restarts; 0 = none) limit_signal, then
     * SIGKILL limit_grace_s later */
    double deadline_unix, time_limit_s, limit_grace_s;
    int limit_signal;
    unsigned net_vni;      /* its tenant's VXLAN when it has a namespace of its own, else 0 */
    double run;            /* the run it belongs to (the controller's "run": the job's start
                            * time); a desired run of another number is a new task */
    /* a task in an image (agent_image.c): waiting while the image is pulled */
    ts_image_ref image_ref;
    struct agent_pull *pull;    /* the pull in flight, NULL none */
    json_t *waiting;            /* the desired task, kept until its image is there */
    double pull_retry_at, pull_retry_s; /* the next try after a failed one, its pause */
    long long pull_done_bytes, pull_total_bytes;
    char pull_note[TS_ERR_MSG_MAX]; /* why the last try failed, "" none */
    ts_image image;             /* the image it runs in, once image_ready */
    bool image_ready;           /* a user of image (released when forgotten) */
    char launch_end[32];        /* the end a start failure reports ("image_auth"), "" */
    char *image_cred;           /* the pull secret, "user:password" (malloc'd, wiped), NULL */
    /* its job's read-only data images (agent_data.c), pulled with its image */
    int ndata;
    struct local_data {
        char digest[TS_IMAGE_DIGEST_MAX];
        char rootfs[700];       /* the data's files on this node (read-only) */
        char path[256];         /* where a container task sees them */
    } data[TS_AGENT_DATA_MAX];
    bool data_ready;            /* a user of each data image (released when forgotten) */
    bool pulled;                /* its image and data are here: start it */
    /* a fractional task's shim mark (TESSERA_CUDA_LOADED, docs/sharing.md):
     * the file the agent made, which the shim writes to once loaded */
    /* a pidfd of its keeper, readable once the keeper ended (the task's
     * end): a long-poll in flight ends early to report it (agent.c) */
    int keeper_fd;              /* valid when keeper_fd_open */
    bool keeper_fd_open;
    bool keeper_fd_done;        /* woke a sync once, or could not be opened: never again */
    char shim_mark[720];        /* "" none (no shim, or an adopted task: not watched) */
    dev_t shim_mark_dev;
    ino_t shim_mark_ino;
    double shim_due;            /* agent_mono_s() by which it must be written */
    bool shim_seen;             /* written: the task runs with its limits */
    bool shim_missing;          /* not written in time: the task was stopped */
    /* stopped because the state disk fell under its reserve while this
     * task's writable layer held the most (disk_pressure.c): MiB figures */
    bool disk_stopped;
    long long disk_layer_mib, disk_free_mib, disk_reserve_mib;
    /* stopped because no controller answered for half the time it takes to
     * declare the node lost (agent.c): kept, with how long, to report */
    bool cut_off;
    double cut_off_silent_s, cut_off_limit_s;
    bool agent_stopped;         /* stopped as the agent itself stopped (SIGTERM): requeued */
    char user[64];              /* its Unix user ("" none), for its epilog */
    json_t *prolog_wait;        /* the desired task, kept while the node's prolog runs or
                                 * waits for a hook slot */
    uint64_t prolog_queued;     /* its prolog waits for a slot: its place in line; 0 not */
    bool prolog_done;           /* the prolog succeeded: the start goes on */
    bool epilog_done;           /* its epilog was started (once per task) */
    /* an interactive task (docs/interactive.md): the agent's end of its
     * stdio (a PTY's master side, or a socket), which `tessera attach`
     * sessions relay, shared with them (session.c); NULL when none. Its
     * end is reported only once a session read all its output, or
     * TS_AGENT_STDIO_DRAIN_S after it ended (stdio_exit_s). */
    struct agent_stdio *stdio;
    bool stdio_tty;
    double stdio_exit_s;
    /* a container task's job mounts are pinned (agent_mount_pin): unpinned
     * when the task is forgotten */
    bool mounts_pinned;
} local_task;

/* A prolog or epilog running (hooks.c). */
typedef struct agent_hook {
    pid_t pid;                  /* its process group too */
    bool prolog;
    bool killed;                /* past its deadline: killed, failed; reaped when it exits */
    int64_t job;
    int rank;
    double deadline;            /* agent_mono_s() */
} agent_hook;

/* An epilog waiting for a hook slot: the ended task's identity. */
typedef struct agent_epilog_wait {
    int64_t job;
    int rank;
    char user[64];
    long long uid;
    int gpus[16];
    int ngpu;
    int exit_code;
} agent_epilog_wait;

#define TS_AGENT_STDIO_DRAIN_S 30.0
#define AGENT_DISK_SAMPLES 13 /* the state disk sampled over the last minute (disk_pressure.c) */

struct ts_agent {
    ts_agent_config cfg;
    ts_agent_node *node;
    ts_launch_caps caps;
    CURL *h;
    CURLM *multi;           /* the sync's long-poll, woken by a task's end */
    bool registered;
    int64_t gen;
    /* each report's number ("seq"): rising, from the wall clock in
     * microseconds at the agent's start, so that the controller can drop a
     * report older than one it applied (a sync cut short by a task's end
     * may still be waiting there when its successor arrives) */
    int64_t report_seq;
    double last_ok_s;
    long long deadline_written_ms; /* the keepers' controller deadline last written */
    bool switched;         /* the last step moved to another controller */
    int quick_retries;     /* retries without a pause since the last pause or answer */
    bool register_now;     /* the last sync was answered 409 (a restarted controller):
                              register at once rather than after the failure's pause */
    double ctld_lost_s;    /* the controller's node_lost_after, from its answers; 0 unknown */
    double answer_refused_said_s; /* when an answer outside the protocol was last said */
    local_task tasks[TS_AGENT_MAX_TASKS];
    int ntasks;
    char logs[600];
    char identity[128];         /* "MACHINE:DEV:INO" of its state directory (register's agent) */
    bool leaving;               /* agent_leave's last sync: no wait, nothing started */
    char steps[600];       /* <state_dir>/steps: where older agents kept step files (swept) */
    char task_dirs[600];   /* <state_dir>/tasks: each task's own folder (launch.h) */
    char slurm_bin[700];   /* <state_dir>/slurm: a Slurm job's srun; "" if not written */
    char slurm_kit[720];   /* <state_dir>/slurm/kit: srun for an image; "" if not made */
    char mig_error[256];   /* the last MIG reconfiguration's error, "" none */
    agent_answers log_answers; /* output the controller asked for, sent with the next sync */
    size_t body_max;       /* the budget of a sync's body (TS_AGENT_BODY_MAX_BYTES) */
    ts_mps_daemon mps[16]; /* per GPU, while fractional tasks use it */
    bool mps_on[16];
    char *net_peers;       /* the last desired "net_peers", compact JSON; NULL none yet */
    char *net_services;    /* the same for "net_services" */
    ts_image_store images; /* <state_dir>/images (docs/images.md) */
    /* the image store's listing as the controller last took it (answered
     * 200), NULL after a registration: a sync carries the listing only when
     * it differs, so an unchanged store costs neither side a comparison */
    json_t *images_sent;
    struct ts_p2p *p2p;    /* pieces of images shared with peers; NULL = registry only */
    struct agent_prefetch {
        int64_t job;       /* 0: a free slot */
        struct agent_pull *pull; /* NULL once done */
        int rc;            /* once done */
    } prefetch[4];
    bool images_ok;
    char images_error[TS_ERR_MSG_MAX];
    char bundles[600];     /* <state_dir>/bundles: container tasks' OCI bundles */
    agent_hook hooks[TS_AGENT_MAX_HOOKS];
    int nhooks;
    /* epilogs of tasks that ended while every hook slot was taken, oldest
     * first (a ring): each starts as a slot frees (hooks.c) */
    agent_epilog_wait epilogs_waiting[TS_AGENT_EPILOGS_WAITING_MAX];
    int epilogs_head, nepilogs_waiting;
    /* the epilogs taken over from the last agent (agent_epilogs_restore):
     * a task of theirs it still held a record of is not given another */
    struct agent_epilog_id {
        int64_t job;
        int rank;
    } epilogs_restored[TS_AGENT_EPILOGS_WAITING_MAX];
    int nepilogs_restored;
    /* prologs waiting for a slot are their tasks' (local_task.prolog_queued,
     * at most TS_AGENT_MAX_TASKS): the last place in line given */
    uint64_t prologs_queued;
    char drain_why[256];   /* a hook failed: sent as the sync's "drain" until one is
                            * answered; "" none */
    char sess_seen[64][64];/* the last sessions opened (session.c): each opens once */
    int sess_next;
    double disk_next;      /* agent_mono_s() of the state disk's next check */
    double disk_settle;    /* no task stopped for the disk before this (disk_pressure.c) */
    double disk_logs_next, disk_pressed_next; /* ended tasks' logs: the next sweeps */
    /* the disk's free bytes and the running tasks' files' bytes, sampled
     * every DISK_SAMPLE_S (a ring, disk_pressure.c): who filled it lately */
    struct agent_disk_sample {
        double at;
        long long free_bytes, task_bytes;
    } disk_samples[AGENT_DISK_SAMPLES];
    int disk_nsamples, disk_sample_next;
    double disk_sample_at;
    bool disk_outside;     /* under the reserve, filled from outside the tasks' files */
};

/* disk_pressure.c: the state disk kept for every task (docs/images.md) */
/* Keeps running tasks' output logs within --output-keep-mib and checks the
 * state disk's free space (every DISK_CHECK_S); under the reserve
 * (--disk-reserve-mib), stops the task whose files there (writable layer,
 * logs) take the most, one at a time. */
void agent_disk_check(ts_agent *a, double now);
/* The report of a task the agent stopped as it ran (its sharing shim never
 * registered, or its layer took the most of a disk under its reserve):
 * failed, with its reason code and why (AGENT_STOPPED_WHY_BYTES). */
#define AGENT_STOPPED_WHY_BYTES 256
void agent_stopped_report(const ts_agent *a, const local_task *lt, ts_task_report *r, char *why);
/* The state disk's limits the options leave unset, sized once at the
 * agent's start from the disk under state_dir (which must exist): the
 * reserve min(TS_AGENT_DISK_RESERVE_MIB, 5 %), a task's output
 * min(TS_AGENT_OUTPUT_KEEP_MIB, 2 %), an ended task's logs
 * TS_AGENT_OUTPUT_KEEP_HOURS. */
void agent_disk_limits(ts_agent_config *cfg);

/* agent_net.c: tenant networks (docs/network.md) */
void agent_net_open(ts_agent *a);
/* fills ns_path (or leaves it "") from the decoded task's net (d->net); why on failure */
void agent_net_begin(ts_agent *a, local_task *lt, const char *id, const ts_desired_task *d,
                     char *ns_path, size_t len, char *why, size_t why_len);
void agent_net_end(ts_agent *a, const local_task *lt);
void agent_net_peers_apply(ts_agent *a, const ts_desired *d);
void agent_net_services_apply(ts_agent *a, const ts_desired *d);

/* session.c: interactive sessions (docs/interactive.md) */
/* Opens the agent's side of every new session of the desired state's
 * "sessions" (each on a thread of its own). */
void agent_sessions(ts_agent *a, const ts_desired *d);
/* Makes an interactive task's stdio (PTY or socket pair) from the desired
 * task d: fills lt's end; *peer the task's end (closed by the caller after
 * the start), -1 when d is not interactive; why on failure. */
void agent_stdio_make(local_task *lt, const ts_desired_task *d, uid_t uid, int *peer,
                      char *why, size_t why_len);
/* Closes an interactive task's end once it is forgotten. */
void agent_stdio_close(local_task *lt);
/* Whether an ended interactive task is still reported running: its output
 * not yet read whole by a session, within TS_AGENT_STDIO_DRAIN_S. */
bool agent_stdio_hold(local_task *lt, double now);

/* agent.c */
/* step: -1 for the rank's own task, else that step's task in the rank */
local_task *agent_find(ts_agent *a, int64_t job, int rank, int step);
/* CLOCK_REALTIME in seconds: the clock of time-limit deadlines. */
double agent_wall_now(void);

/* agent_task.c (agent_start_task_in: agent_start.c) */
/* Starts the task the desired state describes (t, decoded as d), as a new
 * local task; a start that fails is kept with its error, reported as
 * failed. */
void agent_start_task(ts_agent *a, json_t *t, const ts_desired_task *d);
/* The same for lt, already counted in a->tasks: with t decoded as d, or
 * (_in) decoding t, the copy kept while its prolog ran or its image came. */
void agent_start_task_decoded(ts_agent *a, local_task *lt, const json_t *t,
                              const ts_desired_task *d);
void agent_start_task_in(ts_agent *a, local_task *lt, json_t *t);
/* cutoff.c: how long without a controller before this node's tasks must
 * stop (--lost-after, or half the controller's node_lost_after); a
 * controller answered (last_ok_s, and the keepers' deadline file); after an
 * exchange (rc its result): the tasks stopped, and kept, where none answered
 * for that long. */
double agent_lost_limit(const ts_agent *a);
/* Which agent this is, the same across its restarts: the machine (its
 * /etc/machine-id, else its host name) and the state directory's device and
 * inode, into out ("" when the directory cannot be read). */
void agent_identity(const char *state_dir, char *out, size_t size);
void agent_heard_from_controller(ts_agent *a);
void agent_cut_off_check(ts_agent *a, int rc);

/* agent_task_records callback: adopts one task an earlier agent left. */
int agent_adopt_one(const char *id, void *ctx);
/* Makes each MIG GPU hold its desired layout (a->mig_error: the first error). */
void agent_apply_mig(ts_agent *a, const ts_desired *d);
/* Reads the output the controller asks for into a->log_answers. */
void agent_answer_logs(ts_agent *a, const ts_desired *d);
/* Stops MPS daemons no running fractional task uses. */
void agent_mps_tidy(ts_agent *a);
/* Tells /metrics which task runs where. */
void agent_tell_metrics(ts_agent *a);
/* Removes a forgotten task's shim ledger. */
void agent_ledger_remove(const ts_agent *a, const local_task *lt);
/* The median of a task's last step times (its step file, owned by owner);
 * -1 when none. */
double agent_step_median(const char *path, uid_t owner);
/* Removes a forgotten task's step file while it is still the agent's. */
void agent_step_file_remove(const local_task *lt);
/* A fractional task whose shim has not written its mark by shim_due is
 * stopped (SIGKILL) and will end `shim_not_loaded`; a written mark ends the
 * watch. Called with the time limits. */
void agent_shim_check(ts_agent *a, local_task *lt, double now);
/* A forgotten task's shim mark goes with it. */
void agent_shim_mark_remove(const local_task *lt);
/* agent_http.c: POST body to path, *answer the parsed JSON (the caller's);
 * with wake, a running task's end ends the wait early: AGENT_POST_WOKEN,
 * nothing answered. agent_keeper_fd_close closes a task's keeper pidfd
 * for good. agent_progress (agent.c) keeps time while a request waits. */
#define AGENT_POST_WOKEN 1
int agent_post_woken(ts_agent *a, const char *path, json_t *body, long *status, json_t **answer,
                     double timeout_s, bool wake, ts_err *err);
int agent_post(ts_agent *a, const char *path, json_t *body, long *status, json_t **answer,
               double timeout_s, ts_err *err);
void agent_keeper_fd_close(local_task *lt);
int agent_progress(void *u, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                   curl_off_t ulnow);

/* What each of the agent's calls to a peer, a tracker or a registry sets
 * alike (agent_http.c), after a curl_easy_reset: the url, its headers, the
 * answer into write(data), no signals (the agent's threads share the
 * process), the protocols it may speak ("http", "http,https") and, where
 * ca_file is set (not NULL nor ""), the CA it trusts. */
void agent_curl_call(CURL *c, const char *url, struct curl_slist *h, curl_write_callback write,
                     void *data, const char *protocols, const char *ca_file);
/* Removes the task files no adopted task holds from the steps folder an
 * older agent shared between its tasks, then the folder once empty (at
 * start; tasks' files are in their own folders now). */
void agent_steps_sweep(const ts_agent *a);
/* The name of a fractional task's ledger (the shim's, in TS_SHIM_LEDGER_DIR). */
const char *agent_ledger_name(const local_task *lt);
/* An ended task's last output: text[0] its stdout's tail, text[1] its
 * stderr's, each malloc'd by the call (the caller frees), NULL when empty
 * or unreadable. */
void agent_task_output(const local_task *lt, char *text[2]);

/* hooks.c: the site's prolog and epilog */
/* When a prolog is configured and has not run for lt: starts it, or queues
 * it while every hook slot is taken, keeping a copy of t (decoded as d; the
 * start goes on once it succeeded), or fails lt's launch; true. False: no
 * prolog, start lt now. */
bool agent_prolog_begin(ts_agent *a, local_task *lt, const json_t *t, const ts_desired_task *d);
/* Starts the epilog of a task that ended (once per task; none configured:
 * nothing). */
void agent_epilog_begin(ts_agent *a, local_task *lt);
/* Starts one hook; false (said in the log) when it could not start. */
bool agent_hook_start(ts_agent *a, bool prolog, int64_t job, int rank, const char *user,
                         long long uid, const int *gpus, int ngpu, int exit_code);
/* At the agent's start: the epilogs that waited for a slot when the last
 * agent stopped (<state_dir>/epilogs) start, or wait again. */
void agent_epilogs_restore(ts_agent *a);
/* Reaps ended hooks, kills those past their deadline, and acts on each end. */
void agent_hooks_poll(ts_agent *a, double now);
/* Asks the controller to drain this node (the first reason stands). */
void agent_hook_drain(ts_agent *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* agent_image.c */
/* True when t (decoded as d) names an image or data: lt then waits for
 * them (its pull begun, a copy of t kept without the credentials), or
 * failed at once (lt->start_error). False: a bare task, start it. */
bool agent_image_wait(ts_agent *a, local_task *lt, const json_t *t, const ts_desired_task *d);
/* Starts the tasks whose image arrived, fails those whose image is unknown
 * or bad, retries the pulls the registry failed. */
void agent_images_poll(ts_agent *a, double now);
/* The task is forgotten: its pull abandoned, its image released, its
 * bundle removed. */
void agent_image_forget(ts_agent *a, local_task *lt);
/* The desired state's prefetch list ([{job, image}], NULL: none): each image
 * is pulled once into the store, below PREFETCH_RATE_BYTES_S, with no user
 * (a task that later needs it finds it there); one no longer listed is
 * abandoned if still coming (agent_image.c). */
void agent_prefetch_apply(ts_agent *a, const ts_desired *d);
/* The prefetches listed now and how each goes, into out (room for every
 * slot of a->prefetch); how many. */
int agent_prefetch_report(const ts_agent *a, ts_sync_prefetch *out);

/* agent_data.c: a job's read-only data images (docs/images.md "Model
 * weights and data sets"). */
/* Reads d's data into lt (refs into refs, at most TS_AGENT_DATA_MAX); false
 * with why when one is malformed. */
bool agent_data_read(local_task *lt, const ts_desired_task *d, ts_image_ref *refs, char *why,
                     size_t n);
/* TESSERA_DATA_<i> for each: the path in the container, or the node's
 * read-only copy for a bare task. */
void agent_data_env(const local_task *lt, json_t *envj);
/* A container task's read-only binds of its data; returns how many were put. */
size_t agent_data_binds(const local_task *lt, ts_bundle_mount *binds, size_t room);
/* Registers the task as a user of each data image; why on failure. */
void agent_data_use(ts_agent *a, const local_task *lt, const char *id, char *why, size_t n);
/* Its data digests into / out of the task record's meta (adoption). */
void agent_data_meta_put(const local_task *lt, json_t *meta);
void agent_data_meta_get(local_task *lt, json_t *meta);
/* container_extras.c (docs/images.md "Checkpoints", "srun in an image").
 * The job's checkpoint folder dir (<root>/<tenant>/<job>, as the controller
 * named it), made when missing (the job's own folder for uid:gid), and fit
 * to bind into a container: no other user can swap a link into its path;
 * false with why otherwise. */
bool agent_checkpoint_folder(const char *dir, uid_t uid, gid_t gid, char *why, size_t n);
/* A job mount's host folder host, opened (O_PATH) one component at a time
 * without following a link: a user who may write under a root its tenant
 * may mount could otherwise put a link there to any folder of the node,
 * which the controller, checking the path as text, cannot see. Returns the
 * descriptor (close-on-exec), or -1 with why, which starts with field. */
int agent_mount_source_open(const char *field, const char *host, char *why, size_t n);
#define AGENT_MOUNT_PINS_MAX 16 /* a job spec's mounts (TS_SPEC_MAX_MOUNTS) */
/* Binds the folder fd (agent_mount_source_open's) at
 * /run/tessera-agent/mounts-<hash of state_dir>/<task>/<i>, a path only
 * root reaches and outside the state folder, for the runtime
 * to bind from: the folder checked, whatever its path holds later (the
 * runtime mounts in a namespace of its own, where a descriptor of the
 * agent's cannot be bound). Its path into out; false with why. */
bool agent_mount_pin(const char *state_dir, const char *task, int i, int fd, char *out,
                     size_t n, char *why, size_t wn);
/* Unmounts and removes the task's pins (never recursively). */
void agent_mount_unpin(const char *state_dir, const char *task);
/* Unpins the tasks no record adopted (ended while no agent ran). */
void agent_mount_pins_sweep(const ts_agent *a);
/* Makes slurm_dir/kit afresh: a copy of the tessera CLI cli, its libraries
 * and the node's loader, and an srun that runs them from slurm_dir, where
 * the kit is bound in a container; its path into kit. 0, or a negative
 * error with err filled (a container then has no srun). */
int agent_srun_kit_install(const char *slurm_dir, const char *cli, char *kit, size_t kit_len,
                              ts_err *err);
/* agent_image.c: who a container task is inside its image (its job's
 * `user`: "image" or "uid[:gid]"), as "uid:gid" into out, within the
 * tenant's rules the task carries (uid, allow_root, uid_range); out ""
 * when the job names none; why when refused. */
void agent_container_user(const local_task *lt, const ts_desired_task *d, char *out, size_t n,
                          char *why, size_t wn);
/* Releases each data image (the task is forgotten). */
void agent_data_release(ts_agent *a, local_task *lt, const char *id);

/* task_secrets.c: a starting task's secrets (d->secrets): variables
 * appended to envj, files written to its private folder (named in envj as
 * TESSERA_SECRETS_DIR). False, and why, when they could not be given (the
 * task must not start without them; d->secrets_error: the controller could
 * not give one). */
bool agent_secrets_put(const ts_agent *a, const local_task *lt, const ts_desired_task *d,
                       json_t *envj, char *why, size_t wsize);
/* Removes the task's secrets folder (the agent is done with the task). */
void agent_secrets_remove(const ts_agent *a, int64_t job, int rank);
/* At start, after adoption: removes the folders of tasks not adopted. */
void agent_secrets_sweep(const ts_agent *a);

#endif
