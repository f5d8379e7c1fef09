/*
 * cmd_acct.c - `tessera acct`: one accounting row per job (GET /v1/acct,
 * docs/cli.md), every page, as a table, CSV or JSON; with --steps each job's
 * steps follow it as sacct's JOB.STEP rows.
 */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "model/csv_reader.h"

static const char *const COLS[] = {"id",       "tenant",    "user",  "name",  "tier",
                                   "gpu_model", "gpus",     "state", "exit_code", "submit",
                                   "start",    "end",       "elapsed_s", "gpu_hours",
                                   "preemptions", "signal", "reason"};
#define NCOLS ((int)(sizeof COLS / sizeof COLS[0]))

/* How a job ended, as tessera jobs says it: its exit code, "sig N" where a
 * signal ended it, its reason where neither is known (timeout, cancel). */
static const char *exit_cell(const json_t *r, char *buf, size_t size)
{
    const json_t *code = json_object_get(r, "exit_code"), *sig = json_object_get(r, "signal");
    const char *why = json_string_value(json_object_get(r, "reason"));
    if (json_is_integer(sig))
        snprintf(buf, size, "sig %lld", (long long)json_integer_value(sig));
    else if (json_is_integer(code))
        snprintf(buf, size, "%lld", (long long)json_integer_value(code));
    else
        snprintf(buf, size, "%s", why && *why ? why : "-");
    return buf;
}

/* One CSV field: quoted when it holds a comma, quote or line break. */
static void csv_put(FILE *f, const json_t *v)
{
    if (json_is_null(v) || !v)
        return;
    if (json_is_integer(v)) {
        fprintf(f, "%lld", (long long)json_integer_value(v));
        return;
    }
    if (json_is_real(v)) {
        fprintf(f, "%.6f", json_real_value(v));
        return;
    }
    ts_csv_put_field(f, json_is_string(v) ? json_string_value(v) : "");
}

static void print_csv(const json_t *rows)
{
    for (int k = 0; k < NCOLS; k++)
        printf("%s%s", k ? "," : "", COLS[k]);
    printf("\r\n");
    size_t i;
    const json_t *r;
    json_array_foreach(rows, i, r) {
        for (int k = 0; k < NCOLS; k++) {
            if (k)
                putchar(',');
            csv_put(stdout, json_object_get(r, COLS[k]));
        }
        printf("\r\n");
        size_t q;
        const json_t *s;
        json_array_foreach(json_object_get(r, "steps"), q, s) { /* the job's columns, the step's */
            for (int k = 0; k < NCOLS; k++) {
                if (k)
                    putchar(',');
                const char *col = k == 0 ? "name" : COLS[k];
                bool own = k == 0 || strcmp(col, "state") == 0 || strcmp(col, "exit_code") == 0 ||
                           strcmp(col, "start") == 0 || strcmp(col, "end") == 0 ||
                           strcmp(col, "elapsed_s") == 0 || strcmp(col, "gpu_hours") == 0;
                if (strcmp(col, "preemptions") != 0)
                    csv_put(stdout, json_object_get(own ? s : r, col));
            }
            printf("\r\n");
        }
    }
}

int cli_cmd_acct(struct cli_ctx *ctx, const struct cli_cmd *cmd, int argc, char **argv)
{
    const char *user = NULL, *tenant = NULL, *state = NULL, *from = NULL, *to = NULL,
               *format = NULL;
    bool steps = false;
    const struct cli_opt opts[] = {{"user", 'u', &user, NULL},   {"tenant", 't', &tenant, NULL},
                                   {"state", 's', &state, NULL}, {"from", 0, &from, NULL},
                                   {"to", 0, &to, NULL},         {"format", 0, &format, NULL},
                                   {"steps", 0, NULL, &steps},   {NULL, 0, NULL, NULL}};
    int rc = cli_parse(ctx, cmd, argc, argv, opts, NULL, 0, 0);
    if (rc != CLI_CONTINUE)
        return rc;
    if (format && strcmp(format, "table") != 0 && strcmp(format, "csv") != 0 &&
        strcmp(format, "json") != 0)
        return cli_usage_error(cmd, "--format: must be table, csv or json, not '%s'", format);
    double t_from = 0, t_to = 0;
    if ((rc = cli_when_opt(cmd, "from", from, ctx->now, &t_from)) != CLI_CONTINUE ||
        (rc = cli_when_opt(cmd, "to", to, ctx->now, &t_to)) != CLI_CONTINUE)
        return rc;
    if (from && to && t_from >= t_to)
        return cli_usage_error(cmd, "--from: must be before --to");
    struct cli_buf path = {0};
    cli_buf_puts(&path, "/v1/acct");
    cli_buf_query(&path, "tenant", tenant);
    cli_buf_query(&path, "owner", user);
    cli_buf_query(&path, "state", state);
    if (from)
        cli_buf_query_time(&path, "from", t_from);
    if (to)
        cli_buf_query_time(&path, "to", t_to);
    cli_buf_query(&path, "limit", "1000");
    cli_buf_query(&path, "steps", steps ? "true" : NULL);
    json_t *out = NULL;
    rc = path.oom ? CLI_EXIT_LOCAL : cli_get_pages(ctx, path.p, "jobs", true, &out);
    cli_buf_free(&path);
    if (rc != CLI_EXIT_OK) {
        json_decref(out);
        return rc;
    }
    json_t *rows = json_object_get(out, "jobs");
    if (format && strcmp(format, "csv") == 0) {
        print_csv(rows);
        json_decref(out);
        return fflush(stdout) == 0 ? CLI_EXIT_OK : CLI_EXIT_LOCAL;
    }
    if (format && strcmp(format, "json") == 0) {
        cli_emit_json(stdout, out);
        json_decref(out);
        return fflush(stdout) == 0 ? CLI_EXIT_OK : CLI_EXIT_LOCAL;
    }
    if (cli_answered(ctx, CLI_EXIT_OK, out))
        return CLI_EXIT_OK;
    static const char *const head[] = {"ID",    "TENANT", "USER",    "NAME",
                                       "TIER",  "MODEL",  "GPUS",    "STATE",
                                       "EXIT",  "START",  "ELAPSED", "GPU-HOURS"};
    struct cli_table t;
    cli_table_init(&t, 12, head, 1u << 0 | 1u << 6 | 1u << 8 | 1u << 10 | 1u << 11);
    double total = 0;
    size_t i;
    json_t *r;
    json_array_foreach(rows, i, r) {
        char c[12][CLI_CELL_MAX];
        cli_hms_cell((long long)json_number_value(json_object_get(r, "elapsed_s")), c[10],
                     sizeof c[10]);
        cli_hours_cell(r, &total, 2, c[11], sizeof c[11]);
        const char *row[12] = {
            cli_str(r, "id", c[0], sizeof c[0]),        cli_str(r, "tenant", c[1], sizeof c[1]),
            cli_str(r, "user", c[2], sizeof c[2]),      cli_str(r, "name", c[3], sizeof c[3]),
            cli_str(r, "tier", c[4], sizeof c[4]),      cli_str(r, "gpu_model", c[5], sizeof c[5]),
            cli_str(r, "gpus", c[6], sizeof c[6]),      cli_str(r, "state", c[7], sizeof c[7]),
            exit_cell(r, c[8], sizeof c[8]),
            cli_time_short(ctx, json_object_get(r, "start"), c[9], sizeof c[9]), c[10], c[11]};
        cli_table_row(&t, row);
        size_t q;
        json_t *s;
        json_array_foreach(json_object_get(r, "steps"), q, s) { /* sacct's JOB.STEP rows */
            cli_hms_cell((long long)json_number_value(json_object_get(s, "elapsed_s")), c[10],
                         sizeof c[10]);
            cli_hours_cell(s, NULL, 2, c[11], sizeof c[11]);
            const char *srow[12] = {
                cli_str(s, "name", c[0], sizeof c[0]), "", "", "", "", "", "",
                cli_str(s, "state", c[7], sizeof c[7]), cli_str(s, "exit_code", c[8], sizeof c[8]),
                cli_time_short(ctx, json_object_get(s, "start"), c[9], sizeof c[9]), c[10], c[11]};
            cli_table_row(&t, srow);
        }
    }
    cli_table_total(&t, total, 2);
    json_decref(out);
    return cli_table_finish(&t, "jobs in this period");
}
