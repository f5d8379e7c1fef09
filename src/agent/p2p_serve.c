/*
 * p2p_serve.c - an agent's listener for its peers (p2p.h): GET
 * /p2p/v1/blobs/<digest>/<piece> answers one piece of a blob this node
 * holds, verified: from the store's finished blob, or from the file of a
 * fetch under way when that piece is already checked. At most
 * P2P_UPLOADS_MAX pieces go out at once (a 503 to the next asker, which
 * turns to another holder): a node's link is shared by few, so each piece
 * arrives whole soon and its receiver serves it in turn. The asking node
 * presents X-Tessera-Node and X-Tessera-P2P-Token, a token the tracker
 * issued it for that blob ("<expiry>.<hex HMAC-SHA256>" over
 * "node|digest|expiry" under the tracker's key, which this node learns from
 * its own exchanges with the tracker); anything else is a 403, and an
 * unknown blob or piece a 404. Bounded like the metrics port: a few
 * connections, each request whole within a deadline (MHD's own timeout).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <gnutls/crypto.h>

#include "agent/http_reply.h"
#include "agent/p2p_internal.h"

#define HTTP_TIMEOUT_S 30u
#define HTTP_CONNECTIONS_MAX 512u /* every node of a large gang may keep one open here */
#define HTTP_CONNECTIONS_PER_ADDRESS_MAX 8u
#define PATH_PREFIX "/p2p/v1/blobs/"

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

bool p2p_token_mac(const char *key_hex, const char *node, const char *holder, const char *digest,
                   long long expiry, char out[65])
{
    unsigned char key[64], mac[32];
    size_t kl = strlen(key_hex);
    if (kl == 0 || kl % 2 || kl / 2 > sizeof key)
        return false;
    for (size_t i = 0; i < kl / 2; i++) {
        int hi = hexval(key_hex[2 * i]), lo = hexval(key_hex[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return false;
        key[i] = (unsigned char)(hi << 4 | lo);
    }
    char text[400];
    int n = snprintf(text, sizeof text, "%s|%s|%s|%lld", node, holder, digest, expiry);
    if (n < 0 || (size_t)n >= sizeof text)
        return false;
    if (gnutls_hmac_fast(GNUTLS_MAC_SHA256, key, kl / 2, text, (size_t)n, mac) != 0)
        return false;
    for (int i = 0; i < 32; i++)
        sprintf(out + 2 * i, "%02x", mac[i]);
    return true;
}

/* Whether the MAC part of a token equals want, in constant time. */
static bool mac_equal(const char *want, const char *got)
{
    unsigned diff = 0;
    for (int i = 0; i < 64; i++)
        diff |= (unsigned)(want[i] ^ got[i]);
    return diff == 0;
}

/* A token the tracker gave node for this holder (this node) and blob: a
 * token a node hands its peer is good at that peer only, so whoever holds
 * this node's port while its agent is away (a host-network task of another
 * tenant) learns nothing it could fetch elsewhere with. A token for the blob
 * at any holder (what trackers before holder-bound tokens gave) is refused:
 * one such token caught at a squatted port would open every holder. */
static bool token_ok(ts_p2p *p, const char *node, const char *digest, const char *tok)
{
    if (!node || !tok || strlen(node) >= 64)
        return false;
    char *dot;
    errno = 0;
    long long expiry = strtoll(tok, &dot, 10);
    if (errno || *dot != '.' || expiry < (long long)time(NULL) || strlen(dot + 1) != 64)
        return false;
    char key[P2P_KEY_HEX_MAX], want[65];
    pthread_mutex_lock(&p->mu);
    memcpy(key, p->key, sizeof key);
    pthread_mutex_unlock(&p->mu);
    return p2p_token_mac(key, node, p->node, digest, expiry, want) && mac_equal(want, dot + 1);
}

/* An fd for the piece's bytes: the active fetch's file when that piece is
 * verified, else the store's finished blob; -1: not held. Closed by the
 * caller. */
static int piece_fd(ts_p2p *p, const char *digest, long piece, long long *blob_size)
{
    int fd = -1;
    pthread_mutex_lock(&p->mu);
    for (int i = 0; i < P2P_ACTIVE_MAX; i++) {
        p2p_active *a = &p->active[i];
        if (a->digest[0] && !strcmp(a->digest, digest)) {
            if (piece < a->npieces && a->have[piece])
                fd = dup(a->fd);
            break;
        }
    }
    pthread_mutex_unlock(&p->mu);
    if (fd < 0) {
        char path[800];
        snprintf(path, sizeof path, "%s/blobs/sha256/%s", p->store_root, digest + 7);
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    }
    struct stat sb;
    if (fd >= 0 && (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode))) {
        close(fd);
        return -1;
    }
    if (fd >= 0)
        *blob_size = sb.st_size;
    return fd;
}

static int uploading_marker; /* con_cls of a request counted in p->uploads */

static void completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                      enum MHD_RequestTerminationCode toe)
{
    (void)conn, (void)toe;
    ts_p2p *p = cls;
    if (*con_cls == &uploading_marker)
        __atomic_fetch_sub(&p->uploads, 1, __ATOMIC_RELAXED);
    *con_cls = NULL;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *conn, const char *url,
                              const char *method, const char *version, const char *upload,
                              size_t *upload_len, void **con_cls)
{
    (void)version, (void)upload, (void)upload_len;
    ts_p2p *p = cls;
    static int first_call_marker;
    if (*con_cls != &first_call_marker) {
        *con_cls = &first_call_marker;
        return MHD_YES;
    }
    if (strcmp(method, "GET") != 0)
        return agent_reply_method(conn, "GET", "use GET\n");
    if (strncmp(url, PATH_PREFIX, strlen(PATH_PREFIX)) != 0)
        return agent_reply_text(conn, MHD_HTTP_NOT_FOUND, "not found\n");
    const char *rest = url + strlen(PATH_PREFIX), *slash = strrchr(rest, '/');
    char digest[TS_IMAGE_DIGEST_MAX];
    if (!slash || (size_t)(slash - rest) >= sizeof digest)
        return agent_reply_text(conn, MHD_HTTP_NOT_FOUND, "want /p2p/v1/blobs/<digest>/<piece>\n");
    memcpy(digest, rest, (size_t)(slash - rest));
    digest[slash - rest] = 0;
    char *end;
    errno = 0;
    long piece = strtol(slash + 1, &end, 10);
    if (!ts_image_digest_ok(digest) || !slash[1] || *end || errno || piece < 0)
        return agent_reply_text(conn, MHD_HTTP_NOT_FOUND, "want /p2p/v1/blobs/<digest>/<piece>\n");
    const char *node = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "X-Tessera-Node");
    const char *tok = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "X-Tessera-P2P-Token");
    pthread_mutex_lock(&p->mu);
    bool keyed = p->key[0] != 0;
    pthread_mutex_unlock(&p->mu);
    /* not yet told the tracker's key (this node just started, and the
     * tracker still names it from before): busy, asked again in a moment,
     * where a 403 had every asker avoid it for 10 s (bench/image-p2p, the
     * 8-node faults after 32 nodes: last ready 16-19 s, not 10-12) */
    if (!keyed)
        return agent_reply_text(conn, MHD_HTTP_SERVICE_UNAVAILABLE, "starting: ask again\n");
    if (!token_ok(p, node, digest, tok)) {
        __atomic_fetch_add(&p->refused, 1, __ATOMIC_RELAXED);
        return agent_reply_text(conn, MHD_HTTP_FORBIDDEN,
                                "a tracker token for this blob is needed\n");
    }
    if (__atomic_add_fetch(&p->uploads, 1, __ATOMIC_RELAXED) > P2P_UPLOADS_MAX) {
        __atomic_fetch_sub(&p->uploads, 1, __ATOMIC_RELAXED);
        return agent_reply_text(conn, MHD_HTTP_SERVICE_UNAVAILABLE, "busy: ask another holder\n");
    }
    *con_cls = &uploading_marker; /* released in completed(), whatever the answer */
    long long size = 0;
    int fd = piece_fd(p, digest, piece, &size);
    long long off = (long long)piece * TS_P2P_PIECE_BYTES;
    if (fd < 0 || off >= size) {
        if (fd >= 0)
            close(fd);
        return agent_reply_text(conn, MHD_HTTP_NOT_FOUND, "this node does not hold that piece\n");
    }
    long long len = size - off < TS_P2P_PIECE_BYTES ? size - off : TS_P2P_PIECE_BYTES;
    __atomic_fetch_add(&p->served_bytes, len, __ATOMIC_RELAXED);
    if (!p->fault_corrupt) {
        /* straight from the file to the socket (sendfile): no copy through
         * this process, which at a gang's scale is CPU the node's own fetch
         * and unpack want */
        struct MHD_Response *resp =
            MHD_create_response_from_fd_at_offset64((uint64_t)len, fd, (uint64_t)off);
        if (!resp) {
            close(fd);
            return MHD_NO;
        }
        MHD_add_response_header(resp, "Content-Type", "application/octet-stream");
        enum MHD_Result ret = MHD_queue_response(conn, MHD_HTTP_OK, resp);
        MHD_destroy_response(resp); /* closes fd once sent */
        return ret;
    }
    char *buf = malloc((size_t)len);
    long long got = 0;
    while (buf && got < len) {
        ssize_t k = pread(fd, buf + got, (size_t)(len - got), off + got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        got += k;
    }
    close(fd);
    if (!buf || got != len) {
        free(buf);
        return agent_reply_text(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "cannot read the piece\n");
    }
    buf[len / 2] ^= 0x5a; /* the fault injected: a corrupt piece */
    return agent_reply(conn, MHD_HTTP_OK, buf, (size_t)len, "application/octet-stream");
}

static int parse_listen(const char *listen, struct sockaddr_in *sa, ts_err *err)
{
    const char *colon = listen ? strrchr(listen, ':') : NULL;
    char addr[INET_ADDRSTRLEN];
    if (!colon || (size_t)(colon - listen) >= sizeof addr)
        return ts_err_set(err, TS_EINVAL, "p2p listen \"%s\": want IPV4:PORT",
                          listen ? listen : "");
    snprintf(addr, sizeof addr, "%.*s", (int)(colon - listen), listen);
    char *end;
    errno = 0;
    long port = strtol(colon + 1, &end, 10);
    if (!colon[1] || *end || errno || port < 0 || port > 65535)
        return ts_err_set(err, TS_EINVAL, "p2p listen \"%s\": port must be 0..65535", listen);
    memset(sa, 0, sizeof *sa);
    sa->sin_family = AF_INET;
    sa->sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, addr, &sa->sin_addr) != 1)
        return ts_err_set(err, TS_EINVAL, "p2p listen \"%s\": \"%s\" is not an IPv4 address",
                          listen, addr);
    return 0;
}

int agent_p2p_start(const ts_p2p_config *cfg, ts_p2p **out, ts_err *err)
{
    struct sockaddr_in sa;
    int rc = parse_listen(cfg->listen, &sa, err);
    if (rc)
        return rc;
    if (sa.sin_addr.s_addr == htonl(INADDR_ANY) && !cfg->advertise)
        return ts_err_set(err, TS_EINVAL, "p2p listen \"%s\": listening on every address "
                          "needs --p2p-advertise (the URL peers reach this node at)",
                          cfg->listen);
    ts_p2p *p = calloc(1, sizeof *p);
    if (!p)
        return ts_err_set(err, TS_ENOMEM, "out of memory");
    pthread_mutex_init(&p->mu, NULL);
    snprintf(p->node, sizeof p->node, "%s", cfg->node);
    snprintf(p->token, sizeof p->token, "%s", cfg->token);
    snprintf(p->ca_file, sizeof p->ca_file, "%s", cfg->ca_file ? cfg->ca_file : "");
    snprintf(p->store_root, sizeof p->store_root, "%s", cfg->store_root);
    p->fault_corrupt = cfg->fault_corrupt;
    for (int i = 0; i < P2P_ACTIVE_MAX; i++)
        p->active[i].fd = -1;
    struct MHD_Daemon *d = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO, 0, NULL, NULL, handle, p,
        MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa, MHD_OPTION_CONNECTION_TIMEOUT,
        HTTP_TIMEOUT_S, MHD_OPTION_CONNECTION_LIMIT, HTTP_CONNECTIONS_MAX,
        MHD_OPTION_NOTIFY_COMPLETED, completed, p,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, HTTP_CONNECTIONS_PER_ADDRESS_MAX, MHD_OPTION_END);
    if (!d) {
        pthread_mutex_destroy(&p->mu);
        free(p);
        return ts_err_set(err, TS_EIO, "p2p listen \"%s\": cannot listen there", cfg->listen);
    }
    p->httpd = d;
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    if (cfg->advertise) {
        snprintf(p->url, sizeof p->url, "%s", cfg->advertise);
    } else {
        char addr[INET_ADDRSTRLEN];
        inet_ntop(AF_INET, &sa.sin_addr, addr, sizeof addr);
        snprintf(p->url, sizeof p->url, "http://%s:%u", addr, info ? info->port : 0);
    }
    agent_p2p_beats_start(p);
    *out = p;
    return 0;
}

void agent_p2p_stop(ts_p2p *p)
{
    if (!p)
        return;
    agent_p2p_beats_stop(p); /* silent now: the tracker stops naming it in seconds */
    MHD_stop_daemon(p->httpd);
    for (int i = 0; i < P2P_ACTIVE_MAX; i++) {
        if (p->active[i].digest[0]) {
            close(p->active[i].fd);
            free(p->active[i].have);
        }
    }
    pthread_mutex_destroy(&p->mu);
    explicit_bzero(p->token, sizeof p->token);
    free(p);
}

void agent_p2p_set_controller(ts_p2p *p, const char *url)
{
    pthread_mutex_lock(&p->mu);
    snprintf(p->controller, sizeof p->controller, "%s", url ? url : "");
    pthread_mutex_unlock(&p->mu);
}

const char *agent_p2p_url(const ts_p2p *p) { return p->url; }
