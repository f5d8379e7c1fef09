/*
 * test_task_report.c - the agent protocol's task report codec
 * (src/proto/task_report.c): every field survives encode then decode, the
 * documents the agent sends decode and encode back to the same JSON, and each
 * field of the wrong type or out of its range is refused with its path and
 * the reason, as docs/agent-protocol.schema.json's task_report has it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "tessera/agent_proto.h"

static json_t *parse(const char *text)
{
    json_error_t je;
    json_t *o = json_loads(text, 0, &je);
    assert_non_null(o);
    return o;
}

/* Every field set: encoded, dumped, parsed and decoded, it reads the same. */
static void every_field_round_trips(void **state)
{
    (void)state;
    ts_task_report r;
    ts_task_report_init(&r);
    r.job = 42;
    r.rank = 3;
    r.step = 7;
    r.has_run = true;
    r.run = 1764400000.5;
    r.state = TS_REPORT_STOPPED;
    r.outcome = TS_OUTCOME_CHECKPOINTED;
    r.has_exit_code = true;
    r.exit_code = -2;
    r.signal = 15;
    r.oom_kills = 2;
    r.timeout = true;
    r.has_time_limit = true;
    r.time_limit_s = 3600;
    r.ended_at = 1764400123.25;
    r.error = "could not start";
    r.launch = true;
    r.launch_end = "image_not_found";
    r.gpu_util = 37.5;
    r.step_s = 0.25;
    r.has_image_pull = true;
    r.pull_done_bytes = 1LL << 40;
    r.pull_total_bytes = (1LL << 41) + 1;
    r.pull_note = "registry: 503";
    r.has_output = true;
    r.out_stdout = "out\n";
    r.out_stderr = "caf\xc3\xa9\n";
    json_t *o = ts_task_report_encode(&r);
    assert_non_null(o);
    char *text = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    json_t *back = parse(text);
    free(text);
    ts_task_report d;
    ts_err err;
    assert_int_equal(ts_task_report_decode(back, "tasks[0]", &d, &err), 0);
    assert_int_equal(d.job, 42);
    assert_int_equal(d.rank, 3);
    assert_int_equal(d.step, 7);
    assert_true(d.has_run && d.run == r.run);
    assert_int_equal(d.state, TS_REPORT_STOPPED);
    assert_int_equal(d.outcome, TS_OUTCOME_CHECKPOINTED);
    assert_true(d.has_exit_code);
    assert_int_equal(d.exit_code, -2);
    assert_int_equal(d.signal, 15);
    assert_int_equal(d.oom_kills, 2);
    assert_true(d.timeout && d.has_time_limit && d.time_limit_s == 3600);
    assert_true(d.ended_at == 1764400123.25);
    assert_string_equal(d.error, "could not start");
    assert_true(d.launch);
    assert_string_equal(d.launch_end, "image_not_found");
    assert_true(d.gpu_util == 37.5 && d.step_s == 0.25);
    assert_true(d.has_image_pull);
    assert_int_equal(d.pull_done_bytes, 1LL << 40);
    assert_int_equal(d.pull_total_bytes, (1LL << 41) + 1);
    assert_string_equal(d.pull_note, "registry: 503");
    assert_true(d.has_output);
    assert_string_equal(d.out_stdout, "out\n");
    assert_string_equal(d.out_stderr, "caf\xc3\xa9\n");
    json_decref(back);
}

/* Nothing set but job and rank: only they are written, and the absent
 * fields decode as absent. */
static void absent_fields_stay_absent(void **state)
{
    (void)state;
    ts_task_report r;
    ts_task_report_init(&r);
    r.job = 1;
    json_t *o = ts_task_report_encode(&r);
    char *text = json_dumps(o, JSON_COMPACT);
    assert_string_equal(text, "{\"job\":1,\"rank\":0}");
    free(text);
    ts_task_report d;
    assert_int_equal(ts_task_report_decode(o, NULL, &d, NULL), 0);
    assert_int_equal(d.step, -1);
    assert_false(d.has_run || d.has_exit_code || d.timeout || d.launch || d.has_image_pull ||
                 d.has_output || d.has_time_limit);
    assert_int_equal(d.state, TS_REPORT_NONE);
    assert_int_equal(d.outcome, TS_OUTCOME_NONE);
    assert_null(d.error);
    assert_null(d.launch_end);
    assert_true(d.gpu_util < 0 && d.step_s < 0);
    json_decref(o);
}

/* The shapes the agent sends (agent.c report()) decode and encode back to
 * the same document. */
static void agent_documents_encode_back(void **state)
{
    (void)state;
    static const char *const DOCS[] = {
        "{\"job\":5,\"rank\":0,\"run\":1764400000.0,\"state\":\"running\","
        "\"gpu_util\":12.5,\"step_s\":0.75}",
        "{\"job\":5,\"rank\":1,\"state\":\"running\",\"image_pull\":{\"done_bytes\":10,"
        "\"total_bytes\":40,\"note\":\"\"}}",
        "{\"job\":5,\"rank\":2,\"state\":\"failed\",\"error\":\"no such user\","
        "\"launch\":true,\"launch_end\":\"user\"}",
        "{\"job\":5,\"rank\":3,\"step\":2,\"state\":\"exited\",\"output\":{\"stderr\":\"x\\n\"},"
        "\"exit_code\":0}",
        "{\"job\":5,\"rank\":4,\"state\":\"failed\",\"output\":{},\"exit_code\":137,"
        "\"signal\":9,\"oom_kills\":1,\"timeout\":true,\"time_limit_s\":3.0,"
        "\"ended_at\":1764400010.5}",
        "{\"job\":5,\"rank\":5,\"state\":\"stopped\",\"outcome\":\"terminated\",\"output\":{}}",
    };
    for (size_t k = 0; k < sizeof DOCS / sizeof *DOCS; k++) {
        json_t *in = parse(DOCS[k]);
        ts_task_report d;
        ts_err err;
        assert_int_equal(ts_task_report_decode(in, "tasks[0]", &d, &err), 0);
        json_t *out = ts_task_report_encode(&d);
        assert_non_null(out);
        if (!json_equal(in, out)) {
            char *a = json_dumps(in, JSON_COMPACT), *b = json_dumps(out, JSON_COMPACT);
            fail_msg("%s\nencoded back as\n%s", a, b);
        }
        json_decref(in);
        json_decref(out);
    }
}

/* Each wrong field is refused, named with its path, with the reason. */
static void each_bad_field_is_named(void **state)
{
    (void)state;
    static const struct {
        const char *doc, *msg;
    } BAD[] = {
        {"{\"rank\":0}", "tasks[2].job: required"},
        {"{\"job\":1}", "tasks[2].rank: required"},
        {"{\"job\":0,\"rank\":0}", "tasks[2].job: must be an integer >= 1"},
        {"{\"job\":\"7\",\"rank\":0}", "tasks[2].job: must be an integer >= 1"},
        {"{\"job\":1,\"rank\":-1}", "tasks[2].rank: must be an integer in 0..2147483647"},
        {"{\"job\":1,\"rank\":1.5}", "tasks[2].rank: must be an integer in 0..2147483647"},
        {"{\"job\":1,\"rank\":0,\"step\":-3}", "tasks[2].step: must be an integer in 0..2147483647"},
        {"{\"job\":1,\"rank\":0,\"run\":\"x\"}", "tasks[2].run: must be a number"},
        {"{\"job\":1,\"rank\":0,\"state\":\"done\"}",
         "tasks[2].state: must be one of running, exited, failed, stopped"},
        {"{\"job\":1,\"rank\":0,\"state\":3}",
         "tasks[2].state: must be one of running, exited, failed, stopped"},
        {"{\"job\":1,\"rank\":0,\"outcome\":\"gone\"}",
         "tasks[2].outcome: must be one of checkpointed, exited, terminated, killed, stopped"},
        {"{\"job\":1,\"rank\":0,\"exit_code\":\"1\"}",
         "tasks[2].exit_code: must be an integer in -2147483648..2147483647"},
        {"{\"job\":1,\"rank\":0,\"exit_code\":4294967296}",
         "tasks[2].exit_code: must be an integer in -2147483648..2147483647"},
        {"{\"job\":1,\"rank\":0,\"signal\":0}", "tasks[2].signal: must be an integer in 1..127"},
        {"{\"job\":1,\"rank\":0,\"signal\":2147483647}",
         "tasks[2].signal: must be an integer in 1..127"},
        {"{\"job\":1,\"rank\":0,\"oom_kills\":0}", "tasks[2].oom_kills: must be an integer >= 1"},
        {"{\"job\":1,\"rank\":0,\"timeout\":false}", "tasks[2].timeout: must be true when present"},
        {"{\"job\":1,\"rank\":0,\"time_limit_s\":null}", "tasks[2].time_limit_s: must be a number"},
        {"{\"job\":1,\"rank\":0,\"error\":5}", "tasks[2].error: must be a string"},
        {"{\"job\":1,\"rank\":0,\"launch\":1}", "tasks[2].launch: must be true when present"},
        {"{\"job\":1,\"rank\":0,\"launch_end\":[]}", "tasks[2].launch_end: must be a string"},
        {"{\"job\":1,\"rank\":0,\"gpu_util\":100.5}", "tasks[2].gpu_util: must be a number in 0..100"},
        {"{\"job\":1,\"rank\":0,\"gpu_util\":-1}", "tasks[2].gpu_util: must be a number in 0..100"},
        {"{\"job\":1,\"rank\":0,\"step_s\":0}", "tasks[2].step_s: must be a number > 0"},
        {"{\"job\":1,\"rank\":0,\"step_s\":true}", "tasks[2].step_s: must be a number > 0"},
        {"{\"job\":1,\"rank\":0,\"image_pull\":[]}", "tasks[2].image_pull: must be an object"},
        {"{\"job\":1,\"rank\":0,\"image_pull\":{\"done_bytes\":1,\"total_bytes\":2}}",
         "tasks[2].image_pull.note: required"},
        {"{\"job\":1,\"rank\":0,\"image_pull\":{\"done_bytes\":-1,\"total_bytes\":2,\"note\":\"\"}}",
         "tasks[2].image_pull.done_bytes: must be an integer >= 0"},
        {"{\"job\":1,\"rank\":0,\"image_pull\":{\"done_bytes\":1,\"total_bytes\":2,\"note\":0}}",
         "tasks[2].image_pull.note: must be a string"},
        {"{\"job\":1,\"rank\":0,\"output\":\"x\"}", "tasks[2].output: must be an object"},
        {"{\"job\":1,\"rank\":0,\"output\":{\"stderr\":1}}", "tasks[2].output.stderr: must be a string"},
        {"[1]", "tasks[2]: must be an object"},
    };
    for (size_t k = 0; k < sizeof BAD / sizeof *BAD; k++) {
        json_t *in = parse(BAD[k].doc);
        ts_task_report d;
        ts_err err = {0};
        int rc = ts_task_report_decode(in, "tasks[2]", &d, &err);
        if (rc != TS_EINVAL || strcmp(err.msg, BAD[k].msg) != 0)
            fail_msg("%s: got %d \"%s\", want \"%s\"", BAD[k].doc, rc, err.msg, BAD[k].msg);
        json_decref(in);
    }
}

/* A "tasks" list: each report decoded in order; the first wrong one named by
 * its index; an absent list reads as empty, one that is not a list is refused. */
static void report_lists_decode(void **state)
{
    (void)state;
    json_t *in = parse("[{\"job\":1,\"rank\":0,\"state\":\"running\"},"
                       "{\"job\":2,\"rank\":1,\"step\":0,\"state\":\"exited\",\"exit_code\":0}]");
    ts_task_report *v;
    size_t n;
    ts_err err;
    assert_int_equal(ts_task_reports_decode(in, &v, &n, &err), 0);
    assert_int_equal(n, 2);
    assert_int_equal(v[1].job, 2);
    assert_int_equal(v[1].step, 0);
    assert_int_equal(v[1].state, TS_REPORT_EXITED);
    free(v);
    json_array_append_new(in, parse("{\"job\":3,\"rank\":0,\"state\":\"lost\"}"));
    assert_int_equal(ts_task_reports_decode(in, &v, &n, &err), TS_EINVAL);
    assert_string_equal(err.msg, "tasks[2].state: must be one of running, exited, failed, stopped");
    assert_null(v);
    assert_int_equal(n, 0);
    json_decref(in);
    assert_int_equal(ts_task_reports_decode(NULL, &v, &n, &err), 0);
    assert_int_equal(n, 0);
    in = parse("{\"tasks\":{}}");
    assert_int_equal(ts_task_reports_decode(json_object_get(in, "tasks"), &v, &n, &err),
                     TS_EINVAL);
    assert_string_equal(err.msg, "tasks: must be an array");
    json_decref(in);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_field_round_trips),
        cmocka_unit_test(absent_fields_stay_absent),
        cmocka_unit_test(agent_documents_encode_back),
        cmocka_unit_test(each_bad_field_is_named),
        cmocka_unit_test(report_lists_decode),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
