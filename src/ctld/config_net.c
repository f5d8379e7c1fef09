/*
 * config_net.c - the `network` key of tesserad's configuration
 * (docs/network.md, docs/tesserad.md): isolation, the tasks' range and
 * tenant blocks, MTU, the services tasks may reach, which ports jobs may
 * publish and from where, InfiniBand partitions.
 *
 * Apart from config.c because these keys describe the tenant networks the
 * agents build, and are checked against what a task network can be (no
 * loopback, multicast or reserved range; no published port the nodes' own
 * services use by default); both walk the file the same way (config_walk.h).
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctld/config_walk.h"
#include "ctld/ctld.h"
#include "model/yaml_doc.h"

/* "ADDR[/N]:PORT/tcp|udp" (the agent reads it again before nft does). */
static bool service_ok(const char *s)
{
    char addr[40], proto[8];
    unsigned port;
    const char *colon = s ? strrchr(s, ':') : NULL;
    if (!colon || strlen(s) >= 64 || (size_t)(colon - s) >= sizeof addr ||
        sscanf(colon + 1, "%5u/%7s", &port, proto) != 2 || port < 1 || port > 65535 ||
        (strcmp(proto, "tcp") != 0 && strcmp(proto, "udp") != 0))
        return false;
    memcpy(addr, s, (size_t)(colon - s));
    addr[colon - s] = '\0';
    char *slash = strchr(addr, '/');
    if (slash) {
        char *end;
        long l = strtol(slash + 1, &end, 10);
        if (*end || end == slash + 1 || l < 0 || l > 32)
            return false;
        *slash = '\0';
    }
    struct in_addr ia;
    return inet_pton(AF_INET, addr, &ia) == 1;
}

/* network.services[i]: "ADDR[/N]:PORT/tcp|udp" (every tenant's), or
 * {to: "ADDR[/N]:PORT/tcp|udp", tenants: [NAME, ...]} (only those tenants'
 * tasks; a job's tenant, by name). */
static int service_parse(cfg_ctx *x, yaml_node_t *e, int i)
{
    ctld_config *cfg = x->cfg;
    char path[64];
    snprintf(path, sizeof path, "network.services[%d]", i);
    yaml_node_t *to = e, *who = NULL;
    if (e->type == YAML_MAPPING_NODE) {
        static const char *const keys[] = {"to", "tenants"};
        yaml_node_t *v[2];
        int rc = ts_yaml_map_fields(&x->D, e, path, keys, 2, v);
        if (rc)
            return rc;
        if (!v[0] || !v[1])
            return ts_yaml_fail(&x->D, e, TS_EINVAL, "%s: needs both to: and tenants:", path);
        to = v[0];
        who = v[1];
        snprintf(path, sizeof path, "network.services[%d].to", i);
    }
    const char *s = ts_yaml_scalar(to);
    if (!service_ok(s))
        return ts_yaml_fail_got(&x->D, to, path,
                                "ADDR[/N]:PORT/tcp|udp, e.g. 192.0.2.10:443/tcp");
    char *names = cfg->net_service_tenants[cfg->nnet_services];
    names[0] = '\0';
    if (who) {
        yaml_node_item_t *b =
            who->type == YAML_SEQUENCE_NODE ? who->data.sequence.items.start : NULL;
        int n = b ? (int)(who->data.sequence.items.top - b) : 0;
        snprintf(path, sizeof path, "network.services[%d].tenants", i);
        if (n < 1)
            return ts_yaml_fail_got(&x->D, who, path, "a list of one or more tenant names");
        size_t len = 0;
        for (int k = 0; k < n; k++) {
            yaml_node_t *t = yaml_document_get_node(x->D.doc, b[k]);
            const char *name = t ? ts_yaml_scalar(t) : NULL;
            snprintf(path, sizeof path, "network.services[%d].tenants[%d]", i, k);
            if (!name || !ts_yaml_name_ok(name, 64))
                return ts_yaml_fail_got(&x->D, t ? t : who, path,
                                        "a tenant name (1..63 of A-Z a-z 0-9 . _ -)");
            if (len + strlen(name) + 2 > CTLD_NET_SERVICE_TENANTS_BYTES)
                return ts_yaml_fail(&x->D, who, TS_EINVAL,
                                    "network.services[%d].tenants: at most %d bytes of names",
                                    i, CTLD_NET_SERVICE_TENANTS_BYTES - 1);
            len += (size_t)snprintf(names + len, CTLD_NET_SERVICE_TENANTS_BYTES - len, "%s%s",
                                    len ? "," : "", name);
        }
    }
    snprintf(cfg->net_services[cfg->nnet_services++], sizeof cfg->net_services[0], "%s", s);
    return 0;
}

/* network.ib_pkey_base (hex 0x.. or decimal), once range and tenant_prefix
 * are known: every tenant block's key must be one of InfiniBand's 15-bit
 * partition keys, 0x0001..0x7ffe (0x7fff is the default partition's), so
 * no tenant is ever handed the default key or a key that wraps. */
static int network_pkeys_parse(cfg_ctx *x, yaml_node_t *m, yaml_node_t *on, yaml_node_t *base)
{
    ctld_config *cfg = x->cfg;
    int64_t blocks = INT64_C(1) << (cfg->net_tenant_prefix - cfg->net_range_prefix);
    int64_t top = CTLD_NET_PKEY_MAX + 1 - blocks; /* the highest base whose blocks all fit */
    if (cfg->net_ib_partitions && top < 1)
        return ts_yaml_fail(&x->D, on ? on : m, TS_EINVAL,
                            "network.ib_partitions: network.range /%d in blocks of /%d is %lld "
                            "tenants, more than InfiniBand's %d partition keys: a shorter "
                            "network.tenant_prefix or a narrower range", cfg->net_range_prefix,
                            cfg->net_tenant_prefix, (long long)blocks, CTLD_NET_PKEY_MAX);
    if (!base)
        return 0;
    const char *s = ts_yaml_scalar(base);
    char want[96], *end = NULL;
    snprintf(want, sizeof want, "a partition key 0x0001..0x%04llx (one per tenant block from it)",
             (unsigned long long)(top > 0 ? top : 0));
    bool hex = s && s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
    long long v = -1;
    errno = 0; /* digits first: strtoll alone would take blanks and signs */
    if (s && isxdigit((unsigned char)s[hex ? 2 : 0]) && (hex || isdigit((unsigned char)s[0])))
        v = strtoll(s + (hex ? 2 : 0), &end, hex ? 16 : 10);
    if (!end || *end || errno || v < 1 || v > top)
        return ts_yaml_fail_got(&x->D, base, "network.ib_pkey_base", want);
    cfg->net_ib_pkey_base = (int)v;
    return 0;
}

/* network.ib_service_ports: [GUID, ...], each 0x and 1..16 hex digits. */
static int network_ib_services_parse(cfg_ctx *x, yaml_node_t *l)
{
    ctld_config *cfg = x->cfg;
    yaml_node_item_t *b = l->type == YAML_SEQUENCE_NODE ? l->data.sequence.items.start : NULL;
    int n = b ? (int)(l->data.sequence.items.top - b) : -1;
    if (n < 0 || n > CTLD_NET_IB_SERVICE_PORTS_MAX)
        return ts_yaml_fail_got(&x->D, l, "network.ib_service_ports",
                                "a list of at most 64 port GUIDs (0x0002c903000e0b72)");
    for (int i = 0; i < n; i++) {
        yaml_node_t *e = yaml_document_get_node(x->D.doc, b[i]);
        const char *s = e ? ts_yaml_scalar(e) : NULL;
        char path[48], *end = NULL;
        snprintf(path, sizeof path, "network.ib_service_ports[%d]", i);
        bool hex = s && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') && strlen(s) <= 18;
        unsigned long long v = 0;
        errno = 0;
        if (hex && isxdigit((unsigned char)s[2]))
            v = strtoull(s + 2, &end, 16);
        if (!end || *end || errno || v == 0)
            return ts_yaml_fail_got(&x->D, e ? e : l, path,
                                    "a port GUID: 0x and 1..16 hex digits, not 0");
        cfg->net_ib_service_ports[cfg->nnet_ib_service_ports++] = (uint64_t)v;
    }
    return 0;
}

/* The items of the list l, of at most max, else a "got" error with want. */
static int cfg_list(cfg_ctx *x, yaml_node_t *l, const char *path, int max, const char *want,
                    yaml_node_item_t **items, int *n)
{
    *items = l->type == YAML_SEQUENCE_NODE ? l->data.sequence.items.start : NULL;
    *n = *items ? (int)(l->data.sequence.items.top - *items) : -1;
    if (*n < 0 || *n > max)
        return ts_yaml_fail_got(&x->D, l, path, want);
    return 0;
}

/* network.publish_from: [ADDR[/N], ...] */
static int publish_from_parse(cfg_ctx *x, yaml_node_t *l)
{
    ctld_config *cfg = x->cfg;
    yaml_node_item_t *b;
    int n, rc;
    if ((rc = cfg_list(x, l, "network.publish_from", CTLD_NET_PUBLISH_FROM_MAX,
                       "a list of at most 32 IPv4 addresses or ranges ADDR[/N]", &b, &n)))
        return rc;
    for (int i = 0; i < n && rc == 0; i++) {
        yaml_node_t *e = yaml_document_get_node(x->D.doc, b[i]);
        const char *s = e ? ts_yaml_scalar(e) : NULL;
        char path[48], probe[64];
        snprintf(path, sizeof path, "network.publish_from[%d]", i);
        /* an address or range is a service's address part: checked as one */
        snprintf(probe, sizeof probe, "%s:1/tcp", s ? s : "");
        if (!s || strchr(s, ':') || strlen(s) >= sizeof cfg->net_publish_from[0] ||
            !service_ok(probe))
            rc = ts_yaml_fail_got(&x->D, e ? e : l, path,
                                  "an IPv4 address or range ADDR[/N], e.g. 192.0.2.0/24");
        else
            snprintf(cfg->net_publish_from[cfg->nnet_publish_from++],
                     sizeof cfg->net_publish_from[0], "%s", s);
    }
    return rc;
}

/* network.publish_ports: "LO-HI" (or one PORT), the ports a job may publish.
 * The default is Kubernetes' NodePort range, where no node's own service
 * listens by convention (sshd, the agent's ports and the like stay below). */
static int publish_ports_parse(cfg_ctx *x, yaml_node_t *v)
{
    const char *s = ts_yaml_scalar(v);
    unsigned long lo = 0, hi = 0;
    char *end = NULL;
    if (s && s[0] >= '1' && s[0] <= '9') {
        lo = hi = strtoul(s, &end, 10);
        if (*end == '-' && end[1] >= '1' && end[1] <= '9')
            hi = strtoul(end + 1, &end, 10);
    }
    if (!end || *end || lo < 1 || hi > 65535 || lo > hi)
        return ts_yaml_fail_got(&x->D, v, "network.publish_ports",
                                "a port range LO-HI within 1..65535, e.g. 30000-32767");
    x->cfg->net_publish_lo = (int)lo;
    x->cfg->net_publish_hi = (int)hi;
    return 0;
}

/* The IPv4 blocks no task network may overlap: they are not routed as
 * unicast between hosts (RFC 6890's special-purpose registry, the parts a
 * tenant range could overlap). */
static const struct {
    uint32_t net;
    int len;
    const char *what;
} RESERVED[] = {
    {0x00000000u, 8, "0.0.0.0/8, \"this network\""},
    {0x7f000000u, 8, "127.0.0.0/8, loopback"},
    {0xa9fe0000u, 16, "169.254.0.0/16, link-local"},
    {0xe0000000u, 4, "224.0.0.0/4, multicast"},
    {0xf0000000u, 4, "240.0.0.0/4, reserved (and broadcast)"},
};

/* network.range: A.B.C.D/N, N 8..24, unicast and routable (not RESERVED). */
static int range_parse(cfg_ctx *x, yaml_node_t *v)
{
    ctld_config *cfg = x->cfg;
    const char *s = ts_yaml_scalar(v);
    char a[32];
    const char *slash = s ? strchr(s, '/') : NULL;
    struct in_addr ia;
    int plen = slash ? atoi(slash + 1) : -1;
    if (slash && (size_t)(slash - s) < sizeof a) {
        memcpy(a, s, (size_t)(slash - s));
        a[slash - s] = '\0';
    } else {
        a[0] = '\0';
    }
    if (!slash || inet_pton(AF_INET, a, &ia) != 1 || plen < 8 || plen > 24)
        return ts_yaml_fail_got(&x->D, v, "network.range", "an IPv4 range A.B.C.D/N with N 8..24");
    uint32_t net = ntohl(ia.s_addr) & (0xffffffffu << (32 - plen));
    for (size_t i = 0; i < sizeof RESERVED / sizeof RESERVED[0]; i++) {
        int m = plen < RESERVED[i].len ? plen : RESERVED[i].len; /* one holds the other */
        if (((net ^ RESERVED[i].net) >> (32 - m)) == 0)
            return ts_yaml_fail(&x->D, v, TS_EINVAL, "network.range: %s overlaps %s, which "
                                "is no task network (tasks need unicast addresses routed "
                                "between nodes; e.g. 10.64.0.0/10)", s, RESERVED[i].what);
    }
    cfg->net_range = net;
    cfg->net_range_prefix = plen;
    return 0;
}

/* network.services: [ADDR[/N]:PORT/tcp|udp | {to: .., tenants: [..]}] */
static int services_parse(cfg_ctx *x, yaml_node_t *l)
{
    yaml_node_item_t *b;
    int n;
    int rc = cfg_list(x, l, "network.services", CTLD_NET_SERVICES_MAX,
                      "a list of at most 32 \"ADDR[/N]:PORT/tcp|udp\" or "
                      "{to: ADDR[/N]:PORT/tcp|udp, tenants: [NAME, ...]}", &b, &n);
    for (int i = 0; i < n && rc == 0; i++) {
        yaml_node_t *e = yaml_document_get_node(x->D.doc, b[i]);
        rc = service_parse(x, e ? e : l, i);
    }
    return rc;
}

/* network: {isolation: host|tenant, range: A.B.C.D/N, tenant_prefix: N, mtu: N,
 * services: [ADDR[/N]:PORT/tcp|udp | {to: .., tenants: [..]}], publish_ports: LO-HI,
 * publish_from: [..], ...} (docs/network.md) */
int ctld_cfg_network(cfg_ctx *x, yaml_node_t *m)
{
    enum { N_ISO, N_RANGE, N_TPFX, N_MTU, N_SVC, N_IB, N_IBFILE, N_FROM, N_VNI, N_PKEY,
           N_IBSVC, N_PORTS, N_N };
    static const char *const nk[N_N] = {"isolation", "range",         "tenant_prefix",
                                        "mtu",       "services",      "ib_partitions",
                                        "ib_partitions_file", "publish_from", "vni_base",
                                        "ib_pkey_base", "ib_service_ports", "publish_ports"};
    yaml_node_t *nv[N_N];
    ctld_config *cfg = x->cfg;
    int rc = ts_yaml_map_fields(&x->D, m, "network", nk, N_N, nv);
    if (rc == 0 && nv[N_IBSVC])
        rc = network_ib_services_parse(x, nv[N_IBSVC]);
    if (rc == 0 && nv[N_FROM])
        rc = publish_from_parse(x, nv[N_FROM]);
    if (rc == 0 && nv[N_PORTS])
        rc = publish_ports_parse(x, nv[N_PORTS]);
    if (rc == 0 && nv[N_IBFILE])
        rc = ctld_cfg_path(x, nv[N_IBFILE], "network.ib_partitions_file",
                           cfg->net_ib_partitions_file, sizeof cfg->net_ib_partitions_file);
    if (rc == 0 && nv[N_IB])
        rc = ctld_cfg_bool(x, nv[N_IB], "network.ib_partitions", &cfg->net_ib_partitions);
    if (rc == 0 && nv[N_ISO]) {
        const char *s = ts_yaml_scalar(nv[N_ISO]);
        if (s && strcmp(s, "tenant") == 0)
            cfg->net_isolation = true;
        else if (!s || strcmp(s, "host") != 0)
            rc = ts_yaml_fail_got(&x->D, nv[N_ISO], "network.isolation", "host or tenant");
    }
    if (rc == 0 && nv[N_RANGE])
        rc = range_parse(x, nv[N_RANGE]);
    int64_t iv;
    if (rc == 0 && nv[N_TPFX] &&
        (rc = ts_yaml_get_int(&x->D, nv[N_TPFX], "network.tenant_prefix", 16, 28, "16..28",
                              &iv)) == 0)
        cfg->net_tenant_prefix = (int)iv;
    if (rc == 0 && cfg->net_tenant_prefix <= cfg->net_range_prefix)
        rc = ts_yaml_fail(&x->D, nv[N_TPFX] ? nv[N_TPFX] : m, TS_EINVAL,
                          "network.tenant_prefix: %d: must be longer than the range's /%d "
                          "(each tenant gets one such block of the range)",
                          cfg->net_tenant_prefix, cfg->net_range_prefix);
    if (rc == 0 && nv[N_MTU] &&
        (rc = ts_yaml_get_int(&x->D, nv[N_MTU], "network.mtu", 1280, 9000, "1280..9000",
                              &iv)) == 0)
        cfg->net_mtu = (int)iv;
    if (rc == 0 && nv[N_VNI]) { /* VXLAN's 24 bits hold the last tenant block's VNI too */
        int64_t top = (INT64_C(1) << 24) -
                      (INT64_C(1) << (cfg->net_tenant_prefix - cfg->net_range_prefix));
        char want[64];
        snprintf(want, sizeof want, "1..%lld (a VNI per tenant block from it)", (long long)top);
        if ((rc = ts_yaml_get_int(&x->D, nv[N_VNI], "network.vni_base", 1, top, want, &iv)) == 0)
            cfg->net_vni_base = (int)iv;
    }
    if (rc == 0)
        rc = network_pkeys_parse(x, m, nv[N_IB], nv[N_PKEY]);
    if (rc == 0 && nv[N_SVC])
        rc = services_parse(x, nv[N_SVC]);
    return rc;
}

int ctld_config_services_tenants(const ctld_config *cfg, const ts_tenants *ts, ts_err *err)
{
    for (int i = 0; i < cfg->nnet_services; i++) {
        const char *p = cfg->net_service_tenants[i];
        for (int k = 0; *p; k++) {
            size_t len = strcspn(p, ",");
            char name[CTLD_NET_SERVICE_TENANTS_BYTES];
            snprintf(name, sizeof name, "%.*s", (int)len, p);
            if (ts_tenant_find(ts, name) < 0)
                return ts_err_set(err, TS_EINVAL, "network.services[%d].tenants[%d]: \"%s\" is "
                                  "no tenant", i, k, name);
            p += len + (p[len] == ',');
        }
    }
    return 0;
}
