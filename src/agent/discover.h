/*
 * discover.h - what a node has: its GPUs (identity, memory, NVLink, PCIe
 * topology, MIG instances) and its host CPUs and memory, read once through
 * NVML when the agent starts and sent to the controller at registration.
 *
 * agent_discover fills a caller-owned ts_node_desc (a plain value, no pointers to
 * free). A GPU whose identity cannot be read (e.g. fallen off the bus) keeps
 * its slot with `error` set rather than failing the whole node: the controller
 * still learns the GPU exists and the health sampler reports why it is bad.
 * The NVML model name is mapped to the project's GPU model id (model.h) by PCI
 * device id first, then by exact name; the table is in discover.c and
 * docs/agent-health.md "Model mapping". Not thread-safe per desc; NVML calls are.
 */
#ifndef TS_AGENT_DISCOVER_H
#define TS_AGENT_DISCOVER_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "agent/nvml.h"
#include "tessera/agent_proto.h"
#include "tessera/error.h"

#define TS_DISC_MAX_GPUS 16
#define TS_DISC_MAX_LINKS 18 /* NVML 11.8-13.2; we stop at the first link NVML rejects */
#define TS_DISC_MAX_GI 7
#define TS_DISC_MAX_CI 7
#define TS_DISC_ERROR_MAX 160
#define TS_TOPO_UNKNOWN (-1)

typedef struct ts_nvlink_desc {
    unsigned link;
    bool up;
    bool remote_is_switch; /* NVSwitch: peers are found through P2P, not here */
    char remote_bus_id[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
} ts_nvlink_desc;

typedef struct ts_mig_ci_desc {
    unsigned id, profile_id;
    unsigned start, size; /* compute slices inside the GI */
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE]; /* "MIG-..." or "" if unseen */
} ts_mig_ci_desc;

typedef struct ts_mig_gi_desc {
    unsigned id, profile_id;
    unsigned start, size; /* memory slices 0..7 */
    int nci;
    ts_mig_ci_desc ci[TS_DISC_MAX_CI];
} ts_mig_gi_desc;

typedef struct ts_gpu_desc {
    unsigned index;
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE]; /* NVML's, e.g. "NVIDIA H100 80GB HBM3" */
    int model;                                  /* ts_gpu_model_lookup id, -1 if unmapped */
    uint64_t mem_total_bytes;
    char bus_id[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
    unsigned pci_device_id;
    int nlinks;
    ts_nvlink_desc link[TS_DISC_MAX_LINKS];
    bool mig_capable;
    bool mig_enabled, mig_pending;
    int ngi;
    ts_mig_gi_desc gi[TS_DISC_MAX_GI]; /* sorted by GI id */
    char error[TS_DISC_ERROR_MAX];     /* "" when the GPU was read fully */
} ts_gpu_desc;

typedef struct ts_node_desc {
    long cpus;
    uint64_t mem_total_bytes;
    char driver_version[80];
    int ngpus;
    ts_gpu_desc gpu[TS_DISC_MAX_GPUS];
    /* nvmlGpuTopologyLevel_t between GPU i and j (0 on the diagonal),
     * TS_TOPO_UNKNOWN where NVML could not say */
    int topo[TS_DISC_MAX_GPUS][TS_DISC_MAX_GPUS];
} ts_node_desc;

/* Reads the node. nv may be NULL (no NVML: host only, ngpus 0). Errors:
 * TS_EIO naming the call ("nvmlDeviceGetCount: Driver Not Loaded"), TS_EINVAL
 * when the node has more GPUs than TS_DISC_MAX_GPUS. */
int agent_discover(ts_nvml *nv, ts_node_desc *out, ts_err *err);

/* Host CPU count (online) and MemTotal of meminfo_path (NULL: /proc/meminfo). */
int agent_discover_host(const char *meminfo_path, long *cpus, uint64_t *mem_bytes, ts_err *err);

/* Project GPU model id for an NVML name and PCI device id (-1 if none). */
int agent_discover_model(const char *nvml_name, unsigned pci_device_id);

/* "X" (same GPU), "PIX", "PXB", "PHB", "NODE", "SYS" or "?" (nvidia-smi topo -m). */
const char *agent_nvml_topo_name(int level);

/* The registration's discovery (tessera/agent_proto.h), its strings
 * borrowed from desc (which must outlive it), its lists freed with
 * ts_discovery_fini. 0, -1 out of memory (nothing left allocated). */
int agent_discover_doc(const ts_node_desc *desc, ts_discovery *out);
/* The same as a JSON document (caller json_decref's it); NULL on ENOMEM. */
json_t *agent_discover_json(const ts_node_desc *desc);

#endif
