/*
 * agent.c - the node agent's loop over the agent protocol
 * (docs/agent-protocol.md).
 *
 * Each step: report every local task's state (and the node's health), get
 * the node's whole desired state (a long-poll: short while tasks run, and
 * cut short when a task's keeper ends, so an exit is reported at once),
 * then reconcile: start what
 * should run and does not, begin the stop sequence (checkpoint signal,
 * grace, SIGTERM, SIGKILL: launch.c) for ranks the controller asks to stop,
 * stop local tasks the desired state no longer lists, and forget finished
 * tasks once the controller stopped listing them. A task that ended stays
 * in the report until then, so a lost answer loses nothing. Tasks are never
 * started twice: a (job, rank) with a local entry, running or ended, is not
 * started again until the controller has dropped it. What one task needs
 * (its start, adoption after a restart, MIG, MPS, output) is agent_task.c.
 * With several controllers (--controller URL,URL...), an exchange that gets
 * no answer or a 503 moves the agent to the leader a standby names, else to
 * the next controller (controllers.c), where it registers again with what
 * runs: the tasks run on meanwhile, and stop only when no controller has
 * answered for the lost deadline below.
 */
#define _DEFAULT_SOURCE /* getpwnam_r's companions, mkdir, strdup */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent/slurm_step.h"
#include "agent/agent_internal.h"
#include "agent/sync_fit.h"
#include "agent/taskfile.h"
#include "agent/trash.h"
#include "tessera/agent_proto.h"
#include "agent/clock.h"

#define AGENT_LOGS_MODE 0711   /* <state_dir>/logs */
#define AGENT_IMAGES_MODE 0700 /* <state_dir>/images */

int agent_new(const ts_agent_config *cfg, ts_agent_node *node, ts_agent **out, ts_err *err)
{
    ts_agent *a = calloc(1, sizeof *a);
    if (!a)
        return ts_err_set(err, TS_ENOMEM, "out of memory");
    a->cfg = *cfg;
    if (a->cfg.lost_s <= 0)
        a->cfg.lost_s = TS_AGENT_LOST_S;
    if (a->cfg.hook_timeout_s <= 0)
        a->cfg.hook_timeout_s = TS_AGENT_HOOK_TIMEOUT_S;
    if (a->cfg.max_hooks <= 0 || a->cfg.max_hooks > TS_AGENT_MAX_HOOKS)
        a->cfg.max_hooks = TS_AGENT_MAX_HOOKS;
    a->node = node;
    a->body_max = TS_AGENT_BODY_MAX_BYTES;
    a->report_seq = (int64_t)(agent_wall_now() * 1e6);
    a->h = curl_easy_init();
    a->multi = curl_multi_init(); /* NULL: syncs wait out their long-poll */
    if (!a->h) {
        if (a->multi)
            curl_multi_cleanup(a->multi);
        free(a);
        return ts_err_set(err, TS_ENOMEM, "cannot start libcurl");
    }
    snprintf(a->logs, sizeof a->logs, "%s/logs", cfg->state_dir);
    snprintf(a->steps, sizeof a->steps, "%s/steps", cfg->state_dir);
    snprintf(a->task_dirs, sizeof a->task_dirs, "%s/tasks", cfg->state_dir);
    mkdir(cfg->state_dir, 0755);
    agent_identity(cfg->state_dir, a->identity, sizeof a->identity);
    /* anyone may pass through to their own log (a task reopens its stdout
     * by path), no one may list them; an older agent's folder was 0755 */
    if ((mkdir(a->logs, AGENT_LOGS_MODE) != 0 && errno != EEXIST) ||
        chmod(a->logs, AGENT_LOGS_MODE) != 0) {
        int e = errno;
        ts_err_set(err, TS_EIO, "state_dir %s: %s", a->logs, strerror(e));
        if (a->multi)
            curl_multi_cleanup(a->multi);
        curl_easy_cleanup(a->h);
        free(a);
        return TS_EIO;
    }
    agent_launch_probe(cfg->cgroup_parent[0] ? cfg->cgroup_parent : NULL, &a->caps);
    ts_err se;
    if (agent_srun_install(cfg->state_dir, a->slurm_bin, sizeof a->slurm_bin, &se) != 0) {
        fprintf(stderr, "tessera-agent: %s (Slurm jobs get no srun)\n", se.msg);
        a->slurm_bin[0] = '\0';
    }
    char cli[4200];
    agent_srun_cli(cli, sizeof cli);
    if (a->slurm_bin[0] && cli[0] &&
        agent_srun_kit_install(a->slurm_bin, cli, a->slurm_kit, sizeof a->slurm_kit, &se) != 0) {
        fprintf(stderr, "tessera-agent: %s (Slurm jobs in images get no srun)\n", se.msg);
        a->slurm_kit[0] = '\0';
    }
    /* tasks an earlier agent left running (or that ended while none ran) */
    ts_err e;
    /* the node's images (docs/images.md); without a store only bare tasks run */
    char images[700];
    snprintf(images, sizeof images, "%s/images", cfg->state_dir);
    /* an image's files are its tenant's: the store is root's alone (runc
     * mounts a container's root as root; the task sees only its own
     * mount); an older agent's was 0755 */
    if (mkdir(images, AGENT_IMAGES_MODE) == 0 || errno == EEXIST)
        chmod(images, AGENT_IMAGES_MODE);
    snprintf(a->bundles, sizeof a->bundles, "%s/bundles", cfg->state_dir);
    mkdir(a->bundles, 0700);
    char trash[700];
    snprintf(trash, sizeof trash, "%s/" BUNDLE_TRASH_DIR, a->bundles);
    agent_trash_sweep(trash); /* bundles an ended agent had not finished removing */
    agent_epilogs_restore(a);
    agent_disk_limits(&a->cfg);
    ts_err ie;
    a->images_ok = agent_image_store_open(&a->images, images, cfg->image_budget_bytes, &ie) == 0;
    /* an image's unpack leaves the disk reserve free, as a task's layer does */
    a->images.limits.min_free_bytes = a->cfg.disk_reserve_mib << 20;
    if (!a->images_ok)
        snprintf(a->images_error, sizeof a->images_error, "%s", ie.msg);
    if (a->images_ok && cfg->p2p_listen[0]) {
        ts_p2p_config pc = {.listen = cfg->p2p_listen,
                            .advertise = cfg->p2p_advertise[0] ? cfg->p2p_advertise : NULL,
                            .node = cfg->node, .token = cfg->token,
                            .ca_file = cfg->ca_file[0] ? cfg->ca_file : NULL,
                            .store_root = a->images.root,
                            .fault_corrupt = cfg->p2p_fault_corrupt};
        if (agent_p2p_start(&pc, &a->p2p, &ie) != 0) {
            fprintf(stderr, "tessera-agent: %s (images come from the registry only)\n", ie.msg);
            a->p2p = NULL;
        } else {
            agent_p2p_set_controller(a->p2p, agent_ctls_url(&a->cfg.ctls));
        }
    }
    int nrec = agent_task_records(a->logs, agent_adopt_one, a, &e);
    if (nrec < 0 && nrec != TS_ENOENT)
        fprintf(stderr, "tessera-agent: task records in %s: %s\n", a->logs, e.msg);
    agent_secrets_sweep(a); /* the folders of tasks that ended while no agent ran */
    agent_mount_pins_sweep(a); /* and their job mounts' pins */
    agent_steps_sweep(a);   /* an older agent's steps folder: what no record holds */
    agent_task_dirs_sweep(a->task_dirs, a->logs); /* and their own folders */
    agent_net_open(a);
    a->last_ok_s = agent_mono_s();
    *out = a;
    return 0;
}

void agent_free(ts_agent *a)
{
    if (!a)
        return;
    /* what still runs here runs on, for the next agent to adopt (a
     * shutdown that should stop it calls agent_stop_all first) */
    bool pulling = false;
    for (int i = 0; i < a->ntasks; i++) {
        agent_task_detach(a->tasks[i].t);
        pulling = pulling || a->tasks[i].pull;
    }
    for (int i = 0; i < (int)(sizeof a->prefetch / sizeof a->prefetch[0]); i++)
        pulling = pulling || a->prefetch[i].pull;
    if (!pulling) /* a pull's thread would still use it: the process ends with it */
        agent_p2p_stop(a->p2p);
    if (a->images_ok) /* no mount left behind but those its running tasks sit on */
        agent_image_store_close(&a->images);
    if (a->multi)
        curl_multi_cleanup(a->multi);
    curl_easy_cleanup(a->h);
    agent_answers_clear(&a->log_answers);
    json_decref(a->images_sent);
    free(a->net_peers);
    free(a->net_services);
    free(a);
}

int agent_ntasks(const ts_agent *a) { return a->ntasks; }

const ts_launch_caps *agent_caps(const ts_agent *a) { return &a->caps; }

/* ---- reporting ------------------------------------------------------------------ */

static enum ts_report_outcome outcome_of(ts_stop_outcome o)
{
    switch (o) {
    case TS_STOP_CHECKPOINTED:
        return TS_OUTCOME_CHECKPOINTED;
    case TS_STOP_EXITED:
        return TS_OUTCOME_EXITED;
    case TS_STOP_TERMINATED:
        return TS_OUTCOME_TERMINATED;
    case TS_STOP_KILLED:
        return TS_OUTCOME_KILLED;
    default:
        return TS_OUTCOME_STOPPED;
    }
}

double agent_wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Tasks whose job's time limit has come: the hard stop (the job's checkpoint
 * signal, SIGKILL after its grace: launch.c), which no answer of the
 * controller has to ask for. A preemption's stop in progress becomes hard. */
static void enforce_limits(ts_agent *a, double now)
{
    double wall = agent_wall_now();
    agent_disk_check(a, now);
    for (int i = 0; i < a->ntasks; i++) {
        local_task *lt = &a->tasks[i];
        agent_shim_check(a, lt, now);
        if (!lt->t || lt->deadline_unix <= 0 || wall < lt->deadline_unix ||
            lt->st.phase == TS_TASK_EXITED || lt->st.hard_stop)
            continue;
        ts_err e;
        if (agent_task_timeout_begin(lt->t, lt->limit_signal, lt->limit_grace_s, now, &e) != 0)
            fprintf(stderr, "tessera-agent: job %lld rank %d: time limit: %s\n",
                    (long long)lt->job, lt->rank, e.msg);
        else
            fprintf(stderr, "tessera-agent: job %lld rank %d: time limit %gs reached: signal %d, "
                            "SIGKILL in %g s\n", (long long)lt->job, lt->rank, lt->time_limit_s,
                    lt->limit_signal ? lt->limit_signal : SIGTERM, lt->limit_grace_s);
        lt->stop_requested = true;
        agent_task_poll(lt->t, now, &lt->st, &e);
    }
}

/* Time limits and the phases of stops in progress, acted on without the
 * controller: between exchanges (agent_pause) and while one waits for an
 * answer (curl's progress callback, at least about once a second). */
static void keep_time(ts_agent *a)
{
    double now = agent_mono_s();
    agent_hooks_poll(a, now);
    agent_images_poll(a, now);
    enforce_limits(a, now);
    for (int i = 0; i < a->ntasks; i++) {
        local_task *lt = &a->tasks[i];
        ts_err e;
        if (lt->t && lt->st.phase != TS_TASK_EXITED && lt->st.phase_end_s > 0 &&
            now >= lt->st.phase_end_s)
            agent_task_poll(lt->t, now, &lt->st, &e);
    }
}

int agent_progress(void *u, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                   curl_off_t ulnow)
{
    (void)dltotal;
    (void)dlnow;
    (void)ultotal;
    (void)ulnow;
    keep_time(u);
    return 0;
}

void agent_pause(ts_agent *a, double seconds)
{
    double end = agent_mono_s() + seconds;
    for (double now = agent_mono_s(); now < end; now = agent_mono_s()) {
        keep_time(a);
        double step = end - now < TS_AGENT_WAIT_MIN_S ? end - now : TS_AGENT_WAIT_MIN_S;
        struct timespec ts = {0, (long)(step * 1e9)};
        nanosleep(&ts, NULL);
    }
}

/* How long the next long-poll may wait: not past a time limit or the end of
 * a stop's phase here, so each is acted on when it comes. */
static double wait_for(const ts_agent *a, double busy_s)
{
    double wall = agent_wall_now(), now = agent_mono_s(), w = busy_s;
    for (int i = 0; i < a->ntasks; i++) {
        const local_task *lt = &a->tasks[i];
        if (!lt->t || lt->st.phase == TS_TASK_EXITED)
            continue;
        if (lt->deadline_unix > 0 && !lt->st.hard_stop && lt->deadline_unix - wall < w)
            w = lt->deadline_unix - wall;
        if (lt->st.phase_end_s > 0 && lt->st.phase_end_s - now < w)
            w = lt->st.phase_end_s - now;
    }
    return w < TS_AGENT_WAIT_MIN_S ? TS_AGENT_WAIT_MIN_S : w;
}

/* A start error without the launcher's "task ID: " prefix: the job's reason. */
static const char *start_error_text(const local_task *lt)
{
    const char *m = lt->start_error;
    if (strncmp(m, "task j", 6) == 0 && strstr(m, ": "))
        return strstr(m, ": ") + 2;
    return m;
}

/* How an ended task ended, as far as it is known: its exit code or signal,
 * OOM kills in its cgroup, and whether its time limit stopped it. */
static void add_end(const local_task *lt, ts_task_report *r)
{
    r->has_exit_code = lt->st.exit_code >= 0;
    r->exit_code = lt->st.exit_code;
    if (lt->st.term_signal > 0 && !lt->st.lost)
        r->signal = lt->st.term_signal;
    if (lt->st.oom_kills > 0)
        r->oom_kills = lt->st.oom_kills;
    r->ended_at = lt->st.ended_at;
    if (lt->st.hard_stop) {
        r->timeout = true;
        r->has_time_limit = true;
        r->time_limit_s = lt->time_limit_s;
    }
}

/* A started task's report: running (with its readings) while it runs or its
 * output is still being drained, else how it ended. why (256 bytes) and
 * out[2] hold the strings r points to until it is encoded. */
static void report_started(ts_agent *a, local_task *lt, double now, ts_task_report *r,
                           char *why, char *out[2])
{
    ts_err e;
    if (lt->st.phase != TS_TASK_EXITED) {
        agent_task_poll(lt->t, now, &lt->st, &e);
        if (lt->st.phase == TS_TASK_EXITED && !lt->is_step) /* its secrets go with it */
            agent_secrets_remove(a, lt->job, lt->rank);
    }
    if (lt->st.phase == TS_TASK_EXITED) /* once, however its end was seen */
        agent_epilog_begin(a, lt);
    if (lt->st.phase != TS_TASK_EXITED || agent_stdio_hold(lt, now)) {
        r->state = TS_REPORT_RUNNING;
        /* its GPUs' mean utilisation, for the controller's idle policy */
        int sum = 0, known = 0;
        for (int k = 0; k < lt->ngpu; k++)
            if (a->node->gpu_util[lt->gpu[k]] >= 0) {
                sum += a->node->gpu_util[lt->gpu[k]];
                known++;
            }
        if (known > 0) /* NVML's percentage; the protocol allows no more */
            r->gpu_util = sum > 100 * known ? 100.0 : (double)sum / known;
        r->step_s = agent_step_median(lt->step_file, agent_task_info_get(lt->t)->run_uid);
        return;
    }
    agent_task_output(lt, out); /* ended: its last output and how */
    r->has_output = true;
    r->out_stdout = out[0];
    r->out_stderr = out[1];
    add_end(lt, r);
    if (lt->st.cut_off == TS_CUT_KEEPER) /* while no agent ran (launch_keeper.c) */
        lt->cut_off = true;
    else if (lt->st.cut_off == TS_CUT_AGENT_LEFT) /* an agent stopped with it (cutoff.c) */
        lt->agent_stopped = true;
    if (lt->shim_missing || lt->disk_stopped || lt->cut_off || lt->agent_stopped) {
        /* stopped by the agent as it ran */
        agent_stopped_report(a, lt, r, why);
    } else if (lt->stop_requested) {
        r->state = TS_REPORT_STOPPED;
        r->outcome = outcome_of(lt->st.outcome);
    } else if (lt->st.lost) {
        r->state = TS_REPORT_FAILED;
        r->error = "its exit status was lost (its keeper died while no agent ran)";
    } else {
        r->state = lt->st.term_signal ? TS_REPORT_FAILED : TS_REPORT_EXITED;
    }
}

/* Every task's report (tessera/agent_proto.h), for a register or a sync. */
static json_t *report(ts_agent *a)
{
    json_t *arr = json_array();
    double now = agent_mono_s();
    enforce_limits(a, now);
    for (int i = 0; i < a->ntasks; i++) {
        local_task *lt = &a->tasks[i];
        ts_task_report r;
        ts_task_report_init(&r);
        r.job = lt->job;
        r.rank = lt->rank;
        r.step = lt->is_step ? lt->step : -1;
        r.has_run = lt->run > 0;
        r.run = lt->run;
        char why[256], *out[2] = {NULL, NULL};
        if (!lt->t && lt->stopped_unstarted) {
            r.state = TS_REPORT_STOPPED;
            r.outcome = TS_OUTCOME_STOPPED;
        } else if (!lt->t && lt->prolog_wait) {
            /* the node's prolog runs first (hooks.c): placed, as for an image */
            r.state = TS_REPORT_RUNNING;
        } else if (!lt->t && lt->waiting) {
            /* its image is coming (agent_image.c): running, as far as the
             * controller's placement goes, with how far the pull is */
            r.state = TS_REPORT_RUNNING;
            r.has_image_pull = true;
            r.pull_done_bytes = lt->pull_done_bytes;
            r.pull_total_bytes = lt->pull_total_bytes;
            r.pull_note = lt->pull_note;
        } else if (!lt->t) {
            r.state = TS_REPORT_FAILED;
            r.error = start_error_text(lt);
            r.launch = true;
            r.launch_end = lt->launch_end[0] ? lt->launch_end : NULL;
        } else {
            report_started(a, lt, now, &r, why, out);
        }
        json_t *o = ts_task_report_encode(&r);
        if (o) /* else out of memory: left out of this report, in the next one */
            json_array_append_new(arr, o);
        free(out[0]);
        free(out[1]);
    }
    return arr;
}

/* ---- reconciling ---------------------------------------------------------------- */

local_task *agent_find(ts_agent *a, int64_t job, int rank, int step)
{
    for (int i = 0; i < a->ntasks; i++)
        if (a->tasks[i].job == job && a->tasks[i].rank == rank &&
            (step < 0 ? !a->tasks[i].is_step : a->tasks[i].is_step && a->tasks[i].step == step))
            return &a->tasks[i];
    return NULL;
}

/* An ended task leaves the agent: its ledger, secrets and step file go. */
static void agent_task_forget(ts_agent *a, int k)
{
    local_task *lt = &a->tasks[k];
    if (!lt->is_step) { /* a step's task shares the rank's ledger and secrets */
        agent_ledger_remove(a, lt);
        agent_secrets_remove(a, lt->job, lt->rank);
    }
    agent_step_file_remove(lt);
    agent_shim_mark_remove(lt);
    agent_keeper_fd_close(lt);
    agent_task_free(lt->t); /* its container, if any, is gone with it: then its image and bundle */
    if (lt->mounts_pinned || lt->image_ready) { /* its job mounts, pinned (agent_start.c) */
        char id[64];
        if (lt->is_step)
            snprintf(id, sizeof id, "j%lld-r%d-s%d", (long long)lt->job, lt->rank, lt->step);
        else
            snprintf(id, sizeof id, "j%lld-r%d", (long long)lt->job, lt->rank);
        agent_mount_unpin(a->cfg.state_dir, id);
    }
    agent_stdio_close(lt);
    agent_net_end(a, lt); /* after the task: nothing of it is left in the namespace */
    agent_image_forget(a, lt);
    json_decref(lt->prolog_wait);
    a->tasks[k] = a->tasks[--a->ntasks];
}

/* The idle policy's warning, once, where the user reads the task's output. */
static void idle_warn(local_task *lt, const char *warn)
{
    ts_err e;
    int fd = agent_taskfile_open(agent_task_info_get(lt->t)->stdout_path, O_WRONLY | O_APPEND,
                                 agent_task_info_get(lt->t)->uid, &e);
    if (fd >= 0) {
        dprintf(fd, "tessera: %s\n", warn);
        close(fd);
    }
    lt->idle_warned = true;
}

/* A task of the answer that is outside the protocol (tessera/agent_proto.h
 * names the field; id: what names it, present 0 where even that could not
 * be read): nothing of it starts. A new one is reported failed with that
 * reason, so its job ends saying why instead of waiting for a rank that
 * never comes; one the agent already has is left as it is. */
static void refuse_task(ts_agent *a, const ts_desired_task *id, const ts_err *why)
{
    if (!id->present)
        return; /* nothing to report it by */
    int64_t job = id->job;
    int rank = id->rank, step = id->present & TS_DT_BIT(TS_DT_STEP) ? id->step : -1;
    if (agent_find(a, job, rank, step) || a->ntasks >= TS_AGENT_MAX_TASKS)
        return;
    local_task *nt = &a->tasks[a->ntasks++];
    memset(nt, 0, sizeof *nt);
    nt->job = job;
    nt->rank = rank;
    nt->is_step = step >= 0;
    nt->step = step;
    nt->run = id->run;
    nt->mig_profile = -1;
    snprintf(nt->start_error, sizeof nt->start_error,
             "the controller's task is outside the agent protocol: %.400s", why->msg);
    fprintf(stderr, "tessera-agent: %s\n", nt->start_error);
}

/* One task of the answer, decoded (d; t its document, which a start
 * reads): start it, stop it, or pass on its warnings. */
static void reconcile_task(ts_agent *a, const ts_desired *ds, json_t *t,
                           const ts_desired_task *d, double now)
{
    bool run = d->action == TS_ACTION_RUN, stop = d->action == TS_ACTION_STOP;
    int step = d->present & TS_DT_BIT(TS_DT_STEP) ? d->step : -1;
    if (d->hold && run)
        return; /* a batch job's rank that runs only its steps (ctld/steps.h) */
    local_task *lt = agent_find(a, d->job, d->rank, step);
    bool has_run = d->present & TS_DT_BIT(TS_DT_RUN);
    if (lt && lt->run > 0 && has_run && d->run != lt->run && run &&
        (!lt->t || lt->st.phase == TS_TASK_EXITED)) {
        /* a new run of the job (requeued, restarted here): the old run's
         * ended task is forgotten, and the new one starts */
        agent_task_forget(a, (int)(lt - a->tasks));
        lt = NULL;
    }
    if (lt && lt->t && d->idle_warning && !lt->idle_warned)
        idle_warn(lt, d->idle_warning);
    if (!lt && run) {
        /* the time it has left, on this node's clock (docs/agent-protocol.md) */
        if (d->present & TS_DT_BIT(TS_DT_DEADLINE))
            json_object_set_new(t, "time_left_s",
                                json_real(d->deadline - (ds->present & TS_DS_BIT(TS_DS_NOW)
                                                             ? ds->now
                                                             : agent_wall_now())));
        agent_start_task(a, t, d);
    } else if (lt && lt->t && stop && d->hard && !lt->st.hard_stop) {
        ts_err e; /* the time limit's stop, which this agent had not begun yet */
        lt->stop_requested = true;
        if (agent_task_timeout_begin(lt->t, d->signal, d->grace_s, now, &e) == 0)
            agent_task_poll(lt->t, now, &lt->st, &e);
    } else if (lt && !lt->t && lt->prolog_wait && stop) {
        /* stopped while the prolog runs: the prolog ends on its own,
         * nothing of the task starts */
        json_decref(lt->prolog_wait);
        lt->prolog_wait = NULL;
        lt->stopped_unstarted = lt->stop_requested = true;
    } else if (lt && !lt->t && lt->waiting && stop) {
        /* stopped before its image came: the pull is abandoned (or its
         * result dropped), nothing ran */
        agent_image_forget(a, lt);
        lt->stopped_unstarted = lt->stop_requested = true;
    } else if (!lt && stop && a->ntasks < TS_AGENT_MAX_TASKS) {
        /* a stop of a task this agent never had: its job was placed and
         * stopped (cancelled, preempted) while the agent was away or its
         * sync in flight. Nothing of it ran here; unreported, the job
         * would wait for this rank's stop for ever. */
        local_task *nt = &a->tasks[a->ntasks++];
        memset(nt, 0, sizeof *nt);
        nt->job = d->job;
        nt->rank = d->rank;
        nt->is_step = step >= 0;
        nt->step = step;
        nt->run = has_run ? d->run : 0;
        nt->mig_profile = -1;
        nt->stopped_unstarted = nt->stop_requested = true;
    } else if (lt && lt->t && stop && !lt->stop_requested) {
        ts_err e;
        lt->stop_requested = true;
        agent_task_preempt_begin(lt->t, d->signal, d->grace_s, now, &e);
    }
}

/* Whether the answer's task d (decoded whole, or only what names it where
 * the rest was refused; present 0: nothing names it) is the local task lt. */
static bool desired_is(const ts_desired_task *d, const local_task *lt)
{
    bool is_step = d->present & TS_DT_BIT(TS_DT_STEP);
    return d->present && d->job == lt->job && d->rank == lt->rank && is_step == lt->is_step &&
           (!is_step || d->step == lt->step);
}

/* The answer, decoded; one outside the protocol is said (at most once a
 * minute) and only its tasks, each decoded on its own, and its gen (else
 * the next sync would be answered at once, again and again) are applied:
 * the rest of it is not trusted. False: nothing of it can be read. */
static bool decode_answer(ts_agent *a, json_t *desired, ts_desired *ds)
{
    ts_err e;
    if (ts_desired_decode(desired, ds, &e) == 0)
        return true;
    double now = agent_mono_s();
    if (now - a->answer_refused_said_s >= 60.0) {
        a->answer_refused_said_s = now;
        fprintf(stderr, "tessera-agent: the controller's answer is outside the agent protocol "
                        "(only its tasks applied): %s\n", e.msg);
    }
    json_t *gen = json_pack("{s:O}", "gen", json_object_get(desired, "gen"));
    ts_desired g; /* a gen alone leaves nothing to free */
    if (gen && ts_desired_decode(gen, &g, NULL) == 0 && (g.present & TS_DS_BIT(TS_DS_GEN)))
        a->gen = g.gen;
    json_decref(gen);
    json_t *tasks = json_object_get(desired, "tasks");
    if (!json_is_array(tasks))
        return false;
    ds->tasks = tasks;
    ds->present = TS_DS_BIT(TS_DS_TASKS);
    return true;
}

static void reconcile(ts_agent *a, json_t *desired)
{
    ts_desired ds;
    if (!decode_answer(a, desired, &ds))
        return;
    if (ds.present & TS_DS_BIT(TS_DS_GEN)) /* what the next sync says it holds */
        a->gen = ds.gen;
    if (ds.present & TS_DS_BIT(TS_DS_LOST_AFTER_S))
        a->ctld_lost_s = ds.lost_after_s;
    json_t *tasks = ds.tasks;
    size_t nt = json_array_size(tasks), i;
    /* each task decoded once (a refused one: only what names it) */
    ts_desired_task *d = calloc(nt + 1, sizeof *d);
    if (!d) { /* out of memory: the next answer is applied */
        ts_desired_fini(&ds);
        return;
    }
    double now = agent_mono_s();
    agent_apply_mig(a, &ds);
    agent_net_peers_apply(a, &ds);
    agent_prefetch_apply(a, &ds);
    agent_net_services_apply(a, &ds);
    agent_answer_logs(a, &ds);
    for (i = 0; i < nt; i++) {
        char where[32];
        ts_err e;
        snprintf(where, sizeof where, "tasks[%zu]", i);
        json_t *t = json_array_get(tasks, i);
        if (ts_desired_task_decode(t, where, &d[i], &e) != 0) {
            /* what names it, if that much can be read: else d[i] names nothing */
            if (ts_desired_task_decode_id(t, where, &d[i], NULL) != 0)
                d[i].present = 0;
            refuse_task(a, &d[i], &e);
        } else
            reconcile_task(a, &ds, t, &d[i], now);
    }
    /* what is no longer wanted: stop it, and forget it once it ended */
    for (int k = a->ntasks - 1; k >= 0; k--) {
        local_task *lt = &a->tasks[k];
        bool wanted = false;
        for (i = 0; i < nt && !wanted; i++)
            wanted = desired_is(&d[i], lt);
        if (wanted)
            continue;
        if (lt->t && lt->st.phase != TS_TASK_EXITED) {
            if (!lt->stop_requested) {
                ts_err e;
                lt->stop_requested = true;
                agent_task_preempt_begin(lt->t, SIGTERM, 0.0, now, &e);
            }
            continue;
        }
        agent_task_forget(a, k);
    }
    for (i = 0; i < nt; i++)
        ts_desired_task_fini(&d[i]);
    free(d);
    /* after the tasks: a session may be for one that started just now */
    agent_sessions(a, &ds);
    ts_desired_fini(&ds);
}

/* ---- one step ------------------------------------------------------------------- */

/* The controller refused a sync as too large (its limit is smaller than the
 * agent's budget): the next is never the same body. The output answers say
 * they were refused, and the budget halves, down to its floor. */
static void body_refused(ts_agent *a)
{
    agent_answers_drop(&a->log_answers, "the controller refused the agent's sync carrying it "
                                       "as too large (HTTP 413)");
    a->body_max /= 2;
    if (a->body_max < TS_AGENT_BODY_MIN_BYTES)
        a->body_max = TS_AGENT_BODY_MIN_BYTES;
    fprintf(stderr, "tessera-agent: the controller refused a sync as too large (HTTP 413): "
                    "its output answers are dropped; syncs now carry at most %zu bytes\n",
            a->body_max);
}

/* After an exchange with the controller in use: a failure without an
 * answer (connection, timeout) or a 503 moves to another one - the leader
 * a standby names, else the next of the list - where the agent registers
 * again. Any other answer, an error included, came from a controller that
 * serves: the agent stays. A switch is said in err's message. */
static void after_exchange(ts_agent *a, int rc, long status, json_t *ans, ts_err *err)
{
    a->switched = false;
    if (rc == 0) {
        agent_ctls_ok(&a->cfg.ctls);
        a->quick_retries = 0;
        return;
    }
    if (status != 0 && status != 503)
        return;
    json_t *e = json_object_get(ans, "error");
    const char *code = json_string_value(json_object_get(e, "code"));
    bool standby = status == 503 && code && strcmp(code, "standby") == 0;
    const char *leader = standby ? json_string_value(json_object_get(e, "leader")) : NULL;
    char was[TS_CTL_URL_MAX];
    snprintf(was, sizeof was, "%s", agent_ctls_url(&a->cfg.ctls));
    if (!agent_ctls_fail(&a->cfg.ctls, leader))
        return;
    a->switched = true;
    a->registered = false; /* the new one learns from the registration what runs here */
    /* the switch, said on the failure's own line */
    char msg[TS_ERR_MSG_MAX];
    snprintf(msg, sizeof msg, "%s", err->msg);
    const char *now = agent_ctls_url(&a->cfg.ctls);
    if (standby && agent_ctls_url_ok(leader) && strcmp(leader, was) != 0)
        ts_err_set(err, TS_EIO, "%s (a standby; switching to the leader it names, %s)", msg,
                   now);
    else
        ts_err_set(err, TS_EIO, "%s (%s; switching to %s)", msg,
                   standby ? "a standby" : status ? "unavailable" : "no answer", now);
}

bool agent_retry_now(ts_agent *a)
{
    /* a switch to another controller, or a registration a restarted one
     * asked for: at most once per controller before the pause */
    if ((a->switched || a->register_now) && a->quick_retries < a->cfg.ctls.n) {
        a->quick_retries++;
        return true;
    }
    a->quick_retries = 0;
    return false;
}

double agent_pause_s(ts_agent *a)
{
    return agent_ctls_pause_s(&a->cfg.ctls);
}

/* A sync's body through the protocol's codec: the tasks' reports, the
 * node's health, the MIG and hook errors (drain_sent), the prefetches, the
 * image store when it changed since the controller last took it (*imgs:
 * that list, kept once taken; the controller forgets evicted images) and
 * the output answers. NULL: out of memory. */
static json_t *sync_body(ts_agent *a, bool busy, const char *drain_sent, json_t **imgs)
{
    json_t *tasks = report(a); /* first: it may begin stops whose ends bound the wait */
    ts_sync_prefetch pf[sizeof a->prefetch / sizeof a->prefetch[0]];
    ts_sync s = {.present = TS_SY_BIT(TS_SY_NODE) | TS_SY_BIT(TS_SY_GEN) |
                            TS_SY_BIT(TS_SY_TASKS) | TS_SY_BIT(TS_SY_WAIT_S) |
                            TS_SY_BIT(TS_SY_SEQ),
                 .node = a->cfg.node,
                 .gen = (int64_t)a->gen,
                 .tasks = tasks,
                 .wait_s = a->leaving ? 0.0
                           : busy    ? wait_for(a, TS_AGENT_WAIT_BUSY_S)
                                     : TS_AGENT_WAIT_IDLE_S,
                 .leaving = a->leaving,
                 .seq = (int64_t)++a->report_seq,
                 .health = a->node->health ? a->node->health(a->node->health_ctx) : NULL,
                 .mig_error = a->mig_error,
                 .drain = drain_sent,
                 .prefetch = pf,
                 .nprefetch = agent_prefetch_report(a, pf),
                 /* the output answers (agent_answer_logs), typed: the fit below cuts them */
                 .logs = a->log_answers.ans, .nlogs = a->log_answers.n};
    s.present |= (a->leaving ? TS_SY_BIT(TS_SY_LEAVING) : 0) |
                 (s.health ? TS_SY_BIT(TS_SY_HEALTH) : 0) |
                 (s.nlogs ? TS_SY_BIT(TS_SY_LOGS) : 0) |
                 (a->mig_error[0] ? TS_SY_BIT(TS_SY_MIG_ERROR) : 0) |
                 (drain_sent[0] ? TS_SY_BIT(TS_SY_DRAIN) : 0) |
                 (s.nprefetch ? TS_SY_BIT(TS_SY_PREFETCH) : 0);
    s.nimages = agent_image_store_list(&a->images, TS_AGENT_IMAGES_LISTED_MAX, &s.images);
    if (s.nimages >= 0) {
        ts_sync only = {.present = TS_SY_BIT(TS_SY_IMAGES), .images = s.images,
                        .nimages = s.nimages};
        json_t *listed = ts_sync_encode(&only);
        *imgs = json_incref(json_object_get(listed, "images"));
        json_decref(listed);
    }
    if (*imgs && a->images_sent && json_equal(*imgs, a->images_sent)) {
        json_decref(*imgs);
        *imgs = NULL;
    }
    s.present |= *imgs ? TS_SY_BIT(TS_SY_IMAGES) : 0;
    json_t *body = tasks ? ts_sync_encode(&s) : NULL;
    agent_image_list_free(s.images, s.nimages);
    json_decref(tasks);
    if (body) /* within the protocol's size: answers cut or dropped, never the reports */
        agent_sync_fit(body, &a->log_answers, a->body_max);
    return body;
}

int agent_step(ts_agent *a, ts_err *err)
{
    long status = 0;
    json_t *ans = NULL;
    int rc;
    a->register_now = false;
    if (!a->registered) {
        json_t *tasks = report(a);
        ts_sync reg = {.present = TS_SY_BIT(TS_SY_NODE) | TS_SY_BIT(TS_SY_DISCOVERY) |
                                  TS_SY_BIT(TS_SY_TASKS) | TS_SY_BIT(TS_SY_SEQ),
                       .node = a->cfg.node,
                       .discovery = a->node->discovery,
                       .tasks = tasks,
                       .seq = (int64_t)++a->report_seq,
                       .agent = a->identity};
        if (a->identity[0])
            reg.present |= TS_SY_BIT(TS_SY_AGENT);
        json_t *body = tasks ? ts_sync_encode(&reg) : NULL;
        json_decref(tasks);
        if (!body)
            return ts_err_set(err, TS_ENOMEM, "register: out of memory");
        agent_sync_fit(body, NULL, a->body_max);
        rc = agent_post(a, "/v1/agent/register", body, &status, &ans, 30.0, err);
        json_decref(body);
        if (rc == 0) {
            a->registered = true;
            json_decref(a->images_sent); /* the controller's knowledge starts afresh */
            a->images_sent = NULL;
            agent_heard_from_controller(a);
            reconcile(a, ans); /* its gen too */
        }
    } else {
        bool busy = a->ntasks > 0 && !a->leaving;
        char drain_sent[sizeof a->drain_why]; /* a hook failed (hooks.c): until answered */
        snprintf(drain_sent, sizeof drain_sent, "%s", a->drain_why);
        json_t *imgs = NULL;
        json_t *body = sync_body(a, busy, drain_sent, &imgs);
        if (!body)
            return json_decref(imgs), ts_err_set(err, TS_ENOMEM, "sync: out of memory");
        /* never wait past the moment the tasks must stop (below) */
        double timeout = TS_AGENT_WAIT_IDLE_S + 30.0;
        if (a->cfg.ctls.n > 1) /* a hung controller must not keep the agent from the others */
            timeout = (busy ? TS_AGENT_WAIT_BUSY_S : TS_AGENT_WAIT_IDLE_S) +
                      TS_AGENT_ANSWER_SLACK_S;
        if (a->leaving) /* its last word: the controller answers at once, or not at all */
            timeout = TS_AGENT_WAIT_BUSY_S + 0.5;
        if (busy) {
            double left = agent_lost_limit(a) - (agent_mono_s() - a->last_ok_s);
            timeout = left < TS_AGENT_WAIT_BUSY_S + 0.5 ? TS_AGENT_WAIT_BUSY_S + 0.5
                      : left < timeout                  ? left
                                                        : timeout;
        }
        rc = agent_post_woken(a, "/v1/agent/sync", body, &status, &ans, timeout, busy, err);
        json_decref(body);
        if (rc == 0 && imgs) { /* taken */
            json_decref(a->images_sent);
            a->images_sent = json_incref(imgs);
        }
        json_decref(imgs);
        if (rc == AGENT_POST_WOKEN) { /* a task ended while the sync waited: the next reports it */
            agent_tell_metrics(a);
            return 0;
        }
        if (rc == 0) {
            agent_answers_clear(&a->log_answers); /* delivered */
            if (drain_sent[0] && strcmp(drain_sent, a->drain_why) == 0)
                a->drain_why[0] = '\0'; /* the node is drained: an admin resumes it */
            agent_heard_from_controller(a);
            if (!a->leaving) /* nothing starts as it stops */
                reconcile(a, ans); /* its gen too */
        } else if (status == 409) {
            a->registered = false; /* the controller restarted or declared us lost */
            a->register_now = true;
        } else if (status == 413) {
            body_refused(a);
        }
    }
    after_exchange(a, rc, status, ans, err);
    json_decref(ans);
    agent_tell_metrics(a);
    agent_mps_tidy(a);
    agent_cut_off_check(a, rc);
    return rc;
}

