/*
 * fake_cuda.c - a libcuda.so.1 for tests: a simulated GPU behind the real CUDA
 * driver API names, signatures and return codes (src/shim/cuda_types.h).
 *
 * What the simulated device does:
 *  - Memory: a capacity per device, every allocation rounded up to the
 *    allocation granularity and charged against it (CUDA_ERROR_OUT_OF_MEMORY
 *    past it); a context charges TESSERA_FAKE_CUDA_CTX_BYTES while it lives.
 *    Usage is kept per process, and a dead process's is freed when its
 *    descriptors close, as the driver does. cuMemAlloc-family memory is real
 *    host memory (mmap, reused when freed), so the test and memcpy/memset
 *    can touch it.
 *  - Virtual memory management is real in host memory: cuMemAddressReserve
 *    returns a PROT_NONE mmap range; cuMemCreate backs a physical handle with
 *    a memfd of the (granularity-multiple) size, charged to the device;
 *    cuMemMap maps it MAP_FIXED into a reserved range (still inaccessible, as
 *    on a GPU); cuMemSetAccess makes it readable/writable; cuMemUnmap puts
 *    PROT_NONE reservation back. cuMemRelease of a mapped handle is deferred
 *    to its last unmap, as in the driver.
 *  - Time: one serial engine per device, shared by every process that names
 *    the same TESSERA_FAKE_CUDA_STATE file. Work runs in enqueue order: a
 *    kernel starts at max(now, its stream's tail, the engine's tail) and takes
 *    exactly what its launch parameters say; an event is timestamped when the
 *    engine reaches it. Launching past FAKE_PUSHBUF_DEPTH unfinished commands
 *    on a stream blocks, like a full pushbuffer.
 *  - Kernels: any image loads as a module holding two functions:
 *      ts_fake_sleep(u64 ns_per_block): runs ns_per_block x grid blocks;
 *      ts_fake_fill(CUdeviceptr dst, u64 bytes, u32 byte): memset, taking
 *        bytes / FAKE_FILL_BYTES_PER_NS.
 *    Parameters come from kernelParams or the `extra` packed buffer.
 *  - Graphs: built with cuGraphAddKernelNode(_v2) or by stream capture; a
 *    launch runs the nodes back to back as one command.
 *
 * Implemented (exported names): cuInit cuDriverGetVersion cuDeviceGet
 * cuDeviceGetCount cuDeviceGetName cuDeviceGetUuid(_v2) cuDeviceTotalMem_v2
 * cuDeviceGetAttribute cuDevicePrimaryCtxRetain cuDevicePrimaryCtxRelease(_v2)
 * cuDevicePrimaryCtxReset_v2 cuCtxCreate_v2/_v3/_v4 cuCtxDestroy_v2
 * cuCtxSetCurrent cuCtxGetCurrent cuCtxPushCurrent_v2 cuCtxPopCurrent_v2
 * cuCtxGetDevice cuCtxSynchronize cuMemGetInfo_v2 cuMemAlloc_v2
 * cuMemAllocPitch_v2 cuMemAllocManaged cuMemFree_v2 cuMemAllocAsync(_ptsz)
 * cuMemAllocFromPoolAsync(_ptsz) cuMemFreeAsync(_ptsz) cuMemPoolCreate
 * cuMemPoolDestroy cuDeviceGetDefaultMemPool cuMemsetD8_v2 cuMemcpyHtoD_v2
 * cuMemcpyDtoH_v2 cuArrayCreate_v2 cuArray3DCreate_v2 cuArrayDestroy
 * cuArrayGetMemoryRequirements cuMipmappedArrayCreate cuMipmappedArrayDestroy
 * cuMipmappedArrayGetMemoryRequirements cuMemGetAllocationGranularity
 * cuMemCreate cuMemRelease cuMemRetainAllocationHandle cuMemAddressReserve
 * cuMemAddressFree cuMemMap
 * cuMemUnmap cuMemSetAccess cuStreamCreate cuStreamDestroy_v2
 * cuStreamSynchronize(_ptsz) cuStreamQuery(_ptsz) cuStreamWaitEvent(_ptsz)
 * cuStreamGetCtx(_ptsz) cuStreamBeginCapture_v2(_ptsz) cuStreamEndCapture(_ptsz)
 * cuStreamIsCapturing(_ptsz) cuEventCreate cuEventRecord(_ptsz) cuEventQuery
 * cuEventSynchronize cuEventElapsedTime cuEventDestroy_v2 cuModuleLoadData
 * cuModuleGetFunction cuModuleUnload cuLaunchKernel(_ptsz)
 * cuLaunchCooperativeKernel(_ptsz) cuLaunchCooperativeKernelMultiDevice
 * cuLaunchKernelEx(_ptsz) cuGraphCreate cuGraphAddKernelNode(_v2)
 * cuGraphInstantiateWithFlags cuGraphLaunch(_ptsz) cuGraphExecDestroy
 * cuGraphDestroy cuGetErrorString cuGetErrorName cuGetProcAddress(_v2); and a
 * test hook, tsFakeCudaUsedExcept. Environment and limits:
 * tests/fakes/README.md.
 *
 * Built with -Bsymbolic: calls and addresses inside the library bind to its
 * own definitions even when an LD_PRELOAD library interposes the same names,
 * so cuGetProcAddress hands out the driver's own entry points, like libcuda.
 */
#define _GNU_SOURCE /* memfd_create, MAP_NORESERVE, MAP_ANONYMOUS */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "shim/cuda_types.h"

#define EXPORT __attribute__((visibility("default")))

/* Every entry point, declared from the shared list: a definition below that
 * strays from the real signature does not compile. */
#define FAKE_PROTO(name, params, args) EXPORT CUresult name params;
TS_CU_API(FAKE_PROTO)
#undef FAKE_PROTO

#define FAKE_MAX_DEVICES 16
#define FAKE_MAX_PROCS 64
#define FAKE_CTX_STACK_DEPTH 16
#define FAKE_PUSHBUF_DEPTH 1024
#define FAKE_HASH_BUCKETS 4096
#define FAKE_PITCH_ALIGN_BYTES 1024 /* pitched rows and array rows */
#define FAKE_FILL_BYTES_PER_NS 1000ULL /* 1 TB/s */
#define FAKE_SM_COUNT 132
#define FAKE_DEFAULT_MEM_BYTES (80ULL << 30)
#define FAKE_DEFAULT_GRANULARITY_BYTES (2ULL << 20)
#define FAKE_DEFAULT_DRIVER_VERSION 12040
#define FAKE_DEFAULT_NAME "NVIDIA H100 80GB HBM3"
#define FAKE_SHARED_MAGIC 0x46414b45u
#define NS_PER_MS 1000000.0
#define NS_PER_S 1000000000LL

enum {
    MAGIC_CTX = 0x43545831,
    MAGIC_STREAM = 0x53545231,
    MAGIC_EVENT = 0x45564e31,
    MAGIC_MODULE = 0x4d4f4431,
    MAGIC_GRAPH = 0x47524131,
    MAGIC_EXEC = 0x47455831,
    MAGIC_POOL = 0x504f4f31,
    MAGIC_ARRAY = 0x41525231,
    MAGIC_MIPMAP = 0x4d49501,
    MAGIC_HANDLE = 0x484e4431,
};

/* ---- state shared by every process on the simulated GPUs ---------------- */

struct fake_shared_dev {
    uint64_t used_bytes;
    int64_t busy_until_ns; /* the engine's tail */
    uint64_t busy_total_ns;
};

/* Device memory per process, so a dead process's memory is freed like the
 * driver frees it (checked with kill(pid, 0): good enough for tests). */
struct fake_shared_proc {
    int32_t pid; /* 0: free slot */
    uint64_t used_bytes[FAKE_MAX_DEVICES];
};

struct fake_shared {
    uint32_t magic;
    pthread_mutex_t lock; /* process-shared, robust */
    struct fake_shared_dev dev[FAKE_MAX_DEVICES];
    struct fake_shared_proc proc[FAKE_MAX_PROCS];
};

/* ---- process-local objects ------------------------------------------------
 * Objects are never free()d: a destroyed one keeps its memory with magic 0,
 * so validating a stale handle reads memory that is still ours. They stay
 * reachable from `objs`, which keeps leak checkers quiet. */

struct fobj {
    uint32_t magic;
    struct fobj *next_all;
};

struct fctx;

struct fstream {
    struct fobj o;
    struct fctx *ctx;
    int64_t tail_ns;
    int64_t ring[FAKE_PUSHBUF_DEPTH]; /* end times of the last commands */
    unsigned ring_pos;
    struct fgraph *capture;
};

struct fctx {
    struct fobj o;
    int dev;
    int primary;
    int refs; /* primary: retain count */
    struct fstream null_stream;
};

struct fevent {
    struct fobj o;
    unsigned flags;
    int recorded;
    int64_t ts_ns;
};

enum ffunc_kind { FUNC_SLEEP, FUNC_FILL };

struct ffunc {
    const char *name;
    enum ffunc_kind kind;
    int nparams;
};

static const struct ffunc fake_funcs[] = {
    {"ts_fake_sleep", FUNC_SLEEP, 1},
    {"ts_fake_fill", FUNC_FILL, 3},
};

struct fnode {
    const struct ffunc *f;
    uint64_t blocks;
    uint64_t p[3];
};

/* Graph memory (memory nodes, added or captured from cuMemAllocAsync): an
 * instantiated graph gets it from the device at its first launch and holds it
 * until destroyed; the device's graph memory pool then keeps it cached until
 * cuDeviceGraphMemTrim, as the driver's does. */
struct fgraph {
    struct fobj o;
    int n, cap;
    struct fnode *nodes;
    uint64_t mem_bytes; /* memory nodes, granularity multiples */
    int mem_dev;
};

struct fexec {
    struct fobj o;
    int n;
    struct fnode *nodes;
    uint64_t mem_bytes;
    int mem_dev;
    int mem_live; /* the memory is held (launched at least once) */
};

/* A stream-ordered pool, as the driver's: it reserves device memory as it
 * grows (charged to the device) and keeps what its frees return cached;
 * `used` is what live allocations hold. At a synchronisation it gives back
 * what it holds above max(used, release threshold); cuMemPoolTrimTo down to
 * max(used, the bytes to keep). Granularity multiples throughout. */
struct fpool {
    struct fobj o;
    int dev;
    int dead;             /* destroyed with allocations outstanding */
    uint64_t reserved, used, threshold, reserved_high, used_high;
};

struct farray {
    struct fobj o;
    int dev;
    uint64_t bytes;  /* what it needs (granularity multiple) */
    int deferred;    /* CUDA_ARRAY3D_DEFERRED_MAPPING: holds (and charges) nothing */
    struct fctx *ctx;
};

struct fhandle {
    struct fobj o;
    int fd;
    int dev;
    uint64_t bytes;
    int refs; /* creation + retains not yet released */
    int maps;
};

/* cuMemAlloc-family allocations, by address. */
struct falloc {
    uintptr_t addr;
    uint64_t bytes;   /* charged (granularity multiple); 0 for a pool's */
    struct fpool *pool; /* stream-ordered: the pool it came from */
    uint64_t pool_bytes;  /* what it holds of the pool's reservation */
    uint64_t mapped;  /* host mapping length */
    int dev;
    struct fctx *ctx;
    struct falloc *next;
};

struct freserve {
    uintptr_t base;
    size_t bytes;
};

struct fmap {
    uintptr_t va;
    size_t bytes;
    struct fhandle *h;
};

static struct {
    pthread_mutex_t lock; /* every process-local table below */
    int configured;
    int inited;
    int ndev;
    uint64_t capacity, granularity, ctx_bytes;
    int driver_version;
    char name[256];
    CUuuid uuid[FAKE_MAX_DEVICES];
    struct fake_shared *sh;
    int proc; /* our slot in sh->proc; -1: none (charges then go unattributed) */
    int state_fd; /* the shared state file; -1: private state */
    char state_path[256];
    struct fctx primary[FAKE_MAX_DEVICES];
    struct fpool default_pool[FAKE_MAX_DEVICES];
    struct fpool *current_pool[FAKE_MAX_DEVICES]; /* cuDeviceSetMemPool */
    uint64_t graph_cache[FAKE_MAX_DEVICES]; /* graph memory kept after its graph went */
    uint64_t graph_va;                      /* addresses handed to memory nodes */
    struct fobj *objs;
    struct falloc *allocs[FAKE_HASH_BUCKETS];
    struct freserve *res;
    int nres, capres;
    struct fmap *maps;
    int nmaps, capmaps;
} g = {.lock = PTHREAD_MUTEX_INITIALIZER, .proc = -1, .state_fd = -1};

static _Thread_local struct {
    struct fctx *stack[FAKE_CTX_STACK_DEPTH];
    int depth;
} tls;

/* ---- small helpers -------------------------------------------------------- */

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * NS_PER_S + ts.tv_nsec;
}

static void sleep_until(int64_t t_ns)
{
    struct timespec ts = {.tv_sec = t_ns / NS_PER_S, .tv_nsec = t_ns % NS_PER_S};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

static uint64_t round_up(uint64_t v, uint64_t to) { return (v + to - 1) / to * to; }

/* "123", "4K", "512M", "80G" -> bytes; 0 on junk. */
static uint64_t parse_bytes(const char *s, uint64_t dflt)
{
    if (!s || !*s)
        return dflt;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    switch (*end) {
    case 'K': case 'k': v <<= 10; end++; break;
    case 'M': case 'm': v <<= 20; end++; break;
    case 'G': case 'g': v <<= 30; end++; break;
    default: break;
    }
    return *end ? dflt : v;
}

/* Every object address ever handed out, so a handle is checked before it is
 * read (an application may pass anything). Open addressing; never shrinks,
 * as objects are never freed. Leaf lock: taken with or without g.lock. */
static struct {
    pthread_mutex_t lock;
    const void **slot;
    size_t cap, n;
} objset = {.lock = PTHREAD_MUTEX_INITIALIZER};

static size_t objset_home(const void *p, size_t cap)
{
    return (size_t)(((uintptr_t)p * 0x9e3779b97f4a7c15ULL) >> 20) & (cap - 1);
}

static int objset_add_locked(const void *p)
{
    if ((objset.n + 1) * 2 > objset.cap) {
        size_t cap = objset.cap ? objset.cap * 2 : 1024;
        const void **ns = calloc(cap, sizeof *ns);
        if (!ns)
            return -1;
        for (size_t i = 0; i < objset.cap; i++)
            if (objset.slot[i]) {
                size_t j = objset_home(objset.slot[i], cap);
                while (ns[j])
                    j = (j + 1) & (cap - 1);
                ns[j] = objset.slot[i];
            }
        free(objset.slot);
        objset.slot = ns;
        objset.cap = cap;
    }
    size_t j = objset_home(p, objset.cap);
    while (objset.slot[j] && objset.slot[j] != p)
        j = (j + 1) & (objset.cap - 1);
    objset.n += !objset.slot[j];
    objset.slot[j] = p;
    return 0;
}

static int objset_add(const void *p)
{
    pthread_mutex_lock(&objset.lock);
    int rc = objset_add_locked(p);
    pthread_mutex_unlock(&objset.lock);
    return rc;
}

static int objset_has(const void *p)
{
    int found = 0;
    pthread_mutex_lock(&objset.lock);
    if (objset.cap) {
        size_t j = objset_home(p, objset.cap);
        while (objset.slot[j] && objset.slot[j] != p)
            j = (j + 1) & (objset.cap - 1);
        found = objset.slot[j] == p;
    }
    pthread_mutex_unlock(&objset.lock);
    return found;
}

static void *obj_new(size_t size, uint32_t magic)
{
    struct fobj *o = calloc(1, size);
    if (!o)
        return NULL;
    if (objset_add(o) != 0) {
        free(o);
        return NULL;
    }
    o->magic = magic;
    o->next_all = g.objs;
    g.objs = o;
    return o;
}

static int obj_is(const void *p, uint32_t magic)
{
    return p && objset_has(p) && ((const struct fobj *)p)->magic == magic;
}

static void shared_lock(void)
{
    if (pthread_mutex_lock(&g.sh->lock) == EOWNERDEAD)
        pthread_mutex_consistent(&g.sh->lock); /* the engine state is all single words */
}

static void shared_unlock(void) { pthread_mutex_unlock(&g.sh->lock); }

static void shared_init(struct fake_shared *sh)
{
    memset(sh, 0, sizeof *sh);
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
    pthread_mutex_init(&sh->lock, &a);
    pthread_mutexattr_destroy(&a);
    __atomic_store_n(&sh->magic, FAKE_SHARED_MAGIC, __ATOMIC_RELEASE);
}

/* Maps the device state: the file named by TESSERA_FAKE_CUDA_STATE (shared
 * with every process naming it; created and initialised under flock), or
 * private memory. */
static struct fake_shared *shared_map(void)
{
    const char *path = getenv("TESSERA_FAKE_CUDA_STATE");
    if (path && *path) {
        int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        if (fd >= 0 && flock(fd, LOCK_EX) == 0) {
            struct stat st;
            int ok = fstat(fd, &st) == 0 &&
                     (st.st_size >= (off_t)sizeof(struct fake_shared) ||
                      ftruncate(fd, sizeof(struct fake_shared)) == 0);
            void *m = ok ? mmap(NULL, sizeof(struct fake_shared), PROT_READ | PROT_WRITE,
                                MAP_SHARED, fd, 0)
                         : MAP_FAILED;
            if (m != MAP_FAILED) {
                struct fake_shared *sh = m;
                if (__atomic_load_n(&sh->magic, __ATOMIC_ACQUIRE) != FAKE_SHARED_MAGIC)
                    shared_init(sh);
                flock(fd, LOCK_UN);
                g.state_fd = fd; /* kept: our process slot is locked through it */
                snprintf(g.state_path, sizeof g.state_path, "%s", path);
                return sh;
            }
        }
        if (fd >= 0)
            close(fd);
    }
    void *m = mmap(NULL, sizeof(struct fake_shared), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return NULL;
    shared_init(m);
    return m;
}

static void parse_uuid(const char *s, CUuuid *u)
{
    /* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (prefix optional) */
    if (strncmp(s, "GPU-", 4) == 0)
        s += 4;
    int k = 0;
    for (; *s && *s != ',' && k < 16; s++) {
        if (*s == '-')
            continue;
        unsigned v;
        if (sscanf(s, "%2x", &v) != 1)
            break;
        u->bytes[k++] = (char)v;
        s++;
        if (!*s)
            break;
    }
}

/* Reads the environment once (cuInit, cuGetProcAddress or cuDriverGetVersion). */
static void configure_locked(void)
{
    if (g.configured)
        return;
    const char *n = getenv("TESSERA_FAKE_CUDA_DEVICES");
    g.ndev = n && *n ? atoi(n) : 1;
    if (g.ndev < 0)
        g.ndev = 0;
    if (g.ndev > FAKE_MAX_DEVICES)
        g.ndev = FAKE_MAX_DEVICES;
    g.capacity = parse_bytes(getenv("TESSERA_FAKE_CUDA_MEM_BYTES"), FAKE_DEFAULT_MEM_BYTES);
    g.granularity = parse_bytes(getenv("TESSERA_FAKE_CUDA_GRANULARITY"),
                                FAKE_DEFAULT_GRANULARITY_BYTES);
    if (g.granularity == 0 || (g.granularity & (g.granularity - 1)) ||
        g.granularity % (uint64_t)sysconf(_SC_PAGESIZE))
        g.granularity = FAKE_DEFAULT_GRANULARITY_BYTES;
    g.ctx_bytes = parse_bytes(getenv("TESSERA_FAKE_CUDA_CTX_BYTES"), 0);
    const char *v = getenv("TESSERA_FAKE_CUDA_DRIVER_VERSION");
    g.driver_version = v && *v ? atoi(v) : FAKE_DEFAULT_DRIVER_VERSION;
    const char *nm = getenv("TESSERA_FAKE_CUDA_NAME");
    snprintf(g.name, sizeof g.name, "%s", nm && *nm ? nm : FAKE_DEFAULT_NAME);
    const char *uu = getenv("TESSERA_FAKE_CUDA_UUIDS");
    for (int d = 0; d < FAKE_MAX_DEVICES; d++) {
        static const unsigned char base[16] = {0x7e, 0x55, 0xe2, 0xa0, 0xfa, 0x4e, 0x40, 0x00,
                                               0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
        memcpy(g.uuid[d].bytes, base, 16);
        g.uuid[d].bytes[15] = (char)d;
    }
    for (int d = 0; uu && *uu && d < g.ndev; d++) {
        parse_uuid(uu, &g.uuid[d]);
        uu = strchr(uu, ',');
        if (uu)
            uu++;
    }
    for (int d = 0; d < FAKE_MAX_DEVICES; d++) {
        objset_add(&g.primary[d]);
        objset_add(&g.primary[d].null_stream);
        objset_add(&g.default_pool[d]);
        g.primary[d].o.magic = MAGIC_CTX;
        g.primary[d].dev = d;
        g.primary[d].primary = 1;
        g.primary[d].null_stream.o.magic = MAGIC_STREAM;
        g.primary[d].null_stream.ctx = &g.primary[d];
        g.default_pool[d].o.magic = MAGIC_POOL;
        g.default_pool[d].dev = d;
    }
    g.configured = 1;
}

static struct fctx *current_ctx(void)
{
    return tls.depth > 0 ? tls.stack[tls.depth - 1] : NULL;
}

/* Common entry checks: initialised, and (need_ctx) a live current context. */
#define NEED_INIT()                                                                           \
    do {                                                                                      \
        if (!__atomic_load_n(&g.inited, __ATOMIC_ACQUIRE))                                    \
            return CUDA_ERROR_NOT_INITIALIZED;                                                \
    } while (0)

static CUresult need_ctx(struct fctx **out)
{
    if (!__atomic_load_n(&g.inited, __ATOMIC_ACQUIRE))
        return CUDA_ERROR_NOT_INITIALIZED;
    struct fctx *c = current_ctx();
    if (!obj_is(c, MAGIC_CTX) || (c->primary && c->refs == 0))
        return CUDA_ERROR_INVALID_CONTEXT;
    *out = c;
    return CUDA_SUCCESS;
}

static int dev_ok(CUdevice d) { return d >= 0 && d < g.ndev; }

/* ---- device memory accounting --------------------------------------------- */

/* A process owns its slot through an open-file-description lock on byte
 * PROC_LOCK_BASE + slot of the state file, which the kernel drops when the
 * process's descriptors close as it dies - the moment the real driver frees
 * a dead process's memory (its device files close then too). */
#define PROC_LOCK_BASE (1 << 20)

static int proc_lock(int slot, short type, int cmd)
{
    struct flock fl;
    memset(&fl, 0, sizeof fl);
    fl.l_type = type;
    fl.l_whence = SEEK_SET;
    fl.l_start = PROC_LOCK_BASE + slot;
    fl.l_len = 1;
    if (fcntl(g.state_fd, cmd, &fl) != 0)
        return -1;
    return cmd == F_OFD_GETLK ? fl.l_type != F_UNLCK : 0;
}

/* Frees what dead processes held. Shared lock held. */
static void reap_dead_locked(void)
{
    if (g.state_fd < 0)
        return; /* private state: only us */
    for (int i = 0; i < FAKE_MAX_PROCS; i++) {
        struct fake_shared_proc *p = &g.sh->proc[i];
        if (!p->pid || i == g.proc || proc_lock(i, F_WRLCK, F_OFD_GETLK) != 0)
            continue; /* free, ours, alive, or cannot tell */
        for (int d = 0; d < FAKE_MAX_DEVICES; d++) {
            uint64_t *u = &g.sh->dev[d].used_bytes;
            *u -= p->used_bytes[d] < *u ? p->used_bytes[d] : *u;
        }
        memset(p, 0, sizeof *p);
    }
}

/* Takes a process slot (at cuInit, and again in a forked child, which opens
 * its own descriptor so that its slot dies with it). */
static void proc_register(void)
{
    if (g.state_fd < 0)
        return;
    shared_lock();
    reap_dead_locked();
    g.proc = -1;
    for (int i = 0; i < FAKE_MAX_PROCS && g.proc < 0; i++)
        if (!g.sh->proc[i].pid && proc_lock(i, F_WRLCK, F_OFD_SETLK) == 0) {
            memset(&g.sh->proc[i], 0, sizeof g.sh->proc[i]);
            g.sh->proc[i].pid = (int32_t)getpid();
            g.proc = i;
        }
    shared_unlock();
}

static void proc_register_child(void)
{
    if (g.state_fd < 0)
        return;
    int fd = open(g.state_path, O_RDWR | O_CLOEXEC);
    close(g.state_fd);
    g.state_fd = fd;
    g.proc = -1;
    if (fd >= 0)
        proc_register();
}

static CUresult charge(int dev, uint64_t bytes)
{
    CUresult r = CUDA_SUCCESS;
    if (dev < 0) /* host memory (a host or NUMA location) */
        return CUDA_SUCCESS;
    shared_lock();
    if (g.sh->dev[dev].used_bytes + bytes > g.capacity)
        reap_dead_locked();
    if (g.sh->dev[dev].used_bytes + bytes > g.capacity) {
        r = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
        g.sh->dev[dev].used_bytes += bytes;
        if (g.proc >= 0)
            g.sh->proc[g.proc].used_bytes[dev] += bytes;
    }
    shared_unlock();
    return r;
}

static void uncharge(int dev, uint64_t bytes)
{
    if (dev < 0)
        return;
    shared_lock();
    uint64_t *u = &g.sh->dev[dev].used_bytes;
    *u -= bytes < *u ? bytes : *u;
    if (g.proc >= 0) {
        uint64_t *m = &g.sh->proc[g.proc].used_bytes[dev];
        *m -= bytes < *m ? bytes : *m;
    }
    shared_unlock();
}

static unsigned bucket(uintptr_t a)
{
    return (unsigned)((a >> 12) * 2654435761u) % FAKE_HASH_BUCKETS;
}

/* Host memory behind cuMemAlloc-family allocations. Freed mappings of up to
 * FAKE_RECYCLE_GRANULES granules are kept per size and handed out again
 * (stale contents, like device memory), so an allocation costs about what
 * a driver's sub-allocator does rather than an mmap. g.lock held. */
#define FAKE_RECYCLE_GRANULES 32
#define FAKE_RECYCLE_DEPTH 1024

static struct {
    void *stack[FAKE_RECYCLE_GRANULES + 1][FAKE_RECYCLE_DEPTH];
    int n[FAKE_RECYCLE_GRANULES + 1];
} recycle;

static void *host_get(uint64_t bytes)
{
    uint64_t k = bytes / g.granularity;
    if (k <= FAKE_RECYCLE_GRANULES && recycle.n[k] > 0)
        return recycle.stack[k][--recycle.n[k]];
    return mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                -1, 0);
}

static void host_put(void *m, uint64_t bytes)
{
    uint64_t k = bytes / g.granularity;
    if (k <= FAKE_RECYCLE_GRANULES && recycle.n[k] < FAKE_RECYCLE_DEPTH)
        recycle.stack[k][recycle.n[k]++] = m;
    else
        munmap(m, bytes);
}

/* ---- stream-ordered pools (g.lock held) ---- */

/* Gives back what p reserves above max(used, keep). */
static void pool_shrink_locked(struct fpool *p, uint64_t keep)
{
    uint64_t floor = round_up(p->used > keep ? p->used : keep, g.granularity);
    if (p->reserved > floor) {
        uncharge(p->dev, p->reserved - floor);
        p->reserved = floor;
    }
}

/* A synchronisation: every pool of dev (all devices: -1) releases what it
 * holds above its release threshold, as the driver's pools do. */
static void pools_settle_locked(int dev)
{
    for (int d = 0; d < g.ndev; d++)
        if (dev < 0 || d == dev)
            pool_shrink_locked(&g.default_pool[d], g.default_pool[d].threshold);
    for (struct fobj *o = g.objs; o; o = o->next_all)
        if (o->magic == MAGIC_POOL && (dev < 0 || ((struct fpool *)o)->dev == dev))
            pool_shrink_locked((struct fpool *)o, ((struct fpool *)o)->threshold);
}

/* An allocation freed back to its pool: cached, still reserved (a destroyed
 * pool frees it for good). */
static void pool_return_locked(struct falloc *a)
{
    struct fpool *p = a->pool;
    if (!p)
        return;
    p->used -= a->pool_bytes < p->used ? a->pool_bytes : p->used;
    if (p->dead)
        pool_shrink_locked(p, 0);
}

/* `bytes` from pool p for ctx: the cache first, the device for the rest. */
static CUresult pool_alloc_locked(struct fpool *p, struct fctx *ctx, uint64_t bytes,
                                  CUdeviceptr *out)
{
    if (!out || bytes == 0)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t rounded = round_up(bytes, g.granularity);
    uint64_t cached = p->reserved - p->used;
    uint64_t grow = rounded > cached ? rounded - cached : 0;
    if (grow && charge(p->dev, grow) != CUDA_SUCCESS)
        return CUDA_ERROR_OUT_OF_MEMORY;
    void *m = host_get(rounded);
    struct falloc *a = m == MAP_FAILED ? NULL : malloc(sizeof *a);
    if (!a) {
        if (m != MAP_FAILED)
            host_put(m, rounded);
        uncharge(p->dev, grow);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    p->reserved += grow;
    p->used += rounded;
    if (p->reserved > p->reserved_high)
        p->reserved_high = p->reserved;
    if (p->used > p->used_high)
        p->used_high = p->used;
    *a = (struct falloc){.addr = (uintptr_t)m, .bytes = 0, .pool = p, .pool_bytes = rounded,
                         .mapped = rounded, .dev = ctx->dev, .ctx = ctx};
    unsigned b = bucket(a->addr);
    a->next = g.allocs[b];
    g.allocs[b] = a;
    *out = (CUdeviceptr)a->addr;
    return CUDA_SUCCESS;
}

/* A memory node of `bytes` in graph gr on dev: an address of its own (never
 * backed: the fake's kernels do not touch graph memory). */
static CUresult graph_mem_node_locked(struct fgraph *gr, int dev, uint64_t bytes,
                                      CUdeviceptr *dptr)
{
    if (!dptr || bytes == 0 || (gr->mem_bytes && gr->mem_dev != dev))
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t rounded = round_up(bytes, g.granularity);
    if (!g.graph_va)
        g.graph_va = 0x7e0000000000ULL;
    *dptr = (CUdeviceptr)g.graph_va;
    g.graph_va += rounded;
    gr->mem_bytes += rounded;
    gr->mem_dev = dev;
    return CUDA_SUCCESS;
}

/* An allocation of `bytes` (before rounding) in ctx, host-backed. */
static CUresult alloc_locked(struct fctx *ctx, uint64_t bytes, CUdeviceptr *out)
{
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    if (bytes == 0)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t rounded = round_up(bytes, g.granularity);
    CUresult r = charge(ctx->dev, rounded);
    if (r != CUDA_SUCCESS)
        return r;
    void *m = host_get(rounded);
    struct falloc *a = m == MAP_FAILED ? NULL : malloc(sizeof *a);
    if (!a) {
        if (m != MAP_FAILED)
            host_put(m, rounded);
        uncharge(ctx->dev, rounded);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    a->addr = (uintptr_t)m;
    a->bytes = rounded;
    a->pool = NULL;
    a->pool_bytes = 0;
    a->mapped = rounded;
    a->dev = ctx->dev;
    a->ctx = ctx;
    unsigned b = bucket(a->addr);
    a->next = g.allocs[b];
    g.allocs[b] = a;
    *out = (CUdeviceptr)a->addr;
    return CUDA_SUCCESS;
}

static CUresult free_locked(CUdeviceptr p)
{
    if (p == 0)
        return CUDA_SUCCESS;
    struct falloc **pp = &g.allocs[bucket((uintptr_t)p)];
    for (; *pp; pp = &(*pp)->next)
        if ((*pp)->addr == (uintptr_t)p) {
            struct falloc *a = *pp;
            *pp = a->next;
            host_put((void *)a->addr, a->mapped);
            uncharge(a->dev, a->bytes);
            pool_return_locked(a);
            free(a);
            return CUDA_SUCCESS;
        }
    return CUDA_ERROR_INVALID_VALUE;
}

/* A context going away takes its allocations and arrays with it. */
static void ctx_release_memory_locked(struct fctx *ctx)
{
    for (int b = 0; b < FAKE_HASH_BUCKETS; b++) {
        struct falloc **pp = &g.allocs[b];
        while (*pp) {
            struct falloc *a = *pp;
            if (a->ctx == ctx) {
                *pp = a->next;
                host_put((void *)a->addr, a->mapped);
                uncharge(a->dev, a->bytes);
                pool_return_locked(a);
                free(a);
            } else {
                pp = &a->next;
            }
        }
    }
    for (struct fobj *o = g.objs; o; o = o->next_all)
        if ((o->magic == MAGIC_ARRAY || o->magic == MAGIC_MIPMAP) &&
            ((struct farray *)o)->ctx == ctx) {
            if (!((struct farray *)o)->deferred)
                uncharge(((struct farray *)o)->dev, ((struct farray *)o)->bytes);
            o->magic = 0;
        }
    uncharge(ctx->dev, g.ctx_bytes);
}

/* ---- time on the engine ---------------------------------------------------- */

static CUresult stream_resolve(CUstream hs, struct fstream **out)
{
    if (hs == NULL || hs == TS_CU_STREAM_LEGACY || hs == TS_CU_STREAM_PER_THREAD) {
        struct fctx *c;
        CUresult r = need_ctx(&c);
        if (r != CUDA_SUCCESS)
            return r;
        *out = &c->null_stream;
        return CUDA_SUCCESS;
    }
    NEED_INIT();
    struct fstream *s = (struct fstream *)hs;
    if (!obj_is(s, MAGIC_STREAM))
        return CUDA_ERROR_INVALID_HANDLE;
    *out = s;
    return CUDA_SUCCESS;
}

/* Queues `dur_ns` of work on s; blocks while the pushbuffer is full. */
static void enqueue(struct fstream *s, int64_t dur_ns)
{
    pthread_mutex_lock(&g.lock);
    int dev = s->ctx->dev;
    shared_lock();
    int64_t now = now_ns();
    int64_t start = max64(now, max64(s->tail_ns, g.sh->dev[dev].busy_until_ns));
    int64_t end = start + dur_ns;
    g.sh->dev[dev].busy_until_ns = end;
    g.sh->dev[dev].busy_total_ns += (uint64_t)dur_ns;
    shared_unlock();
    s->tail_ns = end;
    int64_t oldest = s->ring[s->ring_pos];
    s->ring[s->ring_pos] = end;
    s->ring_pos = (s->ring_pos + 1) % FAKE_PUSHBUF_DEPTH;
    pthread_mutex_unlock(&g.lock);
    if (oldest > now)
        sleep_until(oldest);
}

static uint64_t param_u64(void **kp, void **extra, int i)
{
    uint64_t v = 0;
    if (kp && kp[i]) {
        memcpy(&v, kp[i], i == 2 ? sizeof(uint32_t) : sizeof v);
        return v;
    }
    for (int k = 0; extra && extra[k] != TS_CU_LAUNCH_PARAM_END; k += 2)
        if (extra[k] == TS_CU_LAUNCH_PARAM_BUFFER_POINTER && extra[k + 1]) {
            memcpy(&v, (char *)extra[k + 1] + 8 * i, i == 2 ? sizeof(uint32_t) : sizeof v);
            return v;
        }
    return 0;
}

static int64_t node_duration(const struct fnode *n)
{
    if (n->f->kind == FUNC_SLEEP)
        return (int64_t)(n->p[0] * n->blocks);
    return (int64_t)(n->p[1] / FAKE_FILL_BYTES_PER_NS);
}

static void node_effect(const struct fnode *n)
{
    if (n->f->kind == FUNC_FILL && n->p[0] && n->p[1])
        memset((void *)(uintptr_t)n->p[0], (int)(n->p[2] & 0xff), n->p[1]);
}

static CUresult make_node(CUfunction f, unsigned gx, unsigned gy, unsigned gz, void **kp,
                          void **extra, struct fnode *n)
{
    const struct ffunc *ff = (const struct ffunc *)f;
    if (ff < fake_funcs || ff >= fake_funcs + sizeof fake_funcs / sizeof fake_funcs[0])
        return CUDA_ERROR_INVALID_HANDLE;
    if (gx == 0 || gy == 0 || gz == 0)
        return CUDA_ERROR_INVALID_VALUE;
    n->f = ff;
    n->blocks = (uint64_t)gx * gy * gz;
    memset(n->p, 0, sizeof n->p);
    for (int i = 0; i < ff->nparams; i++)
        n->p[i] = param_u64(kp, extra, i);
    return CUDA_SUCCESS;
}

static CUresult graph_append(struct fgraph *gr, const struct fnode *n, int count)
{
    pthread_mutex_lock(&g.lock);
    if (gr->n + count > gr->cap) {
        int cap = (gr->n + count) * 2 + 8;
        struct fnode *nn = realloc(gr->nodes, (size_t)cap * sizeof *nn);
        if (!nn) {
            pthread_mutex_unlock(&g.lock);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        gr->nodes = nn;
        gr->cap = cap;
    }
    memcpy(gr->nodes + gr->n, n, (size_t)count * sizeof *n);
    gr->n += count;
    pthread_mutex_unlock(&g.lock);
    return CUDA_SUCCESS;
}

/* Runs `count` nodes back to back on stream hs as one command (or records
 * them into the stream's capture graph). */
static CUresult run_nodes(CUstream hs, const struct fnode *n, int count)
{
    struct fstream *s;
    CUresult r = stream_resolve(hs, &s);
    if (r != CUDA_SUCCESS)
        return r;
    if (s->capture)
        return graph_append(s->capture, n, count);
    int64_t dur = 0;
    for (int i = 0; i < count; i++) {
        node_effect(&n[i]);
        dur += node_duration(&n[i]);
    }
    enqueue(s, dur);
    return CUDA_SUCCESS;
}

static CUresult launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, CUstream hs,
                       void **kp, void **extra)
{
    NEED_INIT();
    struct fnode n;
    CUresult r = make_node(f, gx, gy, gz, kp, extra, &n);
    return r != CUDA_SUCCESS ? r : run_nodes(hs, &n, 1);
}

/* ---- initialisation, devices ---------------------------------------------- */

EXPORT CUresult cuInit(unsigned int Flags)
{
    if (Flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g.lock);
    configure_locked();
    if (!g.sh) {
        g.sh = shared_map();
        if (g.sh) {
            proc_register();
            pthread_atfork(NULL, NULL, proc_register_child);
        }
    }
    CUresult r = !g.sh ? CUDA_ERROR_OUT_OF_MEMORY : g.ndev == 0 ? CUDA_ERROR_NO_DEVICE
                                                               : CUDA_SUCCESS;
    if (r == CUDA_SUCCESS)
        __atomic_store_n(&g.inited, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&g.lock);
    return r;
}

EXPORT CUresult cuDriverGetVersion(int *driverVersion)
{
    if (!driverVersion)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g.lock);
    configure_locked();
    *driverVersion = g.driver_version;
    pthread_mutex_unlock(&g.lock);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
    NEED_INIT();
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    if (!dev_ok(ordinal))
        return CUDA_ERROR_INVALID_DEVICE;
    *device = ordinal;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetCount(int *count)
{
    NEED_INIT();
    if (!count)
        return CUDA_ERROR_INVALID_VALUE;
    *count = g.ndev;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
    NEED_INIT();
    if (!name || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (!dev_ok(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    snprintf(name, (size_t)len, "%s", g.name);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
    NEED_INIT();
    if (!uuid)
        return CUDA_ERROR_INVALID_VALUE;
    if (!dev_ok(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    *uuid = g.uuid[dev];
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev)
{
    return cuDeviceGetUuid(uuid, dev);
}

EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    NEED_INIT();
    if (!bytes)
        return CUDA_ERROR_INVALID_VALUE;
    if (!dev_ok(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    *bytes = g.capacity;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
    NEED_INIT();
    if (!pi)
        return CUDA_ERROR_INVALID_VALUE;
    if (!dev_ok(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    switch (attrib) {
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *pi = FAKE_SM_COUNT; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *pi = 9; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *pi = 0; break;
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: *pi = 1; break;
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED: *pi = 1; break;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

/* ---- contexts --------------------------------------------------------------- */

EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    NEED_INIT();
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    if (!dev_ok(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&g.lock);
    struct fctx *c = &g.primary[dev];
    CUresult r = CUDA_SUCCESS;
    if (c->refs == 0)
        r = charge(dev, g.ctx_bytes);
    if (r == CUDA_SUCCESS) {
        c->refs++;
        *pctx = (CUcontext)c;
    }
    pthread_mutex_unlock(&g.lock);
    return r;
}

static CUresult primary_release(CUdevice dev, int reset)
{
    NEED_INIT();
    if (!dev_ok(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&g.lock);
    struct fctx *c = &g.primary[dev];
    CUresult r = CUDA_SUCCESS;
    if (c->refs == 0 && !reset)
        r = CUDA_ERROR_INVALID_CONTEXT;
    else if (c->refs > 0 && (reset || --c->refs == 0)) {
        c->refs = 0;
        ctx_release_memory_locked(c);
    }
    pthread_mutex_unlock(&g.lock);
    return r;
}

EXPORT CUresult cuDevicePrimaryCtxRelease(CUdevice dev) { return primary_release(dev, 0); }
EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) { return primary_release(dev, 0); }
EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev) { return primary_release(dev, 1); }

static CUresult ctx_create(CUcontext *pctx, CUdevice dev)
{
    NEED_INIT();
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    if (!dev_ok(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    if (tls.depth >= FAKE_CTX_STACK_DEPTH)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&g.lock);
    CUresult r = charge(dev, g.ctx_bytes);
    struct fctx *c = r == CUDA_SUCCESS ? obj_new(sizeof *c, MAGIC_CTX) : NULL;
    if (r == CUDA_SUCCESS && !c) {
        uncharge(dev, g.ctx_bytes);
        r = CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (c) {
        c->dev = dev;
        c->null_stream.o.magic = MAGIC_STREAM;
        objset_add(&c->null_stream);
        c->null_stream.ctx = c;
        tls.stack[tls.depth++] = c;
        *pctx = (CUcontext)c;
    }
    pthread_mutex_unlock(&g.lock);
    return r;
}

EXPORT CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    (void)flags;
    return ctx_create(pctx, dev);
}

EXPORT CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *paramsArray,
                               int numParams, unsigned int flags, CUdevice dev)
{
    (void)flags;
    if (numParams < 0 || (numParams > 0 && !paramsArray))
        return CUDA_ERROR_INVALID_VALUE;
    return ctx_create(pctx, dev);
}

EXPORT CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *ctxCreateParams,
                               unsigned int flags, CUdevice dev)
{
    (void)flags;
    (void)ctxCreateParams;
    return ctx_create(pctx, dev);
}

EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx)
{
    NEED_INIT();
    struct fctx *c = (struct fctx *)ctx;
    if (!obj_is(c, MAGIC_CTX) || c->primary)
        return CUDA_ERROR_INVALID_CONTEXT;
    pthread_mutex_lock(&g.lock);
    ctx_release_memory_locked(c);
    c->o.magic = 0;
    c->null_stream.o.magic = 0;
    pthread_mutex_unlock(&g.lock);
    for (int i = 0; i < tls.depth; i++)
        if (tls.stack[i] == c) {
            memmove(tls.stack + i, tls.stack + i + 1,
                    (size_t)(tls.depth - i - 1) * sizeof tls.stack[0]);
            tls.depth--;
            i--;
        }
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxSetCurrent(CUcontext ctx)
{
    NEED_INIT();
    struct fctx *c = (struct fctx *)ctx;
    if (c && !obj_is(c, MAGIC_CTX))
        return CUDA_ERROR_INVALID_CONTEXT;
    if (!c) {
        if (tls.depth > 0)
            tls.depth--;
        return CUDA_SUCCESS;
    }
    if (tls.depth == 0)
        tls.depth = 1;
    tls.stack[tls.depth - 1] = c;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxGetCurrent(CUcontext *pctx)
{
    NEED_INIT();
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    *pctx = (CUcontext)current_ctx();
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxPushCurrent_v2(CUcontext ctx)
{
    NEED_INIT();
    if (!obj_is(ctx, MAGIC_CTX))
        return CUDA_ERROR_INVALID_CONTEXT;
    if (tls.depth >= FAKE_CTX_STACK_DEPTH)
        return CUDA_ERROR_OUT_OF_MEMORY;
    tls.stack[tls.depth++] = (struct fctx *)ctx;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxPopCurrent_v2(CUcontext *pctx)
{
    NEED_INIT();
    if (tls.depth == 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    struct fctx *c = tls.stack[--tls.depth];
    if (pctx)
        *pctx = (CUcontext)c;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxGetDevice(CUdevice *device)
{
    struct fctx *c;
    CUresult r = need_ctx(&c);
    if (r != CUDA_SUCCESS)
        return r;
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    *device = c->dev;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxSynchronize(void)
{
    struct fctx *c;
    CUresult r = need_ctx(&c);
    if (r != CUDA_SUCCESS)
        return r;
    int64_t until = 0;
    pthread_mutex_lock(&g.lock);
    for (struct fobj *o = g.objs; o; o = o->next_all)
        if (o->magic == MAGIC_STREAM && ((struct fstream *)o)->ctx == c)
            until = max64(until, ((struct fstream *)o)->tail_ns);
    until = max64(until, c->null_stream.tail_ns);
    pthread_mutex_unlock(&g.lock);
    sleep_until(until);
    pthread_mutex_lock(&g.lock);
    pools_settle_locked(c->dev);
    pthread_mutex_unlock(&g.lock);
    return CUDA_SUCCESS;
}

/* ---- cuMemAlloc family ------------------------------------------------------ */

EXPORT CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total)
{
    struct fctx *c;
    CUresult r = need_ctx(&c);
    if (r != CUDA_SUCCESS)
        return r;
    if (!free_bytes || !total)
        return CUDA_ERROR_INVALID_VALUE;
    shared_lock();
    reap_dead_locked();
    uint64_t used = g.sh->dev[c->dev].used_bytes;
    shared_unlock();
    *total = g.capacity;
    *free_bytes = used > g.capacity ? 0 : g.capacity - used;
    return CUDA_SUCCESS;
}

static CUresult alloc_in_current(CUdeviceptr *dptr, uint64_t bytes)
{
    struct fctx *c;
    CUresult r = need_ctx(&c);
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&g.lock);
    r = alloc_locked(c, bytes, dptr);
    pthread_mutex_unlock(&g.lock);
    return r;
}

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    return alloc_in_current(dptr, bytesize);
}

EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes,
                                   size_t Height, unsigned int ElementSizeBytes)
{
    if (!pPitch || WidthInBytes == 0 || Height == 0 ||
        (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16))
        return CUDA_ERROR_INVALID_VALUE;
    size_t pitch = (size_t)round_up(WidthInBytes, FAKE_PITCH_ALIGN_BYTES);
    CUresult r = alloc_in_current(dptr, (uint64_t)pitch * Height);
    if (r == CUDA_SUCCESS)
        *pPitch = pitch;
    return r;
}

EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    if (flags != TS_CU_MEM_ATTACH_GLOBAL && flags != TS_CU_MEM_ATTACH_HOST)
        return CUDA_ERROR_INVALID_VALUE;
    return alloc_in_current(dptr, bytesize); /* resident on the device */
}

EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    NEED_INIT();
    pthread_mutex_lock(&g.lock);
    CUresult r = free_locked(dptr);
    pthread_mutex_unlock(&g.lock);
    return r;
}

static CUresult alloc_async(CUdeviceptr *dptr, size_t bytes, struct fpool *pool, CUstream hs)
{
    struct fstream *s;
    CUresult r = stream_resolve(hs, &s);
    if (r != CUDA_SUCCESS)
        return r;
    if (!obj_is(pool, MAGIC_POOL))
        return CUDA_ERROR_INVALID_VALUE;
    if (pool->dev != s->ctx->dev)
        return CUDA_ERROR_INVALID_VALUE;
    if (pool->dead)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g.lock);
    if (s->capture) { /* a memory node of the graph being captured */
        r = graph_mem_node_locked(s->capture, s->ctx->dev, bytes, dptr);
        pthread_mutex_unlock(&g.lock);
        return r;
    }
    r = pool_alloc_locked(pool, s->ctx, bytes, dptr);
    pthread_mutex_unlock(&g.lock);
    return r;
}

EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    struct fstream *s;
    CUresult r = stream_resolve(hStream, &s);
    if (r != CUDA_SUCCESS)
        return r;
    struct fpool *cur = g.current_pool[s->ctx->dev];
    return alloc_async(dptr, bytesize, cur ? cur : &g.default_pool[s->ctx->dev], hStream);
}

EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    return cuMemAllocAsync(dptr, bytesize, hStream);
}

EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                        CUstream hStream)
{
    return alloc_async(dptr, bytesize, (struct fpool *)pool, hStream);
}

EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize,
                                             CUmemoryPool pool, CUstream hStream)
{
    return alloc_async(dptr, bytesize, (struct fpool *)pool, hStream);
}

EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
    struct fstream *s;
    CUresult r = stream_resolve(hStream, &s);
    if (r != CUDA_SUCCESS)
        return r;
    if (dptr == 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (s->capture)
        return CUDA_SUCCESS; /* a free node: the graph's memory lives with its instance */
    return cuMemFree_v2(dptr);
}

EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
    return cuMemFreeAsync(dptr, hStream);
}

EXPORT CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *poolProps)
{
    NEED_INIT();
    if (!pool || !poolProps || poolProps->allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
        poolProps->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
        return CUDA_ERROR_INVALID_VALUE;
    if (!dev_ok(poolProps->location.id))
        return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&g.lock);
    struct fpool *p = obj_new(sizeof *p, MAGIC_POOL);
    if (p)
        p->dev = poolProps->location.id;
    pthread_mutex_unlock(&g.lock);
    if (!p)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *pool = (CUmemoryPool)p;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool)
{
    NEED_INIT();
    struct fpool *p = (struct fpool *)pool;
    if (!obj_is(p, MAGIC_POOL) || (p >= g.default_pool && p < g.default_pool + FAKE_MAX_DEVICES))
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g.lock);
    /* outstanding allocations keep their memory until freed (the driver
     * defers the destruction); the cache goes now */
    p->dead = 1;
    pool_shrink_locked(p, 0);
    p->o.magic = 0;
    for (int d = 0; d < g.ndev; d++)
        if (g.current_pool[d] == p)
            g.current_pool[d] = NULL;
    pthread_mutex_unlock(&g.lock);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev)
{
    NEED_INIT();
    if (!pool)
        return CUDA_ERROR_INVALID_VALUE;
    if (!dev_ok(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&g.lock);
    *pool = (CUmemoryPool)(g.current_pool[dev] ? g.current_pool[dev] : &g.default_pool[dev]);
    pthread_mutex_unlock(&g.lock);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool)
{
    NEED_INIT();
    struct fpool *p = (struct fpool *)pool;
    if (!dev_ok(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    if (!obj_is(p, MAGIC_POOL) || p->dev != dev)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g.lock);
    g.current_pool[dev] = p;
    pthread_mutex_unlock(&g.lock);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep)
{
    NEED_INIT();
    struct fpool *p = (struct fpool *)pool;
    if (!obj_is(p, MAGIC_POOL))
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g.lock);
    pool_shrink_locked(p, minBytesToKeep);
    pthread_mutex_unlock(&g.lock);
    return CUDA_SUCCESS;
}

/* The attributes the driver documents for cuMemPoolGet/SetAttribute: the
 * three reuse policies (int), the release threshold, the reserved and used
 * figures and their high-water marks (cuuint64_t; a high mark can only be
 * reset, to 0). */
EXPORT CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    NEED_INIT();
    struct fpool *p = (struct fpool *)pool;
    if (!obj_is(p, MAGIC_POOL) || !value)
        return CUDA_ERROR_INVALID_VALUE;
    cuuint64_t v;
    memcpy(&v, value, sizeof v);
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&g.lock);
    switch (attr) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES: break;
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: p->threshold = v; break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
        if (v != 0)
            r = CUDA_ERROR_INVALID_VALUE;
        else
            p->reserved_high = p->reserved;
        break;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
        if (v != 0)
            r = CUDA_ERROR_INVALID_VALUE;
        else
            p->used_high = p->used;
        break;
    default: r = CUDA_ERROR_INVALID_VALUE; break;
    }
    pthread_mutex_unlock(&g.lock);
    return r;
}

EXPORT CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    NEED_INIT();
    struct fpool *p = (struct fpool *)pool;
    if (!obj_is(p, MAGIC_POOL) || !value)
        return CUDA_ERROR_INVALID_VALUE;
    cuuint64_t v = 0;
    int is_int = 0;
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&g.lock);
    switch (attr) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES: is_int = 1; v = 1; break;
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: v = p->threshold; break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT: v = p->reserved; break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH: v = p->reserved_high; break;
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT: v = p->used; break;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH: v = p->used_high; break;
    default: r = CUDA_ERROR_INVALID_VALUE; break;
    }
    pthread_mutex_unlock(&g.lock);
    if (r == CUDA_SUCCESS) {
        if (is_int) {
            int i = (int)v;
            memcpy(value, &i, sizeof i);
        } else {
            memcpy(value, &v, sizeof v);
        }
    }
    return r;
}

EXPORT CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool_out, CUdevice dev)
{
    NEED_INIT();
    if (!pool_out)
        return CUDA_ERROR_INVALID_VALUE;
    if (!dev_ok(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    *pool_out = (CUmemoryPool)&g.default_pool[dev];
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemsetD8_v2(CUdeviceptr dstDevice, unsigned char uc, size_t N)
{
    NEED_INIT();
    if (!dstDevice)
        return CUDA_ERROR_INVALID_VALUE;
    memset((void *)(uintptr_t)dstDevice, uc, N);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{
    NEED_INIT();
    if (!dstDevice || !srcHost)
        return CUDA_ERROR_INVALID_VALUE;
    memcpy((void *)(uintptr_t)dstDevice, srcHost, ByteCount);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemcpyDtoH_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{
    NEED_INIT();
    if (!dstHost || !srcDevice)
        return CUDA_ERROR_INVALID_VALUE;
    memcpy(dstHost, (const void *)(uintptr_t)srcDevice, ByteCount);
    return CUDA_SUCCESS;
}

/* ---- arrays ----------------------------------------------------------------- */

static uint64_t format_bytes(CUarray_format f)
{
    switch (f) {
    case CU_AD_FORMAT_UNSIGNED_INT8: case CU_AD_FORMAT_SIGNED_INT8: return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16: case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF: return 2;
    case CU_AD_FORMAT_UNSIGNED_INT32: case CU_AD_FORMAT_SIGNED_INT32:
    case CU_AD_FORMAT_FLOAT: return 4;
    default: break; /* cuda.h has more formats (packed, block-compressed) */
    }
    return 0;
}

/* Bytes of a W x H x D array (H, D of 0 mean 1), rows padded to
 * FAKE_PITCH_ALIGN_BYTES, before rounding to the granularity; 0: invalid. */
static uint64_t array_bytes(size_t w, size_t h, size_t d, CUarray_format f, unsigned ch)
{
    uint64_t e = format_bytes(f);
    if (!e || w == 0 || (ch != 1 && ch != 2 && ch != 4))
        return 0;
    uint64_t row = round_up((uint64_t)w * e * ch, FAKE_PITCH_ALIGN_BYTES); /* padded rows */
    return row * (h ? h : 1) * (d ? d : 1);
}

static CUresult array_new(uint64_t raw, unsigned flags, uint32_t magic, void **out)
{
    struct fctx *c;
    CUresult r = need_ctx(&c);
    if (r != CUDA_SUCCESS)
        return r;
    if (!out || raw == 0)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t bytes = round_up(raw, g.granularity);
    int deferred = (flags & TS_CU_ARRAY3D_DEFERRED_MAPPING) != 0;
    pthread_mutex_lock(&g.lock);
    r = deferred ? CUDA_SUCCESS : charge(c->dev, bytes);
    struct farray *a = r == CUDA_SUCCESS ? obj_new(sizeof *a, magic) : NULL;
    if (r == CUDA_SUCCESS && !a) {
        if (!deferred)
            uncharge(c->dev, bytes);
        r = CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (a) {
        a->dev = c->dev;
        a->bytes = bytes;
        a->deferred = deferred;
        a->ctx = c;
        *out = a;
    }
    pthread_mutex_unlock(&g.lock);
    return r;
}

static CUresult array_destroy(void *h, uint32_t magic)
{
    NEED_INIT();
    struct farray *a = h;
    pthread_mutex_lock(&g.lock);
    CUresult r = CUDA_ERROR_INVALID_HANDLE;
    if (obj_is(a, magic)) {
        if (!a->deferred)
            uncharge(a->dev, a->bytes);
        a->o.magic = 0;
        r = CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&g.lock);
    return r;
}

EXPORT CUresult cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *d)
{
    if (!d)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t raw = array_bytes(d->Width, d->Height, 0, d->Format, d->NumChannels);
    return array_new(raw, 0, MAGIC_ARRAY, (void **)pHandle);
}

EXPORT CUresult cuArray3DCreate_v2(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *d)
{
    if (!d)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t raw = array_bytes(d->Width, d->Height, d->Depth, d->Format, d->NumChannels);
    return array_new(raw, d->Flags, MAGIC_ARRAY, (void **)pHandle);
}

EXPORT CUresult cuArrayDestroy(CUarray hArray) { return array_destroy(hArray, MAGIC_ARRAY); }

static CUresult array_reqs(CUDA_ARRAY_MEMORY_REQUIREMENTS *m, void *h, uint32_t magic,
                           CUdevice dev)
{
    NEED_INIT();
    const struct farray *a = h;
    if (!m)
        return CUDA_ERROR_INVALID_VALUE;
    if (!obj_is(a, magic))
        return CUDA_ERROR_INVALID_HANDLE;
    if (dev != a->dev)
        return CUDA_ERROR_INVALID_DEVICE;
    if (!a->deferred) /* the driver answers only for deferred-mapping arrays */
        return CUDA_ERROR_INVALID_VALUE;
    memset(m, 0, sizeof *m);
    m->size = a->bytes;
    m->alignment = g.granularity;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuArrayGetMemoryRequirements(CUDA_ARRAY_MEMORY_REQUIREMENTS *memoryRequirements,
                                             CUarray array, CUdevice device)
{
    return array_reqs(memoryRequirements, array, MAGIC_ARRAY, device);
}

EXPORT CUresult cuMipmappedArrayCreate(CUmipmappedArray *pHandle,
                                       const CUDA_ARRAY3D_DESCRIPTOR *d,
                                       unsigned int numMipmapLevels)
{
    if (!d || numMipmapLevels == 0)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t raw = 0;
    size_t w = d->Width, h = d->Height, z = d->Depth;
    for (unsigned l = 0; l < numMipmapLevels; l++) {
        uint64_t b = array_bytes(w, h, z, d->Format, d->NumChannels);
        if (!b)
            return CUDA_ERROR_INVALID_VALUE;
        raw += b;
        w = w > 1 ? w / 2 : 1;
        h = h > 1 ? h / 2 : h;
        z = z > 1 ? z / 2 : z;
    }
    return array_new(raw, d->Flags, MAGIC_MIPMAP, (void **)pHandle);
}

EXPORT CUresult cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray)
{
    return array_destroy(hMipmappedArray, MAGIC_MIPMAP);
}

EXPORT CUresult cuMipmappedArrayGetMemoryRequirements(
    CUDA_ARRAY_MEMORY_REQUIREMENTS *memoryRequirements, CUmipmappedArray mipmap, CUdevice device)
{
    return array_reqs(memoryRequirements, mipmap, MAGIC_MIPMAP, device);
}

/* ---- virtual memory management --------------------------------------------- */

/* Pinned memory on a device, or on the host (CUDA 12.2+: HOST, HOST_NUMA
 * with a NUMA node id, HOST_NUMA_CURRENT), which no device is charged for:
 * location.id is a device ordinal only for a DEVICE location. */
#define FAKE_MAX_NUMA_NODES 64
static CUresult check_prop(const CUmemAllocationProp *prop)
{
    if (!prop || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED)
        return CUDA_ERROR_INVALID_VALUE;
    switch (prop->location.type) {
    case CU_MEM_LOCATION_TYPE_DEVICE:
        return dev_ok(prop->location.id) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
    case CU_MEM_LOCATION_TYPE_HOST:
    case CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT: return CUDA_SUCCESS;
    case CU_MEM_LOCATION_TYPE_HOST_NUMA:
        return prop->location.id >= 0 && prop->location.id < FAKE_MAX_NUMA_NODES
                   ? CUDA_SUCCESS
                   : CUDA_ERROR_INVALID_VALUE;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
}

/* The device a property's memory is charged to; -1: host memory. */
static int prop_dev(const CUmemAllocationProp *prop)
{
    return prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE ? prop->location.id : -1;
}

EXPORT CUresult cuMemGetAllocationGranularity(size_t *granularity,
                                              const CUmemAllocationProp *prop,
                                              CUmemAllocationGranularity_flags option)
{
    NEED_INIT();
    if (!granularity || (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM &&
                         option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED))
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = check_prop(prop);
    if (r != CUDA_SUCCESS)
        return r;
    *granularity = g.granularity;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                            const CUmemAllocationProp *prop, unsigned long long flags)
{
    NEED_INIT();
    CUresult r = check_prop(prop);
    if (r != CUDA_SUCCESS)
        return r;
    if (!handle || flags != 0 || size == 0 || size % g.granularity)
        return CUDA_ERROR_INVALID_VALUE;
    int dev = prop_dev(prop);
    pthread_mutex_lock(&g.lock);
    r = charge(dev, size);
    int fd = -1;
    if (r == CUDA_SUCCESS) {
        fd = memfd_create("ts-fake-cuda", MFD_CLOEXEC);
        if (fd < 0 || ftruncate(fd, (off_t)size) != 0) {
            if (fd >= 0)
                close(fd);
            fd = -1;
            uncharge(dev, size);
            r = CUDA_ERROR_OUT_OF_MEMORY;
        }
    }
    struct fhandle *h = fd >= 0 ? obj_new(sizeof *h, MAGIC_HANDLE) : NULL;
    if (fd >= 0 && !h) {
        close(fd);
        uncharge(dev, size);
        r = CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (h) {
        h->fd = fd;
        h->dev = dev;
        h->bytes = size;
        h->refs = 1;
        *handle = (CUmemGenericAllocationHandle)(uintptr_t)h;
    }
    pthread_mutex_unlock(&g.lock);
    return r;
}

static void handle_drop_locked(struct fhandle *h)
{
    if (h->refs == 0 && h->maps == 0) {
        close(h->fd);
        uncharge(h->dev, h->bytes);
        h->o.magic = 0;
    }
}

EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    NEED_INIT();
    struct fhandle *h = (struct fhandle *)(uintptr_t)handle;
    pthread_mutex_lock(&g.lock);
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    if (obj_is(h, MAGIC_HANDLE) && h->refs > 0) {
        h->refs--;
        handle_drop_locked(h);
        r = CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&g.lock);
    return r;
}

/* The handle mapped at addr, with one more reference to release. */
EXPORT CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)
{
    NEED_INIT();
    if (!handle)
        return CUDA_ERROR_INVALID_VALUE;
    uintptr_t a = (uintptr_t)addr;
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g.lock);
    for (int i = 0; i < g.nmaps; i++)
        if (a >= g.maps[i].va && a < g.maps[i].va + g.maps[i].bytes) {
            g.maps[i].h->refs++;
            *handle = (CUmemGenericAllocationHandle)(uintptr_t)g.maps[i].h;
            r = CUDA_SUCCESS;
            break;
        }
    pthread_mutex_unlock(&g.lock);
    return r;
}

EXPORT CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment,
                                    CUdeviceptr addr, unsigned long long flags)
{
    NEED_INIT();
    if (!ptr || size == 0 || size % g.granularity || flags != 0 ||
        (alignment & (alignment - 1)))
        return CUDA_ERROR_INVALID_VALUE;
    size_t align = alignment > g.granularity ? alignment : (size_t)g.granularity;
    int prot = PROT_NONE, fl = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
    char *m = MAP_FAILED;
    if (addr && addr % align == 0) {
        m = mmap((void *)(uintptr_t)addr, size, prot, fl | MAP_FIXED_NOREPLACE, -1, 0);
        if (m != MAP_FAILED && (uintptr_t)m != addr) {
            munmap(m, size);
            m = MAP_FAILED;
        }
    }
    if (m == MAP_FAILED) {
        char *raw = mmap(NULL, size + align, prot, fl, -1, 0);
        if (raw == MAP_FAILED)
            return CUDA_ERROR_OUT_OF_MEMORY;
        uintptr_t base = ((uintptr_t)raw + align - 1) / align * align;
        if (base > (uintptr_t)raw)
            munmap(raw, base - (uintptr_t)raw);
        uintptr_t tail = base + size, rend = (uintptr_t)raw + size + align;
        if (rend > tail)
            munmap((void *)tail, rend - tail);
        m = (char *)base;
    }
    pthread_mutex_lock(&g.lock);
    if (g.nres == g.capres) {
        int cap = g.capres * 2 + 16;
        struct freserve *n = realloc(g.res, (size_t)cap * sizeof *n);
        if (!n) {
            pthread_mutex_unlock(&g.lock);
            munmap(m, size);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        g.res = n;
        g.capres = cap;
    }
    g.res[g.nres++] = (struct freserve){(uintptr_t)m, size};
    pthread_mutex_unlock(&g.lock);
    *ptr = (CUdeviceptr)(uintptr_t)m;
    return CUDA_SUCCESS;
}

static int mapping_overlaps_locked(uintptr_t va, size_t bytes)
{
    for (int i = 0; i < g.nmaps; i++)
        if (g.maps[i].va < va + bytes && va < g.maps[i].va + g.maps[i].bytes)
            return 1;
    return 0;
}

/* Index of the reservation holding [va, va+bytes) entirely, or -1. */
static int reservation_of_locked(uintptr_t va, size_t bytes)
{
    for (int i = 0; i < g.nres; i++)
        if (va >= g.res[i].base && va + bytes <= g.res[i].base + g.res[i].bytes)
            return i;
    return -1;
}

EXPORT CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
    NEED_INIT();
    pthread_mutex_lock(&g.lock);
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    for (int i = 0; i < g.nres; i++)
        if (g.res[i].base == (uintptr_t)ptr && g.res[i].bytes == size) {
            if (mapping_overlaps_locked(g.res[i].base, size))
                break; /* still mapped: unmap first */
            munmap((void *)g.res[i].base, size);
            g.res[i] = g.res[--g.nres];
            r = CUDA_SUCCESS;
            break;
        }
    pthread_mutex_unlock(&g.lock);
    return r;
}

EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                         CUmemGenericAllocationHandle handle, unsigned long long flags)
{
    NEED_INIT();
    struct fhandle *h = (struct fhandle *)(uintptr_t)handle;
    uintptr_t va = (uintptr_t)ptr;
    if (flags != 0 || size == 0 || size % g.granularity || va % g.granularity ||
        offset % g.granularity)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g.lock);
    CUresult r = CUDA_SUCCESS;
    if (!obj_is(h, MAGIC_HANDLE) || h->refs == 0)
        r = CUDA_ERROR_INVALID_HANDLE;
    else if (offset + size > h->bytes || reservation_of_locked(va, size) < 0)
        r = CUDA_ERROR_INVALID_VALUE;
    else if (mapping_overlaps_locked(va, size))
        r = CUDA_ERROR_ALREADY_MAPPED;
    else if (g.nmaps == g.capmaps) {
        int cap = g.capmaps * 2 + 16;
        struct fmap *n = realloc(g.maps, (size_t)cap * sizeof *n);
        if (!n)
            r = CUDA_ERROR_OUT_OF_MEMORY;
        else {
            g.maps = n;
            g.capmaps = cap;
        }
    }
    if (r == CUDA_SUCCESS) {
        void *m = mmap((void *)va, size, PROT_NONE, MAP_SHARED | MAP_FIXED, h->fd, (off_t)offset);
        if (m == MAP_FAILED)
            r = CUDA_ERROR_OUT_OF_MEMORY;
        else {
            g.maps[g.nmaps++] = (struct fmap){va, size, h};
            h->maps++;
        }
    }
    pthread_mutex_unlock(&g.lock);
    return r;
}

/* Mappings wholly inside [va, va+bytes) when together they cover it exactly
 * (the driver unmaps whole mappings only); -1 otherwise. */
static int covered_exactly_locked(uintptr_t va, size_t bytes)
{
    size_t covered = 0;
    for (int i = 0; i < g.nmaps; i++) {
        uintptr_t a = g.maps[i].va, e = a + g.maps[i].bytes;
        if (a < va + bytes && va < e) {
            if (a < va || e > va + bytes)
                return -1;
            covered += g.maps[i].bytes;
        }
    }
    return covered == bytes ? 0 : -1;
}

EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    NEED_INIT();
    uintptr_t va = (uintptr_t)ptr;
    pthread_mutex_lock(&g.lock);
    CUresult r = CUDA_SUCCESS;
    if (size == 0 || covered_exactly_locked(va, size) != 0)
        r = CUDA_ERROR_INVALID_VALUE;
    else {
        mmap((void *)va, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED,
             -1, 0);
        for (int i = 0; i < g.nmaps;) {
            if (g.maps[i].va >= va && g.maps[i].va < va + size) {
                struct fhandle *h = g.maps[i].h;
                g.maps[i] = g.maps[--g.nmaps];
                h->maps--;
                handle_drop_locked(h);
            } else {
                i++;
            }
        }
    }
    pthread_mutex_unlock(&g.lock);
    return r;
}

EXPORT CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc,
                               size_t count)
{
    NEED_INIT();
    if (!desc || count == 0 || size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    int prot = PROT_NONE;
    for (size_t i = 0; i < count; i++) {
        if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE)
            return CUDA_ERROR_INVALID_VALUE;
        if (!dev_ok(desc[i].location.id))
            return CUDA_ERROR_INVALID_DEVICE;
        if (desc[i].flags == CU_MEM_ACCESS_FLAGS_PROT_READ)
            prot |= PROT_READ;
        else if (desc[i].flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
            prot |= PROT_READ | PROT_WRITE;
        else if (desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_NONE)
            return CUDA_ERROR_INVALID_VALUE;
    }
    uintptr_t va = (uintptr_t)ptr;
    pthread_mutex_lock(&g.lock);
    CUresult r = covered_exactly_locked(va, size) == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS && mprotect((void *)va, size, prot) != 0)
        r = CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_unlock(&g.lock);
    return r;
}

/* ---- streams and events ------------------------------------------------------ */

EXPORT CUresult cuStreamCreate(CUstream *phStream, unsigned int Flags)
{
    struct fctx *c;
    CUresult r = need_ctx(&c);
    if (r != CUDA_SUCCESS)
        return r;
    if (!phStream || Flags > 1)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g.lock);
    struct fstream *s = obj_new(sizeof *s, MAGIC_STREAM);
    if (s)
        s->ctx = c;
    pthread_mutex_unlock(&g.lock);
    if (!s)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *phStream = (CUstream)s;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamDestroy_v2(CUstream hStream)
{
    NEED_INIT();
    struct fstream *s = (struct fstream *)hStream;
    if (!obj_is(s, MAGIC_STREAM) || s == &s->ctx->null_stream)
        return CUDA_ERROR_INVALID_HANDLE;
    s->o.magic = 0; /* queued work still completes on the engine */
    return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamSynchronize(CUstream hStream)
{
    struct fstream *s;
    CUresult r = stream_resolve(hStream, &s);
    if (r != CUDA_SUCCESS)
        return r;
    if (s->capture)
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    pthread_mutex_lock(&g.lock);
    int64_t t = s->tail_ns;
    pthread_mutex_unlock(&g.lock);
    sleep_until(t);
    pthread_mutex_lock(&g.lock);
    pools_settle_locked(s->ctx->dev);
    pthread_mutex_unlock(&g.lock);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamSynchronize_ptsz(CUstream hStream) { return cuStreamSynchronize(hStream); }

EXPORT CUresult cuStreamQuery(CUstream hStream)
{
    struct fstream *s;
    CUresult r = stream_resolve(hStream, &s);
    if (r != CUDA_SUCCESS)
        return r;
    if (s->capture)
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    pthread_mutex_lock(&g.lock);
    int64_t t = s->tail_ns;
    pthread_mutex_unlock(&g.lock);
    return now_ns() >= t ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

EXPORT CUresult cuStreamQuery_ptsz(CUstream hStream) { return cuStreamQuery(hStream); }

EXPORT CUresult cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
    struct fstream *s;
    CUresult r = stream_resolve(hStream, &s);
    if (r != CUDA_SUCCESS)
        return r;
    struct fevent *e = (struct fevent *)hEvent;
    if (!obj_is(e, MAGIC_EVENT))
        return CUDA_ERROR_INVALID_HANDLE;
    if (Flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g.lock);
    if (e->recorded && !s->capture)
        s->tail_ns = max64(s->tail_ns, e->ts_ns);
    pthread_mutex_unlock(&g.lock);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamWaitEvent_ptsz(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
    return cuStreamWaitEvent(hStream, hEvent, Flags);
}

EXPORT CUresult cuStreamGetCtx(CUstream hStream, CUcontext *pctx)
{
    struct fstream *s;
    CUresult r = stream_resolve(hStream, &s);
    if (r != CUDA_SUCCESS)
        return r;
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    *pctx = (CUcontext)s->ctx;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamGetCtx_ptsz(CUstream hStream, CUcontext *pctx)
{
    return cuStreamGetCtx(hStream, pctx);
}

EXPORT CUresult cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode)
{
    struct fstream *s;
    CUresult r = stream_resolve(hStream, &s);
    if (r != CUDA_SUCCESS)
        return r;
    if (s == &s->ctx->null_stream)
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED; /* legacy stream cannot capture */
    if (mode > CU_STREAM_CAPTURE_MODE_RELAXED)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g.lock);
    if (s->capture)
        r = CUDA_ERROR_ILLEGAL_STATE;
    else if (!(s->capture = obj_new(sizeof(struct fgraph), MAGIC_GRAPH)))
        r = CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_unlock(&g.lock);
    return r;
}

EXPORT CUresult cuStreamBeginCapture_v2_ptsz(CUstream hStream, CUstreamCaptureMode mode)
{
    return cuStreamBeginCapture_v2(hStream, mode);
}

EXPORT CUresult cuStreamEndCapture(CUstream hStream, CUgraph *phGraph)
{
    struct fstream *s;
    CUresult r = stream_resolve(hStream, &s);
    if (r != CUDA_SUCCESS)
        return r;
    if (!phGraph)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g.lock);
    struct fgraph *gr = s->capture;
    s->capture = NULL;
    pthread_mutex_unlock(&g.lock);
    if (!gr)
        return CUDA_ERROR_ILLEGAL_STATE;
    *phGraph = (CUgraph)gr;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamEndCapture_ptsz(CUstream hStream, CUgraph *phGraph)
{
    return cuStreamEndCapture(hStream, phGraph);
}

EXPORT CUresult cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
    struct fstream *s;
    CUresult r = stream_resolve(hStream, &s);
    if (r != CUDA_SUCCESS)
        return r;
    if (!captureStatus)
        return CUDA_ERROR_INVALID_VALUE;
    *captureStatus = s->capture ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamIsCapturing_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
    return cuStreamIsCapturing(hStream, captureStatus);
}

EXPORT CUresult cuEventCreate(CUevent *phEvent, unsigned int Flags)
{
    struct fctx *c;
    CUresult r = need_ctx(&c);
    if (r != CUDA_SUCCESS)
        return r;
    if (!phEvent || Flags > 0xf)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g.lock);
    struct fevent *e = obj_new(sizeof *e, MAGIC_EVENT);
    if (e)
        e->flags = Flags;
    pthread_mutex_unlock(&g.lock);
    if (!e)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *phEvent = (CUevent)e;
    return CUDA_SUCCESS;
}

/* The event is timestamped when the engine reaches it: after the stream's
 * work and after everything queued on the engine before it. */
EXPORT CUresult cuEventRecord(CUevent hEvent, CUstream hStream)
{
    struct fstream *s;
    CUresult r = stream_resolve(hStream, &s);
    if (r != CUDA_SUCCESS)
        return r;
    struct fevent *e = (struct fevent *)hEvent;
    if (!obj_is(e, MAGIC_EVENT))
        return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&g.lock);
    if (!s->capture) {
        int dev = s->ctx->dev;
        shared_lock();
        int64_t ts = max64(now_ns(), max64(s->tail_ns, g.sh->dev[dev].busy_until_ns));
        g.sh->dev[dev].busy_until_ns = ts;
        shared_unlock();
        s->tail_ns = ts;
        e->ts_ns = ts;
        e->recorded = 1;
    }
    pthread_mutex_unlock(&g.lock);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuEventRecord_ptsz(CUevent hEvent, CUstream hStream)
{
    return cuEventRecord(hEvent, hStream);
}

EXPORT CUresult cuEventQuery(CUevent hEvent)
{
    NEED_INIT();
    struct fevent *e = (struct fevent *)hEvent;
    if (!obj_is(e, MAGIC_EVENT))
        return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&g.lock);
    int64_t t = e->recorded ? e->ts_ns : 0;
    pthread_mutex_unlock(&g.lock);
    return now_ns() >= t ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

EXPORT CUresult cuEventSynchronize(CUevent hEvent)
{
    NEED_INIT();
    struct fevent *e = (struct fevent *)hEvent;
    if (!obj_is(e, MAGIC_EVENT))
        return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&g.lock);
    int64_t t = e->recorded ? e->ts_ns : 0;
    pthread_mutex_unlock(&g.lock);
    sleep_until(t);
    pthread_mutex_lock(&g.lock);
    pools_settle_locked(-1);
    pthread_mutex_unlock(&g.lock);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
    NEED_INIT();
    struct fevent *a = (struct fevent *)hStart, *b = (struct fevent *)hEnd;
    if (!pMilliseconds)
        return CUDA_ERROR_INVALID_VALUE;
    if (!obj_is(a, MAGIC_EVENT) || !obj_is(b, MAGIC_EVENT) ||
        ((a->flags | b->flags) & TS_CU_EVENT_DISABLE_TIMING))
        return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&g.lock);
    int rec = a->recorded && b->recorded;
    int64_t ta = a->ts_ns, tb = b->ts_ns;
    pthread_mutex_unlock(&g.lock);
    if (!rec)
        return CUDA_ERROR_INVALID_HANDLE;
    int64_t now = now_ns();
    if (now < ta || now < tb)
        return CUDA_ERROR_NOT_READY;
    *pMilliseconds = (float)((double)(tb - ta) / NS_PER_MS);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuEventDestroy_v2(CUevent hEvent)
{
    NEED_INIT();
    struct fevent *e = (struct fevent *)hEvent;
    if (!obj_is(e, MAGIC_EVENT))
        return CUDA_ERROR_INVALID_HANDLE;
    e->o.magic = 0;
    return CUDA_SUCCESS;
}

/* ---- modules and launches ----------------------------------------------------- */

EXPORT CUresult cuModuleLoadData(CUmodule *module, const void *image)
{
    struct fctx *c;
    CUresult r = need_ctx(&c);
    if (r != CUDA_SUCCESS)
        return r;
    if (!module || !image)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g.lock);
    void *m = obj_new(sizeof(struct fobj), MAGIC_MODULE);
    pthread_mutex_unlock(&g.lock);
    if (!m)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *module = (CUmodule)m;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)
{
    NEED_INIT();
    if (!hfunc || !name)
        return CUDA_ERROR_INVALID_VALUE;
    if (!obj_is(hmod, MAGIC_MODULE))
        return CUDA_ERROR_INVALID_HANDLE;
    for (size_t i = 0; i < sizeof fake_funcs / sizeof fake_funcs[0]; i++)
        if (strcmp(fake_funcs[i].name, name) == 0) {
            *hfunc = (CUfunction)(uintptr_t)&fake_funcs[i];
            return CUDA_SUCCESS;
        }
    return CUDA_ERROR_NOT_FOUND;
}

EXPORT CUresult cuModuleUnload(CUmodule hmod)
{
    NEED_INIT();
    if (!obj_is(hmod, MAGIC_MODULE))
        return CUDA_ERROR_INVALID_HANDLE;
    ((struct fobj *)hmod)->magic = 0;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuLaunchKernel(CUfunction f, TS_CU_LAUNCH_DIMS, unsigned int sharedMemBytes,
                               CUstream hStream, void **kernelParams, void **extra)
{
    (void)blockDimX, (void)blockDimY, (void)blockDimZ, (void)sharedMemBytes;
    return launch(f, gridDimX, gridDimY, gridDimZ, hStream, kernelParams, extra);
}

EXPORT CUresult cuLaunchKernel_ptsz(CUfunction f, TS_CU_LAUNCH_DIMS, unsigned int sharedMemBytes,
                                    CUstream hStream, void **kernelParams, void **extra)
{
    (void)blockDimX, (void)blockDimY, (void)blockDimZ, (void)sharedMemBytes;
    return launch(f, gridDimX, gridDimY, gridDimZ, hStream, kernelParams, extra);
}

static CUresult launch_coop(CUfunction f, unsigned gx, unsigned gy, unsigned gz, CUstream hs,
                            void **kp)
{
    /* all blocks must be co-resident: at most 32 per SM here */
    if ((uint64_t)gx * gy * gz > (uint64_t)FAKE_SM_COUNT * 32)
        return CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE;
    return launch(f, gx, gy, gz, hs, kp, NULL);
}

EXPORT CUresult cuLaunchCooperativeKernel(CUfunction f, TS_CU_LAUNCH_DIMS,
                                          unsigned int sharedMemBytes, CUstream hStream,
                                          void **kernelParams)
{
    (void)blockDimX, (void)blockDimY, (void)blockDimZ, (void)sharedMemBytes;
    return launch_coop(f, gridDimX, gridDimY, gridDimZ, hStream, kernelParams);
}

EXPORT CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, TS_CU_LAUNCH_DIMS,
                                               unsigned int sharedMemBytes, CUstream hStream,
                                               void **kernelParams)
{
    (void)blockDimX, (void)blockDimY, (void)blockDimZ, (void)sharedMemBytes;
    return launch_coop(f, gridDimX, gridDimY, gridDimZ, hStream, kernelParams);
}

EXPORT CUresult cuLaunchCooperativeKernelMultiDevice(CUDA_LAUNCH_PARAMS *launchParamsList,
                                                     unsigned int numDevices, unsigned int flags)
{
    NEED_INIT();
    (void)flags;
    if (!launchParamsList || numDevices == 0)
        return CUDA_ERROR_INVALID_VALUE;
    for (unsigned i = 0; i < numDevices; i++) {
        const CUDA_LAUNCH_PARAMS *p = &launchParamsList[i];
        CUresult r = launch_coop(p->function, p->gridDimX, p->gridDimY, p->gridDimZ,
                                 p->hStream, p->kernelParams);
        if (r != CUDA_SUCCESS)
            return r;
    }
    return CUDA_SUCCESS;
}

static CUresult launch_ex(const CUlaunchConfig *config, CUfunction f, void **kp, void **extra)
{
    if (!config)
        return CUDA_ERROR_INVALID_VALUE;
    for (unsigned i = 0; i < config->numAttrs; i++)
        if (config->attrs && config->attrs[i].id == CU_LAUNCH_ATTRIBUTE_COOPERATIVE &&
            config->attrs[i].value.cooperative)
            return launch_coop(f, config->gridDimX, config->gridDimY, config->gridDimZ,
                               config->hStream, kp);
    return launch(f, config->gridDimX, config->gridDimY, config->gridDimZ, config->hStream,
                  kp, extra);
}

EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f,
                                 void **kernelParams, void **extra)
{
    return launch_ex(config, f, kernelParams, extra);
}

EXPORT CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f,
                                      void **kernelParams, void **extra)
{
    return launch_ex(config, f, kernelParams, extra);
}

/* ---- graphs ------------------------------------------------------------------ */

EXPORT CUresult cuGraphCreate(CUgraph *phGraph, unsigned int flags)
{
    NEED_INIT();
    if (!phGraph || flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g.lock);
    struct fgraph *gr = obj_new(sizeof *gr, MAGIC_GRAPH);
    pthread_mutex_unlock(&g.lock);
    if (!gr)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *phGraph = (CUgraph)gr;
    return CUDA_SUCCESS;
}

static CUresult add_kernel_node(CUgraphNode *out, CUgraph hGraph, CUfunction f, unsigned gx,
                                unsigned gy, unsigned gz, void **kp, void **extra)
{
    NEED_INIT();
    struct fgraph *gr = (struct fgraph *)hGraph;
    if (!out || !obj_is(gr, MAGIC_GRAPH))
        return CUDA_ERROR_INVALID_VALUE;
    struct fnode n;
    CUresult r = make_node(f, gx, gy, gz, kp, extra, &n);
    if (r == CUDA_SUCCESS)
        r = graph_append(gr, &n, 1);
    if (r == CUDA_SUCCESS)
        *out = (CUgraphNode)(uintptr_t)gr->n; /* opaque, non-NULL */
    return r;
}

EXPORT CUresult cuGraphAddKernelNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                     const CUgraphNode *dependencies, size_t numDependencies,
                                     const CUDA_KERNEL_NODE_PARAMS_v1 *p)
{
    (void)dependencies, (void)numDependencies; /* nodes run in insertion order */
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    return add_kernel_node(phGraphNode, hGraph, p->func, p->gridDimX, p->gridDimY, p->gridDimZ,
                           p->kernelParams, p->extra);
}

EXPORT CUresult cuGraphAddKernelNode_v2(CUgraphNode *phGraphNode, CUgraph hGraph,
                                        const CUgraphNode *dependencies, size_t numDependencies,
                                        const CUDA_KERNEL_NODE_PARAMS_v2 *p)
{
    (void)dependencies, (void)numDependencies;
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    return add_kernel_node(phGraphNode, hGraph, p->func, p->gridDimX, p->gridDimY, p->gridDimZ,
                           p->kernelParams, p->extra);
}

static CUresult instantiate(CUgraphExec *phGraphExec, CUgraph hGraph);

EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph,
                                            unsigned long long flags)
{
    (void)flags;
    return instantiate(phGraphExec, hGraph);
}

EXPORT CUresult cuGraphInstantiate(CUgraphExec *phGraphExec, CUgraph hGraph,
                                   CUgraphNode *phErrorNode, char *logBuffer, size_t bufferSize)
{
    (void)phErrorNode;
    if (logBuffer && bufferSize)
        logBuffer[0] = 0;
    return instantiate(phGraphExec, hGraph);
}

EXPORT CUresult cuGraphInstantiate_v2(CUgraphExec *phGraphExec, CUgraph hGraph,
                                      CUgraphNode *phErrorNode, char *logBuffer,
                                      size_t bufferSize)
{
    return cuGraphInstantiate(phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize);
}

EXPORT CUresult cuGraphInstantiateWithParams(CUgraphExec *phGraphExec, CUgraph hGraph,
                                             CUDA_GRAPH_INSTANTIATE_PARAMS *params)
{
    if (!params)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = instantiate(phGraphExec, hGraph);
    params->hErrNode_out = NULL;
    params->result_out = r == CUDA_SUCCESS ? CUDA_GRAPH_INSTANTIATE_SUCCESS
                                           : CUDA_GRAPH_INSTANTIATE_ERROR;
    return r;
}

EXPORT CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec *phGraphExec, CUgraph hGraph,
                                                  CUDA_GRAPH_INSTANTIATE_PARAMS *params)
{
    return cuGraphInstantiateWithParams(phGraphExec, hGraph, params);
}

EXPORT CUresult cuGraphAddMemAllocNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                       const CUgraphNode *dependencies, size_t numDependencies,
                                       CUDA_MEM_ALLOC_NODE_PARAMS *nodeParams)
{
    NEED_INIT();
    (void)dependencies, (void)numDependencies;
    struct fgraph *gr = (struct fgraph *)hGraph;
    if (!phGraphNode || !obj_is(gr, MAGIC_GRAPH) || !nodeParams ||
        nodeParams->poolProps.allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
        nodeParams->poolProps.location.type != CU_MEM_LOCATION_TYPE_DEVICE)
        return CUDA_ERROR_INVALID_VALUE;
    if (!dev_ok(nodeParams->poolProps.location.id))
        return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&g.lock);
    CUresult r = graph_mem_node_locked(gr, nodeParams->poolProps.location.id,
                                       nodeParams->bytesize, &nodeParams->dptr);
    pthread_mutex_unlock(&g.lock);
    if (r == CUDA_SUCCESS)
        *phGraphNode = (CUgraphNode)(uintptr_t)(gr->n + 1);
    return r;
}

EXPORT CUresult cuGraphAddMemFreeNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                      const CUgraphNode *dependencies, size_t numDependencies,
                                      CUdeviceptr dptr)
{
    NEED_INIT();
    (void)dependencies, (void)numDependencies;
    struct fgraph *gr = (struct fgraph *)hGraph;
    if (!phGraphNode || !obj_is(gr, MAGIC_GRAPH) || !dptr)
        return CUDA_ERROR_INVALID_VALUE;
    *phGraphNode = (CUgraphNode)(uintptr_t)(gr->n + 1);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGraphMemTrim(CUdevice device)
{
    NEED_INIT();
    if (!dev_ok(device))
        return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&g.lock);
    uncharge(device, g.graph_cache[device]);
    g.graph_cache[device] = 0;
    pthread_mutex_unlock(&g.lock);
    return CUDA_SUCCESS;
}

static CUresult instantiate(CUgraphExec *phGraphExec, CUgraph hGraph)
{
    NEED_INIT();
    struct fgraph *gr = (struct fgraph *)hGraph;
    if (!phGraphExec || !obj_is(gr, MAGIC_GRAPH))
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g.lock);
    struct fexec *x = obj_new(sizeof *x, MAGIC_EXEC);
    if (x && gr->n) {
        x->nodes = malloc((size_t)gr->n * sizeof *x->nodes);
        if (x->nodes) {
            memcpy(x->nodes, gr->nodes, (size_t)gr->n * sizeof *x->nodes);
            x->n = gr->n;
        }
    }
    pthread_mutex_unlock(&g.lock);
    if (!x || (gr->n && !x->nodes))
        return CUDA_ERROR_OUT_OF_MEMORY;
    x->mem_bytes = gr->mem_bytes;
    x->mem_dev = gr->mem_dev;
    *phGraphExec = (CUgraphExec)x;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
    NEED_INIT();
    struct fexec *x = (struct fexec *)hGraphExec;
    if (!obj_is(x, MAGIC_EXEC))
        return CUDA_ERROR_INVALID_VALUE;
    if (x->mem_bytes && !__atomic_load_n(&x->mem_live, __ATOMIC_ACQUIRE)) {
        /* the first launch maps the graph's memory: the cache first */
        pthread_mutex_lock(&g.lock);
        uint64_t *cache = &g.graph_cache[x->mem_dev];
        uint64_t from_cache = *cache < x->mem_bytes ? *cache : x->mem_bytes;
        CUresult r = charge(x->mem_dev, x->mem_bytes - from_cache);
        if (r == CUDA_SUCCESS) {
            *cache -= from_cache;
            x->mem_live = 1;
        }
        pthread_mutex_unlock(&g.lock);
        if (r != CUDA_SUCCESS)
            return r;
    }
    return run_nodes(hStream, x->nodes, x->n);
}

EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
    return cuGraphLaunch(hGraphExec, hStream);
}

EXPORT CUresult cuGraphExecDestroy(CUgraphExec hGraphExec)
{
    NEED_INIT();
    struct fexec *x = (struct fexec *)hGraphExec;
    if (!obj_is(x, MAGIC_EXEC))
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g.lock);
    if (x->mem_live) /* the device's graph pool keeps it until trimmed */
        g.graph_cache[x->mem_dev] += x->mem_bytes;
    x->mem_live = 0;
    x->o.magic = 0; /* nodes kept: a launch may still be reading them */
    pthread_mutex_unlock(&g.lock);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphDestroy(CUgraph hGraph)
{
    NEED_INIT();
    struct fgraph *gr = (struct fgraph *)hGraph;
    if (!obj_is(gr, MAGIC_GRAPH))
        return CUDA_ERROR_INVALID_VALUE;
    gr->o.magic = 0;
    return CUDA_SUCCESS;
}

/* ---- test hooks (not driver API) ------------------------------------------ */

/* Device memory in use on dev, leaving out what the fake attributes to
 * process `except` (one atomic reading): lets a test tell what live
 * processes hold from what a killed one still holds until it is reaped. */
EXPORT unsigned long long tsFakeCudaUsedExcept(int dev, int except)
{
    if (!g.sh || dev < 0 || dev >= FAKE_MAX_DEVICES)
        return 0;
    shared_lock();
    reap_dead_locked();
    unsigned long long v = g.sh->dev[dev].used_bytes;
    for (int i = 0; i < FAKE_MAX_PROCS; i++)
        if (except > 0 && g.sh->proc[i].pid == except)
            v -= g.sh->proc[i].used_bytes[dev];
    shared_unlock();
    return v;
}

/* ---- errors ------------------------------------------------------------------- */

static const struct {
    CUresult code;
    const char *name, *text;
} errors[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {CUDA_ERROR_DEINITIALIZED, "CUDA_ERROR_DEINITIALIZED", "driver shutting down"},
    {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {CUDA_ERROR_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {CUDA_ERROR_ALREADY_MAPPED, "CUDA_ERROR_ALREADY_MAPPED", "resource already mapped"},
    {CUDA_ERROR_NOT_MAPPED, "CUDA_ERROR_NOT_MAPPED", "resource not mapped"},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {CUDA_ERROR_ILLEGAL_STATE, "CUDA_ERROR_ILLEGAL_STATE",
     "the operation cannot be performed in the present state"},
    {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready"},
    {CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS",
     "an illegal memory access was encountered"},
    {CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
    {CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE, "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE",
     "too many blocks in cooperative launch"},
    {CUDA_ERROR_NOT_PERMITTED, "CUDA_ERROR_NOT_PERMITTED", "operation not permitted"},
    {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
     "operation not permitted when stream is capturing"},
    {CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED",
     "operation failed due to a previous error during capture"},
    {CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

EXPORT CUresult cuGetErrorString(CUresult error, const char **pStr)
{
    if (!pStr)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
        if (errors[i].code == error) {
            *pStr = errors[i].text;
            return CUDA_SUCCESS;
        }
    *pStr = NULL;
    return CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult cuGetErrorName(CUresult error, const char **pStr)
{
    if (!pStr)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
        if (errors[i].code == error) {
            *pStr = errors[i].name;
            return CUDA_SUCCESS;
        }
    *pStr = NULL;
    return CUDA_ERROR_INVALID_VALUE;
}

/* ---- driver entry points -----------------------------------------------------
 * One row per exported function: the base name an application asks for, the
 * CUDA version that introduced this ABI of it, and whether it is the per-thread
 * default stream variant. The newest row whose version <= the one asked for
 * wins; per-thread rows only under CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM. */

typedef void (*fake_fn)(void);

/* ---- the pre-CUDA-3.2 entry points ---------------------------------------------
 * 32-bit sizes and device pointers. A 64-bit driver still exports them; the
 * fake serves pointers that fit (x86_64 MAP_32BIT mappings) and answers
 * CUDA_ERROR_NOT_SUPPORTED where it cannot. Sizes beyond 4 GiB cannot be
 * reported: cuMemGetInfo/cuDeviceTotalMem clamp to UINT_MAX. */

static unsigned int clamp32(uint64_t v) { return v > 0xffffffffULL ? 0xffffffffu : (unsigned)v; }

EXPORT CUresult cuMemGetInfo(unsigned int *free_bytes, unsigned int *total)
{
    size_t f, t;
    if (!free_bytes || !total)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = cuMemGetInfo_v2(&f, &t);
    if (r == CUDA_SUCCESS) {
        *free_bytes = clamp32(f);
        *total = clamp32(t);
    }
    return r;
}

EXPORT CUresult cuDeviceTotalMem(unsigned int *bytes, CUdevice dev)
{
    size_t b;
    if (!bytes)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = cuDeviceTotalMem_v2(&b, dev);
    if (r == CUDA_SUCCESS)
        *bytes = clamp32(b);
    return r;
}

EXPORT CUresult cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytesize)
{
#ifdef MAP_32BIT
    struct fctx *c;
    CUresult r = need_ctx(&c);
    if (r != CUDA_SUCCESS)
        return r;
    if (!dptr || bytesize == 0)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t rounded = round_up(bytesize, g.granularity);
    pthread_mutex_lock(&g.lock);
    r = charge(c->dev, rounded);
    void *m = r == CUDA_SUCCESS ? mmap(NULL, rounded, PROT_READ | PROT_WRITE,
                                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_32BIT, -1, 0)
                                : MAP_FAILED;
    struct falloc *a = m == MAP_FAILED ? NULL : malloc(sizeof *a);
    if (r == CUDA_SUCCESS && !a) {
        if (m != MAP_FAILED)
            munmap(m, rounded);
        uncharge(c->dev, rounded);
        r = CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (a) {
        /* freed like any other (the recycler may hand it out again) */
        *a = (struct falloc){.addr = (uintptr_t)m, .bytes = rounded,
                             .mapped = rounded, .dev = c->dev, .ctx = c};
        unsigned b = bucket(a->addr);
        a->next = g.allocs[b];
        g.allocs[b] = a;
        *dptr = (CUdeviceptr_v1)(uintptr_t)m;
    }
    pthread_mutex_unlock(&g.lock);
    return r;
#else
    (void)dptr, (void)bytesize;
    return CUDA_ERROR_NOT_SUPPORTED;
#endif
}

EXPORT CUresult cuMemAllocPitch(CUdeviceptr_v1 *dptr, unsigned int *pPitch,
                                unsigned int WidthInBytes, unsigned int Height,
                                unsigned int ElementSizeBytes)
{
    if (!pPitch || WidthInBytes == 0 || Height == 0 ||
        (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16))
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t pitch = round_up(WidthInBytes, FAKE_PITCH_ALIGN_BYTES);
    if (pitch * Height > 0xffffffffULL)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = cuMemAlloc(dptr, (unsigned)(pitch * Height));
    if (r == CUDA_SUCCESS)
        *pPitch = (unsigned)pitch;
    return r;
}

EXPORT CUresult cuMemFree(CUdeviceptr_v1 dptr) { return cuMemFree_v2((CUdeviceptr)dptr); }

EXPORT CUresult cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    return cuCtxCreate_v2(pctx, flags, dev);
}

EXPORT CUresult cuCtxDestroy(CUcontext ctx) { return cuCtxDestroy_v2(ctx); }

EXPORT CUresult cuDevicePrimaryCtxReset(CUdevice dev) { return cuDevicePrimaryCtxReset_v2(dev); }

EXPORT CUresult cuArrayCreate(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR_v1 *d)
{
    if (!d)
        return CUDA_ERROR_INVALID_VALUE;
    CUDA_ARRAY_DESCRIPTOR v2 = {.Width = d->Width, .Height = d->Height, .Format = d->Format,
                                .NumChannels = d->NumChannels};
    return cuArrayCreate_v2(pHandle, &v2);
}

EXPORT CUresult cuArray3DCreate(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR_v1 *d)
{
    if (!d)
        return CUDA_ERROR_INVALID_VALUE;
    CUDA_ARRAY3D_DESCRIPTOR v2 = {.Width = d->Width, .Height = d->Height, .Depth = d->Depth,
                                  .Format = d->Format, .NumChannels = d->NumChannels,
                                  .Flags = d->Flags};
    return cuArray3DCreate_v2(pHandle, &v2);
}

static const struct entry {
    const char *base;
    int version;
    int ptsz;
    fake_fn fn;
} entries[] = {
#define E(base, ver, ptsz, fn) {base, ver, ptsz, (fake_fn)fn}
    E("cuInit", 2000, 0, cuInit),
    E("cuDriverGetVersion", 2020, 0, cuDriverGetVersion),
    E("cuDeviceGet", 2000, 0, cuDeviceGet),
    E("cuDeviceGetCount", 2000, 0, cuDeviceGetCount),
    E("cuDeviceGetName", 2000, 0, cuDeviceGetName),
    E("cuDeviceGetUuid", 9020, 0, cuDeviceGetUuid),
    E("cuDeviceGetUuid", 11040, 0, cuDeviceGetUuid_v2),
    E("cuDeviceTotalMem", 2000, 0, cuDeviceTotalMem),
    E("cuDeviceTotalMem", 3020, 0, cuDeviceTotalMem_v2),
    E("cuDeviceGetAttribute", 2000, 0, cuDeviceGetAttribute),
    E("cuDevicePrimaryCtxRetain", 7000, 0, cuDevicePrimaryCtxRetain),
    E("cuDevicePrimaryCtxRelease", 7000, 0, cuDevicePrimaryCtxRelease),
    E("cuDevicePrimaryCtxRelease", 11000, 0, cuDevicePrimaryCtxRelease_v2),
    E("cuDevicePrimaryCtxReset", 7000, 0, cuDevicePrimaryCtxReset),
    E("cuDevicePrimaryCtxReset", 11000, 0, cuDevicePrimaryCtxReset_v2),
    E("cuCtxCreate", 2000, 0, cuCtxCreate),
    E("cuCtxCreate", 3020, 0, cuCtxCreate_v2),
    E("cuCtxCreate", 11040, 0, cuCtxCreate_v3),
    E("cuCtxCreate", 12050, 0, cuCtxCreate_v4),
    E("cuCtxDestroy", 2000, 0, cuCtxDestroy),
    E("cuCtxDestroy", 4000, 0, cuCtxDestroy_v2),
    E("cuCtxSetCurrent", 4000, 0, cuCtxSetCurrent),
    E("cuCtxGetCurrent", 4000, 0, cuCtxGetCurrent),
    E("cuCtxPushCurrent", 4000, 0, cuCtxPushCurrent_v2),
    E("cuCtxPopCurrent", 4000, 0, cuCtxPopCurrent_v2),
    E("cuCtxGetDevice", 2000, 0, cuCtxGetDevice),
    E("cuCtxSynchronize", 2000, 0, cuCtxSynchronize),
    E("cuMemGetInfo", 2000, 0, cuMemGetInfo),
    E("cuMemGetInfo", 3020, 0, cuMemGetInfo_v2),
    E("cuMemAlloc", 2000, 0, cuMemAlloc),
    E("cuMemAlloc", 3020, 0, cuMemAlloc_v2),
    E("cuMemAllocPitch", 2000, 0, cuMemAllocPitch),
    E("cuMemAllocPitch", 3020, 0, cuMemAllocPitch_v2),
    E("cuMemAllocManaged", 6000, 0, cuMemAllocManaged),
    E("cuMemFree", 2000, 0, cuMemFree),
    E("cuMemFree", 3020, 0, cuMemFree_v2),
    E("cuMemAllocAsync", 11020, 0, cuMemAllocAsync),
    E("cuMemAllocAsync", 11020, 1, cuMemAllocAsync_ptsz),
    E("cuMemAllocFromPoolAsync", 11020, 0, cuMemAllocFromPoolAsync),
    E("cuMemAllocFromPoolAsync", 11020, 1, cuMemAllocFromPoolAsync_ptsz),
    E("cuMemFreeAsync", 11020, 0, cuMemFreeAsync),
    E("cuMemFreeAsync", 11020, 1, cuMemFreeAsync_ptsz),
    E("cuMemPoolCreate", 11020, 0, cuMemPoolCreate),
    E("cuMemPoolDestroy", 11020, 0, cuMemPoolDestroy),
    E("cuDeviceGetDefaultMemPool", 11020, 0, cuDeviceGetDefaultMemPool),
    E("cuDeviceGetMemPool", 11020, 0, cuDeviceGetMemPool),
    E("cuDeviceSetMemPool", 11020, 0, cuDeviceSetMemPool),
    E("cuMemPoolTrimTo", 11020, 0, cuMemPoolTrimTo),
    E("cuMemPoolSetAttribute", 11020, 0, cuMemPoolSetAttribute),
    E("cuMemPoolGetAttribute", 11020, 0, cuMemPoolGetAttribute),
    E("cuMemsetD8", 3020, 0, cuMemsetD8_v2),
    E("cuMemcpyHtoD", 3020, 0, cuMemcpyHtoD_v2),
    E("cuMemcpyDtoH", 3020, 0, cuMemcpyDtoH_v2),
    E("cuArrayCreate", 2000, 0, cuArrayCreate),
    E("cuArrayCreate", 3020, 0, cuArrayCreate_v2),
    E("cuArray3DCreate", 2000, 0, cuArray3DCreate),
    E("cuArray3DCreate", 3020, 0, cuArray3DCreate_v2),
    E("cuArrayDestroy", 2000, 0, cuArrayDestroy),
    E("cuArrayGetMemoryRequirements", 11060, 0, cuArrayGetMemoryRequirements),
    E("cuMipmappedArrayCreate", 5000, 0, cuMipmappedArrayCreate),
    E("cuMipmappedArrayDestroy", 5000, 0, cuMipmappedArrayDestroy),
    E("cuMipmappedArrayGetMemoryRequirements", 11060, 0, cuMipmappedArrayGetMemoryRequirements),
    E("cuMemGetAllocationGranularity", 10020, 0, cuMemGetAllocationGranularity),
    E("cuMemCreate", 10020, 0, cuMemCreate),
    E("cuMemRelease", 10020, 0, cuMemRelease),
    E("cuMemRetainAllocationHandle", 11000, 0, cuMemRetainAllocationHandle),
    E("cuMemAddressReserve", 10020, 0, cuMemAddressReserve),
    E("cuMemAddressFree", 10020, 0, cuMemAddressFree),
    E("cuMemMap", 10020, 0, cuMemMap),
    E("cuMemUnmap", 10020, 0, cuMemUnmap),
    E("cuMemSetAccess", 10020, 0, cuMemSetAccess),
    E("cuStreamCreate", 2000, 0, cuStreamCreate),
    E("cuStreamDestroy", 4000, 0, cuStreamDestroy_v2),
    E("cuStreamSynchronize", 2000, 0, cuStreamSynchronize),
    E("cuStreamSynchronize", 7000, 1, cuStreamSynchronize_ptsz),
    E("cuStreamQuery", 2000, 0, cuStreamQuery),
    E("cuStreamQuery", 7000, 1, cuStreamQuery_ptsz),
    E("cuStreamWaitEvent", 3020, 0, cuStreamWaitEvent),
    E("cuStreamWaitEvent", 7000, 1, cuStreamWaitEvent_ptsz),
    E("cuStreamGetCtx", 9020, 0, cuStreamGetCtx),
    E("cuStreamGetCtx", 9020, 1, cuStreamGetCtx_ptsz),
    E("cuStreamBeginCapture", 10010, 0, cuStreamBeginCapture_v2),
    E("cuStreamBeginCapture", 10010, 1, cuStreamBeginCapture_v2_ptsz),
    E("cuStreamEndCapture", 10000, 0, cuStreamEndCapture),
    E("cuStreamEndCapture", 10000, 1, cuStreamEndCapture_ptsz),
    E("cuStreamIsCapturing", 10000, 0, cuStreamIsCapturing),
    E("cuStreamIsCapturing", 10000, 1, cuStreamIsCapturing_ptsz),
    E("cuEventCreate", 2000, 0, cuEventCreate),
    E("cuEventRecord", 2000, 0, cuEventRecord),
    E("cuEventRecord", 7000, 1, cuEventRecord_ptsz),
    E("cuEventQuery", 2000, 0, cuEventQuery),
    E("cuEventSynchronize", 2000, 0, cuEventSynchronize),
    E("cuEventElapsedTime", 2000, 0, cuEventElapsedTime),
    E("cuEventDestroy", 4000, 0, cuEventDestroy_v2),
    E("cuModuleLoadData", 2000, 0, cuModuleLoadData),
    E("cuModuleGetFunction", 2000, 0, cuModuleGetFunction),
    E("cuModuleUnload", 2000, 0, cuModuleUnload),
    E("cuLaunchKernel", 4000, 0, cuLaunchKernel),
    E("cuLaunchKernel", 7000, 1, cuLaunchKernel_ptsz),
    E("cuLaunchCooperativeKernel", 9000, 0, cuLaunchCooperativeKernel),
    E("cuLaunchCooperativeKernel", 9000, 1, cuLaunchCooperativeKernel_ptsz),
    E("cuLaunchCooperativeKernelMultiDevice", 9000, 0, cuLaunchCooperativeKernelMultiDevice),
    E("cuLaunchKernelEx", 11060, 0, cuLaunchKernelEx),
    E("cuLaunchKernelEx", 11060, 1, cuLaunchKernelEx_ptsz),
    E("cuGraphCreate", 10000, 0, cuGraphCreate),
    E("cuGraphAddKernelNode", 10000, 0, cuGraphAddKernelNode),
    E("cuGraphAddKernelNode", 12000, 0, cuGraphAddKernelNode_v2),
    E("cuGraphInstantiateWithFlags", 11040, 0, cuGraphInstantiateWithFlags),
    E("cuGraphInstantiate", 10000, 0, cuGraphInstantiate),
    E("cuGraphInstantiate", 11000, 0, cuGraphInstantiate_v2),
    E("cuGraphInstantiateWithParams", 12000, 0, cuGraphInstantiateWithParams),
    E("cuGraphInstantiateWithParams", 12000, 1, cuGraphInstantiateWithParams_ptsz),
    E("cuGraphAddMemAllocNode", 11040, 0, cuGraphAddMemAllocNode),
    E("cuGraphAddMemFreeNode", 11040, 0, cuGraphAddMemFreeNode),
    E("cuDeviceGraphMemTrim", 11040, 0, cuDeviceGraphMemTrim),
    E("cuGraphLaunch", 10000, 0, cuGraphLaunch),
    E("cuGraphLaunch", 10000, 1, cuGraphLaunch_ptsz),
    E("cuGraphExecDestroy", 10000, 0, cuGraphExecDestroy),
    E("cuGraphDestroy", 10000, 0, cuGraphDestroy),
    E("cuGetErrorString", 6000, 0, cuGetErrorString),
    E("cuGetErrorName", 6000, 0, cuGetErrorName),
    E("cuGetProcAddress", 11030, 0, cuGetProcAddress),
    E("cuGetProcAddress", 12000, 0, cuGetProcAddress_v2),
#undef E
};

EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
                                    cuuint64_t flags, CUdriverProcAddressQueryResult *symbolStatus)
{
    if (!symbol || !pfn || flags > TS_CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g.lock);
    configure_locked();
    int dv = g.driver_version;
    pthread_mutex_unlock(&g.lock);
    if (cudaVersion > dv)
        return CUDA_ERROR_INVALID_VALUE;
    int ptsz = flags == TS_CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
    const struct entry *best = NULL;
    int known = 0;
    for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++) {
        const struct entry *e = &entries[i];
        if (strcmp(e->base, symbol) != 0)
            continue;
        known = 1;
        if (e->version > cudaVersion || (e->ptsz && !ptsz))
            continue;
        if (!best || e->version > best->version || (e->version == best->version && e->ptsz))
            best = e;
    }
    *pfn = NULL;
    if (best) {
        _Static_assert(sizeof(fake_fn) == sizeof(void *), "function pointers fit void *");
        memcpy(pfn, &best->fn, sizeof *pfn);
    }
    if (symbolStatus)
        *symbolStatus = best    ? CU_GET_PROC_ADDRESS_SUCCESS
                        : known ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                                : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return CUDA_SUCCESS; /* an unknown or too-new symbol: NULL, as the driver does */
}

EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion,
                                 cuuint64_t flags)
{
    return cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, NULL);
}
