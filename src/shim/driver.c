/*
 * driver.c - the shim's start-up and bookkeeping: reads the configuration,
 * loads the real driver and resolves its entry points, learns each device
 * (UUID -> ledger entry, allocation granularity, limits), maps contexts to
 * devices, keeps the table of charged objects, and resets all of it in a
 * forked child (which owns none of its parent's CUDA state).
 *
 * The real driver is whatever TESSERA_CUDA_DRIVER names (default
 * libcuda.so.1). An application that linked or opened libcuda itself gets
 * the same object back from dlopen, so the addresses resolved here are the
 * ones cuGetProcAddress and dlsym hand the application (procaddr.c).
 */
#define _GNU_SOURCE
#include "shim/shim.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CTX_CACHE_SIZE 64
#define GRAN_FALLBACK_BYTES (2ULL << 20)
#define TAB_MIN_CAP 256

struct ts_shim ts_shim = {.lock = PTHREAD_MUTEX_INITIALIZER};

static pthread_once_t boot_once = PTHREAD_ONCE_INIT;
static _Thread_local int booting; /* the driver's own start-up may call dlsym */

static struct {
    CUcontext ctx;
    int ordinal;
} ctx_cache[CTX_CACHE_SIZE];
static int ctx_cache_next;

void *shim_real_dlsym(void *handle, const char *name); /* procaddr.c */
int shim_in_boot(void);

int shim_in_boot(void) { return booting; }

/* ---- fork: the child starts from nothing ----------------------------------- */

static void fork_prepare(void) { pthread_mutex_lock(&ts_shim.lock); }
static void fork_parent(void) { pthread_mutex_unlock(&ts_shim.lock); }

static void fork_child(void)
{
    /* the parent's slot stays the parent's: only drop our copy of the mapping */
    shim_ledger_abandon(ts_shim.ledger);
    ts_shim.ledger = NULL;
    ts_shim.ledger_rc = 0;
    memset(ts_shim.dev, 0, sizeof ts_shim.dev);
    memset(ts_shim.primary_refs, 0, sizeof ts_shim.primary_refs);
    memset(ts_shim.primary_ctx, 0, sizeof ts_shim.primary_ctx);
    shim_rec_clear(&ts_shim.recs);
    memset(ctx_cache, 0, sizeof ctx_cache);
    pthread_mutex_unlock(&ts_shim.lock);
    shim_limiter_after_fork();
}

/* ---- boot ---------------------------------------------------------------- */

static void resolve_from(void *dl)
{
#define TS_SHIM_RESOLVE(name, params, args)                                                   \
    do {                                                                                      \
        void *sym = shim_real_dlsym(dl, #name);                                            \
        memcpy(&ts_shim.real.name, &sym, sizeof sym);                                         \
    } while (0);
    TS_CU_API(TS_SHIM_RESOLVE)
#undef TS_SHIM_RESOLVE
}

static void load_driver(void)
{
    const char *path = ts_shim.cfg.driver;
    void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!dl && strcmp(path, TS_SHIM_DRIVER_DEFAULT) != 0)
        dl = dlopen(TS_SHIM_DRIVER_DEFAULT, RTLD_NOW | RTLD_LOCAL);
    if (dl) {
        resolve_from(dl);
        __atomic_store_n(&ts_shim.dl, dl, __ATOMIC_RELEASE);
    }
}

/* A process that opened a driver the shim could not find by name (a path
 * outside the loader's search list) still gets it enforced: the first dlsym
 * of a cu* name in that library's handle makes it the driver. */
void shim_adopt_driver(void *handle)
{
    if (__atomic_load_n(&ts_shim.dl, __ATOMIC_ACQUIRE))
        return;
    pthread_mutex_lock(&ts_shim.lock);
    if (!ts_shim.dl && shim_real_dlsym(handle, "cuGetProcAddress")) {
        resolve_from(handle);
        __atomic_store_n(&ts_shim.dl, handle, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&ts_shim.lock);
}

static void boot(void)
{
    booting = 1;
    ts_shim_env env;
    shim_env_get(&env);
    ts_err err;
    ts_err_clear(&err);
    ts_shim.config_rc = shim_config_parse(&env, &ts_shim.cfg, &err);
    snprintf(ts_shim.config_msg, sizeof ts_shim.config_msg, "%s", err.msg);
    load_driver();
    pthread_atfork(fork_prepare, fork_parent, fork_child);
    booting = 0;
    __atomic_store_n(&ts_shim.booted, 1, __ATOMIC_RELEASE);
}

void shim_boot(void)
{
    if (booting)
        return; /* re-entered from the driver's constructors: pass through */
    pthread_once(&boot_once, boot);
}

/* For tools and tests: the configuration verdict and what is enforced. */
TS_SHIM_EXPORT int tessera_cuda_status(char *buf, size_t len)
{
    shim_ready();
    if (buf && len)
        snprintf(buf, len, "config=%s%s driver=%s mem=%s compute=%s ledger=%s",
                 ts_shim.config_rc ? "refused: " : "ok",
                 ts_shim.config_rc ? ts_shim.config_msg : "",
                 ts_shim.dl ? ts_shim.cfg.driver : "missing", ts_shim.cfg.mem_on ? "on" : "off",
                 ts_shim.cfg.compute_on ? "on" : "off",
                 ts_shim.cfg.ledger[0] ? ts_shim.cfg.ledger : "private");
    return ts_shim.config_rc;
}

/* ---- devices ------------------------------------------------------------- */

static void device_uuid(int d, unsigned char out[TS_LEDGER_UUID_BYTES])
{
    CUuuid u;
    CUresult r = CUDA_ERROR_NOT_FOUND;
    if (ts_shim.real.cuDeviceGetUuid_v2)
        r = ts_shim.real.cuDeviceGetUuid_v2(&u, d);
    if (r != CUDA_SUCCESS && ts_shim.real.cuDeviceGetUuid)
        r = ts_shim.real.cuDeviceGetUuid(&u, d);
    if (r != CUDA_SUCCESS) { /* no UUID: key by ordinal (same visible set assumed) */
        memset(&u, 0, sizeof u);
        u.bytes[0] = (char)0xff;
        u.bytes[15] = (char)d;
    }
    memcpy(out, u.bytes, TS_LEDGER_UUID_BYTES);
}

static uint64_t device_granularity(int d)
{
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = d;
    size_t g = 0;
    if (ts_shim.real.cuMemGetAllocationGranularity &&
        ts_shim.real.cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) ==
            CUDA_SUCCESS &&
        g > 0)
        return g;
    return GRAN_FALLBACK_BYTES;
}

static void open_ledger_locked(void)
{
    if (ts_shim.ledger || ts_shim.ledger_rc)
        return;
    ts_err err;
    int rc = shim_ledger_open(ts_shim.cfg.ledger, &ts_shim.ledger, &err);
    if (rc && ts_shim.cfg.ledger[0]) /* enforce per process rather than not at all */
        rc = shim_ledger_open(NULL, &ts_shim.ledger, &err);
    ts_shim.ledger_rc = rc;
}

const struct ts_shim_dev *shim_device(int d)
{
    if (d < 0 || d >= TS_SHIM_MAX_DEVICES)
        return NULL;
    pthread_mutex_lock(&ts_shim.lock);
    int ready = ts_shim.dev[d].ready;
    pthread_mutex_unlock(&ts_shim.lock);
    if (ready)
        return &ts_shim.dev[d];

    struct ts_shim_dev nd = {.ready = 1, .ledger_dev = -1, .limit = ts_shim.cfg.mem_limit[d],
                             .pct = ts_shim.cfg.compute_pct[d]};
    unsigned char uuid[TS_LEDGER_UUID_BYTES] = {0};
    if (nd.limit >= 0 || nd.pct < 100) {
        device_uuid(d, uuid);
        nd.gran = device_granularity(d);
    } else {
        nd.gran = GRAN_FALLBACK_BYTES;
    }
    if (nd.limit >= 0 || nd.pct < 100)
        memcpy(nd.uuid, uuid, sizeof nd.uuid);
    pthread_mutex_lock(&ts_shim.lock);
    if (!ts_shim.dev[d].ready) {
        if (nd.limit >= 0 || nd.pct < 100) {
            open_ledger_locked();
            if (ts_shim.ledger)
                nd.ledger_dev = shim_ledger_device(ts_shim.ledger, uuid);
            if (nd.ledger_dev < 0) { /* cannot account: do not pretend to */
                nd.limit = -1;
                nd.pct = 100;
            }
        }
        ts_shim.dev[d] = nd;
    }
    pthread_mutex_unlock(&ts_shim.lock);
    return &ts_shim.dev[d];
}

/* ---- contexts -> devices ------------------------------------------------------ */

int shim_ctx_ordinal(CUcontext ctx)
{
    if (!ctx)
        return -1;
    pthread_mutex_lock(&ts_shim.lock);
    for (int i = 0; i < CTX_CACHE_SIZE; i++)
        if (ctx_cache[i].ctx == ctx) {
            int o = ctx_cache[i].ordinal;
            pthread_mutex_unlock(&ts_shim.lock);
            return o;
        }
    pthread_mutex_unlock(&ts_shim.lock);

    const struct ts_shim_real *r = &ts_shim.real;
    CUcontext cur = NULL;
    CUdevice dev = -1;
    if (!r->cuCtxGetCurrent || !r->cuCtxGetDevice || r->cuCtxGetCurrent(&cur) != CUDA_SUCCESS)
        return -1;
    if (cur == ctx) {
        if (r->cuCtxGetDevice(&dev) != CUDA_SUCCESS)
            return -1;
    } else {
        if (!r->cuCtxPushCurrent_v2 || !r->cuCtxPopCurrent_v2 ||
            r->cuCtxPushCurrent_v2(ctx) != CUDA_SUCCESS)
            return -1;
        CUresult rc = r->cuCtxGetDevice(&dev);
        CUcontext popped;
        r->cuCtxPopCurrent_v2(&popped);
        if (rc != CUDA_SUCCESS)
            return -1;
    }
    pthread_mutex_lock(&ts_shim.lock);
    ctx_cache[ctx_cache_next].ctx = ctx;
    ctx_cache[ctx_cache_next].ordinal = dev;
    ctx_cache_next = (ctx_cache_next + 1) % CTX_CACHE_SIZE;
    pthread_mutex_unlock(&ts_shim.lock);
    return dev;
}

void shim_ctx_forget(CUcontext ctx)
{
    pthread_mutex_lock(&ts_shim.lock);
    for (int i = 0; i < CTX_CACHE_SIZE; i++)
        if (ctx_cache[i].ctx == ctx)
            ctx_cache[i].ctx = NULL;
    pthread_mutex_unlock(&ts_shim.lock);
}

int shim_current_ordinal(CUcontext *ctx_out)
{
    CUcontext ctx = NULL;
    if (!ts_shim.real.cuCtxGetCurrent || ts_shim.real.cuCtxGetCurrent(&ctx) != CUDA_SUCCESS)
        ctx = NULL;
    if (ctx_out)
        *ctx_out = ctx;
    return shim_ctx_ordinal(ctx);
}

CUcontext shim_stream_ctx(CUstream s)
{
    CUcontext ctx = NULL;
    if (s == NULL || s == TS_CU_STREAM_LEGACY || s == TS_CU_STREAM_PER_THREAD) {
        if (!ts_shim.real.cuCtxGetCurrent || ts_shim.real.cuCtxGetCurrent(&ctx) != CUDA_SUCCESS)
            return NULL;
        return ctx;
    }
    if (!ts_shim.real.cuStreamGetCtx || ts_shim.real.cuStreamGetCtx(s, &ctx) != CUDA_SUCCESS)
        return NULL;
    return ctx;
}

/* ---- the record table: open addressing, linear probing ------------------------ */

static size_t slot_of(const struct ts_shim_tab *t, uint32_t kind, uint64_t key)
{
    uint64_t h = (key ^ ((uint64_t)kind << 56)) * 0x9e3779b97f4a7c15ULL;
    return (size_t)(h >> 17) & (t->cap - 1);
}

struct ts_shim_rec *shim_rec_get(struct ts_shim_tab *t, uint32_t kind, uint64_t key)
{
    if (!t->cap)
        return NULL;
    for (size_t i = slot_of(t, kind, key);; i = (i + 1) & (t->cap - 1)) {
        struct ts_shim_rec *e = &t->e[i];
        if (e->kind == TS_REC_EMPTY)
            return NULL;
        if (e->kind == kind && e->key == key)
            return e;
    }
}

static int grow(struct ts_shim_tab *t)
{
    size_t cap = t->cap ? t->cap * 2 : TAB_MIN_CAP;
    struct ts_shim_rec *e = calloc(cap, sizeof *e);
    if (!e)
        return -1;
    struct ts_shim_tab nt = {e, cap, 0};
    for (size_t i = 0; i < t->cap; i++)
        if (t->e[i].kind != TS_REC_EMPTY)
            shim_rec_put(&nt, &t->e[i]);
    free(t->e);
    *t = nt;
    return 0;
}

int shim_rec_put(struct ts_shim_tab *t, const struct ts_shim_rec *r)
{
    if ((t->n + 1) * 2 > t->cap && grow(t) != 0)
        return -1;
    for (size_t i = slot_of(t, r->kind, r->key);; i = (i + 1) & (t->cap - 1)) {
        struct ts_shim_rec *e = &t->e[i];
        if (e->kind == TS_REC_EMPTY || (e->kind == r->kind && e->key == r->key)) {
            t->n += e->kind == TS_REC_EMPTY;
            *e = *r;
            return 0;
        }
    }
}

int shim_rec_del(struct ts_shim_tab *t, uint32_t kind, uint64_t key, struct ts_shim_rec *out)
{
    struct ts_shim_rec *e = shim_rec_get(t, kind, key);
    if (!e)
        return -1;
    if (out)
        *out = *e;
    /* backward-shift deletion keeps every probe chain unbroken */
    size_t i = (size_t)(e - t->e);
    for (size_t j = (i + 1) & (t->cap - 1);; j = (j + 1) & (t->cap - 1)) {
        if (t->e[j].kind == TS_REC_EMPTY)
            break;
        size_t home = slot_of(t, t->e[j].kind, t->e[j].key);
        /* move e[j] into the hole at i unless its home lies cyclically in (i, j] */
        int stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
        if (!stays) {
            t->e[i] = t->e[j];
            i = j;
        }
    }
    t->e[i].kind = TS_REC_EMPTY;
    t->n--;
    return 0;
}

void shim_rec_clear(struct ts_shim_tab *t)
{
    free(t->e);
    t->e = NULL;
    t->cap = t->n = 0;
}
