/*
 * spec_secrets.c - the job spec's `secrets:` list (docs/job-spec.md
 * "secrets"): the names of secrets of the secret store (docs/secrets.md)
 * the task receives when it starts, each as an environment variable (by
 * default named after the secret) or as a file in the task's secrets
 * folder ($TESSERA_SECRETS_DIR, mode 0400). Only names are in the spec:
 * the values stay in the store, encrypted, until the agent starts a task.
 *
 *   secrets: [WANDB_API_KEY, {name: GCP_KEY, file: gcp.json},
 *             {name: HF, env: HF_TOKEN}]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/spec_scalar.h"
#include "api/spec_walk.h"

/* A file name in the secrets folder: 1..63 of A-Z a-z 0-9 . _ -, not "." or "..". */
static bool file_name_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n >= TS_SPEC_NAME_MAX || strcmp(s, ".") == 0 || strcmp(s, "..") == 0)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-", s[i]))
            return false;
    return true;
}

static bool secret_name(spec_parser *P, const yaml_node_t *n, const char *path, char *out)
{
    const char *s = spec_text(P, n, path);
    if (!s)
        return false;
    if (!api_spec_env_name_ok(s) || strlen(s) >= TS_SPEC_NAME_MAX) {
        spec_fail_got(P, n, path, "a secret's name (A-Z a-z 0-9 _, not starting with a digit, "
                      "under 64 characters)");
        return false;
    }
    snprintf(out, TS_SPEC_NAME_MAX, "%s", s);
    return true;
}

/* {name, env} or {name, file}: one of env and file at most. */
static bool secret_object(spec_parser *P, const yaml_node_t *n, const char *path,
                          ts_secret_ref *ref)
{
    static const char *const keys[] = {"name", "env", "file"};
    yaml_node_t *v[3];
    unsigned given;
    char sub[SPEC_PATH_MAX];
    if (!spec_map_fields(P, n, path, keys, 3, v, &given))
        return false;
    ts_yaml_pathf(sub, sizeof sub, "%s.name", path);
    if (!v[0]) {
        spec_fail(P, sub, "required");
        return false;
    }
    if (!secret_name(P, v[0], sub, ref->name))
        return false;
    if (v[1] && v[2]) {
        spec_fail(P, path, "give env or file, not both");
        return false;
    }
    ts_yaml_pathf(sub, sizeof sub, "%s.%s", path, v[2] ? "file" : "env");
    if (v[2]) {
        const char *f = spec_text(P, v[2], sub);
        if (f && !file_name_ok(f))
            spec_fail_got(P, v[2], sub, "a file name (1..63 of A-Z a-z 0-9 . _ -)");
        if (!f || !file_name_ok(f))
            return false;
        snprintf(ref->target, sizeof ref->target, "%s", f);
        ref->file = true;
        return true;
    }
    if (v[1])
        return secret_name(P, v[1], sub, ref->target);
    snprintf(ref->target, sizeof ref->target, "%s", ref->name);
    return true;
}

static void secret_item(spec_parser *P, yaml_node_t *it, const char *path)
{
    ts_job_spec *spec = P->spec;
    ts_secret_ref ref = {0};
    bool ok = it->type == YAML_MAPPING_NODE ? secret_object(P, it, path, &ref)
                                            : secret_name(P, it, path, ref.name);
    if (ok && it->type != YAML_MAPPING_NODE)
        snprintf(ref.target, sizeof ref.target, "%s", ref.name);
    for (int k = 0; ok && k < spec->nsecrets; k++)
        if (spec->secrets[k].file == ref.file && strcmp(spec->secrets[k].target, ref.target) == 0) {
            spec_fail(P, path, "%s \"%s\" is given by secrets[%d] already",
                      ref.file ? "file" : "variable", ref.target, k);
            ok = false;
        }
    size_t tl = strlen(ref.target);
    for (int k = 0; ok && !ref.file && k < spec->nenv; k++)
        if (strncmp(spec->env[k], ref.target, tl) == 0 && spec->env[k][tl] == '=') {
            spec_fail(P, path, "variable \"%s\" is in env too: give it once", ref.target);
            ok = false;
        }
    if (ok)
        spec->secrets[spec->nsecrets++] = ref;
}

const spec_list_def SPEC_SECRETS = {"secrets", "a list of secret names", "secrets",
                                    TS_SPEC_MAX_SECRETS, sizeof(ts_secret_ref),
                                    offsetof(ts_job_spec, secrets), secret_item};
