/*
 * image_bundle.c - a task's OCI runtime bundle: its root filesystem and the
 * config.json an OCI runtime (runc) runs.
 *
 * The root filesystem is an overlay: the image's prepared root filesystem,
 * shared by every task of the image and never written, below; the task's own
 * upper directory above, so a task may write anywhere in its root and no
 * other task sees it. Mounting it is one mount(2): starting a container costs
 * no copy of the image. Where overlayfs is refused, a read-only bind of the
 * image's root is used instead (and the config says readonly).
 *
 * config.json: the process (args, env, cwd, uid/gid, no new privileges, the
 * capabilities of Docker's default set), the namespaces (pid, ipc, uts,
 * mount; the host's network, which the task's ranks address each other on),
 * the standard /proc, /dev, /sys mounts plus the caller's binds, and
 * linux.resources (memory, cpu quota, pids) with cgroupsPath: the runtime
 * enforces them on cgroup v1 and v2 alike. Devices: none but the runtime's
 * defaults, plus exactly those of the task's allocation from the node's CDI
 * spec (agent/cdi.h): their nodes, an allow rule for each, the driver
 * libraries bound read-only, the visible-devices variables.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>
#include <linux/capability.h>

#include "agent/trash.h"
#include "image.h"

#define CPU_PERIOD_US 100000
#define MILLI_PER_CPU 1000

/* A container's capabilities (Docker's default set less CAP_NET_RAW, as
 * Podman's): in its config.json, and what an exec session into it keeps
 * (agent_container_cap_mask). Its tasks share the node's network: a root
 * task with raw sockets would read every tenant's loopback traffic. */
static const struct {
    const char *name;
    int bit;
} CAPS[] = {{"CAP_CHOWN", CAP_CHOWN},
            {"CAP_DAC_OVERRIDE", CAP_DAC_OVERRIDE},
            {"CAP_FSETID", CAP_FSETID},
            {"CAP_FOWNER", CAP_FOWNER},
            {"CAP_SETGID", CAP_SETGID},
            {"CAP_SETUID", CAP_SETUID},
            {"CAP_SETFCAP", CAP_SETFCAP},
            {"CAP_SETPCAP", CAP_SETPCAP},
            {"CAP_NET_BIND_SERVICE", CAP_NET_BIND_SERVICE},
            {"CAP_SYS_CHROOT", CAP_SYS_CHROOT},
            {"CAP_KILL", CAP_KILL},
            {"CAP_AUDIT_WRITE", CAP_AUDIT_WRITE}};
#define NCAPS (sizeof CAPS / sizeof CAPS[0])

uint64_t agent_container_cap_mask(void)
{
    uint64_t m = 0;
    for (size_t i = 0; i < NCAPS; i++)
        m |= (uint64_t)1 << CAPS[i].bit;
    return m;
}

static json_t *cap_names(void)
{
    json_t *a = json_array();
    for (size_t i = 0; i < NCAPS; i++)
        json_array_append_new(a, json_string(CAPS[i].name));
    return a;
}

static const char *const MASKED[] = {
    "/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
    "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/sys/firmware",
    "/proc/scsi", NULL};

static const char *const READONLY[] = {
    "/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger", NULL};

static json_t *strings(const char *const *v)
{
    json_t *a = json_array();
    for (size_t i = 0; v && v[i]; i++)
        json_array_append_new(a, json_string(v[i]));
    return a;
}

static json_t *mount_of(const char *dest, const char *type, const char *src,
                        const char *const *opts)
{
    return json_pack("{s:s, s:s, s:s, s:o}", "destination", dest, "type", type, "source", src,
                     "options", strings(opts));
}

static json_t *std_mounts(void)
{
    json_t *m = json_array();
    json_array_append_new(m, mount_of("/proc", "proc", "proc", NULL));
    json_array_append_new(m, mount_of("/dev", "tmpfs", "tmpfs",
                                      (const char *const[]){"nosuid", "strictatime", "mode=755",
                                                            "size=65536k", NULL}));
    json_array_append_new(m, mount_of("/dev/pts", "devpts", "devpts",
                                      (const char *const[]){"nosuid", "noexec", "newinstance",
                                                            "ptmxmode=0666", "mode=0620",
                                                            NULL}));
    json_array_append_new(m, mount_of("/dev/shm", "tmpfs", "shm",
                                      (const char *const[]){"nosuid", "noexec", "nodev",
                                                            "mode=1777", "size=65536k", NULL}));
    json_array_append_new(m, mount_of("/dev/mqueue", "mqueue", "mqueue",
                                      (const char *const[]){"nosuid", "noexec", "nodev", NULL}));
    json_array_append_new(m, mount_of("/sys", "sysfs", "sysfs",
                                      (const char *const[]){"nosuid", "noexec", "nodev", "ro",
                                                            NULL}));
    return m;
}

/* "uid[:gid]" with numbers only. */
static bool numeric_user(const char *s, long *uid, long *gid)
{
    char *end;
    if (!s || !isdigit((unsigned char)*s))
        return false;
    *uid = strtol(s, &end, 10);
    *gid = *uid ? *uid : 0;
    if (*end == ':') {
        if (!isdigit((unsigned char)end[1]))
            return false;
        *gid = strtol(end + 1, &end, 10);
    }
    return *end == 0 && *uid >= 0 && *gid >= 0;
}

static bool env_name_is(const char *kv, const char *name)
{
    size_t n = strlen(name);
    return !strncmp(kv, name, n) && kv[n] == '=';
}

/* The image's Env, then the task's (later wins), except PATH and HOME: the
 * image's own, since the host's mean nothing inside it; first, where given,
 * the folder a Slurm job's srun is bound at. */
static json_t *merged_env(json_t *img_env, const char *const *env, const char *path_first)
{
    json_t *out = json_array();
    size_t i;
    json_t *v;
    json_array_foreach(img_env, i, v) {
        if (json_is_string(v))
            json_array_append(out, v);
    }
    bool img_path = false;
    json_array_foreach(out, i, v) img_path |= env_name_is(json_string_value(v), "PATH");
    if (!img_path)
        json_array_append_new(out, json_string("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:"
                                               "/usr/bin:/sbin:/bin"));
    json_array_foreach(out, i, v) {
        const char *kv = json_string_value(v);
        if (path_first && *path_first && env_name_is(kv, "PATH")) {
            char *np = NULL;
            if (asprintf(&np, "PATH=%s%s%s", path_first, kv[5] ? ":" : "", kv + 5) > 0)
                json_array_set_new(out, i, json_string(np));
            free(np);
        }
    }
    for (size_t k = 0; env && env[k]; k++) {
        const char *eq = strchr(env[k], '=');
        if (!eq || env_name_is(env[k], "PATH") || env_name_is(env[k], "HOME"))
            continue;
        size_t n = (size_t)(eq - env[k]);
        for (size_t j = json_array_size(out); j-- > 0;) {
            const char *o = json_string_value(json_array_get(out, j));
            if (!strncmp(o, env[k], n + 1))
                json_array_remove(out, j);
        }
        json_array_append_new(out, json_string(env[k]));
    }
    return out;
}

/* Where the overlay's upper and work folders go: dir itself, or the
 * layer's own filesystem (dir/scratch) of b->write_limit_mib. */
static void layer_home(const ts_bundle_spec *b, char *home, size_t n)
{
    snprintf(home, n, "%s", b->dir);
    if (b->write_limit_mib <= 0)
        return;
    char why[256];
    if (agent_bundle_scratch(b->dir, b->write_limit_mib, why, sizeof why) == 0) {
        snprintf(home, n, "%s/" BUNDLE_SCRATCH_DIR, b->dir);
        return;
    }
    static int said; /* once per agent: the same cause on every start */
    if (!said++)
        fprintf(stderr, "tessera-agent: a container's writable layer on a filesystem of its "
                "own (--container-write-mib): %s; the layers stay on the state disk, "
                "unbounded\n", why);
}

static int mount_rootfs(const ts_bundle_spec *b, bool *readonly, ts_err *err)
{
    char up[840], work[840], root[800], opts[3000], home[800];
    if (strchr(b->image->rootfs, ',') || strchr(b->dir, ','))
        return ts_err_set(err, TS_EINVAL, "bundle %s: a path with a comma", b->dir);
    layer_home(b, home, sizeof home);
    snprintf(up, sizeof up, "%s/upper", home);
    snprintf(work, sizeof work, "%s/work", home);
    snprintf(root, sizeof root, "%s/rootfs", b->dir);
    if ((mkdir(up, 0755) && errno != EEXIST) || (mkdir(work, 0700) && errno != EEXIST) ||
        (mkdir(root, 0755) && errno != EEXIST))
        return ts_err_set(err, TS_EIO, "bundle %s: %s", b->dir, strerror(errno));
    snprintf(opts, sizeof opts, "lowerdir=%s,upperdir=%s,workdir=%s", b->image->rootfs, up, work);
    *readonly = false;
    if (mount("overlay", root, "overlay", MS_NODEV | MS_NOSUID, opts) == 0)
        return 0;
    int e = errno;
    if (mount(b->image->rootfs, root, NULL, MS_BIND, NULL) != 0 ||
        mount(NULL, root, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV,
              NULL) != 0)
        return ts_err_set(err, TS_EIO, "bundle %s: overlay (%s) and bind (%s) both refused",
                          b->dir, strerror(e), strerror(errno));
    *readonly = true;
    return 0;
}

static json_t *resources(const ts_bundle_spec *b)
{
    json_t *r = json_object();
    if (b->memory_bytes > 0)
        json_object_set_new(r, "memory", json_pack("{s:I}", "limit",
                                                   (json_int_t)b->memory_bytes));
    if (b->cpu_milli > 0)
        json_object_set_new(r, "cpu", json_pack("{s:I, s:I}", "quota",
                                                (json_int_t)(b->cpu_milli * CPU_PERIOD_US /
                                                             MILLI_PER_CPU),
                                                "period", (json_int_t)CPU_PERIOD_US));
    if (b->pids_max > 0)
        json_object_set_new(r, "pids", json_pack("{s:I}", "limit", (json_int_t)b->pids_max));
    /* no device but the runtime's defaults (null, zero, tty, random...) */
    json_object_set_new(r, "devices", json_pack("[{s:b, s:s}]", "allow", 0, "access", "rwm"));
    return r;
}

#define DEVICE_FILE_MODE 0666

/* process.env with kv set: an entry of the same name replaced, else added. */
static void env_set(json_t *env, const char *kv)
{
    const char *eq = strchr(kv, '=');
    size_t n = eq ? (size_t)(eq - kv) + 1 : 0, i;
    json_t *v;
    json_array_foreach(env, i, v) {
        if (n && strncmp(json_string_value(v), kv, n) == 0) {
            json_array_set_new(env, i, json_string(kv));
            return;
        }
    }
    json_array_append_new(env, json_string(kv));
}

int agent_bundle_apply_cdi(json_t *cfg, const json_t *edits, ts_err *err)
{
    json_t *linux = json_object_get(cfg, "linux");
    json_t *res = json_object_get(linux, "resources");
    if (!linux || !res) /* agent_bundle_make always writes both */
        return ts_err_set(err, TS_EINVAL, "config.json: no linux.resources");
    json_t *devs = json_array(), *allow = json_object_get(res, "devices");
    if (!allow) {
        allow = json_array();
        json_object_set_new(res, "devices", allow);
    }
    size_t i;
    json_t *n;
    json_array_foreach(json_object_get(edits, "deviceNodes"), i, n) {
        const char *path = json_string_value(json_object_get(n, "path"));
        const char *type = json_string_value(json_object_get(n, "type"));
        json_t *major = json_object_get(n, "major"), *minor = json_object_get(n, "minor");
        if (!path || path[0] != '/' || !type || !json_is_integer(major) ||
            !json_is_integer(minor)) {
            json_decref(devs);
            return ts_err_set(err, TS_EINVAL,
                              "cdi deviceNodes[%zu]: an absolute path, a type and major/minor "
                              "numbers are needed",
                              i);
        }
        json_array_append_new(devs, json_pack("{s:s, s:s, s:O, s:O, s:i, s:i, s:i}", "path", path,
                                              "type", type, "major", major, "minor", minor,
                                              "fileMode", DEVICE_FILE_MODE, "uid", 0, "gid", 0));
        json_array_append_new(allow, json_pack("{s:b, s:s, s:O, s:O, s:s}", "allow", 1, "type",
                                               type, "major", major, "minor", minor, "access",
                                               "rwm"));
    }
    json_object_set_new(linux, "devices", devs);
    json_t *mounts = json_object_get(cfg, "mounts"), *m;
    json_array_foreach(json_object_get(edits, "mounts"), i, m) {
        const char *host = json_string_value(json_object_get(m, "hostPath"));
        const char *dest = json_string_value(json_object_get(m, "containerPath"));
        if (!host || !dest || host[0] != '/' || dest[0] != '/')
            return ts_err_set(err, TS_EINVAL,
                              "cdi mounts[%zu]: absolute hostPath and containerPath are needed",
                              i);
        json_array_append_new(mounts, mount_of(dest, "bind", host,
                                               (const char *const[]){"rbind", "ro", "nosuid",
                                                                     "nodev", NULL}));
    }
    json_t *env = json_object_get(json_object_get(cfg, "process"), "env"), *e;
    json_array_foreach(json_object_get(edits, "env"), i, e) {
        if (json_string_value(e) && strchr(json_string_value(e), '='))
            env_set(env, json_string_value(e));
    }
    return 0;
}

int agent_bundle_make(const ts_bundle_spec *b, ts_err *err)
{
    if (!b->dir || !b->image || !b->container_id)
        return ts_err_set(err, TS_EINVAL, "bundle: dir, image and container_id are required");
    json_t *img = json_load_file(b->image->config_path, 0, NULL);
    json_t *ic = json_object_get(img, "config");
    json_t *args = json_array();
    if (b->argv && b->argv[0]) {
        json_t *a = strings(b->argv);
        json_array_extend(args, a);
        json_decref(a);
    } else {
        json_array_extend(args, json_object_get(ic, "Entrypoint"));
        json_array_extend(args, json_object_get(ic, "Cmd"));
    }
    long uid = 0, gid = 0;
    const char *user = b->user ? b->user : json_string_value(json_object_get(ic, "User"));
    int rc = 0;
    if (json_array_size(args) == 0)
        rc = ts_err_set(err, TS_EINVAL, "command: empty, and the image names none");
    else if (user && *user && !numeric_user(user, &uid, &gid))
        rc = ts_err_set(err, TS_EINVAL, "user: \"%s\": a numeric uid[:gid] is needed", user);
    const char *cwd = b->workdir ? b->workdir
                                 : json_string_value(json_object_get(ic, "WorkingDir"));
    if (!cwd || !*cwd)
        cwd = "/";
    if (!rc && cwd[0] != '/')
        rc = ts_err_set(err, TS_EINVAL, "workdir: \"%s\": must be an absolute path", cwd);
    if (!rc && mkdir(b->dir, 0700) != 0 && errno != EEXIST)
        rc = ts_err_set(err, TS_EIO, "bundle %s: %s", b->dir, strerror(errno));
    bool readonly = false;
    if (!rc && (rc = mount_rootfs(b, &readonly, err)) != 0)
        agent_bundle_remove(b->dir); /* with the layer's filesystem, if it was made */
    if (rc) {
        json_decref(args);
        json_decref(img);
        return rc;
    }
    json_t *mounts = std_mounts();
    for (size_t i = 0; i < b->nmounts; i++) {
        const ts_bundle_mount *m = &b->mounts[i];
        json_array_append_new(mounts, mount_of(m->container_path, "bind", m->host_path,
                                               (const char *const[]){
                                                   "rbind", "nosuid", "nodev",
                                                   m->read_write ? "rw" : "ro", NULL}));
    }
    json_t *caps = cap_names();
    json_t *proc = json_pack(
        "{s:b, s:{s:I, s:I}, s:o, s:o, s:s, s:b, s:{s:O, s:O, s:O}}",
        "terminal", b->terminal, "user", "uid", (json_int_t)uid, "gid", (json_int_t)gid, "args", args,
        "env", merged_env(json_object_get(ic, "Env"), b->env, b->path_first), "cwd", cwd,
        "noNewPrivileges", 1, "capabilities", "bounding", caps, "effective", caps, "permitted",
        caps);
    json_decref(caps);
    json_t *linux = json_pack(
        "{s:[{s:s}, {s:s}, {s:s}, {s:s}], s:o, s:o, s:o}", "namespaces", "type", "pid", "type",
        "ipc", "type", "uts", "type", "mount", "resources", resources(b), "maskedPaths",
        strings(MASKED), "readonlyPaths", strings(READONLY));
    if (b->cgroups_path)
        json_object_set_new(linux, "cgroupsPath", json_string(b->cgroups_path));
    json_t *cfg = json_pack("{s:s, s:o, s:{s:s, s:b}, s:s, s:o, s:o}", "ociVersion", "1.0.2",
                            "process", proc, "root", "path", "rootfs", "readonly", readonly,
                            "hostname", b->container_id, "mounts", mounts, "linux", linux);
    json_decref(img);
    if (b->cdi_edits && cfg && (rc = agent_bundle_apply_cdi(cfg, b->cdi_edits, err)) != 0) {
        json_decref(cfg);
        agent_bundle_remove(b->dir);
        return rc;
    }
    char path[800], tmp[820];
    snprintf(path, sizeof path, "%s/config.json", b->dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    if (!cfg || json_dump_file(cfg, tmp, JSON_INDENT(1)) != 0 || rename(tmp, path) != 0)
        rc = ts_err_set(err, TS_EIO, "bundle %s: config.json: cannot write", b->dir);
    json_decref(cfg);
    if (rc)
        agent_bundle_remove(b->dir);
    return rc;
}

/* rm -rf, waited for: only where the bundle cannot be moved aside. */
static void bundle_rm_now(const char *dir)
{
    pid_t pid = fork();
    if (pid == 0) {
        /* the upper layer holds whatever the task made: rm -rf does not follow links */
        execl("/bin/rm", "rm", "-rf", "--one-file-system", "--", dir, (char *)NULL);
        _exit(127);
    }
    if (pid > 0) {
        int st;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
            ;
    }
}

void agent_bundle_remove(const char *dir)
{
    char p[800];
    snprintf(p, sizeof p, "%s/rootfs", dir);
    umount2(p, MNT_DETACH);
    /* the writable layer's own filesystem, if it has one (its loop device
     * clears itself once the overlay above lets it go) */
    snprintf(p, sizeof p, "%s/" BUNDLE_SCRATCH_DIR, dir);
    umount2(p, MNT_DETACH | UMOUNT_NOFOLLOW);
    /* the upper layer holds as many files as the task made: moved aside into
     * <bundles>/.trash at once and removed behind (trash.h), so that the main
     * loop, which calls this, does not wait on them */
    char trash[800];
    snprintf(trash, sizeof trash, "%s", dir);
    char *slash = strrchr(trash, '/');
    if (slash && slash != trash) {
        snprintf(slash, sizeof trash - (size_t)(slash - trash), "/" BUNDLE_TRASH_DIR);
        if (agent_trash_put(dir, trash) == 0)
            return;
    }
    bundle_rm_now(dir);
}
