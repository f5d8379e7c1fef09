/*
 * image_ref.c - what names a container image (tessera/image_ref.h).
 *
 * A reference is host[:port]/repo[:tag][@sha256:<hex>] with the character
 * rules of the OCI distribution specification (repository components in
 * lower case; a tag of at most 128 characters). The registry host is always
 * written out: a node pulls only from where the job said, never from an
 * implicit default registry.
 */
#define _DEFAULT_SOURCE
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "tessera/image_ref.h"

#define SHA256_BYTES 32
#define TAG_MAX_CHARS 128

bool ts_image_digest_ok(const char *s)
{
    if (!s || strncmp(s, "sha256:", 7) != 0 || strlen(s) != 7 + 2 * SHA256_BYTES)
        return false;
    for (const char *p = s + 7; *p; p++)
        if (!isdigit((unsigned char)*p) && !(*p >= 'a' && *p <= 'f'))
            return false;
    return true;
}

static bool host_ok(const char *h)
{
    const char *colon = strchr(h, ':');
    size_t name_len = colon ? (size_t)(colon - h) : strlen(h);
    if (name_len == 0)
        return false;
    for (size_t i = 0; i < name_len; i++)
        if (!isalnum((unsigned char)h[i]) && h[i] != '.' && h[i] != '-')
            return false;
    if (colon) {
        if (!colon[1] || strlen(colon + 1) > 5)
            return false;
        for (const char *p = colon + 1; *p; p++)
            if (!isdigit((unsigned char)*p))
                return false;
    }
    return colon || memchr(h, '.', name_len) || !strncmp(h, "localhost", name_len);
}

static bool repo_ok(const char *r)
{
    if (!*r || *r == '/' || r[strlen(r) - 1] == '/' || strstr(r, "//"))
        return false;
    for (const char *p = r; *p; p++) {
        bool sep = *p == '.' || *p == '_' || *p == '-';
        if (!(islower((unsigned char)*p) || isdigit((unsigned char)*p) || *p == '/' || sep))
            return false;
        if (sep && (p == r || p[-1] == '/' || !p[1] || p[1] == '/'))
            return false; /* separators only between alphanumerics */
    }
    return true;
}

static bool tag_ok(const char *t)
{
    size_t n = strlen(t);
    if (n == 0 || n > TAG_MAX_CHARS || t[0] == '.' || t[0] == '-')
        return false;
    for (const char *p = t; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '_' && *p != '.' && *p != '-')
            return false;
    return true;
}

int ts_image_ref_parse(const char *text, const char *field, ts_image_ref *out, ts_err *err)
{
    const char *f = field ? field : "image";
    memset(out, 0, sizeof *out);
    if (!text || !*text)
        return ts_err_set(err, TS_EINVAL, "%s: empty", f);
    if (strlen(text) >= TS_IMAGE_REF_MAX)
        return ts_err_set(err, TS_EINVAL, "%s: longer than %d characters", f,
                          TS_IMAGE_REF_MAX - 1);
    char buf[TS_IMAGE_REF_MAX];
    snprintf(buf, sizeof buf, "%s", text);
    char *at = strchr(buf, '@');
    if (at) {
        *at = 0;
        if (!ts_image_digest_ok(at + 1))
            return ts_err_set(err, TS_EINVAL, "%s: the digest must be sha256: and 64 "
                              "lower-case hex digits", f);
        memcpy(out->digest, at + 1, strlen(at + 1) + 1);
    }
    char *slash = strchr(buf, '/');
    if (!slash)
        return ts_err_set(err, TS_EINVAL, "%s: must name the registry: host[:port]/repo[:tag]",
                          f);
    *slash = 0;
    if (!host_ok(buf) || strlen(buf) >= sizeof out->host)
        return ts_err_set(err, TS_EINVAL, "%s: \"%s\" is not a registry host[:port] (a host "
                          "name with a dot, a port, or localhost)", f, buf);
    memcpy(out->host, buf, strlen(buf) + 1);
    char *repo = slash + 1, *last = strrchr(repo, '/');
    char *colon = strchr(last ? last : repo, ':');
    if (colon) {
        *colon = 0;
        if (!tag_ok(colon + 1))
            return ts_err_set(err, TS_EINVAL, "%s: tag \"%s\": 1..%d of A-Z a-z 0-9 _ . - "
                              "(not first . or -)", f, colon + 1, TAG_MAX_CHARS);
        memcpy(out->tag, colon + 1, strlen(colon + 1) + 1);
    }
    if (!repo_ok(repo) || strlen(repo) >= sizeof out->repo)
        return ts_err_set(err, TS_EINVAL, "%s: repository \"%s\": lower-case letters, digits "
                          "and . _ - between them, components split by /", f, repo);
    memcpy(out->repo, repo, strlen(repo) + 1);
    if (!out->tag[0] && !out->digest[0])
        snprintf(out->tag, sizeof out->tag, "latest");
    return 0;
}

void ts_image_ref_format(const ts_image_ref *r, char *out, size_t n)
{
    snprintf(out, n, "%s/%s%s%s%s%s", r->host, r->repo, r->tag[0] ? ":" : "", r->tag,
             r->digest[0] ? "@" : "", r->digest);
}
