/*
 * write_all.h - the one loop that writes a buffer whole to a descriptor
 * (the agent's task records, the CLI's session relay): a short write goes
 * on with the rest, an interrupted one is tried again.
 */
#ifndef TS_IO_WRITE_ALL_H
#define TS_IO_WRITE_ALL_H

#include <stddef.h>

/* Writes p[0..n) to fd; 0, or -1 (errno) once a write fails or writes
 * nothing. */
int io_write_all(int fd, const void *p, size_t n);

#endif
