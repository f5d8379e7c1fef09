/*
 * cdi.h - the node's GPUs as CDI devices (Container Device Interface,
 * cdiVersion 0.6.0, kind nvidia.com/gpu), written from discovery and used
 * for a container task's config.json (docs/images.md "GPUs in a container").
 *
 * agent_cdi_spec builds the specification: a device per GPU (named by its
 * NVML index, "0") and per MIG GPU instance ("0:2", GPU index and GI id),
 * each with its device nodes and its NVIDIA_VISIBLE_DEVICES /
 * CUDA_VISIBLE_DEVICES; the spec-wide edits hold the control nodes
 * (/dev/nvidiactl, /dev/nvidia-uvm, /dev/nvidia-uvm-tools) and read-only
 * binds of the driver libraries found on the host (libcuda.so.*,
 * libnvidia-ml.so.*). Device numbers come from the nodes under the dev root;
 * a GPU's node absent there keeps the driver's fixed major (195) and its
 * minor, other absent nodes are left out. agent_cdi_edits merges the
 * spec-wide edits with those of the named devices: what one task gets.
 * Returned json_t are the caller's (json_decref). Thread-safe: no state.
 */
#ifndef TS_AGENT_CDI_H
#define TS_AGENT_CDI_H

#include <jansson.h>

#include "agent/discover.h"
#include "tessera/error.h"

#define AGENT_CDI_VERSION "0.6.0"
#define AGENT_CDI_KIND "nvidia.com/gpu"
/* the node's dedicated network devices (docs/network.md "Dedicated NICs"):
 * netDevices came with CDI 1.1 */
#define AGENT_CDI_NET_VERSION "1.1.0"
#define AGENT_CDI_NET_KIND "tessera.io/net"

typedef struct agent_cdi_opts {
    const char *dev_root;        /* NULL or "": "/" (device nodes under <root>/dev) */
    const char *proc_root;       /* NULL: "/proc" (driver/nvidia/gpus, nvidia-caps) */
    const char *const *lib_dirs; /* NULL: the usual library folders of x86_64 */
} agent_cdi_opts;

/* The spec for the node (caller json_decref's it). TS_ENOMEM only. */
int agent_cdi_spec(const ts_node_desc *d, const agent_cdi_opts *o, json_t **out, ts_err *err);

/* Writes spec to path (its folder created, written whole then renamed). */
int agent_cdi_write(const json_t *spec, const char *path, ts_err *err);

/* The node's dedicated network devices as a CDI 1.1 spec (kind
 * AGENT_CDI_NET_KIND): a device per host interface name (a VF or rail NIC,
 * agent_nics_netdev), whose containerEdits.netDevices moves it into the
 * container's network namespace under the same name. Names must be 1..15
 * bytes without '/' or blanks (TS_EINVAL naming the one that is not); the
 * caller json_decref's *out. */
int agent_cdi_net_spec(const char *const *ifnames, size_t n, json_t **out, ts_err *err);

/* The spec-wide containerEdits plus those of each named device, env values
 * of one variable joined with commas ("uuid-a,uuid-b"), and the devices'
 * netDevices (CDI 1.1) under "netDevices" when they have some. TS_ENOENT
 * naming a device the spec lacks. */
int agent_cdi_edits(const json_t *spec, const char *const *names, size_t n, json_t **out,
                    ts_err *err);

/* The /dev/nvidia<N> minor of the GPU at PCI bus_id: the driver's "Device
 * Minor" under proc_root (NULL: /proc), else index, its NVML index (what
 * the driver assigns when GPUs are numbered in PCI order: tests, the fake
 * NVML). Also the agent's device filter for a task's GPUs (agent_start.c). */
unsigned agent_gpu_minor(const char *proc_root, const char *bus_id, unsigned index);

#endif
