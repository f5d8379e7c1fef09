/*
 * cmd_sbatch.c - `tessera sbatch` (and `tessera submit SCRIPT`): a Slurm
 * batch script submitted as a Tessera job.
 *
 *   tessera sbatch [FLAGS] [SBATCH OPTIONS] SCRIPT [ARGS...]
 *
 * The line reads as sbatch's: options, then the script, then the script's
 * own arguments. The options are sbatch's (so -o is the output file here,
 * not tessera's output format; give that before the command). The
 * translation is libtessera's (include/tessera/sbatch.h): this file only
 * reads the files, passes the environment for --export, prints warnings and
 * errors, and posts the spec like `submit` does (with an idempotency key).
 * --dry-run prints the spec and the interpretation instead; the parity
 * bench (bench/slurm-parity) reads that.
 */
#include "cli/cli.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tessera/sbatch.h"

#define SBATCH_MAX_ARGS 4096
#define MAP_REL_PATH "tessera/slurm-map"
#define KEY_BYTES 16
#define RETRY_MAX 600

extern char **environ;

bool cli_submit_is_script(int argc, char **argv)
{
    if (argc == 0)
        return false;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0)
            break;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0 || strcmp(a, "--file") == 0 ||
            strncmp(a, "--file=", 7) == 0 || strncmp(a, "-f", 2) == 0)
            return false;
    }
    return true;
}

/* An idempotency key from the kernel's random source; NULL (none sent) if
 * it cannot be read. */
static const char *make_key(char out[2 * KEY_BYTES + 1])
{
    unsigned char raw[KEY_BYTES];
    FILE *f = fopen("/dev/urandom", "rb");
    size_t got = f ? fread(raw, 1, sizeof raw, f) : 0;
    if (f)
        fclose(f);
    if (got != sizeof raw)
        return NULL;
    for (size_t i = 0; i < sizeof raw; i++)
        snprintf(out + 2 * i, 3, "%02x", raw[i]);
    return out;
}

static int post_spec(struct cli_ctx *ctx, const char *spec, const char *key, const char *script)
{
    char made[2 * KEY_BYTES + 1];
    if (!key)
        key = make_key(made);
    struct cli_req req = {.method = "POST", .path = "/v1/jobs", .body = spec,
                          .body_len = strlen(spec), .content_type = "application/json",
                          .idempotency_key = key};
    struct cli_resp resp;
    int rc = cli_http(ctx, &req, &resp);
    if ((rc == CLI_EXIT_UNREACHABLE || rc == CLI_EXIT_SERVER) && key) {
        cli_errorf("the jobs may or may not have been created; to retry without creating them "
                   "twice, run the same sbatch line with --idempotency-key %s (script %.*s)",
                   key, RETRY_MAX, script);
        return rc;
    }
    if (rc != CLI_EXIT_OK)
        return rc;
    return cli_print_submitted(ctx, &resp);
}

/* The map: --slurm-map, else $TESSERA_SLURM_MAP, else the default file if
 * it exists. NULL map (all names map to themselves) when none. */
static int load_map(const char *flag, ts_sbatch_map **map)
{
    *map = NULL;
    const char *path = flag;
    char def[PATH_MAX];
    if (!path && getenv("TESSERA_SLURM_MAP") && *getenv("TESSERA_SLURM_MAP"))
        path = getenv("TESSERA_SLURM_MAP");
    if (!path) {
        const char *xdg = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
        if (xdg && xdg[0] == '/')
            snprintf(def, sizeof def, "%s/%s", xdg, MAP_REL_PATH);
        else if (home && *home)
            snprintf(def, sizeof def, "%s/.config/%s", home, MAP_REL_PATH);
        else
            return CLI_EXIT_OK;
        if (access(def, F_OK) != 0)
            return CLI_EXIT_OK; /* the default file is optional; a named one is not */
        path = def;
    }
    size_t len;
    int rc;
    char *buf = cli_read_file(path, TS_SBATCH_MAP_MAX_BYTES + 1, &len, &rc);
    if (!buf)
        return rc;
    ts_err err;
    if (ts_sbatch_map_parse(buf, len, map, &err) != 0) {
        cli_errorf("%s: %s", path, err.msg);
        free(buf);
        return CLI_EXIT_USAGE;
    }
    free(buf);
    return CLI_EXIT_OK;
}

static json_t *shape_json(const ts_sbatch *sb)
{
    const ts_sbatch_shape *s = &sb->shape;
    json_t *w = json_array();
    for (int i = 0; i < sb->nwarnings; i++)
        json_array_append_new(w, json_string(sb->warnings[i]));
    return json_pack("{s:i,s:b,s:i,s:i,s:i,s:i,s:I,s:I,s:I,s:i,s:i,s:s?,s:o}", "nodes", s->nodes,
                     "nodes_given", s->nodes_given, "ntasks", s->ntasks, "cpus_per_task",
                     s->cpus_per_task, "gpus", s->gpus, "gpus_per_task", s->gpus_per_task,
                     "mem_mib", (json_int_t)s->mem_mib, "mem_per_task_mib",
                     (json_int_t)s->mem_per_task_mib, "time_limit_min",
                     (json_int_t)s->time_limit_min, "array_count", s->array_count,
                     "array_throttle", s->array_throttle, "array", s->array, "warnings", w);
}

/* What ts_sbatch_parse made of the script (prc its result): its errors said,
 * else its warnings, then the spec and its interpretation printed
 * (--dry-run) or submitted. sb is freed. The exit code. */
static int send_parsed(struct cli_ctx *ctx, int prc, ts_sbatch *sb, const ts_spec_errors *errs,
                       bool dry_run, const char *key, const char *script)
{
    if (prc != 0) {
        for (int k = 0; k < errs->n; k++)
            cli_errorf("%s", errs->msg[k]);
        if (errs->more)
            cli_errorf("and %d more", errs->more);
        return prc == TS_ENOMEM ? CLI_EXIT_LOCAL : CLI_EXIT_USAGE;
    }
    for (int k = 0; k < sb->nwarnings; k++)
        cli_warn("%s", sb->warnings[k]);
    if (dry_run) {
        json_t *spec = json_loads(sb->spec_json, 0, NULL);
        json_t *out = json_pack("{s:o,s:o}", "spec", spec, "interpretation", shape_json(sb));
        ts_sbatch_free(sb);
        if (!out)
            return CLI_EXIT_LOCAL;
        if (!cli_emit(ctx, out))
            cli_emit_json(stdout, out);
        json_decref(out);
        return CLI_EXIT_OK;
    }
    int rc = post_spec(ctx, sb->spec_json, key, script);
    ts_sbatch_free(sb);
    return rc;
}

/* Whether the script's errors include that it names no tenant. */
static bool names_no_tenant(const ts_spec_errors *errs)
{
    for (int k = 0; k < errs->n; k++)
        if (strstr(errs->msg[k], TS_SBATCH_NO_TENANT))
            return true;
    return false;
}

/* The token's tenant (GET /v1/whoami) into buf; false, nothing said, where
 * it has none (an admin) or the server does not answer. */
static bool token_tenant(struct cli_ctx *ctx, char *buf, size_t size)
{
    struct cli_req req = {.method = "GET", .path = "/v1/whoami", .quiet = true};
    struct cli_resp resp;
    if (cli_http(ctx, &req, &resp) != CLI_EXIT_OK)
        return false;
    const char *t = json_string_value(json_object_get(resp.json, "tenant"));
    bool ok = t && *t && strlen(t) < size;
    if (ok)
        snprintf(buf, size, "%s", t);
    cli_resp_free(&resp);
    return ok;
}

/* ts_sbatch_parse; where no tenant is named (in->tenant NULL) and none
 * is given, again with the token's, as tessera run's (asked only then, so
 * a dry run that names one needs no server). */
static int parse_as_token_tenant(struct cli_ctx *ctx, const char *text, size_t len,
                                 ts_sbatch_input *in, ts_sbatch **sb, ts_spec_errors *errs)
{
    int prc = ts_sbatch_parse(text, len, in, sb, errs);
    char mine[128];
    if (prc != 0 && !in->tenant && names_no_tenant(errs) &&
        token_tenant(ctx, mine, sizeof mine)) {
        in->default_tenant = mine;
        prc = ts_sbatch_parse(text, len, in, sb, errs);
        in->default_tenant = NULL; /* mine ends here */
    }
    return prc;
}

int cli_cmd_sbatch(struct cli_ctx *ctx, const struct cli_cmd *cmd, int argc, char **argv)
{
    const char *tenant = NULL, *map_path = NULL, *key = NULL, *wrap = NULL;
    bool dry_run = false;
    /* the sbatch options, then the --secret names: argc + 1 each at most */
    const char **sopts = calloc(2 * ((size_t)argc + 1), sizeof *sopts);
    if (!sopts)
        return CLI_EXIT_LOCAL;
    const char **secrets = sopts + argc + 1;
    int nsecrets = 0;
    int nsopts = 0, i = 0;
    const struct cli_word own[] = {
        {"tenant", &tenant}, {"slurm-map", &map_path}, {"idempotency-key", &key}};
    for (; i < argc && argv[i][0] == '-' && argv[i][1]; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) {
            i++;
            break;
        }
        if (strcmp(a, "--dry-run") == 0) {
            dry_run = true;
            continue;
        }
        if (strncmp(a, "--wrap", 6) == 0 && (a[6] == '=' || (a[6] == '\0' && i + 1 < argc))) {
            wrap = a[6] == '=' ? a + 7 : argv[++i]; /* the script: #!/bin/sh and it */
            continue;
        }
        if (strncmp(a, "--secret", 8) == 0 && (a[8] == '=' || (a[8] == '\0' && i + 1 < argc))) {
            secrets[nsecrets++] = a[8] == '=' ? a + 9 : argv[++i]; /* repeatable */
            continue;
        }
        bool mine = false;
        if (cli_take_word(ctx, cmd, own, sizeof own / sizeof own[0], argc, argv, &i, &mine) !=
            CLI_CONTINUE) {
            free(sopts);
            return CLI_EXIT_USAGE;
        }
        if (mine)
            continue;
        sopts[nsopts++] = a;
        if (ts_sbatch_option_takes_next(a) && i + 1 < argc)
            sopts[nsopts++] = argv[++i];
    }
    /* the global flags: --help, --output/--timeout checks (no arguments left) */
    int rc = cli_parse(ctx, cmd, 0, NULL, NULL, NULL, 0, 0);
    if (rc != CLI_CONTINUE) {
        free(sopts);
        return rc;
    }
    if (wrap && i < argc) {
        free(sopts);
        return cli_usage_error(cmd, "--wrap: give a script or --wrap, not both (got \"%s\")",
                               argv[i]);
    }
    if (!wrap && i >= argc) {
        free(sopts);
        return cli_usage_error(cmd, "missing the script (or --wrap=COMMAND)");
    }
    const char *script = wrap ? "wrap" : argv[i++];
    if (argc - i > SBATCH_MAX_ARGS) {
        free(sopts);
        return cli_usage_error(cmd, "more than %d script arguments", SBATCH_MAX_ARGS);
    }
    ts_sbatch_map *map = NULL;
    rc = load_map(map_path, &map);
    size_t len = 0;
    char *text = NULL;
    if (rc == CLI_EXIT_OK && wrap) { /* as sbatch --wrap: a sh script of the command */
        len = strlen(wrap) + 12;
        if ((text = malloc(len + 1)))
            len = (size_t)snprintf(text, len + 1, "#!/bin/sh\n%s\n", wrap);
        rc = text ? CLI_EXIT_OK : CLI_EXIT_LOCAL;
    } else if (rc == CLI_EXIT_OK) {
        text = cli_read_file(script, TS_SBATCH_MAX_BYTES + 1, &len, &rc);
    }
    if (!text) {
        ts_sbatch_map_free(map);
        free(sopts);
        return rc;
    }
    char cwd[PATH_MAX];
    /* the path as given: a python script's __file__ (from the submit
     * directory), its errors' FILE:LINE; the job's name is its base name */
    ts_sbatch_input in = {
        .script_name = strcmp(script, "-") == 0 ? "stdin" : script,
        .argv = sopts,
        .argc = nsopts,
        .script_args = (const char *const *)argv + i,
        .nargs = argc - i,
        .environ = (const char *const *)environ,
        .tenant = tenant,
        .submit_dir = getcwd(cwd, sizeof cwd),
        .map = map,
        .secrets = secrets,
        .nsecrets = nsecrets,
    };
    ts_sbatch *sb = NULL;
    ts_spec_errors errs;
    int prc = parse_as_token_tenant(ctx, text, len, &in, &sb, &errs);
    free(text);
    free(sopts);
    ts_sbatch_map_free(map);
    return send_parsed(ctx, prc, sb, &errs, dry_run, key, script);
}

static int sbatch_options(struct cli_ctx *ctx, const char *const *opts, int n,
                          const char *tenant, json_t **spec)
{
    *spec = NULL;
    ts_sbatch_map *map = NULL;
    int rc = load_map(NULL, &map);
    if (rc != CLI_EXIT_OK)
        return rc;
    static const char SCRIPT[] = "#!/bin/sh\n:\n";
    char cwd[PATH_MAX];
    ts_sbatch_input in = {.script_name = "interactive", .argv = opts, .argc = n,
                          .environ = (const char *const *)environ, .tenant = tenant,
                          .submit_dir = getcwd(cwd, sizeof cwd), .map = map};
    ts_sbatch *sb = NULL;
    ts_spec_errors errs;
    int prc = parse_as_token_tenant(ctx, SCRIPT, sizeof SCRIPT - 1, &in, &sb, &errs);
    ts_sbatch_map_free(map);
    if (prc != 0) {
        for (int k = 0; k < errs.n; k++)
            cli_errorf("%s", errs.msg[k]);
        return prc == TS_ENOMEM ? CLI_EXIT_LOCAL : CLI_EXIT_USAGE;
    }
    for (int k = 0; k < sb->nwarnings; k++)
        cli_warn("%s", sb->warnings[k]);
    *spec = json_loads(sb->spec_json, 0, NULL);
    ts_sbatch_free(sb);
    return *spec ? CLI_EXIT_OK : CLI_EXIT_LOCAL;
}

int cli_sbatch_session(struct cli_ctx *ctx, const struct cli_cmd *cmd, const char *const *opts,
                       int n, const char *tenant, unsigned given, json_t *spec)
{
    json_t *tr = NULL;
    int rc = sbatch_options(ctx, opts, n, tenant, &tr);
    if (rc != CLI_EXIT_OK)
        return rc;
    json_t *tasks = json_object_get(tr, "tasks");
    json_int_t count = json_integer_value(json_object_get(json_array_get(tasks, 0), "count"));
    if (json_array_size(tasks) != 1 || count != 1) {
        json_decref(tr);
        return cli_usage_error(cmd, "an interactive job runs one task: these options ask for "
                               "%lld (submit a batch script for more: tessera sbatch)",
                               json_array_size(tasks) == 1 ? (long long)count : 2LL);
    }
    static const struct {
        const char *key;
        unsigned flag; /* 0: no tessera flag gives it */
    } KEYS[] = {{"tenant", CLI_SL_TENANT}, {"name", CLI_SL_NAME},  {"tasks", CLI_SL_TASKS},
                {"time_limit", CLI_SL_TIME}, {"tier", CLI_SL_TIER}, {"image", CLI_SL_IMAGE},
                {"constraint", 0},          {"nodelist", 0},       {"exclude", 0},
                {"reservation", 0},         {"env", CLI_SL_ENV}};
    for (size_t k = 0; k < sizeof KEYS / sizeof *KEYS; k++) {
        json_t *v = json_object_get(tr, KEYS[k].key);
        if (v && !(given & KEYS[k].flag))
            json_object_set(spec, KEYS[k].key, v);
    }
    json_decref(tr);
    return CLI_EXIT_OK;
}
