/*
 * test_secrets.c - the secret store of tesserad (src/ctld/secrets.c,
 * docs/secrets.md "Encryption at rest") against a real SQLite store.
 *
 * A value set is read back only through reveal, and the store's file holds
 * none of it; a user's secret wins over the tenant's of the same name; the
 * associated data binds a ciphertext to its tenant, owner and name (one
 * copied to another row does not decrypt); a missing key file with secrets
 * stored, a wrong key and a key file others may read are refused at open,
 * naming the file; rotation re-encrypts so that only the new key opens
 * them; the count and size caps hold; keygen never overwrites.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "ctld/secrets.c"

#define VALUE "v4lue-0f-a-s3cret"

static char dir[64], key[128], key2[128], url[160];

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/tessera-secrets-XXXXXX");
    assert_non_null(mkdtemp(dir));
    snprintf(key, sizeof key, "%s/k1", dir);
    snprintf(key2, sizeof key2, "%s/k2", dir);
    snprintf(url, sizeof url, "sqlite:%s/db", dir);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static ts_store *store_open(void)
{
    ts_store *st = NULL;
    ts_err err;
    assert_int_equal(ts_store_open(url, &st, &err), 0);
    return st;
}

/* Whether any file of dir whose name starts with "db" holds s. */
static bool store_files_hold(const char *s)
{
    static const char *const suffixes[] = {"", "-wal", "-shm"};
    for (size_t i = 0; i < 3; i++) {
        char p[192];
        snprintf(p, sizeof p, "%s/db%s", dir, suffixes[i]);
        FILE *f = fopen(p, "rb");
        if (!f)
            continue;
        static char buf[1 << 22];
        size_t n = fread(buf, 1, sizeof buf, f);
        fclose(f);
        for (size_t k = 0; k + strlen(s) <= n; k++)
            if (memcmp(buf + k, s, strlen(s)) == 0)
                return true;
    }
    return false;
}

static void set_reveal_and_scopes(void **state)
{
    (void)state;
    ts_store *st = store_open();
    ctld_secrets *s;
    ts_err err;
    assert_int_equal(ctld_secrets_open(st, key, true, &s, &err), 0);
    struct stat ks;
    assert_int_equal(stat(key, &ks), 0);
    assert_int_equal(ks.st_mode & 0777, 0600);
    bool created;
    assert_int_equal(ctld_secrets_set(s, "t", "alice", "K", VALUE, strlen(VALUE), 1.0, &created,
                                      &err), 0);
    assert_true(created);
    assert_int_equal(ctld_secrets_set(s, "t", "", "K", "tenant-wide", 11, 2.0, &created, &err), 0);
    char *v;
    size_t len;
    assert_int_equal(ctld_secrets_reveal(s, "t", "alice", "K", &v, &len, &err), 0);
    assert_string_equal(v, VALUE); /* the user's own wins */
    ctld_secret_free(v, len);
    assert_int_equal(ctld_secrets_reveal(s, "t", "bob", "K", &v, &len, &err), 0);
    assert_string_equal(v, "tenant-wide"); /* else the tenant's */
    ctld_secret_free(v, len);
    assert_int_equal(ctld_secrets_reveal(s, "u", "alice", "K", &v, &len, &err), TS_ENOENT);
    assert_null(strstr(err.msg, VALUE));
    json_t *l = ctld_secrets_list(s, "t", "bob");
    assert_int_equal(json_array_size(l), 1); /* the tenant's, not alice's */
    char *text = json_dumps(l, 0);
    assert_null(strstr(text, "tenant-wide"));
    free(text);
    json_decref(l);
    l = ctld_secrets_list(s, "t", NULL);
    assert_int_equal(json_array_size(l), 2);
    json_decref(l);
    assert_true(store_files_hold("alice")); /* the reader finds what is there */
    assert_false(store_files_hold(VALUE));
    assert_int_equal(ctld_secrets_remove(s, "t", "", "K", &err), 0);
    assert_int_equal(ctld_secrets_remove(s, "t", "", "K", &err), TS_ENOENT);
    assert_false(ctld_secrets_exists(s, "t", "bob", "K"));
    ctld_secrets_close(s);
    ts_store_close(st);
}

static void associated_data_binds_the_row(void **state)
{
    (void)state;
    ts_store *st = store_open();
    ctld_secrets *s;
    ts_err err;
    assert_int_equal(ctld_secrets_open(st, key, true, &s, &err), 0);
    /* alice's ciphertext under bob's name: the tag fails */
    json_t *e = json_deep_copy(json_array_get(json_object_get(s->doc, "secrets"), 0));
    json_object_set_new(e, "owner", json_string("bob"));
    char *v;
    size_t len;
    assert_int_equal(unseal(s->keys, s->nkeys, e, &v, &len, &err), TS_EINVAL);
    assert_non_null(strstr(err.msg, "does not decrypt"));
    assert_null(strstr(err.msg, VALUE));
    json_decref(e);
    ctld_secrets_close(s);
    ts_store_close(st);
}

static void refusals_at_open(void **state)
{
    (void)state;
    ts_store *st = store_open();
    ctld_secrets *s = NULL;
    ts_err err;
    char moved[160];
    snprintf(moved, sizeof moved, "%s.moved", key);
    assert_int_equal(rename(key, moved), 0);
    /* missing, with a secret stored: refused, and no new key made */
    assert_int_equal(ctld_secrets_open(st, key, true, &s, &err), TS_EINVAL);
    assert_non_null(strstr(err.msg, key));
    assert_non_null(strstr(err.msg, "missing"));
    assert_int_equal(access(key, F_OK), -1);
    /* another key: refused, naming the file */
    assert_int_equal(ctld_secrets_keygen(key, &err), 0);
    assert_int_equal(ctld_secrets_keygen(key, &err), TS_EEXIST); /* never overwritten */
    assert_int_equal(ctld_secrets_open(st, key, true, &s, &err), TS_EINVAL);
    assert_non_null(strstr(err.msg, "wrong key"));
    assert_non_null(strstr(err.msg, key));
    /* the right one, readable by others: refused */
    assert_int_equal(rename(moved, key), 0);
    chmod(key, 0640);
    assert_int_equal(ctld_secrets_open(st, key, true, &s, &err), TS_EINVAL);
    assert_non_null(strstr(err.msg, "chmod 600"));
    chmod(key, 0600);
    assert_int_equal(ctld_secrets_open(st, key, true, &s, &err), 0);
    ctld_secrets_close(s);
    ts_store_close(st);
}

static void rotation(void **state)
{
    (void)state;
    ts_store *st = store_open();
    ts_err err;
    int n = 0;
    assert_int_equal(ctld_secrets_keygen(key2, &err), 0);
    assert_int_equal(ctld_secrets_rotate(st, key, key2, &n, &err), 0);
    assert_int_equal(n, 1);
    ctld_secrets *s = NULL;
    assert_int_equal(ctld_secrets_open(st, key, true, &s, &err), TS_EINVAL); /* the old key */
    assert_int_equal(ctld_secrets_open(st, key2, true, &s, &err), 0);
    char *v;
    size_t len;
    assert_int_equal(ctld_secrets_reveal(s, "t", "alice", "K", &v, &len, &err), 0);
    assert_string_equal(v, VALUE);
    ctld_secret_free(v, len);
    ctld_secrets_close(s);
    /* rotating with a key file that does not open them changes nothing */
    assert_int_equal(ctld_secrets_rotate(st, key, key2, &n, &err), TS_EINVAL);
    assert_int_equal(ctld_secrets_open(st, key2, true, &s, &err), 0);
    ctld_secrets_close(s);
    assert_false(store_files_hold(VALUE));
    ts_store_close(st);
}

static void caps(void **state)
{
    (void)state;
    ts_store *st = store_open();
    ctld_secrets *s;
    ts_err err;
    bool created;
    assert_int_equal(ctld_secrets_open(st, key2, true, &s, &err), 0);
    static char big[CTLD_SECRET_VALUE_MAX + 2];
    memset(big, 'a', sizeof big - 1);
    assert_int_equal(ctld_secrets_set(s, "t", "a", "B", big, CTLD_SECRET_VALUE_MAX + 1, 1.0,
                                      &created, &err), TS_EINVAL);
    assert_non_null(strstr(err.msg, "value"));
    /* one tenant's share: tenant t at the most it may hold, by count and
     * then by bytes; another tenant still sets its own */
    assert_int_equal(ctld_secrets_set(s, "t", "a", "S0", "v", 1, 1.0, &created, &err), 0);
    json_t *list = json_object_get(s->doc, "secrets");
    while (json_array_size(list) < CTLD_SECRETS_TENANT_MAX) {
        json_t *e = json_deep_copy(json_array_get(list, 0));
        char nm[32];
        snprintf(nm, sizeof nm, "S%zu", json_array_size(list));
        json_object_set_new(e, "name", json_string(nm));
        json_array_append_new(list, e);
    }
    assert_int_equal(ctld_secrets_set(s, "t", "a", "B", "v", 1, 1.0, &created, &err), TS_ENOSPC);
    assert_non_null(strstr(err.msg, "tenant \"t\""));
    assert_int_equal(ctld_secrets_set(s, "u", "a", "B", "v", 1, 1.0, &created, &err), 0);
    assert_int_equal(ctld_secrets_set(s, "t", "a", "S0", "w", 1, 1.0, &created, &err), 0);
    list = json_object_get(s->doc, "secrets"); /* each set swaps the document */
    while (json_array_size(list) > 2)
        json_array_remove(list, 1);
    static char mid[8192];
    memset(mid, 'b', sizeof mid);
    for (int i = 0; i < (CTLD_SECRETS_TENANT_BYTES_MAX - 1) / (int)sizeof mid; i++) {
        char nm[32];
        snprintf(nm, sizeof nm, "M%d", i);
        assert_int_equal(ctld_secrets_set(s, "t", "a", nm, mid, sizeof mid, 1.0, &created, &err),
                         0);
    }
    assert_int_equal(ctld_secrets_set(s, "t", "a", "B", mid, sizeof mid, 1.0, &created, &err),
                     TS_ENOSPC);
    assert_non_null(strstr(err.msg, "bytes together, the most one tenant may"));
    assert_int_equal(ctld_secrets_set(s, "u", "a", "C", mid, sizeof mid, 1.0, &created, &err), 0);
    list = json_object_get(s->doc, "secrets");
    while (json_array_size(list) > 1)
        json_array_remove(list, 1);
    /* the size cap: the document as if it held the most, then one more (the
     * filler spread over many tenants, each within its share) */
    while (doc_bytes(s->doc, -1) + CTLD_SECRET_VALUE_MAX <= CTLD_SECRETS_BYTES_MAX) {
        json_t *e = json_deep_copy(json_array_get(list, 0));
        char nm[32];
        snprintf(nm, sizeof nm, "F%zu", json_array_size(list));
        json_object_set_new(e, "tenant", json_string(nm));
        json_object_set_new(e, "name", json_string(nm));
        char *hex = calloc(2 * (CTLD_SECRET_VALUE_MAX + TAG_BYTES) + 1, 1);
        memset(hex, '0', 2 * (CTLD_SECRET_VALUE_MAX + TAG_BYTES));
        json_object_set_new(e, "ct", json_string(hex));
        free(hex);
        json_array_append_new(list, e);
    }
    assert_int_equal(ctld_secrets_set(s, "t", "a", "B", big, CTLD_SECRET_VALUE_MAX, 1.0,
                                      &created, &err), TS_ENOSPC);
    assert_non_null(strstr(err.msg, "the most the store takes"));
    ctld_secrets_close(s);
    ts_store_close(st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(set_reveal_and_scopes),
        cmocka_unit_test(associated_data_binds_the_row),
        cmocka_unit_test(refusals_at_open),
        cmocka_unit_test(rotation),
        cmocka_unit_test(caps),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
