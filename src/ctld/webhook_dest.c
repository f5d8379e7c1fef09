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
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "ctld/config_walk.h"
#include "ctld/ctld.h"
#include "ctld/http.h"
#include "io/dest.h"

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
        if (!t || !io_cidr_parse(t, &cfg->hook_allow[cfg->nhook_allow]))
            return ts_yaml_fail_got(&x->D, e, path, "an address or a range (A.B.C.D/N, X::Y/N)");
        cfg->nhook_allow++;
    }
    return 0;
}

bool ctld_webhook_dest_ok(const ctld_config *cfg, const struct sockaddr *sa, char *why,
                          size_t wn)
{
    return io_dest_ok(sa, cfg->hook_allow, cfg->nhook_allow, "a webhook",
                      "webhooks.allow in tesserad.yaml", why, wn);
}
