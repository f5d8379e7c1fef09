/*
 * ledger.h - one tenant's shared record of device memory and GPU time, kept
 * in a small file mapped by every process of that tenant on the node.
 *
 * Memory: each process holds a slot with what it has charged per device; a
 * device's usage is the sum over live slots. shim_ledger_reserve checks and
 * charges under one lock (reserve, then allocate; release on failure), so two
 * processes cannot both pass a check that only one of them fits.
 *
 * Dead processes: a process owns its slot through an open-file-description
 * lock on one byte of the file, which the kernel drops when the process dies
 * (or execs) however it dies. Any process finding a slot whose byte is
 * unlocked returns that slot's charges; the lock guarding the tables is a
 * robust mutex, so a holder killed mid-update leaves it recoverable and the
 * totals are recomputed from the slots.
 *
 * GPU time: a token bucket per device (nanoseconds of GPU time, refilled at
 * the tenant's share of wall time, capped at a burst) shared by the tenant's
 * processes; see limiter.c for how it is charged.
 *
 * A ts_ledger is one process's handle (fd, mapping, slot); not thread-safe by
 * itself except where noted: the shim serialises calls with its own lock.
 * Devices are keyed by UUID, so processes with different CUDA_VISIBLE_DEVICES
 * still meet on the same entry.
 */
#ifndef TS_SHIM_LEDGER_H
#define TS_SHIM_LEDGER_H

#include <stdint.h>

#include "tessera/error.h"

#define TS_LEDGER_MAX_DEVICES 16
#define TS_LEDGER_MAX_SLOTS 128
#define TS_LEDGER_UUID_BYTES 16

typedef struct ts_ledger ts_ledger;

/* Opens (creating if needed) the ledger at path, or a process-private one for
 * path NULL or "", and takes a slot. */
int shim_ledger_open(const char *path, ts_ledger **out, ts_err *err);

/* Returns this process's charges and slot, and unmaps. NULL is a no-op. */
void shim_ledger_close(ts_ledger *l);

/* Forgets the handle without touching the ledger (a forked child's copy of
 * its parent's: the parent still owns the slot). */
void shim_ledger_abandon(ts_ledger *l);

/* Index of the device with this UUID (added on first use), or -1 if the
 * table is full. */
int shim_ledger_device(ts_ledger *l, const unsigned char uuid[TS_LEDGER_UUID_BYTES]);

/* Charges bytes on dev to this process if the tenant's usage stays within
 * quota (dead processes' charges are reclaimed first when it would not).
 * 0, or TS_ENOSPC with nothing charged. */
int shim_ledger_reserve(ts_ledger *l, int dev, uint64_t bytes, uint64_t quota);

/* Returns up to bytes of this process's charge on dev (never below zero). */
void shim_ledger_release(ts_ledger *l, int dev, uint64_t bytes);

/* The tenant's usage on dev, after reclaiming dead processes' charges. */
uint64_t shim_ledger_used(ts_ledger *l, int dev);

/* This process's charge on dev. */
uint64_t shim_ledger_mine(const ts_ledger *l, int dev);

/* Reclaims the slots of dead processes; returns how many. */
int shim_ledger_reap(ts_ledger *l);

/* GPU time. Refills dev's bucket at pct/100 of the wall time since the last
 * refill (capped at burst_ns * pct / 100), then: when the bucket is not in
 * debt, takes cost_ns (it may go negative) and returns 0; else returns how
 * long to wait before asking again, in ns. */
int64_t shim_ledger_take(ts_ledger *l, int dev, int pct, int64_t cost_ns, int64_t now_ns,
                       int64_t burst_ns);

/* Settles an earlier take of est_ns whose work measured actual_ns (0 for
 * work that never ran): the bucket pays the difference, kept under its cap,
 * and actual_ns joins the tenant's GPU time. */
void shim_ledger_settle(ts_ledger *l, int dev, int pct, int64_t est_ns, int64_t actual_ns,
                      int64_t burst_ns);

/* GPU time measured for the tenant on dev so far (statistics). */
uint64_t shim_ledger_gpu_ns(ts_ledger *l, int dev);

/* Test hook: does half of a charge of bytes on dev (the slot's half) and
 * returns with the ledger lock still held, as a process killed in the middle
 * of shim_ledger_reserve would leave it. The caller is expected to die. */
void shim_ledger_test_die_halfway(ts_ledger *l, int dev, uint64_t bytes);

#endif
