/*
 * cycle_ports.c - published host ports as a per-node resource of the cycle.
 *
 * A serving job on an isolating cluster publishes ports of its tasks at
 * their node's address (docs/network.md, "Published ports"); the node's
 * nftables map holds one task per port, so a second task publishing it on
 * that node could not start. The cycle therefore treats each (node, port)
 * as taken by whoever holds it: the running jobs it was given, then every
 * start it decides, in one flat table rebuilt per cycle (a few entries per
 * serving task; a cluster's worth is a few thousand, scanned once per
 * placement of a job that publishes ports, and not at all for the others).
 * Within a cycle the table only grows, as free resources only shrink, so
 * the memo of identical failures stays valid. Plans on the scratch copy
 * (a reservation's time, preemption victims) release and bind jobs there;
 * each entry names its holder, so a holder released on the copy holds its
 * ports no more there (one pass over the table per release, paid only
 * while some job holds a port).
 */
#include <stdlib.h>

#include "sched/cycle_internal.h"
#include "tessera/node_select.h"

void cycle_ports_reset(ts_sched *s) { s->nhports = 0; }

int cycle_ports_add(ts_sched *s, const ts_job *job, const ts_alloc *allocs)
{
    if (job->nhost_ports <= 0 || !job->host_ports || !allocs)
        return 0;
    int need = s->nhports + job->ntasks * job->nhost_ports;
    if (cycle_grow((void **)&s->hports, &s->hports_cap, need, sizeof *s->hports) != 0)
        return TS_ENOMEM;
    for (int t = 0; t < job->ntasks; t++) {
        if (allocs[t].node < 0 || allocs[t].node >= s->c->nnodes)
            continue;
        for (int p = 0; p < job->nhost_ports; p++)
            s->hports[s->nhports++] = (cycle_host_port){.node = allocs[t].node,
                                                        .key = job->host_ports[p], .job = job};
    }
    return 0;
}

void cycle_ports_scratch(ts_sched *s, const ts_job *job, bool gone)
{
    for (int e = 0; e < s->nhports; e++)
        if (!job || s->hports[e].job == job)
            s->hports[e].gone = gone;
}

int cycle_ports_taken(const ts_sched *s, const ts_job *job, bool scratch, uint64_t *taken,
                      int nnodes, uint32_t *first)
{
    int n = 0;
    *first = 0;
    for (int e = 0; e < s->nhports; e++) {
        const cycle_host_port *h = &s->hports[e];
        if (h->node >= nnodes || ts_node_mask_has(taken, h->node) || (scratch && h->gone))
            continue;
        for (int p = 0; p < job->nhost_ports; p++)
            if (job->host_ports[p] == h->key) {
                taken[h->node >> 6] |= UINT64_C(1) << (h->node & 63);
                if (n++ == 0)
                    *first = h->key;
                break;
            }
    }
    return n;
}

int cycle_ports_check(const ts_job *job, ts_err *err)
{
    if (job->nhost_ports == 0)
        return 0;
    if (job->nhost_ports < 0 || job->nhost_ports > TS_HOST_PORTS_MAX || !job->host_ports)
        return ts_err_set(err, TS_EINVAL, "network.publish: must hold 0..%d ports",
                          TS_HOST_PORTS_MAX);
    for (int p = 0; p < job->nhost_ports; p++) {
        uint32_t k = job->host_ports[p];
        if (TS_HOST_PORT_NUMBER(k) == 0 || k >> 17)
            return ts_err_set(err, TS_EINVAL, "network.publish[%d]: not a port (1..65535)", p);
    }
    if (job->ntasks > 1 && job->required_level != TS_GANG_LEVEL_ANY)
        return ts_err_set(err, TS_EINVAL, "topology.required: a job publishing ports runs one "
                          "task per node (a node's port is one task's), placed task by task "
                          "without a topology level; drop one or the other");
    return 0;
}
