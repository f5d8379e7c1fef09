/*
 * cuda_api.h - internal: the few CUDA driver API types, constants and
 * function signatures the allocator's CUDA backend calls, declared here from
 * the public driver API reference (no NVIDIA header is used or needed). Only
 * what dev_cuda.c resolves with dlsym is listed.
 */
#ifndef TS_ALLOC_CUDA_API_H
#define TS_ALLOC_CUDA_API_H

#include <stddef.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef unsigned long long CUmemGenericAllocationHandle;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;

#define CUDA_SUCCESS 0
#define CUDA_ERROR_OUT_OF_MEMORY 2
#define CUDA_ERROR_NOT_READY 600

/* CUmemAllocationType, CUmemLocationType, CUmemAccess_flags,
 * CUmemAllocationGranularity_flags, CUmemAllocationHandleType values */
#define CU_MEM_ALLOCATION_TYPE_PINNED 1
#define CU_MEM_LOCATION_TYPE_DEVICE 1
#define CU_MEM_ACCESS_FLAGS_PROT_READWRITE 3
#define CU_MEM_ALLOC_GRANULARITY_MINIMUM 0
#define CU_MEM_HANDLE_TYPE_NONE 0
#define CU_EVENT_DISABLE_TIMING 2

typedef struct CUmemLocation_st {
    int type; /* CUmemLocationType */
    int id;
} CUmemLocation;

typedef struct CUmemAllocationProp_st {
    int type;                 /* CUmemAllocationType */
    int requestedHandleTypes; /* CUmemAllocationHandleType */
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
    int flags; /* CUmemAccess_flags */
} CUmemAccessDesc;

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
      (size_t * granularity, const CUmemAllocationProp *prop, int option))                    \
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
