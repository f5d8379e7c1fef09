/*
 * trash.c - the agent's trash: trees renamed aside at once by the main loop
 * and removed behind by one thread (trash.h says why).
 *
 * The queue holds (trash folder, name) pairs, oldest first; the thread
 * removes one tree at a time, under nice, without following a link and
 * without descending into another mount (another filesystem, or a bind of
 * a folder of the same one, which rm --one-file-system would not see). What a task left is
 * hostile: a chain of folders thousands deep must not make the thread hold
 * thousands of descriptors (the agent's own opens would fail), so past
 * TRASH_DEPTH_OPEN_MAX a folder is renamed up into the trash folder and
 * queued as a tree of its own. A tree still not empty after its pass (a
 * process of the task still writing through a folder it holds open) is
 * queued again, up to TRASH_PASSES_MAX passes; what is left then stays in
 * the trash until the next agent's sweep. The agent's one remover in place
 * (agent_rm_tree_at: images, whiteouts, a task folder that cannot be
 * trashed) lives here too.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "agent/trash.h"

#define TRASH_DEPTH_OPEN_MAX 32  /* folders held open at once while removing */
#define TRASH_PASSES_MAX 3       /* passes over a tree that does not empty */
#define TRASH_NICE 10            /* the thread's priority: behind the tasks' */
#define TRASH_NAME_MAX 256
#define TRASH_PATH_MAX 1024
#define TRASH_IDLE_POLL_NS (10 * 1000 * 1000)

typedef struct trash_item {
    struct trash_item *next;
    int passes;
    char trash[TRASH_PATH_MAX];
    char name[TRASH_NAME_MAX];
} trash_item;

static pthread_mutex_t trash_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t trash_cv = PTHREAD_COND_INITIALIZER;
static trash_item *trash_head, *trash_tail;
static bool trash_started, trash_busy;
static atomic_uint trash_seq;

/* One tree's removal: the trash folder's fd (where deep folders go up to)
 * and the filesystem it is on. */
typedef struct {
    const char *trash;
    int tfd;
    dev_t dev;
    unsigned long long mnt_id; /* a bind of a folder of the same filesystem has its own */
    bool has_mnt_id;
    bool root;
} trash_ctx;

/* Whether dfd/name (a folder) is on another mount than the trash: one
 * left there is never descended into, whatever filesystem it shows. */
static bool trash_other_mount(const trash_ctx *c, int dfd, const char *name, dev_t dev)
{
    if (dev != c->dev)
        return true;
    struct statx sx;
    return c->has_mnt_id &&
           statx(dfd, name, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT, STATX_MNT_ID, &sx) == 0 &&
           (sx.stx_mask & STATX_MNT_ID) && sx.stx_mnt_id != c->mnt_id;
}

static void trash_push(const char *trash, const char *name, int passes)
{
    trash_item *it = calloc(1, sizeof *it);
    if (!it) /* left in the trash for the next sweep */
        return;
    snprintf(it->trash, sizeof it->trash, "%s", trash);
    snprintf(it->name, sizeof it->name, "%s", name);
    it->passes = passes;
    pthread_mutex_lock(&trash_mu);
    if (trash_tail)
        trash_tail->next = it;
    else
        trash_head = it;
    trash_tail = it;
    pthread_cond_signal(&trash_cv);
    pthread_mutex_unlock(&trash_mu);
}

static void trash_rm_at(const trash_ctx *c, int dfd, const char *name, int depth)
{
    struct stat sb;
    if (fstatat(dfd, name, &sb, AT_SYMLINK_NOFOLLOW) != 0)
        return;
    if (!S_ISDIR(sb.st_mode)) {
        unlinkat(dfd, name, 0);
        return;
    }
    if (trash_other_mount(c, dfd, name, sb.st_dev))
        return;
    if (depth >= TRASH_DEPTH_OPEN_MAX) {
        char up[TRASH_NAME_MAX];
        snprintf(up, sizeof up, "deep-%ld-%u", (long)getpid(), atomic_fetch_add(&trash_seq, 1));
        if (renameat(dfd, name, c->tfd, up) == 0)
            trash_push(c->trash, up, 0);
        return;
    }
    int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat fs;
    if (fd >= 0 && (fstat(fd, &fs) != 0 || fs.st_dev != c->dev || fs.st_ino != sb.st_ino)) {
        close(fd); /* swapped since the look: not what was seen */
        return;
    }
    if (fd >= 0 && !c->root)
        fchmod(fd, S_IRWXU); /* a 0500 folder of the agent's own user */
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return;
    }
    for (struct dirent *e; (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            trash_rm_at(c, fd, e->d_name, depth + 1);
    closedir(d);
    unlinkat(dfd, name, AT_REMOVEDIR);
}

/* ---- in place ------------------------------------------------------------------ */

static int agent_rm_at(int dfd, const char *name, int depth, int depth_max);

/* Each entry of the open folder fd (closed here), depth deep. */
static int agent_rm_below(int fd, int depth, int depth_max)
{
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return -1;
    }
    int rc = 0, first = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
            agent_rm_at(fd, e->d_name, depth, depth_max) != 0 && rc == 0) {
            rc = -1;
            first = errno;
        }
    closedir(d);
    errno = first;
    return rc;
}

static int agent_rm_at(int dfd, const char *name, int depth, int depth_max)
{
    struct stat sb;
    if (fstatat(dfd, name, &sb, AT_SYMLINK_NOFOLLOW) != 0)
        return errno == ENOENT ? 0 : -1;
    if (!S_ISDIR(sb.st_mode))
        return unlinkat(dfd, name, 0) == 0 || errno == ENOENT ? 0 : -1;
    if (depth >= depth_max) {
        errno = ELOOP;
        return -1;
    }
    int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return -1;
    if (geteuid() != 0)
        fchmod(fd, S_IRWXU); /* root passes a 0500 folder; the agent as a user not */
    if (agent_rm_below(fd, depth + 1, depth_max) != 0)
        return -1;
    return unlinkat(dfd, name, AT_REMOVEDIR) == 0 || errno == ENOENT ? 0 : -1;
}

int agent_rm_tree_at(int dfd, const char *name, int depth_max)
{
    return agent_rm_at(dfd, name, 0, depth_max);
}

int agent_rm_entries(int dfd, int depth_max)
{
    int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    return fd < 0 ? -1 : agent_rm_below(fd, 0, depth_max);
}

static void trash_remove(trash_item *it)
{
    trash_ctx c = {.trash = it->trash, .root = geteuid() == 0};
    c.tfd = open(it->trash, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat sb;
    if (c.tfd < 0)
        return;
    struct statx sx;
    if (statx(c.tfd, "", AT_EMPTY_PATH, STATX_MNT_ID, &sx) == 0 && (sx.stx_mask & STATX_MNT_ID)) {
        c.mnt_id = sx.stx_mnt_id;
        c.has_mnt_id = true;
    }
    if (fstat(c.tfd, &sb) == 0) {
        c.dev = sb.st_dev;
        trash_rm_at(&c, c.tfd, it->name, 0);
        if (fstatat(c.tfd, it->name, &sb, AT_SYMLINK_NOFOLLOW) == 0 &&
            it->passes + 1 < TRASH_PASSES_MAX && sb.st_dev == c.dev)
            trash_push(it->trash, it->name, it->passes + 1);
    }
    close(c.tfd);
}

static void *trash_main(void *arg)
{
    (void)arg;
    /* this thread only: removing behind must not take CPU from the tasks */
    setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), TRASH_NICE);
    pthread_mutex_lock(&trash_mu);
    for (;;) {
        while (!trash_head) {
            trash_busy = false;
            pthread_cond_broadcast(&trash_cv);
            pthread_cond_wait(&trash_cv, &trash_mu);
        }
        trash_item *it = trash_head;
        trash_head = it->next;
        if (!trash_head)
            trash_tail = NULL;
        trash_busy = true;
        pthread_mutex_unlock(&trash_mu);
        trash_remove(it);
        free(it);
        pthread_mutex_lock(&trash_mu);
    }
    return NULL;
}

/* Starts the thread once; false when none can be had. */
static bool trash_start(void)
{
    pthread_mutex_lock(&trash_mu);
    if (!trash_started) {
        pthread_t th;
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        trash_started = pthread_create(&th, &at, trash_main, NULL) == 0;
        pthread_attr_destroy(&at);
    }
    bool ok = trash_started;
    pthread_mutex_unlock(&trash_mu);
    return ok;
}

int agent_trash_put(const char *path, const char *trash)
{
    struct stat sb;
    if (lstat(path, &sb) != 0)
        return errno == ENOENT ? 0 : -1;
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    char name[TRASH_NAME_MAX], to[TRASH_PATH_MAX + TRASH_NAME_MAX];
    snprintf(name, sizeof name, "%.200s-%ld-%u", base, (long)getpid(),
             atomic_fetch_add(&trash_seq, 1));
    snprintf(to, sizeof to, "%s/%s", trash, name);
    if (strlen(trash) >= TRASH_PATH_MAX || !trash_start()) {
        errno = ENAMETOOLONG;
        return -1;
    }
    if (mkdir(trash, 0700) != 0 && errno != EEXIST)
        return -1;
    /* a folder moved to another parent needs write access to itself (its
     * ".." changes): a 0500 folder of a non-root agent's own user */
    if (S_ISDIR(sb.st_mode) && geteuid() != 0)
        chmod(path, S_IRWXU);
    if (rename(path, to) != 0)
        return errno == ENOENT ? 0 : -1;
    trash_push(trash, name, 0);
    return 0;
}

void agent_trash_sweep(const char *trash)
{
    DIR *d = opendir(trash);
    if (!d)
        return;
    if (!trash_start()) {
        closedir(d);
        return;
    }
    for (struct dirent *e; (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            trash_push(trash, e->d_name, 0);
    closedir(d);
}

bool agent_trash_idle(int timeout_ms)
{
    for (int waited = 0;; waited += TRASH_IDLE_POLL_NS / 1000000) {
        pthread_mutex_lock(&trash_mu);
        bool idle = !trash_head && !trash_busy;
        pthread_mutex_unlock(&trash_mu);
        if (idle || waited >= timeout_ms)
            return idle;
        struct timespec ts = {0, TRASH_IDLE_POLL_NS};
        nanosleep(&ts, NULL);
    }
}
