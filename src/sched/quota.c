/*
 * quota.c - usage accounting and admission against the tenant tree's quotas,
 * what each subtree borrows, and fair share with decayed usage.
 *
 * Per dimension, each tenant x has a pool: the part of its guarantee not
 * handed to its children, less its own usage, plus what its children can
 * lend, less what its children borrow:
 *     net(x) = unassigned(x) - own(x) + sum avail(child) - sum need(child)
 * If net >= 0 the subtree borrows nothing (need = 0) and offers
 * avail = min(net, lend limit) to its siblings; else it borrows need = -net
 * from its parent's pool. Children's borrowing is met inside the parent
 * before it reaches further up: idle guarantee goes to siblings first, then
 * to cousins. A state fits when need(x) <= borrow limit(x) everywhere and the
 * organisations' pools together are not negative. need and avail are kept
 * per tenant with their sums per parent, so a check or a charge walks one
 * path to the root: O(depth) per dimension, nothing else is visited.
 */
#include "tessera/tenant.h"

#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "tessera/fmt.h"
#include "tessera/grow.h"
#include "tessera/mig.h"

struct ts_quota {
    const ts_tenants *ts;
    int n;
    double lambda;          /* ln 2 / half-life, per second */
    double now;             /* the latest time seen */
    /* [n][TS_RES_DIMS] unless noted */
    int64_t *own;           /* [n][TS_TIERS][TS_RES_DIMS]: charged to x itself */
    int64_t *use;           /* subtree, both tiers */
    int64_t *use_g;         /* subtree, guaranteed tier */
    int64_t *unassigned;    /* guarantee not handed to children */
    int64_t *need;          /* borrowed from outside the subtree */
    int64_t *avail;         /* lendable outside the subtree */
    int64_t *cneed;         /* sum of the children's need */
    int64_t *cavail;        /* sum of the children's avail */
    double *decayed;        /* decayed usage, resource-seconds */
    double *stamp;          /* [n]: time decayed was brought to */
    void *block;            /* own..stamp, sized once (ts_block_alloc) */
    int64_t rneed[TS_RES_DIMS];   /* over the organisations */
    int64_t ravail[TS_RES_DIMS];
    int64_t ruse[TS_RES_DIMS];
    int64_t cap[TS_RES_DIMS];     /* the organisations' guarantees */
    int64_t capacity[TS_RES_DIMS]; /* the cluster's (ts_quota_set_capacity), 0 unknown */
};

/* What a share in dimension k is a fraction of: the guarantees where any
 * are given, else the cluster's capacity (a cluster of tenants without
 * guarantees still has fair share); 0 = not counted. */
static int64_t share_base(const ts_quota *q, int k)
{
    return q->cap[k] > 0 ? q->cap[k] : q->capacity[k];
}

void ts_quota_set_capacity(ts_quota *q, const int64_t capacity[TS_RES_DIMS])
{
    for (int k = 0; k < TS_RES_DIMS; k++)
        q->capacity[k] = capacity[k] > 0 ? capacity[k] : 0;
}

double ts_quota_usage_share(const ts_quota *q, const int64_t use[TS_RES_DIMS])
{
    double best = 0.0;
    for (int k = 0; k < TS_RES_DIMS; k++) {
        int64_t base = share_base(q, k);
        double s = base > 0 ? (double)use[k] / (double)base : 0.0;
        best = s > best ? s : best;
    }
    return best;
}

#define AT(a, t, k) ((a)[(size_t)(t) * TS_RES_DIMS + (size_t)(k)])
#define OWN(q, t, tier, k) ((q)->own[((size_t)(t) * TS_TIERS + (size_t)(tier)) * TS_RES_DIMS + (size_t)(k)])

/* One tenant on the path from the charged tenant to its organisation, with
 * the need and avail it would have. */
struct step {
    int t;
    int64_t need;
    int64_t avail;
};

int ts_quota_new(const ts_tenants *ts, double half_life_s, ts_quota **out, ts_err *err)
{
    if (!out)
        return ts_err_set(err, TS_EINVAL, "quota: missing output");
    *out = NULL;
    int rc = ts_tenants_validate(ts, err);
    if (rc != 0)
        return rc;
    if (!(half_life_s > 0.0 && isfinite(half_life_s)))
        return ts_err_set(err, TS_EINVAL, "quota.half_life_s: must be > 0");
    ts_quota *q = calloc(1, sizeof *q);
    if (!q)
        return ts_err_set(err, TS_ENOMEM, "quota: out of memory");
    size_t cells = (size_t)(ts->n > 0 ? ts->n : 1) * TS_RES_DIMS;
    q->ts = ts;
    q->n = ts->n;
    q->lambda = log(2.0) / half_life_s;
    ts_block_part parts[] = {
        TS_BLOCK_PART(q->own, cells * TS_TIERS), TS_BLOCK_PART(q->use, cells),
        TS_BLOCK_PART(q->use_g, cells),          TS_BLOCK_PART(q->unassigned, cells),
        TS_BLOCK_PART(q->need, cells),           TS_BLOCK_PART(q->avail, cells),
        TS_BLOCK_PART(q->cneed, cells),          TS_BLOCK_PART(q->cavail, cells),
        TS_BLOCK_PART(q->decayed, cells),
        TS_BLOCK_PART(q->stamp, (size_t)(ts->n > 0 ? ts->n : 1))};
    if (!(q->block = ts_block_alloc(parts, sizeof parts / sizeof *parts))) {
        free(q);
        return ts_err_set(err, TS_ENOMEM, "quota: out of memory");
    }
    for (int i = 0; i < ts->n; i++) {
        const ts_tenant *t = &ts->t[i];
        for (int k = 0; k < TS_RES_DIMS; k++) {
            AT(q->unassigned, i, k) += t->guaranteed[k];
            if (t->parent >= 0)
                AT(q->unassigned, t->parent, k) -= t->guaranteed[k];
            else
                q->cap[k] += t->guaranteed[k];
        }
    }
    /* the empty state: children before parents (larger index first) */
    for (int i = ts->n - 1; i >= 0; i--) {
        const ts_tenant *t = &ts->t[i];
        for (int k = 0; k < TS_RES_DIMS; k++) {
            int64_t net = AT(q->unassigned, i, k) + AT(q->cavail, i, k);
            int64_t av = net < t->lend_limit[k] ? net : t->lend_limit[k];
            AT(q->avail, i, k) = av;
            if (t->parent >= 0)
                AT(q->cavail, t->parent, k) += av;
            else
                q->ravail[k] += av;
        }
    }
    *out = q;
    return 0;
}

void ts_quota_free(ts_quota *q)
{
    if (!q)
        return;
    free(q->block);
    free(q);
}

int ts_quota_copy(ts_quota **dst, const ts_quota *src)
{
    ts_quota *d = *dst;
    if (d && (d->ts != src->ts || d->n != src->n)) {
        ts_quota_free(d);
        *dst = d = NULL;
    }
    if (!d) {
        ts_err e;
        if (ts_quota_new(src->ts, log(2.0) / src->lambda, &d, &e) != 0)
            return TS_ENOMEM;
        *dst = d;
    }
    size_t cells = (size_t)(src->n > 0 ? src->n : 1) * TS_RES_DIMS;
    /* the arrays by hand, the scalars with the struct: d keeps its own */
    int64_t *i64[][2] = {{d->own, src->own}, {d->use, src->use}, {d->use_g, src->use_g},
                         {d->unassigned, src->unassigned}, {d->need, src->need},
                         {d->avail, src->avail}, {d->cneed, src->cneed},
                         {d->cavail, src->cavail}};
    for (size_t k = 0; k < sizeof i64 / sizeof *i64; k++)
        memcpy(i64[k][0], i64[k][1], cells * (k == 0 ? TS_TIERS : 1) * sizeof(int64_t));
    memcpy(d->decayed, src->decayed, cells * sizeof *d->decayed);
    memcpy(d->stamp, src->stamp, (size_t)(src->n > 0 ? src->n : 1) * sizeof *d->stamp);
    ts_quota keep = *d;
    *d = *src;
    d->own = keep.own;
    d->use = keep.use;
    d->use_g = keep.use_g;
    d->unassigned = keep.unassigned;
    d->need = keep.need;
    d->avail = keep.avail;
    d->cneed = keep.cneed;
    d->cavail = keep.cavail;
    d->decayed = keep.decayed;
    d->stamp = keep.stamp;
    d->block = keep.block;
    return 0;
}

int ts_quota_demand(const ts_request *req, int gpu_model, int64_t demand[TS_RES_DIMS],
                    ts_err *err)
{
    if (!req || !demand)
        return ts_err_set(err, TS_EINVAL, "quota: missing request");
    int rc = ts_request_check(req, err);
    if (rc != 0)
        return rc;
    memset(demand, 0, sizeof(int64_t) * TS_RES_DIMS);
    demand[TS_RES_CPU] = req->cpu_milli;
    demand[TS_RES_MEM] = req->mem_mib;
    if (req->num_gpu == 0 && req->mig_profile < 0)
        return 0;
    if (gpu_model < 0 || gpu_model >= ts_gpu_model_count() || gpu_model >= TS_MAX_GPU_MODELS)
        return ts_err_set(err, TS_EINVAL, "gpu_model: %d is not a GPU model id", gpu_model);
    if (req->mig_profile >= 0) {
        const ts_gpu_model_info *m = ts_gpu_model_get(gpu_model);
        const ts_mig_profile *p = ts_mig_profile_get(m->mig_geometry, req->mig_profile);
        if (!p)
            return ts_err_set(err, TS_EINVAL, "mig_profile: %d is not a MIG profile of %s",
                              req->mig_profile, m->name);
        /* an instance takes its memory slices' fraction of the GPU */
        demand[ts_res_gpu(gpu_model)] =
            (int64_t)p->mem_slices * TS_MILLI_PER_GPU / TS_MIG_MEM_SLICES;
        return 0;
    }
    demand[ts_res_gpu(gpu_model)] = (int64_t)req->num_gpu * req->gpu_milli;
    return 0;
}

static int64_t own_total(const ts_quota *q, int t, int k)
{
    return OWN(q, t, TS_TIER_GUARANTEED, k) + OWN(q, t, TS_TIER_OPPORTUNISTIC, k);
}

/* The path from x to its organisation as it would be with x's own usage in
 * dimension k changed by d; returns its length and the organisations' pool
 * (sum avail - sum need) in *root_net. Reads only. */
static int path_eval(const ts_quota *q, int x, int k, int64_t d,
                     struct step path[TS_TENANT_MAX_DEPTH], int64_t *root_net)
{
    int len = 0;
    int64_t dneed = 0;   /* change of the child's need on the path */
    int64_t davail = 0;
    for (int t = x; t >= 0; t = q->ts->t[t].parent) {
        int64_t net = AT(q->unassigned, t, k) - own_total(q, t, k) - (t == x ? d : 0) +
                      AT(q->cavail, t, k) + davail - AT(q->cneed, t, k) - dneed;
        int64_t nn = 0, na = 0;
        int64_t lend = q->ts->t[t].lend_limit[k];
        if (net >= 0)
            na = net < lend ? net : lend;
        else
            nn = -net;
        dneed = nn - AT(q->need, t, k);
        davail = na - AT(q->avail, t, k);
        path[len].t = t;
        path[len].need = nn;
        path[len].avail = na;
        len++;
    }
    *root_net = q->ravail[k] + davail - q->rneed[k] - dneed;
    return len;
}

static bool tenant_ok(const ts_quota *q, int t)
{
    return q && t >= 0 && t < q->n;
}

static int demand_ok(const int64_t *demand)
{
    if (!demand)
        return 0;
    for (int k = 0; k < TS_RES_DIMS; k++)
        if (demand[k] < 0 || demand[k] > TS_QUOTA_MAX)
            return 0;
    return 1;
}

static int verdict(ts_quota_verdict *v, int status, int limit, int t, int k, int64_t over)
{
    v->status = status;
    v->limit = limit;
    v->tenant = t;
    v->dim = k;
    v->over = over;
    return status;
}

int ts_quota_check(const ts_quota *q, int x, int tier, const int64_t demand[TS_RES_DIMS],
                   ts_quota_verdict *v)
{
    if (!v || !tenant_ok(q, x) || (tier != TS_TIER_GUARANTEED && tier != TS_TIER_OPPORTUNISTIC) ||
        !demand_ok(demand))
        return TS_EINVAL;
    verdict(v, TS_QUOTA_OK, TS_QLIM_NONE, -1, -1, 0);
    if (tier == TS_TIER_GUARANTEED) {
        for (int k = 0; k < TS_RES_DIMS; k++) {
            if (demand[k] == 0 || q->cap[k] == 0)
                continue;
            for (int t = x; t >= 0; t = q->ts->t[t].parent) {
                int64_t after = AT(q->use_g, t, k) + demand[k];
                int64_t g = q->ts->t[t].guaranteed[k];
                if (after > g)
                    return verdict(v, TS_QUOTA_REFUSED, TS_QLIM_GUARANTEE, t, k, after - g);
            }
        }
    }
    /* guaranteed work that passed its guarantee fits once borrowers give back */
    int status = tier == TS_TIER_GUARANTEED ? TS_QUOTA_RECLAIM : TS_QUOTA_REFUSED;
    for (int k = 0; k < TS_RES_DIMS; k++) {
        if (demand[k] == 0 || q->cap[k] == 0) /* nobody guaranteed: not managed */
            continue;
        struct step path[TS_TENANT_MAX_DEPTH];
        int64_t root_net;
        int len = path_eval(q, x, k, demand[k], path, &root_net);
        for (int i = 0; i < len; i++) {
            int64_t b = q->ts->t[path[i].t].borrow_limit[k];
            if (path[i].need > b)
                return verdict(v, status, TS_QLIM_BORROW, path[i].t, k, path[i].need - b);
        }
        if (root_net < 0) {
            int org = path[len - 1].t;
            bool idle_exists = q->cap[k] - q->ruse[k] - demand[k] >= 0;
            return verdict(v, status, idle_exists ? TS_QLIM_LEND : TS_QLIM_IDLE, org, k,
                           -root_net);
        }
    }
    return TS_QUOTA_OK;
}

/* Brings the decayed usage of t up to now at its current usage. */
static void decay_to(ts_quota *q, int t, double now)
{
    double dt = now - q->stamp[t];
    if (dt <= 0.0)
        return;
    double keep = exp(-q->lambda * dt);
    double gain = -expm1(-q->lambda * dt) / q->lambda;  /* integral of the decay */
    for (int k = 0; k < TS_RES_DIMS; k++)
        AT(q->decayed, t, k) = AT(q->decayed, t, k) * keep + (double)AT(q->use, t, k) * gain;
    q->stamp[t] = now;
}

/* Changes x's own usage in tier by sign * demand, keeping every aggregate. */
static void apply(ts_quota *q, int x, int tier, const int64_t *demand, int sign, double now)
{
    for (int t = x; t >= 0; t = q->ts->t[t].parent)
        decay_to(q, t, now);
    q->now = now;
    for (int k = 0; k < TS_RES_DIMS; k++) {
        int64_t d = sign * demand[k];
        if (d == 0)
            continue;
        struct step path[TS_TENANT_MAX_DEPTH];
        int64_t root_net;
        int len = path_eval(q, x, k, d, path, &root_net);
        for (int i = 0; i < len; i++) {
            int t = path[i].t;
            int p = q->ts->t[t].parent;
            int64_t dn = path[i].need - AT(q->need, t, k);
            int64_t da = path[i].avail - AT(q->avail, t, k);
            AT(q->need, t, k) = path[i].need;
            AT(q->avail, t, k) = path[i].avail;
            if (p >= 0) {
                AT(q->cneed, p, k) += dn;
                AT(q->cavail, p, k) += da;
            } else {
                q->rneed[k] += dn;
                q->ravail[k] += da;
            }
            AT(q->use, t, k) += d;
            if (tier == TS_TIER_GUARANTEED)
                AT(q->use_g, t, k) += d;
        }
        OWN(q, x, tier, k) += d;
        q->ruse[k] += d;
    }
}

/* Whether a charge (sign 1) or credit (-1) of demand may be applied: checked
 * whole, so that a refused one changes nothing. */
static int change_check(const ts_quota *q, int x, int tier, const int64_t *demand, int sign,
                        double now, ts_err *err)
{
    if (!tenant_ok(q, x))
        return ts_err_set(err, TS_EINVAL, "quota: tenant %d does not exist", x);
    if (tier != TS_TIER_GUARANTEED && tier != TS_TIER_OPPORTUNISTIC)
        return ts_err_set(err, TS_EINVAL, "quota: tier %d does not exist", tier);
    if (!demand_ok(demand))
        return ts_err_set(err, TS_EINVAL, "quota: %s: demand must be 0..%lld per dimension",
                          q->ts->t[x].name, (long long)TS_QUOTA_MAX);
    if (!(isfinite(now) && now >= q->now))
        return ts_err_set(err, TS_EINVAL, "quota: now (%g) is before the last update (%g)", now,
                          q->now);
    for (int k = 0; k < TS_RES_DIMS; k++) {
        int64_t own = OWN(q, x, tier, k);
        if (sign > 0 ? own + demand[k] <= TS_QUOTA_MAX : demand[k] <= own)
            continue;
        char dn[TS_NAME_MAX + 8];
        ts_res_name(k, dn, sizeof dn);
        if (sign > 0)
            return ts_err_set(err, TS_EINVAL, "quota: %s.%s: usage would pass %lld",
                              q->ts->t[x].name, dn, (long long)TS_QUOTA_MAX);
        return ts_err_set(err, TS_EINVAL, "quota: %s.%s: credit of %lld exceeds the %lld charged",
                          q->ts->t[x].name, dn, (long long)demand[k], (long long)own);
    }
    return 0;
}

int ts_quota_charge(ts_quota *q, int x, int tier, const int64_t demand[TS_RES_DIMS],
                    double now, ts_err *err)
{
    int rc = change_check(q, x, tier, demand, 1, now, err);
    if (rc == 0)
        apply(q, x, tier, demand, 1, now);
    return rc;
}

int ts_quota_credit(ts_quota *q, int x, int tier, const int64_t demand[TS_RES_DIMS],
                    double now, ts_err *err)
{
    int rc = change_check(q, x, tier, demand, -1, now, err);
    if (rc == 0)
        apply(q, x, tier, demand, -1, now);
    return rc;
}

static bool dim_ok(int k)
{
    return k >= 0 && k < TS_RES_DIMS;
}

int64_t ts_quota_usage(const ts_quota *q, int t, int k)
{
    return tenant_ok(q, t) && dim_ok(k) ? AT(q->use, t, k) : 0;
}

int64_t ts_quota_usage_tier(const ts_quota *q, int t, int tier, int k)
{
    if (!tenant_ok(q, t) || !dim_ok(k))
        return 0;
    if (tier == TS_TIER_GUARANTEED)
        return AT(q->use_g, t, k);
    if (tier == TS_TIER_OPPORTUNISTIC)
        return AT(q->use, t, k) - AT(q->use_g, t, k);
    return 0;
}

int64_t ts_quota_borrowed(const ts_quota *q, int t, int k)
{
    return tenant_ok(q, t) && dim_ok(k) && q->cap[k] > 0 ? AT(q->need, t, k) : 0;
}

const ts_tenants *ts_quota_tenants(const ts_quota *q) { return q->ts; }

int64_t ts_quota_lendable(const ts_quota *q, int t, int k)
{
    return tenant_ok(q, t) && dim_ok(k) ? AT(q->avail, t, k) : 0;
}

double ts_quota_share(const ts_quota *q, int t, double now)
{
    if (!tenant_ok(q, t))
        return 0.0;
    double dt = now - q->stamp[t];
    if (!(dt > 0.0))
        dt = 0.0;
    double keep = exp(-q->lambda * dt);
    double gain = -expm1(-q->lambda * dt) / q->lambda;
    double best = 0.0;
    for (int k = 0; k < TS_RES_DIMS; k++) {
        int64_t base = share_base(q, k);
        if (base <= 0)
            continue;
        double d = AT(q->decayed, t, k) * keep + (double)AT(q->use, t, k) * gain;
        /* lambda * d: a steady usage u reads as u once it has run long */
        double s = q->lambda * d / (double)base;
        if (s > best)
            best = s;
    }
    return best / q->ts->t[t].weight;
}

struct ranked {
    double share;
    int t;
};

static int ranked_cmp(const void *a, const void *b)
{
    const struct ranked *x = a, *y = b;
    if (x->share != y->share)
        return x->share < y->share ? -1 : 1;
    return (x->t > y->t) - (x->t < y->t);
}

int ts_quota_order(const ts_quota *q, double now, int *tenants, int n)
{
    if (!q || n < 0 || (n > 0 && !tenants))
        return TS_EINVAL;
    for (int i = 0; i < n; i++)
        if (!tenant_ok(q, tenants[i]))
            return TS_EINVAL;
    if (n < 2)
        return 0;
    struct ranked *r = malloc((size_t)n * sizeof *r);
    if (!r)
        return TS_ENOMEM;
    for (int i = 0; i < n; i++) {
        r[i].t = tenants[i];
        r[i].share = ts_quota_share(q, tenants[i], now);
    }
    qsort(r, (size_t)n, sizeof *r, ranked_cmp);
    for (int i = 0; i < n; i++)
        tenants[i] = r[i].t;
    free(r);
    return 0;
}

void ts_quota_explain(const ts_tenants *ts, const ts_quota_verdict *v, char *buf, size_t size)
{
    if (!buf || size == 0)
        return;
    if (!v || v->status == TS_QUOTA_OK) {
        snprintf(buf, size, "fits its quota");
        return;
    }
    const char *who = ts && v->tenant >= 0 && v->tenant < ts->n ? ts->t[v->tenant].name : "?";
    char dn[TS_NAME_MAX + 8];
    ts_res_name(v->dim, dn, sizeof dn);
    const char *what = "quota";
    switch (v->limit) {
    case TS_QLIM_GUARANTEE: what = "guarantee exceeded"; break;
    case TS_QLIM_BORROW: what = "borrowing limit exceeded"; break;
    case TS_QLIM_LEND: what = "idle guarantee held back by lending limits, short"; break;
    case TS_QLIM_IDLE: what = "no idle guarantee left to borrow, short"; break;
    default: break;
    }
    char by[48];
    if (v->dim >= TS_RES_GPU0)
        ts_fmt_gpus(v->over, by, sizeof by); /* milli-GPUs are not for people */
    else
        snprintf(by, sizeof by, "%lld", (long long)v->over);
    snprintf(buf, size, "%s: %s: %s by %s%s", who, dn, what, by,
             v->status == TS_QUOTA_RECLAIM ? " (reclaim borrowed capacity first)" : "");
}
