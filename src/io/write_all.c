/*
 * write_all.c - a buffer written whole (io/write_all.h).
 */
#include "io/write_all.h"

#include <errno.h>
#include <unistd.h>

int io_write_all(int fd, const void *p, size_t n)
{
    const char *b = p;
    while (n > 0) {
        ssize_t w = write(fd, b, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        b += w;
        n -= (size_t)w;
    }
    return 0;
}
