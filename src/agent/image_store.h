/*
 * image_store.h - the node's image store, as the registry client
 * (image_pull.c) uses it: where a blob or an image lives, the store's lock,
 * and making an image's root filesystem from its verified layers. Private to
 * src/agent/image_*.c; the agent uses image.h.
 */
#ifndef TS_AGENT_IMAGE_STORE_H
#define TS_AGENT_IMAGE_STORE_H

#include "image.h"
#include "agent/p2p.h"

/* <root>/blobs/sha256/<hex>; <root>/images/<hex>; <root>/tmp. */
void image_blob_path(const ts_image_store *st, const char *digest, char *out, size_t n);
void image_dir(const ts_image_store *st, const char *digest, char *out, size_t n);

/* The store's lock (flock on <root>/lock), in every thread and process:
 * held while the store changes (an image found, prepared or evicted, a use
 * registered), never while a registry answers. Returns the fd to give to
 * image_store_unlock, or < 0. */
int image_store_lock(const ts_image_store *st, ts_err *err);
void image_store_unlock(int fd);

/* Fills out for an image already prepared (and marks it used now); false
 * when the image is not there. */
bool image_store_find(ts_image_store *st, const char *digest, ts_image *out);

/* ---- layers unpacked as they arrive (image_stream.c) ---- */

/* One pull's staging tree, used by the pulling thread and, while a layer is
 * followed, by its unpack thread (which alone touches root_fd and stats
 * then). */
typedef struct image_stream {
    char dir[760];              /* <root>/tmp/stream-...; "": none (given up, or taken) */
    int root_fd;                /* dir/rootfs */
    size_t next;                /* layers [0, next) applied to it, each verified */
    long long layer_bytes;      /* the sizes of those layers' blobs */
    ts_unpack_stats stats;
    const ts_unpack_limits *limits;
    ts_p2p_in_order in_order;   /* given to the layer's fetch: it advances feed */
    /* the layer followed now */
    ts_unpack_feed feed;
    pthread_t thread;
    bool running;
    int fd, rc;
    long long size;
    char digest[TS_IMAGE_DIGEST_MAX];
    ts_err err;
} image_stream;

/* A staging tree for the image's layers; without one (dir ""), every
 * function below does nothing and the layers are unpacked after the fetch. */
void image_stream_open(ts_image_store *st, const char *image_digest, image_stream *s);
/* Layer number layer (0 first) is about to be fetched into fd: its unpack
 * starts, following the fetch, when it is the next to apply. Returns what to
 * give agent_p2p_fetch, or NULL (not followed). */
const ts_p2p_in_order *image_stream_follow(image_stream *s, size_t layer, int fd,
                                           const char *digest, long long size);
/* The followed layer's fetch returned (ok: the blob verified): waits for its
 * unpack, before fd is closed. A failed unpack or fetch drops the staging tree. */
void image_stream_end(image_stream *s, bool ok);
/* Layer number layer is in the store (blob: its verified file): applied
 * now when it is the next and was not followed. */
void image_stream_catch_up(image_stream *s, size_t layer, const char *blob);
/* When all nlayers are applied: the tree renamed to dest (a path on the same
 * filesystem), with its unpack's stats and the layers' blob bytes; true
 * when taken. */
bool image_stream_take(image_stream *s, size_t nlayers, const char *dest,
                       ts_unpack_stats *stats, long long *layer_bytes);
/* Ends what is followed and removes the staging tree if still there. */
void image_stream_close(image_stream *s);

/* Makes images/<hex> from the manifest (its raw bytes) whose config and
 * layer blobs are in the store: the tree s staged when it holds every layer
 * (s may be NULL), else the layers unpacked in order into rootfs; then the
 * directory renamed into place in one step. */
int image_store_prepare(ts_image_store *st, const char *digest, const char *manifest,
                        size_t manifest_len, const char *config_digest,
                        const char *const *layers, size_t nlayers, image_stream *s,
                        ts_image *out, ts_err *err);

/* Adds ref (ts_image_ref_format's form) to the references the image was
 * pulled by, for agent_image_store_list; the store's lock held. */
void image_store_note_ref(ts_image_store *st, const char *digest, const char *ref);

/* Removes path recursively without following links. */
void image_rm_tree(const char *path);

/* Each image's folder in the store (<root>/images/<64 hex digits>), in
 * directory order: one(dir, hex, u) with its path and its digest's hex,
 * until one returns false. Names of another length are not images and are
 * passed over. */
void image_store_each(const ts_image_store *st,
                      bool (*one)(const char *dir, const char *hex, void *u), void *u);

/* Whether the image directory dir has a user (a task, a pull). */
bool image_in_use(const char *dir);

/* agent_image_evict with the store's lock already held. */
long long image_store_evict_locked(ts_image_store *st, long long target_bytes);

#endif
