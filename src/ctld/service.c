/*
 * service.c - the GPU-seconds each job has attained, for the scheduler's las
 * order (docs/scheduler.md, "Attained-service order").
 *
 * A job's service is the sum over its runs of run time x the GPUs it held
 * (ts_sched_job_rate: a share its fraction, a MIG instance its slices); the
 * cycle adds the current run of a running job itself. tesserad adds a run
 * when it ends (ctld_job_unbind, the one place a running job lets its GPUs
 * go) and notes when the job began to wait again. Nothing new is stored:
 * after a restart the service of a job that ran before is rebuilt from its
 * "run-ended" events, which every end of a run already writes, and its wait
 * from its last "requeued" event.
 */
#include <stdio.h>
#include <string.h>

#include "ctld/ctld.h"

#define SERVICE_EVENTS_PAGE 500

void ctld_service_run_ended(ctld *c, cjob *j, double now)
{
    double ran = now - j->sj.start_s;
    if (j->sj.start_s > 0.0 && ran > 0.0)
        j->sj.attained_gpu_s += ran * ts_sched_job_rate(c->sched, &j->sj);
    j->sj.queued_s = now;
}

int ctld_service_restore(ctld *c, cjob *j, ts_err *err)
{
    if (j->row.preemptions <= 0)
        return 0; /* never stopped before its end: one run at most, the current */
    double ran_s = 0.0, queued_s = 0.0;
    int64_t after = 0;
    for (;;) {
        ts_event_row *ev = NULL;
        int n = 0;
        int rc = ts_store_event_list(c->store, j->row.id, after, SERVICE_EVENTS_PAGE, &ev, &n, err);
        if (rc != 0)
            return rc;
        for (int i = 0; i < n; i++) {
            after = ev[i].id;
            double start, end;
            if (strcmp(ev[i].kind, "run-ended") == 0 && ev[i].detail &&
                sscanf(ev[i].detail, "start=%lf end=%lf", &start, &end) == 2 && end > start &&
                start > 0.0)
                ran_s += end - start;
            else if (strcmp(ev[i].kind, "requeued") == 0)
                queued_s = ev[i].t_s;
        }
        ts_store_free_events(ev, n);
        if (n < SERVICE_EVENTS_PAGE)
            break;
    }
    /* the rate of its tasks; a MIG instance's slices are only known once
     * placed, so a waiting MIG job counts one slice (its level may be low) */
    j->sj.attained_gpu_s = ran_s * ts_sched_job_rate(c->sched, &j->sj);
    if (j->row.state != TS_JOB_RUNNING && j->row.state != TS_JOB_STOPPING)
        j->sj.queued_s = queued_s;
    return 0;
}
