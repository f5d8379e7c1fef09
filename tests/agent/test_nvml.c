/*
 * test_nvml.c - the agent's NVML layer against the fake libnvidia-ml.
 *
 * Proves that the loader finds the library (argument, environment) and says
 * clearly when there is none; that it binds the newest versioned exports;
 * that discovery reads both shipped fixtures as a controller needs them (UUIDs,
 * project model ids, NVLink peers, PCIe topology levels, MIG instances with
 * their MIG- UUIDs); that the fake enforces MIG geometry like the driver; and
 * that the health sampler turns each injected fault into the drain table's
 * verdict and reason code, with Xid events delivered exactly once. Faults are
 * injected as the agent would meet them: by rewriting the fixture under a
 * running NVML session. Fixtures: tests/fakes/h100x8.json, a100-mig.json.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/discover.h"
#include "agent/health.h"
#include "agent/nvml.h"
#include "tessera/model.h"

#define NVML_FIXTURE_TAG "nvml"
#include "fakes/nvml_fixture.h"



static ts_nvml *open_fake(const char *fixture_name)
{
    use_fixture(fixture_name);
    ts_nvml *nv = NULL;
    ts_err err = {0};
    int rc = agent_nvml_open(TS_FAKE_NVML, &nv, &err);
    if (rc != 0)
        fail_msg("agent_nvml_open: %s", err.msg);
    return nv;
}

static void teardown_fixture(void)
{
    unlink(fixture);
    unsetenv(NVML_FIXTURE_ENV);
}

static const ts_health_reason *find_reason(const ts_gpu_health *g, const char *code)
{
    for (int i = 0; i < g->nreasons; i++)
        if (strcmp(g->reason[i].code, code) == 0)
            return &g->reason[i];
    return NULL;
}

/* ---- loading --------------------------------------------------------------- */

static void missing_library_is_a_clear_error(void **state)
{
    (void)state;
    ts_nvml *nv = (ts_nvml *)1;
    ts_err err = {0};
    assert_int_equal(agent_nvml_open("/nonexistent/libnvidia-ml.so.1", &nv, &err), TS_ENOENT);
    assert_null(nv);
    assert_non_null(strstr(err.msg, "no NVML: cannot load /nonexistent/libnvidia-ml.so.1"));

    setenv(TS_NVML_LIBRARY_ENV, "/nonexistent/from-env.so", 1);
    assert_int_equal(agent_nvml_open(NULL, &nv, &err), TS_ENOENT);
    assert_non_null(strstr(err.msg, "/nonexistent/from-env.so"));
    unsetenv(TS_NVML_LIBRARY_ENV);
}

static void env_names_the_library_and_init_errors_are_reported(void **state)
{
    (void)state;
    ts_nvml *nv = NULL;
    ts_err err = {0};
    /* the fake without a fixture behaves like a node whose driver is not loaded */
    unsetenv(NVML_FIXTURE_ENV);
    setenv(TS_NVML_LIBRARY_ENV, TS_FAKE_NVML, 1);
    assert_int_equal(agent_nvml_open(NULL, &nv, &err), TS_EIO);
    assert_non_null(strstr(err.msg, "nvmlInit_v2"));
    assert_non_null(strstr(err.msg, "Driver Not Loaded"));

    use_fixture("h100x8.json");
    assert_int_equal(agent_nvml_open(NULL, &nv, &err), 0);
    assert_string_equal(nv->path, TS_FAKE_NVML);
    agent_nvml_close(nv);
    unsetenv(TS_NVML_LIBRARY_ENV);
    teardown_fixture();
}

static void newest_versioned_symbols_are_bound(void **state)
{
    (void)state;
    ts_nvml *nv = open_fake("h100x8.json");
    assert_int_equal(strncmp(nv->symbol[TS_NVML_FN_Init], "nvmlInit_v2 ", 12), 0);
    assert_int_equal(strncmp(nv->symbol[TS_NVML_FN_DeviceGetPciInfo], "nvmlDeviceGetPciInfo_v3", 23),
                     0);
    assert_int_equal(strncmp(nv->symbol[TS_NVML_FN_EventSetWait], "nvmlEventSetWait_v2", 19), 0);
    assert_false(agent_nvml_is_fallback(nv, TS_NVML_FN_DeviceGetCount));
    assert_false(agent_nvml_is_fallback(nv, TS_NVML_FN_DeviceGetCurrentClocksEventReasons));
    assert_string_equal(agent_nvml_strerror(nv, NVML_ERROR_GPU_IS_LOST), "GPU is lost");
    agent_nvml_close(nv);
    teardown_fixture();
}

/* ---- discovery ------------------------------------------------------------- */

static void discovers_an_hgx_h100_node(void **state)
{
    (void)state;
    ts_nvml *nv = open_fake("h100x8.json");
    static ts_node_desc d;
    ts_err err = {0};
    assert_int_equal(agent_discover(nv, &d, &err), 0);
    assert_true(d.cpus >= 1);
    assert_true(d.mem_total_bytes > 0);
    assert_int_equal(d.ngpus, 8);
    for (int i = 0; i < 8; i++) {
        const ts_gpu_desc *g = &d.gpu[i];
        assert_string_equal(g->error, "");
        assert_int_equal(g->model, ts_gpu_model_lookup("H100-80GB"));
        assert_int_equal(g->mem_total_bytes, 81559ULL << 20);
        assert_int_equal(g->nlinks, 18);
        for (int l = 0; l < 18; l++)
            assert_true(g->link[l].up && g->link[l].remote_is_switch);
        assert_true(g->mig_capable);
        assert_false(g->mig_enabled);
    }
    assert_string_equal(d.gpu[0].uuid, "GPU-3f1a2b00-6b1f-4c1d-9e2a-5d0000000000");
    assert_string_equal(d.gpu[3].bus_id, "00000000:5D:00.0");
    assert_string_equal(d.gpu[0].link[0].remote_bus_id, "00000000:05:00.0");
    assert_string_equal(d.gpu[0].link[17].remote_bus_id, "00000000:08:00.0");
    assert_int_equal(d.topo[0][0], NVML_TOPOLOGY_INTERNAL);
    assert_int_equal(d.topo[0][1], NVML_TOPOLOGY_SINGLE); /* same PCIe switch */
    assert_int_equal(d.topo[0][3], NVML_TOPOLOGY_NODE);   /* same NUMA node */
    assert_int_equal(d.topo[2][6], NVML_TOPOLOGY_SYSTEM); /* across sockets */
    assert_int_equal(d.topo[6][2], NVML_TOPOLOGY_SYSTEM);

    json_t *j = agent_discover_json(&d);
    assert_non_null(j);
    json_t *g0 = json_array_get(json_object_get(j, "gpus"), 0);
    assert_string_equal(json_string_value(json_object_get(g0, "model")), "H100-80GB");
    assert_string_equal(json_string_value(json_object_get(g0, "name")), "NVIDIA H100 80GB HBM3");
    json_t *row = json_array_get(json_object_get(j, "topology"), 0);
    assert_string_equal(json_string_value(json_array_get(row, 1)), "PIX");
    assert_string_equal(json_string_value(json_array_get(row, 7)), "SYS");
    json_decref(j);
    agent_nvml_close(nv);
    teardown_fixture();
}

static void discovers_mig_instances_with_their_uuids(void **state)
{
    (void)state;
    ts_nvml *nv = open_fake("a100-mig.json");
    static ts_node_desc d;
    ts_err err = {0};
    assert_int_equal(agent_discover(nv, &d, &err), 0);
    assert_int_equal(d.ngpus, 2);
    const ts_gpu_desc *g = &d.gpu[0];
    assert_int_equal(g->model, ts_gpu_model_lookup("A100-40GB"));
    assert_true(g->mig_capable && g->mig_enabled && g->mig_pending);
    /* direct GPU-GPU NVLinks name the peer's bus id */
    assert_int_equal(g->nlinks, 12);
    assert_false(g->link[11].remote_is_switch);
    assert_string_equal(g->link[11].remote_bus_id, d.gpu[1].bus_id);
    assert_string_equal(d.gpu[1].link[0].remote_bus_id, d.gpu[0].bus_id);

    assert_int_equal(g->ngi, 3);
    assert_int_equal(g->gi[0].id, 1); /* sorted by id */
    assert_int_equal(g->gi[0].profile_id, 9);
    assert_int_equal(g->gi[0].start, 4);
    assert_int_equal(g->gi[0].size, 4);
    assert_int_equal(g->gi[0].nci, 1);
    assert_int_equal(g->gi[0].ci[0].profile_id, 2);
    assert_int_equal(g->gi[0].ci[0].size, 3);
    assert_string_equal(g->gi[0].ci[0].uuid, "MIG-5c3a1e2f-8b7d-5e0f-a1b2-c3d4e5f60001");
    assert_int_equal(g->gi[1].profile_id, 14);
    assert_int_equal(g->gi[1].start, 0);
    assert_int_equal(g->gi[1].nci, 2);
    assert_string_equal(g->gi[1].ci[0].uuid, "MIG-5c3a1e2f-8b7d-5e0f-a1b2-c3d4e5f60002");
    assert_string_equal(g->gi[1].ci[1].uuid, "MIG-5c3a1e2f-8b7d-5e0f-a1b2-c3d4e5f60003");
    assert_int_equal(g->gi[1].ci[1].start, 1);
    assert_int_equal(g->gi[2].profile_id, 19);
    assert_int_equal(g->gi[2].start, 2);
    assert_string_equal(g->gi[2].ci[0].uuid, "MIG-5c3a1e2f-8b7d-5e0f-a1b2-c3d4e5f60004");
    assert_true(d.gpu[1].mig_capable);
    assert_false(d.gpu[1].mig_enabled);
    assert_int_equal(d.gpu[1].ngi, 0);

    json_t *j = agent_discover_json(&d);
    json_t *mig = json_object_get(json_array_get(json_object_get(j, "gpus"), 0), "mig");
    assert_true(json_is_true(json_object_get(mig, "enabled")));
    json_t *ci = json_array_get(
        json_object_get(json_array_get(json_object_get(mig, "instances"), 0), "compute_instances"),
        0);
    assert_string_equal(json_string_value(json_object_get(ci, "uuid")),
                        "MIG-5c3a1e2f-8b7d-5e0f-a1b2-c3d4e5f60001");
    json_decref(j);
    agent_nvml_close(nv);
    teardown_fixture();
}

static void no_nvml_discovers_the_host_only(void **state)
{
    (void)state;
    static ts_node_desc d;
    ts_err err = {0};
    assert_int_equal(agent_discover(NULL, &d, &err), 0);
    assert_int_equal(d.ngpus, 0);
    assert_true(d.cpus == sysconf(_SC_NPROCESSORS_ONLN));
    long cpus;
    uint64_t mem;
    assert_int_equal(agent_discover_host("/nonexistent/meminfo", &cpus, &mem, &err), TS_EIO);
    assert_non_null(strstr(err.msg, "/nonexistent/meminfo"));
}

static void model_mapping_prefers_pci_ids(void **state)
{
    (void)state;
    assert_int_equal(agent_discover_model("whatever", 0x233510DE), ts_gpu_model_lookup("H200-141GB"));
    assert_int_equal(agent_discover_model("NVIDIA A100 80GB PCIe", 0), ts_gpu_model_lookup("A100-80GB"));
    assert_int_equal(agent_discover_model("Tesla T4", 0x1EB810DE), ts_gpu_model_lookup("T4"));
    assert_int_equal(agent_discover_model("NVIDIA GeForce RTX 4090", 0x268410DE), -1);
}

/* ---- MIG geometry in the fake ------------------------------------------------ */

static void fake_enforces_mig_geometry(void **state)
{
    (void)state;
    ts_nvml *nv = open_fake("a100-mig.json");
    nvmlDevice_t g0, g1;
    assert_int_equal(nv->DeviceGetHandleByIndex(0, &g0), NVML_SUCCESS);
    assert_int_equal(nv->DeviceGetHandleByIndex(1, &g1), NVML_SUCCESS);
    nvmlGpuInstance_t gi;
    nvmlGpuInstancePlacement_t at0 = {0, 4}, at6 = {6, 2};
    /* MIG off on GPU 1 */
    assert_int_equal(nv->DeviceCreateGpuInstance(g1, 19, &gi), NVML_ERROR_INVALID_STATE);
    /* GPU 0 holds 2g@0, 1g@2, 3g@4: a 4g at 0 overlaps, a 2g cannot start at 6 */
    assert_int_equal(nv->DeviceCreateGpuInstanceWithPlacement(g0, 5, &at0, &gi),
                     NVML_ERROR_INSUFFICIENT_RESOURCES);
    assert_int_equal(nv->DeviceCreateGpuInstanceWithPlacement(g0, 14, &at6, &gi),
                     NVML_ERROR_INVALID_ARGUMENT);
    unsigned left = 9;
    assert_int_equal(nv->DeviceGetGpuInstanceRemainingCapacity(g0, 19, &left), NVML_SUCCESS);
    assert_int_equal(left, 1); /* slot 3 only: 7 is never usable by a 1g */
    assert_int_equal(nv->DeviceCreateGpuInstance(g0, 19, &gi), NVML_SUCCESS);
    nvmlGpuInstanceInfo_t info;
    assert_int_equal(nv->GpuInstanceGetInfo(gi, &info), NVML_SUCCESS);
    assert_int_equal(info.placement.start, 3);
    assert_int_equal(info.id, 4);
    assert_int_equal(nv->DeviceCreateGpuInstance(g0, 19, &gi), NVML_ERROR_INSUFFICIENT_RESOURCES);
    /* a 1g takes one 1c compute instance, no more */
    nvmlComputeInstance_t ci, ci2;
    nvmlGpuInstance_t fresh;
    unsigned n = 1;
    assert_int_equal(nv->DeviceGetGpuInstances(g0, 19, &fresh, &n), NVML_ERROR_INSUFFICIENT_SIZE);
    assert_int_equal(nv->GpuInstanceGetInfo(gi, &info), NVML_SUCCESS);
    assert_int_equal(nv->GpuInstanceCreateComputeInstance(gi, 2, &ci), NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(nv->GpuInstanceCreateComputeInstance(gi, 0, &ci), NVML_SUCCESS);
    assert_int_equal(nv->GpuInstanceCreateComputeInstance(gi, 0, &ci2),
                     NVML_ERROR_INSUFFICIENT_RESOURCES);
    /* a GI with compute instances is in use */
    assert_int_equal(nv->GpuInstanceDestroy(gi), NVML_ERROR_IN_USE);
    assert_int_equal(nv->ComputeInstanceDestroy(ci), NVML_SUCCESS);
    assert_int_equal(nv->GpuInstanceDestroy(gi), NVML_SUCCESS);
    /* the freed slot is usable again */
    assert_int_equal(nv->DeviceGetGpuInstanceRemainingCapacity(g0, 19, &left), NVML_SUCCESS);
    assert_int_equal(left, 1);
    agent_nvml_close(nv);
    teardown_fixture();
}

/* ---- health -------------------------------------------------------------------- */

struct health_fx {
    ts_nvml *nv;
    ts_health *h;
    ts_health_sample s;
};

static int health_setup(void **state)
{
    struct health_fx *fx = calloc(1, sizeof *fx);
    fx->nv = open_fake("h100x8.json");
    ts_err err = {0};
    assert_int_equal(agent_health_open(fx->nv, &fx->h, &err), 0);
    *state = fx;
    return 0;
}

static int health_teardown(void **state)
{
    struct health_fx *fx = *state;
    agent_health_close(fx->h);
    agent_nvml_close(fx->nv);
    free(fx);
    teardown_fixture();
    return 0;
}

static const ts_gpu_health *sample(struct health_fx *fx, int gpu)
{
    ts_err err = {0};
    assert_int_equal(agent_health_sample_now(fx->h, &fx->s, &err), 0);
    return &fx->s.gpu[gpu];
}

static void expect(struct health_fx *fx, int gpu, int verdict, const char *code)
{
    const ts_gpu_health *g = sample(fx, gpu);
    if (g->verdict != verdict || (code && !find_reason(g, code)))
        fail_msg("gpu %d: verdict %s (want %s), %d reasons, first %s", gpu,
                 agent_health_verdict_name(g->verdict), agent_health_verdict_name(verdict), g->nreasons,
                 g->nreasons ? g->reason[0].code : "-");
    assert_int_equal(fx->s.verdict, verdict); /* the others stay healthy */
}

static void baseline_is_healthy(void **state)
{
    struct health_fx *fx = *state;
    const ts_gpu_health *g = sample(fx, 0);
    assert_true(fx->s.xid_monitored);
    assert_int_equal(fx->s.ngpus, 8);
    assert_int_equal(fx->s.verdict, TS_HEALTH_HEALTHY);
    for (int i = 0; i < 8; i++)
        assert_int_equal(fx->s.gpu[i].nreasons, 0);
    assert_int_equal(g->temperature_c, 34);
    assert_int_equal(g->pcie_gen, 5);
    assert_int_equal(g->nvlinks, 18);
    json_t *j = agent_health_json(&fx->s);
    assert_string_equal(json_string_value(json_object_get(j, "verdict")), "healthy");
    assert_int_equal(json_array_size(json_object_get(j, "reasons")), 0);
    json_decref(j);
}

static void xid79_fails_the_gpu_and_sticks(void **state)
{
    struct health_fx *fx = *state;
    inject(3, "xids", json_pack("[i]", 79));
    expect(fx, 3, TS_HEALTH_FAILED, "xid-79");
    const ts_health_reason *r = find_reason(&fx->s.gpu[3], "xid-79");
    assert_non_null(strstr(r->message, "xid 79: GPU has fallen off the bus"));
    json_t *j = agent_health_json(&fx->s);
    assert_string_equal(json_string_value(json_object_get(j, "verdict")), "failed");
    assert_non_null(strstr(json_string_value(json_array_get(json_object_get(j, "reasons"), 0)),
                           "gpu 3: xid-79: xid 79: GPU has fallen off the bus"));
    json_decref(j);
    /* the event came once; the verdict stays until the GPU is reset */
    expect(fx, 3, TS_HEALTH_FAILED, "xid-79");
    agent_health_clear(fx->h, 3);
    expect(fx, 3, TS_HEALTH_HEALTHY, NULL);
}

static void xid48_dbe_fails_the_gpu(void **state)
{
    struct health_fx *fx = *state;
    inject(1, "xids", json_pack("[i]", 48));
    expect(fx, 1, TS_HEALTH_FAILED, "xid-48");
}

static void contained_and_app_xids_do_not_drain(void **state)
{
    struct health_fx *fx = *state;
    inject(2, "xids", json_pack("[i, i]", 13, 94));
    expect(fx, 2, TS_HEALTH_DEGRADED, "xid-94");
    assert_null(find_reason(&fx->s.gpu[2], "xid-13"));
}

static void thermal_slowdown_degrades(void **state)
{
    struct health_fx *fx = *state;
    inject(5, "clock_event_reasons", json_integer(0x40 | 0x1));
    expect(fx, 5, TS_HEALTH_DEGRADED, "clock-hw-thermal");
    inject(5, "clock_event_reasons", json_integer(0x20));
    expect(fx, 5, TS_HEALTH_DEGRADED, "clock-sw-thermal");
    inject(5, "clock_event_reasons", json_integer(0x4 | 0x10)); /* power cap, sync boost: normal */
    expect(fx, 5, TS_HEALTH_HEALTHY, NULL);
}

static void pcie_downgrade_degrades(void **state)
{
    struct health_fx *fx = *state;
    inject(0, "utilization", json_pack("{s:i, s:i}", "gpu", 80, "memory", 40));
    inject(0, "pcie", json_pack("{s:i, s:i, s:i, s:i}", "gen", 3, "width", 4, "max_gen", 5,
                                "max_width", 16));
    expect(fx, 0, TS_HEALTH_DEGRADED, "pcie-width");
    assert_non_null(find_reason(&fx->s.gpu[0], "pcie-gen"));
    assert_int_equal(fx->s.gpu[0].pcie_gen, 3);
    assert_int_equal(fx->s.gpu[0].pcie_width, 4);
    /* a lower generation at idle is power saving, not a fault */
    inject(0, "utilization", json_pack("{s:i, s:i}", "gpu", 0, "memory", 0));
    inject(0, "pcie", json_pack("{s:i, s:i, s:i, s:i}", "gen", 1, "width", 16, "max_gen", 5,
                                "max_width", 16));
    expect(fx, 0, TS_HEALTH_HEALTHY, NULL);
}

static void ecc_and_row_remap_follow_the_table(void **state)
{
    struct health_fx *fx = *state;
    inject(4, "ecc", json_pack("{s:i, s:i}", "sbe_volatile", 10, "dbe_volatile", 2));
    expect(fx, 4, TS_HEALTH_DEGRADED, "ecc-uncorrected");
    assert_int_equal(fx->s.gpu[4].ecc_uncorrected_volatile, 2);
    inject(4, "remapped_rows", json_pack("{s:i, s:i, s:b, s:b}", "correctable", 0,
                                         "uncorrectable", 2, "pending", 1, "failure", 0));
    expect(fx, 4, TS_HEALTH_DEGRADED, "row-remap-pending");
    inject(4, "remapped_rows", json_pack("{s:i, s:i, s:b, s:b}", "correctable", 0,
                                         "uncorrectable", 2, "pending", 0, "failure", 1));
    expect(fx, 4, TS_HEALTH_FAILED, "row-remap-failed");
    inject(4, "retired_pages_pending", json_true());
    expect(fx, 4, TS_HEALTH_FAILED, "retired-pages-pending");
}

static void nvlink_down_degrades(void **state)
{
    struct health_fx *fx = *state;
    json_t *root = fixture_load();
    json_t *link = json_array_get(json_object_get(gpu_of(root, 7), "nvlinks"), 5);
    json_object_set_new(link, "active", json_false());
    fixture_save(root);
    expect(fx, 7, TS_HEALTH_DEGRADED, "nvlink-down");
    assert_int_equal(fx->s.gpu[7].nvlinks_down, 1);
    assert_non_null(strstr(find_reason(&fx->s.gpu[7], "nvlink-down")->message, "NVLink 5"));
}

static void lost_gpu_fails_and_discovery_carries_on(void **state)
{
    struct health_fx *fx = *state;
    inject(6, "lost", json_true());
    inject(6, "xids", json_pack("[i]", 79));
    expect(fx, 6, TS_HEALTH_FAILED, "gpu-lost");
    assert_true(fx->s.gpu[6].lost);
    assert_non_null(find_reason(&fx->s.gpu[6], "xid-79"));

    static ts_node_desc d;
    ts_err err = {0};
    assert_int_equal(agent_discover(fx->nv, &d, &err), 0);
    assert_int_equal(d.ngpus, 8);
    assert_string_equal(d.gpu[6].error, "gpu 6: nvmlDeviceGetUUID: GPU is lost");
    assert_string_equal(d.gpu[7].error, "");
    assert_int_equal(d.topo[6][7], TS_TOPO_UNKNOWN);
    json_t *j = agent_discover_json(&d);
    json_t *g6 = json_array_get(json_object_get(j, "gpus"), 6);
    assert_non_null(strstr(json_string_value(json_object_get(g6, "error")), "GPU is lost"));
    json_decref(j);
}

static void mig_gpu_baseline_is_healthy(void **state)
{
    (void)state;
    ts_nvml *nv = open_fake("a100-mig.json");
    ts_health *h = NULL;
    static ts_health_sample s;
    ts_err err = {0};
    assert_int_equal(agent_health_open(nv, &h, &err), 0);
    assert_int_equal(agent_health_sample_now(h, &s, &err), 0);
    /* utilisation and row remapping are NOT_SUPPORTED there: unknown, not faults */
    assert_int_equal(s.verdict, TS_HEALTH_HEALTHY);
    assert_int_equal(s.gpu[0].util_gpu_pct, -1);
    assert_int_equal(s.gpu[0].nreasons, 0);
    assert_int_equal(s.gpu[1].nvlinks, 12);
    agent_health_close(h);
    agent_nvml_close(nv);
    teardown_fixture();
}

static void xid_events_are_delivered_once(void **state)
{
    (void)state;
    ts_nvml *nv = open_fake("h100x8.json");
    inject(0, "xids", json_pack("[i]", 31)); /* before registration: never delivered */
    nvmlDevice_t dev;
    nvmlEventSet_t set;
    assert_int_equal(nv->DeviceGetHandleByIndex(0, &dev), NVML_SUCCESS);
    assert_int_equal(nv->EventSetCreate(&set), NVML_SUCCESS);
    assert_int_equal(nv->DeviceRegisterEvents(dev, nvmlEventTypeXidCriticalError, set),
                     NVML_SUCCESS);
    nvmlEventData_t ev;
    assert_int_equal(nv->EventSetWait(set, &ev, 0), NVML_ERROR_TIMEOUT);
    inject(0, "xids", json_pack("[i, i]", 31, 79));
    assert_int_equal(nv->EventSetWait(set, &ev, 0), NVML_SUCCESS);
    assert_true(ev.device == dev);
    assert_int_equal(ev.eventType, nvmlEventTypeXidCriticalError);
    assert_int_equal(ev.eventData, 79);
    assert_int_equal(ev.gpuInstanceId, NVML_INSTANCE_ID_NONE);
    assert_int_equal(nv->EventSetWait(set, &ev, 0), NVML_ERROR_TIMEOUT);
    assert_int_equal(nv->EventSetWait(set, &ev, 20), NVML_ERROR_TIMEOUT);
    inject(0, "xids", json_pack("[i, i, i]", 31, 79, 48));
    assert_int_equal(nv->EventSetWait(set, &ev, 0), NVML_SUCCESS);
    assert_int_equal(ev.eventData, 48);
    assert_int_equal(nv->EventSetWait(set, &ev, 0), NVML_ERROR_TIMEOUT);
    /* unsupported event bits are refused, as by the driver */
    assert_int_equal(nv->DeviceRegisterEvents(dev, 0x4000ULL, set), NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(nv->EventSetFree(set), NVML_SUCCESS);
    agent_nvml_close(nv);
    teardown_fixture();
}

static void xid_policy_matches_the_drain_table(void **state)
{
    (void)state;
    const unsigned drain[] = {46, 48, 62, 64, 74, 79, 95, 109, 119, 120, 140, 143};
    for (size_t i = 0; i < sizeof drain / sizeof drain[0]; i++)
        assert_int_equal(agent_health_xid_policy(drain[i], NULL), TS_HEALTH_FAILED);
    assert_int_equal(agent_health_xid_policy(63, NULL), TS_HEALTH_DEGRADED);
    assert_int_equal(agent_health_xid_policy(94, NULL), TS_HEALTH_DEGRADED);
    assert_int_equal(agent_health_xid_policy(92, NULL), TS_HEALTH_HEALTHY);
    assert_int_equal(agent_health_xid_policy(13, NULL), TS_HEALTH_HEALTHY);
    assert_int_equal(agent_health_xid_policy(999, NULL), TS_HEALTH_DEGRADED);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(missing_library_is_a_clear_error),
        cmocka_unit_test(env_names_the_library_and_init_errors_are_reported),
        cmocka_unit_test(newest_versioned_symbols_are_bound),
        cmocka_unit_test(discovers_an_hgx_h100_node),
        cmocka_unit_test(discovers_mig_instances_with_their_uuids),
        cmocka_unit_test(no_nvml_discovers_the_host_only),
        cmocka_unit_test(model_mapping_prefers_pci_ids),
        cmocka_unit_test(fake_enforces_mig_geometry),
        cmocka_unit_test_setup_teardown(baseline_is_healthy, health_setup, health_teardown),
        cmocka_unit_test_setup_teardown(xid79_fails_the_gpu_and_sticks, health_setup,
                                        health_teardown),
        cmocka_unit_test_setup_teardown(xid48_dbe_fails_the_gpu, health_setup, health_teardown),
        cmocka_unit_test_setup_teardown(contained_and_app_xids_do_not_drain, health_setup,
                                        health_teardown),
        cmocka_unit_test_setup_teardown(thermal_slowdown_degrades, health_setup, health_teardown),
        cmocka_unit_test_setup_teardown(pcie_downgrade_degrades, health_setup, health_teardown),
        cmocka_unit_test_setup_teardown(ecc_and_row_remap_follow_the_table, health_setup,
                                        health_teardown),
        cmocka_unit_test_setup_teardown(nvlink_down_degrades, health_setup, health_teardown),
        cmocka_unit_test_setup_teardown(lost_gpu_fails_and_discovery_carries_on, health_setup,
                                        health_teardown),
        cmocka_unit_test(mig_gpu_baseline_is_healthy),
        cmocka_unit_test(xid_events_are_delivered_once),
        cmocka_unit_test(xid_policy_matches_the_drain_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
