/*
 * agent_proto.h - the one codec of the agent protocol's task documents
 * (docs/agent-protocol.md, its contract docs/agent-protocol.schema.json).
 *
 * tesserad and tessera-agent both read and write these documents; before this
 * codec each side picked fields out of the JSON by hand, so a field read as 0
 * when it was missing or of the wrong type, and nothing said which. Here each
 * document is a typed struct with one encoder (struct -> JSON, the wire form)
 * and one decoder (JSON -> struct) that checks every field's type and range
 * against the schema and names the first wrong one: "tasks[3].exit_code: must
 * be an integer". Fields the schema does not describe are ignored by the
 * decoders (a newer peer may send more; the schema test holds both sides to
 * the contract).
 *
 * Ownership: a decoded struct borrows its strings from the JSON document it
 * was decoded from, valid while that document lives; nothing is allocated for
 * a single report. An encoder copies what it is given. Thread-safe: no state.
 */
#ifndef TESSERA_AGENT_PROTO_H
#define TESSERA_AGENT_PROTO_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tessera/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- task_report: one task in an agent's register or sync "tasks" ---------------- */

/* What the task is doing; NONE: the report carries no state (the controller
 * then ignores it). */
enum ts_report_state {
    TS_REPORT_NONE = 0,
    TS_REPORT_RUNNING,
    TS_REPORT_EXITED,
    TS_REPORT_FAILED,
    TS_REPORT_STOPPED,
};

/* How a stop ended (a stopped task's "outcome"); NONE: not given. */
enum ts_report_outcome {
    TS_OUTCOME_NONE = 0,
    TS_OUTCOME_CHECKPOINTED,
    TS_OUTCOME_EXITED,
    TS_OUTCOME_TERMINATED,
    TS_OUTCOME_KILLED,
    TS_OUTCOME_STOPPED,
};

/* The largest signal number a report may carry: an exit status reads 128 + N. */
#define TS_REPORT_SIGNAL_MAX 127

typedef struct ts_task_report {
    int64_t job;  /* >= 1 */
    int32_t rank; /* >= 0 */
    int32_t step; /* a step's task: >= 0; -1 a rank's own task */
    bool has_run;
    double run; /* the run it belongs to: the job's start, Unix s */
    enum ts_report_state state;
    enum ts_report_outcome outcome;
    bool has_exit_code;
    int32_t exit_code;
    int32_t signal;    /* the signal that ended it, 1..TS_REPORT_SIGNAL_MAX; 0 none */
    int64_t oom_kills; /* OOM kills in its cgroup; 0 none */
    bool timeout;      /* its time limit stopped it */
    bool has_time_limit;
    double time_limit_s; /* the limit that stopped it, sent with timeout */
    const char *error;      /* why it failed or never started; NULL none */
    bool launch;            /* it never started: error says why */
    const char *launch_end; /* the reason code of a start that failed; NULL none */
    double gpu_util;        /* its GPUs' mean utilisation, 0..100; < 0 not given */
    double step_s;          /* its training step's median seconds, > 0; < 0 not given */
    bool has_image_pull;    /* its image is coming */
    int64_t pull_done_bytes, pull_total_bytes;
    const char *pull_note; /* why the last try failed, "" none */
    bool has_output;       /* an ended task's last output ("output": {} when both are NULL) */
    const char *out_stdout, *out_stderr; /* NULL: none */
} ts_task_report;

/* A report with nothing set: step -1, gpu_util and step_s -1. */
void ts_task_report_init(ts_task_report *r);

/* The wire name of a state or an outcome; NULL for NONE. */
const char *ts_report_state_name(enum ts_report_state s);
const char *ts_report_outcome_name(enum ts_report_outcome o);

/* The report as a JSON object (a new reference); NULL when out of memory. */
json_t *ts_task_report_encode(const ts_task_report *r);

/* Decodes one report; `where` prefixes the field in an error ("tasks[3]").
 * Returns 0, TS_EINVAL naming the field and the reason. */
TS_MUST_CHECK int ts_task_report_decode(const json_t *o, const char *where, ts_task_report *r,
                                        ts_err *err);

/* Decodes a "tasks" array of reports into a new array (*out, freed with
 * free(); NULL when empty) of *n reports. A missing array (NULL) reads as
 * empty. Returns 0, TS_EINVAL naming "tasks[i].field", or TS_ENOMEM. */
TS_MUST_CHECK int ts_task_reports_decode(const json_t *tasks, ts_task_report **out, size_t *n,
                                         ts_err *err);

#ifdef __cplusplus
}
#endif
#endif
