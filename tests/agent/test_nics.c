/*
 * test_nics.c - the GPU-to-adapter map: from a fake sysfs tree (two PCIe
 * switches, a GPU and an adapter under each, a third adapter on another
 * socket, a software adapter without PCI), from a file with its errors, and
 * the NCCL_IB_HCA value of a task, and a partition key's index in a port's
 * table (NCCL_IB_PKEY).
 */
#define _DEFAULT_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/nics.h"

static char root[64];

static void mkpath(const char *rel)
{
    char p[512], *s;
    snprintf(p, sizeof p, "%s/%s", root, rel);
    for (s = p + strlen(root) + 1; (s = strchr(s, '/')) != NULL; s++) {
        *s = '\0';
        mkdir(p, 0755);
        *s = '/';
    }
    mkdir(p, 0755);
}

static void put(const char *rel, const char *text)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", root, rel);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void link_to(const char *target_rel, const char *link_rel)
{
    char t[512], l[512];
    snprintf(t, sizeof t, "%s/%s", root, target_rel);
    snprintf(l, sizeof l, "%s/%s", root, link_rel);
    assert_int_equal(symlink(t, l), 0);
}

static int setup(void **state)
{
    (void)state;
    snprintf(root, sizeof root, "/tmp/ts-nics-XXXXXX");
    assert_non_null(mkdtemp(root));
    const char *sw0 = "devices/pci0000:16/0000:16:01.0", *sw1 = "devices/pci0000:16/0000:16:02.0";
    char p[256];
    snprintf(p, sizeof p, "%s/0000:17:00.0", sw0); /* GPU 0 */
    mkpath(p);
    snprintf(p, sizeof p, "%s/0000:18:00.0", sw0); /* mlx5_0 */
    mkpath(p);
    snprintf(p, sizeof p, "%s/0000:1a:00.0", sw1); /* GPU 1 */
    mkpath(p);
    snprintf(p, sizeof p, "%s/0000:1b:00.0", sw1); /* mlx5_1 */
    mkpath(p);
    mkpath("devices/pci0000:80/0000:80:01.0/0000:81:00.0"); /* mlx5_2, other socket */
    mkpath("bus/pci/devices");
    link_to("devices/pci0000:16/0000:16:01.0/0000:17:00.0", "bus/pci/devices/0000:17:00.0");
    link_to("devices/pci0000:16/0000:16:02.0/0000:1a:00.0", "bus/pci/devices/0000:1a:00.0");
    const char *hcas[][2] = {{"mlx5_0", "devices/pci0000:16/0000:16:01.0/0000:18:00.0"},
                             {"mlx5_1", "devices/pci0000:16/0000:16:02.0/0000:1b:00.0"},
                             {"mlx5_2", "devices/pci0000:80/0000:80:01.0/0000:81:00.0"}};
    for (int i = 0; i < 3; i++) {
        char d[128];
        snprintf(d, sizeof d, "class/infiniband/%s/ports/1", hcas[i][0]);
        mkpath(d);
        snprintf(d, sizeof d, "class/infiniband/%s/ports/2", hcas[i][0]);
        mkpath(d);
        snprintf(d, sizeof d, "class/infiniband/%s/ports/1/state", hcas[i][0]);
        put(d, i == 1 ? "1: DOWN\n" : "4: ACTIVE\n");
        snprintf(d, sizeof d, "class/infiniband/%s/ports/2/state", hcas[i][0]);
        put(d, "4: ACTIVE\n");
        snprintf(d, sizeof d, "class/infiniband/%s/device", hcas[i][0]);
        link_to(hcas[i][1], d);
    }
    mkpath("class/infiniband/rxe0"); /* software adapter: no device link */
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", root);
    return system(cmd);
}

static void test_discover(void **state)
{
    (void)state;
    const char *ids[] = {"00000000:17:00.0", "00000000:1A:00.0", "00000000:99:00.0"};
    ts_nic_map m;
    ts_err err;
    assert_int_equal(agent_nics_discover(root, ids, 3, &m, &err), 0);
    assert_int_equal(m.ngpu, 3);
    assert_string_equal(m.hca[0], "mlx5_0:1");
    assert_string_equal(m.hca[1], "mlx5_1:2"); /* port 1 is down */
    assert_string_equal(m.hca[2], "");         /* a GPU sysfs does not know */
    char v[128];
    int both[] = {0, 1, 0};
    agent_nics_for_task(&m, both, 3, v, sizeof v);
    assert_string_equal(v, "=mlx5_0:1,mlx5_1:2");
    int none[] = {2};
    agent_nics_for_task(&m, none, 1, v, sizeof v);
    assert_string_equal(v, "");
}

static void test_no_adapters(void **state)
{
    (void)state;
    const char *ids[] = {"00000000:17:00.0"};
    ts_nic_map m;
    ts_err err;
    assert_int_equal(agent_nics_discover("/nonexistent-sysfs", ids, 1, &m, &err), 0);
    assert_string_equal(m.hca[0], "");
}

static void test_load(void **state)
{
    (void)state;
    put("map", "# rails\n0 mlx5_4\n1 mlx5_5:2   # second port\n\n");
    char p[128];
    snprintf(p, sizeof p, "%s/map", root);
    ts_nic_map m;
    ts_err err;
    assert_int_equal(agent_nics_load(p, 2, &m, &err), 0);
    assert_string_equal(m.hca[0], "mlx5_4:1");
    assert_string_equal(m.hca[1], "mlx5_5:2");
    put("map", "0 mlx5_4\n7 mlx5_5\n");
    assert_int_equal(agent_nics_load(p, 2, &m, &err), TS_EINVAL);
    assert_non_null(strstr(err.msg, ":2: gpu"));
    put("map", "0 mlx5_4,mlx5_5\n");
    assert_int_equal(agent_nics_load(p, 2, &m, &err), TS_EINVAL);
    assert_non_null(strstr(err.msg, "hca"));
    put("map", "0\n");
    assert_int_equal(agent_nics_load(p, 2, &m, &err), TS_EINVAL);
    snprintf(p, sizeof p, "%s/missing", root);
    assert_int_equal(agent_nics_load(p, 2, &m, &err), TS_EIO);
}

static void test_pkey_index(void **state)
{
    (void)state;
    mkpath("class/infiniband/mlx5_7/ports/1/pkeys");
    put("class/infiniband/mlx5_7/ports/1/pkeys/0", "0xffff\n");
    put("class/infiniband/mlx5_7/ports/1/pkeys/1", "0x0000\n");
    put("class/infiniband/mlx5_7/ports/1/pkeys/2", "0x9001\n"); /* full member of 0x1001 */
    put("class/infiniband/mlx5_7/ports/1/pkeys/3", "0x1002\n"); /* limited member of 0x1002 */
    int idx = -1;
    ts_err err;
    assert_int_equal(agent_nics_pkey_index(root, "mlx5_7:1", 0x1001, &idx, &err), 0);
    assert_int_equal(idx, 2);
    assert_int_equal(agent_nics_pkey_index(root, "mlx5_7:1", 0x9002, &idx, &err), 0);
    assert_int_equal(idx, 3);
    assert_int_equal(agent_nics_pkey_index(root, "mlx5_7:1", 0x1003, &idx, &err), TS_ENOENT);
    assert_non_null(strstr(err.msg, "ib_pkey 0x1003: not in the partition table of mlx5_7 port 1"));
    assert_int_equal(agent_nics_pkey_index(root, "mlx5_7:2", 0x1001, &idx, &err), TS_ENOENT);
}

/* dedicated NICs: mlx5_0 has two VFs (virtfn0, virtfn1), mlx5_1 none */
static void test_netdev(void **state)
{
    (void)state;
    const char *vf0 = "devices/pci0000:16/0000:16:01.0/0000:18:00.2";
    const char *vf1 = "devices/pci0000:16/0000:16:01.0/0000:18:00.3";
    mkpath("devices/pci0000:16/0000:16:01.0/0000:18:00.2/net/tsvf0");
    mkpath("devices/pci0000:16/0000:16:01.0/0000:18:00.3/net/tsvf1");
    mkpath("devices/pci0000:16/0000:16:01.0/0000:18:00.0/net/ens1f0");
    mkpath("devices/pci0000:16/0000:16:02.0/0000:1b:00.0/net/ens2f0");
    link_to(vf0, "devices/pci0000:16/0000:16:01.0/0000:18:00.0/virtfn0");
    link_to(vf1, "devices/pci0000:16/0000:16:01.0/0000:18:00.0/virtfn1");
    ts_nic_map m = {.ngpu = 5};
    snprintf(m.hca[0], sizeof m.hca[0], "mlx5_0:1");
    snprintf(m.hca[1], sizeof m.hca[1], "mlx5_1:1");
    snprintf(m.hca[2], sizeof m.hca[2], "mlx5_0:1");
    snprintf(m.hca[3], sizeof m.hca[3], "mlx5_0:1");
    snprintf(m.hca[4], sizeof m.hca[4], "mlx5_1:1");
    char dev[64];
    ts_err err;
    assert_int_equal(agent_nics_netdev(root, &m, 0, dev, sizeof dev, &err), 0);
    assert_string_equal(dev, "tsvf0"); /* VF 0: the first GPU on mlx5_0 */
    assert_int_equal(agent_nics_netdev(root, &m, 2, dev, sizeof dev, &err), 0);
    assert_string_equal(dev, "tsvf1");
    assert_int_equal(agent_nics_netdev(root, &m, 1, dev, sizeof dev, &err), 0);
    assert_string_equal(dev, "ens2f0"); /* no VFs: the rail NIC itself */
    /* a third GPU on mlx5_0 finds no VF 2; a second on mlx5_1 no VFs at all */
    assert_int_equal(agent_nics_netdev(root, &m, 3, dev, sizeof dev, &err), TS_ENOENT);
    assert_non_null(strstr(err.msg, "GPU 3: mlx5_0 has no VF 2"));
    assert_int_equal(agent_nics_netdev(root, &m, 4, dev, sizeof dev, &err), TS_ENOENT);
    assert_non_null(strstr(err.msg, "GPU 4 shares mlx5_1 with GPU 1"));
    m.hca[4][0] = '\0';
    assert_int_equal(agent_nics_netdev(root, &m, 4, dev, sizeof dev, &err), TS_ENOENT);
    assert_non_null(strstr(err.msg, "GPU 4 has no adapter in the rail map"));
    /* the RDMA device going with each: VF 1's own, none for VF 0, the adapter without VFs */
    mkpath("devices/pci0000:16/0000:16:01.0/0000:18:00.3/infiniband/mlx5_9");
    assert_int_equal(agent_nics_rdmadev(root, &m, 2, dev, sizeof dev, &err), 0);
    assert_string_equal(dev, "mlx5_9");
    assert_int_equal(agent_nics_rdmadev(root, &m, 0, dev, sizeof dev, &err), 0);
    assert_string_equal(dev, "");
    assert_int_equal(agent_nics_rdmadev(root, &m, 1, dev, sizeof dev, &err), 0);
    assert_string_equal(dev, "mlx5_1");
    assert_int_equal(agent_nics_rdmadev(root, &m, 3, dev, sizeof dev, &err), TS_ENOENT);
}

/* NCCL_IB_PKEY with dedicated NICs: the index in the tables of the task's
 * own VFs' RDMA devices, not the adapter's (after test_netdev's VFs) */
static void test_pkey_of_vf(void **state)
{
    (void)state;
    mkpath("devices/pci0000:16/0000:16:01.0/0000:18:00.2/infiniband/mlx5_8");
    const char *tables[][4] = {{"mlx5_0", "0xffff", "0x8001", "0x9001"}, /* the PF: index 2 */
                               {"mlx5_8", "0xffff", "0x9001", NULL},     /* its VFs: index 1 */
                               {"mlx5_9", "0xffff", "0x9001", NULL}};
    for (int i = 0; i < 3; i++) {
        char d[128];
        snprintf(d, sizeof d, "class/infiniband/%s/ports/1/pkeys", tables[i][0]);
        mkpath(d);
        for (int k = 1; k < 4 && tables[i][k]; k++) {
            snprintf(d, sizeof d, "class/infiniband/%s/ports/1/pkeys/%d", tables[i][0], k - 1);
            put(d, tables[i][k]);
        }
    }
    ts_nic_map m = {.ngpu = 3};
    snprintf(m.hca[0], sizeof m.hca[0], "mlx5_0:1");
    snprintf(m.hca[1], sizeof m.hca[1], "mlx5_1:2");
    snprintf(m.hca[2], sizeof m.hca[2], "mlx5_0:1");
    char hcas[256];
    int gpus[] = {0, 2, 1};
    agent_nics_for_task_dedicated(root, &m, gpus, 2, hcas, sizeof hcas);
    assert_string_equal(hcas, "=mlx5_8:1,mlx5_9:1"); /* VF 0's and VF 1's own devices */
    int idx;
    ts_err err;
    assert_int_equal(agent_nics_pkey_index_all(root, hcas, 0x1001, &idx, &err), 0);
    assert_int_equal(idx, 1);
    assert_int_equal(agent_nics_pkey_index_all(root, "=mlx5_0:1", 0x1001, &idx, &err), 0);
    assert_int_equal(idx, 2); /* what the adapter's table would have said */
    /* an adapter without VFs: itself, at the rail map's port */
    agent_nics_for_task_dedicated(root, &m, gpus, 3, hcas, sizeof hcas);
    assert_string_equal(hcas, "=mlx5_8:1,mlx5_9:1,mlx5_1:2");
    /* one index for all of them, or the start fails naming both */
    put("class/infiniband/mlx5_9/ports/1/pkeys/1", "0x8001");
    put("class/infiniband/mlx5_9/ports/1/pkeys/2", "0x9001");
    assert_int_equal(agent_nics_pkey_index_all(root, "=mlx5_8:1,mlx5_9:1", 0x1001, &idx, &err),
                     TS_ECONFLICT);
    assert_non_null(strstr(err.msg, "ib_pkey 0x1001: at index 1 of mlx5_8:1 but 2 of mlx5_9:1"));
    assert_int_equal(agent_nics_pkey_index_all(root, "=mlx5_8:1,mlx5_1:2", 0x1001, &idx, &err),
                     TS_ENOENT);
    assert_non_null(strstr(err.msg, "not in the partition table of mlx5_1 port 2"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pkey_index),
        cmocka_unit_test(test_discover),
        cmocka_unit_test(test_no_adapters),
        cmocka_unit_test(test_load),
        cmocka_unit_test(test_netdev),
        cmocka_unit_test(test_pkey_of_vf),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
