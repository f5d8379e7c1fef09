/*
 * imgloc.h - internal: which node holds which image, learned from the
 * agents' reports, and the image table each cycle places with (imgloc.c,
 * docs/images.md "Placement").
 */
#ifndef TS_CTLD_IMGLOC_H
#define TS_CTLD_IMGLOC_H

#include <stdint.h>

#include <jansson.h>

#include "ctld/ctld.h"
#include "tessera/agent_proto.h"

/* At start (TS_ENOMEM) and shutdown. */
int ctld_imgloc_open(ctld *c);
void ctld_imgloc_close(ctld *c);
/* node holds done of image ref's total bytes (done < 0: all of it; total
 * <= 0: size unknown). Any thread; takes only its own lock. */
void ctld_imgloc_note(ctld *c, int node, const char *ref, int64_t done, int64_t total);
/* node's agent listed its image store (a sync's "images", decoded: every
 * image it holds): the node holds every listed reference whole and none
 * other, so an image it evicted is forgotten there. The caller leaves out
 * a sync that does not list (nothing changes). Any thread; takes only its
 * own lock. */
void ctld_imgloc_store(ctld *c, int node, const ts_sync_image *images, int nimages);
/* The cycle thread, under mu, before the cycle: sets wv[k].image for the
 * waiting jobs wj[k] whose image some node holds, and the scheduler's image
 * table (ts_sched_set_images), valid until the next call. */
void ctld_imgloc_cycle(ctld *c, cjob *const *wj, ts_job *wv, int nw);
/* A node's pull rate in bytes/s: its network.bandwidth_mbit from the
 * cluster file, else TS_IMAGE_BW_DEFAULT_BYTES_S. */
double ctld_node_bw_bytes_s(const ts_node *n);

#endif
