/*
 * model.c - nodes, GPUs and the cluster: the bookkeeping every scheduler
 * decision goes through.
 *
 * A node is a fixed-size struct (at most TS_NODE_MAX_GPUS GPUs) so the cluster
 * is one contiguous array the placement loop walks without pointer chasing.
 * ts_node_assign/ts_node_release are exact inverses and keep the per-node
 * aggregates (free GPUs, free milli, largest free GPU) and the version stamp in
 * step, so that filters are O(1) in the common case and scorers may cache a
 * node's score until its version changes. The GPU model table is static: the
 * openb trace's models (G1-G3 are Alibaba's undisclosed codes) plus the MIG
 * capable data-centre parts.
 */
#include "tessera/model.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "tessera/grow.h"

static const ts_gpu_model_info gpu_models[] = {
    {"P100", 16384, TS_MIG_NONE},
    {"T4", 16384, TS_MIG_NONE},
    {"V100M16", 16384, TS_MIG_NONE},
    {"V100M32", 32768, TS_MIG_NONE},
    {"A10", 24576, TS_MIG_NONE},
    {"G1", 0, TS_MIG_NONE},
    {"G2", 0, TS_MIG_NONE},
    {"G3", 0, TS_MIG_NONE},
    {"A100-40GB", 40960, TS_MIG_A100_40GB},
    {"A100-80GB", 81920, TS_MIG_A100_80GB},
    {"H100-80GB", 81920, TS_MIG_H100_80GB},
    {"H200-141GB", 144384, TS_MIG_H200_141GB},
};
#define NMODELS ((int)(sizeof gpu_models / sizeof gpu_models[0]))

int ts_gpu_model_count(void) { return NMODELS; }

const ts_gpu_model_info *ts_gpu_model_get(int model)
{
    return model >= 0 && model < NMODELS ? &gpu_models[model] : NULL;
}

int ts_gpu_model_lookup(const char *name)
{
    for (int i = 0; name && i < NMODELS; i++)
        if (strcmp(gpu_models[i].name, name) == 0)
            return i;
    return -1;
}

int ts_gpu_model_mask_parse(const char *spec, uint32_t *mask, ts_err *err)
{
    *mask = 0;
    const char *p = spec ? spec : "";
    while (*p) {
        const char *end = strchr(p, '|');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        char name[TS_NAME_MAX];
        if (n == 0 || n >= sizeof name)
            return ts_err_set(err, TS_EINVAL, "empty or over-long GPU model in \"%s\"", spec);
        memcpy(name, p, n);
        name[n] = '\0';
        int m = ts_gpu_model_lookup(name);
        if (m < 0)
            return ts_err_set(err, TS_EINVAL, "unknown GPU model \"%s\"", name);
        *mask |= 1u << m;
        p += n;
        if (*p == '|' && !*++p) /* "T4|": a trailing empty name */
            return ts_err_set(err, TS_EINVAL, "empty or over-long GPU model in \"%s\"", spec);
    }
    return 0;
}

static const char *const mode_names[] = {"whole", "shared", "mig"};

const char *ts_gpu_mode_name(int mode)
{
    return mode >= 0 && mode <= TS_GPU_MIG ? mode_names[mode] : "?";
}

int ts_gpu_mode_parse(const char *name)
{
    for (int i = 0; i <= TS_GPU_MIG; i++)
        if (name && strcmp(name, mode_names[i]) == 0)
            return i;
    return -1;
}

/* ---- requests ---------------------------------------------------------- */

#define REQ_MAX_CPU_MILLI (1LL << 40)
#define REQ_MAX_MEM_MIB (1LL << 40)

int ts_request_check(const ts_request *r, ts_err *err)
{
    if (r->cpu_milli < 0 || r->cpu_milli > REQ_MAX_CPU_MILLI)
        return ts_err_set(err, TS_EINVAL, "cpu_milli: must be 0..%lld", REQ_MAX_CPU_MILLI);
    if (r->mem_mib < 0 || r->mem_mib > REQ_MAX_MEM_MIB)
        return ts_err_set(err, TS_EINVAL, "memory_mib: must be 0..%lld", REQ_MAX_MEM_MIB);
    if (r->gpu_mem_mib < 0)
        return ts_err_set(err, TS_EINVAL, "gpu_memory_mib: must be >= 0");
    if (r->mig_profile >= 0) {
        if (r->num_gpu != 1)
            return ts_err_set(err, TS_EINVAL, "num_gpu: a MIG request takes exactly 1 instance");
        if (r->gpu_milli != 0)
            return ts_err_set(err, TS_EINVAL, "gpu_milli: must be 0 for a MIG request");
        return 0;
    }
    if (r->num_gpu < 0 || r->num_gpu > TS_NODE_MAX_GPUS)
        return ts_err_set(err, TS_EINVAL, "num_gpu: must be 0..%d", TS_NODE_MAX_GPUS);
    if (r->num_gpu == 0 && r->gpu_milli != 0)
        return ts_err_set(err, TS_EINVAL, "gpu_milli: must be 0 when num_gpu is 0");
    if (r->num_gpu > 0 && (r->gpu_milli <= 0 || r->gpu_milli > TS_MILLI_PER_GPU))
        return ts_err_set(err, TS_EINVAL, "gpu_milli: must be 1..%d", TS_MILLI_PER_GPU);
    if (r->num_gpu > 1 && r->gpu_milli != TS_MILLI_PER_GPU)
        return ts_err_set(err, TS_EINVAL,
                          "gpu_milli: a request for %d GPUs must take whole GPUs (1000)",
                          r->num_gpu);
    return 0;
}

/* ---- nodes ------------------------------------------------------------- */

static void node_refresh(ts_node *n)
{
    n->gpus_free = 0;
    n->mig_gpus = 0;
    n->milli_free = 0;
    n->max_gpu_free = 0;
    for (int i = 0; i < n->ngpu; i++) {
        const ts_gpu *g = &n->gpu[i];
        if (g->ntasks == 0)
            n->gpus_free++;
        if (g->mode == TS_GPU_MIG) {
            n->mig_gpus++;
            continue;
        }
        int32_t f = TS_MILLI_PER_GPU - g->milli_used;
        n->milli_free += f;
        if (f > n->max_gpu_free)
            n->max_gpu_free = f;
    }
    n->version++;
}

static int64_t node_gpu_mem(const ts_node *n)
{
    const ts_gpu_model_info *m = ts_gpu_model_get(n->model);
    return m ? m->mem_mib : 0;
}

static bool model_allowed(const ts_node *n, const ts_request *r)
{
    if (r->num_gpu == 0 && r->mig_profile < 0)
        return true;
    if (n->model < 0)
        return false;
    return r->model_mask == 0 || (r->model_mask >> n->model) & 1u;
}

/* GPU memory left on a shared GPU; 0 for undisclosed models means "not
 * accounted", which admits any request (the trace carries no GPU memory). */
static bool gpu_mem_ok(const ts_node *n, const ts_gpu *g, int64_t want)
{
    int64_t cap = node_gpu_mem(n);
    return want == 0 || cap == 0 || g->mem_used_mib + want <= cap;
}

static bool gpu_takes_whole(const ts_node *n, const ts_gpu *g, const ts_request *r)
{
    return g->mode != TS_GPU_MIG && g->ntasks == 0 && g->milli_used == 0 &&
           gpu_mem_ok(n, g, r->gpu_mem_mib);
}

/* A node that keeps one user per GPU takes a share only on a GPU that is
 * empty or holds that user's shares. */
static bool share_key_ok(const ts_node *n, const ts_gpu *g, int64_t key)
{
    return !n->share_one_user || g->ntasks == 0 || g->share_key == key;
}

static bool gpu_takes_share(const ts_node *n, const ts_gpu *g, const ts_request *r)
{
    return g->mode == TS_GPU_SHARED && TS_MILLI_PER_GPU - g->milli_used >= r->gpu_milli &&
           gpu_mem_ok(n, g, r->gpu_mem_mib) && share_key_ok(n, g, r->share_key);
}

bool ts_node_gpu_takes_share(const ts_node *n, int i, const ts_request *r)
{
    return i >= 0 && i < n->ngpu && gpu_takes_share(n, &n->gpu[i], r);
}

static int mig_idle_instance(const ts_gpu *g, int profile)
{
    for (int k = 0; k < g->mig.n; k++)
        if (g->mig.inst[k].profile_id == profile && !g->mig.inst[k].busy)
            return k;
    return -1;
}

static int node_geometry(const ts_node *n)
{
    const ts_gpu_model_info *m = ts_gpu_model_get(n->model);
    return m ? m->mig_geometry : TS_MIG_NONE;
}

bool ts_node_fits(const ts_node *n, const ts_request *r)
{
    if (n->cpu_milli - n->cpu_used < r->cpu_milli || n->mem_mib - n->mem_used < r->mem_mib)
        return false;
    if (!model_allowed(n, r))
        return false;
    if (r->mig_profile >= 0) {
        ts_alloc a;
        return ts_node_choose_gpus(n, r, &a) == 0;
    }
    if (r->num_gpu == 0)
        return true;
    if (r->gpu_milli >= TS_MILLI_PER_GPU) {
        if (n->gpus_free < r->num_gpu)
            return false;
        /* gpus_free counts idle MIG GPUs too, which whole requests never take. */
        if (r->gpu_mem_mib == 0 && n->mig_gpus == 0)
            return true;
    } else if (n->max_gpu_free < r->gpu_milli) {
        return false;
    } else if (r->gpu_mem_mib == 0) {
        /* max_gpu_free counts SHARED and WHOLE GPUs; a share needs SHARED. */
        for (int i = 0; i < n->ngpu; i++)
            if (gpu_takes_share(n, &n->gpu[i], r))
                return true;
        return false;
    }
    ts_alloc a;
    return ts_node_choose_gpus(n, r, &a) == 0;
}

int ts_node_choose_gpus(const ts_node *n, const ts_request *r, ts_alloc *a)
{
    memset(a, 0, sizeof *a);
    a->node = -1;
    a->mig_profile = -1;
    a->mig_start = -1;
    a->cpu_milli = r->cpu_milli;
    a->mem_mib = r->mem_mib;
    a->gpu_mem_mib = r->gpu_mem_mib;
    a->shape = (int8_t)ts_request_shape(r);
    if (n->cpu_milli - n->cpu_used < r->cpu_milli || n->mem_mib - n->mem_used < r->mem_mib ||
        !model_allowed(n, r))
        return TS_ENOSPC;
    if (r->mig_profile >= 0) {
        int geo = node_geometry(n);
        if (geo == TS_MIG_NONE)
            return TS_ENOSPC;
        /* An idle instance of the profile first: no reconfiguration needed. */
        for (int i = 0; i < n->ngpu; i++) {
            const ts_gpu *g = &n->gpu[i];
            if (g->mode != TS_GPU_MIG)
                continue;
            int k = mig_idle_instance(g, r->mig_profile);
            if (k >= 0) {
                a->ngpu = 1;
                a->gpu[0] = (int8_t)i;
                a->mig_profile = (int8_t)r->mig_profile;
                a->mig_start = g->mig.inst[k].start;
                return 0;
            }
        }
        /* Otherwise create one where it keeps the most room for larger ones. */
        int best_gpu = -1, best_start = -1, best_room = -1;
        for (int i = 0; i < n->ngpu; i++) {
            const ts_gpu *g = &n->gpu[i];
            if (g->mode != TS_GPU_MIG)
                continue;
            int s = ts_mig_best_start(geo, &g->mig, r->mig_profile);
            if (s < 0)
                continue;
            ts_mig_layout l = g->mig;
            if (ts_mig_layout_add(geo, &l, r->mig_profile, s, NULL) != 0)
                continue;
            /* Prefer the GPU that is already most carved up (keeps whole
             * GPUs whole), measured by the room left after placing. */
            int room = -ts_mig_free_placements(geo, &l);
            if (best_gpu < 0 || room > best_room) {
                best_gpu = i;
                best_start = s;
                best_room = room;
            }
        }
        if (best_gpu < 0)
            return TS_ENOSPC;
        a->ngpu = 1;
        a->gpu[0] = (int8_t)best_gpu;
        a->mig_profile = (int8_t)r->mig_profile;
        a->mig_start = (int8_t)best_start;
        a->mig_created = 1;
        return 0;
    }
    if (r->num_gpu == 0)
        return 0;
    a->gpu_milli = r->gpu_milli;
    if (r->gpu_milli >= TS_MILLI_PER_GPU) {
        for (int i = 0; i < n->ngpu && a->ngpu < r->num_gpu; i++)
            if (gpu_takes_whole(n, &n->gpu[i], r))
                a->gpu[a->ngpu++] = (int8_t)i;
        return a->ngpu == r->num_gpu ? 0 : TS_ENOSPC;
    }
    int best = -1;
    for (int i = 0; i < n->ngpu; i++) {
        const ts_gpu *g = &n->gpu[i];
        if (gpu_takes_share(n, g, r) &&
            (best < 0 || g->milli_used > n->gpu[best].milli_used))
            best = i;
    }
    if (best < 0)
        return TS_ENOSPC;
    a->ngpu = 1;
    a->gpu[0] = (int8_t)best;
    return 0;
}

int ts_node_assign(ts_node *n, const ts_request *r, const ts_alloc *a)
{
    if (a->shape != ts_request_shape(r))
        return TS_EINVAL;
    if (n->cpu_milli - n->cpu_used < a->cpu_milli || n->mem_mib - n->mem_used < a->mem_mib)
        return TS_ENOSPC;
    if (a->mig_profile >= 0) {
        if (a->ngpu != 1 || a->gpu[0] < 0 || a->gpu[0] >= n->ngpu)
            return TS_EINVAL;
        ts_gpu *g = &n->gpu[a->gpu[0]];
        int geo = node_geometry(n);
        if (g->mode != TS_GPU_MIG)
            return TS_ENOSPC;
        int k = -1;
        for (int j = 0; j < g->mig.n; j++)
            if (g->mig.inst[j].profile_id == a->mig_profile &&
                g->mig.inst[j].start == a->mig_start)
                k = j;
        if (k >= 0 && g->mig.inst[k].busy)
            return TS_ENOSPC;
        if (k < 0) {
            if (ts_mig_layout_add(geo, &g->mig, a->mig_profile, a->mig_start, NULL) != 0)
                return TS_ENOSPC;
            k = g->mig.n - 1;
        }
        g->mig.inst[k].busy = 1;
        g->ntasks++;
    } else {
        for (int j = 0; j < a->ngpu; j++) {
            int i = a->gpu[j];
            if (i < 0 || i >= n->ngpu)
                return TS_EINVAL;
            const ts_gpu *g = &n->gpu[i];
            bool ok = a->gpu_milli >= TS_MILLI_PER_GPU
                          ? g->mode != TS_GPU_MIG && g->ntasks == 0
                          : g->mode == TS_GPU_SHARED &&
                                TS_MILLI_PER_GPU - g->milli_used >= a->gpu_milli &&
                                share_key_ok(n, g, r->share_key);
            if (!ok || !gpu_mem_ok(n, g, a->gpu_mem_mib))
                return TS_ENOSPC;
        }
        for (int j = 0; j < a->ngpu; j++) {
            ts_gpu *g = &n->gpu[a->gpu[j]];
            if (n->share_one_user && a->gpu_milli < TS_MILLI_PER_GPU && g->ntasks == 0)
                g->share_key = r->share_key; /* the GPU is this user's while it holds shares */
            g->milli_used += a->gpu_milli;
            g->mem_used_mib += a->gpu_mem_mib;
            g->ntasks++;
        }
    }
    n->cpu_used += a->cpu_milli;
    n->mem_used += a->mem_mib;
    n->ntasks++;
    n->shape_tasks[a->shape]++;
    node_refresh(n);
    return 0;
}

int ts_node_release(ts_node *n, const ts_alloc *a)
{
    if (a->mig_profile >= 0) {
        ts_gpu *g = &n->gpu[a->gpu[0]];
        int k = -1;
        for (int j = 0; j < g->mig.n; j++)
            if (g->mig.inst[j].profile_id == a->mig_profile &&
                g->mig.inst[j].start == a->mig_start && g->mig.inst[j].busy)
                k = j;
        if (k < 0)
            return TS_ENOENT;
        if (a->mig_created) {
            g->mig.inst[k] = g->mig.inst[g->mig.n - 1];
            g->mig.n--;
        } else {
            g->mig.inst[k].busy = 0;
        }
        g->ntasks--;
    } else {
        for (int j = 0; j < a->ngpu; j++) {
            ts_gpu *g = &n->gpu[a->gpu[j]];
            assert(g->milli_used >= a->gpu_milli && g->ntasks > 0);
            g->milli_used -= a->gpu_milli;
            g->mem_used_mib -= a->gpu_mem_mib;
            if (--g->ntasks == 0)
                g->share_key = 0;
        }
    }
    n->cpu_used -= a->cpu_milli;
    n->mem_used -= a->mem_mib;
    n->ntasks--;
    n->shape_tasks[a->shape]--;
    assert(n->cpu_used >= 0 && n->mem_used >= 0 && n->ntasks >= 0);
    node_refresh(n);
    return 0;
}

/* ---- the cluster ------------------------------------------------------- */

#define CLUSTER_INITIAL_CAP 64

ts_cluster *ts_cluster_new(void) { return calloc(1, sizeof(ts_cluster)); }

void ts_cluster_free(ts_cluster *c)
{
    if (!c)
        return;
    ts_topo_free(c->topo);
    free(c->nodes);
    free(c);
}

int ts_cluster_find_node(const ts_cluster *c, const char *name)
{
    for (int i = 0; i < c->nnodes; i++)
        if (strcmp(c->nodes[i].name, name) == 0)
            return i;
    return -1;
}

int ts_cluster_add_node(ts_cluster *c, const ts_node_spec *s, ts_err *err)
{
    if (!s->name || !s->name[0] || strlen(s->name) >= TS_NAME_MAX)
        return ts_err_set(err, TS_EINVAL, "name: must be 1..%d characters", TS_NAME_MAX - 1);
    if (ts_cluster_find_node(c, s->name) >= 0)
        return ts_err_set(err, TS_EEXIST, "name: duplicate node \"%s\"", s->name);
    if (s->cpu_milli < 0)
        return ts_err_set(err, TS_EINVAL, "cpu_milli: must be >= 0");
    if (s->mem_mib < 0)
        return ts_err_set(err, TS_EINVAL, "memory_mib: must be >= 0");
    if (s->ngpu < 0 || s->ngpu > TS_NODE_MAX_GPUS)
        return ts_err_set(err, TS_EINVAL, "gpus: must be 0..%d", TS_NODE_MAX_GPUS);
    if (s->net_mbit < 0 || s->net_mbit > TS_NODE_NET_MBIT_MAX)
        return ts_err_set(err, TS_EINVAL, "network.bandwidth_mbit: must be 1..%d (0: not "
                          "given)", TS_NODE_NET_MBIT_MAX);
    if (s->nlabels < 0 || s->nlabels > TS_NODE_MAX_LABELS)
        return ts_err_set(err, TS_EINVAL, "labels: at most %d", TS_NODE_MAX_LABELS);
    int model = -1;
    bool has_model = s->gpu_model && s->gpu_model[0];
    if (has_model) {
        model = ts_gpu_model_lookup(s->gpu_model);
        if (model < 0)
            return ts_err_set(err, TS_EINVAL, "model: unknown GPU model \"%s\"", s->gpu_model);
    }
    if (s->ngpu > 0 && !has_model)
        return ts_err_set(err, TS_EINVAL, "model: required when the node has GPUs");
    if (s->gpu_mode < TS_GPU_WHOLE || s->gpu_mode > TS_GPU_MIG)
        return ts_err_set(err, TS_EINVAL, "gpu_mode: must be whole, shared or mig");
    int geo = model >= 0 ? ts_gpu_model_get(model)->mig_geometry : TS_MIG_NONE;
    if (s->gpu_mode == TS_GPU_MIG && s->ngpu > 0 && geo == TS_MIG_NONE)
        return ts_err_set(err, TS_EINVAL, "gpu_mode: %s is not MIG capable", s->gpu_model);
    if (s->gpu_mode == TS_GPU_MIG) {
        for (int i = 0; i < s->ngpu; i++) {
            const ts_mig_layout *l = s->per_gpu_mig ? &s->per_gpu_mig[i] : s->mig_layout;
            if (l && ts_mig_layout_validate(geo, l, err) != 0)
                return ts_err_prefix(err, "mig_layout: gpu %d: ", i);
        }
    }
    if (ts_grow((void **)&c->nodes, &c->cap, c->nnodes + 1, CLUSTER_INITIAL_CAP,
                sizeof *c->nodes) != 0)
        return ts_err_set(err, TS_ENOMEM, "out of memory adding node");
    ts_node *n = &c->nodes[c->nnodes];
    memset(n, 0, sizeof *n);
    strcpy(n->name, s->name);
    n->model = model;
    n->ngpu = s->ngpu;
    n->cpu_milli = s->cpu_milli;
    n->mem_mib = s->mem_mib;
    n->net_mbit = s->net_mbit;
    n->topo_vertex = -1;
    for (int i = 0; i < s->nlabels; i++)
        n->labels[i] = s->labels[i];
    n->nlabels = s->nlabels;
    for (int i = 0; i < s->ngpu; i++) {
        ts_gpu *g = &n->gpu[i];
        g->mode = (uint8_t)s->gpu_mode;
        g->topo_vertex = -1;
        if (s->gpu_mode == TS_GPU_MIG) {
            const ts_mig_layout *l = s->per_gpu_mig ? &s->per_gpu_mig[i] : s->mig_layout;
            if (l) {
                g->mig = *l;
                for (int k = 0; k < g->mig.n; k++)
                    g->mig.inst[k].busy = 0;
            }
        }
    }
    node_refresh(n);
    c->total_gpus += s->ngpu;
    return c->nnodes++;
}

ts_cluster *ts_cluster_clone(const ts_cluster *c)
{
    ts_cluster *d = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    *d = *c;
    d->topo = NULL;
    d->nodes = malloc((size_t)(c->cap ? c->cap : 1) * sizeof *d->nodes);
    if (!d->nodes) {
        free(d);
        return NULL;
    }
    if (c->nnodes)
        memcpy(d->nodes, c->nodes, (size_t)c->nnodes * sizeof *d->nodes);
    if (c->topo) {
        d->topo = ts_topo_clone(c->topo);
        if (!d->topo) {
            ts_cluster_free(d);
            return NULL;
        }
    }
    return d;
}

void ts_cluster_reset(ts_cluster *c)
{
    for (int i = 0; i < c->nnodes; i++) {
        ts_node *n = &c->nodes[i];
        n->cpu_used = n->mem_used = 0;
        n->ntasks = 0;
        memset(n->shape_tasks, 0, sizeof n->shape_tasks);
        for (int j = 0; j < n->ngpu; j++) {
            ts_gpu *g = &n->gpu[j];
            g->milli_used = 0;
            g->mem_used_mib = 0;
            g->ntasks = 0;
            for (int k = 0; k < g->mig.n; k++)
                g->mig.inst[k].busy = 0;
        }
        node_refresh(n);
    }
}
