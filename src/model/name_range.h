/*
 * name_range.h - internal: node-name range patterns such as
 * "h100-[001-004,7,10-12]", which the cluster YAML's `names:` key expands into
 * one node per name.
 *
 * A pattern is a prefix, one bracket group of comma-separated parts (a number
 * or lo-hi with lo <= hi) and a suffix. A bound written with a leading zero
 * sets the width its part's numbers are padded to ("[002-010]" gives 002..010).
 * Parsing only records the parts; names are produced one at a time on demand,
 * so a 10,000-name range costs no memory. Nothing here allocates or knows
 * about YAML: errors carry the reason only, and the caller adds where it was.
 * Not thread-affine; a ts_name_range is a plain value owned by the caller.
 */
#ifndef TS_MODEL_NAME_RANGE_H
#define TS_MODEL_NAME_RANGE_H

#include <stdbool.h>
#include <stddef.h>

#include "tessera/error.h"

#define TS_NAME_RANGE_MAX_NAMES 10000 /* names one pattern may expand to */
#define TS_NAME_RANGE_MAX_PARTS 64    /* comma-separated parts inside [...] */
#define TS_NAME_RANGE_MAX_DIGITS 9    /* so a bound always fits in a long */

typedef struct ts_name_range {
    const char *text;   /* the whole pattern, borrowed from the caller */
    size_t prefix_len;  /* characters before '[' */
    const char *suffix; /* after ']', points into text */
    int nparts;
    long lo[TS_NAME_RANGE_MAX_PARTS], hi[TS_NAME_RANGE_MAX_PARTS];
    int width[TS_NAME_RANGE_MAX_PARTS]; /* zero-padding, 0 for none */
    long count;                         /* names the pattern expands to */
} ts_name_range;

/* Parses pattern (not NULL) into *r, which borrows pattern: it must outlive r.
 * Returns 0, or TS_EINVAL with err's message the reason alone (e.g. "range 3-1
 * runs backwards", "must be a name pattern ..., got \"a-1\""), for the caller
 * to prefix with the file, line and key. err may be NULL. */
int ts_name_range_parse(const char *pattern, ts_name_range *r, ts_err *err);

/* Writes the k-th name (0 <= k < r->count) into buf; false if it does not fit
 * in size bytes, terminator included. */
bool ts_name_range_name(const ts_name_range *r, long k, char *buf, size_t size);

#endif
