/*
 * jwt.c - parsing and verifying OpenID Connect ID tokens (jwt.h).
 *
 * A token is three base64url parts, header.payload.signature; the signature
 * covers the first two parts as written. Only asymmetric algorithms are
 * accepted (RS256, ES256): "none" and the HMAC family would let anyone who
 * knows the issuer's public key, or nobody at all, mint tokens. The key is
 * chosen by the header's kid from the issuer's JSON Web Key Set, and must
 * be of the algorithm's type (kty RSA for RS256, EC P-256 for ES256); a key
 * whose `use` is not "sig" or whose `alg` names another algorithm is
 * skipped. GnuTLS checks the signature: RSA PKCS#1 v1.5 with SHA-256, and
 * ECDSA P-256 with SHA-256, whose raw r||s form JWS uses is re-encoded in
 * the DER form GnuTLS verifies.
 */
#include "ctld/jwt.h"

#include <gnutls/abstract.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tessera/error.h"

/* P-256 coordinates and ES256 signature halves are 32 bytes. */
#define ES256_HALF_BYTES 32

static int jwt_fail(char *why, size_t size, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = snprintf(why, size, "ID token: ");
    if (n >= 0 && (size_t)n < size)
        vsnprintf(why + n, size - (size_t)n, fmt, ap);
    va_end(ap);
    return TS_EINVAL;
}

static int b64url_value(char ch)
{
    if (ch >= 'A' && ch <= 'Z')
        return ch - 'A';
    if (ch >= 'a' && ch <= 'z')
        return ch - 'a' + 26;
    if (ch >= '0' && ch <= '9')
        return ch - '0' + 52;
    return ch == '-' ? 62 : ch == '_' ? 63 : -1;
}

uint8_t *ctld_b64url_decode(const char *s, size_t len, size_t *out_len)
{
    while (len > 0 && s[len - 1] == '=')
        len--;
    if (len % 4 == 1)
        return NULL;
    uint8_t *out = malloc(len * 3 / 4 + 1);
    if (!out)
        return NULL;
    uint32_t acc = 0;
    int bits = 0;
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        int v = b64url_value(s[i]);
        if (v < 0) {
            free(out);
            return NULL;
        }
        acc = acc << 6 | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (uint8_t)(acc >> bits);
        }
    }
    *out_len = o;
    return out;
}

static json_t *decode_json(const char *s, size_t len)
{
    size_t n = 0;
    uint8_t *raw = ctld_b64url_decode(s, len, &n);
    if (!raw)
        return NULL;
    json_error_t je;
    json_t *doc = json_loadb((const char *)raw, n, JSON_REJECT_DUPLICATES, &je);
    free(raw);
    if (doc && !json_is_object(doc)) {
        json_decref(doc);
        return NULL;
    }
    return doc;
}

void ctld_jwt_fini(ctld_jwt *j)
{
    json_decref(j->header);
    json_decref(j->claims);
    free(j->sig);
    memset(j, 0, sizeof *j);
}

int ctld_jwt_parse(const char *token, ctld_jwt *out, char *why, size_t why_size)
{
    memset(out, 0, sizeof *out);
    size_t len = strnlen(token, CTLD_JWT_MAX_BYTES + 1);
    if (len > CTLD_JWT_MAX_BYTES)
        return jwt_fail(why, why_size, "longer than %d bytes", CTLD_JWT_MAX_BYTES);
    const char *d1 = memchr(token, '.', len);
    const char *d2 = d1 ? memchr(d1 + 1, '.', len - (size_t)(d1 + 1 - token)) : NULL;
    if (!d1 || !d2 || memchr(d2 + 1, '.', len - (size_t)(d2 + 1 - token)))
        return jwt_fail(why, why_size, "not three dot-separated parts (header.payload.signature)");
    out->header = decode_json(token, (size_t)(d1 - token));
    if (!out->header)
        return jwt_fail(why, why_size, "header: not base64url-encoded JSON object");
    out->claims = decode_json(d1 + 1, (size_t)(d2 - d1 - 1));
    if (!out->claims)
        return jwt_fail(why, why_size, "payload: not base64url-encoded JSON object");
    out->sig = ctld_b64url_decode(d2 + 1, len - (size_t)(d2 + 1 - token), &out->sig_len);
    if (!out->sig || out->sig_len == 0)
        return jwt_fail(why, why_size, "signature: missing or not base64url");
    out->signed_len = (size_t)(d2 - token);
    out->alg = json_string_value(json_object_get(out->header, "alg"));
    out->kid = json_string_value(json_object_get(out->header, "kid"));
    if (!out->alg)
        return jwt_fail(why, why_size, "header.alg: missing");
    if (strcmp(out->alg, "RS256") != 0 && strcmp(out->alg, "ES256") != 0)
        return jwt_fail(why, why_size, "header.alg: \"%.32s\" is not accepted (RS256 or ES256)",
                    out->alg);
    if (json_object_get(out->header, "kid") && !out->kid)
        return jwt_fail(why, why_size, "header.kid: not a string");
    return 0;
}

/* A key member's bytes as a datum (malloc'd data), or false. */
static bool key_bytes(const json_t *key, const char *member, gnutls_datum_t *d)
{
    const char *s = json_string_value(json_object_get(key, member));
    size_t n = 0;
    uint8_t *b = s ? ctld_b64url_decode(s, strlen(s), &n) : NULL;
    if (!b || n == 0 || n > 1024) {
        free(b);
        return false;
    }
    d->data = b;
    d->size = (unsigned)n;
    return true;
}

/* j's signature (as gnutls wants it) checked over data with pk. */
static int jwt_check_sig(gnutls_pubkey_t pk, gnutls_sign_algorithm_t algo,
                         const gnutls_datum_t *data, const gnutls_datum_t *sig, char *why,
                         size_t size)
{
    return gnutls_pubkey_verify_data2(pk, algo, 0, data, sig) >= 0
               ? 0
               : jwt_fail(why, size, "bad signature");
}

/* What a verification read of the key: the public key and its two members. */
static void jwt_key_free(gnutls_pubkey_t pk, gnutls_datum_t *a, gnutls_datum_t *b)
{
    if (pk)
        gnutls_pubkey_deinit(pk);
    free(a->data);
    free(b->data);
}

static int verify_rsa(const json_t *key, const gnutls_datum_t *data, const ctld_jwt *j,
                      char *why, size_t size)
{
    gnutls_datum_t n = {0}, e = {0};
    gnutls_pubkey_t pk = NULL;
    int rc;
    if (!key_bytes(key, "n", &n) || !key_bytes(key, "e", &e)) {
        rc = jwt_fail(why, size, "the issuer's key \"%s\": bad n or e", j->kid ? j->kid : "");
    } else if (gnutls_pubkey_init(&pk) < 0 || gnutls_pubkey_import_rsa_raw(pk, &n, &e) < 0) {
        rc = jwt_fail(why, size, "the issuer's key \"%s\": not a usable RSA key",
                      j->kid ? j->kid : "");
    } else {
        gnutls_datum_t sig = {j->sig, (unsigned)j->sig_len};
        rc = jwt_check_sig(pk, GNUTLS_SIGN_RSA_SHA256, data, &sig, why, size);
    }
    jwt_key_free(pk, &n, &e);
    return rc;
}

static int verify_ec(const json_t *key, const gnutls_datum_t *data, const ctld_jwt *j, char *why,
                     size_t size)
{
    gnutls_datum_t x = {0}, y = {0}, der = {0};
    gnutls_pubkey_t pk = NULL;
    int rc;
    const char *crv = json_string_value(json_object_get(key, "crv"));
    if (!crv || strcmp(crv, "P-256") != 0 || !key_bytes(key, "x", &x) || !key_bytes(key, "y", &y)) {
        rc = jwt_fail(why, size, "the issuer's key \"%s\": not a P-256 key", j->kid ? j->kid : "");
    } else if (j->sig_len != 2 * ES256_HALF_BYTES) {
        rc = jwt_fail(why, size, "bad signature (ES256 wants 64 bytes, got %zu)", j->sig_len);
    } else if (gnutls_pubkey_init(&pk) < 0 ||
               gnutls_pubkey_import_ecc_raw(pk, GNUTLS_ECC_CURVE_SECP256R1, &x, &y) < 0) {
        rc = jwt_fail(why, size, "the issuer's key \"%s\": not a usable P-256 key",
                      j->kid ? j->kid : "");
    } else {
        /* JWS carries r || s; gnutls verifies the DER form */
        gnutls_datum_t r = {j->sig, ES256_HALF_BYTES};
        gnutls_datum_t s = {j->sig + ES256_HALF_BYTES, ES256_HALF_BYTES};
        rc = gnutls_encode_rs_value(&der, &r, &s) == 0
                 ? jwt_check_sig(pk, GNUTLS_SIGN_ECDSA_SHA256, data, &der, why, size)
                 : jwt_fail(why, size, "bad signature");
    }
    gnutls_free(der.data);
    jwt_key_free(pk, &x, &y);
    return rc;
}

/* The set's key for j: its kid's, of the algorithm's type; NULL if none. */
static const json_t *find_key(const ctld_jwt *j, const json_t *jwks)
{
    const char *kty_want = strcmp(j->alg, "RS256") == 0 ? "RSA" : "EC";
    const json_t *keys = json_object_get(jwks, "keys");
    const json_t *found = NULL;
    int matches = 0;
    size_t i;
    json_t *k;
    json_array_foreach(keys, i, k) {
        const char *kty = json_string_value(json_object_get(k, "kty"));
        const char *kid = json_string_value(json_object_get(k, "kid"));
        const char *use = json_string_value(json_object_get(k, "use"));
        const char *alg = json_string_value(json_object_get(k, "alg"));
        if (!kty || strcmp(kty, kty_want) != 0 || (use && strcmp(use, "sig") != 0) ||
            (alg && strcmp(alg, j->alg) != 0))
            continue;
        if (j->kid ? kid && strcmp(kid, j->kid) == 0 : true) {
            found = k;
            matches++;
        }
    }
    /* without a kid, only an unambiguous set will do */
    return matches == 1 || (j->kid && found) ? found : NULL;
}

int ctld_jwt_verify(const char *token, const ctld_jwt *j, const json_t *jwks, char *why,
                    size_t why_size)
{
    const json_t *key = find_key(j, jwks);
    if (!key) {
        jwt_fail(why, why_size, "no %s key %s%s%s in the issuer's key set", j->alg,
             j->kid ? "\"" : "(no kid)", j->kid ? j->kid : "", j->kid ? "\"" : "");
        return TS_ENOENT;
    }
    gnutls_datum_t data = {(unsigned char *)token, (unsigned)j->signed_len};
    return strcmp(j->alg, "RS256") == 0 ? verify_rsa(key, &data, j, why, why_size)
                                        : verify_ec(key, &data, j, why, why_size);
}

static bool aud_holds(const json_t *aud, const char *want)
{
    if (json_is_string(aud))
        return strcmp(json_string_value(aud), want) == 0;
    size_t i;
    json_t *v;
    json_array_foreach(aud, i, v)
        if (json_is_string(v) && strcmp(json_string_value(v), want) == 0)
            return true;
    return false;
}

int ctld_jwt_check_claims(const ctld_jwt *j, const char *issuer, const char *audience,
                          double now_s, double leeway_s, char *why, size_t why_size)
{
    const char *iss = json_string_value(json_object_get(j->claims, "iss"));
    json_t *exp = json_object_get(j->claims, "exp");
    json_t *nbf = json_object_get(j->claims, "nbf");
    if (!iss || strcmp(iss, issuer) != 0)
        return jwt_fail(why, why_size, "iss: \"%.128s\" is not the configured issuer \"%.128s\"",
                    iss ? iss : "", issuer);
    if (!aud_holds(json_object_get(j->claims, "aud"), audience))
        return jwt_fail(why, why_size, "aud: not for this audience (\"%.128s\")", audience);
    if (!json_is_number(exp) || !isfinite(json_number_value(exp)))
        return jwt_fail(why, why_size, "exp: missing or not a number");
    if (now_s >= json_number_value(exp) + leeway_s)
        return jwt_fail(why, why_size, "expired at %.0f (it is %.0f)", json_number_value(exp), now_s);
    if (nbf && !json_is_number(nbf))
        return jwt_fail(why, why_size, "nbf: not a number");
    if (nbf && now_s + leeway_s < json_number_value(nbf))
        return jwt_fail(why, why_size, "not valid before %.0f (it is %.0f)", json_number_value(nbf),
                    now_s);
    return 0;
}
