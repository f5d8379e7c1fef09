/*
 * sbatch_value.c - the values of sbatch options, each checked on its own:
 * Slurm's time formats, memory sizes, array index lists (with the list
 * written back in one canonical form the agent reads again), GPU counts with
 * a type, gres, signals, dependencies and --export lists. Pure string
 * functions (sbatch_req.h), so the grammar can be tested and fuzzed apart
 * from the directives that carry it (sbatch.c).
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/sbatch_req.h"
#include "tessera/depend.h"
#include "api/spec_scalar.h"

#define MEM_MAX_MIB (64LL << 20)         /* 64 TiB, the spec's per-task ceiling */
#define SIGNAL_TIME_MAX_S 65535L         /* Slurm's own ceiling */
#define SIGNAL_TIME_DEFAULT_S 60L
#define ARRAY_COUNT_MAX 100000L          /* TS_SPEC_MAX_ARRAY */
#define MIB_PER_GIB 1024LL
#define MIB_PER_TIB (1024LL * 1024)
#define KIB_PER_MIB 1024LL

/* A plain decimal integer lo..hi. */
bool sbatch_parse_long(const char *s, long lo, long hi, long *out)
{
    if (!s || !isdigit((unsigned char)*s))
        return false;
    errno = 0;
    char *end;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

/* A digit run at *p (advanced), 0..max; false if none or too large. */
bool sbatch_take_num(const char **p, long max, long *out)
{
    if (!isdigit((unsigned char)**p))
        return false;
    long v = 0;
    while (isdigit((unsigned char)**p)) {
        v = v * 10 + (**p - '0');
        if (v > max)
            return false;
        (*p)++;
    }
    *out = v;
    return true;
}

int64_t ts_sbatch_time_min(const char *s)
{
    if (!s || !*s)
        return -1;
    const long field_max = 100000000L;
    long f[4];
    int n = 0;
    long days = 0;
    const char *p = s;
    const char *dash = strchr(s, '-');
    if (dash) {
        if (!sbatch_take_num(&p, field_max, &days) || *p != '-')
            return -1;
        p++;
    }
    for (;;) {
        if (n == 3 || !sbatch_take_num(&p, field_max, &f[n]))
            return -1;
        n++;
        if (*p == '\0')
            break;
        if (*p != ':')
            return -1;
        p++;
    }
    long long sec;
    if (dash) { /* D-HH, D-HH:MM, D-HH:MM:SS */
        long long h = f[0], m = n > 1 ? f[1] : 0, sc = n > 2 ? f[2] : 0;
        sec = ((days * 24 + h) * 60 + m) * 60 + sc;
    } else if (n == 1) { /* minutes */
        sec = (long long)f[0] * 60;
    } else if (n == 2) { /* MM:SS */
        sec = (long long)f[0] * 60 + f[1];
    } else { /* HH:MM:SS */
        sec = ((long long)f[0] * 60 + f[1]) * 60 + f[2];
    }
    return (sec + 59) / 60; /* Slurm keeps minutes and rounds seconds up */
}

/* A memory size: digits with an optional unit K, M, G or T (any case;
 * default M), as MiB rounded up. -1 if invalid or above MEM_MAX_MIB. */
int64_t sbatch_parse_mem(const char *s)
{
    const char *p = s;
    long long n = 0;
    if (!isdigit((unsigned char)*p))
        return -1;
    while (isdigit((unsigned char)*p)) {
        n = n * 10 + (*p++ - '0');
        if (n > MEM_MAX_MIB * KIB_PER_MIB)
            return -1;
    }
    long long mib;
    switch (toupper((unsigned char)*p)) {
    case '\0': case 'M': mib = n; break;
    case 'K': mib = (n + KIB_PER_MIB - 1) / KIB_PER_MIB; break;
    case 'G': mib = n * MIB_PER_GIB; break;
    case 'T': mib = n * MIB_PER_TIB; break;
    default: return -1;
    }
    if (*p && p[1] != '\0')
        return -1;
    return mib > MEM_MAX_MIB ? -1 : mib;
}

static int cmp_long(const void *a, const void *b)
{
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

/* Appends to a growing string; false when out of memory. */
static bool sappend(char **s, size_t *len, size_t *cap, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static bool sappend(char **s, size_t *len, size_t *cap, const char *fmt, ...)
{
    char tmp[64];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof tmp)
        return false;
    if (*len + (size_t)n + 1 > *cap) {
        size_t cap2 = *cap ? *cap * 2 : 64;
        while (cap2 < *len + (size_t)n + 1)
            cap2 *= 2;
        char *p = realloc(*s, cap2);
        if (!p)
            return false;
        *s = p;
        *cap = cap2;
    }
    memcpy(*s + *len, tmp, (size_t)n + 1);
    *len += (size_t)n;
    return true;
}

/*
 * --array: "0-15", "1,3,5-9", "0-15:4", any of them with "%N" (at most N at
 * once). Indices 0..TS_SBATCH_ARRAY_INDEX_MAX, at most ARRAY_COUNT_MAX
 * distinct. Fills the canonical list (sorted, duplicates dropped, runs of a
 * constant step as "a-b:s"), the count and the throttle; returns NULL and
 * sets *why on a bad value, or on out of memory with *why NULL.
 */
char *sbatch_parse_array(const char *s, long *count, long *throttle, const char **why)
{
    *why = NULL;
    *throttle = 0;
    const char *pct = strchr(s, '%');
    if (pct && !sbatch_parse_long(pct + 1, 1, ARRAY_COUNT_MAX, throttle)) {
        *why = "the throttle after '%' must be 1..100000";
        return NULL;
    }
    size_t end = pct ? (size_t)(pct - s) : strlen(s);
    long total = 0;
    long *v = NULL;
    size_t nv = 0;
    const char *p = s;
    while (p < s + end) {
        long a, b, step = 1;
        if (!sbatch_take_num(&p, TS_SBATCH_ARRAY_INDEX_MAX, &a)) {
            *why = "must be indices 0..4000000: N, N-M or N-M:STEP, separated by ','";
            goto bad;
        }
        b = a;
        if (*p == '-') {
            p++;
            if (!sbatch_take_num(&p, TS_SBATCH_ARRAY_INDEX_MAX, &b) || b < a) {
                *why = "a range N-M needs M >= N, both 0..4000000";
                goto bad;
            }
            if (*p == ':') {
                p++;
                if (!sbatch_take_num(&p, TS_SBATCH_ARRAY_INDEX_MAX, &step) || step < 1) {
                    *why = "a step after ':' must be 1..4000000";
                    goto bad;
                }
            }
        }
        if (p < s + end && *p != ',') {
            *why = "must be indices 0..4000000: N, N-M or N-M:STEP, separated by ','";
            goto bad;
        }
        if (*p == ',' && p + 1 >= s + end) {
            *why = "ends with ','";
            goto bad;
        }
        if (*p == ',')
            p++;
        long n = (b - a) / step + 1;
        if (total + n > ARRAY_COUNT_MAX) {
            *why = "more than 100000 elements";
            goto bad;
        }
        long *nvp = realloc(v, (size_t)(total + n) * sizeof *v);
        if (!nvp)
            goto oom;
        v = nvp;
        for (long x = a; x <= b; x += step)
            v[nv++] = x;
        total += n;
    }
    if (nv == 0) {
        *why = "is empty";
        goto bad;
    }
    qsort(v, nv, sizeof *v, cmp_long);
    size_t u = 1;
    for (size_t i = 1; i < nv; i++)
        if (v[i] != v[u - 1])
            v[u++] = v[i];
    nv = u;
    char *out = NULL;
    size_t len = 0, cap = 0;
    for (size_t i = 0; i < nv;) {
        size_t j = i + 1;
        long d = j < nv ? v[j] - v[i] : 0;
        while (j < nv && v[j] - v[j - 1] == d)
            j++;
        bool ok;
        if (j - i >= 3 && d == 1)
            ok = sappend(&out, &len, &cap, "%s%ld-%ld", i ? "," : "", v[i], v[j - 1]);
        else if (j - i >= 3)
            ok = sappend(&out, &len, &cap, "%s%ld-%ld:%ld", i ? "," : "", v[i], v[j - 1], d);
        else {
            j = i + 1;
            ok = sappend(&out, &len, &cap, "%s%ld", i ? "," : "", v[i]);
        }
        if (!ok) {
            free(out);
            goto oom;
        }
        i = j;
    }
    free(v);
    *count = (long)nv;
    return out;
bad:
    free(v);
    return NULL;
oom:
    free(v);
    *why = NULL;
    return NULL;
}

long ts_sbatch_array_nth(const char *list, long k)
{
    if (!list || k < 0)
        return -1;
    const char *p = list;
    while (*p) {
        long a, b, step = 1;
        if (!sbatch_take_num(&p, TS_SBATCH_ARRAY_INDEX_MAX, &a))
            return -1;
        b = a;
        if (*p == '-') {
            p++;
            if (!sbatch_take_num(&p, TS_SBATCH_ARRAY_INDEX_MAX, &b) || b < a)
                return -1;
            if (*p == ':') {
                p++;
                if (!sbatch_take_num(&p, TS_SBATCH_ARRAY_INDEX_MAX, &step) || step < 1)
                    return -1;
            }
        }
        long n = (b - a) / step + 1;
        if (k < n)
            return a + k * step;
        k -= n;
        if (*p == ',')
            p++;
        else if (*p)
            return -1;
    }
    return -1;
}

/* "[type:]N" for --gpus, --gpus-per-node, --gpus-per-task. */
bool sbatch_parse_gpu_count(const char *s, long max, long *n, char type[SBATCH_NAME_MAX])
{
    const char *colon = strrchr(s, ':');
    type[0] = '\0';
    if (colon) {
        size_t tl = (size_t)(colon - s);
        if (tl == 0 || tl >= SBATCH_NAME_MAX || memchr(s, ':', tl))
            return false;
        memcpy(type, s, tl);
        type[tl] = '\0';
        s = colon + 1;
    }
    return sbatch_parse_long(s, 0, max, n);
}

/* --gres: "gpu", "gpu:N", "gpu:TYPE:N", comma-separated with no other gres. */
const char *sbatch_parse_gres(const char *s, long *n, char type[SBATCH_NAME_MAX])
{
    if (strchr(s, ','))
        return "only one gres, gpu, is supported";
    if (strncmp(s, "gpu", 3) != 0 || (s[3] != '\0' && s[3] != ':'))
        return "only gpu gres are supported (gpu, gpu:N or gpu:TYPE:N)";
    if (s[3] == '\0') {
        *n = 1;
        type[0] = '\0';
        return NULL;
    }
    if (!sbatch_parse_gpu_count(s + 4, GPUS_PER_NODE_MAX, n, type))
        return "must be gpu, gpu:N or gpu:TYPE:N with N 0..64";
    return NULL;
}

/* --signal: "[{R|B}:]SIG[@SECONDS]". */
const char *sbatch_parse_signal(const char *s, int *sig, long *secs)
{
    if ((s[0] == 'R' || s[0] == 'B') && s[1] == ':')
        s += 2;
    else if (s[0] == 'R' && s[1] == 'B' && s[2] == ':')
        s += 3;
    char name[32];
    const char *at = strchr(s, '@');
    size_t nl = at ? (size_t)(at - s) : strlen(s);
    if (nl == 0 || nl >= sizeof name)
        return "must be [B:]SIGNAL[@SECONDS]";
    memcpy(name, s, nl);
    name[nl] = '\0';
    *sig = api_spec_signal(name);
    if (*sig < 1)
        return "unknown signal (a name like USR1 or SIGUSR1, or a number 1..64)";
    if (*sig == 9 || *sig == 19)
        return "SIGKILL and SIGSTOP cannot be caught";
    *secs = SIGNAL_TIME_DEFAULT_S;
    if (at && !sbatch_parse_long(at + 1, 0, SIGNAL_TIME_MAX_S, secs))
        return "the time after '@' must be 0..65535 seconds";
    return NULL;
}

static int sbatch_dep_fail(const char **why, const char *reason)
{
    *why = reason;
    return 1;
}

/* One item of --dependency (ts_dep_walk): TYPE:ID[_INDEX][+MIN][:ID...] or
 * singleton; *arg is left NULL or set to the reason. */
static int sbatch_dep_item(const char *p, const char *e, void *arg)
{
    static const char *const types[] = {"after", "afterany", "afterok", "afternotok",
                                        "aftercorr", "afterburstbuffer"};
    const char **why = arg;
    size_t n = (size_t)(e - p);
    if (n == 9 && strncmp(p, "singleton", 9) == 0)
        return 0; /* no job ids */
    const char *colon = memchr(p, ':', n);
    if (!colon)
        return sbatch_dep_fail(why, "each item must be TYPE:JOBID[:JOBID...] or singleton");
    size_t tl = (size_t)(colon - p);
    bool known = false;
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
        known = known || (strlen(types[t]) == tl && strncmp(types[t], p, tl) == 0);
    if (!known)
        return sbatch_dep_fail(why, "unknown type (after, afterany, afterok, afternotok, "
                                    "aftercorr, singleton)");
    const char *q = colon + 1;
    while (q < e) {
        long id, plus;
        if (!sbatch_take_num(&q, 0x7fffffffL, &id) || id < 1)
            return sbatch_dep_fail(why, "job ids must be positive integers");
        if (*q == '_') { /* an array element: ID_INDEX */
            q++;
            if (!sbatch_take_num(&q, TS_SBATCH_ARRAY_INDEX_MAX, &id))
                return sbatch_dep_fail(why, "an array element is JOBID_INDEX");
        }
        if (*q == '+') {
            q++;
            if (!sbatch_take_num(&q, 0x7fffffffL, &plus))
                return sbatch_dep_fail(why, "a delay after '+' is minutes");
        }
        if (q < e && *q != ':')
            return sbatch_dep_fail(why, "job ids are separated by ':'");
        if (q < e)
            q++;
        if (q == e && q[-1] == ':')
            return sbatch_dep_fail(why, "ends with ':'");
    }
    return 0;
}

/* --dependency, checked as Slurm writes it (sbatch.c then reads what
 * Tessera evaluates with ts_dep_parse): items joined by ',' (all) or '?'
 * (any), as ts_dep_walk splits them. */
const char *sbatch_check_dependency(const char *s)
{
    const char *why = NULL;
    bool any;
    if (ts_dep_walk(s, sbatch_dep_item, &why, &any) && !why)
        return TS_DEP_MIXED;
    return why;
}

const char *sbatch_next_line(const char *buf, size_t len, size_t *pos, size_t *ll)
{
    if (*pos >= len)
        return NULL;
    const char *ls = buf + *pos;
    const char *nl = memchr(ls, '\n', len - *pos);
    *ll = nl ? (size_t)(nl - ls) : len - *pos;
    *pos += *ll + (nl ? 1 : 0);
    return ls;
}

/* --export: ALL, NONE, or a list of ALL, NIL, NAME and NAME=value. */
const char *sbatch_check_export(const char *s)
{
    if (strcmp(s, "NONE") == 0 || strcmp(s, "ALL") == 0 || strcmp(s, "NIL") == 0)
        return NULL;
    char *copy = strdup(s);
    if (!copy)
        return NULL;
    const char *why = NULL;
    char *save = NULL;
    for (char *item = strtok_r(copy, ",", &save); item && !why;
         item = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(item, '=');
        if (eq)
            *eq = '\0';
        if (!eq && (strcmp(item, "ALL") == 0 || strcmp(item, "NONE") == 0 ||
                    strcmp(item, "NIL") == 0))
            continue;
        if (!api_spec_env_name_ok(item))
            why = "each item must be ALL, NONE, NAME or NAME=value, with NAME "
                  "[A-Za-z_][A-Za-z0-9_]*";
    }
    free(copy);
    return why;
}
