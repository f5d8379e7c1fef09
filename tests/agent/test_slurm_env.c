/*
 * test_slurm_env.c - the SLURM_* variables a batch script's tasks get
 * (src/agent/launch_env.c, docs/agent-tasks.md "Slurm variables").
 *
 * A job from `tessera sbatch` (its env holds SLURM_JOB_NAME) gets Slurm's
 * per-task variables from its rank and the controller's TESSERA_* values,
 * the array index mapped through the script's index list; a job submitted
 * as a spec gets none (frameworks read SLURM_NTASKS as "under Slurm"); and
 * a job cannot choose its own SLURM_PROCID.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "agent/launch_env.h"

static ts_envv build(const char *const *env, int world, int rank, int local)
{
    ts_task_spec s = {.task_id = "j7-r1", .env = env, .world_size = world, .rank = rank,
                      .local_rank = local, .master_addr = "node001"};
    struct ts_env_user u = {.name = "alice", .home = "/home/alice"};
    ts_envv e = {0};
    assert_int_equal(agent_envv_build(&e, &s, &u, "/tmp/ack"), 0);
    return e;
}

static void expect(const ts_envv *e, const char *name, const char *value)
{
    const char *v = agent_envv_get(e, name);
    if (value == NULL ? v != NULL : v == NULL || strcmp(v, value) != 0)
        fail_msg("%s: got %s, want %s", name, v ? v : "(unset)", value ? value : "(unset)");
}

static void test_batch_job(void **state)
{
    (void)state;
    const char *env[] = {"SLURM_JOB_NAME=train", "TESSERA_JOB_ID=42", "SLURM_PROCID=99",
                         "TESSERA_NODELIST=node[001-002]", "TESSERA_NNODES=2",
                         "TESSERA_ARRAY_JOB_ID=40", "TESSERA_ARRAY_INDEX=2",
                         "TESSERA_SLURM_ARRAY=1-19:3", "TESSERA_RESTARTS=2", NULL};
    ts_envv e = build(env, 4, 1, 1);
    expect(&e, "SLURM_JOB_ID", "42");
    expect(&e, "SLURM_PROCID", "1");
    expect(&e, "SLURM_LOCALID", "1");
    expect(&e, "SLURM_NTASKS", "4");
    expect(&e, "SLURM_NNODES", "2");
    expect(&e, "SLURM_JOB_NODELIST", "node[001-002]");
    expect(&e, "SLURM_ARRAY_JOB_ID", "40");
    expect(&e, "SLURM_ARRAY_TASK_ID", "7");
    expect(&e, "SLURM_TASKS_PER_NODE", "2(x2)");
    expect(&e, "SLURM_JOB_USER", "alice");
    expect(&e, "SLURM_GPUS_ON_NODE", "0");
    expect(&e, "SLURM_RESTART_COUNT", "2");
    agent_envv_free(&e);
}

static void test_single_task_without_controller_extras(void **state)
{
    (void)state;
    const char *env[] = {"SLURM_JOB_NAME=one", "TESSERA_JOB_ID=5", NULL};
    ts_envv e = build(env, 0, 0, 0);
    expect(&e, "SLURM_NTASKS", "1");
    expect(&e, "SLURM_PROCID", "0");
    expect(&e, "SLURM_NNODES", "1");
    expect(&e, "SLURM_TASKS_PER_NODE", "1");
    expect(&e, "SLURM_JOB_NODELIST", "node001");
    expect(&e, "SLURM_ARRAY_TASK_ID", NULL);
    agent_envv_free(&e);
    /* several tasks, nodes unknown: not guessed */
    ts_envv m = build(env, 8, 3, 0);
    expect(&m, "SLURM_NNODES", NULL);
    expect(&m, "SLURM_JOB_NODELIST", NULL);
    agent_envv_free(&m);
}

static void test_spec_job_gets_none(void **state)
{
    (void)state;
    const char *env[] = {"TESSERA_JOB_ID=5", NULL};
    ts_envv e = build(env, 2, 0, 0);
    expect(&e, "SLURM_JOB_ID", NULL);
    expect(&e, "SLURM_NTASKS", NULL);
    expect(&e, "RANK", "0");
    agent_envv_free(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_batch_job),
        cmocka_unit_test(test_single_task_without_controller_extras),
        cmocka_unit_test(test_spec_job_gets_none),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
