/*
 * proto_table.h - the member tables the agent protocol's documents are
 * described with (src/proto). A document is a C struct and a table with
 * one line a member: its wire name, its kind, where it lives in the struct
 * (offsetof) and its range. One loop decodes a document and one encodes
 * it, so a member is described once, for both directions, and a
 * document's `present` mask (bit i: line i is carried) makes a decode
 * followed by an encode give the same members in the same order back.
 * Members no kind fits (an object, a list of objects, a value that may be
 * null) name their own decode and encode. Private to src/proto.
 */
#ifndef PROTO_TABLE_H
#define PROTO_TABLE_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "tessera/agent_proto.h"

typedef enum {
    PK_I64,      /* int64_t in lo..hi */
    PK_I32,      /* int32_t in lo..hi */
    PK_NUM,      /* double, any finite */
    PK_NUM0,     /* double >= 0 */
    PK_POS,      /* double > 0 */
    PK_STR,      /* const char * */
    PK_STR_NULL, /* const char *, or null (NULL) */
    PK_BOOL,     /* bool */
    PK_TRUE,     /* bool, `"const": true` */
    PK_INTV,     /* ts_intv of integers in lo..hi */
    PK_STRV,     /* ts_strv */
    PK_OBJ,      /* its own decode and encode */
    PK_LIST,     /* a list of objects: item pointer at off, its int count at count_off;
                  * each item by item_decode/encode, or by its table (sub, nsub) with
                  * every line required (PROTO_ROWS) */
    PK_DOCS,     /* json_t *, a list carried whole (each item decoded on its own) */
    PK_ENUM,     /* an enum (int-sized) whose value k is names[k], k in 1..hi-1 */
    PK_SUB,      /* an object of its own table (sub, nsub) in place at off; lo: its
                  * required lines' bits, every member encoded */
    PK_DOC,      /* a pointer at off to a document of msg, allocated by the decode
                  * (the owner's fini frees it); lo 1: null allowed, read as NULL
                  * and NULL written as null; lo 0: NULL written as {} */
} proto_kind;

typedef struct proto_field {
    const char *name;
    proto_kind kind;
    size_t off;
    int64_t lo, hi;
    /* PK_OBJ: v is the member (never NULL), path "<where>.<name>", base the struct */
    int (*decode)(const json_t *v, const char *path, void *base, ts_err *err);
    json_t *(*encode)(const void *base); /* a new reference; NULL: out of memory */
    /* PK_LIST: each item (an object) into a slot of item_size bytes */
    size_t count_off, item_size;
    int (*item_decode)(const json_t *item, const char *path, void *slot, ts_err *err);
    json_t *(*item_encode)(const void *slot);
    /* PK_LIST (PROTO_DOCS): each item a document of its own, with its
     * required lines and its present mask; PK_DOC: the document pointed to */
    const struct proto_msg *msg;
    const char *const *names;   /* PK_ENUM: names[0] the unset value's slot */
    const struct proto_field *sub; /* PK_SUB */
    int nsub;
    /* PK_OBJ, and PK_LIST by item_decode: the member's JSON Schema (an
     * item's, for a list); NULL: any value (proto_table_schema) */
    json_t *(*schema)(void);
} proto_field;

/* A PK_LIST line's kind and place: member m (items) and its count c of
 * struct T, items decoded by one_decode and encoded by one_encode. */
#define PROTO_LIST(T, m, c, one)                                                              \
    PK_LIST, offsetof(T, m), 0, 0, NULL, NULL, offsetof(T, c), sizeof *((T *)0)->m,          \
        one##_decode, one##_encode

/* A PK_LIST line (designated) of items of struct T's member m (count c),
 * each an object of the table rows, every member required and written. */
#define PROTO_ROWS(T, m, c, rows)                                                             \
    .kind = PK_LIST, .off = offsetof(T, m), .count_off = offsetof(T, c),                      \
    .item_size = sizeof *((T *)0)->m, .sub = rows, .nsub = (int)(sizeof rows / sizeof *rows)

/* A PK_LIST line (designated) of items of struct T's member m (count c),
 * each a document of the proto_msg doc: its required lines refused when
 * missing, its members carried kept in its present mask and written back. */
#define PROTO_DOCS(T, m, c, doc)                                                              \
    .kind = PK_LIST, .off = offsetof(T, m), .count_off = offsetof(T, c),                      \
    .item_size = sizeof *((T *)0)->m, .msg = &doc

/* Decodes each of the n members o carries into base, setting bit i of
 * *present for line i. Returns 0, or the first member's error. */
int proto_table_decode(const json_t *o, const char *where, const proto_field *f, int n,
                       void *base, uint64_t *present, ts_err *err);

/* As proto_table_decode, for the lines whose bit is in pick alone: the
 * others are neither read nor checked. */
int proto_table_pick(const json_t *o, const char *where, const proto_field *f, int n,
                     uint64_t pick, void *base, uint64_t *present, ts_err *err);

/* As proto_table_decode, for an object o must be (else "<where>: must be an
 * object") with each line whose bit is in need carried (else
 * "<where>.<name>: required"); *present (when not NULL) is set to the
 * lines carried. */
int proto_table_need(const json_t *o, const char *where, const proto_field *f, int n,
                     uint64_t need, void *base, uint64_t *present, ts_err *err);

/* The bits of lines 0..n-1: every member of a table of n lines. */
#define PROTO_ALL(n) ((n) >= 64 ? ~0ULL : (1ULL << (n)) - 1)

/* A new object of each line whose bit is in present (proto_table_encode);
 * NULL when out of memory. */
json_t *proto_table_new(const proto_field *f, int n, const void *base, uint64_t present);

/* Sets o's member of each line whose bit is in present (replacing one o
 * already has, in its place); -1 when out of memory. */
int proto_table_encode(json_t *o, const proto_field *f, int n, const void *base,
                       uint64_t present);

/* The JSON Schema of an object of table f (n lines), the lines whose bit is
 * in need required: what the decode loop accepts, each member's type and
 * range, objects open (a decoder ignores the members it does not know).
 * A new reference; NULL when out of memory. */
json_t *proto_table_schema(const proto_field *f, int n, uint64_t need);

/* A document of the protocol: its table (n lines), the lines it requires,
 * its struct (size bytes, its present mask at present_off) and what frees
 * what a decode allocated. A document's public encode, decode and schema are
 * this one descriptor walked by the proto_msg_* functions, so each document
 * states its shape once and not its entry points' steps again. */
typedef struct proto_msg {
    const proto_field *fields;
    int n;
    uint64_t need;
    size_t size, present_off;
    /* a body at the top of a request or an answer: what "must be an object"
     * calls it ("body"); NULL: the where a decode is given */
    const char *root;
    void (*fini)(void *doc);
} proto_msg;

/* A new object of each member doc carries; NULL when out of memory. */
json_t *proto_msg_encode(const proto_msg *m, const void *doc);

/* doc (cleared first) from o, each required line carried; on an error
 * (naming the member) nothing is left allocated. */
int proto_msg_decode(const proto_msg *m, const json_t *o, const char *where, void *doc,
                     ts_err *err);

/* A new document of m (malloc'd, freed by m->fini then free()) decoded from
 * v into *out; *out NULL on an error. */
int proto_msg_decode_new(const proto_msg *m, const json_t *v, const char *path, void **out,
                         ts_err *err);

/* The JSON Schema of what proto_msg_decode accepts (proto_table_schema). */
json_t *proto_msg_schema(const proto_msg *m);

/* The documents other documents carry (discovery.c, node_health.c). */
extern const proto_msg PROTO_DISCOVERY, PROTO_NODE_HEALTH;

/* "<where>.<key>", or "<key>" with no where. */
void proto_path(char *buf, size_t len, const char *where, const char *key);

/* The room for a JSON list's items: v must be a list (else "<path>: must be
 * <what>"); *room gets a zeroed array of its *n items of `size` bytes (NULL
 * for none). */
int proto_list_room(const json_t *v, const char *path, const char *what, size_t size,
                    void **room, size_t *n, ts_err *err);

/* Lists: decoded into a new array (freed with free(); strings borrowed from
 * v), encoded as a new JSON array. */
int proto_strv_decode(const json_t *v, const char *path, ts_strv *out, ts_err *err);
json_t *proto_strv_encode(const ts_strv *s);
int proto_intv_decode(const json_t *v, const char *path, int64_t lo, int64_t hi, ts_intv *out,
                      ts_err *err);
json_t *proto_intv_encode(const ts_intv *s);

/* A list of objects: each item (an object, else refused) decoded by one()
 * into slot i of a new array of `size`-byte items (*out, *n). */
int proto_objv_decode(const json_t *v, const char *path, size_t size, void **out, int *n,
                      int (*one)(const json_t *item, const char *path, void *slot, ts_err *err),
                      ts_err *err);

/* A list of n objects, item i encoded by one(slot i); NULL when out of memory. */
json_t *proto_objv_encode(const void *v, int n, size_t size, json_t *(*one)(const void *slot));

#endif
