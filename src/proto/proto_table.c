/*
 * proto_table.c - the one decode loop and the one encode loop of the agent
 * protocol's member tables (proto_table.h), and the lists they share. The
 * documents (desired_task.c, desired.c) hold only their tables and the
 * members no kind fits.
 */
#include "proto/proto_table.h"

#include <math.h>
#include <string.h>
#include <stdio.h>
#include <stdlib.h>

#include "proto/proto_fields.h"

static uint64_t *proto_msg_present(const proto_msg *m, void *doc)
{
    return (uint64_t *)((char *)doc + m->present_off);
}

void proto_path(char *buf, size_t len, const char *where, const char *key)
{
    snprintf(buf, len, "%s%s%s", where ? where : "", where && *where ? "." : "", key);
}

/* ---- lists ------------------------------------------------------------------------ */

int proto_list_room(const json_t *v, const char *path, const char *what, size_t size,
                    void **room, size_t *n, ts_err *err)
{
    *room = NULL;
    *n = 0;
    if (!json_is_array(v))
        return ts_err_set(err, TS_EINVAL, "%s: must be %s", path, what);
    size_t len = json_array_size(v);
    if (len && !(*room = calloc(len, size)))
        return ts_err_set(err, TS_ENOMEM, "%s: out of memory", path);
    *n = len;
    return 0;
}

int proto_strv_decode(const json_t *v, const char *path, ts_strv *out, ts_err *err)
{
    size_t n;
    int rc = proto_list_room(v, path, "a list of strings", sizeof *out->v, (void **)&out->v, &n,
                             err);
    if (rc != 0)
        return rc;
    for (size_t i = 0; i < n; i++)
        if (!(out->v[i] = json_string_value(json_array_get(v, i))))
            return ts_err_set(err, TS_EINVAL, "%s[%zu]: must be a string", path, i);
    out->n = (int)n;
    return 0;
}

int proto_intv_decode(const json_t *v, const char *path, int64_t lo, int64_t hi, ts_intv *out,
                      ts_err *err)
{
    size_t n;
    int rc = proto_list_room(v, path, "a list of integers", sizeof *out->v, (void **)&out->v, &n,
                             err);
    if (rc != 0)
        return rc;
    for (size_t i = 0; i < n; i++) {
        const json_t *x = json_array_get(v, i);
        if (!json_is_integer(x) || json_integer_value(x) < lo || json_integer_value(x) > hi)
            return ts_err_set(err, TS_EINVAL, "%s[%zu]: must be an integer%s", path, i,
                              lo == 0 ? " >= 0" : "");
        out->v[i] = json_integer_value(x);
    }
    out->n = (int)n;
    return 0;
}

typedef int (*proto_item_fn)(const json_t *item, const char *path, void *slot, ts_err *err);

/* A list of objects, each by one() or, without one, by rows's table
 * (every line required). */
static int proto_list_decode(const json_t *v, const char *path, size_t size, void **out, int *n,
                             proto_item_fn one, const proto_field *rows, ts_err *err)
{
    size_t len;
    int rc = proto_list_room(v, path, "a list", size, out, &len, err);
    if (rc != 0)
        return rc;
    *n = (int)len;
    for (size_t i = 0; i < len; i++) {
        char sub[192];
        snprintf(sub, sizeof sub, "%s[%zu]", path, i);
        const json_t *item = json_array_get(v, i);
        if (!json_is_object(item))
            return ts_err_set(err, TS_EINVAL, "%s: must be an object", sub);
        void *slot = (char *)*out + i * size;
        const proto_msg *m = rows ? rows->msg : NULL;
        rc = one ? one(item, sub, slot, err)
             : m ? proto_table_need(item, sub, m->fields, m->n, m->need, slot,
                                    proto_msg_present(m, slot), err)
                 : proto_table_need(item, sub, rows->sub, rows->nsub, PROTO_ALL(rows->nsub), slot,
                                    NULL, err);
        if (rc != 0)
            return rc;
    }
    return 0;
}

int proto_objv_decode(const json_t *v, const char *path, size_t size, void **out, int *n,
                      proto_item_fn one, ts_err *err)
{
    return proto_list_decode(v, path, size, out, n, one, NULL, err);
}

static json_t *proto_list_encode(const void *v, int n, size_t size, json_t *(*one)(const void *),
                                 const proto_field *rows)
{
    json_t *a = json_array();
    for (int i = 0; a && i < n; i++) {
        const void *slot = (const char *)v + (size_t)i * size;
        const proto_msg *m = rows ? rows->msg : NULL;
        json_t *item = one ? one(slot)
                       : m ? proto_msg_encode(m, slot)
                           : proto_table_new(rows->sub, rows->nsub, slot, PROTO_ALL(rows->nsub));
        if (json_array_append_new(a, item) != 0) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

static json_t *str_item(const void *slot) { return json_string(*(const char *const *)slot); }

static json_t *int_item(const void *slot) { return json_integer(*(const int64_t *)slot); }

json_t *proto_strv_encode(const ts_strv *s)
{
    return proto_list_encode(s->v, s->n, sizeof *s->v, str_item, NULL);
}

json_t *proto_intv_encode(const ts_intv *s)
{
    return proto_list_encode(s->v, s->n, sizeof *s->v, int_item, NULL);
}

json_t *proto_objv_encode(const void *v, int n, size_t size, json_t *(*one)(const void *slot))
{
    return proto_list_encode(v, n, size, one, NULL);
}

/* ---- the loops -------------------------------------------------------------------- */

static int proto_decode_one(const json_t *o, const char *where, const proto_field *f,
                            void *base, ts_err *err)
{
    const json_t *v = json_object_get(o, f->name);
    char path[160];
    proto_path(path, sizeof path, where, f->name);
    void *p = (char *)base + f->off;
    int64_t x = 0;
    bool seen;
    int rc;
    switch (f->kind) {
    case PK_I64:
        return proto_int(o, where, f->name, f->lo, f->hi, (int64_t *)p, NULL, err);
    case PK_I32:
        rc = proto_int(o, where, f->name, f->lo, f->hi, &x, NULL, err);
        *(int32_t *)p = (int32_t)x;
        return rc;
    case PK_NUM:
        return proto_num(o, where, f->name, -INFINITY, INFINITY, (double *)p, NULL, err);
    case PK_NUM0:
        return proto_num(o, where, f->name, 0, INFINITY, (double *)p, NULL, err);
    case PK_POS:
        return proto_pos(o, where, f->name, (double *)p, &seen, err);
    case PK_STR_NULL:
        if (json_is_null(v))
            return 0;
        /* fall through */
    case PK_STR:
        return proto_str(o, where, f->name, (const char **)p, err);
    case PK_BOOL:
        if (!json_is_boolean(v))
            return ts_err_set(err, TS_EINVAL, "%s: must be true or false", path);
        *(bool *)p = json_is_true(v);
        return 0;
    case PK_TRUE:
        return proto_true(o, where, f->name, (bool *)p, err);
    case PK_INTV:
        return proto_intv_decode(v, path, f->lo, f->hi, (ts_intv *)p, err);
    case PK_STRV:
        return proto_strv_decode(v, path, (ts_strv *)p, err);
    case PK_OBJ:
        return f->decode(v, path, base, err);
    case PK_LIST:
        return proto_list_decode(v, path, f->item_size, (void **)p,
                                 (int *)((char *)base + f->count_off), f->item_decode, f, err);
    case PK_DOCS:
        if (!json_is_array(v))
            return ts_err_set(err, TS_EINVAL, "%s: must be an array", path);
        *(json_t **)p = (json_t *)v;
        return 0;
    case PK_ENUM:
        return proto_enum(o, where, f->name, f->names, (int)f->hi, (int *)p, err);
    case PK_SUB:
        return proto_table_need(v, path, f->sub, f->nsub, (uint64_t)f->lo, p, NULL, err);
    case PK_DOC:
        if (f->lo && json_is_null(v))
            return 0; /* a document that may be null: NULL */
        return proto_msg_decode_new(f->msg, v, path, (void **)p, err);
    }
    return 0;
}

static json_t *proto_encode_one(const void *base, const proto_field *f)
{
    const void *p = (const char *)base + f->off;
    switch (f->kind) {
    case PK_I64:
        return json_integer(*(const int64_t *)p);
    case PK_I32:
        return json_integer(*(const int32_t *)p);
    case PK_NUM:
    case PK_NUM0:
    case PK_POS:
        return json_real(*(const double *)p);
    case PK_STR_NULL:
        if (!*(const char *const *)p)
            return json_null();
        /* fall through */
    case PK_STR:
        return json_string(*(const char *const *)p ? *(const char *const *)p : "");
    case PK_BOOL:
        return json_boolean(*(const bool *)p);
    case PK_TRUE:
        return json_true();
    case PK_INTV:
        return proto_intv_encode((const ts_intv *)p);
    case PK_STRV:
        return proto_strv_encode((const ts_strv *)p);
    case PK_OBJ:
        return f->encode(base);
    case PK_LIST:
        return proto_list_encode(*(void *const *)p,
                                 *(const int *)((const char *)base + f->count_off), f->item_size,
                                 f->item_encode, f);
    case PK_DOCS:
        return *(json_t *const *)p ? json_incref(*(json_t *const *)p) : json_array();
    case PK_ENUM: {
        int k = *(const int *)p; /* an unset or unknown value: the first name */
        return json_string(f->names[k > 0 && k < f->hi ? k : 1]);
    }
    case PK_SUB:
        return proto_table_new(f->sub, f->nsub, p, PROTO_ALL(f->nsub));
    case PK_DOC: {
        const void *doc = *(const void *const *)p;
        return doc ? proto_msg_encode(f->msg, doc) : f->lo ? json_null() : json_object();
    }
    }
    return NULL;
}

int proto_table_pick(const json_t *o, const char *where, const proto_field *f, int n,
                     uint64_t pick, void *base, uint64_t *present, ts_err *err)
{
    int rc = 0;
    for (int i = 0; rc == 0 && i < n; i++) {
        if (!(pick >> i & 1) || !json_object_get(o, f[i].name))
            continue;
        *present |= 1ULL << i;
        rc = proto_decode_one(o, where, &f[i], base, err);
    }
    return rc;
}

int proto_table_decode(const json_t *o, const char *where, const proto_field *f, int n,
                       void *base, uint64_t *present, ts_err *err)
{
    return proto_table_pick(o, where, f, n, PROTO_ALL(n), base, present, err);
}

int proto_table_need(const json_t *o, const char *where, const proto_field *f, int n,
                     uint64_t need, void *base, uint64_t *present, ts_err *err)
{
    if (!json_is_object(o))
        return ts_err_set(err, TS_EINVAL, "%s: must be an object", where);
    uint64_t seen = 0;
    int rc = proto_table_decode(o, where, f, n, base, &seen, err);
    for (int i = 0; rc == 0 && i < n; i++)
        if ((need >> i & 1) && !(seen >> i & 1))
            rc = ts_err_set(err, TS_EINVAL, "%s.%s: required", where, f[i].name);
    if (present)
        *present = seen;
    return rc;
}

int proto_table_encode(json_t *o, const proto_field *f, int n, const void *base,
                       uint64_t present)
{
    for (int i = 0; i < n; i++) {
        if (!(present & (1ULL << i)))
            continue;
        json_t *v = proto_encode_one(base, &f[i]);
        if (!v || json_object_set_new(o, f[i].name, v) != 0)
            return -1;
    }
    return 0;
}

json_t *proto_table_new(const proto_field *f, int n, const void *base, uint64_t present)
{
    json_t *o = json_object();
    if (o && proto_table_encode(o, f, n, base, present) != 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* ---- the schema ------------------------------------------------------------------- */

/* An integer in f's lo..hi; a bound that is the C type's own is left out. */
static json_t *proto_int_schema(const proto_field *f, int64_t type_lo, int64_t type_hi)
{
    json_t *s = json_pack("{s:s}", "type", "integer");
    if (s && f->lo > type_lo)
        json_object_set_new(s, "minimum", json_integer(f->lo));
    if (s && f->hi < type_hi)
        json_object_set_new(s, "maximum", json_integer(f->hi));
    return s;
}

static json_t *proto_enum_schema(const proto_field *f)
{
    json_t *names = json_array();
    for (int k = 1; names && k < f->hi; k++)
        json_array_append_new(names, json_string(f->names[k]));
    return json_pack("{s:s,s:o}", "type", "string", "enum", names);
}

static json_t *proto_member_schema(const proto_field *f)
{
    switch (f->kind) {
    case PK_I64:
        return proto_int_schema(f, INT64_MIN, INT64_MAX);
    case PK_I32:
        return proto_int_schema(f, INT32_MIN, INT32_MAX);
    case PK_NUM:
        return json_pack("{s:s}", "type", "number");
    case PK_NUM0:
        return json_pack("{s:s,s:i}", "type", "number", "minimum", 0);
    case PK_POS:
        return json_pack("{s:s,s:i}", "type", "number", "exclusiveMinimum", 0);
    case PK_STR:
        return json_pack("{s:s}", "type", "string");
    case PK_STR_NULL:
        return json_pack("{s:[ss]}", "type", "string", "null");
    case PK_BOOL:
        return json_pack("{s:s}", "type", "boolean");
    case PK_TRUE:
        return json_pack("{s:b}", "const", 1);
    case PK_INTV:
        return json_pack("{s:s,s:o}", "type", "array", "items",
                         proto_int_schema(f, INT64_MIN, INT64_MAX));
    case PK_STRV:
        return json_pack("{s:s,s:{s:s}}", "type", "array", "items", "type", "string");
    case PK_OBJ:
        return f->schema ? f->schema() : json_object();
    case PK_LIST:
        return json_pack("{s:s,s:o}", "type", "array", "items",
                         f->item_decode ? (f->schema ? f->schema() : json_object())
                         : f->msg       ? proto_msg_schema(f->msg)
                                        : proto_table_schema(f->sub, f->nsub,
                                                             PROTO_ALL(f->nsub)));
    case PK_DOCS:
        return json_pack("{s:s,s:{s:s}}", "type", "array", "items", "type", "object");
    case PK_ENUM:
        return proto_enum_schema(f);
    case PK_SUB:
        return proto_table_schema(f->sub, f->nsub, (uint64_t)f->lo);
    case PK_DOC:
        return f->lo ? json_pack("{s:[o,{s:s}]}", "anyOf", proto_msg_schema(f->msg), "type",
                                 "null")
                     : proto_msg_schema(f->msg);
    }
    return NULL;
}

json_t *proto_table_schema(const proto_field *f, int n, uint64_t need)
{
    json_t *required = json_array(), *props = json_object();
    for (int i = 0; required && props && i < n; i++) {
        if ((need >> i & 1) && json_array_append_new(required, json_string(f[i].name)) != 0)
            break;
        json_t *one = proto_member_schema(&f[i]);
        if (!one || json_object_set_new(props, f[i].name, one) != 0) {
            json_decref(props);
            props = NULL;
        }
    }
    if (!required || !props) {
        json_decref(required);
        json_decref(props);
        return NULL;
    }
    json_t *s = json_pack("{s:s}", "type", "object");
    if (s && json_array_size(required) > 0)
        json_object_set(s, "required", required);
    json_decref(required);
    if (!s || json_object_set_new(s, "properties", props) != 0) {
        json_decref(s);
        return NULL;
    }
    return s;
}

/* ---- a document's entry points ---------------------------------------------------- */

json_t *proto_msg_encode(const proto_msg *m, const void *doc)
{
    return proto_table_new(m->fields, m->n, doc, *proto_msg_present(m, (void *)doc));
}

int proto_msg_decode(const proto_msg *m, const json_t *o, const char *where, void *doc,
                     ts_err *err)
{
    memset(doc, 0, m->size);
    int rc = m->root && !json_is_object(o)
                 ? ts_err_set(err, TS_EINVAL, "%s: must be an object", m->root)
                 : proto_table_need(o, where, m->fields, m->n, m->need, doc,
                                    proto_msg_present(m, doc), err);
    if (rc != 0)
        m->fini(doc);
    return rc;
}

int proto_msg_decode_new(const proto_msg *m, const json_t *v, const char *path, void **out,
                         ts_err *err)
{
    void *doc = malloc(m->size);
    int rc = doc ? proto_msg_decode(m, v, path, doc, err)
                 : ts_err_set(err, TS_ENOMEM, "%s: out of memory", path);
    if (rc != 0) {
        free(doc);
        doc = NULL;
    }
    *out = doc;
    return rc;
}

json_t *proto_msg_schema(const proto_msg *m)
{
    return proto_table_schema(m->fields, m->n, m->need);
}
