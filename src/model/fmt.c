/*
 * fmt.c - times, durations and GPU amounts as people read them
 * (include/tessera/fmt.h). The explanations that reach a user (a job's
 * why, a quota verdict, events) are sentences; a number in them must read
 * without a calculator. Calendar days (ts_days_from_civil) live here too,
 * for the readers of dates that must not depend on the time zone.
 */
#include "tessera/fmt.h"

#include <math.h>
#include <stdio.h>
#include <time.h>

#define MILLI_PER_GPU 1000

void ts_fmt_time(double t_s, char *buf, size_t size)
{
    if (!buf || size == 0)
        return;
    if (!(t_s >= TS_FMT_WALL_CLOCK_MIN_S) || t_s > 1e11) {
        snprintf(buf, size, "t=%.0fs", isfinite(t_s) ? t_s : 0.0);
        return;
    }
    time_t t = (time_t)llround(t_s);
    struct tm tm;
    if (!localtime_r(&t, &tm) || strftime(buf, size, "%Y-%m-%d %H:%M:%S", &tm) == 0)
        snprintf(buf, size, "t=%.0fs", t_s);
}

void ts_fmt_duration(double s, char *buf, size_t size)
{
    if (!buf || size == 0)
        return;
    long long v = isfinite(s) && s > 0.0 ? llround(s) : 0;
    if (v < 60)
        snprintf(buf, size, "%lld s", v);
    else if (v < 3600)
        snprintf(buf, size, "%lld min", (v + 30) / 60);
    else if (v < 86400)
        snprintf(buf, size, "%lld h %02lld min", v / 3600, v % 3600 / 60);
    else
        snprintf(buf, size, "%lld d %02lld h", v / 86400, v % 86400 / 3600);
}

void ts_fmt_gpus(int64_t milli, char *buf, size_t size)
{
    if (!buf || size == 0)
        return;
    double g = (double)milli / MILLI_PER_GPU;
    snprintf(buf, size, "%.6g GPU%s", g, milli == MILLI_PER_GPU ? "" : "s");
}

long ts_days_from_civil(long y, long m, long d)
{
    y -= m <= 2;
    long era = (y >= 0 ? y : y - 399) / 400;
    long yoe = y - era * 400;
    long doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    long doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}
