/*
 * cuda_api.h - internal: the few CUDA driver API types, constants and
 * function signatures the allocator's CUDA backend calls, declared here from
 * the public driver API reference (no NVIDIA header is used or needed). Only
 * what dev_cuda.c resolves with dlsym is listed.
 *
 * With TS_CUDA_NVIDIA_HEADERS defined the types come from NVIDIA's cuda.h
 * instead; tests/conformance/ checks these declarations against it (layouts,
 * values, and each TS_CUDA_FUNCS prototype against the driver's export).
 */
#ifndef TS_ALLOC_CUDA_API_H
#define TS_ALLOC_CUDA_API_H

#include <stddef.h>

#if defined(TS_CUDA_NVIDIA_HEADERS)
#ifndef __CUDA_API_VERSION_INTERNAL
#define __CUDA_API_VERSION_INTERNAL 1
#endif
#include <cuda.h>
#else
/* 4-byte enums, as in cuda.h (an int in their place is a different type to
 * the compiler: the conformance test compares function types exactly). */
typedef enum cudaError_enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_OUT_OF_MEMORY = 2,
    CUDA_ERROR_NOT_READY = 600,
} CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef unsigned long long CUmemGenericAllocationHandle;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;

typedef enum CUmemAllocationType_enum { CU_MEM_ALLOCATION_TYPE_PINNED = 1 } CUmemAllocationType;
typedef enum CUmemLocationType_enum { CU_MEM_LOCATION_TYPE_DEVICE = 1 } CUmemLocationType;
typedef enum CUmemAccess_flags_enum { CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 3 } CUmemAccess_flags;
typedef enum CUmemAllocationGranularity_flags_enum {
    CU_MEM_ALLOC_GRANULARITY_MINIMUM = 0
} CUmemAllocationGranularity_flags;
typedef enum CUmemAllocationHandleType_enum {
    CU_MEM_HANDLE_TYPE_NONE = 0
} CUmemAllocationHandleType;
typedef enum CUevent_flags_enum { CU_EVENT_DISABLE_TIMING = 2 } CUevent_flags;

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
#endif /* TS_CUDA_NVIDIA_HEADERS */

/* X(name, return, args): the table dev_cuda.c builds; R = required. */
#define TS_CUDA_FUNCS(X)                                                                      \
    X(cuInit, 1, (unsigned int flags))                                                        \
    X(cuDeviceGet, 1, (CUdevice * dev, int ordinal))                                          \
    X(cuDeviceTotalMem_v2, 1, (size_t * bytes, CUdevice dev))                                 \
    X(cuDevicePrimaryCtxRetain, 1, (CUcontext * ctx, CUdevice dev))                           \
    X(cuDevicePrimaryCtxRelease_v2, 0, (CUdevice dev))                                        \
    X(cuCtxSetCurrent, 1, (CUcontext ctx))                                                    \
    X(cuMemAlloc_v2, 1, (CUdeviceptr * ptr, size_t size))                                     \
    X(cuMemFree_v2, 1, (CUdeviceptr ptr))                                                     \
    X(cuMemGetAllocationGranularity, 1,                                                       \
      (size_t * granularity, const CUmemAllocationProp *prop,                                 \
       CUmemAllocationGranularity_flags option))                                              \
    X(cuMemAddressReserve, 1,                                                                 \
      (CUdeviceptr * ptr, size_t size, size_t alignment, CUdeviceptr addr,                    \
       unsigned long long flags))                                                             \
    X(cuMemAddressFree, 1, (CUdeviceptr ptr, size_t size))                                    \
    X(cuMemCreate, 1,                                                                         \
      (CUmemGenericAllocationHandle * handle, size_t size, const CUmemAllocationProp *prop,   \
       unsigned long long flags))                                                             \
    X(cuMemRelease, 1, (CUmemGenericAllocationHandle handle))                                 \
    X(cuMemMap, 1,                                                                            \
      (CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,      \
       unsigned long long flags))                                                             \
    X(cuMemUnmap, 1, (CUdeviceptr ptr, size_t size))                                          \
    X(cuMemSetAccess, 1,                                                                      \
      (CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count))              \
    X(cuEventCreate, 1, (CUevent * event, unsigned int flags))                                \
    X(cuEventRecord, 1, (CUevent event, CUstream stream))                                     \
    X(cuEventQuery, 1, (CUevent event))                                                       \
    X(cuEventSynchronize, 1, (CUevent event))                                                 \
    X(cuEventDestroy_v2, 1, (CUevent event))                                                  \
    X(cuStreamSynchronize, 1, (CUstream stream))                                              \
    X(cuStreamWaitEvent, 1, (CUstream stream, CUevent event, unsigned int flags))             \
    X(cuGetErrorString, 0, (CUresult error, const char **str))

#endif
