/*
 * http.h - internal: the HTTP side of tesserad: callers, requests and replies, the
 * handlers' helpers (http.c, router.c, routes.c, render.c, metrics.c, auth.c).
 */
#ifndef TS_CTLD_HTTP_H
#define TS_CTLD_HTTP_H

#include "ctld/ctld.h"

/* ---- HTTP (http.c, routes.c, render.c, metrics.c, auth.c) ------------------ */

typedef struct ctld_caller {
    char name[TS_STORE_NAME_MAX];
    int role;
    char tenant[TS_STORE_NAME_MAX];
    char unix_user[TS_STORE_NAME_MAX]; /* its tasks' Unix user; "" = none (uid meaningless) */
    int64_t uid;
    double expires_s;                  /* 0 = never */
    int64_t step_job;                  /* a step credential's job (steps.h); 0 = an API token */
} ctld_caller;

int ctld_http_start(ctld *c, ts_err *err);
void ctld_http_stop(ctld *c);

typedef struct ctld_reply {
    int status;
    char *body;                  /* malloc'd */
    const char *content_type;
    char retry_after[16];
    char allow[64];              /* a 405's Allow header ("GET, POST") */
    char next_cursor[32];        /* X-Next-Cursor of a paged non-JSON answer ("" = none) */
    bool close;                  /* close the connection once this is sent */
    uintptr_t upgrade;           /* 101: the connection becomes this session stream's side
                                  * (sessions.c); 0 = an ordinary answer */
} ctld_reply;

/* The query parameters the API reads (NULL when absent). */
typedef struct ctld_query {
    const char *tenant, *state, *owner, *limit, *cursor, *from, *to;
    const char *rank, *stream, *tail, *offset; /* GET /v1/jobs/{id}/logs */
    const char *scope;                /* DELETE /v1/secrets/{name} */
    const char *format;               /* GET /v1/acct: json or csv */
    const char *step, *steps;         /* GET /v1/jobs/{id}/steps?step=, /v1/acct?steps= */
    const char *order;                /* GET /v1/jobs: oldest (default) or newest first */
} ctld_query;

typedef struct ctld_request {
    const ctld_caller *who;
    const char *method;
    const char *url;
    ctld_query q;
    const char *content_type;
    const char *idem_key;
    const char *session_secret;  /* X-Tessera-Session-Secret (an agent's session stream) */
    const char *body;
    size_t len;
    /* the path's parameters, filled by the router (router.h) from its route's pattern */
    int64_t id;                  /* {id}, checked 1..INT64_MAX; 0 when none */
    const char *name;            /* {name}; NULL when none */
    const char *action;          /* the literal segment after a parameter ("cancel"); "" */
} ctld_request;

/* sessions.c: interactive sessions (docs/interactive.md). POST
 * /v1/jobs/{id}/sessions for a job the caller may see (row): checks who
 * may, puts the session on its rank's node and answers 101 with
 * r->upgrade set; the stream waits for the node's agent. Not under mu. */
void ctld_session_open(ctld *c, const ctld_request *rq, const ts_job_row *row, ctld_reply *r);
/* POST /v1/agent/stream/{name}: a node's agent opens its side of a session. */
void ctld_session_agent(ctld *c, const ctld_request *rq, ctld_reply *r);
/* Sets doc's "sessions": those waiting for node n's agent, for its
 * desired state; under its a->mu (takes the sessions' own lock inside
 * it). 0, -1 out of memory. */
int ctld_sessions_wanted(ctld *c, int n, json_t *doc);
/* Wipes the sessions' secrets in doc (explicit_bzero) and takes its
 * "sessions" out, once the answer carrying them is written. */
void ctld_sessions_forget(json_t *doc);
/* From the HTTP server's polling thread: the connection of tag became a
 * raw stream (fd; extra: bytes already read past the request). */
struct MHD_UpgradeResponseHandle;
void ctld_session_upgraded(ctld *c, uintptr_t tag, int fd, const char *extra, size_t nextra,
                           struct MHD_UpgradeResponseHandle *urh);
/* Starts (at the HTTP server's start) and stops (before the server stops:
 * every relay ends) the sessions' table. */
int ctld_sessions_start(ctld *c);
void ctld_sessions_stop(ctld *c);
/* The number of sessions being relayed or waiting (for /metrics). */
int ctld_sessions_count(ctld *c);

/* GET /v1/jobs/{id}/logs for a job the caller may see (row): a running
 * rank's output fetched from its agent, else the tail its agent reported
 * when the rank ended. Not under mu. */
void ctld_job_logs(ctld *c, const ctld_request *rq, const ts_job_row *row, ctld_reply *r);

/* notify.c: webhooks of jobs' state changes. open at start, close at
 * shutdown (waits for the delivery workers); change is called under mu
 * where a job's new row is applied, and never waits on a delivery. */
int ctld_notify_open(ctld *c);
void ctld_notify_close(ctld *c);
void ctld_notify_change(ctld *c, const cjob *j, int from, const ts_job_row *to, double now);
struct sockaddr;
/* webhook_dest.c: whether a webhook may connect to sa (not loopback,
 * link-local, unspecified or multicast unless webhooks.allow admits it);
 * why (wn bytes) says why not. */
bool ctld_webhook_dest_ok(const ctld_config *cfg, const struct sockaddr *sa, char *why,
                          size_t wn);

/* GET /v1/acct: one accounting row per job the caller may see (acct.c). */
void ctld_acct(ctld *c, const ctld_request *rq, ctld_reply *r);
/* Routes one authenticated request by the route table (router.h, router.c). */
void ctld_route(ctld *c, const ctld_request *rq, ctld_reply *out);
/* array_lazy.c: large arrays' pending elements that are not jobs yet.
 * Under mu: ctld_array_lazy (job id is such an element), ctld_array_lazy_row
 * (its row as it would be stored, owned by the caller; TS_ENOENT when it is
 * not one), ctld_arrays_queued (a tenant's such elements) and
 * ctld_arrays_queued_bytes (their specs' bytes, each counted), ctld_arrays_render
 * (one entry per array the filter matches, for GET /v1/jobs), ctld_lazy_new
 * (a record from the stored row of its first element) and ctld_lazy_add
 * (c owns it from then on, or it is freed: TS_ENOMEM). Not under mu:
 * ctld_arrays_fill (loop.c's filler thread, after each cycle),
 * ctld_array_take (makes element id a job if it is such an element; 0 too
 * when it is not), ctld_array_cancel_rest (stores every such element of the
 * array as cancelled; *cancelled grows by their count), ctld_arrays_restore
 * (at open). */
bool ctld_array_lazy(ctld *c, int64_t id);
int ctld_array_lazy_row(ctld *c, int64_t id, ts_job_row *out);
int ctld_arrays_queued(const ctld *c, const char *tenant);
int64_t ctld_arrays_queued_bytes(const ctld *c, const char *tenant);
json_t *ctld_arrays_render(ctld *c, const char *tenant, const char *owner);
ctld_lazy *ctld_lazy_new(const ts_job_row *first, int size, int next, int throttle);
TS_MUST_CHECK int ctld_lazy_add(ctld *c, ctld_lazy *a);
void ctld_arrays_fill(ctld *c);
TS_MUST_CHECK int ctld_array_take(ctld *c, int64_t id, ts_err *err);
TS_MUST_CHECK int ctld_array_cancel_rest(ctld *c, int64_t array, int *cancelled, ts_err *err);
TS_MUST_CHECK int ctld_arrays_restore(ctld *c, ts_err *err);
void ctld_arrays_free(ctld *c);
/* state.c, not under mu: adds n stored pending rows as jobs (their strings
 * move into the jobs; *added counts those that did, in order). With share
 * (not NULL) every job takes a reference to its spec instead of parsing its
 * own. */
TS_MUST_CHECK int ctld_jobs_adopt(ctld *c, ts_job_row *rows, int n, ctld_spec_share *share,
                                  int *added, ts_err *err);
/* arrays.c: POST /v1/arrays/{id}/cancel. ctld_array_cancel (not under mu)
 * cancels every active element of the array whose first element is job
 * `array` (span elements), by the token named by (NULL: the controller);
 * *cancelled counts them. */
void ctld_array_route(ctld *c, const ctld_request *rq, ctld_reply *out);
/* job_update.c: PATCH /v1/jobs/{id} for a job the caller sees (row, as
 * read); content: whether the caller reads its content. Not under mu. */
void ctld_job_patch(ctld *c, const ctld_request *rq, const ts_job_row *row, bool content,
                    ctld_reply *r);
/* submit.c: POST /v1/jobs. ctld_dependency_ok: whether every job spec's
 * dependency names exists and is visible to w; false (r answered 400 naming
 * "dependency") otherwise. Not under mu. */
void ctld_jobs_submit(ctld *c, const ctld_request *rq, ctld_reply *r);
bool ctld_dependency_ok(ctld *c, const ctld_caller *w, const ts_job_spec *spec, ctld_reply *r);
/* routes.c: whether w reads every tenant's jobs (admins and cluster-viewers,
 * stored as role viewer with no tenant), and whether it reads tenant's. */
bool ctld_sees_all(const ctld_caller *w);
bool ctld_sees_tenant(const ctld_caller *w, const char *tenant);
/* bulk.c: POST /v1/jobs/cancel, every active job a filter matches. */
void ctld_jobs_cancel_bulk(ctld *c, const ctld_request *rq, ctld_reply *out);
TS_MUST_CHECK int ctld_array_cancel(ctld *c, int64_t array, int span, const char *by,
                                    int *cancelled, ts_err *err);
/* The agent endpoints (/v1/agent/register, /v1/agent/sync), agents.c. */
void ctld_agent_route(ctld *c, const ctld_request *rq, ctld_reply *out);
/* agents_answer.c: answers node n's register or sync (r: 200 with the node's
 * desired document and this answer's generation, clock, output requests and
 * sessions; 503 when out of memory). Called under the node's a->mu, which it
 * releases; the answer is written with no lock held. */
void ctld_agent_answer(ctld *c, int n, ctld_reply *r);
/* agents_answer.c: a registration of another agent (in's identity) than
 * node n's registered one while that one is heard from: true, r answered
 * 409 naming both (a second agent would start the node's tasks again).
 * Under the node's a->mu. */
bool ctld_agent_second(const ctld *c, int n, const ts_sync *in, double now, ctld_reply *r);
/* What every route a node's agent calls begins with (agents.c): the body
 * rq carries as a JSON object, from a node credential only; NULL with r
 * answered (403, 400 naming why). */
json_t *ctld_agent_body(const ctld_request *rq, ctld_reply *r);
/* The node the body names (name), checked against the caller's
 * credential; -1 with r answered (400 none, 404 not in the cluster, 403
 * another node's). */
int ctld_agent_node(const ctld *c, const ctld_request *rq, const char *name, ctld_reply *r);
void ctld_reply_json(ctld_reply *r, int status, json_t *doc); /* steals doc */
void ctld_reply_error(ctld_reply *r, int status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

json_t *ctld_render_job(const ctld *c, const ts_job_row *row, const cjob *active);
/* The same with the row's spec parsed already (ctld_render_spec, NULL for
 * none; the reference is taken): a spec may be 1 MiB, and parsing it is
 * work a caller does before taking the lock, not under it. */
json_t *ctld_render_spec(const ts_job_row *row);
json_t *ctld_render_job_parsed(const ctld *c, const ts_job_row *row, const cjob *active,
                               json_t *spec);
/* privacy.c (docs/secrets.md "Who sees what"). Under c->mu: whether caller w
 * reads the content (env, command, secrets, output) of a job of this tenant
 * and owner: its owner, admins, and the tenant's tenant-admins where its
 * policy says so. */
bool ctld_sees_content(const ctld *c, const ctld_caller *w, const char *tenant,
                       const char *owner);
/* routes.c: whether caller w, who sees the job (its tenant's, or an admin),
 * may cancel, hold, release or requeue a job of owner: admins, the tenant's
 * tenant-admins, and a user its own jobs only (as an update). */
bool ctld_may_manage(const ctld_caller *w, const char *owner);
/* The 403 for one who may not: "job 7 is "alice"'s: only its owner, ...
 * may cancel it" (what: job or array; verb: the action). */
void ctld_reply_not_owner(ctld_reply *r, const char *what, int64_t id, const char *owner,
                          const char *verb);
/* Replaces a rendered job's content fields by "hidden" and lists them in
 * "hidden"; a failed rank's last output quoted in its why and its rank's
 * reason reads "hidden" too. */
void ctld_privacy_redact_job(json_t *doc);
/* s with the rank's output it quotes (past CTLD_LAST_OUTPUT) as "hidden",
 * malloc'd; NULL when it quotes none (or out of memory). */
char *ctld_privacy_cut_output(const char *s);
/* Whether events of this kind carry content (a rank's output). */
bool ctld_event_is_content(const char *kind);
/* secrets_api.c: /v1/secrets; at submission, whether every secret the spec
 * names exists for its owner (false: a 400 naming it in r); under c->mu, a
 * starting rank's secret values into its desired task dt ("secrets", or
 * "secrets_error" naming a missing one), copied into dt's arena, which its
 * fini wipes. */
void ctld_secrets_route(ctld *c, const ctld_request *rq, ctld_reply *r);
bool ctld_spec_secrets_ok(ctld *c, const ctld_caller *w, const ts_job_spec *spec, ctld_reply *r);
void ctld_task_secrets(const ctld *c, const cjob *j, ctld_dtask *dt);
/* The job's image_pull_secret's value as t's image_credentials (docs/images.md). */
void ctld_task_image_secret(const ctld *c, const cjob *j, ctld_dtask *dt);
json_t *ctld_render_node(const ctld *c, int node);

/* GPUs each tenant is owed now (docs/scheduler.md, "The guarantee"):
 * owed[t] for t < tenants->n (the caller's array; 0 for every tenant but
 * only, when only >= 0); under mu (owed.c). */
void ctld_owed_gpus(const ctld *c, double *owed, int only);
/* The /metrics page (malloc'd). tenant NULL: every series; otherwise that
 * tenant's own series and the cluster-wide ones that count no tenant's jobs
 * or requests (docs/metrics.md "Who reads what"). */
char *ctld_metrics_text(ctld *c, const char *tenant);

/* Tokens: a new secret "tsk_" + 43 base64url characters; its SHA-256. */
int ctld_token_new_secret(char *out, size_t size);
/* resv.c: reservations. load reads the store's and hands them to the
 * scheduler (ctld_open); free drops them. ctld_resv_job (under mu): the id
 * of the reservation a job names, or TS_EINVAL naming `reservation` (none
 * of that name, a maintenance window, another tenant's, or a user not in its
 * list; tenant/owner NULL: not checked). The route serves GET, POST
 * /v1/reservations and DELETE /v1/reservations/{name}. */
int ctld_resv_load(ctld *c, ts_err *err);
void ctld_resv_free(ctld *c);
int ctld_resv_job(const ctld *c, const char *name, const char *tenant, const char *owner,
                  const char *run_user, int64_t *id, ts_err *err);
void ctld_resv_route(ctld *c, const ctld_request *rq, ctld_reply *r);
/* GET, POST /v1/tokens and DELETE /v1/tokens/{name} (tokens.c). */
void ctld_tokens_route(ctld *c, const ctld_request *rq, ctld_reply *r);
/* GET /v1/whoami (tokens.c). */
void ctld_whoami(const ctld_request *rq, ctld_reply *r);
/* "2027-01-31T12:00:00Z" (RFC 3339, any offset) or a duration from now
 * ("90d", as ctld_parse_duration) -> Unix seconds; TS_EINVAL. */
int ctld_parse_expiry(const char *s, double now_s, double *out);
/* Whether some node of the cluster is served by an agent (not virtual):
 * then a job needs a Unix identity to run. Under mu. */
bool ctld_has_agent_nodes(const ctld *c);
/* OpenID Connect (oidc.c): 0 and *who for a valid ID token; else
 * TS_EINVAL with why ("ID token: expired"), or TS_ENOENT when OIDC is off. */
int ctld_oidc_authenticate(ctld *c, const char *jwt, ctld_caller *who, char *why,
                           size_t why_size);
int ctld_oidc_init(ctld *c, ts_err *err);
void ctld_oidc_fini(ctld *c);
void ctld_token_hash(const char *secret, uint8_t hash[TS_TOKEN_HASH_BYTES]);
/* Forgets the cached tokens (after a revocation). */
void ctld_token_cache_clear(ctld *c);
/* The OpenAPI document (openapi.c). */
json_t *ctld_openapi(void);
/* Creates the admin token on first start and writes its secret to the file. */
int ctld_bootstrap_admin(ctld *c, ts_err *err);
/* Before the store opens: refuses a state_dir group or others may enter,
 * creates it 0700 when missing, and makes the state files (SQLite database,
 * WAL, SHM, admin token) 0600 whatever they were (auth.c). */
int ctld_state_secure(const ctld_config *cfg, ts_err *err);

/* POST /v1/agent/p2p and /v1/agent/p2p/live (p2p.c). */
void ctld_p2p_route(ctld *c, const ctld_request *rq, ctld_reply *r);
void ctld_p2p_live_route(ctld *c, const ctld_request *rq, ctld_reply *r);

#endif
