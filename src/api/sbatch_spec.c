/*
 * sbatch_spec.c - a Slurm request (sbatch.c) as a Tessera job spec.
 *
 * Slurm counts a job's resources per node (--mem, --gpus-per-node, gres) or
 * for the whole job (--gpus); Tessera's unit is the task, a rank with its own
 * GPUs, CPUs and memory (docs/job-spec.md). So the request is first resolved
 * into the shape both agree on - nodes, tasks, GPUs, CPUs, memory, time,
 * array - with Slurm's defaults (one task per node, one node, one CPU per
 * task), and the spec is one group of identical tasks with an even share.
 * A request that cannot be shared evenly (6 GPUs over 4 tasks) is an error
 * rather than a rounding. The spec built is checked by the spec parser
 * itself before it is returned, so what the CLI sends is a valid spec.
 * The QOS/account/partition map (ts_sbatch_map_*) lives here too.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "api/sbatch_req.h"
#include "api/spec_scalar.h"
#include "tessera/model.h"

#define SPEC_MEM_MAX_MIB 67108864LL
#define SPEC_GPUS_PER_TASK_MAX 16
#define SPEC_TASKS_MAX 65536L
#define SECONDS_PER_MINUTE 60
#define MILLI_PER_CPU 1000

/* ---- the name map -------------------------------------------------------------------- */

struct map_entry {
    char kind[16];
    char name[TS_SPEC_NAME_MAX];
    char value[TS_SPEC_NAME_MAX];
};

struct ts_sbatch_map {
    struct map_entry *e;
    int n;
};

void ts_sbatch_map_free(ts_sbatch_map *map)
{
    if (map) {
        free(map->e);
        free(map);
    }
}

static bool name_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n >= TS_SPEC_NAME_MAX)
        return false;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && *s != '.' && *s != '_' && *s != '-')
            return false;
    return true;
}

int ts_sbatch_map_parse(const char *buf, size_t len, ts_sbatch_map **out, ts_err *err)
{
    *out = NULL;
    if (len > TS_SBATCH_MAP_MAX_BYTES)
        return ts_err_set(err, TS_EINVAL, "slurm map: larger than %d bytes",
                          TS_SBATCH_MAP_MAX_BYTES);
    ts_sbatch_map *m = calloc(1, sizeof *m);
    if (!m)
        return ts_err_set(err, TS_ENOMEM, "out of memory");
    size_t pos = 0, ll;
    int line = 0;
    const char *ls;
    while ((ls = sbatch_next_line(buf, len, &pos, &ll))) {
        line++;
        char text[256];
        if (memchr(ls, '#', ll))
            ll = (size_t)((const char *)memchr(ls, '#', ll) - ls);
        if (ll >= sizeof text) {
            ts_sbatch_map_free(m);
            return ts_err_set(err, TS_EINVAL, "slurm map:%d: longer than %zu bytes", line,
                              sizeof text - 1);
        }
        memcpy(text, ls, ll);
        text[ll] = '\0';
        if (memchr(text, '\0', ll)) {
            ts_sbatch_map_free(m);
            return ts_err_set(err, TS_EINVAL, "slurm map:%d: holds a NUL byte", line);
        }
        char *save = NULL, *w[4];
        int nw = 0;
        for (char *t = strtok_r(text, " \t\r", &save); t; t = strtok_r(NULL, " \t\r", &save))
            w[nw < 4 ? nw : 3] = t, nw++;
        if (nw == 0)
            continue;
        if (nw != 3) {
            ts_sbatch_map_free(m);
            return ts_err_set(err, TS_EINVAL, "slurm map:%d: must be KIND NAME VALUE "
                              "(qos, account or partition)", line);
        }
        bool qos = strcmp(w[0], "qos") == 0;
        if (!qos && strcmp(w[0], "account") != 0 && strcmp(w[0], "partition") != 0) {
            ts_sbatch_map_free(m);
            return ts_err_set(err, TS_EINVAL, "slurm map:%d: kind must be qos, account or "
                              "partition", line);
        }
        if (!name_ok(w[1]) || !name_ok(w[2])) {
            ts_sbatch_map_free(m);
            return ts_err_set(err, TS_EINVAL, "slurm map:%d: names are 1..63 of A-Z a-z 0-9 "
                              ". _ -", line);
        }
        if (qos && strcmp(w[2], "guaranteed") != 0 && strcmp(w[2], "opportunistic") != 0) {
            ts_sbatch_map_free(m);
            return ts_err_set(err, TS_EINVAL, "slurm map:%d: a qos maps to guaranteed or "
                              "opportunistic", line);
        }
        if (m->n == TS_SBATCH_MAP_MAX_ENTRIES) {
            ts_sbatch_map_free(m);
            return ts_err_set(err, TS_EINVAL, "slurm map: more than %d entries",
                              TS_SBATCH_MAP_MAX_ENTRIES);
        }
        if (sbatch_map_get(m, w[0], w[1])) {
            ts_sbatch_map_free(m);
            return ts_err_set(err, TS_EINVAL, "slurm map:%d: %s %s is mapped twice", line, w[0],
                              w[1]);
        }
        struct map_entry *e = realloc(m->e, (size_t)(m->n + 1) * sizeof *e);
        if (!e) {
            ts_sbatch_map_free(m);
            return ts_err_set(err, TS_ENOMEM, "out of memory");
        }
        m->e = e;
        snprintf(e[m->n].kind, sizeof e[m->n].kind, "%s", w[0]);
        snprintf(e[m->n].name, sizeof e[m->n].name, "%s", w[1]);
        snprintf(e[m->n].value, sizeof e[m->n].value, "%s", w[2]);
        m->n++;
    }
    *out = m;
    return 0;
}

const char *sbatch_map_get(const ts_sbatch_map *map, const char *kind, const char *name)
{
    for (int i = 0; map && i < map->n; i++)
        if (strcmp(map->e[i].kind, kind) == 0 && strcmp(map->e[i].name, name) == 0)
            return map->e[i].value;
    return NULL;
}

/* ---- the shape ----------------------------------------------------------------------- */

/* A gres type as a Tessera GPU model: the exact name, else a case-blind
 * match of the whole name or of its part before '-' ("h100" = H100-80GB),
 * if only one model matches. NULL with *ambiguous set when several do. */
static const char *gpu_model(const char *type, bool *ambiguous)
{
    *ambiguous = false;
    int m = ts_gpu_model_lookup(type);
    if (m >= 0)
        return ts_gpu_model_get(m)->name;
    const char *found = NULL;
    int hits = 0;
    for (int i = 0; i < ts_gpu_model_count(); i++) {
        const char *name = ts_gpu_model_get(i)->name;
        size_t base = strcspn(name, "-");
        if (strcasecmp(name, type) == 0)
            return name;
        if (strlen(type) == base && strncasecmp(name, type, base) == 0) {
            found = name;
            hits++;
        }
    }
    *ambiguous = hits > 1;
    return hits == 1 ? found : NULL;
}

/* The job's GPUs (s->gpus, per task) and model from --gpus, --gpus-per-node,
 * --gres or --gpus-per-task over T tasks on N nodes; false when they are
 * not a Tessera shape (said). */
static bool resolve_gpus(const struct sbatch_req *r, ts_sbatch_shape *s, long N, long T,
                         long long *gpus, const char **model, ts_spec_errors *errs)
{
    long long G = 0;
    const char *gopt = "--gpus";
    int gid = O_GPUS;
    switch (r->gpu_kind) {
    case GPU_TOTAL: G = r->gpu_n; break;
    case GPU_PER_NODE: G = (long long)r->gpu_n * N; gopt = "--gpus-per-node"; gid = O_GPN; break;
    case GPU_GRES: G = (long long)r->gpu_n * N; gopt = "--gres"; gid = O_GRES; break;
    case GPU_PER_TASK: G = (long long)r->gpu_n * T; gopt = "--gpus-per-task"; gid = O_GPT; break;
    default: break;
    }
    char gat[400]; /* where it was given, then its name: "train.sh:4: --gres" */
    snprintf(gat, sizeof gat, "%s%s", sbatch_at(r, gid), gopt);
    gopt = gat;
    if (G % T != 0) {
        sbatch_error(errs, "%s: %lld GPUs over %ld tasks: every task gets the same whole GPUs "
                     "in Tessera; ask for a multiple of the tasks (or use --gpus-per-task)",
                     gopt, G, T);
        return false;
    }
    if (G / T > SPEC_GPUS_PER_TASK_MAX) {
        sbatch_error(errs, "%s: %lld GPUs per task, more than %d (a task's GPUs are on one "
                     "node): use more tasks (--ntasks)", gopt, G / T, SPEC_GPUS_PER_TASK_MAX);
        return false;
    }
    s->gpus = (int)G;
    s->gpus_per_task = (int)(G / T);
    *model = NULL;
    if (r->gpu_type[0]) {
        bool amb;
        *model = gpu_model(r->gpu_type, &amb);
        if (!*model) {
            sbatch_error(errs, "%s: %s GPU type \"%s\" (Tessera's models: P100, T4, V100M16, "
                         "V100M32, A10, A100-40GB, A100-80GB, H100-80GB, H200-141GB, ...)",
                         gopt, amb ? "ambiguous" : "unknown", r->gpu_type);
            return false;
        }
        if (G == 0) {
            sbatch_error(errs, "%s: a GPU type with 0 GPUs", gopt);
            return false;
        }
    }
    *gpus = G;
    return true;
}

static int resolve(const struct sbatch_req *r, ts_sbatch_shape *s, const char **model,
                   ts_spec_errors *errs)
{
    long ntpn = r->ntasks_per_node;
    long T, N;
    if (r->ntasks) {
        T = r->ntasks;
        N = r->nodes ? r->nodes : ntpn ? (T + ntpn - 1) / ntpn : 1;
    } else {
        N = r->nodes ? r->nodes : 1;
        T = ntpn ? N * ntpn : N;
    }
    int before = errs->n;
    if (T < N)
        sbatch_error(errs, "%s--ntasks: %ld tasks cannot fill %ld nodes (--nodes)",
                     sbatch_at(r, O_NTASKS), T, N);
    if (r->nodes && ntpn && r->ntasks && T > N * ntpn)
        sbatch_error(errs, "%s--ntasks: %ld tasks do not fit %ld nodes of %ld tasks "
                     "(--ntasks-per-node)", sbatch_at(r, O_NTASKS), T, N, ntpn);
    if (T > SPEC_TASKS_MAX)
        sbatch_error(errs, "%s--ntasks: %ld tasks, more than %ld", sbatch_at(r, O_NTASKS), T,
                     SPEC_TASKS_MAX);
    if (errs->n > before)
        return 0;
    s->nodes = (int)N;
    s->nodes_given = r->nodes > 0;
    s->ntasks = (int)T;

    long long G = 0;
    if (!resolve_gpus(r, s, N, T, &G, model, errs))
        return 0;

    long c = r->cpus_per_task ? r->cpus_per_task : 1;
    if (r->cpus_per_gpu) {
        if (r->cpus_per_task) {
            sbatch_error(errs, "%s--cpus-per-gpu: give --cpus-per-task or --cpus-per-gpu, not both",
                         sbatch_at(r, O_CPG));
            return 0;
        }
        if (G == 0) {
            sbatch_error(errs, "%s--cpus-per-gpu: the job asks for no GPUs", sbatch_at(r, O_CPG));
            return 0;
        }
        c = r->cpus_per_gpu * s->gpus_per_task;
    }
    s->cpus_per_task = (int)c;

    long long per_task = 0, total = 0;
    switch (r->mem_kind) {
    case MEM_PER_NODE:
        total = (long long)r->mem_mib * N;
        per_task = (total + T - 1) / T;
        break;
    case MEM_PER_CPU:
        per_task = (long long)r->mem_mib * c;
        total = per_task * T;
        break;
    case MEM_PER_GPU:
        if (G == 0) {
            sbatch_error(errs, "%s--mem-per-gpu: the job asks for no GPUs",
                         sbatch_at(r, O_MEM_GPU));
            return 0;
        }
        per_task = (long long)r->mem_mib * s->gpus_per_task;
        total = (long long)r->mem_mib * G;
        break;
    default:
        break;
    }
    if (per_task > SPEC_MEM_MAX_MIB) {
        sbatch_error(errs, "%s--mem: %lld MiB per task, more than %lld",
                     sbatch_at(r, r->mem_kind == MEM_PER_NODE ? O_MEM : r->mem_kind == MEM_PER_CPU
                                                                         ? O_MEM_CPU
                                                                         : O_MEM_GPU),
                     per_task, SPEC_MEM_MAX_MIB);
        return 0;
    }
    s->mem_mib = total;
    s->mem_per_task_mib = per_task;
    s->time_limit_min = r->time_min;
    if (r->array) {
        s->array = strdup(r->array);
        if (!s->array)
            return TS_ENOMEM;
        s->array_count = (int)r->array_count;
        s->array_throttle = (int)r->array_throttle;
    }
    return 0;
}

/* ---- the command --------------------------------------------------------------------- */

#define SHEBANG_WORDS_MAX 8

/* Run as `python -c PYTHON_BOOT TEXT FILE ARGS`: the script's text runs in
 * __main__ with __file__ and sys.argv[0] its FILE, compiled under that name. */
#define PYTHON_BOOT                                                                             \
    "import sys as _s;_s.argv.pop(0);_t=_s.argv.pop(0);__file__=_s.argv[0];del _s;"        \
    "exec(compile(globals().pop('_t'),__file__,'exec'))"

static bool interp_known(const char *base, bool *shell)
{
    static const char *const shells[] = {"sh", "bash", "dash", "zsh", "ksh"};
    for (size_t i = 0; i < sizeof shells / sizeof shells[0]; i++)
        if (strcmp(base, shells[i]) == 0)
            return *shell = true;
    *shell = false;
    if (strncmp(base, "python", 6) != 0)
        return false;
    for (const char *p = base + 6; *p; p++)
        if (!isdigit((unsigned char)*p) && *p != '.')
            return false;
    return true;
}

/* A --output/--error pattern as one shell double-quoted word, its %
 * replacements read from the task's environment when it starts. */
static bool pattern_word(const char *pat, char *out, size_t size, const char **why)
{
    size_t o = 0;
    out[o++] = '"';
    for (const char *p = pat; *p; p++) {
        const char *add = NULL;
        char one[3] = {0};
        if (*p == '%') {
            switch (p[1]) {
            case '%': add = "%"; break;
            case 'j': add = "${SLURM_JOB_ID}"; break;
            case 'A': add = "${SLURM_ARRAY_JOB_ID:-${SLURM_JOB_ID}}"; break;
            case 'a': add = "${SLURM_ARRAY_TASK_ID:-4294967294}"; break;
            case 'x': add = "${SLURM_JOB_NAME}"; break;
            case 'u': add = "${USER}"; break;
            case 'N': add = "$(uname -n)"; break;
            case 't': add = "${SLURM_PROCID}"; break;
            case 'n': add = "${SLURM_NODEID:-0}"; break;
            case 's': add = "batch"; break;
            default:
                *why = "a % pattern must be one of %%, %j, %A, %a, %x, %u, %N, %t, %n, %s "
                       "(no padding)";
                return false;
            }
            p++;
        } else if (*p == '"' || *p == '\\' || *p == '$' || *p == '`') {
            one[0] = '\\';
            one[1] = *p;
            add = one;
        } else {
            one[0] = *p;
            add = one;
        }
        size_t al = strlen(add);
        if (o + al + 2 > size) {
            *why = "too long";
            return false;
        }
        memcpy(out + o, add, al);
        o += al;
    }
    out[o++] = '"';
    out[o] = '\0';
    return true;
}

static json_t *build_command(const char *script, size_t len, const ts_sbatch_input *in,
                             const struct sbatch_req *r, ts_spec_errors *errs)
{
    const char *nl = memchr(script, '\n', len);
    size_t ll = nl ? (size_t)(nl - script) : len;
    char line[512];
    if (ll - 2 >= sizeof line) {
        sbatch_error(errs, "script: the #! line is longer than %zu bytes", sizeof line - 1);
        return NULL;
    }
    memcpy(line, script + 2, ll - 2);
    line[ll - 2] = '\0';
    char *w[SHEBANG_WORDS_MAX], *save = NULL;
    int nw = 0;
    for (char *t = strtok_r(line, " \t\r", &save); t; t = strtok_r(NULL, " \t\r", &save)) {
        if (nw == SHEBANG_WORDS_MAX) {
            sbatch_error(errs, "script: more than %d words on the #! line", SHEBANG_WORDS_MAX);
            return NULL;
        }
        w[nw++] = t;
    }
    if (nw == 0 || w[0][0] != '/') {
        sbatch_error(errs, "script: the #! line must name an interpreter by its absolute path");
        return NULL;
    }
    /* "#!/usr/bin/env [-S] python3": the interpreter is the first word after env's options */
    const char *base = strrchr(w[0], '/') + 1;
    if (strcmp(base, "env") == 0) {
        int k = 1;
        while (k < nw && w[k][0] == '-')
            k++;
        base = k < nw ? w[k] : "";
    }
    bool shell;
    if (!interp_known(base, &shell)) {
        sbatch_error(errs, "script: interpreter \"%s\": Tessera runs a script as INTERPRETER -c "
                     "TEXT, which only sh, bash, dash, zsh, ksh and python take", base);
        return NULL;
    }
    json_t *argv = json_array();
    if (!argv)
        return NULL;
    if (r->output || r->error) {
        char out[2 * TS_SBATCH_VALUE_MAX + 64], err[2 * TS_SBATCH_VALUE_MAX + 64];
        char code[8 * TS_SBATCH_VALUE_MAX + 512];
        const char *why = NULL;
        if (r->output && !pattern_word(r->output, out, sizeof out, &why)) {
            sbatch_error(errs, "%s--output: %s, got \"%s\"", sbatch_at(r, O_OUTPUT), why, r->output);
            json_decref(argv);
            return NULL;
        }
        if (r->error && !pattern_word(r->error, err, sizeof err, &why)) {
            sbatch_error(errs, "%s--error: %s, got \"%s\"", sbatch_at(r, O_ERROR), why, r->error);
            json_decref(argv);
            return NULL;
        }
        /* the files first go to the note the agent reads them back by, so
         * that a failed rank's last output is still reported
         * (docs/agent-tasks.md, TESSERA_OUTPUT_NOTE) */
        static const char NOTE[] =
            "[ -z \"$TESSERA_OUTPUT_NOTE\" ] || printf '%%s\\n%%s\\n' %s %s "
            ">\"$TESSERA_OUTPUT_NOTE\"; ";
        int k = snprintf(code, sizeof code, NOTE, r->output ? out : "\"\"",
                         r->error ? err : r->output ? out : "\"\"");
        if (k < 0 || (size_t)k >= sizeof code)
            k = 0;
        /* a file that cannot be opened (its folder missing): the shell's
         * message stays in the agent's log, which the emptied note points
         * back to, so that the job's why and tessera logs show it */
        static const char FAILED[] =
            " || { [ -z \"$TESSERA_OUTPUT_NOTE\" ] || : >\"$TESSERA_OUTPUT_NOTE\"; exit 2; }; "
            "exec \"$@\"";
        if (r->output && r->error)
            snprintf(code + k, sizeof code - (size_t)k, "command exec >>%s 2>>%s%s", out, err,
                     FAILED);
        else if (r->output)
            snprintf(code + k, sizeof code - (size_t)k, "command exec >>%s 2>&1%s", out, FAILED);
        else
            snprintf(code + k, sizeof code - (size_t)k, "command exec 2>>%s%s", err, FAILED);
        json_array_append_new(argv, json_string("/bin/sh"));
        json_array_append_new(argv, json_string("-c"));
        json_array_append_new(argv, json_string(code));
        json_array_append_new(argv, json_string("sbatch-output"));
    }
    for (int i = 0; i < nw; i++)
        json_array_append_new(argv, json_string(w[i]));
    json_array_append_new(argv, json_string("-c"));
    const char *name = in->script_name && *in->script_name ? in->script_name : "script";
    if (shell) { /* sh -c TEXT NAME ARGS: $0 is the script's name */
        json_array_append_new(argv, json_stringn(script, len));
        json_array_append_new(argv, json_string(name));
    } else {
        /* python -c BOOT TEXT FILE ARGS: BOOT runs TEXT as the script FILE
         * (the path it had at submit), so __file__, sys.argv[0] and its
         * tracebacks name it, as they would run from a file */
        json_array_append_new(argv, json_string(PYTHON_BOOT));
        json_array_append_new(argv, json_stringn(script, len));
        char file[4096];
        if (name[0] != '/' && in->submit_dir && *in->submit_dir)
            snprintf(file, sizeof file, "%s/%s", in->submit_dir, name);
        else
            snprintf(file, sizeof file, "%s", name);
        json_array_append_new(argv, json_string(file));
    }
    for (int i = 0; i < in->nargs; i++)
        json_array_append_new(argv, json_string(in->script_args[i]));
    return argv;
}

/* ---- the environment ----------------------------------------------------------------- */

/* o's key set to the string v when an option gave it (v not NULL). */
static void set_given(json_t *o, const char *key, const char *v)
{
    if (v)
        json_object_set_new(o, key, json_string(v));
}

static const char *env_lookup(const char *const *environ, const char *name)
{
    size_t n = strlen(name);
    for (const char *const *e = environ; e && *e; e++)
        if (strncmp(*e, name, n) == 0 && (*e)[n] == '=')
            return *e + n + 1;
    return NULL;
}

/* Variables the job must not take from the submitting shell: Tessera's own
 * (the API token above all) and Slurm's, which the agent sets per task. */
static bool env_private(const char *name)
{
    return strncmp(name, "TESSERA_", 8) == 0 || strncmp(name, "SLURM_", 6) == 0 ||
           strncmp(name, "SBATCH_", 7) == 0;
}

static bool is_secret(const ts_sbatch_input *in, const char *name)
{
    for (int i = 0; i < in->nsecrets; i++)
        if (strcmp(in->secrets[i], name) == 0)
            return true;
    return false;
}

/* Every variable of the shell but private ones; credential-looking ones
 * and those passed as secrets are left out, the former named in `dropped`
 * ("A, B"). */
static void export_all(json_t *env, const ts_sbatch_input *in, json_t *dropped)
{
    for (const char *const *e = in->environ; e && *e; e++) {
        const char *eq = strchr(*e, '=');
        if (!eq || (size_t)(eq - *e) >= TS_SPEC_ENV_NAME_MAX)
            continue;
        char name[TS_SPEC_ENV_NAME_MAX];
        memcpy(name, *e, (size_t)(eq - *e));
        name[eq - *e] = '\0';
        if (!api_spec_env_name_ok(name) || env_private(name) || is_secret(in, name))
            continue;
        if (sbatch_env_credential(name))
            json_object_set_new(dropped, name, json_true());
        else
            json_object_set_new(env, name, json_string(eq + 1));
    }
}

/* An --export item naming a credential-looking variable not passed as a
 * secret: refused (its value would be stored with the job). */
static bool export_named_ok(const ts_sbatch_input *in, const char *item, ts_spec_errors *errs)
{
    if (!sbatch_env_credential(item) || is_secret(in, item))
        return true;
    sbatch_error(errs, "--export: %s looks like a credential (docs/slurm.md): store it with "
                 "'tessera secrets set %s' and submit with 'tessera sbatch --secret %s' "
                 "instead", item, item, item);
    return false;
}

static int str_cmp(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* One warning naming the variables left out, sorted. */
static void warn_dropped(ts_sbatch *sb, json_t *dropped)
{
    char names[400] = "";
    size_t n = json_object_size(dropped), len = 0, i = 0;
    const char **keys = n ? malloc(n * sizeof *keys) : NULL;
    const char *k;
    json_t *v;
    if (n && !keys)
        return; /* out of memory: the variables are left out all the same */
    json_object_foreach(dropped, k, v)
        keys[i++] = k;
    if (n > 1)
        qsort(keys, n, sizeof *keys, str_cmp);
    for (i = 0; i < n; i++) {
        int w = len < sizeof names ? snprintf(names + len, sizeof names - len, "%s%s",
                                              i ? ", " : "", keys[i]) : 0;
        len += w > 0 ? (size_t)w : 0;
    }
    free(keys);
    if (n > 0)
        sbatch_warn(sb, "--export: left out %zu variable%s that look%s like credentials: %s "
                    "(docs/slurm.md); to give one to the job: tessera secrets set NAME, then "
                    "tessera sbatch --secret NAME", n, n == 1 ? "" : "s", n == 1 ? "s" : "",
                    len < sizeof names ? names : "(too many to name)");
}

static json_t *build_env(const ts_sbatch_input *in, const struct sbatch_req *r,
                         ts_sbatch *sb, const char *name, ts_spec_errors *errs)
{
    const ts_sbatch_shape *s = &sb->shape;
    json_t *env = json_object(), *dropped = json_object();
    if (!env || !dropped) {
        json_decref(env);
        json_decref(dropped);
        return NULL;
    }
    const char *x = r->export_list;
    if (!x || strcmp(x, "ALL") == 0) {
        export_all(env, in, dropped);
    } else if (strcmp(x, "NONE") != 0 && strcmp(x, "NIL") != 0) {
        char *copy = strdup(x), *save = NULL;
        if (!copy) {
            json_decref(env);
            json_decref(dropped);
            return NULL;
        }
        for (char *item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
            char *eq = strchr(item, '=');
            if (eq)
                *eq = '\0';
            if (!export_named_ok(in, item, errs) || (is_secret(in, item) && !eq)) {
                continue; /* refused, or the secret gives it */
            } else if (eq) {
                json_object_set_new(env, item, json_string(eq + 1));
            } else if (strcmp(item, "ALL") == 0) {
                export_all(env, in, dropped);
            } else if (strcmp(item, "NONE") != 0 && strcmp(item, "NIL") != 0) {
                const char *v = env_lookup(in->environ, item);
                if (v && !json_object_get(env, item))
                    json_object_set_new(env, item, json_string(v));
            }
        }
        free(copy);
    }
    char num[32];
    json_object_set_new(env, "SLURM_JOB_NAME", json_string(name));
    set_given(env, "SLURM_SUBMIT_DIR", in->submit_dir);
    snprintf(num, sizeof num, "%d", s->cpus_per_task);
    json_object_set_new(env, "SLURM_CPUS_PER_TASK", json_string(num));
    if (r->ntasks_per_node) {
        snprintf(num, sizeof num, "%ld", r->ntasks_per_node);
        json_object_set_new(env, "SLURM_NTASKS_PER_NODE", json_string(num));
    }
    set_given(env, "SLURM_JOB_ACCOUNT", r->account);
    set_given(env, "SLURM_JOB_PARTITION", r->partition);
    set_given(env, "SLURM_JOB_QOS", r->qos);
    if (s->array) {
        json_object_set_new(env, "TESSERA_SLURM_ARRAY", json_string(s->array));
        snprintf(num, sizeof num, "%d", s->array_count);
        json_object_set_new(env, "SLURM_ARRAY_TASK_COUNT", json_string(num));
        snprintf(num, sizeof num, "%ld", ts_sbatch_array_nth(s->array, 0));
        json_object_set_new(env, "SLURM_ARRAY_TASK_MIN", json_string(num));
        snprintf(num, sizeof num, "%ld", ts_sbatch_array_nth(s->array, s->array_count - 1));
        json_object_set_new(env, "SLURM_ARRAY_TASK_MAX", json_string(num));
    }
    warn_dropped(sb, dropped);
    json_decref(dropped);
    return env;
}

/* ---- the spec ------------------------------------------------------------------------ */

static const char *pick_tenant(const ts_sbatch_input *in, const struct sbatch_req *r,
                               ts_sbatch *sb, ts_spec_errors *errs)
{
    if (in->tenant)
        return in->tenant;
    const char *acct = r->account ? sbatch_map_get(in->map, "account", r->account) : NULL;
    const char *part = r->partition ? sbatch_map_get(in->map, "partition", r->partition) : NULL;
    acct = acct ? acct : r->account;
    part = part ? part : r->partition;
    if (acct && part && strcmp(acct, part) != 0)
        sbatch_warn(sb, "--partition: ignored (\"%s\"): the tenant is --account's, \"%s\"",
                    r->partition, acct);
    const char *t = acct ? acct : part ? part : in->default_tenant;
    if (!t)
        sbatch_error(errs, TS_SBATCH_NO_TENANT " (or --partition) naming the tenant, "
                     "or tessera sbatch --tenant");
    else if (!name_ok(t))
        sbatch_error(errs, "%s: \"%s\" is not a tenant name (1..63 of A-Z a-z 0-9 . _ -)",
                     acct ? "--account" : "--partition", t);
    return t && name_ok(t) ? t : NULL;
}

/* The spec's keys that the options set one for one (array, dependency,
 * image, node selection, reservation, hold, nice, mail, secrets); a mail
 * option without its partner is a warning, as in Slurm. */
static void add_optional(json_t *spec, const struct sbatch_req *r, const ts_sbatch_shape *s,
                         const ts_sbatch_input *in, ts_sbatch *sb)
{
    if (s->array)
        json_object_set_new(spec, "array_size", json_integer(s->array_count));
    if (s->array && s->array_throttle > 0 && s->array_count > 1)
        json_object_set_new(spec, "array_throttle", json_integer(s->array_throttle));
    set_given(spec, "dependency", r->dependency);
    /* the script runs in the image, as pyxis runs it (docs/images.md) */
    set_given(spec, "image", r->image);
    if (r->image && (r->output || r->error))
        sbatch_warn(sb, "--%s: opened inside the container, not on the node (pyxis opens it "
                    "on the host): name a path in a folder mounted into it (docs/images.md "
                    "\"mounts\"), or leave it out and read tessera logs",
                    r->output ? "output" : "error");
    set_given(spec, "constraint", r->constraint);
    set_given(spec, "nodelist", r->nodelist);
    set_given(spec, "exclude", r->exclude);
    set_given(spec, "reservation", r->reservation);
    if (r->hold) /* submitted held: it waits for 'tessera release' */
        json_object_set_new(spec, "hold", json_true());
    if (r->nice_given && r->nice != 0)
        json_object_set_new(spec, "nice", json_integer(r->nice));
    if (r->mail_user && r->mail_on) { /* --mail-user, --mail-type: notify's mail */
        json_t *on = json_array(), *to = json_array();
        static const char *const NAMES[] = {"start", "end", "fail"};
        for (int b = 0; b < 3; b++)
            if (r->mail_on & (1u << b))
                json_array_append_new(on, json_string(NAMES[b]));
        for (const char *p = r->mail_user; *p;) {
            size_t l = strcspn(p, ",");
            json_array_append_new(to, json_stringn(p, l));
            p += l + (p[l] == ',');
        }
        json_object_set_new(spec, "notify", json_pack("{s:o,s:o}", "mail", to, "on", on));
    } else if (r->mail_user && !r->mail_type_given) {
        sbatch_warn(sb, "--mail-user: no mail is sent without --mail-type (as Slurm)");
    } else if (r->mail_on && !r->mail_user) {
        sbatch_warn(sb, "--mail-type: no mail is sent without --mail-user (tessera knows no "
                    "address for the submitting user)");
    }
    if (in->nsecrets > 0) {
        json_t *sec = json_array();
        for (int i = 0; sec && i < in->nsecrets; i++)
            json_array_append_new(sec, json_string(in->secrets[i]));
        json_object_set_new(spec, "secrets", sec);
    }
}

int sbatch_build(const char *script, size_t len, const ts_sbatch_input *in,
                 const struct sbatch_req *r, ts_sbatch *sb, ts_spec_errors *errs)
{
    ts_sbatch_shape *s = &sb->shape;
    const char *model = NULL;
    int rc = resolve(r, s, &model, errs);
    if (rc != 0) /* its errors do not stop the others below: every one at once */
        return rc;
    const char *tenant = pick_tenant(in, r, sb, errs);
    const char *tier = NULL;
    if (r->qos) {
        tier = sbatch_map_get(in->map, "qos", r->qos);
        if (!tier && (strcmp(r->qos, "guaranteed") == 0 || strcmp(r->qos, "opportunistic") == 0))
            tier = r->qos;
        if (!tier)
            sbatch_error(errs, "%s--qos: no tier for \"%s\" (guaranteed, opportunistic, or map it "
                         "in the slurm map: qos %s TIER)", sbatch_at(r, O_QOS), r->qos, r->qos);
    }
    const char *base = in->script_name && *in->script_name ? in->script_name : "script";
    if (strrchr(base, '/'))
        base = strrchr(base, '/') + 1;
    const char *name = r->name ? r->name : base;
    if (!name_ok(name))
        sbatch_error(errs, "%s--job-name: \"%s\" is not a Tessera job name (1..63 of A-Z a-z "
                     "0-9 . _ -)%s", sbatch_at(r, O_NAME), name,
                     r->name ? "" : "; the script's file name is the default");
    if (errs->n > 0)
        return 0;

    json_t *task = json_pack("{s:i,s:i,s:I}", "count", s->ntasks, "gpus", s->gpus_per_task,
                             "cpu_milli", (json_int_t)s->cpus_per_task * MILLI_PER_CPU);
    if (task && model)
        json_object_set_new(task, "gpu_model", json_string(model));
    if (task && s->mem_per_task_mib > 0)
        json_object_set_new(task, "memory_mib", json_integer(s->mem_per_task_mib));
    json_t *spec = json_pack("{s:s,s:s,s:[o]}", "tenant", tenant, "name", name, "tasks", task);
    json_t *argv = spec ? build_command(script, len, in, r, errs) : NULL;
    json_t *env = argv ? build_env(in, r, sb, name, errs) : NULL;
    if (!spec || !argv || !env) {
        json_decref(spec);
        json_decref(argv);
        json_decref(env);
        return errs->n > 0 ? 0 : TS_ENOMEM;
    }
    set_given(spec, "tier", tier);
    if (s->nodes_given && s->nodes == 1 && s->ntasks > 1)
        json_object_set_new(spec, "topology", json_pack("{s:s}", "required", "node"));
    /* --signal=SIG@N: Tessera signals at the time limit and kills after the
     * grace, so the limit is --time less N: SIG comes N s before --time and
     * the job ends at --time, as in Slurm */
    int64_t limit = s->time_limit_min * SECONDS_PER_MINUTE;
    if (limit > 0 && r->signal > 0 && r->signal_time_s >= limit) {
        sbatch_error(errs, "%s--signal: %ld seconds before the end is not within --time (%lld s)",
                     sbatch_at(r, O_SIGNAL),
                     r->signal_time_s, (long long)limit);
        json_decref(spec);
        json_decref(argv);
        json_decref(env);
        return 0;
    }
    if (limit > 0)
        json_object_set_new(spec, "time_limit",
                            json_integer(limit - (r->signal > 0 ? r->signal_time_s : 0)));
    if (r->signal > 0)
        json_object_set_new(spec, "checkpoint", json_pack("{s:i,s:i}", "signal", r->signal,
                                                          "grace", (int)r->signal_time_s));
    if (r->signal_batch)
        sbatch_warn(sb, "--signal: B: sends it to the script's whole process group (its "
                    "children too), not to the batch shell alone");
    json_object_set_new(spec, "command", argv);
    if (json_object_size(env) > TS_SPEC_MAX_ENV) {
        sbatch_error(errs, "--export: %zu variables, more than %d (use --export=NONE or a list)",
                     json_object_size(env), TS_SPEC_MAX_ENV);
        json_decref(env);
        json_decref(spec);
        return 0;
    }
    json_object_set_new(spec, "env", env);
    const char *wd = r->chdir ? r->chdir : in->submit_dir;
    char joined[2 * TS_SBATCH_VALUE_MAX + 2];
    if (wd && wd[0] != '/' && in->submit_dir && in->submit_dir[0] == '/') {
        snprintf(joined, sizeof joined, "%s/%s", in->submit_dir, wd);
        wd = joined;
    }
    if (wd && wd[0] != '/')
        sbatch_error(errs, "%s--chdir: \"%s\" is not an absolute path", sbatch_at(r, O_CHDIR), wd);
    else if (wd)
        json_object_set_new(spec, "workdir", json_string(wd));
    add_optional(spec, r, s, in, sb);
    if (errs->n > 0) {
        json_decref(spec);
        return 0;
    }
    sb->spec_json = json_dumps(spec, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(spec);
    if (!sb->spec_json)
        return TS_ENOMEM;
    /* the spec parser is the judge of what is sent */
    ts_job_spec *parsed = NULL;
    ts_spec_errors perrs;
    rc = ts_spec_parse(sb->spec_json, strlen(sb->spec_json), &parsed, &perrs);
    ts_spec_free(parsed);
    if (rc == TS_ENOMEM)
        return rc;
    for (int i = 0; rc != 0 && i < perrs.n; i++)
        sbatch_error(errs, "spec: %s", perrs.msg[i]);
    return 0;
}
