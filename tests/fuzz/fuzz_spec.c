/*
 * fuzz_spec.c - libFuzzer target for the job spec parser (src/api/spec.c).
 *
 * Feeds arbitrary bytes to ts_spec_parse, which must never read past len,
 * crash, leak or take long, and checks the contract on both outcomes. On
 * failure: *out stays NULL, there is at least one error, and every message
 * (and their join into a short buffer) is one line of valid UTF-8, since the
 * API puts them in JSON. On success: the spec keeps the header's invariants,
 * its canonical JSON fits TS_SPEC_MAX_BYTES, parses back to an equal spec
 * field by field, and prints the same bytes again. Build with -DTS_FUZZ=ON
 * (clang); seed it with the examples of docs/job-spec.md.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../api/spec_equal.h"
#include "tessera/spec.h"

#define FUZZ_JOIN_SMALL 37 /* odd, to cut inside messages and characters */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Valid UTF-8 (no overlongs, surrogates or values past U+10FFFF) and no
 * control characters or line breaks (C0, DEL, C1 with NEL, U+2028, U+2029). */
static bool one_line_utf8(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        unsigned c = *p;
        int n = c < 0x80             ? 0
                : (c & 0xE0) == 0xC0 ? 1
                : (c & 0xF0) == 0xE0 ? 2
                : (c & 0xF8) == 0xF0 ? 3
                                     : -1;
        if (n < 0 || (n == 0 && (c < 0x20 || c == 0x7F)))
            return false;
        uint32_t cp = n == 0 ? c : c & (0x3Fu >> n);
        for (int i = 1; i <= n; i++) {
            if ((p[i] & 0xC0) != 0x80)
                return false;
            cp = (cp << 6) | (p[i] & 0x3Fu);
        }
        static const uint32_t MIN[] = {0, 0x80, 0x800, 0x10000};
        if (cp < MIN[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF) ||
            (cp >= 0x80 && cp <= 0x9F) || cp == 0x2028 || cp == 0x2029)
            return false;
        p += n + 1;
    }
    return true;
}

static void check_invariants(const ts_job_spec *s)
{
    int64_t ranks = 0;
    if (s->ntasks < 1 || !s->tenant[0] || !s->name[0] || s->array_size < 1 ||
        s->array_size > TS_SPEC_MAX_ARRAY || (s->tier != 0 && s->tier != 1))
        abort();
    for (int i = 0; i < s->ntasks; i++) {
        const ts_task_spec *t = &s->tasks[i];
        bool share = t->gpu_milli < 1000;
        if (t->count < 1 || t->gpus < 0 || t->gpus > 16 || t->gpu_milli < 1 ||
            t->gpu_milli > 1000 || (share && t->gpus != 1) ||
            (t->mig_profile[0] && (t->gpus != 0 || share)) || t->cpu_milli < 0 || t->mem_mib < 0)
            abort();
        ranks += t->count;
    }
    if (ranks > TS_SPEC_MAX_TASKS || s->argc > TS_SPEC_MAX_ARGS || s->nenv > TS_SPEC_MAX_ENV)
        abort();
    if (s->time_limit_s < 0 || s->duration_s < 0 || s->idle_timeout_s < 0 ||
        (s->ckpt_grace_s < 0 && s->ckpt_grace_s != -1) || s->ckpt_signal < 0 ||
        s->ckpt_signal > 64 || (s->workdir && s->workdir[0] != '/'))
        abort();
    for (int i = 0; i < s->nenv; i++)
        if (!strchr(s->env[i], '='))
            abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* a private copy, so ASan catches any read past size */
    char *buf = malloc(size ? size : 1);
    if (!buf)
        return 0;
    if (size)
        memcpy(buf, data, size);
    ts_job_spec *s = NULL;
    ts_spec_errors errs;
    int rc = ts_spec_parse(buf, size, &s, &errs);
    free(buf);
    if (rc != 0) {
        if (s || errs.n < 1 || errs.n > TS_SPEC_MAX_ERRORS || errs.more < 0)
            abort();
        for (int i = 0; i < errs.n; i++)
            if (!memchr(errs.msg[i], '\0', sizeof errs.msg[i]) || !one_line_utf8(errs.msg[i]))
                abort();
        char small[FUZZ_JOIN_SMALL];
        ts_spec_errors_join(&errs, small, sizeof small);
        if (!one_line_utf8(small))
            abort();
        return 0;
    }
    if (!s)
        abort();
    check_invariants(s);
    char *json = ts_spec_to_json(s);
    if (!json || strlen(json) > TS_SPEC_MAX_BYTES)
        abort();
    ts_job_spec *back = NULL;
    if (ts_spec_parse(json, strlen(json), &back, &errs) != 0)
        abort();
    char why[128];
    if (!ts_test_spec_equal(s, back, why, sizeof why))
        abort();
    char *again = ts_spec_to_json(back);
    if (!again || strcmp(json, again) != 0)
        abort();
    free(again);
    free(json);
    ts_spec_free(back);
    ts_spec_free(s);
    return 0;
}
