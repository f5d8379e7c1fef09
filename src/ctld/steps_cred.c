/*
 * steps_cred.c - the step credential (steps.h): what a batch job's task
 * shows the controller to start and read that job's steps. It is
 * "tsstep_<job>_<HMAC-SHA256(key, "tessera-step:<job>") in hex>": checked
 * by its MAC alone (no store read, nothing to revoke: it names one job and
 * is worth nothing once that job ended), under a key of 32 random bytes
 * kept in <state_dir>/step.key (0600), made at the first start and read
 * at every later one, so that a restarted controller takes the
 * credentials of the jobs that run on.
 */
#define _DEFAULT_SOURCE /* getrandom */
#include <errno.h>
#include <fcntl.h>
#include <gnutls/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "ctld/steps.h"

#define STEP_KEY_BYTES 32

int ctld_step_key_load(ctld *c, ts_err *err)
{
    char path[CTLD_PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/step.key", c->cfg.state_dir);
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t k = read(fd, c->step_key, sizeof c->step_key);
        close(fd);
        if (k == (ssize_t)sizeof c->step_key) {
            c->step_key_ok = true;
            return 0;
        }
        return ts_err_set(err, TS_EINVAL, "%s: not %d bytes (remove it: a new key is made, and "
                          "the step credentials of running jobs stop working)", path,
                          STEP_KEY_BYTES);
    }
    size_t got = 0;
    while (got < sizeof c->step_key) {
        ssize_t k = getrandom(c->step_key + got, sizeof c->step_key - got, 0);
        if (k < 0 && errno != EINTR)
            return ts_err_set(err, TS_EIO, "step key: getrandom: %s", strerror(errno));
        if (k > 0)
            got += (size_t)k;
    }
    char tmp[CTLD_PATH_MAX + 24];
    snprintf(tmp, sizeof tmp, "%s.new", path);
    unlink(tmp);
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 || write(fd, c->step_key, sizeof c->step_key) != (ssize_t)sizeof c->step_key ||
        fsync(fd) != 0 || rename(tmp, path) != 0) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        unlink(tmp);
        return ts_err_set(err, TS_EIO, "%s: %s", path, strerror(e));
    }
    close(fd);
    c->step_key_ok = true;
    return 0;
}

static int step_mac(const ctld *c, int64_t id, char hex[65])
{
    char msg[48];
    int len = snprintf(msg, sizeof msg, "tessera-step:%lld", (long long)id);
    uint8_t mac[32];
    if (!c->step_key_ok ||
        gnutls_hmac_fast(GNUTLS_MAC_SHA256, c->step_key, sizeof c->step_key, msg, (size_t)len,
                         mac) != 0)
        return TS_EINVAL;
    for (int i = 0; i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", mac[i]);
    return 0;
}

int ctld_step_token(const ctld *c, int64_t id, char *out, size_t size)
{
    char hex[65];
    if (step_mac(c, id, hex) != 0)
        return TS_EINVAL;
    snprintf(out, size, CTLD_STEP_TOKEN_PREFIX "%lld_%s", (long long)id, hex);
    return 0;
}

int64_t ctld_step_token_job(const ctld *c, const char *token)
{
    size_t pl = strlen(CTLD_STEP_TOKEN_PREFIX);
    if (strncmp(token, CTLD_STEP_TOKEN_PREFIX, pl) != 0)
        return 0;
    char *end;
    errno = 0;
    long long id = strtoll(token + pl, &end, 10);
    char hex[65];
    if (errno || id <= 0 || *end != '_' || strlen(end + 1) != 64 || step_mac(c, id, hex) != 0)
        return 0;
    unsigned diff = 0; /* compared in constant time */
    for (int i = 0; i < 64; i++)
        diff |= (unsigned)(hex[i] ^ end[1 + i]);
    return diff == 0 ? id : 0;
}

