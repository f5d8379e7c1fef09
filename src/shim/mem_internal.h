/* mem_internal.h - what the parts of the device-memory quota (mem*.c) share:
 * the charge and release primitives of mem.c. Private to src/shim. */
#ifndef TS_SHIM_MEM_INTERNAL_H
#define TS_SHIM_MEM_INTERNAL_H

#include "shim/shim.h"

#define REAL ts_shim.real
#define PASS(name, ...) (REAL.name ? REAL.name(__VA_ARGS__) : CUDA_ERROR_NOT_SUPPORTED)

/* mem.c: the primitives every charged call is made of (the order: mem.c). */

/* The device of CUDA ordinal `ordinal` if it has a quota, else NULL. */
const struct ts_shim_dev *shim_mem_quota_dev(int ordinal);
/* bytes rounded up to gran; UINT64_MAX when that overflows (never fits). */
uint64_t shim_mem_rounded(uint64_t bytes, uint64_t gran);
/* Reserves bytes in the ledger (trimming the tenant's own pools once if
 * over the quota): 0, or -1 over the quota. */
int shim_mem_reserve(const struct ts_shim_dev *d, uint64_t bytes);
void shim_mem_release(int ldev, uint64_t bytes);
int shim_mem_record(uint32_t kind, uint64_t key, int ldev, uint64_t bytes, uint64_t owner);
int shim_mem_unrecord(uint32_t kind, uint64_t key, struct ts_shim_rec *out);
/* After a charged allocation call: keeps the charge with a record, or gives
 * it back (the object freed with undo() if it cannot be recorded). */
CUresult shim_mem_settle(CUresult r, const struct ts_shim_dev *d, uint32_t kind, uint64_t key,
                         uint64_t bytes, uint64_t owner, CUresult (*undo)(uint64_t key));
/* Brings a reservation of est to actual; on failure the caller frees. */
int shim_mem_true_up(const struct ts_shim_dev *d, uint64_t est, uint64_t actual);
CUresult shim_mem_undo_free(uint64_t p);
/* A free of a recorded object: record out first, driver, then release. */
CUresult shim_mem_charged_free(uint32_t kind, uint64_t key, CUresult (*call)(uint64_t key));

/* mem_pool.c */

/* Every pool charged (on ledger device ldev; -1: all) read again from the
 * driver, trimmed first if trim. */
void shim_mem_pools_refresh(int ldev, int trim);
/* 1 if dptr was a recorded pool allocation (then freed with call, *r its
 * result), else 0. */
int shim_mem_pool_free(CUdeviceptr dptr, CUresult (*call)(uint64_t), CUresult *r);

/* mem_graph.c */

int shim_mem_stream_capturing(CUstream s);
/* Adds bytes allocated on capturing stream s to its graph's tally. */
void shim_mem_capture_add(CUstream s, const struct ts_shim_dev *d, int o, uint64_t bytes);

#endif
