/*
 * read_file.h - the one way the programs read an input file whole: the
 * simulator's traces and clusters, the allocator's trace files, tesserad's
 * cluster and tenants files. The core (libtessera) parses from memory and
 * never opens a file; the programs that do read files all say an
 * unreadable, oversized or unreadable-midway file the same way, naming the
 * path.
 */
#ifndef TS_IO_READ_FILE_H
#define TS_IO_READ_FILE_H

#include <stddef.h>

#include "tessera/error.h"

/* Reads path whole into *buf (caller frees; a NUL follows the *len bytes, so
 * text can be read as a string). A file of more than max_bytes is refused
 * (TS_EINVAL); TS_EIO for a file that cannot be opened or read, TS_ENOMEM;
 * every error names the path, and leaves *buf NULL and *len 0. */
int io_read_file(const char *path, size_t max_bytes, char **buf, size_t *len, ts_err *err);

#endif
