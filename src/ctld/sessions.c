/*
 * sessions.c - interactive sessions through the controller
 * (docs/interactive.md): `tessera attach/exec/run/port-forward`.
 *
 * A client POSTs /v1/jobs/{id}/sessions; once the caller may (the job's
 * owner, an admin, its tenant's admins where privacy allows: the same
 * people who read its output) and the rank runs on an agent node, the
 * session takes a slot of a fixed table (an id and a one-time secret, both
 * random) and the answer is 101: the connection becomes a raw stream. The
 * session rides on the node's desired state (like an output request, it
 * moves the node's generation without changing what a report is applied
 * against), so the agent's long-poll wakes; the agent opens its OWN
 * connection, POST /v1/agent/stream/{sid} with its node credential and the
 * secret (a node may only open its own nodes' sessions), also upgraded.
 *
 * One thread per session splices the two sockets with a bounded buffer
 * each way (SESSION_BUFFER_BYTES): a side that does not read stops the
 * other side being read, so a slow client slows its own session only,
 * never the controller's loop, its HTTP threads or another session. The
 * controller reads no frame: the CLI and the agent speak tessera/stream.h
 * end to end. A session whose agent does not come within
 * SESSION_AGENT_WAIT_S gets one error frame and ends.
 *
 * Slots are addressed by a tag (slot index and generation) so that an
 * upgrade that completes after its session ended finds nothing and closes.
 */
#define _DEFAULT_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ctld/ctld.h"
#include "ctld/input.h"
#include "ctld/http.h"
#include "ctld/router.h"
#include "tessera/stream.h"

#define SESSIONS_MAX 256            /* sessions relayed or waiting at once, cluster-wide */
#define SESSIONS_PER_TENANT_MAX 64  /* ... of one tenant */
#define SESSION_BUFFER_BYTES 65536  /* each way */
#define SESSION_AGENT_WAIT_S 15.0   /* for the agent's side */
#define SESSION_POLL_MS 250         /* how soon a relay sees the controller stop */
#define SESSION_HALF_CLOSED_S 30.0  /* one side closed: the other's close within this */
#define SESSION_KEEPALIVE_S 30      /* TCP keepalive: a peer gone silent is found */
#define SESSION_ID_BYTES 12         /* random bytes of an id (hex: 24 characters) */
#define SESSION_SECRET_BYTES 24     /* ... of a secret (48 characters) */
#define SESSION_COMMAND_MAX 256     /* arguments of an exec */

enum { SIDE_CLIENT = 0, SIDE_AGENT = 1 };

typedef struct side {
    int fd;                                   /* -1 until upgraded */
    struct MHD_UpgradeResponseHandle *urh;
    char *extra;                              /* bytes read past its request */
    size_t nextra;
} side;

typedef struct session {
    bool used;
    unsigned gen;
    char id[2 * SESSION_ID_BYTES + 1];
    char secret[2 * SESSION_SECRET_BYTES + 1];
    int node;
    char tenant[TS_SPEC_NAME_MAX];
    json_t *req;            /* the checked request: ask's command strings */
    ts_desired_session ask; /* what the agent is told (desired state "sessions") */
    bool claimed;           /* the agent's side was answered: no longer wanted */
    side s[2];
    double created_s;
} session;

typedef struct ctld_sessions {
    pthread_mutex_t mu;
    pthread_cond_t cv;      /* a side upgraded, a relay ended */
    session slot[SESSIONS_MAX];
    int nthreads;           /* relays running */
    bool stopping;
} ctld_sessions;

static uintptr_t tag_of(int slot, unsigned gen, int side)
{
    return ((uintptr_t)slot << 20 | (uintptr_t)(gen & 0x7ffff) << 1 | (uintptr_t)side) + 1;
}

static session *slot_of(ctld_sessions *S, uintptr_t tag, int *side_out)
{
    if (!tag)
        return NULL;
    tag--;
    int slot = (int)(tag >> 20), sd = (int)(tag & 1);
    unsigned gen = (unsigned)(tag >> 1) & 0x7ffff;
    if (slot < 0 || slot >= SESSIONS_MAX)
        return NULL;
    session *s = &S->slot[slot];
    if (!s->used || (s->gen & 0x7ffff) != gen)
        return NULL;
    *side_out = sd;
    return s;
}

static void hex(char *out, const uint8_t *b, size_t n)
{
    static const char D[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = D[b[i] >> 4];
        out[2 * i + 1] = D[b[i] & 15];
    }
    out[2 * n] = '\0';
}

static bool random_hex(char *out, size_t nbytes)
{
    uint8_t b[64];
    if (nbytes > sizeof b || getrandom(b, nbytes, 0) != (ssize_t)nbytes)
        return false;
    hex(out, b, nbytes);
    return true;
}

int ctld_sessions_start(ctld *c)
{
    ctld_sessions *S = calloc(1, sizeof *S);
    if (!S)
        return -1;
    pthread_mutex_init(&S->mu, NULL);
    pthread_cond_init(&S->cv, NULL);
    c->sessions = S;
    return 0;
}

void ctld_sessions_stop(ctld *c)
{
    ctld_sessions *S = c->sessions;
    if (!S)
        return;
    pthread_mutex_lock(&S->mu);
    S->stopping = true;
    pthread_cond_broadcast(&S->cv);
    while (S->nthreads > 0)
        pthread_cond_wait(&S->cv, &S->mu);
    pthread_mutex_unlock(&S->mu);
    pthread_cond_destroy(&S->cv);
    pthread_mutex_destroy(&S->mu);
    free(S);
    c->sessions = NULL;
}

int ctld_sessions_count(ctld *c)
{
    ctld_sessions *S = c->sessions;
    int n = 0;
    if (!S)
        return 0;
    pthread_mutex_lock(&S->mu);
    for (int i = 0; i < SESSIONS_MAX; i++)
        n += S->slot[i].used;
    pthread_mutex_unlock(&S->mu);
    return n;
}

int ctld_sessions_wanted(ctld *c, int n, json_t *doc)
{
    ctld_sessions *S = c->sessions;
    ts_desired d = {.present = TS_DS_BIT(TS_DS_SESSIONS)};
    if (!S)
        return ts_desired_encode_into(&d, doc);
    pthread_mutex_lock(&S->mu);
    int k = 0;
    for (int i = 0; i < SESSIONS_MAX; i++)
        k += S->slot[i].used && !S->slot[i].claimed && S->slot[i].node == n && S->slot[i].req;
    /* the structs borrow the sessions' strings: encoded before the lock goes */
    d.sessions = k > 0 ? calloc((size_t)k, sizeof *d.sessions) : NULL;
    for (int i = 0; d.sessions && i < SESSIONS_MAX; i++) {
        const session *s = &S->slot[i];
        if (s->used && !s->claimed && s->node == n && s->req)
            d.sessions[d.nsessions++] = s->ask;
    }
    int rc = k && !d.sessions ? -1 : ts_desired_encode_into(&d, doc);
    pthread_mutex_unlock(&S->mu);
    free(d.sessions); /* not ts_desired_fini: the commands are the sessions' */
    return rc;
}

void ctld_sessions_forget(json_t *doc)
{
    size_t i;
    json_t *q;
    json_array_foreach(json_object_get(doc, "sessions"), i, q)
    {
        json_t *secret = json_object_get(q, "secret");
        if (json_is_string(secret)) /* jansson's own copy of the value */
            explicit_bzero((char *)json_string_value(secret), json_string_length(secret));
    }
    json_object_del(doc, "sessions");
}

/* The session's ask from its checked request (borrowing req's command and
 * the session's id and secret); false: out of memory. */
static bool session_ask_of(session *s, json_t *req, int64_t job)
{
    const char *kind = json_string_value(json_object_get(req, "kind"));
    const json_t *cmd = json_object_get(req, "command");
    s->ask = (ts_desired_session){
        .kind = strcmp(kind, "attach") == 0 ? TS_SESSION_ATTACH
                : strcmp(kind, "exec") == 0 ? TS_SESSION_EXEC
                                            : TS_SESSION_FORWARD,
        .rank = (int32_t)json_integer_value(json_object_get(req, "rank")),
        .tty = json_is_true(json_object_get(req, "tty")),
        .has_command = cmd != NULL,
        .port = (int32_t)json_integer_value(json_object_get(req, "port")),
        .rows = (int32_t)json_integer_value(json_object_get(req, "rows")),
        .cols = (int32_t)json_integer_value(json_object_get(req, "cols")),
        .job = job,
        .id = s->id,
        .secret = s->secret};
    size_t n = json_array_size(cmd);
    s->ask.command.v = n ? calloc(n, sizeof *s->ask.command.v) : NULL;
    if (n && !s->ask.command.v)
        return false;
    for (size_t i = 0; i < n; i++)
        s->ask.command.v[s->ask.command.n++] = json_string_value(json_array_get(cmd, i));
    s->req = req;
    return true;
}

/* Lets go of the session's request and ask. */
static void session_ask_free(session *s)
{
    free(s->ask.command.v);
    memset(&s->ask, 0, sizeof s->ask);
    json_decref(s->req);
    s->req = NULL;
}

/* The node's agent learns of a new session with its next answer. */
static void tell_node(ctld *c, int n)
{
    ctld_agent *a = &c->agents[n];
    pthread_mutex_lock(&a->mu);
    a->gen++;
    a->log_moves++; /* nothing a report is applied against moved (agents.c) */
    pthread_cond_broadcast(&a->moved);
    pthread_mutex_unlock(&a->mu);
}

void ctld_session_upgraded(ctld *c, uintptr_t tag, int fd, const char *extra, size_t nextra,
                           struct MHD_UpgradeResponseHandle *urh)
{
    ctld_sessions *S = c->sessions;
    int sd = 0;
    if (!S) {
        MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CLOSE);
        return;
    }
    pthread_mutex_lock(&S->mu);
    session *s = S->stopping ? NULL : slot_of(S, tag, &sd);
    if (!s || s->s[sd].fd >= 0) {
        pthread_mutex_unlock(&S->mu);
        MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CLOSE);
        return;
    }
    s->s[sd].fd = fd;
    s->s[sd].urh = urh;
    if (nextra > 0 && (s->s[sd].extra = malloc(nextra)) != NULL) {
        memcpy(s->s[sd].extra, extra, nextra);
        s->s[sd].nextra = nextra;
    }
    pthread_cond_broadcast(&S->cv);
    pthread_mutex_unlock(&S->mu);
}

/* ---- the relay ----------------------------------------------------------------- */

typedef struct pipe_buf {
    char b[SESSION_BUFFER_BYTES];
    size_t start, end;
    bool eof;       /* its reader saw the end */
    bool shut;      /* the end was passed on */
} pipe_buf;

static void buf_put(pipe_buf *p, const char *d, size_t n)
{
    if (p->start == p->end)
        p->start = p->end = 0;
    if (n > sizeof p->b - p->end)
        n = sizeof p->b - p->end;
    memcpy(p->b + p->end, d, n);
    p->end += n;
}

/* Reads what fd has into p (room permitting): false on an error. */
static bool pump_in(int fd, pipe_buf *p)
{
    if (p->start == p->end)
        p->start = p->end = 0;
    if (p->end == sizeof p->b) { /* compact */
        memmove(p->b, p->b + p->start, p->end - p->start);
        p->end -= p->start;
        p->start = 0;
    }
    ssize_t k = recv(fd, p->b + p->end, sizeof p->b - p->end, MSG_DONTWAIT);
    if (k > 0)
        p->end += (size_t)k;
    else if (k == 0)
        p->eof = true;
    else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
        return false;
    return true;
}

static bool pump_out(int fd, pipe_buf *p)
{
    ssize_t k = send(fd, p->b + p->start, p->end - p->start, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (k > 0)
        p->start += (size_t)k;
    else if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
        return false;
    if (p->start == p->end && p->eof && !p->shut) {
        shutdown(fd, SHUT_WR);
        p->shut = true;
    }
    return true;
}

static void error_frame(int fd, const char *msg)
{
    uint8_t buf[TS_FRAME_HEAD_BYTES + 512];
    size_t n = strlen(msg) < 512 ? strlen(msg) : 512;
    ts_frame_head(buf, TS_FRAME_ERROR, n);
    memcpy(buf + TS_FRAME_HEAD_BYTES, msg, n);
    ssize_t w = send(fd, buf, TS_FRAME_HEAD_BYTES + n, MSG_DONTWAIT | MSG_NOSIGNAL);
    (void)w;
}

typedef struct relay_arg {
    ctld *c;
    int slot;
} relay_arg;

static void *relay_main(void *arg)
{
    relay_arg ra = *(relay_arg *)arg;
    free(arg);
    ctld *c = ra.c;
    ctld_sessions *S = c->sessions;
    session *s = &S->slot[ra.slot];
    /* both sides, or the agent's wait is over */
    double until = ctld_now() + SESSION_AGENT_WAIT_S;
    pthread_mutex_lock(&S->mu);
    while (!S->stopping && (s->s[0].fd < 0 || s->s[1].fd < 0) && ctld_now() < until)
        ctld_cond_wait_until(&S->cv, &S->mu, until);
    int cfd = s->s[0].fd, afd = s->s[1].fd;
    bool stopping = S->stopping;
    char node[TS_SPEC_NAME_MAX];
    snprintf(node, sizeof node, "%s", c->cluster->nodes[s->node].name);
    pthread_mutex_unlock(&S->mu);
    pipe_buf *up = calloc(1, sizeof *up), *down = calloc(1, sizeof *down); /* to agent, to client */
    if (cfd >= 0 && (afd < 0 || !up || !down)) {
        char m[256];
        snprintf(m, sizeof m, "%s", stopping ? "the controller is stopping"
                                 : !up || !down ? "out of memory"
                                                : "the agent did not open its side of the session");
        if (afd < 0 && !stopping && up && down)
            snprintf(m, sizeof m, "the agent of node %s did not open its side of the session "
                     "within %.0f s", node, SESSION_AGENT_WAIT_S);
        error_frame(cfd, m);
    } else if (cfd >= 0 && afd >= 0) {
        int fds[2] = {cfd, afd};
        for (int k = 0; k < 2; k++) {
            fcntl(fds[k], F_SETFL, fcntl(fds[k], F_GETFL) | O_NONBLOCK);
            /* a node or laptop that vanished sends no end: keepalive finds it
             * (a socket pair, under TLS, just refuses) */
            int on = 1, idle = SESSION_KEEPALIVE_S, intvl = 10, cnt = 3;
            setsockopt(fds[k], SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
            setsockopt(fds[k], IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
            setsockopt(fds[k], IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
            setsockopt(fds[k], IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
        }
        double half_since = 0; /* when the first side's end was passed on */
        if (s->s[0].nextra)
            buf_put(up, s->s[0].extra, s->s[0].nextra);
        if (s->s[1].nextra)
            buf_put(down, s->s[1].extra, s->s[1].nextra);
        for (;;) {
            if (__atomic_load_n(&S->stopping, __ATOMIC_ACQUIRE))
                break;
            struct pollfd p[2] = {{cfd, 0, 0}, {afd, 0, 0}};
            if (!up->eof && up->end - up->start < sizeof up->b)
                p[0].events |= POLLIN;
            if (down->end > down->start)
                p[0].events |= POLLOUT;
            if (!down->eof && down->end - down->start < sizeof down->b)
                p[1].events |= POLLIN;
            if (up->end > up->start)
                p[1].events |= POLLOUT;
            if (up->shut && down->shut)
                break; /* both ends passed on: done */
            if ((up->shut || down->shut) && half_since == 0)
                half_since = ctld_now();
            if (half_since > 0 && ctld_now() - half_since > SESSION_HALF_CLOSED_S)
                break; /* the other side never closes: a peer gone */
            int r = poll(p, 2, SESSION_POLL_MS);
            if (r < 0 && errno != EINTR)
                break;
            if (r <= 0)
                continue;
            bool ok = true;
            if (p[0].revents & (POLLIN | POLLHUP | POLLERR) && !up->eof)
                ok = pump_in(cfd, up);
            if (ok && p[1].revents & (POLLIN | POLLHUP | POLLERR) && !down->eof)
                ok = pump_in(afd, down);
            if (ok && (up->end > up->start || (up->eof && !up->shut)))
                ok = pump_out(afd, up);
            if (ok && (down->end > down->start || (down->eof && !down->shut)))
                ok = pump_out(cfd, down);
            if (!ok)
                break;
            /* a side gone entirely (reset) with nothing left to pass on */
            if ((p[0].revents & POLLERR) || (p[1].revents & POLLERR))
                break;
        }
    }
    free(up);
    free(down);
    pthread_mutex_lock(&S->mu);
    for (int k = 0; k < 2; k++) {
        if (s->s[k].urh)
            MHD_upgrade_action(s->s[k].urh, MHD_UPGRADE_ACTION_CLOSE);
        free(s->s[k].extra);
        s->s[k] = (side){.fd = -1};
    }
    session_ask_free(s);
    s->used = false;
    s->gen++;
    S->nthreads--;
    pthread_cond_broadcast(&S->cv);
    pthread_mutex_unlock(&S->mu);
    return NULL;
}

/* ---- opening ------------------------------------------------------------------- */

/* The session the body asks for, as the agent is told it: {kind, rank,
 * command, port, tty, rows, cols}, and *check whether the body asks for the
 * checks only (`check: true`); NULL and r answered 400 when invalid. */
static json_t *parse_request(const ctld_request *rq, ctld_reply *r, bool *check)
{
    json_error_t je;
    json_t *in = rq->len ? json_loadb(rq->body, rq->len, 0, &je) : json_object();
    if (!json_is_object(in)) {
        ctld_reply_error(r, 400, "invalid", "body: not a JSON object");
        json_decref(in);
        return NULL;
    }
    const char *kind = json_string_value(json_object_get(in, "kind"));
    json_t *rank = json_object_get(in, "rank"), *cmd = json_object_get(in, "command"),
           *port = json_object_get(in, "port"), *tty = json_object_get(in, "tty"),
           *rows = json_object_get(in, "rows"), *cols = json_object_get(in, "cols"),
           *chk = json_object_get(in, "check");
    static const char *const KEYS[] = {"kind", "rank", "command", "port",
                                       "tty",  "rows", "cols",    "check"};
    const char *bad = ctld_unknown_key(in, KEYS, sizeof KEYS / sizeof KEYS[0]);
    const char *why = bad ? "unknown field" : NULL;
    if (bad) {
    } else if (chk && !json_is_boolean(chk)) {
        bad = "check";
        why = "must be true or false";
    } else if (!kind || (strcmp(kind, "attach") != 0 && strcmp(kind, "exec") != 0 &&
                         strcmp(kind, "forward") != 0)) {
        bad = "kind";
        why = "must be attach, exec or forward";
    } else if (rank && (!json_is_integer(rank) || json_integer_value(rank) < 0 ||
                        json_integer_value(rank) > TS_SPEC_MAX_TASKS)) {
        bad = "rank";
        why = "must be an integer 0..65536";
    } else if (strcmp(kind, "exec") == 0 &&
               (!json_is_array(cmd) || json_array_size(cmd) == 0 ||
                json_array_size(cmd) > SESSION_COMMAND_MAX)) {
        bad = "command";
        why = "exec needs a command: an array of 1..256 strings";
    } else if (strcmp(kind, "forward") == 0 &&
               (!json_is_integer(port) || json_integer_value(port) < 1 ||
                json_integer_value(port) > 65535)) {
        bad = "port";
        why = "forward needs a port 1..65535";
    } else if (tty && !json_is_boolean(tty)) {
        bad = "tty";
        why = "must be true or false";
    } else if ((rows && (!json_is_integer(rows) || json_integer_value(rows) < 1 ||
                         json_integer_value(rows) > TS_SPEC_TTY_MAX))) {
        bad = "rows";
        why = "must be an integer 1..1000";
    } else if ((cols && (!json_is_integer(cols) || json_integer_value(cols) < 1 ||
                         json_integer_value(cols) > TS_SPEC_TTY_MAX))) {
        bad = "cols";
        why = "must be an integer 1..1000";
    }
    size_t i;
    json_t *a;
    if (!bad && json_is_array(cmd))
        json_array_foreach(cmd, i, a) {
            const char *sv = json_string_value(a);
            if (!sv || strlen(sv) > 4096) {
                bad = "command";
                why = "every argument must be a string under 4096 bytes";
                break;
            }
        }
    if (bad) {
        ctld_reply_error(r, 400, "invalid", "%s: %s", bad, why);
        json_decref(in);
        return NULL;
    }
    *check = json_is_true(chk);
    json_t *out = json_pack("{s:s,s:I,s:b}", "kind", kind, "rank",
                            rank ? json_integer_value(rank) : 0, "tty", json_is_true(tty));
    if (out && strcmp(kind, "exec") == 0)
        json_object_set(out, "command", cmd);
    if (out && strcmp(kind, "forward") == 0)
        json_object_set(out, "port", port);
    if (out && rows)
        json_object_set(out, "rows", rows);
    if (out && cols)
        json_object_set(out, "cols", cols);
    json_decref(in);
    return out;
}

/* Every check of a session request: the caller may open the job's
 * sessions, the body is valid, the job runs and the rank is on a node with
 * a connected agent. The session as the agent is told it, with *node its
 * rank's node and *check whether the body asked for the checks only; NULL
 * with r answered (403, 400, 409) otherwise. */
static json_t *session_checked(ctld *c, const ctld_request *rq, const ts_job_row *row,
                               ctld_reply *r, int *node, bool *check)
{
    const ctld_caller *w = rq->who;
    if (w->role == TS_ROLE_VIEWER) {
        ctld_reply_error(r, 403, "forbidden", "role viewer cannot open sessions");
        return NULL;
    }
    ctld_lock_reader(c);
    bool may = ctld_sees_content(c, w, row->tenant, row->owner);
    pthread_mutex_unlock(&c->mu);
    if (!may) {
        ctld_reply_error(r, 403, "forbidden", "sessions: job %lld's sessions are open to its "
                         "owner (\"%s\") and admins only (docs/interactive.md)",
                         (long long)row->id, row->owner);
        return NULL;
    }
    json_t *want = parse_request(rq, r, check);
    if (!want)
        return NULL;
    const char *kind = json_string_value(json_object_get(want, "kind"));
    int rank = (int)json_integer_value(json_object_get(want, "rank"));
    ctld_lock_reader(c);
    cjob *j = ctld_job_find(c, row->id);
    const char *no = NULL;
    char not_running[64];
    int n = -1;
    if (!j || !j->allocs || j->row.state != TS_JOB_RUNNING) {
        int st = j ? j->row.state : row->state;
        snprintf(not_running, sizeof not_running, st == TS_JOB_RUNNING
                 ? "the job is not running yet" : "the job is %s, not running",
                 ts_job_state_name(st));
        no = not_running;
    }
    else if (rank >= j->ntasks)
        no = "rank: no such rank";
    else if (strcmp(kind, "attach") == 0 && (!j->spec->interactive || rank != 0))
        no = "attach: only rank 0 of an interactive job has a session to attach to";
    else if (c->node_virtual[n = j->allocs[rank].node] || !c->agents[n].registered)
        no = c->node_virtual[n] ? "the rank runs on a virtual node: nothing to reach"
                                : "the rank's node has no connected agent";
    if (no) {
        int nt = j && j->allocs ? j->ntasks : 0;
        pthread_mutex_unlock(&c->mu);
        if (strncmp(no, "rank:", 5) == 0)
            ctld_reply_error(r, 400, "invalid", "rank: the job has ranks 0..%d", nt - 1);
        else
            ctld_reply_error(r, 409, "conflict", "job %lld: %s", (long long)row->id, no);
        json_decref(want);
        return NULL;
    }
    pthread_mutex_unlock(&c->mu);
    *node = n;
    return want;
}

void ctld_session_open(ctld *c, const ctld_request *rq, const ts_job_row *row, ctld_reply *r)
{
    ctld_sessions *S = c->sessions;
    if (!S) { /* no HTTP server (tests, fuzzing): nothing to relay with */
        ctld_reply_error(r, 503, "unavailable", "sessions: the controller serves no streams");
        return;
    }
    int n = -1;
    bool check = false;
    json_t *want = session_checked(c, rq, row, r, &n, &check);
    if (!want)
        return;
    if (check) { /* the checks only (port-forward's, before it listens): nothing held */
        ctld_reply_json(r, 200, want);
        return;
    }
    pthread_mutex_lock(&S->mu);
    int free_slot = -1, of_tenant = 0;
    for (int i = 0; i < SESSIONS_MAX; i++) {
        if (!S->slot[i].used && free_slot < 0)
            free_slot = i;
        of_tenant += S->slot[i].used && strcmp(S->slot[i].tenant, row->tenant) == 0;
    }
    if (free_slot < 0 || of_tenant >= SESSIONS_PER_TENANT_MAX || S->stopping) {
        pthread_mutex_unlock(&S->mu);
        json_decref(want);
        ctld_reply_error(r, 429, "rate_limited", "sessions: %s", free_slot < 0
                         ? "the controller relays as many sessions as it may (256)"
                         : "tenant's sessions at their limit (64)");
        snprintf(r->retry_after, sizeof r->retry_after, "5");
        return;
    }
    session *s = &S->slot[free_slot];
    if (!random_hex(s->id, SESSION_ID_BYTES) || !random_hex(s->secret, SESSION_SECRET_BYTES)) {
        pthread_mutex_unlock(&S->mu);
        json_decref(want);
        ctld_reply_error(r, 503, "unavailable", "sessions: no random bytes");
        return;
    }
    s->used = true;
    s->claimed = false;
    s->node = n;
    snprintf(s->tenant, sizeof s->tenant, "%s", row->tenant);
    s->s[0] = (side){.fd = -1};
    s->s[1] = (side){.fd = -1};
    s->created_s = ctld_now();
    relay_arg *ra = session_ask_of(s, want, row->id) ? malloc(sizeof *ra) : NULL;
    if (!s->req)
        json_decref(want);
    pthread_t th;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    if (ra)
        *ra = (relay_arg){c, free_slot};
    if (!ra || pthread_create(&th, &at, relay_main, ra) != 0) {
        pthread_attr_destroy(&at);
        free(ra);
        session_ask_free(s);
        s->used = false;
        s->gen++;
        pthread_mutex_unlock(&S->mu);
        ctld_reply_error(r, 503, "unavailable", "sessions: cannot start a relay");
        return;
    }
    pthread_attr_destroy(&at);
    S->nthreads++;
    uintptr_t tag = tag_of(free_slot, s->gen, SIDE_CLIENT);
    pthread_mutex_unlock(&S->mu);
    tell_node(c, n);
    r->status = 101;
    r->upgrade = tag;
}

static bool same_secret(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    unsigned char d = la != lb;
    for (size_t i = 0; i < la && i < lb; i++)
        d |= (unsigned char)(a[i] ^ b[i]);
    return d == 0;
}

void ctld_session_agent(ctld *c, const ctld_request *rq, ctld_reply *r)
{
    ctld_sessions *S = c->sessions;
    if (rq->who->role != TS_ROLE_NODE) {
        ctld_reply_error(r, 403, "forbidden", "only a node credential may use %s", rq->url);
        return;
    }
    if (!S) {
        ctld_reply_error(r, 503, "unavailable", "sessions: the controller serves no streams");
        return;
    }
    const char *sid = rq->name ? rq->name : "";
    pthread_mutex_lock(&S->mu);
    session *s = NULL;
    int slot = -1;
    for (int i = 0; i < SESSIONS_MAX && !s; i++)
        if (S->slot[i].used && strcmp(S->slot[i].id, sid) == 0) {
            s = &S->slot[i];
            slot = i;
        }
    const char *node = s ? c->cluster->nodes[s->node].name : "";
    if (!s || strcmp(node, rq->who->name) != 0) {
        pthread_mutex_unlock(&S->mu);
        /* another node's session answers as one that does not exist */
        ctld_reply_error(r, 404, "not_found", "session \"%s\": no such session for node \"%s\"",
                         sid, rq->who->name);
        return;
    }
    if (!rq->session_secret || !same_secret(rq->session_secret, s->secret)) {
        pthread_mutex_unlock(&S->mu);
        ctld_reply_error(r, 403, "forbidden", "session \"%s\": header " TS_STREAM_SECRET_HEADER
                         " missing or wrong", sid);
        return;
    }
    if (s->claimed) {
        pthread_mutex_unlock(&S->mu);
        ctld_reply_error(r, 409, "conflict", "session \"%s\": its agent side is already open",
                         sid);
        return;
    }
    s->claimed = true;
    uintptr_t tag = tag_of(slot, s->gen, SIDE_AGENT);
    pthread_mutex_unlock(&S->mu);
    r->status = 101;
    r->upgrade = tag;
}
