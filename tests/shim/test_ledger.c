/*
 * test_ledger.c - the tenant ledger (src/shim/ledger.c) on its own.
 *
 * Proves: reserve charges only what fits and charges nothing otherwise;
 * releases never take a counter below zero; devices are found by UUID from
 * any process; a process that dies without closing (exit or SIGKILL) has its
 * charge returned, and one killed in the middle of an update, holding the
 * lock, neither wedges the others nor leaves the totals wrong; a file that is
 * not a ledger is refused with a message; the slot table has a limit and says
 * so; the GPU-time bucket refills at the share, makes a debtor wait as long
 * as the debt takes to repay, and settles measured time.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "shim/ledger.h"

#define MIB (1ULL << 20)
#define MS 1000000LL

static char path[128];
static const unsigned char uuid_a[TS_LEDGER_UUID_BYTES] = {1, 2, 3};
static const unsigned char uuid_b[TS_LEDGER_UUID_BYTES] = {9, 9, 9};

static ts_ledger *open_ok(void)
{
    ts_ledger *l = NULL;
    ts_err err;
    int rc = shim_ledger_open(path, &l, &err);
    if (rc)
        fail_msg("open: %s", err.msg);
    return l;
}

static int fresh(void **state)
{
    (void)state;
    snprintf(path, sizeof path, "/tmp/ts-ledger-test-%d", (int)getpid());
    unlink(path);
    return 0;
}

static int gone(void **state)
{
    (void)state;
    unlink(path);
    return 0;
}

static void test_reserve_within_quota(void **state)
{
    (void)state;
    ts_ledger *p = open_ok(), *q = open_ok(); /* two slots, as two processes */
    int d = shim_ledger_device(p, uuid_a);
    assert_int_equal(shim_ledger_device(q, uuid_a), d);
    assert_int_not_equal(shim_ledger_device(q, uuid_b), d);
    assert_int_equal(shim_ledger_reserve(p, d, 60 * MIB, 100 * MIB), 0);
    assert_int_equal(shim_ledger_reserve(q, d, 41 * MIB, 100 * MIB), TS_ENOSPC);
    assert_int_equal(shim_ledger_used(q, d), 60 * MIB); /* a refusal charges nothing */
    assert_int_equal(shim_ledger_reserve(q, d, 40 * MIB, 100 * MIB), 0);
    assert_int_equal(shim_ledger_used(p, d), 100 * MIB);
    assert_int_equal(shim_ledger_reserve(p, d, 1, 100 * MIB), TS_ENOSPC);
    assert_int_equal(shim_ledger_reserve(p, d, UINT64_MAX, 100 * MIB), TS_ENOSPC); /* no wrap */
    assert_int_equal(shim_ledger_mine(p, d), 60 * MIB);
    /* releasing more than one holds takes only what it holds */
    shim_ledger_release(q, d, 1000 * MIB);
    assert_int_equal(shim_ledger_mine(q, d), 0);
    assert_int_equal(shim_ledger_used(p, d), 60 * MIB);
    shim_ledger_release(q, d, 5);
    assert_int_equal(shim_ledger_used(p, d), 60 * MIB);
    /* closing returns what the process still held */
    shim_ledger_close(p);
    assert_int_equal(shim_ledger_used(q, d), 0);
    shim_ledger_close(q);
}

static void test_dead_processes_give_back(void **state)
{
    (void)state;
    ts_ledger *me = open_ok();
    int d = shim_ledger_device(me, uuid_a);
    int ready[2];
    assert_int_equal(pipe(ready), 0);
    pid_t exits = fork(), killed;
    if (exits == 0) { /* charges and exits without closing */
        ts_ledger *l = open_ok();
        shim_ledger_reserve(l, d, 30 * MIB, 100 * MIB);
        _exit(0);
    }
    int st;
    assert_int_equal(waitpid(exits, &st, 0), exits);
    killed = fork();
    if (killed == 0) { /* charges, says so, waits to be killed */
        ts_ledger *l = open_ok();
        shim_ledger_reserve(l, d, 50 * MIB, 100 * MIB);
        if (write(ready[1], "x", 1) != 1)
            _exit(1);
        for (;;)
            pause();
    }
    char c;
    assert_int_equal(read(ready[0], &c, 1), 1);
    /* the survivor of the first is reclaimed, the live one is not */
    assert_int_equal(shim_ledger_used(me, d), 50 * MIB);
    assert_int_equal(shim_ledger_reserve(me, d, 51 * MIB, 100 * MIB), TS_ENOSPC);
    kill(killed, SIGKILL);
    assert_int_equal(waitpid(killed, &st, 0), killed);
    /* killed: a reservation that did not fit now does, nothing left behind */
    assert_int_equal(shim_ledger_reserve(me, d, 100 * MIB, 100 * MIB), 0);
    assert_int_equal(shim_ledger_used(me, d), 100 * MIB);
    shim_ledger_close(me);
    close(ready[0]);
    close(ready[1]);
}

static void test_killed_holding_the_lock(void **state)
{
    (void)state;
    ts_ledger *me = open_ok();
    int d = shim_ledger_device(me, uuid_a);
    assert_int_equal(shim_ledger_reserve(me, d, 10 * MIB, 100 * MIB), 0);
    pid_t pid = fork();
    if (pid == 0) {
        ts_ledger *l = open_ok();
        shim_ledger_reserve(l, d, 20 * MIB, 100 * MIB);
        shim_ledger_test_die_halfway(l, d, 30 * MIB); /* lock held, totals torn */
        _exit(0);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    /* the next locker repairs the totals and reaps the dead: only ours is left */
    assert_int_equal(shim_ledger_used(me, d), 10 * MIB);
    assert_int_equal(shim_ledger_reserve(me, d, 90 * MIB, 100 * MIB), 0);
    assert_int_equal(shim_ledger_reserve(me, d, 1, 100 * MIB), TS_ENOSPC);
    shim_ledger_close(me);
}

static void test_not_a_ledger(void **state)
{
    (void)state;
    int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "hello", 5), 5);
    close(fd);
    ts_ledger *l;
    ts_err err;
    assert_int_equal(shim_ledger_open(path, &l, &err), TS_EIO);
    assert_non_null(strstr(err.msg, "too small to be a ledger"));
    assert_int_equal(truncate(path, 1 << 20), 0);
    assert_int_equal(shim_ledger_open(path, &l, &err), TS_EIO);
    assert_non_null(strstr(err.msg, "not a version 1 tessera ledger"));
    assert_int_equal(shim_ledger_open("/nonexistent-dir/x", &l, &err), TS_EIO);
    assert_non_null(strstr(err.msg, "cannot create"));
}

static void test_slots_run_out(void **state)
{
    (void)state;
    ts_ledger *h[TS_LEDGER_MAX_SLOTS];
    for (int i = 0; i < TS_LEDGER_MAX_SLOTS; i++)
        h[i] = open_ok();
    ts_ledger *extra;
    ts_err err;
    assert_int_equal(shim_ledger_open(path, &extra, &err), TS_ENOSPC);
    assert_non_null(strstr(err.msg, "process slots are in use"));
    shim_ledger_close(h[7]);
    h[7] = open_ok(); /* a closed slot is free again */
    for (int i = 0; i < TS_LEDGER_MAX_SLOTS; i++)
        shim_ledger_close(h[i]);
    /* a private ledger needs no file */
    assert_int_equal(shim_ledger_open(NULL, &extra, &err), 0);
    int d = shim_ledger_device(extra, uuid_b);
    assert_int_equal(shim_ledger_reserve(extra, d, 5, 10), 0);
    shim_ledger_close(extra);
}

static void test_device_table_full(void **state)
{
    (void)state;
    ts_ledger *l = open_ok();
    unsigned char u[TS_LEDGER_UUID_BYTES] = {0};
    for (int i = 0; i < TS_LEDGER_MAX_DEVICES; i++) {
        u[0] = (unsigned char)(i + 100);
        assert_int_equal(shim_ledger_device(l, u), i);
    }
    u[0] = 7;
    assert_int_equal(shim_ledger_device(l, u), -1);
    shim_ledger_close(l);
}

static void test_time_bucket(void **state)
{
    (void)state;
    ts_ledger *l = open_ok(), *other = open_ok();
    int d = shim_ledger_device(l, uuid_a);
    const int64_t burst = 100 * MS, t0 = 1000 * MS;
    /* starts full: 30 % of the burst */
    assert_int_equal(shim_ledger_take(l, d, 30, 20 * MS, t0, burst), 0);
    assert_int_equal(shim_ledger_take(l, d, 30, 20 * MS, t0, burst), 0); /* 10 ms, then -10 */
    /* in debt by 10 ms at 30 %: 33.3 ms of wall time to repay */
    int64_t w = shim_ledger_take(other, d, 30, 1 * MS, t0, burst);
    assert_true(w >= 33 * MS && w <= 34 * MS);
    assert_int_equal(shim_ledger_take(l, d, 30, 1 * MS, t0 + w, burst), 0);
    /* measured less than estimated: the difference comes back, up to the cap */
    shim_ledger_settle(l, d, 30, 20 * MS, 5 * MS, burst);
    assert_int_equal(shim_ledger_gpu_ns(l, d), 5 * MS);
    shim_ledger_settle(l, d, 30, 1000 * MS, 0, burst); /* a refund beyond the cap */
    assert_int_equal(shim_ledger_take(l, d, 30, 31 * MS, t0 + w, burst), 0);
    assert_true(shim_ledger_take(l, d, 30, 1, t0 + w, burst) > 0); /* the cap held */
    /* idle time refills, but only up to the cap */
    assert_int_equal(shim_ledger_take(l, d, 30, 29 * MS, t0 + w + 10000 * MS, burst), 0);
    assert_int_equal(shim_ledger_take(l, d, 30, 2 * MS, t0 + w + 10000 * MS, burst), 0);
    assert_true(shim_ledger_take(l, d, 30, 1, t0 + w + 10000 * MS, burst) > 0);
    shim_ledger_close(other);
    shim_ledger_close(l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_reserve_within_quota, fresh, gone),
        cmocka_unit_test_setup_teardown(test_dead_processes_give_back, fresh, gone),
        cmocka_unit_test_setup_teardown(test_killed_holding_the_lock, fresh, gone),
        cmocka_unit_test_setup_teardown(test_not_a_ledger, fresh, gone),
        cmocka_unit_test_setup_teardown(test_slots_run_out, fresh, gone),
        cmocka_unit_test_setup_teardown(test_device_table_full, fresh, gone),
        cmocka_unit_test_setup_teardown(test_time_bucket, fresh, gone),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
