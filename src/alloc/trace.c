/*
 * trace.c - the allocation-trace files of ../shared/traces/alloc: reading
 * X.events.csv, X.initial_live.csv and X.segments.csv into a ts_memtrace,
 * writing a trace back (the generator's output), and the trace's own peak of
 * requested bytes (the numerator of every fragmentation figure).
 *
 * Columns are found by header name, so extra columns are ignored. Of the
 * actions, alloc and free_completed are played (free_requested differs only
 * for cross-stream frees, which free_completed already orders), segment_alloc
 * and segment_free are kept for the fidelity check, the rest are skipped.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/ptrmap.h"
#include "io/read_file.h"
#include "model/csv_reader.h"
#include "tessera/alloc.h"

#define TRACE_MAX_COLS 16
#define TRACE_FILE_MAX_BYTES (1ull << 32)

static int col_index(char **hdr, int nh, const char *name)
{
    for (int i = 0; i < nh && i < TRACE_MAX_COLS; i++)
        if (strcmp(hdr[i], name) == 0)
            return i;
    return -1;
}

static int parse_u64(const char *file, int line, const char *col, const char *s, int empty_ok,
                     uint64_t *out, ts_err *err)
{
    if (!*s && empty_ok) {
        *out = 0;
        return 0;
    }
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (!*s || *s == '-' || *end || errno)
        return ts_err_set(err, TS_EINVAL, "%s:%d: %s: must be a non-negative integer, got \"%.32s\"",
                          file, line, col, s);
    *out = v;
    return 0;
}

/* Walks the rows of a CSV file: calls row(fields) for each non-empty line
 * after the header, with cols[] the indices of the wanted columns. */
typedef int (*row_fn)(void *ctx, const char *file, int line, char **f, const int *cols,
                      ts_err *err);

static int walk_csv(const char *path, const char *const *want, int nwant, int required,
                    row_fn row, void *ctx, ts_err *err)
{
    char *buf = NULL;
    size_t size;
    int rc = io_read_file(path, TRACE_FILE_MAX_BYTES, &buf, &size, err);
    if (rc != 0)
        return rc;
    char *save = buf, *line;
    int lineno = 0, cols[TRACE_MAX_COLS];
    char *f[TRACE_MAX_COLS];
    while ((line = save) != NULL && *line) {
        char *nl = strchr(line, '\n');
        save = nl ? nl + 1 : NULL;
        if (nl)
            *nl = '\0';
        size_t len = strlen(line);
        if (len && line[len - 1] == '\r')
            line[len - 1] = '\0';
        lineno++;
        if (!*line)
            continue;
        int nf = ts_csv_split(line, f, TRACE_MAX_COLS);
        if (lineno == 1) {
            for (int i = 0; i < nwant; i++) {
                cols[i] = col_index(f, nf, want[i]);
                if (cols[i] < 0 && i < required) {
                    free(buf);
                    return ts_err_set(err, TS_EINVAL, "%s:1: header: no column \"%s\"", path,
                                      want[i]);
                }
            }
            continue;
        }
        for (int i = 0; i < nwant; i++) {
            if (cols[i] >= nf && i < required) {
                free(buf);
                return ts_err_set(err, TS_EINVAL, "%s:%d: %s: missing", path, lineno, want[i]);
            }
        }
        rc = row(ctx, path, lineno, f, cols, err);
        if (rc != 0)
            break;
    }
    free(buf);
    return rc;
}

static int grow(void **arr, size_t *cap, size_t n, size_t elem)
{
    if (n < *cap)
        return 0;
    size_t nc = *cap ? *cap * 2 : 1024;
    void *na = realloc(*arr, nc * elem);
    if (!na)
        return TS_ENOMEM;
    *arr = na;
    *cap = nc;
    return 0;
}

/* A numeric column of a row: the field at cols[at], its name in errors,
 * whether it may be empty (read as 0: unknown), and where it goes in the
 * row's struct. */
typedef struct trace_num {
    int at;
    const char *name;
    int empty_ok;
    size_t off;
} trace_num;

/* Each of nums[0..n) into row, in order; 0, or the first column's error. */
static int parse_nums(const char *file, int line, char **f, const int *cols,
                      const trace_num *nums, int n, void *row, ts_err *err)
{
    int rc = 0;
    for (int i = 0; rc == 0 && i < n; i++)
        rc = parse_u64(file, line, nums[i].name, f[cols[nums[i].at]], nums[i].empty_ok,
                       (uint64_t *)((char *)row + nums[i].off), err);
    return rc;
}

/* item (size bytes) after the *n items of *arr (room for *cap); 0, or
 * TS_ENOMEM naming file. */
static int append(void **arr, size_t *n, size_t *cap, const void *item, size_t size,
                  const char *file, ts_err *err)
{
    if (grow(arr, cap, *n, size) != 0)
        return ts_err_set(err, TS_ENOMEM, "%s: out of memory", file);
    memcpy((char *)*arr + *n * size, item, size);
    ++*n;
    return 0;
}

/* A table being read: the trace, and the room of the array being filled. */
struct trace_ctx {
    ts_memtrace *t;
    size_t cap;
};

static int ev_row(void *ctx, const char *file, int line, char **f, const int *cols, ts_err *err)
{
    struct trace_ctx *c = ctx;
    const char *action = f[cols[1]];
    int op;
    if (strcmp(action, "alloc") == 0)
        op = TS_MEMTRACE_ALLOC;
    else if (strcmp(action, "free_completed") == 0)
        op = TS_MEMTRACE_FREE;
    else if (strcmp(action, "segment_alloc") == 0)
        op = TS_MEMTRACE_SEGMENT_ALLOC;
    else if (strcmp(action, "segment_free") == 0)
        op = TS_MEMTRACE_SEGMENT_FREE;
    else
        return 0;
    ts_memtrace_ev e;
    memset(&e, 0, sizeof e);
    e.op = op;
    static const trace_num NUMS[] = {
        {2, "addr", 0, offsetof(ts_memtrace_ev, addr)},
        {3, "size", 0, offsetof(ts_memtrace_ev, size)},
        {4, "stream", 0, offsetof(ts_memtrace_ev, stream)},
    };
    uint64_t seq = 0;
    int rc = parse_u64(file, line, "seq", f[cols[0]], 0, &seq, err);
    if (rc == 0)
        rc = parse_nums(file, line, f, cols, NUMS, 3, &e, err);
    if (rc != 0)
        return rc;
    if (op == TS_MEMTRACE_ALLOC && !e.size)
        return ts_err_set(err, TS_EINVAL, "%s:%d: size: an alloc must be > 0", file, line);
    if (!e.addr)
        return ts_err_set(err, TS_EINVAL, "%s:%d: addr: must be > 0", file, line);
    e.seq = (int64_t)seq;
    return append((void **)&c->t->ev, &c->t->nev, &c->cap, &e, sizeof e, file, err);
}

static int live_row(void *ctx, const char *file, int line, char **f, const int *cols, ts_err *err)
{
    struct trace_ctx *c = ctx;
    ts_memtrace_live l;
    memset(&l, 0, sizeof l);
    static const trace_num NUMS[] = {
        {0, "addr", 0, offsetof(ts_memtrace_live, addr)},
        {1, "requested_size", 0, offsetof(ts_memtrace_live, requested)},
        {2, "block_size", 1, offsetof(ts_memtrace_live, block_size)},
        {3, "stream", 0, offsetof(ts_memtrace_live, stream)},
    };
    int rc = parse_nums(file, line, f, cols, NUMS, 4, &l, err);
    if (rc != 0)
        return rc;
    if (!l.addr || !l.requested)
        return ts_err_set(err, TS_EINVAL, "%s:%d: addr and requested_size must be > 0", file, line);
    return append((void **)&c->t->live, &c->t->nlive, &c->cap, &l, sizeof l, file, err);
}

static int seg_row(void *ctx, const char *file, int line, char **f, const int *cols, ts_err *err)
{
    struct trace_ctx *c = ctx;
    ts_memtrace_seg s;
    memset(&s, 0, sizeof s);
    static const trace_num NUMS[] = {
        {0, "addr", 0, offsetof(ts_memtrace_seg, addr)},
        {1, "total_size", 0, offsetof(ts_memtrace_seg, size)},
        {2, "stream", 0, offsetof(ts_memtrace_seg, stream)},
    };
    int rc = parse_nums(file, line, f, cols, NUMS, 3, &s, err);
    if (rc != 0)
        return rc;
    const char *pool = f[cols[3]];
    if (strcmp(pool, "small") != 0 && strcmp(pool, "large") != 0)
        return ts_err_set(err, TS_EINVAL, "%s:%d: pool: must be small or large, got \"%.16s\"",
                          file, line, pool);
    s.small_pool = pool[0] == 's';
    return append((void **)&c->t->seg, &c->t->nseg, &c->cap, &s, sizeof s, file, err);
}

static int live_cmp(const void *a, const void *b)
{
    const ts_memtrace_live *x = a, *y = b;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

int ts_memtrace_load(const char *events_csv, const char *initial_live_csv,
                     const char *segments_csv, ts_memtrace *out, ts_err *err)
{
    memset(out, 0, sizeof *out);
    static const char *const ev_cols[] = {"seq", "action", "addr", "size", "stream"};
    static const char *const live_cols[] = {"addr", "requested_size", "block_size", "stream"};
    static const char *const seg_cols[] = {"addr", "total_size", "stream", "pool"};
    struct trace_ctx ec = {out, 0};
    int rc = walk_csv(events_csv, ev_cols, 5, 5, ev_row, &ec, err);
    if (rc == 0 && initial_live_csv) {
        struct trace_ctx lc = {out, 0};
        rc = walk_csv(initial_live_csv, live_cols, 4, 4, live_row, &lc, err);
        if (rc == 0 && out->nlive)
            qsort(out->live, out->nlive, sizeof *out->live, live_cmp);
    }
    if (rc == 0 && segments_csv) {
        struct trace_ctx sc = {out, 0};
        rc = walk_csv(segments_csv, seg_cols, 4, 4, seg_row, &sc, err);
    }
    if (rc != 0)
        ts_memtrace_free(out);
    return rc;
}

void ts_memtrace_free(ts_memtrace *t)
{
    free(t->ev);
    free(t->live);
    free(t->seg);
    memset(t, 0, sizeof *t);
}

int ts_memtrace_write(const ts_memtrace *t, const char *events_csv, const char *initial_live_csv,
                      ts_err *err)
{
    FILE *f = fopen(events_csv, "w");
    if (!f)
        return ts_err_set(err, TS_EIO, "%s: cannot create: %s", events_csv, strerror(errno));
    fprintf(f, "seq,time_us,action,addr,size,stream\n");
    long long seq = 0;
    for (size_t i = 0; i < t->nev; i++) {
        const ts_memtrace_ev *e = &t->ev[i];
        unsigned long long a = e->addr, s = e->size, st = e->stream;
        switch (e->op) {
        case TS_MEMTRACE_ALLOC:
            fprintf(f, "%lld,%lld,alloc,%llu,%llu,%llu\n", seq, seq, a, s, st);
            seq++;
            break;
        case TS_MEMTRACE_FREE:
            fprintf(f, "%lld,%lld,free_requested,%llu,%llu,%llu\n", seq, seq, a, s, st);
            seq++;
            fprintf(f, "%lld,%lld,free_completed,%llu,%llu,%llu\n", seq, seq, a, s, st);
            seq++;
            break;
        default:
            fprintf(f, "%lld,%lld,%s,%llu,%llu,%llu\n", seq, seq,
                    e->op == TS_MEMTRACE_SEGMENT_ALLOC ? "segment_alloc" : "segment_free", a, s,
                    st);
            seq++;
        }
    }
    int bad = ferror(f);
    if (fclose(f) != 0 || bad)
        return ts_err_set(err, TS_EIO, "%s: write error", events_csv);
    if (!initial_live_csv)
        return 0;
    f = fopen(initial_live_csv, "w");
    if (!f)
        return ts_err_set(err, TS_EIO, "%s: cannot create: %s", initial_live_csv, strerror(errno));
    fprintf(f, "addr,requested_size,block_size,stream,kind\n");
    for (size_t i = 0; i < t->nlive; i++) {
        const ts_memtrace_live *l = &t->live[i];
        fprintf(f, "%llu,%llu,", (unsigned long long)l->addr, (unsigned long long)l->requested);
        if (l->block_size)
            fprintf(f, "%llu", (unsigned long long)l->block_size);
        fprintf(f, ",%llu,%s\n", (unsigned long long)l->stream,
                l->block_size ? "live_at_end" : "freed_in_window");
    }
    bad = ferror(f);
    if (fclose(f) != 0 || bad)
        return ts_err_set(err, TS_EIO, "%s: write error", initial_live_csv);
    return 0;
}

uint64_t ts_memtrace_peak_requested(const ts_memtrace *t)
{
    ts_ptrmap live;
    alloc_ptrmap_init(&live);
    uint64_t cur = 0, peak = 0;
    for (size_t i = 0; i < t->nlive; i++) {
        cur += t->live[i].requested;
        alloc_ptrmap_put(&live, t->live[i].addr, (void *)(uintptr_t)t->live[i].requested);
    }
    peak = cur;
    for (size_t i = 0; i < t->nev; i++) {
        const ts_memtrace_ev *e = &t->ev[i];
        if (e->op == TS_MEMTRACE_ALLOC) {
            cur += e->size;
            alloc_ptrmap_put(&live, e->addr, (void *)(uintptr_t)e->size);
            if (cur > peak)
                peak = cur;
        } else if (e->op == TS_MEMTRACE_FREE) {
            cur -= (uint64_t)(uintptr_t)alloc_ptrmap_del(&live, e->addr);
        }
    }
    alloc_ptrmap_destroy(&live);
    return peak;
}
