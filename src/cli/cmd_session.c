/*
 * cmd_session.c - `tessera run`, `exec`, `attach` and `port-forward`:
 * interactive sessions through the controller (docs/interactive.md).
 *
 * Each opens POST /v1/jobs/{id}/sessions, upgraded to a stream
 * (tessera/stream.h) that the controller splices with the agent's own
 * connection. With a terminal on both ends the local one goes raw (every
 * key, ^C included, reaches the remote PTY, whose line discipline signals
 * the remote process group) and window changes are sent as resize frames;
 * without one, stdin and stdout are streamed and SIGINT/SIGTERM/SIGHUP are
 * sent as signal frames. `run` submits an interactive job, waits for it to
 * start and attaches; `run` and `attach` exit with the job's exit status,
 * `exec` with its command's.
 *
 * port-forward is the one part of the CLI with threads: each connection
 * accepted on 127.0.0.1:LOCAL is a stream of its own, relayed by a thread.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "io/write_all.h"
#include "tessera/sbatch.h"
#include "tessera/stream.h"

#define START_POLL_MS 20            /* how often `run` asks whether its job started */
#define START_WAIT_NOTE_S 2.0       /* then says it waits, and why */
#define END_WAIT_S 60.0             /* for the job's end after its stream ended */
#define OPEN_TIMEOUT_S 30.0
#define WRITE_TIMEOUT_S 60.0
#define FORWARD_BACKLOG 16

static volatile sig_atomic_t got_winch, got_signal, stop_forward;

static void on_winch(int s)
{
    (void)s;
    got_winch = 1;
}

static void on_signal(int s) { got_signal = s; }

static void on_stop(int s)
{
    (void)s;
    stop_forward = 1;
}

static double mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Options shared by the session commands, and the global flags. */
typedef struct sess_opts {
    const char *tenant, *name, *gpus, *tier, *time_limit, *image, *file, *idle;
    bool no_tty;
    char **cmd;   /* after "--" */
    int ncmd;
    const char *pos[3];
    int npos;
    /* srun and salloc: Slurm's job options, read as sbatch reads them */
    const char *sopts[64];
    int nsopts;
} sess_opts;

static int parse_opts(struct cli_ctx *ctx, const struct cli_cmd *cmd, int argc, char **argv,
                      sess_opts *o, bool job_flags)
{
    memset(o, 0, sizeof *o);
    /* srun and salloc read as Slurm's: --pty, --gres=gpu:N, the command
     * without "--" */
    bool slurm = job_flags && (strcmp(cmd->name, "srun") == 0 || strcmp(cmd->name, "salloc") == 0);
    const struct cli_word own[] = {{"tenant", &o->tenant},         {"name", &o->name},
                                   {"gpus", &o->gpus},             {"tier", &o->tier},
                                   {"time-limit", &o->time_limit}, {"image", &o->image},
                                   {"file", &o->file},             {"idle", &o->idle}};
    size_t nown = job_flags ? sizeof own / sizeof own[0] : 0;
    int i = 0;
    for (; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) {
            i++;
            break;
        }
        if (strcmp(a, "-T") == 0 || strcmp(a, "--no-tty") == 0) {
            o->no_tty = true;
            continue;
        }
        if (slurm && strcmp(a, "--pty") == 0)
            continue; /* a terminal is the default wherever there is one */
        if (slurm && (a[0] != '-' || !a[1]))
            break; /* srun CMD ARGS...: the command starts at the first word */
        if (a[0] != '-' || !a[1]) {
            if (o->npos == 3)
                return cli_usage_error(cmd, "too many arguments (the command goes after --)");
            o->pos[o->npos++] = a;
            continue;
        }
        if (strcmp(a, "-f") == 0 && i + 1 < argc && job_flags) {
            o->file = argv[++i];
            continue;
        }
        bool mine = false;
        if (cli_take_word(ctx, cmd, own, nown, argc, argv, &i, &mine) != CLI_CONTINUE)
            return CLI_EXIT_USAGE;
        if (!mine && slurm && o->nsopts + 2 <= (int)(sizeof o->sopts / sizeof *o->sopts)) {
            /* -p, -t, -N, -n, -c, --mem, -J, --gres=gpu:TYPE:N...: sbatch's reading */
            o->sopts[o->nsopts++] = a;
            if (ts_sbatch_option_takes_next(a) && i + 1 < argc)
                o->sopts[o->nsopts++] = argv[++i];
            continue;
        }
        if (!mine)
            return cli_usage_error(cmd, "unknown option %s", a);
    }
    o->cmd = argv + i;
    o->ncmd = argc - i;
    int rc = cli_parse(ctx, cmd, 0, NULL, NULL, NULL, 0, 0); /* help, globals */
    if (rc != CLI_CONTINUE)
        return rc;
    return cli_config_resolve(ctx);
}

/* ---- the relay ------------------------------------------------------------------ */

static struct termios saved_tty;
static bool tty_raw;

static void restore_tty(void)
{
    if (tty_raw) {
        tcsetattr(0, TCSADRAIN, &saved_tty);
        tty_raw = false;
    }
}

static int send_size(ts_stream *st)
{
    struct winsize ws;
    if (ioctl(1, TIOCGWINSZ, &ws) != 0 && ioctl(0, TIOCGWINSZ, &ws) != 0)
        return 0;
    uint8_t p[4] = {(uint8_t)(ws.ws_row >> 8), (uint8_t)ws.ws_row, (uint8_t)(ws.ws_col >> 8),
                    (uint8_t)ws.ws_col};
    return ts_stream_frame(st, TS_FRAME_RESIZE, p, sizeof p, WRITE_TIMEOUT_S);
}

typedef struct relay_out {
    int exit_code;      /* from an exit frame, -1 none */
    char error[600];    /* from an error frame */
    bool remote_eof;
    bool broken;        /* the stream ended without an end frame */
} relay_out;

/* What the local side (fd) has, one read, sent as a data frame; at its end
 * (or an error) an end-of-file frame, and *open false. -1 when the stream
 * refused the data. */
static int pump_local(ts_stream *st, int fd, uint8_t *buf, bool *open)
{
    ssize_t k = read(fd, buf, TS_FRAME_PAYLOAD_MAX);
    if (k > 0)
        return ts_stream_frame(st, TS_FRAME_DATA, buf, (size_t)k, WRITE_TIMEOUT_S) != 0 ? -1 : 0;
    if (k == 0 || errno != EINTR) {
        *open = false;
        ts_stream_frame(st, TS_FRAME_EOF, NULL, 0, WRITE_TIMEOUT_S);
    }
    return 0;
}

/* One relay between a local descriptor and a session's stream: what the
 * local side has goes out as data frames until its end, and each frame the
 * stream brings goes to on_frame. The terminal's relay and a
 * port-forward's are this one loop, each with its own frames' meaning. */
typedef struct relay {
    ts_stream *st;
    int in_fd;       /* the local side */
    bool in_open;    /* until it ended */
    int poll_ms;     /* a turn's wait while the stream has nothing pending */
    bool remote_eof; /* the stream's end-of-file frame came */
    /* one frame from the stream; true: the relay is over */
    bool (*on_frame)(struct relay *r, int type, const uint8_t *pl, size_t n);
    /* first in each turn; true: the relay is over */
    bool (*turn)(struct relay *r);
    void *u;
} relay;

/* How a relay ended: a frame or a turn said so (or poll failed), the stream
 * refused the local side's data, the stream ended, a frame was malformed. */
enum relay_end { RELAY_OVER, RELAY_REFUSED, RELAY_CLOSED, RELAY_MALFORMED, RELAY_MORE };

static enum relay_end relay_frames(relay *r, ts_frame_reader *fr, const uint8_t *buf, size_t k)
{
    size_t off = 0;
    while (off < k) {
        size_t used, n;
        int type;
        const uint8_t *pl;
        int got = ts_frame_feed(fr, buf + off, k - off, &used, &type, &pl, &n);
        off += used;
        if (got < 0)
            return RELAY_MALFORMED;
        if (got == 0)
            break;
        if (type == TS_FRAME_EOF)
            r->remote_eof = true;
        bool over = r->on_frame(r, type, pl, n);
        ts_frame_next(fr);
        if (over)
            return RELAY_OVER;
    }
    return RELAY_MORE;
}

static enum relay_end relay_run(relay *r)
{
    ts_frame_reader *fr = calloc(1, sizeof *fr);
    uint8_t *buf = malloc(TS_FRAME_PAYLOAD_MAX);
    enum relay_end end = RELAY_OVER;
    while (fr && buf && !r->turn(r)) {
        /* an ended side is left out: a hung-up descriptor would wake poll at once */
        struct pollfd p[2] = {{ts_stream_fd(r->st), POLLIN, 0},
                              {r->in_open ? r->in_fd : -1, POLLIN, 0}};
        bool more = ts_stream_pending(r->st); /* then the local side is still looked at */
        int got = poll(p, 2, more ? 0 : r->poll_ms);
        if (got < 0 && errno != EINTR)
            break;
        if (got <= 0 && !more)
            continue;
        if (r->in_open && (p[1].revents & (POLLIN | POLLHUP | POLLERR)) &&
            pump_local(r->st, r->in_fd, buf, &r->in_open) != 0) {
            end = RELAY_REFUSED;
            break;
        }
        if (!more && !p[0].revents)
            continue;
        ssize_t k = ts_stream_read(r->st, buf, TS_FRAME_PAYLOAD_MAX);
        if (k == -1)
            continue;
        end = k <= 0 ? RELAY_CLOSED : relay_frames(r, fr, buf, (size_t)k);
        if (end != RELAY_MORE)
            break;
        end = RELAY_OVER;
    }
    free(fr);
    free(buf);
    return end;
}

/* The terminal's relay: the want_exit of relay_stdio, and what it found. */
typedef struct stdio_relay {
    bool want_exit;
    relay_out *out;
} stdio_relay;

static bool stdio_turn(relay *r)
{
    if (got_winch) {
        got_winch = 0;
        send_size(r->st);
    }
    if (got_signal) {
        uint8_t s = (uint8_t)got_signal;
        got_signal = 0;
        ts_stream_frame(r->st, TS_FRAME_SIGNAL, &s, 1, WRITE_TIMEOUT_S);
    }
    return false;
}

static bool stdio_frame(relay *r, int type, const uint8_t *pl, size_t n)
{
    const stdio_relay *sr = r->u;
    if (type == TS_FRAME_DATA)
        io_write_all(1, pl, n);
    else if (type == TS_FRAME_EOF)
        return !sr->want_exit; /* no more output: an attach is over (an exec's status follows) */
    else if (type == TS_FRAME_EXIT) {
        char x[16];
        snprintf(x, sizeof x, "%.*s", (int)(n < 15 ? n : 15), (const char *)pl);
        sr->out->exit_code = atoi(x);
        return true;
    } else if (type == TS_FRAME_ERROR) {
        snprintf(sr->out->error, sizeof sr->out->error, "%.*s", (int)n, (const char *)pl);
        return true;
    }
    return false;
}

/* Relays the terminal (or stdin/stdout) and the stream until the remote
 * side ends. */
static void relay_stdio(ts_stream *st, bool tty, bool want_exit, relay_out *out)
{
    memset(out, 0, sizeof *out);
    out->exit_code = -1;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    if (tty) {
        if (tcgetattr(0, &saved_tty) == 0) {
            struct termios raw = saved_tty;
            cfmakeraw(&raw);
            if (tcsetattr(0, TCSADRAIN, &raw) == 0) {
                tty_raw = true;
                atexit(restore_tty);
            }
        }
        sa.sa_handler = on_winch;
        sigaction(SIGWINCH, &sa, NULL);
        send_size(st);
    } else {
        sa.sa_handler = on_signal;
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGHUP, &sa, NULL);
    }
    stdio_relay sr = {want_exit, out};
    relay r = {.st = st, .in_fd = 0, .in_open = true, .poll_ms = 500, .on_frame = stdio_frame,
               .turn = stdio_turn, .u = &sr};
    enum relay_end end = relay_run(&r);
    out->remote_eof = r.remote_eof;
    if (end == RELAY_REFUSED)
        out->broken = true;
    else if (end == RELAY_CLOSED)
        out->broken = !r.remote_eof;
    else if (end == RELAY_MALFORMED)
        snprintf(out->error, sizeof out->error, "a malformed frame from the stream");
    restore_tty();
}

static int job_state(struct cli_ctx *ctx, long id, char *state, size_t n, json_t **job_out);

static int open_session(struct cli_ctx *ctx, long job, json_t *req, ts_stream **st)
{
    char path[64], *body = json_dumps(req, JSON_COMPACT);
    snprintf(path, sizeof path, "/v1/jobs/%ld/sessions", job);
    ts_stream_target tg = {.url = ctx->server, .token = ctx->token ? ctx->token : "",
                           .ca_file = ctx->ca};
    int status;
    ts_err err;
    int rc = body ? ts_stream_open(&tg, path, body, OPEN_TIMEOUT_S, st, &status, &err) : TS_ENOMEM;
    if (body && rc != 0 && (status == 0 || status == 503)) {
        /* no answer, or a standby's: one ordinary request finds the leader
         * (http.c moves ctx->server to it), and the stream goes there once */
        char state[32], was[CLI_URL_MAX];
        snprintf(was, sizeof was, "%s", ctx->server);
        if (job_state(ctx, job, state, sizeof state, NULL) == CLI_EXIT_OK &&
            strcmp(was, ctx->server) != 0) {
            tg.url = ctx->server;
            rc = ts_stream_open(&tg, path, body, OPEN_TIMEOUT_S, st, &status, &err);
        }
    }
    free(body);
    if (rc == 0)
        return CLI_EXIT_OK;
    cli_errorf("%s", rc == TS_ENOMEM ? "out of memory" : err.msg);
    return status == 0                      ? CLI_EXIT_UNREACHABLE
           : status == 404                  ? CLI_EXIT_NOT_FOUND
           : status == 401 || status == 403 ? CLI_EXIT_AUTH
           : status >= 500                  ? CLI_EXIT_SERVER
                                            : CLI_EXIT_REFUSED;
}

/* The job's state (and exit code when it ended): 0, or an exit code. */
static int job_state(struct cli_ctx *ctx, long id, char *state, size_t n, json_t **job_out)
{
    char path[64];
    snprintf(path, sizeof path, "/v1/jobs/%ld", id);
    json_t *root, *job;
    int rc = cli_get_member(ctx, path, "job", JSON_OBJECT, &root, &job);
    if (rc != CLI_EXIT_OK)
        return rc;
    const char *s = json_string_value(json_object_get(job, "state"));
    snprintf(state, n, "%s", s ? s : "");
    if (job_out)
        *job_out = json_incref(job);
    json_decref(root);
    return CLI_EXIT_OK;
}

static bool ended(const char *state)
{
    return strcmp(state, "completed") == 0 || strcmp(state, "failed") == 0 ||
           strcmp(state, "cancelled") == 0 || strcmp(state, "timed_out") == 0 ||
           strcmp(state, "timeout") == 0;
}

/* After an attach: waits for the job's end and exits as it did. */
#define RUN_EXIT_NOT_FOUND 127 /* a shell's status for a command it cannot find */

static int job_exit(struct cli_ctx *ctx, long id)
{
    double until = mono() + END_WAIT_S;
    char state[32];
    while (mono() < until) {
        json_t *job = NULL;
        int rc = job_state(ctx, id, state, sizeof state, &job);
        if (rc != CLI_EXIT_OK)
            return rc;
        if (ended(state) || strcmp(state, "pending") == 0 || strcmp(state, "held") == 0) {
            json_t *x = json_object_get(job, "exit_code"), *sg = json_object_get(job, "signal");
            /* its command never started: a shell's 127, as the agent says it */
            const json_t *r0 = json_array_get(json_object_get(job, "ranks"), 0);
            const char *rwhy = json_string_value(json_object_get(r0, "reason"));
            bool not_found = rwhy && strstr(rwhy, "could not start: command not found: ");
            int code = json_is_integer(x)    ? (int)json_integer_value(x)
                       : json_is_integer(sg) ? 128 + (int)json_integer_value(sg)
                       : not_found           ? RUN_EXIT_NOT_FOUND
                       : strcmp(state, "completed") == 0 ? 0
                                                         : 1;
            if (!ended(state)) { /* stopped and put back: reaped when idle, preempted */
                const char *why = json_string_value(json_object_get(job, "why"));
                const char *reason = json_string_value(json_object_get(job, "reason"));
                cli_errorf("job %ld was stopped and is %s (%s)%s%s", id, state,
                           reason ? reason : "no reason given", why ? ": " : "", why ? why : "");
                code = CLI_EXIT_REFUSED;
            }
            json_decref(job);
            return code;
        }
        json_decref(job);
        sleep_ms(100);
    }
    cli_errorf("job %ld: its stream ended but the job is still %s after %.0f s", id, state,
               END_WAIT_S);
    return CLI_EXIT_SERVER;
}

/* A job that ended before its session opened, said with its why; job (its
 * document) is released. The job's exit status. */
static int ended_before(struct cli_ctx *ctx, long id, const char *state, json_t *job)
{
    const char *why = json_string_value(json_object_get(job, "why"));
    cli_errorf("job %ld %s before its session opened%s%s", id, state, why ? ": " : "",
               why ? why : "");
    json_decref(job);
    return job_exit(ctx, id);
}

/* A session refused because its task is gone (it could not start: its
 * command not found): the job's own end, once the controller recorded it
 * (a few seconds at most), says it better. True with *code the job's exit. */
static bool ended_instead(struct cli_ctx *ctx, long id, int *code)
{
    double until = mono() + END_WAIT_S;
    char state[32];
    while (mono() < until) {
        json_t *job = NULL;
        if (job_state(ctx, id, state, sizeof state, &job) != CLI_EXIT_OK)
            return false;
        if (ended(state)) {
            *code = ended_before(ctx, id, state, job);
            return true;
        }
        bool waits = strcmp(state, "running") == 0 || strcmp(state, "stopping") == 0;
        json_decref(job);
        if (!waits)
            return false;
        sleep_ms(START_POLL_MS);
    }
    return false;
}

static int attach_job(struct cli_ctx *ctx, long id, long rank)
{
    (void)rank;
    json_t *req = json_pack("{s:s,s:i}", "kind", "attach", "rank", 0);
    ts_stream *st;
    int rc = open_session(ctx, id, req, &st);
    json_decref(req);
    int code;
    /* refused as the job ended (its command not found, a fast exit): its
     * end, as when the stream says so */
    if (rc == CLI_EXIT_REFUSED && ended_instead(ctx, id, &code))
        return code;
    if (rc != CLI_EXIT_OK)
        return rc;
    relay_out out;
    relay_stdio(st, isatty(0) && isatty(1), false, &out);
    ts_stream_close(st);
    if (out.error[0] && ended_instead(ctx, id, &code))
        return code;
    if (out.error[0]) {
        cli_errorf("job %ld: %s", id, out.error);
        return CLI_EXIT_REFUSED;
    }
    return job_exit(ctx, id);
}

/* The options, job and rank of a JOB [RANK] command (attach, exec): more
 * than two arguments, or a command where takes_cmd is false, is the usage
 * error shape. */
static int job_rank_opts(struct cli_ctx *ctx, const struct cli_cmd *cmd, int argc, char **argv,
                         bool takes_cmd, const char *shape, sess_opts *o, long *id, long *rank)
{
    int rc = parse_opts(ctx, cmd, argc, argv, o, false);
    if (rc != CLI_CONTINUE)
        return rc;
    if ((o->ncmd && !takes_cmd) || o->npos > 2)
        return cli_usage_error(cmd, "%s", shape);
    if (o->npos < 1)
        return cli_usage_error(cmd, "a job id is needed");
    if ((rc = cli_job_id(cmd, o->pos[0], id)) != CLI_CONTINUE)
        return rc;
    *rank = 0;
    if (o->npos > 1 && !cli_parse_long(o->pos[1], 0, 65536, rank))
        return cli_usage_error(cmd, "RANK: \"%s\" is not a rank (0..65536)", o->pos[1]);
    return CLI_CONTINUE;
}

int cli_cmd_attach(struct cli_ctx *ctx, const struct cli_cmd *cmd, int argc, char **argv)
{
    sess_opts o;
    long id = 0, rank = 0;
    int rc = job_rank_opts(ctx, cmd, argc, argv, false, "attach takes JOB [RANK] only", &o, &id,
                           &rank);
    if (rc != CLI_CONTINUE)
        return rc;
    return attach_job(ctx, id, rank);
}

int cli_cmd_exec(struct cli_ctx *ctx, const struct cli_cmd *cmd, int argc, char **argv)
{
    sess_opts o;
    long id = 0, rank = 0;
    int rc = job_rank_opts(ctx, cmd, argc, argv, true, "exec takes JOB [RANK] -- COMMAND...", &o,
                           &id, &rank);
    if (rc != CLI_CONTINUE)
        return rc;
    if (o.ncmd == 0)
        return cli_usage_error(cmd, "a command is needed after --");
    bool tty = !o.no_tty && isatty(0) && isatty(1);
    json_t *c = json_array();
    for (int i = 0; i < o.ncmd; i++)
        json_array_append_new(c, json_string(o.cmd[i]));
    json_t *req = json_pack("{s:s,s:i,s:o,s:b}", "kind", "exec", "rank", (int)rank, "command", c,
                            "tty", tty);
    struct winsize ws;
    if (req && tty && ioctl(1, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0 && ws.ws_col > 0 &&
        ws.ws_row <= 1000 && ws.ws_col <= 1000) {
        json_object_set_new(req, "rows", json_integer(ws.ws_row));
        json_object_set_new(req, "cols", json_integer(ws.ws_col));
    }
    ts_stream *st;
    rc = open_session(ctx, id, req, &st);
    json_decref(req);
    if (rc != CLI_EXIT_OK)
        return rc;
    relay_out out;
    relay_stdio(st, tty, true, &out);
    ts_stream_close(st);
    if (out.error[0]) {
        cli_errorf("job %ld rank %ld: %s", id, rank, out.error);
        return CLI_EXIT_REFUSED;
    }
    if (out.exit_code < 0) {
        cli_errorf("job %ld rank %ld: the session ended without an exit status", id, rank);
        return CLI_EXIT_SERVER;
    }
    return out.exit_code;
}

/* ---- run ------------------------------------------------------------------------ */

/* srun's and salloc's Slurm options (o->sopts), read as tessera sbatch reads
 * them, into spec: what they say of the tenant, name, its one task, time
 * limit, tier, image and nodes, unless a tessera flag said it; and the
 * environment sbatch gives a script (SLURM_JOB_NAME among it), which makes
 * the job a Slurm job: its task gets Slurm's variables and runs srun as
 * steps (ctld/steps.h). salloc always reads so. */
static int slurm_options(struct cli_ctx *ctx, const struct cli_cmd *cmd, const sess_opts *o,
                         json_t *spec)
{
    if (o->nsopts == 0 && strcmp(cmd->name, "salloc") != 0)
        return CLI_EXIT_OK;
    unsigned given = (o->tenant ? CLI_SL_TENANT : 0) | (o->name ? CLI_SL_NAME : 0) |
                     (o->gpus ? CLI_SL_TASKS : 0) | (o->time_limit ? CLI_SL_TIME : 0) |
                     (o->tier ? CLI_SL_TIER : 0) | (o->image ? CLI_SL_IMAGE : 0) |
                     (json_object_get(spec, "env") ? CLI_SL_ENV : 0);
    return cli_sbatch_session(ctx, cmd, o->sopts, o->nsopts, o->tenant, given, spec);
}

static int submit_interactive(struct cli_ctx *ctx, const struct cli_cmd *cmd, const sess_opts *o,
                              bool tty, long *id)
{
    json_t *spec = NULL;
    if (o->file) {
        int rc;
        size_t len;
        char *text = cli_read_file(o->file, 1 << 20, &len, &rc);
        if (!text)
            return rc;
        json_error_t je;
        spec = json_loadb(text, len, 0, &je);
        free(text);
        if (!json_is_object(spec)) {
            json_decref(spec);
            return cli_usage_error(cmd, "-f %s: a JSON job spec is needed here (%s)", o->file,
                                   je.text);
        }
    } else {
        spec = json_object();
    }
    int rc = slurm_options(ctx, cmd, o, spec);
    if (rc != CLI_EXIT_OK) {
        json_decref(spec);
        return rc;
    }
    char tenant[128] = "";
    if (o->tenant) {
        snprintf(tenant, sizeof tenant, "%s", o->tenant);
    } else if (!json_object_get(spec, "tenant")) {
        json_t *root, *who;
        int rc = cli_get_member(ctx, "/v1/whoami", "tenant", JSON_STRING, &root, &who);
        if (rc != CLI_EXIT_OK) {
            json_decref(spec);
            return rc;
        }
        snprintf(tenant, sizeof tenant, "%s", json_string_value(who));
        json_decref(root);
    }
    if (tenant[0])
        json_object_set_new(spec, "tenant", json_string(tenant));
    if (o->name || !json_object_get(spec, "name"))
        json_object_set_new(spec, "name", json_string(o->name ? o->name : "interactive"));
    long gpus = 0;
    if (o->gpus && !cli_parse_long(o->gpus, 0, 64, &gpus)) {
        json_decref(spec);
        return cli_usage_error(cmd, "--gpus: \"%s\" is not a number 0..64", o->gpus);
    }
    if (o->gpus || !json_object_get(spec, "tasks"))
        json_object_set_new(spec, "tasks", json_pack("[{s:i,s:i}]", "count", 1, "gpus", (int)gpus));
    if (o->tier)
        json_object_set_new(spec, "tier", json_string(o->tier));
    if (o->time_limit)
        json_object_set_new(spec, "time_limit", json_string(o->time_limit));
    if (o->image)
        json_object_set_new(spec, "image", json_string(o->image));
    if (o->idle) /* reaped by the idle policy after this long (docs/job-spec.md) */
        json_object_set_new(spec, "idle", json_pack("{s:s}", "timeout", o->idle));
    json_t *c = json_array();
    for (int i = 0; i < o->ncmd; i++)
        json_array_append_new(c, json_string(o->cmd[i]));
    json_object_set_new(spec, "command", c);
    json_t *it = json_pack("{s:b}", "terminal", tty);
    struct winsize ws;
    if (tty && ioctl(1, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0 && ws.ws_col > 0 &&
        ws.ws_row <= 1000 && ws.ws_col <= 1000) {
        json_object_set_new(it, "rows", json_integer(ws.ws_row));
        json_object_set_new(it, "cols", json_integer(ws.ws_col));
    }
    json_object_set_new(spec, "interactive", it);
    /* a terminal's kind goes with it, as ssh sends it: the remote programs
     * draw for this terminal (unless the job set its own) */
    const char *term = getenv("TERM");
    if (tty && term && *term && strlen(term) < 64 && strspn(term, "abcdefghijklmnopqrstuvwxyz"
                                                          "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                                                          "-_.+") == strlen(term)) {
        json_t *env = json_object_get(spec, "env");
        if (!env) {
            env = json_object();
            json_object_set_new(spec, "env", env);
        }
        if (json_is_object(env) && !json_object_get(env, "TERM"))
            json_object_set_new(env, "TERM", json_string(term));
    }
    struct cli_resp resp = {0};
    rc = cli_send_json(ctx, "POST", "/v1/jobs", spec, &resp);
    if (rc != CLI_EXIT_OK)
        return rc;
    json_t *jobs = json_object_get(resp.json, "jobs");
    json_t *jid = json_object_get(json_array_get(jobs, 0), "id");
    if (!json_is_integer(jid)) {
        cli_resp_free(&resp);
        cli_errorf("unreadable answer: no job id");
        return CLI_EXIT_SERVER;
    }
    *id = (long)json_integer_value(jid);
    cli_resp_free(&resp);
    return CLI_EXIT_OK;
}

int cli_cmd_run(struct cli_ctx *ctx, const struct cli_cmd *cmd, int argc, char **argv)
{
    sess_opts o;
    int rc = parse_opts(ctx, cmd, argc, argv, &o, true);
    if (rc != CLI_CONTINUE)
        return rc;
    if (o.npos)
        return cli_usage_error(cmd, "unexpected argument \"%s\" (the command goes after --)",
                               o.pos[0]);
    if (o.ncmd == 0)
        return cli_usage_error(cmd, "a command is needed after --");
    bool tty = !o.no_tty && isatty(0) && isatty(1);
    long id = 0;
    if ((rc = submit_interactive(ctx, cmd, &o, tty, &id)) != CLI_EXIT_OK)
        return rc;
    double t0 = mono();
    bool noted = false;
    char state[32] = "";
    for (;;) {
        json_t *job = NULL;
        if ((rc = job_state(ctx, id, state, sizeof state, &job)) != CLI_EXIT_OK)
            return rc;
        /* running, and its image (if any) is there: rank 0 has started */
        if (strcmp(state, "running") == 0 && !json_object_get(job, "image_pull")) {
            json_decref(job);
            break;
        }
        if (ended(state))
            return ended_before(ctx, id, state, job);
        if (!noted && mono() - t0 > START_WAIT_NOTE_S) {
            const char *why = json_string_value(json_object_get(job, "reason"));
            fprintf(stderr, "tessera: job %ld is %s%s%s; waiting for it to start (^C leaves it "
                    "queued: tessera attach %ld)\n", id, state, why ? ": " : "", why ? why : "",
                    id);
            noted = true;
        }
        json_decref(job);
        sleep_ms(START_POLL_MS);
    }
    return attach_job(ctx, id, 0);
}

/* ---- port-forward ------------------------------------------------------------------ */

typedef struct fwd {
    struct cli_ctx *ctx;
    long job, rank;
    int remote;
    int fd;
} fwd;

/* A forward is over when both sides ended. */
static bool fwd_turn(relay *r) { return !r->in_open && r->remote_eof; }

static bool fwd_frame(relay *r, int type, const uint8_t *pl, size_t n)
{
    if (type == TS_FRAME_DATA)
        return io_write_all(r->in_fd, pl, n) != 0;
    if (type == TS_FRAME_EOF)
        shutdown(r->in_fd, SHUT_WR);
    else if (type == TS_FRAME_ERROR) {
        cli_errorf("port-forward: %.*s", (int)n, (const char *)pl);
        return true;
    }
    return false;
}

static void *fwd_main(void *arg)
{
    fwd *f = arg;
    json_t *req = json_pack("{s:s,s:i,s:i}", "kind", "forward", "rank", (int)f->rank, "port",
                            f->remote);
    ts_stream *st = NULL;
    int rc = open_session(f->ctx, f->job, req, &st);
    json_decref(req);
    if (rc != CLI_EXIT_OK) {
        close(f->fd);
        free(f);
        return NULL;
    }
    relay r = {.st = st, .in_fd = f->fd, .in_open = true, .poll_ms = 1000,
               .on_frame = fwd_frame, .turn = fwd_turn};
    relay_run(&r);
    ts_stream_close(st);
    close(f->fd);
    free(f);
    return NULL;
}

int cli_cmd_port_forward(struct cli_ctx *ctx, const struct cli_cmd *cmd, int argc, char **argv)
{
    sess_opts o;
    long id = 0, rank = 0, local = 0, remote = 0;
    int rc = parse_opts(ctx, cmd, argc, argv, &o, false);
    if (rc != CLI_CONTINUE)
        return rc;
    if (o.ncmd || o.npos < 2 || o.npos > 3)
        return cli_usage_error(cmd, "port-forward takes JOB [RANK] LOCAL:REMOTE");
    if ((rc = cli_job_id(cmd, o.pos[0], &id)) != CLI_CONTINUE)
        return rc;
    if (o.npos == 3 && !cli_parse_long(o.pos[1], 0, 65536, &rank))
        return cli_usage_error(cmd, "RANK: \"%s\" is not a rank (0..65536)", o.pos[1]);
    const char *ports = o.pos[o.npos - 1];
    const char *colon = strchr(ports, ':');
    char lp[16];
    if (!colon || (size_t)(colon - ports) >= sizeof lp)
        return cli_usage_error(cmd, "LOCAL:REMOTE: \"%s\" is not two ports", ports);
    snprintf(lp, sizeof lp, "%.*s", (int)(colon - ports), ports);
    if (!cli_parse_long(lp, 0, 65535, &local) || !cli_parse_long(colon + 1, 1, 65535, &remote))
        return cli_usage_error(cmd, "LOCAL:REMOTE: \"%s\": LOCAL 0..65535 (0: any free port), "
                               "REMOTE 1..65535", ports);
    /* before anything listens, the checks each connection's session meets
     * (the caller may, the job runs, it has the rank), asked once: a refusal
     * exits as exec's does, not as a listener whose connections are reset */
    char path[64];
    snprintf(path, sizeof path, "/v1/jobs/%ld/sessions", id);
    struct cli_resp resp = {0};
    rc = cli_send_json(ctx, "POST", path,
                       json_pack("{s:s,s:i,s:i,s:b}", "kind", "forward", "rank", (int)rank,
                                 "port", (int)remote, "check", 1), &resp);
    cli_resp_free(&resp);
    if (rc != CLI_EXIT_OK)
        return rc;
    int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)local),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (ls >= 0)
        setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (ls < 0 || bind(ls, (struct sockaddr *)&sa, sizeof sa) != 0 ||
        listen(ls, FORWARD_BACKLOG) != 0) {
        cli_errorf("127.0.0.1:%ld: cannot listen: %s", local, strerror(errno));
        if (ls >= 0)
            close(ls);
        return CLI_EXIT_USAGE;
    }
    socklen_t sl = sizeof sa;
    getsockname(ls, (struct sockaddr *)&sa, &sl);
    printf("Forwarding from 127.0.0.1:%d -> job %ld rank %ld port %ld\n", ntohs(sa.sin_port), id,
           rank, remote);
    fflush(stdout);
    struct sigaction act;
    memset(&act, 0, sizeof act);
    act.sa_handler = on_stop;
    sigemptyset(&act.sa_mask);
    sigaction(SIGINT, &act, NULL);
    sigaction(SIGTERM, &act, NULL);
    signal(SIGPIPE, SIG_IGN);
    while (!stop_forward) {
        struct pollfd p = {ls, POLLIN, 0};
        if (poll(&p, 1, 500) <= 0)
            continue;
        int c = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0)
            continue;
        fwd *f = malloc(sizeof *f);
        pthread_t th;
        if (!f) {
            close(c);
            continue;
        }
        *f = (fwd){ctx, id, rank, (int)remote, c};
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&th, &at, fwd_main, f) != 0) {
            close(c);
            free(f);
        }
        pthread_attr_destroy(&at);
    }
    close(ls);
    return CLI_EXIT_OK;
}
