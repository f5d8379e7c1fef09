/*
 * test_event_text.c - how `tessera events` words an event and how `show`
 * folds node names into ranges (src/cli/event_text.c): the typed data read
 * into words (durations, tier names, GPU-hours), a detail shown as it came
 * when the data says nothing known, and ranges that keep zero-padding,
 * prefixes and gaps apart.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "cli/buf.c"
#include "cli/event_text.c"
#include "cli/format.c"

/* buf.c reports file errors through main.c's printer, which is not linked here */
void cli_errorf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
}

static const char *ranges(const char *const *names, size_t n, char *out, size_t size)
{
    struct cli_buf b = {0};
    cli_name_ranges(names, n, &b);
    assert_false(b.oom);
    snprintf(out, size, "%s", b.p ? b.p : "");
    cli_buf_free(&b);
    return out;
}

static void names_fold_into_ranges(void **state)
{
    (void)state;
    char out[256];
    const char *a[] = {"r1-n3", "r1-n1", "r1-n2", "r2-n1", "r1-n4"};
    assert_string_equal(ranges(a, 5, out, sizeof out), "r1-n[1-4],r2-n1");
    const char *b[] = {"h100-003", "h100-001", "h100-002", "h100-010"};
    assert_string_equal(ranges(b, 4, out, sizeof out), "h100-[001-003,010]");
    const char *c[] = {"login", "a-1", "a-1", "a-2"}; /* a name twice counts once */
    assert_string_equal(ranges(c, 4, out, sizeof out), "a-[1-2],login");
    const char *d[] = {"n9", "n10", "n11"};
    assert_string_equal(ranges(d, 3, out, sizeof out), "n[9-11]");
    const char *twice[] = {"b-7", "b-7", "login", "login"};
    assert_string_equal(ranges(twice, 4, out, sizeof out), "b-7,login");
    const char *e[] = {"solo"};
    assert_string_equal(ranges(e, 1, out, sizeof out), "solo");
    assert_string_equal(ranges(NULL, 0, out, sizeof out), "");
}

static void durations_read(void **state)
{
    (void)state;
    char b[32];
    cli_duration(42, b, sizeof b);
    assert_string_equal(b, "42s");
    cli_duration(725, b, sizeof b);
    assert_string_equal(b, "12m 05s");
    cli_duration(3 * 3600 + 125, b, sizeof b);
    assert_string_equal(b, "3h 02m");
    cli_duration(2 * 86400 + 4 * 3600, b, sizeof b);
    assert_string_equal(b, "2d 04h");
    cli_duration(-5, b, sizeof b);
    assert_string_equal(b, "0s");
}

static void events_read_in_words(void **state)
{
    (void)state;
    char b[CLI_CELL_MAX];
    json_t *ev = json_pack("{s:s,s:s,s:{s:f,s:f,s:i,s:s,s:s}}", "kind", "run-ended", "detail",
                           "start=0 end=7200 gpus=8 model=H100-80GB tier=0", "data", "start", 0.0,
                           "end", 7200.0, "gpus", 8, "model", "H100-80GB", "tier", "guaranteed");
    cli_event_text(ev, b, sizeof b);
    assert_non_null(strstr(b, "ran 2h 00m ("));
    assert_non_null(strstr(b, "on 8\u00d7H100-80GB, guaranteed; 16.00 GPU-hours"));
    assert_null(strstr(b, "tier="));
    json_decref(ev);
    /* a CPU-only run: no "0×H100-80GB" */
    ev = json_pack("{s:s,s:s,s:{s:f,s:f,s:i,s:s,s:s}}", "kind", "run-ended", "detail", "x",
                   "data", "start", 0.0, "end", 60.0, "gpus", 0, "model", "H100-80GB", "tier",
                   "opportunistic");
    cli_event_text(ev, b, sizeof b);
    assert_non_null(strstr(b, "on no GPU, opportunistic; 0.00 GPU-hours"));
    json_decref(ev);
    ev = json_pack("{s:s,s:s,s:{s:i,s:s,s:i,s:f,s:f}}", "kind", "preempted", "detail", "x",
                   "data", "for_job", 7, "for_tenant", "team-b", "signal", 15, "grace_s", 30.0,
                   "lost_gpu_s", 1800.0);
    /* written before the preemptor's tier was recorded: the cause only */
    assert_string_equal(cli_event_text(ev, b, sizeof b),
                        "for job 7 (team-b, reclaim); signal 15, grace 30s, 0.50 GPU-hours "
                        "since the last checkpoint");
    json_decref(ev);
    /* the preemptor's own tier: an opportunistic job within its guarantee */
    ev = json_pack("{s:s,s:s,s:{s:i,s:s,s:s,s:s,s:i,s:f,s:f}}", "kind", "preempted", "detail",
                   "x", "data", "for_job", 8, "for_tenant", "team-c", "tier", "opportunistic",
                   "cause", "reclaim", "signal", 10, "grace_s", 60.0, "lost_gpu_s", 0.0);
    assert_non_null(strstr(cli_event_text(ev, b, sizeof b),
                           "for job 8 (team-c, opportunistic, reclaim); signal 10"));
    json_decref(ev);
    ev = json_pack("{s:s,s:s,s:{s:i,s:s,s:s,s:i,s:f,s:f}}", "kind", "preempted", "detail", "x",
                   "data", "for_job", 9, "for_tenant", "vision", "cause", "time-sharing",
                   "signal", 10, "grace_s", 3.0, "lost_gpu_s", 36.0);
    assert_non_null(strstr(cli_event_text(ev, b, sizeof b), "for job 9 (vision, time-sharing)"));
    json_decref(ev);
    /* a gang's nodes, folded into ranges */
    ev = json_pack("{s:s,s:s,s:{s:s,s:[s,s,s,s],s:b}}", "kind", "started", "detail", "x", "data",
                   "node", "r1-n1", "nodes", "r1-n1", "r1-n2", "r1-n3", "r1-n4", "more_nodes", 0);
    assert_string_equal(cli_event_text(ev, b, sizeof b), "on r1-n[1-4]");
    json_decref(ev);
    /* who cancelled, held, released or requeued it */
    ev = json_pack("{s:s,s:s,s:{s:s}}", "kind", "cancel", "detail", "by=alice", "data", "by",
                   "alice");
    assert_string_equal(cli_event_text(ev, b, sizeof b), "by alice");
    json_decref(ev);
    /* no data, or data this client does not know: the detail as it came */
    ev = json_pack("{s:s,s:s,s:{}}", "kind", "reserved", "detail", "at +25m", "data");
    assert_string_equal(cli_event_text(ev, b, sizeof b), "at +25m");
    json_decref(ev);
    ev = json_pack("{s:s,s:s}", "kind", "straggler", "detail", "rank 3 is slow");
    assert_string_equal(cli_event_text(ev, b, sizeof b), "rank 3 is slow");
    json_decref(ev);
}

/* docs/cli.md: control characters in server text print as '?': C0 (a
 * newline kept in a cell), DEL, and C1 (U+009B is a terminal's CSI as ESC [
 * is) whose two UTF-8 bytes both go; other text, U+00A0 and é included,
 * stays as it came */
static void control_characters_print_as_question_marks(void **state)
{
    (void)state;
    char b[64];
    assert_string_equal(cli_clean("a\x1b[2Jb\x07" "c\x7f", b, sizeof b), "a?[2Jb?c?");
    assert_string_equal(cli_clean("x\xc2\x9b" "2J y\xc2\x85z", b, sizeof b), "x??2J y??z");
    assert_string_equal(cli_clean("caf\xc3\xa9\xc2\xa0ok\nnext", b, sizeof b),
                        "caf\xc3\xa9\xc2\xa0ok\nnext");
    assert_string_equal(cli_clean("\xc2", b, sizeof b), "\xc2"); /* cut short: not a C1 */
    assert_true(cli_c1_in("\xc2\x80", 0) && cli_c1_in("\xc2\x9f", 1));
    assert_false(cli_c1_in("\xc2\xa0", 0) || cli_c1_in("\xc2\xa0", 1) || cli_c1_in("\x9b", 0));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(names_fold_into_ranges),
        cmocka_unit_test(durations_read),
        cmocka_unit_test(events_read_in_words),
        cmocka_unit_test(control_characters_print_as_question_marks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
