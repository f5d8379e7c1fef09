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

/* ---- the registration's discovery --------------------------------------------- */

/* The members every discovered GPU carries. */
#define GPU_ALWAYS                                                                            \
    (TS_DG_BIT(TS_DG_INDEX) | TS_DG_BIT(TS_DG_UUID) | TS_DG_BIT(TS_DG_NAME) |                 \
     TS_DG_BIT(TS_DG_MEMORY_BYTES) | TS_DG_BIT(TS_DG_PCI_BUS_ID) | TS_DG_BIT(TS_DG_NVLINKS))

static int gpu_doc(const ts_gpu_desc *g, ts_disc_gpu *o)
{
    const ts_gpu_model_info *mi = ts_gpu_model_get(g->model);
    *o = (ts_disc_gpu){.index = g->index, .uuid = g->uuid, .name = g->name,
                       .model = mi ? mi->name : NULL, .memory_bytes = (int64_t)g->mem_total_bytes,
                       .pci_bus_id = g->bus_id, .error = g->error};
    /* an unmapped model is left out (the schema's model is a string) */
    o->present = GPU_ALWAYS | (mi ? TS_DG_BIT(TS_DG_MODEL) : 0) |
                 (g->mig_capable ? TS_DG_BIT(TS_DG_MIG) : 0) |
                 (g->error[0] ? TS_DG_BIT(TS_DG_ERROR) : 0);
    o->nvlinks = g->nlinks ? calloc((size_t)g->nlinks, sizeof *o->nvlinks) : NULL;
    o->mig.instances = g->ngi ? calloc((size_t)g->ngi, sizeof *o->mig.instances) : NULL;
    if ((g->nlinks && !o->nvlinks) || (g->ngi && !o->mig.instances))
        return -1; /* what was made is freed with the whole */
    o->nnvlinks = g->nlinks;
    for (int l = 0; l < g->nlinks; l++)
        o->nvlinks[l] = (ts_disc_nvlink){
            .link = g->link[l].link, .up = g->link[l].up,
            .remote_pci_bus_id = g->link[l].remote_bus_id,
            .remote_type = g->link[l].remote_is_switch ? TS_REMOTE_SWITCH : TS_REMOTE_GPU};
    o->mig.enabled = g->mig_enabled;
    o->mig.pending = g->mig_pending;
    o->mig.ninstances = g->ngi;
    for (int i = 0; i < g->ngi; i++) {
        const ts_mig_gi_desc *d = &g->gi[i];
        ts_disc_gi *gi = &o->mig.instances[i];
        *gi = (ts_disc_gi){.gpu_instance_id = d->id, .profile_id = d->profile_id,
                           .placement = {d->start, d->size}};
        if (d->nci && !(gi->cis = calloc((size_t)d->nci, sizeof *gi->cis)))
            return -1;
        gi->ncis = d->nci;
        for (int c = 0; c < d->nci; c++)
            gi->cis[c] = (ts_disc_ci){.id = d->ci[c].id, .profile_id = d->ci[c].profile_id,
                                      .placement = {d->ci[c].start, d->ci[c].size},
                                      .uuid = d->ci[c].uuid};
    }
    return 0;
}

int agent_discover_doc(const ts_node_desc *d, ts_discovery *out)
{
    int n = d->ngpus;
    *out = (ts_discovery){
        .present = TS_DC_BIT(TS_DC_CPUS) | TS_DC_BIT(TS_DC_MEMORY_BYTES) |
                   TS_DC_BIT(TS_DC_DRIVER_VERSION) | TS_DC_BIT(TS_DC_GPUS) |
                   TS_DC_BIT(TS_DC_TOPOLOGY),
        .cpus = d->cpus,
        .memory_bytes = (int64_t)d->mem_total_bytes,
        .driver_version = d->driver_version,
        .gpus = n ? calloc((size_t)n, sizeof *out->gpus) : NULL,
        .topology = n ? calloc((size_t)n, sizeof *out->topology) : NULL};
    int rc = n && (!out->gpus || !out->topology) ? -1 : 0;
    for (int i = 0; rc == 0 && i < n; i++) {
        out->ngpus = out->ntopology = i + 1;
        rc = gpu_doc(&d->gpu[i], &out->gpus[i]);
        ts_strv *row = &out->topology[i];
        if (rc == 0 && !(row->v = calloc((size_t)n, sizeof *row->v)))
            rc = -1;
        for (int j = 0; rc == 0 && j < n; j++)
            row->v[j] = agent_nvml_topo_name(d->topo[i][j]);
        row->n = rc == 0 ? n : 0;
    }
    if (rc != 0)
        ts_discovery_fini(out);
    return rc;
}

json_t *agent_discover_json(const ts_node_desc *d)
{
    ts_discovery doc;
    if (agent_discover_doc(d, &doc) != 0)
        return NULL;
    json_t *j = ts_discovery_encode(&doc);
    ts_discovery_fini(&doc);
    return j;
}
