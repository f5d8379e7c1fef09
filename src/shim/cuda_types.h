/*
 * cuda_types.h - the slice of the CUDA driver API's C ABI that the sharing shim
 * intercepts, the fake libcuda (tests/fakes/fake_cuda.c) implements and the
 * allocator's CUDA backend calls (src/alloc/cuda_api.h), declared by hand.
 *
 * We do not ship or include NVIDIA's cuda.h: the shim dlopens whatever
 * libcuda.so.1 the node has, so all it needs is the ABI. Everything here is
 * restated from the public CUDA Driver API reference (docs.nvidia.com/cuda/
 * cuda-driver-api: "Data types used by CUDA driver", "Virtual Memory
 * Management", "Driver Entry Point Access"): 4-byte enums, opaque handles that
 * are pointers to incomplete structs, 64-bit device pointers, and struct
 * layouts whose x86_64 sizes the static asserts at the end pin down.
 *
 * TS_CU_API(X) lists every driver function either side touches, once, with its
 * real exported name (the _v2 / _ptsz suffixes are part of the ABI). The shim
 * derives its table of real entry points from it and the fake its prototypes,
 * so the two cannot drift apart. Header-only: no functions, no storage.
 *
 * Held against NVIDIA's headers: with TS_CUDA_NVIDIA_HEADERS defined (the
 * build does it where the toolkit's cuda.h is found) the types below come
 * from cuda.h itself and the hand declarations are skipped, so whatever
 * includes this (the fake libcuda, the conformance tests) is compiled with the
 * real driver's layouts and prototypes; tests/conformance/ checks the hand
 * declarations against cuda.h field by field (docs/sharing.md, Conformance).
 */
#ifndef TS_SHIM_CUDA_TYPES_H
#define TS_SHIM_CUDA_TYPES_H

#include <stddef.h>
#include <stdint.h>

#if defined(TS_CUDA_NVIDIA_HEADERS)
/* The real types and prototypes. __CUDA_API_VERSION_INTERNAL is what the
 * driver's own sources define: cuda.h then declares every export under its
 * real name (cuMemAlloc and cuMemAlloc_v2, cuLaunchKernel and
 * cuLaunchKernel_ptsz) instead of macro-mapping names to the newest. */
#ifndef __CUDA_API_VERSION_INTERNAL
#define __CUDA_API_VERSION_INTERNAL 1
#endif
#include <cuda.h>
#else
/* ---- results -------------------------------------------------------------- */
typedef enum cudaError_enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_INVALID_VALUE = 1,
    CUDA_ERROR_OUT_OF_MEMORY = 2,
    CUDA_ERROR_NOT_INITIALIZED = 3,
    CUDA_ERROR_DEINITIALIZED = 4,
    CUDA_ERROR_NO_DEVICE = 100,
    CUDA_ERROR_INVALID_DEVICE = 101,
    CUDA_ERROR_INVALID_IMAGE = 200,
    CUDA_ERROR_INVALID_CONTEXT = 201,
    CUDA_ERROR_ALREADY_MAPPED = 208,
    CUDA_ERROR_NOT_MAPPED = 211,
    CUDA_ERROR_INVALID_HANDLE = 400,
    CUDA_ERROR_ILLEGAL_STATE = 401,
    CUDA_ERROR_NOT_FOUND = 500,
    CUDA_ERROR_NOT_READY = 600,
    CUDA_ERROR_ILLEGAL_ADDRESS = 700,
    CUDA_ERROR_LAUNCH_FAILED = 719,
    CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE = 720,
    CUDA_ERROR_NOT_PERMITTED = 800,
    CUDA_ERROR_NOT_SUPPORTED = 801,
    CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED = 900,
    CUDA_ERROR_STREAM_CAPTURE_INVALIDATED = 901,
    CUDA_ERROR_UNKNOWN = 999,
} CUresult;

/* ---- scalar and handle types ---------------------------------------------- */
typedef int CUdevice;
typedef unsigned long long CUdeviceptr; /* CUdeviceptr_v2: 64 bits everywhere */
typedef unsigned int CUdeviceptr_v1;     /* the pre-CUDA-3.2 entry points' pointers */
typedef unsigned long long CUmemGenericAllocationHandle;
typedef uint64_t cuuint64_t;

typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUkern_st *CUkernel;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphNode_st *CUgraphNode;
typedef struct CUgraphExec_st *CUgraphExec;
typedef struct CUarray_st *CUarray;
typedef struct CUmipmappedArray_st *CUmipmappedArray;
typedef struct CUmemPoolHandle_st *CUmemoryPool;
typedef struct CUexecAffinityParam_st CUexecAffinityParam; /* only passed through */
typedef struct CUctxCreateParams_st CUctxCreateParams;     /* only passed through */

typedef struct CUuuid_st {
    char bytes[16];
} CUuuid;

/* ---- enums ---------------------------------------------------------------- */
typedef enum CUdevice_attribute_enum {
    CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
    CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED = 102,
    CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED = 115,
} CUdevice_attribute;

typedef enum CUmemAllocationType_enum {
    CU_MEM_ALLOCATION_TYPE_INVALID = 0,
    CU_MEM_ALLOCATION_TYPE_PINNED = 1,
} CUmemAllocationType;

typedef enum CUmemAllocationHandleType_enum {
    CU_MEM_HANDLE_TYPE_NONE = 0,
    CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR = 1,
    CU_MEM_HANDLE_TYPE_WIN32 = 2,
    CU_MEM_HANDLE_TYPE_WIN32_KMT = 4,
    CU_MEM_HANDLE_TYPE_FABRIC = 8,
} CUmemAllocationHandleType;

typedef enum CUmemLocationType_enum {
    CU_MEM_LOCATION_TYPE_INVALID = 0,
    CU_MEM_LOCATION_TYPE_DEVICE = 1,
    CU_MEM_LOCATION_TYPE_HOST = 2,
    CU_MEM_LOCATION_TYPE_HOST_NUMA = 3,
    CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT = 4,
} CUmemLocationType;

typedef enum CUmemAccess_flags_enum {
    CU_MEM_ACCESS_FLAGS_PROT_NONE = 0,
    CU_MEM_ACCESS_FLAGS_PROT_READ = 1,
    CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 3,
} CUmemAccess_flags;

typedef enum CUmemAllocationGranularity_flags_enum {
    CU_MEM_ALLOC_GRANULARITY_MINIMUM = 0,
    CU_MEM_ALLOC_GRANULARITY_RECOMMENDED = 1,
} CUmemAllocationGranularity_flags;

typedef enum CUmemPool_attribute_enum {
    CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES = 1,
    CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC = 2,
    CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES = 3,
    CU_MEMPOOL_ATTR_RELEASE_THRESHOLD = 4,
    CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT = 5,
    CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH = 6,
    CU_MEMPOOL_ATTR_USED_MEM_CURRENT = 7,
    CU_MEMPOOL_ATTR_USED_MEM_HIGH = 8,
} CUmemPool_attribute;

typedef enum CUarray_format_enum {
    CU_AD_FORMAT_UNSIGNED_INT8 = 0x01,
    CU_AD_FORMAT_UNSIGNED_INT16 = 0x02,
    CU_AD_FORMAT_UNSIGNED_INT32 = 0x03,
    CU_AD_FORMAT_SIGNED_INT8 = 0x08,
    CU_AD_FORMAT_SIGNED_INT16 = 0x09,
    CU_AD_FORMAT_SIGNED_INT32 = 0x0a,
    CU_AD_FORMAT_HALF = 0x10,
    CU_AD_FORMAT_FLOAT = 0x20,
} CUarray_format;

typedef enum CUstreamCaptureStatus_enum {
    CU_STREAM_CAPTURE_STATUS_NONE = 0,
    CU_STREAM_CAPTURE_STATUS_ACTIVE = 1,
    CU_STREAM_CAPTURE_STATUS_INVALIDATED = 2,
} CUstreamCaptureStatus;

typedef enum CUstreamCaptureMode_enum {
    CU_STREAM_CAPTURE_MODE_GLOBAL = 0,
    CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1,
    CU_STREAM_CAPTURE_MODE_RELAXED = 2,
} CUstreamCaptureMode;

typedef enum CUlaunchAttributeID_enum {
    CU_LAUNCH_ATTRIBUTE_IGNORE = 0,
    CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW = 1,
    CU_LAUNCH_ATTRIBUTE_COOPERATIVE = 2,
} CUlaunchAttributeID;

typedef enum CUgraphInstantiateResult_enum {
    CUDA_GRAPH_INSTANTIATE_SUCCESS = 0,
    CUDA_GRAPH_INSTANTIATE_ERROR = 1,
} CUgraphInstantiateResult;

typedef enum CUdriverProcAddressQueryResult_enum {
    CU_GET_PROC_ADDRESS_SUCCESS = 0,
    CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND = 1,
    CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT = 2,
} CUdriverProcAddressQueryResult;

/* ---- structs -------------------------------------------------------------- */
typedef struct CUmemLocation_st {
    CUmemLocationType type;
    int id;
} CUmemLocation;

typedef struct CUmemAllocationProp_st {
    CUmemAllocationType type;
    CUmemAllocationHandleType requestedHandleTypes;
    CUmemLocation location;
    void *win32HandleMetaData;
    struct {
        unsigned char compressionType;
        unsigned char gpuDirectRDMACapable;
        unsigned short usage;
        unsigned char reserved[4];
    } allocFlags;
} CUmemAllocationProp;

typedef struct CUmemAccessDesc_st {
    CUmemLocation location;
    CUmemAccess_flags flags;
} CUmemAccessDesc;

typedef struct CUmemPoolProps_st {
    CUmemAllocationType allocType;
    CUmemAllocationHandleType handleTypes;
    CUmemLocation location;
    void *win32SecurityAttributes;
    size_t maxSize;
    unsigned short usage;
    unsigned char reserved[54];
} CUmemPoolProps;

typedef struct CUDA_ARRAY_DESCRIPTOR_st {
    size_t Width;
    size_t Height;
    CUarray_format Format;
    unsigned int NumChannels;
} CUDA_ARRAY_DESCRIPTOR;

typedef struct CUDA_ARRAY3D_DESCRIPTOR_st {
    size_t Width;
    size_t Height;
    size_t Depth;
    CUarray_format Format;
    unsigned int NumChannels;
    unsigned int Flags;
} CUDA_ARRAY3D_DESCRIPTOR;

/* The pre-3.2 array descriptors: 32-bit dimensions. */
typedef struct CUDA_ARRAY_DESCRIPTOR_v1_st {
    unsigned int Width;
    unsigned int Height;
    CUarray_format Format;
    unsigned int NumChannels;
} CUDA_ARRAY_DESCRIPTOR_v1;

typedef struct CUDA_ARRAY3D_DESCRIPTOR_v1_st {
    unsigned int Width;
    unsigned int Height;
    unsigned int Depth;
    CUarray_format Format;
    unsigned int NumChannels;
    unsigned int Flags;
} CUDA_ARRAY3D_DESCRIPTOR_v1;

/* A graph memory node (cuGraphAddMemAllocNode): the driver fills dptr. */
typedef struct CUDA_MEM_ALLOC_NODE_PARAMS_v1_st {
    CUmemPoolProps poolProps;
    const CUmemAccessDesc *accessDescs;
    size_t accessDescCount;
    size_t bytesize;
    CUdeviceptr dptr;
} CUDA_MEM_ALLOC_NODE_PARAMS_v1;
typedef CUDA_MEM_ALLOC_NODE_PARAMS_v1 CUDA_MEM_ALLOC_NODE_PARAMS;

typedef struct CUDA_GRAPH_INSTANTIATE_PARAMS_st {
    cuuint64_t flags;
    CUstream hUploadStream;
    CUgraphNode hErrNode_out;
    CUgraphInstantiateResult result_out;
} CUDA_GRAPH_INSTANTIATE_PARAMS;

typedef struct CUDA_ARRAY_MEMORY_REQUIREMENTS_st {
    size_t size;
    size_t alignment;
    unsigned int reserved[4];
} CUDA_ARRAY_MEMORY_REQUIREMENTS;

typedef union CUlaunchAttributeValue_union {
    _Alignas(8) char pad[64]; /* cuda.h's members include pointers: 8-byte aligned */
    int cooperative;
} CUlaunchAttributeValue;

typedef struct CUlaunchAttribute_st {
    CUlaunchAttributeID id;
    char pad[8 - sizeof(CUlaunchAttributeID)];
    CUlaunchAttributeValue value;
} CUlaunchAttribute;

typedef struct CUlaunchConfig_st {
    unsigned int gridDimX, gridDimY, gridDimZ;
    unsigned int blockDimX, blockDimY, blockDimZ;
    unsigned int sharedMemBytes;
    CUstream hStream;
    CUlaunchAttribute *attrs;
    unsigned int numAttrs;
} CUlaunchConfig;

typedef struct CUDA_LAUNCH_PARAMS_st {
    CUfunction function;
    unsigned int gridDimX, gridDimY, gridDimZ;
    unsigned int blockDimX, blockDimY, blockDimZ;
    unsigned int sharedMemBytes;
    CUstream hStream;
    void **kernelParams;
} CUDA_LAUNCH_PARAMS;

typedef struct CUDA_KERNEL_NODE_PARAMS_v1_st {
    CUfunction func;
    unsigned int gridDimX, gridDimY, gridDimZ;
    unsigned int blockDimX, blockDimY, blockDimZ;
    unsigned int sharedMemBytes;
    void **kernelParams;
    void **extra;
} CUDA_KERNEL_NODE_PARAMS_v1;

typedef struct CUDA_KERNEL_NODE_PARAMS_v2_st {
    CUfunction func;
    unsigned int gridDimX, gridDimY, gridDimZ;
    unsigned int blockDimX, blockDimY, blockDimZ;
    unsigned int sharedMemBytes;
    void **kernelParams;
    void **extra;
    CUkernel kern;
    CUcontext ctx;
} CUDA_KERNEL_NODE_PARAMS_v2;

/* ---- x86_64 layout checks (sizes from the reference's struct definitions) - */
#if defined(__x86_64__) || defined(__aarch64__)
_Static_assert(sizeof(CUmemAllocationProp) == 32, "CUmemAllocationProp is 32 bytes");
_Static_assert(sizeof(CUmemAccessDesc) == 12, "CUmemAccessDesc is 12 bytes");
_Static_assert(sizeof(CUmemPoolProps) == 88, "CUmemPoolProps is 88 bytes");
_Static_assert(sizeof(CUDA_ARRAY_DESCRIPTOR) == 24, "CUDA_ARRAY_DESCRIPTOR is 24 bytes");
_Static_assert(sizeof(CUDA_ARRAY3D_DESCRIPTOR) == 40, "CUDA_ARRAY3D_DESCRIPTOR is 40 bytes");
_Static_assert(sizeof(CUlaunchAttribute) == 72, "CUlaunchAttribute is 72 bytes");
_Static_assert(offsetof(CUlaunchConfig, hStream) == 32, "CUlaunchConfig.hStream at 32");
_Static_assert(sizeof(CUlaunchConfig) == 56, "CUlaunchConfig is 56 bytes");
_Static_assert(sizeof(CUDA_LAUNCH_PARAMS) == 56, "CUDA_LAUNCH_PARAMS is 56 bytes");
_Static_assert(sizeof(CUDA_KERNEL_NODE_PARAMS_v1) == 56, "kernel node params v1: 56 bytes");
_Static_assert(sizeof(CUDA_KERNEL_NODE_PARAMS_v2) == 72, "kernel node params v2: 72 bytes");
#endif

#endif /* TS_CUDA_NVIDIA_HEADERS */

/* ---- constants: ours, equal to cuda.h's (tests/conformance checks) ------ */
/* Special stream handles (cuda.h: CU_STREAM_LEGACY, CU_STREAM_PER_THREAD). */
#define TS_CU_STREAM_LEGACY ((CUstream)0x1)
#define TS_CU_STREAM_PER_THREAD ((CUstream)0x2)

/* cuGetProcAddress flags (CUdriverProcAddress_flags). */
#define TS_CU_GET_PROC_ADDRESS_DEFAULT 0ULL
#define TS_CU_GET_PROC_ADDRESS_LEGACY_STREAM 1ULL
#define TS_CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM 2ULL

/* cuEventCreate flags. */
#define TS_CU_EVENT_DEFAULT 0x0u
#define TS_CU_EVENT_DISABLE_TIMING 0x2u

/* CUDA_ARRAY3D_DESCRIPTOR.Flags: the array holds no memory of its own. */
#define TS_CU_ARRAY3D_SPARSE 0x40u
#define TS_CU_ARRAY3D_DEFERRED_MAPPING 0x80u

/* cuMemAllocManaged flags. */
#define TS_CU_MEM_ATTACH_GLOBAL 0x1u
#define TS_CU_MEM_ATTACH_HOST 0x2u

/* cuLaunchKernel `extra` markers. */
#define TS_CU_LAUNCH_PARAM_END ((void *)0x00)
#define TS_CU_LAUNCH_PARAM_BUFFER_POINTER ((void *)0x01)
#define TS_CU_LAUNCH_PARAM_BUFFER_SIZE ((void *)0x02)

/* ---- the functions ---------------------------------------------------------
 * X(name, (parameter list), (argument names)). Every name is a real export of
 * libcuda.so.1; *_ptsz are the per-thread-default-stream variants that
 * cuGetProcAddress hands out under CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM.
 */
#define TS_CU_LAUNCH_DIMS                                                                     \
    unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,                      \
        unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ
#define TS_CU_LAUNCH_DIM_ARGS gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ

#define TS_CU_API(X)                                                                          \
    X(cuInit, (unsigned int Flags), (Flags))                                                  \
    X(cuDriverGetVersion, (int *driverVersion), (driverVersion))                              \
    X(cuDeviceGet, (CUdevice * device, int ordinal), (device, ordinal))                       \
    X(cuDeviceGetCount, (int *count), (count))                                                \
    X(cuDeviceGetName, (char *name, int len, CUdevice dev), (name, len, dev))                 \
    X(cuDeviceGetUuid, (CUuuid * uuid, CUdevice dev), (uuid, dev))                            \
    X(cuDeviceGetUuid_v2, (CUuuid * uuid, CUdevice dev), (uuid, dev))                         \
    X(cuDeviceTotalMem_v2, (size_t * bytes, CUdevice dev), (bytes, dev))                      \
    X(cuDeviceGetAttribute, (int *pi, CUdevice_attribute attrib, CUdevice dev),               \
      (pi, attrib, dev))                                                                      \
    X(cuDevicePrimaryCtxRetain, (CUcontext * pctx, CUdevice dev), (pctx, dev))                \
    X(cuDevicePrimaryCtxRelease, (CUdevice dev), (dev))                                       \
    X(cuDevicePrimaryCtxRelease_v2, (CUdevice dev), (dev))                                    \
    X(cuDevicePrimaryCtxReset_v2, (CUdevice dev), (dev))                                      \
    X(cuCtxCreate_v2, (CUcontext * pctx, unsigned int flags, CUdevice dev), (pctx, flags, dev)) \
    X(cuCtxCreate_v3,                                                                         \
      (CUcontext * pctx, CUexecAffinityParam * paramsArray, int numParams,                    \
       unsigned int flags, CUdevice dev),                                                     \
      (pctx, paramsArray, numParams, flags, dev))                                             \
    X(cuCtxCreate_v4,                                                                         \
      (CUcontext * pctx, CUctxCreateParams * ctxCreateParams, unsigned int flags,             \
       CUdevice dev),                                                                         \
      (pctx, ctxCreateParams, flags, dev))                                                    \
    X(cuCtxDestroy_v2, (CUcontext ctx), (ctx))                                                \
    X(cuCtxSetCurrent, (CUcontext ctx), (ctx))                                                \
    X(cuCtxGetCurrent, (CUcontext * pctx), (pctx))                                            \
    X(cuCtxPushCurrent_v2, (CUcontext ctx), (ctx))                                            \
    X(cuCtxPopCurrent_v2, (CUcontext * pctx), (pctx))                                         \
    X(cuCtxGetDevice, (CUdevice * device), (device))                                          \
    X(cuCtxSynchronize, (void), ())                                                           \
    X(cuMemGetInfo_v2, (size_t * free, size_t * total), (free, total))                        \
    X(cuMemAlloc_v2, (CUdeviceptr * dptr, size_t bytesize), (dptr, bytesize))                 \
    X(cuMemAllocPitch_v2,                                                                     \
      (CUdeviceptr * dptr, size_t * pPitch, size_t WidthInBytes, size_t Height,               \
       unsigned int ElementSizeBytes),                                                        \
      (dptr, pPitch, WidthInBytes, Height, ElementSizeBytes))                                 \
    X(cuMemAllocManaged, (CUdeviceptr * dptr, size_t bytesize, unsigned int flags),           \
      (dptr, bytesize, flags))                                                                \
    X(cuMemFree_v2, (CUdeviceptr dptr), (dptr))                                               \
    X(cuMemAllocAsync, (CUdeviceptr * dptr, size_t bytesize, CUstream hStream),               \
      (dptr, bytesize, hStream))                                                              \
    X(cuMemAllocAsync_ptsz, (CUdeviceptr * dptr, size_t bytesize, CUstream hStream),          \
      (dptr, bytesize, hStream))                                                              \
    X(cuMemAllocFromPoolAsync,                                                                \
      (CUdeviceptr * dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream),             \
      (dptr, bytesize, pool, hStream))                                                        \
    X(cuMemAllocFromPoolAsync_ptsz,                                                           \
      (CUdeviceptr * dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream),             \
      (dptr, bytesize, pool, hStream))                                                        \
    X(cuMemFreeAsync, (CUdeviceptr dptr, CUstream hStream), (dptr, hStream))                  \
    X(cuMemFreeAsync_ptsz, (CUdeviceptr dptr, CUstream hStream), (dptr, hStream))             \
    X(cuMemPoolCreate, (CUmemoryPool * pool, const CUmemPoolProps *poolProps),                \
      (pool, poolProps))                                                                      \
    X(cuMemPoolDestroy, (CUmemoryPool pool), (pool))                                          \
    X(cuDeviceGetDefaultMemPool, (CUmemoryPool * pool_out, CUdevice dev), (pool_out, dev))    \
    X(cuDeviceGetMemPool, (CUmemoryPool * pool, CUdevice dev), (pool, dev))                   \
    X(cuDeviceSetMemPool, (CUdevice dev, CUmemoryPool pool), (dev, pool))                     \
    X(cuMemPoolTrimTo, (CUmemoryPool pool, size_t minBytesToKeep), (pool, minBytesToKeep))    \
    X(cuMemPoolSetAttribute, (CUmemoryPool pool, CUmemPool_attribute attr, void *value),      \
      (pool, attr, value))                                                                    \
    X(cuMemPoolGetAttribute, (CUmemoryPool pool, CUmemPool_attribute attr, void *value),      \
      (pool, attr, value))                                                                    \
    X(cuMemsetD8_v2, (CUdeviceptr dstDevice, unsigned char uc, size_t N), (dstDevice, uc, N)) \
    X(cuMemcpyHtoD_v2, (CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount),        \
      (dstDevice, srcHost, ByteCount))                                                        \
    X(cuMemcpyDtoH_v2, (void *dstHost, CUdeviceptr srcDevice, size_t ByteCount),              \
      (dstHost, srcDevice, ByteCount))                                                        \
    X(cuArrayCreate_v2, (CUarray * pHandle, const CUDA_ARRAY_DESCRIPTOR *pAllocateArray),     \
      (pHandle, pAllocateArray))                                                              \
    X(cuArray3DCreate_v2, (CUarray * pHandle, const CUDA_ARRAY3D_DESCRIPTOR *pAllocateArray), \
      (pHandle, pAllocateArray))                                                              \
    X(cuArrayDestroy, (CUarray hArray), (hArray))                                             \
    X(cuArrayGetMemoryRequirements,                                                           \
      (CUDA_ARRAY_MEMORY_REQUIREMENTS * memoryRequirements, CUarray array, CUdevice device),  \
      (memoryRequirements, array, device))                                                    \
    X(cuMipmappedArrayCreate,                                                                 \
      (CUmipmappedArray * pHandle, const CUDA_ARRAY3D_DESCRIPTOR *pMipmappedArrayDesc,        \
       unsigned int numMipmapLevels),                                                         \
      (pHandle, pMipmappedArrayDesc, numMipmapLevels))                                        \
    X(cuMipmappedArrayDestroy, (CUmipmappedArray hMipmappedArray), (hMipmappedArray))         \
    X(cuMipmappedArrayGetMemoryRequirements,                                                  \
      (CUDA_ARRAY_MEMORY_REQUIREMENTS * memoryRequirements, CUmipmappedArray mipmap,          \
       CUdevice device),                                                                      \
      (memoryRequirements, mipmap, device))                                                   \
    X(cuMemGetAllocationGranularity,                                                          \
      (size_t * granularity, const CUmemAllocationProp *prop,                                 \
       CUmemAllocationGranularity_flags option),                                              \
      (granularity, prop, option))                                                            \
    X(cuMemCreate,                                                                            \
      (CUmemGenericAllocationHandle * handle, size_t size, const CUmemAllocationProp *prop,   \
       unsigned long long flags),                                                             \
      (handle, size, prop, flags))                                                            \
    X(cuMemRelease, (CUmemGenericAllocationHandle handle), (handle))                          \
    X(cuMemRetainAllocationHandle, (CUmemGenericAllocationHandle * handle, void *addr),       \
      (handle, addr))                                                                         \
    X(cuMemAddressReserve,                                                                    \
      (CUdeviceptr * ptr, size_t size, size_t alignment, CUdeviceptr addr,                    \
       unsigned long long flags),                                                             \
      (ptr, size, alignment, addr, flags))                                                    \
    X(cuMemAddressFree, (CUdeviceptr ptr, size_t size), (ptr, size))                          \
    X(cuMemMap,                                                                               \
      (CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,      \
       unsigned long long flags),                                                             \
      (ptr, size, offset, handle, flags))                                                     \
    X(cuMemUnmap, (CUdeviceptr ptr, size_t size), (ptr, size))                                \
    X(cuMemSetAccess,                                                                         \
      (CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count),              \
      (ptr, size, desc, count))                                                               \
    X(cuStreamCreate, (CUstream * phStream, unsigned int Flags), (phStream, Flags))           \
    X(cuStreamDestroy_v2, (CUstream hStream), (hStream))                                      \
    X(cuStreamSynchronize, (CUstream hStream), (hStream))                                     \
    X(cuStreamSynchronize_ptsz, (CUstream hStream), (hStream))                                \
    X(cuStreamQuery, (CUstream hStream), (hStream))                                           \
    X(cuStreamQuery_ptsz, (CUstream hStream), (hStream))                                      \
    X(cuStreamWaitEvent, (CUstream hStream, CUevent hEvent, unsigned int Flags),              \
      (hStream, hEvent, Flags))                                                               \
    X(cuStreamWaitEvent_ptsz, (CUstream hStream, CUevent hEvent, unsigned int Flags),         \
      (hStream, hEvent, Flags))                                                               \
    X(cuStreamGetCtx, (CUstream hStream, CUcontext * pctx), (hStream, pctx))                  \
    X(cuStreamGetCtx_ptsz, (CUstream hStream, CUcontext * pctx), (hStream, pctx))             \
    X(cuStreamBeginCapture_v2, (CUstream hStream, CUstreamCaptureMode mode), (hStream, mode)) \
    X(cuStreamBeginCapture_v2_ptsz, (CUstream hStream, CUstreamCaptureMode mode),             \
      (hStream, mode))                                                                        \
    X(cuStreamEndCapture, (CUstream hStream, CUgraph * phGraph), (hStream, phGraph))          \
    X(cuStreamEndCapture_ptsz, (CUstream hStream, CUgraph * phGraph), (hStream, phGraph))     \
    X(cuStreamIsCapturing, (CUstream hStream, CUstreamCaptureStatus * captureStatus),         \
      (hStream, captureStatus))                                                               \
    X(cuStreamIsCapturing_ptsz, (CUstream hStream, CUstreamCaptureStatus * captureStatus),    \
      (hStream, captureStatus))                                                               \
    X(cuEventCreate, (CUevent * phEvent, unsigned int Flags), (phEvent, Flags))               \
    X(cuEventRecord, (CUevent hEvent, CUstream hStream), (hEvent, hStream))                   \
    X(cuEventRecord_ptsz, (CUevent hEvent, CUstream hStream), (hEvent, hStream))              \
    X(cuEventQuery, (CUevent hEvent), (hEvent))                                               \
    X(cuEventSynchronize, (CUevent hEvent), (hEvent))                                         \
    X(cuEventElapsedTime, (float *pMilliseconds, CUevent hStart, CUevent hEnd),               \
      (pMilliseconds, hStart, hEnd))                                                          \
    X(cuEventDestroy_v2, (CUevent hEvent), (hEvent))                                          \
    X(cuModuleLoadData, (CUmodule * module, const void *image), (module, image))              \
    X(cuModuleGetFunction, (CUfunction * hfunc, CUmodule hmod, const char *name),             \
      (hfunc, hmod, name))                                                                    \
    X(cuModuleUnload, (CUmodule hmod), (hmod))                                                \
    X(cuLaunchKernel,                                                                         \
      (CUfunction f, TS_CU_LAUNCH_DIMS, unsigned int sharedMemBytes, CUstream hStream,        \
       void **kernelParams, void **extra),                                                    \
      (f, TS_CU_LAUNCH_DIM_ARGS, sharedMemBytes, hStream, kernelParams, extra))               \
    X(cuLaunchKernel_ptsz,                                                                    \
      (CUfunction f, TS_CU_LAUNCH_DIMS, unsigned int sharedMemBytes, CUstream hStream,        \
       void **kernelParams, void **extra),                                                    \
      (f, TS_CU_LAUNCH_DIM_ARGS, sharedMemBytes, hStream, kernelParams, extra))               \
    X(cuLaunchCooperativeKernel,                                                              \
      (CUfunction f, TS_CU_LAUNCH_DIMS, unsigned int sharedMemBytes, CUstream hStream,        \
       void **kernelParams),                                                                  \
      (f, TS_CU_LAUNCH_DIM_ARGS, sharedMemBytes, hStream, kernelParams))                      \
    X(cuLaunchCooperativeKernel_ptsz,                                                         \
      (CUfunction f, TS_CU_LAUNCH_DIMS, unsigned int sharedMemBytes, CUstream hStream,        \
       void **kernelParams),                                                                  \
      (f, TS_CU_LAUNCH_DIM_ARGS, sharedMemBytes, hStream, kernelParams))                      \
    X(cuLaunchCooperativeKernelMultiDevice,                                                   \
      (CUDA_LAUNCH_PARAMS * launchParamsList, unsigned int numDevices, unsigned int flags),   \
      (launchParamsList, numDevices, flags))                                                  \
    X(cuLaunchKernelEx,                                                                       \
      (const CUlaunchConfig *config, CUfunction f, void **kernelParams, void **extra),        \
      (config, f, kernelParams, extra))                                                       \
    X(cuLaunchKernelEx_ptsz,                                                                  \
      (const CUlaunchConfig *config, CUfunction f, void **kernelParams, void **extra),        \
      (config, f, kernelParams, extra))                                                       \
    X(cuGraphCreate, (CUgraph * phGraph, unsigned int flags), (phGraph, flags))               \
    X(cuGraphAddKernelNode,                                                                   \
      (CUgraphNode * phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,            \
       size_t numDependencies, const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams),                 \
      (phGraphNode, hGraph, dependencies, numDependencies, nodeParams))                       \
    X(cuGraphAddKernelNode_v2,                                                                \
      (CUgraphNode * phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,            \
       size_t numDependencies, const CUDA_KERNEL_NODE_PARAMS_v2 *nodeParams),                 \
      (phGraphNode, hGraph, dependencies, numDependencies, nodeParams))                       \
    X(cuGraphInstantiateWithFlags,                                                            \
      (CUgraphExec * phGraphExec, CUgraph hGraph, unsigned long long flags),                  \
      (phGraphExec, hGraph, flags))                                                           \
    X(cuGraphLaunch, (CUgraphExec hGraphExec, CUstream hStream), (hGraphExec, hStream))       \
    X(cuGraphLaunch_ptsz, (CUgraphExec hGraphExec, CUstream hStream), (hGraphExec, hStream))  \
    X(cuGraphExecDestroy, (CUgraphExec hGraphExec), (hGraphExec))                             \
    X(cuGraphDestroy, (CUgraph hGraph), (hGraph))                                             \
    X(cuGraphAddMemAllocNode,                                                                 \
      (CUgraphNode * phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,            \
       size_t numDependencies, CUDA_MEM_ALLOC_NODE_PARAMS *nodeParams),                       \
      (phGraphNode, hGraph, dependencies, numDependencies, nodeParams))                       \
    X(cuGraphAddMemFreeNode,                                                                  \
      (CUgraphNode * phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,            \
       size_t numDependencies, CUdeviceptr dptr),                                             \
      (phGraphNode, hGraph, dependencies, numDependencies, dptr))                             \
    X(cuDeviceGraphMemTrim, (CUdevice device), (device))                                      \
    X(cuGraphInstantiate,                                                                     \
      (CUgraphExec * phGraphExec, CUgraph hGraph, CUgraphNode * phErrorNode, char *logBuffer, \
       size_t bufferSize),                                                                    \
      (phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize))                              \
    X(cuGraphInstantiate_v2,                                                                  \
      (CUgraphExec * phGraphExec, CUgraph hGraph, CUgraphNode * phErrorNode, char *logBuffer, \
       size_t bufferSize),                                                                    \
      (phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize))                              \
    X(cuGraphInstantiateWithParams,                                                           \
      (CUgraphExec * phGraphExec, CUgraph hGraph, CUDA_GRAPH_INSTANTIATE_PARAMS *params),     \
      (phGraphExec, hGraph, params))                                                          \
    X(cuGraphInstantiateWithParams_ptsz,                                                      \
      (CUgraphExec * phGraphExec, CUgraph hGraph, CUDA_GRAPH_INSTANTIATE_PARAMS *params),     \
      (phGraphExec, hGraph, params))                                                          \
    X(cuMemAlloc, (CUdeviceptr_v1 * dptr, unsigned int bytesize), (dptr, bytesize))           \
    X(cuMemAllocPitch,                                                                        \
      (CUdeviceptr_v1 * dptr, unsigned int *pPitch, unsigned int WidthInBytes,                \
       unsigned int Height, unsigned int ElementSizeBytes),                                   \
      (dptr, pPitch, WidthInBytes, Height, ElementSizeBytes))                                 \
    X(cuMemFree, (CUdeviceptr_v1 dptr), (dptr))                                               \
    X(cuMemGetInfo, (unsigned int *free, unsigned int *total), (free, total))                 \
    X(cuDeviceTotalMem, (unsigned int *bytes, CUdevice dev), (bytes, dev))                    \
    X(cuCtxCreate, (CUcontext * pctx, unsigned int flags, CUdevice dev), (pctx, flags, dev))  \
    X(cuCtxDestroy, (CUcontext ctx), (ctx))                                                   \
    X(cuDevicePrimaryCtxReset, (CUdevice dev), (dev))                                         \
    X(cuArrayCreate, (CUarray * pHandle, const CUDA_ARRAY_DESCRIPTOR_v1 *pAllocateArray),     \
      (pHandle, pAllocateArray))                                                              \
    X(cuArray3DCreate, (CUarray * pHandle, const CUDA_ARRAY3D_DESCRIPTOR_v1 *pAllocateArray), \
      (pHandle, pAllocateArray))                                                              \
    X(cuGetErrorString, (CUresult error, const char **pStr), (error, pStr))                   \
    X(cuGetErrorName, (CUresult error, const char **pStr), (error, pStr))                     \
    X(cuGetProcAddress,                                                                       \
      (const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags),                    \
      (symbol, pfn, cudaVersion, flags))                                                      \
    X(cuGetProcAddress_v2,                                                                    \
      (const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,                     \
       CUdriverProcAddressQueryResult *symbolStatus),                                         \
      (symbol, pfn, cudaVersion, flags, symbolStatus))

/* Function-pointer types, one per entry: ts_cu_pfn_cuMemAlloc_v2 etc. */
#define TS_CU_PFN_TYPEDEF(name, params, args) typedef CUresult(*ts_cu_pfn_##name) params;
TS_CU_API(TS_CU_PFN_TYPEDEF)
#undef TS_CU_PFN_TYPEDEF

#endif
