/*
 * taskfile.h - how the agent (root) touches a file in a place a task
 * controls: its step file, its output logs, its shim ledger. A task may put
 * a FIFO, a socket, a device node, a symbolic or a hard link where the agent
 * looks; none of them may block the agent, lead it out of the task's own
 * files, or make it remove what is not its own (docs/agent-tasks.md "What
 * the agent trusts"). The parents of such a path are the agent's own
 * directories; only the last component is the task's.
 *
 * Nothing here prints; errors name the path and the reason. Thread-safe
 * (no state).
 */
#ifndef TS_AGENT_TASKFILE_H
#define TS_AGENT_TASKFILE_H

#include <stdbool.h>
#include <sys/types.h>

#include "tessera/error.h"

/* Any owner: for agent_taskfile_open's owner. */
#define AGENT_TASKFILE_ANY_OWNER ((uid_t)-1)

/* Opens path with flags (O_RDONLY, or O_WRONLY|O_APPEND) plus O_NOFOLLOW,
 * O_NONBLOCK, O_NOCTTY and O_CLOEXEC: never blocks, never follows a link.
 * Refused (TS_EINVAL naming the reason, the descriptor closed): not a
 * regular file, more than one hard link, or not owned by owner (unless
 * AGENT_TASKFILE_ANY_OWNER). TS_ENOENT when there is none. Returns the
 * descriptor, or a negative error code with err set. */
int agent_taskfile_open(const char *path, int flags, uid_t owner, ts_err *err);
/* The same with O_CREAT in flags allowed: a file it makes gets mode (the
 * rules above hold for a file that was there). */
int agent_taskfile_open_mode(const char *path, int flags, mode_t mode, uid_t owner,
                             ts_err *err);
/* The same for path as seen from root (a container's root, or a bind's
 * source): ".." stops at root and no link is followed anywhere on the way
 * (openat2 RESOLVE_IN_ROOT, RESOLVE_NO_SYMLINKS), so nothing the container
 * put there leads out of it. root NULL: agent_taskfile_open(path). */
int agent_taskfile_open_in(const char *root, const char *path, int flags, uid_t owner,
                           ts_err *err);

/* Creates path as a new, empty regular file (O_EXCL: nothing already there
 * is used) owned by uid:gid (when the agent may give it away; -1 keeps the
 * agent's), mode 0644. *dev and *ino identify it for agent_taskfile_remove.
 * 0, or a negative error code with err set. */
int agent_taskfile_create(const char *path, uid_t uid, gid_t gid, dev_t *dev, ino_t *ino,
                          ts_err *err);

/* Removes path only while it is still the file the agent created (dev,
 * ino), or, with ino 0, a regular file owned by owner: never what a task
 * put in its place. True when it removed it. */
bool agent_taskfile_remove(const char *path, dev_t dev, ino_t ino, uid_t owner);

#endif
