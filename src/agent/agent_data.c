/*
 * agent_data.c - a job's read-only data (model weights, data sets) on the
 * node: images pinned by digest, pulled into the node's image store with the
 * task's own image (agent_image.c), each one's files a read-only root there
 * (a mounted EROFS image where the node packs roots), shared by every task
 * that names the same digest.
 *
 * A container task sees each at the path its job gave, bound read-only; a
 * bare task reads the store's read-only copy. Either way TESSERA_DATA_<i>
 * (i: its index in the job's data list) names where the files are, so a
 * program reads the same variable in both. The task is a user of each data
 * image while it runs (so none is evicted under it), recorded in its meta so
 * an agent restarted meanwhile releases them when the task goes.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>

#include "agent/agent_internal.h"

bool agent_data_read(local_task *lt, const ts_desired_task *d, ts_image_ref *refs, char *why,
                     size_t n)
{
    lt->ndata = 0;
    if (d->ndata > TS_AGENT_DATA_MAX) {
        snprintf(why, n, "data: at most %d entries", TS_AGENT_DATA_MAX);
        return false;
    }
    for (int i = 0; i < d->ndata; i++) {
        const char *ref = d->data[i].ref, *path = d->data[i].path;
        char field[32];
        snprintf(field, sizeof field, "data[%d].ref", i);
        ts_err e;
        if (ts_image_ref_parse(ref, field, &refs[i], &e) != 0 || !refs[i].digest[0]) {
            snprintf(why, n, "%s: not a reference pinned by digest", field);
            return false;
        }
        if (path[0] != '/' || strlen(path) >= sizeof lt->data[i].path) {
            snprintf(why, n, "data[%d].path: not an absolute path", i);
            return false;
        }
        snprintf(lt->data[i].path, sizeof lt->data[i].path, "%s", path);
        lt->ndata++;
    }
    return true;
}

void agent_data_env(const local_task *lt, json_t *envj)
{
    bool container = lt->image_ready;
    for (int i = 0; lt->data_ready && i < lt->ndata; i++) {
        char kv[800];
        snprintf(kv, sizeof kv, "TESSERA_DATA_%d=%s", i,
                 container ? lt->data[i].path : lt->data[i].rootfs);
        json_array_append_new(envj, json_string(kv));
    }
}

size_t agent_data_binds(const local_task *lt, ts_bundle_mount *binds, size_t room)
{
    size_t nb = 0;
    for (int i = 0; lt->data_ready && i < lt->ndata && nb < room; i++)
        binds[nb++] = (ts_bundle_mount){lt->data[i].rootfs, lt->data[i].path, false};
    return nb;
}

void agent_data_use(ts_agent *a, const local_task *lt, const char *id, char *why, size_t n)
{
    for (int i = 0; lt->data_ready && i < lt->ndata && !why[0]; i++) {
        ts_err e;
        if (agent_image_use(&a->images, lt->data[i].digest, id, &e) != 0)
            snprintf(why, n, "data[%d]: %s", i, e.msg);
    }
}

void agent_data_meta_put(const local_task *lt, json_t *meta)
{
    if (!meta || !lt->data_ready || lt->ndata == 0)
        return;
    json_t *ds = json_array();
    for (int i = 0; i < lt->ndata; i++)
        json_array_append_new(ds, json_string(lt->data[i].digest));
    json_object_set_new(meta, "data_digests", ds);
}

void agent_data_meta_get(local_task *lt, json_t *meta)
{
    json_t *ds = json_object_get(meta, "data_digests");
    size_t i;
    json_t *d;
    lt->ndata = 0;
    json_array_foreach(ds, i, d) {
        const char *dg = json_string_value(d);
        if (lt->ndata == TS_AGENT_DATA_MAX || !dg || !ts_image_digest_ok(dg))
            continue;
        snprintf(lt->data[lt->ndata++].digest, sizeof lt->data[0].digest, "%s", dg);
    }
    lt->data_ready = lt->ndata > 0;
}

void agent_data_release(ts_agent *a, local_task *lt, const char *id)
{
    for (int i = 0; lt->data_ready && i < lt->ndata; i++)
        agent_image_release(&a->images, lt->data[i].digest, id);
    lt->data_ready = false;
}
