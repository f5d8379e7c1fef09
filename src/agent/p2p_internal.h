/*
 * p2p_internal.h - what p2p_serve.c (the listener, the object), the
 * fetches (p2p_fetch.h) and the beats (p2p_tracker.c) share: the object
 * and the table of blobs being fetched now, whose verified pieces are
 * served from the fetch's own file. Everything here is under p->mu.
 */
#ifndef TS_AGENT_P2P_INTERNAL_H
#define TS_AGENT_P2P_INTERNAL_H

#include <pthread.h>
#include <stdint.h>

#include "agent/p2p.h"
#include "tessera/image_ref.h"

#define P2P_ACTIVE_MAX 32   /* blobs fetched side by side on one node */
#define P2P_KEY_HEX_MAX 129
/* Pieces one node sends at once; more askers get 503 and ask another
 * holder. Two at half the link each: a piece held by one node is held by
 * three after one piece-time, and the tree doubles from there, where
 * every asker at once would have all of them finish together at the end */
#define P2P_UPLOADS_MAX 2

typedef struct p2p_active {
    char digest[TS_IMAGE_DIGEST_MAX]; /* "": a free slot */
    int fd;                           /* a dup of the fetch's file */
    int npieces;
    uint8_t *have;                    /* npieces: 1 = verified and written */
} p2p_active;

struct ts_p2p {
    pthread_mutex_t mu;
    void *httpd;                      /* struct MHD_Daemon */
    char url[TS_P2P_URL_MAX];         /* advertised */
    char node[64], token[256], ca_file[512], store_root[512];
    char controller[512];             /* "" until the agent names one */
    char key[P2P_KEY_HEX_MAX];        /* the tracker's token key, hex; "" until told */
    bool fault_corrupt;
    p2p_active active[P2P_ACTIVE_MAX];
    long long served_bytes, refused;
    int uploads;                      /* pieces being sent now (atomic) */
    /* the beats to the tracker while this node serves (p2p_tracker.c) */
    pthread_t beat_thread;
    pthread_cond_t beat_cv;           /* on CLOCK_MONOTONIC; signalled to stop */
    bool beat_started, beat_stop;
    bool beat_holder;                 /* the tracker's last word: it names this node */
    bool beat_due;                    /* an announce since the last beat */
};

/* p2p_tracker.c: the thread that tells the tracker this node still serves
 * (started by agent_p2p_start, stopped by agent_p2p_stop); false: no
 * thread (out of resources; the askers' reports remain) */
bool agent_p2p_beats_start(ts_p2p *p);
void agent_p2p_beats_stop(ts_p2p *p);

#endif
