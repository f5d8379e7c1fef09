/*
 * trash.h - removing what a task leaves behind (its container's upper layer,
 * its secrets folder, an unpacked image tree) off the agent's main loop.
 *
 * A task controls how many files it leaves, so removing them where the main
 * loop waits would let one task delay every other task's sync and stop. The
 * tree is renamed at once into a trash folder on the same filesystem (its
 * name is free again immediately) and one thread of the agent's process
 * removes it behind, at a low priority. Thread-safe; the thread is started
 * at the first put and lives as long as the process. Private to src/agent.
 */
#ifndef TS_AGENT_TRASH_H
#define TS_AGENT_TRASH_H

#include <stdbool.h>

/* Moves path (not followed if a link) into the folder trash (made 0700 where
 * missing; it must be on path's filesystem) and has it removed there
 * behind. Returns 0; 0 too when path is not there; -1 with errno when it
 * could not be moved (path then left as it was, for the caller to remove). */
int agent_trash_put(const char *path, const char *trash);

/* Has what trash already holds (left by an agent that ended meanwhile)
 * removed behind. */
void agent_trash_sweep(const char *trash);

/* Removes dfd/name and, for a folder, all below it, in place and at once,
 * never following a link: the one remover of the agent's own trees (an
 * image, a layer's whiteout, a task folder that could not be trashed). A
 * folder depth_max deep is not opened (ELOOP; a descriptor a level); a
 * non-root agent makes each folder its own first (a 0500 folder of an image
 * or a task). Goes on past an entry it cannot remove. 0 (also when dfd/name
 * is gone already), or -1 with the first error's errno. */
int agent_rm_tree_at(int dfd, const char *name, int depth_max);

/* As agent_rm_tree_at for each entry of the folder dfd, which stays. */
int agent_rm_entries(int dfd, int depth_max);

/* Waits up to timeout_ms for the trash thread to have nothing left to do;
 * true when it has not (for tests and benchmarks). */
bool agent_trash_idle(int timeout_ms);

#endif
