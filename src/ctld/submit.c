/*
 * submit.c - POST /v1/jobs (docs/api.md "Submit"): a job spec checked against
 * what its caller and the cluster allow, then stored as one job or an array.
 *
 * The order is the contract: the spec's own errors all at once (400 with
 * every field); then the caller's rights and the cluster's abilities
 * (tenant, Unix identity, host networking, nice, NICs, ports, topology
 * levels), the dependency's jobs, the secrets, the images' registries and
 * the mounts, each a 403 or a 400 naming the field; only then the store
 * (ctld_submit), whose queued-jobs cap is a 429. An Idempotency-Key makes a
 * retry return the same jobs, and another body under the same key a 422
 * that leaves nothing new behind.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctld/ctld.h"
#include "ctld/http.h"
#include "ctld/input.h"
#include "tessera/depend.h"
#include "tessera/image_ref.h"

/* After an idempotent retry: whether every job under the key carries this
 * spec. If not, the jobs this call itself created (those with the new spec)
 * are cancelled again, so a 422 leaves nothing new behind. */
static bool idem_same(ctld *c, const int64_t *ids, int n, const char *json)
{
    bool same = true;
    bool *mine = calloc((size_t)n, sizeof *mine);
    for (int i = 0; i < n; i++) {
        ts_job_row row;
        if (ts_store_job_get(c->store, ids[i], &row, NULL) != 0)
            continue;
        bool eq = row.spec_json && strcmp(row.spec_json, json) == 0;
        if (mine)
            mine[i] = eq;
        same &= eq;
        ts_job_row_fini(&row);
    }
    for (int i = 0; !same && mine && i < n; i++) {
        ts_err e;
        if (mine[i] && ctld_job_action(c, ids[i], "cancel", NULL, &e) != 0)
            fprintf(stderr, "tesserad: job %lld: cannot cancel after an idempotency conflict: "
                    "%s\n", (long long)ids[i], e.msg);
    }
    free(mine);
    return same;
}

/* An image (field path) from host, a registry the tenant may use
 * (registries in tenants.yaml): else 400 naming the field. */
static bool registry_ok(ctld *c, const ts_job_spec *spec, const char *host, const char *path,
                        ctld_reply *r)
{
    char allowed[TS_TENANT_REGISTRIES_BYTES] = "";
    ctld_lock_reader(c);
    int k = ts_tenant_find(c->tenants, spec->tenant);
    bool ok = k < 0 || ts_tenant_registry_ok(&c->tenants->t[k], host);
    if (!ok)
        snprintf(allowed, sizeof allowed, "%s", c->tenants->t[k].registries);
    pthread_mutex_unlock(&c->mu);
    if (!ok)
        ctld_field_error(r, path, "tenant \"%s\" may use images from %s only (registries "
                         "in tenants.yaml), not from %s", spec->tenant,
                         allowed[0] ? allowed : "no registry", host);
    return ok;
}

/* An image from a registry its tenant may not use (registries in
 * tenants.yaml, docs/images.md): 400 naming the field. */
static bool image_ok(ctld *c, const ctld_caller *w, const ts_job_spec *spec, ctld_reply *r)
{
    /* a numeric user inside the image: within the tenant's rules (the
     * image's own User is checked by the agent, which reads the image) */
    int64_t cu, cg;
    if (spec->user[0] && ts_container_user_parse(spec->user, &cu, &cg)) {
        ctld_lock_reader(c);
        int k = ts_tenant_find(c->tenants, spec->tenant);
        bool ok = k < 0 || ts_tenant_container_user_ok(&c->tenants->t[k].identity,
                                                       w->unix_user[0] ? w->uid : -1, cu, cg);
        pthread_mutex_unlock(&c->mu);
        if (!ok) {
            ctld_field_error(r, "user", "tenant \"%s\" may not run as %s in an image: uid and "
                             "gid 0 need allow_root, another uid than yours one of its uid_range "
                             "(tenants.yaml)", spec->tenant, spec->user);
            return false;
        }
    }
    /* data images: from a registry the tenant may use, as the image */
    for (int i = 0; i < spec->ndata; i++) {
        ts_image_ref dref;
        if (ts_image_ref_parse(spec->data[i].ref, "data", &dref, NULL) != 0)
            continue; /* the spec's parse refused it already */
        char path[40];
        snprintf(path, sizeof path, "data[%d].ref", i);
        if (!registry_ok(c, spec, dref.host, path, r))
            return false;
    }
    if (!spec->image)
        return true;
    ts_image_ref ref;
    if (ts_image_ref_parse(spec->image, "image", &ref, NULL) != 0)
        return true; /* the spec's parse refused it already */
    if (!registry_ok(c, spec, ref.host, "image", r))
        return false;
    /* host folders: each under one the tenant may mount (mounts in tenants.yaml) */
    int bad = -1;
    ctld_lock_reader(c);
    int k = ts_tenant_find(c->tenants, spec->tenant);
    for (int i = 0; k >= 0 && bad < 0 && i < spec->nmounts; i++)
        if (!ts_tenant_mount_ok(&c->tenants->t[k], spec->mounts[i].host, spec->mounts[i].write))
            bad = i;
    pthread_mutex_unlock(&c->mu);
    if (bad >= 0) {
        char path[40];
        snprintf(path, sizeof path, "mounts[%d].host", bad);
        ctld_field_error(r, path, "tenant \"%s\" may not mount %s%s (mounts in tenants.yaml)",
                         spec->tenant, spec->mounts[bad].host,
                         spec->mounts[bad].write ? " read-write" : "");
        return false;
    }
    return true;
}

/* Every job a dependency names must exist and be visible to the caller
 * (its tenant's, unless admin): so only earlier jobs can be named and no
 * cycle can form. False (and a 400 or 503) otherwise. */
bool ctld_dependency_ok(ctld *c, const ctld_caller *w, const ts_job_spec *spec, ctld_reply *r)
{
    ts_dependency d;
    if (!spec->dependency || ts_dep_parse(spec->dependency, &d, NULL, 0) != 0)
        return true; /* none (the parser refused a bad one) */
    for (int i = 0; i < d.n; i++) {
        if (d.items[i].type == TS_DEP_SINGLETON)
            continue;
        ts_job_row row;
        ts_err err;
        int rc = ts_store_job_get(c->store, d.items[i].job, &row, &err);
        if (rc == TS_ENOENT) { /* a large array's element that is not a job yet */
            ctld_lock_reader(c);
            rc = ctld_array_lazy_row(c, d.items[i].job, &row);
            pthread_mutex_unlock(&c->mu);
            if (rc == TS_ENOMEM)
                ts_err_set(&err, rc, "out of memory");
        }
        bool seen = rc == 0 && ctld_sees_tenant(w, row.tenant);
        if (rc == 0)
            ts_job_row_fini(&row);
        if (rc != 0 && rc != TS_ENOENT) {
            ctld_reply_error(r, 503, "unavailable", "%s", err.msg);
            return false;
        }
        if (!seen) {
            ctld_field_error(r, "dependency", "job %lld does not exist (or is not visible to "
                             "token \"%s\")", (long long)d.items[i].job, w->name);
            return false;
        }
    }
    return true;
}

/* A large array's answer: its elements that are not jobs yet, ids[from..n),
 * appended to body ({"jobs":[...]}) as {"id", "name", "state"} each,
 * written as text (as many JSON objects would cost more memory than the
 * array itself). body is replaced; unchanged when out of memory. */
static void append_elements(ctld_reply *r, const int64_t *ids, int from, int n, const char *name)
{
    json_t *js = json_string(name);
    char *q = js ? json_dumps(js, JSON_ENCODE_ANY) : NULL; /* "NAME", escaped */
    json_decref(js);
    size_t blen = r->body ? strlen(r->body) : 0;
    size_t qlen = q ? strlen(q) : 0;
    size_t cap = blen + (size_t)(n - from) * (qlen + 64) + 1;
    char *out = q && blen >= 2 && strcmp(r->body + blen - 2, "]}") == 0 ? malloc(cap) : NULL;
    if (!out) {
        free(q);
        return;
    }
    size_t len = blen - 2;
    memcpy(out, r->body, len);
    q[qlen - 1] = '\0'; /* the name without its closing quote */
    for (int i = from; i < n; i++)
        len += (size_t)snprintf(out + len, cap - len, "%s{\"id\":%lld,\"name\":%s[%d]\","
                                "\"state\":\"pending\"}", len > 9 ? "," : "",
                                (long long)ids[i], q, i);
    memcpy(out + len, "]}", 3);
    free(q);
    free(r->body);
    r->body = out;
}

/* A spec that does not parse: 400 with every error as {path, reason}. */
static void reply_spec_errors(ctld_reply *r, const ts_spec_errors *errs)
{
    json_t *fields = json_array();
    for (int i = 0; i < errs->n; i++) {
        const char *m = errs->msg[i];
        const char *colon = strstr(m, ": ");
        json_array_append_new(
            fields, colon ? json_pack("{s:s%,s:s}", "path", m, (size_t)(colon - m), "reason",
                                      colon + 2)
                          : json_pack("{s:s,s:s}", "path", "", "reason", m));
    }
    char line[1024];
    ts_spec_errors_join(errs, line, sizeof line);
    ctld_reply_json(r, 400,
                    json_pack("{s:{s:s,s:s,s:o}}", "error", "code", "invalid", "message", line,
                              "fields", fields));
}

/* What the caller and the cluster allow of a parsed spec, before the store
 * is asked: the tenant, a Unix identity where tasks run on agents, host
 * networking, a negative nice, dedicated NICs, published ports and topology
 * levels. False: r answered (403 or 400 naming the field). */
static bool submit_allowed(ctld *c, const ctld_caller *w, const ts_job_spec *spec, ctld_reply *r)
{
    if (w->role != TS_ROLE_ADMIN && strcmp(spec->tenant, w->tenant) != 0) {
        ctld_reply_error(r, 403, "forbidden", "tenant: token \"%s\" may submit to tenant \"%s\" "
                         "only", w->name, w->tenant);
        return false;
    }
    /* tasks run as the submitter's mapped Unix identity, never as a name
     * taken from the token (docs/agent-tasks.md "User") */
    ctld_lock_reader(c);
    bool agents = ctld_has_agent_nodes(c);
    pthread_mutex_unlock(&c->mu);
    if (agents && !w->unix_user[0]) {
        ctld_reply_error(r, 403, "no_unix_identity", "identity: \"%s\" has no Unix identity "
                         "(unix_user and uid), so its jobs cannot run tasks on agent nodes; an "
                         "admin creates a token that has one (docs/api.md \"Tokens\")", w->name);
        return false;
    }
    /* the node's network instead of the tenant's overlay: where the tenant allows it */
    if (spec->host_network && c->cfg.net_isolation) {
        ctld_lock_reader(c);
        int k = ts_tenant_find(c->tenants, spec->tenant);
        bool ok = k >= 0 && c->tenants->t[k].identity.allow_host_network;
        pthread_mutex_unlock(&c->mu);
        if (!ok) {
            ctld_field_error(r, "network", "tenant \"%s\" does not allow host networking "
                             "(allow_host_network in tenants.yaml; docs/network.md)",
                             spec->tenant);
            return false;
        }
    }
    /* as Slurm: only the privileged raise a job above its class */
    if (spec->nice < 0 && w->role == TS_ROLE_USER) {
        ctld_reply_error(r, 403, "forbidden", "nice: %d raises the job above its class; a "
                         "user may give 0..%d, a negative one is for the tenant's admins",
                         spec->nice, TS_SPEC_NICE_MAX);
        return false;
    }
    /* NICs move into a task's namespace: only where tasks have one */
    if (spec->dedicated_nics && !c->cfg.net_isolation) {
        ctld_field_error(r, "network.nics", "dedicated NICs need a cluster that isolates "
                         "tenants (network.isolation: tenant in tesserad.yaml; docs/network.md)");
        return false;
    }
    /* published ports lead into a task's namespace: only where tasks have one */
    if (spec->npublish > 0 && !c->cfg.net_isolation) {
        ctld_field_error(r, "network.publish", "published ports need a cluster that isolates "
                         "tenants (network.isolation: tenant in tesserad.yaml; docs/network.md); "
                         "elsewhere a task's ports are its node's");
        return false;
    }
    /* only the cluster's publishable ports: never one a node's own service uses */
    for (int i = 0; i < spec->npublish; i++) {
        int p = spec->publish[i].port;
        if (p >= c->cfg.net_publish_lo && p <= c->cfg.net_publish_hi)
            continue;
        char path[40];
        snprintf(path, sizeof path, "network.publish[%d]", i);
        ctld_field_error(r, path, "%d/%s is outside the ports this cluster lets jobs publish, "
                         "%d-%d (network.publish_ports in tesserad.yaml; docs/network.md): the "
                         "others are left to the nodes' own services (ssh, the agent's ports)",
                         p, spec->publish[i].udp ? "udp" : "tcp", c->cfg.net_publish_lo,
                         c->cfg.net_publish_hi);
        return false;
    }
    /* a level the cluster lacks would wait forever: refuse it now */
    const char *bad_level = !ctld_level_known(c, spec->required_level)    ? "topology.required"
                            : !ctld_level_known(c, spec->preferred_level) ? "topology.preferred"
                                                                     : NULL;
    if (bad_level) {
        char have[256] = "node, any";
        for (int lv = 0; c->cluster->topo && lv < ts_topo_nlevels(c->cluster->topo) - 1; lv++) {
            const char *name = ts_topo_level_name(c->cluster->topo, lv);
            size_t hl = strlen(have);
            if (strcmp(name, "node") != 0 && strcmp(name, "any") != 0) /* said first */
                snprintf(have + hl, sizeof have - hl, ", %s", name);
        }
        ctld_field_error(r, bad_level, "the cluster has no topology level \"%s\" (it has %s)",
                    bad_level[9] == 'r' ? spec->required_level : spec->preferred_level, have);
        return false;
    }
    return true;
}

/* The answer to a submission the store took (or refused): 400 naming the
 * field, 429 past the tenant's queued cap, 413 past its queued specs' bytes,
 * 503, else the jobs (201, or 200
 * for an idempotent retry) with a large array's elements not yet jobs. */
static void reply_submitted(ctld_reply *r, int rc, const ts_err *e, bool existed, json_t *jobs,
                            const int64_t *ids, int nids, const char *name)
{
    if (rc == TS_EINVAL) {
        const char *colon = strstr(e->msg, ": ");
        ctld_reply_json(
            r, 400,
            json_pack("{s:{s:s,s:s,s:[{s:s%,s:s}]}}", "error", "code", "invalid", "message",
                      e->msg, "fields", "path", e->msg,
                      colon ? (size_t)(colon - e->msg) : (size_t)0, "reason",
                      colon ? colon + 2 : e->msg));
    } else if (rc == TS_EEXIST && existed) { /* the key's stored jobs carry another body */
        ctld_reply_error(r, 422, "idempotency_conflict", "%s", e->msg);
    } else if (rc == TS_ELIMIT) { /* the cap, checked with the jobs' other checks */
        ctld_reply_error(r, 429, "too_many_queued", "%s", e->msg);
    } else if (rc == TS_ENOSPC) { /* the tenant's budget of queued specs' bytes */
        ctld_reply_error(r, 413, "queued_specs_too_large", "%s", e->msg);
    } else if (rc != 0) {
        ctld_reply_error(r, 503, "unavailable", "%s", e->msg);
    } else {
        int have = (int)json_array_size(jobs);
        ctld_reply_json(r, existed ? 200 : 201, json_pack("{s:O}", "jobs", jobs));
        if (nids > have)
            append_elements(r, ids, have, nids, name);
    }
}

void ctld_jobs_submit(ctld *c, const ctld_request *rq, ctld_reply *r)
{
    const ctld_caller *w = rq->who;
    if (w->role == TS_ROLE_VIEWER) {
        ctld_reply_error(r, 403, "forbidden", "role viewer cannot submit jobs");
        return;
    }
    char idem[CTLD_IDEM_STORED_MAX];
    if (!ctld_idem_stored(rq->idem_key, idem, r))
        return;
    ts_job_spec *spec = NULL;
    ts_spec_errors errs;
    if (ts_spec_parse(rq->body, rq->len, &spec, &errs) != 0) {
        reply_spec_errors(r, &errs);
        return;
    }
    if (!submit_allowed(c, w, spec, r) || !ctld_dependency_ok(c, w, spec, r) ||
        !ctld_spec_secrets_ok(c, w, spec, r) || !image_ok(c, w, spec, r)) {
        ts_spec_free(spec);
        return;
    }
    char *json = ts_spec_to_json(spec);
    int n = spec->array_size > 0 ? spec->array_size : 1;
    char name[TS_STORE_NAME_MAX];
    snprintf(name, sizeof name, "%s", spec->name);
    int64_t *ids = malloc((size_t)n * sizeof *ids);
    int nids = 0;
    bool existed = false;
    ts_err err;
    json_t *jobs = json_array();
    int rc = json && ids && jobs ? ctld_submit(c, spec, json, w->name, w->unix_user,
                                               w->uid, idem, ids, &nids, &existed, jobs, &err)
                                 : ts_err_set(&err, TS_ENOMEM, "out of memory");
    ts_spec_free(spec);
    if (rc == 0 && existed &&
        !idem_same(c, ids, nids < CTLD_ARRAY_WINDOW ? nids : CTLD_ARRAY_WINDOW, json)) {
        ctld_reply_error(r, 422, "idempotency_conflict", "Idempotency-Key: already used by "
                         "token \"%s\" for another request body", w->name);
        free(json);
        json_decref(jobs);
        free(ids);
        return;
    }
    free(json);
    reply_submitted(r, rc, &err, existed, jobs, ids, nids, name);
    json_decref(jobs);
    free(ids);
}
