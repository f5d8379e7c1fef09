/*
 * depend.c - ts_dep_parse and ts_dep_format: the dependency text of a job
 * spec (include/tessera/depend.h, docs/job-spec.md "dependency").
 *
 * Slurm's syntax, the part Tessera evaluates: TYPE:ID[:ID...] items and
 * `singleton`, joined by ',' (all) or '?' (any), never both. Slurm's
 * further forms are refused by name rather than half-read: a delay
 * (`afterok:12+30`), an array element (`12_3`: name the element's own id)
 * and the types aftercorr and afterburstbuffer. Each id becomes one item
 * (an array's id too: tesserad expands it to the elements it decides on),
 * as Slurm keeps one record per id, so "afterok:1:2?afterany:3" holds as
 * soon as any of the three holds.
 */
#include "tessera/depend.h"

#include <stdio.h>
#include <string.h>

#include "tessera/error.h"

static const char *const NAMES[] = {"after", "afterany", "afterok", "afternotok", "singleton"};

const char *ts_dep_type_name(int type)
{
    return type >= 0 && type <= TS_DEP_SINGLETON ? NAMES[type] : "unknown";
}

static int fail(char *why, size_t size, const char *fmt, const char *arg)
{
    if (why && size)
        snprintf(why, size, fmt, arg);
    return TS_EINVAL;
}

/* One item p..e (no separator inside). */
static int parse_item(const char *p, const char *e, ts_dependency *d, char *why, size_t size)
{
    size_t n = (size_t)(e - p);
    char shown[48];
    snprintf(shown, sizeof shown, "%.*s%s", (int)(n > 40 ? 40 : n), p, n > 40 ? "..." : "");
    /* shown in a one-line message: control characters and other than ASCII
     * (perhaps cut inside a character at 40 bytes) become '?' */
    for (char *q = shown; *q; q++)
        if ((unsigned char)*q < 0x20 || (unsigned char)*q >= 0x7F)
            *q = '?';
    if (n == 0)
        return fail(why, size, "an empty item%s (TYPE:JOBID or singleton between ',' or '?')",
                    "");
    if (n == 9 && strncmp(p, "singleton", 9) == 0) {
        for (int i = 0; i < d->n; i++)
            if (d->items[i].type == TS_DEP_SINGLETON)
                return fail(why, size, "singleton given twice%s", "");
        d->items[d->n++] = (ts_dep_item){.type = TS_DEP_SINGLETON, .job = 0};
        return 0;
    }
    const char *colon = memchr(p, ':', n);
    if (!colon)
        return fail(why, size, "\"%s\" is not TYPE:JOBID[:JOBID...] or singleton", shown);
    size_t tl = (size_t)(colon - p);
    int type = -1;
    for (int t = 0; t < TS_DEP_SINGLETON; t++)
        if (strlen(NAMES[t]) == tl && strncmp(NAMES[t], p, tl) == 0)
            type = t;
    if (type < 0) {
        if ((tl == 9 && strncmp(p, "aftercorr", 9) == 0) ||
            (tl == 16 && strncmp(p, "afterburstbuffer", 16) == 0))
            return fail(why, size,
                        "\"%s\": aftercorr and afterburstbuffer are not supported "
                        "(after, afterany, afterok, afternotok, singleton)",
                        shown);
        return fail(why, size,
                    "unknown type in \"%s\" (after, afterany, afterok, afternotok, singleton)",
                    shown);
    }
    const char *q = colon + 1;
    for (;;) {
        int64_t id = 0;
        int digits = 0;
        while (q < e && *q >= '0' && *q <= '9' && digits < 19) {
            id = id * 10 + (*q++ - '0');
            digits++;
        }
        if (q < e && *q == '+')
            return fail(why, size, "\"%s\": a delay after '+' is not supported", shown);
        if (q < e && *q == '_')
            return fail(why, size,
                        "\"%s\": an array element (ID_INDEX) is not supported; name the "
                        "element's own job id",
                        shown);
        if (digits == 0 || digits > 18 || id < 1 || (q < e && *q != ':'))
            return fail(why, size, "\"%s\": job ids must be integers 1..10^18, joined by ':'",
                        shown);
        /* cannot happen within TS_DEP_MAX_BYTES: kept as the array's guard
         * (its one more slot is singleton's); a count, not a recount of the
         * items, which made a parse quadratic in the ids */
        if (d->n >= TS_DEP_MAX_IDS + 1) {
            char most[16];
            snprintf(most, sizeof most, "%d", TS_DEP_MAX_IDS);
            return fail(why, size, "more than %s job ids", most);
        }
        d->items[d->n++] = (ts_dep_item){.type = type, .job = id};
        if (q == e)
            return 0;
        q++; /* ':' */
        if (q == e)
            return fail(why, size, "\"%s\" ends with ':'", shown);
    }
}

int ts_dep_walk(const char *s, int (*item)(const char *p, const char *e, void *arg), void *arg,
                bool *any)
{
    bool comma = false, question = false;
    const char *p = s;
    for (;;) {
        const char *e = p + strcspn(p, ",?");
        int rc = item(p, e, arg);
        if (rc)
            return rc;
        if (*e == '\0')
            break;
        comma = comma || *e == ',';
        question = question || *e == '?';
        p = e + 1;
    }
    if (comma && question)
        return TS_EINVAL;
    *any = question;
    return 0;
}

/* What ts_dep_parse hands each item through ts_dep_walk. */
struct dep_walk {
    ts_dependency *out;
    char *why;
    size_t size;
    bool item_failed; /* else a failed walk is the mixed separators */
};

static int dep_item(const char *p, const char *e, void *arg)
{
    struct dep_walk *w = arg;
    int rc = parse_item(p, e, w->out, w->why, w->size);
    w->item_failed = rc != 0;
    return rc;
}

int ts_dep_parse(const char *s, ts_dependency *out, char *why, size_t size)
{
    memset(out, 0, sizeof *out);
    if (why && size)
        why[0] = '\0';
    size_t len = strlen(s);
    if (len == 0)
        return fail(why, size, "must not be empty (leave the key out for none)%s", "");
    if (len > TS_DEP_MAX_BYTES) {
        char n[64];
        snprintf(n, sizeof n, "%zu characters, at most %d", len, TS_DEP_MAX_BYTES);
        return fail(why, size, "%s", n);
    }
    struct dep_walk w = {out, why, size, false};
    int rc = ts_dep_walk(s, dep_item, &w, &out->any);
    if (rc && !w.item_failed)
        return fail(why, size, "%s", TS_DEP_MIXED);
    return rc;
}

int ts_dep_canonical(const char *s, char *out, char *why, size_t size)
{
    ts_dependency d;
    if (ts_dep_parse(s, &d, why, size) != 0)
        return TS_EINVAL;
    /* an any-dependency's ids each take their type again: at most
     * "?afterany:" and one digit for each ':' and digit given */
    static _Thread_local char text[6 * TS_DEP_MAX_BYTES + 16];
    ts_dep_format(&d, text, sizeof text);
    size_t len = strlen(text);
    if (len > TS_DEP_MAX_BYTES) {
        if (why && size)
            snprintf(why, size, "%zu characters in canonical form (each id of an any-one "
                     "dependency, joined by '?', takes its type again), at most %d",
                     len, TS_DEP_MAX_BYTES);
        return TS_EINVAL;
    }
    memcpy(out, text, len + 1);
    return 0;
}

void ts_dep_format(const ts_dependency *d, char *buf, size_t size)
{
    size_t used = 0;
    if (size == 0)
        return;
    buf[0] = '\0';
    for (int i = 0; i < d->n && used < size; i++) {
        const ts_dep_item *it = &d->items[i];
        int w;
        if (it->type == TS_DEP_SINGLETON)
            w = snprintf(buf + used, size - used, "%ssingleton", i ? (d->any ? "?" : ",") : "");
        else if (i > 0 && d->items[i - 1].type == it->type && !d->any)
            /* joined under one type only with ',': "afterok:1?afterok:2" so
             * written would read back as all of them */
            w = snprintf(buf + used, size - used, ":%lld", (long long)it->job);
        else
            w = snprintf(buf + used, size - used, "%s%s:%lld", i ? (d->any ? "?" : ",") : "",
                         NAMES[it->type], (long long)it->job);
        if (w < 0)
            break;
        used += (size_t)w;
    }
}
