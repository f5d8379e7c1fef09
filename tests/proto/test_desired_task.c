/*
 * test_desired_task.c - the agent protocol's desired task codec
 * (src/proto/desired_task.c): a document with every member, in the order
 * tesserad writes them, decodes and encodes back byte for byte; the members
 * read as typed values (lists, objects, null workdir and uid, secret values
 * with NUL bytes); each wrong member is refused with its path and reason;
 * a task refused whole is still read for what names it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "tessera/agent_proto.h"

/* Every member, as agents_desired.c, net.c, secrets_api.c and steps.c write them. */
static const char FULL[] =
    "{\"job\":42,\"rank\":1,\"name\":\"train\",\"action\":\"stop\",\"gpus\":[0,3],"
    "\"gpu_milli\":500,\"cpu_milli\":32000,\"memory_mib\":262144,\"mig_profile\":-1,"
    "\"mig_start\":-1,\"command\":[\"python\",\"train.py\"],\"env\":[\"A=1\",\"B=2\"],"
    "\"workdir\":\"/home/alice\",\"user\":\"alice\",\"world_size\":8,\"local_rank\":1,"
    "\"master_addr\":\"10.8.0.2\",\"tenant\":\"team-a\",\"master_port\":29542,\"grace_s\":60.0,"
    "\"run\":1764400000.5,\"interactive\":{\"tty\":true,\"rows\":40,\"cols\":120},"
    "\"image\":\"reg/x:1\",\"container_user\":\"1000\",\"mounts\":[{\"host\":\"/data\","
    "\"path\":\"/mnt/data\",\"write\":false}],\"data\":[{\"ref\":\"ds:1\",\"path\":\"/ds\"}],"
    "\"hold\":true,\"step_token\":\"tok\",\"checkpoint_dir\":\"/ck/team-a/42\","
    "\"secrets\":[{\"env\":\"KEY\",\"value\":\"a\\u0000b\"},{\"file\":\"/run/k\",\"value\":\"v\"}],"
    "\"image_credentials\":\"u:p\\u0000\",\"secrets_error\":\"no secret\","
    "\"gpu_memory_mib\":8192,\"nccl_tc\":41,\"nccl_sl\":3,\"uid\":2001,\"allow_root\":false,"
    "\"uid_range\":[1000,2000],\"net\":{\"vni\":4097,\"addr\":\"10.8.0.3\",\"prefix\":16,"
    "\"peers\":[\"192.0.2.1\"],\"mtu\":1450,\"nics\":\"dedicated\",\"publish\":[\"7200/tcp\"],"
    "\"publish_from\":[\"10.0.0.0/8\"]},\"ib_pkey\":32770,\"signal\":10,\"time_limit_s\":3600.0,"
    "\"deadline\":1764403600.5,\"limit_signal\":15,\"limit_grace_s\":30.0,\"hard\":true,"
    "\"idle_warning\":\"idle\",\"step\":2,\"task_rank\":5}";

static json_t *parse(const char *text)
{
    json_error_t je;
    json_t *o = json_loads(text, JSON_ALLOW_NUL, &je);
    if (!o)
        fail_msg("%s", je.text);
    return o;
}

static void every_member_round_trips_byte_for_byte(void **state)
{
    (void)state;
    json_t *in = parse(FULL);
    ts_desired_task t;
    ts_err err;
    assert_int_equal(ts_desired_task_decode(in, "tasks[0]", &t, &err), 0);
    assert_int_equal(t.present, TS_DT_BIT(TS_DT_NFIELDS) - 1); /* every member */
    assert_int_equal(t.job, 42);
    assert_int_equal(t.action, TS_ACTION_STOP);
    assert_int_equal(t.gpus.n, 2);
    assert_int_equal(t.gpus.v[1], 3);
    assert_string_equal(t.command.v[1], "train.py");
    assert_int_equal(t.interactive.rows, 40);
    assert_true(t.mounts[0].host && !t.mounts[0].write);
    assert_int_equal(t.secrets[0].value_len, 3);
    assert_memory_equal(t.secrets[0].value, "a\0b", 3);
    assert_null(t.secrets[0].file);
    assert_int_equal(t.image_credentials_len, 4);
    assert_int_equal(t.uid_range.v[1], 2000);
    assert_true(t.net.nics_dedicated && t.net.mtu == 1450 && t.net.prefix == 16);
    assert_string_equal(t.net.publish_from.v[0], "10.0.0.0/8");
    assert_true(t.hard && t.hold);
    assert_int_equal(t.step, 2);
    json_t *out = ts_desired_task_encode(&t);
    assert_non_null(out);
    char *text = json_dumps(out, JSON_COMPACT);
    assert_string_equal(text, FULL);
    free(text);
    json_decref(out);
    ts_desired_task_fini(&t);
    json_decref(in);
}

/* The least a task carries; null workdir and uid stay null. */
static void least_task_and_nulls(void **state)
{
    (void)state;
    static const char DOC[] = "{\"job\":1,\"rank\":0,\"action\":\"run\",\"workdir\":null,"
                              "\"uid\":null}";
    json_t *in = parse(DOC);
    ts_desired_task t;
    assert_int_equal(ts_desired_task_decode(in, NULL, &t, NULL), 0);
    assert_true(t.present & TS_DT_BIT(TS_DT_WORKDIR));
    assert_null(t.workdir);
    assert_true(t.uid_null);
    assert_false(t.present & TS_DT_BIT(TS_DT_STEP));
    json_t *out = ts_desired_task_encode(&t);
    char *text = json_dumps(out, JSON_COMPACT);
    assert_string_equal(text, DOC);
    free(text);
    json_decref(out);
    ts_desired_task_fini(&t);
    json_decref(in);
}

static void each_bad_member_is_named(void **state)
{
    (void)state;
    static const struct {
        const char *doc, *msg;
    } BAD[] = {
        {"{\"rank\":0,\"action\":\"run\"}", "tasks[1].job: required"},
        {"{\"job\":1,\"rank\":0}", "tasks[1].action: required"},
        {"{\"job\":1,\"rank\":0,\"action\":\"pause\"}", "tasks[1].action: must be one of run, stop"},
        {"{\"job\":1,\"rank\":0,\"action\":\"run\",\"gpus\":[0,-1]}",
         "tasks[1].gpus[1]: must be an integer >= 0"},
        {"{\"job\":1,\"rank\":0,\"action\":\"run\",\"gpus\":3}",
         "tasks[1].gpus: must be a list of integers"},
        {"{\"job\":1,\"rank\":0,\"action\":\"run\",\"command\":[\"a\",1]}",
         "tasks[1].command[1]: must be a string"},
        {"{\"job\":1,\"rank\":0,\"action\":\"run\",\"world_size\":0}",
         "tasks[1].world_size: must be an integer in 1..2147483647"},
        {"{\"job\":1,\"rank\":0,\"action\":\"run\",\"master_port\":70000}",
         "tasks[1].master_port: must be an integer in 1..65535"},
        {"{\"job\":1,\"rank\":0,\"action\":\"run\",\"grace_s\":-1}",
         "tasks[1].grace_s: must be a number >= 0"},
        {"{\"job\":1,\"rank\":0,\"action\":\"run\",\"workdir\":3}", "tasks[1].workdir: must be a string"},
        {"{\"job\":1,\"rank\":0,\"action\":\"run\",\"uid\":\"0\"}", "tasks[1].uid: must be an integer"},
        {"{\"job\":1,\"rank\":0,\"action\":\"run\",\"allow_root\":1}",
         "tasks[1].allow_root: must be true or false"},
        {"{\"job\":1,\"rank\":0,\"action\":\"run\",\"uid_range\":[1]}",
         "tasks[1].uid_range: must be two integers (lowest, highest)"},
        {"{\"job\":1,\"rank\":0,\"action\":\"run\",\"hold\":false}",
         "tasks[1].hold: must be true when present"},
        {"{\"job\":1,\"rank\":0,\"action\":\"run\",\"interactive\":{}}",
         "tasks[1].interactive.tty: required"},
        {"{\"job\":1,\"rank\":0,\"action\":\"run\",\"mounts\":[{\"host\":\"/a\",\"path\":\"/b\"}]}",
         "tasks[1].mounts[0].write: required"},
        {"{\"job\":1,\"rank\":0,\"action\":\"run\",\"data\":[7]}", "tasks[1].data[0]: must be an object"},
        {"{\"job\":1,\"rank\":0,\"action\":\"run\",\"secrets\":[{\"env\":\"K\"}]}",
         "tasks[1].secrets[0].value: required"},
        {"{\"job\":1,\"rank\":0,\"action\":\"run\",\"net\":{\"vni\":1,\"addr\":\"a\",\"prefix\":33,"
         "\"peers\":[]}}", "tasks[1].net.prefix: must be an integer in 1..32"},
        {"{\"job\":1,\"rank\":0,\"action\":\"run\",\"net\":{\"vni\":1,\"addr\":\"a\",\"prefix\":8}}",
         "tasks[1].net.peers: required"},
        {"{\"job\":1,\"rank\":0,\"action\":\"run\",\"net\":{\"vni\":1,\"addr\":\"a\",\"prefix\":8,"
         "\"peers\":[],\"nics\":\"shared\"}}", "tasks[1].net.nics: must be \"dedicated\" when present"},
        {"{\"job\":1,\"rank\":0,\"action\":\"run\",\"signal\":0}",
         "tasks[1].signal: must be an integer in 1..2147483647"},
        {"{\"job\":1,\"rank\":0,\"action\":\"run\",\"step\":-1}",
         "tasks[1].step: must be an integer in 0..2147483647"},
    };
    for (size_t k = 0; k < sizeof BAD / sizeof *BAD; k++) {
        json_t *in = parse(BAD[k].doc);
        ts_desired_task t;
        ts_err err = {0};
        int rc = ts_desired_task_decode(in, "tasks[1]", &t, &err);
        if (rc != TS_EINVAL || strcmp(err.msg, BAD[k].msg) != 0)
            fail_msg("%s: got %d \"%s\", want \"%s\"", BAD[k].doc, rc, err.msg, BAD[k].msg);
        assert_null(t.gpus.v); /* nothing left allocated */
        json_decref(in);
    }
}

/* A task refused as a whole is still named by its job, rank, step and run,
 * read through the same table; what names it wrong is refused as before. */
static void a_refused_task_is_named_by_its_id(void **state)
{
    (void)state;
    json_t *in = parse("{\"job\":6,\"rank\":2,\"action\":\"pause\",\"world_size\":0,"
                       "\"gpus\":\"x\",\"step\":3,\"run\":17.5}");
    ts_desired_task t;
    assert_int_equal(ts_desired_task_decode(in, "tasks[1]", &t, NULL), TS_EINVAL);
    assert_int_equal(ts_desired_task_decode_id(in, "tasks[1]", &t, NULL), 0);
    assert_int_equal(t.present, TS_DT_ID_BITS);
    assert_int_equal(t.job, 6);
    assert_int_equal(t.rank, 2);
    assert_int_equal(t.step, 3);
    assert_true(t.run == 17.5);
    assert_null(t.gpus.v); /* the other members are not read */
    json_decref(in);
    static const struct {
        const char *doc, *msg;
    } BAD[] = {
        {"{\"rank\":0}", "tasks[1].job: required"},
        {"{\"job\":0,\"rank\":0}", "tasks[1].job: must be an integer >= 1"},
        {"{\"job\":1,\"rank\":0,\"step\":\"2\"}",
         "tasks[1].step: must be an integer in 0..2147483647"},
        {"{\"job\":1,\"rank\":0,\"run\":\"now\"}", "tasks[1].run: must be a number"},
    };
    for (size_t k = 0; k < sizeof BAD / sizeof *BAD; k++) {
        in = parse(BAD[k].doc);
        ts_err err = {0};
        int rc = ts_desired_task_decode_id(in, "tasks[1]", &t, &err);
        if (rc != TS_EINVAL || strcmp(err.msg, BAD[k].msg) != 0 || t.present != 0)
            fail_msg("%s: got %d \"%s\", want \"%s\"", BAD[k].doc, rc, err.msg, BAD[k].msg);
        json_decref(in);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_member_round_trips_byte_for_byte),
        cmocka_unit_test(least_task_and_nulls),
        cmocka_unit_test(each_bad_member_is_named),
        cmocka_unit_test(a_refused_task_is_named_by_its_id),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
