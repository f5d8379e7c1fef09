/*
 * memalloc.c - ts_memalloc, the one interface of alloc.h over the allocator
 * implementations (tessera.c, pytorch.c): argument checks, the statistics
 * block every implementation updates, and the dispatch. Implementations see
 * only valid arguments. Also the reading of the shim's quota variables, so a
 * process's allocator and libtessera-cuda refuse at the same point.
 */
#include <stdlib.h>
#include <string.h>

#include "alloc/internal.h"
#include "tessera/shim.h"

struct ts_memalloc {
    const struct ts_memalloc_impl_ops *ops;
    void *impl;
    ts_memdev *dev;
    ts_memalloc_config cfg;
    ts_memalloc_stats st;
};

static const char *const kind_names[] = {"tessera", "pytorch", "pytorch-expandable"};

int ts_memalloc_kind_parse(const char *name)
{
    for (int i = 0; i < 3; i++)
        if (name && strcmp(name, kind_names[i]) == 0)
            return i;
    return -1;
}

const char *ts_memalloc_kind_name(ts_memalloc_kind kind)
{
    return (unsigned)kind < 3 ? kind_names[kind] : "?";
}

int ts_memalloc_new(const ts_memalloc_config *cfg, ts_memdev *dev, ts_memalloc **out,
                    ts_err *err)
{
    *out = NULL;
    if (!cfg || !dev)
        return ts_err_set(err, TS_EINVAL, "memalloc: config and device are required");
    if ((unsigned)cfg->kind > TS_MEMALLOC_PYTORCH_EXPANDABLE)
        return ts_err_set(err, TS_EINVAL, "kind: must be tessera, pytorch or pytorch-expandable");
    ts_memalloc *a = calloc(1, sizeof *a);
    if (!a)
        return ts_err_set(err, TS_ENOMEM, "memalloc: out of memory");
    a->dev = dev;
    a->cfg = *cfg;
    int rc = cfg->kind == TS_MEMALLOC_TESSERA
                 ? alloc_tess_new(cfg, dev, &a->st, &a->ops, &a->impl, err)
                 : alloc_pt_new(cfg, dev, &a->st, &a->ops, &a->impl, err);
    if (rc != 0) {
        free(a);
        return rc;
    }
    *out = a;
    return 0;
}

void ts_memalloc_destroy(ts_memalloc *a)
{
    if (!a)
        return;
    a->ops->destroy(a->impl);
    free(a);
}

int ts_memalloc_malloc(ts_memalloc *a, uint64_t size, uint64_t stream, uint64_t *ptr,
                       ts_err *err)
{
    *ptr = 0;
    if (!size)
        return ts_err_set(err, TS_EINVAL, "size: must be > 0");
    if (size > (1ull << 50))
        return ts_err_set(err, TS_EINVAL, "size: %llu is beyond any device",
                          (unsigned long long)size);
    return a->ops->malloc(a->impl, size, stream, ptr, err);
}

int ts_memalloc_free(ts_memalloc *a, uint64_t ptr, uint64_t stream, ts_err *err)
{
    if (!ptr)
        return 0; /* like free(NULL) */
    return a->ops->free(a->impl, ptr, stream, err);
}

int ts_memalloc_record_stream(ts_memalloc *a, uint64_t ptr, uint64_t stream, ts_err *err)
{
    return a->ops->record_stream(a->impl, ptr, stream, err);
}

int alloc_uses_add(uint64_t **uses, int *nuses, uint64_t own, uint64_t stream, const char *who,
                   ts_err *err)
{
    if (stream == own)
        return 0;
    for (int i = 0; i < *nuses; i++)
        if ((*uses)[i] == stream)
            return 0;
    uint64_t *nu = realloc(*uses, (size_t)(*nuses + 1) * sizeof *nu);
    if (!nu)
        return ts_err_set(err, TS_ENOMEM, "%s: out of host memory", who);
    *uses = nu;
    nu[(*nuses)++] = stream;
    return 0;
}

int ts_memalloc_empty_cache(ts_memalloc *a, ts_err *err)
{
    return a->ops->empty_cache(a->impl, err);
}

void ts_memalloc_get_stats(const ts_memalloc *a, ts_memalloc_stats *out)
{
    *out = a->st;
    out->fragmentation = a->st.peak_reserved_bytes
                             ? 1.0 - (double)a->st.peak_requested_bytes /
                                         (double)a->st.peak_reserved_bytes
                             : 0.0;
    ts_memdev_get_stats(a->dev, &out->dev);
}

uint64_t ts_memalloc_size_of(const ts_memalloc *a, uint64_t ptr)
{
    return a->ops->size_of(a->impl, ptr);
}

int ts_memalloc_adopt_segment(ts_memalloc *a, uint64_t addr, uint64_t size, uint64_t stream,
                              int small_pool, ts_err *err)
{
    if (!a->ops->adopt_segment)
        return ts_err_set(err, TS_EINVAL, "adopt_segment: only the PyTorch model adopts segments");
    return a->ops->adopt_segment(a->impl, addr, size, stream, small_pool, err);
}

int ts_memalloc_adopt_block(ts_memalloc *a, uint64_t addr, uint64_t block_size,
                            uint64_t requested, uint64_t stream, ts_err *err)
{
    if (!a->ops->adopt_block)
        return ts_err_set(err, TS_EINVAL, "adopt_block: only the PyTorch model adopts blocks");
    if (!block_size || block_size % 512 || requested > block_size)
        return ts_err_set(err, TS_EINVAL, "adopt_block: block_size %llu must be a multiple of 512 "
                          "holding %llu", (unsigned long long)block_size,
                          (unsigned long long)requested);
    return a->ops->adopt_block(a->impl, addr, block_size, requested, stream, err);
}

/* "8G", "512M", "1024": bytes with an optional K/M/G/T (powers of 1024). */
static int parse_size(const char *s, const char *end, uint64_t *out)
{
    uint64_t v = 0;
    const char *p = s;
    if (p == end || *p < '0' || *p > '9')
        return -1;
    while (p < end && *p >= '0' && *p <= '9') {
        if (v > UINT64_MAX / 10)
            return -1;
        v = v * 10 + (uint64_t)(*p++ - '0');
    }
    int shift = 0;
    if (p < end) {
        switch (*p++) {
        case 'K': case 'k': shift = 10; break;
        case 'M': case 'm': shift = 20; break;
        case 'G': case 'g': shift = 30; break;
        case 'T': case 't': shift = 40; break;
        default: return -1;
        }
    }
    if (p != end || (shift && v > (UINT64_MAX >> shift)))
        return -1;
    *out = v << shift;
    return 0;
}

int ts_memalloc_quota_from_env(int ordinal, uint64_t *bytes, ts_err *err)
{
    *bytes = 0;
    const char *lim = getenv(TS_SHIM_ENV_MEM_LIMIT);
    if (!lim || !*lim)
        return ts_err_set(err, TS_ENOENT, "%s: not set", TS_SHIM_ENV_MEM_LIMIT);
    uint64_t quota = 0;
    int found = 0;
    if (!strchr(lim, '=')) {
        if (parse_size(lim, lim + strlen(lim), &quota) != 0)
            return ts_err_set(err, TS_EINVAL, "%s: \"%s\" is not a size", TS_SHIM_ENV_MEM_LIMIT,
                              lim);
        found = 1;
    } else {
        for (const char *p = lim; *p;) { /* "0=8G,1=512M" */
            const char *comma = strchr(p, ',');
            const char *end = comma ? comma : p + strlen(p);
            const char *eq = memchr(p, '=', (size_t)(end - p));
            uint64_t dev = 0, v = 0;
            if (!eq || parse_size(p, eq, &dev) != 0 || parse_size(eq + 1, end, &v) != 0)
                return ts_err_set(err, TS_EINVAL, "%s: \"%.*s\" is not ORDINAL=SIZE",
                                  TS_SHIM_ENV_MEM_LIMIT, (int)(end - p), p);
            if (dev == (uint64_t)ordinal) {
                quota = v;
                found = 1;
            }
            p = comma ? comma + 1 : end;
        }
    }
    if (!found)
        return ts_err_set(err, TS_ENOENT, "%s: no limit for device %d", TS_SHIM_ENV_MEM_LIMIT,
                          ordinal);
    uint64_t ctx = TS_SHIM_CTX_BYTES_DEFAULT;
    const char *c = getenv(TS_SHIM_ENV_CTX_BYTES);
    if (c && *c && parse_size(c, c + strlen(c), &ctx) != 0)
        return ts_err_set(err, TS_EINVAL, "%s: \"%s\" is not a size", TS_SHIM_ENV_CTX_BYTES, c);
    *bytes = quota > ctx ? quota - ctx : 0;
    return 0;
}
