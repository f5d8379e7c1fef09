/*
 * tokens.c - /v1/tokens: minting, listing and revoking API tokens, and the
 * rules of who may give a token which Unix identity (docs/api.md "Tokens").
 *
 * A token's Unix identity (unix_user and uid) is what its jobs' tasks run
 * as on agent nodes; it is never derived from the token's free-form name.
 * Only admin maps any identity; a tenant-admin maps its own tenant's user
 * tokens only within what tenants.yaml lets that tenant use (unix_users,
 * uid_range), and never uid 0. The agent holds the other end: it runs the
 * task as exactly that user and uid, or refuses (agent_task.c).
 *
 * Expiry: `expires` (RFC 3339 or a duration from now) at creation; an
 * expired token answers 401 "token expired" (http.c).
 *
 * Names: a token's name is unique in the cluster (it is the caller's name in
 * job owners, rate limits and logs), so names are namespaced instead of
 * first come, first served. Names "<tenant>.<rest>" belong to that tenant:
 * only its tokens carry them, and a tenant-admin's tokens always do (its
 * "ci" is stored as "team-a.ci", so the same name in two tenants is fine and
 * a tenant-admin can squat no one else's). Other names are the cluster's,
 * which only admin gives; a node's name is kept for that node's credential.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctld/ctld.h"
#include "ctld/input.h"
#include "ctld/http.h"
#include "tessera/fmt.h"

/* The largest uid Linux gives an account ((uid_t)-1 is "no uid"). */
#define CTLD_UID_MAX 4294967294LL

/* The API's role names: a viewer with no tenant is a cluster-viewer. */
static const char *role_name(int role, const char *tenant)
{
    return role == TS_ROLE_VIEWER && !tenant[0] ? "cluster-viewer" : ts_role_name(role);
}

static json_t *token_json(const ts_token_row *t)
{
    json_t *doc = json_pack("{s:s,s:s,s:o,s:f,s:o}", "name", t->name, "role",
                            role_name(t->role, t->tenant), "tenant",
                            t->tenant[0] ? json_string(t->tenant) : json_null(), "created",
                            t->created_s,
                            "revoked", t->revoked_s > 0 ? json_real(t->revoked_s) : json_null());
    json_object_set_new(doc, "unix_user", t->unix_user[0] ? json_string(t->unix_user) : json_null());
    json_object_set_new(doc, "uid", t->unix_user[0] ? json_integer(t->uid) : json_null());
    json_object_set_new(doc, "expires", t->expires_s > 0 ? json_real(t->expires_s) : json_null());
    return doc;
}

/* "2027-01-31T12:00:00Z", "2027-01-31T12:00:00.5+02:00" -> Unix seconds. */
static int parse_rfc3339(const char *s, double *out)
{
    struct tm tm = {0};
    int n = 0;
    if (sscanf(s, "%4d-%2d-%2d%*[Tt ]%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
               &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &n) != 6 || n != 19)
        return TS_EINVAL;
    const char *p = s + n;
    double frac = 0.0;
    if (*p == '.') {
        char *end;
        frac = strtod(p, &end);
        if (end == p + 1)
            return TS_EINVAL;
        p = end;
    }
    long off = 0;
    if (*p == 'Z' || *p == 'z') {
        p++;
    } else if (*p == '+' || *p == '-') {
        int hh, mm, k = 0;
        if (sscanf(p + 1, "%2d:%2d%n", &hh, &mm, &k) != 2 || k != 5 || hh > 23 || mm > 59)
            return TS_EINVAL;
        off = (*p == '+' ? 1 : -1) * (hh * 3600L + mm * 60L);
        p += 6;
    } else {
        return TS_EINVAL; /* a time without its offset means nothing across hosts */
    }
    if (*p || tm.tm_mon < 1 || tm.tm_mon > 12 || tm.tm_mday < 1 || tm.tm_mday > 31 ||
        tm.tm_hour > 23 || tm.tm_min > 59 || tm.tm_sec > 60)
        return TS_EINVAL;
    long days = ts_days_from_civil(tm.tm_year, tm.tm_mon, tm.tm_mday);
    double t = (double)days * 86400.0 + tm.tm_hour * 3600.0 + tm.tm_min * 60.0 + tm.tm_sec;
    *out = t - (double)off + frac;
    return 0;
}

int ctld_parse_expiry(const char *s, double now_s, double *out)
{
    double d;
    if (!s || !*s)
        return TS_EINVAL;
    if (ctld_parse_duration(s, &d) == 0) {
        if (d <= 0)
            return TS_EINVAL;
        *out = now_s + d;
        return 0;
    }
    return parse_rfc3339(s, out);
}


/* Whether caller w may give a token of tenant `tenant` the identity
 * (user, uid); 0, or an HTTP status with the reason in why. */
static int identity_allowed(ctld *c, const ctld_caller *w, const char *tenant, const char *user,
                            int64_t uid, char *why, size_t size)
{
    if (w->role == TS_ROLE_ADMIN)
        return 0;
    if (uid == 0) {
        snprintf(why, size, "uid: only admin maps a token to uid 0 (root)");
        return 403;
    }
    ctld_lock_reader(c); /* PUT /v1/tenants replaces c->tenants under it */
    int t = ts_tenant_find(c->tenants, tenant);
    ts_tenant_identity id = {0};
    if (t >= 0)
        id = c->tenants->t[t].identity;
    pthread_mutex_unlock(&c->mu);
    if (!id.unix_users[0] && !id.has_uid_range)
        snprintf(why, size, "unix_user: tenant \"%s\" lets its tenant-admin map no Unix user "
                 "(tenants.yaml: unix_users, uid_range); ask an admin", tenant);
    else if (id.unix_users[0] && !ctld_name_listed(id.unix_users, user))
        snprintf(why, size, "unix_user: \"%s\" is not among tenant \"%s\"'s unix_users (%s)",
                 user, tenant, id.unix_users);
    else if (id.has_uid_range && (uid < id.uid_min || uid > id.uid_max))
        snprintf(why, size, "uid: %lld is outside tenant \"%s\"'s uid_range [%lld, %lld]",
                 (long long)uid, tenant, (long long)id.uid_min, (long long)id.uid_max);
    else
        return 0;
    return 403;
}

typedef struct token_in {
    const char *name, *role, *tenant, *unix_user, *expires;
    json_t *tenant_j, *uid_j;
    int rl;
    bool cluster_viewer;
} token_in;

/* The request's shape alone (no permission, no tenant lookup): 0 or 400
 * with the reason in why. */
static int token_in_read(json_t *in, token_in *t, char *why, size_t size)
{
    static const char *const known[] = {"name", "role", "tenant", "unix_user", "uid", "expires"};
    const char *k = ctld_unknown_key(in, known, sizeof known / sizeof known[0]);
    if (k) {
        snprintf(why, size, "%.64s: unknown key (known: name, role, tenant, unix_user, uid, "
                 "expires)", k);
        return 400;
    }
    t->name = json_string_value(json_object_get(in, "name"));
    t->role = json_string_value(json_object_get(in, "role"));
    t->tenant_j = json_object_get(in, "tenant");
    t->tenant = json_string_value(t->tenant_j);
    t->unix_user = json_string_value(json_object_get(in, "unix_user"));
    t->uid_j = json_object_get(in, "uid");
    t->expires = json_string_value(json_object_get(in, "expires"));
    t->cluster_viewer = t->role && strcmp(t->role, "cluster-viewer") == 0;
    t->rl = t->cluster_viewer ? TS_ROLE_VIEWER : t->role ? ts_role_parse(t->role) : -1;
    json_t *uj = json_object_get(in, "unix_user");
    json_int_t uid = json_integer_value(t->uid_j);
    if (!ts_token_name_ok(t->name))
        snprintf(why, size, "name: required, 1..63 characters of A-Z a-z 0-9 . _ -, starting "
                 "with a letter or digit");
    else if (t->rl < 0)
        snprintf(why, size, "role: must be admin, tenant-admin, user, viewer, cluster-viewer, "
                 "node or scrape");
    else if (t->tenant_j && !json_is_null(t->tenant_j) && !json_is_string(t->tenant_j))
        snprintf(why, size, "tenant: a tenant name or null");
    else if (uj && !ts_unix_name_ok(t->unix_user))
        snprintf(why, size, "unix_user: a Unix user name ([a-z_][a-z0-9_-]*, at most 32 "
                 "characters)");
    else if (t->uid_j && (!json_is_integer(t->uid_j) || uid < 0 || uid > CTLD_UID_MAX))
        snprintf(why, size, "uid: an integer 0..%lld", CTLD_UID_MAX);
    else if (!uj != !t->uid_j)
        snprintf(why, size, "%s: unix_user and uid go together (the uid the user has on every "
                 "node)", uj ? "uid" : "unix_user");
    else if (uj && t->rl != TS_ROLE_ADMIN && t->rl != TS_ROLE_TENANT_ADMIN &&
             t->rl != TS_ROLE_USER)
        snprintf(why, size, "unix_user: a %s token runs no tasks; only admin, tenant-admin and "
                 "user tokens have a Unix identity", t->role);
    else if (json_object_get(in, "expires") && !t->expires)
        snprintf(why, size, "expires: a time (RFC 3339, e.g. 2027-01-31T12:00:00Z) or a "
                 "duration from now (e.g. 90d)");
    else
        return 0;
    return 400;
}

/* The checks that need the tenants and the caller; 0 or a status and why. */
static int token_in_check(ctld *c, const ctld_caller *w, const token_in *t, char *why,
                          size_t size)
{
    const char *tenant = t->tenant;
    ctld_lock_reader(c);
    bool tenant_known = tenant && *tenant && ts_tenant_find(c->tenants, tenant) >= 0;
    pthread_mutex_unlock(&c->mu);
    int rl = t->rl;
    if (rl == TS_ROLE_SCRAPE && tenant && *tenant)
        snprintf(why, size, "tenant: a scrape token reads /metrics, every tenant's series; give "
                 "no tenant");
    else if (t->cluster_viewer && tenant && *tenant)
        snprintf(why, size, "tenant: a cluster-viewer reads every tenant; give no tenant, or "
                 "make a viewer of tenant \"%s\"", tenant);
    else if (rl == TS_ROLE_VIEWER && !t->cluster_viewer && (!tenant || !*tenant))
        snprintf(why, size, "tenant: required for role viewer (a viewer of every tenant is role "
                 "cluster-viewer, which only admin creates)");
    else if (rl != TS_ROLE_NODE && ts_cluster_find_node(c->cluster, t->name) >= 0)
        snprintf(why, size, "name: \"%s\" is a node's name, kept for that node's credential",
                 t->name);
    else if (rl == TS_ROLE_NODE && ts_cluster_find_node(c->cluster, t->name) < 0)
        snprintf(why, size, "name: a node credential is named after its node; \"%s\" is not a "
                 "node of the cluster", t->name);
    else if ((rl == TS_ROLE_TENANT_ADMIN || rl == TS_ROLE_USER) && (!tenant || !*tenant))
        snprintf(why, size, "tenant: required for role %s", t->role);
    else if (tenant && *tenant && !tenant_known)
        snprintf(why, size, "tenant: no tenant \"%s\"", tenant);
    else if (w->role != TS_ROLE_ADMIN &&
             !(w->role == TS_ROLE_TENANT_ADMIN && tenant && strcmp(tenant, w->tenant) == 0 &&
               (rl == TS_ROLE_USER || rl == TS_ROLE_VIEWER))) {
        snprintf(why, size, "role %s cannot create %s %s token%s", ts_role_name(w->role),
                 strchr("aeiou", t->role[0]) ? "an" : "a", t->role,
                 w->role == TS_ROLE_TENANT_ADMIN && tenant && *tenant && strcmp(tenant, w->tenant)
                     ? " of another tenant"
                     : "");
        return 403;
    } else if (t->unix_user)
        return identity_allowed(c, w, tenant, t->unix_user, json_integer_value(t->uid_j), why,
                                size);
    else
        return 0;
    return 400;
}

/* The tenant whose namespace `name` is in ("<tenant>.<rest>", the longest
 * such tenant name), or -1. Under c->mu. */
static int name_space_of(const ctld *c, const char *name)
{
    int best = -1;
    size_t best_len = 0;
    for (int t = 0; t < c->tenants->n; t++) {
        const char *tn = c->tenants->t[t].name;
        size_t n = strlen(tn);
        if (n > best_len && strncmp(name, tn, n) == 0 && name[n] == '.' && name[n + 1]) {
            best = t;
            best_len = n;
        }
    }
    return best;
}

/* The name the token is stored under (a tenant-admin's in its tenant's
 * namespace) into full; 0 or 400 with the reason in why. */
static int token_full_name(ctld *c, const ctld_caller *w, const token_in *t, char *full,
                           size_t fsize, char *why, size_t size)
{
    size_t tl = strlen(w->tenant);
    bool prefix = w->role == TS_ROLE_TENANT_ADMIN &&
                  !(strncmp(t->name, w->tenant, tl) == 0 && t->name[tl] == '.');
    int n = prefix ? snprintf(full, fsize, "%s.%s", w->tenant, t->name)
                   : snprintf(full, fsize, "%s", t->name);
    if (prefix && (n < 0 || (size_t)n >= fsize || !ts_token_name_ok(full))) {
        snprintf(why, size, "name: a tenant-admin's tokens are named \"%s.<name>\"; \"%s.%s\" "
                 "is not a token name (1..63 characters of A-Z a-z 0-9 . _ -)", w->tenant,
                 w->tenant, t->name);
        return 400;
    }
    const char *tenant = t->tenant ? t->tenant : "";
    ctld_lock_reader(c);
    int owner = name_space_of(c, full);
    char owner_name[TS_NAME_MAX] = "";
    if (owner >= 0)
        snprintf(owner_name, sizeof owner_name, "%s", c->tenants->t[owner].name);
    pthread_mutex_unlock(&c->mu);
    if (owner >= 0 && strcmp(owner_name, tenant) != 0) {
        snprintf(why, size, "name: \"%s\" is in tenant \"%s\"'s namespace (\"%s.*\"): only "
                 "that tenant's tokens are named so", full, owner_name, owner_name);
        return 400;
    }
    if (ts_cluster_find_node(c->cluster, full) >= 0 && t->rl != TS_ROLE_NODE) {
        snprintf(why, size, "name: \"%s\" is a node's name, kept for that node's credential",
                 full);
        return 400;
    }
    return 0;
}

/* Whether tenant holds limits.tokens_per_tenant live tokens (neither
 * revoked nor expired) or more: a tenant-admin may make no more (an admin
 * may). Each token may hold its own connections: without a cap a tenant
 * could hold the controller's. */
static bool tenant_tokens_full(ctld *c, const char *tenant, double now_s)
{
    ts_token_row *rows = NULL;
    int n = 0, live = 0;
    ts_err err;
    if (ts_store_token_list(c->store, tenant, &rows, &n, &err) != 0)
        return false; /* the insert says the store is unavailable */
    for (int i = 0; i < n; i++)
        live += rows[i].revoked_s == 0 && (rows[i].expires_s == 0 || rows[i].expires_s > now_s);
    free(rows);
    return live >= c->cfg.tokens_per_tenant;
}

/* The live tokens of other tenants that map the new token's Unix identity:
 * on a node, one identity's tasks can reach each other's files (their task
 * folders are kept apart by owner), so tenants that share one are not apart
 * there. A warning per such tenant (at most 4); NULL when none. */
static json_t *shared_identity(ctld *c, const ts_token_row *row)
{
    ts_token_row *rows = NULL;
    int n = 0;
    ts_err err;
    if (!row->unix_user[0] || !row->tenant[0] ||
        ts_store_token_list(c->store, NULL, &rows, &n, &err) != 0)
        return NULL;
    json_t *w = NULL;
    char seen[4][TS_STORE_NAME_MAX];
    int nseen = 0;
    for (int i = 0; i < n && nseen < 4; i++) {
        const ts_token_row *o = &rows[i];
        bool live = o->revoked_s == 0 && (o->expires_s == 0 || o->expires_s > row->created_s);
        bool dup = false;
        for (int k = 0; k < nseen; k++)
            dup = dup || strcmp(seen[k], o->tenant) == 0;
        if (!live || dup || !o->unix_user[0] || !o->tenant[0] || o->uid != row->uid ||
            strcmp(o->tenant, row->tenant) == 0)
            continue;
        snprintf(seen[nseen++], sizeof seen[0], "%s", o->tenant);
        if (!w)
            w = json_array();
        json_array_append_new(w, json_sprintf("uid %lld (%s) also runs tasks of tenant \"%s\" "
                                              "(token \"%s\"): on a node one Unix identity's "
                                              "tasks can reach each other's files, so the two "
                                              "tenants are not apart there "
                                              "(docs/agent-tasks.md \"User\")",
                                              (long long)row->uid, row->unix_user, o->tenant,
                                              o->name));
    }
    free(rows);
    return w;
}

static void token_create(ctld *c, const ctld_request *rq, ctld_reply *r)
{
    json_error_t je;
    json_t *in = json_loadb(rq->body, rq->len, 0, &je);
    char why[512];
    token_in t = {0};
    int status = !json_is_object(in) ? (snprintf(why, sizeof why, "body: not a JSON object (%s)",
                                                 je.text), 400)
                                     : token_in_read(in, &t, why, sizeof why);
    if (status == 0)
        status = token_in_check(c, rq->who, &t, why, sizeof why);
    ts_token_row row = {0};
    if (status == 0)
        status = token_full_name(c, rq->who, &t, row.name, sizeof row.name, why, sizeof why);
    row.created_s = ctld_now();
    if (status == 0 && t.expires &&
        (ctld_parse_expiry(t.expires, row.created_s, &row.expires_s) != 0 ||
         row.expires_s <= row.created_s)) {
        snprintf(why, sizeof why, "expires: \"%.64s\" is not a future time (RFC 3339, e.g. "
                 "2027-01-31T12:00:00Z) or a duration from now (e.g. 90d)", t.expires);
        status = 400;
    }
    if (status == 0 && rq->who->role != TS_ROLE_ADMIN && t.tenant && *t.tenant &&
        tenant_tokens_full(c, t.tenant, row.created_s)) {
        snprintf(why, sizeof why, "tenant \"%.64s\" holds %d live tokens "
                 "(limits.tokens_per_tenant): revoke one, or let one expire, first", t.tenant,
                 c->cfg.tokens_per_tenant);
        status = 429;
    }
    if (status != 0) {
        ctld_reply_error(r, status, status == 403   ? "forbidden"
                                    : status == 429 ? "too_many_tokens"
                                                    : "invalid", "%s", why);
        json_decref(in);
        return;
    }
    row.role = t.rl;
    snprintf(row.tenant, sizeof row.tenant, "%s", t.tenant ? t.tenant : "");
    if (t.unix_user) {
        snprintf(row.unix_user, sizeof row.unix_user, "%s", t.unix_user);
        row.uid = json_integer_value(t.uid_j);
    }
    json_decref(in);
    char secret[128];
    ts_err err;
    int rc = ctld_token_new_secret(secret, sizeof secret);
    if (rc == 0) {
        ctld_token_hash(secret, row.hash);
        rc = ts_store_token_insert(c->store, &row, &err);
    }
    if (rc == TS_EEXIST)
        ctld_reply_error(r, 409, "conflict", "token \"%s\" exists", row.name);
    else if (rc != 0)
        ctld_reply_error(r, 503, "unavailable", "cannot create the token");
    else {
        json_t *doc = token_json(&row);
        json_object_set_new(doc, "secret", json_string(secret));
        json_t *ans = json_pack("{s:o}", "token", doc);
        json_t *warn = shared_identity(c, &row);
        if (ans && warn)
            json_object_set_new(ans, "warnings", warn);
        else
            json_decref(warn);
        ctld_reply_json(r, 201, ans);
    }
}

static void token_list(ctld *c, const ctld_request *rq, ctld_reply *r)
{
    const ctld_caller *w = rq->who;
    ts_token_row *rows = NULL;
    int n = 0;
    ts_err err;
    const char *tenant = w->role == TS_ROLE_ADMIN ? NULL : w->tenant;
    if (ts_store_token_list(c->store, tenant, &rows, &n, &err) != 0) {
        ctld_reply_error(r, 503, "unavailable", "%s", err.msg);
        return;
    }
    json_t *a = json_array();
    for (int i = 0; i < n; i++)
        if (w->role == TS_ROLE_ADMIN || w->role == TS_ROLE_TENANT_ADMIN ||
            strcmp(rows[i].name, w->name) == 0)
            json_array_append_new(a, token_json(&rows[i]));
    free(rows);
    ctld_reply_json(r, 200, json_pack("{s:o}", "tokens", a));
}

static void token_revoke(ctld *c, const ctld_request *rq, const char *name, ctld_reply *r)
{
    ts_token_row *rows = NULL;
    int n = 0, found = -1;
    ts_err err;
    if (rq->who->role != TS_ROLE_ADMIN) {
        ctld_reply_error(r, 403, "forbidden", "only admin revokes tokens");
        return;
    }
    if (!ts_token_name_ok(name)) {
        ctld_reply_error(r, 400, "invalid", "name: 1..63 characters of A-Z a-z 0-9 . _ -");
        return;
    }
    if (ts_store_token_list(c->store, NULL, &rows, &n, &err) == 0)
        for (int i = 0; i < n; i++)
            if (strcmp(rows[i].name, name) == 0)
                found = i;
    free(rows);
    if (found < 0) {
        ctld_reply_error(r, 404, "not_found", "token \"%s\" does not exist", name);
    } else if (ts_store_token_revoke(c->store, name, ctld_now(), &err) != 0) {
        ctld_reply_error(r, 503, "unavailable", "%s", err.msg);
    } else {
        ctld_token_cache_clear(c);
        r->status = 204;
        r->body = NULL;
    }
}

void ctld_whoami(const ctld_request *rq, ctld_reply *r)
{
    const ctld_caller *w = rq->who;
    json_t *doc = json_pack("{s:s,s:s,s:o}", "name", w->name, "role", role_name(w->role, w->tenant),
                            "tenant", w->tenant[0] ? json_string(w->tenant) : json_null());
    json_object_set_new(doc, "unix_user", w->unix_user[0] ? json_string(w->unix_user) : json_null());
    json_object_set_new(doc, "uid", w->unix_user[0] ? json_integer(w->uid) : json_null());
    json_object_set_new(doc, "expires", w->expires_s > 0 ? json_real(w->expires_s) : json_null());
    ctld_reply_json(r, 200, doc);
}

void ctld_tokens_route(ctld *c, const ctld_request *rq, ctld_reply *r)
{
    const char *p = rq->url + strlen("/v1/tokens");
    if (strcmp(rq->method, "GET") == 0 && !*p)
        token_list(c, rq, r);
    else if (strcmp(rq->method, "POST") == 0 && !*p)
        token_create(c, rq, r);
    else if (strcmp(rq->method, "DELETE") == 0 && p[0] == '/' && p[1])
        token_revoke(c, rq, p + 1, r);
    else
        ctld_reply_error(r, 405, "method_not_allowed", "%s %s", rq->method, rq->url);
}
