/*
 * test_sync.c - the agent protocol's register and sync body codec
 * (src/proto/sync.c): a sync with every member and a registration, in the
 * order the agent writes them, decode and encode back byte for byte; the
 * members read as typed values (prefetch states, the image store, output
 * answers with NUL bytes); each wrong member is refused with its path and
 * reason.
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

static const char SYNC[] =
    "{\"node\":\"n-1\",\"gen\":4,\"tasks\":[{\"job\":7,\"rank\":0,\"state\":\"running\"}],"
    "\"wait_s\":1.5,\"seq\":9,\"health\":{\"verdict\":\"healthy\",\"reasons\":[]},"
    "\"mig_error\":\"gpu 0: busy\",\"drain\":\"prolog failed\",\"prefetch\":[{\"job\":8,"
    "\"state\":\"fetching\"},{\"job\":9,\"state\":\"ready\"}],\"images\":[{\"digest\":"
    "\"sha256:ab\",\"refs\":[\"reg/x:1\",\"reg/x:2\"],\"bytes\":1048576}],\"logs\":[{\"id\":3,"
    "\"data\":\"a\\u0000b\\n\",\"size\":4,\"offset\":96,\"note\":\"cut\"},{\"id\":4,\"error\":\"no such task\"}],"
    "\"agent\":\"m1:2049:131\",\"leaving\":true}";

static const char REGISTER[] =
    "{\"node\":\"n-1\",\"discovery\":{\"cpus\":2,\"memory_bytes\":4096,\"driver_version\":\"\","
    "\"gpus\":[],\"topology\":[],\"net_addr\":\"10.0.0.1\"},\"tasks\":[],\"seq\":1,"
    "\"agent\":\"m1:2049:131\"}";

static json_t *parse(const char *text)
{
    json_error_t je;
    json_t *o = json_loads(text, JSON_ALLOW_NUL, &je);
    if (!o)
        fail_msg("%s", je.text);
    return o;
}

static void round_trip(const char *doc, ts_sync *s)
{
    json_t *in = parse(doc);
    ts_err err;
    assert_int_equal(ts_sync_decode(in, s, &err), 0);
    json_t *out = ts_sync_encode(s);
    assert_non_null(out);
    char *text = json_dumps(out, JSON_COMPACT);
    assert_string_equal(text, doc);
    free(text);
    json_decref(out);
    json_decref(in); /* s's strings are gone: only its numbers are read after */
}

static void a_sync_round_trips_byte_for_byte(void **state)
{
    (void)state;
    json_t *in = parse(SYNC);
    ts_sync s;
    assert_int_equal(ts_sync_decode(in, &s, NULL), 0);
    assert_int_equal(s.present, TS_SY_BIT(TS_SY_NFIELDS) - 1 - TS_SY_BIT(TS_SY_DISCOVERY));
    assert_string_equal(s.node, "n-1");
    assert_int_equal(s.gen, 4);
    assert_int_equal(json_array_size(s.tasks), 1);
    assert_int_equal(s.health->verdict, TS_VERDICT_HEALTHY);
    assert_int_equal(s.health->reasons.n, 0);
    assert_string_equal(s.drain, "prolog failed");
    assert_int_equal(s.nprefetch, 2);
    assert_int_equal(s.prefetch[1].state, TS_PREFETCH_READY);
    assert_int_equal(s.images[0].refs.n, 2);
    assert_int_equal(s.images[0].bytes, 1048576);
    assert_int_equal(s.logs[0].data_len, 4);
    assert_memory_equal(s.logs[0].data, "a\0b\n", 4);
    assert_true(s.logs[0].has_size);
    assert_true(s.logs[0].has_offset);
    assert_int_equal(s.logs[0].offset, 96);
    assert_null(s.logs[1].data);
    assert_string_equal(s.logs[1].error, "no such task");
    ts_sync_fini(&s);
    json_decref(in);
    round_trip(SYNC, &s);
    ts_sync_fini(&s);
}

static void a_registration_round_trips(void **state)
{
    (void)state;
    ts_sync s;
    round_trip(REGISTER, &s);
    assert_int_equal(s.seq, 1);
    assert_int_equal(s.discovery->cpus, 2);
    ts_sync_fini(&s);
    /* no discovery (an agent without NVML's answer yet): null */
    json_t *in = parse("{\"node\":\"n-1\",\"discovery\":null,\"tasks\":[]}");
    assert_int_equal(ts_sync_decode(in, &s, NULL), 0);
    assert_null(s.discovery);
    assert_true(s.present & TS_SY_BIT(TS_SY_DISCOVERY));
    json_t *out = ts_sync_encode(&s);
    assert_true(json_is_null(json_object_get(out, "discovery")));
    json_decref(out);
    ts_sync_fini(&s);
    json_decref(in);
    /* a discovery outside the protocol is refused by its path, nothing kept */
    in = parse("{\"node\":\"n-1\",\"discovery\":{\"gpus\":4},\"tasks\":[]}");
    ts_err err = {0};
    assert_int_equal(ts_sync_decode(in, &s, &err), TS_EINVAL);
    assert_string_equal(err.msg, "discovery.gpus: must be a list");
    assert_null(s.discovery);
    json_decref(in);
}

static void each_bad_member_is_named(void **state)
{
    (void)state;
    static const struct {
        const char *from, *to, *msg; /* SYNC with `from` replaced by `to` */
    } BAD[] = {
        {"\"node\":\"n-1\"", "\"node\":1", "node: must be a string"},
        {"\"gen\":4", "\"gen\":-4", "gen: must be an integer >= 0"},
        {"\"tasks\":[{\"job\":7,\"rank\":0,\"state\":\"running\"}]", "\"tasks\":{}",
         "tasks: must be an array"},
        {"\"wait_s\":1.5", "\"wait_s\":-1", "wait_s: must be a number >= 0"},
        {"\"seq\":9", "\"seq\":0", "seq: must be an integer >= 1"},
        {"\"health\":{\"verdict\":\"healthy\",\"reasons\":[]}", "\"health\":[]",
         "health: must be an object"},
        {"\"health\":{\"verdict\":\"healthy\",", "\"health\":{", "health.verdict: required"},
        {"\"verdict\":\"healthy\"", "\"verdict\":\"fine\"",
         "health.verdict: must be one of healthy, degraded, failed"},
        {"\"drain\":\"prolog failed\"", "\"drain\":true", "drain: must be a string"},
        {"\"state\":\"fetching\"", "\"state\":\"paused\"",
         "prefetch[0].state: must be one of fetching, ready, failed"},
        {"{\"job\":9,", "{", "prefetch[1].job: required"},
        {"\"bytes\":1048576", "\"bytes\":-1", "images[0].bytes: must be an integer >= 0"},
        {"\"refs\":[\"reg/x:1\",", "\"refs\":[1,", "images[0].refs[0]: must be a string"},
        {"{\"id\":4,", "{", "logs[1].id: required"},
        {"\"size\":4", "\"size\":\"4\"", "logs[0].size: must be an integer >= 0"},
    };
    for (size_t k = 0; k < sizeof BAD / sizeof *BAD; k++) {
        const char *at = strstr(SYNC, BAD[k].from);
        assert_non_null(at);
        char doc[sizeof SYNC + 64];
        snprintf(doc, sizeof doc, "%.*s%s%s", (int)(at - SYNC), SYNC, BAD[k].to,
                 at + strlen(BAD[k].from));
        json_t *in = parse(doc);
        ts_sync s;
        ts_err err = {0};
        int rc = ts_sync_decode(in, &s, &err);
        if (rc != TS_EINVAL || strcmp(err.msg, BAD[k].msg) != 0)
            fail_msg("%s: got %d \"%s\", want \"%s\"", doc, rc, err.msg, BAD[k].msg);
        assert_null(s.prefetch); /* nothing left allocated */
        assert_null(s.images);
        json_decref(in);
    }
}

/* The bodies are the top of a request: a body that is no object is called
 * that, not by an empty path, and so is an answer (proto_msg's root). */
static void a_body_that_is_no_object_is_named(void **state)
{
    (void)state;
    json_t *in = parse("[1]");
    ts_sync s;
    ts_err err = {0};
    assert_int_equal(ts_sync_decode(in, &s, &err), TS_EINVAL);
    assert_string_equal(err.msg, "body: must be an object");
    ts_desired d;
    assert_int_equal(ts_desired_decode(in, &d, &err), TS_EINVAL);
    assert_string_equal(err.msg, "answer: must be an object");
    assert_null(d.mig);
    json_decref(in);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_sync_round_trips_byte_for_byte),
        cmocka_unit_test(a_registration_round_trips),
        cmocka_unit_test(each_bad_member_is_named),
        cmocka_unit_test(a_body_that_is_no_object_is_named),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
