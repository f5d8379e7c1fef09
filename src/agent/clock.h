/*
 * clock.h - the agent's one monotonic clock (CLOCK_MONOTONIC: one boot), in
 * seconds for task deadlines, stops, pulls and sessions, and in milliseconds
 * for the bounded waits on the tools it spawns (child.h).
 */
#ifndef TS_AGENT_CLOCK_H
#define TS_AGENT_CLOCK_H

#include <stdint.h>

/* Seconds, the clock agent_task_poll and every agent deadline expect. */
double agent_mono_s(void);

/* Milliseconds on the same clock. */
int64_t agent_mono_ms(void);

#endif
