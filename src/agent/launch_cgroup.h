/*
 * launch_cgroup.h - the cgroup side of launching a task (internal to the
 * launcher): finding where the agent may create per-task cgroups, one cgroup
 * per task with CPU, memory and pids limits and a GPU device allow-list, the
 * task's end (kill everything in it, count its OOM kills) and removal.
 *
 * Two kernels' interfaces behind one set of calls. cgroup v2 (one directory:
 * cpu.max, memory.max, pids.max, a BPF device program) is used where it is
 * usable; otherwise the cgroup v1 hierarchies (launch_cgroup_v1.c): the task
 * gets the same cgroup path in the memory, cpu, cpuacct, pids, devices and
 * freezer hierarchies. A task's cgroup is therefore a ts_cg_dirs, one
 * directory per hierarchy, resolved from the path its info records.
 *
 * Probe and create report failure as text in a caller buffer, because the
 * launcher turns most of them into "isolated=false, because ..." rather than
 * into errors. The calls marked async-signal-safe only make system calls:
 * the keeper (a fork of the agent that never execs) uses them.
 */
#ifndef TS_AGENT_LAUNCH_CGROUP_H
#define TS_AGENT_LAUNCH_CGROUP_H

#include <stdbool.h>
#include <stddef.h>

#include "launch.h"

#define TS_NVIDIA_GPU_MAJOR 195u
#define TS_NVIDIA_GPU_MINOR_END 254u /* 254 nvidia-modeset, 255 nvidiactl: shared */
#define TS_CG_PATH_MAX 768           /* = sizeof ts_task_info.cgroup_path */
#define TS_CG_CPU_PERIOD_US 100000LL /* the CPU quota is per 100 ms */
/* FNV-1a 64: the names an agent scopes to itself (its cgroup, its containers) */
#define FNV64_OFFSET 0xcbf29ce484222325ULL
#define FNV64_PRIME 0x100000001b3ULL
#define TS_CG_CPU_QUOTA_MIN_US 1000LL /* the kernel refuses smaller quotas */

/* The v1 controllers a task joins (in v2 one directory has them all). */
enum ts_cg_ctl { TS_CG_MEMORY, TS_CG_CPU, TS_CG_CPUACCT, TS_CG_PIDS, TS_CG_DEVICES,
                 TS_CG_FREEZER, TS_CG_NCTL };

/* A task's cgroup directories: v2 one, v1 one per mounted hierarchy
 * (co-mounted controllers, e.g. cpu,cpuacct, share one). */
typedef struct ts_cg_dirs {
    bool v1;
    int n;                               /* 0: no cgroup */
    char dir[TS_CG_NCTL][TS_CG_PATH_MAX];
    int at[TS_CG_NCTL];                  /* v1: dir index of each controller, -1 none */
} ts_cg_dirs;

/* Probe for a usable parent (see agent_launch_probe): cgroup v2 first, then v1. */
void agent_cg_probe(const char *parent, ts_launch_caps *caps);

/* Creates the task's cgroup with the spec's limits (v1: in each hierarchy,
 * under <parent>/agent-<hash of the record directory>, so two agents of one
 * host never meet); path gets what the task's info records, dirs the
 * directories. Returns 0, or -1 with why filled (nothing left behind). */
int agent_cg_create(const ts_launch_caps *caps, const ts_task_spec *spec, char *path,
                 size_t path_len, ts_cg_dirs *dirs, char *why, size_t why_len);

/* The directories of a recorded cgroup (v1: looked up in this process's
 * mounts). 0, or -1 when a v1 hierarchy cannot be found (dirs->n then 0). */
int agent_cg_dirs_of(const char *path, bool v1, ts_cg_dirs *dirs);

/* Allows the task only the standard device nodes and, of the NVIDIA GPU
 * nodes, its own (v2: a BPF program denying other GPUs; v1: devices.deny
 * "a", then devices.allow entries). 0 or -1 + why. */
int agent_cg_limit_devices(const ts_cg_dirs *d, const ts_devnum *devs, size_t ndev, char *why,
                        size_t why_len);

/* SIGKILL to every process in the cgroup, including those that left the
 * task's session: cgroup.kill (v2, where the kernel has it), v1 freezes the
 * freezer cgroup first so nothing forks while it is emptied, then thaws it.
 * Async-signal-safe. */
void agent_cg_kill(const ts_cg_dirs *d);

/* How many of its processes the kernel's OOM killer ended: "oom_kill" of
 * memory.events (v2) or memory.oom_control (v1); 0 when unknown.
 * Async-signal-safe. */
long long agent_cg_oom_kills(const ts_cg_dirs *d);

/* Removes the cgroup's directories (and, v1, the agent's parent directory
 * when that was the last task); 0 when none is left, or -1 with errno (EBUSY
 * while processes linger). Async-signal-safe. */
int agent_cg_remove(const ts_cg_dirs *d);

/* ---- between launch_cgroup.c and launch_cgroup_v1.c --------------------------- */

void agent_cg1_probe(const char *parent, ts_launch_caps *caps, char *why, size_t why_len);
int agent_cg1_create(const ts_launch_caps *caps, const ts_task_spec *spec, char *path,
                  size_t path_len, ts_cg_dirs *dirs, char *why, size_t why_len);
int agent_cg1_limit_devices(const ts_cg_dirs *d, const ts_devnum *devs, size_t ndev, char *why,
                         size_t why_len);
void agent_cg1_kill(const ts_cg_dirs *d);
int agent_cg1_dirs(const char *path, ts_cg_dirs *dirs); /* dirs zeroed, at[] -1 */

/* Async-signal-safe helpers: 0, or -1 with errno. */
int agent_cg_write(const char *dir, const char *file, const char *text);
int agent_cg_read(const char *dir, const char *file, char *buf, size_t len);
void agent_cg_kill_listed(const char *dir);  /* SIGKILL to each pid of dir/cgroup.procs */

/* snprintf for reasons and names, where cutting a long one short is fine
 * (launch.c and the cgroup files share it). */
void agent_say(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
