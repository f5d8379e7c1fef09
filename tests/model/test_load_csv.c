/*
 * test_load_csv.c - the openb node and pod list loaders.
 *
 * Proves that the trace's files load as the study reads them: columns found by
 * header name in any order, CRLF and blank lines tolerated, the 5-column
 * multigpu pod files (no gpu_spec) accepted, gpu_spec's "A|B" lists turned
 * into model masks, and identical requests interned into one spec class with
 * its count. Then every way a file can be wrong: each must fail with TS_EINVAL,
 * leave *out NULL, and say "file:line: column: reason", because that message
 * is all a user of tessera-sim gets to find the bad row in a 10,000-line trace.
 * Fixtures: tests/data/openb-*-small.csv (real rows from the trace).
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

#define FIXTURE_MAX_BYTES (1 << 16)
#define NODES_HDR "sn,cpu_milli,memory_mib,gpu,model\n"
#define PODS_HDR "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\n"

static size_t slurp(const char *name, char *buf)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", TS_TEST_DATA, name);
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot open %s", path);
    size_t n = fread(buf, 1, FIXTURE_MAX_BYTES, f);
    fclose(f);
    assert_true(n > 0 && n < FIXTURE_MAX_BYTES);
    return n;
}

static ts_cluster *nodes_ok(const char *text)
{
    ts_cluster *c = NULL;
    ts_err err = {0};
    if (ts_load_nodes_csv(text, strlen(text), "t.csv", &c, &err) != 0)
        fail_msg("unexpected error: %s", err.msg);
    assert_non_null(c);
    return c;
}

static ts_workload *pods_ok(const char *text)
{
    ts_workload *w = NULL;
    ts_err err = {0};
    if (ts_load_pods_csv(text, strlen(text), "t.csv", &w, &err) != 0)
        fail_msg("unexpected error: %s", err.msg);
    assert_non_null(w);
    return w;
}

/* ---- good files ------------------------------------------------------------ */

static void test_nodes_fixture(void **state)
{
    (void)state;
    static char buf[FIXTURE_MAX_BYTES];
    size_t n = slurp("openb-nodes-small.csv", buf);
    ts_cluster *c = NULL;
    ts_err err = {0};
    assert_int_equal(ts_load_nodes_csv(buf, n, "openb-nodes-small.csv", &c, &err), 0);
    assert_int_equal(c->nnodes, 6);
    assert_int_equal(c->total_gpus, 0 + 2 + 8 + 8 + 8 + 4);
    assert_string_equal(c->nodes[0].name, "openb-node-0000");
    assert_int_equal(c->nodes[0].model, -1);
    assert_int_equal(c->nodes[0].ngpu, 0);
    assert_int_equal(c->nodes[0].cpu_milli, 32000);
    assert_int_equal(c->nodes[1].model, ts_gpu_model_lookup("P100"));
    assert_int_equal(c->nodes[4].model, ts_gpu_model_lookup("V100M32"));
    assert_int_equal(c->nodes[4].mem_mib, 786432);
    assert_int_equal(c->nodes[5].ngpu, 4);
    for (int i = 0; i < c->nnodes; i++)
        for (int g = 0; g < c->nodes[i].ngpu; g++)
            assert_int_equal(c->nodes[i].gpu[g].mode, TS_GPU_SHARED);
    assert_int_equal(c->nodes[2].milli_free, 8000);
    ts_cluster_free(c);
}

static void test_nodes_any_order_crlf_blank(void **state)
{
    (void)state;
    /* reordered and extra columns, CRLF, blank lines, no final newline */
    ts_cluster *c = nodes_ok("model,gpu,memory_mib,rack,sn,cpu_milli\r\n"
                             "\r\n"
                             "T4,2,1024,r1,n1,3000\r\n"
                             "\n"
                             ",0,512,r2,n2,1000");
    assert_int_equal(c->nnodes, 2);
    assert_string_equal(c->nodes[0].name, "n1");
    assert_int_equal(c->nodes[0].ngpu, 2);
    assert_int_equal(c->nodes[0].cpu_milli, 3000);
    assert_int_equal(c->nodes[0].mem_mib, 1024);
    assert_int_equal(c->nodes[0].model, ts_gpu_model_lookup("T4"));
    assert_string_equal(c->nodes[1].name, "n2");
    assert_int_equal(c->nodes[1].model, -1);
    assert_int_equal(c->nodes[1].mem_mib, 512);
    ts_cluster_free(c);
    /* largest accepted values; a name of exactly 63 bytes */
    char text[512];
    char name63[64];
    memset(name63, 'n', 63);
    name63[63] = '\0';
    snprintf(text, sizeof text, NODES_HDR "%s,4294967296,4294967296,16,G3\n", name63);
    c = nodes_ok(text);
    assert_int_equal(strlen(c->nodes[0].name), 63);
    assert_int_equal(c->nodes[0].cpu_milli, 4294967296LL);
    assert_int_equal(c->nodes[0].ngpu, 16);
    ts_cluster_free(c);
}

static void test_pods_fixture_and_classes(void **state)
{
    (void)state;
    static char buf[FIXTURE_MAX_BYTES];
    size_t n = slurp("openb-pods-small.csv", buf);
    ts_workload *w = NULL;
    ts_err err = {0};
    assert_int_equal(ts_load_pods_csv(buf, n, "openb-pods-small.csv", &w, &err), 0);
    assert_int_equal(w->npods, 12);
    assert_string_equal(w->pods[0].name, "openb-pod-0000");
    assert_string_equal(w->pods[11].name, "openb-pod-0011");
    /* pods 0 and 4 are identical, as are 1, 3 and 11: classes in order of
     * first appearance */
    static const uint32_t keys[12] = {0, 1, 2, 1, 0, 3, 4, 5, 6, 7, 8, 1};
    for (int i = 0; i < 12; i++)
        if (w->pods[i].spec_key != keys[i])
            fail_msg("pod %d: spec_key %u, expected %u", i, w->pods[i].spec_key, keys[i]);
    assert_int_equal(w->nspecs, 9);
    static const int counts[9] = {2, 3, 1, 1, 1, 1, 1, 1, 1};
    for (int k = 0; k < 9; k++)
        assert_int_equal(w->spec_count[k], counts[k]);
    const ts_request *r1 = &w->pods[1].req;
    assert_int_equal(r1->cpu_milli, 6000);
    assert_int_equal(r1->mem_mib, 12288);
    assert_int_equal(r1->num_gpu, 1);
    assert_int_equal(r1->gpu_milli, 460);
    assert_int_equal(r1->model_mask, 0);
    assert_int_equal(r1->mig_profile, -1);
    assert_memory_equal(&w->specs[1], r1, sizeof *r1);
    const ts_request *cpu = &w->pods[5].req;
    assert_int_equal(cpu->num_gpu, 0);
    assert_int_equal(cpu->gpu_milli, 0);
    assert_int_equal(w->pods[7].req.num_gpu, 8);
    assert_int_equal(w->pods[10].req.num_gpu, 2);
    assert_int_equal(w->pods[10].req.mem_mib, 30517);
    uint32_t v16 = 1u << ts_gpu_model_lookup("V100M16");
    uint32_t v32 = 1u << ts_gpu_model_lookup("V100M32");
    assert_int_equal(w->pods[8].req.model_mask, v16 | v32);
    uint32_t five = v16 | v32 | 1u << ts_gpu_model_lookup("G2") |
                    1u << ts_gpu_model_lookup("P100") | 1u << ts_gpu_model_lookup("T4");
    assert_int_equal(w->pods[9].req.model_mask, five);
    ts_workload_free(w);
}

static void test_pods_multigpu_5col(void **state)
{
    (void)state;
    static char buf[FIXTURE_MAX_BYTES];
    size_t n = slurp("openb-pods-multigpu-small.csv", buf);
    ts_workload *w = NULL;
    ts_err err = {0};
    assert_int_equal(ts_load_pods_csv(buf, n, "m.csv", &w, &err), 0);
    assert_int_equal(w->npods, 6);
    assert_int_equal(w->nspecs, 4);
    assert_int_equal(w->pods[2].req.num_gpu, 8);
    assert_int_equal(w->pods[2].req.gpu_milli, 1000);
    assert_int_equal(w->pods[2].spec_key, w->pods[3].spec_key);
    assert_int_equal(w->spec_count[w->pods[2].spec_key], 2);
    assert_int_equal(w->spec_count[w->pods[1].spec_key], 2);
    for (int i = 0; i < w->npods; i++)
        assert_int_equal(w->pods[i].req.model_mask, 0);
    ts_workload_free(w);
}

static void test_pods_any_order_and_mask_classes(void **state)
{
    (void)state;
    ts_workload *w = pods_ok("gpu_spec,gpu_milli,name,num_gpu,memory_mib,cpu_milli,qos\r\n"
                             ",1000,a,1,100,200,LS\r\n"
                             "T4,1000,b,1,100,200,LS\r\n"
                             "\r\n"
                             "T4|G2,1000,c,1,100,200,BE\r\n"
                             "T4,1000,d,1,100,200,BE\r\n"
                             ",0,e,0,100,200,BE");
    assert_int_equal(w->npods, 5);
    assert_string_equal(w->pods[4].name, "e");
    assert_int_equal(w->pods[0].req.cpu_milli, 200);
    assert_int_equal(w->pods[0].req.mem_mib, 100);
    /* the same sizes with different allowed models are different classes */
    assert_int_equal(w->nspecs, 4);
    assert_int_equal(w->pods[1].spec_key, 1);
    assert_int_equal(w->pods[2].spec_key, 2);
    assert_int_equal(w->pods[3].spec_key, 1);
    assert_int_equal(w->spec_count[1], 2);
    assert_int_equal(w->pods[2].req.model_mask,
                     1u << ts_gpu_model_lookup("T4") | 1u << ts_gpu_model_lookup("G2"));
    ts_workload_free(w);
}

/* ---- every error -------------------------------------------------------------- */

typedef struct bad_case {
    const char *text;
    const char *want; /* the message must start with this */
} bad_case;

static const bad_case BAD_NODES[] = {
    {"sn,cpu_milli,gpu,model\nn1,1000,0,\n", "t.csv:1: header: missing column \"memory_mib\""},
    {"sn,cpu_milli,memory_mib,gpu\nn1,1000,1,0\n", "t.csv:1: header: missing column \"model\""},
    {NODES_HDR "n1,1000,1024,0,\nn2,1000,12x,0,\n", "t.csv:3: memory_mib: not a whole number"},
    {NODES_HDR "n1,1000,1024,0,\nn2,1000,,0,\n", "t.csv:3: memory_mib: empty"},
    {NODES_HDR "n1,+1000,1024,0,\n", "t.csv:2: cpu_milli: not a whole number"},
    {NODES_HDR "n1, 1000,1024,0,\n", "t.csv:2: cpu_milli: not a whole number"},
    {NODES_HDR "n1,1.5,1024,0,\n", "t.csv:2: cpu_milli: not a whole number"},
    {NODES_HDR "n1,99999999999999999999,1024,0,\n", "t.csv:2: cpu_milli: not a whole number"},
    {NODES_HDR "n1,1000,1024,0,\nn2,-5,1024,0,\n", "t.csv:3: cpu_milli: must not be negative"},
    {NODES_HDR "n1,1000,-1,0,\n", "t.csv:2: memory_mib: must not be negative"},
    {NODES_HDR "n1,4294967297,1024,0,\n", "t.csv:2: cpu_milli: 4294967297 is larger than"},
    {NODES_HDR "n1,1000,4294967297,0,\n", "t.csv:2: memory_mib: 4294967297 is larger than"},
    {NODES_HDR "n1,1000,1024,17,T4\n", "t.csv:2: gpu: 17 is larger than 16"},
    {NODES_HDR "n1,1000,1024,-1,T4\n", "t.csv:2: gpu: must not be negative"},
    {NODES_HDR "n1,1000,1024,2,K80\n", "t.csv:2: model: unknown GPU model \"K80\""},
    {NODES_HDR "n1,1000,1024,2,t4\n", "t.csv:2: model: unknown GPU model \"t4\""},
    {NODES_HDR "n1,1000,1024,2,\n", "t.csv:2: model: required"},
    {NODES_HDR "n1,1000\n", "t.csv:2: memory_mib: missing field"},
    {NODES_HDR "n1,1000,1024,0\n", "t.csv:2: model: missing field"},
    {NODES_HDR ",1000,1024,0,\n", "t.csv:2: sn: empty node name"},
    {NODES_HDR "n1,1000,1024,0,\nn1,1000,1024,0,\n", "t.csv:3: sn: duplicate node \"n1\""},
    {NODES_HDR "n1,\"1000\",1024,0,\n", "t.csv:2: cpu_milli: quotes"},
    {"sn,\"cpu_milli\",memory_mib,gpu,model\n", "t.csv:1: column 2: quotes"},
    {"", "t.csv:1: header: empty file"},
    {"\r\n\n", "t.csv:1: header: empty file"},
    {NODES_HDR, "t.csv:1: header: no rows after the header"},
    {NODES_HDR "\n\r\n", "t.csv:1: header: no rows after the header"},
};

static const bad_case BAD_PODS[] = {
    {"name,cpu_milli,memory_mib,num_gpu\np,1,1,0\n",
     "t.csv:1: header: missing column \"gpu_milli\""},
    {"name,cpu_milli,num_gpu,gpu_milli\np,1,0,0\n",
     "t.csv:1: header: missing column \"memory_mib\""},
    {PODS_HDR "p,1,1,one,0,\n", "t.csv:2: num_gpu: not a whole number"},
    {PODS_HDR "p,1,1,0,0,\nq,1,-1,0,0,\n", "t.csv:3: memory_mib: must not be negative"},
    {PODS_HDR "p,-1,1,0,0,\n", "t.csv:2: cpu_milli: must not be negative"},
    {PODS_HDR "p,1,1,17,1000,\n", "t.csv:2: num_gpu: 17 is larger than 16"},
    {PODS_HDR "p,1,1,1,1001,\n", "t.csv:2: gpu_milli: 1001 is larger than 1000"},
    {PODS_HDR "p,1,1,2,500,\n", "t.csv:2: gpu_milli: a request for 2 GPUs must take whole"},
    {PODS_HDR "p,1,1,0,500,\n", "t.csv:2: gpu_milli: must be 0 when num_gpu is 0"},
    {PODS_HDR "p,1,1,1,0,\n", "t.csv:2: gpu_milli: must be 1..1000"},
    {PODS_HDR "p,1,1,1,1000,V100M16|K80\n", "t.csv:2: gpu_spec: unknown GPU model \"K80\""},
    {PODS_HDR "p,1,1,1,1000,V100M16||T4\n", "t.csv:2: gpu_spec: empty or over-long"},
    {PODS_HDR "p,1,1,1,1000,T4|\n", "t.csv:2: gpu_spec: empty or over-long"},
    {PODS_HDR ",1,1,0,0,\n", "t.csv:2: name: must be 1..63 characters"},
    {PODS_HDR "p,1,1\n", "t.csv:2: num_gpu: missing field"},
    {PODS_HDR "\"p\",1,1,0,0,\n", "t.csv:2: name: quotes"},
    {PODS_HDR "p,1,1,0,0,\"T4\"\n", "t.csv:2: gpu_spec: quotes"},
    {"", "t.csv:1: header: empty file"},
    {PODS_HDR, "t.csv:1: header: no rows after the header"},
};

static void check_bad(const bad_case *b, int i, bool nodes)
{
    ts_err err = {0};
    int rc;
    void *out = &err; /* must be overwritten with NULL */
    if (nodes)
        rc = ts_load_nodes_csv(b->text, strlen(b->text), "t.csv", (ts_cluster **)&out, &err);
    else
        rc = ts_load_pods_csv(b->text, strlen(b->text), "t.csv", (ts_workload **)&out, &err);
    if (rc != TS_EINVAL || out != NULL || err.code != TS_EINVAL ||
        strncmp(err.msg, b->want, strlen(b->want)) != 0)
        fail_msg("%s case %d: rc %d, out %p, message \"%s\"; expected TS_EINVAL, NULL, \"%s...\"",
                 nodes ? "nodes" : "pods", i, rc, out, err.msg, b->want);
    /* the same input with no ts_err must fail the same way */
    out = &err;
    rc = nodes ? ts_load_nodes_csv(b->text, strlen(b->text), "t.csv", (ts_cluster **)&out, NULL)
               : ts_load_pods_csv(b->text, strlen(b->text), "t.csv", (ts_workload **)&out, NULL);
    assert_int_equal(rc, TS_EINVAL);
    assert_null(out);
}

static void test_nodes_errors(void **state)
{
    (void)state;
    for (int i = 0; i < (int)(sizeof BAD_NODES / sizeof BAD_NODES[0]); i++)
        check_bad(&BAD_NODES[i], i, true);
}

static void test_pods_errors(void **state)
{
    (void)state;
    for (int i = 0; i < (int)(sizeof BAD_PODS / sizeof BAD_PODS[0]); i++)
        check_bad(&BAD_PODS[i], i, false);
}

static void test_overlong_fields(void **state)
{
    (void)state;
    /* a 64-byte name: too long for a node or a pod */
    const char *name64 = "nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn";
    assert_int_equal(strlen(name64), 64);
    char text[1024];
    snprintf(text, sizeof text, NODES_HDR "%s,1,1,0,\n", name64);
    bad_case b = {text, "t.csv:2: sn: must be 1..63 characters"};
    check_bad(&b, 100, true);
    snprintf(text, sizeof text, PODS_HDR "%s,1,1,0,0,\n", name64);
    b.want = "t.csv:2: name: must be 1..63 characters";
    check_bad(&b, 101, false);
    /* a 300-byte field is refused by the reader, naming its column */
    char big[301];
    memset(big, '7', 300);
    big[300] = '\0';
    snprintf(text, sizeof text, NODES_HDR "n1,%s,1,0,\n", big);
    b.want = "t.csv:2: cpu_milli: field longer than 255 bytes";
    check_bad(&b, 102, true);
    /* 33 columns */
    char wide[256] = NODES_HDR "n1,1,1,0,";
    for (int i = 0; i < 28; i++)
        strcat(wide, ",");
    strcat(wide, "\n");
    b.text = wide;
    b.want = "t.csv:2: more than 32 columns";
    check_bad(&b, 103, true);
    /* a NUL byte inside a field */
    static const char nul[] = NODES_HDR "n1,10\0000,1,0,\n";
    ts_cluster *c = (ts_cluster *)&b;
    ts_err err = {0};
    assert_int_equal(ts_load_nodes_csv(nul, sizeof nul - 1, "t.csv", &c, &err), TS_EINVAL);
    assert_null(c);
    assert_non_null(strstr(err.msg, "t.csv:2: cpu_milli: quotes and NUL bytes"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nodes_fixture),
        cmocka_unit_test(test_nodes_any_order_crlf_blank),
        cmocka_unit_test(test_pods_fixture_and_classes),
        cmocka_unit_test(test_pods_multigpu_5col),
        cmocka_unit_test(test_pods_any_order_and_mask_classes),
        cmocka_unit_test(test_nodes_errors),
        cmocka_unit_test(test_pods_errors),
        cmocka_unit_test(test_overlong_fields),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
