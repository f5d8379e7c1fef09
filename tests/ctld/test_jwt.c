/*
 * test_jwt.c - OpenID Connect ID tokens (src/ctld/jwt.c): a token signed by
 * a key of the issuer's set verifies (RS256 and ES256); a flipped bit in
 * the signature, a key the set does not hold, an algorithm we do not take
 * (HS256, none), a wrong issuer or audience, an expired or not-yet-valid
 * token each fail with a reason that names it. The vectors in
 * tests/data/jwt were made by tests/lib/oidc_issuer.py (openssl keys);
 * their exp is in 2100 and the checks take "now" as a parameter.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "ctld/jwt.c"

#define NOW_S 1800000000.0
#define ISSUER "https://issuer.test"
#define AUD "tessera"

static char *slurp(const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "%s/jwt/%s", TS_TEST_DATA, name);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    static char buf[8][CTLD_JWT_MAX_BYTES];
    static int next;
    char *b = buf[next++ % 8];
    size_t n = fread(b, 1, CTLD_JWT_MAX_BYTES - 1, f);
    fclose(f);
    while (n > 0 && (b[n - 1] == '\n' || b[n - 1] == '\r'))
        n--;
    b[n] = '\0';
    return b;
}

static json_t *jwks(void)
{
    json_error_t je;
    json_t *k = json_loads(slurp("jwks.json"), 0, &je);
    assert_non_null(k);
    return k;
}

/* Parse, verify, check: 0 or the first failure, its reason in why. */
static int check(const char *name, char *why, size_t size)
{
    const char *tok = slurp(name);
    ctld_jwt j;
    json_t *k = jwks();
    why[0] = '\0';
    int rc = ctld_jwt_parse(tok, &j, why, size);
    if (rc == 0)
        rc = ctld_jwt_verify(tok, &j, k, why, size);
    if (rc == 0)
        rc = ctld_jwt_check_claims(&j, ISSUER, AUD, NOW_S, 30.0, why, size);
    ctld_jwt_fini(&j);
    json_decref(k);
    return rc;
}

static void valid_tokens_verify(void **state)
{
    (void)state;
    char why[256];
    assert_int_equal(check("rs256.jwt", why, sizeof why), 0);
    assert_int_equal(check("es256.jwt", why, sizeof why), 0);
    ctld_jwt j;
    assert_int_equal(ctld_jwt_parse(slurp("rs256.jwt"), &j, why, sizeof why), 0);
    assert_string_equal(json_string_value(json_object_get(j.claims, "sub")), "alice");
    assert_string_equal(j.kid, "k1");
    ctld_jwt_fini(&j);
}

static void expect(const char *name, int code, const char *reason)
{
    char why[256];
    int rc = check(name, why, sizeof why);
    if (rc != code || !strstr(why, reason))
        fail_msg("%s: rc %d why \"%s\", want %d and \"%s\"", name, rc, why, code, reason);
}

static void bad_tokens_fail_with_their_reason(void **state)
{
    (void)state;
    expect("rs256-bad-sig.jwt", TS_EINVAL, "bad signature");
    expect("es256-bad-sig.jwt", TS_EINVAL, "bad signature");
    expect("rs256-unknown-kid.jwt", TS_ENOENT, "no RS256 key \"k-other\"");
    expect("rs256-expired.jwt", TS_EINVAL, "expired at 1700000600");
    expect("rs256-wrong-aud.jwt", TS_EINVAL, "aud: not for this audience");
    expect("rs256-not-yet.jwt", TS_EINVAL, "not valid before 4000000000");
    expect("rs256-wrong-iss.jwt", TS_EINVAL, "iss: \"https://evil.test\"");
    expect("hs256.jwt", TS_EINVAL, "header.alg: \"HS256\" is not accepted");
    expect("none.jwt", TS_EINVAL, "signature: missing");
}

static void malformed_input_is_refused(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "", ".", "..", "a.b", "a.b.c.d", "!!!.e30.AAAA", "e30.!!!.AAAA",
        "W10.e30.AAAA", /* header [] is not an object */
        "eyJhbGciOiJSUzI1NiJ9.e30.A", /* a lone base64 character */
    };
    char why[256];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ctld_jwt j;
        int rc = ctld_jwt_parse(bad[i], &j, why, sizeof why);
        ctld_jwt_fini(&j);
        if (rc != TS_EINVAL || strncmp(why, "ID token: ", 10) != 0)
            fail_msg("\"%s\": rc %d why \"%s\"", bad[i], rc, why);
    }
    /* longer than the bound */
    static char big[CTLD_JWT_MAX_BYTES + 8];
    memset(big, 'a', sizeof big - 1);
    ctld_jwt j;
    assert_int_equal(ctld_jwt_parse(big, &j, why, sizeof why), TS_EINVAL);
    ctld_jwt_fini(&j);
    assert_non_null(strstr(why, "longer than"));
}

static void claims_edges(void **state)
{
    (void)state;
    char why[256];
    ctld_jwt j;
    assert_int_equal(ctld_jwt_parse(slurp("rs256.jwt"), &j, why, sizeof why), 0);
    /* exp 4102444800: within leeway after it still passes, beyond it not */
    assert_int_equal(ctld_jwt_check_claims(&j, ISSUER, AUD, 4102444800.0 + 10, 30, why,
                                           sizeof why), 0);
    assert_int_equal(ctld_jwt_check_claims(&j, ISSUER, AUD, 4102444800.0 + 31, 30, why,
                                           sizeof why), TS_EINVAL);
    /* aud is a list holding ours; another audience is refused */
    assert_int_equal(ctld_jwt_check_claims(&j, ISSUER, "x", NOW_S, 30, why, sizeof why), 0);
    assert_int_equal(ctld_jwt_check_claims(&j, ISSUER, "y", NOW_S, 30, why, sizeof why),
                     TS_EINVAL);
    ctld_jwt_fini(&j);
}

static void b64url_round_trips(void **state)
{
    (void)state;
    size_t n = 0;
    uint8_t *b = ctld_b64url_decode("aGVsbG8-_w", 10, &n);
    assert_non_null(b);
    assert_int_equal(n, 7);
    assert_memory_equal(b, "hello>\xff", 7);
    free(b);
    assert_null(ctld_b64url_decode("a+b/", 4, &n)); /* plain base64's alphabet */
    assert_null(ctld_b64url_decode("abcde", 5, &n)); /* a length no encoding gives */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(valid_tokens_verify),
        cmocka_unit_test(bad_tokens_fail_with_their_reason),
        cmocka_unit_test(malformed_input_is_refused),
        cmocka_unit_test(claims_edges),
        cmocka_unit_test(b64url_round_trips),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
