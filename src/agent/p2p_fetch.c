/*
 * p2p_fetch.c - one blob fetched piece by piece from peers and the
 * registry (p2p.h has the scheme).
 *
 * A loop, bounded by FETCH_DEADLINE_S: announce what this node holds to the
 * tracker (with the sha256 of pieces it took from the registry, and the
 * peers it gave up on), read back the peers, their pieces, the pieces'
 * hashes and perhaps a grant; then fetch one piece: the rarest piece a
 * peer not avoided holds (ties broken by this node's own offset, so that
 * a gang's nodes start at different pieces), else the granted piece from
 * the registry, else wait a little (others are fetching the rest from the
 * registry). Waiting longer than STALL_S without a new piece, or a tracker
 * that does not answer, and the registry gives the next missing piece.
 * Each piece from a peer must have the tracker's hash; the file as a whole
 * must have the blob's digest, else every piece that came from peers is
 * fetched again from the registry.
 */
#define _GNU_SOURCE
#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <gnutls/crypto.h>
#include <jansson.h>

#include "agent/p2p_internal.h"

#define FETCH_DEADLINE_S 900.0
#define STALL_S 4.0                 /* no new piece this long: the registry gives one */
#define WAIT_STEP_NS (150 * 1000 * 1000L)
#define TRACKER_TIMEOUT_MS 5000L
#define PEER_TIMEOUT_S 60L
#define PEER_LOW_SPEED_BYTES 16384L /* slower than this for PEER_LOW_SPEED_S: a dead peer */
#define PEER_LOW_SPEED_S 3L
#define PEERS_AVOID_MAX 64
#define PEERS_MAX 64
#define TRACKER_ANSWER_MAX_BYTES (8 << 20)

typedef struct peer {
    char node[64];
    char url[TS_P2P_URL_MAX];
    const char *have; /* npieces of '0'/'1', in the tracker's answer */
} peer;

typedef struct fetch {
    ts_p2p *p;
    const char *digest;
    long long size;
    int npieces;
    int fd, slot;
    CURL *c;
    char *buf;                  /* one piece */
    size_t buf_n, buf_max;
    uint8_t *have, *from_origin;
    char (*hash)[TS_IMAGE_DIGEST_MAX]; /* per piece, from the tracker or our own */
    uint8_t *report_hash;       /* ours, not yet told to the tracker */
    char avoid[PEERS_AVOID_MAX][64];
    int navoid, nreport_bad;    /* avoid[0..nreport_bad) not yet told to the tracker */
    long long rate;
    char token[160];
    ts_p2p_stats *st;
} fetch;

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static size_t sink(char *b, size_t sz, size_t n, void *ctx)
{
    fetch *f = ctx;
    size_t len = sz * n;
    if (f->buf_n + len > f->buf_max)
        return 0;
    memcpy(f->buf + f->buf_n, b, len);
    f->buf_n += len;
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
            return true;
    return false;
}

static void avoid(fetch *f, const char *node)
{
    if (avoided(f, node) || f->navoid >= PEERS_AVOID_MAX)
        return;
    /* the not-yet-reported ones are the first nreport_bad */
    memmove(f->avoid[1], f->avoid[0], (size_t)f->navoid * sizeof f->avoid[0]);
    snprintf(f->avoid[0], sizeof f->avoid[0], "%s", node);
    f->navoid++;
    f->nreport_bad++;
    f->st->bad_peers++;
}

/* Announces; *ans the tracker's answer (owned by the caller), NULL when it
 * did not answer. */
static json_t *announce(fetch *f, bool done)
{
    ts_p2p *p = f->p;
    char ctl[512], url[700];
    pthread_mutex_lock(&p->mu);
    snprintf(ctl, sizeof ctl, "%s", p->controller);
    pthread_mutex_unlock(&p->mu);
    if (!ctl[0])
        return NULL;
    snprintf(url, sizeof url, "%s/v1/agent/p2p", ctl);
    char *have = malloc((size_t)f->npieces + 1);
    if (!have)
        return NULL;
    for (int i = 0; i < f->npieces; i++)
        have[i] = done || f->have[i] ? '1' : '0';
    have[f->npieces] = 0;
    json_t *hashes = json_object(), *bad = json_array();
    for (int i = 0; i < f->npieces; i++)
        if (f->report_hash[i]) {
            char k[16];
            snprintf(k, sizeof k, "%d", i);
            json_object_set_new(hashes, k, json_string(f->hash[i]));
        }
    for (int i = 0; i < f->nreport_bad; i++)
        json_array_append_new(bad, json_string(f->avoid[i]));
    json_t *body = json_pack("{s:s,s:s,s:s,s:I,s:s,s:o,s:o}", "node", p->node, "url", p->url,
                             "blob", f->digest, "size", (json_int_t)f->size, "have", have,
                             "hashes", hashes, "bad", bad);
    free(have);
    char *txt = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    if (!txt)
        return NULL;
    char auth[320];
    snprintf(auth, sizeof auth, "Authorization: Bearer %s", p->token);
    struct curl_slist *h = curl_slist_append(NULL, auth);
    h = curl_slist_append(h, "Content-Type: application/json");
    char *ans = malloc(TRACKER_ANSWER_MAX_BYTES);
    f->buf_n = 0;
    char *saved = f->buf;
    size_t saved_max = f->buf_max;
    f->buf = ans;
    f->buf_max = ans ? TRACKER_ANSWER_MAX_BYTES - 1 : 0;
    curl_easy_reset(f->c);
    curl_easy_setopt(f->c, CURLOPT_URL, url);
    curl_easy_setopt(f->c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(f->c, CURLOPT_POSTFIELDS, txt);
    curl_easy_setopt(f->c, CURLOPT_WRITEFUNCTION, sink);
    curl_easy_setopt(f->c, CURLOPT_WRITEDATA, f);
    curl_easy_setopt(f->c, CURLOPT_TIMEOUT_MS, TRACKER_TIMEOUT_MS);
    curl_easy_setopt(f->c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(f->c, CURLOPT_PROTOCOLS_STR, "http,https");
    if (p->ca_file[0])
        curl_easy_setopt(f->c, CURLOPT_CAINFO, p->ca_file);
    CURLcode cr = ans ? curl_easy_perform(f->c) : CURLE_OUT_OF_MEMORY;
    long status = 0;
    curl_easy_getinfo(f->c, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(h);
    explicit_bzero(auth, sizeof auth);
    free(txt);
    json_t *j = NULL;
    if (cr == CURLE_OK && status == 200)
        j = json_loadb(ans, f->buf_n, 0, NULL);
    free(ans);
    f->buf = saved;
    f->buf_max = saved_max;
    f->buf_n = 0;
    if (!json_is_object(j)) {
        json_decref(j);
        return NULL;
    }
    /* told: what we reported need not be said again */
    memset(f->report_hash, 0, (size_t)f->npieces);
    f->nreport_bad = 0;
    const char *key = json_string_value(json_object_get(j, "key"));
    if (key && strlen(key) < P2P_KEY_HEX_MAX) {
        pthread_mutex_lock(&p->mu);
        snprintf(p->key, sizeof p->key, "%s", key);
        pthread_mutex_unlock(&p->mu);
    }
    const char *tok = json_string_value(json_object_get(j, "token"));
    if (tok)
        snprintf(f->token, sizeof f->token, "%s", tok);
    json_t *hs = json_object_get(j, "hashes");
    for (int i = 0; i < f->npieces && json_is_array(hs); i++) {
        const char *h1 = json_string_value(json_array_get(hs, (size_t)i));
        if (h1 && !f->from_origin[i] && ts_image_digest_ok(h1))
            snprintf(f->hash[i], sizeof f->hash[i], "%s", h1);
    }
    return j;
}

/* One piece from a peer into f->buf; true when it has the tracker's hash. */
static bool from_peer(fetch *f, const peer *pe, int i)
{
    long long off, len;
    piece_span(f, i, &off, &len);
    char url[TS_P2P_URL_MAX + 200], hn[128], ht[220];
    snprintf(url, sizeof url, "%s/p2p/v1/blobs/%s/%d", pe->url, f->digest, i);
    snprintf(hn, sizeof hn, "X-Tessera-Node: %s", f->p->node);
    snprintf(ht, sizeof ht, "X-Tessera-P2P-Token: %s", f->token);
    struct curl_slist *h = curl_slist_append(NULL, hn);
    h = curl_slist_append(h, ht);
    f->buf_n = 0;
    curl_easy_reset(f->c);
    curl_easy_setopt(f->c, CURLOPT_URL, url);
    curl_easy_setopt(f->c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(f->c, CURLOPT_WRITEFUNCTION, sink);
    curl_easy_setopt(f->c, CURLOPT_WRITEDATA, f);
    curl_easy_setopt(f->c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(f->c, CURLOPT_PROTOCOLS_STR, "http");
    curl_easy_setopt(f->c, CURLOPT_CONNECTTIMEOUT, 5L);
    curl_easy_setopt(f->c, CURLOPT_TIMEOUT, PEER_TIMEOUT_S);
    curl_easy_setopt(f->c, CURLOPT_LOW_SPEED_LIMIT, PEER_LOW_SPEED_BYTES);
    curl_easy_setopt(f->c, CURLOPT_LOW_SPEED_TIME, PEER_LOW_SPEED_S);
    if (f->rate > 0)
        curl_easy_setopt(f->c, CURLOPT_MAX_RECV_SPEED_LARGE, (curl_off_t)f->rate);
    CURLcode cr = curl_easy_perform(f->c);
    long status = 0;
    curl_easy_getinfo(f->c, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(h);
    if (cr != CURLE_OK || status != 200 || (long long)f->buf_n != len)
        return false;
    char got[TS_IMAGE_DIGEST_MAX];
    sha(f->buf, f->buf_n, got);
    if (strcmp(got, f->hash[i]) != 0) {
        f->st->refetched += len; /* a lying peer: its bytes are thrown away */
        return false;
    }
    return true;
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
    f->have[i] = 1;
    pthread_mutex_lock(&f->p->mu);
    if (f->slot >= 0)
        f->p->active[f->slot].have[i] = 1; /* served to peers from now on */
    pthread_mutex_unlock(&f->p->mu);
    return 0;
}

static int from_origin(fetch *f, int i, ts_p2p_origin_fn origin, void *octx, ts_err *err)
{
    long long off, len;
    piece_span(f, i, &off, &len);
    int rc = origin(octx, off, len, f->buf, err);
    if (rc)
        return rc;
    sha(f->buf, (size_t)len, f->hash[i]);
    f->report_hash[i] = 1;
    f->from_origin[i] = 1;
    f->st->from_origin += len;
    return put_piece(f, i, f->buf, len, err);
}

/* The piece to take from a peer: the rarest missing one with a hash whose
 * holders are not all avoided; -1: none. *who: the holder chosen. */
static int pick(fetch *f, const peer *peers, int npeers, int start, int *who)
{
    int best = -1, best_n = PEERS_MAX + 1;
    for (int k = 0; k < f->npieces; k++) {
        int i = (start + k) % f->npieces;
        if (f->have[i] || !f->hash[i][0])
            continue;
        int n = 0, chosen = -1;
        for (int q = 0; q < npeers; q++)
            if (peers[q].have[i] == '1' && !avoided(f, peers[q].node)) {
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

void ts_p2p_release(ts_p2p *p, const char *digest, bool held)
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
    (void)held; /* ts_p2p_fetch announced the whole blob once it was verified */
}

/* The whole file's digest against the blob's. */
static bool whole_ok(fetch *f)
{
    gnutls_hash_hd_t h;
    if (gnutls_hash_init(&h, GNUTLS_DIG_SHA256) != 0)
        return false;
    for (int i = 0; i < f->npieces; i++) {
        long long off, len, got = 0;
        piece_span(f, i, &off, &len);
        while (got < len) {
            ssize_t k = pread(f->fd, f->buf + got, (size_t)(len - got), off + got);
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
        gnutls_hash(h, f->buf, (size_t)len);
    }
    unsigned char d[32];
    gnutls_hash_deinit(h, d);
    char got[TS_IMAGE_DIGEST_MAX];
    char *q = got + sprintf(got, "sha256:");
    for (int i = 0; i < 32; i++)
        q += sprintf(q, "%02x", d[i]);
    return strcmp(got, f->digest) == 0;
}

static int run(fetch *f, ts_p2p_origin_fn origin, void *octx, ts_err *err)
{
    double t0 = mono_s(), last_new = t0;
    /* this node's own starting point among the pieces */
    unsigned start = 0;
    for (const char *s = f->p->node; *s; s++)
        start = start * 31u + (unsigned char)*s;
    int held = 0;
    while (held < f->npieces) {
        if (mono_s() - t0 > FETCH_DEADLINE_S)
            return ts_err_set(err, TS_EIO, "blob %s: not fetched within %.0f s", f->digest,
                              FETCH_DEADLINE_S);
        json_t *ans = announce(f, false);
        peer peers[PEERS_MAX];
        int npeers = 0, grant = -1;
        if (!ans) {
            f->st->no_tracker = true;
        } else {
            json_t *ps = json_object_get(ans, "peers"), *pe;
            size_t k;
            json_array_foreach(ps, k, pe) {
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
            json_t *g = json_object_get(ans, "grant");
            grant = json_is_integer(g) ? (int)json_integer_value(g) : -1;
            if (grant >= f->npieces || (grant >= 0 && f->have[grant]))
                grant = -1;
        }
        int who = -1;
        int i = pick(f, peers, npeers, (int)(start % (unsigned)f->npieces), &who);
        int rc = 0;
        if (i >= 0) {
            long long off, len;
            piece_span(f, i, &off, &len);
            if (from_peer(f, &peers[who], i)) {
                f->st->from_peers += len;
                rc = put_piece(f, i, f->buf, len, err);
                held++;
                last_new = mono_s();
            } else {
                avoid(f, peers[who].node); /* bad bytes, an error or a dead peer */
            }
        } else if (grant >= 0 || !ans || mono_s() - last_new > STALL_S) {
            if (grant < 0) /* no tracker, or a stall: the next missing piece */
                for (int k = 0; k < f->npieces && grant < 0; k++) {
                    int c = (int)((start + (unsigned)k) % (unsigned)f->npieces);
                    if (!f->have[c])
                        grant = c;
                }
            rc = from_origin(f, grant, origin, octx, err);
            held += rc == 0;
            last_new = mono_s();
        } else {
            struct timespec ts = {0, WAIT_STEP_NS};
            nanosleep(&ts, NULL);
        }
        json_decref(ans);
        if (rc)
            return rc;
    }
    if (whole_ok(f))
        return 0;
    /* a piece's hash lied (its first fetcher reported a wrong one): what came
     * from peers comes again from the registry */
    for (int i = 0; i < f->npieces; i++)
        if (!f->from_origin[i]) {
            long long off, len;
            piece_span(f, i, &off, &len);
            f->st->refetched += len;
            f->st->from_peers -= len;
            int rc = from_origin(f, i, origin, octx, err);
            if (rc)
                return rc;
        }
    if (!whole_ok(f))
        return ts_err_set(err, TS_EINVAL, "blob %s: the registry's bytes do not have its "
                          "digest: discarded", f->digest);
    return 0;
}

int ts_p2p_fetch(ts_p2p *p, const char *digest, long long size, int fd,
                 ts_p2p_origin_fn origin, void *origin_ctx, long long rate_bytes_s,
                 ts_p2p_stats *stats, ts_err *err)
{
    ts_p2p_stats none;
    fetch f = {.p = p, .digest = digest, .size = size, .fd = fd, .rate = rate_bytes_s,
               .st = stats ? stats : &none, .slot = -1};
    memset(f.st, 0, sizeof *f.st);
    if (size <= 0)
        return ts_err_set(err, TS_EINVAL, "blob %s: size %lld", digest, size);
    f.npieces = (int)((size + TS_P2P_PIECE_BYTES - 1) / TS_P2P_PIECE_BYTES);
    f.buf_max = TS_P2P_PIECE_BYTES;
    f.buf = malloc((size_t)f.buf_max + 1); /* the origin's reader ends what it read with a NUL */
    f.have = calloc((size_t)f.npieces, 1);
    f.from_origin = calloc((size_t)f.npieces, 1);
    f.report_hash = calloc((size_t)f.npieces, 1);
    f.hash = calloc((size_t)f.npieces, sizeof *f.hash);
    f.c = curl_easy_init();
    int rc;
    if (!f.buf || !f.have || !f.from_origin || !f.report_hash || !f.hash || !f.c) {
        rc = ts_err_set(err, TS_ENOMEM, "out of memory");
    } else {
        f.slot = register_active(&f);
        rc = run(&f, origin, origin_ctx, err);
        if (rc == 0) {
            json_decref(announce(&f, true)); /* a whole holder from now on */
        } else if (f.slot >= 0) {
            ts_p2p_release(p, digest, false);
        }
    }
    if (f.c)
        curl_easy_cleanup(f.c);
    free(f.buf);
    free(f.have);
    free(f.from_origin);
    free(f.report_hash);
    free(f.hash);
    return rc;
}
