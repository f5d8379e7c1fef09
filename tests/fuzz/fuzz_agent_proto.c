/*
 * fuzz_agent_proto.c - libFuzzer target for the agent protocol's codec
 * (tessera/agent_proto.h, src/proto): the decoders tesserad runs on every
 * task report, discovery and health an agent sends, and the agent on every
 * desired task.
 *
 * The bytes are read as JSON; an object goes to each decoder, which must
 * never crash, leak or accept what they then cannot write. On failure the
 * error names a field (a "tasks[0]", "discovery" or "health" path) in one
 * line. On success the value
 * is encoded, decoded again and encoded again: the two encodings must be
 * equal (what the decoder accepts, the encoder writes, and the decoder
 * reads back to the same value). Seeds: the JSON files of tests/data/agent.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tessera/agent_proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* An error names where it is and holds no line break (the log and the
 * agent's report carry it as one line). */
static void check_error_at(const ts_err *e, const char *where)
{
    if (strncmp(e->msg, where, strlen(where)) != 0 || strchr(e->msg, '\n'))
        abort();
}

static void check_error(const ts_err *e)
{
    check_error_at(e, "tasks[0]");
}

static void report_round_trip(const json_t *o)
{
    ts_task_report r, back;
    ts_err e;
    if (ts_task_report_decode(o, "tasks[0]", &r, &e) != 0) {
        check_error(&e);
        return;
    }
    json_t *one = ts_task_report_encode(&r);
    if (!one)
        return; /* out of memory */
    if (ts_task_report_decode(one, "tasks[0]", &back, &e) != 0)
        abort(); /* written, then refused */
    json_t *two = ts_task_report_encode(&back);
    if (two && !json_equal(one, two))
        abort();
    json_decref(two);
    json_decref(one);
}

static void desired_round_trip(const json_t *o)
{
    ts_desired_task t, back;
    ts_err e;
    if (ts_desired_task_decode(o, "tasks[0]", &t, &e) != 0) {
        check_error(&e);
        return;
    }
    json_t *one = ts_desired_task_encode(&t);
    ts_desired_task_fini(&t);
    if (!one)
        return;
    if (ts_desired_task_decode(one, "tasks[0]", &back, &e) != 0)
        abort();
    json_t *two = ts_desired_task_encode(&back);
    ts_desired_task_fini(&back);
    if (two && !json_equal(one, two))
        abort();
    json_decref(two);
    json_decref(one);
}

static void discovery_round_trip(const json_t *o)
{
    ts_discovery d, back;
    ts_err e;
    if (ts_discovery_decode(o, "discovery", &d, &e) != 0) {
        check_error_at(&e, "discovery");
        return;
    }
    json_t *one = ts_discovery_encode(&d);
    ts_discovery_fini(&d);
    if (!one)
        return;
    if (ts_discovery_decode(one, "discovery", &back, &e) != 0)
        abort();
    json_t *two = ts_discovery_encode(&back);
    ts_discovery_fini(&back);
    if (two && !json_equal(one, two))
        abort();
    json_decref(two);
    json_decref(one);
}

static void health_round_trip(const json_t *o)
{
    ts_node_health h, back;
    ts_err e;
    if (ts_node_health_decode(o, "health", &h, &e) != 0) {
        check_error_at(&e, "health");
        return;
    }
    json_t *one = ts_node_health_encode(&h);
    ts_node_health_fini(&h);
    if (!one)
        return;
    if (ts_node_health_decode(one, "health", &back, &e) != 0)
        abort();
    json_t *two = ts_node_health_encode(&back);
    ts_node_health_fini(&back);
    if (two && !json_equal(one, two))
        abort();
    json_decref(two);
    json_decref(one);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *o = json_loadb((const char *)data, size, JSON_ALLOW_NUL, NULL);
    if (!o)
        return 0;
    report_round_trip(o);
    desired_round_trip(o);
    discovery_round_trip(o);
    health_round_trip(o);
    json_decref(o);
    return 0;
}
