/*
 * input.c - the checks behind docs/api.md "Limits on input": token names
 * keep to a charset and a length; an Idempotency-Key keeps to
 * CTLD_IDEM_KEY_MAX printable characters and is stored as its SHA-256 (a
 * fixed length, so nothing is cut and no key meets another's array
 * element); query times are read whole and bounded; a topology level must
 * be one the cluster has; and a tenants document's nesting is counted in
 * one pass before the YAML loader, whose cost grows with the square of the
 * nesting, sees it.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctld/input.h"
#include "ctld/http.h"
#include "tessera/name_list.h"

/* A 400 naming one field, in the shape of a spec error. */
void ctld_field_error(ctld_reply *r, const char *path, const char *fmt, ...)
{
    char why[512], msg[700];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    snprintf(msg, sizeof msg, "%s: %s", path, why);
    ctld_reply_json(r, 400, json_pack("{s:{s:s,s:s,s:[{s:s,s:s}]}}", "error", "code", "invalid",
                                      "message", msg, "fields", "path", path, "reason", why));
}

/* The Idempotency-Key as stored: "sha256:" and the hex digest of the whole
 * key (so its length is fixed, nothing is cut, and "z#0" cannot meet the
 * first element of an array sent with key "z"), to which each job adds
 * "#<element>" (a single job is element 0, so a key reused between a job
 * and an array meets itself and is a 422); "" without a key. false (and a
 * 400) when the key is too long or holds other than printable ASCII. */
bool ctld_idem_stored(const char *key, char out[CTLD_IDEM_STORED_MAX], ctld_reply *r)
{
    out[0] = '\0';
    if (!key)
        return true;
    size_t n = strlen(key);
    if (n == 0) { /* a header sent empty is a mistake, not "no key" */
        ctld_field_error(r, "Idempotency-Key", "empty; 1..%d printable ASCII characters",
                         CTLD_IDEM_KEY_MAX);
        return false;
    }
    if (n > CTLD_IDEM_KEY_MAX) {
        ctld_field_error(r, "Idempotency-Key", "%zu characters; at most %d", n, CTLD_IDEM_KEY_MAX);
        return false;
    }
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)key[i] <= 0x20 || (unsigned char)key[i] >= 0x7f) {
            ctld_field_error(r, "Idempotency-Key", "printable ASCII without spaces only (character "
                        "%zu is 0x%02x)", i + 1, (unsigned char)key[i]);
            return false;
        }
    uint8_t h[TS_TOKEN_HASH_BYTES];
    ctld_token_hash(key, h);
    memcpy(out, "sha256:", 7);
    for (int i = 0; i < TS_TOKEN_HASH_BYTES; i++)
        snprintf(out + 7 + 2 * i, 3, "%02x", h[i]);
    return true;
}

void ctld_idem_element(char out[TS_STORE_KEY_MAX], const char *stored, int i)
{
    if (stored && *stored)
        snprintf(out, TS_STORE_KEY_MAX, "%.100s#%d", stored, i);
    else
        out[0] = '\0';
}

/* A topology level the cluster has ("node", "any" or a level above gpu). */
bool ctld_level_known(const ctld *c, const char *name)
{
    if (!name[0] || strcmp(name, "node") == 0 || strcmp(name, "any") == 0)
        return true;
    int lv = c->cluster->topo ? ts_topo_level_index(c->cluster->topo, name) : -1;
    return lv >= 0 && lv < ts_topo_nlevels(c->cluster->topo) - 1;
}

/* How deeply a YAML document nests, counted in one pass: indentation
 * levels, "- " entries opening a line, and every [ { not yet closed. Quotes
 * and comments are not told apart, so a bracket inside them counts too: the
 * count errs toward refusing, never toward missing a level. Stops past
 * limit. The YAML loader's cost grows with the square of the nesting, so a
 * deep document is refused before it is parsed. */
int ctld_yaml_depth(const char *b, size_t len, int limit)
{
    int indents[CTLD_TENANTS_DEPTH_MAX + 2];
    int nind = 0, flow = 0, max = 0;
    size_t i = 0;
    while (i < len && max <= limit) {
        size_t ind = 0;
        while (i + ind < len && b[i + ind] == ' ')
            ind++;
        size_t p = i + ind;
        bool blank = p >= len || b[p] == '\n' || b[p] == '\r' || b[p] == '#';
        int depth = nind;
        if (!blank && flow == 0) {
            while (nind > 0 && indents[nind - 1] > (int)ind)
                nind--;
            if (nind == 0 || indents[nind - 1] < (int)ind) {
                if (nind >= CTLD_TENANTS_DEPTH_MAX + 2)
                    return limit + 1;
                indents[nind++] = (int)ind;
            }
            depth = nind;
            while (p + 1 < len && (b[p] == '-' || b[p] == '?') && b[p + 1] == ' ') {
                depth++;
                p += 2;
                while (p < len && b[p] == ' ')
                    p++;
            }
        }
        for (; p < len && b[p] != '\n'; p++) {
            if (b[p] == '[' || b[p] == '{') {
                if (depth + ++flow > max)
                    max = depth + flow;
            } else if ((b[p] == ']' || b[p] == '}') && flow > 0) {
                flow--;
            }
        }
        if (depth + flow > max)
            max = depth + flow;
        i = p < len ? p + 1 : len;
    }
    return max;
}

/* A query time: Unix seconds, a plain decimal number 0..CTLD_TIME_MAX read
 * whole; false (and a 400 naming the parameter) otherwise. */
bool ctld_time_of(const char *s, const char *param, double *out, ctld_reply *r)
{
    bool ok = s[0] != '\0';
    for (const char *p = s; ok && *p; p++)
        ok = (*p >= '0' && *p <= '9') || *p == '.' || *p == 'e' || *p == 'E' || *p == '-' ||
             *p == '+';
    char *end = NULL;
    double v = ok ? strtod(s, &end) : 0.0;
    if (!ok || *end || !isfinite(v) || v < 0.0 || v > CTLD_TIME_MAX) {
        ctld_reply_error(r, 400, "invalid", "%s: expected Unix seconds 0..%.0f, got \"%.64s\"",
                         param, CTLD_TIME_MAX, s);
        return false;
    }
    *out = v;
    return true;
}


const char *ctld_unknown_key(const json_t *in, const char *const *known, size_t n)
{
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)in, k, v) {
        bool ok = false;
        for (size_t i = 0; i < n && !ok; i++)
            ok = strcmp(k, known[i]) == 0;
        if (!ok)
            return k;
    }
    return NULL;
}

bool ctld_name_listed(const char *list, const char *name)
{
    return name[0] && ts_name_listed(list, name);
}
