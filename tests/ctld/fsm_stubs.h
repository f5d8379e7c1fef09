/*
 * fsm_stubs.h - the rest of tesserad, stubbed, for the tests of the job
 * state machine and of how jobs end (test_job_fsm.c, test_job_end.c), which
 * include the module under test first: each stub counts its calls.
 */
#ifndef TS_TEST_CTLD_FSM_STUBS_H
#define TS_TEST_CTLD_FSM_STUBS_H

static int unbinds, removes, touches, kicks, ended_notes;

void ctld_ended_note(ctld *c, const cjob *j, double now)
{
    (void)c;
    (void)j;
    (void)now;
    ended_notes++; /* a failed run on agents: ended_runs.c keeps its ranks */
}

void ctld_job_unbind(ctld *c, cjob *j, double now)
{
    (void)c;
    (void)now;
    unbinds++;
    free(j->allocs);
    j->allocs = NULL;
    free(j->row.placement_json);
    j->row.placement_json = NULL;
}
void ctld_job_remove(ctld *c, cjob *j)
{
    (void)c;
    (void)j;
    removes++; /* the test owns and frees the job */
}
void ctld_nodes_touch_job(ctld *c, const cjob *j)
{
    (void)c;
    (void)j;
    touches++;
}
void ctld_kick(ctld *c)
{
    (void)c;
    kicks++;
}
void ctld_settled_wait(ctld *c)
{
    (void)c; /* no cycle runs here */
}
void ctld_changer_wait(ctld *c)
{
    pthread_cond_wait(&c->committed, &c->mu);
}
void ctld_commit_wait(ctld *c)
{
    (void)c; /* no cycle, commit or swap here */
}
void ctld_inflight_enter(ctld *c)
{
    c->inflight++;
    pthread_mutex_unlock(&c->mu);
}
void ctld_inflight_leave(ctld *c)
{
    pthread_mutex_lock(&c->mu);
    c->inflight--;
}
void ctld_phase_moved(ctld *c)
{
    pthread_cond_broadcast(&c->committed);
}
void ctld_notify_change(ctld *c, const cjob *j, int from, const ts_job_row *to, double now)
{
    (void)c, (void)j, (void)from, (void)to, (void)now;
}
void ctld_queued_note(ctld *c, cjob *j, int from, int to)
{
    (void)c;
    (void)j;
    (void)from;
    (void)to;
}
cjob *ctld_job_find(ctld *c, int64_t id)
{
    (void)c;
    (void)id;
    return NULL;
}
int ctld_node_index_add(ctld *c, cjob *j)
{
    (void)c;
    (void)j;
    return 0;
}
double ctld_job_run_s(const cjob *j)
{
    (void)j;
    return 60.0;
}
char *ctld_run_detail(const cjob *j, double now)
{
    char buf[64];
    snprintf(buf, sizeof buf, "start=%.3f end=%.3f", j->row.start_s, now);
    return strdup(buf);
}
char *ctld_placement_json_allocs(const ctld *c, const ts_alloc *allocs, int n)
{
    (void)c;
    (void)allocs;
    (void)n;
    return strdup("[{\"node\":\"n1\"}]");
}

/* tenant networks (net.c): off in these tests */
int ctld_net_place(ctld *c, const ctld_txn *t, const cjob *j, char **placement_json, ts_err *err)
{
    (void)c;
    (void)t;
    (void)j;
    (void)placement_json;
    (void)err;
    return 0;
}

int ctld_net_tenant(ctld *c, const char *tenant, int *ordinal, ts_err *err)
{
    (void)c;
    (void)tenant;
    (void)err;
    *ordinal = 0;
    return 0;
}

void ctld_net_bind(cjob *j) { (void)j; }

/* elastic jobs (elastic.c): no job here is resized */
int ctld_elastic_apply(ctld *c, cjob *j, ts_err *err)
{
    (void)c;
    (void)j;
    (void)err;
    return 0;
}

#endif
