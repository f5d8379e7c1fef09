/*
 * test_sbatch.c - Slurm batch scripts read into job specs (src/api/sbatch*.c,
 * docs/slurm.md).
 *
 * The corpus under tests/data/sbatch holds at least 30 scripts, together
 * covering every supported directive; each says in comments what it must
 * give: "# expect: nodes=2 tasks=8 ..." (the interpretation and spec
 * fields), "# expect-error:", "# expect-warning:" or "# expect-command:"
 * (a substring), and "# args:" (command-line options that override the
 * script). Each is read with the same environment, submit directory and
 * slurm map (tests/data/sbatch/map.txt). The grammar of times and arrays,
 * the map, and hostile inputs are tested apart.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "tessera/sbatch.h"

#define CORPUS TS_TEST_DATA "/sbatch"
#define CORPUS_MIN 30
#define MAX_ARGS 16

static const char *const ENVIRON[] = {"HOME=/home/alice", "PATH=/usr/bin:/bin",
                                      "TESSERA_TOKEN=secret", "SLURM_JOB_ID=9",
                                      "BAD-NAME=x", NULL};

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    char *buf = malloc(1 << 20);
    assert_non_null(buf);
    *len = fread(buf, 1, (1 << 20) - 1, f);
    buf[*len] = '\0';
    fclose(f);
    return buf;
}

static ts_sbatch_map *corpus_map(void)
{
    size_t len;
    char *text = slurp(CORPUS "/map.txt", &len);
    ts_sbatch_map *m = NULL;
    ts_err err;
    assert_int_equal(ts_sbatch_map_parse(text, len, &m, &err), 0);
    free(text);
    return m;
}

/* The value after "# KEY: " in text, copied into out; false if none. */
static bool comment(const char *text, const char *key, char *out, size_t size)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\n# %s: ", key);
    const char *p = strstr(text, pat);
    if (!p)
        return false;
    p += strlen(pat);
    size_t n = strcspn(p, "\n");
    snprintf(out, size, "%.*s", (int)n, p);
    return true;
}

static const char *env_of(json_t *spec, const char *name)
{
    return json_string_value(json_object_get(json_object_get(spec, "env"), name));
}

static bool command_has(json_t *spec, const char *needle)
{
    size_t i;
    json_t *a;
    json_array_foreach(json_object_get(spec, "command"), i, a)
        if (strstr(json_string_value(a), needle))
            return true;
    return false;
}

static void check_expect(const char *file, const ts_sbatch *sb, const char *expect)
{
    json_t *spec = json_loads(sb->spec_json, 0, NULL);
    assert_non_null(spec);
    json_t *task = json_array_get(json_object_get(spec, "tasks"), 0);
    char buf[512];
    snprintf(buf, sizeof buf, "%s", expect);
    char *save = NULL;
    for (char *tok = strtok_r(buf, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
        char *eq = strchr(tok, '=');
        assert_non_null(eq);
        *eq = '\0';
        const char *k = tok, *v = eq + 1;
        long n = strtol(v, NULL, 10);
        const ts_sbatch_shape *s = &sb->shape;
        bool ok = true;
        if (strcmp(k, "nodes") == 0)
            ok = s->nodes == n;
        else if (strcmp(k, "tasks") == 0)
            ok = s->ntasks == n && json_integer_value(json_object_get(task, "count")) == n;
        else if (strcmp(k, "cpus") == 0)
            ok = s->cpus_per_task == n &&
                 json_integer_value(json_object_get(task, "cpu_milli")) == n * 1000;
        else if (strcmp(k, "gpus") == 0)
            ok = s->gpus == n && json_integer_value(json_object_get(task, "gpus")) * s->ntasks == n;
        else if (strcmp(k, "mem") == 0)
            ok = s->mem_mib == n;
        else if (strcmp(k, "memtask") == 0)
            ok = s->mem_per_task_mib == n &&
                 json_integer_value(json_object_get(task, "memory_mib")) == n;
        else if (strcmp(k, "time") == 0) /* less a --signal's lead: it ends at --time */
            ok = s->time_limit_min == n &&
                 json_integer_value(json_object_get(spec, "time_limit")) +
                         json_integer_value(json_object_get(json_object_get(spec, "checkpoint"),
                                                            "grace")) ==
                     n * 60;
        else if (strcmp(k, "array") == 0)
            ok = s->array_count == n &&
                 (n == 0 ? !json_object_get(spec, "array_size")
                         : json_integer_value(json_object_get(spec, "array_size")) == n);
        else if (strcmp(k, "list") == 0)
            ok = s->array && strcmp(s->array, v) == 0 && env_of(spec, "TESSERA_SLURM_ARRAY") &&
                 strcmp(env_of(spec, "TESSERA_SLURM_ARRAY"), v) == 0;
        else if (strcmp(k, "throttle") == 0)
            ok = s->array_throttle == n;
        else if (strcmp(k, "model") == 0)
            ok = json_is_string(json_object_get(task, "gpu_model")) &&
                 strcmp(json_string_value(json_object_get(task, "gpu_model")), v) == 0;
        else if (strcmp(k, "tenant") == 0 || strcmp(k, "tier") == 0 || strcmp(k, "name") == 0)
            ok = json_is_string(json_object_get(spec, k)) &&
                 strcmp(json_string_value(json_object_get(spec, k)), v) == 0;
        else if (strcmp(k, "signal") == 0)
            ok = json_integer_value(
                     json_object_get(json_object_get(spec, "checkpoint"), "signal")) == n;
        else if (strcmp(k, "grace") == 0)
            ok = json_integer_value(
                     json_object_get(json_object_get(spec, "checkpoint"), "grace")) == n;
        else if (strcmp(k, "constraint") == 0 || strcmp(k, "nodelist") == 0 ||
                 strcmp(k, "exclude") == 0 || strcmp(k, "reservation") == 0)
            ok = json_is_string(json_object_get(spec, k)) &&
                 strcmp(json_string_value(json_object_get(spec, k)), v) == 0;
        else if (strcmp(k, "dep") == 0)
            ok = json_is_string(json_object_get(spec, "dependency")) &&
                 strcmp(json_string_value(json_object_get(spec, "dependency")), v) == 0;
        else if (strcmp(k, "hold") == 0) /* --hold: the job is submitted held */
            ok = json_is_true(json_object_get(spec, "hold")) == (n != 0);
        else if (strcmp(k, "mail") == 0) /* --mail-user/--mail-type: notify.mail */
            ok = json_is_string(json_array_get(
                     json_object_get(json_object_get(spec, "notify"), "mail"), 0)) &&
                 strcmp(json_string_value(json_array_get(
                            json_object_get(json_object_get(spec, "notify"), "mail"), 0)),
                        v) == 0;
        else if (strcmp(k, "noenv") == 0)
            ok = env_of(spec, v) == NULL;
        else if (strcmp(k, "env") == 0) {
            char *e2 = strchr(v, '=');
            assert_non_null(e2);
            *e2 = '\0';
            ok = env_of(spec, v) && strcmp(env_of(spec, v), e2 + 1) == 0;
        } else
            fail_msg("%s: unknown expect key %s", file, k);
        if (!ok)
            fail_msg("%s: %s=%s does not hold; spec %s", file, k, v, sb->spec_json);
    }
    /* never from the submitting shell: Tessera's token, Slurm's variables, bad names */
    assert_null(env_of(spec, "TESSERA_TOKEN"));
    assert_null(env_of(spec, "BAD-NAME"));
    assert_null(env_of(spec, "SLURM_JOB_ID"));
    assert_string_equal(json_string_value(json_object_get(spec, "workdir")), "/submit");
    json_decref(spec);
}

static void run_one(const char *dir, const char *file, const ts_sbatch_map *map)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    size_t len;
    char *text = slurp(path, &len);
    char args[256] = "", expect[512], want[256];
    const char *argv[MAX_ARGS];
    int argc = 0;
    if (comment(text, "args", args, sizeof args)) {
        char *save = NULL;
        for (char *t = strtok_r(args, " ", &save); t && argc < MAX_ARGS;
             t = strtok_r(NULL, " ", &save))
            argv[argc++] = t;
    }
    ts_sbatch_input in = {.script_name = file, .argv = argv, .argc = argc,
                          .environ = ENVIRON, .submit_dir = "/submit", .map = map};
    ts_sbatch *sb = NULL;
    ts_spec_errors errs;
    int rc = ts_sbatch_parse(text, len, &in, &sb, &errs);
    if (comment(text, "expect-error", want, sizeof want)) {
        if (rc != TS_EINVAL)
            fail_msg("%s: parsed, but should fail with \"%s\"", file, want);
        bool found = false;
        for (int i = 0; i < errs.n; i++)
            found = found || strstr(errs.msg[i], want);
        if (!found)
            fail_msg("%s: no error has \"%s\" (first: %s)", file, want, errs.msg[0]);
        assert_null(sb);
    } else {
        if (rc != 0)
            fail_msg("%s: %s", file, errs.msg[0]);
        assert_true(comment(text, "expect", expect, sizeof expect));
        check_expect(file, sb, expect);
        if (comment(text, "expect-warning", want, sizeof want)) {
            bool found = false;
            for (int i = 0; i < sb->nwarnings; i++)
                found = found || strstr(sb->warnings[i], want);
            if (!found)
                fail_msg("%s: no warning has \"%s\"", file, want);
        } else if (sb->nwarnings > 0) {
            fail_msg("%s: unexpected warning %s", file, sb->warnings[0]);
        }
        if (comment(text, "expect-command", want, sizeof want)) {
            json_t *spec = json_loads(sb->spec_json, 0, NULL);
            if (!command_has(spec, want))
                fail_msg("%s: the command has no \"%s\": %s", file, want, sb->spec_json);
            json_decref(spec);
        }
        ts_sbatch_free(sb);
    }
    free(text);
}

static void test_corpus(void **state)
{
    (void)state;
    ts_sbatch_map *map = corpus_map();
    DIR *d = opendir(CORPUS);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t l = strlen(e->d_name);
        if (l < 4 || strcmp(e->d_name + l - 3, ".sh") != 0)
            continue;
        run_one(CORPUS, e->d_name, map);
        n++;
    }
    closedir(d);
    ts_sbatch_map_free(map);
    assert_true(n >= CORPUS_MIN);
}

static void test_time_formats(void **state)
{
    (void)state;
    static const struct {
        const char *s;
        int64_t min;
    } cases[] = {
        {"90", 90},          {"0:30", 1},        {"10:30", 11},     {"10:00", 10},
        {"2:00:00", 120},    {"1:02:03", 63},    {"2-12", 3600},    {"1-0:30", 1470},
        {"1-02:30:00", 1590}, {"3-0:0:1", 4321}, {"", -1},          {"1:2:3:4", -1},
        {"abc", -1},         {"-5", -1},         {"5-", -1},        {"1h", -1},
        {"1-2-3", -1},       {"99999999999", -1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (ts_sbatch_time_min(cases[i].s) != cases[i].min)
            fail_msg("time \"%s\": got %lld, want %lld", cases[i].s,
                     (long long)ts_sbatch_time_min(cases[i].s), (long long)cases[i].min);
}

/* Parses a script made of lines, with optional command-line options. */
static int parse_lines(const char *body, const char *const *argv, int argc, ts_sbatch **sb,
                       ts_spec_errors *errs)
{
    char text[8192];
    snprintf(text, sizeof text, "#!/bin/sh\n%s", body);
    ts_sbatch_input in = {.script_name = "t.sh", .argv = argv, .argc = argc,
                          .tenant = "t", .submit_dir = "/s"};
    return ts_sbatch_parse(text, strlen(text), &in, sb, errs);
}

static void expect_error(const char *body, const char *const *argv, int argc, const char *want)
{
    ts_sbatch *sb = NULL;
    ts_spec_errors errs;
    int rc = parse_lines(body, argv, argc, &sb, &errs);
    if (rc != TS_EINVAL || !strstr(errs.msg[0], want))
        fail_msg("%s: want error \"%s\", got rc %d \"%s\"", body, want, rc,
                 rc ? errs.msg[0] : "");
    assert_null(sb);
}

static void test_arrays(void **state)
{
    (void)state;
    static const struct {
        const char *in, *canon;
        int count;
    } cases[] = {
        {"0-9", "0-9", 10},          {"5,1,3", "1-5:2", 3},     {"1,1,1", "1", 1},
        {"0-15:4", "0-12:4", 4},     {"7", "7", 1},             {"1,2", "1,2", 2},
        {"1-3,10-12", "1-3,10-12", 6}, {"0-99%5", "0-99", 100}, {"4000000", "4000000", 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char line[128];
        snprintf(line, sizeof line, "#SBATCH --array=%s\n", cases[i].in);
        ts_sbatch *sb = NULL;
        ts_spec_errors errs;
        assert_int_equal(parse_lines(line, NULL, 0, &sb, &errs), 0);
        assert_string_equal(sb->shape.array, cases[i].canon);
        assert_int_equal(sb->shape.array_count, cases[i].count);
        /* the agent's reading of the list gives the indices back in order */
        long prev = -1;
        for (int k = 0; k < cases[i].count; k++) {
            long idx = ts_sbatch_array_nth(sb->shape.array, k);
            assert_true(idx > prev);
            prev = idx;
        }
        assert_int_equal(ts_sbatch_array_nth(sb->shape.array, cases[i].count), -1);
        ts_sbatch_free(sb);
    }
    assert_int_equal(ts_sbatch_array_nth("1-19:3", 2), 7);
    assert_int_equal(ts_sbatch_array_nth("1-5:2,7-9", 4), 8);
    assert_int_equal(ts_sbatch_array_nth("x", 0), -1);
    expect_error("#SBATCH --array=5-1\n", NULL, 0, "--array: a range N-M needs M >= N");
    expect_error("#SBATCH --array=0-200000\n", NULL, 0, "more than 100000 elements");
    expect_error("#SBATCH --array=1,\n", NULL, 0, "ends with ','");
    expect_error("#SBATCH --array=1-9%0\n", NULL, 0, "throttle");
    expect_error("#SBATCH --array=4000001\n", NULL, 0, "--array:");
    expect_error("#SBATCH --array=1-9:0\n", NULL, 0, "step");
}

static void test_overrides_and_groups(void **state)
{
    (void)state;
    /* the command line wins, also across a group (--gpus over the script's --gres) */
    const char *argv[] = {"--gpus=4", "-n", "4", "--mem-per-cpu", "1G"};
    ts_sbatch *sb = NULL;
    ts_spec_errors errs;
    assert_int_equal(parse_lines("#SBATCH --gres=gpu:8 -n 8 --mem=64G\n", argv, 5, &sb, &errs),
                     0);
    assert_int_equal(sb->shape.gpus, 4);
    assert_int_equal(sb->shape.ntasks, 4);
    assert_int_equal(sb->shape.mem_per_task_mib, 1024);
    ts_sbatch_free(sb);
    /* two of a group in one place is an error naming the group */
    expect_error("#SBATCH --gres=gpu:8 --gpus=8\n", NULL, 0, "give one of --gpus");
    expect_error("#SBATCH --mem=1G\n#SBATCH --mem-per-cpu=1G\n", NULL, 0, "give one of --mem");
    const char *two[] = {"--mem=1G", "--mem-per-gpu=2G"};
    expect_error("", two, 2, "--mem-per-gpu: give one of --mem");
}

/* pyxis's --container-image: the job's image (docs/images.md), its REGISTRY#IMAGE
 * form read as REGISTRY/IMAGE; a reference without a registry is an error */
static void test_container_image(void **state)
{
    (void)state;
    ts_sbatch *sb = NULL;
    ts_spec_errors errs;
    assert_int_equal(parse_lines("#SBATCH --container-image=reg.example:5000#team/torch:2\n",
                                 NULL, 0, &sb, &errs), 0);
    json_t *spec = json_loads(sb->spec_json, 0, NULL);
    assert_string_equal(json_string_value(json_object_get(spec, "image")),
                        "reg.example:5000/team/torch:2");
    json_decref(spec);
    assert_int_equal(sb->nwarnings, 0);
    ts_sbatch_free(sb);
    /* its output files would be opened inside the container: said */
    assert_int_equal(parse_lines("#SBATCH --container-image=reg.example:5000#team/torch:2\n"
                                 "#SBATCH -o out-%j.txt\n", NULL, 0, &sb, &errs), 0);
    assert_int_equal(sb->nwarnings, 1);
    assert_non_null(strstr(sb->warnings[0], "--output: opened inside the container"));
    ts_sbatch_free(sb);
    expect_error("#SBATCH --container-image=ubuntu:22.04\n", NULL, 0,
                 "t.sh:2: --container-image: must name the registry");
}

static void test_refusals(void **state)
{
    (void)state;
    expect_error("#SBATCH --licenses=x\n", NULL, 0, "t.sh:2: --licenses: not supported");
    /* every error at once, each with its file and line: those of the options
     * (read line by line) and those found once the whole script is read */
    {
        ts_sbatch *sb = NULL;
        ts_spec_errors errs;
        assert_int_equal(parse_lines("#SBATCH --frobnicate\n#SBATCH --qos=normal\n"
                                     "#SBATCH --gres=gpu:a100:2 -J \"my job\"\n",
                                     NULL, 0, &sb, &errs), TS_EINVAL);
        assert_null(sb);
        assert_int_equal(errs.n, 4);
        const char *want[] = {"t.sh:2: --frobnicate: unknown option",
                              "t.sh:4: --gres: ambiguous GPU type", "t.sh:3: --qos: no tier",
                              "t.sh:4: --job-name: \"my job\""};
        for (int k = 0; k < 4; k++)
            if (!strstr(errs.msg[k], want[k]))
                fail_msg("error %d: want \"%s\", got \"%s\"", k, want[k], errs.msg[k]);
    }
    /* DOS line breaks, refused as sbatch refuses them, naming the first */
    expect_error("#SBATCH -J x\necho hi\r\n", NULL, 0, "t.sh:3: DOS line breaks");
    expect_error("#SBATCH --nodelist=n-[3-1]\n", NULL, 0, "t.sh:2: --nodelist: \"n-[3-1]\"");
    expect_error("#SBATCH -w n1,\n", NULL, 0, "--nodelist: ends with a comma");
    expect_error("#SBATCH -x a,,b\n", NULL, 0, "--exclude: empty name at byte 2");
    expect_error("#SBATCH -C a&&b\n", NULL, 0, "--constraint: empty feature name at byte 2");
    expect_error("#SBATCH --constraint=a(b)\n", NULL, 0, "--constraint: '(' at byte 1");
    expect_error("#SBATCH --frobnicate\n", NULL, 0, "--frobnicate: unknown option");
    expect_error("#SBATCH --nodes=2-4\n", NULL, 0, "a range of node counts");
    expect_error("#SBATCH --mem=0\n", NULL, 0, "all of a node's memory");
    expect_error("#SBATCH --mem=12X\n", NULL, 0, "--mem: must be a size");
    expect_error("#SBATCH --time=UNLIMITED\n", NULL, 0, "UNLIMITED is not supported");
    expect_error("#SBATCH --gres=gpu:4,nvme:1\n", NULL, 0, "only one gres");
    expect_error("#SBATCH --gres=license:1\n", NULL, 0, "only gpu gres");
    expect_error("#SBATCH --gpus=zz99:2\n", NULL, 0, "unknown GPU type \"zz99\"");
    expect_error("#SBATCH --gpus=a100:2\n", NULL, 0, "ambiguous GPU type");
    expect_error("#SBATCH --gpus=64 -n 2\n", NULL, 0, "32 GPUs per task, more than 16");
    expect_error("#SBATCH -N 4 -n 2\n", NULL, 0, "2 tasks cannot fill 4 nodes");
    expect_error("#SBATCH --signal=KILL@10\n", NULL, 0, "cannot be caught");
    expect_error("#SBATCH --signal=USR1@99999\n", NULL, 0, "0..65535");
    expect_error("#SBATCH --export=A=1,B-C\n", NULL, 0, "--export:");
    expect_error("#SBATCH --job-name='has space'\n", NULL, 0, "not a Tessera job name");
    expect_error("#SBATCH --job-name=\"open\n", NULL, 0, "unterminated quote");
    expect_error("#SBATCH --qos=gold\n", NULL, 0, "--qos: no tier for \"gold\"");
    expect_error("#SBATCH --dependency=afterok:1?afterany:2,afterok:3\n", NULL, 0,
                 "cannot be mixed");
    /* Slurm's forms Tessera does not evaluate are refused by name */
    expect_error("#SBATCH --dependency=afterok:12+30\n", NULL, 0,
                 "--dependency: \"afterok:12+30\": a delay after '+' is not supported");
    expect_error("#SBATCH --dependency=afterok:12_3\n", NULL, 0, "an array element");
    expect_error("#SBATCH --dependency=aftercorr:12\n", NULL, 0, "aftercorr and afterburstbuffer");
    expect_error("#SBATCH --output=%5j.out\n", NULL, 0, "--output: a % pattern");
    expect_error("#SBATCH -N\n", NULL, 0, "--nodes: needs a value");
    expect_error("#SBATCH --wait\n", NULL, 0, "--wait: not supported");
    expect_error("#SBATCH --requeue=yes\n", NULL, 0, "takes no value");

    /* not scripts */
    ts_sbatch_input in = {.script_name = "x", .tenant = "t"};
    ts_sbatch *sb = NULL;
    ts_spec_errors errs;
    /* --hold submits the job held (docs/slurm.md) */
    const char *held = "#!/bin/sh\n#SBATCH --hold\ntrue\n";
    assert_int_equal(ts_sbatch_parse(held, strlen(held), &in, &sb, &errs), 0);
    assert_non_null(strstr(sb->spec_json, "\"hold\":true"));
    ts_sbatch_free(sb);
    sb = NULL;
    /* --nice[=N]: the spec's nice, 100 without a value (as Slurm) */
    const char *niced = "#!/bin/sh\n#SBATCH --nice=-7\ntrue\n";
    assert_int_equal(ts_sbatch_parse(niced, strlen(niced), &in, &sb, &errs), 0);
    assert_non_null(strstr(sb->spec_json, "\"nice\":-7"));
    ts_sbatch_free(sb);
    niced = "#!/bin/sh\n#SBATCH --nice\ntrue\n";
    assert_int_equal(ts_sbatch_parse(niced, strlen(niced), &in, &sb, &errs), 0);
    assert_non_null(strstr(sb->spec_json, "\"nice\":100"));
    ts_sbatch_free(sb);
    sb = NULL;
    expect_error("#SBATCH --nice=lots\n", NULL, 0, "--nice: an integer");
    assert_int_equal(ts_sbatch_parse("echo hi\n", 8, &in, &sb, &errs), TS_EINVAL);
    assert_non_null(strstr(errs.msg[0], "first line must be #!"));
    assert_int_equal(ts_sbatch_parse("#!/bin/sh\n\xff\n", 12, &in, &sb, &errs), TS_EINVAL);
    assert_non_null(strstr(errs.msg[0], "UTF-8"));
    assert_int_equal(ts_sbatch_parse("#!/usr/bin/perl\n", 16, &in, &sb, &errs), TS_EINVAL);
    assert_non_null(strstr(errs.msg[0], "interpreter \"perl\""));
    size_t big = TS_SBATCH_MAX_BYTES + 1;
    char *huge = malloc(big);
    assert_non_null(huge);
    memset(huge, '#', big);
    huge[1] = '!';
    assert_int_equal(ts_sbatch_parse(huge, big, &in, &sb, &errs), TS_EINVAL);
    assert_non_null(strstr(errs.msg[0], "larger than"));
    free(huge);
    /* without a tenant anywhere */
    ts_sbatch_input none = {.script_name = "x"};
    assert_int_equal(ts_sbatch_parse("#!/bin/sh\n", 10, &none, &sb, &errs), TS_EINVAL);
    assert_non_null(strstr(errs.msg[0], "tenant: give #SBATCH --account"));
}

static void test_map(void **state)
{
    (void)state;
    static const struct {
        const char *text, *want;
    } bad[] = {
        {"qos normal gold\n", "a qos maps to guaranteed or opportunistic"},
        {"queue x y\n", "kind must be qos, account or partition"},
        {"account a\n", "must be KIND NAME VALUE"},
        {"account a b\naccount a c\n", "slurm map:2: account a is mapped twice"},
        {"account a b!\n", "names are"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ts_sbatch_map *m = NULL;
        ts_err err;
        assert_int_equal(ts_sbatch_map_parse(bad[i].text, strlen(bad[i].text), &m, &err),
                         TS_EINVAL);
        assert_null(m);
        if (!strstr(err.msg, bad[i].want))
            fail_msg("map \"%s\": got \"%s\"", bad[i].text, err.msg);
    }
    const char *good = "# comment\n\naccount lab1 research   # trailing\npartition big vision\n";
    ts_sbatch_map *m = NULL;
    ts_err err;
    assert_int_equal(ts_sbatch_map_parse(good, strlen(good), &m, &err), 0);
    const char *script = "#!/bin/sh\n#SBATCH -A lab1\n";
    ts_sbatch_input in = {.script_name = "x", .map = m};
    ts_sbatch *sb = NULL;
    ts_spec_errors errs;
    assert_int_equal(ts_sbatch_parse(script, strlen(script), &in, &sb, &errs), 0);
    assert_non_null(strstr(sb->spec_json, "\"tenant\":\"research\""));
    ts_sbatch_free(sb);
    ts_sbatch_map_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_corpus),       cmocka_unit_test(test_time_formats),
        cmocka_unit_test(test_arrays),       cmocka_unit_test(test_overrides_and_groups),
        cmocka_unit_test(test_refusals),     cmocka_unit_test(test_map),
        cmocka_unit_test(test_container_image),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
