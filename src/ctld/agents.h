/*
 * agents.h - internal: the node agents as the controller sees them (agents.c, logs.c;
 * the protocol: docs/agent-protocol.md).
 */
#ifndef TS_CTLD_AGENTS_H
#define TS_CTLD_AGENTS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "tessera/cycle.h"
#include "tessera/spec.h"
#include "tessera/store.h"
#include "tessera/tenant.h"

#include "ctld/job.h"

typedef struct ctld ctld;

/* A request for a running task's output, answered by its agent through the
 * sync exchange (agents.c, ctld_job_logs). */
typedef struct ctld_logreq {
    struct ctld_logreq *next;
    int64_t id, job;
    char tenant[TS_STORE_NAME_MAX]; /* the job's: one tenant holds at most some of a node's */
    int rank;
    int stream;                 /* 0 stdout, 1 stderr */
    long tail;                  /* bytes from the end, or from offset on */
    long long offset;           /* -1: the end */
    bool done;
    json_t *answer;             /* {"data", "size"} or {"error"} */
    pthread_cond_t cv;
} ctld_logreq;

/* The jobs with an allocation on one node (state.c keeps it with every
 * bind and unbind): ctld_agent_desired and node views read it instead of every job. */
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
    /* what the controller reads of its last registration's discovery
     * (tessera/agent_proto.h ts_discovery), copied: its underlay address
     * (NULL none) and its adapters' port GUIDs */
    char *net_addr;
    char **ib_guids;
    int nib_guids;
    char drain_why[256];        /* why the controller drained it itself ("" = it did not) */
    char mig_error[256];        /* the agent's last MIG reconfiguration error, "" none */
    pthread_mutex_t mu;
    double last_seen_s;
    /* the registered agent's identity (its machine and state directory,
     * "" an agent that sends none) and when it was last heard: another
     * agent's registration is refused meanwhile (agents.c second_agent) */
    char identity[128];
    double holder_seen_s;
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
    /* The agent numbers its reports ("seq", rising within one agent's
     * life). A report older than the newest one applied is stale: a sync
     * the agent gave up on (a task's end cut its long-poll short) can still
     * be waiting for c->mu when its successor is applied, and applied after
     * it would set an exited rank running again. applied_seq: the newest
     * applied or being applied, under c->mu; seen_seq: the newest received,
     * under mu (the readings follow only the newest). 0: none numbered. */
    uint64_t applied_seq, seen_seq;
    double refused_said_s;      /* when the log last named a report it left out (under mu) */
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


/* Under mu: node n's desired state changed; wakes only that node's
 * long-poll (one condition variable per node: a job change must not wake
 * a thousand agents) and marks its published document stale. */
void ctld_agent_moved(ctld *c, int n);
/* Frees what the agent's discovery left (a new registration, or the
 * controller closing). */
void ctld_agent_forget_discovery(ctld_agent *a);
/* A rank's last readings from its agent, taken after the job's current
 * run started (locks the node's agent; any lock order above it). false:
 * none (a virtual node, or no report yet). */
bool ctld_rank_reading(ctld *c, const cjob *j, int rank, float *util, float *step_s);

/* The most bytes of tasks a node's answer carries (agents_desired.c): half
 * the most an agent reads (tessera-agent's TS_AGENT_ANSWER_MAX_BYTES, 64 MiB),
 * the rest left for the answer's other members (output requests, sessions,
 * the networks' peers and services). */
#define CTLD_ANSWER_BUDGET_BYTES (32L * 1024 * 1024)

/* agents_desired.c: what should run on node n (the sync's answer without
 * "gen" and "logs", which change under the agent's own lock); a new document
 * the caller frees, NULL when out of memory. Under c->mu: it reads the live
 * node (its MIG layout), which a planning cycle leaves alone. */
json_t *ctld_agent_desired(const ctld *c, int n);

/* Under mu: every node's published desired document is rebuilt at its
 * next answer (what it shows changed for all: the tenants). */
void ctld_agents_docs_stale(ctld *c);
/* Under mu: wakes every long-poll (shutdown). */
void ctld_agents_wake_all(ctld *c);

/* p2p.c: the tracker of image blobs shared between agents (docs/images.md
 * "Peer-to-peer"): open at start (TS_ENOMEM), close at shutdown; the route
 * POST /v1/agent/p2p takes its own lock only. */
int ctld_p2p_open(ctld *c);
void ctld_p2p_close(ctld *c);

#endif
