/*
 * srun_opts.h - internal: the srun options a Tessera batch script may use.
 *
 * A batch job runs its script in rank 0 and its other ranks wait for steps:
 * a line `srun CMD` inside it is a step in the job's own tasks, which
 * `tessera steps run` (src/cli/cmd_srun.c, the `srun` the agent puts on a Slurm
 * job's PATH) asks the controller for. One table says which options that
 * srun takes and what each does; `tessera steps run` reads its line with it and
 * `tessera sbatch --dry-run` (sbatch_lint.c) warns of a script line that
 * uses any other, so the two cannot disagree. docs/slurm.md lists them.
 */
#ifndef TS_API_SRUN_OPTS_H
#define TS_API_SRUN_OPTS_H

#include <stdbool.h>
#include <stddef.h>

enum srun_effect {
    SRUN_IGNORE,        /* the allocation already decides it (CPUs, GPUs, binding) */
    SRUN_NTASKS,        /* the step runs in N of the job's tasks */
    SRUN_PER_NODE,      /* at most N of them on a node */
    SRUN_NODES,         /* on the job's first N nodes */
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
