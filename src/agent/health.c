/*
 * health.c - sample GPU health through NVML and turn it into a verdict.
 *
 * The Xid table is gpu-facts.md 3.5 (NVIDIA's Xid catalog "immediate action"
 * buckets as encoded by NVSentinel, meanings from dcgm-exporter and nverror.h):
 * FATAL Xids fail the GPU, "reset when convenient" ones (63, 94) degrade it,
 * application faults are not the node's problem. The other signals never fail
 * a GPU by themselves except a failed row remap (the catalog's RMA path) and
 * a lost GPU; they degrade it, so no new work lands on hardware that is
 * slowing down or has a reset pending while running work keeps going.
 * docs/agent-health.md is the same table in prose.
 */
#include "agent/health.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One GPU may report many Xids between samples; the sticky list keeps the
 * distinct ones that matter. */
#define HEALTH_STICKY_XIDS_MAX 8
/* Events drained per sample at most, so a storm cannot stall the agent. */
#define HEALTH_EVENTS_PER_SAMPLE_MAX 256
/* Volatile uncorrected ECC errors tolerated before the GPU is degraded. The
 * Xid that accompanies a DBE (48/95 fatal, 94 contained) decides draining. */
#define HEALTH_ECC_UNCORRECTED_MAX 0ULL
/* GPUs lower the PCIe generation when idle (gpu-facts.md 1.4), so a gen below
 * max counts only while the GPU is this busy; a narrower width always counts. */
#define HEALTH_PCIE_GEN_CHECK_MIN_UTIL_PCT 10
/* Hardware protections (table 1.6.9); GpuIdle, SwPowerCap, SyncBoost are
 * normal operation. */
#define HEALTH_CLOCK_REASONS_DEGRADED                                                  \
    (nvmlClocksThrottleReasonHwSlowdown | nvmlClocksThrottleReasonHwThermalSlowdown | \
     nvmlClocksEventReasonSwThermalSlowdown | nvmlClocksThrottleReasonHwPowerBrakeSlowdown)

struct ts_health {
    ts_nvml *nv;
    nvmlEventSet_t set; /* NULL when events are unavailable */
    bool xid_monitored;
    unsigned ngpus;
    nvmlDevice_t dev[TS_HEALTH_MAX_GPUS];
    int nsticky[TS_HEALTH_MAX_GPUS];
    unsigned sticky[TS_HEALTH_MAX_GPUS][HEALTH_STICKY_XIDS_MAX];
};

/* ---- policy -------------------------------------------------------------- */

static const struct {
    unsigned xid;
    int verdict;
    const char *meaning;
} xid_table[] = {
    {46, TS_HEALTH_FAILED, "GPU stopped processing (reset the GPU)"},
    {48, TS_HEALTH_FAILED, "double-bit ECC error (drain, reset, check row remapping)"},
    {61, TS_HEALTH_FAILED, "internal micro-controller breakpoint"},
    {62, TS_HEALTH_FAILED, "internal micro-controller halt (reset the GPU)"},
    {63, TS_HEALTH_DEGRADED, "ECC page retirement or row remap recorded (reset when idle)"},
    {64, TS_HEALTH_FAILED, "page retirement or row remap recording failure"},
    {74, TS_HEALTH_FAILED, "NVLink error (drain, reset, check peer and NVSwitch)"},
    {79, TS_HEALTH_FAILED, "GPU has fallen off the bus (reboot the node)"},
    {92, TS_HEALTH_HEALTHY, "high single-bit ECC error rate (watch the trend)"},
    {94, TS_HEALTH_DEGRADED, "contained uncorrectable ECC error (reset when idle)"},
    {95, TS_HEALTH_FAILED, "uncontained uncorrectable ECC error"},
    {109, TS_HEALTH_FAILED, "context-switch timeout"},
    {110, TS_HEALTH_FAILED, "security fault"},
    {119, TS_HEALTH_FAILED, "GSP firmware RPC timeout"},
    {120, TS_HEALTH_FAILED, "GSP firmware error"},
    {136, TS_HEALTH_FAILED, "NVLink ALI training failure"},
    {140, TS_HEALTH_FAILED, "unrecovered ECC error"},
    {143, TS_HEALTH_FAILED, "GPU initialization failure"},
    {144, TS_HEALTH_FAILED, "NVLink5 SAW error"},
    {145, TS_HEALTH_FAILED, "NVLink5 RLW error"},
    {146, TS_HEALTH_FAILED, "NVLink5 TLW error"},
    {147, TS_HEALTH_FAILED, "NVLink5 TREX error"},
    {148, TS_HEALTH_FAILED, "NVLink5 NVLPW_CTRL error"},
    {149, TS_HEALTH_FAILED, "NVLink5 NETIR error"},
    {150, TS_HEALTH_FAILED, "NVLink5 MSE error"},
    {155, TS_HEALTH_FAILED, "NVLink software-defined error"},
    {156, TS_HEALTH_FAILED, "resource retirement event"},
    {158, TS_HEALTH_FAILED, "GPU fatal timeout"},
    {160, TS_HEALTH_FAILED, "channel retirement event (reboot the node)"},
    /* application faults: the job's problem, not the node's */
    {13, TS_HEALTH_HEALTHY, "graphics/compute engine exception (application)"},
    {31, TS_HEALTH_HEALTHY, "GPU memory page fault (application)"},
    {43, TS_HEALTH_HEALTHY, "GPU stopped processing a channel (application)"},
    {45, TS_HEALTH_HEALTHY, "preemptive cleanup after earlier errors"},
    {68, TS_HEALTH_HEALTHY, "video decoder exception (application)"},
    {93, TS_HEALTH_HEALTHY, "InfoROM erase limit exceeded (non-fatal)"},
    {121, TS_HEALTH_HEALTHY, "C2C link error (non-fatal)"},
    {154, TS_HEALTH_HEALTHY, "driver changed the recommended recovery action"},
};

int agent_health_xid_policy(unsigned xid, const char **meaning)
{
    for (size_t i = 0; i < sizeof xid_table / sizeof xid_table[0]; i++)
        if (xid_table[i].xid == xid) {
            if (meaning)
                *meaning = xid_table[i].meaning;
            return xid_table[i].verdict;
        }
    /* Not in the catalog excerpt: keep new work away until someone looks. */
    if (meaning)
        *meaning = "Xid not in the agent's table";
    return TS_HEALTH_DEGRADED;
}

/* Xids that only inform (application faults, 92) are not remembered. */
static bool xid_sticks(unsigned xid)
{
    return agent_health_xid_policy(xid, NULL) != TS_HEALTH_HEALTHY || xid == 92;
}

const char *agent_health_verdict_name(int verdict)
{
    return verdict == TS_HEALTH_FAILED     ? "failed"
           : verdict == TS_HEALTH_DEGRADED ? "degraded"
                                           : "healthy";
}

static void add_reason(ts_gpu_health *g, int verdict, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void add_reason(ts_gpu_health *g, int verdict, const char *code, const char *fmt, ...)
{
    if (verdict > g->verdict)
        g->verdict = verdict;
    if (g->nreasons >= TS_HEALTH_MAX_REASONS)
        return;
    ts_health_reason *r = &g->reason[g->nreasons++];
    r->verdict = verdict;
    snprintf(r->code, sizeof r->code, "%s", code);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->message, sizeof r->message, fmt, ap);
    va_end(ap);
}

/* ---- the monitor --------------------------------------------------------- */

int agent_health_open(ts_nvml *nv, ts_health **out, ts_err *err)
{
    *out = NULL;
    ts_health *h = calloc(1, sizeof *h);
    if (!h)
        return ts_err_set(err, TS_ENOMEM, "health: out of memory");
    h->nv = nv;
    unsigned n = 0;
    nvmlReturn_t r = nv->DeviceGetCount(&n);
    if (r != NVML_SUCCESS) {
        free(h);
        return ts_err_set(err, TS_EIO, "health: nvmlDeviceGetCount: %s", agent_nvml_strerror(nv, r));
    }
    h->ngpus = n < TS_HEALTH_MAX_GPUS ? n : TS_HEALTH_MAX_GPUS;
    for (unsigned i = 0; i < h->ngpus; i++)
        if (nv->DeviceGetHandleByIndex(i, &h->dev[i]) != NVML_SUCCESS)
            h->dev[i] = NULL; /* reported as lost by every sample */

    if (nv->EventSetCreate && nv->DeviceRegisterEvents && nv->EventSetWait && nv->EventSetFree &&
        nv->EventSetCreate(&h->set) == NVML_SUCCESS) {
        for (unsigned i = 0; i < h->ngpus; i++) {
            unsigned long long supported = nvmlEventTypeXidCriticalError;
            if (!h->dev[i] || (nv->DeviceGetSupportedEventTypes &&
                               nv->DeviceGetSupportedEventTypes(h->dev[i], &supported) !=
                                   NVML_SUCCESS))
                continue;
            /* registering an unsupported bit fails the whole call (1.6.10) */
            if ((supported & nvmlEventTypeXidCriticalError) &&
                nv->DeviceRegisterEvents(h->dev[i], nvmlEventTypeXidCriticalError, h->set) ==
                    NVML_SUCCESS)
                h->xid_monitored = true;
        }
    }
    *out = h;
    return 0;
}

void agent_health_close(ts_health *h)
{
    if (!h)
        return;
    if (h->set)
        h->nv->EventSetFree(h->set);
    free(h);
}

void agent_health_clear(ts_health *h, unsigned gpu)
{
    if (gpu < h->ngpus)
        h->nsticky[gpu] = 0;
}

static void remember_xid(ts_health *h, unsigned gpu, unsigned xid)
{
    for (int i = 0; i < h->nsticky[gpu]; i++)
        if (h->sticky[gpu][i] == xid)
            return;
    if (h->nsticky[gpu] < HEALTH_STICKY_XIDS_MAX)
        h->sticky[gpu][h->nsticky[gpu]++] = xid;
}

static void drain_events(ts_health *h)
{
    if (!h->set)
        return;
    for (int k = 0; k < HEALTH_EVENTS_PER_SAMPLE_MAX; k++) {
        nvmlEventData_t ev;
        memset(&ev, 0, sizeof ev);
        if (h->nv->EventSetWait(h->set, &ev, 0) != NVML_SUCCESS)
            return; /* TIMEOUT: nothing pending */
        if (!(ev.eventType & nvmlEventTypeXidCriticalError))
            continue;
        for (unsigned i = 0; i < h->ngpus; i++)
            if (h->dev[i] == ev.device && xid_sticks((unsigned)ev.eventData))
                remember_xid(h, i, (unsigned)ev.eventData);
    }
}

/* ---- one GPU --------------------------------------------------------------- */

/* Marks the GPU lost when NVML says so; true if the read succeeded. */
static bool ok(ts_gpu_health *g, nvmlReturn_t r)
{
    if (r == NVML_ERROR_GPU_IS_LOST)
        g->lost = true;
    return r == NVML_SUCCESS;
}

static void read_clocks_and_temp(ts_nvml *nv, nvmlDevice_t d, ts_gpu_health *g)
{
    g->temperature_c = -1;
    nvmlTemperature_t t = {.version = nvmlTemperature_v1, .sensorType = NVML_TEMPERATURE_GPU};
    unsigned tc;
    if (nv->DeviceGetTemperatureV && ok(g, nv->DeviceGetTemperatureV(d, &t)))
        g->temperature_c = t.temperature;
    else if (nv->DeviceGetTemperature &&
             ok(g, nv->DeviceGetTemperature(d, NVML_TEMPERATURE_GPU, &tc)))
        g->temperature_c = (int)tc;

    g->util_gpu_pct = -1;
    nvmlUtilization_t u;
    if (nv->DeviceGetUtilizationRates && ok(g, nv->DeviceGetUtilizationRates(d, &u)))
        g->util_gpu_pct = (int)u.gpu;

    unsigned long long cr = 0;
    if (nv->DeviceGetCurrentClocksEventReasons &&
        ok(g, nv->DeviceGetCurrentClocksEventReasons(d, &cr)))
        g->clock_event_reasons = cr;
    static const struct {
        unsigned long long bit;
        const char *code, *text;
    } clocks[] = {
        {nvmlClocksThrottleReasonHwSlowdown, "clock-hw-slowdown", "HW slowdown"},
        {nvmlClocksThrottleReasonHwThermalSlowdown, "clock-hw-thermal", "HW thermal slowdown"},
        {nvmlClocksEventReasonSwThermalSlowdown, "clock-sw-thermal", "SW thermal slowdown"},
        {nvmlClocksThrottleReasonHwPowerBrakeSlowdown, "clock-power-brake",
         "HW power brake slowdown"},
    };
    for (size_t i = 0; i < sizeof clocks / sizeof clocks[0]; i++)
        if (cr & clocks[i].bit & HEALTH_CLOCK_REASONS_DEGRADED)
            add_reason(g, TS_HEALTH_DEGRADED, clocks[i].code, "clocks held down: %s (%d C)",
                       clocks[i].text, g->temperature_c);
}

static void read_pcie(ts_nvml *nv, nvmlDevice_t d, ts_gpu_health *g)
{
    if (!nv->DeviceGetCurrPcieLinkGeneration || !nv->DeviceGetCurrPcieLinkWidth ||
        !nv->DeviceGetMaxPcieLinkGeneration || !nv->DeviceGetMaxPcieLinkWidth)
        return;
    if (!ok(g, nv->DeviceGetCurrPcieLinkGeneration(d, &g->pcie_gen)) ||
        !ok(g, nv->DeviceGetCurrPcieLinkWidth(d, &g->pcie_width)) ||
        !ok(g, nv->DeviceGetMaxPcieLinkGeneration(d, &g->pcie_max_gen)) ||
        !ok(g, nv->DeviceGetMaxPcieLinkWidth(d, &g->pcie_max_width)))
        return;
    if (g->pcie_width < g->pcie_max_width)
        add_reason(g, TS_HEALTH_DEGRADED, "pcie-width", "PCIe link x%u, expected x%u",
                   g->pcie_width, g->pcie_max_width);
    if (g->pcie_gen < g->pcie_max_gen && g->util_gpu_pct >= HEALTH_PCIE_GEN_CHECK_MIN_UTIL_PCT)
        add_reason(g, TS_HEALTH_DEGRADED, "pcie-gen", "PCIe link Gen%u under load, expected Gen%u",
                   g->pcie_gen, g->pcie_max_gen);
}

static void read_memory_health(ts_nvml *nv, nvmlDevice_t d, ts_gpu_health *g)
{
    unsigned long long dbe = 0;
    if (nv->DeviceGetTotalEccErrors &&
        ok(g, nv->DeviceGetTotalEccErrors(d, NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
                                          NVML_VOLATILE_ECC, &dbe)))
        g->ecc_uncorrected_volatile = dbe;
    if (dbe > HEALTH_ECC_UNCORRECTED_MAX)
        add_reason(g, TS_HEALTH_DEGRADED, "ecc-uncorrected",
                   "%llu uncorrected ECC errors since driver load (reset when idle)", dbe);

    nvmlEnableState_t pend;
    if (nv->DeviceGetRetiredPagesPendingStatus &&
        ok(g, nv->DeviceGetRetiredPagesPendingStatus(d, &pend)) && pend == NVML_FEATURE_ENABLED) {
        g->retired_pages_pending = true;
        add_reason(g, TS_HEALTH_DEGRADED, "retired-pages-pending",
                   "page retirement pending (reset when idle)");
    }

    /* NOT_SUPPORTED on MIG GPUs with instances (1.7): silently unknown */
    unsigned corr, unc, rp, rf;
    if (nv->DeviceGetRemappedRows && ok(g, nv->DeviceGetRemappedRows(d, &corr, &unc, &rp, &rf))) {
        g->row_remap_pending = rp != 0;
        g->row_remap_failed = rf != 0;
        if (rf)
            add_reason(g, TS_HEALTH_FAILED, "row-remap-failed",
                       "row remapping failed (%u uncorrectable rows): replace the GPU", unc);
        else if (rp)
            add_reason(g, TS_HEALTH_DEGRADED, "row-remap-pending",
                       "row remap pending (reset when idle)");
    }
}

static void read_nvlinks(ts_nvml *nv, nvmlDevice_t d, ts_gpu_health *g)
{
    if (!nv->DeviceGetNvLinkState)
        return;
    for (unsigned l = 0;; l++) {
        nvmlEnableState_t st;
        nvmlReturn_t r = nv->DeviceGetNvLinkState(d, l, &st);
        if (!ok(g, r))
            break; /* past the last link, or no NVLink */
        g->nvlinks++;
        if (st != NVML_FEATURE_ENABLED) {
            g->nvlinks_down++;
            add_reason(g, TS_HEALTH_DEGRADED, "nvlink-down", "NVLink %u is down", l);
        }
    }
}

static void sample_gpu(ts_health *h, unsigned i, ts_gpu_health *g)
{
    ts_nvml *nv = h->nv;
    nvmlDevice_t d = h->dev[i];
    memset(g, 0, sizeof *g);
    g->index = i;
    for (int k = 0; k < h->nsticky[i]; k++) {
        const char *meaning;
        unsigned xid = h->sticky[i][k];
        int v = agent_health_xid_policy(xid, &meaning);
        char code[TS_HEALTH_CODE_MAX];
        snprintf(code, sizeof code, "xid-%u", xid);
        add_reason(g, v, code, "xid %u: %s", xid, meaning);
    }
    if (d) {
        read_clocks_and_temp(nv, d, g);
        read_pcie(nv, d, g);
        read_memory_health(nv, d, g);
        read_nvlinks(nv, d, g);
    }
    if (!d || g->lost) {
        g->lost = true;
        add_reason(g, TS_HEALTH_FAILED, "gpu-lost", "NVML cannot reach the GPU");
    }
}

int agent_health_sample_now(ts_health *h, ts_health_sample *out, ts_err *err)
{
    (void)err; /* per-GPU failures are reasons; kept for interface symmetry */
    memset(out, 0, sizeof *out);
    drain_events(h);
    out->xid_monitored = h->xid_monitored;
    out->ngpus = (int)h->ngpus;
    for (unsigned i = 0; i < h->ngpus; i++) {
        sample_gpu(h, i, &out->gpu[i]);
        if (out->gpu[i].verdict > out->verdict)
            out->verdict = out->gpu[i].verdict;
    }
    return 0;
}

/* ---- the sync's health ------------------------------------------------------- */

static enum ts_verdict verdict_doc(int v)
{
    return v == TS_HEALTH_FAILED     ? TS_VERDICT_FAILED
           : v == TS_HEALTH_DEGRADED ? TS_VERDICT_DEGRADED
                                     : TS_VERDICT_HEALTHY;
}

ts_node_health *agent_health_doc(const ts_health_sample *s, agent_health_report *out)
{
    ts_node_health *h = &out->doc;
    *h = (ts_node_health){.present = TS_NH_BIT(TS_NH_VERDICT) | TS_NH_BIT(TS_NH_XID_MONITORED) |
                                     TS_NH_BIT(TS_NH_REASONS) | TS_NH_BIT(TS_NH_GPUS),
                          .verdict = verdict_doc(s->verdict),
                          .xid_monitored = s->xid_monitored,
                          .reasons = {out->lines, 0},
                          .gpus = out->gpus,
                          .ngpus = s->ngpus};
    for (int i = 0; i < s->ngpus; i++) {
        const ts_gpu_health *g = &s->gpu[i];
        ts_gpu_health_doc *d = &out->gpus[i];
        *d = (ts_gpu_health_doc){.present = TS_GH_BIT(TS_GH_NFIELDS) - 1,
                                 .index = g->index,
                                 .verdict = verdict_doc(g->verdict),
                                 .temperature_c = g->temperature_c,
                                 .pcie_gen = g->pcie_gen,
                                 .pcie_width = g->pcie_width,
                                 .clock_event_reasons = (int64_t)g->clock_event_reasons,
                                 .ecc_uncorrected_volatile = (int64_t)g->ecc_uncorrected_volatile,
                                 .nvlinks_down = g->nvlinks_down,
                                 .util_gpu_pct = g->util_gpu_pct,
                                 .reasons = out->reasons[i],
                                 .nreasons = g->nreasons};
        for (int k = 0; k < g->nreasons; k++) {
            const ts_health_reason *r = &g->reason[k];
            char *line = out->text[h->reasons.n];
            snprintf(line, sizeof out->text[0], "gpu %u: %s: %s", g->index, r->code, r->message);
            out->lines[h->reasons.n++] = line;
            out->reasons[i][k] = (ts_health_reason_doc){r->code, verdict_doc(r->verdict),
                                                        r->message};
        }
    }
    return h;
}

ts_node_health *agent_health_unread_doc(const char *why, agent_health_report *out)
{
    snprintf(out->text[0], sizeof out->text[0], "%s", why);
    out->lines[0] = out->text[0];
    out->doc = (ts_node_health){.present = TS_NH_BIT(TS_NH_VERDICT) | TS_NH_BIT(TS_NH_REASONS),
                                .verdict = TS_VERDICT_DEGRADED,
                                .reasons = {out->lines, 1}};
    return &out->doc;
}

json_t *agent_health_json(const ts_health_sample *s)
{
    static agent_health_report doc; /* large: the tests' thread only */
    return ts_node_health_encode(agent_health_doc(s, &doc));
}
