/*
 * events.h - internal: the typed `data` object of a job event (events.c),
 * derived from the event's stored detail text when the API renders it.
 */
#ifndef TS_CTLD_EVENTS_H
#define TS_CTLD_EVENTS_H

#include <jansson.h>

/* A new JSON object with the facts of one event's detail, typed: times as
 * Unix seconds, counts as integers, the tier by name. Empty when the detail
 * is NULL or of a shape it does not know. NULL only when out of memory. */
json_t *ctld_event_data(const char *kind, const char *detail);

#endif
