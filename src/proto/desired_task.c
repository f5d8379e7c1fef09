/*
 * desired_task.c - the codec of a desired task, one task in the
 * controller's answer "tasks" (tessera/agent_proto.h; the schema's
 * $defs/desired_task): what the agent is to run or stop, with everything it
 * needs to start it.
 *
 * The members are a table (DT_FIELDS: name, kind, place in the struct,
 * range), in the order the encoder writes them, which is the order tesserad
 * wrote them by hand before; the flat kinds are read and written by one
 * loop each, and the five objects and lists of objects (interactive,
 * mounts, data, secrets, net) by a function of their own. A task's
 * `present` mask says which members it carries, so a decode followed by an
 * encode gives the same document back.
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/proto_fields.h"
#include "tessera/agent_proto.h"

typedef enum {
    K_I64,      /* int64_t in lo..hi */
    K_I32,      /* int32_t in lo..hi */
    K_NUM,      /* double, any finite */
    K_NUM0,     /* double >= 0 */
    K_STR,      /* const char * */
    K_STR_NULL, /* const char *, or null (NULL) */
    K_BOOL,     /* bool */
    K_TRUE,     /* bool, `"const": true` */
    K_ACTION,   /* enum ts_desired_action */
    K_INTV,     /* ts_intv of integers in lo..hi */
    K_STRV,     /* ts_strv */
    K_UID,      /* int64_t or null (uid_null) */
    K_OBJ,      /* its own decode and encode */
    K_BYTES,    /* image_credentials: a string that may hold NUL bytes */
} dt_kind;

typedef struct dt_field {
    const char *name;
    dt_kind kind;
    size_t off;
    int64_t lo, hi;
    int (*decode)(const json_t *v, const char *path, ts_desired_task *t, ts_err *err);
    json_t *(*encode)(const ts_desired_task *t);
} dt_field;

static int dt_interactive_decode(const json_t *v, const char *path, ts_desired_task *t,
                                 ts_err *err);
static json_t *dt_interactive_encode(const ts_desired_task *t);
static int dt_mounts_decode(const json_t *v, const char *path, ts_desired_task *t, ts_err *err);
static json_t *dt_mounts_encode(const ts_desired_task *t);
static int dt_data_decode(const json_t *v, const char *path, ts_desired_task *t, ts_err *err);
static json_t *dt_data_encode(const ts_desired_task *t);
static int dt_secrets_decode(const json_t *v, const char *path, ts_desired_task *t, ts_err *err);
static json_t *dt_secrets_encode(const ts_desired_task *t);
static int dt_net_decode(const json_t *v, const char *path, ts_desired_task *t, ts_err *err);
static json_t *dt_net_encode(const ts_desired_task *t);

#define AT(m) offsetof(ts_desired_task, m)
#define ANY INT64_MIN, INT64_MAX
#define I32 INT32_MIN, INT32_MAX
#define NAT 0, INT64_MAX
#define NAT32 0, INT32_MAX
#define OBJ(f) 0, 0, dt_##f##_decode, dt_##f##_encode

/* One line a member, indexed by enum ts_dt_field; the members a line leaves
 * out (a range, the object codecs) are zero, as C says, so clang's warning
 * about them is off for the table alone. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
static const dt_field DT_FIELDS[TS_DT_NFIELDS] = {
    [TS_DT_JOB] = {"job", K_I64, AT(job), 1, INT64_MAX},
    [TS_DT_RANK] = {"rank", K_I32, AT(rank), NAT32},
    [TS_DT_NAME] = {"name", K_STR, AT(name)},
    [TS_DT_ACTION] = {"action", K_ACTION, AT(action)},
    [TS_DT_GPUS] = {"gpus", K_INTV, AT(gpus), NAT32},
    [TS_DT_GPU_MILLI] = {"gpu_milli", K_I32, AT(gpu_milli), NAT32},
    [TS_DT_CPU_MILLI] = {"cpu_milli", K_I64, AT(cpu_milli), NAT},
    [TS_DT_MEMORY_MIB] = {"memory_mib", K_I64, AT(memory_mib), NAT},
    [TS_DT_MIG_PROFILE] = {"mig_profile", K_I32, AT(mig_profile), I32},
    [TS_DT_MIG_START] = {"mig_start", K_I32, AT(mig_start), I32},
    [TS_DT_COMMAND] = {"command", K_STRV, AT(command)},
    [TS_DT_ENV] = {"env", K_STRV, AT(env)},
    [TS_DT_WORKDIR] = {"workdir", K_STR_NULL, AT(workdir)},
    [TS_DT_USER] = {"user", K_STR, AT(user)},
    [TS_DT_WORLD_SIZE] = {"world_size", K_I32, AT(world_size), 1, INT32_MAX},
    [TS_DT_LOCAL_RANK] = {"local_rank", K_I32, AT(local_rank), NAT32},
    [TS_DT_MASTER_ADDR] = {"master_addr", K_STR, AT(master_addr)},
    [TS_DT_TENANT] = {"tenant", K_STR, AT(tenant)},
    [TS_DT_MASTER_PORT] = {"master_port", K_I32, AT(master_port), 1, 65535},
    [TS_DT_GRACE_S] = {"grace_s", K_NUM0, AT(grace_s)},
    [TS_DT_RUN] = {"run", K_NUM, AT(run)},
    [TS_DT_INTERACTIVE] = {"interactive", K_OBJ, 0, OBJ(interactive)},
    [TS_DT_IMAGE] = {"image", K_STR, AT(image)},
    [TS_DT_CONTAINER_USER] = {"container_user", K_STR, AT(container_user)},
    [TS_DT_MOUNTS] = {"mounts", K_OBJ, 0, OBJ(mounts)},
    [TS_DT_DATA] = {"data", K_OBJ, 0, OBJ(data)},
    [TS_DT_HOLD] = {"hold", K_TRUE, AT(hold)},
    [TS_DT_STEP_TOKEN] = {"step_token", K_STR, AT(step_token)},
    [TS_DT_CHECKPOINT_DIR] = {"checkpoint_dir", K_STR, AT(checkpoint_dir)},
    [TS_DT_SECRETS] = {"secrets", K_OBJ, 0, OBJ(secrets)},
    [TS_DT_IMAGE_CREDENTIALS] = {"image_credentials", K_BYTES, AT(image_credentials)},
    [TS_DT_SECRETS_ERROR] = {"secrets_error", K_STR, AT(secrets_error)},
    [TS_DT_GPU_MEMORY_MIB] = {"gpu_memory_mib", K_I64, AT(gpu_memory_mib), NAT},
    [TS_DT_NCCL_TC] = {"nccl_tc", K_I32, AT(nccl_tc), I32},
    [TS_DT_NCCL_SL] = {"nccl_sl", K_I32, AT(nccl_sl), I32},
    [TS_DT_UID] = {"uid", K_UID, AT(uid), ANY},
    [TS_DT_ALLOW_ROOT] = {"allow_root", K_BOOL, AT(allow_root)},
    [TS_DT_UID_RANGE] = {"uid_range", K_INTV, AT(uid_range), ANY},
    [TS_DT_NET] = {"net", K_OBJ, 0, OBJ(net)},
    [TS_DT_IB_PKEY] = {"ib_pkey", K_I32, AT(ib_pkey), I32},
    [TS_DT_SIGNAL] = {"signal", K_I32, AT(signal), 1, INT32_MAX},
    [TS_DT_TIME_LIMIT_S] = {"time_limit_s", K_NUM, AT(time_limit_s)},
    [TS_DT_DEADLINE] = {"deadline", K_NUM, AT(deadline)},
    [TS_DT_LIMIT_SIGNAL] = {"limit_signal", K_I32, AT(limit_signal), I32},
    [TS_DT_LIMIT_GRACE_S] = {"limit_grace_s", K_NUM, AT(limit_grace_s)},
    [TS_DT_HARD] = {"hard", K_TRUE, AT(hard)},
    [TS_DT_IDLE_WARNING] = {"idle_warning", K_STR, AT(idle_warning)},
    [TS_DT_STEP] = {"step", K_I32, AT(step), NAT32},
    [TS_DT_TASK_RANK] = {"task_rank", K_I32, AT(task_rank), NAT32},
};
#pragma GCC diagnostic pop

static void dt_path(char *buf, size_t len, const char *where, const char *key)
{
    snprintf(buf, len, "%s%s%s", where, *where ? "." : "", key);
}

void ts_desired_task_fini(ts_desired_task *t)
{
    free(t->gpus.v);
    free(t->command.v);
    free(t->env.v);
    free(t->uid_range.v);
    free(t->mounts);
    free(t->data);
    free(t->secrets);
    free(t->net.peers.v);
    free(t->net.publish.v);
    free(t->net.publish_from.v);
    memset(t, 0, sizeof *t);
}

/* ---- lists ------------------------------------------------------------------------ */

static int dt_strv_decode(const json_t *v, const char *path, ts_strv *out, ts_err *err)
{
    if (!json_is_array(v))
        return ts_err_set(err, TS_EINVAL, "%s: must be a list of strings", path);
    size_t n = json_array_size(v);
    out->v = n ? calloc(n, sizeof *out->v) : NULL;
    if (n && !out->v)
        return ts_err_set(err, TS_ENOMEM, "%s: out of memory", path);
    for (size_t i = 0; i < n; i++)
        if (!(out->v[i] = json_string_value(json_array_get(v, i))))
            return ts_err_set(err, TS_EINVAL, "%s[%zu]: must be a string", path, i);
    out->n = (int)n;
    return 0;
}

static json_t *dt_strv_encode(const ts_strv *s)
{
    json_t *a = json_array();
    for (int i = 0; a && i < s->n; i++)
        if (json_array_append_new(a, json_string(s->v[i])) != 0) {
            json_decref(a);
            return NULL;
        }
    return a;
}

static int dt_intv_decode(const json_t *v, const char *path, const dt_field *f, ts_intv *out,
                          ts_err *err)
{
    if (!json_is_array(v))
        return ts_err_set(err, TS_EINVAL, "%s: must be a list of integers", path);
    size_t n = json_array_size(v);
    out->v = n ? calloc(n, sizeof *out->v) : NULL;
    if (n && !out->v)
        return ts_err_set(err, TS_ENOMEM, "%s: out of memory", path);
    for (size_t i = 0; i < n; i++) {
        const json_t *x = json_array_get(v, i);
        if (!json_is_integer(x) || json_integer_value(x) < f->lo || json_integer_value(x) > f->hi)
            return ts_err_set(err, TS_EINVAL, "%s[%zu]: must be an integer%s", path, i,
                              f->lo == 0 ? " >= 0" : "");
        out->v[i] = json_integer_value(x);
    }
    out->n = (int)n;
    return 0;
}

static json_t *dt_intv_encode(const ts_intv *s)
{
    json_t *a = json_array();
    for (int i = 0; a && i < s->n; i++)
        if (json_array_append_new(a, json_integer(s->v[i])) != 0) {
            json_decref(a);
            return NULL;
        }
    return a;
}

/* ---- the flat members ----------------------------------------------------------------- */

static int dt_decode_flat(const json_t *o, const char *where, const dt_field *f,
                          ts_desired_task *t, ts_err *err)
{
    const json_t *v = json_object_get(o, f->name);
    char path[160];
    dt_path(path, sizeof path, where, f->name);
    void *p = (char *)t + f->off;
    int64_t x = 0;
    int rc, act = 0;
    switch (f->kind) {
    case K_I64:
        return proto_int(o, where, f->name, f->lo, f->hi, (int64_t *)p, NULL, err);
    case K_I32:
        rc = proto_int(o, where, f->name, f->lo, f->hi, &x, NULL, err);
        *(int32_t *)p = (int32_t)x;
        return rc;
    case K_NUM:
        return proto_num(o, where, f->name, -INFINITY, INFINITY, (double *)p, NULL, err);
    case K_NUM0:
        return proto_num(o, where, f->name, 0, INFINITY, (double *)p, NULL, err);
    case K_STR_NULL:
        if (json_is_null(v))
            return 0;
        /* fall through */
    case K_STR:
        return proto_str(o, where, f->name, (const char **)p, err);
    case K_BOOL:
        if (!json_is_boolean(v))
            return ts_err_set(err, TS_EINVAL, "%s: must be true or false", path);
        *(bool *)p = json_is_true(v);
        return 0;
    case K_TRUE:
        return proto_true(o, where, f->name, (bool *)p, err);
    case K_ACTION: {
        static const char *const NAMES[] = {NULL, "run", "stop"};
        rc = proto_enum(o, where, f->name, NAMES, 3, &act, err);
        *(enum ts_desired_action *)p = (enum ts_desired_action)act;
        return rc;
    }
    case K_UID:
        if (json_is_null(v)) {
            t->uid_null = true;
            return 0;
        }
        return proto_int(o, where, f->name, f->lo, f->hi, (int64_t *)p, NULL, err);
    case K_INTV:
        return dt_intv_decode(v, path, f, (ts_intv *)p, err);
    case K_STRV:
        return dt_strv_decode(v, path, (ts_strv *)p, err);
    case K_OBJ:
        return f->decode(v, path, t, err);
    case K_BYTES:
        t->image_credentials_len = json_string_length(v);
        return proto_str(o, where, f->name, (const char **)p, err);
    }
    return 0;
}

static json_t *dt_encode_flat(const ts_desired_task *t, const dt_field *f)
{
    const void *p = (const char *)t + f->off;
    switch (f->kind) {
    case K_I64:
        return json_integer(*(const int64_t *)p);
    case K_I32:
        return json_integer(*(const int32_t *)p);
    case K_NUM:
    case K_NUM0:
        return json_real(*(const double *)p);
    case K_STR_NULL:
        if (!*(const char *const *)p)
            return json_null();
        /* fall through */
    case K_STR:
        return json_string(*(const char *const *)p ? *(const char *const *)p : "");
    case K_BOOL:
        return json_boolean(*(const bool *)p);
    case K_TRUE:
        return json_true();
    case K_ACTION:
        return json_string(*(const enum ts_desired_action *)p == TS_ACTION_STOP ? "stop" : "run");
    case K_UID:
        return t->uid_null ? json_null() : json_integer(*(const int64_t *)p);
    case K_INTV:
        return dt_intv_encode((const ts_intv *)p);
    case K_STRV:
        return dt_strv_encode((const ts_strv *)p);
    case K_OBJ:
        return f->encode(t);
    case K_BYTES:
        return json_stringn(t->image_credentials ? t->image_credentials : "",
                            t->image_credentials_len);
    }
    return NULL;
}

json_t *ts_desired_task_encode(const ts_desired_task *t)
{
    json_t *o = json_object();
    for (int f = 0; o && f < TS_DT_NFIELDS; f++) {
        if (!(t->present & TS_DT_BIT(f)))
            continue;
        json_t *v = dt_encode_flat(t, &DT_FIELDS[f]);
        if (!v || json_object_set_new(o, DT_FIELDS[f].name, v) != 0) {
            json_decref(o);
            return NULL;
        }
    }
    return o;
}

int ts_desired_task_decode(const json_t *o, const char *where, ts_desired_task *t, ts_err *err)
{
    memset(t, 0, sizeof *t);
    where = where ? where : "";
    if (!json_is_object(o))
        return ts_err_set(err, TS_EINVAL, "%s: must be an object", *where ? where : "task");
    int rc = proto_need(o, where, "job", err);
    rc = rc ? rc : proto_need(o, where, "rank", err);
    rc = rc ? rc : proto_need(o, where, "action", err);
    for (int f = 0; rc == 0 && f < TS_DT_NFIELDS; f++) {
        if (!json_object_get(o, DT_FIELDS[f].name))
            continue;
        t->present |= TS_DT_BIT(f);
        rc = dt_decode_flat(o, where, &DT_FIELDS[f], t, err);
    }
    if (rc == 0 && (t->present & TS_DT_BIT(TS_DT_UID_RANGE)) && t->uid_range.n != 2)
        rc = ts_err_set(err, TS_EINVAL, "%s%suid_range: must be two integers (lowest, highest)",
                        where, *where ? "." : "");
    if (rc != 0)
        ts_desired_task_fini(t);
    return rc;
}

/* ---- the objects ---------------------------------------------------------------------- */

static int dt_interactive_decode(const json_t *v, const char *path, ts_desired_task *t,
                                 ts_err *err)
{
    if (!json_is_object(v))
        return ts_err_set(err, TS_EINVAL, "%s: must be an object", path);
    int64_t rows = 0, cols = 0;
    bool p;
    int rc = proto_need(v, path, "tty", err);
    if (rc == 0 && !json_is_boolean(json_object_get(v, "tty")))
        rc = ts_err_set(err, TS_EINVAL, "%s.tty: must be true or false", path);
    t->interactive.tty = json_is_true(json_object_get(v, "tty"));
    rc = rc ? rc : proto_int(v, path, "rows", 1, INT32_MAX, &rows, &p, err);
    rc = rc ? rc : proto_int(v, path, "cols", 1, INT32_MAX, &cols, &p, err);
    t->interactive.rows = (int32_t)rows;
    t->interactive.cols = (int32_t)cols;
    return rc;
}

static json_t *dt_interactive_encode(const ts_desired_task *t)
{
    json_t *o = json_pack("{s:b}", "tty", t->interactive.tty);
    if (o && t->interactive.rows > 0)
        json_object_set_new(o, "rows", json_integer(t->interactive.rows));
    if (o && t->interactive.cols > 0)
        json_object_set_new(o, "cols", json_integer(t->interactive.cols));
    return o;
}

/* A list of objects: each item decoded by one() into slot i of an array of
 * `size`-byte items (*out, *n). */
static int dt_objv_decode(const json_t *v, const char *path, size_t size, void **out, int *n,
                          int (*one)(const json_t *item, const char *path, void *slot, ts_err *err),
                          ts_err *err)
{
    if (!json_is_array(v))
        return ts_err_set(err, TS_EINVAL, "%s: must be a list", path);
    size_t len = json_array_size(v);
    *out = len ? calloc(len, size) : NULL;
    if (len && !*out)
        return ts_err_set(err, TS_ENOMEM, "%s: out of memory", path);
    *n = (int)len;
    for (size_t i = 0; i < len; i++) {
        char sub[192];
        snprintf(sub, sizeof sub, "%s[%zu]", path, i);
        const json_t *item = json_array_get(v, i);
        if (!json_is_object(item))
            return ts_err_set(err, TS_EINVAL, "%s: must be an object", sub);
        int rc = one(item, sub, (char *)*out + i * size, err);
        if (rc != 0)
            return rc;
    }
    return 0;
}

static int dt_mount_one(const json_t *m, const char *path, void *slot, ts_err *err)
{
    ts_desired_mount *d = slot;
    int rc = proto_need(m, path, "host", err);
    rc = rc ? rc : proto_need(m, path, "path", err);
    rc = rc ? rc : proto_need(m, path, "write", err);
    rc = rc ? rc : proto_str(m, path, "host", &d->host, err);
    rc = rc ? rc : proto_str(m, path, "path", &d->path, err);
    if (rc == 0 && !json_is_boolean(json_object_get(m, "write")))
        rc = ts_err_set(err, TS_EINVAL, "%s.write: must be true or false", path);
    d->write = json_is_true(json_object_get(m, "write"));
    return rc;
}

static int dt_mounts_decode(const json_t *v, const char *path, ts_desired_task *t, ts_err *err)
{
    return dt_objv_decode(v, path, sizeof *t->mounts, (void **)&t->mounts, &t->nmounts,
                          dt_mount_one, err);
}

static json_t *dt_mounts_encode(const ts_desired_task *t)
{
    json_t *a = json_array();
    for (int i = 0; a && i < t->nmounts; i++)
        json_array_append_new(a, json_pack("{s:s,s:s,s:b}", "host", t->mounts[i].host, "path",
                                           t->mounts[i].path, "write", t->mounts[i].write));
    return a && (int)json_array_size(a) == t->nmounts ? a : (json_decref(a), NULL);
}

static int dt_data_one(const json_t *m, const char *path, void *slot, ts_err *err)
{
    ts_desired_data *d = slot;
    int rc = proto_need(m, path, "ref", err);
    rc = rc ? rc : proto_need(m, path, "path", err);
    rc = rc ? rc : proto_str(m, path, "ref", &d->ref, err);
    return rc ? rc : proto_str(m, path, "path", &d->path, err);
}

static int dt_data_decode(const json_t *v, const char *path, ts_desired_task *t, ts_err *err)
{
    return dt_objv_decode(v, path, sizeof *t->data, (void **)&t->data, &t->ndata, dt_data_one,
                          err);
}

static json_t *dt_data_encode(const ts_desired_task *t)
{
    json_t *a = json_array();
    for (int i = 0; a && i < t->ndata; i++)
        json_array_append_new(a, json_pack("{s:s,s:s}", "ref", t->data[i].ref, "path",
                                           t->data[i].path));
    return a && (int)json_array_size(a) == t->ndata ? a : (json_decref(a), NULL);
}

static int dt_secret_one(const json_t *m, const char *path, void *slot, ts_err *err)
{
    ts_desired_secret *d = slot;
    int rc = proto_need(m, path, "value", err);
    rc = rc ? rc : proto_str(m, path, "env", &d->env, err);
    rc = rc ? rc : proto_str(m, path, "file", &d->file, err);
    rc = rc ? rc : proto_str(m, path, "value", &d->value, err);
    d->value_len = json_string_length(json_object_get(m, "value"));
    return rc;
}

static int dt_secrets_decode(const json_t *v, const char *path, ts_desired_task *t, ts_err *err)
{
    return dt_objv_decode(v, path, sizeof *t->secrets, (void **)&t->secrets, &t->nsecrets,
                          dt_secret_one, err);
}

static json_t *dt_secrets_encode(const ts_desired_task *t)
{
    json_t *a = json_array();
    for (int i = 0; a && i < t->nsecrets; i++) {
        const ts_desired_secret *s = &t->secrets[i];
        json_t *o = json_object();
        if (o && s->env)
            json_object_set_new(o, "env", json_string(s->env));
        if (o && s->file)
            json_object_set_new(o, "file", json_string(s->file));
        if (o)
            json_object_set_new(o, "value", json_stringn(s->value ? s->value : "", s->value_len));
        json_array_append_new(a, o);
    }
    return a && (int)json_array_size(a) == t->nsecrets ? a : (json_decref(a), NULL);
}

static int dt_net_decode(const json_t *v, const char *path, ts_desired_task *t, ts_err *err)
{
    if (!json_is_object(v))
        return ts_err_set(err, TS_EINVAL, "%s: must be an object", path);
    int64_t x = 0;
    bool p;
    char sub[192];
    int rc = proto_need(v, path, "vni", err);
    rc = rc ? rc : proto_need(v, path, "addr", err);
    rc = rc ? rc : proto_need(v, path, "prefix", err);
    rc = rc ? rc : proto_need(v, path, "peers", err);
    rc = rc ? rc : proto_int(v, path, "vni", INT64_MIN, INT64_MAX, &t->net.vni, &p, err);
    rc = rc ? rc : proto_str(v, path, "addr", &t->net.addr, err);
    rc = rc ? rc : proto_int(v, path, "prefix", 1, 32, &x, &p, err);
    t->net.prefix = (int32_t)x;
    x = 0;
    rc = rc ? rc : proto_int(v, path, "mtu", 1, INT32_MAX, &x, &p, err);
    t->net.mtu = (int32_t)x;
    const json_t *nics = json_object_get(v, "nics");
    if (rc == 0 && nics && !(json_is_string(nics) && !strcmp(json_string_value(nics), "dedicated")))
        rc = ts_err_set(err, TS_EINVAL, "%s.nics: must be \"dedicated\" when present", path);
    t->net.nics_dedicated = nics != NULL;
    snprintf(sub, sizeof sub, "%s.peers", path);
    rc = rc ? rc : dt_strv_decode(json_object_get(v, "peers"), sub, &t->net.peers, err);
    t->net.has_publish = json_object_get(v, "publish") != NULL;
    snprintf(sub, sizeof sub, "%s.publish", path);
    if (rc == 0 && t->net.has_publish)
        rc = dt_strv_decode(json_object_get(v, "publish"), sub, &t->net.publish, err);
    t->net.has_publish_from = json_object_get(v, "publish_from") != NULL;
    snprintf(sub, sizeof sub, "%s.publish_from", path);
    if (rc == 0 && t->net.has_publish_from)
        rc = dt_strv_decode(json_object_get(v, "publish_from"), sub, &t->net.publish_from, err);
    return rc;
}

static json_t *dt_net_encode(const ts_desired_task *t)
{
    json_t *o = json_pack("{s:I,s:s,s:i,s:o}", "vni", (json_int_t)t->net.vni, "addr",
                          t->net.addr ? t->net.addr : "", "prefix", t->net.prefix, "peers",
                          dt_strv_encode(&t->net.peers));
    if (o && t->net.mtu > 0)
        json_object_set_new(o, "mtu", json_integer(t->net.mtu));
    if (o && t->net.nics_dedicated)
        json_object_set_new(o, "nics", json_string("dedicated"));
    if (o && t->net.has_publish)
        json_object_set_new(o, "publish", dt_strv_encode(&t->net.publish));
    if (o && t->net.has_publish_from)
        json_object_set_new(o, "publish_from", dt_strv_encode(&t->net.publish_from));
    return o;
}
