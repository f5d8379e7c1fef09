/*
 * stream.c - the client side of a session stream (tessera/stream.h), shared
 * by the CLI and the agent, and the frame codec both speak. libcurl makes
 * the connection (TLS, the CA file, proxies as everywhere else) in its
 * connect-only mode; the upgrade request and the bytes after it are ours,
 * sent and received through curl_easy_send/recv so that TLS stays curl's.
 * Reads never block; writes wait (poll) within a bound.
 */
#define _DEFAULT_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <curl/curl.h>
#include <jansson.h>

#include "tessera/stream.h"

#define HEAD_MAX_BYTES 8192      /* the answer's status line and headers */
#define ERROR_BODY_MAX_BYTES 8192 /* a refusal's JSON body, at most */

struct ts_stream {
    CURL *h;
    int fd;
    uint8_t *pend; /* bytes read past the answer's head, not yet returned */
    size_t npend, off;
    bool more;     /* the last read got bytes: TLS may hold more that poll cannot see */
};

int ts_frame_feed(ts_frame_reader *r, const uint8_t *p, size_t n, size_t *used, int *type,
                  const uint8_t **payload, size_t *len)
{
    *used = 0;
    for (;;) {
        if (r->have >= TS_FRAME_HEAD_BYTES) {
            size_t l = (size_t)r->buf[1] << 16 | (size_t)r->buf[2] << 8 | r->buf[3];
            if (l > TS_FRAME_PAYLOAD_MAX)
                return -1;
            if (r->have == TS_FRAME_HEAD_BYTES + l) {
                *type = r->buf[0];
                *payload = r->buf + TS_FRAME_HEAD_BYTES;
                *len = l;
                return 1;
            }
            size_t want = TS_FRAME_HEAD_BYTES + l - r->have;
            size_t take = want < n - *used ? want : n - *used;
            memcpy(r->buf + r->have, p + *used, take);
            r->have += take;
            *used += take;
            if (take < want)
                return 0;
            continue;
        }
        if (*used == n)
            return 0;
        r->buf[r->have++] = p[(*used)++];
    }
}

void ts_frame_next(ts_frame_reader *r) { r->have = 0; }

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int wait_fd(int fd, short ev, double until)
{
    double left = until - now_s();
    if (left <= 0)
        return -1;
    struct pollfd p = {fd, ev, 0};
    int r = poll(&p, 1, (int)(left * 1000) + 1);
    return r > 0 ? 0 : -1;
}

int ts_stream_write(ts_stream *s, const void *p, size_t n, double timeout_s)
{
    double until = now_s() + timeout_s;
    const char *b = p;
    while (n > 0) {
        size_t sent = 0;
        CURLcode rc = curl_easy_send(s->h, b, n, &sent);
        if (rc == CURLE_AGAIN) {
            if (wait_fd(s->fd, POLLOUT, until) != 0)
                return -1;
            continue;
        }
        if (rc != CURLE_OK)
            return -1;
        b += sent;
        n -= sent;
    }
    return 0;
}

int ts_stream_frame(ts_stream *s, int type, const void *payload, size_t len, double timeout_s)
{
    uint8_t buf[TS_FRAME_HEAD_BYTES + TS_FRAME_PAYLOAD_MAX];
    if (len > TS_FRAME_PAYLOAD_MAX)
        return -1;
    ts_frame_head(buf, type, len);
    if (len)
        memcpy(buf + TS_FRAME_HEAD_BYTES, payload, len);
    return ts_stream_write(s, buf, TS_FRAME_HEAD_BYTES + len, timeout_s);
}

ssize_t ts_stream_read(ts_stream *s, void *buf, size_t n)
{
    if (s->off < s->npend) {
        size_t k = s->npend - s->off < n ? s->npend - s->off : n;
        memcpy(buf, s->pend + s->off, k);
        s->off += k;
        return (ssize_t)k;
    }
    size_t got = 0;
    CURLcode rc = curl_easy_recv(s->h, buf, n, &got);
    s->more = rc == CURLE_OK && got > 0;
    if (rc == CURLE_AGAIN)
        return -1;
    if (rc != CURLE_OK)
        return -2;
    return (ssize_t)got;
}

int ts_stream_fd(const ts_stream *s) { return s->fd; }

bool ts_stream_pending(const ts_stream *s) { return s->off < s->npend || s->more; }

void ts_stream_close(ts_stream *s)
{
    if (!s)
        return;
    curl_easy_cleanup(s->h);
    free(s->pend);
    free(s);
}

/* Blocking read of some bytes within until: > 0, 0 closed, -1 error/timeout. */
static ssize_t read_some(ts_stream *s, char *buf, size_t n, double until)
{
    for (;;) {
        size_t got = 0;
        CURLcode rc = curl_easy_recv(s->h, buf, n, &got);
        if (rc == CURLE_OK)
            return (ssize_t)got;
        if (rc != CURLE_AGAIN || wait_fd(s->fd, POLLIN, until) != 0)
            return -1;
    }
}

static const char *header_value(const char *head, const char *name, char *out, size_t size)
{
    size_t nl = strlen(name);
    for (const char *p = strstr(head, "\r\n"); p; p = strstr(p + 2, "\r\n"))
        if (strncasecmp(p + 2, name, nl) == 0 && p[2 + nl] == ':') {
            const char *v = p + 3 + nl;
            while (*v == ' ')
                v++;
            size_t l = strcspn(v, "\r\n");
            l = l < size - 1 ? l : size - 1;
            memcpy(out, v, l);
            out[l] = '\0';
            return out;
        }
    return NULL;
}

int ts_stream_open(const ts_stream_target *t, const char *path, const char *body,
                   double timeout_s, ts_stream **out, int *status, ts_err *err)
{
    *out = NULL;
    *status = 0;
    double until = now_s() + timeout_s;
    ts_stream *s = calloc(1, sizeof *s);
    if (!s || !(s->h = curl_easy_init())) {
        free(s);
        return ts_err_set(err, TS_ENOMEM, "out of memory");
    }
    char errbuf[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(s->h, CURLOPT_URL, t->url);
    curl_easy_setopt(s->h, CURLOPT_CONNECT_ONLY, 1L);
    curl_easy_setopt(s->h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(s->h, CURLOPT_CONNECTTIMEOUT_MS, (long)(timeout_s * 1000));
    curl_easy_setopt(s->h, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(s->h, CURLOPT_TCP_NODELAY, 1L);
    if (t->ca_file && t->ca_file[0])
        curl_easy_setopt(s->h, CURLOPT_CAINFO, t->ca_file);
    CURLcode rc = curl_easy_perform(s->h);
    curl_socket_t sock = CURL_SOCKET_BAD;
    if (rc == CURLE_OK)
        rc = curl_easy_getinfo(s->h, CURLINFO_ACTIVESOCKET, &sock);
    if (rc != CURLE_OK || sock == CURL_SOCKET_BAD) {
        ts_err_set(err, TS_EIO, "%s: %s", t->url, errbuf[0] ? errbuf : curl_easy_strerror(rc));
        ts_stream_close(s);
        return TS_EIO;
    }
    s->fd = (int)sock;
    const char *host = strstr(t->url, "://");
    host = host ? host + 3 : t->url;
    size_t hl = strcspn(host, "/");
    size_t bl = body ? strlen(body) : 0;
    char *req = malloc(1024 + strlen(path) + hl + strlen(t->token) + bl);
    if (!req) {
        ts_stream_close(s);
        return ts_err_set(err, TS_ENOMEM, "out of memory");
    }
    int n = sprintf(req,
                    "POST %s HTTP/1.1\r\nHost: %.*s\r\nAuthorization: Bearer %s\r\n"
                    "Connection: Upgrade\r\nUpgrade: " TS_STREAM_PROTOCOL "\r\n"
                    "Content-Type: application/json\r\nContent-Length: %zu\r\n",
                    path, (int)hl, host, t->token, bl);
    if (t->secret)
        n += sprintf(req + n, TS_STREAM_SECRET_HEADER ": %s\r\n", t->secret);
    n += sprintf(req + n, "\r\n");
    memcpy(req + n, body ? body : "", bl);
    int wr = ts_stream_write(s, req, (size_t)n + bl, until - now_s());
    free(req);
    if (wr != 0) {
        ts_stream_close(s);
        return ts_err_set(err, TS_EIO, "%s: the request could not be sent", t->url);
    }
    char head[HEAD_MAX_BYTES + 1];
    size_t have = 0;
    char *end = NULL;
    while (!end) {
        if (have == HEAD_MAX_BYTES) {
            ts_stream_close(s);
            return ts_err_set(err, TS_EIO, "%s: an answer's head over %d bytes", t->url,
                              HEAD_MAX_BYTES);
        }
        ssize_t k = read_some(s, head + have, HEAD_MAX_BYTES - have, until);
        if (k <= 0) {
            ts_stream_close(s);
            return ts_err_set(err, TS_EIO, "%s: %s before an answer", t->url,
                              k == 0 ? "the connection closed" : "no answer in time");
        }
        have += (size_t)k;
        head[have] = '\0';
        end = strstr(head, "\r\n\r\n");
    }
    size_t hlen = (size_t)(end + 4 - head);
    int code = 0;
    if (sscanf(head, "HTTP/1.%*d %d", &code) != 1) {
        ts_stream_close(s);
        return ts_err_set(err, TS_EIO, "%s: not an HTTP answer", t->url);
    }
    *status = code;
    if (code == 101) {
        if (have > hlen) {
            s->pend = malloc(have - hlen);
            if (!s->pend) {
                ts_stream_close(s);
                return ts_err_set(err, TS_ENOMEM, "out of memory");
            }
            memcpy(s->pend, head + hlen, have - hlen);
            s->npend = have - hlen;
        }
        s->more = true; /* TLS may have decrypted more than the head */
        *out = s;
        return 0;
    }
    /* a refusal: its JSON error's message */
    char cl[32];
    size_t want = header_value(head, "Content-Length", cl, sizeof cl) ? strtoul(cl, NULL, 10) : 0;
    want = want < ERROR_BODY_MAX_BYTES ? want : ERROR_BODY_MAX_BYTES;
    char *b = malloc(want + 1);
    size_t got = have - hlen < want ? have - hlen : want;
    if (b) {
        memcpy(b, head + hlen, got);
        while (got < want) {
            ssize_t k = read_some(s, b + got, want - got, until);
            if (k <= 0)
                break;
            got += (size_t)k;
        }
        b[got] = '\0';
    }
    json_t *doc = b ? json_loads(b, 0, NULL) : NULL;
    const char *msg = json_string_value(json_object_get(json_object_get(doc, "error"), "message"));
    ts_err_set(err, TS_EINVAL, "%s", msg ? msg : (b && b[0] ? b : "refused"));
    json_decref(doc);
    free(b);
    ts_stream_close(s);
    return TS_EINVAL;
}
