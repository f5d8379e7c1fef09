/*
 * nvml_types.h - the slice of NVML's C ABI the agent uses, declared by hand.
 *
 * We do not ship or include NVIDIA's nvml.h: the agent dlopens whatever
 * libnvidia-ml.so.1 the node has, so all it needs is the ABI. Everything here
 * is restated from gpu-facts.md section 1 (NVML 13.3 header as mirrored by
 * NVIDIA/go-nvml): 4-byte enums, handles that are one pointer wrapped in a
 * struct, and struct layouts whose sizes the static asserts below pin to the
 * reference's x86_64 numbers. Both the agent (nvml.c) and the test fake
 * (tests/fakes/fake_nvml.c) include this, so the two cannot drift apart.
 * Header-only: no functions, no storage.
 *
 * With TS_NVML_NVIDIA_HEADERS defined (the build does it for the fake where
 * NVIDIA's nvml.h is found) the types come from nvml.h itself, so the fake is
 * compiled with the real layouts and its exports against the real
 * prototypes; tests/conformance/conf_nvml.c checks every hand declaration
 * below against nvml.h (sizes, offsets, values, function types).
 */
#ifndef TS_AGENT_NVML_TYPES_H
#define TS_AGENT_NVML_TYPES_H

#include <stddef.h>

#if defined(TS_NVML_NVIDIA_HEADERS)
/* Every versioned export declared under its own name (nvmlInit and
 * nvmlInit_v2), as the agent resolves them. */
#ifndef NVML_NO_UNVERSIONED_FUNC_DEFS
#define NVML_NO_UNVERSIONED_FUNC_DEFS 1
#endif
#include <nvml.h>
#else
/* ---- return codes (section 1.2) ---------------------------------------- */
typedef enum nvmlReturn_enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_NO_PERMISSION = 4,
    NVML_ERROR_ALREADY_INITIALIZED = 5,
    NVML_ERROR_NOT_FOUND = 6,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_INSUFFICIENT_POWER = 8,
    NVML_ERROR_DRIVER_NOT_LOADED = 9,
    NVML_ERROR_TIMEOUT = 10,
    NVML_ERROR_IRQ_ISSUE = 11,
    NVML_ERROR_LIBRARY_NOT_FOUND = 12,
    NVML_ERROR_FUNCTION_NOT_FOUND = 13,
    NVML_ERROR_CORRUPTED_INFOROM = 14,
    NVML_ERROR_GPU_IS_LOST = 15,
    NVML_ERROR_RESET_REQUIRED = 16,
    NVML_ERROR_OPERATING_SYSTEM = 17,
    NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18,
    NVML_ERROR_IN_USE = 19,
    NVML_ERROR_MEMORY = 20,
    NVML_ERROR_NO_DATA = 21,
    NVML_ERROR_VGPU_ECC_NOT_SUPPORTED = 22,
    NVML_ERROR_INSUFFICIENT_RESOURCES = 23,
    NVML_ERROR_FREQ_NOT_SUPPORTED = 24,
    NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
    NVML_ERROR_DEPRECATED = 26,
    NVML_ERROR_NOT_READY = 27,
    NVML_ERROR_GPU_NOT_FOUND = 28,
    NVML_ERROR_INVALID_STATE = 29,
    NVML_ERROR_RESET_TYPE_NOT_SUPPORTED = 30,
    NVML_ERROR_UNKNOWN = 999
} nvmlReturn_t;

/* ---- handles (section 1.3): one pointer, passed by value --------------- */
typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct nvmlGpuInstance_st *nvmlGpuInstance_t;
typedef struct nvmlComputeInstance_st *nvmlComputeInstance_t;
typedef struct nvmlEventSet_st *nvmlEventSet_t;

#define NVML_DEVICE_NAME_V2_BUFFER_SIZE 96
#define NVML_DEVICE_UUID_V2_BUFFER_SIZE 96
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE 32
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE 16

/* ---- enums (section 1.6) ----------------------------------------------- */
typedef enum { NVML_FEATURE_DISABLED = 0, NVML_FEATURE_ENABLED = 1 } nvmlEnableState_t;
typedef enum { NVML_TEMPERATURE_GPU = 0 } nvmlTemperatureSensors_t;
typedef enum {
    NVML_MEMORY_ERROR_TYPE_CORRECTED = 0,
    NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
} nvmlMemoryErrorType_t;
typedef enum { NVML_VOLATILE_ECC = 0, NVML_AGGREGATE_ECC = 1 } nvmlEccCounterType_t;
typedef enum {
    NVML_TOPOLOGY_INTERNAL = 0,
    NVML_TOPOLOGY_SINGLE = 10,
    NVML_TOPOLOGY_MULTIPLE = 20,
    NVML_TOPOLOGY_HOSTBRIDGE = 30,
    NVML_TOPOLOGY_NODE = 40,
    NVML_TOPOLOGY_SYSTEM = 50
} nvmlGpuTopologyLevel_t;
typedef enum {
    NVML_NVLINK_DEVICE_TYPE_GPU = 0x00,
    NVML_NVLINK_DEVICE_TYPE_IBMNPU = 0x01,
    NVML_NVLINK_DEVICE_TYPE_SWITCH = 0x02,
    NVML_NVLINK_DEVICE_TYPE_UNKNOWN = 0xFF
} nvmlIntNvLinkDeviceType_t;
/* table 1.6.3 */
typedef enum {
    NVML_CLOCK_GRAPHICS = 0,
    NVML_CLOCK_SM = 1,
    NVML_CLOCK_MEM = 2,
    NVML_CLOCK_VIDEO = 3
} nvmlClockType_t;

/* clock event ("throttle") reason bits, table 1.6.9 */
#define nvmlClocksEventReasonGpuIdle 0x1ULL
#define nvmlClocksEventReasonSwPowerCap 0x4ULL
#define nvmlClocksThrottleReasonHwSlowdown 0x8ULL
#define nvmlClocksEventReasonSyncBoost 0x10ULL
#define nvmlClocksEventReasonSwThermalSlowdown 0x20ULL
#define nvmlClocksThrottleReasonHwThermalSlowdown 0x40ULL
#define nvmlClocksThrottleReasonHwPowerBrakeSlowdown 0x80ULL

/* event type bits, table 1.6.10 */
#define nvmlEventTypeSingleBitEccError 0x1ULL
#define nvmlEventTypeDoubleBitEccError 0x2ULL
#define nvmlEventTypeXidCriticalError 0x8ULL

/* MIG (table 1.6.13) */
#define NVML_DEVICE_MIG_DISABLE 0
#define NVML_DEVICE_MIG_ENABLE 1
#define NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED 0

/* ---- structs (section 1.5) --------------------------------------------- */
typedef struct nvmlPciInfo_st {
    char busIdLegacy[NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE];
    unsigned int domain;
    unsigned int bus;
    unsigned int device;
    unsigned int pciDeviceId; /* device id << 16 | vendor id */
    unsigned int pciSubSystemId;
    char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
} nvmlPciInfo_t;

typedef struct nvmlMemory_st {
    unsigned long long total, free, used; /* bytes */
} nvmlMemory_t;

typedef struct nvmlMemory_v2_st {
    unsigned int version;
    unsigned long long total, reserved, free, used;
} nvmlMemory_v2_t;
#define nvmlMemory_v2 0x02000028u

typedef struct nvmlUtilization_st {
    unsigned int gpu, memory; /* percent */
} nvmlUtilization_t;

typedef struct nvmlTemperature_v1_st {
    unsigned int version;
    nvmlTemperatureSensors_t sensorType;
    int temperature;
} nvmlTemperature_t;
#define nvmlTemperature_v1 0x0100000Cu

typedef struct nvmlEventData_st {
    nvmlDevice_t device;
    unsigned long long eventType;
    unsigned long long eventData; /* the Xid for XidCriticalError */
    unsigned int gpuInstanceId;
    unsigned int computeInstanceId;
} nvmlEventData_t;

typedef struct nvmlGpuInstancePlacement_st {
    unsigned int start, size; /* memory slices */
} nvmlGpuInstancePlacement_t;

typedef struct nvmlComputeInstancePlacement_st {
    unsigned int start, size; /* compute slices within the GI */
} nvmlComputeInstancePlacement_t;

typedef struct nvmlGpuInstanceProfileInfo_st {
    unsigned int id, isP2pSupported, sliceCount, instanceCount, multiprocessorCount,
        copyEngineCount, decoderCount, encoderCount, jpegCount, ofaCount;
    unsigned long long memorySizeMB; /* MiB */
} nvmlGpuInstanceProfileInfo_t;

typedef struct nvmlGpuInstanceInfo_st {
    nvmlDevice_t device;
    unsigned int id;
    unsigned int profileId;
    nvmlGpuInstancePlacement_t placement;
} nvmlGpuInstanceInfo_t;

typedef struct nvmlComputeInstanceProfileInfo_st {
    unsigned int id, sliceCount, instanceCount, multiprocessorCount, sharedCopyEngineCount,
        sharedDecoderCount, sharedEncoderCount, sharedJpegCount, sharedOfaCount;
} nvmlComputeInstanceProfileInfo_t;

typedef struct nvmlComputeInstanceInfo_st {
    nvmlDevice_t device;
    nvmlGpuInstance_t gpuInstance;
    unsigned int id;
    unsigned int profileId;
    nvmlComputeInstancePlacement_t placement;
} nvmlComputeInstanceInfo_t;

/* What nvmlDevice*RunningProcesses_v3 fills (nvmlProcessInfo_v2_t, 24 bytes;
 * some 535 drivers wrote 32-byte entries under the same name: gpu-facts.md
 * 1.7, so readers must measure the stride). usedGpuMemory is bytes or
 * NVML_VALUE_NOT_AVAILABLE; the instance ids are NVML_INSTANCE_ID_NONE off MIG. */
typedef struct nvmlProcessInfo_st {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId;
    unsigned int computeInstanceId;
} nvmlProcessInfo_t;
#define NVML_VALUE_NOT_AVAILABLE (~0ULL) /* -1 as unsigned long long (1.3) */

/* One sample of nvmlDeviceGetProcessUtilization: percentages over the
 * driver's sampling period; timeStamp in microseconds (CPU clock). Layout as
 * in NVIDIA's header (NVIDIA/go-nvml pkg/nvml/nvml.h, ProcessUtilizationSample). */
typedef struct nvmlProcessUtilizationSample_st {
    unsigned int pid;
    unsigned long long timeStamp;
    unsigned int smUtil, memUtil, encUtil, decUtil;
} nvmlProcessUtilizationSample_t;

/* The reference's x86_64 sizes: a mismatch here is an ABI bug, not a style
 * question, so fail the build. */
#if defined(__x86_64__) || defined(__aarch64__)
_Static_assert(sizeof(nvmlPciInfo_t) == 68, "nvmlPciInfo_t is 68 bytes");
_Static_assert(offsetof(nvmlPciInfo_t, busId) == 36, "nvmlPciInfo_t.busId at 36");
_Static_assert(sizeof(nvmlMemory_t) == 24, "nvmlMemory_t is 24 bytes");
_Static_assert(sizeof(nvmlMemory_v2_t) == 40, "nvmlMemory_v2_t is 40 bytes");
_Static_assert(sizeof(nvmlTemperature_t) == 12, "nvmlTemperature_v1_t is 12 bytes");
_Static_assert(sizeof(nvmlEventData_t) == 32, "nvmlEventData_t is 32 bytes");
_Static_assert(sizeof(nvmlGpuInstanceProfileInfo_t) == 48, "GI profile info is 48 bytes");
_Static_assert(sizeof(nvmlGpuInstanceInfo_t) == 24, "nvmlGpuInstanceInfo_t is 24 bytes");
_Static_assert(sizeof(nvmlComputeInstanceProfileInfo_t) == 36, "CI profile info is 36 bytes");
_Static_assert(sizeof(nvmlComputeInstanceInfo_t) == 32, "nvmlComputeInstanceInfo_t is 32");
_Static_assert(sizeof(nvmlProcessInfo_t) == 24, "nvmlProcessInfo_v2_t is 24 bytes");
_Static_assert(sizeof(nvmlProcessUtilizationSample_t) == 32, "process util sample is 32 bytes");
#endif
#endif /* TS_NVML_NVIDIA_HEADERS */

/* Instance ids in event data when the event is not attributable (ours: NVML
 * writes 0xFFFFFFFF but names no constant for it). */
#define NVML_INSTANCE_ID_NONE 0xFFFFFFFFu

#endif
