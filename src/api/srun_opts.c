/*
 * srun_opts.c - the srun options a Tessera batch script may use (see
 * srun_opts.h). Options that would ask for resources beyond the job's own
 * (more tasks than the job has, other nodes, other GPUs) cannot be honoured
 * from inside the job and are left out: the dry run warns of them and the
 * srun in the task refuses them, naming the option.
 */
#include "api/srun_opts.h"

#include <string.h>

const struct srun_opt srun_opts[] = {
    {"ntasks", 'n', true, SRUN_NTASKS},
    {"ntasks-per-node", 0, true, SRUN_PER_NODE},
    {"label", 'l', false, SRUN_LABEL},
    {"nodes", 'N', true, SRUN_NODES},
    {"cpus-per-task", 'c', true, SRUN_IGNORE},
    {"gpus", 'G', true, SRUN_IGNORE},
    {"gpus-per-node", 0, true, SRUN_IGNORE},
    {"gpus-per-task", 0, true, SRUN_IGNORE},
    {"gres", 0, true, SRUN_IGNORE},
    {"mem", 0, true, SRUN_IGNORE},
    {"mpi", 0, true, SRUN_IGNORE},
    {"cpu-bind", 0, true, SRUN_IGNORE},
    {"cpu_bind", 0, true, SRUN_IGNORE},
    {"gpu-bind", 0, true, SRUN_IGNORE},
    {"distribution", 'm', true, SRUN_IGNORE},
    {"job-name", 'J', true, SRUN_IGNORE},
    {"time", 't', true, SRUN_IGNORE},
    {"export", 0, true, SRUN_IGNORE},
    {"unbuffered", 'u', false, SRUN_IGNORE},
    {"kill-on-bad-exit", 'K', false, SRUN_IGNORE},
    {"exclusive", 0, false, SRUN_IGNORE},
    {"overlap", 0, false, SRUN_IGNORE},
    {"quiet", 'Q', false, SRUN_IGNORE},
    {"verbose", 'v', false, SRUN_IGNORE},
};
const size_t srun_nopts = sizeof srun_opts / sizeof srun_opts[0];

const struct srun_opt *srun_opt_long(const char *name, size_t n)
{
    for (size_t i = 0; i < srun_nopts; i++)
        if (strlen(srun_opts[i].lng) == n && strncmp(srun_opts[i].lng, name, n) == 0)
            return &srun_opts[i];
    return NULL;
}

const struct srun_opt *srun_opt_short(char c)
{
    for (size_t i = 0; c != 0 && i < srun_nopts; i++)
        if (srun_opts[i].shrt == c)
            return &srun_opts[i];
    return NULL;
}
