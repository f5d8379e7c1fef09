/*
 * test_container_extras.c - agent_checkpoint_folder: which checkpoint
 * folders the agent binds into a container (docs/images.md "Checkpoints").
 *
 * Proves: missing folders are made (the root and the tenant's 0711, open
 * to no user; the job's 0700 for the task's user); an older agent's 01777
 * tenant folder is closed, and what another user made in it where a future
 * job's folder (or in an open root where a tenant's folder) goes is moved
 * aside, kept, and the job gets its own; a job folder that is a link
 * (to /etc) is refused and the link left alone; a tenant folder written by
 * its group and not sticky is refused, naming it; a job folder another user
 * owns is refused; paths with `..` or not absolute are refused. A job
 * mount's host path with a link anywhere in it (or `..`) is refused, naming
 * the field and the link; a pinned mount keeps the folder checked when a
 * link is swapped into its path afterwards, and unpinning removes only the
 * mount point.
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
#include <sys/wait.h>
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
    snprintf(p, sizeof p, "%s/ck", top);
    assert_int_equal(lstat(p, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0711);
    snprintf(p, sizeof p, "%s/ck/team-a", top);
    assert_int_equal(lstat(p, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0711);
    snprintf(p, sizeof p, "%s/ck/team-a/7", top);
    assert_int_equal(lstat(p, &st), 0);
    assert_int_equal(st.st_uid, 4321);
    assert_int_equal(st.st_mode & 0777, 0700);
    assert_true(folder("ck/team-a/7", 4321)); /* again: as it is */
}

/* Made with mode (the umask cleared), owned by uid. */
static void made(const char *rel, mode_t mode, uid_t uid)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", top, rel);
    assert_int_equal(mkdir(p, mode), 0);
    assert_int_equal(chmod(p, mode), 0);
    assert_int_equal(chown(p, uid, uid), 0);
}

/* How many names in top/rel begin with prefix. */
static int count_named(const char *rel, const char *prefix)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "exit $(ls -A '%s/%s' | grep -c '^%s')", top, rel, prefix);
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

/* An older agent made the folders 01777: another user could make a future
 * job's folder (or a tenant's) first, and its job's container was then
 * refused. Such a folder is moved aside, kept; the job gets its own, and
 * the open folders are closed (0711). */
static void a_folder_made_first_by_another_is_moved_aside(void **state)
{
    (void)state;
    if (geteuid() != 0)
        skip();
    made("old", 01777, 0);
    made("old/team-a", 01777, 0);
    made("old/team-a/9", 0755, 5555); /* another user's, before job 9 ran */
    assert_true(folder("old/team-a/9", 4321));
    char p[512];
    struct stat st;
    snprintf(p, sizeof p, "%s/old/team-a/9", top);
    assert_int_equal(lstat(p, &st), 0);
    assert_int_equal(st.st_uid, 4321);
    assert_int_equal(st.st_mode & 07777, 0700);
    assert_int_equal(count_named("old/team-a", ".squatted-9-"), 1);
    snprintf(p, sizeof p, "%s/old/team-a", top);
    assert_int_equal(lstat(p, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0711);
    snprintf(p, sizeof p, "%s/old", top);
    assert_int_equal(lstat(p, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0711);

    made("old2", 01777, 0);
    made("old2/team-c", 0700, 5555); /* a tenant's folder, another's */
    assert_true(folder("old2/team-c/1", 4321));
    snprintf(p, sizeof p, "%s/old2/team-c", top);
    assert_int_equal(lstat(p, &st), 0);
    assert_int_equal(st.st_uid, 0);
    assert_int_equal(count_named("old2", ".squatted-team-c-"), 1);
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

static int mount_open(const char *rel)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", top, rel);
    why[0] = '\0';
    return agent_mount_source_open("mounts[2].host", p, why, sizeof why);
}

static void a_mount_through_a_link_is_refused(void **state)
{
    (void)state;
    char p[512];
    snprintf(p, sizeof p, "%s/mdata", top);
    assert_int_equal(mkdir(p, 0755), 0);
    snprintf(p, sizeof p, "%s/to-root", top);
    assert_int_equal(symlink("/", p), 0);
    snprintf(p, sizeof p, "%s/to-data", top);
    assert_int_equal(symlink("mdata", p), 0);
    int fd = mount_open("mdata");
    assert_true(fd >= 0);
    close(fd);
    fd = mount_open("./mdata/.");
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(mount_open("to-root/etc"), -1); /* a link on the way */
    assert_non_null(strstr(why, "mounts[2].host: "));
    assert_non_null(strstr(why, "to-root is a symbolic link"));
    assert_int_equal(mount_open("to-data"), -1); /* a link at the end */
    assert_non_null(strstr(why, "to-data is a symbolic link"));
    assert_int_equal(mount_open("mdata/../mdata"), -1);
    assert_non_null(strstr(why, "\"..\" in the path is refused"));
    assert_int_equal(mount_open("missing"), -1);
    assert_non_null(strstr(why, "no such folder on this node"));
    snprintf(p, sizeof p, "%s/mdata/file", top);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fclose(f);
    assert_int_equal(mount_open("mdata/file"), -1);
    assert_non_null(strstr(why, "not a folder"));
}

/* The pinned folder is the one checked: a link swapped into its path
 * afterwards changes nothing the runtime binds. */
static void a_pinned_mount_outlives_a_swap(void **state)
{
    (void)state;
    if (geteuid() != 0)
        skip();
    char p[512], moved[512], pin[900], seen[1000];
    snprintf(p, sizeof p, "%s/pdata", top);
    assert_int_equal(mkdir(p, 0755), 0);
    snprintf(seen, sizeof seen, "%s/mark", p);
    FILE *f = fopen(seen, "w");
    assert_non_null(f);
    fclose(f);
    int fd = mount_open("pdata");
    assert_true(fd >= 0);
    assert_true(agent_mount_pin(top, "j1-r0", 0, fd, pin, sizeof pin, why, sizeof why));
    close(fd);
    snprintf(moved, sizeof moved, "%s/moved", top);
    assert_int_equal(rename(p, moved), 0);
    assert_int_equal(symlink("/etc", p), 0);
    snprintf(seen, sizeof seen, "%s/mark", pin);
    struct stat st;
    assert_int_equal(stat(seen, &st), 0); /* still the folder checked, not /etc */
    snprintf(seen, sizeof seen, "%s/hostname", pin);
    assert_int_not_equal(stat(seen, &st), 0);
    agent_mount_unpin(top, "j1-r0");
    assert_int_not_equal(lstat(pin, &st), 0); /* unmounted, its folders gone */
    assert_null(strstr(pin, top)); /* outside the state folder */
    snprintf(seen, sizeof seen, "%s/mark", moved);
    assert_int_equal(stat(seen, &st), 0); /* and what it held untouched */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(missing_folders_are_made),
        cmocka_unit_test(a_folder_made_first_by_another_is_moved_aside),
        cmocka_unit_test(a_link_is_refused),
        cmocka_unit_test(a_group_written_tenant_folder_is_refused),
        cmocka_unit_test(another_users_job_folder_is_refused),
        cmocka_unit_test(unclean_paths_are_refused),
        cmocka_unit_test(a_mount_through_a_link_is_refused),
        cmocka_unit_test(a_pinned_mount_outlives_a_swap),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
