/*
 * cutoff.c - the agent's promise that a task never runs twice at once
 * (docs/tessera-agent.md "Restarts, crashes and partitions"): the
 * controller declares a node lost after node_lost_after and starts its jobs
 * elsewhere, so this node's tasks are gone by then. A cut-off agent stops
 * them at half that time (agent_cut_off_check), keeping each to report when
 * a controller answers again (ctld/agents.c requeues them: controller_lost);
 * an agent that is not running at all is held to the deadline it last wrote
 * by its tasks' keepers (agent_heard_from_controller, launch_keeper.c);
 * and a second agent for the node, which would start its tasks again, is
 * refused by the controller by its identity (agent_identity).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent_internal.h"
#include "agent/clock.h"

/* How long without the controller before this node's tasks must stop. */
double agent_lost_limit(const ts_agent *a)
{
    double limit = a->cfg.lost_s;
    if (a->ctld_lost_s > 0 && a->ctld_lost_s / 2 < limit)
        limit = a->ctld_lost_s / 2;
    return limit;
}

/* A controller answered: the deadline the tasks' keepers hold this agent to
 * (TS_TASK_DEADLINE_FILE in the records' folder) moves, written whole
 * (renamed into place) when it moved by a second or more. Were the agent killed and
 * not back by then, each keeper stops its task as a cut-off agent would. */
void agent_heard_from_controller(ts_agent *a)
{
    a->last_ok_s = agent_mono_s();
    double limit = agent_lost_limit(a);
    long long deadline = (long long)((a->last_ok_s + limit) * 1000.0);
    long long moved = deadline - a->deadline_written_ms;
    if (moved < 1000 && moved > -1000) /* earlier too: the limit is the controller's */
        return;
    char path[1024], tmp[1040], text[64];
    snprintf(path, sizeof path, "%s/%s", a->logs, TS_TASK_DEADLINE_FILE);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int n = snprintf(text, sizeof text, "%lld %lld\n", deadline, (long long)(limit * 500.0));
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    bool ok = fd >= 0 && write(fd, text, (size_t)n) == n;
    if (fd >= 0)
        close(fd);
    if (ok && rename(tmp, path) == 0)
        a->deadline_written_ms = deadline;
}

void agent_identity(const char *state_dir, char *out, size_t size)
{
    char machine[64] = "";
    int fd = open("/etc/machine-id", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t n = read(fd, machine, sizeof machine - 1);
        machine[n > 0 ? n : 0] = '\0';
        machine[strcspn(machine, "\n")] = '\0';
        close(fd);
    }
    if (!machine[0] && gethostname(machine, sizeof machine - 1) != 0)
        machine[0] = '\0';
    struct stat st;
    out[0] = '\0';
    if (stat(state_dir, &st) == 0)
        snprintf(out, size, "%s:%llu:%llu", machine[0] ? machine : "-",
                 (unsigned long long)st.st_dev, (unsigned long long)st.st_ino);
}

static void stop_and_wait(ts_agent *a);

void agent_cut_off_check(ts_agent *a, int rc)
{
    /* Cut off: the controller declares this node lost after ctld_lost_s
     * and requeues its jobs elsewhere, where they must not run twice. So
     * the tasks stop at half that time, with a termination grace of a
     * quarter of it: gone before the controller gives up on the node. */
    int running = 0;
    for (int i = 0; i < a->ntasks; i++)
        running += a->tasks[i].t && a->tasks[i].st.phase != TS_TASK_EXITED;
    double silent = agent_mono_s() - a->last_ok_s;
    if (rc != 0 && silent > agent_lost_limit(a) && running > 0) {
        fprintf(stderr, "tessera-agent: no controller has answered for %.1f s (limit %.1f s: "
                        "--lost-after or half the controller's node_lost_after): stopping %d "
                        "task(s), which the controller requeues\n",
                silent, agent_lost_limit(a), running);
        /* kept, ended: the next registration reports each (an already
         * ended one as it ended), so a controller that comes back requeues
         * them rather than starting them again here */
        for (int i = 0; i < a->ntasks; i++) {
            local_task *lt = &a->tasks[i];
            if (lt->t && lt->st.phase != TS_TASK_EXITED) {
                lt->cut_off = true;
                lt->cut_off_silent_s = silent;
                lt->cut_off_limit_s = agent_lost_limit(a);
            }
        }
        stop_and_wait(a);
    }
}

/* Every running task's stop sequence at once, then a wait for all of them
 * (at most two termination graces and a second). */
static void stop_and_wait(ts_agent *a)
{
    /* every task's stop sequence at once, then wait for all of them */
    double now = agent_mono_s(), deadline = now;
    for (int i = 0; i < a->ntasks; i++) {
        local_task *lt = &a->tasks[i];
        if (lt->t && lt->st.phase != TS_TASK_EXITED) {
            ts_err e;
            lt->stop_requested = true;
            agent_task_preempt_begin(lt->t, SIGTERM, 0.0, now, &e);
            deadline = now + 2.0 * TS_TERM_GRACE_DEFAULT_S + 1.0;
        }
    }
    for (;;) {
        bool running = false;
        now = agent_mono_s();
        for (int i = 0; i < a->ntasks; i++) {
            local_task *lt = &a->tasks[i];
            ts_err e;
            if (lt->t && lt->st.phase != TS_TASK_EXITED &&
                (agent_task_poll(lt->t, now, &lt->st, &e) != 0 || lt->st.phase != TS_TASK_EXITED))
                running = true;
        }
        if (!running || now > deadline)
            break;
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

/* Forgets every task (each stopped: agent_stop_and_wait), and the
 * secrets and MPS daemons they used. */
static void forget_all(ts_agent *a)
{
    for (int i = 0; i < a->ntasks; i++) {
        agent_task_free(a->tasks[i].t);
        if (!a->tasks[i].is_step)
            agent_secrets_remove(a, a->tasks[i].job, a->tasks[i].rank);
    }
    a->ntasks = 0;
    agent_mps_tidy(a); /* no task is left on the MPS daemons this agent started */
}

void agent_stop_all(ts_agent *a)
{
    stop_and_wait(a);
    forget_all(a);
}

void agent_leave(ts_agent *a)
{
    for (int i = 0; i < a->ntasks; i++)
        if (a->tasks[i].t && a->tasks[i].st.phase != TS_TASK_EXITED)
            a->tasks[i].agent_stopped = true;
    stop_and_wait(a);
    bool told = false;
    if (a->registered) {
        /* one sync: the stopped tasks (their jobs requeue at once, not
         * after node_lost_after) and the node out of service */
        ts_err e;
        a->leaving = true;
        told = agent_step(a, &e) == 0;
        if (!told)
            fprintf(stderr, "tessera-agent: could not tell the controller it stops: its "
                            "tasks' records stay for the next agent to report: %s\n", e.msg);
    }
    if (told) {
        forget_all(a);
        return;
    }
    /* no controller heard: the records stay, each stopped one marked, so
     * the next agent reports them (agent_stopped) and their jobs requeue,
     * rather than a controller starting the same run again here unseen */
    for (int i = 0; i < a->ntasks; i++) {
        local_task *lt = &a->tasks[i];
        if (lt->t && lt->agent_stopped && agent_task_mark_left(lt->t) != 0)
            fprintf(stderr, "tessera-agent: task j%lld-r%d: cannot mark its exit file: %s\n",
                    (long long)lt->job, lt->rank, strerror(errno));
        agent_task_detach(lt->t);
    }
    a->ntasks = 0;
    agent_mps_tidy(a);
}
