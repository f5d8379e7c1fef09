/*
 * conf_nvml_api.c - every NVML export the agent resolves, held against
 * NVIDIA's declaration of it in nvml.h.
 *
 * Built with TS_NVML_NVIDIA_HEADERS: src/agent/nvml.h's table then uses
 * nvml.h's types, and each field of struct ts_nvml (one function pointer type
 * per entry, used for every fallback name the entry lists) must be exactly
 * the type of each export it may be bound to, newest and older ones alike
 * (nvmlInit_v2 and nvmlInit, nvmlDeviceGetPciInfo_v3/_v2/unversioned). The
 * list below names those exports as identifiers; conf_nvml_checked_names()
 * lets the test compare it with TS_NVML_FUNCS's strings, so an export added
 * there and not here fails the test.
 */
#include <string.h>

#include "agent/nvml.h"

#include "conformance/conformance.h"

#define CONF_NVML_EXPORTS(X) \
    X(Init, nvmlInit_v2) \
    X(Init, nvmlInit) \
    X(Shutdown, nvmlShutdown) \
    X(SystemGetDriverVersion, nvmlSystemGetDriverVersion) \
    X(DeviceGetCount, nvmlDeviceGetCount_v2) \
    X(DeviceGetCount, nvmlDeviceGetCount) \
    X(DeviceGetHandleByIndex, nvmlDeviceGetHandleByIndex_v2) \
    X(DeviceGetHandleByIndex, nvmlDeviceGetHandleByIndex) \
    X(DeviceGetName, nvmlDeviceGetName) \
    X(DeviceGetUUID, nvmlDeviceGetUUID) \
    X(DeviceGetPciInfo, nvmlDeviceGetPciInfo_v3) \
    X(DeviceGetPciInfo, nvmlDeviceGetPciInfo_v2) \
    X(DeviceGetPciInfo, nvmlDeviceGetPciInfo) \
    X(DeviceGetMemoryInfo, nvmlDeviceGetMemoryInfo) \
    X(DeviceGetUtilizationRates, nvmlDeviceGetUtilizationRates) \
    X(DeviceGetTemperatureV, nvmlDeviceGetTemperatureV) \
    X(DeviceGetTemperature, nvmlDeviceGetTemperature) \
    X(DeviceGetPowerUsage, nvmlDeviceGetPowerUsage) \
    X(DeviceGetClockInfo, nvmlDeviceGetClockInfo) \
    X(DeviceGetComputeRunningProcesses, nvmlDeviceGetComputeRunningProcesses_v3) \
    X(DeviceGetComputeRunningProcesses, nvmlDeviceGetComputeRunningProcesses_v2) \
    X(DeviceGetProcessUtilization, nvmlDeviceGetProcessUtilization) \
    X(DeviceGetCurrentClocksEventReasons, nvmlDeviceGetCurrentClocksEventReasons) \
    X(DeviceGetCurrentClocksEventReasons, nvmlDeviceGetCurrentClocksThrottleReasons) \
    X(DeviceGetCurrPcieLinkGeneration, nvmlDeviceGetCurrPcieLinkGeneration) \
    X(DeviceGetCurrPcieLinkWidth, nvmlDeviceGetCurrPcieLinkWidth) \
    X(DeviceGetMaxPcieLinkGeneration, nvmlDeviceGetMaxPcieLinkGeneration) \
    X(DeviceGetMaxPcieLinkWidth, nvmlDeviceGetMaxPcieLinkWidth) \
    X(DeviceGetTotalEccErrors, nvmlDeviceGetTotalEccErrors) \
    X(DeviceGetRetiredPagesPendingStatus, nvmlDeviceGetRetiredPagesPendingStatus) \
    X(DeviceGetRemappedRows, nvmlDeviceGetRemappedRows) \
    X(DeviceGetNvLinkState, nvmlDeviceGetNvLinkState) \
    X(DeviceGetNvLinkRemotePciInfo, nvmlDeviceGetNvLinkRemotePciInfo_v2) \
    X(DeviceGetNvLinkRemotePciInfo, nvmlDeviceGetNvLinkRemotePciInfo) \
    X(DeviceGetNvLinkRemoteDeviceType, nvmlDeviceGetNvLinkRemoteDeviceType) \
    X(DeviceGetTopologyCommonAncestor, nvmlDeviceGetTopologyCommonAncestor) \
    X(EventSetCreate, nvmlEventSetCreate) \
    X(DeviceGetSupportedEventTypes, nvmlDeviceGetSupportedEventTypes) \
    X(DeviceRegisterEvents, nvmlDeviceRegisterEvents) \
    X(EventSetWait, nvmlEventSetWait_v2) \
    X(EventSetWait, nvmlEventSetWait) \
    X(EventSetFree, nvmlEventSetFree) \
    X(DeviceGetMigMode, nvmlDeviceGetMigMode) \
    X(DeviceGetGpuInstanceProfileInfo, nvmlDeviceGetGpuInstanceProfileInfo) \
    X(DeviceGetGpuInstancePossiblePlacements, nvmlDeviceGetGpuInstancePossiblePlacements_v2) \
    X(DeviceGetGpuInstanceRemainingCapacity, nvmlDeviceGetGpuInstanceRemainingCapacity) \
    X(DeviceCreateGpuInstance, nvmlDeviceCreateGpuInstance) \
    X(DeviceCreateGpuInstanceWithPlacement, nvmlDeviceCreateGpuInstanceWithPlacement) \
    X(GpuInstanceDestroy, nvmlGpuInstanceDestroy) \
    X(DeviceGetGpuInstances, nvmlDeviceGetGpuInstances) \
    X(GpuInstanceGetInfo, nvmlGpuInstanceGetInfo) \
    X(GpuInstanceGetComputeInstanceProfileInfo, nvmlGpuInstanceGetComputeInstanceProfileInfo) \
    X(GpuInstanceCreateComputeInstance, nvmlGpuInstanceCreateComputeInstance) \
    X(ComputeInstanceDestroy, nvmlComputeInstanceDestroy) \
    X(GpuInstanceGetComputeInstances, nvmlGpuInstanceGetComputeInstances) \
    X(ComputeInstanceGetInfo, nvmlComputeInstanceGetInfo_v2) \
    X(ComputeInstanceGetInfo, nvmlComputeInstanceGetInfo) \
    X(DeviceGetMaxMigDeviceCount, nvmlDeviceGetMaxMigDeviceCount) \
    X(DeviceGetMigDeviceHandleByIndex, nvmlDeviceGetMigDeviceHandleByIndex) \
    X(DeviceGetGpuInstanceId, nvmlDeviceGetGpuInstanceId) \
    X(DeviceGetComputeInstanceId, nvmlDeviceGetComputeInstanceId)

#define CONF_NVML_FN(field, export) SAME_FUNCTION(__typeof__(((ts_nvml *)0)->field), export);
CONF_NVML_EXPORTS(CONF_NVML_FN)
#undef CONF_NVML_FN
SAME_FUNCTION(__typeof__(((ts_nvml *)0)->ErrorString), nvmlErrorString);

enum { conf_nvml_api_count = __COUNTER__ };
int conf_nvml_api_checks(void) { return conf_nvml_api_count; }

static const struct {
    const char *field, *export;
} checked[] = {
#define CONF_NVML_NAME(field, export) {#field, #export},
    CONF_NVML_EXPORTS(CONF_NVML_NAME)
#undef CONF_NVML_NAME
};

static const char *const fields[] = {
#define CONF_NVML_FIELD(field, args, req, names) #field,
    TS_NVML_FUNCS(CONF_NVML_FIELD)
#undef CONF_NVML_FIELD
};

const char *conf_nvml_checked_names(int i)
{
    static char buf[256];
    if (i < 0 || i >= (int)(sizeof fields / sizeof fields[0]))
        return NULL;
    buf[0] = 0;
    for (size_t k = 0; k < sizeof checked / sizeof checked[0]; k++) {
        if (strcmp(checked[k].field, fields[i]) != 0)
            continue;
        if (buf[0])
            strncat(buf, " ", sizeof buf - strlen(buf) - 1);
        strncat(buf, checked[k].export, sizeof buf - strlen(buf) - 1);
    }
    return buf;
}
