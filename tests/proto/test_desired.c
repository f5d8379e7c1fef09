/*
 * test_desired.c - the agent protocol's answer codec (src/proto/desired.c):
 * an answer with every member, in the order tesserad writes them, decodes
 * and encodes back byte for byte; the members read as typed values (MIG
 * layouts, prefetch, the networks' peers and services, output requests,
 * sessions); the members a sync renews replace the kept answer's in place;
 * each wrong member is refused with its path and reason.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "tessera/agent_proto.h"

/* Every member, as agents_desired.c, net.c, agents.c and sessions.c write them. */
static const char FULL[] =
    "{\"drained\":false,\"lost_after_s\":60.0,\"tasks\":[{\"job\":7,\"rank\":0,\"action\":\"run\"}],"
    "\"mig\":[{\"gpu\":2,\"layout\":[{\"profile\":19,\"start\":0},{\"profile\":14,\"start\":4}]}],"
    "\"prefetch\":[{\"job\":9,\"image\":\"reg/x:1\",\"rate_bytes_s\":62500000}],"
    "\"net_peers\":[\"192.0.2.1\",\"192.0.2.2\"],\"net_services\":[\"10.0.0.5:53/udp\"],"
    "\"net_tenant_services\":[{\"vni\":4097,\"to\":\"10.0.0.6:443/tcp\"}],\"gen\":12,"
    "\"now\":1764400000.5,\"logs\":[{\"id\":3,\"job\":7,\"rank\":0,\"stream\":\"stderr\","
    "\"tail\":4096,\"offset\":8192}],\"sessions\":[{\"kind\":\"exec\",\"rank\":0,\"tty\":true,\"command\":[\"sh\","
    "\"-c\",\"ls\"],\"rows\":40,\"cols\":120,\"job\":7,\"id\":\"ab12\",\"secret\":\"s3\"},"
    "{\"kind\":\"forward\",\"rank\":1,\"tty\":false,\"port\":8888,\"job\":7,\"id\":\"cd34\","
    "\"secret\":\"s4\"}]}";

/* The least an answer carries. */
static const char LEAST[] = "{\"drained\":true,\"lost_after_s\":30.0,\"tasks\":[],\"mig\":[],"
                            "\"gen\":0,\"now\":1.5,\"logs\":[],\"sessions\":[]}";

static json_t *parse(const char *text)
{
    json_error_t je;
    json_t *o = json_loads(text, 0, &je);
    if (!o)
        fail_msg("%s", je.text);
    return o;
}

static char *dump(const json_t *o)
{
    return json_dumps(o, JSON_COMPACT);
}

static void every_member_round_trips_byte_for_byte(void **state)
{
    (void)state;
    json_t *in = parse(FULL);
    ts_desired d;
    ts_err err;
    assert_int_equal(ts_desired_decode(in, &d, &err), 0);
    assert_int_equal(d.present, TS_DS_BIT(TS_DS_NFIELDS) - 1); /* every member */
    assert_false(d.drained);
    assert_int_equal(json_array_size(d.tasks), 1);
    assert_int_equal(d.nmig, 1);
    assert_int_equal(d.mig[0].gpu, 2);
    assert_int_equal(d.mig[0].nlayout, 2);
    assert_int_equal(d.mig[0].layout[1].profile, 14);
    assert_int_equal(d.mig[0].layout[1].start, 4);
    assert_int_equal(d.prefetch[0].rate_bytes_s, 62500000);
    assert_string_equal(d.net_peers.v[1], "192.0.2.2");
    assert_int_equal(d.net_tenant_services[0].vni, 4097);
    assert_int_equal(d.gen, 12);
    assert_true(d.logs[0].is_stderr);
    assert_int_equal(d.logs[0].tail, 4096);
    assert_int_equal(d.nsessions, 2);
    assert_int_equal(d.sessions[0].kind, TS_SESSION_EXEC);
    assert_string_equal(d.sessions[0].command.v[2], "ls");
    assert_int_equal(d.sessions[1].kind, TS_SESSION_FORWARD);
    assert_int_equal(d.sessions[1].port, 8888);
    assert_false(d.sessions[1].has_command);
    assert_string_equal(d.sessions[1].secret, "s4");
    json_t *out = ts_desired_encode(&d);
    assert_non_null(out);
    char *text = dump(out);
    assert_string_equal(text, FULL);
    free(text);
    json_decref(out);
    ts_desired_fini(&d);
    json_decref(in);
}

static void least_answer_round_trips(void **state)
{
    (void)state;
    json_t *in = parse(LEAST);
    ts_desired d;
    assert_int_equal(ts_desired_decode(in, &d, NULL), 0);
    assert_true(d.drained);
    assert_false(d.present & TS_DS_BIT(TS_DS_PREFETCH));
    assert_int_equal(d.nsessions, 0);
    json_t *out = ts_desired_encode(&d);
    char *text = dump(out);
    assert_string_equal(text, LEAST);
    free(text);
    json_decref(out);
    ts_desired_fini(&d);
    json_decref(in);
}

/* The controller keeps a node's answer and renews gen, now, logs and
 * sessions on each sync: in their places, the rest untouched. */
static void renewed_members_replace_in_place(void **state)
{
    (void)state;
    json_t *kept = parse(LEAST);
    ts_desired_log log = {.id = 5, .job = 8, .rank = 2, .tail = 10};
    ts_desired d = {.present = TS_DS_BIT(TS_DS_GEN) | TS_DS_BIT(TS_DS_NOW) |
                               TS_DS_BIT(TS_DS_LOGS),
                    .gen = 13,
                    .now = 2.5,
                    .logs = &log,
                    .nlogs = 1};
    assert_int_equal(ts_desired_encode_into(&d, kept), 0);
    char *text = dump(kept);
    assert_string_equal(text, "{\"drained\":true,\"lost_after_s\":30.0,\"tasks\":[],\"mig\":[],"
                              "\"gen\":13,\"now\":2.5,\"logs\":[{\"id\":5,\"job\":8,\"rank\":2,"
                              "\"stream\":\"stdout\",\"tail\":10}],\"sessions\":[]}");
    free(text);
    json_decref(kept);
}

static void each_bad_member_is_named(void **state)
{
    (void)state;
    static const struct {
        const char *from, *to, *msg; /* FULL with `from` replaced by `to` */
    } BAD[] = {
        {"\"drained\":false", "\"drained\":0", "drained: must be true or false"},
        {"\"lost_after_s\":60.0", "\"lost_after_s\":0", "lost_after_s: must be a number > 0"},
        {"\"tasks\":[{\"job\":7,\"rank\":0,\"action\":\"run\"}]", "\"tasks\":{}",
         "tasks: must be an array"},
        {"\"gpu\":2,", "", "mig[0].gpu: required"},
        {"{\"profile\":19,\"start\":0}", "{\"profile\":19,\"start\":\"0\"}",
         "mig[0].layout[0].start: must be an integer in -2147483648..2147483647"},
        {"\"rate_bytes_s\":62500000", "\"rate_bytes_s\":0",
         "prefetch[0].rate_bytes_s: must be an integer >= 1"},
        {"\"image\":\"reg/x:1\",", "", "prefetch[0].image: required"},
        {"\"net_peers\":[\"192.0.2.1\",", "\"net_peers\":[1,", "net_peers[0]: must be a string"},
        {"\"to\":\"10.0.0.6:443/tcp\"", "\"to\":7", "net_tenant_services[0].to: must be a string"},
        {"\"gen\":12", "\"gen\":-1", "gen: must be an integer >= 0"},
        {"\"stream\":\"stderr\"", "\"stream\":\"stdin\"",
         "logs[0].stream: must be one of stdout, stderr"},
        {"\"tail\":4096", "\"tail\":-1", "logs[0].tail: must be an integer >= 0"},
        {"\"offset\":8192", "\"offset\":\"0\"", "logs[0].offset: must be an integer >= 0"},
        {"\"kind\":\"exec\"", "\"kind\":\"shell\"",
         "sessions[0].kind: must be one of attach, exec, forward"},
        {"\"port\":8888", "\"port\":70000", "sessions[1].port: must be an integer in 1..65535"},
        {",\"secret\":\"s4\"", "", "sessions[1].secret: required"},
        {"\"command\":[\"sh\",", "\"command\":[2,", "sessions[0].command[0]: must be a string"},
    };
    for (size_t k = 0; k < sizeof BAD / sizeof *BAD; k++) {
        const char *at = strstr(FULL, BAD[k].from);
        assert_non_null(at);
        char doc[sizeof FULL + 64];
        snprintf(doc, sizeof doc, "%.*s%s%s", (int)(at - FULL), FULL, BAD[k].to,
                 at + strlen(BAD[k].from));
        json_t *in = parse(doc);
        ts_desired d;
        ts_err err = {0};
        int rc = ts_desired_decode(in, &d, &err);
        if (rc != TS_EINVAL || strcmp(err.msg, BAD[k].msg) != 0)
            fail_msg("%s: got %d \"%s\", want \"%s\"", doc, rc, err.msg, BAD[k].msg);
        assert_null(d.mig); /* nothing left allocated */
        assert_null(d.sessions);
        json_decref(in);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_member_round_trips_byte_for_byte),
        cmocka_unit_test(least_answer_round_trips),
        cmocka_unit_test(renewed_members_replace_in_place),
        cmocka_unit_test(each_bad_member_is_named),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
