/*
 * config.h - the shim's configuration, parsed from the environment the agent
 * sets (variables and formats: include/tessera/shim.h).
 *
 * shim_config_parse is pure: it reads only the strings it is given, so the
 * tests drive it directly. The caller owns the struct; nothing is allocated.
 */
#ifndef TS_SHIM_CONFIG_H
#define TS_SHIM_CONFIG_H

#include <stdint.h>

#include "tessera/error.h"
#include "tessera/shim.h"

#define TS_SHIM_PATH_MAX 256

/* The raw values, NULL when unset. */
typedef struct ts_shim_env {
    const char *mem_limit;
    const char *compute_percent;
    const char *ledger;
    const char *ctx_bytes;
    const char *driver;
} ts_shim_env;

typedef struct ts_shim_config {
    int64_t mem_limit[TS_SHIM_MAX_DEVICES]; /* bytes; -1: no quota */
    int compute_pct[TS_SHIM_MAX_DEVICES];   /* 1..100; 100: no limit */
    int mem_on;                             /* some device has a quota */
    int compute_on;                         /* some device has a share below 100 */
    char ledger[TS_SHIM_PATH_MAX];          /* absolute path; "" = private */
    uint64_t ctx_bytes;
    char driver[TS_SHIM_PATH_MAX];
} ts_shim_config;

/* Reads the process environment into env. */
void shim_env_get(ts_shim_env *env);

/* Fills cfg from env. On bad input returns TS_EINVAL naming the variable and
 * the reason, and leaves cfg as pass-through (no quota, no limit). */
int shim_config_parse(const ts_shim_env *env, ts_shim_config *cfg, ts_err *err);

/* "512M" -> bytes (K/M/G/T are powers of 1024). 0 on success, -1 on junk or
 * overflow. */
int shim_parse_bytes(const char *s, uint64_t *out);

#endif
