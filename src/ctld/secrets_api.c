/*
 * secrets_api.c - /v1/secrets (docs/api.md "Secrets", docs/secrets.md),
 * the secrets a job names at submission, and what a starting task gets.
 *
 * RBAC of their own: a user sets, lists and deletes its own secrets (scope
 * user) and lists the names of its tenant's; tenant secrets (scope tenant)
 * are set and deleted by the tenant's tenant-admins and by admins, who also
 * list every user's secret names in the tenant. Viewers have none. No
 * answer ever carries a value: a set answers the secret's name and scope.
 * Audit: every set and delete is an event of the store (job 0, kinds
 * secret-set and secret-deleted, naming tenant, scope, owner, name and the
 * token: GET /v1/secrets/events) and a line in the controller's log; every
 * run that receives secrets has a secrets-used event naming them (loop.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctld/ctld.h"
#include "ctld/http.h"
#include "ctld/router.h"
#include "ctld/events.h"
#include "ctld/input.h"
#include "ctld/secrets.h"

#define AUDIT_LIMIT_DEFAULT 100
#define AUDIT_LIMIT_MAX 1000

/* The tenant a caller's secrets request is about: its own, or for admin
 * the one it names (?tenant= or the body's "tenant"). NULL and a reply when
 * it has none. */
static const char *tenant_of(const ctld_caller *w, const char *named, ctld_reply *r)
{
    if (w->role == TS_ROLE_VIEWER) {
        ctld_reply_error(r, 403, "forbidden", "role viewer has no secrets");
        return NULL;
    }
    if (w->role != TS_ROLE_ADMIN && named && strcmp(named, w->tenant) != 0) {
        ctld_reply_error(r, 404, "not_found", "tenant \"%s\" does not exist", named);
        return NULL;
    }
    const char *t = w->role == TS_ROLE_ADMIN ? named : w->tenant;
    if (!t || !*t)
        ctld_reply_error(r, 400, "invalid", "tenant: required for an admin token (?tenant= or "
                         "the body's \"tenant\")");
    return t && *t ? t : NULL;
}

/* "user" (the default) or "tenant": the owner the secret is stored under
 * ("" for the tenant's); false and a reply when the caller may not. */
static bool owner_of(const ctld_caller *w, const char *scope, const char **owner, ctld_reply *r)
{
    if (!scope || strcmp(scope, "user") == 0) {
        *owner = w->name;
        return true;
    }
    if (strcmp(scope, "tenant") != 0) {
        ctld_reply_error(r, 400, "invalid", "scope: must be user or tenant, got \"%.64s\"", scope);
        return false;
    }
    if (w->role != TS_ROLE_ADMIN && w->role != TS_ROLE_TENANT_ADMIN) {
        ctld_reply_error(r, 403, "forbidden", "scope: only admin and tenant-admin change the "
                         "tenant's secrets (role %s)", ts_role_name(w->role));
        return false;
    }
    *owner = "";
    return true;
}

static bool name_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n >= TS_SPEC_NAME_MAX || (s[0] >= '0' && s[0] <= '9'))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_", s[i]))
            return false;
    return true;
}

static void audit(ctld *c, const char *kind, const char *tenant, const char *owner,
                  const char *name, const ctld_caller *w)
{
    char d[320];
    snprintf(d, sizeof d, "tenant=%s scope=%s owner=%s name=%s by=%s", tenant,
             *owner ? "user" : "tenant", *owner ? owner : "-", name, w->name);
    ts_event_row ev = {.job_id = 0, .t_s = ctld_now(), .detail = d};
    snprintf(ev.kind, sizeof ev.kind, "%s", kind);
    ts_err err;
    if (ts_store_event_append(c->store, &ev, &err) != 0)
        fprintf(stderr, "tesserad: audit event %s (%s): not written: %s\n", kind, d, err.msg);
    fprintf(stderr, "tesserad: audit: %s %s\n", kind, d);
}

static void secret_put(ctld *c, const ctld_request *rq, const char *name, ctld_reply *r)
{
    const ctld_caller *w = rq->who;
    json_error_t je;
    json_t *in = json_loadb(rq->body, rq->len, 0, &je);
    json_t *value = json_object_get(in, "value");
    const char *unknown = NULL, *k, *owner;
    json_t *kv;
    if (json_is_object(in))
        json_object_foreach(in, k, kv)
            if (strcmp(k, "value") != 0 && strcmp(k, "scope") != 0 && strcmp(k, "tenant") != 0)
                unknown = k;
    const char *tenant = NULL;
    if (!json_is_object(in))
        /* the parser's text may quote the value: only where it failed */
        ctld_reply_error(r, 400, "invalid", "body: not a JSON object (line %d, column %d)",
                         je.line, je.column);
    else if (unknown)
        ctld_reply_error(r, 400, "invalid", "%.64s: unknown key (known: value, scope, tenant)",
                         unknown);
    else if (!json_is_string(value))
        ctld_reply_error(r, 400, "invalid", "value: required, a string");
    else if (json_object_get(in, "scope") && !json_is_string(json_object_get(in, "scope")))
        ctld_reply_error(r, 400, "invalid", "scope: a string, user or tenant");
    else if (json_object_get(in, "tenant") && !json_is_string(json_object_get(in, "tenant")))
        ctld_reply_error(r, 400, "invalid", "tenant: a string, a tenant's name");
    else if ((tenant = tenant_of(w, json_string_value(json_object_get(in, "tenant")), r)) &&
             owner_of(w, json_string_value(json_object_get(in, "scope")), &owner, r)) {
        bool created = false;
        ts_err err;
        double now = ctld_now();
        int rc = ctld_secrets_set(c->secrets, tenant, owner, name, json_string_value(value),
                                  json_string_length(value), now, &created, &err);
        if (rc == TS_EINVAL || rc == TS_ENOSPC)
            ctld_reply_error(r, rc == TS_EINVAL ? 400 : 409,
                             rc == TS_EINVAL ? "invalid" : "conflict", "%s", err.msg);
        else if (rc != 0)
            ctld_reply_error(r, 503, "unavailable", "%s", err.msg);
        else {
            audit(c, "secret-set", tenant, owner, name, w);
            ctld_reply_json(r, created ? 201 : 200,
                            json_pack("{s:{s:s,s:s,s:s,s:o,s:f}}", "secret", "name", name,
                                      "scope", *owner ? "user" : "tenant", "tenant", tenant,
                                      "owner", *owner ? json_string(owner) : json_null(),
                                      "updated", now));
        }
    }
    if (in) /* the value is wiped before the body is freed */
        json_object_set_new(in, "value", json_null());
    json_decref(in);
}

/* GET /v1/secrets/events: the audit (admin: every tenant's, or ?tenant=;
 * tenant-admin: its tenant's). A page holds the tenant's among `limit`
 * events read, so it may hold fewer; next_cursor goes on from the last read. */
static void audit_list(ctld *c, const ctld_request *rq, ctld_reply *r)
{
    const ctld_caller *w = rq->who;
    if (w->role != TS_ROLE_ADMIN && w->role != TS_ROLE_TENANT_ADMIN) {
        ctld_reply_error(r, 403, "forbidden", "the secrets' audit is for admin and tenant-admin");
        return;
    }
    const char *tenant = w->role == TS_ROLE_ADMIN ? rq->q.tenant : w->tenant;
    int64_t limit = AUDIT_LIMIT_DEFAULT, after = 0;
    if ((rq->q.limit && !ctld_parse_number(rq->q.limit, "limit", 1, AUDIT_LIMIT_MAX, &limit, r)) ||
        (rq->q.cursor && !ctld_parse_number(rq->q.cursor, "cursor", 0, INT64_MAX, &after, r)))
        return;
    ts_event_row *ev = NULL;
    int n = 0;
    ts_err err;
    if (ts_store_event_list(c->store, TS_EVENTS_NO_JOB, after, (int)limit, &ev, &n, &err) != 0) {
        ctld_reply_error(r, 503, "unavailable", "%s", err.msg);
        return;
    }
    char want[TS_STORE_NAME_MAX + 16];
    snprintf(want, sizeof want, "tenant=%s ", tenant ? tenant : "");
    json_t *a = json_array();
    for (int i = 0; i < n; i++)
        if (!tenant || (ev[i].detail && strncmp(ev[i].detail, want, strlen(want)) == 0))
            json_array_append_new(a, json_pack("{s:I,s:f,s:s,s:s,s:o}", "id",
                                               (json_int_t)ev[i].id, "time", ev[i].t_s, "kind",
                                               ev[i].kind, "detail",
                                               ev[i].detail ? ev[i].detail : "", "data",
                                               ctld_event_data(ev[i].kind, ev[i].detail)));
    char cur[32];
    snprintf(cur, sizeof cur, "%lld", n > 0 ? (long long)ev[n - 1].id : 0LL);
    ctld_reply_json(r, 200, json_pack("{s:o,s:o}", "events", a, "next_cursor",
                                      n == limit ? json_string(cur) : json_null()));
    ts_store_free_events(ev, n);
}

void ctld_secrets_route(ctld *c, const ctld_request *rq, ctld_reply *r)
{
    const ctld_caller *w = rq->who;
    const char *p = rq->url + strlen("/v1/secrets");
    const char *name = p[0] == '/' ? p + 1 : NULL;
    bool get = strcmp(rq->method, "GET") == 0;
    if (name && get && strcmp(name, "events") == 0) { /* no secret is read by GET */
        audit_list(c, rq, r);
        return;
    }
    if (name && !name_ok(name)) {
        ctld_reply_error(r, 400, "invalid", "name: 1..63 of A-Z a-z 0-9 _, not starting with a "
                         "digit");
        return;
    }
    if (!name && get) {
        const char *tenant = tenant_of(w, rq->q.tenant, r);
        if (!tenant)
            return;
        bool all = w->role == TS_ROLE_ADMIN || w->role == TS_ROLE_TENANT_ADMIN;
        ctld_reply_json(r, 200, json_pack("{s:o}", "secrets",
                                          ctld_secrets_list(c->secrets, tenant,
                                                            all ? NULL : w->name)));
    } else if (name && strcmp(rq->method, "PUT") == 0) {
        secret_put(c, rq, name, r);
    } else if (name && strcmp(rq->method, "DELETE") == 0) {
        const char *tenant = tenant_of(w, rq->q.tenant, r), *owner;
        if (!tenant || !owner_of(w, rq->q.scope, &owner, r))
            return;
        ts_err err;
        int rc = ctld_secrets_remove(c->secrets, tenant, owner, name, &err);
        if (rc == TS_ENOENT)
            ctld_reply_error(r, 404, "not_found", "secret \"%s\" (scope %s) does not exist", name,
                             *owner ? "user" : "tenant");
        else if (rc != 0)
            ctld_reply_error(r, 503, "unavailable", "%s", err.msg);
        else {
            audit(c, "secret-deleted", tenant, owner, name, w);
            r->status = 204;
            r->body = NULL;
        }
    } else {
        ctld_reply_error(r, 405, "method_not_allowed", "%s %s", rq->method, rq->url);
    }
}

/* A secret that could not be revealed: the task carries why (names, no
 * value); the agent does not start it. */
static void secret_error(ctld_dtask *dt, const ts_err *err)
{
    CTLD_DT_SET(dt, SECRETS_ERROR);
    dt->t.secrets_error = ctld_dtask_printf(dt, "%s", err->msg);
}

bool ctld_spec_secrets_ok(ctld *c, const ctld_caller *w, const ts_job_spec *spec, ctld_reply *r)
{
    if (spec->image_secret[0] &&
        !ctld_secrets_exists(c->secrets, spec->tenant, w->name, spec->image_secret)) {
        ctld_field_error(r, "image_pull_secret", "no secret \"%s\" of user \"%s\" or tenant "
                         "\"%s\" (tessera secrets set %s)", spec->image_secret, w->name,
                         spec->tenant, spec->image_secret);
        return false;
    }
    for (int i = 0; i < spec->nsecrets; i++)
        if (!ctld_secrets_exists(c->secrets, spec->tenant, w->name, spec->secrets[i].name)) {
            char path[32];
            snprintf(path, sizeof path, "secrets[%d]", i);
            ctld_field_error(r, path, "no secret \"%s\" of user \"%s\" or tenant \"%s\" (tessera "
                             "secrets set %s)", spec->secrets[i].name, w->name, spec->tenant,
                             spec->secrets[i].name);
            return false;
        }
    return true;
}

void ctld_task_image_secret(const ctld *c, const cjob *j, ctld_dtask *dt)
{
    char *v = NULL;
    size_t len = 0;
    ts_err err;
    if (ctld_secrets_reveal(c->secrets, j->row.tenant, j->row.owner, j->spec->image_secret, &v,
                            &len, &err) != 0) {
        secret_error(dt, &err);
        return;
    }
    CTLD_DT_SET(dt, IMAGE_CREDENTIALS);
    dt->t.image_credentials = ctld_dtask_secret(dt, v, len);
    dt->t.image_credentials_len = len;
    ctld_secret_free(v, len);
}

void ctld_task_secrets(const ctld *c, const cjob *j, ctld_dtask *dt)
{
    int n = j->spec->nsecrets;
    ts_desired_secret *a = ctld_dtask_alloc(dt, sizeof *a * (size_t)n);
    if (!a)
        return; /* oom: the task is not sent */
    for (int i = 0; i < n; i++) {
        const ts_secret_ref *s = &j->spec->secrets[i];
        char *v = NULL;
        size_t len = 0;
        ts_err err;
        if (ctld_secrets_reveal(c->secrets, j->row.tenant, j->row.owner, s->name, &v, &len,
                                &err) != 0) {
            secret_error(dt, &err);
            return;
        }
        a[i].env = s->file ? NULL : s->target;
        a[i].file = s->file ? s->target : NULL;
        a[i].value = ctld_dtask_secret(dt, v, len);
        a[i].value_len = len;
        ctld_secret_free(v, len);
    }
    CTLD_DT_SET(dt, SECRETS);
    dt->t.secrets = a;
    dt->t.nsecrets = n;
}
