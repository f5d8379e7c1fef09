/*
 * launch_cgroup_v1.c - per-task limits on the cgroup v1 hierarchies, for the
 * hosts (Debian 12 and RHEL 8 installs among them, and most CI machines)
 * whose controllers are bound to cgroup v1, where cgroup v2 cannot limit.
 *
 * v1 has one hierarchy per controller (or per group of co-mounted ones), so a
 * task's cgroup is one cgroup path, <parent>/agent-<hash>/tessera-<task id>,
 * made in each hierarchy it joins: memory (memory.limit_in_bytes, and
 * memory.memsw.limit_in_bytes where swap accounting exists, so the limit is
 * not escaped into swap), cpu (cpu.cfs_quota_us over cpu.cfs_period_us),
 * cpuacct (its usage, where mounted), pids (pids.max), devices (deny all,
 * then allow the standard nodes and only the task's GPUs) and freezer (to
 * stop the whole tree at once: a frozen cgroup cannot fork, so killing what
 * it lists and thawing it leaves nothing, whatever left the task's session).
 * cpuset and blkio are not joined: they limit nothing the job spec asks for.
 *
 * The parent is /tessera by default (or the configured cgroup path) at the
 * top of each hierarchy, as other batch systems do on v1. agent-<hash>, a
 * hash of the agent's record directory, keeps two agents of one host (tests,
 * several clusters) apart; one agent per record directory is the rule.
 *
 * Everything reached from agent_cg1_kill only makes system calls: the keeper
 * calls it.
 *
 * _GNU_SOURCE: strtok_r, realpath's PATH_MAX use with glibc.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include "launch_cgroup.h"

#define V1_DEFAULT_PARENT "/tessera"
#define FREEZE_WAIT_TRIES 200        /* x FREEZE_WAIT_NS: a freeze takes microseconds */
#define FREEZE_WAIT_NS 1000000L
#define KILL_ROUNDS 20               /* then: kill what is still listed, bounded */
#define KILL_ROUND_NS 5000000L
#define CREATE_TRIES 3               /* a keeper may remove the agent's directory meanwhile */
#define MOUNTINFO_LINE_MAX 4096
#define PROC_DEVICES_LINE_MAX 256
#define CGROUP_V1_MAGIC 0x27e0ebL   /* statfs f_type of a cgroup v1 hierarchy */

static const struct {
    const char *name;
    bool required;
    const char *probe_file; /* must be writable in a fresh child */
} CTL[TS_CG_NCTL] = {
    [TS_CG_MEMORY] = {"memory", true, "memory.limit_in_bytes"},
    [TS_CG_CPU] = {"cpu", true, "cpu.cfs_quota_us"},
    [TS_CG_CPUACCT] = {"cpuacct", false, NULL},
    [TS_CG_PIDS] = {"pids", true, "pids.max"},
    [TS_CG_DEVICES] = {"devices", false, "devices.deny"},
    [TS_CG_FREEZER] = {"freezer", true, "freezer.state"},
};

/* What every task may open: the nodes an OCI runtime allows a container by
 * default (null, zero, full, random, urandom, tty, ptmx and pseudo-terminals,
 * creating any node), fuse and tun, and the GPU driver's shared nodes
 * (nvidia-modeset, nvidiactl). Its own GPUs and the driver's and fabric's
 * dynamic majors (NAMED_MAJORS) are added per task. */
static const char *const DEVICE_ALLOW[] = {
    "c *:* m", "b *:* m", "c 1:3 rwm", "c 1:5 rwm", "c 1:7 rwm", "c 1:8 rwm", "c 1:9 rwm",
    "c 5:0 rwm", "c 5:2 rwm", "c 136:* rwm", "c 10:200 rwm", "c 10:229 rwm",
    "c 195:254 rwm", "c 195:255 rwm",
};

/* Character majors of /proc/devices a task may use whole: the unified memory,
 * MIG capability and NVLink/NVSwitch nodes of the driver (MIG instances are
 * not told apart yet, as with cgroup v2), and InfiniBand verbs for NCCL. */
static const char *const NAMED_MAJORS[] = {
    "nvidia-uvm", "nvidia-caps", "nvidia-nvlink", "nvidia-nvswitch",
    "nvidia-caps-imex-channels", "infiniband_verbs", "infiniband_mad",
};

/* word is one of the comma-separated options of opts. */
static bool has_option(const char *opts, const char *word)
{
    size_t wl = strlen(word);
    for (const char *p = opts; p != NULL; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
        if (strncmp(p, word, wl) == 0 && (p[wl] == ',' || p[wl] == '\0'))
            return true;
    return false;
}

/* Where each controller's v1 hierarchy is mounted ("" where it is not). */
static int v1_mounts(char mnt[TS_CG_NCTL][TS_CG_PATH_MAX])
{
    for (int c = 0; c < TS_CG_NCTL; c++)
        mnt[c][0] = '\0';
    FILE *f = fopen("/proc/self/mountinfo", "re");
    if (f == NULL)
        return -1;
    char line[MOUNTINFO_LINE_MAX];
    while (fgets(line, sizeof line, f) != NULL) {
        line[strcspn(line, "\n")] = '\0';
        char *sep = strstr(line, " - ");
        if (sep == NULL || strncmp(sep + 3, "cgroup ", 7) != 0)
            continue;
        char *opts = strchr(sep + 3 + 7, ' '); /* after the source: the super options */
        if (opts == NULL)
            continue;
        opts++;
        *sep = '\0';
        /* fields: id parent maj:min root mountpoint ... */
        char *save = NULL, *tok = strtok_r(line, " ", &save);
        for (int i = 0; tok != NULL && i < 4; i++)
            tok = strtok_r(NULL, " ", &save);
        if (tok == NULL || strchr(tok, '\\') != NULL || strlen(tok) >= TS_CG_PATH_MAX / 2)
            continue; /* an escaped or absurd mount point: not ours to use */
        for (int c = 0; c < TS_CG_NCTL; c++)
            if (mnt[c][0] == '\0' && has_option(opts, CTL[c].name))
                memcpy(mnt[c], tok, strlen(tok) + 1);
    }
    fclose(f);
    return 0;
}

int agent_cg1_dirs(const char *path, ts_cg_dirs *d)
{
    char mnt[TS_CG_NCTL][TS_CG_PATH_MAX];
    d->v1 = true;
    d->n = 0;
    if (path[0] != '/' || strstr(path, "/.") != NULL || v1_mounts(mnt) != 0)
        return -1; /* a record's path stays inside the hierarchies */
    for (int c = 0; c < TS_CG_NCTL; c++) {
        if (mnt[c][0] == '\0')
            continue;
        char full[TS_CG_PATH_MAX];
        if (snprintf(full, sizeof full, "%s%s", mnt[c], path) >= (int)sizeof full) {
            d->n = 0;
            return -1;
        }
        int at = -1;
        for (int i = 0; i < d->n && at < 0; i++)
            if (strcmp(d->dir[i], full) == 0)
                at = i; /* co-mounted with an earlier controller */
        if (at < 0) {
            at = d->n++;
            memcpy(d->dir[at], full, strlen(full) + 1);
        }
        d->at[c] = at;
    }
    return d->n > 0 ? 0 : -1;
}

/* mkdir -p of dir, whose first `keep` bytes (the mount) exist. */
static int make_dirs(char *dir, size_t keep)
{
    for (char *p = dir + keep + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        int rc = mkdir(dir, 0755);
        *p = '/';
        if (rc != 0 && errno != EEXIST)
            return -1;
    }
    return mkdir(dir, 0755) == 0 || errno == EEXIST ? 0 : -1;
}

static bool parent_ok(const char *p)
{
    size_t n = strlen(p);
    return n >= 1 && n < TS_CG_PATH_MAX / 4 && p[0] == '/' && strstr(p, "/.") == NULL &&
           strstr(p, "//") == NULL && strchr(p, '\n') == NULL && (n == 1 || p[n - 1] != '/');
}

void agent_cg1_probe(const char *parent, ts_launch_caps *caps, char *why, size_t wl)
{
    const char *rel = parent != NULL && parent[0] != '\0' ? parent : V1_DEFAULT_PARENT;
    struct statfs sfs;
    if (!parent_ok(rel) || (statfs(rel, &sfs) == 0 && (long)sfs.f_type == CGROUP_V1_MAGIC)) {
        agent_say(why, wl, "cgroup parent %s: not a cgroup path such as /tessera, the same in every "
                     "v1 hierarchy (or a cgroup2 directory)", rel);
        return;
    }
    char mnt[TS_CG_NCTL][TS_CG_PATH_MAX];
    if (v1_mounts(mnt) != 0) {
        agent_say(why, wl, "/proc/self/mountinfo: %s", strerror(errno));
        return;
    }
    for (int c = 0; c < TS_CG_NCTL; c++)
        if (CTL[c].required && mnt[c][0] == '\0') {
            agent_say(why, wl, "no %s hierarchy mounted", CTL[c].name);
            return;
        }
    char probe[TS_CG_PATH_MAX];
    agent_say(probe, sizeof probe, "%s/tessera-probe-%ld", strcmp(rel, "/") == 0 ? "" : rel,
        (long)getpid());
    ts_cg_dirs d;
    memset(&d, 0, sizeof d);
    for (int c = 0; c < TS_CG_NCTL; c++)
        d.at[c] = -1;
    if (agent_cg1_dirs(probe, &d) != 0) {
        agent_say(why, wl, "cgroup path %s: too long", probe);
        return;
    }
    bool ok = true;
    for (int c = 0; ok && c < TS_CG_NCTL; c++) {
        if (d.at[c] < 0)
            continue;
        char *dir = d.dir[d.at[c]];
        if (make_dirs(dir, strlen(mnt[c])) != 0) {
            agent_say(why, wl, "mkdir %s: %s", dir, strerror(errno));
            ok = false;
            break;
        }
        if (CTL[c].probe_file == NULL || c == TS_CG_DEVICES)
            continue;
        char path[TS_CG_PATH_MAX + 64];
        agent_say(path, sizeof path, "%s/%s", dir, CTL[c].probe_file);
        if (access(path, W_OK) != 0) {
            agent_say(why, wl, "%s: %s", path, strerror(errno));
            ok = false;
        }
    }
    if (ok) {
        caps->cgroup = true;
        caps->cgroup_v1 = true;
        agent_say(caps->cgroup_parent, sizeof caps->cgroup_parent, "%s", rel);
        caps->cgroup_reason[0] = '\0';
        char path[TS_CG_PATH_MAX + 64];
        if (d.at[TS_CG_DEVICES] < 0) {
            agent_say(caps->devices_reason, sizeof caps->devices_reason,
                "no devices hierarchy mounted (cgroup v1)");
        } else {
            agent_say(path, sizeof path, "%s/devices.deny", d.dir[d.at[TS_CG_DEVICES]]);
            caps->devices = access(path, W_OK) == 0;
            if (caps->devices)
                caps->devices_reason[0] = '\0';
            else
                agent_say(caps->devices_reason, sizeof caps->devices_reason, "%s: %s", path,
                    strerror(errno));
        }
    }
    for (int i = 0; i < d.n; i++)
        rmdir(d.dir[i]);
}

/* agent-<FNV-1a of the record directory's real path>: this agent's part. */
static void scope_name(const ts_task_spec *s, char *out, size_t len)
{
    const char *dir = s->record_dir && s->record_dir[0] ? s->record_dir : s->log_dir;
    char real[PATH_MAX];
    if (realpath(dir, real) == NULL)
        agent_say(real, sizeof real, "%s", dir);
    unsigned long long h = FNV64_OFFSET;
    for (const unsigned char *p = (const unsigned char *)real; *p; p++)
        h = (h ^ *p) * FNV64_PRIME;
    agent_say(out, len, "agent-%016llx", h);
}

static int set_limits(const ts_cg_dirs *d, const ts_task_spec *s, char *why, size_t wl)
{
    char v[64];
    struct limit_file {
        int ctl;
        const char *file;
        long long value; /* < 0: "unlimited" as the file spells it */
        bool optional;   /* skipped where the kernel lacks the file */
    } w[6];
    int n = 0;
    long long quota = s->cpu_milli * TS_CG_CPU_PERIOD_US / 1000;
    if (s->cpu_milli > 0 && quota < TS_CG_CPU_QUOTA_MIN_US)
        quota = TS_CG_CPU_QUOTA_MIN_US;
    w[n++] = (struct limit_file){TS_CG_CPU, "cpu.cfs_period_us", TS_CG_CPU_PERIOD_US, false};
    w[n++] = (struct limit_file){TS_CG_CPU, "cpu.cfs_quota_us", s->cpu_milli > 0 ? quota : -1, false};
    /* the memory limit first: memsw may not go below it */
    w[n++] = (struct limit_file){TS_CG_MEMORY, "memory.limit_in_bytes",
                            s->memory_bytes > 0 ? s->memory_bytes : -1, false};
    w[n++] = (struct limit_file){TS_CG_MEMORY, "memory.memsw.limit_in_bytes",
                            s->memory_bytes > 0 ? s->memory_bytes : -1, true};
    /* a child inherits its parent's oom_kill_disable: a task past its limit
     * is killed, never left hanging */
    w[n++] = (struct limit_file){TS_CG_MEMORY, "memory.oom_control", 0, true};
    w[n++] = (struct limit_file){TS_CG_PIDS, "pids.max", s->pids_max > 0 ? s->pids_max : -1, false};
    for (int i = 0; i < n; i++) {
        const char *dir = d->dir[d->at[w[i].ctl]];
        if (w[i].value >= 0)
            agent_say(v, sizeof v, "%lld", w[i].value);
        else
            agent_say(v, sizeof v, "%s", w[i].ctl == TS_CG_PIDS ? "max" : "-1");
        if (agent_cg_write(dir, w[i].file, v) != 0 && !(w[i].optional && errno == ENOENT)) {
            agent_say(why, wl, "%s/%s: writing \"%s\": %s", dir, w[i].file, v, strerror(errno));
            return -1;
        }
    }
    return 0;
}

int agent_cg1_create(const ts_launch_caps *caps, const ts_task_spec *s, char *path,
                  size_t path_len, ts_cg_dirs *d, char *why, size_t wl)
{
    char scope[32];
    scope_name(s, scope, sizeof scope);
    const char *rel = strcmp(caps->cgroup_parent, "/") == 0 ? "" : caps->cgroup_parent;
    if (snprintf(path, path_len, "%s/%s/tessera-%s", rel, scope, s->task_id) >=
            (int)path_len ||
        agent_cg1_dirs(path, d) != 0) {
        agent_say(why, wl, "cgroup path %s/%s/tessera-%s: too long, or no cgroup v1 hierarchy",
            rel, scope, s->task_id);
        return -1;
    }
    for (int c = 0; c < TS_CG_NCTL; c++)
        if (CTL[c].required && d->at[c] < 0) {
            agent_say(why, wl, "no %s hierarchy mounted", CTL[c].name);
            return -1;
        }
    size_t mount_len[TS_CG_NCTL];
    for (int i = 0; i < d->n; i++)
        mount_len[i] = strlen(d->dir[i]) - strlen(path);
    for (int i = 0; i < d->n; i++) {
        char *dir = d->dir[i];
        int rc = -1;
        for (int t = 0; t < CREATE_TRIES && rc != 0; t++) {
            char up[TS_CG_PATH_MAX];
            memcpy(up, dir, sizeof up);
            *strrchr(up, '/') = '\0';
            if (make_dirs(up, mount_len[i]) != 0)
                break;
            /* an old directory of this id (a start that died) is taken over empty */
            rc = mkdir(dir, 0755);
            if (rc != 0 && errno == EEXIST && rmdir(dir) == 0)
                rc = mkdir(dir, 0755);
            if (rc != 0 && errno != ENOENT)
                break;
        }
        if (rc != 0) {
            agent_say(why, wl, "mkdir %s: %s", dir, strerror(errno));
            d->n = i;
            agent_cg_remove(d);
            return -1;
        }
    }
    if (set_limits(d, s, why, wl) != 0) {
        agent_cg_remove(d);
        return -1;
    }
    return 0;
}

/* The char major /proc/devices gives a name, or -1. */
static int char_major(FILE *f, const char *name)
{
    rewind(f);
    char line[PROC_DEVICES_LINE_MAX], dev[PROC_DEVICES_LINE_MAX];
    bool chars = false;
    int major;
    while (fgets(line, sizeof line, f) != NULL) {
        if (strncmp(line, "Character devices:", 18) == 0)
            chars = true;
        else if (strncmp(line, "Block devices:", 14) == 0)
            chars = false;
        else if (chars && sscanf(line, "%d %255s", &major, dev) == 2 && strcmp(dev, name) == 0)
            return major;
    }
    return -1;
}

/* The minor /proc/misc gives a misc device (major 10), or -1. */
static int misc_minor(const char *name)
{
    FILE *f = fopen("/proc/misc", "re");
    if (f == NULL)
        return -1;
    char dev[PROC_DEVICES_LINE_MAX];
    int minor, found = -1;
    while (found < 0 && fscanf(f, "%d %255s", &minor, dev) == 2)
        if (strcmp(dev, name) == 0)
            found = minor;
    fclose(f);
    return found;
}

int agent_cg1_limit_devices(const ts_cg_dirs *d, const ts_devnum *devs, size_t ndev, char *why,
                         size_t wl)
{
    if (d->at[TS_CG_DEVICES] < 0) {
        agent_say(why, wl, "no devices hierarchy mounted (cgroup v1)");
        return -1;
    }
    const char *dir = d->dir[d->at[TS_CG_DEVICES]];
    if (agent_cg_write(dir, "devices.deny", "a") != 0) {
        agent_say(why, wl, "%s/devices.deny: writing \"a\": %s", dir, strerror(errno));
        return -1;
    }
    char entry[64];
    size_t nfixed = sizeof DEVICE_ALLOW / sizeof *DEVICE_ALLOW;
    size_t nnamed = sizeof NAMED_MAJORS / sizeof *NAMED_MAJORS;
    FILE *pd = fopen("/proc/devices", "re");
    for (size_t i = 0; i < nfixed + nnamed + ndev + 1; i++) {
        if (i < nfixed) {
            agent_say(entry, sizeof entry, "%s", DEVICE_ALLOW[i]);
        } else if (i < nfixed + nnamed) {
            int major = pd ? char_major(pd, NAMED_MAJORS[i - nfixed]) : -1;
            if (major < 0)
                continue; /* no such driver on this node */
            agent_say(entry, sizeof entry, "c %d:* rwm", major);
        } else if (i < nfixed + nnamed + ndev) {
            const ts_devnum *g = &devs[i - nfixed - nnamed];
            if (g->major != TS_NVIDIA_GPU_MAJOR || g->minor >= TS_NVIDIA_GPU_MINOR_END)
                continue;
            agent_say(entry, sizeof entry, "c %u:%u rwm", g->major, g->minor);
        } else {
            int minor = misc_minor("rdma_cm"); /* RDMA connection manager, for NCCL */
            if (minor < 0)
                continue;
            agent_say(entry, sizeof entry, "c 10:%d rwm", minor);
        }
        if (agent_cg_write(dir, "devices.allow", entry) != 0) {
            agent_say(why, wl, "%s/devices.allow: writing \"%s\": %s", dir, entry, strerror(errno));
            if (pd)
                fclose(pd);
            return -1;
        }
    }
    if (pd)
        fclose(pd);
    return 0;
}

/* Some process is listed in dir's cgroup.procs. */
static bool listed(const char *dir)
{
    char buf[8];
    return agent_cg_read(dir, "cgroup.procs", buf, sizeof buf) == 0 && buf[0] != '\0';
}

void agent_cg1_kill(const ts_cg_dirs *d)
{
    int fz = d->at[TS_CG_FREEZER];
    if (fz >= 0 && agent_cg_write(d->dir[fz], "freezer.state", "FROZEN") == 0) {
        char state[32];
        for (int i = 0; i < FREEZE_WAIT_TRIES; i++) {
            if (agent_cg_read(d->dir[fz], "freezer.state", state, sizeof state) == 0 &&
                strncmp(state, "FROZEN", 6) == 0)
                break;
            struct timespec ts = {0, FREEZE_WAIT_NS};
            nanosleep(&ts, NULL);
        }
        agent_cg_kill_listed(d->dir[fz]); /* nothing forks meanwhile: the list is whole */
        agent_cg_write(d->dir[fz], "freezer.state", "THAWED"); /* the killed then die */
    }
    /* without a freezer (or after one that did not freeze): until none is left */
    int p = d->at[TS_CG_PIDS] >= 0 ? d->at[TS_CG_PIDS] : 0;
    for (int r = 0; r < KILL_ROUNDS && listed(d->dir[p]); r++) {
        agent_cg_kill_listed(d->dir[p]);
        struct timespec ts = {0, KILL_ROUND_NS};
        nanosleep(&ts, NULL);
    }
}
