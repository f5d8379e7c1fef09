/*
 * fuzz_csv.c - libFuzzer target for the openb node and pod CSV loaders.
 *
 * The same bytes go to ts_load_nodes_csv and ts_load_pods_csv, which must
 * never read past len, crash, hang or leak, whatever the input. The contract
 * is checked on both outcomes: on failure *out is NULL, the code is TS_EINVAL
 * (or TS_ENOMEM) and the message is a terminated string starting with the file
 * name; on success the cluster's totals add up and every pod's spec_key
 * indexes a class whose counts sum to the pod count. Build with -DTS_FUZZ=ON
 * (clang) and run with scripts/run-fuzz, which seeds the corpus from the CSV
 * files under tests/data.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tessera/load.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_failure(int rc, const void *out, const ts_err *err, const char *fname)
{
    if (out || (rc != TS_EINVAL && rc != TS_ENOMEM) || err->code != rc ||
        memchr(err->msg, '\0', sizeof err->msg) == NULL ||
        strncmp(err->msg, fname, strlen(fname)) != 0)
        abort();
}

static void fuzz_nodes(const char *buf, size_t size)
{
    ts_cluster *c = (ts_cluster *)&c; /* must be overwritten */
    ts_err err = {0};
    int rc = ts_load_nodes_csv(buf, size, "fuzz.csv", &c, &err);
    if (rc < 0) {
        check_failure(rc, c, &err, "fuzz.csv");
        return;
    }
    if (!c || c->nnodes < 1)
        abort();
    int64_t gpus = 0;
    for (int i = 0; i < c->nnodes; i++) {
        const ts_node *n = &c->nodes[i];
        if (n->ngpu < 0 || n->ngpu > TS_NODE_MAX_GPUS || n->gpus_free != n->ngpu ||
            n->cpu_milli < 0 || n->mem_mib < 0 || (n->ngpu > 0 && n->model < 0))
            abort();
        gpus += n->ngpu;
    }
    if (gpus != c->total_gpus)
        abort();
    ts_cluster_free(c);
}

static void fuzz_pods(const char *buf, size_t size)
{
    ts_workload *w = (ts_workload *)&w;
    ts_err err = {0};
    int rc = ts_load_pods_csv(buf, size, "fuzz.csv", &w, &err);
    if (rc < 0) {
        check_failure(rc, w, &err, "fuzz.csv");
        return;
    }
    if (!w || w->npods < 1 || w->nspecs < 1 || w->nspecs > w->npods)
        abort();
    long total = 0;
    for (int k = 0; k < w->nspecs; k++)
        total += w->spec_count[k];
    if (total != w->npods)
        abort();
    for (int i = 0; i < w->npods; i++) {
        const ts_pod *p = &w->pods[i];
        if (p->spec_key >= (uint32_t)w->nspecs || ts_request_check(&p->req, NULL) != 0 ||
            memchr(p->name, '\0', sizeof p->name) == NULL)
            abort();
    }
    ts_workload_free(w);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* a private copy, so ASan catches any read past size */
    char *buf = malloc(size ? size : 1);
    if (!buf)
        return 0;
    if (size)
        memcpy(buf, data, size);
    fuzz_nodes(buf, size);
    fuzz_pods(buf, size);
    free(buf);
    return 0;
}
