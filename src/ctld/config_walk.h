/*
 * config_walk.h - internal: how tesserad's configuration file is walked, for
 * the files that read its keys (config.c: the daemon's own keys and the key
 * table; config_sched.c: the scheduling keys; config_net.c: network).
 *
 * A cfg_ctx lives on ctld_config_load's stack for one load: it borrows the
 * libyaml document and the configuration being filled, and knows the file's
 * folder, against which relative paths are read. Every reader returns 0 or
 * the error ts_yaml_fail left in the document ("file:line: key.path: why").
 */
#ifndef TS_CTLD_CONFIG_WALK_H
#define TS_CTLD_CONFIG_WALK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <yaml.h>

#include "ctld/config.h"
#include "model/yaml_doc.h"

typedef struct cfg_ctx {
    ts_yaml_doc D;
    ctld_config *cfg;
    char base[CTLD_PATH_MAX];
} cfg_ctx;

/* A duration such as 90s, 15m, 2h or 7d (ctld_parse_duration). */
int ctld_cfg_dur(cfg_ctx *x, const yaml_node_t *n, const char *path, double *out);
/* A path, relative to the file's folder unless absolute. */
int ctld_cfg_path(cfg_ctx *x, const yaml_node_t *n, const char *path, char *out, size_t size);
/* true or false. */
int ctld_cfg_bool(cfg_ctx *x, const yaml_node_t *n, const char *path, bool *out);

/*
 * A mapping's members as a table (ctld_cfg_map): an integer in lo..hi, whose
 * error names the range as the table writes it ("1..1000000"), stored as an
 * int, a double, or MiB as bytes; true or false (ctld_cfg_bool); a duration,
 * in lo..hi seconds when hi > 0 (want is then the range's error, e.g.
 * "1s..1h"); or a value read by a function of its own. `off` is the member
 * of ctld_config it fills.
 */
enum cfg_kind {
    CFG_KIND_INT,
    CFG_KIND_INT_F64,
    CFG_KIND_MIB,
    CFG_KIND_DUR,
    CFG_KIND_BOOL,
    CFG_KIND_READ
};
typedef struct cfg_field {
    const char *key;
    enum cfg_kind kind;
    int64_t lo, hi;
    const char *want;
    size_t off;
    int (*read)(cfg_ctx *x, yaml_node_t *v, const char *path); /* CFG_KIND_READ */
} cfg_field;

/* offsetof(ctld_config, member), refused at compile time unless the member
 * has the size of the type the kind stores. */
#define CFG_OFF(member, type)                                                                  \
    (offsetof(ctld_config, member) +                                                           \
     0 * sizeof(char[sizeof(((ctld_config *)0)->member) == sizeof(type) ? 1 : -1]))
#define CFG_INT(key, lo, hi, member)                                                           \
    {key, CFG_KIND_INT, lo, hi, #lo ".." #hi, CFG_OFF(member, int), NULL}
#define CFG_INT_F64(key, lo, hi, member)                                                       \
    {key, CFG_KIND_INT_F64, lo, hi, #lo ".." #hi, CFG_OFF(member, double), NULL}
#define CFG_MIB(key, lo, hi, member)                                                           \
    {key, CFG_KIND_MIB, lo, hi, #lo ".." #hi, CFG_OFF(member, int64_t), NULL}
#define CFG_DUR(key, member) {key, CFG_KIND_DUR, 0, 0, NULL, CFG_OFF(member, double), NULL}
#define CFG_DUR_IN(key, lo, hi, want, member)                                                  \
    {key, CFG_KIND_DUR, lo, hi, want, CFG_OFF(member, double), NULL}
#define CFG_BOOL(key, member) {key, CFG_KIND_BOOL, 0, 0, NULL, CFG_OFF(member, bool), NULL}
#define CFG_READ(key, fn) {key, CFG_KIND_READ, 0, 0, NULL, 0, fn}

/*
 * The mapping n at path whose members are fields[0..nf), at most
 * CFG_FIELDS_MAX: an unknown key's error lists them in that order, and they
 * are read in that order (the first error is the one reported).
 */
#define CFG_FIELDS_MAX 32
int ctld_cfg_map(cfg_ctx *x, yaml_node_t *n, const char *path, const cfg_field *fields,
                 int nf);

/* The scheduling keys (config_sched.c). */
int ctld_cfg_scheduler(cfg_ctx *x, yaml_node_t *n);
int ctld_cfg_stragglers(cfg_ctx *x, yaml_node_t *m);
int ctld_cfg_idle(cfg_ctx *x, yaml_node_t *m);
int ctld_cfg_qos(cfg_ctx *x, yaml_node_t *m);

/* network: {...} (config_net.c). */
int ctld_cfg_network(cfg_ctx *x, yaml_node_t *m);

/* webhooks: {allow: [CIDR...]} (webhook_dest.c). */
int ctld_cfg_webhooks(cfg_ctx *x, yaml_node_t *m);

#endif
