/*
 * image_pull.c - the registry client: the OCI distribution API over libcurl.
 *
 * GET /v2/<repo>/manifests/<tag|digest> with the OCI and Docker media types
 * accepted; an image index (or Docker manifest list) is resolved to its
 * linux/amd64 manifest. Then GET /v2/<repo>/blobs/<digest> for the config and
 * each layer not yet in the store, streamed to a file under the store's tmp/
 * while hashed; a blob whose sha256 or size is not the one the manifest names
 * is discarded and fetched once more, then the pull fails: an unverified byte
 * is never used. A manifest asked for by digest is checked the same way.
 *
 * Authentication as registries do it: the first 401 carries a challenge.
 * "Bearer realm=...,service=...,scope=..." sends us to the token service
 * (with the pull secret as HTTP basic, if any) for a token the retried
 * request carries; "Basic" takes the pull secret directly. Credentials never
 * appear in an error message.
 *
 * Errors tell the agent what to do: TS_ENOENT (the registry does not know
 * the image, 404: reason image_not_found), TS_EACCES (the registry or its
 * token service refused the credentials, 401 or 403, or none were given:
 * reason image_auth), TS_EIO (unreachable, 5xx, 429: keep the job waiting
 * and retry), TS_EINVAL (a bad image), TS_ENOSPC (budget).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <gnutls/crypto.h>
#include <jansson.h>

#include "agent/agent_internal.h"
#include "agent/p2p.h"
#include "image_store.h"
#include "agent/clock.h"

#define MANIFEST_MAX_BYTES (4 << 20)
#define TOKEN_MAX_BYTES (1 << 20)
#define PULL_TIMEOUT_DEFAULT_S 600L
#define CONNECT_TIMEOUT_S 10L
#define REDIRECTS_MAX 5L
#define LAYERS_MAX 256
#define BLOB_TRIES 2               /* a mismatching blob is fetched once more */
#define SHA256_BYTES 32
#define PULL_MARK ".pull"          /* users/.pull: the image being pulled is not evicted */
#define ORIGIN_TRIES 6             /* a piece from the registry: a restart is waited out */
#define ORIGIN_PAUSE_FIRST_NS (250 * 1000 * 1000L)

static const char MANIFEST_ACCEPT[] =
    "Accept: application/vnd.oci.image.index.v1+json, "
    "application/vnd.oci.image.manifest.v1+json, "
    "application/vnd.docker.distribution.manifest.list.v2+json, "
    "application/vnd.docker.distribution.manifest.v2+json";

typedef struct puller {
    double t0;                 /* the pull's start, monotonic */
    CURL *c;
    const ts_image_ref *ref;
    const ts_pull_opts *o;
    char base[700];             /* scheme://host/v2/repo */
    char auth[8192];            /* "Authorization: Bearer ..." or "" */
    bool basic;                 /* send the pull secret as HTTP basic */
    char challenge[2048];
    char range[64];             /* "Range: bytes=a-b" for a piece, or "" */
    /* the current response's sink */
    char *mem;
    size_t mem_n, mem_max;
    int fd;
    gnutls_hash_hd_t hash;
    long long written, max;
    bool too_big;
    /* progress */
    long long done, total;
    /* the layers unpacked as their bytes come (image_stream.c); NULL: after */
    image_stream *stream;
    const ts_p2p_in_order *follow; /* told as the file sink's prefix grows; NULL: none */
    size_t layer;               /* the layer fetched now (0 first); SIZE_MAX: the config */
    char refused[256];          /* why a connection was refused (o->guard), "" none */
} puller;

/* A connection of the pull, to an address checked first (o->guard). */
static curl_socket_t open_checked(void *ctx, curlsocktype purpose, struct curl_sockaddr *a)
{
    puller *p = ctx;
    (void)purpose;
    if (!io_dest_ok(&a->addr, p->o->allow, p->o->nallow, "an image pull",
                    "the agent's --registry-allow", p->refused, sizeof p->refused))
        return CURL_SOCKET_BAD;
    return socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
}

static size_t on_header(char *b, size_t sz, size_t n, void *ctx)
{
    puller *p = ctx;
    size_t len = sz * n;
    static const char key[] = "www-authenticate:";
    if (len > sizeof key && !strncasecmp(b, key, sizeof key - 1)) {
        size_t v = sizeof key - 1;
        while (v < len && b[v] == ' ')
            v++;
        size_t k = len - v;
        while (k && (b[v + k - 1] == '\r' || b[v + k - 1] == '\n'))
            k--;
        if (k >= sizeof p->challenge)
            k = sizeof p->challenge - 1;
        memcpy(p->challenge, b + v, k);
        p->challenge[k] = 0;
    }
    return len;
}

static size_t on_body(char *b, size_t sz, size_t n, void *ctx)
{
    puller *p = ctx;
    size_t len = sz * n;
    long status = 0;
    curl_easy_getinfo(p->c, CURLINFO_RESPONSE_CODE, &status);
    if (status < 200 || status > 299)
        return len; /* an error's body: not kept */
    if (p->written + (long long)len > p->max) {
        p->too_big = true;
        return 0;
    }
    if (p->fd >= 0) {
        for (size_t w = 0; w < len;) {
            ssize_t k = write(p->fd, b + w, len - w);
            if (k < 0 && errno == EINTR)
                continue;
            if (k < 0)
                return 0;
            w += (size_t)k;
        }
        gnutls_hash(p->hash, b, len);
    } else {
        memcpy(p->mem + p->mem_n, b, len);
        p->mem_n += len;
        p->mem[p->mem_n] = 0;
    }
    p->written += (long long)len;
    if (p->fd >= 0 && p->follow) /* written in order: the unpack may read it */
        p->follow->fn(p->follow->ctx, p->written);
    return len;
}

static int on_progress(void *ctx, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ult,
                       curl_off_t ulnow)
{
    (void)dltotal, (void)ult, (void)ulnow;
    puller *p = ctx;
    if (p->fd >= 0 && p->o->progress && dlnow > 0)
        p->o->progress(p->o->progress_ctx, p->done + (long long)dlnow, p->total);
    return 0;
}

/* One GET into the current sink; *status is the HTTP status (0: none). */
static int get_once(puller *p, const char *url, const char *accept, long *status, ts_err *err)
{
    CURL *c = p->c;
    curl_easy_reset(c);
    struct curl_slist *h = NULL;
    if (accept)
        h = curl_slist_append(h, accept);
    if (p->auth[0])
        h = curl_slist_append(h, p->auth);
    if (p->range[0])
        h = curl_slist_append(h, p->range);
    agent_curl_call(c, url, h, on_body, p, "http,https", p->o->ca_file);
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(c, CURLOPT_MAXREDIRS, REDIRECTS_MAX);
    curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, CONNECT_TIMEOUT_S);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, p->o->timeout_s > 0 ? p->o->timeout_s
                                                              : PULL_TIMEOUT_DEFAULT_S);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, p);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, p);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    if (p->o->guard) {
        curl_easy_setopt(c, CURLOPT_OPENSOCKETFUNCTION, open_checked);
        curl_easy_setopt(c, CURLOPT_OPENSOCKETDATA, p);
    }
    p->refused[0] = '\0';
    if (p->o->rate_bytes_s > 0)
        curl_easy_setopt(c, CURLOPT_MAX_RECV_SPEED_LARGE, (curl_off_t)p->o->rate_bytes_s);
    if (p->basic && p->o->user) {
        curl_easy_setopt(c, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
        curl_easy_setopt(c, CURLOPT_USERNAME, p->o->user);
        curl_easy_setopt(c, CURLOPT_PASSWORD, p->o->password ? p->o->password : "");
    }
    p->challenge[0] = 0;
    CURLcode cr = curl_easy_perform(c);
    curl_slist_free_all(h);
    *status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
    if (p->too_big)
        return ts_err_set(err, TS_EINVAL, "larger than the %lld bytes it should have", p->max);
    if (cr != CURLE_OK && p->refused[0]) /* not a registry down: not tried again */
        return ts_err_set(err, TS_EINVAL, "registry %s: %s", p->ref->host, p->refused);
    if (cr != CURLE_OK)
        return ts_err_set(err, TS_EIO, "registry %s: %s", p->ref->host, curl_easy_strerror(cr));
    return 0;
}

/* key="value" out of a challenge's parameters. */
static bool challenge_param(const char *ch, const char *key, char *out, size_t n)
{
    size_t kl = strlen(key);
    for (const char *s = ch; (s = strcasestr(s, key));) {
        bool start = s == ch || s[-1] == ' ' || s[-1] == ',';
        if (start && s[kl] == '=' && s[kl + 1] == '"') {
            const char *v = s + kl + 2, *e = strchr(v, '"');
            if (!e || (size_t)(e - v) >= n)
                return false;
            memcpy(out, v, (size_t)(e - v));
            out[e - v] = 0;
            return true;
        }
        s += kl;
    }
    return false;
}

/* Answers a 401's challenge: a token from the realm, or basic credentials. */
static int authenticate(puller *p, ts_err *err)
{
    char ch[sizeof p->challenge];
    memcpy(ch, p->challenge, sizeof ch);
    if (!strncasecmp(ch, "Basic", 5)) {
        if (!p->o->user || p->basic)
            return ts_err_set(err, TS_EACCES, "registry %s: the image needs credentials "
                              "(a pull secret) it was not given or does not accept",
                              p->ref->host);
        p->basic = true;
        return 0;
    }
    char realm[1024], service[512] = "", scope[600] = "";
    if (strncasecmp(ch, "Bearer", 6) != 0 || !challenge_param(ch, "realm", realm, sizeof realm))
        return ts_err_set(err, TS_EIO, "registry %s: an authentication challenge this agent "
                          "does not know", p->ref->host);
    challenge_param(ch, "service", service, sizeof service);
    if (!challenge_param(ch, "scope", scope, sizeof scope))
        snprintf(scope, sizeof scope, "repository:%s:pull", p->ref->repo);
    char *es = curl_easy_escape(p->c, service, 0), *sc = curl_easy_escape(p->c, scope, 0);
    char url[2400];
    snprintf(url, sizeof url, "%s%sservice=%s&scope=%s", realm, strchr(realm, '?') ? "&" : "?",
             es ? es : "", sc ? sc : "");
    curl_free(es);
    curl_free(sc);
    char *mem = malloc(TOKEN_MAX_BYTES + 1);
    if (!mem)
        return ts_err_set(err, TS_ENOMEM, "out of memory");
    /* the caller's sink (a manifest buffer or a blob file) comes back after */
    char *saved_mem = p->mem;
    int saved_fd = p->fd;
    long long saved_max = p->max;
    char saved_range[sizeof p->range];
    memcpy(saved_range, p->range, sizeof saved_range);
    p->range[0] = 0;
    p->auth[0] = 0;
    p->basic = p->o->user != NULL; /* the token service takes the secret as basic */
    p->mem = mem, p->mem_n = 0, p->fd = -1, p->written = 0, p->max = TOKEN_MAX_BYTES;
    p->too_big = false;
    long status;
    int rc = get_once(p, url, NULL, &status, err);
    p->basic = false;
    if (!rc && status != 200)
        rc = status == 401 || status == 403
                 ? ts_err_set(err, TS_EACCES, "registry %s: the token service answered %ld: "
                              "the pull secret is missing or not accepted", p->ref->host, status)
                 : ts_err_set(err, TS_EIO, "registry %s: the token service answered %ld",
                              p->ref->host, status);
    json_t *j = rc ? NULL : json_loadb(mem, p->mem_n, 0, NULL);
    json_t *tok = json_object_get(j, "token");
    if (!json_is_string(tok))
        tok = json_object_get(j, "access_token");
    if (!rc && (!json_is_string(tok) || strlen(json_string_value(tok)) > sizeof p->auth - 40))
        rc = ts_err_set(err, TS_EIO, "registry %s: the token service gave no usable token",
                        p->ref->host);
    if (!rc)
        snprintf(p->auth, sizeof p->auth, "Authorization: Bearer %s", json_string_value(tok));
    json_decref(j);
    free(mem);
    p->mem = saved_mem, p->fd = saved_fd, p->max = saved_max;
    memcpy(p->range, saved_range, sizeof p->range);
    return rc;
}

/* GET with the challenge answered once. reset() is called before each try. */
static int get(puller *p, const char *url, const char *accept, long *status,
               void (*reset)(puller *), ts_err *err)
{
    for (int attempt = 0;; attempt++) {
        reset(p);
        int rc = get_once(p, url, accept, status, err);
        if (rc || *status != 401 || attempt == 1)
            return rc;
        rc = authenticate(p, err);
        if (rc)
            return rc;
    }
}

static void reset_mem(puller *p)
{
    p->mem_n = 0;
    p->mem[0] = 0;
    p->written = 0;
    p->too_big = false;
}

static void reset_file(puller *p)
{
    if (ftruncate(p->fd, 0) != 0 || lseek(p->fd, 0, SEEK_SET) != 0)
        p->too_big = true; /* reported as a failed fetch */
    gnutls_hash_deinit(p->hash, NULL);
    gnutls_hash_init(&p->hash, GNUTLS_DIG_SHA256);
    p->written = 0;
    p->too_big = false;
}

static int status_error(const puller *p, long status, const char *what, ts_err *err)
{
    const ts_image_ref *r = p->ref;
    const char *sep = r->digest[0] ? "@" : ":";
    const char *v = r->digest[0] ? r->digest : r->tag;
    if (status == 404)
        return ts_err_set(err, TS_ENOENT, "image %s/%s%s%s: %s not found (the registry "
                          "answered %ld)", r->host, r->repo, sep, v, what, status);
    if (status == 401 || status == 403) /* some registries say so of a repository they hide */
        return ts_err_set(err, TS_EACCES, "image %s/%s%s%s: %s: the registry refused access "
                          "(answered %ld): the pull secret is missing or not accepted, or "
                          "these credentials may not read it", r->host, r->repo, sep, v, what,
                          status);
    return ts_err_set(err, TS_EIO, "image %s/%s%s%s: %s: the registry answered %ld", r->host,
                      r->repo, sep, v, what, status);
}

static void hex_digest(const unsigned char *d, char *out)
{
    char *q = out + sprintf(out, "sha256:");
    for (int i = 0; i < SHA256_BYTES; i++)
        q += sprintf(q, "%02x", d[i]);
}

static void mem_digest(const char *b, size_t n, char *out)
{
    unsigned char d[SHA256_BYTES];
    gnutls_hash_fast(GNUTLS_DIG_SHA256, b, n, d);
    hex_digest(d, out);
}

/* The manifest named by `ref` (tag or digest) into p->mem. */
void agent_image_trace(const char *fmt, ...)
{
    static int on = -1; /* a race here writes the same value twice */
    if (on < 0) {
        const char *e = getenv("TESSERA_AGENT_IMAGE_TRACE");
        on = e && *e && strcmp(e, "0") != 0;
    }
    if (!on)
        return;
    char line[512];
    int n = snprintf(line, sizeof line, "image-trace %.3f ", agent_mono_s());
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    strcat(line, "\n");
    ssize_t w = write(2, line, strlen(line)); /* one write: lines of threads stay whole */
    (void)w;
}

static int get_manifest(puller *p, const char *ref, ts_err *err)
{
    char url[1200];
    snprintf(url, sizeof url, "%s/manifests/%s", p->base, ref);
    p->max = MANIFEST_MAX_BYTES;
    long status;
    int rc = get(p, url, MANIFEST_ACCEPT, &status, reset_mem, err);
    if (rc)
        return rc;
    if (status != 200)
        return status_error(p, status, "manifest", err);
    if (!strncmp(ref, "sha256:", 7)) {
        char d[TS_IMAGE_DIGEST_MAX];
        mem_digest(p->mem, p->mem_n, d);
        if (strcmp(d, ref) != 0)
            return ts_err_set(err, TS_EINVAL, "manifest %s: the registry sent bytes of "
                              "digest %s", ref, d);
    }
    return 0;
}

typedef struct origin_ctx {
    puller *p;
    const char *digest;
    long long size;
} origin_ctx;

/* One piece of a blob from the registry (ts_p2p_origin_fn): a Range GET,
 * retried with a doubling pause while the registry cannot be reached or
 * answers 5xx, so that a registry restarted mid-pull costs a pause, not
 * the pieces already there. */
static int origin_piece(void *ctx, long long off, long long len, char *buf, ts_err *err)
{
    origin_ctx *oc = ctx;
    puller *p = oc->p;
    char url[1200];
    snprintf(url, sizeof url, "%s/blobs/%s", p->base, oc->digest);
    char *saved_mem = p->mem;
    long pause_ns = ORIGIN_PAUSE_FIRST_NS;
    int rc = 0;
    for (int attempt = 0; attempt < ORIGIN_TRIES; attempt++) {
        snprintf(p->range, sizeof p->range, "Range: bytes=%lld-%lld", off, off + len - 1);
        p->mem = buf;
        p->fd = -1;
        p->max = len;
        long status;
        rc = get(p, url, NULL, &status, reset_mem, err);
        p->range[0] = 0;
        p->mem = saved_mem;
        bool whole = status == 200 && off == 0 && len == oc->size;
        if (!rc && (status == 206 || whole) && (long long)p->mem_n == len) {
            p->done += len;
            if (p->o->progress)
                p->o->progress(p->o->progress_ctx, p->done, p->total);
            return 0;
        }
        if (!rc && status >= 200 && status < 300)
            return ts_err_set(err, TS_EINVAL, "blob %s: the registry sent %zu bytes for a "
                              "piece of %lld (status %ld)", oc->digest, p->mem_n, len, status);
        if (!rc && status != 429 && status < 500)
            return status_error(p, status, oc->digest, err);
        if (!rc)
            rc = status_error(p, status, oc->digest, err);
        struct timespec ts = {pause_ns / 1000000000L, pause_ns % 1000000000L};
        nanosleep(&ts, NULL);
        pause_ns *= 2;
    }
    return rc;
}

/* The blob by pieces from peers and the registry (p2p.h) into tmp, then
 * renamed into place: verified whole by agent_p2p_fetch. */
static int fetch_blob_p2p(ts_image_store *st, puller *p, const char *digest, long long size,
                          const char *final, ts_err *err)
{
    char tmp[760];
    snprintf(tmp, sizeof tmp, "%s/tmp/blob-%.16s-XXXXXX", st->root, digest + 7);
    int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0)
        return ts_err_set(err, TS_EIO, "image store: %s: %s", tmp, strerror(errno));
    origin_ctx oc = {p, digest, size};
    ts_p2p_stats ps;
    const ts_p2p_in_order *follow = image_stream_follow(p->stream, p->layer, fd, digest, size);
    int rc = agent_p2p_fetch(p->o->p2p, digest, size, fd, origin_piece, &oc, p->o->rate_bytes_s,
                          follow, &ps, err);
    image_stream_end(p->stream, rc == 0); /* its unpack done before fd closes */
    if (p->o->from_origin)
        *p->o->from_origin += ps.from_origin;
    if (p->o->from_peers)
        *p->o->from_peers += ps.from_peers;
    if (p->o->refetched)
        *p->o->refetched += ps.refetched;
    agent_image_trace("blob %.19s verified (rc %d)", digest, rc);
    if (!rc && fsync(fd) != 0)
        rc = ts_err_set(err, TS_EIO, "image store: %s: %s", tmp, strerror(errno));
    close(fd);
    agent_image_trace("blob %.19s synced", digest);
    if (!rc && rename(tmp, final) != 0)
        rc = ts_err_set(err, TS_EIO, "image store: %s: %s", final, strerror(errno));
    agent_p2p_release(p->o->p2p, digest, rc == 0);
    if (rc)
        unlink(tmp);
    else
        p->done += ps.from_peers; /* the registry's pieces were counted as they came */
    return rc;
}

static int fetch_blob(ts_image_store *st, puller *p, const char *digest, long long size,
                      ts_err *err)
{
    char final[700], tmp[760];
    image_blob_path(st, digest, final, sizeof final);
    struct stat sb;
    if (stat(final, &sb) == 0 && sb.st_size == size) {
        p->done += size;
        return 0;
    }
    if (p->o->p2p && size >= TS_P2P_MIN_BLOB_BYTES)
        return fetch_blob_p2p(st, p, digest, size, final, err);
    char url[1200];
    snprintf(url, sizeof url, "%s/blobs/%s", p->base, digest);
    snprintf(tmp, sizeof tmp, "%s/tmp/blob-%.16s-XXXXXX", st->root, digest + 7);
    int rc = 0;
    for (int attempt = 0; attempt < BLOB_TRIES; attempt++) {
        p->fd = mkostemp(tmp, O_CLOEXEC);
        if (p->fd < 0)
            return ts_err_set(err, TS_EIO, "image store: %s: %s", tmp, strerror(errno));
        gnutls_hash_init(&p->hash, GNUTLS_DIG_SHA256);
        p->max = size;
        long status;
        /* the first try's bytes unpacked as they come, as a peer's pieces are */
        p->follow = attempt ? NULL : image_stream_follow(p->stream, p->layer, p->fd, digest, size);
        rc = get(p, url, NULL, &status, reset_file, err);
        unsigned char d[SHA256_BYTES];
        gnutls_hash_deinit(p->hash, d);
        char got[TS_IMAGE_DIGEST_MAX];
        hex_digest(d, got);
        if (p->follow) /* its unpack done before fd closes; a bad blob drops the tree */
            image_stream_end(p->stream, !rc && status == 200 && !strcmp(got, digest) &&
                                            p->written == size);
        p->follow = NULL;
        int fsrc = rc ? 0 : fsync(p->fd);
        close(p->fd);
        p->fd = -1;
        if (!rc && status != 200)
            rc = status_error(p, status, digest, err);
        else if (!rc && fsrc != 0)
            rc = ts_err_set(err, TS_EIO, "image store: %s: %s", tmp, strerror(errno));
        else if (!rc && (strcmp(got, digest) != 0 || p->written != size))
            rc = ts_err_set(err, TS_EINVAL, "blob %s: the registry sent %lld bytes of digest "
                            "%s (expected %lld): discarded", digest, p->written, got, size);
        if (!rc && rename(tmp, final) != 0)
            rc = ts_err_set(err, TS_EIO, "image store: %s: %s", final, strerror(errno));
        if (!rc) {
            p->done += size;
            if (p->o->from_origin)
                *p->o->from_origin += size;
            return 0;
        }
        unlink(tmp);
        snprintf(tmp, sizeof tmp, "%s/tmp/blob-%.16s-XXXXXX", st->root, digest + 7);
        if (rc != TS_EINVAL)
            break; /* only a bad blob is worth fetching again at once */
    }
    return rc;
}

/* The descriptor's digest and size, checked. */
static int descriptor(json_t *d, const char *field, const char **digest, long long *size,
                      ts_err *err)
{
    json_t *dg = json_object_get(d, "digest"), *sz = json_object_get(d, "size");
    if (!json_is_string(dg) || !ts_image_digest_ok(json_string_value(dg)))
        return ts_err_set(err, TS_EINVAL, "manifest: %s.digest: not a sha256 digest", field);
    if (!json_is_integer(sz) || json_integer_value(sz) < 0)
        return ts_err_set(err, TS_EINVAL, "manifest: %s.size: not a size", field);
    *digest = json_string_value(dg);
    *size = (long long)json_integer_value(sz);
    return 0;
}

/* An index's linux/amd64 manifest digest into out. */
static int pick_platform(json_t *index, char *out, ts_err *err)
{
    size_t i;
    json_t *m;
    json_array_foreach(json_object_get(index, "manifests"), i, m) {
        json_t *pl = json_object_get(m, "platform");
        const char *os = json_string_value(json_object_get(pl, "os"));
        const char *arch = json_string_value(json_object_get(pl, "architecture"));
        const char *dg = json_string_value(json_object_get(m, "digest"));
        if (os && arch && dg && !strcmp(os, "linux") && !strcmp(arch, "amd64") &&
            ts_image_digest_ok(dg)) {
            snprintf(out, TS_IMAGE_DIGEST_MAX, "%s", dg);
            return 0;
        }
    }
    return ts_err_set(err, TS_EINVAL, "image index: no linux/amd64 image in it");
}

static bool layer_type_ok(const char *mt)
{
    return !mt || (strstr(mt, "tar") && !strstr(mt, "zstd") && !strstr(mt, "nondistributable") &&
                   !strstr(mt, "foreign"));
}

/* The config's and the layers' blobs into the store, in order, each layer
 * that came piece by piece already unpacked as it came (p->stream); the
 * seconds and CPU seconds it took, where asked. */
static int fetch_all(ts_image_store *st, puller *p, const char *cfg, long long cfg_size,
                     const char *const *layers, const long long *sizes, size_t n, ts_err *err)
{
    p->layer = SIZE_MAX;
    int rc = fetch_blob(st, p, cfg, cfg_size, err);
    for (size_t i = 0; !rc && i < n; i++) {
        agent_image_trace("blob %.19s %lld bytes", layers[i], sizes[i]);
        p->layer = i;
        rc = fetch_blob(st, p, layers[i], sizes[i], err);
        agent_image_trace("blob %.19s in the store (rc %d)", layers[i], rc);
        char bp[700];
        image_blob_path(st, layers[i], bp, sizeof bp);
        if (!rc)
            image_stream_catch_up(p->stream, i, bp);
    }
    if (p->o->blobs_s)
        *p->o->blobs_s = agent_mono_s() - p->t0;
    struct rusage ru;
    if (p->o->blobs_cpu_s && getrusage(RUSAGE_SELF, &ru) == 0)
        *p->o->blobs_cpu_s = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                             (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
    return rc;
}

/* The new image digest stays while others go to keep the store within its
 * budget; when even alone it is too big, it goes (TS_ENOSPC). Under the
 * store's lock. */
static int within_budget(ts_image_store *st, const char *digest, ts_err *err)
{
    char dir[700], mark[800];
    image_dir(st, digest, dir, sizeof dir);
    snprintf(mark, sizeof mark, "%s/users/" PULL_MARK, dir);
    int fd = open(mark, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if (fd >= 0)
        close(fd);
    long long left = image_store_evict_locked(st, st->budget_bytes);
    unlink(mark);
    if (left <= st->budget_bytes)
        return 0;
    image_store_evict_locked(st, 0); /* only unused images go: this one now too */
    return ts_err_set(err, TS_ENOSPC, "image %s: %lld bytes on disk with it, over the "
                      "store's budget of %lld bytes", digest, left, st->budget_bytes);
}

static int pull(ts_image_store *st, puller *p, ts_image *out, ts_err *err)
{
    const ts_image_ref *ref = p->ref;
    int rc = get_manifest(p, ref->digest[0] ? ref->digest : ref->tag, err);
    if (rc)
        return rc;
    json_t *m = json_loadb(p->mem, p->mem_n, 0, NULL);
    if (!json_is_object(m)) {
        json_decref(m);
        return ts_err_set(err, TS_EINVAL, "manifest: not a JSON object");
    }
    if (json_is_array(json_object_get(m, "manifests"))) {
        char dg[TS_IMAGE_DIGEST_MAX];
        rc = pick_platform(m, dg, err);
        json_decref(m);
        if (rc || (rc = get_manifest(p, dg, err)))
            return rc;
        m = json_loadb(p->mem, p->mem_n, 0, NULL);
        if (!json_is_object(m)) {
            json_decref(m);
            return ts_err_set(err, TS_EINVAL, "manifest %s: not a JSON object", dg);
        }
    }
    char digest[TS_IMAGE_DIGEST_MAX];
    mem_digest(p->mem, p->mem_n, digest);
    agent_image_trace("manifest %.19s", digest);
    const char *cfg = NULL, *layers[LAYERS_MAX];
    long long cfg_size = 0, sizes[LAYERS_MAX];
    json_t *ls = json_object_get(m, "layers");
    size_t n = json_array_size(ls);
    rc = descriptor(json_object_get(m, "config"), "config", &cfg, &cfg_size, err);
    if (!rc && (!json_is_array(ls) || n > LAYERS_MAX))
        rc = ts_err_set(err, TS_EINVAL, "manifest: layers: an array of at most %d", LAYERS_MAX);
    p->total = cfg_size;
    for (size_t i = 0; !rc && i < n; i++) {
        json_t *l = json_array_get(ls, i);
        char f[32];
        snprintf(f, sizeof f, "layers[%zu]", i);
        rc = descriptor(l, f, &layers[i], &sizes[i], err);
        if (!rc && !layer_type_ok(json_string_value(json_object_get(l, "mediaType"))))
            rc = ts_err_set(err, TS_EINVAL, "manifest: %s.mediaType: \"%s\" is not a tar or "
                            "gzip layer", f, json_string_value(json_object_get(l, "mediaType")));
        p->total += rc ? 0 : sizes[i];
    }
    /* the store's lock is held for the store's changes only, never while the
     * registry answers: a slow registry holds up no other pull */
    int lk = rc ? -1 : image_store_lock(st, err);
    if (!rc && lk < 0)
        rc = err ? err->code : TS_EIO;
    bool found = !rc && image_store_find(st, digest, out);
    if (!rc && !found && st->budget_bytes > 0 &&
        image_store_evict_locked(st, st->budget_bytes - p->total) > st->budget_bytes - p->total)
        rc = ts_err_set(err, TS_ENOSPC, "image %s: its %lld bytes of blobs do not fit the "
                        "store's budget of %lld bytes beside the images tasks use", digest,
                        p->total, st->budget_bytes);
    if (!rc && found && p->o->use_as)
        rc = agent_image_use(st, digest, p->o->use_as, err);
    char name[TS_IMAGE_REF_MAX + 800];
    ts_image_ref_format(ref, name, sizeof name);
    if (!rc && found) /* the store's listing names it by this reference too */
        image_store_note_ref(st, digest, name);
    image_store_unlock(lk);
    if (rc || found) {
        json_decref(m);
        return rc;
    }
    /* the layers are unpacked as their bytes come (from peers or the
     * registry), into a staging tree used only once every layer in it is
     * verified */
    image_stream stream;
    image_stream_open(st, digest, &stream);
    p->stream = &stream;
    rc = fetch_all(st, p, cfg, cfg_size, layers, sizes, n, err);
    lk = rc ? -1 : image_store_lock(st, err);
    if (!rc && lk < 0)
        rc = err ? err->code : TS_EIO;
    found = !rc && image_store_find(st, digest, out); /* another pull made it meanwhile */
    for (size_t i = 0; !rc && !found && i <= n; i++) {
        char bp[700];
        struct stat sb;
        const char *d = i < n ? layers[i] : cfg;
        image_blob_path(st, d, bp, sizeof bp);
        if (stat(bp, &sb) != 0) /* evicted by another pull since it came: fetched again */
            rc = ts_err_set(err, TS_EIO, "blob %s: evicted while this pull ran; pulled again "
                            "at the next try", d);
    }
    if (!rc && !found)
        rc = image_store_prepare(st, digest, p->mem, p->mem_n, cfg, layers, n, p->stream, out,
                                 err);
    image_stream_close(p->stream);
    p->stream = NULL;
    agent_image_trace("prepared (rc %d)", rc);
    json_decref(m);
    if (!rc && !found && st->budget_bytes > 0)
        rc = within_budget(st, digest, err);
    if (!rc && p->o->use_as)
        rc = agent_image_use(st, digest, p->o->use_as, err);
    if (!rc)
        image_store_note_ref(st, digest, name);
    image_store_unlock(lk);
    return rc;
}

int agent_image_pull(ts_image_store *st, const ts_image_ref *ref, const ts_pull_opts *o,
                  ts_image *out, ts_err *err)
{
    static const ts_pull_opts none = {0};
    puller *p = calloc(1, sizeof *p);
    char *mem = malloc(MANIFEST_MAX_BYTES + 1);
    if (!p || !mem) {
        free(p);
        free(mem);
        return ts_err_set(err, TS_ENOMEM, "out of memory");
    }
    p->ref = ref;
    p->o = o ? o : &none;
    p->t0 = agent_mono_s();
    p->mem = mem;
    p->fd = -1;
    snprintf(p->base, sizeof p->base, "%s://%s/v2/%s", p->o->plain_http ? "http" : "https",
             ref->host, ref->repo);
    p->c = curl_easy_init();
    int rc;
    if (!p->c) {
        rc = ts_err_set(err, TS_ENOMEM, "curl: cannot start");
    } else {
        rc = pull(st, p, out, err);
        curl_easy_cleanup(p->c);
    }
    free(mem);
    free(p);
    return rc;
}
