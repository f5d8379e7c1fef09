/*
 * image.h - container images on a node: references, the registry client, the
 * node-local store, the safe layer unpacker and the OCI runtime bundle.
 *
 * A task that names an image runs in a root filesystem made from it. The
 * agent pulls the image through the OCI distribution API (image_pull.c),
 * keeps every blob once, by digest, in a store on the node's disk shared by
 * all tasks (image_store.c), and prepares one root filesystem per image,
 * once: unpacked (image_unpack.c: layers are hostile input, see there; a
 * layer that comes piece by piece is unpacked as it comes, image_stream.c), then
 * packed into a read-only EROFS image mounted for all its tasks where the
 * node can (image_rootfs.c). Each
 * task then gets a bundle (image_bundle.c): an overlay whose lower layer is
 * that root filesystem and whose upper layer is the task's own, plus an OCI
 * config.json that an OCI runtime (runc) runs. docs/images.md has the layout
 * and the reasons.
 *
 * Ownership: every struct here is caller-allocated; strings passed in are
 * only read during the call. Nothing prints; errors come back in the ts_err
 * with the field or file and the reason. A store is used by one agent;
 * pulls of several threads download side by side (each blob to a file of its
 * own, renamed into place once verified) and the store's lock file orders
 * their changes to the store.
 */
#ifndef TS_AGENT_IMAGE_H
#define TS_AGENT_IMAGE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "io/dest.h"
#include "tessera/agent_proto.h"
#include "tessera/error.h"
#include "tessera/image_ref.h"

struct ts_p2p;

#define TS_IMAGE_REF_MAX 512
#define TS_IMAGE_UNPACK_MAX_BYTES_DEFAULT (64LL << 30) /* one image's unpacked size */
#define TS_IMAGE_ENTRIES_MAX 2000000    /* one image's tar entries, all layers */
#define TS_IMAGE_PACK_ENTRIES_MAX 100000 /* packed into EROFS up to this many (~460 MB) */

/* sha256 of a file, as "sha256:<hex>" into out (TS_IMAGE_DIGEST_MAX). */
int agent_image_file_digest(const char *path, char *out, ts_err *err);

/* ---- unpacking (image_unpack.c) ---- */

typedef struct ts_unpack_limits {
    long long max_bytes;    /* file contents written, all layers; 0: the default */
    long long max_entries;  /* 0: TS_IMAGE_ENTRIES_MAX */
    long long min_free_bytes; /* stopped (TS_ENOSPC) before its filesystem has less free (the
                                 node's disk reserve); 0: not looked at */
} ts_unpack_limits;

typedef struct ts_unpack_stats {
    long long bytes;        /* file contents written */
    long long entries;
    long long devices_skipped;  /* char/block device nodes not made */
    long long setid_cleared;    /* setuid/setgid bits removed */
} ts_unpack_stats;

/* Applies one layer (a tar, gzip-compressed or not: told by its magic) at
 * path onto the root filesystem directory open as root_fd, as an OCI layer:
 * whiteouts delete, later entries replace. Never follows a symbolic link of
 * the layer, never writes outside root_fd, makes no device node and no
 * set-id file. Refused (TS_EINVAL, naming the entry and why): a name with
 * "..", a hard link to outside or through a link, a whiteout of "." or "..",
 * an entry under a symbolic link, a damaged tar. TS_ENOSPC: the limits
 * (stats carries over between the layers of one image). */
int agent_image_unpack_layer(int root_fd, const char *path, const ts_unpack_limits *lim,
                          ts_unpack_stats *stats, ts_err *err);

/* A layer's bytes as they are written to its file (image_stream.c feeds it
 * from the blob's fetch, p2p.h): [0, avail) are written, in order, not yet
 * verified; ended: no more will come (ok: the whole blob is there, size
 * bytes). Under mu; cv broadcast at each change. */
typedef struct ts_unpack_feed {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    long long avail, size;
    bool ended, ok;
} ts_unpack_feed;

/* As agent_image_unpack_layer, for the layer being written to fd as feed
 * says: each byte is read once it is there, so that the unpack follows the
 * transfer. The bytes read are hashed, to the file's end: TS_EINVAL unless
 * they are size bytes of the layer's digest, and then what was made under
 * root_fd is unverified (the caller removes it: it is never used). TS_EIO
 * when the feed ends without the whole layer. */
int agent_image_unpack_stream(int root_fd, int fd, ts_unpack_feed *feed, const char *digest,
                              const ts_unpack_limits *lim, ts_unpack_stats *stats, ts_err *err);

/* ---- the store and the registry client (image_store.c, image_pull.c) ---- */

typedef struct ts_image_store {
    char root[512];             /* <root>/blobs/sha256, <root>/images/<hex>, <root>/tmp */
    long long budget_bytes;     /* 0: no budget */
    ts_unpack_limits limits;
    bool unpacked_roots;        /* keep each root an unpacked tree, never an EROFS image */
    long long pack_entries_max; /* an image of more entries stays an unpacked tree: mkfs.erofs
                                   holds ~4.6 KB per entry in the agent's memory (0:
                                   TS_IMAGE_PACK_ENTRIES_MAX) */
} ts_image_store;

typedef struct ts_pull_opts {
    const char *user, *password; /* a pull secret (HTTP basic, or for a token); NULL: none */
    bool plain_http;             /* http:// (a registry on loopback); else https:// */
    const char *ca_file;         /* NULL: the system's */
    long timeout_s;              /* a whole request, 0: 600 */
    /* progress of blob downloads, may be NULL; called from the pulling thread */
    void (*progress)(void *ctx, long long done_bytes, long long total_bytes);
    void *progress_ctx;
    /* registered as a user of the image before the store's lock is let go
     * (agent_image_use), so no other pull evicts it before its task starts;
     * NULL: none */
    const char *use_as;
    /* blobs of TS_P2P_MIN_BLOB_BYTES or more come piece by piece from peers
     * and the registry (p2p.h); NULL: from the registry only */
    struct ts_p2p *p2p;
    long long rate_bytes_s;      /* > 0: a download rate cap (a prefetch) */
    /* summed over the pull's blobs, may be NULL: bytes from the registry,
     * from peers, fetched again */
    long long *from_origin, *from_peers, *refetched;
    /* may be NULL: seconds from the pull's start until its last blob was
     * verified (the rest, to the return, is the unpack and the mount) */
    double *blobs_s;
    /* may be NULL: this process's CPU-seconds (user and system) at that
     * moment, so that a bench can tell the fetch's CPU from the unpack's */
    double *blobs_cpu_s;
    /* the addresses the pull may connect to (io/dest.h): with guard, none of
     * a refused kind (loopback, link-local, unspecified, multicast) beyond
     * allow[0..nallow); a registry and the redirects and token service it
     * names are the tenant's to choose. false: any (an admin's image-pull) */
    bool guard;
    const io_cidr *allow;
    int nallow;
} ts_pull_opts;

typedef struct ts_image {
    char digest[TS_IMAGE_DIGEST_MAX];   /* the platform manifest's digest: the image's id */
    char rootfs[700];                   /* the prepared root filesystem (read-only use;
                                           mounted while the image is in the store) */
    char config_path[700];              /* the image's config blob (JSON) */
    long long size_bytes;               /* blobs + unpacked root filesystem */
    bool cached;                        /* was already prepared */
} ts_image;

/* Creates the store's directories. */
int agent_image_store_open(ts_image_store *st, const char *root, long long budget_bytes,
                        ts_err *err);

/* Unmounts the packed roots of images no task uses (an agent stopping: its
 * running tasks' images stay mounted for the next agent to adopt). The
 * store stays on disk; st may be opened again. */
void agent_image_store_close(ts_image_store *st);

/* Pulls ref (manifest, index -> linux/amd64, config, layers; every blob's
 * digest checked, a mismatching blob discarded and fetched once more) and
 * prepares its root filesystem, unless already there. Then evicts images no
 * task uses, least recently used first, while over budget.
 * TS_ENOENT: the registry does not know the repository, tag or digest.
 * TS_EIO: the registry cannot be reached or answers an error (worth a retry).
 * TS_EINVAL: the image is bad (digest mismatch twice, hostile layer, no
 * linux/amd64). TS_ENOSPC: it does not fit the budget. */
int agent_image_pull(ts_image_store *st, const ts_image_ref *ref, const ts_pull_opts *o,
                  ts_image *out, ts_err *err);

/* With TESSERA_AGENT_IMAGE_TRACE set (to anything but "" or "0"), one
 * line to stderr, "image-trace SECONDS EVENT", SECONDS on CLOCK_MONOTONIC:
 * the steps of a pull (manifest, each blob, each piece of a blob from
 * peers, the whole blob's check, the unpack, mkfs.erofs, the mount) for
 * bench/image-p2p's P2P_TRACE; nothing otherwise. Thread-safe. */
void agent_image_trace(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Registers task_id as a user of the image (kept on disk: survives an agent
 * restart) / removes it. An image with a user is never evicted. */
int agent_image_use(ts_image_store *st, const char *digest, const char *task_id, ts_err *err);
void agent_image_release(ts_image_store *st, const char *digest, const char *task_id);

/* Evicts unused images, least recently used first, until the store holds at
 * most target_bytes (the budget when < 0). Returns the bytes held after. */
long long agent_image_evict(ts_image_store *st, long long target_bytes);

/* Bytes the store holds now (blobs + root filesystems). */
long long agent_image_store_bytes(const ts_image_store *st);

/* The images the store holds now, at most max, into a new array *out
 * (its digest, the references it was pulled by in ts_image_ref_format's
 * form, its root's bytes on disk), for the agent's report (the controller
 * forgets what is gone: docs/images.md "Placement"); freed with
 * agent_image_list_free. Returns how many, -1 out of memory. Reads the
 * store without its lock: an image being evicted may be listed once more. */
int agent_image_store_list(const ts_image_store *st, int max, ts_sync_image **out);
void agent_image_list_free(ts_sync_image *v, int n);

/* ---- the task's bundle (image_bundle.c) ---- */

typedef struct ts_bundle_mount {
    const char *host_path, *container_path;
    bool read_write;
} ts_bundle_mount;

typedef struct ts_bundle_spec {
    const char *dir;                 /* the bundle directory (created) */
    const char *container_id;        /* the runtime's name for it */
    const ts_image *image;
    const char *const *argv;         /* NULL: the image's Entrypoint + Cmd */
    const char *const *env;          /* added to the image's Env, later wins */
    const char *path_first;          /* put first on the image's PATH (a Slurm job's srun); NULL none */
    const char *workdir;             /* NULL: the image's WorkingDir, else "/" */
    const char *user;                /* "uid[:gid]"; NULL: the image's User (numeric) or 0 */
    const ts_bundle_mount *mounts;
    size_t nmounts;
    long long memory_bytes, cpu_milli, pids_max; /* 0: no limit */
    const char *cgroups_path;        /* NULL: the runtime's default */
    const json_t *cdi_edits;         /* the allocation's CDI edits (agent_cdi_edits); NULL: no GPU */
    long long write_limit_mib;       /* its writable layer's size (agent_bundle_scratch); 0: none */
    bool terminal;                   /* the runtime makes the process a PTY in the container and
                                        relays it to its own stdio, itself a terminal (an
                                        interactive rank 0) */
} ts_bundle_spec;

/* 0 when the image at rootfs has a glibc that can load the sharing shim
 * (2.17 or later, image_glibc.c); else TS_EINVAL with why saying what the
 * image lacks, TS_EIO when its root cannot be read. */
int agent_image_glibc_check(const char *rootfs, char *why, size_t why_len);

/* Applies CDI containerEdits to a config.json (cfg): its device nodes as
 * linux.devices, an allow rule for each one's major:minor after the deny-all
 * of linux.resources.devices (no other device: no other GPU), its mounts
 * read-only binds, its env over the process's (same name replaced).
 * TS_EINVAL naming the edit that lacks a path, type or numbers. */
int agent_bundle_apply_cdi(json_t *cfg, const json_t *edits, ts_err *err);

/* Makes dir/rootfs (an overlay: the image's root filesystem below, dir/upper
 * above, or dir/scratch/upper on a filesystem of write_limit_mib where that
 * is set; a read-only bind of it where overlayfs is refused) and writes
 * dir/config.json. TS_EINVAL names the field; TS_EIO the step. */
int agent_bundle_make(const ts_bundle_spec *b, ts_err *err);

/* The capabilities a container's process has (Docker's default set), as a
 * mask of CAP_* bits: an exec session into the container keeps these and no
 * more, as its task (session.c). */
uint64_t agent_container_cap_mask(void);

/* Where in the bundles' folder a removed bundle waits for the trash thread. */
#define BUNDLE_TRASH_DIR ".trash"

/* The bundle's folder that holds its writable layer's own filesystem. */
#define BUNDLE_SCRATCH_DIR "scratch"

/* Mounts dir/scratch: an ext4 filesystem of limit_mib in a sparse file
 * dir/scratch.img, through a loop device that clears itself when it is
 * unmounted (image_scratch.c). 0, or -1 with why (no loop device, no
 * mkfs.ext4, a refused mount: the caller keeps the layer on its disk). */
int agent_bundle_scratch(const char *dir, long long limit_mib, char *why, size_t wn);

/* Mounts the file img on mnt (fstype, flags, data) through a free loop
 * device that clears itself once unmounted, read-only where flags has
 * MS_RDONLY (image_rootfs.c). 0, or TS_EIO with err naming the step. */
int agent_loop_mount(const char *img, const char *mnt, const char *fstype, unsigned long flags,
                     const char *data, ts_err *err);

/* The writable layer's size by default: most_mib, or a quarter of the
 * filesystem of state_dir where that is less (at least 16 MiB), so that no
 * one task can fill the disk that holds every task's records. */
long long agent_container_write_default(const char *state_dir, long long most_mib);

/* Unmounts the bundle's rootfs and moves the bundle directory into
 * BUNDLE_TRASH_DIR next to it, for the agent's trash thread to remove
 * (agent/trash.h): it returns at once, however many files the task left.
 * Removes it in place, waiting, only where it cannot be moved. */
void agent_bundle_remove(const char *dir);

#endif
