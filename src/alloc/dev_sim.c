/*
 * dev_sim.c - the simulated device: the driver's memory calls with the rules
 * the driver enforces, so an allocator that would fail on a GPU fails here.
 *
 * Rules checked: a mapping lies inside one reservation, on 2 MiB pages not
 * already mapped, and maps a whole live handle; an unmap covers whole
 * mappings; a reservation is freed whole and unmapped; physical memory
 * (cuMemAlloc + cuMemCreate) never exceeds the capacity (the call fails with
 * TS_ENOSPC, as the driver's CUDA_ERROR_OUT_OF_MEMORY). Streams run at once
 * unless held; an event completes when its stream has run past it.
 *
 * Two modes. Unbacked: addresses are numbers from 2^40 up, nothing is
 * touched, any capacity works (replaying 24 GiB traces). Backed: physical
 * memory is one memfd of the capacity, a reservation is a PROT_NONE mmap and
 * cuMemMap maps the handle's file range there with MAP_FIXED, so tests can
 * write through every pointer and see aliasing bugs as corrupted data.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "alloc/dev.h"
#include "alloc/ptrmap.h"
#include "alloc/tree.h"

#define SIM_PAGE_BYTES (2ull << 20)  /* the driver's mapping granularity */
#define SIM_VA_BASE (1ull << 40)     /* first unbacked address */
#define SIM_MALLOC_ALIGN_BYTES (2ull << 20)

struct sim_handle {
    uint64_t size, file_off;
    int maps;
    int live;
};

struct sim_map {
    uint64_t va, size, handle;
};

struct sim_resv {
    ts_tnode node; /* key: va */
    uint64_t va, size;
};

struct sim_stream {
    int held;
    uint64_t recorded, completed;
};

struct sim_event {
    uint64_t stream, seq;
    int live, recorded;
};

typedef struct sim {
    ts_memdev *dev; /* back pointer for the public sim controls */
    uint64_t capacity, used;
    int backed, fd;
    uint8_t *unit_used; /* backed: file units of SIM_PAGE_BYTES in use */
    size_t nunits;
    uint64_t next_va;
    uint64_t hint_addr, hint_size;
    ts_ptrmap mallocs;  /* ptr -> size (as a pointer-sized integer) */
    ts_tree resv;       /* reservations by address */
    ts_ptrmap pages;    /* page number -> struct sim_map */
    struct sim_handle *h;
    size_t nh, caph;
    uint64_t *hfree;    /* recycled handle indices */
    size_t nhfree;
    ts_ptrmap streams;  /* stream + 1 -> struct sim_stream */
    struct sim_event *ev;
    size_t nev, capev;
    uint64_t *evfree;
    size_t nevfree;
    uint64_t mapped_bytes, live_handles, live_events;
} sim;

static uint64_t round_up(uint64_t x, uint64_t m)
{
    return (x + m - 1) / m * m;
}

static int bad(ts_err *err, const char *what)
{
    return ts_err_set(err, TS_EINVAL, "simulated device: %s", what);
}

static void *u2p(uint64_t v)
{
    return (void *)(uintptr_t)v;
}

static uint64_t p2u(const void *p)
{
    return (uint64_t)(uintptr_t)p;
}

static int sim_reserve_space(sim *s, uint64_t size, uint64_t align, uint64_t *va)
{
    if (!s->backed) {
        s->next_va = round_up(s->next_va, align < SIM_PAGE_BYTES ? SIM_PAGE_BYTES : align);
        *va = s->next_va;
        s->next_va += round_up(size, SIM_PAGE_BYTES) + SIM_PAGE_BYTES; /* guard gap */
        return 0;
    }
    if (align < SIM_PAGE_BYTES)
        align = SIM_PAGE_BYTES;
    void *p = mmap(NULL, size + align, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (p == MAP_FAILED)
        return TS_ENOMEM;
    uint64_t base = p2u(p), start = round_up(base, align);
    if (start > base)
        munmap(p, start - base);
    uint64_t tail = base + size + align - (start + size);
    if (tail)
        munmap(u2p(start + size), tail);
    *va = start;
    return 0;
}

static int sim_mem_alloc(void *impl, uint64_t size, uint64_t *ptr, ts_err *err)
{
    sim *s = impl;
    if (!size)
        return bad(err, "cuMemAlloc: size 0");
    if (s->used + size > s->capacity)
        return ts_err_set(err, TS_ENOSPC, "simulated device: out of memory (%llu + %llu > %llu)",
                          (unsigned long long)s->used, (unsigned long long)size,
                          (unsigned long long)s->capacity);
    uint64_t p;
    if (s->backed) {
        void *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED)
            return ts_err_set(err, TS_ENOMEM, "simulated device: host mmap failed");
        p = p2u(m);
    } else if (s->hint_addr && s->hint_size == size) {
        p = s->hint_addr;
        s->hint_addr = 0;
    } else {
        s->next_va = round_up(s->next_va, SIM_MALLOC_ALIGN_BYTES);
        p = s->next_va;
        s->next_va += round_up(size, SIM_MALLOC_ALIGN_BYTES) + SIM_MALLOC_ALIGN_BYTES;
    }
    if (alloc_ptrmap_get(&s->mallocs, p))
        return bad(err, "cuMemAlloc: address already allocated");
    if (alloc_ptrmap_put(&s->mallocs, p, u2p(size)) != 0)
        return ts_err_set(err, TS_ENOMEM, "simulated device: out of host memory");
    s->used += size;
    *ptr = p;
    return 0;
}

static int sim_mem_free(void *impl, uint64_t ptr, uint64_t size, ts_err *err)
{
    sim *s = impl;
    void *v = alloc_ptrmap_get(&s->mallocs, ptr);
    if (!v)
        return bad(err, "cuMemFree: not an allocation");
    if (p2u(v) != size)
        return bad(err, "cuMemFree: size differs from the allocation's");
    alloc_ptrmap_del(&s->mallocs, ptr);
    if (s->backed)
        munmap(u2p(ptr), size);
    s->used -= size;
    return 0;
}

static int sim_va_reserve(void *impl, uint64_t size, uint64_t align, uint64_t *va, ts_err *err)
{
    sim *s = impl;
    if (!size || size % SIM_PAGE_BYTES)
        return bad(err, "cuMemAddressReserve: size must be a multiple of the granularity");
    if (align & (align - 1))
        return bad(err, "cuMemAddressReserve: alignment must be a power of two");
    struct sim_resv *r = calloc(1, sizeof *r);
    if (!r || sim_reserve_space(s, size, align, va) != 0) {
        free(r);
        return ts_err_set(err, TS_ENOMEM, "simulated device: cannot reserve %llu bytes",
                          (unsigned long long)size);
    }
    r->va = *va;
    r->size = size;
    r->node.k[0] = r->va;
    alloc_tree_insert(&s->resv, &r->node);
    return 0;
}

static struct sim_resv *resv_containing(sim *s, uint64_t va)
{
    ts_tnode *n = alloc_tree_floor(&s->resv, va, 0, 0);
    if (!n)
        return NULL;
    struct sim_resv *r = TS_CONTAINER_OF(n, struct sim_resv, node);
    return va < r->va + r->size ? r : NULL;
}

static int sim_va_free(void *impl, uint64_t va, uint64_t size, ts_err *err)
{
    sim *s = impl;
    struct sim_resv *r = resv_containing(s, va);
    if (!r || r->va != va || r->size != size)
        return bad(err, "cuMemAddressFree: not a whole reservation");
    for (uint64_t p = va / SIM_PAGE_BYTES; p < (va + size) / SIM_PAGE_BYTES; p++)
        if (alloc_ptrmap_get(&s->pages, p))
            return bad(err, "cuMemAddressFree: range still mapped");
    alloc_tree_remove(&s->resv, &r->node);
    if (s->backed)
        munmap(u2p(va), size);
    free(r);
    return 0;
}

static int file_units_take(sim *s, size_t n, size_t *first)
{
    size_t run = 0;
    for (size_t i = 0; i < s->nunits; i++) {
        run = s->unit_used[i] ? 0 : run + 1;
        if (run == n) {
            *first = i + 1 - n;
            memset(s->unit_used + *first, 1, n);
            return 0;
        }
    }
    return -1;
}

#define SIM_FIRST_HANDLES 256
#define SIM_FIRST_EVENTS 64

/* A slot in a table whose freed indices are taken again first (the handles,
 * the events): *idx, a freed one from freev (*nfree of them), else the next
 * of the *n used, the items (item bytes each) and the freed indices
 * doubled together from first when full. -1 when out of memory (a part
 * moved keeps its contents; *cap stays what both hold). */
static int sim_slot_take(void **v, size_t item, size_t *n, size_t *cap, uint64_t **freev,
                         size_t *nfree, size_t first, uint64_t *idx)
{
    if (*nfree) {
        *idx = (*freev)[--*nfree];
        return 0;
    }
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : first;
        void *nv = realloc(*v, nc * item);
        uint64_t *nf = realloc(*freev, nc * sizeof *nf);
        if (nv)
            *v = nv;
        if (nf)
            *freev = nf;
        if (!nv || !nf)
            return -1;
        *cap = nc;
    }
    *idx = (*n)++;
    return 0;
}

static int sim_create(void *impl, uint64_t size, uint64_t *handle, ts_err *err)
{
    sim *s = impl;
    if (!size || size % SIM_PAGE_BYTES)
        return bad(err, "cuMemCreate: size must be a multiple of the granularity");
    if (s->used + size > s->capacity)
        return ts_err_set(err, TS_ENOSPC, "simulated device: out of memory (%llu + %llu > %llu)",
                          (unsigned long long)s->used, (unsigned long long)size,
                          (unsigned long long)s->capacity);
    uint64_t off = 0;
    size_t units = (size_t)(size / SIM_PAGE_BYTES), first = 0;
    if (s->backed) {
        if (file_units_take(s, units, &first) != 0)
            return ts_err_set(err, TS_ENOSPC, "simulated device: no contiguous backing left");
        off = (uint64_t)first * SIM_PAGE_BYTES;
    }
    uint64_t idx;
    if (sim_slot_take((void **)&s->h, sizeof *s->h, &s->nh, &s->caph, &s->hfree, &s->nhfree,
                      SIM_FIRST_HANDLES, &idx) != 0) {
        if (s->backed) /* the backing taken above goes back: nothing was written to it */
            memset(s->unit_used + first, 0, units);
        return ts_err_set(err, TS_ENOMEM, "simulated device: out of host memory");
    }
    s->h[idx] = (struct sim_handle){.size = size, .file_off = off, .maps = 0, .live = 1};
    s->used += size;
    s->live_handles++;
    *handle = idx + 1;
    return 0;
}

static struct sim_handle *handle_of(sim *s, uint64_t handle)
{
    if (!handle || handle > s->nh || !s->h[handle - 1].live)
        return NULL;
    return &s->h[handle - 1];
}

static int sim_release(void *impl, uint64_t handle, uint64_t size, ts_err *err)
{
    sim *s = impl;
    struct sim_handle *h = handle_of(s, handle);
    if (!h)
        return bad(err, "cuMemRelease: not a live handle");
    if (h->size != size)
        return bad(err, "cuMemRelease: size differs from the handle's");
    if (h->maps)
        return bad(err, "cuMemRelease: handle still mapped (memory would stay held)");
    if (s->backed) {
        memset(s->unit_used + h->file_off / SIM_PAGE_BYTES, 0, (size_t)(h->size / SIM_PAGE_BYTES));
        fallocate(s->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)h->file_off,
                  (off_t)h->size);
    }
    h->live = 0;
    s->used -= h->size;
    s->live_handles--;
    s->hfree[s->nhfree++] = handle - 1;
    return 0;
}

static int sim_map(void *impl, uint64_t va, uint64_t size, uint64_t handle, ts_err *err)
{
    sim *s = impl;
    struct sim_handle *h = handle_of(s, handle);
    if (!h)
        return bad(err, "cuMemMap: not a live handle");
    if (size != h->size)
        return bad(err, "cuMemMap: size must be the handle's");
    if (va % SIM_PAGE_BYTES)
        return bad(err, "cuMemMap: address not aligned to the granularity");
    struct sim_resv *r = resv_containing(s, va);
    if (!r || va + size > r->va + r->size)
        return bad(err, "cuMemMap: range not inside one reservation");
    for (uint64_t p = va / SIM_PAGE_BYTES; p < (va + size) / SIM_PAGE_BYTES; p++)
        if (alloc_ptrmap_get(&s->pages, p))
            return bad(err, "cuMemMap: range already mapped");
    struct sim_map *m = malloc(sizeof *m);
    if (!m)
        return ts_err_set(err, TS_ENOMEM, "simulated device: out of host memory");
    *m = (struct sim_map){.va = va, .size = size, .handle = handle};
    if (s->backed) {
        void *p = mmap(u2p(va), size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, s->fd,
                       (off_t)h->file_off);
        if (p == MAP_FAILED) {
            free(m);
            return ts_err_set(err, TS_EIO, "simulated device: host mmap of a handle failed");
        }
    }
    for (uint64_t p = va / SIM_PAGE_BYTES; p < (va + size) / SIM_PAGE_BYTES; p++)
        if (alloc_ptrmap_put(&s->pages, p, m) != 0)
            return ts_err_set(err, TS_ENOMEM, "simulated device: out of host memory");
    h->maps++;
    s->mapped_bytes += size;
    return 0;
}

static int sim_unmap(void *impl, uint64_t va, uint64_t size, ts_err *err)
{
    sim *s = impl;
    if (va % SIM_PAGE_BYTES || size % SIM_PAGE_BYTES || !size)
        return bad(err, "cuMemUnmap: range not aligned to the granularity");
    uint64_t p0 = va / SIM_PAGE_BYTES, p1 = (va + size) / SIM_PAGE_BYTES;
    for (uint64_t p = p0; p < p1; p++) {
        struct sim_map *m = alloc_ptrmap_get(&s->pages, p);
        if (!m)
            return bad(err, "cuMemUnmap: range not mapped");
        if (m->va < va || m->va + m->size > va + size)
            return bad(err, "cuMemUnmap: range cuts a mapping");
    }
    for (uint64_t p = p0; p < p1;) {
        struct sim_map *m = alloc_ptrmap_get(&s->pages, p);
        uint64_t np = (m->va + m->size) / SIM_PAGE_BYTES;
        for (uint64_t q = m->va / SIM_PAGE_BYTES; q < np; q++)
            alloc_ptrmap_del(&s->pages, q);
        s->h[m->handle - 1].maps--;
        s->mapped_bytes -= m->size;
        free(m);
        p = np;
    }
    if (s->backed)
        mmap(u2p(va), size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE,
             -1, 0);
    return 0;
}

static int sim_set_access(void *impl, uint64_t va, uint64_t size, ts_err *err)
{
    sim *s = impl;
    for (uint64_t p = va / SIM_PAGE_BYTES; p < round_up(va + size, SIM_PAGE_BYTES) / SIM_PAGE_BYTES;
         p++)
        if (!alloc_ptrmap_get(&s->pages, p))
            return bad(err, "cuMemSetAccess: range not fully mapped");
    return 0;
}

static struct sim_stream *stream_of(sim *s, uint64_t stream)
{
    struct sim_stream *st = alloc_ptrmap_get(&s->streams, stream + 1);
    if (st)
        return st;
    st = calloc(1, sizeof *st);
    if (!st || alloc_ptrmap_put(&s->streams, stream + 1, st) != 0) {
        free(st);
        return NULL;
    }
    return st;
}

static int sim_event_record(void *impl, uint64_t stream, uint64_t *event, ts_err *err)
{
    sim *s = impl;
    struct sim_stream *st = stream_of(s, stream);
    if (!st)
        return ts_err_set(err, TS_ENOMEM, "simulated device: out of host memory");
    uint64_t idx;
    if (sim_slot_take((void **)&s->ev, sizeof *s->ev, &s->nev, &s->capev, &s->evfree,
                      &s->nevfree, SIM_FIRST_EVENTS, &idx) != 0)
        return ts_err_set(err, TS_ENOMEM, "simulated device: out of host memory");
    st->recorded++;
    if (!st->held)
        st->completed = st->recorded;
    s->ev[idx] = (struct sim_event){.stream = stream, .seq = st->recorded, .live = 1,
                                    .recorded = 1};
    s->live_events++;
    *event = idx + 1;
    return 0;
}

static struct sim_event *event_of(sim *s, uint64_t event)
{
    if (!event || event > s->nev || !s->ev[event - 1].live)
        return NULL;
    return &s->ev[event - 1];
}

static int sim_event_query(void *impl, uint64_t event, int *done, ts_err *err)
{
    sim *s = impl;
    struct sim_event *e = event_of(s, event);
    if (!e)
        return bad(err, "cuEventQuery: not a live event");
    struct sim_stream *st = stream_of(s, e->stream);
    *done = st && st->completed >= e->seq;
    return 0;
}

static int sim_event_sync(void *impl, uint64_t event, ts_err *err)
{
    sim *s = impl;
    struct sim_event *e = event_of(s, event);
    if (!e)
        return bad(err, "cuEventSynchronize: not a live event");
    struct sim_stream *st = stream_of(s, e->stream);
    if (st && st->completed < e->seq)
        st->completed = e->seq; /* the host waited until the stream got there */
    return 0;
}

static void sim_event_release(void *impl, uint64_t event)
{
    sim *s = impl;
    struct sim_event *e = event_of(s, event);
    if (!e)
        return;
    e->live = 0;
    s->live_events--;
    s->evfree[s->nevfree++] = event - 1;
}

static int sim_stream_sync(void *impl, uint64_t stream, ts_err *err)
{
    sim *s = impl;
    struct sim_stream *st = stream_of(s, stream);
    if (!st)
        return ts_err_set(err, TS_ENOMEM, "simulated device: out of host memory");
    st->completed = st->recorded;
    return 0;
}

static int sim_stream_wait(void *impl, uint64_t stream, uint64_t event, ts_err *err)
{
    sim *s = impl;
    (void)stream;
    if (!event_of(s, event))
        return bad(err, "cuStreamWaitEvent: not a live event");
    return 0;
}

static void sim_destroy(void *impl)
{
    sim *s = impl;
    if (!s)
        return;
    size_t pos = 0;
    uint64_t key;
    void *val;
    /* mappings are shared by their pages: free each once, at its first page */
    while (alloc_ptrmap_next(&s->pages, &pos, &key, &val)) {
        struct sim_map *m = val;
        if (m->va / SIM_PAGE_BYTES == key)
            free(m);
    }
    alloc_ptrmap_destroy(&s->pages);
    pos = 0;
    while (alloc_ptrmap_next(&s->mallocs, &pos, &key, &val))
        if (s->backed)
            munmap(u2p(key), (size_t)p2u(val));
    alloc_ptrmap_destroy(&s->mallocs);
    pos = 0;
    while (alloc_ptrmap_next(&s->streams, &pos, &key, &val))
        free(val);
    alloc_ptrmap_destroy(&s->streams);
    ts_tnode *n;
    while ((n = alloc_tree_first(&s->resv)) != NULL) {
        struct sim_resv *r = TS_CONTAINER_OF(n, struct sim_resv, node);
        alloc_tree_remove(&s->resv, n);
        if (s->backed)
            munmap(u2p(r->va), r->size);
        free(r);
    }
    if (s->fd >= 0)
        close(s->fd);
    free(s->unit_used);
    free(s->h);
    free(s->hfree);
    free(s->ev);
    free(s->evfree);
    free(s);
}

static const struct ts_memdev_ops sim_ops = {
    .name = "sim",
    .mem_alloc = sim_mem_alloc,
    .mem_free = sim_mem_free,
    .va_reserve = sim_va_reserve,
    .va_free = sim_va_free,
    .create = sim_create,
    .release = sim_release,
    .map = sim_map,
    .unmap = sim_unmap,
    .set_access = sim_set_access,
    .event_record = sim_event_record,
    .event_query = sim_event_query,
    .event_sync = sim_event_sync,
    .event_release = sim_event_release,
    .stream_sync = sim_stream_sync,
    .stream_wait = sim_stream_wait,
    .destroy = sim_destroy,
};

int ts_memdev_sim_new(const ts_memdev_sim_config *cfg, ts_memdev **out, ts_err *err)
{
    *out = NULL;
    if (!cfg || !cfg->capacity_bytes)
        return ts_err_set(err, TS_EINVAL, "capacity_bytes: must be > 0");
    if (cfg->backed && cfg->capacity_bytes % SIM_PAGE_BYTES)
        return ts_err_set(err, TS_EINVAL, "capacity_bytes: a backed device needs a multiple of 2 MiB");
    sim *s = calloc(1, sizeof *s);
    if (!s)
        return ts_err_set(err, TS_ENOMEM, "simulated device: out of memory");
    s->capacity = cfg->capacity_bytes;
    s->backed = cfg->backed;
    s->fd = -1;
    s->next_va = SIM_VA_BASE;
    alloc_ptrmap_init(&s->mallocs);
    alloc_ptrmap_init(&s->pages);
    alloc_ptrmap_init(&s->streams);
    alloc_tree_init(&s->resv, 0x51u);
    if (s->backed) {
        s->fd = memfd_create("tessera-simdev", MFD_CLOEXEC);
        s->nunits = (size_t)(s->capacity / SIM_PAGE_BYTES);
        s->unit_used = calloc(s->nunits ? s->nunits : 1, 1);
        if (s->fd < 0 || !s->unit_used || ftruncate(s->fd, (off_t)s->capacity) != 0) {
            sim_destroy(s);
            return ts_err_set(err, TS_EIO, "simulated device: cannot create the backing memfd");
        }
    }
    int rc = alloc_memdev_wrap(&sim_ops, s, s->capacity, 1, out, err);
    if (rc == 0)
        s->dev = *out;
    return rc;
}

static sim *sim_of(ts_memdev *dev)
{
    return dev && dev->is_sim ? dev->impl : NULL;
}

void ts_memdev_sim_hold_stream(ts_memdev *dev, uint64_t stream, int hold)
{
    sim *s = sim_of(dev);
    struct sim_stream *st = s ? stream_of(s, stream) : NULL;
    if (!st)
        return;
    st->held = hold;
    if (!hold)
        st->completed = st->recorded;
}

void ts_memdev_sim_next_addr(ts_memdev *dev, uint64_t addr, uint64_t size)
{
    sim *s = sim_of(dev);
    if (s && !s->backed) {
        s->hint_addr = addr;
        s->hint_size = size;
    }
}

void ts_memdev_sim_get_live(const ts_memdev *dev, ts_memdev_sim_live *out)
{
    memset(out, 0, sizeof *out);
    const sim *s = dev && dev->is_sim ? dev->impl : NULL;
    if (!s)
        return;
    out->mallocs = s->mallocs.n;
    out->reservations = s->resv.n;
    out->handles = s->live_handles;
    out->mapped_bytes = s->mapped_bytes;
    out->events = s->live_events;
}
