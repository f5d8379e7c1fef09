/*
 * event_text.c - what `tessera events` prints for an event, and the compact
 * forms of lists (node names as ranges) that `show` uses.
 *
 * The controller gives each event a `data` object with the detail's facts
 * typed (docs/api.md "Events"); this file words them for a person: times
 * local ISO-8601, spans as durations ("1h 02m"), the tier by name, GPUs as
 * "8×H100-80GB", GPU-seconds as GPU-hours. An event whose data says nothing
 * this file knows prints its detail text as it came, so a newer controller's
 * events still read.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

#define EVENT_S_PER_MINUTE 60.0
#define EVENT_S_PER_HOUR 3600.0
#define EVENT_S_PER_DAY 86400.0

void cli_duration(double s, char *buf, size_t size)
{
    if (!isfinite(s) || s < 0)
        s = 0;
    if (s < EVENT_S_PER_MINUTE)
        snprintf(buf, size, "%.0fs", s);
    else if (s < EVENT_S_PER_HOUR)
        snprintf(buf, size, "%dm %02ds", (int)(s / EVENT_S_PER_MINUTE), (int)fmod(s, EVENT_S_PER_MINUTE));
    else if (s < EVENT_S_PER_DAY)
        snprintf(buf, size, "%dh %02dm", (int)(s / EVENT_S_PER_HOUR),
                 (int)(fmod(s, EVENT_S_PER_HOUR) / EVENT_S_PER_MINUTE));
    else
        snprintf(buf, size, "%dd %02dh", (int)(s / EVENT_S_PER_DAY),
                 (int)(fmod(s, EVENT_S_PER_DAY) / EVENT_S_PER_HOUR));
}

static double num(const json_t *d, const char *k) { return json_number_value(json_object_get(d, k)); }

static const char *str(const json_t *d, const char *k)
{
    const char *s = json_string_value(json_object_get(d, k));
    return s ? s : "?";
}

static bool has(const json_t *d, const char *k) { return json_object_get(d, k) != NULL; }

const char *cli_event_text(const json_t *ev, char *buf, size_t size)
{
    const json_t *d = json_object_get(ev, "data");
    const char *kind = json_string_value(json_object_get(ev, "kind"));
    char t0[64], t1[64], span[32];
    char raw[CLI_CELL_MAX];
    if (!kind)
        kind = "";
    if (strcmp(kind, "run-ended") == 0 && has(d, "start") && has(d, "end")) {
        double s = num(d, "start"), e = num(d, "end");
        long long g = (long long)json_integer_value(json_object_get(d, "gpus"));
        char on[CLI_CELL_MAX];
        if (g > 0)
            snprintf(on, sizeof on, "%lld\u00d7%s", g, str(d, "model"));
        else
            snprintf(on, sizeof on, "no GPU"); /* a CPU-only run */
        cli_duration(e - s, span, sizeof span);
        snprintf(buf, size, "ran %s (%s to %s) on %s, %s; %.2f GPU-hours", span,
                 cli_time_iso(json_object_get(d, "start"), t0, sizeof t0),
                 cli_time_iso(json_object_get(d, "end"), t1, sizeof t1), on, str(d, "tier"),
                 (double)g * (e - s) / EVENT_S_PER_HOUR);
    } else if (strcmp(kind, "reserved") == 0 && has(d, "start_by")) {
        cli_duration(num(d, "in_s"), span, sizeof span);
        snprintf(buf, size, "holds the reservation: starts by %s (in %s)",
                 cli_time_iso(json_object_get(d, "start_by"), t0, sizeof t0), span);
    } else if (strcmp(kind, "started") == 0 && json_array_size(json_object_get(d, "nodes")) > 1) {
        /* the node list folded into ranges: r1-n[1-4] */
        const json_t *nodes = json_object_get(d, "nodes");
        size_t n = json_array_size(nodes);
        const char **names = calloc(n, sizeof *names);
        struct cli_buf b = {0};
        for (size_t i = 0; names && i < n; i++)
            names[i] = json_string_value(json_array_get(nodes, i));
        if (names)
            cli_name_ranges(names, n, &b);
        snprintf(buf, size, "on %s%s", b.p && !b.oom ? b.p : str(d, "node"),
                 json_is_true(json_object_get(d, "more_nodes")) ? " and other nodes" : "");
        free(names);
        cli_buf_free(&b);
    } else if (strcmp(kind, "started") == 0 && has(d, "node")) {
        snprintf(buf, size, "on %s%s", str(d, "node"),
                 json_is_true(json_object_get(d, "more_nodes")) ? " and other nodes" : "");
    } else if (strcmp(kind, "preempted") == 0 && has(d, "for_job")) {
        /* the preemptor's tier (absent from events written before it was
         * recorded) and the cause */
        cli_duration(num(d, "grace_s"), span, sizeof span);
        bool tier = has(d, "tier");
        snprintf(buf, size, "for job %lld (%s, %s%s%s); signal %lld, grace %s, %.2f GPU-hours "
                 "since the last checkpoint",
                 (long long)json_integer_value(json_object_get(d, "for_job")),
                 str(d, "for_tenant"), tier ? str(d, "tier") : "", tier ? ", " : "",
                 strcmp(str(d, "cause"), "time-sharing") == 0 ? "time-sharing" : "reclaim",
                 (long long)json_integer_value(json_object_get(d, "signal")), span,
                 num(d, "lost_gpu_s") / EVENT_S_PER_HOUR);
    } else if (strcmp(kind, "step-started") == 0 && has(d, "name")) {
        const json_t *cmd = json_object_get(d, "command"), *nodes = json_object_get(d, "nodes");
        snprintf(buf, size, "step %s: %s%s, %lld task(s) on %s%s", str(d, "name"),
                 json_array_size(cmd) ? json_string_value(json_array_get(cmd, 0)) : "?",
                 json_array_size(cmd) > 1 ? " ..." : "", (long long)num(d, "ntasks"),
                 json_array_size(nodes) ? json_string_value(json_array_get(nodes, 0)) : "?",
                 json_array_size(nodes) > 1 ? " ..." : "");
    } else if (strcmp(kind, "step-ended") == 0 && has(d, "name")) {
        cli_duration(num(d, "end") - num(d, "start"), span, sizeof span);
        const json_t *code = json_object_get(d, "exit_code");
        snprintf(buf, size, "step %s %s after %s, exit %lld; %.2f GPU-hours", str(d, "name"),
                 str(d, "state"), span, json_is_integer(code) ? (long long)json_integer_value(code)
                                                              : -1LL,
                 num(d, "gpu_seconds") / EVENT_S_PER_HOUR);
    } else if ((strcmp(kind, "requeued") == 0 || strcmp(kind, "held") == 0) && has(d, "outcome")) {
        if (has(d, "eligible_at"))
            snprintf(buf, size, "every rank stopped (%s); eligible again %s", str(d, "outcome"),
                     cli_time_iso(json_object_get(d, "eligible_at"), t0, sizeof t0));
        else
            snprintf(buf, size, "every rank stopped (%s); held until released", str(d, "outcome"));
    } else if ((strcmp(kind, "cancel") == 0 || strcmp(kind, "hold") == 0 ||
                strcmp(kind, "release") == 0 || strcmp(kind, "requeue") == 0) && has(d, "by")) {
        snprintf(buf, size, "by %s", cli_clean(str(d, "by"), raw, sizeof raw));
    } else {
        snprintf(buf, size, "%s", cli_str(ev, "detail", raw, sizeof raw));
    }
    return buf;
}

/* Sorts names by prefix, then by the number that ends them. */
typedef struct named {
    const char *s;
    size_t plen;   /* characters before the trailing digits */
    long n;        /* the trailing number, -1 for none */
    int width;     /* its digits when written with a leading zero, else 0 */
} named;

static int by_prefix_number(const void *x, const void *y)
{
    const named *a = x, *b = y;
    size_t m = a->plen < b->plen ? a->plen : b->plen;
    int c = strncmp(a->s, b->s, m);
    if (c)
        return c;
    if (a->plen != b->plen)
        return a->plen < b->plen ? -1 : 1;
    if (a->width != b->width)
        return a->width < b->width ? -1 : 1;
    return a->n < b->n ? -1 : a->n > b->n;
}

void cli_name_ranges(const char *const *names, size_t n, struct cli_buf *b)
{
    named *v = calloc(n ? n : 1, sizeof *v);
    if (!v) {
        b->oom = true;
        return;
    }
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(names[i]), p = len;
        while (p > 0 && names[i][p - 1] >= '0' && names[i][p - 1] <= '9' && len - p < 9)
            p--;
        v[i] = (named){names[i], p, p < len ? strtol(names[i] + p, NULL, 10) : -1,
                       p < len && names[i][p] == '0' && len - p > 1 ? (int)(len - p) : 0};
    }
    qsort(v, n, sizeof *v, by_prefix_number);
    for (size_t i = 0; i < n;) {
        size_t j = i; /* the run of names with i's prefix and width */
        while (j + 1 < n && v[j + 1].n >= 0 && v[i].n >= 0 && v[j + 1].plen == v[i].plen &&
               v[j + 1].width == v[i].width && strncmp(v[j + 1].s, v[i].s, v[i].plen) == 0)
            j++;
        cli_buf_printf(b, "%s", i ? "," : "");
        if (j == i || v[i].n < 0 || v[j].n == v[i].n) { /* one name (maybe repeated) */
            cli_buf_printf(b, "%s", v[i].s);
            i = j + 1;
            while (i < n && strcmp(v[i].s, v[i - 1].s) == 0) /* "login" twice */
                i++;
            continue;
        }
        cli_buf_printf(b, "%.*s[", (int)v[i].plen, v[i].s);
        for (size_t k = i; k <= j;) {
            size_t e = k;
            /* consecutive numbers, a name given twice counting once */
            while (e + 1 <= j && (v[e + 1].n == v[e].n + 1 || v[e + 1].n == v[e].n))
                e++;
            cli_buf_printf(b, "%s%s", k > i ? "," : "", v[k].s + v[k].plen);
            if (v[e].n != v[k].n)
                cli_buf_printf(b, "-%s", v[e].s + v[e].plen);
            k = e + 1;
        }
        cli_buf_printf(b, "]");
        i = j + 1;
    }
    free(v);
}
