/*
 * image_digest.c - the sha256 of a file, as an image's blobs are named,
 * computed with GnuTLS (the TLS library already under libcurl and
 * libmicrohttpd).
 */
#define _DEFAULT_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <gnutls/crypto.h>

#include "image.h"

#define SHA256_BYTES 32
#define HASH_CHUNK_BYTES 65536

int agent_image_file_digest(const char *path, char *out, ts_err *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return ts_err_set(err, TS_ENOENT, "%s: %s", path, strerror(errno));
    gnutls_hash_hd_t h;
    if (gnutls_hash_init(&h, GNUTLS_DIG_SHA256) < 0) {
        close(fd);
        return ts_err_set(err, TS_ENOMEM, "sha256: cannot start");
    }
    static __thread unsigned char buf[HASH_CHUNK_BYTES];
    int rc = 0;
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rc = ts_err_set(err, TS_EIO, "%s: %s", path, strerror(errno));
            break;
        }
        if (n == 0)
            break;
        gnutls_hash(h, buf, (size_t)n);
    }
    unsigned char d[SHA256_BYTES];
    gnutls_hash_deinit(h, d);
    close(fd);
    if (rc)
        return rc;
    char *p = out + sprintf(out, "sha256:");
    for (int i = 0; i < SHA256_BYTES; i++)
        p += sprintf(p, "%02x", d[i]);
    return 0;
}
