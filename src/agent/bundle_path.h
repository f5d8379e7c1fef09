/*
 * bundle_path.h - where a file a container task names (as it sees it, in its
 * own root) is on this node: the agent reads the files a task's output note
 * names (docs/agent-tasks.md), and for a container task those names are the
 * container's, not the host's.
 *
 * The bundle's config.json (written by the agent, outside the container's
 * root, which the task cannot change) says the container's working
 * directory and its mounts. A name is made absolute from the working
 * directory and its "." and ".." are resolved by their text (the file is
 * then opened with no link followed anywhere, so the text is the path); it
 * is in the bind whose destination holds it deepest (its host source), in
 * no mount (the container's root, <bundle>/rootfs), or in a mount of
 * another kind (proc, a tmpfs), which is not readable from the node.
 */
#ifndef TS_AGENT_BUNDLE_PATH_H
#define TS_AGENT_BUNDLE_PATH_H

#include <stddef.h>

#include "tessera/error.h"

/* Node-side root (root, room rlen) and the path below it (rel, room
 * rellen, relative: no leading "/") of the file the container of bundle
 * (its folder) names name. 0; TS_ENOENT when the bundle has no readable
 * config.json (the task is bare, or its bundle went); TS_EINVAL naming why
 * when the file is in no place the node can read, or a name is too long. */
int agent_bundle_path(const char *bundle, const char *name, char *root, size_t rlen, char *rel,
                      size_t rellen, ts_err *err);

#endif
