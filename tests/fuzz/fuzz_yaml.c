/*
 * fuzz_yaml.c - libFuzzer target for the cluster YAML loader.
 *
 * Feeds arbitrary bytes to ts_load_cluster_yaml (which must never read past
 * len, crash, or leak, whatever the input) and checks the contract on both
 * outcomes: on failure *out stays NULL and the message is a terminated string
 * naming the file; on success every node's GPUs hang under the node's vertex in
 * the topology. Build with -DTS_FUZZ=ON (clang); seed it with
 * the YAML files under tests/data and data/clusters.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tessera/load.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* a private copy, so ASan catches any read past size */
    char *buf = malloc(size ? size : 1);
    if (!buf)
        return 0;
    if (size)
        memcpy(buf, data, size);
    ts_cluster *c = NULL;
    ts_err err = {0};
    int rc = ts_load_cluster_yaml(buf, size, "fuzz.yaml", &c, &err);
    free(buf);
    if (rc < 0) {
        if (c || memchr(err.msg, '\0', sizeof err.msg) == NULL ||
            strncmp(err.msg, "fuzz.yaml", 9) != 0)
            abort();
        return 0;
    }
    if (!c)
        abort();
    for (int i = 0; i < c->nnodes; i++) {
        const ts_node *n = &c->nodes[i];
        for (int g = 0; g < n->ngpu && c->topo; g++)
            if (ts_topo_parent(c->topo, n->gpu[g].topo_vertex) != n->topo_vertex ||
                ts_topo_distance(c->topo, n->gpu[g].topo_vertex, n->gpu[0].topo_vertex) > 1)
                abort();
    }
    ts_cluster_free(c);
    return 0;
}
