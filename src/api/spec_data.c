/*
 * spec_data.c - a job's `data` (docs/images.md "Model weights and data
 * sets"): read-only files its tasks read, each an image in a registry pinned
 * by digest, whose layers hold the files:
 *
 *   data: [{ref: registry.example:5000/models/llama@sha256:<64 hex>, path: /models/llama}]
 *
 * Checked here for form: a reference with its digest (what is read is fixed
 * at submission: a tag could change under a running gang), a clean absolute
 * path not the runtime's, no path twice nor one that `mounts` uses. Whether
 * the tenant may use the registry is the controller's question, as for
 * `image`.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/spec_walk.h"
#include "tessera/image_ref.h"
#include "tessera/tenant.h"

static bool one_data(spec_parser *P, const yaml_node_t *n, const char *path, ts_spec_data *d)
{
    static const char *const keys[] = {"ref", "path"};
    yaml_node_t *v[2];
    unsigned given;
    if (!spec_map_fields(P, n, path, keys, 2, v, &given)) {
        spec_fail_got(P, n, path, "{ref, path}");
        return false;
    }
    char sub[SPEC_PATH_MAX + 16];
    for (int k = 0; k < 2; k++) {
        snprintf(sub, sizeof sub, "%s.%s", path, keys[k]);
        if (!v[k]) {
            spec_fail(P, sub, "required");
            return false;
        }
    }
    snprintf(sub, sizeof sub, "%s.ref", path);
    const char *ref = spec_text(P, v[0], sub);
    if (!ref)
        return false;
    ts_image_ref r;
    ts_err e = {0};
    if (ts_image_ref_parse(ref, sub, &r, &e) != 0) {
        spec_fail(P, sub, "%s", e.msg + strlen(sub) + 2);
        return false;
    }
    if (!r.digest[0]) {
        spec_fail_got(P, v[0], sub, "a reference pinned by digest: host[:port]/repo@sha256:<64 "
                      "hex digits>");
        return false;
    }
    snprintf(d->ref, sizeof d->ref, "%s", ref);
    snprintf(sub, sizeof sub, "%s.path", path);
    const char *p = spec_text(P, v[1], sub);
    if (!p)
        return false;
    if (!ts_mount_path_ok(p)) {
        spec_fail_got(P, v[1], sub, "an absolute path without . or .. components, under 256 "
                      "bytes");
        return false;
    }
    if (spec_path_reserved(p)) {
        spec_fail(P, sub, "\"%s\" is the runtime's (/, /proc, /sys, /dev)", p);
        return false;
    }
    snprintf(d->path, sizeof d->path, "%s", p);
    return true;
}

void spec_walk_data(spec_parser *P, const yaml_node_t *seq)
{
    ts_job_spec *spec = P->spec;
    void *items;
    ptrdiff_t n = spec_list_alloc(P, seq, "data", "a list of {ref, path}", "entries",
                                  TS_SPEC_MAX_DATA, sizeof *spec->data, &items);
    if (n < 0)
        return;
    spec->data = items;
    char path[SPEC_PATH_MAX];
    for (ptrdiff_t i = 0; i < n; i++) {
        snprintf(path, sizeof path, "data[%td]", i);
        bool reused;
        yaml_node_t *it = spec_child(P, seq->data.sequence.items.start[i], path, &reused);
        ts_spec_data d;
        memset(&d, 0, sizeof d);
        if (!it || !one_data(P, it, path, &d))
            continue;
        bool twice = false;
        for (int k = 0; !twice && k < spec->ndata; k++)
            twice = strcmp(spec->data[k].path, d.path) == 0;
        for (int k = 0; !twice && k < spec->nmounts; k++)
            twice = strcmp(spec->mounts[k].path, d.path) == 0;
        if (twice) {
            snprintf(path, sizeof path, "data[%td].path", i);
            spec_fail(P, path, "\"%s\" is mounted twice (data or mounts)", d.path);
            continue;
        }
        spec->data[spec->ndata++] = d;
    }
}
