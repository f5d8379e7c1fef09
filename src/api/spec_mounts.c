/*
 * spec_mounts.c - a job's `mounts` (docs/images.md): host folders bound into
 * its image, read-only unless `write: true`:
 *
 *   mounts: [{host: /data/shared, path: /data}, {host: /scratch/a, path: /scratch, write: true}]
 *
 * Checked here for form only (absolute, clean paths; not into /proc, /sys or
 * /dev; no path twice); whether the tenant may mount them is the
 * controller's question (tenants.yaml `mounts`), at submission.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/spec_walk.h"
#include "tessera/tenant.h"

static bool spec_path_reserved(const char *p)
{
    static const char *const R[] = {"/proc", "/sys", "/dev"};
    if (strcmp(p, "/") == 0)
        return true;
    for (size_t i = 0; i < sizeof R / sizeof R[0]; i++) {
        size_t n = strlen(R[i]);
        if (strncmp(p, R[i], n) == 0 && (p[n] == '\0' || p[n] == '/'))
            return true;
    }
    return false;
}

bool spec_mount_path(spec_parser *P, const yaml_node_t *v, const char *sub, bool in_image,
                     char out[256])
{
    const char *s = spec_text(P, v, sub);
    if (!s)
        return false;
    if (!ts_mount_path_ok(s)) {
        spec_fail_got(P, v, sub, "an absolute path without . or .. components, under 256 bytes");
        return false;
    }
    if (in_image && spec_path_reserved(s)) {
        spec_fail(P, sub, "\"%s\" is the runtime's (/, /proc, /sys, /dev)", s);
        return false;
    }
    snprintf(out, 256, "%s", s);
    return true;
}

static bool one_mount(spec_parser *P, const yaml_node_t *n, const char *path, ts_spec_mount *m)
{
    static const char *const keys[] = {"host", "path", "write"};
    yaml_node_t *v[3];
    if (!spec_map_need(P, n, path, keys, 3, 2, "{host, path, write}", v))
        return false;
    char sub[SPEC_PATH_MAX + 16];
    for (int k = 0; k < 2; k++) {
        snprintf(sub, sizeof sub, "%s.%s", path, keys[k]);
        if (!spec_mount_path(P, v[k], sub, k == 1, k == 0 ? m->host : m->path))
            return false;
    }
    snprintf(sub, sizeof sub, "%s.write", path);
    return !v[2] || spec_bool(P, v[2], sub, &m->write);
}

static void mount_item(spec_parser *P, yaml_node_t *it, const char *path)
{
    ts_job_spec *spec = P->spec;
    ts_spec_mount m = {0};
    if (!one_mount(P, it, path, &m))
        return;
    for (int k = 0; k < spec->nmounts; k++)
        if (strcmp(spec->mounts[k].path, m.path) == 0) {
            char sub[SPEC_PATH_MAX + 8];
            snprintf(sub, sizeof sub, "%s.path", path);
            spec_fail(P, sub, "\"%s\" is mounted twice", m.path);
        }
    spec->mounts[spec->nmounts++] = m;
}

const spec_list_def SPEC_MOUNTS = {"mounts", "a list of {host, path, write}", "mounts",
                                   TS_SPEC_MAX_MOUNTS, sizeof(ts_spec_mount),
                                   offsetof(ts_job_spec, mounts), mount_item};
