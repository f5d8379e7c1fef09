/*
 * discover.c - read the node's GPUs and host through NVML into ts_node_desc.
 *
 * Follows gpu-facts.md 7 "Inventory" and the NVLink/topology recipe of 1.4:
 * identity and memory per GPU; links from 0 upwards until NVML rejects the
 * link number (NVML_NVLINK_MAX_LINKS changed three times, so no constant is
 * trusted); pairwise nvmlDeviceGetTopologyCommonAncestor; and for MIG GPUs
 * the GPU instances (enumerating profile indices until INVALID_ARGUMENT, as
 * the profile count grows per release), their compute instances, and the
 * MIG device handles that carry the CI UUIDs CUDA_VISIBLE_DEVICES needs.
 */
#include "agent/discover.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tessera/model.h"

#define PROFILE_INDEX_LIMIT 64 /* a guard, not a limit: NVML ends the walk first */
#define BYTES_PER_KIB 1024ULL

/* ---- model mapping (docs/agent-health.md "Model mapping") ---------------------------- */

/* PCI device ids from gpu-facts.md 2.4-2.7 are exact; names vary by board
 * and driver, so they are the fallback. */
static const struct {
    unsigned pci_device_id;
    const char *model;
} model_by_pci[] = {
    {0x20B010DE, "A100-40GB"},  /* A100-SXM4-40GB */
    {0x20F110DE, "A100-40GB"},  /* A100-PCIE-40GB */
    {0x20B210DE, "A100-80GB"},  /* A100-SXM4-80GB */
    {0x20B510DE, "A100-80GB"},  /* A100-PCIE-80GB */
    {0x233010DE, "H100-80GB"},  /* H100 80GB HBM3 (SXM5) */
    {0x233510DE, "H200-141GB"}, /* H200 SXM */
    {0x233B10DE, "H200-141GB"}, /* H200 NVL */
};

static const struct {
    const char *nvml_name;
    const char *model;
} model_by_name[] = {
    {"NVIDIA A100-SXM4-40GB", "A100-40GB"},
    {"NVIDIA A100-PCIE-40GB", "A100-40GB"},
    {"NVIDIA A100-SXM4-80GB", "A100-80GB"},
    {"NVIDIA A100 80GB PCIe", "A100-80GB"},
    {"NVIDIA H100 80GB HBM3", "H100-80GB"},
    {"NVIDIA H200", "H200-141GB"},
    {"NVIDIA H200 NVL", "H200-141GB"},
    {"NVIDIA A10", "A10"},
    {"Tesla T4", "T4"},
    {"Tesla P100-PCIE-16GB", "P100"},
    {"Tesla V100-SXM2-16GB", "V100M16"},
    {"Tesla V100-PCIE-16GB", "V100M16"},
    {"Tesla V100-SXM2-32GB", "V100M32"},
    {"Tesla V100-PCIE-32GB", "V100M32"},
};

int agent_discover_model(const char *nvml_name, unsigned pci_device_id)
{
    for (size_t i = 0; i < sizeof model_by_pci / sizeof model_by_pci[0]; i++)
        if (model_by_pci[i].pci_device_id == pci_device_id)
            return ts_gpu_model_lookup(model_by_pci[i].model);
    for (size_t i = 0; nvml_name && i < sizeof model_by_name / sizeof model_by_name[0]; i++)
        if (strcmp(model_by_name[i].nvml_name, nvml_name) == 0)
            return ts_gpu_model_lookup(model_by_name[i].model);
    return -1;
}

const char *agent_nvml_topo_name(int level)
{
    switch (level) {
    case NVML_TOPOLOGY_INTERNAL: return "X";
    case NVML_TOPOLOGY_SINGLE: return "PIX";
    case NVML_TOPOLOGY_MULTIPLE: return "PXB";
    case NVML_TOPOLOGY_HOSTBRIDGE: return "PHB";
    case NVML_TOPOLOGY_NODE: return "NODE";
    case NVML_TOPOLOGY_SYSTEM: return "SYS";
    default: return "?";
    }
}

/* ---- host --------------------------------------------------------------- */

int agent_discover_host(const char *meminfo_path, long *cpus, uint64_t *mem_bytes, ts_err *err)
{
    const char *path = meminfo_path ? meminfo_path : "/proc/meminfo";
    *cpus = sysconf(_SC_NPROCESSORS_ONLN);
    *mem_bytes = 0;
    if (*cpus < 1)
        return ts_err_set(err, TS_EIO, "host: sysconf(_SC_NPROCESSORS_ONLN) gave %ld", *cpus);
    FILE *f = fopen(path, "r");
    if (!f)
        return ts_err_set(err, TS_EIO, "host: cannot open %s", path);
    char line[256];
    unsigned long long kib = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemTotal: %llu kB", &kib) == 1)
            break;
    fclose(f);
    if (kib == 0)
        return ts_err_set(err, TS_EIO, "host: %s has no MemTotal line", path);
    *mem_bytes = kib * BYTES_PER_KIB;
    return 0;
}

/* ---- one GPU ------------------------------------------------------------ */

static void read_links(ts_nvml *nv, nvmlDevice_t dev, ts_gpu_desc *g)
{
    if (!nv->DeviceGetNvLinkState)
        return;
    for (unsigned l = 0; l < TS_DISC_MAX_LINKS; l++) {
        nvmlEnableState_t st;
        if (nv->DeviceGetNvLinkState(dev, l, &st) != NVML_SUCCESS)
            break; /* NOT_SUPPORTED at 0: no NVLink; INVALID_ARGUMENT: past the last */
        ts_nvlink_desc *d = &g->link[g->nlinks++];
        d->link = l;
        d->up = st == NVML_FEATURE_ENABLED;
        nvmlIntNvLinkDeviceType_t type;
        if (nv->DeviceGetNvLinkRemoteDeviceType &&
            nv->DeviceGetNvLinkRemoteDeviceType(dev, l, &type) == NVML_SUCCESS)
            d->remote_is_switch = type == NVML_NVLINK_DEVICE_TYPE_SWITCH;
        nvmlPciInfo_t pci;
        if (nv->DeviceGetNvLinkRemotePciInfo &&
            nv->DeviceGetNvLinkRemotePciInfo(dev, l, &pci) == NVML_SUCCESS)
            snprintf(d->remote_bus_id, sizeof d->remote_bus_id, "%s",
                     agent_nvml_is_fallback(nv, TS_NVML_FN_DeviceGetNvLinkRemotePciInfo)
                         ? pci.busIdLegacy
                         : pci.busId);
    }
}

static int cmp_gi(const void *a, const void *b)
{
    const ts_mig_gi_desc *x = a, *y = b;
    return (x->id > y->id) - (x->id < y->id);
}

static void read_cis(ts_nvml *nv, nvmlGpuInstance_t gi, ts_mig_gi_desc *d)
{
    if (!nv->GpuInstanceGetComputeInstanceProfileInfo || !nv->GpuInstanceGetComputeInstances ||
        !nv->ComputeInstanceGetInfo)
        return;
    for (unsigned idx = 0; idx < PROFILE_INDEX_LIMIT; idx++) {
        nvmlComputeInstanceProfileInfo_t info;
        nvmlReturn_t r = nv->GpuInstanceGetComputeInstanceProfileInfo(
            gi, idx, NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED, &info);
        if (r == NVML_ERROR_INVALID_ARGUMENT)
            break;
        if (r != NVML_SUCCESS)
            continue;
        nvmlComputeInstance_t cis[TS_DISC_MAX_CI];
        unsigned n = TS_DISC_MAX_CI;
        if (nv->GpuInstanceGetComputeInstances(gi, info.id, cis, &n) != NVML_SUCCESS)
            continue;
        for (unsigned i = 0; i < n && d->nci < TS_DISC_MAX_CI; i++) {
            nvmlComputeInstanceInfo_t ci;
            if (nv->ComputeInstanceGetInfo(cis[i], &ci) != NVML_SUCCESS)
                continue;
            ts_mig_ci_desc *c = &d->ci[d->nci++];
            c->id = ci.id;
            c->profile_id = ci.profileId;
            c->start = ci.placement.start;
            c->size = ci.placement.size;
        }
    }
}

/* CI UUIDs live on the MIG device handles, matched by (GI id, CI id). */
static void read_mig_uuids(ts_nvml *nv, nvmlDevice_t dev, ts_gpu_desc *g)
{
    unsigned max = 0;
    if (!nv->DeviceGetMaxMigDeviceCount || !nv->DeviceGetMigDeviceHandleByIndex ||
        !nv->DeviceGetGpuInstanceId || !nv->DeviceGetComputeInstanceId ||
        nv->DeviceGetMaxMigDeviceCount(dev, &max) != NVML_SUCCESS)
        return;
    for (unsigned i = 0; i < max; i++) {
        nvmlDevice_t mig;
        unsigned gid, cid;
        if (nv->DeviceGetMigDeviceHandleByIndex(dev, i, &mig) != NVML_SUCCESS ||
            nv->DeviceGetGpuInstanceId(mig, &gid) != NVML_SUCCESS ||
            nv->DeviceGetComputeInstanceId(mig, &cid) != NVML_SUCCESS)
            continue;
        for (int a = 0; a < g->ngi; a++)
            for (int b = 0; g->gi[a].id == gid && b < g->gi[a].nci; b++)
                if (g->gi[a].ci[b].id == cid)
                    nv->DeviceGetUUID(mig, g->gi[a].ci[b].uuid, sizeof g->gi[a].ci[b].uuid);
    }
}

static void read_mig(ts_nvml *nv, nvmlDevice_t dev, ts_gpu_desc *g)
{
    unsigned cur, pend;
    if (!nv->DeviceGetMigMode || nv->DeviceGetMigMode(dev, &cur, &pend) != NVML_SUCCESS)
        return; /* NOT_SUPPORTED: not a MIG GPU */
    g->mig_capable = true;
    g->mig_enabled = cur == NVML_DEVICE_MIG_ENABLE;
    g->mig_pending = pend == NVML_DEVICE_MIG_ENABLE;
    if (!g->mig_enabled || !nv->DeviceGetGpuInstanceProfileInfo ||
        !nv->DeviceGetGpuInstances || !nv->GpuInstanceGetInfo)
        return;
    for (unsigned idx = 0; idx < PROFILE_INDEX_LIMIT; idx++) {
        nvmlGpuInstanceProfileInfo_t info;
        nvmlReturn_t r = nv->DeviceGetGpuInstanceProfileInfo(dev, idx, &info);
        if (r == NVML_ERROR_INVALID_ARGUMENT)
            break;
        if (r != NVML_SUCCESS)
            continue; /* this index is not a profile of this GPU */
        nvmlGpuInstance_t gis[TS_DISC_MAX_GI];
        unsigned n = TS_DISC_MAX_GI;
        if (nv->DeviceGetGpuInstances(dev, info.id, gis, &n) != NVML_SUCCESS)
            continue;
        for (unsigned i = 0; i < n && g->ngi < TS_DISC_MAX_GI; i++) {
            nvmlGpuInstanceInfo_t gi;
            if (nv->GpuInstanceGetInfo(gis[i], &gi) != NVML_SUCCESS)
                continue;
            ts_mig_gi_desc *d = &g->gi[g->ngi++];
            memset(d, 0, sizeof *d);
            d->id = gi.id;
            d->profile_id = gi.profileId;
            d->start = gi.placement.start;
            d->size = gi.placement.size;
            read_cis(nv, gis[i], d);
        }
    }
    qsort(g->gi, (size_t)g->ngi, sizeof g->gi[0], cmp_gi);
    read_mig_uuids(nv, dev, g);
}

/* Identity failures are per GPU: record and carry on (see discover.h). */
static void read_gpu(ts_nvml *nv, unsigned index, nvmlDevice_t *dev, ts_gpu_desc *g)
{
    g->index = index;
    g->model = -1;
    nvmlReturn_t r;
    const char *what = "nvmlDeviceGetHandleByIndex";
    nvmlDevice_t h;
    *dev = NULL; /* topology skips GPUs without a handle */
    if ((r = nv->DeviceGetHandleByIndex(index, &h)) != NVML_SUCCESS)
        goto fail;
    *dev = h;
    what = "nvmlDeviceGetUUID";
    if ((r = nv->DeviceGetUUID(*dev, g->uuid, sizeof g->uuid)) != NVML_SUCCESS)
        goto fail;
    what = "nvmlDeviceGetName";
    if ((r = nv->DeviceGetName(*dev, g->name, sizeof g->name)) != NVML_SUCCESS)
        goto fail;
    nvmlPciInfo_t pci;
    what = "nvmlDeviceGetPciInfo";
    if ((r = nv->DeviceGetPciInfo(*dev, &pci)) != NVML_SUCCESS)
        goto fail;
    /* v1's only bus id sits where v2+ keep the legacy one */
    snprintf(g->bus_id, sizeof g->bus_id, "%s",
             agent_nvml_is_fallback(nv, TS_NVML_FN_DeviceGetPciInfo) ? pci.busIdLegacy : pci.busId);
    g->pci_device_id = pci.pciDeviceId;
    g->model = agent_discover_model(g->name, g->pci_device_id);
    nvmlMemory_t mem;
    what = "nvmlDeviceGetMemoryInfo";
    if ((r = nv->DeviceGetMemoryInfo(*dev, &mem)) != NVML_SUCCESS)
        goto fail;
    g->mem_total_bytes = mem.total;
    read_links(nv, *dev, g);
    read_mig(nv, *dev, g);
    return;
fail:
    snprintf(g->error, sizeof g->error, "gpu %u: %s: %s", index, what, agent_nvml_strerror(nv, r));
}

int agent_discover(ts_nvml *nv, ts_node_desc *out, ts_err *err)
{
    memset(out, 0, sizeof *out);
    int rc = agent_discover_host(NULL, &out->cpus, &out->mem_total_bytes, err);
    if (rc != 0)
        return rc;
    if (!nv)
        return 0;
    if (nv->SystemGetDriverVersion)
        nv->SystemGetDriverVersion(out->driver_version, sizeof out->driver_version);
    unsigned n = 0;
    nvmlReturn_t r = nv->DeviceGetCount(&n);
    if (r != NVML_SUCCESS)
        return ts_err_set(err, TS_EIO, "nvmlDeviceGetCount: %s", agent_nvml_strerror(nv, r));
    if (n > TS_DISC_MAX_GPUS)
        return ts_err_set(err, TS_EINVAL, "node has %u GPUs, at most %d supported", n,
                          TS_DISC_MAX_GPUS);
    out->ngpus = (int)n;
    nvmlDevice_t devs[TS_DISC_MAX_GPUS];
    for (unsigned i = 0; i < n; i++)
        read_gpu(nv, i, &devs[i], &out->gpu[i]);
    for (unsigned i = 0; i < n; i++)
        for (unsigned j = 0; j < n; j++) {
            nvmlGpuTopologyLevel_t lvl;
            out->topo[i][j] = i == j ? NVML_TOPOLOGY_INTERNAL : TS_TOPO_UNKNOWN;
            if (i != j && devs[i] && devs[j] && nv->DeviceGetTopologyCommonAncestor &&
                nv->DeviceGetTopologyCommonAncestor(devs[i], devs[j], &lvl) == NVML_SUCCESS)
                out->topo[i][j] = (int)lvl;
        }
    return 0;
}

/* ---- JSON --------------------------------------------------------------- */

static json_t *placement_json(unsigned start, unsigned size)
{
    return json_pack("{s:I, s:I}", "start", (json_int_t)start, "size", (json_int_t)size);
}

static json_t *gpu_json(const ts_gpu_desc *g)
{
    const ts_gpu_model_info *mi = ts_gpu_model_get(g->model);
    json_t *links = json_array();
    for (int l = 0; l < g->nlinks; l++)
        json_array_append_new(links, json_pack("{s:I, s:b, s:s, s:s}", "link",
                                               (json_int_t)g->link[l].link, "up", g->link[l].up,
                                               "remote_pci_bus_id", g->link[l].remote_bus_id,
                                               "remote_type",
                                               g->link[l].remote_is_switch ? "switch" : "gpu"));
    json_t *gis = json_array();
    for (int i = 0; i < g->ngi; i++) {
        const ts_mig_gi_desc *d = &g->gi[i];
        json_t *cis = json_array();
        for (int c = 0; c < d->nci; c++)
            json_array_append_new(
                cis, json_pack("{s:I, s:I, s:o, s:s}", "id", (json_int_t)d->ci[c].id,
                               "profile_id", (json_int_t)d->ci[c].profile_id, "placement",
                               placement_json(d->ci[c].start, d->ci[c].size), "uuid",
                               d->ci[c].uuid));
        json_array_append_new(
            gis, json_pack("{s:I, s:I, s:o, s:o}", "gpu_instance_id", (json_int_t)d->id,
                           "profile_id", (json_int_t)d->profile_id, "placement",
                           placement_json(d->start, d->size), "compute_instances", cis));
    }
    json_t *j = json_pack("{s:I, s:s, s:s, s:s?, s:I, s:s, s:o}", "index", (json_int_t)g->index,
                          "uuid", g->uuid, "name", g->name, "model", mi ? mi->name : NULL,
                          "memory_bytes", (json_int_t)g->mem_total_bytes, "pci_bus_id",
                          g->bus_id, "nvlinks", links);
    if (j && g->mig_capable)
        json_object_set_new(j, "mig",
                            json_pack("{s:b, s:b, s:o}", "enabled", g->mig_enabled, "pending",
                                      g->mig_pending, "instances", gis));
    else
        json_decref(gis);
    if (j && g->error[0])
        json_object_set_new(j, "error", json_string(g->error));
    return j;
}

json_t *agent_discover_json(const ts_node_desc *d)
{
    json_t *gpus = json_array();
    json_t *topo = json_array();
    for (int i = 0; i < d->ngpus; i++) {
        json_array_append_new(gpus, gpu_json(&d->gpu[i]));
        json_t *row = json_array();
        for (int j = 0; j < d->ngpus; j++)
            json_array_append_new(row, json_string(agent_nvml_topo_name(d->topo[i][j])));
        json_array_append_new(topo, row);
    }
    return json_pack("{s:I, s:I, s:s, s:o, s:o}", "cpus", (json_int_t)d->cpus, "memory_bytes",
                     (json_int_t)d->mem_total_bytes, "driver_version", d->driver_version,
                     "gpus", gpus, "topology", topo);
}
