/*
 * jwt.h - JSON Web Tokens as OpenID Connect ID tokens use them (RFC 7519,
 * JWS compact form, RFC 7515): parsing, signature verification against a
 * JSON Web Key Set (RFC 7517; RS256 and ES256 only, through GnuTLS), and
 * the registered claims an ID token must pass (iss, aud, exp, nbf).
 *
 * Pure functions of their inputs (the time is a parameter), so the unit
 * tests and the fuzz target drive them directly; oidc.c adds the issuer's
 * configuration, the key set's fetching and caching, and the claims' mapping.
 *
 * Ownership: ctld_jwt_parse fills a ctld_jwt the caller frees with
 * ctld_jwt_fini (also after a failed parse). Every error writes a reason
 * into why that names what is wrong ("ID token: expired at ...").
 * Thread-safe (no shared state).
 */
#ifndef CTLD_JWT_H
#define CTLD_JWT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/* Longest ID token accepted (a real one is 1-2 KiB). */
#define CTLD_JWT_MAX_BYTES 16384

typedef struct ctld_jwt {
    json_t *header;          /* the decoded JOSE header (owned) */
    json_t *claims;          /* the decoded payload (owned) */
    const char *alg, *kid;   /* from header; kid may be NULL */
    size_t signed_len;       /* the signing input is the token's first signed_len bytes */
    uint8_t *sig;            /* decoded signature (owned) */
    size_t sig_len;
} ctld_jwt;

/* 0, or TS_EINVAL with why. */
int ctld_jwt_parse(const char *token, ctld_jwt *out, char *why, size_t why_size);
void ctld_jwt_fini(ctld_jwt *j);

/* Verifies j (parsed from token) against the key set jwks ({"keys":[...]}):
 * the key whose kid matches (or, when j has no kid, the only key of its
 * type). 0; TS_ENOENT when the set has no such key (the caller may refresh
 * the set and try again); TS_EINVAL for a bad or unsupported signature. */
int ctld_jwt_verify(const char *token, const ctld_jwt *j, const json_t *jwks, char *why,
                    size_t why_size);

/* iss equals issuer, aud is (or holds) audience, now within [nbf, exp]
 * give or take leeway_s. 0 or TS_EINVAL with why. */
int ctld_jwt_check_claims(const ctld_jwt *j, const char *issuer, const char *audience,
                          double now_s, double leeway_s, char *why, size_t why_size);

/* base64url without padding (also accepts padding) -> bytes; malloc'd
 * *out, NULL on bad input. */
uint8_t *ctld_b64url_decode(const char *s, size_t len, size_t *out_len);

#endif
