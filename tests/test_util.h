/*
 * test_util.h - helpers shared by the unit tests: binding a request to GPUs
 * chosen by the test (to preload a node's state exactly), bypassing the
 * placer's own GPU choice; finding the line a bad-input case marks.
 */
#ifndef TS_TEST_UTIL_H
#define TS_TEST_UTIL_H

#include <string.h>

#include "tessera/model.h"

/* The allocation of r on node index `node`, GPUs gpus[0..ngpu-1]. */
static inline ts_alloc ts_test_alloc(const ts_request *r, int node, const int *gpus, int ngpu)
{
    ts_alloc a;
    memset(&a, 0, sizeof a);
    a.node = node;
    a.mig_profile = -1;
    a.mig_start = -1;
    a.ngpu = ngpu;
    for (int k = 0; k < ngpu; k++)
        a.gpu[k] = (int8_t)gpus[k];
    a.gpu_milli = r->gpu_milli;
    a.gpu_mem_mib = r->gpu_mem_mib;
    a.cpu_milli = r->cpu_milli;
    a.mem_mib = r->mem_mib;
    a.shape = (int8_t)ts_request_shape(r);
    return a;
}

/* Line of the "#<" marker in a test's YAML text (where the error must be
 * reported), 1 if none. */
static inline int ts_test_marked_line(const char *yaml)
{
    const char *m = strstr(yaml, "#<");
    int line = 1;
    for (const char *p = yaml; m && p < m; p++)
        line += *p == '\n';
    return line;
}

#endif
