/*
 * nvml_fixture.h - for the tests that load the fake NVML (tests/fakes): a
 * private, rewritable copy of a shipped fixture, named by the variable the
 * fake reads, and atomic edits of it while the fake runs (README.md: the
 * fake re-reads a fixture whose inode changed). Header-only, test code only;
 * the includer defines NVML_FIXTURE_TAG (a word naming the test, for the
 * copy's file name) and links jansson and cmocka.
 */
#ifndef TS_TESTS_NVML_FIXTURE_H
#define TS_TESTS_NVML_FIXTURE_H

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define NVML_FIXTURE_DIR TS_TEST_DATA "/../fakes"
#define NVML_FIXTURE_ENV "TESSERA_FAKE_NVML_FIXTURE"
#define NVML_FIXTURE_PATH_BYTES 512

static char fixture[NVML_FIXTURE_PATH_BYTES]; /* the test's copy */

/* Copies the shipped fixture `name` to a temp file and points the fake at it. */
static inline void use_fixture(const char *name)
{
    char src[NVML_FIXTURE_PATH_BYTES];
    snprintf(src, sizeof src, "%s/%s", NVML_FIXTURE_DIR, name);
    json_error_t jerr;
    json_t *root = json_load_file(src, 0, &jerr);
    assert_non_null(root);
    snprintf(fixture, sizeof fixture, "/tmp/ts-test-%s-%d-%s", NVML_FIXTURE_TAG, (int)getpid(),
             name);
    assert_int_equal(json_dump_file(root, fixture, JSON_INDENT(1)), 0);
    json_decref(root);
    setenv(NVML_FIXTURE_ENV, fixture, 1);
}

static inline json_t *fixture_load(void)
{
    json_error_t jerr;
    json_t *root = json_load_file(fixture, 0, &jerr);
    assert_non_null(root);
    return root;
}

/* Atomic rewrite (temp + rename): the fake sees a new inode at once. Takes root. */
static inline void fixture_save(json_t *root)
{
    char tmp[NVML_FIXTURE_PATH_BYTES + 8];
    snprintf(tmp, sizeof tmp, "%s.new", fixture);
    assert_int_equal(json_dump_file(root, tmp, JSON_INDENT(1)), 0);
    assert_int_equal(rename(tmp, fixture), 0);
    json_decref(root);
}

static inline json_t *gpu_of(json_t *root, int i)
{
    return json_array_get(json_object_get(root, "gpus"), (size_t)i);
}

/* Sets gpus[gpu].key = value (stolen) in the fixture file. */
static inline void inject(int gpu, const char *key, json_t *value)
{
    json_t *root = fixture_load();
    json_object_set_new(gpu_of(root, gpu), key, value);
    fixture_save(root);
}

#endif
