/*
 * config.c - tesserad's configuration file (docs/tesserad.md, key by key).
 *
 * A closed schema read with the project's libyaml helpers: unknown keys and
 * repeated keys are errors, every error is "file:line: key.path: why". Paths
 * in the file are relative to the file's own folder. Defaults make a file
 * with only `cluster:` a working configuration.
 */
#include <assert.h>
#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctld/config_walk.h"
#include "ctld/ctld.h"
#include "model/yaml_doc.h"
#include "tessera/model.h"
#include "tessera/sched.h"


int ctld_parse_duration(const char *s, double *out)
{
    if (!s || !*s)
        return TS_EINVAL;
    double total = 0.0;
    const char *p = s;
    bool any = false;
    while (*p) {
        char *end;
        errno = 0;
        double v = strtod(p, &end);
        if (end == p || errno != 0 || v < 0.0 || v != v)
            return TS_EINVAL;
        p = end;
        double unit = 1.0;
        if (*p == 's') {
            p++;
        } else if (*p == 'm') {
            unit = 60.0;
            p++;
        } else if (*p == 'h') {
            unit = 3600.0;
            p++;
        } else if (*p == 'd') {
            unit = 86400.0;
            p++;
        } else if (*p != '\0' || any) {
            return TS_EINVAL;
        }
        total += v * unit;
        any = true;
    }
    if (total > 1e10)
        return TS_EINVAL;
    *out = total;
    return 0;
}

static int get_str(cfg_ctx *x, const yaml_node_t *n, const char *path, char *out, size_t size)
{
    const char *v = ts_yaml_scalar(n);
    if (!v || !*v || strlen(v) >= size)
        return ts_yaml_fail_got(&x->D, n, path, "a non-empty string");
    snprintf(out, size, "%s", v);
    return 0;
}

static int get_path(cfg_ctx *x, const yaml_node_t *n, const char *path, char *out, size_t size)
{
    char v[CTLD_PATH_MAX];
    int rc = get_str(x, n, path, v, sizeof v);
    if (rc != 0)
        return rc;
    int k = v[0] == '/' ? snprintf(out, size, "%s", v) : snprintf(out, size, "%s/%s", x->base, v);
    if (k < 0 || (size_t)k >= size)
        return ts_yaml_fail(&x->D, n, TS_EINVAL, "%s: path too long", path);
    return 0;
}

int ctld_cfg_path(cfg_ctx *x, const yaml_node_t *n, const char *path, char *out, size_t size)
{
    return get_path(x, n, path, out, size);
}

int ctld_cfg_dur(cfg_ctx *x, const yaml_node_t *n, const char *path, double *out)
{
    if (ctld_parse_duration(ts_yaml_scalar(n), out) != 0)
        return ts_yaml_fail_got(&x->D, n, path, "a duration such as 90s, 15m, 2h or 7d");
    return 0;
}

/* One member of a ctld_cfg_map table, given as v. */
static int cfg_field_read(cfg_ctx *x, const cfg_field *f, yaml_node_t *v, const char *path)
{
    void *at = (char *)x->cfg + f->off;
    double d;
    int64_t iv;
    int rc;
    switch (f->kind) {
    case CFG_KIND_READ:
        return f->read(x, v, path);
    case CFG_KIND_BOOL:
        return ctld_cfg_bool(x, v, path, (bool *)at);
    case CFG_KIND_DUR:
        if ((rc = ctld_cfg_dur(x, v, path, &d)) != 0)
            return rc;
        if (f->hi > 0 && (d < (double)f->lo || d > (double)f->hi))
            return ts_yaml_fail(&x->D, v, TS_EINVAL, "%s: %s", path, f->want);
        *(double *)at = d;
        return 0;
    case CFG_KIND_INT:
    case CFG_KIND_INT_F64:
    case CFG_KIND_MIB:
        break;
    }
    if ((rc = ts_yaml_get_int(&x->D, v, path, f->lo, f->hi, f->want, &iv)) != 0)
        return rc;
    if (f->kind == CFG_KIND_INT)
        *(int *)at = (int)iv;
    else if (f->kind == CFG_KIND_INT_F64)
        *(double *)at = (double)iv;
    else
        *(int64_t *)at = iv << 20; /* MiB */
    return 0;
}

int ctld_cfg_map(cfg_ctx *x, yaml_node_t *n, const char *path, const cfg_field *fields, int nf)
{
    const char *keys[CFG_FIELDS_MAX] = {0};
    yaml_node_t *v[CFG_FIELDS_MAX];
    assert(nf <= CFG_FIELDS_MAX);
    for (int i = 0; i < nf; i++)
        keys[i] = fields[i].key;
    int rc = ts_yaml_map_fields(&x->D, n, path, keys, nf, v);
    for (int i = 0; rc == 0 && i < nf; i++) {
        char sub[256];
        ts_yaml_pathf(sub, sizeof sub, "%s.%s", path, fields[i].key);
        if (v[i])
            rc = cfg_field_read(x, &fields[i], v[i], sub);
    }
    return rc;
}

int ctld_cfg_bool(cfg_ctx *x, const yaml_node_t *n, const char *path, bool *out)
{
    const char *v = ts_yaml_scalar(n);
    if (v && strcmp(v, "true") == 0)
        *out = true;
    else if (v && strcmp(v, "false") == 0)
        *out = false;
    else
        return ts_yaml_fail_got(&x->D, n, path, "true or false");
    return 0;
}

static int listen_parse(cfg_ctx *x, const yaml_node_t *n)
{
    const char *v = ts_yaml_scalar(n);
    const char *colon = v ? strrchr(v, ':') : NULL;
    char *end;
    long port = colon ? strtol(colon + 1, &end, 10) : -1;
    size_t hl = colon ? (size_t)(colon - v) : 0;
    if (!colon || *end || port < 0 || port > 65535 || hl == 0 ||
        hl >= sizeof x->cfg->listen_addr)
        return ts_yaml_fail_got(&x->D, n, "listen", "ADDRESS:PORT such as 127.0.0.1:8460");
    memcpy(x->cfg->listen_addr, v, hl);
    x->cfg->listen_addr[hl] = '\0';
    x->cfg->listen_port = (int)port;
    return 0;
}

/* ha: {lease, renew, advertise_url} (docs/ha.md). The leader gives up a
 * fifth of the lease before it could expire elsewhere; at least two
 * renewals must fit in what is left. */
static int ha_parse(cfg_ctx *x, yaml_node_t *m)
{
    static const char *const hk[] = {"lease", "renew", "advertise_url"};
    yaml_node_t *hv[3];
    ctld_config *cfg = x->cfg;
    cfg->ha_on = true;
    int rc = ts_yaml_map_fields(&x->D, m, "ha", hk, 3, hv);
    if (rc == 0 && hv[0] && (rc = ctld_cfg_dur(x, hv[0], "ha.lease", &cfg->ha_lease_s)) == 0 &&
        (cfg->ha_lease_s < 1.0 || cfg->ha_lease_s > 3600.0))
        rc = ts_yaml_fail(&x->D, hv[0], TS_EINVAL, "ha.lease: must be 1s..1h");
    if (rc == 0 && hv[1] && (rc = ctld_cfg_dur(x, hv[1], "ha.renew", &cfg->ha_renew_s)) == 0 &&
        cfg->ha_renew_s < 0.1)
        rc = ts_yaml_fail(&x->D, hv[1], TS_EINVAL, "ha.renew: must be at least 0.1s");
    double usable = cfg->ha_lease_s * 0.8; /* CTLD_HA_MARGIN_FRACTION 0.2 (ha.h) */
    if (rc == 0 && 2.0 * cfg->ha_renew_s > usable)
        rc = ts_yaml_fail(&x->D, hv[1] ? hv[1] : m, TS_EINVAL,
                          "ha.renew: %gs is too long for ha.lease %gs: want renew <= %gs (two "
                          "renewals within the lease less its fifth of margin, docs/ha.md)",
                          cfg->ha_renew_s, cfg->ha_lease_s, usable / 2.0);
    if (rc == 0 && hv[2]) {
        rc = get_str(x, hv[2], "ha.advertise_url", cfg->ha_advertise_url,
                     sizeof cfg->ha_advertise_url);
        if (rc == 0 && strncmp(cfg->ha_advertise_url, "http://", 7) != 0 &&
            strncmp(cfg->ha_advertise_url, "https://", 8) != 0)
            rc = ts_yaml_fail_got(&x->D, hv[2], "ha.advertise_url",
                                  "an http:// or https:// URL clients can reach");
    }
    return rc;
}

/* oidc.unix_users: {name: uid, ...} */
static int oidc_users_parse(cfg_ctx *x, yaml_node_t *m, ctld_oidc_config *o)
{
    if (m->type != YAML_MAPPING_NODE)
        return ts_yaml_fail_got(&x->D, m, "oidc.unix_users", "a mapping of Unix user: uid");
    int n = (int)(m->data.mapping.pairs.top - m->data.mapping.pairs.start);
    if (n > CTLD_OIDC_USERS_MAX)
        return ts_yaml_fail(&x->D, m, TS_EINVAL, "oidc.unix_users: more than %d users",
                            CTLD_OIDC_USERS_MAX);
    o->unix_users = calloc((size_t)(n > 0 ? n : 1), sizeof *o->unix_users);
    o->unix_uids = calloc((size_t)(n > 0 ? n : 1), sizeof *o->unix_uids);
    if (!o->unix_users || !o->unix_uids)
        return TS_ENOMEM;
    char path[CTLD_OIDC_CLAIM_MAX + 32];
    for (int i = 0; i < n; i++) {
        yaml_node_pair_t *p = &m->data.mapping.pairs.start[i];
        yaml_node_t *k = ts_yaml_node(&x->D, p->key);
        int rc = get_str(x, k, "oidc.unix_users", o->unix_users[i], sizeof o->unix_users[0]);
        ts_yaml_pathf(path, sizeof path, "oidc.unix_users.%s", o->unix_users[i]);
        if (rc == 0)
            rc = ts_yaml_get_int(&x->D, ts_yaml_node(&x->D, p->value), path, 0, 4294967294LL,
                                 "a uid 0..4294967294", &o->unix_uids[i]);
        if (rc != 0)
            return rc;
        o->nunix = i + 1;
    }
    return 0;
}

static int oidc_parse(cfg_ctx *x, yaml_node_t *m)
{
    enum { O_ISS, O_AUD, O_FILE, O_URL, O_USER, O_TENANT, O_ROLE, O_UNIX, O_USERS, O_N };
    static const char *const ok[O_N] = {"issuer",       "audience",        "jwks_file",
                                        "jwks_url",     "user_claim",      "tenant_claim",
                                        "role_claim",   "unix_user_claim", "unix_users"};
    yaml_node_t *ov[O_N];
    ctld_oidc_config *o = &x->cfg->oidc;
    int rc = ts_yaml_map_fields(&x->D, m, "oidc", ok, O_N, ov);
    if (rc == 0 && (!ov[O_ISS] || !ov[O_AUD]))
        rc = ts_yaml_fail(&x->D, m, TS_EINVAL, "oidc: needs issuer and audience");
    if (rc == 0 && ov[O_FILE] && ov[O_URL])
        rc = ts_yaml_fail(&x->D, m, TS_EINVAL, "oidc: jwks_file or jwks_url, not both (neither: "
                          "the issuer's discovery document names its keys)");
    if (rc == 0)
        rc = get_str(x, ov[O_ISS], "oidc.issuer", o->issuer, sizeof o->issuer);
    if (rc == 0 && !ov[O_FILE] && !ov[O_URL] && strncmp(o->issuer, "https://", 8) != 0 &&
        strncmp(o->issuer, "http://", 7) != 0)
        rc = ts_yaml_fail_got(&x->D, ov[O_ISS], "oidc.issuer", "an http(s):// URL whose "
                              "/.well-known/openid-configuration names its keys (or give "
                              "jwks_file or jwks_url)");
    if (rc == 0)
        rc = get_str(x, ov[O_AUD], "oidc.audience", o->audience, sizeof o->audience);
    if (rc == 0 && ov[O_FILE])
        rc = get_path(x, ov[O_FILE], "oidc.jwks_file", o->jwks_file, sizeof o->jwks_file);
    if (rc == 0 && ov[O_URL]) {
        rc = get_str(x, ov[O_URL], "oidc.jwks_url", o->jwks_url, sizeof o->jwks_url);
        if (rc == 0 && strncmp(o->jwks_url, "https://", 8) != 0 &&
            strncmp(o->jwks_url, "http://", 7) != 0)
            rc = ts_yaml_fail_got(&x->D, ov[O_URL], "oidc.jwks_url", "an http(s):// URL");
    }
    struct { int k; char *out; const char *path; } claims[] = {
        {O_USER, o->user_claim, "oidc.user_claim"},
        {O_TENANT, o->tenant_claim, "oidc.tenant_claim"},
        {O_ROLE, o->role_claim, "oidc.role_claim"},
        {O_UNIX, o->unix_user_claim, "oidc.unix_user_claim"},
    };
    for (size_t i = 0; rc == 0 && i < sizeof claims / sizeof claims[0]; i++)
        if (ov[claims[i].k])
            rc = get_str(x, ov[claims[i].k], claims[i].path, claims[i].out, CTLD_OIDC_CLAIM_MAX);
    if (rc == 0 && ov[O_USERS])
        rc = oidc_users_parse(x, ov[O_USERS], o);
    if (rc == 0 && o->unix_user_claim[0] && o->nunix == 0)
        rc = ts_yaml_fail(&x->D, m, TS_EINVAL, "oidc.unix_users: required with unix_user_claim "
                          "(the Unix users a claim may name, with their uids)");
    o->on = rc == 0;
    return rc;
}

/* mail: {relay: HOST:PORT, from: ADDRESS, starttls: false, ca_file: PATH}
 * (docs/tesserad.md "mail"): the SMTP relay jobs' notify.mail goes through. */
static int mail_parse(cfg_ctx *x, yaml_node_t *m)
{
    static const char *const mk[] = {"relay", "from", "starttls", "ca_file"};
    yaml_node_t *mv[4];
    ctld_config *cfg = x->cfg;
    int rc = ts_yaml_map_fields(&x->D, m, "mail", mk, 4, mv);
    if (rc == 0 && (!mv[0] || !mv[1]))
        rc = ts_yaml_fail(&x->D, m, TS_EINVAL, "mail: needs relay (host:port) and from (an "
                          "address)");
    if (rc == 0)
        rc = get_str(x, mv[0], "mail.relay", cfg->mail_relay, sizeof cfg->mail_relay);
    const char *colon = rc == 0 ? strrchr(cfg->mail_relay, ':') : NULL;
    if (rc == 0 && (!colon || colon == cfg->mail_relay || atoi(colon + 1) < 1 ||
                    atoi(colon + 1) > 65535 || strpbrk(cfg->mail_relay, " /@")))
        rc = ts_yaml_fail_got(&x->D, mv[0], "mail.relay", "host:port (port 1..65535)");
    if (rc == 0)
        rc = get_str(x, mv[1], "mail.from", cfg->mail_from, sizeof cfg->mail_from);
    if (rc == 0 && (!strchr(cfg->mail_from, '@') || strpbrk(cfg->mail_from, " <>\r\n,")))
        rc = ts_yaml_fail_got(&x->D, mv[1], "mail.from", "an address user@domain");
    if (rc == 0 && mv[2])
        rc = ctld_cfg_bool(x, mv[2], "mail.starttls", &cfg->mail_starttls);
    if (rc == 0 && mv[3])
        rc = get_path(x, mv[3], "mail.ca_file", cfg->mail_ca_file, sizeof cfg->mail_ca_file);
    if (rc == 0 && mv[3] && !cfg->mail_starttls)
        rc = ts_yaml_fail(&x->D, mv[3], TS_EINVAL, "mail.ca_file: only with starttls: true "
                          "(it verifies the relay's certificate)");
    return rc;
}

/* ---- the top-level keys, one function each -------------------------------- */

static int listen_key(cfg_ctx *x, yaml_node_t *v)
{
    return listen_parse(x, v);
}

static int state_dir_key(cfg_ctx *x, yaml_node_t *v)
{
    return get_path(x, v, "state_dir", x->cfg->state_dir, sizeof x->cfg->state_dir);
}

/* A database URL as it is, or a SQLite file relative to the config's folder. */
static int store_key(cfg_ctx *x, yaml_node_t *v)
{
    ctld_config *cfg = x->cfg;
    const char *u = ts_yaml_scalar(v);
    if (u && (strncmp(u, "postgresql://", 13) == 0 || strncmp(u, "postgres://", 11) == 0 ||
              strncmp(u, "sqlite:", 7) == 0))
        return get_str(x, v, "store", cfg->store_url, sizeof cfg->store_url);
    return get_path(x, v, "store", cfg->store_url, sizeof cfg->store_url);
}

static int cluster_key(cfg_ctx *x, yaml_node_t *v)
{
    return get_path(x, v, "cluster", x->cfg->cluster_file, sizeof x->cfg->cluster_file);
}

static int tenants_key(cfg_ctx *x, yaml_node_t *v)
{
    return get_path(x, v, "tenants", x->cfg->tenants_file, sizeof x->cfg->tenants_file);
}

/* virtual_nodes: all, none or a list of node names. */
static int virtual_nodes_key(cfg_ctx *x, yaml_node_t *v)
{
    ctld_config *cfg = x->cfg;
    int rc = 0;
    const char *s = ts_yaml_scalar(v);
    if (s && strcmp(s, "all") == 0) {
        cfg->virtual_all = true;
    } else if (s && strcmp(s, "none") == 0) {
        cfg->virtual_all = false;
    } else if (v->type == YAML_SEQUENCE_NODE) {
        int n = (int)(v->data.sequence.items.top - v->data.sequence.items.start);
        cfg->virtual_nodes = calloc((size_t)(n > 0 ? n : 1), sizeof *cfg->virtual_nodes);
        if (!cfg->virtual_nodes)
            return TS_ENOMEM;
        for (int i = 0; rc == 0 && i < n; i++) {
            yaml_node_t *it = ts_yaml_node(&x->D, v->data.sequence.items.start[i]);
            const char *name = ts_yaml_scalar(it);
            if (!name || !*name)
                return ts_yaml_fail_got(&x->D, it, "virtual_nodes[]", "a node name");
            cfg->virtual_nodes[cfg->nvirtual++] = strdup(name);
        }
    } else {
        rc = ts_yaml_fail_got(&x->D, v, "virtual_nodes", "all, none or a list of names");
    }
    return rc;
}

static int tls_key(cfg_ctx *x, yaml_node_t *v)
{
    ctld_config *cfg = x->cfg;
    static const char *const tk[] = {"cert", "key"};
    yaml_node_t *tv[2];
    int rc = ts_yaml_map_fields(&x->D, v, "tls", tk, 2, tv);
    if (rc == 0 && (!tv[0] || !tv[1]))
        rc = ts_yaml_fail(&x->D, v, TS_EINVAL, "tls: needs both cert and key");
    if (rc == 0)
        rc = get_path(x, tv[0], "tls.cert", cfg->tls_cert, sizeof cfg->tls_cert);
    if (rc == 0)
        rc = get_path(x, tv[1], "tls.key", cfg->tls_key, sizeof cfg->tls_key);
    return rc;
}

static int admin_token_file_key(cfg_ctx *x, yaml_node_t *v)
{
    return get_path(x, v, "admin_token_file", x->cfg->admin_token_file,
                    sizeof x->cfg->admin_token_file);
}

static int metrics_public_key(cfg_ctx *x, yaml_node_t *v)
{
    return ctld_cfg_bool(x, v, "metrics_public", &x->cfg->metrics_public);
}

/* limits: the front's rate, connection and queue caps (docs/tesserad.md). */
static const cfg_field LIMITS[] = {
    CFG_INT_F64("requests_per_s", 1, 1000000, rate_per_s),
    CFG_INT_F64("burst", 1, 10000000, rate_burst),
    CFG_INT("connections", 16, 1000000, conns_max),
    CFG_INT("connections_per_client", 1, 1000000, conns_per_client),
    CFG_DUR_IN("request_timeout", 1, 3600, "1s..1h", request_timeout_s),
    CFG_INT("queued_jobs_per_tenant", 1, 100000000, queued_per_tenant),
    CFG_INT("connections_per_token", 1, 1000000, conns_per_token),
    CFG_MIB("queued_spec_mib_per_tenant", 1, 16777216, queued_spec_bytes),
    CFG_INT("connections_per_tenant", 1, 1000000, conns_per_tenant),
    CFG_INT("tokens_per_tenant", 1, 1000000, tokens_per_tenant),
};

static int limits_key(cfg_ctx *x, yaml_node_t *v)
{
    return ctld_cfg_map(x, v, "limits", LIMITS, (int)(sizeof LIMITS / sizeof LIMITS[0]));
}

static int node_lost_after_key(cfg_ctx *x, yaml_node_t *v)
{
    int rc = ctld_cfg_dur(x, v, "node_lost_after", &x->cfg->node_lost_s);
    if (rc == 0 && x->cfg->node_lost_s < 1.0)
        rc = ts_yaml_fail(&x->D, v, TS_EINVAL, "node_lost_after: must be at least 1s");
    return rc;
}

static int checkpoint_dir_key(cfg_ctx *x, yaml_node_t *v)
{
    ctld_config *cfg = x->cfg;
    int rc = get_str(x, v, "checkpoint_dir", cfg->checkpoint_dir, sizeof cfg->checkpoint_dir);
    if (rc == 0 && cfg->checkpoint_dir[0] != '/')
        rc = ts_yaml_fail(&x->D, v, TS_EINVAL,
                          "checkpoint_dir: must be an absolute path (the same on every node)");
    return rc;
}

static int admin_unix_user_key(cfg_ctx *x, yaml_node_t *v)
{
    return get_str(x, v, "admin_unix_user", x->cfg->admin_unix_user,
                   sizeof x->cfg->admin_unix_user);
}

static int secrets_key_file_key(cfg_ctx *x, yaml_node_t *v)
{
    return get_path(x, v, "secrets_key_file", x->cfg->secrets_key_file,
                    sizeof x->cfg->secrets_key_file);
}

/*
 * The top-level keys in the order they are read (the first error is the one
 * reported, so the order is part of the behaviour); a key marked required
 * that is absent fails with its message at the top level.
 */
static const struct cfg_key {
    const char *name;
    int (*parse)(cfg_ctx *x, yaml_node_t *v);
    const char *required; /* the error when absent, or NULL */
} CFG_KEYS[] = {
    {"listen", listen_key, NULL},
    {"state_dir", state_dir_key, NULL},
    {"store", store_key, NULL},
    {"cluster", cluster_key, "cluster: required (the cluster file)"},
    {"tenants", tenants_key, NULL},
    {"virtual_nodes", virtual_nodes_key, NULL},
    {"tls", tls_key, NULL},
    {"admin_token_file", admin_token_file_key, NULL},
    {"metrics_public", metrics_public_key, NULL},
    {"limits", limits_key, NULL},
    {"scheduler", ctld_cfg_scheduler, NULL},
    {"node_lost_after", node_lost_after_key, NULL},
    {"idle", ctld_cfg_idle, NULL},
    {"stragglers", ctld_cfg_stragglers, NULL},
    {"checkpoint_dir", checkpoint_dir_key, NULL},
    {"nccl_qos", ctld_cfg_qos, NULL},
    {"ha", ha_parse, NULL},
    {"admin_unix_user", admin_unix_user_key, NULL},
    {"oidc", oidc_parse, NULL},
    {"secrets_key_file", secrets_key_file_key, NULL},
    {"network", ctld_cfg_network, NULL},
    {"mail", mail_parse, NULL},
    {"webhooks", ctld_cfg_webhooks, NULL},
};
enum { CFG_NKEYS = sizeof CFG_KEYS / sizeof CFG_KEYS[0] };

static int walk(void *p)
{
    cfg_ctx *x = p;
    const char *names[CFG_NKEYS];
    yaml_node_t *v[CFG_NKEYS];
    for (int i = 0; i < CFG_NKEYS; i++)
        names[i] = CFG_KEYS[i].name;
    yaml_node_t *root = yaml_document_get_root_node(x->D.doc);
    if (!root)
        return ts_yaml_fail(&x->D, NULL, TS_EINVAL, "cluster: required (the cluster file)");
    int rc = ts_yaml_map_fields(&x->D, root, "", names, CFG_NKEYS, v);
    for (int i = 0; rc == 0 && i < CFG_NKEYS; i++) {
        if (v[i])
            rc = CFG_KEYS[i].parse(x, v[i]);
        else if (CFG_KEYS[i].required)
            rc = ts_yaml_fail(&x->D, root, TS_EINVAL, "%s", CFG_KEYS[i].required);
    }
    return rc;
}

static void defaults(ctld_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    snprintf(cfg->listen_addr, sizeof cfg->listen_addr, "127.0.0.1");
    cfg->listen_port = CTLD_PORT_DEFAULT;
    cfg->interval_s = 1.0;
    cfg->half_life_s = TS_HALF_LIFE_DEFAULT_S;
    ts_sched_config_default(&cfg->sched);
    cfg->rate_per_s = 200.0;
    cfg->net_range = 0x0a400000u; /* 10.64.0.0/10 */
    cfg->net_range_prefix = 10;
    cfg->net_tenant_prefix = 20;  /* 4094 tasks' addresses per tenant, 1024 tenants */
    cfg->net_publish_lo = CTLD_NET_PUBLISH_LO;
    cfg->net_publish_hi = CTLD_NET_PUBLISH_HI;
    cfg->rate_burst = 1000.0;
    cfg->conns_max = 65536;
    cfg->conns_per_client = 64;
    cfg->conns_per_token = 64;
    cfg->conns_per_tenant = 512;
    cfg->tokens_per_tenant = 1000;
    cfg->request_timeout_s = 10.0;
    cfg->queued_per_tenant = 100000;
    cfg->queued_spec_bytes = (int64_t)CTLD_QUEUED_SPEC_MIB_DEFAULT << 20;
    cfg->metrics_public = false;
    cfg->node_lost_s = CTLD_NODE_LOST_S;
    cfg->idle_threshold_pct = 5.0;
    cfg->straggler_factor = 1.5;
    cfg->straggler_window_s = 60.0;
    cfg->ha_lease_s = 10.0;
    cfg->ha_renew_s = 2.0;
    snprintf(cfg->oidc.user_claim, sizeof cfg->oidc.user_claim, "sub");
    snprintf(cfg->oidc.tenant_claim, sizeof cfg->oidc.tenant_claim, "tenant");
}

int ctld_config_load(const char *path, ctld_config *cfg, ts_err *err)
{
    defaults(cfg);
    FILE *f = fopen(path, "rb");
    if (!f)
        return ts_err_set(err, TS_EIO, "%s: %s", path, strerror(errno));
    char *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len + 4096 > cap) {
            cap = cap ? cap * 2 : 8192;
            char *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                fclose(f);
                return ts_err_set(err, TS_ENOMEM, "%s: out of memory", path);
            }
            buf = nb;
        }
        size_t k = fread(buf + len, 1, cap - len, f);
        len += k;
        if (k == 0)
            break;
    }
    fclose(f);
    cfg_ctx x = {.D = {.fname = path, .err = err}, .cfg = cfg};
    char tmp[CTLD_PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s", path);
    snprintf(x.base, sizeof x.base, "%s", dirname(tmp));
    int rc = ts_yaml_load_one(&x.D, buf, len, walk, &x);
    free(buf);
    if (rc != 0) {
        ctld_config_fini(cfg);
        return rc;
    }
    if (!cfg->state_dir[0] &&
        snprintf(cfg->state_dir, sizeof cfg->state_dir, "%s/tessera-state", x.base) >=
            (int)sizeof cfg->state_dir)
        return ts_err_set(err, TS_EINVAL, "%s: the folder's path is too long", path);
    if (!cfg->secrets_key_file[0] &&
        snprintf(cfg->secrets_key_file, sizeof cfg->secrets_key_file, "%s/secrets.key",
                 cfg->state_dir) >= (int)sizeof cfg->secrets_key_file)
        return ts_err_set(err, TS_EINVAL, "%s: state_dir: path too long", path);
    if (!cfg->store_url[0] &&
        snprintf(cfg->store_url, sizeof cfg->store_url, "sqlite:%s/tessera.db", cfg->state_dir) >=
            (int)sizeof cfg->store_url)
        return ts_err_set(err, TS_EINVAL, "%s: state_dir: path too long", path);
    return 0;
}

void ctld_oidc_config_fini(ctld_oidc_config *o)
{
    free(o->unix_users);
    free(o->unix_uids);
    o->unix_users = NULL;
    o->unix_uids = NULL;
    o->nunix = 0;
}

void ctld_config_fini(ctld_config *cfg)
{
    ctld_oidc_config_fini(&cfg->oidc);
    for (int i = 0; i < cfg->nvirtual; i++)
        free(cfg->virtual_nodes[i]);
    free(cfg->virtual_nodes);
    cfg->virtual_nodes = NULL;
    for (int i = 0; i < cfg->nidle_tenant; i++)
        free(cfg->idle_tenant[i]);
    free(cfg->idle_tenant);
    free(cfg->idle_tenant_s);
    cfg->idle_tenant = NULL;
    cfg->idle_tenant_s = NULL;
    cfg->nidle_tenant = 0;
    for (int i = 0; i < cfg->nstraggler_drain; i++)
        free(cfg->straggler_drain[i]);
    free(cfg->straggler_drain);
    cfg->straggler_drain = NULL;
    cfg->nstraggler_drain = 0;
    cfg->nvirtual = 0;
}
