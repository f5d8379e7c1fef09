/*
 * p2p_peers.c - a fetch's dealings with its peers (p2p_fetch.h): one piece
 * asked of a holder, and what its answer means (a piece, busy, silent,
 * gone, lying, not holding it); which peers this node avoids and for how
 * long, and which of them it reports to the tracker (only those whose
 * failure is certain: a liar, a refused port, a layer no longer held; a
 * loaded live holder fails some transfers, and a report from each of its
 * askers would take it out for everyone); and the probe of grant holders
 * with no piece to serve, whom nobody else would find dead.
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

#include "agent/p2p_fetch.h"
#include "agent/clock.h"

#define PEER_TIMEOUT_S 60L
/* A holder not connected within this is taken as busy (its link full: the
 * SYN-ACK dropped behind its uploads) and another asked: two SYNs (the
 * second after 1 s), not three and 5 s. bench/image-p2p at 64 nodes: with
 * 5 s, 1,436 connects timed out, half the workers' time, last ready 72 s;
 * 1.5 s: 50.6 s; 0.5 s: 47.7 s for 40 % more CPU */
#define PEER_CONNECT_TIMEOUT_MS 1500L
#define PEER_LOW_SPEED_BYTES 16384L /* slower than this for PEER_LOW_SPEED_S: a dead peer */
#define PEER_LOW_SPEED_S 3L
#define PEER_BUSY_S 0.3             /* a holder sending its most (503): asked again after this */
/* Nothing to fetch: the nodes holding grants of missing pieces, with none
 * to serve (so nobody asks them), are probed this often, a connect each: a
 * refused port is a dead node, reported, and its grant goes at once rather
 * than after the tracker's 5-s hold */
#define PROBE_EVERY_S 0.5
#define PROBE_CONNECT_TIMEOUT_MS 1000L

bool agent_p2p_avoided(const fetch *f, const char *node)
{
    for (int i = 0; i < f->navoid; i++)
        if (!strcmp(f->avoid[i], node))
            return f->avoid_until[i] > agent_mono_s();
    return false;
}

/* Under f->mu: a holder sending its most (p2p_serve.c) is left alone a
 * moment; neither a fault nor reported. */
bool agent_p2p_peer_busy(const fetch *f, const char *node, double now)
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

void agent_p2p_note_busy(fetch *f, const char *node)
{
    f->busy_until[busy_slot(f, node)] = agent_mono_s() + PEER_BUSY_S;
}

/* Under f->mu: node's connect timed out again; its count in a row. */
int agent_p2p_note_silent(fetch *f, const char *node)
{
    int k = busy_slot(f, node);
    f->busy_until[k] = agent_mono_s() + PEER_BUSY_S;
    return ++f->silent[k];
}

void agent_p2p_note_answered(fetch *f, const char *node)
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
void agent_p2p_avoid(fetch *f, const char *node, double for_s, bool report)
{
    double until = for_s < 0 ? 1e300 : agent_mono_s() + for_s;
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
void agent_p2p_note_missing(fetch *f, const char *node)
{
    for (int i = 0; i < f->nmissing; i++)
        if (!strcmp(f->missing[i], node))
            return;
    if (f->nmissing < PEERS_AVOID_MAX)
        snprintf(f->missing[f->nmissing++], sizeof f->missing[0], "%s", node);
}

/* One piece from a peer into w->buf: PEER_OK when it has the tracker's hash
 * (want, copied by the caller); PEER_MISSING when the peer says it does
 * not hold it (404: the tracker's word is older than the peer's store, e.g.
 * the peer restarted or evicted it); PEER_BUSY: it sends its most now
 * (503); PEER_SILENT: not connected within PEER_CONNECT_TIMEOUT_MS;
 * PEER_DEAD: its port refuses; PEER_FAILED: another error, a peer
 * that died mid-transfer or went too slow; PEER_LIED: bad bytes. */
int agent_p2p_from_peer(worker *w, const peer *pe, int i, const char *want)
{
    fetch *f = w->f;
    long long off, len;
    agent_p2p_piece_span(f, i, &off, &len);
    char url[TS_P2P_URL_MAX + 200], hn[128], ht[220];
    snprintf(url, sizeof url, "%s/p2p/v1/blobs/%s/%d", pe->url, f->digest, i);
    snprintf(hn, sizeof hn, "X-Tessera-Node: %s", f->p->node);
    snprintf(ht, sizeof ht, "X-Tessera-P2P-Token: %s", pe->token);
    struct curl_slist *h = curl_slist_append(NULL, hn);
    h = curl_slist_append(h, ht);
    agent_p2p_curl_begin(w, url, h, "http");
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
    agent_p2p_sha(w->buf, w->buf_n, got);
    if (strcmp(got, want) != 0) {
        pthread_mutex_lock(&f->mu);
        f->st->refetched += len; /* a lying peer: its bytes are thrown away */
        pthread_mutex_unlock(&f->mu);
        return PEER_LIED;
    }
    return PEER_OK;
}

/* Reads the tracker's peers into peers (pointing into ans); their count. */
int agent_p2p_peers_of(const fetch *f, json_t *ans, peer *peers)
{
    int npeers = 0;
    json_t *pe;
    size_t k;
    json_array_foreach(json_object_get(ans, "peers"), k, pe) {
        const char *n = json_string_value(json_object_get(pe, "node"));
        const char *u = json_string_value(json_object_get(pe, "url"));
        const char *h = json_string_value(json_object_get(pe, "have"));
        const char *t = json_string_value(json_object_get(pe, "token"));
        /* a peer without its own token (a tracker before them) would refuse */
        if (!n || !u || !h || !t || strlen(t) >= P2P_TOKEN_MAX || npeers >= PEERS_MAX ||
            strlen(h) != (size_t)f->npieces ||
            strlen(n) >= sizeof peers[0].node || strlen(u) >= sizeof peers[0].url ||
            !strcmp(n, f->p->node))
            continue;
        snprintf(peers[npeers].node, sizeof peers[npeers].node, "%s", n);
        snprintf(peers[npeers].url, sizeof peers[npeers].url, "%s", u);
        peers[npeers].have = h;
        peers[npeers].token = t;
        npeers++;
    }
    return npeers;
}

/* Nothing to fetch now: one worker at a time connects to the nodes the
 * tracker says hold grants of missing pieces (`granted`, those with no
 * piece to serve), at most every PROBE_EVERY_S; a refused port is a dead
 * node, reported as bad so that its grant goes now; silence counts as for
 * any holder. True if it probed (the wait is spent). */
bool agent_p2p_probe_holders(fetch *f, json_t *ans)
{
    pthread_mutex_lock(&f->mu);
    double now = agent_mono_s();
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
        bool skip = agent_p2p_avoided(f, node);
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
            agent_p2p_avoid(f, node, PEER_FAILED_AVOID_S, true);
        else if (cr == CURLE_OK)
            agent_p2p_note_answered(f, node);
        else if (agent_p2p_note_silent(f, node) >= PEER_SILENT_MAX)
            agent_p2p_avoid(f, node, PEER_FAILED_AVOID_S, true);
        pthread_mutex_unlock(&f->mu);
    }
    return true;
}
