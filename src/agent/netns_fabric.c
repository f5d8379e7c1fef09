/*
 * netns_fabric.c - the agent's fabric namespace, where its tenants'
 * bridges live (netns.h, docs/network.md).
 *
 * Why a namespace of its own: br_netfilter, when the host has it loaded
 * (container runtimes and Kubernetes need it), hands every IPv4 frame a
 * bridge forwards to the host's inet hooks: a socket-buffer extension, the
 * header checks and three more hook traversals per frame, about a tenth of
 * the CPU an overlay byte costs (bench/netns). Its switches
 * (bridge-nf-call-*) are per network namespace, so the tenants' bridges, the
 * VXLAN devices and the host ends of the tasks' veths live in this
 * namespace, with the switches off, and the host's own setting stays what
 * other software set. The VXLAN devices are made in the agent's namespace
 * and moved here: their UDP sockets stay in the agent's namespace, on the
 * underlay. The host keeps one veth per tenant (t<tag4>b<vni>, the
 * tenant's gateway: its address and MAC), whose other end (t<tag4>g<vni>)
 * is a port of the tenant's bridge here; routing to services, published
 * ports and masquerading stay in the host's inet table as before. The
 * bridge table (the bindings of port, address and MAC) is loaded here.
 *
 * Tasks of this agent sit on their tenant's VXLAN here through macvlans
 * (netns.h), with no bridge; the bridges above remain for the tasks an
 * agent before the macvlans started, until they end. The VXLANs' chains
 * (netdev table: xi<vni> on the way in, xo<vni> on the way out) are loaded
 * here too.
 *
 * The namespace is tsf-<tag> (tag as netns.c's: a task's is ts-<tag>-<id>),
 * made on the first task's setup and removed with the last task's teardown.
 * Looking into it (does a link exist, its sysctls) is done by the calling
 * thread entering it with setns and coming back: a network namespace is a
 * thread's own, so the agent's other threads are not moved. Nothing here is
 * thread-safe beyond that (netns.h).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/neighbour.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "agent/netns.h"
#include "agent/netns_priv.h"

#define FABRIC_TABLE_BYTES 8192

void agent_net_fabric_name(const net_names *nn, char *out, size_t len)
{
    snprintf(out, len, "tsf-%s", nn->table + strlen("tessera_"));
}

void agent_net_fabric_path(const net_names *nn, char *out, size_t len)
{
    char name[64];
    agent_net_fabric_name(nn, name, sizeof name);
    snprintf(out, len, "/run/netns/%s", name);
}

bool agent_net_fabric_exists(const net_names *nn)
{
    char path[128];
    agent_net_fabric_path(nn, path, sizeof path);
    return access(path, F_OK) == 0;
}

/* Runs fn(ctx) with the calling thread in the fabric namespace, then back
 * in its own; -1 (errno set) if either move fails. */
static int in_fabric(const net_names *nn, int (*fn)(void *ctx), void *ctx)
{
    char path[128];
    agent_net_fabric_path(nn, path, sizeof path);
    int self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    if (self < 0)
        return -1;
    int there = open(path, O_RDONLY | O_CLOEXEC);
    if (there < 0 || setns(there, CLONE_NEWNET) != 0) {
        int e = errno;
        if (there >= 0)
            close(there);
        close(self);
        errno = e;
        return -1;
    }
    int rc = fn(ctx);
    int e = errno;
    if (setns(self, CLONE_NEWNET) != 0)
        abort(); /* a thread left in the fabric would act on the wrong network */
    close(there);
    close(self);
    errno = e;
    return rc;
}

static int name_index(void *ctx) { return (int)if_nametoindex(ctx); }

bool agent_net_fabric_has_link(const net_names *nn, const char *name)
{
    int rc = in_fabric(nn, name_index, (void *)name);
    return rc > 0;
}

/* ---- a VXLAN's forwarding entries ------------------------------------------------- */

/* At most this many reads of one dump (a namespace's whole bridge fdb: the
 * VXLANs' flood entries and the MACs they learned), each waiting at most
 * FDB_READ_WAIT_S, and at most FDB_ENTRIES_MAX entries of one VXLAN kept: a
 * kernel that never ends the dump costs a bounded wait. */
#define FDB_READS_MAX 4096
#define FDB_READ_WAIT_S 2
#define FDB_ENTRIES_MAX 65536

/* An entry of a VXLAN's forwarding table with an IPv4 destination: a flood
 * entry (the all-zero MAC: broadcasts, multicast and unknown MACs go there)
 * or a MAC it learned (or was given) at a destination. */
typedef struct fdb_ent {
    char mac[18];
    char dst[INET_ADDRSTRLEN];
    bool flood;
} fdb_ent;

typedef struct fdb_read {
    const char *vx;
    fdb_ent *v;
    size_t n, cap;
    bool oom;
} fdb_read;

/* One message of the dump: an entry of vx (index ifx) with a MAC and an
 * IPv4 destination is kept. */
static void fdb_entry(fdb_read *fr, int ifx, struct nlmsghdr *h)
{
    struct ndmsg *nd = NLMSG_DATA(h);
    if (h->nlmsg_type != RTM_NEWNEIGH || h->nlmsg_len < NLMSG_LENGTH(sizeof *nd) ||
        nd->ndm_ifindex != ifx)
        return;
    const unsigned char *mac = NULL;
    const void *dst = NULL;
    int len = (int)(h->nlmsg_len - NLMSG_LENGTH(sizeof *nd));
    for (struct rtattr *a = (void *)((char *)nd + NLMSG_ALIGN(sizeof *nd));
         RTA_OK(a, len); a = RTA_NEXT(a, len)) {
        if (a->rta_type == NDA_LLADDR && RTA_PAYLOAD(a) == 6)
            mac = RTA_DATA(a);
        else if (a->rta_type == NDA_DST && RTA_PAYLOAD(a) == 4)
            dst = RTA_DATA(a);
    }
    if (!mac || !dst || fr->n >= FDB_ENTRIES_MAX)
        return;
    if (fr->n == fr->cap) {
        size_t cap = fr->cap ? fr->cap * 2 : 64;
        fdb_ent *v = realloc(fr->v, cap * sizeof *v);
        if (!v) {
            fr->oom = true;
            return;
        }
        fr->v = v;
        fr->cap = cap;
    }
    fdb_ent *e = &fr->v[fr->n];
    snprintf(e->mac, sizeof e->mac, "%02x:%02x:%02x:%02x:%02x:%02x", mac[0], mac[1], mac[2],
             mac[3], mac[4], mac[5]);
    e->flood = !(mac[0] | mac[1] | mac[2] | mac[3] | mac[4] | mac[5]);
    if (inet_ntop(AF_INET, dst, e->dst, sizeof e->dst))
        fr->n++;
}

/* Reads a dump's answers until its end; 0, or -1 with errno. */
static int fdb_answers(int fd, fdb_read *fr, int ifx, char *buf, size_t size)
{
    for (int reads = 0;; reads++) {
        ssize_t got = reads < FDB_READS_MAX ? recv(fd, buf, size, 0) : -1;
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0) {
            if (got == 0 || reads >= FDB_READS_MAX || errno == EAGAIN)
                errno = ETIMEDOUT; /* the dump never ended */
            return -1;
        }
        /* NLMSG_OK and NLMSG_NEXT, written out: the macros compare the
         * unsigned nlmsg_len with a signed length (clang's -Wsign-compare) */
        size_t left = (size_t)got, step;
        for (struct nlmsghdr *h = (void *)buf;
             left >= sizeof *h && h->nlmsg_len >= sizeof *h && h->nlmsg_len <= left;
             step = NLMSG_ALIGN(h->nlmsg_len), left = step < left ? left - step : 0,
             h = (struct nlmsghdr *)((char *)h + step)) {
            if (h->nlmsg_type == NLMSG_DONE)
                return fr->oom ? (errno = ENOMEM, -1) : 0;
            if (h->nlmsg_type == NLMSG_ERROR) {
                const struct nlmsgerr *e = NLMSG_DATA(h);
                errno = e->error ? -e->error : EIO;
                return -1;
            }
            fdb_entry(fr, ifx, h);
        }
    }
}

/* Dumps the bridge fdb of the calling thread's namespace (RTM_GETNEIGH,
 * AF_BRIDGE) and keeps vx's entries; a namespace without vx has none. 0, or
 * -1 with errno. */
static int fdb_dump(void *ctx)
{
    fdb_read *fr = ctx;
    int ifx = (int)if_nametoindex(fr->vx);
    if (ifx == 0)
        return 0;
    size_t size = 32768; /* a dump's messages come in reads of at most this */
    char *buf = malloc(size);
    int fd = buf ? socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE) : -1;
    if (fd < 0) {
        int e = buf ? errno : ENOMEM;
        free(buf);
        errno = e;
        return -1;
    }
    struct timeval tv = {.tv_sec = FDB_READ_WAIT_S};
    struct {
        struct nlmsghdr h;
        struct ndmsg nd;
    } req = {.h = {.nlmsg_len = sizeof req, .nlmsg_type = RTM_GETNEIGH,
                   .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP, .nlmsg_seq = 1},
             .nd = {.ndm_family = AF_BRIDGE}};
    struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
    int rc = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0 ||
                     sendto(fd, &req, sizeof req, 0, (struct sockaddr *)&kernel,
                            sizeof kernel) < 0
                 ? -1
                 : fdb_answers(fd, fr, ifx, buf, size);
    int e = errno;
    close(fd);
    free(buf);
    errno = e;
    return rc;
}

/* The entries of the VXLAN vx, in the fabric (fabric: its names) or, an
 * earlier agent's, in this namespace (NULL): a new array into *out (NULL
 * with *n 0 where there are none, or no vx). */
static int fdb_read_all(const net_names *fabric, const char *vx, fdb_ent **out,
                        size_t *n, ts_err *err)
{
    fdb_read fr = {.vx = vx};
    int rc = fabric ? in_fabric(fabric, fdb_dump, &fr) : fdb_dump(&fr);
    if (rc != 0) {
        int e = errno;
        free(fr.v);
        *out = NULL;
        *n = 0;
        return ts_err_set(err, e == ENOMEM ? TS_ENOMEM : TS_EIO,
                          "network: reading %s's forwarding entries: %s", vx, strerror(e));
    }
    *out = fr.v;
    *n = fr.n;
    return 0;
}

static bool listed(const char *addr, const char *const *peers, size_t npeers, const char *local)
{
    if (local && strcmp(addr, local) == 0)
        return false; /* this node's own */
    for (size_t i = 0; i < npeers; i++)
        if (strcmp(addr, peers[i]) == 0)
            return true;
    return false;
}

/* Makes the flood entries of vx exactly peers (local left out): the ones
 * it lacks appended, then the ones no longer listed deleted (a node gone,
 * or moved to another underlay address, which another host may take), and
 * with them the MACs it learned there (a task's MAC follows its address,
 * which a task at the node's new address may have again); vx in the fabric
 * namespace (fabric: its names) or, an earlier agent's, in this one (NULL).
 * What is there is read back each time, so entries the kernel holds from an
 * earlier agent, or a batch that failed half-way, are put right the same way. */
int agent_net_fdb_sync(const net_names *fabric, const char *vx, const char *const *peers,
                       size_t npeers, const char *local, ts_err *err)
{
    fdb_ent *have = NULL;
    size_t nhave = 0, len = 0;
    int rc = fdb_read_all(fabric, vx, &have, &nhave, err);
    char *s = rc == 0 ? malloc((npeers + nhave) * 80 + 1) : NULL;
    if (rc == 0 && !s)
        rc = ts_err_set(err, TS_ENOMEM, "network: out of memory");
    for (size_t i = 0; rc == 0 && i < npeers; i++) {
        bool there = !listed(peers[i], peers, npeers, local);
        for (size_t k = 0; k < nhave && !there; k++)
            there = have[k].flood && strcmp(have[k].dst, peers[i]) == 0;
        for (size_t k = 0; k < i && !there; k++) /* listed twice */
            there = strcmp(peers[k], peers[i]) == 0;
        if (!there)
            len += (size_t)sprintf(s + len, "fdb append 00:00:00:00:00:00 dev %s dst %s\n",
                                   vx, peers[i]);
    }
    for (int flood = 1; flood >= 0; flood--) /* learned MACs last: they may age out meanwhile */
        for (size_t k = 0; rc == 0 && k < nhave; k++)
            if (have[k].flood == flood && !listed(have[k].dst, peers, npeers, local))
                len += (size_t)sprintf(s + len, "fdb del %s dev %s dst %s\n", have[k].mac, vx,
                                       have[k].dst);
    char fab[64] = "";
    if (fabric)
        agent_net_fabric_name(fabric, fab, sizeof fab);
    const char *host[] = {"bridge", "-batch", "-", NULL};
    const char *there[] = {"bridge", "-n", fab, "-batch", "-", NULL};
    if (rc == 0 && len)
        rc = agent_net_run_tool(fabric ? there : host, s, err);
    free(s);
    free(have);
    return rc;
}

/* The switches off and no IPv6 on the links here (they only bridge). */
static int fabric_sysctls(void *ctx)
{
    static const char *const knobs[] = {
        "/proc/sys/net/bridge/bridge-nf-call-iptables",
        "/proc/sys/net/bridge/bridge-nf-call-ip6tables",
        "/proc/sys/net/bridge/bridge-nf-call-arptables",
        "/proc/sys/net/ipv6/conf/default/disable_ipv6",
        "/proc/sys/net/ipv6/conf/all/disable_ipv6"};
    static const char values[] = {'0', '0', '0', '1', '1'};
    ts_err *err = ctx;
    err->code = 0;
    for (size_t i = 0; i < sizeof values; i++) {
        int fd = open(knobs[i], O_WRONLY | O_CLOEXEC);
        if (fd < 0 && errno == ENOENT)
            continue; /* no br_netfilter (nothing to switch off) or no IPv6 */
        if (fd < 0 || write(fd, &values[i], 1) != 1) {
            int e = errno;
            if (fd >= 0)
                close(fd);
            ts_err_set(err, TS_EIO, "network: fabric %s: %s", knobs[i], strerror(e));
            return -1;
        }
        close(fd);
    }
    return 0;
}

int agent_net_fabric_nft(const net_names *nn, const char *script, ts_err *err)
{
    char path[128];
    agent_net_fabric_path(nn, path, sizeof path);
    return agent_net_nft_in(path, script, err);
}

int agent_net_fabric_ip(const net_names *nn, const char *script, ts_err *err)
{
    char name[64];
    agent_net_fabric_name(nn, name, sizeof name);
    const char *argv[] = {"ip", "-n", name, "-batch", "-", NULL};
    return agent_net_run_tool(argv, script, err);
}

int agent_net_fabric_table(const net_names *nn, const char *bindings, ts_err *err)
{
    char *script = malloc(FABRIC_TABLE_BYTES + (bindings ? strlen(bindings) : 0));
    if (!script)
        return ts_err_set(err, TS_ENOMEM, "network: out of memory");
    size_t n = (size_t)snprintf(script, FABRIC_TABLE_BYTES, "table bridge %s\n"
                                "delete table bridge %s\ntable netdev %s\n"
                                "delete table netdev %s\n", nn->table, nn->table, nn->table,
                                nn->table);
    n += agent_net_policy_bridge_text(nn, script + n, FABRIC_TABLE_BYTES - n);
    strcpy(script + n, bindings ? bindings : "");
    int rc = agent_net_fabric_nft(nn, script, err);
    free(script);
    return rc;
}

int agent_net_fabric_ensure(const net_names *nn, ts_err *err)
{
    if (agent_net_fabric_exists(nn))
        return 0;
    char name[64];
    agent_net_fabric_name(nn, name, sizeof name);
    const char *argv[] = {"ip", "netns", "add", name, NULL};
    int rc = agent_net_run_tool(argv, NULL, err);
    if (rc)
        return rc;
    err->code = 0;
    if (in_fabric(nn, fabric_sysctls, err) != 0) {
        int code = err->code;
        if (code == 0)
            ts_err_set(err, TS_EIO, "network: entering the fabric namespace %s: %s", name,
                       strerror(errno));
        agent_net_fabric_remove(nn);
        return code ? code : err->code;
    }
    if ((rc = agent_net_fabric_table(nn, NULL, err)) != 0)
        agent_net_fabric_remove(nn);
    return rc;
}

void agent_net_fabric_remove(const net_names *nn)
{
    char name[64];
    ts_err e;
    agent_net_fabric_name(nn, name, sizeof name);
    const char *argv[] = {"ip", "netns", "delete", name, NULL};
    if (agent_net_fabric_exists(nn))
        agent_net_run_tool(argv, NULL, &e);
}

/* The tenant's last task here is gone: its bridge, VXLAN and gateway (the
 * fabric's, or an earlier agent's in this namespace). */
void agent_net_tenant_remove(const net_names *nn, unsigned vni, bool legacy, bool fabric,
                             int *rc, ts_err *err)
{
    char br[IFNAMSIZ], vx[IFNAMSIZ], gp[IFNAMSIZ], script[160] = "";
    ts_err e;
    size_t n = 0;
    agent_net_tenant_link(nn, 'b', vni, false, br);
    agent_net_tenant_link(nn, 'x', vni, false, vx);
    agent_net_tenant_link(nn, 'g', vni, false, gp);
    if (fabric && agent_net_fabric_has_link(nn, vx)) { /* its overlay chain first */
        char chain[160];
        snprintf(chain, sizeof chain, "delete chain netdev %s xi%u\ndelete chain netdev %s xo%u\n",
                 nn->table, vni & VNI_MAX, nn->table, vni & VNI_MAX);
        agent_net_fabric_nft(nn, chain, &e); /* none (a bridge's VXLAN, a reload): no error */
    }
    if (fabric) { /* the gateway's fabric end (or the VXLAN its macvlan) takes its host end */
        const char *names[] = {vx, gp, br};
        for (int i = 0; i < 3; i++)
            if (agent_net_fabric_has_link(nn, names[i]))
                n += (size_t)snprintf(script + n, sizeof script - n, "link delete %s\n",
                                      names[i]);
        if (n && agent_net_fabric_ip(nn, script, &e) != 0 && *rc == 0) {
            *rc = e.code;
            *err = e;
        }
    }
    agent_net_tenant_link(nn, 'b', vni, legacy, br);
    agent_net_tenant_link(nn, 'x', vni, legacy, vx);
    bool host_vx = if_nametoindex(vx) != 0;
    n = 0;
    if (host_vx)
        n += (size_t)snprintf(script + n, sizeof script - n, "link delete %s\n", vx);
    if (if_nametoindex(br) != 0)
        n += (size_t)snprintf(script + n, sizeof script - n, "link delete %s\n", br);
    if (host_vx) { /* an earlier agent's bridge: its element of "bridged" */
        char el[160];
        snprintf(el, sizeof el, "delete element inet %s bridged { \"%s\" . \"%s\" }\n",
                 nn->table, br, br);
        agent_net_nft_in(NULL, el, &e); /* absent after a table reload: no error */
    }
    const char *argv[] = {"ip", "-batch", "-", NULL};
    if (n && agent_net_run_tool(argv, script, &e) != 0 && *rc == 0) {
        *rc = e.code;
        *err = e;
    }
}
