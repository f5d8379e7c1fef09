/*
 * sync.c - the codec of an agent's register and sync bodies
 * (tessera/agent_proto.h; the schema's $defs/register_request and
 * $defs/sync_request): who the node is, its discovery (at registration),
 * the generation it holds, its tasks' reports, how long it waits, its
 * health, the MIG and hook errors, its prefetches, its image store and its
 * answers to output requests.
 *
 * One table (SY_FIELDS, proto_table.h) for both bodies, in the order the
 * agent writes them. The reports stay their documents, decoded one by one
 * (task_report.c), so one outside the protocol is left out alone; the
 * discovery and the health are typed documents of their own (discovery.c,
 * node_health.c).
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/proto_fields.h"
#include "proto/proto_table.h"
#include "tessera/agent_proto.h"

#define AT(m) offsetof(ts_sync, m)
#define LIST(m, one) PROTO_LIST(ts_sync, m, n##m, one)

/* ---- the lists ------------------------------------------------------------------- */

static const char *const PREFETCH_STATES[] = {NULL, "fetching", "ready", "failed"};

static int sy_prefetch_decode(const json_t *m, const char *path, void *slot, ts_err *err)
{
    ts_sync_prefetch *f = slot;
    int state = 0;
    bool p;
    int rc = proto_need(m, path, "job", err);
    rc = rc ? rc : proto_need(m, path, "state", err);
    rc = rc ? rc : proto_int(m, path, "job", 1, INT64_MAX, &f->job, &p, err);
    rc = rc ? rc : proto_enum(m, path, "state", PREFETCH_STATES, 4, &state, err);
    f->state = (enum ts_prefetch_state)state;
    return rc;
}

static json_t *sy_prefetch_encode(const void *slot)
{
    const ts_sync_prefetch *f = slot;
    int k = (int)f->state > 0 && (int)f->state < 4 ? (int)f->state : TS_PREFETCH_FAILED;
    return json_pack("{s:I,s:s}", "job", (json_int_t)f->job, "state", PREFETCH_STATES[k]);
}

static int sy_image_decode(const json_t *m, const char *path, void *slot, ts_err *err)
{
    ts_sync_image *im = slot;
    bool p;
    char sub[192];
    int rc = proto_need(m, path, "digest", err);
    rc = rc ? rc : proto_need(m, path, "refs", err);
    rc = rc ? rc : proto_need(m, path, "bytes", err);
    rc = rc ? rc : proto_str(m, path, "digest", &im->digest, err);
    rc = rc ? rc : proto_int(m, path, "bytes", 0, INT64_MAX, &im->bytes, &p, err);
    proto_path(sub, sizeof sub, path, "refs");
    return rc ? rc : proto_strv_decode(json_object_get(m, "refs"), sub, &im->refs, err);
}

static json_t *sy_image_encode(const void *slot)
{
    const ts_sync_image *im = slot;
    return json_pack("{s:s,s:o,s:I}", "digest", im->digest ? im->digest : "", "refs",
                     proto_strv_encode(&im->refs), "bytes", (json_int_t)im->bytes);
}

static int sy_log_decode(const json_t *m, const char *path, void *slot, ts_err *err)
{
    ts_sync_log *l = slot;
    int rc = proto_need(m, path, "id", err);
    rc = rc ? rc : proto_int(m, path, "id", INT64_MIN, INT64_MAX, &l->id, NULL, err);
    rc = rc ? rc : proto_str(m, path, "data", &l->data, err);
    l->data_len = l->data ? json_string_length(json_object_get(m, "data")) : 0;
    rc = rc ? rc : proto_int(m, path, "size", 0, INT64_MAX, &l->size, &l->has_size, err);
    rc = rc ? rc : proto_int(m, path, "offset", 0, INT64_MAX, &l->offset, &l->has_offset, err);
    rc = rc ? rc : proto_str(m, path, "note", &l->note, err);
    return rc ? rc : proto_str(m, path, "error", &l->error, err);
}

json_t *ts_sync_log_encode(const ts_sync_log *l)
{
    json_t *o = json_pack("{s:I}", "id", (json_int_t)l->id);
    bool ok = o != NULL;
    if (ok && l->data)
        ok = json_object_set_new(o, "data", json_stringn(l->data, l->data_len)) == 0;
    if (ok && l->has_size)
        ok = json_object_set_new(o, "size", json_integer(l->size)) == 0;
    if (ok && l->has_offset)
        ok = json_object_set_new(o, "offset", json_integer(l->offset)) == 0;
    if (ok && l->note)
        ok = json_object_set_new(o, "note", json_string(l->note)) == 0;
    if (ok && l->error)
        ok = json_object_set_new(o, "error", json_string(l->error)) == 0;
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *sy_log_encode(const void *slot)
{
    return ts_sync_log_encode(slot);
}

/* ---- the document ------------------------------------------------------------------ */

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
static const proto_field SY_FIELDS[TS_SY_NFIELDS] = {
    [TS_SY_NODE] = {"node", PK_STR, AT(node)},
    /* the discovery and the health are documents of their own; an agent
     * that has no discovery yet sends null */
    [TS_SY_DISCOVERY] = {"discovery", PK_DOC, AT(discovery), 1, .msg = &PROTO_DISCOVERY},
    [TS_SY_GEN] = {"gen", PK_I64, AT(gen), 0, INT64_MAX},
    [TS_SY_TASKS] = {"tasks", PK_DOCS, AT(tasks)},
    [TS_SY_WAIT_S] = {"wait_s", PK_NUM0, AT(wait_s)},
    [TS_SY_SEQ] = {"seq", PK_I64, AT(seq), 1, INT64_MAX},
    [TS_SY_HEALTH] = {"health", PK_DOC, AT(health), .msg = &PROTO_NODE_HEALTH},
    [TS_SY_MIG_ERROR] = {"mig_error", PK_STR, AT(mig_error)},
    [TS_SY_DRAIN] = {"drain", PK_STR, AT(drain)},
    [TS_SY_PREFETCH] = {"prefetch", LIST(prefetch, sy_prefetch)},
    [TS_SY_IMAGES] = {"images", LIST(images, sy_image)},
    [TS_SY_LOGS] = {"logs", LIST(logs, sy_log)},
    [TS_SY_AGENT] = {"agent", PK_STR, AT(agent)},
    [TS_SY_LEAVING] = {"leaving", PK_TRUE, AT(leaving)},
};
#pragma GCC diagnostic pop

void ts_sync_fini(ts_sync *s)
{
    if (s->discovery)
        ts_discovery_fini(s->discovery);
    if (s->health)
        ts_node_health_fini(s->health);
    free(s->discovery);
    free(s->health);
    for (int i = 0; s->images && i < s->nimages; i++)
        free(s->images[i].refs.v);
    free(s->prefetch);
    free(s->images);
    free(s->logs);
    memset(s, 0, sizeof *s);
}

static void sy_fini(void *doc) { ts_sync_fini(doc); }

/* no member required: the register and the sync bodies carry different ones */
static const proto_msg SY_MSG = {SY_FIELDS, TS_SY_NFIELDS, 0, sizeof(ts_sync),
                                 offsetof(ts_sync, present), "body", sy_fini};

json_t *ts_sync_encode(const ts_sync *s) { return proto_msg_encode(&SY_MSG, s); }

int ts_sync_decode(const json_t *o, ts_sync *s, ts_err *err)
{
    return proto_msg_decode(&SY_MSG, o, "", s, err);
}
