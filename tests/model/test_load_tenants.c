/*
 * test_load_tenants.c - the tenants YAML loader (docs/tenants-format.md), and
 * the example cluster and tenant files under examples/.
 *
 * The good file (the format page's own example) proves the mapping from text
 * to the tree: shape and depth, weights, quotas converted to milli-GPU per
 * model, defaults and `unlimited`, and that the quota layer accepts the result.
 * Each broken case marks the offending line with "#<" and must fail with a
 * message holding that file:line and the key path; a failed load leaves *out
 * NULL and leaks nothing (the test build runs under ASan). The examples must
 * load and hold the sizes of the trace files they come from.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tessera/load.h"
#include "tessera/tenant_load.h"
#include "test_util.h"

#define EXAMPLES TS_TEST_DATA "/../../examples"

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = '\0';
    fclose(f);
    *len = (size_t)n;
    return buf;
}

static ts_tenants *load_text(const char *text)
{
    ts_tenants *ts = NULL;
    ts_err err = {0};
    if (ts_load_tenants_yaml(text, strlen(text), "t.yaml", &ts, &err) != 0)
        fail_msg("%s", err.msg);
    assert_non_null(ts);
    return ts;
}

static int gpu_dim(const char *model)
{
    int m = ts_gpu_model_lookup(model);
    assert_true(m >= 0);
    return ts_res_gpu(m);
}

static const ts_tenant *tenant(const ts_tenants *ts, const char *name)
{
    int i = ts_tenant_find(ts, name);
    if (i < 0)
        fail_msg("tenant %s not loaded", name);
    return &ts->t[i];
}

/* docs/tenants-format.md's example */
static const char GOOD[] =
    "tenants:\n"
    "  research:                      # an organisation\n"
    "    weight: 2\n"
    "    guaranteed:\n"
    "      cpu_milli: 512000          # 512 cores\n"
    "      memory_mib: 4194304        # 4 TiB\n"
    "      gpu: {A100-80GB: 32, T4: 8}\n"
    "    lend_limit:\n"
    "      gpu: {A100-80GB: 16}\n"
    "    teams:\n"
    "      vision:\n"
    "        guaranteed:\n"
    "          gpu: {A100-80GB: 24}\n"
    "        borrow_limit:\n"
    "          gpu: {A100-80GB: 8, T4: unlimited}\n"
    "      speech:\n"
    "        weight: 0.5\n"
    "        guaranteed: {cpu_milli: 64000, gpu: {T4: 8}}\n"
    "  students:                      # all defaults\n";

static void test_good_file(void **state)
{
    (void)state;
    ts_tenants *ts = load_text(GOOD);
    int a100 = gpu_dim("A100-80GB"), t4 = gpu_dim("T4"), h100 = gpu_dim("H100-80GB");
    assert_int_equal(ts->n, 4);

    const ts_tenant *r = tenant(ts, "research");
    assert_int_equal(r->parent, -1);
    assert_int_equal(r->depth, 0);
    assert_int_equal(r->nchildren, 2);
    assert_true(r->weight == 2.0);
    assert_int_equal(r->guaranteed[TS_RES_CPU], 512000);
    assert_int_equal(r->guaranteed[TS_RES_MEM], 4194304);
    assert_int_equal(r->guaranteed[a100], 32000);
    assert_int_equal(r->guaranteed[t4], 8000);
    assert_int_equal(r->guaranteed[h100], 0);
    assert_int_equal(r->lend_limit[a100], 16000);
    assert_true(r->lend_limit[t4] == TS_QUOTA_UNLIMITED);
    assert_true(r->borrow_limit[a100] == TS_QUOTA_UNLIMITED);

    const ts_tenant *v = tenant(ts, "vision");
    assert_int_equal(v->parent, ts_tenant_find(ts, "research"));
    assert_int_equal(v->depth, 1);
    assert_true(v->weight == 1.0);
    assert_int_equal(v->guaranteed[a100], 24000);
    assert_int_equal(v->guaranteed[TS_RES_CPU], 0);
    assert_int_equal(v->borrow_limit[a100], 8000);
    assert_true(v->borrow_limit[t4] == TS_QUOTA_UNLIMITED);
    assert_true(v->borrow_limit[TS_RES_CPU] == TS_QUOTA_UNLIMITED);

    const ts_tenant *s = tenant(ts, "speech");
    assert_true(s->weight == 0.5);
    assert_int_equal(s->guaranteed[TS_RES_CPU], 64000);
    assert_int_equal(s->guaranteed[t4], 8000);

    const ts_tenant *st = tenant(ts, "students");
    assert_int_equal(st->parent, -1);
    assert_int_equal(st->nchildren, 0);
    for (int d = 0; d < TS_RES_DIMS; d++) {
        assert_int_equal(st->guaranteed[d], 0);
        assert_true(st->borrow_limit[d] == TS_QUOTA_UNLIMITED);
        assert_true(st->lend_limit[d] == TS_QUOTA_UNLIMITED);
    }

    /* the quota layer takes the loaded tree as it is */
    ts_quota *q = NULL;
    ts_err err = {0};
    assert_int_equal(ts_quota_new(ts, 3600.0, &q, &err), 0);
    ts_quota_free(q);
    ts_tenants_free(ts);
}

static void test_small_forms(void **state)
{
    (void)state;
    /* flow style, {} and aliases; unlimited in every limit dimension */
    ts_tenants *ts = load_text("tenants:\n"
                               "  a: {guaranteed: &g {gpu: {V100M32: 2}}, teams: {b: {}}}\n"
                               "  c: {guaranteed: *g, borrow_limit: {cpu_milli: unlimited,"
                               " memory_mib: 0, gpu: {V100M32: 0}}}\n");
    assert_int_equal(ts->n, 3);
    assert_int_equal(tenant(ts, "b")->parent, ts_tenant_find(ts, "a"));
    assert_int_equal(tenant(ts, "c")->guaranteed[gpu_dim("V100M32")], 2000);
    assert_true(tenant(ts, "c")->borrow_limit[TS_RES_CPU] == TS_QUOTA_UNLIMITED);
    assert_int_equal(tenant(ts, "c")->borrow_limit[TS_RES_MEM], 0);
    assert_int_equal(tenant(ts, "c")->borrow_limit[gpu_dim("V100M32")], 0);
    ts_tenants_free(ts);
}

typedef struct bad_case {
    const char *name;
    const char *yaml;
    const char *field; /* must appear in the message */
} bad_case;

static const bad_case BAD[] = {
    {"allow_root not a bool", "tenants:\n  a: {allow_root: yes}  #<\n",
     "tenants.a.allow_root: must be true or false"},
    {"mount not absolute", "tenants:\n  a:\n    mounts: [data]  #<\n",
     "tenants.a.mounts[0]: must be an absolute path"},
    {"registries not a list", "tenants:\n  a: {registries: reg.example}  #<\n",
     "tenants.a.registries: must be a list of registry hosts"},
    {"registry bad", "tenants:\n  a:\n    registries: [reg.example, ubuntu]  #<\n",
     "tenants.a.registries[1]: must be a registry host[:port]"},
    {"unix_users not a list", "tenants:\n  a: {unix_users: alice}  #<\n",
     "tenants.a.unix_users: must be a list of Unix user names"},
    {"unix user bad", "tenants:\n  a:\n    unix_users: [alice, Bob]  #<\n",
     "tenants.a.unix_users[1]: must be a Unix user name"},
    {"uid_range one", "tenants:\n  a: {uid_range: [5]}  #<\n",
     "tenants.a.uid_range: must be [lowest, highest] uid"},
    {"uid_range reversed", "tenants:\n  a: {uid_range: [9, 5]}  #<\n",
     "tenants.a.uid_range: must be a uid no lower than the first"},
    {"empty", "", "empty file"},
    {"comments only", "# nothing\n\n", "empty file"},
    {"malformed", "tenants:\n  a: b: c  #<\n", "malformed YAML"},
    {"unknown top key", "tenantz: {}  #<\n", "top level: unknown key \"tenantz\""},
    {"no tenants", "other: 1  #<\n", "top level: unknown key \"other\""},
    {"tenants missing", "{}  #<\n", "tenants: required"},
    {"tenants a list", "tenants: [a, b]  #<\n", "tenants: must be a mapping"},
    {"tenants empty", "tenants: {}  #<\n", "tenants: must name at least one tenant"},
    {"two documents", "tenants: {a: }\n---\nx: 1  #<\n", "only one YAML document"},
    {"unknown tenant key", "tenants:\n  a:\n    wieght: 2  #<\n",
     "tenants.a: unknown key \"wieght\" (did you mean \"weight\"? expected one of: weight,"},
    {"key twice", "tenants:\n  a:\n    weight: 2\n    weight: 3  #<\n",
     "tenants.a.weight: key given twice"},
    {"tenant a list", "tenants:\n  a: [1]  #<\n", "tenants.a: must be a mapping"},
    {"tenant a scalar", "tenants:\n  a: 5  #<\n", "tenants.a: must be a mapping"},
    {"bad name", "tenants:\n  a/b: {}  #<\n", "tenants: must be a tenant name"},
    {"name too long",
     "tenants:\n  a123456789a123456789a123456789a123456789a123456789a123456789abcd: {}  #<\n",
     "tenants: must be a tenant name"},
    {"duplicate name", "tenants:\n  a:\n    teams:\n      b: {}\n  b: {}  #<\n",
     "tenants.b: duplicate tenant name \"b\" (first at line 4)"},
    {"too deep",
     "tenants:\n  a:\n    teams:\n      b:\n        teams:\n          c:\n            teams:\n"
     "              d:\n                teams:\n                  e: {}  #<\n",
     "tenants.a.teams.b.teams.c.teams.d.teams.e: the tree may be at most 4 levels deep"},
    {"weight zero", "tenants:\n  a:\n    weight: 0  #<\n", "tenants.a.weight: must be > 0"},
    {"weight too big", "tenants:\n  a:\n    weight: 1e7  #<\n", "tenants.a.weight: must be > 0"},
    {"weight word", "tenants:\n  a:\n    weight: heavy  #<\n",
     "tenants.a.weight: must be a positive number, got \"heavy\""},
    {"weight nan", "tenants:\n  a:\n    weight: nan  #<\n", "tenants.a.weight: must be"},
    {"weight hex", "tenants:\n  a:\n    weight: 0x10  #<\n", "tenants.a.weight: must be"},
    {"cpu negative", "tenants:\n  a:\n    guaranteed:\n      cpu_milli: -1  #<\n",
     "tenants.a.guaranteed.cpu_milli: must be an integer 0..100000000000000, got \"-1\""},
    {"guarantee unlimited", "tenants:\n  a:\n    guaranteed:\n      cpu_milli: unlimited  #<\n",
     "tenants.a.guaranteed.cpu_milli: must be an integer"},
    {"memory fraction", "tenants:\n  a:\n    guaranteed:\n      memory_mib: 1.5  #<\n",
     "tenants.a.guaranteed.memory_mib: must be"},
    {"cpu too big", "tenants:\n  a:\n    lend_limit:\n      cpu_milli: 100000000000001  #<\n",
     "tenants.a.lend_limit.cpu_milli: must be an integer 0..100000000000000 or unlimited"},
    {"quota unknown key", "tenants:\n  a:\n    borrow_limit:\n      cpu: 5  #<\n",
     "tenants.a.borrow_limit: unknown key \"cpu\""},
    {"quota a list", "tenants:\n  a:\n    borrow_limit: [1]  #<\n",
     "tenants.a.borrow_limit: must be a mapping"},
    {"gpu unknown model", "tenants:\n  a:\n    guaranteed:\n      gpu: {A100: 1}  #<\n",
     "tenants.a.guaranteed.gpu: unknown GPU model \"A100\""},
    {"gpu not a mapping", "tenants:\n  a:\n    guaranteed:\n      gpu: 8  #<\n",
     "tenants.a.guaranteed.gpu: must be a mapping of GPU model: count"},
    {"gpu fraction", "tenants:\n  a:\n    guaranteed:\n      gpu:\n        T4: 0.5  #<\n",
     "tenants.a.guaranteed.gpu.T4: must be an integer 0..100000000000"},
    {"gpu too many", "tenants:\n  a:\n    guaranteed:\n      gpu: {T4: 100000000001}  #<\n",
     "tenants.a.guaranteed.gpu.T4: must be"},
    {"gpu model twice", "tenants:\n  a:\n    guaranteed:\n      gpu:\n        T4: 1\n"
     "        T4: 2  #<\n", "tenants.a.guaranteed.gpu.T4: key given twice (first at line 5)"},
    {"teams a list", "tenants:\n  a:\n    teams: [b]  #<\n", "tenants.a.teams: must be a mapping"},
    {"teams empty", "tenants:\n  a:\n    teams: {}  #<\n",
     "tenants.a.teams: must name at least one tenant"},
    {"team unknown key", "tenants:\n  a:\n    teams:\n      b:\n        guaranted: {}  #<\n",
     "tenants.a.teams.b: unknown key \"guaranted\""},
    {"children exceed",
     "tenants:\n  org:\n    guaranteed: {gpu: {T4: 8}}\n    teams:\n"
     "      x: {guaranteed: {gpu: {T4: 8}}}\n  other: {}\n  a:  #<\n    teams:\n"
     "      b: {guaranteed: {gpu: {T4: 16}}}\n",
     "tenants.a.guaranteed.gpu[T4]: children's guarantees (16) exceed the parent's (0)"},
    {"children exceed cpu",
     "tenants:\n  org:  #<\n    guaranteed: {cpu_milli: 1000}\n    teams:\n"
     "      x: {guaranteed: {cpu_milli: 600}}\n      y: {guaranteed: {cpu_milli: 600}}\n",
     "tenants.org.guaranteed.cpu_milli: children's guarantees (1200) exceed the parent's (1000)"},
};

/* allow_root, unix_users, uid_range: a team that does not say allow_root
 * takes its organisation's; lists and ranges are each tenant's own. */
static void test_identity(void **state)
{
    (void)state;
    ts_tenants *ts = load_text("tenants:\n"
                               "  org:\n"
                               "    allow_root: true\n"
                               "    teams:\n"
                               "      a: {unix_users: [alice, _svc-1], uid_range: [2000, 2999]}\n"
                               "      b: {allow_root: false}\n"
                               "  other: {}\n");
    const ts_tenant_identity *a = &tenant(ts, "a")->identity, *b = &tenant(ts, "b")->identity;
    assert_true(tenant(ts, "org")->identity.allow_root);
    assert_true(a->allow_root && !a->allow_root_set);
    assert_false(b->allow_root);
    assert_false(tenant(ts, "other")->identity.allow_root);
    assert_string_equal(a->unix_users, "alice,_svc-1");
    assert_true(a->has_uid_range && a->uid_min == 2000 && a->uid_max == 2999);
    assert_false(b->has_uid_range || tenant(ts, "org")->identity.unix_users[0]);
    ts_tenants_free(ts);
}

/* registries: a team that does not say takes its organisation's; a tenant
 * under none may use any registry (docs/images.md) */
static void test_registries(void **state)
{
    (void)state;
    ts_tenants *ts = load_text("tenants:\n"
                               "  org:\n"
                               "    registries: [reg.example.com, 10.0.0.5:5000]\n"
                               "    teams:\n"
                               "      a: {}\n"
                               "      b: {registries: [localhost:5000]}\n"
                               "  other: {}\n");
    const ts_tenant *a = tenant(ts, "a"), *b = tenant(ts, "b"), *o = tenant(ts, "other");
    assert_string_equal(a->registries, "reg.example.com,10.0.0.5:5000");
    assert_true(ts_tenant_registry_ok(a, "10.0.0.5:5000"));
    assert_false(ts_tenant_registry_ok(a, "10.0.0.5"));
    assert_false(ts_tenant_registry_ok(a, "localhost:5000"));
    assert_true(ts_tenant_registry_ok(b, "localhost:5000"));
    assert_false(ts_tenant_registry_ok(b, "reg.example.com"));
    assert_true(ts_tenant_registry_ok(o, "anything.example"));
    ts_tenants_free(ts);
    /* mounts: a path and what is below it, read-write only where said */
    ts = load_text("tenants:\n"
                   "  org:\n"
                   "    mounts: [/data, {path: /scratch/a, write: true}]\n"
                   "    teams:\n"
                   "      a: {}\n"
                   "  other: {}\n");
    a = tenant(ts, "a");
    assert_true(ts_tenant_mount_ok(a, "/data", false));
    assert_true(ts_tenant_mount_ok(a, "/data/x/y", false));
    assert_false(ts_tenant_mount_ok(a, "/data/x", true));
    assert_false(ts_tenant_mount_ok(a, "/database", false));
    assert_false(ts_tenant_mount_ok(a, "/data/../etc", false));
    assert_true(ts_tenant_mount_ok(a, "/scratch/a/run1", true));
    assert_false(ts_tenant_mount_ok(tenant(ts, "other"), "/data", false));
    ts_tenants_free(ts);
}

static void test_bad_files(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
        const bad_case *b = &BAD[i];
        ts_tenants *ts = (ts_tenants *)(uintptr_t)1; /* must come back NULL */
        ts_err err = {0};
        int rc = ts_load_tenants_yaml(b->yaml, strlen(b->yaml), "t.yaml", &ts, &err);
        char where[32];
        snprintf(where, sizeof where, "t.yaml:%d: ", ts_test_marked_line(b->yaml));
        if (rc != TS_EINVAL || ts != NULL || err.code != rc ||
            strncmp(err.msg, where, strlen(where)) != 0 || !strstr(err.msg, b->field))
            fail_msg("case \"%s\": rc %d, message \"%s\"; wanted \"%s\" and \"%s\"", b->name,
                     rc, err.msg, where, b->field);
        /* NULL err and NULL fname are allowed and change nothing else */
        ts = NULL;
        assert_int_equal(ts_load_tenants_yaml(b->yaml, strlen(b->yaml), NULL, &ts, NULL), rc);
        assert_null(ts);
    }
}

/* A file of several errors: one load reports each, with its line and key
 * path, in the order of their lines (the tree's own check, that research's
 * teams fit its guarantee, included: vision's quota is in error, so only
 * speech's 16 GPUs count against research's 8), and hands over nothing. */
static void test_every_error_at_once(void **state)
{
    (void)state;
    static const char YAML[] =
        "tenants:\n"
        "  research:\n"                                      /* 2 */
        "    wieght: 2\n"                                    /* 3 */
        "    guaranteed: {gpu: {H100-80GB: 8}}\n"
        "    teams:\n"
        "      vision:\n"
        "        guaranteed: {gpu: {A100: 1}}\n"             /* 7 */
        "        weight: heavy\n"                            /* 8 */
        "      speech: {guaranteed: {gpu: {H100-80GB: 16}}}\n"
        "  bad/name: {}\n"                                   /* 10 */
        "  ops:\n"
        "    order: newest\n"                                /* 12 */
        "    mounts: [relative/path, /data]\n"               /* 13 */
        "    borrow_limit: {cpu_milli: -1, memory_mib: 1.5}\n" /* 14, 14 */
        "    allow_root: maybe\n";                           /* 15 */
    static const struct {
        int line;
        const char *says;
    } WANT[] = {
        {2, "tenants.research.guaranteed.gpu[H100-80GB]: children's guarantees (16) exceed"},
        {3, "tenants.research: unknown key \"wieght\""},
        {7, "tenants.research.teams.vision.guaranteed.gpu: unknown GPU model \"A100\""},
        {8, "tenants.research.teams.vision.weight: must be a positive number, got \"heavy\""},
        {10, "tenants: must be a tenant name"},
        {12, "tenants.ops.order: must be las or fifo, got \"newest\""},
        {13, "tenants.ops.mounts[0]: must be an absolute path"},
        {14, "tenants.ops.borrow_limit.cpu_milli: must be an integer"},
        {14, "tenants.ops.borrow_limit.memory_mib: must be an integer"},
        {15, "tenants.ops.allow_root: must be true or false, got \"maybe\""},
    };
    const int nwant = (int)(sizeof WANT / sizeof WANT[0]);
    ts_errs *errs = calloc(1, sizeof *errs);
    assert_non_null(errs);
    ts_tenants *ts = (ts_tenants *)(uintptr_t)1; /* must come back NULL */
    assert_int_equal(ts_load_tenants_yaml_all(YAML, sizeof YAML - 1, "t.yaml", &ts, errs),
                     TS_EINVAL);
    assert_null(ts);
    for (int i = 0; i < errs->n; i++)
        print_message("  %s\n", errs->msg[i]);
    assert_int_equal(errs->n, nwant);
    assert_int_equal(errs->more, 0);
    for (int i = 0; i < nwant; i++) {
        char where[32];
        snprintf(where, sizeof where, "t.yaml:%d: ", WANT[i].line);
        if (errs->line[i] != WANT[i].line || strncmp(errs->msg[i], where, strlen(where)) != 0 ||
            !strstr(errs->msg[i], WANT[i].says))
            fail_msg("error %d: \"%s\"; wanted \"%s\" and \"%s\"", i, errs->msg[i], where,
                     WANT[i].says);
    }
    /* the one-message form: the first, and how many more */
    ts_err err = {0};
    assert_int_equal(ts_load_tenants_yaml(YAML, sizeof YAML - 1, "t.yaml", &ts, &err),
                     TS_EINVAL);
    assert_null(ts);
    assert_true(strncmp(err.msg, errs->msg[0], strlen(errs->msg[0])) == 0);
    assert_non_null(strstr(err.msg, "(and 9 more errors)"));
    free(errs);
}

/* Past TS_ERRS_MAX errors the rest are counted, not kept. */
static void test_errors_past_the_cap_are_counted(void **state)
{
    (void)state;
    char yaml[4096] = "tenants:\n";
    for (int i = 0; i < TS_ERRS_MAX + 5; i++)
        snprintf(yaml + strlen(yaml), sizeof yaml - strlen(yaml), "  t%d: {weight: w}\n", i);
    ts_errs *errs = calloc(1, sizeof *errs);
    assert_non_null(errs);
    ts_tenants *ts = NULL;
    assert_int_equal(ts_load_tenants_yaml_all(yaml, strlen(yaml), "t.yaml", &ts, errs),
                     TS_EINVAL);
    assert_null(ts);
    assert_int_equal(errs->n, TS_ERRS_MAX);
    assert_int_equal(errs->more, 5);
    assert_non_null(strstr(errs->msg[0], "t.yaml:2: tenants.t0.weight: must be"));
    assert_non_null(strstr(errs->msg[TS_ERRS_MAX - 1], "tenants.t19.weight"));
    free(errs);
}

static void test_bad_arguments(void **state)
{
    (void)state;
    ts_err err = {0};
    assert_int_equal(ts_load_tenants_yaml("tenants: {a: }", 14, "t.yaml", NULL, &err),
                     TS_EINVAL);
    ts_tenants *ts = (ts_tenants *)(uintptr_t)1;
    assert_int_equal(ts_load_tenants_yaml(NULL, 5, "t.yaml", &ts, &err), TS_EINVAL);
    assert_null(ts);
    assert_non_null(strstr(err.msg, "t.yaml:1: empty file"));
    /* len is honoured: the text past it is never read */
    const char *text = "tenants: {a: }\njunk: [";
    assert_int_equal(ts_load_tenants_yaml(text, 14, "t.yaml", &ts, &err), 0);
    assert_int_equal(ts->n, 1);
    ts_tenants_free(ts);
}

/* ---- examples/ ---------------------------------------------------------------- */

static const struct {
    const char *vc;
    int nodes;
} PHILLY_VCS[] = {
    {"6214e9", 64}, {"7f04ca", 32}, {"11cb48", 16}, {"b436b2", 64}, {"ee9e8c", 64}, {"e13805", 16},
    {"6c71a0", 32}, {"2869ce", 16}, {"ed69ec", 8},  {"103959", 8},  {"0e4a51", 32},
};
#define PHILLY_NVCS ((int)(sizeof PHILLY_VCS / sizeof PHILLY_VCS[0]))
#define PHILLY_GPUS_PER_NODE 8

static ts_cluster *load_cluster(const char *path)
{
    size_t len;
    char *buf = slurp(path, &len);
    ts_cluster *c = NULL;
    ts_err err = {0};
    if (ts_load_cluster_yaml(buf, len, path, &c, &err) != 0)
        fail_msg("%s", err.msg);
    free(buf);
    return c;
}

static void test_example_pollux(void **state)
{
    (void)state;
    ts_cluster *c = load_cluster(EXAMPLES "/pollux/cluster.yaml");
    assert_int_equal(c->nnodes, 16);
    int model = c->nodes[0].model;
    assert_true(model >= 0);
    for (int i = 0; i < c->nnodes; i++) {
        assert_int_equal(c->nodes[i].ngpu, 4);
        assert_int_equal(c->nodes[i].model, model);
    }
    ts_cluster_free(c);
}

static const char *label(const ts_node *n, const char *key)
{
    for (int i = 0; i < n->nlabels; i++)
        if (strcmp(n->labels[i].key, key) == 0)
            return n->labels[i].value;
    return NULL;
}

static void test_example_philly(void **state)
{
    (void)state;
    ts_cluster *c = load_cluster(EXAMPLES "/philly/cluster.yaml");
    size_t len;
    char *buf = slurp(EXAMPLES "/philly/tenants.yaml", &len);
    ts_tenants *ts = NULL;
    ts_err err = {0};
    if (ts_load_tenants_yaml(buf, len, "tenants.yaml", &ts, &err) != 0)
        fail_msg("%s", err.msg);
    free(buf);

    int nodes_total = 0;
    for (int v = 0; v < PHILLY_NVCS; v++)
        nodes_total += PHILLY_VCS[v].nodes;
    assert_int_equal(c->nnodes, nodes_total);
    int model = c->nodes[0].model;
    int dim = ts_res_gpu(model);

    /* one organisation holding every GPU, one team per VC */
    assert_int_equal(ts->n, 1 + PHILLY_NVCS);
    assert_int_equal(ts->t[0].parent, -1);
    assert_int_equal(ts->t[0].guaranteed[dim],
                     (int64_t)nodes_total * PHILLY_GPUS_PER_NODE * TS_MILLI_PER_GPU);
    for (int v = 0; v < PHILLY_NVCS; v++) {
        const ts_tenant *t = tenant(ts, PHILLY_VCS[v].vc);
        assert_int_equal(t->parent, 0);
        assert_int_equal(t->guaranteed[dim],
                         (int64_t)PHILLY_VCS[v].nodes * PHILLY_GPUS_PER_NODE * TS_MILLI_PER_GPU);
        /* the VC's nodes: labelled with it, all under its own leaf */
        char leaf[TS_NAME_MAX];
        snprintf(leaf, sizeof leaf, "vc-%s", PHILLY_VCS[v].vc);
        int count = 0;
        for (int i = 0; i < c->nnodes; i++) {
            const ts_node *n = &c->nodes[i];
            const char *vc = label(n, "vc");
            assert_non_null(vc);
            assert_int_equal(n->ngpu, PHILLY_GPUS_PER_NODE);
            assert_int_equal(n->model, model);
            const char *up = ts_topo_name(c->topo, ts_topo_parent(c->topo, n->topo_vertex));
            assert_int_equal(strcmp(vc, PHILLY_VCS[v].vc) == 0, strcmp(up, leaf) == 0);
            count += strcmp(vc, PHILLY_VCS[v].vc) == 0;
        }
        assert_int_equal(count, PHILLY_VCS[v].nodes);
    }
    ts_tenants_free(ts);
    ts_cluster_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good_file),      cmocka_unit_test(test_small_forms),
        cmocka_unit_test(test_identity),
        cmocka_unit_test(test_registries),
        cmocka_unit_test(test_bad_files),      cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_every_error_at_once),
        cmocka_unit_test(test_errors_past_the_cap_are_counted),
        cmocka_unit_test(test_example_pollux), cmocka_unit_test(test_example_philly),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
