/*
 * test_load_yaml.c - the cluster YAML loader, against tests/data/cluster-small.yaml
 * and data/clusters/demo.yaml and a table of broken files.
 *
 * The good files prove the mapping from text to model: range expansion with
 * and without zero padding, label merging, MIG layouts in both forms, sharing
 * modes, and GPU distances through the loaded topology (same node, same leaf,
 * across leaves, across spines, a shared NVLink domain). Each broken case marks
 * the offending line with "#<" and must fail with a message holding that
 * file:line and the key path; a failed load must leave *out NULL and leak
 * nothing (the test build runs under ASan).
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
#include "test_util.h"

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
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

static ts_cluster *load_file(const char *path, const char *fname)
{
    size_t len;
    char *buf = slurp(path, &len);
    ts_cluster *c = NULL;
    ts_err err = {0};
    int rc = ts_load_cluster_yaml(buf, len, fname, &c, &err);
    if (rc != 0)
        fail_msg("%s", err.msg);
    free(buf);
    assert_non_null(c);
    return c;
}

static ts_cluster *load_text(const char *text)
{
    ts_cluster *c = NULL;
    ts_err err = {0};
    if (ts_load_cluster_yaml(text, strlen(text), "t.yaml", &c, &err) != 0)
        fail_msg("%s", err.msg);
    return c;
}

static const ts_node *node(const ts_cluster *c, const char *name)
{
    int i = ts_cluster_find_node(c, name);
    if (i < 0)
        fail_msg("node %s not loaded", name);
    return &c->nodes[i];
}

static int gpu_distance(const ts_cluster *c, const char *a, int ga, const char *b, int gb)
{
    return ts_topo_distance(c->topo, node(c, a)->gpu[ga].topo_vertex,
                            node(c, b)->gpu[gb].topo_vertex);
}

static const char *label(const ts_node *n, const char *key)
{
    for (int i = 0; i < n->nlabels; i++)
        if (strcmp(n->labels[i].key, key) == 0)
            return n->labels[i].value;
    return NULL;
}

static void test_small_nodes(void **state)
{
    (void)state;
    ts_cluster *c = load_file(TS_TEST_DATA "/cluster-small.yaml", "cluster-small.yaml");
    static const char *const order[] = {"dgx-01", "dgx-02", "dgx-03", "dgx-04",
                                        "nvl-1",  "nvl-2",  "mig-01", "mig-02",
                                        "t4-8",   "t4-9",   "t4-10",  "cpu-01"};
    assert_int_equal(c->nnodes, 12);
    for (int i = 0; i < 12; i++)
        assert_string_equal(c->nodes[i].name, order[i]);
    assert_int_equal(c->total_gpus, 8 * 4 + 4 * 2 + 2 + 1 + 4 * 3);

    const ts_node *d = node(c, "dgx-02");
    assert_int_equal(d->model, ts_gpu_model_lookup("H100-80GB"));
    assert_int_equal(d->ngpu, 8);
    assert_int_equal(d->cpu_milli, 224000);
    assert_int_equal(d->mem_mib, 2097152);
    assert_int_equal(d->gpu[7].mode, TS_GPU_WHOLE);
    assert_string_equal(label(d, "pool"), "train");

    /* node labels go over class labels, new keys are added */
    const ts_node *d1 = node(c, "dgx-01");
    assert_int_equal(d1->nlabels, 3);
    assert_string_equal(label(d1, "pool"), "research");
    assert_string_equal(label(d1, "fabric"), "ib");
    assert_string_equal(label(d1, "rack"), "r1");

    const ts_node *m = node(c, "mig-01");
    assert_int_equal(m->gpu[1].mode, TS_GPU_MIG);
    assert_int_equal(m->gpu[1].mig.n, 4);
    const ts_node *p = node(c, "mig-02");
    assert_int_equal(p->gpu[0].mig.n, 2);
    assert_int_equal(p->gpu[0].mig.inst[0].profile_id, TS_MIG_P_4G);
    assert_int_equal(p->gpu[0].mig.inst[0].start, 0);
    assert_int_equal(p->gpu[0].mig.inst[1].profile_id, TS_MIG_P_2G);
    assert_int_equal(p->gpu[0].mig.inst[1].start, 4);

    assert_int_equal(node(c, "t4-10")->gpu[3].mode, TS_GPU_SHARED);
    assert_string_equal(label(node(c, "t4-9"), "pool"), "infer");
    const ts_node *cpu = node(c, "cpu-01");
    assert_int_equal(cpu->ngpu, 0);
    assert_int_equal(cpu->model, -1);
    ts_cluster_free(c);
}

static void test_small_topology(void **state)
{
    (void)state;
    ts_cluster *c = load_file(TS_TEST_DATA "/cluster-small.yaml", "cluster-small.yaml");
    assert_non_null(c->topo);
    assert_int_equal(ts_topo_nlevels(c->topo), 4);
    assert_string_equal(ts_topo_level_name(c->topo, 2), "nvlink");

    assert_int_equal(gpu_distance(c, "dgx-01", 0, "dgx-01", 0), 0);
    assert_int_equal(gpu_distance(c, "dgx-01", 0, "dgx-01", 7), 1);  /* same node */
    assert_int_equal(gpu_distance(c, "dgx-01", 0, "dgx-03", 5), 2);  /* same leaf */
    assert_int_equal(gpu_distance(c, "dgx-02", 1, "dgx-04", 1), 3);  /* same spine */
    assert_int_equal(gpu_distance(c, "dgx-01", 0, "nvl-1", 0), 4);   /* across spines */
    assert_int_equal(gpu_distance(c, "nvl-1", 0, "nvl-2", 3), 1);    /* shared NVLink */
    assert_int_equal(gpu_distance(c, "nvl-2", 0, "mig-01", 0), 2);
    assert_int_equal(gpu_distance(c, "t4-8", 0, "t4-10", 0), 2);

    const ts_node *d = node(c, "dgx-01");
    assert_string_equal(ts_topo_name(c->topo, d->topo_vertex), "dgx-01");
    assert_int_equal(ts_topo_depth(c->topo, d->topo_vertex), 2);
    assert_string_equal(ts_topo_name(c->topo, d->gpu[3].topo_vertex), "dgx-01/gpu3");
    assert_int_equal(ts_topo_parent(c->topo, d->gpu[3].topo_vertex), d->topo_vertex);
    int leaf = ts_topo_parent(c->topo, d->topo_vertex);
    assert_string_equal(ts_topo_name(c->topo, leaf), "l0");
    assert_string_equal(ts_topo_name(c->topo, ts_topo_parent(c->topo, leaf)), "s0");

    const ts_node *n1 = node(c, "nvl-1"), *n2 = node(c, "nvl-2");
    assert_int_equal(n1->topo_vertex, n2->topo_vertex);
    assert_string_equal(ts_topo_name(c->topo, n1->topo_vertex), "rack-7");
    /* a CPU-only node still has its place in the tree */
    assert_true(node(c, "cpu-01")->topo_vertex >= 0);

    /* 1 + 2 spines, 3 leaves, domains: 4 dgx + rack-7 + 2 mig + 3 t4 + cpu */
    int domains = 4 + 1 + 2 + 3 + 1;
    assert_int_equal(ts_topo_nvertices(c->topo), 2 + 3 + domains + (int)c->total_gpus);
    ts_cluster_free(c);
}

static void test_demo_file(void **state)
{
    (void)state;
    ts_cluster *c = load_file(TS_TEST_DATA "/../../data/clusters/demo.yaml", "demo.yaml");
    assert_int_equal(c->nnodes, 8 + 2 + 4);
    assert_int_equal(c->total_gpus, 8 * 8 + 2 * 8 + 4 * 4);
    assert_int_equal(node(c, "a100-mig-2")->gpu[7].mode, TS_GPU_MIG);
    assert_int_equal(node(c, "t4-04")->gpu[0].mode, TS_GPU_SHARED);
    assert_int_equal(gpu_distance(c, "h100-001", 0, "h100-008", 0), 3);
    ts_cluster_free(c);
}

static void test_ranges(void **state)
{
    (void)state;
    ts_cluster *c = load_text("node_classes:\n"
                              "  c: {cpu_milli: 1000, memory_mib: 1024}\n"
                              "nodes:\n"
                              "  - {names: 'r-[008-011]', class: c}\n"
                              "  - {names: 'x[1-2,05,7-8]y', class: c}\n"
                              "  - names: big-[99-100]\n"
                              "    class: c\n");
    static const char *const want[] = {"r-008", "r-009", "r-010", "r-011", "x1y",
                                       "x2y",   "x05y",  "x7y",   "x8y",   "big-99",
                                       "big-100"};
    assert_int_equal(c->nnodes, 11);
    for (int i = 0; i < 11; i++)
        assert_string_equal(c->nodes[i].name, want[i]);
    /* no topology section: no tree, no vertices */
    assert_null(c->topo);
    assert_int_equal(c->nodes[0].topo_vertex, -1);
    ts_cluster_free(c);
}

static void test_two_levels_default_domain(void **state)
{
    (void)state;
    ts_cluster *c = load_text("topology: {levels: [node, gpu]}\n"
                              "node_classes:\n"
                              "  g: {gpu_model: A10, gpus: 2, cpu_milli: 1000, memory_mib: 1024}\n"
                              "nodes:\n"
                              "  - {names: 'n[1-2]', class: g}\n"
                              "  - {name: n3, class: g, topology: {node: n1}}\n");
    assert_int_equal(gpu_distance(c, "n1", 0, "n1", 1), 1);
    assert_int_equal(gpu_distance(c, "n1", 0, "n2", 0), 2);
    assert_int_equal(gpu_distance(c, "n1", 0, "n3", 1), 1); /* explicit domain n1 */
    ts_cluster *d = ts_cluster_clone(c);
    assert_non_null(d);
    assert_int_equal(gpu_distance(d, "n1", 0, "n2", 0), 2);
    ts_cluster_free(c);
    ts_cluster_free(d);
}

/* ---- broken files --------------------------------------------------------- */

#define CLASSES                                                                    \
    "node_classes:\n"                                                              \
    "  h100: {gpu_model: H100-80GB, gpus: 8, cpu_milli: 1000, memory_mib: 1024}\n"
#define TOPO "topology: {levels: [spine, leaf, nvlink, gpu]}\n"

typedef struct bad_case {
    const char *name;
    const char *yaml;
    const char *field; /* must appear in the message */
} bad_case;

static const bad_case BAD[] = {
    {"empty", "", "empty file"},
    {"comments only", "# nothing here\n\n", "empty file"},
    {"malformed", "nodes:\n  - a: b: c  #<\n", "malformed YAML: mapping values are not allowed"},
    {"tab indent", "node_classes:\n\th100: {}  #<\n", "malformed YAML"},
    {"root is a list", "- a\n- b\n", "top level: must be a mapping"},
    {"unknown top key", "nodez: []  #<\n", "top level: unknown key \"nodez\""},
    {"no nodes", CLASSES, "nodes: required"},
    {"empty nodes", CLASSES "nodes: []  #<\n", "nodes: must list at least one node"},
    {"two documents", CLASSES "nodes: [{name: a, class: h100}]\n---\nx: 1  #<\n",
     "only one YAML document"},
    {"gpus not a number",
     "node_classes:\n  h100:\n    gpu_model: H100-80GB\n    gpus: x  #<\n"
     "    cpu_milli: 1\n    memory_mib: 1\nnodes: [{name: a, class: h100}]\n",
     "node_classes.h100.gpus: must be an integer 1..16, got \"x\""},
    {"too many gpus",
     "node_classes:\n  h:\n    gpu_model: T4\n    gpus: 17  #<\n"
     "    cpu_milli: 1\n    memory_mib: 1\nnodes: [{name: a, class: h}]\n",
     "node_classes.h.gpus: must be an integer 1..16, got \"17\""},
    {"negative cpu",
     "node_classes:\n  h:\n    cpu_milli: -5  #<\n    memory_mib: 1\nnodes: [{name: a, class: h}]\n",
     "node_classes.h.cpu_milli: must be a non-negative integer"},
    {"memory as float",
     "node_classes:\n  h:\n    cpu_milli: 5\n    memory_mib: 1.5  #<\nnodes: [{name: a, class: h}]\n",
     "node_classes.h.memory_mib: must be a non-negative integer"},
    {"memory missing",
     "node_classes:\n  h:\n    cpu_milli: 5  #<\nnodes: [{name: a, class: h}]\n",
     "node_classes.h.memory_mib: required"},
    {"typo in class key",
     "node_classes:\n  h:\n    cpu_milli: 5\n    memory_mib: 5\n    gpu_mdoe: whole  #<\n"
     "nodes: [{name: a, class: h}]\n",
     "node_classes.h: unknown key \"gpu_mdoe\""},
    {"key given twice",
     "node_classes:\n  h:\n    cpu_milli: 5\n    memory_mib: 5\n    cpu_milli: 6  #<\n"
     "nodes: [{name: a, class: h}]\n",
     "node_classes.h.cpu_milli: key given twice"},
    {"unknown gpu model",
     "node_classes:\n  h:\n    gpu_model: H100  #<\n    gpus: 8\n    cpu_milli: 5\n"
     "    memory_mib: 5\nnodes: [{name: a, class: h}]\n",
     "node_classes.h.gpu_model: unknown GPU model \"H100\""},
    {"bad gpu mode",
     "node_classes:\n  h:\n    gpu_model: T4\n    gpus: 1\n    cpu_milli: 5\n"
     "    memory_mib: 5\n    gpu_mode: exclusive  #<\nnodes: [{name: a, class: h}]\n",
     "node_classes.h.gpu_mode: must be one of whole, shared, mig"},
    {"mig on T4",
     "node_classes:\n  h:\n    gpu_model: T4\n    gpus: 1\n    cpu_milli: 5\n"
     "    memory_mib: 5\n    gpu_mode: mig  #<\nnodes: [{name: a, class: h}]\n",
     "node_classes.h.gpu_mode: T4 is not MIG capable"},
    {"layout without mig mode",
     "node_classes:\n  h:\n    gpu_model: A100-80GB\n    gpus: 1\n    cpu_milli: 5\n"
     "    memory_mib: 5\n    mig_layout: [7g.80gb]  #<\nnodes: [{name: a, class: h}]\n",
     "node_classes.h.mig_layout: only allowed with gpu_mode: mig"},
    {"impossible mig mix",
     "node_classes:\n  h:\n    gpu_model: A100-80GB\n    gpus: 1\n    cpu_milli: 5\n"
     "    memory_mib: 5\n    gpu_mode: mig\n    mig_layout: [4g.40gb, 4g.40gb]  #<\n"
     "nodes: [{name: a, class: h}]\n",
     "node_classes.h.mig_layout: no placement"},
    {"unknown mig profile",
     "node_classes:\n  h:\n    gpu_model: A100-80GB\n    gpus: 1\n    cpu_milli: 5\n"
     "    memory_mib: 5\n    gpu_mode: mig\n    mig_layout: [5g.50gb]  #<\n"
     "nodes: [{name: a, class: h}]\n",
     "node_classes.h.mig_layout[0]: "},
    {"mig start not allowed",
     "node_classes:\n  h:\n    gpu_model: A100-80GB\n    gpus: 1\n    cpu_milli: 5\n"
     "    memory_mib: 5\n    gpu_mode: mig\n    mig_layout:\n"
     "      - {profile: 3g.40gb, start: 2}  #<\nnodes: [{name: a, class: h}]\n",
     "node_classes.h.mig_layout: instance 0 (3g.40gb) at slot 2"},
    {"mig forms mixed",
     "node_classes:\n  h:\n    gpu_model: A100-80GB\n    gpus: 1\n    cpu_milli: 5\n"
     "    memory_mib: 5\n    gpu_mode: mig\n    mig_layout:\n      - 1g.10gb\n"
     "      - {profile: 3g.40gb, start: 4}  #<\nnodes: [{name: a, class: h}]\n",
     "node_classes.h.mig_layout[1]: mixes"},
    {"class not defined", CLASSES "nodes:\n  - name: a\n    class: h200  #<\n",
     "nodes[0].class: class \"h200\" is not defined"},
    {"name and names", CLASSES "nodes:\n  - {name: a, names: 'b[1-2]', class: h100}  #<\n",
     "nodes[0]: needs exactly one of name or names"},
    {"bad node name", CLASSES "nodes:\n  - {name: 'a/b', class: h100}  #<\n",
     "nodes[0].name: must be a name"},
    {"duplicate node name",
     CLASSES "nodes:\n  - {name: a-2, class: h100}\n  - {names: 'a-[1-3]', class: h100}  #<\n",
     "nodes[1]: duplicate node name \"a-2\" (first defined by nodes[0] at line 4)"},
    {"range backwards", CLASSES "nodes:\n  - {names: 'a-[3-1]', class: h100}  #<\n",
     "nodes[0].names: range 3-1 runs backwards"},
    {"range without brackets", CLASSES "nodes:\n  - {names: a-1, class: h100}  #<\n",
     "nodes[0].names: must be a name pattern"},
    {"range too big", CLASSES "nodes:\n  - {names: 'a-[1-99999]', class: h100}  #<\n",
     "nodes[0].names: expands to more than"},
    {"topology without levels", CLASSES "nodes:\n  - name: a\n    class: h100\n"
     "    topology: {spine: s0}  #<\n",
     "nodes[0].topology: no topology.levels declared"},
    {"unknown level", TOPO CLASSES "nodes:\n  - name: a\n    class: h100\n"
     "    topology: {spine: s0, leaf: l0, rack: r1}  #<\n",
     "nodes[0].topology: unknown level \"rack\""},
    {"gpu level placed", TOPO CLASSES "nodes:\n  - name: a\n    class: h100\n"
     "    topology: {spine: s0, leaf: l0, gpu: g}  #<\n",
     "nodes[0].topology: unknown level \"gpu\""},
    {"missing level", TOPO CLASSES "nodes:\n  - name: a\n    class: h100\n"
     "    topology: {spine: s0}  #<\n",
     "nodes[0].topology.leaf: required"},
    {"no placement at all", TOPO CLASSES "nodes:\n  - {name: a, class: h100}  #<\n",
     "nodes[0].topology.spine: required"},
    {"last level not gpu", "topology:\n  levels: [spine, leaf, node]  #<\n" CLASSES
     "nodes: [{name: a, class: h100}]\n",
     "topology.levels[2]: the last level, and only the last, must be \"gpu\""},
    {"one level", "topology:\n  levels: [gpu]  #<\n" CLASSES "nodes: [{name: a, class: h100}]\n",
     "topology.levels: must be a list of 2..8"},
    {"label value a list",
     CLASSES "nodes:\n  - name: a\n    class: h100\n    labels: {pool: [x]}  #<\n",
     "nodes[0].labels.pool: must be a value"},
    {"label twice",
     CLASSES "nodes:\n  - name: a\n    class: h100\n    labels: {pool: x, pool: y}  #<\n",
     "nodes[0].labels.pool: key given twice"},
    {"bandwidth zero",
     "node_classes:\n  h:\n    cpu_milli: 1\n    memory_mib: 1\n"
     "    network: {bandwidth_mbit: 0}  #<\nnodes: [{name: a, class: h}]\n",
     "node_classes.h.network.bandwidth_mbit: must be an integer 1..10000000 (Mbit/s), got \"0\""},
    {"bandwidth with a unit",
     CLASSES "nodes:\n  - name: a\n    class: h100\n    network: {bandwidth_mbit: 25G}  #<\n",
     "nodes[0].network.bandwidth_mbit: must be an integer 1..10000000 (Mbit/s), got \"25G\""},
    {"bandwidth too high",
     CLASSES "nodes:\n  - name: a\n    class: h100\n    network: {bandwidth_mbit: 10000001}  #<\n",
     "nodes[0].network.bandwidth_mbit: must be an integer 1..10000000"},
    {"network without bandwidth",
     CLASSES "nodes:\n  - name: a\n    class: h100\n    network: {}  #<\n",
     "nodes[0].network.bandwidth_mbit: required"},
    {"network unknown key",
     CLASSES "nodes:\n  - name: a\n    class: h100\n    network: {bandwidth: 100}  #<\n",
     "nodes[0].network: unknown key \"bandwidth\""},
    {"class defined twice", CLASSES "  h100: {cpu_milli: 1, memory_mib: 1}  #<\n"
     "nodes: [{name: a, class: h100}]\n",
     "node_classes.h100: defined twice (first at line 2)"},
};

/* network.bandwidth_mbit: a class's for its nodes, a node's own over it,
 * 0 (the shell's default) where neither gives one */
static void test_network_bandwidth(void **state)
{
    (void)state;
    ts_cluster *c = load_text("node_classes:\n"
                              "  h: {cpu_milli: 1, memory_mib: 1, network: {bandwidth_mbit: 25000}}\n"
                              "  t: {cpu_milli: 1, memory_mib: 1}\n"
                              "nodes:\n"
                              "  - {names: 'h[1-2]', class: h}\n"
                              "  - {name: h3, class: h, network: {bandwidth_mbit: 100}}\n"
                              "  - {name: t1, class: t}\n");
    assert_int_equal(node(c, "h1")->net_mbit, 25000);
    assert_int_equal(node(c, "h2")->net_mbit, 25000);
    assert_int_equal(node(c, "h3")->net_mbit, 100);
    assert_int_equal(node(c, "t1")->net_mbit, 0);
    ts_cluster_free(c);
}

static void test_bad_files(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
        const bad_case *b = &BAD[i];
        ts_cluster *c = (ts_cluster *)(uintptr_t)1; /* must come back NULL */
        ts_err err = {0};
        int rc = ts_load_cluster_yaml(b->yaml, strlen(b->yaml), "t.yaml", &c, &err);
        char where[32];
        snprintf(where, sizeof where, "t.yaml:%d: ", ts_test_marked_line(b->yaml));
        if (rc != TS_EINVAL || c != NULL || err.code != rc || !strstr(err.msg, where) ||
            !strstr(err.msg, b->field))
            fail_msg("case \"%s\": rc %d, message \"%s\"; wanted \"%s\" and \"%s\"", b->name,
                     rc, err.msg, where, b->field);
        /* NULL err is allowed and changes nothing else */
        c = NULL;
        assert_int_equal(ts_load_cluster_yaml(b->yaml, strlen(b->yaml), NULL, &c, NULL), rc);
        assert_null(c);
    }
}

static void test_bad_data_files(void **state)
{
    (void)state;
    static const struct {
        const char *file;
        const char *want;
    } cases[] = {
        {"empty.yaml", "empty.yaml:1: empty file"},
        {"malformed.yaml", "malformed.yaml:4: malformed YAML: mapping values are not allowed"},
        {"unknown-key.yaml", "unknown-key.yaml:7: node_classes.dgx: unknown key \"gpu_mdoe\""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/bad/%s", TS_TEST_DATA, cases[i].file);
        size_t len;
        char *buf = slurp(path, &len);
        ts_cluster *c = NULL;
        ts_err err = {0};
        assert_int_equal(ts_load_cluster_yaml(buf, len, cases[i].file, &c, &err), TS_EINVAL);
        assert_null(c);
        if (!strstr(err.msg, cases[i].want))
            fail_msg("%s: \"%s\", wanted \"%s\"", cases[i].file, err.msg, cases[i].want);
        free(buf);
    }
}

/* libyaml notices an unclosed list at the end of input (line 3); the message
 * also names the line where the list began. */
static void test_unclosed_list(void **state)
{
    (void)state;
    const char *text = "nodes: [a, b\n\n";
    ts_cluster *c = NULL;
    ts_err err = {0};
    assert_int_equal(ts_load_cluster_yaml(text, strlen(text), "t.yaml", &c, &err), TS_EINVAL);
    assert_null(c);
    assert_non_null(strstr(err.msg, "t.yaml:3: malformed YAML: "));
    assert_non_null(strstr(err.msg, "while parsing a flow sequence (started at line 1)"));
}

/* The loader reads exactly len bytes: no NUL terminator needed. */
static void test_not_nul_terminated(void **state)
{
    (void)state;
    const char text[] = CLASSES "nodes: [{name: a, class: h100}]\nGARBAGE";
    ts_cluster *c = NULL;
    assert_int_equal(ts_load_cluster_yaml(text, strlen(text) - strlen("GARBAGE"), "t.yaml", &c,
                                          NULL),
                     0);
    assert_int_equal(c->nnodes, 1);
    ts_cluster_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_small_nodes),
        cmocka_unit_test(test_small_topology),
        cmocka_unit_test(test_demo_file),
        cmocka_unit_test(test_ranges),
        cmocka_unit_test(test_two_levels_default_domain),
        cmocka_unit_test(test_network_bandwidth),
        cmocka_unit_test(test_bad_files),
        cmocka_unit_test(test_bad_data_files),
        cmocka_unit_test(test_unclosed_list),
        cmocka_unit_test(test_not_nul_terminated),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
