/*
 * sync_fit.h - keeps what the agent sends the controller within the size
 * the agent protocol promises (docs/agent-protocol.md "Sizes"): a sync or
 * a registration over its budget gives up, in order, the output answers
 * (each cut to its share, with a note, or replaced by an error when no
 * share is left), then the ended tasks' last output; the tasks' states and
 * the node's health always go. One oversized answer therefore never holds
 * back another task's report, and nothing refused is sent again as is.
 *
 * The output answers are kept typed (agent_answers: the codec's
 * ts_sync_log, with the text and notes they point to) until a sync carries
 * them, so a cut moves where an answer's text starts and the codec writes
 * the answers again.
 *
 * Ownership: works on the caller's body and answers in place; an
 * agent_answers owns its copies (agent_answers_clear frees them). Nothing
 * prints.
 */
#ifndef TS_AGENT_SYNC_FIT_H
#define TS_AGENT_SYNC_FIT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tessera/agent_proto.h"

#define AGENT_ANSWER_WHY_MAX 256

/* What one kept answer's strings are. */
typedef struct agent_answer_own {
    char *text; /* the output read (malloc'd); the answer's data is its end */
    char note[AGENT_ANSWER_WHY_MAX], error[AGENT_ANSWER_WHY_MAX];
    bool keep_start; /* a piece from an offset: a cut keeps its start, not its end */
} agent_answer_own;

/* The output answers a sync is to carry: ans[i] (what the codec writes)
 * holds the strings of own[i]. */
typedef struct agent_answers {
    ts_sync_log *ans;
    agent_answer_own *own;
    int n, cap;
} agent_answers;

/* Keeps a copy of l (its data, note and error; a note or error longer than
 * AGENT_ANSWER_WHY_MAX is cut). 0, -1 out of memory (nothing kept). */
int agent_answers_add(agent_answers *q, const ts_sync_log *l);
/* Whether q holds the answer to request id. */
bool agent_answers_has(const agent_answers *q, int64_t id);
/* Forgets every answer (delivered), freeing what they held. */
void agent_answers_clear(agent_answers *q);

/* The JSON text size of v as the agent sends it (compact). */
size_t agent_json_cost(const json_t *v);

/* Makes body ("tasks", "logs", ...: the answers of q, as the codec wrote
 * them, or none with q NULL) fit in max bytes as above, writing the cut
 * answers again in its "logs"; returns its size afterwards (over max only
 * when the reports alone are). */
size_t agent_sync_fit(json_t *body, agent_answers *q, size_t max);

/* Caps answer i's text at max bytes as a JSON string, keeping its end, cut
 * to whole lines and whole UTF-8 characters, and says so in its note (why:
 * the reason). */
void agent_answer_cut(agent_answers *q, int i, size_t max, const char *why);

/* Every answer of q becomes {"id", "error": why} (one with an error keeps
 * its own). */
void agent_answers_drop(agent_answers *q, const char *why);

#endif
