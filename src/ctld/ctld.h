/*
 * ctld.h - internal: the controller daemon tesserad, its state in one
 * struct (below) and the headers of its modules. docs/architecture.md has
 * the layers and the life of a job; lock.h the one lock protocol (one mutex,
 * ctld.mu, guards this struct; durable writes and the core's planning run
 * with it released, announced by phases).
 *
 * Headers: config.h (configuration), job.h (jobs in memory and what acts on
 * them), agents.h (node agents), view.h (counters, readers' copies), lock.h,
 * http.h (HTTP requests and replies; included where used), and per module
 * depend.h, events.h, job_fsm.h, job_end.h, secrets.h, steps.h, ha.h ...
 */
#ifndef TS_CTLD_H
#define TS_CTLD_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "ctld/lock.h"
#include "tessera/cycle.h"
#include "tessera/spec.h"
#include "tessera/store.h"
#include "tessera/tenant.h"
#include "ctld/config.h"
#include "ctld/job.h"
#include "ctld/agents.h"
#include "ctld/view.h"

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
    uint8_t step_key[32];        /* steps.c: the step credentials' MAC key */
    bool step_key_ok;
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
    int committing;              /* writes with mu released of the cycle or of a drain
                                  * (loop.c, actions.c): a count, as two may overlap */
    bool cycling;                /* a cycle runs (loop.c): it yields mu to readers */
    /* readers of jobs (ctld_lock_reader): how many asked for mu, how many got it */
    _Atomic uint64_t readers_arrived, readers_entered;
    int changers_waiting;        /* changes waiting for a cycle's end (ctld_changer_wait) */
    int inflight;                /* other changes being written with mu released */
    bool swapping;               /* tenants being replaced (written with mu released) */
    int submitting;              /* submissions between their check and their jobs' add */
    struct ctld_queue_count {
        int queued;              /* pending and held jobs */
        int claimed;             /* jobs of submissions between their check and their add */
        int64_t queued_bytes;    /* the queued jobs' specs' bytes */
        int64_t claimed_bytes;   /* the claimed jobs' specs' bytes */
        int by_state[TS_JOB_STATES]; /* its jobs by state, kept as they change: /metrics
                                      * reads them, not every job */
    } *queue;                    /* [nqueued] per tenant index */
    int nqueued;
    pthread_cond_t committed;    /* ... and broadcasts this when it is done */
    ctld_lazy **lazy;            /* array_lazy.c: large arrays' elements not yet jobs */
    int nlazy, lazy_cap;
    pthread_cond_t fill_wake;    /* loop.c: a cycle ended, the filler thread tops arrays up */
    uint64_t fill_gen;           /* ... counting the cycles */
    struct ctld_net_tenant_row *net_tenants; /* tenants' network ordinals seen (net.c) */
    int nnet_tenants;
    int net_vni_base;            /* tenant ordinal k's VNI is this + k (net.c: ctld_net_open) */
    int net_pkey_base;           /* its InfiniBand partition key this + k (ib_partitions) */
    char *net_partitions;        /* the partitions.conf last written (loop thread only) */
    uint64_t net_peers_key;      /* the nodes' underlay addresses last sent (net.c), hashed */
    int nshare_one_user;         /* registered MPS nodes: shares carry their user (agents.c) */
    cjob **jobs;                 /* active jobs, in no particular order */
    int njobs, jobs_cap;
    int64_t *map_ids;            /* open addressing id -> index in jobs */
    int *map_idx;
    int map_cap;
    ctld_metrics m;
    ts_decision d;
    double last_cycle_ms;
    int64_t reserved_id;         /* the job holding the reservation (an event when it changes) */
    /* the planned job's image, fetched ahead on the nodes the cycle names
     * for it (ts_decision.prefetch: its planned nodes and those it could
     * start on; docs/images.md "Fetched while the job waits"): the job (0:
     * none) and those nodes, shown in their desired state as a prefetch */
    int64_t prefetch_job;
    int prefetch_nodes[TS_CYCLE_RESERVED_NODES_MAX];
    int nprefetch_nodes;
    int64_t next_logreq;         /* ids of output requests */
    int64_t frag_free_gpus;
    double sched_clock_s;        /* the latest time handed to the scheduler (ctld_sched_clock) */
    double next_virtual_s;       /* loop.c: the next end of a virtual run or grace; 0 = none */
    void *http;                  /* struct MHD_Daemon */
    void *limiter;               /* http.c's rate limiter */
    struct ctld_sessions *sessions; /* sessions.c: interactive streams being relayed */
    void *deps;                  /* depend.c: ended jobs' outcomes, looked up once */
    struct ctld_secrets *secrets; /* secrets.c: the secret store (ciphertexts, the key) */
    struct ctld_notify *notify;  /* notify.c: the webhooks' queue and thread */
    struct ctld_p2p *p2p;        /* p2p.c: the tracker of image blobs between agents */
    struct ctld_imgloc *imgloc;  /* imgloc.c: which node holds which image, for placement */
    struct ctld_ended *ended;    /* ended_runs.c: failed gangs' ranks whose output may come */
    ctld_resv *resv;             /* resv.c: the reservations (under mu) */
    int nresv;
    int64_t resv_next_id;        /* the last id handed to one */
    pthread_mutex_t resv_mu;     /* reservation writers, one at a time (before mu) */
} ctld;

int ctld_open(ctld *c, const ctld_config *cfg, ts_err *err);
void ctld_close(ctld *c);

/* ---- the loop (loop.c) ------------------------------------------------------ */

int ctld_loop_start(ctld *c, pthread_t *th);
/* One cycle now (tests, and the loop itself); under nothing, takes mu. */
TS_MUST_CHECK int ctld_cycle_once(ctld *c, double now, ts_err *err);
/* In the cycle's dependency pass: a test build's pause (loop.c,
 * TESSERAD_TEST_CYCLE_DELAY_MS); nothing otherwise. */
void ctld_test_pause(ctld *c);

#endif
