/*
 * cycle_order.h - the key a tenant's waiting jobs are ordered by in a
 * cycle, and its sort (internal to src/sched).
 */
#ifndef TS_SCHED_CYCLE_ORDER_H
#define TS_SCHED_CYCLE_ORDER_H

#include <stdint.h>

/* A tenant's own order: priority class, tier (guaranteed first), then las
 * level and attained service (both 0 under fifo; the service 0 too with
 * las_fifo_within_level; for a fresh job of a split first level, the GPUs
 * it asks instead), then submission. */
typedef struct cycle_okey {
    int tenant;
    int priority;
    int tier;
    int level;
    double attained;
    double submit_s;
    int64_t id;
    int idx;
} cycle_okey;

/* Sorts a[0..n) by tenant, then the order above (higher priority first,
 * lower tier, level, service, submission, id first); tmp and grp hold n
 * each. Keys never tie (ids are unique), so any sort gives this one order.
 * Linear where the jobs of each group (tenant, priority, tier, level) and
 * service already stand in order and those groups are at most 128 (the
 * usual queue: jobs come in submission order, and a split tenant's fresh
 * jobs have a few sizes), a merge sort otherwise. */
void cycle_order_sort(cycle_okey *a, int n, cycle_okey *tmp, uint8_t *grp);

#endif
