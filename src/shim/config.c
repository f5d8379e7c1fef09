/*
 * config.c - parses the shim's environment (include/tessera/shim.h) into a
 * ts_shim_config.
 *
 * Per-device lists ("0=8G,1=512M") and a bare value for every device are the
 * two shapes, the same for the quota and the compute share, so one parser
 * serves both. A bad value disables nothing silently: the whole configuration
 * is refused with a message naming the variable, and the caller (the shim's
 * start-up) then runs as a pass-through, which is what an unconfigured
 * process gets anyway.
 */
#include "shim/config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define COMPUTE_PCT_MAX 100

void shim_env_get(ts_shim_env *env)
{
    env->mem_limit = getenv(TS_SHIM_ENV_MEM_LIMIT);
    env->compute_percent = getenv(TS_SHIM_ENV_COMPUTE_PERCENT);
    env->ledger = getenv(TS_SHIM_ENV_LEDGER);
    env->ctx_bytes = getenv(TS_SHIM_ENV_CTX_BYTES);
    env->driver = getenv(TS_SHIM_ENV_DRIVER);
}

int shim_parse_bytes(const char *s, uint64_t *out)
{
    if (!s || *s < '0' || *s > '9')
        return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno)
        return -1;
    unsigned shift = 0;
    switch (*end) {
    case 'K': case 'k': shift = 10; end++; break;
    case 'M': case 'm': shift = 20; end++; break;
    case 'G': case 'g': shift = 30; end++; break;
    case 'T': case 't': shift = 40; end++; break;
    default: break;
    }
    if (*end == 'B' || *end == 'b')
        end++;
    if (*end || (shift && v > (UINT64_MAX >> shift)))
        return -1;
    *out = (uint64_t)v << shift;
    return 0;
}

/* One value of a list: bytes for the quota, 1..100 for the share. */
typedef int (*value_fn)(const char *s, int64_t *out);

static int quota_value(const char *s, int64_t *out)
{
    uint64_t v;
    if (shim_parse_bytes(s, &v) != 0 || v > (uint64_t)INT64_MAX)
        return -1;
    *out = (int64_t)v;
    return 0;
}

static int pct_value(const char *s, int64_t *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < 1 || v > COMPUTE_PCT_MAX)
        return -1;
    *out = v;
    return 0;
}

/* "V" or "D=V,D=V": fills vals[0..TS_SHIM_MAX_DEVICES-1] (untouched where not
 * named). */
static int parse_list(const char *var, const char *text, value_fn fn, int64_t *vals,
                      ts_err *err)
{
    char buf[512];
    if (strlen(text) >= sizeof buf)
        return ts_err_set(err, TS_EINVAL, "%s: longer than %zu characters", var,
                          sizeof buf - 1);
    strcpy(buf, text);
    if (!strchr(buf, '=')) {
        int64_t v;
        if (fn(buf, &v) != 0)
            return ts_err_set(err, TS_EINVAL, "%s: \"%s\" is not a valid value", var, text);
        for (int d = 0; d < TS_SHIM_MAX_DEVICES; d++)
            vals[d] = v;
        return 0;
    }
    int seen[TS_SHIM_MAX_DEVICES] = {0};
    char *save = NULL;
    for (char *item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(item, '=');
        if (!eq)
            return ts_err_set(err, TS_EINVAL, "%s: \"%s\" is not DEVICE=VALUE", var, item);
        *eq = '\0';
        char *end;
        long d = strtol(item, &end, 10);
        if (end == item || *end || d < 0 || d >= TS_SHIM_MAX_DEVICES)
            return ts_err_set(err, TS_EINVAL, "%s: device \"%s\" must be 0..%d", var, item,
                              TS_SHIM_MAX_DEVICES - 1);
        if (seen[d]++)
            return ts_err_set(err, TS_EINVAL, "%s: device %ld named twice", var, d);
        int64_t v;
        if (fn(eq + 1, &v) != 0)
            return ts_err_set(err, TS_EINVAL, "%s: device %ld: \"%s\" is not a valid value", var,
                              d, eq + 1);
        vals[d] = v;
    }
    return 0;
}

static void pass_through(ts_shim_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    for (int d = 0; d < TS_SHIM_MAX_DEVICES; d++) {
        cfg->mem_limit[d] = -1;
        cfg->compute_pct[d] = COMPUTE_PCT_MAX;
    }
    cfg->ctx_bytes = TS_SHIM_CTX_BYTES_DEFAULT;
    strcpy(cfg->driver, TS_SHIM_DRIVER_DEFAULT);
}

static int parse(const ts_shim_env *env, ts_shim_config *cfg, ts_err *err)
{
    int rc;
    if (env->mem_limit && *env->mem_limit &&
        (rc = parse_list(TS_SHIM_ENV_MEM_LIMIT, env->mem_limit, quota_value, cfg->mem_limit, err)))
        return rc;
    if (env->compute_percent && *env->compute_percent) {
        int64_t pct[TS_SHIM_MAX_DEVICES];
        for (int d = 0; d < TS_SHIM_MAX_DEVICES; d++)
            pct[d] = COMPUTE_PCT_MAX;
        if ((rc = parse_list(TS_SHIM_ENV_COMPUTE_PERCENT, env->compute_percent, pct_value, pct,
                             err)))
            return rc;
        for (int d = 0; d < TS_SHIM_MAX_DEVICES; d++)
            cfg->compute_pct[d] = (int)pct[d];
    }
    if (env->ctx_bytes && *env->ctx_bytes && shim_parse_bytes(env->ctx_bytes, &cfg->ctx_bytes))
        return ts_err_set(err, TS_EINVAL, "%s: \"%s\" is not a byte count", TS_SHIM_ENV_CTX_BYTES,
                          env->ctx_bytes);
    if (env->ledger && *env->ledger) {
        const char *l = env->ledger;
        int n = l[0] == '/' ? snprintf(cfg->ledger, sizeof cfg->ledger, "%s", l)
                            : snprintf(cfg->ledger, sizeof cfg->ledger, "%s/%s",
                                       TS_SHIM_LEDGER_DIR, l);
        if (n < 0 || (size_t)n >= sizeof cfg->ledger)
            return ts_err_set(err, TS_EINVAL, "%s: path longer than %zu characters",
                              TS_SHIM_ENV_LEDGER, sizeof cfg->ledger - 1);
        if (l[0] != '/' && strchr(l, '/'))
            return ts_err_set(err, TS_EINVAL, "%s: \"%s\": a name has no '/' (or give an "
                              "absolute path)", TS_SHIM_ENV_LEDGER, l);
    }
    if (env->driver && *env->driver) {
        if (strlen(env->driver) >= sizeof cfg->driver)
            return ts_err_set(err, TS_EINVAL, "%s: path longer than %zu characters",
                              TS_SHIM_ENV_DRIVER, sizeof cfg->driver - 1);
        strcpy(cfg->driver, env->driver);
    }
    for (int d = 0; d < TS_SHIM_MAX_DEVICES; d++) {
        cfg->mem_on |= cfg->mem_limit[d] >= 0;
        cfg->compute_on |= cfg->compute_pct[d] < COMPUTE_PCT_MAX;
    }
    return 0;
}

int shim_config_parse(const ts_shim_env *env, ts_shim_config *cfg, ts_err *err)
{
    pass_through(cfg);
    int rc = parse(env, cfg, err);
    if (rc) {
        char driver[TS_SHIM_PATH_MAX];
        strcpy(driver, cfg->driver);
        pass_through(cfg);
        strcpy(cfg->driver, driver); /* the driver is still needed to pass through */
    }
    return rc;
}
