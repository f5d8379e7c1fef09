/*
 * replay_input.c - the cluster and tenants YAML files as a replay sees them.
 *
 * The replay is count-only: a cluster is a number of nodes with the same
 * number of GPUs each, and a tenant is a name and the GPUs it is
 * guaranteed. So the full loaders of libtessera (load.h, tenant_load.h)
 * read the files, with all their checks and file:line messages, and this
 * file keeps only those counts: the leaves of the tenant tree (the teams
 * that run jobs; an organisation's guarantee is its teams' sum) with the
 * whole GPUs of their guarantees over every GPU model, and the cluster's
 * node count and GPUs per node, refusing a cluster whose nodes differ
 * (placing by count on unequal nodes would be a different replay).
 */
#include <stdio.h>
#include <stdlib.h>

#include "sim/fileio.h"
#include "sim/replay_cli.h"
#include "tessera/load.h"
#include "tessera/tenant_load.h"

#define EXIT_BAD_INPUT 2

char *replay_slurp(const char *path, size_t *len)
{
    ts_err err = {0};
    char *buf = sim_read_file(path, len, &err);
    if (!buf)
        fprintf(stderr, "tessera-sim replay: %s\n", err.msg);
    return buf;
}

int replay_load_tenants(const char *path, ts_replay_tenant **out, int *n)
{
    size_t len;
    char *buf = replay_slurp(path, &len);
    if (!buf)
        return EXIT_BAD_INPUT;
    ts_err err = {0};
    ts_tenants *ts = NULL;
    int rc = ts_load_tenants_yaml(buf, len, path, &ts, &err);
    free(buf);
    if (rc) {
        fprintf(stderr, "tessera-sim replay: %s\n", err.msg);
        return EXIT_BAD_INPUT;
    }
    ts_replay_tenant *t = calloc((size_t)(ts->n > 0 ? ts->n : 1), sizeof *t);
    if (!t) {
        ts_tenants_free(ts);
        fprintf(stderr, "tessera-sim replay: out of memory\n");
        return 1;
    }
    int cnt = 0;
    for (int i = 0; i < ts->n; i++) {
        const ts_tenant *x = &ts->t[i];
        if (x->nchildren > 0)
            continue;
        int64_t milli = 0;
        for (int m = 0; m < TS_MAX_GPU_MODELS; m++)
            milli += x->guaranteed[ts_res_gpu(m)];
        snprintf(t[cnt].name, sizeof t[cnt].name, "%s", x->name);
        if (milli / TS_MILLI_PER_GPU > 1000000000) {
            fprintf(stderr, "tessera-sim replay: %s: tenants.%s.guaranteed.gpu: too many GPUs\n",
                    path, x->name);
            free(t);
            ts_tenants_free(ts);
            return EXIT_BAD_INPUT;
        }
        t[cnt++].gpus = (int)(milli / TS_MILLI_PER_GPU);
    }
    ts_tenants_free(ts);
    if (cnt == 0) {
        fprintf(stderr, "tessera-sim replay: %s: tenants: none\n", path);
        free(t);
        return EXIT_BAD_INPUT;
    }
    *out = t;
    *n = cnt;
    return 0;
}

int replay_load_cluster(const char *path, int *nodes, int *gpus_per_node)
{
    ts_err err = {0};
    ts_cluster *c = sim_load_cluster(path, true, &err);
    if (!c) {
        fprintf(stderr, "tessera-sim replay: %s\n", err.msg);
        return EXIT_BAD_INPUT;
    }
    int rc = 0;
    if (c->nnodes < 1 || c->nodes[0].ngpu < 1) {
        fprintf(stderr, "tessera-sim replay: %s: nodes: the replay needs GPU nodes\n", path);
        rc = EXIT_BAD_INPUT;
    }
    for (int i = 1; i < c->nnodes && rc == 0; i++)
        if (c->nodes[i].ngpu != c->nodes[0].ngpu) {
            fprintf(stderr,
                    "tessera-sim replay: %s: nodes: the replay places by GPU count and needs the "
                    "same GPUs on every node (%s has %d, %s has %d)\n",
                    path, c->nodes[0].name, c->nodes[0].ngpu, c->nodes[i].name,
                    c->nodes[i].ngpu);
            rc = EXIT_BAD_INPUT;
        }
    if (rc == 0) {
        *nodes = c->nnodes;
        *gpus_per_node = c->nodes[0].ngpu;
    }
    ts_cluster_free(c);
    return rc;
}
