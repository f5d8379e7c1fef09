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
 * both policies see the same assignment. Every node pulls at 10 Gbit/s
 * (TS_IMAGE_BW_DEFAULT_BYTES_S) and keeps a 40 GB cache, least recently
 * started image evicted first. A start (first or restart) waits, on each of
 * its nodes, the bytes missing over that bandwidth, the slowest node
 * deciding; then its nodes hold the image. Open loop: the wait is counted,
 * not added to the job's run, so both policies replay the same schedule
 * apart from where jobs land.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay/replay.h"
#include "replay/replay_images.h"
#include "tessera/rng.h"

#define NIMAGES_DEFAULT 16
#define NIMAGES_MAX 1024
#define IMAGE_MIN_BYTES 1e9
#define IMAGE_MAX_BYTES 20e9
#define NODE_CACHE_BYTES INT64_C(40000000000)
#define IMAGES_SEED 0x1a6e5ULL

struct replay_images {
    int njobs, nnodes, nimages;
    int *job_image;       /* [njobs] 1 + image index */
    int64_t *bytes;       /* [nimages] */
    int64_t *held;        /* [nimages * nnodes] */
    double *used_s;       /* [nimages * nnodes] last start that used it there */
    ts_image_table table;
    /* figures */
    double *wait;         /* [starts] seconds each start waited */
    int nstarts, cap;
    int64_t pulled_bytes;
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
    m->job_image = calloc((size_t)(njobs > 0 ? njobs : 1), sizeof *m->job_image);
    m->bytes = calloc((size_t)n, sizeof *m->bytes);
    m->held = calloc(cells, sizeof *m->held);
    m->used_s = calloc(cells, sizeof *m->used_s);
    if (!m->job_image || !m->bytes || !m->held || !m->used_s) {
        replay_images_free(m);
        return NULL;
    }
    ts_rng g;
    ts_rng_seed(&g, IMAGES_SEED);
    for (int i = 0; i < n; i++) /* log-uniform: as many small images as large */
        m->bytes[i] = (int64_t)(IMAGE_MIN_BYTES *
                                pow(IMAGE_MAX_BYTES / IMAGE_MIN_BYTES, ts_rng_double(&g)));
    for (int j = 0; j < njobs; j++)
        m->job_image[j] = 1 + zipf_draw(ts_rng_double(&g), n);
    m->table = (ts_image_table){.nimages = n, .bytes = m->bytes, .held = m->held};
    return m;
}

void replay_images_free(replay_images *m)
{
    if (!m)
        return;
    free(m->job_image);
    free(m->bytes);
    free(m->held);
    free(m->used_s);
    free(m->wait);
    free(m);
}

int replay_images_of(const replay_images *m, int job)
{
    return m && job >= 0 && job < m->njobs ? m->job_image[job] : 0;
}

const ts_image_table *replay_images_table(const replay_images *m) { return &m->table; }

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
    }
}

void replay_images_start(replay_images *m, int job, const ts_alloc *allocs, int ntasks,
                         double now_s)
{
    int img = replay_images_of(m, job) - 1;
    if (img < 0)
        return;
    double wait = 0.0;
    for (int t = 0; t < ntasks; t++) {
        int node = allocs[t].node;
        if (node < 0 || node >= m->nnodes)
            continue;
        double s = ts_image_pull_s(&m->table, m->nnodes, img, node);
        wait = s > wait ? s : wait;
        size_t k = (size_t)img * m->nnodes + node;
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
        if (!w)
            return; /* the figure loses this start; the replay goes on */
        m->wait = w;
        m->cap = cap;
    }
    m->wait[m->nstarts++] = wait;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void replay_images_print(replay_images *m, FILE *f, const char *policy)
{
    if (!m || m->nstarts == 0)
        return;
    qsort(m->wait, (size_t)m->nstarts, sizeof *m->wait, cmp_double);
    double sum = 0.0;
    int ready = 0;
    for (int i = 0; i < m->nstarts; i++) {
        sum += m->wait[i];
        ready += m->wait[i] <= 0.0;
    }
    fprintf(f, "images %s: %d images, %d starts, ready %.1f %%, wait mean %.2f s p50 %.2f s "
               "p90 %.2f s total %.0f s, pulled %.1f GB\n",
            policy, m->nimages, m->nstarts, 100.0 * ready / m->nstarts, sum / m->nstarts,
            ts_replay_percentile(m->wait, m->nstarts, 50),
            ts_replay_percentile(m->wait, m->nstarts, 90), sum, (double)m->pulled_bytes / 1e9);
}
