/*
 * ha.c - tesserad's roles when several controllers share one PostgreSQL
 * store (docs/ha.md): a standby keeps its configuration and an HTTP front
 * that answers every API request with 503 and the leader's advertised URL;
 * it tries to take the lease (store_lease.c) every ha.renew, and once it
 * does, main.c opens the controller exactly as a start does (the restore
 * from the store) with the store fenced at the new epoch.
 *
 * The leader renews every ha.renew on a thread of its own. A watchdog thread
 * ends the process (status 75) when no renewal has succeeded for
 * ha.lease less a margin (CTLD_HA_MARGIN_FRACTION of it), measured on this
 * host's monotonic clock from the moment the last successful renewal was
 * sent: the database set that lease's expiry later than that moment, so the
 * process stops acting before any standby can take the lease. Exiting is
 * the simple correct way to stop acting: nothing of the controller's
 * memory outlives its lease, and a supervisor starts it again as a standby.
 * A deposed leader that has not noticed yet cannot commit anyway: its store
 * is fenced at its epoch.
 */
#include "ctld/ha.h"

#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "tessera/store.h"

/* Status the process ends with when it lost the lease (EX_TEMPFAIL). */
#define CTLD_HA_EXIT_LOST 75

static struct {
    bool on;
    double lease_s, renew_s, margin_s;
    char holder[TS_LEASE_HOLDER_MAX];
    char url[TS_LEASE_URL_MAX]; /* ours, advertised */
    ts_store *ls;               /* the lease's store (its own sessions) */
    struct MHD_Daemon *front;
    bool metrics_public;
    pthread_mutex_t mu; /* guards leader_url, seen_epoch, blind */
    char leader_url[TS_LEASE_URL_MAX]; /* "" = unknown */
    int64_t seen_epoch;
    bool blind;                /* the last try could not read the lease (the store's trouble) */
    _Atomic int leader;        /* 1 once we hold the lease */
    _Atomic int64_t epoch;     /* ours, once leader */
    _Atomic int64_t deadline_ns; /* monotonic: stop acting after this */
    _Atomic int stopping;
    pthread_t renewer, watchdog;
    bool threads;
    pthread_mutex_t wmu;
    pthread_cond_t wcv;
} H = {.mu = PTHREAD_MUTEX_INITIALIZER, .wmu = PTHREAD_MUTEX_INITIALIZER,
       .wcv = PTHREAD_COND_INITIALIZER};

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

bool ctld_ha_on(void) { return H.on; }

int ctld_ha_check(const ctld_config *cfg, ts_err *err)
{
    if (!cfg->ha_on)
        return 0;
    const char *u = cfg->store_url;
    if (strncmp(u, "postgresql://", 13) != 0 && strncmp(u, "postgres://", 11) != 0)
        return ts_err_set(err, TS_EINVAL,
                          "ha: several controllers need PostgreSQL (store: postgresql://...); "
                          "this store is SQLite, which one controller owns alone: remove ha: "
                          "or move the store to PostgreSQL (docs/ha.md)");
    return 0;
}

/* ---- the standby front ---- */

static enum MHD_Result front_send(struct MHD_Connection *conn, int status, const char *type,
                                  const char *body)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_MUST_COPY);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, "Content-Type", type);
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    if (status == 503)
        MHD_add_response_header(r, "Retry-After", "1");
    enum MHD_Result rc = MHD_queue_response(conn, (unsigned)status, r);
    MHD_destroy_response(r);
    return rc;
}

static enum MHD_Result front_handle(void *cls, struct MHD_Connection *conn, const char *url,
                                    const char *method, const char *version,
                                    const char *upload_data, size_t *upload_data_size,
                                    void **con_cls)
{
    (void)cls;
    (void)method;
    (void)version;
    (void)upload_data;
    static int seen;
    if (!*con_cls) {
        *con_cls = &seen; /* the headers are in; the body (if any) follows */
        return MHD_YES;
    }
    if (*upload_data_size) {
        *upload_data_size = 0; /* read and dropped: a standby stores nothing */
        return MHD_YES;
    }
    char leader[TS_LEASE_URL_MAX];
    pthread_mutex_lock(&H.mu);
    snprintf(leader, sizeof leader, "%s", H.leader_url);
    int64_t epoch = H.seen_epoch;
    bool blind = H.blind;
    pthread_mutex_unlock(&H.mu);
    char text[2 * TS_LEASE_URL_MAX];
    if (strcmp(url, "/healthz") == 0)
        return front_send(conn, 200, "text/plain", "ok\n");
    if (strcmp(url, "/readyz") == 0) {
        /* the store's trouble itself is in the log: it names the database */
        snprintf(text, sizeof text, "standby; leader: %s\n",
                 leader[0] ? leader
                 : blind   ? "unknown: this controller cannot read the store's lease (its log "
                             "says why)"
                           : "unknown");
        return front_send(conn, 503, "text/plain", text);
    }
    if (strcmp(url, "/ui") == 0 || strncmp(url, "/ui/", 4) == 0) {
        /* a person at a bookmark: a page, not JSON (the leader's URL is
         * the lease's, written by a controller of the set) */
        char page[4 * TS_LEASE_URL_MAX];
        if (leader[0] && !strpbrk(leader, "<>\"'&"))
            snprintf(page, sizeof page, "<!doctype html><title>Tessera: a standby</title>"
                     "<p>This controller is a standby. The console is on the leader: "
                     "<a href=\"%s/ui/\">%s/ui/</a></p>\n", leader, leader);
        else
            snprintf(page, sizeof page, "<!doctype html><title>Tessera: a standby</title>"
                     "<p>This controller is a standby%s; try another controller of the set."
                     "</p>\n", blind ? " that cannot read the store's lease" : " and no leader "
                     "holds the lease now");
        return front_send(conn, 503, "text/html; charset=utf-8", page);
    }
    if (strcmp(url, "/metrics") == 0 && H.metrics_public) {
        snprintf(text, sizeof text,
                 "# HELP tessera_ha_role This controller's role (high availability).\n"
                 "# TYPE tessera_ha_role gauge\n"
                 "tessera_ha_role{role=\"leader\"} 0\n"
                 "tessera_ha_role{role=\"standby\"} 1\n"
                 "# HELP tessera_ha_epoch The lease's epoch (the leader's; as last seen on a "
                 "standby).\n"
                 "# TYPE tessera_ha_epoch gauge\n"
                 "tessera_ha_epoch %lld\n",
                 (long long)epoch);
        return front_send(conn, 200, "text/plain; version=0.0.4", text);
    }
    json_t *doc = json_pack(
        "{s:{s:s, s:s, s:o}}", "error", "code", "standby", "message",
        leader[0] ? "this tesserad is a standby: send requests to the leader"
        : blind   ? "this tesserad is a standby that cannot read the store's lease, so it "
                    "cannot say who leads: use another controller, or retry"
                  : "this tesserad is a standby and no leader holds the lease now: retry",
        "leader", leader[0] ? json_string(leader) : json_null());
    char *body = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
    json_decref(doc);
    enum MHD_Result rc = front_send(conn, 503, "application/json", body ? body : "{}");
    free(body);
    return rc;
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = NULL;
    size_t len = 0;
    for (;;) {
        char *nb = realloc(buf, len + 65537);
        if (!nb) {
            free(buf);
            fclose(f);
            return NULL;
        }
        buf = nb;
        size_t k = fread(buf + len, 1, 65536, f);
        len += k;
        if (k == 0)
            break;
    }
    fclose(f);
    buf[len] = '\0';
    return buf;
}

static int front_start(const ctld_config *cfg, ts_err *err)
{
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO;
    struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
    if (inet_pton(AF_INET, cfg->listen_addr, &s4->sin_addr) == 1) {
        s4->sin_family = AF_INET;
        s4->sin_port = htons((uint16_t)cfg->listen_port);
    } else if (inet_pton(AF_INET6, cfg->listen_addr, &s6->sin6_addr) == 1) {
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons((uint16_t)cfg->listen_port);
        flags |= MHD_USE_IPv6;
    } else {
        return ts_err_set(err, TS_EINVAL, "listen: \"%s\" is not an IPv4 or IPv6 address",
                          cfg->listen_addr);
    }
    char *cert = NULL, *key = NULL;
    if (cfg->tls_cert[0]) {
        cert = slurp(cfg->tls_cert);
        key = slurp(cfg->tls_key);
        if (!cert || !key) {
            free(cert);
            free(key);
            return ts_err_set(err, TS_EIO, "tls: cannot read %s or %s", cfg->tls_cert,
                              cfg->tls_key);
        }
        flags |= MHD_USE_TLS;
    }
    struct MHD_OptionItem tls_opts[] = {
        {cert ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, 0, cert},
        {cert ? MHD_OPTION_HTTPS_MEM_KEY : MHD_OPTION_END, 0, key},
        {MHD_OPTION_END, 0, NULL},
    };
    H.front = MHD_start_daemon(flags, (uint16_t)cfg->listen_port, NULL, NULL, front_handle, NULL,
                               MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
                               MHD_OPTION_CONNECTION_TIMEOUT, 10u, MHD_OPTION_CONNECTION_LIMIT,
                               1000u, MHD_OPTION_ARRAY, tls_opts, MHD_OPTION_END);
    int e = errno;
    free(cert);
    free(key);
    if (!H.front)
        return ts_err_set(err, TS_EIO, "listen %s:%d: cannot start the standby's HTTP server (%s)",
                          cfg->listen_addr, cfg->listen_port, strerror(e));
    return 0;
}

void ctld_ha_front_stop(void)
{
    if (H.front)
        MHD_stop_daemon(H.front);
    H.front = NULL;
}

/* ---- the leader's lease ---- */

static void lost(const char *why)
{
    fprintf(stderr, "tesserad: ha: stopping as leader of epoch %lld: %s; exiting (status %d) "
            "so that a supervisor starts this controller again as a standby\n",
            (long long)atomic_load(&H.epoch), why, CTLD_HA_EXIT_LOST);
    _exit(CTLD_HA_EXIT_LOST);
}

/* Waits s seconds or until ctld_ha_stop; true when stopping. */
static bool nap(double s)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t ns = ts.tv_nsec + (int64_t)(s * 1e9);
    ts.tv_sec += (time_t)(ns / 1000000000);
    ts.tv_nsec = (long)(ns % 1000000000);
    pthread_mutex_lock(&H.wmu);
    while (!atomic_load(&H.stopping) &&
           pthread_cond_timedwait(&H.wcv, &H.wmu, &ts) != ETIMEDOUT) {
    }
    pthread_mutex_unlock(&H.wmu);
    return atomic_load(&H.stopping);
}

static void *renewer_main(void *arg)
{
    (void)arg;
    int64_t epoch = atomic_load(&H.epoch);
    bool failing = false;
    for (;;) {
        int64_t t0 = mono_ns();
        ts_err err;
        ts_err_clear(&err);
        int rc = ts_store_lease_renew(H.ls, H.holder, epoch, H.lease_s, &err);
        if (atomic_load(&H.stopping))
            return NULL;
        if (rc == 0) {
            atomic_store(&H.deadline_ns, t0 + (int64_t)((H.lease_s - H.margin_s) * 1e9));
            if (failing)
                fprintf(stderr, "tesserad: ha: lease renewed again (epoch %lld)\n",
                        (long long)epoch);
            failing = false;
        } else if (rc == TS_ECONFLICT) {
            lost(err.msg);
        } else if (!failing) {
            fprintf(stderr, "tesserad: ha: cannot renew the lease (retrying every %.1f s; "
                    "giving up %.1f s after the last renewal): %s\n", H.renew_s,
                    H.lease_s - H.margin_s, err.msg);
            failing = true;
        }
        double left = H.renew_s - (double)(mono_ns() - t0) * 1e-9;
        if (nap(left > 0 ? left : 0))
            return NULL;
    }
}

static void *watchdog_main(void *arg)
{
    (void)arg;
    while (!nap(0.05)) {
        if (mono_ns() > atomic_load(&H.deadline_ns)) {
            char why[160];
            snprintf(why, sizeof why,
                     "the lease was not renewed for %.1f s (ha.lease %.1f s less the margin "
                     "%.1f s): it may be taken by a standby soon",
                     H.lease_s - H.margin_s, H.lease_s, H.margin_s);
            lost(why);
        }
    }
    return NULL;
}

/* ---- standing by ---- */

static void note_leader(const ts_lease_info *li, bool blind)
{
    pthread_mutex_lock(&H.mu);
    snprintf(H.leader_url, sizeof H.leader_url, "%s", li && li->remaining_s > 0 ? li->url : "");
    if (li)
        H.seen_epoch = li->epoch;
    H.blind = blind;
    pthread_mutex_unlock(&H.mu);
}

int ctld_ha_standby(ctld_config *cfg, const sigset_t *set, ts_err *err)
{
    int rc = ctld_ha_check(cfg, err);
    if (rc || !cfg->ha_on)
        return rc;
    H.on = true;
    H.lease_s = cfg->ha_lease_s;
    H.renew_s = cfg->ha_renew_s;
    H.margin_s = cfg->ha_lease_s * CTLD_HA_MARGIN_FRACTION;
    H.metrics_public = cfg->metrics_public;
    if (cfg->ha_advertise_url[0])
        snprintf(H.url, sizeof H.url, "%s", cfg->ha_advertise_url);
    else
        snprintf(H.url, sizeof H.url, "%s://%s%s%s:%d", cfg->tls_cert[0] ? "https" : "http",
                 strchr(cfg->listen_addr, ':') ? "[" : "", cfg->listen_addr,
                 strchr(cfg->listen_addr, ':') ? "]" : "", cfg->listen_port);
    char host[64] = "host";
    gethostname(host, sizeof host - 1);
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    snprintf(H.holder, sizeof H.holder, "%.63s/%d/%lx", host, (int)getpid(),
             (unsigned long)(now.tv_nsec ^ (now.tv_sec << 20)));
    /* who leads, read before the front answers, so its first answers name
     * the leader rather than "no leader" while the store is being opened
     * (the loop below retries an open that fails here) */
    ts_err oe;
    ts_lease_info first;
    if (ts_store_open(cfg->store_url, &H.ls, &oe) != 0)
        H.ls = NULL;
    else if (ts_store_lease_read(H.ls, &first, NULL) == 0)
        note_leader(&first, false);
    if ((rc = front_start(cfg, err)) != 0)
        return rc;
    fprintf(stderr, "tesserad: ha: standby on %s:%d (advertising %s, lease %.1f s, renew %.1f "
            "s), holder id %s\n", cfg->listen_addr, cfg->listen_port, H.url, H.lease_s,
            H.renew_s, H.holder);
    char last[TS_ERR_MSG_MAX] = "";
    int64_t said_ns = 0;
    for (;;) {
        ts_err e;
        ts_err_clear(&e);
        int64_t epoch = 0;
        int64_t t0 = mono_ns();
        rc = H.ls ? 0 : ts_store_open(cfg->store_url, &H.ls, &e);
        if (rc == 0)
            rc = ts_store_lease_acquire(H.ls, H.holder, H.url, H.lease_s, &epoch, &e);
        if (rc == 0) {
            atomic_store(&H.epoch, epoch);
            atomic_store(&H.deadline_ns, t0 + (int64_t)((H.lease_s - H.margin_s) * 1e9));
            atomic_store(&H.leader, 1);
            ts_lease_info li = {.epoch = epoch, .remaining_s = H.lease_s};
            snprintf(li.url, sizeof li.url, "%s", H.url);
            note_leader(&li, false);
            cfg->ha_epoch = epoch;
            if (pthread_create(&H.renewer, NULL, renewer_main, NULL) != 0 ||
                pthread_create(&H.watchdog, NULL, watchdog_main, NULL) != 0)
                lost("cannot start the lease threads");
            H.threads = true;
            fprintf(stderr, "tesserad: ha: took the lease: leader of epoch %lld\n",
                    (long long)epoch);
            return 0;
        }
        ts_lease_info li;
        if (rc == TS_ECONFLICT && ts_store_lease_read(H.ls, &li, NULL) == 0)
            note_leader(&li, false);
        else
            note_leader(NULL, rc != TS_ECONFLICT);
        /* each new trouble at once, the same one again once a minute: a
         * standby that can never read the store must not look fine */
        int64_t now_ns = mono_ns();
        if (rc != TS_ECONFLICT &&
            (strcmp(last, e.msg) != 0 || now_ns - said_ns > (int64_t)60 * 1000000000)) {
            fprintf(stderr, "tesserad: ha: standby: cannot read the lease: %s\n", e.msg);
            said_ns = now_ns;
        }
        snprintf(last, sizeof last, "%s", rc == TS_ECONFLICT ? "" : e.msg);
        if (rc != TS_ECONFLICT && H.ls && rc != TS_EIO) {
            ctld_ha_front_stop();
            ts_store_close(H.ls);
            H.ls = NULL;
            return rc; /* not the database being away: a mistake to report */
        }
        double left = H.renew_s - (double)(mono_ns() - t0) * 1e-9;
        struct timespec ts = {0, 0};
        if (left > 0) {
            ts.tv_sec = (time_t)left;
            ts.tv_nsec = (long)((left - (double)ts.tv_sec) * 1e9);
        }
        int sig = sigtimedwait(set, NULL, &ts);
        if (sig > 0) {
            fprintf(stderr, "tesserad: signal %d, stopping (standby)\n", sig);
            ctld_ha_front_stop();
            ts_store_close(H.ls);
            H.ls = NULL;
            return 1;
        }
    }
}

void ctld_ha_stop(void)
{
    if (!H.on)
        return;
    ctld_ha_front_stop();
    pthread_mutex_lock(&H.wmu);
    atomic_store(&H.stopping, 1);
    pthread_cond_broadcast(&H.wcv);
    pthread_mutex_unlock(&H.wmu);
    if (H.threads) {
        pthread_join(H.renewer, NULL);
        pthread_join(H.watchdog, NULL);
        H.threads = false;
    }
    if (H.ls && atomic_load(&H.leader)) {
        ts_err err;
        if (ts_store_lease_release(H.ls, H.holder, atomic_load(&H.epoch), &err) != 0)
            fprintf(stderr, "tesserad: ha: could not end the lease (a standby takes over once "
                    "it expires): %s\n", err.msg);
        else
            fprintf(stderr, "tesserad: ha: lease of epoch %lld ended\n",
                    (long long)atomic_load(&H.epoch));
    }
    ts_store_close(H.ls);
    H.ls = NULL;
}

void ctld_ha_metrics(char *buf, size_t cap)
{
    if (!H.on || !cap) {
        if (cap)
            buf[0] = '\0';
        return;
    }
    int lead = atomic_load(&H.leader);
    snprintf(buf, cap,
             "# HELP tessera_ha_role This controller's role (high availability).\n"
             "# TYPE tessera_ha_role gauge\n"
             "tessera_ha_role{role=\"leader\"} %d\n"
             "tessera_ha_role{role=\"standby\"} %d\n"
             "# HELP tessera_ha_epoch The lease's epoch (the leader's; as last seen on a "
             "standby).\n"
             "# TYPE tessera_ha_epoch gauge\n"
             "tessera_ha_epoch %lld\n",
             lead, !lead, (long long)atomic_load(&H.epoch));
}
