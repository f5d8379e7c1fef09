/*
 * conf_shim_layout.c - the shim's hand-declared driver types
 * (src/shim/cuda_types.h) held against NVIDIA's cuda.h in one translation
 * unit: every struct's size, alignment and field offsets, every enumerator
 * and constant the shim and the fake libcuda use, and the scalar and handle
 * typedefs. The project's declarations are renamed prj_* while included
 * (rename_shim_cuda.h), NVIDIA's keep their names; a difference is a compile
 * error naming it. Function prototypes are checked in conf_shim_api.c.
 */
#include "conformance/rename_shim_cuda.h"
#include "shim/cuda_types.h"
#define PRJ_RENAME_UNDO
#include "conformance/rename_shim_cuda.h"
#undef PRJ_RENAME_UNDO

/* Our own TS_CU_* constants, kept: compared with cuda.h's below. */
#include <cuda.h>

#include "conformance/conformance.h"

/* scalar and handle types */
SAME_SCALAR(CUdevice);
SAME_SCALAR(CUdeviceptr);
SAME_SCALAR(CUmemGenericAllocationHandle);
SAME_SCALAR(cuuint64_t);
SAME_SCALAR(CUcontext);
SAME_SCALAR(CUmodule);
SAME_SCALAR(CUfunction);
SAME_SCALAR(CUkernel);
SAME_SCALAR(CUstream);
SAME_SCALAR(CUevent);
SAME_SCALAR(CUgraph);
SAME_SCALAR(CUgraphNode);
SAME_SCALAR(CUgraphExec);
SAME_SCALAR(CUarray);
SAME_SCALAR(CUmipmappedArray);
SAME_SCALAR(CUmemoryPool);
SAME_TYPE_SIZE(CUresult);
SAME_TYPE_SIZE(CUdevice_attribute);
SAME_TYPE_SIZE(CUmemAllocationType);
SAME_TYPE_SIZE(CUmemAllocationHandleType);
SAME_TYPE_SIZE(CUmemLocationType);
SAME_TYPE_SIZE(CUmemAccess_flags);
SAME_TYPE_SIZE(CUmemAllocationGranularity_flags);
SAME_TYPE_SIZE(CUarray_format);
SAME_TYPE_SIZE(CUstreamCaptureStatus);
SAME_TYPE_SIZE(CUstreamCaptureMode);
SAME_TYPE_SIZE(CUlaunchAttributeID);
SAME_TYPE_SIZE(CUdriverProcAddressQueryResult);

/* error codes */
SAME_VALUE(CUDA_SUCCESS);
SAME_VALUE(CUDA_ERROR_INVALID_VALUE);
SAME_VALUE(CUDA_ERROR_OUT_OF_MEMORY);
SAME_VALUE(CUDA_ERROR_NOT_INITIALIZED);
SAME_VALUE(CUDA_ERROR_DEINITIALIZED);
SAME_VALUE(CUDA_ERROR_NO_DEVICE);
SAME_VALUE(CUDA_ERROR_INVALID_DEVICE);
SAME_VALUE(CUDA_ERROR_INVALID_IMAGE);
SAME_VALUE(CUDA_ERROR_INVALID_CONTEXT);
SAME_VALUE(CUDA_ERROR_ALREADY_MAPPED);
SAME_VALUE(CUDA_ERROR_NOT_MAPPED);
SAME_VALUE(CUDA_ERROR_INVALID_HANDLE);
SAME_VALUE(CUDA_ERROR_ILLEGAL_STATE);
SAME_VALUE(CUDA_ERROR_NOT_FOUND);
SAME_VALUE(CUDA_ERROR_NOT_READY);
SAME_VALUE(CUDA_ERROR_ILLEGAL_ADDRESS);
SAME_VALUE(CUDA_ERROR_LAUNCH_FAILED);
SAME_VALUE(CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE);
SAME_VALUE(CUDA_ERROR_NOT_PERMITTED);
SAME_VALUE(CUDA_ERROR_NOT_SUPPORTED);
SAME_VALUE(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
SAME_VALUE(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
SAME_VALUE(CUDA_ERROR_UNKNOWN);

/* enumerators */
SAME_VALUE(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
SAME_VALUE(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
SAME_VALUE(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
SAME_VALUE(CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED);
SAME_VALUE(CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED);
SAME_VALUE(CU_MEM_ALLOCATION_TYPE_INVALID);
SAME_VALUE(CU_MEM_ALLOCATION_TYPE_PINNED);
SAME_VALUE(CU_MEM_HANDLE_TYPE_NONE);
SAME_VALUE(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
SAME_VALUE(CU_MEM_HANDLE_TYPE_WIN32);
SAME_VALUE(CU_MEM_HANDLE_TYPE_WIN32_KMT);
SAME_VALUE(CU_MEM_HANDLE_TYPE_FABRIC);
SAME_VALUE(CU_MEM_LOCATION_TYPE_INVALID);
SAME_VALUE(CU_MEM_LOCATION_TYPE_DEVICE);
SAME_VALUE(CU_MEM_LOCATION_TYPE_HOST);
SAME_VALUE(CU_MEM_LOCATION_TYPE_HOST_NUMA);
SAME_VALUE(CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT);
SAME_VALUE(CU_MEM_ACCESS_FLAGS_PROT_NONE);
SAME_VALUE(CU_MEM_ACCESS_FLAGS_PROT_READ);
SAME_VALUE(CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
SAME_VALUE(CU_MEM_ALLOC_GRANULARITY_MINIMUM);
SAME_VALUE(CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
SAME_TYPE_SIZE(CUmemPool_attribute);
SAME_VALUE(CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES);
SAME_VALUE(CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC);
SAME_VALUE(CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES);
SAME_VALUE(CU_MEMPOOL_ATTR_RELEASE_THRESHOLD);
SAME_VALUE(CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT);
SAME_VALUE(CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH);
SAME_VALUE(CU_MEMPOOL_ATTR_USED_MEM_CURRENT);
SAME_VALUE(CU_MEMPOOL_ATTR_USED_MEM_HIGH);
SAME_VALUE(CU_AD_FORMAT_UNSIGNED_INT8);
SAME_VALUE(CU_AD_FORMAT_UNSIGNED_INT16);
SAME_VALUE(CU_AD_FORMAT_UNSIGNED_INT32);
SAME_VALUE(CU_AD_FORMAT_SIGNED_INT8);
SAME_VALUE(CU_AD_FORMAT_SIGNED_INT16);
SAME_VALUE(CU_AD_FORMAT_SIGNED_INT32);
SAME_VALUE(CU_AD_FORMAT_HALF);
SAME_VALUE(CU_AD_FORMAT_FLOAT);
SAME_VALUE(CU_STREAM_CAPTURE_STATUS_NONE);
SAME_VALUE(CU_STREAM_CAPTURE_STATUS_ACTIVE);
SAME_VALUE(CU_STREAM_CAPTURE_STATUS_INVALIDATED);
SAME_VALUE(CU_STREAM_CAPTURE_MODE_GLOBAL);
SAME_VALUE(CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
SAME_VALUE(CU_STREAM_CAPTURE_MODE_RELAXED);
SAME_VALUE(CU_LAUNCH_ATTRIBUTE_IGNORE);
SAME_VALUE(CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW);
SAME_VALUE(CU_LAUNCH_ATTRIBUTE_COOPERATIVE);
SAME_VALUE(CU_GET_PROC_ADDRESS_SUCCESS);
SAME_VALUE(CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
SAME_VALUE(CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);

/* our TS_CU_* constants (kept under their own names) */
#define SAME_TS(ours, theirs)                                                                \
    _Static_assert((unsigned long long)(ours) == (unsigned long long)(theirs),               \
                   #ours " differs from " #theirs);                                          \
    CONF_TICK
SAME_TS(TS_CU_GET_PROC_ADDRESS_DEFAULT, CU_GET_PROC_ADDRESS_DEFAULT);
SAME_TS(TS_CU_GET_PROC_ADDRESS_LEGACY_STREAM, CU_GET_PROC_ADDRESS_LEGACY_STREAM);
SAME_TS(TS_CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
        CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
SAME_TS(TS_CU_EVENT_DEFAULT, CU_EVENT_DEFAULT);
SAME_TS(TS_CU_EVENT_DISABLE_TIMING, CU_EVENT_DISABLE_TIMING);
SAME_TS(TS_CU_ARRAY3D_SPARSE, CUDA_ARRAY3D_SPARSE);
SAME_TS(TS_CU_ARRAY3D_DEFERRED_MAPPING, CUDA_ARRAY3D_DEFERRED_MAPPING);
SAME_TS(TS_CU_MEM_ATTACH_GLOBAL, CU_MEM_ATTACH_GLOBAL);
SAME_TS(TS_CU_MEM_ATTACH_HOST, CU_MEM_ATTACH_HOST);

/* structs: size, alignment, every field */
SAME_TYPE_SIZE(CUuuid);
SAME_FIELD(CUuuid, bytes);
SAME_TYPE_SIZE(CUmemLocation);
SAME_FIELD(CUmemLocation, type);
SAME_FIELD(CUmemLocation, id);
SAME_TYPE_SIZE(CUmemAllocationProp);
SAME_FIELD(CUmemAllocationProp, type);
SAME_FIELD(CUmemAllocationProp, requestedHandleTypes);
SAME_FIELD(CUmemAllocationProp, location);
SAME_FIELD(CUmemAllocationProp, win32HandleMetaData);
SAME_FIELD(CUmemAllocationProp, allocFlags);
SAME_FIELD(CUmemAllocationProp, allocFlags.compressionType);
SAME_FIELD(CUmemAllocationProp, allocFlags.gpuDirectRDMACapable);
SAME_FIELD(CUmemAllocationProp, allocFlags.usage);
SAME_FIELD(CUmemAllocationProp, allocFlags.reserved);
SAME_TYPE_SIZE(CUmemAccessDesc);
SAME_FIELD(CUmemAccessDesc, location);
SAME_FIELD(CUmemAccessDesc, flags);
SAME_TYPE_SIZE(CUmemPoolProps);
SAME_FIELD(CUmemPoolProps, allocType);
SAME_FIELD(CUmemPoolProps, handleTypes);
SAME_FIELD(CUmemPoolProps, location);
SAME_FIELD(CUmemPoolProps, win32SecurityAttributes);
SAME_FIELD(CUmemPoolProps, maxSize);
SAME_FIELD(CUmemPoolProps, usage);
SAME_FIELD(CUmemPoolProps, reserved);
SAME_TYPE_SIZE(CUDA_ARRAY_DESCRIPTOR);
SAME_FIELD(CUDA_ARRAY_DESCRIPTOR, Width);
SAME_FIELD(CUDA_ARRAY_DESCRIPTOR, Height);
SAME_FIELD(CUDA_ARRAY_DESCRIPTOR, Format);
SAME_FIELD(CUDA_ARRAY_DESCRIPTOR, NumChannels);
SAME_TYPE_SIZE(CUDA_ARRAY3D_DESCRIPTOR);
SAME_FIELD(CUDA_ARRAY3D_DESCRIPTOR, Width);
SAME_FIELD(CUDA_ARRAY3D_DESCRIPTOR, Height);
SAME_FIELD(CUDA_ARRAY3D_DESCRIPTOR, Depth);
SAME_FIELD(CUDA_ARRAY3D_DESCRIPTOR, Format);
SAME_FIELD(CUDA_ARRAY3D_DESCRIPTOR, NumChannels);
SAME_FIELD(CUDA_ARRAY3D_DESCRIPTOR, Flags);
SAME_TYPE_SIZE(CUDA_ARRAY_MEMORY_REQUIREMENTS);
SAME_FIELD(CUDA_ARRAY_MEMORY_REQUIREMENTS, size);
SAME_FIELD(CUDA_ARRAY_MEMORY_REQUIREMENTS, alignment);
SAME_FIELD(CUDA_ARRAY_MEMORY_REQUIREMENTS, reserved);
SAME_TYPE_SIZE(CUlaunchAttributeValue);
SAME_FIELD(CUlaunchAttributeValue, pad);
SAME_FIELD(CUlaunchAttributeValue, cooperative);
SAME_TYPE_SIZE(CUlaunchAttribute);
SAME_FIELD(CUlaunchAttribute, id);
SAME_FIELD(CUlaunchAttribute, pad);
SAME_FIELD(CUlaunchAttribute, value);
SAME_TYPE_SIZE(CUlaunchConfig);
SAME_FIELD(CUlaunchConfig, gridDimX);
SAME_FIELD(CUlaunchConfig, gridDimY);
SAME_FIELD(CUlaunchConfig, gridDimZ);
SAME_FIELD(CUlaunchConfig, blockDimX);
SAME_FIELD(CUlaunchConfig, blockDimY);
SAME_FIELD(CUlaunchConfig, blockDimZ);
SAME_FIELD(CUlaunchConfig, sharedMemBytes);
SAME_FIELD(CUlaunchConfig, hStream);
SAME_FIELD(CUlaunchConfig, attrs);
SAME_FIELD(CUlaunchConfig, numAttrs);
SAME_TYPE_SIZE(CUDA_LAUNCH_PARAMS);
SAME_FIELD(CUDA_LAUNCH_PARAMS, function);
SAME_FIELD(CUDA_LAUNCH_PARAMS, gridDimX);
SAME_FIELD(CUDA_LAUNCH_PARAMS, gridDimY);
SAME_FIELD(CUDA_LAUNCH_PARAMS, gridDimZ);
SAME_FIELD(CUDA_LAUNCH_PARAMS, blockDimX);
SAME_FIELD(CUDA_LAUNCH_PARAMS, blockDimY);
SAME_FIELD(CUDA_LAUNCH_PARAMS, blockDimZ);
SAME_FIELD(CUDA_LAUNCH_PARAMS, sharedMemBytes);
SAME_FIELD(CUDA_LAUNCH_PARAMS, hStream);
SAME_FIELD(CUDA_LAUNCH_PARAMS, kernelParams);
#define KERNEL_NODE_FIELDS(T)                                                                \
    SAME_TYPE_SIZE(T);                                                                       \
    SAME_FIELD(T, func);                                                                     \
    SAME_FIELD(T, gridDimX);                                                                 \
    SAME_FIELD(T, gridDimY);                                                                 \
    SAME_FIELD(T, gridDimZ);                                                                 \
    SAME_FIELD(T, blockDimX);                                                                \
    SAME_FIELD(T, blockDimY);                                                                \
    SAME_FIELD(T, blockDimZ);                                                                \
    SAME_FIELD(T, sharedMemBytes);                                                           \
    SAME_FIELD(T, kernelParams);                                                             \
    SAME_FIELD(T, extra)
KERNEL_NODE_FIELDS(CUDA_KERNEL_NODE_PARAMS_v1);
KERNEL_NODE_FIELDS(CUDA_KERNEL_NODE_PARAMS_v2);
SAME_FIELD(CUDA_KERNEL_NODE_PARAMS_v2, kern);
SAME_FIELD(CUDA_KERNEL_NODE_PARAMS_v2, ctx);

enum { conf_shim_layout_count = __COUNTER__ };

/* Pointer-valued constants are not integer constant expressions, so these
 * five are compared when the test runs: -1 on a difference. */
int conf_shim_layout_checks(void)
{
    const void *ours[] = {TS_CU_STREAM_LEGACY, TS_CU_STREAM_PER_THREAD, TS_CU_LAUNCH_PARAM_END,
                          TS_CU_LAUNCH_PARAM_BUFFER_POINTER, TS_CU_LAUNCH_PARAM_BUFFER_SIZE};
    const void *theirs[] = {CU_STREAM_LEGACY, CU_STREAM_PER_THREAD, CU_LAUNCH_PARAM_END,
                            CU_LAUNCH_PARAM_BUFFER_POINTER, CU_LAUNCH_PARAM_BUFFER_SIZE};
    for (size_t i = 0; i < sizeof ours / sizeof ours[0]; i++)
        if (ours[i] != theirs[i])
            return -1;
    return conf_shim_layout_count + (int)(sizeof ours / sizeof ours[0]);
}
