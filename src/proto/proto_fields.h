/*
 * proto_fields.h - the typed field readers the agent protocol's decoders are
 * written with (src/proto). Each reads one optional member of an object,
 * checks its JSON type and range against the schema, and on a wrong value
 * fills err with "<where>.<field>: <reason>" and returns TS_EINVAL. A member
 * that is absent leaves *out untouched and returns 0, with *present false
 * where the caller asks. Private to src/proto.
 */
#ifndef PROTO_FIELDS_H
#define PROTO_FIELDS_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "tessera/error.h"

/* An integer in lo..hi. */
int proto_int(const json_t *o, const char *where, const char *key, int64_t lo, int64_t hi,
              int64_t *out, bool *present, ts_err *err);
/* A number (integer or real) in lo..hi, finite. */
int proto_num(const json_t *o, const char *where, const char *key, double lo, double hi,
              double *out, bool *present, ts_err *err);
/* A finite number > 0 (the schema's exclusiveMinimum 0). */
int proto_pos(const json_t *o, const char *where, const char *key, double *out, bool *present,
              ts_err *err);
/* A string (borrowed from o). */
int proto_str(const json_t *o, const char *where, const char *key, const char **out,
              ts_err *err);
/* A string that is one of names[1..n-1] (names[0] is the "none" value's
 * slot, never matched); *out its index. */
int proto_enum(const json_t *o, const char *where, const char *key, const char *const *names,
               int n, int *out, ts_err *err);
/* A member whose schema is `"const": true`. */
int proto_true(const json_t *o, const char *where, const char *key, bool *out, ts_err *err);
/* A member that must be an object when present; *out NULL when absent. */
int proto_obj(const json_t *o, const char *where, const char *key, const json_t **out,
              ts_err *err);
/* A required member: TS_EINVAL "<where>.<key>: required" when absent. */
int proto_need(const json_t *o, const char *where, const char *key, ts_err *err);

#endif
