/*
 * taskfile.c - opening, creating and removing files in places a task
 * controls without trusting what the task put there (taskfile.h). The
 * open adds O_NOFOLLOW (a link is refused, not followed) and O_NONBLOCK (a
 * FIFO with no writer does not hold the agent), then checks with fstat
 * what was opened: a regular file with one link, owned by the task. A
 * removal checks with lstat that the name still holds the agent's own file
 * (a race with the task can at worst remove the task's own file).
 */
#define _GNU_SOURCE /* fchown, O_PATH, syscall */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <linux/openat2.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agent/taskfile.h"

/* The one answer for a path a task named (owner given) that is not a
 * regular file of its user, whatever it is instead: the root agent must not
 * tell the task what exists where the task may not look (another tenant's
 * secrets folder, the controller's state). The code still says which. */
#define NOT_THE_TASKS "not a regular file of the task's user (or none there); refused"

/* fd (or -1 with errno) as opened for path: a regular file with one link,
 * owned by owner; else closed and an error naming path. */
static int taskfile_checked(int fd, const char *path, uid_t owner, ts_err *err)
{
    bool named = owner != AGENT_TASKFILE_ANY_OWNER;
    if (fd < 0 && named) {
        int e = errno;
        return ts_err_set(err, e == ENOENT ? TS_ENOENT : TS_EINVAL, "%s: " NOT_THE_TASKS, path);
    }
    if (fd < 0) {
        int e = errno;
        if (e == ENOENT)
            return ts_err_set(err, TS_ENOENT, "%s: %s", path, strerror(e));
        if (e == ELOOP)
            return ts_err_set(err, TS_EINVAL, "%s: a symbolic link, not followed", path);
        if (e == ENXIO) /* a FIFO without a reader, a socket, a device without driver */
            return ts_err_set(err, TS_EINVAL, "%s: not a regular file", path);
        if (e == EXDEV) /* openat2: out of its root */
            return ts_err_set(err, TS_EINVAL, "%s: out of the task's root", path);
        return ts_err_set(err, TS_EIO, "%s: %s", path, strerror(e));
    }
    struct stat st;
    const char *why = NULL;
    if (fstat(fd, &st) != 0)
        why = strerror(errno);
    else if (!S_ISREG(st.st_mode))
        why = "not a regular file";
    else if (st.st_nlink != 1)
        why = "hard-linked elsewhere";
    else if (owner != AGENT_TASKFILE_ANY_OWNER && st.st_uid != owner)
        why = "not owned by the task's user";
    if (why) {
        close(fd);
        if (named)
            return ts_err_set(err, TS_EINVAL, "%s: " NOT_THE_TASKS, path);
        return ts_err_set(err, TS_EINVAL, "%s: %s; refused", path, why);
    }
    /* a regular file: non-blocking changes nothing, but reads are plain */
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        (void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    return fd;
}

int agent_taskfile_open(const char *path, int flags, uid_t owner, ts_err *err)
{
    return agent_taskfile_open_mode(path, flags & ~O_CREAT, 0, owner, err);
}

int agent_taskfile_open_mode(const char *path, int flags, mode_t mode, uid_t owner,
                             ts_err *err)
{
    return taskfile_checked(open(path, flags | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC,
                                 mode),
                            path, owner, err);
}

int agent_taskfile_open_in(const char *root, const char *path, int flags, uid_t owner,
                           ts_err *err)
{
    if (!root)
        return agent_taskfile_open(path, flags, owner, err);
    int dir = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0)
        return taskfile_checked(-1, root, owner, err);
    struct open_how how = {
        .flags = (uint64_t)(flags | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC),
        .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS};
    int fd = (int)syscall(SYS_openat2, dir, path, &how, sizeof how);
    int e = errno;
    close(dir);
    errno = e;
    return taskfile_checked(fd, path, owner, err);
}

int agent_taskfile_create(const char *path, uid_t uid, gid_t gid, dev_t *dev, ino_t *ino,
                          ts_err *err)
{
    *dev = 0;
    *ino = 0;
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC,
                  0644);
    if (fd < 0)
        return ts_err_set(err, errno == EEXIST ? TS_EEXIST : TS_EIO, "%s: %s", path,
                          strerror(errno));
    struct stat st;
    if ((uid != (uid_t)-1 && fchown(fd, uid, gid) != 0) || fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        unlink(path); /* just created by us, in the agent's directory */
        return ts_err_set(err, TS_EIO, "%s: %s", path, strerror(e));
    }
    close(fd);
    *dev = st.st_dev;
    *ino = st.st_ino;
    return 0;
}

bool agent_taskfile_remove(const char *path, dev_t dev, ino_t ino, uid_t owner)
{
    struct stat st;
    if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode))
        return false;
    if (ino != 0 ? st.st_dev != dev || st.st_ino != ino
                 : owner == AGENT_TASKFILE_ANY_OWNER || st.st_uid != owner)
        return false;
    return unlink(path) == 0;
}
