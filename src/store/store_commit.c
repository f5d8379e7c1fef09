/*
 * store_commit.c - group commit: one committer thread per store turns the
 * writes queued by any number of threads into as few transactions as it can.
 *
 * Every write must be durable before it is acknowledged, and a durable
 * commit costs a disk flush (or a round trip to PostgreSQL and its flush).
 * One transaction per write would cap the controller at a few hundred writes
 * a second on an ordinary disk, so callers queue their op and sleep; the
 * committer takes everything queued (up to GROUP_OPS_MAX), runs it as
 * BEGIN; op; op; ...; COMMIT, and wakes every waiter with its own result.
 * While it flushes, the next group gathers, so the batch grows with load.
 *
 * One op failing (a stale gen, a taken token name) must not fail the
 * others, and a failed statement can poison the transaction (PostgreSQL
 * refuses everything after it), so the group is rolled back and re-run
 * without the failed op. Backend write calls never change their inputs and
 * results live in the op, so a re-run starts from clean state. A failed
 * BEGIN or COMMIT fails every op still in the group: its outcome is theirs.
 */
#include "store/store_internal.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Upper bound on one transaction, so a burst cannot build one that holds
 * the write lock (and every waiter) for long. */
#define GROUP_OPS_MAX 512

/* Forgets what an earlier run of the op returned. */
static void op_clear_results(ts_wop *op)
{
    op->id = 0;
    op->existed = false;
    ts_job_row_fini(&op->stored);
    for (int i = 0; op->kind == TS_WOP_JOB_INSERTS && i < op->nrows; i++) {
        op->many_id[i] = 0;
        op->many_existed[i] = false;
        ts_job_row_fini(&op->many_stored[i]);
    }
}

/* An array's row after its elements' rows: a new array takes its first
 * element's id and reserves the ids of its other elements (unless that
 * element existed: the array was stored before, by the same request). */
static int array_write(store_conn *c, ts_wop *op)
{
    ts_array_row a = *op->array;
    if (a.id == 0) {
        op->array_id = op->many_id[0];
        if (op->many_existed[0])
            return 0;
        a.id = op->array_id;
        int rc = store_ids_reserve(c, a.id + a.size - 1, &op->err);
        if (rc)
            return rc;
    } else {
        op->array_id = a.id;
    }
    return store_array_put(c, &a, &op->err);
}

/* Runs one op inside the open transaction, results into the op. */
static int run_op(ts_store *s, ts_wop *op)
{
    store_conn *c = s->wconn;
    ts_err_clear(&op->err);
    op_clear_results(op);
    int rc = 0;
    /* a store opened at an older version for tests has no roll-up */
    bool ru = s->schema_version >= TS_SCHEMA_ROLLUP;
    switch (op->kind) {
    case TS_WOP_JOB_INSERT:
        rc = store_job_insert(c, op->rows, &op->id, &op->existed, &op->err);
        if (rc == 0 && op->existed)
            rc = store_job_get(c, op->id, &op->stored, &op->err);
        else if (rc == 0 && ru && op->rows->start_s > 0 && op->rows->end_s > 0)
            rc = store_rollup_job(c, op->id, &op->err);
        break;
    case TS_WOP_JOB_INSERTS:
        for (int i = 0; rc == 0 && i < op->nrows; i++) {
            rc = store_job_insert(c, &op->rows[i], &op->many_id[i], &op->many_existed[i],
                               &op->err);
            if (rc == 0 && op->many_existed[i])
                rc = store_job_get(c, op->many_id[i], &op->many_stored[i], &op->err);
            else if (rc == 0 && ru && op->rows[i].start_s > 0 && op->rows[i].end_s > 0)
                rc = store_rollup_job(c, op->many_id[i], &op->err);
            if (rc)
                ts_err_prefix(&op->err, "rows[%d]: ", i);
        }
        if (rc == 0 && op->array)
            rc = array_write(c, op);
        break;
    case TS_WOP_JOB_UPDATES:
        for (int i = 0; rc == 0 && i < op->nrows; i++) {
            rc = store_job_update(c, &op->rows[i], &op->err);
            if (rc == 0 && ru)
                rc = store_rollup_job(c, op->rows[i].id, &op->err);
            if (rc && (op->nrows > 1 || op->nevents))
                ts_err_prefix(&op->err, "rows[%d]: ", i);
        }
        for (int i = 0; rc == 0 && i < op->nevents; i++) {
            rc = store_event_append(c, &op->events[i], &op->err);
            if (rc == 0 && ru)
                rc = store_rollup_event(c, &op->events[i], &op->err);
            if (rc && (op->nrows || op->nevents > 1))
                ts_err_prefix(&op->err, "events[%d]: ", i);
        }
        break;
    case TS_WOP_TOKEN_INSERT:
        rc = store_token_insert(c, op->token, &op->id, &op->err);
        break;
    case TS_WOP_TOKEN_REVOKE:
        rc = store_token_revoke(c, op->name, op->now_s, &op->err);
        break;
    case TS_WOP_SETTING_PUT:
        rc = store_setting_put(c, op->name, op->value, &op->err);
        break;
    case TS_WOP_RESV_INSERT:
        rc = store_resv_insert(c, op->resv, &op->err);
        break;
    case TS_WOP_RESV_DELETE:
        rc = store_resv_delete(c, op->name, &op->err);
        break;
    }
    return rc;
}

static void fail_rest(ts_wop **group, int n, const ts_err *why)
{
    for (int i = 0; i < n; i++) {
        if (group[i]->failed)
            continue;
        group[i]->failed = true;
        group[i]->rc = why->code;
        group[i]->err = *why;
        op_clear_results(group[i]);
    }
}

/* Injected failures (store_faults.c): decided once per op, before the group
 * first runs, so a re-run of the group does not count its ops twice. */
static void injected_fault(ts_store *s, ts_wop **group, int n, bool *fail_commit,
                           uint64_t *delay_ms)
{
    int drop = 0;
    *fail_commit = false;
    pthread_mutex_lock(&s->qmu);
    *delay_ms = s->faults.on ? s->faults.delay_ms : 0;
    for (int i = 0; s->faults.on && i < n; i++) {
        int kind;
        if (!store_fault_due(s, &kind))
            continue;
        if (kind == TS_FAULT_COMMIT) {
            *fail_commit = true;
            continue;
        }
        if (kind == TS_FAULT_DROP && s->be->drop_session)
            drop = 1;
        group[i]->failed = true;
        group[i]->rc = TS_EIO;
        ts_err_set(&group[i]->err, TS_EIO, "%s",
                   kind == TS_FAULT_FULL   ? "store: database or disk is full (injected)"
                   : kind == TS_FAULT_DROP ? "store: the database session was dropped (injected)"
                                           : "store: I/O error (injected)");
    }
    pthread_mutex_unlock(&s->qmu);
    if (drop)
        s->be->drop_session(s->wconn->db);
}

/* Commits the group; returns how many ops it committed (0 or 1 commit). */
static int run_group(ts_store *s, ts_wop **group, int n, bool *committed)
{
    *committed = false;
    bool fail_commit = false;
    uint64_t delay_ms = 0;
    injected_fault(s, group, n, &fail_commit, &delay_ms);
    for (;;) {
        int live = 0;
        for (int i = 0; i < n; i++)
            live += !group[i]->failed;
        if (live == 0)
            return 0;
        ts_err terr;
        ts_err_clear(&terr);
        if (store_begin(s->wconn, false, &terr)) {
            fail_rest(group, n, &terr);
            return 0;
        }
        bool retry = false;
        for (int i = 0; i < n && !retry; i++) {
            if (group[i]->failed)
                continue;
            int rc = run_op(s, group[i]);
            if (rc) {
                group[i]->failed = true;
                group[i]->rc = rc;
                op_clear_results(group[i]);
                retry = true;
            }
        }
        if (retry) {
            store_rollback(s->wconn);
            continue;
        }
        if (delay_ms) {
            /* injected: a slow disk (the queue goes on gathering meanwhile) */
            struct timespec d = {(time_t)(delay_ms / 1000), (long)(delay_ms % 1000) * 1000000L};
            nanosleep(&d, NULL);
        }
        if (fail_commit) {
            store_rollback(s->wconn);
            ts_err_set(&terr, TS_EIO, "store: commit failed (injected)");
            fail_rest(group, n, &terr);
            return 0;
        }
        if (store_commit(s->wconn, &terr)) {
            store_rollback(s->wconn);
            fail_rest(group, n, &terr);
            return 0;
        }
        *committed = true;
        for (int i = 0; i < n; i++)
            if (!group[i]->failed)
                group[i]->rc = 0;
        return live;
    }
}

static void *committer_main(void *arg)
{
    ts_store *s = arg;
    ts_wop *group[GROUP_OPS_MAX];
    pthread_mutex_lock(&s->qmu);
    for (;;) {
        while ((!s->qhead || s->hold) && !s->stopping)
            pthread_cond_wait(&s->qcv, &s->qmu);
        if (!s->qhead)
            break;
        int n = 0;
        while (s->qhead && n < GROUP_OPS_MAX) {
            group[n++] = s->qhead;
            s->qhead = s->qhead->next;
        }
        if (!s->qhead)
            s->qtail = NULL;
        s->nqueued -= n;
        pthread_mutex_unlock(&s->qmu);

        bool committed;
        int ok = run_group(s, group, n, &committed);

        pthread_mutex_lock(&s->qmu);
        s->stats.writes += (uint64_t)ok;
        s->stats.commits += committed;
        for (int i = 0; i < n; i++)
            group[i]->done = true;
        pthread_cond_broadcast(&s->donecv);
    }
    pthread_mutex_unlock(&s->qmu);
    return NULL;
}

int store_committer_start(ts_store *s, ts_err *err)
{
    if (pthread_create(&s->committer, NULL, committer_main, s) != 0)
        return ts_err_set(err, TS_EIO, "store: cannot start the committer thread");
    s->committer_started = true;
    return 0;
}

void store_committer_stop(ts_store *s)
{
    if (!s->committer_started)
        return;
    pthread_mutex_lock(&s->qmu);
    s->stopping = true;
    s->hold = false;
    pthread_cond_signal(&s->qcv);
    pthread_mutex_unlock(&s->qmu);
    pthread_join(s->committer, NULL);
    s->committer_started = false;
}

int store_submit_many(ts_store *s, ts_wop *ops, int n)
{
    pthread_mutex_lock(&s->qmu);
    if (s->stopping) {
        pthread_mutex_unlock(&s->qmu);
        return TS_ECLOSED;
    }
    for (int i = 0; i < n; i++) {
        ts_wop *op = &ops[i];
        memset(&op->stored, 0, sizeof op->stored);
        op->failed = op->done = false;
        op->next = NULL;
        if (s->qtail)
            s->qtail->next = op;
        else
            s->qhead = op;
        s->qtail = op;
        s->nqueued++;
    }
    pthread_cond_signal(&s->qcv);
    for (int i = 0; i < n; i++)
        while (!ops[i].done)
            pthread_cond_wait(&s->donecv, &s->qmu);
    pthread_mutex_unlock(&s->qmu);
    return 0;
}

int store_submit(ts_store *s, ts_wop *op, ts_err *err)
{
    if (store_submit_many(s, op, 1) != 0)
        return ts_err_set(err, TS_ECLOSED, "store: closed");
    if (op->rc && err)
        *err = op->err;
    return op->rc;
}
