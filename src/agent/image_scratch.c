/*
 * image_scratch.c - a container's writable layer on a filesystem of its own
 * (image.h, agent_bundle_scratch).
 *
 * The overlay's upper directory holds whatever the task writes anywhere in
 * its root. On the agent's state disk, next to every task's records and the
 * image store, one task writing without end would fill that disk for all of
 * them. So the layer is a sparse file of the limit's size in the bundle,
 * an ext4 filesystem (no journal, no reserved blocks, inode tables left for
 * the kernel to use as they are: ~4 MB of it written whatever the size),
 * mounted through a loop device that clears itself when the filesystem is
 * unmounted. mkfs runs once per size, into a template next to the bundles
 * (.scratch-<MiB>.img); each bundle's file is a copy of the template's
 * written parts, a few milliseconds where mkfs takes ~0.1 s. The task's writes past the limit get ENOSPC in
 * its own filesystem; the file takes on the disk only what was written.
 * Removing the bundle unmounts it (image_bundle.c).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/image.h"
#include "agent/launch.h"
#include "agent/clock.h"

#define SCRATCH_IMG "scratch.img"
#define SCRATCH_MKFS_WAIT_S 30.0 /* a mkfs still running then is killed: no limit */
#define SCRATCH_PATH "/usr/sbin:/usr/bin:/sbin:/bin" /* where mkfs.ext4 is looked for */
#define SCRATCH_MIN_MIB 16       /* the smallest default (a small state disk's quarter) */

/* mkfs.ext4 on the file at img; 0, or -1 with why. */
static int scratch_mkfs(const char *img, char *why, size_t wn)
{
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(why, wn, "fork: %s", strerror(errno));
        return -1;
    }
    if (pid == 0) {
        int nul = open("/dev/null", O_RDWR);
        if (nul >= 0) {
            dup2(nul, 0);
            dup2(nul, 1);
            dup2(nul, 2);
        }
        char *const env[] = {"PATH=" SCRATCH_PATH, NULL};
        execvpe("mkfs.ext4",
                (char *const[]){"mkfs.ext4", "-q", "-F", "-m", "0", "-O", "^has_journal", "-E",
                                "lazy_itable_init=1,nodiscard", "--", (char *)img, NULL},
                env);
        _exit(127);
    }
    double until = agent_mono_s() + SCRATCH_MKFS_WAIT_S;
    int st = 0;
    pid_t r;
    while ((r = waitpid(pid, &st, WNOHANG)) == 0 && agent_mono_s() < until)
        nanosleep(&(struct timespec){0, 5000000L}, NULL);
    if (r == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
        snprintf(why, wn, "mkfs.ext4 did not end within %.0f s", SCRATCH_MKFS_WAIT_S);
        return -1;
    }
    if (r < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        snprintf(why, wn, "mkfs.ext4 %s", r > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 127
                                              ? "not found (e2fsprogs)"
                                              : "failed");
        return -1;
    }
    return 0;
}

/* Copies the written parts of src (its data extents) into dst, a file of
 * the same size that reads as zeros elsewhere; 0, or -1 with errno. */
static int copy_extents(int src, int dst)
{
    off_t end = lseek(src, 0, SEEK_END);
    for (off_t at = 0; at < end;) {
        off_t data = lseek(src, at, SEEK_DATA);
        if (data < 0)
            return errno == ENXIO ? 0 : -1; /* no data past at */
        off_t hole = lseek(src, data, SEEK_HOLE);
        if (hole < 0)
            return -1;
        for (off_t o = data; o < hole;) {
            loff_t in = o, out = o;
            ssize_t k = copy_file_range(src, &in, dst, &out, (size_t)(hole - o), 0);
            if (k <= 0)
                return -1;
            o += k;
        }
        at = hole;
    }
    return 0;
}

/* The template of a limit_mib layer next to the bundles (made once, by
 * mkfs into a temporary name renamed into place); path gets its name. 0,
 * or -1 with why. */
static int scratch_template(const char *dir, long long limit_mib, char *path, size_t n,
                            char *why, size_t wn)
{
    const char *slash = strrchr(dir, '/');
    int plen = slash ? (int)(slash - dir) : 1;
    snprintf(path, n, "%.*s/.scratch-%lld.img", plen, slash ? dir : ".", limit_mib);
    struct stat sb;
    if (lstat(path, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size == (off_t)limit_mib << 20)
        return 0;
    char tmp[940];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    unlink(tmp);
    int fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    int ok = fd >= 0 && ftruncate(fd, (off_t)limit_mib << 20) == 0;
    if (!ok)
        snprintf(why, wn, "%s: %s", tmp, strerror(errno));
    if (fd >= 0)
        close(fd);
    if (ok && scratch_mkfs(tmp, why, wn) == 0 && rename(tmp, path) == 0)
        return 0;
    unlink(tmp);
    return -1;
}

long long agent_container_write_default(const char *state_dir, long long most_mib)
{
    struct statvfs v;
    if (statvfs(state_dir, &v) != 0)
        return most_mib;
    long long quarter = (long long)((unsigned long long)v.f_blocks * v.f_frsize / 4 >> 20);
    if (quarter >= most_mib)
        return most_mib;
    return quarter > SCRATCH_MIN_MIB ? quarter : SCRATCH_MIN_MIB;
}

int agent_bundle_scratch(const char *dir, long long limit_mib, char *why, size_t wn)
{
    char img[800], mnt[800];
    snprintf(img, sizeof img, "%s/" SCRATCH_IMG, dir);
    snprintf(mnt, sizeof mnt, "%s/" BUNDLE_SCRATCH_DIR, dir);
    if (mkdir(mnt, 0700) != 0 && errno != EEXIST) {
        snprintf(why, wn, "%s: %s", mnt, strerror(errno));
        return -1;
    }
    char tpl[900];
    if (scratch_template(dir, limit_mib, tpl, sizeof tpl, why, wn) != 0)
        return -1;
    int src = open(tpl, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    int img_fd = open(img, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    bool copied = src >= 0 && img_fd >= 0 &&
                  ftruncate(img_fd, (off_t)limit_mib << 20) == 0 && copy_extents(src, img_fd) == 0;
    if (!copied)
        snprintf(why, wn, "%s: %s", img, strerror(errno));
    if (src >= 0)
        close(src);
    bool made = img_fd >= 0; /* ours to remove on a failure */
    if (made)
        close(img_fd);
    ts_err e = {0};
    /* noinit_itable: the inode tables stay as mkfs left them (unused,
     * marked so), not zeroed behind, which would write the whole file */
    if (copied && agent_loop_mount(img, mnt, "ext4", MS_NODEV | MS_NOSUID, "noinit_itable",
                                   &e) == 0)
        return 0;
    if (copied)
        snprintf(why, wn, "%s", e.msg);
    if (made)
        unlink(img);
    return -1;
}
