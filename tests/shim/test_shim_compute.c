/*
 * test_shim_compute.c - the compute share: two tenants limited to 30 % and
 * 70 % of one simulated GPU, both launching as fast as they are let, each
 * get their share within +-5 points over 10 s - for short kernels, long
 * kernels and graph launches, through the exported names, dlsym,
 * cuGetProcAddress and its per-thread-stream variants, with plain,
 * extensible (cuLaunchKernelEx) and cooperative launches.
 *
 * A tenant's share is what its own work took on the device (the fake runs a
 * kernel exactly as long as its parameters say) over the wall time, as the
 * application itself counts it. The three GPUs run side by side, so the
 * test takes about 10 s. A control pair without limits first shows the same
 * programs split the GPU about evenly, so the limits are what makes 30/70.
 * Also checked: the GPU time the shim measured for a tenant (its ledger)
 * matches what its work really took.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "shim/cuda_api.h"
#include "shim/ledger.h"

#define RUN_SECONDS "10"
#define CONTROL_SECONDS "2"
#define SHARE_TOLERANCE_POINTS 5.0
#define MEASURE_TOLERANCE 0.05
#define OUT_MAX 512

struct tenant {
    const char *pct; /* NULL: no limit */
    const char *via, *kind, *ns, *nodes;
    pid_t pid;
    int out;
    char ledger[128];
    char buf[OUT_MAX];
};

/* A tenant: its limit (NULL: none), the door it uses, what it launches. */
#define TENANT(pct_, via_, kind_, ns_, nodes_)                                                \
    {.pct = pct_, .via = via_, .kind = kind_, .ns = ns_, .nodes = nodes_}

struct gpu {
    const char *name;
    char state[128];
    struct tenant t[2];
};

static void start(struct gpu *g, struct tenant *t, const char *seconds)
{
    int p[2];
    assert_int_equal(pipe(p), 0);
    t->pid = fork();
    assert_true(t->pid >= 0);
    if (t->pid == 0) {
        dup2(p[1], 1);
        close(p[0]);
        close(p[1]);
        setenv("LD_PRELOAD", TS_SHIM_LIB, 1);
        const char *asan = getenv("ASAN_OPTIONS");
        char opts[512];
        snprintf(opts, sizeof opts, "%s%sverify_asan_link_order=0", asan ? asan : "",
                 asan && *asan ? ":" : "");
        setenv("ASAN_OPTIONS", opts, 1);
        setenv("TESSERA_FAKE_CUDA_STATE", g->state, 1);
        setenv("TESSERA_CUDA_DRIVER", TS_FAKE_CUDA, 1);
        setenv("TESSERA_CUDA_LEDGER", t->ledger, 1);
        setenv("TS_APP_VIA", t->via, 1);
        if (t->pct)
            setenv("TESSERA_CUDA_COMPUTE_PERCENT", t->pct, 1);
        else
            unsetenv("TESSERA_CUDA_COMPUTE_PERCENT");
        execl(TS_SHIM_APP, "shim_app", "compute", t->ns, seconds, t->kind, t->nodes, (char *)NULL);
        _exit(127);
    }
    close(p[1]);
    t->out = p[0];
}

static double finish(struct tenant *t, uint64_t *busy_out)
{
    ssize_t n, len = 0;
    while ((n = read(t->out, t->buf + len, sizeof t->buf - 1 - (size_t)len)) > 0)
        len += n;
    t->buf[len] = '\0';
    close(t->out);
    int st;
    assert_int_equal(waitpid(t->pid, &st, 0), t->pid);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        fail_msg("shim_app (%s %s) failed: %s", t->via, t->kind, t->buf);
    unsigned long long busy = 0;
    long long wall = 0;
    if (sscanf(t->buf, "busy_ns=%llu wall_ns=%lld", &busy, &wall) != 2 || wall <= 0)
        fail_msg("shim_app said: %s", t->buf);
    if (busy_out)
        *busy_out = busy;
    return 100.0 * (double)busy / (double)wall;
}

/* The GPU time the tenant's ledger says the shim measured for it. */
static uint64_t measured_ns(const char *ledger)
{
    ts_ledger *l;
    ts_err err;
    assert_int_equal(shim_ledger_open(ledger, &l, &err), 0);
    unsigned char uuid[TS_LEDGER_UUID_BYTES] = {0x7e, 0x55, 0xe2, 0xa0, 0xfa, 0x4e, 0x40, 0x00,
                                                0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
    int d = shim_ledger_device(l, uuid); /* the fake's device 0 */
    uint64_t v = shim_ledger_gpu_ns(l, d);
    shim_ledger_close(l);
    return v;
}

static void prepare(struct gpu *g, int n)
{
    for (int i = 0; i < n; i++) {
        snprintf(g[i].state, sizeof g[i].state, "/tmp/ts-shim-compute-%d-%s.state",
                 (int)getpid(), g[i].name);
        unlink(g[i].state);
        for (int k = 0; k < 2; k++) {
            snprintf(g[i].t[k].ledger, sizeof g[i].t[k].ledger,
                     "/tmp/ts-shim-compute-%d-%s-%d.ledger", (int)getpid(), g[i].name, k);
            unlink(g[i].t[k].ledger);
        }
    }
}

static void cleanup(struct gpu *g, int n)
{
    for (int i = 0; i < n; i++) {
        unlink(g[i].state);
        for (int k = 0; k < 2; k++)
            unlink(g[i].t[k].ledger);
    }
}

static void test_unlimited_tenants_split_evenly(void **state)
{
    (void)state;
    struct gpu g[1] = {{.name = "control",
                        .t = {TENANT(NULL, "export", "kernel", "200000", "1"),
                              TENANT(NULL, "export", "kernel", "200000", "1")}}};
    prepare(g, 1);
    start(&g[0], &g[0].t[0], CONTROL_SECONDS);
    start(&g[0], &g[0].t[1], CONTROL_SECONDS);
    double a = finish(&g[0].t[0], NULL), b = finish(&g[0].t[1], NULL);
    print_message("no limits: %.1f %% / %.1f %%\n", a, b);
    assert_true(fabs(a - 30.0) > SHARE_TOLERANCE_POINTS && fabs(b - 70.0) > SHARE_TOLERANCE_POINTS);
    cleanup(g, 1);
}

static void test_shares_30_70_within_5_points(void **state)
{
    (void)state;
    struct gpu g[3] = {
        {.name = "short",
         .t = {TENANT("30", "export", "kernel", "200000", "1"),
               TENANT("70", "procaddr_ptsz", "ex", "200000", "1")}},
        {.name = "long",
         .t = {TENANT("30", "dlsym", "coop", "20000000", "1"),
               TENANT("70", "export", "kernel", "20000000", "1")}},
        {.name = "graph",
         .t = {TENANT("30", "export", "graph", "1000000", "5"),
               TENANT("70", "procaddr", "graph", "1000000", "5")}},
    };
    prepare(g, 3);
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < 2; k++)
            start(&g[i], &g[i].t[k], RUN_SECONDS);
    int bad = 0;
    for (int i = 0; i < 3; i++) {
        double share[2];
        uint64_t busy[2];
        for (int k = 0; k < 2; k++)
            share[k] = finish(&g[i].t[k], &busy[k]);
        for (int k = 0; k < 2; k++) {
            double want = atof(g[i].t[k].pct);
            uint64_t seen = measured_ns(g[i].t[k].ledger);
            double err = fabs((double)seen - (double)busy[k]) / (double)busy[k];
            print_message("%-5s tenant %s%% (%s, %s): got %.1f %%; shim measured %.3f s of "
                          "%.3f s real GPU time\n",
                          g[i].name, g[i].t[k].pct, g[i].t[k].via, g[i].t[k].kind, share[k],
                          (double)seen / 1e9, (double)busy[k] / 1e9);
            if (fabs(share[k] - want) > SHARE_TOLERANCE_POINTS || err > MEASURE_TOLERANCE)
                bad++;
        }
    }
    cleanup(g, 3);
    assert_int_equal(bad, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unlimited_tenants_split_evenly),
        cmocka_unit_test(test_shares_30_70_within_5_points),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
