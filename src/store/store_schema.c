/*
 * store_schema.c - the versioned schema: each migration is one script per
 * dialect, numbered, applied in order at open, never edited once released.
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
    const char *sqlite;
    const char *pg;
    /* after the script, in its transaction: fills what SQL alone cannot */
    int (*fill)(const struct ts_store_ops *o, void *conn, ts_err *err);
} migration;

static const migration migrations[] = {
    {1,
     /* jobs, their events, API tokens, settings (the tenants YAML) */
     "CREATE TABLE jobs ("
     " id INTEGER PRIMARY KEY AUTOINCREMENT,"
     " tenant TEXT NOT NULL, name TEXT NOT NULL DEFAULT '', owner TEXT NOT NULL DEFAULT '',"
     " idem_key TEXT NOT NULL DEFAULT '', state INTEGER NOT NULL, tier INTEGER NOT NULL,"
     " priority INTEGER NOT NULL DEFAULT 0, gpus INTEGER NOT NULL DEFAULT 0,"
     " gpu_model TEXT NOT NULL DEFAULT '', submit_s REAL NOT NULL DEFAULT 0,"
     " start_s REAL NOT NULL DEFAULT 0, end_s REAL NOT NULL DEFAULT 0,"
     " preemptions INTEGER NOT NULL DEFAULT 0, reason TEXT NOT NULL DEFAULT '', why TEXT,"
     " spec_json TEXT NOT NULL, placement_json TEXT, gen INTEGER NOT NULL DEFAULT 1);"
     "CREATE UNIQUE INDEX jobs_owner_idem ON jobs (owner, idem_key) WHERE idem_key <> '';"
     "CREATE INDEX jobs_tenant_id ON jobs (tenant, id);"
     "CREATE INDEX jobs_state_id ON jobs (state, id);"
     "CREATE INDEX jobs_owner_id ON jobs (owner, id);"
     "CREATE TABLE events ("
     " id INTEGER PRIMARY KEY AUTOINCREMENT, job_id INTEGER NOT NULL, t_s REAL NOT NULL,"
     " kind TEXT NOT NULL, detail TEXT);"
     "CREATE INDEX events_job_id ON events (job_id, id);"
     "CREATE TABLE tokens ("
     " id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL UNIQUE, role INTEGER NOT NULL,"
     " tenant TEXT NOT NULL DEFAULT '', hash BLOB NOT NULL UNIQUE, created_s REAL NOT NULL,"
     " revoked_s REAL NOT NULL DEFAULT 0);"
     "CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);",

     "CREATE TABLE jobs ("
     " id BIGSERIAL PRIMARY KEY,"
     " tenant TEXT NOT NULL, name TEXT NOT NULL DEFAULT '', owner TEXT NOT NULL DEFAULT '',"
     " idem_key TEXT NOT NULL DEFAULT '', state INTEGER NOT NULL, tier INTEGER NOT NULL,"
     " priority INTEGER NOT NULL DEFAULT 0, gpus INTEGER NOT NULL DEFAULT 0,"
     " gpu_model TEXT NOT NULL DEFAULT '', submit_s DOUBLE PRECISION NOT NULL DEFAULT 0,"
     " start_s DOUBLE PRECISION NOT NULL DEFAULT 0, end_s DOUBLE PRECISION NOT NULL DEFAULT 0,"
     " preemptions INTEGER NOT NULL DEFAULT 0, reason TEXT NOT NULL DEFAULT '', why TEXT,"
     " spec_json TEXT NOT NULL, placement_json TEXT, gen BIGINT NOT NULL DEFAULT 1);"
     "CREATE UNIQUE INDEX jobs_owner_idem ON jobs (owner, idem_key) WHERE idem_key <> '';"
     "CREATE INDEX jobs_tenant_id ON jobs (tenant, id);"
     "CREATE INDEX jobs_state_id ON jobs (state, id);"
     "CREATE INDEX jobs_owner_id ON jobs (owner, id);"
     "CREATE TABLE events ("
     " id BIGSERIAL PRIMARY KEY, job_id BIGINT NOT NULL, t_s DOUBLE PRECISION NOT NULL,"
     " kind TEXT NOT NULL, detail TEXT);"
     "CREATE INDEX events_job_id ON events (job_id, id);"
     "CREATE TABLE tokens ("
     " id BIGSERIAL PRIMARY KEY, name TEXT NOT NULL UNIQUE, role INTEGER NOT NULL,"
     " tenant TEXT NOT NULL DEFAULT '', hash BYTEA NOT NULL UNIQUE,"
     " created_s DOUBLE PRECISION NOT NULL, revoked_s DOUBLE PRECISION NOT NULL DEFAULT 0);"
     "CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);",
     NULL},
    {2,
     /* per-tenant counts read the index alone instead of every job row;
      * a tenant admin's token list stops scanning all tokens */
     "CREATE INDEX jobs_tenant_state ON jobs (tenant, state);"
     "CREATE INDEX tokens_tenant_id ON tokens (tenant, id);",
     "CREATE INDEX jobs_tenant_state ON jobs (tenant, state);"
     "CREATE INDEX tokens_tenant_id ON tokens (tenant, id);",
     NULL},
    {3,
     /* high availability (store_lease.c, docs/ha.md): one lease row, whose
      * holder leads the controllers sharing a PostgreSQL store; its epoch
      * grows with each new holder and fences the writes of older ones.
      * SQLite gets the same table, unused (one controller only). */
     "CREATE TABLE IF NOT EXISTS lease (id INTEGER PRIMARY KEY CHECK (id = 1),"
     " holder TEXT NOT NULL DEFAULT '', epoch INTEGER NOT NULL DEFAULT 0,"
     " expires_s REAL NOT NULL DEFAULT 0, url TEXT NOT NULL DEFAULT '');"
     "INSERT OR IGNORE INTO lease (id) VALUES (1);",
     "CREATE TABLE IF NOT EXISTS lease (id INTEGER PRIMARY KEY CHECK (id = 1),"
     " holder TEXT NOT NULL DEFAULT '', epoch BIGINT NOT NULL DEFAULT 0,"
     " expires_at TIMESTAMPTZ NOT NULL DEFAULT '1970-01-01 00:00:00+00',"
     " url TEXT NOT NULL DEFAULT '');"
     "INSERT INTO lease (id) VALUES (1) ON CONFLICT (id) DO NOTHING;",
     NULL},
    {4,
     /* the epoch that wrote each event and created each job (docs/ha.md),
      * so the store itself shows that no commit of an old leader follows the
      * first of a new one: ids are drawn inside the fenced transaction,
      * whose lock on the lease row a takeover waits for, so across a
      * takeover they follow commit order. On PostgreSQL the fence check sets
      * tessera.epoch for its transaction and the default reads it (0 when
      * unset: a write without a fence); existing rows get 0 without a
      * rewrite (the constant default first). SQLite: always 0. */
     "ALTER TABLE events ADD COLUMN epoch INTEGER NOT NULL DEFAULT 0;"
     "ALTER TABLE jobs ADD COLUMN epoch INTEGER NOT NULL DEFAULT 0;",
     "ALTER TABLE events ADD COLUMN epoch BIGINT NOT NULL DEFAULT 0;"
     "ALTER TABLE events ALTER COLUMN epoch SET DEFAULT"
     " COALESCE(NULLIF(current_setting('tessera.epoch', true), ''), '0')::bigint;"
     "ALTER TABLE jobs ADD COLUMN epoch BIGINT NOT NULL DEFAULT 0;"
     "ALTER TABLE jobs ALTER COLUMN epoch SET DEFAULT"
     " COALESCE(NULLIF(current_setting('tessera.epoch', true), ''), '0')::bigint;",
     NULL},
    {5,
     /* an ended job's result (exit code, each rank's end and why: docs/api.md
      * "Job"), kept with the row so lists and accounting need no events */
     "ALTER TABLE jobs ADD COLUMN result_json TEXT;",
     "ALTER TABLE jobs ADD COLUMN result_json TEXT;",
     NULL},
    {6,
     /* identity (docs/api.md "Tokens"): the Unix user and uid an
      * administrator maps a token to, and when it expires; a job keeps the
      * identity it was submitted with, whatever later becomes of its token */
     "ALTER TABLE tokens ADD COLUMN unix_user TEXT NOT NULL DEFAULT '';"
     "ALTER TABLE tokens ADD COLUMN uid INTEGER NOT NULL DEFAULT -1;"
     "ALTER TABLE tokens ADD COLUMN expires_s REAL NOT NULL DEFAULT 0;"
     "ALTER TABLE jobs ADD COLUMN run_user TEXT NOT NULL DEFAULT '';"
     "ALTER TABLE jobs ADD COLUMN run_uid INTEGER NOT NULL DEFAULT -1;",
     "ALTER TABLE tokens ADD COLUMN unix_user TEXT NOT NULL DEFAULT '';"
     "ALTER TABLE tokens ADD COLUMN uid BIGINT NOT NULL DEFAULT -1;"
     "ALTER TABLE tokens ADD COLUMN expires_s DOUBLE PRECISION NOT NULL DEFAULT 0;"
     "ALTER TABLE jobs ADD COLUMN run_user TEXT NOT NULL DEFAULT '';"
     "ALTER TABLE jobs ADD COLUMN run_uid BIGINT NOT NULL DEFAULT -1;",
     NULL},
    {7,
     /* large arrays, materialised lazily (docs/store.md "Arrays"): an
      * array's elements have the ids id..id+size-1, reserved at submission;
      * elements below next (and any element a user acted on) have job rows,
      * the others are pending and exist only as this row while open = 1 */
     "CREATE TABLE arrays (id INTEGER PRIMARY KEY, size INTEGER NOT NULL,"
     " next INTEGER NOT NULL, open INTEGER NOT NULL DEFAULT 1);",
     "CREATE TABLE arrays (id BIGINT PRIMARY KEY, size INTEGER NOT NULL,"
     " next INTEGER NOT NULL, open INTEGER NOT NULL DEFAULT 1);",
     NULL},
    {8,
     /* rolled-up accounting (store_usage.c): every closed run once (span 0:
      * up to a week, 1: longer), buckets of GPU-seconds and, for the edge
      * buckets (hours; days for long runs), GPUs carried in, per tenant,
      * tier and model, and the running jobs by start; filled from the jobs
      * and the "run-ended" events already there */
     "CREATE TABLE usage_runs (id INTEGER PRIMARY KEY, job_id INTEGER NOT NULL,"
     " whole INTEGER NOT NULL, span INTEGER NOT NULL, tenant TEXT NOT NULL,"
     " tier INTEGER NOT NULL, gpu_model TEXT NOT NULL, gpus REAL NOT NULL,"
     " start_s REAL NOT NULL, end_s REAL NOT NULL);"
     "CREATE UNIQUE INDEX usage_runs_job ON usage_runs (job_id) WHERE whole = 1;"
     "CREATE INDEX usage_runs_start ON usage_runs (span, start_s);"
     "CREATE INDEX usage_runs_end ON usage_runs (span, end_s);"
     "CREATE TABLE usage_buckets (span INTEGER NOT NULL, width_s REAL NOT NULL,"
     " start_s REAL NOT NULL, tenant TEXT NOT NULL, tier INTEGER NOT NULL,"
     " gpu_model TEXT NOT NULL, gpu_s REAL NOT NULL, carried REAL NOT NULL,"
     " PRIMARY KEY (span, width_s, start_s, tenant, tier, gpu_model)) WITHOUT ROWID;"
     "CREATE INDEX jobs_running ON jobs (start_s) WHERE start_s > 0 AND end_s <= 0;",

     "CREATE TABLE usage_runs (id BIGSERIAL PRIMARY KEY, job_id BIGINT NOT NULL,"
     " whole INTEGER NOT NULL, span INTEGER NOT NULL, tenant TEXT NOT NULL,"
     " tier INTEGER NOT NULL, gpu_model TEXT NOT NULL, gpus DOUBLE PRECISION NOT NULL,"
     " start_s DOUBLE PRECISION NOT NULL, end_s DOUBLE PRECISION NOT NULL);"
     "CREATE UNIQUE INDEX usage_runs_job ON usage_runs (job_id) WHERE whole = 1;"
     "CREATE INDEX usage_runs_start ON usage_runs (span, start_s);"
     "CREATE INDEX usage_runs_end ON usage_runs (span, end_s);"
     "CREATE TABLE usage_buckets (span INTEGER NOT NULL, width_s DOUBLE PRECISION NOT NULL,"
     " start_s DOUBLE PRECISION NOT NULL, tenant TEXT NOT NULL, tier INTEGER NOT NULL,"
     " gpu_model TEXT NOT NULL, gpu_s DOUBLE PRECISION NOT NULL,"
     " carried DOUBLE PRECISION NOT NULL,"
     " PRIMARY KEY (span, width_s, start_s, tenant, tier, gpu_model));"
     "CREATE INDEX jobs_running ON jobs (start_s) WHERE start_s > 0 AND end_s <= 0;",
     ts_store_rollup_backfill},
    {9,
     /* reservations kept by tesserad (docs/scheduler.md "Reservations") */
     "CREATE TABLE reservations (name TEXT PRIMARY KEY, nodes TEXT NOT NULL,"
     " start_s REAL NOT NULL, end_s REAL NOT NULL, tenant TEXT NOT NULL DEFAULT '',"
     " users TEXT NOT NULL DEFAULT '', maintenance INTEGER NOT NULL DEFAULT 0,"
     " created_s REAL NOT NULL);",
     "CREATE TABLE reservations (name TEXT PRIMARY KEY, nodes TEXT NOT NULL,"
     " start_s DOUBLE PRECISION NOT NULL, end_s DOUBLE PRECISION NOT NULL,"
     " tenant TEXT NOT NULL DEFAULT '', users TEXT NOT NULL DEFAULT '',"
     " maintenance INTEGER NOT NULL DEFAULT 0, created_s DOUBLE PRECISION NOT NULL);",
     NULL},
};
#define MIGRATIONS ((int)(sizeof migrations / sizeof migrations[0]))

const char *ts_store_migration_sql(const char *backend, int version)
{
    for (int i = 0; i < MIGRATIONS; i++)
        if (migrations[i].version == version)
            return strcmp(backend, "sqlite") == 0 ? migrations[i].sqlite : migrations[i].pg;
    return NULL;
}

/* Reads the store's version inside the migration transaction, creating the
 * version table (at 0) in a store that has none. */
static int read_version(const struct ts_store_ops *ops, void *conn, int64_t *v, ts_err *err)
{
    int rc = ops->exec_script(
        conn, "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)", err);
    if (rc)
        return rc;
    rc = ops->query_int(conn, "SELECT MAX(version) FROM schema_version", v, err);
    if (rc == TS_ENOENT) {
        *v = 0;
        return ops->exec_script(conn, "INSERT INTO schema_version (version) VALUES (0)", err);
    }
    return rc;
}

int ts_store_migrate(const struct ts_store_ops *ops, void *conn, int target_version,
                     int *version, ts_err *err)
{
    /* numbered 1..N in order, the last being the version this code writes */
    for (int i = 0; i < MIGRATIONS; i++)
        assert(migrations[i].version == i + 1);
    assert(migrations[MIGRATIONS - 1].version == TS_SCHEMA_VERSION);
    int rc = ops->begin_exclusive(conn, err);
    if (rc)
        return ts_err_prefix(err, "store schema: ");
    int64_t v = 0;
    rc = read_version(ops, conn, &v, err);
    if (rc) {
        ops->rollback(conn);
        return ts_err_prefix(err, "store schema: ");
    }
    if (v > TS_SCHEMA_VERSION || v < 0) {
        ops->rollback(conn);
        return ts_err_set(err, TS_EINVAL,
                          "store schema: version %lld is newer than this tessera knows (%d); "
                          "it was written by a newer release: upgrade tessera to open it",
                          (long long)v, TS_SCHEMA_VERSION);
    }
    for (int i = 0; i < MIGRATIONS; i++) {
        const migration *m = &migrations[i];
        if (m->version <= v || m->version > target_version)
            continue;
        const char *sql = strcmp(ops->name, "sqlite") == 0 ? m->sqlite : m->pg;
        if ((rc = ops->exec_script(conn, sql, err)) ||
            (m->fill && (rc = m->fill(ops, conn, err))) ||
            (rc = ops->set_version(conn, m->version, err))) {
            ops->rollback(conn);
            return ts_err_prefix(err, "store schema: migration %d: ", m->version);
        }
        v = m->version;
    }
    if ((rc = ops->commit(conn, err))) {
        ops->rollback(conn);
        return ts_err_prefix(err, "store schema: ");
    }
    *version = (int)v;
    return 0;
}
