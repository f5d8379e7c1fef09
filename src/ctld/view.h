/*
 * view.h - internal: the controller's counters (metrics.c) and the copies readers of
 * nodes and usage read while a cycle plans (view.c).
 */
#ifndef TS_CTLD_VIEW_H
#define TS_CTLD_VIEW_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "tessera/cycle.h"
#include "tessera/spec.h"
#include "tessera/store.h"
#include "tessera/tenant.h"

typedef struct ctld ctld;

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

#endif
