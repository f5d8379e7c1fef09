/*
 * store_schema.c - the versioned schema: each migration is one script, in
 * the neutral SQL of store_stmts.c (its @WORDS spell each dialect's types),
 * numbered, applied in order at open, never edited once released.
 *
 * schema_version holds one row, the number of the last migration applied.
 * Opening a store runs, in one transaction that excludes other processes
 * opening it at the same moment, every migration above that number, so an
 * old store is brought forward and a new one is built by the same path. A
 * store whose number is above the highest this code knows was written by a
 * newer tessera: it is refused, because this code cannot know what the newer
 * columns mean and writing to it could break the newer reader.
 *
 * Job ids are AUTOINCREMENT (SQLite) / BIGSERIAL (PostgreSQL): they are API
 * identifiers, so an id is never handed out twice, even after deletes.
 */
#include "store/store_internal.h"

#include <assert.h>
#include <string.h>

typedef struct migration {
    int version;
    /* neutral SQL (store_stmts.c: @WORDS spell the dialects' types) */
    const char *sql;
    /* run after sql on PostgreSQL only; NULL: none */
    const char *pg_only;
    /* after the script, in its transaction: fills what SQL alone cannot */
    int (*fill)(store_conn *c, ts_err *err);
} migration;

static const migration migrations[] = {
    {1,
     /* jobs, their events, API tokens, settings (the tenants YAML) */
     "CREATE TABLE jobs ("
     " id @SERIAL,"
     " tenant TEXT NOT NULL, name TEXT NOT NULL DEFAULT '', owner TEXT NOT NULL DEFAULT '',"
     " idem_key TEXT NOT NULL DEFAULT '', state INTEGER NOT NULL, tier INTEGER NOT NULL,"
     " priority INTEGER NOT NULL DEFAULT 0, gpus INTEGER NOT NULL DEFAULT 0,"
     " gpu_model TEXT NOT NULL DEFAULT '', submit_s @F64 NOT NULL DEFAULT 0,"
     " start_s @F64 NOT NULL DEFAULT 0, end_s @F64 NOT NULL DEFAULT 0,"
     " preemptions INTEGER NOT NULL DEFAULT 0, reason TEXT NOT NULL DEFAULT '', why TEXT,"
     " spec_json TEXT NOT NULL, placement_json TEXT, gen @I64 NOT NULL DEFAULT 1);"
     "CREATE UNIQUE INDEX jobs_owner_idem ON jobs (owner, idem_key) WHERE idem_key <> '';"
     "CREATE INDEX jobs_tenant_id ON jobs (tenant, id);"
     "CREATE INDEX jobs_state_id ON jobs (state, id);"
     "CREATE INDEX jobs_owner_id ON jobs (owner, id);"
     "CREATE TABLE events ("
     " id @SERIAL, job_id @I64 NOT NULL, t_s @F64 NOT NULL,"
     " kind TEXT NOT NULL, detail TEXT);"
     "CREATE INDEX events_job_id ON events (job_id, id);"
     "CREATE TABLE tokens ("
     " id @SERIAL, name TEXT NOT NULL UNIQUE, role INTEGER NOT NULL,"
     " tenant TEXT NOT NULL DEFAULT '', hash @BLOB NOT NULL UNIQUE, created_s @F64 NOT NULL,"
     " revoked_s @F64 NOT NULL DEFAULT 0);"
     "CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);",
     NULL, NULL},
    {2,
     /* per-tenant counts read the index alone instead of every job row;
      * a tenant admin's token list stops scanning all tokens */
     "CREATE INDEX jobs_tenant_state ON jobs (tenant, state);"
     "CREATE INDEX tokens_tenant_id ON tokens (tenant, id);",
     NULL, NULL},
    {3,
     /* high availability (store_lease.c, docs/ha.md): one lease row, whose
      * holder leads the controllers sharing a PostgreSQL store; its epoch
      * grows with each new holder and fences the writes of older ones.
      * SQLite gets the same table, unused (one controller only). */
     "CREATE TABLE IF NOT EXISTS lease (id INTEGER PRIMARY KEY CHECK (id = 1),"
     " holder TEXT NOT NULL DEFAULT '', epoch @I64 NOT NULL DEFAULT 0,"
     " @LEASE_EXPIRY, url TEXT NOT NULL DEFAULT '');"
     "INSERT INTO lease (id) VALUES (1) ON CONFLICT (id) DO NOTHING;",
     NULL, NULL},
    {4,
     /* the epoch that wrote each event and created each job (docs/ha.md),
      * so the store itself shows that no commit of an old leader follows the
      * first of a new one: ids are drawn inside the fenced transaction,
      * whose lock on the lease row a takeover waits for, so across a
      * takeover they follow commit order. On PostgreSQL the fence check sets
      * tessera.epoch for its transaction and the default reads it (0 when
      * unset: a write without a fence); existing rows get 0 without a
      * rewrite (the constant default first). SQLite: always 0. */
     "ALTER TABLE events ADD COLUMN epoch @I64 NOT NULL DEFAULT 0;"
     "ALTER TABLE jobs ADD COLUMN epoch @I64 NOT NULL DEFAULT 0;",
     "ALTER TABLE events ALTER COLUMN epoch SET DEFAULT"
     " COALESCE(NULLIF(current_setting('tessera.epoch', true), ''), '0')::bigint;"
     "ALTER TABLE jobs ALTER COLUMN epoch SET DEFAULT"
     " COALESCE(NULLIF(current_setting('tessera.epoch', true), ''), '0')::bigint;",
     NULL},
    {5,
     /* an ended job's result (exit code, each rank's end and why: docs/api.md
      * "Job"), kept with the row so lists and accounting need no events */
     "ALTER TABLE jobs ADD COLUMN result_json TEXT;",
     NULL, NULL},
    {6,
     /* identity (docs/api.md "Tokens"): the Unix user and uid an
      * administrator maps a token to, and when it expires; a job keeps the
      * identity it was submitted with, whatever later becomes of its token */
     "ALTER TABLE tokens ADD COLUMN unix_user TEXT NOT NULL DEFAULT '';"
     "ALTER TABLE tokens ADD COLUMN uid @I64 NOT NULL DEFAULT -1;"
     "ALTER TABLE tokens ADD COLUMN expires_s @F64 NOT NULL DEFAULT 0;"
     "ALTER TABLE jobs ADD COLUMN run_user TEXT NOT NULL DEFAULT '';"
     "ALTER TABLE jobs ADD COLUMN run_uid @I64 NOT NULL DEFAULT -1;",
     NULL, NULL},
    {7,
     /* large arrays, materialised lazily (docs/store.md "Arrays"): an
      * array's elements have the ids id..id+size-1, reserved at submission;
      * elements below next (and any element a user acted on) have job rows,
      * the others are pending and exist only as this row while open = 1 */
     "CREATE TABLE arrays (id @I64 PRIMARY KEY, size INTEGER NOT NULL,"
     " next INTEGER NOT NULL, open INTEGER NOT NULL DEFAULT 1);",
     NULL, NULL},
    {8,
     /* rolled-up accounting (store_usage.c): every closed run once (span 0:
      * up to a week, 1: longer), buckets of GPU-seconds and, for the edge
      * buckets (hours; days for long runs), GPUs carried in, per tenant,
      * tier and model, and the running jobs by start; filled from the jobs
      * and the "run-ended" events already there */
     "CREATE TABLE usage_runs (id @ROWID, job_id @I64 NOT NULL,"
     " whole INTEGER NOT NULL, span INTEGER NOT NULL, tenant TEXT NOT NULL,"
     " tier INTEGER NOT NULL, gpu_model TEXT NOT NULL, gpus @F64 NOT NULL,"
     " start_s @F64 NOT NULL, end_s @F64 NOT NULL);"
     "CREATE UNIQUE INDEX usage_runs_job ON usage_runs (job_id) WHERE whole = 1;"
     "CREATE INDEX usage_runs_start ON usage_runs (span, start_s);"
     "CREATE INDEX usage_runs_end ON usage_runs (span, end_s);"
     "CREATE TABLE usage_buckets (span INTEGER NOT NULL, width_s @F64 NOT NULL,"
     " start_s @F64 NOT NULL, tenant TEXT NOT NULL, tier INTEGER NOT NULL,"
     " gpu_model TEXT NOT NULL, gpu_s @F64 NOT NULL, carried @F64 NOT NULL,"
     " PRIMARY KEY (span, width_s, start_s, tenant, tier, gpu_model))@NOROWID;"
     "CREATE INDEX jobs_running ON jobs (start_s) WHERE start_s > 0 AND end_s <= 0;",
     NULL, store_rollup_backfill},
    {9,
     /* reservations kept by tesserad (docs/scheduler.md "Reservations") */
     "CREATE TABLE reservations (name TEXT PRIMARY KEY, nodes TEXT NOT NULL,"
     " start_s @F64 NOT NULL, end_s @F64 NOT NULL, tenant TEXT NOT NULL DEFAULT '',"
     " users TEXT NOT NULL DEFAULT '', maintenance INTEGER NOT NULL DEFAULT 0,"
     " created_s @F64 NOT NULL);",
     NULL, NULL},
    {10,
     /* the runs a job was stopped to run again: preemptions, straggler
      * restarts, requeues by a user or a lost node (TESSERA_RESTARTS);
      * until now that count was its preemptions */
     "ALTER TABLE jobs ADD COLUMN restarts INTEGER NOT NULL DEFAULT 0;"
     "UPDATE jobs SET restarts = preemptions;",
     NULL, NULL},
};
#define MIGRATIONS ((int)(sizeof migrations / sizeof migrations[0]))

/* Reads the store's version inside the migration transaction, creating the
 * version table (at 0) in a store that has none. */
static int read_version(store_conn *c, int64_t *v, ts_err *err)
{
    int rc = store_exec(
        c, "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)", err);
    if (rc)
        return rc;
    rc = store_get_version(c, v, err);
    if (rc == TS_ENOENT) {
        *v = 0;
        return store_exec(c, "INSERT INTO schema_version (version) VALUES (0)", err);
    }
    return rc;
}

/* Runs migration m inside the migration transaction. */
static int migrate_one(store_conn *c, const migration *m, ts_err *err)
{
    int rc = store_exec(c, m->sql, err);
    if (rc == 0 && m->pg_only && c->be->dialect == STORE_PG)
        rc = store_exec(c, m->pg_only, err);
    if (rc == 0 && m->fill)
        rc = m->fill(c, err);
    return rc ? rc : store_set_version(c, m->version, err);
}

int store_migrate(store_conn *c, int target_version, int *version, ts_err *err)
{
    /* numbered 1..N in order, the last being the version this code writes */
    for (int i = 0; i < MIGRATIONS; i++)
        assert(migrations[i].version == i + 1);
    assert(migrations[MIGRATIONS - 1].version == TS_SCHEMA_VERSION);
    int rc = store_begin(c, true, err);
    if (rc)
        return ts_err_prefix(err, "store schema: ");
    int64_t v = 0;
    rc = read_version(c, &v, err);
    if (rc) {
        store_rollback(c);
        return ts_err_prefix(err, "store schema: ");
    }
    if (v > TS_SCHEMA_VERSION || v < 0) {
        store_rollback(c);
        return ts_err_set(err, TS_EINVAL,
                          "store schema: version %lld is newer than this tessera knows (%d); "
                          "it was written by a newer release: upgrade tessera to open it",
                          (long long)v, TS_SCHEMA_VERSION);
    }
    for (int i = 0; i < MIGRATIONS; i++) {
        const migration *m = &migrations[i];
        if (m->version <= v || m->version > target_version)
            continue;
        if ((rc = migrate_one(c, m, err))) {
            store_rollback(c);
            return ts_err_prefix(err, "store schema: migration %d: ", m->version);
        }
        v = m->version;
    }
    if ((rc = store_commit(c, err))) {
        store_rollback(c);
        return ts_err_prefix(err, "store schema: ");
    }
    *version = (int)v;
    return 0;
}
