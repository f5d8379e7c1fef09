/*
 * ctld.h - internal: the controller daemon tesserad.
 *
 * One process: an HTTP server (libmicrohttpd: polling threads, requests on
 * worker threads; http.c) in
 * front of the controller state, a scheduling thread that runs the core's
 * cycle (tessera/cycle.h) on that state, and the store (tessera/store.h)
 * that makes every accepted change durable before it is acknowledged.
 *
 * State: the cluster, tenants, quota and scheduler of libtessera, plus the
 * active jobs (pending, held, running, stopping) in memory, each mirrored by
 * its store row. Finished jobs live only in the store. One mutex (ctld.mu)
 * guards all of it. Every change of a job's state goes through the job state
 * machine (job_fsm.c): planned aside, written in one store transaction,
 * applied only if written, so memory always equals the store and a failed
 * write changes nothing (the caller answers 503 or retries). The cycle
 * itself computes with mu released, on copies of the jobs: reads go on
 * meanwhile, those of the nodes and usage it plans on from copies made just
 * before (view.c), while whoever would change them waits
 * (ctld_settled_wait). No HTTP read waits for a cycle or a write. Writes happen
 * with mu released: the cycle's decisions (readers go on; whoever would
 * change existing jobs waits, ctld_commit_wait), user actions and agent
 * reports (their jobs pinned meanwhile, so concurrent writers share the
 * store's group commit), drains, the idle and straggler policies, lost and
 * failed nodes, and tenants replacements (new submissions and changes wait
 * for its swap). No durable write is made under mu. An agent's sync that
 * changes nothing takes only its node's own lock (ctld_agent).
 *
 * Files: config.c (the YAML configuration), state.c (jobs in memory,
 * restore, actions), loop.c (the scheduling thread and virtual nodes),
 * http.c (server, routing, auth, limits), routes.c (the API handlers),
 * render.c (JSON of jobs, nodes, tenants), view.c (what readers of nodes
 * and usage see while a cycle plans), metrics.c (Prometheus text),
 * auth.c (tokens), main.c.
 */
#ifndef TS_CTLD_H
#define TS_CTLD_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "tessera/cycle.h"
#include "tessera/spec.h"
#include "tessera/store.h"
#include "tessera/tenant.h"

#define CTLD_PORT_DEFAULT 8460
#define CTLD_PATH_MAX 1024
#define CTLD_MAX_PRIORITY_CLASSES 32
#define CTLD_BODY_MAX_BYTES (1 << 20)
/* The agent protocol's sizes the controller keeps (docs/agent-protocol.md
 * "Sizes"): the output one answer to an output request carries (a longer
 * one is dropped), and the last output of an ended task kept per stream
 * (a longer one keeps its end). */
#define CTLD_LOG_ANSWER_MAX_BYTES (256 * 1024)
#define CTLD_TASK_OUTPUT_MAX_BYTES (16 * 1024)
/* A submitted array larger than this is answered with {id, name, state} per job. */
#define CTLD_ARRAY_BRIEF 100
/* An array larger than this is materialised lazily (array_lazy.c): this
 * many of its elements are jobs at submission, and after each cycle it
 * gets jobs for its next lowest pending elements until this many (or its
 * throttle, if smaller) wait as jobs. */
#define CTLD_ARRAY_WINDOW 64
/* ... and the most it keeps waiting as jobs, when the cycles start all it
 * is given (a large idle cluster): wanted() in array_lazy.c. */
#define CTLD_ARRAY_WINDOW_MAX 16384
typedef struct ctld_lazy ctld_lazy;
/* One parsed spec that a large array's elements share read-only; freed with
 * its last reference (ctld_spec_share_put, any thread). */
typedef struct ctld_spec_share {
    ts_job_spec *spec;
    _Atomic int refs;
} ctld_spec_share;
void ctld_spec_share_put(ctld_spec_share *s);

/* ---- configuration (config.c) ------------------------------------------- */

typedef struct ctld_priority_class {
    char name[TS_SPEC_NAME_MAX];
    int value;
} ctld_priority_class;

#define CTLD_MAX_QOS 64
typedef struct ctld_qos {
    char tenant[TS_NAME_MAX];   /* a tenant or organisation; "default" for the rest */
    int tc, sl;                 /* NCCL_IB_TC, NCCL_IB_SL; -1 = not set */
} ctld_qos;

/* OpenID Connect sign-in (oidc.c, docs/tesserad.md "oidc"): ID tokens from
 * one issuer, verified against its keys, their claims mapped to a caller. */
#define CTLD_OIDC_URL_MAX 512
#define CTLD_OIDC_CLAIM_MAX 64
#define CTLD_OIDC_USERS_MAX 256
typedef struct ctld_oidc_config {
    bool on;
    char issuer[CTLD_OIDC_URL_MAX];
    char audience[CTLD_OIDC_URL_MAX];
    char jwks_file[CTLD_PATH_MAX];      /* or */
    char jwks_url[CTLD_OIDC_URL_MAX];   /* or neither: the issuer's discovery document */
    char user_claim[CTLD_OIDC_CLAIM_MAX];      /* "sub" */
    char tenant_claim[CTLD_OIDC_CLAIM_MAX];    /* "tenant" */
    char role_claim[CTLD_OIDC_CLAIM_MAX];      /* "" = every ID token is role user */
    char unix_user_claim[CTLD_OIDC_CLAIM_MAX]; /* "" = ID tokens map no Unix user */
    /* the Unix users a claim may name, with their uids (the administrator's
     * mapping: a name not listed maps nobody) */
    char (*unix_users)[TS_STORE_NAME_MAX];
    int64_t *unix_uids;
    int nunix;
} ctld_oidc_config;

#define CTLD_NET_SERVICES_MAX 32

typedef struct ctld_config {
    char listen_addr[64];       /* "127.0.0.1" */
    int listen_port;            /* 8460 */
    char state_dir[CTLD_PATH_MAX];
    char store_url[CTLD_PATH_MAX];
    char cluster_file[CTLD_PATH_MAX];
    char tenants_file[CTLD_PATH_MAX];
    bool virtual_all;           /* every node is virtual */
    char **virtual_nodes;       /* else: these node names are virtual */
    int nvirtual;
    char tls_cert[CTLD_PATH_MAX], tls_key[CTLD_PATH_MAX]; /* "" = plain HTTP */
    char admin_token_file[CTLD_PATH_MAX];
    /* the first admin token's Unix identity, looked up when it is created ("" none) */
    char admin_unix_user[TS_STORE_NAME_MAX];
    ctld_oidc_config oidc;
    char secrets_key_file[CTLD_PATH_MAX]; /* docs/secrets.md; default state_dir/secrets.key */
    double interval_s;          /* periodic cycle */
    double half_life_s;
    ts_sched_config sched;
    ctld_priority_class classes[CTLD_MAX_PRIORITY_CLASSES];
    int nclasses;
    double rate_per_s;          /* requests per second per token */
    double rate_burst;
    /* abuse limits (http.c, routes.c; docs/tesserad.md "limits") */
    int conns_max;              /* connections in all (also capped by RLIMIT_NOFILE) */
    int conns_per_client;       /* not yet authenticated, per client address (IPv6: /64) */
    int conns_per_token;        /* open connections that showed one token */
    double request_timeout_s;   /* every request must arrive whole within this */
    int queued_per_tenant;      /* pending and held jobs per tenant */
    bool metrics_public;        /* /metrics without a token */
    double node_lost_s;         /* an agent silent this long is lost */
    double idle_threshold_pct;  /* a task below this GPU utilisation is idle */
    double idle_window_s[2];    /* per tier: idle this long is reaped; 0 = never */
    char **idle_tenant;         /* tenants (or organisations) with their own window, */
    double *idle_tenant_s;      /* which beats the tier's; 0 = never */
    int nidle_tenant;
    double straggler_factor;    /* a rank this much slower than its gang's median straggles */
    double straggler_window_s;  /* for this long, before it counts */
    char **straggler_drain;     /* tenants (or their organisations) whose straggling jobs are */
    int nstraggler_drain;       /* requeued from their checkpoint and the node drained */
    char checkpoint_dir[CTLD_PATH_MAX]; /* TESSERA_CHECKPOINT_DIR root; "" none */
    /* network: (docs/network.md) a namespace per task on its tenant's overlay */
    bool net_isolation;
    uint32_t net_range;         /* host order; each tenant one block of it */
    int net_range_prefix, net_tenant_prefix, net_mtu; /* net_mtu 0: the agent's default */
    char net_services[CTLD_NET_SERVICES_MAX][64]; /* "ADDR[/N]:PORT/tcp|udp" tasks may reach */
    int nnet_services;
    bool net_ib_partitions;     /* each tenant an InfiniBand partition key (net.c) */
    char net_ib_partitions_file[CTLD_PATH_MAX]; /* OpenSM's partitions.conf, written; "" none */
    ctld_qos qos[CTLD_MAX_QOS]; /* NCCL traffic class / service level per tenant */
    int nqos;
    /* high availability (ha.c, docs/ha.md): off unless the ha: key is given */
    bool ha_on;
    double ha_lease_s;          /* the lease in the store (10 s) */
    double ha_renew_s;          /* renewed (leader) or tried (standby) this often (2 s) */
    char ha_advertise_url[256]; /* what standbys tell clients; "" = from listen */
    int64_t ha_epoch;           /* set once leader: the store fences its writes with it */
} ctld_config;

/* Reads the configuration file (paths in it are relative to its folder). */
int ctld_config_load(const char *path, ctld_config *cfg, ts_err *err);
void ctld_config_fini(ctld_config *cfg);
void ctld_oidc_config_fini(ctld_oidc_config *o);
/* "90", "90s", "15m", "2h", "7d", "1h30m" -> seconds; TS_EINVAL. */
int ctld_parse_duration(const char *s, double *out);

/* ---- jobs in memory (state.c) -------------------------------------------- */

#define CTLD_PREEMPT_MEMORY 8

/* Per rank of a job on agent-served nodes: what its agent last reported. */
enum ctld_rank_state {
    CTLD_RANK_PENDING = 0,   /* asked to run, not reported yet */
    CTLD_RANK_RUNNING = 1,
    CTLD_RANK_DONE = 2,      /* exited 0 */
    CTLD_RANK_FAILED = 3,    /* exited non-zero or by a signal */
    CTLD_RANK_STOPPED = 4,   /* stopped on request (preempted, cancelled) */
};

typedef struct cjob {
    ts_job_row row;             /* the store's row, kept in step */
    ts_job_spec *spec;          /* parsed from row.spec_json */
    struct ctld_spec_share *spec_share; /* spec is this share's (a large array's
                                 * elements parse it once: array_lazy.c), or NULL: its own */
    ts_request *tasks;          /* one per rank */
    int ntasks;
    uint64_t *node_mask;        /* sj.node_mask: the nodes its spec allows, NULL = all */
    ts_alloc *allocs;           /* ntasks while running or stopping, else NULL */
    ts_job sj;                  /* the scheduler's view of it */
    double end_s;               /* virtual: when it finishes */
    double preempted_at[CTLD_PREEMPT_MEMORY]; /* recent preemption times */
    int npreempted;
    double reserved_at_s;       /* -1 */
    /* From the last cycle (-1: not ranked, e.g. held or started): how many of
     * its tenant's jobs and of all jobs were looked at before it, its las
     * level, and when it could start (-1: not planned this cycle). */
    int queue_tenant, queue_cluster, las_level;
    double estimated_s;
    bool is_virtual;            /* runs on virtual nodes only */
    int32_t *net_host;          /* per rank: its host number in its tenant's block (net.c);
                                 * NULL: no tenant network */
    uint8_t *rank_state;        /* ntasks, enum ctld_rank_state, while it runs on agents */
    double idle_since_s;        /* every rank idle since; 0 = not idle */
    bool idle_warned, reaped;
    char stop_outcome[32];      /* how the last rank stopped (checkpointed, terminated, ...) */
    /* its image is being pulled (docs/images.md): the last report saying so,
     * its rank and its bytes; 0 = none pulling. Not stored: reports renew it */
    double pull_seen_s;
    int pull_rank;
    int64_t pull_done, pull_total;
    json_t *rank_end;           /* ntasks: each rank's end as reported (job_end.c), null
                                 * until it ended; while it runs on agents */
    bool timed_out;             /* its time limit stops it (job_end.c) */
    double *straggle_since;     /* ntasks, since when the rank straggles; 0 = it does not */
    bool straggler_flagged;     /* the straggler event was written for this run */
    bool restart_now;           /* stopping to restart elsewhere at once (no backoff) */
    bool cancel_stop;           /* stopping because it was cancelled: ends cancelled */
    int pinned;                 /* a change of it is being written with mu released */
    bool has_dep;               /* its spec names a dependency (set by job_build: the
                                 * passes over every job read it, not the spec) */
    bool dep_met;               /* its dependency held once (depend.c): it stays met */
    uint64_t dep_sig;           /* depend.c: the named jobs' states when it last waited */
} cjob;

/* A request for a running task's output, answered by its agent through the
 * sync exchange (agents.c, ctld_job_logs). */
typedef struct ctld_logreq {
    struct ctld_logreq *next;
    int64_t id, job;
    int rank;
    int stream;                 /* 0 stdout, 1 stderr */
    long tail;                  /* bytes from the end */
    bool done;
    json_t *answer;             /* {"data", "size"} or {"error"} */
    pthread_cond_t cv;
} ctld_logreq;

/* The jobs with an allocation on one node (state.c keeps it with every
 * bind and unbind): desired() and node views read it instead of every job. */
typedef struct ctld_node_jobs {
    struct cjob **v;
    int n, cap;
} ctld_node_jobs;

/* One rank's last readings, as its agent reported them (agents.c). */
typedef struct ctld_reading {
    int64_t job;
    int rank;
    float util;                 /* GPU utilisation %, -1 unknown */
    float step_s;               /* step time (s), -1 unknown */
    double at_s;                /* when reported */
} ctld_reading;

/* A node agent as the controller sees it (agents.c). Two locks guard it.
 * c->mu: what reports change in the controller's state (health, its
 * reasons, discovery, drain_why, mig_error). Its own mu (taken inside
 * c->mu, never the other way round): the protocol's bookkeeping, so that a
 * sync that changes nothing (a heartbeat with the same report) neither
 * takes c->mu nor waits for a cycle: gen, last_seen_s, the published
 * desired document, the readings, the output requests. `registered` is
 * written under both, so either suffices to read it. */
typedef struct ctld_agent {
    bool registered;            /* an agent serves the node now */
    int64_t prefetch_ready;     /* the job whose image its last sync said is here ahead of
                                 * its start (docs/images.md); 0 none. Atomic */
    int health;                 /* 0 healthy, 1 degraded, 2 failed */
    char health_why[256];
    json_t *discovery;          /* its last registration's description */
    char drain_why[256];        /* why the controller drained it itself ("" = it did not) */
    char mig_error[256];        /* the agent's last MIG reconfiguration error, "" none */
    pthread_mutex_t mu;
    double last_seen_s;
    uint64_t gen;               /* the node's desired-state generation */
    pthread_cond_t moved;       /* gen moved (or the controller stops): wakes its long-poll */
    /* The desired document (tasks, MIG layout, drain) as last built under
     * c->mu; doc_ok: nothing it shows changed since (ctld_agent_moved
     * clears it). A sync answers from it without c->mu. */
    json_t *doc;
    bool doc_ok;
    /* The last report applied in full: its digest and the report
     * generation it was applied against (report_gen in agents.c). The same
     * report again, with that generation unmoved, can change nothing
     * (every change of a job on the node moves it). */
    uint64_t applied_digest, applied_gen;
    bool applied_ok;
    /* moves of gen by output requests (logs.c): they wake the long-poll
     * and change nothing a report is applied against */
    uint64_t log_moves;
    ctld_reading *readings;     /* the last report's running ranks */
    int nreadings;
    ctld_logreq *logreqs;       /* output requests waiting for this agent */
} ctld_agent;

#define CTLD_HEALTHY 0
#define CTLD_DEGRADED 1
#define CTLD_FAILED 2
/* Default: an agent not heard from this long is lost: its node is drained
 * and its jobs requeue (not before: their processes may still run there). */
#define CTLD_NODE_LOST_S 30.0
/* A sync waits at most this long for a change before answering. */
#define CTLD_SYNC_WAIT_S 20.0

typedef struct ctld_metrics {
    uint64_t submitted, started, finished, preempted, cancelled;
    uint64_t cycles;
    double cycle_s_sum;
    uint64_t cycle_hist[16];     /* buckets of CTLD_CYCLE_BUCKETS */
    double wait_s_sum;
    uint64_t wait_hist[16];      /* buckets of CTLD_WAIT_BUCKETS */
    uint64_t wait_count;
    uint64_t http_requests[6];   /* by status class 1xx..5xx, index 1..5 */
    uint64_t store_failures;     /* durable writes the store refused (nothing applied) */
    uint64_t agent_syncs[2];     /* atomics: agent syncs [0] applied under c->mu, [1] that
                                  * changed nothing and took only the node's lock */
    uint64_t notify_delivered, notify_failed, notify_dropped; /* atomics: webhooks (notify.c) */
} ctld_metrics;

/* What readers of the nodes and of the tenants' usage see while a cycle
 * plans with mu released (view.c): copies made just before ts_sched_cycle,
 * read instead of the live cluster and quota until its decisions are
 * applied or undone. Under mu. */
typedef struct ctld_view {
    bool planning;               /* from the copy to the decisions' apply */
    bool on;                     /* the copies are there to read (else: wait) */
    ts_node *nodes;              /* [nnodes], copied where the version moved */
    bool *up;                    /* [nnodes] schedulable */
    int ntenants, cap_tenants;
    int64_t *use;                /* [ntenants * TS_RES_DIMS] */
    double *share;               /* [ntenants] at the cycle's clock when copied */
    uint64_t served;             /* reads answered from the copies */
} ctld_view;

typedef struct ctld_net_tenant_row {
    char name[64];
    int ordinal;                /* its VNI and address block (net.c) */
} ctld_net_tenant_row;

/* A reservation (resv.c): its row, the id the scheduler knows it by, its nodes. */
typedef struct ctld_resv {
    ts_resv_row row;
    int64_t id;
    uint64_t *mask;
} ctld_resv;

typedef struct ctld {
    ctld_config cfg;
    struct ctld_oidc *oidc;      /* oidc.c: the issuer's key set, when oidc is on */
    ts_store *store;
    ts_cluster *cluster;
    ts_tenants *tenants;
    ts_quota *quota;
    ts_sched *sched;
    bool *node_virtual;          /* [nnodes] */
    bool *admin_drained;         /* [nnodes] drained by an admin (durable) */
    ctld_agent *agents;          /* [nnodes] */
    struct ctld_node_jobs *node_jobs; /* [nnodes] the jobs holding allocations there */
    pthread_mutex_t mu;
    pthread_mutex_t drain_mu;    /* drain writers, one at a time (before mu) */
    struct ctld_drain_req *drain_q; /* drains and resumes waiting to be written (under mu) */
    pthread_cond_t drain_cv;     /* a batch of them was written (or refused) */
    pthread_cond_t wake;
    bool dirty;                  /* something changed: run a cycle soon */
    bool stop;
    bool ready;
    bool store_failing;          /* the last cycle's write failed: retry after a pause */
    bool committing;             /* the cycle commits with mu released (loop.c) */
    bool cycling;                /* a cycle runs (loop.c): it yields mu to readers */
    /* readers of jobs (ctld_lock_reader): how many asked for mu, how many got it */
    _Atomic uint64_t readers_arrived, readers_entered;
    int changers_waiting;        /* changes waiting for a cycle's end (ctld_changer_wait) */
    int inflight;                /* other changes being written with mu released */
    bool swapping;               /* tenants being replaced (written with mu released) */
    int submitting;              /* submissions between their check and their jobs' add */
    int *queued;                 /* [nqueued] pending and held jobs per tenant index */
    int nqueued;
    pthread_cond_t committed;    /* ... and broadcasts this when it is done */
    ctld_lazy **lazy;            /* array_lazy.c: large arrays' elements not yet jobs */
    int nlazy, lazy_cap;
    pthread_cond_t fill_wake;    /* loop.c: a cycle ended, the filler thread tops arrays up */
    uint64_t fill_gen;           /* ... counting the cycles */
    struct ctld_net_tenant_row *net_tenants; /* tenants' network ordinals seen (net.c) */
    int nnet_tenants;
    char *net_partitions;        /* the partitions.conf last written (loop thread only) */
    cjob **jobs;                 /* active jobs, in no particular order */
    int njobs, jobs_cap;
    int64_t *map_ids;            /* open addressing id -> index in jobs */
    int *map_idx;
    int map_cap;
    ctld_metrics m;
    ctld_view view;
    ts_decision d;
    double last_cycle_ms;
    int64_t reserved_id;         /* the job holding the reservation (an event when it changes) */
    /* its image, fetched ahead on the nodes its reservation plans it on
     * (docs/images.md "Fetched while the job waits"): the job (0: none) and
     * those nodes, shown in their desired state as a prefetch */
    int64_t prefetch_job;
    int prefetch_nodes[TS_CYCLE_RESERVED_NODES_MAX];
    int nprefetch_nodes;
    int64_t next_logreq;         /* ids of output requests */
    int64_t frag_free_gpus;
    double sched_clock_s;        /* the latest time handed to the scheduler (ctld_sched_clock) */
    double next_virtual_s;       /* loop.c: the next end of a virtual run or grace; 0 = none */
    void *http;                  /* struct MHD_Daemon */
    void *limiter;               /* http.c's rate limiter */
    void *deps;                  /* depend.c: ended jobs' outcomes, looked up once */
    struct ctld_secrets *secrets; /* secrets.c: the secret store (ciphertexts, the key) */
    struct ctld_notify *notify;  /* notify.c: the webhooks' queue and thread */
    struct ctld_p2p *p2p;        /* p2p.c: the tracker of image blobs between agents */
    ctld_resv *resv;             /* resv.c: the reservations (under mu) */
    int nresv;
    int64_t resv_next_id;        /* the last id handed to one */
    pthread_mutex_t resv_mu;     /* reservation writers, one at a time (before mu) */
} ctld;

double ctld_now(void);
/* Waits on cv (mu held) until it is signalled or ctld_now() reaches until. */
void ctld_cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, double until);
int ctld_open(ctld *c, const ctld_config *cfg, ts_err *err);
void ctld_close(ctld *c);

/* Under c->mu: */
cjob *ctld_job_find(ctld *c, int64_t id);
/* Turns a spec (already valid syntactically) into one job per array element,
 * checks it against the cluster and tenants (err names the field), writes
 * the jobs durably and adds them. ids_out gets their ids (array_size
 * entries) and rendered (if not NULL) the JSON of those that are jobs now
 * (a large array's first CTLD_ARRAY_WINDOW: array_lazy.c). Not under mu: takes it
 * itself. existed: an idempotent retry. */
TS_MUST_CHECK
int ctld_submit(ctld *c, const ts_job_spec *spec, const char *spec_json, const char *owner,
                const char *run_user, int64_t run_uid, const char *idem_key, int64_t *ids_out,
                int *nids, bool *existed, json_t *rendered, ts_err *err);
/* Actions on an active job ("cancel", "hold", "release", "requeue"); not
 * under mu. TS_ENOENT (not active: maybe finished), TS_ECONFLICT (state does
 * not allow it: 409), else the store's error (503: nothing changed). */
TS_MUST_CHECK int ctld_job_action(ctld *c, int64_t id, const char *action, ts_err *err);
/* Drain/resume a node by name; not under mu. */
TS_MUST_CHECK int ctld_node_drain(ctld *c, const char *node, bool drain, ts_err *err);
/* The same for node index n, under mu, in the scheduling thread while its
 * cycle runs (the straggler policy): written with mu released
 * (committing), then applied (resuming clears drain_why); TS_ETIMEDOUT
 * while another drain is being written (try again later). */
TS_MUST_CHECK int ctld_node_drain_cycle(ctld *c, int n, bool drain, ts_err *err);
/* Replaces the tenants (YAML); not under mu. */
TS_MUST_CHECK int ctld_tenants_replace(ctld *c, const char *yaml, size_t len, ts_err *err);
void ctld_kick(ctld *c);
/* Under mu, before planning a change of existing jobs: waits while the
 * cycle commits its decisions with mu released (a change in that window
 * would race the jobs the cycle is about to apply). Readers never wait. */
void ctld_commit_wait(ctld *c);
/* Under mu, before changing the cluster, the quota or the scheduler
 * (binding a job, a drain) or reading them outside the HTTP reads (an
 * agent's desired state): waits while the cycle computes its decisions with
 * mu released, changing them as it plans. Reads of jobs need not wait: the
 * cycle works on copies of them; reads of nodes and usage read the view. */
void ctld_settled_wait(ctld *c);
/* Under mu: one wait of those above for c->committed, counted in
 * changers_waiting, so the next cycle first lets the waiting changes in
 * (and their writes end) before it starts, for at most 50 ms: a change
 * waits for the cycle running when it came, not for the ones after. */
void ctld_changer_wait(ctld *c);
/* Takes mu for an HTTP reader (jobs, nodes, tenants, metrics): counted
 * while it waits, so a running cycle lets it in at its next yield. */
void ctld_lock_reader(ctld *c);
/* Under mu, in the cycle: if readers came for mu before this call, lets them
 * in (mu released until they have it, 5 ms at most) and takes it back. Only
 * while c->cycling: any thread may take mu meanwhile, but everything that
 * changes what the cycle plans on waits for its end (above), so readers
 * and submissions are what runs. */
void ctld_yield(ctld *c);
/* In the cycle's dependency pass: a test build's pause (loop.c,
 * TESSERAD_TEST_CYCLE_DELAY_MS); nothing otherwise. */
void ctld_test_pause(ctld *c);
/* In the cycle's scans of every job: ctld_yield once every CTLD_YIELD_EVERY
 * jobs (a fraction of a millisecond of work). */
#define CTLD_YIELD_EVERY 1024
static inline void ctld_yield_some(ctld *c, int i)
{
    if ((i & (CTLD_YIELD_EVERY - 1)) == CTLD_YIELD_EVERY - 1)
        ctld_yield(c);
}
/* Under mu: node n's desired state changed; wakes only that node's
 * long-poll (one condition variable per node: a job change must not wake
 * a thousand agents) and marks its published document stale. */
void ctld_agent_moved(ctld *c, int n);
/* A rank's last readings from its agent, taken after the job's current
 * run started (locks the node's agent; any lock order above it). false:
 * none (a virtual node, or no report yet). */
bool ctld_rank_reading(ctld *c, const cjob *j, int rank, float *util, float *step_s);

/* Under mu: every node's published desired document is rebuilt at its
 * next answer (what it shows changed for all: the tenants). */
void ctld_agents_docs_stale(ctld *c);
/* Under mu: wakes every long-poll (shutdown). */
void ctld_agents_wake_all(ctld *c);
/* Under mu: the index in names[0..n) of the tenant or of its nearest
 * ancestor named there, else -1. */
int ctld_tenant_match(const ctld *c, const char *tenant, const char *const *names, int n);
/* Under mu, once a cycle (policies.c): the idle policy and stragglers. */
void ctld_idle_check(ctld *c, double now);
void ctld_straggler_check(ctld *c, double now);
/* Under c->mu: how many of the tenant's jobs are pending or held (kept
 * with every state change, not counted: the per-tenant cap reads it on
 * every submission). */
int ctld_tenant_queued(const ctld *c, const char *tenant);
/* Under c->mu: j's state goes from `from` to `to` (-1: not an active job). */
void ctld_queued_note(ctld *c, const cjob *j, int from, int to);
/* Under c->mu: removes and frees an active job. */
void ctld_job_remove(ctld *c, cjob *j);
/* Under c->mu: j got its allocations (j->allocs): the per-node index
 * learns it (job_fsm.c on a start; restore). TS_ENOMEM. */
int ctld_node_index_add(ctld *c, cjob *j);
/* Under c->mu: the time to hand the scheduler for a change at `now`: never
 * earlier than one it was already given. Its quota refuses time that runs
 * backwards, and with writes committed outside the lock a change planned
 * at t0 can be applied after a cycle ran at t1 > t0 (an agent's report
 * whose commit waited): its GPUs would never go back. */
double ctld_sched_clock(ctld *c, double now);
/* Under c->mu: releases a running job's resources at once (job_fsm.c
 * calls it once the change is written; nothing else should). */
void ctld_job_unbind(ctld *c, cjob *j, double now);
/* Under c->mu: whether node n may take new work (admin drain, agent,
 * health), applied to the scheduler. */
void ctld_node_refresh(ctld *c, int n);
/* Under c->mu: the nodes a job's ranks use get a new desired-state
 * generation, and waiting agents wake. */
void ctld_nodes_touch_job(ctld *c, const cjob *j);
/* Under c->mu, once a cycle: the idle and straggler policies, and agents
 * not heard from for node_lost_s are lost. What the store refuses is
 * logged and tried again at the next cycle. */
void ctld_agents_expire(ctld *c, double now);

/* The placement of a running job as stored (malloc'd); the same for n
 * allocations not yet bound to a job. */
char *ctld_placement_json(const ctld *c, const cjob *j);
char *ctld_placement_json_allocs(const ctld *c, const ts_alloc *allocs, int n);

/* net.c: tenant networks (docs/network.md); under c->mu */
int ctld_net_tenant(ctld *c, const char *tenant, int *ordinal, ts_err *err);
void ctld_net_bind(cjob *j);   /* j->net_host from its placement */
void ctld_net_unbind(cjob *j);
json_t *ctld_net_peers(const ctld *c);
/* a task's "net" and its overlay master_addr, when the cluster isolates */
void ctld_net_task(const ctld *c, const cjob *j, int rank, json_t *t);
void ctld_net_restore(ctld *c, cjob *j); /* a running job read back from the store */
/* The loop, after a cycle, without mu: rewrites network.ib_partitions_file
 * when the tenants' ports changed. */
void ctld_net_partitions_sync(ctld *c);
/* The "run-ended" event's detail for a run that ends now without ending the
 * job (preempted and requeued, or requeued by a user): usage reads it. */
char *ctld_run_detail(const cjob *j, double now);
/* render.c: a pending job's place in the queue for the job JSON and explain:
 * queue_position {tenant, cluster} (1 = first), estimated_start ({time} or
 * {reason}), las {level, attained_gpu_hours}, and a one-line "standing". */
void ctld_render_queue(const ctld *c, const cjob *j, json_t *doc);
/* fit.c: under mu, for a job built by job_build: TS_EINVAL (err naming the
 * field and the most that could ever fit) when it could never run, on the
 * cluster as declared (every node, drained or not) or within its tenant's
 * guarantee (guaranteed work) or guarantee plus borrowing limit. */
TS_MUST_CHECK int ctld_fit_check(const ctld *c, const cjob *j, ts_err *err);
/* throttle.c: j's index in its array (0-based; its array's id, the first
 * element's, is j->row.id less it), or -1 when j is not an array element. */
long ctld_array_index(const cjob *j);
/* throttle.c: arrays' throttles. scan counts, under mu, the running elements
 * of throttled arrays and their pending ones (NULL: out of memory, nothing
 * throttled this cycle); waits says whether pending job j must stay out of
 * this cycle (its reason set): only the lowest pending indices that fit its
 * array's room are let in. */
typedef struct ctld_throttle ctld_throttle;
ctld_throttle *ctld_throttle_scan(ctld *c);
bool ctld_throttle_waits(ctld_throttle *t, cjob *j);
void ctld_throttle_free(ctld_throttle *t);
/* service.c: the GPU-seconds a job attained, for the las order. run_ended
 * adds the run that ends now (called as its GPUs go); restore rebuilds the
 * sum of a job that ran before from its run-ended events (after a restart). */
void ctld_service_run_ended(ctld *c, cjob *j, double now);
int ctld_service_restore(ctld *c, cjob *j, ts_err *err);
/* How long a job runs on virtual nodes. */
double ctld_job_run_s(const cjob *j);

/* ---- the loop (loop.c) ------------------------------------------------------ */

int ctld_loop_start(ctld *c, pthread_t *th);
/* One cycle now (tests, and the loop itself); under nothing, takes mu. */
TS_MUST_CHECK int ctld_cycle_once(ctld *c, double now, ts_err *err);

/* ---- HTTP (http.c, routes.c, render.c, metrics.c, auth.c) ------------------ */

typedef struct ctld_caller {
    char name[TS_STORE_NAME_MAX];
    int role;
    char tenant[TS_STORE_NAME_MAX];
    char unix_user[TS_STORE_NAME_MAX]; /* its tasks' Unix user; "" = none (uid meaningless) */
    int64_t uid;
    double expires_s;                  /* 0 = never */
} ctld_caller;

int ctld_http_start(ctld *c, ts_err *err);
void ctld_http_stop(ctld *c);

typedef struct ctld_reply {
    int status;
    char *body;                  /* malloc'd */
    const char *content_type;
    char retry_after[16];
    char allow[64];              /* a 405's Allow header ("GET, POST") */
    char next_cursor[32];        /* X-Next-Cursor of a paged non-JSON answer ("" = none) */
    bool close;                  /* close the connection once this is sent */
} ctld_reply;

/* The query parameters the API reads (NULL when absent). */
typedef struct ctld_query {
    const char *tenant, *state, *owner, *limit, *cursor, *from, *to;
    const char *rank, *stream, *tail; /* GET /v1/jobs/{id}/logs */
    const char *scope;                /* DELETE /v1/secrets/{name} */
    const char *format;               /* GET /v1/acct: json or csv */
} ctld_query;

typedef struct ctld_request {
    const ctld_caller *who;
    const char *method;
    const char *url;
    ctld_query q;
    const char *content_type;
    const char *idem_key;
    const char *body;
    size_t len;
    /* the path's parameters, filled by the router (router.h) from its route's pattern */
    int64_t id;                  /* {id}, checked 1..INT64_MAX; 0 when none */
    const char *name;            /* {name}; NULL when none */
    const char *action;          /* the literal segment after a parameter ("cancel"); "" */
} ctld_request;

/* GET /v1/jobs/{id}/logs for a job the caller may see (row): a running
 * rank's output fetched from its agent, else the tail its agent reported
 * when the rank ended. Not under mu. */
void ctld_job_logs(ctld *c, const ctld_request *rq, const ts_job_row *row, ctld_reply *r);

/* notify.c: webhooks of jobs' state changes. open at start, close at
 * shutdown (waits for the delivery thread); change is called under mu
 * where a job's new row is applied, and never waits on a delivery. */
int ctld_notify_open(ctld *c);
void ctld_notify_close(ctld *c);

/* p2p.c: the tracker of image blobs shared between agents (docs/images.md
 * "Peer-to-peer"): open at start (TS_ENOMEM), close at shutdown; the route
 * POST /v1/agent/p2p takes its own lock only. */
int ctld_p2p_open(ctld *c);
void ctld_p2p_close(ctld *c);
void ctld_p2p_route(ctld *c, const ctld_request *rq, ctld_reply *r);
void ctld_notify_change(ctld *c, const cjob *j, int from, const ts_job_row *to, double now);

/* GET /v1/acct: one accounting row per job the caller may see (acct.c). */
void ctld_acct(ctld *c, const ctld_request *rq, ctld_reply *r);
/* Routes one authenticated request by the route table (router.h, router.c). */
void ctld_route(ctld *c, const ctld_request *rq, ctld_reply *out);
/* array_lazy.c: large arrays' pending elements that are not jobs yet.
 * Under mu: ctld_array_lazy (job id is such an element), ctld_array_lazy_row
 * (its row as it would be stored, owned by the caller; TS_ENOENT when it is
 * not one), ctld_arrays_queued (a tenant's such elements), ctld_arrays_render
 * (one entry per array the filter matches, for GET /v1/jobs), ctld_lazy_new
 * (a record from the stored row of its first element) and ctld_lazy_add
 * (c owns it from then on, or it is freed: TS_ENOMEM). Not under mu:
 * ctld_arrays_fill (loop.c's filler thread, after each cycle),
 * ctld_array_take (makes element id a job if it is such an element; 0 too
 * when it is not), ctld_array_cancel_rest (stores every such element of the
 * array as cancelled; *cancelled grows by their count), ctld_arrays_restore
 * (at open). */
bool ctld_array_lazy(ctld *c, int64_t id);
int ctld_array_lazy_row(ctld *c, int64_t id, ts_job_row *out);
int ctld_arrays_queued(const ctld *c, const char *tenant);
json_t *ctld_arrays_render(ctld *c, const char *tenant, const char *owner);
ctld_lazy *ctld_lazy_new(const ts_job_row *first, int size, int next, int throttle);
TS_MUST_CHECK int ctld_lazy_add(ctld *c, ctld_lazy *a);
void ctld_arrays_fill(ctld *c);
TS_MUST_CHECK int ctld_array_take(ctld *c, int64_t id, ts_err *err);
TS_MUST_CHECK int ctld_array_cancel_rest(ctld *c, int64_t array, int *cancelled, ts_err *err);
TS_MUST_CHECK int ctld_arrays_restore(ctld *c, ts_err *err);
void ctld_arrays_free(ctld *c);
/* state.c, not under mu: adds n stored pending rows as jobs (their strings
 * move into the jobs; *added counts those that did, in order). With share
 * (not NULL) every job takes a reference to its spec instead of parsing its
 * own. */
TS_MUST_CHECK int ctld_jobs_adopt(ctld *c, ts_job_row *rows, int n, ctld_spec_share *share,
                                  int *added, ts_err *err);
/* arrays.c: POST /v1/arrays/{id}/cancel. ctld_array_cancel (not under mu)
 * cancels every active element of the array whose first element is job
 * `array` (span elements); *cancelled counts them. */
void ctld_array_route(ctld *c, const ctld_request *rq, ctld_reply *out);
/* bulk.c: POST /v1/jobs/cancel, every active job a filter matches. */
void ctld_jobs_cancel_bulk(ctld *c, const ctld_request *rq, ctld_reply *out);
TS_MUST_CHECK int ctld_array_cancel(ctld *c, int64_t array, int span, int *cancelled,
                                    ts_err *err);
/* The agent endpoints (/v1/agent/register, /v1/agent/sync), agents.c. */
void ctld_agent_route(ctld *c, const ctld_request *rq, ctld_reply *out);
void ctld_reply_json(ctld_reply *r, int status, json_t *doc); /* steals doc */
void ctld_reply_error(ctld_reply *r, int status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

json_t *ctld_render_job(const ctld *c, const ts_job_row *row, const cjob *active);
/* privacy.c (docs/secrets.md "Who sees what"). Under c->mu: whether caller w
 * reads the content (env, command, secrets, output) of a job of this tenant
 * and owner: its owner, admins, and the tenant's tenant-admins where its
 * policy says so. */
bool ctld_sees_content(const ctld *c, const ctld_caller *w, const char *tenant,
                       const char *owner);
/* Replaces a rendered job's content fields by "hidden" and lists them in
 * "hidden". */
void ctld_privacy_redact_job(json_t *doc);
/* Whether events of this kind carry content (a rank's output). */
bool ctld_event_is_content(const char *kind);
/* secrets_api.c: /v1/secrets; at submission, whether every secret the spec
 * names exists for its owner (false: a 400 naming it in r); under c->mu, a
 * starting rank's secret values into its desired task t ("secrets", or
 * "secrets_error" naming a missing one). */
void ctld_secrets_route(ctld *c, const ctld_request *rq, ctld_reply *r);
bool ctld_spec_secrets_ok(ctld *c, const ctld_caller *w, const ts_job_spec *spec, ctld_reply *r);
void ctld_task_secrets(const ctld *c, const cjob *j, json_t *t);
/* The job's image_pull_secret's value as t's image_credentials (docs/images.md). */
void ctld_task_image_secret(const ctld *c, const cjob *j, json_t *t);
json_t *ctld_render_node(const ctld *c, int node);

/* The read view (view.c). init at open (-1: out of memory), fini at close;
 * publish and close by the cycle, under mu, around the span where the live
 * cluster and quota hold plans not yet applied. A reader of nodes or usage
 * takes mu with ctld_lock_view_reader (ctld_lock_reader, then a wait for the
 * cycle's end only if the copies could not be made) and reads through the
 * accessors, which answer from the copies while they are on, else live. */
int ctld_view_init(ctld *c);
void ctld_view_fini(ctld *c);
void ctld_view_publish(ctld *c, double now);
void ctld_view_close(ctld *c);
void ctld_lock_view_reader(ctld *c);
const ts_node *ctld_view_node(const ctld *c, int n);
bool ctld_view_up(const ctld *c, int n);
int64_t ctld_view_usage(const ctld *c, int t, int dim);
double ctld_view_share(const ctld *c, int t, double now);
/* GPUs each tenant is owed now (docs/scheduler.md, "The guarantee"):
 * owed[t] for t < tenants->n (the caller's array); read under the view
 * reader's lock. */
void ctld_view_owed_gpus(const ctld *c, double *owed);
/* The /metrics page (malloc'd). tenant NULL: every series; otherwise that
 * tenant's own series and the cluster-wide ones that count no tenant's jobs
 * or requests (docs/metrics.md "Who reads what"). */
char *ctld_metrics_text(ctld *c, const char *tenant);

/* Tokens: a new secret "tsk_" + 43 base64url characters; its SHA-256. */
int ctld_token_new_secret(char *out, size_t size);
/* resv.c: reservations. load reads the store's and hands them to the
 * scheduler (ctld_open); free drops them. ctld_resv_job (under mu): the id
 * of the reservation a job names, or TS_EINVAL naming `reservation` (none
 * of that name, a maintenance window, another tenant's, or a user not in its
 * list; tenant/owner NULL: not checked). The route serves GET, POST
 * /v1/reservations and DELETE /v1/reservations/{name}. */
int ctld_resv_load(ctld *c, ts_err *err);
void ctld_resv_free(ctld *c);
int ctld_resv_job(const ctld *c, const char *name, const char *tenant, const char *owner,
                  const char *run_user, int64_t *id, ts_err *err);
void ctld_resv_route(ctld *c, const ctld_request *rq, ctld_reply *r);
/* GET, POST /v1/tokens and DELETE /v1/tokens/{name} (tokens.c). */
void ctld_tokens_route(ctld *c, const ctld_request *rq, ctld_reply *r);
/* GET /v1/whoami (tokens.c). */
void ctld_whoami(const ctld_request *rq, ctld_reply *r);
/* "2027-01-31T12:00:00Z" (RFC 3339, any offset) or a duration from now
 * ("90d", as ctld_parse_duration) -> Unix seconds; TS_EINVAL. */
int ctld_parse_expiry(const char *s, double now_s, double *out);
/* Whether some node of the cluster is served by an agent (not virtual):
 * then a job needs a Unix identity to run. Under mu. */
bool ctld_has_agent_nodes(const ctld *c);
/* OpenID Connect (oidc.c): 0 and *who for a valid ID token; else
 * TS_EINVAL with why ("ID token: expired"), or TS_ENOENT when OIDC is off. */
int ctld_oidc_authenticate(ctld *c, const char *jwt, ctld_caller *who, char *why,
                           size_t why_size);
int ctld_oidc_init(ctld *c, ts_err *err);
void ctld_oidc_fini(ctld *c);
void ctld_token_hash(const char *secret, uint8_t hash[TS_TOKEN_HASH_BYTES]);
/* Forgets the cached tokens (after a revocation). */
void ctld_token_cache_clear(ctld *c);
/* The OpenAPI document (openapi.c). */
json_t *ctld_openapi(void);
/* Creates the admin token on first start and writes its secret to the file. */
int ctld_bootstrap_admin(ctld *c, ts_err *err);
/* Before the store opens: refuses a state_dir group or others may enter,
 * creates it 0700 when missing, and makes the state files (SQLite database,
 * WAL, SHM, admin token) 0600 whatever they were (auth.c). */
int ctld_state_secure(const ctld_config *cfg, ts_err *err);

#endif
