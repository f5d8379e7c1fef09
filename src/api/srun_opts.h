/*
 * srun_opts.h - internal: the srun options a Tessera batch script may use.
 *
 * `tessera sbatch` runs the script once in every task of the job, so a
 * line `srun CMD` inside it is a step whose tasks are the job's own: the
 * `srun` the agent puts on a Slurm job's PATH (src/agent/slurm_step.c) runs
 * CMD in the task it is called from, or not at all in a task past the step's
 * `--ntasks` or `--ntasks-per-node`. One table says which options that srun
 * takes and what each does; the agent writes its srun from it and
 * `tessera sbatch --dry-run` (sbatch_lint.c) warns of a script line that
 * uses any other, so the two cannot disagree. docs/slurm.md lists them.
 */
#ifndef TS_API_SRUN_OPTS_H
#define TS_API_SRUN_OPTS_H

#include <stdbool.h>
#include <stddef.h>

enum srun_effect {
    SRUN_IGNORE,        /* the allocation already decides it (CPUs, GPUs, binding) */
    SRUN_NTASKS,        /* the step runs in the tasks of rank < N only */
    SRUN_PER_NODE,      /* the step runs in the tasks of local rank < N only */
    SRUN_LABEL,         /* each output line starts with the task's rank */
};

struct srun_opt {
    const char *lng;    /* without "--" */
    char shrt;          /* 0: none */
    bool value;         /* takes a value (--x=V, --x V, -xV, -x V) */
    enum srun_effect effect;
};

extern const struct srun_opt srun_opts[];
extern const size_t srun_nopts;

/* The option of that long name (length n) or short letter; NULL if none. */
const struct srun_opt *srun_opt_long(const char *name, size_t n);
const struct srun_opt *srun_opt_short(char c);

#endif
