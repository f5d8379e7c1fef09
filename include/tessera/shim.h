/*
 * shim.h - how the node agent configures libtessera-cuda.so, the LD_PRELOAD
 * library that enforces a tenant's GPU memory quota and compute share inside
 * its processes (docs/sharing.md).
 *
 * The whole interface is the environment of the tenant's processes: the agent
 * sets LD_PRELOAD to the library and the variables below; all are optional and
 * with none of them the library only passes calls through. Nothing here
 * allocates or keeps state; header-only.
 *
 *   TESSERA_CUDA_MEM_LIMIT        quota per visible device: "8G" (every device)
 *                                 or "0=8G,1=512M" (CUDA ordinals as the process
 *                                 sees them); bytes with optional K/M/G/T suffix
 *                                 (powers of 1024)
 *   TESSERA_CUDA_COMPUTE_PERCENT  share of each device's time: "30" or "0=30,1=50",
 *                                 1..100 (100: no limit)
 *   TESSERA_CUDA_LEDGER           the tenant's shared ledger: a name (a file in
 *                                 /dev/shm) or an absolute path; every process
 *                                 of one tenant on one node names the same one.
 *                                 Unset: a ledger private to the process
 *   TESSERA_CUDA_CTX_BYTES        device memory charged per CUDA context
 *                                 (default TS_SHIM_CTX_BYTES_DEFAULT)
 *   TESSERA_CUDA_DRIVER           the real driver library (default libcuda.so.1)
 */
#ifndef TESSERA_SHIM_H
#define TESSERA_SHIM_H

#define TS_SHIM_ENV_MEM_LIMIT "TESSERA_CUDA_MEM_LIMIT"
#define TS_SHIM_ENV_COMPUTE_PERCENT "TESSERA_CUDA_COMPUTE_PERCENT"
#define TS_SHIM_ENV_LEDGER "TESSERA_CUDA_LEDGER"
#define TS_SHIM_ENV_CTX_BYTES "TESSERA_CUDA_CTX_BYTES"
#define TS_SHIM_ENV_DRIVER "TESSERA_CUDA_DRIVER"
/* A file the agent made for the task: the shim's constructor writes to it
 * when the library is loaded, so the agent knows its limits are in force
 * (a task whose mark stays empty is stopped, docs/sharing.md). */
#define TS_SHIM_ENV_LOADED "TESSERA_CUDA_LOADED"
#define TS_SHIM_LOADED_TEXT "loaded\n"

#define TS_SHIM_DRIVER_DEFAULT "libcuda.so.1"
#define TS_SHIM_LEDGER_DIR "/dev/shm"
/* A CUDA 12 context with lazy loading holds a few hundred MiB on a Hopper
 * GPU; the agent should set the figure bench/shim-gpu-check measures. */
#define TS_SHIM_CTX_BYTES_DEFAULT (528ULL << 20) /* an H200 context measured 526 MiB (docs/gpu-check.md) */
#define TS_SHIM_MAX_DEVICES 16

#endif
