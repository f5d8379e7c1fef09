/*
 * gen.c - the trace generator: the allocations a PyTorch training (or
 * inference) loop of a decoder-only Transformer makes, for the case the
 * recorded traces lack - sequence lengths that change every step, and
 * several models sharing one GPU.
 *
 * Each step samples a batch of lengths (lognormal, clipped), pads the batch
 * to its longest sample rounded up to pad_multiple, and emits, in order:
 * zero_grad (the last step's gradients freed: set_to_none, PyTorch's
 * default); the forward pass, layer by layer, keeping what backward needs
 * (norm outputs and statistics, qkv, attention probabilities or the
 * flash-attention log-sum-exp, MLP activations, the residual stream) and
 * freeing temporaries, with bf16 copies of the weights when activations are
 * narrower than parameters (autocast); the loss in fp32; backward in reverse,
 * allocating each parameter's gradient on first touch and freeing saved
 * activations as their layer is done; then AdamW's foreach step (state
 * created on the first step, one temporary per parameter). Shapes follow the
 * GPT-2 layout: 12 tensors per layer, tied embeddings.
 *
 * Several models: each runs on its own stream; their steps are interleaved
 * in random chunks (as kernels of concurrent streams would be), so frees of
 * one model meet allocations of another. Addresses are unique ids.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tessera/alloc.h"

#define GEN_ADDR_STEP 512ull
#define GEN_CHUNK_MAX_EVENTS 64
#define GEN_TENSORS_PER_LAYER 12
#define GEN_F32_BYTES 4ull
#define GEN_I64_BYTES 8ull

typedef struct evbuf {
    ts_memtrace_ev *ev;
    size_t n, cap;
} evbuf;

typedef struct gen {
    uint64_t next_addr;
    uint64_t rng;
    int oom; /* host allocation failed */
} gen;

typedef struct tensor {
    uint64_t addr, size;
} tensor;

typedef struct mstate {
    const ts_memgen_model *m;
    tensor *param, *grad, *adam1, *adam2;
    int nparam;
} mstate;

static uint64_t rnd(gen *g)
{
    g->rng ^= g->rng << 13;
    g->rng ^= g->rng >> 7;
    g->rng ^= g->rng << 17;
    return g->rng;
}

static double unit(gen *g)
{
    return ((double)(rnd(g) >> 11) + 0.5) / 9007199254740992.0;
}

static double normal(gen *g)
{
    return sqrt(-2.0 * log(unit(g))) * cos(6.283185307179586 * unit(g));
}

static void push(gen *g, evbuf *b, int op, uint64_t addr, uint64_t size, uint64_t stream)
{
    if (b->n == b->cap) {
        size_t nc = b->cap ? b->cap * 2 : 4096;
        ts_memtrace_ev *ne = realloc(b->ev, nc * sizeof *ne);
        if (!ne) {
            g->oom = 1;
            return;
        }
        b->ev = ne;
        b->cap = nc;
    }
    /* padding zeroed too: two runs with one seed are equal byte for byte */
    ts_memtrace_ev *e = &b->ev[b->n++];
    memset(e, 0, sizeof *e);
    e->addr = addr;
    e->size = size;
    e->stream = stream;
    e->seq = (int64_t)b->n;
    e->op = op;
}

static tensor t_alloc(gen *g, evbuf *b, const ts_memgen_model *m, uint64_t size)
{
    tensor t = {g->next_addr, size ? size : 1};
    g->next_addr += GEN_ADDR_STEP;
    push(g, b, TS_MEMTRACE_ALLOC, t.addr, t.size, m->stream);
    return t;
}

static void t_free(gen *g, evbuf *b, const ts_memgen_model *m, tensor *t)
{
    if (!t->addr)
        return;
    push(g, b, TS_MEMTRACE_FREE, t->addr, t->size, m->stream);
    t->addr = 0;
}

/* Parameter sizes in elements, GPT-2 order. */
static int param_numels(const ts_memgen_model *m, uint64_t *n)
{
    uint64_t h = (uint64_t)m->hidden, f = (uint64_t)(m->ffn ? m->ffn : 4 * m->hidden);
    int k = 0;
    n[k++] = (uint64_t)m->vocab * h;   /* token embedding, tied with the head */
    n[k++] = (uint64_t)m->seq_max * h; /* positions */
    for (int l = 0; l < m->layers; l++) {
        uint64_t layer[GEN_TENSORS_PER_LAYER] = {h, h, 3 * h * h, 3 * h, h * h, h,
                                                 h, h, f * h,     f,     h * f, h};
        memcpy(n + k, layer, sizeof layer);
        k += GEN_TENSORS_PER_LAYER;
    }
    n[k++] = h; /* final norm */
    n[k++] = h;
    return k;
}

static int nparams_of(const ts_memgen_model *m)
{
    return 4 + GEN_TENSORS_PER_LAYER * m->layers;
}

static int sample_seq(gen *g, const ts_memgen_model *m)
{
    int s = m->seq_min;
    for (int i = 0; i < m->batch; i++) {
        double v = m->seq_sigma > 0 ? m->seq_median * exp(m->seq_sigma * normal(g)) : m->seq_max;
        int x = v < m->seq_min ? m->seq_min : v > m->seq_max ? m->seq_max : (int)v;
        if (x > s)
            s = x;
    }
    int p = m->pad_multiple > 0 ? m->pad_multiple : 1;
    s = (s + p - 1) / p * p;
    return s > m->seq_max ? m->seq_max : s;
}

typedef struct layer_saved {
    tensor x_in, ln1, ln1m, ln1r, qkv, probs, lse, attn, x1, ln2, ln2m, ln2r, fc1, gelu;
    tensor wcast[4];
} layer_saved;

/* One step's shapes: sequence, batch, hidden, ffn, heads, activation bytes,
 * tokens, vocabulary. */
typedef struct {
    uint64_t s, bt, h, f, nh, a, T, V;
    int cast;
} step_dims;

/* Layer l's forward pass from x (its input, kept in L); returns its output. */
static tensor layer_forward(gen *g, evbuf *b, mstate *ms, int l, layer_saved *L, tensor x,
                            const step_dims *d)
{
    const ts_memgen_model *m = ms->m;
    uint64_t s = d->s, bt = d->bt, h = d->h, f = d->f, nh = d->nh, a = d->a, T = d->T;
    const tensor *w = &ms->param[2 + l * GEN_TENSORS_PER_LAYER];
    L->x_in = x;
    if (d->cast) /* autocast copies of qkv, proj, fc1, fc2 weights */
        for (int k = 0; k < 4; k++)
            L->wcast[k] = t_alloc(g, b, m, w[2 + 2 * k].size / (uint64_t)m->param_bytes * a);
    L->ln1 = t_alloc(g, b, m, T * h * a);
    L->ln1m = t_alloc(g, b, m, T * GEN_F32_BYTES);
    L->ln1r = t_alloc(g, b, m, T * GEN_F32_BYTES);
    L->qkv = t_alloc(g, b, m, T * 3 * h * a);
    if (m->flash_attention) {
        L->attn = t_alloc(g, b, m, T * h * a);
        L->lse = t_alloc(g, b, m, bt * nh * s * GEN_F32_BYTES);
    } else {
        tensor sc = t_alloc(g, b, m, bt * nh * s * s * a);
        L->probs = t_alloc(g, b, m, bt * nh * s * s * a);
        t_free(g, b, m, &sc);
        L->attn = t_alloc(g, b, m, T * h * a);
    }
    tensor proj = t_alloc(g, b, m, T * h * a);
    L->x1 = t_alloc(g, b, m, T * h * a);
    t_free(g, b, m, &proj);
    L->ln2 = t_alloc(g, b, m, T * h * a);
    L->ln2m = t_alloc(g, b, m, T * GEN_F32_BYTES);
    L->ln2r = t_alloc(g, b, m, T * GEN_F32_BYTES);
    L->fc1 = t_alloc(g, b, m, T * f * a);
    L->gelu = t_alloc(g, b, m, T * f * a);
    tensor fc2 = t_alloc(g, b, m, T * h * a);
    tensor out = t_alloc(g, b, m, T * h * a);
    t_free(g, b, m, &fc2);
    return out;
}

/* Layer l's backward pass from the gradient gx of its output (freed);
 * returns the gradient of its input. */
static tensor layer_backward(gen *g, evbuf *b, mstate *ms, int l, layer_saved *L, tensor gx,
                             const step_dims *d)
{
    const ts_memgen_model *m = ms->m;
    uint64_t s = d->s, bt = d->bt, h = d->h, f = d->f, nh = d->nh, a = d->a, T = d->T;
    for (int k = 0; k < GEN_TENSORS_PER_LAYER; k++) {
        int i = 2 + l * GEN_TENSORS_PER_LAYER + (GEN_TENSORS_PER_LAYER - 1 - k);
        ms->grad[i] = t_alloc(g, b, m, ms->param[i].size);
    }
    tensor t1 = t_alloc(g, b, m, T * f * a);
    t_free(g, b, m, &L->gelu);
    tensor t2 = t_alloc(g, b, m, T * f * a);
    t_free(g, b, m, &t1);
    t_free(g, b, m, &L->fc1);
    tensor t3 = t_alloc(g, b, m, T * h * a);
    t_free(g, b, m, &t2);
    t_free(g, b, m, &L->ln2);
    t_free(g, b, m, &L->ln2m);
    t_free(g, b, m, &L->ln2r);
    tensor t4 = t_alloc(g, b, m, T * h * a);
    t_free(g, b, m, &t3);
    t_free(g, b, m, &L->x1);
    tensor t7;
    if (m->flash_attention) {
        t7 = t_alloc(g, b, m, T * 3 * h * a);
        t_free(g, b, m, &L->lse);
    } else {
        tensor t5 = t_alloc(g, b, m, bt * nh * s * s * a);
        t_free(g, b, m, &L->probs);
        tensor t6 = t_alloc(g, b, m, bt * nh * s * s * a);
        t_free(g, b, m, &t5);
        t7 = t_alloc(g, b, m, T * 3 * h * a);
        t_free(g, b, m, &t6);
    }
    t_free(g, b, m, &L->attn);
    t_free(g, b, m, &L->qkv);
    for (int k = 0; k < 4; k++)
        t_free(g, b, m, &L->wcast[k]);
    tensor t8 = t_alloc(g, b, m, T * h * a);
    t_free(g, b, m, &t7);
    t_free(g, b, m, &L->ln1);
    t_free(g, b, m, &L->ln1m);
    t_free(g, b, m, &L->ln1r);
    tensor gn = t_alloc(g, b, m, T * h * a);
    t_free(g, b, m, &t8);
    t_free(g, b, m, &t4);
    t_free(g, b, m, &gx);
    if (l > 0)
        t_free(g, b, m, &L->x_in);
    return gn;
}

/* AdamW, foreach: state on the first step, one fp32 temporary per parameter. */
static void optimizer_step(gen *g, evbuf *b, mstate *ms, int first)
{
    const ts_memgen_model *m = ms->m;
    tensor *tmp = calloc((size_t)ms->nparam, sizeof *tmp);
    if (!tmp) {
        g->oom = 1;
        return;
    }
    for (int i = 0; i < ms->nparam; i++) {
        uint64_t n32 = ms->param[i].size / (uint64_t)m->param_bytes * GEN_F32_BYTES;
        if (first) {
            ms->adam1[i] = t_alloc(g, b, m, n32);
            ms->adam2[i] = t_alloc(g, b, m, n32);
        }
        tmp[i] = t_alloc(g, b, m, n32);
    }
    for (int i = 0; i < ms->nparam; i++)
        t_free(g, b, m, &tmp[i]);
    free(tmp);
}

static void train_step(gen *g, evbuf *b, mstate *ms, int first)
{
    const ts_memgen_model *m = ms->m;
    step_dims d = {.s = (uint64_t)sample_seq(g, m), .bt = (uint64_t)m->batch,
                   .h = (uint64_t)m->hidden,
                   .f = (uint64_t)(m->ffn ? m->ffn : 4 * m->hidden), .nh = (uint64_t)m->heads,
                   .a = (uint64_t)m->act_bytes, .V = (uint64_t)m->vocab,
                   .cast = m->act_bytes < m->param_bytes};
    d.T = d.bt * d.s;
    uint64_t h = d.h, a = d.a, T = d.T, V = d.V;
    for (int i = 0; i < ms->nparam; i++) /* zero_grad(set_to_none=True) */
        t_free(g, b, m, &ms->grad[i]);
    layer_saved *sv = calloc((size_t)m->layers, sizeof *sv);
    if (!sv) {
        g->oom = 1;
        return;
    }
    tensor ids = t_alloc(g, b, m, T * GEN_I64_BYTES);
    tensor x = t_alloc(g, b, m, T * h * a);
    for (int l = 0; l < m->layers; l++)
        x = layer_forward(g, b, ms, l, &sv[l], x, &d);
    tensor lnf = t_alloc(g, b, m, T * h * a);
    tensor logits = t_alloc(g, b, m, T * V * a);
    tensor lf = t_alloc(g, b, m, T * V * GEN_F32_BYTES);
    tensor lsm = t_alloc(g, b, m, T * V * GEN_F32_BYTES);
    t_free(g, b, m, &lf);
    tensor loss = t_alloc(g, b, m, GEN_F32_BYTES);
    /* backward */
    tensor gl32 = t_alloc(g, b, m, T * V * GEN_F32_BYTES);
    t_free(g, b, m, &loss);
    t_free(g, b, m, &lsm);
    tensor gl = t_alloc(g, b, m, T * V * a);
    t_free(g, b, m, &gl32);
    int last = ms->nparam - 1;
    for (int i = 0; i < 2; i++)
        if (!ms->grad[i].addr)
            ms->grad[i] = t_alloc(g, b, m, ms->param[i].size);
    for (int i = last - 1; i <= last; i++)
        ms->grad[i] = t_alloc(g, b, m, ms->param[i].size);
    tensor gx = t_alloc(g, b, m, T * h * a);
    t_free(g, b, m, &gl);
    t_free(g, b, m, &logits);
    t_free(g, b, m, &lnf);
    t_free(g, b, m, &x); /* last layer output */
    for (int l = m->layers - 1; l >= 0; l--)
        gx = layer_backward(g, b, ms, l, &sv[l], gx, &d);
    t_free(g, b, m, &gx);
    t_free(g, b, m, &sv[0].x_in);
    t_free(g, b, m, &ids);
    free(sv);
    optimizer_step(g, b, ms, first);
}

static void infer_step(gen *g, evbuf *b, mstate *ms)
{
    const ts_memgen_model *m = ms->m;
    uint64_t s = (uint64_t)sample_seq(g, m), bt = (uint64_t)m->batch, h = (uint64_t)m->hidden;
    uint64_t f = (uint64_t)(m->ffn ? m->ffn : 4 * m->hidden), nh = (uint64_t)m->heads;
    uint64_t a = (uint64_t)m->act_bytes, T = bt * s;
    tensor ids = t_alloc(g, b, m, T * GEN_I64_BYTES);
    tensor x = t_alloc(g, b, m, T * h * a);
    for (int l = 0; l < m->layers; l++) {
        tensor ln = t_alloc(g, b, m, T * h * a);
        tensor qkv = t_alloc(g, b, m, T * 3 * h * a);
        t_free(g, b, m, &ln);
        tensor sc = {0, 0};
        if (!m->flash_attention) {
            sc = t_alloc(g, b, m, bt * nh * s * s * a);
            tensor pr = t_alloc(g, b, m, bt * nh * s * s * a);
            t_free(g, b, m, &sc);
            sc = pr;
        }
        tensor at = t_alloc(g, b, m, T * h * a);
        t_free(g, b, m, &sc);
        t_free(g, b, m, &qkv);
        tensor x1 = t_alloc(g, b, m, T * h * a);
        t_free(g, b, m, &at);
        t_free(g, b, m, &x);
        tensor ln2 = t_alloc(g, b, m, T * h * a);
        tensor fc1 = t_alloc(g, b, m, T * f * a);
        t_free(g, b, m, &ln2);
        tensor ge = t_alloc(g, b, m, T * f * a);
        t_free(g, b, m, &fc1);
        tensor fc2 = t_alloc(g, b, m, T * h * a);
        t_free(g, b, m, &ge);
        x = t_alloc(g, b, m, T * h * a);
        t_free(g, b, m, &fc2);
        t_free(g, b, m, &x1);
    }
    tensor logits = t_alloc(g, b, m, T * (uint64_t)m->vocab * a);
    t_free(g, b, m, &x);
    t_free(g, b, m, &logits);
    t_free(g, b, m, &ids);
}

static int check_model(const ts_memgen_model *m, int i, ts_err *err)
{
    if (m->layers < 1 || m->hidden < 1 || m->heads < 1 || m->vocab < 1 || m->batch < 1)
        return ts_err_set(err, TS_EINVAL, "models[%d]: layers, hidden, heads, vocab, batch must be > 0", i);
    if (m->seq_min < 1 || m->seq_max < m->seq_min)
        return ts_err_set(err, TS_EINVAL, "models[%d].seq_max: must be >= seq_min >= 1", i);
    if (m->seq_sigma > 0 && m->seq_median <= 0)
        return ts_err_set(err, TS_EINVAL, "models[%d].seq_median: must be > 0", i);
    if (m->act_bytes < 1 || m->param_bytes < 1 || m->act_bytes > 8 || m->param_bytes > 8)
        return ts_err_set(err, TS_EINVAL, "models[%d].act_bytes/param_bytes: must be 1..8", i);
    return 0;
}

int ts_memgen_run(const ts_memgen_config *cfg, ts_memtrace *out, ts_err *err)
{
    memset(out, 0, sizeof *out);
    if (!cfg || cfg->nmodels < 1 || cfg->nmodels > TS_MEMGEN_MAX_MODELS || !cfg->models)
        return ts_err_set(err, TS_EINVAL, "nmodels: must be 1..%d", TS_MEMGEN_MAX_MODELS);
    if (cfg->steps < 1)
        return ts_err_set(err, TS_EINVAL, "steps: must be > 0");
    for (int i = 0; i < cfg->nmodels; i++) {
        int rc = check_model(&cfg->models[i], i, err);
        if (rc != 0)
            return rc;
    }
    gen g = {.next_addr = GEN_ADDR_STEP, .rng = cfg->seed * 0x9e3779b97f4a7c15ull + 7, .oom = 0};
    mstate ms[TS_MEMGEN_MAX_MODELS];
    evbuf bufs[TS_MEMGEN_MAX_MODELS], all = {NULL, 0, 0};
    memset(ms, 0, sizeof ms);
    memset(bufs, 0, sizeof bufs);
    int nm = cfg->nmodels;
    for (int i = 0; i < nm && !g.oom; i++) {
        const ts_memgen_model *m = &cfg->models[i];
        ms[i].m = m;
        ms[i].nparam = nparams_of(m);
        uint64_t *numel = calloc((size_t)ms[i].nparam, sizeof *numel);
        ms[i].param = calloc((size_t)ms[i].nparam, sizeof(tensor));
        ms[i].grad = calloc((size_t)ms[i].nparam, sizeof(tensor));
        ms[i].adam1 = calloc((size_t)ms[i].nparam, sizeof(tensor));
        ms[i].adam2 = calloc((size_t)ms[i].nparam, sizeof(tensor));
        if (!numel || !ms[i].param || !ms[i].grad || !ms[i].adam1 || !ms[i].adam2) {
            free(numel);
            g.oom = 1;
            break;
        }
        param_numels(m, numel);
        for (int k = 0; k < ms[i].nparam; k++) /* the model is loaded before the loop */
            ms[i].param[k] = t_alloc(&g, &all, m, numel[k] * (uint64_t)m->param_bytes);
        free(numel);
    }
    for (int step = 0; step < cfg->steps && !g.oom; step++) {
        for (int i = 0; i < nm; i++) {
            bufs[i].n = 0;
            if (ms[i].m->train)
                train_step(&g, &bufs[i], &ms[i], step == 0);
            else
                infer_step(&g, &bufs[i], &ms[i]);
        }
        size_t pos[TS_MEMGEN_MAX_MODELS] = {0};
        for (;;) { /* interleave the models' steps in random chunks */
            size_t left = 0;
            for (int i = 0; i < nm; i++)
                left += bufs[i].n - pos[i];
            if (!left || g.oom)
                break;
            size_t pick = (size_t)(rnd(&g) % left);
            int i = 0;
            while (pick >= bufs[i].n - pos[i]) {
                pick -= bufs[i].n - pos[i];
                i++;
            }
            size_t chunk = 1 + (size_t)(rnd(&g) % GEN_CHUNK_MAX_EVENTS);
            for (size_t k = 0; k < chunk && pos[i] < bufs[i].n; k++, pos[i]++) {
                const ts_memtrace_ev *e = &bufs[i].ev[pos[i]];
                push(&g, &all, e->op, e->addr, e->size, e->stream);
            }
        }
    }
    for (int i = 0; i < nm; i++) {
        free(ms[i].param);
        free(ms[i].grad);
        free(ms[i].adam1);
        free(ms[i].adam2);
        free(bufs[i].ev);
    }
    if (g.oom) {
        free(all.ev);
        return ts_err_set(err, TS_ENOMEM, "generator: out of memory");
    }
    out->ev = all.ev;
    out->nev = all.n;
    return 0;
}

/* ---- presets ------------------------------------------------------------ */

/* GPT-2 medium / small shapes (Radford et al. 2019), a 1.3B-class model with
 * flash attention; bf16 activations over fp32 parameters (mixed precision). */
static const ts_memgen_model GPT2_MEDIUM = {24, 1024, 16, 0, 50304, 8, 32, 1024, 256.0, 0.7,
                                            64, 2, 4, 0, 1, 0};
static const ts_memgen_model GPT2_SMALL = {12, 768, 12, 0, 50304, 8, 32, 1024, 256.0, 0.7,
                                           64, 2, 4, 0, 1, 0};
static const ts_memgen_model GPT_1B_FLASH = {24, 2048, 16, 0, 50304, 4, 64, 4096, 900.0, 0.8,
                                             128, 2, 4, 1, 1, 0};

struct preset {
    const char *name;
    int n;
    ts_memgen_model m[4];
};

static const char *const preset_names = "varlen-gpt2m, varlen-1b-flash, fixed-gpt2m, multi-4";

int ts_memgen_preset(const char *name, ts_memgen_model *models, int max, ts_err *err)
{
    struct preset p;
    memset(&p, 0, sizeof p);
    if (name && strcmp(name, "varlen-gpt2m") == 0) {
        p.n = 1;
        p.m[0] = GPT2_MEDIUM;
    } else if (name && strcmp(name, "varlen-1b-flash") == 0) {
        p.n = 1;
        p.m[0] = GPT_1B_FLASH;
    } else if (name && strcmp(name, "fixed-gpt2m") == 0) {
        p.n = 1;
        p.m[0] = GPT2_MEDIUM;
        p.m[0].seq_sigma = 0; /* every step at seq_max: the control */
        p.m[0].seq_max = 512;
        p.m[0].seq_min = 512;
    } else if (name && strcmp(name, "multi-4") == 0) {
        /* an RLHF-like mix: two models training, two serving, one GPU */
        p.n = 4;
        p.m[0] = GPT2_MEDIUM;
        p.m[0].batch = 4;
        p.m[0].stream = 1;
        p.m[1] = GPT2_SMALL;
        p.m[1].stream = 2;
        p.m[2] = GPT2_MEDIUM;
        p.m[2].train = 0;
        p.m[2].batch = 16;
        p.m[2].stream = 3;
        p.m[3] = GPT2_SMALL;
        p.m[3].train = 0;
        p.m[3].batch = 16;
        p.m[3].stream = 4;
    } else {
        return ts_err_set(err, TS_EINVAL, "preset: unknown \"%s\" (known: %s)", name ? name : "",
                          preset_names);
    }
    if (p.n > max)
        return ts_err_set(err, TS_EINVAL, "preset: %s has %d models, room for %d", name, p.n, max);
    memcpy(models, p.m, (size_t)p.n * sizeof *models);
    return p.n;
}

const char *ts_memgen_preset_names(void)
{
    return preset_names;
}
