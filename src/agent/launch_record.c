/*
 * launch_record.c - the record and exit files of a task (see launch_record.h
 * for the format and who calls what).
 *
 * The keeper writes the first record (it knows the pids first, and a record
 * must exist before the agent can lose the task) and the exit file; the agent
 * rewrites the record when a stop begins or changes phase, and reads both
 * back when it adopts. The pid alone cannot name a task across agents: pids
 * are reused. A pid together with its start time (field 22 of
 * /proc/<pid>/stat, clock ticks since boot, see proc(5)) can, so every file
 * carries both and a reader checks them against the live process.
 *
 * The first half of this file is async-signal-safe (system calls, hand-made
 * number formatting); the second half is ordinary agent code.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "launch_record.h"
#include "io/write_all.h"

#define REC_VERSION_LINE "tessera-task-record 1"
#define EXIT_VERSION_LINE "tessera-task-exit 1"
#define REC_FILE_MODE 0600
#define PROC_STAT_BYTES 1024  /* comm is at most 16 bytes: a stat line is far shorter */
#define PROC_START_FIELD 22   /* starttime, proc(5) */
#define REC_FILE_MAX_BYTES (2 * TS_TASK_META_MAX_BYTES + 65536) /* escaped meta + the rest */
#define EXIT_FILE_MAX_BYTES 512
#define SIGNAL_MAX 64          /* Linux signals are 1..SIGRTMAX (64) */
#define EXIT_CODE_MAX 255
#define TASK_ID_CHARS "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-"

/* ---- async-signal-safe ---------------------------------------------------------- */

void agent_sb_init(ts_sbuf *b, char *mem, size_t cap)
{
    b->p = mem;
    b->cap = cap;
    b->len = 0;
    b->cut = cap == 0;
    if (cap > 0)
        mem[0] = '\0';
}

void agent_sb_str(ts_sbuf *b, const char *s)
{
    for (; *s != '\0'; s++) {
        if (b->len + 1 >= b->cap) {
            b->cut = true;
            return;
        }
        b->p[b->len++] = *s;
        b->p[b->len] = '\0';
    }
}

void agent_sb_uint(ts_sbuf *b, unsigned long long v)
{
    char digits[24];
    size_t n = 0;
    do {
        digits[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v > 0);
    char out[25];
    for (size_t i = 0; i < n; i++)
        out[i] = digits[n - 1 - i];
    out[n] = '\0';
    agent_sb_str(b, out);
}

void agent_sb_int(ts_sbuf *b, long long v)
{
    if (v < 0) {
        agent_sb_str(b, "-");
        agent_sb_uint(b, 0ULL - (unsigned long long)v);
    } else {
        agent_sb_uint(b, (unsigned long long)v);
    }
}

void agent_rec_head(ts_sbuf *b, const char *id, pid_t pid, unsigned long long start,
                 pid_t keeper, unsigned long long keeper_start)
{
    agent_sb_str(b, REC_VERSION_LINE "\nid ");
    agent_sb_str(b, id); /* task ids need no escaping: A-Z a-z 0-9 . _ - */
    agent_sb_str(b, "\npid ");
    agent_sb_int(b, pid);
    agent_sb_str(b, "\nstart ");
    agent_sb_uint(b, start);
    agent_sb_str(b, "\nkeeper ");
    agent_sb_int(b, keeper);
    agent_sb_str(b, "\nkeeper_start ");
    agent_sb_uint(b, keeper_start);
    agent_sb_str(b, "\n");
}

/* tmp made anew for writing: never a file (or a link) someone left under
 * the name; -1 (errno) */
static int open_new(const char *tmp)
{
    if (unlink(tmp) != 0 && errno != ENOENT)
        return -1;
    return open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC,
                REC_FILE_MODE);
}

/* Closes fd and, when what was written into it is whole (ok), renames tmp
 * to path; otherwise, or when either fails, removes tmp: -1 with errno
 * (e: the write's) */
static int close_and_rename(int fd, const char *tmp, const char *path, bool ok, int e)
{
    if (close(fd) != 0 && ok) {
        ok = false;
        e = errno;
    }
    if (ok && rename(tmp, path) != 0) {
        ok = false;
        e = errno;
    }
    if (!ok) {
        unlink(tmp);
        errno = e;
        return -1;
    }
    return 0;
}

int agent_rec_put(const char *tmp, const char *path, const char *a, size_t alen, const char *b,
               size_t blen)
{
    int fd = open_new(tmp);
    if (fd < 0)
        return -1;
    bool ok = io_write_all(fd, a, alen) == 0 && io_write_all(fd, b, blen) == 0;
    return close_and_rename(fd, tmp, path, ok, ok ? 0 : errno);
}

int agent_rec_reserve(const char *tmp, size_t bytes)
{
    int fd = open_new(tmp);
    if (fd < 0)
        return -1;
    int e = posix_fallocate(fd, 0, (off_t)bytes); /* an error number, not errno */
    if (e != 0) {
        close(fd);
        unlink(tmp);
        errno = e;
        return -1;
    }
    return fd;
}

int agent_rec_put_reserved(int fd, const char *tmp, const char *path, const char *a,
                           size_t alen)
{
    /* written over the blocks taken at the start: no block is asked for now */
    ssize_t w = alen ? pwrite(fd, a, alen, 0) : 0;
    bool ok = w == (ssize_t)alen && ftruncate(fd, (off_t)alen) == 0;
    return close_and_rename(fd, tmp, path, ok, ok ? 0 : (errno ? errno : EIO));
}

void agent_rec_exit_text(ts_sbuf *b, pid_t pid, unsigned long long start, int wait_status,
                      long long oom_kills, bool cut_off)
{
    agent_sb_str(b, EXIT_VERSION_LINE "\npid ");
    agent_sb_int(b, pid);
    agent_sb_str(b, "\nstart ");
    agent_sb_uint(b, start);
    /* the <sys/wait.h> macros are plain bit tests, safe anywhere */
    if ((wait_status & 0x7f) == 0) {
        agent_sb_str(b, "\nexit ");
        agent_sb_int(b, (wait_status >> 8) & 0xff);
    } else {
        agent_sb_str(b, "\nsignal ");
        agent_sb_int(b, wait_status & 0x7f);
    }
    if (oom_kills > 0) { /* the kernel's OOM killer ended processes of its cgroup */
        agent_sb_str(b, "\noom_kill ");
        agent_sb_int(b, oom_kills);
    }
    if (cut_off) /* an older agent reading it passes over the line */
        agent_sb_str(b, "\ncut_off 1");
    agent_sb_str(b, "\n");
}

/* /proc/<pid>/stat read into buf (n bytes): its fields after the command's
 * name, from field 3 (the state letter) on, or NULL when there is no such
 * process. Async-signal-safe. */
static char *proc_stat_fields(pid_t pid, char *buf, size_t n)
{
    char path[48];
    ts_sbuf b;
    agent_sb_init(&b, path, sizeof path);
    agent_sb_str(&b, "/proc/");
    agent_sb_int(&b, pid);
    agent_sb_str(&b, "/stat");
    if (pid <= 0)
        return NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    ssize_t got;
    do
        got = read(fd, buf, n - 1);
    while (got < 0 && errno == EINTR);
    close(fd);
    if (got <= 0)
        return NULL;
    buf[got] = '\0';
    /* "pid (comm) S ...": comm may hold spaces and ')', so start after the last ')' */
    char *p = NULL;
    for (ssize_t i = got - 1; i >= 0; i--)
        if (buf[i] == ')') {
            p = buf + i + 1;
            break;
        }
    if (p == NULL || p[0] != ' ' || p[1] == '\0')
        return NULL;
    return p + 1;
}

/* The decimal number at *p, moving p past it; false when there is none. */
static bool proc_number(char **p, unsigned long long *v)
{
    if (**p < '0' || **p > '9')
        return false;
    for (*v = 0; **p >= '0' && **p <= '9'; (*p)++)
        *v = *v * 10 + (unsigned long long)(**p - '0');
    return true;
}

int agent_rec_proc_stat(pid_t pid, unsigned long long *start, char *state)
{
    char buf[PROC_STAT_BYTES];
    char *p = proc_stat_fields(pid, buf, sizeof buf);
    if (p == NULL)
        return -1;
    *state = *p;
    for (int field = 3; field < PROC_START_FIELD; field++) {
        while (*p != ' ' && *p != '\0')
            p++;
        if (*p == '\0')
            return -1;
        p++;
    }
    return proc_number(&p, start) ? 0 : -1;
}

pid_t agent_rec_proc_parent(pid_t pid)
{
    char buf[PROC_STAT_BYTES];
    char *p = proc_stat_fields(pid, buf, sizeof buf);
    unsigned long long pp;
    if (p == NULL || p[1] != ' ') /* field 3, one letter, then field 4 */
        return 0;
    p += 2;
    return proc_number(&p, &pp) ? (pid_t)pp : 0;
}

/* ---- agent side ----------------------------------------------------------------- */

bool agent_rec_alive(pid_t pid, unsigned long long start)
{
    unsigned long long s;
    char state;
    return agent_rec_proc_stat(pid, &s, &state) == 0 && s == start && state != 'Z' &&
           state != 'X';
}

int agent_rec_paths_make(const char *dir, const char *id, ts_rec_paths *p)
{
    struct {
        char *dst;
        const char *suffix;
    } want[] = {{p->record, "task"},
                {p->record_tmp, "task.tmp"},
                {p->keeper_tmp, "task.keeper-tmp"},
                {p->exit, "exit"},
                {p->exit_tmp, "exit.tmp"}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (snprintf(want[i].dst, TS_REC_PATH_MAX, "%s/%s.%s", dir, id, want[i].suffix) >=
            TS_REC_PATH_MAX)
            return -1;
    return 0;
}

static void put_escaped(FILE *f, const char *key, const char *v)
{
    fprintf(f, "%s ", key);
    for (; v != NULL && *v != '\0'; v++) {
        if (*v == '\\')
            fputs("\\\\", f);
        else if (*v == '\n')
            fputs("\\n", f);
        else
            fputc(*v, f);
    }
    fputc('\n', f);
}

static const char *phase_name(ts_task_phase p)
{
    switch (p) {
    case TS_TASK_CHECKPOINTING:
        return "checkpointing";
    case TS_TASK_TERMINATING:
        return "terminating";
    case TS_TASK_KILLING:
        return "killing";
    default:
        return "running";
    }
}

char *agent_rec_body(const ts_rec *r)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (f == NULL)
        return NULL;
    const ts_task_info *in = &r->info;
    fprintf(f, "uid %ld\nterm_grace_s %.9g\nisolated %d\ndevices_isolated %d\n", (long)in->uid,
            r->term_grace_s, in->isolated, in->devices_isolated);
    if (in->run_uid != in->uid) /* absent: the same (records of older agents too) */
        fprintf(f, "run_uid %ld\n", (long)in->run_uid);
    if (in->cgroup_v1) /* absent: a cgroup2 directory (records of older agents too) */
        fputs("cgroup_v1 1\n", f);
    put_escaped(f, "cgroup", in->cgroup_path);
    put_escaped(f, "isolation_reason", in->isolation_reason);
    put_escaped(f, "devices_reason", in->devices_reason);
    put_escaped(f, "user_note", in->user_note);
    put_escaped(f, "stdout", in->stdout_path);
    put_escaped(f, "stderr", in->stderr_path);
    put_escaped(f, "ack", in->ack_path);
    if (in->task_dir[0]) /* absent in older agents' records: their ack was in a shared folder */
        put_escaped(f, "task_dir", in->task_dir);
    if (r->stopping)
        fprintf(f,
                "stop_signal %d\nstop_grace_s %.9f\nstop_begun_s %.9f\nstop_phase %s\n"
                "stop_deadline_s %.9f\nack_seen %d\n",
                r->stop_signal, r->stop_grace_s, r->stop_begun_s, phase_name(r->phase),
                r->deadline_s, r->ack_seen);
    if (r->stopping && r->stop_hard)
        fputs("stop_hard 1\n", f);
    put_escaped(f, "meta", r->meta);
    if (fclose(f) != 0) {
        free(text);
        return NULL;
    }
    return text;
}

int agent_rec_write(const ts_rec *r, const ts_rec_paths *p, ts_err *err)
{
    char head[512];
    ts_sbuf hb;
    agent_sb_init(&hb, head, sizeof head);
    const ts_task_info *in = &r->info;
    agent_rec_head(&hb, in->task_id, in->pid, in->start_ticks, in->keeper_pid,
                in->keeper_start_ticks);
    char *body = agent_rec_body(r);
    if (body == NULL)
        return ts_err_set(err, TS_ENOMEM, "task %s: record: out of memory", in->task_id);
    int rc = agent_rec_put(p->record_tmp, p->record, head, hb.len, body, strlen(body));
    int e = errno;
    free(body);
    if (rc != 0)
        return ts_err_set(err, TS_EIO, "task %s: record %s: %s", in->task_id, p->record,
                          strerror(e));
    return 0;
}

void agent_rec_clear(ts_rec *r)
{
    free(r->meta);
    r->meta = NULL;
}

/* The whole file, NUL-terminated (malloc'd), or NULL with errno: only a
 * regular file, never through a link (EINVAL for anything else). */
static char *slurp(const char *path, size_t max, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
    if (fd < 0)
        return NULL;
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        errno = EINVAL;
        return NULL;
    }
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (buf == NULL)
            break;
        if (n + 1 >= cap) {
            if (cap > max) {
                free(buf);
                buf = NULL;
                errno = EFBIG;
                break;
            }
            char *nb = realloc(buf, cap * 2);
            if (nb == NULL) {
                free(buf);
                buf = NULL;
                errno = ENOMEM;
                break;
            }
            buf = nb;
            cap *= 2;
        }
        ssize_t k = read(fd, buf + n, cap - n - 1);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0) {
            free(buf);
            buf = NULL;
            break;
        }
        if (k == 0)
            break;
        n += (size_t)k;
    }
    int e = errno;
    close(fd);
    errno = e;
    if (buf != NULL) {
        buf[n] = '\0';
        *len = n;
    }
    return buf;
}

/* Undoes put_escaped in place; -1 on a stray backslash. */
static int unescape(char *s)
{
    char *w = s;
    for (char *r = s; *r != '\0'; r++) {
        if (*r != '\\') {
            *w++ = *r;
            continue;
        }
        r++;
        if (*r == '\\')
            *w++ = '\\';
        else if (*r == 'n')
            *w++ = '\n';
        else
            return -1;
    }
    *w = '\0';
    return 0;
}

static int parse_ull(const char *v, unsigned long long *out)
{
    if (*v < '0' || *v > '9')
        return -1;
    char *end;
    errno = 0;
    *out = strtoull(v, &end, 10);
    return *end != '\0' || errno != 0 ? -1 : 0;
}

static int parse_pid(const char *v, pid_t *out)
{
    unsigned long long u;
    if (parse_ull(v, &u) != 0 || u == 0 || u > 0x7fffffffULL)
        return -1;
    *out = (pid_t)u;
    return 0;
}

static int parse_uid(const char *v, uid_t *out)
{
    unsigned long long u;
    if (parse_ull(v, &u) != 0 || u > 0xffffffffULL)
        return -1;
    *out = (uid_t)u;
    return 0;
}

static int parse_double(const char *v, double *out)
{
    char *end;
    errno = 0;
    *out = strtod(v, &end);
    return end == v || *end != '\0' || errno != 0 ? -1 : 0;
}

static int parse_bool(const char *v, bool *out)
{
    if (strcmp(v, "0") != 0 && strcmp(v, "1") != 0)
        return -1;
    *out = v[0] == '1';
    return 0;
}

static int parse_phase(const char *v, ts_task_phase *out)
{
    static const ts_task_phase PHASES[] = {TS_TASK_CHECKPOINTING, TS_TASK_TERMINATING,
                                           TS_TASK_KILLING};
    for (size_t i = 0; i < sizeof PHASES / sizeof PHASES[0]; i++)
        if (strcmp(v, phase_name(PHASES[i])) == 0) {
            *out = PHASES[i];
            return 0;
        }
    return -1;
}

static int copy_field(char *dst, size_t len, const char *v)
{
    if (strlen(v) >= len)
        return -1;
    memcpy(dst, v, strlen(v) + 1);
    return 0;
}

enum { SEEN_ID = 1, SEEN_PID = 2, SEEN_START = 4, SEEN_KEEPER = 8, SEEN_KSTART = 16,
       SEEN_OUT = 32, SEEN_ERR = 64, SEEN_ACK = 128, SEEN_ALL = 255 };

/* How a record key's value is read, and where in a ts_rec it goes. */
enum rec_kind { REC_TEXT, REC_PID, REC_ULL, REC_UID, REC_DOUBLE, REC_BOOL, REC_PHASE };

#define REC_FIELD(f) offsetof(ts_rec, f), sizeof(((ts_rec *)0)->f)

static const struct rec_key {
    const char *key;
    enum rec_kind kind;
    size_t off, len;
    int seen;
} REC_KEYS[] = {
    {"id", REC_TEXT, REC_FIELD(info.task_id), SEEN_ID},
    {"cgroup", REC_TEXT, REC_FIELD(info.cgroup_path), 0},
    {"isolation_reason", REC_TEXT, REC_FIELD(info.isolation_reason), 0},
    {"devices_reason", REC_TEXT, REC_FIELD(info.devices_reason), 0},
    {"user_note", REC_TEXT, REC_FIELD(info.user_note), 0},
    {"stdout", REC_TEXT, REC_FIELD(info.stdout_path), SEEN_OUT},
    {"stderr", REC_TEXT, REC_FIELD(info.stderr_path), SEEN_ERR},
    {"ack", REC_TEXT, REC_FIELD(info.ack_path), SEEN_ACK},
    {"task_dir", REC_TEXT, REC_FIELD(info.task_dir), 0},
    {"pid", REC_PID, REC_FIELD(info.pid), SEEN_PID},
    {"start", REC_ULL, REC_FIELD(info.start_ticks), SEEN_START},
    {"keeper", REC_PID, REC_FIELD(info.keeper_pid), SEEN_KEEPER},
    {"keeper_start", REC_ULL, REC_FIELD(info.keeper_start_ticks), SEEN_KSTART},
    {"run_uid", REC_UID, REC_FIELD(info.run_uid), 0},
    {"term_grace_s", REC_DOUBLE, REC_FIELD(term_grace_s), 0},
    {"isolated", REC_BOOL, REC_FIELD(info.isolated), 0},
    {"devices_isolated", REC_BOOL, REC_FIELD(info.devices_isolated), 0},
    {"cgroup_v1", REC_BOOL, REC_FIELD(info.cgroup_v1), 0},
    {"stop_grace_s", REC_DOUBLE, REC_FIELD(stop_grace_s), 0},
    {"stop_begun_s", REC_DOUBLE, REC_FIELD(stop_begun_s), 0},
    {"stop_phase", REC_PHASE, REC_FIELD(phase), 0},
    {"stop_deadline_s", REC_DOUBLE, REC_FIELD(deadline_s), 0},
    {"ack_seen", REC_BOOL, REC_FIELD(ack_seen), 0},
    {"stop_hard", REC_BOOL, REC_FIELD(stop_hard), 0},
};

/* v into r's field as k says; -1 when the value is bad. */
static int parse_field(ts_rec *r, const struct rec_key *k, const char *v)
{
    void *dst = (char *)r + k->off;
    switch (k->kind) {
    case REC_TEXT:
        return copy_field(dst, k->len, v);
    case REC_PID:
        return parse_pid(v, dst);
    case REC_ULL:
        return parse_ull(v, dst);
    case REC_UID:
        return parse_uid(v, dst);
    case REC_DOUBLE:
        return parse_double(v, dst);
    case REC_BOOL:
        return parse_bool(v, dst);
    default:
        return parse_phase(v, dst);
    }
}

/* One "key value" line into r; -1 when the value is bad. */
static int parse_line(ts_rec *r, const char *key, char *v, int *seen)
{
    ts_task_info *in = &r->info;
    if (unescape(v) != 0)
        return -1;
    for (size_t i = 0; i < sizeof REC_KEYS / sizeof REC_KEYS[0]; i++)
        if (strcmp(key, REC_KEYS[i].key) == 0) {
            *seen |= REC_KEYS[i].seen;
            return parse_field(r, &REC_KEYS[i], v);
        }
    if (strcmp(key, "uid") == 0) {
        if (parse_uid(v, &in->uid) != 0)
            return -1;
        in->run_uid = in->uid; /* until a later run_uid line says otherwise */
        return 0;
    }
    if (strcmp(key, "stop_signal") == 0) {
        unsigned long long u;
        r->stopping = true;
        if (parse_ull(v, &u) != 0 || u == 0 || u > SIGNAL_MAX)
            return -1;
        r->stop_signal = (int)u;
        return 0;
    }
    if (strcmp(key, "meta") == 0) {
        free(r->meta);
        r->meta = strdup(v);
        return r->meta == NULL ? -1 : 0;
    }
    return 0; /* a key from a newer agent */
}

int agent_rec_read(const char *path, ts_rec *r, ts_err *err)
{
    memset(r, 0, sizeof *r);
    r->phase = TS_TASK_RUNNING;
    size_t len;
    char *text = slurp(path, REC_FILE_MAX_BYTES, &len);
    if (text == NULL)
        return ts_err_set(err, errno == ENOENT ? TS_ENOENT : TS_EIO, "record %s: %s", path,
                          strerror(errno));
    int rc = 0, seen = 0, lineno = 0;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line != NULL && rc == 0;
         line = strtok_r(NULL, "\n", &save)) {
        lineno++;
        if (lineno == 1) {
            if (strcmp(line, REC_VERSION_LINE) != 0)
                rc = ts_err_set(err, TS_EINVAL, "record %s:1: not \"%s\"", path,
                                REC_VERSION_LINE);
            continue;
        }
        char *sp = strchr(line, ' ');
        if (sp == NULL) {
            rc = ts_err_set(err, TS_EINVAL, "record %s:%d: not \"key value\"", path, lineno);
            break;
        }
        *sp = '\0';
        if (parse_line(r, line, sp + 1, &seen) != 0)
            rc = ts_err_set(err, TS_EINVAL, "record %s:%d: %s: bad value", path, lineno, line);
    }
    if (rc == 0 && lineno == 0)
        rc = ts_err_set(err, TS_EINVAL, "record %s: empty", path);
    if (rc == 0 && seen != SEEN_ALL)
        rc = ts_err_set(err, TS_EINVAL, "record %s: %s: missing", path,
                        !(seen & SEEN_ID)       ? "id"
                        : !(seen & SEEN_PID)    ? "pid"
                        : !(seen & SEEN_START)  ? "start"
                        : !(seen & SEEN_KEEPER) ? "keeper"
                        : !(seen & SEEN_KSTART) ? "keeper_start"
                        : !(seen & SEEN_OUT)    ? "stdout"
                        : !(seen & SEEN_ERR)    ? "stderr"
                                                : "ack");
    if (rc == 0 && r->stopping && r->phase == TS_TASK_RUNNING)
        rc = ts_err_set(err, TS_EINVAL, "record %s: stop_phase: missing with stop_signal", path);
    free(text);
    return rc;
}

int agent_rec_exit_read(const char *path, pid_t pid, unsigned long long start, int *code, int *sig,
                     long long *oom_kills, int *cut_off)
{
    size_t len;
    char *text = slurp(path, EXIT_FILE_MAX_BYTES, &len);
    if (text == NULL)
        return 0;
    pid_t fpid = 0;
    unsigned long long fstart = 0, v = 0;
    int lineno = 0, got = 0;
    bool ok = true;
    *code = -1;
    *sig = 0;
    *oom_kills = 0;
    *cut_off = TS_CUT_NONE;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line != NULL && ok;
         line = strtok_r(NULL, "\n", &save)) {
        char *sp = strchr(line, ' ');
        if (++lineno == 1) {
            ok = strcmp(line, EXIT_VERSION_LINE) == 0;
            continue;
        }
        if (sp == NULL) {
            ok = false;
            break;
        }
        *sp = '\0';
        if (strcmp(line, "pid") == 0)
            ok = parse_pid(sp + 1, &fpid) == 0;
        else if (strcmp(line, "start") == 0)
            ok = parse_ull(sp + 1, &fstart) == 0;
        else if (strcmp(line, "exit") == 0 && parse_ull(sp + 1, &v) == 0 && v <= EXIT_CODE_MAX) {
            *code = (int)v;
            got++;
        } else if (strcmp(line, "signal") == 0 && parse_ull(sp + 1, &v) == 0 && v > 0 &&
                   v <= SIGNAL_MAX) {
            *sig = (int)v;
            got++;
        } else if (strcmp(line, "oom_kill") == 0 && parse_ull(sp + 1, &v) == 0 &&
                   v < (1ULL << 62)) {
            *oom_kills = (long long)v;
        } else if (strcmp(line, "cut_off") == 0) {
            *cut_off = strcmp(sp + 1, "1") == 0       ? TS_CUT_KEEPER
                       : strcmp(sp + 1, "agent") == 0 ? TS_CUT_AGENT_LEFT
                                                      : *cut_off;
        }
    }
    free(text);
    return ok && got == 1 && fpid == pid && fstart == start ? 1 : 0;
}

int agent_rec_exit_mark_left(const ts_rec_paths *p)
{
    size_t len;
    char *text = slurp(p->exit, EXIT_FILE_MAX_BYTES, &len);
    if (text == NULL)
        return -1;
    static const char mark[] = "cut_off agent\n"; /* an older agent passes over it */
    int rc = agent_rec_put(p->exit_tmp, p->exit, text, len, mark, sizeof mark - 1);
    free(text);
    return rc;
}

int agent_rec_remove(const ts_rec_paths *p)
{
    const char *all[] = {p->record, p->record_tmp, p->keeper_tmp, p->exit, p->exit_tmp};
    int rc = 0;
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (unlink(all[i]) != 0 && errno != ENOENT)
            rc = -1;
    return rc;
}

int agent_task_records(const char *record_dir, int (*fn)(const char *task_id, void *ctx),
                    void *ctx, ts_err *err)
{
    static const char SUFFIX[] = ".task";
    const size_t slen = sizeof SUFFIX - 1;
    DIR *d = opendir(record_dir != NULL ? record_dir : "");
    if (d == NULL)
        return ts_err_set(err, errno == ENOENT ? TS_ENOENT : TS_EIO, "record_dir %s: %s",
                          record_dir != NULL ? record_dir : "(null)", strerror(errno));
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        size_t len = strlen(de->d_name);
        if (len <= slen || len - slen > TS_TASK_ID_MAX ||
            strcmp(de->d_name + len - slen, SUFFIX) != 0)
            continue;
        char id[TS_TASK_ID_MAX + 1];
        memcpy(id, de->d_name, len - slen);
        id[len - slen] = '\0';
        if (id[strspn(id, TASK_ID_CHARS)] != '\0' || strcmp(id, ".") == 0 ||
            strcmp(id, "..") == 0)
            continue; /* not a name agent_task_start gives */
        n++;
        if (fn != NULL && fn(id, ctx) != 0)
            break;
    }
    closedir(d);
    return n;
}
