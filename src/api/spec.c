/*
 * spec.c - ts_spec_parse: a job spec (docs/job-spec.md) from YAML or JSON.
 *
 * One parser for both formats: JSON is YAML's flow syntax, so libyaml's
 * document API reads either, with a start mark on every node. The walk is a
 * closed schema like the cluster and tenants loaders' (src/model), with two
 * differences that come from who writes a spec: a user at a terminal, or a
 * program through the HTTP API. So every error is collected rather than the
 * first one returned (the API answers all of them at once), and each reads
 * "key.path: reason" with JSON-style paths (tasks[1].gpus) rather than
 * "file:line:", because the user's spec has no file name.
 *
 * The input is untrusted, so its cost is bounded before the tree is built:
 * at most TS_SPEC_MAX_BYTES, nested at most SPEC_NESTING_MAX deep (checked
 * with libyaml's event parser first, since libyaml's scanner is quadratic in
 * flow nesting), and no node walked twice, which refuses aliases and with them
 * the "billion laughs" expansion and alias cycles. This file knows the keys;
 * how a value is read and how an error reads is spec_walk.c, the scalar
 * grammars (numbers, durations, signals) are spec_scalar.c and the canonical
 * JSON writer is spec_json.c; the larger sections have their own files
 * (spec_tasks.c, spec_network.c, spec_notify.c, spec_secrets.c,
 * spec_mounts.c, spec_data.c).
 */
#include "tessera/spec.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/spec_scalar.h"
#include "api/spec_walk.h"
#include "tessera/depend.h"
#include "tessera/image_ref.h"
#include "tessera/node_select.h"
#include "tessera/tenant.h"

#define SPEC_NESTING_MAX 16 /* the schema itself needs 3 levels */
#define SPEC_WORKDIR_MAX 4096 /* Linux PATH_MAX, with its NUL */
#define SPEC_LEVEL_ANY "any"
#define SPEC_LEVEL_NODE "node"
#define SPEC_SHELL "/bin/sh"

/* ---- the sections -------------------------------------------------------------- */

static bool copy_level(spec_parser *P, const yaml_node_t *n, const char *path, bool preferred,
                       char out[TS_SPEC_NAME_MAX])
{
    const char *s = spec_text(P, n, path);
    if (!s)
        return false;
    if (strcmp(s, SPEC_LEVEL_ANY) == 0) {
        if (preferred) {
            spec_fail(P, path, "\"any\" prefers nothing; leave preferred out");
            return false;
        }
        out[0] = '\0';
        return true;
    }
    if (!ts_yaml_name_ok(s, TS_SPEC_NAME_MAX)) {
        spec_fail_got(P, n, path,
                      preferred ? "node or a topology level name"
                                : "node, any or a topology level name");
        return false;
    }
    snprintf(out, TS_SPEC_NAME_MAX, "%s", s);
    return true;
}

/* A spec that names neither level is placed compact first: one node, then
 * each wider level, the whole cluster last (docs/job-spec.md); written into
 * the spec, so its canonical JSON says so and parses back the same. A spec
 * that asks for `any` explicitly is packed across the cluster as it asks. */
static void compact_first(ts_job_spec *spec)
{
    snprintf(spec->preferred_level, sizeof spec->preferred_level, "%s", SPEC_LEVEL_NODE);
}

static void walk_topology(spec_parser *P, const yaml_node_t *map)
{
    enum { TP_REQUIRED, TP_PREFERRED, TP_RAIL, TP_N };
    static const char *const keys[TP_N] = {"required", "preferred", "rail_aligned"};
    yaml_node_t *v[TP_N];
    unsigned given;
    if (!spec_map_fields(P, map, "topology", keys, TP_N, v, &given))
        return;
    if (v[TP_REQUIRED])
        copy_level(P, v[TP_REQUIRED], "topology.required", false, P->spec->required_level);
    if (v[TP_PREFERRED])
        copy_level(P, v[TP_PREFERRED], "topology.preferred", true, P->spec->preferred_level);
    if (v[TP_RAIL])
        spec_bool(P, v[TP_RAIL], "topology.rail_aligned", &P->spec->rail_aligned);
    if (!v[TP_REQUIRED] && !v[TP_PREFERRED])
        compact_first(P->spec);
}

static void walk_checkpoint(spec_parser *P, const yaml_node_t *map)
{
    enum { CK_SIGNAL, CK_GRACE, CK_N };
    static const char *const keys[CK_N] = {"signal", "grace"};
    yaml_node_t *v[CK_N];
    unsigned given;
    if (!spec_map_fields(P, map, "checkpoint", keys, CK_N, v, &given))
        return;
    if (v[CK_SIGNAL]) {
        const char *s = spec_text(P, v[CK_SIGNAL], "checkpoint.signal");
        int sig = s ? api_spec_signal(s) : -1;
        char got[SPEC_SHOW_BUF];
        spec_show(v[CK_SIGNAL], got, sizeof got);
        if (s && sig < 0)
            spec_fail(P, "checkpoint.signal",
                      "unknown signal \"%.*s\" (a name like SIGUSR1 or USR1, or a "
                      "number 1..%d)",
                      SPEC_SHOW_MAX, s, TS_SPEC_SIGNAL_MAX);
        else if (sig == SIGKILL || sig == SIGSTOP)
            spec_fail(P, "checkpoint.signal",
                      "%s cannot be caught, so no job could checkpoint on it",
                      api_spec_signal_name(sig));
        else if (sig > 0)
            P->spec->ckpt_signal = sig;
    }
    if (v[CK_GRACE])
        spec_duration(P, v[CK_GRACE], "checkpoint.grace", &P->spec->ckpt_grace_s);
}

static void walk_idle(spec_parser *P, const yaml_node_t *map)
{
    static const char *const keys[1] = {"timeout"};
    yaml_node_t *v[1];
    unsigned given;
    if (spec_map_fields(P, map, "idle", keys, 1, v, &given) && v[0])
        spec_duration(P, v[0], "idle.timeout", &P->spec->idle_timeout_s);
}

/* "interactive: {terminal: bool, rows: N, cols: N}" (docs/interactive.md) */
static void walk_interactive(spec_parser *P, const yaml_node_t *map)
{
    static const char *const keys[3] = {"terminal", "rows", "cols"};
    yaml_node_t *v[3];
    unsigned given;
    ts_job_spec *spec = P->spec;
    if (!spec_map_fields(P, map, "interactive", keys, 3, v, &given))
        return;
    spec->interactive = true;
    int64_t x;
    if (v[0])
        spec_bool(P, v[0], "interactive.terminal", &spec->interactive_tty);
    if (v[1] && spec_int(P, v[1], "interactive.rows", 1, TS_SPEC_TTY_MAX, &x))
        spec->tty_rows = (int)x;
    if (v[2] && spec_int(P, v[2], "interactive.cols", 1, TS_SPEC_TTY_MAX, &x))
        spec->tty_cols = (int)x;
}

/* Room in *out for the n strings of path, at most max (what names them in
 * the error); false when refused or out of memory, the failure noted. */
static bool spec_strings(spec_parser *P, const char *path, ptrdiff_t n, int max,
                         const char *what, char ***out)
{
    if (n > max) {
        spec_fail(P, path, "%td %s, at most %d", n, what, max);
        return false;
    }
    if (n && !(*out = calloc((size_t)n, sizeof **out))) {
        spec_fail_oom(P);
        return false;
    }
    return true;
}

static void spec_strings_free(char **v, int n)
{
    for (int i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

static void walk_command(spec_parser *P, const yaml_node_t *n)
{
    ts_job_spec *spec = P->spec;
    if (n->type == YAML_SCALAR_NODE) {
        const char *s = spec_text(P, n, "command");
        if (!s)
            return;
        if (strspn(s, " \t\r\n") == strlen(s)) {
            spec_fail(P, "command", "must not be empty");
            return;
        }
        if (!(spec->argv = calloc(3, sizeof *spec->argv))) {
            spec_fail_oom(P);
            return;
        }
        const char *words[3] = {SPEC_SHELL, "-c", s};
        for (int i = 0; i < 3; i++)
            if ((spec->argv[spec->argc] = spec_dup(P, words[i])))
                spec->argc++;
        return;
    }
    if (n->type != YAML_SEQUENCE_NODE) {
        spec_fail_got(P, n, "command", "a list of strings or one string for /bin/sh -c");
        return;
    }
    ptrdiff_t nargs = n->data.sequence.items.top - n->data.sequence.items.start;
    if (!spec_strings(P, "command", nargs, TS_SPEC_MAX_ARGS, "arguments", &spec->argv))
        return;
    char path[SPEC_PATH_MAX];
    for (ptrdiff_t i = 0; i < nargs; i++) {
        ts_yaml_pathf(path, sizeof path, "command[%td]", i);
        bool reused;
        yaml_node_t *a = spec_child(P, n->data.sequence.items.start[i], path, &reused);
        if (!a)
            continue;
        if (spec_is_null(a)) {
            spec_fail_got(P, a, path, "a string (write \"\" for an empty argument)");
            continue;
        }
        const char *s = spec_text(P, a, path);
        if (s && (spec->argv[spec->argc] = spec_dup(P, s)))
            spec->argc++;
    }
}

/* env entries "NAME=value" by name, so equal environments compare equal. */
static int env_cmp(const void *a, const void *b)
{
    const char *x = *(const char *const *)a, *y = *(const char *const *)b;
    size_t nx = strcspn(x, "="), ny = strcspn(y, "=");
    int c = strncmp(x, y, nx < ny ? nx : ny);
    return c ? c : (nx > ny) - (nx < ny);
}

static void walk_env(spec_parser *P, const yaml_node_t *map)
{
    ts_job_spec *spec = P->spec;
    if (map->type != YAML_MAPPING_NODE) {
        spec_fail_got(P, map, "env", "a mapping of NAME: value");
        return;
    }
    ptrdiff_t nvars = map->data.mapping.pairs.top - map->data.mapping.pairs.start;
    if (!spec_strings(P, "env", nvars, TS_SPEC_MAX_ENV, "variables", &spec->env))
        return;
    char path[SPEC_PATH_MAX];
    for (ptrdiff_t i = 0; i < nvars; i++) {
        yaml_node_pair_t *p = &map->data.mapping.pairs.start[i];
        yaml_node_t *k = ts_yaml_node(&P->y, p->key);
        const char *name = spec_scalar_text(k);
        if (!ts_yaml_scalar(k)) {
            char got[SPEC_SHOW_BUF];
            spec_show(k, got, sizeof got);
            spec_fail(P, "env", "variable names must be strings, got %s", got);
            continue;
        }
        spec_key_path(path, sizeof path, "env", (const char *)k->data.scalar.value,
                      k->data.scalar.length);
        if (!name || !api_spec_env_name_ok(name)) {
            spec_fail(P, path,
                      "not a variable name (A-Z a-z 0-9 _, not starting with a digit, "
                      "under %d characters)",
                      TS_SPEC_ENV_NAME_MAX);
            continue;
        }
        bool reused;
        yaml_node_t *v = spec_child(P, p->value, path, &reused);
        if (!v)
            continue;
        if (spec_is_null(v)) {
            spec_fail_got(P, v, path, "a string (write \"\" for an empty value)");
            continue;
        }
        const char *value = spec_text(P, v, path);
        if (!value)
            continue;
        size_t len = strlen(name) + 1 + strlen(value) + 1;
        char *entry = malloc(len);
        if (!entry) {
            spec_fail_oom(P);
            break;
        }
        snprintf(entry, len, "%s=%s", name, value);
        spec->env[spec->nenv++] = entry;
    }
    if (spec->nenv > 1)
        qsort(spec->env, (size_t)spec->nenv, sizeof *spec->env, env_cmp);
    for (int i = 1; i < spec->nenv; i++) {
        if (env_cmp(&spec->env[i - 1], &spec->env[i]) == 0) {
            int n = (int)strcspn(spec->env[i], "=");
            ts_yaml_pathf(path, sizeof path, "env.%.*s", n, spec->env[i]);
            spec_fail(P, path, "key given twice");
        }
    }
}

static void walk_workdir(spec_parser *P, const yaml_node_t *n)
{
    const char *s = spec_text(P, n, "workdir");
    if (!s)
        return;
    if (s[0] != '/' || strlen(s) >= SPEC_WORKDIR_MAX) {
        spec_fail_got(P, n, "workdir", "an absolute path (starting with /, under 4096 bytes)");
        return;
    }
    P->spec->workdir = spec_dup(P, s);
}

/* A container image (docs/images.md): kept as written, checked with the
 * rules the agent pulls by. */
static void walk_image(spec_parser *P, const yaml_node_t *n)
{
    const char *s = spec_text(P, n, "image");
    if (!s)
        return;
    ts_image_ref ref;
    ts_err e;
    if (ts_image_ref_parse(s, "image", &ref, &e) != 0) {
        spec_fail(P, "image", "%s", e.msg + strlen("image: "));
        return;
    }
    P->spec->image = spec_dup(P, s);
}

/* Kept as its canonical text: what ts_dep_format writes of the parse. */
static void walk_dependency(spec_parser *P, const yaml_node_t *n)
{
    const char *s = spec_text(P, n, "dependency");
    if (!s)
        return;
    char why[TS_ERR_MSG_MAX - 32], text[TS_DEP_MAX_BYTES + 1];
    if (ts_dep_canonical(s, text, why, sizeof why) != 0) {
        spec_fail(P, "dependency", "%s", why);
        return;
    }
    P->spec->dependency = spec_dup(P, text);
}

/* Syntax only: whether the names are nodes of the cluster is the
 * controller's question (it answers when it builds the job). */
static void walk_node_select(spec_parser *P, const yaml_node_t *n, const char *field, char **out)
{
    const char *s = spec_text(P, n, field);
    if (!s)
        return;
    ts_err e;
    if ((field[0] == 'c' ? ts_constraint_check(s, &e) : ts_hostlist_check(s, &e)) != 0) {
        spec_fail(P, field, "%s", e.msg);
        return;
    }
    *out = spec_dup(P, s);
}

/* ---- the top level ----------------------------------------------------------- */

enum {
    K_TENANT, K_NAME, K_TIER, K_PRIORITY, K_TASKS, K_TOPOLOGY, K_TIME_LIMIT, K_DURATION,
    K_CHECKPOINT, K_IDLE, K_COMMAND, K_ENV, K_WORKDIR, K_ARRAY, K_DEPENDENCY, K_THROTTLE,
    K_SECRETS, K_NETWORK, K_IMAGE, K_PULL_SECRET, K_MOUNTS, K_CONSTRAINT, K_NODELIST,
    K_EXCLUDE, K_RESERVATION, K_NOTIFY, K_HOLD, K_NICE, K_INTERACTIVE, K_DATA, K_USER, K_N
};
static const char *const TOP_KEYS[K_N] = {
    "tenant",   "name",       "tier", "priority_class", "tasks", "topology", "time_limit",
    "duration", "checkpoint", "idle", "command",        "env",   "workdir",  "array_size",
    "dependency", "array_throttle", "secrets", "network", "image", "image_pull_secret",
    "mounts", "constraint", "nodelist", "exclude", "reservation", "notify", "hold", "nice",
    "interactive", "data", "user"};

static void walk_top(spec_parser *P, const yaml_node_t *root)
{
    ts_job_spec *spec = P->spec;
    yaml_node_t *v[K_N];
    unsigned given;
    if (!spec_map_fields(P, root, "", TOP_KEYS, K_N, v, &given))
        return;
    static const int required[] = {K_TENANT, K_NAME, K_TASKS};
    for (size_t i = 0; i < sizeof required / sizeof required[0]; i++)
        if (!(given & BIT(required[i])))
            spec_fail(P, TOP_KEYS[required[i]], "required");
    if (v[K_TENANT])
        spec_name(P, v[K_TENANT], "tenant", false, spec->tenant);
    if (v[K_NAME])
        spec_name(P, v[K_NAME], "name", false, spec->name);
    if (v[K_TIER]) {
        const char *s = spec_text(P, v[K_TIER], "tier");
        if (s && strcmp(s, "guaranteed") == 0)
            spec->tier = TS_TIER_GUARANTEED;
        else if (s && strcmp(s, "opportunistic") == 0)
            spec->tier = TS_TIER_OPPORTUNISTIC;
        else if (s)
            spec_fail_got(P, v[K_TIER], "tier", "guaranteed or opportunistic");
    }
    if (v[K_PRIORITY])
        spec_name(P, v[K_PRIORITY], "priority_class", true, spec->priority_class);
    if (v[K_TASKS])
        spec_walk_tasks(P, v[K_TASKS]);
    if (v[K_TOPOLOGY])
        walk_topology(P, v[K_TOPOLOGY]);
    else
        compact_first(spec);
    if (v[K_TIME_LIMIT])
        spec_duration(P, v[K_TIME_LIMIT], "time_limit", &spec->time_limit_s);
    if (v[K_DURATION])
        spec_duration(P, v[K_DURATION], "duration", &spec->duration_s);
    if (v[K_CHECKPOINT])
        walk_checkpoint(P, v[K_CHECKPOINT]);
    if (v[K_IDLE])
        walk_idle(P, v[K_IDLE]);
    if (v[K_COMMAND])
        walk_command(P, v[K_COMMAND]);
    if (v[K_ENV])
        walk_env(P, v[K_ENV]);
    if (v[K_WORKDIR])
        walk_workdir(P, v[K_WORKDIR]);
    if (v[K_SECRETS])
        spec_walk_list(P, v[K_SECRETS], &SPEC_SECRETS);
    if (v[K_NETWORK])
        spec_walk_network(P, v[K_NETWORK]);
    if (v[K_IMAGE])
        walk_image(P, v[K_IMAGE]);
    if (v[K_MOUNTS]) {
        if (!v[K_IMAGE])
            spec_fail(P, "mounts", "only with an image");
        else
            spec_walk_list(P, v[K_MOUNTS], &SPEC_MOUNTS);
    }
    if (v[K_DATA])
        spec_walk_list(P, v[K_DATA], &SPEC_DATA);
    if (v[K_USER]) {
        /* who the task is inside its image: its User, or numbers (the
         * tenant's rules are the controller's question, at submission) */
        const char *s = spec_text(P, v[K_USER], "user");
        int64_t uid, gid;
        if (s && strcmp(s, "image") != 0 && !ts_container_user_parse(s, &uid, &gid))
            spec_fail_got(P, v[K_USER], "user", "\"image\" or uid[:gid] (decimal numbers)");
        else if (s && !v[K_IMAGE])
            spec_fail(P, "user", "only with an image");
        else if (s)
            snprintf(spec->user, sizeof spec->user, "%s", s);
    }
    if (v[K_PULL_SECRET]) {
        /* a secret of the secret store holding "user:password" for the registry */
        const char *s = spec_text(P, v[K_PULL_SECRET], "image_pull_secret");
        if (s && (!api_spec_env_name_ok(s) || strlen(s) >= TS_SPEC_NAME_MAX))
            spec_fail_got(P, v[K_PULL_SECRET], "image_pull_secret",
                          "a secret's name (A-Z a-z 0-9 _, not starting with a digit, under 64)");
        else if (s && !v[K_IMAGE])
            spec_fail(P, "image_pull_secret", "only with an image");
        else if (s)
            snprintf(spec->image_secret, sizeof spec->image_secret, "%s", s);
    }
    int64_t x;
    if (v[K_ARRAY] && spec_int(P, v[K_ARRAY], "array_size", 1, TS_SPEC_MAX_ARRAY, &x))
        spec->array_size = (int)x;
    if (v[K_DEPENDENCY])
        walk_dependency(P, v[K_DEPENDENCY]);
    if (v[K_CONSTRAINT])
        walk_node_select(P, v[K_CONSTRAINT], "constraint", &spec->constraint);
    if (v[K_NODELIST])
        walk_node_select(P, v[K_NODELIST], "nodelist", &spec->nodelist);
    if (v[K_EXCLUDE])
        walk_node_select(P, v[K_EXCLUDE], "exclude", &spec->exclude);
    if (v[K_RESERVATION])
        spec_name(P, v[K_RESERVATION], "reservation", false, spec->reservation);
    if (v[K_NOTIFY])
        spec_walk_notify(P, v[K_NOTIFY]);
    if (v[K_HOLD])
        spec_bool(P, v[K_HOLD], "hold", &spec->hold);
    if (v[K_NICE] && spec_int(P, v[K_NICE], "nice", TS_SPEC_NICE_MIN, TS_SPEC_NICE_MAX, &x))
        spec->nice = (int)x;
    if (v[K_INTERACTIVE])
        walk_interactive(P, v[K_INTERACTIVE]);
    if (spec->interactive && spec->array_size > 1)
        spec_fail(P, "interactive", "an array cannot be interactive (one terminal per job)");
    if (v[K_THROTTLE] &&
        spec_int(P, v[K_THROTTLE], "array_throttle", 1, TS_SPEC_MAX_ARRAY, &x))
        spec->array_throttle = (int)x;
    if (spec->array_throttle > 0 && spec->array_size < 2)
        spec_fail(P, "array_throttle", "only an array (array_size 2 or more) has one");
}

/* Every task carries the job's environment and command (and every step task
 * its rank's environment again), into the answer its node's agent reads: a
 * bound on them together keeps one job's tasks a bounded share of it. */
static void check_task_bytes(spec_parser *P)
{
    const ts_job_spec *spec = P->spec;
    size_t env = 0, cmd = 0;
    for (int i = 0; i < spec->nenv; i++)
        env += strlen(spec->env[i]) + 1;
    for (int i = 0; i < spec->argc; i++)
        cmd += strlen(spec->argv[i]) + 1;
    if (env + cmd > TS_SPEC_MAX_TASK_BYTES)
        spec_fail(P, env >= cmd ? "env" : "command",
                  "the environment (%zu bytes) and the command (%zu bytes) together are over "
                  "%d bytes, the most each task carries",
                  env, cmd, TS_SPEC_MAX_TASK_BYTES);
}

static int walk(void *ctx)
{
    spec_parser *P = ctx;
    yaml_document_t *doc = P->y.doc;
    yaml_node_t *root = yaml_document_get_root_node(doc);
    if (!root) {
        spec_fail(P, "top level", "the spec is empty");
        return TS_EINVAL;
    }
    P->nnodes = (size_t)(doc->nodes.top - doc->nodes.start);
    P->seen = calloc(P->nnodes, 1);
    if (!P->seen) {
        spec_fail_oom(P);
        return TS_ENOMEM;
    }
    P->seen[0] = 1; /* the root: an alias to it is a cycle */
    walk_top(P, root);
    if (!P->walk_failed && !P->oom)
        check_task_bytes(P);
    free(P->seen);
    P->seen = NULL;
    if (P->oom)
        return TS_ENOMEM;
    return P->walk_failed ? TS_EINVAL : 0;
}

/* libyaml's scanner does work per token in proportion to the flow nesting
 * depth, so "[[[[..." of 1 MiB would take hours to load; its event parser
 * reads lazily, so checking the depth first stops such input after a few
 * events. A syntax error here is left for the load to report. */
static bool nesting_ok(const char *buf, size_t len, ts_spec_errors *errs)
{
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser))
        return true; /* the load reports out of memory */
    yaml_parser_set_input_string(&parser, (const unsigned char *)buf, len);
    int depth = 0;
    bool ok = true;
    for (;;) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&parser, &ev))
            break;
        yaml_event_type_t type = ev.type;
        size_t line = ev.start_mark.line + 1;
        yaml_event_delete(&ev);
        if (type == YAML_STREAM_END_EVENT)
            break;
        if (type == YAML_SEQUENCE_START_EVENT || type == YAML_MAPPING_START_EVENT) {
            if (++depth > SPEC_NESTING_MAX) {
                spec_push(errs, "%s:%zu: nested deeper than %d levels", SPEC_FNAME, line,
                          SPEC_NESTING_MAX);
                ok = false;
                break;
            }
        } else if (type == YAML_SEQUENCE_END_EVENT || type == YAML_MAPPING_END_EVENT) {
            depth--;
        }
    }
    yaml_parser_delete(&parser);
    return ok;
}

/* The store keeps the canonical JSON and reads it back with this parser, so
 * a spec is accepted only if that JSON is within TS_SPEC_MAX_BYTES too: it
 * spells out every default, and 65536 one-line task groups "{}" would grow
 * fifty-fold. Errors are pushed (the walk succeeded, so errs is empty). */
static int canonical_fits(const ts_job_spec *spec, ts_spec_errors *errs)
{
    char *json = ts_spec_to_json(spec);
    if (!json) {
        spec_push(errs, "top level: out of memory");
        return TS_ENOMEM;
    }
    size_t len = strlen(json);
    free(json);
    if (len <= TS_SPEC_MAX_BYTES)
        return 0;
    spec_push(errs,
              "top level: the spec's canonical JSON (every default written out) would be "
              "%zu bytes, at most %d; use fewer task groups",
              len, TS_SPEC_MAX_BYTES);
    return TS_EINVAL;
}

int ts_spec_parse(const char *buf, size_t len, ts_job_spec **out, ts_spec_errors *errs)
{
    ts_spec_errors mine;
    if (!errs)
        errs = &mine;
    memset(errs, 0, sizeof *errs);
    *out = NULL;
    if (!buf)
        buf = "", len = 0;
    if (len > TS_SPEC_MAX_BYTES) {
        spec_push(errs, "top level: the spec is %zu bytes, at most %d", len, TS_SPEC_MAX_BYTES);
        return TS_EINVAL;
    }
    if (!nesting_ok(buf, len, errs))
        return TS_EINVAL;
    ts_job_spec *spec = calloc(1, sizeof *spec);
    if (!spec) {
        spec_push(errs, "top level: out of memory");
        return TS_ENOMEM;
    }
    spec->tier = TS_TIER_GUARANTEED;
    spec->ckpt_grace_s = -1;
    spec->array_size = 1;
    ts_err yaml_err = {0};
    spec_parser P = {.y = {.fname = SPEC_FNAME, .err = &yaml_err}, .errs = errs, .spec = spec};
    int rc = ts_yaml_load_one(&P.y, buf, len, walk, &P);
    free(P.seen);
    if (rc == 0 && errs->n == 0) {
        rc = canonical_fits(spec, errs);
    } else {
        if (!P.walk_failed) /* libyaml's error, or a second document */
            spec_push(errs, "%s", yaml_err.msg[0] ? yaml_err.msg : "top level: not a valid spec");
        if (rc == 0)
            rc = TS_EINVAL;
    }
    if (rc == 0) {
        *out = spec;
        return 0;
    }
    ts_spec_free(spec);
    return rc == TS_ENOMEM ? TS_ENOMEM : TS_EINVAL;
}

void ts_spec_free(ts_job_spec *spec)
{
    if (!spec)
        return;
    free(spec->tasks);
    spec_strings_free(spec->argv, spec->argc);
    spec_strings_free(spec->env, spec->nenv);
    free(spec->workdir);
    free(spec->image);
    free(spec->mounts);
    free(spec->data);
    free(spec->dependency);
    free(spec->constraint);
    free(spec->nodelist);
    free(spec->exclude);
    free(spec->secrets);
    free(spec->notify_url);
    free(spec->notify_mail);
    free(spec);
}
