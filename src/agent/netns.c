/*
 * netns.c - a task's network namespace on its tenant's overlay (netns.h).
 *
 * The policy's text, the services and running the tools are in
 * netns_policy.c. Why iproute2 and nft by fork/exec rather than netlink
 * sockets of our own:
 * the VXLAN, macvlan-into-namespace and nftables messages are many and
 * version-dependent, and the tools are what operators debug with; each
 * batch is parsed and applied by the kernel's own tools, which report the
 * failing line. A task costs four short processes (ip here, ip in the
 * fabric, ip and nft in the task's namespace; the gateway's address, the
 * VXLAN's chains and bridge's flood entries when a VXLAN is new), spawned
 * with posix_spawn, argv and a fixed environment, never a shell.
 *
 * Names: the namespace ts-<tag>-<task id>, where tag is 8 hex of the FNV-1a
 * of the agent's state directory (its real path): task ids repeat across
 * clusters (every cluster has a j1-r0), and /run/netns is the host's, so two
 * agents of one host (two clusters, parallel test runs) never name the same
 * namespace, nor remove each other's. The host's links carry the tag too,
 * folded to 4 hex (IFNAMSIZ is 15 bytes): the tenant's VXLAN t<tag4>x<vni>
 * (in the fabric namespace tsf-<tag>, netns_fabric.c) and gateway
 * t<tag4>b<vni> (here), and the tables are tessera_<tag>, whose rules match
 * only t<tag4>... links: two agents of one host keep their own; eth0 inside.
 * The task's MAC is derived from its address (02:00:a:b:c:d), so its own
 * table is known before its macvlan exists. The state file
 * <state dir>/net/<task id> ("link vni addr mac", link t<tag4>m<8 hex of the
 * FNV-1a of tag and id>: a name only, saying the kind; an older agent's task
 * names its veth t<tag4>v..., a port of the tenant's bridge t<tag4>b<vni> in
 * the fabric, whose other ports are the VXLAN and the gateway's fabric end
 * t<tag4>g<vni>) is written first and removed last.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/netns.h"
#include "agent/netns_priv.h"
#include "tessera/name_list.h"

#define NS_DIR "/run/netns"
#define NS_PREFIX "ts-"
#define SCRIPT_BYTES 65536

/* ---- names ---------------------------------------------------------------------- */

static bool id_ok(const char *id)
{
    size_t n = id ? strlen(id) : 0;
    if (n == 0 || n > 48) /* ts-<id> must fit a file name; ids are j<job>-r<rank> */
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((id[i] >= 'a' && id[i] <= 'z') || (id[i] >= 'A' && id[i] <= 'Z') ||
              (id[i] >= '0' && id[i] <= '9') || id[i] == '.' || id[i] == '_' || id[i] == '-'))
            return false;
    return id[0] != '.';
}

static uint32_t fnv32(uint32_t h, const char *s)
{
    for (const char *p = s; *p; p++)
        h = (h ^ (unsigned char)*p) * 16777619u;
    return h;
}

/* This agent's tag: the FNV-1a of its state directory's real path (the path
 * as given while it does not resolve), the same at every start. */
static uint32_t agent_tag(const char *state_dir)
{
    char real[PATH_MAX];
    return fnv32(2166136261u, realpath(state_dir, real) ? real : state_dir);
}

void agent_net_ns_name(const char *state_dir, const char *task_id, char *out, size_t len)
{
    snprintf(out, len, "%s%08x-%s", NS_PREFIX, agent_tag(state_dir), task_id);
}

/* netns_priv.h: this agent's link prefix and tables' name. */
void agent_net_names(const char *state_dir, net_names *n)
{
    uint32_t tag = agent_tag(state_dir);
    n->tag4 = (tag ^ (tag >> 16)) & 0xffffu;
    snprintf(n->prefix, sizeof n->prefix, "t%04x", n->tag4 & 0xffffu);
    snprintf(n->table, sizeof n->table, "tessera_%08x", tag);
}

/* The task's link as its state file names it (netns_priv.h): kind 'm' for
 * the macvlans this agent makes. */
static void task_link_name(const char *state_dir, const char *id, char out[IFNAMSIZ])
{
    char tag[16];
    net_names nn;
    agent_net_names(state_dir, &nn);
    snprintf(tag, sizeof tag, "%08x/", agent_tag(state_dir));
    snprintf(out, IFNAMSIZ, "t%04x%c%08x", nn.tag4 & 0xffffu, NET_LINK_MACVLAN,
             fnv32(fnv32(2166136261u, tag), id));
}

/* The tenant's bridge (kind 'b') or VXLAN ('x') on this node; a state file
 * of an agent before the per-agent names (its veth tsv...) names the old
 * tsb<vni>/tsx<vni>, so an upgraded agent still removes them. */
void agent_net_tenant_link(const net_names *nn, char kind, unsigned vni, bool legacy,
                           char out[IFNAMSIZ])
{
    if (legacy)
        snprintf(out, IFNAMSIZ, "ts%c%u", kind, vni & VNI_MAX);
    else
        snprintf(out, IFNAMSIZ, "t%04x%c%u", nn->tag4 & 0xffffu, kind, vni & VNI_MAX);
}

static bool link_exists(const char *name) { return if_nametoindex(name) != 0; }

static void state_path(const char *state_dir, const char *id, char *out, size_t len)
{
    snprintf(out, len, "%s/net/%s", state_dir, id);
}

typedef struct net_state {
    char veth[IFNAMSIZ];
    unsigned vni;
    char addr[INET_ADDRSTRLEN];
    char mac[18];
    char nics[AGENT_NET_NICS_MAX * IFNAMSIZ]; /* moved in, comma-separated; "" none */
    /* published ports ("8000/tcp,9000/udp"; "" none) and where from ("ADDR[/N],..."; "-"
     * anywhere): the file's second line, "publish PORTS FROM", only when there are some */
    char publish[AGENT_NET_PUBLISH_MAX * 12];
    char from[AGENT_NET_PUBLISH_FROM_MAX * 20];
} net_state;

static int state_read(const char *path, net_state *s)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    char line[1024];
    int n = 0;
    /* a fifth field (NICs moved in) only when there are some */
    if (fgets(line, sizeof line, f))
        n = sscanf(line, "%15s %u %15s %17s %255s", s->veth, &s->vni, s->addr, s->mac, s->nics);
    s->publish[0] = s->from[0] = '\0';
    if (fgets(line, sizeof line, f) &&
        sscanf(line, "publish %191s %639s", s->publish, s->from) != 2)
        n = 0;
    fclose(f);
    if (n == 4)
        s->nics[0] = '\0';
    return (n == 4 || n == 5) && s->veth[0] == 't' && s->vni >= 1 &&
                   s->vni <= VNI_MAX
               ? 0
               : -1;
}

/* ---- setup ---------------------------------------------------------------------- */


static int check_task(const agent_net_task *t, struct in_addr *a, ts_err *err)
{
    struct in_addr x;
    if (!id_ok(t->task_id))
        return ts_err_set(err, TS_EINVAL, "net.task_id: \"%s\": must be 1..48 of A-Z a-z 0-9 . _ -",
                          t->task_id ? t->task_id : "");
    if (t->vni < 1 || t->vni > VNI_MAX)
        return ts_err_set(err, TS_EINVAL, "net.vni: %u: must be 1..%u", t->vni, VNI_MAX);
    if (!t->addr || inet_pton(AF_INET, t->addr, a) != 1)
        return ts_err_set(err, TS_EINVAL, "net.addr: \"%s\": not an IPv4 address",
                          t->addr ? t->addr : "");
    if (t->prefix < 8 || t->prefix > 30)
        return ts_err_set(err, TS_EINVAL, "net.prefix: %d: must be 8..30", t->prefix);
    if (!t->local || inet_pton(AF_INET, t->local, &x) != 1)
        return ts_err_set(err, TS_EINVAL, "net.local: \"%s\": this node has no underlay "
                          "IPv4 address (tessera-agent --net-addr)", t->local ? t->local : "");
    if (t->npeers > AGENT_NET_PEERS_MAX)
        return ts_err_set(err, TS_EINVAL, "net.peers: %zu: at most %d", t->npeers,
                          AGENT_NET_PEERS_MAX);
    for (size_t i = 0; i < t->npeers; i++)
        if (!t->peers[i] || inet_pton(AF_INET, t->peers[i], &x) != 1)
            return ts_err_set(err, TS_EINVAL, "net.peers[%zu]: not an IPv4 address", i);
    if (t->nnics > AGENT_NET_NICS_MAX)
        return ts_err_set(err, TS_EINVAL, "net.nics: %zu devices: at most %d", t->nnics,
                          AGENT_NET_NICS_MAX);
    for (size_t i = 0; i < t->nnics; i++) {
        const char *d = t->nics[i];
        size_t len = d ? strlen(d) : 0;
        bool ok = len > 0 && len < IFNAMSIZ && strcmp(d, "lo") != 0 && strcmp(d, "eth0") != 0;
        for (size_t k = 0; ok && k < len; k++)
            ok = d[k] > ' ' && d[k] < 127 && d[k] != '/' && d[k] != ',' && d[k] != ':';
        if (!ok)
            return ts_err_set(err, TS_EINVAL, "net.nics[%zu]: \"%s\": not a network device "
                              "name (1..15 printable, no / , :, not lo or eth0)", i, d ? d : "");
        for (size_t k = 0; k < i; k++)
            if (strcmp(t->nics[k], d) == 0)
                return ts_err_set(err, TS_EINVAL, "net.nics[%zu]: \"%s\": given twice", i, d);
        if (!link_exists(d))
            return ts_err_set(err, TS_ENOENT, "net.nics[%zu]: \"%s\": not in this node's "
                              "network namespace (held by another task, or not there)", i, d);
    }
    if (t->mtu != 0 && (t->mtu < 1280 || t->mtu > 9000))
        return ts_err_set(err, TS_EINVAL, "net.mtu: %d: must be 1280..9000", t->mtu);
    if (t->npublish > AGENT_NET_PUBLISH_MAX || t->npublish_from > AGENT_NET_PUBLISH_FROM_MAX)
        return ts_err_set(err, TS_EINVAL, "net.publish: %zu ports from %zu ranges: at most %d "
                          "and %d", t->npublish, t->npublish_from, AGENT_NET_PUBLISH_MAX,
                          AGENT_NET_PUBLISH_FROM_MAX);
    for (size_t i = 0; i < t->npublish; i++) {
        const char *p = t->publish[i], *end = "";
        unsigned long port = 0;
        if (p && p[0] >= '1' && p[0] <= '9') {
            char *e;
            port = strtoul(p, &e, 10);
            end = e;
        }
        if (port < 1 || port > 65535 || (strcmp(end, "/tcp") != 0 && strcmp(end, "/udp") != 0))
            return ts_err_set(err, TS_EINVAL, "net.publish[%zu]: \"%s\": not PORT/tcp|udp", i,
                              p ? p : "");
        if (port == VXLAN_PORT && strcmp(end, "/udp") == 0)
            return ts_err_set(err, TS_EINVAL, "net.publish[%zu]: %s: the overlay's own VXLAN "
                              "port", i, p);
    }
    for (size_t i = 0; i < t->npublish_from; i++) {
        char el[96], probe[64];
        snprintf(probe, sizeof probe, "%s:1/tcp", t->publish_from[i] ? t->publish_from[i] : "");
        if (!t->publish_from[i] || strchr(t->publish_from[i], ':') ||
            strlen(t->publish_from[i]) > 18 || agent_net_service_elem(probe, el, sizeof el) != 0)
            return ts_err_set(err, TS_EINVAL, "net.publish_from[%zu]: \"%s\": not ADDR[/N]", i,
                              t->publish_from[i] ? t->publish_from[i] : "");
    }
    return 0;
}

int agent_net_peers(const char *state_dir, unsigned vni, const char *local,
                    const char *const *peers, size_t npeers, ts_err *err)
{
    char vx[IFNAMSIZ];
    net_names nn;
    struct in_addr x;
    if (npeers > AGENT_NET_PEERS_MAX)
        return ts_err_set(err, TS_EINVAL, "net_peers: %zu: at most %d", npeers,
                          AGENT_NET_PEERS_MAX);
    for (size_t i = 0; i < npeers; i++) /* they go into a batch, line by line */
        if (!peers[i] || inet_pton(AF_INET, peers[i], &x) != 1)
            return ts_err_set(err, TS_EINVAL, "net_peers[%zu]: \"%s\": not an IPv4 address", i,
                              peers[i] ? peers[i] : "");
    agent_net_names(state_dir, &nn);
    agent_net_tenant_link(&nn, 'x', vni, false, vx);
    if (link_exists(vx)) /* an earlier agent's, in this namespace */
        return agent_net_fdb_sync(NULL, vx, peers, npeers, local, err);
    return agent_net_fabric_exists(&nn) && agent_net_fabric_has_link(&nn, vx)
               ? agent_net_fdb_sync(&nn, vx, peers, npeers, local, err)
               : 0;
}

/* The gateway routes (to the services only: the policy) and has no IPv6:
 * written, not exec'd. */
static int bridge_sysctls(const char *br, ts_err *err)
{
    static const char *const knobs[] = {"/proc/sys/net/ipv4/conf/%s/forwarding",
                                        "/proc/sys/net/ipv6/conf/%s/disable_ipv6"};
    static const char *const values[] = {"1", "1"};
    for (int i = 0; i < 2; i++) {
        char path[128];
        snprintf(path, sizeof path, knobs[i], br);
        int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0 && i == 1 && errno == ENOENT)
            continue; /* a kernel without IPv6 */
        if (fd < 0 || write(fd, values[i], 1) != 1) {
            int e = errno;
            if (fd >= 0)
                close(fd);
            return ts_err_set(err, TS_EIO, "network: %s: %s", path, strerror(e));
        }
        close(fd);
    }
    return 0;
}

/* The published ports' map elements of s, verb'd ("add"/"delete"), and for
 * an add the publish_from set refilled (it is the cluster's, the same for
 * every task); appended to out. */
static size_t publish_lines(const net_names *nn, const char *verb, const net_state *s, char *out,
                            size_t len)
{
    size_t n = 0;
    char list[sizeof s->publish];
    snprintf(list, sizeof list, "%s", s->publish);
    char *save = NULL;
    for (char *p = strtok_r(list, ",", &save); p && n < len; p = strtok_r(NULL, ",", &save)) {
        unsigned port;
        char proto[4];
        if (sscanf(p, "%5u/%3s", &port, proto) == 2)
            n += (size_t)snprintf(out + n, len - n,
                                  "%s element inet %s published { %s . %u : %s }\n", verb,
                                  nn->table, proto, port, s->addr);
    }
    if (strcmp(verb, "add") == 0 && s->publish[0] && n < len) {
        char from[sizeof s->from];
        snprintf(from, sizeof from, "%s", strcmp(s->from, "-") == 0 ? "0.0.0.0/0" : s->from);
        n += (size_t)snprintf(out + n, len - n,
                              "flush set inet %s publish_from\n"
                              "add element inet %s publish_from { %s }\n",
                              nn->table, nn->table, from);
    }
    return n;
}

/* The first task here other than skip (NULL: none skipped) with a state
 * file that match says yes to (match NULL: any state file, unread), its id
 * into who (room len; who NULL: not wanted); false if none. */
static bool state_find(const char *state_dir, const char *skip,
                       bool (*match)(const net_state *s, const void *arg), const void *arg,
                       char *who, size_t len)
{
    char dir[700];
    snprintf(dir, sizeof dir, "%s/net", state_dir);
    DIR *d = opendir(dir);
    if (!d)
        return false;
    bool found = false;
    struct dirent *e;
    while (!found && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.' || (skip && strcmp(e->d_name, skip) == 0))
            continue;
        char path[1024];
        net_state s;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        found = !match || (state_read(path, &s) == 0 && match(&s, arg));
        if (found && who)
            snprintf(who, len, "%s", e->d_name);
    }
    closedir(d);
    return found;
}

static bool publishes(const net_state *s, const void *port)
{
    return ts_name_listed(s->publish, port); /* "PORT/tcp|udp" */
}

/* The task other than skip whose state publishes port here, into who; false if none. */
static bool publish_taken(const char *state_dir, const char *port, const char *skip, char *who,
                          size_t len)
{
    return state_find(state_dir, skip, publishes, port, who, len);
}

/* The task's bindings (port, address, MAC) in the bridge table where its
 * port is (legacy: an earlier agent's bridge in this namespace, else the
 * fabric's), and its published ports in this namespace's inet table; verb
 * "add" or "delete". */
static int elements(const net_names *nn, const char *verb, const net_state *s, bool legacy,
                    ts_err *err)
{
    char script[4096], br[IFNAMSIZ];
    bool mv = agent_net_is_macvlan(s->veth); /* its binding is its own namespace's table */
    snprintf(script, sizeof script,
             "%s element bridge %s bound4 { \"%s\" . %s . %s }\n", verb, nn->table, s->veth,
             s->mac, s->addr);
    agent_net_tenant_link(nn, 'b', s->vni, strncmp(s->veth, "tsv", 3) == 0, br);
    if (legacy && strcmp(verb, "add") == 0) /* the tenant's bridge: kept while any task is there */
        snprintf(script + strlen(script), sizeof script - strlen(script),
                 "add element inet %s bridged { \"%s\" . \"%s\" }\n", nn->table, br, br);
    int rc = mv       ? 0
             : legacy ? agent_net_nft_in(NULL, script, err)
             : agent_net_fabric_exists(nn) ? agent_net_fabric_nft(nn, script, err)
                                           : 0;
    if (s->publish[0]) { /* apart: each removal goes even when the other is already gone */
        publish_lines(nn, verb, s, script, sizeof script);
        int prc = agent_net_nft_in(NULL, script, err);
        rc = rc ? rc : prc;
    }
    return rc;
}

/* What a task's network is (checked): its state line and its block's
 * gateway. Refuses a published port another task holds here. */
static int task_state(const char *state_dir, const agent_net_task *t, net_state *s,
                      char gws[INET_ADDRSTRLEN], ts_err *err)
{
    struct in_addr a;
    int rc = check_task(t, &a, err);
    if (rc)
        return rc;
    const unsigned char *b = (const unsigned char *)&a.s_addr;
    /* the tenant's gateway on every node: its block's last address but one */
    uint32_t mask = 0xffffffffu << (32 - t->prefix);
    struct in_addr gw = {htonl((ntohl(a.s_addr) | ~mask) - 1)};
    inet_ntop(AF_INET, &gw, gws, INET_ADDRSTRLEN);
    if (gw.s_addr == a.s_addr)
        return ts_err_set(err, TS_EINVAL, "net.addr: %s is the block's gateway address",
                          t->addr);
    *s = (net_state){.vni = t->vni};
    task_link_name(state_dir, t->task_id, s->veth);
    snprintf(s->addr, sizeof s->addr, "%s", t->addr);
    snprintf(s->mac, sizeof s->mac, "02:00:%02x:%02x:%02x:%02x", b[0], b[1], b[2], b[3]);
    for (size_t i = 0, len = 0; i < t->nnics; i++)
        len += (size_t)snprintf(s->nics + len, sizeof s->nics - len, "%s%s", i ? "," : "",
                                t->nics[i]);
    for (size_t i = 0, len = 0; i < t->npublish; i++)
        len += (size_t)snprintf(s->publish + len, sizeof s->publish - len, "%s%s", i ? "," : "",
                                t->publish[i]);
    snprintf(s->from, sizeof s->from, "-");
    for (size_t i = 0, len = 0; i < t->npublish_from; i++)
        len += (size_t)snprintf(s->from + len, sizeof s->from - len, "%s%s", i ? "," : "",
                                t->publish_from[i]);
    for (size_t i = 0; i < t->npublish; i++) {
        char who[256];
        if (publish_taken(state_dir, t->publish[i], t->task_id, who, sizeof who))
            return ts_err_set(err, TS_ECONFLICT, "net.publish[%zu]: %s: already published on this "
                              "node by task %s", i, t->publish[i], who);
    }
    return 0;
}

/* The task's state file, written before anything is made (a half-made
 * earlier try is taken down first), so a restart can take down what this
 * try leaves. */
static int state_save(const char *state_dir, const agent_net_task *t, const net_state *s,
                      ts_err *err)
{
    char dir[700], path[800];
    snprintf(dir, sizeof dir, "%s/net", state_dir);
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        return ts_err_set(err, TS_EIO, "network: %s: %s", dir, strerror(errno));
    state_path(state_dir, t->task_id, path, sizeof path);
    if (agent_net_has(state_dir, t->task_id)) /* a half-made earlier try */
        agent_net_teardown(state_dir, t->task_id, err);
    FILE *f = fopen(path, "we");
    if (!f ||
        fprintf(f, "%s %u %s %s%s%s\n", s->veth, s->vni, s->addr, s->mac, s->nics[0] ? " " : "",
                s->nics) < 0 ||
        (s->publish[0] && fprintf(f, "publish %s %s\n", s->publish, s->from) < 0) ||
        fclose(f) != 0)
        return ts_err_set(err, TS_EIO, "network: %s: %s", path, strerror(errno));
    return 0;
}

/* The names of one task's links and which of its tenant's are new here. */
typedef struct {
    char br[IFNAMSIZ], vx[IFNAMSIZ], ns[80], fab[64];
    bool new_vx, new_gw;
    int mtu;
} task_links;

/* The ip batches that make them. Here: the task's namespace and, new, the
 * tenant's VXLAN (made here, so its socket is on this namespace's underlay,
 * then moved into the fabric, down until its ingress chain is in). In the
 * fabric: macvlans in bridge mode on the VXLAN, made straight into their
 * namespaces, the task's eth0 (its MAC fixed from its address) and, new, the
 * tenant's gateway (named like the bridges before, t<tag4>b<vni>, so the
 * host's rules are as they were) into this namespace (the calling thread's:
 * /proc/<tid>/ns/net, whatever another thread has entered). A
 * frame between a task and its VXLAN or a neighbour crosses no veth and no
 * bridge: a macvlan hands it to its lower device in the same call, where a
 * veth queues it for another pass of the receive path (bench/netns). Then
 * here: the gateway's address. */
static void link_batches(const agent_net_task *t, const net_state *s, const task_links *L,
                         const char *gws, char *host, size_t hn, char *fabric, size_t fn,
                         char *gw, size_t gn)
{
    size_t n = 0, m = 0;
    n += (size_t)snprintf(host + n, hn - n, "netns add %s\n", L->ns);
    if (L->new_vx)
        n += (size_t)snprintf(host + n, hn - n,
                              "link add %s mtu %d netns %s type vxlan id %u local %s dstport %d\n",
                              L->vx, L->mtu, L->fab, t->vni, t->local, VXLAN_PORT);
    for (size_t i = 0; i < t->nnics; i++) /* the task's own NICs: down while they move */
        n += (size_t)snprintf(host + n, hn - n, "link set %s down\n"
                              "link set %s netns %s\n", t->nics[i], t->nics[i], L->ns);
    if (L->new_vx)
        m += (size_t)snprintf(fabric + m, fn - m, "link set %s up\n", L->vx);
    if (L->new_gw)
        m += (size_t)snprintf(fabric + m, fn - m,
                              "link add %s link %s netns %ld mtu %d address "
                              "02:54:53:%02x:%02x:%02x type macvlan mode bridge\n",
                              L->br, L->vx, (long)gettid(), L->mtu, (t->vni >> 16) & 0xff,
                              (t->vni >> 8) & 0xff, t->vni & 0xff);
    snprintf(fabric + m, fn - m,
             "link add eth0 link %s netns %s mtu %d address %s type macvlan mode bridge\n",
             L->vx, L->ns, L->mtu, s->mac);
    gw[0] = '\0';
    if (L->new_gw)
        snprintf(gw, gn, "link set %s addrgenmode none\naddr add %s/%d dev %s\nlink set %s up\n",
                 L->br, gws, t->prefix, L->br, L->br);
}

/* Inside the task's namespace: loopback, eth0 with its address and the
 * default route through the gateway, the task's own NICs up; then its own
 * table (what eth0 may send), before anything of the task runs. */
static int task_inside(const char *state_dir, const agent_net_task *t, const net_state *s,
                       const char *ns, const char *gws, ts_err *err)
{
    char inside[512 + AGENT_NET_NICS_MAX * 40];
    snprintf(inside, sizeof inside,
             "link set lo up\n"
             "link set eth0 addrgenmode none\n"
             "link set eth0 address %s\n"
             "addr add %s/%d dev eth0\n"
             "link set eth0 up\n"
             "route add default via %s\n",
             s->mac, s->addr, t->prefix, gws);
    for (size_t i = 0; i < t->nnics; i++)
        snprintf(inside + strlen(inside), sizeof inside - strlen(inside), "link set %s up\n",
                 t->nics[i]);
    const char *ip_ns[] = {"ip", "-n", ns, "-batch", "-", NULL};
    int rc = agent_net_run_tool(ip_ns, inside, err);
    if (rc)
        return rc;
    char table[1024], path[128];
    net_names nn;
    agent_net_names(state_dir, &nn);
    agent_net_task_policy_text(&nn, s->mac, s->addr, table, sizeof table);
    snprintf(path, sizeof path, "%s/%s", NS_DIR, ns);
    return agent_net_nft_in(path, table, err);
}

/* The task's RDMA devices into its namespace, each on its own: one that
 * cannot move keeps none back, and the first failure is the task's note. */
static void rdma_move(const agent_net_task *t, const char *ns)
{
    for (size_t i = 0; i < t->nrdma; i++) {
        ts_err e;
        const char *argv[] = {"rdma", "dev", "set", t->rdma[i], "netns", ns, NULL};
        if (t->rdma[i][0] && agent_net_run_tool(argv, NULL, &e) != 0 && t->note && !t->note[0])
            snprintf(t->note, t->note_len, "RDMA device %s not moved into %s (is the host's "
                     "RDMA in exclusive namespace mode: rdma system set netns exclusive?): %s",
                     t->rdma[i], ns, e.msg);
    }
}

int agent_net_setup(const char *state_dir, const agent_net_task *t, char *ns_path,
                    size_t ns_path_len, ts_err *err)
{
    net_state s;
    char gws[INET_ADDRSTRLEN];
    int rc = task_state(state_dir, t, &s, gws, err);
    if (rc || (rc = state_save(state_dir, t, &s, err)) != 0)
        return rc;
    net_names nn;
    agent_net_names(state_dir, &nn);
    task_links L = {.mtu = t->mtu ? t->mtu : AGENT_NET_MTU_DEFAULT};
    agent_net_tenant_link(&nn, 'b', t->vni, false, L.br);
    agent_net_tenant_link(&nn, 'x', t->vni, false, L.vx);
    agent_net_ns_name(state_dir, t->task_id, L.ns, sizeof L.ns);
    agent_net_fabric_name(&nn, L.fab, sizeof L.fab);
    if (link_exists(L.vx)) {
        rc = ts_err_set(err, TS_ECONFLICT, "net.vni: %u: this tenant's bridge is still in the "
                        "agent's namespace (made by an agent before the fabric namespace); "
                        "a task of it can start here once its tasks there have ended", t->vni);
        goto fail;
    }
    if ((rc = agent_net_fabric_ensure(&nn, err)) != 0 ||
        (rc = elements(&nn, "add", &s, false, err)) != 0)
        goto fail;
    if (agent_net_fabric_has_link(&nn, L.br)) { /* a VXLAN on a bridge takes no macvlan */
        rc = ts_err_set(err, TS_ECONFLICT, "net.vni: %u: this tenant's bridge is still in the "
                        "fabric namespace (made by an agent before the macvlans); a task of it "
                        "can start here once its tasks there have ended", t->vni);
        goto fail;
    }
    L.new_vx = !agent_net_fabric_has_link(&nn, L.vx);
    L.new_gw = !link_exists(L.br);
    char host[2048], fabric[1024], gw[256], chain[512];
    link_batches(t, &s, &L, gws, host, sizeof host, fabric, sizeof fabric, gw, sizeof gw);
    agent_net_overlay_chain_text(&nn, t->vni, L.vx, chain, sizeof chain);
    const char *ip_host[] = {"ip", "-batch", "-", NULL};
    if ((rc = agent_net_run_tool(ip_host, host, err)) != 0 ||
        (L.new_vx && (rc = agent_net_fabric_nft(&nn, chain, err)) != 0) ||
        (rc = agent_net_fabric_ip(&nn, fabric, err)) != 0 ||
        (gw[0] && (rc = agent_net_run_tool(ip_host, gw, err)) != 0) ||
        (rc = bridge_sysctls(L.br, err)) != 0 ||
        (rc = task_inside(state_dir, t, &s, L.ns, gws, err)) != 0)
        goto fail;
    if (L.new_vx &&
        (rc = agent_net_fdb_sync(&nn, L.vx, t->peers, t->npeers, t->local, err)) != 0)
        goto fail;
    rdma_move(t, L.ns);
    snprintf(ns_path, ns_path_len, "%s/%s", NS_DIR, L.ns);
    return 0;
fail:;
    ts_err keep = *err;
    agent_net_teardown(state_dir, t->task_id, err);
    *err = keep;
    return rc;
}

/* ---- teardown ------------------------------------------------------------------- */

bool agent_net_has(const char *state_dir, const char *task_id)
{
    char path[800], ns[80], nspath[128];
    state_path(state_dir, task_id, path, sizeof path);
    agent_net_ns_name(state_dir, task_id, ns, sizeof ns);
    snprintf(nspath, sizeof nspath, "%s/%s", NS_DIR, ns);
    return access(path, F_OK) == 0 || access(nspath, F_OK) == 0;
}

static bool names_vni(const net_state *s, const void *vni)
{
    return s->vni == *(const unsigned *)vni;
}

/* Whether a state file other than skip's names vni. */
static bool vni_in_use(const char *state_dir, unsigned vni, const char *skip)
{
    return state_find(state_dir, skip, names_vni, &vni, NULL, 0);
}

/* Moves the task's NICs back to the agent's namespace before its own goes:
 * the kernel would return a physical device to the initial namespace by
 * itself, but destroys a virtual one (and the agent may run in a node's
 * namespace). Each device on its own, so one gone does not keep the others;
 * a device already back here is not an error. */
static void nics_home(const char *ns, const net_state *s, int *rc, ts_err *err)
{
    char list[sizeof s->nics], pid[24];
    snprintf(list, sizeof list, "%s", s->nics);
    snprintf(pid, sizeof pid, "%ld", (long)getpid());
    char *save = NULL;
    for (char *d = strtok_r(list, ",", &save); d; d = strtok_r(NULL, ",", &save)) {
        const char *argv[] = {"ip", "-n", ns, "link", "set", d, "netns", pid, NULL};
        ts_err e;
        if (agent_net_run_tool(argv, NULL, &e) != 0 && !link_exists(d) && *rc == 0) {
            *rc = e.code;
            *err = e;
            snprintf(err->msg + strlen(err->msg), sizeof err->msg - strlen(err->msg),
                     " (moving %s back from %s)", d, ns);
        }
    }
}

/* Whether any task has network state here. */
static bool any_state(const char *state_dir)
{
    return state_find(state_dir, NULL, NULL, NULL, NULL, 0);
}

int agent_net_teardown(const char *state_dir, const char *task_id, ts_err *err)
{
    if (!id_ok(task_id))
        return ts_err_set(err, TS_EINVAL, "network: task id \"%s\": not valid",
                          task_id ? task_id : "");
    char path[800], ns[80], nspath[128];
    state_path(state_dir, task_id, path, sizeof path);
    agent_net_ns_name(state_dir, task_id, ns, sizeof ns);
    snprintf(nspath, sizeof nspath, "%s/%s", NS_DIR, ns);
    net_state s;
    bool have = state_read(path, &s) == 0;
    int rc = 0;
    ts_err e;
    net_names nn;
    agent_net_names(state_dir, &nn);
    bool fabric = agent_net_fabric_exists(&nn);
    /* an earlier agent's task: its port on a bridge in this namespace */
    bool legacy = have && link_exists(s.veth);
    if (have && s.nics[0] && access(nspath, F_OK) == 0)
        nics_home(ns, &s, &rc, err);
    if (access(nspath, F_OK) == 0) {
        /* the namespace's end of the veth goes with it, and so the pair */
        const char *argv[] = {"ip", "netns", "delete", ns, NULL};
        if (agent_net_run_tool(argv, NULL, &e) != 0 && rc == 0) {
            rc = e.code;
            *err = e;
        }
    }
    if (have) {
        /* the namespace's deletion may be removing the veth at this moment */
        if (link_exists(s.veth)) {
            const char *argv[] = {"ip", "link", "delete", s.veth, NULL};
            if (agent_net_run_tool(argv, NULL, &e) != 0 && link_exists(s.veth) && rc == 0) {
                rc = e.code;
                *err = e;
            }
        } else if (fabric && agent_net_fabric_has_link(&nn, s.veth)) {
            char line[64];
            snprintf(line, sizeof line, "link delete %s\n", s.veth);
            if (agent_net_fabric_ip(&nn, line, &e) != 0 &&
                agent_net_fabric_has_link(&nn, s.veth) && rc == 0) {
                rc = e.code;
                *err = e;
            }
        }
        elements(&nn, "delete", &s, legacy, &e); /* absent after a table reload: no error */
        if (!vni_in_use(state_dir, s.vni, task_id))
            agent_net_tenant_remove(&nn, s.vni, strncmp(s.veth, "tsv", 3) == 0, fabric, &rc,
                                    err);
    }
    if (rc == 0 && unlink(path) != 0 && errno != ENOENT)
        rc = ts_err_set(err, TS_EIO, "network: %s: %s", path, strerror(errno));
    if (rc == 0 && !any_state(state_dir))
        agent_net_fabric_remove(&nn); /* the last task here: nothing of the fabric is left */
    return rc;
}

/* ---- start: tables and what an earlier agent left ------------------------------ */

typedef struct id_list {
    char (*v)[64];
    size_t n, cap;
} id_list;

static void ids_add(id_list *l, const char *id)
{
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->v[i], id) == 0)
            return;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        char(*v)[64] = realloc(l->v, cap * sizeof *v);
        if (!v)
            return;
        l->v = v;
        l->cap = cap;
    }
    snprintf(l->v[l->n++], 64, "%s", id);
}

static void ids_from_dir(id_list *l, const char *dir, const char *prefix)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    size_t pl = strlen(prefix);
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strncmp(e->d_name, prefix, pl) == 0 && id_ok(e->d_name + pl))
            ids_add(l, e->d_name + pl);
    closedir(d);
}

int agent_net_start(const char *state_dir, bool (*keep)(const char *task_id, void *ctx),
                    void *ctx, int *removed, ts_err *err)
{
    char dir[700];
    snprintf(dir, sizeof dir, "%s/net", state_dir);
    id_list ids = {0};
    /* the state files, not /run/netns: that folder is the host's, and the
     * state file is written before anything is made and removed last */
    ids_from_dir(&ids, dir, "");
    int gone = 0, rc = 0;
    for (size_t i = 0; i < ids.n; i++) {
        if (keep && keep(ids.v[i], ctx))
            continue;
        ts_err e;
        if (agent_net_teardown(state_dir, ids.v[i], &e) == 0)
            gone++;
        else if (rc == 0) {
            rc = e.code;
            *err = e;
        }
    }
    /* the tables whole, in one transaction with the bindings of the kept */
    char *script = malloc(SCRIPT_BYTES);
    if (!script) {
        free(ids.v);
        return ts_err_set(err, TS_ENOMEM, "network: out of memory");
    }
    net_names nn;
    agent_net_names(state_dir, &nn);
    size_t n = (size_t)snprintf(script, SCRIPT_BYTES,
                                "table bridge %s\ndelete table bridge %s\n"
                                "table inet %s\ndelete table inet %s\n",
                                nn.table, nn.table, nn.table, nn.table);
    n += agent_net_policy_text(&nn, script + n, SCRIPT_BYTES - n);
    /* the kept tasks' bindings: in this namespace's bridge table for an
     * earlier agent's (their ports here), in the fabric's for the others */
    char *fab = malloc(SCRIPT_BYTES);
    size_t f = 0;
    if (!fab) {
        free(script);
        free(ids.v);
        return ts_err_set(err, TS_ENOMEM, "network: out of memory");
    }
    fab[0] = '\0';
    for (size_t i = 0; i < ids.n && n + 256 < SCRIPT_BYTES && f + 256 < SCRIPT_BYTES; i++) {
        char path[800];
        net_state s;
        state_path(state_dir, ids.v[i], path, sizeof path);
        if (!keep || !keep(ids.v[i], ctx) || state_read(path, &s) != 0)
            continue;
        if (agent_net_is_macvlan(s.veth)) { /* its tenant's VXLAN's chain, once */
            char vx[IFNAMSIZ], chain[512];
            agent_net_tenant_link(&nn, 'x', s.vni, false, vx);
            agent_net_overlay_chain_text(&nn, s.vni, vx, chain, sizeof chain);
            if (!strstr(fab, chain) && agent_net_fabric_exists(&nn) &&
                agent_net_fabric_has_link(&nn, vx) && f + strlen(chain) < SCRIPT_BYTES)
                f += (size_t)snprintf(fab + f, SCRIPT_BYTES - f, "%s", chain);
        } else if (!link_exists(s.veth)) {
            f += (size_t)snprintf(fab + f, SCRIPT_BYTES - f,
                                  "add element bridge %s bound4 { \"%s\" . %s . %s }\n",
                                  nn.table, s.veth, s.mac, s.addr);
        } else {
            char br[IFNAMSIZ];
            agent_net_tenant_link(&nn, 'b', s.vni, strncmp(s.veth, "tsv", 3) == 0, br);
            n += (size_t)snprintf(script + n, SCRIPT_BYTES - n,
                                  "add element bridge %s bound4 { \"%s\" . %s . %s }\n"
                                  "add element inet %s bridged { \"%s\" . \"%s\" }\n",
                                  nn.table, s.veth, s.mac, s.addr, nn.table, br, br);
        }
        if (s.publish[0] && n + 2048 < SCRIPT_BYTES)
            n += publish_lines(&nn, "add", &s, script + n, SCRIPT_BYTES - n);
    }
    ts_err e;
    /* the fabric's table whole with its bindings; no fabric when no task is left */
    if (!fab[0])
        agent_net_fabric_remove(&nn);
    else if ((agent_net_fabric_exists(&nn) ? agent_net_fabric_table(&nn, fab, &e)
                                           : agent_net_fabric_ensure(&nn, &e)) != 0 &&
             rc == 0) {
        rc = e.code;
        *err = e;
    }
    free(fab);
    if (agent_net_nft_in(NULL, script, &e) != 0 && rc == 0) {
        rc = e.code;
        *err = e;
    }
    free(script);
    free(ids.v);
    if (removed)
        *removed = gone;
    return rc;
}

