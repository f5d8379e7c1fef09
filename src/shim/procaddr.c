/*
 * procaddr.c - closes the two doors by which an application reaches the
 * driver without going through the shim's exported names.
 *
 * 1. cuGetProcAddress / cuGetProcAddress_v2: CUDA 12 runtimes get every
 *    driver entry point this way. The shim asks the real driver, then, if
 *    the address it hands out is one of the functions the shim wraps, hands
 *    out the wrapper instead. Matching by address (not by name and version)
 *    follows whatever versioning the driver applies, per-thread-stream
 *    variants included, and cannot pick a wrapper of the wrong ABI; an
 *    address the shim does not recognise passes through and is counted
 *    (tessera_cuda_status).
 *
 * 2. dlsym(handle, "cu..."): a runtime that dlopen()s libcuda.so.1 looks its
 *    symbols up in that library's own scope, where LD_PRELOAD does not reach.
 *    The shim exports dlsym: for "cu*" names looked up in a specific handle
 *    whose answer is a function the shim wraps, it returns the wrapper (and
 *    for NVML's memory queries, nvml.c's).
 *    Everything else must behave exactly like the real dlsym, including
 *    RTLD_NEXT, which glibc resolves relative to its caller's object: so the
 *    exported dlsym is a few instructions of assembly that ask the C hook and
 *    otherwise jump (not call) to the real dlsym with the caller's return
 *    address untouched. x86_64 and aarch64 only; elsewhere door 2 stays open
 *    (docs/sharing.md).
 */
#define _GNU_SOURCE
#include "shim/shim.h"

#include <dlfcn.h>
#include <string.h>

#define REAL ts_shim.real
#define PASS(name, ...) (REAL.name ? REAL.name(__VA_ARGS__) : CUDA_ERROR_NOT_SUPPORTED)

int shim_in_boot(void); /* driver.c */

/* Every function the shim wraps, by its export name. */
#define TS_SHIM_HOOKS(X)                                                                      \
    X(cuMemAlloc_v2) X(cuMemAllocManaged) X(cuMemAllocPitch_v2) X(cuMemFree_v2)               \
    X(cuMemAllocAsync) X(cuMemAllocAsync_ptsz) X(cuMemAllocFromPoolAsync)                     \
    X(cuMemAllocFromPoolAsync_ptsz) X(cuMemFreeAsync) X(cuMemFreeAsync_ptsz)                  \
    X(cuArrayCreate_v2) X(cuArray3DCreate_v2) X(cuMipmappedArrayCreate) X(cuArrayDestroy)     \
    X(cuMipmappedArrayDestroy) X(cuMemCreate) X(cuMemRelease) X(cuMemRetainAllocationHandle)  \
    X(cuMemMap) X(cuMemUnmap) X(cuCtxCreate_v2) X(cuCtxCreate_v3) X(cuCtxCreate_v4)           \
    X(cuCtxDestroy_v2) X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease)               \
    X(cuDevicePrimaryCtxRelease_v2) X(cuDevicePrimaryCtxReset_v2) X(cuMemGetInfo_v2)          \
    X(cuDeviceTotalMem_v2) X(cuLaunchKernel) X(cuLaunchKernel_ptsz)                           \
    X(cuLaunchCooperativeKernel) X(cuLaunchCooperativeKernel_ptsz) X(cuLaunchKernelEx)        \
    X(cuLaunchKernelEx_ptsz) X(cuLaunchCooperativeKernelMultiDevice) X(cuGraphLaunch)         \
    X(cuGraphLaunch_ptsz) X(cuStreamBeginCapture_v2) X(cuStreamBeginCapture_v2_ptsz)          \
    X(cuStreamEndCapture) X(cuStreamEndCapture_ptsz) X(cuGetProcAddress)                      \
    X(cuGetProcAddress_v2) X(cuMemPoolTrimTo) X(cuMemPoolSetAttribute) X(cuMemPoolDestroy)     \
    X(cuStreamSynchronize) X(cuStreamSynchronize_ptsz) X(cuCtxSynchronize)                    \
    X(cuEventSynchronize) X(cuGraphAddMemAllocNode) X(cuGraphDestroy)                        \
    X(cuGraphInstantiateWithFlags) X(cuGraphInstantiateWithParams) X(cuGraphInstantiate)      \
    X(cuGraphInstantiateWithParams_ptsz)                                                      \
    X(cuGraphInstantiate_v2) X(cuGraphExecDestroy) X(cuMemAlloc) X(cuMemFree)                 \
    X(cuMemAllocPitch) X(cuArrayCreate) X(cuArray3DCreate) X(cuCtxCreate) X(cuCtxDestroy)     \
    X(cuDevicePrimaryCtxReset) X(cuMemGetInfo) X(cuDeviceTotalMem)

static unsigned long unrecognised; /* addresses handed out that we could not match */

void *shim_wrapper_for(void *real_fn)
{
    if (!real_fn)
        return NULL;
#define TS_SHIM_MATCH(name)                                                                   \
    if (real_fn == TS_SHIM_FN(REAL.name))                                                     \
        return TS_SHIM_FN(name);
    TS_SHIM_HOOKS(TS_SHIM_MATCH)
#undef TS_SHIM_MATCH
    return NULL;
}

/* Is `symbol` (a base name, as cuGetProcAddress takes) one the shim wraps in
 * some version? Then an unmatched address for it is an escape worth counting. */
static int wrapped_base(const char *symbol)
{
    static const char *const names[] = {
#define TS_SHIM_NAME(name) #name,
        TS_SHIM_HOOKS(TS_SHIM_NAME)
#undef TS_SHIM_NAME
    };
    size_t n = strlen(symbol);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strncmp(names[i], symbol, n) == 0 && (names[i][n] == '\0' || names[i][n] == '_'))
            return 1;
    return 0;
}

static void *swap(const char *symbol, void *fn)
{
    void *w = shim_wrapper_for(fn);
    if (w)
        return w;
    if (fn && symbol && wrapped_base(symbol))
        __atomic_add_fetch(&unrecognised, 1, __ATOMIC_RELAXED);
    return fn;
}

TS_SHIM_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion,
                                         cuuint64_t flags)
{
    shim_ready();
    CUresult r = PASS(cuGetProcAddress, symbol, pfn, cudaVersion, flags);
    if (r == CUDA_SUCCESS && pfn)
        *pfn = swap(symbol, *pfn);
    return r;
}

TS_SHIM_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
                                            cuuint64_t flags,
                                            CUdriverProcAddressQueryResult *symbolStatus)
{
    shim_ready();
    CUresult r = PASS(cuGetProcAddress_v2, symbol, pfn, cudaVersion, flags, symbolStatus);
    if (r == CUDA_SUCCESS && pfn)
        *pfn = swap(symbol, *pfn);
    return r;
}

TS_SHIM_EXPORT unsigned long tessera_cuda_unrecognised_entry_points(void)
{
    return __atomic_load_n(&unrecognised, __ATOMIC_RELAXED);
}

/* ---- dlsym ------------------------------------------------------------------------ */

typedef void *(*dlsym_fn)(void *, const char *);

/* The real dlsym (hidden; the assembly below jumps through it). */
__attribute__((visibility("hidden"))) dlsym_fn ts_shim_dlsym_next;

#define NO_SANITIZE __attribute__((no_sanitize("address", "undefined")))

/* May run before the sanitizers' own start-up (they look symbols up with
 * dlsym): no instrumented code, no allocation. */
NO_SANITIZE static void find_next(void)
{
    if (__atomic_load_n(&ts_shim_dlsym_next, __ATOMIC_ACQUIRE))
        return;
    static const char *const versions[] = {"GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17"};
    void *p = NULL;
    for (unsigned i = 0; !p && i < sizeof versions / sizeof versions[0]; i++)
        p = dlvsym(RTLD_NEXT, "dlsym", versions[i]);
    dlsym_fn f;
    __builtin_memcpy(&f, &p, sizeof f);
    __atomic_store_n(&ts_shim_dlsym_next, f, __ATOMIC_RELEASE);
}

void *shim_real_dlsym(void *handle, const char *name)
{
#if defined(__x86_64__) || defined(__aarch64__)
    find_next();
    return ts_shim_dlsym_next ? ts_shim_dlsym_next(handle, name) : NULL;
#else
    return dlsym(handle, name);
#endif
}

/* The C half of the exported dlsym: our wrapper for this lookup, or NULL to
 * let the real dlsym answer. */
NO_SANITIZE __attribute__((visibility("hidden"))) void *ts_shim_dlsym_hook(void *handle,
                                                                           const char *name)
{
    find_next();
    if (!name || handle == RTLD_DEFAULT || handle == RTLD_NEXT || !ts_shim_dlsym_next)
        return NULL;
    int nvml = name[0] == 'n' && name[1] == 'v' && name[2] == 'm' && name[3] == 'l';
    int cu = name[0] == 'c' && name[1] == 'u';
    if ((!nvml && !cu) || shim_in_boot()) /* only now: instrumented code */
        return NULL;
    shim_ready();
    if (nvml)
        return shim_nvml_wrapper(handle, name);
    shim_adopt_driver(handle);
    void *fn = ts_shim_dlsym_next(handle, name);
    return fn ? shim_wrapper_for(fn) : NULL;
}

#if defined(__x86_64__)
__asm__(".text\n"
        ".globl dlsym\n"
        ".type dlsym, @function\n"
        "dlsym:\n"
        ".cfi_startproc\n"
        "    endbr64\n"
        "    pushq %rdi\n"
        ".cfi_adjust_cfa_offset 8\n"
        "    pushq %rsi\n"
        ".cfi_adjust_cfa_offset 8\n"
        "    subq $8, %rsp\n"
        ".cfi_adjust_cfa_offset 8\n"
        "    call ts_shim_dlsym_hook\n"
        "    addq $8, %rsp\n"
        ".cfi_adjust_cfa_offset -8\n"
        "    popq %rsi\n"
        ".cfi_adjust_cfa_offset -8\n"
        "    popq %rdi\n"
        ".cfi_adjust_cfa_offset -8\n"
        "    testq %rax, %rax\n"
        "    jz 1f\n"
        "    ret\n"
        "1:  jmp *ts_shim_dlsym_next(%rip)\n"
        ".cfi_endproc\n"
        ".size dlsym, .-dlsym\n");
#elif defined(__aarch64__)
__asm__(".text\n"
        ".globl dlsym\n"
        ".type dlsym, %function\n"
        "dlsym:\n"
        ".cfi_startproc\n"
        "    stp x29, x30, [sp, #-32]!\n"
        ".cfi_def_cfa_offset 32\n"
        ".cfi_offset 29, -32\n"
        ".cfi_offset 30, -24\n"
        "    mov x29, sp\n"
        "    stp x0, x1, [sp, #16]\n"
        "    bl ts_shim_dlsym_hook\n"
        "    mov x9, x0\n"
        "    ldp x0, x1, [sp, #16]\n"
        "    ldp x29, x30, [sp], #32\n"
        ".cfi_def_cfa_offset 0\n"
        "    cbz x9, 1f\n"
        "    mov x0, x9\n"
        "    ret\n"
        "1:  adrp x16, ts_shim_dlsym_next\n"
        "    ldr x16, [x16, #:lo12:ts_shim_dlsym_next]\n"
        "    br x16\n"
        ".cfi_endproc\n"
        ".size dlsym, .-dlsym\n");
#endif
