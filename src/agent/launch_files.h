/*
 * launch_files.h - what the launcher makes for a task in folders that are
 * not the task's own: its two log files in the agent's log folder, and the
 * task's own folder <task_dirs>/<task id>/ (its checkpoint ack; the only
 * agent folder a container gets read-write for the task alone). The log
 * folder also holds every task's records, so nothing there is opened by a
 * link or kept as a link, a FIFO or a hard link someone put in its place;
 * and a task's own folder is made fresh (0700, the task's user's; where the
 * agent is root, a tmpfs of its own, so what the task writes there cannot
 * fill the state disk) and removed without following what the task put in
 * it.
 *
 * Private to launch*.c. Nothing prints; errors name the path and the reason.
 */
#ifndef TS_AGENT_LAUNCH_FILES_H
#define TS_AGENT_LAUNCH_FILES_H

#include <stddef.h>
#include <sys/types.h>

#include "launch.h"
#include "launch_keeper.h"

#define TS_TASK_ACK_NAME "ckpt-done" /* the ack's name in the task's own folder */

/* Opens (creating, appending) <dir>/<id>.<ext> for the task's output, owned
 * by ra's user when ra->change; path gets its name. Refused, naming the
 * path: a link, or anything but a regular file with one link. The
 * descriptor (blocking, close-on-exec), or a negative error code with err
 * set. */
int agent_log_open(const char *dir, const char *id, const char *ext, char *path, size_t len,
                   const struct ts_run_as *ra, ts_err *err);

/* Makes the task's own folder <root>/<id> anew (an earlier one of the id
 * removed first; root made 0711 when missing), mode 0700, owned by
 * uid:gid when the agent is root, with files[0..nfiles) in it, empty, mode
 * 0600, uid:gid's, made before the folder is given away; path gets its
 * name. 0, or a negative error code with err set (TS_ENOENT: no root,
 * TS_EIO: the step; the folder is then removed). */
int agent_task_dir_make(const char *root, const char *id, uid_t uid, gid_t gid,
                        const ts_task_file *files, size_t nfiles, char *path, size_t len,
                        ts_err *err);

/* Removes the folder path and everything below it, only when its last
 * component is id (a damaged record must not name another folder): moved
 * into <task_dirs>/.trash at once and removed behind (trash.h), in place
 * without following a link where it cannot be moved. Nothing when path is
 * "". */
void agent_task_dir_remove(const char *path, const char *id);

#endif
