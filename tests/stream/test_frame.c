/*
 * test_frame.c - the session streams' frame codec (tessera/stream.h).
 *
 * The CLI and the agent read frames from bytes that arrive cut anywhere (the
 * controller relays bytes, TCP and TLS cut them again): every frame must come
 * out whole and in order whatever the cuts, an empty frame included, and a
 * head announcing more than TS_FRAME_PAYLOAD_MAX must be refused rather than
 * trusted (a peer's length is never a size to copy).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "tessera/stream.h"

#define FRAMES 200
#define SEED 12345u

static unsigned next_rand(unsigned *s)
{
    *s = *s * 1103515245u + 12345u;
    return (*s >> 16) & 0x7fff;
}

/* FRAMES frames of random types and sizes, cut into random pieces: each
 * comes out whole and in order. */
static void frames_survive_any_cut(void **state)
{
    (void)state;
    unsigned s = SEED;
    size_t cap = FRAMES * (TS_FRAME_HEAD_BYTES + 2048), n = 0;
    uint8_t *wire = malloc(cap);
    int types[FRAMES];
    size_t lens[FRAMES];
    assert_non_null(wire);
    for (int i = 0; i < FRAMES; i++) {
        types[i] = "dewsx!"[next_rand(&s) % 6];
        lens[i] = i % 17 == 0 ? 0 : next_rand(&s) % 2048;
        ts_frame_head(wire + n, types[i], lens[i]);
        n += TS_FRAME_HEAD_BYTES;
        for (size_t k = 0; k < lens[i]; k++)
            wire[n + k] = (uint8_t)(i + k);
        n += lens[i];
    }
    for (int round = 0; round < 20; round++) {
        ts_frame_reader *r = calloc(1, sizeof *r);
        assert_non_null(r);
        size_t off = 0;
        int got = 0;
        while (off < n) {
            size_t piece = 1 + next_rand(&s) % (round < 10 ? 7 : 3000);
            if (piece > n - off)
                piece = n - off;
            size_t p = 0;
            while (p < piece) {
                size_t used, len;
                int type;
                const uint8_t *pl;
                int rc = ts_frame_feed(r, wire + off + p, piece - p, &used, &type, &pl, &len);
                p += used;
                assert_true(rc >= 0);
                if (rc == 0)
                    break;
                assert_true(got < FRAMES);
                assert_int_equal(type, types[got]);
                assert_int_equal(len, lens[got]);
                for (size_t k = 0; k < len; k++)
                    assert_int_equal(pl[k], (uint8_t)(got + k));
                got++;
                ts_frame_next(r);
            }
            off += piece;
        }
        /* nothing is held back: a frame is returned as its last byte comes */
        size_t used, len;
        int type;
        const uint8_t *pl;
        while (ts_frame_feed(r, NULL, 0, &used, &type, &pl, &len) == 1) {
            got++;
            ts_frame_next(r);
        }
        assert_int_equal(got, FRAMES);
        free(r);
    }
    free(wire);
}

/* A head announcing more than the largest payload is refused. */
static void oversized_head_refused(void **state)
{
    (void)state;
    ts_frame_reader *r = calloc(1, sizeof *r);
    assert_non_null(r);
    uint8_t h[TS_FRAME_HEAD_BYTES];
    ts_frame_head(h, TS_FRAME_DATA, TS_FRAME_PAYLOAD_MAX + 1);
    size_t used, len;
    int type;
    const uint8_t *pl;
    assert_int_equal(ts_frame_feed(r, h, sizeof h, &used, &type, &pl, &len), -1);
    ts_frame_next(r);
    ts_frame_head(h, TS_FRAME_DATA, TS_FRAME_PAYLOAD_MAX);
    assert_int_equal(ts_frame_feed(r, h, sizeof h, &used, &type, &pl, &len), 0);
    free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(frames_survive_any_cut),
        cmocka_unit_test(oversized_head_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
