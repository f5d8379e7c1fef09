/*
 * store_fixture.h - what the store tests share: a fresh, empty store per
 * test on either backend, raw access to it behind the store's back (to age
 * or damage it), and job rows to insert.
 *
 * SQLite: a new temp directory per test. PostgreSQL (only when
 * TS_TEST_PG_URL is set): a new schema per test in that database, selected
 * through the URL's search_path, so tests never see each other's rows and
 * the database needs no cleaning between runs.
 */
#ifndef TS_TEST_STORE_FIXTURE_H
#define TS_TEST_STORE_FIXTURE_H

#include <dirent.h>
#include <libpq-fe.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tessera/store.h"

typedef struct store_fixture {
    bool pg;
    char dir[256];    /* sqlite: this test's directory */
    char path[320];   /* sqlite: the store file */
    char url[1024];
    char schema[64];  /* pg: this test's schema */
} store_fixture;

static inline int store_fixture_sqlite(void **state)
{
    store_fixture *fx = calloc(1, sizeof *fx);
    if (!fx)
        return -1;
    const char *tmp = getenv("TMPDIR");
    snprintf(fx->dir, sizeof fx->dir, "%s/ts-store-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(fx->dir)) {
        free(fx);
        return -1;
    }
    snprintf(fx->path, sizeof fx->path, "%s/store.db", fx->dir);
    snprintf(fx->url, sizeof fx->url, "sqlite:%s", fx->path);
    *state = fx;
    return 0;
}

static inline int store_fixture_pg_admin(const char *sql)
{
    PGconn *pc = PQconnectdb(getenv("TS_TEST_PG_URL"));
    int ok = PQstatus(pc) == CONNECTION_OK;
    if (ok) {
        PGresult *r = PQexec(pc, sql);
        ok = PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK;
        if (!ok)
            fprintf(stderr, "pg fixture: %s: %s", sql, PQerrorMessage(pc));
        PQclear(r);
    } else {
        fprintf(stderr, "pg fixture: connect: %s", PQerrorMessage(pc));
    }
    PQfinish(pc);
    return ok ? 0 : -1;
}

static inline int store_fixture_pg(void **state)
{
    static int serial;
    const char *base = getenv("TS_TEST_PG_URL");
    store_fixture *fx = calloc(1, sizeof *fx);
    if (!fx || !base) {
        free(fx);
        return -1;
    }
    fx->pg = true;
    snprintf(fx->schema, sizeof fx->schema, "ts_test_%d_%d", (int)getpid(), ++serial);
    /* application_name lets a test find (and kill) its own sessions */
    snprintf(fx->url, sizeof fx->url, "%s%soptions=-csearch_path%%3D%s&application_name=%s",
             base, strchr(base, '?') ? "&" : "?", fx->schema, fx->schema);
    char sql[128];
    snprintf(sql, sizeof sql, "CREATE SCHEMA %s", fx->schema);
    if (store_fixture_pg_admin(sql)) {
        free(fx);
        return -1;
    }
    *state = fx;
    return 0;
}

static inline int store_fixture_teardown(void **state)
{
    store_fixture *fx = *state;
    if (fx->pg) {
        char sql[128];
        snprintf(sql, sizeof sql, "SET client_min_messages TO warning; DROP SCHEMA %s CASCADE",
                 fx->schema);
        store_fixture_pg_admin(sql);
    } else {
        DIR *d = opendir(fx->dir);
        struct dirent *e;
        char p[600];
        while (d && (e = readdir(d))) {
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
                snprintf(p, sizeof p, "%s/%s", fx->dir, e->d_name);
                unlink(p);
            }
        }
        if (d)
            closedir(d);
        rmdir(fx->dir);
    }
    free(fx);
    return 0;
}

/* Runs sql on the store behind its back; with `out`, reads one integer. */
static inline int store_fixture_raw(const store_fixture *fx, const char *sql, long long *out)
{
    int ok = 0;
    if (fx->pg) {
        PGconn *pc = PQconnectdb(fx->url);
        PGresult *r = PQexec(pc, sql);
        ExecStatusType st = PQresultStatus(r);
        ok = st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK;
        if (ok && out)
            *out = PQntuples(r) ? atoll(PQgetvalue(r, 0, 0)) : -1;
        PQclear(r);
        PQfinish(pc);
    } else {
        sqlite3 *db = NULL;
        sqlite3_stmt *st = NULL;
        if (sqlite3_open(fx->path, &db) == SQLITE_OK &&
            sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK) {
            int rc = sqlite3_step(st);
            ok = rc == SQLITE_ROW || rc == SQLITE_DONE;
            if (ok && out)
                *out = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -1;
        }
        sqlite3_finalize(st);
        sqlite3_close(db);
    }
    return ok ? 0 : -1;
}

/* A pending job; its strings are literals, so never ts_job_row_fini it
 * unless the store replaced them (an idempotent insert that existed). */
static inline ts_job_row store_fixture_job(const char *tenant, const char *owner, const char *key)
{
    ts_job_row r;
    memset(&r, 0, sizeof r);
    snprintf(r.tenant, sizeof r.tenant, "%s", tenant);
    snprintf(r.name, sizeof r.name, "train");
    snprintf(r.owner, sizeof r.owner, "%s", owner);
    snprintf(r.idem_key, sizeof r.idem_key, "%s", key);
    r.state = TS_JOB_PENDING;
    r.gpus = 4;
    r.submit_s = 1764400000.125;
    r.spec_json = (char *)"{\"name\":\"train\",\"gpus\":4}";
    return r;
}

#endif
