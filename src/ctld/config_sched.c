/*
 * config_sched.c - the scheduling keys of tesserad's configuration
 * (docs/tesserad.md, docs/scheduler.md): `scheduler` (the cycle's interval,
 * limits, policy and per-GPU CPU/memory defaults), `stragglers`, `idle`'s
 * per-tenant windows and `nccl_qos`.
 *
 * Apart from config.c because these keys fill ts_sched_config and the
 * policy knobs the scheduler reads, while config.c reads where the daemon
 * listens, stores and trusts; both walk the file the same way
 * (config_walk.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctld/config_walk.h"
#include "ctld/ctld.h"
#include "tessera/model.h"
#include "tessera/sched.h"

/* MODEL: {cpu_milli, memory_mib} per GPU, into two per-model arrays. */
static int per_gpu(cfg_ctx *x, const yaml_node_t *map, const char *path, int64_t *cpu,
                   int64_t *mem)
{
    if (map->type != YAML_MAPPING_NODE)
        return ts_yaml_fail_got(&x->D, map, path, "a mapping of GPU model to limits");
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
         p++) {
        yaml_node_t *k = ts_yaml_node(&x->D, p->key), *v = ts_yaml_node(&x->D, p->value);
        const char *model = ts_yaml_scalar(k);
        int m = model ? ts_gpu_model_lookup(model) : -1;
        char sub[256];
        ts_yaml_pathf(sub, sizeof sub, "%s.%s", path, model ? model : "?");
        if (m < 0)
            return ts_yaml_fail(&x->D, k, TS_EINVAL, "%s: unknown GPU model", sub);
        static const char *const keys[] = {"cpu_milli", "memory_mib"};
        yaml_node_t *vals[2];
        int rc = ts_yaml_map_fields(&x->D, v, sub, keys, 2, vals);
        char fp[300];
        ts_yaml_pathf(fp, sizeof fp, "%s.cpu_milli", sub);
        if (rc == 0 && vals[0])
            rc = ts_yaml_get_int(&x->D, vals[0], fp, 0, 100000000, "0..100000000", &cpu[m]);
        ts_yaml_pathf(fp, sizeof fp, "%s.memory_mib", sub);
        if (rc == 0 && vals[1])
            rc = ts_yaml_get_int(&x->D, vals[1], fp, 0, 1000000000, "0..1000000000", &mem[m]);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* A plain decimal number in lo..hi (e.g. 1.5), else a "got" error naming path. */
static int get_number(cfg_ctx *x, const yaml_node_t *n, const char *path, double lo, double hi,
                      const char *want, double *out)
{
    const char *t = ts_yaml_scalar(n);
    char *end = NULL;
    double f = t ? strtod(t, &end) : 0.0;
    if (!t || end == t || *end != '\0' || !(f >= lo && f <= hi))
        return ts_yaml_fail_got(&x->D, n, path, want);
    *out = f;
    return 0;
}

/* scheduler.las: {level_gpu_hours, levels, promote_factor, split_gpu_hours,
 * split_backlog, split_min_runtime, split_max_preemptions_per_hour,
 * split_cross_tier, split_horizon, split_min_gpu_hours, split_mid_gpu_hours}
 * (docs/scheduler.md) */
static int las_parse(cfg_ctx *x, const yaml_node_t *n, ts_sched_config *sc)
{
    static const char *const keys[] = {"level_gpu_hours",
                                       "levels",
                                       "promote_factor",
                                       "split_gpu_hours",
                                       "split_backlog",
                                       "split_min_runtime",
                                       "split_max_preemptions_per_hour",
                                       "split_cross_tier",
                                       "split_horizon",
                                       "split_min_gpu_hours",
                                       "split_mid_gpu_hours"};
    enum { NKEYS = (int)(sizeof keys / sizeof keys[0]) };
    yaml_node_t *v[NKEYS];
    int rc = ts_yaml_map_fields(&x->D, n, "scheduler.las", keys, NKEYS, v);
    double h = 0.0;
    int64_t iv;
    if (rc == 0 && v[0] &&
        (rc = get_number(x, v[0], "scheduler.las.level_gpu_hours", 0.001, 1e6,
                         "a number of GPU-hours, 0.001..1000000", &h)) == 0)
        sc->las_level_gpu_s = h * 3600.0;
    if (rc == 0 && v[1] &&
        (rc = ts_yaml_get_int(&x->D, v[1], "scheduler.las.levels", 1, TS_LAS_LEVELS_MAX, "1..8",
                              &iv)) == 0)
        sc->las_levels = (int)iv;
    if (rc == 0 && v[2])
        rc = get_number(x, v[2], "scheduler.las.promote_factor", 0.0, 1e6,
                        "a number >= 0 (0: never promote)", &sc->las_promote_factor);
    if (rc == 0 && v[3] &&
        (rc = get_number(x, v[3], "scheduler.las.split_gpu_hours", 0.0, 1e6,
                         "a number of GPU-hours, 0..1000000 (0: never split)", &h)) == 0)
        sc->las_split_gpu_s = h * 3600.0;
    if (rc == 0 && v[4])
        rc = get_number(x, v[4], "scheduler.las.split_backlog", 0.0, 1e6,
                        "a number of first levels per GPU, 0..1000000 (0: any fresh job waiting)",
                        &sc->las_split_backlog);
    if (rc == 0 && v[5])
        rc = ctld_cfg_dur(x, v[5], "scheduler.las.split_min_runtime",
                          &sc->las_split_min_runtime_s);
    if (rc == 0 && v[6] &&
        (rc = ts_yaml_get_int(&x->D, v[6], "scheduler.las.split_max_preemptions_per_hour", 0,
                              1000, "0..1000", &iv)) == 0)
        sc->las_split_max_preemptions_hour = (int)iv;
    if (rc == 0 && v[7])
        rc = ctld_cfg_bool(x, v[7], "scheduler.las.split_cross_tier", &sc->las_split_cross_tier);
    if (rc == 0 && v[8])
        rc = ctld_cfg_dur(x, v[8], "scheduler.las.split_horizon", &sc->las_split_horizon_s);
    if (rc == 0 && v[9] &&
        (rc = get_number(x, v[9], "scheduler.las.split_min_gpu_hours", 0.0, 1e6,
                         "a number of GPU-hours, 0..1000000", &h)) == 0)
        sc->las_split_min_gpu_s = h * 3600.0;
    if (rc == 0 && v[10] &&
        (rc = get_number(x, v[10], "scheduler.las.split_mid_gpu_hours", 0.0, 1e6,
                         "a number of GPU-hours, 0..1000000 (0: one step)", &h)) == 0)
        sc->las_split_mid_gpu_s = h * 3600.0;
    return rc;
}

/* scheduler.priority_classes: {name: priority} */
static int classes_read(cfg_ctx *x, yaml_node_t *m, const char *path)
{
    ctld_config *cfg = x->cfg;
    if (m->type != YAML_MAPPING_NODE)
        return ts_yaml_fail_got(&x->D, m, path, "a mapping of class name to integer");
    cfg->nclasses = 0;
    int rc = 0;
    for (yaml_node_pair_t *p = m->data.mapping.pairs.start;
         rc == 0 && p < m->data.mapping.pairs.top; p++) {
        yaml_node_t *k = ts_yaml_node(&x->D, p->key);
        const char *name = ts_yaml_scalar(k);
        if (!name || !ts_yaml_name_ok(name, TS_SPEC_NAME_MAX))
            return ts_yaml_fail_got(&x->D, k, path, "a class name");
        if (cfg->nclasses == CTLD_MAX_PRIORITY_CLASSES)
            return ts_yaml_fail(&x->D, k, TS_EINVAL, "%s: at most %d classes", path,
                                CTLD_MAX_PRIORITY_CLASSES);
        char sub[128];
        ts_yaml_pathf(sub, sizeof sub, "%s.%s", path, name);
        int64_t iv = 0;
        rc = ts_yaml_get_int(&x->D, ts_yaml_node(&x->D, p->value), sub, TS_PRIORITY_MIN,
                             TS_PRIORITY_MAX, "an integer -1000000..1000000", &iv);
        snprintf(cfg->classes[cfg->nclasses].name, TS_SPEC_NAME_MAX, "%s", name);
        cfg->classes[cfg->nclasses++].value = (int)iv;
    }
    return rc;
}

static int reserve_read(cfg_ctx *x, yaml_node_t *v, const char *path)
{
    ts_sched_config *sc = &x->cfg->sched;
    return per_gpu(x, v, path, sc->reserve_cpu_milli_per_gpu, sc->reserve_mem_mib_per_gpu);
}

static int cap_read(cfg_ctx *x, yaml_node_t *v, const char *path)
{
    ts_sched_config *sc = &x->cfg->sched;
    return per_gpu(x, v, path, sc->cap_cpu_milli_per_gpu, sc->cap_mem_mib_per_gpu);
}

/* a placement policy by name: sched.h's scorers */
static int placement_read(cfg_ctx *x, yaml_node_t *v, const char *path)
{
    const char *name = ts_yaml_scalar(v);
    x->cfg->sched.placement = name ? ts_scorer_find(name) : NULL;
    if (!x->cfg->sched.placement)
        return ts_yaml_fail_got(&x->D, v, path,
                                "tessera, fgd, bestfit, dotprod, packing, clustering or random");
    return 0;
}

static int order_read(cfg_ctx *x, yaml_node_t *v, const char *path)
{
    int order = ts_order_parse(ts_yaml_scalar(v));
    if (order < 0)
        return ts_yaml_fail_got(&x->D, v, path, "las or fifo");
    x->cfg->sched.order = order;
    return 0;
}

static int las_read(cfg_ctx *x, yaml_node_t *v, const char *path)
{
    (void)path;
    return las_parse(x, v, &x->cfg->sched);
}

static const cfg_field SCHEDULER[] = {
    CFG_DUR("interval", interval_s),
    CFG_DUR("default_time_limit", sched.default_time_limit_s),
    CFG_DUR("starve_after", sched.starve_after_s),
    CFG_DUR("min_runtime", sched.min_runtime_s),
    CFG_INT("max_preemptions_per_hour", 0, 1000, sched.max_preemptions_hour),
    CFG_DUR("grace", sched.default_grace_s),
    CFG_DUR("backoff", sched.backoff_base_s),
    CFG_INT("preemptors_per_cycle", 0, 1000, sched.max_preemptors_cycle),
    CFG_DUR("half_life", half_life_s),
    CFG_READ("priority_classes", classes_read),
    CFG_READ("reserve_per_gpu", reserve_read),
    CFG_READ("cap_per_gpu", cap_read),
    CFG_READ("placement", placement_read),
    CFG_READ("order", order_read),
    CFG_READ("las", las_read),
    CFG_DUR("reclaim_min_runtime", sched.reclaim_min_runtime_s),
    CFG_BOOL("fair_reclaim", sched.fair_reclaim),
    CFG_BOOL("fair_moves", sched.fair_moves),
};

int ctld_cfg_scheduler(cfg_ctx *x, yaml_node_t *n)
{
    ctld_config *cfg = x->cfg;
    int rc = ctld_cfg_map(x, n, "scheduler", SCHEDULER,
                          (int)(sizeof SCHEDULER / sizeof SCHEDULER[0]));
    if (rc == 0 && (cfg->interval_s <= 0.0 || cfg->half_life_s <= 0.0))
        rc = ts_yaml_fail(&x->D, n, TS_EINVAL, "scheduler: interval and half_life must be > 0");
    return rc;
}

/* stragglers: {factor, window, drain: [tenant...]} */
int ctld_cfg_stragglers(cfg_ctx *x, yaml_node_t *m)
{
    static const char *const sk[] = {"factor", "window", "drain"};
    yaml_node_t *sv[3];
    ctld_config *cfg = x->cfg;
    int rc = ts_yaml_map_fields(&x->D, m, "stragglers", sk, 3, sv);
    if (rc == 0 && sv[0]) {
        const char *t = ts_yaml_scalar(sv[0]);
        char *end = NULL;
        double f = t ? strtod(t, &end) : 0.0;
        if (!t || end == t || *end != '\0' || !(f > 1.0 && f <= 100.0))
            return ts_yaml_fail_got(&x->D, sv[0], "stragglers.factor",
                                    "a number above 1 (e.g. 1.5: 50 % slower than the median)");
        cfg->straggler_factor = f;
    }
    if (rc == 0 && sv[1])
        rc = ctld_cfg_dur(x, sv[1], "stragglers.window", &cfg->straggler_window_s);
    if (rc == 0 && sv[2]) {
        if (sv[2]->type != YAML_SEQUENCE_NODE)
            return ts_yaml_fail_got(&x->D, sv[2], "stragglers.drain", "a list of tenant names");
        int n = (int)(sv[2]->data.sequence.items.top - sv[2]->data.sequence.items.start);
        cfg->straggler_drain = calloc((size_t)(n > 0 ? n : 1), sizeof *cfg->straggler_drain);
        if (!cfg->straggler_drain)
            return TS_ENOMEM;
        for (int i = 0; i < n; i++) {
            yaml_node_t *it = ts_yaml_node(&x->D, sv[2]->data.sequence.items.start[i]);
            const char *name = ts_yaml_scalar(it);
            if (!name || !ts_yaml_name_ok(name, TS_NAME_MAX))
                return ts_yaml_fail_got(&x->D, it, "stragglers.drain[]", "a tenant name");
            if (!(cfg->straggler_drain[cfg->nstraggler_drain++] = strdup(name)))
                return TS_ENOMEM;
        }
    }
    return rc;
}

/* idle.tenants: {tenant: duration} */
static int idle_tenants_read(cfg_ctx *x, yaml_node_t *m, const char *where)
{
    ctld_config *cfg = x->cfg;
    if (m->type != YAML_MAPPING_NODE)
        return ts_yaml_fail_got(&x->D, m, where, "a mapping of tenant names to durations");
    int n = (int)(m->data.mapping.pairs.top - m->data.mapping.pairs.start);
    cfg->idle_tenant = calloc((size_t)(n > 0 ? n : 1), sizeof *cfg->idle_tenant);
    cfg->idle_tenant_s = calloc((size_t)(n > 0 ? n : 1), sizeof *cfg->idle_tenant_s);
    if (!cfg->idle_tenant || !cfg->idle_tenant_s)
        return TS_ENOMEM;
    for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
        yaml_node_t *k = ts_yaml_node(&x->D, p->key), *v = ts_yaml_node(&x->D, p->value);
        const char *name = ts_yaml_scalar(k);
        if (!name || !ts_yaml_name_ok(name, TS_NAME_MAX))
            return ts_yaml_fail_got(&x->D, k, where, "a tenant name");
        char path[TS_NAME_MAX + 16];
        ts_yaml_pathf(path, sizeof path, "%s.%s", where, name);
        for (int i = 0; i < cfg->nidle_tenant; i++)
            if (strcmp(cfg->idle_tenant[i], name) == 0)
                return ts_yaml_fail(&x->D, k, TS_EINVAL, "%s: given twice", path);
        int rc = ctld_cfg_dur(x, v, path, &cfg->idle_tenant_s[cfg->nidle_tenant]);
        if (rc != 0)
            return rc;
        if (!(cfg->idle_tenant[cfg->nidle_tenant] = strdup(name)))
            return TS_ENOMEM;
        cfg->nidle_tenant++;
    }
    return 0;
}

/* idle: {threshold_pct, guaranteed, opportunistic, tenants} (docs/tesserad.md) */
static const cfg_field IDLE[] = {
    CFG_INT_F64("threshold_pct", 0, 100, idle_threshold_pct),
    CFG_DUR("guaranteed", idle_window_s[0]),
    CFG_DUR("opportunistic", idle_window_s[1]),
    CFG_READ("tenants", idle_tenants_read),
};

int ctld_cfg_idle(cfg_ctx *x, yaml_node_t *m)
{
    return ctld_cfg_map(x, m, "idle", IDLE, (int)(sizeof IDLE / sizeof IDLE[0]));
}

/* nccl_qos: {tenant: {tc, sl}} */
int ctld_cfg_qos(cfg_ctx *x, yaml_node_t *m)
{
    ctld_config *cfg = x->cfg;
    if (m->type != YAML_MAPPING_NODE)
        return ts_yaml_fail_got(&x->D, m, "nccl_qos", "a mapping of tenant names to {tc, sl}");
    for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
        yaml_node_t *k = ts_yaml_node(&x->D, p->key), *v = ts_yaml_node(&x->D, p->value);
        const char *name = ts_yaml_scalar(k);
        if (!name || !ts_yaml_name_ok(name, TS_NAME_MAX))
            return ts_yaml_fail_got(&x->D, k, "nccl_qos", "a tenant name");
        char path[TS_NAME_MAX + 16];
        ts_yaml_pathf(path, sizeof path, "nccl_qos.%s", name);
        for (int i = 0; i < cfg->nqos; i++)
            if (strcmp(cfg->qos[i].tenant, name) == 0)
                return ts_yaml_fail(&x->D, k, TS_EINVAL, "%s: given twice", path);
        if (cfg->nqos == CTLD_MAX_QOS)
            return ts_yaml_fail(&x->D, k, TS_EINVAL, "nccl_qos: at most %d tenants",
                                CTLD_MAX_QOS);
        static const char *const qk[] = {"tc", "sl"};
        yaml_node_t *qv[2];
        int rc = ts_yaml_map_fields(&x->D, v, path, qk, 2, qv);
        if (rc != 0)
            return rc;
        ctld_qos *q = &cfg->qos[cfg->nqos];
        snprintf(q->tenant, sizeof q->tenant, "%s", name);
        q->tc = q->sl = -1;
        int64_t iv;
        char fp[TS_NAME_MAX + 24];
        /* InfiniBand: traffic class is the 8-bit GRH field, service level 4 bits */
        ts_yaml_pathf(fp, sizeof fp, "%s.tc", path);
        if (qv[0] && (rc = ts_yaml_get_int(&x->D, qv[0], fp, 0, 255, "0..255", &iv)) != 0)
            return rc;
        if (qv[0])
            q->tc = (int)iv;
        ts_yaml_pathf(fp, sizeof fp, "%s.sl", path);
        if (qv[1] && (rc = ts_yaml_get_int(&x->D, qv[1], fp, 0, 15, "0..15", &iv)) != 0)
            return rc;
        if (qv[1])
            q->sl = (int)iv;
        cfg->nqos++;
    }
    return 0;
}
