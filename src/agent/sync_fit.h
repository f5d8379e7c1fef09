/*
 * sync_fit.h - keeps what the agent sends the controller within the size
 * the agent protocol promises (docs/agent-protocol.md "Sizes"): a sync or
 * a registration over its budget gives up, in order, the output answers
 * (each cut to its share, with a note, or replaced by an error when no
 * share is left), then the ended tasks' last output; the tasks' states and
 * the node's health always go. One oversized answer therefore never holds
 * back another task's report, and nothing refused is sent again as is.
 *
 * Ownership: works on the caller's body in place. Nothing prints.
 */
#ifndef TS_AGENT_SYNC_FIT_H
#define TS_AGENT_SYNC_FIT_H

#include <jansson.h>
#include <stddef.h>

/* The JSON text size of v as the agent sends it (compact). */
size_t agent_json_cost(const json_t *v);

/* Makes body ("tasks", "logs", ...) fit in max bytes as above; returns its
 * size afterwards (over max only when the reports alone are). */
size_t agent_sync_fit(json_t *body, size_t max);

/* Caps one output answer's text (its "data", the end of a log) at max bytes
 * as a JSON string, keeping its end, cut to whole lines and whole UTF-8
 * characters, and says so in its "note" (why: the reason). */
void agent_answer_cut(json_t *answer, size_t max, const char *why);

/* Every output answer in answers (an array) becomes {"id", "error": why}. */
void agent_answers_drop(json_t *answers, const char *why);

#endif
