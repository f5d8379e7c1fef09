/*
 * fuzz_frame.c - libFuzzer target for the session streams' frame reader
 * (tessera/stream.h), which reads what a peer sent through the controller.
 *
 * The first byte of the input sets the size of the pieces the rest is fed
 * in (bytes arrive cut anywhere). Whatever the bytes, the reader must never
 * read past a piece, never return a payload longer than
 * TS_FRAME_PAYLOAD_MAX or outside its own buffer, and, once it refused a
 * head (-1), the caller's reset must leave it usable. Build with
 * -DTS_FUZZ=ON (clang) and run with scripts/run-fuzz.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tessera/stream.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t piece = 1 + data[0];
    data++;
    size--;
    static ts_frame_reader r;
    memset(&r, 0, sizeof r);
    size_t off = 0;
    while (off < size) {
        size_t n = size - off < piece ? size - off : piece;
        size_t p = 0;
        while (p < n) {
            size_t used, len;
            int type;
            const uint8_t *pl;
            int rc = ts_frame_feed(&r, data + off + p, n - p, &used, &type, &pl, &len);
            if (used > n - p)
                abort();
            p += used;
            if (rc < 0) {
                ts_frame_next(&r); /* a refused head: the caller resets */
                continue;
            }
            if (rc == 0)
                break;
            if (len > TS_FRAME_PAYLOAD_MAX || pl < r.buf ||
                pl + len > r.buf + sizeof r.buf || type != r.buf[0])
                abort();
            ts_frame_next(&r);
        }
        off += n;
    }
    return 0;
}
