/*
 * image_place.h - what the scheduling cycle knows about container images:
 * which image each job runs in and how much of it each node already holds,
 * so that placement can prefer, among placements it finds equal, the nodes
 * where the job starts without waiting for a pull (docs/scheduler.md,
 * "Images").
 *
 * The preference never outranks packing or topology: it orders only nodes
 * the placement policy scores the same (the scorer's equal buckets; for a
 * gang, nodes with the same free GPUs and the same growth of the
 * fragmentation measure). The price of a node is the seconds its pull would
 * take, bytes missing over the node's bandwidth, not megabytes clipped at a
 * cap, so a 10 GB image held by one node of 64 weighs what it costs.
 *
 * Ownership: the shell owns the table and every array it points to; the
 * scheduler borrows them until the next ts_sched_set_images (or the
 * scheduler's end). Not thread-safe beyond the scheduler's own rule.
 */
#ifndef TESSERA_IMAGE_PLACE_H
#define TESSERA_IMAGE_PLACE_H

#include <stdint.h>

#include "tessera/cycle.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 10 Gbit/s: what a node pulls at when the shell names no bandwidth. */
#define TS_IMAGE_BW_DEFAULT_BYTES_S 1250000000.0

typedef struct ts_image_table {
    int nimages;                 /* images 0..nimages-1; a job's image is 1 + index */
    const int64_t *bytes;        /* [nimages] each image's size, > 0 */
    /* [nimages * nnodes] bytes of image i node n holds (its layers present,
     * or fetched so far), index i * nnodes + n, 0..bytes[i]; NULL: none */
    const int64_t *held;
    const double *bw_bytes_s;    /* [nnodes] each node's pull rate, > 0; NULL: the default */
} ts_image_table;

/* Replaces the table the cycle reads (borrowed; NULL clears it); call it
 * again after changing the table's contents in place. TS_EINVAL
 * naming the entry: "images[3].bytes: must be > 0", "images[1].held[7]:
 * 12 bytes is more than the image's 10". A job whose image is 0 or past
 * the table gets no preference. */
int ts_sched_set_images(ts_sched *s, const ts_image_table *t, ts_err *err);

/* Seconds before image (0-based) is whole on node: the bytes it lacks over
 * the node's bandwidth. 0 for an index outside the table. */
double ts_image_pull_s(const ts_image_table *t, int nnodes, int image, int node);

#ifdef __cplusplus
}
#endif
#endif
