/*
 * test_spec_secrets.c - the job spec's `secrets:` list (docs/job-spec.md,
 * docs/secrets.md) and the credential patterns of tessera sbatch's --export
 * (docs/slurm.md "Credentials in the environment"), and its `notify:` webhook.
 *
 * Every form parses to the names and targets the page says and survives the
 * canonical JSON round trip; each bad entry is one error at its path; a
 * spec without secrets keeps its canonical JSON without the key. The
 * sbatch side: ALL leaves credential-looking variables out with one warning
 * naming them, --export naming one is refused unless it is a secret.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/sbatch_req.h"
#include "api/spec_equal.h"
#include "tessera/sbatch.h"
#include "tessera/spec.h"

#define BASE "tenant: t\nname: n\ntasks: [{gpus: 1}]\n"

static ts_job_spec *parse(const char *text, ts_spec_errors *errs)
{
    ts_job_spec *s = NULL;
    ts_spec_parse(text, strlen(text), &s, errs);
    return s;
}

static void forms_and_round_trip(void **state)
{
    (void)state;
    ts_spec_errors errs;
    ts_job_spec *s = parse(BASE "env: {A: 1}\nsecrets: [WANDB_API_KEY, {name: HF, env: HF_TOKEN},"
                           " {name: GCP, file: key.json}]\n", &errs);
    assert_non_null(s);
    assert_int_equal(s->nsecrets, 3);
    assert_string_equal(s->secrets[0].name, "WANDB_API_KEY");
    assert_string_equal(s->secrets[0].target, "WANDB_API_KEY");
    assert_false(s->secrets[0].file);
    assert_string_equal(s->secrets[1].target, "HF_TOKEN");
    assert_string_equal(s->secrets[2].target, "key.json");
    assert_true(s->secrets[2].file);
    char *json = ts_spec_to_json(s);
    assert_non_null(strstr(json, "\"secrets\":[{\"name\":\"WANDB_API_KEY\",\"env\":"
                                 "\"WANDB_API_KEY\"},{\"name\":\"HF\",\"env\":\"HF_TOKEN\"},"
                                 "{\"name\":\"GCP\",\"file\":\"key.json\"}]"));
    ts_job_spec *back = parse(json, &errs);
    char why[256];
    assert_true(ts_test_spec_equal(s, back, why, sizeof why));
    char *again = ts_spec_to_json(back);
    assert_string_equal(json, again);
    free(again);
    free(json);
    ts_spec_free(back);
    ts_spec_free(s);
    /* none: the canonical JSON has no key (older specs stay byte for byte) */
    s = parse(BASE, &errs);
    json = ts_spec_to_json(s);
    assert_null(strstr(json, "secrets"));
    free(json);
    ts_spec_free(s);
}

static void bad_entries(void **state)
{
    (void)state;
    static const struct {
        const char *text, *path;
    } cases[] = {
        {BASE "secrets: X\n", "secrets: must be a list"},
        {BASE "secrets: [9X]\n", "secrets[0]: must be a secret's name"},
        {BASE "secrets: [{env: X}]\n", "secrets[0].name: required"},
        {BASE "secrets: [{name: X, env: A, file: f}]\n", "secrets[0]: give env or file"},
        {BASE "secrets: [{name: X, file: ../x}]\n", "secrets[0].file: must be a file name"},
        {BASE "secrets: [{name: X, file: ..}]\n", "secrets[0].file: must be a file name"},
        {BASE "secrets: [{name: X, other: 1}]\n", "secrets[0].other"},
        {BASE "secrets: [A, A]\n", "secrets[1]: variable \"A\" is given by secrets[0]"},
        {BASE "env: {A: 1}\nsecrets: [A]\n", "secrets[0]: variable \"A\" is in env too"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ts_spec_errors errs;
        ts_job_spec *s = parse(cases[i].text, &errs);
        assert_null(s);
        assert_int_equal(errs.n, 1);
        if (strncmp(errs.msg[0], cases[i].path, strlen(cases[i].path)) != 0)
            fail_msg("case %zu: want \"%s...\", got \"%s\"", i, cases[i].path, errs.msg[0]);
    }
    /* 65 secrets: too many */
    char text[4096] = BASE "secrets: [";
    for (int i = 0; i <= TS_SPEC_MAX_SECRETS; i++)
        snprintf(text + strlen(text), sizeof text - strlen(text), "%sS%d", i ? ", " : "", i);
    strcat(text, "]\n");
    ts_spec_errors errs;
    assert_null(parse(text, &errs));
    assert_non_null(strstr(errs.msg[0], "at most 64"));
}

/* notify: (docs/job-spec.md "notify"): its forms, Slurm's names, the
 * round trip, and each bad entry one error at its path. */
static void notify_forms(void **state)
{
    (void)state;
    ts_spec_errors errs;
    ts_job_spec *s = parse(BASE "notify: {url: 'https://h.example/x?a=1', on: [fail, BEGIN]}\n",
                           &errs);
    assert_non_null(s);
    assert_string_equal(s->notify_url, "https://h.example/x?a=1");
    assert_int_equal(s->notify_on, TS_NOTIFY_START | TS_NOTIFY_FAIL);
    char *json = ts_spec_to_json(s);
    assert_non_null(strstr(json, "\"notify\":{\"url\":\"https://h.example/x?a=1\",\"on\":"
                                 "[\"start\",\"fail\"]}"));
    ts_job_spec *back = parse(json, &errs);
    assert_non_null(back);
    char why[256];
    if (!ts_test_spec_equal(s, back, why, sizeof why))
        fail_msg("round trip differs at %s", why);
    free(json);
    ts_spec_free(back);
    ts_spec_free(s);
    s = parse(BASE "notify: {url: 'http://127.0.0.1:9/h'}\n", &errs);
    assert_non_null(s);
    assert_int_equal(s->notify_on, TS_NOTIFY_END); /* on defaults to [end] */
    ts_spec_free(s);
    s = parse(BASE "notify: {url: 'http://h/', on: [ALL]}\n", &errs);
    assert_non_null(s);
    assert_int_equal(s->notify_on, TS_NOTIFY_START | TS_NOTIFY_END | TS_NOTIFY_FAIL);
    ts_spec_free(s);
    static const struct {
        const char *text, *path;
    } cases[] = {
        {BASE "notify: 'http://h/'\n", "notify: must be a mapping"},
        {BASE "notify: {on: [end]}\n", "notify.url: required"},
        {BASE "notify: {url: 'ftp://h/x'}\n", "notify.url: must be an http"},
        {BASE "notify: {url: 'http://h/a b'}\n", "notify.url: must be an http"},
        {BASE "notify: {url: 'http://h/', on: end}\n", "notify.on: must be a list"},
        {BASE "notify: {url: 'http://h/', on: [later]}\n", "notify.on: must be start, end"},
        {BASE "notify: {url: 'http://h/', on: []}\n", "notify.on: must name at least one"},
        {BASE "notify: {url: 'http://h/', mail: x}\n", "notify.mail"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        assert_null(parse(cases[i].text, &errs));
        assert_int_equal(errs.n, 1);
        if (strncmp(errs.msg[0], cases[i].path, strlen(cases[i].path)) != 0)
            fail_msg("case %zu: want \"%s...\", got \"%s\"", i, cases[i].path, errs.msg[0]);
    }
}

static void credential_patterns(void **state)
{
    (void)state;
    static const char *const yes[] = {"AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "HF_TOKEN",
                                      "GITHUB_TOKEN", "WANDB_API_KEY", "OPENAI_API_KEY",
                                      "PGPASSWORD", "db_password", "MY_APIKEY", "TOKEN",
                                      "SSH_PRIVATE_KEY", "client_secret", "AWS_ACCESS_KEY_ID"};
    static const char *const no[] = {"PATH", "HOME", "TOKENIZERS_PARALLELISM", "KEY",
                                     "HF_HOME", "CUDA_VISIBLE_DEVICES", "NCCL_DEBUG",
                                     "GOOGLE_APPLICATION_CREDENTIALS"};
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++)
        if (!sbatch_env_credential(yes[i]))
            fail_msg("%s should look like a credential", yes[i]);
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++)
        if (sbatch_env_credential(no[i]))
            fail_msg("%s should not look like a credential", no[i]);
}

static ts_sbatch *sbatch(const char *const *argv, int argc, const char *const *secrets,
                         int nsecrets, ts_spec_errors *errs)
{
    static const char *const environ_[] = {"HF_TOKEN=hf_x", "AWS_SECRET_ACCESS_KEY=a",
                                           "PLAIN=1", NULL};
    static const char script[] = "#!/bin/sh\n#SBATCH --gpus=1 --account=t\ntrue\n";
    ts_sbatch_input in = {.script_name = "s.sh", .argv = argv, .argc = argc,
                          .environ = environ_, .secrets = secrets, .nsecrets = nsecrets};
    ts_sbatch *sb = NULL;
    ts_sbatch_parse(script, strlen(script), &in, &sb, errs);
    return sb;
}

static void sbatch_export(void **state)
{
    (void)state;
    ts_spec_errors errs;
    ts_sbatch *sb = sbatch(NULL, 0, NULL, 0, &errs);
    assert_non_null(sb);
    assert_null(strstr(sb->spec_json, "hf_x"));
    assert_null(strstr(sb->spec_json, "AWS_SECRET"));
    assert_non_null(strstr(sb->spec_json, "\"PLAIN\":\"1\""));
    bool warned = false;
    for (int i = 0; i < sb->nwarnings; i++)
        warned |= strstr(sb->warnings[i], "left out 2 variables that look like credentials: "
                                          "AWS_SECRET_ACCESS_KEY, HF_TOKEN") != NULL;
    assert_true(warned);
    ts_sbatch_free(sb);
    /* named: refused, unless a secret */
    static const char *const named[] = {"--export=HF_TOKEN,PLAIN"};
    sb = sbatch(named, 1, NULL, 0, &errs);
    assert_null(sb);
    assert_non_null(strstr(errs.msg[0], "--export: HF_TOKEN looks like a credential"));
    static const char *const sec[] = {"HF_TOKEN"};
    sb = sbatch(named, 1, sec, 1, &errs);
    assert_non_null(sb);
    assert_null(strstr(sb->spec_json, "hf_x"));
    assert_non_null(strstr(sb->spec_json, "\"secrets\":[\"HF_TOKEN\"]"));
    ts_sbatch_free(sb);
    /* NONE: nothing exported, nothing to warn of */
    static const char *const none[] = {"--export=NONE"};
    sb = sbatch(none, 1, NULL, 0, &errs);
    assert_non_null(sb);
    for (int i = 0; i < sb->nwarnings; i++)
        assert_null(strstr(sb->warnings[i], "credentials"));
    ts_sbatch_free(sb);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(forms_and_round_trip),
        cmocka_unit_test(bad_entries),
        cmocka_unit_test(notify_forms),
        cmocka_unit_test(credential_patterns),
        cmocka_unit_test(sbatch_export),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
