/*
 * csv_reader.h - internal: the line reader, row splitting and numeric field
 * check that the fixed-header trace loaders share (src/replay/replay_jobs.c
 * for the Pollux workloads, replay_philly.c for the Philly jobs and VC sizes,
 * replay_csv.c for job lists; src/alloc/trace.c splits its rows too).
 *
 * Those files are strict, unquoted comma-separated rows read from memory; a
 * row is split in place and each numeric field must be a finite number in a
 * closed range, optionally whole. Errors read "file:line: column: why", the
 * wording the replay tests assert. (load_csv.c's openb reader finds columns
 * by header name and words its errors differently, so it keeps its own.)
 * The CSVs Tessera writes (tesserad's and the CLI's accounting, the
 * replay's per-job rows) quote a field with ts_csv_put_field.
 * Nothing here allocates or keeps state; safe from any thread.
 */
#ifndef TS_MODEL_CSV_READER_H
#define TS_MODEL_CSV_READER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "tessera/error.h"

/* Lines of a file read into memory, for ts_csv_next. */
typedef struct {
    const char *buf, *fname;
    size_t len, pos;
    int line; /* the number of the line last returned, from 1 */
} ts_csv_lines;

/*
 * The next line into row (at most cap - 1 bytes, NUL-ended, a final CR
 * stripped), counted in it->line. Returns 1 with a line, 0 at the end, or
 * TS_EINVAL with err filled ("fname:line: line longer than N bytes" or
 * "fname:line: contains a NUL byte").
 */
int ts_csv_next(ts_csv_lines *it, char *row, size_t cap, ts_err *err);

/*
 * Splits line (modified in place: commas become NULs) into at most max
 * fields in f[]; returns the number of fields the line has, which may be more
 * than max (only the first max are stored).
 */
int ts_csv_split(char *line, char **f, int max);

/*
 * The next data row into row: line 1 must read header exactly (else
 * "fname:1: header: expected HEADER"; NULL: line 1 is skipped, the caller
 * checked it), empty lines are skipped. With nf > 0 the row is split into
 * exactly nf fields in f[] (room for nf; another count is "fname:line:
 * expected nf fields, got n"); with nf 0 it is left whole. Returns 1 with a
 * row (its number in it->line), 0 at the end, or a negative error with err
 * filled.
 */
int ts_csv_row(ts_csv_lines *it, char *row, size_t cap, const char *header, char **f, int nf,
               ts_err *err);

/*
 * Room for element n of the loader's growing array *arr of elem-byte
 * elements, *cap of them now (the first allocation holds first, each next
 * twice as many). Returns 0, or TS_ENOMEM with err filled ("fname: out of
 * memory") and *arr unchanged.
 */
int ts_csv_reserve(void **arr, int *cap, int n, int first, size_t elem, const char *fname,
                   ts_err *err);

/*
 * Parses s as a finite number in [min, max] (whole when integer) into *out.
 * On anything else fills err with "fname:line: col: must be an integer|a
 * number in [min, max], got "s"" and returns TS_EINVAL; 0 on success.
 */
int ts_csv_number(const char *fname, int line, const char *col, const char *s, double min,
                  double max, bool integer, double *out, ts_err *err);

/* Writes s to f as one CSV field: as is, or quoted with its quotes doubled
 * when it holds a comma, a quote or a line break (RFC 4180). */
void ts_csv_put_field(FILE *f, const char *s);

#endif
