/*
 * cycle_fair.c - what borrowers hold against each other (fair reclaim).
 *
 * Reclaim gives a tenant below its guarantee its GPUs back; what lies above
 * the guarantees is lent first come first served, so a tenant that borrowed
 * early kept its loans while another borrower, with less of its weighted
 * share, waited. Fair reclaim (ts_sched_config.fair_reclaim) lets a job of
 * tenant A that would borrow, passes the quota and lacks room take back a
 * loan of tenant B (an opportunistic job of a tenant above its guarantee)
 * when A, the job started, still holds
 * less per unit of weight than B holds once the loan is gone:
 *
 *     (held_A + g_job) / w_A  <  (held_B - g_victims_of_B) / w_B
 *
 * held in GPUs now (not decayed), w the fair-share weight. The inequality is
 * strict and both sides are what the preemption makes, so the loan's job
 * cannot take the room back in turn (that would need B's share, its job
 * back, below A's, which is above B's); a chain of such preemptions lowers
 * the largest share each time, so it ends. Kueue's fair sharing preempts
 * under the same final-share rule.
 */
#include "sched/cycle_internal.h"

int64_t cycle_held_gpu_milli(const ts_sched *s, int t)
{
    int64_t held = 0;
    for (int m = 0; m < TS_MAX_GPU_MODELS; m++)
        if (s->models_present >> m & 1)
            held += ts_quota_usage(s->q, t, ts_res_gpu(m));
    return held;
}

bool cycle_fair_takes(const ts_sched *s, int a, int64_t a_held, int64_t a_gain, int b,
                      int64_t b_held, int64_t b_loss)
{
    const ts_tenants *ts = ts_quota_tenants(s->q);
    double wa = ts->t[a].weight, wb = ts->t[b].weight;
    if (a == b || !(wa > 0.0) || !(wb > 0.0) || b_loss > b_held)
        return false;
    /* cross-multiplied: (a_held + a_gain) / wa < (b_held - b_loss) / wb */
    return (double)(a_held + a_gain) * wb < (double)(b_held - b_loss) * wa;
}
