/*
 * agents_answer.c - a register's or sync's answer to a node's agent
 * (docs/agent-protocol.md): the node's published desired document, rebuilt
 * under c->mu when something in it changed (agents_desired.c), with this
 * answer's own members added (its generation and clock, the output
 * requests, the sessions), written out with no lock held.
 *
 * Apart from agents.c, which decodes and applies what the agent reports,
 * because this is the one place an answer's text is made, and its locks
 * matter: a node's tasks reach tens of MB (32 MiB budget), whose text takes
 * most of a second to write, and a change on the node takes a->mu under
 * c->mu (ctld_agent_moved). So the answer's members go on a copy of the
 * published document's top (its tasks shared: a published document is never
 * changed, only replaced), and the copy is written after a->mu is released.
 * Also the refusal of a second agent's registration (ctld_agent_second).
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctld/agents.h"
#include "ctld/ctld.h"
#include "ctld/http.h"
#include "tessera/agent_proto.h"

/* The output requests not yet answered, into d's logs; under a->mu.
 * False: out of memory. */
static bool logs_wanted(const ctld_agent *a, ts_desired *d)
{
    int n = 0;
    for (const ctld_logreq *q = a->logreqs; q; q = q->next)
        n += !q->done;
    d->present |= TS_DS_BIT(TS_DS_LOGS);
    d->logs = n > 0 ? calloc((size_t)n, sizeof *d->logs) : NULL;
    if (n && !d->logs)
        return false;
    for (const ctld_logreq *q = a->logreqs; q; q = q->next)
        if (!q->done)
            d->logs[d->nlogs++] = (ts_desired_log){.id = q->id, .job = q->job, .rank = q->rank,
                                                   .is_stderr = q->stream != 0, .tail = q->tail,
                                                   .has_offset = q->offset >= 0,
                                                   .offset = q->offset >= 0 ? q->offset : 0};
    return true;
}

/* The answer's members that move under the agent's own lock, set on ans
 * (a copy of the node's published document's top): its generation and
 * clock, the output requests, the sessions. Under a->mu; false: out of
 * memory. */
static bool answer_now(ctld *c, int n, ctld_agent *a, json_t *ans)
{
    ts_desired d = {.present = TS_DS_BIT(TS_DS_GEN) | TS_DS_BIT(TS_DS_NOW),
                    .gen = (int64_t)a->gen,
                    .now = ctld_now()}; /* its deadlines' clock */
    bool ok = logs_wanted(a, &d) && ts_desired_encode_into(&d, ans) == 0;
    ts_desired_fini(&d);
    return ok && ctld_sessions_wanted(c, n, ans) == 0;
}

/* The node's desired document, answered from the published one; rebuilt
 * under c->mu if something in it changed (a cycle that plans meanwhile
 * leaves the live node alone: tessera/cycle.h). Under a->mu, held on
 * return; false: out of memory. */
static bool publish_desired(ctld *c, int n)
{
    ctld_agent *a = &c->agents[n];
    while (!a->doc_ok) {
        pthread_mutex_unlock(&a->mu);
        ctld_lock_reader(c);
        json_t *d = ctld_agent_desired(c, n);
        pthread_mutex_lock(&a->mu);
        /* what it shows changes under c->mu only, held since it was built */
        json_decref(a->doc);
        a->doc = d;
        a->doc_ok = d != NULL;
        pthread_mutex_unlock(&c->mu);
        if (!d)
            return false;
    }
    return true;
}

/* Test builds: TESSERAD_TEST_ANSWER_DELAY_MS (1..10000) stretches the
 * writing of every register and sync answer by that long, as a node's
 * answer of tens of MB takes, so a test can check that nothing else waits
 * for it (tests/ctld/answer_write_test.py); nothing otherwise. */
static void answer_test_delay(void)
{
#ifdef TS_STORE_FAULTS_ENV
    const char *d = getenv("TESSERAD_TEST_ANSWER_DELAY_MS");
    long ms = d ? atol(d) : 0;
    if (ms > 0 && ms <= 10000)
        nanosleep(&(struct timespec){ms / 1000, ms % 1000 * 1000000L}, NULL);
#endif
}

void ctld_agent_answer(ctld *c, int n, ctld_reply *r)
{
    ctld_agent *a = &c->agents[n];
    json_t *ans = publish_desired(c, n) ? json_copy(a->doc) : NULL;
    bool ok = ans && answer_now(c, n, a, ans);
    pthread_mutex_unlock(&a->mu);
    if (ok)
        answer_test_delay();
    char *body = ok ? json_dumps(ans, JSON_COMPACT) : NULL;
    if (ans)
        ctld_sessions_forget(ans); /* the sessions' secrets stay in the answer sent only */
    /* the copy goes under a->mu, as a published document does: which of the
     * two drops a shared task last (and frees it) is then ordered by the lock,
     * not only by jansson's atomic counts, which ThreadSanitizer cannot see */
    pthread_mutex_lock(&a->mu);
    json_decref(ans);
    pthread_mutex_unlock(&a->mu);
    if (!body) {
        ctld_reply_error(r, 503, "unavailable", "out of memory");
        return;
    }
    r->status = 200;
    r->content_type = "application/json";
    r->body = body;
}

/* A registration of another agent than the node's registered one while
 * that one is heard from: refused with 409, as a second agent would start
 * the node's tasks again (its own state directory holds none of them).
 * Under a->mu. */
bool ctld_agent_second(const ctld *c, int n, const ts_sync *in, double now, ctld_reply *r)
{
    const ctld_agent *a = &c->agents[n];
    const char *id = in->present & TS_SY_BIT(TS_SY_AGENT) && in->agent ? in->agent : "";
    double quiet = now - a->holder_seen_s;
    if (!a->identity[0] || !id[0] || strcmp(a->identity, id) == 0 ||
        quiet >= c->cfg.node_lost_s)
        return false;
    ctld_reply_error(r, 409, "conflict", "node %s: another tessera-agent serves it (%.64s, "
                     "heard %.0f s ago), not this one (%.64s): a second agent for one node "
                     "would start its tasks again; stop one of them (this one is refused until "
                     "the other has been silent for node_lost_after, %.0f s)",
                     c->cluster->nodes[n].name, a->identity, quiet, id, c->cfg.node_lost_s);
    return true;
}
