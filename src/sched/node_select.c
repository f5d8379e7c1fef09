/*
 * node_select.c - constraint and host-list matching (node_select.h).
 *
 * A constraint is short (under 1 KiB) and a job's mask is computed once when
 * the controller builds the job, so matching walks the text per node: an
 * or of and-groups, each term compared with the node's labels and GPU model.
 * No tree is built and nothing is allocated. Host lists reuse the cluster
 * file's name ranges (model/name_range.h), expanded one name at a time and
 * looked up by name, so "r-[1-4000]" costs 4000 look-ups and no memory.
 */
#include "tessera/node_select.h"

#include <stdio.h>
#include <string.h>

#include "model/name_range.h"

/* One term [s, e) of the text: does the node have the feature? */
static bool term_matches(const ts_node *n, const char *s, size_t len)
{
    const char *eq = memchr(s, '=', len);
    if (eq) {
        size_t kl = (size_t)(eq - s), vl = len - kl - 1;
        for (int i = 0; i < n->nlabels; i++)
            if (strlen(n->labels[i].key) == kl && memcmp(n->labels[i].key, s, kl) == 0 &&
                strlen(n->labels[i].value) == vl && memcmp(n->labels[i].value, eq + 1, vl) == 0)
                return true;
        return false;
    }
    for (int i = 0; i < n->nlabels; i++) {
        const ts_label *l = &n->labels[i];
        if ((strlen(l->key) == len && memcmp(l->key, s, len) == 0) ||
            (strlen(l->value) == len && memcmp(l->value, s, len) == 0))
            return true;
    }
    const ts_gpu_model_info *m = n->model >= 0 ? ts_gpu_model_get(n->model) : NULL;
    return m && strlen(m->name) == len && memcmp(m->name, s, len) == 0;
}

static bool term_char(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           ch == '-' || ch == '_' || ch == '.' || ch == '=' || ch == '/' || ch == ':';
}

int ts_constraint_check(const char *expr, ts_err *err)
{
    size_t len = strlen(expr);
    if (len == 0)
        return ts_err_set(err, TS_EINVAL, "must not be empty");
    if (len > TS_NODE_SELECT_MAX_BYTES)
        return ts_err_set(err, TS_EINVAL, "longer than %d bytes", TS_NODE_SELECT_MAX_BYTES);
    int terms = 0;
    const char *s = expr;
    for (;;) {
        const char *e = s;
        while (*e && term_char(*e))
            e++;
        if (e == s && *s && *s != '&' && *s != '|')
            break;
        if (e == s)
            return ts_err_set(err, TS_EINVAL, "empty feature name at byte %d",
                              (int)(s - expr));
        const char *eq = memchr(s, '=', (size_t)(e - s));
        if (eq && (eq == s || memchr(eq + 1, '=', (size_t)(e - eq - 1))))
            return ts_err_set(err, TS_EINVAL, "term \"%.*s\" must be name or key=value",
                              (int)(e - s), s);
        if (++terms > TS_CONSTRAINT_MAX_TERMS)
            return ts_err_set(err, TS_EINVAL, "more than %d features", TS_CONSTRAINT_MAX_TERMS);
        if (*e == '\0')
            return 0;
        if (*e != '&' && *e != '|')
            break;
        s = e + 1;
    }
    while (*s && term_char(*s))
        s++;
    return ts_err_set(err, TS_EINVAL,
                      "'%c' at byte %d: a feature is letters, digits and -_.:/= only, "
                      "joined by & and | (no parentheses)", *s, (int)(s - expr));
}

/* The text is checked: an or of and-groups. */
static bool constraint_matches(const ts_node *n, const char *expr)
{
    bool group = true;
    const char *s = expr;
    for (;;) {
        const char *e = s;
        while (*e && *e != '&' && *e != '|')
            e++;
        group = group && term_matches(n, s, (size_t)(e - s));
        if (*e == '\0' || *e == '|') {
            if (group)
                return true;
            if (*e == '\0')
                return false;
            group = true;
        }
        s = e + 1;
    }
}

/* Calls fn for each name of the list (a range inside [] keeps its commas);
 * stops at the first non-zero return. */
static int hostlist_walk(const char *list, ts_err *err,
                         int (*fn)(void *ctx, const char *name, ts_err *err), void *ctx)
{
    size_t len = strlen(list);
    if (len == 0)
        return ts_err_set(err, TS_EINVAL, "must not be empty");
    if (len > TS_NODE_SELECT_MAX_BYTES)
        return ts_err_set(err, TS_EINVAL, "longer than %d bytes", TS_NODE_SELECT_MAX_BYTES);
    const char *s = list;
    while (*s) {
        const char *e = s;
        int depth = 0;
        while (*e && (depth > 0 || *e != ',')) {
            depth += *e == '[' ? 1 : *e == ']' ? -1 : 0;
            e++;
        }
        char item[TS_NODE_SELECT_MAX_BYTES + 1];
        memcpy(item, s, (size_t)(e - s));
        item[e - s] = '\0';
        if (item[0] == '\0')
            return ts_err_set(err, TS_EINVAL, "empty name at byte %d", (int)(s - list));
        if (strchr(item, '[')) {
            ts_name_range r;
            ts_err e2;
            if (ts_name_range_parse(item, &r, &e2) != 0)
                return ts_err_set(err, TS_EINVAL, "\"%s\": %s", item, e2.msg);
            for (long k = 0; k < r.count; k++) {
                char name[TS_NAME_MAX];
                if (!ts_name_range_name(&r, k, name, sizeof name))
                    return ts_err_set(err, TS_EINVAL, "\"%s\": names longer than %d bytes",
                                      item, TS_NAME_MAX - 1);
                int rc = fn ? fn(ctx, name, err) : 0;
                if (rc != 0)
                    return rc;
            }
        } else {
            if (strlen(item) >= TS_NAME_MAX || strchr(item, ']'))
                return ts_err_set(err, TS_EINVAL, "\"%s\" is not a node name", item);
            int rc = fn ? fn(ctx, item, err) : 0;
            if (rc != 0)
                return rc;
        }
        s = *e ? e + 1 : e;
        if (*e && !*s)
            return ts_err_set(err, TS_EINVAL, "ends with a comma");
    }
    return 0;
}

int ts_hostlist_check(const char *list, ts_err *err)
{
    return hostlist_walk(list, err, NULL, NULL);
}

typedef struct list_ctx {
    const ts_cluster *c;
    uint64_t *mask;
    const char *field;
    bool set;
} list_ctx;

static int mark_node(void *ctx, const char *name, ts_err *err)
{
    list_ctx *x = ctx;
    int i = ts_cluster_find_node(x->c, name);
    if (i < 0)
        return ts_err_set(err, TS_EINVAL, "no node \"%s\" in the cluster", name);
    if (x->set)
        x->mask[i >> 6] |= UINT64_C(1) << (i & 63);
    else
        x->mask[i >> 6] &= ~(UINT64_C(1) << (i & 63));
    return 0;
}

static int mask_from_list(const ts_cluster *c, const char *field, const char *list,
                          uint64_t *mask, bool set, ts_err *err)
{
    list_ctx x = {.c = c, .mask = mask, .field = field, .set = set};
    ts_err e;
    if (hostlist_walk(list, &e, mark_node, &x) != 0)
        return ts_err_set(err, TS_EINVAL, "%s: %s", field, e.msg);
    return 0;
}

static int count_bits(const uint64_t *mask, size_t words)
{
    int n = 0;
    for (size_t w = 0; w < words; w++)
        n += __builtin_popcountll(mask[w]);
    return n;
}

int ts_node_select(const ts_cluster *c, const char *constraint, const char *nodelist,
                   const char *exclude, uint64_t *mask, ts_err *err)
{
    size_t words = ts_node_mask_words(c->nnodes);
    ts_err e;
    if (nodelist && nodelist[0]) {
        memset(mask, 0, words * sizeof *mask);
        if (mask_from_list(c, "nodelist", nodelist, mask, true, err) != 0)
            return TS_EINVAL;
    } else {
        memset(mask, 0xff, words * sizeof *mask);
        if (c->nnodes & 63)
            mask[words - 1] = (UINT64_C(1) << (c->nnodes & 63)) - 1;
    }
    if (exclude && exclude[0] && mask_from_list(c, "exclude", exclude, mask, false, err) != 0)
        return TS_EINVAL;
    if (constraint && constraint[0]) {
        if (ts_constraint_check(constraint, &e) != 0)
            return ts_err_set(err, TS_EINVAL, "constraint: %s", e.msg);
        bool any = false;
        for (int i = 0; i < c->nnodes; i++) {
            if (!ts_node_mask_has(mask, i))
                continue;
            if (constraint_matches(&c->nodes[i], constraint))
                any = true;
            else
                mask[i >> 6] &= ~(UINT64_C(1) << (i & 63));
        }
        if (!any)
            return ts_err_set(err, TS_EINVAL, "constraint: no node%s has the features \"%s\"",
                              nodelist && nodelist[0] ? " of the nodelist" : "", constraint);
    }
    if (count_bits(mask, words) == 0)
        return ts_err_set(err, TS_EINVAL, "%s: leaves no node of the cluster",
                          "exclude");
    return 0;
}
