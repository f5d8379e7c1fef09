/*
 * test_shim_quota.c - one tenant's quota shared by several real processes,
 * each running tests/shim/shim_app under LD_PRELOAD=libtessera-cuda.so on
 * one simulated GPU (the fake's shared state file).
 *
 * Proves: every door to the driver (exported names, dlsym on a dlopen()ed
 * libcuda, cuGetProcAddress, its per-thread-stream variants) sees the same
 * quota; two and three processes storming allocations through every path
 * never hold more device memory together than the quota (sampled from the
 * device all along) and only ever get success or out-of-memory; a process
 * SIGKILLed mid-storm leaves the ledger consistent (its charge comes back,
 * nothing else moves); a dead holder of the whole quota does not block the
 * next process.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "shim/cuda_api.h"
#include "shim/ledger.h"

#define MIB (1024ULL * 1024ULL)
#define QUOTA_BYTES (512 * MIB)
#define CTX_BYTES (64 * MIB)
#define STORM_OPS "20000"
#define VICTIM_OPS "100000000" /* never finishes on its own */
#define STORM_MAX_MB "96"
#define CHILD_TIMEOUT_MS 120000
#define SAMPLE_MS 2
#define KILL_AFTER_MS 150
#define OUT_MAX 4096

static struct cu_api fk; /* the fake, straight: what the device really holds */
static unsigned long long (*fake_used_except)(int dev, int pid);
static char state_path[128], ledger_path[128];

struct child {
    pid_t pid;
    int out;
    char buf[OUT_MAX];
    size_t len;
};

static void child_env(const char *via)
{
    setenv("LD_PRELOAD", TS_SHIM_LIB, 1);
    setenv("TS_APP_VIA", via, 1);
    const char *asan = getenv("ASAN_OPTIONS");
    char opts[512];
    snprintf(opts, sizeof opts, "%s%sverify_asan_link_order=0", asan ? asan : "",
             asan && *asan ? ":" : "");
    setenv("ASAN_OPTIONS", opts, 1);
}

#define MAX_CHILDREN 16
static pid_t children[MAX_CHILDREN]; /* killed after each test, pass or fail */

static int kill_children(void **state)
{
    (void)state;
    for (int i = 0; i < MAX_CHILDREN; i++)
        if (children[i] > 0) {
            kill(children[i], SIGKILL);
            waitpid(children[i], NULL, 0);
            children[i] = 0;
        }
    return 0;
}

static void spawn(struct child *c, const char *via, int preload, const char *const *argv)
{
    int p[2];
    assert_int_equal(pipe(p), 0);
    memset(c, 0, sizeof *c);
    c->pid = fork();
    assert_true(c->pid >= 0);
    if (c->pid == 0) {
        dup2(p[1], 1);
        close(p[0]);
        close(p[1]);
        setenv("TS_APP_WAIT_CTX", "1", 1);
        if (preload)
            child_env(via);
        else
            setenv("TS_APP_VIA", via, 1);
        execv(TS_SHIM_APP, (char *const *)argv);
        _exit(127);
    }
    close(p[1]);
    c->out = p[0];
    for (int i = 0; i < MAX_CHILDREN; i++)
        if (children[i] <= 0 || kill(children[i], 0) != 0) {
            children[i] = c->pid;
            break;
        }
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Reads what the child wrote until EOF, then its status. */
static int finish(struct child *c)
{
    ssize_t n;
    while ((n = read(c->out, c->buf + c->len, sizeof c->buf - 1 - c->len)) > 0)
        c->len += (size_t)n;
    c->buf[c->len] = '\0';
    close(c->out);
    int st = 0;
    int64_t deadline = now_ms() + CHILD_TIMEOUT_MS;
    while (waitpid(c->pid, &st, WNOHANG) == 0) {
        if (now_ms() > deadline) {
            kill(c->pid, SIGKILL);
            waitpid(c->pid, &st, 0);
            fail_msg("shim_app %d did not finish", (int)c->pid);
        }
        usleep(1000);
    }
    return st;
}

static int run(const char *via, int preload, const char *const *argv, char *out, size_t len)
{
    struct child c;
    spawn(&c, via, preload, argv);
    int st = finish(&c);
    snprintf(out, len, "%s", c.buf);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static uint64_t field(const char *text, const char *key)
{
    const char *p = strstr(text, key);
    return p ? strtoull(p + strlen(key), NULL, 10) : UINT64_MAX;
}

/* Device memory held by everyone but this process. */
static uint64_t others_hold(void)
{
    size_t fr, total;
    assert_int_equal(fk.cuMemGetInfo_v2(&fr, &total), CUDA_SUCCESS);
    return total - fr - CTX_BYTES;
}

static void test_every_door_sees_the_quota(void **state)
{
    (void)state;
    static const char *const vias[] = {"export", "dlsym", "procaddr", "procaddr_ptsz"};
    const char *argv[] = {"shim_app", "paths", NULL};
    char out[OUT_MAX];
    for (size_t i = 0; i < sizeof vias / sizeof vias[0]; i++) {
        int rc = run(vias[i], 1, argv, out, sizeof out);
        if (rc != 0)
            fail_msg("via %s: exit %d: %s", vias[i], rc, out);
        assert_int_equal(field(out, "total="), QUOTA_BYTES);
        assert_int_equal(field(out, "free="), QUOTA_BYTES - CTX_BYTES);
        assert_int_equal(field(out, "over="), CUDA_ERROR_OUT_OF_MEMORY);
        assert_int_equal(field(out, "over_async="), CUDA_ERROR_OUT_OF_MEMORY);
        assert_int_equal(field(out, "after total="), QUOTA_BYTES);
    }
    /* control: the same program without the shim sees the whole device */
    assert_int_equal(run("export", 0, argv, out, sizeof out), 0);
    assert_true(field(out, "total=") > QUOTA_BYTES);
}

/* Runs n storms (the last one killed after KILL_AFTER_MS when kill_one),
 * sampling the device all along. */
static void storm(int n, int kill_one)
{
    static const char *const vias[] = {"export", "procaddr", "dlsym"};
    static const char *const seeds[] = {"11", "22", "33"};
    struct child c[3];
    for (int i = 0; i < n; i++) {
        int victim = kill_one && i == n - 1;
        const char *argv[] = {"shim_app", "storm", victim ? VICTIM_OPS : STORM_OPS, seeds[i],
                              STORM_MAX_MB, NULL};
        spawn(&c[i], vias[i], 1, argv);
    }
    if (kill_one) { /* the victim is storming once it says go */
        char go[4] = {0};
        assert_int_equal(read(c[n - 1].out, go, 3), 3);
        assert_string_equal(go, "go\n");
    }
    uint64_t peak = 0;
    int64_t t0 = now_ms();
    int alive = n, killed = !kill_one;
    int done[3] = {0};
    int status[3] = {0};
    while (alive > 0) {
        /* what live processes hold: a killed one's memory is the driver's to
         * free (the fake does it once the process is reaped) */
        uint64_t h = fake_used_except(0, kill_one && killed ? c[n - 1].pid : 0) - CTX_BYTES;
        peak = h > peak ? h : peak;
        if (h > QUOTA_BYTES)
            fail_msg("the tenant holds %llu bytes, quota %llu", (unsigned long long)h,
                     (unsigned long long)QUOTA_BYTES);
        if (!killed && now_ms() - t0 >= KILL_AFTER_MS) {
            kill(c[n - 1].pid, SIGKILL);
            killed = 1;
        }
        for (int i = 0; i < n; i++)
            if (!done[i] && waitpid(c[i].pid, &status[i], WNOHANG) == c[i].pid) {
                done[i] = 1;
                alive--;
            }
        if (now_ms() - t0 > CHILD_TIMEOUT_MS)
            fail_msg("storm did not finish");
        usleep(SAMPLE_MS * 1000);
    }
    for (int i = 0; i < n; i++) {
        ssize_t r = read(c[i].out, c[i].buf, sizeof c[i].buf - 1);
        c[i].buf[r > 0 ? r : 0] = '\0';
        close(c[i].out);
        if (kill_one && i == n - 1) {
            assert_true(WIFSIGNALED(status[i]) && WTERMSIG(status[i]) == SIGKILL);
            continue;
        }
        if (!WIFEXITED(status[i]) || WEXITSTATUS(status[i]) != 0)
            fail_msg("storm %d failed: %s", i, c[i].buf);
        /* the quota was really contended, or this proves nothing */
        if (field(c[i].buf, "ooms=") == 0 || field(c[i].buf, "ooms=") == UINT64_MAX)
            fail_msg("storm %d never hit the quota: %s", i, c[i].buf);
    }
    print_message("peak held %llu MiB of %llu\n", (unsigned long long)(peak / MIB),
                  (unsigned long long)(QUOTA_BYTES / MIB));
    /* everyone is gone: the ledger holds nothing (the killed one reclaimed) */
    ts_ledger *l;
    ts_err err;
    assert_int_equal(shim_ledger_open(ledger_path, &l, &err), 0);
    CUuuid u;
    assert_int_equal(fk.cuDeviceGetUuid(&u, 0), CUDA_SUCCESS);
    int d = shim_ledger_device(l, (const unsigned char *)u.bytes);
    assert_true(d >= 0);
    assert_int_equal(shim_ledger_used(l, d), 0);
    shim_ledger_close(l);
    assert_int_equal(others_hold(), 0);
}

static void test_two_processes_share_the_quota(void **state)
{
    (void)state;
    storm(2, 0);
}

static void test_three_processes_one_killed_mid_storm(void **state)
{
    (void)state;
    storm(3, 1);
}

/* NVML seen from the tenant: the GPU its CUDA sees (matched by UUID) reports
 * the quota, another GPU of the node passes through. */
static void test_nvml_reports_the_quota(void **state)
{
    (void)state;
    setenv("TESSERA_FAKE_NVML_FIXTURE", TS_TEST_DATA "/../fakes/h100x8.json", 1);
    setenv("TS_APP_NVML", TS_FAKE_NVML, 1);
    setenv("TESSERA_FAKE_CUDA_UUIDS", "GPU-3f1a2b00-6b1f-4c1d-9e2a-5d0000000000", 1);
    static const char *const scopes[] = {"local", "global"};
    char out[OUT_MAX];
    for (int i = 0; i < 2; i++) {
        const char *argv[] = {"shim_app", "nvml", scopes[i], NULL};
        int rc = run("export", 1, argv, out, sizeof out);
        if (rc != 0)
            fail_msg("nvml %s: exit %d: %s", scopes[i], rc, out);
        assert_int_equal(field(out, "nvml0 total="), QUOTA_BYTES);
        assert_int_equal(field(out, "nvml0 total=") - field(out, " used="),
                         field(strstr(out, "nvml0"), "free="));
        assert_int_equal(field(out, "nvml1 total="), 81559 * MIB); /* not ours: untouched */
    }
    unsetenv("TESSERA_FAKE_CUDA_UUIDS");
}

static void test_dead_holder_does_not_block(void **state)
{
    (void)state;
    char most[32], all[32];
    snprintf(most, sizeof most, "%llu", (unsigned long long)(QUOTA_BYTES - 2 * CTX_BYTES));
    snprintf(all, sizeof all, "%llu", (unsigned long long)(QUOTA_BYTES - CTX_BYTES));
    const char *hold_most[] = {"shim_app", "hold", most, NULL};
    const char *hold_all[] = {"shim_app", "hold", all, NULL};
    struct child a, b;
    spawn(&a, "export", 1, hold_most);
    char line[64] = {0};
    ssize_t n = read(a.out, line, sizeof line - 1);
    assert_true(n > 0 && strncmp(line, "held", 4) == 0);
    /* while it lives, a second process gets its context and nothing more */
    char out[OUT_MAX];
    assert_int_not_equal(run("export", 1, hold_all, out, sizeof out), 0);
    kill(a.pid, SIGKILL);
    finish(&a);
    /* dead: its charge is reclaimed and the whole quota is there again */
    spawn(&b, "export", 1, hold_all);
    memset(line, 0, sizeof line);
    n = read(b.out, line, sizeof line - 1);
    assert_true(n > 0 && strncmp(line, "held", 4) == 0);
    kill(b.pid, SIGKILL);
    finish(&b);
}

static int setup(void **state)
{
    (void)state;
    snprintf(state_path, sizeof state_path, "/tmp/ts-shim-quota-%d.state", (int)getpid());
    snprintf(ledger_path, sizeof ledger_path, "/tmp/ts-shim-quota-%d.ledger", (int)getpid());
    unlink(state_path);
    unlink(ledger_path);
    setenv("TESSERA_FAKE_CUDA_STATE", state_path, 1);
    setenv("TESSERA_FAKE_CUDA_DEVICES", "1", 1);
    setenv("TESSERA_FAKE_CUDA_MEM_BYTES", "64G", 1);
    setenv("TESSERA_FAKE_CUDA_CTX_BYTES", "64M", 1);
    setenv("TESSERA_CUDA_DRIVER", TS_FAKE_CUDA, 1);
    setenv("TESSERA_CUDA_MEM_LIMIT", "512M", 1);
    setenv("TESSERA_CUDA_CTX_BYTES", "64M", 1);
    setenv("TESSERA_CUDA_LEDGER", ledger_path, 1);
    unsetenv("TESSERA_CUDA_COMPUTE_PERCENT");
    unsetenv("LD_PRELOAD");
    void *fake = dlopen(TS_FAKE_CUDA, RTLD_NOW | RTLD_LOCAL);
    if (!fake || cu_api_load(&fk, fake) != 0)
        return -1;
    void *hook = dlsym(fake, "tsFakeCudaUsedExcept");
    if (!hook)
        return -1;
    memcpy(&fake_used_except, &hook, sizeof hook);
    CUcontext ctx;
    if (fk.cuInit(0) != CUDA_SUCCESS || fk.cuDevicePrimaryCtxRetain(&ctx, 0) != CUDA_SUCCESS ||
        fk.cuCtxSetCurrent(ctx) != CUDA_SUCCESS)
        return -1;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    unlink(state_path);
    unlink(ledger_path);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_every_door_sees_the_quota, kill_children),
        cmocka_unit_test_teardown(test_two_processes_share_the_quota, kill_children),
        cmocka_unit_test_teardown(test_three_processes_one_killed_mid_storm, kill_children),
        cmocka_unit_test_teardown(test_dead_holder_does_not_block, kill_children),
        cmocka_unit_test_teardown(test_nvml_reports_the_quota, kill_children),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
