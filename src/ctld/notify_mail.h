/*
 * notify_mail.h - the mail of jobs' state changes (notify_mail.c): the
 * message and its delivery through the configured SMTP relay. Used by
 * notify.c's delivery thread only; nothing here locks.
 */
#ifndef TS_CTLD_NOTIFY_MAIL_H
#define TS_CTLD_NOTIFY_MAIL_H

#include <stdbool.h>

#include <curl/curl.h>
#include <jansson.h>

#include "ctld/ctld.h"

/* The message (RFC 5322, CRLF lines) telling rcpts (comma-separated) that
 * job `to` had event ("start", "end", "fail"); malloc'd, NULL when out of
 * memory. */
char *ctld_mail_message(const ctld_config *cfg, const char *rcpts, const char *event,
                        const ts_job_row *to, const json_t *exit_code, double now);

/* One try of handing msg to cfg's relay for rcpts; true once the relay took
 * it. progress (curl's transfer callback) may abort the try. why: curl's
 * error on failure. */
bool ctld_mail_send(CURL *h, const ctld_config *cfg, const char *rcpts, const char *msg,
                    long timeout_s, curl_xferinfo_callback progress, void *pdata, char *why,
                    size_t wsize);

#endif
