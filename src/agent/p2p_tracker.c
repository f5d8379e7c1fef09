/*
 * p2p_tracker.c - what an agent tells the controller's tracker (POST
 * /v1/agent/p2p, ctld/p2p.c) as it fetches a blob: the pieces it holds,
 * the sha256 of those it took from the registry, the pieces it is taking
 * from the registry now, the peers it gave up on or found without the
 * layer; the answer's peers, hashes, token and key are taken in here.
 *
 * And, on a thread of its own, that this node still serves (POST
 * /v1/agent/p2p/live every BEAT_EVERY_MS while the tracker names it as a
 * holder, or an announce of a fetch came since the last beat): a node
 * that powers off drops its askers' SYNs without an answer, as a busy one
 * does, and each asker took 20 silent connects (30 s) to report it; the
 * tracker stops naming a node whose beats stopped within seconds, for
 * every asker at once. A beat is a small request a second per serving
 * node; a node the tracker does not name stays quiet.
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

#include "agent/agent_internal.h"
#include "agent/p2p_fetch.h"
#include "io/body.h"

#define TRACKER_TIMEOUT_MS 5000L
#define TRACKER_ANSWER_MAX_BYTES (8 << 20)
#define BEAT_EVERY_MS 1000L         /* the tracker's LIVE_EVERY_MS (ctld/p2p.c) */
#define BEAT_TIMEOUT_MS 2000L       /* a beat later than this is late anyway */
#define BEAT_ANSWER_MAX_BYTES 4096

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
json_t *agent_p2p_announce(worker *w, bool done)
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
    w->buf_max = ans ? TRACKER_ANSWER_MAX_BYTES - 1 : 0;
    agent_p2p_curl_begin(w, url, h, "http,https");
    curl_easy_setopt(w->c, CURLOPT_POSTFIELDS, txt);
    curl_easy_setopt(w->c, CURLOPT_TIMEOUT_MS, TRACKER_TIMEOUT_MS);
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
    if (j) { /* the tracker knows this node now: the beats go on while it names it */
        pthread_mutex_lock(&p->mu);
        p->beat_due = true;
        pthread_mutex_unlock(&p->mu);
    }
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
    json_t *hs = json_object_get(j, "hashes");
    for (int i = 0; i < f->npieces && json_is_array(hs); i++) {
        const char *h1 = json_string_value(json_array_get(hs, (size_t)i));
        if (h1 && !f->from_origin[i] && ts_image_digest_ok(h1))
            snprintf(f->hash[i], sizeof f->hash[i], "%s", h1);
    }
    pthread_mutex_unlock(&f->mu);
    return j;
}

/* One beat on c (kept: its connection is reused, no SYN to lose behind a
 * full link); the tracker's word on whether it names this node, or
 * *holder unchanged when it did not answer (a tracker that does not know
 * the beats, 404, names nobody by them: false). */
static void beat(ts_p2p *p, CURL *c, const char *ctl, bool *holder)
{
    char url[700], auth[320];
    snprintf(url, sizeof url, "%s/v1/agent/p2p/live", ctl);
    pthread_mutex_lock(&p->mu);
    json_t *body = json_pack("{s:s,s:s}", "node", p->node, "url", p->url);
    snprintf(auth, sizeof auth, "Authorization: Bearer %s", p->token);
    pthread_mutex_unlock(&p->mu);
    char *txt = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    struct curl_slist *h = curl_slist_append(NULL, auth);
    h = curl_slist_append(h, "Content-Type: application/json");
    h = curl_slist_append(h, "Expect:");
    io_body a = {.max = BEAT_ANSWER_MAX_BYTES - 1};
    if (txt && h) {
        curl_easy_reset(c);
        agent_curl_call(c, url, h, io_body_sink, &a, "http,https", p->ca_file);
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, txt);
        curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, BEAT_TIMEOUT_MS);
        long status = 0;
        CURLcode cr = curl_easy_perform(c);
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
        json_t *j = cr == CURLE_OK && status == 200 && a.p ? json_loadb(a.p, a.len, 0, NULL)
                                                          : NULL;
        if (j)
            *holder = json_is_true(json_object_get(j, "holder"));
        else if (cr == CURLE_OK && (status == 404 || status == 405))
            *holder = false;
        json_decref(j);
    }
    curl_slist_free_all(h);
    explicit_bzero(auth, sizeof auth);
    free(txt);
    free(a.p);
}

static void *beats(void *arg)
{
    ts_p2p *p = arg;
    CURL *c = curl_easy_init();
    pthread_mutex_lock(&p->mu);
    while (!p->beat_stop) {
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_nsec += BEAT_EVERY_MS * 1000000L;
        until.tv_sec += until.tv_nsec / 1000000000L;
        until.tv_nsec %= 1000000000L;
        char ctl[512];
        snprintf(ctl, sizeof ctl, "%s", p->controller);
        bool go = c && ctl[0] && (p->beat_holder || p->beat_due), holder = p->beat_holder;
        p->beat_due = false;
        if (go) {
            pthread_mutex_unlock(&p->mu);
            beat(p, c, ctl, &holder);
            pthread_mutex_lock(&p->mu);
            p->beat_holder = holder;
        }
        /* every BEAT_EVERY_MS from the start of the last beat: a slow
         * answer does not space them out */
        while (!p->beat_stop && pthread_cond_timedwait(&p->beat_cv, &p->mu, &until) == 0) {
        }
    }
    pthread_mutex_unlock(&p->mu);
    if (c)
        curl_easy_cleanup(c);
    return NULL;
}

bool agent_p2p_beats_start(ts_p2p *p)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    int rc = pthread_cond_init(&p->beat_cv, &ca);
    pthread_condattr_destroy(&ca);
    if (rc != 0)
        return false;
    /* one beat at the start: a restarted node the tracker still names
     * beats on, one it does not stays quiet */
    p->beat_due = true;
    p->beat_started = pthread_create(&p->beat_thread, NULL, beats, p) == 0;
    if (!p->beat_started)
        pthread_cond_destroy(&p->beat_cv);
    return p->beat_started;
}

void agent_p2p_beats_stop(ts_p2p *p)
{
    if (!p->beat_started)
        return;
    pthread_mutex_lock(&p->mu);
    p->beat_stop = true;
    pthread_cond_signal(&p->beat_cv);
    pthread_mutex_unlock(&p->mu);
    pthread_join(p->beat_thread, NULL);
    pthread_cond_destroy(&p->beat_cv);
    p->beat_started = false;
}
