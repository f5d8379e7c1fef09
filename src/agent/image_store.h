/*
 * image_store.h - the node's image store, as the registry client
 * (image_pull.c) uses it: where a blob or an image lives, the store's lock,
 * and making an image's root filesystem from its verified layers. Private to
 * src/agent/image_*.c; the agent uses image.h.
 */
#ifndef TS_AGENT_IMAGE_STORE_H
#define TS_AGENT_IMAGE_STORE_H

#include "image.h"

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

/* Makes images/<hex> from the manifest (its raw bytes) whose config and
 * layer blobs are in the store: the layers unpacked in order into rootfs,
 * then the directory renamed into place in one step. */
int image_store_prepare(ts_image_store *st, const char *digest, const char *manifest,
                        size_t manifest_len, const char *config_digest,
                        const char *const *layers, size_t nlayers, ts_image *out, ts_err *err);

/* Adds ref (ts_image_ref_format's form) to the references the image was
 * pulled by, for agent_image_store_list; the store's lock held. */
void image_store_note_ref(ts_image_store *st, const char *digest, const char *ref);

/* Removes path recursively without following links. */
void image_rm_tree(const char *path);

/* Whether the image directory dir has a user (a task, a pull). */
bool image_in_use(const char *dir);

/* agent_image_evict with the store's lock already held. */
long long image_store_evict_locked(ts_image_store *st, long long target_bytes);

#endif
