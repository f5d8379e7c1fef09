/*
 * container_extras.c - what a container task gets from its node besides its
 * image, its job's mounts and data: its job's checkpoint folder, and for a
 * Slurm batch job the step client `srun` with everything it runs on
 * (docs/images.md "Checkpoints" and "srun in an image").
 *
 * The checkpoint folder is the one the controller names
 * (<checkpoint_dir>/<tenant>/<job>, sent as the task's `checkpoint_dir`),
 * never a path from the job's own env: a task picks no host path to be
 * bound. The agent is root and the folder sits on storage tasks write to, so
 * it binds it only where no other user can swap a link in: the root and the
 * tenant's folder are root's and written by nobody else (made 0711 when
 * missing; an older agent's sticky 01777 closed to 0711), and the job's
 * folder is a real folder of the task's user, made here for bare and
 * container tasks alike. No user can make a future job's folder first: in a
 * folder that was open to others, what another user made where the job's
 * folder goes is moved aside, kept, before the job's is made.
 *
 * `srun` in a bare task is a script that runs the tessera CLI next to the
 * agent (slurm_step.c); an image has neither that CLI nor the node's
 * libraries. So the agent keeps a kit, <state_dir>/slurm/kit: a copy of the
 * CLI, of every library it loads (as `ldd` lists them) and of the node's
 * dynamic loader, and an srun that runs the CLI through that loader on those
 * libraries alone. The kit is bound read-only where the node's srun folder
 * is, so the PATH a Slurm job gets names it unchanged; it needs only the
 * image's /bin/sh, which a batch script needs anyway.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <sys/mount.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent_internal.h"
#include "agent/launch_cgroup.h" /* FNV64_* */

#define KIT_LIBS_MAX 128
#define COPY_CHUNK_BYTES 65536

#define MOUNT_PATH_MAX 1024
#define MOUNT_PINS_ROOT "/run/tessera-agent" /* .../mounts-<hash>/<task>/<i>: agent_mount_pin */
/* the checkpoint root and a tenant's folder: each user passes through to a
 * job folder the agent made, no one lists or makes one but the agent */
#define CKPT_PASS_MODE 0711
#define CKPT_JOB_MODE 0700 /* a job's folder: its task's user's alone */

static const char *base_of(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

/* Moves aside what is at path, not what the agent wants there, in a parent
 * others could write (an older agent's 01777): another user made it before
 * the job ran. Kept, renamed .squatted-<name>-<16 hex>, not removed: it is
 * someone's. True when moved. */
static bool ckpt_move_aside(const char *path, char *why, size_t n)
{
    char aside[1000];
    const char *base = strrchr(path, '/') + 1;
    uint64_t r = 0;
    if (getrandom(&r, sizeof r, 0) != (ssize_t)sizeof r)
        r = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
    snprintf(aside, sizeof aside, "%.*s.squatted-%s-%016llx", (int)(base - path), path, base,
             (unsigned long long)r);
    if (rename(path, aside) != 0) {
        snprintf(why, n, "checkpoint folder %.300s: not the job's, and moving it aside: %s",
                 path, strerror(errno));
        return false;
    }
    fprintf(stderr, "tessera-agent: checkpoint folder %s was made by another before its job "
            "ran: moved aside to %s\n", path, aside);
    return true;
}

/* A folder at path owned by owner:group (made when missing, with mode: the
 * umask may have cut it), a real one, not a link. Where the parent was open
 * to others (*open, from the parent's check), what another put at path is
 * moved aside first. A folder of root's that others may write is refused
 * unless sticky, and a sticky one (an older agent's 01777) is closed to
 * mode: nothing more can be made in it but by the agent. *open says whether
 * others could write in it before. */
static bool ckpt_folder(const char *path, mode_t mode, uid_t owner, gid_t group, bool *open,
                        char *why, size_t n)
{
    struct stat st;
    for (int tries = 0;; tries++) {
        if (mkdir(path, mode) == 0 &&
            (chmod(path, mode) != 0 ||
             (owner != 0 && fchownat(AT_FDCWD, path, owner, group, AT_SYMLINK_NOFOLLOW) != 0))) {
            snprintf(why, n, "checkpoint folder %.300s: chmod/chown: %s", path, strerror(errno));
            return false;
        }
        if (lstat(path, &st) != 0) {
            snprintf(why, n, "checkpoint folder %.300s: %s", path, strerror(errno));
            return false;
        }
        bool ours = S_ISDIR(st.st_mode) && st.st_uid == owner;
        if (ours || !*open || tries == 1)
            break;
        if (!ckpt_move_aside(path, why, n))
            return false;
    }
    if (!S_ISDIR(st.st_mode)) {
        snprintf(why, n, "checkpoint folder %.300s: not a folder", path);
        return false;
    }
    if (st.st_uid != owner || ((st.st_mode & 022) && !(st.st_mode & S_ISVTX))) {
        snprintf(why, n, "checkpoint folder %.300s: must be uid %u's and written by no one "
                         "else (or sticky) for a container to get the job's folder",
                 path, (unsigned)owner);
        return false;
    }
    *open = (st.st_mode & 022) != 0;
    if (*open && owner == 0 && chmod(path, mode) != 0) {
        snprintf(why, n, "checkpoint folder %.300s: chmod: %s", path, strerror(errno));
        return false;
    }
    return true;
}

bool agent_checkpoint_folder(const char *dir, uid_t uid, gid_t gid, char *why, size_t n)
{
    char path[900];
    size_t len = strlen(dir);
    if (dir[0] != '/' || strstr(dir, "/../") || strstr(dir, "/./") || len >= sizeof path ||
        dir[len - 1] == '/' || (len >= 3 && strcmp(dir + len - 3, "/..") == 0)) {
        snprintf(why, n, "checkpoint_dir %.300s: not a clean absolute path", dir);
        return false;
    }
    snprintf(path, sizeof path, "%s", dir);
    char *job = strrchr(path, '/');
    *job = '\0';
    char *tenant = strrchr(path, '/');
    if (tenant == NULL || tenant == path) {
        snprintf(why, n, "checkpoint_dir %.300s: not <root>/<tenant>/<job>", dir);
        return false;
    }
    *tenant = '\0'; /* path: the root, then the tenant's folder, then the job's */
    bool open = false; /* the root's own parent: the node's, as configured */
    if (!ckpt_folder(path, CKPT_PASS_MODE, 0, 0, &open, why, n))
        return false;
    *tenant = '/';
    if (!ckpt_folder(path, CKPT_PASS_MODE, 0, 0, &open, why, n))
        return false;
    *job = '/';
    return ckpt_folder(path, CKPT_JOB_MODE, uid, gid, &open, why, n);
}

int agent_mount_source_open(const char *field, const char *host, char *why, size_t n)
{
    char path[MOUNT_PATH_MAX];
    if (host[0] != '/' || strlen(host) >= sizeof path) {
        snprintf(why, n, "%s: %.300s: not an absolute path", field, host);
        return -1;
    }
    snprintf(path, sizeof path, "%s", host);
    int fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    char *save = NULL;
    for (char *c = strtok_r(path, "/", &save); c && fd >= 0; c = strtok_r(NULL, "/", &save)) {
        if (!strcmp(c, "."))
            continue;
        int next = strcmp(c, "..") ? openat(fd, c, O_PATH | O_NOFOLLOW | O_CLOEXEC) : -1;
        struct stat st;
        const char *bad = NULL, *link = "";
        if (!strcmp(c, ".."))
            bad = "\"..\" in the path is refused";
        else if (next < 0)
            bad = errno == ENOENT ? "no such folder on this node" : strerror(errno);
        else if (fstat(next, &st) != 0)
            bad = strerror(errno);
        else if (S_ISLNK(st.st_mode))
            link = c, bad = " is a symbolic link: a mount's path may hold none";
        else if (!S_ISDIR(st.st_mode))
            bad = "not a folder";
        close(fd);
        fd = next;
        if (bad) {
            snprintf(why, n, "%s: %.300s: %.100s%s", field, host, link, bad);
            if (fd >= 0)
                close(fd);
            return -1;
        }
    }
    if (fd < 0)
        snprintf(why, n, "%s: %.300s: %s", field, host, strerror(errno));
    return fd;
}

/* MOUNT_PINS_ROOT/mounts-<FNV-1a of state_dir>: this agent's pins (two
 * agents of one host, two clusters' tests, each have their own), kept out
 * of its state folder: a `rm -rf` of that folder must not reach through a
 * pin into a folder of the node. */
static void pins_dir(const char *state_dir, char *out, size_t n)
{
    unsigned long long h = FNV64_OFFSET;
    for (const unsigned char *p = (const unsigned char *)state_dir; *p; p++)
        h = (h ^ *p) * FNV64_PRIME;
    snprintf(out, n, MOUNT_PINS_ROOT "/mounts-%016llx", h);
}

static void pin_path(const char *state_dir, const char *task, int i, char *out, size_t n)
{
    char dir[128];
    pins_dir(state_dir, dir, sizeof dir);
    if (i < 0)
        snprintf(out, n, "%s/%s", dir, task);
    else
        snprintf(out, n, "%s/%s/%d", dir, task, i);
}

bool agent_mount_pin(const char *state_dir, const char *task, int i, int fd, char *out,
                     size_t n, char *why, size_t wn)
{
    char p[MOUNT_PATH_MAX], src[64];
    mkdir(MOUNT_PINS_ROOT, 0700);
    pins_dir(state_dir, p, sizeof p);
    mkdir(p, 0700);
    pin_path(state_dir, task, -1, p, sizeof p);
    mkdir(p, 0700);
    pin_path(state_dir, task, i, out, n);
    umount2(out, MNT_DETACH); /* an earlier run's, left by a crash */
    snprintf(src, sizeof src, "/proc/self/fd/%d", fd);
    if ((mkdir(out, 0700) != 0 && errno != EEXIST) ||
        mount(src, out, NULL, MS_BIND | MS_REC, NULL) != 0) {
        snprintf(why, wn, "mounts[%d].host: cannot bind it at %.300s: %s", i, out,
                 strerror(errno));
        return false;
    }
    return true;
}

void agent_mount_unpin(const char *state_dir, const char *task)
{
    char p[MOUNT_PATH_MAX];
    for (int i = 0; i < AGENT_MOUNT_PINS_MAX; i++) {
        pin_path(state_dir, task, i, p, sizeof p);
        umount2(p, MNT_DETACH);
        rmdir(p); /* only ever an empty mount point: never a removal of what it held */
    }
    pin_path(state_dir, task, -1, p, sizeof p);
    rmdir(p);
    pins_dir(state_dir, p, sizeof p);
    rmdir(p); /* when it was the last task's */
}

void agent_mount_pins_sweep(const ts_agent *a)
{
    char dir[128];
    pins_dir(a->cfg.state_dir, dir, sizeof dir);
    DIR *d = opendir(dir);
    if (!d)
        return;
    for (struct dirent *e; (e = readdir(d));) {
        bool adopted = e->d_name[0] == '.';
        for (int i = 0; i < a->ntasks && !adopted; i++) {
            const local_task *lt = &a->tasks[i];
            char id[64];
            if (lt->is_step)
                snprintf(id, sizeof id, "j%lld-r%d-s%d", (long long)lt->job, lt->rank, lt->step);
            else
                snprintf(id, sizeof id, "j%lld-r%d", (long long)lt->job, lt->rank);
            adopted = !strcmp(id, e->d_name);
        }
        if (!adopted)
            agent_mount_unpin(a->cfg.state_dir, e->d_name);
    }
    closedir(d);
}

/* Copies src to dst (created with mode); false on any failure. A hard link
 * where both are on one filesystem (an agent start then writes nothing): the
 * kit is only ever bound read-only, and a package upgrade replaces a
 * library by a new file, leaving the kit's as it was. */
static bool copy_file(const char *src, const char *dst, mode_t mode)
{
    struct stat st;
    if (linkat(AT_FDCWD, src, AT_FDCWD, dst, AT_SYMLINK_FOLLOW) == 0) {
        if (lstat(dst, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 07777) == mode)
            return true;
        unlink(dst); /* another mode than the kit's: copied instead */
    }
    int in = open(src, O_RDONLY | O_CLOEXEC);
    int out = in < 0 ? -1 : open(dst, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    bool ok = in >= 0 && out >= 0;
    char *buf = ok ? malloc(COPY_CHUNK_BYTES) : NULL;
    ssize_t r = 0;
    while (buf && (r = read(in, buf, COPY_CHUNK_BYTES)) > 0)
        if (write(out, buf, (size_t)r) != r) {
            r = -1;
            break;
        }
    ok = buf && r == 0 && fchmod(out, mode) == 0;
    free(buf);
    if (in >= 0)
        close(in);
    if (out >= 0 && close(out) != 0)
        ok = false;
    return ok;
}

/* The libraries and loader `ldd` lists for cli, copied into lib/ of kit
 * under the names the program asks for. */
static int copy_libs(const char *cli, const char *kit, ts_err *err)
{
    char cmd[4400];
    snprintf(cmd, sizeof cmd, "ldd '%s' 2>/dev/null", cli);
    FILE *p = popen(cmd, "r");
    if (p == NULL)
        return ts_err_set(err, TS_EIO, "srun kit: ldd: %s", strerror(errno));
    char line[1200], name[600], path[600], dst[4800];
    int copied = 0, rc = 0;
    while (rc == 0 && fgets(line, sizeof line, p)) {
        bool as_loader = false;
        if (sscanf(line, " %599s => %599s", name, path) == 2 && path[0] == '/') {
        } else if (sscanf(line, " %599s", path) == 1 && path[0] == '/') {
            snprintf(name, sizeof name, "%s", base_of(path)); /* the loader itself */
            as_loader = true;
        } else {
            continue; /* the vDSO, or nothing */
        }
        int k = snprintf(dst, sizeof dst, "%s/lib/%s", kit, base_of(name));
        if (k < 0 || (size_t)k >= sizeof dst || ++copied > KIT_LIBS_MAX ||
            !copy_file(path, dst, as_loader ? 0755 : 0644))
            rc = ts_err_set(err, TS_EIO, "srun kit: cannot copy %.300s", path);
    }
    int st = pclose(p);
    if (rc == 0 && (st != 0 || copied == 0))
        rc = ts_err_set(err, TS_EIO, "srun kit: ldd %s failed", cli);
    return rc;
}

/* Removes the files of one folder of a kit, then the folder. */
static void remove_flat(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            unlinkat(dirfd(d), e->d_name, 0);
    if (d)
        closedir(d);
    rmdir(dir);
}

/* Removes a kit folder this agent made: its files and lib/ (no other
 * folder is ever made in one). */
static void remove_kit(const char *kit)
{
    char lib[4400];
    snprintf(lib, sizeof lib, "%s/lib", kit);
    remove_flat(lib);
    remove_flat(kit);
}

int agent_srun_kit_install(const char *slurm_dir, const char *cli, char *kit, size_t kit_len,
                              ts_err *err)
{
    char fresh[4300], old[4300], lib[4400], path[4400];
    int n = snprintf(kit, kit_len, "%s/kit", slurm_dir);
    if (n < 0 || (size_t)n >= kit_len || strchr(slurm_dir, '\'') || strchr(cli, '\''))
        return ts_err_set(err, TS_EINVAL, "srun kit: %s: unusable path", slurm_dir);
    snprintf(fresh, sizeof fresh, "%s/.kit.new", slurm_dir);
    snprintf(old, sizeof old, "%s/.kit.old", slurm_dir);
    remove_kit(fresh);
    snprintf(lib, sizeof lib, "%s/lib", fresh);
    if (mkdir(fresh, 0755) != 0 || mkdir(lib, 0755) != 0)
        return ts_err_set(err, TS_EIO, "srun kit: mkdir %s: %s", lib, strerror(errno));
    snprintf(path, sizeof path, "%s/tessera", fresh);
    int rc = copy_file(cli, path, 0755) ? 0
                                        : ts_err_set(err, TS_EIO, "srun kit: copy %s", cli);
    if (rc == 0)
        rc = copy_libs(cli, fresh, err);
    FILE *f = NULL;
    if (rc == 0) {
        snprintf(path, sizeof path, "%s/srun", fresh);
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0755);
        f = fd >= 0 ? fdopen(fd, "w") : NULL;
        if (f == NULL) {
            rc = ts_err_set(err, TS_EIO, "srun kit: %s: %s", path, strerror(errno));
            if (fd >= 0)
                close(fd);
        }
    }
    if (f != NULL) {
        /* inside the container the kit sits where the node's srun folder is */
        fprintf(f, "#!/bin/sh\n# srun inside a container image, written by tessera-agent "
                   "(docs/images.md, \"srun in an image\"): the node's tessera CLI on the\n"
                   "# node's libraries, copied here, through the node's loader\n"
                   "k='%s'\nexec \"$k/lib/%s\" --library-path \"$k/lib\" \"$k/tessera\" "
                   "steps run \"$@\"\n",
                slurm_dir, "ld-linux-x86-64.so.2");
        bool ok = fchmod(fileno(f), 0755) == 0 && fflush(f) == 0 && !ferror(f);
        if (fclose(f) != 0 || !ok)
            rc = ts_err_set(err, TS_EIO, "srun kit: %s: write failed", path);
    }
    snprintf(path, sizeof path, "%s/lib/ld-linux-x86-64.so.2", fresh);
    if (rc == 0 && access(path, X_OK) != 0)
        rc = ts_err_set(err, TS_EIO, "srun kit: no ld-linux-x86-64.so.2 among %s's libraries",
                        cli);
    if (rc != 0) {
        remove_kit(fresh);
        return rc;
    }
    /* a container started from the kit before keeps the old one until the
     * next start of an agent */
    remove_kit(old);
    if ((rename(kit, old) != 0 && errno != ENOENT) || rename(fresh, kit) != 0) {
        rc = ts_err_set(err, TS_EIO, "srun kit: rename to %s: %s", kit, strerror(errno));
        remove_kit(fresh);
    }
    return rc;
}
