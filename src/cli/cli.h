/*
 * cli.h - internal: what the files of the `tessera` command-line client share.
 *
 * The CLI is a thin shell over the controller's HTTP API (docs/api.md): each
 * command parses its arguments (args.c), makes one or a few requests (http.c)
 * and renders the answer as an aligned table, pretty JSON or YAML (table.c,
 * emit.c, format.c). Settings come from flags, the environment and a config
 * file, in that order (config.c). Every outcome maps to one documented exit
 * code (docs/cli.md), so scripts can tell "not found" from "refused" from
 * "cannot reach the server" without parsing messages.
 *
 * Ownership: a cli_ctx lives on main's stack for the whole run and owns the
 * strings it points to once resolved; nothing here is thread-safe (the CLI is
 * single-threaded). Messages go to stderr, results to stdout.
 */
#ifndef TS_CLI_CLI_H
#define TS_CLI_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <time.h>

#include <jansson.h>

#define CLI_VERSION "0.1.0"
#define CLI_DEFAULT_SERVER "http://127.0.0.1:8460"
#define CLI_PROG "tessera"
#define CLI_SERVERS_MAX 8     /* controllers in one --server / $TESSERA_URL list */
#define CLI_URL_MAX 1024      /* bytes of one controller URL */

/* The exit codes; docs/cli.md is the contract scripts rely on. */
enum cli_exit {
    CLI_EXIT_OK = 0,
    CLI_EXIT_LOCAL = 1,       /* out of memory, cannot write the output */
    CLI_EXIT_USAGE = 2,       /* bad flags, arguments, local files or config */
    CLI_EXIT_NOT_FOUND = 3,   /* 404 */
    CLI_EXIT_REFUSED = 4,     /* 400, 409, 413, 429 and other 4xx */
    CLI_EXIT_AUTH = 5,        /* 401, 403 */
    CLI_EXIT_UNREACHABLE = 6, /* connection refused, DNS, timeout, TLS */
    CLI_EXIT_SERVER = 7,      /* 5xx, a redirect, an unreadable answer */
};

/* Returned by cli_parse when the command should go on (exit codes are >= 0). */
#define CLI_CONTINUE (-1)

enum cli_output { CLI_OUT_TABLE, CLI_OUT_JSON, CLI_OUT_YAML };

/* Global settings as given on the command line (NULL = not given). */
struct cli_flags {
    const char *server;
    const char *token;
    const char *config;
    const char *ca;
    const char *output;
    const char *timeout;
    bool help;
    bool version;
};

struct cli_ctx {
    struct cli_flags flags;
    /* Resolved by cli_config_resolve (owned, freed by cli_ctx_free). */
    char *server;      /* the controller in use: base URL without a trailing slash */
    char *servers[CLI_SERVERS_MAX]; /* every controller given, in order (owned) */
    int nservers;
    char *token;       /* NULL: send no Authorization header */
    char *ca;          /* NULL: the system's trust store */
    char *token_from;  /* where the token came from, for a 401 hint */
    bool resolved;
    enum cli_output output;
    long timeout_s;    /* whole-request limit */
    time_t now;        /* one "now" for every relative time of a run */
    void *curl;        /* CURL *, reused across requests (pages) */
};

void cli_ctx_free(struct cli_ctx *ctx);

/* ---- args.c: options of one command ---- */

struct cli_opt {
    const char *name;   /* long name without "--" */
    char short_name;    /* 0 = none */
    const char **value; /* set for an option that takes a value */
    bool *flag;         /* set for a flag */
};

struct cli_cmd {
    const char *name;   /* "tokens create" */
    const char *usage;  /* synopsis line(s) after "usage: tessera " */
    const char *help;   /* what it does and its own flags */
    int (*run)(struct cli_ctx *ctx, const struct cli_cmd *cmd, int argc, char **argv);
};

/*
 * Parses argv[0..argc) of one command: its own opts (terminated by a zero
 * entry; NULL = none), the global flags anywhere, and between pos_min and
 * pos_max positional arguments into pos[]. Prints --help and usage errors
 * itself. Returns CLI_CONTINUE, CLI_EXIT_OK (help shown) or CLI_EXIT_USAGE.
 */
int cli_parse(struct cli_ctx *ctx, const struct cli_cmd *cmd, int argc, char **argv,
              const struct cli_opt *opts, const char **pos, int pos_min, int pos_max);

/*
 * Parses global flags at argv[*i] up to the first non-option; leaves *i at
 * it. Returns CLI_CONTINUE or CLI_EXIT_USAGE (message printed).
 */
int cli_parse_globals(struct cli_ctx *ctx, int argc, char **argv, int *i);

/* Prints "tessera CMD: <msg>" and the usage lines to stderr; returns CLI_EXIT_USAGE. */
__attribute__((format(printf, 2, 3)))
int cli_usage_error(const struct cli_cmd *cmd, const char *fmt, ...);

/* Prints "tessera: <msg>" to stderr (with "warning: " for cli_warn). */
__attribute__((format(printf, 1, 2))) void cli_errorf(const char *fmt, ...);
__attribute__((format(printf, 1, 2))) void cli_warn(const char *fmt, ...);

/* A decimal integer in lo..hi, nothing else; false otherwise. */
bool cli_parse_long(const char *s, long lo, long hi, long *out);
/* Option --opt's value v (NULL: not given, *out kept) as cli_parse_when (format.c)
 * reads it; CLI_CONTINUE, or the usage error for a value that is not a time. */
int cli_when_opt(const struct cli_cmd *cmd, const char *opt, const char *v, time_t now,
                 double *out);

/* A job id as the API has it: a positive integer. Usage error if not. */
int cli_job_id(const struct cli_cmd *cmd, const char *s, long *id);

/* cli_parse for a command of one positional argument, a job id (cli_job_id),
 * with its own opts (NULL: none). */
int cli_parse_job(struct cli_ctx *ctx, const struct cli_cmd *cmd, int argc, char **argv,
                  const struct cli_opt *opts, long *id);

/*
 * For a command that reads its own words before cli_parse because its unknown
 * options are not errors (sbatch passes them on; the session commands stop at
 * the command): takes argv[*i] when it is -h/--help, a global value flag
 * other than --output (sbatch has its own), or one of own[0..nown) as
 * --NAME VALUE or --NAME=VALUE, and sets *taken. Returns CLI_CONTINUE or
 * CLI_EXIT_USAGE (the value is missing; printed).
 */
struct cli_word {
    const char *name;   /* long name without "--" */
    const char **slot;
};
int cli_take_word(struct cli_ctx *ctx, const struct cli_cmd *cmd, const struct cli_word *own,
                  size_t nown, int argc, char **argv, int *i, bool *taken);

/* ---- config.c ---- */

/*
 * Fills ctx->servers (a comma-separated list of 1..CLI_SERVERS_MAX URLs;
 * ctx->server is the first), token, ca, output and timeout_s from the
 * flags, then $TESSERA_URL / $TESSERA_TOKEN, then the config file, then
 * the defaults.
 * Warns when the config file holds a token and others may read it. Returns
 * CLI_CONTINUE or an exit code (message printed). Idempotent.
 */
int cli_config_resolve(struct cli_ctx *ctx);
/* Where `login` keeps the ID token ($XDG_CONFIG_HOME or ~/.config, then
 * tessera/id-token; malloc'd), NULL when there is no home. */
char *cli_id_token_path(void);

/* ---- buf.c: a growable string ---- */

struct cli_buf {
    char *p;     /* NUL-terminated; NULL until the first append */
    size_t len;
    size_t cap;
    bool oom;    /* an append failed; the contents are incomplete */
};

void cli_buf_add(struct cli_buf *b, const char *s, size_t n);
void cli_buf_puts(struct cli_buf *b, const char *s);
__attribute__((format(printf, 2, 3))) void cli_buf_printf(struct cli_buf *b, const char *fmt, ...);
/* Appends s percent-encoded (everything but A-Z a-z 0-9 - . _ ~). */
void cli_buf_escape(struct cli_buf *b, const char *s);
/* Appends "?k=v" or "&k=v" (v escaped); nothing when v is NULL. */
void cli_buf_query(struct cli_buf *b, const char *k, const char *v);
/* Appends "?k=t" or "&k=t", the time t in seconds written whole ("%.15g"). */
void cli_buf_query_time(struct cli_buf *b, const char *k, double t);
void cli_buf_free(struct cli_buf *b);

/*
 * Reads a whole file ("-" = stdin) of at most max bytes. Returns a malloc'd,
 * NUL-terminated buffer, or NULL with a message printed (*rc: the exit code).
 */
char *cli_read_file(const char *path, size_t max, size_t *len, int *rc);

/* ---- http.c ---- */

struct cli_resp {
    long status;
    json_t *json;       /* the parsed body; NULL for an empty (204) answer */
    bool replayed;      /* 200 where 201 was possible (idempotent retry) */
    char code[48];      /* a quiet request's non-2xx answer: its error code ("" none) */
};

struct cli_req {
    const char *method; /* "GET", "POST", "PUT", "DELETE" */
    const char *path;   /* "/v1/jobs?state=pending", already escaped */
    const char *body;   /* NULL = none */
    size_t body_len;
    const char *content_type;
    const char *idempotency_key;
    bool quiet;         /* a non-2xx answer: its exit code and resp->status, nothing printed */
};

/*
 * Sends req to ctx's server. With several controllers, a try that gets no
 * answer (connection refused, name not resolved, timeout, connection
 * dropped) or a 503 "standby" moves on: to the leader the standby names
 * (once per request), else to the next controller not yet tried; the
 * first other answer is the answer, and the controller that gave it is
 * tried first by the next request. On a 2xx answer fills resp (the caller frees
 * it with cli_resp_free) and returns CLI_EXIT_OK. Otherwise prints what
 * went wrong - the server's message and every field error, or which URL
 * could not be reached and why - and returns the exit code for it.
 */
int cli_http(struct cli_ctx *ctx, const struct cli_req *req, struct cli_resp *resp);
void cli_resp_free(struct cli_resp *resp);
void cli_http_cleanup(struct cli_ctx *ctx);

/*
 * GET path and return the answer's member key (of type want), or an exit
 * code. *root is the whole answer (free with json_decref). An answer
 * without the member is CLI_EXIT_SERVER ("unreadable answer").
 */
int cli_get_member(struct cli_ctx *ctx, const char *path, const char *key, json_type want,
                   json_t **root, json_t **member);

/*
 * The start of a listing command that takes no arguments: parses the
 * command line, GETs path and its array member key, and prints the answer
 * itself for --output json|yaml. Returns CLI_CONTINUE with *root (free with
 * json_decref) and *list when the caller is to print its table; else the
 * exit code, all done.
 */
int cli_list_fetch(struct cli_ctx *ctx, const struct cli_cmd *cmd, int argc, char **argv,
                   const char *path, const char *key, json_t **root, json_t **list);

/* After a GET of out that returned rc: true when the command is done, as it
 * failed or printed out for --output json|yaml; out is then freed. */
bool cli_answered(const struct cli_ctx *ctx, int rc, json_t *out);

/*
 * GETs path (NULL: it could not be built, out of memory) and its array member
 * key, and prints the answer itself for --output json|yaml. Returns
 * CLI_CONTINUE with *root (free with json_decref) and *list when the caller
 * is to print its table; else the exit code, all done.
 */
int cli_list_get(struct cli_ctx *ctx, const char *path, const char *key, json_t **root,
                 json_t **list);

struct cli_listing; /* table.c */
/* A listing command without arguments: cli_list_fetch, then l's table. */
int cli_list_cmd(struct cli_ctx *ctx, const struct cli_cmd *cmd, int argc, char **argv,
                 const char *path, const char *key, const struct cli_listing *l);

/*
 * A command `CMD JOB` that lists a job's key (events, steps): GETs
 * /v1/jobs/JOB<suffix>, every page when paged, and prints its array member
 * key as l's table. Returns the exit code.
 */
int cli_job_list(struct cli_ctx *ctx, const struct cli_cmd *cmd, int argc, char **argv,
                 const char *suffix, const char *key, bool paged, const struct cli_listing *l);

/* Checks that an answer has member key of type want; prints and returns
 * CLI_EXIT_SERVER if not, else CLI_EXIT_OK. */
int cli_expect_member(const json_t *root, const char *key, json_type want, json_t **member);

/*
 * Sends body (taken: freed here, NULL reads as out of memory) as compact
 * JSON with method to path, as cli_http: on CLI_EXIT_OK resp is filled for
 * the caller to free. Returns an exit code.
 */
int cli_send_json(struct cli_ctx *ctx, const char *method, const char *path, json_t *body,
                  struct cli_resp *resp);
/* cli_send_json, then the answer's member key of type want (as
 * cli_expect_member). The caller frees resp whatever the outcome. */
int cli_send_member(struct cli_ctx *ctx, const char *method, const char *path, json_t *body,
                    const char *key, json_type want, struct cli_resp *resp, json_t **member);

/*
 * DELETE prefix + name (escaped) + the query pairs (key, value, ..., NULL;
 * a NULL value leaves its key out), and in table output prints
 * "<what> <name> <done>". Returns an exit code.
 */
int cli_delete_named(struct cli_ctx *ctx, const char *prefix, const char *name,
                     const char *const *query, const char *what, const char *done);
/* A command `CMD NAME` that deletes prefix + NAME, as cli_delete_named. */
int cli_delete_cmd(struct cli_ctx *ctx, const struct cli_cmd *cmd, int argc, char **argv,
                   const char *prefix, const char *what, const char *done);

/*
 * GETs path (which may already hold a query) following next_cursor until
 * null when all is true, collecting the array member key of every page.
 * Returns an exit code; *out is {key: [...], "next_cursor": ...} (the last
 * page's cursor) for the caller to render and json_decref.
 */
int cli_get_pages(struct cli_ctx *ctx, const char *path, const char *key, bool all,
                  json_t **out);

/* ---- emit.c: --output json|yaml ---- */

void cli_emit_json(FILE *f, const json_t *v);
void cli_emit_yaml(FILE *f, const json_t *v);
/* Writes v in ctx's json or yaml form; false in table mode (nothing written). */
bool cli_emit(const struct cli_ctx *ctx, const json_t *v);

/* ---- format.c: values in tables ---- */

#define CLI_CELL_MAX 512

/* s cut to size with control characters but '\n' replaced by '?'; returns buf. */
const char *cli_clean(const char *s, char *buf, size_t size);
/* Whether byte i of s is one of a C1 control's two bytes in UTF-8 (U+0080..
 * U+009F: U+009B is a terminal's CSI, as ESC [ is), which cli_clean and the
 * server's messages print as '?'. */
static inline bool cli_c1_in(const char *s, size_t i)
{
    const unsigned char *u = (const unsigned char *)s;
    bool lead = u[i] == 0xc2 && u[i + 1] >= 0x80 && u[i + 1] <= 0x9f;
    return lead || (i > 0 && u[i - 1] == 0xc2 && u[i] >= 0x80 && u[i] <= 0x9f);
}
/* A value as cleaned text: strings as-is, numbers in decimal, booleans
 * yes/no, a container "...", null or NULL "-". Returns buf. */
const char *cli_value(const json_t *v, char *buf, size_t size);
/* cli_value of member key. */
const char *cli_str(const json_t *obj, const char *key, char *buf, size_t size);
/* A member as an integer; def when missing or not a number. */
long long cli_int(const json_t *obj, const char *key, long long def);
/* A time (Unix seconds) relative to now: "3m ago", "in 2h"; older than a
 * day as local ISO-8601 "2026-11-29T13:04". null/missing "-". */
const char *cli_time_short(const struct cli_ctx *ctx, const json_t *t, char *buf, size_t size);
/* Local ISO-8601 with offset and the relative time:
 * "2026-11-29T13:04:05+01:00 (3m ago)". */
const char *cli_time_long(const struct cli_ctx *ctx, const json_t *t, char *buf, size_t size);
/* Local ISO-8601 with seconds, no offset: "2026-11-29T13:04:05". */
const char *cli_time_iso(const json_t *t, char *buf, size_t size);
/*
 * Parses a --from/--to value: Unix seconds, YYYY-MM-DD, YYYY-MM-DDTHH:MM[:SS]
 * (local, or with Z / +HH:MM), or a relative "-7d", "-12h", "-30m", "now".
 */
bool cli_parse_when(const char *s, time_t now, double *out);

/* ---- event_text.c: events and lists in words ---- */

/* Seconds as "45s", "12m 05s", "3h 02m", "2d 04h". */
void cli_duration(double s, char *buf, size_t size);
/* An event's detail from its typed `data` (local times, durations, tier
 * names), else its detail text as it came. Returns buf. */
const char *cli_event_text(const json_t *ev, char *buf, size_t size);
/* Names with a shared prefix and consecutive trailing numbers folded into
 * ranges: r1-n1 r1-n2 r1-n3 r2-n1 -> "r1-n[1-3],r2-n1" (zero-padding kept). */
void cli_name_ranges(const char *const *names, size_t n, struct cli_buf *b);

/* ---- table.c ---- */

struct cli_table {
    int ncols;
    const char *const *headers; /* NULL: no header line (a key/value list) */
    unsigned right;             /* bit i: column i is right-aligned */
    char **cells;               /* nrows * ncols, owned */
    size_t nrows;
    size_t cap;
    bool oom;
};

void cli_table_init(struct cli_table *t, int ncols, const char *const *headers, unsigned right);
/* Appends one row of ncols strings (copied; NULL prints "-"). */
void cli_table_row(struct cli_table *t, const char *const *cells);
/* Prints with column widths from the content, two blanks between columns
 * and no trailing blanks. Cells with newlines continue under their column. */
void cli_table_print(const struct cli_table *t, FILE *f);
void cli_table_free(struct cli_table *t);

/* A key/value list ("Name:  train") built as a two-column table. */
void cli_kv(struct cli_table *t, const char *key, const char *value);

/* Prints t (or "no <what>" to stderr when empty), frees it, returns the
 * exit code (CLI_EXIT_LOCAL when out of memory). */
int cli_table_finish(struct cli_table *t, const char *what);

/* Below t's rows, when there are several: "total" and the sum in the last
 * column, with that many decimals. */
void cli_table_total(struct cli_table *t, double total, int decimals);

/* The GPU-hours cell of a row of the usage and accounting tables: row's
 * "gpu_hours" (0 when it carries none) with that many decimals into cell,
 * and added to *total (the sum cli_table_total prints; NULL: not summed).
 * Returns cell. */
const char *cli_hours_cell(const json_t *row, double *total, int decimals, char *cell,
                           size_t n);

/* A duration of s seconds as H:MM:SS into cell; returns cell. */
const char *cli_hms_cell(long long s, char *cell, size_t n);

/*
 * A listing's table, for the commands that print one row per element of a
 * list: its columns, and how one element fills a row (row[0..ncols), with
 * c[0..ncols) as room for the cells' text).
 */
#define CLI_LIST_COLS_MAX 16
struct cli_listing {
    const char *what; /* "no <what>" when the list is empty */
    int ncols;        /* at most CLI_LIST_COLS_MAX */
    const char *const *head;
    unsigned right;   /* as cli_table_init's */
    void (*row)(const struct cli_ctx *ctx, const json_t *item, char (*c)[CLI_CELL_MAX],
                const char **row);
};
/* Appends a row to t (initialised with l's columns) per element of list. */
void cli_list_rows(const struct cli_ctx *ctx, const struct cli_listing *l, struct cli_table *t,
                   const json_t *list);
/* Prints list as l's table (cli_table_finish), then frees root; returns the exit code. */
int cli_list_print(const struct cli_ctx *ctx, const struct cli_listing *l, json_t *root,
                   const json_t *list);

/* ---- the commands (cmd_*.c) ---- */

int cli_cmd_submit(struct cli_ctx *, const struct cli_cmd *, int, char **);
/* cmd_sbatch.c: a batch script; also `submit` without -f. */
int cli_cmd_sbatch(struct cli_ctx *, const struct cli_cmd *, int, char **);
/* What a tessera flag of srun or salloc gave, which their Slurm options do
 * not replace (cli_sbatch_session). */
enum {
    CLI_SL_TENANT = 1, CLI_SL_NAME = 2, CLI_SL_TASKS = 4, CLI_SL_TIME = 8, CLI_SL_TIER = 16,
    CLI_SL_IMAGE = 32, CLI_SL_ENV = 64
};
/* Slurm's job options (sbatch's: -p, -A, -t, -N, -n, -c, --mem, -J, --gres,
 * ...) read as tessera sbatch reads them (tenant: --tenant's, or NULL), into
 * spec: its tenant, name, one task (more is a usage error), time limit,
 * tier, image, node choice and environment, but what `given` names. What
 * srun and salloc take from their command line. Errors and warnings are
 * said; the exit code. */
int cli_sbatch_session(struct cli_ctx *ctx, const struct cli_cmd *cmd, const char *const *opts,
                       int n, const char *tenant, unsigned given, json_t *spec);
int cli_cmd_srun(struct cli_ctx *, const struct cli_cmd *, int, char **);
int cli_cmd_steps(struct cli_ctx *, const struct cli_cmd *, int, char **);
bool cli_submit_is_script(int argc, char **argv);
/* cmd_jobs.c: a submission's answer (201, or 200 for a replayed key)
 * printed as the job ids one a line, or as JSON; resp is freed. The exit
 * code. */
int cli_print_submitted(struct cli_ctx *ctx, struct cli_resp *resp);
int cli_cmd_jobs(struct cli_ctx *, const struct cli_cmd *, int, char **);
int cli_cmd_show(struct cli_ctx *, const struct cli_cmd *, int, char **);
int cli_cmd_job_action(struct cli_ctx *, const struct cli_cmd *, int, char **);
int cli_cmd_update(struct cli_ctx *, const struct cli_cmd *, int, char **);
int cli_cmd_cancel(struct cli_ctx *, const struct cli_cmd *, int, char **);
int cli_cmd_explain(struct cli_ctx *, const struct cli_cmd *, int, char **);
int cli_cmd_events(struct cli_ctx *, const struct cli_cmd *, int, char **);
int cli_cmd_logs(struct cli_ctx *, const struct cli_cmd *, int, char **);
/* cmd_session.c: interactive sessions (docs/interactive.md) */
int cli_cmd_run(struct cli_ctx *, const struct cli_cmd *, int, char **);
int cli_cmd_exec(struct cli_ctx *, const struct cli_cmd *, int, char **);
int cli_cmd_attach(struct cli_ctx *, const struct cli_cmd *, int, char **);
int cli_cmd_port_forward(struct cli_ctx *, const struct cli_cmd *, int, char **);
int cli_cmd_nodes(struct cli_ctx *, const struct cli_cmd *, int, char **);
int cli_cmd_node(struct cli_ctx *, const struct cli_cmd *, int, char **);
int cli_cmd_node_action(struct cli_ctx *, const struct cli_cmd *, int, char **);
int cli_cmd_tenants(struct cli_ctx *, const struct cli_cmd *, int, char **);
int cli_cmd_quota(struct cli_ctx *, const struct cli_cmd *, int, char **);
int cli_cmd_quota_set(struct cli_ctx *, const struct cli_cmd *, int, char **);
int cli_cmd_usage(struct cli_ctx *, const struct cli_cmd *, int, char **);
/* cmd_acct.c */
int cli_cmd_acct(struct cli_ctx *, const struct cli_cmd *, int, char **);
/* cmd_shares.c */
int cli_cmd_shares(struct cli_ctx *, const struct cli_cmd *, int, char **);
int cli_cmd_prio(struct cli_ctx *, const struct cli_cmd *, int, char **);
int cli_cmd_tokens(struct cli_ctx *, const struct cli_cmd *, int, char **);
int cli_cmd_resv_list(struct cli_ctx *, const struct cli_cmd *, int, char **);
int cli_cmd_resv_create(struct cli_ctx *, const struct cli_cmd *, int, char **);
int cli_cmd_resv_delete(struct cli_ctx *, const struct cli_cmd *, int, char **);
int cli_cmd_tokens_create(struct cli_ctx *, const struct cli_cmd *, int, char **);
int cli_cmd_tokens_revoke(struct cli_ctx *, const struct cli_cmd *, int, char **);
int cli_cmd_login(struct cli_ctx *, const struct cli_cmd *, int, char **);
int cli_cmd_secrets(struct cli_ctx *, const struct cli_cmd *, int, char **);
int cli_cmd_secrets_set(struct cli_ctx *, const struct cli_cmd *, int, char **);
int cli_cmd_secrets_rm(struct cli_ctx *, const struct cli_cmd *, int, char **);
int cli_cmd_secrets_events(struct cli_ctx *, const struct cli_cmd *, int, char **);

/* The content type of a spec or tenants file: by extension, else by its
 * first non-blank byte ('{' or '[' is JSON). */
const char *cli_content_type(const char *path, const char *body, size_t len);

#endif
