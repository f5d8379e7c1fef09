/*
 * fuzz_tenants.c - libFuzzer target for the tenants YAML loader.
 *
 * Feeds arbitrary bytes to ts_load_tenants_yaml (which must never read past
 * len, crash, or leak, whatever the input) and checks the contract on both
 * outcomes: on failure *out stays NULL and the message is a terminated string
 * naming the file; on success the tree is one the tree's own validation and
 * the quota layer accept, with every parent before its children. Build with
 * -DTS_FUZZ=ON (clang); seed it with examples/philly/tenants.yaml.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tessera/tenant_load.h"

#define FUZZ_HALF_LIFE_S 3600.0

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* a private copy, so ASan catches any read past size */
    char *buf = malloc(size ? size : 1);
    if (!buf)
        return 0;
    if (size)
        memcpy(buf, data, size);
    ts_tenants *ts = NULL;
    ts_err err = {0};
    int rc = ts_load_tenants_yaml(buf, size, "fuzz.yaml", &ts, &err);
    free(buf);
    if (rc < 0) {
        if (ts || memchr(err.msg, '\0', sizeof err.msg) == NULL ||
            strncmp(err.msg, "fuzz.yaml", 9) != 0)
            abort();
        return 0;
    }
    if (!ts || ts->n < 1 || ts_tenants_validate(ts, &err) != 0)
        abort();
    for (int i = 0; i < ts->n; i++)
        if (ts->t[i].parent >= i || (ts->t[i].parent < 0) != (ts->t[i].depth == 0))
            abort();
    ts_quota *q = NULL;
    if (ts_quota_new(ts, FUZZ_HALF_LIFE_S, &q, &err) != 0)
        abort();
    ts_quota_free(q);
    ts_tenants_free(ts);
    return 0;
}
