/*
 * cmd_nodes.c - nodes, node NAME, drain NAME and resume NAME (docs/api.md
 * "Nodes"). Resources read "free/total" in the units people think in: CPU in
 * cores (the API counts milli-cores), memory in GiB (the API counts MiB).
 * Node names go into the URL percent-encoded.
 */
#include "cli/cli.h"

#include <string.h>

#define MILLI_PER_CORE 1000.0
#define MIB_PER_GIB 1024.0

/* "free/total" with an optional unit, the numbers scaled down by per. */
static const char *free_of(const json_t *node, const char *free_key, const char *total_key,
                           double per, const char *unit, char *buf, size_t size)
{
    const json_t *f = json_object_get(node, free_key), *t = json_object_get(node, total_key);
    if (!json_is_number(f) || !json_is_number(t)) {
        snprintf(buf, size, "-");
        return buf;
    }
    snprintf(buf, size, "%.4g/%.4g%s", json_number_value(f) / per, json_number_value(t) / per,
             unit);
    return buf;
}

static const char *state_cell(const json_t *node, char *buf, size_t size)
{
    char st[CLI_CELL_MAX / 2]; /* room for ",virtual" in a cell */
    cli_str(node, "state", st, sizeof st);
    snprintf(buf, size, "%s%s", st, json_is_true(json_object_get(node, "virtual")) ? ",virtual" : "");
    return buf;
}

static void node_row(const struct cli_ctx *ctx, const json_t *n, char (*c)[CLI_CELL_MAX],
                     const char **row)
{
    (void)ctx;
    snprintf(c[6], CLI_CELL_MAX, "%zu", json_array_size(json_object_get(n, "jobs")));
    const char *cells[7] = {cli_str(n, "name", c[0], CLI_CELL_MAX),
                            state_cell(n, c[1], CLI_CELL_MAX),
                            cli_str(n, "gpu_model", c[2], CLI_CELL_MAX),
                            free_of(n, "gpus_free", "gpus", 1, "", c[3], CLI_CELL_MAX),
                            free_of(n, "cpu_free_milli", "cpu_milli", MILLI_PER_CORE, "", c[4],
                                    CLI_CELL_MAX),
                            free_of(n, "memory_free_mib", "memory_mib", MIB_PER_GIB, "Gi", c[5],
                                    CLI_CELL_MAX),
                            c[6]};
    memcpy(row, cells, sizeof cells);
}

int cli_cmd_nodes(struct cli_ctx *ctx, const struct cli_cmd *cmd, int argc, char **argv)
{
    static const char *const head[] = {"NAME", "STATE", "MODEL", "GPUS FREE",
                                       "CPU FREE", "MEM FREE", "JOBS"};
    static const struct cli_listing nodes_list = {
        "nodes", 7, head, 1u << 3 | 1u << 4 | 1u << 5 | 1u << 6, node_row};
    return cli_list_cmd(ctx, cmd, argc, argv, "/v1/nodes", "nodes", &nodes_list);
}

/* "gpu 0: 3g.40gb@0 used, 1g.10gb@4 free" a line per GPU. */
static void mig_cell(const json_t *node, struct cli_buf *b)
{
    size_t i, j;
    json_t *g, *inst;
    json_array_foreach(json_object_get(node, "mig"), i, g) {
        char gpu[32];
        cli_buf_printf(b, "%sgpu %s:", i ? "\n" : "", cli_str(g, "gpu", gpu, sizeof gpu));
        json_array_foreach(json_object_get(g, "instances"), j, inst) {
            char prof[CLI_CELL_MAX], start[32];
            const json_t *used = json_object_get(inst, "used");
            cli_buf_printf(b, "%s %s@%s %s", j ? "," : "", cli_str(inst, "profile", prof, sizeof prof),
                           cli_str(inst, "start", start, sizeof start),
                           json_is_true(used) || (json_is_integer(used) && json_integer_value(used))
                               ? "used" : "free");
        }
    }
}

static void labels_cell(const json_t *node, struct cli_buf *b)
{
    const char *k;
    json_t *v;
    bool first = true;
    json_object_foreach(json_object_get(node, "labels"), k, v) {
        char kb[CLI_CELL_MAX], vb[CLI_CELL_MAX];
        cli_buf_printf(b, "%s%s=%s", first ? "" : "\n", cli_clean(k, kb, sizeof kb),
                       cli_value(v, vb, sizeof vb));
        first = false;
    }
}

static int node_request(struct cli_ctx *ctx, const char *method, const char *name,
                        const char *suffix, json_t **root, json_t **node)
{
    struct cli_buf path = {0};
    cli_buf_puts(&path, "/v1/nodes/");
    cli_buf_escape(&path, name);
    cli_buf_puts(&path, suffix);
    if (path.oom) {
        cli_buf_free(&path);
        cli_errorf("out of memory");
        return CLI_EXIT_LOCAL;
    }
    struct cli_req req = {.method = method, .path = path.p};
    struct cli_resp resp;
    int rc = cli_http(ctx, &req, &resp);
    cli_buf_free(&path);
    if (rc == CLI_EXIT_OK) {
        rc = cli_expect_member(resp.json, "node", JSON_OBJECT, node);
        if (rc == CLI_EXIT_OK)
            *root = resp.json;
        else
            cli_resp_free(&resp);
    }
    return rc;
}

int cli_cmd_node(struct cli_ctx *ctx, const struct cli_cmd *cmd, int argc, char **argv)
{
    const char *name;
    int rc = cli_parse(ctx, cmd, argc, argv, NULL, &name, 1, 1);
    if (rc != CLI_CONTINUE)
        return rc;
    json_t *root = NULL, *n;
    rc = node_request(ctx, "GET", name, "", &root, &n);
    if (cli_answered(ctx, rc, root))
        return rc;
    char v[CLI_CELL_MAX];
    struct cli_table t;
    cli_table_init(&t, 2, NULL, 0);
    cli_kv(&t, "Name", cli_str(n, "name", v, sizeof v));
    cli_kv(&t, "State", state_cell(n, v, sizeof v));
    {
        /* health: its state, and the agent's reasons when it gave any */
        json_t *h = json_object_get(n, "health");
        const char *hs = json_string_value(json_object_get(h, "state"));
        const char *hr = json_string_value(json_object_get(h, "reasons"));
        char hv[CLI_CELL_MAX];
        snprintf(hv, sizeof hv, "%s%s%s", hs ? hs : "-", hr && *hr ? ": " : "",
                 hr && *hr ? hr : "");
        cli_kv(&t, "Health", hv);
    }
    cli_kv(&t, "GPU model", cli_str(n, "gpu_model", v, sizeof v));
    cli_kv(&t, "GPUs free", free_of(n, "gpus_free", "gpus", 1, "", v, sizeof v));
    cli_kv(&t, "CPU free",
           free_of(n, "cpu_free_milli", "cpu_milli", MILLI_PER_CORE, " cores", v, sizeof v));
    cli_kv(&t, "Memory free",
           free_of(n, "memory_free_mib", "memory_mib", MIB_PER_GIB, " GiB", v, sizeof v));
    struct cli_buf mig = {0}, jobs = {0}, labels = {0};
    mig_cell(n, &mig);
    size_t i;
    json_t *j;
    json_array_foreach(json_object_get(n, "jobs"), i, j)
        cli_buf_printf(&jobs, "%s%" JSON_INTEGER_FORMAT, i ? ", " : "", json_integer_value(j));
    labels_cell(n, &labels);
    cli_kv(&t, "MIG", mig.p ? mig.p : "-");
    cli_kv(&t, "Jobs", jobs.p ? jobs.p : "-");
    cli_kv(&t, "Labels", labels.p ? labels.p : "-");
    t.oom |= mig.oom || jobs.oom || labels.oom;
    cli_buf_free(&mig);
    cli_buf_free(&jobs);
    cli_buf_free(&labels);
    json_decref(root);
    return cli_table_finish(&t, "node");
}

int cli_cmd_node_action(struct cli_ctx *ctx, const struct cli_cmd *cmd, int argc, char **argv)
{
    const char *name;
    int rc = cli_parse(ctx, cmd, argc, argv, NULL, &name, 1, 1);
    if (rc != CLI_CONTINUE)
        return rc;
    char suffix[32];
    snprintf(suffix, sizeof suffix, "/%s", cmd->name);
    json_t *root, *n;
    rc = node_request(ctx, "POST", name, suffix, &root, &n);
    if (rc != CLI_EXIT_OK)
        return rc;
    if (!cli_emit(ctx, root)) {
        char nm[CLI_CELL_MAX], st[CLI_CELL_MAX];
        printf("node %s: %s\n", cli_str(n, "name", nm, sizeof nm), state_cell(n, st, sizeof st));
    }
    /* the admin's drain is lifted, but the node takes no work while
     * something else still drains it (its health, a missing agent): a
     * resume that leaves it drained did not do what was asked */
    const char *state = json_string_value(json_object_get(n, "state"));
    if (strcmp(cmd->name, "resume") == 0 && state && strcmp(state, "up") != 0) {
        char nm[CLI_CELL_MAX], why[CLI_CELL_MAX];
        fprintf(stderr, "tessera resume: node %s stays %s: %s\n",
                cli_str(n, "name", nm, sizeof nm), state,
                cli_str(n, "drain_reason", why, sizeof why));
        rc = CLI_EXIT_REFUSED;
    }
    json_decref(root);
    return rc;
}
