/*
 * http.c - the HTTP server: libmicrohttpd with a small pool of polling
 * threads (epoll) that read and write every connection, and worker threads
 * that run the requests. A request is read whole (body up to
 * CTLD_BODY_MAX_BYTES, 413 beyond) by a polling thread, then its connection
 * is suspended and the request handed to a worker, which authenticates it,
 * applies the rate limit and runs routes.c; the worker may wait (a
 * submission for its group commit, an agent's long-poll) without holding up
 * any other connection, and resumes the connection with its answer. A
 * connection that is slow to send its request costs a descriptor and a
 * little memory, never a thread. HTTPS when the configuration names a
 * certificate and key.
 *
 * Abuse limits (docs/tesserad.md "limits"; limits.c keeps them, on the
 * state shared through http_limits.h): at most limits.connections
 * connections (and what RLIMIT_NOFILE allows); at most
 * limits.connections_per_client connections per client address (an IPv6
 * client by its /64) that have not yet shown a valid token; a request on
 * such a connection must arrive whole within limits.request_timeout of its
 * start, a deadline that bytes trickling in do not move (a reaper thread
 * shuts such connections down). /healthz is answered by the polling thread
 * itself. Rate limits are token buckets keyed exactly by the token's name,
 * and by client address for requests without a valid token. Paths holding
 * control characters, raw or %-encoded (%00 would cut a name short), and
 * requests with conflicting Content-Length headers are refused.
 *
 * Authentication: the secret's SHA-256 is looked up in a small cache of
 * live tokens (refreshed from the store on a miss, and cleared when a token
 * is revoked); comparing hashes is constant-time (memcmp-free loop), and the
 * secret itself is never stored or logged.
 *
 * The server raises its soft RLIMIT_NOFILE to the hard limit and says at
 * start when the connections it then allows are too few for the cluster's
 * agent nodes (each agent holds one connection for its long-poll).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>

#include "ctld/ctld.h"
#include "ctld/http.h"
#include "ctld/steps.h"
#include "ctld/ha.h"
#include "ctld/http_limits.h"
#include "ctld/router.h"
#include "ctld/ui.h"
#include "tessera/stream.h"

/* Descriptors kept back from connections: the store (SQLite database, WAL
 * and shared memory, or PostgreSQL sockets), logs, the listening socket. */
#define CTLD_FDS_RESERVED 64
/* Connections accepted when the descriptor limit cannot be read. */
#define CTLD_CONNECTIONS_DEFAULT 1000
/* Polling threads (each serves a share of the connections with epoll). */
#define CTLD_POLL_THREADS 4
/* An idle worker thread ends after this long. */
#define CTLD_WORKER_IDLE_S 30.0

/* A request: being read, with a worker, answered by it, sent. */
enum { ST_READING = 0, ST_QUEUED, ST_ANSWERED, ST_SENT };

typedef struct conn_ctx {
    char *body;
    size_t len, cap;
    bool too_large;
    bool started;                /* the handler saw its headers */
    bool bad_path;               /* the raw path holds a control character */
    int state;                   /* ST_* */
    struct MHD_Connection *conn;
    conn_track *tr;
    ctld_request rq;             /* for the worker; strings live in MHD's pool */
    const char *authz;
    ctld_reply reply;
    struct conn_ctx *qnext;
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
    /* the database's trouble names its host and port: the log's, not every
     * API caller's (docs/store.md) */
    if (status == 503 && strstr(msg, "postgresql:")) {
        static _Atomic long long said_s; /* once in ten seconds: an outage refuses many */
        long long now = (long long)time(NULL), was = atomic_load(&said_s);
        if (now - was >= 10 && atomic_compare_exchange_strong(&said_s, &was, now))
            fprintf(stderr, "tesserad: requests answered 503: %s\n", msg);
        snprintf(msg, sizeof msg, "the store's database did not answer: retry (the "
                 "controller's log says why)");
    }
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
    ctld_server *S = c->limiter;
    if (!S)
        return; /* no server (tests, fuzzing): nothing cached */
    pthread_mutex_lock(&S->mu);
    memset(S->tc, 0, sizeof S->tc);
    pthread_mutex_unlock(&S->mu);
    /* a connection vouched for by a revoked token is not any more */
    ctld_conns_unvouch_all(S, c->cfg.conns_per_client);
}

/* A bearer that is not one of our secrets but has a JWT's three parts. */
static bool is_jwt(const char *s)
{
    const char *a = strchr(s, '.');
    return strncmp(s, "tsk_", 4) != 0 && a && strchr(a + 1, '.');
}

/* 0 and *who, or TS_ENOENT (unknown, and why is left empty) or TS_EINVAL
 * (known but refused: why says why, "token expired"). With may_load false,
 * a token the cache does not know is not looked up in the store or
 * verified (TS_ENOENT). Both API secrets and verified OpenID Connect ID
 * tokens are cached by their SHA-256, with their expiry. */
static int authenticate(ctld *c, const char *authz, bool may_load, ctld_caller *who,
                        char *why, size_t why_size)
{
    why[0] = '\0';
    if (!authz || strncmp(authz, "Bearer ", 7) != 0)
        return TS_ENOENT;
    if (strncmp(authz + 7, CTLD_STEP_TOKEN_PREFIX, strlen(CTLD_STEP_TOKEN_PREFIX)) == 0) {
        /* a task's step credential (steps.h): its MAC, no store read */
        memset(who, 0, sizeof *who);
        who->step_job = ctld_step_token_job(c, authz + 7);
        if (who->step_job == 0) {
            snprintf(why, why_size, "the step credential is not this cluster's");
            return TS_EINVAL;
        }
        ctld_lock_reader(c);
        const cjob *j = ctld_job_find(c, who->step_job);
        if (j)
            snprintf(who->tenant, sizeof who->tenant, "%s", j->row.tenant);
        pthread_mutex_unlock(&c->mu);
        snprintf(who->name, sizeof who->name, "step-%lld", (long long)who->step_job);
        who->role = TS_ROLE_USER;
        return 0;
    }
    uint8_t h[TS_TOKEN_HASH_BYTES];
    ctld_token_hash(authz + 7, h);
    ctld_server *S = c->limiter;
    unsigned slot = ((unsigned)h[0] | (unsigned)h[1] << 8) % TOKEN_CACHE_SLOTS;
    pthread_mutex_lock(&S->mu);
    token_cache_entry *e = &S->tc[slot];
    if (e->used && hash_equal(e->hash, h)) {
        *who = e->who;
        pthread_mutex_unlock(&S->mu);
        if (who->expires_s > 0 && ctld_now() >= who->expires_s) {
            snprintf(why, why_size, "token expired");
            return TS_EINVAL;
        }
        return 0;
    }
    pthread_mutex_unlock(&S->mu);
    if (!may_load)
        return TS_ENOENT;
    memset(who, 0, sizeof *who);
    if (is_jwt(authz + 7)) {
        int rc = ctld_oidc_authenticate(c, authz + 7, who, why, why_size);
        if (rc != 0)
            return rc;
    } else {
        ts_token_row t;
        if (ts_store_token_by_hash(c->store, h, &t, NULL) != 0)
            return TS_ENOENT;
        if (t.expires_s > 0 && ctld_now() >= t.expires_s) {
            snprintf(why, why_size, "token expired");
            return TS_EINVAL;
        }
        snprintf(who->name, sizeof who->name, "%s", t.name);
        snprintf(who->tenant, sizeof who->tenant, "%s", t.tenant);
        who->role = t.role;
        snprintf(who->unix_user, sizeof who->unix_user, "%s", t.unix_user);
        who->uid = t.uid;
        who->expires_s = t.expires_s;
    }
    pthread_mutex_lock(&S->mu);
    memcpy(e->hash, h, sizeof e->hash);
    e->who = *who;
    e->used = true;
    pthread_mutex_unlock(&S->mu);
    return 0;
}

/* ---- answering ------------------------------------------------------------------------ */

/* The connection of a 101 answer is now a raw stream: sessions.c relays it
 * (req_cls is the request's conn_ctx, whose reply names the session). */
static void upgraded(void *cls, struct MHD_Connection *conn, void *req_cls, const char *extra,
                     size_t nextra, MHD_socket sock, struct MHD_UpgradeResponseHandle *urh)
{
    (void)conn;
    conn_ctx *x = req_cls;
    ctld_session_upgraded(cls, x ? x->reply.upgrade : 0, (int)sock, extra, nextra, urh);
}

static enum MHD_Result send_reply(struct MHD_Connection *conn, ctld *c, ctld_reply *r)
{
    if (r->upgrade && r->status == 101) {
        free(r->body);
        r->body = NULL;
        struct MHD_Response *up = MHD_create_response_for_upgrade(upgraded, c);
        if (!up)
            return MHD_NO;
        MHD_add_response_header(up, MHD_HTTP_HEADER_UPGRADE, TS_STREAM_PROTOCOL);
        enum MHD_Result ret = MHD_queue_response(conn, MHD_HTTP_SWITCHING_PROTOCOLS, up);
        MHD_destroy_response(up);
        __atomic_add_fetch(&c->m.http_requests[1], 1, __ATOMIC_RELAXED);
        return ret;
    }
    char *body = r->body;
    r->body = NULL;
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(body ? strlen(body) : 0, body ? body : (void *)"",
                                        body ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    if (!resp) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(resp, "Content-Type",
                            r->content_type ? r->content_type : "application/json");
    /* a browser takes every answer for what its Content-Type says */
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
    if (r->retry_after[0])
        MHD_add_response_header(resp, "Retry-After", r->retry_after);
    if (r->allow[0])
        MHD_add_response_header(resp, "Allow", r->allow);
    if (r->next_cursor[0])
        MHD_add_response_header(resp, "X-Next-Cursor", r->next_cursor);
    if (r->close)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
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

/* The query parameters the API reads (ctld_query), in its order. */
static const char *const QUERY_KEYS[] = {"tenant", "state", "owner", "limit", "cursor",
                                         "from", "to", "rank", "stream", "tail",
                                         "offset", "scope", "format", "step", "steps",
                                         "order"};
#define NQUERY_KEYS (sizeof QUERY_KEYS / sizeof QUERY_KEYS[0])

/* MHD's walk over the query: stops at the first key the API does not read
 * (*cls takes it), so a typo (?stat=pending) is a 400, not every job. */
static enum MHD_Result unknown_arg(void *cls, enum MHD_ValueKind kind, const char *key,
                                   const char *value)
{
    (void)kind;
    (void)value;
    for (size_t i = 0; i < NQUERY_KEYS; i++)
        if (strcmp(key, QUERY_KEYS[i]) == 0)
            return MHD_YES;
    *(const char **)cls = key;
    return MHD_NO;
}

/* True, r answered 400 naming it, when the query holds a key the API does not read. */
static bool query_unknown(struct MHD_Connection *conn, ctld_reply *r)
{
    const char *unknown = NULL;
    MHD_get_connection_values(conn, MHD_GET_ARGUMENT_KIND, unknown_arg, &unknown);
    if (!unknown)
        return false;
    char known[256] = "";
    for (size_t i = 0; i < NQUERY_KEYS; i++)
        snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", i ? ", " : "",
                 QUERY_KEYS[i]);
    ctld_reply_error(r, 400, "invalid", "%.64s: unknown query parameter (the API reads %s; "
                     "docs/api.md)", unknown, known);
    return true;
}

/* Runs one request on a worker thread: authentication, rate limit, route. */
static void serve(ctld *c, conn_ctx *x)
{
    ctld_reply *r = &x->reply;
    const char *url = x->rq.url;
    const ctld_route_def *rt;
    char allow[sizeof r->allow];
    int st = ctld_route_find(x->rq.method, url, &rt, allow, sizeof allow);
    if (st != CTLD_ROUTE_FOUND) { /* the same answer with a token or without */
        ctld_route_refuse(r, st, x->rq.method, url, allow);
        return;
    }
    if (strcmp(url, "/readyz") == 0) {
        ctld_lock_reader(c);
        bool ready = c->ready;
        pthread_mutex_unlock(&c->mu);
        r->status = ready ? 200 : 503;
        r->content_type = "text/plain";
        r->body = strdup(!ready ? "starting\n" : ctld_ha_on() ? "ready; leader\n" : "ready\n");
        return;
    }
    ctld_caller who;
    char why[256];
    bool authed = authenticate(c, x->authz, false, &who, why, sizeof why) == 0;
    char ident[IDENT_MAX];
    double wait = 0.0;
    if (!authed) {
        /* a token the cache does not know costs a store read: the client's
         * address pays for it first, so made-up tokens cannot flood the store */
        ctld_addr_ident(x->tr ? x->tr->key : (const uint8_t[ADDR_KEY]){0}, ident, sizeof ident);
        wait = ctld_rate_take(c, ident);
        if (wait >= 0.0 && x->authz)
            authed = authenticate(c, x->authz, true, &who, why, sizeof why) == 0;
    }
    if (authed && who.step_job != 0 && rt->handler != ctld_steps_route) {
        ctld_reply_error(r, 403, "forbidden", "a step credential starts and reads its job's "
                         "steps only (/v1/jobs/%lld/steps)", (long long)who.step_job);
        return;
    }
    const char *cap = NULL;
    if (authed && !ctld_conn_vouch(c, x->tr, who.name, who.tenant, &cap)) {
        bool tok = strcmp(cap, "limits.connections_per_token") == 0;
        ctld_reply_error(r, 429, "too_many_connections", "%s \"%s\": more than %d open "
                         "connections (%s); this one is closed", tok ? "token" : "tenant",
                         tok ? who.name : who.tenant,
                         tok ? c->cfg.conns_per_token : c->cfg.conns_per_tenant, cap);
        r->close = true;
        return;
    }
    if (authed) {
        snprintf(ident, sizeof ident, "t:%s", who.name);
        wait = ctld_rate_take(c, ident);
    }
    if (wait < 0.0) {
        if (authed)
            ctld_reply_error(r, 429, "rate_limited", "token \"%s\": more than %.0f requests "
                             "per second", who.name, c->cfg.rate_per_s);
        else
            ctld_reply_error(r, 429, "rate_limited", "client %s: more than %.0f requests per "
                             "second without a known token", ident + 2, c->cfg.rate_per_s);
        snprintf(r->retry_after, sizeof r->retry_after, "%.0f", ceil(-wait));
        return;
    }
    /* every tenant's series: for a scrape token and those who read every
     * tenant; a tenant's own token reads its tenant's page */
    bool all_tenants = authed && (who.role == TS_ROLE_SCRAPE || who.role == TS_ROLE_ADMIN ||
                                  (who.role == TS_ROLE_VIEWER && !who.tenant[0]));
    bool own_tenant = authed && who.tenant[0] &&
                      (who.role == TS_ROLE_VIEWER || who.role == TS_ROLE_USER ||
                       who.role == TS_ROLE_TENANT_ADMIN);
    if (strcmp(url, "/metrics") == 0 && (all_tenants || own_tenant || c->cfg.metrics_public)) {
        r->status = 200;
        r->content_type = "text/plain; version=0.0.4";
        r->body = ctld_metrics_text(c, all_tenants || c->cfg.metrics_public ? NULL : who.tenant);
        return;
    }
    if (strcmp(url, "/metrics") == 0 && authed) {
        ctld_reply_error(r, 403, "forbidden", "/metrics: a scrape token, an admin or a "
                         "cluster-viewer reads every tenant's series, a tenant's token its "
                         "tenant's; not role %s", ts_role_name(who.role));
        return;
    }
    if (!authed) {
        ctld_reply_error(r, 401, "unauthenticated", "%s",
                         why[0]     ? why
                         : x->authz ? "the token is unknown or revoked"
                                    : "missing header Authorization: Bearer <token>");
        return;
    }
    x->rq.who = &who;
    ctld_route(c, &x->rq, r);
    x->rq.who = NULL;
}

static void *worker_main(void *arg)
{
    ctld *c = arg;
    ctld_server *S = c->limiter;
    pthread_mutex_lock(&S->mu);
    for (;;) {
        while (!S->qhead && !S->stopping) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_sec += (time_t)CTLD_WORKER_IDLE_S;
            S->idle++;
            int rc = pthread_cond_timedwait(&S->qcv, &S->mu, &ts);
            S->idle--;
            if (rc == ETIMEDOUT && !S->qhead)
                break;
        }
        conn_ctx *x = S->qhead;
        if (!x)
            break;
        S->qhead = x->qnext;
        if (!S->qhead)
            S->qtail = NULL;
        S->nqueued--;
        pthread_mutex_unlock(&S->mu);
        serve(c, x);
        x->state = ST_ANSWERED;
        MHD_resume_connection(x->conn); /* the polling thread sends the answer */
        pthread_mutex_lock(&S->mu);
        if (--S->inflight == 0)
            pthread_cond_broadcast(&S->donecv);
    }
    if (--S->workers == 0)
        pthread_cond_broadcast(&S->donecv);
    pthread_mutex_unlock(&S->mu);
    return NULL;
}

/* Hands a whole request to a worker (starting one unless enough are idle
 * for everything queued) and suspends its connection; false when the
 * server stops or no worker can start. */
static bool dispatch(ctld *c, conn_ctx *x)
{
    ctld_server *S = c->limiter;
    pthread_mutex_lock(&S->mu);
    if (S->stopping) {
        pthread_mutex_unlock(&S->mu);
        return false;
    }
    if (S->idle <= S->nqueued) {
        pthread_t th;
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        bool ok = pthread_create(&th, &at, worker_main, c) == 0;
        pthread_attr_destroy(&at);
        if (ok) {
            S->workers++;
        } else if (S->workers == 0) {
            pthread_mutex_unlock(&S->mu);
            return false;
        }
    }
    S->inflight++; /* counted now, so stopping waits for it */
    S->nqueued++;
    x->state = ST_QUEUED;
    pthread_mutex_unlock(&S->mu);
    /* suspended before any worker can see it (and resume it) */
    MHD_suspend_connection(x->conn);
    pthread_mutex_lock(&S->mu);
    x->qnext = NULL;
    if (S->qtail)
        S->qtail->qnext = x;
    else
        S->qhead = x;
    S->qtail = x;
    pthread_cond_signal(&S->qcv);
    pthread_mutex_unlock(&S->mu);
    return true;
}

/* The raw request target, before MHD decodes it: a control character in
 * it, raw or %-encoded, marks the request to be refused. Also where a
 * request's context begins. */
static void *uri_seen(void *cls, const char *uri, struct MHD_Connection *conn)
{
    (void)cls;
    (void)conn;
    conn_ctx *x = calloc(1, sizeof *x);
    if (!x)
        return NULL;
    for (const unsigned char *p = (const unsigned char *)uri; p && *p; p++) {
        unsigned v = *p;
        if (*p == '%' && p[1] && p[2]) {
            char hex[3] = {(char)p[1], (char)p[2], 0};
            char *end;
            unsigned long d = strtoul(hex, &end, 16);
            if (!*end)
                v = (unsigned)d;
        }
        if (v < 0x20 || v == 0x7f)
            x->bad_path = true;
    }
    return x;
}

typedef struct length_scan {
    const char *first;
    bool conflict, chunked;
} length_scan;

static enum MHD_Result scan_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                   const char *value)
{
    (void)kind;
    length_scan *s = cls;
    if (strcasecmp(key, "Content-Length") == 0) {
        if (!s->first)
            s->first = value ? value : "";
        else if (strcmp(s->first, value ? value : "") != 0)
            s->conflict = true;
    } else if (strcasecmp(key, "Transfer-Encoding") == 0) {
        s->chunked = true;
    }
    return MHD_YES;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *conn, const char *url,
                              const char *method, const char *version, const char *upload,
                              size_t *upload_size, void **con_cls)
{
    (void)version;
    ctld *c = cls;
    ctld_server *S = c->limiter;
    conn_ctx *x = *con_cls;
    if (!x) {
        x = calloc(1, sizeof *x);
        if (!x)
            return MHD_NO;
        *con_cls = x;
    }
    ctld_reply r = {0};
    /* HEAD is GET without the body (MHD sends none for it): the same route,
     * roles and headers */
    if (strcmp(method, "HEAD") == 0)
        method = "GET";
    if (x->state == ST_ANSWERED) {
        x->state = ST_SENT;
        return send_reply(conn, c, &x->reply);
    }
    if (x->state != ST_READING)
        return MHD_YES;
    if (!x->started) {
        /* the headers are in: refuse what must not be read further */
        x->started = true;
        x->conn = conn;
        x->tr = ctld_conn_track(conn);
        length_scan ls = {0};
        MHD_get_connection_values(conn, MHD_HEADER_KIND, scan_header, &ls);
        if (x->bad_path) {
            ctld_reply_error(&r, 400, "invalid", "path: control characters (raw or %%-encoded) "
                             "are not allowed");
            return send_reply(conn, c, &r);
        }
        if (ls.conflict || (ls.first && ls.chunked)) {
            ctld_reply_error(&r, 400, "invalid", "Content-Length: %s", ls.conflict
                             ? "given twice with different values"
                             : "given with Transfer-Encoding");
            return send_reply(conn, c, &r);
        }
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
    /* the request is in whole: its deadline no longer applies */
    if (x->tr) {
        pthread_mutex_lock(&S->mu);
        x->tr->received = true;
        pthread_mutex_unlock(&S->mu);
    }
    if (strcmp(url, "/healthz") == 0) { /* its methods are the route table's too */
        const ctld_route_def *rt;
        char allow[sizeof r.allow];
        int st = ctld_route_find(method, url, &rt, allow, sizeof allow);
        if (st != CTLD_ROUTE_FOUND) {
            ctld_route_refuse(&r, st, method, url, allow);
            return send_reply(conn, c, &r);
        }
        r.status = 200;
        r.content_type = "text/plain";
        r.body = strdup("ok\n");
        return send_reply(conn, c, &r);
    }
    if (ctld_ui_is(url)) /* the console's files: public, no token (ui.c) */
        return ctld_ui_send(conn, c, url, method);
    if (x->too_large) {
        ctld_reply_error(&r, 413, "too_large", "request body: larger than %d bytes",
                         CTLD_BODY_MAX_BYTES);
        return send_reply(conn, c, &r);
    }
    if (query_unknown(conn, &r))
        return send_reply(conn, c, &r);
    x->authz = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization");
    x->rq = (ctld_request){
        .method = method,
        .url = url,
        .q = {arg(conn, "tenant"), arg(conn, "state"), arg(conn, "owner"), arg(conn, "limit"),
              arg(conn, "cursor"), arg(conn, "from"), arg(conn, "to"), arg(conn, "rank"),
              arg(conn, "stream"), arg(conn, "tail"), arg(conn, "offset"), arg(conn, "scope"),
              arg(conn, "format"), arg(conn, "step"), arg(conn, "steps"), arg(conn, "order")},
        .content_type = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Type"),
        .idem_key = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Idempotency-Key"),
        .session_secret = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                                      TS_STREAM_SECRET_HEADER),
        .body = x->body ? x->body : "",
        .len = x->len,
    };
    if (dispatch(c, x))
        return MHD_YES;
    ctld_reply_error(&r, 503, "unavailable", "the controller is stopping");
    return send_reply(conn, c, &r);
}

static void completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                      enum MHD_RequestTerminationCode toe)
{
    (void)toe;
    ctld *c = cls;
    ctld_server *S = c->limiter;
    conn_ctx *x = *con_cls;
    if (x) {
        free(x->reply.body);
        free(x->body);
        free(x);
    }
    *con_cls = NULL;
    /* every connection gets a new deadline for its next request */
    conn_track *t = ctld_conn_track(conn);
    if (t) {
        pthread_mutex_lock(&S->mu);
        t->received = false;
        t->t0 = ctld_now();
        pthread_mutex_unlock(&S->mu);
    }
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

static void server_free(ctld_server *S)
{
    ctld_limits_free(S);
    pthread_cond_destroy(&S->qcv);
    pthread_cond_destroy(&S->donecv);
    pthread_cond_destroy(&S->reapcv);
    pthread_mutex_destroy(&S->mu);
    free(S);
}

int ctld_http_start(ctld *c, ts_err *err)
{
    ctld_server *S = calloc(1, sizeof *S);
    if (!S)
        return ts_err_set(err, TS_ENOMEM, "out of memory");
    pthread_mutex_init(&S->mu, NULL);
    pthread_cond_init(&S->qcv, NULL);
    pthread_cond_init(&S->donecv, NULL);
    pthread_cond_init(&S->reapcv, NULL);
    c->limiter = S;
    if (ctld_sessions_start(c) != 0) {
        ctld_http_stop(c);
        return ts_err_set(err, TS_ENOMEM, "out of memory");
    }
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME |
                     MHD_ALLOW_UPGRADE;
    unsigned max_conns = connection_limit();
    if (c->cfg.conns_max > 0 && (unsigned)c->cfg.conns_max < max_conns)
        max_conns = (unsigned)c->cfg.conns_max;
    int agent_nodes = 0;
    for (int n = 0; n < c->cluster->nnodes; n++)
        agent_nodes += !c->node_virtual[n];
    if ((long)max_conns < (long)agent_nodes + CTLD_FDS_RESERVED)
        fprintf(stderr, "tesserad: warning: limits.connections and the descriptor limit "
                "(RLIMIT_NOFILE) allow %u connections, too few for %d node agents and API "
                "clients: agents beyond it cannot connect; raise limits.connections or the "
                "hard limit (ulimit -Hn, systemd LimitNOFILE=)\n", max_conns, agent_nodes);
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
        ctld_http_stop(c);
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
            ctld_http_stop(c);
            return ts_err_set(err, TS_EIO, "tls: cannot read %s or %s", c->cfg.tls_cert,
                              c->cfg.tls_key);
        }
        flags |= MHD_USE_TLS;
    }
    /* MHD's own idle timeout stays (60 s without a byte); the deadline a
     * trickle cannot move is the reaper's */
    struct MHD_OptionItem tls_opts[] = {
        {cert ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, 0, cert},
        {cert ? MHD_OPTION_HTTPS_MEM_KEY : MHD_OPTION_END, 0, key},
        {MHD_OPTION_END, 0, NULL},
    };
    struct MHD_Daemon *d = MHD_start_daemon(
        flags, (uint16_t)c->cfg.listen_port, ctld_accept_policy, c, handle, c,
        MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss, MHD_OPTION_NOTIFY_COMPLETED, completed, c,
        MHD_OPTION_NOTIFY_CONNECTION, ctld_notify_connection, c, MHD_OPTION_URI_LOG_CALLBACK,
        uri_seen, c, MHD_OPTION_THREAD_POOL_SIZE, (unsigned)CTLD_POLL_THREADS,
        MHD_OPTION_CONNECTION_TIMEOUT, 60u, MHD_OPTION_CONNECTION_LIMIT, max_conns,
        MHD_OPTION_ARRAY, tls_opts, MHD_OPTION_END);
    free(cert);
    free(key);
    if (!d) {
        int e = errno;
        ctld_http_stop(c);
        return ts_err_set(err, TS_EIO, "listen %s:%d: cannot start the HTTP server (%s)",
                          c->cfg.listen_addr, c->cfg.listen_port, strerror(e));
    }
    c->http = d;
    if (pthread_create(&S->reaper, NULL, ctld_reaper_main, c) != 0) {
        ctld_http_stop(c);
        return ts_err_set(err, TS_EIO, "cannot start the connection reaper thread");
    }
    S->reaper_started = true;
    return 0;
}

void ctld_http_stop(ctld *c)
{
    ctld_server *S = c->limiter;
    if (S) {
        /* no new work; the requests in flight finish (long-polls end when
         * the caller has set c->stop and woken them), within a bound */
        pthread_mutex_lock(&S->mu);
        S->stopping = true;
        pthread_cond_broadcast(&S->reapcv);
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 60;
        while (S->inflight > 0 &&
               pthread_cond_timedwait(&S->donecv, &S->mu, &ts) != ETIMEDOUT) {
        }
        pthread_mutex_unlock(&S->mu);
    }
    ctld_sessions_stop(c); /* every relay ends before the server that owns their sockets */
    if (c->http)
        MHD_stop_daemon(c->http);
    c->http = NULL;
    if (!S)
        return;
    pthread_mutex_lock(&S->mu);
    pthread_cond_broadcast(&S->qcv);
    while (S->workers > 0)
        pthread_cond_wait(&S->donecv, &S->mu);
    pthread_mutex_unlock(&S->mu);
    if (S->reaper_started)
        pthread_join(S->reaper, NULL);
    c->limiter = NULL;
    server_free(S);
}
