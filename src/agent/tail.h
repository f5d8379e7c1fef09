/*
 * tail.h - the end of a task's output file as text the agent protocol can
 * carry: at most `max` bytes from the end, cut to whole lines where it can,
 * with bytes that are not valid UTF-8 (or are control characters other than
 * newline and tab) replaced by '?', so the JSON string is always valid.
 *
 * Ownership: *out is malloc'd, the caller frees it. Nothing prints.
 */
#ifndef TS_AGENT_TAIL_H
#define TS_AGENT_TAIL_H

#include <stddef.h>
#include <sys/types.h>

#include "tessera/error.h"

/* *size gets the file's whole size. The file is the task's: opened as
 * agent_taskfile_open does (a regular file owned by owner, or
 * AGENT_TASKFILE_ANY_OWNER; never a link followed nor a blocking open).
 * TS_ENOENT / TS_EINVAL / TS_EIO naming the file. */
int agent_tail_read(const char *path, size_t max, uid_t owner, char **out, long long *size,
                 ts_err *err);
/* The same for path as seen from root (agent_taskfile_open_in); root NULL:
 * agent_tail_read(path). */
int agent_tail_read_in(const char *root, const char *path, size_t max, uid_t owner, char **out,
                       long long *size, ts_err *err);
/* A piece of the file rather than its end (tessera logs -f): at most max
 * bytes from byte offset on (offset < 0: its end, as agent_tail_read_in),
 * not cut to lines, its last character whole (a character still being
 * written is read next time); *from gets the byte *out starts at. An offset
 * past the end (a new file) reads nothing. The sanitising keeps the length,
 * so *from + strlen(*out) is where the next piece starts. */
int agent_tail_read_at(const char *root, const char *path, long long offset, size_t max,
                       uid_t owner, char **out, long long *size, long long *from, ts_err *err);

/* Replaces invalid UTF-8 and control bytes in buf[0..len) in place. */
void agent_tail_sanitize(char *buf, size_t len);

#endif
