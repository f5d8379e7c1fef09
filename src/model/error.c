/*
 * error.c - the ts_err helpers. Messages are truncated, never overflowed; a
 * prefix is applied in place so that context can be added as an error travels
 * up from a field parser to a file loader. A ts_errs holds several, for a
 * reader that reports every error of its input at once.
 */
#include "tessera/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int ts_err_set(ts_err *err, int code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        err->code = code;
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return code;
}

int ts_err_prefix(ts_err *err, const char *fmt, ...)
{
    if (!err)
        return 0;
    char prefix[TS_ERR_MSG_MAX];
    char old[TS_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof old);
    size_t np = strnlen(prefix, sizeof prefix);
    size_t room = sizeof err->msg - 1;
    if (np > room)
        np = room;
    memcpy(err->msg, prefix, np);
    size_t no = strnlen(old, sizeof old);
    if (no > room - np)
        no = room - np;
    memcpy(err->msg + np, old, no);
    err->msg[np + no] = '\0';
    return err->code;
}

void ts_err_clear(ts_err *err)
{
    if (err) {
        err->code = 0;
        err->msg[0] = '\0';
    }
}

void ts_errs_add(ts_errs *e, int line, const char *msg)
{
    if (!e)
        return;
    if (e->n == TS_ERRS_MAX) {
        e->more++;
        return;
    }
    e->line[e->n] = line;
    snprintf(e->msg[e->n], sizeof e->msg[e->n], "%s", msg);
    e->n++;
}

void ts_errs_clear(ts_errs *e)
{
    if (e) {
        e->n = 0;
        e->more = 0;
    }
}

void ts_errs_sort(ts_errs *e)
{
    char held[TS_ERR_MSG_MAX];
    for (int i = 1; e && i < e->n; i++) { /* insertion: stable, and at most 20 */
        int line = e->line[i], k = i;
        if (e->line[k - 1] <= line)
            continue;
        memcpy(held, e->msg[i], sizeof held);
        for (; k > 0 && e->line[k - 1] > line; k--) {
            e->line[k] = e->line[k - 1];
            memcpy(e->msg[k], e->msg[k - 1], sizeof e->msg[k]);
        }
        e->line[k] = line;
        memcpy(e->msg[k], held, sizeof held);
    }
}
