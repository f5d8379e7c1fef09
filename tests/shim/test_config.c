/*
 * test_config.c - the shim's environment parser (src/shim/config.c): both
 * list shapes for the quota and the share, the ledger name or path, byte
 * suffixes, and that every malformed value is refused with a message naming
 * the variable, leaving a pass-through configuration.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "shim/config.h"

#define GIB (1ULL << 30)
#define MIB (1ULL << 20)

static int parse(const char *mem, const char *pct, const char *ledger, ts_shim_config *cfg,
                 ts_err *err)
{
    ts_shim_env env = {.mem_limit = mem, .compute_percent = pct, .ledger = ledger};
    ts_err_clear(err);
    return shim_config_parse(&env, cfg, err);
}

static void test_unset_is_pass_through(void **state)
{
    (void)state;
    ts_shim_config cfg;
    ts_err err;
    assert_int_equal(parse(NULL, NULL, NULL, &cfg, &err), 0);
    assert_false(cfg.mem_on);
    assert_false(cfg.compute_on);
    assert_string_equal(cfg.ledger, "");
    assert_string_equal(cfg.driver, TS_SHIM_DRIVER_DEFAULT);
    assert_int_equal(cfg.ctx_bytes, TS_SHIM_CTX_BYTES_DEFAULT);
    for (int d = 0; d < TS_SHIM_MAX_DEVICES; d++) {
        assert_int_equal(cfg.mem_limit[d], -1);
        assert_int_equal(cfg.compute_pct[d], 100);
    }
    assert_int_equal(parse("", "", "", &cfg, &err), 0); /* empty = unset */
    assert_false(cfg.mem_on || cfg.compute_on);
}

static void test_one_value_for_every_device(void **state)
{
    (void)state;
    ts_shim_config cfg;
    ts_err err;
    assert_int_equal(parse("8G", "30", "tenant-a", &cfg, &err), 0);
    assert_true(cfg.mem_on && cfg.compute_on);
    for (int d = 0; d < TS_SHIM_MAX_DEVICES; d++) {
        assert_int_equal(cfg.mem_limit[d], 8 * GIB);
        assert_int_equal(cfg.compute_pct[d], 30);
    }
    assert_string_equal(cfg.ledger, TS_SHIM_LEDGER_DIR "/tenant-a");
    assert_int_equal(parse("0", "100", "/run/tessera/a.ledger", &cfg, &err), 0);
    assert_true(cfg.mem_on); /* a zero quota is a quota */
    assert_false(cfg.compute_on); /* 100 % is no limit */
    assert_string_equal(cfg.ledger, "/run/tessera/a.ledger");
}

static void test_per_device_lists(void **state)
{
    (void)state;
    ts_shim_config cfg;
    ts_err err;
    assert_int_equal(parse("0=8G,3=512M", "1=25,2=100", NULL, &cfg, &err), 0);
    assert_int_equal(cfg.mem_limit[0], 8 * GIB);
    assert_int_equal(cfg.mem_limit[1], -1);
    assert_int_equal(cfg.mem_limit[3], 512 * MIB);
    assert_int_equal(cfg.compute_pct[0], 100);
    assert_int_equal(cfg.compute_pct[1], 25);
    assert_int_equal(cfg.compute_pct[2], 100);
    assert_true(cfg.compute_on);
}

static void test_bytes(void **state)
{
    (void)state;
    uint64_t v;
    assert_int_equal(shim_parse_bytes("123", &v), 0);
    assert_int_equal(v, 123);
    assert_int_equal(shim_parse_bytes("4k", &v), 0);
    assert_int_equal(v, 4096);
    assert_int_equal(shim_parse_bytes("2MB", &v), 0);
    assert_int_equal(v, 2 * MIB);
    assert_int_equal(shim_parse_bytes("1T", &v), 0);
    assert_int_equal(v, 1ULL << 40);
    assert_int_equal(shim_parse_bytes("-1", &v), -1);
    assert_int_equal(shim_parse_bytes("1.5G", &v), -1);
    assert_int_equal(shim_parse_bytes("99999999999T", &v), -1); /* overflows */
    assert_int_equal(shim_parse_bytes("", &v), -1);
}

/* Each bad input: refused, the message names the variable and says why,
 * and the configuration left behind enforces nothing. */
static void refused(const char *mem, const char *pct, const char *ledger, const char *want)
{
    ts_shim_config cfg;
    ts_err err;
    assert_int_equal(parse(mem, pct, ledger, &cfg, &err), TS_EINVAL);
    if (!strstr(err.msg, want))
        fail_msg("message \"%s\" lacks \"%s\"", err.msg, want);
    assert_false(cfg.mem_on || cfg.compute_on);
    assert_string_equal(cfg.driver, TS_SHIM_DRIVER_DEFAULT);
}

static void test_bad_values_refused(void **state)
{
    (void)state;
    refused("8X", NULL, NULL, "TESSERA_CUDA_MEM_LIMIT: \"8X\" is not a valid value");
    refused("0=8G,0=1G", NULL, NULL, "TESSERA_CUDA_MEM_LIMIT: device 0 named twice");
    refused("16=1G", NULL, NULL, "TESSERA_CUDA_MEM_LIMIT: device \"16\" must be 0..15");
    refused("0=8G,1", NULL, NULL, "TESSERA_CUDA_MEM_LIMIT: \"1\" is not DEVICE=VALUE");
    refused("0=lots", NULL, NULL, "TESSERA_CUDA_MEM_LIMIT: device 0: \"lots\"");
    refused("8G", "0", NULL, "TESSERA_CUDA_COMPUTE_PERCENT: \"0\" is not a valid value");
    refused("8G", "101", NULL, "TESSERA_CUDA_COMPUTE_PERCENT");
    refused(NULL, "0=30,1=x", NULL, "TESSERA_CUDA_COMPUTE_PERCENT: device 1: \"x\"");
    refused("8G", NULL, "a/b", "TESSERA_CUDA_LEDGER: \"a/b\": a name has no '/'");
    ts_shim_env env = {.ctx_bytes = "lots"};
    ts_shim_config cfg;
    ts_err err;
    assert_int_equal(shim_config_parse(&env, &cfg, &err), TS_EINVAL);
    assert_non_null(strstr(err.msg, "TESSERA_CUDA_CTX_BYTES"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unset_is_pass_through),
        cmocka_unit_test(test_one_value_for_every_device),
        cmocka_unit_test(test_per_device_lists),
        cmocka_unit_test(test_bytes),
        cmocka_unit_test(test_bad_values_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
