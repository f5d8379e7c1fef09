/*
 * yaml_doc.h - internal: the pieces every libyaml-document loader shares.
 *
 * The cluster loader (load_yaml.c) and the tenants loader (load_tenants.c)
 * both build the whole libyaml document first, walk it with a closed schema
 * and report "file:line: key.path: why". What they have in common lives here:
 * loading exactly one document from memory, the error formatting, describing
 * a node for "got ..." and the strict scalar, name and mapping-key checks.
 * A ts_yaml_doc is a plain value embedded in the caller's loader; it borrows
 * fname, doc and err and owns nothing. Nothing here prints or keeps state;
 * not thread-affine.
 */
#ifndef TS_MODEL_YAML_DOC_H
#define TS_MODEL_YAML_DOC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <yaml.h>

#include "tessera/error.h"

#define TS_YAML_SHOW_MAX 40 /* characters of a bad value quoted back */
#define TS_YAML_GOT_MAX (TS_YAML_SHOW_MAX + 16) /* buffer for model_yaml_describe */

typedef struct ts_yaml_doc {
    const char *fname;    /* for messages; never NULL while loading */
    yaml_document_t *doc; /* set by ts_yaml_load_one for the walk */
    ts_err *err;          /* may be NULL; the last error made */
    ts_errs *all;         /* NULL, or every error ts_yaml_fail makes is added here too,
                           * for a walk that goes on past an error (the tenants file) */
} ts_yaml_doc;

/* The walk over a loaded document: returns 0 or a negative error code. */
typedef int (*ts_yaml_walk_fn)(void *ctx);

/*
 * Parses buf (len bytes; NULL reads as empty) as exactly one YAML document,
 * sets D->doc and calls walk(ctx) on it. Malformed YAML and a second document
 * are errors with the file's line. D->doc is freed (and NULL) on return.
 * Returns walk's result, or a negative error code with D->err filled.
 */
int ts_yaml_load_one(ts_yaml_doc *D, const char *buf, size_t len, ts_yaml_walk_fn walk,
                     void *ctx);

/* The 1-based line a node starts on. */
int model_yaml_line(const yaml_node_t *n);

/* The node with id in D's document (NULL if none). */
yaml_node_t *ts_yaml_node(const ts_yaml_doc *D, int id);

/* A scalar node's text, or NULL for anything else (and for NULL). */
const char *ts_yaml_scalar(const yaml_node_t *n);
/* The hint for an unknown key got among keys[0..nkeys) into out (at most
 * TS_YAML_EXPECT_MAX fits an error): the nearest key where one is a few
 * edits away ("did you mean "hold"? "), then "expected one of: " and the
 * keys, whole names only, ending "..." and where doc lists them when they
 * do not all fit. */
#define TS_YAML_EXPECT_MAX 360
void ts_yaml_expect_keys(const char *got, const char *const *keys, int nkeys, const char *doc,
                         char *out, size_t size);

/*
 * Fills D->err with "file:line: <fmt>" (line of at, 1 when at is NULL), adds
 * it to D->all where there is one, and returns code.
 */
__attribute__((format(printf, 4, 5)))
int ts_yaml_fail(const ts_yaml_doc *D, const yaml_node_t *at, int code, const char *fmt, ...);

/* Key paths for messages ("nodes[3].topology.leaf"); truncation is harmless. */
__attribute__((format(printf, 3, 4)))
void ts_yaml_pathf(char *buf, size_t size, const char *fmt, ...);

/* What a value is, for "got ..." in messages: a quoted scalar (cut at
 * TS_YAML_SHOW_MAX characters), "a mapping", "a list" or "nothing". */
void model_yaml_describe(const yaml_node_t *n, char *buf, size_t size);

/* "file:line: path: must be <want>, got <description>"; returns TS_EINVAL. */
int ts_yaml_fail_got(const ts_yaml_doc *D, const yaml_node_t *n, const char *path,
                     const char *want);

/* A plain name: 1..max-1 characters from [A-Za-z0-9._-]. */
bool ts_yaml_name_ok(const char *s, size_t max);

/*
 * A decimal integer in lo..hi, no blanks or "+" in front; anything else is
 * ts_yaml_fail_got with want. Returns 0 or TS_EINVAL.
 */
int ts_yaml_get_int(const ts_yaml_doc *D, const yaml_node_t *n, const char *path, int64_t lo,
                    int64_t hi, const char *want, int64_t *out);

/*
 * The value nodes of a mapping with a fixed key set: vals[i] gets keys[i]'s
 * value or NULL. Not a mapping, unknown keys and repeated keys are errors,
 * naming the key ("" path reads "top level"): the first ends the call, or,
 * with D->all, each is added there and the known keys' values are still
 * given (the first of a repeated key's). Returns 0 or TS_EINVAL.
 */
int ts_yaml_map_fields(const ts_yaml_doc *D, const yaml_node_t *map, const char *path,
                       const char *const *keys, int nkeys, yaml_node_t **vals);

#endif
