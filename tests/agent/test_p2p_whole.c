/*
 * test_p2p_whole.c - the check of a blob fetched piece by piece
 * (src/agent/p2p_fetch.c, docs/images.md "Peer-to-peer"): the blob's
 * digest is taken as its pieces come, in order (a piece that comes early
 * waits for those before it), so that once the last piece is held the check
 * reads only what is not yet in it; a blob whose bytes do not have its
 * digest still fails, and workers hashing side by side leave every piece
 * in the digest once.
 */
#define _GNU_SOURCE /* before any header: p2p_fetch.c's own */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "agent/p2p_fetch.c" /* its put_piece, hash_advance, whole_ok */

#define NPIECES 5
#define SIZE (4 * TS_P2P_PIECE_BYTES + 1000) /* a short last piece */

typedef struct fx {
    struct ts_p2p p;
    ts_p2p_stats st;
    uint8_t have[NPIECES];
    char path[64], digest[TS_IMAGE_DIGEST_MAX];
    char *data;
    fetch f;
    worker w;
} fx;

static int setup(void **state)
{
    fx *x = test_calloc(1, sizeof *x);
    pthread_mutex_init(&x->p.mu, NULL);
    x->data = malloc(SIZE);
    assert_non_null(x->data);
    for (long long i = 0; i < SIZE; i++)
        x->data[i] = (char)(i * 7919 % 251);
    agent_p2p_sha(x->data, SIZE, x->digest);
    snprintf(x->path, sizeof x->path, "/tmp/tessera-p2p-whole-XXXXXX");
    int fd = mkstemp(x->path);
    assert_true(fd >= 0);
    x->f = (fetch){.p = &x->p, .digest = x->digest, .size = SIZE, .npieces = NPIECES,
                   .fd = fd, .slot = -1, .have = x->have, .st = &x->st};
    pthread_mutex_init(&x->f.mu, NULL);
    pthread_mutex_init(&x->f.hash_mu, NULL);
    gnutls_hash_hd_t h;
    assert_int_equal(gnutls_hash_init(&h, GNUTLS_DIG_SHA256), 0);
    x->f.whole = h;
    x->w = (worker){.f = &x->f, .buf = malloc(TS_P2P_PIECE_BYTES + 1),
                    .buf_max = TS_P2P_PIECE_BYTES};
    assert_non_null(x->w.buf);
    *state = x;
    return 0;
}

static int teardown(void **state)
{
    fx *x = *state;
    if (x->f.whole)
        gnutls_hash_deinit((gnutls_hash_hd_t)x->f.whole, NULL);
    close(x->f.fd);
    unlink(x->path);
    free(x->w.buf);
    free(x->data);
    test_free(x);
    return 0;
}

/* Piece i of the blob written as a worker writes it, flipped when bad. */
static void put(fx *x, worker *w, int i, bool bad)
{
    long long off, len;
    agent_p2p_piece_span(&x->f, i, &off, &len);
    memcpy(w->buf, x->data + off, (size_t)len);
    if (bad)
        w->buf[len / 2] ^= 0x20;
    ts_err err = {0};
    assert_int_equal(put_piece(&x->f, i, w->buf, len, &err), 0);
    hash_advance(w);
}

static void digest_taken_in_order_as_the_pieces_come(void **state)
{
    fx *x = *state;
    put(x, &x->w, 2, false);
    put(x, &x->w, 1, false);
    assert_int_equal(x->f.hashed, 0); /* piece 0 is not there: nothing yet */
    put(x, &x->w, 0, false);
    assert_int_equal(x->f.hashed, 3);
    put(x, &x->w, 4, false);
    assert_int_equal(x->f.hashed, 3);
    put(x, &x->w, 3, false);
    assert_int_equal(x->f.hashed, NPIECES);
    /* the check reads nothing again: what is in the file now is not in it */
    long long off, len;
    agent_p2p_piece_span(&x->f, 0, &off, &len);
    assert_int_equal(pwrite(x->f.fd, "?", 1, off), 1);
    assert_true(whole_ok(&x->w));
    assert_null(x->f.whole);
    /* a second check (after a refetch) reads the whole file */
    assert_false(whole_ok(&x->w));
}

static void a_bad_piece_fails_the_check(void **state)
{
    fx *x = *state;
    put(x, &x->w, 4, false);
    put(x, &x->w, 0, false);
    put(x, &x->w, 1, true);
    put(x, &x->w, 2, false);
    assert_int_equal(x->f.hashed, 3);
    put(x, &x->w, 3, false);
    assert_false(whole_ok(&x->w));
    /* the fallback's pieces come again from the registry: checked in full */
    long long off, len;
    agent_p2p_piece_span(&x->f, 1, &off, &len);
    assert_int_equal(pwrite(x->f.fd, x->data + off, (size_t)len, off), len);
    assert_true(whole_ok(&x->w));
}

static void a_failed_read_leaves_the_check_to_the_whole_file(void **state)
{
    fx *x = *state;
    /* as after a failed read: whatever the digest could not take, the
     * check at the end takes from the file */
    put(x, &x->w, 0, false);
    x->f.hash_failed = true;
    for (int i = 1; i < NPIECES; i++)
        put(x, &x->w, i, false);
    assert_int_equal(x->f.hashed, 1);
    assert_true(whole_ok(&x->w));
}

typedef struct putter {
    fx *x;
    worker w;
    int first;
} putter;

static void *put_every_third(void *arg)
{
    putter *pt = arg;
    for (int i = NPIECES - 1 - pt->first; i >= 0; i -= 3)
        put(pt->x, &pt->w, i, false);
    return NULL;
}

static void workers_side_by_side_hash_every_piece_once(void **state)
{
    fx *x = *state;
    for (int round = 0; round < 20; round++) {
        putter pt[3];
        pthread_t th[3];
        for (int k = 0; k < 3; k++) {
            pt[k] = (putter){.x = x, .first = k,
                             .w = {.f = &x->f, .buf = malloc(TS_P2P_PIECE_BYTES + 1),
                                   .buf_max = TS_P2P_PIECE_BYTES}};
            assert_non_null(pt[k].w.buf);
            assert_int_equal(pthread_create(&th[k], NULL, put_every_third, &pt[k]), 0);
        }
        for (int k = 0; k < 3; k++) {
            pthread_join(th[k], NULL);
            free(pt[k].w.buf);
        }
        /* nobody left a piece behind: the last hasher looked again */
        assert_int_equal(x->f.hashed, NPIECES);
        assert_true(whole_ok(&x->w));
        gnutls_hash_hd_t h;
        assert_int_equal(gnutls_hash_init(&h, GNUTLS_DIG_SHA256), 0);
        x->f.whole = h;
        x->f.hashed = 0;
        x->f.held = 0;
        memset(x->have, 0, sizeof x->have);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(digest_taken_in_order_as_the_pieces_come, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(a_bad_piece_fails_the_check, setup, teardown),
        cmocka_unit_test_setup_teardown(
            a_failed_read_leaves_the_check_to_the_whole_file, setup, teardown),
        cmocka_unit_test_setup_teardown(workers_side_by_side_hash_every_piece_once, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
