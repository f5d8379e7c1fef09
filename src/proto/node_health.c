/*
 * node_health.c - the codec of a node's health (tessera/agent_proto.h; the
 * schema's $defs/health): the node's verdict and its reasons as lines, and
 * each GPU's verdict, readings and reasons, which the agent sends with each
 * sync and the controller turns into the node taking work or not.
 *
 * One table a level (proto_table.h), in the order the agent writes the
 * members; a member the schema requires is refused when missing.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "proto/proto_table.h"
#include "tessera/agent_proto.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

static const char *const VERDICTS[] = {NULL, "healthy", "degraded", "failed"};
#define NVERDICTS ((int)(sizeof VERDICTS / sizeof *VERDICTS))

const char *ts_verdict_name(enum ts_verdict v)
{
    return (int)v > 0 && (int)v < NVERDICTS ? VERDICTS[v] : NULL;
}

#define VERDICT(T)                                                                            \
    .name = "verdict", .kind = PK_ENUM, .off = offsetof(T, verdict), .hi = NVERDICTS,         \
    .names = VERDICTS

static const proto_field REASON_FIELDS[] = {
    {"code", PK_STR, offsetof(ts_health_reason_doc, code)},
    {VERDICT(ts_health_reason_doc)},
    {"message", PK_STR, offsetof(ts_health_reason_doc, message)},
};

#define G(m) offsetof(ts_gpu_health_doc, m)
#define INT(m) PK_I64, G(m), INT64_MIN, INT64_MAX
static const proto_field GH_FIELDS[TS_GH_NFIELDS] = {
    [TS_GH_INDEX] = {"index", INT(index)},
    [TS_GH_VERDICT] = {VERDICT(ts_gpu_health_doc)},
    [TS_GH_TEMPERATURE_C] = {"temperature_c", INT(temperature_c)},
    [TS_GH_PCIE_GEN] = {"pcie_gen", INT(pcie_gen)},
    [TS_GH_PCIE_WIDTH] = {"pcie_width", INT(pcie_width)},
    [TS_GH_CLOCK_EVENT_REASONS] = {"clock_event_reasons", INT(clock_event_reasons)},
    [TS_GH_ECC_UNCORRECTED_VOLATILE] = {"ecc_uncorrected_volatile",
                                        INT(ecc_uncorrected_volatile)},
    [TS_GH_NVLINKS_DOWN] = {"nvlinks_down", INT(nvlinks_down)},
    [TS_GH_UTIL_GPU_PCT] = {"util_gpu_pct", INT(util_gpu_pct)},
    [TS_GH_REASONS] = {.name = "reasons",
                       PROTO_ROWS(ts_gpu_health_doc, reasons, nreasons, REASON_FIELDS)},
};
#undef INT
#undef G
#define GH_NEED (TS_GH_BIT(TS_GH_INDEX) | TS_GH_BIT(TS_GH_VERDICT) | TS_GH_BIT(TS_GH_REASONS))

static const proto_msg GH_MSG = {GH_FIELDS, TS_GH_NFIELDS, GH_NEED, sizeof(ts_gpu_health_doc),
                                 offsetof(ts_gpu_health_doc, present)};

#define H(m) offsetof(ts_node_health, m)
static const proto_field NH_FIELDS[TS_NH_NFIELDS] = {
    [TS_NH_VERDICT] = {VERDICT(ts_node_health)},
    [TS_NH_XID_MONITORED] = {"xid_monitored", PK_BOOL, H(xid_monitored)},
    [TS_NH_REASONS] = {"reasons", PK_STRV, H(reasons)},
    [TS_NH_GPUS] = {.name = "gpus", PROTO_DOCS(ts_node_health, gpus, ngpus, GH_MSG)},
};
#undef H
#pragma GCC diagnostic pop
#define NH_NEED (TS_NH_BIT(TS_NH_VERDICT) | TS_NH_BIT(TS_NH_REASONS))

void ts_node_health_fini(ts_node_health *h)
{
    for (int i = 0; h->gpus && i < h->ngpus; i++)
        free(h->gpus[i].reasons);
    free(h->gpus);
    free(h->reasons.v);
    memset(h, 0, sizeof *h);
}

static void nh_fini(void *doc) { ts_node_health_fini(doc); }

const proto_msg PROTO_NODE_HEALTH = {NH_FIELDS, TS_NH_NFIELDS, NH_NEED, sizeof(ts_node_health),
                                     offsetof(ts_node_health, present), NULL, nh_fini};

json_t *ts_node_health_encode(const ts_node_health *h)
{
    return proto_msg_encode(&PROTO_NODE_HEALTH, h);
}

int ts_node_health_decode(const json_t *o, const char *where, ts_node_health *h, ts_err *err)
{
    return proto_msg_decode(&PROTO_NODE_HEALTH, o, where, h, err);
}

json_t *ts_node_health_schema(void) { return proto_msg_schema(&PROTO_NODE_HEALTH); }
