/*
 * notify_mail.c - the mail of jobs' state changes (docs/job-spec.md
 * "notify", docs/tesserad.md "mail"): a short plain-text message per start,
 * end or failure, handed to the SMTP relay the controller's configuration
 * names (mail.relay, mail.from), with STARTTLS required when mail.starttls
 * says so (off by default: a relay on loopback or in the site's network).
 * libcurl speaks SMTP (and does the dot-stuffing); notify.c's delivery
 * thread calls this with its retries and backoff, so a slow or absent relay
 * never holds up the controller. Addresses reach here checked by the spec
 * parser (no blanks, brackets or line breaks: nothing can be smuggled into
 * an SMTP command or a header).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctld/notify_mail.h"

#define MAIL_MESSAGE_MAX_BYTES 4096

char *ctld_mail_message(const ctld_config *cfg, const char *rcpts, const char *event,
                        const ts_job_row *to, const json_t *exit_code, double now)
{
    char date[64], when[64];
    time_t t = (time_t)now;
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S +0000", &tm);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    const char *verb = strcmp(event, "start") == 0 ? "started"
                       : strcmp(event, "fail") == 0 ? "failed"
                                                    : "ended";
    char code[32] = "none";
    if (json_is_integer(exit_code))
        snprintf(code, sizeof code, "%lld", (long long)json_integer_value(exit_code));
    char *msg = malloc(MAIL_MESSAGE_MAX_BYTES);
    if (!msg)
        return NULL;
    /* the names are a job's (printable, checked at submission) */
    snprintf(msg, MAIL_MESSAGE_MAX_BYTES,
             "From: %s\r\n"
             "To: %s\r\n"
             "Subject: tessera job %lld (%s) %s: %s\r\n"
             "Date: %s\r\n"
             "MIME-Version: 1.0\r\n"
             "Content-Type: text/plain; charset=utf-8\r\n"
             "X-Tessera-Job: %lld\r\n"
             "X-Tessera-Event: %s\r\n"
             "\r\n"
             "job:       %lld\r\n"
             "name:      %s\r\n"
             "tenant:    %s\r\n"
             "user:      %s\r\n"
             "event:     %s\r\n"
             "state:     %s\r\n"
             "exit code: %s\r\n"
             "time:      %s\r\n"
             "reason:    %s\r\n",
             cfg->mail_from, rcpts, (long long)to->id, to->name, verb,
             ts_job_state_name(to->state), date, (long long)to->id, event, (long long)to->id,
             to->name, to->tenant, to->owner, event, ts_job_state_name(to->state), code, when,
             to->reason[0] ? to->reason : "-");
    return msg;
}

typedef struct reader {
    const char *p;
    size_t left;
} reader;

static size_t read_msg(char *buf, size_t size, size_t n, void *u)
{
    reader *r = u;
    size_t k = size * n < r->left ? size * n : r->left;
    memcpy(buf, r->p, k);
    r->p += k;
    r->left -= k;
    return k;
}

bool ctld_mail_send(CURL *h, const ctld_config *cfg, const char *rcpts, const char *msg,
                    long timeout_s, curl_xferinfo_callback progress, void *pdata, char *why,
                    size_t wsize)
{
    char url[300], from[300], one[300];
    snprintf(url, sizeof url, "smtp://%s", cfg->mail_relay);
    snprintf(from, sizeof from, "<%s>", cfg->mail_from);
    struct curl_slist *to = NULL;
    for (const char *p = rcpts; *p;) {
        size_t l = strcspn(p, ",");
        snprintf(one, sizeof one, "<%.*s>", (int)(l < 290 ? l : 290), p);
        to = curl_slist_append(to, one);
        p += l + (p[l] == ',');
    }
    reader r = {msg, strlen(msg)};
    curl_easy_reset(h);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "smtp");
    curl_easy_setopt(h, CURLOPT_MAIL_FROM, from);
    curl_easy_setopt(h, CURLOPT_MAIL_RCPT, to);
    curl_easy_setopt(h, CURLOPT_READFUNCTION, read_msg);
    curl_easy_setopt(h, CURLOPT_READDATA, &r);
    curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(h, CURLOPT_USE_SSL, cfg->mail_starttls ? (long)CURLUSESSL_ALL
                                                           : (long)CURLUSESSL_NONE);
    if (cfg->mail_starttls && cfg->mail_ca_file[0])
        curl_easy_setopt(h, CURLOPT_CAINFO, cfg->mail_ca_file);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, timeout_s);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, timeout_s);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, progress);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, pdata);
    CURLcode rc = curl_easy_perform(h);
    curl_slist_free_all(to);
    if (rc != CURLE_OK)
        snprintf(why, wsize, "%s", curl_easy_strerror(rc));
    return rc == CURLE_OK;
}
