/*
 * load_tenants.c - the tenants YAML (docs/tenants-format.md) into a ts_tenants.
 *
 * Built like the cluster loader (load_yaml.c): libyaml's document API gives the
 * whole tree with a start mark on every node, and the loader walks it with a
 * closed schema, so every error reads "file:line: key.path: why" and a typo is
 * an error, not a silent default. Its small helpers are private there, so the
 * few this file needs are repeated here in the same shape.
 *
 * Organisations are the keys of `tenants`; a tenant's `teams` nests the next
 * level. Tenants are added parent first (what ts_tenant_add requires), quotas
 * start from the tree's defaults (guarantee 0, limits unlimited) and only the
 * dimensions the file names change. The tree's own ts_tenants_validate has the
 * last word on children fitting their parent. The tree is handed over only
 * when everything succeeded; on any error it is freed and *out stays NULL.
 */
#include "tessera/tenant_load.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#define TYAML_SHOW_MAX 40  /* characters of a bad value quoted back */
#define TYAML_PATH_MAX 320 /* organisation + three team levels of 63-character names */
#define TYAML_UNLIMITED "unlimited"

typedef struct tloader {
    const char *fname;
    yaml_document_t *doc;
    ts_err *err;
    ts_tenants *ts;
    int *line; /* per tenant index: the line of its name */
    int line_cap;
} tloader;

/* ---- small helpers (same shape as load_yaml.c's) ---------------------------- */

static int line_of(const yaml_node_t *n) { return (int)n->start_mark.line + 1; }

static yaml_node_t *node_at(const tloader *L, int id)
{
    return yaml_document_get_node(L->doc, id);
}

static const char *scalar_of(const yaml_node_t *n)
{
    return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

__attribute__((format(printf, 4, 5)))
static int fail(const tloader *L, const yaml_node_t *at, int code, const char *fmt, ...)
{
    char msg[TS_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return ts_err_set(L->err, code, "%s:%d: %s", L->fname, at ? line_of(at) : 1, msg);
}

/* The tree's messages read "tenants.<name>.field: reason"; keep the reason and
 * put the file's line and the file's own key path in front. */
static int fail_tree(const tloader *L, const yaml_node_t *at, const char *path, int code)
{
    if (!L->err)
        return code;
    char reason[TS_ERR_MSG_MAX];
    const char *r = strstr(L->err->msg, ": ");
    snprintf(reason, sizeof reason, "%s", r ? r + 2 : L->err->msg);
    return fail(L, at, code, "%s: %s", path, reason);
}

__attribute__((format(printf, 3, 4)))
static void pathf(char *buf, size_t size, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, size, fmt, ap);
    va_end(ap);
}

static void describe(const yaml_node_t *n, char *buf, size_t size)
{
    const char *s = scalar_of(n);
    if (s)
        snprintf(buf, size, "\"%.*s%s\"", TYAML_SHOW_MAX, s,
                 strlen(s) > TYAML_SHOW_MAX ? "..." : "");
    else if (n && n->type == YAML_MAPPING_NODE)
        snprintf(buf, size, "a mapping");
    else if (n && n->type == YAML_SEQUENCE_NODE)
        snprintf(buf, size, "a list");
    else
        snprintf(buf, size, "nothing");
}

static int fail_got(const tloader *L, const yaml_node_t *n, const char *path, const char *want)
{
    char got[TYAML_SHOW_MAX + 16];
    describe(n, got, sizeof got);
    return fail(L, n, TS_EINVAL, "%s: must be %s, got %s", path, want, got);
}

/* Tenant names appear in job files, messages and config keys: keep them plain,
 * the same alphabet as the cluster file's names. */
static bool name_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n >= TS_NAME_MAX)
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

static int get_int(const tloader *L, const yaml_node_t *n, const char *path, int64_t lo,
                   int64_t hi, const char *want, int64_t *out)
{
    const char *s = scalar_of(n);
    if (!s || !*s)
        return fail_got(L, n, path, want);
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (*end || errno || s[0] == ' ' || s[0] == '\t' || s[0] == '+' || v < lo || v > hi)
        return fail_got(L, n, path, want);
    *out = v;
    return 0;
}

/* Plain decimal numbers only: strtod would also take "inf", "nan" and hex. */
static int get_number(const tloader *L, const yaml_node_t *n, const char *path, double *out)
{
    const char *s = scalar_of(n);
    bool ok = s && *s;
    for (const char *p = s; ok && *p; p++)
        ok = (*p >= '0' && *p <= '9') || *p == '.' || *p == 'e' || *p == 'E' || *p == '-' ||
             *p == '+';
    char *end = NULL;
    double v = ok ? strtod(s, &end) : 0.0;
    if (!ok || *end || s[0] == '+')
        return fail_got(L, n, path, "a positive number");
    *out = v;
    return 0;
}

/* The value nodes of a mapping with a fixed key set: vals[i] gets keys[i]'s
 * value or NULL. Unknown and repeated keys are errors, naming the key. */
static int map_fields(const tloader *L, const yaml_node_t *map, const char *path,
                      const char *const *keys, int nkeys, yaml_node_t **vals)
{
    for (int i = 0; i < nkeys; i++)
        vals[i] = NULL;
    if (!map || map->type != YAML_MAPPING_NODE)
        return fail_got(L, map, path[0] ? path : "top level", "a mapping");
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
         p++) {
        yaml_node_t *k = node_at(L, p->key);
        const char *ks = scalar_of(k);
        int idx = -1;
        for (int i = 0; ks && i < nkeys; i++)
            if (strcmp(ks, keys[i]) == 0)
                idx = i;
        if (idx < 0) {
            char got[TYAML_SHOW_MAX + 16], expect[256] = "";
            describe(k, got, sizeof got);
            for (int i = 0; i < nkeys; i++) {
                size_t used = strlen(expect);
                snprintf(expect + used, sizeof expect - used, "%s%s", i ? ", " : "", keys[i]);
            }
            return fail(L, k, TS_EINVAL, "%s: unknown key %s (expected one of: %s)",
                        path[0] ? path : "top level", got, expect);
        }
        if (vals[idx])
            return fail(L, k, TS_EINVAL, "%s%s%s: key given twice", path, path[0] ? "." : "",
                        keys[idx]);
        vals[idx] = node_at(L, p->value);
    }
    return 0;
}

/* `key:` with nothing after it: a tenant that keeps every default. */
static bool is_empty(const yaml_node_t *n)
{
    return n && n->type == YAML_SCALAR_NODE && n->data.scalar.length == 0 &&
           n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
}

/* ---- quotas ------------------------------------------------------------------ */

/* One amount in units of `unit` per written unit (1, or milli per whole GPU);
 * "unlimited" only for limits. */
static int get_amount(const tloader *L, const yaml_node_t *n, const char *path, bool limit,
                      int64_t unit, int64_t *out)
{
    const char *s = scalar_of(n);
    if (limit && s && strcmp(s, TYAML_UNLIMITED) == 0) {
        *out = TS_QUOTA_UNLIMITED;
        return 0;
    }
    char want[96];
    snprintf(want, sizeof want, "an integer 0..%lld%s", (long long)(TS_QUOTA_MAX / unit),
             limit ? " or " TYAML_UNLIMITED : "");
    int64_t v = 0;
    int rc = get_int(L, n, path, 0, TS_QUOTA_MAX / unit, want, &v);
    if (rc < 0)
        return rc;
    *out = v * unit;
    return 0;
}

static int load_gpu_quota(const tloader *L, const yaml_node_t *map, const char *path,
                          bool limit, int64_t vals[TS_RES_DIMS])
{
    char sub[TYAML_PATH_MAX + TS_NAME_MAX];
    int line_seen[TS_MAX_GPU_MODELS] = {0};
    if (map->type != YAML_MAPPING_NODE)
        return fail_got(L, map, path, "a mapping of GPU model: count");
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
         p++) {
        yaml_node_t *k = node_at(L, p->key);
        const char *ks = scalar_of(k);
        int model = ks ? ts_gpu_model_lookup(ks) : -1;
        if (model < 0 || model >= TS_MAX_GPU_MODELS) {
            char known[256] = "", got[TYAML_SHOW_MAX + 16];
            for (int i = 0; i < ts_gpu_model_count() && i < TS_MAX_GPU_MODELS; i++) {
                size_t used = strlen(known);
                snprintf(known + used, sizeof known - used, "%s%s", i ? ", " : "",
                         ts_gpu_model_get(i)->name);
            }
            describe(k, got, sizeof got);
            return fail(L, k, TS_EINVAL, "%s: unknown GPU model %s (known: %s)", path, got,
                        known);
        }
        pathf(sub, sizeof sub, "%s.%s", path, ks);
        if (line_seen[model])
            return fail(L, k, TS_EINVAL, "%s: key given twice (first at line %d)", sub,
                        line_seen[model]);
        line_seen[model] = line_of(k);
        int rc = get_amount(L, node_at(L, p->value), sub, limit, TS_MILLI_PER_GPU,
                            &vals[ts_res_gpu(model)]);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* A guaranteed / borrow_limit / lend_limit mapping into vals (dimensions not
 * named keep what vals held). */
static int load_quota(const tloader *L, const yaml_node_t *map, const char *path, bool limit,
                      int64_t vals[TS_RES_DIMS])
{
    enum { Q_CPU, Q_MEM, Q_GPU, Q_N };
    static const char *const keys[Q_N] = {"cpu_milli", "memory_mib", "gpu"};
    yaml_node_t *v[Q_N];
    char sub[TYAML_PATH_MAX + 16];
    int rc = map_fields(L, map, path, keys, Q_N, v);
    if (rc < 0)
        return rc;
    if (v[Q_CPU]) {
        pathf(sub, sizeof sub, "%s.cpu_milli", path);
        if ((rc = get_amount(L, v[Q_CPU], sub, limit, 1, &vals[TS_RES_CPU])) < 0)
            return rc;
    }
    if (v[Q_MEM]) {
        pathf(sub, sizeof sub, "%s.memory_mib", path);
        if ((rc = get_amount(L, v[Q_MEM], sub, limit, 1, &vals[TS_RES_MEM])) < 0)
            return rc;
    }
    if (v[Q_GPU]) {
        pathf(sub, sizeof sub, "%s.gpu", path);
        if ((rc = load_gpu_quota(L, v[Q_GPU], sub, limit, vals)) < 0)
            return rc;
    }
    return 0;
}

/* ---- the tree ------------------------------------------------------------------ */

static int record_line(tloader *L, int idx, int line)
{
    if (idx >= L->line_cap) {
        int ncap = L->line_cap ? L->line_cap * 2 : 32;
        while (ncap <= idx)
            ncap *= 2;
        int *nl = realloc(L->line, (size_t)ncap * sizeof *nl);
        if (!nl)
            return ts_err_set(L->err, TS_ENOMEM, "%s: out of memory", L->fname);
        L->line = nl;
        L->line_cap = ncap;
    }
    L->line[idx] = line;
    return 0;
}

static int load_tenants_map(tloader *L, const yaml_node_t *map, const char *path,
                            const char *parent);

/* One tenant: its name at key kn, its settings in map, under parent (NULL for
 * an organisation); path is the key path of the mapping holding it. */
static int load_tenant(tloader *L, const yaml_node_t *kn, const yaml_node_t *map,
                       const char *path, const char *parent)
{
    enum { K_WEIGHT, K_GUAR, K_BORROW, K_LEND, K_TEAMS, K_N };
    static const char *const keys[K_N] = {"weight", "guaranteed", "borrow_limit",
                                          "lend_limit", "teams"};
    char tpath[TYAML_PATH_MAX], sub[TYAML_PATH_MAX + 16];
    const char *name = scalar_of(kn);
    if (!name || !name_ok(name)) {
        char want[96];
        snprintf(want, sizeof want, "a tenant name of 1..%d characters from [A-Za-z0-9._-]",
                 TS_NAME_MAX - 1);
        return fail_got(L, kn, path, want);
    }
    pathf(tpath, sizeof tpath, "%s.%s", path, name);
    int dup = ts_tenant_find(L->ts, name);
    if (dup >= 0)
        return fail(L, kn, TS_EINVAL, "%s: duplicate tenant name \"%s\" (first at line %d)",
                    tpath, name, L->line[dup]);
    int t = ts_tenant_add(L->ts, name, parent, L->err);
    if (t < 0)
        return fail_tree(L, kn, tpath, t == TS_ENOMEM ? TS_ENOMEM : TS_EINVAL);
    int rc = record_line(L, t, line_of(kn));
    if (rc < 0)
        return rc;
    if (is_empty(map))
        return 0;

    yaml_node_t *v[K_N];
    if ((rc = map_fields(L, map, tpath, keys, K_N, v)) < 0)
        return rc;
    if (v[K_WEIGHT]) {
        pathf(sub, sizeof sub, "%s.weight", tpath);
        double w = 0.0;
        if ((rc = get_number(L, v[K_WEIGHT], sub, &w)) < 0)
            return rc;
        if ((rc = ts_tenant_set_weight(L->ts, t, w, L->err)) < 0)
            return fail_tree(L, v[K_WEIGHT], sub, TS_EINVAL);
    }
    int64_t guar[TS_RES_DIMS], borrow[TS_RES_DIMS], lend[TS_RES_DIMS];
    memcpy(guar, L->ts->t[t].guaranteed, sizeof guar);
    memcpy(borrow, L->ts->t[t].borrow_limit, sizeof borrow);
    memcpy(lend, L->ts->t[t].lend_limit, sizeof lend);
    pathf(sub, sizeof sub, "%s.guaranteed", tpath);
    if (v[K_GUAR] && (rc = load_quota(L, v[K_GUAR], sub, false, guar)) < 0)
        return rc;
    pathf(sub, sizeof sub, "%s.borrow_limit", tpath);
    if (v[K_BORROW] && (rc = load_quota(L, v[K_BORROW], sub, true, borrow)) < 0)
        return rc;
    pathf(sub, sizeof sub, "%s.lend_limit", tpath);
    if (v[K_LEND] && (rc = load_quota(L, v[K_LEND], sub, true, lend)) < 0)
        return rc;
    for (int d = 0; d < TS_RES_DIMS; d++)
        if ((rc = ts_tenant_set_quota(L->ts, t, d, guar[d], borrow[d], lend[d], L->err)) < 0)
            return fail_tree(L, map, tpath, TS_EINVAL);
    if (v[K_TEAMS]) {
        pathf(sub, sizeof sub, "%s.teams", tpath);
        return load_tenants_map(L, v[K_TEAMS], sub, name);
    }
    return 0;
}

static int load_tenants_map(tloader *L, const yaml_node_t *map, const char *path,
                            const char *parent)
{
    if (map->type != YAML_MAPPING_NODE)
        return fail_got(L, map, path, "a mapping of tenant name: settings");
    if (map->data.mapping.pairs.start == map->data.mapping.pairs.top)
        return fail(L, map, TS_EINVAL, "%s: must name at least one tenant", path);
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
         p++) {
        int rc = load_tenant(L, node_at(L, p->key), node_at(L, p->value), path, parent);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* The first tenant whose children's guarantees exceed its own, in the order
 * ts_tenants_validate checks them, or -1 (none, or no memory to look): the
 * line for the tree's message. */
static int overfull_parent(const ts_tenants *ts)
{
    int64_t *sum = calloc((size_t)(ts->n > 0 ? ts->n : 1) * TS_RES_DIMS, sizeof *sum);
    if (!sum)
        return -1;
    for (int c = 0; c < ts->n; c++)
        for (int d = 0; ts->t[c].parent >= 0 && d < TS_RES_DIMS; d++)
            sum[(size_t)ts->t[c].parent * TS_RES_DIMS + (size_t)d] += ts->t[c].guaranteed[d];
    int found = -1;
    for (int i = 0; found < 0 && i < ts->n; i++)
        for (int d = 0; found < 0 && d < TS_RES_DIMS; d++)
            if (sum[(size_t)i * TS_RES_DIMS + (size_t)d] > ts->t[i].guaranteed[d])
                found = i;
    free(sum);
    return found;
}

/* ---- entry point ---------------------------------------------------------------- */

static int parse_failed(const tloader *L, const yaml_parser_t *p)
{
    int line = (int)p->problem_mark.line + 1;
    if (p->error == YAML_MEMORY_ERROR)
        return ts_err_set(L->err, TS_ENOMEM, "%s: out of memory parsing YAML", L->fname);
    if (p->context && (int)p->context_mark.line + 1 != line)
        return ts_err_set(L->err, TS_EINVAL, "%s:%d: malformed YAML: %s %s (started at line %d)",
                          L->fname, line, p->problem ? p->problem : "error", p->context,
                          (int)p->context_mark.line + 1);
    return ts_err_set(L->err, TS_EINVAL, "%s:%d: malformed YAML: %s%s%s", L->fname, line,
                      p->problem ? p->problem : "error", p->context ? " " : "",
                      p->context ? p->context : "");
}

static int load_document(tloader *L)
{
    yaml_node_t *root = yaml_document_get_root_node(L->doc);
    if (!root || is_empty(root))
        return ts_err_set(L->err, TS_EINVAL, "%s:1: empty file: expected tenants", L->fname);
    static const char *const keys[] = {"tenants"};
    yaml_node_t *v[1];
    int rc = map_fields(L, root, "", keys, 1, v);
    if (rc < 0)
        return rc;
    if (!v[0])
        return fail(L, root, TS_EINVAL, "tenants: required");
    L->ts = ts_tenants_new();
    if (!L->ts)
        return ts_err_set(L->err, TS_ENOMEM, "%s: out of memory", L->fname);
    if ((rc = load_tenants_map(L, v[0], "tenants", NULL)) < 0)
        return rc;
    if ((rc = ts_tenants_validate(L->ts, L->err)) < 0) {
        int at = overfull_parent(L->ts);
        int line = at >= 0 ? L->line[at] : line_of(v[0]);
        if (L->err)
            ts_err_prefix(L->err, "%s:%d: ", L->fname, line);
        return rc;
    }
    return 0;
}

int ts_load_tenants_yaml(const char *buf, size_t len, const char *fname, ts_tenants **out,
                         ts_err *err)
{
    tloader L;
    memset(&L, 0, sizeof L);
    L.fname = fname ? fname : "<tenants yaml>";
    L.err = err;
    if (!out)
        return ts_err_set(err, TS_EINVAL, "%s: no output tenants given", L.fname);
    *out = NULL;
    if (!buf)
        len = 0;

    yaml_parser_t parser;
    yaml_document_t doc;
    if (!yaml_parser_initialize(&parser))
        return ts_err_set(err, TS_ENOMEM, "%s: out of memory", L.fname);
    yaml_parser_set_input_string(&parser, (const unsigned char *)(buf ? buf : ""), len);
    int rc;
    if (!yaml_parser_load(&parser, &doc)) {
        rc = parse_failed(&L, &parser);
        yaml_parser_delete(&parser);
        return rc;
    }
    L.doc = &doc;
    rc = load_document(&L);
    yaml_document_delete(&doc);
    if (rc == 0) {
        /* a second document would be silently ignored otherwise */
        if (!yaml_parser_load(&parser, &doc)) {
            rc = parse_failed(&L, &parser);
        } else {
            yaml_node_t *extra = yaml_document_get_root_node(&doc);
            if (extra)
                rc = ts_err_set(err, TS_EINVAL, "%s:%d: only one YAML document allowed",
                                L.fname, line_of(extra));
            yaml_document_delete(&doc);
        }
    }
    yaml_parser_delete(&parser);
    free(L.line);
    if (rc < 0) {
        ts_tenants_free(L.ts);
        return rc;
    }
    *out = L.ts;
    return 0;
}
