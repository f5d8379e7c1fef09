/*
 * view.h - internal: the controller's counters (metrics.c).
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
    uint64_t agent_reports_refused; /* atomic: task reports outside the agent protocol,
                                     * left out of their syncs (agents.c) */
    uint64_t notify_delivered, notify_failed, notify_dropped; /* atomics: webhooks (notify.c) */
    uint64_t reads_in_cycle;     /* readers let in while a cycle ran (lock.c, under mu) */
} ctld_metrics;

#endif
