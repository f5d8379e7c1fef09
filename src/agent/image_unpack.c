/*
 * image_unpack.c - applies an image's layers to a root filesystem, treating
 * every layer as hostile.
 *
 * An image comes from anyone who can push to a registry a tenant may use, and
 * the agent unpacking it is root. So a layer is read as a stream of tar
 * entries (ustar, with PAX and GNU long names, gzip or not) and each entry is
 * made with *at() calls relative to directories opened one component at a
 * time with O_NOFOLLOW from the root's descriptor: no path string of the
 * layer is ever handed to the kernel whole, so no symbolic link, absolute or
 * relative, made by an earlier entry or layer can lead a write outside. The
 * links themselves are made as they are: inside the container they resolve
 * in its own root. Refused, naming the entry: a ".." component, a hard link
 * whose target is not a file or link already inside, a whiteout of "." or
 * "..", a parent that is a link or not a directory, a damaged header.
 * Neutralised: device nodes are not made, set-id bits are cleared. Bounded:
 * the bytes decompressed and the entries of one image (a decompression bomb
 * ends in TS_ENOSPC, not a full disk).
 *
 * A layer is read from its verified blob, or (agent_image_unpack_stream,
 * for image_stream.c) from the file its fetch is writing, each byte once
 * the fetch says it is there; those bytes are hashed as they are read, to
 * the file's end, and the caller uses what was made only when they have the
 * layer's digest.
 *
 * OCI whiteouts: ".wh.NAME" removes NAME from the lower layers,
 * ".wh..wh..opq" empties its directory (applied when met, so a layer puts it
 * before the entries it adds there, as the tools that write layers do).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <zlib.h>

#include <gnutls/crypto.h>

#include "image.h"
#include "agent/trash.h"

#define TAR_BLOCK_BYTES 512
#define READ_CHUNK_BYTES 65536
#define PAX_MAX_BYTES (1 << 20)      /* one PAX header's records */
#define LONGNAME_MAX_BYTES 65536     /* a GNU long name or link */
#define NAME_PARTS_MAX 256           /* path depth */
#define REMOVE_DEPTH_MAX 512
#define WHITEOUT_PREFIX ".wh."
#define WHITEOUT_OPAQUE ".wh..wh..opq"
#define FREE_CHECK_BYTES (16LL << 20)

typedef struct reader {
    int fd;
    bool gz, in_eof, z_end;
    z_stream z;
    unsigned char in[READ_CHUNK_BYTES];
    long long out_total, out_max;
    /* the filesystem written to (root_fd) keeps min_free bytes free: looked
     * at every FREE_CHECK_BYTES of output */
    int root_fd;
    long long min_free, next_free_check;
    /* a layer read as it arrives (agent_image_unpack_stream): its bytes
     * [0, pos) read so far, and hashed into hash */
    ts_unpack_feed *feed;
    long long pos;
    gnutls_hash_hd_t hash;
} reader;

/* The end of the bytes there to read from pos on, once at least need of
 * them are (or the layer is whole); -1: the feed ended without them. */
static long long feed_wait(ts_unpack_feed *f, long long need)
{
    pthread_mutex_lock(&f->mu);
    while (!f->ended && f->avail < need)
        pthread_cond_wait(&f->cv, &f->mu);
    long long lim = f->ended && f->ok ? f->size : f->avail;
    pthread_mutex_unlock(&f->mu);
    return lim < need ? -1 : lim;
}

/* Up to n bytes of the layer: read(2) from a file, else from the feed's
 * file, at most what is there, hashed. 0: its end; -1 with errno (EIO: the
 * feed ended short). */
static ssize_t rd_read(reader *r, void *buf, size_t n)
{
    if (!r->feed)
        return read(r->fd, buf, n);
    if (r->pos >= r->feed->size)
        return 0;
    long long lim = feed_wait(r->feed, r->pos + 1);
    if (lim < 0) {
        errno = EIO;
        return -1;
    }
    if ((long long)n > lim - r->pos)
        n = (size_t)(lim - r->pos);
    ssize_t k = pread(r->fd, buf, n, r->pos);
    if (k == 0) { /* the feed said it is written: a short file is a failed write */
        errno = EIO;
        return -1;
    }
    if (k > 0) {
        gnutls_hash(r->hash, buf, (size_t)k);
        r->pos += k;
    }
    return k;
}

static int rd_fill(reader *r, unsigned char *buf, size_t n, ts_err *err)
{
    size_t got = 0;
    while (got < n) {
        if (!r->gz) {
            ssize_t k = rd_read(r, buf + got, n - got);
            if (k < 0 && errno == EINTR)
                continue;
            if (k < 0)
                return ts_err_set(err, TS_EIO, "read: %s", strerror(errno));
            if (k == 0)
                return ts_err_set(err, TS_EINVAL, "the tar ends inside an entry");
            got += (size_t)k;
            continue;
        }
        if (r->z_end)
            return ts_err_set(err, TS_EINVAL, "the tar ends inside an entry");
        if (r->z.avail_in == 0 && !r->in_eof) {
            ssize_t k = rd_read(r, r->in, sizeof r->in);
            if (k < 0 && errno == EINTR)
                continue;
            if (k < 0)
                return ts_err_set(err, TS_EIO, "read: %s", strerror(errno));
            if (k == 0)
                r->in_eof = true;
            r->z.next_in = r->in;
            r->z.avail_in = (uInt)k;
        }
        r->z.next_out = buf + got;
        r->z.avail_out = (uInt)(n - got);
        int zr = inflate(&r->z, Z_NO_FLUSH);
        got = n - r->z.avail_out;
        if (zr == Z_STREAM_END) {
            /* another gzip member may follow */
            if (r->z.avail_in == 0 && r->in_eof)
                r->z_end = true;
            else if (inflateReset(&r->z) != Z_OK)
                return ts_err_set(err, TS_EINVAL, "gzip: cannot restart");
        } else if (zr == Z_BUF_ERROR && r->in_eof && r->z.avail_in == 0) {
            return ts_err_set(err, TS_EINVAL, "gzip: the data ends early");
        } else if (zr != Z_OK && zr != Z_BUF_ERROR) {
            return ts_err_set(err, TS_EINVAL, "gzip: %s", r->z.msg ? r->z.msg : "damaged");
        }
    }
    r->out_total += (long long)n;
    if (r->out_total > r->out_max)
        return ts_err_set(err, TS_ENOSPC,
                          "unpacks past the limit of %lld bytes (a decompression bomb?)",
                          r->out_max);
    struct statvfs v;
    if (r->min_free > 0 && r->out_total >= r->next_free_check) {
        r->next_free_check = r->out_total + FREE_CHECK_BYTES;
        if (fstatvfs(r->root_fd, &v) == 0 &&
            (long long)v.f_bavail * (long long)v.f_frsize < r->min_free)
            return ts_err_set(err, TS_ENOSPC, "unpacking it would leave less than the node's "
                              "disk reserve of %lld MiB free (%lld bytes unpacked)",
                              r->min_free >> 20, r->out_total);
    }
    return 0;
}

static int rd_skip(reader *r, long long n, ts_err *err)
{
    unsigned char buf[8192];
    while (n > 0) {
        size_t k = n > (long long)sizeof buf ? sizeof buf : (size_t)n;
        int rc = rd_fill(r, buf, k, err);
        if (rc)
            return rc;
        n -= (long long)k;
    }
    return 0;
}

static long long pad512(long long n)
{
    return (TAR_BLOCK_BYTES - n % TAR_BLOCK_BYTES) % TAR_BLOCK_BYTES;
}

/* An octal field (NUL/space terminated) or GNU base-256. -1: damaged. */
static long long tar_num(const unsigned char *f, size_t len)
{
    if (f[0] & 0x80) {
        long long v = f[0] & 0x3f;
        for (size_t i = 1; i < len; i++) {
            if (v > (1LL << 54))
                return -1;
            v = v << 8 | f[i];
        }
        return v;
    }
    long long v = 0;
    size_t i = 0;
    while (i < len && f[i] == ' ')
        i++;
    for (; i < len && f[i] >= '0' && f[i] <= '7'; i++) {
        if (v > (1LL << 58))
            return -1;
        v = v * 8 + (f[i] - '0');
    }
    if (i < len && f[i] != 0 && f[i] != ' ')
        return -1;
    return v;
}

static bool header_ok(const unsigned char *h)
{
    long long want = tar_num(h + 148, 8);
    long long sum = 0;
    for (int i = 0; i < TAR_BLOCK_BYTES; i++)
        sum += (i >= 148 && i < 156) ? ' ' : h[i];
    return want == sum;
}

/* Splits name into components in place: "." and empty dropped, a leading
 * "/" ignored (a layer's root is the image's root). -1 on "..". */
static int split_name(char *name, char **parts, int *n)
{
    *n = 0;
    for (char *save = NULL, *c = strtok_r(name, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
        if (!strcmp(c, "."))
            continue;
        if (!strcmp(c, ".."))
            return -1;
        if (*n == NAME_PARTS_MAX)
            return -2;
        parts[(*n)++] = c;
    }
    return 0;
}

/* Opens the directory holding the last component, making missing parents
 * (0755, root's). Never follows a link. -1 with errno. */
static int open_parent(int root_fd, char **parts, int n)
{
    int fd = dup(root_fd);
    for (int i = 0; fd >= 0 && i < n - 1; i++) {
        int next = openat(fd, parts[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (next < 0 && errno == ENOENT) {
            if (mkdirat(fd, parts[i], 0755) != 0 && errno != EEXIST) {
                close(fd);
                return -1;
            }
            next = openat(fd, parts[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        }
        int e = errno;
        close(fd);
        errno = e;
        fd = next;
    }
    return fd;
}

typedef struct entry {
    char type;
    char *name, *link;      /* malloc'd */
    long long size;
    unsigned mode;
    long long uid, gid;
} entry;

/* PAX records "LEN key=value\n": path, linkpath and size matter here. */
static int parse_pax(char *buf, long long len, entry *next, ts_err *err)
{
    long long at = 0;
    while (at < len) {
        char *end;
        long long rl = strtoll(buf + at, &end, 10);
        if (rl <= 0 || at + rl > len || *end != ' ' || buf[at + rl - 1] != '\n')
            return ts_err_set(err, TS_EINVAL, "a damaged PAX header");
        buf[at + rl - 1] = 0;
        char *kv = end + 1, *eq = strchr(kv, '=');
        if (!eq)
            return ts_err_set(err, TS_EINVAL, "a damaged PAX record");
        *eq = 0;
        char *v = eq + 1;
        if (!strcmp(kv, "path")) {
            free(next->name);
            next->name = strdup(v);
        } else if (!strcmp(kv, "linkpath")) {
            free(next->link);
            next->link = strdup(v);
        } else if (!strcmp(kv, "size")) {
            next->size = strtoll(v, &end, 10);
            if (*end || next->size < 0)
                return ts_err_set(err, TS_EINVAL, "PAX size: not a number");
        }
        at += rl;
    }
    return 0;
}

static int read_blob(reader *r, long long size, long long max, char **out, ts_err *err)
{
    if (size < 0 || size > max)
        return ts_err_set(err, TS_EINVAL, "an extended header of %lld bytes (at most %lld)",
                          size, max);
    char *b = malloc((size_t)size + 1);
    if (!b)
        return ts_err_set(err, TS_ENOMEM, "out of memory");
    int rc = rd_fill(r, (unsigned char *)b, (size_t)size, err);
    if (!rc)
        rc = rd_skip(r, pad512(size), err);
    if (rc) {
        free(b);
        return rc;
    }
    b[size] = 0;
    *out = b;
    return 0;
}

static int write_file(reader *r, int fd, long long size, ts_err *err)
{
    unsigned char buf[READ_CHUNK_BYTES];
    while (size > 0) {
        size_t k = size > (long long)sizeof buf ? sizeof buf : (size_t)size;
        int rc = rd_fill(r, buf, k, err);
        if (rc)
            return rc;
        for (size_t w = 0; w < k;) {
            ssize_t n = write(fd, buf + w, k - w);
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0)
                return ts_err_set(err, errno == ENOSPC ? TS_ENOSPC : TS_EIO, "write: %s",
                                  strerror(errno));
            w += (size_t)n;
        }
        size -= (long long)k;
    }
    return 0;
}

static unsigned safe_mode(unsigned mode, ts_unpack_stats *s)
{
    if (mode & (S_ISUID | S_ISGID))
        s->setid_cleared++;
    return mode & 01777;
}

/* Makes one entry. < 0: refused or failed; 0 or 1: the entry's data (if a
 * hostile header gives a non-file one) is for the caller to skip; 2: a
 * regular file whose data was consumed here. */
static int apply(reader *r, int root_fd, entry *e, ts_unpack_stats *s, ts_err *err)
{
    char *parts[NAME_PARTS_MAX];
    int n, rc = split_name(e->name, parts, &n);
    if (rc == -1)
        return ts_err_set(err, TS_EINVAL, "a \"..\" in the path: not allowed");
    if (rc < 0)
        return ts_err_set(err, TS_EINVAL, "deeper than %d directories", NAME_PARTS_MAX);
    if (n == 0)
        return 1; /* the root itself: kept as the store made it */
    const char *base = parts[n - 1];
    int pfd = open_parent(root_fd, parts, n);
    if (pfd < 0)
        return ts_err_set(err, TS_EINVAL,
                          "a parent directory is a symbolic link or not a directory (%s)",
                          strerror(errno));
    rc = 1;
    if (!strcmp(base, WHITEOUT_OPAQUE)) {
        if (agent_rm_entries(pfd, REMOVE_DEPTH_MAX) != 0)
            rc = ts_err_set(err, TS_EIO, "opaque whiteout: %s", strerror(errno));
        goto out;
    }
    if (!strncmp(base, WHITEOUT_PREFIX, strlen(WHITEOUT_PREFIX))) {
        const char *victim = base + strlen(WHITEOUT_PREFIX);
        if (!*victim || !strcmp(victim, ".") || !strcmp(victim, ".."))
            rc = ts_err_set(err, TS_EINVAL, "a whiteout of \"%s\": not allowed", victim);
        else if (agent_rm_tree_at(pfd, victim, REMOVE_DEPTH_MAX) != 0)
            rc = ts_err_set(err, TS_EIO, "whiteout: %s", strerror(errno));
        goto out;
    }
    struct stat old;
    /* what was there goes, but a directory a directory entry keeps */
    bool exists = fstatat(pfd, base, &old, AT_SYMLINK_NOFOLLOW) == 0;
    bool dir_kept = exists && e->type == '5' && S_ISDIR(old.st_mode);
    if (exists && !dir_kept && agent_rm_tree_at(pfd, base, REMOVE_DEPTH_MAX) != 0) {
        rc = ts_err_set(err, TS_EIO, "cannot replace: %s", strerror(errno));
        goto out;
    }
    uid_t uid = (uid_t)e->uid;
    gid_t gid = (gid_t)e->gid;
    switch (e->type) {
    case '0':
    case '\0':
    case '7': {
        int fd = openat(pfd, base, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0) {
            rc = ts_err_set(err, TS_EIO, "create: %s", strerror(errno));
            goto out;
        }
        rc = write_file(r, fd, e->size, err);
        if (!rc)
            rc = rd_skip(r, pad512(e->size), err);
        if (!rc && fchown(fd, uid, gid) != 0 && errno != EPERM)
            rc = ts_err_set(err, TS_EIO, "chown: %s", strerror(errno));
        if (!rc && fchmod(fd, safe_mode(e->mode, s)) != 0)
            rc = ts_err_set(err, TS_EIO, "chmod: %s", strerror(errno));
        close(fd);
        if (!rc)
            rc = 2; /* data consumed */
        break;
    }
    case '5':
        if (!dir_kept && mkdirat(pfd, base, 0700) != 0) {
            rc = ts_err_set(err, TS_EIO, "mkdir: %s", strerror(errno));
            break;
        }
        if (fchownat(pfd, base, uid, gid, AT_SYMLINK_NOFOLLOW) != 0 && errno != EPERM)
            rc = ts_err_set(err, TS_EIO, "chown: %s", strerror(errno));
        else if (fchmodat(pfd, base, safe_mode(e->mode, s), 0) != 0)
            rc = ts_err_set(err, TS_EIO, "chmod: %s", strerror(errno));
        break;
    case '2':
        if (!e->link || !*e->link) {
            rc = ts_err_set(err, TS_EINVAL, "a symbolic link without a target");
            break;
        }
        if (symlinkat(e->link, pfd, base) != 0)
            rc = ts_err_set(err, TS_EIO, "symlink: %s", strerror(errno));
        else if (fchownat(pfd, base, uid, gid, AT_SYMLINK_NOFOLLOW) != 0 && errno != EPERM)
            rc = ts_err_set(err, TS_EIO, "chown: %s", strerror(errno));
        break;
    case '1': {
        char *tparts[NAME_PARTS_MAX];
        int tn;
        char *t = e->link ? strdup(e->link) : NULL;
        if (!t) {
            rc = ts_err_set(err, TS_EINVAL, "a hard link without a target");
            break;
        }
        int trc = split_name(t, tparts, &tn);
        int tfd = trc == 0 && tn > 0 ? open_parent(root_fd, tparts, tn) : -1;
        struct stat tsb;
        if (trc != 0 || tn == 0)
            rc = ts_err_set(err, TS_EINVAL, "hard link to \"%s\": outside the image", e->link);
        else if (tfd < 0 || fstatat(tfd, tparts[tn - 1], &tsb, AT_SYMLINK_NOFOLLOW) != 0 ||
                 !(S_ISREG(tsb.st_mode) || S_ISLNK(tsb.st_mode)))
            rc = ts_err_set(err, TS_EINVAL,
                            "hard link to \"%s\": not a file already in the image", e->link);
        else if (linkat(tfd, tparts[tn - 1], pfd, base, 0) != 0)
            rc = ts_err_set(err, TS_EIO, "link: %s", strerror(errno));
        if (tfd >= 0)
            close(tfd);
        free(t);
        break;
    }
    case '3':
    case '4':
        s->devices_skipped++; /* a task gets its devices from the agent, never a layer */
        break;
    case '6':
        if (mkfifoat(pfd, base, safe_mode(e->mode, s) & 0777) != 0)
            rc = ts_err_set(err, TS_EIO, "mkfifo: %s", strerror(errno));
        break;
    default:
        break; /* unknown kinds (sparse, volume labels...) are not made */
    }
out:
    close(pfd);
    return rc;
}

/* The entry's kind, size, mode and owner from its ustar header. */
static int header_numbers(const unsigned char *h, entry *e, ts_err *err)
{
    e->type = (char)h[156];
    e->size = tar_num(h + 124, 12);
    e->mode = (unsigned)tar_num(h + 100, 8);
    e->uid = tar_num(h + 108, 8);
    e->gid = tar_num(h + 116, 8);
    if (e->size < 0 || e->uid < 0 || e->gid < 0)
        return ts_err_set(err, TS_EINVAL, "a damaged tar header (numbers)");
    return 0;
}

/* A pax header ('x'; a global one, 'g', is read and ignored) or a GNU long
 * name ('L') or link ('K'): what it says goes into next, for the entry
 * that follows. */
static int read_extension(reader *r, const entry *e, entry *next, ts_err *err)
{
    char *blob = NULL;
    int rc = read_blob(r, e->size,
                       e->type == 'x' || e->type == 'g' ? PAX_MAX_BYTES : LONGNAME_MAX_BYTES,
                       &blob, err);
    if (!rc && e->type == 'x')
        rc = parse_pax(blob, e->size, next, err);
    else if (!rc && e->type == 'L') {
        free(next->name);
        next->name = blob;
        blob = NULL;
    } else if (!rc && e->type == 'K') {
        free(next->link);
        next->link = blob;
        blob = NULL;
    }
    free(blob);
    return rc;
}

/* The entry's name and link target (and size), from the extension headers
 * before it when they said, else from its own header; next is used up. */
static int entry_names(const unsigned char *h, entry *next, entry *e, ts_err *err)
{
    if (next->name) {
        e->name = next->name;
    } else {
        char nm[256 + 1 + 100 + 1];
        if (h[345] && !memcmp(h + 257, "ustar", 5))
            snprintf(nm, sizeof nm, "%.155s/%.100s", (const char *)h + 345, (const char *)h + 0);
        else
            snprintf(nm, sizeof nm, "%.100s", (const char *)h);
        e->name = strdup(nm);
    }
    if (next->link) {
        e->link = next->link;
    } else {
        char ln[101];
        snprintf(ln, sizeof ln, "%.100s", (const char *)h + 157);
        e->link = strdup(ln);
    }
    if (next->size > 0)
        e->size = next->size;
    *next = (entry){0};
    if (!e->name || !e->link) {
        free(e->name);
        free(e->link);
        return ts_err_set(err, TS_ENOMEM, "out of memory");
    }
    return 0;
}

/* The layer's entries, from r (ready to read), applied under root_fd. */
static int unpack(reader *r, int root_fd, long long max_entries, ts_unpack_stats *stats,
                  ts_err *err)
{
    entry next = {0};
    unsigned char h[TAR_BLOCK_BYTES];
    int rc = 0, zero_blocks = 0;
    char where[160] = "";
    for (;;) {
        rc = rd_fill(r, h, sizeof h, err);
        if (rc)
            break;
        bool zero = true;
        for (int i = 0; i < TAR_BLOCK_BYTES && zero; i++)
            zero = h[i] == 0;
        if (zero) {
            if (++zero_blocks == 2)
                break;
            continue;
        }
        zero_blocks = 0;
        if (!header_ok(h)) {
            rc = ts_err_set(err, TS_EINVAL, "a damaged tar header (checksum)");
            break;
        }
        if (++stats->entries > max_entries) {
            rc = ts_err_set(err, TS_ENOSPC, "more than %lld entries", max_entries);
            break;
        }
        entry e = {0};
        if ((rc = header_numbers(h, &e, err)) != 0)
            break;
        if (e.type == 'x' || e.type == 'L' || e.type == 'K' || e.type == 'g') {
            if ((rc = read_extension(r, &e, &next, err)) != 0)
                break;
            continue;
        }
        if ((rc = entry_names(h, &next, &e, err)) != 0)
            break;
        snprintf(where, sizeof where, "%.150s", e.name);
        rc = apply(r, root_fd, &e, stats, err);
        free(e.name);
        free(e.link);
        if (rc == 0 || rc == 1) /* nothing made from its data: skipped */
            rc = rd_skip(r, e.size + pad512(e.size), err);
        else if (rc == 2)
            rc = 0;
        if (rc)
            break;
    }
    if (rc && where[0])
        ts_err_prefix(err, "entry \"%s\": ", where);
    free(next.name);
    free(next.link);
    stats->bytes = r->out_total;
    return rc;
}

/* r for the layer open as fd (r->feed set before: read as it arrives),
 * gzip or not as its first two bytes say; NULL out of memory. */
static reader *reader_new(int fd, ts_unpack_feed *feed, const ts_unpack_limits *lim,
                          const ts_unpack_stats *stats, int root_fd)
{
    reader *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->fd = fd;
    r->feed = feed;
    unsigned char magic[2] = {0, 0};
    long long need = feed && feed->size < 2 ? feed->size : 2;
    if (!feed || feed_wait(feed, need) >= need)
        r->gz = pread(fd, magic, 2, 0) == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
    if (r->gz && inflateInit2(&r->z, 15 + 32) != Z_OK) {
        free(r);
        return NULL;
    }
    r->out_total = stats->bytes;
    r->out_max = lim && lim->max_bytes > 0 ? lim->max_bytes : TS_IMAGE_UNPACK_MAX_BYTES_DEFAULT;
    r->root_fd = root_fd;
    r->min_free = lim ? lim->min_free_bytes : 0;
    return r;
}

static void reader_free(reader *r)
{
    if (r->gz)
        inflateEnd(&r->z);
    free(r);
}

static long long entries_max(const ts_unpack_limits *lim)
{
    return lim && lim->max_entries > 0 ? lim->max_entries : TS_IMAGE_ENTRIES_MAX;
}

int agent_image_unpack_layer(int root_fd, const char *path, const ts_unpack_limits *lim,
                          ts_unpack_stats *stats, ts_err *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return ts_err_set(err, TS_ENOENT, "%s: %s", path, strerror(errno));
    reader *r = reader_new(fd, NULL, lim, stats, root_fd);
    int rc = r ? unpack(r, root_fd, entries_max(lim), stats, err)
               : ts_err_set(err, TS_ENOMEM, "out of memory (a reader, zlib)");
    if (r)
        reader_free(r);
    close(fd);
    return rc;
}

/* What the stream reader has not read yet, to the file's end, read and
 * hashed: a layer's digest covers its bytes after the tar's end too. */
static int drain(reader *r, ts_err *err)
{
    unsigned char buf[READ_CHUNK_BYTES];
    for (;;) {
        ssize_t k = rd_read(r, buf, sizeof buf);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return ts_err_set(err, TS_EIO, "read: %s", strerror(errno));
        if (k == 0)
            return 0;
    }
}

int agent_image_unpack_stream(int root_fd, int fd, ts_unpack_feed *feed, const char *digest,
                              const ts_unpack_limits *lim, ts_unpack_stats *stats, ts_err *err)
{
    gnutls_hash_hd_t h;
    if (gnutls_hash_init(&h, GNUTLS_DIG_SHA256) != 0)
        return ts_err_set(err, TS_ENOMEM, "sha256: cannot start");
    reader *r = reader_new(fd, feed, lim, stats, root_fd);
    int rc = r ? 0 : ts_err_set(err, TS_ENOMEM, "out of memory (a reader, zlib)");
    if (r) {
        r->hash = h;
        rc = unpack(r, root_fd, entries_max(lim), stats, err);
        if (!rc)
            rc = drain(r, err);
    }
    unsigned char d[32];
    gnutls_hash_deinit(h, d);
    char got[TS_IMAGE_DIGEST_MAX];
    char *q = got + sprintf(got, "sha256:");
    for (int i = 0; i < 32; i++)
        q += sprintf(q, "%02x", d[i]);
    if (!rc && (r->pos != feed->size || strcmp(got, digest) != 0))
        rc = ts_err_set(err, TS_EINVAL, "layer %s: the %lld bytes unpacked as they came have "
                        "digest %s: the unpack is discarded", digest, r->pos, got);
    if (r)
        reader_free(r);
    return rc;
}
