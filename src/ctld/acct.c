/*
 * acct.c - GET /v1/acct: one accounting row per job (docs/api.md
 * "Accounting"), as JSON or CSV, paged by job id.
 *
 * A row is a job whose run or wait touches [from, to): submitted before
 * to, and not ended before from. Its gpu_hours are its GPUs times the part
 * of its run inside the window, so a window's rows add up the way
 * /v1/usage's groups do. Rows come from the jobs table a page at a time;
 * a page may hold fewer rows than limit (jobs outside the window are
 * skipped), and next_cursor is null only when the table has no more.
 *
 * Visibility: admin and cluster-viewer see every row; tenant-admin and a
 * tenant's viewer their tenant's; a user its own jobs only.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctld/ctld.h"
#include "ctld/http.h"
#include "ctld/router.h"
#include "ctld/input.h"
#include "ctld/steps.h"
#include "model/csv_reader.h"

#define ACCT_LIMIT_DEFAULT 100
#define ACCT_LIMIT_MAX 1000

typedef struct acct_row {
    const ts_job_row *row;
    int state;
    double start_s, end_s;
    /* a copy: a kept row is written after mu is released (its steps are
     * read first), when the job it was read from may have left memory */
    char gpu_model[TS_STORE_NAME_MAX];
    double elapsed_s, gpu_hours;
    json_t *exit_code; /* null when unknown */
    int signal;        /* the signal that ended it (its first failed rank's), 0 none */
    char reason[TS_STORE_REASON_MAX]; /* how it ended (exit-code, timeout, cancel, ...) */
} acct_row;

static const char *tier_name(int tier)
{
    return tier == TS_TIER_GUARANTEED ? "guaranteed" : "opportunistic";
}

/* The job as memory has it when it is active (its store row may lag). */
static void fill(ctld *c, const ts_job_row *row, double from, double to, double now,
                 acct_row *o)
{
    const cjob *a = ctld_job_find(c, row->id);
    const ts_job_row *m = a ? &a->row : row;
    o->row = row;
    o->state = m->state;
    o->start_s = m->start_s;
    o->end_s = m->end_s;
    snprintf(o->gpu_model, sizeof o->gpu_model, "%s", m->gpu_model);
    double end = m->end_s > 0 ? m->end_s : now;
    o->elapsed_s = m->start_s > 0 && end > m->start_s ? end - m->start_s : 0;
    double lo = m->start_s > from ? m->start_s : from, hi = end < to ? end : to;
    o->gpu_hours = m->start_s > 0 && hi > lo ? (hi - lo) * row->gpus / 3600.0 : 0;
    json_error_t je;
    json_t *res = m->result_json ? json_loads(m->result_json, 0, &je) : NULL;
    json_t *code = res ? json_object_get(res, "exit_code") : NULL;
    o->exit_code = json_is_integer(code) ? json_incref(code) : json_null();
    o->signal = (int)json_integer_value(json_object_get(res, "signal"));
    json_decref(res);
    snprintf(o->reason, sizeof o->reason, "%s", ts_job_state_terminal(m->state) ? m->reason : "");
}

static bool in_window(const ctld *c, const ts_job_row *row, double from, double to)
{
    const cjob *a = ctld_job_find((ctld *)c, row->id);
    const ts_job_row *m = a ? &a->row : row;
    return m->submit_s < to && !(m->end_s > 0 && m->end_s < from);
}

static json_t *row_json(const acct_row *o)
{
    const ts_job_row *r = o->row;
    return json_pack("{s:I,s:s,s:s,s:s,s:s,s:s,s:i,s:s,s:O,s:o,s:o,s:f,s:o,s:o,s:f,s:f,s:i}",
                     "id", (json_int_t)r->id, "tenant", r->tenant, "user", r->owner, "name",
                     r->name, "tier", tier_name(r->tier), "gpu_model", o->gpu_model, "gpus",
                     r->gpus, "state", ts_job_state_name(o->state), "exit_code", o->exit_code,
                     "signal", o->signal > 0 ? json_integer(o->signal) : json_null(), "reason",
                     o->reason[0] ? json_string(o->reason) : json_null(), "submit", r->submit_s,
                     "start", o->start_s > 0 ? json_real(o->start_s) : json_null(), "end",
                     o->end_s > 0 ? json_real(o->end_s) : json_null(), "elapsed_s", o->elapsed_s,
                     "gpu_hours", o->gpu_hours, "preemptions", r->preemptions);
}

/* The columns a job's row and its steps' rows share: tenant, user, job
 * name, tier and GPU model, between the id and the GPU count. */
static void csv_who(FILE *f, const acct_row *o)
{
    const ts_job_row *r = o->row;
    ts_csv_put_field(f, r->tenant);
    fputc(',', f);
    ts_csv_put_field(f, r->owner);
    fputc(',', f);
    ts_csv_put_field(f, r->name);
    fprintf(f, ",%s,", tier_name(r->tier));
    ts_csv_put_field(f, o->gpu_model);
}

static void csv_row(FILE *f, const acct_row *o)
{
    const ts_job_row *r = o->row;
    fprintf(f, "%lld,", (long long)r->id);
    csv_who(f, o);
    fprintf(f, ",%d,%s,", r->gpus, ts_job_state_name(o->state));
    if (json_is_integer(o->exit_code))
        fprintf(f, "%lld", (long long)json_integer_value(o->exit_code));
    fprintf(f, ",%.3f,", r->submit_s);
    if (o->start_s > 0)
        fprintf(f, "%.3f", o->start_s);
    fputc(',', f);
    if (o->end_s > 0)
        fprintf(f, "%.3f", o->end_s);
    fprintf(f, ",%.3f,%.6f,%d,", o->elapsed_s, o->gpu_hours, r->preemptions);
    if (o->signal > 0)
        fprintf(f, "%d", o->signal);
    fputc(',', f);
    ts_csv_put_field(f, o->reason);
    fputs("\r\n", f);
}

/* A step's row after its job's (?steps=true): sacct's JOB.STEP. Its
 * gpu_hours are the step's whole GPU-seconds, not cut to the window. */
static json_t *step_row(const json_t *s)
{
    const json_t *st = json_object_get(s, "start"), *en = json_object_get(s, "end");
    double el = json_is_number(en) ? json_number_value(en) - json_number_value(st) : 0;
    return json_pack("{s:O,s:O,s:O,s:O,s:O,s:O,s:f,s:f}", "name", json_object_get(s, "name"),
                     "state", json_object_get(s, "state"), "exit_code",
                     json_object_get(s, "exit_code"), "ntasks", json_object_get(s, "ntasks"),
                     "start", st, "end", en ? en : json_null(), "elapsed_s", el > 0 ? el : 0.0,
                     "gpu_hours",
                     json_number_value(json_object_get(s, "gpu_seconds")) / 3600.0);
}

static void csv_step(FILE *f, const acct_row *o, const json_t *s)
{
    const ts_job_row *r = o->row;
    const json_t *en = json_object_get(s, "end"), *code = json_object_get(s, "exit_code");
    const char *name = json_string_value(json_object_get(s, "name"));
    const char *state = json_string_value(json_object_get(s, "state"));
    fprintf(f, "%s,", name ? name : "");
    csv_who(f, o);
    fprintf(f, ",%d,%s,", r->gpus, state ? state : "");
    if (json_is_integer(code))
        fprintf(f, "%lld", (long long)json_integer_value(code));
    double st = json_number_value(json_object_get(s, "start"));
    fprintf(f, ",%.3f,%.3f,", r->submit_s, st);
    if (json_is_number(en))
        fprintf(f, "%.3f", json_number_value(en));
    double el = json_is_number(en) ? json_number_value(en) - st : 0;
    fprintf(f, ",%.3f,%.6f,%d,,\r\n", el > 0 ? el : 0,
            json_number_value(json_object_get(s, "gpu_seconds")) / 3600.0, 0);
}

/* GET /v1/acct's query, checked. */
struct acct_query {
    bool csv, with_steps;
    int64_t limit, after;
    double now, from, to;
    ts_job_filter f; /* narrowed to what the caller sees */
    bool none;       /* asks for rows the caller may not see: an empty answer */
};

/* A parameter that is one of two words: *which 0 for a, 1 for b, unchanged
 * when absent; false: r answered 400 naming it. */
static bool one_of(const char *v, const char *name, const char *a, const char *b, int *which,
                   ctld_reply *r)
{
    if (!v)
        return true;
    if (strcmp(v, a) == 0 || strcmp(v, b) == 0) {
        *which = strcmp(v, a) == 0 ? 0 : 1;
        return true;
    }
    ctld_reply_error(r, 400, "invalid", "%s: must be %s or %s, not \"%s\"", name, a, b, v);
    return false;
}

/* The query into o; false: r answered 400 naming the parameter. */
static bool acct_query(const ctld_caller *w, const ctld_query *q, struct acct_query *o,
                       ctld_reply *r)
{
    int format = 0, steps = 1; /* json, false */
    if (!one_of(q->format, "format", "json", "csv", &format, r) ||
        !one_of(q->steps, "steps", "true", "false", &steps, r))
        return false;
    o->csv = format == 1;
    o->with_steps = steps == 0;
    o->limit = ACCT_LIMIT_DEFAULT;
    o->after = 0;
    if ((q->limit && !ctld_parse_number(q->limit, "limit", 1, ACCT_LIMIT_MAX, &o->limit, r)) ||
        (q->cursor && !ctld_parse_number(q->cursor, "cursor", 0, INT64_MAX, &o->after, r)))
        return false;
    o->now = ctld_now();
    o->from = 0;
    o->to = o->now + 1;
    if ((q->from && !ctld_time_of(q->from, "from", &o->from, r)) ||
        (q->to && !ctld_time_of(q->to, "to", &o->to, r)))
        return false;
    if (!(o->to > o->from)) {
        ctld_reply_error(r, 400, "invalid", "to: must be after from");
        return false;
    }
    o->f = (ts_job_filter){.tenant = q->tenant, .owner = q->owner};
    if (!ctld_states_of(q->state, &o->f.states, r))
        return false;
    o->none = false;
    if (!ctld_sees_all(w)) {
        o->none |= o->f.tenant && strcmp(o->f.tenant, w->tenant) != 0;
        o->f.tenant = w->tenant;
        if (w->role == TS_ROLE_USER) {
            o->none |= o->f.owner && strcmp(o->f.owner, w->name) != 0;
            o->f.owner = w->name;
        }
    }
    return true;
}

#define ACCT_EVENTS_PAGE 1000 /* a job's events read at once for its earlier runs */

/* The runs before a job's last one (a preemption, a requeue: its
 * "run-ended" events, as usage counts them), clipped to [from, to), added
 * to its GPU-hours: a store read, with mu released. Only for a job that
 * ran more than once. 0, or the store's error. */
static int earlier_runs(ctld *c, acct_row *o, double from, double to, ts_err *err)
{
    if (o->row->preemptions <= 0 && o->row->restarts <= 0)
        return 0;
    int64_t after = 0;
    for (;;) {
        ts_event_row *ev = NULL;
        int ne = 0;
        int rc = ts_store_event_list(c->store, o->row->id, after, ACCT_EVENTS_PAGE, &ev, &ne,
                                     err);
        if (rc)
            return rc;
        for (int i = 0; i < ne; i++) {
            ts_run_ended run;
            if (!ts_run_ended_parse(&ev[i], &run))
                continue;
            double lo = run.start_s > from ? run.start_s : from;
            double hi = run.end_s < to ? run.end_s : to;
            if (hi > lo)
                o->gpu_hours += (hi - lo) * run.gpus / 3600.0;
        }
        after = ne > 0 ? ev[ne - 1].id : after;
        ts_store_free_events(ev, ne);
        if (ne < ACCT_EVENTS_PAGE)
            return 0;
    }
}

/* One kept row (and its steps) into the CSV being written (out), or into
 * the JSON answer's array a; steps: its steps, NULL when not asked for. */
static void emit_kept(FILE *out, bool csv, bool with_steps, const acct_row *o, json_t *steps,
                      json_t *a)
{
    size_t k;
    json_t *s;
    if (out) {
        csv_row(out, o);
        json_array_foreach(steps, k, s)
        {
            csv_step(out, o, s);
        }
    } else if (!csv) {
        json_t *row = row_json(o);
        if (with_steps) {
            json_t *sr = json_array();
            json_array_foreach(steps, k, s)
            {
                json_array_append_new(sr, step_row(s));
            }
            json_object_set_new(row, "steps", sr);
        }
        json_array_append_new(a, row);
    }
}

void ctld_acct(ctld *c, const ctld_request *rq, ctld_reply *r)
{
    struct acct_query aq;
    if (!acct_query(rq->who, &rq->q, &aq, r))
        return;
    const bool csv = aq.csv, with_steps = aq.with_steps;
    const int64_t limit = aq.limit, after = aq.after;
    const double now = aq.now, from = aq.from, to = aq.to;
    const ts_job_filter f = aq.f;
    ts_job_row *rows = NULL;
    int n = 0;
    ts_err err;
    if (!aq.none && ts_store_job_list(c->store, &f, after, limit, &rows, &n, &err) != 0) {
        ctld_reply_error(r, 503, "unavailable", "%s", err.msg);
        return;
    }
    char cur[32];
    snprintf(cur, sizeof cur, "%lld", n > 0 ? (long long)rows[n - 1].id : 0LL);
    bool more = n == limit;
    json_t *a = json_array();
    char *text = NULL;
    size_t tlen = 0;
    FILE *out = csv ? open_memstream(&text, &tlen) : NULL;
    if (csv && out)
        fputs("id,tenant,user,name,tier,gpu_model,gpus,state,exit_code,submit,start,end,"
              "elapsed_s,gpu_hours,preemptions,signal,reason\r\n", out);
    /* the rows under mu; their steps (a store read for an ended job's)
     * after, with mu released */
    acct_row *kept = n > 0 ? calloc((size_t)n, sizeof *kept) : NULL;
    int nkept = 0;
    ctld_lock_reader(c);
    for (int i = 0; i < n; i++) {
        if (!in_window(c, &rows[i], from, to))
            continue;
        acct_row o;
        fill(c, &rows[i], from, to, now, &o);
        if (f.states && !(f.states & (1u << o.state))) {
            json_decref(o.exit_code);
            continue;
        }
        if (kept) {
            kept[nkept++] = o;
            continue;
        }
        if (out)
            csv_row(out, &o);
        else if (!csv)
            json_array_append_new(a, row_json(&o));
        json_decref(o.exit_code);
    }
    pthread_mutex_unlock(&c->mu);
    for (int i = 0; i < nkept; i++) {
        acct_row *o = &kept[i];
        json_t *steps = NULL;
        ts_err serr;
        if (earlier_runs(c, o, from, to, &serr) != 0 ||
            (with_steps && !(steps = ctld_steps_of(c, o->row->id, &serr)))) {
            for (int k = i; k < nkept; k++)
                json_decref(kept[k].exit_code);
            free(kept);
            if (out)
                fclose(out);
            free(text);
            json_decref(a);
            ts_store_free_jobs(rows, n);
            ctld_reply_error(r, 503, "unavailable", "%s", serr.msg);
            return;
        }
        emit_kept(out, csv, with_steps, o, steps, a);
        json_decref(steps);
        json_decref(o->exit_code);
    }
    free(kept);
    ts_store_free_jobs(rows, n);
    if (csv) {
        json_decref(a);
        if (!out || fclose(out) != 0) {
            free(text);
            ctld_reply_error(r, 503, "unavailable", "out of memory");
            return;
        }
        r->status = 200;
        r->body = text;
        r->content_type = "text/csv; charset=utf-8";
        /* the next page's cursor, as a JSON answer has it in next_cursor */
        if (more)
            snprintf(r->next_cursor, sizeof r->next_cursor, "%s", cur);
        return;
    }
    ctld_reply_json(r, 200, json_pack("{s:o,s:o,s:f,s:f}", "jobs", a, "next_cursor",
                                      more ? json_string(cur) : json_null(), "from", from,
                                      "to", to));
}
