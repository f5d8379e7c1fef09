/*
 * cuda_api.h - internal: the CUDA driver functions the allocator's CUDA
 * backend calls (only what dev_cuda.c resolves with dlsym). Their types and
 * constants are the sharing shim's hand declarations of the driver ABI
 * (shim/cuda_types.h, one copy for the shim, the fake libcuda and the
 * allocator; no NVIDIA header is used or needed), or NVIDIA's cuda.h with
 * TS_CUDA_NVIDIA_HEADERS defined. tests/conformance/ checks those types
 * against cuda.h, and each TS_CUDA_FUNCS prototype against the driver's
 * export (conf_shim_api.c).
 */
#ifndef TS_ALLOC_CUDA_API_H
#define TS_ALLOC_CUDA_API_H

#include "shim/cuda_types.h"

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
