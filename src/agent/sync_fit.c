/*
 * sync_fit.c - a sync body within its budget (sync_fit.h). The budget goes
 * first to the reports (task states, health: what keeps the node alive),
 * then to output answers in equal shares, then to the ended tasks' last
 * output. An answer's text is cut from its start, so what is kept is the
 * newest output, as `tessera logs` shows it.
 */
#include <stdio.h>
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

void agent_answer_cut(json_t *answer, size_t max, const char *why)
{
    const char *data = json_string_value(json_object_get(answer, "data"));
    if (!data)
        return;
    size_t len = json_string_length(json_object_get(answer, "data"));
    size_t cost = 0;
    for (size_t i = 0; i < len; i++)
        cost += esc_cost((unsigned char)data[i]);
    if (cost <= max)
        return;
    size_t at = keep_from(data, len, max);
    char note[256];
    snprintf(note, sizeof note, "cut to its last %zu bytes: %s", len - at, why);
    json_t *kept = json_stringn(data + at, len - at);
    json_object_set_new(answer, "data", kept ? kept : json_string(""));
    json_object_set_new(answer, "note", json_string(note));
}

void agent_answers_drop(json_t *answers, const char *why)
{
    size_t i;
    json_t *q;
    json_array_foreach(answers, i, q)
    {
        json_object_del(q, "data");
        json_object_del(q, "size");
        json_object_del(q, "note");
        if (!json_object_get(q, "error"))
            json_object_set_new(q, "error", json_string(why));
    }
}

size_t agent_sync_fit(json_t *body, size_t max)
{
    size_t n = agent_json_cost(body);
    if (n <= max)
        return n;
    json_t *logs = json_object_get(body, "logs");
    size_t nlogs = json_array_size(logs);
    if (nlogs > 0) {
        size_t rest = n - agent_json_cost(logs);
        size_t share = rest < max ? (max - rest) / nlogs : 0;
        share = share > ANSWER_OVERHEAD_BYTES ? share - ANSWER_OVERHEAD_BYTES : 0;
        char why[160];
        if (share < ANSWER_SHARE_MIN_BYTES) {
            snprintf(why, sizeof why, "no room left in the agent's sync (at most %zu bytes)",
                     max);
            agent_answers_drop(logs, why);
        } else {
            snprintf(why, sizeof why, "an agent's sync carries at most %zu bytes (%zu output "
                     "answers in this one)", max, nlogs);
            size_t i;
            json_t *q;
            json_array_foreach(logs, i, q) agent_answer_cut(q, share, why);
        }
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
