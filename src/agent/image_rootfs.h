/*
 * image_rootfs.h - an image's prepared root filesystem kept as one read-only
 * EROFS image and mounted, instead of an unpacked tree (image_rootfs.c).
 * Private to src/agent/image_*.c.
 *
 *   <dir>/rootfs.erofs  the filesystem image, made once from the checked tree
 *   <dir>/rootfs/       its mount point (read-only, nodev, nosuid), shared by
 *                       every task of the image as its overlay's lower layer
 *
 * An image directory without rootfs.erofs is an unpacked tree, as before
 * (a node without mkfs.erofs or without EROFS in its kernel, or a store
 * opened with unpacked_roots). Callers hold the store's lock.
 */
#ifndef TS_AGENT_IMAGE_ROOTFS_H
#define TS_AGENT_IMAGE_ROOTFS_H

#include <stdbool.h>

#include "image.h"

#define IMAGE_ROOTFS_FILE "rootfs.erofs"

/* Whether this store packs roots: not unpacked_roots, mkfs.erofs on PATH
 * and erofs in /proc/filesystems. */
bool image_rootfs_can_pack(const ts_image_store *st);

/* Packs dir/rootfs (already unpacked and checked by image_unpack.c) into
 * dir/rootfs.erofs (lz4 when compress, else stored as is), then empties dir/rootfs, which stays as the mount
 * point (the tree is moved next to dir and removed on a thread of its own,
 * so that a task's start does not wait for it). *bytes: the image file's size on disk. TS_EIO with mkfs.erofs's
 * first line of error. */
int image_rootfs_pack(const char *dir, bool compress, long long *bytes, ts_err *err);

/* Mounts dir/rootfs.erofs read-only on dir/rootfs unless something is
 * mounted there already: straight from the file where the kernel can
 * (Linux 6.12 and later), else through a loop device that goes with the
 * mount. 0 and nothing done for an unpacked image. */
int image_rootfs_mount(const char *dir, ts_err *err);

/* The same, always through a loop device (what kernels before 6.12 need;
 * the tests call it to cover that path on a newer kernel). */
int image_rootfs_mount_loop(const char *dir, ts_err *err);

/* Whether a filesystem is mounted on dir/rootfs. */
bool image_rootfs_mounted(const char *dir);

/* Unmounts dir/rootfs if something is mounted there; a mount still busy
 * (a task's overlay above it) is detached and goes when its last user does. */
void image_rootfs_unmount(const char *dir);

/* At the store's opening (an agent started or restarted): unmounts the
 * packed images no task uses; those with users (tasks an agent restarted
 * adopts) stay mounted under their overlays. Returns how many went. */
int image_rootfs_sweep(const ts_image_store *st);

#endif
