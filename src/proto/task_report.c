/*
 * task_report.c - the codec of a task report, one task in an agent's
 * register or sync "tasks" (tessera/agent_proto.h; the schema's
 * $defs/task_report). The agent encodes what it sees of each task; tesserad
 * decodes the reports once per sync and works on the structs (agents.c,
 * steps.c, job_end.c), so a missing or ill-typed field is refused with its
 * name at the door instead of reading as 0 deep inside.
 *
 * The encoder writes a fixed order of members (job, rank, step, run, state,
 * ...); the order carries no meaning on the wire.
 */
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "proto/proto_fields.h"
#include "tessera/agent_proto.h"

static const char *const STATE_NAMES[] = {NULL, "running", "exited", "failed", "stopped"};
static const char *const OUTCOME_NAMES[] = {NULL,     "checkpointed", "exited",
                                            "terminated", "killed",   "stopped"};
#define NSTATES ((int)(sizeof STATE_NAMES / sizeof *STATE_NAMES))
#define NOUTCOMES ((int)(sizeof OUTCOME_NAMES / sizeof *OUTCOME_NAMES))

void ts_task_report_init(ts_task_report *r)
{
    memset(r, 0, sizeof *r);
    r->step = -1;
    r->gpu_util = -1;
    r->step_s = -1;
}

const char *ts_report_state_name(enum ts_report_state s)
{
    return (int)s > 0 && (int)s < NSTATES ? STATE_NAMES[s] : NULL;
}

const char *ts_report_outcome_name(enum ts_report_outcome o)
{
    return (int)o > 0 && (int)o < NOUTCOMES ? OUTCOME_NAMES[o] : NULL;
}

/* Sets o[key] to v, consuming v; false when out of memory. */
static bool report_set(json_t *o, const char *key, json_t *v)
{
    return v && json_object_set_new(o, key, v) == 0;
}

static bool report_set_str(json_t *o, const char *key, const char *s)
{
    return !s || report_set(o, key, json_string(s));
}

/* A reading that is not a finite number is not written (JSON has none):
 * the report goes without it rather than not at all. */
static bool report_set_real(json_t *o, const char *key, double x)
{
    return !isfinite(x) || report_set(o, key, json_real(x));
}

/* How it ended and what it last wrote, for an ended task. */
static bool report_encode_end(const ts_task_report *r, json_t *o)
{
    bool ok = true;
    if (r->has_output) {
        json_t *out = json_object();
        ok = out && report_set_str(out, "stdout", r->out_stdout) &&
             report_set_str(out, "stderr", r->out_stderr);
        ok = ok && report_set(o, "output", out);
        if (!ok)
            json_decref(out);
    }
    if (ok && r->has_exit_code)
        ok = report_set(o, "exit_code", json_integer(r->exit_code));
    if (ok && r->signal > 0)
        ok = report_set(o, "signal", json_integer(r->signal));
    if (ok && r->oom_kills > 0)
        ok = report_set(o, "oom_kills", json_integer(r->oom_kills));
    if (ok && r->timeout)
        ok = report_set(o, "timeout", json_true());
    if (ok && r->has_time_limit)
        ok = report_set_real(o, "time_limit_s", r->time_limit_s);
    if (ok && r->ended_at > 0)
        ok = report_set_real(o, "ended_at", r->ended_at);
    return ok;
}

json_t *ts_task_report_encode(const ts_task_report *r)
{
    json_t *o = json_object();
    bool ok = o && report_set(o, "job", json_integer(r->job)) &&
              report_set(o, "rank", json_integer(r->rank));
    if (ok && r->step >= 0)
        ok = report_set(o, "step", json_integer(r->step));
    if (ok && r->has_run)
        ok = report_set_real(o, "run", r->run);
    ok = ok && report_set_str(o, "state", ts_report_state_name(r->state)) &&
         report_set_str(o, "outcome", ts_report_outcome_name(r->outcome)) &&
         report_set_str(o, "error", r->error);
    if (ok && r->launch)
        ok = report_set(o, "launch", json_true());
    ok = ok && report_set_str(o, "launch_end", r->launch_end);
    if (ok && r->has_image_pull)
        ok = report_set(o, "image_pull",
                        json_pack("{s:I,s:I,s:s}", "done_bytes", (json_int_t)r->pull_done_bytes,
                                  "total_bytes", (json_int_t)r->pull_total_bytes, "note",
                                  r->pull_note ? r->pull_note : ""));
    if (ok && r->gpu_util >= 0)
        ok = report_set_real(o, "gpu_util", r->gpu_util);
    if (ok && r->step_s > 0)
        ok = report_set_real(o, "step_s", r->step_s);
    ok = ok && report_encode_end(r, o);
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* image_pull and output, the report's two objects. */
static int report_decode_objects(const json_t *o, const char *where, ts_task_report *r,
                                 ts_err *err)
{
    const json_t *pull, *out;
    char sub[160];
    int rc = proto_obj(o, where, "image_pull", &pull, err);
    if (rc == 0 && pull) {
        snprintf(sub, sizeof sub, "%s%simage_pull", where, *where ? "." : "");
        bool p;
        r->has_image_pull = true;
        r->pull_note = "";
        rc = proto_need(pull, sub, "done_bytes", err);
        rc = rc ? rc : proto_need(pull, sub, "total_bytes", err);
        rc = rc ? rc : proto_need(pull, sub, "note", err);
        rc = rc ? rc : proto_int(pull, sub, "done_bytes", 0, INT64_MAX, &r->pull_done_bytes, &p, err);
        rc = rc ? rc : proto_int(pull, sub, "total_bytes", 0, INT64_MAX, &r->pull_total_bytes, &p, err);
        rc = rc ? rc : proto_str(pull, sub, "note", &r->pull_note, err);
    }
    rc = rc ? rc : proto_obj(o, where, "output", &out, err);
    if (rc == 0 && out) {
        snprintf(sub, sizeof sub, "%s%soutput", where, *where ? "." : "");
        r->has_output = true;
        rc = proto_str(out, sub, "stdout", &r->out_stdout, err);
        rc = rc ? rc : proto_str(out, sub, "stderr", &r->out_stderr, err);
    }
    return rc;
}

/* How it ended: exit code, signal, OOM kills, time limit. */
static int report_decode_end(const json_t *o, const char *where, ts_task_report *r, ts_err *err)
{
    int64_t v = 0;
    bool p;
    int rc = proto_int(o, where, "exit_code", INT32_MIN, INT32_MAX, &v, &r->has_exit_code, err);
    r->exit_code = (int32_t)v;
    v = 0;
    rc = rc ? rc : proto_int(o, where, "signal", 1, TS_REPORT_SIGNAL_MAX, &v, &p, err);
    r->signal = (int32_t)v;
    rc = rc ? rc : proto_int(o, where, "oom_kills", 1, INT64_MAX, &r->oom_kills, &p, err);
    rc = rc ? rc : proto_true(o, where, "timeout", &r->timeout, err);
    rc = rc ? rc : proto_num(o, where, "time_limit_s", -INFINITY, INFINITY, &r->time_limit_s,
                             &r->has_time_limit, err);
    rc = rc ? rc : proto_pos(o, where, "ended_at", &r->ended_at, &p, err);
    return rc;
}

int ts_task_report_decode(const json_t *o, const char *where, ts_task_report *r, ts_err *err)
{
    ts_task_report_init(r);
    where = where ? where : "";
    if (!json_is_object(o))
        return ts_err_set(err, TS_EINVAL, "%s: must be an object", *where ? where : "report");
    int64_t v = 0;
    bool p;
    int st = 0, oc = 0;
    int rc = proto_need(o, where, "job", err);
    rc = rc ? rc : proto_need(o, where, "rank", err);
    rc = rc ? rc : proto_int(o, where, "job", 1, INT64_MAX, &r->job, &p, err);
    rc = rc ? rc : proto_int(o, where, "rank", 0, INT32_MAX, &v, &p, err);
    r->rank = (int32_t)v;
    rc = rc ? rc : proto_int(o, where, "step", 0, INT32_MAX, &v, &p, err);
    if (rc == 0 && p)
        r->step = (int32_t)v;
    rc = rc ? rc : proto_num(o, where, "run", -INFINITY, INFINITY, &r->run, &r->has_run, err);
    rc = rc ? rc : proto_enum(o, where, "state", STATE_NAMES, NSTATES, &st, err);
    rc = rc ? rc : proto_enum(o, where, "outcome", OUTCOME_NAMES, NOUTCOMES, &oc, err);
    r->state = (enum ts_report_state)st;
    r->outcome = (enum ts_report_outcome)oc;
    rc = rc ? rc : report_decode_end(o, where, r, err);
    rc = rc ? rc : proto_str(o, where, "error", &r->error, err);
    rc = rc ? rc : proto_true(o, where, "launch", &r->launch, err);
    rc = rc ? rc : proto_str(o, where, "launch_end", &r->launch_end, err);
    rc = rc ? rc : proto_num(o, where, "gpu_util", 0, 100, &r->gpu_util, &p, err);
    rc = rc ? rc : proto_pos(o, where, "step_s", &r->step_s, &p, err);
    rc = rc ? rc : report_decode_objects(o, where, r, err);
    return rc;
}

int ts_task_reports_decode(const json_t *tasks, ts_task_report **out, size_t *n, ts_err *err)
{
    *out = NULL;
    *n = 0;
    if (!tasks)
        return 0;
    if (!json_is_array(tasks))
        return ts_err_set(err, TS_EINVAL, "tasks: must be an array");
    size_t len = json_array_size(tasks);
    if (len == 0)
        return 0;
    ts_task_report *v = calloc(len, sizeof *v);
    if (!v)
        return ts_err_set(err, TS_ENOMEM, "tasks: out of memory");
    for (size_t i = 0; i < len; i++) {
        char where[32];
        snprintf(where, sizeof where, "tasks[%zu]", i);
        int rc = ts_task_report_decode(json_array_get(tasks, i), where, &v[i], err);
        if (rc != 0) {
            free(v);
            return rc;
        }
    }
    *out = v;
    *n = len;
    return 0;
}
