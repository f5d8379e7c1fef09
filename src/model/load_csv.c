/*
 * load_csv.c - the openb trace's node and pod lists.
 *
 * The format is plain comma-separated values with a header row; columns are
 * found by header name so extra or reordered columns are harmless, and the
 * trace's 5-column multigpu files load like the 11-column ones. Parsing is
 * strict: every numeric field must be a whole non-negative number, every
 * error names file, line and column, and a failed load frees what it built so
 * the caller's state is untouched. Pods are interned into "spec classes"
 * (cpu, gpu share, GPU count, allowed models) - the grouping the
 * fragmentation measure's typical-pod list is built from.
 */
#include "tessera/load.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tessera/grow.h"

#define CSV_MAX_COLS 32
#define CSV_FIELD_MAX 256

typedef struct csv_reader {
    const char *p, *end;
    const char *fname;
    int line;
    int header_line; /* 0 until the header row is read */
    int ncols;
    char cols[CSV_MAX_COLS][CSV_FIELD_MAX];
    int nhdr;
    char hdr[CSV_MAX_COLS][CSV_FIELD_MAX]; /* header names, for messages */
} csv_reader;

/* Column c's header name, or "column N" while reading the header itself. */
static const char *col_name(const csv_reader *r, int c, char *buf, size_t cap)
{
    if (c < r->nhdr && r->hdr[c][0])
        return r->hdr[c];
    snprintf(buf, cap, "column %d", c + 1);
    return buf;
}

/* Reads one row into r->cols. Returns 1 for a row, 0 at end, <0 on error. */
static int csv_row(csv_reader *r, ts_err *err)
{
    for (;;) {
        if (r->p >= r->end)
            return 0;
        r->line++;
        const char *eol = memchr(r->p, '\n', (size_t)(r->end - r->p));
        const char *stop = eol ? eol : r->end;
        const char *next = eol ? eol + 1 : r->end;
        if (stop > r->p && stop[-1] == '\r')
            stop--;
        if (stop == r->p) { /* blank line */
            r->p = next;
            continue;
        }
        r->ncols = 0;
        const char *f = r->p;
        for (;;) {
            const char *comma = memchr(f, ',', (size_t)(stop - f));
            const char *fe = comma ? comma : stop;
            if (r->ncols == CSV_MAX_COLS)
                return ts_err_set(err, TS_EINVAL, "%s:%d: more than %d columns", r->fname,
                                  r->line, CSV_MAX_COLS);
            size_t n = (size_t)(fe - f);
            char cn[32];
            if (n >= CSV_FIELD_MAX)
                return ts_err_set(err, TS_EINVAL, "%s:%d: %s: field longer than %d bytes",
                                  r->fname, r->line, col_name(r, r->ncols, cn, sizeof cn),
                                  CSV_FIELD_MAX - 1);
            if (memchr(f, '"', n) || memchr(f, '\0', n))
                return ts_err_set(err, TS_EINVAL,
                                  "%s:%d: %s: quotes and NUL bytes are not allowed", r->fname,
                                  r->line, col_name(r, r->ncols, cn, sizeof cn));
            memcpy(r->cols[r->ncols], f, n);
            r->cols[r->ncols][n] = '\0';
            r->ncols++;
            if (!comma)
                break;
            f = comma + 1;
        }
        r->p = next;
        return 1;
    }
}

typedef struct col_want {
    const char *name;
    bool required;
    int idx;
} col_want;

static int csv_header(csv_reader *r, col_want *want, int nwant, ts_err *err)
{
    int rc = csv_row(r, err);
    if (rc < 0)
        return rc;
    if (rc == 0)
        return ts_err_set(err, TS_EINVAL, "%s:1: header: empty file (expected a header row)",
                          r->fname);
    r->header_line = r->line;
    r->nhdr = r->ncols;
    memcpy(r->hdr, r->cols, sizeof r->hdr);
    for (int w = 0; w < nwant; w++) {
        want[w].idx = -1;
        for (int c = 0; c < r->ncols; c++)
            if (strcmp(r->cols[c], want[w].name) == 0)
                want[w].idx = c;
        if (want[w].required && want[w].idx < 0)
            return ts_err_set(err, TS_EINVAL, "%s:%d: header: missing column \"%s\"", r->fname,
                              r->line, want[w].name);
    }
    return 0;
}

static const char *field(const csv_reader *r, const col_want *w)
{
    return w->idx >= 0 && w->idx < r->ncols ? r->cols[w->idx] : NULL;
}

static int parse_nonneg(const csv_reader *r, const col_want *w, int64_t max, int64_t *out,
                        ts_err *err)
{
    const char *s = field(r, w);
    if (!s)
        return ts_err_set(err, TS_EINVAL, "%s:%d: %s: missing field", r->fname, r->line,
                          w->name);
    if (!*s)
        return ts_err_set(err, TS_EINVAL, "%s:%d: %s: empty, expected a number", r->fname,
                          r->line, w->name);
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (*end || errno || s[0] == '+' || s[0] == ' ')
        return ts_err_set(err, TS_EINVAL, "%s:%d: %s: not a whole number: \"%s\"", r->fname,
                          r->line, w->name, s);
    if (v < 0)
        return ts_err_set(err, TS_EINVAL, "%s:%d: %s: must not be negative, got %lld",
                          r->fname, r->line, w->name, v);
    if (v > max)
        return ts_err_set(err, TS_EINVAL, "%s:%d: %s: %lld is larger than %lld", r->fname,
                          r->line, w->name, v, (long long)max);
    *out = v;
    return 0;
}

/* One data row's work: r->cols holds the row, w the wanted columns. */
typedef int (*csv_row_fn)(const csv_reader *r, const col_want *w, void *ctx, ts_err *err);

/* Both lists are read the same way: the header, then each row handed to
 * on_row, and a file with no rows after its header refused naming what it
 * lacks (a list of nothing is a mistake, not an empty cluster). */
static int csv_load(const char *buf, size_t len, const char *fname, col_want *w, int nw,
                    const char *what, csv_row_fn on_row, void *ctx, ts_err *err)
{
    csv_reader *r = calloc(1, sizeof *r);
    int rc, nrows = 0;
    if (!r)
        return ts_err_set(err, TS_ENOMEM, "%s: out of memory", fname);
    r->p = buf;
    r->end = buf + len;
    r->fname = fname;
    if ((rc = csv_header(r, w, nw, err)) == 0) {
        while ((rc = csv_row(r, err)) > 0 && (rc = on_row(r, w, ctx, err)) == 0)
            nrows++;
    }
    if (rc == 0 && nrows == 0)
        rc = ts_err_set(err, TS_EINVAL, "%s:%d: header: no rows after the header (no %s)", fname,
                        r->header_line, what);
    free(r);
    return rc < 0 ? rc : 0;
}

#define CSV_MAX_CPU_MILLI (1LL << 32)
#define CSV_MAX_MEM_MIB (1LL << 32)

enum { NODE_SN, NODE_CPU, NODE_MEM, NODE_GPU, NODE_MODEL, NODE_NCOL };

static int load_node_row(const csv_reader *r, const col_want *w, void *ctx, ts_err *err)
{
    ts_cluster *c = ctx;
    const char *fname = r->fname;
    int64_t cpu = 0, mem = 0, ngpu = 0; /* set by parse_nonneg before use */
    int rc;
    const char *name = field(r, &w[NODE_SN]);
    const char *model = field(r, &w[NODE_MODEL]);
    if ((rc = parse_nonneg(r, &w[NODE_CPU], CSV_MAX_CPU_MILLI, &cpu, err)) < 0 ||
        (rc = parse_nonneg(r, &w[NODE_MEM], CSV_MAX_MEM_MIB, &mem, err)) < 0 ||
        (rc = parse_nonneg(r, &w[NODE_GPU], TS_NODE_MAX_GPUS, &ngpu, err)) < 0)
        return rc;
    if (!name || !*name)
        return ts_err_set(err, TS_EINVAL, "%s:%d: sn: empty node name", fname, r->line);
    if (strlen(name) >= TS_NAME_MAX)
        return ts_err_set(err, TS_EINVAL, "%s:%d: sn: must be 1..%d characters", fname, r->line,
                          TS_NAME_MAX - 1);
    if (!model)
        return ts_err_set(err, TS_EINVAL, "%s:%d: model: missing field", fname, r->line);
    ts_node_spec s = {.name = name,
                      .gpu_model = model,
                      .ngpu = (int)ngpu,
                      .cpu_milli = cpu,
                      .mem_mib = mem,
                      .gpu_mode = TS_GPU_SHARED};
    if ((rc = ts_cluster_add_node(c, &s, err)) == TS_EEXIST)
        /* the column is "sn", and a bad file is TS_EINVAL like any other */
        return ts_err_set(err, TS_EINVAL, "%s:%d: sn: duplicate node \"%s\"", fname, r->line,
                          name);
    if (rc < 0)
        ts_err_prefix(err, "%s:%d: ", fname, r->line);
    return rc < 0 ? rc : 0;
}

int ts_load_nodes_csv(const char *buf, size_t len, const char *fname, ts_cluster **out,
                      ts_err *err)
{
    *out = NULL;
    ts_cluster *c = ts_cluster_new();
    if (!c)
        return ts_err_set(err, TS_ENOMEM, "%s: out of memory", fname);
    col_want w[NODE_NCOL] = {{"sn", true, -1},
                             {"cpu_milli", true, -1},
                             {"memory_mib", true, -1},
                             {"gpu", true, -1},
                             {"model", true, -1}};
    int rc = csv_load(buf, len, fname, w, NODE_NCOL, "nodes", load_node_row, c, err);
    if (rc == 0)
        *out = c;
    else
        ts_cluster_free(c);
    return rc;
}

void ts_workload_free(ts_workload *w)
{
    if (!w)
        return;
    free(w->pods);
    free(w->specs);
    free(w->spec_count);
    free(w);
}

static bool same_spec(const ts_request *a, const ts_request *b)
{
    return a->cpu_milli == b->cpu_milli && a->mem_mib == b->mem_mib &&
           a->gpu_milli == b->gpu_milli &&
           a->num_gpu == b->num_gpu && a->model_mask == b->model_mask &&
           a->mig_profile == b->mig_profile;
}

static int intern_spec(ts_workload *w, const ts_request *req, int *cap)
{
    for (int i = 0; i < w->nspecs; i++)
        if (same_spec(&w->specs[i], req)) {
            w->spec_count[i]++;
            return i;
        }
    ts_block_part parts[] = {TS_GROW_PART(w->specs), TS_GROW_PART(w->spec_count)};
    if (ts_grow_parts(parts, 2, cap, w->nspecs + 1, 64) != 0)
        return TS_ENOMEM;
    w->specs[w->nspecs] = *req;
    w->spec_count[w->nspecs] = 1;
    return w->nspecs++;
}

enum { POD_NAME, POD_CPU, POD_MEM, POD_NGPU, POD_MILLI, POD_SPEC, POD_NCOL };

typedef struct load_pods {
    ts_workload *wl;
    int pod_cap, spec_cap;
} load_pods;

static int load_pod_row(const csv_reader *r, const col_want *w, void *ctx, ts_err *err)
{
    load_pods *lp = ctx;
    ts_workload *wl = lp->wl;
    const char *fname = r->fname;
    ts_request q = {.mig_profile = -1};
    int64_t ngpu = 0, milli = 0; /* set by parse_nonneg before use */
    int rc;
    const char *name = field(r, &w[POD_NAME]);
    if (!name || !*name || strlen(name) >= TS_NAME_MAX)
        return ts_err_set(err, TS_EINVAL, "%s:%d: name: must be 1..%d characters", fname,
                          r->line, TS_NAME_MAX - 1);
    if ((rc = parse_nonneg(r, &w[POD_CPU], CSV_MAX_CPU_MILLI, &q.cpu_milli, err)) < 0 ||
        (rc = parse_nonneg(r, &w[POD_MEM], CSV_MAX_MEM_MIB, &q.mem_mib, err)) < 0 ||
        (rc = parse_nonneg(r, &w[POD_NGPU], TS_NODE_MAX_GPUS, &ngpu, err)) < 0 ||
        (rc = parse_nonneg(r, &w[POD_MILLI], TS_MILLI_PER_GPU, &milli, err)) < 0)
        return rc;
    q.num_gpu = (int32_t)ngpu;
    q.gpu_milli = (int32_t)milli;
    const char *spec = field(r, &w[POD_SPEC]);
    if (spec && (rc = ts_gpu_model_mask_parse(spec, &q.model_mask, err)) < 0) {
        ts_err_prefix(err, "%s:%d: gpu_spec: ", fname, r->line);
        return rc;
    }
    if ((rc = ts_request_check(&q, err)) < 0) {
        ts_err_prefix(err, "%s:%d: ", fname, r->line);
        return rc;
    }
    if (ts_grow((void **)&wl->pods, &lp->pod_cap, wl->npods + 1, 1024, sizeof *wl->pods) != 0)
        return ts_err_set(err, TS_ENOMEM, "%s: out of memory", fname);
    ts_pod *p = &wl->pods[wl->npods];
    memset(p, 0, sizeof *p);
    strcpy(p->name, name);
    p->req = q;
    int k = intern_spec(wl, &q, &lp->spec_cap);
    if (k < 0)
        return ts_err_set(err, TS_ENOMEM, "%s: out of memory", fname);
    p->spec_key = (uint32_t)k;
    wl->npods++;
    return 0;
}

int ts_load_pods_csv(const char *buf, size_t len, const char *fname, ts_workload **out,
                     ts_err *err)
{
    load_pods lp = {.wl = calloc(1, sizeof *lp.wl)};
    *out = NULL;
    if (!lp.wl)
        return ts_err_set(err, TS_ENOMEM, "%s: out of memory", fname);
    col_want w[POD_NCOL] = {{"name", true, -1},     {"cpu_milli", true, -1},
                            {"memory_mib", true, -1}, {"num_gpu", true, -1},
                            {"gpu_milli", true, -1},  {"gpu_spec", false, -1}};
    int rc = csv_load(buf, len, fname, w, POD_NCOL, "pods", load_pod_row, &lp, err);
    if (rc == 0)
        *out = lp.wl;
    else
        ts_workload_free(lp.wl);
    return rc;
}
