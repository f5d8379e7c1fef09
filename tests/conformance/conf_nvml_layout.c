/*
 * conf_nvml_layout.c - the agent's hand-declared NVML types
 * (src/agent/nvml_types.h, which the fake NVML shares) held against NVIDIA's
 * nvml.h: every return code, enumerator, buffer size, bit and struct-version
 * constant, each struct's size, alignment and field offsets, and the handle
 * types. Ours are renamed prj_* while included (rename_agent_nvml.h); the
 * function types are checked in conf_nvml_api.c.
 */
#include "conformance/rename_agent_nvml.h"
#include "agent/nvml_types.h"
#define PRJ_RENAME_UNDO
#include "conformance/rename_agent_nvml.h"
#undef PRJ_RENAME_UNDO

#define NVML_NO_UNVERSIONED_FUNC_DEFS 1
#include <nvml.h>

#include "conformance/conformance.h"

SAME_SCALAR(nvmlDevice_t);
SAME_SCALAR(nvmlGpuInstance_t);
SAME_SCALAR(nvmlComputeInstance_t);
SAME_SCALAR(nvmlEventSet_t);
SAME_TYPE_SIZE(nvmlReturn_t);
SAME_TYPE_SIZE(nvmlEnableState_t);
SAME_TYPE_SIZE(nvmlTemperatureSensors_t);
SAME_TYPE_SIZE(nvmlMemoryErrorType_t);
SAME_TYPE_SIZE(nvmlEccCounterType_t);
SAME_TYPE_SIZE(nvmlGpuTopologyLevel_t);
SAME_TYPE_SIZE(nvmlIntNvLinkDeviceType_t);
SAME_TYPE_SIZE(nvmlClockType_t);

SAME_VALUE(NVML_SUCCESS);
SAME_VALUE(NVML_ERROR_UNINITIALIZED);
SAME_VALUE(NVML_ERROR_INVALID_ARGUMENT);
SAME_VALUE(NVML_ERROR_NOT_SUPPORTED);
SAME_VALUE(NVML_ERROR_NO_PERMISSION);
SAME_VALUE(NVML_ERROR_ALREADY_INITIALIZED);
SAME_VALUE(NVML_ERROR_NOT_FOUND);
SAME_VALUE(NVML_ERROR_INSUFFICIENT_SIZE);
SAME_VALUE(NVML_ERROR_INSUFFICIENT_POWER);
SAME_VALUE(NVML_ERROR_DRIVER_NOT_LOADED);
SAME_VALUE(NVML_ERROR_TIMEOUT);
SAME_VALUE(NVML_ERROR_IRQ_ISSUE);
SAME_VALUE(NVML_ERROR_LIBRARY_NOT_FOUND);
SAME_VALUE(NVML_ERROR_FUNCTION_NOT_FOUND);
SAME_VALUE(NVML_ERROR_CORRUPTED_INFOROM);
SAME_VALUE(NVML_ERROR_GPU_IS_LOST);
SAME_VALUE(NVML_ERROR_RESET_REQUIRED);
SAME_VALUE(NVML_ERROR_OPERATING_SYSTEM);
SAME_VALUE(NVML_ERROR_LIB_RM_VERSION_MISMATCH);
SAME_VALUE(NVML_ERROR_IN_USE);
SAME_VALUE(NVML_ERROR_MEMORY);
SAME_VALUE(NVML_ERROR_NO_DATA);
SAME_VALUE(NVML_ERROR_VGPU_ECC_NOT_SUPPORTED);
SAME_VALUE(NVML_ERROR_INSUFFICIENT_RESOURCES);
SAME_VALUE(NVML_ERROR_FREQ_NOT_SUPPORTED);
SAME_VALUE(NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
SAME_VALUE(NVML_ERROR_DEPRECATED);
SAME_VALUE(NVML_ERROR_NOT_READY);
SAME_VALUE(NVML_ERROR_GPU_NOT_FOUND);
SAME_VALUE(NVML_ERROR_INVALID_STATE);
SAME_VALUE(NVML_ERROR_RESET_TYPE_NOT_SUPPORTED);
SAME_VALUE(NVML_ERROR_UNKNOWN);

SAME_VALUE(NVML_DEVICE_NAME_V2_BUFFER_SIZE);
SAME_VALUE(NVML_DEVICE_UUID_V2_BUFFER_SIZE);
SAME_VALUE(NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE);
SAME_VALUE(NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE);
SAME_VALUE(NVML_FEATURE_DISABLED);
SAME_VALUE(NVML_FEATURE_ENABLED);
SAME_VALUE(NVML_TEMPERATURE_GPU);
SAME_VALUE(NVML_MEMORY_ERROR_TYPE_CORRECTED);
SAME_VALUE(NVML_MEMORY_ERROR_TYPE_UNCORRECTED);
SAME_VALUE(NVML_VOLATILE_ECC);
SAME_VALUE(NVML_AGGREGATE_ECC);
SAME_VALUE(NVML_TOPOLOGY_INTERNAL);
SAME_VALUE(NVML_TOPOLOGY_SINGLE);
SAME_VALUE(NVML_TOPOLOGY_MULTIPLE);
SAME_VALUE(NVML_TOPOLOGY_HOSTBRIDGE);
SAME_VALUE(NVML_TOPOLOGY_NODE);
SAME_VALUE(NVML_TOPOLOGY_SYSTEM);
SAME_VALUE(NVML_NVLINK_DEVICE_TYPE_GPU);
SAME_VALUE(NVML_NVLINK_DEVICE_TYPE_IBMNPU);
SAME_VALUE(NVML_NVLINK_DEVICE_TYPE_SWITCH);
SAME_VALUE(NVML_NVLINK_DEVICE_TYPE_UNKNOWN);
SAME_VALUE(NVML_CLOCK_GRAPHICS);
SAME_VALUE(NVML_CLOCK_SM);
SAME_VALUE(NVML_CLOCK_MEM);
SAME_VALUE(NVML_CLOCK_VIDEO);
SAME_VALUE(nvmlClocksEventReasonGpuIdle);
SAME_VALUE(nvmlClocksEventReasonSwPowerCap);
SAME_VALUE(nvmlClocksThrottleReasonHwSlowdown);
SAME_VALUE(nvmlClocksEventReasonSyncBoost);
SAME_VALUE(nvmlClocksEventReasonSwThermalSlowdown);
SAME_VALUE(nvmlClocksThrottleReasonHwThermalSlowdown);
SAME_VALUE(nvmlClocksThrottleReasonHwPowerBrakeSlowdown);
SAME_VALUE(nvmlEventTypeSingleBitEccError);
SAME_VALUE(nvmlEventTypeDoubleBitEccError);
SAME_VALUE(nvmlEventTypeXidCriticalError);
SAME_VALUE(NVML_DEVICE_MIG_DISABLE);
SAME_VALUE(NVML_DEVICE_MIG_ENABLE);
SAME_VALUE(NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED);
SAME_VALUE(NVML_VALUE_NOT_AVAILABLE);
SAME_VALUE(nvmlMemory_v2);
SAME_VALUE(nvmlTemperature_v1);

SAME_TYPE_SIZE(nvmlPciInfo_t);
SAME_FIELD(nvmlPciInfo_t, busIdLegacy);
SAME_FIELD(nvmlPciInfo_t, domain);
SAME_FIELD(nvmlPciInfo_t, bus);
SAME_FIELD(nvmlPciInfo_t, device);
SAME_FIELD(nvmlPciInfo_t, pciDeviceId);
SAME_FIELD(nvmlPciInfo_t, pciSubSystemId);
SAME_FIELD(nvmlPciInfo_t, busId);
SAME_TYPE_SIZE(nvmlMemory_t);
SAME_FIELD(nvmlMemory_t, total);
SAME_FIELD(nvmlMemory_t, free);
SAME_FIELD(nvmlMemory_t, used);
SAME_TYPE_SIZE(nvmlMemory_v2_t);
SAME_FIELD(nvmlMemory_v2_t, version);
SAME_FIELD(nvmlMemory_v2_t, total);
SAME_FIELD(nvmlMemory_v2_t, reserved);
SAME_FIELD(nvmlMemory_v2_t, free);
SAME_FIELD(nvmlMemory_v2_t, used);
SAME_TYPE_SIZE(nvmlUtilization_t);
SAME_FIELD(nvmlUtilization_t, gpu);
SAME_FIELD(nvmlUtilization_t, memory);
SAME_TYPE_SIZE(nvmlTemperature_t);
SAME_FIELD(nvmlTemperature_t, version);
SAME_FIELD(nvmlTemperature_t, sensorType);
SAME_FIELD(nvmlTemperature_t, temperature);
SAME_TYPE_SIZE(nvmlEventData_t);
SAME_FIELD(nvmlEventData_t, device);
SAME_FIELD(nvmlEventData_t, eventType);
SAME_FIELD(nvmlEventData_t, eventData);
SAME_FIELD(nvmlEventData_t, gpuInstanceId);
SAME_FIELD(nvmlEventData_t, computeInstanceId);
SAME_TYPE_SIZE(nvmlGpuInstancePlacement_t);
SAME_FIELD(nvmlGpuInstancePlacement_t, start);
SAME_FIELD(nvmlGpuInstancePlacement_t, size);
SAME_TYPE_SIZE(nvmlComputeInstancePlacement_t);
SAME_FIELD(nvmlComputeInstancePlacement_t, start);
SAME_FIELD(nvmlComputeInstancePlacement_t, size);
SAME_TYPE_SIZE(nvmlGpuInstanceProfileInfo_t);
SAME_FIELD(nvmlGpuInstanceProfileInfo_t, id);
SAME_FIELD(nvmlGpuInstanceProfileInfo_t, isP2pSupported);
SAME_FIELD(nvmlGpuInstanceProfileInfo_t, sliceCount);
SAME_FIELD(nvmlGpuInstanceProfileInfo_t, instanceCount);
SAME_FIELD(nvmlGpuInstanceProfileInfo_t, multiprocessorCount);
SAME_FIELD(nvmlGpuInstanceProfileInfo_t, copyEngineCount);
SAME_FIELD(nvmlGpuInstanceProfileInfo_t, decoderCount);
SAME_FIELD(nvmlGpuInstanceProfileInfo_t, encoderCount);
SAME_FIELD(nvmlGpuInstanceProfileInfo_t, jpegCount);
SAME_FIELD(nvmlGpuInstanceProfileInfo_t, ofaCount);
SAME_FIELD(nvmlGpuInstanceProfileInfo_t, memorySizeMB);
SAME_TYPE_SIZE(nvmlGpuInstanceInfo_t);
SAME_FIELD(nvmlGpuInstanceInfo_t, device);
SAME_FIELD(nvmlGpuInstanceInfo_t, id);
SAME_FIELD(nvmlGpuInstanceInfo_t, profileId);
SAME_FIELD(nvmlGpuInstanceInfo_t, placement);
SAME_TYPE_SIZE(nvmlComputeInstanceProfileInfo_t);
SAME_FIELD(nvmlComputeInstanceProfileInfo_t, id);
SAME_FIELD(nvmlComputeInstanceProfileInfo_t, sliceCount);
SAME_FIELD(nvmlComputeInstanceProfileInfo_t, instanceCount);
SAME_FIELD(nvmlComputeInstanceProfileInfo_t, multiprocessorCount);
SAME_FIELD(nvmlComputeInstanceProfileInfo_t, sharedCopyEngineCount);
SAME_FIELD(nvmlComputeInstanceProfileInfo_t, sharedDecoderCount);
SAME_FIELD(nvmlComputeInstanceProfileInfo_t, sharedEncoderCount);
SAME_FIELD(nvmlComputeInstanceProfileInfo_t, sharedJpegCount);
SAME_FIELD(nvmlComputeInstanceProfileInfo_t, sharedOfaCount);
SAME_TYPE_SIZE(nvmlComputeInstanceInfo_t);
SAME_FIELD(nvmlComputeInstanceInfo_t, device);
SAME_FIELD(nvmlComputeInstanceInfo_t, gpuInstance);
SAME_FIELD(nvmlComputeInstanceInfo_t, id);
SAME_FIELD(nvmlComputeInstanceInfo_t, profileId);
SAME_FIELD(nvmlComputeInstanceInfo_t, placement);
SAME_TYPE_SIZE(nvmlProcessInfo_t);
SAME_FIELD(nvmlProcessInfo_t, pid);
SAME_FIELD(nvmlProcessInfo_t, usedGpuMemory);
SAME_FIELD(nvmlProcessInfo_t, gpuInstanceId);
SAME_FIELD(nvmlProcessInfo_t, computeInstanceId);
SAME_TYPE_SIZE(nvmlProcessUtilizationSample_t);
SAME_FIELD(nvmlProcessUtilizationSample_t, pid);
SAME_FIELD(nvmlProcessUtilizationSample_t, timeStamp);
SAME_FIELD(nvmlProcessUtilizationSample_t, smUtil);
SAME_FIELD(nvmlProcessUtilizationSample_t, memUtil);
SAME_FIELD(nvmlProcessUtilizationSample_t, encUtil);
SAME_FIELD(nvmlProcessUtilizationSample_t, decUtil);

enum { conf_nvml_layout_count = __COUNTER__ };
int conf_nvml_layout_checks(void) { return conf_nvml_layout_count; }
