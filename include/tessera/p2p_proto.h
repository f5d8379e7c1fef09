/*
 * p2p_proto.h - what the agents (src/agent/p2p*.c) and the controller's
 * tracker (src/ctld/p2p.c) must agree on for a blob shared between nodes
 * (docs/images.md "Peer-to-peer"): the size of its pieces. A blob of S
 * bytes has ceil(S / TS_P2P_PIECE_BYTES) pieces; an announce's `have`
 * holds one '0'/'1' per piece, and the tracker refuses one of another
 * length, so an agent and a tracker built with different sizes do not
 * mix pieces (the agent falls back to the registry).
 */
#ifndef TESSERA_P2P_PROTO_H
#define TESSERA_P2P_PROTO_H

/* 1 MiB: the first piece is out of the registry and spreading a quarter as
 * soon as at 4 MiB, the last one's spread after the registry is done takes
 * a quarter as long, and a node that dies holding the only copy of a
 * piece costs the registry 0.025x of a 40 MB layer, not 0.1x
 * (docs/images.md: killed-origin egress 1.07x against 1.13x, no plain run
 * slower, the tracker's requests per second about the same). A build may
 * set another (-DTS_P2P_PIECE_BYTES=...) for agents and tracker alike, to
 * measure it (bench/image-p2p). */
#ifndef TS_P2P_PIECE_BYTES
#define TS_P2P_PIECE_BYTES (1LL << 20)
#endif

#endif
