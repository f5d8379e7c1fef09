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
 * dimensions the file names change. The tree's own checks
 * (ts_tenants_validate_all) have the last word on children fitting their
 * parent.
 *
 * The walk goes on past an invalid value, so that one load reports every
 * error of the file (the first TS_ERRS_MAX, in the order of their lines):
 * ts_yaml_fail adds each to the list, a tenant whose name is bad is skipped
 * with its teams, and a tenant whose quotas had an error is not held to its
 * children's guarantees (its own are not known). Only running out of memory
 * stops it. The tree is handed over only when there was no error; otherwise
 * it is freed and *out stays NULL.
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

/* What the loader knows of each tenant it added, by the tree's index. */
typedef struct tinfo {
    int line;        /* of its name */
    bool quota_bad;  /* an error in its quotas: they were not set */
} tinfo;

typedef struct tloader {
    ts_yaml_doc y; /* file name, document, error, every error: see yaml_doc.h */
    ts_err last;   /* y.err: the last error made (a tree call's, for fail_tree) */
    ts_tenants *ts;
    tinfo *info;
    int info_cap;
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
    int bad = 0;
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
            bad = ts_yaml_fail(&L->y, k, TS_EINVAL, "%s: unknown GPU model %s (known: %s)", path,
                               got, known);
            continue;
        }
        ts_yaml_pathf(sub, sizeof sub, "%s.%s", path, ks);
        if (line_seen[model]) {
            bad = ts_yaml_fail(&L->y, k, TS_EINVAL, "%s: key given twice (first at line %d)",
                               sub, line_seen[model]);
            continue;
        }
        line_seen[model] = model_yaml_line(k);
        int rc = get_amount(L, ts_yaml_node(&L->y, p->value), sub, limit, TS_MILLI_PER_GPU,
                            &vals[ts_res_gpu(model)]);
        bad = rc < 0 ? rc : bad;
    }
    return bad;
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
    int rc, bad = ts_yaml_map_fields(&L->y, map, path, keys, Q_N, v);
    if (v[Q_CPU]) {
        ts_yaml_pathf(sub, sizeof sub, "%s.cpu_milli", path);
        if ((rc = get_amount(L, v[Q_CPU], sub, limit, 1, &vals[TS_RES_CPU])) < 0)
            bad = rc;
    }
    if (v[Q_MEM]) {
        ts_yaml_pathf(sub, sizeof sub, "%s.memory_mib", path);
        if ((rc = get_amount(L, v[Q_MEM], sub, limit, 1, &vals[TS_RES_MEM])) < 0)
            bad = rc;
    }
    if (v[Q_GPU]) {
        ts_yaml_pathf(sub, sizeof sub, "%s.gpu", path);
        if ((rc = load_gpu_quota(L, v[Q_GPU], sub, limit, vals)) < 0)
            bad = rc;
    }
    return bad;
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
    int i = 0, rc = 0;
    for (yaml_node_item_t *it = seq->data.sequence.items.start;
         it < seq->data.sequence.items.top; it++, i++) {
        yaml_node_t *n = ts_yaml_node(&L->y, *it);
        const char *s = ts_yaml_scalar(n);
        ts_yaml_pathf(sub, sizeof sub, "%s[%d]", path, i);
        if (!s || !ok(s)) {
            rc = ts_yaml_fail_got(&L->y, n, sub, bad);
            continue;
        }
        int k = snprintf(out + used, cap - used, "%s%s", used ? "," : "", s);
        if (k < 0 || (size_t)k >= cap - used)
            return ts_yaml_fail(&L->y, n, TS_EINVAL, "%s: the list is longer than %d "
                                "characters in all", path, (int)cap - 1);
        used += (size_t)k;
    }
    return rc;
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
    int rc, bad = 0;
    if (root) {
        ts_yaml_pathf(sub, sizeof sub, "%s.allow_root", tpath);
        if ((rc = get_bool(L, root, sub, &id->allow_root)) < 0)
            bad = rc;
        id->allow_root_set = true;
    }
    ts_yaml_pathf(sub, sizeof sub, "%s.unix_users", tpath);
    if (users && (rc = load_unix_users(L, users, sub, id)) < 0)
        bad = rc;
    if (!uids)
        return bad;
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
    return bad;
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
    int i = 0, bad = 0;
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
                bad = rc;
            if (!v[0]) {
                bad = ts_yaml_fail(&L->y, n, TS_EINVAL, "%s.path: required", sub);
                continue;
            }
            pn = v[0];
            wn = v[1];
            ts_yaml_pathf(sub, sizeof sub, "%s[%d].path", path, i);
        }
        const char *p = ts_yaml_scalar(pn);
        if (!p || !ts_mount_path_ok(p)) {
            bad = ts_yaml_fail_got(&L->y, pn, sub, "an absolute path without . or .. "
                                   "components, under 256 bytes");
            continue;
        }
        ts_tenant_mount *m = &t->mounts[i];
        snprintf(m->path, sizeof m->path, "%s", p);
        if (wn) {
            ts_yaml_pathf(sub, sizeof sub, "%s[%d].write", path, i);
            int rc = get_bool(L, wn, sub, &m->write);
            if (rc < 0)
                bad = rc;
        }
    }
    t->nmounts = i;
    t->mounts_set = true;
    return bad;
}

/* ---- the tree ------------------------------------------------------------------ */

static int record_tenant(tloader *L, int idx, int line)
{
    if (ts_grow((void **)&L->info, &L->info_cap, idx + 1, 32, sizeof *L->info) != 0)
        return ts_err_set(L->y.err, TS_ENOMEM, "%s: out of memory", L->y.fname);
    L->info[idx] = (tinfo){.line = line};
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
    int rc, bad = ts_yaml_map_fields(&L->y, map, sub, keys, 1, v);
    if (!v[0])
        return bad;
    ts_yaml_pathf(sub, sizeof sub, "%s.privacy.admins_see_jobs", tpath);
    bool see = false;
    if ((rc = get_bool(L, v[0], sub, &see)) < 0)
        return rc;
    L->ts->t[t].admins_see_jobs = see ? TS_PRIVACY_YES : TS_PRIVACY_NO;
    return bad;
}

/* A tenant's keys, in the order its messages list them. */
enum { K_WEIGHT, K_GUAR, K_BORROW, K_LEND, K_TEAMS, K_ORDER, K_ROOT, K_USERS, K_UIDS,
       K_PRIVACY, K_HOSTNET, K_REGISTRIES, K_MOUNTS, K_N };
static const char *const TENANT_KEYS[K_N] = {"weight",     "guaranteed", "borrow_limit",
                                             "lend_limit", "teams",      "order",
                                             "allow_root", "unix_users", "uid_range",
                                             "privacy",    "allow_host_network",
                                             "registries", "mounts"};

/* guaranteed, borrow_limit, lend_limit of tenant t: set only when all three
 * read without an error. */
static int load_quotas(tloader *L, int t, const char *tpath, yaml_node_t *const *v)
{
    char sub[TYAML_PATH_MAX + 16];
    int64_t guar[TS_RES_DIMS], borrow[TS_RES_DIMS], lend[TS_RES_DIMS];
    memcpy(guar, L->ts->t[t].guaranteed, sizeof guar);
    memcpy(borrow, L->ts->t[t].borrow_limit, sizeof borrow);
    memcpy(lend, L->ts->t[t].lend_limit, sizeof lend);
    int rc, bad = 0;
    ts_yaml_pathf(sub, sizeof sub, "%s.guaranteed", tpath);
    if (v[K_GUAR] && (rc = load_quota(L, v[K_GUAR], sub, false, guar)) < 0)
        bad = rc;
    ts_yaml_pathf(sub, sizeof sub, "%s.borrow_limit", tpath);
    if (v[K_BORROW] && (rc = load_quota(L, v[K_BORROW], sub, true, borrow)) < 0)
        bad = rc;
    ts_yaml_pathf(sub, sizeof sub, "%s.lend_limit", tpath);
    if (v[K_LEND] && (rc = load_quota(L, v[K_LEND], sub, true, lend)) < 0)
        bad = rc;
    for (int d = 0; bad == 0 && d < TS_RES_DIMS; d++)
        if (ts_tenant_set_quota(L->ts, t, d, guar[d], borrow[d], lend[d], L->y.err) < 0)
            bad = fail_tree(L, v[K_GUAR] ? v[K_GUAR] : v[K_BORROW] ? v[K_BORROW] : v[K_LEND],
                            tpath, TS_EINVAL);
    return bad;
}

/* Every setting of tenant t but its teams (v: its keys' values); each
 * error is added to the file's and the next setting read. */
static int load_settings(tloader *L, int t, const char *tpath, yaml_node_t *const *v)
{
    char sub[TYAML_PATH_MAX + 16];
    int rc, bad = 0;
    if (v[K_WEIGHT]) {
        ts_yaml_pathf(sub, sizeof sub, "%s.weight", tpath);
        double w = 0.0;
        if ((rc = get_number(L, v[K_WEIGHT], sub, &w)) < 0)
            bad = rc;
        else if (ts_tenant_set_weight(L->ts, t, w, L->y.err) < 0)
            bad = fail_tree(L, v[K_WEIGHT], sub, TS_EINVAL);
    }
    if (v[K_ORDER]) {
        /* the names of enum ts_order (cycle.h); the model does not link the
         * scheduler, so they are spelt here */
        ts_yaml_pathf(sub, sizeof sub, "%s.order", tpath);
        const char *o = ts_yaml_scalar(v[K_ORDER]);
        int order = !o ? -1 : !strcmp(o, "las") ? 1 : !strcmp(o, "fifo") ? 2 : -1;
        if (order < 0)
            bad = ts_yaml_fail_got(&L->y, v[K_ORDER], sub, "las or fifo");
        else if (ts_tenant_set_order(L->ts, t, order, L->y.err) < 0)
            bad = fail_tree(L, v[K_ORDER], sub, TS_EINVAL);
    }
    if ((rc = load_identity(L, v[K_ROOT], v[K_USERS], v[K_UIDS], tpath,
                            &L->ts->t[t].identity)) < 0)
        bad = rc;
    if (v[K_PRIVACY] && (rc = load_privacy(L, v[K_PRIVACY], tpath, t)) < 0)
        bad = rc;
    if (v[K_HOSTNET]) {
        ts_yaml_pathf(sub, sizeof sub, "%s.allow_host_network", tpath);
        if ((rc = get_bool(L, v[K_HOSTNET], sub, &L->ts->t[t].identity.allow_host_network)) < 0)
            bad = rc;
        L->ts->t[t].identity.allow_host_network_set = true;
    }
    ts_yaml_pathf(sub, sizeof sub, "%s.registries", tpath);
    if (v[K_REGISTRIES] && (rc = load_registries(L, v[K_REGISTRIES], sub, &L->ts->t[t])) < 0)
        bad = rc;
    ts_yaml_pathf(sub, sizeof sub, "%s.mounts", tpath);
    if (v[K_MOUNTS] && (rc = load_mounts(L, v[K_MOUNTS], sub, &L->ts->t[t])) < 0)
        bad = rc;
    if ((rc = load_quotas(L, t, tpath, v)) < 0) {
        L->info[t].quota_bad = true;
        bad = rc;
    }
    return bad;
}

/* One tenant: its name at key kn, its settings in map, under parent (NULL for
 * an organisation); path is the key path of the mapping holding it. A bad
 * name skips it and its teams. */
static int load_tenant(tloader *L, const yaml_node_t *kn, const yaml_node_t *map,
                       const char *path, const char *parent)
{
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
                            L->info[dup].line);
    int t = ts_tenant_add(L->ts, name, parent, L->y.err);
    if (t < 0)
        return fail_tree(L, kn, tpath, t == TS_ENOMEM ? TS_ENOMEM : TS_EINVAL);
    int rc = record_tenant(L, t, model_yaml_line(kn));
    if (rc < 0 || is_empty(map))
        return rc;
    yaml_node_t *v[K_N];
    int bad = ts_yaml_map_fields(&L->y, map, tpath, TENANT_KEYS, K_N, v);
    if ((rc = load_settings(L, t, tpath, v)) < 0)
        bad = rc;
    if (v[K_TEAMS]) {
        ts_yaml_pathf(sub, sizeof sub, "%s.teams", tpath);
        if ((rc = load_tenants_map(L, v[K_TEAMS], sub, name)) < 0)
            bad = rc;
    }
    return bad;
}

static int load_tenants_map(tloader *L, const yaml_node_t *map, const char *path,
                            const char *parent)
{
    if (map->type != YAML_MAPPING_NODE)
        return ts_yaml_fail_got(&L->y, map, path, "a mapping of tenant name: settings");
    if (map->data.mapping.pairs.start == map->data.mapping.pairs.top)
        return ts_yaml_fail(&L->y, map, TS_EINVAL, "%s: must name at least one tenant", path);
    int bad = 0;
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
         p++) {
        int rc = load_tenant(L, ts_yaml_node(&L->y, p->key), ts_yaml_node(&L->y, p->value), path,
                             parent);
        if (rc < 0 && rc != TS_EINVAL)
            return rc; /* out of memory: nothing more can be read */
        bad = rc < 0 ? rc : bad;
    }
    return bad;
}

/* One error of the tree's own checks (ts_tenants_validate_all), at the
 * line of the tenant it names; none for a tenant whose quotas were not
 * set (an error there was reported already, and its children's
 * guarantees cannot be weighed against what it meant). */
static void tree_error(void *ctx, int tenant, const ts_err *e)
{
    tloader *L = ctx;
    if (tenant >= 0 && tenant < L->ts->n && L->info[tenant].quota_bad)
        return;
    int line = tenant >= 0 && tenant < L->ts->n ? L->info[tenant].line : 1;
    ts_err_set(L->y.err, TS_EINVAL, "%s:%d: %s", L->y.fname, line, e->msg);
    ts_errs_add(L->y.all, line, L->y.err->msg);
}

/* ---- entry point ---------------------------------------------------------------- */

static int load_document(void *ctx)
{
    tloader *L = ctx;
    yaml_node_t *root = yaml_document_get_root_node(L->y.doc);
    if (!root || is_empty(root))
        return ts_yaml_fail(&L->y, NULL, TS_EINVAL, "empty file: expected tenants");
    static const char *const keys[] = {"tenants"};
    yaml_node_t *v[1];
    int bad = ts_yaml_map_fields(&L->y, root, "", keys, 1, v);
    if (!v[0])
        return bad < 0 ? bad : ts_yaml_fail(&L->y, root, TS_EINVAL, "tenants: required");
    L->ts = ts_tenants_new();
    if (!L->ts)
        return ts_err_set(L->y.err, TS_ENOMEM, "%s: out of memory", L->y.fname);
    int rc = load_tenants_map(L, v[0], "tenants", NULL);
    if (rc < 0 && rc != TS_EINVAL)
        return rc;
    bad = rc < 0 ? rc : bad;
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
    int before = L->y.all ? L->y.all->n + L->y.all->more : 0;
    rc = ts_tenants_validate_all(L->ts, tree_error, L, NULL);
    if (rc == TS_ENOMEM)
        return ts_err_set(L->y.err, rc, "%s: out of memory", L->y.fname);
    if (L->y.all ? L->y.all->n + L->y.all->more > before : rc < 0)
        bad = TS_EINVAL;
    return bad;
}

int ts_load_tenants_yaml_all(const char *buf, size_t len, const char *fname, ts_tenants **out,
                             ts_errs *errs)
{
    tloader L;
    memset(&L, 0, sizeof L);
    L.y.fname = fname ? fname : "<tenants yaml>";
    L.y.err = &L.last;
    L.y.all = errs;
    ts_errs_clear(errs);
    if (!out) {
        ts_err_set(&L.last, TS_EINVAL, "%s: no output tenants given", L.y.fname);
        ts_errs_add(errs, 0, L.last.msg);
        return TS_EINVAL;
    }
    *out = NULL;
    int rc = ts_yaml_load_one(&L.y, buf, len, load_document, &L);
    free(L.info);
    /* what ended it without ts_yaml_fail: malformed YAML, out of memory */
    if (rc < 0 && errs && (rc != TS_EINVAL || errs->n + errs->more == 0))
        ts_errs_add(errs, 0, L.last.msg);
    ts_errs_sort(errs);
    if (rc < 0) {
        ts_tenants_free(L.ts);
        return rc;
    }
    *out = L.ts;
    return 0;
}

int ts_load_tenants_yaml(const char *buf, size_t len, const char *fname, ts_tenants **out,
                         ts_err *err)
{
    const char *name = fname ? fname : "<tenants yaml>";
    ts_errs *all = malloc(sizeof *all);
    if (!all) {
        if (out)
            *out = NULL;
        return ts_err_set(err, TS_ENOMEM, "%s: out of memory", name);
    }
    int rc = ts_load_tenants_yaml_all(buf, len, fname, out, all);
    int others = all->n + all->more - 1;
    if (rc < 0 && all->n == 0)
        ts_err_set(err, rc, "%s: error", name);
    else if (rc < 0 && others > 0)
        ts_err_set(err, rc, "%s (and %d more error%s)", all->msg[0], others,
                   others == 1 ? "" : "s");
    else if (rc < 0)
        ts_err_set(err, rc, "%s", all->msg[0]);
    free(all);
    return rc;
}
