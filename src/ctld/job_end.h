/*
 * job_end.h - internal: how a job on agents ends and why (job_end.c): each
 * rank's reported end, the job's end planned from them, time limits.
 * Everything here runs under c->mu; planning changes nothing but the
 * transaction (and the job's noted rank ends).
 */
#ifndef TS_CTLD_JOB_END_H
#define TS_CTLD_JOB_END_H

#include "ctld/ctld.h"
#include "ctld/job_fsm.h"
#include "tessera/agent_proto.h"

/* What a failed rank's reason carries before its last output line (the
 * rank's content: privacy.c hides what follows from readers without it). */
#define CTLD_LAST_OUTPUT "; last output: "

/* The job's time limit (its own, else the scheduler's default), the signal
 * that starts its stop (its checkpoint signal, else SIGTERM) and the grace
 * before SIGKILL (its checkpoint grace, else the scheduler's). */
double ctld_job_limit_s(const ctld *c, const cjob *j);
int ctld_limit_signal(const cjob *j);
double ctld_limit_grace_s(const ctld *c, const cjob *j);
/* Keeps rank's end from its agent's report rep (j->rank_end); a report that
 * its time limit stopped it marks the job timed out. TS_ENOMEM. */
TS_MUST_CHECK int ctld_rank_end_note(const ctld *c, cjob *j, int rank,
                                     const ts_task_report *rep);
/* Plans j's end into t once its ranks' states call for one: completed,
 * failed (the first failed rank's reason), timeout, requeued or held after
 * a stop; or its time-limit stop when an agent stopped a rank first. */
TS_MUST_CHECK int ctld_job_settle(ctld *c, cjob *j, double now, ctld_txn *t, ts_err *err);
/* Plans the time-limit stop of every running job on agents past its limit. */
TS_MUST_CHECK int ctld_time_limits(ctld *c, double now, ctld_txn *t, ts_err *err);
/* The earliest time limit of a running job on agents (Unix s); 0: none. */
double ctld_next_limit_s(const ctld *c);

#endif
