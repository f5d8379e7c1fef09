/*
 * limiter.c - the compute share: a tenant gets at most its percentage of each
 * device's time, measured as the GPU time its work really takes.
 *
 * Every launch that runs work on a limited device - kernels (cuLaunchKernel,
 * cuLaunchKernelEx, cooperative ones, multi-device cooperative ones) and graph
 * launches, in their legacy and per-thread-stream forms - is bracketed by two
 * timing events recorded on its stream. Before it is queued, it takes its
 * estimated cost from the tenant's token bucket in the ledger (refilled at
 * the share of wall time, shared by all the tenant's processes); a bucket in
 * debt makes the launching thread sleep until the debt is paid. When the
 * events complete, cuEventElapsedTime gives the real GPU time and the bucket
 * pays the difference from the estimate. Estimates are per (function or
 * graph, grid shape): a moving average of measurements; a shape never
 * measured may have only one launch in flight, so a mistaken guess is
 * corrected before a second one is queued.
 *
 * Launches on a stream being captured are not run (they become graph nodes)
 * and are neither charged nor bracketed: the graph launch is. The bracket is
 * skipped (the launch still charged at its estimate) when an event cannot be
 * recorded. Error bounds: docs/sharing.md.
 */
#define _GNU_SOURCE
#include "shim/shim.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BURST_NS 50000000LL       /* bucket depth at 100 % (scaled by the share) */
#define MAX_SLEEP_NS 20000000LL   /* re-check the bucket at least this often */
#define DEFAULT_EST_NS 100000LL   /* cost of a never-measured launch before any measurement */
#define MAX_PENDING 512           /* bracketed launches not yet measured, per process */
#define EST_SLOTS 1024
#define POOLS 8                   /* contexts with an event pool */
#define POOL_EVENTS 1024
#define GRAPH_KEY_TAG 0x1ULL
#define NS_PER_MS 1000000.0

#define REAL ts_shim.real
#define PASS(name, ...) (REAL.name ? REAL.name(__VA_ARGS__) : CUDA_ERROR_NOT_SUPPORTED)

struct pending {
    CUevent start, end;
    CUcontext ctx;
    int ldev, pct;
    int64_t est_ns;
    uint64_t key;
};

struct pool {
    CUcontext ctx;
    int n;
    CUevent ev[POOL_EVENTS];
};

static struct {
    pthread_mutex_t lock;
    struct pending ring[MAX_PENDING];
    unsigned head, n;
    struct {
        uint64_t key;
        int64_t est_ns;
    } est[EST_SLOTS];
    int64_t avg_ns;
    struct pool pools[POOLS];
    int captures;
} L = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* One launch in progress. */
struct tok {
    int on;          /* 0: not limited; 1: charged and bracketed; 2: charged only */
    CUstream stream; /* where the events go (per-thread NULL made explicit) */
    CUcontext ctx;
    int ldev, pct;
    int64_t est_ns;
    uint64_t key;
    CUevent start, end;
};

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void sleep_ns(int64_t ns)
{
    struct timespec ts = {.tv_sec = ns / 1000000000LL, .tv_nsec = ns % 1000000000LL};
    nanosleep(&ts, NULL);
}

static uint64_t launch_key(const void *fn, unsigned gx, unsigned gy, unsigned gz)
{
    uint64_t k = (uintptr_t)fn;
    k ^= ((uint64_t)gx * 0x9e3779b97f4a7c15ULL) ^ ((uint64_t)gy << 21) ^ ((uint64_t)gz << 42);
    return k & ~GRAPH_KEY_TAG;
}

static unsigned est_slot(uint64_t key)
{
    return (unsigned)((key * 0xff51afd7ed558ccdULL) >> 54) % EST_SLOTS;
}

/* The estimate for key; *known = 0 if it was never measured. Lock held. */
static int64_t estimate_locked(uint64_t key, int *known)
{
    unsigned s = est_slot(key);
    *known = L.est[s].key == key && L.est[s].est_ns > 0;
    if (*known)
        return L.est[s].est_ns;
    return L.avg_ns > 0 ? L.avg_ns : DEFAULT_EST_NS;
}

static void learn_locked(uint64_t key, int64_t ns)
{
    unsigned s = est_slot(key);
    if (L.est[s].key == key && L.est[s].est_ns > 0)
        L.est[s].est_ns = (3 * L.est[s].est_ns + ns) / 4;
    else {
        L.est[s].key = key;
        L.est[s].est_ns = ns > 0 ? ns : 1;
    }
    L.avg_ns = L.avg_ns > 0 ? (7 * L.avg_ns + ns) / 8 : ns;
}

/* ---- events ------------------------------------------------------------------- */

static struct pool *pool_of_locked(CUcontext ctx, int create)
{
    struct pool *free_one = NULL;
    for (int i = 0; i < POOLS; i++) {
        if (L.pools[i].ctx == ctx)
            return &L.pools[i];
        if (!L.pools[i].ctx && !free_one)
            free_one = &L.pools[i];
    }
    if (create && free_one) {
        free_one->ctx = ctx;
        free_one->n = 0;
    }
    return create ? free_one : NULL;
}

static void put_event_locked(CUcontext ctx, CUevent e)
{
    struct pool *p = pool_of_locked(ctx, 1);
    if (p && p->n < POOL_EVENTS)
        p->ev[p->n++] = e;
    else if (REAL.cuEventDestroy_v2)
        REAL.cuEventDestroy_v2(e);
}

/* Two timing events of ctx; 0 on success. */
static int get_events(CUcontext ctx, CUevent *a, CUevent *b)
{
    pthread_mutex_lock(&L.lock);
    struct pool *p = pool_of_locked(ctx, 0);
    if (p && p->n >= 2) {
        *a = p->ev[--p->n];
        *b = p->ev[--p->n];
        pthread_mutex_unlock(&L.lock);
        return 0;
    }
    pthread_mutex_unlock(&L.lock);
    if (!REAL.cuEventCreate || !REAL.cuCtxGetCurrent)
        return -1;
    CUcontext cur = NULL;
    REAL.cuCtxGetCurrent(&cur);
    int pushed = cur != ctx && REAL.cuCtxPushCurrent_v2 &&
                 REAL.cuCtxPushCurrent_v2(ctx) == CUDA_SUCCESS;
    if (cur != ctx && !pushed)
        return -1;
    int rc = -1;
    if (REAL.cuEventCreate(a, TS_CU_EVENT_DEFAULT) == CUDA_SUCCESS) {
        if (REAL.cuEventCreate(b, TS_CU_EVENT_DEFAULT) == CUDA_SUCCESS)
            rc = 0;
        else
            REAL.cuEventDestroy_v2(*a);
    }
    if (pushed) {
        CUcontext popped;
        REAL.cuCtxPopCurrent_v2(&popped);
    }
    return rc;
}

static void put_events(CUcontext ctx, CUevent a, CUevent b)
{
    pthread_mutex_lock(&L.lock);
    put_event_locked(ctx, a);
    put_event_locked(ctx, b);
    pthread_mutex_unlock(&L.lock);
}

/* ---- measurements ------------------------------------------------------------- */

/* Settles every finished launch at the head of the queue (all of them when
 * wait_all). Returns how many. */
static int poll_done(void)
{
    int done = 0;
    pthread_mutex_lock(&L.lock);
    while (L.n > 0) {
        struct pending *p = &L.ring[L.head];
        CUresult q = REAL.cuEventQuery(p->end);
        if (q == CUDA_ERROR_NOT_READY)
            break;
        float ms = 0;
        int64_t actual = p->est_ns; /* an error leaves the estimate standing */
        if (q == CUDA_SUCCESS && REAL.cuEventElapsedTime(&ms, p->start, p->end) == CUDA_SUCCESS &&
            ms >= 0) {
            actual = (int64_t)((double)ms * NS_PER_MS);
            learn_locked(p->key, actual);
        }
        shim_ledger_settle(ts_shim.ledger, p->ldev, p->pct, p->est_ns, actual, BURST_NS);
        put_event_locked(p->ctx, p->start);
        put_event_locked(p->ctx, p->end);
        L.head = (L.head + 1) % MAX_PENDING;
        L.n--;
        done++;
    }
    pthread_mutex_unlock(&L.lock);
    return done;
}

/* Waits for the oldest pending launch (or the newest with key, when key is
 * not 0 and one is pending) to finish, then settles what finished. */
static void wait_for(uint64_t key)
{
    CUevent e = NULL;
    pthread_mutex_lock(&L.lock);
    for (unsigned i = 0; i < L.n; i++) {
        struct pending *p = &L.ring[(L.head + L.n - 1 - i) % MAX_PENDING];
        if (!key || p->key == key) {
            e = key ? p->end : L.ring[L.head].end;
            break;
        }
    }
    pthread_mutex_unlock(&L.lock);
    if (e && REAL.cuEventSynchronize)
        REAL.cuEventSynchronize(e);
    poll_done();
}

/* ---- the bracket around one launch ---------------------------------------------- */

static void begin(struct tok *t, CUstream s, int per_thread, uint64_t key)
{
    t->on = 0;
    if (!ts_shim.cfg.compute_on)
        return;
    t->stream = per_thread && s == NULL ? TS_CU_STREAM_PER_THREAD : s;
    if (__atomic_load_n(&L.captures, __ATOMIC_ACQUIRE) > 0) {
        CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
        if (!REAL.cuStreamIsCapturing || REAL.cuStreamIsCapturing(t->stream, &st) != CUDA_SUCCESS ||
            st != CU_STREAM_CAPTURE_STATUS_NONE)
            return; /* recorded into a graph, charged when the graph runs */
    }
    t->ctx = shim_stream_ctx(t->stream);
    const struct ts_shim_dev *d = shim_device(shim_ctx_ordinal(t->ctx));
    if (!d || d->pct >= 100 || d->ledger_dev < 0 || !REAL.cuEventQuery)
        return;
    t->ldev = d->ledger_dev;
    t->pct = d->pct;
    t->key = key;
    poll_done();
    int known;
    pthread_mutex_lock(&L.lock);
    t->est_ns = estimate_locked(key, &known);
    int full = L.n >= MAX_PENDING;
    pthread_mutex_unlock(&L.lock);
    if (!known)
        wait_for(key); /* one unmeasured launch of a shape at a time */
    if (full)
        wait_for(0);
    if (!known) { /* the wait may have measured it */
        pthread_mutex_lock(&L.lock);
        t->est_ns = estimate_locked(key, &known);
        pthread_mutex_unlock(&L.lock);
    }
    for (;;) {
        int64_t w = shim_ledger_take(ts_shim.ledger, t->ldev, t->pct, t->est_ns, mono_ns(), BURST_NS);
        if (w == 0)
            break;
        sleep_ns(w < MAX_SLEEP_NS ? w : MAX_SLEEP_NS);
        poll_done(); /* measurements may pay some of the debt back */
    }
    t->on = 2;
    if (get_events(t->ctx, &t->start, &t->end) != 0)
        return;
    if (!REAL.cuEventRecord || REAL.cuEventRecord(t->start, t->stream) != CUDA_SUCCESS) {
        put_events(t->ctx, t->start, t->end);
        return;
    }
    t->on = 1;
}

static CUresult end(struct tok *t, CUresult r)
{
    if (!t->on)
        return r;
    if (r != CUDA_SUCCESS) { /* nothing ran: give the estimate back */
        shim_ledger_settle(ts_shim.ledger, t->ldev, t->pct, t->est_ns, 0, BURST_NS);
        if (t->on == 1)
            put_events(t->ctx, t->start, t->end);
        return r;
    }
    if (t->on == 2)
        return r;
    if (REAL.cuEventRecord(t->end, t->stream) != CUDA_SUCCESS) {
        put_events(t->ctx, t->start, t->end);
        return r;
    }
    pthread_mutex_lock(&L.lock);
    if (L.n < MAX_PENDING) {
        L.ring[(L.head + L.n) % MAX_PENDING] = (struct pending){
            t->start, t->end, t->ctx, t->ldev, t->pct, t->est_ns, t->key};
        L.n++;
        t->on = 0;
    }
    pthread_mutex_unlock(&L.lock);
    if (t->on) /* no room (another thread filled it): keep the estimate */
        put_events(t->ctx, t->start, t->end);
    return r;
}

/* ---- launches ------------------------------------------------------------------- */

#define KERNEL_LAUNCH(name, per_thread)                                                       \
    TS_SHIM_EXPORT CUresult name(CUfunction f, TS_CU_LAUNCH_DIMS, unsigned int sharedMemBytes, \
                                 CUstream hStream, void **kernelParams, void **extra)         \
    {                                                                                         \
        shim_ready();                                                                      \
        struct tok t;                                                                         \
        begin(&t, hStream, per_thread, launch_key(f, gridDimX, gridDimY, gridDimZ));          \
        return end(&t, PASS(name, f, TS_CU_LAUNCH_DIM_ARGS, sharedMemBytes, hStream,          \
                            kernelParams, extra));                                            \
    }
KERNEL_LAUNCH(cuLaunchKernel, 0)
KERNEL_LAUNCH(cuLaunchKernel_ptsz, 1)

#define COOP_LAUNCH(name, per_thread)                                                         \
    TS_SHIM_EXPORT CUresult name(CUfunction f, TS_CU_LAUNCH_DIMS, unsigned int sharedMemBytes, \
                                 CUstream hStream, void **kernelParams)                       \
    {                                                                                         \
        shim_ready();                                                                      \
        struct tok t;                                                                         \
        begin(&t, hStream, per_thread, launch_key(f, gridDimX, gridDimY, gridDimZ));          \
        return end(&t, PASS(name, f, TS_CU_LAUNCH_DIM_ARGS, sharedMemBytes, hStream,          \
                            kernelParams));                                                   \
    }
COOP_LAUNCH(cuLaunchCooperativeKernel, 0)
COOP_LAUNCH(cuLaunchCooperativeKernel_ptsz, 1)

#define EX_LAUNCH(name, per_thread)                                                           \
    TS_SHIM_EXPORT CUresult name(const CUlaunchConfig *config, CUfunction f,                  \
                                 void **kernelParams, void **extra)                           \
    {                                                                                         \
        shim_ready();                                                                      \
        struct tok t = {0};                                                                   \
        if (config)                                                                           \
            begin(&t, config->hStream, per_thread,                                            \
                  launch_key(f, config->gridDimX, config->gridDimY, config->gridDimZ));       \
        return end(&t, PASS(name, config, f, kernelParams, extra));                           \
    }
EX_LAUNCH(cuLaunchKernelEx, 0)
EX_LAUNCH(cuLaunchKernelEx_ptsz, 1)

#define GRAPH_LAUNCH(name, per_thread)                                                        \
    TS_SHIM_EXPORT CUresult name(CUgraphExec hGraphExec, CUstream hStream)                    \
    {                                                                                         \
        shim_ready();                                                                      \
        struct tok t;                                                                         \
        begin(&t, hStream, per_thread, (uintptr_t)hGraphExec | GRAPH_KEY_TAG);                \
        return end(&t, PASS(name, hGraphExec, hStream));                                      \
    }
GRAPH_LAUNCH(cuGraphLaunch, 0)
GRAPH_LAUNCH(cuGraphLaunch_ptsz, 1)

#define MULTI_DEVICE_MAX 16

/* One bracket per device's launch: each device's tenant bucket pays its own. */
TS_SHIM_EXPORT CUresult cuLaunchCooperativeKernelMultiDevice(CUDA_LAUNCH_PARAMS *launchParamsList,
                                                             unsigned int numDevices,
                                                             unsigned int flags)
{
    shim_ready();
    struct tok t[MULTI_DEVICE_MAX];
    unsigned n = launchParamsList && numDevices <= MULTI_DEVICE_MAX ? numDevices : 0;
    for (unsigned i = 0; i < n; i++) {
        const CUDA_LAUNCH_PARAMS *p = &launchParamsList[i];
        begin(&t[i], p->hStream, 0, launch_key(p->function, p->gridDimX, p->gridDimY, p->gridDimZ));
    }
    CUresult r = PASS(cuLaunchCooperativeKernelMultiDevice, launchParamsList, numDevices, flags);
    for (unsigned i = 0; i < n; i++)
        end(&t[i], r);
    return r;
}

/* ---- stream capture: launches inside it are not run ------------------------------- */

#define CAPTURE_BEGIN(name)                                                                   \
    TS_SHIM_EXPORT CUresult name(CUstream hStream, CUstreamCaptureMode mode)                  \
    {                                                                                         \
        shim_ready();                                                                      \
        __atomic_add_fetch(&L.captures, 1, __ATOMIC_ACQ_REL);                                 \
        CUresult r = PASS(name, hStream, mode);                                               \
        if (r != CUDA_SUCCESS)                                                                \
            __atomic_sub_fetch(&L.captures, 1, __ATOMIC_ACQ_REL);                             \
        return r;                                                                             \
    }
CAPTURE_BEGIN(cuStreamBeginCapture_v2)
CAPTURE_BEGIN(cuStreamBeginCapture_v2_ptsz)

#define CAPTURE_END(name)                                                                     \
    TS_SHIM_EXPORT CUresult name(CUstream hStream, CUgraph *phGraph)                          \
    {                                                                                         \
        shim_ready();                                                                      \
        CUresult r = PASS(name, hStream, phGraph);                                            \
        CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;                             \
        /* the capture is over unless the stream says it still captures */                    \
        int still = REAL.cuStreamIsCapturing &&                                               \
                    REAL.cuStreamIsCapturing(hStream, &st) == CUDA_SUCCESS &&                 \
                    st == CU_STREAM_CAPTURE_STATUS_ACTIVE;                                    \
        if (!still && __atomic_load_n(&L.captures, __ATOMIC_ACQUIRE) > 0)                     \
            __atomic_sub_fetch(&L.captures, 1, __ATOMIC_ACQ_REL);                             \
        if (!still)                                                                           \
            shim_mem_capture_end(hStream, r == CUDA_SUCCESS && phGraph ? *phGraph : NULL); \
        return r;                                                                             \
    }
CAPTURE_END(cuStreamEndCapture)
CAPTURE_END(cuStreamEndCapture_ptsz)

/* ---- lifecycle ---------------------------------------------------------------------- */

void shim_limiter_ctx_gone(CUcontext ctx)
{
    pthread_mutex_lock(&L.lock);
    /* its events died with it: forget them without touching the driver */
    struct pool *p = pool_of_locked(ctx, 0);
    if (p) {
        p->ctx = NULL;
        p->n = 0;
    }
    for (unsigned i = 0; i < L.n; i++) {
        struct pending *q = &L.ring[(L.head + i) % MAX_PENDING];
        if (q->ctx == ctx) { /* settle at the estimate, never measured */
            q->ctx = NULL;
            q->start = q->end = NULL;
        }
    }
    unsigned keep = 0;
    for (unsigned i = 0; i < L.n; i++) {
        struct pending q = L.ring[(L.head + i) % MAX_PENDING];
        if (q.ctx)
            L.ring[(L.head + keep++) % MAX_PENDING] = q;
    }
    L.n = keep;
    pthread_mutex_unlock(&L.lock);
}

void shim_limiter_after_fork(void)
{
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    memset(&L, 0, sizeof L);
    L.lock = fresh;
}
