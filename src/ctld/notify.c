/*
 * notify.c - webhooks of jobs' state changes (docs/job-spec.md "notify").
 *
 * A job whose spec has notify: {url, on} gets a POST of a small JSON
 * document when it starts, ends or fails, as on asks. The change is queued
 * where it is applied (under c->mu, never waiting: the queue is bounded, one
 * tenant holds at most half of it, and a message past that is dropped,
 * counted and said on stderr). NOTIFY_WORKERS threads of their own deliver,
 * never two messages of one tenant at once: a tenant whose receiver is slow
 * or never answers holds one worker and delays only its own messages, never
 * another tenant's, nor the controller. A delivery is tried NOTIFY_TRIES
 * times, each try at most NOTIFY_TIMEOUT_S; a failed one waits
 * NOTIFY_BACKOFF_S, doubling, before the next, in the queue, while the
 * workers deliver others; a 2xx answer is delivered. Of the messages that
 * may be tried, the oldest goes first; one job's go in their order. A call
 * connects only where webhook_dest.c allows (not the controller's own host,
 * a link-local address such as a cloud's instance metadata, unless
 * webhooks.allow admits it): one refused is not tried again.
 *
 * Signature: when the job's tenant has a tenant secret named NOTIFY_KEY
 * (docs/secrets.md), the body is signed with HMAC-SHA256 under it:
 * X-Tessera-Signature: sha256=<hex>. The key is read at delivery, on the
 * delivery thread, so a new key applies to the next message.
 *
 * Mail: notify.mail's addresses get a message through the SMTP relay of the
 * configuration (notify_mail.c), queued, tried and backed off as a webhook
 * is, by the same workers.
 */
#include <curl/curl.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "ctld/ctld.h"
#include "ctld/http.h"
#include "ctld/notify_mail.h"
#include "ctld/secrets.h"

#define NOTIFY_QUEUE_MAX 1024
#define NOTIFY_WORKERS 4
#define NOTIFY_TRIES 4
#define NOTIFY_BACKOFF_S 1.0
#define NOTIFY_TIMEOUT_S 5L
#define NOTIFY_KEY_NAME "NOTIFY_KEY"

typedef struct nmsg {
    char tenant[TS_STORE_NAME_MAX];
    int64_t job;
    char *url, *body;
    char *rcpt;       /* a mail to these addresses (comma-separated; url NULL), or NULL */
    uint64_t seq;     /* its place in the order of arrival */
    double due;       /* monotonic: not tried before */
    int tries;
    bool busy;        /* a worker tries it now */
} nmsg;

struct ctld_notify {
    ctld *c;
    pthread_mutex_t mu;
    pthread_cond_t wake;
    nmsg *q[NOTIFY_QUEUE_MAX]; /* in no order: each pick looks at them all */
    int n, cap; /* cap <= NOTIFY_QUEUE_MAX: a test build may lower it */
    uint64_t seq;
    bool stop;
    int nthreads;
    pthread_t th[NOTIFY_WORKERS];
};

static double mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Aborts a transfer in flight when the controller stops. */
static int on_progress(void *p, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
    (void)a, (void)b, (void)c, (void)d;
    struct ctld_notify *N = p;
    pthread_mutex_lock(&N->mu);
    bool stop = N->stop;
    pthread_mutex_unlock(&N->mu);
    return stop ? 1 : 0;
}

static size_t on_body(char *p, size_t size, size_t n, void *u)
{
    (void)p, (void)u;
    return size * n; /* the receiver's answer is not read */
}

/* "sha256=<hex>" of body under the tenant's key into out; false when the
 * tenant has no key (or it cannot be read). */
static bool sign(struct ctld_notify *N, const nmsg *m, char *out, size_t size)
{
    char *key = NULL;
    size_t klen = 0;
    ts_err err;
    if (!N->c->secrets ||
        ctld_secrets_reveal(N->c->secrets, m->tenant, "", NOTIFY_KEY_NAME, &key, &klen, &err) != 0)
        return false;
    unsigned char mac[32];
    int rc = gnutls_hmac_fast(GNUTLS_MAC_SHA256, key, klen, m->body, strlen(m->body), mac);
    ctld_secret_free(key, klen);
    if (rc != 0 || size < 7 + 64 + 1)
        return false;
    memcpy(out, "sha256=", 7);
    for (int i = 0; i < 32; i++)
        snprintf(out + 7 + 2 * i, 3, "%02x", mac[i]);
    return true;
}

/* The address a webhook connects to, checked first (webhook_dest.c). */
typedef struct dest_check {
    const ctld_config *cfg;
    bool refused;
    char why[200];
} dest_check;

static curl_socket_t open_checked(void *p, curlsocktype purpose, struct curl_sockaddr *a)
{
    dest_check *d = p;
    (void)purpose;
    if (!ctld_webhook_dest_ok(d->cfg, &a->addr, d->why, sizeof d->why)) {
        d->refused = true;
        return CURL_SOCKET_BAD;
    }
    return socket(a->family, a->socktype, a->protocol);
}

/* One try: true on a 2xx answer; *refused when its address may not be
 * reached (why in d: it is not tried again). */
static bool post(struct ctld_notify *N, CURL *h, const nmsg *m, const char *sig, long *status,
                 dest_check *d)
{
    struct curl_slist *hd = curl_slist_append(NULL, "Content-Type: application/json");
    char line[96];
    if (sig) {
        snprintf(line, sizeof line, "X-Tessera-Signature: %s", sig);
        hd = curl_slist_append(hd, line);
    }
    curl_easy_reset(h);
    curl_easy_setopt(h, CURLOPT_URL, m->url);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, m->body);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, NOTIFY_TIMEOUT_S);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, NOTIFY_TIMEOUT_S);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, N);
    curl_easy_setopt(h, CURLOPT_OPENSOCKETFUNCTION, open_checked);
    curl_easy_setopt(h, CURLOPT_OPENSOCKETDATA, d);
    CURLcode rc = curl_easy_perform(h);
    *status = 0;
    if (rc == CURLE_OK)
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
    curl_slist_free_all(hd);
    return rc == CURLE_OK && *status >= 200 && *status < 300;
}

static void nmsg_free(nmsg *m)
{
    free(m->url);
    free(m->body);
    free(m->rcpt);
    free(m);
}

/* Under N->mu: the oldest message that may be tried now (due, no worker on
 * it, none on another of its tenant's, none of its job's before it), or -1
 * with *next the soonest due. */
static int pick(struct ctld_notify *N, double now, double *next)
{
    const char *busy[NOTIFY_WORKERS];
    int nb = 0, best = -1;
    for (int i = 0; i < N->n && nb < NOTIFY_WORKERS; i++)
        if (N->q[i]->busy)
            busy[nb++] = N->q[i]->tenant;
    *next = 0.0;
    for (int i = 0; i < N->n; i++) {
        const nmsg *m = N->q[i];
        bool held = m->busy;
        for (int k = 0; k < nb && !held; k++)
            held = strcmp(busy[k], m->tenant) == 0;
        for (int k = 0; k < N->n && !held; k++) /* one job's calls go in their order */
            held = N->q[k]->job == m->job && N->q[k]->seq < m->seq;
        if (held)
            continue;
        if (m->due > now) {
            *next = *next == 0.0 || m->due < *next ? m->due : *next;
            continue;
        }
        if (best < 0 || m->seq < N->q[best]->seq)
            best = i;
    }
    return best;
}

/* Under N->mu: waits for wake, or until the monotonic time t (0: none). */
static void wait_until(struct ctld_notify *N, double t)
{
    if (t == 0.0) {
        pthread_cond_wait(&N->wake, &N->mu);
        return;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    double left = t - mono_now();
    left = left > 0 ? left : 0;
    long ns = ts.tv_nsec + (long)((left - (long)left) * 1e9);
    ts.tv_sec += (time_t)left + ns / 1000000000L;
    ts.tv_nsec = ns % 1000000000L;
    pthread_cond_timedwait(&N->wake, &N->mu, &ts);
}

/* One try of m: true when delivered; *refused: never to be tried again
 * (why says so). */
static bool try_once(struct ctld_notify *N, CURL *h, const nmsg *m, long *status, char *why,
                     size_t wn, bool *refused)
{
    char sig[80];
    *refused = false;
    if (m->rcpt)
        return ctld_mail_send(h, &N->c->cfg, m->rcpt, m->body, NOTIFY_TIMEOUT_S, on_progress, N,
                              why, wn);
    dest_check d = {.cfg = &N->c->cfg};
    bool ok = post(N, h, m, sign(N, m, sig, sizeof sig) ? sig : NULL, status, &d);
    if (d.refused) {
        *refused = true;
        snprintf(why, wn, "%s", d.why);
    }
    return ok;
}

static void given_up(struct ctld_notify *N, const nmsg *m, long status, const char *why)
{
    __atomic_add_fetch(&N->c->m.notify_failed, 1, __ATOMIC_RELAXED);
    if (m->rcpt)
        fprintf(stderr, "tesserad: job %lld: mail to %s not delivered through %s (%s)\n",
                (long long)m->job, m->rcpt, N->c->cfg.mail_relay, why);
    else if (why[0])
        fprintf(stderr, "tesserad: job %lld: webhook %s not delivered: %s\n", (long long)m->job,
                m->url, why);
    else
        fprintf(stderr, "tesserad: job %lld: webhook %s not delivered (last answer %ld)\n",
                (long long)m->job, m->url, status);
}

static void *notify_main(void *p)
{
    struct ctld_notify *N = p;
    CURL *h = curl_easy_init();
    pthread_mutex_lock(&N->mu);
    while (h && !N->stop) {
        double next;
        int k = pick(N, mono_now(), &next);
        if (k < 0) {
            wait_until(N, next);
            continue;
        }
        nmsg *m = N->q[k];
        m->busy = true;
        pthread_mutex_unlock(&N->mu);
        long status = 0;
        char why[CURL_ERROR_SIZE] = "";
        bool refused;
        bool ok = try_once(N, h, m, &status, why, sizeof why, &refused);
        bool last = !ok && (refused || m->tries + 1 >= NOTIFY_TRIES);
        if (ok)
            __atomic_add_fetch(&N->c->m.notify_delivered, 1, __ATOMIC_RELAXED);
        else if (last)
            given_up(N, m, status, why);
        pthread_mutex_lock(&N->mu);
        m->busy = false;
        if (ok || last) {
            for (int i = 0; i < N->n; i++)
                if (N->q[i] == m) {
                    N->q[i] = N->q[--N->n];
                    break;
                }
            nmsg_free(m);
        } else { /* its next try waits its backoff; the others go meanwhile */
            m->due = mono_now() + NOTIFY_BACKOFF_S * (double)(1 << m->tries);
            m->tries++;
        }
        pthread_cond_broadcast(&N->wake);
    }
    pthread_mutex_unlock(&N->mu);
    if (h)
        curl_easy_cleanup(h);
    return NULL;
}

int ctld_notify_open(ctld *c)
{
    struct ctld_notify *N = calloc(1, sizeof *N);
    if (!N)
        return TS_ENOMEM;
    N->c = c;
    N->cap = NOTIFY_QUEUE_MAX;
#ifdef TS_STORE_FAULTS_ENV /* test builds: a small queue, to see it fill */
    const char *cap = getenv("TESSERAD_NOTIFY_QUEUE");
    if (cap && atoi(cap) >= 1 && atoi(cap) < NOTIFY_QUEUE_MAX)
        N->cap = atoi(cap);
#endif
    pthread_mutex_init(&N->mu, NULL);
    pthread_cond_init(&N->wake, NULL);
    c->notify = N;
    return 0;
}

void ctld_notify_close(ctld *c)
{
    struct ctld_notify *N = c->notify;
    if (!N)
        return;
    pthread_mutex_lock(&N->mu);
    N->stop = true;
    pthread_cond_broadcast(&N->wake);
    int nt = N->nthreads;
    pthread_mutex_unlock(&N->mu);
    for (int i = 0; i < nt; i++)
        pthread_join(N->th[i], NULL);
    for (int i = 0; i < N->n; i++)
        nmsg_free(N->q[i]);
    pthread_cond_destroy(&N->wake);
    pthread_mutex_destroy(&N->mu);
    free(N);
    c->notify = NULL;
}

/* Under c->mu: queues one message (taking url, rcpt and body, even when it
 * is dropped); never waits. */
static void enqueue(ctld *c, const ts_job_row *to, char *url, char *rcpt, char *body)
{
    struct ctld_notify *N = c->notify;
    pthread_mutex_lock(&N->mu);
    /* one tenant holds at most half the queue: a tenant whose receivers never
     * answer (or who sends many on purpose) leaves room for the others' */
    /* the queue's cap counts the calls not yet tried; one being tried or
     * waiting for its next try still holds a slot of the array */
    int mine = 0, queued = 0, share = N->cap / 2 > 1 ? N->cap / 2 : 1;
    for (int i = 0; i < N->n; i++) {
        bool untried = N->q[i]->tries == 0 && !N->q[i]->busy;
        queued += untried;
        mine += untried && strcmp(N->q[i]->tenant, to->tenant) == 0;
    }
    bool ok = body && (url || rcpt) && !N->stop && N->n < NOTIFY_QUEUE_MAX && queued < N->cap &&
              mine < share;
    while (ok && N->nthreads < NOTIFY_WORKERS &&
           pthread_create(&N->th[N->nthreads], NULL, notify_main, N) == 0)
        N->nthreads++;
    nmsg *m = ok && N->nthreads > 0 ? calloc(1, sizeof *m) : NULL;
    ok = m != NULL;
    if (ok) {
        snprintf(m->tenant, sizeof m->tenant, "%s", to->tenant);
        m->job = to->id;
        m->url = url;
        m->rcpt = rcpt;
        m->body = body;
        m->seq = N->seq++;
        N->q[N->n++] = m;
        pthread_cond_signal(&N->wake);
    }
    pthread_mutex_unlock(&N->mu);
    if (!ok) {
        free(url);
        free(rcpt);
        free(body);
        uint64_t d = __atomic_add_fetch(&c->m.notify_dropped, 1, __ATOMIC_RELAXED);
        if ((d == 1 || d % 100 == 0) && mine >= share) /* said once, then every 100th */
            fprintf(stderr, "tesserad: job %lld: %s dropped, tenant %s already has %d waiting "
                    "in the queue of %d, the most one tenant may (%llu dropped so far)\n",
                    (long long)to->id, rcpt ? "mail" : "webhook", to->tenant, mine, N->cap,
                    (unsigned long long)d);
        else if (d == 1 || d % 100 == 0)
            fprintf(stderr, "tesserad: job %lld: %s dropped, its queue of %d is full "
                    "(%llu dropped so far)\n", (long long)to->id, rcpt ? "mail" : "webhook",
                    N->cap, (unsigned long long)d);
    }
}

void ctld_notify_change(ctld *c, const cjob *j, int from, const ts_job_row *to, double now)
{
    struct ctld_notify *N = c->notify;
    const ts_job_spec *s = j->spec;
    bool mail = s && s->notify_mail && c->cfg.mail_relay[0];
    if (s && s->notify_mail && !c->cfg.mail_relay[0] && from != to->state &&
        ts_job_state_terminal(to->state)) /* said once per job, where an admin reads */
        fprintf(stderr, "tesserad: job %lld: no mail to %s: this controller has no mail relay "
                "(mail in tesserad.yaml)\n", (long long)to->id, s->notify_mail);
    if (!N || !s || (!s->notify_url && !mail) || from == to->state)
        return;
    const char *event = NULL;
    bool failed = to->state == TS_JOB_FAILED || to->state == TS_JOB_TIMEOUT;
    if (to->state == TS_JOB_RUNNING && (s->notify_on & TS_NOTIFY_START))
        event = "start";
    else if (ts_job_state_terminal(to->state) && !ts_job_state_terminal(from) &&
             ((s->notify_on & TS_NOTIFY_END) || (failed && (s->notify_on & TS_NOTIFY_FAIL))))
        event = failed ? "fail" : "end";
    if (!event)
        return;
    json_error_t je;
    json_t *res = to->result_json ? json_loads(to->result_json, 0, &je) : NULL;
    json_t *code = res ? json_object_get(res, "exit_code") : NULL;
    if (s->notify_url) {
        json_t *doc = json_pack("{s:I,s:s,s:s,s:s,s:s,s:s,s:O,s:f}", "job", (json_int_t)to->id,
                                "tenant", to->tenant, "user", to->owner, "name", to->name,
                                "event", event, "state", ts_job_state_name(to->state),
                                "exit_code", json_is_integer(code) ? code : json_null(), "time",
                                now);
        char *body = doc ? json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
        json_decref(doc);
        enqueue(c, to, strdup(s->notify_url), NULL, body);
    }
    if (mail)
        enqueue(c, to, NULL, strdup(s->notify_mail),
                ctld_mail_message(&c->cfg, s->notify_mail, event, to, code, now));
    json_decref(res);
}
