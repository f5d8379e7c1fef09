/*
 * pytorch.h - internal: the data of the PyTorch caching-allocator model
 * (pytorch.c: pools, best fit, split, merge, events, OOM retries;
 * pytorch_expandable.c: expandable segments), shared by its two files.
 *
 * Blocks cover segments exactly and are linked by address inside their
 * segment. A free, mapped block sits in its pool's `blocks` tree ordered
 * (stream, size, address) - the order of the source's BlockComparatorSize,
 * so a lower_bound is its best fit; an unmapped block of an expandable
 * segment sits in `unmapped`, ordered (stream, address). Allocated blocks
 * are in `active` by address.
 */
#ifndef TS_ALLOC_PYTORCH_H
#define TS_ALLOC_PYTORCH_H

#include "alloc/internal.h"
#include "alloc/ptrmap.h"
#include "alloc/tree.h"

#define PT_MIN_BLOCK_BYTES 512ull              /* kMinBlockSize: rounding and small split */
#define PT_SMALL_SIZE_BYTES (1ull << 20)       /* kSmallSize: largest small-pool request */
#define PT_SMALL_BUFFER_BYTES (2ull << 20)     /* kSmallBuffer: small segment / page */
#define PT_LARGE_BUFFER_BYTES (20ull << 20)    /* kLargeBuffer: mid-size segment / page */
#define PT_MIN_LARGE_ALLOC_BYTES (10ull << 20) /* kMinLargeAlloc */
#define PT_ROUND_LARGE_BYTES (2ull << 20)      /* kRoundLarge */

typedef struct pt_pool {
    ts_tree blocks;   /* free mapped blocks: (stream, size, addr) */
    ts_tree unmapped; /* expandable: unmapped blocks: (stream, addr) */
    int is_small;
} pt_pool;

typedef struct pt_seg {
    uint64_t addr, size, stream;
    int expandable;
    uint64_t page;     /* expandable: page size */
    uint64_t *handles; /* expandable: per page, 0 = not mapped */
    size_t npages;
    size_t index;      /* in pt.segs */
} pt_seg;

typedef struct pt_block {
    ts_tnode node;
    uint64_t addr, size, requested, stream;
    struct pt_block *prev, *next;
    pt_seg *seg;
    pt_pool *pool;
    int allocated, mapped, in_tree;
    int event_count;
    uint64_t *uses; /* streams it was recorded on (record_stream) */
    int nuses;
} pt_block;

typedef struct pt_pending { /* an event that holds a freed block */
    uint64_t event;
    pt_block *b;
    struct pt_pending *next;
} pt_pending;

typedef struct pt_stream_q {
    pt_pending *head, *tail;
} pt_stream_q;

typedef struct pt {
    ts_memdev *dev;
    ts_memalloc_stats *st;
    int expandable;
    uint64_t max_split;   /* UINT64_MAX = unlimited */
    uint64_t cap;         /* allowed_memory_maximum; UINT64_MAX = none */
    uint64_t dev_total;   /* the device's memory (expandable address space) */
    uint64_t total;       /* total_allocated_memory: bytes from the device */
    pt_pool small, large;
    ts_ptrmap active;     /* addr -> allocated pt_block */
    pt_seg **segs;
    size_t nsegs, capsegs;
    ts_ptrmap queues;     /* stream + 1 -> pt_stream_q */
    size_t npending;
} pt;

pt_block *pt_block_new(pt *a, uint64_t addr, uint64_t size, uint64_t stream, pt_pool *pool,
                       pt_seg *seg);
void pt_block_delete(pt_block *b);
pt_seg *pt_seg_new(pt *a, uint64_t addr, uint64_t size, uint64_t stream);
void pt_seg_delete(pt *a, pt_seg *s);
/* Puts nb into b's segment list right before (after) b. */
void pt_link_before(pt_block *nb, pt_block *b);
void pt_link_after(pt_block *nb, pt_block *b);
void pt_blocks_insert(pt_pool *p, pt_block *b);
void pt_blocks_erase(pt_pool *p, pt_block *b);
void pt_unmapped_insert(pt_pool *p, pt_block *b);
void pt_unmapped_erase(pt_pool *p, pt_block *b);
/* Merges src into dst if src is free and alike; returns the bytes taken. */
uint64_t pt_try_merge(pt_block *dst, pt_block *src);

/* pytorch_expandable.c */
pt_block *pt_try_allocate_expandable(pt *a, pt_pool *pool, uint64_t stream, uint64_t size,
                                     ts_err *err);
int pt_unmap_block(pt *a, pt_block *b, ts_err *err);
int pt_release_expandable_segment(pt *a, pt_block *b, ts_err *err);
void pt_expandable_destroy(pt *a, pt_seg *s);

#endif
