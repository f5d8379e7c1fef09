/*
 * auth.c - API tokens: random secrets ("tsk_" + 256 bits in base64url),
 * stored only as their SHA-256, and the first admin token, written at first
 * start to a file only its owner can read.
 */
#include <errno.h>
#include <fcntl.h>
#include <gnutls/crypto.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "ctld/ctld.h"

#define SECRET_BYTES 32

int ctld_token_new_secret(char *out, size_t size)
{
    static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    uint8_t raw[SECRET_BYTES];
    size_t got = 0;
    while (got < sizeof raw) {
        ssize_t k = getrandom(raw + got, sizeof raw - got, 0);
        if (k < 0 && errno != EINTR)
            return TS_EIO;
        if (k > 0)
            got += (size_t)k;
    }
    size_t need = 4 + (SECRET_BYTES * 8 + 5) / 6 + 1;
    if (size < need)
        return TS_EINVAL;
    memcpy(out, "tsk_", 4);
    size_t o = 4;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < sizeof raw; i++) {
        acc = acc << 8 | raw[i];
        bits += 8;
        while (bits >= 6) {
            out[o++] = B64[(acc >> (bits - 6)) & 63];
            bits -= 6;
        }
    }
    if (bits > 0)
        out[o++] = B64[(acc << (6 - bits)) & 63];
    out[o] = '\0';
    return 0;
}

void ctld_token_hash(const char *secret, uint8_t hash[TS_TOKEN_HASH_BYTES])
{
    gnutls_hash_fast(GNUTLS_DIG_SHA256, secret, strlen(secret), hash);
}

int ctld_bootstrap_admin(ctld *c, ts_err *err)
{
    ts_token_row *rows = NULL;
    int n = 0;
    int rc = ts_store_token_list(c->store, NULL, &rows, &n, err);
    free(rows);
    if (rc != 0 || n > 0)
        return rc;
    char path[CTLD_PATH_MAX];
    if (c->cfg.admin_token_file[0])
        snprintf(path, sizeof path, "%s", c->cfg.admin_token_file);
    else if (snprintf(path, sizeof path, "%s/admin.token", c->cfg.state_dir) >= (int)sizeof path)
        return ts_err_set(err, TS_EINVAL, "state_dir: path too long");
    char secret[128];
    if (ctld_token_new_secret(secret, sizeof secret) != 0)
        return ts_err_set(err, TS_EIO, "cannot draw random bytes for the admin token");
    ts_token_row t = {.role = TS_ROLE_ADMIN, .created_s = ctld_now()};
    snprintf(t.name, sizeof t.name, "admin");
    ctld_token_hash(secret, t.hash);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0)
        return ts_err_set(err, TS_EIO, "admin_token_file %s: %s", path, strerror(errno));
    size_t len = strlen(secret);
    bool ok = write(fd, secret, len) == (ssize_t)len && write(fd, "\n", 1) == 1 && fsync(fd) == 0;
    close(fd);
    if (!ok)
        return ts_err_set(err, TS_EIO, "admin_token_file %s: cannot write", path);
    return ts_store_token_insert(c->store, &t, err);
}
