/*
 * cuda_api.h - the driver API as a table of function pointers, for the shim's
 * tests and benchmark: every TS_CU_API entry resolved with dlsym from one
 * library handle (the fake libcuda, or whatever an LD_PRELOAD put first).
 *
 * Header-only and static: each test owns its table. cu_api_load returns the
 * number of names it could not resolve (0: all of them).
 */
#ifndef TS_TEST_SHIM_CUDA_API_H
#define TS_TEST_SHIM_CUDA_API_H

#include <dlfcn.h>
#include <string.h>

#include "shim/cuda_types.h"

struct cu_api {
#define CU_API_FIELD(name, params, args) ts_cu_pfn_##name name;
    TS_CU_API(CU_API_FIELD)
#undef CU_API_FIELD
};

/* handle: a dlopen handle, or RTLD_DEFAULT to bind what the process sees. */
static inline int cu_api_load(struct cu_api *api, void *handle)
{
    int missing = 0;
    memset(api, 0, sizeof *api);
#define CU_API_LOAD(name, params, args)                                                       \
    do {                                                                                      \
        void *sym = dlsym(handle, #name);                                                     \
        if (sym)                                                                              \
            memcpy(&api->name, &sym, sizeof sym);                                             \
        else                                                                                  \
            missing++;                                                                        \
    } while (0);
    TS_CU_API(CU_API_LOAD)
#undef CU_API_LOAD
    return missing;
}

/* A function pointer as the void * cuGetProcAddress and dlsym deal in. */
#define CU_FN_PTR(fn) cu_fn_ptr((void (*)(void))(fn))
static inline void *cu_fn_ptr(void (*fn)(void))
{
    void *p;
    memcpy(&p, &fn, sizeof p);
    return p;
}

#endif
