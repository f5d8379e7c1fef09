/*
 * arrays.c - POST /v1/arrays/{id}/cancel|hold|release: a whole array at once.
 *
 * An array's elements are jobs of their own (ids F..F+n-1, element i named
 * "NAME[i]"); its id is its first element's, F, as Slurm's array job id
 * (throttle.c ctld_array_index). Cancelling the array plans a cancel of
 * every active element in one transaction, so an array of thousands costs
 * one commit. An element being written by another thread at that moment
 * (pinned) is taken in a further round, at most CANCEL_ROUNDS of them,
 * CANCEL_RETRY_MS apart; elements already ended, or in a state a cancel
 * does not apply to, are left as they are. A hold or release is planned the
 * same way for every element that is a job (pending ones held, held ones
 * released); a large array whose last elements are not jobs yet is refused
 * a hold (409): those would become jobs pending, and start.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctld/ctld.h"
#include "ctld/http.h"
#include "ctld/depend.h"
#include "ctld/job_fsm.h"

#define CANCEL_ROUNDS 100
#define CANCEL_RETRY_MS 20

/* The elements of an array that are jobs, in order, for ctld_event_round. */
typedef struct array_walk {
    int64_t array;
    int span, k;
} array_walk;

static cjob *next_element(ctld *c, void *ctx)
{
    array_walk *w = ctx;
    while (w->k < w->span) {
        cjob *j = ctld_job_find(c, w->array + w->k++);
        if (j)
            return j;
    }
    return NULL;
}

/* Rounds of event over the array's elements until none was busy. */
static int array_action(ctld *c, int64_t array, int span, int event, const char *by,
                        int *changed, ts_err *err)
{
    for (int round = 0; round < CANCEL_ROUNDS; round++) {
        array_walk w = {array, span, 0};
        int busy = 0, n = 0;
        int rc = ctld_event_round(c, event, by, next_element, &w, NULL, &n, &busy, err);
        if (rc == 0)
            *changed += n;
        if (rc != 0 || busy == 0)
            return rc;
        struct timespec ts = {0, CANCEL_RETRY_MS * 1000000L};
        nanosleep(&ts, NULL);
    }
    return ts_err_set(err, TS_ETIMEDOUT, "array %lld: some elements stayed busy; %s %d, try "
                      "again", (long long)array, ctld_job_event_name(event), *changed);
}

int ctld_array_cancel(ctld *c, int64_t array, int span, const char *by, int *cancelled,
                      ts_err *err)
{
    *cancelled = 0;
    /* a large array's elements that are not jobs yet: stored as cancelled
     * first, so none becomes a job meanwhile (array_lazy.c) */
    int rc = ctld_array_cancel_rest(c, array, cancelled, err);
    if (rc != 0)
        return rc;
    return array_action(c, array, span, CTLD_JE_CANCEL, by, cancelled, err);
}

void ctld_array_route(ctld *c, const ctld_request *rq, ctld_reply *r)
{
    const char *p = rq->url + strlen("/v1/arrays/");
    char *end;
    long long id = strtoll(p, &end, 10);
    int event = strcmp(end, "/cancel") == 0    ? CTLD_JE_CANCEL
                : strcmp(end, "/hold") == 0    ? CTLD_JE_HOLD
                : strcmp(end, "/release") == 0 ? CTLD_JE_RELEASE
                                               : -1;
    if (end == p || id <= 0 || event < 0) {
        ctld_reply_error(r, 404, "not_found", "%s %s: no such endpoint", rq->method, rq->url);
        return;
    }
    if (strcmp(rq->method, "POST") != 0) {
        ctld_reply_error(r, 405, "method_not_allowed", "%s %s", rq->method, rq->url);
        return;
    }
    const ctld_caller *w = rq->who;
    if (w->role == TS_ROLE_VIEWER) {
        ctld_reply_error(r, 403, "forbidden", "role viewer cannot change jobs");
        return;
    }
    ts_job_row row;
    ts_err err;
    int rc = ts_store_job_get(c->store, id, &row, &err);
    if (rc != 0 && rc != TS_ENOENT) {
        ctld_reply_error(r, 503, "unavailable", "%s", err.msg);
        return;
    }
    bool seen = rc == 0 && (w->role == TS_ROLE_ADMIN || strcmp(w->tenant, row.tenant) == 0);
    int span = seen ? ctld_dep_array_span(&row) : 0;
    /* an array is its submitter's, as each of its elements */
    bool may = seen && ctld_may_manage(w, row.owner);
    char owner[sizeof row.owner];
    snprintf(owner, sizeof owner, "%s", seen ? row.owner : "");
    if (rc == 0)
        ts_job_row_fini(&row);
    if (!seen) {
        ctld_reply_error(r, 404, "not_found", "job %lld does not exist", id);
        return;
    }
    if (!may && span > 1) {
        ctld_reply_not_owner(r, "array", id, owner, end + 1);
        return;
    }
    if (span <= 1) {
        ctld_reply_error(r, 404, "not_an_array", "job %lld is not an array's id (the id of an "
                         "array's first element)", id);
        return;
    }
    if (event == CTLD_JE_HOLD) {
        /* its last element not a job yet: a large array's rest would come
         * pending (array_lazy.c) */
        ts_job_row last;
        ctld_lock_reader(c);
        bool rest = ctld_array_lazy_row(c, id + span - 1, &last) == 0;
        pthread_mutex_unlock(&c->mu);
        if (rest) {
            ts_job_row_fini(&last);
            ctld_reply_error(r, 409, "conflict", "array %lld: some of its %d elements are not "
                             "jobs yet (a large array): hold its elements one by one "
                             "(ID_INDEX), or cancel it", id, span);
            return;
        }
    }
    int n = 0;
    rc = event == CTLD_JE_CANCEL ? ctld_array_cancel(c, id, span, w->name, &n, &err)
                                 : array_action(c, id, span, event, w->name, &n, &err);
    static const char *const DONE[] = {[CTLD_JE_CANCEL] = "cancelled", [CTLD_JE_HOLD] = "held",
                                       [CTLD_JE_RELEASE] = "released"};
    if (rc != 0)
        ctld_reply_error(r, 503, "unavailable", "%s", err.msg);
    else
        ctld_reply_json(r, 200, json_pack("{s:I,s:i,s:i}", "array", (json_int_t)id, "elements",
                                          span, DONE[event], n));
}
