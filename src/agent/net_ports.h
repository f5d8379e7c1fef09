/*
 * net_ports.h - whether a port a task would publish (docs/network.md,
 * "Published ports") is one this node serves itself.
 *
 * A published port is mapped at every local address of the node ahead of
 * its own input, so a task publishing a port the node listens on (sshd,
 * the agent's --metrics-listen or --p2p-listen, anything) would take its
 * callers. The agent refuses such a port when the task starts: a TCP
 * socket listening, or a UDP socket bound, on that port in the agent's
 * network namespace (the node's: the one the published map is in), read
 * from <proc_net>/tcp, tcp6, udp and udp6; and the agent's own ports,
 * listening or not yet.
 */
#ifndef TS_AGENT_NET_PORTS_H
#define TS_AGENT_NET_PORTS_H

#include <stdbool.h>
#include <stddef.h>

/* Whether a socket of proc_net's tables (normally "/proc/net") holds
 * port: TCP listening, or UDP bound; what then says which ("tcp6 [::]:22
 * listening"). A table that cannot be read counts as holding nothing. */
bool agent_net_port_served(const char *proc_net, unsigned port, bool udp, char *what,
                           size_t len);

/* 0 when none of publish ("PORT/tcp|udp", as the controller sends them) is
 * served here or one of own[0..nown) (the agent's own TCP ports, 0 none);
 * else -1 with why "net.publish[i]: PORT/PROTO: ..." naming the first. */
int agent_net_publish_check(const char *proc_net, const char *const *publish, size_t n,
                            const unsigned *own, size_t nown, char *why, size_t why_len);

#endif
