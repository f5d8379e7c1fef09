/*
 * args.c - the CLI's option parser. getopt_long is a GNU extension (the
 * build is strict C11 + POSIX), and the CLI wants one thing getopt does not
 * give: the global flags (--server, --output, ...) accepted anywhere on the
 * line, before or after the command, so `tessera jobs -o json` and
 * `tessera -o json jobs` mean the same. Forms: --name VALUE, --name=VALUE,
 * -x VALUE, -xVALUE, flags alone; "--" ends the options. Every mistake is a
 * usage error (exit 2) that names the option and repeats the synopsis.
 */
#include "cli/cli.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define TIMEOUT_MAX_S 3600

/* One line on stderr: the program's name, what (an error: none), the message. */
static void cli_vsay(const char *what, const char *fmt, va_list ap)
{
    fprintf(stderr, CLI_PROG ": %s", what);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

void cli_errorf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    cli_vsay("", fmt, ap);
    va_end(ap);
}

void cli_warn(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    cli_vsay("warning: ", fmt, ap);
    va_end(ap);
}

int cli_usage_error(const struct cli_cmd *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, CLI_PROG "%s%s: ", cmd ? " " : "", cmd ? cmd->name : "");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    if (cmd) {
        fprintf(stderr, "usage: " CLI_PROG " %s\n", cmd->usage);
        fprintf(stderr, "Run '" CLI_PROG " %s --help' for details.\n", cmd->name);
    } else {
        fputs("Run '" CLI_PROG " --help' for the commands.\n", stderr);
    }
    return CLI_EXIT_USAGE;
}

bool cli_parse_long(const char *s, long lo, long hi, long *out)
{
    if (!s || !*s || (*s != '-' && (*s < '0' || *s > '9')))
        return false;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

int cli_when_opt(const struct cli_cmd *cmd, const char *opt, const char *v, time_t now,
                 double *out)
{
    if (v && !cli_parse_when(v, now, out))
        return cli_usage_error(cmd, "--%s: not a date or time: '%s'", opt, v);
    return CLI_CONTINUE;
}

int cli_job_id(const struct cli_cmd *cmd, const char *s, long *id)
{
    if (!cli_parse_long(s, 1, LONG_MAX, id))
        return cli_usage_error(cmd, "job id must be a positive integer, got '%s'", s);
    return CLI_CONTINUE;
}

int cli_parse_job(struct cli_ctx *ctx, const struct cli_cmd *cmd, int argc, char **argv,
                  const struct cli_opt *opts, long *id)
{
    const char *arg;
    int rc = cli_parse(ctx, cmd, argc, argv, opts, &arg, 1, 1);
    return rc != CLI_CONTINUE ? rc : cli_job_id(cmd, arg, id);
}

/* The global flags, pointing into ctx->flags. */
static void global_opts(struct cli_ctx *ctx, struct cli_opt g[9])
{
    struct cli_flags *f = &ctx->flags;
    const struct cli_opt all[9] = {
        {"server", 0, &f->server, NULL},   {"token", 0, &f->token, NULL},
        {"config", 0, &f->config, NULL},   {"ca", 0, &f->ca, NULL},
        {"output", 'o', &f->output, NULL}, {"timeout", 0, &f->timeout, NULL},
        {"help", 'h', NULL, &f->help},     {"version", 0, NULL, &f->version},
        {NULL, 0, NULL, NULL},
    };
    memcpy(g, all, sizeof all);
}

static const struct cli_opt *find_long(const struct cli_opt *opts, const char *name, size_t n)
{
    for (; opts && opts->name; opts++)
        if (strlen(opts->name) == n && strncmp(opts->name, name, n) == 0)
            return opts;
    return NULL;
}

static const struct cli_opt *find_short(const struct cli_opt *opts, char c)
{
    for (; opts && opts->name; opts++)
        if (opts->short_name && opts->short_name == c)
            return opts;
    return NULL;
}

/*
 * Handles the option at argv[*i] (which starts with '-' and is not "-" or
 * "--"). Returns CLI_CONTINUE or CLI_EXIT_USAGE.
 */
static int take_opt(struct cli_ctx *ctx, const struct cli_cmd *cmd, const struct cli_opt *opts,
                    int argc, char **argv, int *i)
{
    struct cli_opt g[9];
    global_opts(ctx, g);
    const char *arg = argv[*i];
    const struct cli_opt *o;
    const char *inline_val = NULL;
    if (arg[1] == '-') {
        const char *name = arg + 2;
        const char *eq = strchr(name, '=');
        size_t n = eq ? (size_t)(eq - name) : strlen(name);
        o = find_long(opts, name, n);
        if (!o)
            o = find_long(g, name, n);
        if (!o)
            return cli_usage_error(cmd, "unknown option --%.*s", (int)n, name);
        if (eq)
            inline_val = eq + 1;
    } else {
        o = find_short(opts, arg[1]);
        if (!o)
            o = find_short(g, arg[1]);
        if (!o)
            return cli_usage_error(cmd, "unknown option -%c", arg[1]);
        if (arg[2])
            inline_val = arg + 2;
    }
    if (o->flag) {
        if (inline_val)
            return cli_usage_error(cmd, "option --%s takes no value", o->name);
        *o->flag = true;
        return CLI_CONTINUE;
    }
    if (!inline_val) {
        if (*i + 1 >= argc)
            return cli_usage_error(cmd, "option --%s needs a value", o->name);
        inline_val = argv[++*i];
    }
    *o->value = inline_val;
    return CLI_CONTINUE;
}

static bool is_option(const char *arg)
{
    return arg[0] == '-' && arg[1] != '\0';
}

int cli_parse_globals(struct cli_ctx *ctx, int argc, char **argv, int *i)
{
    while (*i < argc && is_option(argv[*i]) && strcmp(argv[*i], "--") != 0) {
        if (take_opt(ctx, NULL, NULL, argc, argv, i) != CLI_CONTINUE)
            return CLI_EXIT_USAGE;
        ++*i;
    }
    return CLI_CONTINUE;
}

/* Checks the global values that need no server: --output and --timeout. */
static int check_globals(struct cli_ctx *ctx, const struct cli_cmd *cmd)
{
    const char *o = ctx->flags.output;
    if (!o || strcmp(o, "table") == 0)
        ctx->output = CLI_OUT_TABLE;
    else if (strcmp(o, "json") == 0)
        ctx->output = CLI_OUT_JSON;
    else if (strcmp(o, "yaml") == 0)
        ctx->output = CLI_OUT_YAML;
    else
        return cli_usage_error(cmd, "--output must be table, json or yaml, got '%s'", o);
    if (ctx->flags.timeout &&
        !cli_parse_long(ctx->flags.timeout, 1, TIMEOUT_MAX_S, &ctx->timeout_s))
        return cli_usage_error(cmd, "--timeout must be 1..%d seconds, got '%s'", TIMEOUT_MAX_S,
                               ctx->flags.timeout);
    return CLI_CONTINUE;
}

static void print_help(const struct cli_cmd *cmd)
{
    printf("usage: " CLI_PROG " %s\n\n%s\n", cmd->usage, cmd->help);
    printf("\nGlobal flags (anywhere on the line): --server URL, --token T, --config PATH,\n"
           "--ca FILE, --output table|json|yaml (-o), --timeout S. See '" CLI_PROG
           " --help'.\n");
}

int cli_parse(struct cli_ctx *ctx, const struct cli_cmd *cmd, int argc, char **argv,
              const struct cli_opt *opts, const char **pos, int pos_min, int pos_max)
{
    int npos = 0;
    bool only_pos = false;
    const char *extra = NULL; /* the first positional beyond pos_max */
    for (int i = 0; i < argc; i++) {
        const char *arg = argv[i];
        if (!only_pos && strcmp(arg, "--") == 0) {
            only_pos = true;
            continue;
        }
        if (!only_pos && is_option(arg)) {
            if (take_opt(ctx, cmd, opts, argc, argv, &i) != CLI_CONTINUE)
                return CLI_EXIT_USAGE;
            continue;
        }
        if (npos < pos_max)
            pos[npos++] = arg;
        else if (!extra)
            extra = arg;
    }
    if (ctx->flags.help) {
        print_help(cmd);
        return CLI_EXIT_OK;
    }
    if (ctx->flags.version) {
        printf(CLI_PROG " " CLI_VERSION "\n");
        return CLI_EXIT_OK;
    }
    if (extra)
        return cli_usage_error(cmd, "unexpected argument '%s'", extra);
    if (npos < pos_min)
        return cli_usage_error(cmd, "missing argument");
    return check_globals(ctx, cmd);
}

/* --NAME VALUE or --NAME=VALUE at argv[*i] into *slot; *taken says whether it was --NAME. */
static int cli_take_value(const struct cli_cmd *cmd, const struct cli_word *w, int argc,
                          char **argv, int *i, bool *taken)
{
    const char *a = argv[*i];
    size_t n = strlen(w->name);
    *taken = false;
    if (strncmp(a, "--", 2) != 0 || strncmp(a + 2, w->name, n) != 0)
        return CLI_CONTINUE;
    if (a[2 + n] == '=') {
        *w->slot = a + 3 + n;
        *taken = true;
    } else if (a[2 + n] == '\0') {
        if (*i + 1 >= argc)
            return cli_usage_error(cmd, "option --%s needs a value", w->name);
        *w->slot = argv[++*i];
        *taken = true;
    }
    return CLI_CONTINUE;
}

int cli_take_word(struct cli_ctx *ctx, const struct cli_cmd *cmd, const struct cli_word *own,
                  size_t nown, int argc, char **argv, int *i, bool *taken)
{
    const char *a = argv[*i];
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
        ctx->flags.help = true;
        *taken = true;
        return CLI_CONTINUE;
    }
    struct cli_flags *f = &ctx->flags;
    const struct cli_word globals[] = {{"server", &f->server}, {"token", &f->token},
                                       {"config", &f->config}, {"ca", &f->ca},
                                       {"timeout", &f->timeout}};
    *taken = false;
    for (size_t k = 0; k < nown + sizeof globals / sizeof globals[0] && !*taken; k++) {
        const struct cli_word *w = k < nown ? &own[k] : &globals[k - nown];
        if (cli_take_value(cmd, w, argc, argv, i, taken) != CLI_CONTINUE)
            return CLI_EXIT_USAGE;
    }
    return CLI_CONTINUE;
}
