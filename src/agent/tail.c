/*
 * tail.c - the end of an output file as valid UTF-8 text (tail.h).
 */
#define _DEFAULT_SOURCE /* pread */
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/tail.h"
#include "agent/taskfile.h"

/* Length of the valid UTF-8 sequence at p (n bytes left), 0 if invalid. */
static size_t utf8_len(const unsigned char *p, size_t n)
{
    size_t need;
    unsigned min;
    if (p[0] < 0x80)
        return 1;
    if ((p[0] & 0xE0) == 0xC0) {
        need = 2;
        min = 0x80;
    } else if ((p[0] & 0xF0) == 0xE0) {
        need = 3;
        min = 0x800;
    } else if ((p[0] & 0xF8) == 0xF0) {
        need = 4;
        min = 0x10000;
    } else {
        return 0;
    }
    if (n < need)
        return 0;
    unsigned cp = p[0] & (0x7Fu >> need);
    for (size_t i = 1; i < need; i++) {
        if ((p[i] & 0xC0) != 0x80)
            return 0;
        cp = cp << 6 | (p[i] & 0x3Fu);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return need;
}

void agent_tail_sanitize(char *buf, size_t len)
{
    unsigned char *p = (unsigned char *)buf;
    size_t i = 0;
    while (i < len) {
        size_t k = utf8_len(p + i, len - i);
        if (k == 0 || (k == 1 && p[i] < 0x20 && p[i] != '\n' && p[i] != '\t') || p[i] == 0x7F) {
            p[i++] = '?';
            continue;
        }
        if (k == 2 && p[i] == 0xC2 && p[i + 1] <= 0x9F) { /* a C1 control, U+0080..U+009F */
            p[i++] = '?';
            p[i++] = '?';
            continue;
        }
        i += k;
    }
}

int agent_tail_read(const char *path, size_t max, uid_t owner, char **out, long long *size,
                 ts_err *err)
{
    return agent_tail_read_in(NULL, path, max, owner, out, size, err);
}

int agent_tail_read_in(const char *root, const char *path, size_t max, uid_t owner, char **out,
                       long long *size, ts_err *err)
{
    long long from;
    return agent_tail_read_at(root, path, -1, max, owner, out, size, &from, err);
}

/* How many bytes at the end of buf[0..n) begin a UTF-8 character that
 * does not end there (0 when its last character is whole or invalid). */
static size_t utf8_unfinished(const unsigned char *buf, size_t n)
{
    for (size_t back = 1; back <= 3 && back <= n; back++) {
        unsigned char b = buf[n - back];
        if ((b & 0xC0) == 0x80)
            continue; /* a continuation byte: look further back */
        size_t need = (b & 0xE0) == 0xC0 ? 2 : (b & 0xF0) == 0xE0 ? 3 : (b & 0xF8) == 0xF0 ? 4 : 1;
        return need > back ? back : 0;
    }
    return 0;
}

int agent_tail_read_at(const char *root, const char *path, long long offset, size_t max,
                       uid_t owner, char **out, long long *size, long long *from, ts_err *err)
{
    *out = NULL;
    *size = 0;
    *from = 0;
    /* the task's file: no link followed, nothing that blocks (taskfile.h) */
    int fd = agent_taskfile_open_in(root, path, O_RDONLY, owner, err);
    if (fd < 0)
        return fd;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        close(fd);
        return ts_err_set(err, TS_EIO, "%s: %s", path, strerror(errno));
    }
    *size = (long long)st.st_size;
    bool tail = offset < 0;
    off_t at = tail ? st.st_size - (off_t)((size_t)st.st_size < max ? (size_t)st.st_size : max)
                    : (off_t)(offset < (long long)st.st_size ? offset : (long long)st.st_size);
    size_t want = (size_t)(st.st_size - at) < max ? (size_t)(st.st_size - at) : max;
    char *buf = malloc(want + 1);
    if (!buf) {
        close(fd);
        return ts_err_set(err, TS_ENOMEM, "out of memory");
    }
    /* at most want bytes, however the file grows or shrinks meanwhile */
    size_t got = 0;
    while (got < want) {
        ssize_t n = pread(fd, buf + got, want - got, at + (off_t)got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close(fd);
    char *start = buf;
    if (tail && got == max && (size_t)st.st_size > max) {
        /* a cut first line is dropped when the tail holds more than it */
        char *nl = memchr(buf, '\n', got);
        if (nl && (size_t)(nl - buf) + 1 < got)
            start = nl + 1;
    } else if (!tail) {
        got -= utf8_unfinished((const unsigned char *)buf, got);
    }
    size_t n = got - (size_t)(start - buf);
    *from = (long long)at + (long long)(start - buf);
    memmove(buf, start, n);
    buf[n] = '\0';
    agent_tail_sanitize(buf, n);
    *out = buf;
    return 0;
}
