/*
 * test_container_extras.c - agent_checkpoint_folder: which checkpoint
 * folders the agent binds into a container (docs/images.md "Checkpoints").
 *
 * Proves: missing folders are made (the root and the tenant's sticky, as
 * /tmp; the job's 0700 for the task's user); a job folder that is a link
 * (to /etc) is refused and the link left alone; a tenant folder written by
 * its group and not sticky is refused, naming it; a job folder another user
 * owns is refused; paths with `..` or not absolute are refused.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/agent_internal.h"

static char top[256];
static char why[512];

static int setup(void **state)
{
    (void)state;
    snprintf(top, sizeof top, "/tmp/ts-ckpt-XXXXXX");
    assert_non_null(mkdtemp(top));
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", top);
    return system(cmd) == 0 ? 0 : -1;
}

static bool folder(const char *rel, uid_t uid)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", top, rel);
    why[0] = '\0';
    return agent_checkpoint_folder(p, uid, uid, why, sizeof why);
}

static void missing_folders_are_made(void **state)
{
    (void)state;
    if (geteuid() != 0)
        skip();
    assert_true(folder("ck/team-a/7", 4321));
    char p[512];
    struct stat st;
    snprintf(p, sizeof p, "%s/ck/team-a", top);
    assert_int_equal(lstat(p, &st), 0);
    assert_int_equal(st.st_mode & 07777, 01777);
    snprintf(p, sizeof p, "%s/ck/team-a/7", top);
    assert_int_equal(lstat(p, &st), 0);
    assert_int_equal(st.st_uid, 4321);
    assert_int_equal(st.st_mode & 0777, 0700);
    assert_true(folder("ck/team-a/7", 4321)); /* again: as it is */
}

static void a_link_is_refused(void **state)
{
    (void)state;
    if (geteuid() != 0)
        skip();
    assert_true(folder("ck/team-a/1", 0));
    char p[512];
    snprintf(p, sizeof p, "%s/ck/team-a/8", top);
    assert_int_equal(symlink("/etc", p), 0);
    assert_false(folder("ck/team-a/8", 0));
    assert_non_null(strstr(why, "not a folder"));
    struct stat st;
    assert_int_equal(lstat(p, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
}

static void a_group_written_tenant_folder_is_refused(void **state)
{
    (void)state;
    if (geteuid() != 0)
        skip();
    char p[512];
    snprintf(p, sizeof p, "%s/ck2", top);
    assert_int_equal(mkdir(p, 0755), 0);
    snprintf(p, sizeof p, "%s/ck2/team-b", top);
    assert_int_equal(mkdir(p, 0775), 0);
    assert_int_equal(chmod(p, 0775), 0);
    assert_false(folder("ck2/team-b/3", 0));
    assert_non_null(strstr(why, "team-b"));
    assert_non_null(strstr(why, "written by no one else"));
}

static void another_users_job_folder_is_refused(void **state)
{
    (void)state;
    if (geteuid() != 0)
        skip();
    assert_true(folder("ck3/team-a/5", 1111));
    assert_false(folder("ck3/team-a/5", 2222));
    assert_non_null(strstr(why, "uid 2222"));
}

static void unclean_paths_are_refused(void **state)
{
    (void)state;
    assert_false(agent_checkpoint_folder("ck/team/1", 0, 0, why, sizeof why));
    assert_false(agent_checkpoint_folder("/ck/../etc/1", 0, 0, why, sizeof why));
    assert_false(agent_checkpoint_folder("/ck/team/..", 0, 0, why, sizeof why));
    assert_false(agent_checkpoint_folder("/1", 0, 0, why, sizeof why));
    assert_non_null(strstr(why, "<root>/<tenant>/<job>"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(missing_folders_are_made),
        cmocka_unit_test(a_link_is_refused),
        cmocka_unit_test(a_group_written_tenant_folder_is_refused),
        cmocka_unit_test(another_users_job_folder_is_refused),
        cmocka_unit_test(unclean_paths_are_refused),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
