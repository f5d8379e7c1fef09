/*
 * test_cdi.c - the node's CDI spec (src/agent/cdi.c) and what a container
 * task's config.json takes from it (agent_bundle_apply_cdi).
 *
 * A hand-made node (two GPUs, the second in MIG mode with one GPU instance
 * of two compute instances) over a temporary dev root, proc root and library
 * folder. Proves: the spec has the CDI essentials (cdiVersion >= 0.6.0, kind
 * vendor/class, valid unique device names, absolute paths, numbered char
 * nodes, "K=V" env); a device per GPU and per MIG instance with the right
 * nodes (MIG capability nodes from mig-minors) and visible-devices env;
 * control nodes and driver libraries in the spec-wide edits, absent nodes
 * left out; it is written and read back; and a task allocated GPU 1 gets a
 * config.json with exactly /dev/nvidia1 among the GPUs, an allow rule per
 * node after the deny-all, the libraries bound read-only and its env.
 * Device nodes are mknod'ed when the test runs as root, else regular files
 * stand in (and the driver's fixed numbers are expected).
 */
#define _GNU_SOURCE /* mknod, S_IFCHR */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "agent/cdi.h"
#include "agent/image.h"

#define UVM_MAJOR 510u
#define CAPS_MAJOR 234u

static char root[256];

static void put(const char *rel, const char *text)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", root, rel);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void dir(const char *rel)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", root, rel);
    assert_int_equal(mkdir(p, 0755), 0);
}

static void node(const char *rel, unsigned major, unsigned minor)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", root, rel);
    if (geteuid() == 0)
        assert_int_equal(mknod(p, S_IFCHR | 0600, makedev(major, minor)), 0);
    else
        put(rel, "");
}

static ts_node_desc desc;

static int setup(void **state)
{
    (void)state;
    snprintf(root, sizeof root, "/tmp/ts-cdi-XXXXXX");
    assert_non_null(mkdtemp(root));
    dir("dev");
    dir("dev/nvidia-caps");
    dir("proc");
    dir("proc/driver");
    dir("proc/driver/nvidia-caps");
    dir("lib");
    node("dev/nvidia0", 195, 0);
    node("dev/nvidia1", 195, 1);
    node("dev/nvidiactl", 195, 255);
    node("dev/nvidia-uvm", UVM_MAJOR, 0); /* no nvidia-uvm-tools: left out */
    node("dev/nvidia-caps/nvidia-cap21", CAPS_MAJOR, 21);
    node("dev/nvidia-caps/nvidia-cap22", CAPS_MAJOR, 22);
    put("proc/driver/nvidia-caps/mig-minors",
        "config 1\nmonitor 2\ngpu1/gi3/access 21\ngpu1/gi3/ci0/access 22\n"
        "gpu1/gi3/ci1/access 23\n");
    put("lib/libcuda.so.550.54.15", "x");
    put("lib/libnvidia-ml.so.550.54.15", "x");
    put("lib/libnvidia-other.so.1", "x");
    memset(&desc, 0, sizeof desc);
    desc.ngpus = 2;
    for (unsigned i = 0; i < 2; i++) {
        desc.gpu[i].index = i;
        snprintf(desc.gpu[i].uuid, sizeof desc.gpu[i].uuid, "GPU-0000000%u", i);
    }
    ts_gpu_desc *g = &desc.gpu[1];
    g->mig_capable = g->mig_enabled = true;
    g->ngi = 1;
    g->gi[0].id = 3;
    g->gi[0].nci = 2;
    g->gi[0].ci[0].id = 0;
    g->gi[0].ci[1].id = 1;
    snprintf(g->gi[0].ci[0].uuid, sizeof g->gi[0].ci[0].uuid, "MIG-aaaa");
    snprintf(g->gi[0].ci[1].uuid, sizeof g->gi[0].ci[1].uuid, "MIG-bbbb");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    return system(cmd) == 0 ? 0 : -1;
}

static json_t *make_spec(void)
{
    char dev[300], proc[300], lib[300];
    snprintf(dev, sizeof dev, "%s", root);
    snprintf(proc, sizeof proc, "%s/proc", root);
    snprintf(lib, sizeof lib, "%s/lib", root);
    const char *const libs[] = {lib, NULL};
    agent_cdi_opts o = {.dev_root = dev, .proc_root = proc, .lib_dirs = libs};
    json_t *spec = NULL;
    ts_err err;
    assert_int_equal(agent_cdi_spec(&desc, &o, &spec, &err), 0);
    return spec;
}

static bool matches(const char *re, const char *s)
{
    regex_t r;
    assert_int_equal(regcomp(&r, re, REG_EXTENDED | REG_NOSUB), 0);
    bool ok = s && regexec(&r, s, 0, NULL, 0) == 0;
    regfree(&r);
    return ok;
}

/* The schema's essentials for one containerEdits object. */
static void check_edits(const json_t *e)
{
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(e, "deviceNodes"), i, v) {
        assert_true(matches("^/", json_string_value(json_object_get(v, "path"))));
        assert_string_equal(json_string_value(json_object_get(v, "type")), "c");
        assert_true(json_is_integer(json_object_get(v, "major")));
        assert_true(json_is_integer(json_object_get(v, "minor")));
        assert_true(matches("^[rwm]+$", json_string_value(json_object_get(v, "permissions"))));
    }
    json_array_foreach(json_object_get(e, "mounts"), i, v) {
        assert_true(matches("^/", json_string_value(json_object_get(v, "hostPath"))));
        assert_true(matches("^/", json_string_value(json_object_get(v, "containerPath"))));
    }
    json_array_foreach(json_object_get(e, "env"), i, v)
        assert_true(matches("^[A-Za-z_][A-Za-z0-9_]*=", json_string_value(v)));
}

static void test_spec_has_the_cdi_essentials(void **state)
{
    (void)state;
    json_t *spec = make_spec();
    const char *ver = json_string_value(json_object_get(spec, "cdiVersion"));
    unsigned maj, min, patch;
    assert_int_equal(sscanf(ver, "%u.%u.%u", &maj, &min, &patch), 3);
    assert_true(maj > 0 || min >= 6);
    assert_true(matches("^[a-z0-9]([a-z0-9.-]*[a-z0-9])?/[a-zA-Z0-9]([a-zA-Z0-9_.-]*[a-zA-Z0-9])?$",
                        json_string_value(json_object_get(spec, "kind"))));
    json_t *devs = json_object_get(spec, "devices");
    assert_int_equal(json_array_size(devs), 3); /* GPU 0, GPU 1, GPU 1's instance 3 */
    size_t i;
    json_t *d;
    json_array_foreach(devs, i, d) {
        const char *name = json_string_value(json_object_get(d, "name"));
        assert_true(matches("^[a-zA-Z0-9][a-zA-Z0-9_.:-]*$", name));
        for (size_t k = 0; k < i; k++)
            assert_string_not_equal(
                json_string_value(json_object_get(json_array_get(devs, k), "name")), name);
        check_edits(json_object_get(d, "containerEdits"));
    }
    check_edits(json_object_get(spec, "containerEdits"));
    json_decref(spec);
}

static const json_t *device(const json_t *spec, const char *name)
{
    size_t i;
    json_t *d;
    json_array_foreach(json_object_get(spec, "devices"), i, d)
        if (strcmp(json_string_value(json_object_get(d, "name")), name) == 0)
            return json_object_get(d, "containerEdits");
    fail_msg("no device %s", name);
    return NULL;
}

static const char *nth_path(const json_t *e, size_t i)
{
    return json_string_value(
        json_object_get(json_array_get(json_object_get(e, "deviceNodes"), i), "path"));
}

static void test_a_device_per_gpu_and_mig_instance(void **state)
{
    (void)state;
    json_t *spec = make_spec();
    const json_t *g0 = device(spec, "0"), *mig = device(spec, "1:3");
    assert_int_equal(json_array_size(json_object_get(g0, "deviceNodes")), 1);
    assert_string_equal(nth_path(g0, 0), "/dev/nvidia0");
    assert_string_equal(json_string_value(json_array_get(json_object_get(g0, "env"), 0)),
                        "NVIDIA_VISIBLE_DEVICES=GPU-00000000");
    assert_string_equal(json_string_value(json_array_get(json_object_get(g0, "env"), 1)),
                        "CUDA_VISIBLE_DEVICES=GPU-00000000");
    /* the parent's node, the GI's and CI 0's capability; CI 1's node is absent */
    assert_int_equal(json_array_size(json_object_get(mig, "deviceNodes")), 3);
    assert_string_equal(nth_path(mig, 0), "/dev/nvidia1");
    assert_string_equal(nth_path(mig, 1), "/dev/nvidia-caps/nvidia-cap21");
    assert_string_equal(nth_path(mig, 2), "/dev/nvidia-caps/nvidia-cap22");
    assert_string_equal(json_string_value(json_array_get(json_object_get(mig, "env"), 1)),
                        "CUDA_VISIBLE_DEVICES=MIG-aaaa");
    const json_t *common = json_object_get(spec, "containerEdits");
    assert_int_equal(json_array_size(json_object_get(common, "deviceNodes")), 2);
    assert_string_equal(nth_path(common, 0), "/dev/nvidiactl");
    assert_string_equal(nth_path(common, 1), "/dev/nvidia-uvm");
    const json_t *uvm = json_array_get(json_object_get(common, "deviceNodes"), 1);
    char host[400];
    snprintf(host, sizeof host, "%s/dev/nvidia-uvm", root);
    assert_string_equal(json_string_value(json_object_get(uvm, "hostPath")), host);
    if (geteuid() == 0)
        assert_int_equal(json_integer_value(json_object_get(uvm, "major")), UVM_MAJOR);
    json_t *mounts = json_object_get(common, "mounts");
    assert_int_equal(json_array_size(mounts), 2); /* libcuda, libnvidia-ml; not -other */
    assert_true(matches("/lib/libcuda\\.so\\.550\\.54\\.15$",
                        json_string_value(json_object_get(json_array_get(mounts, 0),
                                                          "containerPath"))));
    assert_true(matches("/lib/libnvidia-ml\\.so\\.550\\.54\\.15$",
                        json_string_value(json_object_get(json_array_get(mounts, 1),
                                                          "hostPath"))));
    json_decref(spec);
}

static void test_spec_is_written_and_reads_back(void **state)
{
    (void)state;
    json_t *spec = make_spec();
    char path[400];
    snprintf(path, sizeof path, "%s/state/cdi/tessera.json", root);
    char st[400];
    snprintf(st, sizeof st, "%s/state", root);
    mkdir(st, 0755);
    ts_err err;
    assert_int_equal(agent_cdi_write(spec, path, &err), 0);
    json_t *back = json_load_file(path, 0, NULL);
    assert_non_null(back);
    assert_true(json_equal(spec, back));
    json_decref(back);
    json_decref(spec);
}

static json_t *base_config(void)
{
    return json_pack("{s:{s:[s]}, s:[], s:{s:{s:[{s:b, s:s}]}}}", "process", "env",
                     "CUDA_VISIBLE_DEVICES=0,1", "mounts", "linux", "resources", "devices",
                     "allow", 0, "access", "rwm");
}

static void test_config_gets_exactly_its_allocation(void **state)
{
    (void)state;
    json_t *spec = make_spec(), *edits = NULL;
    ts_err err;
    const char *const mine[] = {"1"};
    assert_int_equal(agent_cdi_edits(spec, mine, 1, &edits, &err), 0);
    json_t *cfg = base_config();
    assert_int_equal(agent_bundle_apply_cdi(cfg, edits, &err), 0);
    json_t *linux = json_object_get(cfg, "linux");
    json_t *devs = json_object_get(linux, "devices");
    json_t *allow = json_object_get(json_object_get(linux, "resources"), "devices");
    assert_int_equal(json_array_size(devs), 3); /* nvidiactl, nvidia-uvm, nvidia1 */
    assert_int_equal(json_array_size(allow), 1 + 3);
    assert_false(json_is_true(json_object_get(json_array_get(allow, 0), "allow")));
    size_t i;
    json_t *d;
    json_array_foreach(devs, i, d) {
        const char *p = json_string_value(json_object_get(d, "path"));
        assert_string_not_equal(p, "/dev/nvidia0");
        json_t *a = json_array_get(allow, i + 1);
        assert_true(json_is_true(json_object_get(a, "allow")));
        assert_true(json_equal(json_object_get(a, "major"), json_object_get(d, "major")));
        assert_true(json_equal(json_object_get(a, "minor"), json_object_get(d, "minor")));
    }
    assert_string_equal(json_string_value(json_object_get(json_array_get(devs, 2), "path")),
                        "/dev/nvidia1");
    assert_int_equal(json_integer_value(json_object_get(json_array_get(allow, 3), "minor")), 1);
    json_t *mounts = json_object_get(cfg, "mounts");
    assert_int_equal(json_array_size(mounts), 2);
    json_array_foreach(mounts, i, d) {
        bool ro = false;
        size_t k;
        json_t *opt;
        json_array_foreach(json_object_get(d, "options"), k, opt)
            ro |= strcmp(json_string_value(opt), "ro") == 0;
        assert_true(ro);
    }
    json_t *env = json_object_get(json_object_get(cfg, "process"), "env");
    assert_int_equal(json_array_size(env), 2); /* replaced, not appended */
    assert_string_equal(json_string_value(json_array_get(env, 0)), "CUDA_VISIBLE_DEVICES=GPU-00000001");
    json_decref(cfg);
    json_decref(edits);
    json_decref(spec);
}

static void test_two_devices_join_env_and_share_nodes(void **state)
{
    (void)state;
    json_t *spec = make_spec(), *edits = NULL;
    ts_err err;
    const char *const two[] = {"0", "1:3"};
    assert_int_equal(agent_cdi_edits(spec, two, 2, &edits, &err), 0);
    json_t *env = json_object_get(edits, "env");
    assert_string_equal(json_string_value(json_array_get(env, 0)),
                        "NVIDIA_VISIBLE_DEVICES=GPU-00000000,MIG-aaaa");
    assert_int_equal(json_array_size(json_object_get(edits, "deviceNodes")), 2 + 1 + 3);
    json_decref(edits);
    const char *const bad[] = {"7"};
    assert_int_equal(agent_cdi_edits(spec, bad, 1, &edits, &err), TS_ENOENT);
    assert_non_null(strstr(err.msg, "\"7\""));
    json_t *cfg = base_config();
    json_t *broken = json_pack("{s:[{s:s}]}", "deviceNodes", "path", "/dev/nvidia0");
    assert_int_equal(agent_bundle_apply_cdi(cfg, broken, &err), TS_EINVAL);
    assert_non_null(strstr(err.msg, "deviceNodes[0]"));
    json_decref(broken);
    json_decref(cfg);
    json_decref(spec);
}

/* Dedicated NICs as CDI 1.1 netDevices: a device per interface, its edits
 * moving it in under its own name; a task's edits carry its NICs' entries */
static void test_nics_are_cdi_net_devices(void **state)
{
    (void)state;
    json_t *spec = NULL, *edits = NULL;
    ts_err err;
    const char *const nics[] = {"ens1f0v0", "ens1f0v1"};
    assert_int_equal(agent_cdi_net_spec(nics, 2, &spec, &err), 0);
    assert_string_equal(json_string_value(json_object_get(spec, "cdiVersion")), "1.1.0");
    assert_string_equal(json_string_value(json_object_get(spec, "kind")), AGENT_CDI_NET_KIND);
    json_t *devs = json_object_get(spec, "devices");
    assert_int_equal(json_array_size(devs), 2);
    json_t *nd = json_array_get(
        json_object_get(json_object_get(json_array_get(devs, 1), "containerEdits"),
                        "netDevices"), 0);
    assert_string_equal(json_string_value(json_object_get(nd, "hostInterfaceName")), "ens1f0v1");
    assert_string_equal(json_string_value(json_object_get(nd, "name")), "ens1f0v1");
    const char *const mine[] = {"ens1f0v1"};
    assert_int_equal(agent_cdi_edits(spec, mine, 1, &edits, &err), 0);
    json_t *net = json_object_get(edits, "netDevices");
    assert_int_equal(json_array_size(net), 1);
    assert_true(json_equal(json_array_get(net, 0), nd));
    json_decref(edits);
    json_decref(spec);
    const char *const bad[] = {"ok0", "a/b"};
    assert_int_equal(agent_cdi_net_spec(bad, 2, &spec, &err), TS_EINVAL);
    assert_non_null(strstr(err.msg, "netDevices[1]"));
    /* the GPUs' edits have none */
    spec = make_spec();
    const char *const gpu[] = {"1"};
    assert_int_equal(agent_cdi_edits(spec, gpu, 1, &edits, &err), 0);
    assert_null(json_object_get(edits, "netDevices"));
    json_decref(edits);
    json_decref(spec);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_spec_has_the_cdi_essentials, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_device_per_gpu_and_mig_instance, setup, teardown),
        cmocka_unit_test_setup_teardown(test_spec_is_written_and_reads_back, setup, teardown),
        cmocka_unit_test_setup_teardown(test_config_gets_exactly_its_allocation, setup, teardown),
        cmocka_unit_test_setup_teardown(test_two_devices_join_env_and_share_nodes, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_nics_are_cdi_net_devices, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
