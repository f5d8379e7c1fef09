/*
 * image_stream.c - an image's layers unpacked as their pieces arrive.
 *
 * A layer fetched piece by piece (p2p.h) is written out of order, but the
 * fetch tells which prefix of it is written in order (the prefix its digest
 * is taken over). A thread of the pull follows that prefix with the
 * hostile-layer unpacker (agent_image_unpack_stream), so that the unpack
 * ends about when the last piece lands instead of starting then: on a
 * gang's nodes, which all finish their transfer at the same moment, the
 * unpack no longer waits for it on a machine's few cores.
 *
 * What it reads is not verified yet, so it unpacks into a staging tree of
 * its own, <root>/tmp/stream-<hex>-XXXXXX/rootfs, never the image's: the
 * unpacker hashes every byte it read, to the layer's end, and a layer whose
 * bytes do not have its digest (a lying peer's piece, a fetch that failed)
 * has the whole staging tree removed; the pull then unpacks the verified
 * blobs after the fetch, as it did before streaming. Only a tree whose
 * every layer was verified so is renamed to become the image's root
 * (image_store_prepare), and only then packed and mounted. Layers that did
 * not come piece by piece (small ones, or already in the store) are applied
 * to the staging tree from their verified blob as soon as they are there,
 * in order.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "image_store.h"

/* The fetch's word (ts_p2p_in_order): [0, bytes) are written. */
static void stream_on_bytes(void *ctx, long long bytes)
{
    ts_unpack_feed *f = ctx;
    pthread_mutex_lock(&f->mu);
    if (bytes > f->avail)
        f->avail = bytes;
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
}

static void *stream_unpack(void *arg)
{
    image_stream *s = arg;
    s->rc = agent_image_unpack_stream(s->root_fd, s->fd, &s->feed, s->digest, s->limits,
                                      &s->stats, &s->err);
    return NULL;
}

/* The staging tree goes: an unverified layer is in it, or it is not needed. */
static void stream_drop(image_stream *s)
{
    if (s->root_fd >= 0)
        close(s->root_fd);
    s->root_fd = -1;
    if (s->dir[0])
        image_rm_tree(s->dir);
    s->dir[0] = 0;
}

void image_stream_open(ts_image_store *st, const char *image_digest, image_stream *s)
{
    memset(s, 0, sizeof *s);
    s->root_fd = -1;
    s->limits = &st->limits;
    s->in_order = (ts_p2p_in_order){stream_on_bytes, &s->feed};
    snprintf(s->dir, sizeof s->dir, "%s/tmp/stream-%.16s-XXXXXX", st->root, image_digest + 7);
    char root[sizeof s->dir + 16];
    if (!mkdtemp(s->dir)) {
        s->dir[0] = 0; /* unpacked after the fetch, as without streaming */
        return;
    }
    snprintf(root, sizeof root, "%s/rootfs", s->dir);
    if (mkdir(root, 0755) == 0)
        s->root_fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (s->root_fd < 0)
        stream_drop(s);
}

const ts_p2p_in_order *image_stream_follow(image_stream *s, size_t layer, int fd,
                                           const char *digest, long long size)
{
    if (!s || !s->dir[0] || s->next != layer || s->running)
        return NULL;
    pthread_mutex_init(&s->feed.mu, NULL);
    pthread_cond_init(&s->feed.cv, NULL);
    s->feed.avail = 0;
    s->feed.size = size;
    s->feed.ended = s->feed.ok = false;
    s->fd = fd;
    s->size = size;
    snprintf(s->digest, sizeof s->digest, "%s", digest);
    s->rc = 0;
    if (pthread_create(&s->thread, NULL, stream_unpack, s) != 0) {
        pthread_mutex_destroy(&s->feed.mu);
        pthread_cond_destroy(&s->feed.cv);
        return NULL; /* this layer, and the rest, unpacked from the blobs */
    }
    s->running = true;
    return &s->in_order;
}

void image_stream_end(image_stream *s, bool ok)
{
    if (!s || !s->running)
        return;
    pthread_mutex_lock(&s->feed.mu);
    s->feed.ended = true;
    s->feed.ok = ok;
    pthread_cond_broadcast(&s->feed.cv);
    pthread_mutex_unlock(&s->feed.mu);
    pthread_join(s->thread, NULL);
    s->running = false;
    pthread_mutex_destroy(&s->feed.mu);
    pthread_cond_destroy(&s->feed.cv);
    agent_image_trace("layer %.19s unpacked as it came (rc %d%s%s)", s->digest, s->rc,
                      s->rc ? ": " : "", s->rc ? s->err.msg : "");
    if (!ok || s->rc) {
        stream_drop(s);
        return;
    }
    s->next++;
    s->layer_bytes += s->size;
}

void image_stream_catch_up(image_stream *s, size_t layer, const char *blob)
{
    if (!s || !s->dir[0] || s->next != layer)
        return;
    struct stat sb;
    ts_err err = {0};
    if (stat(blob, &sb) != 0 ||
        agent_image_unpack_layer(s->root_fd, blob, s->limits, &s->stats, &err) != 0) {
        stream_drop(s); /* the unpack after the fetch says what was wrong */
        return;
    }
    s->next++;
    s->layer_bytes += (long long)sb.st_size;
}

bool image_stream_take(image_stream *s, size_t nlayers, const char *dest,
                       ts_unpack_stats *stats, long long *layer_bytes)
{
    if (!s || !s->dir[0] || s->next != nlayers)
        return false;
    close(s->root_fd);
    s->root_fd = -1;
    char root[sizeof s->dir + 16];
    snprintf(root, sizeof root, "%s/rootfs", s->dir);
    if (rename(root, dest) != 0) {
        stream_drop(s);
        return false;
    }
    *stats = s->stats;
    *layer_bytes = s->layer_bytes;
    stream_drop(s); /* the empty staging folder */
    return true;
}

void image_stream_close(image_stream *s)
{
    if (!s)
        return;
    image_stream_end(s, false);
    stream_drop(s);
}
