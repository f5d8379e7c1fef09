/*
 * spec_scalar.c - the job spec's number, duration, signal and variable-name
 * grammars (see spec_scalar.h).
 *
 * Each is deliberately narrower than the C library's reader for the same
 * thing: strtod takes "nan", "inf", hex and leading blanks, strtol takes "+"
 * and blanks, and a spec that means something different from what its author
 * typed is worse than one refused with a reason. Signal numbers come from
 * <signal.h>, so they are the controller's own platform's (Linux).
 */
#include "api/spec_scalar.h"

#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#define DURATION_DIGITS_MAX 12 /* per component: 999999999999 s is far past the cap */

static bool is_digit(char c) { return c >= '0' && c <= '9'; }

/* The length of the digit run at s. */
static size_t digits(const char *s)
{
    size_t n = 0;
    while (is_digit(s[n]))
        n++;
    return n;
}

bool api_spec_number(const char *s, double *out)
{
    const char *p = s;
    if (*p == '-')
        p++;
    size_t n = digits(p);
    if (n == 0 || (p[0] == '0' && n > 1))
        return false;
    p += n;
    if (*p == '.') {
        n = digits(++p);
        if (n == 0)
            return false;
        p += n;
    }
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-')
            p++;
        n = digits(p);
        if (n == 0)
            return false;
        p += n;
    }
    if (*p)
        return false;
    double v = strtod(s, NULL);
    if (!isfinite(v))
        return false;
    *out = v == 0 ? 0.0 : v; /* no -0 */
    return true;
}

/* k / 1000.0 is the double nearest to k ms, so a rounded duration prints
 * back in a few digits and reads back to the same double. */
static double round_ms(double s)
{
    return round(s * TS_SPEC_DURATION_MS_PER_S) / TS_SPEC_DURATION_MS_PER_S;
}

bool api_spec_duration(const char *s, double *out_s)
{
    double v;
    if (api_spec_number(s, &v)) {
        v = round_ms(v);
        if (v < 0 || v > TS_SPEC_DURATION_MAX_S)
            return false;
        *out_s = v == 0 ? 0.0 : v;
        return true;
    }
    static const char UNITS[] = "dhms";
    static const double UNIT_S[] = {86400.0, 3600.0, 60.0, 1.0};
    const char *p = s;
    int next_unit = 0; /* units must fall: d before h before m before s */
    double total = 0;
    if (!*p)
        return false;
    while (*p) {
        size_t n = digits(p);
        if (n == 0 || n > DURATION_DIGITS_MAX)
            return false;
        double amount = 0;
        for (size_t i = 0; i < n; i++)
            amount = amount * 10 + (p[i] - '0');
        p += n;
        const char *u = *p ? strchr(UNITS, *p) : NULL;
        if (!u || u - UNITS < next_unit)
            return false;
        next_unit = (int)(u - UNITS) + 1;
        total += amount * UNIT_S[u - UNITS];
        p++;
    }
    if (total > TS_SPEC_DURATION_MAX_S)
        return false;
    *out_s = total;
    return true;
}

typedef struct signame {
    const char *name; /* as written back: "SIGUSR1" */
    int sig;
} signame;

#define SIG_PREFIX_LEN 3 /* "SIG", optional in a spec */

static const signame SIGNALS[] = {
    {"SIGHUP", SIGHUP},       {"SIGINT", SIGINT},   {"SIGQUIT", SIGQUIT}, {"SIGILL", SIGILL},
    {"SIGTRAP", SIGTRAP},     {"SIGABRT", SIGABRT}, {"SIGBUS", SIGBUS},   {"SIGFPE", SIGFPE},
    {"SIGKILL", SIGKILL},     {"SIGUSR1", SIGUSR1}, {"SIGSEGV", SIGSEGV}, {"SIGUSR2", SIGUSR2},
    {"SIGPIPE", SIGPIPE},     {"SIGALRM", SIGALRM}, {"SIGTERM", SIGTERM}, {"SIGCHLD", SIGCHLD},
    {"SIGCONT", SIGCONT},     {"SIGSTOP", SIGSTOP}, {"SIGTSTP", SIGTSTP}, {"SIGTTIN", SIGTTIN},
    {"SIGTTOU", SIGTTOU},     {"SIGURG", SIGURG},   {"SIGXCPU", SIGXCPU}, {"SIGXFSZ", SIGXFSZ},
    {"SIGVTALRM", SIGVTALRM}, {"SIGPROF", SIGPROF}, {"SIGSYS", SIGSYS},
#ifdef SIGWINCH
    {"SIGWINCH", SIGWINCH},
#endif
#ifdef SIGIO
    {"SIGIO", SIGIO},
#endif
#ifdef SIGPWR
    {"SIGPWR", SIGPWR},
#endif
};
#define NSIGNALS ((int)(sizeof SIGNALS / sizeof SIGNALS[0]))

static char upper(char c) { return c >= 'a' && c <= 'z' ? (char)(c - 'a' + 'A') : c; }

/* ASCII case-insensitive equality; strcasecmp is POSIX, not C11. */
static bool name_eq(const char *a, const char *b)
{
    for (; *a && *b; a++, b++)
        if (upper(*a) != upper(*b))
            return false;
    return *a == *b;
}

int api_spec_signal(const char *s)
{
    size_t n = digits(s);
    if (n > 0) {
        if (s[n] || n > 2 || s[0] == '0')
            return -1;
        int v = atoi(s);
        return v >= 1 && v <= TS_SPEC_SIGNAL_MAX ? v : -1;
    }
    if (upper(s[0]) == 'S' && upper(s[1]) == 'I' && upper(s[2]) == 'G')
        s += SIG_PREFIX_LEN;
    for (int i = 0; i < NSIGNALS; i++)
        if (name_eq(s, SIGNALS[i].name + SIG_PREFIX_LEN))
            return SIGNALS[i].sig;
    return -1;
}

const char *api_spec_signal_name(int sig)
{
    for (int i = 0; i < NSIGNALS; i++)
        if (SIGNALS[i].sig == sig)
            return SIGNALS[i].name;
    return NULL;
}

bool api_spec_env_name_ok(const char *s)
{
    if (!s[0] || is_digit(s[0]) || strlen(s) >= TS_SPEC_ENV_NAME_MAX)
        return false;
    for (const char *p = s; *p; p++) {
        char c = *p;
        if (!(is_digit(c) || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'))
            return false;
    }
    return true;
}
