/*
 * agent_http.c - the agent's exchanges with the controller: a POST of a JSON
 * body and its JSON answer (agent.c's register and sync), with the sync's
 * long-poll cut short the moment a running task's keeper ends (a pidfd per
 * keeper in the same poll as the request), so a task's end is reported at
 * once rather than when the long-poll returns (docs/agent-protocol.md).
 */
#define _DEFAULT_SOURCE
#include <curl/curl.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agent/agent_internal.h"
#include "io/body.h"
#include "agent/clock.h"

void agent_curl_call(CURL *c, const char *url, struct curl_slist *h, curl_write_callback write,
                     void *data, const char *protocols, const char *ca_file)
{
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, data);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, protocols);
    if (ca_file && ca_file[0])
        curl_easy_setopt(c, CURLOPT_CAINFO, ca_file);
}

/* ---- a long-poll that a task's end cuts short ------------------------------------- */

/* The pidfds of the keepers of tasks still running, opened as needed, in w
 * (at most max); the count. An adopted task's keeper is watched too (a
 * pidfd needs no parent); one that cannot be (its pid gone, a kernel before
 * 5.3) is reported on the next exchange as always, within
 * TS_AGENT_WAIT_BUSY_S. */
static unsigned keeper_fds(ts_agent *a, struct curl_waitfd *w, unsigned max)
{
    unsigned n = 0;
    for (int i = 0; i < a->ntasks && n < max; i++) {
        local_task *lt = &a->tasks[i];
        if (!lt->t || lt->st.phase == TS_TASK_EXITED || lt->keeper_fd_done)
            continue;
        if (!lt->keeper_fd_open) {
            pid_t k = agent_task_info_get(lt->t)->keeper_pid;
            long fd = k > 0 ? syscall(SYS_pidfd_open, k, 0) : -1;
            if (fd < 0) {
                lt->keeper_fd_done = true;
                continue;
            }
            fcntl((int)fd, F_SETFD, FD_CLOEXEC);
            lt->keeper_fd = (int)fd;
            lt->keeper_fd_open = true;
        }
        w[n++] = (struct curl_waitfd){.fd = lt->keeper_fd, .events = CURL_WAIT_POLLIN};
    }
    return n;
}

void agent_keeper_fd_close(local_task *lt)
{
    if (lt->keeper_fd_open)
        close(lt->keeper_fd);
    lt->keeper_fd_open = false;
    lt->keeper_fd_done = true;
}

/* Runs a->h's transfer; with wake set, ends it early (*woken) when a
 * running task's keeper ends, so its end is reported at once rather than
 * when the long-poll returns. */
static CURLcode perform(ts_agent *a, bool wake, bool *woken)
{
    *woken = false;
    if (!wake || !a->multi)
        return curl_easy_perform(a->h);
    if (curl_multi_add_handle(a->multi, a->h) != CURLM_OK)
        return curl_easy_perform(a->h);
    CURLcode rc = CURLE_OK;
    struct curl_waitfd w[TS_AGENT_MAX_TASKS];
    for (;;) {
        int running = 0;
        if (curl_multi_perform(a->multi, &running) != CURLM_OK) {
            rc = CURLE_FAILED_INIT;
            break;
        }
        if (!running) {
            int left;
            CURLMsg *m;
            while ((m = curl_multi_info_read(a->multi, &left)) != NULL)
                if (m->msg == CURLMSG_DONE)
                    rc = m->data.result;
            break;
        }
        unsigned n = keeper_fds(a, w, TS_AGENT_MAX_TASKS);
        if (curl_multi_poll(a->multi, w, n, 200, NULL) != CURLM_OK) {
            rc = CURLE_FAILED_INIT;
            break;
        }
        agent_disk_check(a, agent_mono_s()); /* a disk fills faster than curl's progress */
        for (unsigned i = 0; i < n; i++) {
            if (!(w[i].revents & CURL_WAIT_POLLIN))
                continue;
            for (int k = 0; k < a->ntasks; k++)
                if (a->tasks[k].keeper_fd_open && a->tasks[k].keeper_fd == w[i].fd)
                    agent_keeper_fd_close(&a->tasks[k]); /* wakes once */
            *woken = true;
        }
        if (*woken)
            break;
    }
    curl_multi_remove_handle(a->multi, a->h);
    return *woken ? CURLE_ABORTED_BY_CALLBACK : rc;
}

/* POST body to path; *answer the parsed JSON (owned by the caller). With
 * wake, a task's end ends the wait early: AGENT_POST_WOKEN, nothing answered. */
int agent_post_woken(ts_agent *a, const char *path, json_t *body, long *status,
                      json_t **answer, double timeout_s, bool wake, ts_err *err)
{
    char url[700], auth[320];
    snprintf(url, sizeof url, "%s%s", agent_ctls_url(&a->cfg.ctls), path);
    if (a->p2p) /* the tracker is asked where the agent is */
        agent_p2p_set_controller(a->p2p, agent_ctls_url(&a->cfg.ctls));
    snprintf(auth, sizeof auth, "Authorization: Bearer %s", a->cfg.token);
    char *txt = json_dumps(body, JSON_COMPACT);
    if (!txt)
        return ts_err_set(err, TS_ENOMEM, "out of memory");
    struct curl_slist *hd = curl_slist_append(NULL, auth);
    hd = curl_slist_append(hd, "Content-Type: application/json");
    io_body b = {.max = TS_AGENT_ANSWER_MAX_BYTES}; /* past the protocol's size: failed */
    curl_easy_setopt(a->h, CURLOPT_URL, url);
    curl_easy_setopt(a->h, CURLOPT_HTTPHEADER, hd);
    curl_easy_setopt(a->h, CURLOPT_POSTFIELDS, txt);
    curl_easy_setopt(a->h, CURLOPT_WRITEFUNCTION, io_body_sink);
    curl_easy_setopt(a->h, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(a->h, CURLOPT_TIMEOUT_MS, (long)(timeout_s * 1000));
    curl_easy_setopt(a->h, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
    curl_easy_setopt(a->h, CURLOPT_XFERINFOFUNCTION, agent_progress);
    curl_easy_setopt(a->h, CURLOPT_XFERINFODATA, a);
    curl_easy_setopt(a->h, CURLOPT_NOPROGRESS, 0L);
    if (a->cfg.ca_file[0])
        curl_easy_setopt(a->h, CURLOPT_CAINFO, a->cfg.ca_file);
    bool woken;
    CURLcode rc = perform(a, wake, &woken);
    curl_slist_free_all(hd);
    free(txt);
    *status = 0;
    if (woken) {
        free(b.p);
        ts_err_set(err, TS_EIO, "a task ended: reported at once");
        return AGENT_POST_WOKEN;
    }
    curl_easy_getinfo(a->h, CURLINFO_RESPONSE_CODE, status);
    if (rc != CURLE_OK) {
        *status = 0; /* no answer: the controller is unreachable or too slow */
        free(b.p);
        return ts_err_set(err, TS_EIO, "%s: %s", url, curl_easy_strerror(rc));
    }
    json_error_t je;
    *answer = b.p ? json_loads(b.p, 0, &je) : NULL;
    free(b.p);
    if (*status != 200)
        return ts_err_set(err, TS_EIO, "%s: HTTP %ld: %s", url, *status,
                          json_string_value(json_object_get(json_object_get(*answer, "error"),
                                                            "message"))
                              ? json_string_value(json_object_get(
                                    json_object_get(*answer, "error"), "message"))
                              : "no message");
    return 0;
}

int agent_post(ts_agent *a, const char *path, json_t *body, long *status, json_t **answer,
                double timeout_s, ts_err *err)
{
    return agent_post_woken(a, path, body, status, answer, timeout_s, false, err);
}

