/*
 * cmd_jobs.c - the job commands: submit, jobs, show, cancel, hold, release,
 * requeue, explain and events (docs/api.md "Jobs"); logs is cmd_logs.c.
 *
 * submit sends the file's bytes untouched: the server's parser is the one
 * judge of a spec, and its field errors come back through http.c. Every
 * submit carries an Idempotency-Key, random unless given, and when the
 * answer is lost (timeout, connection reset) the key is printed with the
 * command that retries safely. Job ids are checked here (positive integers)
 * so that a typo is a usage error, not a 404.
 */
#include "cli/cli.h"
#include "tessera/sbatch_array.h"

#include <limits.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SUBMIT_MAX_BYTES (16L << 20) /* the server refuses above 1 MiB; this only bounds reading */
#define IDEMPOTENCY_KEY_BYTES 16
#define IDEMPOTENCY_KEY_MAX 200
#define JOBS_PAGE_MAX 1000
/* a 64-bit LCG (Knuth's MMIX constants) to spread the fallback seed */
#define LCG_MUL 6364136223846793005ULL
#define LCG_ADD 1442695040888963407ULL

/* A random key as hex; the kernel's random source, else a weaker mix. */
static void random_key(char out[2 * IDEMPOTENCY_KEY_BYTES + 1])
{
    unsigned char raw[IDEMPOTENCY_KEY_BYTES];
    FILE *f = fopen("/dev/urandom", "rb");
    size_t got = f ? fread(raw, 1, sizeof raw, f) : 0;
    if (f)
        fclose(f);
    if (got != sizeof raw) {
        unsigned long long x = (unsigned long long)time(NULL) ^
                               ((unsigned long long)getpid() << 32) ^ (unsigned long long)clock();
        for (size_t i = 0; i < sizeof raw; i++) {
            x = x * LCG_MUL + LCG_ADD;
            raw[i] = (unsigned char)(x >> 56);
        }
    }
    for (size_t i = 0; i < sizeof raw; i++)
        snprintf(out + 2 * i, 3, "%02x", raw[i]);
}

static bool key_ok(const char *k)
{
    size_t n = strlen(k);
    if (n == 0 || n > IDEMPOTENCY_KEY_MAX)
        return false;
    for (; *k; k++)
        if ((unsigned char)*k <= ' ' || (unsigned char)*k >= 0x7f)
            return false;
    return true;
}

int cli_print_submitted(struct cli_ctx *ctx, struct cli_resp *resp)
{
    json_t *jobs;
    int rc = cli_expect_member(resp->json, "jobs", JSON_ARRAY, &jobs);
    if (rc == CLI_EXIT_OK && resp->replayed)
        cli_warn("this idempotency key was used before: these are the jobs it created then");
    if (rc == CLI_EXIT_OK && !cli_emit(ctx, resp->json)) {
        size_t i;
        json_t *job;
        json_array_foreach(jobs, i, job)
            printf("%lld\n", cli_int(job, "id", -1));
    }
    cli_resp_free(resp);
    return rc;
}

int cli_cmd_submit(struct cli_ctx *ctx, const struct cli_cmd *cmd, int argc, char **argv)
{
    if (cli_submit_is_script(argc, argv))
        return cli_cmd_sbatch(ctx, cmd, argc, argv);
    const char *file = NULL, *key = NULL;
    const struct cli_opt opts[] = {
        {"file", 'f', &file, NULL}, {"idempotency-key", 0, &key, NULL}, {NULL, 0, NULL, NULL}};
    int rc = cli_parse(ctx, cmd, argc, argv, opts, NULL, 0, 0);
    if (rc != CLI_CONTINUE)
        return rc;
    if (!file)
        return cli_usage_error(cmd, "-f FILE is required");
    if (key && !key_ok(key))
        return cli_usage_error(cmd, "--idempotency-key must be 1..%d printable characters, no "
                                    "blanks", IDEMPOTENCY_KEY_MAX);
    char made[2 * IDEMPOTENCY_KEY_BYTES + 1];
    if (!key) {
        random_key(made);
        key = made;
    }
    size_t len;
    char *body = cli_read_file(file, SUBMIT_MAX_BYTES, &len, &rc);
    if (!body)
        return rc;
    struct cli_req req = {.method = "POST", .path = "/v1/jobs", .body = body, .body_len = len,
                          .content_type = cli_content_type(file, body, len),
                          .idempotency_key = key};
    struct cli_resp resp;
    rc = cli_http(ctx, &req, &resp);
    free(body);
    if (rc == CLI_EXIT_UNREACHABLE || rc == CLI_EXIT_SERVER) {
        cli_errorf("the jobs may or may not have been created; to retry without creating them "
                   "twice:\n  " CLI_PROG " submit -f %s --idempotency-key %s", file, key);
        return rc;
    }
    if (rc != CLI_EXIT_OK)
        return rc;
    return cli_print_submitted(ctx, &resp);
}

/* One form for every job, the server's (gpus_text, which the console shows
 * too): "8×H100-80GB", "4×0.25 H100-80GB (1 GPU)", "2×1g.10gb"; from an
 * older server, "GPUS×MODEL" ("16×any" when no model is asked for). */
static const char *gpus_cell(const json_t *job, char *buf, size_t size)
{
    char n[32], model[CLI_CELL_MAX];
    if (json_is_string(json_object_get(job, "gpus_text")))
        return cli_str(job, "gpus_text", buf, size);
    cli_str(job, "gpus", n, sizeof n);
    if (json_is_string(json_object_get(job, "gpu_model")))
        snprintf(buf, size, "%s×%s", n, cli_str(job, "gpu_model", model, sizeof model));
    else
        snprintf(buf, size, "%s×any", n);
    return buf;
}

/* queue_position: "3", or "3/17" (in its tenant / in the cluster); "-". */
static const char *position_cell(const json_t *job, char *buf, size_t size)
{
    const json_t *p = json_object_get(job, "queue_position");
    const json_t *t = json_object_get(p, "tenant"), *c = json_object_get(p, "cluster");
    if (json_is_integer(p))
        snprintf(buf, size, "%lld", (long long)json_integer_value(p));
    else if (json_is_integer(t) && json_is_integer(c))
        snprintf(buf, size, "%lld/%lld", (long long)json_integer_value(t),
                 (long long)json_integer_value(c));
    else if (json_is_integer(t) || json_is_integer(c))
        snprintf(buf, size, "%lld", (long long)json_integer_value(json_is_integer(t) ? t : c));
    else
        snprintf(buf, size, "-");
    return buf;
}

/* estimated_start: a time ("in 25m"), a word ("unknown"), or an object with
 * "time" or "reason"; "-" when the controller gives none. */
static const char *start_cell(const struct cli_ctx *ctx, const json_t *job, char *buf,
                              size_t size)
{
    const json_t *e = json_object_get(job, "estimated_start");
    if (json_is_object(e)) {
        const json_t *at = json_object_get(e, "time") ? json_object_get(e, "time")
                                                      : json_object_get(e, "at");
        if (!json_is_number(at)) {
            snprintf(buf, size, "unknown");
            return buf;
        }
        e = at;
    }
    if (json_is_number(e))
        return cli_time_short(ctx, e, buf, size);
    if (json_is_string(e))
        return cli_clean(json_string_value(e), buf, size);
    snprintf(buf, size, "-");
    return buf;
}

/* An ended job's exit: its exit code, "sig N" when a signal ended it, "-"
 * while it runs or when nothing is known (docs/api.md "Job"). */
/* Its spec's time limit as a duration; "default" where it gives none (the
 * cluster's default_time_limit), "-" where the spec is not shown. */
static const char *limit_cell(const json_t *job, char *buf, size_t size)
{
    const json_t *spec = json_object_get(job, "spec");
    const json_t *lim = json_object_get(spec, "time_limit");
    if (json_is_integer(lim) || json_is_real(lim))
        cli_duration(json_number_value(lim), buf, size);
    else
        snprintf(buf, size, "%s", json_is_object(spec) ? "default" : "-");
    return buf;
}

static const char *exit_cell(const json_t *job, char *buf, size_t size)
{
    const json_t *code = json_object_get(job, "exit_code"), *sig = json_object_get(job, "signal");
    if (json_is_integer(code))
        snprintf(buf, size, "%lld", (long long)json_integer_value(code));
    else if (json_is_integer(sig))
        snprintf(buf, size, "sig %lld", (long long)json_integer_value(sig));
    else
        snprintf(buf, size, "-");
    return buf;
}

/* Each ended rank's end, one line each: "1 r-2: exited with code 3". */
static void ranks_cell(const json_t *job, struct cli_buf *b)
{
    size_t i;
    json_t *r;
    json_array_foreach(json_object_get(job, "ranks"), i, r) {
        char node[CLI_CELL_MAX], why[CLI_CELL_MAX];
        if (!json_is_object(r))
            continue;
        cli_buf_printf(b, "%s%lld %s: %s", b->p ? "\n" : "",
                       (long long)json_integer_value(json_object_get(r, "rank")),
                       cli_str(r, "node", node, sizeof node), cli_str(r, "reason", why, sizeof why));
    }
}

static void job_row(const struct cli_ctx *ctx, const json_t *job, char (*c)[CLI_CELL_MAX],
                    const char **row)
{
    const char *cells[11] = {
        cli_str(job, "id", c[0], CLI_CELL_MAX),     cli_str(job, "name", c[1], CLI_CELL_MAX),
        cli_str(job, "tenant", c[2], CLI_CELL_MAX), cli_str(job, "owner", c[3], CLI_CELL_MAX),
        cli_str(job, "state", c[4], CLI_CELL_MAX),  exit_cell(job, c[5], CLI_CELL_MAX),
        gpus_cell(job, c[6], CLI_CELL_MAX),         position_cell(job, c[7], CLI_CELL_MAX),
        start_cell(ctx, job, c[8], CLI_CELL_MAX),
        cli_time_short(ctx, json_object_get(job, "submit_time"), c[9], CLI_CELL_MAX),
        cli_str(job, "reason", c[10], CLI_CELL_MAX)};
    memcpy(row, cells, sizeof cells);
}

int cli_cmd_jobs(struct cli_ctx *ctx, const struct cli_cmd *cmd, int argc, char **argv)
{
    const char *tenant = NULL, *state = NULL, *owner = NULL, *limit = NULL;
    bool all = false;
    const struct cli_opt opts[] = {
        {"tenant", 0, &tenant, NULL}, {"state", 0, &state, NULL}, {"owner", 0, &owner, NULL},
        {"limit", 0, &limit, NULL},   {"all", 0, NULL, &all},     {NULL, 0, NULL, NULL}};
    int rc = cli_parse(ctx, cmd, argc, argv, opts, NULL, 0, 0);
    if (rc != CLI_CONTINUE)
        return rc;
    long n;
    if (limit && !cli_parse_long(limit, 1, JOBS_PAGE_MAX, &n))
        return cli_usage_error(cmd, "--limit must be 1..%d, got '%s'", JOBS_PAGE_MAX, limit);
    struct cli_buf path = {0};
    cli_buf_puts(&path, "/v1/jobs");
    cli_buf_query(&path, "tenant", tenant);
    cli_buf_query(&path, "state", state);
    cli_buf_query(&path, "owner", owner);
    cli_buf_query(&path, "limit", limit);
    /* newest first: the first page holds what was just submitted, however
     * many jobs the cluster has kept */
    cli_buf_query(&path, "order", "newest");
    json_t *out = NULL;
    rc = path.oom ? CLI_EXIT_LOCAL : cli_get_pages(ctx, path.p, "jobs", all, &out);
    cli_buf_free(&path);
    if (cli_answered(ctx, rc, out))
        return rc;
    static const char *const head[] = {"ID",       "NAME",  "TENANT",    "OWNER",
                                       "STATE",    "EXIT",  "GPUS",      "POSITION",
                                       "START",    "SUBMITTED", "REASON"};
    static const struct cli_listing jobs_list = {
        "jobs", 11, head, 1u << 0 | 1u << 5 | 1u << 6 | 1u << 7, job_row};
    struct cli_table t;
    cli_table_init(&t, jobs_list.ncols, head, jobs_list.right);
    cli_list_rows(ctx, &jobs_list, &t, json_object_get(out, "jobs"));
    size_t i;
    json_t *job;
    /* a large array's elements that are not jobs yet: one line, as Slurm's
     * squeue prints 123_[5-99999] */
    json_array_foreach(json_object_get(out, "arrays"), i, job) {
        char c[11][CLI_CELL_MAX], idx[CLI_CELL_MAX];
        snprintf(c[0], sizeof c[0], "%lld_[%s]", cli_int(job, "array", -1),
                 cli_str(job, "indices", idx, sizeof idx));
        snprintf(c[6], sizeof c[6], "%lld each", cli_int(job, "gpus", 0));
        snprintf(c[10], sizeof c[10], "%lld elements not yet queued as jobs",
                 cli_int(job, "pending", 0));
        const char *row[11] = {
            c[0], cli_str(job, "name", c[1], sizeof c[1]),
            cli_str(job, "tenant", c[2], sizeof c[2]), cli_str(job, "owner", c[3], sizeof c[3]),
            cli_str(job, "state", c[4], sizeof c[4]), "-", c[6], "-", "-",
            cli_time_short(ctx, json_object_get(job, "submit_time"), c[9], sizeof c[9]),
            c[10]};
        cli_table_row(&t, row);
    }
    bool more = !all && json_is_string(json_object_get(out, "next_cursor"));
    rc = cli_table_finish(&t, "jobs");
    if (more)
        fprintf(stderr, "more jobs: --all lists them all\n");
    json_decref(out);
    return rc;
}

/* GPU indexes as ranges: [0,1,2,3,6] -> "0-3,6". */
static void gpu_ranges(const json_t *gpus, struct cli_buf *b)
{
    size_t n = json_array_size(gpus);
    for (size_t i = 0; i < n;) {
        long long first = json_integer_value(json_array_get(gpus, i));
        size_t j = i;
        while (j + 1 < n && json_integer_value(json_array_get(gpus, j + 1)) ==
                                json_integer_value(json_array_get(gpus, j)) + 1)
            j++;
        long long last = json_integer_value(json_array_get(gpus, j));
        cli_buf_printf(b, "%s%lld", i ? "," : "", first);
        if (j > i)
            cli_buf_printf(b, "%s%lld", j == i + 1 ? "," : "-", last);
        i = j + 1;
    }
}

static void placement_cell(const json_t *job, struct cli_buf *b)
{
    size_t i;
    json_t *p;
    json_array_foreach(json_object_get(job, "placement"), i, p) {
        char node[CLI_CELL_MAX];
        bool none = json_array_size(json_object_get(p, "gpus")) == 0; /* a CPU-only task */
        cli_buf_printf(b, "%s%s: %s", i ? "\n" : "", cli_str(p, "node", node, sizeof node),
                       none ? "no GPU" : "GPUs ");
        if (!none)
            gpu_ranges(json_object_get(p, "gpus"), b);
    }
}

/* Nodes a job's placement names at most, for its "Nodes" line. */
#define CLI_NODES_MAX 4096

/* Fetches /v1/jobs/ID[suffix] with method; the answer's "job" in *job. */
static int job_request(struct cli_ctx *ctx, const char *method, long id, const char *suffix,
                       const char *member, json_t **root, json_t **out)
{
    char path[96];
    snprintf(path, sizeof path, "/v1/jobs/%ld%s", id, suffix);
    struct cli_req req = {.method = method, .path = path};
    struct cli_resp resp;
    int rc = cli_http(ctx, &req, &resp);
    if (rc != CLI_EXIT_OK)
        return rc;
    rc = member ? cli_expect_member(resp.json, member, JSON_OBJECT, out)
                : cli_expect_member(resp.json, "job_id", JSON_INTEGER, out);
    if (rc != CLI_EXIT_OK)
        cli_resp_free(&resp);
    else
        *root = resp.json;
    return rc;
}

/* POSTs /v1/jobs/ID[suffix] (hold, release, cancel...) and prints the
 * job's state after it: "job ID: STATE". */
static int job_post_state(struct cli_ctx *ctx, long id, const char *suffix)
{
    json_t *root = NULL, *job;
    int rc = job_request(ctx, "POST", id, suffix, "job", &root, &job);
    if (rc != CLI_EXIT_OK)
        return rc;
    if (!cli_emit(ctx, root)) {
        char state[CLI_CELL_MAX];
        printf("job %ld: %s\n", id, cli_str(job, "state", state, sizeof state));
    }
    json_decref(root);
    return CLI_EXIT_OK;
}

/* A job's content field (docs/secrets.md): "hidden" where the API withholds
 * it; the command's words, the env's and secrets' names (never env values:
 * a terminal is not the place for them), "-" when there are none. */
static void content_cell(const json_t *job, const char *key, struct cli_buf *b)
{
    const json_t *v = json_object_get(json_object_get(job, "spec"), key);
    size_t i;
    const char *k;
    json_t *e;
    if (json_is_string(v))
        cli_buf_puts(b, json_string_value(v)); /* "hidden" */
    else if (json_is_array(v))
        json_array_foreach(v, i, e) {
            const char *word = json_is_object(e) ? json_string_value(json_object_get(e, "name"))
                                                 : json_string_value(e);
            cli_buf_printf(b, "%s%s", i ? (json_is_object(e) ? ", " : " ") : "",
                           word ? word : "?");
        }
    else if (json_is_object(v))
        json_object_foreach((json_t *)v, k, e)
            cli_buf_printf(b, "%s%s", b->len ? ", " : "", k);
}

/* `tessera CMD ID`: GET /v1/jobs/ID<suffix> into *root (and its member into
 * *doc, see job_request). CLI_CONTINUE when the caller prints it as text (and
 * frees *root); else the exit code, the answer printed as JSON or the error
 * said. */
static int job_doc(struct cli_ctx *ctx, const struct cli_cmd *cmd, int argc, char **argv,
                   const char *suffix, const char *member, json_t **root, json_t **doc)
{
    long id;
    int rc = cli_parse_job(ctx, cmd, argc, argv, NULL, &id);
    if (rc != CLI_CONTINUE)
        return rc;
    *root = NULL;
    rc = job_request(ctx, "GET", id, suffix, member, root, doc);
    return cli_answered(ctx, rc, *root) ? rc : CLI_CONTINUE;
}

int cli_cmd_show(struct cli_ctx *ctx, const struct cli_cmd *cmd, int argc, char **argv)
{
    json_t *root = NULL, *job;
    int rc = job_doc(ctx, cmd, argc, argv, "", "job", &root, &job);
    if (rc != CLI_CONTINUE)
        return rc;
    static const char *const keys[][2] = {
        {"ID", "id"},     {"Name", "name"},         {"Tenant", "tenant"},
        {"Owner", "owner"}, {"State", "state"},     {"Tier", "tier"},
        {"Priority", "priority"}, {"GPUs", NULL},   {"Submitted", "submit_time"},
        {"Started", "start_time"}, {"Ended", "end_time"}, {"Time limit", NULL},
        {"Preemptions", "preemptions"}, {"Reason", "reason"}, {"Why", "why"},
        {"Exit code", NULL},
    };
    struct cli_table t;
    cli_table_init(&t, 2, NULL, 0);
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
        char v[CLI_CELL_MAX];
        const char *val;
        if (!keys[k][1])
            val = keys[k][0][0] == 'G'   ? gpus_cell(job, v, sizeof v)
                  : keys[k][0][0] == 'T' ? limit_cell(job, v, sizeof v)
                                         : exit_cell(job, v, sizeof v);
        else if (strstr(keys[k][1], "_time"))
            val = cli_time_long(ctx, json_object_get(job, keys[k][1]), v, sizeof v);
        else
            val = cli_str(job, keys[k][1], v, sizeof v);
        cli_kv(&t, keys[k][0], val);
    }
    json_t *el = json_object_get(job, "elastic");
    if (json_is_object(el)) { /* docs/api.md "Job" elastic */
        char v[CLI_CELL_MAX];
        long long to = cli_int(el, "resize_to", 0);
        long long now = cli_int(el, "gpus", 0);
        int w = snprintf(v, sizeof v, "%lld GPU%s now, range %lld..%lld", now,
                         now == 1 ? "" : "s", cli_int(el, "min_gpus", 0),
                         cli_int(el, "max_gpus", 0));
        if (to > 0 && w > 0 && (size_t)w < sizeof v)
            snprintf(v + w, sizeof v - (size_t)w, "; resizing to %lld", to);
        cli_kv(&t, "Elastic", v);
    }
    struct cli_buf place = {0};
    const char *nodes[CLI_NODES_MAX];
    size_t nn = 0;
    size_t pi;
    json_t *pe;
    json_array_foreach(json_object_get(job, "placement"), pi, pe)
        if (nn < CLI_NODES_MAX && json_is_string(json_object_get(pe, "node")))
            nodes[nn++] = json_string_value(json_object_get(pe, "node"));
    if (nn > 0) {
        cli_name_ranges(nodes, nn, &place);
        cli_kv(&t, "Nodes", place.p ? place.p : "-");
        cli_buf_free(&place);
        place = (struct cli_buf){0};
    }
    placement_cell(job, &place);
    cli_kv(&t, "Placement", place.p ? place.p : "-");
    t.oom |= place.oom;
    cli_buf_free(&place);
    place = (struct cli_buf){0};
    ranks_cell(job, &place);
    if (place.p)
        cli_kv(&t, "Ranks", place.p);
    json_t *pull = json_object_get(job, "image_pull");
    if (json_is_object(pull)) { /* its image still coming to rank's node */
        char v[CLI_CELL_MAX], note[CLI_CELL_MAX];
        const char *n = json_string_value(json_object_get(pull, "note"));
        snprintf(v, sizeof v, "rank %lld: %lld of %lld bytes%s%s", cli_int(pull, "rank", 0),
                 cli_int(pull, "done_bytes", 0), cli_int(pull, "total_bytes", 0),
                 n ? "; last try: " : "", n ? cli_clean(n, note, sizeof note) : "");
        cli_kv(&t, "Image pull", v);
    }
    t.oom |= place.oom;
    cli_buf_free(&place);
    static const char *const content[][2] = {
        {"Command", "command"}, {"Env", "env"}, {"Secrets", "secrets"}};
    for (size_t k = 0; k < sizeof content / sizeof content[0]; k++) {
        struct cli_buf cb = {0};
        char clean[CLI_CELL_MAX];
        content_cell(job, content[k][1], &cb);
        cli_kv(&t, content[k][0], cb.p ? cli_clean(cb.p, clean, sizeof clean) : "-");
        t.oom |= cb.oom;
        cli_buf_free(&cb);
    }
    json_decref(root);
    return cli_table_finish(&t, "job");
}

#define ACTION_IDS_MAX 64 /* ids of one hold or release (requeue takes one) */

static int cancel_target(const struct cli_cmd *cmd, const char *s, long *id, long *elem);
static int array_or_job_action(struct cli_ctx *ctx, const struct cli_cmd *cmd, long id,
                               long elem);

int cli_cmd_job_action(struct cli_ctx *ctx, const struct cli_cmd *cmd, int argc, char **argv)
{
    const char *args[ACTION_IDS_MAX] = {0};
    bool many = strcmp(cmd->name, "requeue") != 0;
    int rc = cli_parse(ctx, cmd, argc, argv, NULL, args, 1, many ? ACTION_IDS_MAX : 1);
    if (rc != CLI_CONTINUE)
        return rc;
    long ids[ACTION_IDS_MAX], elems[ACTION_IDS_MAX];
    int n = 0;
    for (; n < ACTION_IDS_MAX && args[n]; n++) { /* every id checked before any is sent */
        elems[n] = -1;
        rc = many ? cancel_target(cmd, args[n], &ids[n], &elems[n])
                  : cli_job_id(cmd, args[n], &ids[n]);
        if (rc != CLI_CONTINUE)
            return rc;
    }
    char suffix[32];
    snprintf(suffix, sizeof suffix, "/%s", cmd->name);
    int worst = CLI_EXIT_OK;
    for (int i = 0; i < n; i++) {
        if (many) { /* hold, release: an array's id is the whole array, as in Slurm */
            if ((rc = array_or_job_action(ctx, cmd, ids[i], elems[i])) != CLI_EXIT_OK)
                worst = rc;
            continue;
        }
        json_t *root, *job;
        rc = job_request(ctx, "POST", ids[i], suffix, "job", &root, &job);
        if (rc != CLI_EXIT_OK) {
            worst = rc;
            continue;
        }
        if (!cli_emit(ctx, root)) {
            char state[CLI_CELL_MAX];
            printf("job %ld: %s\n", ids[i], cli_str(job, "state", state, sizeof state));
        }
        json_decref(root);
    }
    return worst;
}

#define CANCEL_FORMS "a positive integer, ID_INDEX or ID[INDEX]"

/* "12", "12_5" or "12[5]": a job (or array) id and an array index (-1:
 * none): TESSERA_ARRAY_INDEX, or SLURM_ARRAY_TASK_ID for a batch script's. */
static int cancel_target(const struct cli_cmd *cmd, const char *s, long *id, long *elem)
{
    char head[32];
    size_t n = strcspn(s, "_[");
    *elem = -1;
    if (n >= sizeof head)
        return cli_usage_error(cmd, "job id must be " CANCEL_FORMS ", got '%s'", s);
    memcpy(head, s, n);
    head[n] = '\0';
    if (!cli_parse_long(head, 1, LONG_MAX, id))
        return cli_usage_error(cmd, "job id must be " CANCEL_FORMS ", got '%s'", s);
    if (s[n] == '\0')
        return CLI_CONTINUE;
    char idx[32];
    size_t m = strlen(s + n + 1);
    bool bracket = s[n] == '[';
    if (bracket && (m == 0 || s[n + m] != ']'))
        m = sizeof idx; /* no closing bracket: refused below */
    else if (bracket)
        m--;
    if (m == 0 || m >= sizeof idx)
        return cli_usage_error(cmd, "job id must be " CANCEL_FORMS ", got '%s'", s);
    memcpy(idx, s + n + 1, m);
    idx[m] = '\0';
    if (!cli_parse_long(idx, 0, LONG_MAX - *id, elem))
        return cli_usage_error(cmd, "array index must be an integer 0.., got '%s'", s);
    return CLI_CONTINUE;
}

/* The element number of index idx in an array from a batch script, whose
 * indices are its script's list (TESSERA_SLURM_ARRAY, "1-9:2"); idx itself
 * for any other array; -1 when the list has no such index. */
static long element_of(const json_t *job, long idx, long span)
{
    const json_t *env = json_object_get(json_object_get(job, "spec"), "env");
    const char *list = json_string_value(json_object_get(env, "TESSERA_SLURM_ARRAY"));
    if (!list)
        return idx;
    for (long k = 0; k < span; k++)
        if (ts_sbatch_array_nth(list, k) == idx)
            return k;
    return -1;
}

/* Whether job (an answer's "job") is an array's first element: its id is
 * the array's. *span gets the array's size. */
static bool array_head(const json_t *job, long *span)
{
    const char *name = json_string_value(json_object_get(job, "name"));
    const json_t *size = json_object_get(json_object_get(job, "spec"), "array_size");
    size_t n = name ? strlen(name) : 0;
    *span = json_is_integer(size) ? (long)json_integer_value(size) : 1;
    return *span > 1 && n >= 3 && strcmp(name + n - 3, "[0]") == 0;
}

/* Whether job id heads an array (*head, its *span), and which job element
 * elem of it is (*k, an offset from id; -1 when elem < 0 or no array):
 * CLI_EXIT_NOT_FOUND (said) when the array has no such element. */
static int array_target(struct cli_ctx *ctx, long id, long elem, bool *head, long *span,
                        long *k)
{
    json_t *root = NULL, *job;
    int rc = job_request(ctx, "GET", id, "", "job", &root, &job);
    if (rc != CLI_EXIT_OK)
        return rc;
    *head = array_head(job, span);
    *k = *head && elem >= 0 ? element_of(job, elem, *span) : -1;
    json_decref(root);
    if (elem >= 0 && (*k < 0 || *k >= *span)) {
        fprintf(stderr, "tessera: array %ld has no index %ld\n", id, elem);
        return CLI_EXIT_NOT_FOUND;
    }
    return CLI_EXIT_OK;
}

/* hold or release (cmd->name) of one job; an array's id (its first
 * element's) acts on every element, as Slurm's scontrol hold; ID_INDEX or
 * ID[INDEX] on one element. */
static int array_or_job_action(struct cli_ctx *ctx, const struct cli_cmd *cmd, long id,
                               long elem)
{
    long span, k;
    bool head;
    int rc = array_target(ctx, id, elem, &head, &span, &k);
    if (rc != CLI_EXIT_OK)
        return rc;
    char path[64];
    if (head && elem < 0) {
        snprintf(path, sizeof path, "/v1/arrays/%ld/%s", id, cmd->name);
        struct cli_req req = {.method = "POST", .path = path};
        struct cli_resp resp;
        if ((rc = cli_http(ctx, &req, &resp)) != CLI_EXIT_OK)
            return rc;
        bool hold = strcmp(cmd->name, "hold") == 0;
        if (!cli_emit(ctx, resp.json))
            printf("array %ld: %lld of its %ld elements %s\n", id,
                   (long long)json_integer_value(
                       json_object_get(resp.json, hold ? "held" : "released")),
                   span, hold ? "held (the others were not pending)"
                              : "released (the others were not held)");
        cli_resp_free(&resp);
        return CLI_EXIT_OK;
    }
    if (elem >= 0)
        id += k;
    snprintf(path, sizeof path, "/%s", cmd->name);
    return job_post_state(ctx, id, path);
}

/* Cancels a job; an array's id (its first element's) cancels every element
 * still active, as Slurm's scancel; ID_INDEX or ID[INDEX] one element. */
/* tessera cancel --user U --name N --state S --array A --tenant T: one
 * POST /v1/jobs/cancel of every active job the filters match. */
static int cancel_bulk(struct cli_ctx *ctx, const struct cli_cmd *cmd, const char *const f[5])
{
    static const char *const keys[5] = {"user", "name", "state", "array", "tenant"};
    json_t *body = json_object();
    for (int i = 0; i < 5; i++) {
        long a;
        if (!f[i])
            continue;
        if (i == 3 && !cli_parse_long(f[i], 1, LONG_MAX, &a)) {
            json_decref(body);
            return cli_usage_error(cmd, "--array: \"%s\" is not an array's id", f[i]);
        }
        json_object_set_new(body, keys[i], i == 3 ? json_integer(a) : json_string(f[i]));
    }
    struct cli_resp resp;
    int rc = cli_send_json(ctx, "POST", "/v1/jobs/cancel", body, &resp);
    if (rc != CLI_EXIT_OK)
        return rc;
    if (!cli_emit(ctx, resp.json)) {
        json_t *ids = json_object_get(resp.json, "jobs");
        long long elements = json_integer_value(json_object_get(resp.json, "elements"));
        printf("%lld cancelled", (long long)json_integer_value(json_object_get(resp.json,
                                                                              "cancelled")));
        size_t i;
        json_t *v;
        json_array_foreach(ids, i, v) {
            if (i >= 20) {
                printf(" ...");
                break;
            }
            printf("%s%lld", i ? " " : ": jobs ", (long long)json_integer_value(v));
        }
        if (elements > 0)
            printf("%s%lld array elements not yet started", json_array_size(ids) ? "; " : ": ",
                   elements);
        putchar('\n');
    }
    cli_resp_free(&resp);
    return CLI_EXIT_OK;
}

/* Cancels one job, one array element (elem >= 0) or a whole array. */
static int cancel_one(struct cli_ctx *ctx, long id, long elem)
{
    bool head;
    long k, span;
    int rc;
    if ((rc = array_target(ctx, id, elem, &head, &span, &k)) != CLI_EXIT_OK)
        return rc;
    if (head && elem < 0) {
        char path[64];
        snprintf(path, sizeof path, "/v1/arrays/%ld/cancel", id);
        struct cli_req req = {.method = "POST", .path = path};
        struct cli_resp resp;
        if ((rc = cli_http(ctx, &req, &resp)) != CLI_EXIT_OK)
            return rc;
        if (!cli_emit(ctx, resp.json))
            printf("array %ld: %lld of its %ld elements cancelled (the others had ended)\n", id,
                   (long long)json_integer_value(json_object_get(resp.json, "cancelled")), span);
        cli_resp_free(&resp);
        return CLI_EXIT_OK;
    }
    if (elem >= 0)
        id += k;
    return job_post_state(ctx, id, "/cancel");
}

int cli_cmd_cancel(struct cli_ctx *ctx, const struct cli_cmd *cmd, int argc, char **argv)
{
    const char *args[ACTION_IDS_MAX] = {0}, *f[5] = {0};
    const struct cli_opt opts[] = {{"user", 'u', &f[0], NULL},   {"name", 'n', &f[1], NULL},
                                   {"state", 't', &f[2], NULL},  {"array", 0, &f[3], NULL},
                                   {"tenant", 0, &f[4], NULL},   {0}};
    int rc = cli_parse(ctx, cmd, argc, argv, opts, args, 0, ACTION_IDS_MAX);
    if (rc != CLI_CONTINUE)
        return rc;
    bool filtered = f[0] || f[1] || f[2] || f[3] || f[4];
    if (filtered && args[0])
        return cli_usage_error(cmd, "give job ids or filters (--user, --name, --state, "
                               "--array, --tenant), not both");
    if (filtered)
        return cancel_bulk(ctx, cmd, f);
    if (!args[0])
        return cli_usage_error(cmd, "give a job id, or filters (--user, --name, --state, "
                               "--array, --tenant)");
    /* several ids, as scancel 41 42: every one checked before any is sent,
     * every one tried; the exit code is the last failure's */
    long ids[ACTION_IDS_MAX], elems[ACTION_IDS_MAX];
    int n = 0;
    for (; n < ACTION_IDS_MAX && args[n]; n++)
        if ((rc = cancel_target(cmd, args[n], &ids[n], &elems[n])) != CLI_CONTINUE)
            return rc;
    int worst = CLI_EXIT_OK;
    for (int i = 0; i < n; i++)
        if ((rc = cancel_one(ctx, ids[i], elems[i])) != CLI_EXIT_OK)
            worst = rc;
    return worst;
}

int cli_cmd_explain(struct cli_ctx *ctx, const struct cli_cmd *cmd, int argc, char **argv)
{
    json_t *root = NULL, *job_id;
    int rc = job_doc(ctx, cmd, argc, argv, "/explain", NULL, &root, &job_id);
    if (rc != CLI_CONTINUE)
        return rc;
    char v[4][CLI_CELL_MAX];
    struct cli_table t;
    cli_table_init(&t, 2, NULL, 0);
    cli_kv(&t, "Job", cli_str(root, "job_id", v[0], sizeof v[0]));
    cli_kv(&t, "State", cli_str(root, "state", v[1], sizeof v[1]));
    cli_kv(&t, "Reason", cli_str(root, "reason", v[2], sizeof v[2]));
    cli_kv(&t, "Explanation", cli_str(root, "explanation", v[3], sizeof v[3]));
    const json_t *at = json_object_get(root, "reserved_at");
    cli_kv(&t, "Reserved", json_is_number(at) ? cli_time_long(ctx, at, v[0], sizeof v[0])
                                              : "no reservation");
    /* where it stands in the order (las level, jobs ahead) and when it could start */
    if (json_is_string(json_object_get(root, "standing")))
        cli_kv(&t, "Standing", cli_str(root, "standing", v[1], sizeof v[1]));
    const json_t *pos = json_object_get(root, "queue_position");
    const json_t *est = json_object_get(root, "estimated_start");
    if (pos && !json_is_null(pos))
        cli_kv(&t, "Position", position_cell(root, v[2], sizeof v[2]));
    if (est && !json_is_null(est))
        cli_kv(&t, "Start", start_cell(ctx, root, v[3], sizeof v[3]));
    /* its tenant below its guarantee with work that fits (docs/scheduler.md,
     * "The guarantee"): the reason above is why it is not yet served */
    const json_t *owed = json_object_get(root, "tenant_owed_gpus");
    if (json_is_number(owed) && json_number_value(owed) > 0.0) {
        snprintf(v[0], sizeof v[0], "its tenant is owed %g GPUs of its guarantee; not yet "
                 "served: see Reason", json_number_value(owed));
        cli_kv(&t, "Guarantee", v[0]);
    }
    json_decref(root);
    return cli_table_finish(&t, "explanation");
}

static void event_row(const struct cli_ctx *ctx, const json_t *ev, char (*c)[CLI_CELL_MAX],
                      const char **row)
{
    (void)ctx;
    const char *cells[4] = {cli_str(ev, "id", c[0], CLI_CELL_MAX),
                            cli_time_iso(json_object_get(ev, "time"), c[1], CLI_CELL_MAX),
                            cli_str(ev, "kind", c[2], CLI_CELL_MAX),
                            cli_event_text(ev, c[3], CLI_CELL_MAX)};
    memcpy(row, cells, sizeof cells);
}

int cli_cmd_events(struct cli_ctx *ctx, const struct cli_cmd *cmd, int argc, char **argv)
{
    static const char *const head[] = {"ID", "TIME", "KIND", "DETAIL"};
    static const struct cli_listing events_list = {"events", 4, head, 1u << 0, event_row};
    return cli_job_list(ctx, cmd, argc, argv, "/events", "events", true, &events_list);
}
