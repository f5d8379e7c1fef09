/*
 * p2p_fetch.c - one blob fetched piece by piece from peers and the
 * registry (p2p.h has the scheme).
 *
 * P2P_STREAMS workers per blob, each a loop bounded by FETCH_DEADLINE_S,
 * so that a node's link stays busy while one peer is slow to answer:
 * announce what this node holds to the tracker (with the sha256 of pieces
 * it took from the registry, and the peers it gave up on), read back the
 * peers, their pieces, the pieces' hashes and perhaps a grant; then fetch
 * one piece no other worker is fetching: the granted piece from the
 * registry (every piece leaves the registry once, as early as it can: the
 * registry's link is the one all nodes wait on), else the rarest piece a
 * peer not avoided holds (a holder sending its most answers 503 and is
 * left alone a moment: another holder or another piece; ties broken by this node's own offset, so that a
 * gang's nodes start at different pieces), else wait a little (others are
 * fetching the rest from the registry; meanwhile it probes the grant
 * holders with no piece to serve, whom nobody else would find dead).
 * Waiting longer than STALL_S
 * without a new piece, or a tracker that has not answered for
 * TRACKER_LOST_S, and the registry gives the next missing piece. Each piece from a peer must have the
 * tracker's hash; the file as a whole must have the blob's digest, else
 * every piece that came from peers is fetched again from the registry.
 * The workers share the fetch's state under its mutex; the network is
 * never waited on under it.
 */
#define _GNU_SOURCE
#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <gnutls/crypto.h>
#include <jansson.h>

#include "agent/p2p_internal.h"

#define FETCH_DEADLINE_S 900.0
#define STALL_S 15.0                /* no new piece this long (past the tracker's grants
                                     * of silent nodes): the registry gives one */
#define WAIT_STEP_NS (150 * 1000 * 1000L)
#define TRACKER_LOST_S 10.0         /* no answer this long: the registry, piece by piece */
#define TRACKER_TIMEOUT_MS 5000L
#define PEER_TIMEOUT_S 60L
/* A holder not connected within this is taken as busy (its link full: the
 * SYN-ACK dropped behind its uploads) and another asked: two SYNs (the
 * second after 1 s), not three and 5 s. bench/image-p2p at 64 nodes: with
 * 5 s, 1,436 connects timed out, half the workers' time, last ready 72 s;
 * 1.5 s: 50.6 s; 0.5 s: 47.7 s for 40 % more CPU */
#define PEER_CONNECT_TIMEOUT_MS 1500L
#define PEER_SILENT_MAX 20          /* connects timed out in a row (30 s): the holder is down */
#define PEER_LOW_SPEED_BYTES 16384L /* slower than this for PEER_LOW_SPEED_S: a dead peer */
#define PEER_LOW_SPEED_S 3L
#define PEERS_AVOID_MAX 64
#define PEERS_MAX 64
#define TRACKER_ANSWER_MAX_BYTES (8 << 20)
#define PEER_FAILED_AVOID_S 10.0    /* a peer that failed is not asked again this long */
#define P2P_STREAMS 3               /* pieces fetched at once; one of them from the registry */
/* Connections a worker keeps open, one per holder and the tracker: on a
 * full link a new connection's SYN-ACK waits behind the uploads (a shaped
 * link's queue drops it; SYN retried after 1 s and 3 s), so a worker
 * reuses what it opened */
#define CONNECTIONS_KEPT ((long)PEERS_MAX + 1)
#define BUSY_STALL_S 120.0          /* holders all busy this long: the registry after all */
#define PEER_BUSY_S 0.3             /* a holder sending its most (503): asked again after this */
#define BUSY_PAUSE_NS (50 * 1000 * 1000L) /* every holder of a wanted piece busy: this pause */
/* Nothing to fetch: the nodes holding grants of missing pieces, with none
 * to serve (so nobody asks them), are probed this often, a connect each: a
 * refused port is a dead node, reported, and its grant goes at once rather
 * than after the tracker's 5-s hold */
#define PROBE_EVERY_S 0.5
#define PROBE_CONNECT_TIMEOUT_MS 1000L

typedef struct peer {
    char node[64];
    char url[TS_P2P_URL_MAX];
    const char *have; /* npieces of '0'/'1', in the tracker's answer */
} peer;

/* The blob's fetch, shared by its workers under mu. */
typedef struct fetch {
    pthread_mutex_t mu;
    pthread_mutex_t origin_mu;  /* the registry's reader is one connection: one piece at a time */
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
    char token[160];
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

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static size_t sink(char *b, size_t sz, size_t n, void *ctx)
{
    worker *w = ctx;
    size_t len = sz * n;
    if (w->buf_n + len > w->buf_max)
        return 0;
    memcpy(w->buf + w->buf_n, b, len);
    w->buf_n += len;
    return len;
}

static void piece_span(const fetch *f, int i, long long *off, long long *len)
{
    *off = (long long)i * TS_P2P_PIECE_BYTES;
    *len = f->size - *off < TS_P2P_PIECE_BYTES ? f->size - *off : TS_P2P_PIECE_BYTES;
}

static void sha(const char *b, size_t n, char out[TS_IMAGE_DIGEST_MAX])
{
    unsigned char d[32];
    gnutls_hash_fast(GNUTLS_DIG_SHA256, b, n, d);
    char *q = out + sprintf(out, "sha256:");
    for (int i = 0; i < 32; i++)
        q += sprintf(q, "%02x", d[i]);
}

static bool avoided(const fetch *f, const char *node)
{
    for (int i = 0; i < f->navoid; i++)
        if (!strcmp(f->avoid[i], node))
            return f->avoid_until[i] > mono_s();
    return false;
}

/* Under f->mu: a holder sending its most (p2p_serve.c) is left alone a
 * moment; neither a fault nor reported. */
static bool peer_busy(const fetch *f, const char *node, double now)
{
    for (int i = 0; i < PEERS_MAX && f->busy_peer[i][0]; i++)
        if (!strcmp(f->busy_peer[i], node))
            return f->busy_until[i] > now;
    return false;
}

/* Under f->mu: node's entry among the busy ones (made, the oldest reused). */
static int busy_slot(fetch *f, const char *node)
{
    int k = 0, oldest = 0;
    for (; k < PEERS_MAX && f->busy_peer[k][0] && strcmp(f->busy_peer[k], node); k++)
        if (f->busy_until[k] < f->busy_until[oldest])
            oldest = k;
    if (k == PEERS_MAX)
        k = oldest;
    if (strcmp(f->busy_peer[k], node) != 0) {
        snprintf(f->busy_peer[k], sizeof f->busy_peer[k], "%s", node);
        f->silent[k] = 0;
    }
    return k;
}

static void note_busy(fetch *f, const char *node)
{
    f->busy_until[busy_slot(f, node)] = mono_s() + PEER_BUSY_S;
}

/* Under f->mu: node's connect timed out again; its count in a row. */
static int note_silent(fetch *f, const char *node)
{
    int k = busy_slot(f, node);
    f->busy_until[k] = mono_s() + PEER_BUSY_S;
    return ++f->silent[k];
}

static void note_answered(fetch *f, const char *node)
{
    for (int k = 0; k < PEERS_MAX && f->busy_peer[k][0]; k++)
        if (!strcmp(f->busy_peer[k], node))
            f->silent[k] = 0;
}

/* Under f->mu; for_s < 0: for good. report: told to the tracker, which
 * leaves the peer out of every node's answers for a while: a liar, a peer
 * that no longer holds the layer, one whose port refuses (it is gone). A
 * peer that failed otherwise (timed out, cut a transfer, too slow) is only
 * this node's to avoid: on a loaded machine a live
 * holder fails some connections, and one report from each of its askers
 * would have the tracker take it out for everyone, sending its pieces back
 * to the registry. */
static void avoid(fetch *f, const char *node, double for_s, bool report)
{
    double until = for_s < 0 ? 1e300 : mono_s() + for_s;
    for (int i = 0; i < f->navoid; i++)
        if (!strcmp(f->avoid[i], node)) {
            /* a liar for good stays one */
            f->avoid_until[i] = f->avoid_until[i] > until ? f->avoid_until[i] : until;
            if (report && i >= f->nreport_bad) {
                /* avoided before without a report (it cut a transfer as it
                 * died) and now refusing: reported all the same, else the
                 * tracker goes on naming it, and holding its grants, for
                 * every node */
                char name[sizeof f->avoid[0]];
                double u = f->avoid_until[i];
                memcpy(name, f->avoid[i], sizeof name);
                memmove(f->avoid[1], f->avoid[0], (size_t)i * sizeof f->avoid[0]);
                memmove(&f->avoid_until[1], &f->avoid_until[0],
                        (size_t)i * sizeof f->avoid_until[0]);
                memcpy(f->avoid[0], name, sizeof name);
                f->avoid_until[0] = u;
                f->nreport_bad++;
            }
            return;
        }
    if (f->navoid >= PEERS_AVOID_MAX)
        return;
    f->st->bad_peers++;
    if (!report) {
        snprintf(f->avoid[f->navoid], sizeof f->avoid[0], "%s", node);
        f->avoid_until[f->navoid++] = until;
        return;
    }
    /* the not-yet-reported ones are the first nreport_bad */
    memmove(f->avoid[1], f->avoid[0], (size_t)f->navoid * sizeof f->avoid[0]);
    memmove(&f->avoid_until[1], &f->avoid_until[0], (size_t)f->navoid * sizeof f->avoid_until[0]);
    snprintf(f->avoid[0], sizeof f->avoid[0], "%s", node);
    f->avoid_until[0] = until;
    f->navoid++;
    f->nreport_bad++;
}

/* Under f->mu: node said it does not hold a piece the tracker named (404:
 * it restarted, or evicted the layer). Told to the tracker as missing, not
 * bad: it withdraws the node's word on the blob until the node announces
 * it again, and bans nothing (a restarted node that fetches the layer anew
 * is a holder again at its next announce, where a ban kept it out 60 s). */
static void note_missing(fetch *f, const char *node)
{
    for (int i = 0; i < f->nmissing; i++)
        if (!strcmp(f->missing[i], node))
            return;
    if (f->nmissing < PEERS_AVOID_MAX)
        snprintf(f->missing[f->nmissing++], sizeof f->missing[0], "%s", node);
}

/* The announce's body, under f->mu; what it reports is taken as told. */
static char *announce_body(fetch *f, bool done)
{
    ts_p2p *p = f->p;
    char *have = malloc((size_t)f->npieces + 1);
    if (!have)
        return NULL;
    for (int i = 0; i < f->npieces; i++)
        have[i] = done || f->have[i] ? '1' : '0';
    have[f->npieces] = 0;
    json_t *hashes = json_object(), *bad = json_array(), *fetching = json_array(),
           *missing = json_array();
    for (int i = 0; i < f->npieces; i++)
        if (f->origin_busy[i])
            json_array_append_new(fetching, json_integer(i));
    for (int i = 0; i < f->npieces; i++)
        if (f->report_hash[i]) {
            char k[16];
            snprintf(k, sizeof k, "%d", i);
            json_object_set_new(hashes, k, json_string(f->hash[i]));
        }
    for (int i = 0; i < f->nreport_bad; i++)
        json_array_append_new(bad, json_string(f->avoid[i]));
    for (int i = 0; i < f->nmissing; i++)
        json_array_append_new(missing, json_string(f->missing[i]));
    json_t *body = json_pack("{s:s,s:s,s:s,s:I,s:s,s:o,s:o,s:o,s:o}", "node", p->node, "url",
                             p->url, "blob", f->digest, "size", (json_int_t)f->size, "have",
                             have, "hashes", hashes, "bad", bad, "fetching", fetching,
                             "missing", missing);
    free(have);
    char *txt = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    if (txt) { /* a lost answer loses these reports: the next fetch of the blob sends them */
        memset(f->report_hash, 0, (size_t)f->npieces);
        f->nreport_bad = 0;
        f->nmissing = 0;
    }
    return txt;
}

/* Announces; the tracker's answer (owned by the caller), NULL when it did
 * not answer. */
static json_t *announce(worker *w, bool done)
{
    fetch *f = w->f;
    ts_p2p *p = f->p;
    char ctl[512], url[700];
    pthread_mutex_lock(&p->mu);
    snprintf(ctl, sizeof ctl, "%s", p->controller);
    pthread_mutex_unlock(&p->mu);
    if (!ctl[0])
        return NULL;
    snprintf(url, sizeof url, "%s/v1/agent/p2p", ctl);
    pthread_mutex_lock(&f->mu);
    char *txt = announce_body(f, done);
    pthread_mutex_unlock(&f->mu);
    if (!txt)
        return NULL;
    char auth[320];
    snprintf(auth, sizeof auth, "Authorization: Bearer %s", p->token);
    struct curl_slist *h = curl_slist_append(NULL, auth);
    h = curl_slist_append(h, "Content-Type: application/json");
    h = curl_slist_append(h, "Expect:"); /* no 100-continue round trip */
    char *ans = malloc(TRACKER_ANSWER_MAX_BYTES);
    char *saved = w->buf;
    size_t saved_max = w->buf_max;
    w->buf = ans;
    w->buf_n = 0;
    w->buf_max = ans ? TRACKER_ANSWER_MAX_BYTES - 1 : 0;
    curl_easy_reset(w->c);
    curl_easy_setopt(w->c, CURLOPT_MAXCONNECTS, CONNECTIONS_KEPT);
    curl_easy_setopt(w->c, CURLOPT_URL, url);
    curl_easy_setopt(w->c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(w->c, CURLOPT_POSTFIELDS, txt);
    curl_easy_setopt(w->c, CURLOPT_WRITEFUNCTION, sink);
    curl_easy_setopt(w->c, CURLOPT_WRITEDATA, w);
    curl_easy_setopt(w->c, CURLOPT_TIMEOUT_MS, TRACKER_TIMEOUT_MS);
    curl_easy_setopt(w->c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(w->c, CURLOPT_PROTOCOLS_STR, "http,https");
    if (p->ca_file[0])
        curl_easy_setopt(w->c, CURLOPT_CAINFO, p->ca_file);
    CURLcode cr = ans ? curl_easy_perform(w->c) : CURLE_OUT_OF_MEMORY;
    long status = 0;
    curl_easy_getinfo(w->c, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(h);
    explicit_bzero(auth, sizeof auth);
    free(txt);
    json_t *j = NULL;
    if (cr == CURLE_OK && status == 200)
        j = json_loadb(ans, w->buf_n, 0, NULL);
    free(ans);
    w->buf = saved;
    w->buf_max = saved_max;
    w->buf_n = 0;
    if (!json_is_object(j)) {
        json_decref(j);
        return NULL;
    }
    const char *key = json_string_value(json_object_get(j, "key"));
    if (key && strlen(key) < P2P_KEY_HEX_MAX) {
        pthread_mutex_lock(&p->mu);
        snprintf(p->key, sizeof p->key, "%s", key);
        pthread_mutex_unlock(&p->mu);
    }
    pthread_mutex_lock(&f->mu);
    const char *tok = json_string_value(json_object_get(j, "token"));
    if (tok)
        snprintf(f->token, sizeof f->token, "%s", tok);
    json_t *hs = json_object_get(j, "hashes");
    for (int i = 0; i < f->npieces && json_is_array(hs); i++) {
        const char *h1 = json_string_value(json_array_get(hs, (size_t)i));
        if (h1 && !f->from_origin[i] && ts_image_digest_ok(h1))
            snprintf(f->hash[i], sizeof f->hash[i], "%s", h1);
    }
    pthread_mutex_unlock(&f->mu);
    return j;
}

enum { PEER_OK, PEER_MISSING, PEER_BUSY, PEER_SILENT, PEER_FAILED, PEER_DEAD, PEER_LIED };

/* One piece from a peer into w->buf: PEER_OK when it has the tracker's hash
 * (want, copied by the caller); PEER_MISSING when the peer says it does
 * not hold it (404: the tracker's word is older than the peer's store, e.g.
 * the peer restarted or evicted it); PEER_BUSY: it sends its most now
 * (503); PEER_SILENT: not connected within PEER_CONNECT_TIMEOUT_MS;
 * PEER_DEAD: its port refuses; PEER_FAILED: another error, a peer
 * that died mid-transfer or went too slow; PEER_LIED: bad bytes. */
static int from_peer(worker *w, const peer *pe, int i, const char *want, const char *token)
{
    fetch *f = w->f;
    long long off, len;
    piece_span(f, i, &off, &len);
    char url[TS_P2P_URL_MAX + 200], hn[128], ht[220];
    snprintf(url, sizeof url, "%s/p2p/v1/blobs/%s/%d", pe->url, f->digest, i);
    snprintf(hn, sizeof hn, "X-Tessera-Node: %s", f->p->node);
    snprintf(ht, sizeof ht, "X-Tessera-P2P-Token: %s", token);
    struct curl_slist *h = curl_slist_append(NULL, hn);
    h = curl_slist_append(h, ht);
    w->buf_n = 0;
    curl_easy_reset(w->c);
    curl_easy_setopt(w->c, CURLOPT_MAXCONNECTS, CONNECTIONS_KEPT);
    curl_easy_setopt(w->c, CURLOPT_URL, url);
    curl_easy_setopt(w->c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(w->c, CURLOPT_WRITEFUNCTION, sink);
    curl_easy_setopt(w->c, CURLOPT_WRITEDATA, w);
    curl_easy_setopt(w->c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(w->c, CURLOPT_PROTOCOLS_STR, "http");
    curl_easy_setopt(w->c, CURLOPT_CONNECTTIMEOUT_MS, PEER_CONNECT_TIMEOUT_MS);
    curl_easy_setopt(w->c, CURLOPT_TIMEOUT, PEER_TIMEOUT_S);
    curl_easy_setopt(w->c, CURLOPT_LOW_SPEED_LIMIT, PEER_LOW_SPEED_BYTES);
    curl_easy_setopt(w->c, CURLOPT_LOW_SPEED_TIME, PEER_LOW_SPEED_S);
    if (f->rate > 0)
        curl_easy_setopt(w->c, CURLOPT_MAX_RECV_SPEED_LARGE, (curl_off_t)f->rate);
    CURLcode cr = curl_easy_perform(w->c);
    long status = 0;
    curl_easy_getinfo(w->c, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(h);
    if (cr == CURLE_OK && status == 404)
        return PEER_MISSING;
    if (cr == CURLE_OK && status == 503)
        return PEER_BUSY;
    if (cr == CURLE_COULDNT_CONNECT) /* refused: nothing listens there any more */
        return PEER_DEAD;
    curl_off_t connected_us = 0;
    curl_easy_getinfo(w->c, CURLINFO_CONNECT_TIME_T, &connected_us);
    if (cr == CURLE_OPERATION_TIMEDOUT && connected_us == 0)
        return PEER_SILENT; /* its link is full (SYN-ACKs dropped behind its uploads), or it is down */
    if (cr != CURLE_OK || status != 200 || (long long)w->buf_n != len)
        return PEER_FAILED;
    char got[TS_IMAGE_DIGEST_MAX];
    sha(w->buf, w->buf_n, got);
    if (strcmp(got, want) != 0) {
        pthread_mutex_lock(&f->mu);
        f->st->refetched += len; /* a lying peer: its bytes are thrown away */
        pthread_mutex_unlock(&f->mu);
        return PEER_LIED;
    }
    return PEER_OK;
}

static int put_piece(fetch *f, int i, const char *b, long long len, ts_err *err)
{
    long long off, want;
    piece_span(f, i, &off, &want);
    for (long long w = 0; w < len;) {
        ssize_t k = pwrite(f->fd, b + w, (size_t)(len - w), off + w);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return ts_err_set(err, TS_EIO, "image store: writing blob %s: %s", f->digest,
                              strerror(errno));
        w += k;
    }
    pthread_mutex_lock(&f->mu);
    if (!f->have[i])
        f->held++;
    f->have[i] = 1;
    f->last_new = mono_s();
    pthread_mutex_unlock(&f->mu);
    pthread_mutex_lock(&f->p->mu);
    if (f->slot >= 0)
        f->p->active[f->slot].have[i] = 1; /* served to peers from now on */
    pthread_mutex_unlock(&f->p->mu);
    return 0;
}

static int from_origin(worker *w, int i, ts_err *err)
{
    fetch *f = w->f;
    long long off, len;
    piece_span(f, i, &off, &len);
    pthread_mutex_lock(&f->origin_mu);
    int rc = f->origin(f->origin_ctx, off, len, w->buf, err);
    pthread_mutex_unlock(&f->origin_mu);
    if (rc)
        return rc;
    char h[TS_IMAGE_DIGEST_MAX];
    sha(w->buf, (size_t)len, h);
    pthread_mutex_lock(&f->mu);
    memcpy(f->hash[i], h, sizeof h);
    f->report_hash[i] = 1;
    f->from_origin[i] = 1;
    f->st->from_origin += len;
    pthread_mutex_unlock(&f->mu);
    return put_piece(f, i, w->buf, len, err);
}

/* The piece to take from a peer, under f->mu: the rarest missing one no
 * worker is fetching, with a hash, whose holders are not all avoided or
 * busy; -1: none. *who: the holder chosen; *held: some peer not avoided
 * holds a missing piece (busy now, perhaps): the swarm is moving. */
static int pick(fetch *f, const peer *peers, int npeers, int start, int *who, bool *held)
{
    int best = -1, best_n = PEERS_MAX + 1;
    double now = mono_s();
    *held = false;
    for (int k = 0; k < f->npieces; k++) {
        int i = (start + k) % f->npieces;
        if (f->have[i] || f->busy[i] || !f->hash[i][0])
            continue;
        int n = 0, chosen = -1;
        for (int q = 0; q < npeers; q++) {
            if (peers[q].have[i] != '1' || avoided(f, peers[q].node))
                continue;
            *held = true;
            if (peer_busy(f, peers[q].node, now))
                continue;
            n++;
            if (rand() % n == 0) /* a holder chosen evenly among them */
                chosen = q;
        }
        if (n > 0 && n < best_n) {
            best = i, best_n = n, *who = chosen;
        }
    }
    return best;
}

static int register_active(fetch *f)
{
    ts_p2p *p = f->p;
    int slot = -1;
    pthread_mutex_lock(&p->mu);
    for (int i = 0; i < P2P_ACTIVE_MAX && slot < 0; i++)
        if (!p->active[i].digest[0]) {
            uint8_t *have = calloc((size_t)f->npieces, 1);
            int fd = have ? dup(f->fd) : -1;
            if (fd < 0) {
                free(have);
                break;
            }
            p2p_active *a = &p->active[i];
            snprintf(a->digest, sizeof a->digest, "%s", f->digest);
            a->fd = fd;
            a->npieces = f->npieces;
            a->have = have;
            slot = i;
        }
    pthread_mutex_unlock(&p->mu);
    return slot;
}

void agent_p2p_release(ts_p2p *p, const char *digest, bool held)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    for (int i = 0; i < P2P_ACTIVE_MAX; i++) {
        p2p_active *a = &p->active[i];
        if (a->digest[0] && !strcmp(a->digest, digest)) {
            close(a->fd);
            free(a->have);
            memset(a, 0, sizeof *a);
            a->fd = -1;
            break;
        }
    }
    pthread_mutex_unlock(&p->mu);
    (void)held; /* agent_p2p_fetch announced the whole blob once it was verified */
}

/* The whole file's digest against the blob's. */
static bool whole_ok(worker *w)
{
    fetch *f = w->f;
    gnutls_hash_hd_t h;
    if (gnutls_hash_init(&h, GNUTLS_DIG_SHA256) != 0)
        return false;
    for (int i = 0; i < f->npieces; i++) {
        long long off, len, got = 0;
        piece_span(f, i, &off, &len);
        while (got < len) {
            ssize_t k = pread(f->fd, w->buf + got, (size_t)(len - got), off + got);
            if (k < 0 && errno == EINTR)
                continue;
            if (k <= 0)
                break;
            got += k;
        }
        if (got != len) {
            gnutls_hash_deinit(h, NULL);
            return false;
        }
        gnutls_hash(h, w->buf, (size_t)len);
    }
    unsigned char d[32];
    gnutls_hash_deinit(h, d);
    char got[TS_IMAGE_DIGEST_MAX];
    char *q = got + sprintf(got, "sha256:");
    for (int i = 0; i < 32; i++)
        q += sprintf(q, "%02x", d[i]);
    return strcmp(got, f->digest) == 0;
}

/* Reads the tracker's peers into peers (pointing into ans); their count. */
static int peers_of(const fetch *f, json_t *ans, peer *peers)
{
    int npeers = 0;
    json_t *pe;
    size_t k;
    json_array_foreach(json_object_get(ans, "peers"), k, pe) {
        const char *n = json_string_value(json_object_get(pe, "node"));
        const char *u = json_string_value(json_object_get(pe, "url"));
        const char *h = json_string_value(json_object_get(pe, "have"));
        if (!n || !u || !h || npeers >= PEERS_MAX || strlen(h) != (size_t)f->npieces ||
            strlen(n) >= sizeof peers[0].node || strlen(u) >= sizeof peers[0].url ||
            !strcmp(n, f->p->node))
            continue;
        snprintf(peers[npeers].node, sizeof peers[npeers].node, "%s", n);
        snprintf(peers[npeers].url, sizeof peers[npeers].url, "%s", u);
        peers[npeers].have = h;
        npeers++;
    }
    return npeers;
}

/* Nothing to fetch now: one worker at a time connects to the nodes the
 * tracker says hold grants of missing pieces (`granted`, those with no
 * piece to serve), at most every PROBE_EVERY_S; a refused port is a dead
 * node, reported as bad so that its grant goes now; silence counts as for
 * any holder. True if it probed (the wait is spent). */
static bool probe_holders(fetch *f, json_t *ans)
{
    pthread_mutex_lock(&f->mu);
    double now = mono_s();
    bool due = now - f->probed_s >= PROBE_EVERY_S;
    if (due)
        f->probed_s = now;
    pthread_mutex_unlock(&f->mu);
    json_t *g, *list = json_object_get(ans, "granted");
    size_t k;
    if (!due || !json_array_size(list))
        return false;
    json_array_foreach(list, k, g) {
        const char *node = json_string_value(json_object_get(g, "node"));
        const char *url = json_string_value(json_object_get(g, "url"));
        if (!node || !url || strncmp(url, "http://", 7) != 0 || !strcmp(node, f->p->node))
            continue;
        pthread_mutex_lock(&f->mu);
        bool skip = avoided(f, node);
        pthread_mutex_unlock(&f->mu);
        CURL *c = skip ? NULL : curl_easy_init();
        if (!c)
            continue;
        curl_easy_setopt(c, CURLOPT_URL, url);
        curl_easy_setopt(c, CURLOPT_CONNECT_ONLY, 1L);
        curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http");
        curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, PROBE_CONNECT_TIMEOUT_MS);
        CURLcode cr = curl_easy_perform(c);
        curl_easy_cleanup(c);
        pthread_mutex_lock(&f->mu);
        if (cr == CURLE_COULDNT_CONNECT) /* refused: nothing listens there any more */
            avoid(f, node, PEER_FAILED_AVOID_S, true);
        else if (cr == CURLE_OK)
            note_answered(f, node);
        else if (note_silent(f, node) >= PEER_SILENT_MAX)
            avoid(f, node, PEER_FAILED_AVOID_S, true);
        pthread_mutex_unlock(&f->mu);
    }
    return true;
}

/* One worker's loop until every piece is held or a worker failed. */
static void *work(void *arg)
{
    worker *w = arg;
    fetch *f = w->f;
    peer *peers = malloc(PEERS_MAX * sizeof *peers);
    for (;;) {
        pthread_mutex_lock(&f->mu);
        bool over = f->held == f->npieces || f->rc != 0 || !peers;
        pthread_mutex_unlock(&f->mu);
        if (over)
            break;
        ts_err err = {0};
        int rc = 0;
        if (mono_s() - f->t0 > FETCH_DEADLINE_S)
            rc = ts_err_set(&err, TS_EIO, "blob %s: not fetched within %.0f s", f->digest,
                            FETCH_DEADLINE_S);
        json_t *ans = rc ? NULL : announce(w, false);
        int npeers = ans ? peers_of(f, ans, peers) : 0;
        json_t *g = json_object_get(ans, "grant");
        int grant = json_is_integer(g) ? (int)json_integer_value(g) : -1;
        int who = -1, i = -1;
        char want[TS_IMAGE_DIGEST_MAX] = "", token[160];
        pthread_mutex_lock(&f->mu);
        if (!ans)
            f->st->no_tracker = true;
        else
            f->tracker_ok = mono_s();
        /* a slow or restarting tracker is waited for a while, not taken for gone */
        bool lost = !ans && mono_s() - f->tracker_ok > TRACKER_LOST_S;
        if (grant >= f->npieces || (grant >= 0 && (f->have[grant] || f->busy[grant])))
            grant = -1;
        /* a grant first: each piece must leave the registry once, and the
         * registry's link is the one every node waits on */
        bool held = false;
        if (grant < 0)
            i = pick(f, peers, npeers, (int)(f->start % (unsigned)f->npieces), &who, &held);
        /* a stall: nobody holds what is missing (past the tracker's grants of
         * silent nodes); holders busy sending to others are a swarm at work,
         * on a loaded machine for long, and waited for up to BUSY_STALL_S */
        double idle_s = mono_s() - f->last_new;
        bool stalled = idle_s > (held ? BUSY_STALL_S : STALL_S);
        if (grant < 0 && i < 0 && !rc && (lost || stalled))
            for (int k = 0; k < f->npieces && grant < 0; k++) {
                /* no tracker, or a stall: the next missing piece */
                int c = (int)((f->start + (unsigned)k) % (unsigned)f->npieces);
                if (!f->have[c] && !f->busy[c])
                    grant = c;
            }
        if (i >= 0) {
            f->busy[i] = 1;
            memcpy(want, f->hash[i], sizeof want);
        } else if (grant >= 0) {
            f->busy[grant] = 1;
            f->origin_busy[grant] = 1;
        }
        memcpy(token, f->token, sizeof token);
        pthread_mutex_unlock(&f->mu);
        if (rc) {
        } else if (i >= 0) {
            long long off, len;
            piece_span(f, i, &off, &len);
            int got = from_peer(w, &peers[who], i, want, token);
            if (got == PEER_OK) {
                rc = put_piece(f, i, w->buf, len, &err);
                pthread_mutex_lock(&f->mu);
                note_answered(f, peers[who].node);
                f->st->from_peers += len;
                pthread_mutex_unlock(&f->mu);
            } else if (got == PEER_MISSING) {
                /* the tracker's word is older than the peer's store (it
                 * evicted the blob, or restarted): told as missing */
                pthread_mutex_lock(&f->mu);
                note_missing(f, peers[who].node);
                note_busy(f, peers[who].node);
                pthread_mutex_unlock(&f->mu);
            } else if (got == PEER_BUSY) { /* another holder, or this one in a moment */
                pthread_mutex_lock(&f->mu);
                note_busy(f, peers[who].node);
                pthread_mutex_unlock(&f->mu);
                struct timespec ts = {0, BUSY_PAUSE_NS};
                nanosleep(&ts, NULL);
            } else if (got == PEER_SILENT) {
                /* a full link drops some SYN-ACKs; one that never answers
                 * is down: reported as gone */
                pthread_mutex_lock(&f->mu);
                if (note_silent(f, peers[who].node) >= PEER_SILENT_MAX)
                    avoid(f, peers[who].node, PEER_FAILED_AVOID_S, true);
                pthread_mutex_unlock(&f->mu);
                struct timespec ts = {0, BUSY_PAUSE_NS};
                nanosleep(&ts, NULL);
            } else {
                pthread_mutex_lock(&f->mu);
                /* a liar for good; an error or a dead peer a while */
                avoid(f, peers[who].node, got == PEER_LIED ? -1.0 : PEER_FAILED_AVOID_S,
                      got == PEER_LIED || got == PEER_DEAD);
                pthread_mutex_unlock(&f->mu);
            }
        } else if (grant >= 0) {
            rc = from_origin(w, grant, &err);
            i = grant;
        } else if (!probe_holders(f, ans)) {
            struct timespec ts = {0, WAIT_STEP_NS};
            nanosleep(&ts, NULL);
        }
        json_decref(ans);
        pthread_mutex_lock(&f->mu);
        if (i >= 0)
            f->busy[i] = f->origin_busy[i] = 0;
        if (rc && !f->rc) {
            f->rc = rc;
            f->err = err;
        }
        pthread_mutex_unlock(&f->mu);
    }
    free(peers);
    return NULL;
}

static int run(fetch *f, worker *ws, int nw, ts_err *err)
{
    f->t0 = f->last_new = f->tracker_ok = mono_s();
    for (const char *s = f->p->node; *s; s++)
        f->start = f->start * 31u + (unsigned char)*s;
    pthread_t th[P2P_STREAMS];
    int started = 0;
    for (int k = 1; k < nw; k++)
        if (pthread_create(&th[k], NULL, work, &ws[k]) == 0)
            started |= 1 << k;
    work(&ws[0]);
    for (int k = 1; k < nw; k++)
        if (started & (1 << k))
            pthread_join(th[k], NULL);
    if (f->rc) {
        if (err)
            *err = f->err;
        return f->rc;
    }
    if (whole_ok(&ws[0]))
        return 0;
    /* a piece's hash lied (its first fetcher reported a wrong one): what came
     * from peers comes again from the registry */
    for (int i = 0; i < f->npieces; i++)
        if (!f->from_origin[i]) {
            long long off, len;
            piece_span(f, i, &off, &len);
            f->st->refetched += len;
            f->st->from_peers -= len;
            int rc = from_origin(&ws[0], i, err);
            if (rc)
                return rc;
        }
    if (!whole_ok(&ws[0]))
        return ts_err_set(err, TS_EINVAL, "blob %s: the registry's bytes do not have its "
                          "digest: discarded", f->digest);
    return 0;
}

int agent_p2p_fetch(ts_p2p *p, const char *digest, long long size, int fd,
                 ts_p2p_origin_fn origin, void *origin_ctx, long long rate_bytes_s,
                 ts_p2p_stats *stats, ts_err *err)
{
    ts_p2p_stats none;
    fetch f = {.p = p, .digest = digest, .size = size, .fd = fd, .rate = rate_bytes_s,
               .st = stats ? stats : &none, .slot = -1, .origin = origin,
               .origin_ctx = origin_ctx};
    memset(f.st, 0, sizeof *f.st);
    if (size <= 0)
        return ts_err_set(err, TS_EINVAL, "blob %s: size %lld", digest, size);
    f.npieces = (int)((size + TS_P2P_PIECE_BYTES - 1) / TS_P2P_PIECE_BYTES);
    pthread_mutex_init(&f.mu, NULL);
    pthread_mutex_init(&f.origin_mu, NULL);
    f.have = calloc((size_t)f.npieces, 1);
    f.busy = calloc((size_t)f.npieces, 1);
    f.from_origin = calloc((size_t)f.npieces, 1);
    f.report_hash = calloc((size_t)f.npieces, 1);
    f.origin_busy = calloc((size_t)f.npieces, 1);
    f.hash = calloc((size_t)f.npieces, sizeof *f.hash);
    worker ws[P2P_STREAMS];
    bool ok = f.have && f.busy && f.from_origin && f.report_hash && f.origin_busy && f.hash;
    /* a prefetch, capped, takes one stream: the cap is per stream */
    int nw = rate_bytes_s > 0 ? 1 : P2P_STREAMS;
    for (int k = 0; k < P2P_STREAMS; k++) {
        ws[k] = (worker){.f = &f, .buf_max = TS_P2P_PIECE_BYTES};
        ws[k].c = curl_easy_init();
        ws[k].buf = malloc((size_t)TS_P2P_PIECE_BYTES + 1);
        ok = ok && ws[k].c && ws[k].buf;
    }
    int rc;
    if (!ok) {
        rc = ts_err_set(err, TS_ENOMEM, "out of memory");
    } else {
        f.slot = register_active(&f);
        rc = run(&f, ws, nw, err);
        if (rc == 0) {
            json_decref(announce(&ws[0], true)); /* a whole holder from now on */
        } else if (f.slot >= 0) {
            agent_p2p_release(p, digest, false);
        }
    }
    for (int k = 0; k < P2P_STREAMS; k++) {
        if (ws[k].c)
            curl_easy_cleanup(ws[k].c);
        free(ws[k].buf);
    }
    pthread_mutex_destroy(&f.mu);
    pthread_mutex_destroy(&f.origin_mu);
    free(f.have);
    free(f.busy);
    free(f.from_origin);
    free(f.report_hash);
    free(f.origin_busy);
    free(f.hash);
    return rc;
}
