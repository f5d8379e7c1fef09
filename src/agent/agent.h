/*
 * agent.h - internal: the node agent's loop (agent.c) over the agent
 * protocol (docs/agent-protocol.md): register, then sync in a loop,
 * starting, stopping and reporting the node's tasks (launch.h).
 *
 * Ownership: a ts_agent owns its tasks, its HTTP handle and its copies of
 * the configuration strings. One thread.
 */
#ifndef TS_AGENT_AGENT_H
#define TS_AGENT_AGENT_H

#include <stdbool.h>

#include <jansson.h>

#include "io/dest.h"
#include "agent/controllers.h"
#include "agent/launch.h"
#include "agent/metrics.h"
#include "agent/mig.h"
#include "agent/mps.h"
#include "agent/nics.h"
#include "agent/nvml.h"
#include "tessera/agent_proto.h"
#include "tessera/error.h"

#define TS_AGENT_MAX_TASKS 256
#define TS_AGENT_MAX_HOOKS 64          /* prologs and epilogs running at once (--max-hooks) */
#define TS_AGENT_CONTAINER_WRITE_MIB 20480 /* --container-write-mib default, at most */
#define TS_AGENT_DISK_RESERVE_MIB 1024     /* --disk-reserve-mib default, at most */
#define TS_AGENT_OUTPUT_KEEP_MIB 1024      /* --output-keep-mib default, at most */
#define TS_AGENT_OUTPUT_KEEP_HOURS 24.0    /* --output-keep-hours default */
#define TS_AGENT_EPILOGS_WAITING_MAX 1024 /* epilogs waiting for a free hook slot */
#define TS_AGENT_HOOK_TIMEOUT_S 60.0   /* --hook-timeout default */
#define TS_AGENT_WAIT_IDLE_S 10.0  /* long-poll wait with nothing to watch */
#define TS_AGENT_WAIT_BUSY_S 1.0   /* with tasks running or stopping */
#define TS_AGENT_WAIT_MIN_S 0.05   /* the shortest, when a time limit or a stop's phase ends */
#define TS_AGENT_LOST_S 30.0       /* no controller this long: stop every task */
#define TS_AGENT_STEP_SAMPLES 20   /* step times a task's median is taken over */
#define TS_AGENT_STEP_TAIL_BYTES 4096 /* read from the end of a step file for them */
#define TS_AGENT_OUTPUT_TAIL 4096  /* bytes of each stream an ended task reports */
#define TS_AGENT_REGISTRY_ALLOW_MAX 48 /* --registry-allow ranges and plain-http hosts */
#define TS_AGENT_NOTE_BYTES 8192   /* of a task's output note (two file names) */
/* Sizes of the agent protocol (docs/agent-protocol.md "Sizes"): what the
 * agent sends in one registration or sync (half the controller's 1 MiB
 * limit on a request body; halved again, down to the floor, after the
 * controller refused one), the output one answer to an output request
 * carries, the output requests answered in one sync, and the largest
 * answer the agent accepts from the controller. */
#define TS_AGENT_BODY_MAX_BYTES (512 * 1024)
#define TS_AGENT_BODY_MIN_BYTES (64 * 1024)
#define TS_AGENT_LOG_ANSWER_MAX_BYTES (256 * 1024)
#define TS_AGENT_LOG_REQUESTS_MAX 8
#define TS_AGENT_ANSWER_MAX_BYTES (64 * 1024 * 1024)
#define TS_AGENT_ANSWER_SLACK_S 10.0 /* several controllers: a sync unanswered this
                                        long past its wait is a failed controller */

typedef struct ts_agent_config {
    ts_ctls ctls;           /* the controllers (--controller), one in use at a time */
    char node[64];
    char token[256];        /* the node credential's secret */
    char state_dir[512];    /* logs and checkpoint acknowledgements */
    char ca_file[512];      /* "" = the system's */
    char cgroup_parent[512];/* "" = the agent's own cgroup */
    double lost_s;          /* TS_AGENT_LOST_S */
    char net_addr[16];      /* the node's underlay IPv4 (VXLAN source); "" = none */
    long long image_budget_bytes;    /* the image store's disk budget, 0 = none */
    char plain_http_registries[512]; /* "host:port,..." pulled over http, not https */
    /* what an image pull may connect to beyond addresses of no refused kind
     * (io/dest.h: loopback, link-local, unspecified, multicast): the ranges
     * of --registry-allow and the plain-http registries named by address */
    io_cidr registry_allow[TS_AGENT_REGISTRY_ALLOW_MAX];
    int nregistry_allow;
    /* the site's hooks (hooks.c, docs/tessera-agent.md): run as root before a
     * task starts and after it ended; "" = none */
    char prolog[512], epilog[512];
    double hook_timeout_s;  /* a hook still running then is killed and failed */
    int max_hooks;          /* hooks running at once, 1..TS_AGENT_MAX_HOOKS; 0 = the most */
    /* a container's writable layer: its own filesystem of this size (MiB; 0
     * = on the state disk, unbounded), --container-write-mib; unset: the
     * default, TS_AGENT_CONTAINER_WRITE_MIB or a quarter of the state disk */
    long long container_write_mib;
    bool container_write_set;
    /* MiB kept free on the state disk: under it the container task whose
     * writable layer holds the most is stopped (--disk-reserve-mib; 0 = no
     * check); unset: min(TS_AGENT_DISK_RESERVE_MIB, 5 % of the disk) */
    long long disk_reserve_mib;
    bool disk_reserve_set;
    /* MiB of a task's stdout (and of its stderr) kept on the state disk: past
     * it the older part is dropped (--output-keep-mib; 0 = all kept); unset:
     * min(TS_AGENT_OUTPUT_KEEP_MIB, 2 % of the disk) */
    long long output_keep_mib;
    bool output_keep_set;
    /* hours the output log of an ended task the agent no longer has stays
     * (--output-keep-hours; unset: TS_AGENT_OUTPUT_KEEP_HOURS) */
    double output_keep_hours;
    bool output_hours_set;
    int metrics_port;       /* the TCP port --metrics-listen serves; 0 = none (a task never
                             * publishes it, nor p2p_listen's) */
    char p2p_listen[64];    /* IPV4:PORT serving image pieces to peers; "" = no P2P */
    char p2p_advertise[256];/* the URL peers reach it at; "" = from p2p_listen */
    bool p2p_fault_corrupt; /* fault injection (tests, bench): serve corrupt pieces */
} ts_agent_config;

/* The node as the agent reports it: filled by the caller (discovery) and
 * read when a task needs its GPUs' identifiers. */
#define TS_AGENT_SHIM_REGISTER_S 5.0 /* --shim-register default */

typedef struct ts_agent_node {
    ts_discovery *discovery; /* sent at registration (the caller's) */
    char gpu_uuid[16][96];  /* CUDA_VISIBLE_DEVICES value per GPU index */
    int ngpu;
    int gpu_util[16];       /* last utilisation % per GPU (the health callback sets it), -1 unknown */
    ts_nic_map nics;        /* the adapter (rail) of each GPU, for NCCL_IB_HCA */
    ts_agent_metrics *metrics; /* told the tasks after each exchange; NULL = no /metrics */
    ts_nvml *nv;            /* NULL without NVML: no MIG */
    bool mps;               /* fractional tasks share their GPU through MPS */
    char mps_binary[256];   /* nvidia-cuda-mps-control; "" = found on PATH */
    char shim[512];         /* libtessera-cuda.so preloaded into fractional tasks; "" none */
    double shim_register_s; /* a fractional task whose shim has not registered by then is
                             * stopped (shim_not_loaded); <= 0: TS_AGENT_SHIM_REGISTER_S */
    char sysfs_root[256];   /* where the adapters' partition tables are read; "" = /sys */
    json_t *cdi;            /* the node's CDI spec (agent/cdi.h), for container tasks; NULL none */
    /* called (on the agent's thread) after a MIG reconfiguration made or
     * destroyed instances: discovers the node again and replaces cdi (and
     * its files); NULL: the spec stays as made at start */
    void (*cdi_refresh)(struct ts_agent_node *node, void *ctx);
    void *cdi_refresh_ctx;
    /* health, refreshed by the caller before each sync, valid until the
     * next call; NULL = not reported */
    ts_node_health *(*health)(void *ctx);
    void *health_ctx;
} ts_agent_node;

typedef struct ts_agent ts_agent;

int agent_new(const ts_agent_config *cfg, ts_agent_node *node, ts_agent **out, ts_err *err);
void agent_free(ts_agent *a);
/* One exchange: (re)register if needed, report, receive the desired state
 * and reconcile. Returns 0, or an error the loop logs and retries after. */
int agent_step(ts_agent *a, ts_err *err);
/* After a failed step: whether to try again at once (the step moved to
 * another controller, or a restarted controller answered 409 and the agent
 * must register again; at most once per controller before a pause). */
bool agent_retry_now(ts_agent *a);
/* After a failed step that is not retried at once: seconds to pause
 * (agent_ctls_pause_s: short while a failover may be under way). */
double agent_pause_s(ts_agent *a);
/* Sleeps seconds, keeping the tasks' time limits and stops on time
 * meanwhile (polled every TS_AGENT_WAIT_MIN_S): no exchange needed. */
void agent_pause(ts_agent *a, double seconds);
/* Stops every task (the controller has been unreachable too long, or the
 * agent is shutting down); blocks at most for their graces. */
void agent_stop_all(ts_agent *a);
/* As the agent stops (SIGTERM): stops every task as agent_stop_all does,
 * then tells the controller in one last sync (each task reported stopped,
 * launch_end agent_stopped, and the node leaving), so that their jobs
 * requeue at once and no work is placed on the node until an agent
 * registers again. */
void agent_leave(ts_agent *a);
/* What isolation this node allows (cgroups, device filter), and why not. */
const ts_launch_caps *agent_caps(const ts_agent *a);
/* Tasks it runs now. */
int agent_ntasks(const ts_agent *a);

#endif
