/*
 * spec_notify.c - a job spec's `notify` (docs/job-spec.md): a webhook URL,
 * mail addresses or both, and the events that fire them. The addresses and
 * the URL are checked strictly here because they end up in an SMTP command
 * and an HTTP request line that the controller writes.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "api/spec_walk.h"
#include "tessera/spec.h"

/* Whether s is one mail address as tessera sends to it: local@domain,
 * printable ASCII without blanks, quotes, angle brackets or commas (an SMTP
 * command must not be able to carry anything else). */
static bool mail_address_ok(const char *s)
{
    size_t len = strlen(s);
    const char *at = strchr(s, '@');
    if (len < 3 || len > TS_NOTIFY_MAIL_ADDR_MAX || !at || at == s || !at[1] || strchr(at + 1, '@'))
        return false;
    for (const char *p = s; *p; p++)
        if (*p <= ' ' || *p >= 0x7f || strchr("<>\",;:()[]\\", *p))
            return false;
    return true;
}

/* A webhook's URL: http(s), printable, at most TS_NOTIFY_URL_MAX. */
static bool url_ok(const char *url)
{
    size_t len = strlen(url);
    bool http = strncmp(url, "http://", 7) == 0 || strncmp(url, "https://", 8) == 0;
    bool clean = true;
    for (size_t i = 0; i < len; i++)
        clean &= url[i] > ' ' && url[i] < 0x7f;
    return http && clean && len <= TS_NOTIFY_URL_MAX && len > 8;
}

/* notify.mail: one address or a list of them, kept comma-joined. */
static void walk_mail(spec_parser *P, const yaml_node_t *n)
{
    char joined[TS_NOTIFY_MAIL_MAX * (TS_NOTIFY_MAIL_ADDR_MAX + 1)] = "";
    int count = 0;
    bool list = n->type == YAML_SEQUENCE_NODE;
    yaml_node_item_t *it = list ? n->data.sequence.items.start : NULL;
    for (;;) {
        const yaml_node_t *e = n;
        if (list) {
            if (it >= n->data.sequence.items.top)
                break;
            bool reused;
            e = spec_child(P, *it++, "notify.mail", &reused);
            if (!e)
                return;
        }
        const char *s = spec_text(P, e, "notify.mail");
        if (!s)
            return;
        if (!mail_address_ok(s)) {
            spec_fail_got(P, e, "notify.mail", "a mail address user@domain (printable, no "
                          "blanks, quotes or brackets, at most 254 characters)");
            return;
        }
        if (++count > TS_NOTIFY_MAIL_MAX) {
            spec_fail(P, "notify.mail", "at most %d addresses", TS_NOTIFY_MAIL_MAX);
            return;
        }
        snprintf(joined + strlen(joined), sizeof joined - strlen(joined), "%s%s",
                 count > 1 ? "," : "", s);
        if (!list)
            break;
    }
    if (count == 0) {
        spec_fail(P, "notify.mail", "must name at least one address");
        return;
    }
    P->spec->notify_mail = spec_dup(P, joined);
}

/* notify: {url: http(s)://..., mail: [addresses], on: [start, end, fail]};
 * url or mail or both; on defaults to [end]. Slurm's --mail-type names are
 * taken too: BEGIN, END, FAIL, ALL. */
void spec_walk_notify(spec_parser *P, const yaml_node_t *n)
{
    static const char *const KEYS[] = {"url", "on", "mail"};
    yaml_node_t *v[3];
    unsigned given;
    if (!spec_map_fields(P, n, "notify", KEYS, 3, v, &given))
        return;
    if (!v[0] && !v[2]) {
        spec_fail(P, "notify.url", "required (or notify.mail)");
        return;
    }
    if (v[2])
        walk_mail(P, v[2]);
    /* a bad url and a bad on are both reported: every error at once */
    const char *url = v[0] ? spec_text(P, v[0], "notify.url") : NULL;
    bool bad_url = v[0] && !url;
    if (url && !url_ok(url)) {
        spec_fail_got(P, v[0], "notify.url", "an http:// or https:// URL of at most 1024 "
                      "printable characters");
        bad_url = true;
    }
    unsigned on = TS_NOTIFY_END;
    if (v[1]) {
        on = 0;
        if (v[1]->type != YAML_SEQUENCE_NODE) {
            spec_fail_got(P, v[1], "notify.on", "a list of start, end, fail");
            return;
        }
        for (yaml_node_item_t *it = v[1]->data.sequence.items.start;
             it < v[1]->data.sequence.items.top; it++) {
            bool reused;
            yaml_node_t *e = spec_child(P, *it, "notify.on", &reused);
            const char *w = e ? spec_text(P, e, "notify.on") : NULL;
            if (!w)
                return;
            if (strcmp(w, "start") == 0 || strcmp(w, "BEGIN") == 0)
                on |= TS_NOTIFY_START;
            else if (strcmp(w, "end") == 0 || strcmp(w, "END") == 0)
                on |= TS_NOTIFY_END;
            else if (strcmp(w, "fail") == 0 || strcmp(w, "FAIL") == 0)
                on |= TS_NOTIFY_FAIL;
            else if (strcmp(w, "ALL") == 0)
                on |= TS_NOTIFY_START | TS_NOTIFY_END | TS_NOTIFY_FAIL;
            else {
                spec_fail_got(P, e, "notify.on", "start, end or fail (or Slurm's BEGIN, END, "
                              "FAIL, ALL)");
                return;
            }
        }
        if (!on) {
            spec_fail(P, "notify.on", "must name at least one of start, end, fail");
            return;
        }
    }
    if (bad_url)
        return;
    P->spec->notify_url = url ? spec_dup(P, url) : NULL;
    P->spec->notify_on = on;
}
