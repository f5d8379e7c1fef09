/*
 * test_spec.c - the job spec parser and its canonical JSON (docs/job-spec.md).
 *
 * The page's own example, in YAML and in JSON, must parse to the same struct
 * with every key's value as the page says; the canonical JSON of any valid
 * spec must parse back equal, field by field, and print the same bytes again.
 * Each bad input in the table must give exactly one error at the key path
 * named (so one mistake never cascades into several), and a spec with five
 * mistakes all five. Hostile input - oversize, empty, alias bombs and cycles,
 * deep nesting - must be refused quickly, with a reason, under ASan.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/spec_equal.h"
#include "tessera/depend.h"
#include "tessera/spec.h"
#include "api/spec_scalar.h"
#include "tessera/tenant.h"

#define BASE "tenant: t\nname: n\n"
#define BASE_TASKS BASE "tasks: [{gpus: 1}]\n"
#define DEEP_LEVELS 100000
#define BOMB_LEVELS 10

/* ---- helpers ------------------------------------------------------------------ */

static ts_job_spec *parse_ok(const char *text)
{
    ts_job_spec *s = NULL;
    ts_spec_errors errs;
    int rc = ts_spec_parse(text, strlen(text), &s, &errs);
    if (rc != 0) {
        char line[4096];
        ts_spec_errors_join(&errs, line, sizeof line);
        fail_msg("expected a valid spec, got: %s\n--- input:\n%s", line, text);
    }
    assert_non_null(s);
    assert_int_equal(errs.n, 0);
    return s;
}

static ts_spec_errors parse_bad(const char *text, size_t len)
{
    ts_job_spec *s = (ts_job_spec *)&s; /* must be set to NULL */
    ts_spec_errors errs;
    int rc = ts_spec_parse(text, len, &s, &errs);
    if (rc == 0)
        fail_msg("expected errors, the spec parsed:\n%s", text);
    assert_int_equal(rc, TS_EINVAL);
    assert_null(s);
    assert_true(errs.n >= 1);
    return errs;
}

static bool starts_with(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* parse(to_json(s)) equals s, and printing that again gives the same bytes. */
static void assert_round_trip(const ts_job_spec *s)
{
    char *json = ts_spec_to_json(s);
    assert_non_null(json);
    ts_job_spec *back = parse_ok(json);
    char why[128];
    if (!ts_test_spec_equal(s, back, why, sizeof why))
        fail_msg("round trip: %s\n%s", why, json);
    char *again = ts_spec_to_json(back);
    assert_non_null(again);
    assert_string_equal(json, again);
    free(again);
    free(json);
    ts_spec_free(back);
}

/* ---- the documented example ------------------------------------------------------- */

/* docs/job-spec.md's example, YAML */
static const char FULL_YAML[] =
    "tenant: research\n"
    "name: llama-finetune\n"
    "tier: opportunistic\n"
    "priority_class: high\n"
    "tasks:\n"
    "  - count: 4                   # 4 ranks of 8 whole H100s each\n"
    "    gpus: 8\n"
    "    gpu_model: H100-80GB\n"
    "    cpu_milli: 64000\n"
    "    memory_mib: 524288\n"
    "  - count: 2                   # 2 ranks on a quarter of a GPU each\n"
    "    gpu_fraction: 0.25\n"
    "    gpu_memory_mib: 10240\n"
    "  - mig_profile: 3g.40gb       # 1 rank on a MIG instance\n"
    "    gpu_model: A100-80GB\n"
    "topology:\n"
    "  required: rack\n"
    "  preferred: node\n"
    "  rail_aligned: true\n"
    "time_limit: 1d12h\n"
    "duration: 90m\n"
    "checkpoint:\n"
    "  signal: USR2\n"
    "  grace: 2m\n"
    "idle:\n"
    "  timeout: 1h30m\n"
    "command: [python, train.py, --epochs, \"3\"]\n"
    "env:\n"
    "  OMP_NUM_THREADS: 8\n"
    "  NCCL_DEBUG: INFO\n"
    "workdir: /home/alice/llama\n"
    "array_size: 3\n"
    "dependency: afterok:40:41,singleton\n";

/* the same, JSON */
static const char FULL_JSON[] =
    "{\n"
    "  \"tenant\": \"research\",\n"
    "  \"name\": \"llama-finetune\",\n"
    "  \"tier\": \"opportunistic\",\n"
    "  \"priority_class\": \"high\",\n"
    "  \"tasks\": [\n"
    "    {\"count\": 4, \"gpus\": 8, \"gpu_model\": \"H100-80GB\", \"cpu_milli\": 64000,\n"
    "     \"memory_mib\": 524288},\n"
    "    {\"count\": 2, \"gpu_fraction\": 0.25, \"gpu_memory_mib\": 10240},\n"
    "    {\"mig_profile\": \"3g.40gb\", \"gpu_model\": \"A100-80GB\"}\n"
    "  ],\n"
    "  \"topology\": {\"required\": \"rack\", \"preferred\": \"node\", \"rail_aligned\": true},\n"
    "  \"time_limit\": \"1d12h\",\n"
    "  \"duration\": 5400,\n"
    "  \"checkpoint\": {\"signal\": \"SIGUSR2\", \"grace\": 120},\n"
    "  \"idle\": {\"timeout\": \"1h30m\"},\n"
    "  \"command\": [\"python\", \"train.py\", \"--epochs\", \"3\"],\n"
    "  \"env\": {\"NCCL_DEBUG\": \"INFO\", \"OMP_NUM_THREADS\": \"8\"},\n"
    "  \"workdir\": \"/home/alice/llama\",\n"
    "  \"array_size\": 3,\n"
    "  \"dependency\": \"afterok:40:41,singleton\"\n"
    "}\n";

static void full_spec_values(void **state)
{
    (void)state;
    ts_job_spec *s = parse_ok(FULL_YAML);
    assert_string_equal(s->tenant, "research");
    assert_string_equal(s->name, "llama-finetune");
    assert_int_equal(s->tier, TS_TIER_OPPORTUNISTIC);
    assert_string_equal(s->priority_class, "high");
    assert_int_equal(s->ntasks, 3);
    assert_int_equal(s->tasks[0].count, 4);
    assert_int_equal(s->tasks[0].gpus, 8);
    assert_int_equal(s->tasks[0].gpu_milli, 1000);
    assert_string_equal(s->tasks[0].gpu_model, "H100-80GB");
    assert_int_equal(s->tasks[0].cpu_milli, 64000);
    assert_int_equal(s->tasks[0].mem_mib, 524288);
    assert_int_equal(s->tasks[1].count, 2);
    assert_int_equal(s->tasks[1].gpus, 1);
    assert_int_equal(s->tasks[1].gpu_milli, 250);
    assert_int_equal(s->tasks[1].gpu_mem_mib, 10240);
    assert_int_equal(s->tasks[1].cpu_milli, 1000); /* defaults */
    assert_int_equal(s->tasks[1].mem_mib, 1024);
    assert_int_equal(s->tasks[2].count, 1);
    assert_int_equal(s->tasks[2].gpus, 0);
    assert_string_equal(s->tasks[2].mig_profile, "3g.40gb");
    assert_string_equal(s->required_level, "rack");
    assert_string_equal(s->preferred_level, "node");
    assert_true(s->rail_aligned);
    assert_true(s->time_limit_s == 129600.0);
    assert_true(s->duration_s == 5400.0);
    assert_int_equal(s->ckpt_signal, 12); /* SIGUSR2 on Linux */
    assert_true(s->ckpt_grace_s == 120.0);
    assert_true(s->idle_timeout_s == 5400.0);
    assert_int_equal(s->argc, 4);
    assert_string_equal(s->argv[0], "python");
    assert_string_equal(s->argv[3], "3");
    assert_int_equal(s->nenv, 2); /* kept sorted by name */
    assert_string_equal(s->env[0], "NCCL_DEBUG=INFO");
    assert_string_equal(s->env[1], "OMP_NUM_THREADS=8");
    assert_string_equal(s->workdir, "/home/alice/llama");
    assert_int_equal(s->array_size, 3);
    assert_string_equal(s->dependency, "afterok:40:41,singleton");
    assert_int_equal(ts_spec_gpus(s), 4 * 8 + 2 + 1);
    ts_spec_free(s);
}

static void yaml_and_json_parse_equal(void **state)
{
    (void)state;
    ts_job_spec *y = parse_ok(FULL_YAML), *j = parse_ok(FULL_JSON);
    char why[128];
    if (!ts_test_spec_equal(y, j, why, sizeof why))
        fail_msg("YAML and JSON differ: %s", why);
    ts_spec_free(y);
    ts_spec_free(j);
}

static void defaults(void **state)
{
    (void)state;
    ts_job_spec *s = parse_ok("tenant: t\nname: n\ntasks: [{}]\n");
    assert_int_equal(s->tier, TS_TIER_GUARANTEED);
    assert_string_equal(s->priority_class, "");
    assert_int_equal(s->ntasks, 1);
    assert_int_equal(s->tasks[0].count, 1);
    assert_int_equal(s->tasks[0].gpus, 0);
    assert_int_equal(s->tasks[0].gpu_milli, 1000);
    assert_int_equal(s->tasks[0].gpu_mem_mib, 0);
    assert_string_equal(s->tasks[0].gpu_model, "");
    assert_string_equal(s->tasks[0].mig_profile, "");
    assert_int_equal(s->tasks[0].cpu_milli, 1000);
    assert_int_equal(s->tasks[0].mem_mib, 1024);
    assert_string_equal(s->required_level, "");
    /* no level named: compact first, one node before anything wider */
    assert_string_equal(s->preferred_level, "node");
    assert_false(s->rail_aligned);
    assert_true(s->time_limit_s == 0 && s->duration_s == 0 && s->idle_timeout_s == 0);
    assert_int_equal(s->ckpt_signal, 0);
    assert_true(s->ckpt_grace_s == -1);
    assert_int_equal(s->argc, 0);
    assert_null(s->argv);
    assert_int_equal(s->nenv, 0);
    assert_null(s->workdir);
    assert_int_equal(s->array_size, 1);
    assert_int_equal(ts_spec_gpus(s), 0);
    ts_spec_free(s);
}

/* Gangs are compact first unless the spec names a level: no topology, or
 * one with neither level, prefers one node; `required: any` asked for
 * explicitly, or any required level, keeps what it says (preferred = the
 * required level); the canonical JSON keeps the difference. */
static void topology_compact_first_by_default(void **state)
{
    (void)state;
    static const struct {
        const char *topo, *required, *preferred;
    } cases[] = {
        {"", "", "node"},
        {"topology: {rail_aligned: true}\n", "", "node"},
        {"topology: {required: any}\n", "", ""},
        {"topology: {required: leaf}\n", "leaf", ""},
        {"topology: {preferred: nvlink}\n", "", "nvlink"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[256];
        snprintf(text, sizeof text, "tenant: t\nname: n\ntasks: [{gpus: 4, count: 2}]\n%s",
                 cases[i].topo);
        ts_job_spec *s = parse_ok(text);
        assert_string_equal(s->required_level, cases[i].required);
        assert_string_equal(s->preferred_level, cases[i].preferred);
        char *json = ts_spec_to_json(s);
        ts_job_spec *back = parse_ok(json);
        assert_string_equal(back->preferred_level, cases[i].preferred);
        free(json);
        ts_spec_free(back);
        ts_spec_free(s);
    }
}

/* null (and YAML's empty value) means "not given": the default */
static void null_means_default(void **state)
{
    (void)state;
    ts_job_spec *s = parse_ok(BASE_TASKS "tier: ~\npriority_class:\ntopology: null\n"
                                         "checkpoint: {signal: null, grace: null}\n"
                                         "workdir: null\ncommand: ~\n");
    assert_int_equal(s->tier, TS_TIER_GUARANTEED);
    assert_int_equal(s->ckpt_signal, 0);
    assert_true(s->ckpt_grace_s == -1);
    assert_null(s->workdir);
    assert_int_equal(s->argc, 0);
    ts_spec_free(s);
}

static void value_forms(void **state)
{
    (void)state;
    ts_job_spec *s =
        parse_ok(BASE "tasks: [{gpu_memory_mib: 20000}, {gpus: 1, gpu_fraction: 0.1},"
                      " {mig_profile: 1g+me}, {mig_profile: 1G.10GB, gpu_model: A100-40GB}]\n"
                      "time_limit: 1.5\nduration: \"45s\"\n"
                      "checkpoint: {signal: 10, grace: 0}\nidle: {timeout: 1d}\n"
                      "command: python -c 'print(1)'  # one string: /bin/sh -c\n"
                      "topology: {required: any}\n");
    assert_int_equal(s->tasks[0].gpus, 1); /* memory per GPU asks for one GPU */
    assert_int_equal(s->tasks[0].gpu_milli, 1000);
    assert_int_equal(s->tasks[0].gpu_mem_mib, 20000);
    assert_int_equal(s->tasks[1].gpu_milli, 100);
    assert_string_equal(s->tasks[2].mig_profile, "1g+me");
    assert_string_equal(s->tasks[3].mig_profile, "1G.10GB");
    assert_true(s->time_limit_s == 1.5);
    assert_true(s->duration_s == 45);
    assert_int_equal(s->ckpt_signal, 10);
    assert_true(s->ckpt_grace_s == 0);
    assert_true(s->idle_timeout_s == 86400);
    assert_int_equal(s->argc, 3);
    assert_string_equal(s->argv[0], "/bin/sh");
    assert_string_equal(s->argv[1], "-c");
    assert_string_equal(s->argv[2], "python -c 'print(1)'");
    assert_string_equal(s->required_level, "");
    assert_int_equal(ts_spec_gpus(s), 4);
    ts_spec_free(s);

    /* signal spellings */
    static const char *const usr1[] = {"SIGUSR1", "USR1", "sigusr1", "usr1", "10"};
    for (size_t i = 0; i < sizeof usr1 / sizeof usr1[0]; i++) {
        char text[256];
        snprintf(text, sizeof text, BASE_TASKS "checkpoint: {signal: %s}\n", usr1[i]);
        s = parse_ok(text);
        assert_int_equal(s->ckpt_signal, 10);
        ts_spec_free(s);
    }
    /* durations */
    static const struct {
        const char *text;
        double s;
    } durations[] = {{"0", 0},        {"90m", 5400},       {"2h", 7200},   {"1d", 86400},
                     {"1h30m", 5400}, {"1d2h3m4s", 93784}, {"0.25", 0.25}, {"1e3", 1000},
                     {"0.0004", 0},   {"365d", 31536000}};
    for (size_t i = 0; i < sizeof durations / sizeof durations[0]; i++) {
        char text[256];
        snprintf(text, sizeof text, BASE_TASKS "time_limit: %s\n", durations[i].text);
        s = parse_ok(text);
        if (s->time_limit_s != durations[i].s)
            fail_msg("time_limit: %s gave %g, want %g", durations[i].text, s->time_limit_s,
                     durations[i].s);
        ts_spec_free(s);
    }
}

/* ---- canonical JSON ------------------------------------------------------------- */

static void array_throttle(void **state)
{
    (void)state;
    ts_job_spec *s = parse_ok("tenant: t\nname: n\ntasks: [{gpus: 1}]\narray_size: 20\n"
                              "array_throttle: 3\n");
    assert_int_equal(s->array_throttle, 3);
    char *json = ts_spec_to_json(s);
    assert_non_null(strstr(json, "\"array_throttle\":3"));
    free(json);
    ts_spec_free(s);
}

/* notify.mail (one address or a list, with or without a url) and hold:
 * kept, written canonically, round-tripped; bad addresses name the field */
static void notify_mail_and_hold(void **state)
{
    (void)state;
    ts_job_spec *s = parse_ok("tenant: t\nname: n\ntasks: [{gpus: 1}]\nhold: true\n"
                              "notify: {mail: [a@x.org, b@y.org], on: [BEGIN, FAIL]}\n");
    assert_true(s->hold);
    assert_int_equal(s->nice, 0);
    assert_null(s->notify_url);
    assert_string_equal(s->notify_mail, "a@x.org,b@y.org");
    char *json = ts_spec_to_json(s);
    assert_non_null(strstr(json, "\"hold\":true"));
    assert_non_null(strstr(json, "\"notify\":{\"on\":[\"start\",\"fail\"],"
                                 "\"mail\":[\"a@x.org\",\"b@y.org\"]}"));
    free(json);
    assert_round_trip(s);
    ts_spec_free(s);
    s = parse_ok("tenant: t\nname: n\ntasks: [{gpus: 1}]\n"
                 "notify: {url: 'https://h.example/x', mail: ops@x.org}\n");
    json = ts_spec_to_json(s);
    assert_non_null(strstr(json, "\"notify\":{\"url\":\"https://h.example/x\",\"on\":"
                                 "[\"end\"],\"mail\":[\"ops@x.org\"]}"));
    assert_null(strstr(json, "\"hold\""));
    free(json);
    assert_round_trip(s);
    ts_spec_free(s);
    static const char *const BAD[] = {"nobody", "a@b@c", "<a@b>", "a b@c", "a,b@c", "@x"};
    for (size_t i = 0; i < sizeof BAD / sizeof *BAD; i++) {
        char text[256];
        snprintf(text, sizeof text, "tenant: t\nname: n\ntasks: [{gpus: 1}]\n"
                 "notify: {mail: ['%s']}\n", BAD[i]);
        ts_spec_errors errs = parse_bad(text, strlen(text));
        assert_true(starts_with(errs.msg[0], "notify.mail: "));
    }
    s = parse_ok("tenant: t\nname: n\ntasks: [{gpus: 1}]\nnice: -25\n");
    assert_int_equal(s->nice, -25);
    json = ts_spec_to_json(s);
    assert_non_null(strstr(json, "\"nice\":-25"));
    free(json);
    assert_round_trip(s);
    ts_spec_free(s);
    s = NULL;
    const char *far = "tenant: t\nname: n\ntasks: [{gpus: 1}]\nnice: 10001\n";
    ts_spec_errors ferrs = parse_bad(far, strlen(far));
    assert_true(starts_with(ferrs.msg[0], "nice: "));
    const char *none = "tenant: t\nname: n\ntasks: [{gpus: 1}]\nnotify: {on: [end]}\n";
    ts_spec_errors errs = parse_bad(none, strlen(none));
    assert_true(starts_with(errs.msg[0], "notify.url: required"));
    /* a bad url does not hide a bad on: both at once */
    const char *both = "tenant: t\nname: n\ntasks: [{gpus: 1}]\n"
                       "notify: {url: 'ftp://x', on: [boom]}\n";
    ts_spec_errors berrs = parse_bad(both, strlen(both));
    assert_int_equal(berrs.n, 2);
    assert_true(starts_with(berrs.msg[0], "notify.url: "));
    assert_true(starts_with(berrs.msg[1], "notify.on: "));
}

/* image: a reference the agent can pull, kept as written; errors name the field */
static void image_reference(void **state)
{
    (void)state;
    ts_job_spec *s = parse_ok("tenant: t\nname: n\ntasks: [{gpus: 1}]\n"
                              "image: reg.example:5000/team/torch:2.3\n");
    assert_string_equal(s->image, "reg.example:5000/team/torch:2.3");
    char *json = ts_spec_to_json(s);
    assert_non_null(strstr(json, "\"image\":\"reg.example:5000/team/torch:2.3\""));
    free(json);
    assert_round_trip(s);
    ts_spec_free(s);
    s = parse_ok("tenant: t\nname: n\ntasks: [{gpus: 1}]\n");
    json = ts_spec_to_json(s);
    assert_null(strstr(json, "image")); /* older specs stay byte for byte */
    free(json);
    ts_spec_free(s);
    const char *bad = "tenant: t\nname: n\ntasks: [{gpus: 1}]\nimage: ubuntu\n";
    ts_spec_errors e = parse_bad(bad, strlen(bad));
    assert_true(starts_with(e.msg[0], "image: must name the registry"));
    bad = "tenant: t\nname: n\ntasks: [{gpus: 1}]\nimage: [a]\n";
    e = parse_bad(bad, strlen(bad));
    assert_true(starts_with(e.msg[0], "image:"));
    /* its pull secret: a name, with an image only */
    s = parse_ok("tenant: t\nname: n\ntasks: [{gpus: 1}]\nimage: reg.example/x\n"
                 "image_pull_secret: REG_PULL\n");
    assert_string_equal(s->image_secret, "REG_PULL");
    assert_round_trip(s);
    ts_spec_free(s);
    bad = "tenant: t\nname: n\ntasks: [{gpus: 1}]\nimage_pull_secret: REG\n";
    e = parse_bad(bad, strlen(bad));
    assert_true(starts_with(e.msg[0], "image_pull_secret: only with an image"));
    bad = "tenant: t\nname: n\ntasks: [{gpus: 1}]\nimage: reg.example/x\nimage_pull_secret: a-b\n";
    e = parse_bad(bad, strlen(bad));
    assert_true(starts_with(e.msg[0], "image_pull_secret:"));
    /* mounts: clean absolute paths, not into the runtime's folders, with an image */
    s = parse_ok("tenant: t\nname: n\ntasks: [{gpus: 1}]\nimage: reg.example/x\n"
                 "mounts: [{host: /data/a, path: /data}, {host: /s, path: /s, write: true}]\n");
    assert_int_equal(s->nmounts, 2);
    assert_true(!s->mounts[0].write && s->mounts[1].write);
    assert_round_trip(s);
    ts_spec_free(s);
    static const char *const bad_mounts[][2] = {
        {"[{host: data, path: /d}]", "mounts[0].host:"},
        {"[{host: /a/../etc, path: /d}]", "mounts[0].host:"},
        {"[{host: /a, path: /proc/x}]", "mounts[0].path:"},
        {"[{host: /a, path: /}]", "mounts[0].path:"},
        {"[{host: /a}]", "mounts[0].path: required"},
        {"[{host: /a, path: /d}, {host: /b, path: /d}]", "mounts[1].path:"},
        {"[{host: /a, path: /d, write: maybe}]", "mounts[0].write:"},
    };
    char text[512];
    for (size_t i = 0; i < sizeof bad_mounts / sizeof bad_mounts[0]; i++) {
        snprintf(text, sizeof text, "tenant: t\nname: n\ntasks: [{gpus: 1}]\n"
                 "image: reg.example/x\nmounts: %s\n", bad_mounts[i][0]);
        e = parse_bad(text, strlen(text));
        if (!starts_with(e.msg[0], bad_mounts[i][1]))
            fail_msg("%s: want %s, got %s", bad_mounts[i][0], bad_mounts[i][1], e.msg[0]);
    }
    bad = "tenant: t\nname: n\ntasks: [{gpus: 1}]\nmounts: [{host: /a, path: /b}]\n";
    e = parse_bad(bad, strlen(bad));
    assert_true(starts_with(e.msg[0], "mounts: only with an image"));
}

static void dependency_error_one_line(void **state)
{
    (void)state;
    /* the item is echoed into the message: a tab or a byte past ASCII in it
     * must not break the one-line message (found by fuzz_spec) */
    const char *text = "tenant: t\nname: n\ntasks: [{}]\ndependency: \"after:1\\tx\\xff\"\n";
    ts_spec_errors e = parse_bad(text, strlen(text));
    assert_true(e.n >= 1);
    for (const char *p = e.msg[0]; *p; p++)
        assert_true((unsigned char)*p >= 0x20 && (unsigned char)*p < 0x7F);
    assert_non_null(strstr(e.msg[0], "dependency"));
}

/* "network": host|tenant, or a map with mode and nics (docs/network.md) */
static void network_forms(void **state)
{
    (void)state;
    ts_job_spec *s = parse_ok(BASE_TASKS "network: {nics: dedicated}\n");
    assert_true(s->dedicated_nics);
    assert_false(s->host_network);
    assert_round_trip(s);
    ts_spec_free(s);
    s = parse_ok(BASE_TASKS "network: {mode: host}\n");
    assert_true(s->host_network);
    assert_false(s->dedicated_nics);
    assert_round_trip(s);
    ts_spec_free(s);
    s = parse_ok(BASE_TASKS "network: tenant\n");
    assert_false(s->host_network);
    ts_spec_free(s);
    s = parse_ok(BASE_TASKS "network: {publish: [8000, 8001/tcp, 53/udp]}\n");
    assert_int_equal(s->npublish, 3);
    assert_int_equal(s->publish[0].port, 8000);
    assert_false(s->publish[0].udp);
    assert_false(s->publish[1].udp);
    assert_true(s->publish[2].udp);
    assert_round_trip(s);
    ts_spec_free(s);
    s = parse_ok(BASE_TASKS "network: {publish: [4789/tcp]}\n"); /* VXLAN's is UDP only */
    assert_int_equal(s->npublish, 1);
    ts_spec_free(s);
    const char *bad[][2] = {
        {BASE_TASKS "network: {publish: [1x]}\n", "network.publish[0]: must be PORT/tcp"},
        {BASE_TASKS "network: {publish: [80, 0]}\n", "network.publish[1]"},
        {BASE_TASKS "network: {publish: [65536]}\n", "network.publish[0]"},
        {BASE_TASKS "network: {publish: [80/sctp]}\n", "network.publish[0]"},
        {BASE_TASKS "network: {publish: [80, 80/tcp]}\n", "network.publish[1]: 80/tcp is listed twice"},
        {BASE_TASKS "network: {publish: 80}\n", "network.publish"},
        {BASE_TASKS "network: {mode: host, publish: [80]}\n", "network.publish"},
        {BASE_TASKS "network: {publish: [8000, 4789/udp]}\n",
         "network.publish[1]: 4789/udp is the overlay's own VXLAN port on every node, never a "
         "task's"},
        {BASE_TASKS "network: {nics: some}\n", "network.nics"},
        {BASE_TASKS "network: {mode: bridge}\n", "network.mode"},
        {BASE_TASKS "network: {mode: host, nics: dedicated}\n", "network.nics"},
        {BASE_TASKS "network: {vlan: 3}\n", "network"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ts_spec_errors e = parse_bad(bad[i][0], strlen(bad[i][0]));
        if (!strstr(e.msg[0], bad[i][1]))
            fail_msg("%s: %s lacks %s", bad[i][0], e.msg[0], bad[i][1]);
    }
}

static void canonical_json_exact(void **state)
{
    (void)state;
    ts_job_spec *s = parse_ok("tenant: t\nname: n\ntasks: [{gpu_fraction: 0.3}]\n"
                              "env: {B: \"2\", A: x=y}\ntime_limit: 2.5\n");
    char *json = ts_spec_to_json(s);
    assert_non_null(json);
    assert_string_equal(
        json, "{\"tenant\":\"t\",\"name\":\"n\",\"tier\":\"guaranteed\",\"priority_class\":\"\","
              "\"tasks\":[{\"count\":1,\"gpus\":1,\"gpu_fraction\":0.3,\"gpu_memory_mib\":0,"
              "\"gpu_model\":null,\"mig_profile\":null,\"cpu_milli\":1000,\"memory_mib\":1024}],"
              "\"topology\":{\"required\":\"any\",\"preferred\":\"node\",\"rail_aligned\":false},"
              "\"time_limit\":2.5,\"duration\":0,\"checkpoint\":{\"signal\":null,\"grace\":null},"
              "\"idle\":{\"timeout\":0},\"command\":[],\"env\":{\"A\":\"x=y\",\"B\":\"2\"},"
              "\"workdir\":null,\"array_size\":1,\"dependency\":null,\"array_throttle\":null}");
    free(json);
    ts_spec_free(s);
}

static void canonical_json_round_trips(void **state)
{
    (void)state;
    static const char *const specs[] = {
        FULL_YAML,
        FULL_JSON,
        "tenant: t\nname: n\ntasks: [{}]\n",
        BASE "tasks: [{gpu_fraction: 0.001}, {gpu_fraction: 0.999, gpu_memory_mib: 1}]\n",
        BASE "tasks: [{mig_profile: 7g, count: 65535}, {count: 1, gpus: 16}]\n",
        BASE_TASKS "time_limit: 0.001\nduration: 31535999.999\nidle: {timeout: 1.5}\n",
        BASE_TASKS "checkpoint: {signal: 64, grace: 0.123}\n",
        BASE_TASKS "checkpoint: {signal: SIGTERM}\n",
        BASE_TASKS "command: \"echo \\\"hi\\\" \\u00e9 \\t done\"\n",
        BASE_TASKS "command: [\"\", \"a b\", \"\\u0001\"]\nenv: {E: \"\", Z: \"\\u00ff\"}\n",
        BASE_TASKS "topology: {required: node, rail_aligned: false}\nworkdir: /\n",
        BASE_TASKS "priority_class: ''\ntier: guaranteed\narray_size: 100000\n",
        /* characters jansson writes raw that YAML would not read back as themselves */
        BASE_TASKS "command: [\"\\x7f \\x85 \\x9f \\u2028 \\u2029 \\ufeff \\ufffe \\uffff\"]\n",
        BASE_TASKS "env: {A: \"\\N\\L\\P\\e\\a\"}\n",
    };
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        ts_job_spec *s = parse_ok(specs[i]);
        assert_round_trip(s);
        ts_spec_free(s);
    }
}

/* Strings keep every character through the canonical JSON, those that JSON
 * escapes, those jansson writes raw but YAML reads differently (DEL, C1, NEL,
 * LS, PS, BOM, U+FFFE/F) and those outside the BMP. (Every code point was
 * checked once; these ranges hold all the special ones.) */
static void every_character_round_trips(void **state)
{
    (void)state;
    static const unsigned ranges[][2] = {{0x01, 0x2FF},        {0x2000, 0x206F},
                                         {0xD7F0, 0xD7FF},     {0xE000, 0xE00F},
                                         {0xFEF0, 0xFFFF},     {0x10000, 0x1000F},
                                         {0x1F600, 0x1F60F},   {0x10FFF0, 0x10FFFF}};
    for (size_t r = 0; r < sizeof ranges / sizeof ranges[0]; r++) {
        for (unsigned cp = ranges[r][0]; cp <= ranges[r][1]; cp++) {
            char text[256];
            if (cp < 0x10000)
                snprintf(text, sizeof text,
                         BASE_TASKS "command: [\"a\\u%04xb\"]\nenv: {X: \"\\u%04x\"}\n", cp, cp);
            else
                snprintf(text, sizeof text, BASE_TASKS "command: [\"a\\U%08xb\"]\n", cp);
            ts_job_spec *s = parse_ok(text);
            assert_round_trip(s);
            ts_spec_free(s);
        }
    }
}

/* ---- bad input: one mistake, one error, at its path ----------------------------- */

typedef struct bad_case {
    const char *text;
    const char *path;   /* the error starts "path: " */
    const char *reason; /* and contains this */
} bad_case;

static const bad_case BAD[] = {
    /* required keys */
    {"name: n\ntasks: [{}]\n", "tenant", "required"},
    {"tenant: t\ntasks: [{}]\n", "name", "required"},
    {"tenant: t\nname: n\ntasks: [{}]\narray_throttle: 2\n", "array_throttle",
     "only an array"},
    {"tenant: t\nname: n\ntasks: [{}]\narray_size: 4\narray_throttle: 0\n", "array_throttle",
     ""},
    {BASE, "tasks", "required"},
    {"tenant: ~\nname: n\ntasks: [{}]\n", "tenant", "required"},
    /* unknown and repeated keys */
    {BASE_TASKS "tenantx: 1\n", "tenantx", "unknown key (did you mean \"tenant\"?"},
    /* a typo of a key late in the list: its fix first, and every key (the
     * list was cut at 256 bytes, mid-word, before "hold") */
    {BASE_TASKS "hodl: true\n", "hodl", "did you mean \"hold\"? expected one of: tenant, name"},
    {BASE_TASKS "hodl: true\n", "hodl", "reservation, notify, hold, nice, interactive, data, user)"},
    {BASE_TASKS "zzzzzzzz: 1\n", "zzzzzzzz", "unknown key (expected one of: tenant,"},
    {BASE_TASKS "\"a b\": 1\n", "[\"a b\"]", "unknown key"},
    {BASE_TASKS "[x]: 1\n", "top level", "keys must be names"},
    {"tenant: t\ntenant: u\nname: n\ntasks: [{}]\n", "tenant", "given twice"},
    {"{\"tenant\": \"t\", \"name\": \"n\", \"tasks\": [{}], \"name\": \"m\"}", "name",
     "given twice"},
    {BASE "tasks: [{gpuz: 1}]\n", "tasks[0].gpuz", "unknown key"},
    {BASE "tasks: [{gpus: 1, gpus: 2}]\n", "tasks[0].gpus", "given twice"},
    {BASE_TASKS "idle: {timout: 5}\n", "idle.timout", "unknown key"},
    /* wrong types */
    {"[1, 2]\n", "top level", "must be a mapping"},
    {"just a string\n", "top level", "must be a mapping"},
    {BASE "tasks: [{gpus: \"4\"}]\n", "tasks[0].gpus", "the string \"4\""},
    {"{\"tenant\": \"t\", \"name\": \"n\", \"tasks\": [{\"gpus\": \"4\"}]}", "tasks[0].gpus",
     "must be an integer"},
    {BASE "tasks: {gpus: 1}\n", "tasks", "must be a list"},
    {BASE_TASKS "topology: [node]\n", "topology", "must be a mapping, got a list"},
    {BASE_TASKS "checkpoint: 5\n", "checkpoint", "must be a mapping"},
    {BASE "tasks: [[1]]\n", "tasks[0]", "must be a mapping"},
    {BASE "tasks: [~]\n", "tasks[0]", "got null"},
    {BASE "tasks: [{gpus: 1.0}]\n", "tasks[0].gpus", "must be an integer"},
    {BASE "tasks: [{gpus: 010}]\n", "tasks[0].gpus", "must be an integer"},
    {BASE "tasks: [{gpus: +1}]\n", "tasks[0].gpus", "must be an integer"},
    {BASE "tasks: [{gpus: [1]}]\n", "tasks[0].gpus", "got a list"},
    {BASE_TASKS "name2: x\n", "name2", "unknown key"},
    {BASE_TASKS "duration: [1]\n", "duration", "got a list"},
    {BASE_TASKS "topology: {rail_aligned: yes}\n", "topology.rail_aligned", "true or false"},
    {BASE_TASKS "topology: {rail_aligned: \"true\"}\n", "topology.rail_aligned", "the string"},
    /* names */
    {"tenant: t\nname: bad name\ntasks: [{}]\n", "name", "A-Z a-z 0-9"},
    {"tenant: t\nname: "
     "a123456789012345678901234567890123456789012345678901234567890123\ntasks: [{}]\n",
     "name", "1..63"},
    {"tenant: \"\"\nname: n\ntasks: [{}]\n", "tenant", "1..63"},
    {"tenant: \"a\\0b\"\nname: n\ntasks: [{}]\n", "tenant", "NUL"},
    {BASE_TASKS "tier: gold\n", "tier", "guaranteed or opportunistic"},
    {BASE_TASKS "priority_class: a/b\n", "priority_class", "A-Z a-z"},
    /* tasks */
    {BASE "tasks: []\n", "tasks", "at least one"},
    {BASE "tasks: [{count: 0}]\n", "tasks[0].count", "must be 1..65536"},
    {BASE "tasks: [{count: 65536}, {count: 1}]\n", "tasks", "65537 ranks"},
    {BASE "tasks: [{gpus: 1}, {gpus: 17}]\n", "tasks[1].gpus", "must be 0..16"},
    {BASE "tasks: [{gpus: -1}]\n", "tasks[0].gpus", "must be 0..16"},
    {BASE "tasks: [{gpus: 99999999999999999999}]\n", "tasks[0].gpus", "must be 0..16"},
    {BASE "tasks: [{gpu_fraction: 1.5}]\n", "tasks[0].gpu_fraction", "between 0 and 1"},
    {BASE "tasks: [{gpu_fraction: 1}]\n", "tasks[0].gpu_fraction", "between 0 and 1"},
    {BASE "tasks: [{gpu_fraction: 0.0001}]\n", "tasks[0].gpu_fraction", "rounds to"},
    {BASE "tasks: [{gpu_fraction: 0.9999}]\n", "tasks[0].gpu_fraction", "rounds to"},
    {BASE "tasks: [{gpu_fraction: \"0.5\"}]\n", "tasks[0].gpu_fraction", "the string"},
    {BASE "tasks: [{gpu_fraction: .nan}]\n", "tasks[0].gpu_fraction", "between 0 and 1"},
    {BASE "tasks: [{gpu_fraction: 0.5, gpus: 2}]\n", "tasks[0].gpu_fraction", "gpus: 2"},
    {BASE "tasks: [{gpu_fraction: 0.5, gpus: 0}]\n", "tasks[0].gpu_fraction", "gpus: 0"},
    {BASE "tasks: [{gpu_model: A100}]\n", "tasks[0].gpu_model", "unknown GPU model \"A100\""},
    /* quoted (a JSON spec's are): still the name, not "the string \"A100\"" */
    {BASE "tasks: [{gpu_model: \"A100\"}]\n", "tasks[0].gpu_model", "unknown GPU model \"A100\""},
    {BASE "tasks: [{gpu_model: T4}]\n", "tasks[0].gpu_model", "needs gpus"},
    {BASE "tasks: [{mig_profile: 5g.50gb}]\n", "tasks[0].mig_profile", "unknown MIG profile"},
    {BASE "tasks: [{mig_profile: 1g, gpus: 1}]\n", "tasks[0].mig_profile", "gpus: 1"},
    {BASE "tasks: [{mig_profile: 1g, gpu_fraction: 0.5}]\n", "tasks[0].mig_profile",
     "gpu_fraction"},
    {BASE "tasks: [{mig_profile: 1g, gpu_model: T4}]\n", "tasks[0].mig_profile", "no MIG"},
    {BASE "tasks: [{mig_profile: 3g.40gb, gpu_model: A100-40GB}]\n", "tasks[0].mig_profile",
     "A100-80GB"},
    {BASE "tasks: [{mig_profile: 1g, gpu_memory_mib: 5}]\n", "tasks[0].gpu_memory_mib",
     "mig_profile"},
    {BASE "tasks: [{gpu_memory_mib: 1000, gpus: 0}]\n", "tasks[0].gpu_memory_mib", "gpus: 0"},
    {BASE "tasks: [{gpu_memory_mib: -1}]\n", "tasks[0].gpu_memory_mib", "must be 0.."},
    {BASE "tasks: [{cpu_milli: -1}]\n", "tasks[0].cpu_milli", "must be 0.."},
    {BASE "tasks: [{memory_mib: 1.5}]\n", "tasks[0].memory_mib", "must be an integer"},
    /* topology */
    {BASE_TASKS "topology: {required: a b}\n", "topology.required", "level name"},
    {BASE_TASKS "topology: {preferred: any}\n", "topology.preferred", "prefers nothing"},
    /* durations */
    {BASE_TASKS "time_limit: 90x\n", "time_limit", "duration"},
    {BASE_TASKS "time_limit: -5\n", "time_limit", "duration"},
    {BASE_TASKS "time_limit: 30m1h\n", "time_limit", "duration"},
    {BASE_TASKS "time_limit: 1h1h\n", "time_limit", "duration"},
    {BASE_TASKS "time_limit: 366d\n", "time_limit", "365d"},
    {BASE_TASKS "time_limit: .inf\n", "time_limit", "duration"},
    {BASE_TASKS "time_limit: 1e400\n", "time_limit", "duration"},
    {BASE_TASKS "time_limit: h\n", "time_limit", "duration"},
    {BASE_TASKS "time_limit: \" 5\"\n", "time_limit", "duration"},
    /* checkpoint and idle */
    {BASE_TASKS "checkpoint: {signal: SIGFOO}\n", "checkpoint.signal", "unknown signal \"SIGFOO\""},
    {BASE_TASKS "checkpoint: {signal: 65}\n", "checkpoint.signal", "unknown signal"},
    {BASE_TASKS "checkpoint: {signal: 0}\n", "checkpoint.signal", "unknown signal"},
    {BASE_TASKS "checkpoint: {signal: KILL}\n", "checkpoint.signal", "cannot be caught"},
    {BASE_TASKS "checkpoint: {signal: 19}\n", "checkpoint.signal", "SIGSTOP cannot"},
    {BASE_TASKS "checkpoint: {grace: abc}\n", "checkpoint.grace", "duration"},
    {BASE_TASKS "idle: {timeout: x}\n", "idle.timeout", "duration"},
    /* command, env, workdir, array_size */
    {BASE_TASKS "command: \"\"\n", "command", "empty"},
    {BASE_TASKS "command: \"  \"\n", "command", "empty"},
    {BASE_TASKS "command: {a: b}\n", "command", "a list of strings"},
    {BASE_TASKS "command: [ls, [x]]\n", "command[1]", "got a list"},
    {BASE_TASKS "command: [ls, ~]\n", "command[1]", "got null"},
    {BASE_TASKS "env: {1BAD: x}\n", "env.1BAD", "variable name"},
    {BASE_TASKS "env: {\"A B\": x}\n", "env[\"A B\"]", "variable name"},
    {BASE_TASKS "env: {A: ~}\n", "env.A", "got null"},
    {BASE_TASKS "env: {A: [x]}\n", "env.A", "got a list"},
    {BASE_TASKS "env: {A: x, B: y, A: z}\n", "env.A", "given twice"},
    {BASE_TASKS "env: [A=b]\n", "env", "a mapping"},
    {BASE_TASKS "env: {A: \"a\\0b\"}\n", "env.A", "NUL"},
    {BASE_TASKS "workdir: relative/path\n", "workdir", "absolute path"},
    {BASE_TASKS "array_size: 0\n", "array_size", "1..100000"},
    {BASE_TASKS "array_size: 100001\n", "array_size", "1..100000"},
    /* dependency */
    {BASE_TASKS "dependency: afterfoo:1\n", "dependency", "unknown type in \"afterfoo:1\""},
    {BASE_TASKS "dependency: afterok\n", "dependency", "TYPE:JOBID"},
    {BASE_TASKS "dependency: \"afterok:\"\n", "dependency", "job ids must be integers"},
    {BASE_TASKS "dependency: \"afterok:1:\"\n", "dependency", "ends with ':'"},
    {BASE_TASKS "dependency: afterok:0\n", "dependency", "job ids must be integers"},
    {BASE_TASKS "dependency: afterok:-3\n", "dependency", "job ids must be integers"},
    {BASE_TASKS "dependency: afterok:1x\n", "dependency", "joined by ':'"},
    {BASE_TASKS "dependency: afterok:1234567890123456789\n", "dependency", "1..10^18"},
    {BASE_TASKS "dependency: \"afterok:1?afterany:2,afterok:3\"\n", "dependency",
     "cannot be mixed"},
    {BASE_TASKS "dependency: \"afterok:1,\"\n", "dependency", "an empty item"},
    {BASE_TASKS "dependency: \"\"\n", "dependency", "must not be empty"},
    {BASE_TASKS "dependency: afterok:12+30\n", "dependency", "delay after '+'"},
    {BASE_TASKS "dependency: afterok:12_3\n", "dependency", "array element"},
    {BASE_TASKS "dependency: aftercorr:12\n", "dependency", "not supported"},
    {BASE_TASKS "dependency: singleton,singleton\n", "dependency", "singleton given twice"},
    {BASE_TASKS "dependency: [afterok:1]\n", "dependency", "got a list"},
    /* the document itself */
    {"{tenant: t\n", "spec:2", "malformed YAML"}, /* libyaml: where it gave up */
    {"tenant: t\n  name: n\n", "spec:2", "malformed YAML"},
    {BASE_TASKS "---\nx: 1\n", "spec:5", "only one YAML document"},
    {"", "top level", "empty"},
    {"# nothing\n", "top level", "empty"},
    {"~\n", "top level", "got null"},
    /* aliases: a node is walked once */
    {"tenant: &t x\nname: *t\ntasks: [{}]\n", "name", "aliases"},
    {BASE "tasks: [&g {gpus: 1}, *g]\n", "tasks[1]", "aliases"},
    {"&a {tenant: t, name: n, tasks: [{}], idle: *a}\n", "idle", "aliases"},
    {BASE_TASKS "command: &c [a, *c]\n", "command[1]", "aliases"},
};

static void bad_inputs(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
        const bad_case *c = &BAD[i];
        ts_spec_errors errs = parse_bad(c->text, strlen(c->text));
        char want[256];
        snprintf(want, sizeof want, "%s: ", c->path);
        if (errs.n != 1 || errs.more != 0 || !starts_with(errs.msg[0], want) ||
            !strstr(errs.msg[0], c->reason)) {
            char all[4096];
            ts_spec_errors_join(&errs, all, sizeof all);
            fail_msg("case %zu: want one error \"%s...%s\", got %d: %s\n--- input:\n%s", i, want,
                     c->reason, errs.n, all, c->text);
        }
    }
}

/* A spec with five independent mistakes reports all five, in document order. */
/* The dependency text: every type, both joins, canonical form, the limits. */
static void dependency_forms(void **state)
{
    (void)state;
    static const struct {
        const char *in, *canonical;
    } ok[] = {
        {"afterok:12", "afterok:12"},
        {"afterok:1:2,afterok:3", "afterok:1:2:3"},
        {"after:1,afterany:2,afternotok:3,singleton", "after:1,afterany:2,afternotok:3,singleton"},
        {"afterok:007?afterany:8", "afterok:7?afterany:8"},
        /* any one: each id keeps its '?' (joined, "afterok:1:2" is both) */
        {"afterok:1?afterok:2", "afterok:1?afterok:2"},
        {"afterok:1:2?afterany:3", "afterok:1?afterok:2?afterany:3"},
        {"singleton", "singleton"},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        char text[256];
        snprintf(text, sizeof text, BASE_TASKS "dependency: \"%s\"\n", ok[i].in);
        ts_job_spec *s = parse_ok(text);
        assert_non_null(s->dependency);
        assert_string_equal(s->dependency, ok[i].canonical);
        assert_round_trip(s);
        ts_spec_free(s);
    }
    ts_dependency d;
    char why[256];
    assert_int_equal(ts_dep_parse("afterok:1:2?afternotok:3?singleton", &d, why, sizeof why), 0);
    assert_true(d.any);
    assert_int_equal(d.n, 4);
    assert_int_equal(d.items[1].type, TS_DEP_AFTEROK);
    assert_int_equal(d.items[1].job, 2);
    assert_int_equal(d.items[2].type, TS_DEP_AFTERNOTOK);
    assert_int_equal(d.items[3].type, TS_DEP_SINGLETON);
    /* past the old cap of 64: 1000 ids (and singleton) are fine; the text
     * is the only bound, 4096 characters, not 4097 */
    static char ids[8192] = "afterok";
    for (int i = 1; i <= 1000; i++)
        snprintf(ids + strlen(ids), sizeof ids - strlen(ids), ":%d", i);
    assert_int_equal(ts_dep_parse(ids, &d, why, sizeof why), 0);
    assert_int_equal(d.n, 1000);
    assert_int_equal(d.items[999].job, 1000);
    strcat(ids, ",singleton");
    assert_int_equal(ts_dep_parse(ids, &d, why, sizeof why), 0);
    assert_int_equal(d.n, 1001);
    /* any one of many ids: canonical, each takes its type again; past the
     * bound it is an error naming the length, never a cut text */
    static char anyof[TS_DEP_MAX_BYTES + 2] = "afterok";
    for (int i = 1; i <= 300; i++)
        snprintf(anyof + strlen(anyof), sizeof anyof - strlen(anyof), ":%d", i);
    strcat(anyof, "?singleton");
    static char canon[TS_DEP_MAX_BYTES + 1];
    assert_int_equal(ts_dep_canonical(anyof, canon, why, sizeof why), 0);
    assert_int_equal(strncmp(canon, "afterok:1?afterok:2?afterok:3?", 30), 0);
    for (int i = 301; i <= 800; i++)
        snprintf(anyof + strlen(anyof) - 10, sizeof anyof - strlen(anyof) + 10, ":%d?singleton", i);
    assert_int_equal(ts_dep_canonical(anyof, canon, why, sizeof why), TS_EINVAL);
    assert_non_null(strstr(why, "in canonical form"));
    /* the most ids the text can hold: 2047 one-digit ids */
    static char most[TS_DEP_MAX_BYTES + 2] = "afterok";
    while (strlen(most) + 2 <= TS_DEP_MAX_BYTES)
        strcat(most, ":1");
    assert_int_equal(ts_dep_parse(most, &d, why, sizeof why), 0);
    assert_true(d.n <= TS_DEP_MAX_IDS);
    static char over[TS_DEP_MAX_BYTES + 2];
    memset(over, 0, sizeof over);
    memcpy(over, "afterok:1", 9);
    memset(over + 9, ',', 1);
    for (size_t k = 10; k < TS_DEP_MAX_BYTES + 1; k++)
        over[k] = 'x';
    assert_int_equal(ts_dep_parse(over, &d, why, sizeof why), TS_EINVAL);
    assert_non_null(strstr(why, "4097 characters, at most 4096"));
    static char spec[TS_DEP_MAX_BYTES + 400];
    snprintf(spec, sizeof spec, BASE_TASKS "dependency: \"%s\"\n", over);
    ts_spec_errors errs = parse_bad(spec, strlen(spec));
    assert_int_equal(errs.n, 1);
    assert_true(starts_with(errs.msg[0], "dependency: 4097 characters"));
    /* null means none */
    ts_job_spec *s = parse_ok(BASE_TASKS "dependency: ~\n");
    assert_null(s->dependency);
    ts_spec_free(s);
}

static void five_errors(void **state)
{
    (void)state;
    static const char text[] = "name: n\n"
                               "tasks:\n"
                               "  - gpus: 17\n"
                               "  - gpu_model: B200\n"
                               "checkpoint: {signal: SIGFOO}\n"
                               "workdir: tmp\n";
    ts_spec_errors errs = parse_bad(text, strlen(text));
    static const char *const want[] = {
        "tenant: ", "tasks[0].gpus: ", "tasks[1].gpu_model: ", "checkpoint.signal: ", "workdir: "};
    char all[4096];
    ts_spec_errors_join(&errs, all, sizeof all);
    if (errs.n != 5)
        fail_msg("want 5 errors, got %d: %s", errs.n, all);
    for (int i = 0; i < 5; i++)
        if (!starts_with(errs.msg[i], want[i]))
            fail_msg("error %d: want \"%s...\", got: %s", i, want[i], all);
    assert_non_null(strstr(all, "; tasks[0].gpus: must be 0..16"));
}

/* Past TS_SPEC_MAX_ERRORS errors are counted, not kept. */
static void errors_capped_and_joined(void **state)
{
    (void)state;
    char text[4096] = BASE_TASKS;
    for (int i = 0; i < TS_SPEC_MAX_ERRORS + 8; i++) {
        size_t used = strlen(text);
        snprintf(text + used, sizeof text - used, "bad%d: 1\n", i);
    }
    ts_spec_errors errs = parse_bad(text, strlen(text));
    assert_int_equal(errs.n, TS_SPEC_MAX_ERRORS);
    assert_int_equal(errs.more, 8);
    char all[64 * 1024];
    ts_spec_errors_join(&errs, all, sizeof all);
    assert_true(starts_with(all, "bad0: unknown key"));
    assert_non_null(strstr(all, "; bad31: unknown key"));
    assert_non_null(strstr(all, "; and 8 more"));
    /* a short buffer cuts cleanly */
    char small[20];
    ts_spec_errors_join(&errs, small, sizeof small);
    assert_int_equal(strlen(small), sizeof small - 1);
    ts_spec_errors_join(&errs, small, 0); /* nothing written */
    /* a NULL error list is allowed */
    ts_job_spec *s = NULL;
    assert_int_equal(ts_spec_parse("x", 1, &s, NULL), TS_EINVAL);
    assert_null(s);
}

/* ---- hostile input ------------------------------------------------------------------ */

static void oversize_refused(void **state)
{
    (void)state;
    size_t len = TS_SPEC_MAX_BYTES + 1;
    char *big = malloc(len + 1);
    assert_non_null(big);
    memset(big, ' ', len);
    big[len] = '\0';
    memcpy(big, BASE_TASKS, strlen(BASE_TASKS));
    ts_spec_errors errs = parse_bad(big, len);
    assert_int_equal(errs.n, 1);
    assert_string_equal(errs.msg[0], "top level: the spec is 1048577 bytes, at most 1048576");
    /* exactly the limit is read */
    big[len - 1] = '\0';
    ts_job_spec *s = parse_ok(big);
    ts_spec_free(s);
    free(big);
}

/* Every accepted spec's canonical JSON is itself acceptable: many small task
 * groups grow when every default is written out. */
static void canonical_json_fits(void **state)
{
    (void)state;
    size_t cap = strlen(BASE) + 16 + 3 * TS_SPEC_MAX_TASKS;
    char *text = malloc(cap);
    assert_non_null(text);
    strcpy(text, BASE "tasks: [{}");
    char *end = text + strlen(text);
    for (int i = 1; i < TS_SPEC_MAX_TASKS; i++, end += 3)
        memcpy(end, ",{}", 3);
    strcpy(end, "]\n");
    ts_spec_errors errs = parse_bad(text, strlen(text));
    assert_int_equal(errs.n, 1);
    assert_true(starts_with(errs.msg[0], "top level: the spec's canonical JSON"));
    free(text);
    /* a long variable name would not read back (libyaml's key limit) */
    char env[1024];
    snprintf(env, sizeof env, BASE_TASKS "env: {%0*d: x}\n", TS_SPEC_ENV_NAME_MAX, 0);
    env[strlen(BASE_TASKS) + 6] = 'A';
    errs = parse_bad(env, strlen(env));
    assert_true(strstr(errs.msg[0], "not a variable name") != NULL);
}

static void alias_bomb_refused(void **state)
{
    (void)state;
    /* "billion laughs": each level lists the one before ten times */
    char text[4096] = BASE_TASKS "x0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n";
    for (int i = 1; i < BOMB_LEVELS; i++) {
        size_t used = strlen(text);
        snprintf(text + used, sizeof text - used, "x%d: &a%d [", i, i);
        for (int k = 0; k < 10; k++) {
            used = strlen(text);
            snprintf(text + used, sizeof text - used, "%s*a%d", k ? ", " : "", i - 1);
        }
        used = strlen(text);
        snprintf(text + used, sizeof text - used, "]\n");
    }
    ts_spec_errors errs = parse_bad(text, strlen(text));
    /* the unknown keys are refused without walking their values */
    assert_int_equal(errs.n, BOMB_LEVELS);
    assert_true(starts_with(errs.msg[0], "x0: unknown key"));

    /* the same bomb inside a key that is walked: refused at the first reuse */
    char cmd[4096] = BASE_TASKS "command: &c0 [a, b]\nenv: {A: &c1 [*c0, *c0]}\n";
    errs = parse_bad(cmd, strlen(cmd));
    assert_true(starts_with(errs.msg[0], "env.A: "));
    static const char cycle[] = BASE_TASKS "topology: &t {required: node, preferred: *t}\n";
    errs = parse_bad(cycle, strlen(cycle));
    assert_int_equal(errs.n, 1);
    assert_true(starts_with(errs.msg[0], "topology.preferred: aliases"));
}

static void deep_nesting_bounded(void **state)
{
    (void)state;
    /* flow: [[[[... and block: - - - ... ; either is refused after a few levels */
    size_t len = 2 * DEEP_LEVELS + 16;
    char *text = malloc(len + 1);
    assert_non_null(text);
    memset(text, '[', DEEP_LEVELS);
    text[DEEP_LEVELS] = '\0';
    ts_spec_errors errs = parse_bad(text, DEEP_LEVELS);
    assert_int_equal(errs.n, 1);
    assert_string_equal(errs.msg[0], "spec:1: nested deeper than 16 levels");
    for (size_t i = 0; i < DEEP_LEVELS; i++)
        memcpy(text + 2 * i, "- ", 2);
    memcpy(text + 2 * DEEP_LEVELS, "x\n", 3);
    errs = parse_bad(text, strlen(text));
    assert_int_equal(errs.n, 1);
    assert_true(starts_with(errs.msg[0], "spec:1: nested deeper"));
    free(text);
    /* as deep as allowed is still read (and refused by the schema) */
    errs = parse_bad(BASE "tasks: [[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]\n",
                     strlen(BASE "tasks: [[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]\n"));
    assert_true(starts_with(errs.msg[0], "tasks[0]: must be a mapping"));
}

/* Bad values are quoted back cut short, one line of valid UTF-8. */
static void messages_are_safe(void **state)
{
    (void)state;
    static const char text[] = BASE_TASKS "tier: \"\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9"
                                          "\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9"
                                          "\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9"
                                          "\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\n\"\n";
    ts_spec_errors errs = parse_bad(text, strlen(text));
    assert_int_equal(errs.n, 1);
    const char *m = errs.msg[0];
    assert_null(strchr(m, '\n'));
    assert_non_null(strstr(m, "...\""));
    /* every multi-byte sequence is whole */
    for (const unsigned char *p = (const unsigned char *)m; *p; p++)
        if (*p == 0xC3)
            assert_true(p[1] == 0xA9);
    /* line breaks of any kind are shown as '?' */
    static const char breaks[] = BASE_TASKS "tier: \"a\\nb\\Nc\\Ld\\Pe\\x9f\"\n";
    errs = parse_bad(breaks, strlen(breaks));
    assert_string_equal(errs.msg[0], "tier: must be guaranteed or opportunistic, got the string "
                                     "\"a?b?c?d?e?\"");
    /* a reason that quotes the value itself (a host list, an image reference) too */
    static const char tabs[] = BASE_TASKS "exclude: \"r-[1\\t\\t, x\"\n";
    errs = parse_bad(tabs, strlen(tabs));
    assert_int_equal(errs.n, 1);
    assert_non_null(strstr(errs.msg[0], "exclude"));
    for (int i = 0; i < errs.n; i++)
        for (const unsigned char *p = (const unsigned char *)errs.msg[i]; *p; p++)
            assert_true(*p >= 0x20 && *p != 0x7F);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(full_spec_values),
        cmocka_unit_test(yaml_and_json_parse_equal),
        cmocka_unit_test(defaults),
        cmocka_unit_test(topology_compact_first_by_default),
        cmocka_unit_test(null_means_default),
        cmocka_unit_test(value_forms),
        cmocka_unit_test(canonical_json_exact),
        cmocka_unit_test(array_throttle),
        cmocka_unit_test(notify_mail_and_hold),
        cmocka_unit_test(image_reference),
        cmocka_unit_test(dependency_error_one_line),
        cmocka_unit_test(canonical_json_round_trips),
        cmocka_unit_test(every_character_round_trips),
        cmocka_unit_test(bad_inputs),
        cmocka_unit_test(dependency_forms),
        cmocka_unit_test(five_errors),
        cmocka_unit_test(errors_capped_and_joined),
        cmocka_unit_test(oversize_refused),
        cmocka_unit_test(canonical_json_fits),
        cmocka_unit_test(alias_bomb_refused),
        cmocka_unit_test(deep_nesting_bounded),
        cmocka_unit_test(messages_are_safe),
        cmocka_unit_test(network_forms),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
