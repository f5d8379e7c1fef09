/*
 * launch_record.h - a task's files in the record directory (internal to the
 * launcher): <id>.task, what a restarted agent needs to find the task again,
 * and <id>.exit, the status its keeper saw. Both are line-based text,
 * "key value" per line, written whole under a temporary name and renamed, so
 * a reader sees an old file, a new file or none, never half of one. Values
 * escape '\' and newline ("\\", "\n"); unknown keys are skipped, so a newer
 * agent may add some.
 *
 * Functions marked "async-signal-safe" use only system calls and no locale,
 * stdio or malloc: the keeper (a fork of the agent that never execs) calls
 * them. The rest run in the agent.
 *
 * Ownership: a ts_rec owns its meta string (agent_rec_clear frees it); paths are
 * fixed-size buffers.
 */
#ifndef TS_AGENT_LAUNCH_RECORD_H
#define TS_AGENT_LAUNCH_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "launch.h"

#define TS_REC_PATH_MAX 768 /* = sizeof ts_task_info.record_path */

/* What is kept of a task across agents: the record's content. */
typedef struct ts_rec {
    ts_task_info info;       /* ids, pids, start ticks, paths, isolation */
    char *meta;              /* owned; NULL reads as "" */
    double term_grace_s;
    bool stopping;           /* a stop sequence was begun */
    bool ack_seen;
    int stop_signal;
    bool stop_hard;          /* the grace is a hard limit: SIGKILL when it ends (a time limit) */
    double stop_grace_s, stop_begun_s; /* agent_mono_s clock (CLOCK_MONOTONIC: one boot) */
    ts_task_phase phase;     /* RUNNING, or the stop's phase */
    double deadline_s;       /* when the current stop phase ends */
} ts_rec;

/* Where one task's files go. */
typedef struct ts_rec_paths {
    char record[TS_REC_PATH_MAX], record_tmp[TS_REC_PATH_MAX], keeper_tmp[TS_REC_PATH_MAX];
    char exit[TS_REC_PATH_MAX], exit_tmp[TS_REC_PATH_MAX];
} ts_rec_paths;

/* A bounded text builder that never allocates (async-signal-safe). */
typedef struct ts_sbuf {
    char *p;
    size_t cap, len;
    bool cut;                /* something did not fit */
} ts_sbuf;

void agent_sb_init(ts_sbuf *b, char *mem, size_t cap);
void agent_sb_str(ts_sbuf *b, const char *s);
void agent_sb_uint(ts_sbuf *b, unsigned long long v);
void agent_sb_int(ts_sbuf *b, long long v);

/* 0 and the paths, or -1 when one does not fit. */
int agent_rec_paths_make(const char *dir, const char *id, ts_rec_paths *p);

/* The record's first lines (format version, pids, start ticks) into b.
 * Async-signal-safe. */
void agent_rec_head(ts_sbuf *b, const char *id, pid_t pid, unsigned long long start,
                 pid_t keeper, unsigned long long keeper_start);

/* The rest of the record (malloc'd), or NULL when out of memory. */
char *agent_rec_body(const ts_rec *r);

/* Writes a then b to tmp and renames it to path. 0, or -1 with errno.
 * Async-signal-safe. */
int agent_rec_put(const char *tmp, const char *path, const char *a, size_t alen, const char *b,
               size_t blen);
/* The exit file's room taken at a task's start: tmp made new (never a link
 * left under the name) with bytes allocated, its descriptor; -1 (errno) when
 * that fails. agent_rec_put_reserved writes a (alen <= bytes) over those
 * blocks, so a task that fills the filesystem meanwhile cannot cost the
 * file, and renames tmp to path; it closes fd in every case. */
int agent_rec_reserve(const char *tmp, size_t bytes);
int agent_rec_put_reserved(int fd, const char *tmp, const char *path, const char *a,
                           size_t alen);

/* Head and body of r to p->record (through p->record_tmp). 0 or TS_E*. */
int agent_rec_write(const ts_rec *r, const ts_rec_paths *p, ts_err *err);

/* Parses a record; r is zeroed first and owns meta afterwards (also on
 * failure: agent_rec_clear it). TS_ENOENT, TS_EINVAL naming the field, TS_EIO. */
int agent_rec_read(const char *path, ts_rec *r, ts_err *err);
void agent_rec_clear(ts_rec *r);

/* The exit file's text for a wait status and the OOM kills its cgroup
 * counted (memory.events oom_kill; 0: none or no cgroup); cut_off: its
 * keeper stopped it, the agent's controller deadline past (launch_keeper.c).
 * Async-signal-safe. */
void agent_rec_exit_text(ts_sbuf *b, pid_t pid, unsigned long long start, int wait_status,
                      long long oom_kills, bool cut_off);

/* Reads an exit file: 1 and the status (*code 0..255 or -1, *sig or 0) when
 * it exists and names this pid and start time, *oom_kills (0 unless the
 * file has them) and *cut_off (TS_CUT_*); 0 when there is none (or it is
 * another task's, or damaged: the task's status is then not known). */
int agent_rec_exit_read(const char *path, pid_t pid, unsigned long long start, int *code, int *sig,
                     long long *oom_kills, int *cut_off);
/* Adds "cut_off agent" to a task's exit file: its agent stopped it as it
 * stopped itself and no controller heard of it, which the next agent
 * reports (agent_stopped) so that the job is requeued, not started again as
 * the same run. -1 (errno) when the file cannot be read or written. */
int agent_rec_exit_mark_left(const ts_rec_paths *p);

/* Field 22 (start time in clock ticks) and field 3 (state letter) of
 * /proc/<pid>/stat. 0, or -1 when there is no such process.
 * Async-signal-safe. */
int agent_rec_proc_stat(pid_t pid, unsigned long long *start, char *state);
/* Field 4 (the parent's pid) of /proc/<pid>/stat; 0 when there is no such
 * process. Async-signal-safe. */
pid_t agent_rec_proc_parent(pid_t pid);

/* pid is the process that started at `start` and has not ended (a zombie has
 * ended). */
bool agent_rec_alive(pid_t pid, unsigned long long start);

/* Removes the record, exit file and temporaries. 0, or -1 with errno. */
int agent_rec_remove(const ts_rec_paths *p);

#endif
