/*
 * agent_probe.c - bench/gpu-check's view of the node through the agent's own
 * code: the NVML loader (src/agent/nvml.c), discovery and the health sampler,
 * printed as one JSON document {"discovery": ..., "health": ...} for the
 * script to set beside `nvidia-smi -q`. Discovery includes each GPU's MIG
 * mode and, where MIG is on, its GPU instances: read back only, nothing here
 * changes the GPU.
 *   gpu-check-agent-probe [LIBNVIDIA_ML]   (default: libnvidia-ml.so.1)
 * Exit 77 when NVML cannot be loaded (no driver), 1 on an NVML failure.
 */
#include <jansson.h>
#include <stdio.h>

#include "agent/discover.h"
#include "agent/health.h"
#include "agent/nvml.h"

int main(int argc, char **argv)
{
    ts_err err = {0, ""};
    ts_nvml *nv = NULL;
    int rc = agent_nvml_open(argc > 1 ? argv[1] : NULL, &nv, &err);
    if (rc != 0) {
        fprintf(stderr, "gpu-check-agent-probe: %s\n", err.msg);
        return rc == TS_ENOENT ? 77 : 1;
    }
    static ts_node_desc desc;
    static ts_health_sample sample;
    ts_health *h = NULL;
    if (agent_discover(nv, &desc, &err) != 0 || agent_health_open(nv, &h, &err) != 0 ||
        agent_health_sample_now(h, &sample, &err) != 0) {
        fprintf(stderr, "gpu-check-agent-probe: %s\n", err.msg);
        agent_health_close(h);
        agent_nvml_close(nv);
        return 1;
    }
    json_t *doc = json_object();
    json_object_set_new(doc, "nvml_library", json_string(nv->path));
    json_object_set_new(doc, "discovery", agent_discover_json(&desc));
    json_object_set_new(doc, "health", agent_health_json(&sample));
    json_dumpf(doc, stdout, JSON_INDENT(1) | JSON_SORT_KEYS);
    putchar('\n');
    json_decref(doc);
    agent_health_close(h);
    agent_nvml_close(nv);
    return 0;
}
