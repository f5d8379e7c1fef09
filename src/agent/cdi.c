/*
 * cdi.c - the node's GPUs as a CDI specification (see cdi.h).
 *
 * CDI lets any runtime (containerd, CRI-O, podman, and our own bundles) give
 * a container exactly the GPUs it was allocated: the spec names each device
 * and the edits (device nodes, mounts, environment) that make it usable. We
 * write it from the discovery the agent already did, so it names the GPUs
 * and MIG instances the controller allocates, under the names the task's
 * allocation uses (NVML index, "index:gi" for a MIG instance).
 *
 * A MIG instance is reached through its parent's /dev/nvidiaN plus the
 * capability nodes /dev/nvidia-caps/nvidia-cap<minor> of its GPU instance
 * and compute instances; the minors are listed by the driver in
 * /proc/driver/nvidia-caps/mig-minors ("gpu0/gi2/access 21"). Where that
 * file or those nodes are missing the instance keeps its parent's node only.
 */
#define _GNU_SOURCE
#include "agent/cdi.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#define NVIDIA_MAJOR 195u
#define NVIDIACTL_MINOR 255u
#define PCI_SHORT_CHARS 12 /* "0000:17:00.0", as /proc/driver/nvidia/gpus names them */
#define PATH_BYTES 768

static const char *const LIB_DIRS_DEFAULT[] = {
    "/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib", "/lib/x86_64-linux-gnu", NULL};
static const char *const DRIVER_LIBS[] = {"libcuda.so.", "libnvidia-ml.so.", NULL};
static const char *const CONTROL_NODES[] = {"/dev/nvidiactl", "/dev/nvidia-uvm",
                                            "/dev/nvidia-uvm-tools", NULL};

static const char *root_of(const char *r, const char *dflt)
{
    return r && *r ? r : dflt;
}

/* A char device node under the dev root: {path, type, major, minor,
 * permissions} (+ hostPath when the root is not "/"), or NULL when absent
 * and no fallback numbers are given (fb_major 0). */
static json_t *node_of(const agent_cdi_opts *o, const char *path, unsigned fb_major,
                       unsigned fb_minor)
{
    const char *root = root_of(o ? o->dev_root : NULL, "/");
    char host[PATH_BYTES];
    bool rooted = strcmp(root, "/") != 0;
    snprintf(host, sizeof host, "%s%s", rooted ? root : "", path);
    struct stat st;
    unsigned major = fb_major, minor = fb_minor;
    if (stat(host, &st) == 0 && S_ISCHR(st.st_mode)) {
        major = major(st.st_rdev);
        minor = minor(st.st_rdev);
    } else if (fb_major == 0) {
        return NULL;
    }
    json_t *n = json_pack("{s:s, s:s, s:I, s:I, s:s}", "path", path, "type", "c", "major",
                          (json_int_t)major, "minor", (json_int_t)minor, "permissions", "rwm");
    if (n && rooted)
        json_object_set_new(n, "hostPath", json_string(host));
    return n;
}

static void append_node(json_t *nodes, json_t *n)
{
    if (n)
        json_array_append_new(nodes, n);
}

unsigned agent_gpu_minor(const char *proc_root, const char *bus_id, unsigned index)
{
    size_t n = bus_id ? strlen(bus_id) : 0;
    if (n >= PCI_SHORT_CHARS) {
        char path[PATH_BYTES], line[128];
        int k = snprintf(path, sizeof path, "%s/driver/nvidia/gpus/",
                         root_of(proc_root, "/proc"));
        for (const char *p = bus_id + n - PCI_SHORT_CHARS; *p && k < (int)sizeof path - 1;
             p++)
            path[k++] = (char)(*p >= 'A' && *p <= 'F' ? *p - 'A' + 'a' : *p);
        path[k] = '\0';
        strncat(path, "/information", sizeof path - strlen(path) - 1);
        FILE *f = fopen(path, "re");
        unsigned minor;
        while (f && fgets(line, sizeof line, f))
            if (sscanf(line, "Device Minor: %u", &minor) == 1) {
                fclose(f);
                return minor;
            }
        if (f)
            fclose(f);
    }
    return index;
}

/* The capability minor the driver lists for key ("gpu0/gi2/access"), or -1. */
static long mig_cap_minor(const agent_cdi_opts *o, const char *key)
{
    char path[PATH_BYTES], line[160], name[128];
    snprintf(path, sizeof path, "%s/driver/nvidia-caps/mig-minors",
             root_of(o ? o->proc_root : NULL, "/proc"));
    FILE *f = fopen(path, "re");
    long found = -1;
    unsigned minor;
    while (f && found < 0 && fgets(line, sizeof line, f))
        if (sscanf(line, "%127s %u", name, &minor) == 2 && strcmp(name, key) == 0)
            found = minor;
    if (f)
        fclose(f);
    return found;
}

static void append_cap(json_t *nodes, const agent_cdi_opts *o, const char *key)
{
    long minor = mig_cap_minor(o, key);
    if (minor < 0)
        return;
    char path[64];
    snprintf(path, sizeof path, "/dev/nvidia-caps/nvidia-cap%ld", minor);
    append_node(nodes, node_of(o, path, 0, 0)); /* its major is dynamic: only if present */
}

static json_t *visible_env(const char *uuid)
{
    char a[160], b[160];
    snprintf(a, sizeof a, "NVIDIA_VISIBLE_DEVICES=%s", uuid);
    snprintf(b, sizeof b, "CUDA_VISIBLE_DEVICES=%s", uuid);
    return json_pack("[s, s]", a, b);
}

static json_t *device_of(const char *name, json_t *nodes, const char *uuid)
{
    return json_pack("{s:s, s:{s:o, s:o}}", "name", name, "containerEdits", "deviceNodes",
                     nodes, "env", visible_env(uuid));
}

static void add_lib_mounts(json_t *mounts, const agent_cdi_opts *o)
{
    const char *const *dirs = o && o->lib_dirs ? o->lib_dirs : LIB_DIRS_DEFAULT;
    for (size_t i = 0; dirs[i]; i++) {
        struct dirent **ents = NULL;
        int n = scandir(dirs[i], &ents, NULL, alphasort);
        for (int k = 0; k < n; k++) {
            for (size_t l = 0; DRIVER_LIBS[l]; l++)
                if (strncmp(ents[k]->d_name, DRIVER_LIBS[l], strlen(DRIVER_LIBS[l])) == 0) {
                    char path[PATH_BYTES];
                    snprintf(path, sizeof path, "%s/%s", dirs[i], ents[k]->d_name);
                    struct stat st;
                    if (stat(path, &st) == 0 && S_ISREG(st.st_mode))
                        json_array_append_new(
                            mounts, json_pack("{s:s, s:s, s:[s, s, s, s]}", "hostPath", path,
                                              "containerPath", path, "options", "ro", "nosuid",
                                              "nodev", "bind"));
                }
            free(ents[k]);
        }
        free(ents);
    }
}

int agent_cdi_spec(const ts_node_desc *d, const agent_cdi_opts *o, json_t **out, ts_err *err)
{
    json_t *devices = json_array(), *common = json_array(), *mounts = json_array();
    for (size_t i = 0; CONTROL_NODES[i]; i++)
        append_node(common, node_of(o, CONTROL_NODES[i],
                                    i == 0 ? NVIDIA_MAJOR : 0, i == 0 ? NVIDIACTL_MINOR : 0));
    add_lib_mounts(mounts, o);
    for (int i = 0; i < d->ngpus; i++) {
        const ts_gpu_desc *g = &d->gpu[i];
        char name[32], path[64];
        unsigned minor = agent_gpu_minor(o ? o->proc_root : NULL, g->bus_id, g->index);
        snprintf(path, sizeof path, "/dev/nvidia%u", minor);
        snprintf(name, sizeof name, "%u", g->index);
        json_array_append_new(devices, device_of(name, json_pack("[o]", node_of(o, path,
                                                                 NVIDIA_MAJOR, minor)),
                                                 g->uuid));
        for (int k = 0; g->mig_enabled && k < g->ngi; k++) {
            const ts_mig_gi_desc *gi = &g->gi[k];
            char key[96];
            json_t *nodes = json_pack("[o]", node_of(o, path, NVIDIA_MAJOR, minor));
            snprintf(key, sizeof key, "gpu%u/gi%u/access", minor, gi->id);
            append_cap(nodes, o, key);
            for (int c = 0; c < gi->nci; c++) {
                snprintf(key, sizeof key, "gpu%u/gi%u/ci%u/access", minor, gi->id, gi->ci[c].id);
                append_cap(nodes, o, key);
            }
            snprintf(name, sizeof name, "%u:%u", g->index, gi->id);
            json_array_append_new(devices,
                                  device_of(name, nodes, gi->nci ? gi->ci[0].uuid : g->uuid));
        }
    }
    *out = json_pack("{s:s, s:s, s:o, s:{s:o, s:o}}", "cdiVersion", AGENT_CDI_VERSION, "kind",
                     AGENT_CDI_KIND, "devices", devices, "containerEdits", "deviceNodes", common,
                     "mounts", mounts);
    return *out ? 0 : ts_err_set(err, TS_ENOMEM, "cdi: out of memory");
}

int agent_cdi_net_spec(const char *const *ifnames, size_t n, json_t **out, ts_err *err)
{
    *out = NULL;
    json_t *devices = json_array();
    for (size_t i = 0; devices && i < n; i++) {
        const char *d = ifnames[i];
        size_t len = d ? strlen(d) : 0;
        bool ok = len > 0 && len < 16;
        for (size_t k = 0; ok && k < len; k++)
            ok = d[k] > ' ' && d[k] < 127 && d[k] != '/';
        if (!ok) {
            json_decref(devices);
            return ts_err_set(err, TS_EINVAL, "cdi netDevices[%zu]: \"%s\": not an interface "
                              "name (1..15 printable, no /)", i, d ? d : "");
        }
        /* the same name inside: what the rail map and NCCL_IB_HCA's users know it as */
        json_array_append_new(devices,
                              json_pack("{s:s, s:{s:[{s:s, s:s}]}}", "name", d, "containerEdits",
                                        "netDevices", "hostInterfaceName", d, "name", d));
    }
    *out = devices ? json_pack("{s:s, s:s, s:o}", "cdiVersion", AGENT_CDI_NET_VERSION, "kind",
                               AGENT_CDI_NET_KIND, "devices", devices)
                   : NULL;
    return *out ? 0 : ts_err_set(err, TS_ENOMEM, "cdi: out of memory");
}

int agent_cdi_write(const json_t *spec, const char *path, ts_err *err)
{
    char dir[PATH_BYTES], tmp[PATH_BYTES + 8];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash && slash != dir) {
        *slash = '\0';
        if (mkdir(dir, 0755) != 0 && errno != EEXIST)
            return ts_err_set(err, TS_EIO, "cdi %s: %s", dir, strerror(errno));
    }
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    if (json_dump_file(spec, tmp, JSON_INDENT(1)) != 0 || chmod(tmp, 0644) != 0 ||
        rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return ts_err_set(err, TS_EIO, "cdi %s: cannot write: %s", path, strerror(e));
    }
    return 0;
}

/* Appends edits' env to env, joining the values of a variable already there. */
static void merge_env(json_t *env, const json_t *more)
{
    size_t i;
    json_t *v;
    json_array_foreach(more, i, v) {
        const char *kv = json_string_value(v), *eq = kv ? strchr(kv, '=') : NULL;
        if (!eq)
            continue;
        size_t klen = (size_t)(eq - kv) + 1, j;
        json_t *w;
        bool joined = false;
        json_array_foreach(env, j, w) {
            const char *have = json_string_value(w);
            if (strncmp(have, kv, klen) == 0) {
                size_t len = strlen(have) + strlen(eq + 1) + 2;
                char *both = malloc(len);
                if (both) {
                    snprintf(both, len, "%s,%s", have, eq + 1);
                    json_array_set_new(env, j, json_string(both));
                    free(both);
                }
                joined = true;
                break;
            }
        }
        if (!joined)
            json_array_append(env, v);
    }
}

static const json_t *device_named(const json_t *spec, const char *name)
{
    size_t i;
    json_t *d;
    json_array_foreach(json_object_get(spec, "devices"), i, d)
        if (strcmp(json_string_value(json_object_get(d, "name")), name) == 0)
            return d;
    return NULL;
}

int agent_cdi_edits(const json_t *spec, const char *const *names, size_t n, json_t **out,
                    ts_err *err)
{
    *out = NULL;
    const json_t *common = json_object_get(spec, "containerEdits");
    json_t *nodes = json_deep_copy(json_object_get(common, "deviceNodes"));
    json_t *mounts = json_deep_copy(json_object_get(common, "mounts"));
    json_t *env = json_array(), *net = json_array();
    for (size_t i = 0; i < n; i++) {
        const json_t *d = device_named(spec, names[i]);
        if (!d) {
            json_decref(nodes);
            json_decref(mounts);
            json_decref(env);
            json_decref(net);
            return ts_err_set(err, TS_ENOENT, "cdi: no device \"%s\" in the spec", names[i]);
        }
        const json_t *e = json_object_get(d, "containerEdits");
        size_t j;
        json_t *node;
        json_array_foreach(json_object_get(e, "deviceNodes"), j, node) {
            size_t k;
            json_t *have;
            bool dup = false;
            json_array_foreach(nodes, k, have)
                dup = dup || json_equal(have, node);
            if (!dup) /* two instances of one GPU share its node */
                json_array_append(nodes, node);
        }
        merge_env(env, json_object_get(e, "env"));
        json_array_extend(net, json_object_get(e, "netDevices"));
    }
    *out = json_pack("{s:o, s:o, s:o}", "deviceNodes", nodes ? nodes : json_array(), "mounts",
                     mounts ? mounts : json_array(), "env", env);
    if (*out && json_array_size(net) > 0)
        json_object_set_new(*out, "netDevices", net);
    else
        json_decref(net);
    return *out ? 0 : ts_err_set(err, TS_ENOMEM, "cdi: out of memory");
}
