/*
 * spec_walk.c - the job spec parser's walk over libyaml's tree: collecting
 * errors, quoting bad values back safely, JSON-style key paths, visiting each
 * node once, closed-schema mappings and the typed scalar readers (see
 * spec_walk.h).
 *
 * These are the pieces that decide how strict the spec format is (what an
 * integer, a boolean or null is; which keys a mapping may hold) and how every
 * complaint reads, kept apart from spec.c, which knows the keys. The
 * one-error-and-stop helpers of model/yaml_doc.c do not fit a parser that
 * reports every error, so only its loading and its small pure helpers are
 * used here.
 */
#include "api/spec_walk.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/spec_scalar.h"

#define INT64_DIGITS_SAFE 18 /* more might overflow; every range here is far smaller */

/* ---- errors ------------------------------------------------------------------ */

void spec_push(ts_spec_errors *errs, const char *fmt, ...)
{
    if (errs->n >= TS_SPEC_MAX_ERRORS) {
        errs->more++;
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(errs->msg[errs->n++], TS_ERR_MSG_MAX, fmt, ap);
    va_end(ap);
}

/* A reason may quote what the spec said: every error is one line of valid
 * UTF-8, so a control character, a line break or a byte that is not part of a
 * whole UTF-8 sequence (also one a length cut split) becomes '?'. */
static void one_line(char *msg)
{
    unsigned char *p = (unsigned char *)msg;
    while (*p) {
        unsigned c = *p;
        int n = c < 0x80 ? 0 : (c & 0xE0) == 0xC0 ? 1 : (c & 0xF0) == 0xE0 ? 2
                : (c & 0xF8) == 0xF0 ? 3 : -1;
        uint32_t cp = n <= 0 ? c : c & (0x3Fu >> n);
        bool ok = n >= 0 && !(n == 0 && (c < 0x20 || c == 0x7F));
        for (int i = 1; ok && i <= n; i++) {
            ok = (p[i] & 0xC0) == 0x80;
            cp = (cp << 6) | (p[i] & 0x3Fu);
        }
        static const uint32_t MIN[] = {0, 0x80, 0x800, 0x10000};
        if (ok && n > 0)
            ok = cp >= MIN[n] && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF) &&
                 !(cp >= 0x80 && cp <= 0x9F) && cp != 0x2028 && cp != 0x2029;
        if (!ok) {
            *p++ = '?';
            continue;
        }
        p += n + 1;
    }
}

void spec_fail(spec_parser *P, const char *path, const char *fmt, ...)
{
    P->walk_failed = true;
    if (P->errs->n >= TS_SPEC_MAX_ERRORS) { /* only counted: skip the formatting */
        P->errs->more++;
        return;
    }
    char reason[TS_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, sizeof reason, fmt, ap);
    va_end(ap);
    spec_push(P->errs, "%.*s: %.*s", SPEC_PATH_MAX, path[0] ? path : "top level",
              TS_ERR_MSG_MAX - SPEC_PATH_MAX - 3, reason);
    one_line(P->errs->msg[P->errs->n - 1]);
}

void spec_fail_oom(spec_parser *P)
{
    if (!P->oom)
        spec_fail(P, "top level", "out of memory");
    P->oom = true;
}

/* The length of a line break or control character at s[i] that is not
 * ASCII (U+0080..U+009F, which hold NEL, and U+2028, U+2029), else 0. */
static size_t wide_control(const unsigned char *s, size_t i, size_t len)
{
    if (s[i] == 0xC2 && i + 1 < len && s[i + 1] >= 0x80 && s[i + 1] <= 0x9F)
        return 2;
    if (s[i] == 0xE2 && i + 2 < len && s[i + 1] == 0x80 && (s[i + 2] == 0xA8 || s[i + 2] == 0xA9))
        return 3;
    return 0;
}

/* Text from the user, made safe to put in a message: at most SPEC_SHOW_MAX
 * bytes cut at a UTF-8 character boundary, control characters and line
 * breaks as '?', so a message is always one line of valid UTF-8 (the API puts
 * it in JSON, the CLI on a terminal). */
static void spec_sanitize(const char *text, size_t len, char *out, size_t size)
{
    const unsigned char *s = (const unsigned char *)text;
    size_t o = 0, i = 0;
    while (i < len && o + 4 < size) {
        unsigned char c = s[i];
        if (i >= SPEC_SHOW_MAX && (c & 0xC0) != 0x80)
            break;
        size_t wide = wide_control(s, i, len);
        if (wide || c < 0x20 || c == 0x7F) {
            out[o++] = '?';
            i += wide ? wide : 1;
        } else {
            out[o++] = (char)c;
            i++;
        }
    }
    if (i < len) {
        out[o++] = '.';
        out[o++] = '.';
        out[o++] = '.';
    }
    out[o] = '\0';
}

bool spec_is_null(const yaml_node_t *n)
{
    if (!n || n->type != YAML_SCALAR_NODE || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return false;
    const char *s = (const char *)n->data.scalar.value;
    return !s[0] || strcmp(s, "~") == 0 || strcmp(s, "null") == 0 || strcmp(s, "Null") == 0 ||
           strcmp(s, "NULL") == 0;
}

/* What a value is, for "got ...": "17" (as written), the string "17" (quoted,
 * so not a number), null, a mapping, a list. */
void spec_show(const yaml_node_t *n, char *buf, size_t size)
{
    char text[SPEC_SHOW_BUF];
    if (!n)
        snprintf(buf, size, "nothing");
    else if (n->type == YAML_MAPPING_NODE)
        snprintf(buf, size, "a mapping");
    else if (n->type == YAML_SEQUENCE_NODE)
        snprintf(buf, size, "a list");
    else if (n->type != YAML_SCALAR_NODE)
        snprintf(buf, size, "nothing");
    else if (spec_is_null(n))
        snprintf(buf, size, "null");
    else {
        spec_sanitize((const char *)n->data.scalar.value, n->data.scalar.length, text, sizeof text);
        snprintf(buf, size, "%s\"%s\"",
                 n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE ? "" : "the string ", text);
    }
}

void spec_show_name(const yaml_node_t *n, char *buf, size_t size)
{
    char text[SPEC_SHOW_BUF];
    if (!n || n->type != YAML_SCALAR_NODE || spec_is_null(n)) {
        spec_show(n, buf, size);
        return;
    }
    spec_sanitize((const char *)n->data.scalar.value, n->data.scalar.length, text, sizeof text);
    snprintf(buf, size, "\"%s\"", text);
}

void spec_fail_got(spec_parser *P, const yaml_node_t *n, const char *path, const char *want)
{
    char got[SPEC_SHOW_BUF + 16];
    spec_show(n, got, sizeof got);
    spec_fail(P, path, "must be %s, got %s", want, got);
}

/* ---- paths and nodes ---------------------------------------------------------- */

static bool is_word(const char *s)
{
    if (!s[0] || strlen(s) > SPEC_SHOW_MAX)
        return false;
    for (const char *p = s; *p; p++) {
        char c = *p;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-'))
            return false;
    }
    return true;
}

/* parent.key, or parent["key"] for a key that is not a plain word. */
void spec_key_path(char *buf, size_t size, const char *parent, const char *key, size_t keylen)
{
    if (is_word(key) && strlen(key) == keylen) {
        ts_yaml_pathf(buf, size, "%s%s%s", parent, parent[0] ? "." : "", key);
    } else {
        char text[SPEC_SHOW_BUF];
        spec_sanitize(key, keylen, text, sizeof text);
        ts_yaml_pathf(buf, size, "%s[\"%s\"]", parent, text);
    }
}

/* A scalar's text when it holds no NUL byte (C strings would cut it), else
 * NULL. */
const char *spec_scalar_text(const yaml_node_t *n)
{
    const char *s = ts_yaml_scalar(n);
    return s && strlen(s) == n->data.scalar.length ? s : NULL;
}

/* The node with this id, once: a second visit means an alias, refused so
 * that no input costs more than its own size to walk. */
yaml_node_t *spec_child(spec_parser *P, int id, const char *path, bool *reused)
{
    yaml_node_t *n = ts_yaml_node(&P->y, id);
    *reused = false;
    if (!n)
        return NULL;
    size_t i = (size_t)(id - 1);
    if (i < P->nnodes && P->seen[i]) {
        spec_fail(P, path, "aliases (*name) are not allowed in a job spec");
        *reused = true;
        return NULL;
    }
    if (i < P->nnodes)
        P->seen[i] = 1;
    return n;
}

/*
 * The value nodes of a mapping with a fixed key set: vals[k] gets key k's
 * value, NULL when absent or null. *given has bit k set when key k was given
 * with a value other than null (even a bad one). Unknown, repeated and
 * non-scalar keys are errors; the rest of the mapping is still read. False
 * when map is not a mapping at all.
 */
bool spec_map_fields(spec_parser *P, const yaml_node_t *map, const char *path,
                     const char *const *keys, int nkeys, yaml_node_t **vals, unsigned *given)
{
    for (int i = 0; i < nkeys; i++)
        vals[i] = NULL;
    *given = 0;
    if (map->type != YAML_MAPPING_NODE) {
        spec_fail_got(P, map, path[0] ? path : "top level", "a mapping");
        return false;
    }
    unsigned seen_keys = 0;
    char kpath[SPEC_PATH_MAX];
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
         p++) {
        yaml_node_t *k = ts_yaml_node(&P->y, p->key);
        const char *ks = ts_yaml_scalar(k);
        if (!ks) {
            char got[SPEC_SHOW_BUF];
            spec_show(k, got, sizeof got);
            spec_fail(P, path, "keys must be names, got %s", got);
            continue;
        }
        spec_key_path(kpath, sizeof kpath, path, ks, k->data.scalar.length);
        int idx = -1;
        for (int i = 0; i < nkeys && spec_scalar_text(k); i++)
            if (strcmp(ks, keys[i]) == 0)
                idx = i;
        if (idx < 0) {
            char expect[SPEC_EXPECT_MAX];
            ts_yaml_expect_keys(ks, keys, nkeys, "docs/job-spec.md", expect, sizeof expect);
            spec_fail(P, kpath, "unknown key (%s)", expect);
            continue;
        }
        if (seen_keys & BIT(idx)) {
            spec_fail(P, kpath, "key given twice");
            continue;
        }
        seen_keys |= BIT(idx);
        bool reused;
        yaml_node_t *v = spec_child(P, p->value, kpath, &reused);
        if (reused)
            *given |= BIT(idx);
        if (!v || spec_is_null(v))
            continue;
        vals[idx] = v;
        *given |= BIT(idx);
    }
    return true;
}

/* ---- scalars ------------------------------------------------------------------ */

/* Any scalar's text (a plain 5 or true reads as "5" or "true"). */
const char *spec_text(spec_parser *P, const yaml_node_t *n, const char *path)
{
    if (n->type != YAML_SCALAR_NODE) {
        spec_fail_got(P, n, path, "a string");
        return NULL;
    }
    const char *s = spec_scalar_text(n);
    if (!s)
        spec_fail(P, path, "must not contain a NUL character");
    return s;
}

bool spec_name(spec_parser *P, const yaml_node_t *n, const char *path, bool empty_ok,
               char out[TS_SPEC_NAME_MAX])
{
    const char *s = spec_text(P, n, path);
    if (!s)
        return false;
    if (!(empty_ok && !s[0]) && !ts_yaml_name_ok(s, TS_SPEC_NAME_MAX)) {
        spec_fail_got(P, n, path, "1..63 characters of A-Z a-z 0-9 . _ -");
        return false;
    }
    snprintf(out, TS_SPEC_NAME_MAX, "%s", s);
    return true;
}

/* Integers are plain decimal: a quoted "4" is a string, and a leading zero
 * would be octal to YAML 1.1 readers, so both are refused. */
bool spec_int(spec_parser *P, const yaml_node_t *n, const char *path, int64_t lo, int64_t hi,
              int64_t *out)
{
    const char *s = spec_scalar_text(n);
    if (!s || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE) {
        spec_fail_got(P, n, path, "an integer");
        return false;
    }
    const char *d = s[0] == '-' ? s + 1 : s;
    size_t len = strlen(d);
    bool ok = len > 0 && !(d[0] == '0' && len > 1);
    for (size_t i = 0; ok && i < len; i++)
        ok = d[i] >= '0' && d[i] <= '9';
    if (!ok) {
        spec_fail_got(P, n, path, "an integer");
        return false;
    }
    long long v = len <= INT64_DIGITS_SAFE ? strtoll(s, NULL, 10) : 0;
    if (len > INT64_DIGITS_SAFE || v < lo || v > hi) {
        char want[64];
        snprintf(want, sizeof want, "%lld..%lld", (long long)lo, (long long)hi);
        spec_fail_got(P, n, path, want);
        return false;
    }
    *out = v;
    return true;
}

bool spec_bool(spec_parser *P, const yaml_node_t *n, const char *path, bool *out)
{
    const char *s = spec_scalar_text(n);
    bool plain = s && n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
    if (plain && (!strcmp(s, "true") || !strcmp(s, "True") || !strcmp(s, "TRUE"))) {
        *out = true;
        return true;
    }
    if (plain && (!strcmp(s, "false") || !strcmp(s, "False") || !strcmp(s, "FALSE"))) {
        *out = false;
        return true;
    }
    spec_fail_got(P, n, path, "true or false");
    return false;
}

bool spec_duration(spec_parser *P, const yaml_node_t *n, const char *path, double *out)
{
    const char *s = spec_scalar_text(n);
    if (!s || !api_spec_duration(s, out)) {
        spec_fail_got(P, n, path, "a duration up to 365d: seconds, or like 90m, 2h, 1d, 1h30m");
        return false;
    }
    return true;
}

char *spec_dup(spec_parser *P, const char *s)
{
    char *d = strdup(s);
    if (!d)
        spec_fail_oom(P);
    return d;
}

void spec_walk_list(spec_parser *P, const yaml_node_t *seq, const spec_list_def *def)
{
    if (seq->type != YAML_SEQUENCE_NODE) {
        spec_fail_got(P, seq, def->key, def->want);
        return;
    }
    ptrdiff_t n = seq->data.sequence.items.top - seq->data.sequence.items.start;
    if (n > def->max) {
        spec_fail(P, def->key, "%td %s, at most %d", n, def->noun, def->max);
        return;
    }
    void *items = n ? calloc((size_t)n, def->elem_size) : NULL;
    if (n && !items) {
        spec_fail_oom(P);
        return;
    }
    /* the spec's array (ts_spec_data *, ...): an object pointer as any other */
    *(void **)((char *)P->spec + def->member) = items;
    char path[SPEC_PATH_MAX];
    for (ptrdiff_t i = 0; i < n; i++) {
        snprintf(path, sizeof path, "%s[%td]", def->key, i);
        bool reused;
        yaml_node_t *it = spec_child(P, seq->data.sequence.items.start[i], path, &reused);
        if (it)
            def->one(P, it, path);
    }
}

bool spec_map_need(spec_parser *P, const yaml_node_t *n, const char *path,
                   const char *const *keys, int nkeys, int nneed, const char *want,
                   yaml_node_t **v)
{
    unsigned given;
    if (!spec_map_fields(P, n, path, keys, nkeys, v, &given)) {
        spec_fail_got(P, n, path, want);
        return false;
    }
    for (int k = 0; k < nneed; k++)
        if (!v[k]) {
            char sub[SPEC_PATH_MAX + 16];
            snprintf(sub, sizeof sub, "%s.%s", path, keys[k]);
            spec_fail(P, sub, "required");
            return false;
        }
    return true;
}
