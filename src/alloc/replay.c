/*
 * replay.c - plays a ts_memtrace through one allocator on a simulated device
 * and measures it: peaks of requested and reserved bytes, fragmentation,
 * device calls, the model's segment allocations against the trace's, and,
 * when the caller passes a clock, the cost of each call.
 *
 * Cold start (every allocator): the blocks live before recording are
 * allocated first, in address order, then the events are played; a free is
 * paired with the live allocation the trace has at that address. Warm start
 * (the PyTorch model only): the allocator starts as the recorded one did -
 * the recorded segments (those at the end, less those the trace allocates)
 * adopted at their own addresses and the live blocks placed in them - and the
 * device hands out a segment the trace allocates at the trace's address, so
 * every allocation can be compared with where the real allocator put it.
 *
 * A live block whose size was not recorded (freed in the window) is taken as
 * its 512-rounded request, plus the gap to the next block when that gap is at
 * most 1 MiB in a large-pool segment: the real allocator never leaves such a
 * free block there (it would have been left unsplit), so the block owns it.
 * When free space follows instead, the block ends where the trace first
 * allocates above it, if that is within 1 MiB (the same unsplit remainder).
 */
#include <stdlib.h>
#include <string.h>

#include "alloc/ptrmap.h"
#include "tessera/alloc.h"

#define REPLAY_ROUND_BYTES 512ull
#define REPLAY_UNSPLIT_MAX_BYTES (1ull << 20)
#define REPLAY_HEADROOM_BYTES (4ull << 30)
#define REPLAY_PAGE_BYTES (2ull << 20)

static uint64_t round_up(uint64_t x, uint64_t m)
{
    return (x + m - 1) / m * m;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, size_t n)
{
    if (!n)
        return 0;
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static const ts_memtrace_seg *seg_of(const ts_memtrace_seg *segs, size_t n, uint64_t addr)
{
    for (size_t i = 0; i < n; i++)
        if (addr >= segs[i].addr && addr < segs[i].addr + segs[i].size)
            return &segs[i];
    return NULL;
}

/* Where a large-pool block of unknown size, live from the start at addr and
 * at least end long, really ends: the free space after it begins where the
 * trace first allocates above it (while it is live) if that is within 1 MiB
 * of end - the block then kept an unsplit remainder. */
static uint64_t unsplit_end(const ts_memtrace *t, uint64_t addr, uint64_t end)
{
    for (size_t j = 0; j < t->nev; j++) {
        const ts_memtrace_ev *e = &t->ev[j];
        if (e->op == TS_MEMTRACE_FREE && e->addr == addr)
            break;
        if (e->op != TS_MEMTRACE_ALLOC || e->addr < end)
            continue;
        if (e->addr == end)
            return end;
        if (e->addr - end <= REPLAY_UNSPLIT_MAX_BYTES)
            return e->addr;
    }
    return end;
}

/* The recorded allocator's state when recording began. */
static int warm_start(const ts_memtrace *t, ts_memalloc *a, ts_ptrmap *map, ts_err *err)
{
    ts_memtrace_seg *start = calloc(t->nseg + 1, sizeof *start);
    if (!start)
        return ts_err_set(err, TS_ENOMEM, "replay: out of memory");
    size_t ns = 0;
    for (size_t i = 0; i < t->nseg; i++) {
        int made_in_window = 0;
        for (size_t j = 0; j < t->nev && !made_in_window; j++)
            made_in_window = t->ev[j].op == TS_MEMTRACE_SEGMENT_ALLOC && t->ev[j].addr == t->seg[i].addr;
        if (!made_in_window)
            start[ns++] = t->seg[i];
    }
    int rc = 0;
    for (size_t i = 0; i < ns && rc == 0; i++)
        rc = ts_memalloc_adopt_segment(a, start[i].addr, start[i].size, start[i].stream,
                                       start[i].small_pool, err);
    for (size_t i = 0; i < t->nlive && rc == 0; i++) {
        const ts_memtrace_live *l = &t->live[i];
        const ts_memtrace_seg *s = seg_of(start, ns, l->addr);
        if (!s) {
            rc = ts_err_set(err, TS_EINVAL, "replay: live block %#llx lies in no recorded segment",
                            (unsigned long long)l->addr);
            break;
        }
        uint64_t size = l->block_size;
        if (!size) {
            size = round_up(l->requested, REPLAY_ROUND_BYTES);
            uint64_t next = s->addr + s->size;
            if (i + 1 < t->nlive && t->live[i + 1].addr < next)
                next = t->live[i + 1].addr;
            uint64_t gap = next > l->addr + size ? next - (l->addr + size) : 0;
            if (!s->small_pool && gap <= REPLAY_UNSPLIT_MAX_BYTES)
                size += gap;
            else if (!s->small_pool)
                size = unsplit_end(t, l->addr, l->addr + size) - l->addr;
        }
        rc = ts_memalloc_adopt_block(a, l->addr, size, l->requested, l->stream, err);
        if (rc == 0)
            rc = alloc_ptrmap_put(map, l->addr, (void *)(uintptr_t)l->addr);
    }
    free(start);
    return rc;
}

static int cold_start(const ts_memtrace *t, ts_memalloc *a, ts_ptrmap *map, ts_err *err)
{
    for (size_t i = 0; i < t->nlive; i++) {
        uint64_t p = 0;
        int rc = ts_memalloc_malloc(a, t->live[i].requested, t->live[i].stream, &p, err);
        if (rc != 0)
            return ts_err_prefix(err, "initial live block %zu: ", i);
        rc = alloc_ptrmap_put(map, t->live[i].addr, (void *)(uintptr_t)p);
        if (rc != 0)
            return ts_err_set(err, rc, "replay: out of memory");
    }
    return 0;
}

static int play(const ts_memtrace *t, const ts_memreplay_opts *o, ts_memalloc *a, ts_memdev *dev,
                ts_ptrmap *map, ts_memreplay_result *r, ts_err *err)
{
    double *at = NULL, *ft = NULL;
    size_t na = 0, nf = 0;
    double total_ns = 0;
    if (o->clock_ns) {
        at = malloc((t->nev + 1) * sizeof *at);
        ft = malloc((t->nev + 1) * sizeof *ft);
        if (!at || !ft) {
            free(at);
            free(ft);
            return ts_err_set(err, TS_ENOMEM, "replay: out of memory");
        }
    }
    int rc = 0;
    uint64_t half_calls = 0, half_ops = 0;
    for (size_t i = 0; i < t->nev && rc == 0; i++) {
        const ts_memtrace_ev *e = &t->ev[i];
        if (i == t->nev / 2) {
            ts_memdev_stats ds;
            ts_memdev_get_stats(dev, &ds);
            half_calls = ts_memdev_stats_vmm_calls(&ds);
            half_ops = r->allocs + r->frees;
        }
        if (e->op == TS_MEMTRACE_SEGMENT_ALLOC) {
            r->trace_segment_allocs++;
            r->trace_segment_alloc_bytes += e->size;
            if (o->warm)
                ts_memdev_sim_next_addr(dev, e->addr, e->size);
        } else if (e->op == TS_MEMTRACE_ALLOC) {
            uint64_t p = 0, t0 = o->clock_ns ? o->clock_ns() : 0;
            rc = ts_memalloc_malloc(a, e->size, e->stream, &p, err);
            if (o->clock_ns) {
                at[na] = (double)(o->clock_ns() - t0);
                total_ns += at[na++];
            }
            if (rc == TS_ENOSPC) {
                r->oom = 1;
                r->oom_seq = e->seq;
                r->oom_size = e->size;
                rc = 0;
                break;
            }
            if (rc != 0)
                ts_err_prefix(err, "event seq %lld: ", (long long)e->seq);
            else
                rc = alloc_ptrmap_put(map, e->addr, (void *)(uintptr_t)p);
            r->allocs++;
            r->addr_matches += o->warm && p == e->addr;
        } else if (e->op == TS_MEMTRACE_FREE) {
            uint64_t p = (uint64_t)(uintptr_t)alloc_ptrmap_del(map, e->addr);
            if (!p) {
                rc = ts_err_set(err, TS_EINVAL, "event seq %lld: free of %#llx, which is not live",
                                (long long)e->seq, (unsigned long long)e->addr);
                break;
            }
            uint64_t t0 = o->clock_ns ? o->clock_ns() : 0;
            rc = ts_memalloc_free(a, p, e->stream, err);
            if (o->clock_ns) {
                ft[nf] = (double)(o->clock_ns() - t0);
                total_ns += ft[nf++];
            }
            r->frees++;
        }
    }
    ts_memdev_stats ds;
    ts_memdev_get_stats(dev, &ds);
    r->device_calls_late = ts_memdev_stats_vmm_calls(&ds) - half_calls;
    r->ops_late = r->allocs + r->frees - half_ops;
    if (o->clock_ns) {
        r->mean_op_ns = na + nf ? total_ns / (double)(na + nf) : 0;
        r->median_alloc_ns = median(at, na);
        r->median_free_ns = median(ft, nf);
    }
    free(at);
    free(ft);
    return rc;
}

int ts_memreplay_run(const ts_memtrace *t, const ts_memreplay_opts *o, ts_memreplay_result *r,
                     ts_err *err)
{
    memset(r, 0, sizeof *r);
    if (o->warm && (o->kind != TS_MEMALLOC_PYTORCH || !t->nseg))
        return ts_err_set(err, TS_EINVAL, "warm: needs the pytorch model and recorded segments");
    r->peak_requested = ts_memtrace_peak_requested(t);
    for (size_t i = 0; i < t->nseg; i++)
        r->trace_reserved_end += t->seg[i].size;
    uint64_t cap = o->capacity_bytes;
    if (!cap) /* unlimited: far more than any allocator will hold */
        cap = round_up(8 * (r->peak_requested + r->trace_reserved_end), REPLAY_PAGE_BYTES) +
              REPLAY_HEADROOM_BYTES;
    ts_memdev_sim_config dc = {.capacity_bytes = cap, .backed = 0};
    ts_memdev *dev = NULL;
    int rc = ts_memdev_sim_new(&dc, &dev, err);
    if (rc != 0)
        return rc;
    ts_memalloc_config ac = {.kind = o->kind, .capacity_bytes = o->capacity_bytes};
    ts_memalloc *a = NULL;
    rc = ts_memalloc_new(&ac, dev, &a, err);
    if (rc != 0) {
        ts_memdev_free(dev);
        return rc;
    }
    ts_ptrmap map;
    alloc_ptrmap_init(&map);
    rc = o->warm ? warm_start(t, a, &map, err) : cold_start(t, a, &map, err);
    if (rc == TS_ENOSPC) {
        r->oom = 1;
        r->oom_seq = -1;
        rc = 0;
    } else if (rc == 0) {
        ts_memalloc_stats s0;
        ts_memalloc_get_stats(a, &s0);
        rc = play(t, o, a, dev, &map, r, err);
        ts_memalloc_get_stats(a, &r->stats);
        r->model_segment_allocs = r->stats.segment_allocs - s0.segment_allocs;
        r->model_segment_alloc_bytes = r->stats.segment_alloc_bytes - s0.segment_alloc_bytes;
        r->device_calls = ts_memdev_stats_vmm_calls(&r->stats.dev) -
                          ts_memdev_stats_vmm_calls(&s0.dev);
    }
    ts_memalloc_get_stats(a, &r->stats);
    r->peak_reserved = r->stats.peak_reserved_bytes;
    r->reserved_end = r->stats.reserved_bytes;
    /* a replay that ran out of memory never reached the trace's peak: no figure */
    r->fragmentation = r->peak_reserved && !r->oom
                           ? 1.0 - (double)r->peak_requested / (double)r->peak_reserved
                           : 0;
    alloc_ptrmap_destroy(&map);
    ts_memalloc_destroy(a);
    ts_memdev_free(dev);
    return rc;
}
