/*
 * openapi.c - the OpenAPI 3 description served at /v1/openapi.json and
 * printed by `tesserad --openapi` (docs/openapi.json is that output; a test
 * keeps the two equal). Built from one table of operations so the document
 * cannot drift from the routes' list.
 */
#include <string.h>

#include "ctld/ctld.h"

typedef struct op {
    const char *path, *method, *summary, *ok;
} op;

static const op OPS[] = {
    {"/v1/jobs", "post", "Submit a job spec (YAML or JSON); Idempotency-Key makes a retry safe "
     "(another body under the same key: 422; a tenant past its queued-jobs cap: 429)", "201"},
    {"/v1/jobs", "get", "List jobs (filters tenant, state, owner; cursor pagination)", "200"},
    {"/v1/jobs/{id}", "get", "Show a job", "200"},
    {"/v1/jobs/{id}/cancel", "post", "Cancel a job", "200"},
    {"/v1/jobs/{id}/hold", "post", "Hold a pending job", "200"},
    {"/v1/jobs/{id}/release", "post", "Release a held job", "200"},
    {"/v1/jobs/{id}/requeue", "post", "Requeue a running job", "200"},
    {"/v1/jobs/{id}/events", "get", "A job's events", "200"},
    {"/v1/jobs/{id}/logs", "get", "A task's output: live from its agent, else its last output",
     "200"},
    {"/v1/jobs/{id}/explain", "get", "Why a job waits: the scheduler's reason and numbers",
     "200"},
    {"/v1/arrays/{id}/cancel", "post", "Cancel every active element of the array whose id "
     "(its first element's) is {id}; 404 not_an_array when {id} is no array's", "200"},
    {"/v1/nodes", "get", "List nodes", "200"},
    {"/v1/nodes/{name}", "get", "Show a node (GPUs, MIG layout, jobs)", "200"},
    {"/v1/nodes/{name}/drain", "post", "Drain a node (admin)", "200"},
    {"/v1/nodes/{name}/resume", "post", "Resume a drained node (admin)", "200"},
    {"/v1/tenants", "get", "Tenants with guarantees, usage and fair share", "200"},
    {"/v1/tenants", "put", "Replace tenants and quotas (admin; tenants YAML)", "200"},
    {"/v1/usage", "get", "GPU-hours by tenant, tier and GPU model over [from, to)", "200"},
    {"/v1/acct", "get", "One accounting row per job touching [from, to) (filters tenant, owner, "
     "state; format json or csv; cursor pagination; a user sees its own jobs only)", "200"},
    {"/v1/tokens", "get", "List tokens visible to the caller", "200"},
    {"/v1/tokens", "post", "Create a token (admin; tenant-admin: user and viewer of its tenant); "
     "the secret is returned once", "201"},
    {"/v1/tokens/{name}", "delete", "Revoke a token (admin)", "204"},
    {"/v1/whoami", "get", "The caller: name, role, tenant, Unix identity, expiry (API token or "
     "OpenID Connect ID token)", "200"},
    {"/v1/secrets", "get", "List secrets: names, scopes and times, never values (a user: its "
     "own and its tenant's; tenant-admin and admin: every one of the tenant)", "200"},
    {"/v1/secrets/{name}", "put", "Set a secret {value, scope: user|tenant, tenant}: encrypted "
     "at rest, never returned (201 created, 200 replaced)", "201"},
    {"/v1/secrets/{name}", "delete", "Delete a secret (?scope=user|tenant)", "204"},
    {"/v1/secrets/events", "get", "The secrets' audit: every set and delete (admin: every "
     "tenant's or ?tenant=; tenant-admin: its tenant's; cursor pagination)", "200"},
    {"/v1/agent/register", "post", "A node agent registers its node (node credential)", "200"},
    {"/v1/agent/sync", "post",
     "A node agent reports what runs and its health; long-polls for the desired state", "200"},
    {"/healthz", "get", "Liveness", "200"},
    {"/readyz", "get", "Readiness: store open and scheduler running", "200"},
    {"/metrics", "get", "Prometheus metrics", "200"},
};

/* The Job document's states and how it ended (docs/api.md "Job"); the rest
 * of its fields are described there. */
static json_t *job_schemas(void)
{
    json_t *nint = json_pack("{s:s,s:b}", "type", "integer", "nullable", 1);
    json_t *rank = json_pack(
        "{s:s,s:{s:{s:s},s:{s:s},s:{s:s,s:[sssssss]},s:O,s:O,s:{s:s},s:{s:s}}}", "type",
        "object", "properties", "rank", "type", "integer", "node", "type", "string", "end",
        "type", "string", "enum", "exited", "signal", "oom", "timeout", "launch", "stopped",
        "lost", "exit_code", nint, "signal", nint, "oom_kills", "type", "integer", "reason",
        "type", "string");
    json_t *job = json_pack(
        "{s:s,s:{s:{s:s,s:[ssssssss]},s:{s:s,s:b},s:{s:s,s:b},s:O,s:O,s:{s:s,s:b,s:o}}}",
        "type", "object", "properties", "state", "type", "string", "enum", "pending", "held",
        "running", "stopping", "completed", "failed", "cancelled", "timeout", "reason", "type",
        "string", "nullable", 1, "why", "type", "string", "nullable", 1, "exit_code", nint,
        "signal", nint, "ranks", "type", "array", "nullable", 1, "items",
        json_pack("{s:s}", "$ref", "#/components/schemas/JobRank"));
    json_decref(nint);
    return json_pack("{s:o,s:o}", "Job", job, "JobRank", rank);
}

json_t *ctld_openapi(void)
{
    json_t *paths = json_object();
    for (size_t i = 0; i < sizeof OPS / sizeof OPS[0]; i++) {
        json_t *p = json_object_get(paths, OPS[i].path);
        if (!p) {
            p = json_object();
            json_object_set_new(paths, OPS[i].path, p);
        }
        json_t *params = json_array();
        if (strstr(OPS[i].path, "{id}"))
            json_array_append_new(params, json_pack("{s:s,s:s,s:b,s:{s:s}}", "name", "id", "in",
                                                    "path", "required", 1, "schema", "type",
                                                    "integer"));
        if (strstr(OPS[i].path, "{name}"))
            json_array_append_new(params, json_pack("{s:s,s:s,s:b,s:{s:s}}", "name", "name",
                                                    "in", "path", "required", 1, "schema",
                                                    "type", "string"));
        /* the limits of docs/api.md "Limits on input" */
        if (strcmp(OPS[i].path, "/v1/jobs") == 0 && strcmp(OPS[i].method, "post") == 0)
            json_array_append_new(params, json_pack("{s:s,s:s,s:b,s:{s:s,s:i,s:i,s:s}}", "name",
                                                    "Idempotency-Key", "in", "header",
                                                    "required", 0, "schema", "type", "string",
                                                    "minLength", 1, "maxLength", 255, "pattern",
                                                    "^[!-~]+$"));
        if (strncmp(OPS[i].path, "/v1/secrets", 11) == 0 && strcmp(OPS[i].method, "put") != 0)
            json_array_append_new(params, json_pack("{s:s,s:s,s:b,s:{s:s}}", "name", "tenant",
                                                    "in", "query", "required", 0, "schema",
                                                    "type", "string"));
        if (strcmp(OPS[i].path, "/v1/secrets/{name}") == 0 && strcmp(OPS[i].method, "delete") == 0)
            json_array_append_new(params, json_pack("{s:s,s:s,s:b,s:{s:s,s:[ss]}}", "name",
                                                    "scope", "in", "query", "required", 0,
                                                    "schema", "type", "string", "enum", "user",
                                                    "tenant"));
        if (strcmp(OPS[i].path, "/v1/acct") == 0)
            json_array_append_new(params, json_pack("{s:s,s:s,s:b,s:{s:s,s:[ss]}}", "name",
                                                    "format", "in", "query", "required", 0,
                                                    "schema", "type", "string", "enum", "json",
                                                    "csv"));
        if (strcmp(OPS[i].path, "/v1/usage") == 0 || strcmp(OPS[i].path, "/v1/acct") == 0)
            for (int k = 0; k < 2; k++)
                json_array_append_new(params, json_pack("{s:s,s:s,s:b,s:{s:s,s:i,s:f}}", "name",
                                                        k ? "to" : "from", "in", "query",
                                                        "required", 0, "schema", "type",
                                                        "number", "minimum", 0, "maximum",
                                                        1e11));
        if (strcmp(OPS[i].method, "get") == 0 &&
            (strcmp(OPS[i].path, "/v1/jobs") == 0 || strcmp(OPS[i].path, "/v1/acct") == 0 ||
             strstr(OPS[i].path, "/events")))
            json_array_append_new(params, json_pack("{s:s,s:s,s:b,s:{s:s,s:i,s:i}}", "name",
                                                    "limit", "in", "query", "required", 0,
                                                    "schema", "type", "integer", "minimum", 1,
                                                    "maximum", 1000));
        bool open = OPS[i].path[1] != 'v';
        json_t *o = json_pack("{s:s,s:o,s:{s:{s:s},s:{s:s}}}", "summary", OPS[i].summary,
                              "parameters", params, "responses", OPS[i].ok, "description", "OK",
                              "default", "description", "An error (docs/api.md)");
        if (!open)
            json_object_set_new(o, "security", json_pack("[{s:[]}]", "bearer"));
        json_object_set_new(p, OPS[i].method, o);
    }
    /* a job's document, where it is answered whole */
    json_t *one = json_object_get(json_object_get(paths, "/v1/jobs/{id}"), "get");
    json_object_set_new(json_object_get(json_object_get(one, "responses"), "200"), "content",
                        json_pack("{s:{s:{s:s,s:{s:{s:s}}}}}", "application/json", "schema",
                                  "type", "object", "properties", "job", "$ref",
                                  "#/components/schemas/Job"));
    return json_pack("{s:s,s:{s:s,s:s},s:o,s:{s:{s:{s:s,s:s}},s:o}}", "openapi", "3.0.3",
                     "info", "title", "Tessera controller API", "version", "1", "paths", paths,
                     "components", "securitySchemes", "bearer", "type", "http", "scheme",
                     "bearer", "schemas", job_schemas());
}
