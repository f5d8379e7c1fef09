/*
 * stream.h - interactive sessions' byte streams (docs/interactive.md): the
 * frame codec the CLI and the agent speak end to end, and the client side of
 * a stream, an HTTP request upgraded (101 Switching Protocols) to a raw
 * byte stream, which both the CLI and the agent open towards the
 * controller. The controller splices the two connections and reads no
 * frame: it relays bytes.
 *
 * A frame: one type byte, the payload's length in 3 bytes (big-endian),
 * the payload (at most TS_FRAME_PAYLOAD_MAX bytes).
 *
 * Ownership: a ts_stream is made by ts_stream_open and freed by
 * ts_stream_close; one thread uses it at a time. Nothing prints.
 */
#ifndef TS_STREAM_H
#define TS_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "tessera/error.h"

#define TS_FRAME_HEAD_BYTES 4
#define TS_FRAME_PAYLOAD_MAX 16384
/* The Upgrade token of a session stream. */
#define TS_STREAM_PROTOCOL "tessera-stream/1"
/* The header carrying a session's one-time secret (the agent's side). */
#define TS_STREAM_SECRET_HEADER "X-Tessera-Session-Secret"

enum ts_frame_type {
    TS_FRAME_DATA = 'd',   /* bytes: stdin towards the process, output back */
    TS_FRAME_EOF = 'e',    /* no more data from this side */
    TS_FRAME_RESIZE = 'w', /* 4 bytes: rows, cols (big-endian 16-bit) */
    TS_FRAME_SIGNAL = 's', /* 1 byte: a signal number for the remote process group */
    TS_FRAME_EXIT = 'x',   /* text: the exit status ("0".."255", 128+N for signal N) */
    TS_FRAME_ERROR = '!',  /* text: why the session could not start or ended */
};

/* Writes a frame's head for a payload of len bytes into h. */
static inline void ts_frame_head(uint8_t h[TS_FRAME_HEAD_BYTES], int type, size_t len)
{
    h[0] = (uint8_t)type;
    h[1] = (uint8_t)(len >> 16);
    h[2] = (uint8_t)(len >> 8);
    h[3] = (uint8_t)len;
}

/* Collects frames from bytes as they come. */
typedef struct ts_frame_reader {
    uint8_t buf[TS_FRAME_HEAD_BYTES + TS_FRAME_PAYLOAD_MAX];
    size_t have;
} ts_frame_reader;

/* Takes up to n bytes of p into r (how many in *used); 1 with a whole
 * frame (its type, payload and length) when one is complete, to be
 * consumed by ts_frame_next before feeding more; 0 when more bytes are
 * needed; -1 when the head announces more than TS_FRAME_PAYLOAD_MAX. */
int ts_frame_feed(ts_frame_reader *r, const uint8_t *p, size_t n, size_t *used, int *type,
                  const uint8_t **payload, size_t *len);
/* Drops the frame ts_frame_feed returned. */
void ts_frame_next(ts_frame_reader *r);

typedef struct ts_stream ts_stream;

typedef struct ts_stream_target {
    const char *url;     /* the controller, "http(s)://host:port" */
    const char *token;   /* the bearer secret */
    const char *ca_file; /* NULL or "": the system's */
    const char *secret;  /* a session's secret (the agent's side), NULL none */
} ts_stream_target;

/* POSTs body (JSON) to path and upgrades the connection. 0 and *out; else
 * TS_EIO (no connection, *status 0: the message says why) or TS_EINVAL
 * (refused: *status the HTTP status, the controller's message in err). */
int ts_stream_open(const ts_stream_target *t, const char *path, const char *body,
                   double timeout_s, ts_stream **out, int *status, ts_err *err);
/* The descriptor to poll for reading and writing. */
int ts_stream_fd(const ts_stream *s);
/* Bytes may be there that poll does not see: read past the answer's head,
 * or held by TLS (the last read got some): read again before polling. */
bool ts_stream_pending(const ts_stream *s);
/* Reads what is there: > 0 bytes, 0 at the end, -1 nothing now (EAGAIN),
 * -2 an error. Never blocks. */
ssize_t ts_stream_read(ts_stream *s, void *buf, size_t n);
/* Writes all of p within timeout_s: 0, or -1 (closed, error or timeout). */
int ts_stream_write(ts_stream *s, const void *p, size_t n, double timeout_s);
/* One frame: 0 or -1 as ts_stream_write. */
int ts_stream_frame(ts_stream *s, int type, const void *payload, size_t len, double timeout_s);
void ts_stream_close(ts_stream *s);

#endif
