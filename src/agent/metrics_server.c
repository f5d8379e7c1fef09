/*
 * metrics_server.c - the HTTP side of metrics.h: libmicrohttpd with one
 * internal polling thread answering GET /metrics with agent_metrics_render,
 * the agent's task list (replaced by the agent loop under a mutex), and an
 * NVML event set of its own for DCGM_FI_DEV_XID_ERRORS: every event set
 * receives each event once, so reading ours does not take Xids from the
 * health monitor's. Events are drained when a page is requested; the driver
 * queues them in between. The port is bounded for every client: at most 16
 * connections, 4 per client address, and each request must arrive whole
 * within 5 s (a reaper thread shuts a late connection down, however slowly
 * its bytes trickle in: MHD's own timeout is an idle one).
 */
#include "agent/metrics.h"
#include "agent/http_reply.h"
#include "agent/clock.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#define XID_EVENTS_PER_SCRAPE_MAX 1024 /* a storm cannot stall a scrape */
#define HTTP_TIMEOUT_S 10u
#define HTTP_CONNECTIONS_MAX 16u
/* A client address holds at most this many of them, and each request must
 * arrive whole within the deadline of the connection's opening or of its
 * previous answer, however slowly its bytes trickle in (a reaper thread
 * shuts the late ones down): a scraper that trickles cannot hold the port. */
#define HTTP_CONNECTIONS_PER_ADDRESS_MAX 4u
#define HTTP_REQUEST_DEADLINE_S 5.0
#define HTTP_REAP_EVERY_NS (250 * 1000 * 1000L)
#define CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

struct ts_agent_metrics {
    struct MHD_Daemon *httpd;
    pthread_mutex_t mu; /* guards everything below */
    ts_nvml *nv;
    char hostname[TS_METRICS_HOSTNAME_MAX];
    ts_metrics_task *tasks;
    size_t ntasks;
    nvmlEventSet_t xid_set; /* NULL: Xids not monitored */
    unsigned ngpus;
    nvmlDevice_t dev[TS_METRICS_MAX_GPUS];
    unsigned last_xid[TS_METRICS_MAX_GPUS];
    unsigned long long scrapes;
    int port;
    /* the open connections and their deadlines, for the reaper */
    pthread_mutex_t cmu;
    struct {
        int fd;        /* -1: a free slot */
        double t0;     /* when its current request began */
        bool received; /* read whole: answered by now */
    } conn[HTTP_CONNECTIONS_MAX];
    bool stopping;
    pthread_t reaper;
    bool reaper_started;
    unsigned long long reaped;
};

/* The slot of the connection whose descriptor is fd (-1 looks for a free one). */
static int conn_slot(ts_agent_metrics *m, int fd)
{
    for (int i = 0; i < (int)HTTP_CONNECTIONS_MAX; i++)
        if (m->conn[i].fd == fd)
            return i;
    return -1;
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
    (void)socket_context;
    ts_agent_metrics *m = cls;
    const union MHD_ConnectionInfo *fi =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    int fd = fi ? fi->connect_fd : -1;
    if (fd < 0)
        return;
    pthread_mutex_lock(&m->cmu);
    int i = conn_slot(m, toe == MHD_CONNECTION_NOTIFY_STARTED ? -1 : fd);
    if (i >= 0 && toe == MHD_CONNECTION_NOTIFY_STARTED) {
        m->conn[i].fd = fd;
        m->conn[i].t0 = agent_mono_s();
        m->conn[i].received = false;
    } else if (i >= 0) {
        m->conn[i].fd = -1; /* MHD closes it after this returns */
    }
    pthread_mutex_unlock(&m->cmu);
}

/* A request answered: the connection's next one has a deadline of its own. */
static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)con_cls;
    (void)toe;
    ts_agent_metrics *m = cls;
    const union MHD_ConnectionInfo *fi =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    pthread_mutex_lock(&m->cmu);
    int i = fi ? conn_slot(m, fi->connect_fd) : -1;
    if (i >= 0) {
        m->conn[i].t0 = agent_mono_s();
        m->conn[i].received = false;
    }
    pthread_mutex_unlock(&m->cmu);
}

static void mark_received(ts_agent_metrics *m, struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *fi =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    pthread_mutex_lock(&m->cmu);
    int i = fi ? conn_slot(m, fi->connect_fd) : -1;
    if (i >= 0)
        m->conn[i].received = true;
    pthread_mutex_unlock(&m->cmu);
}

static void *reaper_main(void *arg)
{
    ts_agent_metrics *m = arg;
    pthread_mutex_lock(&m->cmu);
    while (!m->stopping) {
        pthread_mutex_unlock(&m->cmu);
        struct timespec ts = {0, HTTP_REAP_EVERY_NS};
        nanosleep(&ts, NULL);
        pthread_mutex_lock(&m->cmu);
        double now = agent_mono_s();
        for (int i = 0; i < (int)HTTP_CONNECTIONS_MAX; i++)
            if (m->conn[i].fd >= 0 && !m->conn[i].received &&
                now - m->conn[i].t0 > HTTP_REQUEST_DEADLINE_S) {
                shutdown(m->conn[i].fd, SHUT_RDWR); /* MHD sees the end and closes it */
                m->conn[i].received = true;         /* once */
                m->reaped++;
            }
    }
    pthread_mutex_unlock(&m->cmu);
    return NULL;
}

/* Its own event set: each set receives every event once, so the health
 * monitor's set is not disturbed. */
static void xid_watch(ts_agent_metrics *m)
{
    ts_nvml *nv = m->nv;
    if (!nv || !nv->EventSetCreate || !nv->DeviceRegisterEvents || !nv->EventSetWait ||
        !nv->EventSetFree || nv->DeviceGetCount(&m->ngpus) != NVML_SUCCESS ||
        nv->EventSetCreate(&m->xid_set) != NVML_SUCCESS) {
        m->xid_set = NULL;
        return;
    }
    if (m->ngpus > TS_METRICS_MAX_GPUS)
        m->ngpus = TS_METRICS_MAX_GPUS;
    int registered = 0;
    for (unsigned i = 0; i < m->ngpus; i++) {
        unsigned long long types = nvmlEventTypeXidCriticalError;
        if (nv->DeviceGetHandleByIndex(i, &m->dev[i]) != NVML_SUCCESS) {
            m->dev[i] = NULL;
            continue;
        }
        if (nv->DeviceGetSupportedEventTypes &&
            nv->DeviceGetSupportedEventTypes(m->dev[i], &types) != NVML_SUCCESS)
            types = 0;
        if ((types & nvmlEventTypeXidCriticalError) &&
            nv->DeviceRegisterEvents(m->dev[i], nvmlEventTypeXidCriticalError, m->xid_set) ==
                NVML_SUCCESS)
            registered++;
    }
    if (!registered) {
        nv->EventSetFree(m->xid_set);
        m->xid_set = NULL;
    }
}

static void xid_drain(ts_agent_metrics *m)
{
    for (int k = 0; m->xid_set && k < XID_EVENTS_PER_SCRAPE_MAX; k++) {
        nvmlEventData_t ev;
        if (m->nv->EventSetWait(m->xid_set, &ev, 0) != NVML_SUCCESS)
            return;
        if (!(ev.eventType & nvmlEventTypeXidCriticalError))
            continue;
        for (unsigned i = 0; i < m->ngpus; i++)
            if (m->dev[i] && m->dev[i] == ev.device)
                m->last_xid[i] = (unsigned)ev.eventData;
    }
}

/* The page plus the server's own counter; NULL when out of memory. */
static char *scrape(ts_agent_metrics *m, size_t *len)
{
    char *page = NULL, *text = NULL;
    *len = 0;
    pthread_mutex_lock(&m->mu);
    xid_drain(m);
    m->scrapes++;
    unsigned long long scrapes = m->scrapes;
    int rc = agent_metrics_render(m->nv, m->hostname, m->tasks, m->ntasks,
                                     m->xid_set ? m->last_xid : NULL, &page, NULL);
    pthread_mutex_unlock(&m->mu);
    if (rc != 0)
        return NULL;
    FILE *f = open_memstream(&text, len);
    if (!f) {
        free(page);
        return NULL;
    }
    fputs(page, f);
    free(page);
    fprintf(f,
            "# HELP tessera_agent_metrics_scrapes_total Pages of /metrics served since the "
            "agent started.\n# TYPE tessera_agent_metrics_scrapes_total counter\n"
            "tessera_agent_metrics_scrapes_total %llu\n",
            scrapes);
    if (fclose(f) != 0) {
        free(text);
        return NULL;
    }
    return text;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *conn, const char *url,
                              const char *method, const char *version, const char *upload,
                              size_t *upload_size, void **con_cls)
{
    static int first_call_marker;
    (void)version;
    (void)upload;
    if (!*con_cls) { /* headers only so far: answer once the request is complete */
        *con_cls = &first_call_marker;
        return MHD_YES;
    }
    if (*upload_size) { /* a body is not expected: drop it */
        *upload_size = 0;
        return MHD_YES;
    }
    mark_received(cls, conn);
    if (strcmp(url, "/metrics") != 0)
        return agent_reply_text(conn, MHD_HTTP_NOT_FOUND, "not found: the agent serves /metrics\n");
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
        return agent_reply_method(conn, "GET, HEAD", "/metrics: use GET\n");
    size_t len;
    char *text = scrape(cls, &len);
    if (!text)
        return agent_reply_text(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
    return agent_reply(conn, MHD_HTTP_OK, text, len, CONTENT_TYPE);
}

/* "ADDR:PORT", "[V6]:PORT" or ":PORT" into a socket address. */
static int parse_listen(const char *listen, struct sockaddr_storage *ss, bool *v6, ts_err *err)
{
    if (!listen || !*listen)
        return ts_err_set(err, TS_EINVAL, "metrics listen: empty (want ADDR:PORT)");
    char addr[INET6_ADDRSTRLEN + 2];
    const char *port;
    if (listen[0] == '[') {
        const char *close = strchr(listen, ']');
        if (!close || close[1] != ':' || (size_t)(close - listen - 1) >= sizeof addr)
            return ts_err_set(err, TS_EINVAL,
                              "metrics listen \"%s\": want [IPv6]:PORT after the '['", listen);
        snprintf(addr, sizeof addr, "%.*s", (int)(close - listen - 1), listen + 1);
        port = close + 2;
    } else {
        const char *colon = strrchr(listen, ':');
        if (!colon || (size_t)(colon - listen) >= sizeof addr)
            return ts_err_set(err, TS_EINVAL, "metrics listen \"%s\": want ADDR:PORT", listen);
        snprintf(addr, sizeof addr, "%.*s", (int)(colon - listen), listen);
        if (!addr[0])
            snprintf(addr, sizeof addr, "0.0.0.0");
        port = colon + 1;
    }
    char *end;
    errno = 0;
    long p = strtol(port, &end, 10);
    if (!*port || *end || errno || p < 0 || p > 65535)
        return ts_err_set(err, TS_EINVAL, "metrics listen \"%s\": port \"%s\" must be 0..65535",
                          listen, port);
    memset(ss, 0, sizeof *ss);
    struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
    if (inet_pton(AF_INET, addr, &s4->sin_addr) == 1) {
        s4->sin_family = AF_INET;
        s4->sin_port = htons((uint16_t)p);
        *v6 = false;
    } else if (inet_pton(AF_INET6, addr, &s6->sin6_addr) == 1) {
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons((uint16_t)p);
        *v6 = true;
    } else {
        return ts_err_set(err, TS_EINVAL,
                          "metrics listen \"%s\": \"%s\" is not an IPv4 or IPv6 address", listen,
                          addr);
    }
    return 0;
}

int agent_metrics_start(const char *listen, ts_nvml *nv, const char *hostname,
                           ts_agent_metrics **out, ts_err *err)
{
    *out = NULL;
    struct sockaddr_storage ss;
    bool v6 = false;
    int rc = parse_listen(listen, &ss, &v6, err);
    if (rc != 0)
        return rc;
    ts_agent_metrics *m = calloc(1, sizeof *m);
    if (!m)
        return ts_err_set(err, TS_ENOMEM, "metrics: out of memory");
    pthread_mutex_init(&m->mu, NULL);
    pthread_mutex_init(&m->cmu, NULL);
    for (int i = 0; i < (int)HTTP_CONNECTIONS_MAX; i++)
        m->conn[i].fd = -1;
    m->nv = nv;
    snprintf(m->hostname, sizeof m->hostname, "%s", hostname ? hostname : "");
    xid_watch(m);
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | (v6 ? MHD_USE_IPv6 : 0);
    m->httpd = MHD_start_daemon(flags, 0, NULL, NULL, handle, m, MHD_OPTION_SOCK_ADDR,
                                (struct sockaddr *)&ss, MHD_OPTION_CONNECTION_TIMEOUT,
                                HTTP_TIMEOUT_S, MHD_OPTION_CONNECTION_LIMIT,
                                HTTP_CONNECTIONS_MAX, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
                                HTTP_CONNECTIONS_PER_ADDRESS_MAX, MHD_OPTION_NOTIFY_CONNECTION,
                                on_connection, m, MHD_OPTION_NOTIFY_COMPLETED, on_completed, m,
                                MHD_OPTION_END);
    if (!m->httpd) {
        int e = errno;
        agent_metrics_stop(m);
        return ts_err_set(err, TS_EIO, "metrics listen \"%s\": cannot start the HTTP server (%s)",
                          listen, e ? strerror(e) : "address in use or not available");
    }
    if (pthread_create(&m->reaper, NULL, reaper_main, m) != 0) {
        agent_metrics_stop(m);
        return ts_err_set(err, TS_EIO, "metrics: cannot start the connection reaper thread");
    }
    m->reaper_started = true;
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(m->httpd, MHD_DAEMON_INFO_BIND_PORT);
    m->port = info ? (int)info->port : 0;
    *out = m;
    return 0;
}

int agent_metrics_port(const ts_agent_metrics *m)
{
    return m ? m->port : 0;
}

int agent_metrics_set_tasks(ts_agent_metrics *m, const ts_metrics_task *tasks, size_t n,
                               ts_err *err)
{
    ts_metrics_task *copy = NULL;
    if (n) {
        copy = malloc(n * sizeof *copy);
        if (!copy)
            return ts_err_set(err, TS_ENOMEM, "metrics: out of memory copying %zu task(s)", n);
        memcpy(copy, tasks, n * sizeof *copy);
    }
    pthread_mutex_lock(&m->mu);
    ts_metrics_task *old = m->tasks;
    m->tasks = copy;
    m->ntasks = n;
    pthread_mutex_unlock(&m->mu);
    free(old);
    return 0;
}

void agent_metrics_stop(ts_agent_metrics *m)
{
    if (!m)
        return;
    if (m->reaper_started) {
        pthread_mutex_lock(&m->cmu);
        m->stopping = true;
        pthread_mutex_unlock(&m->cmu);
        pthread_join(m->reaper, NULL);
    }
    if (m->httpd)
        MHD_stop_daemon(m->httpd);
    if (m->xid_set)
        m->nv->EventSetFree(m->xid_set);
    pthread_mutex_destroy(&m->mu);
    pthread_mutex_destroy(&m->cmu);
    free(m->tasks);
    free(m);
}
