/*
 * launch_cgroup.c - per-task cgroups: the choice between v2 and v1, cgroup v2
 * itself, and what both share (killing, OOM counts, removal).
 *
 * cgroup v2: a task gets <parent>/tessera-<task_id>, with cpu.max (milli-cores
 * as a quota over a 100 ms period), memory.max and pids.max. The parent is a
 * delegated cgroup2 directory from the configuration, or else the agent's own
 * cgroup; the probe checks everything a task start will need (cgroup2
 * filesystem, write access, the cpu/memory/pids controllers enabled for
 * children, a test child) so a start rarely discovers a problem the probe did
 * not report. Where it fails, the cgroup v1 hierarchies are probed instead
 * (launch_cgroup_v1.c), and a node with neither says why for both.
 *
 * cgroup v2 has no devices.allow file: device access is a BPF_PROG_TYPE_CGROUP_DEVICE
 * program. The one built here denies NVIDIA GPU nodes (char 195:0..253) except
 * the allowed minors and allows everything else (nvidiactl, nvidia-uvm, ...).
 * It is attached with BPF_F_ALLOW_MULTI so a program systemd put on an
 * ancestor still applies as well.
 *
 * _GNU_SOURCE: syscall() for bpf(2), which glibc does not wrap.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "launch_cgroup.h"
#include "launch_record.h"

void agent_say(char *buf, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, len, fmt, ap);
    va_end(ap);
}

#define CGROUP2_MAGIC 0x63677270L
#define BPF_INSNS_MAX 128
#define CGROUP_PROCS_CHUNK_BYTES 512
#define OOM_COUNTS_BYTES 512     /* memory.events / memory.oom_control: a few short lines */

static const char *const NEEDED_CONTROLLERS[] = {"cpu", "memory", "pids"};

/* dir + "/" + file into buf; -1 (ENAMETOOLONG) when it does not fit. */
static int join(char *buf, size_t len, const char *dir, const char *file)
{
    ts_sbuf b;
    agent_sb_init(&b, buf, len);
    agent_sb_str(&b, dir);
    agent_sb_str(&b, "/");
    agent_sb_str(&b, file);
    if (b.cut) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return 0;
}

int agent_cg_read(const char *dir, const char *file, char *buf, size_t len)
{
    char path[TS_CG_PATH_MAX + 64];
    if (join(path, sizeof path, dir, file) != 0)
        return -1;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
        return -1;
    size_t got = 0;
    ssize_t n = 0;
    while (got + 1 < len && ((n = read(fd, buf + got, len - 1 - got)) > 0 ||
                             (n < 0 && errno == EINTR)))
        got += n > 0 ? (size_t)n : 0;
    int e = errno;
    close(fd);
    buf[got] = '\0';
    if (n < 0) {
        errno = e;
        return -1;
    }
    return 0;
}

int agent_cg_write(const char *dir, const char *file, const char *text)
{
    char path[TS_CG_PATH_MAX + 64];
    if (join(path, sizeof path, dir, file) != 0)
        return -1;
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t len = strlen(text);
    ssize_t n;
    do
        n = write(fd, text, len);
    while (n < 0 && errno == EINTR);
    int e = errno;
    close(fd);
    if (n != (ssize_t)len) {
        errno = n < 0 ? e : EIO;
        return -1;
    }
    return 0;
}

static int read_small(const char *path, char *buf, size_t len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, len - 1);
    int e = errno;
    close(fd);
    if (n < 0) {
        errno = e;
        return -1;
    }
    buf[n] = '\0';
    return 0;
}

static int has_word(const char *list, const char *word)
{
    size_t wl = strlen(word);
    for (const char *p = list; (p = strstr(p, word)) != NULL; p += wl) {
        int start = p == list || p[-1] == ' ' || p[-1] == '\n';
        int end = p[wl] == '\0' || p[wl] == ' ' || p[wl] == '\n';
        if (start && end)
            return 1;
    }
    return 0;
}

/* The agent's own cgroup2 directory: the cgroup2 mount + the "0::" path. */
static int own_cgroup(char *out, size_t len, char *why, size_t why_len)
{
    char buf[4096];
    if (read_small("/proc/self/cgroup", buf, sizeof buf) != 0) {
        agent_say(why, why_len, "/proc/self/cgroup: %s", strerror(errno));
        return -1;
    }
    char *rel = strstr(buf, "0::");
    if (rel != buf && (rel == NULL || (rel = strstr(buf, "\n0::")) == NULL)) {
        agent_say(why, why_len, "no cgroup v2 entry in /proc/self/cgroup (cgroup v1 only)");
        return -1;
    }
    rel += rel[0] == '\n' ? 4 : 3;
    rel[strcspn(rel, "\n")] = '\0';

    FILE *f = fopen("/proc/self/mountinfo", "re");
    if (f == NULL) {
        agent_say(why, why_len, "/proc/self/mountinfo: %s", strerror(errno));
        return -1;
    }
    char line[4096], mnt[1024] = "";
    while (fgets(line, sizeof line, f) != NULL) {
        char *sep = strstr(line, " - ");
        if (sep == NULL || strncmp(sep + 3, "cgroup2 ", 8) != 0)
            continue;
        /* fields: id parent maj:min root mountpoint ... */
        char *save = NULL, *tok = strtok_r(line, " ", &save);
        for (int i = 0; tok != NULL && i < 4; i++)
            tok = strtok_r(NULL, " ", &save);
        if (tok != NULL)
            agent_say(mnt, sizeof mnt, "%s", tok);
        break;
    }
    fclose(f);
    if (mnt[0] == '\0') {
        agent_say(why, why_len, "no cgroup2 filesystem mounted");
        return -1;
    }
    if (snprintf(out, len, "%s%s", mnt, strcmp(rel, "/") == 0 ? "" : rel) >= (int)len) {
        agent_say(why, why_len, "cgroup path too long");
        return -1;
    }
    return 0;
}

/* The allow-list program; returns the instruction count. */
static int build_dev_prog(struct bpf_insn *p, const ts_devnum *devs, size_t ndev)
{
    int k = 0;
    for (size_t i = 0; i < ndev; i++)
        k += devs[i].major == TS_NVIDIA_GPU_MAJOR && devs[i].minor < TS_NVIDIA_GPU_MINOR_END;
    if (7 + k + 4 > BPF_INSNS_MAX)
        return -1;
    const int deny = 7 + k, allow = deny + 2;
    int n = 0;
#define INSN(c, d, s, o, i)                                                                  \
    (p[n] = (struct bpf_insn){.code = (c), .dst_reg = (d), .src_reg = (s), .off = (o),      \
                              .imm = (i)},                                                   \
     n++)
    INSN(BPF_LDX | BPF_W | BPF_MEM, 2, 1, 0, 0); /* access_type */
    INSN(BPF_ALU | BPF_AND | BPF_K, 2, 0, 0, 0xffff);
    INSN(BPF_JMP | BPF_JNE | BPF_K, 2, 0, (int16_t)(allow - 3), BPF_DEVCG_DEV_CHAR);
    INSN(BPF_LDX | BPF_W | BPF_MEM, 3, 1, 4, 0); /* major */
    INSN(BPF_JMP | BPF_JNE | BPF_K, 3, 0, (int16_t)(allow - 5), (int32_t)TS_NVIDIA_GPU_MAJOR);
    INSN(BPF_LDX | BPF_W | BPF_MEM, 4, 1, 8, 0); /* minor */
    INSN(BPF_JMP | BPF_JGE | BPF_K, 4, 0, (int16_t)(allow - 7),
         (int32_t)TS_NVIDIA_GPU_MINOR_END);
    for (size_t i = 0; i < ndev; i++)
        if (devs[i].major == TS_NVIDIA_GPU_MAJOR && devs[i].minor < TS_NVIDIA_GPU_MINOR_END)
            INSN(BPF_JMP | BPF_JEQ | BPF_K, 4, 0, (int16_t)(allow - (n + 1)),
                 (int32_t)devs[i].minor);
    INSN(BPF_ALU64 | BPF_MOV | BPF_K, 0, 0, 0, 0); /* deny */
    INSN(BPF_JMP | BPF_EXIT, 0, 0, 0, 0);
    INSN(BPF_ALU64 | BPF_MOV | BPF_K, 0, 0, 0, 1); /* allow */
    INSN(BPF_JMP | BPF_EXIT, 0, 0, 0, 0);
#undef INSN
    (void)deny;
    return n;
}

static int limit_devices_v2(const char *path, const ts_devnum *devs, size_t ndev, char *why,
                            size_t why_len)
{
    struct bpf_insn prog[BPF_INSNS_MAX];
    int n = build_dev_prog(prog, devs, ndev);
    if (n < 0) {
        agent_say(why, why_len, "too many GPU devices for the device filter");
        return -1;
    }
    static const char license[] = "GPL";
    union bpf_attr load;
    memset(&load, 0, sizeof load);
    load.prog_type = BPF_PROG_TYPE_CGROUP_DEVICE;
    load.insns = (uint64_t)(uintptr_t)prog;
    load.insn_cnt = (uint32_t)n;
    load.license = (uint64_t)(uintptr_t)license;
    int pfd = (int)syscall(SYS_bpf, BPF_PROG_LOAD, &load, sizeof load);
    if (pfd < 0) {
        agent_say(why, why_len, "bpf(BPF_PROG_LOAD) of the device filter: %s", strerror(errno));
        return -1;
    }
    int cfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (cfd < 0) {
        agent_say(why, why_len, "%s: %s", path, strerror(errno));
        close(pfd);
        return -1;
    }
    union bpf_attr att;
    memset(&att, 0, sizeof att);
    att.target_fd = (uint32_t)cfd;
    att.attach_bpf_fd = (uint32_t)pfd;
    att.attach_type = BPF_CGROUP_DEVICE;
    att.attach_flags = BPF_F_ALLOW_MULTI;
    int rc = (int)syscall(SYS_bpf, BPF_PROG_ATTACH, &att, sizeof att);
    if (rc != 0)
        agent_say(why, why_len, "bpf(BPF_PROG_ATTACH) to %s: %s", path, strerror(errno));
    close(cfd);
    close(pfd); /* the attachment keeps the program alive */
    return rc == 0 ? 0 : -1;
}

static void probe_v2(const char *parent, ts_launch_caps *caps)
{
    char *why = caps->cgroup_reason;
    const size_t wl = sizeof caps->cgroup_reason;
    agent_say(caps->devices_reason, sizeof caps->devices_reason, "no usable cgroup2 hierarchy");
    if (parent != NULL && parent[0] != '\0')
        agent_say(caps->cgroup_parent, sizeof caps->cgroup_parent, "%s", parent);
    else if (own_cgroup(caps->cgroup_parent, sizeof caps->cgroup_parent, why, wl) != 0)
        return;
    const char *dir = caps->cgroup_parent;

    struct statfs sfs;
    if (statfs(dir, &sfs) != 0) {
        agent_say(why, wl, "%s: %s", dir, strerror(errno));
        return;
    }
    if ((long)sfs.f_type != CGROUP2_MAGIC) {
        agent_say(why, wl, "%s: not a cgroup2 directory", dir);
        return;
    }
    if (access(dir, W_OK) != 0) {
        agent_say(why, wl, "%s: not writable by the agent: %s", dir, strerror(errno));
        return;
    }
    char path[1024], avail[512], enabled[512];
    agent_say(path, sizeof path, "%s/cgroup.controllers", dir);
    if (read_small(path, avail, sizeof avail) != 0) {
        agent_say(why, wl, "%s: %s", path, strerror(errno));
        return;
    }
    avail[strcspn(avail, "\n")] = '\0';
    char missing[64] = "";
    for (size_t i = 0; i < sizeof NEEDED_CONTROLLERS / sizeof *NEEDED_CONTROLLERS; i++)
        if (!has_word(avail, NEEDED_CONTROLLERS[i])) {
            strcat(missing, " ");
            strcat(missing, NEEDED_CONTROLLERS[i]);
        }
    if (missing[0] != '\0') {
        agent_say(why, wl, "%s: controllers%s not available (has: \"%s\"; in use by cgroup v1?)",
                 dir, missing, avail);
        return;
    }
    agent_say(path, sizeof path, "%s/cgroup.subtree_control", dir);
    if (read_small(path, enabled, sizeof enabled) != 0) {
        agent_say(why, wl, "%s: %s", path, strerror(errno));
        return;
    }
    for (size_t i = 0; i < sizeof NEEDED_CONTROLLERS / sizeof *NEEDED_CONTROLLERS; i++) {
        if (has_word(enabled, NEEDED_CONTROLLERS[i]))
            continue;
        char cmd[32];
        agent_say(cmd, sizeof cmd, "+%s", NEEDED_CONTROLLERS[i]);
        if (agent_cg_write(dir, "cgroup.subtree_control", cmd) != 0) {
            int e = errno;
            agent_say(why, wl, "%s/cgroup.subtree_control: cannot enable %s: %s%s", dir,
                     NEEDED_CONTROLLERS[i], strerror(e),
                     e == EBUSY ? " (the cgroup holds processes; configure a delegated parent)"
                                : "");
            return;
        }
    }
    char probe[1024];
    agent_say(probe, sizeof probe, "%s/tessera-probe-%ld", dir, (long)getpid());
    if (mkdir(probe, 0755) != 0) {
        agent_say(why, wl, "mkdir %s: %s", probe, strerror(errno));
        return;
    }
    agent_say(path, sizeof path, "%s/pids.max", probe);
    if (access(path, W_OK) != 0) {
        agent_say(why, wl, "%s: %s", path, strerror(errno));
        rmdir(probe);
        return;
    }
    caps->cgroup = true;
    why[0] = '\0';
    char dwhy[TS_LAUNCH_REASON_MAX];
    if (limit_devices_v2(probe, NULL, 0, dwhy, sizeof dwhy) == 0) {
        caps->devices = true;
        caps->devices_reason[0] = '\0';
    } else {
        agent_say(caps->devices_reason, sizeof caps->devices_reason, "%s", dwhy);
    }
    rmdir(probe);
}

static int create_v2(const ts_launch_caps *caps, const ts_task_spec *spec, char *path,
                     size_t path_len, ts_cg_dirs *dirs, char *why, size_t why_len)
{
    if (snprintf(path, path_len, "%s/tessera-%s", caps->cgroup_parent, spec->task_id) >=
            (int)path_len ||
        agent_cg_dirs_of(path, false, dirs) != 0) {
        agent_say(why, why_len, "cgroup path too long");
        return -1;
    }
    if (mkdir(path, 0755) != 0 && (errno != EEXIST || rmdir(path) != 0 || mkdir(path, 0755) != 0)) {
        agent_say(why, why_len, "mkdir %s: %s", path, strerror(errno));
        return -1;
    }
    char cpu[64] = "max", mem[32] = "max", pids[32] = "max";
    if (spec->cpu_milli > 0) {
        long long quota = spec->cpu_milli * TS_CG_CPU_PERIOD_US / 1000;
        agent_say(cpu, sizeof cpu, "%lld %lld",
            quota < TS_CG_CPU_QUOTA_MIN_US ? TS_CG_CPU_QUOTA_MIN_US : quota,
            TS_CG_CPU_PERIOD_US);
    } else {
        agent_say(cpu, sizeof cpu, "max %lld", TS_CG_CPU_PERIOD_US);
    }
    if (spec->memory_bytes > 0)
        agent_say(mem, sizeof mem, "%lld", spec->memory_bytes);
    if (spec->pids_max > 0)
        agent_say(pids, sizeof pids, "%lld", spec->pids_max);
    const char *files[] = {"cpu.max", "memory.max", "pids.max"};
    const char *vals[] = {cpu, mem, pids};
    for (int i = 0; i < 3; i++)
        if (agent_cg_write(path, files[i], vals[i]) != 0) {
            agent_say(why, why_len, "%s/%s: writing \"%s\": %s", path, files[i], vals[i],
                     strerror(errno));
            rmdir(path);
            return -1;
        }
    return 0;
}

/* ---- both versions ---------------------------------------------------------------- */

void agent_cg_probe(const char *parent, ts_launch_caps *caps)
{
    probe_v2(parent, caps);
    if (caps->cgroup)
        return;
    struct statfs sfs;
    if (parent != NULL && parent[0] != '\0' && statfs(parent, &sfs) == 0 &&
        (long)sfs.f_type == CGROUP2_MAGIC)
        return; /* a cgroup2 parent was asked for: its reason stands */
    char v2why[TS_LAUNCH_REASON_MAX], v1why[TS_LAUNCH_REASON_MAX];
    agent_say(v2why, sizeof v2why, "%s", caps->cgroup_reason);
    agent_cg1_probe(parent, caps, v1why, sizeof v1why);
    if (!caps->cgroup)
        agent_say(caps->cgroup_reason, sizeof caps->cgroup_reason, "cgroup v2: %s; cgroup v1: %s",
            v2why, v1why);
}

int agent_cg_create(const ts_launch_caps *caps, const ts_task_spec *spec, char *path,
                 size_t path_len, ts_cg_dirs *dirs, char *why, size_t why_len)
{
    memset(dirs, 0, sizeof *dirs);
    for (int c = 0; c < TS_CG_NCTL; c++)
        dirs->at[c] = -1;
    int rc = caps->cgroup_v1 ? agent_cg1_create(caps, spec, path, path_len, dirs, why, why_len)
                             : create_v2(caps, spec, path, path_len, dirs, why, why_len);
    if (rc != 0) {
        path[0] = '\0';
        dirs->n = 0;
    }
    return rc;
}

int agent_cg_dirs_of(const char *path, bool v1, ts_cg_dirs *dirs)
{
    memset(dirs, 0, sizeof *dirs);
    for (int c = 0; c < TS_CG_NCTL; c++)
        dirs->at[c] = -1;
    if (v1)
        return agent_cg1_dirs(path, dirs);
    if (strlen(path) >= sizeof dirs->dir[0])
        return -1;
    memcpy(dirs->dir[0], path, strlen(path) + 1);
    for (int c = 0; c < TS_CG_NCTL; c++)
        dirs->at[c] = 0;
    dirs->n = 1;
    return 0;
}

int agent_cg_limit_devices(const ts_cg_dirs *d, const ts_devnum *devs, size_t ndev, char *why,
                        size_t why_len)
{
    if (d->n == 0) {
        agent_say(why, why_len, "no task cgroup");
        return -1;
    }
    return d->v1 ? agent_cg1_limit_devices(d, devs, ndev, why, why_len)
                 : limit_devices_v2(d->dir[0], devs, ndev, why, why_len);
}

void agent_cg_kill_listed(const char *dir)
{
    char path[TS_CG_PATH_MAX + 32], chunk[CGROUP_PROCS_CHUNK_BYTES];
    if (join(path, sizeof path, dir, "cgroup.procs") != 0)
        return;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    long pid = 0;
    bool digits = false;
    ssize_t n;
    while ((n = read(fd, chunk, sizeof chunk)) > 0 || (n < 0 && errno == EINTR)) {
        for (ssize_t i = 0; i < n; i++) {
            if (chunk[i] >= '0' && chunk[i] <= '9') {
                pid = pid * 10 + (chunk[i] - '0');
                digits = true;
            } else {
                if (digits && pid > 0)
                    kill((pid_t)pid, SIGKILL);
                pid = 0;
                digits = false;
            }
        }
    }
    if (digits && pid > 0)
        kill((pid_t)pid, SIGKILL);
    close(fd);
}

void agent_cg_kill(const ts_cg_dirs *d)
{
    if (d->n == 0)
        return;
    if (d->v1)
        agent_cg1_kill(d);
    else if (agent_cg_write(d->dir[0], "cgroup.kill", "1") != 0)
        agent_cg_kill_listed(d->dir[0]);
}

long long agent_cg_oom_kills(const ts_cg_dirs *d)
{
    char text[OOM_COUNTS_BYTES];
    int m = d->n > 0 ? d->at[TS_CG_MEMORY] : -1;
    if (m < 0 ||
        agent_cg_read(d->dir[m], d->v1 ? "memory.oom_control" : "memory.events", text,
                   sizeof text) != 0)
        return 0;
    static const char key[] = "oom_kill ";
    for (char *line = text; line && *line;) {
        if (strncmp(line, key, sizeof key - 1) == 0) {
            long long v = 0;
            for (char *p = line + sizeof key - 1; *p >= '0' && *p <= '9' && v < (1LL << 55); p++)
                v = v * 10 + (*p - '0');
            return v;
        }
        line = strchr(line, '\n');
        line = line ? line + 1 : NULL;
    }
    return 0;
}

int agent_cg_remove(const ts_cg_dirs *d)
{
    int rc = 0, e = 0;
    for (int i = 0; i < d->n; i++)
        if (rmdir(d->dir[i]) != 0 && errno != ENOENT) {
            rc = -1;
            e = errno;
        }
    /* v1: the agent's directory under the parent goes with its last task
     * (EBUSY while another has its cgroup there; a start recreates it) */
    for (int i = 0; rc == 0 && d->v1 && i < d->n; i++) {
        char up[TS_CG_PATH_MAX];
        memcpy(up, d->dir[i], sizeof up);
        char *slash = strrchr(up, '/');
        if (slash != NULL && slash != up) {
            *slash = '\0';
            rmdir(up);
        }
    }
    errno = e;
    return rc;
}
