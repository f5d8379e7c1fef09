/*
 * scorers.c - the registry of built-in placement policies, so the shells
 * (simulator, controller) select one by name and a new policy is one table
 * entry away.
 */
#include <string.h>

#include "sched/scorers.h"

static const struct ts_scorer_ops *const all[] = {
    &ts_scorer_random, &ts_scorer_dotprod, &ts_scorer_clustering, &ts_scorer_packing,
    &ts_scorer_bestfit, &ts_scorer_fgd,    &ts_scorer_tessera,    NULL,
};

const struct ts_scorer_ops *const *ts_scorer_all(void) { return all; }

const struct ts_scorer_ops *ts_scorer_find(const char *name)
{
    for (int i = 0; all[i]; i++)
        if (strcmp(all[i]->name, name) == 0)
            return all[i];
    return NULL;
}
