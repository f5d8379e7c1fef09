/*
 * http.c - one request to tesserad, and the mapping of every outcome to an
 * exit code (docs/cli.md). libcurl does the transport with the safe
 * settings fixed here: bounded connect and request times, no redirects
 * followed (a redirect answer is reported, never chased with the token),
 * http/https only, certificates verified (--ca adds a private CA). The
 * answer body is kept up to ANSWER_MAX_BYTES and parsed as JSON; the
 * server's error shape {"error": {code, message, fields}} is printed with
 * every field error, so the user sees all that is wrong at once. With
 * several controllers (a leader and its standbys), a try that gets no
 * answer or a standby's 503 moves on to the leader the standby names or
 * the next controller, bounded to one pass plus one hop. Also here:
 * following next_cursor over the pages of a list.
 */
#include "cli/cli.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <curl/curl.h>

#define CONNECT_TIMEOUT_S 5L
#define REQUEST_TIMEOUT_DEFAULT_S 30L
#define ANSWER_MAX_BYTES (64L << 20)
#define SHOW_BODY_MAX 200   /* characters of a non-JSON error body quoted back */
#define PAGES_MAX 100000    /* a server that never ends a list is a broken server */
#define HEADER_VALUE_MAX 256

struct sink {
    struct cli_buf body;
    bool too_big;
    char retry_after[HEADER_VALUE_MAX];
    char location[HEADER_VALUE_MAX];
};

static size_t on_body(char *data, size_t size, size_t nmemb, void *arg)
{
    struct sink *s = arg;
    size_t n = size * nmemb;
    if (s->body.len + n > (size_t)ANSWER_MAX_BYTES) {
        s->too_big = true;
        return 0;
    }
    cli_buf_add(&s->body, data, n);
    return s->body.oom ? 0 : n;
}

/* Copies the value of header `name` (case-insensitive) from one header line. */
static void take_header(const char *line, size_t n, const char *name, char *out)
{
    size_t k = strlen(name);
    if (n <= k || strncasecmp(line, name, k) != 0 || line[k] != ':')
        return;
    const char *v = line + k + 1;
    const char *end = line + n;
    while (v < end && (*v == ' ' || *v == '\t'))
        v++;
    while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' '))
        end--;
    size_t len = (size_t)(end - v);
    if (len >= HEADER_VALUE_MAX)
        len = HEADER_VALUE_MAX - 1;
    memcpy(out, v, len);
    out[len] = '\0';
}

static size_t on_header(char *data, size_t size, size_t nmemb, void *arg)
{
    struct sink *s = arg;
    size_t n = size * nmemb;
    take_header(data, n, "Retry-After", s->retry_after);
    take_header(data, n, "Location", s->location);
    return n;
}

/* Prints s with control characters (a terminal escape in a server message)
 * replaced, at most max bytes. */
static void put_clean(FILE *f, const char *s, size_t max)
{
    size_t i = 0;
    for (; s[i] && i < max; i++) {
        unsigned char c = (unsigned char)s[i];
        fputc(c < 0x20 || c == 0x7f || cli_c1_in(s, i) ? '?' : c, f);
    }
    if (s[i])
        fputs("...", f);
}

static bool token_ok(const char *t)
{
    for (; *t; t++)
        if ((unsigned char)*t <= ' ' || *t == 0x7f)
            return false;
    return true;
}

static int transport_failed(const struct cli_ctx *ctx, CURLcode cc, long os_errno,
                            const char *errbuf, const struct sink *s)
{
    const char *detail = errbuf[0] ? errbuf : curl_easy_strerror(cc);
    switch (cc) {
    case CURLE_WRITE_ERROR:
        if (s->too_big) {
            cli_errorf("%s: the answer is larger than %ld bytes", ctx->server, ANSWER_MAX_BYTES);
            return CLI_EXIT_SERVER;
        }
        cli_errorf("out of memory reading the answer");
        return CLI_EXIT_LOCAL;
    case CURLE_URL_MALFORMAT:
    case CURLE_UNSUPPORTED_PROTOCOL:
        cli_errorf("bad server URL %s: %s", ctx->server, detail);
        return CLI_EXIT_USAGE;
    case CURLE_GOT_NOTHING:
    case CURLE_WEIRD_SERVER_REPLY:
    case CURLE_PARTIAL_FILE:
    case CURLE_BAD_CONTENT_ENCODING:
        cli_errorf("unreadable answer from %s: %s", ctx->server, detail);
        return CLI_EXIT_SERVER;
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
        cli_errorf("cannot reach %s: host name not resolved (%s)", ctx->server, detail);
        return CLI_EXIT_UNREACHABLE;
    case CURLE_COULDNT_CONNECT:
        /* the system's word ("Connection refused", "No route to host") says most */
        cli_errorf("cannot reach %s: %s (%s)", ctx->server,
                   os_errno ? strerror((int)os_errno) : "cannot connect", detail);
        return CLI_EXIT_UNREACHABLE;
    case CURLE_OPERATION_TIMEDOUT:
        cli_errorf("cannot reach %s: timed out (%s; see --timeout)", ctx->server, detail);
        return CLI_EXIT_UNREACHABLE;
    case CURLE_SSL_CACERT_BADFILE:
        cli_errorf("--ca %s: not a usable CA certificate file (%s)", ctx->ca ? ctx->ca : "?",
                   detail);
        return CLI_EXIT_USAGE;
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_SSL_CERTPROBLEM:
        cli_errorf("cannot reach %s: TLS failed (%s); a private CA is trusted with --ca FILE",
                   ctx->server, detail);
        return CLI_EXIT_UNREACHABLE;
    default:
        cli_errorf("cannot reach %s: %s", ctx->server, detail);
        return CLI_EXIT_UNREACHABLE;
    }
}

static int exit_for_status(long status)
{
    if (status == 404)
        return CLI_EXIT_NOT_FOUND;
    if (status == 401 || status == 403)
        return CLI_EXIT_AUTH;
    if (status >= 400 && status < 500)
        return CLI_EXIT_REFUSED;
    return CLI_EXIT_SERVER;
}

/* Whether msg is fields' "path: reason" joined by "; " (the server's
 * message for a request with several errors). */
static bool fields_joined(const json_t *fields, const char *msg)
{
    size_t i, at = 0, len = strlen(msg);
    const json_t *fe;
    json_array_foreach(fields, i, fe) {
        const char *path = json_string_value(json_object_get(fe, "path"));
        const char *why = json_string_value(json_object_get(fe, "reason"));
        if (!path || !why)
            return false;
        if (i > 0) {
            if (strncmp(msg + at, "; ", 2) != 0)
                return false;
            at += 2;
        }
        size_t pl = strlen(path), wl = strlen(why);
        if (at + pl + 2 + wl > len || strncmp(msg + at, path, pl) != 0 ||
            strncmp(msg + at + pl, ": ", 2) != 0 || strncmp(msg + at + pl + 2, why, wl) != 0)
            return false;
        at += pl + 2 + wl;
    }
    return at == len;
}

/* Prints a non-2xx answer: the server's message and field errors, or what
 * little the body says, plus a hint where one helps. */
static int status_failed(const struct cli_ctx *ctx, long status, const struct sink *s)
{
    if (status >= 300 && status < 400) {
        cli_errorf("%s answered %ld, a redirect to '%s'; not followed (check --server)",
                   ctx->server, status, s->location[0] ? s->location : "?");
        return CLI_EXIT_SERVER;
    }
    json_t *root = s->body.p ? json_loadb(s->body.p, s->body.len, 0, NULL) : NULL;
    json_t *e = json_object_get(root, "error");
    const char *code = json_string_value(json_object_get(e, "code"));
    const char *msg = json_string_value(json_object_get(e, "message"));
    json_t *fields = json_object_get(e, "fields");
    size_t i, nf = json_array_size(fields);
    json_t *fe;
    /* a message that only joins the field errors is said once: as the
     * one line it is, or as a count above their lines */
    bool joined = msg && nf > 0 && fields_joined(fields, msg);
    char count[48];
    if (joined && nf > 1) {
        snprintf(count, sizeof count, "%zu errors in the request", nf);
        msg = count;
    }
    fputs(CLI_PROG ": ", stderr);
    if (msg) {
        put_clean(stderr, msg, CLI_CELL_MAX);
        fprintf(stderr, " (%ld ", status);
        put_clean(stderr, code ? code : "error", CLI_CELL_MAX);
        fputs(")\n", stderr);
    } else {
        fprintf(stderr, "%s answered %ld", ctx->server, status);
        if (s->body.p && s->body.len) {
            fputs(": ", stderr);
            put_clean(stderr, s->body.p, SHOW_BODY_MAX);
        }
        fputc('\n', stderr);
    }
    json_array_foreach(joined && nf == 1 ? NULL : fields, i, fe) {
        const char *path = json_string_value(json_object_get(fe, "path"));
        const char *why = json_string_value(json_object_get(fe, "reason"));
        fputs("  ", stderr);
        put_clean(stderr, path ? path : "?", CLI_CELL_MAX);
        fputs(": ", stderr);
        put_clean(stderr, why ? why : "?", CLI_CELL_MAX);
        fputc('\n', stderr);
    }
    if (status == 401 && !ctx->token)
        cli_errorf("no token given: use --token, $TESSERA_TOKEN or 'token:' in the config file");
    else if (status == 401)
        cli_errorf("the token from %s was not accepted", ctx->token_from);
    if (status == 429 && s->retry_after[0]) {
        fputs(CLI_PROG ": retry after ", stderr);
        put_clean(stderr, s->retry_after, HEADER_VALUE_MAX);
        fputs(" s\n", stderr);
    }
    json_decref(root);
    return exit_for_status(status);
}

static struct curl_slist *headers_for(const struct cli_ctx *ctx, const struct cli_req *req,
                                      bool *oom)
{
    struct cli_buf b = {0};
    struct curl_slist *h = NULL, *n;
    const char *fixed[] = {"Accept: application/json", "Expect:",
                           req->content_type ? NULL : "Content-Type:"};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) {
        if (!fixed[i])
            continue;
        if (!(n = curl_slist_append(h, fixed[i])))
            goto oom;
        h = n;
    }
    if (ctx->token)
        cli_buf_printf(&b, "Authorization: Bearer %s\n", ctx->token);
    if (req->content_type)
        cli_buf_printf(&b, "Content-Type: %s\n", req->content_type);
    if (req->idempotency_key)
        cli_buf_printf(&b, "Idempotency-Key: %s\n", req->idempotency_key);
    if (b.oom)
        goto oom;
    for (char *line = b.p; line && *line;) {
        char *nl = strchr(line, '\n');
        *nl = '\0';
        if (!(n = curl_slist_append(h, line)))
            goto oom;
        h = n;
        line = nl + 1;
    }
    cli_buf_free(&b);
    return h;
oom:
    cli_buf_free(&b);
    curl_slist_free_all(h);
    *oom = true;
    return NULL;
}

static void set_options(struct cli_ctx *ctx, CURL *c, const struct cli_req *req, const char *url,
                        struct sink *s, char *errbuf, struct curl_slist *h)
{
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, CONNECT_TIMEOUT_S);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, ctx->timeout_s ? ctx->timeout_s : REQUEST_TIMEOUT_DEFAULT_S);
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
#if LIBCURL_VERSION_NUM >= 0x075500
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
#else
    curl_easy_setopt(c, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 2L);
    if (ctx->ca)
        curl_easy_setopt(c, CURLOPT_CAINFO, ctx->ca);
    curl_easy_setopt(c, CURLOPT_USERAGENT, CLI_PROG "-cli/" CLI_VERSION);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, s);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, s);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    if (strcmp(req->method, "GET") == 0)
        return;
    if (strcmp(req->method, "POST") == 0)
        curl_easy_setopt(c, CURLOPT_POST, 1L);
    else
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, req->method);
    if (req->body || strcmp(req->method, "POST") == 0) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, req->body ? req->body : "");
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->body_len);
    }
}

/* One try of a request at ctx->server. */
struct attempt {
    CURLcode cc;
    long os_errno;
    long status;
    char errbuf[CURL_ERROR_SIZE];
    struct sink s;
};

/* Sends req to ctx->server once; the outcome in *t. CLI_CONTINUE, or an
 * exit code when it could not even be sent (out of memory). */
static int try_once(struct cli_ctx *ctx, const struct cli_req *req, struct attempt *t)
{
    CURL *c = ctx->curl;
    curl_easy_reset(c);
    bool oom = false;
    struct curl_slist *h = headers_for(ctx, req, &oom);
    struct cli_buf url = {0};
    cli_buf_puts(&url, ctx->server);
    cli_buf_puts(&url, req->path);
    if (oom || url.oom) {
        curl_slist_free_all(h);
        cli_buf_free(&url);
        cli_errorf("out of memory");
        return CLI_EXIT_LOCAL;
    }
    set_options(ctx, c, req, url.p, &t->s, t->errbuf, h);
    t->cc = curl_easy_perform(c);
    curl_slist_free_all(h);
    cli_buf_free(&url);
    if (t->cc != CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_OS_ERRNO, &t->os_errno);
    else
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &t->status);
    return CLI_CONTINUE;
}

/* A try that reached no controller able to answer: no connection, no
 * answer in time, the connection dropped. */
static bool no_answer(CURLcode cc)
{
    return cc == CURLE_COULDNT_CONNECT || cc == CURLE_COULDNT_RESOLVE_HOST ||
           cc == CURLE_OPERATION_TIMEDOUT || cc == CURLE_GOT_NOTHING ||
           cc == CURLE_SEND_ERROR || cc == CURLE_RECV_ERROR;
}

/* A standby's answer, 503 {"error": {"code": "standby", "leader": URL}}:
 * true, with the leader in out when it names a usable http(s) URL ("" if
 * not). */
static bool standby_answer(const struct attempt *t, char *out, size_t size)
{
    out[0] = '\0';
    if (t->cc != CURLE_OK || t->status != 503 || !t->s.body.p)
        return false;
    json_t *root = json_loadb(t->s.body.p, t->s.body.len, 0, NULL);
    json_t *e = json_object_get(root, "error");
    const char *code = json_string_value(json_object_get(e, "code"));
    bool standby = code && strcmp(code, "standby") == 0;
    const char *leader = json_string_value(json_object_get(e, "leader"));
    size_t n = leader ? strlen(leader) : 0;
    bool ok = standby && n > 0 && n < size &&
              (strncmp(leader, "http://", 7) == 0 || strncmp(leader, "https://", 8) == 0);
    for (size_t i = 0; ok && i < n; i++)
        ok = (unsigned char)leader[i] > ' ' && leader[i] != 0x7f && leader[i] != ',';
    if (ok) {
        memcpy(out, leader, n + 1);
        while (n > 0 && out[n - 1] == '/')
            out[--n] = '\0';
    }
    json_decref(root);
    return standby;
}

/* The final try's outcome as the exit code, its message printed. */
static int conclude(struct cli_ctx *ctx, const struct cli_req *req, struct attempt *t,
                    struct cli_resp *resp)
{
    if (t->cc != CURLE_OK)
        return transport_failed(ctx, t->cc, t->os_errno, t->errbuf, &t->s);
    resp->status = t->status;
    resp->replayed = resp->status == 200;
    if ((resp->status < 200 || resp->status > 299) && req->quiet) {
        json_t *root = t->s.body.p ? json_loadb(t->s.body.p, t->s.body.len, 0, NULL) : NULL;
        const char *code = json_string_value(json_object_get(json_object_get(root, "error"),
                                                             "code"));
        snprintf(resp->code, sizeof resp->code, "%s", code ? code : "");
        json_decref(root);
        return exit_for_status(resp->status);
    }
    if (resp->status < 200 || resp->status > 299)
        return status_failed(ctx, resp->status, &t->s);
    if (t->s.body.len == 0)
        return CLI_EXIT_OK;
    json_error_t je;
    resp->json = json_loadb(t->s.body.p, t->s.body.len, 0, &je);
    if (!json_is_object(resp->json)) {
        cli_errorf("unreadable answer from %s%s (%ld): %s", ctx->server, req->path,
                   resp->status, resp->json ? "not a JSON object" : je.text);
        json_decref(resp->json);
        resp->json = NULL;
        return CLI_EXIT_SERVER;
    }
    return CLI_EXIT_OK;
}

/* Makes url the controller in use. */
static int use_server(struct cli_ctx *ctx, const char *url)
{
    char *s = strdup(url);
    if (!s) {
        cli_errorf("out of memory");
        return CLI_EXIT_LOCAL;
    }
    free(ctx->server);
    ctx->server = s;
    return CLI_CONTINUE;
}

int cli_http(struct cli_ctx *ctx, const struct cli_req *req, struct cli_resp *resp)
{
    *resp = (struct cli_resp){0};
    int rc = cli_config_resolve(ctx);
    if (rc != CLI_CONTINUE)
        return rc;
    if (ctx->token && !token_ok(ctx->token)) {
        cli_errorf("the token from %s has blanks or control characters", ctx->token_from);
        return CLI_EXIT_USAGE;
    }
    if (ctx->ca && access(ctx->ca, R_OK) != 0) {
        cli_errorf("--ca %s: cannot read the file", ctx->ca);
        return CLI_EXIT_USAGE;
    }
    if (!ctx->curl && !(ctx->curl = curl_easy_init())) {
        cli_errorf("cannot start libcurl");
        return CLI_EXIT_LOCAL;
    }
    /* Bounded: each listed controller once, plus one hop to a leader a
     * standby names; the one in use (the last to answer) first. */
    bool tried[CLI_SERVERS_MAX] = {false};
    bool hopped = false;
    struct cli_buf notes = {0}; /* what each try that moved on came to */
    int ntries = 0;
    for (;;) {
        for (int i = 0; i < ctx->nservers; i++)
            tried[i] = tried[i] || strcmp(ctx->servers[i], ctx->server) == 0;
        struct attempt t = {0};
        rc = try_once(ctx, req, &t);
        ntries++;
        if (rc != CLI_CONTINUE) {
            cli_buf_free(&t.s.body);
            break;
        }
        char leader[CLI_URL_MAX];
        bool standby = standby_answer(&t, leader, sizeof leader);
        const char *next = NULL;
        if (standby || (t.cc != CURLE_OK && no_answer(t.cc))) {
            bool known = strcmp(leader, ctx->server) == 0;
            for (int i = 0; leader[0] && i < ctx->nservers; i++)
                known = known || (tried[i] && strcmp(ctx->servers[i], leader) == 0);
            if (leader[0] && !hopped && !known) {
                next = leader;
                hopped = true;
            }
            for (int i = 0; !next && i < ctx->nservers; i++)
                if (!tried[i])
                    next = ctx->servers[i];
        }
        if (!next) {
            rc = conclude(ctx, req, &t, resp);
            cli_buf_free(&t.s.body);
            if (rc != CLI_EXIT_OK && ntries > 1 && notes.p)
                cli_errorf("tried before: %s", notes.p);
            break;
        }
        cli_buf_printf(&notes, "%s%s (%s)", notes.len ? ", " : "", ctx->server,
                       standby ? "a standby" : "no answer");
        cli_buf_free(&t.s.body);
        rc = use_server(ctx, next);
        if (rc != CLI_CONTINUE)
            break;
    }
    cli_buf_free(&notes);
    return rc;
}

void cli_resp_free(struct cli_resp *resp)
{
    json_decref(resp->json);
    resp->json = NULL;
}

void cli_http_cleanup(struct cli_ctx *ctx)
{
    if (ctx->curl)
        curl_easy_cleanup(ctx->curl);
    ctx->curl = NULL;
}

int cli_expect_member(const json_t *root, const char *key, json_type want, json_t **member)
{
    json_t *m = json_object_get(root, key);
    if (!m || json_typeof(m) != want) {
        cli_errorf("unreadable answer: no '%s' %s in it", key,
                   want == JSON_ARRAY ? "list" : want == JSON_OBJECT ? "object" : "value");
        return CLI_EXIT_SERVER;
    }
    *member = m;
    return CLI_EXIT_OK;
}

int cli_get_member(struct cli_ctx *ctx, const char *path, const char *key, json_type want,
                   json_t **root, json_t **member)
{
    struct cli_req req = {.method = "GET", .path = path};
    struct cli_resp resp;
    *root = NULL;
    int rc = cli_http(ctx, &req, &resp);
    if (rc != CLI_EXIT_OK)
        return rc;
    rc = cli_expect_member(resp.json, key, want, member);
    if (rc != CLI_EXIT_OK) {
        cli_resp_free(&resp);
        return rc;
    }
    *root = resp.json;
    return CLI_EXIT_OK;
}

int cli_list_fetch(struct cli_ctx *ctx, const struct cli_cmd *cmd, int argc, char **argv,
                   const char *path, const char *key, json_t **root, json_t **list)
{
    int rc = cli_parse(ctx, cmd, argc, argv, NULL, NULL, 0, 0);
    if (rc != CLI_CONTINUE)
        return rc;
    return cli_list_get(ctx, path, key, root, list);
}

int cli_list_cmd(struct cli_ctx *ctx, const struct cli_cmd *cmd, int argc, char **argv,
                 const char *path, const char *key, const struct cli_listing *l)
{
    json_t *root, *list;
    int rc = cli_list_fetch(ctx, cmd, argc, argv, path, key, &root, &list);
    return rc != CLI_CONTINUE ? rc : cli_list_print(ctx, l, root, list);
}

int cli_list_get(struct cli_ctx *ctx, const char *path, const char *key, json_t **root,
                 json_t **list)
{
    *root = NULL;
    int rc = path ? cli_get_member(ctx, path, key, JSON_ARRAY, root, list) : CLI_EXIT_LOCAL;
    return cli_answered(ctx, rc, *root) ? rc : CLI_CONTINUE;
}

int cli_job_list(struct cli_ctx *ctx, const struct cli_cmd *cmd, int argc, char **argv,
                 const char *suffix, const char *key, bool paged, const struct cli_listing *l)
{
    long id;
    int rc = cli_parse_job(ctx, cmd, argc, argv, NULL, &id);
    if (rc != CLI_CONTINUE)
        return rc;
    char path[96];
    snprintf(path, sizeof path, "/v1/jobs/%ld%s", id, suffix);
    json_t *root = NULL, *list = NULL;
    if (paged) {
        rc = cli_get_pages(ctx, path, key, true, &root);
        if (cli_answered(ctx, rc, root))
            return rc;
        list = json_object_get(root, key);
    } else if ((rc = cli_list_get(ctx, path, key, &root, &list)) != CLI_CONTINUE) {
        return rc;
    }
    return cli_list_print(ctx, l, root, list);
}

bool cli_answered(const struct cli_ctx *ctx, int rc, json_t *out)
{
    if (rc == CLI_EXIT_OK && !cli_emit(ctx, out))
        return false;
    json_decref(out);
    return true;
}

int cli_send_json(struct cli_ctx *ctx, const char *method, const char *path, json_t *body,
                  struct cli_resp *resp)
{
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    if (!text) {
        cli_errorf("out of memory");
        return CLI_EXIT_LOCAL;
    }
    struct cli_req req = {.method = method, .path = path, .body = text,
                          .body_len = strlen(text), .content_type = "application/json"};
    int rc = cli_http(ctx, &req, resp);
    free(text);
    return rc;
}

int cli_send_member(struct cli_ctx *ctx, const char *method, const char *path, json_t *body,
                    const char *key, json_type want, struct cli_resp *resp, json_t **member)
{
    *resp = (struct cli_resp){0};
    int rc = cli_send_json(ctx, method, path, body, resp);
    return rc != CLI_EXIT_OK ? rc : cli_expect_member(resp->json, key, want, member);
}

int cli_delete_named(struct cli_ctx *ctx, const char *prefix, const char *name,
                     const char *const *query, const char *what, const char *done)
{
    struct cli_buf path = {0};
    cli_buf_puts(&path, prefix);
    cli_buf_escape(&path, name);
    for (size_t i = 0; query && query[i]; i += 2)
        cli_buf_query(&path, query[i], query[i + 1]);
    if (path.oom) {
        cli_buf_free(&path);
        cli_errorf("out of memory");
        return CLI_EXIT_LOCAL;
    }
    struct cli_req req = {.method = "DELETE", .path = path.p};
    struct cli_resp resp;
    int rc = cli_http(ctx, &req, &resp);
    cli_buf_free(&path);
    if (rc != CLI_EXIT_OK)
        return rc;
    if (resp.json)
        cli_emit(ctx, resp.json);
    if (ctx->output == CLI_OUT_TABLE) {
        char nm[CLI_CELL_MAX];
        printf("%s %s %s\n", what, cli_clean(name, nm, sizeof nm), done);
    }
    cli_resp_free(&resp);
    return CLI_EXIT_OK;
}

int cli_delete_cmd(struct cli_ctx *ctx, const struct cli_cmd *cmd, int argc, char **argv,
                   const char *prefix, const char *what, const char *done)
{
    const char *name;
    int rc = cli_parse(ctx, cmd, argc, argv, NULL, &name, 1, 1);
    if (rc != CLI_CONTINUE)
        return rc;
    return cli_delete_named(ctx, prefix, name, NULL, what, done);
}

int cli_get_pages(struct cli_ctx *ctx, const char *path, const char *key, bool all, json_t **out)
{
    json_t *items = json_array();
    json_t *result = json_object();
    char *cursor = NULL;
    int rc = CLI_EXIT_OK;
    *out = NULL;
    if (!items || !result || json_object_set(result, key, items) != 0)
        rc = CLI_EXIT_LOCAL;
    for (int page = 0; rc == CLI_EXIT_OK; page++) {
        struct cli_buf p = {0};
        cli_buf_puts(&p, path);
        cli_buf_query(&p, "cursor", cursor);
        json_t *root = NULL, *list;
        rc = p.oom ? CLI_EXIT_LOCAL : cli_get_member(ctx, p.p, key, JSON_ARRAY, &root, &list);
        cli_buf_free(&p);
        if (rc != CLI_EXIT_OK)
            break;
        json_array_extend(items, list);
        /* GET /v1/jobs: large arrays' elements not yet jobs, on the first page */
        json_t *arrays = page == 0 ? json_object_get(root, "arrays") : NULL;
        if (arrays)
            json_object_set(result, "arrays", arrays);
        json_t *next = json_object_get(root, "next_cursor");
        if (!all || !next || json_is_null(next)) {
            json_object_set(result, "next_cursor", next ? next : json_null());
            json_decref(root);
            break;
        }
        const char *nc = json_string_value(next);
        if (!nc || (cursor && strcmp(cursor, nc) == 0) || page + 1 >= PAGES_MAX) {
            cli_errorf("unreadable answer: next_cursor is %s",
                       !nc ? "not a string" : "repeated or never ends");
            rc = CLI_EXIT_SERVER;
        } else {
            free(cursor);
            cursor = strdup(nc);
            if (!cursor)
                rc = CLI_EXIT_LOCAL;
        }
        json_decref(root);
    }
    free(cursor);
    json_decref(items);
    if (rc == CLI_EXIT_LOCAL)
        cli_errorf("out of memory");
    if (rc != CLI_EXIT_OK) {
        json_decref(result);
        return rc;
    }
    *out = result;
    return rc;
}
