/*
 * nvml.c - NVML memory queries seen from a tenant's process report the quota:
 * nvmlDeviceGetMemoryInfo(_v2) on a GPU the process's CUDA sees with a quota
 * answers total = the quota, used = what the tenant holds on it (the ledger),
 * free = the rest (or what the device has left, if less), like cuMemGetInfo.
 *
 * The real NVML functions are found where the application found them: the
 * handle it passed to dlsym (procaddr.c routes nvml* lookups here), else the
 * next library after this one (a program linked against libnvidia-ml). A GPU
 * is matched by UUID: NVML's "GPU-..." string against cuDeviceGetUuid of each
 * CUDA ordinal, so CUDA_VISIBLE_DEVICES renumbering cannot mismatch them; MIG
 * device handles ("MIG-...") and GPUs without a quota pass through.
 */
#define _GNU_SOURCE
#include "shim/shim.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "agent/nvml_types.h"

#define UUID_TEXT_MAX 96

typedef nvmlReturn_t (*mem_fn)(nvmlDevice_t, nvmlMemory_t *);
typedef nvmlReturn_t (*mem2_fn)(nvmlDevice_t, nvmlMemory_v2_t *);
typedef nvmlReturn_t (*uuid_fn)(nvmlDevice_t, char *, unsigned int);

#if defined(TS_NVML_NVIDIA_HEADERS) /* the conformance build (tests/conformance) */
_Static_assert(__builtin_types_compatible_p(mem_fn, __typeof__(&nvmlDeviceGetMemoryInfo)),
               "nvmlDeviceGetMemoryInfo differs from nvml.h");
_Static_assert(__builtin_types_compatible_p(mem2_fn, __typeof__(&nvmlDeviceGetMemoryInfo_v2)),
               "nvmlDeviceGetMemoryInfo_v2 differs from nvml.h");
_Static_assert(__builtin_types_compatible_p(uuid_fn, __typeof__(&nvmlDeviceGetUUID)),
               "nvmlDeviceGetUUID differs from nvml.h");
#endif

static struct {
    mem_fn mem;
    mem2_fn mem2;
    uuid_fn uuid;
} nv;

void *shim_real_dlsym(void *handle, const char *name); /* procaddr.c */
void *shim_nvml_wrapper(void *handle, const char *name);
TS_SHIM_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory);
TS_SHIM_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device,
                                                       nvmlMemory_v2_t *memory);

static void learn_from(void *handle)
{
    void *p;
    if (!nv.mem && (p = shim_real_dlsym(handle, "nvmlDeviceGetMemoryInfo")))
        memcpy(&nv.mem, &p, sizeof p);
    if (!nv.mem2 && (p = shim_real_dlsym(handle, "nvmlDeviceGetMemoryInfo_v2")))
        memcpy(&nv.mem2, &p, sizeof p);
    if (!nv.uuid && (p = shim_real_dlsym(handle, "nvmlDeviceGetUUID")))
        memcpy(&nv.uuid, &p, sizeof p);
}

/* procaddr.c: dlsym(handle, name) for an nvml* name; our wrapper or NULL. */
void *shim_nvml_wrapper(void *handle, const char *name)
{
    int v1 = strcmp(name, "nvmlDeviceGetMemoryInfo") == 0;
    int v2 = strcmp(name, "nvmlDeviceGetMemoryInfo_v2") == 0;
    if (!v1 && !v2)
        return NULL;
    learn_from(handle);
    if (v1 && nv.mem)
        return TS_SHIM_FN(nvmlDeviceGetMemoryInfo);
    if (v2 && nv.mem2)
        return TS_SHIM_FN(nvmlDeviceGetMemoryInfo_v2);
    return NULL;
}

/* "GPU-3f1a2b00-6b1f-..." -> 16 bytes; 0 on success. */
static int parse_uuid(const char *s, unsigned char out[TS_LEDGER_UUID_BYTES])
{
    if (strncmp(s, "GPU-", 4) != 0)
        return -1;
    s += 4;
    for (int k = 0; k < TS_LEDGER_UUID_BYTES; k++) {
        while (*s == '-')
            s++;
        unsigned v;
        if (sscanf(s, "%2x", &v) != 1)
            return -1;
        out[k] = (unsigned char)v;
        s += 2;
    }
    return 0;
}

/* The quota'd device behind an NVML handle, or NULL. */
static const struct ts_shim_dev *quota_dev_of(nvmlDevice_t dev)
{
    char text[UUID_TEXT_MAX];
    unsigned char want[TS_LEDGER_UUID_BYTES];
    if (!ts_shim.cfg.mem_on || !nv.uuid || nv.uuid(dev, text, sizeof text) != NVML_SUCCESS ||
        parse_uuid(text, want) != 0)
        return NULL;
    int count = 0;
    if (!ts_shim.real.cuInit || ts_shim.real.cuInit(0) != CUDA_SUCCESS ||
        !ts_shim.real.cuDeviceGetCount || ts_shim.real.cuDeviceGetCount(&count) != CUDA_SUCCESS)
        return NULL;
    for (int d = 0; d < count && d < TS_SHIM_MAX_DEVICES; d++) {
        const struct ts_shim_dev *sd = shim_device(d);
        if (sd && sd->limit >= 0 && sd->ledger_dev >= 0 &&
            memcmp(sd->uuid, want, TS_LEDGER_UUID_BYTES) == 0)
            return sd;
    }
    return NULL;
}

static void report_quota(nvmlDevice_t dev, unsigned long long *total, unsigned long long *fr,
                         unsigned long long *used)
{
    const struct ts_shim_dev *d = quota_dev_of(dev);
    if (!d)
        return;
    uint64_t q = (uint64_t)d->limit, u = shim_ledger_used(ts_shim.ledger, d->ledger_dev);
    uint64_t left = u >= q ? 0 : q - u;
    if (q < *total)
        *total = q;
    if (left < *fr)
        *fr = left;
    *used = u;
}

static void learn_default(void)
{
    if (!nv.mem || !nv.uuid)
        learn_from(RTLD_NEXT);
}

TS_SHIM_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
    shim_ready();
    learn_default();
    if (!nv.mem)
        return NVML_ERROR_FUNCTION_NOT_FOUND;
    nvmlReturn_t r = nv.mem(device, memory);
    if (r == NVML_SUCCESS && memory)
        report_quota(device, &memory->total, &memory->free, &memory->used);
    return r;
}

TS_SHIM_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device,
                                                       nvmlMemory_v2_t *memory)
{
    shim_ready();
    learn_default();
    if (!nv.mem2)
        return NVML_ERROR_FUNCTION_NOT_FOUND;
    nvmlReturn_t r = nv.mem2(device, memory);
    if (r == NVML_SUCCESS && memory)
        report_quota(device, &memory->total, &memory->free, &memory->used);
    return r;
}
