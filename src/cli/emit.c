/*
 * emit.c - `--output json` and `--output yaml`: the server's answer written
 * back for scripts, as pretty JSON or as block-style YAML.
 *
 * Our own writer rather than json_dumps for two reasons: numbers are written
 * in their shortest form that reads back to the same double (json_dumps
 * writes 0.1 as 0.10000000000000001), and the YAML writer shares the
 * string quoting. YAML strings stay plain only when no YAML 1.1 or 1.2
 * reader could take them for anything else (a number, a date, a bool such
 * as "no" or "on", null, an indicator); everything else is double-quoted
 * with JSON escapes, which are valid YAML escapes too. Characters YAML does
 * not allow raw or reads as line breaks (C0/C1 controls, DEL, U+2028,
 * U+2029, a BOM, U+FFFE/U+FFFF) are escaped in both forms. Key order is the server's (jansson keeps insertion order).
 */
#include "cli/cli.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define REAL_TEXT_MAX 64

static void put_indent(FILE *f, int n)
{
    for (int i = 0; i < n; i++)
        fputc(' ', f);
}

/* The shortest decimal that reads back as d, always with a '.' or exponent
 * so that JSON and YAML readers keep it a float. */
static void fmt_real(double d, char *buf, size_t size)
{
    if (!isfinite(d)) {
        snprintf(buf, size, "null");
        return;
    }
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, size, "%.*g", prec, d);
        if (strtod(buf, NULL) == d)
            break;
    }
    char *e = strchr(buf, 'e');
    if (strchr(buf, '.'))
        return;
    char tail[REAL_TEXT_MAX] = "";
    if (e) {
        snprintf(tail, sizeof tail, "%s", e);
        *e = '\0';
    }
    size_t n = strlen(buf);
    snprintf(buf + n, size - n, ".0%s", tail);
}

static void put_quoted(FILE *f, const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    fputc('"', f);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = u[i];
        switch (c) {
        case '"': fputs("\\\"", f); continue;
        case '\\': fputs("\\\\", f); continue;
        case '\n': fputs("\\n", f); continue;
        case '\t': fputs("\\t", f); continue;
        case '\r': fputs("\\r", f); continue;
        case '\b': fputs("\\b", f); continue;
        case '\f': fputs("\\f", f); continue;
        default: break;
        }
        if (c < 0x20 || c == 0x7f) {
            fprintf(f, "\\u%04x", c);
        } else if (c == 0xc2 && i + 1 < n && u[i + 1] >= 0x80 && u[i + 1] <= 0x9f) {
            fprintf(f, "\\u%04x", u[i + 1]); /* a C1 control, U+0080..U+009F */
            i++;
        } else if (c == 0xef && i + 2 < n && u[i + 1] == 0xbf && u[i + 2] >= 0xbe) {
            fprintf(f, "\\u%04x", 0xffc0u | (u[i + 2] & 0x3fu)); /* U+FFFE, U+FFFF */
            i += 2;
        } else if (c == 0xe2 && i + 2 < n && u[i + 1] == 0x80 &&
                   (u[i + 2] == 0xa8 || u[i + 2] == 0xa9)) {
            fprintf(f, "\\u%04x", 0x2000u | (u[i + 2] & 0x3fu)); /* line/paragraph separator */
            i += 2;
        } else if (c == 0xef && i + 2 < n && u[i + 1] == 0xbb && u[i + 2] == 0xbf) {
            fputs("\\ufeff", f); /* a byte-order mark inside a value */
            i += 2;
        } else {
            fputc(c, f);
        }
    }
    fputc('"', f);
}

/* Words YAML 1.1 readers turn into bools or null. */
static bool reserved_word(const char *s)
{
    static const char *const words[] = {"y", "n", "yes", "no", "true", "false",
                                        "on", "off", "null"};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        if (strcasecmp(s, words[i]) == 0)
            return true;
    return false;
}

static bool yaml_plain_ok(const char *s, size_t n)
{
    if (n == 0 || strlen(s) != n || s[n - 1] == ' ' || reserved_word(s))
        return false;
    char c0 = s[0];
    if (!((c0 >= 'a' && c0 <= 'z') || (c0 >= 'A' && c0 <= 'Z') || c0 == '_' || c0 == '/'))
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  strchr(" _./@()+=,-", c) != NULL;
        if (!ok)
            return false;
    }
    return true;
}

static void put_string(FILE *f, const char *s, size_t n, bool yaml)
{
    if (yaml && yaml_plain_ok(s, n))
        fputs(s, f);
    else
        put_quoted(f, s, n);
}

/* A scalar as JSON or YAML text (true for a scalar; false for a container). */
static bool put_scalar(FILE *f, const json_t *v, bool yaml)
{
    char buf[REAL_TEXT_MAX];
    switch (json_typeof(v)) {
    case JSON_STRING:
        put_string(f, json_string_value(v), json_string_length(v), yaml);
        return true;
    case JSON_INTEGER:
        fprintf(f, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        return true;
    case JSON_REAL:
        fmt_real(json_real_value(v), buf, sizeof buf);
        fputs(buf, f);
        return true;
    case JSON_TRUE: fputs("true", f); return true;
    case JSON_FALSE: fputs("false", f); return true;
    case JSON_NULL: fputs("null", f); return true;
    default: return false;
    }
}

static void json_value(FILE *f, const json_t *v, int indent)
{
    if (put_scalar(f, v, false))
        return;
    bool obj = json_is_object(v);
    size_t n = obj ? json_object_size(v) : json_array_size(v);
    if (n == 0) {
        fputs(obj ? "{}" : "[]", f);
        return;
    }
    fputs(obj ? "{\n" : "[\n", f);
    size_t i = 0;
    if (obj) {
        const char *key;
        json_t *val;
        json_object_foreach((json_t *)v, key, val) {
            put_indent(f, indent + 2);
            put_quoted(f, key, strlen(key));
            fputs(": ", f);
            json_value(f, val, indent + 2);
            fputs(++i < n ? ",\n" : "\n", f);
        }
    } else {
        json_t *val;
        json_array_foreach(v, i, val) {
            put_indent(f, indent + 2);
            json_value(f, val, indent + 2);
            fputs(i + 1 < n ? ",\n" : "\n", f);
        }
    }
    put_indent(f, indent);
    fputc(obj ? '}' : ']', f);
}

void cli_emit_json(FILE *f, const json_t *v)
{
    json_value(f, v, 0);
    fputc('\n', f);
}

static bool is_nonempty_container(const json_t *v)
{
    return (json_is_object(v) && json_object_size(v) > 0) ||
           (json_is_array(v) && json_array_size(v) > 0);
}

/* A scalar or an empty container, on the current line. */
static void yaml_inline(FILE *f, const json_t *v)
{
    if (!put_scalar(f, v, true))
        fputs(json_is_object(v) ? "{}" : "[]", f);
}

/*
 * Writes a non-empty container at indent. first_inline: the first line
 * continues a "- " already written, so it gets no indentation of its own.
 */
static void yaml_block(FILE *f, const json_t *v, int indent, bool first_inline)
{
    bool first = true;
    if (json_is_object(v)) {
        const char *key;
        json_t *val;
        json_object_foreach((json_t *)v, key, val) {
            if (!(first && first_inline))
                put_indent(f, indent);
            first = false;
            put_string(f, key, strlen(key), true);
            if (is_nonempty_container(val)) {
                fputs(":\n", f);
                yaml_block(f, val, indent + 2, false);
            } else {
                fputs(": ", f);
                yaml_inline(f, val);
                fputc('\n', f);
            }
        }
        return;
    }
    size_t i;
    json_t *val;
    json_array_foreach(v, i, val) {
        if (!(first && first_inline))
            put_indent(f, indent);
        first = false;
        fputs("- ", f);
        if (is_nonempty_container(val)) {
            yaml_block(f, val, indent + 2, true);
        } else {
            yaml_inline(f, val);
            fputc('\n', f);
        }
    }
}

void cli_emit_yaml(FILE *f, const json_t *v)
{
    if (is_nonempty_container(v))
        yaml_block(f, v, 0, false);
    else {
        yaml_inline(f, v);
        fputc('\n', f);
    }
}

bool cli_emit(const struct cli_ctx *ctx, const json_t *v)
{
    if (ctx->output == CLI_OUT_JSON)
        cli_emit_json(stdout, v);
    else if (ctx->output == CLI_OUT_YAML)
        cli_emit_yaml(stdout, v);
    return ctx->output != CLI_OUT_TABLE;
}
