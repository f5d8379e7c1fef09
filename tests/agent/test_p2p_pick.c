/*
 * test_p2p_pick.c - which piece and which holder a fetching stream asks
 * (src/agent/p2p_fetch.c, docs/images.md "Peer-to-peer"): the rarest piece
 * first, and among its holders one the stream already holds a connection
 * to, since a new connection's SYN-ACK waits behind a busy holder's uploads;
 * a holder that stopped answering is no longer preferred.
 */
#define _GNU_SOURCE /* before any header: p2p_fetch.c's own */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "agent/p2p_fetch.c" /* its pick and note_conn */

#define NPIECES 2
#define NPEERS 4

typedef struct fx {
    struct ts_p2p p;
    ts_p2p_stats st;
    uint8_t have[NPIECES], busy[NPIECES];
    char hash[NPIECES][TS_IMAGE_DIGEST_MAX];
    fetch f;
    worker w;
    peer peers[NPEERS];
} fx;

static int setup(void **state)
{
    fx *x = test_calloc(1, sizeof *x);
    x->f = (fetch){.p = &x->p, .digest = "sha256:00", .npieces = NPIECES, .have = x->have,
                   .busy = x->busy, .hash = x->hash, .st = &x->st};
    x->w = (worker){.f = &x->f};
    for (int i = 0; i < NPIECES; i++)
        snprintf(x->hash[i], sizeof x->hash[i], "sha256:%d", i);
    /* every peer holds piece 0; piece 1 only n3 */
    static const char *have[NPEERS] = {"10", "10", "10", "11"};
    for (int q = 0; q < NPEERS; q++) {
        snprintf(x->peers[q].node, sizeof x->peers[q].node, "n%d", q);
        x->peers[q].have = have[q];
    }
    *state = x;
    return 0;
}

static int teardown(void **state)
{
    test_free(*state);
    return 0;
}

/* The holder chosen for piece 0 (piece 1 already held), over many picks:
 * how often each peer was chosen. */
static void picks_of_piece0(fx *x, int counts[NPEERS])
{
    x->have[1] = 1;
    memset(counts, 0, NPEERS * sizeof *counts);
    for (int k = 0; k < 200; k++) {
        int who = -1;
        bool held;
        assert_int_equal(pick(&x->w, x->peers, NPEERS, 0, &who, &held), 0);
        assert_true(who >= 0 && who < NPEERS);
        counts[who]++;
    }
}

static void a_connected_holder_is_asked_first(void **state)
{
    fx *x = *state;
    int counts[NPEERS];
    picks_of_piece0(x, counts);
    for (int q = 0; q < NPEERS; q++) /* no connection yet: evenly among holders */
        assert_true(counts[q] > 0);
    note_conn(&x->w, "n2", true); /* n2 answered this stream */
    picks_of_piece0(x, counts);
    assert_int_equal(counts[2], 200);
    note_conn(&x->w, "n2", false); /* its connect then timed out */
    picks_of_piece0(x, counts);
    assert_true(counts[2] < 200);
}

static void the_rarest_piece_still_comes_first(void **state)
{
    fx *x = *state;
    note_conn(&x->w, "n0", true); /* connected to a holder of piece 0 only */
    int who = -1;
    bool held;
    assert_int_equal(pick(&x->w, x->peers, NPEERS, 0, &who, &held), 1);
    assert_int_equal(who, 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(a_connected_holder_is_asked_first, setup, teardown),
        cmocka_unit_test_setup_teardown(the_rarest_piece_still_comes_first, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
