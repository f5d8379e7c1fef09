/*
 * test_bundle_path.c - a file a container task names, found where the
 * container sees it (agent/bundle_path.h) and opened without leaving that
 * place (agent_taskfile_open_in).
 *
 * Proves: a name in no mount is in the bundle's rootfs, relative names from
 * the container's working directory; a name under a bind is in its source,
 * the deepest bind deciding, "/data" never holding "/database"; "." and
 * ".." resolve by their text and stop at "/"; a name in /proc or a tmpfs is
 * refused; no config.json is TS_ENOENT. The open from a root refuses a link
 * anywhere on the way and keeps ".." inside the root, where a plain open
 * follows both to the node's file.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/bundle_path.h"
#include "agent/tail.h"
#include "agent/taskfile.h"

static char dir[64];

static const char *at(const char *name)
{
    static char p[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
    return p[k];
}

static void put(const char *name, const char *text)
{
    FILE *f = fopen(at(name), "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/ts-bundle-path-XXXXXX");
    assert_non_null(mkdtemp(dir));
    char cfg[2048];
    snprintf(cfg, sizeof cfg,
             "{\"process\": {\"cwd\": \"/work/run\"}, \"mounts\": ["
             "{\"destination\": \"/proc\", \"type\": \"proc\", \"source\": \"proc\"},"
             "{\"destination\": \"/dev/shm\", \"type\": \"tmpfs\", \"source\": \"shm\"},"
             "{\"destination\": \"/data\", \"type\": \"bind\", \"source\": \"%s/data-src\"},"
             "{\"destination\": \"/data/inner/\", \"type\": \"bind\", \"source\": \"%s/inner-src\"}"
             "]}",
             dir, dir);
    put("config.json", cfg);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* agent_bundle_path of name: its rc, root and rel. */
static int where(const char *name, char *root, char *rel)
{
    ts_err e;
    return agent_bundle_path(dir, name, root, 1024, rel, 1024, &e);
}

static void test_names_map_to_the_containers_places(void **state)
{
    (void)state;
    char root[1024], rel[1024], want[1024];
    snprintf(want, sizeof want, "%s/rootfs", dir);
    assert_int_equal(where("/tmp/x.log", root, rel), 0);
    assert_string_equal(root, want);
    assert_string_equal(rel, "tmp/x.log");
    assert_int_equal(where("out.log", root, rel), 0); /* from its working directory */
    assert_string_equal(root, want);
    assert_string_equal(rel, "work/run/out.log");
    assert_int_equal(where("../../../../etc/./shadow", root, rel), 0); /* stops at "/" */
    assert_string_equal(root, want);
    assert_string_equal(rel, "etc/shadow");
    assert_int_equal(where("/database/x", root, rel), 0); /* not in /data */
    assert_string_equal(root, want);
    assert_string_equal(rel, "database/x");
    snprintf(want, sizeof want, "%s/data-src", dir);
    assert_int_equal(where("/data/a/b.log", root, rel), 0);
    assert_string_equal(root, want);
    assert_string_equal(rel, "a/b.log");
    assert_int_equal(where("/data/inner/../c.log", root, rel), 0);
    assert_string_equal(root, want);
    assert_string_equal(rel, "c.log");
    snprintf(want, sizeof want, "%s/inner-src", dir); /* the deepest bind decides */
    assert_int_equal(where("/data//inner/d.log", root, rel), 0);
    assert_string_equal(root, want);
    assert_string_equal(rel, "d.log");
    assert_int_equal(where("/proc/1/environ", root, rel), TS_EINVAL);
    assert_int_equal(where("/dev/shm/x", root, rel), TS_EINVAL);
    unlink(at("config.json"));
    assert_int_equal(where("/tmp/x.log", root, rel), TS_ENOENT);
}

static void test_an_open_from_a_root_stays_in_it(void **state)
{
    (void)state;
    assert_int_equal(mkdir(at("rootfs"), 0755), 0);
    assert_int_equal(mkdir(at("rootfs/tmp"), 0755), 0);
    put("rootfs/tmp/x.log", "inside\n");
    put("node.log", "the node's file\n");
    /* a link on the way (its "/" under another name) and a link to the node's file */
    assert_int_equal(symlink("/", at("rootfs/up")), 0);
    assert_int_equal(symlink(at("node.log"), at("rootfs/tmp/link.log")), 0);
    char *text = NULL;
    long long size;
    ts_err e;
    assert_int_equal(agent_tail_read_in(at("rootfs"), "tmp/x.log", 4096, getuid(), &text, &size,
                                        &e),
                     0);
    assert_string_equal(text, "inside\n");
    free(text);
    char through[600];
    snprintf(through, sizeof through, "up%s", at("node.log"));
    assert_int_not_equal(
        agent_tail_read_in(at("rootfs"), through, 4096, getuid(), &text, &size, &e), 0);
    assert_null(text);
    assert_int_not_equal(
        agent_tail_read_in(at("rootfs"), "tmp/link.log", 4096, getuid(), &text, &size, &e), 0);
    /* ".." stays in the root: the node's file of that name is not reached */
    char climb[600];
    snprintf(climb, sizeof climb, "../../../..%s", at("node.log"));
    int rc = agent_tail_read_in(at("rootfs"), climb, 4096, getuid(), &text, &size, &e);
    assert_int_equal(rc, TS_ENOENT);
    /* what a plain open (a bare task's name) would have read */
    snprintf(through, sizeof through, "%s/up%s", at("rootfs"), at("node.log"));
    assert_int_equal(agent_tail_read(through, 4096, getuid(), &text, &size, &e), 0);
    assert_string_equal(text, "the node's file\n");
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_names_map_to_the_containers_places, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_an_open_from_a_root_stays_in_it, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
