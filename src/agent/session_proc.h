/*
 * session_proc.h - what an interactive session reads of the task it joins,
 * from /proc (session_proc.c): which process it joins, that the process is
 * still the task's, its environment, user and namespaces.
 */
#ifndef TESSERA_AGENT_SESSION_PROC_H
#define TESSERA_AGENT_SESSION_PROC_H

#include <stdbool.h>
#include <sys/types.h>

#define AGENT_SESS_GROUPS_MAX 64
/* the namespaces a session joins, in agent_sess_namespaces's order */
#define NS_N 5
enum { NS_PID = 4 };

/* The process a session joins: the task's own (task), or for a container
 * task (task: its OCI runtime) the container's first process once it runs
 * the task's command; -1 when the container is still starting after a wait
 * of SESSION_INIT_WAIT_S. */
pid_t agent_sess_target(pid_t task, bool container);

/* Whether target is the task's: the task's own process, or one of its
 * descendants, while task is still the process the agent started (task_start:
 * its start ticks). A session reads /proc/<pid> on its own thread once its
 * stream is open: the task may have ended by then and its pid gone to
 * another process (a task can cycle pids fast), which a session must never
 * join: its user may be root. *start: target's start ticks: after the
 * reads, agent_rec_alive(target, *start) says target was the same process
 * throughout (a pid is not reused while its process lives), so what was
 * read is the task's. */
bool agent_sess_pin(pid_t task, unsigned long long task_start, pid_t target,
                    unsigned long long *start);


/* The task's environment, NUL-separated, as an envp (*blob holds the
 * strings); NULL when the process is gone. */
char **agent_sess_environ(pid_t pid, char **blob);

/* The uid, gid and supplementary groups (at most AGENT_SESS_GROUPS_MAX) of
 * process pid; false when it is gone. */
bool agent_sess_ids(pid_t pid, uid_t *uid, gid_t *gid, gid_t *groups, int *ng);

/* Opens the namespaces (ipc, uts, net, mnt, pid) of pid that differ from
 * the agent's; -1 for one that is the same. */
void agent_sess_namespaces(pid_t pid, int fds[NS_N]);

#endif
