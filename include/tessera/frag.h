/*
 * frag.h - GPU fragmentation: how much idle GPU capacity the expected
 * workload could not use (Weng et al., "Beware of Fragmentation", ATC '23).
 *
 * The expected workload is a "typical pod" list: the most frequent request
 * classes of a trace, weighted by frequency. For node n and class j with idle
 * GPU milli U(n):
 *   f(n, j) = U(n)                       if j needs no GPU, may not use n's
 *                                        model, or lacks CPU or enough GPUs on n;
 *           = sum of free milli on GPUs  otherwise (j fits):
 *             whose free milli < j's share   the slivers j cannot use.
 * F(n) = sum_j p_j f(n, j). The cluster measure is sum_n F(n), kept by a
 * tracker that recomputes only the node a placement touched (O(classes x GPUs)
 * per event, never a scan of the cluster). Memory is not considered, as in the
 * published definition.
 */
#ifndef TESSERA_FRAG_H
#define TESSERA_FRAG_H

#include "tessera/load.h"
#include "tessera/model.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TS_TYPICAL_COVERAGE_DEFAULT 0.95

typedef struct ts_typical {
    int n;
    ts_request *req;  /* cpu_milli, gpu_milli, num_gpu, model_mask of each class */
    double *p;        /* weights, summing to 1 */
    int64_t *count;   /* the class's weight: pods, or GPU milli asked (ts_typical_build) */
    int64_t *mem_mib; /* mean memory request of the class's pods */
    bool mem_aware;   /* count a node short of a class's memory as fragment
                         (Tessera's measure; the published one ignores memory) */
} ts_typical;

/* The most frequent classes of w (by pod count, ties broken by larger cpu,
 * gpu share, GPU count, model mask) added while their cumulative count is
 * below coverage x pods, so the class that crosses the threshold is kept.
 * Returns 0 or TS_ENOMEM; free with ts_typical_free. */
int ts_typical_from_workload(const ts_workload *w, double coverage, ts_typical *out,
                             ts_err *err);

/* How classes are weighted: by pod count (the published measure), or by the
 * GPU they ask for (count x GPUs x share; CPU-only classes drop out), which
 * makes the measure "expected GPU demand that cannot be served" and keeps
 * rare but large multi-GPU classes in the list. */
enum ts_typical_weight { TS_TYPICAL_BY_COUNT = 0, TS_TYPICAL_BY_GPU = 1 };
int ts_typical_build(const ts_workload *w, double coverage, int weight, ts_typical *out,
                     ts_err *err);
void ts_typical_free(ts_typical *t);

/* A node as the measure sees it: enough to evaluate "what if" placements
 * without touching the real node. */
typedef struct ts_frag_shape {
    int model;
    int ngpu;
    int64_t cpu_left;
    int64_t mem_left;
    int32_t free[TS_NODE_MAX_GPUS]; /* free milli per GPU (0 for MIG GPUs) */
} ts_frag_shape;

void ts_frag_shape_of(const ts_node *n, ts_frag_shape *s);
/* F of a shape, in milli-GPU. */
double ts_frag_shape_amount(const ts_frag_shape *s, const ts_typical *t);
/* F of a shape and, if stranded is not NULL, S: the GPU that CPU and memory
 * keep the typical classes from using - for each class, what it could take by
 * GPU count alone minus what it can take once the shape's CPU and memory (the
 * class's mean, when mem_aware) bound its number of pods, weighted by p_j.
 * One pass over classes and GPUs for both. */
double ts_frag_shape_measure(const ts_frag_shape *s, const ts_typical *t, double *stranded);
/* Tessera's placement measure M = F + w S of a shape (score_tessera.c,
 * docs/policies.md), with w from ts_frag_stranded_weight. */
double ts_frag_shape_placement(const ts_frag_shape *s, const ts_typical *t, double w);
/* w: 1 - 1.5 x the share of t's GPU demand that multi-GPU classes carry, at
 * least 0. */
double ts_frag_stranded_weight(const ts_typical *t);
/* F(n) of a node. */
double ts_frag_node(const ts_node *n, const ts_typical *t);
/* Idle GPU milli U(n). */
int64_t ts_frag_idle(const ts_node *n);

/* A memo of ts_frag_shape_measure for one typical list: the measure is a
 * function of the shape alone and symmetric in its GPUs, and a scan of the
 * cluster meets the same shapes again and again (nodes of one type in the
 * same state, a class tried on each of them), so results are kept by shape
 * (GPUs sorted by free milli) in a fixed table where a newer shape takes an
 * older one's slot. A hit returns the very doubles a computation would.
 * Owned by its caller (one per typical list, which must not change while
 * the memo is used; not thread-safe); ts_frag_memo_new returns NULL when out
 * of memory, and a NULL memo computes every time. */
typedef struct ts_frag_memo ts_frag_memo;
ts_frag_memo *ts_frag_memo_new(void);
void ts_frag_memo_free(ts_frag_memo *m);
/* ts_frag_shape_measure(s, t, stranded), from m when it holds s. */
double ts_frag_memo_measure(ts_frag_memo *m, const ts_frag_shape *s, const ts_typical *t,
                            double *stranded);

/* Cluster-wide totals kept incrementally. */
typedef struct ts_frag_tracker {
    const ts_typical *typ;
    int nnodes;
    double *node_f;     /* F(n) per node */
    int64_t *node_u;    /* U(n) per node */
    double sum_f;
    int64_t sum_u;
} ts_frag_tracker;

int ts_frag_tracker_init(ts_frag_tracker *t, const ts_cluster *c, const ts_typical *typ,
                         ts_err *err);
/* Call after node i changed. */
void ts_frag_tracker_update(ts_frag_tracker *t, const ts_cluster *c, int i);
void ts_frag_tracker_free(ts_frag_tracker *t);

#ifdef __cplusplus
}
#endif
#endif
