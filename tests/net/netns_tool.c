/*
 * netns_tool.c - drives the agent's network module (src/agent/netns.c)
 * from the network tests and bench/netns, without a controller:
 *   netns_tool start STATE_DIR [KEEP_ID...]      tables; remove all but KEEP_IDs
 *   netns_tool setup STATE_DIR ID VNI ADDR PREFIX LOCAL [nics=DEV,..] [mtu=N]
 *                    [publish=PORT/tcp,..] [from=ADDR/N,..] [PEER...]
 *   netns_tool teardown STATE_DIR ID
 *   netns_tool time STATE_DIR N VNI BASE3 LOCAL   N setups then N teardowns,
 *                                                 prints each setup's ms
 * The real agent does the same from its controller's desired state.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent/netns.h"

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

typedef struct keep_list {
    char **v;
    int n;
} keep_list;

static bool keep(const char *id, void *ctx)
{
    keep_list *k = ctx;
    for (int i = 0; i < k->n; i++)
        if (strcmp(k->v[i], id) == 0)
            return true;
    return false;
}

int main(int argc, char **argv)
{
    ts_err err;
    if (argc >= 3 && strcmp(argv[1], "start") == 0) {
        keep_list k = {argv + 3, argc - 3};
        int removed = 0;
        if (agent_net_start(argv[2], keep, &k, &removed, &err) != 0) {
            fprintf(stderr, "netns_tool: %s\n", err.msg);
            return 1;
        }
        printf("removed=%d\n", removed);
        return 0;
    }
    if (argc >= 8 && strcmp(argv[1], "setup") == 0) {
        /* "nics=DEV[,DEV...]" before the peers: devices moved into the namespace */
        int p = 8;
        char list[256] = "", plist[256] = "", flist[256] = "";
        const char *nics[AGENT_NET_NICS_MAX + 1], *pub[AGENT_NET_PUBLISH_MAX + 1];
        const char *from[AGENT_NET_PUBLISH_FROM_MAX + 1];
        size_t nnics = 0, npub = 0, nfrom = 0;
        int mtu = 0;
        for (; p < argc && strchr(argv[p], '='); p++) {
            if (strncmp(argv[p], "mtu=", 4) == 0) {
                mtu = atoi(argv[p] + 4);
                continue;
            }
            if (strncmp(argv[p], "publish=", 8) == 0 || strncmp(argv[p], "from=", 5) == 0) {
                bool is_pub = argv[p][0] == 'p';
                char *l = is_pub ? plist : flist;
                snprintf(l, 256, "%s", strchr(argv[p], '=') + 1);
                char *save = NULL;
                for (char *d = strtok_r(l, ",", &save); d; d = strtok_r(NULL, ",", &save)) {
                    if (is_pub && npub <= AGENT_NET_PUBLISH_MAX)
                        pub[npub++] = d;
                    else if (!is_pub && nfrom <= AGENT_NET_PUBLISH_FROM_MAX)
                        from[nfrom++] = d;
                }
                continue;
            }
            if (strncmp(argv[p], "nics=", 5) != 0) {
                fprintf(stderr, "netns_tool: %s: expected nics=, mtu=, publish= or from=\n",
                        argv[p]);
                return 2;
            }
            snprintf(list, sizeof list, "%s", argv[p] + 5);
            char *save = NULL;
            for (char *d = strtok_r(list, ",", &save); d && nnics <= AGENT_NET_NICS_MAX;
                 d = strtok_r(NULL, ",", &save))
                nics[nnics++] = d;
        }
        agent_net_task t = {.task_id = argv[3], .vni = (unsigned)atoi(argv[4]), .addr = argv[5],
                            .prefix = atoi(argv[6]), .local = argv[7],
                            .peers = (const char *const *)argv + p, .npeers = (size_t)(argc - p),
                            .nics = nics, .nnics = nnics, .mtu = mtu, .publish = pub,
                            .npublish = npub, .publish_from = from, .npublish_from = nfrom};
        char ns[AGENT_NET_NS_PATH_MAX];
        if (agent_net_setup(argv[2], &t, ns, sizeof ns, &err) != 0) {
            fprintf(stderr, "netns_tool: %s\n", err.msg);
            return 1;
        }
        printf("%s\n", ns);
        return 0;
    }
    if (argc == 4 && strcmp(argv[1], "teardown") == 0) {
        if (agent_net_teardown(argv[2], argv[3], &err) != 0) {
            fprintf(stderr, "netns_tool: %s\n", err.msg);
            return 1;
        }
        return 0;
    }
    if (argc == 7 && strcmp(argv[1], "time") == 0) {
        int n = atoi(argv[3]);
        if (n < 1 || n > 250) {
            fprintf(stderr, "netns_tool: N: must be 1..250\n");
            return 2;
        }
        for (int i = 0; i < n; i++) {
            char id[32], addr[32], ns[AGENT_NET_NS_PATH_MAX];
            snprintf(id, sizeof id, "bench%d", i);
            snprintf(addr, sizeof addr, "%s.%d", argv[5], i + 2);
            agent_net_task t = {.task_id = id, .vni = (unsigned)atoi(argv[4]), .addr = addr,
                                .prefix = 24, .local = argv[6]};
            double t0 = now_ms();
            if (agent_net_setup(argv[2], &t, ns, sizeof ns, &err) != 0) {
                fprintf(stderr, "netns_tool: %s\n", err.msg);
                return 1;
            }
            printf("setup_ms %.3f\n", now_ms() - t0);
        }
        for (int i = 0; i < n; i++) {
            char id[32];
            snprintf(id, sizeof id, "bench%d", i);
            double t0 = now_ms();
            if (agent_net_teardown(argv[2], id, &err) != 0) {
                fprintf(stderr, "netns_tool: %s\n", err.msg);
                return 1;
            }
            printf("teardown_ms %.3f\n", now_ms() - t0);
        }
        return 0;
    }
    fprintf(stderr, "usage: netns_tool start|setup|teardown|time ... (see the source)\n");
    return 2;
}
