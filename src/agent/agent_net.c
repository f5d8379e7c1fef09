/*
 * agent_net.c - the agent's side of tenant networks (docs/network.md): a
 * task whose desired state carries "net" (the controller isolates tenants)
 * gets its own namespace on its tenant's overlay before it starts
 * (netns.c does the work); the namespace goes when the task is forgotten;
 * a restarted agent keeps the namespaces of the tasks it adopted and
 * removes the rest; the tenants' VXLANs learn the nodes the controller
 * lists in "net_peers", and the policy the services of "net_services"
 * (every tenant's) and "net_tenant_services" (one tenant's each).
 * With "nics": "dedicated" the task also gets its GPUs' VFs or rail NICs
 * (agent_nics_netdev) moved into its namespace. A task publishing a port
 * this node serves itself does not start (net_ports.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "agent/agent_internal.h"
#include "agent/net_ports.h"
#include "agent/netns.h"

static void task_id_of(const local_task *lt, char *id, size_t len)
{
    snprintf(id, len, "j%lld-r%d", (long long)lt->job, lt->rank);
}

static bool adopted(const char *id, void *ctx)
{
    const ts_agent *a = ctx;
    char mine[64];
    for (int i = 0; i < a->ntasks; i++) {
        task_id_of(&a->tasks[i], mine, sizeof mine);
        if (strcmp(mine, id) == 0)
            return true;
    }
    return false;
}

void agent_net_open(ts_agent *a)
{
    char dir[700];
    struct stat st;
    snprintf(dir, sizeof dir, "%s/net", a->cfg.state_dir);
    if (!a->cfg.net_addr[0] && stat(dir, &st) != 0)
        return; /* never isolated here: nft need not even be installed */
    int removed = 0;
    ts_err e;
    if (agent_net_start(a->cfg.state_dir, adopted, a, &removed, &e) != 0)
        fprintf(stderr, "tessera-agent: tenant networks: %s\n", e.msg);
    if (removed > 0)
        fprintf(stderr, "tessera-agent: removed the networks of %d task(s) no longer here\n",
                removed);
}

/* The answer's members in `members` as compact JSON: what was applied
 * last is kept as this, and an answer that says the same is not applied
 * again. NULL: out of memory. */
static char *net_key(const ts_desired *d, uint64_t members)
{
    ts_desired only = *d;
    only.present = d->present & members;
    json_t *o = ts_desired_encode(&only);
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return s;
}

/* A list of the desired task as the network code reads it: at most
 * AGENT_NET_PEERS_MAX of its strings. */
static size_t net_count(const ts_strv *v)
{
    return (size_t)(v->n < AGENT_NET_PEERS_MAX ? v->n : AGENT_NET_PEERS_MAX);
}

void agent_net_begin(ts_agent *a, local_task *lt, const char *id, const ts_desired_task *d,
                     char *ns_path, size_t len, char *why, size_t why_len)
{
    ns_path[0] = '\0';
    if (!(d->present & TS_DT_BIT(TS_DT_NET)))
        return;
    if (!a->cfg.net_addr[0]) {
        snprintf(why, why_len, "net: the cluster isolates tenants, but this node's agent has "
                 "no underlay address (tessera-agent --net-addr)");
        return;
    }
    int64_t vni = d->net.vni;
    agent_net_task nt = {
        .task_id = id,
        .vni = vni > 0 && vni <= 16777215 ? (unsigned)vni : 0,
        .addr = d->net.addr,
        .prefix = d->net.prefix,
        .local = a->cfg.net_addr,
        .peers = d->net.peers.v,
        .npeers = net_count(&d->net.peers),
        .mtu = d->net.mtu,
        /* the task's ports reachable at this node, from publish_from */
        .publish = d->net.publish.v,
        .npublish = net_count(&d->net.publish),
        .publish_from = d->net.publish_from.v,
        .npublish_from = net_count(&d->net.publish_from),
    };
    /* a published port never takes one this node serves itself (sshd, this agent's) */
    const char *colon = strrchr(a->cfg.p2p_listen, ':');
    unsigned own[2] = {a->cfg.metrics_port > 0 ? (unsigned)a->cfg.metrics_port : 0,
                       colon ? (unsigned)strtoul(colon + 1, NULL, 10) : 0};
    if (agent_net_publish_check("/proc/net", nt.publish, nt.npublish, own, 2, why, why_len) != 0)
        return;
    ts_err e;
    /* "nics": "dedicated": a VF or rail NIC per GPU, by the rail map */
    char names[AGENT_NET_NICS_MAX][TS_NICS_NAME_MAX], rnames[AGENT_NET_NICS_MAX][TS_NICS_NAME_MAX];
    const char *nics[AGENT_NET_NICS_MAX], *rdma[AGENT_NET_NICS_MAX];
    char note[TS_ERR_MSG_MAX] = "";
    if (d->net.nics_dedicated) {
        if (lt->ngpu == 0) {
            snprintf(why, why_len, "net.nics: dedicated NICs are one per GPU, and the task "
                     "has no GPU");
            return;
        }
        const char *root = a->node->sysfs_root[0] ? a->node->sysfs_root : "/sys";
        for (int i = 0; i < lt->ngpu && i < AGENT_NET_NICS_MAX; i++) {
            if (agent_nics_netdev(root, &a->node->nics, lt->gpu[i], names[i], sizeof names[i],
                               &e) != 0) {
                snprintf(why, why_len, "net.nics: %s", e.msg);
                return;
            }
            nics[i] = names[i];
            /* its RDMA device goes with it, where the host isolates RDMA per namespace */
            if (agent_nics_rdmadev(root, &a->node->nics, lt->gpu[i], rnames[i], sizeof rnames[i],
                                &e) != 0)
                rnames[i][0] = '\0';
            rdma[i] = rnames[i];
        }
        nt.nics = nics;
        nt.nnics = (size_t)(lt->ngpu < AGENT_NET_NICS_MAX ? lt->ngpu : AGENT_NET_NICS_MAX);
        nt.rdma = rdma;
        nt.nrdma = nt.nnics;
        nt.note = note;
        nt.note_len = sizeof note;
    }
    if (agent_net_setup(a->cfg.state_dir, &nt, ns_path, len, &e) != 0) {
        snprintf(why, why_len, "%s", e.msg);
        ns_path[0] = '\0';
    } else {
        lt->net_vni = nt.vni;
        if (note[0])
            fprintf(stderr, "tessera-agent: task %s: %s\n", id, note);
    }
}

void agent_net_end(ts_agent *a, const local_task *lt)
{
    char id[64];
    task_id_of(lt, id, sizeof id);
    ts_err e;
    if (agent_net_has(a->cfg.state_dir, id) && agent_net_teardown(a->cfg.state_dir, id, &e) != 0)
        fprintf(stderr, "tessera-agent: task %s: removing its network: %s\n", id, e.msg);
}

void agent_net_peers_apply(ts_agent *a, const ts_desired *d)
{
    if (!(d->present & TS_DS_BIT(TS_DS_NET_PEERS)))
        return;
    char *s = net_key(d, TS_DS_BIT(TS_DS_NET_PEERS));
    if (!s || (a->net_peers && strcmp(s, a->net_peers) == 0)) {
        free(s);
        return;
    }
    size_t n = net_count(&d->net_peers);
    bool ok = true;
    for (int i = 0; i < a->ntasks; i++) {
        unsigned vni = a->tasks[i].net_vni;
        bool seen = false;
        for (int k = 0; k < i && !seen; k++)
            seen = a->tasks[k].net_vni == vni;
        ts_err e;
        if (vni && !seen &&
            agent_net_peers(a->cfg.state_dir, vni, a->cfg.net_addr, d->net_peers.v, n, &e) != 0) {
            fprintf(stderr, "tessera-agent: tenant network %u: %s\n", vni, e.msg);
            ok = false;
        }
    }
    free(a->net_peers);
    a->net_peers = ok ? s : NULL; /* a failure is tried again on the next answer */
    if (!ok)
        free(s);
}

void agent_net_services_apply(ts_agent *a, const ts_desired *d)
{
    if (!(d->present & TS_DS_BIT(TS_DS_NET_SERVICES)) || !a->cfg.net_addr[0])
        return;
    char *s = net_key(d, TS_DS_BIT(TS_DS_NET_SERVICES) | TS_DS_BIT(TS_DS_NET_TENANT_SERVICES));
    if (!s || (a->net_services && strcmp(s, a->net_services) == 0)) {
        free(s);
        return;
    }
    /* every tenant's ("ADDR:PORT/proto"), then those of one tenant ({vni, to}) */
    size_t n = (size_t)d->net_services.n + (size_t)d->nnet_tenant_services, k = 0;
    agent_net_service *v = calloc(n + 1, sizeof *v);
    for (int i = 0; v && i < d->net_services.n; i++)
        v[k++] = (agent_net_service){d->net_services.v[i], 0};
    for (int i = 0; v && i < d->nnet_tenant_services; i++) {
        const ts_desired_tenant_service *e = &d->net_tenant_services[i];
        if (e->vni > 0 && e->vni <= 16777215)
            v[k++] = (agent_net_service){e->to, (unsigned)e->vni};
    }
    ts_err e;
    bool ok = v && agent_net_services(a->cfg.state_dir, v, k, &e) == 0;
    if (v && !ok)
        fprintf(stderr, "tessera-agent: tenant networks' services: %s\n", e.msg);
    free(v);
    free(a->net_services);
    a->net_services = ok ? s : NULL; /* a failure is tried again on the next answer */
    if (!ok)
        free(s);
}
