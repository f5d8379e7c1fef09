/*
 * net.c - the controller's side of tenant networks (docs/network.md).
 *
 * With `network: {isolation: tenant}` each tenant has an ordinal, durable in
 * the store's settings ("net.tenant.<name>", the next free one under
 * "net.next": written before the tenant's, so a crash between the two
 * wastes an ordinal and never gives one twice). The ordinal gives the
 * tenant its VNI (the cluster's VNI base + ordinal) and its block of
 * network.range (block number = ordinal, of size /tenant_prefix). The VNI
 * base is the cluster's own, durable too ("net.vni_base", ctld_net_open):
 * network.vni_base, else chosen at random once, so two clusters on one L2
 * or with agents on one host do not give their tenants the same segments. Each rank of a running
 * job holds one host number of its tenant's block, chosen at the start and
 * kept in the job's placement ("net_host"), so it is committed with the
 * start itself and survives restarts and failovers; it is free again when
 * the run ends (the placement goes). cjob.net_host mirrors it for the
 * lowest-free search and for the agents' documents.
 *
 * All of this runs under c->mu. Giving a tenant its ordinal writes the
 * store, once per tenant ever.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "ctld/ctld.h"
#include "ctld/input.h"
#include "ctld/dtask.h"
#include "ctld/job_fsm.h"

#define NET_VNI_LEGACY 10000 /* every cluster's base before it had its own */
#define NET_VNI_RANDOM_FIRST 4096 /* random bases from here: the VNIs below are the sites' */
#define NET_VNI_MAX ((1 << 24) - 1)
#define NET_KEY_VNI_BASE "net.vni_base"
#define NET_KEY_PKEY_BASE "net.ib_pkey_base"
#define NET_PKEY_LEGACY 0x1000 /* every cluster's first partition key before it had its own */
#define NET_PKEY_RANDOM_FIRST 0x0100 /* random bases from here: the keys below are the sites' */
#define NET_KEY_NEXT "net.next"
#define NET_KEY_TENANT "net.tenant."

static int tenant_blocks(const ctld *c)
{
    return 1 << (c->cfg.net_tenant_prefix - c->cfg.net_range_prefix);
}

static int hosts_per_tenant(const ctld *c)
{
    /* less network, broadcast, and the gateway (the last but one) */
    return (1 << (32 - c->cfg.net_tenant_prefix)) - 3;
}

static int setting_int(ctld *c, const char *key, int *out, ts_err *err)
{
    char *v = NULL;
    int rc = ts_store_setting_get(c->store, key, &v, err);
    if (rc == TS_ENOENT || (rc == 0 && !v)) {
        free(v);
        *out = -1;
        return 0;
    }
    if (rc == 0) {
        char *end;
        long n = strtol(v, &end, 10);
        *out = *v && !*end && n >= 0 && n < (1L << 24) ? (int)n : -1;
        if (*out < 0)
            rc = ts_err_set(err, TS_EINVAL, "store setting %s: \"%s\" is not a number", key, v);
    }
    free(v);
    return rc;
}

int ctld_net_tenant(ctld *c, const char *tenant, int *ordinal, ts_err *err)
{
    for (int i = 0; i < c->nnet_tenants; i++)
        if (strcmp(c->net_tenants[i].name, tenant) == 0) {
            *ordinal = c->net_tenants[i].ordinal;
            return 0;
        }
    char key[128];
    snprintf(key, sizeof key, "%s%s", NET_KEY_TENANT, tenant);
    int n, rc = setting_int(c, key, &n, err);
    if (rc == 0 && n < 0) {
        int next;
        char val[16];
        if ((rc = setting_int(c, NET_KEY_NEXT, &next, err)) != 0)
            return rc;
        n = next < 0 ? 0 : next;
        if (n >= tenant_blocks(c))
            return ts_err_set(err, TS_ECONFLICT,
                              "network: no tenant block left in network.range (%d tenants of "
                              "/%d in a /%d)", tenant_blocks(c), c->cfg.net_tenant_prefix,
                              c->cfg.net_range_prefix);
        snprintf(val, sizeof val, "%d", n + 1);
        if ((rc = ts_store_setting_put(c->store, NET_KEY_NEXT, val, err)) != 0)
            return rc;
        snprintf(val, sizeof val, "%d", n);
        if ((rc = ts_store_setting_put(c->store, key, val, err)) != 0)
            return rc;
    }
    if (rc != 0)
        return rc;
    if (n >= tenant_blocks(c))
        return ts_err_set(err, TS_ECONFLICT, "network: tenant %s: block %d is outside "
                          "network.range (was the range narrowed?)", tenant, n);
    ctld_net_tenant_row *v = realloc(c->net_tenants, (size_t)(c->nnet_tenants + 1) * sizeof *v);
    if (!v)
        return ts_err_set(err, TS_ENOMEM, "out of memory");
    c->net_tenants = v;
    snprintf(v[c->nnet_tenants].name, sizeof v[0].name, "%s", tenant);
    v[c->nnet_tenants++].ordinal = n;
    *ordinal = n;
    return 0;
}

/* One numbering a cluster keeps for its tenants (VNIs, partition keys): its
 * store setting, its configuration field, and the bases it may pick. */
typedef struct net_base_kind {
    const char *key, *field, *what; /* "net.vni_base", "network.vni_base", "VNIs" */
    const char *lose;               /* what a task started before would lose */
    const char *fmt;                /* how its numbers are written: "%d" or "0x%04x" */
    int configured, legacy, first, max; /* 0: not configured; legacy < 0: none */
    bool aligned;                   /* random bases on multiples of the tenant blocks */
    bool quiet;                     /* kept, not in use: not logged */
} net_base_kind;

/* The base of k: kept in the store since the cluster's first start, else
 * configured, else the legacy one (tenants had numbers before bases were
 * kept), else random, and then kept. A configured base that differs from the
 * kept one is refused: tasks started under it would lose their peers. */
static int net_base_open(ctld *c, const net_base_kind *k, int *out, ts_err *err)
{
    int stored, base = k->configured, blocks = tenant_blocks(c);
    int rc = setting_int(c, k->key, &stored, err);
    if (rc != 0)
        return rc;
    if (stored >= 0 && base > 0 && base != stored) {
        char was[16], now[16];
        snprintf(was, sizeof was, k->fmt, stored);
        snprintf(now, sizeof now, k->fmt, base);
        return ts_err_set(err, TS_ECONFLICT, "%s: %s, but this cluster's tenants have had "
                          "their %s from %s since its first start (store setting %s): %s; "
                          "set %s or leave it out", k->field, now, k->what, was, k->key,
                          k->lose, was);
    }
    uint32_t r = 0;
    bool legacy = false;
    if (stored >= 0) {
        base = stored;
    } else if (base == 0 && k->legacy > 0) {
        base = k->legacy;
        legacy = true;
    } else if (base == 0 && getrandom(&r, sizeof r, 0) != (ssize_t)sizeof r) {
        return ts_err_set(err, TS_EIO, "network: no random base for the %s (getrandom "
                          "failed)", k->what);
    } else if (base == 0) { /* every block's number fits above first */
        int step = k->aligned ? blocks : 1;
        int slots = (k->max + 1 - blocks - k->first) / step + 1;
        base = k->first + (int)(r % (uint32_t)(slots > 0 ? slots : 1)) * step;
    }
    if ((int64_t)base + blocks - 1 > k->max)
        return ts_err_set(err, TS_EINVAL, "network: %s from %d leave none for the last of %d "
                          "tenant blocks (the highest is %d; was network.range widened?)",
                          k->what, base, blocks, k->max);
    if (stored < 0) {
        char val[16];
        snprintf(val, sizeof val, "%d", base);
        if ((rc = ts_store_setting_put(c->store, k->key, val, err)) != 0)
            return rc;
    }
    char first[16], last[16];
    snprintf(first, sizeof first, k->fmt, base);
    snprintf(last, sizeof last, k->fmt, base + blocks - 1);
    if (!k->quiet)
        fprintf(stderr, "tesserad: network: tenants' %s %s..%s (%s)\n", k->what, first, last,
                stored >= 0     ? "kept in the store"
                : k->configured ? k->field
                : legacy        ? "its tenants' from before it kept a base, kept"
                                : "chosen now, kept");
    *out = base;
    return 0;
}

int ctld_net_open(ctld *c, ts_err *err)
{
    if (!c->cfg.net_isolation)
        return 0;
    int next, rc = setting_int(c, NET_KEY_NEXT, &next, err);
    if (rc != 0)
        return rc;
    /* tenants that had numbers before their cluster kept a base keep them */
    net_base_kind vni = {NET_KEY_VNI_BASE, "network.vni_base", "VNIs",
                         "a task started before would lose its peers", "%d",
                         c->cfg.net_vni_base, next >= 0 ? NET_VNI_LEGACY : -1,
                         NET_VNI_RANDOM_FIRST, NET_VNI_MAX, true, false};
    bool ib = c->cfg.net_ib_partitions;
    if ((rc = net_base_open(c, &vni, &c->net_vni_base, err)) != 0 ||
        (!ib && tenant_blocks(c) > CTLD_NET_PKEY_MAX + 1 - NET_PKEY_RANDOM_FIRST))
        return rc;
    /* The key base is kept from the first start even while ib_partitions is
     * off, so a cluster that turns it on later has its own keys too; only
     * one upgraded with partitions on keeps the keys its tasks had. Bases
     * are unaligned: clusters whose tenants use a few keys each meet only if
     * their bases are that few apart, not whenever they share a slot. */
    net_base_kind pkey = {NET_KEY_PKEY_BASE, "network.ib_pkey_base", "partition keys",
                          "a running task would lose its partition", "0x%04x",
                          c->cfg.net_ib_pkey_base, ib && next >= 0 ? NET_PKEY_LEGACY : -1,
                          NET_PKEY_RANDOM_FIRST, CTLD_NET_PKEY_MAX, false, !ib};
    return net_base_open(c, &pkey, &c->net_pkey_base, err);
}

/* The ranks' host numbers in a placement document (0: none). */
static int32_t *hosts_of(const char *placement_json, int n)
{
    json_error_t je;
    json_t *a = placement_json ? json_loads(placement_json, 0, &je) : NULL;
    int32_t *h = NULL;
    if (json_is_array(a) && (int)json_array_size(a) == n && n > 0 &&
        json_is_integer(json_object_get(json_array_get(a, 0), "net_host")) &&
        (h = calloc((size_t)n, sizeof *h)) != NULL)
        for (int i = 0; i < n; i++)
            h[i] = (int32_t)json_integer_value(json_object_get(json_array_get(a, (size_t)i),
                                                               "net_host"));
    json_decref(a);
    return h;
}

void ctld_net_bind(cjob *j)
{
    free(j->net_host);
    j->net_host = hosts_of(j->row.placement_json, j->ntasks);
}

void ctld_net_restore(ctld *c, cjob *j)
{
    ctld_net_bind(j);
    int ord;
    ts_err e;
    bool keyed = c->cfg.net_isolation && c->cfg.net_ib_partitions && j->spec &&
                 j->spec->host_network; /* its partition key: its tenant's ordinal */
    if ((j->net_host || keyed) && ctld_net_tenant(c, j->row.tenant, &ord, &e) != 0)
        fprintf(stderr, "tesserad: job %lld: its tenant's network: %s\n", (long long)j->row.id,
                e.msg);
}

void ctld_net_unbind(cjob *j)
{
    free(j->net_host);
    j->net_host = NULL;
}

int ctld_net_place(ctld *c, const ctld_txn *t, const cjob *j, char **placement_json, ts_err *err)
{
    int ord, rc = ctld_net_tenant(c, j->row.tenant, &ord, err);
    if (rc)
        return rc;
    int nh = hosts_per_tenant(c);
    uint8_t *used = calloc((size_t)nh / 8 + 2, 1);
    json_error_t je;
    json_t *a = json_loads(*placement_json, 0, &je);
    if (!used || !json_is_array(a)) {
        free(used);
        json_decref(a);
        return ts_err_set(err, TS_ENOMEM, "out of memory");
    }
#define MARK(h) ((h) >= 1 && (h) <= nh ? (void)(used[(h) / 8] |= (uint8_t)(1u << ((h) % 8))) : (void)0)
    for (int k = 0; k < c->njobs; k++) {
        const cjob *o = c->jobs[k];
        if (o != j && o->net_host && strcmp(o->row.tenant, j->row.tenant) == 0)
            for (int r = 0; r < o->ntasks; r++)
                MARK(o->net_host[r]);
    }
    for (int k = 0; k < t->n; k++) { /* this cycle's earlier starts, not applied yet */
        const ctld_change *ch = &t->ch[k];
        if (ch->event != CTLD_JE_START || strcmp(ch->j->row.tenant, j->row.tenant) != 0)
            continue;
        int32_t *h = hosts_of(ch->row.placement_json, ch->j->ntasks);
        for (int r = 0; h && r < ch->j->ntasks; r++)
            MARK(h[r]);
        free(h);
    }
#undef MARK
    int h = 1;
    for (int r = 0; r < j->ntasks; r++, h++) {
        while (h <= nh && (used[h / 8] & (1u << (h % 8))))
            h++;
        if (h > nh) {
            free(used);
            json_decref(a);
            return ts_err_set(err, TS_ECONFLICT, "network: tenant %s has no free address for "
                              "%d ranks (%d per tenant, network.tenant_prefix)", j->row.tenant,
                              j->ntasks, nh);
        }
        json_object_set_new(json_array_get(a, (size_t)r), "net_host", json_integer(h));
    }
    free(used);
    char *s = json_dumps(a, JSON_COMPACT);
    json_decref(a);
    if (!s)
        return ts_err_set(err, TS_ENOMEM, "out of memory");
    free(*placement_json);
    *placement_json = s;
    return 0;
}

static void addr_text(const ctld *c, int ord, int host, char *out, size_t len)
{
    uint32_t a = c->cfg.net_range + ((uint32_t)ord << (32 - c->cfg.net_tenant_prefix)) +
                 (uint32_t)host;
    struct in_addr ia = {htonl(a)};
    inet_ntop(AF_INET, &ia, out, (socklen_t)len);
}

int ctld_net_peers(const ctld *c, const char **out)
{
    int n = 0;
    for (int k = 0; k < c->cluster->nnodes; k++) {
        const ctld_agent *ag = &c->agents[k];
        const char *s = ag->registered ? ag->net_addr : NULL;
        if (s)
            out[n++] = s;
    }
    return n;
}

void ctld_net_peers_sync(ctld *c)
{
    if (!c->cfg.net_isolation)
        return;
    pthread_mutex_lock(&c->mu);
    uint64_t h = 14695981039346656037ull; /* FNV-1a of the list, each address and a newline */
    for (int k = 0; k < c->cluster->nnodes; k++) {
        const ctld_agent *ag = &c->agents[k];
        for (const char *p = ag->registered && ag->net_addr ? ag->net_addr : ""; *p; p++)
            h = (h ^ (unsigned char)*p) * 1099511628211ull;
        h = (h ^ '\n') * 1099511628211ull; /* and a node without one counts too */
    }
    if (h != c->net_peers_key) {
        c->net_peers_key = h;
        for (int n = 0; n < c->cluster->nnodes; n++)
            if (!c->node_virtual[n])
                ctld_agent_moved(c, n);
    }
    pthread_mutex_unlock(&c->mu);
}

int ctld_net_services(const ctld *c, ts_desired *d)
{
    int ns = c->cfg.nnet_services, some = 0;
    for (int i = 0; i < ns; i++)
        for (int k = 0; c->cfg.net_service_tenants[i][0] && k < c->nnet_tenants; k++)
            some += ctld_name_listed(c->cfg.net_service_tenants[i], c->net_tenants[k].name);
    d->net_services.v = ns > 0 ? calloc((size_t)ns, sizeof *d->net_services.v) : NULL;
    d->net_tenant_services =
        some > 0 ? calloc((size_t)some, sizeof *d->net_tenant_services) : NULL;
    if ((ns && !d->net_services.v) || (some && !d->net_tenant_services))
        return -1;
    for (int i = 0; i < ns; i++) {
        const char *names = c->cfg.net_service_tenants[i];
        if (!names[0]) {
            d->net_services.v[d->net_services.n++] = c->cfg.net_services[i];
            continue;
        }
        for (int k = 0; k < c->nnet_tenants; k++) /* a tenant with no ordinal has no task */
            if (ctld_name_listed(names, c->net_tenants[k].name))
                d->net_tenant_services[d->nnet_tenant_services++] =
                    (ts_desired_tenant_service){c->net_vni_base + c->net_tenants[k].ordinal,
                                                c->cfg.net_services[i]};
    }
    return 0;
}

/* A tenant's ordinal, if it has had one since tesserad started (-1). */
static int known_ordinal(const ctld *c, const char *tenant)
{
    for (int i = 0; i < c->nnet_tenants; i++)
        if (strcmp(c->net_tenants[i].name, tenant) == 0)
            return c->net_tenants[i].ordinal;
    return -1;
}

/* A published port as the agent reads it: "8080/tcp". */
static const char *publish_text(ctld_dtask *dt, const ts_job_spec *sp, int i)
{
    return ctld_dtask_printf(dt, "%u/%s", (unsigned)sp->publish[i].port,
                             sp->publish[i].udp ? "udp" : "tcp");
}

void ctld_net_task(const ctld *c, const cjob *j, int rank, ctld_dtask *dt)
{
    int ord = known_ordinal(c, j->row.tenant); /* since its start, or its restore */
    bool host = j->spec && j->spec->host_network;
    if (!c->cfg.net_isolation || ord < 0 || (!j->net_host && !host))
        return;
    ts_desired_task *t = &dt->t;
    /* the agent finds the key's index for NCCL_IB_PKEY: a host-network task
     * uses its node's adapters, in its tenant's partition all the same */
    if (c->cfg.net_ib_partitions) {
        CTLD_DT_SET(dt, IB_PKEY);
        t->ib_pkey = c->net_pkey_base + ord;
    }
    if (!j->net_host)
        return;
    char addr[INET_ADDRSTRLEN], master[INET_ADDRSTRLEN];
    addr_text(c, ord, j->net_host[rank], addr, sizeof addr);
    addr_text(c, ord, j->net_host[0], master, sizeof master);
    CTLD_DT_SET(dt, NET);
    t->net.vni = c->net_vni_base + ord;
    t->net.addr = ctld_dtask_printf(dt, "%s", addr);
    t->net.prefix = c->cfg.net_tenant_prefix;
    t->net.peers.v = ctld_dtask_alloc(dt, sizeof *t->net.peers.v * (size_t)c->cluster->nnodes);
    t->net.peers.n = t->net.peers.v ? ctld_net_peers(c, t->net.peers.v) : 0;
    t->net.mtu = c->cfg.net_mtu > 0 ? c->cfg.net_mtu : 0;
    t->net.nics_dedicated = j->spec && j->spec->dedicated_nics; /* a VF or rail NIC per GPU */
    if (j->spec && j->spec->npublish > 0) { /* reachable at the node, from where allowed */
        const ts_job_spec *sp = j->spec;
        t->net.has_publish = t->net.has_publish_from = true;
        t->net.publish.v = ctld_dtask_alloc(dt, sizeof *t->net.publish.v * (size_t)sp->npublish);
        for (int i = 0; t->net.publish.v && i < sp->npublish; i++)
            t->net.publish.v[t->net.publish.n++] = publish_text(dt, sp, i);
        int nf = c->cfg.nnet_publish_from;
        t->net.publish_from.v = ctld_dtask_alloc(dt, sizeof *t->net.publish_from.v * (size_t)nf);
        for (int i = 0; t->net.publish_from.v && i < nf; i++)
            t->net.publish_from.v[t->net.publish_from.n++] = c->cfg.net_publish_from[i];
    }
    /* the gang meets on its overlay: rank 0's address there */
    t->master_addr = ctld_dtask_printf(dt, "%s", master);
}

/* ---- OpenSM partitions ---------------------------------------------------------- */

static bool guid_listed(json_t *list, const char *g)
{
    size_t i;
    json_t *v;
    json_array_foreach(list, i, v)
    {
        if (strcmp(json_string_value(v), g) == 0)
            return true;
    }
    return false;
}

/* partitions.conf: the default partition (every port a limited member,
 * the subnet manager's and the shared services' full ones, the IPoIB
 * broadcast group made), then one per tenant with running ranks, its key,
 * and as full members the rail ports (agents' "ib_ports") of the nodes its
 * ranks run on. Under mu. */
static char *partitions_text(const ctld *c)
{
    json_t *byord = json_object(); /* "ordinal" -> [guid] */
    for (int k = 0; byord && k < c->njobs; k++) {
        const cjob *j = c->jobs[k];
        int ord = known_ordinal(c, j->row.tenant);
        if (!j->allocs || ord < 0 || (!j->net_host && !(j->spec && j->spec->host_network)) ||
            (j->row.state != TS_JOB_RUNNING && j->row.state != TS_JOB_STOPPING))
            continue;
        char key[16];
        snprintf(key, sizeof key, "%d", ord);
        json_t *list = json_object_get(byord, key);
        if (!list) {
            list = json_array();
            json_object_set_new(byord, key, list);
        }
        for (int r = 0; r < j->ntasks; r++) {
            const ctld_agent *ag = &c->agents[j->allocs[r].node];
            for (int i = 0; i < ag->nib_guids; i++) {
                const char *g = ag->ib_guids[i];
                if (!guid_listed(list, g))
                    json_array_append_new(list, json_string(g));
            }
        }
    }
    size_t cap = 4096, len = 0;
    char *s = malloc(cap);
    if (!s || !byord) {
        free(s);
        json_decref(byord);
        return NULL;
    }
    /* This cluster's partitions, so that the files of several clusters on
     * one fabric can be put together into one subnet manager's: their
     * Default rules add up to one (OpenSM merges the members of one key).
     * The rule is written, not left to OpenSM: without it OpenSM gives the
     * ports the same memberships but makes no IPoIB broadcast group, and no
     * node's IPoIB interface (storage, a login node) comes up. */
    len = (size_t)snprintf(s, cap, "# written by tesserad (docs/network.md): this cluster's "
                                   "partitions, keys 0x%04x..0x%04x, one per tenant with running "
                                   "jobs\nDefault=0x7fff, ipoib : ALL=limited, SELF=full",
                           c->net_pkey_base, c->net_pkey_base + tenant_blocks(c) - 1);
    for (int i = 0; i < c->cfg.nnet_ib_service_ports; i++) /* 64 at most: within 4096 */
        len += (size_t)snprintf(s + len, cap - len, ", 0x%016llx=full",
                                (unsigned long long)c->cfg.net_ib_service_ports[i]);
    len += (size_t)snprintf(s + len, cap - len, " ;\n");
    for (int ord = 0; ord < tenant_blocks(c); ord++) {
        char key[16];
        snprintf(key, sizeof key, "%d", ord);
        json_t *list = json_object_get(byord, key);
        if (!list || json_array_size(list) == 0)
            continue;
        const char *name = "?";
        for (int i = 0; i < c->nnet_tenants; i++)
            if (c->net_tenants[i].ordinal == ord)
                name = c->net_tenants[i].name;
        size_t need = len + 160 + json_array_size(list) * 32;
        if (need > cap) {
            char *t = realloc(s, cap = need * 2);
            if (!t) {
                free(s);
                json_decref(byord);
                return NULL;
            }
            s = t;
        }
        int pkey = c->net_pkey_base + ord; /* names unique on the fabric, as the keys are */
        len += (size_t)snprintf(s + len, cap - len, "# tenant %s\ntessera_%04x=0x%04x :", name,
                                pkey, pkey);
        size_t i;
        json_t *g;
        json_array_foreach(list, i, g)
        {
            len += (size_t)snprintf(s + len, cap - len, "%s %s=full", i ? "," : "",
                                    json_string_value(g));
        }
        len += (size_t)snprintf(s + len, cap - len, " ;\n");
    }
    json_decref(byord);
    return s;
}

void ctld_net_partitions_sync(ctld *c)
{
    if (!c->cfg.net_isolation || !c->cfg.net_ib_partitions || !c->cfg.net_ib_partitions_file[0])
        return;
    pthread_mutex_lock(&c->mu);
    char *text = partitions_text(c);
    pthread_mutex_unlock(&c->mu);
    if (!text || (c->net_partitions && strcmp(text, c->net_partitions) == 0)) {
        free(text);
        return;
    }
    /* whole or not at all: a subnet manager never reads half a file */
    char tmp[CTLD_PATH_MAX + 8];
    snprintf(tmp, sizeof tmp, "%s.tmp", c->cfg.net_ib_partitions_file);
    FILE *f = fopen(tmp, "we");
    bool ok = f && fputs(text, f) >= 0;
    ok = f && fclose(f) == 0 && ok;
    if (!ok || rename(tmp, c->cfg.net_ib_partitions_file) != 0) {
        fprintf(stderr, "tesserad: network.ib_partitions_file %s: not written; trying again\n",
                c->cfg.net_ib_partitions_file);
        unlink(tmp);
        free(text);
        return;
    }
    free(c->net_partitions);
    c->net_partitions = text;
}
