/*
 * buf.c - a growable string for URLs and messages, and reading a local file
 * whole. An allocation failure is remembered in the buffer (oom) instead of
 * being checked after every append; the caller looks once before using it.
 */
#include "cli/cli.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define BUF_FIRST_BYTES 64
#define READ_CHUNK_BYTES 65536

static bool reserve(struct cli_buf *b, size_t more)
{
    if (b->oom)
        return false;
    if (b->len + more + 1 <= b->cap)
        return true;
    size_t cap = b->cap ? b->cap : BUF_FIRST_BYTES;
    while (cap < b->len + more + 1)
        cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) {
        b->oom = true;
        return false;
    }
    b->p = p;
    b->cap = cap;
    return true;
}

void cli_buf_add(struct cli_buf *b, const char *s, size_t n)
{
    if (!reserve(b, n))
        return;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

void cli_buf_puts(struct cli_buf *b, const char *s)
{
    cli_buf_add(b, s, strlen(s));
}

void cli_buf_printf(struct cli_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || !reserve(b, (size_t)n))
        return;
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void cli_buf_escape(struct cli_buf *b, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
            c == '-' || c == '.' || c == '_' || c == '~') {
            cli_buf_add(b, (const char *)&c, 1);
        } else {
            char enc[3] = {'%', hex[c >> 4], hex[c & 15]};
            cli_buf_add(b, enc, sizeof enc);
        }
    }
}

void cli_buf_query(struct cli_buf *b, const char *k, const char *v)
{
    if (!v)
        return;
    cli_buf_puts(b, b->p && strchr(b->p, '?') ? "&" : "?");
    cli_buf_puts(b, k);
    cli_buf_puts(b, "=");
    cli_buf_escape(b, v);
}

void cli_buf_query_time(struct cli_buf *b, const char *k, double t)
{
    char v[32];
    snprintf(v, sizeof v, "%.15g", t);
    cli_buf_query(b, k, v);
}

void cli_buf_free(struct cli_buf *b)
{
    free(b->p);
    *b = (struct cli_buf){0};
}

char *cli_read_file(const char *path, size_t max, size_t *len, int *rc)
{
    bool is_stdin = strcmp(path, "-") == 0;
    FILE *f = is_stdin ? stdin : fopen(path, "rb");
    if (!f) {
        cli_errorf("%s: cannot open: %s", path, strerror(errno));
        *rc = CLI_EXIT_USAGE;
        return NULL;
    }
    struct cli_buf b = {0};
    char chunk[READ_CHUNK_BYTES];
    size_t got;
    while ((got = fread(chunk, 1, sizeof chunk, f)) > 0 && !b.oom && b.len <= max)
        cli_buf_add(&b, chunk, got);
    bool bad = ferror(f);
    if (!is_stdin)
        fclose(f);
    if (bad || b.oom || b.len > max) {
        if (bad)
            cli_errorf("%s: read error", path);
        else if (b.oom)
            cli_errorf("%s: out of memory", path);
        else
            cli_errorf("%s: larger than %zu bytes", path, max);
        *rc = b.oom ? CLI_EXIT_LOCAL : CLI_EXIT_USAGE;
        cli_buf_free(&b);
        return NULL;
    }
    if (!b.p)
        cli_buf_add(&b, "", 0);
    if (b.oom) {
        cli_errorf("%s: out of memory", path);
        *rc = CLI_EXIT_LOCAL;
        return NULL;
    }
    *len = b.len;
    return b.p;
}

const char *cli_content_type(const char *path, const char *body, size_t len)
{
    const char *dot = strrchr(path, '.');
    if (dot && strchr(dot, '/') == NULL) {
        if (strcmp(dot, ".json") == 0)
            return "application/json";
        if (strcmp(dot, ".yaml") == 0 || strcmp(dot, ".yml") == 0)
            return "application/yaml";
    }
    for (size_t i = 0; i < len; i++) {
        char c = body[i];
        if (c == ' ' || c == '\t' || c == '\r' || c == '\n')
            continue;
        return c == '{' || c == '[' ? "application/json" : "application/yaml";
    }
    return "application/yaml";
}
