/*
 * config.c - where the CLI's server, token and CA come from: a flag, else
 * the environment ($TESSERA_URL, $TESSERA_TOKEN), else the config file, else
 * the default server (no token). The server may be a comma-separated list
 * of controllers (a leader and its standbys; http.c finds the one that
 * answers). The config file is YAML with a closed
 * schema (server, token, ca), read by libtessera's document loader so its
 * errors read "file:line: key: why" like every other Tessera file; it lives
 * at --config PATH, else $XDG_CONFIG_HOME/tessera/config.yaml, else
 * ~/.config/tessera/config.yaml. A missing default file is normal; a
 * missing --config file is an error. A file that holds a token is a secret:
 * readable by group or others, it draws a warning (not a refusal, so a
 * shared read-only setup keeps working while it is fixed). With no token
 * from any of these, the ID token `tessera login` kept is used, if any.
 */
#include "cli/cli.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "model/yaml_doc.h"

#define CONFIG_MAX_BYTES 65536
#define CONFIG_REL_PATH "tessera/config.yaml"
#define ID_TOKEN_REL_PATH "tessera/id-token"
#define ID_TOKEN_MAX_BYTES 16384

struct config_vals {
    char *server;
    char *token;
    char *ca;
    ts_yaml_doc D;
};

static const char *env_value(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

/* rel under the user's config folder (malloc'd), or NULL when there is no home. */
static char *config_path(const char *rel)
{
    struct cli_buf b = {0};
    const char *xdg = env_value("XDG_CONFIG_HOME");
    const char *home = env_value("HOME");
    if (xdg && xdg[0] == '/')
        cli_buf_printf(&b, "%s/%s", xdg, rel);
    else if (home)
        cli_buf_printf(&b, "%s/.config/%s", home, rel);
    if (b.oom)
        cli_buf_free(&b);
    return b.p;
}

static char *default_path(void) { return config_path(CONFIG_REL_PATH); }

char *cli_id_token_path(void) { return config_path(ID_TOKEN_REL_PATH); }

/* The ID token `login` kept (malloc'd, trimmed), or NULL when there is none. */
static char *kept_id_token(void)
{
    char *path = cli_id_token_path();
    FILE *f = path ? fopen(path, "rb") : NULL;
    free(path);
    if (!f)
        return NULL;
    char *tok = calloc(1, ID_TOKEN_MAX_BYTES + 1);
    size_t n = tok ? fread(tok, 1, ID_TOKEN_MAX_BYTES, f) : 0;
    fclose(f);
    while (n > 0 && (tok[n - 1] == '\n' || tok[n - 1] == '\r' || tok[n - 1] == ' '))
        tok[--n] = '\0';
    if (n == 0) {
        free(tok);
        return NULL;
    }
    return tok;
}

static int take_string(struct config_vals *cv, yaml_node_t *n, const char *key, char **out)
{
    if (!n)
        return 0;
    const char *s = ts_yaml_scalar(n);
    if (!s || !*s)
        return ts_yaml_fail_got(&cv->D, n, key, "a non-empty string");
    *out = strdup(s);
    if (!*out)
        return ts_err_set(cv->D.err, TS_ENOMEM, "%s: out of memory", cv->D.fname);
    return 0;
}

static int walk_config(void *arg)
{
    struct config_vals *cv = arg;
    yaml_node_t *root = yaml_document_get_root_node(cv->D.doc);
    if (!root)
        return 0; /* an empty file sets nothing */
    static const char *const keys[] = {"server", "token", "ca"};
    yaml_node_t *vals[3];
    int rc = ts_yaml_map_fields(&cv->D, root, "", keys, 3, vals);
    if (rc == 0)
        rc = take_string(cv, vals[0], "server", &cv->server);
    if (rc == 0)
        rc = take_string(cv, vals[1], "token", &cv->token);
    if (rc == 0)
        rc = take_string(cv, vals[2], "ca", &cv->ca);
    return rc;
}

/* A relative `ca` in the config file is relative to the file's folder. */
static char *ca_beside(const char *config_path, char *ca)
{
    const char *slash = strrchr(config_path, '/');
    if (ca[0] == '/' || !slash)
        return ca;
    struct cli_buf b = {0};
    cli_buf_printf(&b, "%.*s/%s", (int)(slash - config_path), config_path, ca);
    if (b.oom)
        return ca;
    free(ca);
    return b.p;
}

static int load_config(const char *path, bool must_exist, struct config_vals *cv)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        if (!must_exist && errno == ENOENT)
            return CLI_CONTINUE;
        cli_errorf("config %s: %s", path, strerror(errno));
        return CLI_EXIT_USAGE;
    }
    size_t len;
    int rc;
    char *text = cli_read_file(path, CONFIG_MAX_BYTES, &len, &rc);
    if (!text)
        return rc;
    ts_err err = {0};
    cv->D.fname = path;
    cv->D.err = &err;
    int yrc = ts_yaml_load_one(&cv->D, text, len, walk_config, cv);
    free(text);
    if (yrc != 0) {
        cli_errorf("config %s", err.msg);
        return yrc == TS_ENOMEM ? CLI_EXIT_LOCAL : CLI_EXIT_USAGE;
    }
    if (cv->token && (st.st_mode & (S_IRGRP | S_IROTH)))
        cli_warn("%s holds a token and is readable by %s; run: chmod 600 %s", path,
                 (st.st_mode & S_IROTH) ? "everyone" : "its group", path);
    if (cv->ca)
        cv->ca = ca_beside(path, cv->ca);
    return CLI_CONTINUE;
}

static char *dup_or_take(const char *flag, const char *env, char **from_file)
{
    if (flag || env)
        return strdup(flag ? flag : env);
    char *v = *from_file;
    *from_file = NULL;
    return v;
}

/* Splits the comma-separated list into ctx->servers, each checked, and
 * makes the first the one in use. */
static int check_server(struct cli_ctx *ctx, const char *list, const char *from)
{
    const char *p = list;
    for (int k = 1;; k++) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n == 0) {
            cli_errorf("server URL %d is empty (a list is URL[,URL...]; from %s)", k, from);
            return CLI_EXIT_USAGE;
        }
        if (ctx->nservers == CLI_SERVERS_MAX) {
            cli_errorf("more than %d server URLs (from %s)", CLI_SERVERS_MAX, from);
            return CLI_EXIT_USAGE;
        }
        if (n >= CLI_URL_MAX) {
            cli_errorf("server URL %d is longer than %d bytes (from %s)", k, CLI_URL_MAX - 1,
                       from);
            return CLI_EXIT_USAGE;
        }
        char *s = malloc(n + 1);
        if (s) {
            memcpy(s, p, n);
            s[n] = '\0';
        }
        if (!s) {
            cli_errorf("out of memory");
            return CLI_EXIT_LOCAL;
        }
        ctx->servers[ctx->nservers++] = s;
        const char *what = NULL;
        for (const char *c = s; *c && !what; c++)
            if ((unsigned char)*c <= ' ' || *c == 0x7f)
                what = "must not hold blanks or control characters";
        if (!what && strncmp(s, "http://", 7) != 0 && strncmp(s, "https://", 8) != 0)
            what = "must start with http:// or https://";
        if (what) {
            char shown[CLI_CELL_MAX];
            if (ctx->nservers == 1 && !end)
                cli_errorf("server URL %s, got '%s' (from %s)", what,
                           cli_clean(s, shown, sizeof shown), from);
            else
                cli_errorf("server URL %d %s, got '%s' (from %s)", k, what,
                           cli_clean(s, shown, sizeof shown), from);
            return CLI_EXIT_USAGE;
        }
        while (n > 0 && s[n - 1] == '/')
            s[--n] = '\0';
        for (int i = 0; i + 1 < ctx->nservers; i++)
            if (strcmp(ctx->servers[i], s) == 0) {
                cli_errorf("server URL %d '%s' repeats URL %d (from %s)", k, s, i + 1, from);
                return CLI_EXIT_USAGE;
            }
        if (!end)
            break;
        p = end + 1;
    }
    ctx->server = strdup(ctx->servers[0]);
    if (!ctx->server) {
        cli_errorf("out of memory");
        return CLI_EXIT_LOCAL;
    }
    return CLI_CONTINUE;
}

int cli_config_resolve(struct cli_ctx *ctx)
{
    if (ctx->resolved)
        return CLI_CONTINUE;
    const struct cli_flags *f = &ctx->flags;
    struct config_vals cv = {0};
    char *path = f->config ? strdup(f->config) : default_path();
    int rc = CLI_CONTINUE;
    if (path)
        rc = load_config(path, f->config != NULL, &cv);
    if (rc == CLI_CONTINUE) {
        const char *env_url = env_value("TESSERA_URL");
        const char *env_token = env_value("TESSERA_TOKEN");
        const char *server_from = f->server ? "--server" : env_url ? "$TESSERA_URL"
                                  : cv.server            ? "the config file"
                                                         : "the default";
        bool from_login = !f->token && !env_token && !cv.token;
        if (from_login)
            cv.token = kept_id_token();
        const char *token_from = f->token ? "--token" : env_token ? "$TESSERA_TOKEN"
                                 : cv.token && !from_login ? "the config file"
                                 : cv.token                ? "the ID token of 'tessera login'"
                                                           : NULL;
        char *list = dup_or_take(f->server, env_url, &cv.server);
        if (!list && !f->server && !env_url)
            list = strdup(CLI_DEFAULT_SERVER);
        ctx->token = dup_or_take(f->token, env_token, &cv.token);
        ctx->ca = dup_or_take(f->ca, NULL, &cv.ca);
        ctx->token_from = token_from ? strdup(token_from) : NULL;
        if (!list || (token_from && (!ctx->token || !ctx->token_from)) ||
            (f->ca && !ctx->ca)) {
            cli_errorf("out of memory");
            rc = CLI_EXIT_LOCAL;
        } else {
            rc = check_server(ctx, list, server_from);
        }
        free(list);
    }
    free(cv.server);
    free(cv.token);
    free(cv.ca);
    free(path);
    if (rc == CLI_CONTINUE)
        ctx->resolved = true;
    return rc;
}

void cli_ctx_free(struct cli_ctx *ctx)
{
    cli_http_cleanup(ctx);
    free(ctx->server);
    for (int i = 0; i < ctx->nservers; i++)
        free(ctx->servers[i]);
    ctx->nservers = 0;
    free(ctx->token);
    free(ctx->ca);
    free(ctx->token_from);
    ctx->server = ctx->token = ctx->ca = ctx->token_from = NULL;
}
