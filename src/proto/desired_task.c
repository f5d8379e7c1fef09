/*
 * desired_task.c - the codec of a desired task, one task in the
 * controller's answer "tasks" (tessera/agent_proto.h; the schema's
 * $defs/desired_task): what the agent is to run or stop, with everything it
 * needs to start it.
 *
 * The members are a table (DT_FIELDS: name, kind, place in the struct,
 * range; proto_table.h), in the order the encoder writes them, which is the
 * order tesserad wrote them by hand before; the flat kinds are read and
 * written by the table's one loop each, and the members no kind fits (the
 * action, a null uid, credentials with NUL bytes, interactive, net) by a
 * function of their own; the lists of objects (mounts, data, secrets) name
 * their item's codec. A task's
 * `present` mask says which members it carries, so a decode followed by an
 * encode gives the same document back.
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/proto_fields.h"
#include "proto/proto_table.h"
#include "tessera/agent_proto.h"

#define AT(m) offsetof(ts_desired_task, m)
#define ANY INT64_MIN, INT64_MAX
#define I32 INT32_MIN, INT32_MAX
#define NAT 0, INT64_MAX
#define NAT32 0, INT32_MAX
#define OBJ(f) PK_OBJ, 0, 0, 0, dt_##f##_decode, dt_##f##_encode
#define LIST(m, c, one) PROTO_LIST(ts_desired_task, m, c, one)

/* ---- the members no kind fits --------------------------------------------------------- */

static int dt_action_decode(const json_t *v, const char *path, void *base, ts_err *err)
{
    ts_desired_task *t = base;
    const char *s = json_string_value(v);
    if (s && strcmp(s, "run") == 0)
        t->action = TS_ACTION_RUN;
    else if (s && strcmp(s, "stop") == 0)
        t->action = TS_ACTION_STOP;
    else
        return ts_err_set(err, TS_EINVAL, "%s: must be one of run, stop", path);
    return 0;
}

static json_t *dt_action_encode(const void *base)
{
    const ts_desired_task *t = base;
    return json_string(t->action == TS_ACTION_STOP ? "stop" : "run");
}

static int dt_uid_decode(const json_t *v, const char *path, void *base, ts_err *err)
{
    ts_desired_task *t = base;
    if (json_is_null(v)) {
        t->uid_null = true;
        return 0;
    }
    if (!json_is_integer(v))
        return ts_err_set(err, TS_EINVAL, "%s: must be an integer", path);
    t->uid = json_integer_value(v);
    return 0;
}

static json_t *dt_uid_encode(const void *base)
{
    const ts_desired_task *t = base;
    return t->uid_null ? json_null() : json_integer(t->uid);
}

/* A string that may hold NUL bytes: its length is kept. */
static int dt_credentials_decode(const json_t *v, const char *path, void *base, ts_err *err)
{
    ts_desired_task *t = base;
    if (!json_is_string(v))
        return ts_err_set(err, TS_EINVAL, "%s: must be a string", path);
    t->image_credentials = json_string_value(v);
    t->image_credentials_len = json_string_length(v);
    return 0;
}

static json_t *dt_credentials_encode(const void *base)
{
    const ts_desired_task *t = base;
    return json_stringn(t->image_credentials ? t->image_credentials : "",
                        t->image_credentials_len);
}

/* ---- the objects ---------------------------------------------------------------------- */

static int dt_interactive_decode(const json_t *v, const char *path, void *base, ts_err *err)
{
    ts_desired_task *t = base;
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

static json_t *dt_interactive_encode(const void *base)
{
    const ts_desired_task *t = base;
    json_t *o = json_pack("{s:b}", "tty", t->interactive.tty);
    if (o && t->interactive.rows > 0)
        json_object_set_new(o, "rows", json_integer(t->interactive.rows));
    if (o && t->interactive.cols > 0)
        json_object_set_new(o, "cols", json_integer(t->interactive.cols));
    return o;
}

static int dt_mount_decode(const json_t *m, const char *path, void *slot, ts_err *err)
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

static json_t *dt_mount_encode(const void *slot)
{
    const ts_desired_mount *m = slot;
    return json_pack("{s:s,s:s,s:b}", "host", m->host, "path", m->path, "write", m->write);
}

static int dt_data_decode(const json_t *m, const char *path, void *slot, ts_err *err)
{
    ts_desired_data *d = slot;
    int rc = proto_need(m, path, "ref", err);
    rc = rc ? rc : proto_need(m, path, "path", err);
    rc = rc ? rc : proto_str(m, path, "ref", &d->ref, err);
    return rc ? rc : proto_str(m, path, "path", &d->path, err);
}

static json_t *dt_data_encode(const void *slot)
{
    const ts_desired_data *d = slot;
    return json_pack("{s:s,s:s}", "ref", d->ref, "path", d->path);
}

static int dt_secret_decode(const json_t *m, const char *path, void *slot, ts_err *err)
{
    ts_desired_secret *d = slot;
    int rc = proto_need(m, path, "value", err);
    rc = rc ? rc : proto_str(m, path, "env", &d->env, err);
    rc = rc ? rc : proto_str(m, path, "file", &d->file, err);
    rc = rc ? rc : proto_str(m, path, "value", &d->value, err);
    d->value_len = json_string_length(json_object_get(m, "value"));
    return rc;
}

static json_t *dt_secret_encode(const void *slot)
{
    const ts_desired_secret *s = slot;
    json_t *o = json_object();
    bool ok = o && (!s->env || json_object_set_new(o, "env", json_string(s->env)) == 0) &&
              (!s->file || json_object_set_new(o, "file", json_string(s->file)) == 0) &&
              json_object_set_new(o, "value",
                                  json_stringn(s->value ? s->value : "", s->value_len)) == 0;
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static int dt_net_decode(const json_t *v, const char *path, void *base, ts_err *err)
{
    ts_desired_task *t = base;
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
    rc = rc ? rc : proto_strv_decode(json_object_get(v, "peers"), sub, &t->net.peers, err);
    t->net.has_publish = json_object_get(v, "publish") != NULL;
    snprintf(sub, sizeof sub, "%s.publish", path);
    if (rc == 0 && t->net.has_publish)
        rc = proto_strv_decode(json_object_get(v, "publish"), sub, &t->net.publish, err);
    t->net.has_publish_from = json_object_get(v, "publish_from") != NULL;
    snprintf(sub, sizeof sub, "%s.publish_from", path);
    if (rc == 0 && t->net.has_publish_from)
        rc = proto_strv_decode(json_object_get(v, "publish_from"), sub, &t->net.publish_from,
                               err);
    return rc;
}

static json_t *dt_net_encode(const void *base)
{
    const ts_desired_task *t = base;
    json_t *o = json_pack("{s:I,s:s,s:i,s:o}", "vni", (json_int_t)t->net.vni, "addr",
                          t->net.addr ? t->net.addr : "", "prefix", t->net.prefix, "peers",
                          proto_strv_encode(&t->net.peers));
    if (o && t->net.mtu > 0)
        json_object_set_new(o, "mtu", json_integer(t->net.mtu));
    if (o && t->net.nics_dedicated)
        json_object_set_new(o, "nics", json_string("dedicated"));
    if (o && t->net.has_publish)
        json_object_set_new(o, "publish", proto_strv_encode(&t->net.publish));
    if (o && t->net.has_publish_from)
        json_object_set_new(o, "publish_from", proto_strv_encode(&t->net.publish_from));
    return o;
}

/* ---- the document ------------------------------------------------------------------ */

/* One line a member, indexed by enum ts_dt_field; the members a line leaves
 * out (a range, the object codecs) are zero, as C says, so clang's warning
 * about them is off for the table alone. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
static const proto_field DT_FIELDS[TS_DT_NFIELDS] = {
    [TS_DT_JOB] = {"job", PK_I64, AT(job), 1, INT64_MAX},
    [TS_DT_RANK] = {"rank", PK_I32, AT(rank), NAT32},
    [TS_DT_NAME] = {"name", PK_STR, AT(name)},
    [TS_DT_ACTION] = {"action", OBJ(action)},
    [TS_DT_GPUS] = {"gpus", PK_INTV, AT(gpus), NAT32},
    [TS_DT_GPU_MILLI] = {"gpu_milli", PK_I32, AT(gpu_milli), NAT32},
    [TS_DT_CPU_MILLI] = {"cpu_milli", PK_I64, AT(cpu_milli), NAT},
    [TS_DT_MEMORY_MIB] = {"memory_mib", PK_I64, AT(memory_mib), NAT},
    [TS_DT_MIG_PROFILE] = {"mig_profile", PK_I32, AT(mig_profile), I32},
    [TS_DT_MIG_START] = {"mig_start", PK_I32, AT(mig_start), I32},
    [TS_DT_COMMAND] = {"command", PK_STRV, AT(command)},
    [TS_DT_ENV] = {"env", PK_STRV, AT(env)},
    [TS_DT_WORKDIR] = {"workdir", PK_STR_NULL, AT(workdir)},
    [TS_DT_USER] = {"user", PK_STR, AT(user)},
    [TS_DT_WORLD_SIZE] = {"world_size", PK_I32, AT(world_size), 1, INT32_MAX},
    [TS_DT_LOCAL_RANK] = {"local_rank", PK_I32, AT(local_rank), NAT32},
    [TS_DT_MASTER_ADDR] = {"master_addr", PK_STR, AT(master_addr)},
    [TS_DT_TENANT] = {"tenant", PK_STR, AT(tenant)},
    [TS_DT_MASTER_PORT] = {"master_port", PK_I32, AT(master_port), 1, 65535},
    [TS_DT_GRACE_S] = {"grace_s", PK_NUM0, AT(grace_s)},
    [TS_DT_RUN] = {"run", PK_NUM, AT(run)},
    [TS_DT_INTERACTIVE] = {"interactive", OBJ(interactive)},
    [TS_DT_IMAGE] = {"image", PK_STR, AT(image)},
    [TS_DT_CONTAINER_USER] = {"container_user", PK_STR, AT(container_user)},
    [TS_DT_MOUNTS] = {"mounts", LIST(mounts, nmounts, dt_mount)},
    [TS_DT_DATA] = {"data", LIST(data, ndata, dt_data)},
    [TS_DT_HOLD] = {"hold", PK_TRUE, AT(hold)},
    [TS_DT_STEP_TOKEN] = {"step_token", PK_STR, AT(step_token)},
    [TS_DT_CHECKPOINT_DIR] = {"checkpoint_dir", PK_STR, AT(checkpoint_dir)},
    [TS_DT_SECRETS] = {"secrets", LIST(secrets, nsecrets, dt_secret)},
    [TS_DT_IMAGE_CREDENTIALS] = {"image_credentials", OBJ(credentials)},
    [TS_DT_SECRETS_ERROR] = {"secrets_error", PK_STR, AT(secrets_error)},
    [TS_DT_GPU_MEMORY_MIB] = {"gpu_memory_mib", PK_I64, AT(gpu_memory_mib), NAT},
    [TS_DT_NCCL_TC] = {"nccl_tc", PK_I32, AT(nccl_tc), I32},
    [TS_DT_NCCL_SL] = {"nccl_sl", PK_I32, AT(nccl_sl), I32},
    [TS_DT_UID] = {"uid", OBJ(uid)},
    [TS_DT_ALLOW_ROOT] = {"allow_root", PK_BOOL, AT(allow_root)},
    [TS_DT_UID_RANGE] = {"uid_range", PK_INTV, AT(uid_range), ANY},
    [TS_DT_NET] = {"net", OBJ(net)},
    [TS_DT_IB_PKEY] = {"ib_pkey", PK_I32, AT(ib_pkey), I32},
    [TS_DT_SIGNAL] = {"signal", PK_I32, AT(signal), 1, INT32_MAX},
    [TS_DT_TIME_LIMIT_S] = {"time_limit_s", PK_NUM, AT(time_limit_s)},
    [TS_DT_DEADLINE] = {"deadline", PK_NUM, AT(deadline)},
    [TS_DT_LIMIT_SIGNAL] = {"limit_signal", PK_I32, AT(limit_signal), I32},
    [TS_DT_LIMIT_GRACE_S] = {"limit_grace_s", PK_NUM, AT(limit_grace_s)},
    [TS_DT_HARD] = {"hard", PK_TRUE, AT(hard)},
    [TS_DT_IDLE_WARNING] = {"idle_warning", PK_STR, AT(idle_warning)},
    [TS_DT_STEP] = {"step", PK_I32, AT(step), NAT32},
    [TS_DT_TASK_RANK] = {"task_rank", PK_I32, AT(task_rank), NAT32},
};
#pragma GCC diagnostic pop

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

json_t *ts_desired_task_encode(const ts_desired_task *t)
{
    return proto_table_new(DT_FIELDS, TS_DT_NFIELDS, t, t->present);
}

/* The members of pick that o carries, job and rank required (and the
 * action, when picked); on error nothing is left allocated. */
static int dt_decode(const json_t *o, const char *where, uint64_t pick, ts_desired_task *t,
                     ts_err *err)
{
    memset(t, 0, sizeof *t);
    where = where ? where : "";
    if (!json_is_object(o))
        return ts_err_set(err, TS_EINVAL, "%s: must be an object", *where ? where : "task");
    int rc = proto_need(o, where, "job", err);
    rc = rc ? rc : proto_need(o, where, "rank", err);
    if (pick & TS_DT_BIT(TS_DT_ACTION))
        rc = rc ? rc : proto_need(o, where, "action", err);
    rc = rc ? rc : proto_table_pick(o, where, DT_FIELDS, TS_DT_NFIELDS, pick, t, &t->present, err);
    if (rc == 0 && (t->present & TS_DT_BIT(TS_DT_UID_RANGE)) && t->uid_range.n != 2)
        rc = ts_err_set(err, TS_EINVAL, "%s%suid_range: must be two integers (lowest, highest)",
                        where, *where ? "." : "");
    if (rc != 0)
        ts_desired_task_fini(t);
    return rc;
}

int ts_desired_task_decode(const json_t *o, const char *where, ts_desired_task *t, ts_err *err)
{
    return dt_decode(o, where, PROTO_ALL(TS_DT_NFIELDS), t, err);
}

int ts_desired_task_decode_id(const json_t *o, const char *where, ts_desired_task *t,
                              ts_err *err)
{
    return dt_decode(o, where, TS_DT_ID_BITS, t, err);
}
