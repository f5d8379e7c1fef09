/*
 * spec_walk.h - internal: how the job spec parser (spec.c) walks libyaml's
 * tree and what every complaint looks like.
 *
 * A spec_parser lives on ts_spec_parse's stack for one parse: it borrows the
 * document (through ts_yaml_doc) and the caller's error list, and owns only
 * the per-node "seen" marks. Every reader below takes a key path, records at
 * most one error per value as "path: reason" (the rest of the spec is still
 * read) and returns false or NULL when the value is unusable. Not
 * thread-affine; nothing is kept between parses.
 */
#ifndef TS_API_SPEC_WALK_H
#define TS_API_SPEC_WALK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <yaml.h>

#include "model/yaml_doc.h"
#include "tessera/spec.h"

#define SPEC_FNAME "spec" /* YAML syntax errors read "spec:LINE: ..." */
#define SPEC_PATH_MAX 128 /* "tasks[65535].gpu_memory_mib"; user keys are cut */
#define SPEC_SHOW_MAX 40  /* bytes of a bad value quoted back */
#define SPEC_SHOW_BUF (SPEC_SHOW_MAX * 2 + 32)
/* an unknown key's hint: within one error's reason (TS_ERR_MSG_MAX less
 * the path) with room for its own words */
#define SPEC_EXPECT_MAX TS_YAML_EXPECT_MAX
#define BIT(k) (1u << (k))

typedef struct spec_parser {
    ts_yaml_doc y;        /* the document while walking; libyaml's own error */
    ts_spec_errors *errs; /* what the walk found */
    ts_job_spec *spec;    /* being filled */
    unsigned char *seen;  /* per node id - 1: walked already (an alias) */
    size_t nnodes;
    bool walk_failed; /* errs holds the walk's errors */
    bool oom;
} spec_parser;

/* Appends one message to errs (counted in errs->more past TS_SPEC_MAX_ERRORS). */
__attribute__((format(printf, 2, 3))) void spec_push(ts_spec_errors *errs, const char *fmt, ...);
/* "path: reason" ("" reads "top level"); marks the walk failed. */
__attribute__((format(printf, 3, 4))) void spec_fail(spec_parser *P, const char *path,
                                                     const char *fmt, ...);
/* "path: must be <want>, got <spec_show>". */
void spec_fail_got(spec_parser *P, const yaml_node_t *n, const char *path, const char *want);
void spec_fail_oom(spec_parser *P);

/* A plain "", "~" or "null" (any YAML 1.1 case): the key was not given. */
bool spec_is_null(const yaml_node_t *n);
/* What a value is, safe to quote: "17", the string "17", null, a mapping, a list. */
void spec_show(const yaml_node_t *n, char *buf, size_t size);
/* A name as it was given, quoted ("H100"), whether quoted or not in the
 * document (a name is text either way); else as spec_show. */
void spec_show_name(const yaml_node_t *n, char *buf, size_t size);
/* parent.key, or parent["key"] (cut, made printable) for a key that is not a word. */
void spec_key_path(char *buf, size_t size, const char *parent, const char *key, size_t keylen);
/* A scalar's text if it holds no NUL byte, else NULL. */
const char *spec_scalar_text(const yaml_node_t *n);

/* The node with id, the first time; a second visit is an alias, an error at
 * path (*reused set, NULL returned). */
yaml_node_t *spec_child(spec_parser *P, int id, const char *path, bool *reused);

/*
 * The value nodes of a mapping with a fixed key set (at most 32 keys): vals[k]
 * gets key k's value, NULL when absent or null; *given has bit k set when key
 * k was given other than null, even if badly. Unknown, repeated and non-scalar
 * keys are errors, and the rest is still read. False when map is not a mapping.
 */
bool spec_map_fields(spec_parser *P, const yaml_node_t *map, const char *path,
                     const char *const *keys, int nkeys, yaml_node_t **vals, unsigned *given);

/* Typed readers: any scalar as text; a name of 1..TS_SPEC_NAME_MAX-1 plain
 * characters ("" too when empty_ok); a plain decimal integer in lo..hi; plain
 * true/false; a duration (spec_scalar.h). */
const char *spec_text(spec_parser *P, const yaml_node_t *n, const char *path);
bool spec_name(spec_parser *P, const yaml_node_t *n, const char *path, bool empty_ok,
               char out[TS_SPEC_NAME_MAX]);
bool spec_int(spec_parser *P, const yaml_node_t *n, const char *path, int64_t lo, int64_t hi,
              int64_t *out);
bool spec_bool(spec_parser *P, const yaml_node_t *n, const char *path, bool *out);
bool spec_duration(spec_parser *P, const yaml_node_t *n, const char *path, double *out);
/* A mount's path at sub (the host's, or in_image one inside the image):
 * absolute, without . or .. components, under 256 bytes, and inside the
 * image not the runtime's (/, /proc, /sys, /dev and below); copied into out
 * (256 bytes). False after an error in P. */
bool spec_mount_path(spec_parser *P, const yaml_node_t *v, const char *sub, bool in_image,
                     char out[256]);
/* The top-level tasks: list of task groups (spec_tasks.c). */
void spec_walk_tasks(spec_parser *P, const yaml_node_t *n);
/* The top-level network: a mode, or a map with nics and publish (spec_network.c). */
void spec_walk_network(spec_parser *P, const yaml_node_t *n);
/* The top-level notify: map (spec_notify.c). */
void spec_walk_notify(spec_parser *P, const yaml_node_t *n);
/* A top-level list of objects (secrets, mounts, data): key, what it must be
 * (want), what its items are called in "N noun, at most max", its items'
 * size and the place of its array in ts_job_spec (member, offsetof), and
 * one(), which reads an item (path "key[i]") and appends it. */
typedef struct spec_list_def {
    const char *key, *want, *noun;
    int max;
    size_t elem_size, member;
    void (*one)(spec_parser *P, yaml_node_t *it, const char *path);
} spec_list_def;
/* Checks the list (else an error naming it), gives the spec a zeroed array
 * of its length (NULL when empty; the spec owns it) and reads each item
 * that can be read. */
void spec_walk_list(spec_parser *P, const yaml_node_t *seq, const spec_list_def *def);
/* The top-level secrets (spec_secrets.c), mounts (spec_mounts.c) and data
 * (spec_data.c; after mounts, whose paths it may not reuse) lists. */
extern const spec_list_def SPEC_SECRETS, SPEC_MOUNTS, SPEC_DATA;
/* A mapping of keys (spec_map_fields), else "<path>: must be <want>", with
 * the first nneed keys given (else "<path>.<key>: required"). */
bool spec_map_need(spec_parser *P, const yaml_node_t *n, const char *path,
                   const char *const *keys, int nkeys, int nneed, const char *want,
                   yaml_node_t **v);
/* strdup, an out-of-memory error in P when it fails. */
char *spec_dup(spec_parser *P, const char *s);
/* A task group's count or gpus given as a range {min, max} (spec_elastic.c):
 * read into t (count/count_max or gpus/gpus_max) and the value taken from
 * *count or *gpus (set NULL) so the plain readers skip it; returns which
 * were valid. share_or_mig: the group has gpu_fraction or mig_profile. */
#define SPEC_ELASTIC_COUNT 1u
#define SPEC_ELASTIC_GPUS 2u
unsigned spec_elastic_group(spec_parser *P, const char *path, yaml_node_t **count,
                            yaml_node_t **gpus, bool share_or_mig, ts_task_spec *t);

#endif
