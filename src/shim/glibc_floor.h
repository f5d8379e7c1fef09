/*
 * glibc_floor.h - binds the shim's libc imports to the oldest symbol
 * versions x86_64 has, so libtessera-cuda.so loads in images whose glibc is
 * as old as 2.17 (the oldest still found in CUDA base images).
 *
 * A shared object built against a new glibc asks for the newest version of
 * each function it calls (dlopen@GLIBC_2.34, pthread_once@GLIBC_2.34, ...),
 * and an older loader refuses it outright: the task would run without its
 * limits. Each line below keeps the old, still exported version instead; the
 * functions whose only versions are newer than 2.17 (fstat 2.33,
 * memfd_create 2.27) are not called at all (ledger.c uses lseek and the raw
 * syscall). The pthread and dl functions lived in libpthread.so.0 and
 * libdl.so.2 before 2.34, so the shim keeps both as DT_NEEDED
 * (CMakeLists.txt), and tests/shim/glibc_floor.py fails the build's tests if
 * any import asks for more than GLIBC_2.17.
 *
 * Forced into every source of the shim (-include) in builds without
 * sanitizers; a sanitizer's runtime interposes some of these functions
 * unversioned, so the sanitized build checks a separate plain copy.
 */
#ifndef TS_SHIM_GLIBC_FLOOR_H
#define TS_SHIM_GLIBC_FLOOR_H

#if defined(__x86_64__) && defined(__linux__)
__asm__(".symver memcpy,memcpy@GLIBC_2.2.5");
__asm__(".symver dlopen,dlopen@GLIBC_2.2.5");
__asm__(".symver dlvsym,dlvsym@GLIBC_2.2.5");
__asm__(".symver dlerror,dlerror@GLIBC_2.2.5");
__asm__(".symver dlclose,dlclose@GLIBC_2.2.5");
__asm__(".symver pthread_once,pthread_once@GLIBC_2.2.5");
__asm__(".symver pthread_mutexattr_init,pthread_mutexattr_init@GLIBC_2.2.5");
__asm__(".symver pthread_mutexattr_destroy,pthread_mutexattr_destroy@GLIBC_2.2.5");
__asm__(".symver pthread_mutexattr_setpshared,pthread_mutexattr_setpshared@GLIBC_2.2.5");
__asm__(".symver pthread_mutexattr_setrobust,pthread_mutexattr_setrobust@GLIBC_2.12");
__asm__(".symver pthread_mutex_consistent,pthread_mutex_consistent@GLIBC_2.12");
__asm__(".symver pthread_mutex_timedlock,pthread_mutex_timedlock@GLIBC_2.2.5");
#endif

#endif
