/*
 * controllers.c - the agent's list of controllers and the choice of the one
 * to talk to (controllers.h).
 *
 * The rule that keeps the choice from circling: a standby's hint is
 * followed at most one hop (the hinted controller's own hint is ignored
 * until it has answered once), and the list position moves on only by one
 * entry per failure of the entry or of the hint it gave. So a stale hint
 * that names a dead controller costs one failed try, and every entry of the
 * list is tried within 2 * n failures whatever the standbys say.
 */
#include "agent/controllers.h"

#include <stdio.h>
#include <string.h>

bool agent_ctls_url_ok(const char *s)
{
    if (!s)
        return false;
    size_t len = strlen(s);
    if (len == 0 || len >= TS_CTL_URL_MAX)
        return false;
    size_t skip = strncmp(s, "http://", 7) == 0 ? 7 : strncmp(s, "https://", 8) == 0 ? 8 : 0;
    if (!skip || !s[skip] || s[skip] == '/')
        return false;
    for (const char *p = s; *p; p++)
        if ((unsigned char)*p <= ' ' || *p == 0x7f || *p == ',')
            return false;
    return true;
}

/* Why s, a NUL-terminated entry of len bytes, is not a usable URL. */
static const char *why_bad(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)s[i] <= ' ' || s[i] == 0x7f)
            return "has blanks or control characters";
    size_t skip = strncmp(s, "http://", 7) == 0 ? 7 : strncmp(s, "https://", 8) == 0 ? 8 : 0;
    if (!skip)
        return "must start with http:// or https://";
    if (len == skip || s[skip] == '/')
        return "has no host";
    return NULL;
}

int agent_ctls_parse(const char *list, ts_ctls *c, ts_err *err)
{
    memset(c, 0, sizeof *c);
    const char *p = list ? list : "";
    for (int k = 1;; k++) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == 0)
            return ts_err_set(err, TS_EINVAL, "URL %d is empty (a list is URL[,URL...])", k);
        if (len >= TS_CTL_URL_MAX)
            return ts_err_set(err, TS_EINVAL, "URL %d \"%.40s...\": longer than %d bytes", k, p,
                              TS_CTL_URL_MAX - 1);
        if (c->n == TS_CTLS_MAX)
            return ts_err_set(err, TS_EINVAL, "more than %d URLs", TS_CTLS_MAX);
        char *u = c->url[c->n];
        memcpy(u, p, len);
        u[len] = '\0';
        while (len > 8 && u[len - 1] == '/')
            u[--len] = '\0'; /* http://h:1/ and http://h:1 are one controller */
        const char *why = why_bad(u, len);
        if (why)
            return ts_err_set(err, TS_EINVAL, "URL %d \"%.80s\": %s", k, u, why);
        for (int i = 0; i < c->n; i++)
            if (strcmp(c->url[i], u) == 0)
                return ts_err_set(err, TS_EINVAL, "URL %d \"%s\": a repeat of URL %d", k, u,
                                  i + 1);
        c->n++;
        if (!end)
            break;
        p = end + 1;
    }
    return 0;
}

const char *agent_ctls_url(const ts_ctls *c)
{
    return c->hint[0] ? c->hint : c->url[c->pos];
}

bool agent_ctls_fail(ts_ctls *c, const char *leader)
{
    char was[TS_CTL_URL_MAX];
    snprintf(was, sizeof was, "%s", agent_ctls_url(c));
    char named[TS_CTL_URL_MAX] = "";
    if (agent_ctls_url_ok(leader)) {
        snprintf(named, sizeof named, "%s", leader);
        size_t len = strlen(named);
        while (len > 8 && named[len - 1] == '/')
            named[--len] = '\0';
    }
    if (named[0] && !c->hopped && strcmp(named, was) != 0) {
        /* the leader, by its standby's word: once */
        if (strcmp(named, c->url[c->pos]) == 0)
            c->hint[0] = '\0'; /* back to the entry itself */
        else
            snprintf(c->hint, sizeof c->hint, "%s", named);
        c->hopped = c->hint[0] != '\0';
    } else {
        c->hint[0] = '\0';
        c->hopped = false;
        c->pos = (c->pos + 1) % c->n;
    }
    return strcmp(was, agent_ctls_url(c)) != 0;
}

void agent_ctls_ok(ts_ctls *c)
{
    c->hopped = false;
    c->pauses = 0;
}

double agent_ctls_pause_s(ts_ctls *c)
{
    bool quick = c->n > 1 && c->pauses < TS_CTLS_QUICK_PAUSES;
    if (c->pauses < TS_CTLS_QUICK_PAUSES)
        c->pauses++;
    return quick ? TS_CTLS_PAUSE_QUICK_S : TS_CTLS_PAUSE_S;
}
