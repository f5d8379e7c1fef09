/*
 * desired.c - the codec of the controller's whole answer to an agent's
 * register and sync (tessera/agent_proto.h; the schema's $defs/desired):
 * whether the node is drained, the tasks, each MIG GPU's layout, the image
 * to fetch ahead, the tenant networks' peers and services, the generation
 * and clock, the output requests and the sessions to open.
 *
 * The members are a table (DS_FIELDS, proto_table.h) in the order
 * tesserad writes them; each list of objects names its item's codec. The
 * tasks are left as their documents: each is decoded on its own
 * (desired_task.c), so one task outside the protocol is refused alone and
 * the others still run.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/proto_fields.h"
#include "proto/proto_table.h"
#include "tessera/agent_proto.h"

#define AT(m) offsetof(ts_desired, m)
#define LIST(m, one) PROTO_LIST(ts_desired, m, n##m, one)

/* ---- the lists ------------------------------------------------------------------- */

static int ds_slot_one(const json_t *m, const char *path, void *slot, ts_err *err)
{
    ts_desired_mig_slot *s = slot;
    int64_t profile = 0, start = 0;
    bool p;
    int rc = proto_need(m, path, "profile", err);
    rc = rc ? rc : proto_need(m, path, "start", err);
    rc = rc ? rc : proto_int(m, path, "profile", INT32_MIN, INT32_MAX, &profile, &p, err);
    rc = rc ? rc : proto_int(m, path, "start", INT32_MIN, INT32_MAX, &start, &p, err);
    s->profile = (int32_t)profile;
    s->start = (int32_t)start;
    return rc;
}

static int ds_mig_decode(const json_t *m, const char *path, void *slot, ts_err *err)
{
    ts_desired_mig *g = slot;
    int64_t gpu = 0;
    bool p;
    char sub[192];
    int rc = proto_need(m, path, "gpu", err);
    rc = rc ? rc : proto_need(m, path, "layout", err);
    rc = rc ? rc : proto_int(m, path, "gpu", INT32_MIN, INT32_MAX, &gpu, &p, err);
    g->gpu = (int32_t)gpu;
    proto_path(sub, sizeof sub, path, "layout");
    return rc ? rc : proto_objv_decode(json_object_get(m, "layout"), sub, sizeof *g->layout,
                                       (void **)&g->layout, &g->nlayout, ds_slot_one, err);
}

static json_t *ds_slot_encode(const void *slot)
{
    const ts_desired_mig_slot *s = slot;
    return json_pack("{s:i,s:i}", "profile", s->profile, "start", s->start);
}

static json_t *ds_mig_encode(const void *slot)
{
    const ts_desired_mig *g = slot;
    return json_pack("{s:i,s:o}", "gpu", g->gpu, "layout",
                     proto_objv_encode(g->layout, g->nlayout, sizeof *g->layout, ds_slot_encode));
}

static int ds_prefetch_decode(const json_t *m, const char *path, void *slot, ts_err *err)
{
    ts_desired_prefetch *f = slot;
    bool p;
    int rc = proto_need(m, path, "job", err);
    rc = rc ? rc : proto_need(m, path, "image", err);
    rc = rc ? rc : proto_int(m, path, "job", 1, INT64_MAX, &f->job, &p, err);
    rc = rc ? rc : proto_str(m, path, "image", &f->image, err);
    return rc ? rc : proto_int(m, path, "rate_bytes_s", 1, INT64_MAX, &f->rate_bytes_s, &p, err);
}

static json_t *ds_prefetch_encode(const void *slot)
{
    const ts_desired_prefetch *f = slot;
    json_t *o = json_pack("{s:I,s:s}", "job", (json_int_t)f->job, "image",
                          f->image ? f->image : "");
    if (o && f->rate_bytes_s > 0 &&
        json_object_set_new(o, "rate_bytes_s", json_integer(f->rate_bytes_s)) != 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static int ds_service_decode(const json_t *m, const char *path, void *slot, ts_err *err)
{
    ts_desired_tenant_service *s = slot;
    bool p;
    int rc = proto_need(m, path, "vni", err);
    rc = rc ? rc : proto_need(m, path, "to", err);
    rc = rc ? rc : proto_int(m, path, "vni", INT64_MIN, INT64_MAX, &s->vni, &p, err);
    return rc ? rc : proto_str(m, path, "to", &s->to, err);
}

static json_t *ds_service_encode(const void *slot)
{
    const ts_desired_tenant_service *s = slot;
    return json_pack("{s:I,s:s}", "vni", (json_int_t)s->vni, "to", s->to ? s->to : "");
}

static int ds_log_decode(const json_t *m, const char *path, void *slot, ts_err *err)
{
    static const char *const STREAMS[] = {NULL, "stdout", "stderr"};
    ts_desired_log *l = slot;
    int64_t rank = 0;
    int stream = 0;
    bool p;
    int rc = 0;
    static const char *const NEED[] = {"id", "job", "rank", "stream", "tail"};
    for (size_t i = 0; rc == 0 && i < sizeof NEED / sizeof *NEED; i++)
        rc = proto_need(m, path, NEED[i], err);
    rc = rc ? rc : proto_int(m, path, "id", INT64_MIN, INT64_MAX, &l->id, &p, err);
    rc = rc ? rc : proto_int(m, path, "job", 1, INT64_MAX, &l->job, &p, err);
    rc = rc ? rc : proto_int(m, path, "rank", 0, INT32_MAX, &rank, &p, err);
    rc = rc ? rc : proto_enum(m, path, "stream", STREAMS, 3, &stream, err);
    rc = rc ? rc : proto_int(m, path, "tail", 0, INT64_MAX, &l->tail, &p, err);
    rc = rc ? rc : proto_int(m, path, "offset", 0, INT64_MAX, &l->offset, &l->has_offset, err);
    l->rank = (int32_t)rank;
    l->is_stderr = stream == 2;
    return rc;
}

static json_t *ds_log_encode(const void *slot)
{
    const ts_desired_log *l = slot;
    json_t *o = json_pack("{s:I,s:I,s:i,s:s,s:I}", "id", (json_int_t)l->id, "job",
                          (json_int_t)l->job, "rank", l->rank, "stream",
                          l->is_stderr ? "stderr" : "stdout", "tail", (json_int_t)l->tail);
    if (o && l->has_offset && json_object_set_new(o, "offset", json_integer(l->offset)) != 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static const char *const SESSION_KINDS[] = {NULL, "attach", "exec", "forward"};

static int ds_session_decode(const json_t *m, const char *path, void *slot, ts_err *err)
{
    ts_desired_session *s = slot;
    int64_t x = 0;
    int kind = 0;
    bool p;
    char sub[192];
    int rc = 0;
    static const char *const NEED[] = {"kind", "rank", "tty", "job", "id", "secret"};
    for (size_t i = 0; rc == 0 && i < sizeof NEED / sizeof *NEED; i++)
        rc = proto_need(m, path, NEED[i], err);
    rc = rc ? rc : proto_enum(m, path, "kind", SESSION_KINDS, 4, &kind, err);
    s->kind = (enum ts_session_kind)kind;
    rc = rc ? rc : proto_int(m, path, "rank", 0, INT32_MAX, &x, &p, err);
    s->rank = (int32_t)x;
    if (rc == 0 && !json_is_boolean(json_object_get(m, "tty")))
        rc = ts_err_set(err, TS_EINVAL, "%s.tty: must be true or false", path);
    s->tty = json_is_true(json_object_get(m, "tty"));
    x = 0;
    rc = rc ? rc : proto_int(m, path, "port", 1, 65535, &x, &p, err);
    s->port = (int32_t)x;
    x = 0;
    rc = rc ? rc : proto_int(m, path, "rows", INT32_MIN, INT32_MAX, &x, &p, err);
    s->rows = (int32_t)x;
    x = 0;
    rc = rc ? rc : proto_int(m, path, "cols", INT32_MIN, INT32_MAX, &x, &p, err);
    s->cols = (int32_t)x;
    rc = rc ? rc : proto_int(m, path, "job", 1, INT64_MAX, &s->job, &p, err);
    rc = rc ? rc : proto_str(m, path, "id", &s->id, err);
    rc = rc ? rc : proto_str(m, path, "secret", &s->secret, err);
    s->has_command = json_object_get(m, "command") != NULL;
    proto_path(sub, sizeof sub, path, "command");
    if (rc == 0 && s->has_command)
        rc = proto_strv_decode(json_object_get(m, "command"), sub, &s->command, err);
    return rc;
}

/* The order tesserad wrote a session in: kind, rank, tty, command or port,
 * rows, cols, job, id, secret. */
static json_t *ds_session_encode(const void *slot)
{
    const ts_desired_session *s = slot;
    int k = (int)s->kind > 0 && (int)s->kind < 4 ? (int)s->kind : TS_SESSION_ATTACH;
    json_t *o = json_pack("{s:s,s:i,s:b}", "kind", SESSION_KINDS[k], "rank", s->rank, "tty",
                          s->tty);
    bool ok = o != NULL;
    if (ok && s->has_command)
        ok = json_object_set_new(o, "command", proto_strv_encode(&s->command)) == 0;
    if (ok && s->port > 0)
        ok = json_object_set_new(o, "port", json_integer(s->port)) == 0;
    if (ok && s->rows != 0)
        ok = json_object_set_new(o, "rows", json_integer(s->rows)) == 0;
    if (ok && s->cols != 0)
        ok = json_object_set_new(o, "cols", json_integer(s->cols)) == 0;
    ok = ok && json_object_set_new(o, "job", json_integer(s->job)) == 0 &&
         json_object_set_new(o, "id", json_string(s->id ? s->id : "")) == 0 &&
         json_object_set_new(o, "secret", json_string(s->secret ? s->secret : "")) == 0;
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* ---- the document ------------------------------------------------------------------ */

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
static const proto_field DS_FIELDS[TS_DS_NFIELDS] = {
    [TS_DS_DRAINED] = {"drained", PK_BOOL, AT(drained)},
    [TS_DS_LOST_AFTER_S] = {"lost_after_s", PK_POS, AT(lost_after_s)},
    [TS_DS_TASKS] = {"tasks", PK_DOCS, AT(tasks)},
    [TS_DS_MIG] = {"mig", LIST(mig, ds_mig)},
    [TS_DS_PREFETCH] = {"prefetch", LIST(prefetch, ds_prefetch)},
    [TS_DS_NET_PEERS] = {"net_peers", PK_STRV, AT(net_peers)},
    [TS_DS_NET_SERVICES] = {"net_services", PK_STRV, AT(net_services)},
    [TS_DS_NET_TENANT_SERVICES] = {"net_tenant_services",
                                   LIST(net_tenant_services, ds_service)},
    [TS_DS_GEN] = {"gen", PK_I64, AT(gen), 0, INT64_MAX},
    [TS_DS_NOW] = {"now", PK_NUM, AT(now)},
    [TS_DS_LOGS] = {"logs", LIST(logs, ds_log)},
    [TS_DS_SESSIONS] = {"sessions", LIST(sessions, ds_session)},
};
#pragma GCC diagnostic pop

void ts_desired_fini(ts_desired *d)
{
    for (int i = 0; d->mig && i < d->nmig; i++)
        free(d->mig[i].layout);
    for (int i = 0; d->sessions && i < d->nsessions; i++)
        free(d->sessions[i].command.v);
    free(d->mig);
    free(d->prefetch);
    free(d->net_peers.v);
    free(d->net_services.v);
    free(d->net_tenant_services);
    free(d->logs);
    free(d->sessions);
    memset(d, 0, sizeof *d);
}

int ts_desired_encode_into(const ts_desired *d, json_t *o)
{
    return proto_table_encode(o, DS_FIELDS, TS_DS_NFIELDS, d, d->present);
}

static void ds_fini(void *doc) { ts_desired_fini(doc); }

/* a member missing reads as absent (its bit clear): the schema test holds
 * tesserad to every required one, and the agent applies what it was given */
static const proto_msg DS_MSG = {DS_FIELDS, TS_DS_NFIELDS, 0, sizeof(ts_desired),
                                 offsetof(ts_desired, present), "answer", ds_fini};

json_t *ts_desired_encode(const ts_desired *d) { return proto_msg_encode(&DS_MSG, d); }

int ts_desired_decode(const json_t *o, ts_desired *d, ts_err *err)
{
    return proto_msg_decode(&DS_MSG, o, "", d, err);
}
