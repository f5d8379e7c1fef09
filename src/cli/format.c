/*
 * format.c - answer values as table cells, and the times users type.
 *
 * A table cell is always a bounded, printable copy: a server string could
 * hold a terminal escape or a carriage return, and either would break the
 * columns (or the terminal), so control characters but the newline become
 * '?'. Times are Unix
 * seconds in the API; people read recent ones relative ("3m ago", "in 2h")
 * and older ones as local ISO-8601, and detail views give both. --from/--to
 * take what people type: a date, a local date-time, one with Z or an offset,
 * Unix seconds, or "-7d". UTC date arithmetic is done here because timegm is
 * not POSIX.
 */
#include "cli/cli.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SECONDS_PER_MINUTE 60L
#define SECONDS_PER_HOUR 3600L
#define SECONDS_PER_DAY 86400L
#define RELATIVE_WITHIN_S SECONDS_PER_DAY /* older than this: an absolute time */
#define RELATIVE_MAX_DAYS (1000L * 365) /* "-Nd" beyond this is a typo */

const char *cli_clean(const char *s, char *buf, size_t size)
{
    size_t i = 0;
    for (; s[i] && i + 1 < size; i++) {
        unsigned char c = (unsigned char)s[i];
        /* a newline is kept: the table continues the cell on the next line */
        buf[i] = (c < 0x20 && c != '\n') || c == 0x7f || cli_c1_in(s, i) ? '?' : (char)c;
    }
    buf[i] = '\0';
    if (s[i] && size > 4)
        memcpy(buf + size - 4, "...", 4);
    return buf;
}

const char *cli_value(const json_t *v, char *buf, size_t size)
{
    if (!v) { /* a member an older server does not send */
        snprintf(buf, size, "-");
        return buf;
    }
    switch (json_typeof(v)) {
    case JSON_STRING:
        cli_clean(json_string_value(v), buf, size);
        break;
    case JSON_INTEGER:
        snprintf(buf, size, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        break;
    case JSON_REAL:
        snprintf(buf, size, "%g", json_real_value(v));
        break;
    case JSON_TRUE:
        snprintf(buf, size, "yes");
        break;
    case JSON_FALSE:
        snprintf(buf, size, "no");
        break;
    case JSON_OBJECT:
    case JSON_ARRAY:
        snprintf(buf, size, "...");
        break;
    default:
        snprintf(buf, size, "-");
        break;
    }
    return buf;
}

const char *cli_str(const json_t *obj, const char *key, char *buf, size_t size)
{
    return cli_value(json_object_get(obj, key), buf, size);
}

long long cli_int(const json_t *obj, const char *key, long long def)
{
    const json_t *v = json_object_get(obj, key);
    if (json_is_integer(v))
        return json_integer_value(v);
    if (json_is_real(v) && fabs(json_real_value(v)) < 9e18)
        return (long long)json_real_value(v);
    return def;
}

static void relative(double delta, char *buf, size_t size)
{
    double a = fabs(delta);
    long n;
    char unit;
    if (a < SECONDS_PER_MINUTE) {
        n = (long)a;
        unit = 's';
    } else if (a < SECONDS_PER_HOUR) {
        n = (long)(a / SECONDS_PER_MINUTE);
        unit = 'm';
    } else if (a < SECONDS_PER_DAY) {
        n = (long)(a / SECONDS_PER_HOUR);
        unit = 'h';
    } else {
        n = (long)(a / SECONDS_PER_DAY);
        unit = 'd';
    }
    if (delta >= 0 || n == 0) /* a second's clock skew: "in 0s" reads as a future */
        snprintf(buf, size, "%ld%c ago", n, unit);
    else
        snprintf(buf, size, "in %ld%c", n, unit);
}

/* false for null, missing or not a number (buf then says so). */
static bool time_of(const json_t *t, double *secs, char *buf, size_t size)
{
    if (!json_is_number(t)) {
        snprintf(buf, size, "%s", json_is_string(t) ? json_string_value(t) : "-");
        return false;
    }
    *secs = json_number_value(t);
    return isfinite(*secs) && fabs(*secs) < 1e15;
}

static bool local_tm(double secs, struct tm *tm)
{
    time_t tt = (time_t)floor(secs);
    return localtime_r(&tt, tm) != NULL;
}

const char *cli_time_iso(const json_t *t, char *buf, size_t size)
{
    double s;
    struct tm tm;
    if (time_of(t, &s, buf, size) && local_tm(s, &tm))
        strftime(buf, size, "%Y-%m-%dT%H:%M:%S", &tm);
    return buf;
}

const char *cli_time_short(const struct cli_ctx *ctx, const json_t *t, char *buf, size_t size)
{
    double s;
    struct tm tm;
    if (!time_of(t, &s, buf, size))
        return buf;
    double delta = (double)ctx->now - s;
    if (fabs(delta) < RELATIVE_WITHIN_S)
        relative(delta, buf, size);
    else if (local_tm(s, &tm))
        strftime(buf, size, "%Y-%m-%dT%H:%M", &tm);
    return buf;
}

const char *cli_time_long(const struct cli_ctx *ctx, const json_t *t, char *buf, size_t size)
{
    double s;
    struct tm tm;
    if (!time_of(t, &s, buf, size) || !local_tm(s, &tm))
        return buf;
    char when[64], rel[32];
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S%z", &tm);
    /* ISO-8601 extended form of the offset: +0100 -> +01:00 */
    size_t n = strlen(when);
    if (n >= 5 && (when[n - 5] == '+' || when[n - 5] == '-') && n + 2 <= sizeof when) {
        memmove(when + n - 1, when + n - 2, 3);
        when[n - 2] = ':';
    }
    relative((double)ctx->now - s, rel, sizeof rel);
    snprintf(buf, size, "%s (%s)", when, rel);
    return buf;
}

/* ---- --from / --to ---- */

/* n decimal digits at *p into *out; advances *p. */
static bool digits(const char **p, int n, int *out)
{
    int v = 0;
    for (int i = 0; i < n; i++) {
        char c = (*p)[i];
        if (c < '0' || c > '9')
            return false;
        v = v * 10 + (c - '0');
    }
    *p += n;
    *out = v;
    return true;
}

static int days_in_month(int y, int m)
{
    static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    return m == 2 && leap ? 29 : days[m - 1];
}

/* Days from 1970-01-01 to y-m-d in the proleptic Gregorian calendar. */
static long days_since_epoch(int y, int m, int d)
{
    long days = 0;
    for (int yy = 1970; yy < y; yy++)
        days += 365 + ((yy % 4 == 0 && yy % 100 != 0) || yy % 400 == 0);
    for (int yy = y; yy < 1970; yy++)
        days -= 365 + ((yy % 4 == 0 && yy % 100 != 0) || yy % 400 == 0);
    for (int mm = 1; mm < m; mm++)
        days += days_in_month(y, mm);
    return days + d - 1;
}

static bool parse_relative(const char *s, time_t now, double *out)
{
    char *end;
    if (s[0] != '-' || s[1] < '0' || s[1] > '9')
        return false;
    long n = strtol(s + 1, &end, 10);
    long unit = end[0] == 's' ? 1
                : end[0] == 'm' ? SECONDS_PER_MINUTE
                : end[0] == 'h' ? SECONDS_PER_HOUR
                : end[0] == 'd' ? SECONDS_PER_DAY
                                : 0;
    if (!unit || end[1] || n > RELATIVE_MAX_DAYS)
        return false;
    *out = (double)now - (double)n * (double)unit;
    return true;
}

static bool parse_unix(const char *s, double *out)
{
    char *end;
    if (s[0] < '0' || s[0] > '9')
        return false;
    double v = strtod(s, &end);
    if (*end || !isfinite(v))
        return false;
    *out = v;
    return true;
}

bool cli_parse_when(const char *s, time_t now, double *out)
{
    if (strcmp(s, "now") == 0) {
        *out = (double)now;
        return true;
    }
    if (parse_relative(s, now, out))
        return true;
    const char *p = s;
    int y, mo, d, h = 0, mi = 0, sec = 0;
    if (!digits(&p, 4, &y) || *p++ != '-' || !digits(&p, 2, &mo) || *p++ != '-' ||
        !digits(&p, 2, &d))
        return parse_unix(s, out); /* digits alone are Unix seconds */
    if (mo < 1 || mo > 12 || d < 1 || d > days_in_month(y, mo))
        return false;
    if (*p == 'T' || *p == ' ') {
        p++;
        if (!digits(&p, 2, &h) || *p++ != ':' || !digits(&p, 2, &mi))
            return false;
        if (*p == ':' && (p++, !digits(&p, 2, &sec)))
            return false;
        if (h > 23 || mi > 59 || sec > 60)
            return false;
    }
    if (*p == '\0') { /* local time */
        struct tm tm = {.tm_year = y - 1900, .tm_mon = mo - 1, .tm_mday = d,
                        .tm_hour = h, .tm_min = mi, .tm_sec = sec, .tm_isdst = -1};
        time_t t = mktime(&tm);
        if (t == (time_t)-1)
            return false;
        *out = (double)t;
        return true;
    }
    long offset_s = 0;
    if (*p == 'Z') {
        p++;
    } else if (*p == '+' || *p == '-') {
        int sign = *p++ == '-' ? -1 : 1, oh, om;
        if (!digits(&p, 2, &oh) || *p++ != ':' || !digits(&p, 2, &om) || oh > 23 || om > 59)
            return false;
        offset_s = sign * (oh * SECONDS_PER_HOUR + om * SECONDS_PER_MINUTE);
    } else {
        return false;
    }
    if (*p)
        return false;
    *out = (double)days_since_epoch(y, mo, d) * SECONDS_PER_DAY + h * SECONDS_PER_HOUR +
           mi * SECONDS_PER_MINUTE + sec - offset_s;
    return true;
}
