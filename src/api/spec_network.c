/*
 * spec_network.c - a job spec's `network` (docs/network.md): the host's
 * network or the tenant's own, shared or dedicated NICs, and the ports a
 * task publishes. Form only; whether a tenant may have host networking is
 * the controller's question, at submission.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/spec_walk.h"

/* "network.publish": [PORT/tcp|udp, ...] (a bare PORT is tcp), distinct, not the
 * VXLAN port (4789/udp). Which ports a cluster lets tasks publish is its own
 * (network.publish_ports), checked at submission. */
static void walk_publish(spec_parser *P, const yaml_node_t *n)
{
    if (n->type != YAML_SEQUENCE_NODE) {
        spec_fail_got(P, n, "network.publish", "a list of PORT/tcp|udp");
        return;
    }
    yaml_node_item_t *b = n->data.sequence.items.start;
    int count = (int)(n->data.sequence.items.top - b);
    if (count > TS_SPEC_PUBLISH_MAX) {
        spec_fail(P, "network.publish", "%d ports: at most %d", count, TS_SPEC_PUBLISH_MAX);
        return;
    }
    for (int i = 0; i < count; i++) {
        char path[40];
        snprintf(path, sizeof path, "network.publish[%d]", i);
        bool reused;
        const yaml_node_t *e = spec_child(P, b[i], path, &reused);
        const char *s = e ? spec_text(P, e, path) : NULL;
        if (!s)
            continue;
        char *end;
        unsigned long port = s[0] >= '1' && s[0] <= '9' ? strtoul(s, &end, 10) : 0;
        const char *proto = port ? (*end ? end : "/tcp") : "";
        if (port < 1 || port > 65535 || (strcmp(proto, "/tcp") != 0 && strcmp(proto, "/udp") != 0)) {
            spec_fail_got(P, e, path, "PORT/tcp or PORT/udp with PORT 1..65535");
            continue;
        }
        bool udp = strcmp(proto, "/udp") == 0;
        if (udp && port == TS_SPEC_VXLAN_PORT) {
            spec_fail(P, path, "%lu/udp is the overlay's own VXLAN port on every node, never "
                      "a task's", port);
            continue;
        }
        for (int k = 0; k < P->spec->npublish; k++)
            if (P->spec->publish[k].port == port && P->spec->publish[k].udp == udp) {
                spec_fail(P, path, "%lu%s is listed twice", port, proto);
                return;
            }
        P->spec->publish[P->spec->npublish].port = (unsigned short)port;
        P->spec->publish[P->spec->npublish++].udp = udp;
    }
}

/* "network: host|tenant", or a map {mode: host|tenant, nics: shared|dedicated,
 * publish: [PORT/tcp|udp]} (docs/network.md) */
void spec_walk_network(spec_parser *P, const yaml_node_t *n)
{
    const yaml_node_t *mode = n;
    if (n->type == YAML_MAPPING_NODE) {
        enum { NW_MODE, NW_NICS, NW_PUBLISH, NW_N };
        static const char *const keys[NW_N] = {"mode", "nics", "publish"};
        yaml_node_t *v[NW_N];
        unsigned given;
        if (!spec_map_fields(P, n, "network", keys, NW_N, v, &given))
            return;
        mode = v[NW_MODE];
        if (v[NW_NICS]) {
            const char *s = spec_text(P, v[NW_NICS], "network.nics");
            if (s && (strcmp(s, "shared") == 0 || strcmp(s, "dedicated") == 0))
                P->spec->dedicated_nics = strcmp(s, "dedicated") == 0;
            else if (s)
                spec_fail_got(P, v[NW_NICS], "network.nics", "shared or dedicated");
        }
        if (v[NW_PUBLISH])
            walk_publish(P, v[NW_PUBLISH]);
    }
    if (mode) {
        const char *s = spec_text(P, mode, n == mode ? "network" : "network.mode");
        if (s && (strcmp(s, "host") == 0 || strcmp(s, "tenant") == 0))
            P->spec->host_network = strcmp(s, "host") == 0;
        else if (s)
            spec_fail_got(P, mode, n == mode ? "network" : "network.mode", "host or tenant");
    }
    if (P->spec->host_network && P->spec->dedicated_nics)
        spec_fail(P, "network.nics", "dedicated NICs are moved into the task's own network "
                  "namespace, which a host-network job does not have");
    if (P->spec->host_network && P->spec->npublish > 0)
        spec_fail(P, "network.publish", "a host-network job's ports are the node's already; "
                  "publish is for tasks in their own network namespace");
}
