/*
 * steps.h - steps inside an allocation (Slurm's `srun` in a batch script):
 * a command run on some or all of a running job's tasks, each step with its
 * own id, exit status and accounting (docs/slurm.md "Steps").
 *
 * A job from `tessera sbatch` (its env has SLURM_JOB_NAME) is a batch job:
 * its rank 0 runs the script (Slurm's batch step) and its other ranks hold
 * their resources with nothing running until a step asks for them; the job
 * ends when the script does. `srun` in the script (the CLI's `tessera steps run`,
 * installed by the agent under that name) posts a step with the task's step
 * credential; the controller adds the step's tasks to the desired state of
 * the nodes that hold them (agents.c), the agents run them as tasks of
 * their own and report their ends, and srun reads the step until it ended.
 *
 * Steps live in memory with their job (cjob.steps); every step's start and
 * end are written as job events ("step-started", "step-ended", the end's
 * detail a JSON document), which is what accounting reads once the job is
 * gone. Everything here is called under c->mu unless it says otherwise.
 */
#ifndef TS_CTLD_STEPS_H
#define TS_CTLD_STEPS_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "ctld/ctld.h"
#include "ctld/http.h"
#include "ctld/job_fsm.h"
#include "tessera/agent_proto.h"

#define CTLD_STEP_TOKEN_PREFIX "tsstep_"
#define CTLD_STEPS_MAX 4096            /* a job's steps, all runs together */
/* A job's steps running at once: each step task carries its rank's whole
 * environment and the step's command in its node's answer (agents_desired.c) */
#define CTLD_STEPS_RUNNING_MAX 64
/* ... or this many per rank of the job where more: a large allocation's
 * script may run a step per GPU (the node's answer budget still bounds
 * what the steps carry, agents_desired.c) */
#define CTLD_STEPS_RUNNING_PER_RANK 8
#define CTLD_STEP_OUTPUT_MAX_BYTES 65536 /* the output kept of one step task, a stream */

/* Whether j is a batch job (rank 0 runs the script, the others wait for
 * steps): `tessera sbatch` always sets SLURM_JOB_NAME in its env. */
static inline bool ctld_job_is_batch(const cjob *j)
{
    for (int i = 0; j->spec && i < j->spec->nenv; i++)
        if (strncmp(j->spec->env[i], "SLURM_JOB_NAME=", 15) == 0)
            return true;
    return false;
}

/* The step credential of job id ("tsstep_<id>_<64 hex>"), into out (>= 96
 * bytes). 0, or an error when the controller has no step key. */
int ctld_step_token(const ctld *c, int64_t id, char *out, size_t size);
/* The job a step credential names, when its MAC is right; 0 otherwise. */
int64_t ctld_step_token_job(const ctld *c, const char *token);
/* Reads <state_dir>/step.key, making it (32 random bytes, 0600) if absent. */
int ctld_step_key_load(ctld *c, ts_err *err);

/* The step tasks of j that node n runs (desired state), the oldest steps'
 * first, at most max of them: each written on its rank's task among ranks
 * (the nranks tasks of j's ranks on n, agents_desired.c) and appended to
 * tasks (NULL: none built), and with est (room for max), each one's most
 * bytes in the answer, from its rank's task's (rank_bytes, by index in
 * ranks) and its command's, without building it. rank_env (NULL: none; an
 * entry NULL: that rank's) is each rank task's encoded "env", whose strings
 * the step tasks share. Their count. */
int ctld_steps_desired(const ctld *c, const cjob *j, int n, const ctld_dtask *ranks,
                       json_t *const *rank_env, const size_t *rank_bytes, int nranks,
                       json_t *tasks, size_t *est, int max);
/* One agent report of a step task (it has "step"): recorded; a step whose
 * tasks all ended ends, its event planned into t. 0 or TS_ENOMEM. The
 * step's memory changes at once: a commit of t that fails leaves the step
 * ended without its step-ended event (its accounting row then comes from
 * memory only, while the job is active). */
int ctld_steps_report(ctld *c, cjob *j, int n, const ts_task_report *tk, double now,
                      ctld_txn *t);
/* The job's run ended (completed, failed, requeued): its running steps end
 * with it, their events planned into t (NULL: not written). */
void ctld_steps_run_ended(ctld *c, cjob *j, double now, ctld_txn *t);
void ctld_steps_free(cjob *j);
/* At a restart, for a running batch job (with mu not yet shared): its steps
 * rebuilt from their started and ended events, those of its current run
 * without an end running again, so the agents' reports of their tasks (they
 * run on) settle them and srun reads them as before. 0, TS_EIO, TS_ENOMEM. */
int ctld_steps_restore(ctld *c, cjob *j, double now, ts_err *err);

/* Job id's steps as GET /v1/jobs/{id}/steps lists them: from memory while
 * the job is active, else from its events (a store read). Takes mu itself;
 * NULL and err when the store failed. */
json_t *ctld_steps_of(ctld *c, int64_t id, ts_err *err);

/* GET and POST /v1/jobs/{id}/steps. Takes mu itself. */
void ctld_steps_route(ctld *c, const ctld_request *rq, ctld_reply *r);

#endif
