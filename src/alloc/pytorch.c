/*
 * pytorch.c - a model of PyTorch's CUDA caching allocator
 * (c10/cuda/CUDACachingAllocator.cpp, the native allocator) with the rules
 * users get by default, as read for this project:
 *   - a request rounds up to a multiple of 512 B; <= 1 MiB goes to the small
 *     pool, larger to the large pool;
 *   - a new segment is 2 MiB (small), 20 MiB (under 10 MiB), else the request
 *     rounded up to 2 MiB;
 *   - best fit: the smallest free block of the same stream, lowest address on
 *     a tie; with max_split_size set, oversize blocks are only used by
 *     requests at least that large and no more than 20 MiB smaller;
 *   - the block is split, taking the low end, when the rest is >= 512 B (small
 *     pool, or any pool with expandable segments) or > 1 MiB (large pool, and
 *     only for requests below max_split_size);
 *   - a freed block merges with free neighbours of its segment; one used on
 *     other streams (record_stream) waits for events recorded there first;
 *   - when the device refuses a segment: free cached oversize blocks and
 *     retry, then free every cached whole segment (after waiting for pending
 *     events) and retry, then report out of memory.
 * Expandable segments are in pytorch_expandable.c. The model is replayed
 * against real traces by tests/alloc/test_fidelity.c.
 */
#include "alloc/pytorch.h"

#include <stdlib.h>
#include <string.h>

static uint64_t round_up(uint64_t x, uint64_t m)
{
    return (x + m - 1) / m * m;
}

/* round_size */
static uint64_t pt_round_size(uint64_t size)
{
    return size < PT_MIN_BLOCK_BYTES ? PT_MIN_BLOCK_BYTES : round_up(size, PT_MIN_BLOCK_BYTES);
}

/* get_allocation_size */
static uint64_t pt_allocation_size(uint64_t size)
{
    if (size <= PT_SMALL_SIZE_BYTES)
        return PT_SMALL_BUFFER_BYTES;
    if (size < PT_MIN_LARGE_ALLOC_BYTES)
        return PT_LARGE_BUFFER_BYTES;
    return round_up(size, PT_ROUND_LARGE_BYTES);
}

pt_block *pt_block_new(pt *a, uint64_t addr, uint64_t size, uint64_t stream, pt_pool *pool,
                       pt_seg *seg)
{
    (void)a;
    pt_block *b = calloc(1, sizeof *b);
    if (!b)
        return NULL;
    b->addr = addr;
    b->size = size;
    b->stream = stream;
    b->pool = pool;
    b->seg = seg;
    b->mapped = 1;
    return b;
}

void pt_block_delete(pt_block *b)
{
    if (b) {
        free(b->uses);
        free(b);
    }
}

pt_seg *pt_seg_new(pt *a, uint64_t addr, uint64_t size, uint64_t stream)
{
    if (a->nsegs == a->capsegs) {
        size_t nc = a->capsegs ? a->capsegs * 2 : 64;
        pt_seg **ns = realloc(a->segs, nc * sizeof *ns);
        if (!ns)
            return NULL;
        a->segs = ns;
        a->capsegs = nc;
    }
    pt_seg *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->addr = addr;
    s->size = size;
    s->stream = stream;
    s->index = a->nsegs;
    a->segs[a->nsegs++] = s;
    return s;
}

void pt_seg_delete(pt *a, pt_seg *s)
{
    size_t i = s->index;
    a->segs[i] = a->segs[--a->nsegs];
    a->segs[i]->index = i;
    free(s->handles);
    free(s);
}

/* nb into a segment's list of blocks, between prev and next (either NULL at
 * an end of the segment). */
static void pt_link_between(pt_block *nb, pt_block *prev, pt_block *next)
{
    nb->prev = prev;
    nb->next = next;
    if (prev)
        prev->next = nb;
    if (next)
        next->prev = nb;
}

void pt_link_before(pt_block *nb, pt_block *b)
{
    pt_link_between(nb, b->prev, b);
}

void pt_link_after(pt_block *nb, pt_block *b)
{
    pt_link_between(nb, b, b->next);
}

/* b->in_tree says which tree holds b: 0 none, IN_BLOCKS or IN_UNMAPPED. */
enum { IN_BLOCKS = 1, IN_UNMAPPED = 2 };

static void tree_put(ts_tree *t, pt_block *b, uint64_t k1, uint64_t k2, int in)
{
    b->node.k[0] = b->stream;
    b->node.k[1] = k1;
    b->node.k[2] = k2;
    alloc_tree_insert(t, &b->node);
    b->in_tree = in;
}

static void tree_take(ts_tree *t, pt_block *b, int in)
{
    if (b->in_tree == in)
        alloc_tree_remove(t, &b->node);
    b->in_tree = 0;
}

void pt_blocks_insert(pt_pool *p, pt_block *b)
{
    tree_put(&p->blocks, b, b->size, b->addr, IN_BLOCKS);
}

void pt_blocks_erase(pt_pool *p, pt_block *b) { tree_take(&p->blocks, b, IN_BLOCKS); }

void pt_unmapped_insert(pt_pool *p, pt_block *b)
{
    tree_put(&p->unmapped, b, b->addr, 0, IN_UNMAPPED);
}

void pt_unmapped_erase(pt_pool *p, pt_block *b) { tree_take(&p->unmapped, b, IN_UNMAPPED); }

uint64_t pt_try_merge(pt_block *dst, pt_block *src)
{
    if (!src || src->allocated || src->event_count > 0 || src->nuses > 0 ||
        dst->mapped != src->mapped)
        return 0;
    if (dst->prev == src) {
        dst->addr = src->addr;
        dst->prev = src->prev;
        if (dst->prev)
            dst->prev->next = dst;
    } else {
        dst->next = src->next;
        if (dst->next)
            dst->next->prev = dst;
    }
    uint64_t taken = src->size;
    dst->size += taken;
    if (src->mapped)
        pt_blocks_erase(src->pool, src);
    else
        pt_unmapped_erase(src->pool, src);
    pt_block_delete(src);
    return taken;
}

/* free_block: merge with free neighbours, back into the pool. */
static void pt_free_block(pt *a, pt_block *b)
{
    (void)a;
    pt_try_merge(b, b->prev);
    pt_try_merge(b, b->next);
    pt_blocks_insert(b->pool, b);
}

/* The oldest event held on q, taken off it (the tail cleared with the last
 * one): the event released, the entry freed. The block it held, where that
 * was the block's last event, else NULL; what becomes of the block is the
 * caller's (back to its pool, or deleted with the allocator). */
static pt_block *pt_pending_pop(pt *a, pt_stream_q *q)
{
    pt_pending *p = q->head;
    q->head = p->next;
    if (!q->head)
        q->tail = NULL;
    alloc_memdev_event_release(a->dev, p->event);
    pt_block *b = --p->b->event_count == 0 ? p->b : NULL;
    free(p);
    a->npending--;
    return b;
}

static int pt_process_events(pt *a, ts_err *err)
{
    if (!a->npending)
        return 0;
    size_t pos = 0;
    uint64_t key;
    void *val;
    while (alloc_ptrmap_next(&a->queues, &pos, &key, &val)) {
        pt_stream_q *q = val;
        while (q->head) {
            int done = 0;
            int rc = alloc_memdev_event_query(a->dev, q->head->event, &done, err);
            if (rc != 0)
                return rc;
            if (!done)
                break;
            pt_block *b = pt_pending_pop(a, q);
            if (b)
                pt_free_block(a, b);
        }
    }
    return 0;
}

/* synchronize_and_free_events */
static int pt_sync_events(pt *a, ts_err *err)
{
    size_t pos = 0;
    uint64_t key;
    void *val;
    while (alloc_ptrmap_next(&a->queues, &pos, &key, &val)) {
        pt_stream_q *q = val;
        while (q->head) {
            int rc = alloc_memdev_event_sync(a->dev, q->head->event, err);
            if (rc != 0)
                return rc;
            pt_block *b = pt_pending_pop(a, q);
            if (b)
                pt_free_block(a, b);
        }
    }
    return 0;
}

/* get_free_block */
static pt_block *pt_get_free_block(pt *a, pt_pool *pool, uint64_t stream, uint64_t size)
{
    ts_tnode *n = alloc_tree_lower_bound(&pool->blocks, stream, size, 0);
    if (!n || n->k[0] != stream)
        return NULL;
    pt_block *b = TS_CONTAINER_OF(n, pt_block, node);
    if (a->expandable && b->seg->expandable) {
        /* best fit by the size a block can grow to: a block followed by
         * unmapped space counts as that much larger, so a plain hole of the
         * same size is preferred */
        for (;;) {
            ts_tnode *nn = alloc_tree_next(&pool->blocks, &b->node);
            if (!nn || nn->k[0] != stream)
                break;
            pt_block *c = TS_CONTAINER_OF(nn, pt_block, node);
            uint64_t eb = b->size + (b->next && !b->next->mapped ? b->next->size : 0);
            uint64_t ec = c->size + (c->next && !c->next->mapped ? c->next->size : 0);
            if (!c->seg->expandable || ec >= eb)
                break;
            b = c;
        }
    }
    if (size < a->max_split && b->size >= a->max_split)
        return NULL; /* no oversize block for a small request */
    if (size >= a->max_split && b->size >= size + PT_LARGE_BUFFER_BYTES)
        return NULL; /* nor a much larger one for a large request */
    pt_blocks_erase(pool, b);
    return b;
}

/* release_block: a whole non-expandable segment back to the device. */
static int pt_release_block(pt *a, pt_block *b, ts_err *err)
{
    pt_seg *s = b->seg;
    int rc = alloc_memdev_mem_free(a->dev, s->addr, s->size, err);
    if (rc != 0)
        return rc;
    a->total -= s->size;
    alloc_stats_reserve(a->st, -(int64_t)s->size);
    a->st->segment_frees++;
    a->st->segment_free_bytes += s->size;
    pt_blocks_erase(b->pool, b);
    pt_block_delete(b);
    pt_seg_delete(a, s);
    return 0;
}

/* alloc_block: a new segment (or, with expandable segments, more pages). */
static int pt_alloc_block(pt *a, pt_pool *pool, uint64_t stream, uint64_t size,
                          uint64_t alloc_size, int is_retry, pt_block **out, ts_err *err)
{
    *out = NULL;
    if (is_retry)
        a->st->num_alloc_retries++;
    if (a->cap != UINT64_MAX && a->total + alloc_size > a->cap)
        return ts_err_set(err, TS_ENOSPC, "pytorch: capacity %llu reached",
                          (unsigned long long)a->cap);
    if (a->expandable) {
        ts_err e2;
        pt_block *b = pt_try_allocate_expandable(a, pool, stream, size, &e2);
        if (!b) {
            if (e2.code != TS_ENOSPC)
                return ts_err_set(err, e2.code, "%s", e2.msg);
            return ts_err_set(err, TS_ENOSPC, "pytorch: device out of memory");
        }
        *out = b;
        return 0;
    }
    uint64_t p = 0;
    int rc = alloc_memdev_mem_alloc(a->dev, alloc_size, &p, err);
    if (rc != 0)
        return rc;
    pt_seg *s = pt_seg_new(a, p, alloc_size, stream);
    pt_block *b = s ? pt_block_new(a, p, alloc_size, stream, pool, s) : NULL;
    if (!b) {
        if (s)
            pt_seg_delete(a, s);
        alloc_memdev_mem_free(a->dev, p, alloc_size, NULL);
        return ts_err_set(err, TS_ENOMEM, "pytorch: out of host memory");
    }
    a->total += alloc_size;
    alloc_stats_reserve(a->st, (int64_t)alloc_size);
    a->st->segment_allocs++;
    a->st->segment_alloc_bytes += alloc_size;
    *out = b;
    return 0;
}

/* release_available_cached_blocks: only does anything with max_split_size set. */
static int pt_release_available(pt *a, pt_pool *pool, uint64_t stream, uint64_t size,
                                ts_err *err)
{
    if (a->max_split == UINT64_MAX)
        return 0;
    uint64_t want = size < a->max_split ? a->max_split : size;
    ts_tnode *n = alloc_tree_lower_bound(&pool->blocks, stream, want, 0);
    pt_block *b = n ? TS_CONTAINER_OF(n, pt_block, node) : NULL;
    if (!b || b->stream != stream || b->seg->expandable) {
        /* free oversize blocks from the largest down until enough */
        n = n ? alloc_tree_prev(&pool->blocks, n) : alloc_tree_last(&pool->blocks);
        uint64_t freed = 0;
        while (n && freed < want) {
            pt_block *c = TS_CONTAINER_OF(n, pt_block, node);
            if (c->size < a->max_split || c->stream != stream)
                break;
            ts_tnode *prev = alloc_tree_prev(&pool->blocks, n);
            if (!c->seg->expandable && !c->prev && !c->next) {
                freed += c->size;
                int rc = pt_release_block(a, c, err);
                if (rc != 0)
                    return rc;
            }
            n = prev;
        }
        return freed >= want;
    }
    if (b->prev || b->next)
        return 0; /* part of a segment: cannot be given back alone */
    int rc = pt_release_block(a, b, err);
    return rc != 0 ? rc : 1;
}

/* release_blocks over one pool: whole segments freed, expandable free pages unmapped. */
static int pt_release_pool(pt *a, pt_pool *pool, ts_err *err)
{
    size_t n = pool->blocks.n, k = 0;
    if (!n)
        return 0;
    pt_block **list = malloc(n * sizeof *list);
    if (!list)
        return ts_err_set(err, TS_ENOMEM, "pytorch: out of host memory");
    for (ts_tnode *t = alloc_tree_first(&pool->blocks); t; t = alloc_tree_next(&pool->blocks, t))
        list[k++] = TS_CONTAINER_OF(t, pt_block, node);
    int rc = 0;
    for (size_t i = 0; i < k && rc == 0; i++) {
        pt_block *b = list[i];
        if (b->seg->expandable) {
            rc = pt_unmap_block(a, b, err);
            if (rc == 0 && !b->prev && !b->next && !b->mapped)
                rc = pt_release_expandable_segment(a, b, err);
        } else if (!b->prev && !b->next) {
            rc = pt_release_block(a, b, err);
        }
    }
    free(list);
    return rc;
}

/* release_cached_blocks */
static int pt_release_cached(pt *a, ts_err *err)
{
    int rc = pt_sync_events(a, err);
    if (rc == 0)
        rc = pt_release_pool(a, &a->large, err);
    if (rc == 0)
        rc = pt_release_pool(a, &a->small, err);
    return rc;
}

static int pt_should_split(const pt *a, const pt_block *b, uint64_t size)
{
    uint64_t rest = b->size - size;
    if (b->pool->is_small || a->expandable)
        return rest >= PT_MIN_BLOCK_BYTES;
    return size < a->max_split && rest > PT_SMALL_SIZE_BYTES;
}

static int pt_malloc(void *impl, uint64_t size, uint64_t stream, uint64_t *ptr, ts_err *err)
{
    pt *a = impl;
    int rc = pt_process_events(a, err);
    if (rc != 0)
        return rc;
    uint64_t rs = pt_round_size(size);
    pt_pool *pool = rs <= PT_SMALL_SIZE_BYTES ? &a->small : &a->large;
    uint64_t alloc_size = pt_allocation_size(rs);
    pt_block *b = pt_get_free_block(a, pool, stream, rs);
    if (!b) {
        ts_err e2;
        rc = pt_alloc_block(a, pool, stream, rs, alloc_size, 0, &b, &e2);
        if (rc == TS_ENOSPC) {
            rc = pt_release_available(a, pool, stream, rs, err);
            if (rc < 0)
                return rc;
            rc = rc ? pt_alloc_block(a, pool, stream, rs, alloc_size, 0, &b, &e2) : TS_ENOSPC;
        }
        if (rc == TS_ENOSPC) {
            rc = pt_release_cached(a, err);
            if (rc != 0)
                return rc;
            rc = pt_alloc_block(a, pool, stream, rs, alloc_size, 1, &b, &e2);
        }
        if (rc == TS_ENOSPC) {
            a->st->num_ooms++;
            return ts_err_set(err, TS_ENOSPC,
                              "out of memory: %llu bytes requested, %llu reserved, capacity %llu",
                              (unsigned long long)size, (unsigned long long)a->total,
                              (unsigned long long)(a->cap != UINT64_MAX ? a->cap : a->dev_total));
        }
        if (rc != 0)
            return ts_err_set(err, rc, "%s", e2.msg);
    }
    if (pt_should_split(a, b, rs)) {
        /* the allocation keeps the low end; the rest stays a free block */
        pt_block *rest = b;
        pt_block *nb = pt_block_new(a, rest->addr, rs, stream, pool, rest->seg);
        if (!nb) {
            pt_blocks_insert(pool, rest);
            return ts_err_set(err, TS_ENOMEM, "pytorch: out of host memory");
        }
        pt_link_before(nb, rest);
        rest->addr += rs;
        rest->size -= rs;
        pt_blocks_insert(pool, rest);
        b = nb;
    }
    b->allocated = 1;
    b->requested = size;
    if (alloc_ptrmap_put(&a->active, b->addr, b) != 0)
        return ts_err_set(err, TS_ENOMEM, "pytorch: out of host memory");
    alloc_stats_alloc(a->st, size, b->size);
    *ptr = b->addr;
    return 0;
}

static int pt_free(void *impl, uint64_t ptr, uint64_t stream, ts_err *err)
{
    pt *a = impl;
    (void)stream; /* the model frees into the block's own stream, as the source does */
    pt_block *b = alloc_ptrmap_del(&a->active, ptr);
    if (!b)
        return ts_err_set(err, TS_EINVAL, "free: %#llx is not a live allocation",
                          (unsigned long long)ptr);
    b->allocated = 0;
    alloc_stats_free(a->st, b->requested, b->size);
    if (!b->nuses) {
        pt_free_block(a, b);
        return 0;
    }
    /* insert_events: one event per stream the block was used on */
    for (int i = 0; i < b->nuses; i++) {
        pt_stream_q *q = alloc_ptrmap_get(&a->queues, b->uses[i] + 1);
        if (!q) {
            q = calloc(1, sizeof *q);
            if (!q || alloc_ptrmap_put(&a->queues, b->uses[i] + 1, q) != 0) {
                free(q);
                return ts_err_set(err, TS_ENOMEM, "pytorch: out of host memory");
            }
        }
        pt_pending *p = calloc(1, sizeof *p);
        if (!p)
            return ts_err_set(err, TS_ENOMEM, "pytorch: out of host memory");
        int rc = alloc_memdev_event_record(a->dev, b->uses[i], &p->event, err);
        if (rc != 0) {
            free(p);
            return rc;
        }
        p->b = b;
        if (q->tail)
            q->tail->next = p;
        else
            q->head = p;
        q->tail = p;
        b->event_count++;
        a->npending++;
    }
    free(b->uses);
    b->uses = NULL;
    b->nuses = 0;
    return 0;
}

static int pt_record_stream(void *impl, uint64_t ptr, uint64_t stream, ts_err *err)
{
    pt *a = impl;
    pt_block *b = alloc_ptrmap_get(&a->active, ptr);
    if (!b)
        return ts_err_set(err, TS_EINVAL, "record_stream: %#llx is not a live allocation",
                          (unsigned long long)ptr);
    return alloc_uses_add(&b->uses, &b->nuses, b->stream, stream, "pytorch", err);
}

static int pt_empty_cache(void *impl, ts_err *err)
{
    return pt_release_cached(impl, err);
}

static uint64_t pt_size_of(const void *impl, uint64_t ptr)
{
    const pt *a = impl;
    const pt_block *b = alloc_ptrmap_get(&a->active, ptr);
    return b ? b->requested : 0;
}

static int pt_adopt_segment(void *impl, uint64_t addr, uint64_t size, uint64_t stream, int small,
                            ts_err *err)
{
    pt *a = impl;
    if (a->expandable)
        return ts_err_set(err, TS_EINVAL, "adopt_segment: not with expandable segments");
    if (!size || size % PT_SMALL_BUFFER_BYTES)
        return ts_err_set(err, TS_EINVAL, "adopt_segment: size %llu is not a multiple of 2 MiB",
                          (unsigned long long)size);
    ts_memdev_sim_next_addr(a->dev, addr, size);
    uint64_t p = 0;
    int rc = alloc_memdev_mem_alloc(a->dev, size, &p, err);
    if (rc != 0)
        return rc;
    pt_pool *pool = small ? &a->small : &a->large;
    pt_seg *s = p == addr ? pt_seg_new(a, p, size, stream) : NULL;
    pt_block *b = s ? pt_block_new(a, p, size, stream, pool, s) : NULL;
    if (!b) {
        if (s)
            pt_seg_delete(a, s);
        alloc_memdev_mem_free(a->dev, p, size, NULL);
        return ts_err_set(err, TS_EINVAL, "adopt_segment: the device cannot place a segment at %#llx",
                          (unsigned long long)addr);
    }
    a->total += size;
    alloc_stats_reserve(a->st, (int64_t)size);
    pt_blocks_insert(pool, b);
    return 0;
}

static int pt_adopt_block(void *impl, uint64_t addr, uint64_t size, uint64_t requested,
                          uint64_t stream, ts_err *err)
{
    pt *a = impl;
    pt_pool *pools[2] = {&a->large, &a->small};
    for (int i = 0; i < 2; i++) {
        for (ts_tnode *n = alloc_tree_lower_bound(&pools[i]->blocks, stream, 0, 0);
             n && n->k[0] == stream; n = alloc_tree_next(&pools[i]->blocks, n)) {
            pt_block *b = TS_CONTAINER_OF(n, pt_block, node);
            if (addr < b->addr || addr + size > b->addr + b->size)
                continue;
            pt_blocks_erase(pools[i], b);
            if (addr > b->addr) { /* keep the part below free */
                pt_block *lo = pt_block_new(a, b->addr, addr - b->addr, stream, b->pool, b->seg);
                if (!lo)
                    return ts_err_set(err, TS_ENOMEM, "pytorch: out of host memory");
                pt_link_before(lo, b);
                b->size -= lo->size;
                b->addr = addr;
                pt_blocks_insert(pools[i], lo);
            }
            if (b->size > size) { /* and the part above */
                pt_block *hi = pt_block_new(a, addr + size, b->size - size, stream, b->pool, b->seg);
                if (!hi)
                    return ts_err_set(err, TS_ENOMEM, "pytorch: out of host memory");
                pt_link_after(hi, b);
                b->size = size;
                pt_blocks_insert(pools[i], hi);
            }
            b->allocated = 1;
            b->requested = requested;
            if (alloc_ptrmap_put(&a->active, addr, b) != 0)
                return ts_err_set(err, TS_ENOMEM, "pytorch: out of host memory");
            alloc_stats_alloc(a->st, requested, size);
            return 0;
        }
    }
    return ts_err_set(err, TS_EINVAL, "adopt_block: %#llx+%llu is not inside a free block",
                      (unsigned long long)addr, (unsigned long long)size);
}

static void pt_free_tree(ts_tree *t)
{
    ts_tnode *n;
    while ((n = alloc_tree_first(t)) != NULL) {
        alloc_tree_remove(t, n);
        pt_block_delete(TS_CONTAINER_OF(n, pt_block, node));
    }
}

static void pt_destroy(void *impl)
{
    pt *a = impl;
    size_t pos = 0;
    uint64_t key;
    void *val;
    while (alloc_ptrmap_next(&a->queues, &pos, &key, &val)) {
        pt_stream_q *q = val;
        while (q->head) {
            pt_block *b = pt_pending_pop(a, q);
            if (b)
                pt_block_delete(b);
        }
        free(q);
    }
    alloc_ptrmap_destroy(&a->queues);
    pos = 0;
    while (alloc_ptrmap_next(&a->active, &pos, &key, &val))
        pt_block_delete(val);
    alloc_ptrmap_destroy(&a->active);
    pt_free_tree(&a->small.blocks);
    pt_free_tree(&a->large.blocks);
    pt_free_tree(&a->small.unmapped);
    pt_free_tree(&a->large.unmapped);
    while (a->nsegs) {
        pt_seg *s = a->segs[a->nsegs - 1];
        if (s->expandable)
            pt_expandable_destroy(a, s);
        else
            alloc_memdev_mem_free(a->dev, s->addr, s->size, NULL);
        pt_seg_delete(a, s);
    }
    free(a->segs);
    free(a);
}

static const struct ts_memalloc_impl_ops pt_ops = {
    .malloc = pt_malloc,
    .free = pt_free,
    .record_stream = pt_record_stream,
    .empty_cache = pt_empty_cache,
    .size_of = pt_size_of,
    .destroy = pt_destroy,
    .adopt_segment = pt_adopt_segment,
    .adopt_block = pt_adopt_block,
};

int alloc_pt_new(const ts_memalloc_config *cfg, ts_memdev *dev, ts_memalloc_stats *st,
              const struct ts_memalloc_impl_ops **ops, void **impl, ts_err *err)
{
    pt *a = calloc(1, sizeof *a);
    if (!a)
        return ts_err_set(err, TS_ENOMEM, "pytorch: out of memory");
    a->dev = dev;
    a->st = st;
    a->expandable = cfg->kind == TS_MEMALLOC_PYTORCH_EXPANDABLE;
    a->max_split = cfg->max_split_bytes ? cfg->max_split_bytes : UINT64_MAX;
    a->cap = cfg->capacity_bytes ? cfg->capacity_bytes : UINT64_MAX;
    ts_memdev_stats ds;
    ts_memdev_get_stats(dev, &ds);
    a->dev_total = ds.capacity_bytes;
    a->small.is_small = 1;
    alloc_tree_init(&a->small.blocks, 11);
    alloc_tree_init(&a->small.unmapped, 12);
    alloc_tree_init(&a->large.blocks, 13);
    alloc_tree_init(&a->large.unmapped, 14);
    alloc_ptrmap_init(&a->active);
    alloc_ptrmap_init(&a->queues);
    *ops = &pt_ops;
    *impl = a;
    return 0;
}
