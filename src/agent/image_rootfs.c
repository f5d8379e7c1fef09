/*
 * image_rootfs.c - an image's root filesystem as one read-only EROFS image,
 * mounted once per node and shared by every task of the image.
 *
 * The layers are still unpacked first, by image_unpack.c, into a tree under
 * the store's tmp/: that is where every hostile-layer rule is enforced (no
 * write outside the root, no device node, no set-id bit, whiteouts inside).
 * mkfs.erofs then copies that checked tree, and only it, into one file, and
 * the tree is removed. The file is mounted read-only, nodev and nosuid, as
 * the lower layer of each task's overlay. What that buys, measured in
 * bench/image-mount (docs/images.md "One filesystem image per image"): lz4
 * EROFS is made at about the speed of a copy, holds the root in about half
 * its unpacked size, is evicted by unlinking one file instead of removing
 * thousands, and after a reboot is back with one mount. squashfs (gzip) was
 * measured too and is many times slower to make on two cores.
 *
 * Mounting: Linux 6.12 and later mount an EROFS file directly; older kernels
 * (Debian 12's 6.1) take a loop device, bound with autoclear so that it is
 * released with the last mount. Callers hold the store's lock.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/loop.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/image.h"
#include "agent/trash.h"
#include "image_rootfs.h"
#include "image_store.h"

#define MKFS_EROFS "mkfs.erofs"
#define MKFS_AS_MAX_BYTES (2ULL << 30)
#define MKFS_LOG "mkfs.log"
#define MKFS_ERR_MAX 200
#define LOOP_TRIES_MAX 16        /* a free loop device taken by another process meanwhile */
#define MOUNT_FLAGS (MS_RDONLY | MS_NODEV | MS_NOSUID)

static bool on_path(const char *prog)
{
    const char *path = getenv("PATH");
    if (!path || !*path)
        path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", path);
    char *save = NULL;
    for (char *d = strtok_r(buf, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        char p[4200];
        snprintf(p, sizeof p, "%s/%s", d, prog);
        if (access(p, X_OK) == 0)
            return true;
    }
    return false;
}

static bool kernel_has_erofs(void)
{
    FILE *f = fopen("/proc/filesystems", "re");
    if (!f)
        return false;
    char line[128];
    bool found = false;
    while (!found && fgets(line, sizeof line, f)) {
        char *t = strrchr(line, '\t');
        found = t && !strcmp(t + 1, "erofs\n");
    }
    fclose(f);
    return found;
}

bool image_rootfs_can_pack(const ts_image_store *st)
{
    return !st->unpacked_roots && on_path(MKFS_EROFS) && kernel_has_erofs();
}

/* The first line of mkfs.erofs's output, for the error. */
static void first_line(const char *path, char *out, size_t n)
{
    out[0] = 0;
    FILE *f = fopen(path, "re");
    if (!f)
        return;
    char line[MKFS_ERR_MAX];
    while (!out[0] && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = 0;
        for (char *c = line; *c; c++)
            if ((unsigned char)*c < 0x20 || (unsigned char)*c >= 0x7f)
                *c = '?';
        if (line[0])
            snprintf(out, n, "%s", line);
    }
    fclose(f);
}

/* Moves tree aside, into the store's tmp/ (dir's parent, emptied at every
 * opening should this process end first), for the agent's trash thread to
 * remove (trash.h); removes it here when it cannot be moved. */
static void trash_later(const char *tree, const char *dir)
{
    char tmp[1000];
    snprintf(tmp, sizeof tmp, "%s", dir);
    char *slash = strrchr(tmp, '/');
    if (slash)
        *slash = 0;
    if (!slash || agent_trash_put(tree, tmp) != 0)
        image_rm_tree(tree);
}

int image_rootfs_pack(const char *dir, bool compress, long long *bytes, ts_err *err)
{
    char tree[1000], img[1000], log[1000];
    snprintf(tree, sizeof tree, "%s/rootfs", dir);
    snprintf(img, sizeof img, "%s/" IMAGE_ROOTFS_FILE, dir);
    snprintf(log, sizeof log, "%s/" MKFS_LOG, dir);
    int lfd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (lfd < 0)
        return ts_err_set(err, TS_EIO, "image store: %s: %s", log, strerror(errno));
    pid_t pid = fork();
    if (pid == 0) {
        int nul = open("/dev/null", O_RDONLY);
        if (nul >= 0)
            dup2(nul, 0);
        dup2(lfd, 1);
        dup2(lfd, 2);
        /* a backstop on what it may map, whatever the tree holds: past it
         * mkfs.erofs fails and the root stays the tree */
        struct rlimit as = {MKFS_AS_MAX_BYTES, MKFS_AS_MAX_BYTES};
        setrlimit(RLIMIT_AS, &as);
        /* uids, gids, modes, links and xattrs kept as unpacked; lz4: as fast
         * to make as no compression on an image of programs and libraries and
         * half the size (bench/image-mount), but 14 times slower on bytes
         * that do not compress (0.55 against 0.04 CPU-seconds for 40 MB of
         * random data), which then gain nothing from it */
        if (compress)
            execlp(MKFS_EROFS, MKFS_EROFS, "-zlz4", "--quiet", img, tree, (char *)NULL);
        else
            execlp(MKFS_EROFS, MKFS_EROFS, "--quiet", img, tree, (char *)NULL);
        _exit(127);
    }
    close(lfd);
    if (pid < 0)
        return ts_err_set(err, TS_EIO, "image store: fork for %s: %s", MKFS_EROFS,
                          strerror(errno));
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        char why[MKFS_ERR_MAX];
        first_line(log, why, sizeof why);
        unlink(img);
        unlink(log);
        return ts_err_set(err, TS_EIO, "image store: %s failed (%s%d): %s", MKFS_EROFS,
                          WIFEXITED(status) ? "exit " : "signal ",
                          WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status),
                          why[0] ? why : "no output");
    }
    unlink(log);
    struct stat sb;
    if (stat(img, &sb) != 0)
        return ts_err_set(err, TS_EIO, "image store: %s: %s", img, strerror(errno));
    *bytes = (long long)sb.st_blocks * 512;
    /* the tree goes, behind the task's start: removing 100,000 files takes
     * as long as unpacking them (bench/image-mount). Its directory stays,
     * empty, as the mount point. */
    trash_later(tree, dir);
    if (mkdir(tree, 0755) != 0 && errno != EEXIST)
        return ts_err_set(err, TS_EIO, "image store: %s: %s", tree, strerror(errno));
    return 0;
}

bool image_rootfs_mounted(const char *dir)
{
    char mnt[1000];
    snprintf(mnt, sizeof mnt, "%s/rootfs", dir);
    struct stat d, m;
    return stat(dir, &d) == 0 && lstat(mnt, &m) == 0 && S_ISDIR(m.st_mode) &&
           d.st_dev != m.st_dev;
}

/* Binds img to a free loop device (read-only unless rw), released with its
 * last user. */
static int loop_attach(const char *img, bool rw, char *dev, size_t devn, ts_err *err)
{
    int ifd = open(img, (rw ? O_RDWR : O_RDONLY) | O_CLOEXEC | O_NOFOLLOW);
    if (ifd < 0)
        return ts_err_set(err, TS_EIO, "%s: %s", img, strerror(errno));
    int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
    if (ctl < 0) {
        int e = errno;
        close(ifd);
        return ts_err_set(err, TS_EIO, "/dev/loop-control: %s", strerror(e));
    }
    int lfd = -1, e = 0;
    for (int tries = 0; lfd < 0 && tries < LOOP_TRIES_MAX; tries++) {
        int n = ioctl(ctl, LOOP_CTL_GET_FREE);
        if (n < 0) {
            e = errno;
            break;
        }
        snprintf(dev, devn, "/dev/loop%d", n);
        lfd = open(dev, O_RDWR | O_CLOEXEC);
        if (lfd < 0) {
            e = errno;
            break;
        }
        struct loop_config cfg;
        memset(&cfg, 0, sizeof cfg);
        cfg.fd = (unsigned)ifd;
        cfg.info.lo_flags = (rw ? 0 : LO_FLAGS_READ_ONLY) | LO_FLAGS_AUTOCLEAR;
        size_t len = strlen(img), keep = sizeof cfg.info.lo_file_name - 1;
        const char *tail = len > keep ? img + len - keep : img; /* its end says which image */
        memcpy(cfg.info.lo_file_name, tail, strlen(tail));
        if (ioctl(lfd, LOOP_CONFIGURE, &cfg) != 0) {
            e = errno;
            close(lfd);
            lfd = -1;
            if (e != EBUSY)
                break;
        }
    }
    close(ctl);
    close(ifd);
    if (lfd < 0)
        return ts_err_set(err, TS_EIO, "no loop device for %s: %s", img,
                          strerror(e ? e : EBUSY));
    return lfd;
}

int agent_loop_mount(const char *img, const char *mnt, const char *fstype, unsigned long flags,
                     const char *data, ts_err *err)
{
    char dev[64];
    int lfd = loop_attach(img, !(flags & MS_RDONLY), dev, sizeof dev, err);
    if (lfd < 0)
        return lfd;
    int rc = 0;
    if (mount(dev, mnt, fstype, flags, data) != 0) {
        rc = ts_err_set(err, TS_EIO, "mount %s (%s, %s) on %s: %s", img, dev, fstype, mnt,
                        strerror(errno));
        ioctl(lfd, LOOP_CLR_FD, 0);
    }
    close(lfd); /* autoclear: the device stays bound while mounted */
    return rc;
}

static int mount_via_loop(const char *img, const char *mnt, ts_err *err)
{
    int rc = agent_loop_mount(img, mnt, "erofs", MOUNT_FLAGS, NULL, err);
    if (rc)
        ts_err_prefix(err, "image store: ");
    return rc;
}

static int mount_image(const char *dir, bool loop_only, ts_err *err)
{
    char img[1000], mnt[1000];
    snprintf(img, sizeof img, "%s/" IMAGE_ROOTFS_FILE, dir);
    snprintf(mnt, sizeof mnt, "%s/rootfs", dir);
    struct stat sb;
    if (lstat(img, &sb) != 0 || !S_ISREG(sb.st_mode))
        return 0; /* an unpacked tree */
    if (image_rootfs_mounted(dir))
        return 0;
    if (!loop_only && mount(img, mnt, "erofs", MOUNT_FLAGS, NULL) == 0)
        return 0;
    return mount_via_loop(img, mnt, err);
}

int image_rootfs_mount(const char *dir, ts_err *err)
{
    return mount_image(dir, false, err);
}

int image_rootfs_mount_loop(const char *dir, ts_err *err)
{
    return mount_image(dir, true, err);
}

void image_rootfs_unmount(const char *dir)
{
    char mnt[1000];
    snprintf(mnt, sizeof mnt, "%s/rootfs", dir);
    if (!image_rootfs_mounted(dir))
        return;
    if (umount2(mnt, UMOUNT_NOFOLLOW) != 0)
        umount2(mnt, MNT_DETACH | UMOUNT_NOFOLLOW);
}

static bool sweep_one(const char *dir, const char *hex, void *u)
{
    (void)hex;
    if (image_rootfs_mounted(dir) && !image_in_use(dir)) {
        image_rootfs_unmount(dir);
        ++*(int *)u;
    }
    return true;
}

int image_rootfs_sweep(const ts_image_store *st)
{
    int n = 0;
    image_store_each(st, sweep_one, &n);
    return n;
}

void agent_image_store_close(ts_image_store *st)
{
    int lk = image_store_lock(st, NULL);
    if (lk < 0)
        return;
    image_rootfs_sweep(st);
    image_store_unlock(lk);
}
