/*
 * sbatch_lint.c - warnings about a batch script's commands, for
 * `tessera sbatch` and its --dry-run.
 *
 * A script that works under Slurm can call what a Tessera task does not
 * have: `module` (Environment Modules, Lmod: a shell function of the login
 * environment, absent from a task unless the node's image defines it) and
 * srun options that ask for more than the job's own tasks (srun_opts.h).
 * Such a line fails only once the job runs, so the submitter is told now,
 * with the line and what to do instead. Only shell scripts are read, and
 * only the command word of each line (after `exec` or `time`): a warning,
 * never an error, since the line may never run.
 */
#define _GNU_SOURCE /* memmem */
#include <stdio.h>
#include <string.h>

#include "api/sbatch_req.h"
#include "api/srun_opts.h"

#define LINT_WORDS_MAX 64

/* Splits at blanks, in place: at most max words, stopping at a `#` word. */
static int words_of(char *line, char **w, int max)
{
    int n = 0;
    char *save = NULL;
    for (char *p = strtok_r(line, " \t\r", &save); p && n < max && p[0] != '#';
         p = strtok_r(NULL, " \t\r", &save))
        w[n++] = p;
    return n;
}

/* The first srun option of w[0..n) that srun_opts.h does not list, or NULL;
 * stops at the step's command (the first word that is not an option). */
static const char *srun_unknown(char **w, int n)
{
    for (int i = 0; i < n; i++) {
        const char *a = w[i];
        if (strcmp(a, "--") == 0 || a[0] != '-' || a[1] == '\0')
            return NULL;
        if (a[1] == '-') {
            const char *eq = strchr(a + 2, '=');
            const struct srun_opt *o = srun_opt_long(a + 2, eq ? (size_t)(eq - a - 2) : strlen(a + 2));
            if (!o)
                return a;
            if (o->value && !eq)
                i++;
            continue;
        }
        for (const char *c = a + 1; *c; c++) {
            const struct srun_opt *o = srun_opt_short(*c);
            if (!o)
                return a;
            if (o->value) {
                if (c[1] == '\0')
                    i++;
                break;
            }
        }
    }
    return NULL;
}

static void lint_line(ts_sbatch *sb, const char *where, char *text, bool *module_told)
{
    char *w[LINT_WORDS_MAX];
    int n = words_of(text, w, LINT_WORDS_MAX);
    int k = 0;
    while (k < n && (strcmp(w[k], "exec") == 0 || strcmp(w[k], "time") == 0))
        k++;
    if (k == n)
        return;
    if ((strcmp(w[k], "module") == 0 || strcmp(w[k], "ml") == 0) && !*module_told) {
        *module_told = true;
        sbatch_warn(sb, "%s%s: a task has no `module` command (Environment Modules, Lmod) "
                    "unless its node's image defines one, and the line then fails with "
                    "\"module: command not found\" (exit 127): put the software in the image, "
                    "or set PATH and LD_LIBRARY_PATH in the script", where, w[k]);
    } else if (strcmp(w[k], "srun") == 0) {
        const char *bad = srun_unknown(w + k + 1, n - k - 1);
        if (bad)
            sbatch_warn(sb, "%ssrun %s: not available inside a Tessera job, whose steps run in "
                        "the job's own tasks (docs/slurm.md, \"Steps: srun in a script\"); the line "
                        "fails when it runs", where, bad);
    }
}

void sbatch_lint(const char *script, size_t len, const char *name, ts_sbatch *sb)
{
    size_t pos = 0, ll = 0;
    if (sbatch_next_line(script, len, &pos, &ll) && memmem(script, ll, "python", 6) != NULL)
        return; /* not a shell script */
    bool module_told = false;
    const char *ls;
    for (int line = 2; (ls = sbatch_next_line(script, len, &pos, &ll)); line++) {
        char buf[1024];
        if (ll == 0 || ll >= sizeof buf)
            continue;
        memcpy(buf, ls, ll);
        buf[ll] = '\0';
        char where[320];
        snprintf(where, sizeof where, "%.256s:%d: ", name, line);
        lint_line(sb, where, buf, &module_told);
    }
}
