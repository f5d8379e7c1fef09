/*
 * replay_images.h - internal: the replay's pull-time model of container
 * images (replay_images.c), read by the `tessera-img` policies
 * (replay_core.c). Single-threaded; the policy owns the model.
 */
#ifndef TS_REPLAY_IMAGES_H
#define TS_REPLAY_IMAGES_H

#include <stdbool.h>
#include <stdio.h>

#include "tessera/cycle.h"
#include "tessera/image_place.h"
#include "tessera/model.h"

typedef struct replay_images replay_images;

/* Images, sizes and each job's image (a fixed seed); NULL out of memory. */
replay_images *replay_images_new(int njobs, int nnodes);
void replay_images_free(replay_images *m);
/* Job j's image as ts_job.image wants it (1 + index), 0 for none. */
int replay_images_of(const replay_images *m, int job);
/* What the nodes hold now, for ts_sched_set_images (owned by m). */
const ts_image_table *replay_images_table(const replay_images *m);
/* job started on allocs[0..ntasks) (queued: it had waited in the queue
 * before this start): its nodes hold its image from now; returns the
 * seconds its start waits for the image (the slowest node), counted in the
 * figures. */
double replay_images_start(replay_images *m, int job, const ts_alloc *allocs, int ntasks,
                           bool queued, double now_s);
/* The decision d names where images are fetched ahead (d->prefetch, its
 * jobs the replay's jobs wi[]): those nodes pull them from now, sharing the
 * prefetch share of their bandwidth; prefetches it no longer names stop,
 * their bytes kept. */
void replay_images_prefetch(replay_images *m, const ts_decision *d, const int *wi,
                            double now_s);
/* Prefetches' bytes brought up to now_s (before the table is read). */
void replay_images_settle(replay_images *m, double now_s);
/* One line of figures to f (sorts its waits). */
void replay_images_print(replay_images *m, FILE *f, const char *policy);

#endif
