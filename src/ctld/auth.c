/*
 * auth.c - API tokens: random secrets ("tsk_" + 256 bits in base64url),
 * stored only as their SHA-256, and the first admin token, written at first
 * start to a file only its owner can read.
 *
 * Also the state files' modes: the database holds every job's environment
 * (tokens for model hubs, for instance), so state_dir must be closed to
 * group and others (tesserad refuses to start otherwise), and the database,
 * its WAL and SHM files and the admin token file are made 0600 at every
 * start and created so, whatever mode an earlier file had.
 *
 * The first admin token has the Unix identity admin_unix_user names (its
 * uid looked up here, on the controller's host), or none.
 */
#include <errno.h>
#include <fcntl.h>
#include <gnutls/crypto.h>
#include <pwd.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ctld/ctld.h"
#include "ctld/http.h"

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
    if (c->cfg.admin_unix_user[0]) {
        struct passwd *pw = getpwnam(c->cfg.admin_unix_user);
        if (!pw)
            return ts_err_set(err, TS_EINVAL, "admin_unix_user: no user \"%s\" on this host",
                              c->cfg.admin_unix_user);
        snprintf(t.unix_user, sizeof t.unix_user, "%s", pw->pw_name);
        t.uid = pw->pw_uid;
    }
    ctld_token_hash(secret, t.hash);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return ts_err_set(err, TS_EIO, "admin_token_file %s: %s", path, strerror(errno));
    /* O_CREAT's mode applies to a new file only: an existing one keeps its
     * own until changed, before the secret is in it */
    if (fchmod(fd, 0600) != 0) {
        int e = errno;
        close(fd);
        return ts_err_set(err, TS_EIO, "admin_token_file %s: chmod 0600: %s", path, strerror(e));
    }
    size_t len = strlen(secret);
    bool ok = write(fd, secret, len) == (ssize_t)len && write(fd, "\n", 1) == 1 && fsync(fd) == 0;
    close(fd);
    if (!ok)
        return ts_err_set(err, TS_EIO, "admin_token_file %s: cannot write", path);
    return ts_store_token_insert(c->store, &t, err);
}

/* chmod 0600 path if it exists; 0 or an error naming it. */
static int make_private(const char *what, const char *path, ts_err *err)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return errno == ENOENT ? 0 : ts_err_set(err, TS_EIO, "%s %s: %s", what, path, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return ts_err_set(err, TS_EINVAL, "%s %s: not a regular file", what, path);
    if ((st.st_mode & 077) && chmod(path, 0600) != 0)
        return ts_err_set(err, TS_EIO, "%s %s: chmod 0600: %s", what, path, strerror(errno));
    return 0;
}

int ctld_state_secure(const ctld_config *cfg, ts_err *err)
{
    /* what tesserad creates from now on (the SQLite files among it) is 0600 */
    umask(077);
    const char *dir = cfg->state_dir;
    struct stat st;
    if (stat(dir, &st) != 0) {
        if (errno != ENOENT)
            return ts_err_set(err, TS_EIO, "state_dir %s: %s", dir, strerror(errno));
        if (mkdir(dir, 0700) != 0 && errno != EEXIST)
            return ts_err_set(err, TS_EIO, "state_dir %s: cannot create it: %s", dir,
                              strerror(errno));
        if (stat(dir, &st) != 0)
            return ts_err_set(err, TS_EIO, "state_dir %s: %s", dir, strerror(errno));
    }
    if (!S_ISDIR(st.st_mode))
        return ts_err_set(err, TS_EINVAL, "state_dir %s: not a directory", dir);
    if (st.st_mode & 077)
        return ts_err_set(err, TS_EINVAL, "state_dir %s: mode %04o lets group or others in; it "
                          "holds every job's environment and the admin token: chmod 700 %s",
                          dir, (unsigned)(st.st_mode & 07777), dir);
    char path[CTLD_PATH_MAX + 16];
    const char *url = cfg->store_url;
    bool sqlite = strncmp(url, "postgresql://", 13) != 0 && strncmp(url, "postgres://", 11) != 0;
    if (sqlite) {
        const char *db = strncmp(url, "sqlite:", 7) == 0 ? url + 7 : url;
        static const char *const suffix[] = {"", "-wal", "-shm", "-journal"};
        for (int i = 0; i < 4; i++) {
            snprintf(path, sizeof path, "%s%s", db, suffix[i]);
            int rc = make_private("store", path, err);
            if (rc != 0)
                return rc;
        }
    }
    if (cfg->admin_token_file[0])
        snprintf(path, sizeof path, "%s", cfg->admin_token_file);
    else
        snprintf(path, sizeof path, "%s/admin.token", dir);
    return make_private("admin_token_file", path, err);
}
