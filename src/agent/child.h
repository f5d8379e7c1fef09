/*
 * child.h - talking to and waiting for a process the agent spawned and waits
 * on in its own loop (the tenant networks' tools, the MPS client), within a
 * deadline: past it the child is killed, so a hung tool costs one bounded
 * wait.
 */
#ifndef TS_AGENT_CHILD_H
#define TS_AGENT_CHILD_H

#include <stdint.h>
#include <sys/types.h>

#include "agent/clock.h" /* agent_mono_ms: the clock of the deadlines below */

/* Reaps pid into *status by deadline_ms (agent_mono_ms), sleeping on a pidfd
 * (in short naps where the kernel has none); past the deadline kills it
 * (SIGKILL) and reaps it. 0 when it ended by itself; ETIMEDOUT when it was
 * killed; else waitpid's errno, with *status -1 (not a success). */
int agent_child_reap(pid_t pid, int64_t deadline_ms, int *status);

/* Feeds input to a child's stdin (fd in, non-blocking; -1 or input NULL:
 * none) and keeps the first len - 1 bytes of what it writes to fd er (its
 * stderr or its output) in msg, NUL-terminated, reading and dropping the
 * rest, until it closes er or deadline_ms (agent_mono_ms) passes; closes
 * both. 0, or -1 at the deadline. */
int agent_child_talk(int in, int er, const char *input, char *msg, size_t len,
                     int64_t deadline_ms);

#endif
