/*
 * tenant.c - the tenant tree: organisations and their teams, each with a
 * guaranteed quota, a borrowing limit and a lending limit per resource
 * dimension, and a fair-share weight.
 *
 * The tree is a flat array in insertion order; a child is always added after
 * its parent, so a parent's index is smaller than its children's and a pass
 * from the last index to the first visits every child before its parent
 * (quota.c relies on that). Names are unique over the whole tree so that a
 * job, a message or a config key can name a tenant without its path. The
 * accounting of usage lives in src/sched/quota.c; this file only describes
 * and validates who may have what.
 */
#include "tessera/tenant.h"

#include "tessera/name_list.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TENANTS_INITIAL_CAP 16

void ts_res_name(int dim, char *buf, size_t size)
{
    if (size == 0)
        return;
    if (dim == TS_RES_CPU) {
        snprintf(buf, size, "cpu_milli");
    } else if (dim == TS_RES_MEM) {
        snprintf(buf, size, "mem_mib");
    } else if (dim >= TS_RES_GPU0 && dim < TS_RES_DIMS) {
        const ts_gpu_model_info *m = ts_gpu_model_get(dim - TS_RES_GPU0);
        if (m && m->name)
            snprintf(buf, size, "gpu[%s]", m->name);
        else
            snprintf(buf, size, "gpu[%d]", dim - TS_RES_GPU0);
    } else {
        snprintf(buf, size, "dim[%d]", dim);
    }
}

/* An amount of dimension dim as a tenants file writes it: GPUs (not
 * milli-GPUs, docs/scheduler.md), else the dimension's own unit. */
static void res_amount(int dim, int64_t v, char *buf, size_t size)
{
    if (dim >= TS_RES_GPU0 && v % TS_MILLI_PER_GPU != 0)
        snprintf(buf, size, "%.3f", (double)v / TS_MILLI_PER_GPU);
    else
        snprintf(buf, size, "%lld", (long long)(dim >= TS_RES_GPU0 ? v / TS_MILLI_PER_GPU : v));
}

ts_tenants *ts_tenants_new(void)
{
    ts_tenants *ts = calloc(1, sizeof *ts);
    if (!ts)
        return NULL;
    ts->t = calloc(TENANTS_INITIAL_CAP, sizeof *ts->t);
    if (!ts->t) {
        free(ts);
        return NULL;
    }
    ts->cap = TENANTS_INITIAL_CAP;
    return ts;
}

void ts_tenants_free(ts_tenants *ts)
{
    if (!ts)
        return;
    free(ts->t);
    free(ts);
}

int ts_tenant_find(const ts_tenants *ts, const char *name)
{
    if (!ts || !name)
        return -1;
    for (int i = 0; i < ts->n; i++)
        if (strcmp(ts->t[i].name, name) == 0)
            return i;
    return -1;
}

static bool name_ok(const char *name)
{
    size_t len = strnlen(name, TS_NAME_MAX);
    if (len == 0 || len >= TS_NAME_MAX)
        return false;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)name[i];
        if (c <= ' ' || c >= 0x7f)
            return false;
    }
    return true;
}

int ts_tenant_add(ts_tenants *ts, const char *name, const char *parent, ts_err *err)
{
    if (!ts || !name)
        return ts_err_set(err, TS_EINVAL, "tenants: missing tenant name");
    if (!name_ok(name))
        return ts_err_set(err, TS_EINVAL,
                          "tenants.%.*s: name must be 1..%d printable characters without spaces",
                          TS_NAME_MAX - 1, name, TS_NAME_MAX - 1);
    if (ts_tenant_find(ts, name) >= 0)
        return ts_err_set(err, TS_EEXIST, "tenants.%s: duplicate tenant name", name);
    int p = -1;
    int depth = 0;
    if (parent && parent[0]) {
        p = ts_tenant_find(ts, parent);
        if (p < 0)
            return ts_err_set(err, TS_ENOENT, "tenants.%s.parent: no tenant named '%.*s'", name,
                              TS_NAME_MAX - 1, parent);
        depth = ts->t[p].depth + 1;
        if (depth >= TS_TENANT_MAX_DEPTH)
            return ts_err_set(err, TS_EINVAL,
                              "tenants.%s.parent: the tree may be at most %d levels deep", name,
                              TS_TENANT_MAX_DEPTH);
    }
    if (ts->n >= TS_TENANT_MAX)
        return ts_err_set(err, TS_EINVAL, "tenants.%s: more than %d tenants", name,
                          TS_TENANT_MAX);
    if (ts->n == ts->cap) {
        int ncap = ts->cap * 2;
        ts_tenant *nt = realloc(ts->t, (size_t)ncap * sizeof *nt);
        if (!nt)
            return ts_err_set(err, TS_ENOMEM, "tenants.%s: out of memory", name);
        ts->t = nt;
        ts->cap = ncap;
    }
    ts_tenant *t = &ts->t[ts->n];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->parent = p;
    t->depth = depth;
    t->weight = 1.0;
    for (int k = 0; k < TS_RES_DIMS; k++) {
        t->borrow_limit[k] = TS_QUOTA_UNLIMITED;
        t->lend_limit[k] = TS_QUOTA_UNLIMITED;
    }
    if (p >= 0)
        ts->t[p].nchildren++;
    return ts->n++;
}

static bool limit_ok(int64_t v)
{
    return v == TS_QUOTA_UNLIMITED || (v >= 0 && v <= TS_QUOTA_MAX);
}

int ts_tenant_set_quota(ts_tenants *ts, int t, int dim, int64_t guaranteed, int64_t borrow,
                        int64_t lend, ts_err *err)
{
    if (!ts || t < 0 || t >= ts->n)
        return ts_err_set(err, TS_EINVAL, "tenants[%d]: no such tenant", t);
    const char *name = ts->t[t].name;
    if (dim < 0 || dim >= TS_RES_DIMS)
        return ts_err_set(err, TS_EINVAL, "tenants.%s: resource dimension %d out of range",
                          name, dim);
    char dn[TS_NAME_MAX + 8];
    ts_res_name(dim, dn, sizeof dn);
    if (guaranteed < 0 || guaranteed > TS_QUOTA_MAX)
        return ts_err_set(err, TS_EINVAL, "tenants.%s.guaranteed.%s: must be 0..%lld", name,
                          dn, (long long)TS_QUOTA_MAX);
    if (!limit_ok(borrow))
        return ts_err_set(err, TS_EINVAL,
                          "tenants.%s.borrow.%s: must be 0..%lld or unlimited", name, dn,
                          (long long)TS_QUOTA_MAX);
    if (!limit_ok(lend))
        return ts_err_set(err, TS_EINVAL, "tenants.%s.lend.%s: must be 0..%lld or unlimited",
                          name, dn, (long long)TS_QUOTA_MAX);
    ts->t[t].guaranteed[dim] = guaranteed;
    ts->t[t].borrow_limit[dim] = borrow;
    ts->t[t].lend_limit[dim] = lend;
    return 0;
}

#define WEIGHT_MAX 1e6

int ts_tenant_set_order(ts_tenants *ts, int t, int order, ts_err *err)
{
    if (!ts || t < 0 || t >= ts->n)
        return ts_err_set(err, TS_EINVAL, "tenant: index %d out of range", t);
    if (order < 0 || order > 2)
        return ts_err_set(err, TS_EINVAL, "tenants.%s.order: must be las or fifo",
                          ts->t[t].name);
    ts->t[t].order = order;
    return 0;
}

int ts_tenant_set_weight(ts_tenants *ts, int t, double weight, ts_err *err)
{
    if (!ts || t < 0 || t >= ts->n)
        return ts_err_set(err, TS_EINVAL, "tenants[%d]: no such tenant", t);
    /* written so that NaN fails too */
    if (!(weight > 0.0 && weight <= WEIGHT_MAX))
        return ts_err_set(err, TS_EINVAL, "tenants.%s.weight: must be > 0 and <= %g",
                          ts->t[t].name, WEIGHT_MAX);
    ts->t[t].weight = weight;
    return 0;
}

int ts_tenants_validate(const ts_tenants *ts, ts_err *err)
{
    return ts_tenants_validate_all(ts, NULL, NULL, err);
}

/* One error of the tree's: the first into err, each to on_error. */
static int tree_error(ts_tenants_error_fn on_error, void *ctx, int t, ts_err *first, ts_err *err,
                      const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static int tree_error(ts_tenants_error_fn on_error, void *ctx, int t, ts_err *first, ts_err *err,
                      const char *fmt, ...)
{
    ts_err e = {.code = TS_EINVAL};
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e.msg, sizeof e.msg, fmt, ap);
    va_end(ap);
    if (on_error)
        on_error(ctx, t, &e);
    if (first->code == 0) {
        *first = e;
        if (err)
            *err = e;
    }
    return TS_EINVAL;
}

int ts_tenants_validate_all(const ts_tenants *ts, ts_tenants_error_fn on_error, void *ctx,
                            ts_err *err)
{
    if (!ts)
        return ts_err_set(err, TS_EINVAL, "tenants: missing");
    int64_t *sum = calloc((size_t)(ts->n > 0 ? ts->n : 1) * TS_RES_DIMS, sizeof *sum);
    if (!sum)
        return ts_err_set(err, TS_ENOMEM, "tenants: out of memory");
    ts_err first = {0};
    for (int i = 0; i < ts->n; i++) {
        const ts_tenant *t = &ts->t[i];
        if (!(t->weight > 0.0 && t->weight <= WEIGHT_MAX))
            tree_error(on_error, ctx, i, &first, err, "tenants.%s.weight: must be > 0 and <= %g",
                       t->name, WEIGHT_MAX);
        for (int k = 0; k < TS_RES_DIMS; k++) {
            if (t->guaranteed[k] < 0 || t->guaranteed[k] > TS_QUOTA_MAX ||
                !limit_ok(t->borrow_limit[k]) || !limit_ok(t->lend_limit[k])) {
                char dn[TS_NAME_MAX + 8];
                ts_res_name(k, dn, sizeof dn);
                tree_error(on_error, ctx, i, &first, err, "tenants.%s.%s: quota out of range",
                           t->name, dn);
                continue; /* out of range: not added up */
            }
            /* at most TS_TENANT_MAX terms of at most TS_QUOTA_MAX: no overflow */
            if (t->parent >= 0)
                sum[(size_t)t->parent * TS_RES_DIMS + (size_t)k] += t->guaranteed[k];
        }
    }
    for (int i = 0; i < ts->n; i++) {
        const ts_tenant *t = &ts->t[i];
        for (int k = 0; k < TS_RES_DIMS; k++) {
            int64_t s = sum[(size_t)i * TS_RES_DIMS + (size_t)k];
            if (s > t->guaranteed[k]) {
                char dn[TS_NAME_MAX + 8], sa[32], pa[32];
                ts_res_name(k, dn, sizeof dn);
                res_amount(k, s, sa, sizeof sa);
                res_amount(k, t->guaranteed[k], pa, sizeof pa);
                tree_error(on_error, ctx, i, &first, err,
                           "tenants.%s.guaranteed.%s: children's guarantees (%s) exceed the "
                           "parent's (%s)", t->name, dn, sa, pa);
            }
        }
    }
    free(sum);
    return first.code;
}

bool ts_unix_name_ok(const char *s)
{
    size_t n = 0;
    for (; s && s[n]; n++) {
        char ch = s[n];
        bool ok = (ch >= 'a' && ch <= 'z') || ch == '_' ||
                  (n > 0 && ((ch >= '0' && ch <= '9') || ch == '-'));
        if (!ok || n >= 32)
            return false;
    }
    return n > 0;
}

bool ts_tenant_registry_ok(const ts_tenant *t, const char *host)
{
    if (!t->registries_set)
        return true; /* not restricted */
    return ts_name_listed(t->registries, host);
}

bool ts_mount_path_ok(const char *p)
{
    size_t n = p ? strlen(p) : 0;
    if (n == 0 || p[0] != '/' || n >= TS_MOUNT_PATH_MAX)
        return false;
    if (n == 1)
        return true;
    if (p[n - 1] == '/')
        return false;
    for (const char *c = p + 1;;) {
        const char *e = strchr(c, '/');
        size_t len = e ? (size_t)(e - c) : strlen(c);
        if (len == 0 || (len == 1 && c[0] == '.') || (len == 2 && c[0] == '.' && c[1] == '.'))
            return false;
        if (!e)
            return true;
        c = e + 1;
    }
}

bool ts_tenant_mount_ok(const ts_tenant *t, const char *host_path, bool write)
{
    if (!ts_mount_path_ok(host_path))
        return false;
    for (int i = 0; i < t->nmounts; i++) {
        const char *a = t->mounts[i].path;
        size_t n = strlen(a);
        bool under = strcmp(a, "/") == 0 ||
                     (strncmp(host_path, a, n) == 0 && (host_path[n] == '\0' || host_path[n] == '/'));
        if (under && (!write || t->mounts[i].write))
            return true;
    }
    return false;
}

bool ts_tenant_container_user_ok(const ts_tenant_identity *id, int64_t submitter_uid,
                                 int64_t uid, int64_t gid)
{
    if (submitter_uid == 0 && id->allow_root) /* root could become anyone anyway */
        return true;
    if (uid == 0 || gid == 0)
        return id->allow_root;
    if (submitter_uid >= 0 && uid == submitter_uid)
        return true;
    return id->has_uid_range && uid >= id->uid_min && uid <= id->uid_max;
}

#define CONTAINER_ID_MAX 2147483647LL

static bool decimal_id(const char **s, int64_t *out)
{
    const char *p = *s;
    int64_t v = 0;
    if (*p < '0' || *p > '9')
        return false;
    for (; *p >= '0' && *p <= '9'; p++) {
        v = v * 10 + (*p - '0');
        if (v > CONTAINER_ID_MAX)
            return false;
    }
    *out = v;
    *s = p;
    return true;
}

bool ts_container_user_parse(const char *s, int64_t *uid, int64_t *gid)
{
    if (!s || !decimal_id(&s, uid))
        return false;
    *gid = *uid;
    if (*s == ':') {
        s++;
        if (!decimal_id(&s, gid))
            return false;
    }
    return *s == '\0';
}

int64_t ts_share_user_key(int64_t run_uid, const char *container_user, int64_t job_id)
{
    int64_t uid, gid;
    if (container_user && *container_user) {
        if (ts_container_user_parse(container_user, &uid, &gid))
            return uid + 1;
        return -(job_id + 1);
    }
    return run_uid >= 0 ? run_uid + 1 : 1;
}
