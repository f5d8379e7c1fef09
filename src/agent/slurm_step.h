/*
 * slurm_step.h - the `srun` a Slurm batch job finds on its PATH (see
 * slurm_step.c and docs/slurm.md, "Steps: srun in a script").
 */
#ifndef TS_AGENT_SLURM_STEP_H
#define TS_AGENT_SLURM_STEP_H

#include <stddef.h>

#include "tessera/error.h"

/* Writes <state_dir>/slurm/srun (0755) and puts its folder in dir. 0, or a
 * negative error with err filled; the agent runs on without it (a Slurm
 * job's srun line then fails as "srun: not found"). */
int agent_srun_install(const char *state_dir, char *dir, size_t dir_len, ts_err *err);

/* The tessera CLI next to this agent's own executable into out; "" when
 * there is none (or its path holds a quote). */
void agent_srun_cli(char *out, size_t size);

#endif
