/*
 * state.h - internal to state.c, restore.c and actions.c: the jobs in
 * memory, shared between the three (all under ctld.mu).
 */
#ifndef TS_CTLD_STATE_H
#define TS_CTLD_STATE_H

#include "ctld/ctld.h"

/* The store setting that lists the nodes an admin drained. */
#define CTLD_DRAINED_KEY "drained_nodes"

/* Adds a built job to the array and the id map. */
int ctld_job_add(ctld *c, cjob *j);
void ctld_cjob_free(cjob *j);
/* j's stored placement as allocations; err names what is wrong. */
int ctld_placement_parse(const ctld *c, cjob *j, ts_err *err);
/* Sizes the queued counts for the tenants in c->tenants and counts again. */
int ctld_queued_recount(ctld *c);
/* The cluster's capacity per dimension, for the quota's shares. */
void ctld_quota_capacity(const ctld *c, ts_quota *q);
void ctld_node_index_del(ctld *c, const cjob *j);
/* Sizes the id map to cap slots and fills it again. */
int ctld_map_rebuild(ctld *c, int cap);

#endif
