/*
 * http_limits.h - internal to http.c and limits.c: the HTTP server's shared
 * state (ctld_server, what c->limiter points to) and the abuse limits that
 * limits.c keeps on it: rate-limit buckets keyed by exact identity, the
 * count of connections per client address that have not shown a valid
 * token, the accept policy that caps them, and the reaper that closes a
 * connection whose request does not arrive in time. http.c has the server,
 * the token cache, the work queue and the request handling.
 */
#ifndef TS_CTLD_HTTP_LIMITS_H
#define TS_CTLD_HTTP_LIMITS_H

#include <microhttpd.h>
#include <sys/socket.h>

#include "ctld/ctld.h"
#include "ctld/http.h"

#define TOKEN_CACHE_SLOTS 4096 /* one per node agent of a large cluster, and users */
/* Rate-limit buckets: hash chains; buckets full again (idle) are swept when
 * there are more than this many, and clients without a token beyond it are
 * answered 429 until some are. */
#define BUCKET_CHAINS 8192
#define BUCKETS_MAX 65536
/* Hash chains of the per-address and per-token connection counts. */
#define ADDR_CHAINS 4096
#define TOKEN_CONN_CHAINS 1024
/* A client address: family byte, then 4 bytes (IPv4) or the /64 (IPv6). */
#define ADDR_KEY 9
/* The longest rate-limit identity: "t:" + a token name, or "a:" + an address. */
#define IDENT_MAX (TS_STORE_NAME_MAX + 8)

typedef struct bucket {
    struct bucket *next;
    char id[IDENT_MAX];
    double tokens;
    double at_s;
} bucket;

typedef struct token_cache_entry {
    uint8_t hash[TS_TOKEN_HASH_BYTES];
    ctld_caller who;
    bool used;
} token_cache_entry;

/* One TCP connection as the limits see it (MHD's socket context). */
typedef struct conn_track {
    struct conn_track *prev, *next;
    int fd;
    uint8_t key[ADDR_KEY];
    double t0;                   /* when its current request began */
    bool vouched;                /* a request on it carried a valid token */
    char token[TS_STORE_NAME_MAX]; /* whose, while vouched: its per-token count */
    char tenant[TS_STORE_NAME_MAX + 1]; /* "@<tenant>" of that token ("": none): its count */
    bool received;               /* the current request arrived whole */
    bool reaped;                 /* shut down for being too slow */
    bool evicted;                /* shut down for a newer one of its address (no longer
                                  * counted there) */
} conn_track;

typedef struct addr_count {
    struct addr_count *next;
    uint8_t key[ADDR_KEY];
    int n;                       /* its connections not yet vouched for */
} addr_count;

typedef struct token_conns {
    struct token_conns *next;
    char name[TS_STORE_NAME_MAX];
    int n;                       /* its connections vouched for */
} token_conns;

typedef struct ctld_server {
    pthread_mutex_t mu;          /* everything below */
    bucket *chains[BUCKET_CHAINS];
    int nbuckets;
    double swept_s;              /* the last sweep */
    token_cache_entry tc[TOKEN_CACHE_SLOTS];
    conn_track *conns;           /* every open connection */
    addr_count *addrs[ADDR_CHAINS];
    token_conns *tokens[TOKEN_CONN_CHAINS];
    int unvouched;               /* connections not vouched for, in all */
    uint64_t refused, reaped;    /* connections refused at accept, shut down late */
    /* the work queue */
    struct conn_ctx *qhead, *qtail; /* http.c's requests */
    int workers, idle, inflight, nqueued;
    bool stopping;
    pthread_cond_t qcv;          /* work queued, or stopping */
    pthread_cond_t donecv;       /* inflight or workers reached 0 */
    pthread_t reaper;
    bool reaper_started;
    pthread_cond_t reapcv;
} ctld_server;


/* Takes one request from identity id's bucket ("t:<token>" or "a:<address>"):
 * >= 0 allowed; else minus the seconds to wait. */
double ctld_rate_take(ctld *c, const char *id);
/* "a:<address>" of a client address key (an IPv6 client's /64). */
void ctld_addr_ident(const uint8_t key[ADDR_KEY], char *out, size_t size);
/* MHD's accept policy and connection notifications (cls: the ctld). */
enum MHD_Result ctld_accept_policy(void *cls, const struct sockaddr *addr, socklen_t len);
void ctld_notify_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                            enum MHD_ConnectionNotificationCode toe);
/* The connection's tracking entry (NULL when none). */
conn_track *ctld_conn_track(struct MHD_Connection *conn);
/* The connection showed token name's valid token (of tenant, "" none): its
 * client's cap no longer counts it, the token's and its tenant's do. False
 * (nothing changed) when the token already holds
 * limits.connections_per_token other connections, or its tenant's tokens
 * limits.connections_per_tenant (*which names the limit): the request is
 * refused and the connection closed. Every request on every connection
 * keeps its deadline (limits.request_timeout). */
bool ctld_conn_vouch(ctld *c, conn_track *t, const char *name, const char *tenant,
                     const char **which);
/* After a revocation: no connection is vouched for any more; each counts
 * against its address again (one over the cap is shut down) until a
 * request on it shows a valid token again. */
void ctld_conns_unvouch_all(ctld_server *S, int per_client);
/* The reaper thread (arg: the ctld); ends when S->stopping is set and
 * S->reapcv signalled. */
void *ctld_reaper_main(void *arg);
/* Frees the buckets and address counts. */
void ctld_limits_free(ctld_server *S);

#endif
