/*
 * ledger.c - the tenant's shared memory/GPU-time ledger (see ledger.h).
 *
 * The file holds a header, a robust process-shared mutex, a device table and
 * a slot table. Creation is atomic: the first process initialises a private
 * temporary file and link()s it into place, so nobody ever maps a
 * half-initialised ledger (a loser of the race just opens the winner's).
 *
 * Invariant, restored whenever the mutex is found owner-dead: a device's
 * used_bytes is the sum of charged[dev] over slots in use. Slot liveness is an
 * open-file-description lock on byte LOCK_BASE + slot: held by the owner's
 * descriptor from claim to death, dropped by the kernel then; F_OFD_GETLK
 * from any other descriptor sees it. Unlike a pid it cannot be recycled, and
 * unlike a robust mutex it does not die with the thread that took it.
 */
#define _GNU_SOURCE /* F_OFD_GETLK / F_OFD_SETLK, syscall */
#include "shim/ledger.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define LEDGER_MAGIC 0x54534c44u
#define LEDGER_VERSION 1u
#define LOCK_BASE_OFFSET (1 << 20) /* slot lock bytes live past the data */
#define PCT_FULL 100

struct ledger_dev {
    uint32_t in_use;
    unsigned char uuid[TS_LEDGER_UUID_BYTES];
    uint64_t used_bytes;
    int64_t tokens_ns;
    int64_t refill_ns; /* 0: bucket not started */
    uint64_t gpu_ns;
};

struct ledger_slot {
    uint32_t in_use;
    int32_t pid; /* for people reading the file; liveness is the lock */
    uint64_t charged[TS_LEDGER_MAX_DEVICES];
};

struct ledger_file {
    uint32_t magic;
    uint32_t version;
    uint64_t size;
    pthread_mutex_t lock;
    struct ledger_dev dev[TS_LEDGER_MAX_DEVICES];
    struct ledger_slot slot[TS_LEDGER_MAX_SLOTS];
};

struct ts_ledger {
    int fd;
    int slot;
    struct ledger_file *f;
};

static void repair_locked(struct ledger_file *f)
{
    for (int d = 0; d < TS_LEDGER_MAX_DEVICES; d++) {
        uint64_t sum = 0;
        for (int s = 0; s < TS_LEDGER_MAX_SLOTS; s++)
            if (f->slot[s].in_use)
                sum += f->slot[s].charged[d];
        f->dev[d].used_bytes = sum;
    }
}

/* A waiter sleeps at most LOCK_RETRY_NS at a time, then looks again: a
 * holder killed in the middle of its unlock can leave the lock free with
 * its waiters never woken (seen: a survivor asleep on a lock word of 0 after
 * a process was killed mid-storm); a look again finds it free. */
#define LOCK_RETRY_NS 50000000L

static void lock(ts_ledger *l)
{
    int rc;
    do {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += LOCK_RETRY_NS;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        rc = pthread_mutex_timedlock(&l->f->lock, &ts);
    } while (rc == ETIMEDOUT);
    if (rc == EOWNERDEAD) {
        repair_locked(l->f); /* the dead holder may have stopped half-way */
        pthread_mutex_consistent(&l->f->lock);
    }
}

static void unlock(ts_ledger *l) { pthread_mutex_unlock(&l->f->lock); }

static struct flock slot_lock_desc(int slot, short type)
{
    struct flock fl;
    memset(&fl, 0, sizeof fl);
    fl.l_type = type;
    fl.l_whence = SEEK_SET;
    fl.l_start = LOCK_BASE_OFFSET + slot;
    fl.l_len = 1;
    return fl;
}

static int slot_alive(const ts_ledger *l, int s)
{
    if (s == l->slot)
        return 1;
    struct flock fl = slot_lock_desc(s, F_WRLCK);
    if (fcntl(l->fd, F_OFD_GETLK, &fl) != 0)
        return 1; /* cannot tell: keep its charges (the safe side) */
    return fl.l_type != F_UNLCK;
}

static int reap_locked(ts_ledger *l)
{
    int n = 0;
    struct ledger_file *f = l->f;
    for (int s = 0; s < TS_LEDGER_MAX_SLOTS; s++) {
        if (!f->slot[s].in_use || slot_alive(l, s))
            continue;
        for (int d = 0; d < TS_LEDGER_MAX_DEVICES; d++) {
            uint64_t c = f->slot[s].charged[d];
            f->dev[d].used_bytes -= c < f->dev[d].used_bytes ? c : f->dev[d].used_bytes;
            f->slot[s].charged[d] = 0;
        }
        f->slot[s].in_use = 0;
        n++;
    }
    return n;
}

static void file_init(struct ledger_file *f)
{
    memset(f, 0, sizeof *f);
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
    pthread_mutex_init(&f->lock, &a);
    pthread_mutexattr_destroy(&a);
    f->version = LEDGER_VERSION;
    f->size = sizeof *f;
    f->magic = LEDGER_MAGIC;
}

/* An unnamed file for a private ledger. memfd_create through the raw
 * syscall: its glibc wrapper is GLIBC_2.27, above the shim's floor of 2.17
 * (glibc_floor.h); the flag's value is the kernel's ABI. */
#define LEDGER_MFD_CLOEXEC 1u
static int private_fd(void)
{
    return (int)syscall(SYS_memfd_create, "tessera-ledger", LEDGER_MFD_CLOEXEC);
}

/* A new, initialised ledger in an unnamed or temporary file: fd, or -1. */
static int make_file(const char *tmp)
{
    int fd = tmp ? open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600)
                 : private_fd();
    if (fd < 0)
        return -1;
    void *m = MAP_FAILED;
    if (ftruncate(fd, sizeof(struct ledger_file)) == 0)
        m = mmap(NULL, sizeof(struct ledger_file), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) {
        close(fd);
        if (tmp)
            unlink(tmp);
        return -1;
    }
    file_init(m);
    munmap(m, sizeof(struct ledger_file));
    return fd;
}

/* Opens path, creating it atomically when absent. */
static int open_shared(const char *path, ts_err *err)
{
    for (int attempt = 0; attempt < 2; attempt++) {
        int fd = open(path, O_RDWR | O_CLOEXEC);
        if (fd >= 0 || errno != ENOENT)
            return fd >= 0 ? fd
                           : ts_err_set(err, TS_EIO, "ledger %s: cannot open: %s", path,
                                        strerror(errno));
        char tmp[512];
        snprintf(tmp, sizeof tmp, "%s.%d.tmp", path, (int)getpid());
        fd = make_file(tmp);
        if (fd < 0)
            return ts_err_set(err, TS_EIO, "ledger %s: cannot create: %s", path, strerror(errno));
        int linked = link(tmp, path) == 0;
        int why = errno;
        unlink(tmp);
        if (linked)
            return fd;
        close(fd);
        if (why != EEXIST)
            return ts_err_set(err, TS_EIO, "ledger %s: cannot create: %s", path, strerror(why));
        /* someone else created it first: open theirs */
    }
    return ts_err_set(err, TS_EIO, "ledger %s: cannot open", path);
}

int shim_ledger_open(const char *path, ts_ledger **out, ts_err *err)
{
    *out = NULL;
    int fd;
    if (path && *path) {
        fd = open_shared(path, err);
        if (fd < 0)
            return fd;
    } else {
        fd = make_file(NULL);
        if (fd < 0)
            return ts_err_set(err, TS_EIO, "ledger: cannot create a private one: %s",
                              strerror(errno));
    }
    const char *name = path && *path ? path : "(private)";
    /* the size through lseek, not fstat: fstat is GLIBC_2.33 (glibc_floor.h) */
    off_t size = lseek(fd, 0, SEEK_END);
    if (size < (off_t)sizeof(struct ledger_file)) {
        close(fd);
        return ts_err_set(err, TS_EIO, "ledger %s: too small to be a ledger", name);
    }
    struct ledger_file *f = mmap(NULL, sizeof *f, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (f == MAP_FAILED) {
        close(fd);
        return ts_err_set(err, TS_EIO, "ledger %s: cannot map: %s", name, strerror(errno));
    }
    if (f->magic != LEDGER_MAGIC || f->version != LEDGER_VERSION || f->size != sizeof *f) {
        munmap(f, sizeof *f);
        close(fd);
        return ts_err_set(err, TS_EIO, "ledger %s: not a version %u tessera ledger", name,
                          LEDGER_VERSION);
    }
    ts_ledger *l = calloc(1, sizeof *l);
    if (!l) {
        munmap(f, sizeof *f);
        close(fd);
        return ts_err_set(err, TS_ENOMEM, "ledger %s: out of memory", name);
    }
    l->fd = fd;
    l->f = f;
    l->slot = -1;
    lock(l);
    reap_locked(l);
    for (int s = 0; s < TS_LEDGER_MAX_SLOTS && l->slot < 0; s++) {
        if (f->slot[s].in_use)
            continue;
        struct flock fl = slot_lock_desc(s, F_WRLCK);
        if (fcntl(fd, F_OFD_SETLK, &fl) != 0)
            continue;
        memset(&f->slot[s], 0, sizeof f->slot[s]);
        f->slot[s].pid = (int32_t)getpid();
        f->slot[s].in_use = 1;
        l->slot = s;
    }
    unlock(l);
    if (l->slot < 0) {
        shim_ledger_abandon(l);
        return ts_err_set(err, TS_ENOSPC, "ledger %s: all %d process slots are in use", name,
                          TS_LEDGER_MAX_SLOTS);
    }
    *out = l;
    return 0;
}

void shim_ledger_abandon(ts_ledger *l)
{
    if (!l)
        return;
    munmap(l->f, sizeof *l->f);
    close(l->fd);
    free(l);
}

void shim_ledger_close(ts_ledger *l)
{
    if (!l)
        return;
    lock(l);
    struct ledger_slot *me = &l->f->slot[l->slot];
    for (int d = 0; d < TS_LEDGER_MAX_DEVICES; d++) {
        uint64_t c = me->charged[d], *u = &l->f->dev[d].used_bytes;
        *u -= c < *u ? c : *u;
        me->charged[d] = 0;
    }
    me->in_use = 0;
    unlock(l);
    struct flock fl = slot_lock_desc(l->slot, F_UNLCK);
    fcntl(l->fd, F_OFD_SETLK, &fl);
    shim_ledger_abandon(l);
}

int shim_ledger_device(ts_ledger *l, const unsigned char uuid[TS_LEDGER_UUID_BYTES])
{
    int found = -1;
    lock(l);
    for (int d = 0; d < TS_LEDGER_MAX_DEVICES && found < 0; d++)
        if (l->f->dev[d].in_use && memcmp(l->f->dev[d].uuid, uuid, TS_LEDGER_UUID_BYTES) == 0)
            found = d;
    for (int d = 0; d < TS_LEDGER_MAX_DEVICES && found < 0; d++)
        if (!l->f->dev[d].in_use) {
            memset(&l->f->dev[d], 0, sizeof l->f->dev[d]);
            memcpy(l->f->dev[d].uuid, uuid, TS_LEDGER_UUID_BYTES);
            l->f->dev[d].in_use = 1;
            found = d;
        }
    unlock(l);
    return found;
}

static int fits(uint64_t used, uint64_t bytes, uint64_t quota)
{
    return bytes <= quota && used <= quota - bytes;
}

int shim_ledger_reserve(ts_ledger *l, int dev, uint64_t bytes, uint64_t quota)
{
    if (dev < 0 || dev >= TS_LEDGER_MAX_DEVICES)
        return TS_EINVAL;
    lock(l);
    struct ledger_dev *d = &l->f->dev[dev];
    if (!fits(d->used_bytes, bytes, quota) && reap_locked(l) == 0) {
        unlock(l);
        return TS_ENOSPC;
    }
    if (!fits(d->used_bytes, bytes, quota)) {
        unlock(l);
        return TS_ENOSPC;
    }
    /* slot first: a death between the two writes is repaired from the slots */
    l->f->slot[l->slot].charged[dev] += bytes;
    d->used_bytes += bytes;
    unlock(l);
    return 0;
}

void shim_ledger_release(ts_ledger *l, int dev, uint64_t bytes)
{
    if (dev < 0 || dev >= TS_LEDGER_MAX_DEVICES)
        return;
    lock(l);
    uint64_t *mine = &l->f->slot[l->slot].charged[dev], *used = &l->f->dev[dev].used_bytes;
    uint64_t b = bytes < *mine ? bytes : *mine;
    *mine -= b;
    *used -= b < *used ? b : *used;
    unlock(l);
}

uint64_t shim_ledger_used(ts_ledger *l, int dev)
{
    if (dev < 0 || dev >= TS_LEDGER_MAX_DEVICES)
        return 0;
    lock(l);
    reap_locked(l);
    uint64_t v = l->f->dev[dev].used_bytes;
    unlock(l);
    return v;
}

uint64_t shim_ledger_mine(const ts_ledger *l, int dev)
{
    if (dev < 0 || dev >= TS_LEDGER_MAX_DEVICES)
        return 0;
    return __atomic_load_n(&l->f->slot[l->slot].charged[dev], __ATOMIC_RELAXED);
}

int shim_ledger_reap(ts_ledger *l)
{
    lock(l);
    int n = reap_locked(l);
    unlock(l);
    return n;
}

static int64_t cap_ns(int pct, int64_t burst_ns) { return burst_ns * pct / PCT_FULL; }

static void refill_locked(struct ledger_dev *d, int pct, int64_t now_ns, int64_t burst_ns)
{
    int64_t cap = cap_ns(pct, burst_ns);
    if (d->refill_ns == 0) {
        d->refill_ns = now_ns;
        d->tokens_ns = cap;
        return;
    }
    if (now_ns > d->refill_ns) {
        d->tokens_ns += (now_ns - d->refill_ns) * pct / PCT_FULL;
        d->refill_ns = now_ns;
    }
    if (d->tokens_ns > cap)
        d->tokens_ns = cap;
}

int64_t shim_ledger_take(ts_ledger *l, int dev, int pct, int64_t cost_ns, int64_t now_ns,
                       int64_t burst_ns)
{
    if (dev < 0 || dev >= TS_LEDGER_MAX_DEVICES || pct <= 0)
        return 0;
    lock(l);
    struct ledger_dev *d = &l->f->dev[dev];
    refill_locked(d, pct, now_ns, burst_ns);
    int64_t wait = 0;
    if (d->tokens_ns < 0)
        wait = (-d->tokens_ns * PCT_FULL + pct - 1) / pct;
    else
        d->tokens_ns -= cost_ns;
    unlock(l);
    return wait;
}

void shim_ledger_settle(ts_ledger *l, int dev, int pct, int64_t est_ns, int64_t actual_ns,
                      int64_t burst_ns)
{
    if (dev < 0 || dev >= TS_LEDGER_MAX_DEVICES || pct <= 0)
        return;
    lock(l);
    struct ledger_dev *d = &l->f->dev[dev];
    d->tokens_ns -= actual_ns - est_ns;
    if (d->tokens_ns > cap_ns(pct, burst_ns))
        d->tokens_ns = cap_ns(pct, burst_ns);
    d->gpu_ns += actual_ns > 0 ? (uint64_t)actual_ns : 0;
    unlock(l);
}

uint64_t shim_ledger_gpu_ns(ts_ledger *l, int dev)
{
    if (dev < 0 || dev >= TS_LEDGER_MAX_DEVICES)
        return 0;
    lock(l);
    uint64_t v = l->f->dev[dev].gpu_ns;
    unlock(l);
    return v;
}

void shim_ledger_test_die_halfway(ts_ledger *l, int dev, uint64_t bytes)
{
    lock(l);
    l->f->slot[l->slot].charged[dev] += bytes;
}
