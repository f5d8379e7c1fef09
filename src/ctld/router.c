/*
 * router.c - how a request finds its handler: the path and method are looked
 * up in the one route table (router.h, rows in routes.c), the caller's role
 * is checked against the row's roles, the path's parameters are parsed
 * strictly, and the row's handler runs. A path the table does not know is a
 * 404; a known path with another method is a 405 whose Allow header lists
 * the methods the path has (HEAD wherever GET: http.c answers it as GET
 * without the body).
 *
 * Matching is by segments: a literal segment must be equal, a {parameter}
 * takes any non-empty segment. Where a literal and a parameter both match
 * (/v1/secrets/events, /v1/secrets/{name}), the pattern with more literal
 * segments is the path, as OpenAPI matches them; its methods are the Allow.
 */
#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "ctld/router.h"
#include "ctld/http.h"

#define PATH_SEGMENTS_MAX 8
#define NAME_PARAM_MAX_BYTES 255
#define CTLD_ROUTES_MAX 64

typedef struct segs {
    const char *s[PATH_SEGMENTS_MAX];
    size_t len[PATH_SEGMENTS_MAX];
    int n;
} segs;

/* "/v1/jobs/2" -> "v1" "jobs" "2"; false if it does not start with '/' or
 * has too many segments. A trailing or doubled '/' gives an empty segment,
 * which no pattern matches. */
static bool split(const char *p, segs *out)
{
    out->n = 0;
    if (*p != '/')
        return false;
    while (*p == '/') {
        if (out->n == PATH_SEGMENTS_MAX)
            return false;
        const char *b = ++p;
        while (*p && *p != '/')
            p++;
        out->s[out->n] = b;
        out->len[out->n++] = (size_t)(p - b);
    }
    return true;
}

static bool is_param(const char *s, size_t len) { return len > 2 && s[0] == '{' && s[len - 1] == '}'; }

/* The number of literal segments of pattern when path matches it, else -1. */
static int match(const segs *pat, const segs *path)
{
    if (pat->n != path->n)
        return -1;
    int lit = 0;
    for (int i = 0; i < pat->n; i++) {
        if (is_param(pat->s[i], pat->len[i])) {
            if (path->len[i] == 0)
                return -1;
        } else if (pat->len[i] != path->len[i] ||
                   memcmp(pat->s[i], path->s[i], pat->len[i]) != 0) {
            return -1;
        } else {
            lit++;
        }
    }
    return lit;
}

int ctld_route_find(const char *method, const char *path, const ctld_route_def **out,
                    char *allow, size_t allow_size)
{
    size_t n;
    const ctld_route_def *t = ctld_routes(&n);
    segs want;
    *out = NULL;
    if (allow_size)
        allow[0] = '\0';
    if (!split(path, &want))
        return CTLD_ROUTE_NO_PATH;
    /* the path with the most literal segments is the one asked for, as
     * OpenAPI reads paths: /v1/secrets/events is never a secret's name */
    int best = -1;
    int lit[CTLD_ROUTES_MAX];
    assert(n <= CTLD_ROUTES_MAX);
    if (n > CTLD_ROUTES_MAX)
        n = CTLD_ROUTES_MAX;
    for (size_t i = 0; i < n; i++) {
        segs pat;
        split(t[i].pattern, &pat);
        lit[i] = match(&pat, &want);
        if (lit[i] > best)
            best = lit[i];
    }
    for (size_t i = 0; best >= 0 && i < n; i++) {
        if (lit[i] != best)
            continue;
        if (strcmp(t[i].method, method) == 0)
            *out = &t[i];
        if (allow_size && !strstr(allow, t[i].method)) {
            size_t l = strlen(allow);
            snprintf(allow + l, allow_size - l, "%s%s%s", l ? ", " : "", t[i].method,
                     strcmp(t[i].method, "GET") == 0 ? ", HEAD" : "");
        }
    }
    return *out ? CTLD_ROUTE_FOUND : best >= 0 ? CTLD_ROUTE_NO_METHOD : CTLD_ROUTE_NO_PATH;
}

void ctld_route_refuse(ctld_reply *r, int st, const char *method, const char *path,
                       const char *allow)
{
    if (st == CTLD_ROUTE_NO_METHOD) {
        ctld_reply_error(r, 405, "method_not_allowed", "%s %s: this path allows %s", method, path,
                         allow);
        snprintf(r->allow, sizeof r->allow, "%s", allow);
    } else {
        ctld_reply_error(r, 404, "not_found", "%s %s: no such endpoint", method, path);
    }
}

bool ctld_parse_number(const char *s, const char *param, int64_t min, int64_t max,
                       int64_t *out, ctld_reply *r)
{
    int64_t v = 0;
    bool ok = s && *s && !(s[0] == '0' && s[1]);
    for (const char *p = s; ok && *p; p++) {
        int d = *p - '0';
        if (d < 0 || d > 9 || v > (INT64_MAX - d) / 10)
            ok = false;
        else
            v = v * 10 + d;
    }
    if (!ok || v < min || v > max) {
        ctld_reply_error(r, 400, "invalid", "%s: must be a decimal number %lld..%lld (digits "
                         "only, no sign, space or leading zero)", param, (long long)min,
                         (long long)max);
        return false;
    }
    *out = v;
    return true;
}

bool ctld_states_of(const char *s, unsigned *set, ctld_reply *r)
{
    char bad[32];
    *set = 0;
    if (!s || ts_job_states_parse(s, set, bad, sizeof bad) == 0)
        return true;
    ctld_reply_error(r, 400, "invalid", "state: unknown state \"%s\" (one of pending, held, "
                     "running, stopping, completed, failed, cancelled, timeout, or several "
                     "joined by commas)", bad);
    return false;
}

/* Fills rq's id, name and action from the path, by the route's pattern. */
static bool bind(const ctld_route_def *rt, ctld_request *rq, char *name, size_t name_size,
                 ctld_reply *r)
{
    segs pat, path;
    split(rt->pattern, &pat);
    split(rq->url, &path);
    rq->id = 0;
    rq->name = NULL;
    rq->action = "";
    bool after_param = false;
    for (int i = 0; i < pat.n; i++) {
        if (pat.len[i] == 4 && memcmp(pat.s[i], "{id}", 4) == 0) {
            char num[32];
            if (path.len[i] >= sizeof num) {
                ctld_reply_error(r, 400, "invalid", "id: must be a decimal number 1..%lld",
                                 (long long)INT64_MAX);
                return false;
            }
            memcpy(num, path.s[i], path.len[i]);
            num[path.len[i]] = '\0';
            if (!ctld_parse_number(num, "id", 1, INT64_MAX, &rq->id, r))
                return false;
            after_param = true;
        } else if (is_param(pat.s[i], pat.len[i])) {
            if (path.len[i] >= name_size) {
                ctld_reply_error(r, 400, "invalid", "%.*s: at most %zu bytes",
                                 (int)(pat.len[i] - 2), pat.s[i] + 1, name_size - 1);
                return false;
            }
            memcpy(name, path.s[i], path.len[i]);
            name[path.len[i]] = '\0';
            rq->name = name;
            after_param = true;
        } else if (after_param) {
            rq->action = pat.s[i]; /* the pattern's own string, to its end */
        }
    }
    return true;
}

void ctld_route(ctld *c, const ctld_request *rq, ctld_reply *r)
{
    const ctld_route_def *rt;
    char allow[sizeof r->allow];
    int st = ctld_route_find(rq->method, rq->url, &rt, allow, sizeof allow);
    if (st != CTLD_ROUTE_FOUND) {
        ctld_route_refuse(r, st, rq->method, rq->url, allow);
        return;
    }
    int role = rq->who->role;
    if (!(rt->roles & CTLD_ROLE(role)) || !rt->handler) {
        if (role == TS_ROLE_NODE)
            ctld_reply_error(r, 403, "forbidden", "a node credential may use /v1/agent/ only");
        else if (role == TS_ROLE_SCRAPE)
            ctld_reply_error(r, 403, "forbidden", "a scrape token may read /metrics only");
        else if (rt->roles == CTLD_ROLES_NODE)
            ctld_reply_error(r, 403, "forbidden", "only a node credential may use %s", rq->url);
        else
            ctld_reply_error(r, 403, "forbidden", "%s %s: role %s may not call it%s", rq->method,
                             rt->pattern,
                             /* a viewer of no tenant is the cluster's, as tokens name it */
                             role == TS_ROLE_VIEWER && !rq->who->tenant[0]
                                 ? "cluster-viewer"
                                 : ts_role_name(role),
                             rt->roles == CTLD_ROLES_ADMIN ? " (admin only)" : "");
        return;
    }
    ctld_request a = *rq;
    char name[NAME_PARAM_MAX_BYTES + 1];
    if (bind(rt, &a, name, sizeof name, r))
        rt->handler(c, &a, r);
}
