/*
 * oidc.c - sign-in with OpenID Connect ID tokens (docs/tesserad.md "oidc").
 *
 * A request whose bearer is a JWT rather than one of our tsk_ secrets is
 * checked here: parsed and verified (jwt.c) against the issuer's JSON Web
 * Key Set, its iss, aud, exp and nbf checked, then its claims mapped to a
 * caller: the user claim names it ("oidc:" + the value, so it can never be
 * taken for an API token's name), the tenant and role claims give its
 * tenant and role, and the unix_user claim its Unix identity, but only a
 * user the administrator listed in oidc.unix_users, with the uid listed
 * there. A claim can therefore never make a task run as an account the
 * administrator did not map.
 *
 * The key set is read from jwks_file or fetched from jwks_url (libcurl,
 * bounded in time and size), or from the jwks_uri the issuer's discovery
 * document (ISSUER/.well-known/openid-configuration) names when neither is
 * configured, at the first ID token; it is kept, and read again
 * when a token names a key the set does not hold (the issuer rotated its
 * keys), at most once per OIDC_REFRESH_MIN_S so that made-up kids cannot
 * make us hammer the issuer. The fetch runs with no lock held; the set is
 * swapped in under a small mutex of its own. http.c caches every verified
 * token by its hash until its exp, as it does API secrets.
 */
#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctld/ctld.h"
#include "ctld/http.h"
#include "ctld/jwt.h"
#include "io/body.h"

/* A key set is read again for an unknown kid at most this often. */
#define OIDC_REFRESH_MIN_S 1.0
/* Bounds on fetching or reading a key set. */
#define OIDC_JWKS_MAX_BYTES (1024 * 1024)
#define OIDC_FETCH_TIMEOUT_S 5L
/* Clock skew tolerated on exp and nbf. */
#define OIDC_LEEWAY_S 30.0

typedef struct ctld_oidc {
    pthread_mutex_t mu;
    json_t *jwks;          /* the last key set read (NULL before the first) */
    double loaded_s;       /* when it was read (0 = never) */
} ctld_oidc;

static pthread_once_t oidc_once = PTHREAD_ONCE_INIT;

static void oidc_global_init(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }

static json_t *fetch_url(const char *url, char *why, size_t size)
{
    pthread_once(&oidc_once, oidc_global_init);
    CURL *h = curl_easy_init();
    io_body b = {.max = OIDC_JWKS_MAX_BYTES};
    long status = 0;
    CURLcode rc = CURLE_FAILED_INIT;
    if (h) {
        curl_easy_setopt(h, CURLOPT_URL, url);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, io_body_sink);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
        curl_easy_setopt(h, CURLOPT_TIMEOUT, OIDC_FETCH_TIMEOUT_S);
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
        rc = curl_easy_perform(h);
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
        curl_easy_cleanup(h);
    }
    json_t *doc = NULL;
    json_error_t je;
    if (rc != CURLE_OK)
        snprintf(why, size, "ID token: cannot fetch the issuer's %s: %s", url,
                 b.too_big ? "larger than 1 MiB" : curl_easy_strerror(rc));
    else if (status != 200)
        snprintf(why, size, "ID token: cannot fetch the issuer's %s: HTTP %ld", url, status);
    else if (!(doc = json_loadb(b.p ? b.p : "", b.len, 0, &je)))
        snprintf(why, size, "ID token: the issuer's %s: not JSON (%s)", url, je.text);
    free(b.p);
    return doc;
}

/* The jwks_uri of the issuer's discovery document (OpenID Connect
 * Discovery 1.0), fetched; NULL with why. */
static json_t *discover_jwks(const ctld_oidc_config *o, char *why, size_t size)
{
    char url[CTLD_OIDC_URL_MAX + 64];
    size_t n = strlen(o->issuer);
    snprintf(url, sizeof url, "%.*s/.well-known/openid-configuration",
             (int)(n > 0 && o->issuer[n - 1] == '/' ? n - 1 : n), o->issuer);
    json_t *doc = fetch_url(url, why, size);
    const char *uri = json_string_value(json_object_get(doc, "jwks_uri"));
    json_t *keys = NULL;
    if (doc && (!uri || (strncmp(uri, "https://", 8) != 0 && strncmp(uri, "http://", 7) != 0)))
        snprintf(why, size, "ID token: the issuer's discovery document %s has no http(s) "
                 "jwks_uri", url);
    else if (doc)
        keys = fetch_url(uri, why, size);
    json_decref(doc);
    return keys;
}

static json_t *read_jwks(const ctld_oidc_config *o, char *why, size_t size)
{
    if (o->jwks_url[0])
        return fetch_url(o->jwks_url, why, size);
    if (!o->jwks_file[0])
        return discover_jwks(o, why, size);
    json_error_t je;
    json_t *doc = json_load_file(o->jwks_file, 0, &je);
    if (!doc)
        snprintf(why, size, "ID token: the issuer's keys %s: %s", o->jwks_file, je.text);
    return doc;
}

int ctld_oidc_init(ctld *c, ts_err *err)
{
    if (!c->cfg.oidc.on)
        return 0;
    c->oidc = calloc(1, sizeof *c->oidc);
    if (!c->oidc)
        return ts_err_set(err, TS_ENOMEM, "oidc: out of memory");
    pthread_mutex_init(&c->oidc->mu, NULL);
    return 0;
}

/* The current key set (a reference the caller drops), reading it when
 * there is none yet or when `stale` and the last read is old enough. */
static json_t *keys_get(ctld *c, ctld_oidc *s, bool stale, char *why, size_t size)
{
    pthread_mutex_lock(&s->mu);
    bool need = !s->jwks || (stale && ctld_now() - s->loaded_s >= OIDC_REFRESH_MIN_S);
    json_t *have = json_incref(s->jwks);
    if (need)
        s->loaded_s = ctld_now(); /* one reader at a time; the others use what there is */
    pthread_mutex_unlock(&s->mu);
    if (!need)
        return have;
    json_t *fresh = read_jwks(&c->cfg.oidc, why, size);
    if (!fresh)
        return have;
    json_decref(have);
    pthread_mutex_lock(&s->mu);
    json_decref(s->jwks);
    s->jwks = json_incref(fresh);
    pthread_mutex_unlock(&s->mu);
    return fresh;
}

static const char *claim_str(const ctld_jwt *j, const char *name)
{
    return name[0] ? json_string_value(json_object_get(j->claims, name)) : NULL;
}

/* Claims -> caller (docs/tesserad.md "oidc"); 0 or TS_EINVAL with why. */
static int map_claims(ctld *c, const ctld_jwt *j, ctld_caller *who, char *why, size_t size)
{
    const ctld_oidc_config *o = &c->cfg.oidc;
    const char *user = claim_str(j, o->user_claim);
    const char *tenant = claim_str(j, o->tenant_claim);
    const char *role = o->role_claim[0] ? claim_str(j, o->role_claim) : "user";
    const char *unix_user = claim_str(j, o->unix_user_claim);
    if (!user || !*user || strlen(user) + 5 >= sizeof who->name)
        return snprintf(why, size, "ID token: claim %s: missing, or longer than %zu characters",
                        o->user_claim, sizeof who->name - 6), TS_EINVAL;
    snprintf(who->name, sizeof who->name, "oidc:%s", user);
    bool cluster_viewer = role && strcmp(role, "cluster-viewer") == 0;
    who->role = cluster_viewer ? TS_ROLE_VIEWER : role ? ts_role_parse(role) : -1;
    if (who->role < 0 || who->role == TS_ROLE_NODE)
        return snprintf(why, size, "ID token: claim %s: \"%.32s\" is not a role (admin, "
                        "tenant-admin, user, viewer, cluster-viewer)", o->role_claim,
                        role ? role : ""), TS_EINVAL;
    if (who->role != TS_ROLE_ADMIN && !cluster_viewer) {
        ctld_lock_reader(c);
        bool known = tenant && ts_tenant_find(c->tenants, tenant) >= 0;
        pthread_mutex_unlock(&c->mu);
        if (!known)
            return snprintf(why, size, "ID token: claim %s: \"%.64s\" is not a tenant",
                            o->tenant_claim, tenant ? tenant : ""), TS_EINVAL;
        snprintf(who->tenant, sizeof who->tenant, "%s", tenant);
    }
    if (!unix_user)
        return 0;
    for (int i = 0; i < o->nunix; i++)
        if (strcmp(o->unix_users[i], unix_user) == 0) {
            snprintf(who->unix_user, sizeof who->unix_user, "%s", unix_user);
            who->uid = o->unix_uids[i];
            return 0;
        }
    snprintf(why, size, "ID token: claim %s: Unix user \"%.32s\" is not among oidc.unix_users",
             o->unix_user_claim, unix_user);
    return TS_EINVAL;
}

int ctld_oidc_authenticate(ctld *c, const char *token, ctld_caller *who, char *why,
                           size_t why_size)
{
    ctld_oidc *s = c->oidc;
    if (!c->cfg.oidc.on || !s)
        return TS_ENOENT;
    ctld_jwt j;
    int rc = ctld_jwt_parse(token, &j, why, why_size);
    json_t *keys = rc == 0 ? keys_get(c, s, false, why, why_size) : NULL;
    if (rc == 0 && !keys)
        rc = TS_EINVAL; /* why says why the keys could not be read */
    if (rc == 0)
        rc = ctld_jwt_verify(token, &j, keys, why, why_size);
    if (rc == TS_ENOENT) { /* a kid we do not know: the issuer may have rotated its keys */
        json_decref(keys);
        keys = keys_get(c, s, true, why, why_size);
        rc = keys ? ctld_jwt_verify(token, &j, keys, why, why_size) : TS_EINVAL;
        rc = rc == TS_ENOENT ? TS_EINVAL : rc;
    }
    json_decref(keys);
    if (rc == 0)
        rc = ctld_jwt_check_claims(&j, c->cfg.oidc.issuer, c->cfg.oidc.audience, ctld_now(),
                                   OIDC_LEEWAY_S, why, why_size);
    if (rc == 0)
        rc = map_claims(c, &j, who, why, why_size);
    if (rc == 0)
        who->expires_s = json_number_value(json_object_get(j.claims, "exp")) + OIDC_LEEWAY_S;
    ctld_jwt_fini(&j);
    return rc;
}

void ctld_oidc_fini(ctld *c)
{
    if (!c->oidc)
        return;
    json_decref(c->oidc->jwks);
    pthread_mutex_destroy(&c->oidc->mu);
    free(c->oidc);
    c->oidc = NULL;
}
