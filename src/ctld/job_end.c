/*
 * job_end.c - how a job on agents ends, and why: each rank's end as its
 * agent reported it (exit code, signal, OOM kills, a start that failed, its
 * time limit), the job's end planned from them (completed, failed, timeout,
 * or requeued after a preemption), the result document and the one line of
 * why that the ended job keeps (docs/api.md "Job"), and time limits.
 *
 * Time limits are enforced twice, on purpose. Each agent stops its own
 * ranks at the deadline the controller gave it (agent.c), so neither a
 * controller outage nor a slow cycle lets a task outlive its limit. The
 * controller plans the same stop at the limit (ctld_time_limits, from the
 * cycle), so the job reads "stopping" with a "time-limit" event, the agents
 * that had not acted yet are told, and when every rank has ended the job is
 * "timeout" with its reason. A rank's report that its time limit stopped it
 * counts as the same, whichever came first. Virtual nodes keep their own
 * rule (a virtual run lasts its duration, loop.c).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctld/job_end.h"
#include "ctld/steps.h"

#define WHY_MAX_BYTES 512       /* the ended job's one line of why */
#define LAST_LINE_MAX_BYTES 160 /* of a failed rank's output, quoted in it */

double ctld_job_limit_s(const ctld *c, const cjob *j)
{
    return j->sj.time_limit_s > 0.0 ? j->sj.time_limit_s : c->cfg.sched.default_time_limit_s;
}

int ctld_limit_signal(const cjob *j)
{
    return j->spec->ckpt_signal > 0 ? j->spec->ckpt_signal : SIGTERM;
}

double ctld_limit_grace_s(const ctld *c, const cjob *j)
{
    return j->sj.ckpt_grace_s >= 0 ? j->sj.ckpt_grace_s : c->cfg.sched.default_grace_s;
}

/* "5s", "1m30s", "2h": a limit as the spec would write it. */
static void dur_text(double s, char *buf, size_t len)
{
    long long v = (long long)(s + 0.5), h = v / 3600, m = v / 60 % 60, x = v % 60;
    int n = 0;
    buf[0] = '\0';
    if (h)
        n += snprintf(buf + n, len - (size_t)n, "%lldh", h);
    if (m && n >= 0 && (size_t)n < len)
        n += snprintf(buf + n, len - (size_t)n, "%lldm", m);
    if ((x || v == 0) && n >= 0 && (size_t)n < len)
        snprintf(buf + n, len - (size_t)n, "%llds", x);
}

static const char *sig_name(int sig)
{
    static const struct { int n; const char *s; } T[] = {
        {SIGHUP, "SIGHUP"},   {SIGINT, "SIGINT"},   {SIGQUIT, "SIGQUIT"}, {SIGILL, "SIGILL"},
        {SIGTRAP, "SIGTRAP"}, {SIGABRT, "SIGABRT"}, {SIGBUS, "SIGBUS"},   {SIGFPE, "SIGFPE"},
        {SIGKILL, "SIGKILL"}, {SIGUSR1, "SIGUSR1"}, {SIGSEGV, "SIGSEGV"}, {SIGUSR2, "SIGUSR2"},
        {SIGPIPE, "SIGPIPE"}, {SIGALRM, "SIGALRM"}, {SIGTERM, "SIGTERM"}, {SIGXCPU, "SIGXCPU"},
        {SIGXFSZ, "SIGXFSZ"}, {SIGSYS, "SIGSYS"}};
    for (size_t i = 0; i < sizeof T / sizeof T[0]; i++)
        if (T[i].n == sig)
            return T[i].s;
    return "a signal";
}

/* The last non-empty line of text, cut to LAST_LINE_MAX_BYTES, into buf. */
static void last_line(const char *text, char *buf, size_t len)
{
    buf[0] = '\0';
    if (!text)
        return;
    size_t n = strlen(text);
    while (n > 0 && (text[n - 1] == '\n' || text[n - 1] == ' ' || text[n - 1] == '\r'))
        n--;
    size_t b = n;
    while (b > 0 && text[b - 1] != '\n')
        b--;
    size_t k = n - b < LAST_LINE_MAX_BYTES ? n - b : LAST_LINE_MAX_BYTES;
    snprintf(buf, len, "%.*s", (int)k, text + b);
}

/* One rank's end from its agent's report: {rank, node, end, exit_code,
 * signal, oom_kills, reason}. `end` is exited, signal, oom, timeout,
 * launch, stopped or lost; `reason` says it in words. */
static json_t *rank_end_json(const ctld *c, const cjob *j, int rank, const ts_task_report *rep)
{
    int sig = rep->signal;
    long long ooms = rep->oom_kills;
    char line[LAST_LINE_MAX_BYTES + 8], reason[WHY_MAX_BYTES];
    last_line(rep->out_stderr, line, sizeof line);
    if (!line[0])
        last_line(rep->out_stdout, line, sizeof line);
    const char *end;
    if (rep->timeout) {
        end = "timeout";
        snprintf(reason, sizeof reason, "stopped at its time limit (%s)",
                 sig ? sig_name(sig) : rep->has_exit_code ? "exited" : "ended");
    } else if (ooms > 0) {
        end = "oom";
        snprintf(reason, sizeof reason, "killed by the kernel's OOM killer (%lld kill%s in its "
                 "cgroup; memory_mib %lld)", ooms, ooms == 1 ? "" : "s",
                 (long long)j->allocs[rank].mem_mib);
    } else if (rep->error) {
        const char *le = rep->launch_end;
        end = rep->launch ? "launch" : "lost";
        if (le && strcmp(le, "image_not_found") == 0) /* its registry does not know it */
            end = "image_not_found";
        if (le && strcmp(le, "image_auth") == 0) /* its registry refused the credentials */
            end = "image_auth";
        if (le && strcmp(le, "prolog_failed") == 0) /* the node's prolog failed (drained) */
            end = "prolog_failed";
        /* stopped as it ran: no limits in force, or its layer filled the disk */
        bool ran = false;
        if (le && strcmp(le, "shim_not_loaded") == 0)
            end = "shim_not_loaded", ran = true;
        if (le && strcmp(le, "disk_pressure") == 0)
            end = "disk_pressure", ran = true;
        snprintf(reason, sizeof reason, "%s%s",
                 strcmp(end, "lost") != 0 && !ran ? "could not start: " : "", rep->error);
    } else if (rep->state == TS_REPORT_STOPPED) {
        end = "stopped";
        snprintf(reason, sizeof reason, "stopped (%s)",
                 rep->outcome ? ts_report_outcome_name(rep->outcome) : "on request");
    } else if (sig > 0) {
        end = "signal";
        snprintf(reason, sizeof reason, "killed by signal %d (%s)", sig, sig_name(sig));
    } else {
        end = "exited";
        snprintf(reason, sizeof reason, "exited with code %lld", (long long)rep->exit_code);
    }
    bool failure = strcmp(end, "signal") == 0 || strcmp(end, "oom") == 0 ||
                   (strcmp(end, "exited") == 0 && rep->exit_code != 0);
    if (failure && line[0]) /* its last words, where the user looks first */
        snprintf(reason + strlen(reason), sizeof reason - strlen(reason), CTLD_LAST_OUTPUT "%s",
                 line);
    return json_pack("{s:i,s:s,s:s,s:o,s:o,s:I,s:s}", "rank", rank, "node",
                     c->cluster->nodes[j->allocs[rank].node].name, "end", end, "exit_code",
                     rep->has_exit_code ? json_integer(rep->exit_code) : json_null(), "signal",
                     sig > 0 ? json_integer(sig) : json_null(), "oom_kills", (json_int_t)ooms, "reason",
                     reason);
}

int ctld_rank_end_note(const ctld *c, cjob *j, int rank, const ts_task_report *rep)
{
    if (!j->rank_end && !(j->rank_end = json_array()))
        return TS_ENOMEM;
    while ((int)json_array_size(j->rank_end) < j->ntasks)
        if (json_array_append_new(j->rank_end, json_null()) != 0)
            return TS_ENOMEM;
    json_t *e = rank_end_json(c, j, rank, rep);
    if (!e || json_array_set_new(j->rank_end, (size_t)rank, e) != 0)
        return TS_ENOMEM;
    if (rep->timeout)
        j->timed_out = true;
    return 0;
}

/* Whether a rank's end is a failure of the job. */
static bool rank_failed(const json_t *e)
{
    const char *end = json_string_value(json_object_get(e, "end"));
    return end && (strcmp(end, "stopped") != 0 && strcmp(end, "timeout") != 0) &&
           (strcmp(end, "exited") != 0 || json_integer_value(json_object_get(e, "exit_code")) != 0);
}

/* Whether every rank reported exiting 0 (a job that ends cleanly on its
 * time limit's signal: its exit code is 0, not null). */
static bool ranks_exited_0(const cjob *j)
{
    for (int r = 0; r < j->ntasks; r++) {
        const json_t *e = j->rank_end ? json_array_get(j->rank_end, (size_t)r) : NULL;
        const json_t *x = json_object_get(e, "exit_code");
        if (!json_is_integer(x) || json_integer_value(x) != 0 ||
            json_is_integer(json_object_get(e, "signal")))
            return false;
    }
    return j->ntasks > 0;
}

/* The result document: the job's exit code and signal (its first failed
 * rank's, else 0 and null), and every rank's end (null: not reported). */
static char *result_doc(const cjob *j, const json_t **first_failed)
{
    *first_failed = NULL;
    json_t *ranks = json_array();
    for (int r = 0; r < j->ntasks; r++) {
        json_t *e = j->rank_end ? json_array_get(j->rank_end, (size_t)r) : NULL;
        json_array_append(ranks, e ? e : json_null());
        if (!*first_failed && e && rank_failed(e))
            *first_failed = e;
    }
    const json_t *f = *first_failed;
    json_t *doc = json_pack("{s:o,s:O,s:o}", "exit_code", json_integer(0), "signal",
                            f ? json_object_get(f, "signal") : json_null(), "ranks", ranks);
    if (doc && f)
        json_object_set(doc, "exit_code", json_object_get(f, "exit_code"));
    if (!f && j->timed_out && !ranks_exited_0(j)) {
        /* stopped from outside: the signal that ended it, no exit code */
        json_object_set_new(doc, "exit_code", json_null());
        for (int r = 0; r < j->ntasks; r++) {
            json_t *e = json_array_get(ranks, (size_t)r);
            if (json_is_integer(json_object_get(e, "signal"))) {
                json_object_set(doc, "signal", json_object_get(e, "signal"));
                break;
            }
        }
    }
    char *s = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
    json_decref(doc);
    return s;
}

/* Plans the end event with its result; detail is also the event's. */
static int plan_end(ctld *c, ctld_txn *t, cjob *j, int event, const char *reason,
                    const char *detail, const char *why, double now, ts_err *err)
{
    const json_t *ff;
    char *result = result_doc(j, &ff);
    if (!result)
        return ts_err_set(err, TS_ENOMEM, "out of memory");
    /* the time its ranks ended on their nodes, where the controller heard
     * later (it was down): never before the run's start */
    double end = j->ended_at_s > j->row.start_s ? j->ended_at_s : 0;
    ctld_fsm_args a = {.detail = detail, .result_json = result, .end_reason = reason,
                       .end_why = why, .end_s = end};
    int rc = ctld_fsm_plan(c, t, j, event, &a, now, err);
    free(result);
    return rc;
}

static int settle_timeout(ctld *c, cjob *j, double now, ctld_txn *t, ts_err *err)
{
    char lim[32], why[WHY_MAX_BYTES];
    dur_text(ctld_job_limit_s(c, j), lim, sizeof lim);
    if (ranks_exited_0(j)) /* it stopped when asked: no SIGKILL was sent */
        snprintf(why, sizeof why, "time limit %s reached: %s; every rank exited 0 on it", lim,
                 sig_name(ctld_limit_signal(j)));
    else
        snprintf(why, sizeof why, "time limit %s reached: %s, then SIGKILL after %.0fs", lim,
                 sig_name(ctld_limit_signal(j)), ctld_limit_grace_s(c, j));
    return plan_end(c, t, j, CTLD_JE_TIMEOUT, "timeout", why, why, now, err);
}

static int settle_failed(ctld *c, cjob *j, int failed, double now, ctld_txn *t, ts_err *err)
{
    const json_t *f;
    char *tmp = result_doc(j, &f); /* for its first failed rank */
    free(tmp);
    char why[WHY_MAX_BYTES], detail[WHY_MAX_BYTES + 96];
    const char *end = f ? json_string_value(json_object_get(f, "end")) : NULL;
    if (f)
        snprintf(why, sizeof why, "rank %lld on %s %s",
                 (long long)json_integer_value(json_object_get(f, "rank")),
                 json_string_value(json_object_get(f, "node")),
                 json_string_value(json_object_get(f, "reason")));
    else
        snprintf(why, sizeof why, "a rank failed");
    /* events.c reads the counts from the detail's start */
    snprintf(detail, sizeof detail, "%d of %d ranks failed; the gang stops as one: %s", failed,
             j->ntasks, why);
    const char *reason = !end                           ? "failed"
                         : strcmp(end, "exited") == 0   ? "exit-code"
                         : strcmp(end, "signal") == 0   ? "signal"
                         : strcmp(end, "lost") == 0     ? "lost"
                                                        : end;
    return plan_end(c, t, j, CTLD_JE_FAIL, reason, detail, why, now, err);
}

/* A stop on request (preemption, idle reaping, a straggler's restart, a
 * user's cancel or requeue) that every rank finished: requeued, held if
 * reaped, cancelled if cancelled (ctld_fsm_plan picks the transition). */
static int settle_stopped(ctld *c, cjob *j, double now, ctld_txn *t, ts_err *err)
{
    char detail[160];
    const char *outcome = j->stop_outcome[0] ? j->stop_outcome : "stopped";
    if (j->cancel_stop) {
        snprintf(detail, sizeof detail, "every rank stopped (%s) after the cancel", outcome);
    } else if (j->reaped) {
        snprintf(detail, sizeof detail, "every rank stopped (%s) after the idle policy "
                 "reaped it; release it to run again", outcome);
    } else {
        int recent = 0;
        for (int k = 0; k < j->npreempted && k < CTLD_PREEMPT_MEMORY; k++)
            recent += now - j->preempted_at[k] < 3600.0;
        double at = j->restart_now
                        ? now
                        : now + ts_sched_backoff_s(c->sched, recent > 0 ? recent : 1);
        snprintf(detail, sizeof detail, "every rank stopped (%s); eligible again at %.0f",
                 outcome, at);
    }
    ctld_fsm_args a = {.detail = detail};
    return ctld_fsm_plan(c, t, j, CTLD_JE_STOPPED, &a, now, err);
}

int ctld_job_settle(ctld *c, cjob *j, double now, ctld_txn *t, ts_err *err)
{
    if (ctld_txn_has(t, j))
        return 0; /* already ending in this report */
    int done = 0, failed = 0, stopped = 0;
    /* a batch job's other ranks run nothing of their own (steps.h): its
     * script, in rank 0, is the job */
    int counted = ctld_job_is_batch(j) ? 1 : j->ntasks;
    for (int r = 0; r < counted; r++) {
        done += j->rank_state[r] == CTLD_RANK_DONE;
        failed += j->rank_state[r] == CTLD_RANK_FAILED;
        stopped += j->rank_state[r] == CTLD_RANK_STOPPED;
    }
    done += j->ntasks - counted;
    bool ended = stopped + done + failed == j->ntasks;
    bool active = j->row.state == TS_JOB_RUNNING || j->row.state == TS_JOB_STOPPING;
    if (j->timed_out && active && ended)
        return settle_timeout(c, j, now, t, err);
    if (j->timed_out && j->row.state == TS_JOB_RUNNING) { /* an agent acted first */
        char lim[32], d[128];
        dur_text(ctld_job_limit_s(c, j), lim, sizeof lim);
        snprintf(d, sizeof d, "time limit %s reached (on its node)", lim);
        ctld_fsm_args a = {.detail = d, .stop_by_s = now + ctld_limit_grace_s(c, j)};
        return ctld_fsm_plan(c, t, j, CTLD_JE_EXPIRE, &a, now, err);
    }
    if (j->timed_out)
        return 0;
    if (j->row.state == TS_JOB_RUNNING && failed > 0)
        return settle_failed(c, j, failed, now, t, err);
    if (j->row.state == TS_JOB_RUNNING && done == j->ntasks)
        return plan_end(c, t, j, CTLD_JE_FINISH, NULL, NULL, NULL, now, err);
    if (j->row.state == TS_JOB_STOPPING && ended)
        return settle_stopped(c, j, now, t, err);
    return 0;
}

int ctld_time_limits(ctld *c, double now, ctld_txn *t, ts_err *err)
{
    for (int i = 0; i < c->njobs; i++) {
        cjob *j = c->jobs[i];
        if (j->pinned || j->is_virtual || j->row.state != TS_JOB_RUNNING || !j->allocs ||
            j->row.start_s <= 0 || now < j->row.start_s + ctld_job_limit_s(c, j) ||
            ctld_txn_has(t, j))
            continue;
        char lim[32], d[160];
        dur_text(ctld_job_limit_s(c, j), lim, sizeof lim);
        snprintf(d, sizeof d, "time limit %s reached: %s to every rank, SIGKILL after %.0fs",
                 lim, sig_name(ctld_limit_signal(j)), ctld_limit_grace_s(c, j));
        ctld_fsm_args a = {.detail = d, .stop_by_s = now + ctld_limit_grace_s(c, j)};
        int rc = ctld_fsm_plan(c, t, j, CTLD_JE_EXPIRE, &a, now, err);
        if (rc != 0)
            return rc;
    }
    return 0;
}

double ctld_next_limit_s(const ctld *c)
{
    double next = 0;
    for (int i = 0; i < c->njobs; i++) {
        const cjob *j = c->jobs[i];
        if (j->is_virtual || j->row.state != TS_JOB_RUNNING || j->row.start_s <= 0)
            continue;
        double at = j->row.start_s + ctld_job_limit_s(c, j);
        if (next <= 0 || at < next)
            next = at;
    }
    return next;
}
