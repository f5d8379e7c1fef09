/*
 * netns.h - a network namespace per task on its tenant's overlay
 * (docs/network.md).
 *
 * Each task gets its own namespace (/run/netns/ts-<tag>-<task id>, tag: this
 * agent's, agent_net_ns_name) holding eth0, a macvlan in bridge mode on the
 * tenant's VXLAN device on this node (t<tag4>x<vni>, VNI from the
 * controller, flooding to the other nodes' underlay addresses), with the
 * address the controller assigned. The VXLANs are in this agent's fabric
 * namespace (tsf-<tag>: netns_fabric.c); the tenant's gateway is one more
 * macvlan on the VXLAN, here, t<tag4>b<vni>, with the tenant's gateway
 * address. Tenants share no VXLAN and no VNI, so there is no layer-2 path
 * between them; each task's own table (netdev, on its eth0's egress) drops
 * what it could still try (another address or MAC than its own, ARP
 * spoofing, IPv6, other ethertypes), the fabric's keeps gateways' frames off
 * the overlay, and this agent's "inet tessera_<tag>" table here stops
 * routing through the host between tenant gateways. The gateway routes to
 * the configured services only (agent_net_services). Tasks an agent before
 * the macvlans started keep their veth into the tenant's bridge in the
 * fabric ("bridge tessera_<tag>" holds their bindings) until they end.
 *
 * The work is done by iproute2 and nft, exec'd with argv and their commands
 * on stdin (`ip -batch -`, `nft -f -`): four to seven processes per task, no
 * shell, and the kernel's own tools parse and apply each batch.
 * What a task was given is written to <state dir>/net/<task id> before
 * anything is made and removed last, so teardown, and a restarted agent's
 * reconcile, know what to remove even after kill -9; the state directory,
 * not /run/netns, is the authority (several agents may share a host in
 * tests, each with its own).
 *
 * Nothing here is thread-safe; one agent per state directory. Errors come
 * back in the ts_err, nothing prints.
 */
#ifndef TS_AGENT_NETNS_H
#define TS_AGENT_NETNS_H

#include <stdbool.h>
#include <stddef.h>

#include "tessera/error.h"

#define AGENT_NET_PEERS_MAX 256
#define AGENT_NET_MTU_DEFAULT 1450 /* a 1500-byte underlay less VXLAN's 50 bytes */
#define AGENT_NET_NS_PATH_MAX 128
#define AGENT_NET_NICS_MAX 16
#define AGENT_NET_SERVICES_MAX 1024
#define AGENT_NET_PUBLISH_MAX 16
#define AGENT_NET_PUBLISH_FROM_MAX 32

typedef struct agent_net_task {
    const char *task_id;     /* [A-Za-z0-9._-], as ts_task_spec's */
    unsigned vni;            /* 1..16777215, the tenant's */
    const char *addr;        /* the task's IPv4 address, dotted */
    int prefix;              /* the tenant range's prefix length, 8..30 */
    const char *local;       /* this node's underlay address (VXLAN source) */
    const char *const *peers; /* the other nodes' underlay addresses */
    size_t npeers;
    int mtu;                 /* 0: AGENT_NET_MTU_DEFAULT */
    /* network devices of this node's namespace moved into the task's (a VF
     * or rail NIC per GPU, "network: {nics: dedicated}"), and moved back to
     * the agent's namespace at teardown; at most AGENT_NET_NICS_MAX */
    const char *const *nics;
    size_t nnics;
    /* ports reachable at this node's address ("PORT/tcp|udp", "network: {publish}"),
     * forwarded to the task's, from the addresses in publish_from ("ADDR[/N]"; none:
     * anywhere) and never from a tenant's gateway; at most AGENT_NET_PUBLISH_MAX and
     * AGENT_NET_PUBLISH_FROM_MAX */
    const char *const *publish;
    size_t npublish;
    const char *const *publish_from;
    size_t npublish_from;
    /* RDMA devices going with the NICs (a VF's own, agent_nics_rdmadev): moved
     * into the namespace too where the host's RDMA subsystem isolates
     * namespaces (`rdma system set netns exclusive`); a move that cannot be
     * made does not fail the setup but is said in note (NULL: not said).
     * They come back by themselves when the namespace goes. */
    const char *const *rdma;
    size_t nrdma;
    char *note;
    size_t note_len;
} agent_net_task;

/* Makes the nftables tables (atomically replacing earlier ones), removes
 * what an earlier agent left for tasks keep() does not name (counted in
 * *removed, may be NULL) and re-adds the address bindings (older tasks') and
 * VXLAN chains of those it keeps. Called once at agent start, after the tasks were adopted. */
int agent_net_start(const char *state_dir, bool (*keep)(const char *task_id, void *ctx),
                    void *ctx, int *removed, ts_err *err);

/* Makes the task's namespace, macvlan, address and own table (and the
 * tenant's VXLAN, its chains and its gateway on its first task here); fills ns_path with the
 * namespace's path for setns. On failure what was made is removed. */
int agent_net_setup(const char *state_dir, const agent_net_task *t, char *ns_path,
                    size_t ns_path_len, ts_err *err);

/* Makes the flood entries of the tenant's VXLAN on this node exactly peers
 * (local, this node's own, left out): those it lacks added (a new node),
 * those no longer listed removed (a node gone, or at another address). */
int agent_net_peers(const char *state_dir, unsigned vni, const char *local,
                    const char *const *peers, size_t npeers, ts_err *err);

typedef struct agent_net_service {
    const char *to; /* "ADDR[/N]:PORT/tcp|udp" */
    unsigned vni;   /* 0: every tenant's tasks may reach it; else that tenant's only */
} agent_net_service;

/* Sets what tasks may reach off their overlay (the controller's
 * network.services), replacing the last set; at most AGENT_NET_SERVICES_MAX. */
int agent_net_services(const char *state_dir, const agent_net_service *svc, size_t n,
                       ts_err *err);

/* Removes the task's namespace (its macvlan and table with it; an older
 * task's veth and bindings), and the tenant's VXLAN, chains and gateway (or
 * an older agent's bridge) when no other task of the tenant is left here. A task with no
 * network state is not an error. */
int agent_net_teardown(const char *state_dir, const char *task_id, ts_err *err);

/* The task's namespace name, ts-<tag>-<task id> (tag: 8 hex of this agent's
 * state directory's FNV-1a), so that agents of one host never share one. */
void agent_net_ns_name(const char *state_dir, const char *task_id, char *out, size_t len);

/* Whether the task has network state here (its state file, or a namespace
 * by this agent's name for it). */
bool agent_net_has(const char *state_dir, const char *task_id);

#endif
