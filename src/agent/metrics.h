/*
 * metrics.h - the node agent's Prometheus endpoint: GPU telemetry under
 * dcgm-exporter's metric and label names, attributed to the tenant and job
 * using each GPU (or MIG instance), plus a few gauges about the agent itself.
 *
 * The renderer (metrics.c) is a plain function of NVML and a task list, so
 * tests call it directly; the server (metrics_server.c: libmicrohttpd, one
 * internal thread) serves it on GET /metrics, keeps its own NVML event set for
 * the last Xid per GPU, and holds a copy of the agent's tasks that the agent
 * loop replaces after each reconcile. docs/agent-metrics.md lists every series, the label set and the
 * attribution rules.
 *
 * Ownership: agent_metrics_start allocates the server and borrows nv (NULL
 * on a node without NVML: only the agent gauges are served), which must
 * outlive it; agent_metrics_stop stops the thread and frees everything
 * (NULL is fine). set_tasks copies. Thread-safety: set_tasks may be called
 * from any thread while the server runs; start/stop from one thread.
 */
#ifndef TS_AGENT_METRICS_H
#define TS_AGENT_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "agent/nvml.h"
#include "tessera/error.h"

#define TS_METRICS_MAX_GPUS 16
#define TS_METRICS_TENANT_MAX 64
#define TS_METRICS_HOSTNAME_MAX 256

/* One task as telemetry sees it. */
typedef struct ts_metrics_task {
    int64_t job;
    int rank;
    char tenant[TS_METRICS_TENANT_MAX];
    /* The task's process group id (launch.h: its pid, it runs setsid), which
     * maps NVML's per-process figures to it; 0 when unknown. */
    int pgid;
    int ngpu;
    int gpu[TS_METRICS_MAX_GPUS]; /* GPU indices; a MIG task: its parent GPU */
    char mig_uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE]; /* "MIG-..." for a MIG task, else "" */
} ts_metrics_task;

typedef struct ts_agent_metrics ts_agent_metrics;

/* Listens on listen = "ADDR:PORT" ("0.0.0.0:9400", "127.0.0.1:0",
 * "[::1]:9400"; ":PORT" = every IPv4 address; port 0 = any free one, see
 * agent_metrics_port). hostname is the value of the hostname label.
 * Errors: TS_EINVAL naming the malformed part of listen; TS_EIO when the
 * socket cannot be bound; TS_ENOMEM. */
int agent_metrics_start(const char *listen, ts_nvml *nv, const char *hostname,
                           ts_agent_metrics **out, ts_err *err);
/* The port bound (useful after asking for port 0). */
int agent_metrics_port(const ts_agent_metrics *m);
/* Replaces the task list (copied). TS_ENOMEM leaves the old list. */
int agent_metrics_set_tasks(ts_agent_metrics *m, const ts_metrics_task *tasks, size_t n,
                               ts_err *err);
void agent_metrics_stop(ts_agent_metrics *m);

/* The exposition text (*text malloc'd, the caller frees). nv NULL: agent
 * gauges only. last_xid: per GPU index (TS_METRICS_MAX_GPUS entries), the
 * last Xid seen, 0 for none; NULL when Xids are not monitored, which omits
 * DCGM_FI_DEV_XID_ERRORS. NVML read failures leave series out and are
 * counted in tessera_agent_nvml_errors; only TS_ENOMEM is an error. */
int agent_metrics_render(ts_nvml *nv, const char *hostname, const ts_metrics_task *tasks,
                            size_t ntasks, const unsigned *last_xid, char **text, ts_err *err);

#endif
