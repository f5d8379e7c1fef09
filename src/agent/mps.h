/*
 * mps.h - one CUDA MPS control daemon per MPS-shared GPU or MIG device.
 *
 * agent_mps_start runs `nvidia-cuda-mps-control -d` with CUDA_VISIBLE_DEVICES set
 * to the device's UUID and its own pipe and log directories
 * (<base>/<uuid>/pipe, <base>/<uuid>/log), waits (bounded) for the daemon's
 * nvidia-cuda-mps-control.pid in the pipe directory, then sets the defaults
 * future MPS servers get through the control client (the same binary without
 * -d, commands on its stdin; gpu-facts.md 4.2):
 *   set_default_active_thread_percentage <pct>
 *   set_default_device_pinned_mem_limit 0 <N>M|<N>G
 * Device 0 is the one device the daemon sees (its CUDA_VISIBLE_DEVICES names
 * one UUID). A daemon already running for that pipe directory (an agent
 * restart) is adopted, and the defaults are sent again. agent_mps_stop sends
 * `quit` and waits, bounded, for the daemon to exit; it reports, it does not
 * kill. Tasks sharing the device get CUDA_MPS_PIPE_DIRECTORY (and the log
 * directory) from the returned ts_mps_daemon. Docs: docs/agent-mig-mps.md.
 *
 * The daemon is not a child of the agent (it daemonises), so liveness is read
 * from the pid: kill(pid, 0), a zombie counts as gone, and on Linux
 * /proc/<pid>/cmdline must still name the binary (a recycled pid is not ours).
 * Ownership: everything is a plain value in caller-owned structs; strings in
 * ts_mps_config are borrowed for the call. Nothing prints. Thread-safe for
 * different devices; one device is driven by one thread at a time. Spawning
 * uses posix_spawn with an environment built before it, so it is safe in the
 * threaded agent; the client's stdin is filled before it starts, so a client
 * that exits early cannot raise SIGPIPE in the agent.
 */
#ifndef TS_AGENT_MPS_H
#define TS_AGENT_MPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tessera/error.h"

#define TS_MPS_CONTROL_BINARY "nvidia-cuda-mps-control"
#define TS_MPS_PID_FILE "nvidia-cuda-mps-control.pid"
#define TS_MPS_START_OUTPUT "tessera-mps-start.out" /* in the log dir: the launcher's output */
#define TS_MPS_WAIT_DEFAULT_MS 5000
#define TS_MPS_PATH_MAX 256
#define TS_MPS_UUID_MAX 96
#define TS_MPS_REPLY_MAX 512

typedef struct ts_mps_config {
    const char *binary;      /* a path, or a name looked up on PATH; NULL: the default */
    const char *base_dir;    /* required; created if missing */
    int thread_pct;          /* 1..100; 0: leave the daemon's default (100) */
    uint64_t pinned_mem_mib; /* per-client device memory limit; 0: none */
    int wait_ms;             /* bound on each wait; 0: TS_MPS_WAIT_DEFAULT_MS */
} ts_mps_config;

typedef struct ts_mps_daemon {
    char uuid[TS_MPS_UUID_MAX];       /* GPU-... or MIG-... */
    char binary[TS_MPS_PATH_MAX];     /* resolved path of nvidia-cuda-mps-control */
    char pipe_dir[TS_MPS_PATH_MAX];   /* CUDA_MPS_PIPE_DIRECTORY for the tasks */
    char log_dir[TS_MPS_PATH_MAX];    /* CUDA_MPS_LOG_DIRECTORY */
    long pid;                         /* the control daemon, from its pid file */
    bool adopted;                     /* it was already running */
    int wait_ms;
} ts_mps_daemon;

/* Starts (or adopts) the daemon for `uuid` and applies cfg's defaults.
 * Errors: TS_EINVAL bad uuid/config (the message names the field); TS_ENOENT
 * the binary is not found ("nvidia-cuda-mps-control: not found on PATH
 * (...)"); TS_EIO it could not start: the message names the binary and the
 * reason (its exit status and first line of output, or no pid file within the
 * wait), or a setting was refused (the daemon is then stopped again unless it
 * was adopted). */
int agent_mps_start(const ts_mps_config *cfg, const char *uuid, ts_mps_daemon *out, ts_err *err);

/* Runs the control client with one command line; reply gets its output
 * (may be NULL). TS_EIO when the client fails (exit status, output) or
 * exceeds the wait (it is then killed). */
int agent_mps_send(const ts_mps_daemon *d, const char *command, char *reply, size_t len,
                ts_err *err);

/* True while the daemon process lives. */
bool agent_mps_running(const ts_mps_daemon *d);

/* Sends quit and waits up to the daemon's wait for it to exit. Stopping a
 * daemon that already exited is success. TS_EIO: the client failed while the
 * daemon still runs, or it still runs after the wait ("still running N ms
 * after quit"); the caller decides whether to kill d->pid. */
int agent_mps_stop(ts_mps_daemon *d, ts_err *err);

#endif
