/*
 * fileio.c - the simulator's input files, read whole by the tools' one
 * reader (io/read_file.h) up to SIM_FILE_MAX_BYTES.
 */
#include "sim/fileio.h"

#include <stdio.h>

#include "io/read_file.h"

char *sim_read_file(const char *path, size_t *len, ts_err *err)
{
    char *buf;
    return io_read_file(path, SIM_FILE_MAX_BYTES, &buf, len, err) == 0 ? buf : NULL;
}

int sim_bad(const char *who, const char *fmt, const char *arg)
{
    fprintf(stderr, "%s: ", who);
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n");
    return 2;
}
