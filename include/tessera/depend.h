/*
 * depend.h - job dependencies as Slurm writes them (docs/job-spec.md
 * "dependency"): after, afterok, afternotok, afterany on earlier jobs'
 * ids, and singleton, joined by ',' (all must hold) or '?' (any may).
 * An id that names an array (its first element's id) stands for every
 * element, as Slurm's array job id does; tesserad decides that.
 *
 * The job spec parser (src/api/spec.c) and the batch-script translator
 * (src/api/sbatch.c) read the text with ts_dep_parse; tesserad
 * (src/ctld/depend.c) evaluates the parsed form before every cycle. Pure:
 * no I/O, no allocation, thread-safe.
 */
#ifndef TESSERA_DEPEND_H
#define TESSERA_DEPEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TS_DEP_MAX_BYTES 4096 /* characters of the text; longer is an error */
/* Job ids named in all: the text is the only bound, as every id takes at
 * least two of its characters (a digit and a ':' or ','). */
#define TS_DEP_MAX_IDS (TS_DEP_MAX_BYTES / 2)
#define TS_DEP_WHY_MAX 160

enum ts_dep_type {
    TS_DEP_AFTER = 0,      /* the job has started (or ended) */
    TS_DEP_AFTERANY = 1,   /* the job ended, however */
    TS_DEP_AFTEROK = 2,    /* the job completed */
    TS_DEP_AFTERNOTOK = 3, /* the job failed or was cancelled */
    TS_DEP_SINGLETON = 4,  /* no earlier active job of the same name and owner */
};

typedef struct ts_dep_item {
    int type;    /* enum ts_dep_type */
    int64_t job; /* 0 for singleton */
} ts_dep_item;

typedef struct ts_dependency {
    bool any;    /* '?': any item may hold; else every item must */
    int n;       /* items: one per job id, plus singleton at most once */
    ts_dep_item items[TS_DEP_MAX_IDS + 1];
} ts_dependency;

/* Parses s. 0 and *out, or TS_EINVAL with why (a reason without the field
 * name, e.g. "unknown type \"afterfoo\" (after, afterany, ...)"). */
int ts_dep_parse(const char *s, ts_dependency *out, char *why, size_t size);
/*
 * The items of a dependency text, for ts_dep_parse and for sbatch's check of
 * Slurm's fuller syntax, which differ in what an item may be but not in how
 * items are joined: calls item(p, e, arg) on each run p..e between the
 * separators ',' (all of) and '?' (any of), in order, and returns the first
 * non-zero it returns. Then TS_EINVAL when both separators appear (they cannot
 * be mixed: TS_DEP_MIXED says so), else 0 with *any set when '?' joined them.
 */
#define TS_DEP_MIXED "',' (all of) and '?' (any of) cannot be mixed"
int ts_dep_walk(const char *s, int (*item)(const char *p, const char *e, void *arg), void *arg,
                bool *any);
/* The canonical text of d: types in the order given, ids joined by ':'
 * under one type while the type repeats and items are joined by ','
 * ("afterok:1:2,singleton"); joined by '?', each id an item of its own
 * ("afterok:1?afterok:2", which would read back as both if joined). */
void ts_dep_format(const ts_dependency *d, char *buf, size_t size);
/* s parsed and written in canonical form into out (TS_DEP_MAX_BYTES + 1
 * bytes at least): 0, or TS_EINVAL with why as ts_dep_parse's (also when
 * the canonical form would be longer than TS_DEP_MAX_BYTES). */
int ts_dep_canonical(const char *s, char *out, char *why, size_t size);
const char *ts_dep_type_name(int type);

#ifdef __cplusplus
}
#endif
#endif
