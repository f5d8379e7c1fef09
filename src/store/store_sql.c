/*
 * store_sql.c - a connection of either backend with its prepared
 * statements, and the helpers the row operations share.
 *
 * A store_conn keeps each statement it has prepared in a slot, so every
 * statement is expanded and prepared once per connection, on first use
 * (the backend re-prepares by itself when a session was reset under it).
 * The rolled-up accounting's statements run through one function driven by
 * their shapes (TS_RU_SHAPES), whichever the dialect.
 */
#include "store/store_internal.h"

#include <stdlib.h>
#include <string.h>

_Static_assert(TS_RU_STMTS <= ST_RU_MAX, "a slot for every rolled-up statement");

int store_connect(const struct store_backend *be, const char *target, bool writer,
                  store_conn **out, ts_err *err)
{
    *out = NULL;
    store_conn *c = calloc(1, sizeof *c);
    int rc = c ? be->connect(target, writer, &c->db, err)
               : ts_err_set(err, TS_ENOMEM, "store: out of memory");
    if (rc == 0) {
        c->be = be;
        *out = c;
    } else {
        free(c);
    }
    return rc;
}

void store_disconnect(store_conn *c)
{
    if (!c)
        return;
    for (int i = 0; i < ST_SLOTS; i++)
        if (c->st[i])
            c->be->finalize(c->st[i]);
    c->be->disconnect(c->db);
    free(c);
}

bool store_healthy(const store_conn *c) { return c && c->be->healthy(c->db); }

int store_exec(store_conn *c, const char *sql, ts_err *err)
{
    char *x = store_expand(c->be->dialect, sql);
    if (!x)
        return ts_err_set(err, TS_ENOMEM, "store: out of memory");
    int rc = c->be->exec(c->db, x, err);
    free(x);
    return rc;
}

int store_begin(store_conn *c, bool exclusive, ts_err *err)
{
    return c->be->begin(c->db, exclusive, err);
}

int store_commit(store_conn *c, ts_err *err) { return c->be->commit(c->db, err); }

void store_rollback(store_conn *c) { c->be->rollback(c->db); }

int store_stmt(store_conn *c, int slot, const char *sql, void **st, ts_err *err)
{
    if (!c->st[slot]) {
        char *x = store_expand(c->be->dialect, sql);
        if (!x)
            return ts_err_set(err, TS_ENOMEM, "store: out of memory");
        int rc = c->be->prepare(c->db, slot, x, &c->st[slot], err);
        free(x);
        if (rc)
            return rc;
    }
    *st = c->st[slot];
    c->be->reset(*st);
    return 0;
}

int store_finish(store_conn *c, void *st, const char *what, ts_err *err)
{
    int rc;
    while ((rc = c->be->step(st, what, err)) > 0)
        ;
    c->be->reset(st);
    return rc;
}

void store_col_field(store_conn *c, void *st, int i, char *dst, size_t cap)
{
    size_t len = 0;
    const char *t = c->be->col_text(st, i, &len);
    store_copy_field(dst, cap, t, t ? len : 0);
}

bool store_col_dup(store_conn *c, void *st, int i, char **out)
{
    size_t len = 0;
    const char *t = c->be->col_text(st, i, &len);
    *out = t ? strndup(t, len) : NULL;
    return !t || *out;
}

/* Binds the arguments a rolled-up statement's shape names, in order. */
static void ru_bind(store_conn *c, void *st, const char *shape, const ts_ru_args *a)
{
    const struct store_backend *be = c->be;
    for (int i = 0; shape[i]; i++) {
        char k = shape[i];
        if (k == 'j')
            be->bind_i64(st, i + 1, a->job);
        else if (k == 't')
            be->bind_text(st, i + 1, a->tenant);
        else if (k == 'i')
            be->bind_i64(st, i + 1, a->tier);
        else if (k == 's')
            be->bind_i64(st, i + 1, a->span);
        else if (k == 'm')
            be->bind_text(st, i + 1, a->model);
        else
            be->bind_f64(st, i + 1, a->d[k - '0']);
    }
}

static void ru_read(store_conn *c, void *st, const char *cols, ts_ru_row *row)
{
    memset(row, 0, sizeof *row);
    for (int i = 0, nt = 0, nv = 0; cols[i]; i++) {
        if (cols[i] == 't')
            store_col_field(c, st, i, row->text[nt++], sizeof row->text[0]);
        else if (cols[i] == 'i')
            row->i = c->be->col_i64(st, i);
        else
            row->v[nv++] = c->be->col_f64(st, i);
    }
}

int store_rollup(store_conn *c, int stmt, const ts_ru_args *a, ts_ru_row_fn fn, void *ctx,
                 ts_err *err)
{
    void *st = NULL;
    int rc = store_stmt(c, ST_RU_SLOT(stmt), store_ru_sql(stmt), &st, err);
    if (rc)
        return rc;
    ru_bind(c, st, TS_RU_SHAPES[stmt][0], a);
    ts_ru_row row;
    while ((rc = c->be->step(st, "rolled-up usage", err)) > 0) {
        if (!fn)
            continue;
        ru_read(c, st, TS_RU_SHAPES[stmt][1], &row);
        if ((rc = fn(ctx, &row, err)))
            break;
    }
    c->be->reset(st);
    return rc;
}
