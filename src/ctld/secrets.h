/*
 * secrets.h - internal: the secret store of tesserad (docs/secrets.md).
 *
 * Secrets belong to a tenant (owner "") or to one user of a tenant (owner:
 * the token's name). Their values are encrypted with AES-256-GCM under a
 * key the controller reads from its key file (secrets_key_file), outside
 * the database: a fresh random 96-bit nonce per value, the secret's tenant,
 * owner and name as associated data (a ciphertext copied to another row
 * does not decrypt), each ciphertext tagged with the id of its key. The
 * store holds only ciphertext, as one settings document ("secrets"), so a
 * rotation re-encrypts every value in one transaction.
 *
 * Ownership: ctld_secrets_open returns an object freed by
 * ctld_secrets_close. Thread-safe: writers take wmu (one at a time, held
 * across their durable write) and swap the document under mu; readers
 * (listing, a task's start) take only mu, briefly, so nothing waits for a
 * disk under it. Values handed out (ctld_secrets_reveal) are malloc'd and
 * must be wiped and freed by the caller (ctld_secret_free).
 */
#ifndef TS_CTLD_SECRETS_H
#define TS_CTLD_SECRETS_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "tessera/error.h"
#include "tessera/store.h"

#define CTLD_SECRET_VALUE_MAX 16384   /* bytes of one value */
#define CTLD_SECRETS_MAX 4096         /* secrets in all, every tenant together */
#define CTLD_SECRETS_BYTES_MAX (4 << 20) /* their values together: every set rewrites the
                                          * stored document, which stays under ~9 MiB */
/* One tenant's share of those: a user of one tenant who fills the store
 * would otherwise refuse every other tenant's secrets (409) */
#define CTLD_SECRETS_TENANT_MAX 512
#define CTLD_SECRETS_TENANT_BYTES_MAX (512 << 10)
#define CTLD_SECRET_KEY_BYTES 32      /* AES-256 */
#define CTLD_SECRET_KEYS_MAX 8        /* keys in one key file */

typedef struct ctld_secrets ctld_secrets;

/* Reads the key file and the stored secrets, and checks that every stored
 * value decrypts. A missing key file is created (0600, one new key) when
 * the store holds no secrets and create_key is set; with secrets stored, a
 * missing or wrong key file is an error naming it (tesserad refuses to
 * start: it would otherwise hand tasks nothing, or garbage). */
int ctld_secrets_open(ts_store *store, const char *key_file, bool create_key,
                      ctld_secrets **out, ts_err *err);
void ctld_secrets_close(ctld_secrets *s);

/* Sets (creates or replaces) a secret; *created says which. TS_EINVAL
 * names a bad value, TS_ENOSPC (too many secrets), else the store's error. */
int ctld_secrets_set(ctld_secrets *s, const char *tenant, const char *owner, const char *name,
                     const char *value, size_t len, double now, bool *created, ts_err *err);
/* TS_ENOENT when there is no such secret. */
int ctld_secrets_remove(ctld_secrets *s, const char *tenant, const char *owner,
                        const char *name, ts_err *err);
/* The tenant's secrets (names and metadata, never values) as a JSON array
 * of {name, scope, tenant, owner, updated}: the tenant's own and those of
 * user `owner`; every user's when owner is NULL. */
json_t *ctld_secrets_list(ctld_secrets *s, const char *tenant, const char *owner);
/* Whether user owner of tenant can use secret `name`: its own, else the
 * tenant's. */
bool ctld_secrets_exists(ctld_secrets *s, const char *tenant, const char *owner,
                         const char *name);
/* The value of the secret user owner of tenant uses under `name` (its own,
 * else the tenant's), decrypted: *value malloc'd (NUL-terminated, *len
 * bytes). TS_ENOENT when there is none. */
int ctld_secrets_reveal(ctld_secrets *s, const char *tenant, const char *owner, const char *name,
                        char **value, size_t *len, ts_err *err);
/* Wipes and frees a value from ctld_secrets_reveal. */
void ctld_secret_free(char *value, size_t len);

/* tesserad --gen-secrets-key FILE: a new key file (0600, one key); refuses
 * to overwrite one. */
int ctld_secrets_keygen(const char *path, ts_err *err);
/* tesserad --rotate-secrets-key OLD NEW: every stored secret decrypted with
 * OLD's keys and encrypted again with NEW's first key, written in one
 * transaction; *n the number of secrets. The controller must be stopped. */
int ctld_secrets_rotate(ts_store *store, const char *old_file, const char *new_file, int *n,
                        ts_err *err);

#endif
