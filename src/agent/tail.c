/*
 * tail.c - the end of an output file as valid UTF-8 text (tail.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/tail.h"

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

void ts_tail_sanitize(char *buf, size_t len)
{
    unsigned char *p = (unsigned char *)buf;
    size_t i = 0;
    while (i < len) {
        size_t k = utf8_len(p + i, len - i);
        if (k == 0 || (k == 1 && p[i] < 0x20 && p[i] != '\n' && p[i] != '\t') || p[i] == 0x7F) {
            p[i++] = '?';
            continue;
        }
        i += k;
    }
}

/* The tail of the open file f, whose stat is stp; closes f. */
static int tail_of(FILE *f, const struct stat *stp, size_t max, char **out, long long *size,
                   ts_err *err)
{
    struct stat st = *stp;
    *size = (long long)st.st_size;
    size_t want = (size_t)st.st_size < max ? (size_t)st.st_size : max;
    char *buf = malloc(want + 1);
    if (!buf) {
        fclose(f);
        return ts_err_set(err, TS_ENOMEM, "out of memory");
    }
    size_t got = 0;
    if (fseek(f, (long)((size_t)st.st_size - want), SEEK_SET) == 0)
        got = fread(buf, 1, want, f);
    fclose(f);
    buf[got] = '\0';
    /* a cut first line is dropped when the tail holds more than it */
    char *start = buf;
    if (got == max && (size_t)st.st_size > max) {
        char *nl = memchr(buf, '\n', got);
        if (nl && (size_t)(nl - buf) + 1 < got)
            start = nl + 1;
    }
    size_t n = got - (size_t)(start - buf);
    memmove(buf, start, n);
    buf[n] = '\0';
    ts_tail_sanitize(buf, n);
    *out = buf;
    return 0;
}

int ts_tail_read(const char *path, size_t max, char **out, long long *size, ts_err *err)
{
    *out = NULL;
    *size = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return ts_err_set(err, errno == ENOENT ? TS_ENOENT : TS_EIO, "%s: %s", path,
                          strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0) {
        fclose(f);
        return ts_err_set(err, TS_EIO, "%s: %s", path, strerror(errno));
    }
    return tail_of(f, &st, max, out, size, err);
}

int ts_tail_read_owned(const char *path, uid_t uid, size_t max, char **out, long long *size,
                       ts_err *err)
{
    *out = NULL;
    *size = 0;
    /* a path the task chose: never a link, a FIFO that blocks, or a file
     * its user does not own (what it could not read itself) */
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return ts_err_set(err, errno == ENOENT ? TS_ENOENT : TS_EIO, "%s: %s", path,
                          strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != uid) {
        close(fd);
        return ts_err_set(err, TS_EINVAL, "%s: not a regular file of uid %ld", path, (long)uid);
    }
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        close(fd);
        return ts_err_set(err, TS_ENOMEM, "out of memory");
    }
    return tail_of(f, &st, max, out, size, err);
}
