/*
 * http.c - the HTTP server: libmicrohttpd with a thread per connection (a
 * submission waits for its group commit; other connections go on), request
 * bodies collected up to CTLD_BODY_MAX_BYTES (413 beyond), bearer-token
 * authentication, a token-bucket rate limit per token (429 with
 * Retry-After), then routes.c. HTTPS when the configuration names a
 * certificate and key.
 *
 * Authentication: the secret's SHA-256 is looked up in a small cache of
 * live tokens (refreshed from the store on a miss, and cleared when a token
 * is revoked); comparing hashes is constant-time (memcmp-free loop), and the
 * secret itself is never stored or logged.
 *
 * Every node agent holds one connection open (its long-poll), so the server
 * polls each connection with poll(), not select(): select() cannot watch a
 * descriptor at or above FD_SETSIZE (1024), which made tesserad drop the
 * connections of agents beyond about the 1,000th. For the same reason it
 * raises its soft RLIMIT_NOFILE to the hard limit, accepts as many
 * connections as that allows less CTLD_FDS_RESERVED (store, logs), and says
 * at start when that is too few for the cluster's agent nodes.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include "ctld/ctld.h"
#include "ctld/ui.h"

#define LIMITER_SLOTS 1024
#define TOKEN_CACHE_SLOTS 4096 /* one per node agent of a large cluster, and users */
/* Descriptors kept back from connections: the store (SQLite database, WAL
 * and shared memory, or PostgreSQL sockets), logs, the listening socket. */
#define CTLD_FDS_RESERVED 64
/* Connections accepted when the descriptor limit cannot be read. */
#define CTLD_CONNECTIONS_DEFAULT 1000

typedef struct bucket {
    char name[TS_STORE_NAME_MAX];
    double tokens;
    double at_s;
} bucket;

typedef struct token_cache_entry {
    uint8_t hash[TS_TOKEN_HASH_BYTES];
    ctld_caller who;
    bool used;
} token_cache_entry;

typedef struct limiter {
    pthread_mutex_t mu;
    bucket b[LIMITER_SLOTS];
    token_cache_entry tc[TOKEN_CACHE_SLOTS];
} limiter;

typedef struct conn_ctx {
    char *body;
    size_t len, cap;
    bool too_large;
} conn_ctx;

void ctld_reply_json(ctld_reply *r, int status, json_t *doc)
{
    r->status = status;
    r->content_type = "application/json";
    r->body = doc ? json_dumps(doc, JSON_COMPACT) : strdup("{}");
    json_decref(doc);
}

void ctld_reply_error(ctld_reply *r, int status, const char *code, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ctld_reply_json(r, status, json_pack("{s:{s:s,s:s}}", "error", "code", code, "message", msg));
}

static bool hash_equal(const uint8_t *a, const uint8_t *b)
{
    uint8_t d = 0;
    for (int i = 0; i < TS_TOKEN_HASH_BYTES; i++)
        d |= (uint8_t)(a[i] ^ b[i]);
    return d == 0;
}

void ctld_token_cache_clear(ctld *c)
{
    limiter *L = c->limiter;
    if (!L)
        return; /* no server (tests, fuzzing): nothing cached */
    pthread_mutex_lock(&L->mu);
    memset(L->tc, 0, sizeof L->tc);
    pthread_mutex_unlock(&L->mu);
}

/* 0 and *who, or TS_ENOENT. */
static int authenticate(ctld *c, const char *authz, ctld_caller *who)
{
    if (!authz || strncmp(authz, "Bearer ", 7) != 0)
        return TS_ENOENT;
    uint8_t h[TS_TOKEN_HASH_BYTES];
    ctld_token_hash(authz + 7, h);
    limiter *L = c->limiter;
    unsigned slot = ((unsigned)h[0] | (unsigned)h[1] << 8) % TOKEN_CACHE_SLOTS;
    pthread_mutex_lock(&L->mu);
    token_cache_entry *e = &L->tc[slot];
    if (e->used && hash_equal(e->hash, h)) {
        *who = e->who;
        pthread_mutex_unlock(&L->mu);
        return 0;
    }
    pthread_mutex_unlock(&L->mu);
    ts_token_row t;
    if (ts_store_token_by_hash(c->store, h, &t, NULL) != 0)
        return TS_ENOENT;
    memset(who, 0, sizeof *who);
    snprintf(who->name, sizeof who->name, "%s", t.name);
    snprintf(who->tenant, sizeof who->tenant, "%s", t.tenant);
    who->role = t.role;
    pthread_mutex_lock(&L->mu);
    memcpy(e->hash, h, sizeof e->hash);
    e->who = *who;
    e->used = true;
    pthread_mutex_unlock(&L->mu);
    return 0;
}

/* Token bucket per token name; >= 0: allowed; else seconds to wait. */
static double rate_take(ctld *c, const char *name)
{
    limiter *L = c->limiter;
    uint64_t h = 1469598103934665603ULL;
    for (const char *p = name; *p; p++)
        h = (h ^ (uint8_t)*p) * 1099511628211ULL;
    double now = ctld_now();
    pthread_mutex_lock(&L->mu);
    bucket *b = &L->b[h % LIMITER_SLOTS];
    if (strcmp(b->name, name) != 0) {
        snprintf(b->name, sizeof b->name, "%s", name);
        b->tokens = c->cfg.rate_burst;
        b->at_s = now;
    }
    b->tokens += (now - b->at_s) * c->cfg.rate_per_s;
    if (b->tokens > c->cfg.rate_burst)
        b->tokens = c->cfg.rate_burst;
    b->at_s = now;
    double wait = 0.0;
    if (b->tokens >= 1.0)
        b->tokens -= 1.0;
    else
        wait = -(1.0 - b->tokens) / c->cfg.rate_per_s;
    pthread_mutex_unlock(&L->mu);
    return wait;
}

static enum MHD_Result send_reply(struct MHD_Connection *conn, ctld *c, ctld_reply *r)
{
    size_t len = r->body ? strlen(r->body) : 0;
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(len, r->body ? r->body : (void *)"",
                                        r->body ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    if (!resp) {
        free(r->body);
        return MHD_NO;
    }
    MHD_add_response_header(resp, "Content-Type",
                            r->content_type ? r->content_type : "application/json");
    if (r->retry_after[0])
        MHD_add_response_header(resp, "Retry-After", r->retry_after);
    enum MHD_Result ret = MHD_queue_response(conn, (unsigned)r->status, resp);
    MHD_destroy_response(resp);
    int cls = r->status / 100;
    if (cls >= 1 && cls <= 5)
        __atomic_add_fetch(&c->m.http_requests[cls], 1, __ATOMIC_RELAXED);
    return ret;
}

static const char *arg(struct MHD_Connection *conn, const char *k)
{
    return MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, k);
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *conn, const char *url,
                              const char *method, const char *version, const char *upload,
                              size_t *upload_size, void **con_cls)
{
    (void)version;
    ctld *c = cls;
    conn_ctx *x = *con_cls;
    if (!x) {
        x = calloc(1, sizeof *x);
        if (!x)
            return MHD_NO;
        *con_cls = x;
        return MHD_YES;
    }
    if (*upload_size > 0) {
        if (!x->too_large) {
            if (x->len + *upload_size > CTLD_BODY_MAX_BYTES) {
                x->too_large = true;
            } else {
                if (x->len + *upload_size + 1 > x->cap) {
                    size_t cap = x->cap ? x->cap : 4096;
                    while (cap < x->len + *upload_size + 1)
                        cap *= 2;
                    char *nb = realloc(x->body, cap);
                    if (!nb)
                        return MHD_NO;
                    x->body = nb;
                    x->cap = cap;
                }
                memcpy(x->body + x->len, upload, *upload_size);
                x->len += *upload_size;
                x->body[x->len] = '\0';
            }
        }
        *upload_size = 0;
        return MHD_YES;
    }
    ctld_reply r = {0};
    if (strcmp(url, "/healthz") == 0) {
        r.status = 200;
        r.content_type = "text/plain";
        r.body = strdup("ok\n");
        return send_reply(conn, c, &r);
    }
    if (strcmp(url, "/readyz") == 0) {
        pthread_mutex_lock(&c->mu);
        bool ready = c->ready;
        pthread_mutex_unlock(&c->mu);
        r.status = ready ? 200 : 503;
        r.content_type = "text/plain";
        r.body = strdup(ready ? "ready\n" : "starting\n");
        return send_reply(conn, c, &r);
    }
    if (ctld_ui_is(url)) /* the console's files: public, no token (ui.c) */
        return ctld_ui_send(conn, c, url, method);
    if (x->too_large) {
        ctld_reply_error(&r, 413, "too_large", "request body: larger than %d bytes",
                         CTLD_BODY_MAX_BYTES);
        return send_reply(conn, c, &r);
    }
    ctld_caller who;
    const char *authz = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization");
    bool authed = authenticate(c, authz, &who) == 0;
    if (strcmp(url, "/metrics") == 0 && (authed || c->cfg.metrics_public)) {
        r.status = 200;
        r.content_type = "text/plain; version=0.0.4";
        r.body = ctld_metrics_text(c);
        return send_reply(conn, c, &r);
    }
    if (!authed) {
        ctld_reply_error(&r, 401, "unauthenticated",
                         authz ? "the token is unknown or revoked"
                               : "missing header Authorization: Bearer <token>");
        return send_reply(conn, c, &r);
    }
    double wait = rate_take(c, who.name);
    if (wait < 0.0) {
        ctld_reply_error(&r, 429, "rate_limited", "token \"%s\": more than %.0f requests per "
                         "second", who.name, c->cfg.rate_per_s);
        snprintf(r.retry_after, sizeof r.retry_after, "%.0f", ceil(-wait));
        return send_reply(conn, c, &r);
    }
    ctld_request rq = {
        .who = &who,
        .method = method,
        .url = url,
        .q = {arg(conn, "tenant"), arg(conn, "state"), arg(conn, "owner"), arg(conn, "limit"),
              arg(conn, "cursor"), arg(conn, "from"), arg(conn, "to"), arg(conn, "rank"),
              arg(conn, "stream"), arg(conn, "tail")},
        .content_type = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Type"),
        .idem_key = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Idempotency-Key"),
        .body = x->body ? x->body : "",
        .len = x->len,
    };
    ctld_route(c, &rq, &r);
    return send_reply(conn, c, &r);
}

static void completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                      enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)conn;
    (void)toe;
    conn_ctx *x = *con_cls;
    if (x) {
        free(x->body);
        free(x);
    }
    *con_cls = NULL;
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *b = malloc(1 << 20);
    size_t n = b ? fread(b, 1, (1 << 20) - 1, f) : 0;
    fclose(f);
    if (b)
        b[n] = '\0';
    return b;
}

/* Raises the soft descriptor limit to the hard one; how many connections
 * the server may then hold. */
static unsigned connection_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return CTLD_CONNECTIONS_DEFAULT;
    if (rl.rlim_cur < rl.rlim_max) {
        struct rlimit up = {rl.rlim_max, rl.rlim_max};
        if (setrlimit(RLIMIT_NOFILE, &up) == 0)
            rl.rlim_cur = rl.rlim_max;
    }
    rlim_t n = rl.rlim_cur == RLIM_INFINITY ? (rlim_t)1 << 20 : rl.rlim_cur;
    if (n > (rlim_t)1 << 20)
        n = (rlim_t)1 << 20;
    return n > 2 * CTLD_FDS_RESERVED ? (unsigned)(n - CTLD_FDS_RESERVED)
                                     : (unsigned)(n > 16 ? n / 2 : 8);
}

int ctld_http_start(ctld *c, ts_err *err)
{
    limiter *L = calloc(1, sizeof *L);
    if (!L)
        return ts_err_set(err, TS_ENOMEM, "out of memory");
    pthread_mutex_init(&L->mu, NULL);
    c->limiter = L;
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    unsigned flags =
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL;
    unsigned max_conns = connection_limit();
    int agent_nodes = 0;
    for (int n = 0; n < c->cluster->nnodes; n++)
        agent_nodes += !c->node_virtual[n];
    if ((long)max_conns < (long)agent_nodes + CTLD_FDS_RESERVED)
        fprintf(stderr, "tesserad: warning: the descriptor limit (RLIMIT_NOFILE) allows %u "
                "connections, too few for %d node agents and API clients: agents beyond it "
                "cannot connect; raise the hard limit (ulimit -Hn, systemd LimitNOFILE=)\n",
                max_conns, agent_nodes);
    struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
    if (inet_pton(AF_INET, c->cfg.listen_addr, &s4->sin_addr) == 1) {
        s4->sin_family = AF_INET;
        s4->sin_port = htons((uint16_t)c->cfg.listen_port);
    } else if (inet_pton(AF_INET6, c->cfg.listen_addr, &s6->sin6_addr) == 1) {
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons((uint16_t)c->cfg.listen_port);
        flags |= MHD_USE_IPv6;
    } else {
        return ts_err_set(err, TS_EINVAL, "listen: \"%s\" is not an IPv4 or IPv6 address",
                          c->cfg.listen_addr);
    }
    char *cert = NULL, *key = NULL;
    if (c->cfg.tls_cert[0]) {
        cert = slurp(c->cfg.tls_cert);
        key = slurp(c->cfg.tls_key);
        if (!cert || !key) {
            free(cert);
            free(key);
            return ts_err_set(err, TS_EIO, "tls: cannot read %s or %s", c->cfg.tls_cert,
                              c->cfg.tls_key);
        }
        flags |= MHD_USE_TLS;
    }
    struct MHD_Daemon *d;
    if (cert)
        d = MHD_start_daemon(flags, (uint16_t)c->cfg.listen_port, NULL, NULL, handle, c,
                             MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
                             MHD_OPTION_NOTIFY_COMPLETED, completed, c,
                             MHD_OPTION_HTTPS_MEM_CERT, cert, MHD_OPTION_HTTPS_MEM_KEY, key,
                             MHD_OPTION_CONNECTION_TIMEOUT, 60u,
                             MHD_OPTION_CONNECTION_LIMIT, max_conns, MHD_OPTION_END);
    else
        d = MHD_start_daemon(flags, (uint16_t)c->cfg.listen_port, NULL, NULL, handle, c,
                             MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
                             MHD_OPTION_NOTIFY_COMPLETED, completed, c,
                             MHD_OPTION_CONNECTION_TIMEOUT, 60u,
                             MHD_OPTION_CONNECTION_LIMIT, max_conns, MHD_OPTION_END);
    free(cert);
    free(key);
    if (!d)
        return ts_err_set(err, TS_EIO, "listen %s:%d: cannot start the HTTP server (%s)",
                          c->cfg.listen_addr, c->cfg.listen_port, strerror(errno));
    c->http = d;
    return 0;
}

void ctld_http_stop(ctld *c)
{
    if (c->http)
        MHD_stop_daemon(c->http);
    c->http = NULL;
    if (c->limiter) {
        pthread_mutex_destroy(&((limiter *)c->limiter)->mu);
        free(c->limiter);
        c->limiter = NULL;
    }
}
