/*
 * cmd_logs.c - tessera logs: a job's output (docs/api.md "Logs"), once or
 * followed with -f.
 *
 * Following polls the job's output, each poll from where the last ended,
 * and its state until the job ends, then prints what its stored output
 * holds past what was printed (matched against the last bytes shown). Apart from cmd_jobs.c because it is the one job
 * command that loops and handles signals.
 */
#include "cli/cli.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- logs -f ------------------------------------------------------------------------ */

#define FOLLOW_ANSWER_MAX 262144 /* what one logs answer carries (docs/api.md) */
#define FOLLOW_SEEN_MAX 4096     /* what a job's stored output holds when it ends */

static volatile sig_atomic_t follow_stop;

static void follow_signal(int sig)
{
    (void)sig;
    follow_stop = 1;
}

/* The last FOLLOW_SEEN_MAX bytes written, to match the stored output of a
 * rank that ended between two polls against. */
struct follow_seen {
    char b[FOLLOW_SEEN_MAX];
    size_t n;
};

static void follow_write(struct follow_seen *seen, const char *p, size_t n)
{
    fwrite(p, 1, n, stdout);
    fflush(stdout);
    if (n >= FOLLOW_SEEN_MAX) {
        memcpy(seen->b, p + n - FOLLOW_SEEN_MAX, FOLLOW_SEEN_MAX);
        seen->n = FOLLOW_SEEN_MAX;
        return;
    }
    size_t keep = seen->n + n > FOLLOW_SEEN_MAX ? FOLLOW_SEEN_MAX - n : seen->n;
    memmove(seen->b, seen->b + seen->n - keep, keep);
    memcpy(seen->b + keep, p, n);
    seen->n = keep + n;
}

/* The job's state into buf ("" when it could not be read); the exit code. */
static int follow_state(struct cli_ctx *ctx, long id, char *buf, size_t size)
{
    char path[64];
    snprintf(path, sizeof path, "/v1/jobs/%ld", id);
    struct cli_req req = {.method = "GET", .path = path, .quiet = true};
    struct cli_resp resp;
    buf[0] = '\0';
    int rc = cli_http(ctx, &req, &resp);
    if (rc == CLI_EXIT_OK) {
        const char *st = json_string_value(json_object_get(json_object_get(resp.json, "job"),
                                                           "state"));
        snprintf(buf, size, "%s", st ? st : "");
        cli_resp_free(&resp);
    }
    return rc;
}

static bool follow_ended(const char *state)
{
    return strcmp(state, "completed") == 0 || strcmp(state, "failed") == 0 ||
           strcmp(state, "cancelled") == 0 || strcmp(state, "timeout") == 0;
}

/* Sleeps about a second, or less when a signal stops following. */
static void follow_pause(void)
{
    struct timespec ts = {.tv_sec = 1, .tv_nsec = 0};
    if (!follow_stop)
        nanosleep(&ts, NULL);
}

/*
 * tessera logs -f: polls the logs route until the job ends, each poll reading
 * the output from the byte the last one ended at (`offset`; the first, the
 * last `tail` bytes), at once again while the file holds more; then prints
 * what the rank's stored output holds past what was printed.
 * Exit 0 once the job ended; 130 on Ctrl-C (SIGINT) or SIGTERM.
 */
static int follow_logs(struct cli_ctx *ctx, long id, long rank, bool err_stream, long tail)
{
    struct sigaction sa = {.sa_handler = follow_signal}; /* no SA_RESTART: the sleep ends */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    static struct follow_seen seen;
    long long next = -1;    /* the live file's byte to read from; -1: its tail */
    long long printed = -1; /* without offsets: bytes of the live file printed */
    char state[32];
    while (!follow_stop) {
        char path[192];
        int at = snprintf(path, sizeof path, "/v1/jobs/%ld/logs?rank=%ld&stream=%s", id, rank,
                          err_stream ? "stderr" : "stdout");
        if (next >= 0)
            snprintf(path + at, sizeof path - (size_t)at, "&offset=%lld&tail=%d", next,
                     FOLLOW_ANSWER_MAX);
        else
            snprintf(path + at, sizeof path - (size_t)at, "&tail=%ld",
                     printed < 0 ? tail : FOLLOW_ANSWER_MAX);
        struct cli_req req = {.method = "GET", .path = path, .quiet = true};
        struct cli_resp resp;
        int rc = cli_http(ctx, &req, &resp);
        json_t *data = rc == CLI_EXIT_OK ? json_object_get(resp.json, "data") : NULL;
        bool live = data && json_is_true(json_object_get(resp.json, "live"));
        if (live && json_is_integer(json_object_get(resp.json, "size"))) {
            long long size = json_integer_value(json_object_get(resp.json, "size"));
            const char *p = json_string_value(data);
            size_t len = json_string_length(data);
            json_t *off = json_object_get(resp.json, "offset");
            bool more = false;
            if (json_is_integer(off) && next >= 0 && size < next) {
                next = 0; /* a new run's file: from its start */
                more = true;
            } else if (json_is_integer(off)) {
                follow_write(&seen, p, len);
                next = json_integer_value(off) + (long long)len;
                printed = next;
                more = len > 0 && next < size;
            } else {
                /* an agent that reads no offsets: what is new since the
                 * last poll is the answer's last size-printed bytes */
                if (printed < 0 || size < printed)
                    printed = size > (long long)len ? size - (long long)len : 0;
                size_t fresh = (size_t)(size - printed);
                if (fresh > len) {
                    fprintf(stderr, "tessera: %zu bytes of output came faster than one answer "
                            "carries; not shown\n", fresh - len);
                    fresh = len;
                }
                follow_write(&seen, p + len - fresh, fresh);
                printed = size;
            }
            cli_resp_free(&resp);
            if (!more)
                follow_pause();
            continue;
        }
        if (rc == CLI_EXIT_OK)
            cli_resp_free(&resp);
        int src = follow_state(ctx, id, state, sizeof state);
        if (src == CLI_EXIT_NOT_FOUND || src == CLI_EXIT_AUTH || rc == CLI_EXIT_AUTH) {
            /* no such job, or not the caller's to read: ask again aloud */
            req.quiet = false;
            if (src != CLI_EXIT_OK)
                snprintf(path, sizeof path, "/v1/jobs/%ld", id);
            rc = cli_http(ctx, &req, &resp);
            if (rc == CLI_EXIT_OK)
                cli_resp_free(&resp);
            return rc == CLI_EXIT_OK ? CLI_EXIT_SERVER : rc;
        }
        if (follow_ended(state)) {
            /* the rank's last output, stored as it ended: print what follows
             * the output already printed (it ends the stored text's start) */
            struct cli_req last = {.method = "GET", .path = path, .quiet = true};
            if (cli_http(ctx, &last, &resp) == CLI_EXIT_OK) {
                json_t *d = json_object_get(resp.json, "data");
                const char *p = json_string_value(d);
                size_t len = p ? json_string_length(d) : 0, k = 0;
                for (size_t m = len < seen.n ? len : seen.n; m > 0 && printed >= 0; m--)
                    if (memcmp(seen.b + seen.n - m, p, m) == 0) {
                        k = m;
                        break;
                    }
                if (p)
                    follow_write(&seen, p + k, len - k);
                cli_resp_free(&resp);
            }
            return CLI_EXIT_OK;
        }
        /* followed from before it runs (pending, or requeued): its run's
         * output is read from the start, not its tail */
        if (next < 0 && printed < 0 && strcmp(state, "running") != 0 &&
            strcmp(state, "stopping") != 0)
            next = 0;
        follow_pause();
    }
    return 130;
}

int cli_cmd_logs(struct cli_ctx *ctx, const struct cli_cmd *cmd, int argc, char **argv)
{
    const char *rank_s = NULL, *tail_s = NULL;
    bool err_stream = false, follow = false;
    const struct cli_opt opts[] = {{"rank", 0, &rank_s, NULL},
                                   {"stderr", 0, NULL, &err_stream},
                                   {"tail", 0, &tail_s, NULL},
                                   {"follow", 'f', NULL, &follow},
                                   {0}};
    long id, rank = 0, tail = 65536;
    int rc = cli_parse_job(ctx, cmd, argc, argv, opts, &id);
    if (rc != CLI_CONTINUE)
        return rc;
    if (rank_s && !cli_parse_long(rank_s, 0, 65535, &rank))
        return cli_usage_error(cmd, "--rank: \"%s\" is not a rank 0..65535", rank_s);
    if (tail_s && !cli_parse_long(tail_s, 1, 1048576, &tail))
        return cli_usage_error(cmd, "--tail: \"%s\" is not 1..1048576 bytes", tail_s);
    if (follow)
        return follow_logs(ctx, id, rank, err_stream, tail);
    char suffix[96];
    snprintf(suffix, sizeof suffix, "/logs?rank=%ld&stream=%s&tail=%ld", rank,
             err_stream ? "stderr" : "stdout", tail);
    char path[160];
    snprintf(path, sizeof path, "/v1/jobs/%ld%s", id, suffix);
    struct cli_req req = {.method = "GET", .path = path};
    struct cli_resp resp;
    rc = cli_http(ctx, &req, &resp);
    if (rc != CLI_EXIT_OK)
        return rc;
    json_t *data;
    rc = cli_expect_member(resp.json, "data", JSON_STRING, &data);
    if (rc != CLI_EXIT_OK) {
        cli_resp_free(&resp);
        return rc;
    }
    if (cli_emit(ctx, resp.json)) {
        cli_resp_free(&resp);
        return CLI_EXIT_OK;
    }
    const char *text = json_string_value(data);
    fputs(text, stdout);
    if (*text && text[strlen(text) - 1] != '\n')
        fputc('\n', stdout);
    cli_resp_free(&resp);
    return CLI_EXIT_OK;
}
