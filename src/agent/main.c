/*
 * main.c - tessera-agent: serves one node for the controller.
 *
 *   tessera-agent --controller URL[,URL...] --node NAME --token-file FILE --state-dir DIR
 *                 [--nvml PATH] [--ca FILE] [--cgroup-parent DIR] [--lost-after S]
 *                 [--metrics-listen ADDR:PORT] [--nic-map FILE] [--sysfs-root DIR]
 *                 [--sharing timeslice|mps] [--mps-control PATH] [--shim PATH]
 *                 [--shim-register S] [--cdi-dir DIR] [--dev-root DIR]
 *
 * Loads NVML (docs/agent-protocol.md; without it the agent says so and serves
 * CPU-only work), describes the node, then runs the agent loop (agent.c)
 * until SIGINT/SIGTERM, when it stops its tasks (checkpoint signal first).
 */
#define _DEFAULT_SOURCE /* realpath */
#include <signal.h>
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/cdi.h"
#include "agent/discover.h"
#include "agent/health.h"
#include "agent/image_cli.h"
#include "agent/metrics.h"
#include "agent/nvml.h"
#include "tessera/version.h"

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
    (void)sig;
    stop_requested = 1;
}

typedef struct health_ctx {
    ts_health *h;
    ts_agent_node *node;
} health_ctx;

/* The node's health for the next sync (agent.h's callback); it also leaves
 * each GPU's utilisation for the tasks' idle reports. */
static ts_node_health *health_report(void *ctx)
{
    health_ctx *hc = ctx;
    static ts_health_sample s; /* the report borrows from it until the next call */
    static agent_health_report doc;
    ts_err err;
    if (agent_health_sample_now(hc->h, &s, &err) != 0)
        return agent_health_unread_doc(err.msg, &doc);
    for (int g = 0; g < s.ngpus && g < 16; g++)
        hc->node->gpu_util[g] = s.gpu[g].util_gpu_pct;
    return agent_health_doc(&s, &doc);
}

static void usage(FILE *f)
{
    fprintf(f, "usage: tessera-agent --controller URL[,URL...] --node NAME --token-file FILE "
               "--state-dir DIR\n"
               "                     (--controller: 1 to 8 controllers, the leader found "
               "among them;\n"
               "                      --server is the same option)\n"
               "                     [--nvml PATH] [--ca FILE] [--cgroup-parent DIR] "
               "[--lost-after SECONDS]\n"
               "                     [--metrics-listen ADDR:PORT]  (Prometheus /metrics; "
               "default: off)\n"
               "                     [--nic-map FILE]  (\"GPU HCA[:PORT]\" lines; default: from "
               "sysfs)\n"
               "                     [--sysfs-root DIR]  (default /sys)\n"
               "                     [--cdi-dir DIR]  (also write the CDI spec there, e.g. "
               "/etc/cdi; always <state-dir>/cdi)\n"
               "                     [--dev-root DIR]  (device nodes under DIR/dev; default /)\n"
               "                     [--sharing timeslice|mps]  (how fractional tasks share "
               "a GPU; default timeslice)\n"
               "                     [--mps-control PATH]  (default: nvidia-cuda-mps-control "
               "on PATH)\n"
               "                     [--shim PATH]  (libtessera-cuda.so: fractional tasks' "
               "memory quota and compute share)\n"
               "                     [--shim-register SECONDS]  (a fractional task whose "
               "shim has not registered\n"
               "                      by then is stopped: shim_not_loaded; default 5)\n"
               "                     [--net-addr IPV4]  (this node's underlay address: tasks "
               "of an isolating cluster\n"
               "                      get a namespace on their tenant's VXLAN; docs/network.md)\n"
               "                     [--image-budget BYTES]  (the image store's disk budget; "
               "default: none)\n"
               "                     [--plain-http-registries HOST:PORT,...]  (pulled over "
               "http, e.g. a registry on loopback)\n"
               "                     [--registry-allow ADDR[/N],...]  (loopback or link-local "
               "addresses a pull may reach;\n"
               "                      default none but the plain-http registries' own)\n"
               "                     [--prolog PATH] [--epilog PATH]  (run as root before a "
               "task starts / after it\n"
               "                      ended; a failure drains the node) [--hook-timeout "
               "SECONDS]  (default 60)\n"
               "                     [--max-hooks N]  (hooks running at once, 1..64; "
               "default 64: more prologs and epilogs wait)\n"
               "                     [--container-write-mib N]  (a container's writable "
               "layer, its own filesystem;\n"
               "                      default 20480 or a quarter of the state disk; 0: "
               "unbounded, on the state disk)\n"
               "                     [--disk-reserve-mib N]  (kept free on the state disk: "
               "under it the container\n"
               "                      whose layer takes the most is stopped; default 1024 "
               "or 5 %% of the disk; 0: none)\n"
               "                     [--output-keep-mib N]  (of a task's stdout and of its "
               "stderr on the state disk;\n"
               "                      past it the older part is dropped; default 1024 or 2 %% "
               "of the disk; 0: all)\n"
               "                     [--output-keep-hours H]  (an ended task's output logs "
               "stay this long; default 24)\n"
               "                     [--p2p-listen IPV4:PORT]  (serve image pieces to peer "
               "agents; docs/images.md \"Peer-to-peer\")\n"
               "                     [--p2p-advertise URL]  (the URL peers reach it at; "
               "default http://IPV4:PORT)\n"
               "       tessera-agent image-pull --store DIR [--budget BYTES] [--plain-http] "
               "[--auth-file FILE] REFERENCE\n");
}

/* The node credential lets whoever holds it speak for the node (its tasks'
 * secrets, its sessions): a file others may read is made the agent's own
 * (0600) where it is the agent's, and said; else refused. */
static int token_file_private(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0 || !(st.st_mode & 077))
        return 0;
    if (st.st_uid == geteuid() && chmod(path, st.st_mode & 0700) == 0) {
        fprintf(stderr, "tessera-agent: --token-file %s was readable by others (mode %04o): made "
                        "0600, since any local user or task holding it could act as this node; "
                        "keep it so\n", path, (unsigned)(st.st_mode & 07777));
        return 0;
    }
    fprintf(stderr, "tessera-agent: --token-file %s is readable by others (mode %04o) and not "
                    "this agent's to change: chmod 600 it (any local user or task holding it "
                    "could act as this node)\n", path, (unsigned)(st.st_mode & 07777));
    return -1;
}

static int read_token(const char *path, char *out, size_t size)
{
    if (token_file_private(path) != 0)
        return -2;
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    if (!fgets(out, (int)size, f)) {
        fclose(f);
        return -1;
    }
    fclose(f);
    out[strcspn(out, "\r\n")] = '\0';
    return out[0] ? 0 : -1;
}

/* The node's GPUs as CDI devices (docs/images.md "GPUs in a container"):
 * kept for container tasks, written to <state_dir>/cdi/tessera.json and,
 * with --cdi-dir, there too for other runtimes. A spec that cannot be
 * written is said and the agent goes on: its own tasks use the one kept. */
/* spec as file name in state_dir/cdi and, when one is given, in cdi_dir (where
 * a CDI runtime looks); a failure is said and the other copy still written. */
static void write_cdi_files(const json_t *spec, const char *name, const char *state_dir,
                            const char *cdi_dir)
{
    const char *dirs[] = {state_dir, cdi_dir};
    for (size_t i = 0; i < 2; i++) {
        char path[700];
        ts_err err;
        if (!dirs[i])
            continue;
        snprintf(path, sizeof path, i == 0 ? "%s/cdi/%s" : "%s/%s", dirs[i], name);
        if (agent_cdi_write(spec, path, &err) != 0)
            fprintf(stderr, "tessera-agent: %s\n", err.msg);
    }
}

static void write_cdi(const ts_node_desc *desc, ts_agent_node *node, const char *state_dir,
                      const char *cdi_dir, const char *dev_root)
{
    ts_err err;
    agent_cdi_opts o = {.dev_root = dev_root};
    json_t *spec = NULL;
    if (agent_cdi_spec(desc, &o, &spec, &err) != 0) {
        fprintf(stderr, "tessera-agent: cdi: %s\n", err.msg);
        return;
    }
    json_decref(node->cdi);
    node->cdi = spec;
    mkdir(state_dir, 0755); /* the agent makes it too, later; it may not exist yet */
    write_cdi_files(node->cdi, "tessera.json", state_dir, cdi_dir);
}

/* What the CDI spec is made from again after a MIG reconfiguration. */
typedef struct cdi_ctx {
    ts_nvml *nv;
    const char *state_dir, *cdi_dir, *dev_root;
} cdi_ctx;

static void refresh_cdi(ts_agent_node *node, void *arg)
{
    const cdi_ctx *c = arg;
    static ts_node_desc fresh; /* large; the agent's thread only */
    ts_err err;
    if (agent_discover(c->nv, &fresh, &err) != 0) {
        fprintf(stderr, "tessera-agent: cdi: discovery after a MIG change: %s\n", err.msg);
        return;
    }
    write_cdi(&fresh, node, c->state_dir, c->cdi_dir, c->dev_root);
}

/* The node's dedicated network devices (each GPU's VF or rail NIC, by the
 * rail map) as a CDI 1.1 spec with netDevices, beside the GPUs' one: what a
 * CDI runtime needs to move them into a container's own namespace. The
 * agent's own tasks get theirs in their namespace already (netns.c). None,
 * none written. */
static void write_cdi_net(const ts_nic_map *nics, const char *sysfs_root, const char *state_dir,
                          const char *cdi_dir)
{
    char names[TS_NICS_MAX_GPUS][TS_NICS_NAME_MAX];
    const char *v[TS_NICS_MAX_GPUS];
    size_t n = 0;
    for (int g = 0; g < nics->ngpu && g < TS_NICS_MAX_GPUS; g++) {
        ts_err e;
        if (agent_nics_netdev(sysfs_root, nics, g, names[n], sizeof names[n], &e) != 0)
            continue; /* no device for this GPU: it cannot have a dedicated one */
        bool seen = false;
        for (size_t k = 0; k < n && !seen; k++)
            seen = strcmp(v[k], names[n]) == 0;
        if (!seen) {
            v[n] = names[n];
            n++;
        }
    }
    json_t *spec = NULL;
    ts_err err;
    if (n == 0)
        return;
    if (agent_cdi_net_spec(v, n, &spec, &err) != 0) {
        fprintf(stderr, "tessera-agent: cdi: %s\n", err.msg);
        return;
    }
    write_cdi_files(spec, "tessera-net.json", state_dir, cdi_dir);
    json_decref(spec);
}

/* What the command line says. */
typedef struct agent_args {
    ts_agent_config cfg;
    const char *token_file, *nvml_path, *metrics_listen, *nic_map, *sysfs_root, *cdi_dir,
        *dev_root;
} agent_args;

/* Seconds in (0, 3600] into *out; false (said why) else. */
static bool seconds_opt(const char *opt, const char *v, double *out)
{
    char *end;
    *out = v ? strtod(v, &end) : 0;
    if (v && end != v && !*end && *out > 0 && *out <= 3600)
        return true;
    fprintf(stderr, "tessera-agent: %s: \"%s\" is not a number of seconds in (0, 3600]\n", opt,
            v ? v : "");
    return false;
}

/* An option whose value is kept as given: 1 taken, 0 not this kind, 2 bad. */
static int opt_plain(agent_args *A, ts_agent_node *node, const char *o, const char *v)
{
    ts_agent_config *cfg = &A->cfg;
    if (strcmp(o, "--controller") == 0 || strcmp(o, "--server") == 0) {
        ts_err perr;
        if (agent_ctls_parse(v, &cfg->ctls, &perr) != 0) {
            fprintf(stderr, "tessera-agent: %s: %s\n", o, perr.msg);
            return 2;
        }
        return 1;
    }
    const struct { const char *name; char *to; size_t size; } copies[] = {
        {"--node", cfg->node, sizeof cfg->node},
        {"--state-dir", cfg->state_dir, sizeof cfg->state_dir},
        {"--ca", cfg->ca_file, sizeof cfg->ca_file},
        {"--cgroup-parent", cfg->cgroup_parent, sizeof cfg->cgroup_parent},
        {"--mps-control", node->mps_binary, sizeof node->mps_binary}};
    for (size_t k = 0; k < sizeof copies / sizeof copies[0]; k++)
        if (strcmp(o, copies[k].name) == 0) {
            snprintf(copies[k].to, copies[k].size, "%s", v);
            return 1;
        }
    const struct { const char *name; const char **to; } refs[] = {
        {"--token-file", &A->token_file}, {"--nvml", &A->nvml_path},
        {"--metrics-listen", &A->metrics_listen}, {"--nic-map", &A->nic_map},
        {"--sysfs-root", &A->sysfs_root}, {"--cdi-dir", &A->cdi_dir},
        {"--dev-root", &A->dev_root}};
    for (size_t k = 0; k < sizeof refs / sizeof refs[0]; k++)
        if (strcmp(o, refs[k].name) == 0) {
            *refs[k].to = v;
            return 1;
        }
    if (strcmp(o, "--lost-after") == 0) {
        cfg->lost_s = atof(v);
        return 1;
    }
    return 0;
}

/* A path that must be there now (a typo must not wait for the first job):
 * its absolute form into out; false (said why) else. */
static bool path_opt(const char *o, const char *v, int mode, char *out, size_t size)
{
    char *abs = v ? realpath(v, NULL) : NULL;
    bool ok = abs && access(abs, mode) == 0 && strlen(abs) < size;
    if (ok)
        snprintf(out, size, "%s", abs);
    else
        fprintf(stderr, "tessera-agent: %s: %s: %s\n", o, v ? v : "(missing)",
                mode == X_OK ? "not an executable file" : "cannot read it");
    free(abs);
    return ok;
}

/* An option whose value is checked: 1 taken, 0 not this kind, 2 bad. */

/* A size in MiB, 0..2^30, into *out; false (said) for anything else. */
static bool mib_option(const char *o, const char *v, long long *out)
{
    char *end;
    long long n = v ? strtoll(v, &end, 10) : -1;
    if (!v || end == v || *end || n < 0 || n > (1LL << 30)) {
        fprintf(stderr, "tessera-agent: %s: \"%s\" is not a number of MiB in 0..%lld\n", o,
                v ? v : "", 1LL << 30);
        return false;
    }
    *out = n;
    return true;
}
/* One range more an image pull may reach; false when there is no room. */
static bool registry_allow_add(ts_agent_config *cfg, const io_cidr *c)
{
    if (cfg->nregistry_allow == TS_AGENT_REGISTRY_ALLOW_MAX)
        return false;
    cfg->registry_allow[cfg->nregistry_allow++] = *c;
    return true;
}

/* --registry-allow A.B.C.D[/N],X::Y[/N],...: 1, or 2 (said) for a bad entry. */
static int registry_allow_opt(ts_agent_config *cfg, const char *v)
{
    char list[1024];
    snprintf(list, sizeof list, "%s", v);
    int i = 0;
    for (char *save = NULL, *e = strtok_r(list, ",", &save); e; e = strtok_r(NULL, ",", &save)) {
        io_cidr c;
        if (!io_cidr_parse(e, &c) || !registry_allow_add(cfg, &c)) {
            fprintf(stderr, "tessera-agent: --registry-allow: entry %d \"%s\": not an address "
                    "or a range (A.B.C.D/N, X::Y/N), or over %d entries\n", i, e,
                    TS_AGENT_REGISTRY_ALLOW_MAX);
            return 2;
        }
        i++;
    }
    return 1;
}

/* A plain-http registry named by its address (a registry on loopback, a
 * test's) is one the site named: a pull may reach that address. */
static void plain_http_allow(ts_agent_config *cfg)
{
    char list[sizeof cfg->plain_http_registries];
    snprintf(list, sizeof list, "%s", cfg->plain_http_registries);
    for (char *save = NULL, *e = strtok_r(list, ",", &save); e; e = strtok_r(NULL, ",", &save)) {
        char *end = e[0] == '[' ? strchr(e, ']') : strrchr(e, ':');
        if (end)
            *end = '\0';
        io_cidr c;
        if (io_cidr_parse(e[0] == '[' ? e + 1 : e, &c))
            (void)registry_allow_add(cfg, &c);
    }
}

static int opt_checked(agent_args *A, ts_agent_node *node, const char *o, const char *v)
{
    ts_agent_config *cfg = &A->cfg;
    if (strcmp(o, "--sharing") == 0) {
        if (strcmp(v, "mps") != 0 && strcmp(v, "timeslice") != 0) {
            fprintf(stderr, "tessera-agent: --sharing: \"%s\" is not timeslice or mps\n", v);
            return 2;
        }
        node->mps = strcmp(v, "mps") == 0;
    } else if (strcmp(o, "--image-budget") == 0) {
        char *end;
        cfg->image_budget_bytes = strtoll(v, &end, 10);
        if (*end || end == v || cfg->image_budget_bytes < 0) {
            fprintf(stderr, "tessera-agent: --image-budget: bytes, 0 for none\n");
            return 2;
        }
    } else if (strcmp(o, "--plain-http-registries") == 0) {
        if (strlen(v) >= sizeof cfg->plain_http_registries) {
            fprintf(stderr, "tessera-agent: --plain-http-registries: host:port,... "
                            "(under %zu bytes)\n", sizeof cfg->plain_http_registries);
            return 2;
        }
        snprintf(cfg->plain_http_registries, sizeof cfg->plain_http_registries, "%s", v);
    } else if (strcmp(o, "--registry-allow") == 0) {
        return registry_allow_opt(cfg, v);
    } else if (strcmp(o, "--p2p-listen") == 0) {
        if (strlen(v) >= sizeof cfg->p2p_listen || !strchr(v, ':')) {
            fprintf(stderr, "tessera-agent: --p2p-listen: IPV4:PORT (under %zu bytes)\n",
                    sizeof cfg->p2p_listen);
            return 2;
        }
        snprintf(cfg->p2p_listen, sizeof cfg->p2p_listen, "%s", v);
    } else if (strcmp(o, "--p2p-advertise") == 0) {
        if (strncmp(v, "http://", 7) != 0 || strlen(v) >= sizeof cfg->p2p_advertise) {
            fprintf(stderr, "tessera-agent: --p2p-advertise: an http:// URL (under %zu "
                            "bytes)\n", sizeof cfg->p2p_advertise);
            return 2;
        }
        snprintf(cfg->p2p_advertise, sizeof cfg->p2p_advertise, "%s", v);
    } else if (strcmp(o, "--shim") == 0) {
        /* absolute: tasks start in their own working directories */
        if (!path_opt(o, v, R_OK, node->shim, sizeof node->shim))
            return 2;
    } else if (strcmp(o, "--shim-register") == 0) {
        if (!seconds_opt(o, v, &node->shim_register_s))
            return 2;
    } else if (strcmp(o, "--net-addr") == 0) {
        struct in_addr ia;
        if (inet_pton(AF_INET, v, &ia) != 1) {
            fprintf(stderr, "tessera-agent: --net-addr: \"%s\" is not an IPv4 address\n", v);
            return 2;
        }
        snprintf(cfg->net_addr, sizeof cfg->net_addr, "%s", v);
    } else if (strcmp(o, "--prolog") == 0 || strcmp(o, "--epilog") == 0) {
        if (!path_opt(o, v, X_OK, strcmp(o, "--prolog") == 0 ? cfg->prolog : cfg->epilog,
                      sizeof cfg->prolog))
            return 2;
    } else if (strcmp(o, "--hook-timeout") == 0) {
        if (!seconds_opt(o, v, &cfg->hook_timeout_s))
            return 2;
    } else if (strcmp(o, "--max-hooks") == 0) {
        char *end;
        long n = v ? strtol(v, &end, 10) : 0;
        if (!v || end == v || *end || n < 1 || n > TS_AGENT_MAX_HOOKS) {
            fprintf(stderr, "tessera-agent: --max-hooks: \"%s\" is not a number in 1..%d\n",
                    v ? v : "", TS_AGENT_MAX_HOOKS);
            return 2;
        }
        cfg->max_hooks = (int)n;
    } else if (strcmp(o, "--container-write-mib") == 0) {
        if (!mib_option(o, v, &cfg->container_write_mib))
            return 2;
        cfg->container_write_set = true;
    } else if (strcmp(o, "--disk-reserve-mib") == 0) {
        if (!mib_option(o, v, &cfg->disk_reserve_mib))
            return 2;
        cfg->disk_reserve_set = true;
    } else if (strcmp(o, "--output-keep-hours") == 0) {
        char *end;
        double h = v ? strtod(v, &end) : -1;
        if (!v || end == v || *end || !(h >= 0 && h <= 87600)) {
            fprintf(stderr, "tessera-agent: --output-keep-hours: \"%s\" is not a number of "
                    "hours in 0..87600\n", v ? v : "");
            return 2;
        }
        cfg->output_keep_hours = h;
        cfg->output_hours_set = true;
    } else if (strcmp(o, "--output-keep-mib") == 0) {
        if (!mib_option(o, v, &cfg->output_keep_mib))
            return 2;
        cfg->output_keep_set = true;
    } else {
        return 0;
    }
    return 1;
}

/* -1: go on with A; else the exit status. */
static int parse_args(int argc, char **argv, agent_args *A, ts_agent_node *node)
{
    *A = (agent_args){.cfg = {.lost_s = TS_AGENT_LOST_S,
                              .hook_timeout_s = TS_AGENT_HOOK_TIMEOUT_S},
                      .sysfs_root = "/sys"};
    for (int i = 1; i < argc; i += 2) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            return 0;
        }
        if (strcmp(argv[i], "--version") == 0)
            return puts("tessera-agent " TS_VERSION) < 0;
        if (!v) {
            usage(stderr);
            return 2;
        }
        int r = opt_plain(A, node, argv[i], v);
        if (r == 0)
            r = opt_checked(A, node, argv[i], v);
        if (r == 2)
            return 2;
        if (r == 0) {
            fprintf(stderr, "tessera-agent: unknown argument \"%s\"\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    if (!A->cfg.ctls.n || !A->cfg.node[0] || !A->token_file || !A->cfg.state_dir[0]) {
        fprintf(stderr, "tessera-agent: --controller, --node, --token-file and --state-dir are "
                        "required\n");
        usage(stderr);
        return 2;
    }
    plain_http_allow(&A->cfg);
    /* fault injection for the tests and bench/image-p2p: a peer that lies */
    const char *faults = getenv("TESSERA_AGENT_P2P_FAULTS");
    A->cfg.p2p_fault_corrupt = faults && strstr(faults, "corrupt");
    int trc = read_token(A->token_file, A->cfg.token, sizeof A->cfg.token);
    if (trc != 0) {
        if (trc != -2)
            fprintf(stderr, "tessera-agent: --token-file %s: cannot read a token\n",
                    A->token_file);
        return 2;
    }
    return -1;
}

/* The rails: each GPU's network adapter (for NCCL_IB_HCA), the adapters'
 * port GUIDs (the controller's partitions.conf lists them under the tenants
 * that run here, docs/network.md), and the dedicated NICs' CDI spec. 0, or 2
 * for a bad --nic-map (said why). */
static int node_rails(agent_args *A, ts_agent_node *node, ts_nvml *nv, const ts_node_desc *d)
{
    ts_err err;
    const char *bus_ids[TS_NICS_MAX_GPUS] = {0};
    for (int g = 0; nv && g < d->ngpus && g < TS_NICS_MAX_GPUS; g++)
        bus_ids[g] = d->gpu[g].bus_id;
    int nrc = A->nic_map ? agent_nics_load(A->nic_map, node->ngpu, &node->nics, &err)
                      : agent_nics_discover(A->sysfs_root, bus_ids, nv ? node->ngpu : 0, &node->nics, &err);
    if (nrc != 0) {
        fprintf(stderr, "tessera-agent: %s%s\n", A->nic_map ? "--nic-map: " : "", err.msg);
        if (A->nic_map)
            return 2;
    }
    ts_discovery *disc = node->discovery;
    int ng = node->nics.ngpu;
    ts_disc_rail *rails = ng > 0 ? calloc((size_t)ng, sizeof *rails) : NULL;
    ts_disc_ib_port *ports = ng > 0 ? calloc((size_t)ng, sizeof *ports) : NULL;
    static char guids[TS_NICS_MAX_GPUS][19]; /* the discovery borrows them */
    int nrails = 0, nports = 0;
    for (int g = 0; rails && ports && g < ng; g++) {
        if (!node->nics.hca[g][0])
            continue;
        rails[nrails++] = (ts_disc_rail){g, node->nics.hca[g]};
        bool seen = false;
        for (int k = 0; k < g && !seen; k++)
            seen = strcmp(node->nics.hca[k], node->nics.hca[g]) == 0;
        ts_err ge;
        if (!seen && agent_nics_port_guid(A->sysfs_root, node->nics.hca[g], guids[g], &ge) == 0)
            ports[nports++] = (ts_disc_ib_port){node->nics.hca[g], guids[g]};
    }
    if (nrails > 0)
        fprintf(stderr, "tessera-agent: %d GPU(s) with an RDMA adapter (rail)\n", nrails);
    if (disc) { /* sent even empty: the controller learns the node has none */
        disc->rails = rails, disc->nrails = nrails, disc->ib_ports = ports;
        disc->nib_ports = nports;
        disc->present |= TS_DC_BIT(TS_DC_RAILS) | TS_DC_BIT(TS_DC_IB_PORTS);
    } else {
        free(rails);
        free(ports);
    }
    write_cdi_net(&node->nics, A->sysfs_root, A->cfg.state_dir, A->cdi_dir);
    return 0;
}

/* Discovers the node, registers with the controller and runs until SIGINT
 * or SIGTERM. The exit status. */
static int serve(agent_args *A, ts_agent_node *node)
{
    ts_err err;
    ts_nvml *nv = NULL;
    ts_health *health = NULL;
    if (agent_nvml_open(A->nvml_path, &nv, &err) != 0) {
        fprintf(stderr, "tessera-agent: no NVML (%s): serving CPU-only work\n", err.msg);
        nv = NULL;
    }
    static ts_node_desc desc;
    if (agent_discover(nv, &desc, &err) != 0) {
        fprintf(stderr, "tessera-agent: discovery: %s\n", err.msg);
        return 1;
    }
    ts_agent_metrics *metrics = NULL;
    if (A->metrics_listen) {
        if (agent_metrics_start(A->metrics_listen, nv, A->cfg.node, &metrics, &err) != 0) {
            fprintf(stderr, "tessera-agent: --metrics-listen: %s\n", err.msg);
            agent_nvml_close(nv);
            return 2;
        }
        A->cfg.metrics_port = agent_metrics_port(metrics);
        fprintf(stderr, "tessera-agent: metrics on port %d (/metrics)\n", A->cfg.metrics_port);
    }
    static ts_discovery disc; /* borrows desc's strings */
    node->discovery = agent_discover_doc(&desc, &disc) == 0 ? &disc : NULL;
    snprintf(node->sysfs_root, sizeof node->sysfs_root, "%s", A->sysfs_root);
    write_cdi(&desc, node, A->cfg.state_dir, A->cdi_dir, A->dev_root);
    static cdi_ctx cdi_refresh;
    if (nv) {
        cdi_refresh = (cdi_ctx){nv, A->cfg.state_dir, A->cdi_dir, A->dev_root};
        node->cdi_refresh = refresh_cdi;
        node->cdi_refresh_ctx = &cdi_refresh;
    }
    if (node->discovery && node->discovery->ngpus > 0) { /* how its shares share a GPU */
        node->discovery->gpu_sharing = node->mps ? TS_SHARING_MPS : TS_SHARING_TIMESLICE;
        node->discovery->present |= TS_DC_BIT(TS_DC_GPU_SHARING);
    }
    if (A->cfg.net_addr[0] && node->discovery) { /* the peers of the tenants' VXLANs */
        node->discovery->net_addr = A->cfg.net_addr;
        node->discovery->present |= TS_DC_BIT(TS_DC_NET_ADDR);
    }
    if (nv && agent_health_open(nv, &health, &err) != 0)
        fprintf(stderr, "tessera-agent: health checks unavailable: %s\n", err.msg);
    for (int g = 0; g < 16; g++)
        node->gpu_util[g] = -1;
    static health_ctx hctx;
    if (health) {
        hctx = (health_ctx){health, node};
        node->health = health_report;
        node->health_ctx = &hctx;
    }
    /* CUDA_VISIBLE_DEVICES: the GPUs' UUIDs; without NVML, their indices */
    node->ngpu = nv ? desc.ngpus : 16;
    if (node->ngpu > 16)
        node->ngpu = 16;
    for (int g = 0; g < node->ngpu; g++) {
        if (nv)
            snprintf(node->gpu_uuid[g], sizeof node->gpu_uuid[g], "%s", desc.gpu[g].uuid);
        else
            snprintf(node->gpu_uuid[g], sizeof node->gpu_uuid[g], "%d", g);
    }
    fprintf(stderr, "tessera-agent: %d GPU(s), %ld CPUs, %llu MiB\n", nv ? desc.ngpus : 0,
            desc.cpus, (unsigned long long)(desc.mem_total_bytes >> 20));
    if (node_rails(A, node, nv, &desc) != 0)
        return 2;
    node->metrics = metrics;
    node->nv = nv;
    struct sigaction sa = {0};
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    ts_agent *a = NULL;
    if (agent_new(&A->cfg, node, &a, &err) != 0) {
        fprintf(stderr, "tessera-agent: %s\n", err.msg);
        agent_metrics_stop(metrics);
        return 1;
    }
    fprintf(stderr, "tessera-agent: node %s, controller %s", A->cfg.node, A->cfg.ctls.url[0]);
    for (int k = 1; k < A->cfg.ctls.n; k++)
        fprintf(stderr, "%s%s", k == 1 ? " (then " : ", ", A->cfg.ctls.url[k]);
    fputs(A->cfg.ctls.n > 1 ? ")\n" : "\n", stderr);
    const ts_launch_caps *caps = agent_caps(a);
    if (!caps->cgroup) /* said once: tasks run, without limits */
        fprintf(stderr, "tessera-agent: no per-task cgroups (%s): tasks run without CPU, "
                        "memory and pids limits\n", caps->cgroup_reason);
    else
        fprintf(stderr, "tessera-agent: per-task cgroups (%s) under %s\n",
                caps->cgroup_v1 ? "cgroup v1" : "cgroup v2", caps->cgroup_parent);
    if (!caps->devices)
        fprintf(stderr, "tessera-agent: no GPU device filter (%s)\n", caps->devices_reason);
    while (!stop_requested) {
        if (agent_step(a, &err) != 0) {
            fprintf(stderr, "tessera-agent: %s\n", err.msg);
            if (!agent_retry_now(a)) {
                agent_pause(a, agent_pause_s(a));
            }
        }
    }
    fprintf(stderr, "tessera-agent: stopping %d task(s)\n", agent_ntasks(a));
    agent_leave(a);
    agent_free(a);
    agent_metrics_stop(metrics);
    if (node->discovery)
        ts_discovery_fini(node->discovery);
    json_decref(node->cdi);
    agent_health_close(health);
    agent_nvml_close(nv);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "image-pull") == 0)
        return agent_image_cli(argc - 1, argv + 1);
    static agent_args A;
    static ts_agent_node node;
    int rc = parse_args(argc, argv, &A, &node);
    return rc >= 0 ? rc : serve(&A, &node);
}
