/*
 * cmd_shares.c - `tessera shares` (Slurm's sshare) and `tessera prio`
 * (sprio): the fair-share and ordering numbers the scheduler uses, put
 * together from GET /v1/tenants, /v1/acct and /v1/jobs (docs/cli.md).
 */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

/* GET /v1/tenants: the "tenants" array, owned by *root. */
static int tenants_of(struct cli_ctx *ctx, json_t **root, json_t **tenants)
{
    return cli_get_member(ctx, "/v1/tenants", "tenants", JSON_ARRAY, root, tenants);
}

static const json_t *tenant_named(const json_t *tenants, const char *name)
{
    size_t i;
    const json_t *t;
    json_array_foreach(tenants, i, t) {
        const char *n = json_string_value(json_object_get(t, "name"));
        if (n && name && strcmp(n, name) == 0)
            return t;
    }
    return NULL;
}

/* A tenant's row, or under it one of its users' (USER and OF TENANT only). */
/* A number to a fixed count of decimals, "-" where there is none (null:
 * not known to this token), as the docs show them (not %g's 3.3e-05). */
static const char *fixed(const json_t *r, const char *key, int decimals, char *buf)
{
    const json_t *v = json_object_get(r, key);
    if (!json_is_number(v))
        return json_is_null(v) || !v ? "-" : cli_value(v, buf, CLI_CELL_MAX);
    snprintf(buf, CLI_CELL_MAX, "%.*f", decimals, json_number_value(v));
    return buf;
}

static void share_row(const struct cli_ctx *ctx, const json_t *r, char (*c)[CLI_CELL_MAX],
                      const char **row)
{
    (void)ctx;
    bool user = json_is_string(json_object_get(r, "user"));
    const char *cells[8] = {user ? "" : cli_str(r, "tenant", c[0], CLI_CELL_MAX),
                            user ? cli_str(r, "user", c[1], CLI_CELL_MAX) : "",
                            user ? "" : cli_str(r, "weight", c[2], CLI_CELL_MAX),
                            user ? "" : fixed(r, "share", 3, c[3]),
                            user ? "" : fixed(r, "usage_share", 3, c[4]),
                            user ? "" : cli_str(r, "order", c[5], CLI_CELL_MAX),
                            fixed(r, "gpu_hours", 2, c[6]),
                            user ? fixed(r, "fraction", 3, c[7]) : ""};
    memcpy(row, cells, sizeof cells);
}

/* A pending job's row: its members by name, in the columns' order. */
static void prio_row(const struct cli_ctx *ctx, const json_t *j, char (*c)[CLI_CELL_MAX],
                     const char **row)
{
    (void)ctx;
    static const char *const keys[] = {"id",    "tenant",    "user",  "priority",
                                       "tenant_share", "order", "las_level",
                                       "attained_gpu_hours", "position_tenant",
                                       "position_cluster"};
    for (int k = 0; k < 10; k++)
        row[k] = k == 4   ? fixed(j, keys[k], 3, c[k])
                 : k == 7 ? fixed(j, keys[k], 2, c[k])
                          : cli_str(j, keys[k], c[k], CLI_CELL_MAX);
}

int cli_cmd_shares(struct cli_ctx *ctx, const struct cli_cmd *cmd, int argc, char **argv)
{
    const char *since = NULL;
    const struct cli_opt opts[] = {{"since", 0, &since, NULL}, {NULL, 0, NULL, NULL}};
    int rc = cli_parse(ctx, cmd, argc, argv, opts, NULL, 0, 0);
    if (rc != CLI_CONTINUE)
        return rc;
    double t_from = (double)ctx->now - 7 * 86400.0;
    if ((rc = cli_when_opt(cmd, "since", since, ctx->now, &t_from)) != CLI_CONTINUE)
        return rc;
    if (t_from >= (double)ctx->now)
        return cli_usage_error(cmd, "--since: must be in the past");
    json_t *troot = NULL, *tenants, *acct = NULL, *me = NULL, *role = NULL;
    rc = tenants_of(ctx, &troot, &tenants);
    if (rc == CLI_EXIT_OK)
        rc = cli_get_member(ctx, "/v1/whoami", "role", JSON_STRING, &me, &role);
    /* which tenants' GPU-hours this token reads whole (GET /v1/acct): an
     * admin's or a cluster viewer's every tenant, a tenant viewer's its own,
     * a user's none (its own jobs only): elsewhere a total is not known */
    const char *rn = json_string_value(role);
    const char *mine = me ? json_string_value(json_object_get(me, "tenant")) : NULL;
    bool all = rn && (!strcmp(rn, "admin") || (!strcmp(rn, "viewer") && !(mine && *mine)));
    bool own = rn && !all && strcmp(rn, "user") != 0;
    char fb[32], path[96];
    snprintf(fb, sizeof fb, "%.15g", t_from);
    snprintf(path, sizeof path, "/v1/acct?limit=1000&from=%s", fb);
    if (rc == CLI_EXIT_OK)
        rc = cli_get_pages(ctx, path, "jobs", true, &acct);
    if (rc != CLI_EXIT_OK) {
        json_decref(troot);
        json_decref(acct);
        json_decref(me);
        return rc;
    }
    /* GPU-hours per tenant and per (tenant, user) in the window */
    json_t *by_tenant = json_object(), *by_user = json_object();
    size_t i;
    json_t *r;
    json_array_foreach(json_object_get(acct, "jobs"), i, r) {
        const char *tn = json_string_value(json_object_get(r, "tenant"));
        const char *us = json_string_value(json_object_get(r, "user"));
        double h = json_number_value(json_object_get(r, "gpu_hours"));
        if (!tn || !us)
            continue;
        json_t *u = json_object_get(by_user, tn);
        if (!u) {
            u = json_object();
            json_object_set_new(by_user, tn, u);
        }
        json_object_set_new(u, us, json_real(json_number_value(json_object_get(u, us)) + h));
        json_object_set_new(by_tenant, tn,
                            json_real(json_number_value(json_object_get(by_tenant, tn)) + h));
    }
    json_t *out = json_array();
    json_array_foreach(tenants, i, r) {
        const char *tn = json_string_value(json_object_get(r, "name"));
        if (!tn)
            continue;
        double th = json_number_value(json_object_get(by_tenant, tn));
        bool whole = all || (own && mine && !strcmp(mine, tn));
        json_array_append_new(out, json_pack("{s:s,s:n,s:O,s:O,s:O,s:O,s:o,s:n}", "tenant", tn,
                                             "user", "weight", json_object_get(r, "weight"),
                                             "share", json_object_get(r, "share"),
                                             "usage_share", json_object_get(r, "usage_share"),
                                             "order", json_object_get(r, "order"), "gpu_hours",
                                             whole ? json_real(th) : json_null(), "fraction"));
        const char *us;
        json_t *hv;
        json_object_foreach(json_object_get(by_user, tn), us, hv) {
            double h = json_number_value(hv);
            json_array_append_new(out, json_pack("{s:s,s:s,s:n,s:n,s:n,s:n,s:f,s:o}", "tenant",
                                                 tn, "user", us, "weight", "share",
                                                 "usage_share", "order", "gpu_hours", h,
                                                 "fraction", !whole ? json_null()
                                                             : json_real(th > 0 ? h / th : 0.0)));
        }
    }
    json_decref(by_tenant);
    json_decref(by_user);
    json_decref(acct);
    json_decref(troot);
    json_decref(me);
    json_t *doc = json_pack("{s:o,s:f}", "shares", out, "since", t_from);
    if (cli_answered(ctx, CLI_EXIT_OK, doc))
        return CLI_EXIT_OK;
    static const char *const head[] = {"TENANT", "USER",  "WEIGHT",    "SHARE",
                                       "NOW",    "ORDER", "GPU-HOURS", "OF TENANT"};
    static const struct cli_listing shares_list = {
        "tenants", 8, head, 1u << 2 | 1u << 3 | 1u << 4 | 1u << 6 | 1u << 7, share_row};
    return cli_list_print(ctx, &shares_list, doc, out);
}

int cli_cmd_prio(struct cli_ctx *ctx, const struct cli_cmd *cmd, int argc, char **argv)
{
    const char *tenant = NULL;
    const struct cli_opt opts[] = {{"tenant", 't', &tenant, NULL}, {NULL, 0, NULL, NULL}};
    int rc = cli_parse(ctx, cmd, argc, argv, opts, NULL, 0, 0);
    if (rc != CLI_CONTINUE)
        return rc;
    json_t *troot = NULL, *tenants, *jobs = NULL;
    rc = tenants_of(ctx, &troot, &tenants);
    struct cli_buf path = {0};
    cli_buf_puts(&path, "/v1/jobs?state=pending&limit=1000");
    cli_buf_query(&path, "tenant", tenant);
    if (rc == CLI_EXIT_OK)
        rc = path.oom ? CLI_EXIT_LOCAL : cli_get_pages(ctx, path.p, "jobs", true, &jobs);
    cli_buf_free(&path);
    if (rc != CLI_EXIT_OK) {
        json_decref(troot);
        json_decref(jobs);
        return rc;
    }
    json_t *out = json_array();
    size_t i;
    json_t *j;
    json_array_foreach(json_object_get(jobs, "jobs"), i, j) {
        const json_t *tn = tenant_named(tenants, json_string_value(json_object_get(j, "tenant")));
        const json_t *pos = json_object_get(j, "queue_position");
        const json_t *las = json_object_get(j, "las");
        json_array_append_new(
            out, json_pack("{s:O,s:O,s:O,s:O,s:O,s:O,s:O,s:O,s:O,s:O}", "id",
                           json_object_get(j, "id"), "tenant", json_object_get(j, "tenant"),
                           "user", json_object_get(j, "owner"), "priority",
                           json_object_get(j, "priority"), "tenant_share",
                           tn ? json_object_get(tn, "share") : json_null(), "order",
                           tn ? json_object_get(tn, "order") : json_null(), "las_level",
                           las ? json_object_get(las, "level") : json_null(),
                           "attained_gpu_hours",
                           las ? json_object_get(las, "attained_gpu_hours") : json_null(),
                           "position_tenant", pos ? json_object_get(pos, "tenant") : json_null(),
                           "position_cluster",
                           pos ? json_object_get(pos, "cluster") : json_null()));
    }
    json_decref(jobs);
    json_decref(troot);
    json_t *doc = json_pack("{s:o}", "jobs", out);
    if (cli_answered(ctx, CLI_EXIT_OK, doc))
        return CLI_EXIT_OK;
    static const char *const head[] = {"ID",    "TENANT",  "USER",   "PRIORITY", "SHARE",
                                       "ORDER", "LEVEL",   "GPU-H",  "IN TENANT", "IN CLUSTER"};
    static const struct cli_listing prio_list = {
        "pending jobs", 10, head,
        1u << 0 | 1u << 3 | 1u << 4 | 1u << 6 | 1u << 7 | 1u << 8 | 1u << 9, prio_row};
    return cli_list_print(ctx, &prio_list, doc, out);
}
