/*
 * discovery.c - the codec of a node's discovery (tessera/agent_proto.h; the
 * schema's $defs/discovery, $defs/gpu): what the agent found at start (CPUs,
 * memory, the driver, each GPU with its NVLinks and MIG instances, the
 * GPUs' topology) and what it was told (the underlay address, the RDMA
 * rails and their ports' GUIDs).
 *
 * One table a level (proto_table.h), in the order the agent writes the
 * members; a member the schema requires is refused when missing, so the
 * controller never reads a half discovery as a whole one. The topology is
 * the one member no kind fits: a list of lists of strings.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/proto_table.h"
#include "tessera/agent_proto.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

#define NLINES(t) ((int)(sizeof t / sizeof *t))

/* ---- the GPUs' parts --------------------------------------------------------------- */

static const proto_field PLACEMENT_FIELDS[] = {
    {"start", PK_I64, offsetof(ts_disc_placement, start), INT64_MIN, INT64_MAX},
    {"size", PK_I64, offsetof(ts_disc_placement, size), INT64_MIN, INT64_MAX},
};
#define PLACEMENT(T)                                                                          \
    .name = "placement", .kind = PK_SUB, .off = offsetof(T, placement), .lo = PROTO_ALL(2),   \
    .sub = PLACEMENT_FIELDS, .nsub = NLINES(PLACEMENT_FIELDS)

static const proto_field CI_FIELDS[] = {
    {"id", PK_I64, offsetof(ts_disc_ci, id), INT64_MIN, INT64_MAX},
    {"profile_id", PK_I64, offsetof(ts_disc_ci, profile_id), INT64_MIN, INT64_MAX},
    {PLACEMENT(ts_disc_ci)},
    {"uuid", PK_STR, offsetof(ts_disc_ci, uuid)},
};

static const proto_field GI_FIELDS[] = {
    {"gpu_instance_id", PK_I64, offsetof(ts_disc_gi, gpu_instance_id), INT64_MIN, INT64_MAX},
    {"profile_id", PK_I64, offsetof(ts_disc_gi, profile_id), INT64_MIN, INT64_MAX},
    {PLACEMENT(ts_disc_gi)},
    {.name = "compute_instances", PROTO_ROWS(ts_disc_gi, cis, ncis, CI_FIELDS)},
};

typedef struct dc_mig {
    bool enabled, pending;
    ts_disc_gi *instances;
    int ninstances;
} dc_mig; /* ts_disc_gpu's mig, named for its table */

static const proto_field MIG_FIELDS[] = {
    {"enabled", PK_BOOL, offsetof(dc_mig, enabled)},
    {"pending", PK_BOOL, offsetof(dc_mig, pending)},
    {.name = "instances", PROTO_ROWS(dc_mig, instances, ninstances, GI_FIELDS)},
};

static const char *const REMOTE_TYPES[] = {NULL, "gpu", "switch"};

static const proto_field NVLINK_FIELDS[] = {
    {"link", PK_I64, offsetof(ts_disc_nvlink, link), INT64_MIN, INT64_MAX},
    {"up", PK_BOOL, offsetof(ts_disc_nvlink, up)},
    {"remote_pci_bus_id", PK_STR, offsetof(ts_disc_nvlink, remote_pci_bus_id)},
    {.name = "remote_type", .kind = PK_ENUM, .off = offsetof(ts_disc_nvlink, remote_type),
     .hi = NLINES(REMOTE_TYPES), .names = REMOTE_TYPES},
};

#define G(m) offsetof(ts_disc_gpu, m)
static const proto_field GPU_FIELDS[TS_DG_NFIELDS] = {
    [TS_DG_INDEX] = {"index", PK_I64, G(index), 0, INT64_MAX},
    [TS_DG_UUID] = {"uuid", PK_STR, G(uuid)},
    [TS_DG_NAME] = {"name", PK_STR, G(name)},
    /* the agents before the codec sent an unmapped model as null: read as
     * none, not refused (which would leave the whole discovery out) */
    [TS_DG_MODEL] = {"model", PK_STR_NULL, G(model)},
    [TS_DG_MEMORY_BYTES] = {"memory_bytes", PK_I64, G(memory_bytes), 0, INT64_MAX},
    [TS_DG_PCI_BUS_ID] = {"pci_bus_id", PK_STR, G(pci_bus_id)},
    [TS_DG_NVLINKS] = {.name = "nvlinks",
                       PROTO_ROWS(ts_disc_gpu, nvlinks, nnvlinks, NVLINK_FIELDS)},
    [TS_DG_MIG] = {.name = "mig", .kind = PK_SUB, .off = G(mig), .lo = PROTO_ALL(3),
                   .sub = MIG_FIELDS, .nsub = NLINES(MIG_FIELDS)},
    [TS_DG_ERROR] = {"error", PK_STR, G(error)},
};
#undef G
_Static_assert(sizeof(dc_mig) == sizeof(((ts_disc_gpu *)0)->mig),
               "dc_mig is ts_disc_gpu's mig");

#define GPU_NEED                                                                              \
    (TS_DG_BIT(TS_DG_INDEX) | TS_DG_BIT(TS_DG_UUID) | TS_DG_BIT(TS_DG_NAME) |                 \
     TS_DG_BIT(TS_DG_MEMORY_BYTES) | TS_DG_BIT(TS_DG_PCI_BUS_ID) | TS_DG_BIT(TS_DG_NVLINKS))

static const proto_msg GPU_MSG = {GPU_FIELDS, TS_DG_NFIELDS, GPU_NEED, sizeof(ts_disc_gpu),
                                  offsetof(ts_disc_gpu, present)};

/* ---- the node's parts -------------------------------------------------------------- */

static const proto_field RAIL_FIELDS[] = {
    {"gpu", PK_I64, offsetof(ts_disc_rail, gpu), INT64_MIN, INT64_MAX},
    {"hca", PK_STR, offsetof(ts_disc_rail, hca)},
};

static const proto_field PORT_FIELDS[] = {
    {"hca", PK_STR, offsetof(ts_disc_ib_port, hca)},
    {"guid", PK_STR, offsetof(ts_disc_ib_port, guid)},
};

/* The topology: row i names NVML's level between GPU i and each GPU. */
static int dc_topology_decode(const json_t *v, const char *path, void *base, ts_err *err)
{
    ts_discovery *d = base;
    size_t n;
    int rc = proto_list_room(v, path, "a list of lists of strings", sizeof *d->topology,
                             (void **)&d->topology, &n, err);
    if (rc != 0)
        return rc;
    d->ntopology = (int)n;
    for (size_t i = 0; i < n && rc == 0; i++) {
        char sub[192];
        snprintf(sub, sizeof sub, "%s[%zu]", path, i);
        rc = proto_strv_decode(json_array_get(v, i), sub, &d->topology[i], err);
    }
    return rc;
}

static json_t *dc_topology_schema(void)
{
    return json_pack("{s:s,s:{s:s,s:{s:s}}}", "type", "array", "items", "type", "array",
                     "items", "type", "string");
}

static json_t *dc_topology_row(const void *slot) { return proto_strv_encode(slot); }

static json_t *dc_topology_encode(const void *base)
{
    const ts_discovery *d = base;
    return proto_objv_encode(d->topology, d->ntopology, sizeof *d->topology, dc_topology_row);
}

#define D(m) offsetof(ts_discovery, m)
static const char *const SHARINGS[] = {NULL, "timeslice", "mps"};

static const proto_field DC_FIELDS[TS_DC_NFIELDS] = {
    [TS_DC_CPUS] = {"cpus", PK_I64, D(cpus), 0, INT64_MAX},
    [TS_DC_MEMORY_BYTES] = {"memory_bytes", PK_I64, D(memory_bytes), 0, INT64_MAX},
    [TS_DC_DRIVER_VERSION] = {"driver_version", PK_STR, D(driver_version)},
    [TS_DC_GPUS] = {.name = "gpus", PROTO_DOCS(ts_discovery, gpus, ngpus, GPU_MSG)},
    [TS_DC_TOPOLOGY] = {"topology", PK_OBJ, D(topology), 0, 0, dc_topology_decode,
                        dc_topology_encode, .schema = dc_topology_schema},
    [TS_DC_NET_ADDR] = {"net_addr", PK_STR, D(net_addr)},
    [TS_DC_RAILS] = {.name = "rails", PROTO_ROWS(ts_discovery, rails, nrails, RAIL_FIELDS)},
    [TS_DC_IB_PORTS] = {.name = "ib_ports",
                        PROTO_ROWS(ts_discovery, ib_ports, nib_ports, PORT_FIELDS)},
    [TS_DC_GPU_SHARING] = {.name = "gpu_sharing", .kind = PK_ENUM, .off = D(gpu_sharing),
                           .hi = NLINES(SHARINGS), .names = SHARINGS},
};
#undef D
#pragma GCC diagnostic pop

#define DC_NEED                                                                               \
    (TS_DC_BIT(TS_DC_CPUS) | TS_DC_BIT(TS_DC_MEMORY_BYTES) | TS_DC_BIT(TS_DC_DRIVER_VERSION) | \
     TS_DC_BIT(TS_DC_GPUS) | TS_DC_BIT(TS_DC_TOPOLOGY))

void ts_discovery_fini(ts_discovery *d)
{
    for (int i = 0; d->gpus && i < d->ngpus; i++) {
        ts_disc_gpu *g = &d->gpus[i];
        for (int k = 0; g->mig.instances && k < g->mig.ninstances; k++)
            free(g->mig.instances[k].cis);
        free(g->mig.instances);
        free(g->nvlinks);
    }
    for (int i = 0; d->topology && i < d->ntopology; i++)
        free(d->topology[i].v);
    free(d->gpus);
    free(d->topology);
    free(d->rails);
    free(d->ib_ports);
    memset(d, 0, sizeof *d);
}

static void dc_fini(void *doc) { ts_discovery_fini(doc); }

const proto_msg PROTO_DISCOVERY = {DC_FIELDS, TS_DC_NFIELDS, DC_NEED, sizeof(ts_discovery),
                                   offsetof(ts_discovery, present), NULL, dc_fini};

json_t *ts_discovery_encode(const ts_discovery *d) { return proto_msg_encode(&PROTO_DISCOVERY, d); }

int ts_discovery_decode(const json_t *o, const char *where, ts_discovery *d, ts_err *err)
{
    return proto_msg_decode(&PROTO_DISCOVERY, o, where, d, err);
}

json_t *ts_discovery_schema(void) { return proto_msg_schema(&PROTO_DISCOVERY); }
