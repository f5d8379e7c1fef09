/*
 * conf_shim_api.c - every driver function the project calls or exports,
 * held against NVIDIA's own declaration of that export.
 *
 * Built with TS_CUDA_NVIDIA_HEADERS, so src/shim/cuda_types.h and
 * src/alloc/cuda_api.h take their types from cuda.h (declared the way the
 * driver's sources see it: every versioned and _ptsz export under its own
 * name). Each entry of the shim's TS_CU_API (which the shim wraps and the
 * fake libcuda implements) and of the allocator's TS_CUDA_FUNCS is then a
 * function type that must be exactly the type of the cuda.h declaration with
 * the same name. cudaTypedefs.h's PFN_* types are spot-checked too, as the
 * coverage table (scripts/shim-coverage) names entry points by them.
 */
#include "shim/cuda_types.h"
#include "alloc/cuda_api.h"

#include <cudaTypedefs.h>

#include "conformance/conformance.h"

#define CONF_SHIM_FN(name, params, args) SAME_FUNCTION(ts_cu_pfn_##name, name);
TS_CU_API(CONF_SHIM_FN)
#undef CONF_SHIM_FN

#define CONF_ALLOC_FN(name, req, args) SAME_FUNCTION(CUresult(*) args, name);
TS_CUDA_FUNCS(CONF_ALLOC_FN)
#undef CONF_ALLOC_FN

/* cudaTypedefs.h agrees with the declarations we compare against. */
#define SAME_PFN(pfn, name)                                                                  \
    _Static_assert(__builtin_types_compatible_p(pfn, __typeof__(&name)), #pfn " vs " #name); \
    CONF_TICK
SAME_PFN(PFN_cuMemAlloc_v3020, cuMemAlloc_v2);
SAME_PFN(PFN_cuMemAllocAsync_v11020_ptsz, cuMemAllocAsync_ptsz);
SAME_PFN(PFN_cuLaunchKernel_v7000_ptsz, cuLaunchKernel_ptsz);
SAME_PFN(PFN_cuMemCreate_v10020, cuMemCreate);
SAME_PFN(PFN_cuGetProcAddress_v12000, cuGetProcAddress_v2);

enum { conf_shim_api_count = __COUNTER__ };
int conf_shim_api_checks(void) { return conf_shim_api_count; }
