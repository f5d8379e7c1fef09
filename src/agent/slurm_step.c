/*
 * slurm_step.c - the `srun` a Slurm batch job finds on its PATH.
 *
 * `tessera sbatch` runs the batch script once in every task of the job (as
 * `srun script` would in Slurm), so a line `srun CMD` inside it is a step
 * whose tasks are the job's own: this srun runs CMD in the task it is
 * called from - with the task's GPUs, rank and environment - or not at all
 * where the task's rank is past the step's --ntasks (its local rank past
 * --ntasks-per-node). Options are those of src/api/srun_opts.h, the table
 * `tessera sbatch --dry-run` checks scripts against; any other is refused
 * naming it. The agent writes the script at start into <state_dir>/slurm
 * (root's, 0755), replacing it whole (write aside, rename), and the task
 * environment puts that folder first on a Slurm job's PATH (launch_env.c).
 */
#define _DEFAULT_SOURCE /* mkdir, fchmod */
#include "agent/slurm_step.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/srun_opts.h"

static const char HEAD[] =
    "#!/bin/sh\n"
    "# srun for a step inside a Tessera batch job, written by tessera-agent\n"
    "# (docs/slurm.md, \"srun in a script\"): the step runs its command in this task,\n"
    "# unless this task is past the step's --ntasks or --ntasks-per-node.\n"
    "fail() { echo \"srun: $*\" >&2; exit 2; }\n"
    "n=; per=; label=0\n"
    "while [ $# -gt 0 ]; do\n"
    "  o=$1; v=; e=; t=0\n"
    "  case $o in --*=*) v=${o#*=}; o=${o%%=*}; t=2 ;; esac\n"
    "  case $o in\n"
    "    --) shift; break ;;\n";

static const char TAIL[] =
    "    -*) fail \"$o: not available inside a Tessera job, whose steps run in the job's own "
    "tasks (docs/slurm.md)\" ;;\n"
    "    *) break ;;\n"
    "  esac\n"
    "  shift\n"
    "  if [ $t = 1 ]; then [ $# -gt 0 ] || fail \"$o: needs a value\"; v=$1; shift; fi\n"
    "  case $e in ntasks) n=$v ;; per_node) per=$v ;; label) label=1 ;; esac\n"
    "done\n"
    "[ $# -gt 0 ] || fail \"no command given\"\n"
    "case $n$per in *[!0-9]*) fail \"--ntasks, --ntasks-per-node: a whole number, not '$n$per'\" "
    ";; esac\n"
    "[ -n \"$n\" ] && [ \"${SLURM_PROCID:-0}\" -ge \"$n\" ] && exit 0\n"
    "[ -n \"$per\" ] && [ \"${SLURM_LOCALID:-0}\" -ge \"$per\" ] && exit 0\n"
    "SLURM_STEP_NUM_TASKS=${n:-${SLURM_NTASKS:-1}}; export SLURM_STEP_NUM_TASKS\n"
    "if [ $label = 1 ]; then\n"
    "  r=${SLURM_PROCID:-0}\n"
    "  exec 4>&1\n"
    "  s=$( { { \"$@\" 2>&1; echo $? >&3; } | sed \"s/^/$r: /\" >&4; } 3>&1 )\n"
    "  exit \"$s\"\n"
    "fi\n"
    "exec \"$@\"\n";

static const char *effect_name(enum srun_effect e)
{
    return e == SRUN_NTASKS ? "ntasks" : e == SRUN_PER_NODE ? "per_node"
                                       : e == SRUN_LABEL    ? "label"
                                                            : "ignore";
}

/* One case arm per option, and one more for a short option's attached value. */
static void write_arms(FILE *f)
{
    for (size_t i = 0; i < srun_nopts; i++) {
        const struct srun_opt *o = &srun_opts[i];
        const char *e = effect_name(o->effect);
        if (o->shrt)
            fprintf(f, "    --%s|-%c) e=%s; [ $t = 2 ] || t=%d ;;\n", o->lng, o->shrt, e,
                    o->value ? 1 : 0);
        else
            fprintf(f, "    --%s) e=%s; [ $t = 2 ] || t=%d ;;\n", o->lng, e, o->value ? 1 : 0);
        if (o->shrt && o->value)
            fprintf(f, "    -%c?*) e=%s; v=${o#-%c} ;;\n", o->shrt, e, o->shrt);
    }
}

int agent_srun_install(const char *state_dir, char *dir, size_t dir_len, ts_err *err)
{
    int n = snprintf(dir, dir_len, "%s/slurm", state_dir);
    if (n < 0 || (size_t)n >= dir_len)
        return ts_err_set(err, TS_EINVAL, "srun: state_dir %s: too long", state_dir);
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        return ts_err_set(err, TS_EIO, "srun: mkdir %s: %s", dir, strerror(errno));
    char tmp[4200], path[4200];
    snprintf(tmp, sizeof tmp, "%s/.srun.new", dir);
    snprintf(path, sizeof path, "%s/srun", dir);
    unlink(tmp);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0755);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (f == NULL) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        return ts_err_set(err, TS_EIO, "srun: %s: %s", tmp, strerror(e));
    }
    fputs(HEAD, f);
    write_arms(f);
    fputs(TAIL, f);
    bool ok = fchmod(fileno(f), 0755) == 0 && fflush(f) == 0 && !ferror(f);
    if (fclose(f) != 0 || !ok || rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return ts_err_set(err, TS_EIO, "srun: %s: %s", path, strerror(e));
    }
    return 0;
}
