/*
 * tessera.c - the tessera allocator's everyday paths (see tessera.h for the
 * layout): best fit in the small or large free tree, taking the low end and
 * leaving the rest free; frees that merge with free neighbours; streams. A
 * large request no free block holds then tries a cached stitched range of its
 * size whose bytes are all free again. None of this makes a driver call. When
 * nothing fits, tessera_grow.c stitches, grows or converts granules. (Trying
 * the cached ranges before best fit was measured: more reuse, but a range of
 * k granules costs k carves and k merges, 20-50 % slower, no less memory.)
 *
 * Stream order: memory freed on stream S is reused on S at once (its work is
 * queued behind the free). Reused on another stream T, it must wait for S's
 * work up to the free: the block remembers S and how many frees S had made
 * then (its epoch); T waits on an event recorded on S unless it already
 * waited for S since that free - two calls, no host synchronisation. A block
 * merged from frees of several streams makes T wait for each of them.
 * Blocks freed while used on other streams (record_stream) wait for events
 * recorded on those streams before they are free at all.
 */
#include "alloc/tessera.h"

#include <stdlib.h>
#include <string.h>

static uint64_t round_up(uint64_t x, uint64_t m)
{
    return (x + m - 1) / m * m;
}

tess_blk *tess_blk_new(tess *a, uint64_t off, uint64_t len, int small)
{
    tess_blk *b = a->blk_pool;
    if (b) {
        a->blk_pool = b->next;
        memset(b, 0, sizeof *b);
    } else {
        b = calloc(1, sizeof *b);
    }
    if (!b)
        return NULL;
    b->off = off;
    b->len = len;
    b->small = (uint8_t)small;
    b->sidx = TESS_SIDX_CLEAN;
    return b;
}

void tess_blk_put(tess *a, tess_blk *b)
{
    b->next = a->blk_pool;
    a->blk_pool = b;
}

static tess_alloc *alloc_new(tess *a)
{
    tess_alloc *al = a->alloc_pool;
    if (!al)
        return calloc(1, sizeof *al);
    a->alloc_pool = al->pend_next;
    memset(al, 0, sizeof *al);
    return al;
}

static void alloc_put(tess *a, tess_alloc *al)
{
    free(al->uses);
    free(al->events);
    al->pend_next = a->alloc_pool;
    a->alloc_pool = al;
}

void tess_free_insert(tess *a, tess_blk *b)
{
    b->fnode.k[0] = b->len;
    b->fnode.k[1] = b->off;
    b->fnode.k[2] = 0;
    alloc_tree_insert(b->small ? &a->small_free : &a->large_free, &b->fnode);
    b->in_free = 1;
    b->owner = NULL;
}

void tess_free_erase(tess *a, tess_blk *b)
{
    if (b->in_free)
        alloc_tree_remove(b->small ? &a->small_free : &a->large_free, &b->fnode);
    b->in_free = 0;
}

static void addr_insert(tess *a, tess_blk *b)
{
    if (b->small)
        return;
    b->anode.k[0] = b->off;
    alloc_tree_insert(&a->addr, &b->anode);
}

static void addr_erase(tess *a, tess_blk *b)
{
    if (!b->small)
        alloc_tree_remove(&a->addr, &b->anode);
}

tess_blk *tess_free_at(tess *a, uint64_t off)
{
    ts_tnode *n = alloc_tree_floor(&a->addr, off, UINT64_MAX, UINT64_MAX);
    if (!n)
        return NULL;
    tess_blk *b = TS_CONTAINER_OF(n, tess_blk, anode);
    return b->in_free && off < b->off + b->len ? b : NULL;
}

/* A new block after b in its run, with b's stream tags. */
static tess_blk *split_after(tess *a, tess_blk *b, uint64_t off, uint64_t len)
{
    tess_blk *n = tess_blk_new(a, off, len, b->small);
    if (!n)
        return NULL;
    n->sidx = b->sidx;
    n->epoch = b->epoch;
    n->mixed = b->mixed;
    n->prev = b;
    n->next = b->next;
    if (n->next)
        n->next->prev = n;
    b->next = n;
    addr_insert(a, n);
    return n;
}

tess_blk *tess_carve(tess *a, tess_blk *b, uint64_t off, uint64_t len)
{
    uint64_t end = b->off + b->len;
    tess_free_erase(a, b);
    tess_blk *mid = b;
    if (off > b->off) { /* b keeps the bytes below (its key in addr unchanged) */
        b->len = off - b->off;
        mid = split_after(a, b, off, len);
        tess_free_insert(a, b);
        if (!mid)
            return NULL;
    } else {
        b->len = len;
    }
    if (off + len < end) {
        tess_blk *hi = split_after(a, mid, off + len, end - off - len);
        if (!hi)
            return NULL;
        tess_free_insert(a, hi);
    }
    mid->len = len;
    return mid;
}

static void tags_merge(tess_blk *dst, const tess_blk *src)
{
    if (src->sidx == TESS_SIDX_CLEAN)
        return;
    if (dst->sidx == TESS_SIDX_CLEAN) {
        dst->sidx = src->sidx;
        dst->epoch = src->epoch;
        dst->mixed = src->mixed;
        return;
    }
    if (dst->sidx != src->sidx || src->mixed)
        dst->mixed = 1;
    if (src->epoch > dst->epoch)
        dst->epoch = src->epoch;
}

tess_blk *tess_release_blk(tess *a, tess_blk *b, uint32_t sidx, uint64_t epoch, int mixed)
{
    b->owner = NULL;
    b->sidx = sidx;
    b->epoch = epoch;
    b->mixed = (uint8_t)mixed;
    tess_blk *p = b->prev;
    if (p && p->in_free) { /* p absorbs b, keeping its offset */
        tess_free_erase(a, p);
        tags_merge(p, b);
        p->len += b->len;
        p->next = b->next;
        if (p->next)
            p->next->prev = p;
        addr_erase(a, b);
        tess_blk_put(a, b);
        b = p;
    }
    tess_blk *n = b->next;
    if (n && n->in_free) {
        tess_free_erase(a, n);
        tags_merge(b, n);
        b->len += n->len;
        b->next = n->next;
        if (b->next)
            b->next->prev = b;
        addr_erase(a, n);
        tess_blk_put(a, n);
    }
    tess_free_insert(a, b);
    return b;
}

static tess_stream *stream_of(tess *a, uint64_t id)
{
    if (a->last && a->last->id == id)
        return a->last;
    tess_stream *s = alloc_ptrmap_get(&a->streams, id + 1);
    if (s)
        return a->last = s;
    if (a->nstreams == a->capstreams) { /* grow the index and the wait matrix */
        uint32_t nc = a->capstreams ? a->capstreams * 2 : 8;
        tess_stream **nv = realloc(a->svec, nc * sizeof *nv);
        uint64_t *nw = calloc((size_t)nc * nc, sizeof *nw);
        if (nv)
            a->svec = nv;
        if (!nv || !nw) {
            free(nw);
            return NULL;
        }
        for (uint32_t i = 0; i < a->capstreams; i++)
            memcpy(nw + (size_t)i * nc, a->waited + (size_t)i * a->capstreams,
                   a->capstreams * sizeof *nw);
        free(a->waited);
        a->waited = nw;
        a->capstreams = nc;
    }
    s = calloc(1, sizeof *s);
    if (!s || alloc_ptrmap_put(&a->streams, id + 1, s) != 0) {
        free(s);
        return NULL;
    }
    s->id = id;
    s->index = a->nstreams++;
    a->svec[s->index] = s;
    return a->last = s;
}

/* waiter waits for src's work up to src's free number epoch. */
static int wait_for(tess *a, const tess_stream *waiter, const tess_stream *src, uint64_t epoch,
                    ts_err *err)
{
    uint64_t *done = &a->waited[(size_t)waiter->index * a->capstreams + src->index];
    if (*done >= epoch)
        return 0;
    uint64_t ev = 0;
    int rc = alloc_memdev_event_record(a->dev, src->id, &ev, err);
    if (rc != 0)
        return rc;
    rc = alloc_memdev_stream_wait(a->dev, waiter->id, ev, err);
    alloc_memdev_event_release(a->dev, ev);
    if (rc != 0)
        return rc;
    *done = src->epoch;
    return 0;
}

int tess_order_after(tess *a, uint64_t stream, const tess_blk *b, ts_err *err)
{
    if (b->sidx == TESS_SIDX_CLEAN)
        return 0;
    tess_stream *t = stream_of(a, stream);
    if (!t)
        return ts_err_set(err, TS_ENOMEM, "tessera: out of host memory");
    if (!b->mixed)
        return b->sidx == t->index + 1 ? 0 : wait_for(a, t, a->svec[b->sidx - 1], b->epoch, err);
    for (uint32_t i = 0; i < a->nstreams; i++) {
        const tess_stream *s = a->svec[i];
        if (s != t && s->epoch) {
            int rc = wait_for(a, t, s, s->epoch, err);
            if (rc != 0)
                return rc;
        }
    }
    return 0;
}

/* The free proper: memory back to the pools, ordered on stream. */
static int finish_free(tess *a, tess_alloc *al, uint64_t stream, ts_err *err)
{
    tess_stream *s = stream_of(a, stream);
    if (!s)
        return ts_err_set(err, TS_ENOMEM, "tessera: out of host memory");
    uint64_t epoch = ++s->epoch;
    int rc = 0;
    if (al->range)
        rc = tess_range_free(a, al, s->index + 1, epoch, err);
    else
        tess_release_blk(a, al->blk, s->index + 1, epoch, 0);
    alloc_put(a, al);
    return rc;
}

/* Pending frees whose events have all completed (sync: wait for them). */
static int process_pending(tess *a, int sync, ts_err *err)
{
    tess_alloc **link = &a->pend_head;
    while (*link) {
        tess_alloc *al = *link;
        int done = 1;
        for (int i = 0; i < al->nuses; i++) {
            if (!al->events[i])
                continue;
            int ok = 0, rc = sync ? alloc_memdev_event_sync(a->dev, al->events[i], err)
                                  : alloc_memdev_event_query(a->dev, al->events[i], &ok, err);
            if (rc != 0)
                return rc;
            if (sync || ok) {
                alloc_memdev_event_release(a->dev, al->events[i]);
                al->events[i] = 0;
            } else {
                done = 0;
            }
        }
        if (!done) {
            link = &al->pend_next;
            continue;
        }
        *link = al->pend_next;
        a->npending--;
        int rc = finish_free(a, al, al->stream, err);
        if (rc != 0)
            return rc;
    }
    return 0;
}

int tess_sync_pending(tess *a, ts_err *err)
{
    return a->npending ? process_pending(a, 1, err) : 0;
}

int tess_take_block(tess *a, ts_tnode *n, uint64_t size, uint64_t stream, tess_alloc *al,
                    ts_err *err)
{
    tess_blk *b = TS_CONTAINER_OF(n, tess_blk, fnode);
    int rc = tess_order_after(a, stream, b, err);
    if (rc != 0)
        return rc;
    tess_blk *mid = tess_carve(a, b, b->off, size);
    if (!mid)
        return ts_err_set(err, TS_ENOMEM, "tessera: out of host memory");
    mid->owner = al;
    al->blk = mid;
    al->ptr = a->home_va + mid->off;
    return 0;
}

static int tess_malloc(void *impl, uint64_t size, uint64_t stream, uint64_t *ptr, ts_err *err)
{
    tess *a = impl;
    int rc = a->npending ? process_pending(a, 0, err) : 0;
    if (rc != 0)
        return rc;
    uint64_t rs = round_up(size, TESS_ALIGN_BYTES);
    tess_alloc *al = alloc_new(a);
    if (!al)
        return ts_err_set(err, TS_ENOMEM, "tessera: out of host memory");
    al->size = rs;
    al->requested = size;
    al->stream = stream;
    if (rs <= TESS_SMALL_MAX_BYTES) {
        ts_tnode *n = alloc_tree_lower_bound(&a->small_free, rs, 0, 0);
        for (int tries = 0; !n && rc == 0 && tries < 3; tries++) {
            rc = tess_small_granule(a, err);
            n = rc == 0 ? alloc_tree_lower_bound(&a->small_free, rs, 0, 0) : NULL;
        }
        if (n)
            rc = tess_take_block(a, n, rs, stream, al, err);
        else if (rc == 0)
            rc = ts_err_set(err, TS_EINVAL, "tessera: new small granule holds no block");
    } else {
        ts_tnode *n = alloc_tree_lower_bound(&a->large_free, rs, 0, 0);
        if (n) {
            rc = tess_take_block(a, n, rs, stream, al, err);
        } else {
            rc = tess_cache_take(a, rs, stream, al, err);
            if (rc == 0)
                rc = tess_large_slow(a, rs, stream, al, err);
            else if (rc == 1)
                rc = 0;
        }
    }
    if (rc == 0 && alloc_ptrmap_put(&a->allocs, al->ptr, al) != 0)
        rc = ts_err_set(err, TS_ENOMEM, "tessera: out of host memory");
    if (rc != 0) {
        alloc_put(a, al);
        if (rc == TS_ENOSPC)
            a->st->num_ooms++;
        return rc;
    }
    alloc_stats_alloc(a->st, size, rs);
    *ptr = al->ptr;
    return 0;
}

static int tess_free(void *impl, uint64_t ptr, uint64_t stream, ts_err *err)
{
    tess *a = impl;
    tess_alloc *al = alloc_ptrmap_del(&a->allocs, ptr);
    if (!al)
        return ts_err_set(err, TS_EINVAL, "free: %#llx is not a live allocation",
                          (unsigned long long)ptr);
    alloc_stats_free(a->st, al->requested, al->size);
    if (!al->nuses)
        return finish_free(a, al, stream, err);
    al->events = calloc((size_t)al->nuses, sizeof *al->events);
    if (!al->events)
        return ts_err_set(err, TS_ENOMEM, "tessera: out of host memory");
    for (int i = 0; i < al->nuses; i++) {
        int rc = alloc_memdev_event_record(a->dev, al->uses[i], &al->events[i], err);
        if (rc != 0)
            return rc;
    }
    al->stream = stream;
    al->pend_next = a->pend_head;
    a->pend_head = al;
    a->npending++;
    return 0;
}

static int tess_record_stream(void *impl, uint64_t ptr, uint64_t stream, ts_err *err)
{
    tess *a = impl;
    tess_alloc *al = alloc_ptrmap_get(&a->allocs, ptr);
    if (!al)
        return ts_err_set(err, TS_EINVAL, "record_stream: %#llx is not a live allocation",
                          (unsigned long long)ptr);
    return alloc_uses_add(&al->uses, &al->nuses, al->stream, stream, "tessera", err);
}

static uint64_t tess_size_of(const void *impl, uint64_t ptr)
{
    const tess *a = impl;
    const tess_alloc *al = alloc_ptrmap_get(&a->allocs, ptr);
    return al ? al->requested : 0;
}

static void tess_destroy(void *impl)
{
    tess *a = impl;
    tess_teardown(a);
    size_t pos = 0;
    uint64_t key;
    void *val;
    while (alloc_ptrmap_next(&a->streams, &pos, &key, &val))
        free(val);
    alloc_ptrmap_destroy(&a->streams);
    while (a->blk_pool) {
        tess_blk *b = a->blk_pool;
        a->blk_pool = b->next;
        free(b);
    }
    while (a->alloc_pool) {
        tess_alloc *al = a->alloc_pool;
        a->alloc_pool = al->pend_next;
        free(al);
    }
    free(a->svec);
    free(a->waited);
    free(a->mode);
    free(a->handle);
    free(a->stitch_used);
    free(a);
}

static const struct ts_memalloc_impl_ops tess_ops = {
    .malloc = tess_malloc,
    .free = tess_free,
    .record_stream = tess_record_stream,
    .empty_cache = tess_empty_cache,
    .size_of = tess_size_of,
    .destroy = tess_destroy,
};

int alloc_tess_new(const ts_memalloc_config *cfg, ts_memdev *dev, ts_memalloc_stats *st,
                const struct ts_memalloc_impl_ops **ops, void **impl, ts_err *err)
{
    ts_memdev_stats ds;
    ts_memdev_get_stats(dev, &ds);
    uint64_t cap = cfg->capacity_bytes ? cfg->capacity_bytes : ds.capacity_bytes;
    if (ds.capacity_bytes && cap > ds.capacity_bytes)
        cap = ds.capacity_bytes;
    if (cap < TS_G)
        return ts_err_set(err, TS_EINVAL, "capacity_bytes: %llu is less than one 2 MiB granule",
                          (unsigned long long)cap);
    tess *a = calloc(1, sizeof *a);
    if (!a)
        return ts_err_set(err, TS_ENOMEM, "tessera: out of memory");
    a->dev = dev;
    a->st = st;
    a->cap_slots = cap / TS_G;
    a->nslots = a->cap_slots;
    a->mode = calloc(a->nslots, 1);
    a->handle = calloc(a->nslots, sizeof *a->handle);
    a->stitch_used = calloc(2 * a->nslots, 1);
    alloc_tree_init(&a->large_free, 21);
    alloc_tree_init(&a->small_free, 22);
    alloc_tree_init(&a->addr, 23);
    alloc_ptrmap_init(&a->allocs);
    alloc_ptrmap_init(&a->streams);
    alloc_ptrmap_init(&a->cache);
    int rc = 0;
    if (!a->mode || !a->handle || !a->stitch_used)
        rc = ts_err_set(err, TS_ENOMEM, "tessera: out of memory");
    if (rc == 0)
        rc = alloc_memdev_va_reserve(dev, a->nslots * TS_G, TS_G, &a->home_va, err);
    if (rc == 0)
        rc = alloc_memdev_va_reserve(dev, 2 * a->nslots * TS_G, TS_G, &a->stitch_va, err);
    if (rc != 0) {
        if (a->home_va)
            alloc_memdev_va_free(dev, a->home_va, a->nslots * TS_G, NULL);
        free(a->mode);
        free(a->handle);
        free(a->stitch_used);
        free(a);
        return rc;
    }
    *ops = &tess_ops;
    *impl = a;
    return 0;
}
