/*
 * test_image_glibc.c - agent_image_glibc_check: which image roots can load the
 * sharing shim (a glibc defining GLIBC_2.17).
 *
 * Proves: a root with no libc.so.6 (a static or musl image) is refused
 * saying so; a glibc that defines GLIBC_2.17 passes, also through an image's
 * own absolute link (/lib64 -> /usr/lib64) resolved inside the root; one
 * defining only older versions (GLIBC_2.12, or GLIBC_2.170's prefix does not
 * count) is refused as older than 2.17; a link pointing at the host's libc by
 * an absolute path is resolved inside the image, not on the host.
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

#include "agent/image.h"

static char root[256];

static void mk(const char *rel)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", root, rel);
    assert_int_equal(mkdir(p, 0755), 0);
}

static void put(const char *rel, const void *bytes, size_t n)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", root, rel);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fwrite("\x7f" "ELF junk", 1, 8, f);
    fwrite(bytes, 1, n, f);
    fclose(f);
}

static int setup(void **state)
{
    (void)state;
    snprintf(root, sizeof root, "/tmp/ts-glibc-XXXXXX");
    assert_non_null(mkdtemp(root));
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    return system(cmd) == 0 ? 0 : -1;
}

static void test_no_libc_is_refused(void **state)
{
    (void)state;
    char why[256];
    mk("bin");
    put("bin/busybox", "static", 6);
    assert_int_equal(agent_image_glibc_check(root, why, sizeof why), TS_EINVAL);
    assert_non_null(strstr(why, "no glibc"));
}

static void test_new_glibc_passes(void **state)
{
    (void)state;
    char why[256];
    mk("lib");
    mk("lib/x86_64-linux-gnu");
    put("lib/x86_64-linux-gnu/libc.so.6", "GLIBC_2.2.5\0GLIBC_2.17\0GLIBC_2.36", 34);
    assert_int_equal(agent_image_glibc_check(root, why, sizeof why), 0);
}

static void test_link_resolved_inside_the_image(void **state)
{
    (void)state;
    char why[256], p[512];
    mk("usr");
    mk("usr/lib64");
    put("usr/lib64/libc.so.6", "GLIBC_2.17", 11);
    snprintf(p, sizeof p, "%s/lib64", root);
    assert_int_equal(symlink("/usr/lib64", p), 0);
    assert_int_equal(agent_image_glibc_check(root, why, sizeof why), 0);
}

static void test_old_glibc_is_refused(void **state)
{
    (void)state;
    char why[256];
    mk("lib64");
    put("lib64/libc.so.6", "GLIBC_2.2.5\0GLIBC_2.12\0GLIBC_2.170x", 35);
    assert_int_equal(agent_image_glibc_check(root, why, sizeof why), TS_EINVAL);
    assert_non_null(strstr(why, "older than 2.17"));
}

static void test_host_libc_is_not_the_images(void **state)
{
    (void)state;
    char why[256], p[512];
    mk("lib");
    mk("lib/x86_64-linux-gnu");
    snprintf(p, sizeof p, "%s/lib/x86_64-linux-gnu/libc.so.6", root);
    /* the host has this file; inside the image the link leads nowhere */
    assert_int_equal(symlink("/usr/lib/x86_64-linux-gnu/libc.so.6", p), 0);
    assert_int_equal(agent_image_glibc_check(root, why, sizeof why), TS_EINVAL);
    assert_non_null(strstr(why, "no glibc"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_no_libc_is_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_new_glibc_passes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_link_resolved_inside_the_image, setup, teardown),
        cmocka_unit_test_setup_teardown(test_old_glibc_is_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_host_libc_is_not_the_images, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
