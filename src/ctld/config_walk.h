/*
 * config_walk.h - internal: how tesserad's configuration file is walked, for
 * the files that read its keys (config.c: the daemon's own keys and the key
 * table; config_sched.c: the scheduling keys).
 *
 * A cfg_ctx lives on ctld_config_load's stack for one load: it borrows the
 * libyaml document and the configuration being filled, and knows the file's
 * folder, against which relative paths are read. Every reader returns 0 or
 * the error ts_yaml_fail left in the document ("file:line: key.path: why").
 */
#ifndef TS_CTLD_CONFIG_WALK_H
#define TS_CTLD_CONFIG_WALK_H

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

/* The scheduling keys (config_sched.c). */
int ctld_cfg_scheduler(cfg_ctx *x, const yaml_node_t *n);
int ctld_cfg_stragglers(cfg_ctx *x, yaml_node_t *m);
int ctld_cfg_idle(cfg_ctx *x, yaml_node_t *m);
int ctld_cfg_qos(cfg_ctx *x, yaml_node_t *m);

/* webhooks: {allow: [CIDR...]} (webhook_dest.c). */
int ctld_cfg_webhooks(cfg_ctx *x, yaml_node_t *m);

#endif
