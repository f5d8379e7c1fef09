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

/* 4 MiB: a piece leaves a 100-Mbit/s link in a third of a second. A build
 * may set another (-DTS_P2P_PIECE_BYTES=...) for agents and tracker alike,
 * to measure it (bench/image-p2p). */
#ifndef TS_P2P_PIECE_BYTES
#define TS_P2P_PIECE_BYTES (4LL << 20)
#endif

#endif
