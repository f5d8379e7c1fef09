/*
 * agent_image.c - a task with an image waits for it without stalling the
 * agent: the pull runs on a thread of its own while the agent's loop goes
 * on syncing, and the task starts at the first step after it is there.
 *
 * A pull is a small object shared by the loop and its thread, under its own
 * mutex: the thread fills the result and sets done; the loop reads it. A
 * task forgotten while its image is still coming (the job was cancelled)
 * abandons the pull: the thread frees the object when it ends. Outcomes:
 * the image is there (the task starts in it, and is a user of the image
 * until it is forgotten); the registry does not know it (the task fails with
 * reason image_not_found) or refuses the job's credentials (image_auth);
 * the registry is down or slow (the pull is tried
 * again with a doubling pause up to PULL_RETRY_MAX_S: the job waits, it is
 * not failed); a bad or too large image (the task fails, saying why).
 * A job's read-only data images (agent_data.c) come in the same pull, after
 * its image, with the same outcomes; a task with data and no image waits
 * for its data the same way.
 *
 * A prefetch (the desired state names the image of a job that waits for
 * its reservation on this node) is the same pull with no task: below the
 * rate the entry names (a share of the node's link in the cluster file),
 * else PREFETCH_RATE_BYTES_S, so that running jobs' traffic keeps the link, and
 * with no user registered: the job's tasks register when they start.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/agent_internal.h"
#include "tessera/name_list.h"
#include "tessera/tenant.h"

#define PULL_RETRY_FIRST_S 2.0
#define PULL_RETRY_MAX_S 60.0
#define PREFETCH_RATE_BYTES_S (16LL << 20)
#define PREFETCH_SLOTS ((int)(sizeof ((ts_agent *)0)->prefetch / sizeof ((ts_agent *)0)->prefetch[0]))

struct agent_pull {
    pthread_mutex_t mu;
    bool done, abandoned;
    int rc;
    ts_err err;
    int nrefs;                  /* the image (when has_image) first, then the data */
    bool has_image;
    ts_image_ref refs[1 + TS_AGENT_DATA_MAX];
    ts_image imgs[1 + TS_AGENT_DATA_MAX];
    bool plain_http[1 + TS_AGENT_DATA_MAX];
    ts_image_store *store;
    struct ts_p2p *p2p;         /* NULL: from the registry only */
    long long rate_bytes_s;     /* > 0: a prefetch's cap */
    char ca_file[512];
    io_cidr allow[TS_AGENT_REGISTRY_ALLOW_MAX]; /* what it may reach (ts_pull_opts.allow) */
    int nallow;
    char cred[1024];            /* "user:password" or "", wiped when freed */
    char task_id[64];           /* the task that will use the image; "" a prefetch */
    long long bytes_done, bytes_total;
    long long base_done, cur_total; /* the refs pulled before this one; this one's total */
};

static void on_progress(void *ctx, long long done, long long total)
{
    struct agent_pull *p = ctx;
    pthread_mutex_lock(&p->mu);
    p->cur_total = total;
    p->bytes_done = p->base_done + done;
    p->bytes_total = p->base_done + total;
    pthread_mutex_unlock(&p->mu);
}

/* Releases the images of refs [0, n) this pull registered its task on. */
static void release_pulled(struct agent_pull *p, int n)
{
    for (int k = 0; p->task_id[0] && k < n; k++) /* a prefetch registered none */
        agent_image_release(p->store, p->imgs[k].digest, p->task_id);
}

static void *pull_main(void *arg)
{
    struct agent_pull *p = arg;
    ts_pull_opts o = {.ca_file = p->ca_file[0] ? p->ca_file : NULL,
                      .progress = on_progress, .progress_ctx = p,
                      .use_as = p->task_id[0] ? p->task_id : NULL, .p2p = p->p2p,
                      .rate_bytes_s = p->rate_bytes_s, .guard = true, .allow = p->allow,
                      .nallow = p->nallow};
    char *colon = strchr(p->cred, ':');
    const char *user = NULL, *password = NULL;
    if (colon) {
        *colon = '\0';
        user = p->cred;
        password = colon + 1;
    }
    ts_err err = {0};
    int rc = 0, k;
    for (k = 0; k < p->nrefs && !rc; k++) {
        /* the pull secret goes to the job's image registry only */
        bool own = p->has_image && !strcmp(p->refs[k].host, p->refs[0].host);
        o.user = own ? user : NULL;
        o.password = own ? password : NULL;
        o.plain_http = p->plain_http[k];
        rc = agent_image_pull(p->store, &p->refs[k], &o, &p->imgs[k], &err);
        if (rc && (k > 0 || !p->has_image))
            ts_err_prefix(&err, "data[%d]: ", k - (p->has_image ? 1 : 0));
        pthread_mutex_lock(&p->mu);
        p->base_done += p->cur_total;
        p->cur_total = 0;
        pthread_mutex_unlock(&p->mu);
    }
    if (rc) /* all or nothing: the next try starts again (what came is cached) */
        release_pulled(p, k - 1);
    pthread_mutex_lock(&p->mu);
    p->rc = rc;
    p->err = err;
    p->done = true;
    explicit_bzero(p->cred, sizeof p->cred);
    bool gone = p->abandoned;
    pthread_mutex_unlock(&p->mu);
    if (gone) {
        if (rc == 0) /* its task was forgotten meanwhile */
            release_pulled(p, p->nrefs);
        pthread_mutex_destroy(&p->mu);
        free(p);
    }
    return NULL;
}

/* A pull of refs[0..n) (has_image: refs[0] is the job's image, its pull
 * secret cred goes to its registry only) on a thread of its own; task_id ""
 * for a prefetch, which registers no user; rate_bytes_s > 0 caps it. */
static struct agent_pull *pull_new(ts_agent *a, const ts_image_ref *refs, int n, bool has_image,
                                   const char *cred, const char *task_id,
                                   long long rate_bytes_s)
{
    struct agent_pull *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    pthread_mutex_init(&p->mu, NULL);
    p->has_image = has_image;
    for (int k = 0; k < n && k < 1 + TS_AGENT_DATA_MAX; k++) {
        p->refs[p->nrefs] = refs[k];
        p->plain_http[p->nrefs++] = ts_name_listed(a->cfg.plain_http_registries, refs[k].host);
    }
    p->store = &a->images;
    p->p2p = a->p2p;
    p->rate_bytes_s = rate_bytes_s;
    snprintf(p->ca_file, sizeof p->ca_file, "%s", a->cfg.ca_file);
    memcpy(p->allow, a->cfg.registry_allow, sizeof p->allow);
    p->nallow = a->cfg.nregistry_allow;
    if (cred)
        snprintf(p->cred, sizeof p->cred, "%s", cred);
    snprintf(p->task_id, sizeof p->task_id, "%s", task_id);
    pthread_t th;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&th, &at, pull_main, p);
    pthread_attr_destroy(&at);
    if (rc != 0) {
        pthread_mutex_destroy(&p->mu);
        free(p);
        return NULL;
    }
    return p;
}

/* The task's image and its data, in one pull. */
static int pull_begin(ts_agent *a, local_task *lt)
{
    ts_image_ref refs[1 + TS_AGENT_DATA_MAX];
    int n = 0;
    ts_desired_task d;
    ts_err de;
    /* decoded and checked when the task came (agent_image_wait): read again */
    if (ts_desired_task_decode(lt->waiting, "task", &d, &de) != 0)
        return -1;
    bool has_image = d.image != NULL;
    if (has_image)
        refs[n++] = lt->image_ref;
    char why[TS_ERR_MSG_MAX] = "";
    bool ok = agent_data_read(lt, &d, refs + n, why, sizeof why);
    ts_desired_task_fini(&d);
    if (!ok)
        return -1;
    n += lt->ndata;
    char id[64];
    snprintf(id, sizeof id, "j%lld-r%d", (long long)lt->job, lt->rank);
    lt->pull = pull_new(a, refs, n, has_image, lt->image_cred, id, 0);
    return lt->pull ? 0 : -1;
}

/* Lets go of a pull: freed now when done, else by its thread when it ends. */
static void pull_abandon(struct agent_pull *p)
{
    pthread_mutex_lock(&p->mu);
    bool done = p->done;
    p->abandoned = true;
    pthread_mutex_unlock(&p->mu);
    if (done) {
        pthread_mutex_destroy(&p->mu);
        free(p);
    }
}

void agent_prefetch_apply(ts_agent *a, const ts_desired *d)
{
    for (int s = 0; s < PREFETCH_SLOTS; s++) {
        struct agent_prefetch *pf = &a->prefetch[s];
        bool listed = false;
        for (int i = 0; i < d->nprefetch; i++)
            listed = listed || d->prefetch[i].job == pf->job;
        if (pf->job && !listed) {
            if (pf->pull)
                pull_abandon(pf->pull);
            memset(pf, 0, sizeof *pf);
        }
    }
    for (int i = 0; i < d->nprefetch; i++) {
        int64_t job = d->prefetch[i].job;
        const char *image = d->prefetch[i].image;
        int64_t rate = d->prefetch[i].rate_bytes_s;
        int free_slot = -1;
        bool known = false;
        for (int s = 0; s < PREFETCH_SLOTS; s++) {
            known = known || a->prefetch[s].job == job;
            if (!a->prefetch[s].job && free_slot < 0)
                free_slot = s;
        }
        ts_image_ref ref;
        ts_err err;
        if (known || job <= 0 || !image || free_slot < 0 || !a->images_ok ||
            ts_image_ref_parse(image, "image", &ref, &err) != 0)
            continue;
        struct agent_prefetch *pf = &a->prefetch[free_slot];
        long long cap = rate > 0 ? (long long)rate : PREFETCH_RATE_BYTES_S;
        pf->pull = pull_new(a, &ref, 1, true, NULL, "", cap);
        if (pf->pull) {
            pf->job = job;
            fprintf(stderr, "tessera-agent: job %lld: prefetching its image %s at %lld "
                    "bytes/s\n", (long long)job, image, cap);
        }
    }
}

int agent_prefetch_report(const ts_agent *a, ts_sync_prefetch *out)
{
    int n = 0;
    for (int s = 0; s < PREFETCH_SLOTS; s++) {
        const struct agent_prefetch *pf = &a->prefetch[s];
        if (pf->job)
            out[n++] = (ts_sync_prefetch){pf->job, pf->pull      ? TS_PREFETCH_FETCHING
                                                   : pf->rc == 0 ? TS_PREFETCH_READY
                                                                 : TS_PREFETCH_FAILED};
    }
    return n;
}

static void prefetch_poll(ts_agent *a)
{
    for (int s = 0; s < PREFETCH_SLOTS; s++) {
        struct agent_prefetch *pf = &a->prefetch[s];
        if (!pf->pull)
            continue;
        struct agent_pull *p = pf->pull;
        pthread_mutex_lock(&p->mu);
        bool done = p->done;
        pthread_mutex_unlock(&p->mu);
        if (!done)
            continue;
        pf->rc = p->rc;
        if (p->rc == 0)
            fprintf(stderr, "tessera-agent: job %lld: its image is here ahead of its start\n",
                    (long long)pf->job);
        else
            fprintf(stderr, "tessera-agent: job %lld: prefetch of its image: %s\n",
                    (long long)pf->job, p->err.msg);
        pthread_mutex_destroy(&p->mu);
        free(p);
        pf->pull = NULL;
    }
}

static void wipe_cred(local_task *lt)
{
    if (lt->image_cred) {
        explicit_bzero(lt->image_cred, strlen(lt->image_cred));
        free(lt->image_cred);
        lt->image_cred = NULL;
    }
}

bool agent_image_wait(ts_agent *a, local_task *lt, const json_t *t, const ts_desired_task *d)
{
    const char *image = d->image;
    if (!image && d->ndata == 0)
        return false;
    ts_err e;
    if (image && ts_image_ref_parse(image, "image", &lt->image_ref, &e) != 0) {
        snprintf(lt->start_error, sizeof lt->start_error, "%s", e.msg);
        return true;
    }
    ts_image_ref data_refs[TS_AGENT_DATA_MAX];
    if (!agent_data_read(lt, d, data_refs, lt->start_error, sizeof lt->start_error))
        return true;
    if (!a->images_ok) {
        snprintf(lt->start_error, sizeof lt->start_error, "image: this node's image store "
                 "could not be opened: %.400s", a->images_error);
        return true;
    }
    const char *cred = d->image_credentials;
    if (cred && !strchr(cred, ':')) {
        snprintf(lt->start_error, sizeof lt->start_error, "image_pull_secret: its value must "
                 "be user:password");
        return true;
    }
    lt->image_cred = cred ? strdup(cred) : NULL;
    lt->waiting = json_deep_copy(t); /* read again at its start (agent_start_task_in) */
    if (lt->waiting) /* the secret stays in image_cred only */
        json_object_del(lt->waiting, "image_credentials");
    lt->pull_retry_s = PULL_RETRY_FIRST_S;
    if (!lt->waiting || pull_begin(a, lt) != 0) {
        snprintf(lt->start_error, sizeof lt->start_error, "image: cannot start its pull");
        json_decref(lt->waiting);
        lt->waiting = NULL;
    }
    return true;
}

void agent_images_poll(ts_agent *a, double now)
{
    prefetch_poll(a);
    for (int i = 0; i < a->ntasks; i++) {
        local_task *lt = &a->tasks[i];
        if (!lt->waiting)
            continue;
        if (!lt->pull) {
            if (now >= lt->pull_retry_at && pull_begin(a, lt) != 0)
                lt->pull_retry_at = now + lt->pull_retry_s;
            continue;
        }
        struct agent_pull *p = lt->pull;
        pthread_mutex_lock(&p->mu);
        bool done = p->done;
        lt->pull_done_bytes = p->bytes_done;
        lt->pull_total_bytes = p->bytes_total;
        pthread_mutex_unlock(&p->mu);
        if (!done)
            continue;
        lt->pull = NULL;
        int rc = p->rc;
        ts_err err = p->err;
        if (rc == 0) {
            int off = p->has_image ? 1 : 0;
            if (p->has_image)
                lt->image = p->imgs[0];
            for (int k = 0; k < lt->ndata && off + k < p->nrefs; k++) {
                snprintf(lt->data[k].digest, sizeof lt->data[k].digest, "%s",
                         p->imgs[off + k].digest);
                snprintf(lt->data[k].rootfs, sizeof lt->data[k].rootfs, "%s",
                         p->imgs[off + k].rootfs);
            }
        }
        bool has_image = p->has_image;
        pthread_mutex_destroy(&p->mu);
        free(p);
        if (rc == TS_EIO) { /* the registry is down or slow: the job waits */
            snprintf(lt->pull_note, sizeof lt->pull_note, "%s", err.msg);
            lt->pull_retry_at = now + lt->pull_retry_s;
            lt->pull_retry_s = lt->pull_retry_s * 2 > PULL_RETRY_MAX_S ? PULL_RETRY_MAX_S
                                                                      : lt->pull_retry_s * 2;
            continue;
        }
        json_t *t = lt->waiting;
        lt->waiting = NULL;
        wipe_cred(lt);
        if (rc == TS_ENOENT || rc == TS_EACCES) {
            snprintf(lt->start_error, sizeof lt->start_error, "%s", err.msg);
            snprintf(lt->launch_end, sizeof lt->launch_end, "%s",
                     rc == TS_EACCES ? "image_auth" : "image_not_found");
        } else if (rc != 0) {
            snprintf(lt->start_error, sizeof lt->start_error, "%s", err.msg);
        } else {
            lt->image_ready = has_image;
            lt->data_ready = lt->ndata > 0;
            lt->pulled = true;
            agent_image_trace("task j%lld-r%d image ready", (long long)lt->job, lt->rank);
            agent_start_task_in(a, lt, t);
        }
        json_decref(t);
    }
}

void agent_image_forget(ts_agent *a, local_task *lt)
{
    if (lt->pull) {
        struct agent_pull *p = lt->pull;
        pthread_mutex_lock(&p->mu);
        bool done = p->done;
        p->abandoned = true;
        pthread_mutex_unlock(&p->mu);
        if (done) {
            if (p->rc == 0) /* registered as its user by the pull */
                release_pulled(p, p->nrefs);
            pthread_mutex_destroy(&p->mu);
            free(p);
        }
        lt->pull = NULL;
    }
    json_decref(lt->waiting);
    lt->waiting = NULL;
    wipe_cred(lt);
    char id[64];
    snprintf(id, sizeof id, "j%lld-r%d", (long long)lt->job, lt->rank);
    agent_data_release(a, lt, id);
    if (lt->image_ready) {
        char dir[700];
        agent_image_release(&a->images, lt->image.digest, id);
        snprintf(dir, sizeof dir, "%s/%s", a->bundles, id);
        agent_bundle_remove(dir);
        lt->image_ready = false;
    }
}

void agent_container_user(const local_task *lt, const ts_desired_task *d, char *out, size_t n,
                          char *why, size_t wn)
{
    out[0] = '\0';
    const char *want = d->container_user;
    if (!want || !*want)
        return;
    char from_image[128] = "0"; /* an image without User runs as root, as Docker's */
    if (!strcmp(want, "image")) {
        json_t *cfg = json_load_file(lt->image.config_path, 0, NULL);
        const char *u = json_string_value(
            json_object_get(json_object_get(cfg, "config"), "User"));
        if (u && *u)
            snprintf(from_image, sizeof from_image, "%s", u);
        json_decref(cfg);
    }
    const char *s = strcmp(want, "image") ? want : from_image;
    int64_t uid, gid;
    if (!ts_container_user_parse(s, &uid, &gid)) {
        snprintf(why, wn, "user: the image's User \"%.64s\" is not uid[:gid] in numbers (a "
                 "name is not looked up in the image): give user: uid[:gid]", s);
        return;
    }
    ts_tenant_identity id = {.allow_root = d->allow_root};
    if (d->uid_range.n == 2) { /* the decoder holds a uid_range to two */
        id.has_uid_range = true;
        id.uid_min = d->uid_range.v[0];
        id.uid_max = d->uid_range.v[1];
    }
    bool has_uid = (d->present & TS_DT_BIT(TS_DT_UID)) && !d->uid_null;
    if (!ts_tenant_container_user_ok(&id, has_uid ? d->uid : -1, uid, gid)) {
        snprintf(why, wn, "user: %s (%lld:%lld) is not an identity its tenant may run as in an "
                 "image (uid and gid 0 need allow_root, another uid one of its uid_range)",
                 want, (long long)uid, (long long)gid);
        return;
    }
    snprintf(out, n, "%lld:%lld", (long long)uid, (long long)gid);
}
