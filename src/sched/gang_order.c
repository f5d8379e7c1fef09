/*
 * gang_order.c - which of a gang's equal candidates take its tasks first.
 * Best fit orders the subtree's candidate nodes by free GPUs; within a run
 * of nodes with equal free GPUs, packing would take them in node order.
 * With an expected workload (spec->typical) the head of each run that
 * packing can reach is measured instead, and the nodes whose fragmentation
 * measure (frag.c, the tessera scorer's) grows least go first. With an
 * image price per node (spec->node_cost_s) the nodes that hold more of the
 * image join the measured head, and equal growths go to the node with the
 * fewest pull seconds. No workload and no price: the order is untouched.
 */
#include "sched/gang_internal.h"

#include <string.h>

/* Growth of the measure if node took whole-GPU task r (its lowest-index
 * fully free GPUs, as ts_node_choose_gpus takes them). */
static double frag_growth(const plan *p, const ts_node *n, const ts_request *r)
{
    ts_frag_shape s;
    ts_frag_shape_of(n, &s);
    double before = ts_frag_shape_placement(&s, &p->typ, p->w);
    int left = r->num_gpu;
    for (int i = 0; i < s.ngpu && left > 0; i++)
        if (s.free[i] >= TS_MILLI_PER_GPU && n->gpu[i].mode != TS_GPU_MIG) {
            s.free[i] = 0;
            left--;
        }
    s.cpu_left -= r->cpu_milli;
    s.mem_left -= r->mem_mib;
    return ts_frag_shape_placement(&s, &p->typ, p->w) - before;
}

/* With an image price (spec->node_cost_s): moves up to `extra` nodes of
 * the run [i, j) that cost less than the dearest of its head [i, i + h)
 * right behind the head, the rest keeping their order; returns how many.
 * So nodes that hold the image are measured too, and the head's best
 * growth of the measure can only improve. cand_key is free scratch here. */
static int pull_cheap_forward(plan *p, int i, int j, int h, int extra)
{
    const double *cost = p->sp->node_cost_s;
    double dearest = 0.0;
    for (int k = i; k < i + h; k++)
        dearest = cost[p->cand[k]] > dearest ? cost[p->cand[k]] : dearest;
    int *moved = p->cand_key, *kept = p->cand_key + (p->ix->nnodes + 1);
    int nm = 0, nk = 0;
    for (int k = i + h; k < j; k++) {
        int node = p->cand[k];
        if (nm < extra && cost[node] < dearest)
            moved[nm++] = node;
        else
            kept[nk++] = node;
    }
    memcpy(p->cand + i + h, moved, (size_t)nm * sizeof *moved);
    memcpy(p->cand + i + h + nm, kept, (size_t)nk * sizeof *kept);
    return nm;
}

void gang_frag_order(plan *p, const ts_request *r, int head)
{
    const double *cost = p->sp->node_cost_s;
    if (p->typ.n == 0 && !cost)
        return;
    for (int i = 0; i < p->ncand;) {
        int f = gang_node_free(gang_view(p, p->cand[i])), j = i;
        while (j < p->ncand && gang_node_free(gang_view(p, p->cand[j])) == f)
            j++;
        int h = f >= r->num_gpu ? (j - i < head ? j - i : head) : 0;
        if (cost && h > 0)
            h += pull_cheap_forward(p, i, j, h, head);
        for (int k = i; k < i + h; k++)
            p->fkey[k] = p->typ.n > 0 ? frag_growth(p, gang_view(p, p->cand[k]), r) : 0.0;
        for (int k = i + 1; k < i + h; k++) { /* insertion sort: h is small */
            int node = p->cand[k];
            double key = p->fkey[k], c = cost ? cost[node] : 0.0;
            int m = k - 1;
            while (m >= i) {
                double cm = cost ? cost[p->cand[m]] : 0.0;
                if (!(p->fkey[m] > key ||
                      (p->fkey[m] == key && (cm > c || (cm == c && p->cand[m] > node)))))
                    break;
                p->cand[m + 1] = p->cand[m];
                p->fkey[m + 1] = p->fkey[m];
                m--;
            }
            p->cand[m + 1] = node;
            p->fkey[m + 1] = key;
        }
        i = j;
    }
}
