/*
 * cmd_srun.c - `tessera steps run`: a step inside a batch job's allocation, what
 * the `srun` on a Slurm job's PATH runs (src/agent/slurm_step.c).
 *
 *   srun [-n N] [-N N] [--ntasks-per-node N] [-l] [IGNORED OPTIONS] CMD [ARGS...]
 *
 * Options are those of src/api/srun_opts.h (any other is refused, naming
 * it, exit 2). It posts the step to the controller with the task's step
 * credential ($TESSERA_STEP_URL, $TESSERA_STEP_TOKEN, $SLURM_JOB_ID, set by
 * the agent in a batch script's task; without -n, $SLURM_NTASKS is the
 * step's number of tasks, as srun reads it), then reads the step until it ended
 * (polling, CLI_SRUN_POLL_MS apart), prints each task's output in task
 * order - stdout to stdout, stderr to stderr, each line led by "TASK: "
 * with -l - and exits with the step's exit status (its tasks' highest, as
 * srun's). The output comes when the step ends, its last 64 KiB a task.
 */
#define _DEFAULT_SOURCE /* nanosleep */
#include "cli/cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/srun_opts.h"

#define CLI_SRUN_POLL_MS 200
#define CLI_SRUN_AWAY_S 120 /* a controller that does not answer, waited for (its restart) */

static double srun_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}
#define SRUN_EXIT_USAGE 2
#define SRUN_EXIT_FAILED 1

static int srun_fail(const char *fmt, const char *a)
{
    fprintf(stderr, "srun: ");
    fprintf(stderr, fmt, a);
    fputc('\n', stderr);
    return SRUN_EXIT_USAGE;
}

static bool whole(const char *v, long *out)
{
    return cli_parse_long(v, 1, 65536, out);
}

static void put_lines(FILE *f, const char *text, bool label, long task)
{
    bool start = true;
    for (const char *p = text; *p; p++) {
        if (start && label)
            fprintf(f, "%ld: ", task);
        fputc(*p, f);
        start = *p == '\n';
    }
    if (!start) /* a last line without its newline */
        fputc('\n', f);
}

/* Reads step jid.step until it ended: prints its tasks' output (labelled
 * with label) and returns its exit status; a controller that is away (its
 * restart, a failover) is waited for up to CLI_SRUN_AWAY_S. */
static int srun_wait(struct cli_ctx *ctx, long jid, long step, bool label)
{
    char path[96];
    struct cli_resp resp = {0};
    int rc;
    snprintf(path, sizeof path, "/v1/jobs/%ld/steps?step=%ld", jid, step);
    double away_since = 0; /* the controller restarting, or failing over: waited for */
    for (;;) { /* bounded by the step: the job's time limit ends it */
        struct cli_req g = {.method = "GET", .path = path};
        rc = cli_http(ctx, &g, &resp);
        bool away = rc == CLI_EXIT_UNREACHABLE ||
                    (rc == CLI_EXIT_SERVER && resp.status >= 502 && resp.status <= 504);
        if (away &&
            (away_since == 0 || srun_now() - away_since < CLI_SRUN_AWAY_S)) {
            if (away_since == 0) {
                away_since = srun_now();
                fprintf(stderr, "srun: step %ld.%ld: the controller does not answer; the step "
                        "runs on, waiting up to %d s for it\n", jid, step, CLI_SRUN_AWAY_S);
            }
            struct timespec ts = {1, 0};
            nanosleep(&ts, NULL);
            continue;
        }
        if (rc != CLI_EXIT_OK)
            return SRUN_EXIT_FAILED;
        away_since = 0;
        json_t *s = json_object_get(resp.json, "step");
        const char *state = json_string_value(json_object_get(s, "state"));
        if (state && strcmp(state, "running") != 0) {
            size_t k;
            json_t *t;
            json_array_foreach(json_object_get(s, "tasks"), k, t)
            {
                const char *o = json_string_value(json_object_get(t, "stdout"));
                const char *e = json_string_value(json_object_get(t, "stderr"));
                put_lines(stdout, o ? o : "", label, (long)k);
                put_lines(stderr, e ? e : "", label, (long)k);
            }
            const char *why = json_string_value(json_object_get(s, "reason"));
            if (why)
                fprintf(stderr, "srun: step %ld.%ld %s: %s\n", jid, step, state, why);
            long code = (long)cli_int(s, "exit_code", 1);
            cli_resp_free(&resp);
            fflush(stdout);
            return (int)(code > 255 ? 255 : code);
        }
        cli_resp_free(&resp);
        struct timespec ts = {0, CLI_SRUN_POLL_MS * 1000L * 1000L};
        nanosleep(&ts, NULL);
    }
}

/* POSTs the step. A job runs at most 64 steps at once: past that the
 * controller answers 409 too_many_running_steps and srun waits for one to
 * end, as Slurm's srun waits when step creation is disabled for a while (it
 * says so once); any other failure is printed. Bounded by the job: its end
 * answers not_running. */
static int srun_post(struct cli_ctx *ctx, struct cli_req *req, struct cli_resp *resp)
{
    for (bool said = false;;) {
        req->quiet = true;
        int rc = cli_http(ctx, req, resp);
        if (rc == CLI_EXIT_OK || resp->status != 409 ||
            strcmp(resp->code, "too_many_running_steps") != 0) {
            if (rc == CLI_EXIT_OK || rc == CLI_EXIT_UNREACHABLE)
                return rc;
            /* again, aloud: a refused step changed nothing, and says why */
            req->quiet = false;
            return cli_http(ctx, req, resp);
        }
        if (!said)
            fprintf(stderr, "srun: Job step creation temporarily disabled, retrying (the job "
                    "runs as many steps as it may at once)\n");
        said = true;
        struct timespec ts = {0, CLI_SRUN_POLL_MS * 1000L * 1000L};
        nanosleep(&ts, NULL);
    }
}

int cli_cmd_srun(struct cli_ctx *ctx, const struct cli_cmd *cmd, int argc, char **argv)
{
    (void)cmd;
    long ntasks = 0, nodes = 0, per_node = 0;
    bool label = false;
    int i = 0; /* argv: what follows "srun" */
    for (; i < argc; i++) {
        const char *o = argv[i], *v = NULL;
        const struct srun_opt *opt = NULL;
        if (strcmp(o, "--") == 0) {
            i++;
            break;
        }
        if (o[0] != '-' || o[1] == '\0')
            break;
        if (o[1] == '-') {
            const char *eq = strchr(o + 2, '=');
            size_t n = eq ? (size_t)(eq - o - 2) : strlen(o + 2);
            opt = srun_opt_long(o + 2, n);
            if (opt && eq)
                v = eq + 1;
        } else {
            opt = srun_opt_short(o[1]);
            if (opt && o[2])
                v = o + 2;
        }
        if (!opt) {
            char name[128];
            snprintf(name, sizeof name, "%.*s", (int)strcspn(o, "="), o);
            return srun_fail("%s: not available inside a Tessera job (docs/slurm.md, "
                             "\"Steps: srun in a script\")", name);
        }
        if (opt->value && !v) {
            if (i + 1 >= argc)
                return srun_fail("%s: needs a value", o);
            v = argv[++i];
        }
        long *dst = opt->effect == SRUN_NTASKS     ? &ntasks
                    : opt->effect == SRUN_NODES    ? &nodes
                    : opt->effect == SRUN_PER_NODE ? &per_node
                                                   : NULL;
        if (dst && !whole(v, dst))
            return srun_fail("%s: a whole number 1..65536", o);
        if (opt->effect == SRUN_LABEL)
            label = true;
    }
    if (i >= argc)
        return srun_fail("%s", "no command given");
    const char *url = getenv("TESSERA_STEP_URL"), *tok = getenv("TESSERA_STEP_TOKEN");
    const char *job = getenv("SLURM_JOB_ID");
    long jid;
    if (!url || !tok || !job || !cli_parse_long(job, 1, 0x7fffffffL, &jid))
        return srun_fail("%s", "not inside a Tessera batch job's script (no $TESSERA_STEP_URL, "
                         "$TESSERA_STEP_TOKEN or $SLURM_JOB_ID)");
    ctx->flags.server = url;
    ctx->flags.token = tok;
    int rc = cli_config_resolve(ctx);
    if (rc != CLI_CONTINUE)
        return rc;
    const char *env_n = getenv("SLURM_NTASKS"); /* srun's input variable, as in Slurm */
    if (!ntasks && env_n && !whole(env_n, &ntasks))
        ntasks = 0;
    json_t *body = json_object(), *cmdv = json_array();
    for (int k = i; k < argc; k++)
        json_array_append_new(cmdv, json_string(argv[k]));
    json_object_set_new(body, "command", cmdv);
    if (ntasks)
        json_object_set_new(body, "ntasks", json_integer(ntasks));
    if (nodes)
        json_object_set_new(body, "nodes", json_integer(nodes));
    if (per_node)
        json_object_set_new(body, "ntasks_per_node", json_integer(per_node));
    char *text = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    char path[96];
    snprintf(path, sizeof path, "/v1/jobs/%ld/steps", jid);
    struct cli_req req = {.method = "POST", .path = path, .body = text,
                          .body_len = text ? strlen(text) : 0,
                          .content_type = "application/json"};
    struct cli_resp resp = {0};
    rc = text ? srun_post(ctx, &req, &resp) : CLI_EXIT_LOCAL;
    free(text);
    if (rc != CLI_EXIT_OK)
        return SRUN_EXIT_FAILED; /* why is printed; srun's own failures exit 1 */
    long step = (long)cli_int(json_object_get(resp.json, "step"), "id", -1);
    cli_resp_free(&resp);
    if (step < 0)
        return srun_fail("%s", "the controller's answer has no step id");
    return srun_wait(ctx, jid, step, label);
}

/* A step's row as sacct shows it (JOB.STEP). */
static void step_row(const struct cli_ctx *ctx, const json_t *s, char (*v)[CLI_CELL_MAX],
                     const char **row)
{
    struct cli_buf nodes = {0}, argv_b = {0};
    size_t q;
    json_t *x;
    json_array_foreach(json_object_get(s, "nodes"), q, x)
    {
        cli_buf_puts(&nodes, q ? "," : "");
        cli_buf_puts(&nodes, json_string_value(x) ? json_string_value(x) : "");
    }
    json_array_foreach(json_object_get(s, "command"), q, x)
    {
        cli_buf_puts(&argv_b, q ? " " : "");
        cli_buf_puts(&argv_b, json_string_value(x) ? json_string_value(x) : "");
    }
    const json_t *st = json_object_get(s, "start"), *en = json_object_get(s, "end");
    double el = json_is_number(en) ? json_number_value(en) - json_number_value(st)
                                   : (double)ctx->now - json_number_value(st);
    cli_duration(el > 0 ? el : 0, v[6], CLI_CELL_MAX);
    snprintf(v[7], CLI_CELL_MAX, "%.0f", json_number_value(json_object_get(s, "gpu_seconds")));
    const char *cells[9] = {
        cli_str(s, "name", v[0], CLI_CELL_MAX), cli_str(s, "state", v[1], CLI_CELL_MAX),
        cli_value(json_object_get(s, "exit_code"), v[2], CLI_CELL_MAX),
        cli_value(json_object_get(s, "ntasks"), v[3], CLI_CELL_MAX),
        cli_clean(nodes.p ? nodes.p : "", v[4], CLI_CELL_MAX),
        cli_time_short(ctx, st, v[5], CLI_CELL_MAX), v[6], v[7],
        cli_clean(argv_b.p ? argv_b.p : "", v[8], CLI_CELL_MAX)};
    memcpy(row, cells, sizeof cells);
    cli_buf_free(&nodes);
    cli_buf_free(&argv_b);
}

/* `tessera steps JOB`: the job's steps as sacct shows them (JOB.STEP rows). */
int cli_cmd_steps(struct cli_ctx *ctx, const struct cli_cmd *cmd, int argc, char **argv)
{
    static const char *const H[] = {"STEP", "STATE", "EXIT", "TASKS", "NODES",
                                    "START", "ELAPSED", "GPU-S", "COMMAND"};
    static const struct cli_listing steps_list = {
        "steps", 9, H, (1u << 2) | (1u << 3) | (1u << 6) | (1u << 7), step_row};
    return cli_job_list(ctx, cmd, argc, argv, "/steps", "steps", false, &steps_list);
}
