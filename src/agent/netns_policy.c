/*
 * netns_policy.c - the tenant networks' nftables policy (netns.h), the
 * services tasks may reach, and running the kernel's tools for netns.c.
 *
 * The policy is two tables per agent, text with its names filled in
 * (agent_net_policy_text), loaded whole by agent_net_start; the sets in
 * them (bindings, services, published ports) change by element. The tools
 * (ip, bridge, nft, rdma) run by posix_spawn with argv, their commands on
 * stdin and a fixed environment, never a shell: the kernel's own tools
 * parse and apply each batch and name the failing line.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/child.h"
#include "agent/netns.h"
#include "agent/netns_priv.h"

#define TOOL_ERR_BYTES 400

/* The tables; replaced whole at agent start (agent_net_start), the bridge
 * table in the fabric namespace (netns_fabric.c) and, for the bridges an
 * agent before the fabric made in its own namespace, there too. "{P}" stands
 * for this agent's link prefix, "{T}" for its tables' name (net_names): each
 * agent of a host matches only its own links, so one agent's rules never
 * drop another's frames, and one agent's start never replaces another's
 * tables. */
static const char POLICY_BRIDGE[] =
    "table bridge {T} {\n"
    /* a task's binding: its port, MAC and address, one element */
    "  set bound4 { type ifname . ether_addr . ipv4_addr; }\n"
    /* what a task's port may send: IPv4 from its own MAC and address, ARP
     * for them; nothing else (IPv6, VLAN tags, other types). One lookup for
     * an IPv4 frame, the common case: this chain runs for every frame */
    "  chain from_task {\n"
    "    ether type ip iifname . ether saddr . ip saddr @bound4 accept\n"
    "    ether type arp iifname . ether saddr . arp saddr ip @bound4"
    " iifname . arp saddr ether . arp saddr ip @bound4 accept\n"
    "    counter drop\n"
    "  }\n"
    /* what the tenant's VXLAN brings from the other nodes: IPv4 and ARP;
     * every node's gateway has one MAC, so another node's answer must not
     * reach this node's tasks */
    "  chain from_overlay {\n"
    "    ether saddr & ff:ff:ff:00:00:00 == " GW_MAC_PREFIX " counter drop\n"
    "    ether type { ip, arp } accept\n"
    "    counter drop\n"
    "  }\n"
    /* prerouting: every frame entering a tenant bridge, whether it is
     * forwarded (to another port or the VXLAN) or goes to the gateway */
    "  chain prerouting {\n"
    "    type filter hook prerouting priority -200; policy accept;\n"
    "    iifname \"{P}v*\" jump from_task\n"
    "    iifname \"{P}x*\" jump from_overlay\n"
    "  }\n"
    "}\n";

/* The fabric's tenant VXLANs whose tasks' macvlans sit on them (netns.h):
 * the table whose chains (agent_net_overlay_chain_text) each VXLAN gets. */
static const char POLICY_OVERLAY[] = "table netdev {T} {\n}\n";

/* A task's own table in its namespace, on its eth0's egress: what a task
 * sends leaves only through it (a macvlan on the tenant's VXLAN), and a task
 * has no CAP_NET_ADMIN there to change it (the agent's tasks run as their
 * user; containers keep Docker's default capabilities). IPv4 from its own
 * MAC and address, ARP for them; nothing else (IPv6, VLAN tags, other
 * types). "%1$s" its MAC, "%2$s" its address. */
static const char POLICY_TASK[] =
    "table netdev {T} {\n"
    "  chain egress {\n"
    "    type filter hook egress device \"eth0\" priority 0; policy drop;\n"
    "    ether saddr %1$s ether type ip ip saddr %2$s accept\n"
    "    ether saddr %1$s ether type arp arp saddr ether %1$s arp saddr ip %2$s accept\n"
    "    counter\n"
    "  }\n"
    "}\n";

/* For the bridges an earlier agent made in its own namespace, which
 * br_netfilter shows to the host's inet hooks (the fabric's has it off):
 * a frame that stays on a tenant's layer 2 needs no connection state, so it
 * is not tracked; frames to the gateway (routed to a service or the host)
 * are. */
static const char POLICY_BRIDGE_RAW[] =
    "table bridge {T} {\n"
    "  chain raw {\n"
    "    type filter hook prerouting priority -300; policy accept;\n"
    "    iifname { \"{P}v*\", \"{P}x*\" } ether daddr & ff:ff:ff:00:00:00 != " GW_MAC_PREFIX
    " notrack\n"
    "  }\n"
    "}\n";

static const char POLICY_INET[] =
    /* the host, where each tenant's gateway is a veth named like a bridge
     * ({P}b<vni>, the fabric's bridge at its other end): a legacy bridge's
     * frames that br_netfilter shows here (the same bridge in and out: set
     * "bridged") pass; what is routed from a gateway goes only to the services (set "services", the controller's
     * network.services, and "tenant_services", those of only some tenants,
     * keyed by their bridges), masqueraded as the node; nothing is routed into a
     * bridge but their answers; the host itself takes from a bridge only
     * connections to services it runs. The overlay's own UDP (the VXLAN
     * packets between nodes) is not tracked: it is stateless both ways */
    "table inet {T} {\n"
    "  set bridged { type ifname . ifname; }\n"
    "  set services { type ipv4_addr . inet_proto . inet_service; flags interval; }\n"
    /* the services only some tenants may reach: their bridges' names first */
    "  set tenant_services {\n"
    "    type ifname . ipv4_addr . inet_proto . inet_service; flags interval;\n"
    "  }\n"
    /* published ports (a serving job's "network: {publish}"): the node's
     * port forwarded to the task holding it, from publish_from only and
     * never from a tenant's bridge */
    "  map published { type inet_proto . inet_service : ipv4_addr; }\n"
    "  set publish_from { type ipv4_addr; flags interval; }\n"
    "  chain publish {\n"
    "    type nat hook prerouting priority -100; policy accept;\n"
    "    iifname != \"{P}b*\" fib daddr type local ip saddr @publish_from"
    " dnat ip to meta l4proto . th dport map @published\n"
    "  }\n"
    "  chain raw_prerouting {\n"
    "    type filter hook prerouting priority -300; policy accept;\n"
    "    udp dport " STR(VXLAN_PORT) " notrack\n"
    "  }\n"
    "  chain raw_output {\n"
    "    type filter hook output priority -300; policy accept;\n"
    /* VXLAN carries no proof of origin: a datagram to any node's VXLAN port
     * from a process of this node (a host-network task) would land its
     * inner frame, with any tenant's VNI, in that tenant's overlay. Only
     * the kernel's VXLAN devices send there: their packets carry no socket
     * of this namespace (a task's, from its own, does not count here) or
     * root's */
    "    udp dport " STR(VXLAN_PORT) " meta skuid != 0 counter drop\n"
    "    udp dport " STR(VXLAN_PORT) " notrack\n"
    "  }\n"
    "  chain forward {\n"
    "    type filter hook forward priority 0; policy accept;\n"
    "    iifname . oifname @bridged accept\n"
    "    iifname \"{P}b*\" ip daddr . meta l4proto . th dport @services accept\n"
    "    iifname . ip daddr . meta l4proto . th dport @tenant_services accept\n"
    "    iifname \"{P}b*\" ct status dnat ct state established accept\n"
    "    iifname \"{P}b*\" counter drop\n"
    "    oifname \"{P}b*\" ct state established,related accept\n"
    "    oifname \"{P}b*\" ct status dnat accept\n"
    "    oifname \"{P}b*\" counter drop\n"
    "  }\n"
    "  chain input {\n"
    "    type filter hook input priority 0; policy accept;\n"
    /* the rest is about the gateways: the underlay's packets (the VXLAN's
     * among them) go on after one comparison */
    "    iifname != \"{P}b*\" accept\n"
    "    iifname \"{P}b*\" ip daddr . meta l4proto . th dport @services accept\n"
    "    iifname . ip daddr . meta l4proto . th dport @tenant_services accept\n"
    "    iifname \"{P}b*\" ct state established,related accept\n"
    "    iifname \"{P}b*\" counter drop\n"
    "  }\n"
    "  chain postrouting {\n"
    "    type nat hook postrouting priority 100; policy accept;\n"
    "    iifname \"{P}b*\" oifname != \"{P}b*\" masquerade\n"
    "  }\n"
    "}\n";

/* ---- running the tools ------------------------------------------------------- */

static const char *tool_path(const char *name, char *buf, size_t len)
{
    static const char *const dirs[] = {"/usr/sbin", "/sbin", "/usr/bin", "/bin"};
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        snprintf(buf, len, "%s/%s", dirs[i], name);
        if (access(buf, X_OK) == 0)
            return buf;
    }
    return NULL;
}

static int tool_timeout_ms = AGENT_NET_TOOL_TIMEOUT_MS;

void agent_net_set_tool_timeout_ms(int ms)
{
    tool_timeout_ms = ms > 0 ? ms : AGENT_NET_TOOL_TIMEOUT_MS;
}

int agent_net_run_tool(const char *const *argv, const char *input, ts_err *err)
{
    char path[64];
    if (!tool_path(argv[0], path, sizeof path))
        return ts_err_set(err, TS_ENOENT, "network: %s: not installed (iproute2, nftables)",
                          argv[0]);
    int in[2] = {-1, -1}, er[2] = {-1, -1};
    if (pipe2(in, O_CLOEXEC) != 0 || pipe2(er, O_CLOEXEC) != 0) {
        int e = errno;
        for (int i = 0; i < 2; i++) {
            if (in[i] >= 0)
                close(in[i]);
            if (er[i] >= 0)
                close(er[i]);
        }
        return ts_err_set(err, TS_EIO, "network: pipe: %s", strerror(e));
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, er[1], 2);
    posix_spawnattr_t at;
    posix_spawnattr_init(&at);
    sigset_t none;
    sigemptyset(&none);
    posix_spawnattr_setsigmask(&at, &none);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK);
    static char *const envp[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C", NULL};
    pid_t pid;
    int rc = posix_spawn(&pid, path, &fa, &at, (char *const *)argv, envp);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    close(in[0]);
    close(er[1]);
    if (rc != 0) {
        close(in[1]);
        close(er[0]);
        return ts_err_set(err, TS_EIO, "network: %s: %s", argv[0], strerror(rc));
    }
    fcntl(in[1], F_SETFL, O_NONBLOCK);
    char msg[TOOL_ERR_BYTES];
    /* a tool that hangs (the kernel's lock held long, a namespace going
     * away) must not hold the agent: it is killed at the deadline */
    int64_t deadline = agent_mono_ms() + tool_timeout_ms;
    /* past the deadline (stderr still open, or closed and the tool going
     * on) it is killed and reaped at once */
    if (agent_child_talk(in[1], er[0], input, msg, sizeof msg, deadline) != 0)
        deadline = 0;
    int status;
    if (agent_child_reap(pid, deadline, &status) == ETIMEDOUT)
        return ts_err_set(err, TS_ETIMEDOUT, "network: %s did not finish within %d ms (killed)",
                          argv[0], tool_timeout_ms);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return 0;
    char *nl = strchr(msg, '\n');
    if (nl)
        *nl = '\0';
    return ts_err_set(err, TS_EIO, "network: %s failed: %s", argv[0],
                      msg[0] ? msg : "(no message)");
}

int agent_net_nft_in(const char *ns_path, const char *script, ts_err *err)
{
    if (!ns_path) {
        const char *here[] = {"nft", "-f", "-", NULL};
        return agent_net_run_tool(here, script, err);
    }
    char arg[160];
    snprintf(arg, sizeof arg, "--net=%s", ns_path);
    const char *argv[] = {"nsenter", arg, "nft", "-f", "-", NULL};
    return agent_net_run_tool(argv, script, err);
}

/* text with this agent's names in: {P} its link prefix, {T} its tables. */
static size_t fill(const char *text, const net_names *nn, char *out, size_t len)
{
    size_t n = 0;
    for (const char *p = text; *p && n + 32 < len; p++) {
        if (strncmp(p, "{P}", 3) == 0) {
            n += (size_t)snprintf(out + n, len - n, "%s", nn->prefix);
            p += 2;
        } else if (strncmp(p, "{T}", 3) == 0) {
            n += (size_t)snprintf(out + n, len - n, "%s", nn->table);
            p += 2;
        } else {
            out[n++] = *p;
        }
    }
    out[n] = '\0';
    return n;
}

size_t agent_net_policy_text(const net_names *nn, char *out, size_t len)
{
    size_t n = fill(POLICY_BRIDGE, nn, out, len);
    n += fill(POLICY_BRIDGE_RAW, nn, out + n, len - n);
    return n + fill(POLICY_INET, nn, out + n, len - n);
}

size_t agent_net_policy_bridge_text(const net_names *nn, char *out, size_t len)
{
    size_t n = fill(POLICY_BRIDGE, nn, out, len);
    return n + fill(POLICY_OVERLAY, nn, out + n, len - n);
}

/* A tenant VXLAN's two chains, each rule in its base chain (no jump: these
 * run for every overlay packet). Only IPv4 and ARP come in from the other
 * nodes (xi). Every node's gateway has one MAC, so a gateway's frames never
 * go out on the overlay (another node's tasks would take its answer for
 * their own gateway's): dropped on the VXLAN's egress (xo). The check cannot
 * be on the way in: a macvlan hands a frame for a neighbour to its lower
 * device's receive path, so the gateway's frames to this node's tasks enter
 * the VXLAN's ingress too. */
size_t agent_net_overlay_chain_text(const net_names *nn, unsigned vni, const char *vx,
                                    char *out, size_t len)
{
    int n = snprintf(out, len,
                     "table netdev %s {\n"
                     "  chain xi%u {\n"
                     "    type filter hook ingress device \"%s\" priority 0; policy drop;\n"
                     "    ether type ip accept\n"
                     "    ether type arp accept\n"
                     "    counter\n"
                     "  }\n"
                     "  chain xo%u {\n"
                     "    type filter hook egress device \"%s\" priority 0; policy accept;\n"
                     "    ether saddr & ff:ff:ff:00:00:00 == " GW_MAC_PREFIX " counter drop\n"
                     "  }\n"
                     "}\n",
                     nn->table, vni & VNI_MAX, vx, vni & VNI_MAX, vx);
    return n < 0 ? 0 : (size_t)n < len ? (size_t)n : len - 1;
}

size_t agent_net_task_policy_text(const net_names *nn, const char *mac, const char *addr,
                                  char *out, size_t len)
{
    char text[sizeof POLICY_TASK + 64];
    fill(POLICY_TASK, nn, text, sizeof text);
    int n = snprintf(out, len, text, mac, addr);
    return n < 0 ? 0 : (size_t)n < len ? (size_t)n : len - 1;
}

/* ---- services ------------------------------------------------------------------ */

int agent_net_service_elem(const char *svc, char *out, size_t len)
{
    char addr[64], proto[8];
    unsigned port;
    int plen = 32;
    const char *colon = strrchr(svc, ':');
    if (!colon || (size_t)(colon - svc) >= sizeof addr ||
        sscanf(colon + 1, "%5u/%7s", &port, proto) != 2 || port < 1 || port > 65535 ||
        (strcmp(proto, "tcp") != 0 && strcmp(proto, "udp") != 0))
        return -1;
    memcpy(addr, svc, (size_t)(colon - svc));
    addr[colon - svc] = '\0';
    char *slash = strchr(addr, '/');
    if (slash) {
        char *end;
        long l = strtol(slash + 1, &end, 10);
        if (*end || l < 0 || l > 32)
            return -1;
        plen = (int)l;
        *slash = '\0';
    }
    struct in_addr ia;
    if (inet_pton(AF_INET, addr, &ia) != 1)
        return -1;
    snprintf(out, len, "%s/%d . %s . %u", addr, plen, proto, port);
    return 0;
}

int agent_net_services(const char *state_dir, const agent_net_service *svc, size_t n,
                       ts_err *err)
{
    if (n > AGENT_NET_SERVICES_MAX)
        return ts_err_set(err, TS_EINVAL, "net_services: %zu: at most %d", n,
                          AGENT_NET_SERVICES_MAX);
    net_names nn;
    agent_net_names(state_dir, &nn);
    size_t cap = n * 160 + 128, len;
    char *script = malloc(cap);
    if (!script)
        return ts_err_set(err, TS_ENOMEM, "network: out of memory");
    len = (size_t)snprintf(script, cap, "flush set inet %s services\n"
                           "flush set inet %s tenant_services\n", nn.table, nn.table);
    for (size_t i = 0; i < n; i++) {
        char el[96];
        if (!svc[i].to || agent_net_service_elem(svc[i].to, el, sizeof el) != 0) {
            free(script);
            return ts_err_set(err, TS_EINVAL, "net_services[%zu]: \"%s\": not "
                              "ADDR[/N]:PORT/tcp|udp", i, svc[i].to ? svc[i].to : "");
        }
        if (svc[i].vni > VNI_MAX) {
            free(script);
            return ts_err_set(err, TS_EINVAL, "net_services[%zu].vni: %u: must be 1..%u", i,
                              svc[i].vni, VNI_MAX);
        }
        char br[IFNAMSIZ];
        agent_net_tenant_link(&nn, 'b', svc[i].vni, false, br);
        if (svc[i].vni == 0)
            len += (size_t)snprintf(script + len, cap - len,
                                    "add element inet %s services { %s }\n", nn.table, el);
        else
            len += (size_t)snprintf(script + len, cap - len,
                                    "add element inet %s tenant_services { \"%s\" . %s }\n",
                                    nn.table, br, el);
    }
    int rc = agent_net_nft_in(NULL, script, err);
    free(script);
    return rc;
}
