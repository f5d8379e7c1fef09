/*
 * fuzz_jwt.c - libFuzzer target for the ID token parser and verifier
 * (src/ctld/jwt.c), which read what any client sends as a bearer.
 *
 * An input that starts with '{' is a key set a fixed token is verified
 * against; any other is a token, parsed, verified against a fixed key set
 * and its claims checked. Neither may read
 * past its input, crash or leak; every failure leaves a reason that starts
 * "ID token: ". Seeds: the tokens and key set in tests/data/jwt.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ctld/jwt.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A P-256 and an RSA key of the fixtures' shape, so verification runs. */
static const char KEYS[] =
    "{\"keys\":[{\"kty\":\"EC\",\"kid\":\"e1\",\"crv\":\"P-256\","
    "\"x\":\"MKBCTNIcKUSDii11ySs3526iDZ8AiTo7Tu6KPAqv7D4\","
    "\"y\":\"4Etl6SRW2YiLUrN5vfvVHuhp7x8PxltmWWlbbM4IFyM\"},"
    "{\"kty\":\"RSA\",\"kid\":\"k1\",\"n\":\"0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbf"
    "AAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_"
    "RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbI"
    "SD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKn"
    "qDKgw\",\"e\":\"AQAB\"}]}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    char *s = malloc(size + 1); /* a NUL-terminated copy */
    if (!s)
        return 0;
    memcpy(s, data, size);
    s[size] = '\0';
    char why[256] = "";
    ctld_jwt j;
    json_error_t je;
    bool token_mode = data[0] != '{';
    json_t *keys = json_loads(token_mode ? KEYS : s, 0, &je);
    const char *tok = token_mode ? s : "eyJhbGciOiJFUzI1NiIsImtpZCI6ImUxIn0.e30.AAAA";
    if (ctld_jwt_parse(tok, &j, why, sizeof why) == 0) {
        int rc = keys ? ctld_jwt_verify(tok, &j, keys, why, sizeof why) : 0;
        if (rc == 0)
            rc = ctld_jwt_check_claims(&j, "https://issuer.test", "tessera", 1.8e9, 30, why,
                                       sizeof why);
        if (rc != 0 && strncmp(why, "ID token: ", 10) != 0)
            abort();
    } else if (strncmp(why, "ID token: ", 10) != 0) {
        abort();
    }
    ctld_jwt_fini(&j);
    json_decref(keys);
    free(s);
    return 0;
}
