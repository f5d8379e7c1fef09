/*
 * agent_proto.h - the one codec of the agent protocol's documents
 * (docs/agent-protocol.md, its contract docs/agent-protocol.schema.json).
 *
 * tesserad and tessera-agent both read and write these documents; before this
 * codec each side picked fields out of the JSON by hand, so a field read as 0
 * when it was missing or of the wrong type, and nothing said which. Here each
 * document is a typed struct with one encoder (struct -> JSON, the wire form)
 * and one decoder (JSON -> struct) that checks every field's type and range
 * against the schema and names the first wrong one: "tasks[3].exit_code: must
 * be an integer". Fields the schema does not describe are ignored by the
 * decoders (a newer peer may send more; the schema test holds both sides to
 * the contract).
 *
 * Documents: a task report (ts_task_report), a register or sync body
 * (ts_sync) with the node's discovery (ts_discovery) and health
 * (ts_node_health), a desired task (ts_desired_task) and the whole answer
 * (ts_desired).
 *
 * Ownership: a decoded struct borrows its strings from the JSON document it
 * was decoded from, valid while that document lives; nothing is allocated for
 * a single report. An encoder copies what it is given. Thread-safe: no state.
 */
#ifndef TESSERA_AGENT_PROTO_H
#define TESSERA_AGENT_PROTO_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tessera/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- task_report: one task in an agent's register or sync "tasks" ---------------- */

/* What the task is doing; NONE: the report carries no state (the controller
 * then ignores it). */
enum ts_report_state {
    TS_REPORT_NONE = 0,
    TS_REPORT_RUNNING,
    TS_REPORT_EXITED,
    TS_REPORT_FAILED,
    TS_REPORT_STOPPED,
};

/* How a stop ended (a stopped task's "outcome"); NONE: not given. */
enum ts_report_outcome {
    TS_OUTCOME_NONE = 0,
    TS_OUTCOME_CHECKPOINTED,
    TS_OUTCOME_EXITED,
    TS_OUTCOME_TERMINATED,
    TS_OUTCOME_KILLED,
    TS_OUTCOME_STOPPED,
};

/* The largest signal number a report may carry: an exit status reads 128 + N. */
#define TS_REPORT_SIGNAL_MAX 127

typedef struct ts_task_report {
    int64_t job;  /* >= 1 */
    int32_t rank; /* >= 0 */
    int32_t step; /* a step's task: >= 0; -1 a rank's own task */
    bool has_run;
    double run; /* the run it belongs to: the job's start, Unix s */
    enum ts_report_state state;
    enum ts_report_outcome outcome;
    bool has_exit_code;
    int32_t exit_code;
    int32_t signal;    /* the signal that ended it, 1..TS_REPORT_SIGNAL_MAX; 0 none */
    int64_t oom_kills; /* OOM kills in its cgroup; 0 none */
    bool timeout;      /* its time limit stopped it */
    double ended_at;   /* when it ended, Unix s on its node's clock; 0 not given */
    bool has_time_limit;
    double time_limit_s; /* the limit that stopped it, sent with timeout */
    const char *error;      /* why it failed or never started; NULL none */
    bool launch;            /* it never started: error says why */
    const char *launch_end; /* the reason code of a start that failed; NULL none */
    double gpu_util;        /* its GPUs' mean utilisation, 0..100; < 0 not given */
    double step_s;          /* its training step's median seconds, > 0; < 0 not given */
    bool has_image_pull;    /* its image is coming */
    int64_t pull_done_bytes, pull_total_bytes;
    const char *pull_note; /* why the last try failed, "" none */
    bool has_output;       /* an ended task's last output ("output": {} when both are NULL) */
    const char *out_stdout, *out_stderr; /* NULL: none */
} ts_task_report;

/* A report with nothing set: step -1, gpu_util and step_s -1. */
void ts_task_report_init(ts_task_report *r);

/* The wire name of a state or an outcome; NULL for NONE. */
const char *ts_report_state_name(enum ts_report_state s);
const char *ts_report_outcome_name(enum ts_report_outcome o);

/* The report as a JSON object (a new reference); NULL when out of memory. */
json_t *ts_task_report_encode(const ts_task_report *r);

/* Decodes one report; `where` prefixes the field in an error ("tasks[3]").
 * Returns 0, TS_EINVAL naming the field and the reason. */
TS_MUST_CHECK int ts_task_report_decode(const json_t *o, const char *where, ts_task_report *r,
                                        ts_err *err);

/* Decodes a "tasks" array of reports into a new array (*out, freed with
 * free(); NULL when empty) of *n reports. A missing array (NULL) reads as
 * empty. Returns 0, TS_EINVAL naming "tasks[i].field", or TS_ENOMEM. */
TS_MUST_CHECK int ts_task_reports_decode(const json_t *tasks, ts_task_report **out, size_t *n,
                                         ts_err *err);

/* ---- desired_task: one task in the controller's answer "tasks" ------------------ */

/* What the agent is to do with it. */
enum ts_desired_action { TS_ACTION_NONE = 0, TS_ACTION_RUN, TS_ACTION_STOP };

/* Each member of a desired task, in the order the encoder writes them; a
 * task's `present` has bit TS_DT_BIT(field) for each member it carries. */
enum ts_dt_field {
    TS_DT_JOB, TS_DT_RANK, TS_DT_NAME, TS_DT_ACTION, TS_DT_GPUS, TS_DT_GPU_MILLI,
    TS_DT_CPU_MILLI, TS_DT_MEMORY_MIB, TS_DT_MIG_PROFILE, TS_DT_MIG_START, TS_DT_COMMAND,
    TS_DT_ENV, TS_DT_WORKDIR, TS_DT_USER, TS_DT_WORLD_SIZE, TS_DT_LOCAL_RANK,
    TS_DT_MASTER_ADDR, TS_DT_TENANT, TS_DT_MASTER_PORT, TS_DT_GRACE_S, TS_DT_RUN,
    TS_DT_INTERACTIVE, TS_DT_IMAGE, TS_DT_CONTAINER_USER, TS_DT_MOUNTS, TS_DT_DATA, TS_DT_HOLD,
    TS_DT_STEP_TOKEN, TS_DT_CHECKPOINT_DIR, TS_DT_SECRETS, TS_DT_IMAGE_CREDENTIALS,
    TS_DT_SECRETS_ERROR, TS_DT_GPU_MEMORY_MIB, TS_DT_NCCL_TC, TS_DT_NCCL_SL, TS_DT_UID,
    TS_DT_ALLOW_ROOT, TS_DT_UID_RANGE, TS_DT_NET, TS_DT_IB_PKEY, TS_DT_SIGNAL,
    TS_DT_TIME_LIMIT_S, TS_DT_DEADLINE, TS_DT_LIMIT_SIGNAL, TS_DT_LIMIT_GRACE_S, TS_DT_HARD,
    TS_DT_IDLE_WARNING, TS_DT_STEP, TS_DT_TASK_RANK,
    TS_DT_NFIELDS
};
#define TS_DT_BIT(f) (1ULL << (f))

/* A list a decoder allocated (v, freed by ts_desired_task_fini); the strings
 * are borrowed from the document. */
typedef struct ts_strv {
    const char **v;
    int n;
} ts_strv;
typedef struct ts_intv {
    int64_t *v;
    int n;
} ts_intv;

typedef struct ts_desired_mount {
    const char *host, *path;
    bool write;
} ts_desired_mount;
typedef struct ts_desired_data {
    const char *ref, *path;
} ts_desired_data;
/* A secret's value for a variable (env) or a file (file); either may be
 * NULL. A value may hold NUL bytes: value_len is its length. */
typedef struct ts_desired_secret {
    const char *env, *file, *value;
    size_t value_len;
} ts_desired_secret;

typedef struct ts_desired_task {
    uint64_t present; /* TS_DT_BIT of each member carried */
    int64_t job;
    int32_t rank;
    const char *name;
    enum ts_desired_action action;
    ts_intv gpus;
    int32_t gpu_milli;
    int64_t cpu_milli, memory_mib;
    int32_t mig_profile, mig_start;
    ts_strv command, env;
    const char *workdir; /* present and NULL: null on the wire */
    const char *user;
    int32_t world_size, local_rank;
    const char *master_addr, *tenant;
    int32_t master_port;
    double grace_s, run;
    struct {
        bool tty;
        int32_t rows, cols; /* 0: not sent */
    } interactive;
    const char *image, *container_user;
    ts_desired_mount *mounts;
    int nmounts;
    ts_desired_data *data;
    int ndata;
    bool hold;
    const char *step_token, *checkpoint_dir;
    ts_desired_secret *secrets;
    int nsecrets;
    const char *image_credentials, *secrets_error;
    size_t image_credentials_len; /* credentials may hold NUL bytes */
    int64_t gpu_memory_mib;
    int32_t nccl_tc, nccl_sl;
    bool uid_null; /* present: null (no mapped user) */
    int64_t uid;
    bool allow_root;
    ts_intv uid_range; /* two: the lowest and highest uid */
    struct {
        int64_t vni;
        const char *addr;
        int32_t prefix;
        ts_strv peers;
        int32_t mtu; /* 0: not sent */
        bool nics_dedicated;
        ts_strv publish, publish_from; /* n 0 and v NULL: not sent */
        bool has_publish, has_publish_from;
    } net;
    int32_t ib_pkey;
    int32_t signal;
    double time_limit_s, deadline;
    int32_t limit_signal;
    double limit_grace_s;
    bool hard;
    const char *idle_warning;
    int32_t step, task_rank;
} ts_desired_task;

/* The task as a JSON object (a new reference), its members in the order of
 * enum ts_dt_field; NULL when out of memory. */
json_t *ts_desired_task_encode(const ts_desired_task *t);

/* Decodes one desired task, checking every member against the schema's
 * desired_task; `where` prefixes the field in an error ("tasks[0]").
 * Returns 0, TS_EINVAL naming the field, or TS_ENOMEM; on error nothing is
 * left allocated. ts_desired_task_fini frees what a decode allocated. */
TS_MUST_CHECK int ts_desired_task_decode(const json_t *o, const char *where, ts_desired_task *t,
                                         ts_err *err);
void ts_desired_task_fini(ts_desired_task *t);

/* The members that name a task and its run (job, rank, step, run): what
 * the agent reports a task by when the whole of it is refused. */
#define TS_DT_ID_BITS                                                                          \
    (TS_DT_BIT(TS_DT_JOB) | TS_DT_BIT(TS_DT_RANK) | TS_DT_BIT(TS_DT_STEP) | TS_DT_BIT(TS_DT_RUN))

/* Decodes only the members of TS_DT_ID_BITS, checked as ts_desired_task_decode
 * checks them (job and rank required); the others are not read. Allocates
 * nothing. Returns 0 or TS_EINVAL naming the field. */
TS_MUST_CHECK int ts_desired_task_decode_id(const json_t *o, const char *where,
                                            ts_desired_task *t, ts_err *err);

/* ---- desired: the controller's whole answer to register and sync ---------------- */

/* Each member of the answer, in the order the encoder writes them; a
 * document's `present` has bit TS_DS_BIT(field) for each member it carries. */
enum ts_ds_field {
    TS_DS_DRAINED, TS_DS_LOST_AFTER_S, TS_DS_TASKS, TS_DS_MIG, TS_DS_PREFETCH, TS_DS_NET_PEERS,
    TS_DS_NET_SERVICES, TS_DS_NET_TENANT_SERVICES, TS_DS_GEN, TS_DS_NOW, TS_DS_LOGS,
    TS_DS_SESSIONS,
    TS_DS_NFIELDS
};
#define TS_DS_BIT(f) (1ULL << (f))

/* One MIG instance a GPU is to hold. */
typedef struct ts_desired_mig_slot {
    int32_t profile, start;
} ts_desired_mig_slot;
/* A MIG GPU's whole layout (mig[]). */
typedef struct ts_desired_mig {
    int32_t gpu;
    ts_desired_mig_slot *layout;
    int nlayout;
} ts_desired_mig;
/* An image to fetch ahead for a reserved job (prefetch[]). */
typedef struct ts_desired_prefetch {
    int64_t job;
    const char *image;
    int64_t rate_bytes_s; /* 0: not sent (the agent's default rate) */
} ts_desired_prefetch;
/* A service one tenant's network may reach (net_tenant_services[]). */
typedef struct ts_desired_tenant_service {
    int64_t vni;
    const char *to;
} ts_desired_tenant_service;
/* An output request (logs[]): the last `tail` bytes of one stream, or with
 * has_offset at most `tail` bytes from byte `offset` on (tessera logs -f). */
typedef struct ts_desired_log {
    int64_t id, job;
    int32_t rank;
    bool is_stderr;
    int64_t tail;
    bool has_offset;
    int64_t offset;
} ts_desired_log;

enum ts_session_kind { TS_SESSION_NONE = 0, TS_SESSION_ATTACH, TS_SESSION_EXEC, TS_SESSION_FORWARD };
/* An interactive session to open (sessions[]). secret is the session's
 * credential: the controller's copies are wiped once encoded. */
typedef struct ts_desired_session {
    enum ts_session_kind kind;
    int32_t rank;
    bool tty;
    bool has_command;
    ts_strv command;            /* exec */
    int32_t port;               /* forward; 0: not sent */
    int32_t rows, cols;         /* 0: not sent */
    int64_t job;
    const char *id, *secret;
} ts_desired_session;

typedef struct ts_desired {
    uint64_t present; /* TS_DS_BIT of each member carried */
    bool drained;
    double lost_after_s;
    /* the desired tasks, each a ts_desired_task's document: encoding takes
     * a reference to it; a decode borrows it from the document (each task
     * is decoded on its own with ts_desired_task_decode, so one outside
     * the protocol is refused alone) */
    json_t *tasks;
    ts_desired_mig *mig;
    int nmig;
    ts_desired_prefetch *prefetch;
    int nprefetch;
    ts_strv net_peers, net_services;
    ts_desired_tenant_service *net_tenant_services;
    int nnet_tenant_services;
    int64_t gen;
    double now;
    ts_desired_log *logs;
    int nlogs;
    ts_desired_session *sessions;
    int nsessions;
} ts_desired;

/* The answer as a JSON object (a new reference), its members in the order
 * of enum ts_ds_field; NULL when out of memory. */
json_t *ts_desired_encode(const ts_desired *d);

/* Sets each member d carries on o, replacing one o has in its place (the
 * controller keeps a node's answer and renews its gen, now, logs and
 * sessions for each sync). Returns 0, -1 when out of memory. */
int ts_desired_encode_into(const ts_desired *d, json_t *o);

/* Decodes an answer, checking every member it carries (but the tasks'
 * contents) against the schema's desired; a member missing reads as absent
 * (its bit clear in present). Returns 0, TS_EINVAL naming the field, or
 * TS_ENOMEM; on error nothing is left allocated. ts_desired_fini frees what
 * a decode allocated (never the strings, borrowed from o). */
TS_MUST_CHECK int ts_desired_decode(const json_t *o, ts_desired *d, ts_err *err);
void ts_desired_fini(ts_desired *d);

/* ---- discovery: what a node is (a registration's "discovery") ------------------- */

/* Each member of a discovery, in the order the agent writes them. */
enum ts_dc_field {
    TS_DC_CPUS, TS_DC_MEMORY_BYTES, TS_DC_DRIVER_VERSION, TS_DC_GPUS, TS_DC_TOPOLOGY,
    TS_DC_NET_ADDR, TS_DC_RAILS, TS_DC_IB_PORTS, TS_DC_GPU_SHARING,
    TS_DC_NFIELDS
};
#define TS_DC_BIT(f) (1ULL << (f))
/* Each member of a discovered GPU, in the order the agent writes them
 * (model, mig and error are optional). */
enum ts_dg_field {
    TS_DG_INDEX, TS_DG_UUID, TS_DG_NAME, TS_DG_MODEL, TS_DG_MEMORY_BYTES, TS_DG_PCI_BUS_ID,
    TS_DG_NVLINKS, TS_DG_MIG, TS_DG_ERROR,
    TS_DG_NFIELDS
};
#define TS_DG_BIT(f) (1ULL << (f))

/* Where a MIG instance sits among a GPU's slices. */
typedef struct ts_disc_placement {
    int64_t start, size;
} ts_disc_placement;
typedef struct ts_disc_ci {
    int64_t id, profile_id;
    ts_disc_placement placement;
    const char *uuid;
} ts_disc_ci;
typedef struct ts_disc_gi {
    int64_t gpu_instance_id, profile_id;
    ts_disc_placement placement;
    ts_disc_ci *cis; /* compute_instances */
    int ncis;
} ts_disc_gi;
typedef struct ts_disc_nvlink {
    int64_t link;
    bool up;
    const char *remote_pci_bus_id;
    enum ts_disc_remote { TS_REMOTE_NONE = 0, TS_REMOTE_GPU, TS_REMOTE_SWITCH } remote_type;
} ts_disc_nvlink;
typedef struct ts_disc_gpu {
    uint64_t present; /* TS_DG_BIT of each member carried */
    int64_t index;
    const char *uuid, *name, *model;
    int64_t memory_bytes;
    const char *pci_bus_id;
    ts_disc_nvlink *nvlinks;
    int nnvlinks;
    struct {
        bool enabled, pending;
        ts_disc_gi *instances;
        int ninstances;
    } mig; /* a MIG-capable GPU's */
    const char *error;
} ts_disc_gpu;
typedef struct ts_disc_rail {
    int64_t gpu;
    const char *hca;
} ts_disc_rail;
typedef struct ts_disc_ib_port {
    const char *hca, *guid;
} ts_disc_ib_port;

typedef struct ts_discovery {
    uint64_t present; /* TS_DC_BIT of each member carried */
    int64_t cpus, memory_bytes;
    const char *driver_version;
    ts_disc_gpu *gpus;
    int ngpus;
    ts_strv *topology; /* row i: NVML's level between GPU i and each GPU */
    int ntopology;
    const char *net_addr;
    ts_disc_rail *rails;
    int nrails;
    ts_disc_ib_port *ib_ports;
    int nib_ports;
    /* how its fractional tasks share a GPU (the agent's --sharing): MPS runs
     * one user's server a GPU at a time, so the controller keeps one user's
     * shares a GPU there */
    enum ts_gpu_sharing { TS_SHARING_NONE = 0, TS_SHARING_TIMESLICE, TS_SHARING_MPS } gpu_sharing;
} ts_discovery;

/* The discovery as a JSON object (a new reference); NULL when out of memory. */
json_t *ts_discovery_encode(const ts_discovery *d);
/* Decodes a discovery, checking every member against the schema's
 * discovery; `where` prefixes the field in an error ("discovery"). Returns
 * 0, TS_EINVAL naming the field, or TS_ENOMEM; on error nothing is left
 * allocated. ts_discovery_fini frees the lists (a decode's or a caller's
 * made with calloc), never the strings. */
TS_MUST_CHECK int ts_discovery_decode(const json_t *o, const char *where, ts_discovery *d,
                                      ts_err *err);
void ts_discovery_fini(ts_discovery *d);
/* The JSON Schema of what ts_discovery_decode accepts, written from its
 * member tables (so the OpenAPI document cannot drift from the codec);
 * objects open, as the decoder ignores members it does not know. A new
 * reference; NULL when out of memory. */
json_t *ts_discovery_schema(void);

/* ---- node_health: a node's health (a sync's "health") --------------------------- */

enum ts_verdict { TS_VERDICT_NONE = 0, TS_VERDICT_HEALTHY, TS_VERDICT_DEGRADED, TS_VERDICT_FAILED };
/* The wire name of a verdict; NULL for NONE. */
const char *ts_verdict_name(enum ts_verdict v);

/* Each member of a node's health and of one GPU's, in the order the agent
 * writes them. */
enum ts_nh_field { TS_NH_VERDICT, TS_NH_XID_MONITORED, TS_NH_REASONS, TS_NH_GPUS, TS_NH_NFIELDS };
#define TS_NH_BIT(f) (1ULL << (f))
enum ts_gh_field {
    TS_GH_INDEX, TS_GH_VERDICT, TS_GH_TEMPERATURE_C, TS_GH_PCIE_GEN, TS_GH_PCIE_WIDTH,
    TS_GH_CLOCK_EVENT_REASONS, TS_GH_ECC_UNCORRECTED_VOLATILE, TS_GH_NVLINKS_DOWN,
    TS_GH_UTIL_GPU_PCT, TS_GH_REASONS,
    TS_GH_NFIELDS
};
#define TS_GH_BIT(f) (1ULL << (f))

typedef struct ts_health_reason_doc {
    const char *code;
    enum ts_verdict verdict;
    const char *message;
} ts_health_reason_doc;
typedef struct ts_gpu_health_doc {
    uint64_t present; /* TS_GH_BIT of each member carried */
    int64_t index;
    enum ts_verdict verdict;
    int64_t temperature_c, pcie_gen, pcie_width, clock_event_reasons,
        ecc_uncorrected_volatile, nvlinks_down, util_gpu_pct;
    ts_health_reason_doc *reasons;
    int nreasons;
} ts_gpu_health_doc;
typedef struct ts_node_health {
    uint64_t present; /* TS_NH_BIT of each member carried */
    enum ts_verdict verdict;
    bool xid_monitored;
    ts_strv reasons; /* one line a reason, "gpu 3: xid-79: ..." */
    ts_gpu_health_doc *gpus;
    int ngpus;
} ts_node_health;

/* The health as a JSON object (a new reference); NULL when out of memory. */
json_t *ts_node_health_encode(const ts_node_health *h);
/* Decodes a node's health against the schema's health, as
 * ts_discovery_decode does; ts_node_health_fini frees the lists. */
TS_MUST_CHECK int ts_node_health_decode(const json_t *o, const char *where, ts_node_health *h,
                                        ts_err *err);
void ts_node_health_fini(ts_node_health *h);
/* The JSON Schema of what ts_node_health_decode accepts, as ts_discovery_schema. */
json_t *ts_node_health_schema(void);

/* ---- sync: an agent's register and sync bodies ---------------------------------- */

/* Each member of a register or sync body, in the order the encoder writes
 * them (a registration carries node, discovery, tasks and seq). */
enum ts_sy_field {
    TS_SY_NODE, TS_SY_DISCOVERY, TS_SY_GEN, TS_SY_TASKS, TS_SY_WAIT_S, TS_SY_SEQ, TS_SY_HEALTH,
    TS_SY_MIG_ERROR, TS_SY_DRAIN, TS_SY_PREFETCH, TS_SY_IMAGES, TS_SY_LOGS, TS_SY_AGENT,
    TS_SY_LEAVING, TS_SY_NFIELDS
};
#define TS_SY_BIT(f) (1ULL << (f))

enum ts_prefetch_state {
    TS_PREFETCH_NONE = 0,
    TS_PREFETCH_FETCHING,
    TS_PREFETCH_READY,
    TS_PREFETCH_FAILED,
};
/* How a prefetch the controller asked for goes (prefetch[]). */
typedef struct ts_sync_prefetch {
    int64_t job;
    enum ts_prefetch_state state;
} ts_sync_prefetch;
/* One image of the node's store (images[]). */
typedef struct ts_sync_image {
    const char *digest;
    ts_strv refs;
    int64_t bytes;
} ts_sync_image;
/* The answer to one output request (logs[]). data may hold NUL bytes. */
typedef struct ts_sync_log {
    int64_t id;
    const char *data; /* NULL: not sent */
    size_t data_len;
    bool has_size;
    int64_t size; /* the stream's whole size in bytes */
    bool has_offset;
    int64_t offset; /* where data starts in the stream, in bytes */
    const char *note, *error; /* NULL: not sent */
} ts_sync_log;

typedef struct ts_sync {
    uint64_t present; /* TS_SY_BIT of each member carried */
    const char *node;
    /* the node's discovery, or NULL (null on the wire): encoding borrows
     * it, a decode allocates it (freed by ts_sync_fini) */
    ts_discovery *discovery;
    int64_t gen;
    /* the task reports, each a ts_task_report's document: encoding takes a
     * reference, a decode borrows the list (each report is decoded on its
     * own, so one outside the protocol is left out alone) */
    json_t *tasks;
    double wait_s;
    int64_t seq;
    ts_node_health *health; /* the node's health (never NULL when carried): as discovery */
    const char *mig_error, *drain;
    ts_sync_prefetch *prefetch;
    int nprefetch;
    ts_sync_image *images;
    int nimages;
    ts_sync_log *logs;
    int nlogs;
    /* which agent this is (a registration): its machine and state
     * directory, the same across its restarts; another one is a second
     * agent for the node */
    const char *agent;
    /* the agent's last sync as it stops (SIGTERM): its tasks' reports, and
     * the node out of service until an agent registers again */
    bool leaving;
} ts_sync;

/* The body as a JSON object (a new reference), its members in the order
 * of enum ts_sy_field; NULL when out of memory. */
json_t *ts_sync_encode(const ts_sync *s);

/* Decodes a register or sync body, checking each member it carries (but
 * the reports' contents) against the schema. Returns 0, TS_EINVAL naming the field, or TS_ENOMEM; on error
 * nothing is left allocated. ts_sync_fini frees what a decode allocated
 * (never the strings, borrowed from o). */
TS_MUST_CHECK int ts_sync_decode(const json_t *o, ts_sync *s, ts_err *err);
void ts_sync_fini(ts_sync *s);

/* One output answer as the JSON object of a body's logs[] (a new
 * reference; NULL when out of memory): the agent keeps its answers so
 * until a sync carries them, the controller until the reader takes one. */
json_t *ts_sync_log_encode(const ts_sync_log *l);

#ifdef __cplusplus
}
#endif
#endif
