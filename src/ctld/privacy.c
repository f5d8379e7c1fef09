/*
 * privacy.c - who reads what inside a tenant (docs/secrets.md "Who sees
 * what").
 *
 * Tenants are apart already (routes.c: a job of another tenant is 404).
 * Inside one, a job's metadata (name, owner, state, resources, placement,
 * reasons, events) is the tenant's, but its content is its owner's: the
 * environment, the command (a batch script is part of it), the secrets it
 * names and its output. Admins read content too; the tenant's tenant-admins
 * only where the tenant's policy says so (tenants.yaml privacy:
 * {admins_see_jobs: true}, inherited from the nearest ancestor that sets
 * it). Everyone else gets the job with each withheld field replaced by the
 * string "hidden", and a list "hidden" naming them, so clients can say so.
 */
#include <stdlib.h>
#include <string.h>

#include "ctld/ctld.h"
#include "ctld/http.h"
#include "ctld/job_end.h"

/* The spec's fields that are content, in the order the list names them. */
static const char *const CONTENT_FIELDS[] = {"env", "command", "secrets"};
#define NCONTENT ((int)(sizeof CONTENT_FIELDS / sizeof CONTENT_FIELDS[0]))

/* Under c->mu: the tenant's privacy.admins_see_jobs, inheritance resolved. */
static bool admins_see_jobs(const ctld *c, const char *tenant)
{
    for (int t = ts_tenant_find(c->tenants, tenant); t >= 0; t = c->tenants->t[t].parent) {
        if (c->tenants->t[t].admins_see_jobs == TS_PRIVACY_YES)
            return true;
        if (c->tenants->t[t].admins_see_jobs == TS_PRIVACY_NO)
            return false;
    }
    return false;
}

bool ctld_sees_content(const ctld *c, const ctld_caller *w, const char *tenant,
                       const char *owner)
{
    if (w->role == TS_ROLE_ADMIN)
        return true;
    if (strcmp(w->tenant, tenant) != 0)
        return false; /* a cluster-viewer reads every tenant's metadata, no content */
    if (w->role == TS_ROLE_TENANT_ADMIN && admins_see_jobs(c, tenant))
        return true;
    return w->role != TS_ROLE_VIEWER && strcmp(w->name, owner) == 0;
}

char *ctld_privacy_cut_output(const char *s)
{
    const char *at = s ? strstr(s, CTLD_LAST_OUTPUT) : NULL;
    if (!at)
        return NULL;
    size_t keep = (size_t)(at - s) + strlen(CTLD_LAST_OUTPUT);
    char *out = malloc(keep + sizeof "hidden");
    if (out) {
        memcpy(out, s, keep);
        memcpy(out + keep, "hidden", sizeof "hidden");
    }
    return out;
}

/* obj's string member key without the output it quotes, if it quotes one. */
static void cut_member(json_t *obj, const char *key)
{
    char *cut = ctld_privacy_cut_output(json_string_value(json_object_get(obj, key)));
    if (cut)
        json_object_set_new(obj, key, json_string(cut));
    free(cut);
}

void ctld_privacy_redact_job(json_t *doc)
{
    /* a failed rank's last output line, quoted in why and its rank's end */
    cut_member(doc, "why");
    size_t r;
    json_t *rank;
    json_array_foreach(json_object_get(doc, "ranks"), r, rank)
        if (json_is_object(rank))
            cut_member(rank, "reason");
    json_t *spec = json_object_get(doc, "spec");
    json_t *hidden = json_array();
    for (int i = 0; json_is_object(spec) && i < NCONTENT; i++) {
        if (!json_object_get(spec, CONTENT_FIELDS[i]))
            continue;
        json_object_set_new(spec, CONTENT_FIELDS[i], json_string("hidden"));
        json_array_append_new(hidden, json_string(CONTENT_FIELDS[i]));
    }
    json_array_append_new(hidden, json_string("logs"));
    json_object_set_new(doc, "hidden", hidden);
}

bool ctld_event_is_content(const char *kind)
{
    /* a rank's last output, for GET .../logs; a step's command (steps.c) */
    return strcmp(kind, "output") == 0 || strcmp(kind, "step-started") == 0 ||
           strcmp(kind, "step-ended") == 0;
}
