/*
 * nics.c - the GPU-to-adapter (rail) map from sysfs or a file (nics.h).
 */
#define _DEFAULT_SOURCE /* realpath, DT_* */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "agent/nics.h"

/* "00000000:17:00.0" (NVML) -> "0000:17:00.0" (sysfs), lower case. */
static void sysfs_bus_id(const char *nvml, char *out, size_t size)
{
    const char *p = nvml;
    size_t n = strlen(p);
    /* NVML pads the domain to 8 hex digits; sysfs uses 4 */
    const char *colon = strchr(p, ':');
    if (colon && colon - p > 4)
        p = colon - 4;
    n = strlen(p);
    if (n >= size)
        n = size - 1;
    for (size_t i = 0; i < n; i++)
        out[i] = (char)tolower((unsigned char)p[i]);
    out[n] = '\0';
}

/* Path components two real paths share. */
static int shared_depth(const char *a, const char *b)
{
    int depth = 0;
    size_t i = 0;
    for (;; i++) {
        if (a[i] != b[i]) {
            /* a component counts only when both end it here */
            return (a[i] == '/' || a[i] == '\0') && (b[i] == '/' || b[i] == '\0') ? depth + 1
                                                                                  : depth;
        }
        if (a[i] == '\0')
            return depth + 1;
        if (a[i] == '/' && i > 0)
            depth++;
    }
}

/* The adapter's first ACTIVE port ("4: ACTIVE" in ports/N/state), else 1. */
static int active_port(const char *root, const char *hca)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/class/infiniband/%s/ports", root, hca);
    DIR *d = opendir(path);
    int best = -1, first = -1;
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        char *end;
        long port = strtol(e->d_name, &end, 10);
        if (end == e->d_name || *end != '\0' || port < 1 || port > 255)
            continue;
        if (first < 0 || port < first)
            first = (int)port;
        char sp[PATH_MAX + 32], line[64] = "";
        snprintf(sp, sizeof sp, "%s/%ld/state", path, port);
        FILE *f = fopen(sp, "r");
        if (f) {
            if (!fgets(line, sizeof line, f))
                line[0] = '\0';
            fclose(f);
        }
        if (strstr(line, "ACTIVE") && (best < 0 || port < best))
            best = (int)port;
    }
    if (d)
        closedir(d);
    return best > 0 ? best : first > 0 ? first : 1;
}

int agent_nics_discover(const char *sysfs_root, const char *const *bus_ids, int ngpu,
                     ts_nic_map *map, ts_err *err)
{
    memset(map, 0, sizeof *map);
    map->ngpu = ngpu < TS_NICS_MAX_GPUS ? ngpu : TS_NICS_MAX_GPUS;
    const char *root = sysfs_root && *sysfs_root ? sysfs_root : "/sys";
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/class/infiniband", root);
    DIR *d = opendir(dir);
    if (!d) {
        if (errno == ENOENT)
            return 0; /* no RDMA adapters: nothing to map */
        return ts_err_set(err, TS_EIO, "%s: %s", dir, strerror(errno));
    }
    enum { MAX_HCA = 64 };
    char names[MAX_HCA][TS_NICS_NAME_MAX];
    char *real[MAX_HCA];
    int nh = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && nh < MAX_HCA) {
        if (e->d_name[0] == '.' || strlen(e->d_name) >= TS_NICS_NAME_MAX - 4)
            continue;
        char link[PATH_MAX + 300];
        snprintf(link, sizeof link, "%s/%s/device", dir, e->d_name);
        char *r = realpath(link, NULL);
        if (!r)
            continue; /* a software device (rxe over a plain NIC) has no PCI parent */
        if (snprintf(names[nh], sizeof names[nh], "%s", e->d_name) >= (int)sizeof names[nh]) {
            free(r);
            continue;
        }
        real[nh++] = r;
    }
    closedir(d);
    for (int g = 0; g < map->ngpu; g++) {
        if (!bus_ids[g] || !bus_ids[g][0])
            continue;
        char bid[64], link[PATH_MAX + 80];
        sysfs_bus_id(bus_ids[g], bid, sizeof bid);
        snprintf(link, sizeof link, "%s/bus/pci/devices/%s", root, bid);
        char *gr = realpath(link, NULL);
        if (!gr)
            continue;
        int best = -1, best_depth = -1;
        for (int h = 0; h < nh; h++) {
            int dep = shared_depth(gr, real[h]);
            if (dep > best_depth || (dep == best_depth && strcmp(names[h], names[best]) < 0)) {
                best = h;
                best_depth = dep;
            }
        }
        if (best >= 0 && snprintf(map->hca[g], sizeof map->hca[g], "%s:%d", names[best],
                                  active_port(root, names[best])) >= (int)sizeof map->hca[g])
            map->hca[g][0] = '\0';
        free(gr);
    }
    for (int h = 0; h < nh; h++)
        free(real[h]);
    return 0;
}

int agent_nics_load(const char *path, int ngpu, ts_nic_map *map, ts_err *err)
{
    memset(map, 0, sizeof *map);
    map->ngpu = ngpu < TS_NICS_MAX_GPUS ? ngpu : TS_NICS_MAX_GPUS;
    FILE *f = fopen(path, "r");
    if (!f)
        return ts_err_set(err, TS_EIO, "%s: %s", path, strerror(errno));
    char line[256];
    int ln = 0, rc = 0;
    while (rc == 0 && fgets(line, sizeof line, f)) {
        ln++;
        char *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        char gpu_s[32], hca[TS_NICS_NAME_MAX], extra[8];
        int k = sscanf(line, "%31s %63s %7s", gpu_s, hca, extra);
        if (k <= 0)
            continue;
        char *end;
        long g = strtol(gpu_s, &end, 10);
        if (*end != '\0' || g < 0 || g >= map->ngpu)
            rc = ts_err_set(err, TS_EINVAL, "%s:%d: gpu: \"%s\" is not a GPU index 0..%d", path,
                            ln, gpu_s, map->ngpu - 1);
        else if (k != 2)
            rc = ts_err_set(err, TS_EINVAL, "%s:%d: expected \"GPU HCA[:PORT]\"", path, ln);
        else if (strchr(hca, ',') || strchr(hca, '='))
            rc = ts_err_set(err, TS_EINVAL, "%s:%d: hca: \"%s\" must be one adapter name", path,
                            ln, hca);
        else if (snprintf(map->hca[g], sizeof map->hca[g], strchr(hca, ':') ? "%s" : "%s:1",
                          hca) >= (int)sizeof map->hca[g])
            rc = ts_err_set(err, TS_EINVAL, "%s:%d: hca: \"%s\" is too long", path, ln, hca);
    }
    fclose(f);
    return rc;
}

void agent_nics_for_task(const ts_nic_map *map, const int *gpus, int ngpu, char *out, size_t size)
{
    out[0] = '\0';
    size_t len = 0;
    for (int i = 0; i < ngpu; i++) {
        int g = gpus[i];
        if (g < 0 || g >= map->ngpu || !map->hca[g][0])
            continue;
        bool seen = false;
        for (int k = 0; k < i && !seen; k++)
            seen = gpus[k] >= 0 && gpus[k] < map->ngpu && strcmp(map->hca[gpus[k]], map->hca[g]) == 0;
        if (seen)
            continue;
        int w = snprintf(out + len, size - len, "%s%s", len ? "," : "=", map->hca[g]);
        if (w < 0 || (size_t)w >= size - len) {
            out[len] = '\0';
            return;
        }
        len += (size_t)w;
    }
}

#define PKEY_TABLE_MAX 128 /* entries a port's table is read for */

int agent_nics_pkey_index(const char *sysfs_root, const char *hca_port, unsigned pkey, int *index,
                       ts_err *err)
{
    char hca[TS_NICS_NAME_MAX];
    snprintf(hca, sizeof hca, "%s", hca_port);
    char *colon = strchr(hca, ':');
    int port = colon ? atoi(colon + 1) : 1;
    if (colon)
        *colon = '\0';
    for (int i = 0; i < PKEY_TABLE_MAX; i++) {
        char path[512], buf[32];
        snprintf(path, sizeof path, "%s/class/infiniband/%s/ports/%d/pkeys/%d", sysfs_root, hca,
                 port, i);
        FILE *f = fopen(path, "re");
        if (!f)
            break;
        bool got = fgets(buf, sizeof buf, f) != NULL;
        fclose(f);
        unsigned long v = got ? strtoul(buf, NULL, 16) : 0;
        if (got && (v & 0x7fff) == (pkey & 0x7fff) && (v & 0x7fff) != 0) {
            *index = i;
            return 0;
        }
    }
    return ts_err_set(err, TS_ENOENT, "ib_pkey 0x%04x: not in the partition table of %s port "
                      "%d (has the subnet manager given this port the tenant's partition?)",
                      pkey & 0x7fff, hca, port);
}

int agent_nics_pkey_index_all(const char *sysfs_root, const char *hcas, unsigned pkey, int *index,
                           ts_err *err)
{
    const char *p = hcas[0] == '=' ? hcas + 1 : hcas;
    char first[TS_NICS_NAME_MAX] = "";
    *index = -1;
    while (*p) {
        char one[TS_NICS_NAME_MAX];
        size_t n = strcspn(p, ",");
        snprintf(one, sizeof one, "%.*s", (int)(n < sizeof one ? n : sizeof one - 1), p);
        p += n + (p[n] == ',');
        int idx, rc = agent_nics_pkey_index(sysfs_root, one, pkey, &idx, err);
        if (rc != 0)
            return rc;
        if (*index >= 0 && idx != *index)
            return ts_err_set(err, TS_ECONFLICT, "ib_pkey 0x%04x: at index %d of %s but %d of "
                              "%s (NCCL_IB_PKEY is one index for all the task's adapters)",
                              pkey & 0x7fff, *index, first, idx, one);
        if (*index < 0)
            snprintf(first, sizeof first, "%s", one);
        *index = idx;
    }
    if (*index < 0)
        return ts_err_set(err, TS_ENOENT, "ib_pkey 0x%04x: the task has no InfiniBand adapter",
                          pkey & 0x7fff);
    return 0;
}

int agent_nics_port_guid(const char *sysfs_root, const char *hca_port, char out[19], ts_err *err)
{
    char hca[TS_NICS_NAME_MAX];
    snprintf(hca, sizeof hca, "%s", hca_port);
    char *colon = strchr(hca, ':');
    int port = colon ? atoi(colon + 1) : 1;
    if (colon)
        *colon = '\0';
    char path[512], gid[64] = "";
    snprintf(path, sizeof path, "%s/class/infiniband/%s/ports/%d/gids/0", sysfs_root, hca, port);
    FILE *f = fopen(path, "re");
    bool got = f && fgets(gid, sizeof gid, f) != NULL;
    if (f)
        fclose(f);
    /* fe80:0000:0000:0000:0002:c903:00a1:b2c1: the last four groups */
    unsigned g[8];
    if (!got || sscanf(gid, "%4x:%4x:%4x:%4x:%4x:%4x:%4x:%4x", &g[0], &g[1], &g[2], &g[3], &g[4],
                       &g[5], &g[6], &g[7]) != 8)
        return ts_err_set(err, TS_ENOENT, "%s: no GID 0 to read the port GUID from", path);
    snprintf(out, 19, "0x%04x%04x%04x%04x", g[4], g[5], g[6], g[7]);
    return 0;
}

/* The first entry of dir (a sysfs device's net/): its network device. */
static bool first_netdev(const char *dir, char *out, size_t size)
{
    DIR *d = opendir(dir);
    if (!d)
        return false;
    struct dirent *e;
    bool got = false;
    while (!got && (e = readdir(d)) != NULL)
        if (e->d_name[0] != '.' && strlen(e->d_name) < size) {
            snprintf(out, size, "%s", e->d_name);
            got = true;
        }
    closedir(d);
    return got;
}

int agent_nics_netdev(const char *sysfs_root, const ts_nic_map *map, int gpu, char *out,
                   size_t size, ts_err *err)
{
    out[0] = '\0';
    if (gpu < 0 || gpu >= map->ngpu || !map->hca[gpu][0])
        return ts_err_set(err, TS_ENOENT, "nics: GPU %d has no adapter in the rail map "
                          "(dedicated NICs need one per GPU)", gpu);
    char hca[TS_NICS_NAME_MAX];
    snprintf(hca, sizeof hca, "%s", map->hca[gpu]);
    char *colon = strchr(hca, ':');
    if (colon)
        *colon = '\0';
    int slot = 0, first = gpu;
    for (int g = 0; g < gpu; g++)
        if (strcmp(map->hca[g], map->hca[gpu]) == 0) {
            if (slot == 0)
                first = g;
            slot++;
        }
    const char *root = sysfs_root && *sysfs_root ? sysfs_root : "/sys";
    char dev[PATH_MAX], path[PATH_MAX + 64];
    snprintf(dev, sizeof dev, "%s/class/infiniband/%s/device", root, hca);
    snprintf(path, sizeof path, "%s/virtfn0", dev);
    struct stat st;
    if (stat(path, &st) != 0) { /* no SR-IOV: the adapter itself, for one GPU */
        if (slot > 0)
            return ts_err_set(err, TS_ENOENT, "nics: GPU %d shares %s with GPU %d and %s has "
                              "no VFs to give each its own", gpu, hca, first, hca);
        snprintf(path, sizeof path, "%s/net", dev);
        if (!first_netdev(path, out, size))
            return ts_err_set(err, TS_ENOENT, "nics: GPU %d: %s has no network device (%s)",
                              gpu, hca, path);
        return 0;
    }
    snprintf(path, sizeof path, "%s/virtfn%d/net", dev, slot);
    if (!first_netdev(path, out, size))
        return ts_err_set(err, TS_ENOENT, "nics: GPU %d: %s has no VF %d with a network device "
                          "(%s; enable more VFs: sriov_numvfs)", gpu, hca, slot, path);
    return 0;
}

void agent_nics_for_task_dedicated(const char *sysfs_root, const ts_nic_map *map, const int *gpus,
                                int ngpu, char *out, size_t size)
{
    out[0] = '\0';
    size_t len = 0;
    for (int i = 0; i < ngpu; i++) {
        char dev[TS_NICS_NAME_MAX], name[TS_NICS_NAME_MAX + 8];
        ts_err e;
        if (agent_nics_rdmadev(sysfs_root, map, gpus[i], dev, sizeof dev, &e) != 0 || !dev[0])
            continue;
        size_t hl = strcspn(map->hca[gpus[i]], ":");
        if (strlen(dev) == hl && strncmp(dev, map->hca[gpus[i]], hl) == 0)
            snprintf(name, sizeof name, "%s", map->hca[gpus[i]]); /* the adapter: its port */
        else
            snprintf(name, sizeof name, "%s:1", dev); /* a VF's own device */
        size_t nl = strlen(name);
        bool seen = false;
        for (const char *p = out + (len > 0); len > 0 && *p && !seen;) {
            size_t n = strcspn(p, ",");
            seen = n == nl && strncmp(p, name, nl) == 0;
            p += n + (p[n] == ',');
        }
        if (seen)
            continue;
        int w = snprintf(out + len, size - len, "%s%s", len ? "," : "=", name);
        if (w < 0 || (size_t)w >= size - len) {
            out[len] = '\0';
            return;
        }
        len += (size_t)w;
    }
}

int agent_nics_rdmadev(const char *sysfs_root, const ts_nic_map *map, int gpu, char *out,
                    size_t size, ts_err *err)
{
    char net[TS_NICS_NAME_MAX];
    int rc = agent_nics_netdev(sysfs_root, map, gpu, net, sizeof net, err); /* the same checks */
    out[0] = '\0';
    if (rc != 0)
        return rc;
    char hca[TS_NICS_NAME_MAX];
    snprintf(hca, sizeof hca, "%s", map->hca[gpu]);
    char *colon = strchr(hca, ':');
    if (colon)
        *colon = '\0';
    int slot = 0;
    for (int g = 0; g < gpu; g++)
        slot += strcmp(map->hca[g], map->hca[gpu]) == 0;
    const char *root = sysfs_root && *sysfs_root ? sysfs_root : "/sys";
    char path[PATH_MAX + 64];
    struct stat st;
    snprintf(path, sizeof path, "%s/class/infiniband/%s/device/virtfn0", root, hca);
    if (stat(path, &st) != 0) { /* no SR-IOV: the adapter's own */
        snprintf(out, size, "%s", hca);
        return 0;
    }
    snprintf(path, sizeof path, "%s/class/infiniband/%s/device/virtfn%d/infiniband", root, hca,
             slot);
    first_netdev(path, out, size); /* an Ethernet-only VF has none: "" */
    return 0;
}
