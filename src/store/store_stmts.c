/*
 * store_stmts.c - every statement of the store, written once, and the one
 * table of what SQLite and PostgreSQL spell differently.
 *
 * Statements are neutral SQL: parameters are ?N (PostgreSQL gets $N), and
 * where the dialects differ the text names a @WORD that WORDS below expands
 * per dialect (a type, a function name, a cast PostgreSQL needs to infer a
 * parameter's type, the way ids are drawn). Expansion happens once per
 * connection, when a statement is first prepared, so values still only ever
 * travel as bound parameters. The migrations (store_schema.c) use the same
 * words, which expand on SQLite to exactly the text the schema has always
 * had (SQLite keeps a table's CREATE text).
 */
#include "store/store_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The dialect differences, all of them. */
static const struct {
    const char *word;
    const char *spelling[STORE_DIALECTS]; /* SQLite, PostgreSQL */
} WORDS[] = {
    /* types */
    {"I64", {"INTEGER", "BIGINT"}},
    {"F64", {"REAL", "DOUBLE PRECISION"}},
    {"BLOB", {"BLOB", "BYTEA"}},
    /* ids never reused (API identifiers), and plain row ids */
    {"SERIAL", {"INTEGER PRIMARY KEY AUTOINCREMENT", "BIGSERIAL PRIMARY KEY"}},
    {"ROWID", {"INTEGER PRIMARY KEY", "BIGSERIAL PRIMARY KEY"}},
    {"NOROWID", {" WITHOUT ROWID", ""}},
    /* the lease's expiry: by the database's clock on PostgreSQL, unused on SQLite */
    {"LEASE_EXPIRY",
     {"expires_s REAL NOT NULL DEFAULT 0",
      "expires_at TIMESTAMPTZ NOT NULL DEFAULT '1970-01-01 00:00:00+00'"}},
    /* casts PostgreSQL needs where a parameter's type cannot be inferred */
    {"F8", {"", "::float8"}},
    {"I8", {"", "::bigint"}},
    {"MAX", {"MAX", "GREATEST"}},
    {"MIN", {"MIN", "LEAST"}},
    /* the same byte order as SQLite, whatever the database's locale */
    {"BYTES", {"", " COLLATE \"C\""}},
    /* a new job's id: SQLite draws it for NULL, PostgreSQL from the sequence */
    {"NEXT_JOB_ID", {"NULL", "nextval(pg_get_serial_sequence('jobs', 'id'))"}},
    /* makes every id up to ?1 taken (docs/store.md "Arrays") */
    {"RESERVE_JOB_IDS",
     {"UPDATE sqlite_sequence SET seq = ?1 WHERE name = 'jobs' AND seq < ?1",
      "SELECT setval(pg_get_serial_sequence('jobs', 'id'), GREATEST(?1::bigint, "
      "(SELECT last_value FROM jobs_id_seq)))"}},
    /* one snapshot for the statements of an answer, on a reader */
    {"READ_SNAPSHOT", {"BEGIN", "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"}},
};
#define NWORDS ((int)(sizeof WORDS / sizeof WORDS[0]))

#define JOB_COLS                                                                               \
    "id, tenant, name, owner, idem_key, state, tier, priority, gpus, gpu_model, submit_s, "    \
    "start_s, end_s, preemptions, reason, why, spec_json, placement_json, gen, result_json, "  \
    "run_user, run_uid, restarts"
#define TOKEN_COLS                                                                             \
    "id, name, role, tenant, hash, created_s, revoked_s, unix_user, uid, expires_s"
#define EVENT_COLS "id, job_id, t_s, kind, detail"
/* A job's end, or now while it runs; its running interval clipped to the
 * window [?1, ?2) starts at LO and ends at HI. */
#define USAGE_END "(CASE WHEN end_s > 0 THEN end_s ELSE ?3@F8 END)"
#define USAGE_LO "@MAX(start_s, ?1@F8)"
#define USAGE_HI "@MIN(" USAGE_END ", ?2@F8)"

static const char *const SQL[ST_COUNT] = {
    [ST_SET_VERSION] = "UPDATE schema_version SET version = ?1",
    [ST_GET_VERSION] = "SELECT MAX(version) FROM schema_version",
    [ST_JOB_INSERT] =
        "INSERT INTO jobs (tenant, name, owner, idem_key, state, tier, priority, gpus, "
        "gpu_model, submit_s, start_s, end_s, preemptions, reason, why, spec_json, "
        "placement_json, gen, run_user, run_uid, restarts, id) VALUES (?1, ?2, ?3, ?4, ?5, ?6, "
        "?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, 1, ?18, ?19, ?20, "
        "COALESCE(?21@I8, @NEXT_JOB_ID)) ON CONFLICT (owner, idem_key) WHERE "
        "idem_key <> '' DO NOTHING RETURNING id",
    [ST_JOB_BY_IDEM] = "SELECT id FROM jobs WHERE owner = ?1 AND idem_key = ?2 AND idem_key <> ''",
    [ST_IDS_RESERVE] = "@RESERVE_JOB_IDS",
    [ST_ARRAY_PUT] = "INSERT INTO arrays (id, size, next, open) VALUES (?1, ?2, ?3, ?4) "
                     "ON CONFLICT (id) DO UPDATE SET next = excluded.next, open = excluded.open",
    [ST_ARRAYS_OPEN] = "SELECT id, size, next FROM arrays WHERE open = 1 ORDER BY id",
    [ST_RESV_INSERT] = "INSERT INTO reservations (name, nodes, start_s, end_s, tenant, users,"
                       " maintenance, created_s) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"
                       " ON CONFLICT (name) DO NOTHING",
    [ST_RESV_DELETE] = "DELETE FROM reservations WHERE name = ?1",
    [ST_RESV_LIST] = "SELECT name, nodes, start_s, end_s, tenant, users, maintenance, created_s"
                     " FROM reservations ORDER BY start_s, name",
    [ST_JOB_UPDATE] = "UPDATE jobs SET state = ?3, submit_s = ?4, start_s = ?5, end_s = ?6, "
                      "preemptions = ?7, reason = ?8, why = ?9, placement_json = ?10, "
                      "gpu_model = ?11, result_json = ?12, spec_json = COALESCE(?13, spec_json), "
                      "priority = ?14, gpus = ?15, restarts = ?16, gen = gen + 1 "
                      "WHERE id = ?1 AND gen = ?2",
    [ST_JOB_GEN] = "SELECT gen FROM jobs WHERE id = ?1",
    [ST_JOB_GET] = "SELECT " JOB_COLS " FROM jobs WHERE id = ?1",
    [ST_COUNTS_ALL] = "SELECT state, COUNT(*) FROM jobs GROUP BY state",
    [ST_COUNTS_TENANT] = "SELECT state, COUNT(*) FROM jobs WHERE tenant = ?1 GROUP BY state",
    [ST_EVENT_INSERT] = "INSERT INTO events (job_id, t_s, kind, detail) VALUES (?1, ?2, ?3, ?4)",
    [ST_EVENTS_JOB] = "SELECT " EVENT_COLS " FROM events WHERE job_id = ?1 AND id > ?2 "
                      "ORDER BY id LIMIT ?3",
    [ST_EVENTS_ALL] = "SELECT " EVENT_COLS " FROM events WHERE id > ?1 ORDER BY id LIMIT ?2",
    [ST_TOKEN_BY_NAME] = "SELECT revoked_s FROM tokens WHERE name = ?1",
    [ST_TOKEN_INSERT] = "INSERT INTO tokens (name, role, tenant, hash, created_s, revoked_s, "
                        "unix_user, uid, expires_s) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, "
                        "?8, ?9) RETURNING id",
    [ST_TOKEN_REVOKE] = "UPDATE tokens SET revoked_s = ?2 WHERE name = ?1 AND revoked_s = 0",
    [ST_TOKEN_BY_HASH] = "SELECT " TOKEN_COLS " FROM tokens WHERE hash = ?1 AND revoked_s = 0",
    [ST_TOKENS_ALL] = "SELECT " TOKEN_COLS " FROM tokens ORDER BY id",
    [ST_TOKENS_TENANT] = "SELECT " TOKEN_COLS " FROM tokens WHERE tenant = ?1 ORDER BY id",
    [ST_SETTING_PUT] = "INSERT INTO settings (key, value) VALUES (?1, ?2) "
                       "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
    [ST_SETTING_GET] = "SELECT value FROM settings WHERE key = ?1",
    [ST_USAGE] = "SELECT tenant, tier, gpu_model, SUM(gpus * (" USAGE_HI " - " USAGE_LO ")) "
                 "FROM jobs WHERE start_s > 0 AND start_s < ?2@F8 AND " USAGE_HI " > " USAGE_LO
                 " GROUP BY tenant, tier, gpu_model "
                 "ORDER BY tenant@BYTES, tier, gpu_model@BYTES",
};

/* Rolled-up accounting (store_usage.c, migration 8); TS_RU_SHAPES says
 * what each binds and returns. */
#define RU_GROUP "tenant, tier, gpu_model"
static const char *const RU_SQL[TS_RU_STMTS] = {
    [TS_RU_RUN_OF_JOB] = "SELECT j.tenant, j.tier, j.gpu_model, j.gpus, j.start_s, j.end_s, "
                         "r.gpu_model, r.gpus, r.start_s, r.end_s FROM jobs j LEFT JOIN "
                         "usage_runs r ON r.job_id = j.id AND r.whole = 1 WHERE j.id = ?1",
    [TS_RU_RUN_DEL] = "DELETE FROM usage_runs WHERE job_id = ?1 AND whole = 1",
    [TS_RU_RUN_ADD] = "INSERT INTO usage_runs (job_id, tenant, tier, gpu_model, gpus, start_s, "
                      "end_s, whole, span) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, "
                      "CAST(?8 AS INTEGER) & 1, CAST(?8 AS INTEGER) >> 1)",
    [TS_RU_BUCKET_ADD] = "INSERT INTO usage_buckets (span, tenant, tier, gpu_model, start_s, "
                         "gpu_s, carried, width_s) VALUES (?1, ?2, ?3, ?4, ?5, ?6, "
                         "?7, ?8) ON CONFLICT (span, width_s, start_s, " RU_GROUP ") "
                         "DO UPDATE SET gpu_s = usage_buckets.gpu_s + excluded.gpu_s, "
                         "carried = usage_buckets.carried + excluded.carried",
    [TS_RU_BUCKETS] = "SELECT " RU_GROUP ", SUM(gpu_s) FROM usage_buckets WHERE span = ?1 "
                      "AND width_s = ?2 AND start_s >= ?3 AND start_s < ?4 "
                      "GROUP BY " RU_GROUP,
    [TS_RU_EDGE_AT] = "SELECT " RU_GROUP ", gpu_s, carried FROM usage_buckets WHERE "
                      "span = ?1 AND width_s = ?2 AND start_s = ?3",
    [TS_RU_POINTS] = "SELECT " RU_GROUP ", SUM(gpus * (?3 - start_s)) FROM usage_runs WHERE "
                     "span = ?1 AND start_s >= ?2 AND start_s < ?3 GROUP BY " RU_GROUP " "
                     "UNION ALL SELECT " RU_GROUP ", -SUM(gpus * (?3 - end_s)) FROM usage_runs "
                     "WHERE span = ?1 AND end_s >= ?2 AND end_s < ?3 GROUP BY " RU_GROUP,
    [TS_RU_RUNNING] = "SELECT " RU_GROUP ", SUM(gpus * (@MIN(?3@F8, ?2@F8) - "
                      "@MAX(start_s, ?1@F8))) FROM jobs WHERE start_s > 0 AND end_s <= 0 AND "
                      "start_s < ?2@F8 AND @MIN(?3@F8, ?2@F8) > @MAX(start_s, ?1@F8) "
                      "GROUP BY " RU_GROUP,
    [TS_RU_OLD_JOBS] = "SELECT " RU_GROUP ", gpus, start_s, end_s, id FROM jobs "
                       "WHERE start_s > 0 AND end_s > 0",
    [TS_RU_OLD_RUNS] = ("SELECT j.tenant, e.detail, e.job_id FROM events e JOIN jobs j "
                        "ON j.id = e.job_id WHERE e.kind = 'run-ended'"),
    [TS_RU_READ_BEGIN] = "@READ_SNAPSHOT",
    [TS_RU_READ_END] = "COMMIT",
};

const char *store_stmt_sql(enum store_stmt which) { return SQL[which]; }

const char *store_ru_sql(int ru) { return RU_SQL[ru]; }

/* From fixed fragments only: values go as parameters, and each variant
 * can use its own index. ?1 is the id to list after, the limit comes last. */
void store_list_sql(int mask, char *buf, size_t cap)
{
    int p = 2;
    char tn[32] = "", on[32] = "", sn[64] = "";
    if (mask & LF_TENANT)
        snprintf(tn, sizeof tn, " AND tenant = ?%d", p++);
    if (mask & LF_OWNER)
        snprintf(on, sizeof on, " AND owner = ?%d", p++);
    if (mask & LF_STATE)
        snprintf(sn, sizeof sn, " AND state = ?%d", p++);
    else if (mask & LF_STATES) /* the same text for SQLite and PostgreSQL */
        snprintf(sn, sizeof sn, " AND ((CAST(?%d AS BIGINT) >> state) & 1) = 1", p++);
    bool desc = mask & LF_DESC;
    snprintf(buf, cap, "SELECT " JOB_COLS " FROM jobs WHERE id %s ?1%s%s%s%s ORDER BY id%s LIMIT ?%d",
             desc ? "<" : ">", tn, on, sn, mask & LF_ACTIVE ? " AND state IN (0, 1, 2, 3)" : "",
             desc ? " DESC" : "", p);
}

static bool is_word_char(char ch)
{
    return (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_';
}

/* The spelling of the word at sql (after its '@'), *len its length; NULL if
 * it is no word of WORDS. */
static const char *word_at(enum store_dialect d, const char *sql, size_t *len)
{
    size_t n = 0;
    while (is_word_char(sql[n]))
        n++;
    *len = n;
    for (int i = 0; i < NWORDS; i++)
        if (strlen(WORDS[i].word) == n && strncmp(WORDS[i].word, sql, n) == 0)
            return WORDS[i].spelling[d];
    return NULL;
}

/* Appends src[0..n) to the growing string *out. */
static bool put(char **out, size_t *len, size_t *cap, const char *src, size_t n)
{
    if (*len + n + 1 > *cap) {
        size_t ncap = (*len + n + 1) * 2;
        char *p = realloc(*out, ncap);
        if (!p)
            return false;
        *out = p;
        *cap = ncap;
    }
    memcpy(*out + *len, src, n);
    *len += n;
    (*out)[*len] = '\0';
    return true;
}

/* One pass: words (whose spellings may hold ?N), then ?N to $N. */
static char *expand_pass(enum store_dialect d, const char *sql, bool words)
{
    char *out = NULL;
    size_t len = 0, cap = 0;
    bool quoted = false, ok = put(&out, &len, &cap, "", 0);
    for (const char *p = sql; ok && *p;) {
        size_t n = 0;
        const char *w = NULL;
        if (*p == '\'')
            quoted = !quoted;
        if (!quoted && words && *p == '@' && (w = word_at(d, p + 1, &n))) {
            ok = put(&out, &len, &cap, w, strlen(w));
            p += 1 + n;
        } else if (!quoted && !words && d == STORE_PG && *p == '?' && p[1] >= '0' &&
                   p[1] <= '9') {
            ok = put(&out, &len, &cap, "$", 1);
            p++;
        } else {
            ok = put(&out, &len, &cap, p, 1);
            p++;
        }
    }
    if (!ok) {
        free(out);
        return NULL;
    }
    return out;
}

char *store_expand(enum store_dialect d, const char *sql)
{
    char *w = expand_pass(d, sql, true);
    if (!w)
        return NULL;
    char *out = expand_pass(d, w, false);
    free(w);
    return out;
}
