/*
 * fuzz_http.c - libFuzzer target over tesserad's request handling: every
 * input is one request (a role byte, a method byte, the URL up to the first
 * newline, then the body) routed exactly as the HTTP server routes it, on a
 * controller with a small virtual cluster and an SQLite store on tmpfs, as
 * an admin, a tenant user or a viewer. Every 64 inputs a scheduling cycle
 * runs on whatever was submitted. Nothing a client sends may crash the
 * daemon, and every answer must be a status the API documents.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctld/ctld.h"
#include "ctld/http.h"

static ctld C;
static bool ready;

static int setup(void)
{
    char dir[] = "/dev/shm/tessera-fuzz-http.XXXXXX";
    if (!mkdtemp(dir)) {
        snprintf(dir, sizeof dir, "/tmp/tessera-fuzz-http.XXXXXX");
        if (!mkdtemp(dir))
            return -1;
    }
    char path[512];
    snprintf(path, sizeof path, "%s/cluster.yaml", dir);
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    fputs("topology:\n  levels: [leaf, node, gpu]\nnode_classes:\n"
          "  g: {gpu_model: H100-80GB, gpus: 8, cpu_milli: 64000, memory_mib: 524288}\n"
          "  m: {gpu_model: A100-80GB, gpus: 2, cpu_milli: 64000, memory_mib: 524288, "
          "gpu_mode: mig, mig_layout: [3g.40gb, 2g.20gb, 1g.10gb, 1g.10gb]}\n"
          "nodes:\n  - {names: 'n-[1-4]', class: g, topology: {leaf: l1}}\n"
          "  - {name: mig-1, class: m, topology: {leaf: l2}}\n", f);
    fclose(f);
    snprintf(path, sizeof path, "%s/tenants.yaml", dir);
    f = fopen(path, "w");
    if (!f)
        return -1;
    fputs("tenants:\n  org:\n    guaranteed: {gpu: {H100-80GB: 32}}\n    teams:\n"
          "      team-a: {guaranteed: {gpu: {H100-80GB: 16}}}\n      team-b: {}\n", f);
    fclose(f);
    snprintf(path, sizeof path, "%s/tesserad.yaml", dir);
    f = fopen(path, "w");
    if (!f)
        return -1;
    fprintf(f, "cluster: cluster.yaml\ntenants: tenants.yaml\nvirtual_nodes: all\n"
               "state_dir: %s/state\nscheduler: {priority_classes: {high: 10}}\n", dir);
    fclose(f);
    ctld_config cfg;
    ts_err err;
    if (ctld_config_load(path, &cfg, &err) != 0 || ctld_open(&C, &cfg, &err) != 0) {
        fprintf(stderr, "fuzz_http: %s\n", err.msg);
        return -1;
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const METHODS[] = {"GET", "POST", "PUT", "DELETE", "PATCH"};
    static const ctld_caller WHO[] = {
        {.name = "admin", .role = TS_ROLE_ADMIN, .tenant = ""},
        {.name = "alice", .role = TS_ROLE_USER, .tenant = "team-a", .unix_user = "alice",
         .uid = 2001},
        {.name = "tam", .role = TS_ROLE_TENANT_ADMIN, .tenant = "team-b"},
        {.name = "vera", .role = TS_ROLE_VIEWER, .tenant = ""}};
    static unsigned n;
    if (!ready) {
        if (setup() != 0)
            abort();
        ready = true;
    }
    if (size < 2)
        return 0;
    const ctld_caller *who = &WHO[data[0] % 4];
    const char *method = METHODS[data[1] % 5];
    data += 2;
    size -= 2;
    const uint8_t *nl = memchr(data, '\n', size < 512 ? size : 512);
    size_t ul = nl ? (size_t)(nl - data) : (size < 512 ? size : 512);
    char url[513];
    memcpy(url, data, ul);
    url[ul] = '\0';
    if (strlen(url) != ul)
        return 0; /* a NUL in the URL never reaches a handler */
    size_t bl = nl ? size - ul - 1 : 0;
    char *body = malloc(bl + 1);
    if (!body)
        return 0;
    if (bl)
        memcpy(body, nl + 1, bl);
    body[bl] = '\0';
    char *q = strchr(url, '?');
    ctld_query query = {0};
    if (q) {
        *q = '\0'; /* the server hands handlers the path and the parsed arguments */
        query.limit = strstr(q + 1, "limit=") ? strstr(q + 1, "limit=") + 6 : NULL;
        query.cursor = strstr(q + 1, "cursor=") ? strstr(q + 1, "cursor=") + 7 : NULL;
        query.state = strstr(q + 1, "state=") ? strstr(q + 1, "state=") + 6 : NULL;
        query.rank = strstr(q + 1, "rank=") ? strstr(q + 1, "rank=") + 5 : NULL;
        query.stream = strstr(q + 1, "stream=") ? strstr(q + 1, "stream=") + 7 : NULL;
        query.tail = strstr(q + 1, "tail=") ? strstr(q + 1, "tail=") + 5 : NULL;
    }
    ctld_request rq = {.who = who, .method = method, .url = url, .q = query,
                       .content_type = "application/json", .idem_key = NULL, .body = body,
                       .len = bl};
    ctld_reply r = {0};
    ctld_route(&C, &rq, &r);
    static const int OK[] = {200, 201, 204, 400, 403, 404, 405, 409, 413, 429, 503};
    bool known = false;
    for (size_t i = 0; i < sizeof OK / sizeof OK[0]; i++)
        known = known || r.status == OK[i];
    if (!known) {
        fprintf(stderr, "fuzz_http: status %d for %s %s\n", r.status, method, url);
        abort();
    }
    free(r.body);
    free(body);
    if (++n % 64 == 0) {
        ts_err err;
        if (ctld_cycle_once(&C, ctld_now(), &err) != 0) {
            fprintf(stderr, "fuzz_http: cycle: %s\n", err.msg);
            abort();
        }
    }
    return 0;
}
