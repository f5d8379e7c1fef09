/*
 * depend.h - internal: job dependencies in tesserad (depend.c).
 *
 * Before every cycle the controller decides each pending job that names a
 * dependency (docs/job-spec.md "dependency"): met (it joins the cycle, and
 * stays met), not yet (it waits with reason "dependency" and a why naming
 * the jobs it waits for, outside the cycle), or never (it fails at once).
 * The outcomes of ended jobs, which live only in the store, are looked up
 * once and cached, so a large queue costs no store query per job per cycle.
 */
#ifndef TS_CTLD_DEPEND_H
#define TS_CTLD_DEPEND_H

#include "ctld/ctld.h"
#include "ctld/job_fsm.h"

/* Under mu: decides every pending job whose dependency is not met yet
 * (j->dep_met set when it is; reason and why when it waits) and plans a
 * CTLD_JE_DEPFAIL into t for each that can never be met. */
TS_MUST_CHECK int ctld_deps_plan(ctld *c, double now, ctld_txn *t, ts_err *err);
/* Whether pending job j stays out of the cycle for its dependency. */
bool ctld_dep_waits(const cjob *j);
/* The elements of the array whose first element row is (its array_size),
 * or 1 when row is no array's first element: its id then names itself. */
int ctld_dep_array_span(const ts_job_row *row);
/* Frees the cache of ended jobs' outcomes (ctld_close). */
void ctld_deps_free(ctld *c);

#endif
