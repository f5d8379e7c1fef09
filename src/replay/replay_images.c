/*
 * replay_images.c - a pull-time model of container images for the replay,
 * so that image-aware placement (include/tessera/image_place.h) can be
 * measured: how long starts would wait for their image with the cycle told
 * where images are (`tessera-img`) and without (`tessera-img-blind`), on the
 * same jobs, images and caches.
 *
 * The model (docs/simulator.md, "Images"): NIMAGES distinct images (16 by
 * default, TS_REPLAY_IMAGES overrides), sizes log-uniform between 1 and 20 GB
 * (the anchors: a 3 GB image at Uber, 10 GB PyTorch images, 15-20 GB
 * images taking minutes on AWS), popularity Zipf with exponent 1 (a few base
 * images carry most jobs); each job's image is drawn from a fixed seed, so
 * both policies see the same assignment. Each node pulls at its own
 * bandwidth (TS_REPLAY_IMAGE_BW_GBIT, a comma list cycled over the nodes;
 * 10 Gbit/s, TS_IMAGE_BW_DEFAULT_BYTES_S, without it), the same figures the
 * cycle prices nodes with, and keeps a 40 GB cache, least recently started
 * image evicted first. A start (first or restart) waits, on each of its
 * nodes, the bytes missing over that node's bandwidth, the slowest node
 * deciding; then its nodes hold the image. The wait is held without
 * progress at the start of the run (the policy's start_delay_s), as the
 * real pull holds the job's GPUs.
 *
 * Prefetch: the nodes a cycle's decision names for a waiting job's image
 * (ts_decision.prefetch: its planned nodes and the others it could start
 * on as running jobs end) start pulling it then, at PREFETCH_SHARE of their
 * bandwidth shared among a node's prefetches (below the running jobs'
 * traffic, TS_REPLAY_PREFETCH_SHARE overrides; 0: off), so a planned job
 * finds part or all of it there at its start. As in tesserad, a node
 * fetches ahead only what the latest decision names: the others stop, what
 * they brought kept. A prefetch's bytes are settled lazily
 * (replay_images_settle) at each decision and start.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay/replay.h"
#include "replay/replay_images.h"
#include "tessera/rng.h"
#include "tessera/grow.h"

#define NIMAGES_DEFAULT 16
#define NIMAGES_MAX 1024
#define IMAGE_MIN_BYTES 1e9
#define IMAGE_MAX_BYTES 20e9
#define NODE_CACHE_BYTES INT64_C(40000000000)
#define IMAGES_SEED 0x1a6e5ULL
#define PREFETCH_SHARE_DEFAULT 0.5 /* of a node's bandwidth, for a planned job's image */
#define BW_GBIT_MAX 10000.0
#define BW_LIST_MAX 64
/* reserved: planned on named nodes by a decision before the one that
 * started it (a plan made in the starting decision itself, e.g. a
 * preemptor's whose victims stop at once in the replay, leaves no time) */
enum { START_AT_ARRIVAL, START_QUEUED, START_RESERVED };

struct replay_images {
    int njobs, nnodes, nimages;
    int *job_image;       /* [njobs] 1 + image index */
    int64_t *bytes;       /* [nimages] */
    int64_t *held;        /* [nimages * nnodes] */
    double *used_s;       /* [nimages * nnodes] last start that used it there */
    double *bw;           /* [nnodes] bytes/s */
    /* prefetches under way: cell (image * nnodes + node), since when, from
     * how many bytes (settled up to since_s) */
    struct prefetch {
        size_t cell;
        double since_s;
        int64_t from;
        bool named;         /* by the decision being applied */
    } *pf;
    int npf, pf_cap;
    double pf_share;
    ts_image_table table;
    /* figures */
    double *wait;         /* [starts] seconds each start waited */
    uint8_t *kind;        /* [starts] START_* */
    double *planned_s;    /* [njobs] when a cycle first planned it on named nodes since its
                           * last start; -1: not planned */
    int nstarts, cap;
    int64_t pulled_bytes, prefetched_bytes;
    void *block; /* the arrays sized once (job_image..bw, planned_s) */
};

/* Zipf(1) over n: the index whose cumulative weight passes u in [0, 1). */
static int zipf_draw(double u, int n)
{
    double h = 0.0;
    for (int i = 1; i <= n; i++)
        h += 1.0 / i;
    double acc = 0.0;
    for (int i = 1; i <= n; i++) {
        acc += 1.0 / (i * h);
        if (u < acc)
            return i - 1;
    }
    return n - 1;
}

replay_images *replay_images_new(int njobs, int nnodes)
{
    const char *e = getenv("TS_REPLAY_IMAGES");
    int n = e && *e ? atoi(e) : NIMAGES_DEFAULT;
    n = n < 1 ? 1 : n > NIMAGES_MAX ? NIMAGES_MAX : n;
    replay_images *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->njobs = njobs;
    m->nnodes = nnodes;
    m->nimages = n;
    size_t cells = (size_t)n * (size_t)(nnodes > 0 ? nnodes : 1);
    size_t jobs = (size_t)(njobs > 0 ? njobs : 1);
    ts_block_part parts[] = {
        TS_BLOCK_PART(m->job_image, jobs), TS_BLOCK_PART(m->bytes, (size_t)n),
        TS_BLOCK_PART(m->held, cells),     TS_BLOCK_PART(m->used_s, cells),
        TS_BLOCK_PART(m->bw, (size_t)(nnodes > 0 ? nnodes : 1)),
        TS_BLOCK_PART(m->planned_s, jobs)};
    if (!(m->block = ts_block_alloc(parts, sizeof parts / sizeof *parts))) {
        free(m);
        return NULL;
    }
    for (int j = 0; j < njobs; j++)
        m->planned_s[j] = -1.0;
    ts_rng g;
    ts_rng_seed(&g, IMAGES_SEED);
    for (int i = 0; i < n; i++) /* log-uniform: as many small images as large */
        m->bytes[i] = (int64_t)(IMAGE_MIN_BYTES *
                                pow(IMAGE_MAX_BYTES / IMAGE_MIN_BYTES, ts_rng_double(&g)));
    for (int j = 0; j < njobs; j++)
        m->job_image[j] = 1 + zipf_draw(ts_rng_double(&g), n);
    /* each node's bandwidth: the list cycled over the nodes */
    double list[BW_LIST_MAX];
    int nlist = 0;
    const char *bw = getenv("TS_REPLAY_IMAGE_BW_GBIT");
    for (const char *at = bw; at && *at && nlist < BW_LIST_MAX;) {
        char *end;
        double g = strtod(at, &end);
        if (end == at)
            break;
        list[nlist++] = g > 0.0 && g <= BW_GBIT_MAX ? g * 1e9 / 8.0 : TS_IMAGE_BW_DEFAULT_BYTES_S;
        at = *end == ',' ? end + 1 : end;
    }
    for (int k = 0; k < nnodes; k++)
        m->bw[k] = nlist ? list[k % nlist] : TS_IMAGE_BW_DEFAULT_BYTES_S;
    const char *share = getenv("TS_REPLAY_PREFETCH_SHARE");
    m->pf_share = share && *share ? atof(share) : PREFETCH_SHARE_DEFAULT;
    m->pf_share = m->pf_share < 0.0 ? 0.0 : m->pf_share > 1.0 ? 1.0 : m->pf_share;
    m->table = (ts_image_table){.nimages = n, .bytes = m->bytes, .held = m->held,
                                .bw_bytes_s = m->bw};
    return m;
}

void replay_images_free(replay_images *m)
{
    if (!m)
        return;
    free(m->block);
    free(m->pf);
    free(m->wait);
    free(m->kind);
    free(m);
}

int replay_images_of(const replay_images *m, int job)
{
    return m && job >= 0 && job < m->njobs ? m->job_image[job] : 0;
}

const ts_image_table *replay_images_table(const replay_images *m) { return &m->table; }

/* The prefetch of cell k, if one is under way; -1. */
static int prefetch_of(const replay_images *m, size_t k)
{
    for (int i = 0; i < m->npf; i++)
        if (m->pf[i].cell == k)
            return i;
    return -1;
}

static void prefetch_stop(replay_images *m, size_t k)
{
    int i = prefetch_of(m, k);
    if (i < 0)
        return;
    m->pf[i] = m->pf[--m->npf];
}

/* Room for img on node: least recently used images go until it fits. */
static void make_room(replay_images *m, int img, int node)
{
    int64_t used = 0;
    for (int i = 0; i < m->nimages; i++)
        used += i == img ? 0 : m->held[(size_t)i * m->nnodes + node];
    while (used + m->bytes[img] > NODE_CACHE_BYTES) {
        int old = -1;
        double old_s = 0.0;
        for (int i = 0; i < m->nimages; i++) {
            size_t k = (size_t)i * m->nnodes + node;
            if (i != img && m->held[k] > 0 && (old < 0 || m->used_s[k] < old_s)) {
                old = i;
                old_s = m->used_s[k];
            }
        }
        if (old < 0)
            return; /* the image alone is larger than the cache: it stays anyway */
        used -= m->held[(size_t)old * m->nnodes + node];
        m->held[(size_t)old * m->nnodes + node] = 0;
        prefetch_stop(m, (size_t)old * m->nnodes + node);
    }
}

/* Node's share of its prefetch bandwidth: split evenly among the
 * prefetches under way there (counted at each settle). */
static double prefetch_rate(const replay_images *m, int node)
{
    int n = 0;
    for (int i = 0; i < m->npf; i++)
        n += (int)(m->pf[i].cell % (size_t)m->nnodes) == node;
    return m->pf_share * m->bw[node] / (n > 0 ? n : 1);
}

void replay_images_settle(replay_images *m, double now_s)
{
    if (!m)
        return;
    for (int i = 0; i < m->npf;) {
        size_t k = m->pf[i].cell;
        int img = (int)(k / (size_t)m->nnodes), node = (int)(k % (size_t)m->nnodes);
        double got = prefetch_rate(m, node) * (now_s - m->pf[i].since_s);
        int64_t want = m->bytes[img], was = m->held[k];
        int64_t now = m->pf[i].from + (int64_t)got < want ? m->pf[i].from + (int64_t)got : want;
        m->pf[i].from = now; /* settled: the next settle counts from now */
        m->pf[i].since_s = now_s;
        if (now > was) {
            m->held[k] = now;
            m->prefetched_bytes += now - was;
        }
        if (m->held[k] >= want) {
            m->pf[i] = m->pf[--m->npf];
        } else {
            i++;
        }
    }
}

/* Job's image fetched ahead on nodes: named in this decision's plan. */
static void prefetch_one(replay_images *m, int job, const int *nodes, int nnodes, double now_s)
{
    int img = replay_images_of(m, job) - 1;
    if (img < 0)
        return;
    if (m->planned_s[job] < 0.0)
        m->planned_s[job] = now_s;
    for (int t = 0; t < nnodes; t++) {
        int node = nodes[t];
        if (node < 0 || node >= m->nnodes)
            continue;
        size_t k = (size_t)img * m->nnodes + node;
        int was = prefetch_of(m, k);
        if (was >= 0)
            m->pf[was].named = true;
        if (m->pf_share <= 0.0 || m->held[k] >= m->bytes[img] || was >= 0)
            continue;
        if (ts_grow((void **)&m->pf, &m->pf_cap, m->npf + 1, 64, sizeof *m->pf) != 0)
            return; /* no prefetch: the start pulls it all, as without one */
        make_room(m, img, node);
        m->used_s[k] = now_s; /* not the next to go while it comes */
        m->pf[m->npf++] = (struct prefetch){.cell = k, .since_s = now_s, .from = m->held[k],
                                            .named = true};
    }
}

void replay_images_prefetch(replay_images *m, const ts_decision *d, const int *wi,
                            double now_s)
{
    replay_images_settle(m, now_s);
    for (int i = 0; i < m->npf; i++)
        m->pf[i].named = false;
    for (int k = 0; k < d->nprefetch; k++)
        prefetch_one(m, wi[d->prefetch[k].job], d->prefetch[k].nodes, d->prefetch[k].nnodes,
                     now_s);
    /* a node fetches ahead only what this decision names (tesserad's
     * desired state): the others stop, their bytes kept */
    for (int i = 0; i < m->npf;)
        if (m->pf[i].named)
            i++;
        else
            m->pf[i] = m->pf[--m->npf];
}

double replay_images_start(replay_images *m, int job, const ts_alloc *allocs, int ntasks,
                           bool queued, double now_s)
{
    int img = replay_images_of(m, job) - 1;
    if (img < 0)
        return 0.0;
    replay_images_settle(m, now_s);
    double wait = 0.0;
    for (int t = 0; t < ntasks; t++) {
        int node = allocs[t].node;
        if (node < 0 || node >= m->nnodes)
            continue;
        double s = ts_image_pull_s(&m->table, m->nnodes, img, node);
        wait = s > wait ? s : wait;
        size_t k = (size_t)img * m->nnodes + node;
        prefetch_stop(m, k); /* the rest comes at the node's full rate, in s */
        if (m->held[k] < m->bytes[img]) {
            m->pulled_bytes += m->bytes[img] - m->held[k];
            make_room(m, img, node);
            m->held[k] = m->bytes[img];
        }
        m->used_s[k] = now_s;
    }
    if (m->nstarts == m->cap) {
        int cap = m->cap ? 2 * m->cap : 256;
        double *w = realloc(m->wait, (size_t)cap * sizeof *w);
        if (w)
            m->wait = w;
        uint8_t *q = w ? realloc(m->kind, (size_t)cap * sizeof *q) : NULL;
        if (!q)
            return wait; /* the figure loses this start; the replay goes on */
        m->kind = q;
        m->cap = cap;
    }
    bool reserved = m->planned_s[job] >= 0.0 && m->planned_s[job] < now_s;
    m->kind[m->nstarts] = !queued ? START_AT_ARRIVAL : reserved ? START_RESERVED : START_QUEUED;
    m->planned_s[job] = -1.0;
    m->wait[m->nstarts++] = wait;
    return wait;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Figures over the starts of kind at least min_kind (START_*: every start,
 * the queued ones, the reserved ones): how many, the share that found the
 * image ready, mean, p50, p90 and total wait. */
typedef struct wait_figures {
    int n, ready;
    double mean, p50, p90, total;
} wait_figures;

static wait_figures figures(const replay_images *m, int min_kind, double *tmp)
{
    wait_figures w = {0};
    for (int i = 0; i < m->nstarts; i++)
        if (m->kind[i] >= min_kind) {
            tmp[w.n++] = m->wait[i];
            w.total += m->wait[i];
            w.ready += m->wait[i] <= 0.0;
        }
    qsort(tmp, (size_t)w.n, sizeof *tmp, cmp_double);
    w.mean = w.n ? w.total / w.n : 0.0;
    w.p50 = replay_percentile(tmp, w.n, 50);
    w.p90 = replay_percentile(tmp, w.n, 90);
    return w;
}

void replay_images_print(replay_images *m, FILE *f, const char *policy)
{
    if (!m || m->nstarts == 0)
        return;
    double *tmp = malloc((size_t)m->nstarts * sizeof *tmp);
    if (!tmp)
        return;
    wait_figures a = figures(m, START_AT_ARRIVAL, tmp), r = figures(m, START_RESERVED, tmp);
    free(tmp);
    fprintf(f, "images %s: %d images, %d starts, ready %.1f %%, wait mean %.2f s p50 %.2f s "
               "p90 %.2f s total %.0f s, pulled %.1f GB; reserved starts %d, ready %.1f %%, "
               "wait mean %.2f s p50 %.2f s p90 %.2f s; prefetched %.1f GB\n",
            policy, m->nimages, a.n, a.n ? 100.0 * a.ready / a.n : 0.0, a.mean, a.p50, a.p90,
            a.total, (double)m->pulled_bytes / 1e9, r.n, r.n ? 100.0 * r.ready / r.n : 0.0,
            r.mean, r.p50, r.p90, (double)m->prefetched_bytes / 1e9);
}
