/*
 * store_lease.c - leader election and fencing for several tesserad on one
 * PostgreSQL store (docs/ha.md).
 *
 * The lease is one row of table `lease` (migration 3): holder, epoch,
 * expiry and the holder's advertised URL. Every change to it is a single
 * UPDATE whose WHERE clause states the condition (expired, or ours), so two
 * controllers racing for it cannot both win, and the expiry is computed by
 * the database's clock (now()), the one clock every controller shares. The
 * lease calls run on a session of their own, so a renewal never waits
 * behind a group commit of the writer, and with short timeouts, so a
 * database that stops answering is noticed within seconds.
 *
 * Fencing itself is in the backend (store_pg.c, pg_fence_check): once an
 * epoch is set, each write transaction checks the row under FOR SHARE.
 */
#include "store/store_internal.h"

#include <libpq-fe.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Seconds a lease session may take to connect, and a lease statement to
 * run, before the call fails (well under any sensible lease). */
#define LEASE_CONNECT_TIMEOUT "3"
#define LEASE_STATEMENT_TIMEOUT "SET statement_timeout = '3s'"

static void quiet(void *arg, const char *message)
{
    (void)arg;
    (void)message;
}

static int lease_fail(PGconn *pc, const PGresult *res, const char *what, ts_err *err)
{
    const char *msg = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;
    if (!msg || !*msg)
        msg = pc ? PQerrorMessage(pc) : "out of memory";
    return ts_err_set(err, TS_EIO, "lease: %s: postgresql: %.*s", what, (int)strcspn(msg, "\n"),
                      msg);
}

/* The lease session, (re)connected when missing or dropped. Under lease_mu. */
static int lease_conn(ts_store *s, PGconn **out, ts_err *err)
{
    if (!s->be->set_fence)
        return ts_err_set(err, TS_EINVAL,
                          "lease: needs a PostgreSQL store (this one is %s): several "
                          "controllers cannot share SQLite", s->be->name);
    PGconn *pc = s->lease;
    if (pc && PQstatus(pc) == CONNECTION_OK) {
        *out = pc;
        return 0;
    }
    if (pc)
        PQfinish(pc);
    s->lease = NULL;
    /* later keywords override what the URI says */
    const char *const keys[] = {"dbname", "connect_timeout", NULL};
    const char *const vals[] = {s->target, LEASE_CONNECT_TIMEOUT, NULL};
    pc = PQconnectdbParams(keys, vals, 1);
    if (!pc || PQstatus(pc) != CONNECTION_OK) {
        int rc = lease_fail(pc, NULL, "connect", err);
        PQfinish(pc);
        return rc;
    }
    PQsetNoticeProcessor(pc, quiet, NULL);
    PGresult *res = PQexec(pc, "SET client_min_messages TO warning; " LEASE_STATEMENT_TIMEOUT);
    if (PQresultStatus(res) != PGRES_COMMAND_OK) {
        int rc = lease_fail(pc, res, "session setup", err);
        PQclear(res);
        PQfinish(pc);
        return rc;
    }
    PQclear(res);
    s->lease = pc;
    *out = pc;
    return 0;
}

void store_lease_fini(ts_store *s)
{
    if (s->lease)
        PQfinish(s->lease);
    s->lease = NULL;
}

/* Runs sql with n text parameters on the lease session; *out on success. */
static int lease_exec(ts_store *s, const char *sql, int n, const char *const *params,
                      PGresult **out, const char *what, ts_err *err)
{
    PGconn *pc = NULL; /* set by lease_conn when it succeeds (-O3 cannot tell) */
    int rc = lease_conn(s, &pc, err);
    if (rc)
        return rc;
    PGresult *res = PQexecParams(pc, sql, n, NULL, params, NULL, NULL, 0);
    ExecStatusType st = PQresultStatus(res);
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
        rc = lease_fail(pc, res, what, err);
        PQclear(res);
        return rc;
    }
    *out = res;
    return 0;
}

static int check_holder(const char *holder, ts_err *err)
{
    if (!holder || !*holder)
        return ts_err_set(err, TS_EINVAL, "lease holder: must not be empty");
    if (strlen(holder) >= TS_LEASE_HOLDER_MAX)
        return ts_err_set(err, TS_EINVAL, "lease holder: longer than %d bytes",
                          TS_LEASE_HOLDER_MAX - 1);
    return 0;
}

static int check_lease_s(double lease_s, ts_err *err)
{
    if (!isfinite(lease_s) || lease_s <= 0 || lease_s > TS_LEASE_S_MAX)
        return ts_err_set(err, TS_EINVAL, "lease: duration %g s: must be in (0, %g] seconds",
                          lease_s, TS_LEASE_S_MAX);
    return 0;
}

static int read_locked(ts_store *s, ts_lease_info *out, ts_err *err)
{
    memset(out, 0, sizeof *out);
    PGresult *res = NULL;
    int rc = lease_exec(s,
                        "SELECT holder, epoch, url, EXTRACT(EPOCH FROM (expires_at - now())) "
                        "FROM lease WHERE id = 1",
                        0, NULL, &res, "read", err);
    if (rc)
        return rc;
    if (PQntuples(res) == 1) {
        store_copy_field(out->holder, sizeof out->holder, PQgetvalue(res, 0, 0),
                            (size_t)PQgetlength(res, 0, 0));
        out->epoch = strtoll(PQgetvalue(res, 0, 1), NULL, 10);
        store_copy_field(out->url, sizeof out->url, PQgetvalue(res, 0, 2),
                            (size_t)PQgetlength(res, 0, 2));
        out->remaining_s = strtod(PQgetvalue(res, 0, 3), NULL);
    } else {
        rc = ts_err_set(err, TS_ENOENT, "lease: the store has no lease row");
    }
    PQclear(res);
    return rc;
}

/* Who holds it instead, for TS_ECONFLICT. */
static int held_elsewhere(ts_store *s, const char *what, ts_err *err)
{
    ts_lease_info li;
    int rc = read_locked(s, &li, err);
    if (rc)
        return rc;
    return ts_err_set(err, TS_ECONFLICT, "lease: %s: held by \"%s\" at epoch %lld for %.1f s more",
                      what, li.holder, (long long)li.epoch, li.remaining_s > 0 ? li.remaining_s : 0);
}

/*
 * The lease row changed by one UPDATE of parameters holder, second, lease_s
 * ($1..$3) that changes the row only where this holder may: 0 (and *epoch
 * from its RETURNING, when asked), or who holds it instead.
 */
static int lease_update(ts_store *s, const char *sql, const char *holder, const char *second,
                        double lease_s, const char *what, int64_t *epoch, ts_err *err)
{
    int rc;
    if ((rc = check_holder(holder, err)) || (rc = check_lease_s(lease_s, err)))
        return rc;
    char dur[32];
    snprintf(dur, sizeof dur, "%.17g", lease_s);
    const char *p[] = {holder, second, dur};
    pthread_mutex_lock(&s->lease_mu);
    PGresult *res = NULL;
    rc = lease_exec(s, sql, 3, p, &res, what, err);
    if (rc == 0) {
        bool ok = epoch ? PQntuples(res) == 1 : strcmp(PQcmdTuples(res), "1") == 0;
        if (ok && epoch)
            *epoch = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
        PQclear(res);
        if (!ok)
            rc = held_elsewhere(s, what, err);
    }
    pthread_mutex_unlock(&s->lease_mu);
    return rc;
}

int ts_store_lease_acquire(ts_store *s, const char *holder, const char *url, double lease_s,
                           int64_t *epoch, ts_err *err)
{
    if (!url)
        url = "";
    if (strlen(url) >= TS_LEASE_URL_MAX)
        return ts_err_set(err, TS_EINVAL, "lease url: longer than %d bytes",
                          TS_LEASE_URL_MAX - 1);
    /* the SET expressions all read the row as it was */
    return lease_update(s,
                        "UPDATE lease SET "
                        "epoch = CASE WHEN holder = $1 AND expires_at > now() THEN epoch "
                        "ELSE epoch + 1 END, holder = $1, url = $2, "
                        "expires_at = now() + $3::float8 * interval '1 second' "
                        "WHERE id = 1 AND (holder = $1 OR expires_at <= now()) RETURNING epoch",
                        holder, url, lease_s, "acquire", epoch, err);
}

int ts_store_lease_renew(ts_store *s, const char *holder, int64_t epoch, double lease_s,
                         ts_err *err)
{
    char ep[32];
    snprintf(ep, sizeof ep, "%lld", (long long)epoch);
    return lease_update(s,
                        "UPDATE lease SET expires_at = now() + $3::float8 * interval '1 second' "
                        "WHERE id = 1 AND holder = $1 AND epoch = $2::bigint",
                        holder, ep, lease_s, "renew", NULL, err);
}

int ts_store_lease_release(ts_store *s, const char *holder, int64_t epoch, ts_err *err)
{
    int rc = check_holder(holder, err);
    if (rc)
        return rc;
    char ep[32];
    snprintf(ep, sizeof ep, "%lld", (long long)epoch);
    const char *p[] = {holder, ep};
    pthread_mutex_lock(&s->lease_mu);
    PGresult *res = NULL;
    rc = lease_exec(s,
                    "UPDATE lease SET expires_at = now() "
                    "WHERE id = 1 AND holder = $1 AND epoch = $2::bigint AND expires_at > now()",
                    2, p, &res, "release", err);
    if (rc == 0)
        PQclear(res);
    pthread_mutex_unlock(&s->lease_mu);
    return rc;
}

int ts_store_lease_read(ts_store *s, ts_lease_info *out, ts_err *err)
{
    pthread_mutex_lock(&s->lease_mu);
    int rc = read_locked(s, out, err);
    pthread_mutex_unlock(&s->lease_mu);
    return rc;
}

int ts_store_set_epoch(ts_store *s, int64_t epoch, ts_err *err)
{
    if (!s->be->set_fence)
        return ts_err_set(err, TS_EINVAL,
                          "lease: fencing needs a PostgreSQL store (this one is %s)",
                          s->be->name);
    if (epoch < 0)
        return ts_err_set(err, TS_EINVAL, "lease: epoch %lld: must be >= 0", (long long)epoch);
    s->be->set_fence(s->wconn->db, epoch);
    return 0;
}
