/*
 * yaml_doc.c - what the libyaml-document loaders share (see yaml_doc.h).
 *
 * Both the cluster and the tenants file are read the same way: libyaml's
 * document API builds the whole tree with a start mark on every node, the
 * caller walks it with a closed schema, and every error reads
 * "file:line: key.path: why". Keeping the loading, message formatting and
 * strict scalar checks in one place means the two formats cannot drift apart
 * in what they accept or how they complain. Nothing here knows either schema.
 */
#include "model/yaml_doc.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int model_yaml_line(const yaml_node_t *n) { return (int)n->start_mark.line + 1; }

yaml_node_t *ts_yaml_node(const ts_yaml_doc *D, int id)
{
    return yaml_document_get_node(D->doc, id);
}

const char *ts_yaml_scalar(const yaml_node_t *n)
{
    return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

int ts_yaml_fail(const ts_yaml_doc *D, const yaml_node_t *at, int code, const char *fmt, ...)
{
    char msg[TS_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    int line = at ? model_yaml_line(at) : 1;
    ts_err full;
    ts_err_set(&full, code, "%s:%d: %s", D->fname, line, msg);
    ts_errs_add(D->all, line, full.msg);
    if (D->err)
        *D->err = full;
    return code;
}

void ts_yaml_pathf(char *buf, size_t size, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, size, fmt, ap);
    va_end(ap);
}

void model_yaml_describe(const yaml_node_t *n, char *buf, size_t size)
{
    const char *s = ts_yaml_scalar(n);
    if (s)
        snprintf(buf, size, "\"%.*s%s\"", TS_YAML_SHOW_MAX, s,
                 strlen(s) > TS_YAML_SHOW_MAX ? "..." : "");
    else if (n && n->type == YAML_MAPPING_NODE)
        snprintf(buf, size, "a mapping");
    else if (n && n->type == YAML_SEQUENCE_NODE)
        snprintf(buf, size, "a list");
    else
        snprintf(buf, size, "nothing");
}

int ts_yaml_fail_got(const ts_yaml_doc *D, const yaml_node_t *n, const char *path,
                     const char *want)
{
    char got[TS_YAML_GOT_MAX];
    model_yaml_describe(n, got, sizeof got);
    return ts_yaml_fail(D, n, TS_EINVAL, "%s: must be %s, got %s", path, want, got);
}

/* Names appear in messages, in GPU vertex names ("<node>/gpu3"), in job files
 * and in label selectors, so keep them plain. */
bool ts_yaml_name_ok(const char *s, size_t max)
{
    size_t n = strlen(s);
    if (n == 0 || n >= max)
        return false;
    for (const char *p = s; *p; p++) {
        char ch = *p;
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                  (ch >= '0' && ch <= '9') || ch == '-' || ch == '_' || ch == '.';
        if (!ok)
            return false;
    }
    return true;
}

int ts_yaml_get_int(const ts_yaml_doc *D, const yaml_node_t *n, const char *path, int64_t lo,
                    int64_t hi, const char *want, int64_t *out)
{
    const char *s = ts_yaml_scalar(n);
    if (!s || !*s)
        return ts_yaml_fail_got(D, n, path, want);
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    /* strtoll skips leading blanks and takes "+": neither is an integer here */
    if (*end || errno || s[0] == ' ' || s[0] == '\t' || s[0] == '+' || v < lo || v > hi)
        return ts_yaml_fail_got(D, n, path, want);
    *out = v;
    return 0;
}

#define YAML_KEY_NEAR_LEN 32 /* keys compared for the nearest one: at most this long */
#define YAML_NEAR_MAX 3      /* the farthest a nearest key may be (edits) */

/* Levenshtein's distance between a and b; YAML_NEAR_MAX + 1 (too far to
 * suggest) where either is longer than YAML_KEY_NEAR_LEN. */
static int near_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > YAML_KEY_NEAR_LEN || lb > YAML_KEY_NEAR_LEN)
        return YAML_NEAR_MAX + 1;
    int row[YAML_KEY_NEAR_LEN + 1];
    for (size_t j = 0; j <= lb; j++)
        row[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        int diag = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int up = row[j];
            int best = diag + (a[i - 1] != b[j - 1]);
            best = up + 1 < best ? up + 1 : best;
            best = row[j - 1] + 1 < best ? row[j - 1] + 1 : best;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

void ts_yaml_expect_keys(const char *got, const char *const *keys, int nkeys, const char *doc,
                         char *out, size_t size)
{
    /* the nearest key, where one is near: a typo's fix first */
    int best = -1, bestd = YAML_NEAR_MAX + 1;
    for (int i = 0; i < nkeys; i++) {
        int d = near_distance(got, keys[i]);
        if (d < bestd && (size_t)d * 3 <= strlen(keys[i]) + 2) {
            best = i;
            bestd = d;
        }
    }
    size_t used = 0;
    if (best >= 0)
        used = (size_t)snprintf(out, size, "did you mean \"%s\"? ", keys[best]);
    used += (size_t)snprintf(out + used, size - used, "expected one of: ");
    for (int i = 0; i < nkeys && used < size; i++) {
        /* whole names only: the rest named by where they are listed */
        if (used + strlen(keys[i]) + strlen(doc) + sizeof ", , ... ()" > size) {
            snprintf(out + used, size - used, ", ... (%s)", doc);
            return;
        }
        used += (size_t)snprintf(out + used, size - used, "%s%s", i ? ", " : "", keys[i]);
    }
}

int ts_yaml_map_fields(const ts_yaml_doc *D, const yaml_node_t *map, const char *path,
                       const char *const *keys, int nkeys, yaml_node_t **vals)
{
    for (int i = 0; i < nkeys; i++)
        vals[i] = NULL;
    if (!map || map->type != YAML_MAPPING_NODE)
        return ts_yaml_fail_got(D, map, path[0] ? path : "top level", "a mapping");
    int rc = 0;
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start;
         p < map->data.mapping.pairs.top && (rc == 0 || D->all); p++) {
        yaml_node_t *k = ts_yaml_node(D, p->key);
        const char *ks = ts_yaml_scalar(k);
        int idx = -1;
        for (int i = 0; ks && i < nkeys; i++)
            if (strcmp(ks, keys[i]) == 0)
                idx = i;
        if (idx < 0) {
            char got[TS_YAML_GOT_MAX], expect[TS_YAML_EXPECT_MAX];
            model_yaml_describe(k, got, sizeof got);
            ts_yaml_expect_keys(ks ? ks : "", keys, nkeys, "its format's page in docs/", expect,
                                sizeof expect);
            rc = ts_yaml_fail(D, k, TS_EINVAL, "%s: unknown key %s (%s)",
                              path[0] ? path : "top level", got, expect);
        } else if (vals[idx]) {
            rc = ts_yaml_fail(D, k, TS_EINVAL, "%s%s%s: key given twice", path,
                              path[0] ? "." : "", keys[idx]);
        } else {
            vals[idx] = ts_yaml_node(D, p->value);
        }
    }
    return rc;
}

static int parse_failed(const ts_yaml_doc *D, const yaml_parser_t *p)
{
    int line = (int)p->problem_mark.line + 1;
    if (p->error == YAML_MEMORY_ERROR)
        return ts_err_set(D->err, TS_ENOMEM, "%s: out of memory parsing YAML", D->fname);
    if (p->context && (int)p->context_mark.line + 1 != line)
        return ts_err_set(D->err, TS_EINVAL, "%s:%d: malformed YAML: %s %s (started at line %d)",
                          D->fname, line, p->problem ? p->problem : "error", p->context,
                          (int)p->context_mark.line + 1);
    return ts_err_set(D->err, TS_EINVAL, "%s:%d: malformed YAML: %s%s%s", D->fname, line,
                      p->problem ? p->problem : "error", p->context ? " " : "",
                      p->context ? p->context : "");
}

int ts_yaml_load_one(ts_yaml_doc *D, const char *buf, size_t len, ts_yaml_walk_fn walk,
                     void *ctx)
{
    if (!buf)
        len = 0;
    yaml_parser_t parser;
    yaml_document_t doc;
    if (!yaml_parser_initialize(&parser))
        return ts_err_set(D->err, TS_ENOMEM, "%s: out of memory", D->fname);
    yaml_parser_set_input_string(&parser, (const unsigned char *)(buf ? buf : ""), len);
    int rc;
    if (!yaml_parser_load(&parser, &doc)) {
        rc = parse_failed(D, &parser);
        yaml_parser_delete(&parser);
        return rc;
    }
    D->doc = &doc;
    rc = walk(ctx);
    yaml_document_delete(&doc);
    D->doc = NULL;
    if (rc == 0) {
        /* a second document would be silently ignored otherwise */
        if (!yaml_parser_load(&parser, &doc)) {
            rc = parse_failed(D, &parser);
        } else {
            yaml_node_t *extra = yaml_document_get_root_node(&doc);
            if (extra)
                rc = ts_err_set(D->err, TS_EINVAL, "%s:%d: only one YAML document allowed",
                                D->fname, model_yaml_line(extra));
            yaml_document_delete(&doc);
        }
    }
    yaml_parser_delete(&parser);
    return rc;
}
