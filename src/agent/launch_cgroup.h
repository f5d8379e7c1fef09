/*
 * launch_cgroup.h - the cgroup v2 side of launching a task (internal to the
 * launcher): finding a hierarchy the agent may create children in, one cgroup
 * per task with cpu.max / memory.max / pids.max, a BPF device allow-list, and
 * removal. Every function reports failure as text in a caller buffer, because
 * the launcher turns most of them into "isolated=false, because ..." rather
 * than into errors.
 */
#ifndef TS_AGENT_LAUNCH_CGROUP_H
#define TS_AGENT_LAUNCH_CGROUP_H

#include <stddef.h>

#include "launch.h"

#define TS_NVIDIA_GPU_MAJOR 195u
#define TS_NVIDIA_GPU_MINOR_END 254u /* 254 nvidia-modeset, 255 nvidiactl: shared */

/* Probe for a usable parent (see ts_launch_probe). */
void ts_cg_probe(const char *parent, ts_launch_caps *caps);

/* Creates <parent>/tessera-<task_id> with the spec's limits; path gets the
 * directory. Returns 0, or -1 with why filled. */
int ts_cg_create(const ts_launch_caps *caps, const ts_task_spec *spec, char *path,
                 size_t path_len, char *why, size_t why_len);

/* Attaches the GPU allow-list program to the cgroup at path. 0 or -1 + why. */
int ts_cg_limit_devices(const char *path, const ts_devnum *devs, size_t ndev, char *why,
                        size_t why_len);

/* Kills every process in the cgroup (cgroup.kill where the kernel has it). */
void ts_cg_kill(const char *path);

/* Removes the cgroup; 0, or -1 with errno set (EBUSY while processes linger). */
int ts_cg_remove(const char *path);

#endif
