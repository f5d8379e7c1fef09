/*
 * scorers.h - internal: the built-in scorer tables and the helpers they
 * share. Public code finds scorers by name through ts_scorer_find.
 */
#ifndef TS_SCHED_SCORERS_H
#define TS_SCHED_SCORERS_H

#include "tessera/sched.h"

extern const struct ts_scorer_ops ts_scorer_random;
extern const struct ts_scorer_ops ts_scorer_dotprod;
extern const struct ts_scorer_ops ts_scorer_clustering;
extern const struct ts_scorer_ops ts_scorer_packing;
extern const struct ts_scorer_ops ts_scorer_bestfit;
extern const struct ts_scorer_ops ts_scorer_fgd;
extern const struct ts_scorer_ops ts_scorer_tessera;

/* 100 * sigmoid(delta_milli / 1000), truncated: the study's score for a drop
 * of delta_milli in a node's fragmentation. */
int64_t sched_fgd_score_of_delta(double delta_milli);

#endif
