/*
 * cmd_secrets.c - secrets, secrets set, secrets rm and secrets events (docs/secrets.md,
 * docs/cli.md).
 *
 * A value is never an argument: command lines are visible to every user of
 * the machine (ps, /proc), so `secrets set` reads it from stdin (one final
 * newline dropped, so `echo "$X" | tessera secrets set NAME` stores $X) or
 * from --from-file (as is). `secrets events` is the audit of sets and deletes. Nothing here prints a value: the server never
 * returns one, and a set answers the secret's name and scope.
 */
#include "cli/cli.h"

#include <string.h>

#define SECRET_VALUE_MAX 16384 /* CTLD_SECRET_VALUE_MAX */

static bool scope_ok(const struct cli_cmd *cmd, const char *scope, int *rc)
{
    if (!scope || strcmp(scope, "user") == 0 || strcmp(scope, "tenant") == 0)
        return true;
    *rc = cli_usage_error(cmd, "--scope must be user or tenant, got '%s'", scope);
    return false;
}

/* A listing's command line (--tenant only) into path: base, then the
 * tenant asked for. Returns CLI_CONTINUE, or the exit code. */
static int tenant_path(struct cli_ctx *ctx, const struct cli_cmd *cmd, int argc, char **argv,
                       const char *base, struct cli_buf *path)
{
    const char *tenant = NULL;
    const struct cli_opt opts[] = {{"tenant", 0, &tenant, NULL}, {NULL, 0, NULL, NULL}};
    int rc = cli_parse(ctx, cmd, argc, argv, opts, NULL, 0, 0);
    if (rc != CLI_CONTINUE)
        return rc;
    cli_buf_puts(path, base);
    cli_buf_query(path, "tenant", tenant);
    return CLI_CONTINUE;
}

static void secret_row(const struct cli_ctx *ctx, const json_t *s, char (*c)[CLI_CELL_MAX],
                       const char **row)
{
    const char *cells[4] = {cli_str(s, "name", c[0], CLI_CELL_MAX),
                            cli_str(s, "scope", c[1], CLI_CELL_MAX),
                            cli_str(s, "owner", c[2], CLI_CELL_MAX),
                            cli_time_short(ctx, json_object_get(s, "updated"), c[3],
                                           CLI_CELL_MAX)};
    memcpy(row, cells, sizeof cells);
}

int cli_cmd_secrets(struct cli_ctx *ctx, const struct cli_cmd *cmd, int argc, char **argv)
{
    static const char *const head[] = {"NAME", "SCOPE", "OWNER", "UPDATED"};
    static const struct cli_listing secrets_list = {"secrets", 4, head, 0, secret_row};
    struct cli_buf path = {0};
    int rc = tenant_path(ctx, cmd, argc, argv, "/v1/secrets", &path);
    if (rc != CLI_CONTINUE)
        return rc;
    json_t *root, *list;
    rc = cli_list_get(ctx, path.oom ? NULL : path.p, "secrets", &root, &list);
    cli_buf_free(&path);
    return rc != CLI_CONTINUE ? rc : cli_list_print(ctx, &secrets_list, root, list);
}

/* The value: the file's bytes, or stdin's less one final newline. */
static char *read_value(const char *file, size_t *len, int *rc)
{
    char *v = cli_read_file(file ? file : "-", SECRET_VALUE_MAX + 1, len, rc);
    if (v && !file && *len > 0 && v[*len - 1] == '\n')
        v[--*len] = '\0';
    if (v && *len > SECRET_VALUE_MAX) {
        cli_errorf("the value: %zu bytes, at most %d", *len, SECRET_VALUE_MAX);
        *rc = CLI_EXIT_USAGE;
        free(v);
        return NULL;
    }
    return v;
}

int cli_cmd_secrets_set(struct cli_ctx *ctx, const struct cli_cmd *cmd, int argc, char **argv)
{
    const char *name, *tenant = NULL, *scope = NULL, *file = NULL;
    const struct cli_opt opts[] = {{"tenant", 0, &tenant, NULL}, {"scope", 0, &scope, NULL},
                                   {"from-file", 0, &file, NULL}, {NULL, 0, NULL, NULL}};
    int rc = cli_parse(ctx, cmd, argc, argv, opts, &name, 1, 1);
    if (rc != CLI_CONTINUE || !scope_ok(cmd, scope, &rc))
        return rc;
    size_t len = 0;
    char *value = read_value(file, &len, &rc);
    if (!value)
        return rc;
    json_t *body = json_pack("{s:s%,s:s*,s:s*}", "value", value, len, "scope", scope, "tenant",
                             tenant);
    memset(value, 0, len);
    free(value);
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    if (!text) {
        cli_errorf("the value: not UTF-8 text (or out of memory)");
        return CLI_EXIT_USAGE;
    }
    struct cli_buf path = {0};
    cli_buf_puts(&path, "/v1/secrets/");
    cli_buf_escape(&path, name);
    struct cli_req req = {.method = "PUT", .path = path.p, .body = text,
                          .body_len = strlen(text), .content_type = "application/json"};
    struct cli_resp resp;
    rc = path.oom ? CLI_EXIT_LOCAL : cli_http(ctx, &req, &resp);
    memset(text, 0, strlen(text));
    free(text);
    cli_buf_free(&path);
    if (rc != CLI_EXIT_OK)
        return rc;
    json_t *sec;
    rc = cli_expect_member(resp.json, "secret", JSON_OBJECT, &sec);
    if (rc == CLI_EXIT_OK && !cli_emit(ctx, resp.json)) {
        char nm[CLI_CELL_MAX], sc[CLI_CELL_MAX], tn[CLI_CELL_MAX];
        printf("secret %s %s (scope %s, tenant %s)\n", cli_str(sec, "name", nm, sizeof nm),
               resp.status == 201 ? "created" : "replaced", cli_str(sec, "scope", sc, sizeof sc),
               cli_str(sec, "tenant", tn, sizeof tn));
    }
    cli_resp_free(&resp);
    return rc;
}

int cli_cmd_secrets_rm(struct cli_ctx *ctx, const struct cli_cmd *cmd, int argc, char **argv)
{
    const char *name, *tenant = NULL, *scope = NULL;
    const struct cli_opt opts[] = {{"tenant", 0, &tenant, NULL}, {"scope", 0, &scope, NULL},
                                   {NULL, 0, NULL, NULL}};
    int rc = cli_parse(ctx, cmd, argc, argv, opts, &name, 1, 1);
    if (rc != CLI_CONTINUE || !scope_ok(cmd, scope, &rc))
        return rc;
    const char *const query[] = {"scope", scope, "tenant", tenant, NULL};
    return cli_delete_named(ctx, "/v1/secrets/", name, query, "secret", "deleted");
}

static void secret_event_row(const struct cli_ctx *ctx, const json_t *ev,
                             char (*c)[CLI_CELL_MAX], const char **row)
{
    (void)ctx;
    static const char *const keys[] = {"tenant", "scope", "owner", "name", "by"};
    const json_t *d = json_object_get(ev, "data");
    row[0] = cli_time_iso(json_object_get(ev, "time"), c[0], CLI_CELL_MAX);
    row[1] = cli_str(ev, "kind", c[1], CLI_CELL_MAX);
    for (int k = 0; k < 5; k++)
        row[2 + k] = cli_str(d, keys[k], c[2 + k], CLI_CELL_MAX);
}

int cli_cmd_secrets_events(struct cli_ctx *ctx, const struct cli_cmd *cmd, int argc, char **argv)
{
    static const char *const head[] = {"TIME", "KIND", "TENANT", "SCOPE", "OWNER", "NAME", "BY"};
    static const struct cli_listing events_list = {"secret events", 7, head, 0,
                                                   secret_event_row};
    struct cli_buf path = {0};
    int rc = tenant_path(ctx, cmd, argc, argv, "/v1/secrets/events", &path);
    if (rc != CLI_CONTINUE)
        return rc;
    json_t *out = NULL;
    rc = path.oom ? CLI_EXIT_LOCAL : cli_get_pages(ctx, path.p, "events", true, &out);
    cli_buf_free(&path);
    if (cli_answered(ctx, rc, out))
        return rc;
    return cli_list_print(ctx, &events_list, out, json_object_get(out, "events"));
}
