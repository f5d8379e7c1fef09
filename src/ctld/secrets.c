/*
 * secrets.c - the secret store: key file, AES-256-GCM and the stored
 * document of ciphertexts (secrets.h, docs/secrets.md).
 *
 * The key file holds one key per line, 64 hex digits (comments start with
 * #); the first encrypts, every one decrypts, so a rotation can be staged.
 * A key's id is the first 8 hex digits of its SHA-256, kept with each
 * ciphertext. The store's settings document "secrets" is
 *   {"secrets": [{"tenant", "owner", "name", "key", "nonce", "ct",
 *                 "updated"}]}
 * where nonce (12 bytes) and ct (ciphertext then the 16-byte tag) are hex.
 * The associated data "tenant\nowner\nname" binds a value to its row.
 * No value is ever logged or put in an error message: errors name the
 * secret and the key file only.
 */
#include <errno.h>
#include <fcntl.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ctld/secrets.h"

#define SETTING_KEY "secrets"
#define NONCE_BYTES 12
#define TAG_BYTES 16
#define KEY_ID_CHARS 8
#define KEY_FILE_MAX_BYTES 4096

typedef struct secret_key {
    uint8_t k[CTLD_SECRET_KEY_BYTES];
    char id[KEY_ID_CHARS + 1];
} secret_key;

struct ctld_secrets {
    ts_store *store;
    secret_key keys[CTLD_SECRET_KEYS_MAX]; /* keys[0] encrypts */
    int nkeys;
    pthread_mutex_t wmu; /* one writer at a time, across its durable write */
    pthread_mutex_t mu;  /* doc: swapped by writers, read briefly */
    json_t *doc;         /* the stored document: ciphertexts only */
};

/* ---- hex, keys --------------------------------------------------------------- */

static void hex_of(const uint8_t *p, size_t n, char *out)
{
    static const char H[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = H[p[i] >> 4];
        out[2 * i + 1] = H[p[i] & 15];
    }
    out[2 * n] = '\0';
}

static int nibble(char ch)
{
    return ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
                                          : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10 : -1;
}

/* Decodes exactly n bytes of hex from s (2n digits, nothing after). */
static bool unhex(const char *s, uint8_t *out, size_t n)
{
    if (!s || strlen(s) != 2 * n)
        return false;
    for (size_t i = 0; i < n; i++) {
        int a = nibble(s[2 * i]), b = nibble(s[2 * i + 1]);
        if (a < 0 || b < 0)
            return false;
        out[i] = (uint8_t)(a << 4 | b);
    }
    return true;
}

static void key_id(secret_key *k)
{
    uint8_t h[32];
    gnutls_hash_fast(GNUTLS_DIG_SHA256, k->k, sizeof k->k, h);
    hex_of(h, KEY_ID_CHARS / 2, k->id);
}

/* Reads a key file: refused when group or others may read it. TS_ENOENT
 * when it does not exist. */
static int keys_read(const char *path, secret_key *keys, int *n, ts_err *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return ts_err_set(err, errno == ENOENT ? TS_ENOENT : TS_EIO, "secrets_key_file %s: %s",
                          path, strerror(errno));
    struct stat st;
    char buf[KEY_FILE_MAX_BYTES + 1];
    ssize_t got = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? read(fd, buf, sizeof buf) : -1;
    close(fd);
    if (got < 0)
        return ts_err_set(err, TS_EIO, "secrets_key_file %s: not a readable file", path);
    if (st.st_mode & 077)
        return ts_err_set(err, TS_EINVAL, "secrets_key_file %s: mode %03o lets others read "
                          "it: chmod 600", path, (unsigned)(st.st_mode & 0777));
    if (got > KEY_FILE_MAX_BYTES)
        return ts_err_set(err, TS_EINVAL, "secrets_key_file %s: larger than %d bytes", path,
                          KEY_FILE_MAX_BYTES);
    buf[got] = '\0';
    *n = 0;
    int line = 0;
    for (char *save = NULL, *l = strtok_r(buf, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        line++;
        l += strspn(l, " \t");
        l[strcspn(l, " \t\r")] = '\0';
        if (!*l || *l == '#')
            continue;
        if (*n == CTLD_SECRET_KEYS_MAX)
            return ts_err_set(err, TS_EINVAL, "secrets_key_file %s: more than %d keys", path,
                              CTLD_SECRET_KEYS_MAX);
        if (!unhex(l, keys[*n].k, CTLD_SECRET_KEY_BYTES))
            return ts_err_set(err, TS_EINVAL, "secrets_key_file %s: line %d: want a key of 64 "
                              "hex digits (tesserad --gen-secrets-key FILE makes one)", path,
                              line);
        key_id(&keys[(*n)++]);
    }
    if (*n == 0)
        return ts_err_set(err, TS_EINVAL, "secrets_key_file %s: no key in it", path);
    return 0;
}

int ctld_secrets_keygen(const char *path, ts_err *err)
{
    uint8_t k[CTLD_SECRET_KEY_BYTES];
    if (gnutls_rnd(GNUTLS_RND_KEY, k, sizeof k) != 0)
        return ts_err_set(err, TS_EIO, "secrets key: no random bytes");
    char text[2 * CTLD_SECRET_KEY_BYTES + 128];
    char hex[2 * CTLD_SECRET_KEY_BYTES + 1];
    hex_of(k, sizeof k, hex);
    int len = snprintf(text, sizeof text, "# tesserad secrets key (docs/secrets.md); keep it "
                       "out of backups of the store\n%s\n", hex);
    gnutls_memset(k, 0, sizeof k);
    gnutls_memset(hex, 0, sizeof hex);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return ts_err_set(err, errno == EEXIST ? TS_EEXIST : TS_EIO,
                          "secrets_key_file %s: %s%s", path, strerror(errno),
                          errno == EEXIST ? " (not overwritten)" : "");
    bool ok = write(fd, text, (size_t)len) == len && fsync(fd) == 0;
    gnutls_memset(text, 0, sizeof text);
    if (close(fd) != 0 || !ok) {
        unlink(path);
        return ts_err_set(err, TS_EIO, "secrets_key_file %s: cannot write it", path);
    }
    return 0;
}

/* ---- AES-256-GCM ------------------------------------------------------------- */

static size_t ad_of(const char *tenant, const char *owner, const char *name, char *ad,
                    size_t size)
{
    int n = snprintf(ad, size, "%s\n%s\n%s", tenant, owner, name);
    return n > 0 && (size_t)n < size ? (size_t)n : 0;
}

/* A new {tenant, owner, name, key, nonce, ct} entry for the value. */
static json_t *seal(const secret_key *k, const char *tenant, const char *owner,
                    const char *name, const char *value, size_t len, ts_err *err)
{
    uint8_t nonce[NONCE_BYTES];
    char ad[3 * TS_STORE_NAME_MAX + 4];
    size_t adl = ad_of(tenant, owner, name, ad, sizeof ad);
    size_t ctl = len + TAG_BYTES;
    uint8_t *ct = malloc(ctl);
    char *hex = malloc(2 * ctl + 1);
    gnutls_aead_cipher_hd_t h = NULL;
    gnutls_datum_t kd = {(unsigned char *)k->k, sizeof k->k};
    json_t *e = NULL;
    if (!ct || !hex) {
        ts_err_set(err, TS_ENOMEM, "secret %s: out of memory", name);
    } else if (gnutls_rnd(GNUTLS_RND_NONCE, nonce, sizeof nonce) != 0 ||
               gnutls_aead_cipher_init(&h, GNUTLS_CIPHER_AES_256_GCM, &kd) != 0 ||
               gnutls_aead_cipher_encrypt(h, nonce, sizeof nonce, ad, adl, TAG_BYTES, value, len,
                                          ct, &ctl) != 0) {
        ts_err_set(err, TS_EIO, "secret %s: encryption failed", name);
    } else {
        char nh[2 * NONCE_BYTES + 1];
        hex_of(nonce, sizeof nonce, nh);
        hex_of(ct, ctl, hex);
        e = json_pack("{s:s,s:s,s:s,s:s,s:s,s:s}", "tenant", tenant, "owner", owner, "name",
                      name, "key", k->id, "nonce", nh, "ct", hex);
        if (!e)
            ts_err_set(err, TS_ENOMEM, "secret %s: out of memory", name);
    }
    if (h)
        gnutls_aead_cipher_deinit(h);
    free(ct);
    free(hex);
    return e;
}

static const char *str_of(const json_t *e, const char *k)
{
    const char *s = json_string_value(json_object_get(e, k));
    return s ? s : "";
}

/* Decrypts entry e with the key its id names: *value malloc'd, NUL-ended. */
static int unseal(const secret_key *keys, int nkeys, const json_t *e, char **value, size_t *len,
                  ts_err *err)
{
    const char *name = str_of(e, "name"), *kid = str_of(e, "key"), *cth = str_of(e, "ct");
    const secret_key *k = NULL;
    for (int i = 0; i < nkeys && !k; i++)
        if (strcmp(keys[i].id, kid) == 0)
            k = &keys[i];
    if (!k)
        return ts_err_set(err, TS_EINVAL, "secret %s/%s/%s: encrypted with key %s, which the "
                          "key file lacks", str_of(e, "tenant"), str_of(e, "owner"), name, kid);
    size_t ctl = strlen(cth) / 2;
    uint8_t nonce[NONCE_BYTES];
    uint8_t *ct = malloc(ctl + 1);
    char *pt = malloc(ctl + 1);
    char ad[3 * TS_STORE_NAME_MAX + 4];
    size_t adl = ad_of(str_of(e, "tenant"), str_of(e, "owner"), name, ad, sizeof ad);
    gnutls_aead_cipher_hd_t h = NULL;
    gnutls_datum_t kd = {(unsigned char *)k->k, sizeof k->k};
    size_t ptl = ctl;
    int rc = 0;
    if (!ct || !pt)
        rc = ts_err_set(err, TS_ENOMEM, "secret %s: out of memory", name);
    else if (ctl < TAG_BYTES || !unhex(str_of(e, "nonce"), nonce, sizeof nonce) ||
             !unhex(cth, ct, ctl) || gnutls_aead_cipher_init(&h, GNUTLS_CIPHER_AES_256_GCM, &kd) ||
             gnutls_aead_cipher_decrypt(h, nonce, sizeof nonce, ad, adl, TAG_BYTES, ct, ctl, pt,
                                        &ptl) != 0)
        rc = ts_err_set(err, TS_EINVAL, "secret %s/%s/%s: does not decrypt with key %s (a "
                        "wrong key file, or the store was altered)", str_of(e, "tenant"),
                        str_of(e, "owner"), name, kid);
    if (h)
        gnutls_aead_cipher_deinit(h);
    free(ct);
    if (rc != 0) {
        free(pt);
        return rc;
    }
    pt[ptl] = '\0';
    *value = pt;
    *len = ptl;
    return 0;
}

void ctld_secret_free(char *value, size_t len)
{
    if (value)
        gnutls_memset(value, 0, len);
    free(value);
}

/* ---- the stored document ------------------------------------------------------- */

static int doc_load(ts_store *store, json_t **out, ts_err *err)
{
    char *text = NULL;
    int rc = ts_store_setting_get(store, SETTING_KEY, &text, err);
    if (rc != 0)
        return rc;
    json_error_t je;
    json_t *doc = text ? json_loads(text, 0, &je) : json_pack("{s:[]}", "secrets");
    free(text);
    if (!doc || !json_is_array(json_object_get(doc, "secrets"))) {
        json_decref(doc);
        return ts_err_set(err, TS_EINVAL, "store: the secrets document is not readable");
    }
    *out = doc;
    return 0;
}

static int doc_store(ts_store *store, const json_t *doc, ts_err *err)
{
    char *text = json_dumps(doc, JSON_COMPACT);
    if (!text)
        return ts_err_set(err, TS_ENOMEM, "secrets: out of memory");
    int rc = ts_store_setting_put(store, SETTING_KEY, text, err);
    free(text);
    return rc;
}

/* Every entry decrypts with these keys (the check at start). */
static int doc_check(const secret_key *keys, int nkeys, const json_t *doc, ts_err *err)
{
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(doc, "secrets"), i, e)
    {
        char *v;
        size_t len;
        int rc = unseal(keys, nkeys, e, &v, &len, err);
        if (rc != 0)
            return rc;
        ctld_secret_free(v, len);
    }
    return 0;
}

/* The bytes of every stored value but the one at `skip` (-1: none). */
/* The bytes of one stored entry's value (its hex ciphertext less the tag) */
static size_t entry_bytes(const json_t *e) { return strlen(str_of(e, "ct")) / 2 - TAG_BYTES; }

static size_t doc_bytes(const json_t *doc, ssize_t skip)
{
    size_t i, sum = 0;
    json_t *e;
    json_array_foreach(json_object_get(doc, "secrets"), i, e)
        if ((ssize_t)i != skip)
            sum += entry_bytes(e);
    return sum;
}

/* What one tenant's secrets take: how many and their values' bytes, the
 * entry at skip (the one a set replaces) left out */
static void doc_tenant_use(const json_t *doc, const char *tenant, ssize_t skip, size_t *n,
                           size_t *bytes)
{
    size_t i;
    json_t *e;
    *n = *bytes = 0;
    json_array_foreach(json_object_get(doc, "secrets"), i, e)
        if ((ssize_t)i != skip && strcmp(str_of(e, "tenant"), tenant) == 0) {
            (*n)++;
            *bytes += entry_bytes(e);
        }
}

static ssize_t doc_find(const json_t *doc, const char *tenant, const char *owner,
                        const char *name)
{
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(doc, "secrets"), i, e)
        if (strcmp(str_of(e, "tenant"), tenant) == 0 && strcmp(str_of(e, "owner"), owner) == 0 &&
            strcmp(str_of(e, "name"), name) == 0)
            return (ssize_t)i;
    return -1;
}

/* ---- the object ---------------------------------------------------------------- */

int ctld_secrets_open(ts_store *store, const char *key_file, bool create_key,
                      ctld_secrets **out, ts_err *err)
{
    ctld_secrets *s = calloc(1, sizeof *s);
    if (!s)
        return ts_err_set(err, TS_ENOMEM, "out of memory");
    s->store = store;
    pthread_mutex_init(&s->wmu, NULL);
    pthread_mutex_init(&s->mu, NULL);
    int rc = doc_load(store, &s->doc, err);
    size_t stored = rc == 0 ? json_array_size(json_object_get(s->doc, "secrets")) : 0;
    if (rc == 0) {
        rc = keys_read(key_file, s->keys, &s->nkeys, err);
        if (rc == TS_ENOENT && stored > 0)
            rc = ts_err_set(err, TS_EINVAL, "secrets_key_file %s: missing, and the store holds %zu "
                       "encrypted secrets: give the key file they were encrypted with (or "
                       "delete the secrets, docs/secrets.md)", key_file, stored);
        else if (rc == TS_ENOENT && create_key && (rc = ctld_secrets_keygen(key_file, err)) == 0)
            rc = keys_read(key_file, s->keys, &s->nkeys, err);
    }
    if (rc == 0 && (rc = doc_check(s->keys, s->nkeys, s->doc, err)) != 0)
        ts_err_prefix(err, "secrets_key_file %s: wrong key: ", key_file);
    if (rc != 0) {
        ctld_secrets_close(s);
        return rc;
    }
    *out = s;
    return 0;
}

void ctld_secrets_close(ctld_secrets *s)
{
    if (!s)
        return;
    gnutls_memset(s->keys, 0, sizeof s->keys);
    json_decref(s->doc);
    pthread_mutex_destroy(&s->wmu);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

/* The document as it is now, copied (writers change the copy). */
static json_t *doc_copy(ctld_secrets *s)
{
    pthread_mutex_lock(&s->mu);
    json_t *d = json_deep_copy(s->doc);
    pthread_mutex_unlock(&s->mu);
    return d;
}

static void doc_swap(ctld_secrets *s, json_t *d)
{
    pthread_mutex_lock(&s->mu);
    json_t *old = s->doc;
    s->doc = d;
    pthread_mutex_unlock(&s->mu);
    json_decref(old);
}

/* The end of a change made on a copy d under wmu (rc: whether it was made):
 * written to the store, then swapped in, else dropped; wmu released. */
static int doc_commit(ctld_secrets *s, json_t *d, int rc, ts_err *err)
{
    if (rc == 0)
        rc = doc_store(s->store, d, err);
    if (rc == 0)
        doc_swap(s, d);
    else
        json_decref(d);
    pthread_mutex_unlock(&s->wmu);
    return rc;
}

int ctld_secrets_set(ctld_secrets *s, const char *tenant, const char *owner, const char *name,
                     const char *value, size_t len, double now, bool *created, ts_err *err)
{
    if (len > CTLD_SECRET_VALUE_MAX)
        return ts_err_set(err, TS_EINVAL, "value: %zu bytes, at most %d", len,
                          CTLD_SECRET_VALUE_MAX);
    json_t *e = seal(&s->keys[0], tenant, owner, name, value, len, err);
    if (!e)
        return err->code;
    json_object_set_new(e, "updated", json_real(now));
    pthread_mutex_lock(&s->wmu);
    json_t *d = doc_copy(s);
    json_t *list = json_object_get(d, "secrets");
    ssize_t at = d ? doc_find(d, tenant, owner, name) : -1;
    int rc = 0;
    *created = at < 0;
    size_t tn = 0, tbytes = 0;
    if (d)
        doc_tenant_use(d, tenant, at, &tn, &tbytes);
    if (!d)
        rc = ts_err_set(err, TS_ENOMEM, "out of memory");
    else if (at < 0 && tn >= CTLD_SECRETS_TENANT_MAX)
        rc = ts_err_set(err, TS_ENOSPC, "secrets: tenant \"%s\" holds %d secrets, the most "
                        "one tenant may", tenant, CTLD_SECRETS_TENANT_MAX);
    else if (tbytes + len > CTLD_SECRETS_TENANT_BYTES_MAX)
        rc = ts_err_set(err, TS_ENOSPC, "secrets: tenant \"%s\"'s values would take more than "
                        "%d bytes together, the most one tenant may", tenant,
                        CTLD_SECRETS_TENANT_BYTES_MAX);
    else if (at < 0 && json_array_size(list) >= CTLD_SECRETS_MAX)
        rc = ts_err_set(err, TS_ENOSPC, "secrets: the store holds %d secrets, the most it "
                        "takes", CTLD_SECRETS_MAX);
    else if (doc_bytes(d, at) + len > CTLD_SECRETS_BYTES_MAX)
        rc = ts_err_set(err, TS_ENOSPC, "secrets: their values would take more than %d "
                        "bytes together, the most the store takes", CTLD_SECRETS_BYTES_MAX);
    else if (at >= 0)
        json_array_set_new(list, (size_t)at, e);
    else
        json_array_append_new(list, e);
    if (rc != 0)
        json_decref(e);
    return doc_commit(s, d, rc, err);
}

int ctld_secrets_remove(ctld_secrets *s, const char *tenant, const char *owner,
                        const char *name, ts_err *err)
{
    pthread_mutex_lock(&s->wmu);
    json_t *d = doc_copy(s);
    ssize_t at = d ? doc_find(d, tenant, owner, name) : -1;
    int rc = !d     ? ts_err_set(err, TS_ENOMEM, "out of memory")
             : at < 0 ? ts_err_set(err, TS_ENOENT, "secret \"%s\" does not exist", name)
                      : json_array_remove(json_object_get(d, "secrets"), (size_t)at);
    return doc_commit(s, d, rc, err);
}

json_t *ctld_secrets_list(ctld_secrets *s, const char *tenant, const char *owner)
{
    json_t *a = json_array();
    size_t i;
    json_t *e;
    pthread_mutex_lock(&s->mu);
    json_array_foreach(json_object_get(s->doc, "secrets"), i, e)
    {
        const char *o = str_of(e, "owner");
        if (strcmp(str_of(e, "tenant"), tenant) != 0 || (owner && *o && strcmp(o, owner) != 0))
            continue;
        json_array_append_new(a, json_pack("{s:s,s:s,s:s,s:o,s:O}", "name", str_of(e, "name"),
                                           "scope", *o ? "user" : "tenant", "tenant", tenant,
                                           "owner", *o ? json_string(o) : json_null(),
                                           "updated", json_object_get(e, "updated")));
    }
    pthread_mutex_unlock(&s->mu);
    return a;
}

/* Under s->mu: the entry user owner of tenant uses as `name`, or NULL. */
static const json_t *resolve(ctld_secrets *s, const char *tenant, const char *owner,
                             const char *name)
{
    ssize_t at = doc_find(s->doc, tenant, owner, name);
    if (at < 0)
        at = doc_find(s->doc, tenant, "", name);
    return at >= 0 ? json_array_get(json_object_get(s->doc, "secrets"), (size_t)at) : NULL;
}

bool ctld_secrets_exists(ctld_secrets *s, const char *tenant, const char *owner,
                         const char *name)
{
    pthread_mutex_lock(&s->mu);
    bool found = resolve(s, tenant, owner, name) != NULL;
    pthread_mutex_unlock(&s->mu);
    return found;
}

int ctld_secrets_reveal(ctld_secrets *s, const char *tenant, const char *owner, const char *name,
                        char **value, size_t *len, ts_err *err)
{
    pthread_mutex_lock(&s->mu);
    const json_t *e = resolve(s, tenant, owner, name);
    int rc = e ? unseal(s->keys, s->nkeys, e, value, len, err)
               : ts_err_set(err, TS_ENOENT, "secret \"%s\" does not exist (for user \"%s\" or "
                            "tenant \"%s\")", name, owner, tenant);
    pthread_mutex_unlock(&s->mu);
    return rc;
}

int ctld_secrets_rotate(ts_store *store, const char *old_file, const char *new_file, int *n,
                        ts_err *err)
{
    secret_key old[CTLD_SECRET_KEYS_MAX], nk[CTLD_SECRET_KEYS_MAX];
    int nold = 0, nnew = 0;
    json_t *doc = NULL, *out = json_pack("{s:[]}", "secrets");
    int rc = keys_read(old_file, old, &nold, err);
    if (rc == 0)
        rc = keys_read(new_file, nk, &nnew, err);
    if (rc == 0)
        rc = doc_load(store, &doc, err);
    size_t i;
    json_t *e;
    json_array_foreach(rc == 0 ? json_object_get(doc, "secrets") : NULL, i, e)
    {
        char *v;
        size_t len;
        if ((rc = unseal(old, nold, e, &v, &len, err)) != 0)
            break;
        json_t *ne = seal(&nk[0], str_of(e, "tenant"), str_of(e, "owner"), str_of(e, "name"),
                          v, len, err);
        ctld_secret_free(v, len);
        if (!ne) {
            rc = err->code;
            break;
        }
        json_object_set(ne, "updated", json_object_get(e, "updated"));
        json_array_append_new(json_object_get(out, "secrets"), ne);
    }
    if (rc == 0)
        rc = doc_store(store, out, err); /* one setting: one transaction */
    *n = rc == 0 ? (int)json_array_size(json_object_get(out, "secrets")) : 0;
    gnutls_memset(old, 0, sizeof old);
    gnutls_memset(nk, 0, sizeof nk);
    json_decref(doc);
    json_decref(out);
    return rc;
}
