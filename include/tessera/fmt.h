/*
 * fmt.h - times, durations and GPU amounts as people read them, for the
 * explanations the core writes (a pending job's why, a quota verdict) and
 * the shells' messages: never epoch seconds or milli-GPUs.
 *
 * Pure apart from the local time zone (localtime_r); thread-safe; the
 * caller owns buf, which is always terminated.
 */
#ifndef TESSERA_FMT_H
#define TESSERA_FMT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Times below this are a simulation's clock (seconds from its start), not
 * the wall clock: shown as such ("t=1000s"). 2001-09-09. */
#define TS_FMT_WALL_CLOCK_MIN_S 1e9

/* "2026-12-03 23:10:00" (local time), or "t=1000s" on a simulation clock. */
void ts_fmt_time(double t_s, char *buf, size_t size);
/* "45 s", "12 min", "3 h 05 min", "2 d 04 h"; rounded to whole seconds
 * (minutes past an hour); a negative duration is written as 0 s. */
void ts_fmt_duration(double s, char *buf, size_t size);
/* A milli-GPU amount in GPUs: 992750 -> "992.75 GPUs", 1000 -> "1 GPU". */
void ts_fmt_gpus(int64_t milli, char *buf, size_t size);
/* Days from 1970-01-01 to the proleptic Gregorian date y-m-d (m 1..12),
 * negative before it (H. Hinnant's days_from_civil): calendar arithmetic
 * without timegm or the time zone. */
long ts_days_from_civil(long y, long m, long d);

#ifdef __cplusplus
}
#endif
#endif
