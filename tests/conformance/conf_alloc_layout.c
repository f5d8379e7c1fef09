/*
 * conf_alloc_layout.c - the allocator's CUDA backend declarations
 * (src/alloc/cuda_api.h) held against NVIDIA's cuda.h: the VMM structs it
 * fills (allocation properties, access descriptors), the enumerators it
 * passes, the error codes it tests and the scalar/handle types, each renamed
 * prj_* while included (rename_alloc_cuda.h). Its prototypes are checked in
 * conf_shim_api.c, next to the shim's.
 */
#include "conformance/rename_alloc_cuda.h"
#include "alloc/cuda_api.h"
#define PRJ_RENAME_UNDO
#include "conformance/rename_alloc_cuda.h"
#undef PRJ_RENAME_UNDO

#include <cuda.h>

#include "conformance/conformance.h"

SAME_TYPE_SIZE(CUresult);
SAME_SCALAR(CUdevice);
SAME_SCALAR(CUdeviceptr);
SAME_SCALAR(CUmemGenericAllocationHandle);
SAME_SCALAR(CUcontext);
SAME_SCALAR(CUstream);
SAME_SCALAR(CUevent);
SAME_VALUE(CUDA_SUCCESS);
SAME_VALUE(CUDA_ERROR_OUT_OF_MEMORY);
SAME_VALUE(CUDA_ERROR_NOT_READY);
SAME_TYPE_SIZE(CUmemAllocationType);
SAME_TYPE_SIZE(CUmemLocationType);
SAME_TYPE_SIZE(CUmemAccess_flags);
SAME_TYPE_SIZE(CUmemAllocationGranularity_flags);
SAME_TYPE_SIZE(CUmemAllocationHandleType);
SAME_VALUE(CU_MEM_ALLOCATION_TYPE_PINNED);
SAME_VALUE(CU_MEM_LOCATION_TYPE_DEVICE);
SAME_VALUE(CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
SAME_VALUE(CU_MEM_ALLOC_GRANULARITY_MINIMUM);
SAME_VALUE(CU_MEM_HANDLE_TYPE_NONE);
SAME_VALUE(CU_EVENT_DISABLE_TIMING);
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

enum { conf_alloc_layout_count = __COUNTER__ };
int conf_alloc_layout_checks(void) { return conf_alloc_layout_count; }
