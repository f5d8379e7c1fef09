/*
 * test_p2p_reports.c - what a fetching agent tells the tracker about its
 * peers (src/agent/p2p_peers.c and p2p_tracker.c, docs/images.md "Peer-to-peer"): a peer first
 * avoided without a report (it cut a transfer as it died) is reported once
 * its port refuses; a peer that answered 404 (it does not hold
 * what the tracker named) is reported as missing, not bad, and not avoided;
 * each report goes out in one announce.
 */
#define _GNU_SOURCE /* before any header: p2p_tracker.c's own */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "agent/p2p_tracker.c" /* its announce_body */

typedef struct fx {
    struct ts_p2p p;
    ts_p2p_stats st;
    uint8_t have[1], origin_busy[1], report_hash[1];
    char hash[1][TS_IMAGE_DIGEST_MAX];
    fetch f;
} fx;

static int setup(void **state)
{
    fx *x = test_calloc(1, sizeof *x);
    snprintf(x->p.node, sizeof x->p.node, "n0");
    snprintf(x->p.url, sizeof x->p.url, "http://127.0.0.1:1");
    x->f = (fetch){.p = &x->p, .digest = "sha256:00", .size = 1, .npieces = 1,
                   .have = x->have, .origin_busy = x->origin_busy,
                   .report_hash = x->report_hash, .hash = x->hash, .st = &x->st};
    *state = x;
    return 0;
}

static int teardown(void **state)
{
    test_free(*state);
    return 0;
}

/* The announce's body as JSON; its array `key` as "a,b" ("" when empty). */
static void body_list(fetch *f, const char *key, char *out, size_t n)
{
    char *txt = announce_body(f, false);
    assert_non_null(txt);
    json_t *j = json_loads(txt, 0, NULL);
    free(txt);
    assert_non_null(j);
    json_t *a = json_object_get(j, key), *v;
    assert_true(json_is_array(a));
    size_t i;
    out[0] = '\0';
    json_array_foreach(a, i, v) {
        if (i)
            strncat(out, ",", n - strlen(out) - 1);
        strncat(out, json_string_value(v), n - strlen(out) - 1);
    }
    json_decref(j);
}

/* 320b6a6: avoided for a cut transfer (no report), then refusing: told. */
static void avoided_then_refusing_is_reported(void **state)
{
    fx *x = *state;
    char bad[256];
    agent_p2p_avoid(&x->f, "n1", PEER_FAILED_AVOID_S, false); /* cut a transfer */
    body_list(&x->f, "bad", bad, sizeof bad);
    assert_string_equal(bad, "");
    assert_true(agent_p2p_avoided(&x->f, "n1"));
    agent_p2p_avoid(&x->f, "n2", PEER_FAILED_AVOID_S, false);
    agent_p2p_avoid(&x->f, "n1", PEER_FAILED_AVOID_S, true); /* its port refuses now */
    body_list(&x->f, "bad", bad, sizeof bad);
    assert_string_equal(bad, "n1");
    body_list(&x->f, "bad", bad, sizeof bad); /* told once */
    assert_string_equal(bad, "");
    assert_true(agent_p2p_avoided(&x->f, "n1") && agent_p2p_avoided(&x->f, "n2"));
}

/* A 404 is "not here": reported as missing, once, and the peer not avoided. */
static void not_here_is_missing_not_bad(void **state)
{
    fx *x = *state;
    char missing[256], bad[256];
    agent_p2p_note_missing(&x->f, "n3");
    agent_p2p_note_missing(&x->f, "n3");
    agent_p2p_note_missing(&x->f, "n4");
    char *txt = announce_body(&x->f, false); /* both lists read from one body */
    json_t *j = json_loads(txt, 0, NULL);
    free(txt);
    assert_int_equal(json_array_size(json_object_get(j, "missing")), 2);
    assert_int_equal(json_array_size(json_object_get(j, "bad")), 0);
    json_decref(j);
    body_list(&x->f, "missing", missing, sizeof missing);
    assert_string_equal(missing, "");
    body_list(&x->f, "bad", bad, sizeof bad);
    assert_string_equal(bad, "");
    assert_false(agent_p2p_avoided(&x->f, "n3"));
    assert_int_equal(x->st.bad_peers, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(avoided_then_refusing_is_reported, setup, teardown),
        cmocka_unit_test_setup_teardown(not_here_is_missing_not_bad, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
