/*
 * tessera_grow.c - what the tessera allocator does when no free block fits
 * and no cached stitched range of the same size has all its bytes free again
 * (both tried by tessera.c):
 *
 *   1. empty small granules go back to the large pool (no call);
 *   2. the request is planned two ways and the one creating fewer
 *      new granules wins: grow - create granules right after (or before) a
 *      free block at the edge of a run, or a fresh run, so the request is
 *      contiguous in the home range; stitch - take free whole granules
 *      wherever they are (smallest holes first), a free head (the end of one
 *      granule) and tail (the start of another) for the part that is not a
 *      whole granule, create only the shortfall, and map them side by side
 *      into the stitch range. On a tie, growing wins (fewer mappings).
 *
 * So physical memory grows only by what the free memory cannot serve, and a
 * freed hole is reused by any later request, whatever its size. Only when the
 * capacity is reached are frees held by record_stream events waited for (a
 * host synchronisation) and the request tried again.
 * Small-pool granules come from a whole free large granule (smallest hole
 * first) or a new one. empty_cache gives every wholly free granule back.
 */
#include "alloc/tessera.h"

#include <stdlib.h>
#include <string.h>

struct cand { /* a whole free granule, or a head / tail piece */
    uint64_t slot, len, holder; /* holder: length of the free block it lies in */
};

struct plan {
    struct cand *wholes;
    size_t nwholes, capw;
    struct cand head, tail; /* len 0: none */
    int tail_whole;         /* the tail takes the start of a whole granule */
    uint64_t k, r;          /* whole granules and remainder of the request */
    uint64_t need_new;      /* granules to create */
};

static uint64_t ceil_div(uint64_t x, uint64_t m)
{
    return (x + m - 1) / m;
}

/* ---- granules ----------------------------------------------------------- */

/* A granule at home slot `slot`: created and mapped; access is given by the
 * caller, once for a run of new granules. */
static int make_granule(tess *a, uint64_t slot, ts_err *err)
{
    uint64_t h = 0;
    int rc = alloc_memdev_create(a->dev, TS_G, &h, err);
    if (rc != 0)
        return rc;
    rc = alloc_memdev_map(a->dev, a->home_va + slot * TS_G, TS_G, h, err);
    if (rc != 0) {
        alloc_memdev_release(a->dev, h, TS_G, NULL);
        return rc;
    }
    a->handle[slot] = h;
    a->present++;
    alloc_stats_reserve(a->st, (int64_t)TS_G);
    a->st->segment_allocs++;
    a->st->segment_alloc_bytes += TS_G;
    return 0;
}

/* Slot's bytes become a free large block joined to the run around it. */
static int join_large(tess *a, uint64_t slot, tess_blk *b, ts_err *err)
{
    a->mode[slot] = GR_LARGE;
    b->small = 0;
    b->prev = b->next = NULL;
    if (slot > 0 && a->mode[slot - 1] == GR_LARGE) {
        ts_tnode *n = alloc_tree_floor(&a->addr, slot * TS_G - 1, UINT64_MAX, UINT64_MAX);
        b->prev = n ? TS_CONTAINER_OF(n, tess_blk, anode) : NULL;
        if (b->prev)
            b->prev->next = b;
    }
    if (slot + 1 < a->nslots && a->mode[slot + 1] == GR_LARGE) {
        ts_tnode *n = alloc_tree_lower_bound(&a->addr, (slot + 1) * TS_G, 0, 0);
        b->next = n ? TS_CONTAINER_OF(n, tess_blk, anode) : NULL;
        if (b->next)
            b->next->prev = b;
    }
    b->anode.k[0] = b->off;
    alloc_tree_insert(&a->addr, &b->anode);
    tess_release_blk(a, b, b->sidx, b->epoch, b->mixed);
    (void)err;
    return 0;
}

/* n new large granules at slots first.., one access call for the run. */
static int add_large_run(tess *a, uint64_t first, uint64_t n, ts_err *err)
{
    uint64_t made = 0;
    int rc = 0;
    while (made < n && rc == 0) {
        rc = make_granule(a, first + made, err);
        if (rc == 0)
            made++;
    }
    ts_err e2;
    if (made && alloc_memdev_set_access(a->dev, a->home_va + first * TS_G, made * TS_G, &e2) != 0 &&
        rc == 0)
        rc = ts_err_set(err, e2.code, "%s", e2.msg);
    for (uint64_t i = 0; i < made; i++) {
        tess_blk *b = tess_blk_new(a, (first + i) * TS_G, TS_G, 0);
        if (!b)
            return ts_err_set(err, TS_ENOMEM, "tessera: out of host memory");
        join_large(a, first + i, b, err);
    }
    return rc;
}

/* Takes whole free large granule `slot` (inside free block b) out of the
 * large pool: returns its block, unlinked from the run. */
static tess_blk *unjoin_large(tess *a, tess_blk *b, uint64_t slot)
{
    tess_blk *g = tess_carve(a, b, slot * TS_G, TS_G);
    if (!g)
        return NULL;
    if (g->prev)
        g->prev->next = NULL;
    if (g->next)
        g->next->prev = NULL;
    g->prev = g->next = NULL;
    alloc_tree_remove(&a->addr, &g->anode);
    return g;
}

static uint64_t highest_absent(const tess *a)
{
    for (uint64_t s = a->nslots; s-- > 0;)
        if (a->mode[s] == GR_ABSENT)
            return s;
    return a->nslots;
}

/* Empty small granules back to the large pool; returns how many. */
static size_t reclaim_small(tess *a)
{
    size_t n = 0;
    ts_tnode *t;
    while ((t = alloc_tree_lower_bound(&a->small_free, TS_G, 0, 0)) != NULL) {
        tess_blk *b = TS_CONTAINER_OF(t, tess_blk, fnode);
        tess_free_erase(a, b);
        join_large(a, b->off / TS_G, b, NULL);
        n++;
    }
    return n;
}

/* A whole free large granule becomes a small one; 0 if none. */
static int small_from_free(tess *a, ts_err *err)
{
    /* from the smallest free block holding a whole granule, at one of its ends */
    for (ts_tnode *t = alloc_tree_lower_bound(&a->large_free, TS_G, 0, 0); t;
         t = alloc_tree_next(&a->large_free, t)) {
        tess_blk *b = TS_CONTAINER_OF(t, tess_blk, fnode);
        uint64_t gs = ceil_div(b->off, TS_G), ge = (b->off + b->len) / TS_G;
        if (ge <= gs)
            continue;
        uint64_t slot = b->off % TS_G == 0 ? gs : ge - 1;
        tess_blk *g = unjoin_large(a, b, slot);
        if (!g)
            return ts_err_set(err, TS_ENOMEM, "tessera: out of host memory");
        g->small = 1;
        a->mode[slot] = GR_SMALL;
        tess_free_insert(a, g);
        return 1;
    }
    return 0;
}

int tess_small_granule(tess *a, ts_err *err)
{
    int rc = small_from_free(a, err);
    if (rc != 0)
        return rc < 0 ? rc : 0;
    /* new small granules come from the top of the home range, large runs grow
     * from the bottom: the two meet only when memory is nearly full */
    uint64_t slot = highest_absent(a);
    if (slot >= a->nslots || a->present >= a->cap_slots) {
        if (!a->npending)
            return ts_err_set(err, TS_ENOSPC,
                              "tessera: out of memory: capacity %llu bytes in use",
                              (unsigned long long)(a->present * TS_G));
        rc = tess_sync_pending(a, err); /* frees held by record_stream events */
        if (rc == 0 && alloc_tree_lower_bound(&a->small_free, 1, 0, 0))
            return 0; /* the caller searches again */
        rc = rc ? rc : small_from_free(a, err);
        if (rc != 0)
            return rc < 0 ? rc : 0;
        return ts_err_set(err, TS_ENOSPC, "tessera: out of memory: capacity %llu bytes in use",
                          (unsigned long long)(a->present * TS_G));
    }
    rc = make_granule(a, slot, err);
    if (rc == 0)
        rc = alloc_memdev_set_access(a->dev, a->home_va + slot * TS_G, TS_G, err);
    if (rc != 0)
        return rc;
    tess_blk *g = tess_blk_new(a, slot * TS_G, TS_G, 1);
    if (!g)
        return ts_err_set(err, TS_ENOMEM, "tessera: out of host memory");
    a->mode[slot] = GR_SMALL;
    tess_free_insert(a, g);
    return 0;
}

/* ---- stitched ranges and their cache ------------------------------------ */

static int stitch_slots(tess *a, uint64_t n, uint64_t *first)
{
    uint64_t run = 0, total = 2 * a->nslots;
    for (uint64_t s = 0; s < total; s++) {
        run = a->stitch_used[s] ? 0 : run + 1;
        if (run == n) {
            *first = s + 1 - n;
            memset(a->stitch_used + *first, 1, (size_t)n);
            return 0;
        }
    }
    return -1;
}

static void lru_unlink(tess *a, tess_range *r)
{
    if (r->lru_prev)
        r->lru_prev->lru_next = r->lru_next;
    else
        a->lru_head = r->lru_next;
    if (r->lru_next)
        r->lru_next->lru_prev = r->lru_prev;
    else
        a->lru_tail = r->lru_prev;
    r->lru_prev = r->lru_next = NULL;
    tess_range *head = alloc_ptrmap_get(&a->cache, r->size);
    if (head == r) {
        if (r->same_next)
            alloc_ptrmap_put(&a->cache, r->size, r->same_next);
        else
            alloc_ptrmap_del(&a->cache, r->size);
    } else {
        for (tess_range *c = head; c; c = c->same_next) {
            if (c->same_next == r) {
                c->same_next = r->same_next;
                break;
            }
        }
    }
    r->same_next = NULL;
    r->cached = 0;
    a->ncached--;
}

/* Unmaps a range no allocation uses and gives its slots back. */
static int range_drop(tess *a, tess_range *r, ts_err *err)
{
    int rc = 0;
    for (uint64_t j = 0; j < r->nslots; j++) {
        int e = alloc_memdev_unmap(a->dev, r->va + j * TS_G, TS_G, err);
        if (e != 0 && rc == 0)
            rc = e;
    }
    uint64_t first = (r->va - a->stitch_va) / TS_G;
    memset(a->stitch_used + first, 0, (size_t)r->nslots);
    free(r->pieces);
    free(r);
    return rc;
}

static int evict_lru(tess *a, ts_err *err)
{
    tess_range *r = a->lru_tail;
    if (!r)
        return 1;
    lru_unlink(a, r);
    return range_drop(a, r, err);
}

/* Carves every piece of r for al (the pieces must all be free). */
static int range_take(tess *a, tess_range *r, uint64_t stream, tess_alloc *al, ts_err *err)
{
    for (uint64_t j = 0; j < r->nslots; j++) {
        tess_piece *p = &r->pieces[j];
        uint64_t off = p->gran * TS_G + p->lo;
        tess_blk *b = tess_free_at(a, off);
        int rc = b ? tess_order_after(a, stream, b, err) : TS_EINVAL;
        if (rc != 0)
            return b ? rc : ts_err_set(err, TS_EINVAL, "tessera: stitched piece not free");
        p->blk = tess_carve(a, b, off, p->hi - p->lo);
        if (!p->blk)
            return ts_err_set(err, TS_ENOMEM, "tessera: out of host memory");
        p->blk->owner = al;
    }
    al->range = r;
    al->ptr = r->va + r->pieces[0].lo;
    return 0;
}

int tess_cache_take(tess *a, uint64_t size, uint64_t stream, tess_alloc *al, ts_err *err)
{
    for (tess_range *r = alloc_ptrmap_get(&a->cache, size); r; r = r->same_next) {
        int ok = 1;
        for (uint64_t j = 0; j < r->nslots && ok; j++) {
            const tess_piece *p = &r->pieces[j];
            uint64_t off = p->gran * TS_G + p->lo;
            const tess_blk *b = tess_free_at(a, off);
            ok = b && off + (p->hi - p->lo) <= b->off + b->len;
        }
        if (!ok)
            continue;
        lru_unlink(a, r);
        int rc = range_take(a, r, stream, al, err);
        if (rc != 0)
            return rc;
        a->st->stitch_cache_hits++;
        return 1;
    }
    return 0;
}

int tess_range_free(tess *a, tess_alloc *al, uint32_t sidx, uint64_t epoch, ts_err *err)
{
    tess_range *r = al->range;
    for (uint64_t j = 0; j < r->nslots; j++) {
        tess_release_blk(a, r->pieces[j].blk, sidx, epoch, 0);
        r->pieces[j].blk = NULL;
    }
    /* keep it mapped: the same size asked again reuses it without a call */
    r->cached = 1;
    r->lru_prev = NULL;
    r->lru_next = a->lru_head;
    if (a->lru_head)
        a->lru_head->lru_prev = r;
    a->lru_head = r;
    if (!a->lru_tail)
        a->lru_tail = r;
    r->same_next = alloc_ptrmap_get(&a->cache, r->size);
    if (alloc_ptrmap_put(&a->cache, r->size, r) != 0)
        return ts_err_set(err, TS_ENOMEM, "tessera: out of host memory");
    a->ncached++;
    while (a->ncached > TESS_CACHE_MAX_RANGES) {
        int rc = evict_lru(a, err);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* ---- planning ----------------------------------------------------------- */

static int cand_cmp(const void *x, const void *y)
{
    const struct cand *a = x, *b = y;
    if (a->holder != b->holder)
        return a->holder < b->holder ? -1 : 1;
    return a->slot < b->slot ? -1 : a->slot > b->slot;
}

static void better(struct cand *best, uint64_t slot, uint64_t len, uint64_t holder, uint64_t need)
{
    if (len >= need && (!best->len || len < best->len))
        *best = (struct cand){slot, len, holder};
}

/* What stitching rs bytes out of the free large blocks needs. */
static int plan_stitch(tess *a, uint64_t rs, struct plan *p)
{
    free(p->wholes);
    memset(p, 0, sizeof *p);
    p->k = rs / TS_G;
    p->r = rs % TS_G;
    struct cand pre_fit = {0, 0, 0}, suf_fit = {0, 0, 0}, suf_max = {0, 0, 0};
    for (ts_tnode *t = alloc_tree_first(&a->large_free); t; t = alloc_tree_next(&a->large_free, t)) {
        tess_blk *b = TS_CONTAINER_OF(t, tess_blk, fnode);
        uint64_t o = b->off, e = b->off + b->len;
        uint64_t gs = ceil_div(o, TS_G), ge = e / TS_G;
        for (uint64_t g = gs; g < ge; g++) {
            if (p->nwholes == p->capw) {
                size_t nc = p->capw ? p->capw * 2 : 64;
                struct cand *nw = realloc(p->wholes, nc * sizeof *nw);
                if (!nw)
                    return TS_ENOMEM;
                p->wholes = nw;
                p->capw = nc;
            }
            p->wholes[p->nwholes++] = (struct cand){g, TS_G, b->len};
        }
        if (e % TS_G && (e / TS_G) * TS_G >= o) /* a tail: the start of granule e / G */
            better(&pre_fit, e / TS_G, e % TS_G, b->len, p->r ? p->r : 1);
        if (o % TS_G && gs * TS_G <= e) { /* a head: the end of granule o / G */
            uint64_t len = gs * TS_G - o;
            better(&suf_fit, o / TS_G, len, b->len, p->r ? p->r : 1);
            if (len > suf_max.len)
                suf_max = (struct cand){o / TS_G, len, b->len};
        }
    }
    if (p->nwholes)
        qsort(p->wholes, p->nwholes, sizeof *p->wholes, cand_cmp);
    if (p->r) {
        if (pre_fit.len && (!suf_fit.len || pre_fit.len <= suf_fit.len)) {
            p->tail = pre_fit;
            p->tail.len = p->r;
        } else if (suf_fit.len) {
            p->head = suf_fit;
            p->head.len = p->r;
        } else {
            /* a head as long as the longest free end, the rest as a tail */
            struct cand pre2 = {0, 0, 0};
            uint64_t rest = suf_max.len ? p->r - suf_max.len : p->r;
            for (ts_tnode *t = alloc_tree_first(&a->large_free); t && suf_max.len;
                 t = alloc_tree_next(&a->large_free, t)) {
                tess_blk *b = TS_CONTAINER_OF(t, tess_blk, fnode);
                uint64_t o = b->off, e = b->off + b->len;
                if (e % TS_G && (e / TS_G) * TS_G >= o)
                    better(&pre2, e / TS_G, e % TS_G, b->len, rest);
            }
            if (suf_max.len && pre2.len) {
                p->head = suf_max;
                p->tail = pre2;
                p->tail.len = rest;
            } else {
                p->tail_whole = 1;
            }
        }
    }
    uint64_t need = p->k + (uint64_t)p->tail_whole;
    p->need_new = need > p->nwholes ? need - p->nwholes : 0;
    return 0;
}

static uint64_t absent_run(const tess *a, uint64_t from, int dir, uint64_t cap)
{
    uint64_t n = 0;
    while (n < cap) {
        if (dir > 0 ? from + n >= a->nslots : from < n + 1)
            break;
        uint64_t s = dir > 0 ? from + n : from - n - 1;
        if (a->mode[s] != GR_ABSENT)
            break;
        n++;
    }
    return n;
}

/* Fewest granules to create so that rs fits contiguously; *first the first
 * slot to create. UINT64_MAX if no room. */
static uint64_t plan_grow(const tess *a, uint64_t rs, uint64_t *first)
{
    uint64_t best = UINT64_MAX;
    for (ts_tnode *t = alloc_tree_first(&a->large_free); t; t = alloc_tree_next(&a->large_free, t)) {
        const tess_blk *b = TS_CONTAINER_OF(t, tess_blk, fnode);
        uint64_t o = b->off, e = b->off + b->len;
        uint64_t need = ceil_div(rs - b->len, TS_G);
        if (need >= best)
            continue;
        if (e % TS_G == 0 && absent_run(a, e / TS_G, 1, need) == need) {
            best = need;
            *first = e / TS_G;
        } else if (o % TS_G == 0 && absent_run(a, o / TS_G, -1, need) == need) {
            best = need;
            *first = o / TS_G - need;
        }
    }
    uint64_t need = ceil_div(rs, TS_G), run = 0;
    if (need < best) {
        for (uint64_t s = 0; s < a->nslots; s++) {
            run = a->mode[s] == GR_ABSENT ? run + 1 : 0;
            if (run == need) {
                best = need;
                *first = s + 1 - need;
                break;
            }
        }
    }
    return best;
}

static int create_at_lowest(tess *a, uint64_t n, ts_err *err)
{
    for (uint64_t s = 0; s < a->nslots && n;) {
        if (a->mode[s] != GR_ABSENT) {
            s++;
            continue;
        }
        uint64_t run = absent_run(a, s, 1, n);
        int rc = add_large_run(a, s, run, err);
        if (rc != 0)
            return rc;
        n -= run;
        s += run;
    }
    return n ? ts_err_set(err, TS_ENOSPC, "tessera: no home slot left") : 0;
}

static int do_stitch(tess *a, const struct plan *p, uint64_t rs, uint64_t stream, tess_alloc *al,
                     ts_err *err)
{
    uint64_t n = p->k + (p->head.len ? 1 : 0) + (p->tail.len || p->tail_whole ? 1 : 0);
    tess_range *r = calloc(1, sizeof *r);
    tess_piece *pc = r ? calloc((size_t)n, sizeof *pc) : NULL;
    if (!pc) {
        free(r);
        return ts_err_set(err, TS_ENOMEM, "tessera: out of host memory");
    }
    r->pieces = pc;
    r->nslots = n;
    r->size = rs;
    uint64_t j = 0;
    if (p->head.len)
        pc[j++] = (tess_piece){p->head.slot, TS_G - p->head.len, TS_G, NULL};
    for (uint64_t w = 0; w < p->k; w++)
        pc[j++] = (tess_piece){p->wholes[w].slot, 0, TS_G, NULL};
    if (p->tail_whole)
        pc[j++] = (tess_piece){p->wholes[p->k].slot, 0, p->r, NULL};
    else if (p->tail.len)
        pc[j++] = (tess_piece){p->tail.slot, 0, p->tail.len, NULL};
    uint64_t first = 0;
    while (stitch_slots(a, n, &first) != 0) {
        int rc = evict_lru(a, err);
        if (rc == 1) {
            free(pc);
            free(r);
            return ts_err_set(err, TS_ENOSPC, "tessera: stitch address range exhausted");
        }
        if (rc != 0)
            return rc;
    }
    r->va = a->stitch_va + first * TS_G;
    for (j = 0; j < n; j++) {
        int rc = alloc_memdev_map(a->dev, r->va + j * TS_G, TS_G, a->handle[pc[j].gran], err);
        if (rc != 0)
            return rc;
    }
    int rc = alloc_memdev_set_access(a->dev, r->va, n * TS_G, err);
    if (rc == 0)
        rc = range_take(a, r, stream, al, err);
    if (rc == 0)
        a->st->stitched_allocs++;
    return rc;
}

/* The block of best fit for rs, carved for al; 0 if none. */
static int take_fit(tess *a, uint64_t rs, uint64_t stream, tess_alloc *al, ts_err *err)
{
    ts_tnode *n = alloc_tree_lower_bound(&a->large_free, rs, 0, 0);
    if (!n)
        return 0;
    int rc = tess_take_block(a, n, rs, stream, al, err);
    return rc != 0 ? rc : 1;
}

static int large_slow_once(tess *a, uint64_t rs, uint64_t stream, tess_alloc *al, ts_err *err)
{
    int rc = reclaim_small(a) ? take_fit(a, rs, stream, al, err) : 0;
    if (rc != 0)
        return rc < 0 ? rc : 0;
    struct plan p;
    memset(&p, 0, sizeof p);
    if (plan_stitch(a, rs, &p) != 0)
        return ts_err_set(err, TS_ENOMEM, "tessera: out of host memory");
    uint64_t gfirst = 0, gneed = plan_grow(a, rs, &gfirst);
    uint64_t avail = a->cap_slots - a->present;
    if (gneed != UINT64_MAX && gneed <= p.need_new && gneed <= avail) {
        free(p.wholes);
        rc = add_large_run(a, gfirst, gneed, err);
        if (rc == 0)
            rc = take_fit(a, rs, stream, al, err);
        if (rc == 0)
            rc = ts_err_set(err, TS_EINVAL, "tessera: grown run does not hold the request");
        return rc < 0 ? rc : 0;
    }
    if (p.need_new > avail) {
        free(p.wholes);
        return ts_err_set(err, TS_ENOSPC,
                          "tessera: out of memory: %llu bytes asked, %llu of %llu bytes in use",
                          (unsigned long long)rs, (unsigned long long)(a->present * TS_G),
                          (unsigned long long)(a->cap_slots * TS_G));
    }
    if (p.need_new) {
        rc = create_at_lowest(a, p.need_new, err);
        if (rc == 0 && plan_stitch(a, rs, &p) != 0)
            rc = ts_err_set(err, TS_ENOMEM, "tessera: out of host memory");
        if (rc == 0 && p.need_new)
            rc = ts_err_set(err, TS_EINVAL, "tessera: stitch plan short after growing");
    }
    if (rc == 0)
        rc = do_stitch(a, &p, rs, stream, al, err);
    free(p.wholes);
    return rc;
}

int tess_large_slow(tess *a, uint64_t rs, uint64_t stream, tess_alloc *al, ts_err *err)
{
    int rc = large_slow_once(a, rs, stream, al, err);
    if (rc != TS_ENOSPC || !a->npending)
        return rc;
    /* out of memory: wait for the frees held by record_stream events, retry */
    rc = tess_sync_pending(a, err);
    if (rc == 0)
        rc = take_fit(a, rs, stream, al, err);
    if (rc != 0)
        return rc < 0 ? rc : 0;
    return large_slow_once(a, rs, stream, al, err);
}

/* ---- giving memory back -------------------------------------------------- */

static int drop_granule(tess *a, uint64_t slot, ts_err *err)
{
    tess_blk *b = tess_free_at(a, slot * TS_G);
    if (!b)
        return ts_err_set(err, TS_EINVAL, "tessera: granule %llu is not free",
                          (unsigned long long)slot);
    tess_blk *g = unjoin_large(a, b, slot);
    if (!g)
        return ts_err_set(err, TS_ENOMEM, "tessera: out of host memory");
    tess_blk_put(a, g);
    a->mode[slot] = GR_ABSENT;
    int rc = alloc_memdev_unmap(a->dev, a->home_va + slot * TS_G, TS_G, err);
    if (rc == 0)
        rc = alloc_memdev_release(a->dev, a->handle[slot], TS_G, err);
    a->handle[slot] = 0;
    a->present--;
    alloc_stats_reserve(a->st, -(int64_t)TS_G);
    a->st->segment_frees++;
    a->st->segment_free_bytes += TS_G;
    return rc;
}

int tess_empty_cache(void *impl, ts_err *err)
{
    tess *a = impl;
    int rc = tess_sync_pending(a, err);
    while (rc == 0 && a->lru_tail)
        rc = evict_lru(a, err);
    if (rc != 0)
        return rc;
    reclaim_small(a);
    /* the granules of every free block that covers them whole */
    size_t n = 0, cap = 0;
    uint64_t *slots = NULL;
    for (ts_tnode *t = alloc_tree_first(&a->large_free); t; t = alloc_tree_next(&a->large_free, t)) {
        tess_blk *b = TS_CONTAINER_OF(t, tess_blk, fnode);
        for (uint64_t g = ceil_div(b->off, TS_G); g < (b->off + b->len) / TS_G; g++) {
            if (n == cap) {
                cap = cap ? cap * 2 : 64;
                uint64_t *ns = realloc(slots, cap * sizeof *ns);
                if (!ns) {
                    free(slots);
                    return ts_err_set(err, TS_ENOMEM, "tessera: out of host memory");
                }
                slots = ns;
            }
            slots[n++] = g;
        }
    }
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = drop_granule(a, slots[i], err);
    free(slots);
    return rc;
}

static void free_alloc(tess *a, tess_alloc *al)
{
    if (al->range) {
        range_drop(a, al->range, NULL);
    } else if (al->blk && al->blk->small) {
        free(al->blk); /* large blocks are freed from the address tree */
    }
    for (int i = 0; i < al->nuses && al->events; i++)
        if (al->events[i])
            alloc_memdev_event_release(a->dev, al->events[i]);
    free(al->uses);
    free(al->events);
    free(al);
}

void tess_teardown(tess *a)
{
    size_t pos = 0;
    uint64_t key;
    void *val;
    while (alloc_ptrmap_next(&a->allocs, &pos, &key, &val))
        free_alloc(a, val);
    alloc_ptrmap_destroy(&a->allocs);
    while (a->pend_head) {
        tess_alloc *al = a->pend_head;
        a->pend_head = al->pend_next;
        free_alloc(a, al);
    }
    while (a->lru_tail)
        evict_lru(a, NULL);
    alloc_ptrmap_destroy(&a->cache);
    ts_tnode *t;
    while ((t = alloc_tree_first(&a->addr)) != NULL) {
        alloc_tree_remove(&a->addr, t);
        free(TS_CONTAINER_OF(t, tess_blk, anode));
    }
    while ((t = alloc_tree_first(&a->small_free)) != NULL) {
        alloc_tree_remove(&a->small_free, t);
        free(TS_CONTAINER_OF(t, tess_blk, fnode));
    }
    for (uint64_t s = 0; s < a->nslots; s++) {
        if (a->mode[s] == GR_ABSENT)
            continue;
        alloc_memdev_unmap(a->dev, a->home_va + s * TS_G, TS_G, NULL);
        alloc_memdev_release(a->dev, a->handle[s], TS_G, NULL);
        a->mode[s] = GR_ABSENT;
    }
    alloc_memdev_va_free(a->dev, a->home_va, a->nslots * TS_G, NULL);
    alloc_memdev_va_free(a->dev, a->stitch_va, 2 * a->nslots * TS_G, NULL);
}
