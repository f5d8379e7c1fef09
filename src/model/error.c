/*
 * error.c - the ts_err helpers. Messages are truncated, never overflowed; a
 * prefix is applied in place so that context can be added as an error travels
 * up from a field parser to a file loader.
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
