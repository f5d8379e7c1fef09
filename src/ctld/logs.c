/*
 * logs.c - GET /v1/jobs/{id}/logs: a task's output. While the job runs, the
 * request is queued on the rank's node (ctld_logreq) and goes to its agent in
 * the next desired state; the agent's following sync carries the answer
 * (agents.c), which wakes the waiting request. Once the rank ended, the
 * answer is the output its agent reported then, kept with the job's events
 * (kind "output"). docs/agent-protocol.md, docs/api.md.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctld/ctld.h"
#include "ctld/http.h"
#include "ctld/router.h"

#define LOG_WAIT_S 10.0
#define LOG_TAIL_DEFAULT 65536
#define LOG_TAIL_MAX (1 << 20)
/* Output requests one node's agent may have waiting at once; more are
 * answered 429 (each answer rides on the agent's sync, which has a size:
 * docs/agent-protocol.md "Sizes"). */
#define LOG_REQUESTS_PER_NODE_MAX 4
/* Of those, one tenant's jobs' (a tenant asking in a loop for a rank it has
 * on a shared node would otherwise keep every other tenant's at 429). */
#define LOG_REQUESTS_PER_TENANT_MAX 2

/* The output its agent reported when rank `rank` ended (an "output" event). */
static void stored_output(ctld *c, const ts_job_row *row, int rank, int stream, ctld_reply *r)
{
    char head[48];
    snprintf(head, sizeof head, "rank %d %s\n", rank, stream ? "stderr" : "stdout");
    ts_event_row *ev = NULL;
    int n = 0;
    int64_t after = 0;
    char *found = NULL;
    ts_err err;
    for (int page = 0; page < 1000; page++) {
        if (ts_store_event_list(c->store, row->id, after, 500, &ev, &n, &err) != 0) {
            ctld_reply_error(r, 503, "unavailable", "%s", err.msg);
            free(found);
            return;
        }
        for (int i = 0; i < n; i++)
            if (strcmp(ev[i].kind, "output") == 0 && ev[i].detail &&
                strncmp(ev[i].detail, head, strlen(head)) == 0) {
                free(found); /* the latest run's wins */
                found = strdup(ev[i].detail + strlen(head));
            }
        after = n > 0 ? ev[n - 1].id : after;
        ts_store_free_events(ev, n);
        if (n < 500)
            break;
    }
    if (!found) {
        ctld_reply_error(r, 404, "not_found",
                         "job %lld rank %d: not running, and no %s was recorded when it ended",
                         (long long)row->id, rank, stream ? "stderr" : "stdout");
        return;
    }
    ctld_reply_json(r, 200, json_pack("{s:I,s:i,s:s,s:b,s:s}", "job", (json_int_t)row->id, "rank",
                                      rank, "stream", stream ? "stderr" : "stdout", "live", 0,
                                      "data", found));
    free(found);
}

/* The agent's answer as the API gives it: "note" when less than the tail
 * asked for came back although the file holds more (cut to what an answer
 * carries, or to fit the agent's sync); "offset" where its data starts (an
 * older agent's answer has none). */
static void live_answer(ctld_reply *r, int64_t job, int rank, int stream, long tail,
                        bool piece, json_t *ans)
{
    const char *data = json_string_value(json_object_get(ans, "data"));
    json_t *size = json_object_get(ans, "size");
    json_t *doc = json_pack("{s:I,s:i,s:s,s:b,s:s,s:O}", "job", (json_int_t)job, "rank", rank,
                            "stream", stream ? "stderr" : "stdout", "live", 1, "data",
                            data ? data : "", "size", size ? size : json_null());
    json_t *offset = json_object_get(ans, "offset");
    if (json_is_integer(offset))
        json_object_set(doc, "offset", offset);
    const char *note = json_string_value(json_object_get(ans, "note"));
    if (note)
        json_object_set_new(doc, "note", json_string(note));
    else if (!piece && tail > CTLD_LOG_ANSWER_MAX_BYTES &&
             json_integer_value(size) > CTLD_LOG_ANSWER_MAX_BYTES)
        json_object_set_new(doc, "note",
                            json_sprintf("cut to its last %d bytes: an answer carries at most "
                                         "that much output (docs/agent-protocol.md)",
                                         CTLD_LOG_ANSWER_MAX_BYTES));
    ctld_reply_json(r, 200, doc);
}

/* Puts q on node n's waiting output requests: true with the node's a->mu
 * held; false, r answered 429, when LOG_REQUESTS_PER_NODE_MAX already wait. */
static bool logreq_add(ctld *c, int n, ctld_logreq *q, ctld_reply *r)
{
    ctld_agent *a = &c->agents[n];
    pthread_mutex_lock(&a->mu);
    int waiting = 0, mine = 0;
    for (const ctld_logreq *w = a->logreqs; w; w = w->next) {
        waiting++;
        mine += strcmp(w->tenant, q->tenant) == 0;
    }
    if (mine >= LOG_REQUESTS_PER_TENANT_MAX) {
        pthread_mutex_unlock(&a->mu);
        ctld_reply_error(r, 429, "rate_limited", "%s: %d output requests for tenant %s's jobs "
                         "already wait for its agent (at most %d of a node's %d); ask again "
                         "shortly", c->cluster->nodes[n].name, mine, q->tenant,
                         LOG_REQUESTS_PER_TENANT_MAX, LOG_REQUESTS_PER_NODE_MAX);
        snprintf(r->retry_after, sizeof r->retry_after, "1");
        return false;
    }
    if (waiting >= LOG_REQUESTS_PER_NODE_MAX) {
        pthread_mutex_unlock(&a->mu);
        ctld_reply_error(r, 429, "rate_limited", "%s: %d output requests already wait for its "
                         "agent (at most %d per node); ask again shortly",
                         c->cluster->nodes[n].name, waiting, LOG_REQUESTS_PER_NODE_MAX);
        snprintf(r->retry_after, sizeof r->retry_after, "1");
        return false;
    }
    q->next = a->logreqs;
    a->logreqs = q;
    return true;
}

/* How many ranks a job no longer in memory has: its stored spec's tasks'
 * counts (its canonical spec, as submitted or updated); 0 if unknown. */
static int result_ranks(const ts_job_row *row)
{
    json_error_t je;
    json_t *spec = row->spec_json ? json_loads(row->spec_json, 0, &je) : NULL;
    size_t i;
    json_t *t;
    long long n = 0;
    json_array_foreach(json_object_get(spec, "tasks"), i, t)
        n += json_integer_value(json_object_get(t, "count"));
    json_decref(spec);
    return n > 0 && n <= INT32_MAX ? (int)n : 0;
}

void ctld_job_logs(ctld *c, const ctld_request *rq, const ts_job_row *row, ctld_reply *r)
{
    int64_t rank = 0, tail = LOG_TAIL_DEFAULT, offset = -1;
    if ((rq->q.rank && !ctld_parse_number(rq->q.rank, "rank", 0, INT32_MAX, &rank, r)) ||
        (rq->q.tail && !ctld_parse_number(rq->q.tail, "tail", 1, LOG_TAIL_MAX, &tail, r)) ||
        (rq->q.offset && !ctld_parse_number(rq->q.offset, "offset", 0, INT64_MAX, &offset, r)))
        return;
    if (offset >= 0 && !rq->q.tail)
        tail = CTLD_LOG_ANSWER_MAX_BYTES; /* a piece: as much as one answer carries */
    int stream = 0;
    if (rq->q.stream && strcmp(rq->q.stream, "stdout") != 0) {
        if (strcmp(rq->q.stream, "stderr") != 0) {
            ctld_reply_error(r, 400, "invalid", "stream: \"%s\" is not stdout or stderr",
                             rq->q.stream);
            return;
        }
        stream = 1;
    }
    /* an ended job's ranks, parsed before the lock */
    int ended_nt = ts_job_state_terminal(row->state) ? result_ranks(row) : 0;
    ctld_lock_reader(c);
    cjob *j = ctld_job_find(c, row->id);
    /* read under mu: the job may end once it is released; an ended job's
     * ranks are its spec's */
    int nt = j ? j->ntasks : ended_nt;
    if (nt > 0 && rank >= nt) {
        pthread_mutex_unlock(&c->mu);
        ctld_reply_error(r, 400, "invalid", "rank: the job has ranks 0..%d", nt - 1);
        return;
    }
    if (!j || !j->allocs ||
        (j->row.state != TS_JOB_RUNNING && j->row.state != TS_JOB_STOPPING)) {
        pthread_mutex_unlock(&c->mu);
        stored_output(c, row, (int)rank, stream, r);
        return;
    }
    int n = j->allocs[rank].node;
    ctld_agent *a = &c->agents[n];
    if (c->node_virtual[n] || !a->registered) {
        pthread_mutex_unlock(&c->mu);
        ctld_reply_error(r, 409, "conflict", "rank %ld runs on %s, %s", (long)rank,
                         c->cluster->nodes[n].name,
                         c->node_virtual[n] ? "a virtual node: it has no output"
                                            : "whose agent is not connected");
        return;
    }
    ctld_logreq *q = calloc(1, sizeof *q);
    if (!q) {
        pthread_mutex_unlock(&c->mu);
        ctld_reply_error(r, 503, "unavailable", "out of memory");
        return;
    }
    q->id = ++c->next_logreq;
    q->job = row->id;
    snprintf(q->tenant, sizeof q->tenant, "%s", row->tenant);
    q->rank = (int)rank;
    q->stream = stream;
    /* an answer carries at most this much; the API answer says it was cut */
    q->tail = tail < CTLD_LOG_ANSWER_MAX_BYTES ? tail : CTLD_LOG_ANSWER_MAX_BYTES;
    q->offset = offset;
    pthread_cond_init(&q->cv, NULL);
    pthread_mutex_unlock(&c->mu);
    /* the request waits on the node's own lock: the agent answers in a
     * sync that need not take c->mu */
    if (!logreq_add(c, n, q, r)) {
        pthread_cond_destroy(&q->cv);
        free(q);
        return;
    }
    /* the agent's long-poll answers; its document is unchanged, and so is
     * the generation a report is applied against (agents.c): the answer
     * rides on a same report */
    a->gen++;
    a->log_moves++;
    pthread_cond_broadcast(&a->moved);
    double until = ctld_now() + LOG_WAIT_S;
    while (!q->done && !__atomic_load_n(&c->stop, __ATOMIC_ACQUIRE) && ctld_now() < until)
        ctld_cond_wait_until(&q->cv, &a->mu, until);
    for (ctld_logreq **p = &a->logreqs; *p; p = &(*p)->next)
        if (*p == q) {
            *p = q->next;
            break;
        }
    pthread_mutex_unlock(&a->mu);
    json_t *ans = q->answer;
    pthread_cond_destroy(&q->cv);
    free(q);
    const char *err = json_string_value(json_object_get(ans, "error"));
    if (!ans)
        ctld_reply_error(r, 503, "unavailable", "the agent of %s did not answer within %.0f s",
                         c->cluster->nodes[n].name, LOG_WAIT_S);
    else if (err)
        ctld_reply_error(r, 404, "not_found", "rank %ld on %s: %s", (long)rank,
                         c->cluster->nodes[n].name, err);
    else
        live_answer(r, row->id, (int)rank, stream, tail, offset >= 0, ans);
    json_decref(ans);
}

