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
    if (!spec_map_need(P, n, path, keys, 2, 2, "{ref, path}", v))
        return false;
    char sub[SPEC_PATH_MAX + 16];
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
    return spec_mount_path(P, v[1], sub, true, d->path);
}

static void data_item(spec_parser *P, yaml_node_t *it, const char *path)
{
    ts_job_spec *spec = P->spec;
    ts_spec_data d;
    memset(&d, 0, sizeof d);
    if (!one_data(P, it, path, &d))
        return;
    bool twice = false;
    for (int k = 0; !twice && k < spec->ndata; k++)
        twice = strcmp(spec->data[k].path, d.path) == 0;
    for (int k = 0; !twice && k < spec->nmounts; k++)
        twice = strcmp(spec->mounts[k].path, d.path) == 0;
    if (twice) {
        char sub[SPEC_PATH_MAX + 8];
        snprintf(sub, sizeof sub, "%s.path", path);
        spec_fail(P, sub, "\"%s\" is mounted twice (data or mounts)", d.path);
        return;
    }
    spec->data[spec->ndata++] = d;
}

const spec_list_def SPEC_DATA = {"data", "a list of {ref, path}", "entries", TS_SPEC_MAX_DATA,
                                 sizeof(ts_spec_data), offsetof(ts_job_spec, data), data_item};
