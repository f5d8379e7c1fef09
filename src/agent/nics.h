/*
 * nics.h - which network adapter (rail) serves each GPU of the node, for the
 * NCCL variables of the tasks (docs/agent-tasks.md).
 *
 * On a rail-optimised node each GPU shares a PCIe switch with one InfiniBand
 * / RoCE adapter; NCCL should use exactly the adapters of the task's GPUs.
 * agent_nics_discover reads sysfs: for each GPU (by its PCI bus id) the adapter
 * under /sys/class/infiniband whose PCI path shares the longest prefix with
 * the GPU's (the nearest common bridge), and the adapter's first ACTIVE port.
 * agent_nics_load reads an explicit map instead ("GPU HCA[:PORT]" per line,
 * '#' comments), for nodes whose topology sysfs does not show.
 *
 * Ownership: a ts_nic_map is a plain value filled by the calls; nothing is
 * allocated. Nothing prints.
 */
#ifndef TS_AGENT_NICS_H
#define TS_AGENT_NICS_H

#include <stddef.h>

#include "tessera/error.h"

#define TS_NICS_MAX_GPUS 16
#define TS_NICS_NAME_MAX 64

typedef struct ts_nic_map {
    int ngpu;
    /* "mlx5_0:1" per GPU index; "" when no adapter serves it */
    char hca[TS_NICS_MAX_GPUS][TS_NICS_NAME_MAX];
} ts_nic_map;

/* sysfs_root: "/sys" (tests point it elsewhere). bus_ids[g]: NVML's PCI bus
 * id of GPU g ("00000000:17:00.0"). No adapters at all is not an error (the
 * map stays empty); TS_EIO only for an unreadable tree. */
int agent_nics_discover(const char *sysfs_root, const char *const *bus_ids, int ngpu,
                     ts_nic_map *map, ts_err *err);

/* Reads "GPU HCA[:PORT]" lines; TS_EINVAL names the file, line and field. */
int agent_nics_load(const char *path, int ngpu, ts_nic_map *map, ts_err *err);

/* NCCL_IB_PKEY for a task of a tenant with InfiniBand partition key pkey
 * (docs/network.md): the index of pkey (its low 15 bits, full or limited
 * membership) in the partition table of hca_port ("mlx5_0:1", as in the
 * map) under sysfs_root. TS_ENOENT (err says so) when the table lacks it:
 * the subnet manager has not given the port that partition. */
int agent_nics_pkey_index(const char *sysfs_root, const char *hca_port, unsigned pkey, int *index,
                       ts_err *err);

/* The same for every adapter of an NCCL_IB_HCA value (hcas: "=mlx5_8:1,mlx5_9:1",
 * as agent_nics_for_task writes it): NCCL takes one NCCL_IB_PKEY for all of
 * them, so the key must sit at the same index in each table; *index is
 * that index. TS_ENOENT names the adapter whose table lacks it, TS_ECONFLICT
 * the two whose indexes differ. */
int agent_nics_pkey_index_all(const char *sysfs_root, const char *hcas, unsigned pkey, int *index,
                           ts_err *err);

/* The port GUID of hca_port ("mlx5_0:1") from its GID 0 under sysfs_root,
 * as OpenSM's partitions.conf writes it ("0x0002c90300a1b2c1"). */
int agent_nics_port_guid(const char *sysfs_root, const char *hca_port, char out[19], ts_err *err);

/* The NCCL_IB_HCA value for a task on these GPUs: "=mlx5_0:1,mlx5_1:1" (the
 * '=' asks NCCL for exact names), each adapter once; "" when none. */
void agent_nics_for_task(const ts_nic_map *map, const int *gpus, int ngpu, char *out, size_t size);

/* The network device a task on GPU gpu gets for its own with dedicated NICs
 * (docs/network.md): the adapter of its rail (map), and on it, when the
 * adapter has SR-IOV VFs (<hca>/device/virtfn<N> under sysfs_root), VF N
 * where N counts the GPUs before gpu on the same adapter; without VFs the
 * adapter's own device, for the first GPU of the adapter only. out gets the
 * device's name (its net/ entry); TS_ENOENT names the GPU, adapter and what
 * is missing. */
int agent_nics_netdev(const char *sysfs_root, const ts_nic_map *map, int gpu, char *out,
                   size_t size, ts_err *err);

/* NCCL_IB_HCA for a task with dedicated NICs (docs/network.md): the RDMA
 * device of each of its GPUs' devices as agent_nics_rdmadev gives it, a VF's
 * own as "<dev>:1" (a VF has one port), the adapter's own as the rail map
 * names it, "=" first, each once; a GPU whose VF has no RDMA device
 * (Ethernet only) is left out. "" when none has one. */
void agent_nics_for_task_dedicated(const char *sysfs_root, const ts_nic_map *map, const int *gpus,
                                int ngpu, char *out, size_t size);

/* The RDMA device that goes with agent_nics_netdev's choice for gpu: the
 * adapter itself without VFs, else the VF's own (<hca>/device/virtfn<N>/
 * infiniband/<name>), "" for a VF without one. The same errors as
 * agent_nics_netdev. */
int agent_nics_rdmadev(const char *sysfs_root, const ts_nic_map *map, int gpu, char *out,
                    size_t size, ts_err *err);

#endif
