/*
 * p2p_internal.h - what p2p_serve.c (the listener, the object) and
 * p2p_fetch.c (the fetches) share: the object and the table of blobs being
 * fetched now, whose verified pieces are served from the fetch's own file.
 * Everything here is under p->mu.
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
};

#endif
