/*
 * netns_priv.h - what netns.c (a task's namespace, setup and teardown) and
 * netns_policy.c (the nftables policy, the services, running the tools)
 * share; not for other files. Nothing here is thread-safe (netns.h).
 */
#ifndef TS_AGENT_NETNS_PRIV_H
#define TS_AGENT_NETNS_PRIV_H

#include <net/if.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>

#include "tessera/error.h"

#define VXLAN_PORT 4789
#define STR_(x) #x
#define STR(x) STR_(x)
#define VNI_MAX 16777215u
#define GW_MAC_PREFIX "02:54:53:00:00:00" /* a tenant gateway's MAC: this, the VNI below */

/* What this agent's links and tables are called: its links t<4 hex>..., the
 * 32-bit tag folded to 16 bits (IFNAMSIZ leaves no room for more beside a
 * VNI), and its tables tessera_<8 hex>. */
typedef struct net_names {
    unsigned tag4; /* 0..0xffff */
    char prefix[8];
    char table[24];
} net_names;

void agent_net_names(const char *state_dir, net_names *n);

/* What a task's state file names (net_state.veth): t<tag4>v<hash>, a veth
 * whose other end is a port of the tenant's bridge in the fabric (an agent
 * before the macvlans), t<tag4>m<hash>, a macvlan on the tenant's VXLAN
 * (only the name of the kind: the device is eth0 in the task's namespace),
 * or tsv<hash> (an agent before per-agent names). */
#define NET_LINK_VETH 'v'
#define NET_LINK_MACVLAN 'm'
static inline bool agent_net_is_macvlan(const char *link)
{
    return link[0] == 't' && link[1] != 's' && link[5] == NET_LINK_MACVLAN;
}

/* The tenant's bridge and gateway (kind 'b': the bridge in the fabric, the
 * gateway's end here), VXLAN ('x') or gateway's fabric end ('g') on this
 * node; legacy: the names before per-agent ones (tsb<vni>, tsx<vni>). */
void agent_net_tenant_link(const net_names *nn, char kind, unsigned vni, bool legacy,
                           char out[IFNAMSIZ]);

/* The policy's tables with nn's names in, into out (len bytes); its length:
 * the agent's namespace's (both tables), and the bridge table alone for the
 * fabric namespace. */
size_t agent_net_policy_text(const net_names *nn, char *out, size_t len);
size_t agent_net_policy_bridge_text(const net_names *nn, char *out, size_t len);
/* The fabric's chains for the tenant's VXLAN vx: what it brings from the
 * other nodes (netdev ingress, xi<vni>) and what it may send to them
 * (egress, xo<vni>), declared (idempotent), into out. */
size_t agent_net_overlay_chain_text(const net_names *nn, unsigned vni, const char *vx,
                                    char *out, size_t len);
/* A task's own table, in its namespace: what its eth0 may send (IPv4 from
 * its own MAC and address, ARP for them; nothing else), into out. */
size_t agent_net_task_policy_text(const net_names *nn, const char *mac, const char *addr,
                                  char *out, size_t len);

/* The fabric namespace (netns_fabric.c): the tenants' bridges, VXLAN devices
 * and the host ends of the tasks' veths, with br_netfilter's switches off.
 * Its name tsf-<tag> and path /run/netns/tsf-<tag>. */
void agent_net_fabric_name(const net_names *nn, char *out, size_t len);
void agent_net_fabric_path(const net_names *nn, char *out, size_t len);
bool agent_net_fabric_exists(const net_names *nn);
/* Makes it (its sysctls, its bridge table) unless it exists. */
int agent_net_fabric_ensure(const net_names *nn, ts_err *err);
/* Removes it and whatever is left in it; none is not an error. */
void agent_net_fabric_remove(const net_names *nn);
/* Whether a link of that name is in it. */
bool agent_net_fabric_has_link(const net_names *nn, const char *name);
/* Makes the flood entries (all-zero MAC) of the VXLAN vx exactly peers
 * (local, this node's own, left out), and drops the MACs it learned at an
 * address no longer listed; vx in the fabric (fabric: its names) or, an
 * earlier agent's, in this namespace (NULL). Reads the entries back with a
 * netlink dump and changes them with one `bridge -batch`. */
int agent_net_fdb_sync(const net_names *fabric, const char *vx, const char *const *peers,
                       size_t npeers, const char *local, ts_err *err);
/* Runs an nft script, an ip batch, in it. */
int agent_net_fabric_nft(const net_names *nn, const char *script, ts_err *err);
int agent_net_fabric_ip(const net_names *nn, const char *script, ts_err *err);
/* The tenant's last task on this node is gone: removes its bridge, VXLAN
 * and gateway, in the fabric (if there is one) and, an earlier agent's
 * (legacy: its names before per-agent ones), in this namespace; a failure
 * into *rc and *err unless *rc is already set. */
void agent_net_tenant_remove(const net_names *nn, unsigned vni, bool legacy, bool fabric,
                             int *rc, ts_err *err);
/* Loads its bridge table (replacing it), then the lines in bindings (NULL: none). */
int agent_net_fabric_table(const net_names *nn, const char *bindings, ts_err *err);

/* Runs argv (argv[0] a tool's name, looked up in the system folders) with
 * input on its stdin; exit 0 is success, anything else an error carrying
 * the first line of its stderr. No shell, a fixed environment. */
int agent_net_run_tool(const char *const *argv, const char *input, ts_err *err);
/* How long a tool may run before it is killed and its call fails with
 * TS_ETIMEDOUT (default AGENT_NET_TOOL_TIMEOUT_MS; <= 0 restores it). */
#define AGENT_NET_TOOL_TIMEOUT_MS 5000
void agent_net_set_tool_timeout_ms(int ms);
/* Runs an nft script in the network namespace at ns_path (nsenter), or in
 * the agent's own where ns_path is NULL. */
int agent_net_nft_in(const char *ns_path, const char *script, ts_err *err);

/* "ADDR[/N]:PORT/tcp|udp" into nft's "ADDR/N . tcp . PORT"; -1 if not one. */
int agent_net_service_elem(const char *svc, char *out, size_t len);

#endif
