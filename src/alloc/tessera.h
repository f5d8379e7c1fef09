/*
 * tessera.h - internal: the data of the tessera allocator, shared by
 * tessera.c (blocks, the fast paths, frees, streams) and tessera_grow.c
 * (granules, small-pool granules, stitching, the stitched-range cache,
 * empty_cache).
 *
 * Physical memory is 2 MiB granules. Granule i, while it exists, is mapped at
 * slot i of the "home" virtual range, so neighbouring granules form
 * contiguous runs in which blocks of any size live at byte offsets (`off`,
 * from the home base). A granule is either large (its bytes belong to the
 * large pool, whose blocks span granule boundaries freely) or small (a 2 MiB
 * box of requests <= 1 MiB that never leave it, so small blocks never pin a
 * large region). A large request that no free large block holds is
 * "stitched": free whole granules, plus a free tail at the start of one
 * granule and a free head at the end of another, mapped side by side into a
 * second reserved range - no byte moves, no new memory while enough is free.
 *
 * Every large block, free or used, is in `addr` (by offset) and linked to its
 * neighbours in the same run; free blocks are also in `large_free` or
 * `small_free` by (length, offset): best fit, lowest address on ties.
 */
#ifndef TS_ALLOC_TESSERA_H
#define TS_ALLOC_TESSERA_H

#include "alloc/internal.h"
#include "alloc/ptrmap.h"
#include "alloc/tree.h"

#define TS_G TS_MEM_GRANULE_BYTES
#define TESS_ALIGN_BYTES 512ull
#define TESS_SMALL_MAX_BYTES (1ull << 20) /* requests up to this go to small granules */
#define TESS_SIDX_CLEAN 0u                /* memory no stream has used yet */
#define TESS_CACHE_MAX_RANGES 256         /* stitched ranges kept mapped after their free */

enum { GR_ABSENT = 0, GR_LARGE = 1, GR_SMALL = 2 };

struct tess_alloc;

typedef struct tess_blk {
    ts_tnode fnode; /* free: large_free or small_free, key (len, off) */
    ts_tnode anode; /* large pool only: addr, key (off) */
    uint64_t off, len;
    struct tess_blk *prev, *next; /* byte neighbours in the same run / granule */
    struct tess_alloc *owner;     /* NULL when free */
    uint64_t epoch;               /* free: the freeing stream's free count then */
    uint32_t sidx;                /* free: index + 1 of the stream that freed it */
    uint8_t small, mixed;         /* mixed: merged from frees of several streams */
    uint8_t in_free;              /* in its free tree */
} tess_blk;

typedef struct tess_piece { /* one slot of a stitched range */
    uint64_t gran;          /* granule mapped there */
    uint64_t lo, hi;        /* bytes of the granule the allocation uses */
    tess_blk *blk;          /* while live: the home block holding them */
} tess_piece;

typedef struct tess_range {
    uint64_t va;            /* slot 0 in the stitch range */
    uint64_t nslots;
    uint64_t size;          /* rounded size it serves */
    tess_piece *pieces;     /* nslots of them */
    struct tess_range *lru_prev, *lru_next; /* cached: most recent first */
    struct tess_range *same_next;           /* cached: same size */
    int cached;
} tess_range;

typedef struct tess_alloc {
    uint64_t ptr, size, requested, stream;
    tess_blk *blk;          /* contiguous in the home range */
    tess_range *range;      /* or stitched */
    uint64_t *uses;         /* streams recorded with record_stream */
    int nuses;
    int pending;            /* events still to complete after the free */
    uint64_t *events;
    struct tess_alloc *pend_next;
} tess_alloc;

typedef struct tess_stream {
    uint64_t id, epoch; /* frees made on it so far */
    uint32_t index;
} tess_stream;

typedef struct tess {
    ts_memdev *dev;
    ts_memalloc_stats *st;
    uint64_t nslots;        /* home slots = capacity / granule */
    uint64_t home_va, stitch_va;
    uint8_t *mode;          /* per slot: GR_* */
    uint64_t *handle;       /* per slot */
    uint64_t present, cap_slots;
    uint8_t *stitch_used;   /* per stitch slot */
    ts_tree large_free, small_free, addr;
    ts_ptrmap allocs;       /* ptr -> tess_alloc */
    ts_ptrmap streams;      /* id + 1 -> tess_stream */
    tess_stream **svec;     /* by index */
    uint32_t nstreams, capstreams;
    uint64_t *waited;       /* [waiter * capstreams + source]: source epoch waited for */
    tess_stream *last;      /* the stream looked up last */
    tess_alloc *pend_head;  /* freed, waiting for record_stream events */
    size_t npending;
    ts_ptrmap cache;        /* size -> first cached tess_range of that size */
    tess_range *lru_head, *lru_tail;
    size_t ncached;
    tess_blk *blk_pool;     /* recycled blocks, linked by next */
    tess_alloc *alloc_pool; /* recycled records, linked by pend_next */
} tess;

/* tessera.c */
/* Blocks and allocation records come from per-allocator free lists. */
tess_blk *tess_blk_new(tess *a, uint64_t off, uint64_t len, int small);
void tess_blk_put(tess *a, tess_blk *b);
void tess_free_insert(tess *a, tess_blk *b);
void tess_free_erase(tess *a, tess_blk *b);
/* Cuts [off, off + len) out of free block b (which holds it); returns the
 * block for exactly those bytes (still free, in no free tree). */
tess_blk *tess_carve(tess *a, tess_blk *b, uint64_t off, uint64_t len);
/* Marks block b (in no free tree) free on stream and merges it with free
 * neighbours; returns the merged block, in its free tree. */
tess_blk *tess_release_blk(tess *a, tess_blk *b, uint32_t sidx, uint64_t epoch, int mixed);
/* Free large block holding byte off, NULL if that byte is not free. */
tess_blk *tess_free_at(tess *a, uint64_t off);
/* Orders stream after the frees that made b free (stream waits). */
int tess_order_after(tess *a, uint64_t stream, const tess_blk *b, ts_err *err);
/* Takes size bytes from the start of free block n (its fnode) for al, stream
 * ordered after the frees that made it free: al's block and pointer set. */
int tess_take_block(tess *a, ts_tnode *n, uint64_t size, uint64_t stream, tess_alloc *al,
                    ts_err *err);
int tess_sync_pending(tess *a, ts_err *err);

/* tessera_grow.c */
int tess_large_slow(tess *a, uint64_t size, uint64_t stream, tess_alloc *al, ts_err *err);
int tess_small_granule(tess *a, ts_err *err);
int tess_cache_take(tess *a, uint64_t size, uint64_t stream, tess_alloc *al, ts_err *err);
int tess_range_free(tess *a, tess_alloc *al, uint32_t sidx, uint64_t epoch, ts_err *err);
int tess_empty_cache(void *impl, ts_err *err);
void tess_teardown(tess *a);

#endif
