/*
 * limits.c - the HTTP server's abuse limits (docs/tesserad.md "limits"):
 * token buckets keyed exactly by identity ("t:" and a token's name, or "a:"
 * and a client address), swept of idle buckets when there are too many; per
 * client address (an IPv6 client by its /64), the count of connections that
 * have not yet shown a valid token, which the accept policy caps; per token,
 * the count of connections that showed it, capped when a request shows it
 * (a revocation makes every connection show its token again); and the
 * reaper thread, which shuts down any connection whose request has not
 * arrived whole within limits.request_timeout of its start - a deadline that
 * bytes trickling in do not move, unlike MHD's own idle timeout. The state lives
 * in ctld_server (http_limits.h), under its one mutex.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctld/http_limits.h"

/* ---- rate limits: one token bucket per identity, matched exactly ------------------ */

static uint64_t fnv(const void *p, size_t n)
{
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++)
        h = (h ^ ((const uint8_t *)p)[i]) * 1099511628211ULL;
    return h;
}

/* Under S->mu: drops buckets that have filled up again (as good as new). */
static void buckets_sweep(ctld *c, ctld_server *S, double now)
{
    for (int i = 0; i < BUCKET_CHAINS; i++)
        for (bucket **pp = &S->chains[i]; *pp;) {
            bucket *b = *pp;
            if (b->tokens + (now - b->at_s) * c->cfg.rate_per_s >= c->cfg.rate_burst) {
                *pp = b->next;
                free(b);
                S->nbuckets--;
            } else {
                pp = &b->next;
            }
        }
}

double ctld_rate_take(ctld *c, const char *id)
{
    ctld_server *S = c->limiter;
    double now = ctld_now();
    size_t n = strlen(id);
    unsigned slot = (unsigned)(fnv(id, n) % BUCKET_CHAINS);
    pthread_mutex_lock(&S->mu);
    bucket *b = S->chains[slot];
    while (b && strcmp(b->id, id) != 0)
        b = b->next;
    if (!b) {
        if (S->nbuckets >= BUCKETS_MAX && now - S->swept_s >= 1.0) {
            buckets_sweep(c, S, now); /* at most once a second: it walks them all */
            S->swept_s = now;
        }
        /* token identities are few (an admin makes them); client addresses
         * are not, and past the cap they wait */
        b = S->nbuckets < BUCKETS_MAX || id[0] == 't' ? calloc(1, sizeof *b) : NULL;
        if (!b) {
            pthread_mutex_unlock(&S->mu);
            return -1.0;
        }
        snprintf(b->id, sizeof b->id, "%s", id);
        b->tokens = c->cfg.rate_burst;
        b->at_s = now;
        b->next = S->chains[slot];
        S->chains[slot] = b;
        S->nbuckets++;
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
    pthread_mutex_unlock(&S->mu);
    return wait;
}

/* ---- client addresses and connection accounting ------------------------------------ */

static void addr_key(const struct sockaddr *sa, uint8_t key[ADDR_KEY])
{
    memset(key, 0, ADDR_KEY);
    if (sa && sa->sa_family == AF_INET) {
        key[0] = 4;
        memcpy(key + 1, &((const struct sockaddr_in *)sa)->sin_addr, 4);
    } else if (sa && sa->sa_family == AF_INET6) {
        const uint8_t *a = ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr;
        static const uint8_t v4mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
        if (memcmp(a, v4mapped, 12) == 0) {
            key[0] = 4;
            memcpy(key + 1, a + 12, 4);
        } else {
            key[0] = 6;
            memcpy(key + 1, a, 8); /* one client holds a whole /64 */
        }
    }
}

void ctld_addr_ident(const uint8_t key[ADDR_KEY], char *out, size_t size)
{
    char txt[INET6_ADDRSTRLEN] = "?";
    if (key[0] == 4) {
        inet_ntop(AF_INET, key + 1, txt, sizeof txt);
    } else if (key[0] == 6) {
        uint8_t full[16] = {0};
        memcpy(full, key + 1, 8);
        inet_ntop(AF_INET6, full, txt, sizeof txt);
    }
    snprintf(out, size, "a:%s", txt);
}

/* Under S->mu: the count of key's connections not vouched for. */
static addr_count *addr_find(ctld_server *S, const uint8_t key[ADDR_KEY], bool create)
{
    unsigned slot = (unsigned)(fnv(key, ADDR_KEY) % ADDR_CHAINS);
    for (addr_count *a = S->addrs[slot]; a; a = a->next)
        if (memcmp(a->key, key, ADDR_KEY) == 0)
            return a;
    addr_count *a = create ? calloc(1, sizeof *a) : NULL;
    if (a) {
        memcpy(a->key, key, ADDR_KEY);
        a->next = S->addrs[slot];
        S->addrs[slot] = a;
    }
    return a;
}

/* Under S->mu: one fewer unvouched connection for key. */
static void addr_drop(ctld_server *S, const uint8_t key[ADDR_KEY])
{
    unsigned slot = (unsigned)(fnv(key, ADDR_KEY) % ADDR_CHAINS);
    for (addr_count **pp = &S->addrs[slot]; *pp; pp = &(*pp)->next)
        if (memcmp((*pp)->key, key, ADDR_KEY) == 0) {
            addr_count *a = *pp;
            if (--a->n <= 0) {
                *pp = a->next;
                free(a);
            }
            break;
        }
    S->unvouched--;
}

/* Under S->mu: token name's count of connections (created when asked). */
static token_conns *token_find(ctld_server *S, const char *name, bool create)
{
    unsigned slot = (unsigned)(fnv(name, strlen(name)) % TOKEN_CONN_CHAINS);
    for (token_conns *k = S->tokens[slot]; k; k = k->next)
        if (strcmp(k->name, name) == 0)
            return k;
    token_conns *k = create ? calloc(1, sizeof *k) : NULL;
    if (k) {
        snprintf(k->name, sizeof k->name, "%s", name);
        k->next = S->tokens[slot];
        S->tokens[slot] = k;
    }
    return k;
}

/* Under S->mu: one fewer connection for token name. */
static void token_drop(ctld_server *S, const char *name)
{
    unsigned slot = (unsigned)(fnv(name, strlen(name)) % TOKEN_CONN_CHAINS);
    for (token_conns **pp = &S->tokens[slot]; *pp; pp = &(*pp)->next)
        if (strcmp((*pp)->name, name) == 0) {
            token_conns *k = *pp;
            if (--k->n <= 0) {
                *pp = k->next;
                free(k);
            }
            return;
        }
}

/* Under S->mu: the connection no longer counts for its token and tenant. */
static void vouch_drop(ctld_server *S, conn_track *t)
{
    token_drop(S, t->token);
    if (t->tenant[0])
        token_drop(S, t->tenant);
    t->token[0] = t->tenant[0] = '\0';
}

/* At its address's cap: the oldest of its connections that has neither
 * shown a token nor sent a whole request is shut down for the new one, so
 * that a client holding slow anonymous connections cannot keep the others
 * behind its address (every task of a node, a login node's users) out: a
 * legitimate request completes at once and is never the oldest for long.
 * False when none is. Under S->mu. */
static bool evict_slowest(ctld_server *S, addr_count *a, const uint8_t *key)
{
    conn_track *old = NULL;
    for (conn_track *t = S->conns; t; t = t->next)
        if (!t->vouched && !t->received && !t->reaped && !t->evicted && t->fd >= 0 &&
            memcmp(t->key, key, ADDR_KEY) == 0 && (!old || t->t0 < old->t0))
            old = t;
    if (!old)
        return false;
    shutdown(old->fd, SHUT_RDWR);
    old->evicted = true;
    a->n--; /* its place is the new one's now */
    return true;
}

/* Accept policy: a client at its cap of connections not vouched for makes
 * room by its oldest slow one (evict_slowest), else is refused before
 * anything is read (MHD's own limit caps them all). */
enum MHD_Result ctld_accept_policy(void *cls, const struct sockaddr *addr, socklen_t len)
{
    (void)len;
    ctld *c = cls;
    ctld_server *S = c->limiter;
    uint8_t key[ADDR_KEY];
    addr_key(addr, key);
    pthread_mutex_lock(&S->mu);
    addr_count *a = addr_find(S, key, false);
    bool ok = !S->stopping && (!a || a->n < c->cfg.conns_per_client ||
                               evict_slowest(S, a, key));
    if (!ok)
        S->refused++;
    pthread_mutex_unlock(&S->mu);
    return ok ? MHD_YES : MHD_NO;
}

void ctld_notify_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                            enum MHD_ConnectionNotificationCode toe)
{
    ctld *c = cls;
    ctld_server *S = c->limiter;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        conn_track *t = calloc(1, sizeof *t);
        *socket_context = t;
        if (!t)
            return;
        const union MHD_ConnectionInfo *fi =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        const union MHD_ConnectionInfo *ai =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        t->fd = fi ? fi->connect_fd : -1;
        addr_key(ai ? ai->client_addr : NULL, t->key);
        t->t0 = ctld_now();
        pthread_mutex_lock(&S->mu);
        addr_count *a = addr_find(S, t->key, true);
        if (a)
            a->n++;
        S->unvouched++;
        /* the accept policy checks the cap before this count, on each of
         * the polling threads: accepts racing on several threads can pass it
         * together. One over the cap is shut down here, before anything is
         * read (MHD sees the end and closes it) */
        if (a && a->n > c->cfg.conns_per_client && t->fd >= 0) {
            shutdown(t->fd, SHUT_RDWR);
            t->reaped = true;
            S->refused++;
        }
        t->next = S->conns;
        if (S->conns)
            S->conns->prev = t;
        S->conns = t;
        pthread_mutex_unlock(&S->mu);
    } else if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
        /* MHD closes the descriptor after this returns: the reaper, which
         * shuts descriptors down under S->mu, never touches a closed one */
        conn_track *t = *socket_context;
        if (!t)
            return;
        pthread_mutex_lock(&S->mu);
        if (!t->vouched && !t->evicted)
            addr_drop(S, t->key);
        else if (t->vouched)
            vouch_drop(S, t);
        if (t->prev)
            t->prev->next = t->next;
        else
            S->conns = t->next;
        if (t->next)
            t->next->prev = t->prev;
        pthread_mutex_unlock(&S->mu);
        free(t);
        *socket_context = NULL;
    }
}

conn_track *ctld_conn_track(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *i =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return i ? i->socket_context : NULL;
}

bool ctld_conn_vouch(ctld *c, conn_track *t, const char *name, const char *tenant,
                     const char **which)
{
    ctld_server *S = c->limiter;
    *which = NULL;
    if (!t)
        return true;
    pthread_mutex_lock(&S->mu);
    if (!t->vouched || strcmp(t->token, name) != 0) {
        /* a tenant's count shares the tokens' table under a name no token
         * has ('@' is not a token name's character) */
        char tk[sizeof t->tenant] = "";
        if (tenant && tenant[0])
            snprintf(tk, sizeof tk, "@%s", tenant);
        token_conns *k = token_find(S, name, true);
        token_conns *kt = tk[0] ? token_find(S, tk, true) : NULL;
        if (k && k->n >= c->cfg.conns_per_token)
            *which = "limits.connections_per_token";
        /* a connection that changes tokens within its tenant is counted there already */
        int mine = t->vouched && kt && strcmp(t->tenant, tk) == 0;
        if (!*which && kt && kt->n - mine >= c->cfg.conns_per_tenant)
            *which = "limits.connections_per_tenant";
        if (*which) {
            S->refused++;
        } else {
            if (t->vouched)
                vouch_drop(S, t); /* the connection changed tokens */
            else if (!t->evicted) /* an evicted one's place went already */
                addr_drop(S, t->key);
            if (k)
                k->n++;
            if (kt)
                kt->n++;
            t->vouched = true;
            snprintf(t->token, sizeof t->token, "%s", name);
            snprintf(t->tenant, sizeof t->tenant, "%s", kt ? tk : "");
        }
        /* counts created for a refused connection go again when empty */
        if (*which && k && k->n == 0)
            token_drop(S, name);
        if (*which && kt && kt->n == 0)
            token_drop(S, tk);
    }
    pthread_mutex_unlock(&S->mu);
    return *which == NULL;
}

void ctld_conns_unvouch_all(ctld_server *S, int per_client)
{
    double now = ctld_now();
    pthread_mutex_lock(&S->mu);
    for (conn_track *t = S->conns; t; t = t->next) {
        if (!t->vouched)
            continue;
        vouch_drop(S, t);
        t->vouched = false;
        addr_count *a = addr_find(S, t->key, true);
        if (a)
            a->n++;
        S->unvouched++;
        if (!t->received)
            t->t0 = now;
        if (a && a->n > per_client && t->fd >= 0 && !t->reaped) {
            shutdown(t->fd, SHUT_RDWR); /* MHD sees the end and closes it */
            t->reaped = true;
            S->reaped++;
        }
    }
    pthread_mutex_unlock(&S->mu);
}

void *ctld_reaper_main(void *arg)
{
    ctld *c = arg;
    ctld_server *S = c->limiter;
    double step = c->cfg.request_timeout_s / 4.0;
    if (step > 1.0)
        step = 1.0;
    pthread_mutex_lock(&S->mu);
    while (!S->stopping) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        double until = (double)ts.tv_sec + ts.tv_nsec / 1e9 + step;
        ts.tv_sec = (time_t)until;
        ts.tv_nsec = (long)((until - (double)ts.tv_sec) * 1e9);
        pthread_cond_timedwait(&S->reapcv, &S->mu, &ts);
        double now = ctld_now();
        /* every request on every connection, a token shown or not */
        for (conn_track *t = S->conns; t; t = t->next)
            if (!t->received && !t->reaped && t->fd >= 0 &&
                now - t->t0 > c->cfg.request_timeout_s) {
                shutdown(t->fd, SHUT_RDWR); /* MHD sees the end and closes it */
                t->reaped = true;
                S->reaped++;
            }
    }
    pthread_mutex_unlock(&S->mu);
    return NULL;
}


void ctld_limits_free(ctld_server *S)
{
    for (int i = 0; i < BUCKET_CHAINS; i++)
        while (S->chains[i]) {
            bucket *b = S->chains[i];
            S->chains[i] = b->next;
            free(b);
        }
    for (int i = 0; i < ADDR_CHAINS; i++)
        while (S->addrs[i]) {
            addr_count *a = S->addrs[i];
            S->addrs[i] = a->next;
            free(a);
        }
    for (int i = 0; i < TOKEN_CONN_CHAINS; i++)
        while (S->tokens[i]) {
            token_conns *k = S->tokens[i];
            S->tokens[i] = k->next;
            free(k);
        }
}
