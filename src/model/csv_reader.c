/*
 * csv_reader.c - splitting and numeric fields of the fixed-header trace CSVs
 * (see csv_reader.h).
 *
 * The Pollux and Philly trace loaders read the same kind of file: no quoting,
 * a fixed column count, numbers written as plain decimals. They used to carry
 * identical copies of these two routines; one copy here keeps what they
 * accept and how they word an error the same. strtod is used for every
 * number because the traces write whole counts and fractional seconds alike;
 * "integer" then only checks there is no fractional part.
 */
#include "model/csv_reader.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tessera/grow.h"

int ts_csv_next(ts_csv_lines *it, char *row, size_t cap, ts_err *err)
{
    if (it->pos >= it->len)
        return 0;
    const char *start = it->buf + it->pos;
    const char *nl = memchr(start, '\n', it->len - it->pos);
    size_t l = nl ? (size_t)(nl - start) : it->len - it->pos;
    it->line++;
    it->pos += l + (nl ? 1 : 0);
    if (l >= cap)
        return ts_err_set(err, TS_EINVAL, "%s:%d: line longer than %zu bytes", it->fname,
                          it->line, cap - 1);
    if (memchr(start, '\0', l))
        return ts_err_set(err, TS_EINVAL, "%s:%d: contains a NUL byte", it->fname, it->line);
    memcpy(row, start, l);
    row[l] = '\0';
    if (l > 0 && row[l - 1] == '\r')
        row[l - 1] = '\0';
    return 1;
}

int ts_csv_split(char *line, char **f, int max)
{
    int n = 0;
    char *p = line;
    for (;;) {
        if (n < max)
            f[n] = p;
        n++;
        char *c = strchr(p, ',');
        if (!c)
            break;
        *c = '\0';
        p = c + 1;
    }
    return n;
}

int ts_csv_row(ts_csv_lines *it, char *row, size_t cap, const char *header, char **f, int nf,
               ts_err *err)
{
    for (;;) {
        int got = ts_csv_next(it, row, cap, err);
        if (got <= 0)
            return got;
        if (it->line == 1) {
            if (header && strcmp(row, header) != 0)
                return ts_err_set(err, TS_EINVAL, "%s:1: header: expected %s", it->fname,
                                  header);
            continue;
        }
        if (!row[0])
            continue;
        int n = nf > 0 ? ts_csv_split(row, f, nf) : 0;
        if (n != nf)
            return ts_err_set(err, TS_EINVAL, "%s:%d: expected %d fields, got %d", it->fname,
                              it->line, nf, n);
        return 1;
    }
}

int ts_csv_reserve(void **arr, int *cap, int n, int first, size_t elem, const char *fname,
                   ts_err *err)
{
    if (ts_grow(arr, cap, n + 1, first, elem) != 0)
        return ts_err_set(err, TS_ENOMEM, "%s: out of memory", fname);
    return 0;
}

int ts_csv_number(const char *fname, int line, const char *col, const char *s, double min,
                  double max, bool integer, double *out, ts_err *err)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || errno || !isfinite(v) || v < min || v > max ||
        (integer && v != floor(v)))
        return ts_err_set(err, TS_EINVAL, "%s:%d: %s: must be %s in [%.0f, %.0f], got \"%s\"",
                          fname, line, col, integer ? "an integer" : "a number", min, max, s);
    *out = v;
    return 0;
}

void ts_csv_put_field(FILE *f, const char *s)
{
    if (!strpbrk(s, ",\"\r\n")) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"')
            fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}
