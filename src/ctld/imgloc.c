/*
 * imgloc.c - which node holds which image, as the controller learns it, and
 * the image table each cycle places with (tessera/image_place.h,
 * docs/images.md "Placement").
 *
 * Each sync of an agent lists its image store (the references each image
 * was pulled by, agent_image_store_list): the node holds those whole and no
 * other, so an image its store evicted under its budget is forgotten there
 * at the next sync (ctld_imgloc_store); from such a node the reports add
 * only pulls under way (a rank reported pulling has done_bytes of
 * total_bytes). From an agent that does not list, the reports say all: a
 * rank reported running or ended without an "image_pull" object has its
 * image on its node (a task starts only once its image is there); a node
 * whose prefetch of the planned job's image is ready holds that image.
 * Those facts are noted
 * here (ctld_imgloc_note) by image reference in one form
 * (ts_image_ref_format, so "host/repo" and "host/repo:latest" are one), the
 * bytes per node, at most IMGLOC_IMAGES references, the least recently
 * noted forgotten first.
 *
 * It is a hint, not the truth: an eviction is seen a sync late, and a
 * restarted controller starts with what the next listings say.
 * A wrong hint costs what no hint costs, one pull, because the cycle uses
 * the table only to break ties between nodes it finds equal.
 *
 * Each cycle, under c->mu, ctld_imgloc_cycle gives every waiting job whose
 * image some node holds an index into a table rebuilt for that cycle and
 * hands the table to the scheduler; the cycle reads it with mu released,
 * which is safe because only the cycle thread rebuilds it. The learned
 * references have their own mutex, taken inside c->mu or alone, never held
 * while anything waits.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "ctld/agents.h"
#include "ctld/ctld.h"
#include "ctld/imgloc.h"
#include "tessera/image_place.h"
#include "tessera/image_ref.h"

#define IMGLOC_IMAGES 256          /* image references remembered */
#define IMGLOC_CYCLE_IMAGES 64     /* distinct images one cycle's table holds */
/* An image's size before any pull of it was seen: the table needs one, and
 * only the share a node holds orders nodes, so any value serves. */
#define IMGLOC_UNKNOWN_BYTES INT64_C(1000000000)

typedef struct loc_image {
    char ref[TS_IMAGE_REF_MAX];    /* "": a free slot */
    int64_t bytes;                 /* 0: not seen yet */
    int64_t *held;                 /* [nnodes] */
    uint64_t used;                 /* the note counter when last noted */
} loc_image;

struct ctld_imgloc {
    pthread_mutex_t mu;
    int nnodes;
    uint8_t *listed;               /* [nnodes] its agent lists its store: whole images by that */
    uint64_t notes;
    loc_image img[IMGLOC_IMAGES];
    /* the cycle's table: the cycle thread's alone */
    int64_t bytes[IMGLOC_CYCLE_IMAGES];
    int64_t *held;                 /* [IMGLOC_CYCLE_IMAGES * nnodes] */
    const char *cycle_ref[IMGLOC_CYCLE_IMAGES];
    double *bw;                    /* [nnodes] bytes/s: the cluster file's bandwidth, or
                                    * TS_IMAGE_BW_DEFAULT_BYTES_S */
    void *per_node;                /* the one allocation of held, bw and listed */
    ts_image_table table;
};

double ctld_node_bw_bytes_s(const ts_node *n)
{
    return n->net_mbit > 0 ? (double)n->net_mbit * 1e6 / 8.0 : TS_IMAGE_BW_DEFAULT_BYTES_S;
}

int ctld_imgloc_open(ctld *c)
{
    struct ctld_imgloc *L = calloc(1, sizeof *L);
    if (!L)
        return TS_ENOMEM;
    L->nnodes = c->cluster->nnodes;
    size_t n = (size_t)(L->nnodes > 0 ? L->nnodes : 1);
    /* one block, widest members first so that each stays aligned */
    size_t held = IMGLOC_CYCLE_IMAGES * n * sizeof *L->held;
    char *m = L->per_node = calloc(1, held + n * (sizeof *L->bw + sizeof *L->listed));
    if (!m) {
        free(L);
        return TS_ENOMEM;
    }
    L->held = (int64_t *)(void *)m;
    L->bw = (double *)(void *)(m + held);
    L->listed = (uint8_t *)(m + held + n * sizeof *L->bw);
    for (int k = 0; k < L->nnodes; k++)
        L->bw[k] = ctld_node_bw_bytes_s(&c->cluster->nodes[k]);
    pthread_mutex_init(&L->mu, NULL);
    c->imgloc = L;
    return 0;
}

void ctld_imgloc_close(ctld *c)
{
    struct ctld_imgloc *L = c->imgloc;
    if (!L)
        return;
    for (int i = 0; i < IMGLOC_IMAGES; i++)
        free(L->img[i].held);
    pthread_mutex_destroy(&L->mu);
    free(L->per_node);
    free(L);
    c->imgloc = NULL;
}

/* The reference's entry, made (the least recently noted forgotten) when
 * make; NULL when absent or out of memory. Under L->mu. */
static loc_image *find(struct ctld_imgloc *L, const char *ref, bool make)
{
    loc_image *lru = NULL;
    for (int i = 0; i < IMGLOC_IMAGES; i++) {
        loc_image *e = &L->img[i];
        if (e->ref[0] && !strcmp(e->ref, ref))
            return e;
        if (!lru || !e->ref[0] || (lru->ref[0] && e->used < lru->used))
            lru = e;
    }
    if (!make || strlen(ref) >= sizeof lru->ref)
        return NULL;
    int64_t *held = lru->held ? lru->held : malloc((size_t)L->nnodes * sizeof *held);
    if (!held)
        return NULL;
    memset(held, 0, (size_t)L->nnodes * sizeof *held);
    memset(lru, 0, sizeof *lru);
    lru->held = held;
    strcpy(lru->ref, ref);
    return lru;
}

/* ref in ts_image_ref_format's form into out; false when it does not parse. */
static bool canonical(const char *ref, char out[TS_IMAGE_REF_MAX])
{
    ts_image_ref r;
    if (!ref || ts_image_ref_parse(ref, "image", &r, NULL) != 0)
        return false;
    ts_image_ref_format(&r, out, TS_IMAGE_REF_MAX);
    return strlen(out) < TS_IMAGE_REF_MAX - 1; /* not cut */
}

void ctld_imgloc_note(ctld *c, int node, const char *spec_ref, int64_t done, int64_t total)
{
    struct ctld_imgloc *L = c->imgloc;
    char ref[TS_IMAGE_REF_MAX];
    if (!L || node < 0 || node >= L->nnodes || !canonical(spec_ref, ref))
        return;
    pthread_mutex_lock(&L->mu);
    if (done < 0 && L->listed[node]) { /* its listing says which are whole (an ended
                                        * rank's report would bring back an evicted one) */
        pthread_mutex_unlock(&L->mu);
        return;
    }
    loc_image *e = find(L, ref, true);
    if (e) {
        if (total > 0)
            e->bytes = total;
        /* whole: done < 0; else what has come so far, never less than known */
        int64_t have = done < 0 ? INT64_MAX : done;
        e->held[node] = have > e->held[node] ? have : e->held[node];
        e->used = ++L->notes;
    }
    pthread_mutex_unlock(&L->mu);
}

/* Whether image im lists reference ref. */
static bool image_lists(const ts_sync_image *im, const char *ref)
{
    for (int r = 0; r < im->refs.n; r++)
        if (strcmp(im->refs.v[r], ref) == 0)
            return true;
    return false;
}

void ctld_imgloc_store(ctld *c, int node, const ts_sync_image *images, int nimages)
{
    struct ctld_imgloc *L = c->imgloc;
    if (!L || node < 0 || node >= L->nnodes)
        return;
    pthread_mutex_lock(&L->mu);
    L->listed[node] = 1;
    for (int i = 0; i < IMGLOC_IMAGES; i++) { /* listed below, or gone from the node */
        loc_image *e = &L->img[i];
        if (!e->ref[0] || !e->held[node])
            continue;
        bool listed = false;
        for (int k = 0; k < nimages && !listed; k++)
            listed = image_lists(&images[k], e->ref);
        if (!listed)
            e->held[node] = 0;
    }
    for (int k = 0; k < nimages; k++)
        for (int r = 0; r < images[k].refs.n; r++) {
            const char *ref = images[k].refs.v[r];
            char canon[TS_IMAGE_REF_MAX];
            if (!canonical(ref, canon) || strcmp(canon, ref) != 0)
                continue; /* not in the agent's one form: not a name we note by */
            loc_image *e = find(L, canon, true);
            if (!e)
                continue;
            e->held[node] = INT64_MAX;
            e->used = ++L->notes;
        }
    pthread_mutex_unlock(&L->mu);
}

/* The node's prefetch of a job's image is ready: the node holds it. */
static void note_prefetches(ctld *c)
{
    for (int n = 0; n < c->cluster->nnodes; n++) {
        int64_t id = __atomic_load_n(&c->agents[n].prefetch_ready, __ATOMIC_RELAXED);
        cjob *j = id ? ctld_job_find(c, id) : NULL;
        if (j && j->spec && j->spec->image)
            ctld_imgloc_note(c, n, j->spec->image, -1, 0);
    }
}

/* Index of ref in the cycle's table, added from the learned entry if some
 * node holds any of it; -1 otherwise. Under L->mu. */
static int cycle_index(struct ctld_imgloc *L, const char *ref)
{
    int n = L->table.nimages;
    for (int i = 0; i < n; i++)
        if (!strcmp(L->cycle_ref[i], ref))
            return i;
    loc_image *e = find(L, ref, false);
    if (!e || n == IMGLOC_CYCLE_IMAGES)
        return -1;
    int64_t bytes = e->bytes > 0 ? e->bytes : IMGLOC_UNKNOWN_BYTES, any = 0;
    int64_t *row = L->held + (size_t)n * (size_t)L->nnodes;
    for (int k = 0; k < L->nnodes; k++) {
        row[k] = e->held[k] > bytes ? bytes : e->held[k];
        any |= row[k];
    }
    if (!any)
        return -1;
    L->bytes[n] = bytes;
    L->cycle_ref[n] = e->ref;
    L->table.nimages = n + 1;
    return n;
}

void ctld_imgloc_cycle(ctld *c, cjob *const *wj, ts_job *wv, int nw)
{
    struct ctld_imgloc *L = c->imgloc;
    if (!L)
        return;
    note_prefetches(c);
    pthread_mutex_lock(&L->mu);
    L->table = (ts_image_table){.bytes = L->bytes, .held = L->held, .bw_bytes_s = L->bw};
    for (int k = 0; k < nw; k++) {
        char ref[TS_IMAGE_REF_MAX];
        bool has = wj[k]->spec && canonical(wj[k]->spec->image, ref);
        int i = has ? cycle_index(L, ref) : -1;
        wv[k].image = i + 1;
    }
    pthread_mutex_unlock(&L->mu);
    /* cycle_ref points into entries a note may recycle: not read past here */
    ts_sched_set_images(c->sched, L->table.nimages > 0 ? &L->table : NULL, NULL);
}
