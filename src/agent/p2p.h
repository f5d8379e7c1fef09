/*
 * p2p.h - image blobs shared between the nodes' agents (docs/images.md
 * "Peer-to-peer").
 *
 * A blob of an image is cut into pieces of TS_P2P_PIECE_BYTES. A node that
 * fetches a blob asks the controller's tracker (POST /v1/agent/p2p, the
 * node credential) which peers hold or are fetching which pieces; it takes
 * a piece from a peer when one holds it, and from the registry only when
 * the tracker grants it a piece that nobody holds or is fetching, so a
 * gang's nodes fetch each piece from the registry about once. The first
 * node to fetch a piece from the registry reports its sha256 to the
 * tracker; a piece from a peer is checked against it before use, and the
 * whole blob against its manifest digest before it enters the store. A
 * peer that sends a bad piece, refuses or dies mid-transfer is avoided for
 * the rest of the blob and reported to the tracker; when the whole blob
 * still does not match (a piece's reported hash lied), every piece that
 * came from a peer is fetched again from the registry. The registry is the
 * fallback for everything: no tracker, no peer, a stall.
 *
 * Each agent serves the pieces it holds (verified: a finished blob of the
 * store, or the verified pieces of a blob it is fetching now) on a
 * listener of its own (p2p_serve.c) to peers that present a token the
 * tracker issued to them for that blob (HMAC-SHA256 under a key the
 * tracker hands to the nodes, binding the asking node, the blob and an
 * expiry). While the tracker names it as a holder, an agent tells it every
 * second that it still serves (p2p_tracker.c): a node that powers off is
 * left out within seconds, where its askers, whose SYNs it drops as a busy
 * node's link does, took 30 s each to give up on it.
 *
 * Ownership: agent_p2p_start allocates, agent_p2p_stop frees (after every fetch
 * using it returned). Thread-safe: fetches run on the image pulls' threads
 * side by side; the listener answers on its own thread. Nothing prints.
 */
#ifndef TS_AGENT_P2P_H
#define TS_AGENT_P2P_H

#include <stdbool.h>

#include "tessera/error.h"
#include "tessera/p2p_proto.h"

#define TS_P2P_MIN_BLOB_BYTES (1LL << 20) /* smaller blobs: straight from the registry */
#define TS_P2P_URL_MAX 256

typedef struct ts_p2p ts_p2p;

typedef struct ts_p2p_config {
    const char *listen;       /* ADDR:PORT of the peer listener (port 0: any) */
    const char *advertise;    /* the URL peers reach it at; NULL: http://ADDR:PORT bound */
    const char *node;         /* this node's name */
    const char *token;        /* the node credential's secret (for the tracker) */
    const char *ca_file;      /* for an https controller; NULL: the system's */
    const char *store_root;   /* the image store (blobs/sha256/<hex>) */
    bool fault_corrupt;       /* fault injection: serve every piece with a byte flipped */
} ts_p2p_config;

typedef struct ts_p2p_stats {
    long long from_origin;    /* bytes fetched from the registry */
    long long from_peers;     /* bytes fetched from peers and kept */
    long long refetched;      /* bytes fetched again after a bad piece or a bad blob */
    int bad_peers;            /* peers avoided (a bad piece, an error, a dead peer) */
    bool no_tracker;          /* the tracker was not reachable: registry only */
} ts_p2p_stats;

/* Reads len bytes at off of the blob from the registry into buf (exactly
 * len, else an error). Given by the registry client (image_pull.c). */
typedef int (*ts_p2p_origin_fn)(void *ctx, long long off, long long len, char *buf,
                                ts_err *err);

/* May be given to agent_p2p_fetch (NULL: none): told, each time it grows,
 * how many bytes of fd from its start are written (the pieces held, in
 * order; not verified: the whole blob's digest is checked after its last
 * piece, and a blob that fails it has pieces written again), so that a
 * reader can follow the transfer (image_stream.c unpacks a layer so). Told
 * on a fetch's worker thread, holding none of the fetch's locks but the
 * one of its digest (one worker at a time): it must not block. */
typedef struct ts_p2p_in_order {
    void (*fn)(void *ctx, long long bytes);
    void *ctx;
} ts_p2p_in_order;

int agent_p2p_start(const ts_p2p_config *cfg, ts_p2p **out, ts_err *err);
void agent_p2p_stop(ts_p2p *p);
/* The controller the tracker is asked at (the agent's current one). */
void agent_p2p_set_controller(ts_p2p *p, const char *url);
/* The URL peers reach this node's listener at. */
const char *agent_p2p_url(const ts_p2p *p);

/* Fetches the blob digest of size bytes into fd (a new file of the
 * caller's), pieces from peers and the registry as above, each verified; 0
 * when fd holds exactly the blob (its sha256 checked). rate_bytes_s > 0
 * caps the download rate (a prefetch for a job that is only waiting).
 * TS_EIO: the registry failed where it was needed; TS_EINVAL: the
 * registry's own bytes do not match the digest. */
int agent_p2p_fetch(ts_p2p *p, const char *digest, long long size, int fd,
                 ts_p2p_origin_fn origin, void *origin_ctx, long long rate_bytes_s,
                 const ts_p2p_in_order *in_order, ts_p2p_stats *stats, ts_err *err);
/* The blob is in the store now (renamed into place) or was dropped: tells
 * the tracker it holds all of it (when held), stops serving from fd. */
void agent_p2p_release(ts_p2p *p, const char *digest, bool held);

/* ---- shared by p2p_fetch.c and p2p_serve.c ---- */

/* The HMAC token text for (node, holder, digest, expiry) under key (hex)
 * into out (65 bytes): node may fetch the blob from holder until expiry
 * (holder NULL: from any holder, the form of older trackers); false when
 * the key is not hex. */
bool p2p_token_mac(const char *key_hex, const char *node, const char *holder, const char *digest,
                   long long expiry, char out[65]);

#endif
