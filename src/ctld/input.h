/*
 * input.h - the limits on what an API request may contain (docs/api.md
 * "Limits on input"), checked by routes.c before anything is acted on:
 * token names, Idempotency-Key, query times, topology levels and the
 * nesting of a tenants document. Each refusal names the field; nothing is
 * ever cut short to fit. input.c has the checks.
 */
#ifndef TS_CTLD_INPUT_H
#define TS_CTLD_INPUT_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "ctld/ctld.h"
#include "ctld/http.h"

/* The longest Idempotency-Key accepted (printable ASCII, no spaces). */
#define CTLD_IDEM_KEY_MAX 255
/* Nesting of a PUT /v1/tenants document (YAML block and flow levels). */
#define CTLD_TENANTS_DEPTH_MAX 64
/* The largest query time (Unix seconds). */
#define CTLD_TIME_MAX 1e11
/* The stored form of an Idempotency-Key: "sha256:" + 64 hex + "#<n>". */
#define CTLD_IDEM_STORED_MAX 80

/* A 400 naming one field, in the shape of a spec error. */
void ctld_field_error(ctld_reply *r, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The Idempotency-Key as stored ("sha256:" and the key's hex digest; "" for
 * none); false and a 400 naming the header when it is too long or holds
 * other than printable ASCII. */
bool ctld_idem_stored(const char *key, char out[CTLD_IDEM_STORED_MAX], ctld_reply *r);
/* Element i's key as its row holds it: the stored key and "#<i>" (a single
 * job is element 0); "" when stored is NULL or "" (no key). The one place
 * the form is made: a retry is found by meeting it again. */
void ctld_idem_element(char out[TS_STORE_KEY_MAX], const char *stored, int i);
/* Whether the cluster has this topology level ("node", "any", "" or a level
 * above gpu). */
bool ctld_level_known(const ctld *c, const char *name);
/* How deeply a YAML document nests (counting stops past limit). */
int ctld_yaml_depth(const char *b, size_t len, int limit);
/* The first member of object in whose key is none of known[0..n), or NULL. */
const char *ctld_unknown_key(const json_t *in, const char *const *known, size_t n);
/* Whether name is one of the entries of a comma-separated list (a
 * reservation's users, a tenant's unix_users, a service's tenants); an
 * empty name never is, whatever the list. */
bool ctld_name_listed(const char *list, const char *name);
/* A query time, read whole: 0..CTLD_TIME_MAX; false and a 400 naming param. */
bool ctld_time_of(const char *s, const char *param, double *out, ctld_reply *r);

#endif
