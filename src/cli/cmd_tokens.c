/*
 * cmd_tokens.c - tokens, tokens create and tokens revoke (docs/api.md).
 *
 * A new token's secret is shown once, so `tokens create` writes it alone on
 * stdout (secret=$(tessera tokens create ...) works) and says everything
 * else on stderr. The role is checked here against the six the API
 * defines, so a typo is a usage error before anything is created; the name
 * against the API's charset (1..63 of A-Z a-z 0-9 . _ -, starting with a
 * letter or digit) for the same reason. The list
 * shows `revoked` as a time when the server gives one, yes/no for a bool,
 * and each token's Unix identity and expiry.
 *
 * `login --id-token FILE|-` signs in with an OpenID Connect ID token: the
 * server checks it (GET /v1/whoami) and it is kept, 0600, in the file the
 * CLI then uses when no other token is given (config.c).
 */
#include "cli/cli.h"
#include "tessera/store.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* An ID token is 1-2 KiB; anything past this is not one. */
#define ID_TOKEN_MAX_BYTES 16384

static const char *const ROLES[] = {"admin", "tenant-admin", "user", "viewer",
                                    "cluster-viewer", "node", "scrape"};

static void token_row(const struct cli_ctx *ctx, const json_t *tk, char (*c)[CLI_CELL_MAX],
                      const char **row)
{
    const json_t *rev = json_object_get(tk, "revoked");
    const json_t *exp = json_object_get(tk, "expires");
    const char *cells[8] = {
        cli_str(tk, "name", c[0], CLI_CELL_MAX), cli_str(tk, "role", c[1], CLI_CELL_MAX),
        cli_str(tk, "tenant", c[2], CLI_CELL_MAX), cli_str(tk, "unix_user", c[3], CLI_CELL_MAX),
        cli_str(tk, "uid", c[4], CLI_CELL_MAX),
        cli_time_short(ctx, json_object_get(tk, "created"), c[5], CLI_CELL_MAX),
        json_is_number(exp) ? cli_time_short(ctx, exp, c[6], CLI_CELL_MAX) : "never",
        json_is_number(rev) ? cli_time_short(ctx, rev, c[7], CLI_CELL_MAX)
        : json_is_null(rev) || !rev ? "no"
                                    : cli_value(rev, c[7], CLI_CELL_MAX)};
    memcpy(row, cells, sizeof cells);
}

int cli_cmd_tokens(struct cli_ctx *ctx, const struct cli_cmd *cmd, int argc, char **argv)
{
    static const char *const head[] = {"NAME",    "ROLE",    "TENANT", "UNIX USER",
                                       "UID",     "CREATED", "EXPIRES", "REVOKED"};
    static const struct cli_listing tokens_list = {"tokens", 8, head, 0, token_row};
    return cli_list_cmd(ctx, cmd, argc, argv, "/v1/tokens", "tokens", &tokens_list);
}

int cli_cmd_tokens_create(struct cli_ctx *ctx, const struct cli_cmd *cmd, int argc, char **argv)
{
    const char *name, *role = NULL, *tenant = NULL, *unix_user = NULL, *uid = NULL;
    const char *expires = NULL;
    const struct cli_opt opts[] = {{"role", 0, &role, NULL},
                                   {"tenant", 0, &tenant, NULL},
                                   {"unix-user", 0, &unix_user, NULL},
                                   {"uid", 0, &uid, NULL},
                                   {"expires", 0, &expires, NULL},
                                   {NULL, 0, NULL, NULL}};
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
    if (!unix_user != !uid)
        return cli_usage_error(cmd, "--unix-user and --uid go together (the Unix user and the "
                               "uid it has on every node)");
    char *end = NULL;
    long long uid_v = uid ? strtoll(uid, &end, 10) : 0;
    if (uid && (!*uid || *end || uid_v < 0 || uid_v > 4294967294LL))
        return cli_usage_error(cmd, "--uid must be an integer 0..4294967294, got '%s'", uid);
    json_t *body = json_pack("{s:s, s:s, s:s*, s:s*}", "name", name, "role", role, "tenant",
                             tenant, "expires", expires);
    if (body && unix_user) {
        json_object_set_new(body, "unix_user", json_string(unix_user));
        json_object_set_new(body, "uid", json_integer(uid_v));
    }
    struct cli_resp resp;
    json_t *tok = NULL;
    rc = cli_send_member(ctx, "POST", "/v1/tokens", body, "token", JSON_OBJECT, &resp, &tok);
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
        size_t k;
        json_t *w;
        json_array_foreach(json_object_get(resp.json, "warnings"), k, w)
            cli_warn("%s", cli_clean(json_string_value(w) ? json_string_value(w) : "",
                                     nm, sizeof nm));
    }
    cli_resp_free(&resp);
    return rc;
}

int cli_cmd_tokens_revoke(struct cli_ctx *ctx, const struct cli_cmd *cmd, int argc, char **argv)
{
    return cli_delete_cmd(ctx, cmd, argc, argv, "/v1/tokens/", "token", "revoked");
}

/* Writes the ID token to path, 0600, replacing what was there. */
static int save_id_token(const char *path, const char *tok, size_t len)
{
    char dir[CLI_URL_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash) { /* ~/.config, then ~/.config/tessera, as the user's own */
        *slash = '\0';
        char *up = strrchr(dir, '/');
        if (up && up != dir) {
            *up = '\0';
            mkdir(dir, 0700);
            *up = '/';
        }
        mkdir(dir, 0700);
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    bool ok = fd >= 0 && fchmod(fd, 0600) == 0 && write(fd, tok, len) == (ssize_t)len &&
              write(fd, "\n", 1) == 1;
    int e = errno;
    if (fd >= 0)
        close(fd);
    if (!ok) {
        cli_errorf("%s: cannot write: %s", path, strerror(e));
        return CLI_EXIT_LOCAL;
    }
    return CLI_EXIT_OK;
}

int cli_cmd_login(struct cli_ctx *ctx, const struct cli_cmd *cmd, int argc, char **argv)
{
    const char *file = NULL;
    const struct cli_opt opts[] = {{"id-token", 0, &file, NULL}, {NULL, 0, NULL, NULL}};
    int rc = cli_parse(ctx, cmd, argc, argv, opts, NULL, 0, 0);
    if (rc != CLI_CONTINUE)
        return rc;
    if (!file)
        return cli_usage_error(cmd, "--id-token FILE is required ('-' reads stdin)");
    size_t len = 0;
    char *tok = cli_read_file(file, ID_TOKEN_MAX_BYTES, &len, &rc);
    if (!tok)
        return rc;
    while (len > 0 && (tok[len - 1] == '\n' || tok[len - 1] == '\r' || tok[len - 1] == ' '))
        tok[--len] = '\0';
    if (len == 0 || strchr(tok, '\n') || !strchr(tok, '.')) {
        free(tok);
        return cli_usage_error(cmd, "%s: not an ID token (header.payload.signature)", file);
    }
    rc = cli_config_resolve(ctx);
    char *saved = ctx->token, *saved_from = ctx->token_from;
    ctx->token = tok; /* the ID token alone vouches for this request */
    ctx->token_from = (char *)"--id-token";
    json_t *who = NULL;
    if (rc == CLI_CONTINUE) {
        struct cli_req req = {.method = "GET", .path = "/v1/whoami"};
        struct cli_resp resp;
        rc = cli_http(ctx, &req, &resp);
        if (rc == CLI_EXIT_OK)
            who = json_incref(resp.json);
        if (rc == CLI_EXIT_OK)
            cli_resp_free(&resp);
    }
    ctx->token = saved;
    ctx->token_from = saved_from;
    char *path = rc == CLI_EXIT_OK ? cli_id_token_path() : NULL;
    if (rc == CLI_EXIT_OK && !path) {
        cli_errorf("no home folder to keep the ID token in ($HOME, $XDG_CONFIG_HOME)");
        rc = CLI_EXIT_LOCAL;
    }
    if (rc == CLI_EXIT_OK)
        rc = save_id_token(path, tok, len);
    if (rc == CLI_EXIT_OK && !cli_emit(ctx, who)) {
        char nm[CLI_CELL_MAX], rl[CLI_CELL_MAX], tn[CLI_CELL_MAX], uu[CLI_CELL_MAX],
            ex[CLI_CELL_MAX];
        const json_t *exp = json_object_get(who, "expires");
        printf("signed in as %s (role %s, tenant %s, unix user %s); expires %s; kept in %s\n",
               cli_str(who, "name", nm, sizeof nm), cli_str(who, "role", rl, sizeof rl),
               cli_str(who, "tenant", tn, sizeof tn), cli_str(who, "unix_user", uu, sizeof uu),
               json_is_number(exp) ? cli_time_short(ctx, exp, ex, sizeof ex) : "never",
               path);
    }
    json_decref(who);
    free(path);
    free(tok);
    return rc;
}
