/*
 * test_dtask.c - the storage of a desired task as tesserad writes it
 * (src/ctld/dtask.c): strings made in its arena stay where they were put
 * while more are made (across chunks, and one larger than a chunk); the
 * environment takes the job's own entries and CTLD_DTASK_ENV_EXTRA more, and
 * one more leaves the task unsent rather than cut; a secret's bytes (NUL
 * included) reach the wire whole; a step's task made from its rank's shares
 * its members and owns only its own environment.
 */
#define _DEFAULT_SOURCE /* explicit_bzero, in the file under test */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "ctld/dtask.c"

static void strings_stay_put_across_chunks(void **state)
{
    (void)state;
    ctld_dtask dt = {0};
    const char *s[400];
    for (int i = 0; i < 400; i++) /* ~12 KiB: several chunks */
        assert_non_null(s[i] = ctld_dtask_printf(&dt, "TESSERA_ITEM_%03d=value", i));
    char big[5000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    const char *b = ctld_dtask_printf(&dt, "%s", big); /* over a chunk: one of its own */
    assert_non_null(b);
    assert_string_equal(b, big);
    for (int i = 0; i < 400; i++) {
        char want[32];
        snprintf(want, sizeof want, "TESSERA_ITEM_%03d=value", i);
        assert_string_equal(s[i], want);
    }
    int64_t *v = ctld_dtask_alloc(&dt, 3 * sizeof *v);
    assert_non_null(v);
    assert_int_equal((uintptr_t)v % alignof(max_align_t), 0);
    assert_int_equal(v[0] | v[1] | v[2], 0);
    assert_false(dt.oom);
    ctld_dtask_fini(&dt);
    assert_null(dt.chunks);
}

static void env_has_room_for_the_extras_and_no_more(void **state)
{
    (void)state;
    const char *job_env[] = {"A=1", "B=2"};
    ctld_dtask dt = {0};
    dt.t.present = TS_DT_BIT(TS_DT_JOB) | TS_DT_BIT(TS_DT_RANK) | TS_DT_BIT(TS_DT_ACTION) |
                   TS_DT_BIT(TS_DT_ENV);
    dt.t.job = 7;
    ctld_dtask_env_init(&dt, job_env, 2);
    for (int i = 0; i < CTLD_DTASK_ENV_EXTRA; i++)
        assert_non_null(ctld_dtask_env_add(&dt, "X%d=%d", i, i));
    json_t *o = ctld_dtask_encode(&dt);
    assert_non_null(o);
    json_t *env = json_object_get(o, "env");
    assert_int_equal(json_array_size(env), 2 + CTLD_DTASK_ENV_EXTRA);
    assert_string_equal(json_string_value(json_array_get(env, 0)), "A=1");
    assert_string_equal(json_string_value(json_array_get(env, 2)), "X0=0");
    json_decref(o);
    /* one more than the room: the task is not sent, never sent cut */
    assert_null(ctld_dtask_env_add(&dt, "Y=1"));
    assert_true(dt.oom);
    assert_null(ctld_dtask_encode(&dt));
    ctld_dtask_fini(&dt);
}

static void a_secret_reaches_the_wire_whole(void **state)
{
    (void)state;
    static const char value[] = {'p', 'w', 0, 'd', 0x01};
    ctld_dtask dt = {0};
    dt.t.present = TS_DT_BIT(TS_DT_JOB) | TS_DT_BIT(TS_DT_RANK) | TS_DT_BIT(TS_DT_ACTION) |
                   TS_DT_BIT(TS_DT_SECRETS) | TS_DT_BIT(TS_DT_IMAGE_CREDENTIALS);
    dt.t.job = 1;
    ts_desired_secret *s = ctld_dtask_alloc(&dt, sizeof *s);
    assert_non_null(s);
    s->file = "token";
    s->value = ctld_dtask_secret(&dt, value, sizeof value);
    s->value_len = sizeof value;
    dt.t.secrets = s;
    dt.t.nsecrets = 1;
    dt.t.image_credentials = ctld_dtask_secret(&dt, "u:p", 3);
    dt.t.image_credentials_len = 3;
    assert_true(dt.wipe);
    json_t *o = ctld_dtask_encode(&dt);
    assert_non_null(o);
    json_t *v = json_object_get(json_array_get(json_object_get(o, "secrets"), 0), "value");
    assert_int_equal(json_string_length(v), sizeof value);
    assert_memory_equal(json_string_value(v), value, sizeof value);
    assert_null(json_object_get(json_array_get(json_object_get(o, "secrets"), 0), "env"));
    assert_string_equal(json_string_value(json_object_get(o, "image_credentials")), "u:p");
    json_decref(o);
    ctld_dtask_fini(&dt);
    assert_false(dt.wipe);
}

static void a_step_task_owns_only_its_environment(void **state)
{
    (void)state;
    const char *job_env[] = {"A=1"};
    ctld_dtask rank = {0};
    rank.t.present = TS_DT_BIT(TS_DT_JOB) | TS_DT_BIT(TS_DT_RANK) | TS_DT_BIT(TS_DT_ACTION) |
                     TS_DT_BIT(TS_DT_ENV) | TS_DT_BIT(TS_DT_MASTER_ADDR);
    rank.t.job = 3;
    rank.t.rank = 1;
    ctld_dtask_env_init(&rank, job_env, 1);
    ctld_dtask_env_add(&rank, "TESSERA_JOB_ID=%d", 3);
    rank.t.master_addr = ctld_dtask_printf(&rank, "10.0.0.%d", 2);
    ctld_dtask step = {.t = rank.t};
    ctld_dtask_env_init(&step, rank.t.env.v, rank.t.env.n);
    ctld_dtask_env_add(&step, "SLURM_STEP_ID=%d", 0);
    step.t.present |= TS_DT_BIT(TS_DT_STEP);
    json_t *r = ctld_dtask_encode(&rank), *s = ctld_dtask_encode(&step);
    ctld_dtask_fini(&step); /* the rank's strings are the rank's */
    assert_non_null(r);
    assert_non_null(s);
    assert_int_equal(json_array_size(json_object_get(r, "env")), 2);
    assert_int_equal(json_array_size(json_object_get(s, "env")), 3);
    assert_string_equal(json_string_value(json_object_get(s, "master_addr")), "10.0.0.2");
    assert_string_equal(rank.t.master_addr, "10.0.0.2");
    assert_int_equal(json_integer_value(json_object_get(s, "step")), 0);
    assert_null(json_object_get(r, "step"));
    json_decref(r);
    json_decref(s);
    ctld_dtask_fini(&rank);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(strings_stay_put_across_chunks),
        cmocka_unit_test(env_has_room_for_the_extras_and_no_more),
        cmocka_unit_test(a_secret_reaches_the_wire_whole),
        cmocka_unit_test(a_step_task_owns_only_its_environment),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
