/*
 * metrics.c - the agent's /metrics page: NVML readings rendered as
 * dcgm-exporter series, each carrying the tenant and job that use the GPU.
 * (The HTTP server and the Xid watch are in metrics_server.c.)
 *
 * Names, units, types and help texts are dcgm-exporter's (gpu-facts.md 3.1,
 * 3.2: etc/default-counters.csv and, for the PCIe link, its DCP counters
 * file); so are the labels and their order: gpu, UUID, pci_bus_id, device,
 * modelName, then GPU_I_PROFILE and GPU_I_ID on MIG rows (whose gpu, UUID and
 * device name the parent), then hostname; tenant and job follow.
 *
 * A "device" is a whole GPU, or one GPU instance of a MIG GPU. The rows of a
 * device are: one row without tenant and job when no task uses it; one row
 * with the job's labels and the device's readings when one job does; and
 * when several jobs share it, one row per job in which FB_USED and GPU_UTIL
 * are that job's own (its processes found by process group or session in
 * NVML's process list and per-process utilisation samples) while the
 * device-wide readings (clocks, temperature, power, PCIe, Xid, free memory)
 * repeat. Prometheus needs each family's samples together, so rows are
 * collected first and printed family by family. docs/agent-metrics.md says
 * the same for operators.
 */
#define _DEFAULT_SOURCE /* getpgid, getsid */
#include "agent/metrics.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MIB_BYTES (1024ULL * 1024ULL)
#define GIB_BYTES (1024ULL * MIB_BYTES)
#define MW_PER_W 1000.0
#define UTIL_MAX_PCT 100.0
#define MIG_MEM_SLICES 8     /* gpu-facts.md 2.1 */
#define MIG_DEVICES_MAX 8    /* per GPU; 7 on A100/H100/H200 */
#define GI_PROFILE_INDEX_LIMIT 64 /* a guard: NVML ends the walk with INVALID_ARGUMENT */
#define GI_PROFILE_NAME_MAX 32
#define PROCS_MAX 256        /* processes read per device */
#define PROC_STRIDE_BYTES 24 /* nvmlProcessInfo_v2_t */
#define PROC_STRIDE_535_BYTES 32 /* drivers 535.43-535.86, gpu-facts.md 1.7 */
#define PROC_SENTINEL_BYTE 0xA5
#define UTIL_SAMPLES_MAX 256
#define UTIL_WINDOW_US (10ULL * 1000000ULL) /* per-process samples newer than this count */
#define USEC_PER_SEC 1000000ULL
#define JOB_LABEL_MAX 24

/* ---- families ------------------------------------------------------------ */

enum fam {
    F_SM_CLOCK,
    F_MEM_CLOCK,
    F_GPU_TEMP,
    F_POWER,
    F_PCIE_GEN,
    F_PCIE_WIDTH,
    F_GPU_UTIL,
    F_XID,
    F_FB_FREE,
    F_FB_USED,
    F_COUNT
};

static const struct {
    const char *name, *type, *help;
} fam[F_COUNT] = {
    [F_SM_CLOCK] = {"DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz)."},
    [F_MEM_CLOCK] = {"DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz)."},
    [F_GPU_TEMP] = {"DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C)."},
    [F_POWER] = {"DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."},
    [F_PCIE_GEN] = {"DCGM_FI_DEV_PCIE_LINK_GEN", "gauge", "PCIe current link generation."},
    [F_PCIE_WIDTH] = {"DCGM_FI_DEV_PCIE_LINK_WIDTH", "gauge", "PCIe current link width."},
    [F_GPU_UTIL] = {"DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."},
    [F_XID] = {"DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered."},
    [F_FB_FREE] = {"DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB)."},
    [F_FB_USED] = {"DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB)."},
};

/* ---- one render ------------------------------------------------------------ */

typedef struct gpu_ident {
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
    char bus_id[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
} gpu_ident;

typedef struct row {
    int gpu;             /* NVML index */
    int gi;              /* GPU instance id; -1 for a whole GPU */
    char profile[GI_PROFILE_NAME_MAX];
    const char *tenant;  /* "" when no job uses the device */
    char job[JOB_LABEL_MAX];
    bool has[F_COUNT];
    double v[F_COUNT];
} row;

typedef struct render {
    ts_nvml *nv;
    const ts_metrics_task *tasks;
    size_t ntasks;
    gpu_ident ident[TS_METRICS_MAX_GPUS];
    row *rows;
    size_t nrows, cap;
    int nvml_errors;
    bool oom;
} render;

/* A job using a device, and what NVML says it uses of it. */
typedef struct share {
    int64_t job;
    const char *tenant;
    unsigned long long fb_used_bytes;
    double util_pct;
    bool has_fb, has_util;
} share;

typedef struct sharing {
    int ntask;
    int *task;       /* indices into render.tasks */
    int *task_share; /* the share of each */
    int nshare;
    share *share;
} sharing;

/* True on success; a failure other than "not supported" is counted. */
static bool ok(render *r, nvmlReturn_t rc)
{
    if (rc == NVML_SUCCESS)
        return true;
    if (rc != NVML_ERROR_NOT_SUPPORTED)
        r->nvml_errors++;
    return false;
}

static void set(row *x, enum fam f, double v)
{
    x->has[f] = true;
    x->v[f] = v;
}

static void push(render *r, const row *x)
{
    if (r->nrows == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 32;
        row *nr = realloc(r->rows, cap * sizeof *nr);
        if (!nr) {
            r->oom = true;
            return;
        }
        r->rows = nr;
        r->cap = cap;
    }
    r->rows[r->nrows++] = *x;
}

/* ---- attribution ------------------------------------------------------------ */

static bool task_uses_gpu(const ts_metrics_task *t, int gpu)
{
    for (int i = 0; i < t->ngpu && i < TS_METRICS_MAX_GPUS; i++)
        if (t->gpu[i] == gpu)
            return true;
    return false;
}

static void sharing_free(sharing *sh)
{
    free(sh->task);
    free(sh->task_share);
    free(sh->share);
    memset(sh, 0, sizeof *sh);
}

/* Tasks for which uses(task, ctx) holds, grouped by job. */
static bool sharing_collect(render *r, sharing *sh,
                            bool (*uses)(const ts_metrics_task *, const void *), const void *ctx)
{
    memset(sh, 0, sizeof *sh);
    size_t n = r->ntasks ? r->ntasks : 1;
    sh->task = malloc(n * sizeof *sh->task);
    sh->task_share = malloc(n * sizeof *sh->task_share);
    sh->share = calloc(n, sizeof *sh->share);
    if (!sh->task || !sh->task_share || !sh->share) {
        sharing_free(sh);
        r->oom = true;
        return false;
    }
    for (size_t i = 0; i < r->ntasks; i++) {
        const ts_metrics_task *t = &r->tasks[i];
        if (!uses(t, ctx))
            continue;
        int s = 0;
        while (s < sh->nshare && sh->share[s].job != t->job)
            s++;
        if (s == sh->nshare) {
            sh->share[s].job = t->job;
            sh->share[s].tenant = t->tenant;
            sh->nshare++;
        }
        sh->task[sh->ntask] = (int)i;
        sh->task_share[sh->ntask++] = s;
    }
    return true;
}

/* The share a process belongs to: its process group or its session is a
 * task's (tasks are session leaders; a child that made its own group stays
 * in the session). -1 when it is no task's. */
static int share_of_pid(const render *r, const sharing *sh, unsigned pid)
{
    pid_t pg = getpgid((pid_t)pid), sid = getsid((pid_t)pid);
    for (int i = 0; i < sh->ntask; i++) {
        int pgid = r->tasks[sh->task[i]].pgid;
        if (pgid > 0 && (pgid == pg || pgid == sid))
            return sh->task_share[i];
    }
    return -1;
}

typedef struct proc {
    unsigned pid;
    unsigned long long used_bytes;
} proc;

/* NVML's process list of one handle, measuring the entry stride as
 * gpu-facts.md 1.7 advises: sentinel-fill a buffer of 32-byte entries and see
 * how far the driver wrote. Returns the count, or -1 when unavailable. */
static int read_procs(render *r, nvmlDevice_t dev, proc *out, int cap)
{
    if (!r->nv->DeviceGetComputeRunningProcesses || cap <= 0)
        return cap <= 0 ? 0 : -1;
    size_t bytes = (size_t)cap * PROC_STRIDE_535_BYTES;
    unsigned char *buf = malloc(bytes);
    if (!buf) {
        r->oom = true;
        return -1;
    }
    memset(buf, PROC_SENTINEL_BYTE, bytes);
    unsigned n = (unsigned)cap;
    if (!ok(r, r->nv->DeviceGetComputeRunningProcesses(dev, &n, (nvmlProcessInfo_t *)buf)) ||
        n > (unsigned)cap) {
        free(buf);
        return -1;
    }
    size_t extent = bytes;
    while (extent > 0 && buf[extent - 1] == PROC_SENTINEL_BYTE)
        extent--;
    size_t stride = extent > (size_t)n * PROC_STRIDE_BYTES ? PROC_STRIDE_535_BYTES
                                                            : PROC_STRIDE_BYTES;
    for (unsigned i = 0; i < n; i++) {
        nvmlProcessInfo_t e;
        memcpy(&e, buf + i * stride, sizeof e);
        out[i] = (proc){e.pid, e.usedGpuMemory};
    }
    free(buf);
    return (int)n;
}

static unsigned long long now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (unsigned long long)ts.tv_sec * USEC_PER_SEC + (unsigned long long)ts.tv_nsec / 1000;
}

/* Recent per-process utilisation samples, the newest per pid; -1 when NVML
 * gives none (not supported, e.g. MIG). NOT_FOUND means "no samples". */
static int read_util(render *r, nvmlDevice_t dev, nvmlProcessUtilizationSample_t *s, int cap)
{
    if (!r->nv->DeviceGetProcessUtilization)
        return -1;
    unsigned n = (unsigned)cap;
    unsigned long long now = now_us();
    nvmlReturn_t rc = r->nv->DeviceGetProcessUtilization(
        dev, s, &n, now > UTIL_WINDOW_US ? now - UTIL_WINDOW_US : 0);
    if (rc == NVML_ERROR_NOT_FOUND)
        return 0;
    if (!ok(r, rc) || n > (unsigned)cap)
        return -1;
    int kept = 0;
    for (unsigned i = 0; i < n; i++) {
        int j = 0;
        while (j < kept && s[j].pid != s[i].pid)
            j++;
        if (j == kept)
            s[kept++] = s[i];
        else if (s[i].timeStamp > s[j].timeStamp)
            s[j] = s[i];
    }
    return kept;
}

/* Each job's own memory (the processes of every handle: a GPU instance's
 * compute instances) and, where NVML samples it, its own utilisation. */
static void attribute(render *r, sharing *sh, const nvmlDevice_t *devs, int ndev,
                      bool util_sampled)
{
    proc procs[PROCS_MAX];
    int np = 0;
    bool mem_ok = true;
    for (int d = 0; d < ndev; d++) {
        int k = read_procs(r, devs[d], procs + np, PROCS_MAX - np);
        if (k < 0)
            mem_ok = false;
        else
            np += k;
    }
    for (int i = 0; mem_ok && i < np; i++) {
        int s = share_of_pid(r, sh, procs[i].pid);
        if (s >= 0 && procs[i].used_bytes != NVML_VALUE_NOT_AVAILABLE)
            sh->share[s].fb_used_bytes += procs[i].used_bytes;
    }
    for (int s = 0; s < sh->nshare; s++)
        sh->share[s].has_fb = mem_ok;
    if (!util_sampled || ndev < 1)
        return;
    nvmlProcessUtilizationSample_t samples[UTIL_SAMPLES_MAX];
    int ns = read_util(r, devs[0], samples, UTIL_SAMPLES_MAX);
    for (int i = 0; i < ns; i++) {
        int s = share_of_pid(r, sh, samples[i].pid);
        if (s >= 0)
            sh->share[s].util_pct += samples[i].smUtil;
    }
    for (int s = 0; ns >= 0 && s < sh->nshare; s++) {
        sh->share[s].has_util = true;
        if (sh->share[s].util_pct > UTIL_MAX_PCT)
            sh->share[s].util_pct = UTIL_MAX_PCT;
    }
}

/* The device's rows: see the file comment. */
static void emit_device(render *r, const row *base, sharing *sh, const nvmlDevice_t *devs,
                        int ndev, bool util_sampled)
{
    if (sh->nshare <= 1) {
        row x = *base;
        if (sh->nshare == 1) {
            x.tenant = sh->share[0].tenant;
            snprintf(x.job, sizeof x.job, "%lld", (long long)sh->share[0].job);
        }
        push(r, &x);
        return;
    }
    attribute(r, sh, devs, ndev, util_sampled);
    for (int s = 0; s < sh->nshare; s++) {
        row x = *base;
        x.tenant = sh->share[s].tenant;
        snprintf(x.job, sizeof x.job, "%lld", (long long)sh->share[s].job);
        x.has[F_FB_USED] = sh->share[s].has_fb;
        x.v[F_FB_USED] = (double)(sh->share[s].fb_used_bytes / MIB_BYTES);
        x.has[F_GPU_UTIL] = sh->share[s].has_util;
        x.v[F_GPU_UTIL] = sh->share[s].util_pct;
        push(r, &x);
    }
}

/* ---- GPUs ------------------------------------------------------------------ */

static void read_memory(render *r, nvmlDevice_t dev, row *x)
{
    nvmlMemory_t mem;
    if (ok(r, r->nv->DeviceGetMemoryInfo(dev, &mem))) {
        set(x, F_FB_FREE, (double)(mem.free / MIB_BYTES));
        set(x, F_FB_USED, (double)(mem.used / MIB_BYTES));
    }
}

/* Readings of the whole GPU. A MIG GPU has no utilisation (gpu-facts.md 1.7)
 * and its memory is reported per instance instead. */
static void read_gpu(render *r, nvmlDevice_t dev, bool mig, const unsigned *last_xid,
                     row *x)
{
    ts_nvml *nv = r->nv;
    unsigned u;
    if (nv->DeviceGetClockInfo && ok(r, nv->DeviceGetClockInfo(dev, NVML_CLOCK_SM, &u)))
        set(x, F_SM_CLOCK, u);
    if (nv->DeviceGetClockInfo && ok(r, nv->DeviceGetClockInfo(dev, NVML_CLOCK_MEM, &u)))
        set(x, F_MEM_CLOCK, u);
    nvmlTemperature_t t = {.version = nvmlTemperature_v1, .sensorType = NVML_TEMPERATURE_GPU};
    nvmlReturn_t rc = NVML_ERROR_NOT_SUPPORTED;
    if (nv->DeviceGetTemperatureV && (rc = nv->DeviceGetTemperatureV(dev, &t)) == NVML_SUCCESS)
        set(x, F_GPU_TEMP, t.temperature);
    else if (nv->DeviceGetTemperature &&
             (rc = nv->DeviceGetTemperature(dev, NVML_TEMPERATURE_GPU, &u)) == NVML_SUCCESS)
        set(x, F_GPU_TEMP, u);
    else
        ok(r, rc);
    if (nv->DeviceGetPowerUsage && ok(r, nv->DeviceGetPowerUsage(dev, &u)))
        set(x, F_POWER, u / MW_PER_W);
    if (nv->DeviceGetCurrPcieLinkGeneration && ok(r, nv->DeviceGetCurrPcieLinkGeneration(dev, &u)))
        set(x, F_PCIE_GEN, u);
    if (nv->DeviceGetCurrPcieLinkWidth && ok(r, nv->DeviceGetCurrPcieLinkWidth(dev, &u)))
        set(x, F_PCIE_WIDTH, u);
    if (last_xid)
        set(x, F_XID, last_xid[x->gpu]);
    if (mig)
        return;
    nvmlUtilization_t util;
    if (nv->DeviceGetUtilizationRates && ok(r, nv->DeviceGetUtilizationRates(dev, &util)))
        set(x, F_GPU_UTIL, util.gpu);
    read_memory(r, dev, x);
}

typedef struct gpu_ctx {
    int gpu;
} gpu_ctx;

static bool uses_whole_gpu(const ts_metrics_task *t, const void *ctx)
{
    return !t->mig_uuid[0] && task_uses_gpu(t, ((const gpu_ctx *)ctx)->gpu);
}

/* ---- MIG ------------------------------------------------------------------- */

typedef struct gi_group {
    unsigned id;
    char profile[GI_PROFILE_NAME_MAX];
    int ndev;
    nvmlDevice_t dev[MIG_DEVICES_MAX];
    char uuid[MIG_DEVICES_MAX][NVML_DEVICE_UUID_V2_BUFFER_SIZE];
} gi_group;

/* Profile-name suffixes by NVML_GPU_INSTANCE_PROFILE_* index (1.6.13, 2.9). */
static const char *profile_suffix(unsigned index)
{
    switch (index) {
    case 0x7: case 0x8: return "+me";
    case 0xA: case 0xB: case 0xC: case 0x11: return "+gfx";
    case 0xD: case 0xE: return "-me";
    case 0xF: case 0x10: return "+me.all";
    default: return "";
    }
}

/* "<g>g.<N>gb" as nvidia-smi names it (gpu-facts.md 2.9): N = the profile's
 * share of memory rounded up to eighths, times the GPU's memory in whole GiB
 * rounded up, rounded. Integer arithmetic, so exact fractions stay exact. */
static void profile_name(unsigned index, const nvmlGpuInstanceProfileInfo_t *info,
                         unsigned long long total_bytes, char *out, size_t len)
{
    unsigned long long gb = 0;
    if (total_bytes) {
        unsigned long long mem = info->memorySizeMB * MIB_BYTES;
        unsigned long long eighths = (mem * MIG_MEM_SLICES + total_bytes - 1) / total_bytes;
        unsigned long long gib = (total_bytes + GIB_BYTES - 1) / GIB_BYTES;
        gb = (eighths * gib + MIG_MEM_SLICES / 2) / MIG_MEM_SLICES;
    }
    snprintf(out, len, "%ug.%llugb%s", info->sliceCount, gb, profile_suffix(index));
}

/* The GPU instances that have MIG devices (no MIG device: no memory to read,
 * no task can run there), with their profile names. */
static int read_gis(render *r, nvmlDevice_t dev, gi_group *gis, int cap)
{
    ts_nvml *nv = r->nv;
    unsigned max = 0;
    if (!nv->DeviceGetMaxMigDeviceCount || !nv->DeviceGetMigDeviceHandleByIndex ||
        !nv->DeviceGetGpuInstanceId || !ok(r, nv->DeviceGetMaxMigDeviceCount(dev, &max)))
        return 0;
    int n = 0;
    for (unsigned i = 0; i < max && i < MIG_DEVICES_MAX; i++) {
        nvmlDevice_t mig;
        unsigned gid;
        char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
        nvmlReturn_t rc = nv->DeviceGetMigDeviceHandleByIndex(dev, i, &mig);
        if (rc == NVML_ERROR_NOT_FOUND || !ok(r, rc) ||
            !ok(r, nv->DeviceGetGpuInstanceId(mig, &gid)) ||
            !ok(r, nv->DeviceGetUUID(mig, uuid, sizeof uuid)))
            continue;
        int g = 0;
        while (g < n && gis[g].id != gid)
            g++;
        if (g == n) {
            if (n == cap)
                continue;
            memset(&gis[n], 0, sizeof gis[n]);
            gis[n++].id = gid;
        }
        if (gis[g].ndev < MIG_DEVICES_MAX) {
            gis[g].dev[gis[g].ndev] = mig;
            snprintf(gis[g].uuid[gis[g].ndev++], sizeof gis[g].uuid[0], "%s", uuid);
        }
    }
    if (!n || !nv->DeviceGetGpuInstanceProfileInfo || !nv->DeviceGetGpuInstances ||
        !nv->GpuInstanceGetInfo)
        return n;
    nvmlMemory_t total;
    if (!ok(r, nv->DeviceGetMemoryInfo(dev, &total)))
        total.total = 0;
    for (unsigned idx = 0; idx < GI_PROFILE_INDEX_LIMIT; idx++) {
        nvmlGpuInstanceProfileInfo_t info;
        nvmlReturn_t rc = nv->DeviceGetGpuInstanceProfileInfo(dev, idx, &info);
        if (rc == NVML_ERROR_INVALID_ARGUMENT)
            break;
        if (rc != NVML_SUCCESS)
            continue; /* not a profile of this GPU */
        nvmlGpuInstance_t h[MIG_DEVICES_MAX];
        unsigned k = MIG_DEVICES_MAX;
        if (!ok(r, nv->DeviceGetGpuInstances(dev, info.id, h, &k)))
            continue;
        for (unsigned i = 0; i < k; i++) {
            nvmlGpuInstanceInfo_t gi;
            if (!ok(r, nv->GpuInstanceGetInfo(h[i], &gi)))
                continue;
            for (int g = 0; g < n; g++)
                if (gis[g].id == gi.id)
                    profile_name(idx, &info, total.total, gis[g].profile,
                                 sizeof gis[g].profile);
        }
    }
    return n;
}

static bool uses_gi(const ts_metrics_task *t, const void *ctx)
{
    const gi_group *gi = ctx;
    for (int d = 0; t->mig_uuid[0] && d < gi->ndev; d++)
        if (strcmp(gi->uuid[d], t->mig_uuid) == 0)
            return true;
    return false;
}

/* One row per instance (and job): memory from its MIG device handle; NVML
 * has no utilisation per MIG device, so none is reported. */
static void render_mig(render *r, nvmlDevice_t dev, const row *parent)
{
    gi_group gis[MIG_DEVICES_MAX];
    int n = read_gis(r, dev, gis, MIG_DEVICES_MAX);
    for (int g = 0; g < n; g++) {
        row base = {.gpu = parent->gpu, .gi = (int)gis[g].id, .tenant = ""};
        snprintf(base.profile, sizeof base.profile, "%s", gis[g].profile);
        read_memory(r, gis[g].dev[0], &base);
        sharing sh;
        if (!sharing_collect(r, &sh, uses_gi, &gis[g]))
            return;
        emit_device(r, &base, &sh, gis[g].dev, gis[g].ndev, false);
        sharing_free(&sh);
    }
}

static void render_gpu(render *r, int i, const unsigned *last_xid)
{
    ts_nvml *nv = r->nv;
    gpu_ident *id = &r->ident[i];
    nvmlDevice_t dev;
    nvmlPciInfo_t pci;
    if (!ok(r, nv->DeviceGetHandleByIndex((unsigned)i, &dev)) ||
        !ok(r, nv->DeviceGetUUID(dev, id->uuid, sizeof id->uuid)) ||
        !ok(r, nv->DeviceGetName(dev, id->name, sizeof id->name)) ||
        !ok(r, nv->DeviceGetPciInfo(dev, &pci)))
        return; /* no identity, no series: the health report says why */
    snprintf(id->bus_id, sizeof id->bus_id, "%s",
             agent_nvml_is_fallback(nv, TS_NVML_FN_DeviceGetPciInfo) ? pci.busIdLegacy : pci.busId);
    unsigned cur = 0, pend = 0;
    bool mig = nv->DeviceGetMigMode && nv->DeviceGetMigMode(dev, &cur, &pend) == NVML_SUCCESS &&
               cur == NVML_DEVICE_MIG_ENABLE;
    row base = {.gpu = i, .gi = -1, .tenant = ""};
    read_gpu(r, dev, mig, last_xid, &base);
    if (mig) {
        /* the parent's readings belong to no one task: its instances carry the jobs */
        push(r, &base);
        render_mig(r, dev, &base);
        return;
    }
    sharing sh;
    gpu_ctx ctx = {i};
    if (!sharing_collect(r, &sh, uses_whole_gpu, &ctx))
        return;
    emit_device(r, &base, &sh, &dev, 1, true);
    sharing_free(&sh);
}

/* ---- text ------------------------------------------------------------------- */

/* A label value: backslash, quote and newline escaped; other control bytes
 * would break the line format, so they become '?'. */
static void put_value(FILE *f, const char *s)
{
    fputc('"', f);
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '\\' || c == '"')
            fprintf(f, "\\%c", c);
        else if (c == '\n')
            fputs("\\n", f);
        else
            fputc(c < 0x20 || c == 0x7F ? '?' : c, f);
    }
    fputc('"', f);
}

static void put_labels(FILE *f, const render *r, const row *x, const char *hostname)
{
    const gpu_ident *id = &r->ident[x->gpu];
    fprintf(f, "{gpu=\"%d\",UUID=", x->gpu);
    put_value(f, id->uuid);
    fputs(",pci_bus_id=", f);
    put_value(f, id->bus_id);
    fprintf(f, ",device=\"nvidia%d\",modelName=", x->gpu);
    put_value(f, id->name);
    if (x->gi >= 0) {
        fputs(",GPU_I_PROFILE=", f);
        put_value(f, x->profile);
        fprintf(f, ",GPU_I_ID=\"%d\"", x->gi);
    }
    fputs(",hostname=", f);
    put_value(f, hostname);
    fputs(",tenant=", f);
    put_value(f, x->tenant);
    fputs(",job=", f);
    put_value(f, x->job);
    fputc('}', f);
}

static void put_head(FILE *f, const char *name, const char *type, const char *help)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static int render_stream(FILE *f, ts_nvml *nv, const char *hostname,
                         const ts_metrics_task *tasks, size_t ntasks, const unsigned *last_xid,
                         ts_err *err)
{
    render r = {.nv = nv, .tasks = tasks, .ntasks = tasks ? ntasks : 0};
    unsigned ngpus = 0;
    bool up = nv && ok(&r, nv->DeviceGetCount(&ngpus));
    if (ngpus > TS_METRICS_MAX_GPUS)
        ngpus = TS_METRICS_MAX_GPUS;
    for (unsigned i = 0; up && i < ngpus && !r.oom; i++)
        render_gpu(&r, (int)i, last_xid);
    if (r.oom) {
        free(r.rows);
        return ts_err_set(err, TS_ENOMEM, "metrics: out of memory while rendering");
    }
    for (int fi = 0; fi < F_COUNT; fi++) {
        bool any = false;
        for (size_t k = 0; k < r.nrows && !any; k++)
            any = r.rows[k].has[fi];
        if (!any)
            continue;
        put_head(f, fam[fi].name, fam[fi].type, fam[fi].help);
        for (size_t k = 0; k < r.nrows; k++) {
            if (!r.rows[k].has[fi])
                continue;
            fputs(fam[fi].name, f);
            put_labels(f, &r, &r.rows[k], hostname ? hostname : "");
            fprintf(f, " %.10g\n", r.rows[k].v[fi]);
        }
    }
    free(r.rows);
    put_head(f, "tessera_agent_nvml_up", "gauge",
             "1 when the agent reads its GPUs through NVML, 0 on a CPU-only node.");
    fprintf(f, "tessera_agent_nvml_up %d\n", up ? 1 : 0);
    put_head(f, "tessera_agent_gpus", "gauge", "GPUs NVML reports on this node.");
    fprintf(f, "tessera_agent_gpus %u\n", up ? ngpus : 0);
    put_head(f, "tessera_agent_tasks", "gauge", "Tasks the agent runs on this node.");
    fprintf(f, "tessera_agent_tasks %zu\n", r.ntasks);
    put_head(f, "tessera_agent_nvml_errors", "gauge",
             "NVML reads that failed while rendering this page (not counting unsupported ones).");
    fprintf(f, "tessera_agent_nvml_errors %d\n", r.nvml_errors);
    put_head(f, "tessera_agent_xid_monitored", "gauge",
             "1 when Xid events are watched (DCGM_FI_DEV_XID_ERRORS is served), else 0.");
    fprintf(f, "tessera_agent_xid_monitored %d\n", up && last_xid ? 1 : 0);
    return 0;
}

static int finish(FILE *f, char **buf, size_t *len, int rc, ts_err *err)
{
    if (fclose(f) != 0 && rc == 0)
        rc = ts_err_set(err, TS_ENOMEM, "metrics: out of memory while rendering");
    if (rc != 0) {
        free(*buf);
        *buf = NULL;
        *len = 0;
    }
    return rc;
}

int agent_metrics_render(ts_nvml *nv, const char *hostname, const ts_metrics_task *tasks,
                            size_t ntasks, const unsigned *last_xid, char **text, ts_err *err)
{
    size_t len = 0;
    *text = NULL;
    FILE *f = open_memstream(text, &len);
    if (!f)
        return ts_err_set(err, TS_ENOMEM, "metrics: out of memory while rendering");
    int rc = render_stream(f, nv, hostname, tasks, ntasks, last_xid, err);
    return finish(f, text, &len, rc, err);
}
