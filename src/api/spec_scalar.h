/*
 * spec_scalar.h - internal: the job spec's scalar formats, apart from YAML.
 *
 * A job spec's values that are more than a plain integer or name - numbers
 * with a fraction, durations ("90m", "1h30m" or seconds), signal names and
 * environment variable names - are read by these pure string functions, so
 * the parser (spec.c) and the canonical JSON writer (spec_json.c) agree on
 * one grammar and the grammar can be tested on its own. Nothing here
 * allocates, keeps state or knows a key path.
 */
#ifndef TS_API_SPEC_SCALAR_H
#define TS_API_SPEC_SCALAR_H

#include <stdbool.h>

#define TS_SPEC_DURATION_MAX_S (365.0 * 86400.0) /* a year; more is a typo */
#define TS_SPEC_DURATION_MS_PER_S 1000.0         /* durations are kept to the ms */
#define TS_SPEC_ENV_NAME_MAX 256
#define TS_SPEC_SIGNAL_MAX 64 /* Linux: SIGRTMAX */

/* A JSON number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?, finite.
 * Stricter than strtod, which also takes "inf", "nan", hex and blanks. */
bool api_spec_number(const char *s, double *out);

/* A duration 0..TS_SPEC_DURATION_MAX_S: a number of seconds (as above), or
 * units in falling order, each at most once: "45s", "90m", "2h", "1d",
 * "1h30m", "1d12h". Rounded to the millisecond. */
bool api_spec_duration(const char *s, double *out_s);

/* "SIGUSR1", "USR1" (any case) or a number 1..TS_SPEC_SIGNAL_MAX: the signal
 * number, or -1. */
int api_spec_signal(const char *s);
/* "SIGUSR1" for a known number, NULL otherwise. */
const char *api_spec_signal_name(int sig);

/* A shell-safe variable name: [A-Za-z_][A-Za-z0-9_]*, shorter than
 * TS_SPEC_ENV_NAME_MAX (libyaml reads no longer key in flow syntax). */
bool api_spec_env_name_ok(const char *s);

#endif
