/*
 * test_mig.c - the agent's MIG apply/read/uuid against the fake libnvidia-ml.
 *
 * Fixture tests/fakes/a100-mig.json: GPU 0 (A100-40GB, MIG on) holds
 * 2g.10gb@0 (GI 2, two 1c CIs), 1g.5gb@2 (GI 3) and 3g.20gb@4 (GI 1), each CI
 * with a MIG- UUID; GPU 1 is MIG capable with MIG off. Proves: read sees them
 * (sorted by start, UUIDs); apply keeps, destroys and creates as asked and the
 * result is checked through raw NVML calls, not through our own reader; a
 * second apply changes nothing; busy instances survive (by UUID and by
 * profile/start) and a wanted instance on top of one is refused before
 * anything changes; kept instances end with one whole compute instance; the
 * driver's geometry errors come back naming the NVML call; uuid() names the
 * MIG devices; MIG off / not capable GPUs are clear errors. Each test opens
 * NVML afresh, so the fake re-reads the fixture's instances.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/mig.h"
#include "agent/nvml.h"

#define NVML_FIXTURE_TAG "mig"
#include "fakes/nvml_fixture.h"

#define UUID_3G "MIG-5c3a1e2f-8b7d-5e0f-a1b2-c3d4e5f60001"
#define UUID_2G_A "MIG-5c3a1e2f-8b7d-5e0f-a1b2-c3d4e5f60002"
#define UUID_1G "MIG-5c3a1e2f-8b7d-5e0f-a1b2-c3d4e5f60004"
#define GPU_MIG 0
#define GPU_MIG_OFF 1
#define RAW_MAX 8

static ts_nvml *opened; /* closed by the teardown when a test fails midway */

/* A private copy of a shipped fixture, named by the env var the fake reads;
 * GPU no_mig (>= 0) loses its "mig" object: a GPU that is not MIG capable. */
static ts_nvml *open_fake_with(const char *name, int no_mig)
{
    use_fixture(name);
    if (no_mig >= 0) {
        json_t *root = fixture_load();
        json_object_del(gpu_of(root, no_mig), "mig");
        fixture_save(root);
    }
    ts_nvml *nv = NULL;
    ts_err err = {0};
    if (agent_nvml_open(TS_FAKE_NVML, &nv, &err) != 0)
        fail_msg("agent_nvml_open: %s", err.msg);
    opened = nv;
    return nv;
}

static ts_nvml *open_fake(const char *name)
{
    return open_fake_with(name, -1);
}

/* The fake reads its MIG instances at the first nvmlInit only: each test
 * must close, so the next one starts from the fixture again. */
static void close_fake(ts_nvml *nv)
{
    agent_nvml_close(nv);
    opened = NULL;
    unlink(fixture);
    unsetenv(NVML_FIXTURE_ENV);
}

static int teardown(void **state)
{
    (void)state;
    if (opened)
        close_fake(opened);
    return 0;
}

static ts_mig_layout layout(int n, const int *profile_start_pairs)
{
    ts_mig_layout l;
    memset(&l, 0, sizeof l);
    l.n = n;
    for (int i = 0; i < n; i++) {
        l.inst[i].profile_id = (int8_t)profile_start_pairs[2 * i];
        l.inst[i].start = (int8_t)profile_start_pairs[2 * i + 1];
    }
    return l;
}

/* What NVML itself says, read with raw table calls (not mig.c's reader). */
struct raw_gi {
    unsigned id, profile, start, size, nci, ci_size;
};

static int raw_read(ts_nvml *nv, unsigned gpu, struct raw_gi *out)
{
    static const unsigned profiles[] = {19, 20, 15, 14, 9, 5, 0};
    nvmlDevice_t dev;
    assert_int_equal(nv->DeviceGetHandleByIndex(gpu, &dev), NVML_SUCCESS);
    int n = 0;
    for (size_t p = 0; p < sizeof profiles / sizeof profiles[0]; p++) {
        nvmlGpuInstance_t gis[RAW_MAX];
        unsigned cnt = RAW_MAX;
        assert_int_equal(nv->DeviceGetGpuInstances(dev, profiles[p], gis, &cnt), NVML_SUCCESS);
        for (unsigned i = 0; i < cnt; i++) {
            nvmlGpuInstanceInfo_t info;
            assert_int_equal(nv->GpuInstanceGetInfo(gis[i], &info), NVML_SUCCESS);
            struct raw_gi *r = &out[n++];
            memset(r, 0, sizeof *r);
            r->id = info.id;
            r->profile = info.profileId;
            r->start = info.placement.start;
            r->size = info.placement.size;
            for (unsigned cp = 0; cp <= 4; cp++) { /* CI profiles 1c..7c */
                nvmlComputeInstance_t cis[RAW_MAX];
                unsigned m = RAW_MAX;
                if (nv->GpuInstanceGetComputeInstances(gis[i], cp, cis, &m) != NVML_SUCCESS)
                    continue;
                for (unsigned c = 0; c < m; c++) {
                    nvmlComputeInstanceInfo_t ci;
                    assert_int_equal(nv->ComputeInstanceGetInfo(cis[c], &ci), NVML_SUCCESS);
                    r->nci++;
                    r->ci_size = ci.placement.size;
                }
            }
        }
    }
    return n;
}

static const struct raw_gi *raw_find(const struct raw_gi *r, int n, unsigned profile,
                                     unsigned start)
{
    for (int i = 0; i < n; i++)
        if (r[i].profile == profile && r[i].start == start)
            return &r[i];
    return NULL;
}

static int count_action(const ts_agent_mig_report *rep, int action)
{
    int n = 0;
    for (int i = 0; i < rep->nsteps; i++)
        n += rep->step[i].action == action;
    return n;
}

static const ts_agent_mig_step *step_at(const ts_agent_mig_report *rep, unsigned profile,
                                        unsigned start)
{
    for (int i = 0; i < rep->nsteps; i++)
        if (rep->step[i].profile_id == profile && rep->step[i].start == start)
            return &rep->step[i];
    return NULL;
}

/* ---- read ------------------------------------------------------------------------- */

static void read_lists_instances_by_start_with_uuids(void **state)
{
    (void)state;
    ts_nvml *nv = open_fake("a100-mig.json");
    ts_agent_mig_state st;
    ts_err err = {0};
    assert_int_equal(agent_mig_read(nv, GPU_MIG, &st, &err), 0);
    assert_true(st.capable && st.enabled);
    assert_int_equal(st.ngi, 3);
    assert_int_equal(st.gi[0].profile_id, TS_MIG_P_2G);
    assert_int_equal(st.gi[0].start, 0);
    assert_int_equal(st.gi[0].id, 2);
    assert_int_equal(st.gi[0].nci, 2);
    assert_string_equal(st.gi[0].ci[0].uuid, UUID_2G_A);
    assert_int_equal(st.gi[1].profile_id, TS_MIG_P_1G);
    assert_int_equal(st.gi[1].start, 2);
    assert_string_equal(st.gi[1].ci[0].uuid, UUID_1G);
    assert_int_equal(st.gi[2].profile_id, TS_MIG_P_3G);
    assert_int_equal(st.gi[2].start, 4);
    assert_int_equal(st.gi[2].size, 4);
    assert_string_equal(st.gi[2].ci[0].uuid, UUID_3G);

    assert_int_equal(agent_mig_read(nv, GPU_MIG_OFF, &st, &err), 0);
    assert_true(st.capable);
    assert_false(st.enabled);
    assert_int_equal(st.ngi, 0);

    assert_int_equal(agent_mig_read(nv, 7, &st, &err), TS_EINVAL);
    assert_non_null(strstr(err.msg, "gpu 7: no such GPU"));
    close_fake(nv);
}

/* ---- apply ------------------------------------------------------------------------ */

static void apply_keeps_destroys_creates_then_is_idempotent(void **state)
{
    (void)state;
    ts_nvml *nv = open_fake("a100-mig.json");
    /* keep 3g@4 and 1g@2, drop 2g@0, add 1g@0 and 1g@1 */
    const int want_pairs[] = {TS_MIG_P_3G, 4, TS_MIG_P_1G, 0, TS_MIG_P_1G, 2, TS_MIG_P_1G, 1};
    ts_mig_layout want = layout(4, want_pairs);
    ts_agent_mig_report rep;
    ts_err err = {0};
    int rc = agent_mig_apply(nv, GPU_MIG, &want, NULL, 0, &rep, &err);
    if (rc)
        fail_msg("apply: %s", err.msg);
    assert_int_equal(rep.nkept, 2);
    assert_int_equal(rep.ndestroyed, 1);
    assert_int_equal(rep.ncreated, 2);
    assert_int_equal(rep.nbusy, 0);
    assert_string_equal(rep.failed_call, "");
    const ts_agent_mig_step *s = step_at(&rep, TS_MIG_P_2G, 0);
    assert_non_null(s);
    assert_int_equal(s->action, TS_AGENT_MIG_DESTROYED);
    assert_string_equal(s->uuid, UUID_2G_A);
    s = step_at(&rep, TS_MIG_P_3G, 4);
    assert_int_equal(s->action, TS_AGENT_MIG_KEPT);
    assert_false(s->ci_rebuilt);
    assert_string_equal(s->uuid, UUID_3G);
    const ts_agent_mig_step *c0 = step_at(&rep, TS_MIG_P_1G, 0);
    const ts_agent_mig_step *c1 = step_at(&rep, TS_MIG_P_1G, 1);
    assert_int_equal(c0->action, TS_AGENT_MIG_CREATED);
    assert_int_equal(c1->action, TS_AGENT_MIG_CREATED);
    assert_int_equal(strncmp(c0->uuid, "MIG-", 4), 0);
    assert_string_not_equal(c0->uuid, c1->uuid);

    /* what the driver holds now, read raw */
    struct raw_gi raw[RAW_MAX];
    int n = raw_read(nv, GPU_MIG, raw);
    assert_int_equal(n, 4);
    assert_null(raw_find(raw, n, TS_MIG_P_2G, 0));
    const struct raw_gi *g3 = raw_find(raw, n, TS_MIG_P_3G, 4);
    assert_non_null(g3);
    assert_int_equal(g3->id, 1); /* the same GI, untouched */
    for (unsigned start = 0; start <= 2; start++) {
        const struct raw_gi *g = raw_find(raw, n, TS_MIG_P_1G, start);
        assert_non_null(g);
        assert_int_equal(g->size, 1);
        assert_int_equal(g->nci, 1);
        assert_int_equal(g->ci_size, 1);
    }

    /* the same layout again: nothing to do */
    ts_agent_mig_state before, after;
    assert_int_equal(agent_mig_read(nv, GPU_MIG, &before, &err), 0);
    assert_int_equal(agent_mig_apply(nv, GPU_MIG, &want, NULL, 0, &rep, &err), 0);
    assert_int_equal(rep.nkept, 4);
    assert_int_equal(rep.ncreated + rep.ndestroyed + rep.nbusy, 0);
    for (int i = 0; i < rep.nsteps; i++)
        assert_false(rep.step[i].ci_rebuilt);
    assert_int_equal(agent_mig_read(nv, GPU_MIG, &after, &err), 0);
    assert_memory_equal(&before, &after, sizeof before);
    close_fake(nv);
}

static void busy_instances_are_never_touched(void **state)
{
    (void)state;
    ts_nvml *nv = open_fake("a100-mig.json");
    /* want only the 3g; the 2g runs a task (named by its MIG UUID), so does
     * the 1g (named by profile and start) */
    const int want_pairs[] = {TS_MIG_P_3G, 4};
    ts_mig_layout want = layout(1, want_pairs);
    const ts_agent_mig_busy busy[] = {{UUID_2G_A, 0, 0}, {NULL, TS_MIG_P_1G, 2}};
    ts_agent_mig_report rep;
    ts_err err = {0};
    assert_int_equal(agent_mig_apply(nv, GPU_MIG, &want, busy, 2, &rep, &err), 0);
    assert_int_equal(rep.nbusy, 2);
    assert_int_equal(rep.ndestroyed, 0);
    assert_int_equal(count_action(&rep, TS_AGENT_MIG_KEPT_BUSY), 2);
    struct raw_gi raw[RAW_MAX];
    int n = raw_read(nv, GPU_MIG, raw);
    assert_int_equal(n, 3);
    const struct raw_gi *g2 = raw_find(raw, n, TS_MIG_P_2G, 0);
    assert_non_null(g2);
    assert_int_equal(g2->nci, 2); /* its compute instances untouched too */

    /* the 1g is released: now it goes, the 2g stays */
    assert_int_equal(agent_mig_apply(nv, GPU_MIG, &want, busy, 1, &rep, &err), 0);
    assert_int_equal(rep.ndestroyed, 1);
    assert_int_equal(step_at(&rep, TS_MIG_P_1G, 2)->action, TS_AGENT_MIG_DESTROYED);
    assert_int_equal(step_at(&rep, TS_MIG_P_2G, 0)->action, TS_AGENT_MIG_KEPT_BUSY);
    n = raw_read(nv, GPU_MIG, raw);
    assert_int_equal(n, 2);
    assert_non_null(raw_find(raw, n, TS_MIG_P_2G, 0));
    close_fake(nv);
}

static void busy_wanted_instance_keeps_its_compute_instances(void **state)
{
    (void)state;
    ts_nvml *nv = open_fake("a100-mig.json");
    const int want_pairs[] = {TS_MIG_P_2G, 0, TS_MIG_P_1G, 2, TS_MIG_P_3G, 4};
    ts_mig_layout want = layout(3, want_pairs);
    const ts_agent_mig_busy busy[] = {{UUID_2G_A, 0, 0}};
    ts_agent_mig_report rep;
    ts_err err = {0};
    assert_int_equal(agent_mig_apply(nv, GPU_MIG, &want, busy, 1, &rep, &err), 0);
    assert_int_equal(rep.nkept, 3);
    assert_false(step_at(&rep, TS_MIG_P_2G, 0)->ci_rebuilt);
    struct raw_gi raw[RAW_MAX];
    int n = raw_read(nv, GPU_MIG, raw);
    assert_int_equal(raw_find(raw, n, TS_MIG_P_2G, 0)->nci, 2);

    /* idle now: the two 1c compute instances become one 2c */
    assert_int_equal(agent_mig_apply(nv, GPU_MIG, &want, NULL, 0, &rep, &err), 0);
    const ts_agent_mig_step *s = step_at(&rep, TS_MIG_P_2G, 0);
    assert_int_equal(s->action, TS_AGENT_MIG_KEPT);
    assert_true(s->ci_rebuilt);
    assert_int_equal(strncmp(s->uuid, "MIG-", 4), 0);
    assert_string_not_equal(s->uuid, UUID_2G_A);
    n = raw_read(nv, GPU_MIG, raw);
    const struct raw_gi *g2 = raw_find(raw, n, TS_MIG_P_2G, 0);
    assert_int_equal(g2->nci, 1);
    assert_int_equal(g2->ci_size, 2);
    close_fake(nv);
}

static void wanted_instance_over_a_busy_one_changes_nothing(void **state)
{
    (void)state;
    ts_nvml *nv = open_fake("a100-mig.json");
    /* a 4g@0 needs slots 0-3, where the busy 1g@2 sits */
    const int want_pairs[] = {TS_MIG_P_4G, 0};
    ts_mig_layout want = layout(1, want_pairs);
    const ts_agent_mig_busy busy[] = {{UUID_1G, 0, 0}};
    ts_agent_mig_report rep;
    ts_err err = {0};
    assert_int_equal(agent_mig_apply(nv, GPU_MIG, &want, busy, 1, &rep, &err), TS_ENOSPC);
    assert_non_null(strstr(err.msg, "gpu 0: profile 5, start 0: overlaps GPU instance 3"));
    assert_non_null(strstr(err.msg, "nothing changed"));
    assert_int_equal(rep.nsteps, 0);
    struct raw_gi raw[RAW_MAX];
    assert_int_equal(raw_read(nv, GPU_MIG, raw), 3);
    close_fake(nv);
}

static void geometry_errors_name_the_nvml_call(void **state)
{
    (void)state;
    ts_nvml *nv = open_fake("a100-mig.json");
    ts_agent_mig_report rep;
    ts_err err = {0};

    /* a 3g may start only at 0 or 4 */
    const int wrong_start[] = {TS_MIG_P_3G, 4, TS_MIG_P_3G, 2};
    ts_mig_layout want = layout(2, wrong_start);
    assert_int_equal(agent_mig_apply(nv, GPU_MIG, &want, NULL, 0, &rep, &err), TS_EIO);
    assert_string_equal(err.msg, "gpu 0: nvmlDeviceCreateGpuInstanceWithPlacement(profile 9, "
                                 "start 2, size 4): Invalid Argument");
    assert_string_equal(rep.failed_call, "nvmlDeviceCreateGpuInstanceWithPlacement");
    assert_int_equal(rep.nvml_rc, NVML_ERROR_INVALID_ARGUMENT);
    /* what happened before the refusal is in the report */
    assert_int_equal(rep.ndestroyed, 2);
    assert_int_equal(rep.nkept, 1);
    assert_int_equal(rep.ncreated, 0);
    json_t *j = agent_mig_report_json(&rep);
    assert_non_null(j);
    assert_string_equal(json_string_value(json_object_get(j, "failed_call")),
                        "nvmlDeviceCreateGpuInstanceWithPlacement");
    assert_int_equal(json_integer_value(json_object_get(j, "destroyed")), 2);
    assert_int_equal(json_array_size(json_object_get(j, "steps")), 3);
    json_decref(j);

    /* two new instances that overlap: 3g@0 takes slots 0-3, then 2g@2 */
    const int overlap[] = {TS_MIG_P_3G, 4, TS_MIG_P_3G, 0, TS_MIG_P_2G, 2};
    want = layout(3, overlap);
    assert_int_equal(agent_mig_apply(nv, GPU_MIG, &want, NULL, 0, &rep, &err), TS_EIO);
    assert_string_equal(err.msg, "gpu 0: nvmlDeviceCreateGpuInstanceWithPlacement(profile 14, "
                                 "start 2, size 2): Insufficient resources");
    assert_int_equal(rep.nvml_rc, NVML_ERROR_INSUFFICIENT_RESOURCES);
    assert_int_equal(rep.ncreated, 1); /* the 3g@0 went in first */
    struct raw_gi raw[RAW_MAX];
    int n = raw_read(nv, GPU_MIG, raw);
    assert_int_equal(n, 2);
    assert_non_null(raw_find(raw, n, TS_MIG_P_3G, 0));

    /* a profile id the driver does not have */
    const int unknown[] = {42, 0};
    want = layout(1, unknown);
    assert_int_equal(agent_mig_apply(nv, GPU_MIG, &want, NULL, 0, &rep, &err), TS_EIO);
    assert_non_null(
        strstr(err.msg, "gpu 0: nvmlDeviceGetGpuInstancePossiblePlacements_v2(profile 42): "));
    close_fake(nv);
}

static void bad_layouts_are_refused_up_front(void **state)
{
    (void)state;
    ts_nvml *nv = open_fake("a100-mig.json");
    ts_err err = {0};
    ts_mig_layout want;
    memset(&want, 0, sizeof want);
    want.n = TS_MIG_MAX_INSTANCES + 1;
    assert_int_equal(agent_mig_apply(nv, GPU_MIG, &want, NULL, 0, NULL, &err), TS_EINVAL);
    assert_non_null(strstr(err.msg, "layout.n: must be 0..7"));
    const int past_end[] = {TS_MIG_P_1G, 8};
    want = layout(1, past_end);
    assert_int_equal(agent_mig_apply(nv, GPU_MIG, &want, NULL, 0, NULL, &err), TS_EINVAL);
    assert_non_null(strstr(err.msg, "layout.inst[0]"));
    struct raw_gi raw[RAW_MAX];
    assert_int_equal(raw_read(nv, GPU_MIG, raw), 3);
    close_fake(nv);
}

/* ---- uuid, MIG off ---------------------------------------------------------------- */

static void uuid_names_the_mig_device(void **state)
{
    (void)state;
    ts_nvml *nv = open_fake("a100-mig.json");
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    ts_err err = {0};
    assert_int_equal(agent_mig_uuid(nv, GPU_MIG, TS_MIG_P_3G, 4, uuid, sizeof uuid, &err), 0);
    assert_string_equal(uuid, UUID_3G);
    assert_int_equal(agent_mig_uuid(nv, GPU_MIG, TS_MIG_P_1G, 2, uuid, sizeof uuid, &err), 0);
    assert_string_equal(uuid, UUID_1G);
    assert_int_equal(agent_mig_uuid(nv, GPU_MIG, TS_MIG_P_3G, 0, uuid, sizeof uuid, &err),
                     TS_ENOENT);
    assert_non_null(strstr(err.msg, "no GPU instance of profile 9 at start 0"));

    /* a created instance: uuid() agrees with the report */
    const int want_pairs[] = {TS_MIG_P_4G, 0, TS_MIG_P_3G, 4};
    ts_mig_layout want = layout(2, want_pairs);
    ts_agent_mig_report rep;
    assert_int_equal(agent_mig_apply(nv, GPU_MIG, &want, NULL, 0, &rep, &err), 0);
    assert_int_equal(agent_mig_uuid(nv, GPU_MIG, TS_MIG_P_4G, 0, uuid, sizeof uuid, &err), 0);
    assert_string_equal(uuid, step_at(&rep, TS_MIG_P_4G, 0)->uuid);
    assert_int_equal(agent_mig_uuid(nv, GPU_MIG, TS_MIG_P_4G, 0, uuid, 8, &err), TS_EINVAL);
    close_fake(nv);
}

static void mig_off_and_non_mig_gpus_are_clear_errors(void **state)
{
    (void)state;
    ts_nvml *nv = open_fake("a100-mig.json");
    const int want_pairs[] = {TS_MIG_P_7G, 0};
    ts_mig_layout want = layout(1, want_pairs);
    ts_err err = {0};
    assert_int_equal(agent_mig_apply(nv, GPU_MIG_OFF, &want, NULL, 0, NULL, &err), TS_EINVAL);
    assert_non_null(strstr(err.msg, "gpu 1: MIG mode is off"));
    assert_non_null(strstr(err.msg, "never changes MIG mode"));
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    assert_int_equal(agent_mig_uuid(nv, GPU_MIG_OFF, TS_MIG_P_7G, 0, uuid, sizeof uuid, &err),
                     TS_EINVAL);
    assert_non_null(strstr(err.msg, "gpu 1: MIG mode is off"));
    close_fake(nv);

    nv = open_fake_with("h100x8.json", 0);
    assert_int_equal(agent_mig_apply(nv, 0, &want, NULL, 0, NULL, &err), TS_EINVAL);
    assert_non_null(strstr(err.msg, "gpu 0: not MIG capable"));
    ts_agent_mig_state st;
    assert_int_equal(agent_mig_read(nv, 0, &st, &err), 0);
    assert_false(st.capable);
    close_fake(nv);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(read_lists_instances_by_start_with_uuids, teardown),
        cmocka_unit_test_teardown(apply_keeps_destroys_creates_then_is_idempotent, teardown),
        cmocka_unit_test_teardown(busy_instances_are_never_touched, teardown),
        cmocka_unit_test_teardown(busy_wanted_instance_keeps_its_compute_instances, teardown),
        cmocka_unit_test_teardown(wanted_instance_over_a_busy_one_changes_nothing, teardown),
        cmocka_unit_test_teardown(geometry_errors_name_the_nvml_call, teardown),
        cmocka_unit_test_teardown(bad_layouts_are_refused_up_front, teardown),
        cmocka_unit_test_teardown(uuid_names_the_mig_device, teardown),
        cmocka_unit_test_teardown(mig_off_and_non_mig_gpus_are_clear_errors, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
