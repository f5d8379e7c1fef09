/*
 * register.c - the shim tells the agent it is loaded.
 *
 * The dynamic loader ignores an LD_PRELOAD it cannot load, and a static
 * program never reads it: either way a fractional task would run without
 * its limits. So the agent gives the task an empty file of its own
 * (TESSERA_CUDA_LOADED) and stops the task when nothing was written there
 * within a few seconds; this constructor, run in every process that loads
 * the library before any CUDA call (a shell wrapper included), writes to it.
 *
 * Only plain system calls: it runs before main, in any program, and must
 * neither create a file the agent did not make (no O_CREAT), follow a link
 * or block on a FIFO put in its place. Failing, it stays silent: the agent
 * then stops the task, which is the point.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tessera/shim.h"

__attribute__((constructor)) static void ts_shim_register(void)
{
    const char *path = getenv(TS_SHIM_ENV_LOADED);
    if (path == NULL || path[0] == '\0')
        return;
    int fd = open(path, O_WRONLY | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return;
    /* once is enough: the task's later processes leave it as it is (lseek,
     * not fstat, whose symbol is newer than the glibc floor; a FIFO or a
     * device answers ESPIPE or is not empty) */
    if (lseek(fd, 0, SEEK_END) == 0) {
        ssize_t w = write(fd, TS_SHIM_LOADED_TEXT, sizeof TS_SHIM_LOADED_TEXT - 1);
        (void)w;
    }
    close(fd);
}
