/*
 * test_trash.c - the agent's trash (agent/trash.h) and agent_bundle_remove
 * on it: what a task left is gone from its place when the call returns,
 * and removed behind.
 *
 * Proves: a bundle with 20,000 files in its upper layer is no longer at its
 * path when agent_bundle_remove returns, and <bundles>/.trash is emptied
 * behind; a chain of folders 300 deep (more than the thread holds open) is
 * removed whole; a link in the tree to a folder outside is removed, not
 * followed (the folder and its file stay); a bind of a folder of the same
 * filesystem left in the tree is not descended into; a path not there is
 * no error;
 * a sweep empties what an ended agent left in a trash folder.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/image.h"
#include "agent/trash.h"

#define IDLE_WAIT_MS 60000
#define MANY_FILES 20000
#define DEEP_LEVELS 300

static char top[256];

static int setup(void **state)
{
    (void)state;
    snprintf(top, sizeof top, "/tmp/ts-trash-XXXXXX");
    assert_non_null(mkdtemp(top));
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    assert_true(agent_trash_idle(IDLE_WAIT_MS));
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", top);
    return system(cmd) == 0 ? 0 : -1;
}

static void put_file(const char *dir, const char *name)
{
    char p[1024];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    assert_true(fd >= 0);
    close(fd);
}

static int entries(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return errno == ENOENT ? 0 : -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    closedir(d);
    return n;
}

static void bundle_goes_at_once_and_is_emptied_behind(void **state)
{
    (void)state;
    char bundles[300], b[400], up[500], trash[400], name[32];
    snprintf(bundles, sizeof bundles, "%s/bundles", top);
    snprintf(b, sizeof b, "%s/j7-r0", bundles);
    snprintf(up, sizeof up, "%s/upper", b);
    snprintf(trash, sizeof trash, "%s/" BUNDLE_TRASH_DIR, bundles);
    assert_int_equal(mkdir(bundles, 0700), 0);
    assert_int_equal(mkdir(b, 0700), 0);
    assert_int_equal(mkdir(up, 0755), 0);
    for (int i = 0; i < MANY_FILES; i++) {
        snprintf(name, sizeof name, "f%d", i);
        put_file(up, name);
    }
    agent_bundle_remove(b);
    struct stat sb;
    assert_int_equal(lstat(b, &sb), -1); /* its name is free at once */
    assert_int_equal(errno, ENOENT);
    assert_true(agent_trash_idle(IDLE_WAIT_MS));
    assert_int_equal(entries(trash), 0);
    agent_bundle_remove(b); /* no longer there: nothing to do */
    assert_int_equal(lstat(b, &sb), -1);
}

static void deep_chain_is_removed_whole(void **state)
{
    (void)state;
    char trash[300], path[300];
    snprintf(trash, sizeof trash, "%s/trash", top);
    snprintf(path, sizeof path, "%s/deep", top);
    assert_int_equal(mkdir(path, 0700), 0);
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(fd >= 0);
    for (int i = 0; i < DEEP_LEVELS; i++) { /* deeper than PATH_MAX allows as a path */
        assert_int_equal(mkdirat(fd, "dddddddddddddddddddddddd", 0700), 0);
        int nfd = openat(fd, "dddddddddddddddddddddddd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(nfd >= 0);
        int f = openat(nfd, "file", O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        assert_true(f >= 0);
        close(f);
        close(fd);
        fd = nfd;
    }
    close(fd);
    assert_int_equal(agent_trash_put(path, trash), 0);
    assert_true(agent_trash_idle(IDLE_WAIT_MS));
    assert_int_equal(entries(trash), 0);
}

static void links_are_not_followed(void **state)
{
    (void)state;
    char trash[300], path[300], outside[300], link[400], kept[400];
    snprintf(trash, sizeof trash, "%s/trash", top);
    snprintf(path, sizeof path, "%s/task", top);
    snprintf(outside, sizeof outside, "%s/outside", top);
    snprintf(link, sizeof link, "%s/to-outside", path);
    snprintf(kept, sizeof kept, "%s/precious", outside);
    assert_int_equal(mkdir(path, 0700), 0);
    assert_int_equal(mkdir(outside, 0700), 0);
    put_file(outside, "precious");
    assert_int_equal(symlink(outside, link), 0);
    assert_int_equal(agent_trash_put(path, trash), 0);
    assert_true(agent_trash_idle(IDLE_WAIT_MS));
    assert_int_equal(entries(trash), 0);
    struct stat sb;
    assert_int_equal(stat(kept, &sb), 0);
    char missing[300];
    snprintf(missing, sizeof missing, "%s/not-there", top);
    assert_int_equal(agent_trash_put(missing, trash), 0);
}

/* A bind of a folder of the same filesystem left in a tree: rm's
 * --one-file-system, which compares devices, would empty the folder. */
static void a_bind_mount_is_not_descended(void **state)
{
    (void)state;
    if (geteuid() != 0)
        skip();
    char trash[300], path[300], outside[300], mnt[400], kept[400];
    snprintf(trash, sizeof trash, "%s/trash", top);
    snprintf(path, sizeof path, "%s/task", top);
    snprintf(outside, sizeof outside, "%s/outside", top);
    snprintf(mnt, sizeof mnt, "%s/mnt", path);
    snprintf(kept, sizeof kept, "%s/precious", outside);
    assert_int_equal(mkdir(path, 0700), 0);
    assert_int_equal(mkdir(mnt, 0700), 0);
    assert_int_equal(mkdir(outside, 0700), 0);
    put_file(outside, "precious");
    put_file(path, "plain");
    if (mount(outside, mnt, NULL, MS_BIND, NULL) != 0)
        skip();
    assert_int_equal(agent_trash_put(path, trash), 0);
    assert_true(agent_trash_idle(IDLE_WAIT_MS));
    struct stat sb;
    assert_int_equal(stat(kept, &sb), 0);
    DIR *d = opendir(trash); /* the tree stays, with the mount point */
    assert_non_null(d);
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        char left[900];
        snprintf(left, sizeof left, "%s/%s/mnt", trash, e->d_name);
        assert_int_equal(umount2(left, MNT_DETACH), 0);
        snprintf(left, sizeof left, "%s/%s/plain", trash, e->d_name);
        assert_int_not_equal(lstat(left, &sb), 0); /* the rest of it went */
    }
    closedir(d);
}

static void sweep_empties_what_was_left(void **state)
{
    (void)state;
    char trash[300], left[400];
    snprintf(trash, sizeof trash, "%s/left-trash", top);
    snprintf(left, sizeof left, "%s/old-bundle", trash);
    assert_int_equal(mkdir(trash, 0700), 0);
    assert_int_equal(mkdir(left, 0700), 0);
    put_file(left, "a");
    put_file(trash, "b");
    agent_trash_sweep(trash);
    assert_true(agent_trash_idle(IDLE_WAIT_MS));
    assert_int_equal(entries(trash), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(bundle_goes_at_once_and_is_emptied_behind, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(deep_chain_is_removed_whole, setup, teardown),
        cmocka_unit_test_setup_teardown(links_are_not_followed, setup, teardown),
        cmocka_unit_test_setup_teardown(a_bind_mount_is_not_descended, setup, teardown),
        cmocka_unit_test_setup_teardown(sweep_empties_what_was_left, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
