/*
 * proto_fields.c - typed readers of one member of an agent-protocol object
 * (proto_fields.h). They keep the decoders to one line a field, and every
 * error to one shape: the field's path, then what the schema wants.
 */
#include "proto/proto_fields.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* "<where>.<key>" in err's message, or "<key>" with no where. */
static int proto_bad(ts_err *err, const char *where, const char *key, const char *what)
{
    return ts_err_set(err, TS_EINVAL, "%s%s%s: %s", where && *where ? where : "",
                      where && *where ? "." : "", key, what);
}

/* The range a reader was given, for its message ("an integer >= 1"). */
static void proto_int_range(char *buf, size_t len, int64_t lo, int64_t hi)
{
    if (lo == INT64_MIN && hi == INT64_MAX)
        snprintf(buf, len, "must be an integer");
    else if (hi == INT64_MAX)
        snprintf(buf, len, "must be an integer >= %" PRId64, lo);
    else
        snprintf(buf, len, "must be an integer in %" PRId64 "..%" PRId64, lo, hi);
}

int proto_int(const json_t *o, const char *where, const char *key, int64_t lo, int64_t hi,
              int64_t *out, bool *present, ts_err *err)
{
    const json_t *v = json_object_get(o, key);
    if (present)
        *present = v != NULL;
    if (!v)
        return 0;
    char what[96];
    proto_int_range(what, sizeof what, lo, hi);
    if (!json_is_integer(v))
        return proto_bad(err, where, key, what);
    json_int_t x = json_integer_value(v);
    if (x < lo || x > hi)
        return proto_bad(err, where, key, what);
    *out = x;
    return 0;
}

int proto_num(const json_t *o, const char *where, const char *key, double lo, double hi,
              double *out, bool *present, ts_err *err)
{
    const json_t *v = json_object_get(o, key);
    if (present)
        *present = v != NULL;
    if (!v)
        return 0;
    char what[96];
    if (isinf(lo) && isinf(hi))
        snprintf(what, sizeof what, "must be a number");
    else if (isinf(hi))
        snprintf(what, sizeof what, "must be a number >= %g", lo);
    else
        snprintf(what, sizeof what, "must be a number in %g..%g", lo, hi);
    if (!json_is_number(v))
        return proto_bad(err, where, key, what);
    double x = json_number_value(v);
    if (!isfinite(x) || x < lo || x > hi)
        return proto_bad(err, where, key, what);
    *out = x;
    return 0;
}

int proto_pos(const json_t *o, const char *where, const char *key, double *out, bool *present,
              ts_err *err)
{
    const json_t *v = json_object_get(o, key);
    if (present)
        *present = v != NULL;
    if (!v)
        return 0;
    double x = json_number_value(v);
    if (!json_is_number(v) || !isfinite(x) || x <= 0)
        return proto_bad(err, where, key, "must be a number > 0");
    *out = x;
    return 0;
}

int proto_str(const json_t *o, const char *where, const char *key, const char **out,
              ts_err *err)
{
    const json_t *v = json_object_get(o, key);
    if (!v)
        return 0;
    if (!json_is_string(v))
        return proto_bad(err, where, key, "must be a string");
    *out = json_string_value(v);
    return 0;
}

int proto_enum(const json_t *o, const char *where, const char *key, const char *const *names,
               int n, int *out, ts_err *err)
{
    const json_t *v = json_object_get(o, key);
    if (!v)
        return 0;
    const char *s = json_string_value(v);
    for (int k = 1; s && k < n; k++)
        if (strcmp(s, names[k]) == 0) {
            *out = k;
            return 0;
        }
    char what[256];
    size_t len = (size_t)snprintf(what, sizeof what, "must be one of");
    for (int k = 1; k < n && len < sizeof what; k++)
        len += (size_t)snprintf(what + len, sizeof what - len, "%s %s", k > 1 ? "," : "",
                                names[k]);
    return proto_bad(err, where, key, what);
}

int proto_true(const json_t *o, const char *where, const char *key, bool *out, ts_err *err)
{
    const json_t *v = json_object_get(o, key);
    if (!v)
        return 0;
    if (!json_is_true(v))
        return proto_bad(err, where, key, "must be true when present");
    *out = true;
    return 0;
}

int proto_obj(const json_t *o, const char *where, const char *key, const json_t **out,
              ts_err *err)
{
    const json_t *v = json_object_get(o, key);
    *out = NULL;
    if (!v)
        return 0;
    if (!json_is_object(v))
        return proto_bad(err, where, key, "must be an object");
    *out = v;
    return 0;
}

int proto_need(const json_t *o, const char *where, const char *key, ts_err *err)
{
    return json_object_get(o, key) ? 0 : proto_bad(err, where, key, "required");
}
