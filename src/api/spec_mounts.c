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

bool spec_path_reserved(const char *p)
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

static bool one_mount(spec_parser *P, const yaml_node_t *n, const char *path, ts_spec_mount *m)
{
    static const char *const keys[] = {"host", "path", "write"};
    yaml_node_t *v[3];
    unsigned given;
    if (!spec_map_fields(P, n, path, keys, 3, v, &given)) {
        spec_fail_got(P, n, path, "{host, path, write}");
        return false;
    }
    char sub[SPEC_PATH_MAX + 16];
    for (int k = 0; k < 2; k++) {
        snprintf(sub, sizeof sub, "%s.%s", path, keys[k]);
        if (!v[k]) {
            spec_fail(P, sub, "required");
            return false;
        }
        const char *s = spec_text(P, v[k], sub);
        if (!s)
            return false;
        if (!ts_mount_path_ok(s)) {
            spec_fail_got(P, v[k], sub, "an absolute path without . or .. components, "
                          "under 256 bytes");
            return false;
        }
        if (k == 1 && spec_path_reserved(s)) {
            spec_fail(P, sub, "\"%s\" is the runtime's (/, /proc, /sys, /dev)", s);
            return false;
        }
        snprintf(k == 0 ? m->host : m->path, TS_MOUNT_PATH_MAX, "%s", s);
    }
    snprintf(sub, sizeof sub, "%s.write", path);
    return !v[2] || spec_bool(P, v[2], sub, &m->write);
}

void spec_walk_mounts(spec_parser *P, const yaml_node_t *seq)
{
    ts_job_spec *spec = P->spec;
    void *items;
    ptrdiff_t n = spec_list_alloc(P, seq, "mounts", "a list of {host, path, write}", "mounts",
                                  TS_SPEC_MAX_MOUNTS, sizeof *spec->mounts, &items);
    if (n < 0)
        return;
    spec->mounts = items;
    char path[SPEC_PATH_MAX];
    for (ptrdiff_t i = 0; i < n; i++) {
        snprintf(path, sizeof path, "mounts[%td]", i);
        bool reused;
        yaml_node_t *it = spec_child(P, seq->data.sequence.items.start[i], path, &reused);
        ts_spec_mount m = {0};
        if (!it || !one_mount(P, it, path, &m))
            continue;
        for (int k = 0; k < spec->nmounts; k++)
            if (strcmp(spec->mounts[k].path, m.path) == 0) {
                snprintf(path, sizeof path, "mounts[%td].path", i);
                spec_fail(P, path, "\"%s\" is mounted twice", m.path);
            }
        spec->mounts[spec->nmounts++] = m;
    }
}
