/*
 * test_container_user.c - who a container task may be inside its image (a
 * job's `user`, docs/images.md): the tenant's rules (ts_tenant_container_
 * user_ok) and the "uid[:gid]" form (ts_container_user_parse).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tessera/tenant.h"

static void rules_of_the_tenant(void **state)
{
    (void)state;
    ts_tenant_identity plain = {0}, rooted = {.allow_root = true},
                       ranged = {.has_uid_range = true, .uid_min = 2000, .uid_max = 2999};
    /* the submitter's own uid, any gid but 0 */
    assert_true(ts_tenant_container_user_ok(&plain, 1500, 1500, 1500));
    assert_true(ts_tenant_container_user_ok(&plain, 1500, 1500, 100));
    assert_false(ts_tenant_container_user_ok(&plain, 1500, 1500, 0));
    /* another uid: only one of the tenant's range */
    assert_false(ts_tenant_container_user_ok(&plain, 1500, 1501, 1501));
    assert_true(ts_tenant_container_user_ok(&ranged, 1500, 2500, 2500));
    assert_false(ts_tenant_container_user_ok(&ranged, 1500, 3000, 3000));
    /* a submitter without an identity: the range only */
    assert_false(ts_tenant_container_user_ok(&plain, -1, 1500, 1500));
    assert_true(ts_tenant_container_user_ok(&ranged, -1, 2000, 2000));
    /* root: only with allow_root; a root submitter (allowed) names anyone */
    assert_false(ts_tenant_container_user_ok(&ranged, 2500, 0, 0));
    assert_true(ts_tenant_container_user_ok(&rooted, 2500, 0, 0));
    assert_true(ts_tenant_container_user_ok(&rooted, 0, 4242, 4243));
    assert_false(ts_tenant_container_user_ok(&plain, 0, 4242, 4243));
}

static void uid_gid_form(void **state)
{
    (void)state;
    int64_t u, g;
    assert_true(ts_container_user_parse("4242", &u, &g));
    assert_int_equal(u, 4242);
    assert_int_equal(g, 4242);
    assert_true(ts_container_user_parse("0:5", &u, &g));
    assert_int_equal(u, 0);
    assert_int_equal(g, 5);
    assert_true(ts_container_user_parse("2147483647", &u, &g));
    const char *bad[] = {"", "alice", "12:", ":12", "1:2:3", "-1", "1 ", "2147483648", "1:x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_false(ts_container_user_parse(bad[i], &u, &g));
}

/* An MPS node keeps one user's shares a GPU: the user its server sees. A
 * job's run-as uid, but in an image with a `user` the uid inside; with
 * "image" (the image's User, read on the node) the job alone. */
static void mps_sees_the_user_inside(void **state)
{
    (void)state;
    assert_int_equal(ts_share_user_key(1500, NULL, 7), 1501);
    assert_int_equal(ts_share_user_key(-1, NULL, 7), 1);
    assert_int_equal(ts_share_user_key(1500, "2500:100", 7), 2501);
    assert_int_equal(ts_share_user_key(1500, "2500", 8), ts_share_user_key(1600, "2500", 9));
    assert_int_equal(ts_share_user_key(1500, "image", 7), -8);
    assert_true(ts_share_user_key(1500, "image", 7) != ts_share_user_key(1500, "image", 9));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(rules_of_the_tenant),
        cmocka_unit_test(uid_gid_form),
        cmocka_unit_test(mps_sees_the_user_inside),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
