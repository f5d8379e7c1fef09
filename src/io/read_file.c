/*
 * read_file.c - reading an input file whole (io/read_file.h). The buffer
 * starts small and doubles, so a small file costs little and a large one a
 * few copies; the size is not taken from stat because the input may be a
 * pipe or grow while read.
 */
#include "io/read_file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define IO_FIRST_BYTES ((size_t)1 << 16)

int io_read_file(const char *path, size_t max_bytes, char **buf, size_t *len, ts_err *err)
{
    *buf = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return ts_err_set(err, TS_EIO, "%s: cannot open: %s", path, strerror(errno));
    size_t cap = IO_FIRST_BYTES, n = 0;
    char *b = malloc(cap);
    int rc = b ? 0 : ts_err_set(err, TS_ENOMEM, "%s: out of memory", path);
    while (rc == 0) {
        n += fread(b + n, 1, cap - 1 - n, f); /* a byte kept for the NUL */
        if (n > max_bytes)
            rc = ts_err_set(err, TS_EINVAL, "%s: larger than %zu bytes", path, max_bytes);
        else if (n < cap - 1)
            break; /* the end, or an error ferror says */
        else {
            char *nb = realloc(b, cap * 2);
            if (!nb)
                rc = ts_err_set(err, TS_ENOMEM, "%s: out of memory", path);
            else {
                b = nb;
                cap *= 2;
            }
        }
    }
    if (rc == 0 && ferror(f))
        rc = ts_err_set(err, TS_EIO, "%s: read error", path);
    fclose(f);
    if (rc != 0) {
        free(b);
        return rc;
    }
    b[n] = '\0';
    *buf = b;
    *len = n;
    return 0;
}
