/*
 * mig.h - the agent side of MIG: read the GPU and compute instances a GPU has,
 * make them match the layout the controller decided, and name the MIG device
 * a task gets in CUDA_VISIBLE_DEVICES.
 *
 * The controller owns the decision (a ts_mig_layout of tessera/mig.h: each
 * instance a GPU-instance profile *id* and a start slot on the 8 memory
 * slices); the agent owns making NVML agree. agent_mig_apply destroys the
 * instances the layout no longer has (compute instances first, then the GPU
 * instance), creates the missing ones with an explicit placement, and gives
 * each instance one compute instance covering all of it. An instance that
 * holds a running task (the busy set) is never touched, wanted or not. The
 * driver is the geometry's judge: an impossible layout fails at the NVML call
 * that refuses it, and the error names the call, NVML's string, the GPU, the
 * profile and the start. Applying is idempotent and not atomic: on failure the
 * report says what was already done; the next apply converges from there.
 * The agent never switches MIG mode (that needs an idle GPU and often a reset):
 * a GPU with MIG off is an error. Facts: gpu-facts.md 1.4 (MIG calls), 2.
 * Docs: docs/agent-mig-mps.md.
 *
 * Ownership: all results are plain values in caller-owned structs; nv is
 * borrowed. Thread safety: NVML is, but two applies on one GPU at once are not
 * meaningful: the caller serialises per GPU.
 */
#ifndef TS_AGENT_MIG_H
#define TS_AGENT_MIG_H

#include <jansson.h>
#include <stdbool.h>

#include "agent/discover.h"
#include "agent/nvml.h"
#include "tessera/error.h"
#include "tessera/mig.h"

#define TS_AGENT_MIG_CALL_MAX 64
/* At most 7 instances exist before and 7 after: each is kept, destroyed or
 * created once. */
#define TS_AGENT_MIG_STEPS_MAX (3 * TS_MIG_MAX_INSTANCES)

/* What a GPU has now. gi[] sorted by start slot; UUIDs as in discover.h. */
typedef struct ts_agent_mig_state {
    bool capable; /* NVML answers MIG calls for this GPU */
    bool enabled; /* current MIG mode */
    bool pending; /* mode after the next GPU reset */
    int ngi;
    ts_mig_gi_desc gi[TS_DISC_MAX_GI];
} ts_agent_mig_state;

/* One running task's hold on an instance: by MIG device UUID (any compute
 * instance of the GPU instance) or, with uuid NULL, by profile id and start. */
typedef struct ts_agent_mig_busy {
    const char *uuid;
    int profile_id, start;
} ts_agent_mig_busy;

enum ts_agent_mig_action {
    TS_AGENT_MIG_KEPT = 0,     /* wanted and present (compute instance fixed if needed) */
    TS_AGENT_MIG_KEPT_BUSY,    /* not wanted, but a task runs on it */
    TS_AGENT_MIG_DESTROYED,    /* not wanted, idle: compute instances and GI destroyed */
    TS_AGENT_MIG_CREATED,      /* wanted and missing: GI and one full CI created */
};

typedef struct ts_agent_mig_step {
    int action; /* enum ts_agent_mig_action */
    unsigned profile_id, start, size; /* size: memory slices */
    unsigned gi_id;                   /* the driver's GPU-instance id */
    bool ci_rebuilt; /* KEPT: its compute instances were replaced by one covering it */
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE]; /* the MIG device; for DESTROYED the old one */
} ts_agent_mig_step;

/* What apply did, in order; on failure also which NVML call refused. */
typedef struct ts_agent_mig_report {
    unsigned gpu;
    int nsteps;
    ts_agent_mig_step step[TS_AGENT_MIG_STEPS_MAX];
    int ncreated, ndestroyed, nkept, nbusy;
    char failed_call[TS_AGENT_MIG_CALL_MAX]; /* "" when nothing failed in NVML */
    int nvml_rc;                             /* NVML's return code of failed_call, else 0 */
} ts_agent_mig_report;

/* Reads GPU `gpu` (NVML index). MIG off or not capable is not an error here:
 * the flags say so and ngi is 0. Errors: TS_EINVAL for an index NVML does not
 * have; TS_EIO naming the NVML call that failed ("gpu 0:
 * nvmlDeviceGetGpuInstances(profile 9): GPU is lost"). */
int agent_mig_read(ts_nvml *nv, unsigned gpu, ts_agent_mig_state *out, ts_err *err);

/* Makes GPU `gpu` hold exactly `want` plus the busy instances (see the file
 * comment). want NULL is the empty layout (every idle instance goes); busy
 * may be NULL when nbusy is 0; report may be NULL. Errors:
 * TS_EINVAL: MIG not capable or off, bad index, want->n out of 0..7;
 * TS_ENOSPC: a wanted instance overlaps a busy one that stays (nothing was
 * changed); TS_EIO: an NVML call failed, message "gpu G: <call>(profile P,
 * start S): <nvmlErrorString>" and report->failed_call/nvml_rc set. */
int agent_mig_apply(ts_nvml *nv, unsigned gpu, const ts_mig_layout *want,
                       const ts_agent_mig_busy *busy, int nbusy, ts_agent_mig_report *report,
                       ts_err *err);

/* The MIG device UUID ("MIG-...") of the instance (profile id, start) on GPU
 * `gpu`, for CUDA_VISIBLE_DEVICES: the compute instance covering the whole GI,
 * else its first compute instance (CUDA honours one per GI, gpu-facts.md 2.10).
 * Errors: TS_EINVAL MIG off/not capable; TS_ENOENT no such instance or it has
 * no compute instance; TS_EIO NVML failure. */
int agent_mig_uuid(ts_nvml *nv, unsigned gpu, int profile_id, int start, char *uuid,
                      size_t len, ts_err *err);

/* "kept", "kept-busy", "destroyed", "created". */
const char *agent_mig_action_name(int action);

/* {"gpu", "steps": [{"action", "profile_id", "start", "size",
 * "gpu_instance_id", "uuid", "ci_rebuilt"?}], "created", "destroyed", "kept",
 * "busy", "failed_call"?, "nvml_rc"?}; NULL on ENOMEM. The caller adds the
 * error text (err.msg) when apply failed. */
json_t *agent_mig_report_json(const ts_agent_mig_report *report);

#endif
