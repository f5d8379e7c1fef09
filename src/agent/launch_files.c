/*
 * launch_files.c - a task's log files and its own folder (launch_files.h
 * says what each is for).
 *
 * The agent is root and these paths are in folders a task may have had a
 * hand in (its own folder is the task's to fill; the log folder was bound
 * into containers by older agents and is where every task's record lives).
 * So the last component is never followed (O_NOFOLLOW, AT_SYMLINK_NOFOLLOW),
 * opening never blocks (O_NONBLOCK: a FIFO without a reader fails instead
 * of waiting), and what is opened is checked with fstat before it is used or
 * given away: a log must be a regular file with one link, or a planted link
 * (to /etc/sudoers.d/x, to another tenant's log) would become a root-made
 * file its user owns. The task's folder is made with mkdirat under a
 * descriptor of its parent, then opened without following and chowned
 * through that descriptor, so no name is looked up twice; the files the
 * agent makes in it for the task (its step file, its shim's mark) are made
 * before that chown, while only root may write there.
 *
 * The folder is the task's to fill, and it is on the agent's state disk
 * (with every task's records): where the agent is root, it is a tmpfs of
 * its own (TASK_DIR_TMPFS), so a task that fills it gets ENOSPC there and
 * nothing else does; its pages are charged to the memory cgroup of the task
 * that writes them. Removing it is an unmount.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "launch_files.h"
#include "agent/taskfile.h"
#include "agent/trash.h"

/* the task's user's alone (it may reopen its own stdout by path): a group
 * its user shares with other tenants' users reads nothing */
#define LOG_FILE_MODE 0600
#define TASK_DIR_MODE 0700   /* the task's alone */
#define TASK_FILE_MODE 0600  /* a file made in it for the task: the folder says who reads */
#define TASK_DIRS_MODE 0711  /* anyone may pass through to their own, no one may list */
#define REMOVE_DEPTH_MAX 256 /* a descriptor a level; what a task nests deeper is left */
#define TASK_DIRS_TRASH ".trash" /* <task_dirs>/.trash: removed folders, emptied behind */
/* the task folder's own filesystem: its ack, step file, shim mark, note and
 * whatever small files the task keeps there (docs/agent-tasks.md) */
#define TASK_DIR_TMPFS "size=64m,nr_inodes=16384,mode=0700"

int agent_log_open(const char *dir, const char *id, const char *ext, char *path, size_t len,
                   const struct ts_run_as *ra, ts_err *err)
{
    if (snprintf(path, len, "%s/%s.%s", dir, id, ext) >= (int)len)
        return ts_err_set(err, TS_EINVAL, "task %s: log_dir: path too long", id);
    /* the rule every file a task may have had a hand in is opened by */
    ts_err e;
    int fd = agent_taskfile_open_mode(path, O_WRONLY | O_CREAT | O_APPEND, LOG_FILE_MODE,
                                      AGENT_TASKFILE_ANY_OWNER, &e);
    if (fd < 0)
        return ts_err_set(err, fd == TS_ENOENT ? TS_ENOENT : TS_EIO, "task %s: log %s", id,
                          e.msg);
    if (ra->change && fchown(fd, ra->uid, ra->gid) != 0) {
        int en = errno;
        close(fd);
        return ts_err_set(err, TS_EIO, "task %s: log %s: %s", id, path, strerror(en));
    }
    return fd;
}

/* Removes root/id (dfd: root's descriptor). The folder is the task's, which
 * may fill it with millions of files, and this runs on the main loop: it is
 * moved into root/.trash at once and removed behind by the trash thread
 * (trash.h), in place only where it cannot be moved. 0, or -1 with errno. */
static int task_dir_discard(int dfd, const char *root, const char *id)
{
    char path[PATH_MAX], trash[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/%s", root, id) >= (int)sizeof path)
        return agent_rm_tree_at(dfd, id, REMOVE_DEPTH_MAX);
    /* its own tmpfs, with all the task put there, goes at once (EINVAL: not
     * a mount point, an older agent's folder or a non-root agent's) */
    umount2(path, MNT_DETACH | UMOUNT_NOFOLLOW);
    if (snprintf(trash, sizeof trash, "%s/" TASK_DIRS_TRASH, root) < (int)sizeof trash &&
        agent_trash_put(path, trash) == 0)
        return 0;
    return agent_rm_tree_at(dfd, id, REMOVE_DEPTH_MAX);
}

/* Mounts the task's folder's own tmpfs on root/id, just made (root is
 * root's 0711: no one else can have put a link there). Where the agent is
 * not root, or the mount is refused, the folder stays on the state disk. */
static void task_dir_mount(const char *root, const char *id)
{
    char path[PATH_MAX];
    if (geteuid() != 0 || snprintf(path, sizeof path, "%s/%s", root, id) >= (int)sizeof path)
        return;
    if (mount("tessera-task", path, "tmpfs", MS_NOSUID | MS_NODEV, TASK_DIR_TMPFS) != 0) {
        static int said; /* once per agent: the same on every start */
        if (!said++)
            fprintf(stderr, "tessera-agent: a task's folder on a tmpfs of its own: %s (the "
                    "folders stay on the state disk)\n", strerror(errno));
    }
}

/* Makes the files in the task's new folder (dfd), empty and uid:gid's when
 * the agent is root, while the folder is still root's: nothing of the
 * task's user can be in their place. 0, or -1 with errno and *name the
 * file that failed. */
static int task_files_make(int dfd, const ts_task_file *files, size_t n, uid_t uid, gid_t gid,
                           const char **name)
{
    for (size_t i = 0; i < n; i++) {
        const char *f = files[i].name;
        *name = f;
        if (f == NULL || f[0] == '\0' || strchr(f, '/') || strcmp(f, ".") == 0 ||
            strcmp(f, "..") == 0) {
            errno = EINVAL;
            return -1;
        }
        int fd = openat(dfd, f, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                        TASK_FILE_MODE);
        struct stat sb;
        if (fd < 0)
            return -1;
        if ((geteuid() == 0 && fchown(fd, uid, gid) != 0) || fstat(fd, &sb) != 0) {
            int e = errno;
            close(fd);
            errno = e;
            return -1;
        }
        close(fd);
        if (files[i].dev)
            *files[i].dev = sb.st_dev;
        if (files[i].ino)
            *files[i].ino = sb.st_ino;
    }
    return 0;
}

int agent_task_dir_make(const char *root, const char *id, uid_t uid, gid_t gid,
                        const ts_task_file *files, size_t nfiles, char *path, size_t len,
                        ts_err *err)
{
    if (snprintf(path, len, "%s/%s", root, id) >= (int)len)
        return ts_err_set(err, TS_EINVAL, "task %s: task_dirs: path too long", id);
    if (mkdir(root, TASK_DIRS_MODE) == 0)
        chmod(root, TASK_DIRS_MODE); /* the umask may have taken the x bits */
    int dfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return ts_err_set(err, errno == ENOENT ? TS_ENOENT : TS_EIO, "task %s: task_dirs %s: %s",
                          id, root, strerror(errno));
    const char *step = "removing the old";
    int fd = -1;
    if (task_dir_discard(dfd, root, id) == 0) {
        step = "mkdir";
        if (mkdirat(dfd, id, TASK_DIR_MODE) == 0) {
            task_dir_mount(root, id);
            step = "open";
            fd = openat(dfd, id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        }
    }
    int e = errno;
    close(dfd);
    if (fd < 0)
        return ts_err_set(err, TS_EIO, "task %s: its folder %s: %s: %s", id, path, step,
                          strerror(e));
    const char *fname = "";
    if (task_files_make(fd, files, nfiles, uid, gid, &fname) != 0) {
        e = errno;
        close(fd);
        agent_task_dir_remove(path, id);
        return ts_err_set(err, TS_EIO, "task %s: its folder %s: file \"%s\": %s", id, path,
                          fname ? fname : "(null)", strerror(e));
    }
    /* the mode is the umask's otherwise; the owner the task's, who writes its ack there */
    if (fchmod(fd, TASK_DIR_MODE) != 0 || (geteuid() == 0 && fchown(fd, uid, gid) != 0)) {
        e = errno;
        close(fd);
        agent_task_dir_remove(path, id);
        return ts_err_set(err, TS_EIO, "task %s: its folder %s: chown: %s", id, path,
                          strerror(e));
    }
    close(fd);
    return 0;
}

void agent_task_dir_remove(const char *path, const char *id)
{
    const char *slash = strrchr(path, '/');
    if (path[0] == '\0' || slash == NULL || slash == path || strcmp(slash + 1, id) != 0 ||
        strcmp(id, ".") == 0 || strcmp(id, "..") == 0)
        return;
    char parent[PATH_MAX];
    if (snprintf(parent, sizeof parent, "%.*s", (int)(slash - path), path) >= (int)sizeof parent)
        return;
    int dfd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return;
    task_dir_discard(dfd, parent, id);
    close(dfd);
}

void agent_task_dirs_sweep(const char *task_dirs, const char *record_dir)
{
    int dfd = open(task_dirs, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return;
    DIR *d = fdopendir(dfd);
    if (d == NULL) {
        close(dfd);
        return;
    }
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        const char *n = e->d_name;
        if (strcmp(n, ".") == 0 || strcmp(n, "..") == 0 || strcmp(n, TASK_DIRS_TRASH) == 0)
            continue;
        char rec[PATH_MAX];
        struct stat sb;
        if (snprintf(rec, sizeof rec, "%s/%s.task", record_dir, n) < (int)sizeof rec &&
            lstat(rec, &sb) != 0 && errno == ENOENT)
            task_dir_discard(dirfd(d), task_dirs, n); /* no record holds its task */
    }
    closedir(d);
    char trash[PATH_MAX];
    if (snprintf(trash, sizeof trash, "%s/" TASK_DIRS_TRASH, task_dirs) < (int)sizeof trash)
        agent_trash_sweep(trash); /* what an ended agent had not finished removing */
}
