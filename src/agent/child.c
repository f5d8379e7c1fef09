/*
 * child.c - bounded waits for the agent's own children (child.h).
 */
#define _GNU_SOURCE
#include "agent/child.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NAP_NS 1000000L /* without a pidfd (Linux before 5.3): 1-ms naps */

int agent_child_reap(pid_t pid, int64_t deadline_ms, int *status)
{
    int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
    int rc = 0;
    for (;;) {
        pid_t w = waitpid(pid, status, WNOHANG);
        if (w == pid)
            break;
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0) { /* not ours to reap any more: not a success */
            rc = errno;
            *status = -1;
            break;
        }
        int64_t wait = deadline_ms - agent_mono_ms();
        if (wait <= 0) {
            kill(pid, SIGKILL);
            while (waitpid(pid, status, 0) < 0 && errno == EINTR)
                ;
            rc = ETIMEDOUT;
            break;
        }
        if (pfd >= 0) { /* readable once the child has ended */
            struct pollfd fd = {pfd, POLLIN, 0};
            poll(&fd, 1, (int)(wait < INT32_MAX ? wait : INT32_MAX));
        } else {
            nanosleep(&(struct timespec){0, NAP_NS}, NULL);
        }
    }
    if (pfd >= 0)
        close(pfd);
    return rc;
}

int agent_child_talk(int in, int er, const char *input, char *msg, size_t len,
                     int64_t deadline_ms)
{
    const char *p = input;
    size_t left = input ? strlen(input) : 0, got = 0;
    int rc = 0;
    if (left == 0 && in >= 0) {
        close(in);
        in = -1;
    }
    for (;;) {
        struct pollfd fd[2] = {{er, POLLIN, 0}, {in, POLLOUT, 0}};
        int64_t wait = deadline_ms - agent_mono_ms();
        if (wait <= 0) {
            rc = -1;
            break;
        }
        int n = poll(fd, in >= 0 ? 2 : 1, (int)(wait < INT32_MAX ? wait : INT32_MAX));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            break;
        if (in >= 0 && fd[1].revents) {
            ssize_t w = write(in, p, left);
            if (w > 0) {
                p += w;
                left -= (size_t)w;
            }
            /* all written, or the child closed its stdin (EPIPE; SIGPIPE
             * is ignored by the agent): it has what it will read */
            if (left == 0 || (w < 0 && errno != EAGAIN && errno != EINTR)) {
                close(in);
                in = -1;
            }
        }
        if (fd[0].revents) {
            char junk[512];
            ssize_t r = got + 1 < len ? read(er, msg + got, len - 1 - got)
                                      : read(er, junk, sizeof junk);
            if (r < 0 && (errno == EINTR || errno == EAGAIN))
                continue;
            if (r <= 0)
                break;
            if (got + 1 < len)
                got += (size_t)r;
        }
    }
    if (len > 0)
        msg[got] = '\0';
    if (in >= 0)
        close(in);
    close(er);
    return rc;
}
