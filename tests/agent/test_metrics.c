/*
 * test_metrics.c - the agent's /metrics against the fake libnvidia-ml.
 *
 * Proves that the page carries dcgm-exporter's names, HELP/TYPE lines and
 * labels (in its order) with the values NVML gave; that a GPU used by one job
 * carries that job's tenant and job labels, a free one empty ones, and a GPU
 * shared by two jobs one series per job holding that job's own memory and
 * utilisation, found through the process group or session of real processes
 * (the fake's process list names them); that the entry stride of the process
 * list is measured (24- and 32-byte drivers give the same page); that MIG
 * instances get their own series with GPU_I_ID/GPU_I_PROFILE and no
 * utilisation; that a CPU-only node still serves the agent gauges; and that
 * the server answers GET /metrics on loopback, reports an Xid injected while
 * it runs, and refuses bad listen addresses. Every page goes through
 * `promtool check metrics` (TS_NO_PROMTOOL=1 skips it; its absence fails).
 */
#define _DEFAULT_SOURCE /* setsid, setpgid, kill */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <curl/curl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/metrics.h"
#include "agent/nvml.h"

#define NVML_FIXTURE_TAG "metrics"
#include "fakes/nvml_fixture.h"

#define PATH_MAX_BYTES NVML_FIXTURE_PATH_BYTES
#define LINE_MAX_BYTES 1024
#define HTTP_TIMEOUT_S 10L
#define HOST "node-a"
#define MODEL_LABEL "modelName="
#define MODEL_LABEL_SNAKE "model_name="
#define KIDS_MAX 8

static ts_nvml *fake; /* the open fake, closed by teardown even after a failure */

/* ---- fixture (tests/fakes/nvml_fixture.h) ----------------------------------------- */

static const char *fixture_str(int gpu, const char *key, char *out, size_t len)
{
    json_t *root = fixture_load();
    snprintf(out, len, "%s", json_string_value(json_object_get(gpu_of(root, gpu), key)));
    json_decref(root);
    return out;
}

static ts_nvml *open_fake(const char *name)
{
    use_fixture(name);
    ts_err err = {0};
    if (agent_nvml_open(TS_FAKE_NVML, &fake, &err) != 0)
        fail_msg("agent_nvml_open: %s", err.msg);
    return fake;
}

/* ---- real processes for the process-group mapping ------------------------------ */

typedef struct kid {
    pid_t pid;        /* a session and group leader, like a launched task */
    pid_t grandchild; /* in the kid's session but its own group; 0 if none */
} kid;

static kid kids[KIDS_MAX];
static int nkids;

static kid spawn(bool with_grandchild)
{
    int fd[2];
    assert_int_equal(pipe(fd), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fd[0]);
        setsid();
        pid_t report = getpid();
        if (with_grandchild) {
            pid_t g = fork();
            if (g == 0) {
                setpgid(0, 0);
                report = getpid();
                if (write(fd[1], &report, sizeof report) != sizeof report)
                    _exit(1);
                for (;;)
                    pause();
            }
        } else if (write(fd[1], &report, sizeof report) != sizeof report) {
            _exit(1);
        }
        for (;;)
            pause();
    }
    close(fd[1]);
    kid k = {pid, 0};
    pid_t got = 0;
    assert_int_equal(read(fd[0], &got, sizeof got), (ssize_t)sizeof got); /* EOF if it died */
    close(fd[0]);
    if (with_grandchild)
        k.grandchild = got;
    assert_true(nkids < KIDS_MAX);
    kids[nkids++] = k;
    return k;
}

/* Kills the processes and closes the fake, also after a failed assertion. */
static int teardown(void **state)
{
    (void)state;
    for (int i = 0; i < nkids; i++) {
        if (kids[i].grandchild > 0)
            kill(kids[i].grandchild, SIGKILL);
        kill(-kids[i].pid, SIGKILL);
        waitpid(kids[i].pid, NULL, 0);
    }
    nkids = 0;
    agent_nvml_close(fake);
    fake = NULL;
    if (fixture[0])
        unlink(fixture);
    fixture[0] = '\0';
    unsetenv(NVML_FIXTURE_ENV);
    return 0;
}

/* ---- reading the page ------------------------------------------------------------ */

static bool has_line(const char *text, const char *line)
{
    size_t n = strlen(line);
    for (const char *p = text; (p = strstr(p, line)) != NULL; p++)
        if ((p == text || p[-1] == '\n') && (p[n] == '\n' || p[n] == '\0'))
            return true;
    return false;
}

static void expect_line(const char *text, const char *line)
{
    if (!has_line(text, line))
        fail_msg("missing line:\n%s\nin page:\n%s", line, text);
}

static void expect_no_line_starting(const char *text, const char *prefix)
{
    for (const char *p = text; (p = strstr(p, prefix)) != NULL; p++)
        if (p == text || p[-1] == '\n')
            fail_msg("unexpected line starting \"%s\" in page:\n%s", prefix, text);
}

static int count_lines_starting(const char *text, const char *prefix)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, prefix)) != NULL; p++)
        n += p == text || p[-1] == '\n';
    return n;
}

/* The label set of a whole-GPU row (dcgm-exporter's order, then ours). */
static void gpu_labels(char *out, size_t len, int gpu, const char *tenant, const char *job)
{
    char uuid[128], bus[64], name[128];
    snprintf(out, len,
             "{gpu=\"%d\",UUID=\"%s\",pci_bus_id=\"%s\",device=\"nvidia%d\",modelName=\"%s\","
             "hostname=\"" HOST "\",tenant=\"%s\",job=\"%s\"}",
             gpu, fixture_str(gpu, "uuid", uuid, sizeof uuid),
             fixture_str(gpu, "pci_bus_id", bus, sizeof bus), gpu,
             fixture_str(gpu, "name", name, sizeof name), tenant, job);
}

static void mig_labels(char *out, size_t len, int gpu, const char *profile, int gi,
                       const char *tenant, const char *job)
{
    char uuid[128], bus[64], name[128];
    snprintf(out, len,
             "{gpu=\"%d\",UUID=\"%s\",pci_bus_id=\"%s\",device=\"nvidia%d\",modelName=\"%s\","
             "GPU_I_PROFILE=\"%s\",GPU_I_ID=\"%d\",hostname=\"" HOST "\",tenant=\"%s\","
             "job=\"%s\"}",
             gpu, fixture_str(gpu, "uuid", uuid, sizeof uuid),
             fixture_str(gpu, "pci_bus_id", bus, sizeof bus), gpu,
             fixture_str(gpu, "name", name, sizeof name), profile, gi, tenant, job);
}

static void expect_series(const char *text, const char *name, const char *labels,
                          const char *value)
{
    char line[LINE_MAX_BYTES];
    snprintf(line, sizeof line, "%s%s %s", name, labels, value);
    expect_line(text, line);
}

static void expect_gpu(const char *text, const char *name, int gpu, const char *tenant,
                       const char *job, const char *value)
{
    char labels[LINE_MAX_BYTES];
    gpu_labels(labels, sizeof labels, gpu, tenant, job);
    expect_series(text, name, labels, value);
}

/* ---- promtool -------------------------------------------------------------------- */

static int run_promtool(const char *text, char *out, size_t outlen)
{
    char in[PATH_MAX_BYTES], res[PATH_MAX_BYTES], cmd[3 * PATH_MAX_BYTES];
    snprintf(in, sizeof in, "/tmp/ts-test-metrics-%d.prom", (int)getpid());
    snprintf(res, sizeof res, "/tmp/ts-test-metrics-%d.promtool", (int)getpid());
    FILE *f = fopen(in, "w");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
    snprintf(cmd, sizeof cmd, "promtool check metrics < '%s' > '%s' 2>&1", in, res);
    int st = system(cmd);
    f = fopen(res, "r");
    size_t n = f ? fread(out, 1, outlen - 1, f) : 0;
    out[n] = '\0';
    if (f)
        fclose(f);
    unlink(in);
    unlink(res);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* promtool must parse the page, and its style lint may object only to
 * dcgm-exporter's camelCase label modelName (kept for compatibility,
 * docs/agent-metrics.md): with that one label renamed it must pass clean. */
static void check_promtool(const char *text)
{
    const char *skip = getenv("TS_NO_PROMTOOL");
    if (skip && strcmp(skip, "1") == 0)
        return;
    if (system("command -v promtool > /dev/null 2>&1") != 0)
        fail_msg("promtool not found: install the Debian package 'prometheus' "
                 "(scripts/install-deps), or set TS_NO_PROMTOOL=1 to skip this check");
    char out[8192];
    int rc = run_promtool(text, out, sizeof out);
    if (rc != 0 && rc != 3)
        fail_msg("promtool check metrics: exit %d:\n%s\npage:\n%s", rc, out, text);
    for (char *line = strtok(out, "\n"); rc == 3 && line; line = strtok(NULL, "\n"))
        if (!strstr(line, "label names should be written in 'snake_case' not 'camelCase'"))
            fail_msg("promtool check metrics: %s\npage:\n%s", line, text);

    size_t n = strlen(text);
    char *renamed = malloc(2 * n + 1);
    assert_non_null(renamed);
    char *w = renamed;
    for (const char *p = text; *p;) {
        if (strncmp(p, MODEL_LABEL, strlen(MODEL_LABEL)) == 0) {
            memcpy(w, MODEL_LABEL_SNAKE, strlen(MODEL_LABEL_SNAKE));
            w += strlen(MODEL_LABEL_SNAKE);
            p += strlen(MODEL_LABEL);
        } else {
            *w++ = *p++;
        }
    }
    *w = '\0';
    rc = run_promtool(renamed, out, sizeof out);
    if (rc != 0)
        fail_msg("promtool check metrics (modelName renamed): exit %d:\n%s\npage:\n%s", rc,
                 out, renamed);
    free(renamed);
}

/* ---- 8 x H100, two tenants, one shared GPU -------------------------------------- */

static ts_metrics_task task(int64_t job, int rank, const char *tenant, int pgid, int ngpu,
                            const int *gpus, const char *mig_uuid)
{
    ts_metrics_task t = {.job = job, .rank = rank, .pgid = pgid, .ngpu = ngpu};
    snprintf(t.tenant, sizeof t.tenant, "%s", tenant);
    for (int i = 0; i < ngpu; i++)
        t.gpu[i] = gpus[i];
    snprintf(t.mig_uuid, sizeof t.mig_uuid, "%s", mig_uuid ? mig_uuid : "");
    return t;
}

static char *render_ok(ts_nvml *nv, const ts_metrics_task *tasks, size_t n,
                       const unsigned *last_xid)
{
    char *text = NULL;
    ts_err err = {0};
    if (agent_metrics_render(nv, HOST, tasks, n, last_xid, &text, &err) != 0)
        fail_msg("render: %s", err.msg);
    assert_non_null(text);
    return text;
}

static void h100_node_attributes_gpus_to_tenants_and_jobs(void **state)
{
    (void)state;
    ts_nvml *nv = open_fake("h100x8.json");
    kid a = spawn(true), b = spawn(false);

    for (int g = 0; g < 4; g++) {
        inject(g, "power_mw", json_integer(312456 + g));
        inject(g, "clocks_mhz", json_pack("{s:i,s:i}", "sm", 1980, "mem", 2619));
    }
    inject(0, "temperature_c", json_integer(41));
    inject(0, "memory_used_mib", json_integer(40000));
    inject(0, "utilization", json_pack("{s:i,s:i}", "gpu", 87, "memory", 30));
    inject(2, "utilization", json_pack("{s:i,s:i}", "gpu", 64, "memory", 10));
    inject(3, "memory_used_mib", json_integer(4700));
    inject(3, "utilization", json_pack("{s:i,s:i}", "gpu", 95, "memory", 40));
    inject(3, "processes",
           json_pack("[{s:i,s:i,s:i},{s:i,s:i,s:i},{s:i,s:i,s:i},{s:i,s:i,s:i}]", "pid",
                     (int)a.pid, "used_memory_mib", 1000, "sm_util", 30, "pid",
                     (int)a.grandchild, "used_memory_mib", 200, "sm_util", 10, "pid",
                     (int)b.pid, "used_memory_mib", 3000, "sm_util", 50, "pid", 1,
                     "used_memory_mib", 500, "sm_util", 5));

    const int g01[] = {0, 1}, g2[] = {2}, g3[] = {3};
    ts_metrics_task tasks[] = {
        task(101, 0, "alpha", 0, 2, g01, NULL),
        task(202, 0, "beta", 0, 1, g2, NULL),
        task(303, 0, "alpha", (int)a.pid, 1, g3, NULL),
        task(404, 0, "beta", (int)b.pid, 1, g3, NULL),
        task(303, 1, "alpha", 0, 1, g3, NULL), /* a second rank: still one series per job */
    };
    unsigned xid[TS_METRICS_MAX_GPUS] = {0};
    xid[6] = 79;
    char *text = render_ok(nv, tasks, 5, xid);

    /* dcgm-exporter's HELP and TYPE lines */
    expect_line(text, "# HELP DCGM_FI_DEV_SM_CLOCK SM clock frequency (in MHz).");
    expect_line(text, "# TYPE DCGM_FI_DEV_SM_CLOCK gauge");
    expect_line(text, "# HELP DCGM_FI_DEV_MEM_CLOCK Memory clock frequency (in MHz).");
    expect_line(text, "# HELP DCGM_FI_DEV_GPU_TEMP GPU temperature (in C).");
    expect_line(text, "# HELP DCGM_FI_DEV_POWER_USAGE Power draw (in W).");
    expect_line(text, "# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).");
    expect_line(text, "# HELP DCGM_FI_DEV_FB_USED Framebuffer memory used (in MiB).");
    expect_line(text, "# HELP DCGM_FI_DEV_FB_FREE Framebuffer memory free (in MiB).");
    expect_line(text, "# HELP DCGM_FI_DEV_XID_ERRORS Value of the last XID error encountered.");
    expect_line(text, "# TYPE DCGM_FI_DEV_XID_ERRORS gauge");
    expect_line(text, "# HELP DCGM_FI_DEV_PCIE_LINK_GEN PCIe current link generation.");
    expect_line(text, "# HELP DCGM_FI_DEV_PCIE_LINK_WIDTH PCIe current link width.");

    /* one job per GPU: the device's own readings, with the job's labels */
    expect_gpu(text, "DCGM_FI_DEV_FB_USED", 0, "alpha", "101", "40000");
    expect_gpu(text, "DCGM_FI_DEV_FB_FREE", 0, "alpha", "101", "41559");
    expect_gpu(text, "DCGM_FI_DEV_GPU_UTIL", 0, "alpha", "101", "87");
    expect_gpu(text, "DCGM_FI_DEV_GPU_TEMP", 0, "alpha", "101", "41");
    expect_gpu(text, "DCGM_FI_DEV_POWER_USAGE", 0, "alpha", "101", "312.456");
    expect_gpu(text, "DCGM_FI_DEV_SM_CLOCK", 1, "alpha", "101", "1980");
    expect_gpu(text, "DCGM_FI_DEV_MEM_CLOCK", 1, "alpha", "101", "2619");
    expect_gpu(text, "DCGM_FI_DEV_PCIE_LINK_GEN", 1, "alpha", "101", "5");
    expect_gpu(text, "DCGM_FI_DEV_PCIE_LINK_WIDTH", 1, "alpha", "101", "16");
    expect_gpu(text, "DCGM_FI_DEV_GPU_UTIL", 2, "beta", "202", "64");
    expect_gpu(text, "DCGM_FI_DEV_POWER_USAGE", 2, "beta", "202", "312.458");

    /* the shared GPU: one series per job, each its own memory and utilisation
     * (the grandchild counts for job 303 through the session; pid 1 for nobody) */
    expect_gpu(text, "DCGM_FI_DEV_FB_USED", 3, "alpha", "303", "1200");
    expect_gpu(text, "DCGM_FI_DEV_FB_USED", 3, "beta", "404", "3000");
    expect_gpu(text, "DCGM_FI_DEV_GPU_UTIL", 3, "alpha", "303", "40");
    expect_gpu(text, "DCGM_FI_DEV_GPU_UTIL", 3, "beta", "404", "50");
    expect_gpu(text, "DCGM_FI_DEV_FB_FREE", 3, "alpha", "303", "76859");
    expect_gpu(text, "DCGM_FI_DEV_FB_FREE", 3, "beta", "404", "76859");
    expect_gpu(text, "DCGM_FI_DEV_POWER_USAGE", 3, "beta", "404", "312.459");
    assert_int_equal(count_lines_starting(text, "DCGM_FI_DEV_FB_USED{gpu=\"3\","), 2);

    /* free GPUs: empty tenant and job; no power or clocks where NVML has none */
    expect_gpu(text, "DCGM_FI_DEV_FB_USED", 5, "", "", "0");
    expect_gpu(text, "DCGM_FI_DEV_GPU_UTIL", 7, "", "", "0");
    expect_no_line_starting(text, "DCGM_FI_DEV_POWER_USAGE{gpu=\"5\"");
    expect_no_line_starting(text, "DCGM_FI_DEV_SM_CLOCK{gpu=\"4\"");
    expect_gpu(text, "DCGM_FI_DEV_XID_ERRORS", 6, "", "", "79");
    expect_gpu(text, "DCGM_FI_DEV_XID_ERRORS", 5, "", "", "0");
    assert_int_equal(count_lines_starting(text, "DCGM_FI_DEV_GPU_TEMP{"), 9);

    expect_line(text, "tessera_agent_nvml_up 1");
    expect_line(text, "tessera_agent_gpus 8");
    expect_line(text, "tessera_agent_tasks 5");
    expect_line(text, "tessera_agent_nvml_errors 0");
    expect_line(text, "tessera_agent_xid_monitored 1");
    check_promtool(text);

    /* a 535.43-style driver writes 32-byte process entries: same page */
    inject(3, "process_info_stride", json_integer(32));
    char *text32 = render_ok(nv, tasks, 5, xid);
    assert_string_equal(text32, text);
    free(text32);

    /* Xids not monitored: no Xid series rather than a false 0 */
    char *noxid = render_ok(nv, tasks, 5, NULL);
    expect_no_line_starting(noxid, "DCGM_FI_DEV_XID_ERRORS");
    expect_line(noxid, "tessera_agent_xid_monitored 0");
    free(noxid);

    free(text);
}

/* ---- A100 in MIG mode --------------------------------------------------------------- */

#define MIG_3G "MIG-5c3a1e2f-8b7d-5e0f-a1b2-c3d4e5f60001"
#define MIG_2G_A "MIG-5c3a1e2f-8b7d-5e0f-a1b2-c3d4e5f60002"
#define MIG_2G_B "MIG-5c3a1e2f-8b7d-5e0f-a1b2-c3d4e5f60003"

static void mig_instances_have_their_own_series(void **state)
{
    (void)state;
    ts_nvml *nv = open_fake("a100-mig.json");
    kid a = spawn(false), b = spawn(false), c = spawn(false);
    inject(0, "processes",
           json_pack("[{s:i,s:i,s:s},{s:i,s:i,s:s},{s:i,s:i,s:s}]", "pid", (int)c.pid,
                     "used_memory_mib", 2048, "mig_uuid", MIG_3G, "pid", (int)a.pid,
                     "used_memory_mib", 1024, "mig_uuid", MIG_2G_A, "pid", (int)b.pid,
                     "used_memory_mib", 512, "mig_uuid", MIG_2G_B));
    inject(0, "process_info_stride", json_integer(32));
    inject(1, "utilization", json_pack("{s:i,s:i}", "gpu", 12, "memory", 3));

    const int g0[] = {0};
    ts_metrics_task tasks[] = {
        task(501, 0, "gamma", (int)c.pid, 1, g0, MIG_3G),
        task(601, 0, "alpha", (int)a.pid, 1, g0, MIG_2G_A),
        task(602, 0, "beta", (int)b.pid, 1, g0, MIG_2G_B),
    };
    unsigned xid[TS_METRICS_MAX_GPUS] = {0};
    char *text = render_ok(nv, tasks, 3, xid);
    char labels[LINE_MAX_BYTES];

    /* GI 1, 3g.20gb, one job: the instance's memory */
    mig_labels(labels, sizeof labels, 0, "3g.20gb", 1, "gamma", "501");
    expect_series(text, "DCGM_FI_DEV_FB_USED", labels, "2048");
    expect_series(text, "DCGM_FI_DEV_FB_FREE", labels, "18432");
    /* GI 2, 2g.10gb, two jobs on its two compute instances: each its own */
    mig_labels(labels, sizeof labels, 0, "2g.10gb", 2, "alpha", "601");
    expect_series(text, "DCGM_FI_DEV_FB_USED", labels, "1024");
    expect_series(text, "DCGM_FI_DEV_FB_FREE", labels, "8704");
    mig_labels(labels, sizeof labels, 0, "2g.10gb", 2, "beta", "602");
    expect_series(text, "DCGM_FI_DEV_FB_USED", labels, "512");
    /* GI 3, 1g.5gb, free */
    mig_labels(labels, sizeof labels, 0, "1g.5gb", 3, "", "");
    expect_series(text, "DCGM_FI_DEV_FB_USED", labels, "0");
    expect_series(text, "DCGM_FI_DEV_FB_FREE", labels, "5120");

    /* the MIG GPU itself: device readings without jobs, no memory, no utilisation */
    expect_gpu(text, "DCGM_FI_DEV_GPU_TEMP", 0, "", "", "31");
    expect_gpu(text, "DCGM_FI_DEV_XID_ERRORS", 0, "", "", "0");
    expect_no_line_starting(text, "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\"");
    /* 1 + 2 + 1 instance rows, none for the parent */
    assert_int_equal(count_lines_starting(text, "DCGM_FI_DEV_FB_USED{gpu=\"0\""), 4);
    assert_int_equal(count_lines_starting(text, "DCGM_FI_DEV_FB_FREE{gpu=\"0\""), 4);
    /* the other A100, MIG off */
    expect_gpu(text, "DCGM_FI_DEV_GPU_UTIL", 1, "", "", "12");
    expect_line(text, "tessera_agent_nvml_errors 0");
    check_promtool(text);

    free(text);
}

/* ---- CPU-only node ---------------------------------------------------------------- */

static void cpu_only_node_serves_agent_gauges(void **state)
{
    (void)state;
    const int g0[] = {0};
    ts_metrics_task t = task(9, 0, "alpha", 0, 0, g0, NULL);
    char *text = render_ok(NULL, &t, 1, NULL);
    expect_line(text, "tessera_agent_nvml_up 0");
    expect_line(text, "tessera_agent_gpus 0");
    expect_line(text, "tessera_agent_tasks 1");
    expect_no_line_starting(text, "DCGM_");
    check_promtool(text);
    free(text);
}

/* ---- the server --------------------------------------------------------------------- */

typedef struct body {
    char *p;
    size_t len;
} body;

static size_t sink(char *p, size_t sz, size_t n, void *u)
{
    body *b = u;
    char *np = realloc(b->p, b->len + sz * n + 1);
    if (!np)
        return 0;
    memcpy(np + b->len, p, sz * n);
    b->p = np;
    b->len += sz * n;
    b->p[b->len] = '\0';
    return sz * n;
}

/* GET (or POST when post) http://127.0.0.1:port path; the body, status and
 * content type. */
static char *fetch(int port, const char *path, bool post, long *status, char *ctype,
                   size_t ctype_len)
{
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
    CURL *h = curl_easy_init();
    assert_non_null(h);
    body b = {0};
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, sink);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, HTTP_TIMEOUT_S);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    if (post)
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, "");
    CURLcode rc = curl_easy_perform(h);
    if (rc != CURLE_OK)
        fail_msg("GET %s: %s", url, curl_easy_strerror(rc));
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
    char *ct = NULL;
    curl_easy_getinfo(h, CURLINFO_CONTENT_TYPE, &ct);
    snprintf(ctype, ctype_len, "%s", ct ? ct : "");
    curl_easy_cleanup(h);
    return b.p ? b.p : strdup("");
}

static void server_serves_metrics_on_loopback(void **state)
{
    (void)state;
    ts_nvml *nv = open_fake("h100x8.json");
    ts_agent_metrics *m = NULL;
    ts_err err = {0};
    if (agent_metrics_start("127.0.0.1:0", nv, HOST, &m, &err) != 0)
        fail_msg("start: %s", err.msg);
    int port = agent_metrics_port(m);
    assert_true(port > 0 && port <= 65535);

    const int g5[] = {5};
    ts_metrics_task t = task(7, 0, "delta", 0, 1, g5, NULL);
    assert_int_equal(agent_metrics_set_tasks(m, &t, 1, &err), 0);

    long status = 0;
    char ctype[128];
    char *text = fetch(port, "/metrics", false, &status, ctype, sizeof ctype);
    assert_int_equal(status, 200);
    assert_string_equal(ctype, "text/plain; version=0.0.4; charset=utf-8");
    expect_gpu(text, "DCGM_FI_DEV_FB_USED", 5, "delta", "7", "0");
    expect_gpu(text, "DCGM_FI_DEV_XID_ERRORS", 4, "", "", "0");
    expect_line(text, "tessera_agent_tasks 1");
    expect_line(text, "tessera_agent_xid_monitored 1");
    expect_line(text, "tessera_agent_metrics_scrapes_total 1");
    check_promtool(text);
    free(text);

    /* an Xid while the server runs: the next page shows it, the others stay 0 */
    inject(4, "xids", json_pack("[i]", 79));
    assert_int_equal(agent_metrics_set_tasks(m, NULL, 0, &err), 0);
    text = fetch(port, "/metrics", false, &status, ctype, sizeof ctype);
    assert_int_equal(status, 200);
    expect_gpu(text, "DCGM_FI_DEV_XID_ERRORS", 4, "", "", "79");
    expect_gpu(text, "DCGM_FI_DEV_XID_ERRORS", 3, "", "", "0");
    expect_gpu(text, "DCGM_FI_DEV_FB_USED", 5, "", "", "0");
    expect_line(text, "tessera_agent_tasks 0");
    expect_line(text, "tessera_agent_metrics_scrapes_total 2");
    free(text);

    text = fetch(port, "/nope", false, &status, ctype, sizeof ctype);
    assert_int_equal(status, 404);
    free(text);
    text = fetch(port, "/metrics", true, &status, ctype, sizeof ctype);
    assert_int_equal(status, 405);
    free(text);

    agent_metrics_stop(m);
}

static void cpu_only_server_serves_agent_gauges(void **state)
{
    (void)state;
    ts_agent_metrics *m = NULL;
    ts_err err = {0};
    /* IPv6 syntax is accepted; this machine may lack an IPv6 loopback */
    if (agent_metrics_start("[::1]:0", NULL, HOST, &m, &err) == 0) {
        assert_true(agent_metrics_port(m) > 0);
        agent_metrics_stop(m);
    } else {
        assert_int_equal(err.code, TS_EIO);
    }
    long status = 0;
    char ctype[128];
    assert_int_equal(agent_metrics_start("127.0.0.1:0", NULL, HOST, &m, &err), 0);
    char *text = fetch(agent_metrics_port(m), "/metrics", false, &status, ctype,
                       sizeof ctype);
    assert_int_equal(status, 200);
    expect_line(text, "tessera_agent_nvml_up 0");
    expect_line(text, "tessera_agent_xid_monitored 0");
    expect_no_line_starting(text, "DCGM_");
    free(text);
    agent_metrics_stop(m);
}

/* A socket from src to the server, with the first line of a request sent. */
static int slow_client(const char *src, int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    inet_pton(AF_INET, src, &a.sin_addr);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    a.sin_port = htons((uint16_t)port);
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    const char *line = "GET /metrics HTTP/1.1\r\n";
    assert_true(send(fd, line, strlen(line), MSG_NOSIGNAL) > 0);
    return fd;
}

/* How many of fds the server still holds open (a closed one is closed here too). */
static int held_open(int *fds, int n)
{
    int open_n = 0;
    for (int i = 0; i < n; i++) {
        if (fds[i] < 0)
            continue;
        struct pollfd p = {.fd = fds[i], .events = POLLIN};
        char c;
        if (poll(&p, 1, 0) > 0 && recv(fds[i], &c, 1, MSG_DONTWAIT) <= 0) {
            close(fds[i]);
            fds[i] = -1;
            continue;
        }
        open_n++;
    }
    return open_n;
}

/* Issue 24: a client trickling header lines holds at most 4 of the port's
 * 16 connections, and none past the 5-s request deadline; then a scrape is
 * served again. */
static void trickling_clients_cannot_hold_the_port(void **state)
{
    (void)state;
    ts_agent_metrics *m = NULL;
    ts_err err = {0};
    assert_int_equal(agent_metrics_start("127.0.0.1:0", NULL, HOST, &m, &err), 0);
    int port = agent_metrics_port(m);
    int fds[22], n = 0;
    for (int i = 0; i < 6; i++)
        fds[n++] = slow_client("127.0.0.2", port);
    usleep(300 * 1000);
    assert_true(held_open(fds, n) <= 4);
    static const char *const others[] = {"127.0.0.3", "127.0.0.4", "127.0.0.5", "127.0.0.6"};
    for (int k = 0; k < 4; k++)
        for (int i = 0; i < 4; i++)
            fds[n++] = slow_client(others[k], port);
    for (int t = 0; t < 13; t++) { /* 6.5 s of trickling, past the 5-s deadline */
        for (int i = 0; i < n; i++)
            if (fds[i] >= 0 && send(fds[i], "X-Slow: 1\r\n", 11, MSG_NOSIGNAL) < 0) {
                close(fds[i]);
                fds[i] = -1;
            }
        usleep(500 * 1000);
    }
    assert_int_equal(held_open(fds, n), 0);
    long status = 0;
    char ctype[128];
    char *text = fetch(port, "/metrics", false, &status, ctype, sizeof ctype);
    assert_int_equal(status, 200);
    free(text);
    for (int i = 0; i < n; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    agent_metrics_stop(m);
}

static void bad_listen_addresses_are_named(void **state)
{
    (void)state;
    static const struct {
        const char *listen, *says;
    } bad[] = {
        {"", "empty"},
        {"9400", "want ADDR:PORT"},
        {"127.0.0.1:65536", "port \"65536\" must be 0..65535"},
        {"127.0.0.1:", "port \"\" must be 0..65535"},
        {"127.0.0.1:94x", "port \"94x\" must be 0..65535"},
        {"localhost:9400", "\"localhost\" is not an IPv4 or IPv6 address"},
        {"[::1]9400", "want [IPv6]:PORT"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ts_agent_metrics *m = (ts_agent_metrics *)1;
        ts_err err = {0};
        assert_int_equal(agent_metrics_start(bad[i].listen, NULL, HOST, &m, &err), TS_EINVAL);
        assert_null(m);
        if (!strstr(err.msg, bad[i].says))
            fail_msg("listen \"%s\": message \"%s\" lacks \"%s\"", bad[i].listen, err.msg,
                     bad[i].says);
    }
    /* a port already taken */
    ts_agent_metrics *m1 = NULL, *m2 = NULL;
    ts_err err = {0};
    assert_int_equal(agent_metrics_start("127.0.0.1:0", NULL, HOST, &m1, &err), 0);
    char listen[64];
    snprintf(listen, sizeof listen, "127.0.0.1:%d", agent_metrics_port(m1));
    assert_int_equal(agent_metrics_start(listen, NULL, HOST, &m2, &err), TS_EIO);
    assert_null(m2);
    assert_non_null(strstr(err.msg, "cannot start the HTTP server"));
    agent_metrics_stop(m1);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(h100_node_attributes_gpus_to_tenants_and_jobs, teardown),
        cmocka_unit_test_teardown(mig_instances_have_their_own_series, teardown),
        cmocka_unit_test(cpu_only_node_serves_agent_gauges),
        cmocka_unit_test_teardown(server_serves_metrics_on_loopback, teardown),
        cmocka_unit_test(cpu_only_server_serves_agent_gauges),
        cmocka_unit_test(bad_listen_addresses_are_named),
        cmocka_unit_test(trickling_clients_cannot_hold_the_port),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
