/*
 * netns_priv.h - what netns.c (a task's namespace, setup and teardown) and
 * netns_policy.c (the nftables policy, the services, running the tools)
 * share; not for other files. Nothing here is thread-safe (netns.h).
 */
#ifndef TS_AGENT_NETNS_PRIV_H
#define TS_AGENT_NETNS_PRIV_H

#include <net/if.h>
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

/* The tenant's bridge (kind 'b') or VXLAN ('x') on this node; legacy: the
 * names before per-agent ones (tsb<vni>, tsx<vni>). */
void agent_net_tenant_link(const net_names *nn, char kind, unsigned vni, bool legacy,
                           char out[IFNAMSIZ]);

/* The policy's tables with nn's names in, into out (len bytes); its length. */
size_t agent_net_policy_text(const net_names *nn, char *out, size_t len);

/* Runs argv (argv[0] a tool's name, looked up in the system folders) with
 * input on its stdin; exit 0 is success, anything else an error carrying
 * the first line of its stderr. No shell, a fixed environment. */
int agent_net_run_tool(const char *const *argv, const char *input, ts_err *err);

/* "ADDR[/N]:PORT/tcp|udp" into nft's "ADDR/N . tcp . PORT"; -1 if not one. */
int agent_net_service_elem(const char *svc, char *out, size_t len);

#endif
