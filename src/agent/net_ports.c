/*
 * net_ports.c - a published port is never one this node serves itself
 * (net_ports.h, docs/network.md "Published ports").
 *
 * /proc/net/{tcp,tcp6,udp,udp6} list this namespace's sockets, one a line:
 * "sl local_address rem_address st ...", the local address as hex
 * ADDR:PORT (IPv6: 32 hex digits), st the TCP state (0A listening; a UDP
 * socket's 07 unconnected, 01 connected). A TCP socket serves a port when
 * it listens; a UDP socket whenever it is bound, connected or not (the
 * published map would take its datagrams either way).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/net_ports.h"

#define TCP_LISTEN 0x0A

/* The address of a table's hex local address, printed ("0.0.0.0", "[::]"). */
static void addr_text(const char *hex, char *out, size_t len)
{
    size_t n = strlen(hex);
    if (n == 8) {
        unsigned long a = strtoul(hex, NULL, 16); /* host order of a little-endian word */
        snprintf(out, len, "%lu.%lu.%lu.%lu", a & 0xff, (a >> 8) & 0xff, (a >> 16) & 0xff,
                 (a >> 24) & 0xff);
    } else {
        snprintf(out, len, "%s", strspn(hex, "0") == n ? "[::]" : "[IPv6]");
    }
}

/* One table: whether a socket of it serves port. */
static bool table_serves(const char *path, const char *name, unsigned port, bool udp, char *what,
                         size_t len)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return false;
    char line[512];
    bool found = false;
    if (!fgets(line, sizeof line, f)) { /* the header */
        fclose(f);
        return false;
    }
    while (!found && fgets(line, sizeof line, f)) {
        char local[80];
        unsigned lport, st;
        if (sscanf(line, " %*[^:]: %79[0-9A-Fa-f]:%x %*[0-9A-Fa-f]:%*x %x", local, &lport,
                   &st) != 3 || lport != port)
            continue;
        if (!udp && st != TCP_LISTEN)
            continue;
        char a[48];
        addr_text(local, a, sizeof a);
        snprintf(what, len, "%s %s:%u %s", name, a, port, udp ? "bound" : "listening");
        found = true;
    }
    fclose(f);
    return found;
}

bool agent_net_port_served(const char *proc_net, unsigned port, bool udp, char *what,
                           size_t len)
{
    static const char *const tcp[] = {"tcp", "tcp6"}, *const udps[] = {"udp", "udp6"};
    const char *const *names = udp ? udps : tcp;
    for (int i = 0; i < 2; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s", proc_net, names[i]);
        if (table_serves(path, names[i], port, udp, what, len))
            return true;
    }
    return false;
}

int agent_net_publish_check(const char *proc_net, const char *const *publish, size_t n,
                            const unsigned *own, size_t nown, char *why, size_t why_len)
{
    for (size_t i = 0; i < n; i++) {
        const char *p = publish[i] ? publish[i] : "";
        char *end;
        unsigned long port = strtoul(p, &end, 10);
        bool udp = strcmp(end, "/udp") == 0;
        if (port < 1 || port > 65535 || (!udp && strcmp(end, "/tcp") != 0))
            continue; /* not a port: the network's own check says so */
        for (size_t k = 0; !udp && k < nown; k++)
            if (own[k] == port) {
                snprintf(why, why_len, "net.publish[%zu]: %s: this node's agent serves it "
                         "(--metrics-listen or --p2p-listen); a published port never takes "
                         "the node's own", i, p);
                return -1;
            }
        char what[128];
        if (agent_net_port_served(proc_net, (unsigned)port, udp, what, sizeof what)) {
            snprintf(why, why_len, "net.publish[%zu]: %s: this node serves it itself (%s); a "
                     "published port never takes the node's own", i, p, what);
            return -1;
        }
    }
    return 0;
}
