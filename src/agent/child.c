/*
 * child.c - bounded waits for the agent's own children (child.h).
 */
#define _GNU_SOURCE
#include "agent/child.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
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
