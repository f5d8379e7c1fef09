/*
 * test_read_file.c - the tools' one file reader (io/read_file.h): a file
 * read whole, past the first buffer, NUL-terminated; an empty file; one over
 * the limit refused; a missing path named.
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

#include "io/read_file.h"

/* A temporary file of n bytes, byte i being 'a' + i % 26; its path in path. */
static void make_file(char *path, size_t cap, size_t n)
{
    snprintf(path, cap, "/tmp/ts_read_file_XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "wb");
    assert_non_null(f);
    for (size_t i = 0; i < n; i++)
        fputc('a' + (int)(i % 26), f);
    assert_int_equal(fclose(f), 0);
}

static void a_file_is_read_whole_past_the_first_buffer(void **state)
{
    (void)state;
    char path[64];
    size_t n = 200000; /* past the 64 KiB the buffer starts at, twice */
    make_file(path, sizeof path, n);
    char *buf = NULL;
    size_t len = 0;
    ts_err err = {0, ""};
    assert_int_equal(io_read_file(path, n, &buf, &len, &err), 0);
    assert_int_equal(len, n);
    assert_int_equal(buf[n], '\0');
    for (size_t i = 0; i < n; i++)
        if (buf[i] != 'a' + (int)(i % 26))
            fail_msg("byte %zu", i);
    free(buf);
    unlink(path);
}

static void an_empty_file_is_an_empty_string(void **state)
{
    (void)state;
    char path[64];
    make_file(path, sizeof path, 0);
    char *buf = NULL;
    size_t len = 1;
    ts_err err = {0, ""};
    assert_int_equal(io_read_file(path, 10, &buf, &len, &err), 0);
    assert_int_equal(len, 0);
    assert_string_equal(buf, "");
    free(buf);
    unlink(path);
}

static void a_file_over_the_limit_is_refused(void **state)
{
    (void)state;
    char path[64];
    make_file(path, sizeof path, 70000);
    char *buf = NULL;
    size_t len = 0;
    ts_err err = {0, ""};
    assert_int_equal(io_read_file(path, 69999, &buf, &len, &err), TS_EINVAL);
    assert_null(buf);
    assert_int_equal(len, 0);
    assert_non_null(strstr(err.msg, "larger than 69999 bytes"));
    assert_non_null(strstr(err.msg, path));
    assert_int_equal(io_read_file(path, 70000, &buf, &len, &err), 0); /* at it: read */
    assert_int_equal(len, 70000);
    free(buf);
    unlink(path);
}

static void a_missing_file_is_named(void **state)
{
    (void)state;
    char *buf = NULL;
    size_t len = 0;
    ts_err err = {0, ""};
    assert_int_equal(io_read_file("/nonexistent/ts_read_file", 10, &buf, &len, &err), TS_EIO);
    assert_null(buf);
    assert_non_null(strstr(err.msg, "/nonexistent/ts_read_file: cannot open"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_file_is_read_whole_past_the_first_buffer),
        cmocka_unit_test(an_empty_file_is_an_empty_string),
        cmocka_unit_test(a_file_over_the_limit_is_refused),
        cmocka_unit_test(a_missing_file_is_named),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
