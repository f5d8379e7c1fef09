/*
 * slurm_step.c - the `srun` a Slurm batch job finds on its PATH.
 *
 * A job from `tessera sbatch` runs its script in rank 0 only (Slurm's batch
 * step); its other ranks hold their resources until a step asks for them.
 * A line `srun CMD` in the script is such a step: this srun is a two-line
 * script that runs `tessera steps run` (src/cli/cmd_srun.c) - the CLI installed
 * next to tessera-agent - which asks the controller for the step with the
 * task's step credential ($TESSERA_STEP_TOKEN, $TESSERA_STEP_URL) and waits
 * for its end. The agent writes it at start into <state_dir>/slurm (root's,
 * 0755), replacing it whole (write aside, rename), and the task environment
 * puts that folder first on a Slurm job's PATH (launch_env.c).
 */
#define _DEFAULT_SOURCE /* mkdir, fchmod, readlink */
#include "agent/slurm_step.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void agent_srun_cli(char *out, size_t size)
{
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    out[0] = '\0';
    if (n <= 0)
        return;
    self[n] = '\0';
    char *dir = dirname(self);
    int k = snprintf(out, size, "%s/tessera", dir);
    if (k < 0 || (size_t)k >= size || access(out, X_OK) != 0 || strchr(out, '\''))
        out[0] = '\0';
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
    char cli[4200];
    agent_srun_cli(cli, sizeof cli);
    fputs("#!/bin/sh\n# srun for a step inside a Tessera batch job, written by tessera-agent "
          "(docs/slurm.md, \"Steps\")\n", f);
    if (cli[0])
        fprintf(f, "exec '%s' steps run \"$@\"\n", cli);
    else
        fputs("echo 'srun: no tessera CLI next to tessera-agent on this node' >&2; exit 2\n", f);
    bool ok = fchmod(fileno(f), 0755) == 0 && fflush(f) == 0 && !ferror(f);
    if (fclose(f) != 0 || !ok || rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return ts_err_set(err, TS_EIO, "srun: %s: %s", path, strerror(e));
    }
    return 0;
}
