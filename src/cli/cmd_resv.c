/*
 * cmd_resv.c - reservation list, create and delete (docs/cli.md,
 * docs/api.md "Reservations"). Times and durations go to the server as
 * written (it parses "30s", "2h", RFC 3339 and Unix seconds, and names the
 * field it refuses); --users is a comma-separated list sent as a JSON list.
 */
#include "cli/cli.h"

#include <stdlib.h>
#include <string.h>

static void resv_row(const struct cli_ctx *ctx, const json_t *r, char (*c)[CLI_CELL_MAX],
                     const char **row)
{
    char users[CLI_CELL_MAX] = "";
    size_t k, ul = 0;
    json_t *u;
    json_array_foreach(json_object_get(r, "users"), k, u) {
        const char *s = json_string_value(u);
        if (s && ul < sizeof users)
            ul += (size_t)snprintf(users + ul, sizeof users - ul, "%s%s", k ? "," : "", s);
    }
    const char *cells[7] = {
        cli_str(r, "name", c[0], CLI_CELL_MAX), cli_str(r, "nodes", c[1], CLI_CELL_MAX),
        cli_time_short(ctx, json_object_get(r, "start"), c[2], CLI_CELL_MAX),
        cli_time_short(ctx, json_object_get(r, "end"), c[3], CLI_CELL_MAX),
        json_is_true(json_object_get(r, "maintenance")) ? "(maintenance)"
                                                        : cli_str(r, "tenant", c[4],
                                                                  CLI_CELL_MAX),
        users[0] ? cli_clean(users, c[5], CLI_CELL_MAX) : "-",
        cli_str(r, "state", c[6], CLI_CELL_MAX)};
    memcpy(row, cells, sizeof cells);
}

int cli_cmd_resv_list(struct cli_ctx *ctx, const struct cli_cmd *cmd, int argc, char **argv)
{
    static const char *const head[] = {"NAME", "NODES", "START", "END", "TENANT", "USERS",
                                       "STATE"};
    static const struct cli_listing resv_list = {"reservations", 7, head, 0, resv_row};
    return cli_list_cmd(ctx, cmd, argc, argv, "/v1/reservations", "reservations", &resv_list);
}

int cli_cmd_resv_create(struct cli_ctx *ctx, const struct cli_cmd *cmd, int argc, char **argv)
{
    const char *name, *nodes = NULL, *start = NULL, *duration = NULL, *end = NULL;
    const char *tenant = NULL, *users = NULL;
    bool maint = false;
    const struct cli_opt opts[] = {{"nodes", 'w', &nodes, NULL},
                                   {"start", 0, &start, NULL},
                                   {"duration", 0, &duration, NULL},
                                   {"end", 0, &end, NULL},
                                   {"tenant", 't', &tenant, NULL},
                                   {"users", 0, &users, NULL},
                                   {"maintenance", 0, NULL, &maint},
                                   {NULL, 0, NULL, NULL}};
    int rc = cli_parse(ctx, cmd, argc, argv, opts, &name, 1, 1);
    if (rc != CLI_CONTINUE)
        return rc;
    if (!nodes || !start)
        return cli_usage_error(cmd, "--nodes and --start are required");
    if (!duration == !end)
        return cli_usage_error(cmd, "exactly one of --duration and --end is required");
    json_t *body = json_pack("{s:s, s:s, s:s, s:s*, s:s*, s:s*, s:b}", "name", name, "nodes",
                             nodes, "start", start, "duration", duration, "end", end, "tenant",
                             tenant, "maintenance", maint);
    if (body && users) {
        json_t *ul = json_array();
        for (const char *p = users; ul && *p;) {
            const char *e = strchr(p, ',');
            size_t len = e ? (size_t)(e - p) : strlen(p);
            if (len)
                json_array_append_new(ul, json_stringn(p, len));
            p = e ? e + 1 : p + len;
        }
        json_object_set_new(body, "users", ul);
    }
    struct cli_resp resp;
    json_t *r = NULL;
    rc = cli_send_member(ctx, "POST", "/v1/reservations", body, "reservation", JSON_OBJECT, &resp,
                         &r);
    if (rc == CLI_EXIT_OK && !cli_emit(ctx, resp.json)) {
        char nm[CLI_CELL_MAX], nd[CLI_CELL_MAX], st[CLI_CELL_MAX], en[CLI_CELL_MAX];
        printf("reservation %s created: %s from %s to %s\n", cli_str(r, "name", nm, sizeof nm),
               cli_str(r, "nodes", nd, sizeof nd),
               cli_time_short(ctx, json_object_get(r, "start"), st, sizeof st),
               cli_time_short(ctx, json_object_get(r, "end"), en, sizeof en));
    }
    cli_resp_free(&resp);
    return rc;
}

int cli_cmd_resv_delete(struct cli_ctx *ctx, const struct cli_cmd *cmd, int argc, char **argv)
{
    return cli_delete_cmd(ctx, cmd, argc, argv, "/v1/reservations/", "reservation", "deleted");
}
