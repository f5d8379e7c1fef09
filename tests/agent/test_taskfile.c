/*
 * test_taskfile.c - what a task may leave where the root agent looks
 * (issue 24, finding 2): a FIFO, a socket, a device node, a symbolic link
 * to a file the task may not read, a hard link to another task's file, a
 * directory, a file of another user. None blocks the read of a step file
 * or an output tail, none is read, and the agent removes only its own file.
 * Also the sync body's budget (sync_fit.c): answers cut or dropped, the
 * reports kept; and output read piece by piece from offsets (logs -f).
 */
#define _DEFAULT_SOURCE
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/sync_fit.h"
#include "agent/tail.h"
#include "agent/taskfile.h"

static char dir[64];

static const char *at(const char *name)
{
    static char p[2][128];
    static int k;
    k ^= 1;
    snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
    return p[k];
}

static void put(const char *name, const char *text)
{
    FILE *f = fopen(at(name), "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/ts-taskfile-XXXXXX");
    assert_non_null(mkdtemp(dir));
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* agent_tail_read of name: its return code, within 0.5 s (a blocking open would not return). */
static int tail_of(const char *name, uid_t owner, char **text)
{
    long long size;
    ts_err e;
    double t0 = now_s();
    int rc = agent_tail_read(at(name), 4096, owner, text, &size, &e);
    assert_true(now_s() - t0 < 0.5);
    return rc;
}

static void test_a_fifo_neither_blocks_nor_is_read(void **state)
{
    (void)state;
    assert_int_equal(mkfifo(at("fifo"), 0666), 0);
    char *text = NULL;
    assert_int_equal(tail_of("fifo", AGENT_TASKFILE_ANY_OWNER, &text), TS_EINVAL);
    assert_null(text);
    ts_err e;
    assert_true(agent_taskfile_open(at("fifo"), O_WRONLY | O_APPEND, AGENT_TASKFILE_ANY_OWNER,
                                    &e) < 0);
}

static void test_a_socket_a_device_a_directory_are_refused(void **state)
{
    (void)state;
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", at("sock"));
    assert_int_equal(bind(s, (struct sockaddr *)&sa, sizeof sa), 0);
    char *text = NULL;
    assert_int_equal(tail_of("sock", AGENT_TASKFILE_ANY_OWNER, &text), TS_EINVAL);
    close(s);
    assert_int_equal(mkdir(at("d"), 0755), 0);
    assert_true(tail_of("d", AGENT_TASKFILE_ANY_OWNER, &text) < 0);
    if (mknod(at("tty"), S_IFCHR | 0666, makedev(5, 0)) == 0) /* /dev/tty: needs CAP_MKNOD */
        assert_int_equal(tail_of("tty", AGENT_TASKFILE_ANY_OWNER, &text), TS_EINVAL);
    assert_null(text);
}

static void test_links_are_not_followed(void **state)
{
    (void)state;
    put("secret", "root:$6$hash\n");
    assert_int_equal(symlink(at("secret"), at("sym")), 0);
    assert_int_equal(link(at("secret"), at("hard")), 0);
    char *text = NULL;
    assert_int_equal(tail_of("sym", AGENT_TASKFILE_ANY_OWNER, &text), TS_EINVAL);
    assert_int_equal(tail_of("hard", AGENT_TASKFILE_ANY_OWNER, &text), TS_EINVAL);
    assert_null(text);
    ts_err e;
    assert_true(agent_taskfile_open(at("sym"), O_WRONLY | O_APPEND, AGENT_TASKFILE_ANY_OWNER,
                                    &e) < 0);
    assert_non_null(strstr(e.msg, "symbolic link"));
}

static void test_another_users_file_is_not_the_tasks(void **state)
{
    (void)state;
    put("steps", "1.0\n2.0\n");
    char *text = NULL;
    assert_int_equal(tail_of("steps", getuid(), &text), 0);
    assert_string_equal(text, "1.0\n2.0\n");
    free(text);
    text = NULL;
    assert_int_equal(tail_of("steps", getuid() + 4242, &text), TS_EINVAL);
    assert_null(text);
    /* another user's file and no file at all read the same to the task: the
     * root agent is no oracle of what exists where the task may not look */
    long long size;
    ts_err e1, e2;
    assert_int_equal(agent_tail_read(at("steps"), 64, getuid() + 4242, &text, &size, &e1),
                     TS_EINVAL);
    assert_int_equal(agent_tail_read(at("none"), 64, getuid() + 4242, &text, &size, &e2),
                     TS_ENOENT);
    assert_non_null(strstr(e1.msg, "not a regular file of the task's user (or none there)"));
    assert_string_equal(strchr(e1.msg, ':'), strchr(e2.msg, ':'));
}

static void test_only_the_agents_own_file_is_removed(void **state)
{
    (void)state;
    dev_t dev;
    ino_t ino;
    ts_err e;
    assert_int_equal(agent_taskfile_create(at("mine"), (uid_t)-1, (gid_t)-1, &dev, &ino, &e), 0);
    assert_int_equal(agent_taskfile_create(at("mine"), (uid_t)-1, (gid_t)-1, &dev, &ino, &e),
                     TS_EEXIST); /* never what is already there */
    assert_int_equal(agent_taskfile_create(at("mine2"), (uid_t)-1, (gid_t)-1, &dev, &ino, &e),
                     0);
    /* the task put something else under its name: left alone */
    assert_int_equal(unlink(at("mine2")), 0);
    put("other", "x");
    assert_int_equal(symlink(at("other"), at("mine2")), 0);
    assert_false(agent_taskfile_remove(at("mine2"), dev, ino, AGENT_TASKFILE_ANY_OWNER));
    struct stat st;
    assert_int_equal(lstat(at("mine2"), &st), 0);
    assert_int_equal(stat(at("other"), &st), 0);
    unlink(at("mine2"));
    assert_int_equal(agent_taskfile_create(at("mine2"), (uid_t)-1, (gid_t)-1, &dev, &ino, &e),
                     0);
    assert_true(agent_taskfile_remove(at("mine2"), dev, ino, AGENT_TASKFILE_ANY_OWNER));
    assert_int_equal(lstat(at("mine2"), &st), -1);
    /* by owner: a regular file of that user only */
    assert_false(agent_taskfile_remove(at("other"), 0, 0, getuid() + 4242));
    assert_true(agent_taskfile_remove(at("other"), 0, 0, getuid()));
}

/* A body of n output answers of len bytes each (kept in q, as the agent
 * keeps them) and one running task, as the codec writes it. */
static json_t *body_with(int n, size_t len, agent_answers *q)
{
    char *big = malloc(len + 1);
    for (size_t i = 0; i < len; i++)
        big[i] = i % 64 == 63 ? '\n' : (i % 7 ? 'x' : '"'); /* quotes cost 2 */
    big[len - 1] = '\n';
    big[len] = '\0';
    *q = (agent_answers){0};
    for (int i = 0; i < n; i++) {
        ts_sync_log l = {.id = i + 1, .data = big, .data_len = len, .has_size = true,
                         .size = (int64_t)len};
        assert_int_equal(agent_answers_add(q, &l), 0);
    }
    free(big);
    json_t *tasks = json_pack("[{s:i,s:i,s:s}]", "job", 7, "rank", 0, "state", "running");
    ts_sync s = {.present = TS_SY_BIT(TS_SY_NODE) | TS_SY_BIT(TS_SY_TASKS) |
                            TS_SY_BIT(TS_SY_LOGS),
                 .node = "n1", .tasks = tasks, .logs = q->ans, .nlogs = q->n};
    json_t *b = ts_sync_encode(&s);
    json_decref(tasks);
    return b;
}

static void test_a_sync_keeps_its_budget_and_its_reports(void **state)
{
    (void)state;
    /* 1.1 MB asked for: cut to the budget, with a note, the report kept */
    agent_answers q;
    json_t *b = body_with(1, 1100000, &q);
    size_t n = agent_sync_fit(b, &q, 512 * 1024);
    assert_true(n <= 512 * 1024);
    assert_int_equal(n, agent_json_cost(b));
    json_t *a = json_array_get(json_object_get(b, "logs"), 0);
    assert_non_null(strstr(json_string_value(json_object_get(a, "note")), "cut to its last"));
    assert_true(json_string_length(json_object_get(a, "data")) > 100000);
    const char *d = json_string_value(json_object_get(a, "data"));
    assert_true(d[strlen(d) - 1] == '\n'); /* its end is kept */
    assert_int_equal(json_array_size(json_object_get(b, "tasks")), 1);
    /* the kept answer is the one sent: its next sync carries the same cut */
    assert_int_equal(q.ans[0].data_len, json_string_length(json_object_get(a, "data")));
    json_decref(b);
    agent_answers_clear(&q);
    /* more answers than the budget has room for: each says so */
    b = body_with(600, 2000, &q);
    assert_true(agent_sync_fit(b, &q, 64 * 1024) <= 64 * 1024);
    a = json_array_get(json_object_get(b, "logs"), 0);
    assert_non_null(strstr(json_string_value(json_object_get(a, "error")), "no room"));
    assert_null(json_object_get(a, "data"));
    assert_null(json_object_get(a, "size"));
    assert_int_equal(json_array_size(json_object_get(b, "tasks")), 1);
    json_decref(b);
    agent_answers_clear(&q);
    /* within the budget: unchanged */
    b = body_with(2, 1000, &q);
    size_t before = agent_json_cost(b);
    assert_int_equal(agent_sync_fit(b, &q, 512 * 1024), before);
    json_decref(b);
    agent_answers_clear(&q);
}

/* A task's output as the agent sends it: C0 but newline and tab, DEL, C1
 * (both bytes of U+0080..U+009F: U+009B is a terminal's CSI) and bytes that
 * are not UTF-8 become '?'; the rest, U+00A0 and é among it, stays. */
static void test_output_is_sanitized(void **state)
{
    (void)state;
    char out[] = "a\x1b[31mb\x07\tc\x7f" "d\xc2\x9b" "2J\xc2\x85" "e\xc3\xa9\xc2\xa0\xff\n";
    agent_tail_sanitize(out, strlen(out));
    assert_string_equal(out, "a?[31mb?\tc?d??2J??e\xc3\xa9\xc2\xa0?\n");
}

/* tessera logs -f reads a file in pieces from offsets: a line longer than
 * a piece comes whole over several, a character cut at a piece's end is
 * read with the next one, an offset past the end reads nothing. */
static void test_pieces_from_offsets_cover_the_file(void **state)
{
    (void)state;
    size_t long_line = 10000;
    char *text = malloc(long_line + 64);
    memset(text, 'x', long_line);
    strcpy(text + long_line, "\nnext \xc3\xa9t\xc3\xa9\n");
    put("out", text);
    size_t total = strlen(text);
    char *got = calloc(1, total + 1), *piece;
    long long size, from, offset = 0;
    ts_err e;
    int reads = 0;
    while (offset < (long long)total && reads++ < 100) {
        assert_int_equal(agent_tail_read_at(NULL, at("out"), offset, 4097, AGENT_TASKFILE_ANY_OWNER,
                                            &piece, &size, &from, &e), 0);
        assert_int_equal(size, (long long)total);
        assert_int_equal(from, offset);
        assert_true(strlen(piece) <= 4097);
        memcpy(got + from, piece, strlen(piece));
        offset = from + (long long)strlen(piece);
        free(piece);
    }
    assert_string_equal(got, text); /* every byte once, no '?' for a cut character */
    /* a piece ending inside é stops before it */
    assert_int_equal(agent_tail_read_at(NULL, at("out"), (long long)long_line + 6, 1,
                                        AGENT_TASKFILE_ANY_OWNER, &piece, &size, &from, &e), 0);
    assert_string_equal(piece, "");
    free(piece);
    /* past the end: nothing, the size says the file is shorter */
    assert_int_equal(agent_tail_read_at(NULL, at("out"), (long long)total + 50, 4096,
                                        AGENT_TASKFILE_ANY_OWNER, &piece, &size, &from, &e), 0);
    assert_string_equal(piece, "");
    assert_int_equal(size, (long long)total);
    free(piece);
    /* the tail says where it starts: after the cut long line */
    assert_int_equal(agent_tail_read_at(NULL, at("out"), -1, 4096, AGENT_TASKFILE_ANY_OWNER,
                                        &piece, &size, &from, &e), 0);
    assert_string_equal(piece, "next \xc3\xa9t\xc3\xa9\n");
    assert_int_equal(from, (long long)long_line + 1);
    free(piece);
    free(got);
    free(text);
}

/* A piece from an offset that a sync must cut keeps its start (the reader
 * reads on from its end); its offset stays. A tail keeps its end and its
 * offset moves to where the kept text starts. */
static void test_a_cut_piece_keeps_its_start(void **state)
{
    (void)state;
    size_t len = 300000;
    char *big = malloc(len + 1);
    for (size_t i = 0; i < len; i++)
        big[i] = (char)('a' + i % 26);
    big[len] = '\0';
    for (int keep_start = 0; keep_start < 2; keep_start++) {
        agent_answers q = {0};
        ts_sync_log l = {.id = 1, .data = big, .data_len = len, .has_size = true,
                         .size = 1000000, .has_offset = true, .offset = 5000};
        assert_int_equal(agent_answers_add(&q, &l), 0);
        q.own[0].keep_start = keep_start;
        agent_answer_cut(&q, 0, 100000, "test");
        assert_int_equal(q.ans[0].data_len, keep_start ? 100000 : q.ans[0].data_len);
        assert_true(q.ans[0].data_len <= 100000 && q.ans[0].data_len > 90000);
        if (keep_start) {
            assert_memory_equal(q.ans[0].data, big, q.ans[0].data_len);
            assert_int_equal(q.ans[0].offset, 5000);
            assert_non_null(strstr(q.ans[0].note, "cut to its first 100000 bytes"));
        } else {
            assert_memory_equal(q.ans[0].data, big + len - q.ans[0].data_len, q.ans[0].data_len);
            assert_int_equal(q.ans[0].offset, 5000 + (int64_t)(len - q.ans[0].data_len));
        }
        agent_answers_clear(&q);
    }
    free(big);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_a_fifo_neither_blocks_nor_is_read, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_socket_a_device_a_directory_are_refused, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_links_are_not_followed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_another_users_file_is_not_the_tasks, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_only_the_agents_own_file_is_removed, setup,
                                        teardown),
        cmocka_unit_test(test_a_sync_keeps_its_budget_and_its_reports),
        cmocka_unit_test(test_output_is_sanitized),
        cmocka_unit_test_setup_teardown(test_pieces_from_offsets_cover_the_file, setup, teardown),
        cmocka_unit_test(test_a_cut_piece_keeps_its_start),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
