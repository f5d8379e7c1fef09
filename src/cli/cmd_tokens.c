/*
 * cmd_tokens.c - tokens, tokens create and tokens revoke (docs/api.md).
 *
 * A new token's secret is shown once, so `tokens create` writes it alone on
 * stdout (secret=$(tessera tokens create ...) works) and says everything
 * else on stderr. The role is checked here against the six the API
 * defines, so a typo is a usage error before anything is created; the name
 * against the API's charset (1..63 of A-Z a-z 0-9 . _ -, starting with a
 * letter or digit) for the same reason. The list
 * shows `revoked` as a time when the server gives one, yes/no for a bool.
 */
#include "cli/cli.h"
#include "tessera/store.h"

#include <string.h>

static const char *const ROLES[] = {"admin", "tenant-admin", "user", "viewer",
                                    "cluster-viewer", "node", "scrape"};

int cli_cmd_tokens(struct cli_ctx *ctx, const struct cli_cmd *cmd, int argc, char **argv)
{
    int rc = cli_parse(ctx, cmd, argc, argv, NULL, NULL, 0, 0);
    if (rc != CLI_CONTINUE)
        return rc;
    json_t *root, *tokens;
    rc = cli_get_member(ctx, "/v1/tokens", "tokens", JSON_ARRAY, &root, &tokens);
    if (rc != CLI_EXIT_OK || cli_emit(ctx, root)) {
        json_decref(root);
        return rc;
    }
    static const char *const head[] = {"NAME", "ROLE", "TENANT", "CREATED", "REVOKED"};
    struct cli_table t;
    cli_table_init(&t, 5, head, 0);
    size_t i;
    json_t *tk;
    json_array_foreach(tokens, i, tk) {
        char c[5][CLI_CELL_MAX];
        const json_t *rev = json_object_get(tk, "revoked");
        const char *row[5] = {
            cli_str(tk, "name", c[0], sizeof c[0]), cli_str(tk, "role", c[1], sizeof c[1]),
            cli_str(tk, "tenant", c[2], sizeof c[2]),
            cli_time_short(ctx, json_object_get(tk, "created"), c[3], sizeof c[3]),
            json_is_number(rev) ? cli_time_short(ctx, rev, c[4], sizeof c[4])
            : json_is_null(rev) || !rev ? "no"
                                        : cli_value(rev, c[4], sizeof c[4])};
        cli_table_row(&t, row);
    }
    json_decref(root);
    return cli_table_finish(&t, "tokens");
}

int cli_cmd_tokens_create(struct cli_ctx *ctx, const struct cli_cmd *cmd, int argc, char **argv)
{
    const char *name, *role = NULL, *tenant = NULL;
    const struct cli_opt opts[] = {
        {"role", 0, &role, NULL}, {"tenant", 0, &tenant, NULL}, {NULL, 0, NULL, NULL}};
    int rc = cli_parse(ctx, cmd, argc, argv, opts, &name, 1, 1);
    if (rc != CLI_CONTINUE)
        return rc;
    if (!role)
        return cli_usage_error(cmd, "--role is required");
    bool known = false;
    for (size_t i = 0; i < sizeof ROLES / sizeof ROLES[0]; i++)
        known |= strcmp(role, ROLES[i]) == 0;
    if (!known)
        return cli_usage_error(cmd, "--role must be admin, tenant-admin, user, viewer, "
                               "cluster-viewer, node or scrape, got '%s'", role);
    if (!ts_token_name_ok(name))
        return cli_usage_error(cmd, "the token name must be 1..63 characters of A-Z a-z 0-9 . _ -, "
                               "starting with a letter or digit");
    json_t *body = json_pack("{s:s, s:s, s:s*}", "name", name, "role", role, "tenant", tenant);
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    if (!text) {
        cli_errorf("out of memory");
        return CLI_EXIT_LOCAL;
    }
    struct cli_req req = {.method = "POST", .path = "/v1/tokens", .body = text,
                          .body_len = strlen(text), .content_type = "application/json"};
    struct cli_resp resp;
    rc = cli_http(ctx, &req, &resp);
    free(text);
    if (rc != CLI_EXIT_OK)
        return rc;
    json_t *tok;
    rc = cli_expect_member(resp.json, "token", JSON_OBJECT, &tok);
    const char *secret = json_string_value(json_object_get(tok, "secret"));
    if (rc == CLI_EXIT_OK && !secret) {
        cli_errorf("unreadable answer: the new token has no secret");
        rc = CLI_EXIT_SERVER;
    }
    if (rc == CLI_EXIT_OK && !cli_emit(ctx, resp.json)) {
        char nm[CLI_CELL_MAX], rl[CLI_CELL_MAX], tn[CLI_CELL_MAX];
        printf("%s\n", secret);
        fprintf(stderr, "token %s created (role %s, tenant %s); the secret above is shown only "
                        "this once\n",
                cli_str(tok, "name", nm, sizeof nm), cli_str(tok, "role", rl, sizeof rl),
                cli_str(tok, "tenant", tn, sizeof tn));
    }
    cli_resp_free(&resp);
    return rc;
}

int cli_cmd_tokens_revoke(struct cli_ctx *ctx, const struct cli_cmd *cmd, int argc, char **argv)
{
    const char *name;
    int rc = cli_parse(ctx, cmd, argc, argv, NULL, &name, 1, 1);
    if (rc != CLI_CONTINUE)
        return rc;
    struct cli_buf path = {0};
    cli_buf_puts(&path, "/v1/tokens/");
    cli_buf_escape(&path, name);
    if (path.oom) {
        cli_buf_free(&path);
        cli_errorf("out of memory");
        return CLI_EXIT_LOCAL;
    }
    struct cli_req req = {.method = "DELETE", .path = path.p};
    struct cli_resp resp;
    rc = cli_http(ctx, &req, &resp);
    cli_buf_free(&path);
    if (rc != CLI_EXIT_OK)
        return rc;
    if (resp.json)
        cli_emit(ctx, resp.json);
    if (ctx->output == CLI_OUT_TABLE) {
        char nm[CLI_CELL_MAX];
        printf("token %s revoked\n", cli_clean(name, nm, sizeof nm));
    }
    cli_resp_free(&resp);
    return CLI_EXIT_OK;
}
