/*
 * image_store.c - the node-local image store: blobs by digest, one prepared
 * root filesystem per image, who uses which image, and eviction.
 *
 *   <root>/blobs/sha256/<hex>         a verified blob (written under tmp/, renamed)
 *   <root>/images/<hex>/manifest.json the image's platform manifest, as pulled
 *   <root>/images/<hex>/rootfs/       its layers unpacked, in order (read-only use);
 *                                     or the mount point of:
 *   <root>/images/<hex>/rootfs.erofs  that tree packed, where the node can (image_rootfs.c)
 *   <root>/images/<hex>/bytes         the rootfs's size, for the budget
 *   <root>/images/<hex>/users/<task>  one empty file per task that runs on it
 *   <root>/images/<hex>/used          touched at each use: its mtime orders eviction
 *
 * An image directory appears whole (prepared under tmp/ and renamed), so a
 * crash leaves either nothing or an image; tmp/ is emptied at open. Its
 * packed file (or unpacked tree) is not flushed before the rename, which on
 * a gang's nodes would hold every rank's start for the disk: instead
 *   <root>/images/<hex>/boot          this boot's id (/proc/sys/kernel/random/boot_id)
 * is written (and flushed) with the directory, and removed by a thread once
 * the image's bytes are on the disk. An image whose `boot` names another
 * boot than the running one may have lost bytes in a power loss: the store's
 * open removes it (a pull makes it again); one naming this boot (an agent
 * restarted, the machine not) is flushed and sealed then.
 * Its root is a tree unpacked from the verified blobs, or the one a pull
 * unpacked as the layers came (tmp/stream-*, image_stream.c), taken only
 * when every layer in it was verified.
 * Users are files so that an agent restarted with tasks still running does
 * not evict their images. One unpacked root filesystem per image rather than
 * an overlay stack of layers: docs/images.md says why (bench/image-start).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "image_rootfs.h"
#include "image_store.h"
#include "agent/trash.h"

#define IMAGES_MAX 4096          /* images one eviction pass considers */
#define RM_DEPTH_MAX 1024
/* Unpacked bytes over the layers' gzip bytes below this: the root is packed
 * uncompressed (image_rootfs_pack; bench/image-p2p's random image) */
#define PACK_COMPRESS_MIN_RATIO 1.2
#define REFS_FILE "refs"         /* images/<hex>/refs: the references it was pulled by */
#define REFS_MAX 8               /* the latest ones kept */
#define REF_LINE_MAX 700

static int mkdir_p(const char *path)
{
    char p[1024];
    snprintf(p, sizeof p, "%s", path);
    for (char *s = p + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = 0;
        if (mkdir(p, 0755) != 0 && errno != EEXIST)
            return -1;
        *s = '/';
    }
    return mkdir(p, 0755) != 0 && errno != EEXIST ? -1 : 0;
}

static void rm_tree(const char *path)
{
    agent_rm_tree_at(AT_FDCWD, path, RM_DEPTH_MAX); /* what is left: the next gc's */
}

void image_rm_tree(const char *path)
{
    rm_tree(path);
}

static long long tree_bytes_at(int dfd, int depth)
{
    DIR *d = fdopendir(dfd);
    if (!d) {
        close(dfd);
        return 0;
    }
    long long sum = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        struct stat sb;
        if (fstatat(dirfd(d), e->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0)
            continue;
        sum += (long long)sb.st_blocks * 512;
        if (S_ISDIR(sb.st_mode) && depth < RM_DEPTH_MAX) {
            int fd = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (fd >= 0)
                sum += tree_bytes_at(fd, depth + 1);
        }
    }
    closedir(d);
    return sum;
}

static long long tree_bytes(const char *path)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    return fd < 0 ? 0 : tree_bytes_at(fd, 0);
}

void image_blob_path(const ts_image_store *st, const char *digest, char *out, size_t n)
{
    snprintf(out, n, "%s/blobs/sha256/%s", st->root, digest + 7);
}

void image_dir(const ts_image_store *st, const char *digest, char *out, size_t n)
{
    snprintf(out, n, "%s/images/%s", st->root, digest + 7);
}

static void seal_or_drop(const ts_image_store *st);

int agent_image_store_open(ts_image_store *st, const char *root, long long budget_bytes,
                        ts_err *err)
{
    memset(st, 0, sizeof *st);
    if (!root || !*root || strlen(root) >= sizeof st->root - 100)
        return ts_err_set(err, TS_EINVAL, "image store: the directory must be 1..%zu characters",
                          sizeof st->root - 101);
    snprintf(st->root, sizeof st->root, "%s", root);
    st->budget_bytes = budget_bytes > 0 ? budget_bytes : 0;
    /* an image bigger than the whole budget never stays: its unpack stops
     * there, not after it filled the disk */
    if (st->budget_bytes > 0 && st->budget_bytes < TS_IMAGE_UNPACK_MAX_BYTES_DEFAULT)
        st->limits.max_bytes = st->budget_bytes;
    char p[700];
    const char *subs[] = {"blobs/sha256", "images", "tmp"};
    for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", root, subs[i]);
        if (mkdir_p(p) != 0)
            return ts_err_set(err, TS_EIO, "image store: %s: %s", p, strerror(errno));
    }
    /* what a crashed pull left half-made */
    int lk = image_store_lock(st, err);
    if (lk < 0)
        return err ? err->code : TS_EIO;
    snprintf(p, sizeof p, "%s/tmp", root);
    rm_tree(p);
    mkdir(p, 0700);
    image_rootfs_sweep(st); /* mounts of images no task uses any more */
    seal_or_drop(st);
    image_store_unlock(lk);
    return 0;
}

int image_store_lock(const ts_image_store *st, ts_err *err)
{
    char p[700];
    snprintf(p, sizeof p, "%s/lock", st->root);
    int fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return ts_err_set(err, TS_EIO, "image store: %s: %s", p, strerror(errno));
    while (flock(fd, LOCK_EX) != 0) {
        if (errno != EINTR) {
            int e = errno;
            close(fd);
            return ts_err_set(err, TS_EIO, "image store: lock: %s", strerror(e));
        }
    }
    return fd;
}

void image_store_unlock(int fd)
{
    if (fd >= 0)
        close(fd);
}

static long long read_ll(const char *path)
{
    FILE *f = fopen(path, "re");
    long long v = 0;
    if (f) {
        if (fscanf(f, "%lld", &v) != 1)
            v = 0;
        fclose(f);
    }
    return v;
}

static void touch(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd >= 0) {
        futimens(fd, NULL);
        close(fd);
    }
}

static void fill_image(const ts_image_store *st, const char *digest, const char *dir,
                       ts_image *out)
{
    memset(out, 0, sizeof *out);
    snprintf(out->digest, sizeof out->digest, "%s", digest);
    snprintf(out->rootfs, sizeof out->rootfs, "%s/rootfs", dir);
    char p[800];
    snprintf(p, sizeof p, "%s/config", dir);
    char cfg[TS_IMAGE_DIGEST_MAX] = "";
    FILE *f = fopen(p, "re");
    if (f) {
        if (!fgets(cfg, sizeof cfg, f))
            cfg[0] = 0;
        fclose(f);
    }
    if (ts_image_digest_ok(cfg))
        image_blob_path(st, cfg, out->config_path, sizeof out->config_path);
    snprintf(p, sizeof p, "%s/bytes", dir);
    out->size_bytes = read_ll(p);
}

bool image_store_find(ts_image_store *st, const char *digest, ts_image *out)
{
    char dir[700], p[800];
    image_dir(st, digest, dir, sizeof dir);
    snprintf(p, sizeof p, "%s/rootfs", dir);
    struct stat sb;
    if (stat(p, &sb) != 0 || !S_ISDIR(sb.st_mode) || image_rootfs_mount(dir, NULL) != 0)
        return false;
    fill_image(st, digest, dir, out);
    out->cached = true;
    snprintf(p, sizeof p, "%s/used", dir);
    touch(p);
    return true;
}

static int write_text(const char *path, const char *text, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0)
        return -1;
    ssize_t w = write(fd, text, len);
    int rc = w == (ssize_t)len && fsync(fd) == 0 ? 0 : -1;
    close(fd);
    return rc;
}

/* This boot's id, "" where the kernel has none to read. */
static void boot_id(char out[64])
{
    out[0] = '\0';
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");
    if (f && fgets(out, 64, f))
        out[strcspn(out, "\n")] = '\0';
    if (f)
        fclose(f);
}

/* Flushes the image directory's bytes (its packed file; an unpacked tree:
 * its filesystem's), then removes its `boot`: the image is sealed. The
 * directory is held open, so an image evicted meanwhile (and perhaps pulled
 * again under the same name) is never sealed by this thread. */
static void *seal_main(void *arg)
{
    int dfd = (int)(intptr_t)arg;
    int fd = openat(dfd, "rootfs.erofs", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    bool flushed = fd >= 0 ? fsync(fd) == 0 : syncfs(dfd) == 0;
    if (fd >= 0)
        close(fd);
    if (flushed && unlinkat(dfd, "boot", 0) == 0)
        fsync(dfd);
    close(dfd);
    return NULL;
}

/* Seals the image directory dir in a thread of its own; a thread that cannot
 * start leaves the image unsealed, to be sealed at the next open. */
static void seal_later(const char *dir)
{
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    pthread_t t;
    pthread_attr_t at;
    if (dfd < 0)
        return;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &at, seal_main, (void *)(intptr_t)dfd) != 0)
        close(dfd);
    pthread_attr_destroy(&at);
}

/* At open: each image whose `boot` names another boot goes (its users too:
 * no task of that boot runs); one naming this boot is sealed; where either
 * boot is unknown, one a task runs on is sealed and the others go. u: this
 * boot's id. */
static bool seal_or_drop_one(const char *dir, const char *hex, void *u)
{
    const char *now = u;
    char p[900], was[64] = "";
    (void)hex;
    snprintf(p, sizeof p, "%s/boot", dir);
    FILE *f = fopen(p, "re");
    if (!f)
        return true; /* sealed, or from an agent before the seal */
    if (fgets(was, sizeof was, f))
        was[strcspn(was, "\n")] = '\0';
    fclose(f);
    bool this_boot = now[0] && strcmp(was, now) == 0;
    /* another boot's: no task of it runs now, whatever its users say */
    bool other_boot = now[0] && was[0] && !this_boot;
    /* this boot's is sealed; where either boot is unknown, only one a task
     * runs on is kept */
    if (this_boot || (!other_boot && image_in_use(dir))) {
        seal_later(dir);
    } else {
        image_rootfs_unmount(dir);
        rm_tree(dir);
    }
    return true;
}

static void seal_or_drop(const ts_image_store *st)
{
    char now[64];
    boot_id(now);
    image_store_each(st, seal_or_drop_one, now);
}

/* The layers unpacked in order into the new directory root. */
static int unpack_layers(ts_image_store *st, const char *root, const char *const *layers,
                         size_t nlayers, ts_unpack_stats *stats, long long *layer_bytes,
                         ts_err *err)
{
    char blob[700];
    if (mkdir_p(root) != 0)
        return ts_err_set(err, TS_EIO, "image store: %s: %s", root, strerror(errno));
    int root_fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (root_fd < 0)
        return ts_err_set(err, TS_EIO, "image store: %s: %s", root, strerror(errno));
    int rc = 0;
    for (size_t i = 0; i < nlayers && !rc; i++) {
        image_blob_path(st, layers[i], blob, sizeof blob);
        struct stat lb;
        *layer_bytes += stat(blob, &lb) == 0 ? (long long)lb.st_size : 0;
        rc = agent_image_unpack_layer(root_fd, blob, &st->limits, stats, err);
        if (rc)
            ts_err_prefix(err, "layer %s: ", layers[i]);
    }
    close(root_fd);
    return rc;
}

int image_store_prepare(ts_image_store *st, const char *digest, const char *manifest,
                        size_t manifest_len, const char *config_digest,
                        const char *const *layers, size_t nlayers, image_stream *s,
                        ts_image *out, ts_err *err)
{
    char tmp[700], p[800], final[700];
    snprintf(tmp, sizeof tmp, "%s/tmp/image-%s", st->root, digest + 7);
    rm_tree(tmp);
    snprintf(p, sizeof p, "%s/rootfs", tmp);
    ts_unpack_stats stats = {0};
    int rc = 0;
    long long layer_bytes = 0;
    /* the tree unpacked as the layers came, each verified, else unpacked now */
    bool staged = s && mkdir_p(tmp) == 0 &&
                  image_stream_take(s, nlayers, p, &stats, &layer_bytes);
    if (!staged)
        rc = unpack_layers(st, p, layers, nlayers, &stats, &layer_bytes, err);
    agent_image_trace("unpacked (rc %d%s)", rc, staged ? ", as the layers came" : "");
    /* written (and their fsync's journal commits made) before mkfs.erofs
     * adds its file to what a commit flushes: on a gang's nodes every
     * rank's commit waits for the others' dirty bytes */
    if (!rc) {
        snprintf(p, sizeof p, "%s/manifest.json", tmp);
        if (write_text(p, manifest, manifest_len) != 0)
            rc = ts_err_set(err, TS_EIO, "image store: %s: %s", p, strerror(errno));
    }
    if (!rc) {
        snprintf(p, sizeof p, "%s/config", tmp);
        if (write_text(p, config_digest, strlen(config_digest)) != 0)
            rc = ts_err_set(err, TS_EIO, "image store: %s: %s", p, strerror(errno));
    }
    agent_image_trace("written (rc %d)", rc);
    char num[32];
    long long bytes = 0;
    /* what gzip could not shrink, lz4 cannot either: stored as is, it costs
     * no compression time before the start */
    bool compress = (double)stats.bytes >= PACK_COMPRESS_MIN_RATIO * (double)layer_bytes;
    snprintf(p, sizeof p, "%s/rootfs", tmp);
    /* packed from the checked tree only, and only where mkfs.erofs's memory
     * (per entry, in the agent's cgroup) stays bounded; otherwise, or where
     * it fails, the root stays the tree, as on a node without EROFS */
    long long most = st->pack_entries_max > 0 ? st->pack_entries_max : TS_IMAGE_PACK_ENTRIES_MAX;
    ts_err perr = {0};
    bool packed = !rc && image_rootfs_can_pack(st) && stats.entries <= most &&
                  image_rootfs_pack(tmp, compress, &bytes, &perr) == 0;
    if (!packed)
        bytes = tree_bytes(p);
    agent_image_trace("packed (%s%s%s)", packed ? "yes" : "no, a tree", perr.msg[0] ? ": " : "",
                      perr.msg);
    int n = snprintf(num, sizeof num, "%lld\n", bytes);
    if (!rc) {
        snprintf(p, sizeof p, "%s/bytes", tmp);
        if (write_text(p, num, (size_t)n) != 0)
            rc = ts_err_set(err, TS_EIO, "image store: %s: %s", p, strerror(errno));
    }
    agent_image_trace("sized (rc %d)", rc);
    image_dir(st, digest, final, sizeof final);
    if (!rc) { /* unsealed until its bytes are flushed (seal_later) */
        char id[64];
        boot_id(id);
        snprintf(p, sizeof p, "%s/boot", tmp);
        int dfd = open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (write_text(p, id, strlen(id)) != 0 || dfd < 0 || fsync(dfd) != 0)
            rc = ts_err_set(err, TS_EIO, "image store: %s: %s", p, strerror(errno));
        if (dfd >= 0)
            close(dfd);
    }
    if (!rc) {
        snprintf(p, sizeof p, "%s/users", tmp);
        mkdir(p, 0700);
        snprintf(p, sizeof p, "%s/used", tmp);
        touch(p);
        image_rootfs_unmount(final);
        rm_tree(final);
        if (rename(tmp, final) != 0)
            rc = ts_err_set(err, TS_EIO, "image store: rename %s: %s", final, strerror(errno));
    }
    agent_image_trace("renamed (rc %d)", rc);
    if (!rc && (rc = image_rootfs_mount(final, err)) != 0)
        rm_tree(final);
    agent_image_trace("renamed and mounted (rc %d)", rc);
    if (rc) {
        rm_tree(tmp);
        return rc;
    }
    seal_later(final);
    fill_image(st, digest, final, out);
    return 0;
}

static bool task_name_ok(const char *s)
{
    if (!s || !*s || strlen(s) > 63 || s[0] == '.')
        return false;
    for (; *s; s++)
        if (!(*s >= 'a' && *s <= 'z') && !(*s >= 'A' && *s <= 'Z') && !(*s >= '0' && *s <= '9') &&
            *s != '.' && *s != '_' && *s != '-')
            return false;
    return true;
}

int agent_image_use(ts_image_store *st, const char *digest, const char *task_id, ts_err *err)
{
    if (!ts_image_digest_ok(digest))
        return ts_err_set(err, TS_EINVAL, "image: not a sha256 digest");
    if (!task_name_ok(task_id))
        return ts_err_set(err, TS_EINVAL, "task id: 1..63 of A-Z a-z 0-9 . _ -");
    char dir[700], p[800];
    image_dir(st, digest, dir, sizeof dir);
    snprintf(p, sizeof p, "%s/users/%s", dir, task_id);
    int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return ts_err_set(err, errno == ENOENT ? TS_ENOENT : TS_EIO, "image %s: %s", digest,
                          errno == ENOENT ? "not in the store" : strerror(errno));
    close(fd);
    snprintf(p, sizeof p, "%s/used", dir);
    touch(p);
    return 0;
}

void agent_image_release(ts_image_store *st, const char *digest, const char *task_id)
{
    if (!ts_image_digest_ok(digest) || !task_name_ok(task_id))
        return;
    char dir[700], p[800];
    image_dir(st, digest, dir, sizeof dir);
    snprintf(p, sizeof p, "%s/users/%s", dir, task_id);
    unlink(p);
    snprintf(p, sizeof p, "%s/used", dir);
    touch(p);
}

typedef struct image_entry {
    char hex[65];
    time_t used;
    long long bytes;
    bool in_use;
} image_entry;

static bool has_users(const char *dir)
{
    char p[900];
    snprintf(p, sizeof p, "%s/users", dir);
    DIR *d = opendir(p);
    if (!d)
        return false;
    bool any = false;
    for (struct dirent *e; !any && (e = readdir(d));)
        any = strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    closedir(d);
    return any;
}

bool image_in_use(const char *dir)
{
    return has_users(dir);
}

void image_store_each(const ts_image_store *st,
                      bool (*one)(const char *dir, const char *hex, void *u), void *u)
{
    char p[700];
    snprintf(p, sizeof p, "%s/images", st->root);
    DIR *d = opendir(p);
    if (!d)
        return;
    for (struct dirent *e; (e = readdir(d));) {
        if (strlen(e->d_name) != 64)
            continue;
        char dir[800];
        snprintf(dir, sizeof dir, "%s/%.64s", p, e->d_name);
        if (!one(dir, e->d_name, u))
            break;
    }
    closedir(d);
}

typedef struct image_list {
    image_entry *out;
    int n, max;
} image_list;

static bool list_one(const char *dir, const char *hex, void *u)
{
    image_list *l = u;
    if (l->n >= l->max)
        return false;
    image_entry *ie = &l->out[l->n++];
    memset(ie, 0, sizeof *ie);
    memcpy(ie->hex, hex, 65);
    char f[900];
    snprintf(f, sizeof f, "%s/used", dir);
    struct stat sb;
    ie->used = stat(f, &sb) == 0 ? sb.st_mtime : 0;
    snprintf(f, sizeof f, "%s/bytes", dir);
    ie->bytes = read_ll(f);
    ie->in_use = has_users(dir);
    return l->n < l->max;
}

static int list_images(const ts_image_store *st, image_entry *out, int max)
{
    image_list l = {out, 0, max};
    if (max > 0)
        image_store_each(st, list_one, &l);
    return l.n;
}

/* The references in dir's refs file into refs (at most REFS_MAX); their count. */
static int read_refs(const char *dir, char refs[][REF_LINE_MAX])
{
    char p[900];
    snprintf(p, sizeof p, "%s/" REFS_FILE, dir);
    int fd = open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
    if (!f) {
        if (fd >= 0)
            close(fd);
        return 0;
    }
    int n = 0;
    char line[REF_LINE_MAX];
    while (n < REFS_MAX && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = 0;
        if (line[0])
            snprintf(refs[n++], REF_LINE_MAX, "%s", line);
    }
    fclose(f);
    return n;
}

void image_store_note_ref(ts_image_store *st, const char *digest, const char *ref)
{
    char dir[700], p[900], tmp[920];
    image_dir(st, digest, dir, sizeof dir);
    char refs[REFS_MAX][REF_LINE_MAX];
    int n = read_refs(dir, refs);
    for (int i = 0; i < n; i++)
        if (!strcmp(refs[i], ref))
            return;
    snprintf(p, sizeof p, "%s/" REFS_FILE, dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", p);
    FILE *f = fopen(tmp, "we");
    if (!f)
        return; /* the listing misses this name: the controller's hint only */
    for (int i = n == REFS_MAX ? 1 : 0; i < n; i++) /* the oldest goes */
        fprintf(f, "%s\n", refs[i]);
    fprintf(f, "%s\n", ref);
    if (fclose(f) != 0 || rename(tmp, p) != 0)
        unlink(tmp);
}

void agent_image_list_free(ts_sync_image *v, int n)
{
    for (int i = 0; v && i < n; i++) {
        for (int k = 0; k < v[i].refs.n; k++)
            free((char *)v[i].refs.v[k]);
        free(v[i].refs.v);
        free((char *)v[i].digest);
    }
    free(v);
}

/* Image i of the list: its digest and references, copied. False: out of memory. */
static bool store_list_one(const ts_image_store *st, const image_entry *im, ts_sync_image *out)
{
    char dir[800], digest[80];
    snprintf(dir, sizeof dir, "%s/images/%s", st->root, im->hex);
    snprintf(digest, sizeof digest, "sha256:%s", im->hex);
    char refs[REFS_MAX][REF_LINE_MAX];
    int nr = read_refs(dir, refs);
    out->bytes = im->bytes;
    out->digest = strdup(digest);
    out->refs.v = nr > 0 ? calloc((size_t)nr, sizeof *out->refs.v) : NULL;
    if (!out->digest || (nr > 0 && !out->refs.v))
        return false;
    for (int k = 0; k < nr; k++)
        if (!(out->refs.v[out->refs.n++] = strdup(refs[k])))
            return false;
    return true;
}

int agent_image_store_list(const ts_image_store *st, int max, ts_sync_image **out)
{
    image_entry *im = calloc(IMAGES_MAX, sizeof *im);
    *out = NULL;
    if (!im)
        return -1;
    int n = list_images(st, im, max < IMAGES_MAX ? max : IMAGES_MAX);
    ts_sync_image *v = n > 0 ? calloc((size_t)n, sizeof *v) : NULL;
    bool ok = n <= 0 || v;
    for (int i = 0; ok && i < n; i++)
        ok = store_list_one(st, &im[i], &v[i]);
    free(im);
    if (!ok) {
        agent_image_list_free(v, n);
        return -1;
    }
    *out = v;
    return n > 0 ? n : 0;
}

/* Adds the blob digests a kept image's manifest names to keep (a JSON object used as a set). */
static void mark_blobs(const ts_image_store *st, const char *hex, json_t *keep)
{
    char p[800];
    snprintf(p, sizeof p, "%s/images/%s/manifest.json", st->root, hex);
    json_t *m = json_load_file(p, 0, NULL);
    if (!m)
        return;
    json_t *cfg = json_object_get(json_object_get(m, "config"), "digest");
    if (json_is_string(cfg))
        json_object_set_new(keep, json_string_value(cfg), json_true());
    size_t i;
    json_t *l;
    json_array_foreach(json_object_get(m, "layers"), i, l) {
        json_t *dg = json_object_get(l, "digest");
        if (json_is_string(dg))
            json_object_set_new(keep, json_string_value(dg), json_true());
    }
    json_decref(m);
}

static long long blobs_bytes(const ts_image_store *st, const json_t *keep, bool drop_unkept)
{
    char p[700];
    snprintf(p, sizeof p, "%s/blobs/sha256", st->root);
    DIR *d = opendir(p);
    if (!d)
        return 0;
    long long sum = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        char dg[80];
        snprintf(dg, sizeof dg, "sha256:%.64s", e->d_name);
        if (drop_unkept && keep && !json_object_get(keep, dg)) {
            unlinkat(dirfd(d), e->d_name, 0);
            continue;
        }
        struct stat sb;
        if (fstatat(dirfd(d), e->d_name, &sb, AT_SYMLINK_NOFOLLOW) == 0)
            sum += (long long)sb.st_blocks * 512;
    }
    closedir(d);
    return sum;
}

long long agent_image_store_bytes(const ts_image_store *st)
{
    image_entry *im = calloc(IMAGES_MAX, sizeof *im);
    if (!im)
        return -1;
    int n = list_images(st, im, IMAGES_MAX);
    long long sum = blobs_bytes(st, NULL, false);
    for (int i = 0; i < n; i++)
        sum += im[i].bytes;
    free(im);
    return sum;
}

static int by_used(const void *a, const void *b)
{
    const image_entry *x = a, *y = b;
    return x->used < y->used ? -1 : x->used > y->used;
}

long long image_store_evict_locked(ts_image_store *st, long long target_bytes)
{
    if (target_bytes < 0)
        target_bytes = st->budget_bytes;
    image_entry *im = calloc(IMAGES_MAX, sizeof *im);
    json_t *keep = json_object();
    if (!im || !keep) {
        free(im);
        json_decref(keep);
        return -1;
    }
    int n = list_images(st, im, IMAGES_MAX);
    qsort(im, (size_t)n, sizeof *im, by_used);
    long long total = blobs_bytes(st, NULL, false);
    for (int i = 0; i < n; i++)
        total += im[i].bytes;
    bool removed = false;
    for (int i = 0; i < n && total > target_bytes; i++) {
        if (im[i].in_use)
            continue;
        char dir[800];
        snprintf(dir, sizeof dir, "%s/images/%s", st->root, im[i].hex);
        image_rootfs_unmount(dir);
        rm_tree(dir);
        total -= im[i].bytes;
        im[i].hex[0] = 0;
        removed = true;
    }
    if (removed || total > target_bytes) {
        /* blobs no remaining image names go too */
        for (int i = 0; i < n; i++)
            if (im[i].hex[0])
                mark_blobs(st, im[i].hex, keep);
        total = blobs_bytes(st, keep, true);
        for (int i = 0; i < n; i++)
            if (im[i].hex[0])
                total += im[i].bytes;
    }
    json_decref(keep);
    free(im);
    return total;
}

long long agent_image_evict(ts_image_store *st, long long target_bytes)
{
    int lk = image_store_lock(st, NULL);
    if (lk < 0)
        return -1;
    long long left = image_store_evict_locked(st, target_bytes);
    image_store_unlock(lk);
    return left;
}
