/*
 * load_tenants.c - the tenants YAML (docs/tenants-format.md) into a ts_tenants.
 *
 * Built like the cluster loader (load_yaml.c): libyaml's document API gives the
 * whole tree with a start mark on every node, and the loader walks it with a
 * closed schema, so every error reads "file:line: key.path: why" and a typo is
 * an error, not a silent default. The document loading and the small helpers
 * both loaders use live in yaml_doc.c.
 *
 * Organisations are the keys of `tenants`; a tenant's `teams` nests the next
 * level. Tenants are added parent first (what ts_tenant_add requires), quotas
 * start from the tree's defaults (guarantee 0, limits unlimited) and only the
 * dimensions the file names change. The tree's own ts_tenants_validate has the
 * last word on children fitting their parent. The tree is handed over only
 * when everything succeeded; on any error it is freed and *out stays NULL.
 */
#include "tessera/tenant_load.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/yaml_doc.h"
#include "tessera/image_ref.h"
#include "tessera/grow.h"

#define TYAML_PATH_MAX 320 /* organisation + three team levels of 63-character names */
#define TYAML_UNLIMITED "unlimited"

typedef struct tloader {
    ts_yaml_doc y; /* file name, document, error: see yaml_doc.h */
    ts_tenants *ts;
    int *line; /* per tenant index: the line of its name */
    int line_cap;
} tloader;

/* ---- small helpers (the shared ones are in yaml_doc.c) ------------------------- */

/* The tree's messages read "tenants.<name>.field: reason"; keep the reason and
 * put the file's line and the file's own key path in front. */
static int fail_tree(const tloader *L, const yaml_node_t *at, const char *path, int code)
{
    if (!L->y.err)
        return code;
    char reason[TS_ERR_MSG_MAX];
    const char *r = strstr(L->y.err->msg, ": ");
    snprintf(reason, sizeof reason, "%s", r ? r + 2 : L->y.err->msg);
    return ts_yaml_fail(&L->y, at, code, "%s: %s", path, reason);
}

/* Plain decimal numbers only: strtod would also take "inf", "nan" and hex. */
static int get_number(const tloader *L, const yaml_node_t *n, const char *path, double *out)
{
    const char *s = ts_yaml_scalar(n);
    bool ok = s && *s;
    for (const char *p = s; ok && *p; p++)
        ok = (*p >= '0' && *p <= '9') || *p == '.' || *p == 'e' || *p == 'E' || *p == '-' ||
             *p == '+';
    char *end = NULL;
    double v = ok ? strtod(s, &end) : 0.0;
    if (!ok || *end || s[0] == '+')
        return ts_yaml_fail_got(&L->y, n, path, "a positive number");
    *out = v;
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
    const char *s = ts_yaml_scalar(n);
    if (limit && s && strcmp(s, TYAML_UNLIMITED) == 0) {
        *out = TS_QUOTA_UNLIMITED;
        return 0;
    }
    char want[96];
    snprintf(want, sizeof want, "an integer 0..%lld%s", (long long)(TS_QUOTA_MAX / unit),
             limit ? " or " TYAML_UNLIMITED : "");
    int64_t v = 0;
    int rc = ts_yaml_get_int(&L->y, n, path, 0, TS_QUOTA_MAX / unit, want, &v);
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
        return ts_yaml_fail_got(&L->y, map, path, "a mapping of GPU model: count");
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
         p++) {
        yaml_node_t *k = ts_yaml_node(&L->y, p->key);
        const char *ks = ts_yaml_scalar(k);
        int model = ks ? ts_gpu_model_lookup(ks) : -1;
        if (model < 0 || model >= TS_MAX_GPU_MODELS) {
            char known[256] = "", got[TS_YAML_GOT_MAX];
            for (int i = 0; i < ts_gpu_model_count() && i < TS_MAX_GPU_MODELS; i++) {
                size_t used = strlen(known);
                snprintf(known + used, sizeof known - used, "%s%s", i ? ", " : "",
                         ts_gpu_model_get(i)->name);
            }
            model_yaml_describe(k, got, sizeof got);
            return ts_yaml_fail(&L->y, k, TS_EINVAL, "%s: unknown GPU model %s (known: %s)", path,
                                got, known);
        }
        ts_yaml_pathf(sub, sizeof sub, "%s.%s", path, ks);
        if (line_seen[model])
            return ts_yaml_fail(&L->y, k, TS_EINVAL, "%s: key given twice (first at line %d)", sub,
                        line_seen[model]);
        line_seen[model] = model_yaml_line(k);
        int rc = get_amount(L, ts_yaml_node(&L->y, p->value), sub, limit, TS_MILLI_PER_GPU,
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
    int rc = ts_yaml_map_fields(&L->y, map, path, keys, Q_N, v);
    if (rc < 0)
        return rc;
    if (v[Q_CPU]) {
        ts_yaml_pathf(sub, sizeof sub, "%s.cpu_milli", path);
        if ((rc = get_amount(L, v[Q_CPU], sub, limit, 1, &vals[TS_RES_CPU])) < 0)
            return rc;
    }
    if (v[Q_MEM]) {
        ts_yaml_pathf(sub, sizeof sub, "%s.memory_mib", path);
        if ((rc = get_amount(L, v[Q_MEM], sub, limit, 1, &vals[TS_RES_MEM])) < 0)
            return rc;
    }
    if (v[Q_GPU]) {
        ts_yaml_pathf(sub, sizeof sub, "%s.gpu", path);
        if ((rc = load_gpu_quota(L, v[Q_GPU], sub, limit, vals)) < 0)
            return rc;
    }
    return 0;
}

/* ---- identity ------------------------------------------------------------------ */

/* A YAML true or false at node n (path names it) into *out. */
static int get_bool(const tloader *L, const yaml_node_t *n, const char *path, bool *out)
{
    const char *s = ts_yaml_scalar(n);
    if (!s || (strcmp(s, "true") != 0 && strcmp(s, "false") != 0))
        return ts_yaml_fail_got(&L->y, n, path, "true or false");
    *out = strcmp(s, "true") == 0;
    return 0;
}

/* A list of scalars, each accepted by ok (bad: what it must be), joined with
 * commas into out (cap bytes); list_what says what the list must be. */
static int get_name_list(const tloader *L, const yaml_node_t *seq, const char *path,
                         bool (*ok)(const char *), const char *list_what, const char *bad,
                         char *out, size_t cap)
{
    char sub[TYAML_PATH_MAX + 32];
    if (seq->type != YAML_SEQUENCE_NODE)
        return ts_yaml_fail_got(&L->y, seq, path, list_what);
    size_t used = 0;
    int i = 0;
    for (yaml_node_item_t *it = seq->data.sequence.items.start;
         it < seq->data.sequence.items.top; it++, i++) {
        yaml_node_t *n = ts_yaml_node(&L->y, *it);
        const char *s = ts_yaml_scalar(n);
        ts_yaml_pathf(sub, sizeof sub, "%s[%d]", path, i);
        if (!s || !ok(s))
            return ts_yaml_fail_got(&L->y, n, sub, bad);
        int k = snprintf(out + used, cap - used, "%s%s", used ? "," : "", s);
        if (k < 0 || (size_t)k >= cap - used)
            return ts_yaml_fail(&L->y, n, TS_EINVAL, "%s: the list is longer than %d "
                                "characters in all", path, (int)cap - 1);
        used += (size_t)k;
    }
    return 0;
}

static bool unix_name_ok(const char *s) { return ts_unix_name_ok(s); }

static int load_unix_users(const tloader *L, const yaml_node_t *seq, const char *path,
                           ts_tenant_identity *id)
{
    return get_name_list(L, seq, path, unix_name_ok, "a list of Unix user names",
                         "a Unix user name ([a-z_][a-z0-9_-]*, at most 32 characters)",
                         id->unix_users, sizeof id->unix_users);
}

/* allow_root (true/false), unix_users [names], uid_range [lo, hi]. */
static int load_identity(const tloader *L, const yaml_node_t *root, const yaml_node_t *users,
                         const yaml_node_t *uids, const char *tpath, ts_tenant_identity *id)
{
    char sub[TYAML_PATH_MAX + 32];
    int rc;
    if (root) {
        ts_yaml_pathf(sub, sizeof sub, "%s.allow_root", tpath);
        if ((rc = get_bool(L, root, sub, &id->allow_root)) < 0)
            return rc;
        id->allow_root_set = true;
    }
    ts_yaml_pathf(sub, sizeof sub, "%s.unix_users", tpath);
    if (users && (rc = load_unix_users(L, users, sub, id)) < 0)
        return rc;
    if (!uids)
        return 0;
    ts_yaml_pathf(sub, sizeof sub, "%s.uid_range", tpath);
    yaml_node_item_t *b = uids->type == YAML_SEQUENCE_NODE ? uids->data.sequence.items.start
                                                          : NULL;
    if (!b || uids->data.sequence.items.top - b != 2)
        return ts_yaml_fail_got(&L->y, uids, sub, "[lowest, highest] uid");
    int64_t lo = 0, hi = 0;
    if ((rc = ts_yaml_get_int(&L->y, ts_yaml_node(&L->y, b[0]), sub, 0, 4294967294LL,
                              "a uid 0..4294967294", &lo)) < 0 ||
        (rc = ts_yaml_get_int(&L->y, ts_yaml_node(&L->y, b[1]), sub, lo, 4294967294LL,
                              "a uid no lower than the first", &hi)) < 0)
        return rc;
    id->has_uid_range = true;
    id->uid_min = lo;
    id->uid_max = hi;
    return 0;
}

/* A registry host[:port] as an image reference names it. */
static bool registry_host_ok(const char *s)
{
    char probe[300];
    ts_image_ref ref;
    if (strlen(s) > 255)
        return false;
    snprintf(probe, sizeof probe, "%s/x", s);
    return ts_image_ref_parse(probe, "", &ref, NULL) == 0 && strcmp(ref.host, s) == 0;
}

/* registries: [host[:port], ...] (docs/images.md). */
static int load_registries(const tloader *L, const yaml_node_t *seq, const char *path,
                           ts_tenant *t)
{
    int rc = get_name_list(L, seq, path, registry_host_ok,
                           "a list of registry hosts (host[:port])",
                           "a registry host[:port] (a name with a dot, a port, or localhost)",
                           t->registries, sizeof t->registries);
    if (rc == 0)
        t->registries_set = true;
    return rc;
}

/* mounts: [PATH | {path: PATH, write: BOOL}] (docs/images.md). */
static int load_mounts(const tloader *L, const yaml_node_t *seq, const char *path, ts_tenant *t)
{
    char sub[TYAML_PATH_MAX + 32];
    if (seq->type != YAML_SEQUENCE_NODE)
        return ts_yaml_fail_got(&L->y, seq, path, "a list of host folders");
    int i = 0;
    for (yaml_node_item_t *it = seq->data.sequence.items.start;
         it < seq->data.sequence.items.top; it++, i++) {
        yaml_node_t *n = ts_yaml_node(&L->y, *it);
        ts_yaml_pathf(sub, sizeof sub, "%s[%d]", path, i);
        if (i == TS_TENANT_MOUNTS_MAX)
            return ts_yaml_fail(&L->y, n, TS_EINVAL, "%s: more than %d folders", path,
                                TS_TENANT_MOUNTS_MAX);
        const yaml_node_t *pn = n, *wn = NULL;
        if (n->type == YAML_MAPPING_NODE) {
            static const char *const keys[] = {"path", "write"};
            yaml_node_t *v[2];
            int rc = ts_yaml_map_fields(&L->y, n, sub, keys, 2, v);
            if (rc < 0)
                return rc;
            if (!v[0])
                return ts_yaml_fail(&L->y, n, TS_EINVAL, "%s.path: required", sub);
            pn = v[0];
            wn = v[1];
            ts_yaml_pathf(sub, sizeof sub, "%s[%d].path", path, i);
        }
        const char *p = ts_yaml_scalar(pn);
        if (!p || !ts_mount_path_ok(p))
            return ts_yaml_fail_got(&L->y, pn, sub, "an absolute path without . or .. "
                                    "components, under 256 bytes");
        ts_tenant_mount *m = &t->mounts[i];
        snprintf(m->path, sizeof m->path, "%s", p);
        if (wn) {
            ts_yaml_pathf(sub, sizeof sub, "%s[%d].write", path, i);
            int rc = get_bool(L, wn, sub, &m->write);
            if (rc < 0)
                return rc;
        }
    }
    t->nmounts = i;
    t->mounts_set = true;
    return 0;
}

/* ---- the tree ------------------------------------------------------------------ */

static int record_line(tloader *L, int idx, int line)
{
    if (ts_grow((void **)&L->line, &L->line_cap, idx + 1, 32, sizeof *L->line) != 0)
        return ts_err_set(L->y.err, TS_ENOMEM, "%s: out of memory", L->y.fname);
    L->line[idx] = line;
    return 0;
}

static int load_tenants_map(tloader *L, const yaml_node_t *map, const char *path,
                            const char *parent);

/* privacy: {admins_see_jobs: BOOL} (docs/tenants-format.md). */
static int load_privacy(tloader *L, const yaml_node_t *map, const char *tpath, int t)
{
    static const char *const keys[] = {"admins_see_jobs"};
    yaml_node_t *v[1];
    char sub[TYAML_PATH_MAX + 32];
    ts_yaml_pathf(sub, sizeof sub, "%s.privacy", tpath);
    int rc = ts_yaml_map_fields(&L->y, map, sub, keys, 1, v);
    if (rc < 0 || !v[0])
        return rc;
    ts_yaml_pathf(sub, sizeof sub, "%s.privacy.admins_see_jobs", tpath);
    bool see = false;
    if ((rc = get_bool(L, v[0], sub, &see)) < 0)
        return rc;
    L->ts->t[t].admins_see_jobs = see ? TS_PRIVACY_YES : TS_PRIVACY_NO;
    return 0;
}

/* One tenant: its name at key kn, its settings in map, under parent (NULL for
 * an organisation); path is the key path of the mapping holding it. */
static int load_tenant(tloader *L, const yaml_node_t *kn, const yaml_node_t *map,
                       const char *path, const char *parent)
{
    enum { K_WEIGHT, K_GUAR, K_BORROW, K_LEND, K_TEAMS, K_ORDER, K_ROOT, K_USERS, K_UIDS,
           K_PRIVACY, K_HOSTNET, K_REGISTRIES, K_MOUNTS, K_N };
    static const char *const keys[K_N] = {"weight",     "guaranteed", "borrow_limit",
                                          "lend_limit", "teams",      "order",
                                          "allow_root", "unix_users", "uid_range",
                                          "privacy",    "allow_host_network",
                                          "registries", "mounts"};
    char tpath[TYAML_PATH_MAX], sub[TYAML_PATH_MAX + 16];
    const char *name = ts_yaml_scalar(kn);
    if (!name || !ts_yaml_name_ok(name, TS_NAME_MAX)) {
        char want[96];
        snprintf(want, sizeof want, "a tenant name of 1..%d characters from [A-Za-z0-9._-]",
                 TS_NAME_MAX - 1);
        return ts_yaml_fail_got(&L->y, kn, path, want);
    }
    ts_yaml_pathf(tpath, sizeof tpath, "%s.%s", path, name);
    int dup = ts_tenant_find(L->ts, name);
    if (dup >= 0)
        return ts_yaml_fail(&L->y, kn, TS_EINVAL,
                            "%s: duplicate tenant name \"%s\" (first at line %d)", tpath, name,
                            L->line[dup]);
    int t = ts_tenant_add(L->ts, name, parent, L->y.err);
    if (t < 0)
        return fail_tree(L, kn, tpath, t == TS_ENOMEM ? TS_ENOMEM : TS_EINVAL);
    int rc = record_line(L, t, model_yaml_line(kn));
    if (rc < 0)
        return rc;
    if (is_empty(map))
        return 0;

    yaml_node_t *v[K_N];
    if ((rc = ts_yaml_map_fields(&L->y, map, tpath, keys, K_N, v)) < 0)
        return rc;
    if (v[K_WEIGHT]) {
        ts_yaml_pathf(sub, sizeof sub, "%s.weight", tpath);
        double w = 0.0;
        if ((rc = get_number(L, v[K_WEIGHT], sub, &w)) < 0)
            return rc;
        if ((rc = ts_tenant_set_weight(L->ts, t, w, L->y.err)) < 0)
            return fail_tree(L, v[K_WEIGHT], sub, TS_EINVAL);
    }
    if (v[K_ORDER]) {
        /* the names of enum ts_order (cycle.h); the model does not link the
         * scheduler, so they are spelt here */
        ts_yaml_pathf(sub, sizeof sub, "%s.order", tpath);
        const char *o = ts_yaml_scalar(v[K_ORDER]);
        int order = !o ? -1 : !strcmp(o, "las") ? 1 : !strcmp(o, "fifo") ? 2 : -1;
        if (order < 0)
            return ts_yaml_fail_got(&L->y, v[K_ORDER], sub, "las or fifo");
        if ((rc = ts_tenant_set_order(L->ts, t, order, L->y.err)) < 0)
            return fail_tree(L, v[K_ORDER], sub, TS_EINVAL);
    }
    if ((rc = load_identity(L, v[K_ROOT], v[K_USERS], v[K_UIDS], tpath,
                            &L->ts->t[t].identity)) < 0)
        return rc;
    if (v[K_PRIVACY] && (rc = load_privacy(L, v[K_PRIVACY], tpath, t)) < 0)
        return rc;
    if (v[K_HOSTNET]) {
        ts_yaml_pathf(sub, sizeof sub, "%s.allow_host_network", tpath);
        if ((rc = get_bool(L, v[K_HOSTNET], sub, &L->ts->t[t].identity.allow_host_network)) < 0)
            return rc;
        L->ts->t[t].identity.allow_host_network_set = true;
    }
    ts_yaml_pathf(sub, sizeof sub, "%s.registries", tpath);
    if (v[K_REGISTRIES] && (rc = load_registries(L, v[K_REGISTRIES], sub, &L->ts->t[t])) < 0)
        return rc;
    ts_yaml_pathf(sub, sizeof sub, "%s.mounts", tpath);
    if (v[K_MOUNTS] && (rc = load_mounts(L, v[K_MOUNTS], sub, &L->ts->t[t])) < 0)
        return rc;
    int64_t guar[TS_RES_DIMS], borrow[TS_RES_DIMS], lend[TS_RES_DIMS];
    memcpy(guar, L->ts->t[t].guaranteed, sizeof guar);
    memcpy(borrow, L->ts->t[t].borrow_limit, sizeof borrow);
    memcpy(lend, L->ts->t[t].lend_limit, sizeof lend);
    ts_yaml_pathf(sub, sizeof sub, "%s.guaranteed", tpath);
    if (v[K_GUAR] && (rc = load_quota(L, v[K_GUAR], sub, false, guar)) < 0)
        return rc;
    ts_yaml_pathf(sub, sizeof sub, "%s.borrow_limit", tpath);
    if (v[K_BORROW] && (rc = load_quota(L, v[K_BORROW], sub, true, borrow)) < 0)
        return rc;
    ts_yaml_pathf(sub, sizeof sub, "%s.lend_limit", tpath);
    if (v[K_LEND] && (rc = load_quota(L, v[K_LEND], sub, true, lend)) < 0)
        return rc;
    for (int d = 0; d < TS_RES_DIMS; d++)
        if ((rc = ts_tenant_set_quota(L->ts, t, d, guar[d], borrow[d], lend[d], L->y.err)) < 0)
            return fail_tree(L, map, tpath, TS_EINVAL);
    if (v[K_TEAMS]) {
        ts_yaml_pathf(sub, sizeof sub, "%s.teams", tpath);
        return load_tenants_map(L, v[K_TEAMS], sub, name);
    }
    return 0;
}

static int load_tenants_map(tloader *L, const yaml_node_t *map, const char *path,
                            const char *parent)
{
    if (map->type != YAML_MAPPING_NODE)
        return ts_yaml_fail_got(&L->y, map, path, "a mapping of tenant name: settings");
    if (map->data.mapping.pairs.start == map->data.mapping.pairs.top)
        return ts_yaml_fail(&L->y, map, TS_EINVAL, "%s: must name at least one tenant", path);
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
         p++) {
        int rc = load_tenant(L, ts_yaml_node(&L->y, p->key), ts_yaml_node(&L->y, p->value), path,
                             parent);
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

static int load_document(void *ctx)
{
    tloader *L = ctx;
    yaml_node_t *root = yaml_document_get_root_node(L->y.doc);
    if (!root || is_empty(root))
        return ts_err_set(L->y.err, TS_EINVAL, "%s:1: empty file: expected tenants", L->y.fname);
    static const char *const keys[] = {"tenants"};
    yaml_node_t *v[1];
    int rc = ts_yaml_map_fields(&L->y, root, "", keys, 1, v);
    if (rc < 0)
        return rc;
    if (!v[0])
        return ts_yaml_fail(&L->y, root, TS_EINVAL, "tenants: required");
    L->ts = ts_tenants_new();
    if (!L->ts)
        return ts_err_set(L->y.err, TS_ENOMEM, "%s: out of memory", L->y.fname);
    if ((rc = load_tenants_map(L, v[0], "tenants", NULL)) < 0)
        return rc;
    /* parents come first: a team that does not say takes its parent's */
    for (int i = 0; i < L->ts->n; i++) {
        ts_tenant *t = &L->ts->t[i];
        if (!t->identity.allow_root_set && t->parent >= 0)
            t->identity.allow_root = L->ts->t[t->parent].identity.allow_root;
        if (!t->identity.allow_host_network_set && t->parent >= 0)
            t->identity.allow_host_network = L->ts->t[t->parent].identity.allow_host_network;
        const ts_tenant *up = t->parent >= 0 ? &L->ts->t[t->parent] : NULL;
        if (!t->mounts_set && up && up->mounts_set) {
            memcpy(t->mounts, up->mounts, sizeof t->mounts);
            t->nmounts = up->nmounts;
            t->mounts_set = true;
        }
        if (!t->registries_set && t->parent >= 0 && L->ts->t[t->parent].registries_set) {
            memcpy(t->registries, L->ts->t[t->parent].registries, sizeof t->registries);
            t->registries_set = true;
        }
    }
    if ((rc = ts_tenants_validate(L->ts, L->y.err)) < 0) {
        int at = overfull_parent(L->ts);
        int line = at >= 0 ? L->line[at] : model_yaml_line(v[0]);
        if (L->y.err)
            ts_err_prefix(L->y.err, "%s:%d: ", L->y.fname, line);
        return rc;
    }
    return 0;
}

int ts_load_tenants_yaml(const char *buf, size_t len, const char *fname, ts_tenants **out,
                         ts_err *err)
{
    tloader L;
    memset(&L, 0, sizeof L);
    L.y.fname = fname ? fname : "<tenants yaml>";
    L.y.err = err;
    if (!out)
        return ts_err_set(err, TS_EINVAL, "%s: no output tenants given", L.y.fname);
    *out = NULL;

    int rc = ts_yaml_load_one(&L.y, buf, len, load_document, &L);
    free(L.line);
    if (rc < 0) {
        ts_tenants_free(L.ts);
        return rc;
    }
    *out = L.ts;
    return 0;
}
