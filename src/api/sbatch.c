/*
 * sbatch.c - reading a Slurm batch script's `#SBATCH` directives and
 * sbatch-style command-line options (include/tessera/sbatch.h).
 *
 * As sbatch does, directives are the `#SBATCH` lines before the first line
 * that is neither blank nor a comment; each line holds one or more options,
 * words split as a shell would (quotes, backslash), and a word starting with
 * '#' ends it. Options take the long form (--mem=4G, --mem 4G) or the short
 * one (-N2, -N 2). Every option Slurm documents for sbatch that Tessera
 * cannot honour is an error naming it; the few whose absence changes nothing
 * about where and how the job runs are warnings; an unknown option is an
 * error. Values are checked one by one by each option's setter
 * (sbatch_set.c); how they combine is sbatch_spec.c's. The command line is read after the script, so its
 * options override the script's (sbatch's rule).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "api/sbatch_req.h"

#define DIRECTIVE "#SBATCH"
#define MAX_WORDS_PER_LINE 64

static const struct sopt OPTS[] = {
    {"job-name", 'J', O_NAME, ARG_REQUIRED, NULL},
    {"nodes", 'N', O_NODES, ARG_REQUIRED, NULL},
    {"ntasks", 'n', O_NTASKS, ARG_REQUIRED, NULL},
    {"ntasks-per-node", 0, O_NTPN, ARG_REQUIRED, NULL},
    {"cpus-per-task", 'c', O_CPT, ARG_REQUIRED, NULL},
    {"cpus-per-gpu", 0, O_CPG, ARG_REQUIRED, NULL},
    {"gpus", 'G', O_GPUS, ARG_REQUIRED, NULL},
    {"gpus-per-node", 0, O_GPN, ARG_REQUIRED, NULL},
    {"gpus-per-task", 0, O_GPT, ARG_REQUIRED, NULL},
    {"gres", 0, O_GRES, ARG_REQUIRED, NULL},
    {"mem", 0, O_MEM, ARG_REQUIRED, NULL},
    {"mem-per-cpu", 0, O_MEM_CPU, ARG_REQUIRED, NULL},
    {"mem-per-gpu", 0, O_MEM_GPU, ARG_REQUIRED, NULL},
    {"time", 't', O_TIME, ARG_REQUIRED, NULL},
    {"array", 'a', O_ARRAY, ARG_REQUIRED, NULL},
    {"qos", 'q', O_QOS, ARG_REQUIRED, NULL},
    {"account", 'A', O_ACCOUNT, ARG_REQUIRED, NULL},
    {"partition", 'p', O_PARTITION, ARG_REQUIRED, NULL},
    {"dependency", 'd', O_DEPENDENCY, ARG_REQUIRED, NULL},
    {"constraint", 'C', O_CONSTRAINT, ARG_REQUIRED, NULL},
    {"nodelist", 'w', O_NODELIST, ARG_REQUIRED, NULL},
    {"exclude", 'x', O_EXCLUDE, ARG_REQUIRED, NULL},
    {"reservation", 0, O_RESERVATION, ARG_REQUIRED, NULL},
    {"hold", 'H', O_HOLD, ARG_NONE, NULL},
    {"mail-type", 0, O_MAIL_TYPE, ARG_REQUIRED, NULL},
    {"mail-user", 0, O_MAIL_USER, ARG_REQUIRED, NULL},
    {"nice", 0, O_NICE, ARG_OPTIONAL, NULL},
    {"signal", 0, O_SIGNAL, ARG_REQUIRED, NULL},
    {"output", 'o', O_OUTPUT, ARG_REQUIRED, NULL},
    {"error", 'e', O_ERROR, ARG_REQUIRED, NULL},
    {"export", 0, O_EXPORT, ARG_REQUIRED, NULL},
    {"chdir", 'D', O_CHDIR, ARG_REQUIRED, NULL},
    {"container-image", 0, O_IMAGE, ARG_REQUIRED, NULL}, /* pyxis's spelling */
    /* safe to ignore: where and how the job runs stays the same */
    {"comment", 0, O_WARN, ARG_REQUIRED, "Tessera keeps no comment"},
    {"requeue", 0, O_WARN, ARG_NONE, "Tessera always requeues a preempted job"},
    {"no-requeue", 0, O_WARN, ARG_NONE, "Tessera always requeues a preempted job"},
    {"open-mode", 0, O_WARN, ARG_REQUIRED, "--output/--error are always appended to"},
    {"parsable", 0, O_WARN, ARG_NONE, "tessera prints job ids one a line"},
    {"quiet", 'Q', O_WARN, ARG_NONE, "no effect"},
    {"verbose", 'v', O_WARN, ARG_NONE, "no effect"},
    {"exclusive", 0, O_WARN, ARG_OPTIONAL, "a task gets only its own GPUs, CPUs and memory"},
    {"oversubscribe", 's', O_WARN, ARG_NONE, "a task gets only its own GPUs, CPUs and memory"},
    {"hint", 0, O_WARN, ARG_REQUIRED, "no CPU binding hints"},
    {"distribution", 'm', O_WARN, ARG_REQUIRED, "the scheduler places tasks"},
    {"gpu-bind", 0, O_WARN, ARG_REQUIRED, "a task sees exactly its own GPUs"},
    {"mem-bind", 0, O_WARN, ARG_REQUIRED, "no memory binding"},
    {"threads-per-core", 0, O_WARN, ARG_REQUIRED, "CPUs are counted in cores"},
    {"ntasks-per-core", 0, O_WARN, ARG_REQUIRED, "the scheduler places tasks"},
    {"ntasks-per-socket", 0, O_WARN, ARG_REQUIRED, "the scheduler places tasks"},
    {"sockets-per-node", 0, O_WARN, ARG_REQUIRED, "the scheduler places tasks"},
    {"cores-per-socket", 0, O_WARN, ARG_REQUIRED, "the scheduler places tasks"},
    {"time-min", 0, O_WARN, ARG_REQUIRED, "--time is the limit"},
    {"kill-on-invalid-dep", 0, O_WARN, ARG_REQUIRED,
     "a dependency that can never be met always fails the job"},
    {"get-user-env", 0, O_WARN, ARG_OPTIONAL, "--export decides the environment"},
    {"propagate", 0, O_WARN, ARG_OPTIONAL, "resource limits are the task's cgroup"},
    {"wckey", 0, O_WARN, ARG_REQUIRED, "no workload keys"},
    {"spread-job", 0, O_WARN, ARG_NONE, "the scheduler places tasks"},
    {"no-kill", 'k', O_WARN, ARG_OPTIONAL, "a job loses its node's tasks when the node fails"},
    /* would change where, when or whether the job runs: refused */
    {"licenses", 'L', O_REFUSE, ARG_REQUIRED, "licenses are not supported"},
    {"begin", 'b', O_REFUSE, ARG_REQUIRED, "deferred starts are not supported"},
    {"deadline", 0, O_REFUSE, ARG_REQUIRED, "deadlines are not supported"},
    {"wait", 'W', O_REFUSE, ARG_NONE, "not supported"},
    {"clusters", 'M', O_REFUSE, ARG_REQUIRED, "one controller is one cluster"},
    {"wrap", 0, O_REFUSE, ARG_REQUIRED, "submit a script (or a job spec)"},
    {"tmp", 0, O_REFUSE, ARG_REQUIRED, "local disk is not a resource"},
    {"mincpus", 0, O_REFUSE, ARG_REQUIRED, "use --cpus-per-task"},
    {"switches", 0, O_REFUSE, ARG_REQUIRED, "use a job spec's topology"},
    {"export-file", 0, O_REFUSE, ARG_REQUIRED, "use --export"},
    {"uid", 0, O_REFUSE, ARG_REQUIRED, "jobs run as their owner"},
    {"gid", 0, O_REFUSE, ARG_REQUIRED, "jobs run as their owner"},
    {"priority", 0, O_REFUSE, ARG_REQUIRED, "the tenant's priority classes order its jobs"},
    {"container", 0, O_REFUSE, ARG_REQUIRED, "containers are not supported"},
    {"burst-buffer", 0, O_REFUSE, ARG_REQUIRED, "burst buffers are not supported"},
    {"gpus-per-socket", 0, O_REFUSE, ARG_REQUIRED, "use --gpus-per-node or --gpus-per-task"},
    {"cpus-per-gpu-bind", 0, O_REFUSE, ARG_REQUIRED, "not supported"},
    {"overcommit", 'O', O_REFUSE, ARG_NONE, "a task gets its own CPUs"},
    {"test-only", 0, O_REFUSE, ARG_NONE, "use tessera sbatch --dry-run"},
};
#define NOPTS (sizeof OPTS / sizeof OPTS[0])

/* ---- errors and warnings ------------------------------------------------------------- */

static void add_msg(char (*msgs)[TS_ERR_MSG_MAX], int max, int *n, int *more, const char *fmt,
                    va_list ap)
{
    if (*n >= max) {
        if (more)
            (*more)++;
        return;
    }
    char *m = msgs[(*n)++];
    vsnprintf(m, TS_ERR_MSG_MAX, fmt, ap);
    /* one line of printable text: values are quoted as given */
    for (unsigned char *p = (unsigned char *)m; *p; p++)
        if (*p < 0x20 || *p == 0x7f || *p >= 0x80)
            *p = '?';
}

void sbatch_error(ts_spec_errors *errs, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    add_msg(errs->msg, TS_SPEC_MAX_ERRORS, &errs->n, &errs->more, fmt, ap);
    va_end(ap);
}

void sbatch_warn(ts_sbatch *sb, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    add_msg(sb->warnings, TS_SBATCH_MAX_WARNINGS, &sb->nwarnings, NULL, fmt, ap);
    va_end(ap);
}

const char *sbatch_at(const struct sbatch_req *r, int id)
{
    return id >= 0 && id < O_OPTS && r->at[id] ? r->at[id] : "";
}

void sbatch_req_free(struct sbatch_req *r)
{
    for (int i = 0; i < O_OPTS; i++)
        free(r->at[i]);
    free(r->name);
    free(r->array);
    free(r->qos);
    free(r->account);
    free(r->partition);
    free(r->output);
    free(r->error);
    free(r->chdir);
    free(r->image);
    free(r->export_list);
    free(r->dependency);
    free(r->constraint);
    free(r->nodelist);
    free(r->exclude);
    free(r->reservation);
    free(r->mail_user);
    memset(r, 0, sizeof *r);
}

/* ---- words and options --------------------------------------------------------------- */

static const struct sopt *find_long(const char *name, size_t len)
{
    for (size_t i = 0; i < NOPTS; i++)
        if (strlen(OPTS[i].name) == len && strncmp(OPTS[i].name, name, len) == 0)
            return &OPTS[i];
    return NULL;
}

static const struct sopt *find_short(char c)
{
    for (size_t i = 0; i < NOPTS; i++)
        if (OPTS[i].short_name == c)
            return &OPTS[i];
    return NULL;
}

/* Reads words[0..n) as options; returns 0 or TS_ENOMEM. */
static int read_options(struct sbatch_req *r, char **words, int n, int src, const char *where,
                        ts_sbatch *sb, ts_spec_errors *errs)
{
    for (int i = 0; i < n; i++) {
        const char *w = words[i];
        const struct sopt *o;
        const char *v = NULL;
        char shown[80];
        if (w[0] == '-' && w[1] == '-' && w[2]) {
            const char *eq = strchr(w + 2, '=');
            size_t len = eq ? (size_t)(eq - w - 2) : strlen(w + 2);
            o = find_long(w + 2, len);
            snprintf(shown, sizeof shown, "--%.*s", (int)(len > 60 ? 60 : len), w + 2);
            if (!o) {
                sbatch_error(errs, "%s%s: unknown option", where, shown);
                continue;
            }
            if (eq && o->arg == ARG_NONE) {
                sbatch_error(errs, "%s%s: takes no value", where, shown);
                continue;
            }
            v = eq ? eq + 1 : NULL;
        } else if (w[0] == '-' && w[1] && w[1] != '-') {
            o = find_short(w[1]);
            snprintf(shown, sizeof shown, "-%c", w[1]);
            if (!o) {
                sbatch_error(errs, "%s%s: unknown option", where, shown);
                continue;
            }
            if (w[2] && o->arg == ARG_NONE) {
                sbatch_error(errs, "%s%s: takes no value (got \"%s\")", where, shown, w);
                continue;
            }
            v = w[2] ? w + 2 : NULL;
        } else {
            sbatch_error(errs, "%s\"%.60s\": not an option (options start with - or --)", where,
                         w);
            continue;
        }
        if (o->arg == ARG_REQUIRED && !v) {
            if (i + 1 >= n) {
                sbatch_error(errs, "%s--%s: needs a value", where, o->name);
                continue;
            }
            v = words[++i];
        }
        int rc = sbatch_apply(r, o, v, src, where, sb, errs);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* Splits a directive's text into words as a shell would: blanks separate,
 * '...' and "..." quote, backslash escapes, an unquoted word starting with
 * '#' ends the line. Returns the count, -1 on an unterminated quote, -2 on
 * too many words, -3 out of memory. The words live in *buf (free it). */
static int split_words(const char *s, size_t len, char **words, int max, char **buf)
{
    char *out = malloc(len + 1);
    if (!out)
        return -3;
    *buf = out;
    int n = 0;
    size_t i = 0, o = 0;
    for (;;) {
        while (i < len && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r'))
            i++;
        if (i >= len || s[i] == '#')
            return n;
        if (n == max)
            return -2;
        words[n++] = out + o;
        char quote = 0;
        while (i < len) {
            char c = s[i];
            if (quote) {
                if (c == quote) {
                    quote = 0;
                } else if (quote == '"' && c == '\\' && i + 1 < len &&
                           (s[i + 1] == '"' || s[i + 1] == '\\')) {
                    out[o++] = s[++i];
                } else {
                    out[o++] = c;
                }
            } else if (c == ' ' || c == '\t' || c == '\r') {
                break;
            } else if (c == '\'' || c == '"') {
                quote = c;
            } else if (c == '\\' && i + 1 < len) {
                out[o++] = s[++i];
            } else {
                out[o++] = c;
            }
            i++;
        }
        if (quote)
            return -1;
        out[o++] = '\0';
    }
}

/* The script's directives (see the top of the file). */
static int read_script(struct sbatch_req *r, const char *script, size_t len, const char *name,
                       ts_sbatch *sb, ts_spec_errors *errs)
{
    size_t pos = 0, ll;
    int line = 0;
    const char *ls;
    while ((ls = sbatch_next_line(script, len, &pos, &ll))) {
        line++;
        size_t k = 0;
        while (k < ll && (ls[k] == ' ' || ls[k] == '\t' || ls[k] == '\r'))
            k++;
        if (k == ll)
            continue;          /* blank */
        if (ls[k] != '#')
            break;             /* the first command: no directives after it */
        size_t dl = strlen(DIRECTIVE);
        if (k != 0 || ll < dl || strncmp(ls, DIRECTIVE, dl) != 0)
            continue;          /* a comment (sbatch wants #SBATCH at the line's start) */
        if (ll > dl && ls[dl] != ' ' && ls[dl] != '\t')
            continue;          /* "#SBATCHX" is a comment too */
        char where[320];
        snprintf(where, sizeof where, "%.256s:%d: ", name, line);
        char *words[MAX_WORDS_PER_LINE], *buf = NULL;
        int n = split_words(ls + dl, ll - dl, words, MAX_WORDS_PER_LINE, &buf);
        int rc = 0;
        if (n == -3)
            rc = TS_ENOMEM;
        else if (n == -1)
            sbatch_error(errs, "%s#SBATCH: unterminated quote", where);
        else if (n == -2)
            sbatch_error(errs, "%s#SBATCH: more than %d words on one line", where,
                         MAX_WORDS_PER_LINE);
        else
            rc = read_options(r, words, n, SRC_SCRIPT, where, sb, errs);
        free(buf);
        if (rc != 0)
            return rc;
    }
    return 0;
}

int sbatch_read(const char *script, size_t len, const ts_sbatch_input *in, struct sbatch_req *r,
                ts_sbatch *sb, ts_spec_errors *errs)
{
    const char *name = in->script_name && *in->script_name ? in->script_name : "script";
    int rc = read_script(r, script, len, name, sb, errs);
    if (rc == 0)
        sbatch_lint(script, len, name, sb);
    if (rc == 0 && in->argc > 0)
        rc = read_options(r, (char **)in->argv, in->argc, SRC_CLI, "", sb, errs);
    return rc;
}

/* ---- the entry point ----------------------------------------------------------------- */

/* Everything ends up in JSON strings, which must be UTF-8. */
static bool utf8_ok(const char *s, size_t len)
{
    json_t *t = json_stringn(s, len);
    bool ok = t != NULL;
    json_decref(t);
    return ok;
}

void ts_sbatch_free(ts_sbatch *sb)
{
    if (!sb)
        return;
    free(sb->shape.array);
    free(sb->spec_json);
    free(sb);
}

int ts_sbatch_parse(const char *script, size_t len, const ts_sbatch_input *in, ts_sbatch **out,
                    ts_spec_errors *errs)
{
    memset(errs, 0, sizeof *errs);
    *out = NULL;
    const char *name = in->script_name && *in->script_name ? in->script_name : "script";
    if (len > TS_SBATCH_MAX_BYTES) {
        sbatch_error(errs, "%.256s: larger than %d bytes", name, TS_SBATCH_MAX_BYTES);
        return TS_EINVAL;
    }
    if (len < 2 || script[0] != '#' || script[1] != '!') {
        sbatch_error(errs, "%.256s: not a batch script: the first line must be #! and the "
                     "interpreter", name);
        return TS_EINVAL;
    }
    if (memchr(script, '\0', len)) {
        sbatch_error(errs, "%.256s: holds a NUL byte", name);
        return TS_EINVAL;
    }
    if (!utf8_ok(script, len)) {
        sbatch_error(errs, "%.256s: not valid UTF-8", name);
        return TS_EINVAL;
    }
    const char *cr = memchr(script, '\r', len);
    if (cr && cr + 1 < script + len && cr[1] == '\n') {
        /* as sbatch: the body would run with '\r' in every word
         * ("mkdir out\r"), which no directive shows */
        int line = 1;
        for (const char *p = script; p < cr; p++)
            line += *p == '\n';
        sbatch_error(errs, "%.256s:%d: DOS line breaks (\\r\\n) instead of UNIX ones (\\n): "
                     "convert it first (dos2unix %.256s)", name, line, name);
        return TS_EINVAL;
    }
    for (int i = 0; i < in->argc; i++)
        if (!utf8_ok(in->argv[i], strlen(in->argv[i])))
            sbatch_error(errs, "option %d: not valid UTF-8", i + 1);
    for (int i = 0; i < in->nargs; i++)
        if (!utf8_ok(in->script_args[i], strlen(in->script_args[i])))
            sbatch_error(errs, "argument %d: not valid UTF-8", i + 1);
    if ((in->tenant && !utf8_ok(in->tenant, strlen(in->tenant))) ||
        (in->submit_dir && !utf8_ok(in->submit_dir, strlen(in->submit_dir))) ||
        !utf8_ok(name, strlen(name)))
        sbatch_error(errs, "%.256s: the tenant, directory or script name is not valid UTF-8",
                     name);
    if (errs->n > 0)
        return TS_EINVAL;
    ts_sbatch *sb = calloc(1, sizeof *sb);
    if (!sb)
        return TS_ENOMEM;
    struct sbatch_req r = {0};
    int rc = sbatch_read(script, len, in, &r, sb, errs);
    /* with the directives' errors too: every error of the script at once,
     * those found only when the whole of it is read included */
    if (rc == 0)
        rc = sbatch_build(script, len, in, &r, sb, errs);
    sbatch_req_free(&r);
    if (rc == 0 && errs->n > 0)
        rc = TS_EINVAL;
    if (rc != 0) {
        if (rc == TS_ENOMEM && errs->n == 0)
            sbatch_error(errs, "out of memory");
        ts_sbatch_free(sb);
        return rc;
    }
    *out = sb;
    return 0;
}

int ts_sbatch_option_takes_next(const char *w)
{
    const struct sopt *o = NULL;
    if (w[0] == '-' && w[1] == '-' && w[2] && !strchr(w, '='))
        o = find_long(w + 2, strlen(w + 2));
    else if (w[0] == '-' && w[1] && w[1] != '-' && !w[2])
        o = find_short(w[1]);
    return o && o->arg == ARG_REQUIRED;
}
