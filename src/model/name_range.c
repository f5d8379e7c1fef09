/*
 * name_range.c - expansion of node-name range patterns ("h100-[001-016]",
 * "x[1-2,05,7-8]y"), split out of the YAML loader because it is a small
 * grammar of its own with its own limits, and is easiest to test alone.
 *
 * Parsing is one left-to-right pass over the bracket group, checking the
 * limits as it goes (parts, digits per bound, total names) so a hostile
 * pattern is rejected before anything is expanded. Expansion walks the parts
 * to find the k-th name, so nothing is allocated. Messages carry the reason
 * only; the loader prefixes "file:line: key.path: ".
 */
#include "model/name_range.h"

#include <stdio.h>
#include <string.h>

#define RANGE_SHOW_MAX_CHARS 40 /* characters of a bad pattern quoted back */

/* "must be <want>, got \"<s>\"", quoting s as the loader quotes any value. */
static int range_fail_got(const char *s, const char *want, ts_err *err)
{
    return ts_err_set(err, TS_EINVAL, "must be %s, got \"%.*s%s\"", want,
                      RANGE_SHOW_MAX_CHARS, s, strlen(s) > RANGE_SHOW_MAX_CHARS ? "..." : "");
}

/* Reads one decimal bound of at most TS_NAME_RANGE_MAX_DIGITS digits. */
static const char *range_number(const char *p, long *v, int *ndigits)
{
    *v = 0;
    *ndigits = 0;
    while (*p >= '0' && *p <= '9' && *ndigits < TS_NAME_RANGE_MAX_DIGITS + 1) {
        *v = *v * 10 + (*p - '0');
        (*ndigits)++;
        p++;
    }
    return (*ndigits == 0 || *ndigits > TS_NAME_RANGE_MAX_DIGITS) ? NULL : p;
}

int ts_name_range_parse(const char *s, ts_name_range *r, ts_err *err)
{
    char bad_number[64];
    snprintf(bad_number, sizeof bad_number, "a range of numbers of 1..%d digits inside [...]",
             TS_NAME_RANGE_MAX_DIGITS);
    const char *open = strchr(s, '[');
    const char *close = open ? strchr(open, ']') : NULL;
    if (!open || !close || strchr(close + 1, '[') || strchr(close + 1, ']') ||
        memchr(s, ']', (size_t)(open - s)))
        return range_fail_got(s, "a name pattern with one [lo-hi,...] range, such as "
                              "node-[001-016]", err);
    r->text = s;
    r->prefix_len = (size_t)(open - s);
    r->suffix = close + 1;
    r->nparts = 0;
    r->count = 0;
    const char *p = open + 1;
    for (;;) {
        if (r->nparts == TS_NAME_RANGE_MAX_PARTS)
            return ts_err_set(err, TS_EINVAL, "more than %d parts in [...]",
                              TS_NAME_RANGE_MAX_PARTS);
        int i = r->nparts, dl, dh;
        const char *q = range_number(p, &r->lo[i], &dl);
        if (!q)
            return range_fail_got(s, bad_number, err);
        r->width[i] = (*p == '0' && dl > 1) ? dl : 0;
        r->hi[i] = r->lo[i];
        if (*q == '-') {
            p = q + 1;
            q = range_number(p, &r->hi[i], &dh);
            if (!q)
                return range_fail_got(s, bad_number, err);
        }
        if (r->hi[i] < r->lo[i])
            return ts_err_set(err, TS_EINVAL, "range %ld-%ld runs backwards", r->lo[i],
                              r->hi[i]);
        r->count += r->hi[i] - r->lo[i] + 1;
        if (r->count > TS_NAME_RANGE_MAX_NAMES)
            return ts_err_set(err, TS_EINVAL, "expands to more than %d names",
                              TS_NAME_RANGE_MAX_NAMES);
        r->nparts++;
        if (*q == ']')
            break;
        if (*q != ',')
            return range_fail_got(s, "a name pattern such as node-[001-016] or node-[1-4,9]",
                                  err);
        p = q + 1;
    }
    return 0;
}

bool ts_name_range_name(const ts_name_range *r, long k, char *buf, size_t size)
{
    int i = 0;
    while (k > r->hi[i] - r->lo[i]) {
        k -= r->hi[i] - r->lo[i] + 1;
        i++;
    }
    int len = snprintf(buf, size, "%.*s%0*ld%s", (int)r->prefix_len, r->text, r->width[i],
                       r->lo[i] + k, r->suffix);
    return len > 0 && (size_t)len < size;
}
