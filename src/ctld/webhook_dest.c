/*
 * webhook_dest.c - where a job's webhook may go (docs/job-spec.md "notify").
 *
 * A job's notify.url is its tenant's to choose, and the controller makes the
 * call: from its own host and network. So by default a webhook may not reach
 * the controller's host itself (loopback), a link-local address (among them
 * a cloud's instance metadata at 169.254.169.254, which hands out the host's
 * credentials), an unspecified or a multicast address. tesserad.yaml's
 * webhooks.allow admits ranges of those a site does want (a receiver on the
 * controller's host). The check is made on the address the call connects
 * to, after the name was resolved (curl's socket callback), so a name that
 * resolves to a refused address, or is made to later, is refused too.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "ctld/config_walk.h"
#include "ctld/ctld.h"
#include "ctld/http.h"

/* "A.B.C.D[/N]" or "X::Y[/N]" into c; false for anything else. */
static bool cidr_parse(const char *s, struct ctld_cidr *c)
{
    char a[64];
    const char *slash = strchr(s, '/');
    size_t n = slash ? (size_t)(slash - s) : strlen(s);
    if (n == 0 || n >= sizeof a)
        return false;
    memcpy(a, s, n);
    a[n] = '\0';
    memset(c, 0, sizeof *c);
    if (inet_pton(AF_INET, a, c->addr) == 1)
        c->family = AF_INET;
    else if (inet_pton(AF_INET6, a, c->addr) == 1)
        c->family = AF_INET6;
    else
        return false;
    int most = c->family == AF_INET ? 32 : 128;
    c->prefix = most;
    if (slash) {
        char *end;
        long p = strtol(slash + 1, &end, 10);
        if (end == slash + 1 || *end || p < 0 || p > most)
            return false;
        c->prefix = (int)p;
    }
    return true;
}

int ctld_cfg_webhooks(cfg_ctx *x, yaml_node_t *m)
{
    static const char *const keys[] = {"allow"};
    yaml_node_t *v[1];
    int rc = ts_yaml_map_fields(&x->D, m, "webhooks", keys, 1, v);
    if (rc || !v[0])
        return rc;
    if (v[0]->type != YAML_SEQUENCE_NODE)
        return ts_yaml_fail_got(&x->D, v[0], "webhooks.allow",
                                "a list of addresses or ranges (127.0.0.1, 10.0.0.0/8, ::1/128)");
    ctld_config *cfg = x->cfg;
    int i = 0;
    for (yaml_node_item_t *it = v[0]->data.sequence.items.start;
         it < v[0]->data.sequence.items.top; it++, i++) {
        yaml_node_t *e = ts_yaml_node(&x->D, *it);
        const char *t = ts_yaml_scalar(e);
        char path[64];
        ts_yaml_pathf(path, sizeof path, "webhooks.allow[%d]", i);
        if (cfg->nhook_allow == CTLD_HOOK_ALLOW_MAX)
            return ts_yaml_fail(&x->D, e, TS_EINVAL, "webhooks.allow: at most %d entries",
                                CTLD_HOOK_ALLOW_MAX);
        if (!t || !cidr_parse(t, &cfg->hook_allow[cfg->nhook_allow]))
            return ts_yaml_fail_got(&x->D, e, path, "an address or a range (A.B.C.D/N, X::Y/N)");
        cfg->nhook_allow++;
    }
    return 0;
}

static bool in_range(const struct ctld_cidr *c, int family, const unsigned char *a)
{
    if (c->family != family)
        return false;
    int full = c->prefix / 8, rest = c->prefix % 8;
    if (memcmp(c->addr, a, (size_t)full) != 0)
        return false;
    unsigned char mask = (unsigned char)(0xff << (8 - rest));
    return rest == 0 || (c->addr[full] & mask) == (a[full] & mask);
}

/* What kind of address a webhook may not reach by default ("" none). */
static const char *refused_kind(int family, const unsigned char *a)
{
    static const unsigned char v4mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (family == AF_INET6 && memcmp(a, v4mapped, 12) == 0)
        return refused_kind(AF_INET, a + 12);
    if (family == AF_INET) {
        if (a[0] == 127)
            return "a loopback address (the controller's own host)";
        if (a[0] == 169 && a[1] == 254)
            return "a link-local address (a cloud's instance metadata among them)";
        if (a[0] == 0)
            return "an unspecified address";
        if (a[0] >= 224)
            return "a multicast or reserved address";
        return "";
    }
    static const unsigned char zero[16], one[16] = {[15] = 1};
    if (memcmp(a, one, 16) == 0)
        return "a loopback address (the controller's own host)";
    if (memcmp(a, zero, 16) == 0)
        return "an unspecified address";
    if (a[0] == 0xfe && (a[1] & 0xc0) == 0x80)
        return "a link-local address";
    if (a[0] == 0xff)
        return "a multicast address";
    return "";
}

bool ctld_webhook_dest_ok(const ctld_config *cfg, const struct sockaddr *sa, char *why,
                          size_t wn)
{
    const unsigned char *a;
    int family = sa->sa_family;
    if (family == AF_INET)
        a = (const unsigned char *)&((const struct sockaddr_in *)sa)->sin_addr;
    else if (family == AF_INET6)
        a = ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr;
    else {
        snprintf(why, wn, "not an IP address");
        return false;
    }
    const char *kind = refused_kind(family, a);
    if (!kind[0])
        return true;
    for (int i = 0; i < cfg->nhook_allow; i++)
        if (in_range(&cfg->hook_allow[i], family, a))
            return true;
    char text[INET6_ADDRSTRLEN];
    inet_ntop(family, a, text, sizeof text);
    snprintf(why, wn, "%s is %s, which a webhook may not reach (webhooks.allow in "
             "tesserad.yaml admits it)", text, kind);
    return false;
}
