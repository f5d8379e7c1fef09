/*
 * cmd_tenants.c - tenants, quota, quota set and usage (docs/api.md
 * "Tenants, usage, tokens").
 *
 * `quota` is the view an operator asks for most: per tenant and GPU model,
 * the guarantee next to what the tenant uses now, so a tenant running on
 * borrowed GPUs (used above its guarantee) or sitting on an idle guarantee
 * stands out. A model a tenant uses without a guarantee gets a row too.
 * `quota set` sends the tenants file as-is (the server validates it with
 * the same loader as the simulator) and shows the result the same way.
 */
#include "cli/cli.h"

#include <stdlib.h>
#include <string.h>

#define TENANTS_FILE_MAX_BYTES (16L << 20)
#define PERCENT 100.0
#define SHARE_DECIMALS 3

/* "A100-80GB:32 T4:8" from a {model: n} object; "-" when empty. */
static const char *gpu_map_cell(const json_t *res, char *buf, size_t size)
{
    const char *model;
    json_t *n;
    size_t used = 0;
    buf[0] = '\0';
    json_object_foreach(json_object_get(res, "gpu"), model, n) {
        char m[CLI_CELL_MAX], v[64];
        int w = snprintf(buf + used, size - used, "%s%s:%s", used ? " " : "",
                         cli_clean(model, m, sizeof m), cli_value(n, v, sizeof v));
        if (w < 0 || (size_t)w >= size - used)
            break;
        used += (size_t)w;
    }
    if (!used)
        snprintf(buf, size, "-");
    return buf;
}

/* A share to SHARE_DECIMALS places without trailing zeros: 0.25, 0.5, 0
 * (a share of 3e-08 is no share worth reading). */
static const char *share_cell(const json_t *tenant, const char *key, char *buf, size_t size)
{
    const json_t *v = json_object_get(tenant, key);
    if (!json_is_number(v))
        return cli_value(v, buf, size);
    snprintf(buf, size, "%.*f", SHARE_DECIMALS, json_number_value(v));
    char *end = buf + strlen(buf);
    while (end > buf && end[-1] == '0')
        *--end = '\0';
    if (end > buf && end[-1] == '.')
        *--end = '\0';
    if (strcmp(buf, "-0") == 0)
        snprintf(buf, size, "0");
    return buf;
}

static void tenant_row(const struct cli_ctx *ctx, const json_t *tn, char (*c)[CLI_CELL_MAX],
                       const char **row)
{
    (void)ctx;
    const char *cells[7] = {cli_str(tn, "name", c[0], CLI_CELL_MAX),
                            cli_str(tn, "parent", c[1], CLI_CELL_MAX),
                            cli_str(tn, "weight", c[2], CLI_CELL_MAX),
                            share_cell(tn, "share", c[3], CLI_CELL_MAX),
                            share_cell(tn, "usage_share", c[4], CLI_CELL_MAX),
                            gpu_map_cell(json_object_get(tn, "guaranteed"), c[5], CLI_CELL_MAX),
                            gpu_map_cell(json_object_get(tn, "usage"), c[6], CLI_CELL_MAX)};
    memcpy(row, cells, sizeof cells);
}

int cli_cmd_tenants(struct cli_ctx *ctx, const struct cli_cmd *cmd, int argc, char **argv)
{
    /* SHARE: the decayed fair share the scheduler orders by; NOW: the share of
     * what the tenant uses at this moment (docs/cli.md "tenants") */
    static const char *const head[] = {"NAME", "PARENT", "WEIGHT", "SHARE", "NOW",
                                       "GPUS GUARANTEED", "GPUS USED"};
    static const struct cli_listing tenants_list = {"tenants", 7, head,
                                                    1u << 2 | 1u << 3 | 1u << 4, tenant_row};
    return cli_list_cmd(ctx, cmd, argc, argv, "/v1/tenants", "tenants", &tenants_list);
}

static void quota_row(struct cli_table *t, const char *tenant, const char *model,
                      const json_t *guar, const json_t *used)
{
    char c[5][CLI_CELL_MAX];
    double g = json_is_number(guar) ? json_number_value(guar) : 0;
    double u = json_is_number(used) ? json_number_value(used) : 0;
    snprintf(c[0], sizeof c[0], "%s", tenant);
    cli_clean(model, c[1], sizeof c[1]);
    snprintf(c[2], sizeof c[2], "%g", g);
    snprintf(c[3], sizeof c[3], "%g", u);
    if (g > 0)
        snprintf(c[4], sizeof c[4], "%.0f%%", u / g * PERCENT);
    else
        snprintf(c[4], sizeof c[4], "-");
    const char *row[5] = {c[0], c[1], c[2], c[3], c[4]};
    cli_table_row(t, row);
}

/* The quota table of an answer {"tenants": [...]}; consumes root. */
static int print_quota(json_t *root, const json_t *tenants)
{
    static const char *const head[] = {"TENANT", "GPU MODEL", "GUARANTEED", "USED", "USE%"};
    struct cli_table t;
    cli_table_init(&t, 5, head, 1u << 2 | 1u << 3 | 1u << 4);
    size_t i;
    json_t *tn;
    json_array_foreach(tenants, i, tn) {
        char name[CLI_CELL_MAX];
        cli_str(tn, "name", name, sizeof name);
        const json_t *g = json_object_get(json_object_get(tn, "guaranteed"), "gpu");
        const json_t *u = json_object_get(json_object_get(tn, "usage"), "gpu");
        const char *model;
        json_t *n;
        size_t rows = 0;
        json_object_foreach((json_t *)g, model, n) {
            quota_row(&t, name, model, n, json_object_get(u, model));
            rows++;
        }
        json_object_foreach((json_t *)u, model, n) {
            if (!json_object_get(g, model)) {
                quota_row(&t, name, model, NULL, n);
                rows++;
            }
        }
        if (!rows)
            quota_row(&t, name, "-", NULL, NULL);
    }
    json_decref(root);
    return cli_table_finish(&t, "tenants");
}

int cli_cmd_quota(struct cli_ctx *ctx, const struct cli_cmd *cmd, int argc, char **argv)
{
    json_t *root, *tenants;
    int rc = cli_list_fetch(ctx, cmd, argc, argv, "/v1/tenants", "tenants", &root, &tenants);
    if (rc != CLI_CONTINUE)
        return rc;
    return print_quota(root, tenants);
}

int cli_cmd_quota_set(struct cli_ctx *ctx, const struct cli_cmd *cmd, int argc, char **argv)
{
    const char *file = NULL;
    const struct cli_opt opts[] = {{"file", 'f', &file, NULL}, {NULL, 0, NULL, NULL}};
    int rc = cli_parse(ctx, cmd, argc, argv, opts, NULL, 0, 0);
    if (rc != CLI_CONTINUE)
        return rc;
    if (!file)
        return cli_usage_error(cmd, "-f TENANTS.yaml is required");
    size_t len;
    char *body = cli_read_file(file, TENANTS_FILE_MAX_BYTES, &len, &rc);
    if (!body)
        return rc;
    struct cli_req req = {.method = "PUT", .path = "/v1/tenants", .body = body, .body_len = len,
                          .content_type = cli_content_type(file, body, len)};
    struct cli_resp resp;
    rc = cli_http(ctx, &req, &resp);
    free(body);
    if (rc != CLI_EXIT_OK)
        return rc;
    json_t *tenants;
    rc = cli_expect_member(resp.json, "tenants", JSON_ARRAY, &tenants);
    if (rc != CLI_EXIT_OK || cli_emit(ctx, resp.json)) {
        cli_resp_free(&resp);
        return rc;
    }
    return print_quota(resp.json, tenants);
}

int cli_cmd_usage(struct cli_ctx *ctx, const struct cli_cmd *cmd, int argc, char **argv)
{
    const char *from = NULL, *to = NULL;
    const struct cli_opt opts[] = {
        {"from", 0, &from, NULL}, {"to", 0, &to, NULL}, {NULL, 0, NULL, NULL}};
    int rc = cli_parse(ctx, cmd, argc, argv, opts, NULL, 0, 0);
    if (rc != CLI_CONTINUE)
        return rc;
    double t_from = 0, t_to = 0;
    if ((rc = cli_when_opt(cmd, "from", from, ctx->now, &t_from)) != CLI_CONTINUE ||
        (rc = cli_when_opt(cmd, "to", to, ctx->now, &t_to)) != CLI_CONTINUE)
        return rc;
    if (from && to && t_from > t_to)
        return cli_usage_error(cmd, "--from is after --to");
    struct cli_buf path = {0};
    cli_buf_puts(&path, "/v1/usage");
    if (from)
        cli_buf_query_time(&path, "from", t_from);
    if (to)
        cli_buf_query_time(&path, "to", t_to);
    json_t *root, *usage;
    rc = cli_list_get(ctx, path.oom ? NULL : path.p, "usage", &root, &usage);
    cli_buf_free(&path);
    if (rc != CLI_CONTINUE)
        return rc;
    static const char *const head[] = {"TENANT", "TIER", "GPU MODEL", "GPU-HOURS"};
    struct cli_table t;
    cli_table_init(&t, 4, head, 1u << 3);
    double total = 0;
    size_t i;
    json_t *u;
    json_array_foreach(usage, i, u) {
        char c[4][CLI_CELL_MAX];
        const char *row[4] = {cli_str(u, "tenant", c[0], sizeof c[0]),
                              cli_str(u, "tier", c[1], sizeof c[1]),
                              cli_str(u, "gpu_model", c[2], sizeof c[2]),
                              cli_hours_cell(u, &total, 1, c[3], sizeof c[3])};
        cli_table_row(&t, row);
    }
    cli_table_total(&t, total, 1);
    json_decref(root);
    return cli_table_finish(&t, "usage in this period");
}
