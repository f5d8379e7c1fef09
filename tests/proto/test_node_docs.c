/*
 * test_node_docs.c - the codec of a node's discovery and health
 * (src/proto/discovery.c, node_health.c): a discovery with every member (a
 * MIG GPU with its instances, a GPU that could not be read, the topology,
 * the underlay address, the rails and their ports) and a health with every
 * member, in the order the agent writes them, decode and encode back byte
 * for byte and read as typed values; each wrong or missing member is
 * refused with its path and reason; an older agent's null model is read.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tessera/agent_proto.h"

static const char DISCOVERY[] =
    "{\"cpus\":224,\"memory_bytes\":2199023255552,\"driver_version\":\"550.54.15\",\"gpus\":["
    "{\"index\":0,\"uuid\":\"GPU-0\",\"name\":\"NVIDIA A100-SXM4-40GB\",\"model\":\"A100-40GB\","
    "\"memory_bytes\":42949672960,\"pci_bus_id\":\"00000000:18:00.0\",\"nvlinks\":[{\"link\":0,"
    "\"up\":true,\"remote_pci_bus_id\":\"00000000:28:00.0\",\"remote_type\":\"gpu\"},{\"link\":1,"
    "\"up\":false,\"remote_pci_bus_id\":\"00000000:00:00.0\",\"remote_type\":\"switch\"}],"
    "\"mig\":{\"enabled\":true,\"pending\":false,\"instances\":[{\"gpu_instance_id\":1,"
    "\"profile_id\":19,\"placement\":{\"start\":0,\"size\":1},\"compute_instances\":[{\"id\":0,"
    "\"profile_id\":0,\"placement\":{\"start\":0,\"size\":1},\"uuid\":\"MIG-1\"}]}]}},"
    "{\"index\":1,\"uuid\":\"\",\"name\":\"\",\"memory_bytes\":0,\"pci_bus_id\":\"\","
    "\"nvlinks\":[],\"error\":\"GPU is lost\"}],"
    "\"topology\":[[\"X\",\"NV12\"],[\"NV12\",\"X\"]],\"net_addr\":\"10.1.0.7\","
    "\"rails\":[{\"gpu\":0,\"hca\":\"mlx5_0\"}],\"ib_ports\":[{\"hca\":\"mlx5_0\","
    "\"guid\":\"0x0002c90300a1b2c1\"}],\"gpu_sharing\":\"mps\"}";

static const char HEALTH[] =
    "{\"verdict\":\"failed\",\"xid_monitored\":true,\"reasons\":[\"gpu 1: xid-79: fell off\"],"
    "\"gpus\":[{\"index\":0,\"verdict\":\"healthy\",\"temperature_c\":41,\"pcie_gen\":4,"
    "\"pcie_width\":16,\"clock_event_reasons\":0,\"ecc_uncorrected_volatile\":0,"
    "\"nvlinks_down\":0,\"util_gpu_pct\":-1,\"reasons\":[]},{\"index\":1,\"verdict\":\"failed\","
    "\"temperature_c\":-1,\"pcie_gen\":0,\"pcie_width\":0,\"clock_event_reasons\":0,"
    "\"ecc_uncorrected_volatile\":0,\"nvlinks_down\":0,\"util_gpu_pct\":-1,\"reasons\":["
    "{\"code\":\"xid-79\",\"verdict\":\"failed\",\"message\":\"fell off\"}]}]}";

static json_t *parse(const char *text)
{
    json_error_t je;
    json_t *o = json_loads(text, 0, &je);
    if (!o)
        fail_msg("%s", je.text);
    return o;
}

static void assert_same_text(json_t *out, const char *doc)
{
    assert_non_null(out);
    char *text = json_dumps(out, JSON_COMPACT);
    assert_string_equal(text, doc);
    free(text);
    json_decref(out);
}

static void a_discovery_round_trips_byte_for_byte(void **state)
{
    (void)state;
    json_t *in = parse(DISCOVERY);
    ts_discovery d;
    assert_int_equal(ts_discovery_decode(in, "discovery", &d, NULL), 0);
    assert_int_equal(d.present, TS_DC_BIT(TS_DC_NFIELDS) - 1);
    assert_int_equal(d.cpus, 224);
    assert_int_equal(d.ngpus, 2);
    assert_int_equal(d.gpu_sharing, TS_SHARING_MPS);
    const ts_disc_gpu *g = &d.gpus[0];
    assert_string_equal(g->model, "A100-40GB");
    assert_int_equal(g->nnvlinks, 2);
    assert_int_equal(g->nvlinks[1].remote_type, TS_REMOTE_SWITCH);
    assert_true(g->mig.enabled);
    assert_int_equal(g->mig.instances[0].profile_id, 19);
    assert_string_equal(g->mig.instances[0].cis[0].uuid, "MIG-1");
    assert_int_equal(g->mig.instances[0].cis[0].placement.size, 1);
    assert_false(d.gpus[1].present & TS_DG_BIT(TS_DG_MODEL));
    assert_false(d.gpus[1].present & TS_DG_BIT(TS_DG_MIG));
    assert_string_equal(d.gpus[1].error, "GPU is lost");
    assert_int_equal(d.ntopology, 2);
    assert_string_equal(d.topology[0].v[1], "NV12");
    assert_string_equal(d.net_addr, "10.1.0.7");
    assert_int_equal(d.rails[0].gpu, 0);
    assert_string_equal(d.ib_ports[0].guid, "0x0002c90300a1b2c1");
    assert_same_text(ts_discovery_encode(&d), DISCOVERY);
    ts_discovery_fini(&d);
    json_decref(in);
}

static void a_health_round_trips_byte_for_byte(void **state)
{
    (void)state;
    json_t *in = parse(HEALTH);
    ts_node_health h;
    assert_int_equal(ts_node_health_decode(in, "health", &h, NULL), 0);
    assert_int_equal(h.present, TS_NH_BIT(TS_NH_NFIELDS) - 1);
    assert_int_equal(h.verdict, TS_VERDICT_FAILED);
    assert_true(h.xid_monitored);
    assert_int_equal(h.reasons.n, 1);
    assert_int_equal(h.ngpus, 2);
    assert_int_equal(h.gpus[0].temperature_c, 41);
    assert_int_equal(h.gpus[0].util_gpu_pct, -1);
    assert_int_equal(h.gpus[1].verdict, TS_VERDICT_FAILED);
    assert_string_equal(h.gpus[1].reasons[0].code, "xid-79");
    assert_int_equal(h.gpus[1].reasons[0].verdict, TS_VERDICT_FAILED);
    assert_same_text(ts_node_health_encode(&h), HEALTH);
    ts_node_health_fini(&h);
    json_decref(in);
    /* the least a health carries */
    static const char LEAST[] = "{\"verdict\":\"degraded\",\"reasons\":[\"no NVML\"]}";
    in = parse(LEAST);
    assert_int_equal(ts_node_health_decode(in, "health", &h, NULL), 0);
    assert_int_equal(h.verdict, TS_VERDICT_DEGRADED);
    assert_same_text(ts_node_health_encode(&h), LEAST);
    ts_node_health_fini(&h);
    json_decref(in);
}

/* The agents before the codec wrote an unmapped model as null. */
static void an_older_agents_null_model_is_read(void **state)
{
    (void)state;
    char doc[sizeof DISCOVERY + 8];
    const char *at = strstr(DISCOVERY, "\"A100-40GB\"");
    snprintf(doc, sizeof doc, "%.*snull%s", (int)(at - DISCOVERY), DISCOVERY,
             at + strlen("\"A100-40GB\""));
    json_t *in = parse(doc);
    ts_discovery d;
    assert_int_equal(ts_discovery_decode(in, "discovery", &d, NULL), 0);
    assert_null(d.gpus[0].model);
    assert_same_text(ts_discovery_encode(&d), doc);
    ts_discovery_fini(&d);
    json_decref(in);
}

typedef struct bad {
    const char *from, *to, *msg; /* the document with `from` replaced by `to` */
} bad;

static void refuse_each(const char *base, const bad *b, size_t n, bool discovery)
{
    for (size_t k = 0; k < n; k++) {
        const char *at = strstr(base, b[k].from);
        if (!at)
            fail_msg("not in the document: %s", b[k].from);
        char doc[sizeof DISCOVERY + sizeof HEALTH];
        snprintf(doc, sizeof doc, "%.*s%s%s", (int)(at - base), base, b[k].to,
                 at + strlen(b[k].from));
        json_t *in = parse(doc);
        ts_err err = {0};
        ts_discovery d;
        ts_node_health h;
        int rc = discovery ? ts_discovery_decode(in, "discovery", &d, &err)
                           : ts_node_health_decode(in, "health", &h, &err);
        if (rc != TS_EINVAL || strcmp(err.msg, b[k].msg) != 0)
            fail_msg("%s: got %d \"%s\", want \"%s\"", doc, rc, err.msg, b[k].msg);
        if (discovery) /* nothing left allocated */
            assert_true(!d.gpus && !d.topology && !d.rails && !d.ib_ports);
        else
            assert_true(!h.gpus && !h.reasons.v);
        json_decref(in);
    }
}

static void each_bad_discovery_member_is_named(void **state)
{
    (void)state;
    static const bad BAD[] = {
        {"\"cpus\":224,", "", "discovery.cpus: required"},
        {"\"cpus\":224", "\"cpus\":-1", "discovery.cpus: must be an integer >= 0"},
        {"\"driver_version\":\"550.54.15\"", "\"driver_version\":550",
         "discovery.driver_version: must be a string"},
        {"\"gpus\":[{", "\"gpus\":[1,{", "discovery.gpus[0]: must be an object"},
        {"\"uuid\":\"GPU-0\",", "", "discovery.gpus[0].uuid: required"},
        {"\"model\":\"A100-40GB\"", "\"model\":7", "discovery.gpus[0].model: must be a string"},
        {"\"remote_type\":\"switch\"", "\"remote_type\":\"cpu\"",
         "discovery.gpus[0].nvlinks[1].remote_type: must be one of gpu, switch"},
        {"\"up\":true", "\"up\":1", "discovery.gpus[0].nvlinks[0].up: must be true or false"},
        {"\"pending\":false,", "", "discovery.gpus[0].mig.pending: required"},
        {"\"mig\":{", "\"mig\":7,\"m\":{", "discovery.gpus[0].mig: must be an object"},
        {"\"placement\":{\"start\":0,\"size\":1},\"compute",
         "\"placement\":{\"start\":0},\"compute",
         "discovery.gpus[0].mig.instances[0].placement.size: required"},
        {"\"uuid\":\"MIG-1\"", "\"uuid\":null",
         "discovery.gpus[0].mig.instances[0].compute_instances[0].uuid: must be a string"},
        {"\"error\":\"GPU is lost\"", "\"error\":false",
         "discovery.gpus[1].error: must be a string"},
        {"[\"NV12\",\"X\"]", "[\"NV12\",2]", "discovery.topology[1][1]: must be a string"},
        {"\"topology\":[[", "\"topology\":[3,[",
         "discovery.topology[0]: must be a list of strings"},
        {"\"net_addr\":\"10.1.0.7\"", "\"net_addr\":[]", "discovery.net_addr: must be a string"},
        {"{\"gpu\":0,", "{", "discovery.rails[0].gpu: required"},
        {"\"guid\":\"0x0002c90300a1b2c1\"", "\"guid\":1",
         "discovery.ib_ports[0].guid: must be a string"},
    };
    refuse_each(DISCOVERY, BAD, sizeof BAD / sizeof *BAD, true);
}

static void each_bad_health_member_is_named(void **state)
{
    (void)state;
    static const bad BAD[] = {
        {"\"verdict\":\"failed\",\"xid", "\"xid", "health.verdict: required"},
        {"\"verdict\":\"failed\",\"xid", "\"verdict\":\"ill\",\"xid",
         "health.verdict: must be one of healthy, degraded, failed"},
        {"\"xid_monitored\":true", "\"xid_monitored\":\"yes\"",
         "health.xid_monitored: must be true or false"},
        {"\"reasons\":[\"gpu 1", "\"reasons\":[7,\"gpu 1", "health.reasons[0]: must be a string"},
        {"\"gpus\":[{", "\"gpus\":7,\"x\":[{", "health.gpus: must be a list"},
        {"{\"index\":0,", "{", "health.gpus[0].index: required"},
        {"\"temperature_c\":41", "\"temperature_c\":41.5",
         "health.gpus[0].temperature_c: must be an integer"},
        {"\"util_gpu_pct\":-1,\"reasons\":[]", "\"util_gpu_pct\":-1",
         "health.gpus[0].reasons: required"},
        {"\"message\":\"fell off\"", "\"message\":{}",
         "health.gpus[1].reasons[0].message: must be a string"},
        {"{\"code\":\"xid-79\",", "{", "health.gpus[1].reasons[0].code: required"},
    };
    refuse_each(HEALTH, BAD, sizeof BAD / sizeof *BAD, false);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_discovery_round_trips_byte_for_byte),
        cmocka_unit_test(a_health_round_trips_byte_for_byte),
        cmocka_unit_test(an_older_agents_null_model_is_read),
        cmocka_unit_test(each_bad_discovery_member_is_named),
        cmocka_unit_test(each_bad_health_member_is_named),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
