/*
 * nvml.h - the agent's handle on NVML: a dlopened libnvidia-ml and a table of
 * the functions it resolved.
 *
 * The agent never links NVML. agent_nvml_open() dlopens the library (so a node
 * without a driver still runs the agent, serving CPU-only work), resolves each
 * function by its versioned export name newest first ("nvmlInit_v2" before
 * "nvmlInit", gpu-facts.md 1.1), and calls nvmlInit. Calls then go through the
 * table: `nv->DeviceGetCount(&n)`. Functions marked optional below may be NULL
 * (older drivers); callers check before calling. The table is the whole
 * interface: discover.c and health.c read through it and the tests point it at
 * tests/fakes/libnvidia-ml.so.1.
 *
 * Ownership: agent_nvml_open allocates *out; agent_nvml_close shuts NVML down,
 * dlcloses and frees it (NULL is fine). NVML itself is thread-safe; the table
 * is read-only after open, so one ts_nvml may be shared by threads.
 */
#ifndef TS_AGENT_NVML_H
#define TS_AGENT_NVML_H

#include <stdbool.h>

#include "agent/nvml_types.h"
#include "tessera/error.h"

#define TS_NVML_DEFAULT_LIBRARY "libnvidia-ml.so.1"
#define TS_NVML_LIBRARY_ENV "TESSERA_NVML_LIBRARY"

/* X(field, (argument list), required, "newest older ...") */
#define TS_NVML_FUNCS(X)                                                                    \
    X(Init, (void), 1, "nvmlInit_v2 nvmlInit")                                              \
    X(Shutdown, (void), 1, "nvmlShutdown")                                                  \
    X(SystemGetDriverVersion, (char *, unsigned int), 0, "nvmlSystemGetDriverVersion")      \
    X(DeviceGetCount, (unsigned int *), 1, "nvmlDeviceGetCount_v2 nvmlDeviceGetCount")      \
    X(DeviceGetHandleByIndex, (unsigned int, nvmlDevice_t *), 1,                            \
      "nvmlDeviceGetHandleByIndex_v2 nvmlDeviceGetHandleByIndex")                           \
    X(DeviceGetName, (nvmlDevice_t, char *, unsigned int), 1, "nvmlDeviceGetName")          \
    X(DeviceGetUUID, (nvmlDevice_t, char *, unsigned int), 1, "nvmlDeviceGetUUID")          \
    X(DeviceGetPciInfo, (nvmlDevice_t, nvmlPciInfo_t *), 1,                                 \
      "nvmlDeviceGetPciInfo_v3 nvmlDeviceGetPciInfo_v2 nvmlDeviceGetPciInfo")               \
    X(DeviceGetMemoryInfo, (nvmlDevice_t, nvmlMemory_t *), 1, "nvmlDeviceGetMemoryInfo")    \
    X(DeviceGetUtilizationRates, (nvmlDevice_t, nvmlUtilization_t *), 0,                    \
      "nvmlDeviceGetUtilizationRates")                                                      \
    X(DeviceGetTemperatureV, (nvmlDevice_t, nvmlTemperature_t *), 0,                        \
      "nvmlDeviceGetTemperatureV")                                                          \
    X(DeviceGetTemperature, (nvmlDevice_t, nvmlTemperatureSensors_t, unsigned int *), 0,    \
      "nvmlDeviceGetTemperature")                                                           \
    X(DeviceGetPowerUsage, (nvmlDevice_t, unsigned int *), 0, "nvmlDeviceGetPowerUsage")    \
    X(DeviceGetClockInfo, (nvmlDevice_t, nvmlClockType_t, unsigned int *), 0,               \
      "nvmlDeviceGetClockInfo")                                                             \
    X(DeviceGetComputeRunningProcesses, (nvmlDevice_t, unsigned int *, nvmlProcessInfo_t *), \
      0, "nvmlDeviceGetComputeRunningProcesses_v3 nvmlDeviceGetComputeRunningProcesses_v2") \
    X(DeviceGetProcessUtilization,                                                          \
      (nvmlDevice_t, nvmlProcessUtilizationSample_t *, unsigned int *, unsigned long long),  \
      0, "nvmlDeviceGetProcessUtilization")                                                 \
    X(DeviceGetCurrentClocksEventReasons, (nvmlDevice_t, unsigned long long *), 0,          \
      "nvmlDeviceGetCurrentClocksEventReasons nvmlDeviceGetCurrentClocksThrottleReasons")   \
    X(DeviceGetCurrPcieLinkGeneration, (nvmlDevice_t, unsigned int *), 0,                   \
      "nvmlDeviceGetCurrPcieLinkGeneration")                                                \
    X(DeviceGetCurrPcieLinkWidth, (nvmlDevice_t, unsigned int *), 0,                        \
      "nvmlDeviceGetCurrPcieLinkWidth")                                                     \
    X(DeviceGetMaxPcieLinkGeneration, (nvmlDevice_t, unsigned int *), 0,                    \
      "nvmlDeviceGetMaxPcieLinkGeneration")                                                 \
    X(DeviceGetMaxPcieLinkWidth, (nvmlDevice_t, unsigned int *), 0,                         \
      "nvmlDeviceGetMaxPcieLinkWidth")                                                      \
    X(DeviceGetTotalEccErrors,                                                              \
      (nvmlDevice_t, nvmlMemoryErrorType_t, nvmlEccCounterType_t, unsigned long long *), 0, \
      "nvmlDeviceGetTotalEccErrors")                                                        \
    X(DeviceGetRetiredPagesPendingStatus, (nvmlDevice_t, nvmlEnableState_t *), 0,           \
      "nvmlDeviceGetRetiredPagesPendingStatus")                                             \
    X(DeviceGetRemappedRows,                                                                \
      (nvmlDevice_t, unsigned int *, unsigned int *, unsigned int *, unsigned int *), 0,    \
      "nvmlDeviceGetRemappedRows")                                                          \
    X(DeviceGetNvLinkState, (nvmlDevice_t, unsigned int, nvmlEnableState_t *), 0,           \
      "nvmlDeviceGetNvLinkState")                                                           \
    X(DeviceGetNvLinkRemotePciInfo, (nvmlDevice_t, unsigned int, nvmlPciInfo_t *), 0,       \
      "nvmlDeviceGetNvLinkRemotePciInfo_v2 nvmlDeviceGetNvLinkRemotePciInfo")               \
    X(DeviceGetNvLinkRemoteDeviceType,                                                      \
      (nvmlDevice_t, unsigned int, nvmlIntNvLinkDeviceType_t *), 0,                         \
      "nvmlDeviceGetNvLinkRemoteDeviceType")                                                \
    X(DeviceGetTopologyCommonAncestor,                                                      \
      (nvmlDevice_t, nvmlDevice_t, nvmlGpuTopologyLevel_t *), 0,                            \
      "nvmlDeviceGetTopologyCommonAncestor")                                                \
    X(EventSetCreate, (nvmlEventSet_t *), 0, "nvmlEventSetCreate")                          \
    X(DeviceGetSupportedEventTypes, (nvmlDevice_t, unsigned long long *), 0,                \
      "nvmlDeviceGetSupportedEventTypes")                                                   \
    X(DeviceRegisterEvents, (nvmlDevice_t, unsigned long long, nvmlEventSet_t), 0,          \
      "nvmlDeviceRegisterEvents")                                                           \
    X(EventSetWait, (nvmlEventSet_t, nvmlEventData_t *, unsigned int), 0,                   \
      "nvmlEventSetWait_v2 nvmlEventSetWait")                                               \
    X(EventSetFree, (nvmlEventSet_t), 0, "nvmlEventSetFree")                                \
    X(DeviceGetMigMode, (nvmlDevice_t, unsigned int *, unsigned int *), 0,                  \
      "nvmlDeviceGetMigMode")                                                               \
    X(DeviceGetGpuInstanceProfileInfo,                                                      \
      (nvmlDevice_t, unsigned int, nvmlGpuInstanceProfileInfo_t *), 0,                      \
      "nvmlDeviceGetGpuInstanceProfileInfo")                                                \
    X(DeviceGetGpuInstancePossiblePlacements,                                               \
      (nvmlDevice_t, unsigned int, nvmlGpuInstancePlacement_t *, unsigned int *), 0,        \
      "nvmlDeviceGetGpuInstancePossiblePlacements_v2")                                      \
    X(DeviceGetGpuInstanceRemainingCapacity, (nvmlDevice_t, unsigned int, unsigned int *),  \
      0, "nvmlDeviceGetGpuInstanceRemainingCapacity")                                       \
    X(DeviceCreateGpuInstance, (nvmlDevice_t, unsigned int, nvmlGpuInstance_t *), 0,        \
      "nvmlDeviceCreateGpuInstance")                                                        \
    X(DeviceCreateGpuInstanceWithPlacement,                                                 \
      (nvmlDevice_t, unsigned int, const nvmlGpuInstancePlacement_t *,                      \
       nvmlGpuInstance_t *), 0, "nvmlDeviceCreateGpuInstanceWithPlacement")                 \
    X(GpuInstanceDestroy, (nvmlGpuInstance_t), 0, "nvmlGpuInstanceDestroy")                 \
    X(DeviceGetGpuInstances,                                                                \
      (nvmlDevice_t, unsigned int, nvmlGpuInstance_t *, unsigned int *), 0,                 \
      "nvmlDeviceGetGpuInstances")                                                          \
    X(GpuInstanceGetInfo, (nvmlGpuInstance_t, nvmlGpuInstanceInfo_t *), 0,                  \
      "nvmlGpuInstanceGetInfo")                                                             \
    X(GpuInstanceGetComputeInstanceProfileInfo,                                             \
      (nvmlGpuInstance_t, unsigned int, unsigned int, nvmlComputeInstanceProfileInfo_t *),  \
      0, "nvmlGpuInstanceGetComputeInstanceProfileInfo")                                    \
    X(GpuInstanceCreateComputeInstance,                                                     \
      (nvmlGpuInstance_t, unsigned int, nvmlComputeInstance_t *), 0,                        \
      "nvmlGpuInstanceCreateComputeInstance")                                               \
    X(ComputeInstanceDestroy, (nvmlComputeInstance_t), 0, "nvmlComputeInstanceDestroy")     \
    X(GpuInstanceGetComputeInstances,                                                       \
      (nvmlGpuInstance_t, unsigned int, nvmlComputeInstance_t *, unsigned int *), 0,        \
      "nvmlGpuInstanceGetComputeInstances")                                                 \
    X(ComputeInstanceGetInfo, (nvmlComputeInstance_t, nvmlComputeInstanceInfo_t *), 0,      \
      "nvmlComputeInstanceGetInfo_v2 nvmlComputeInstanceGetInfo")                           \
    X(DeviceGetMaxMigDeviceCount, (nvmlDevice_t, unsigned int *), 0,                        \
      "nvmlDeviceGetMaxMigDeviceCount")                                                     \
    X(DeviceGetMigDeviceHandleByIndex, (nvmlDevice_t, unsigned int, nvmlDevice_t *), 0,     \
      "nvmlDeviceGetMigDeviceHandleByIndex")                                                \
    X(DeviceGetGpuInstanceId, (nvmlDevice_t, unsigned int *), 0,                            \
      "nvmlDeviceGetGpuInstanceId")                                                         \
    X(DeviceGetComputeInstanceId, (nvmlDevice_t, unsigned int *), 0,                        \
      "nvmlDeviceGetComputeInstanceId")

enum ts_nvml_func {
#define TS_NVML_ENUM(field, args, req, names) TS_NVML_FN_##field,
    TS_NVML_FUNCS(TS_NVML_ENUM)
#undef TS_NVML_ENUM
    TS_NVML_NFUNCS
};

typedef struct ts_nvml {
    void *dl;           /* dlopen handle */
    char path[256];     /* what was opened */
    const char *(*ErrorString)(nvmlReturn_t);
#define TS_NVML_FIELD(field, args, req, names) nvmlReturn_t(*field) args;
    TS_NVML_FUNCS(TS_NVML_FIELD)
#undef TS_NVML_FIELD
    /* The export each entry resolved to (NULL = absent), so a caller can adapt
     * to an older ABI: static storage, the name ends at the first space or NUL. */
    const char *symbol[TS_NVML_NFUNCS];
} ts_nvml;

/* Opens NVML: path, else $TESSERA_NVML_LIBRARY, else libnvidia-ml.so.1.
 * Errors: TS_ENOENT "no NVML: cannot load <path>: <dlerror>" when the library
 * is missing (the agent then serves CPU-only work); TS_EIO when a required
 * function is missing or nvmlInit fails (message carries nvmlErrorString). */
int agent_nvml_open(const char *path, ts_nvml **out, ts_err *err);
/* nvmlShutdown + dlclose + free. NULL is a no-op. */
void agent_nvml_close(ts_nvml *nv);
/* nvmlErrorString(rc), or "NVML error <rc>" when unavailable. Static storage. */
const char *agent_nvml_strerror(const ts_nvml *nv, nvmlReturn_t rc);
/* True iff the entry resolved to a name other than the newest one listed. */
bool agent_nvml_is_fallback(const ts_nvml *nv, enum ts_nvml_func fn);

#endif
