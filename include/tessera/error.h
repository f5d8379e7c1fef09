/*
 * error.h - how every libtessera function reports failure.
 *
 * Functions return 0 on success or a negative TS_E* code, and fill a caller-owned
 * ts_err with the code and a message that names the field and the reason, e.g.
 * "nodes.csv:12: cpu_milli: must be a non-negative integer". The library never
 * prints; the shells decide what to do with the message. A NULL ts_err is allowed
 * everywhere and means "the caller does not want the text".
 */
#ifndef TESSERA_ERROR_H
#define TESSERA_ERROR_H

#ifdef __cplusplus
extern "C" {
#endif

enum ts_errcode {
    TS_OK = 0,
    TS_EINVAL = -1,  /* bad input: the message names the field */
    TS_ENOMEM = -2,  /* allocation failed */
    TS_ENOSPC = -3,  /* does not fit (placement, MIG layout) */
    TS_ENOENT = -4,  /* named thing does not exist */
    TS_EIO = -5,     /* I/O in a shell (never from the pure core) */
    TS_EEXIST = -6,  /* duplicate name */
    TS_ECONFLICT = -7, /* the state does not allow it (a job's state, a stale gen) */
    TS_ETIMEDOUT = -8, /* gave up waiting (a lock, a peer) */
    TS_ECLOSED = -9,   /* the object is shutting down or closed (a store) */
    TS_EFENCED = -10,  /* a write from a leader whose epoch is no longer the lease's */
    TS_ELIMIT = -11,   /* a configured limit would be passed (a cap on queued jobs) */
    TS_EACCES = -12,   /* refused for credentials: none given, or not accepted (a registry) */
};

/* For functions whose result must be checked (a dropped durable-write error
 * acknowledges what is not stored). */
#define TS_MUST_CHECK __attribute__((warn_unused_result))

#define TS_ERR_MSG_MAX 512

typedef struct ts_err {
    int code;
    char msg[TS_ERR_MSG_MAX];
} ts_err;

/* Every error a reader found in one input, where it reads on past the
 * first (a tenants file): the first TS_ERRS_MAX messages, each with the
 * input's line it names (0: none), and a count of the rest. Caller-owned;
 * zero it (or ts_errs_clear) before use. */
#define TS_ERRS_MAX 20

typedef struct ts_errs {
    int n;    /* messages kept */
    int more; /* errors found past those */
    int line[TS_ERRS_MAX];
    char msg[TS_ERRS_MAX][TS_ERR_MSG_MAX];
} ts_errs;

/* Adds one message (its line, 0 none), or counts it past the cap. NULL e: nothing. */
void ts_errs_add(ts_errs *e, int line, const char *msg);
void ts_errs_clear(ts_errs *e);
/* The kept messages in the order of their lines (stable: one line's in the
 * order found). */
void ts_errs_sort(ts_errs *e);

/* Fills err (if not NULL) and returns code, so callers can write
 * `return ts_err_set(err, TS_EINVAL, "x: must be > 0");`. */
int ts_err_set(ts_err *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Prefixes the existing message with more context ("file.yaml: " + msg). */
int ts_err_prefix(ts_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

void ts_err_clear(ts_err *err);

#ifdef __cplusplus
}
#endif
#endif
