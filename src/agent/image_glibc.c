/*
 * image_glibc.c - can an image load the sharing shim? (docs/images.md
 * "Fractional GPUs in a container").
 *
 * libtessera-cuda.so is a glibc library that needs GLIBC_2.17 at most
 * (src/shim/glibc_floor.h). An image without a glibc (a static binary, a
 * musl image) or with one older than 2.17 would start its task with
 * LD_PRELOAD silently ignored: a fractional task without its limits. So the
 * image's libc.so.6 is looked up in its root, every link resolved inside
 * that root (openat2 RESOLVE_IN_ROOT: an image's links are its own and may
 * point anywhere), and its version definitions read: a glibc of 2.17 or
 * later defines the version node GLIBC_2.17. Read with a bound; the file is
 * image content, so only its bytes are trusted to say what they say.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "image.h"

#define LIBC_READ_MAX_BYTES (32L << 20)
#define READ_CHUNK_BYTES 65536

static const char *const LIBC_PATHS[] = {
    "lib/x86_64-linux-gnu/libc.so.6", "usr/lib/x86_64-linux-gnu/libc.so.6", "lib64/libc.so.6",
    "usr/lib64/libc.so.6", "lib/libc.so.6", "usr/lib/libc.so.6", NULL};
static const char FLOOR_VERSION[] = "GLIBC_2.17"; /* with its NUL: not GLIBC_2.170 */

static int open_in_root(int root, const char *path)
{
    struct open_how how = {.flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK,
                           .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS};
    return (int)syscall(SYS_openat2, root, path, &how, sizeof how);
}

/* Whether the file holds the bytes of FLOOR_VERSION and its NUL. */
static bool holds_floor(int fd)
{
    static const size_t want = sizeof FLOOR_VERSION;
    char *buf = malloc(READ_CHUNK_BYTES + want);
    if (!buf)
        return false;
    size_t keep = 0;
    long total = 0;
    bool found = false;
    ssize_t n;
    while (!found && total < LIBC_READ_MAX_BYTES &&
           (n = read(fd, buf + keep, READ_CHUNK_BYTES)) > 0) {
        total += n;
        size_t len = keep + (size_t)n;
        found = memmem(buf, len, FLOOR_VERSION, want) != NULL;
        keep = len < want - 1 ? len : want - 1; /* a match across two reads */
        memmove(buf, buf + len - keep, keep);
    }
    free(buf);
    return found;
}

int agent_image_glibc_check(const char *rootfs, char *why, size_t why_len)
{
    int root = open(rootfs, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (root < 0) {
        snprintf(why, why_len, "image root %s: %s", rootfs, strerror(errno));
        return TS_EIO;
    }
    int rc = TS_EINVAL;
    snprintf(why, why_len, "the image has no glibc (libc.so.6): a static or musl image "
                           "cannot load the GPU sharing shim");
    for (size_t i = 0; LIBC_PATHS[i]; i++) {
        int fd = open_in_root(root, LIBC_PATHS[i]);
        if (fd < 0 && errno == ENOSYS) {
            snprintf(why, why_len, "cannot look into the image (openat2: %s)", strerror(errno));
            rc = TS_EIO;
            break;
        }
        if (fd < 0)
            continue;
        struct stat st;
        bool ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && holds_floor(fd);
        close(fd);
        if (ok) {
            rc = 0;
            why[0] = '\0';
        } else {
            snprintf(why, why_len, "the image's glibc (/%s) is older than 2.17: it cannot "
                                   "load the GPU sharing shim", LIBC_PATHS[i]);
        }
        break;
    }
    close(root);
    return rc;
}
