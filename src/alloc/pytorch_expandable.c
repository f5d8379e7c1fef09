/*
 * pytorch_expandable.c - the model's expandable segments
 * (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True): per stream and pool
 * one virtual range of 9/8 of the device's memory, backed on demand by pages
 * of 2 MiB (small pool) or 20 MiB (large pool), each its own cuMemCreate
 * handle, mapped at the lowest fitting address and given access in one call.
 *
 * A request no free block fits looks, in address order, for unmapped space
 * on its stream (together with a free block just below it) large enough,
 * maps the pages it needs and merges them with the free neighbours. Free
 * pages are only unmapped when the cache is emptied (empty_cache, or the
 * retry before out-of-memory), after synchronising the segment's stream; a
 * segment left with nothing mapped gives its address range back.
 */
#include "alloc/pytorch.h"

#include <stdlib.h>
#include <string.h>

static int allocatable(const pt_block *b)
{
    return b && !b->allocated && b->event_count == 0 && b->nuses == 0;
}

static int has_room(const pt_block *b, uint64_t size)
{
    uint64_t bytes = 0;
    while (bytes < size && allocatable(b)) {
        bytes += b->size;
        b = b->next;
    }
    return bytes >= size;
}

/* find_expandable_block */
static pt_block *find_expandable_block(pt *a, pt_pool *pool, uint64_t stream, uint64_t size,
                                       ts_err *err)
{
    for (ts_tnode *n = alloc_tree_lower_bound(&pool->unmapped, stream, 0, 0); n && n->k[0] == stream;
         n = alloc_tree_next(&pool->unmapped, n)) {
        pt_block *c = TS_CONTAINER_OF(n, pt_block, node);
        if (allocatable(c->prev))
            c = c->prev;
        if (has_room(c, size))
            return c;
    }
    uint64_t page = pool->is_small ? PT_SMALL_BUFFER_BYTES : PT_LARGE_BUFFER_BYTES;
    uint64_t space = a->dev_total / 8 * 9;
    space = (space + page - 1) / page * page;
    uint64_t va = 0;
    if (alloc_memdev_va_reserve(a->dev, space, 0, &va, err) != 0)
        return NULL;
    pt_seg *s = pt_seg_new(a, va, space, stream);
    pt_block *b = NULL;
    if (s) {
        s->expandable = 1;
        s->page = page;
        s->npages = (size_t)(space / page);
        s->handles = calloc(s->npages, sizeof *s->handles);
        b = s->handles ? pt_block_new(a, va, space, stream, pool, s) : NULL;
    }
    if (!b) {
        if (s)
            pt_seg_delete(a, s);
        alloc_memdev_va_free(a->dev, va, space, NULL);
        ts_err_set(err, TS_ENOMEM, "pytorch: out of host memory");
        return NULL;
    }
    b->mapped = 0;
    pt_unmapped_insert(pool, b);
    return b;
}

/* ExpandableSegment::map: the pages under [addr, addr + size); 0 on failure. */
static uint64_t seg_map(pt *a, pt_seg *s, uint64_t addr, uint64_t size, uint64_t *mapped_at,
                        ts_err *err)
{
    size_t begin = (size_t)((addr - s->addr) / s->page);
    size_t end = (size_t)((addr + size - s->addr + s->page - 1) / s->page);
    *mapped_at = s->addr + begin * s->page;
    if (begin == end)
        return 0;
    for (size_t i = begin; i < end; i++) {
        int rc = 0;
        if (a->cap != UINT64_MAX && a->total + (i - begin + 1) * s->page > a->cap)
            rc = ts_err_set(err, TS_ENOSPC, "pytorch: capacity reached");
        else
            rc = alloc_memdev_create(a->dev, s->page, &s->handles[i], err);
        if (rc != 0) {
            for (size_t j = begin; j < i; j++) {
                alloc_memdev_release(a->dev, s->handles[j], s->page, NULL);
                s->handles[j] = 0;
            }
            s->handles[i] = 0;
            return 0;
        }
    }
    for (size_t i = begin; i < end; i++)
        if (alloc_memdev_map(a->dev, s->addr + i * s->page, s->page, s->handles[i], err) != 0)
            return 0;
    if (alloc_memdev_set_access(a->dev, *mapped_at, (end - begin) * s->page, err) != 0)
        return 0;
    return (end - begin) * s->page;
}

/* map_block */
static int map_block(pt *a, pt_block *to_map, uint64_t size, ts_err *err)
{
    pt_pool *pool = to_map->pool;
    uint64_t at = 0;
    uint64_t got = seg_map(a, to_map->seg, to_map->addr, size, &at, err);
    if (!got)
        return 0;
    pt_unmapped_erase(pool, to_map);
    to_map->mapped = 1;
    if (got < to_map->size) {
        pt_block *rest = pt_block_new(a, to_map->addr + got, to_map->size - got, to_map->stream,
                                      pool, to_map->seg);
        if (!rest) {
            ts_err_set(err, TS_ENOMEM, "pytorch: out of host memory");
            return 0;
        }
        rest->mapped = 0;
        pt_link_after(rest, to_map);
        pt_unmapped_insert(pool, rest);
        to_map->size = got;
    }
    pt_try_merge(to_map, to_map->prev);
    pt_try_merge(to_map, to_map->next);
    pt_blocks_insert(pool, to_map);
    a->total += got;
    alloc_stats_reserve(a->st, (int64_t)got);
    a->st->segment_allocs++;
    a->st->segment_alloc_bytes += got;
    return 1;
}

pt_block *pt_try_allocate_expandable(pt *a, pt_pool *pool, uint64_t stream, uint64_t size,
                                     ts_err *err)
{
    ts_err_set(err, TS_ENOSPC, "pytorch: device out of memory");
    pt_block *c = find_expandable_block(a, pool, stream, size, err);
    if (!c)
        return NULL;
    if (!c->mapped && !map_block(a, c, c->size < size ? c->size : size, err))
        return NULL;
    while (c->size < size) {
        /* c is free and mapped, followed by unmapped space: map some of it,
         * which merges c into the newly mapped block */
        pt_block *next = c->next;
        uint64_t rest = size - c->size;
        if (!map_block(a, next, rest < next->size ? rest : next->size, err))
            return NULL;
        c = next;
    }
    pt_blocks_erase(pool, c);
    return c;
}

/* ExpandableSegment::unmap: whole pages inside [addr, addr + size). */
static uint64_t seg_unmap(pt *a, pt_seg *s, uint64_t addr, uint64_t size, uint64_t *at,
                          ts_err *err)
{
    size_t begin = (size_t)((addr - s->addr + s->page - 1) / s->page);
    size_t end = (size_t)((addr + size - s->addr) / s->page);
    *at = s->addr + begin * s->page;
    if (begin >= end)
        return 0;
    if (alloc_memdev_stream_sync(a->dev, s->stream, err) != 0)
        return 0;
    for (size_t i = begin; i < end; i++) {
        if (alloc_memdev_unmap(a->dev, s->addr + i * s->page, s->page, err) != 0 ||
            alloc_memdev_release(a->dev, s->handles[i], s->page, err) != 0)
            return 0;
        s->handles[i] = 0;
    }
    return (end - begin) * s->page;
}

int pt_unmap_block(pt *a, pt_block *b, ts_err *err)
{
    uint64_t at = 0;
    ts_err e2;
    e2.code = 0;
    uint64_t got = seg_unmap(a, b->seg, b->addr, b->size, &at, &e2);
    if (!got)
        return e2.code ? ts_err_set(err, e2.code, "%s", e2.msg) : 0;
    pt_pool *pool = b->pool;
    pt_blocks_erase(pool, b);
    uint64_t before = at - b->addr;
    if (before) {
        pt_block *lo = pt_block_new(a, b->addr, before, b->stream, pool, b->seg);
        if (!lo)
            return ts_err_set(err, TS_ENOMEM, "pytorch: out of host memory");
        pt_link_before(lo, b);
        pt_blocks_insert(pool, lo);
    }
    uint64_t after = b->size - before - got;
    if (after) {
        pt_block *hi = pt_block_new(a, at + got, after, b->stream, pool, b->seg);
        if (!hi)
            return ts_err_set(err, TS_ENOMEM, "pytorch: out of host memory");
        pt_link_after(hi, b);
        pt_blocks_insert(pool, hi);
    }
    b->addr = at;
    b->size = got;
    b->mapped = 0;
    pt_try_merge(b, b->prev);
    pt_try_merge(b, b->next);
    pt_unmapped_insert(pool, b);
    a->total -= got;
    alloc_stats_reserve(a->st, -(int64_t)got);
    a->st->segment_frees++;
    a->st->segment_free_bytes += got;
    return 0;
}

int pt_release_expandable_segment(pt *a, pt_block *b, ts_err *err)
{
    pt_seg *s = b->seg;
    int rc = alloc_memdev_va_free(a->dev, s->addr, s->size, err);
    if (rc != 0)
        return rc;
    pt_unmapped_erase(b->pool, b);
    pt_block_delete(b);
    pt_seg_delete(a, s);
    return 0;
}

void pt_expandable_destroy(pt *a, pt_seg *s)
{
    for (size_t i = 0; i < s->npages; i++) {
        if (!s->handles[i])
            continue;
        alloc_memdev_unmap(a->dev, s->addr + i * s->page, s->page, NULL);
        alloc_memdev_release(a->dev, s->handles[i], s->page, NULL);
    }
    alloc_memdev_va_free(a->dev, s->addr, s->size, NULL);
}
