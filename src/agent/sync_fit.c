/*
 * sync_fit.c - a sync body within its budget (sync_fit.h). The budget goes
 * first to the reports (task states, health: what keeps the node alive),
 * then to output answers in equal shares, then to the ended tasks' last
 * output. An answer's text is cut from its start, so what is kept is the
 * newest output, as `tessera logs` shows it; a piece read from an offset
 * (`tessera logs -f`) is cut from its end, and read on from there. The answers are kept typed
 * until a sync carries them (agent_answers).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/sync_fit.h"

/* An answer's share below this is no answer: it says it did not fit. */
#define ANSWER_SHARE_MIN_BYTES 1024
/* The id, the note and the JSON punctuation of one answer, at most. */
#define ANSWER_OVERHEAD_BYTES 320

size_t agent_json_cost(const json_t *v)
{
    return v ? json_dumpb(v, NULL, 0, JSON_COMPACT | JSON_ENCODE_ANY) : 0;
}

/* The bytes b takes inside a JSON string (jansson escapes these). */
static size_t esc_cost(unsigned char b)
{
    if (b == '"' || b == '\\' || b == '\n' || b == '\t' || b == '\r' || b == '\b' || b == '\f')
        return 2;
    return b < 0x20 ? 6 : 1;
}

/* Where the kept end of text (len bytes) starts so that it costs at most
 * budget bytes escaped: at a UTF-8 character, at a line where there is one. */
static size_t keep_from(const char *text, size_t len, size_t budget)
{
    size_t cost = 0, at = len;
    while (at > 0 && cost + esc_cost((unsigned char)text[at - 1]) <= budget)
        cost += esc_cost((unsigned char)text[--at]);
    if (at == 0)
        return 0;
    while (at < len && ((unsigned char)text[at] & 0xC0) == 0x80)
        at++; /* not inside a character */
    const char *nl = memchr(text + at, '\n', len - at);
    if (nl && (size_t)(nl - text) + 1 < len)
        at = (size_t)(nl - text) + 1; /* whole lines */
    return at;
}

/* ---- the kept answers ------------------------------------------------------------ */

int agent_answers_add(agent_answers *q, const ts_sync_log *l)
{
    if (q->n == q->cap) {
        int cap = q->cap ? 2 * q->cap : 4;
        ts_sync_log *ans = realloc(q->ans, (size_t)cap * sizeof *ans);
        if (ans)
            q->ans = ans;
        agent_answer_own *own = ans ? realloc(q->own, (size_t)cap * sizeof *own) : NULL;
        if (!own)
            return -1;
        q->own = own;
        q->cap = cap;
    }
    agent_answer_own *o = &q->own[q->n];
    ts_sync_log *a = &q->ans[q->n];
    *a = (ts_sync_log){.id = l->id, .has_size = l->has_size, .size = l->size,
                       .has_offset = l->has_offset, .offset = l->offset};
    o->text = NULL;
    o->keep_start = false;
    if (l->data) {
        if (!(o->text = malloc(l->data_len + 1)))
            return -1;
        memcpy(o->text, l->data, l->data_len);
        o->text[l->data_len] = '\0';
        a->data = o->text;
        a->data_len = l->data_len;
    }
    snprintf(o->note, sizeof o->note, "%s", l->note ? l->note : "");
    snprintf(o->error, sizeof o->error, "%s", l->error ? l->error : "");
    a->note = l->note ? o->note : NULL;
    a->error = l->error ? o->error : NULL;
    q->n++;
    return 0;
}

bool agent_answers_has(const agent_answers *q, int64_t id)
{
    for (int i = 0; i < q->n; i++)
        if (q->ans[i].id == id)
            return true;
    return false;
}

void agent_answers_clear(agent_answers *q)
{
    for (int i = 0; i < q->n; i++)
        free(q->own[i].text);
    free(q->ans);
    free(q->own);
    *q = (agent_answers){0};
}

void agent_answer_cut(agent_answers *q, int i, size_t max, const char *why)
{
    ts_sync_log *a = &q->ans[i];
    if (!a->data)
        return;
    size_t len = a->data_len, cost = 0;
    for (size_t k = 0; k < len; k++)
        cost += esc_cost((unsigned char)a->data[k]);
    if (cost <= max)
        return;
    if (q->own[i].keep_start) {
        /* the reader asks for the rest from where this piece ends */
        size_t end = 0;
        cost = 0;
        while (end < len && cost + esc_cost((unsigned char)a->data[end]) <= max)
            cost += esc_cost((unsigned char)a->data[end++]);
        while (end > 0 && end < len && ((unsigned char)a->data[end] & 0xC0) == 0x80)
            end--; /* not inside a character */
        a->data_len = end;
        snprintf(q->own[i].note, sizeof q->own[i].note, "cut to its first %zu bytes: %s", end,
                 why);
        a->note = q->own[i].note;
        return;
    }
    size_t at = keep_from(a->data, len, max);
    snprintf(q->own[i].note, sizeof q->own[i].note, "cut to its last %zu bytes: %s", len - at,
             why);
    a->data += at;
    a->data_len = len - at;
    a->offset += (int64_t)at;
    a->note = q->own[i].note;
}

void agent_answers_drop(agent_answers *q, const char *why)
{
    for (int i = 0; i < q->n; i++) {
        ts_sync_log *a = &q->ans[i];
        a->data = NULL;
        a->data_len = 0;
        a->has_size = false;
        a->note = NULL;
        if (!a->error) {
            snprintf(q->own[i].error, sizeof q->own[i].error, "%s", why);
            a->error = q->own[i].error;
        }
    }
}

/* ---- the fit ---------------------------------------------------------------------- */

/* The answers of q as the codec writes them, in body's "logs" (in its place). */
static void answers_write(json_t *body, const agent_answers *q)
{
    json_t *logs = json_array();
    for (int i = 0; logs && i < q->n; i++)
        if (json_array_append_new(logs, ts_sync_log_encode(&q->ans[i])) != 0) {
            json_decref(logs);
            logs = NULL;
        }
    if (logs)
        json_object_set_new(body, "logs", logs);
    /* out of memory: the answers as they were written */
}

size_t agent_sync_fit(json_t *body, agent_answers *q, size_t max)
{
    size_t n = agent_json_cost(body);
    if (n <= max)
        return n;
    json_t *logs = json_object_get(body, "logs");
    if (q && q->n > 0 && logs) {
        size_t rest = n - agent_json_cost(logs);
        size_t share = rest < max ? (max - rest) / (size_t)q->n : 0;
        share = share > ANSWER_OVERHEAD_BYTES ? share - ANSWER_OVERHEAD_BYTES : 0;
        char why[160];
        if (share < ANSWER_SHARE_MIN_BYTES) {
            snprintf(why, sizeof why, "no room left in the agent's sync (at most %zu bytes)",
                     max);
            agent_answers_drop(q, why);
        } else {
            snprintf(why, sizeof why, "an agent's sync carries at most %zu bytes (%d output "
                     "answers in this one)", max, q->n);
            for (int i = 0; i < q->n; i++)
                agent_answer_cut(q, i, share, why);
        }
        answers_write(body, q);
        n = agent_json_cost(body);
    }
    if (n <= max)
        return n;
    /* the reports alone are too large: the ended tasks' last output goes */
    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(body, "tasks"), i, t)
    {
        if (json_object_get(t, "output"))
            json_object_set_new(t, "output", json_object());
    }
    return agent_json_cost(body);
}
