/*
 * load.h - building clusters and workloads from text.
 *
 * Loaders parse from memory (the core does no file I/O); the shells read the
 * file and pass its name for messages. Every error names file, line and field
 * ("nodes.csv:14: memory_mib: must be a non-negative integer, got \"-5\"") and
 * returns TS_EINVAL; nothing already loaded into the caller's objects is
 * touched by a failed load (loaders build a fresh cluster and hand it over only
 * on success).
 */
#ifndef TESSERA_LOAD_H
#define TESSERA_LOAD_H

#include <stddef.h>
#include <stdint.h>

#include "tessera/model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* openb node list: columns sn,cpu_milli,memory_mib,gpu,model (any order, by
 * header name). GPUs are SHARED mode. On success *out owns a new cluster. */
int ts_load_nodes_csv(const char *buf, size_t len, const char *fname, ts_cluster **out,
                      ts_err *err);

/* One pod of a workload, in trace order. */
typedef struct ts_pod {
    char name[TS_NAME_MAX];
    ts_request req;
    uint32_t spec_key;   /* index of its request class in specs */
} ts_pod;

typedef struct ts_workload {
    ts_pod *pods;
    int npods;
    /* distinct requests (cpu_milli, mem_mib, gpu_milli, num_gpu, model_mask),
     * in order of first appearance; pods[i].spec_key indexes these */
    ts_request *specs;
    int *spec_count;
    int nspecs;
} ts_workload;

/* openb pod list: needs name,cpu_milli,memory_mib,num_gpu,gpu_milli; gpu_spec
 * optional; other columns ignored. On success *out owns a new workload. */
int ts_load_pods_csv(const char *buf, size_t len, const char *fname, ts_workload **out,
                     ts_err *err);
void ts_workload_free(ts_workload *w);

/* Tessera's cluster YAML (docs/cluster-format.md): topology levels, node
 * classes and nodes with their topology placement. */
int ts_load_cluster_yaml(const char *buf, size_t len, const char *fname, ts_cluster **out,
                         ts_err *err);

#ifdef __cplusplus
}
#endif
#endif
