/*
 * events.h - internal: the typed `data` object of a job event (events.c),
 * derived from the event's stored detail text when the API renders it.
 */
#ifndef TS_CTLD_EVENTS_H
#define TS_CTLD_EVENTS_H

#include <stdbool.h>

#include <jansson.h>

/* A new JSON object with the facts of one event's detail, typed: times as
 * Unix seconds, counts as integers, the tier by name. Empty when the detail
 * is NULL or of a shape it does not know. NULL only when out of memory. */
json_t *ctld_event_data(const char *kind, const char *detail);

/* A `preempted` event as a reader who may not see the preempting job's
 * tenant reads it (docs/api.md): "for another tenant's TIER work (CAUSE);
 * signal ..." instead of the job and its tenant. NULL when detail needs no
 * change for that reader (another kind, or may_see(ctx, tenant) is true);
 * else a malloc'd text, and *data (the event's data) loses for_job and
 * for_tenant. */
char *ctld_event_redact(const char *kind, const char *detail, json_t *data,
                        bool (*may_see)(const void *ctx, const char *tenant), const void *ctx);

#endif
