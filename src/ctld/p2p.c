/*
 * p2p.c - the tracker of image blobs shared between agents (docs/images.md
 * "Peer-to-peer", src/agent/p2p.h for the agent's side).
 *
 * POST /v1/agent/p2p (a node credential): a node fetching a blob says which
 * of its pieces it holds, the sha256 of the pieces it took from the
 * registry, the peers it gave up on; the answer names the peers holding
 * pieces of it (their URL and which pieces), each piece's hash as first
 * reported, a token the peers accept from this node for this blob, the key
 * this node checks its own peers' tokens with, and perhaps a grant: the
 * one piece this node should fetch from the registry, because nobody holds
 * it and nobody else holds a grant of it (a grant lasts CLAIM_S, renewed by
 * each announce of its node), at most REGISTRY_STREAMS_PER_BLOB of them at
 * once, and none to a node that alone holds a piece another fetcher lacks
 * (ALONE_HELD_MAX: what its death would cost the registry again). So a
 * gang's nodes take each piece from the
 * registry about once (the grant of a node that went silent goes to
 * another node) and the rest from each other. A peer reported bad by a
 * node is left out of every answer for that blob for BAN_S, or until it
 * announces holding none of it (it restarted); one reported missing (it
 * said it does not hold what it was named for) is named again once it
 * announces the blob. The answer also names the nodes holding grants with
 * no piece to serve (granted), which waiting nodes probe: nobody else would
 * find such a node dead.
 *
 * POST /v1/agent/p2p/live: a node that holds pieces the tracker knows of
 * says every LIVE_EVERY_MS that it still serves (its fetches' announces
 * count as well). A node that beats and has gone silent for LIVE_S is not
 * named, its pieces count as held by nobody and its grants are free, until
 * it speaks again: a powered-off node drops its askers' SYNs without an
 * answer, which looks like a busy node to each of them (20 silent connects,
 * 30 s, before one reports it); its silence here is found in seconds and
 * for every node at once. A node that never beat (an agent from before the
 * beats) is judged as before, by its askers' reports.
 *
 * The table lives in memory only (a restarted controller learns it again
 * from the next announcements): at most BLOBS_MAX blobs, the least
 * recently announced one forgotten first, under its own mutex, never held
 * while anything waits on the network or the store.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <gnutls/crypto.h>

#include "ctld/ctld.h"
#include "ctld/http.h"
#include "tessera/image_ref.h"
#include "tessera/p2p_proto.h"

#define BLOB_BYTES_MAX (1LL << 40)
#define BLOBS_MAX 256
#define CLAIM_S 5.0            /* a grant's hold on its piece, renewed by its node's announces */
#define CLAIM_GRACE_S 1.0      /* a grant not yet named among its node's fetches */
#define CLAIMS_PER_NODE 1      /* an agent takes one piece at a time from the registry */
/* Pieces of one blob coming from the registry at once. Two, not one per
 * asking node: the registry's link split ten ways has every piece out only
 * at the end (3.2 s for the bench's image); two at a time, the first piece
 * is out after a fifth of that and spreads among the peers while the rest
 * comes, and the registry's link never waits for the next grant. */
#define REGISTRY_STREAMS_PER_BLOB 2
/* Pieces a node may hold that nobody else holds, while a live node fetching
 * the blob lacks them, and still be granted more from the registry. A node
 * granted piece after piece outruns its own upload: what it alone holds
 * grows, and its death sends all of that to the registry again
 * (bench/image-p2p, a peer killed as it fetches from the registry: 0.4x of
 * the image taken by it, 0.2x lost, whatever the piece size). Held at one,
 * the next grant goes to another node while its piece is copied, and a
 * death costs the registry at most that piece and the one being fetched. */
#define ALONE_HELD_MAX 1
/* A node lacking pieces counts as fetching the blob while it announces it
 * (each of its streams does before each piece); one that stopped (its
 * fetch failed, it serves other blobs) must not hold others' grants back */
#define FETCHING_S 10.0
#define BAN_S 60.0             /* a peer reported bad is left out this long */
#define TOKEN_S 600            /* a token's life */
#define KEY_BYTES 32
#define PEERS_ANSWER_MAX 48
#define URL_MAX 256
/* A node beats this often while it holds pieces the tracker knows of, and
 * is taken for gone after LIVE_S without a word: two beats lost or late
 * (a full shaped link delays them; a loaded tracker answers late) are not
 * yet a death */
#define LIVE_EVERY_MS 1000
#define LIVE_S 3.0

typedef struct p2p_blob {
    char digest[TS_IMAGE_DIGEST_MAX]; /* "": a free slot */
    long long size;
    int npieces;
    double used_s;
    char (*hash)[TS_IMAGE_DIGEST_MAX];
    int *claim_node;           /* -1: none */
    double *claim_until, *claim_at; /* claim_at: when granted */
    uint8_t **have;            /* per node: NULL, or npieces of 0/1 */
    double *banned_until;      /* per node */
    double *announced_s;       /* per node: its last announce of this blob */
    void *block;               /* the one allocation the arrays above lie in */
} p2p_blob;

struct ctld_p2p {
    pthread_mutex_t mu;
    int nnodes;
    char (*url)[URL_MAX];      /* per node, as last announced */
    double *seen_s;            /* per node: its last announce or beat */
    bool *beats;               /* per node: it beats (judged by its silence) */
    void *per_node;            /* the one allocation of url, seen_s and beats */
    p2p_blob blobs[BLOBS_MAX];
    unsigned char key[KEY_BYTES];
    char key_hex[2 * KEY_BYTES + 1];
};

int ctld_p2p_open(ctld *c)
{
    struct ctld_p2p *T = calloc(1, sizeof *T);
    if (!T)
        return TS_ENOMEM;
    T->nnodes = c->cluster->nnodes;
    size_t nn = (size_t)(T->nnodes > 0 ? T->nnodes : 1);
    /* one block, widest members first so that each stays aligned */
    char *m = T->per_node = calloc(nn, sizeof *T->seen_s + sizeof *T->url + sizeof *T->beats);
    if (!m || gnutls_rnd(GNUTLS_RND_KEY, T->key, sizeof T->key) != 0) {
        free(m);
        free(T);
        return TS_ENOMEM;
    }
    T->seen_s = (double *)(void *)m;
    T->url = (char (*)[URL_MAX])(void *)(m + nn * sizeof *T->seen_s);
    T->beats = (bool *)(void *)(m + nn * (sizeof *T->seen_s + sizeof *T->url));
    for (int i = 0; i < KEY_BYTES; i++)
        sprintf(T->key_hex + 2 * i, "%02x", T->key[i]);
    pthread_mutex_init(&T->mu, NULL);
    c->p2p = T;
    return 0;
}

static void blob_free(p2p_blob *b, int nnodes)
{
    if (!b->digest[0])
        return;
    for (int n = 0; n < nnodes; n++)
        free(b->have[n]);
    free(b->block);
    memset(b, 0, sizeof *b);
}

/* A blob's arrays of np pieces (hash, claim_node, claim_until, claim_at) and
 * of nnodes nodes (have, banned_until, announced_s): one zeroed block, the
 * doubles first, then pointers, ints and bytes, so that each stays aligned. */
static bool blob_alloc(p2p_blob *b, int np, int nnodes)
{
    size_t p = (size_t)np, n = (size_t)nnodes;
    size_t doubles = 2 * p + 2 * n;
    char *m = calloc(1, doubles * sizeof(double) + n * sizeof *b->have +
                            p * (sizeof *b->claim_node + sizeof *b->hash) + 1);
    if (!m)
        return false;
    b->block = m;
    b->claim_until = (double *)(void *)m;
    b->claim_at = b->claim_until + p;
    b->banned_until = b->claim_at + p;
    b->announced_s = b->banned_until + n;
    m += doubles * sizeof(double);
    b->have = (uint8_t **)(void *)m;
    m += n * sizeof *b->have;
    b->claim_node = (int *)(void *)m;
    m += p * sizeof *b->claim_node;
    b->hash = (char (*)[TS_IMAGE_DIGEST_MAX])(void *)m;
    return true;
}

void ctld_p2p_close(ctld *c)
{
    struct ctld_p2p *T = c->p2p;
    if (!T)
        return;
    for (int i = 0; i < BLOBS_MAX; i++)
        blob_free(&T->blobs[i], T->nnodes);
    pthread_mutex_destroy(&T->mu);
    explicit_bzero(T->key, sizeof T->key);
    free(T->per_node);
    free(T);
    c->p2p = NULL;
}

/* The blob's entry, made (the least recently used one forgotten) when new;
 * NULL: out of memory. */
static p2p_blob *blob_get(struct ctld_p2p *T, const char *digest, long long size, double now)
{
    p2p_blob *lru = NULL;
    for (int i = 0; i < BLOBS_MAX; i++) {
        p2p_blob *b = &T->blobs[i];
        if (b->digest[0] && !strcmp(b->digest, digest))
            return b;
        if (!lru || !b->digest[0] || (lru->digest[0] && b->used_s < lru->used_s))
            lru = b;
    }
    blob_free(lru, T->nnodes);
    int np = (int)((size + TS_P2P_PIECE_BYTES - 1) / TS_P2P_PIECE_BYTES);
    if (!blob_alloc(lru, np, T->nnodes))
        return NULL;
    for (int i = 0; i < np; i++)
        lru->claim_node[i] = -1;
    snprintf(lru->digest, sizeof lru->digest, "%s", digest);
    lru->size = size;
    lru->npieces = np;
    lru->used_s = now;
    return lru;
}

/* Node q may be named: it beats and has not gone silent (or never beat). */
static bool live(const struct ctld_p2p *T, int q, double now)
{
    return !T->beats[q] || now - T->seen_s[q] <= LIVE_S;
}

static bool held_by_any(const struct ctld_p2p *T, const p2p_blob *b, int i, double now)
{
    for (int n = 0; n < T->nnodes; n++)
        if (b->have[n] && b->have[n][i] && b->banned_until[n] <= now && live(T, n, now))
            return true;
    return false;
}

/* Piece i's grant holds: its node asked within CLAIM_S and is not silent. */
static bool claimed(const struct ctld_p2p *T, const p2p_blob *b, int i, double now)
{
    return b->claim_node[i] >= 0 && b->claim_until[i] > now && live(T, b->claim_node[i], now);
}

/* The pieces n alone holds (no other live node named) that a live node
 * fetching the blob (announced within FETCHING_S) still lacks: copies that
 * would be lost with n. */
static int alone_held(const struct ctld_p2p *T, const p2p_blob *b, int n, double now)
{
    int alone = 0;
    for (int i = 0; i < b->npieces; i++) {
        if (!b->have[n][i])
            continue;
        bool other = false, wanted = false;
        for (int q = 0; q < T->nnodes && !other; q++) {
            if (q == n || !b->have[q] || b->banned_until[q] > now || !live(T, q, now))
                continue;
            other = b->have[q][i];
            wanted = wanted || (!b->have[q][i] && now - b->announced_s[q] <= FETCHING_S);
        }
        alone += !other && wanted;
    }
    return alone;
}

/* A piece for node n to take from the registry, or -1: its claims on
 * pieces it now holds are over; it holds at most CLAIMS_PER_NODE at once
 * (its other streams fetch from peers meanwhile). fetching: the pieces n
 * says it is taking from the registry now (NULL: it did not say, every
 * claim of a node that announces holds on); a claim n does not name there
 * CLAIM_GRACE_S after its grant is over: the answer carrying the grant was
 * lost (a timeout under load), and the claim would otherwise hold the
 * piece, and one of the blob's registry streams, for as long as n lives. */
static int grant(struct ctld_p2p *T, p2p_blob *b, int n, const uint8_t *fetching, double now)
{
    int live = 0;
    for (int i = 0; i < b->npieces; i++)
        if (b->claim_node[i] == n) {
            bool unused = fetching && !fetching[i] && now - b->claim_at[i] > CLAIM_GRACE_S;
            if (b->have[n][i] || b->claim_until[i] <= now || unused) {
                b->claim_node[i] = -1;
            } else { /* its node is alive: the claim holds on */
                b->claim_until[i] = now + CLAIM_S;
                live++;
            }
        }
    if (live >= CLAIMS_PER_NODE || alone_held(T, b, n, now) >= ALONE_HELD_MAX)
        return -1;
    int out = 0; /* other nodes' live claims */
    for (int i = 0; i < b->npieces; i++)
        out += claimed(T, b, i, now) && !held_by_any(T, b, i, now);
    if (out >= REGISTRY_STREAMS_PER_BLOB)
        return -1;
    for (int k = 0; k < b->npieces; k++) {
        int i = (n + k) % b->npieces; /* nodes start at different pieces */
        if (b->have[n][i] || held_by_any(T, b, i, now))
            continue;
        if (claimed(T, b, i, now))
            continue;
        b->claim_node[i] = n;
        b->claim_until[i] = now + CLAIM_S;
        b->claim_at[i] = now;
        return i;
    }
    return -1;
}

/* Node q reported bad (a refused port: it died; a liar; a layer it no
 * longer holds): left out of the answers for BAN_S, and its grants freed
 * now. A dead node's grant would otherwise hold its piece, and one of the
 * blob's REGISTRY_STREAMS_PER_BLOB, until CLAIM_S ran out with nobody
 * fetching it (bench/image-p2p, a peer killed while it fetches from the
 * registry). */
static void ban_node(p2p_blob *b, int q, double now)
{
    b->banned_until[q] = now + BAN_S;
    for (int i = 0; i < b->npieces; i++)
        if (b->claim_node[i] == q)
            b->claim_node[i] = -1;
}

/* The body checked; each error names the field. */
static bool parse(const json_t *in, const char **url, const char **digest, long long *size,
                  const char **have, ctld_reply *r)
{
    json_t *u = json_object_get(in, "url"), *d = json_object_get(in, "blob"),
           *s = json_object_get(in, "size"), *h = json_object_get(in, "have");
    if (!json_is_string(u) || strncmp(json_string_value(u), "http", 4) != 0 ||
        strlen(json_string_value(u)) >= URL_MAX) {
        ctld_reply_error(r, 400, "invalid", "url: an http(s) URL of at most %d bytes is "
                         "required", URL_MAX - 1);
        return false;
    }
    if (!json_is_string(d) || !ts_image_digest_ok(json_string_value(d))) {
        ctld_reply_error(r, 400, "invalid", "blob: a sha256:<64 hex> digest is required");
        return false;
    }
    if (!json_is_integer(s) || json_integer_value(s) < 1 ||
        json_integer_value(s) > BLOB_BYTES_MAX) {
        ctld_reply_error(r, 400, "invalid", "size: must be 1..%lld bytes", BLOB_BYTES_MAX);
        return false;
    }
    *url = json_string_value(u);
    *digest = json_string_value(d);
    *size = (long long)json_integer_value(s);
    long long np = (*size + TS_P2P_PIECE_BYTES - 1) / TS_P2P_PIECE_BYTES;
    const char *hv = json_string_value(h);
    bool ok = hv && (long long)strlen(hv) == np;
    for (long long i = 0; ok && i < np; i++)
        ok = hv[i] == '0' || hv[i] == '1';
    if (!ok) {
        ctld_reply_error(r, 400, "invalid", "have: one '0' or '1' per piece of %lld bytes "
                         "(%lld pieces) is required", TS_P2P_PIECE_BYTES, np);
        return false;
    }
    *have = hv;
    json_t *hs = json_object_get(in, "hashes"), *bad = json_object_get(in, "bad");
    if (hs && !json_is_object(hs)) {
        ctld_reply_error(r, 400, "invalid", "hashes: an object of piece index -> sha256 "
                         "digest is required");
        return false;
    }
    const char *k;
    json_t *v;
    json_object_foreach(hs, k, v) {
        char *end;
        long i = strtol(k, &end, 10);
        if (!*k || *end || i < 0 || i >= np || !json_is_string(v) ||
            !ts_image_digest_ok(json_string_value(v))) {
            ctld_reply_error(r, 400, "invalid", "hashes: each key must be a piece index "
                             "below %lld and each value a sha256:<64 hex> digest", np);
            return false;
        }
    }
    json_t *fe = json_object_get(in, "fetching"), *fv;
    size_t fi;
    bool fok = !fe || json_is_array(fe);
    json_array_foreach(fe, fi, fv) fok = fok && json_is_integer(fv) &&
                                         json_integer_value(fv) >= 0 &&
                                         json_integer_value(fv) < np;
    if (!fok) {
        ctld_reply_error(r, 400, "invalid", "fetching: an array of piece indexes below %lld "
                         "is required", np);
        return false;
    }
    if (bad && (!json_is_array(bad) || json_array_size(bad) > 1024)) {
        ctld_reply_error(r, 400, "invalid", "bad: an array of at most 1024 node names or "
                         "URLs is required");
        return false;
    }
    json_t *missing = json_object_get(in, "missing");
    if (missing && (!json_is_array(missing) || json_array_size(missing) > 1024)) {
        ctld_reply_error(r, 400, "invalid", "missing: an array of at most 1024 node names "
                         "or URLs is required");
        return false;
    }
    return true;
}

/* Node q, as named in a report (by URL or node name), or -1. */
static int named_node(const ctld *c, const struct ctld_p2p *T, const char *name)
{
    for (int q = 0; name && q < T->nnodes; q++)
        if (!strcmp(T->url[q], name) || !strcmp(c->cluster->nodes[q].name, name))
            return q;
    return -1;
}

/* The asker's reports on blob b: a node that lied or is gone (bad) is
 * banned; a node that said it does not hold what the tracker named
 * (missing: it restarted, or evicted the layer) has its word on the blob
 * withdrawn until it announces it again, and no ban: a restarted node
 * fetching the layer anew is a holder again at its next announce. */
static void take_reports(const ctld *c, struct ctld_p2p *T, p2p_blob *b, int n, json_t *in,
                         double now)
{
    size_t k;
    json_t *v;
    json_array_foreach(json_object_get(in, "bad"), k, v) {
        int q = named_node(c, T, json_string_value(v));
        if (q >= 0 && q != n)
            ban_node(b, q, now);
    }
    json_array_foreach(json_object_get(in, "missing"), k, v) {
        int q = named_node(c, T, json_string_value(v));
        if (q >= 0 && q != n && b->have[q])
            memset(b->have[q], 0, (size_t)b->npieces);
    }
}

#define TOKEN_TEXT_MAX 120

/* "<expiry>.<hex HMAC-SHA256>" over "caller|holder|digest|expiry" under the
 * tracker's key into out: caller may fetch the blob's pieces from holder
 * until expiry. A token good at one holder only: a node's port held by
 * another process while its agent is away (a host-network task) learns
 * nothing it could fetch elsewhere with. (No token good at any holder is
 * made any more, and agents refuse one.) */
static bool issue_token(const struct ctld_p2p *T, const char *caller, const char *holder,
                        const char *digest, long long expiry, char out[TOKEN_TEXT_MAX])
{
    char text[400];
    unsigned char mac[32];
    int len = snprintf(text, sizeof text, "%s|%s|%s|%lld", caller, holder, digest, expiry);
    if (len < 0 || (size_t)len >= sizeof text ||
        gnutls_hmac_fast(GNUTLS_MAC_SHA256, T->key, sizeof T->key, text, (size_t)len, mac) != 0)
        return false;
    char *q = out + snprintf(out, TOKEN_TEXT_MAX, "%lld.", expiry);
    for (int i = 0; i < 32; i++)
        q += sprintf(q, "%02x", mac[i]);
    return true;
}

static json_t *answer(const ctld *c, struct ctld_p2p *T, p2p_blob *b, int n, int g,
                      const char *caller, long long expiry)
{
    double now = b->used_s;
    json_t *peers = json_array(), *hashes = json_array();
    int listed = 0;
    for (int k = 1; k < T->nnodes && listed < PEERS_ANSWER_MAX; k++) {
        int q = (n + k) % T->nnodes; /* each node sees the peers from its own place on */
        const uint8_t *hv = b->have[q];
        if (!hv || b->banned_until[q] > now || !T->url[q][0] || !live(T, q, now))
            continue;
        bool useful = false;
        for (int i = 0; i < b->npieces && !useful; i++)
            useful = hv[i] && !b->have[n][i];
        if (!useful)
            continue;
        char *bits = malloc((size_t)b->npieces + 1);
        if (!bits)
            break;
        for (int i = 0; i < b->npieces; i++)
            bits[i] = hv[i] ? '1' : '0';
        bits[b->npieces] = 0;
        char tok[TOKEN_TEXT_MAX];
        if (issue_token(T, caller, c->cluster->nodes[q].name, b->digest, expiry, tok))
            json_array_append_new(peers, json_pack("{s:s,s:s,s:s,s:s}", "node",
                                                   c->cluster->nodes[q].name, "url", T->url[q],
                                                   "have", bits, "token", tok));
        free(bits);
        listed++;
    }
    for (int i = 0; i < b->npieces; i++)
        json_array_append_new(hashes, b->hash[i][0] ? json_string(b->hash[i]) : json_null());
    /* the nodes taking missing pieces from the registry with none to serve:
     * nobody asks them, so a waiting node probes them (a dead one's grant
     * would otherwise hold its piece for CLAIM_S) */
    json_t *granted = json_array();
    for (int q = 0; q < T->nnodes; q++) {
        bool claims = false, holds = false;
        for (int i = 0; i < b->npieces && !claims; i++)
            claims = b->claim_node[i] == q && claimed(T, b, i, now) && !b->have[n][i];
        for (int i = 0; claims && b->have[q] && i < b->npieces && !holds; i++)
            holds = b->have[q][i];
        if (claims && !holds && q != n && T->url[q][0] && b->banned_until[q] <= now)
            json_array_append_new(granted, json_pack("{s:s,s:s}", "node",
                                                     c->cluster->nodes[q].name, "url",
                                                     T->url[q]));
    }
    return json_pack("{s:I,s:o,s:o,s:i,s:s,s:o}", "piece_bytes",
                     (json_int_t)TS_P2P_PIECE_BYTES, "peers", peers, "hashes", hashes, "grant",
                     g, "key", T->key_hex, "granted", granted);
}

/* The body, when it is an object naming the caller's own node of the
 * cluster (*n); NULL after an error answer. */
static json_t *caller_body(const ctld *c, const ctld_request *rq, ctld_reply *r, int *n)
{
    json_t *in = ctld_agent_body(rq, r); /* a node credential's JSON object */
    if (!in)
        return NULL;
    *n = ctld_agent_node(c, rq, json_string_value(json_object_get(in, "node")), r);
    if (*n >= 0) /* the tracker's nodes are the cluster's */
        return in;
    json_decref(in);
    return NULL;
}

/* POST /v1/agent/p2p/live: the node still serves. The answer says whether
 * it holds pieces the tracker knows of (holder: go on beating every
 * every_ms; false: its silence would change nothing, so it may stop until
 * its next fetch). */
void ctld_p2p_live_route(ctld *c, const ctld_request *rq, ctld_reply *r)
{
    struct ctld_p2p *T = c->p2p;
    int n;
    json_t *in = caller_body(c, rq, r, &n);
    if (!in)
        return;
    json_t *u = json_object_get(in, "url");
    if (!json_is_string(u) || strncmp(json_string_value(u), "http", 4) != 0 ||
        strlen(json_string_value(u)) >= URL_MAX) {
        ctld_reply_error(r, 400, "invalid", "url: an http(s) URL of at most %d bytes is "
                         "required", URL_MAX - 1);
        json_decref(in);
        return;
    }
    bool holder = false;
    pthread_mutex_lock(&T->mu);
    T->seen_s[n] = ctld_now();
    T->beats[n] = true;
    snprintf(T->url[n], sizeof T->url[n], "%s", json_string_value(u));
    for (int k = 0; k < BLOBS_MAX && !holder; k++) {
        const p2p_blob *b = &T->blobs[k];
        for (int i = 0; b->digest[0] && b->have[n] && i < b->npieces && !holder; i++)
            holder = b->have[n][i];
    }
    pthread_mutex_unlock(&T->mu);
    json_decref(in);
    ctld_reply_json(r, 200, json_pack("{s:b,s:i}", "holder", holder, "every_ms",
                                      LIVE_EVERY_MS));
}

void ctld_p2p_route(ctld *c, const ctld_request *rq, ctld_reply *r)
{
    struct ctld_p2p *T = c->p2p;
    int n;
    json_t *in = caller_body(c, rq, r, &n);
    if (!in)
        return;
    const char *name = json_string_value(json_object_get(in, "node"));
    const char *url, *digest, *have;
    long long size;
    if (parse(in, &url, &digest, &size, &have, r)) {
        double now = ctld_now();
        long long expiry = (long long)time(NULL) + TOKEN_S;
        pthread_mutex_lock(&T->mu);
        p2p_blob *b = blob_get(T, digest, size, now);
        json_t *doc = NULL;
        if (b && b->size != size) {
            pthread_mutex_unlock(&T->mu);
            ctld_reply_error(r, 409, "conflict", "size: %lld differs from the %lld other "
                             "nodes announced for blob %s", size, b->size, digest);
            json_decref(in);
            return;
        }
        if (b && !b->have[n])
            b->have[n] = calloc((size_t)b->npieces, 1);
        if (b && b->have[n]) {
            b->used_s = now;
            b->announced_s[n] = now;
            T->seen_s[n] = now;
            snprintf(T->url[n], sizeof T->url[n], "%s", url);
            bool none = true;
            for (int i = 0; i < b->npieces; i++) {
                b->have[n][i] = have[i] == '1';
                none = none && !b->have[n][i];
            }
            if (none) /* a node starting the blob afresh (restarted): no longer banned */
                b->banned_until[n] = 0;
            const char *k;
            json_t *v;
            json_object_foreach(json_object_get(in, "hashes"), k, v) {
                char *end;
                long i = strtol(k, &end, 10);
                const char *h = json_string_value(v);
                if (!*end && i >= 0 && i < b->npieces && h && ts_image_digest_ok(h) &&
                    !b->hash[i][0])
                    snprintf(b->hash[i], sizeof b->hash[i], "%s", h);
            }
            take_reports(c, T, b, n, in, now);
            json_t *fe = json_object_get(in, "fetching"), *fv;
            size_t fi;
            uint8_t *fetching = fe ? calloc((size_t)b->npieces, 1) : NULL;
            json_array_foreach(fe, fi, fv) if (fetching)
                fetching[json_integer_value(fv)] = 1;
            int g = grant(T, b, n, fe && !fetching ? NULL : fetching, now);
            free(fetching);
            doc = answer(c, T, b, n, g, name, expiry);
        }
        pthread_mutex_unlock(&T->mu);
        if (doc)
            ctld_reply_json(r, 200, doc);
        else
            ctld_reply_error(r, 503, "unavailable", "out of memory");
    }
    json_decref(in);
}
