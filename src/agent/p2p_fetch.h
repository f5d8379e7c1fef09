/*
 * p2p_fetch.h - the state of one blob's fetch (p2p_fetch.c: its workers
 * and their loop), shared with what the workers call: the peers
 * (p2p_peers.c: asking them for pieces, and which to avoid) and the tracker
 * (p2p_tracker.c: the announces). Private to those three files; everything
 * in a fetch is under its mu unless a function says otherwise.
 */
#ifndef TS_AGENT_P2P_FETCH_H
#define TS_AGENT_P2P_FETCH_H

#include <curl/curl.h>
#include <jansson.h>
#include <stddef.h>

#include "agent/p2p_internal.h"

#define PEERS_AVOID_MAX 64
#define PEERS_MAX 64
/* Connections a worker keeps open, one per holder and the tracker: on a
 * full link a new connection's SYN-ACK waits behind the uploads (a shaped
 * link's queue drops it; SYN retried after 1 s and 3 s), so a worker
 * reuses what it opened */
#define CONNECTIONS_KEPT ((long)PEERS_MAX + 1)
#define PEER_FAILED_AVOID_S 10.0    /* a peer that failed is not asked again this long */
#define P2P_TOKEN_MAX 160           /* "<expiry>.<64 hex>" and room */
#define PEER_SILENT_MAX 20          /* connects timed out in a row (30 s): the holder is down */

typedef struct peer {
    char node[64];
    char url[TS_P2P_URL_MAX];
    const char *have; /* npieces of '0'/'1', in the tracker's answer */
    const char *token; /* the token good at this peer, in the answer */
} peer;

/* The blob's fetch, shared by its workers under mu. */
typedef struct fetch {
    pthread_mutex_t mu;
    pthread_mutex_t origin_mu;  /* the registry's reader is one connection: one piece at a time */
    /* The blob's digest, taken piece by piece in order as they arrive, so
     * that the check after the last piece reads only what came last:
     * whole, hashed and hash_failed under hash_mu (one worker hashes at a
     * time, never under mu); hash_again under mu: a piece came while
     * another worker was hashing */
    pthread_mutex_t hash_mu;
    void *whole;                /* gnutls_hash_hd_t; NULL: the check reads the whole file */
    int hashed;                 /* pieces [0, hashed) are in whole */
    const ts_p2p_in_order *in_order; /* told as hashed grows; NULL: none */
    bool hash_failed, hash_again;
    ts_p2p *p;
    const char *digest;
    long long size;
    int npieces;
    int fd, slot;
    ts_p2p_origin_fn origin;
    void *origin_ctx;
    uint8_t *have, *from_origin, *busy; /* busy: a worker is fetching it */
    uint8_t *origin_busy;       /* a worker is taking it from the registry (told the tracker) */
    char (*hash)[TS_IMAGE_DIGEST_MAX]; /* per piece, from the tracker or our own */
    uint8_t *report_hash;       /* ours, not yet told to the tracker */
    char busy_peer[PEERS_MAX][64];   /* holders that answered 503, until busy_until */
    double busy_until[PEERS_MAX];
    int silent[PEERS_MAX];           /* its connects timed out in a row */
    char avoid[PEERS_AVOID_MAX][64];
    double avoid_until[PEERS_AVOID_MAX]; /* a peer that failed: a while; one that lied: for good */
    int navoid, nreport_bad;    /* avoid[0..nreport_bad) not yet told to the tracker */
    char missing[PEERS_AVOID_MAX][64]; /* said 404: not yet told to the tracker */
    int nmissing;
    double probed_s;            /* the grant holders without pieces were last probed */
    int held;
    double t0, last_new, tracker_ok; /* tracker_ok: its last answer */
    unsigned start;             /* this node's own starting point among the pieces */
    long long rate;
    ts_p2p_stats *st;
    int rc;                     /* the first worker's error; 0 */
    ts_err err;
} fetch;

/* One worker: its own connection and piece buffer. */
typedef struct worker {
    fetch *f;
    CURL *c;
    char *buf;                  /* one piece (+1: the origin's reader ends it with a NUL) */
    size_t buf_n, buf_max;
} worker;

/* p2p_fetch.c */
/* w's handle made ready for one request to url with headers h over
 * protocols ("http", "http,https"), its answer into w->buf (w->buf_n from
 * 0; the transfer fails past w->buf_max); the caller adds its own options */
void agent_p2p_curl_begin(worker *w, const char *url, struct curl_slist *h,
                          const char *protocols);
void agent_p2p_piece_span(const fetch *f, int i, long long *off, long long *len);
void agent_p2p_sha(const char *b, size_t n, char out[TS_IMAGE_DIGEST_MAX]);

/* p2p_peers.c: the peers this fetch avoids, finds busy or silent (under
 * f->mu), and asking them (not under it) */
bool agent_p2p_avoided(const fetch *f, const char *node);
bool agent_p2p_peer_busy(const fetch *f, const char *node, double now);
void agent_p2p_note_busy(fetch *f, const char *node);
int agent_p2p_note_silent(fetch *f, const char *node);
void agent_p2p_note_answered(fetch *f, const char *node);
void agent_p2p_avoid(fetch *f, const char *node, double for_s, bool report);
void agent_p2p_note_missing(fetch *f, const char *node);
enum { PEER_OK, PEER_MISSING, PEER_BUSY, PEER_SILENT, PEER_FAILED, PEER_DEAD, PEER_LIED };
int agent_p2p_from_peer(worker *w, const peer *pe, int i, const char *want);
int agent_p2p_peers_of(const fetch *f, json_t *ans, peer *peers);
bool agent_p2p_probe_holders(fetch *f, json_t *ans);

/* p2p_tracker.c: the announce of this fetch (not under f->mu); the
 * tracker's answer, owned by the caller, or NULL */
json_t *agent_p2p_announce(worker *w, bool done);

#endif
