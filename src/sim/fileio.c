/*
 * fileio.c - the simulator's one way of reading an input file whole: grows a
 * buffer to at most SIM_FILE_MAX_BYTES and names the path in every error.
 */
#include "sim/fileio.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *sim_read_file(const char *path, size_t *len, ts_err *err)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        ts_err_set(err, TS_EIO, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (n < cap)
            break;
        if (cap >= (size_t)SIM_FILE_MAX_BYTES) {
            free(buf);
            buf = NULL;
            ts_err_set(err, TS_EINVAL, "%s: larger than %ld bytes", path, SIM_FILE_MAX_BYTES);
            fclose(f);
            return NULL;
        }
        char *nb = realloc(buf, cap * 2);
        if (!nb) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = nb;
        cap *= 2;
    }
    if (!buf)
        ts_err_set(err, TS_ENOMEM, "%s: out of memory", path);
    else if (ferror(f)) {
        ts_err_set(err, TS_EIO, "%s: read error", path);
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *len = n;
    return buf;
}

int sim_bad(const char *who, const char *fmt, const char *arg)
{
    fprintf(stderr, "%s: ", who);
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n");
    return 2;
}
