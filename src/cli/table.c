/*
 * table.c - the aligned tables of the default output, and key/value lists
 * (a two-column table without a header). Column widths come from the
 * content, counted in UTF-8 characters rather than bytes so that a name
 * with an accent does not shift its row. A cell may hold several lines (a
 * job placed on several nodes); they continue under their column. Cells
 * are copied in, so callers may pass stack buffers.
 */
#include "cli/cli.h"

#include <stdlib.h>
#include <string.h>

#define COLUMN_GAP 2
#define ROWS_FIRST 16

void cli_table_init(struct cli_table *t, int ncols, const char *const *headers, unsigned right)
{
    *t = (struct cli_table){.ncols = ncols, .headers = headers, .right = right};
}

void cli_table_row(struct cli_table *t, const char *const *cells)
{
    if (t->oom)
        return;
    if (t->nrows == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : ROWS_FIRST;
        char **p = realloc(t->cells, cap * (size_t)t->ncols * sizeof *p);
        if (!p) {
            t->oom = true;
            return;
        }
        t->cells = p;
        t->cap = cap;
    }
    char **row = t->cells + t->nrows * (size_t)t->ncols;
    for (int c = 0; c < t->ncols; c++) {
        row[c] = strdup(cells[c] ? cells[c] : "-");
        if (!row[c]) {
            while (c-- > 0)
                free(row[c]);
            t->oom = true;
            return;
        }
    }
    t->nrows++;
}

/* Characters (not bytes) in s[0..n). */
static size_t width_of(const char *s, size_t n)
{
    size_t w = 0;
    for (size_t i = 0; i < n; i++)
        if (((unsigned char)s[i] & 0xc0) != 0x80)
            w++;
    return w;
}

/* The line-th line of cell s (empty past its end): start and length. */
static const char *line_of(const char *s, int line, size_t *len)
{
    for (int i = 0; i < line && s; i++) {
        s = strchr(s, '\n');
        if (s)
            s++;
    }
    if (!s) {
        *len = 0;
        return "";
    }
    const char *nl = strchr(s, '\n');
    *len = nl ? (size_t)(nl - s) : strlen(s);
    return s;
}

static int lines_in(const char *s)
{
    int n = 1;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

static void print_row(const struct cli_table *t, const char *const *row, const size_t *width,
                      FILE *f)
{
    int lines = 1;
    for (int c = 0; c < t->ncols; c++) {
        int n = lines_in(row[c]);
        if (n > lines)
            lines = n;
    }
    for (int l = 0; l < lines; l++) {
        /* blanks are written only before something that follows them */
        size_t pending = 0;
        for (int c = 0; c < t->ncols; c++) {
            size_t len;
            const char *s = line_of(row[c], l, &len);
            size_t w = width_of(s, len);
            size_t pad = width[c] > w ? width[c] - w : 0;
            bool right = (t->right >> c) & 1u;
            if (right)
                pending += pad;
            if (len > 0) {
                fprintf(f, "%*s%.*s", (int)pending, "", (int)len, s);
                pending = 0;
            }
            if (!right)
                pending += pad;
            pending += COLUMN_GAP;
        }
        fputc('\n', f);
    }
}

void cli_table_print(const struct cli_table *t, FILE *f)
{
    size_t *width = calloc((size_t)t->ncols, sizeof *width);
    if (!width)
        return;
    for (size_t r = 0; r <= t->nrows; r++) {
        const char *const *row = r < t->nrows ? (const char *const *)t->cells + r * (size_t)t->ncols
                                              : t->headers;
        for (int c = 0; row && c < t->ncols; c++) {
            for (int l = 0; l < lines_in(row[c]); l++) {
                size_t len;
                const char *s = line_of(row[c], l, &len);
                size_t w = width_of(s, len);
                if (w > width[c])
                    width[c] = w;
            }
        }
    }
    if (t->headers)
        print_row(t, t->headers, width, f);
    for (size_t r = 0; r < t->nrows; r++)
        print_row(t, (const char *const *)t->cells + r * (size_t)t->ncols, width, f);
    free(width);
}

void cli_table_free(struct cli_table *t)
{
    for (size_t i = 0; i < t->nrows * (size_t)t->ncols; i++)
        free(t->cells[i]);
    free(t->cells);
    t->cells = NULL;
    t->nrows = t->cap = 0;
}

void cli_kv(struct cli_table *t, const char *key, const char *value)
{
    char k[CLI_CELL_MAX];
    snprintf(k, sizeof k, "%s:", key);
    const char *row[2] = {k, value};
    cli_table_row(t, row);
}

int cli_table_finish(struct cli_table *t, const char *what)
{
    int rc = CLI_EXIT_OK;
    if (t->oom) {
        cli_errorf("out of memory");
        rc = CLI_EXIT_LOCAL;
    } else if (t->nrows == 0 && t->headers) {
        fprintf(stderr, "no %s\n", what);
    } else {
        cli_table_print(t, stdout);
    }
    cli_table_free(t);
    return rc;
}

void cli_table_total(struct cli_table *t, double total, int decimals)
{
    if (t->nrows <= 1 || t->ncols > CLI_LIST_COLS_MAX)
        return;
    char c[32];
    snprintf(c, sizeof c, "%.*f", decimals, total);
    const char *row[CLI_LIST_COLS_MAX];
    row[0] = "total";
    for (int i = 1; i < t->ncols - 1; i++)
        row[i] = "";
    row[t->ncols - 1] = c;
    cli_table_row(t, row);
}

const char *cli_hours_cell(const json_t *row, double *total, int decimals, char *cell,
                           size_t n)
{
    const json_t *h = json_object_get(row, "gpu_hours");
    double hours = json_is_number(h) ? json_number_value(h) : 0;
    if (total)
        *total += hours;
    snprintf(cell, n, "%.*f", decimals, hours);
    return cell;
}

const char *cli_hms_cell(long long s, char *cell, size_t n)
{
    snprintf(cell, n, "%lld:%02lld:%02lld", s / 3600, s / 60 % 60, s % 60);
    return cell;
}

void cli_list_rows(const struct cli_ctx *ctx, const struct cli_listing *l, struct cli_table *t,
                   const json_t *list)
{
    size_t i;
    const json_t *item;
    json_array_foreach(list, i, item) {
        char c[CLI_LIST_COLS_MAX][CLI_CELL_MAX];
        const char *row[CLI_LIST_COLS_MAX];
        l->row(ctx, item, c, row);
        cli_table_row(t, row);
    }
}

int cli_list_print(const struct cli_ctx *ctx, const struct cli_listing *l, json_t *root,
                   const json_t *list)
{
    struct cli_table t;
    cli_table_init(&t, l->ncols, l->head, l->right);
    cli_list_rows(ctx, l, &t, list);
    json_decref(root);
    return cli_table_finish(&t, l->what);
}
