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
 * tracker's hash; the file as a whole must have the blob's digest (taken
 * as the pieces come, in order, so that the check after the last piece
 * reads only what is not yet in it; the caller's in_order is told as that
 * prefix grows, so that a layer's unpack follows it), else every piece
 * that came from peers is fetched again from the registry.
 * The workers share the fetch's state under its mutex; the network is
 * never waited on under it. Asking peers is p2p_peers.c's, announcing
 * p2p_tracker.c's (p2p_fetch.h: what they share).
 */
#define _GNU_SOURCE
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <gnutls/crypto.h>
#include <jansson.h>

#include "agent/agent_internal.h"
#include "agent/image.h"
#include "agent/p2p_fetch.h"
#include "agent/clock.h"

#define FETCH_DEADLINE_S 900.0
#define STALL_S 15.0                /* no new piece this long (past the tracker's grants
                                     * of silent nodes): the registry gives one */
#define WAIT_STEP_NS (150 * 1000 * 1000L)
#define TRACKER_LOST_S 10.0         /* no answer this long: the registry, piece by piece */
#define P2P_STREAMS 3               /* pieces fetched at once; one of them from the registry */
#define BUSY_STALL_S 120.0          /* holders all busy this long: the registry after all */
#define BUSY_PAUSE_NS (50 * 1000 * 1000L) /* every holder of a wanted piece busy: this pause */

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

void agent_p2p_curl_begin(worker *w, const char *url, struct curl_slist *h,
                          const char *protocols)
{
    w->buf_n = 0;
    curl_easy_reset(w->c);
    curl_easy_setopt(w->c, CURLOPT_MAXCONNECTS, CONNECTIONS_KEPT);
    agent_curl_call(w->c, url, h, sink, w, protocols, NULL);
}

void agent_p2p_piece_span(const fetch *f, int i, long long *off, long long *len)
{
    *off = (long long)i * TS_P2P_PIECE_BYTES;
    *len = f->size - *off < TS_P2P_PIECE_BYTES ? f->size - *off : TS_P2P_PIECE_BYTES;
}

void agent_p2p_sha(const char *b, size_t n, char out[TS_IMAGE_DIGEST_MAX])
{
    unsigned char d[32];
    gnutls_hash_fast(GNUTLS_DIG_SHA256, b, n, d);
    char *q = out + sprintf(out, "sha256:");
    for (int i = 0; i < 32; i++)
        q += sprintf(q, "%02x", d[i]);
}

static int put_piece(fetch *f, int i, const char *b, long long len, ts_err *err)
{
    long long off, want;
    agent_p2p_piece_span(f, i, &off, &want);
    for (long long w = 0; w < len;) {
        ssize_t k = pwrite(f->fd, b + w, (size_t)(len - w), off + w);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return ts_err_set(err, TS_EIO, "image store: writing blob %s: %s", f->digest,
                              strerror(errno));
        w += k;
    }
    /* the disk starts writing now, so the fsync before the blob enters the
     * store waits for the last pieces only, not for all of it */
    sync_file_range(f->fd, off, len, SYNC_FILE_RANGE_WRITE);
    pthread_mutex_lock(&f->mu);
    if (!f->have[i])
        f->held++;
    f->have[i] = 1;
    f->last_new = agent_mono_s();
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
    agent_p2p_piece_span(f, i, &off, &len);
    double t = agent_mono_s();
    pthread_mutex_lock(&f->origin_mu);
    int rc = f->origin(f->origin_ctx, off, len, w->buf, err);
    pthread_mutex_unlock(&f->origin_mu);
    agent_image_trace("piece %d registry %.3f s (rc %d)", i, agent_mono_s() - t, rc);
    if (rc)
        return rc;
    char h[TS_IMAGE_DIGEST_MAX];
    agent_p2p_sha(w->buf, (size_t)len, h);
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
    double now = agent_mono_s();
    *held = false;
    for (int k = 0; k < f->npieces; k++) {
        int i = (start + k) % f->npieces;
        if (f->have[i] || f->busy[i] || !f->hash[i][0])
            continue;
        int n = 0, chosen = -1;
        for (int q = 0; q < npeers; q++) {
            if (peers[q].have[i] != '1' || agent_p2p_avoided(f, peers[q].node))
                continue;
            *held = true;
            if (agent_p2p_peer_busy(f, peers[q].node, now))
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

/* len bytes at off of the fetch's file into buf; false: short */
static bool read_span(int fd, char *buf, long long off, long long len)
{
    long long got = 0;
    while (got < len) {
        ssize_t k = pread(fd, buf + got, (size_t)(len - got), off + got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return false;
        got += k;
    }
    return true;
}

static bool digest_is(const unsigned char d[32], const char *digest)
{
    char got[TS_IMAGE_DIGEST_MAX];
    char *q = got + sprintf(got, "sha256:");
    for (int i = 0; i < 32; i++)
        q += sprintf(q, "%02x", d[i]);
    return strcmp(got, digest) == 0;
}

/* The held pieces that follow those in f->whole, in order, read back from
 * the file into it with w's buffer; under f->hash_mu. */
static void hash_held(worker *w)
{
    fetch *f = w->f;
    while (!f->hash_failed) {
        pthread_mutex_lock(&f->mu);
        bool next = f->hashed < f->npieces && f->have[f->hashed];
        pthread_mutex_unlock(&f->mu);
        if (!next)
            return;
        long long off, len;
        agent_p2p_piece_span(f, f->hashed, &off, &len);
        if (!read_span(f->fd, w->buf, off, len) ||
            gnutls_hash((gnutls_hash_hd_t)f->whole, w->buf, (size_t)len) != 0)
            f->hash_failed = true;
        else
            f->hashed++;
        if (!f->hash_failed && f->in_order && f->in_order->fn)
            f->in_order->fn(f->in_order->ctx, off + len);
    }
}

/* After a piece came: the pieces now in order go into the blob's digest,
 * by this worker, or by the one hashing now, which looks again before it
 * stops (hash_again): no worker waits for another's hashing. */
static void hash_advance(worker *w)
{
    fetch *f = w->f;
    if (!f->whole)
        return;
    pthread_mutex_lock(&f->mu);
    f->hash_again = true;
    pthread_mutex_unlock(&f->mu);
    while (pthread_mutex_trylock(&f->hash_mu) == 0) {
        pthread_mutex_lock(&f->mu);
        f->hash_again = false;
        pthread_mutex_unlock(&f->mu);
        hash_held(w);
        pthread_mutex_unlock(&f->hash_mu);
        pthread_mutex_lock(&f->mu);
        bool again = f->hash_again;
        pthread_mutex_unlock(&f->mu);
        if (!again)
            break;
    }
}

/* The whole file's digest against the blob's, once every piece is held and
 * the workers are gone: the digest taken as the pieces came, finished with
 * the pieces not yet in it, else (a read failed, or the check runs again
 * after a refetch) the whole file read once more. */
static bool whole_ok(worker *w)
{
    fetch *f = w->f;
    unsigned char d[32];
    if (f->whole) {
        hash_held(w);
        gnutls_hash_deinit((gnutls_hash_hd_t)f->whole, d);
        f->whole = NULL;
        if (!f->hash_failed && f->hashed == f->npieces)
            return digest_is(d, f->digest);
    }
    gnutls_hash_hd_t h;
    if (gnutls_hash_init(&h, GNUTLS_DIG_SHA256) != 0)
        return false;
    for (int i = 0; i < f->npieces; i++) {
        long long off, len;
        agent_p2p_piece_span(f, i, &off, &len);
        if (!read_span(f->fd, w->buf, off, len)) {
            gnutls_hash_deinit(h, NULL);
            return false;
        }
        gnutls_hash(h, w->buf, (size_t)len);
    }
    gnutls_hash_deinit(h, d);
    return digest_is(d, f->digest);
}

/* Piece i from the holder pe (its hash want), and what its answer means for
 * asking it again; 0, or the error of writing the piece. */
static int from_peer(worker *w, const peer *pe, int i, const char *want, ts_err *err)
{
    fetch *f = w->f;
    long long off, len;
    agent_p2p_piece_span(f, i, &off, &len);
    double t = agent_mono_s();
    int got = agent_p2p_from_peer(w, pe, i, want);
    agent_image_trace("piece %d peer %s %.3f s (answer %d)", i, pe->node,
                      agent_mono_s() - t, got);
    int rc = 0;
    if (got == PEER_OK) {
        rc = put_piece(f, i, w->buf, len, err);
        pthread_mutex_lock(&f->mu);
        agent_p2p_note_answered(f, pe->node);
        f->st->from_peers += len;
        pthread_mutex_unlock(&f->mu);
    } else if (got == PEER_MISSING) {
        /* the tracker's word is older than the peer's store (it
         * evicted the blob, or restarted): told as missing */
        pthread_mutex_lock(&f->mu);
        agent_p2p_note_missing(f, pe->node);
        agent_p2p_note_busy(f, pe->node);
        pthread_mutex_unlock(&f->mu);
    } else if (got == PEER_BUSY) { /* another holder, or this one in a moment */
        pthread_mutex_lock(&f->mu);
        agent_p2p_note_busy(f, pe->node);
        pthread_mutex_unlock(&f->mu);
        struct timespec ts = {0, BUSY_PAUSE_NS};
        nanosleep(&ts, NULL);
    } else if (got == PEER_SILENT) {
        /* a full link drops some SYN-ACKs; one that never answers
         * is down: reported as gone */
        pthread_mutex_lock(&f->mu);
        if (agent_p2p_note_silent(f, pe->node) >= PEER_SILENT_MAX)
            agent_p2p_avoid(f, pe->node, PEER_FAILED_AVOID_S, true);
        pthread_mutex_unlock(&f->mu);
        struct timespec ts = {0, BUSY_PAUSE_NS};
        nanosleep(&ts, NULL);
    } else {
        pthread_mutex_lock(&f->mu);
        /* a liar for good; an error or a dead peer a while */
        agent_p2p_avoid(f, pe->node, got == PEER_LIED ? -1.0 : PEER_FAILED_AVOID_S,
                        got == PEER_LIED || got == PEER_DEAD);
        pthread_mutex_unlock(&f->mu);
    }
    return rc;
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
        if (agent_mono_s() - f->t0 > FETCH_DEADLINE_S)
            rc = ts_err_set(&err, TS_EIO, "blob %s: not fetched within %.0f s", f->digest,
                            FETCH_DEADLINE_S);
        double ta = agent_mono_s();
        json_t *ans = rc ? NULL : agent_p2p_announce(w, false);
        agent_image_trace("announce %.3f s", agent_mono_s() - ta);
        int npeers = ans ? agent_p2p_peers_of(f, ans, peers) : 0;
        json_t *g = json_object_get(ans, "grant");
        int grant = json_is_integer(g) ? (int)json_integer_value(g) : -1;
        int who = -1, i = -1;
        char want[TS_IMAGE_DIGEST_MAX] = "";
        pthread_mutex_lock(&f->mu);
        if (!ans)
            f->st->no_tracker = true;
        else
            f->tracker_ok = agent_mono_s();
        /* a slow or restarting tracker is waited for a while, not taken for gone */
        bool lost = !ans && agent_mono_s() - f->tracker_ok > TRACKER_LOST_S;
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
        double idle_s = agent_mono_s() - f->last_new;
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
        pthread_mutex_unlock(&f->mu);
        if (rc) {
        } else if (i >= 0) {
            rc = from_peer(w, &peers[who], i, want, &err);
        } else if (grant >= 0) {
            rc = from_origin(w, grant, &err);
            i = grant;
        } else if (!agent_p2p_probe_holders(f, ans)) {
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
        if (i >= 0 && !rc)
            hash_advance(w);
    }
    free(peers);
    return NULL;
}

static int run(fetch *f, worker *ws, int nw, ts_err *err)
{
    f->t0 = f->last_new = f->tracker_ok = agent_mono_s();
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
    agent_image_trace("pieces all held (rc %d)", f->rc);
    if (f->rc) {
        if (err)
            *err = f->err;
        return f->rc;
    }
    if (whole_ok(&ws[0])) {
        agent_image_trace("whole blob checked");
        return 0;
    }
    /* a piece's hash lied (its first fetcher reported a wrong one): what came
     * from peers comes again from the registry */
    for (int i = 0; i < f->npieces; i++)
        if (!f->from_origin[i]) {
            long long off, len;
            agent_p2p_piece_span(f, i, &off, &len);
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
                 const ts_p2p_in_order *in_order, ts_p2p_stats *stats, ts_err *err)
{
    ts_p2p_stats none;
    fetch f = {.p = p, .digest = digest, .size = size, .fd = fd, .rate = rate_bytes_s,
               .st = stats ? stats : &none, .slot = -1, .origin = origin,
               .origin_ctx = origin_ctx, .in_order = in_order};
    memset(f.st, 0, sizeof *f.st);
    if (size <= 0)
        return ts_err_set(err, TS_EINVAL, "blob %s: size %lld", digest, size);
    f.npieces = (int)((size + TS_P2P_PIECE_BYTES - 1) / TS_P2P_PIECE_BYTES);
    pthread_mutex_init(&f.mu, NULL);
    pthread_mutex_init(&f.origin_mu, NULL);
    pthread_mutex_init(&f.hash_mu, NULL);
    gnutls_hash_hd_t whole;
    if (gnutls_hash_init(&whole, GNUTLS_DIG_SHA256) == 0)
        f.whole = whole;
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
            json_decref(agent_p2p_announce(&ws[0], true)); /* a whole holder from now on */
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
    pthread_mutex_destroy(&f.hash_mu);
    if (f.whole)
        gnutls_hash_deinit((gnutls_hash_hd_t)f.whole, NULL);
    free(f.have);
    free(f.busy);
    free(f.from_origin);
    free(f.report_hash);
    free(f.origin_busy);
    free(f.hash);
    return rc;
}
