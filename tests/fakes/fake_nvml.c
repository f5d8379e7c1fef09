/*
 * fake_nvml.c - a libnvidia-ml.so.1 for tests: the NVML calls the agent makes,
 * under their real export names and versions, answering from a JSON fixture.
 *
 * The fixture is named by $TESSERA_FAKE_NVML_FIXTURE (format: README.md next
 * to this file). Every call first stats the file and re-reads it when its
 * inode, size or mtime changed, so a test changes the "hardware" under a
 * running agent by rewriting the file (write a temp file and rename it: the
 * new inode is noticed even within one mtime tick). A reload replaces the
 * health state (temperature, clocks, PCIe, ECC, remaps, NVLink, utilisation,
 * Xid history); the GPU list and the MIG instances are read once at nvmlInit,
 * after which the MIG create/destroy calls own them and enforce the real
 * geometry (gpu-facts.md 2.3, 2.8). Xid events: the fixture's per-GPU "xids"
 * list is an append-only history; an event set delivers each entry appended
 * after it was registered exactly once, like the driver.
 *
 * Links only jansson and threads; one global mutex (this stands in for a
 * driver, which is process-global by nature).
 */
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "agent/nvml_types.h"

#define EXPORT __attribute__((visibility("default")))

#define FAKE_MAX_GPUS 16
#define FAKE_MAX_LINKS 18
#define FAKE_MAX_XIDS 64
#define FAKE_MAX_SETS 16
#define FAKE_MIG_MAX_GI 7
#define FAKE_MIG_MAX_CI 7
#define FAKE_MIG_MEM_SLICES 8
#define FAKE_GI_PROFILE_COUNT 0x12 /* NVML_GPU_INSTANCE_PROFILE_COUNT, 13.3 */
#define FAKE_CI_PROFILE_COUNT 0x9
#define FAKE_WAIT_POLL_MS 5
#define FAKE_MAX_PROCS 32
#define FAKE_CLOCK_TYPES 4
#define FAKE_PROC_STRIDE_BYTES 24
#define FAKE_PROC_STRIDE_535_BYTES 32
#define USEC_PER_SEC 1000000ULL
#define FIXTURE_ENV "TESSERA_FAKE_NVML_FIXTURE"
#define BYTES_PER_MIB (1024ULL * 1024ULL)

enum { MAGIC_GPU = 0x47505530, MAGIC_GI = 0x47490000, MAGIC_CI = 0x43490000 };

struct fgpu;
struct fgi;

struct fci {
    int magic;
    int used;
    unsigned id, profile_id, start, size;
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    struct fgi *gi;
};

struct fgi {
    int magic;
    int used;
    unsigned id, profile_id, start;
    struct fci ci[FAKE_MIG_MAX_CI];
    struct fgpu *gpu;
};

struct flink {
    char remote_bus_id[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
    int remote_type;
    int active;
};

struct fxid {
    unsigned xid, gi, ci;
};

/* A process using a GPU (or, with mig_uuid, one MIG device of it). */
struct fproc {
    unsigned pid;
    unsigned long long used_mib;
    int sm_util, mem_util; /* -1: no utilisation sample for it */
    char mig_uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
};

struct fgpu {
    int magic;
    unsigned index;
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
    char bus_id[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
    unsigned pci_device_id;
    unsigned long long mem_total_mib, mem_used_mib;
    int numa_node, pcie_switch;
    /* health state: replaced on every reload */
    int lost;
    int temp_c;
    unsigned long long clock_reasons;
    unsigned pcie_gen, pcie_width, pcie_max_gen, pcie_max_width;
    unsigned long long ecc[2][2]; /* [error type][counter type] */
    int retired_pending;
    unsigned remap_corr, remap_unc, remap_pending, remap_failure;
    unsigned util_gpu, util_mem;
    int nlinks;
    struct flink link[FAKE_MAX_LINKS];
    int nxids;
    struct fxid xids[FAKE_MAX_XIDS];
    int power_mw;                   /* -1: NOT_SUPPORTED */
    int clock_mhz[FAKE_CLOCK_TYPES]; /* by nvmlClockType_t; -1: NOT_SUPPORTED */
    int nprocs;
    struct fproc procs[FAKE_MAX_PROCS];
    unsigned proc_stride; /* bytes per nvmlProcessInfo entry written (24, or 32: 535.43-.86) */
    /* MIG: from the fixture at init, then owned by the create/destroy calls */
    int mig_capable;
    unsigned mig_mode, mig_pending;
    struct fgi gi[FAKE_MIG_MAX_GI];
    unsigned next_gi_id;
};

struct fset {
    int used;
    unsigned long long mask[FAKE_MAX_GPUS];
    int cursor[FAKE_MAX_GPUS]; /* xid history entries already delivered */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int init_count;
static int ngpus;
static struct fgpu gpus[FAKE_MAX_GPUS];
static struct fset sets[FAKE_MAX_SETS];
static struct stat fixture_st;

/* ---- MIG geometry (gpu-facts.md 2.2, 2.3): same on A100/H100/H200 ------- */

struct gi_profile {
    unsigned index, id, compute, mem_slices, start_mask, max_count;
};

static const struct gi_profile gi_profiles[] = {
    {0x0, 19, 1, 1, 0x7F, 7}, /* 1g */
    {0x7, 20, 1, 1, 0x7F, 1}, /* 1g+me */
    {0x9, 15, 1, 2, 0x55, 4}, /* 1g, double memory */
    {0x1, 14, 2, 2, 0x15, 3}, /* 2g */
    {0x2, 9, 3, 4, 0x11, 2},  /* 3g */
    {0x3, 5, 4, 4, 0x01, 1},  /* 4g */
    {0x4, 0, 7, 8, 0x01, 1},  /* 7g */
};
#define N_GI_PROFILES (sizeof gi_profiles / sizeof gi_profiles[0])

static const struct gi_profile *gi_profile_by_id(unsigned id)
{
    for (size_t i = 0; i < N_GI_PROFILES; i++)
        if (gi_profiles[i].id == id)
            return &gi_profiles[i];
    return NULL;
}

/* CI profile id = NVML_COMPUTE_INSTANCE_PROFILE_* value = its index. */
static const unsigned ci_slices[FAKE_CI_PROFILE_COUNT] = {1, 2, 3, 4, 7, 8, 6, 1, 7};

/* Section 2.8: which CI sizes a GI of g compute slices accepts. */
static int ci_allowed(unsigned gi_compute, unsigned ci_profile)
{
    if (ci_profile > 4)
        return 0; /* 8, 6, REV1, NVL variants: not on these GPUs */
    unsigned s = ci_slices[ci_profile];
    if (s > gi_compute)
        return 0;
    if (gi_compute == 4 && s == 3)
        return 0;
    return 1;
}

static unsigned gi_used_mask(const struct fgpu *g, const struct fgi *skip)
{
    unsigned mask = 0;
    for (int i = 0; i < FAKE_MIG_MAX_GI; i++) {
        const struct fgi *gi = &g->gi[i];
        if (!gi->used || gi == skip)
            continue;
        const struct gi_profile *p = gi_profile_by_id(gi->profile_id);
        mask |= ((1u << p->mem_slices) - 1) << gi->start;
    }
    return mask;
}

static int gi_count(const struct fgpu *g, int profile_id)
{
    int n = 0;
    for (int i = 0; i < FAKE_MIG_MAX_GI; i++)
        n += g->gi[i].used && (profile_id < 0 || g->gi[i].profile_id == (unsigned)profile_id);
    return n;
}

/* NVML_SUCCESS if an instance of p fits at start now. */
static nvmlReturn_t gi_fits(const struct fgpu *g, const struct gi_profile *p, unsigned start)
{
    if (start >= FAKE_MIG_MEM_SLICES || !(p->start_mask & (1u << start)))
        return NVML_ERROR_INVALID_ARGUMENT;
    unsigned want = ((1u << p->mem_slices) - 1) << start;
    if (want & gi_used_mask(g, NULL))
        return NVML_ERROR_INSUFFICIENT_RESOURCES;
    if (gi_count(g, -1) >= FAKE_MIG_MAX_GI || gi_count(g, (int)p->id) >= (int)p->max_count)
        return NVML_ERROR_INSUFFICIENT_RESOURCES;
    return NVML_SUCCESS;
}

static struct fgi *gi_add(struct fgpu *g, const struct gi_profile *p, unsigned start,
                          unsigned id)
{
    for (int i = 0; i < FAKE_MIG_MAX_GI; i++) {
        struct fgi *gi = &g->gi[i];
        if (gi->used)
            continue;
        memset(gi, 0, sizeof *gi);
        gi->magic = MAGIC_GI;
        gi->used = 1;
        gi->gpu = g;
        gi->id = id ? id : g->next_gi_id;
        if (gi->id >= g->next_gi_id)
            g->next_gi_id = gi->id + 1;
        gi->profile_id = p->id;
        gi->start = start;
        return gi;
    }
    return NULL;
}

static struct fci *ci_add(struct fgi *gi, unsigned profile, const char *uuid)
{
    const struct gi_profile *gp = gi_profile_by_id(gi->profile_id);
    unsigned used = 0;
    unsigned next_id = 0;
    for (int i = 0; i < FAKE_MIG_MAX_CI; i++)
        if (gi->ci[i].used) {
            used += gi->ci[i].size;
            if (gi->ci[i].id >= next_id)
                next_id = gi->ci[i].id + 1;
        }
    if (used + ci_slices[profile] > gp->compute)
        return NULL;
    for (int i = 0; i < FAKE_MIG_MAX_CI; i++) {
        struct fci *ci = &gi->ci[i];
        if (ci->used)
            continue;
        memset(ci, 0, sizeof *ci);
        ci->magic = MAGIC_CI;
        ci->used = 1;
        ci->gi = gi;
        ci->id = next_id;
        ci->profile_id = profile;
        ci->start = used;
        ci->size = ci_slices[profile];
        if (uuid && *uuid)
            snprintf(ci->uuid, sizeof ci->uuid, "%s", uuid);
        else
            snprintf(ci->uuid, sizeof ci->uuid, "MIG-%08x-0000-4000-8000-%012x",
                     0xfa4e0000u | gi->gpu->index, gi->id * 16u + ci->id);
        return ci;
    }
    return NULL;
}

/* ---- fixture ------------------------------------------------------------ */

static long long jnum(json_t *obj, const char *key, long long def)
{
    json_t *v = json_object_get(obj, key);
    if (json_is_integer(v))
        return json_integer_value(v);
    if (json_is_boolean(v))
        return json_is_true(v);
    if (json_is_string(v))
        return strtoll(json_string_value(v), NULL, 0);
    return def;
}

static void jstr(json_t *obj, const char *key, char *dst, size_t len)
{
    const char *s = json_string_value(json_object_get(obj, key));
    snprintf(dst, len, "%s", s ? s : "");
}

static void load_health(struct fgpu *g, json_t *j)
{
    g->lost = (int)jnum(j, "lost", 0);
    g->temp_c = (int)jnum(j, "temperature_c", 35);
    g->clock_reasons = (unsigned long long)jnum(j, "clock_event_reasons", 0);
    g->mem_used_mib = (unsigned long long)jnum(j, "memory_used_mib", 0);
    json_t *pcie = json_object_get(j, "pcie");
    g->pcie_max_gen = (unsigned)jnum(pcie, "max_gen", 4);
    g->pcie_max_width = (unsigned)jnum(pcie, "max_width", 16);
    g->pcie_gen = (unsigned)jnum(pcie, "gen", g->pcie_max_gen);
    g->pcie_width = (unsigned)jnum(pcie, "width", g->pcie_max_width);
    json_t *ecc = json_object_get(j, "ecc");
    g->ecc[NVML_MEMORY_ERROR_TYPE_CORRECTED][NVML_VOLATILE_ECC] =
        (unsigned long long)jnum(ecc, "sbe_volatile", 0);
    g->ecc[NVML_MEMORY_ERROR_TYPE_UNCORRECTED][NVML_VOLATILE_ECC] =
        (unsigned long long)jnum(ecc, "dbe_volatile", 0);
    g->ecc[NVML_MEMORY_ERROR_TYPE_CORRECTED][NVML_AGGREGATE_ECC] =
        (unsigned long long)jnum(ecc, "sbe_aggregate", 0);
    g->ecc[NVML_MEMORY_ERROR_TYPE_UNCORRECTED][NVML_AGGREGATE_ECC] =
        (unsigned long long)jnum(ecc, "dbe_aggregate", 0);
    g->retired_pending = (int)jnum(j, "retired_pages_pending", 0);
    json_t *rr = json_object_get(j, "remapped_rows");
    g->remap_corr = (unsigned)jnum(rr, "correctable", 0);
    g->remap_unc = (unsigned)jnum(rr, "uncorrectable", 0);
    g->remap_pending = (unsigned)jnum(rr, "pending", 0);
    g->remap_failure = (unsigned)jnum(rr, "failure", 0);
    json_t *util = json_object_get(j, "utilization");
    g->util_gpu = (unsigned)jnum(util, "gpu", 0);
    g->util_mem = (unsigned)jnum(util, "memory", 0);
    g->power_mw = (int)jnum(j, "power_mw", -1);
    static const char *const clock_key[FAKE_CLOCK_TYPES] = {"graphics", "sm", "mem", "video"};
    json_t *clocks = json_object_get(j, "clocks_mhz");
    for (int c = 0; c < FAKE_CLOCK_TYPES; c++)
        g->clock_mhz[c] = (int)jnum(clocks, clock_key[c], -1);
    g->proc_stride = jnum(j, "process_info_stride", FAKE_PROC_STRIDE_BYTES) ==
                             FAKE_PROC_STRIDE_535_BYTES
                         ? FAKE_PROC_STRIDE_535_BYTES
                         : FAKE_PROC_STRIDE_BYTES;
    json_t *procs = json_object_get(j, "processes");
    g->nprocs = 0;
    for (size_t i = 0; i < json_array_size(procs) && g->nprocs < FAKE_MAX_PROCS; i++) {
        json_t *jp = json_array_get(procs, i);
        struct fproc *fp = &g->procs[g->nprocs++];
        fp->pid = (unsigned)jnum(jp, "pid", 0);
        fp->used_mib = (unsigned long long)jnum(jp, "used_memory_mib", 0);
        fp->sm_util = (int)jnum(jp, "sm_util", -1);
        fp->mem_util = (int)jnum(jp, "mem_util", 0);
        jstr(jp, "mig_uuid", fp->mig_uuid, sizeof fp->mig_uuid);
    }

    json_t *links = json_object_get(j, "nvlinks");
    g->nlinks = 0;
    for (size_t i = 0; i < json_array_size(links) && g->nlinks < FAKE_MAX_LINKS; i++) {
        json_t *l = json_array_get(links, i);
        struct flink *fl = &g->link[g->nlinks++];
        jstr(l, "remote_pci_bus_id", fl->remote_bus_id, sizeof fl->remote_bus_id);
        const char *t = json_string_value(json_object_get(l, "remote_type"));
        fl->remote_type = t && strcmp(t, "switch") == 0 ? NVML_NVLINK_DEVICE_TYPE_SWITCH
                          : t && strcmp(t, "gpu") != 0  ? NVML_NVLINK_DEVICE_TYPE_UNKNOWN
                                                        : NVML_NVLINK_DEVICE_TYPE_GPU;
        fl->active = (int)jnum(l, "active", 1);
    }

    json_t *xids = json_object_get(j, "xids");
    g->nxids = 0;
    for (size_t i = 0; i < json_array_size(xids) && g->nxids < FAKE_MAX_XIDS; i++) {
        json_t *x = json_array_get(xids, i);
        struct fxid *fx = &g->xids[g->nxids++];
        fx->gi = fx->ci = NVML_INSTANCE_ID_NONE;
        if (json_is_integer(x)) {
            fx->xid = (unsigned)json_integer_value(x);
        } else {
            fx->xid = (unsigned)jnum(x, "xid", 999);
            fx->gi = (unsigned)jnum(x, "gpu_instance_id", NVML_INSTANCE_ID_NONE);
            fx->ci = (unsigned)jnum(x, "compute_instance_id", NVML_INSTANCE_ID_NONE);
        }
    }
}

static void load_mig(struct fgpu *g, json_t *mig)
{
    g->mig_capable = mig != NULL;
    g->next_gi_id = 1;
    if (!mig)
        return;
    g->mig_mode = (unsigned)jnum(mig, "mode", 0);
    g->mig_pending = (unsigned)jnum(mig, "pending", g->mig_mode);
    json_t *insts = json_object_get(mig, "instances");
    for (size_t i = 0; i < json_array_size(insts); i++) {
        json_t *ji = json_array_get(insts, i);
        const struct gi_profile *p = gi_profile_by_id((unsigned)jnum(ji, "profile_id", -1));
        unsigned start = (unsigned)jnum(ji, "start", 0);
        if (!p || gi_fits(g, p, start) != NVML_SUCCESS)
            continue; /* a fixture cannot describe impossible hardware */
        struct fgi *gi = gi_add(g, p, start, (unsigned)jnum(ji, "id", 0));
        json_t *cis = json_object_get(ji, "compute_instances");
        for (size_t c = 0; gi && c < json_array_size(cis); c++) {
            json_t *jc = json_array_get(cis, c);
            unsigned cp = (unsigned)jnum(jc, "profile_id", 0);
            char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
            jstr(jc, "uuid", uuid, sizeof uuid);
            if (cp < FAKE_CI_PROFILE_COUNT && ci_allowed(p->compute, cp))
                ci_add(gi, cp, uuid);
        }
    }
}

/* Reads the fixture; full = also the GPU list and MIG (at init). */
static nvmlReturn_t load_fixture(int full)
{
    const char *path = getenv(FIXTURE_ENV);
    if (!path || !*path)
        return NVML_ERROR_DRIVER_NOT_LOADED;
    struct stat st;
    if (stat(path, &st) != 0)
        return NVML_ERROR_DRIVER_NOT_LOADED;
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    json_t *list = json_object_get(root, "gpus");
    if (!json_is_array(list)) {
        json_decref(root);
        return full ? NVML_ERROR_UNKNOWN : NVML_SUCCESS; /* mid-rewrite: keep the old state */
    }
    fixture_st = st;
    if (full) {
        memset(gpus, 0, sizeof gpus);
        ngpus = 0;
    }
    for (size_t i = 0; i < json_array_size(list) && i < FAKE_MAX_GPUS; i++) {
        json_t *j = json_array_get(list, i);
        struct fgpu *g = &gpus[i];
        if (full) {
            g->magic = MAGIC_GPU;
            g->index = (unsigned)i;
            jstr(j, "uuid", g->uuid, sizeof g->uuid);
            jstr(j, "name", g->name, sizeof g->name);
            jstr(j, "pci_bus_id", g->bus_id, sizeof g->bus_id);
            g->pci_device_id = (unsigned)jnum(j, "pci_device_id", 0);
            g->mem_total_mib = (unsigned long long)jnum(j, "memory_total_mib", 0);
            g->numa_node = (int)jnum(j, "numa_node", 0);
            g->pcie_switch = (int)jnum(j, "pcie_switch", -1);
            ngpus++;
            load_mig(g, json_object_get(j, "mig"));
        }
        if ((int)i < ngpus)
            load_health(g, j);
    }
    json_decref(root);
    return NVML_SUCCESS;
}

/* Every entry point: initialised? then pick up a rewritten fixture. */
static nvmlReturn_t enter(void)
{
    pthread_mutex_lock(&lock);
    if (init_count == 0) {
        pthread_mutex_unlock(&lock);
        return NVML_ERROR_UNINITIALIZED;
    }
    const char *path = getenv(FIXTURE_ENV);
    struct stat st;
    if (path && stat(path, &st) == 0 &&
        (st.st_ino != fixture_st.st_ino || st.st_size != fixture_st.st_size ||
         st.st_mtim.tv_sec != fixture_st.st_mtim.tv_sec ||
         st.st_mtim.tv_nsec != fixture_st.st_mtim.tv_nsec))
        load_fixture(0);
    return NVML_SUCCESS;
}

static nvmlReturn_t leave(nvmlReturn_t rc)
{
    pthread_mutex_unlock(&lock);
    return rc;
}

#define ENTER()                                \
    do {                                       \
        nvmlReturn_t enter_rc_ = enter();      \
        if (enter_rc_ != NVML_SUCCESS)         \
            return enter_rc_;                  \
    } while (0)

static struct fgpu *as_any(nvmlDevice_t d);

/* A GPU marked "lost" in the fixture answers like one that fell off the bus. */
#define ENTER_DEV(dev)                                      \
    do {                                                    \
        ENTER();                                            \
        struct fgpu *lost_ = as_any(dev);                   \
        if (lost_ && lost_->lost)                           \
            return leave(NVML_ERROR_GPU_IS_LOST);           \
    } while (0)

static struct fgpu *as_gpu(nvmlDevice_t d)
{
    struct fgpu *g = (struct fgpu *)(void *)d;
    return g && g->magic == MAGIC_GPU ? g : NULL;
}

static struct fci *as_mig(nvmlDevice_t d)
{
    struct fci *c = (struct fci *)(void *)d;
    return c && c->magic == MAGIC_CI && c->used ? c : NULL;
}

/* A GPU handle, or the parent of a MIG device handle. */
static struct fgpu *as_any(nvmlDevice_t d)
{
    struct fci *c = as_mig(d);
    return c ? c->gi->gpu : as_gpu(d);
}

static struct fgi *as_gi(nvmlGpuInstance_t h)
{
    struct fgi *gi = (struct fgi *)(void *)h;
    return gi && gi->magic == MAGIC_GI && gi->used ? gi : NULL;
}

static struct fci *as_ci(nvmlComputeInstance_t h)
{
    struct fci *ci = (struct fci *)(void *)h;
    return ci && ci->magic == MAGIC_CI && ci->used ? ci : NULL;
}

static int mig_active(const struct fgpu *g)
{
    return g->mig_mode == NVML_DEVICE_MIG_ENABLE;
}

/* ---- init, errors ------------------------------------------------------- */

EXPORT nvmlReturn_t nvmlInit_v2(void)
{
    pthread_mutex_lock(&lock);
    nvmlReturn_t rc = NVML_SUCCESS;
    if (init_count == 0) {
        rc = load_fixture(1);
        if (rc == NVML_SUCCESS)
            memset(sets, 0, sizeof sets);
    }
    if (rc == NVML_SUCCESS)
        init_count++;
    return leave(rc);
}

EXPORT nvmlReturn_t nvmlInit(void) { return nvmlInit_v2(); }

EXPORT nvmlReturn_t nvmlShutdown(void)
{
    pthread_mutex_lock(&lock);
    if (init_count == 0)
        return leave(NVML_ERROR_UNINITIALIZED);
    init_count--;
    return leave(NVML_SUCCESS);
}

EXPORT const char *nvmlErrorString(nvmlReturn_t rc)
{
    switch (rc) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NO_PERMISSION: return "Insufficient Permissions";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_TIMEOUT: return "Timeout";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    case NVML_ERROR_IN_USE: return "In use by another client";
    case NVML_ERROR_INSUFFICIENT_RESOURCES: return "Insufficient resources";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "Argument version mismatch";
    default: return "Unknown Error";
    }
}

EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
    ENTER();
    if (!version)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    if (length < 16)
        return leave(NVML_ERROR_INSUFFICIENT_SIZE);
    snprintf(version, length, "%s", "550.54.15-fake");
    return leave(NVML_SUCCESS);
}

/* ---- enumeration, identity ---------------------------------------------- */

EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count)
{
    ENTER();
    if (!count)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    *count = (unsigned)ngpus;
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetCount(unsigned int *count) { return nvmlDeviceGetCount_v2(count); }

EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
    ENTER();
    if (!device || index >= (unsigned)ngpus)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    *device = (nvmlDevice_t)(void *)&gpus[index];
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device)
{
    return nvmlDeviceGetHandleByIndex_v2(index, device);
}

static nvmlReturn_t copy_out(char *dst, unsigned int length, const char *src)
{
    if (!dst)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(src) + 1 > length)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(dst, src, strlen(src) + 1);
    return NVML_SUCCESS;
}

/* Memory of a MIG device: its GI's share of the 8 memory slices. */
static unsigned long long mig_mem_mib(const struct fci *c)
{
    const struct gi_profile *p = gi_profile_by_id(c->gi->profile_id);
    return c->gi->gpu->mem_total_mib * p->mem_slices / FAKE_MIG_MEM_SLICES;
}

EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t dev, char *name, unsigned int length)
{
    ENTER_DEV(dev);
    struct fci *c = as_mig(dev);
    struct fgpu *g = as_any(dev);
    if (!g)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    if (!c)
        return leave(copy_out(name, length, g->name));
    /* "NVIDIA A100-SXM4-40GB MIG 3g.20gb", rounding as nvidia-smi does */
    const struct gi_profile *p = gi_profile_by_id(c->gi->profile_id);
    char buf[NVML_DEVICE_NAME_V2_BUFFER_SIZE * 2];
    unsigned long long gb = (mig_mem_mib(c) + 512) / 1024;
    if (c->size == p->compute)
        snprintf(buf, sizeof buf, "%s MIG %ug.%llugb", g->name, p->compute, gb);
    else
        snprintf(buf, sizeof buf, "%s MIG %uc.%ug.%llugb", g->name, c->size, p->compute, gb);
    return leave(copy_out(name, length, buf));
}

EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t dev, char *uuid, unsigned int length)
{
    ENTER_DEV(dev);
    struct fci *c = as_mig(dev);
    struct fgpu *g = as_any(dev);
    if (!g)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    return leave(copy_out(uuid, length, c ? c->uuid : g->uuid));
}

static void fill_pci(nvmlPciInfo_t *pci, const char *bus_id, unsigned device_id)
{
    memset(pci, 0, sizeof *pci);
    snprintf(pci->busId, sizeof pci->busId, "%s", bus_id);
    unsigned dom = 0, bus = 0, devno = 0;
    if (sscanf(bus_id, "%x:%x:%x", &dom, &bus, &devno) == 3)
        snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%04X:%02X:%02X.0", dom & 0xFFFF,
                 bus & 0xFF, devno & 0xFF);
    pci->domain = dom;
    pci->bus = bus;
    pci->device = devno;
    pci->pciDeviceId = device_id;
}

EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t dev, nvmlPciInfo_t *pci)
{
    ENTER_DEV(dev);
    struct fgpu *g = as_any(dev);
    if (!g || !pci)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    fill_pci(pci, g->bus_id, g->pci_device_id);
    return leave(NVML_SUCCESS);
}

/* The CI a process runs on: its MIG device UUID names it. */
static const struct fci *proc_ci(const struct fgpu *g, const struct fproc *p)
{
    for (int i = 0; p->mig_uuid[0] && i < FAKE_MIG_MAX_GI; i++)
        for (int c = 0; g->gi[i].used && c < FAKE_MIG_MAX_CI; c++)
            if (g->gi[i].ci[c].used && strcmp(g->gi[i].ci[c].uuid, p->mig_uuid) == 0)
                return &g->gi[i].ci[c];
    return NULL;
}

/* A MIG device's memory is its GI's, which all the GI's CIs share. */
static unsigned long long gi_procs_mib(const struct fgi *gi)
{
    unsigned long long mib = 0;
    for (int i = 0; i < gi->gpu->nprocs; i++) {
        const struct fci *c = proc_ci(gi->gpu, &gi->gpu->procs[i]);
        if (c && c->gi == gi)
            mib += gi->gpu->procs[i].used_mib;
    }
    return mib;
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t dev, nvmlMemory_t *mem)
{
    ENTER_DEV(dev);
    struct fci *c = as_mig(dev);
    struct fgpu *g = as_any(dev);
    if (!g || !mem)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    unsigned long long total = c ? mig_mem_mib(c) : g->mem_total_mib;
    unsigned long long used = c ? gi_procs_mib(c->gi) : g->mem_used_mib;
    mem->total = total * BYTES_PER_MIB;
    mem->used = used * BYTES_PER_MIB;
    mem->free = mem->total - mem->used;
    return leave(NVML_SUCCESS);
}

/* ---- utilisation, thermals, clocks, PCIe -------------------------------- */

EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t dev, nvmlUtilization_t *u)
{
    ENTER_DEV(dev);
    struct fgpu *g = as_gpu(dev);
    if (!g || !u)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    if (mig_active(g)) /* gpu-facts.md 1.7 */
        return leave(NVML_ERROR_NOT_SUPPORTED);
    u->gpu = g->util_gpu;
    u->memory = g->util_mem;
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t dev, nvmlTemperatureSensors_t sensor,
                                             unsigned int *temp)
{
    ENTER_DEV(dev);
    struct fgpu *g = as_gpu(dev);
    if (!g || !temp || sensor != NVML_TEMPERATURE_GPU)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    *temp = (unsigned)g->temp_c;
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetTemperatureV(nvmlDevice_t dev, nvmlTemperature_t *t)
{
    ENTER_DEV(dev);
    struct fgpu *g = as_gpu(dev);
    if (!g || !t || t->sensorType != NVML_TEMPERATURE_GPU)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    if (t->version != nvmlTemperature_v1)
        return leave(NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    t->temperature = g->temp_c;
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t dev,
                                                           unsigned long long *reasons)
{
    ENTER_DEV(dev);
    struct fgpu *g = as_gpu(dev);
    if (!g || !reasons)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    *reasons = g->clock_reasons;
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t dev,
                                                              unsigned long long *reasons)
{
    return nvmlDeviceGetCurrentClocksEventReasons(dev, reasons);
}

static nvmlReturn_t pcie_get(nvmlDevice_t dev, unsigned int *out, int which)
{
    ENTER_DEV(dev);
    struct fgpu *g = as_gpu(dev);
    if (!g || !out)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    const unsigned v[] = {g->pcie_gen, g->pcie_width, g->pcie_max_gen, g->pcie_max_width};
    *out = v[which];
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetCurrPcieLinkGeneration(nvmlDevice_t d, unsigned int *v)
{
    return pcie_get(d, v, 0);
}
EXPORT nvmlReturn_t nvmlDeviceGetCurrPcieLinkWidth(nvmlDevice_t d, unsigned int *v)
{
    return pcie_get(d, v, 1);
}
EXPORT nvmlReturn_t nvmlDeviceGetMaxPcieLinkGeneration(nvmlDevice_t d, unsigned int *v)
{
    return pcie_get(d, v, 2);
}
EXPORT nvmlReturn_t nvmlDeviceGetMaxPcieLinkWidth(nvmlDevice_t d, unsigned int *v)
{
    return pcie_get(d, v, 3);
}

/* ---- power, clocks, processes ------------------------------------------- */

EXPORT nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t dev, unsigned int *mw)
{
    ENTER_DEV(dev);
    struct fgpu *g = as_gpu(dev);
    if (!g || !mw)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    if (g->power_mw < 0)
        return leave(NVML_ERROR_NOT_SUPPORTED);
    *mw = (unsigned)g->power_mw;
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t dev, nvmlClockType_t type,
                                           unsigned int *mhz)
{
    ENTER_DEV(dev);
    struct fgpu *g = as_gpu(dev);
    if (!g || !mhz || (unsigned)type >= FAKE_CLOCK_TYPES)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    if (g->clock_mhz[type] < 0)
        return leave(NVML_ERROR_NOT_SUPPORTED);
    *mhz = (unsigned)g->clock_mhz[type];
    return leave(NVML_SUCCESS);
}

/* Processes of a GPU handle (all of them; on a MIG GPU with their instance
 * ids, as a privileged caller sees them) or of one MIG device handle. Entries
 * are proc_stride bytes apart: 32 reproduces the 535.43-535.86 drivers. */
EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t dev,
                                                            unsigned int *count,
                                                            nvmlProcessInfo_t *infos)
{
    ENTER_DEV(dev);
    struct fci *mig = as_mig(dev);
    struct fgpu *g = as_any(dev);
    if (!g || !count)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    unsigned n = 0;
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1 && (!infos || *count < n)) {
            *count = n;
            return leave(n == 0 ? NVML_SUCCESS : NVML_ERROR_INSUFFICIENT_SIZE);
        }
        n = 0;
        for (int i = 0; i < g->nprocs; i++) {
            const struct fproc *p = &g->procs[i];
            const struct fci *c = proc_ci(g, p);
            if (mig ? c != mig : (mig_active(g) && !c))
                continue; /* not on this MIG device; or a GPU's process on a MIG GPU */
            if (pass == 1) {
                unsigned char *at = (unsigned char *)infos + (size_t)n * g->proc_stride;
                nvmlProcessInfo_t e = {p->pid, p->used_mib * BYTES_PER_MIB,
                                       c ? c->gi->id : NVML_INSTANCE_ID_NONE,
                                       c ? c->id : NVML_INSTANCE_ID_NONE};
                memset(at, 0, g->proc_stride);
                memcpy(at, &e, sizeof e);
            }
            n++;
        }
    }
    *count = n;
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t dev,
                                                            unsigned int *count,
                                                            nvmlProcessInfo_t *infos)
{
    return nvmlDeviceGetComputeRunningProcesses_v3(dev, count, infos);
}

/* One sample per process that has "sm_util", stamped now. NOT_FOUND when no
 * process has one; NOT_SUPPORTED on MIG GPUs and MIG devices (1.7). */
EXPORT nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t dev,
                                                    nvmlProcessUtilizationSample_t *samples,
                                                    unsigned int *count,
                                                    unsigned long long last_seen_us)
{
    ENTER_DEV(dev);
    struct fgpu *g = as_gpu(dev);
    if (as_mig(dev))
        return leave(NVML_ERROR_NOT_SUPPORTED);
    if (!g || !count)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    if (mig_active(g))
        return leave(NVML_ERROR_NOT_SUPPORTED);
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    unsigned long long stamp_us =
        (unsigned long long)now.tv_sec * USEC_PER_SEC + (unsigned long long)now.tv_nsec / 1000;
    unsigned n = 0;
    for (int i = 0; i < g->nprocs; i++)
        n += g->procs[i].sm_util >= 0 && stamp_us > last_seen_us;
    if (n == 0)
        return leave(NVML_ERROR_NOT_FOUND);
    if (!samples || *count < n) {
        *count = n;
        return leave(NVML_ERROR_INSUFFICIENT_SIZE);
    }
    n = 0;
    for (int i = 0; i < g->nprocs; i++) {
        const struct fproc *p = &g->procs[i];
        if (p->sm_util < 0 || stamp_us <= last_seen_us)
            continue;
        samples[n++] = (nvmlProcessUtilizationSample_t){
            p->pid, stamp_us, (unsigned)p->sm_util, (unsigned)p->mem_util, 0, 0};
    }
    *count = n;
    return leave(NVML_SUCCESS);
}

/* ---- ECC, retired pages, row remapping ---------------------------------- */

EXPORT nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t dev, nvmlMemoryErrorType_t type,
                                                nvmlEccCounterType_t counter,
                                                unsigned long long *count)
{
    ENTER_DEV(dev);
    struct fgpu *g = as_gpu(dev);
    if (!g || !count || (unsigned)type > 1 || (unsigned)counter > 1)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    *count = g->ecc[type][counter];
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t dev,
                                                           nvmlEnableState_t *pending)
{
    ENTER_DEV(dev);
    struct fgpu *g = as_gpu(dev);
    if (!g || !pending)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    *pending = g->retired_pending ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t dev, unsigned int *corr,
                                              unsigned int *unc, unsigned int *pending,
                                              unsigned int *failure)
{
    ENTER_DEV(dev);
    struct fgpu *g = as_gpu(dev);
    if (!g || !corr || !unc || !pending || !failure)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    if (mig_active(g) && gi_count(g, -1) > 0) /* gpu-facts.md 1.7 */
        return leave(NVML_ERROR_NOT_SUPPORTED);
    *corr = g->remap_corr;
    *unc = g->remap_unc;
    *pending = g->remap_pending;
    *failure = g->remap_failure;
    return leave(NVML_SUCCESS);
}

/* ---- NVLink, topology --------------------------------------------------- */

static nvmlReturn_t link_of(nvmlDevice_t dev, unsigned link, struct flink **out)
{
    struct fgpu *g = as_gpu(dev);
    if (!g)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (g->nlinks == 0)
        return NVML_ERROR_NOT_SUPPORTED;
    if (link >= (unsigned)g->nlinks)
        return NVML_ERROR_INVALID_ARGUMENT;
    *out = &g->link[link];
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t dev, unsigned int link,
                                             nvmlEnableState_t *active)
{
    ENTER_DEV(dev);
    struct flink *l = NULL;
    nvmlReturn_t rc = link_of(dev, link, &l);
    if (rc == NVML_SUCCESS && !active)
        rc = NVML_ERROR_INVALID_ARGUMENT;
    if (rc == NVML_SUCCESS)
        *active = l->active ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
    return leave(rc);
}

EXPORT nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t dev, unsigned int link,
                                                        nvmlPciInfo_t *pci)
{
    ENTER_DEV(dev);
    struct flink *l = NULL;
    nvmlReturn_t rc = link_of(dev, link, &l);
    if (rc == NVML_SUCCESS && !pci)
        rc = NVML_ERROR_INVALID_ARGUMENT;
    if (rc == NVML_SUCCESS)
        fill_pci(pci, l->remote_bus_id, 0);
    return leave(rc);
}

EXPORT nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(nvmlDevice_t dev, unsigned int link,
                                                        nvmlIntNvLinkDeviceType_t *type)
{
    ENTER_DEV(dev);
    struct flink *l = NULL;
    nvmlReturn_t rc = link_of(dev, link, &l);
    if (rc == NVML_SUCCESS && !type)
        rc = NVML_ERROR_INVALID_ARGUMENT;
    if (rc == NVML_SUCCESS)
        *type = (nvmlIntNvLinkDeviceType_t)l->remote_type;
    return leave(rc);
}

EXPORT nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t a, nvmlDevice_t b,
                                                        nvmlGpuTopologyLevel_t *level)
{
    ENTER();
    struct fgpu *ga = as_gpu(a), *gb = as_gpu(b);
    if (!ga || !gb || !level)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    if (ga->lost || gb->lost)
        return leave(NVML_ERROR_GPU_IS_LOST);
    if (ga == gb)
        *level = NVML_TOPOLOGY_INTERNAL;
    else if (ga->pcie_switch >= 0 && ga->pcie_switch == gb->pcie_switch)
        *level = NVML_TOPOLOGY_SINGLE;
    else if (ga->numa_node == gb->numa_node)
        *level = NVML_TOPOLOGY_NODE;
    else
        *level = NVML_TOPOLOGY_SYSTEM;
    return leave(NVML_SUCCESS);
}

/* ---- events ------------------------------------------------------------- */

#define FAKE_SUPPORTED_EVENTS \
    (nvmlEventTypeSingleBitEccError | nvmlEventTypeDoubleBitEccError | nvmlEventTypeXidCriticalError)

EXPORT nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set)
{
    ENTER();
    if (!set)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    for (int i = 0; i < FAKE_MAX_SETS; i++)
        if (!sets[i].used) {
            memset(&sets[i], 0, sizeof sets[i]);
            sets[i].used = 1;
            *set = (nvmlEventSet_t)(void *)&sets[i];
            return leave(NVML_SUCCESS);
        }
    return leave(NVML_ERROR_MEMORY);
}

static struct fset *as_set(nvmlEventSet_t s)
{
    struct fset *f = (struct fset *)(void *)s;
    return f >= sets && f < sets + FAKE_MAX_SETS && f->used ? f : NULL;
}

EXPORT nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t dev, unsigned long long *types)
{
    ENTER_DEV(dev);
    if (!as_gpu(dev) || !types)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    *types = FAKE_SUPPORTED_EVENTS;
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t dev, unsigned long long types,
                                             nvmlEventSet_t set)
{
    ENTER_DEV(dev);
    struct fgpu *g = as_gpu(dev); /* MIG device handles: not supported (1.4) */
    struct fset *s = as_set(set);
    if (as_mig(dev))
        return leave(NVML_ERROR_NOT_SUPPORTED);
    if (!g || !s)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    if (types & ~FAKE_SUPPORTED_EVENTS)
        return leave(NVML_ERROR_NOT_SUPPORTED);
    if (!s->mask[g->index])
        s->cursor[g->index] = g->nxids; /* only what happens from now on */
    s->mask[g->index] |= types;
    return leave(NVML_SUCCESS);
}

static int take_event(struct fset *s, nvmlEventData_t *data)
{
    for (int i = 0; i < ngpus; i++) {
        struct fgpu *g = &gpus[i];
        if (!(s->mask[i] & nvmlEventTypeXidCriticalError))
            continue;
        if (s->cursor[i] > g->nxids) /* the history was rewritten shorter */
            s->cursor[i] = g->nxids;
        if (s->cursor[i] < g->nxids) {
            const struct fxid *x = &g->xids[s->cursor[i]++];
            memset(data, 0, sizeof *data);
            data->device = (nvmlDevice_t)(void *)g;
            data->eventType = nvmlEventTypeXidCriticalError;
            data->eventData = x->xid;
            data->gpuInstanceId = x->gi;
            data->computeInstanceId = x->ci;
            return 1;
        }
    }
    return 0;
}

EXPORT nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data,
                                        unsigned int timeout_ms)
{
    unsigned waited_ms = 0;
    for (;;) {
        ENTER();
        struct fset *s = as_set(set);
        if (!s || !data)
            return leave(NVML_ERROR_INVALID_ARGUMENT);
        if (take_event(s, data))
            return leave(NVML_SUCCESS);
        leave(NVML_SUCCESS);
        if (waited_ms >= timeout_ms)
            return NVML_ERROR_TIMEOUT;
        struct timespec ts = {0, FAKE_WAIT_POLL_MS * 1000000L};
        nanosleep(&ts, NULL);
        waited_ms += FAKE_WAIT_POLL_MS;
    }
}

EXPORT nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set)
{
    ENTER();
    struct fset *s = as_set(set);
    if (!s)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    s->used = 0;
    return leave(NVML_SUCCESS);
}

/* ---- MIG ---------------------------------------------------------------- */

EXPORT nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t dev, unsigned int *current,
                                         unsigned int *pending)
{
    ENTER_DEV(dev);
    struct fgpu *g = as_gpu(dev);
    if (!g || !current || !pending)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    if (!g->mig_capable)
        return leave(NVML_ERROR_NOT_SUPPORTED);
    *current = g->mig_mode;
    *pending = g->mig_pending;
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfo(nvmlDevice_t dev, unsigned int index,
                                                        nvmlGpuInstanceProfileInfo_t *info)
{
    ENTER_DEV(dev);
    struct fgpu *g = as_gpu(dev);
    if (!g || !info || index >= FAKE_GI_PROFILE_COUNT)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    if (!g->mig_capable)
        return leave(NVML_ERROR_NOT_SUPPORTED);
    for (size_t i = 0; i < N_GI_PROFILES; i++) {
        const struct gi_profile *p = &gi_profiles[i];
        if (p->index != index)
            continue;
        memset(info, 0, sizeof *info);
        info->id = p->id;
        info->sliceCount = p->compute;
        info->instanceCount = p->max_count;
        info->copyEngineCount = p->compute;
        info->memorySizeMB = g->mem_total_mib * p->mem_slices / FAKE_MIG_MEM_SLICES;
        return leave(NVML_SUCCESS);
    }
    return leave(NVML_ERROR_NOT_SUPPORTED);
}

EXPORT nvmlReturn_t nvmlDeviceGetGpuInstancePossiblePlacements_v2(
    nvmlDevice_t dev, unsigned int profile_id, nvmlGpuInstancePlacement_t *placements,
    unsigned int *count)
{
    ENTER();
    struct fgpu *g = as_gpu(dev);
    const struct gi_profile *p = gi_profile_by_id(profile_id);
    if (!g || !count || !p)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    if (!g->mig_capable)
        return leave(NVML_ERROR_NOT_SUPPORTED);
    unsigned n = 0;
    for (unsigned s = 0; s < FAKE_MIG_MEM_SLICES; s++)
        if (p->start_mask & (1u << s)) {
            if (placements && n < *count)
                placements[n] = (nvmlGpuInstancePlacement_t){s, p->mem_slices};
            n++;
        }
    nvmlReturn_t rc = placements && *count < n ? NVML_ERROR_INSUFFICIENT_SIZE : NVML_SUCCESS;
    *count = n;
    return leave(rc);
}

EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceRemainingCapacity(nvmlDevice_t dev,
                                                              unsigned int profile_id,
                                                              unsigned int *count)
{
    ENTER_DEV(dev);
    struct fgpu *g = as_gpu(dev);
    const struct gi_profile *p = gi_profile_by_id(profile_id);
    if (!g || !count || !p)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    if (!mig_active(g))
        return leave(NVML_ERROR_INVALID_STATE);
    /* greedy count of further instances, as the driver reports it */
    struct fgi saved[FAKE_MIG_MAX_GI];
    memcpy(saved, g->gi, sizeof saved);
    unsigned saved_next = g->next_gi_id, n = 0;
    for (unsigned s = 0; s < FAKE_MIG_MEM_SLICES; s++)
        if (gi_fits(g, p, s) == NVML_SUCCESS && gi_add(g, p, s, 0))
            n++;
    memcpy(g->gi, saved, sizeof saved);
    g->next_gi_id = saved_next;
    *count = n;
    return leave(NVML_SUCCESS);
}

static nvmlReturn_t create_gi(struct fgpu *g, const struct gi_profile *p, unsigned start,
                              nvmlGpuInstance_t *out)
{
    if (!mig_active(g))
        return NVML_ERROR_INVALID_STATE;
    nvmlReturn_t rc = gi_fits(g, p, start);
    if (rc != NVML_SUCCESS)
        return rc;
    struct fgi *gi = gi_add(g, p, start, 0);
    if (!gi)
        return NVML_ERROR_INSUFFICIENT_RESOURCES;
    *out = (nvmlGpuInstance_t)(void *)gi;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceCreateGpuInstanceWithPlacement(
    nvmlDevice_t dev, unsigned int profile_id, const nvmlGpuInstancePlacement_t *placement,
    nvmlGpuInstance_t *gi)
{
    ENTER();
    struct fgpu *g = as_gpu(dev);
    const struct gi_profile *p = gi_profile_by_id(profile_id);
    if (!g || !p || !placement || !gi || placement->size != p->mem_slices)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    return leave(create_gi(g, p, placement->start, gi));
}

/* The driver picks the lowest free start, which is why creation order
 * matters (gpu-facts.md 2.3: "-cgi 19,19,14,9" fails, "9,19,14,19" works). */
EXPORT nvmlReturn_t nvmlDeviceCreateGpuInstance(nvmlDevice_t dev, unsigned int profile_id,
                                                nvmlGpuInstance_t *gi)
{
    ENTER_DEV(dev);
    struct fgpu *g = as_gpu(dev);
    const struct gi_profile *p = gi_profile_by_id(profile_id);
    if (!g || !p || !gi)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    nvmlReturn_t rc = NVML_ERROR_INSUFFICIENT_RESOURCES;
    for (unsigned s = 0; s < FAKE_MIG_MEM_SLICES && rc != NVML_SUCCESS; s++)
        if (p->start_mask & (1u << s)) {
            nvmlReturn_t r = create_gi(g, p, s, gi);
            if (r == NVML_SUCCESS || r == NVML_ERROR_INVALID_STATE)
                rc = r;
        }
    return leave(rc);
}

EXPORT nvmlReturn_t nvmlGpuInstanceDestroy(nvmlGpuInstance_t h)
{
    ENTER();
    struct fgi *gi = as_gi(h);
    if (!gi)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    for (int i = 0; i < FAKE_MIG_MAX_CI; i++)
        if (gi->ci[i].used)
            return leave(NVML_ERROR_IN_USE);
    gi->used = 0;
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetGpuInstances(nvmlDevice_t dev, unsigned int profile_id,
                                              nvmlGpuInstance_t *out, unsigned int *count)
{
    ENTER_DEV(dev);
    struct fgpu *g = as_gpu(dev);
    if (!g || !out || !count || !gi_profile_by_id(profile_id))
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    if (!g->mig_capable)
        return leave(NVML_ERROR_NOT_SUPPORTED);
    unsigned n = 0;
    for (int i = 0; i < FAKE_MIG_MAX_GI; i++)
        if (g->gi[i].used && g->gi[i].profile_id == profile_id) {
            if (n >= *count)
                return leave(NVML_ERROR_INSUFFICIENT_SIZE);
            out[n++] = (nvmlGpuInstance_t)(void *)&g->gi[i];
        }
    *count = n;
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlGpuInstanceGetInfo(nvmlGpuInstance_t h, nvmlGpuInstanceInfo_t *info)
{
    ENTER();
    struct fgi *gi = as_gi(h);
    if (!gi || !info)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    info->device = (nvmlDevice_t)(void *)gi->gpu;
    info->id = gi->id;
    info->profileId = gi->profile_id;
    info->placement.start = gi->start;
    info->placement.size = gi_profile_by_id(gi->profile_id)->mem_slices;
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlGpuInstanceGetComputeInstanceProfileInfo(
    nvmlGpuInstance_t h, unsigned int profile, unsigned int eng_profile,
    nvmlComputeInstanceProfileInfo_t *info)
{
    ENTER();
    struct fgi *gi = as_gi(h);
    if (!gi || !info || profile >= FAKE_CI_PROFILE_COUNT ||
        eng_profile != NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    const struct gi_profile *gp = gi_profile_by_id(gi->profile_id);
    if (!ci_allowed(gp->compute, profile))
        return leave(NVML_ERROR_NOT_SUPPORTED);
    memset(info, 0, sizeof *info);
    info->id = profile;
    info->sliceCount = ci_slices[profile];
    info->instanceCount = gp->compute / ci_slices[profile];
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlGpuInstanceCreateComputeInstance(nvmlGpuInstance_t h,
                                                         unsigned int profile,
                                                         nvmlComputeInstance_t *out)
{
    ENTER();
    struct fgi *gi = as_gi(h);
    if (!gi || !out || profile >= FAKE_CI_PROFILE_COUNT)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    if (!ci_allowed(gi_profile_by_id(gi->profile_id)->compute, profile))
        return leave(NVML_ERROR_NOT_SUPPORTED);
    struct fci *ci = ci_add(gi, profile, NULL);
    if (!ci)
        return leave(NVML_ERROR_INSUFFICIENT_RESOURCES);
    *out = (nvmlComputeInstance_t)(void *)ci;
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlComputeInstanceDestroy(nvmlComputeInstance_t h)
{
    ENTER();
    struct fci *ci = as_ci(h);
    if (!ci)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    ci->used = 0;
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlGpuInstanceGetComputeInstances(nvmlGpuInstance_t h,
                                                       unsigned int profile,
                                                       nvmlComputeInstance_t *out,
                                                       unsigned int *count)
{
    ENTER();
    struct fgi *gi = as_gi(h);
    if (!gi || !out || !count || profile >= FAKE_CI_PROFILE_COUNT)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    unsigned n = 0;
    for (int i = 0; i < FAKE_MIG_MAX_CI; i++)
        if (gi->ci[i].used && gi->ci[i].profile_id == profile) {
            if (n >= *count)
                return leave(NVML_ERROR_INSUFFICIENT_SIZE);
            out[n++] = (nvmlComputeInstance_t)(void *)&gi->ci[i];
        }
    *count = n;
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlComputeInstanceGetInfo_v2(nvmlComputeInstance_t h,
                                                  nvmlComputeInstanceInfo_t *info)
{
    ENTER();
    struct fci *ci = as_ci(h);
    if (!ci || !info)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    info->device = (nvmlDevice_t)(void *)ci->gi->gpu;
    info->gpuInstance = (nvmlGpuInstance_t)(void *)ci->gi;
    info->id = ci->id;
    info->profileId = ci->profile_id;
    info->placement.start = ci->start;
    info->placement.size = ci->size;
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t dev, unsigned int *count)
{
    ENTER_DEV(dev);
    struct fgpu *g = as_gpu(dev);
    if (!g || !count)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    *count = mig_active(g) ? FAKE_MIG_MAX_GI : 0;
    return leave(NVML_SUCCESS);
}

/* MIG device i = the i-th compute instance in GI-slot order; NOT_FOUND for an
 * index without one, as on real drivers. */
EXPORT nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t dev, unsigned int index,
                                                        nvmlDevice_t *mig)
{
    ENTER_DEV(dev);
    struct fgpu *g = as_gpu(dev);
    if (!g || !mig || index >= FAKE_MIG_MAX_GI)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    unsigned n = 0;
    for (int i = 0; i < FAKE_MIG_MAX_GI; i++)
        for (int c = 0; g->gi[i].used && c < FAKE_MIG_MAX_CI; c++)
            if (g->gi[i].ci[c].used && n++ == index) {
                *mig = (nvmlDevice_t)(void *)&g->gi[i].ci[c];
                return leave(NVML_SUCCESS);
            }
    return leave(NVML_ERROR_NOT_FOUND);
}

EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t dev, unsigned int *id)
{
    ENTER_DEV(dev);
    struct fci *c = as_mig(dev);
    if (!id || !as_any(dev))
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    if (!c)
        return leave(NVML_ERROR_NOT_SUPPORTED);
    *id = c->gi->id;
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t dev, unsigned int *id)
{
    ENTER_DEV(dev);
    struct fci *c = as_mig(dev);
    if (!id || !as_any(dev))
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    if (!c)
        return leave(NVML_ERROR_NOT_SUPPORTED);
    *id = c->id;
    return leave(NVML_SUCCESS);
}
