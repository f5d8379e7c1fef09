/*
 * health.h - one health sample per GPU per call, and the verdict the agent
 * reports to the controller: healthy, degraded (take no new work) or failed
 * (drain: the controller requeues every job with a rank here).
 *
 * Signals (gpu-facts.md 1.4, 1.6, 3.5): Xid critical-error events (an NVML
 * event set drained without blocking), volatile uncorrected ECC count,
 * retired-page and row-remap pending/failed, clock event reasons, PCIe link
 * generation/width against their maxima, NVLink links down, temperature,
 * utilisation. The mapping to verdicts is the drain table of gpu-facts.md 3.5
 * and is documented with its sources in docs/agent-health.md; thresholds are
 * named constants in health.c.
 *
 * Xid events arrive once, so the monitor remembers the Xids that decide a
 * verdict (sticky) until agent_health_clear() says the GPU was reset.
 * Ownership: agent_health_open allocates the monitor and borrows nv (which must
 * outlive it); agent_health_close frees (NULL is fine). A sample is a plain value
 * owned by the caller. One thread at a time per monitor.
 */
#ifndef TS_AGENT_HEALTH_H
#define TS_AGENT_HEALTH_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "agent/nvml.h"
#include "tessera/agent_proto.h"
#include "tessera/error.h"

#define TS_HEALTH_MAX_GPUS 16
#define TS_HEALTH_MAX_REASONS 16
#define TS_HEALTH_CODE_MAX 32
#define TS_HEALTH_MSG_MAX 128

enum ts_health_verdict {
    TS_HEALTH_HEALTHY = 0,
    TS_HEALTH_DEGRADED = 1, /* no new work; what runs stays */
    TS_HEALTH_FAILED = 2,   /* drain and requeue its tasks */
};

typedef struct ts_health_reason {
    int verdict;                     /* what this reason alone implies */
    char code[TS_HEALTH_CODE_MAX];   /* machine-readable: "xid-79", "pcie-width", ... */
    char message[TS_HEALTH_MSG_MAX]; /* "xid 79: GPU has fallen off the bus" */
} ts_health_reason;

typedef struct ts_gpu_health {
    unsigned index;
    int verdict;
    bool lost;           /* NVML said GPU_IS_LOST */
    int temperature_c;   /* -1 when unknown */
    int util_gpu_pct;    /* -1 when unknown (always on MIG GPUs) */
    unsigned long long clock_event_reasons;
    unsigned pcie_gen, pcie_width, pcie_max_gen, pcie_max_width; /* 0 when unknown */
    unsigned long long ecc_uncorrected_volatile;
    bool retired_pages_pending;
    bool row_remap_pending, row_remap_failed;
    int nvlinks, nvlinks_down;
    int nreasons;
    ts_health_reason reason[TS_HEALTH_MAX_REASONS];
} ts_gpu_health;

typedef struct ts_health_sample {
    int verdict; /* worst of the GPUs */
    bool xid_monitored; /* false when the driver refused the event registration */
    int ngpus;
    ts_gpu_health gpu[TS_HEALTH_MAX_GPUS];
} ts_health_sample;

typedef struct ts_health ts_health;

/* Takes the device handles and registers for Xid events. TS_EIO naming the
 * NVML call when the GPUs cannot be enumerated. */
int agent_health_open(ts_nvml *nv, ts_health **out, ts_err *err);
void agent_health_close(ts_health *h);

/* Drains pending Xid events and reads every GPU. Per-GPU read failures become
 * reasons, not errors; returns TS_EIO only when NVML is unusable. */
int agent_health_sample_now(ts_health *h, ts_health_sample *out, ts_err *err);

/* Forgets the sticky Xids of one GPU (call after it was reset). */
void agent_health_clear(ts_health *h, unsigned gpu);

/* Policy of one Xid: the verdict and a one-line meaning (static). Xids
 * that are application faults (13, 31, 43, ...) give HEALTHY. */
int agent_health_xid_policy(unsigned xid, const char **meaning);

const char *agent_health_verdict_name(int verdict); /* "healthy" | "degraded" | "failed" */

/* A sample as the sync's health (tessera/agent_proto.h: the verdict, one
 * line a reason, "gpu 0: xid-79: ...", and each GPU's readings and
 * reasons), held in out with the lines it writes; its strings are borrowed
 * from the sample, so both must outlive the sync it goes in. */
typedef struct agent_health_report {
    ts_node_health doc;
    ts_gpu_health_doc gpus[TS_HEALTH_MAX_GPUS];
    ts_health_reason_doc reasons[TS_HEALTH_MAX_GPUS][TS_HEALTH_MAX_REASONS];
    const char *lines[TS_HEALTH_MAX_GPUS * TS_HEALTH_MAX_REASONS];
    char text[TS_HEALTH_MAX_GPUS * TS_HEALTH_MAX_REASONS]
             [TS_HEALTH_CODE_MAX + TS_HEALTH_MSG_MAX + 32];
} agent_health_report;
ts_node_health *agent_health_doc(const ts_health_sample *s, agent_health_report *out);
/* The health of a node whose sample could not be read: degraded, why. */
ts_node_health *agent_health_unread_doc(const char *why, agent_health_report *out);
/* The sample's health as JSON (the tests' view of the wire); NULL on ENOMEM. */
json_t *agent_health_json(const ts_health_sample *s);

#endif
