/*
 * agent_load.c - many simulated node agents against one tesserad, from one
 * process (the load tool of bench/agent-load).
 *
 *   tessera-bench-agents --url URL --tokens FILE [--agents N] [--seconds S]
 *                        [--warmup S] [--ramp S] [--task-s S] [--json FILE]
 *
 * FILE has one "node secret" line per node (node credentials, role node);
 * the first N lines become agents. Each agent speaks docs/agent-protocol.md
 * like tessera-agent does, without processes: it registers (with a
 * discovery shaped like a real 8-GPU node's), then syncs in a loop with
 * wait_s 1, the heartbeat of an agent watching tasks. A task the desired
 * state says `run` is reported `running` until its duration passed (the
 * N of a `sleep N` command, else --task-s), then `exited` 0; a `stop` is
 * answered `stopped` / `checkpointed` at once; health is always healthy.
 *
 * One thread, libcurl multi on epoll, one keep-alive connection per
 * agent. Agents start registering spread over --ramp seconds; the
 * measurement window is the --seconds after --warmup. In it, every completed exchange (200)
 * ends a heartbeat gap: the time since the agent's previous completed one.
 * Prints "window-start" and "window-end" lines (flushed) so a driver can
 * sample the controller at those instants, then writes the figures as
 * JSON (--json, else stdout). Every wait is bounded: the tool stops at
 * warmup + seconds whatever the controller does.
 */
#include <curl/curl.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define SYNC_WAIT_S 1.0            /* the heartbeat asked of the controller */
#define REQUEST_TIMEOUT_MS 30000L  /* one exchange, long-poll included */
#define RETRY_AFTER_ERROR_S 0.5    /* an agent whose exchange failed waits this long */
#define POLL_MAX_MS 20             /* the loop looks at its timers this often at least */
#define GAP_OK_S 1.5               /* a heartbeat gap at most this long is on time */
#define NODE_GPUS 8
#define NVLINKS_PER_GPU 18         /* an H100 SXM's links (../shared/reference/gpu-facts.md) */
#define FDS_SPARE 64               /* descriptors beyond one per agent */
#define HTTP_CODES_MAX 16
#define EPOLL_BATCH 256
#define CURL_CODES_MAX 16
#define LATE_KEPT_MAX 1000        /* late gaps listed with their instant */

typedef struct sbuf {
    char *p;
    size_t len, cap;
} sbuf;

typedef struct task {
    long long job;
    int rank;
    double end_s;              /* when its simulated process exits */
    bool stopped;
} task;

typedef struct agent {
    char name[64];
    struct curl_slist *headers;
    CURL *h;
    char *discovery;           /* JSON, sent with every registration */
    bool registered, in_flight;
    long long gen;
    double next_s;             /* when to send the next request (not in flight) */
    double last_ok_s;          /* the previous completed exchange; 0 = none */
    sbuf req, ans;
    task *tasks;
    int ntasks, tasks_cap;
    double *gaps;              /* heartbeat gaps that ended in the window */
    int ngaps, gaps_cap;
    double max_gap_s;
    int errors;
} agent;

typedef struct counts {
    long code[HTTP_CODES_MAX];  /* HTTP statuses other than 200 */
    long code_n[HTTP_CODES_MAX];
    int ncode;
    int curl[CURL_CODES_MAX];   /* libcurl failures */
    long curl_n[CURL_CODES_MAX];
    int ncurl;
    long reregistered;          /* 409: register again */
    long exchanges, in_window;
    double late_at[LATE_KEPT_MAX], late_gap[LATE_KEPT_MAX]; /* gaps over GAP_OK_S */
    int nlate;
    long tasks_started, tasks_exited, tasks_stopped;
} counts;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static bool sbuf_put(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool sbuf_put(sbuf *b, const char *fmt, ...)
{
    for (int tries = 0; tries < 2; tries++) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0)
            return false;
        if (b->p && b->len + (size_t)n < b->cap) {
            b->len += (size_t)n;
            return true;
        }
        size_t cap = b->cap ? b->cap : 1024;
        while (cap < b->len + (size_t)n + 1)
            cap *= 2;
        char *np = realloc(b->p, cap);
        if (!np)
            return false;
        b->p = np;
        b->cap = cap;
    }
    return false;
}

static size_t sink(char *p, size_t sz, size_t n, void *u)
{
    sbuf *b = u;
    size_t k = sz * n;
    if (b->len + k + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + k + 1)
            cap *= 2;
        char *np = realloc(b->p, cap);
        if (!np)
            return 0; /* libcurl fails the transfer */
        b->p = np;
        b->cap = cap;
    }
    memcpy(b->p + b->len, p, k);
    b->len += k;
    b->p[b->len] = '\0';
    return k;
}

/* What a real agent's discovery holds for an 8-GPU NVLink node (the shape
 * of src/agent/discover.c), so the controller keeps as much per node. */
static char *discovery_json(int idx)
{
    json_t *gpus = json_array(), *topo = json_array();
    for (int g = 0; g < NODE_GPUS; g++) {
        char uuid[64], bus[32];
        snprintf(uuid, sizeof uuid, "GPU-%08x-0000-4000-8000-%012x", idx, g);
        snprintf(bus, sizeof bus, "00000000:%02X:00.0", 0x18 + g * 0x10);
        json_t *links = json_array();
        for (int l = 0; l < NVLINKS_PER_GPU; l++)
            json_array_append_new(links, json_pack("{s:i,s:b,s:s,s:s}", "link", l, "up", 1,
                                                   "remote_pci_bus_id", "00000000:00:00.0",
                                                   "remote_type", "switch"));
        json_array_append_new(
            gpus, json_pack("{s:i,s:s,s:s,s:s,s:I,s:s,s:o,s:{s:b,s:b,s:[]}}", "index", g, "uuid",
                            uuid, "name", "NVIDIA H100 80GB HBM3", "model", "H100-80GB",
                            "memory_bytes", (json_int_t)85899345920LL, "pci_bus_id", bus,
                            "nvlinks", links, "mig", "enabled", 0, "pending", 0, "instances"));
        json_t *row = json_array();
        for (int k = 0; k < NODE_GPUS; k++)
            json_array_append_new(row, json_string(k == g ? "self" : "nvlink"));
        json_array_append_new(topo, row);
    }
    json_t *d = json_pack("{s:i,s:I,s:s,s:o,s:o}", "cpus", 224, "memory_bytes",
                          (json_int_t)2199023255552LL, "driver_version", "550.54.15", "gpus",
                          gpus, "topology", topo);
    char *s = d ? json_dumps(d, JSON_COMPACT) : NULL;
    json_decref(d);
    return s;
}

/* The N of ["sleep", "N"], else the default. */
static double task_duration(json_t *t, double dflt)
{
    json_t *cmd = json_object_get(t, "command");
    const char *a0 = json_string_value(json_array_get(cmd, 0));
    const char *a1 = json_string_value(json_array_get(cmd, 1));
    if (a0 && a1 && strcmp(a0, "sleep") == 0) {
        double v = atof(a1);
        if (v > 0.0 && v < 3600.0)
            return v;
    }
    return dflt;
}

static task *task_find(agent *a, long long job, int rank)
{
    for (int i = 0; i < a->ntasks; i++)
        if (a->tasks[i].job == job && a->tasks[i].rank == rank)
            return &a->tasks[i];
    return NULL;
}

/* Applies a desired state: start what is new, stop what is asked to stop,
 * forget what is no longer wanted. */
static void reconcile(agent *a, json_t *ans, double now, double task_s, counts *k)
{
    a->gen = json_integer_value(json_object_get(ans, "gen"));
    json_t *want = json_object_get(ans, "tasks");
    size_t i;
    json_t *t;
    json_array_foreach(want, i, t)
    {
        long long job = json_integer_value(json_object_get(t, "job"));
        int rank = (int)json_integer_value(json_object_get(t, "rank"));
        const char *action = json_string_value(json_object_get(t, "action"));
        task *lt = task_find(a, job, rank);
        if (!lt && action && strcmp(action, "run") == 0) {
            if (a->ntasks == a->tasks_cap) {
                int cap = a->tasks_cap ? a->tasks_cap * 2 : 8;
                task *nt = realloc(a->tasks, (size_t)cap * sizeof *nt);
                if (!nt)
                    continue;
                a->tasks = nt;
                a->tasks_cap = cap;
            }
            a->tasks[a->ntasks++] = (task){job, rank, now + task_duration(t, task_s), false};
            k->tasks_started++;
        } else if (lt && !lt->stopped && action && strcmp(action, "stop") == 0) {
            lt->stopped = true;
            k->tasks_stopped++;
        }
    }
    for (int m = a->ntasks - 1; m >= 0; m--) {
        bool wanted = false;
        json_array_foreach(want, i, t)
        {
            wanted = wanted ||
                     (json_integer_value(json_object_get(t, "job")) == a->tasks[m].job &&
                      json_integer_value(json_object_get(t, "rank")) == a->tasks[m].rank);
        }
        if (wanted)
            continue;
        /* its job left the node: completed (every rank exited), failed or moved */
        k->tasks_exited += !a->tasks[m].stopped && now >= a->tasks[m].end_s;
        a->tasks[m] = a->tasks[--a->ntasks];
    }
}

/* The next request's body: register (with discovery) or sync. */
static bool build_request(agent *a, double now)
{
    a->req.len = 0;
    bool ok = a->registered ? sbuf_put(&a->req, "{\"node\":\"%s\",\"gen\":%lld,\"wait_s\":%g,"
                                       "\"health\":{\"verdict\":\"healthy\",\"reasons\":[]},"
                                       "\"tasks\":[", a->name, a->gen, SYNC_WAIT_S)
                            : sbuf_put(&a->req, "{\"node\":\"%s\",\"discovery\":%s,\"tasks\":[",
                                       a->name, a->discovery);
    for (int i = 0; ok && i < a->ntasks; i++) {
        const task *t = &a->tasks[i];
        const char *sep = i ? "," : "";
        if (t->stopped)
            ok = sbuf_put(&a->req, "%s{\"job\":%lld,\"rank\":%d,\"state\":\"stopped\","
                          "\"outcome\":\"checkpointed\"}", sep, t->job, t->rank);
        else if (now >= t->end_s)
            ok = sbuf_put(&a->req, "%s{\"job\":%lld,\"rank\":%d,\"state\":\"exited\","
                          "\"exit_code\":0}", sep, t->job, t->rank);
        else
            ok = sbuf_put(&a->req, "%s{\"job\":%lld,\"rank\":%d,\"state\":\"running\","
                          "\"gpu_util\":90}", sep, t->job, t->rank);
    }
    return ok && sbuf_put(&a->req, "]}");
}

static void count_code(counts *k, long code)
{
    for (int i = 0; i < k->ncode; i++)
        if (k->code[i] == code) {
            k->code_n[i]++;
            return;
        }
    if (k->ncode < HTTP_CODES_MAX) {
        k->code[k->ncode] = code;
        k->code_n[k->ncode++] = 1;
    }
}

static void count_curl(counts *k, int rc)
{
    for (int i = 0; i < k->ncurl; i++)
        if (k->curl[i] == rc) {
            k->curl_n[i]++;
            return;
        }
    if (k->ncurl < CURL_CODES_MAX) {
        k->curl[k->ncurl] = rc;
        k->curl_n[k->ncurl++] = 1;
    }
}

static bool start_request(CURLM *m, agent *a, const char *url, double now)
{
    if (!build_request(a, now))
        return false;
    char full[512];
    snprintf(full, sizeof full, "%s/v1/agent/%s", url, a->registered ? "sync" : "register");
    a->ans.len = 0;
    curl_easy_setopt(a->h, CURLOPT_URL, full);
    curl_easy_setopt(a->h, CURLOPT_HTTPHEADER, a->headers);
    curl_easy_setopt(a->h, CURLOPT_POSTFIELDS, a->req.p);
    curl_easy_setopt(a->h, CURLOPT_POSTFIELDSIZE, (long)a->req.len);
    curl_easy_setopt(a->h, CURLOPT_WRITEFUNCTION, sink);
    curl_easy_setopt(a->h, CURLOPT_WRITEDATA, &a->ans);
    curl_easy_setopt(a->h, CURLOPT_TIMEOUT_MS, REQUEST_TIMEOUT_MS);
    curl_easy_setopt(a->h, CURLOPT_PRIVATE, a);
    if (curl_multi_add_handle(m, a->h) != CURLM_OK)
        return false;
    a->in_flight = true;
    return true;
}

/* One exchange ended: record it, apply the answer, plan the next. */
static void finish(agent *a, CURLcode rc, double now, double w0, double w1, double task_s,
                   counts *k)
{
    a->in_flight = false;
    a->next_s = now;
    long code = 0;
    curl_easy_getinfo(a->h, CURLINFO_RESPONSE_CODE, &code);
    bool in_window = now >= w0 && now < w1;
    if (rc != CURLE_OK || code != 200) {
        if (in_window) {
            a->errors++;
            if (rc != CURLE_OK)
                count_curl(k, (int)rc);
            else
                count_code(k, code);
        }
        if (rc == CURLE_OK && code == 409 && a->registered) {
            a->registered = false; /* the controller lost us: register again at once */
            k->reregistered++;
        } else {
            a->next_s = now + RETRY_AFTER_ERROR_S;
        }
        return;
    }
    json_t *ans = json_loadb(a->ans.p ? a->ans.p : "", a->ans.len, 0, NULL);
    if (!json_is_object(ans)) {
        json_decref(ans);
        if (in_window) {
            a->errors++;
            count_code(k, -1); /* 200 without a JSON object */
        }
        a->next_s = now + RETRY_AFTER_ERROR_S;
        return;
    }
    a->registered = true;
    reconcile(a, ans, now, task_s, k);
    json_decref(ans);
    k->exchanges++;
    if (in_window) {
        k->in_window++;
        if (a->last_ok_s > 0.0) {
            double gap = now - a->last_ok_s;
            if (a->ngaps == a->gaps_cap) {
                int cap = a->gaps_cap ? a->gaps_cap * 2 : 128;
                double *ng = realloc(a->gaps, (size_t)cap * sizeof *ng);
                if (ng) {
                    a->gaps = ng;
                    a->gaps_cap = cap;
                }
            }
            if (a->ngaps < a->gaps_cap)
                a->gaps[a->ngaps++] = gap;
            if (gap > GAP_OK_S && k->nlate < LATE_KEPT_MAX) {
                /* when it ended, from the window's start: do late ones come together? */
                k->late_at[k->nlate] = now - w0;
                k->late_gap[k->nlate++] = gap;
            }
            if (gap > a->max_gap_s)
                a->max_gap_s = gap;
        }
    }
    a->last_ok_s = now;
}

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

static double pct(const double *v, long n, double p)
{
    if (n <= 0)
        return 0.0;
    long i = (long)ceil(p * (double)n) - 1;
    return v[i < 0 ? 0 : i >= n ? n - 1 : i];
}

/* Descriptors: one socket per agent plus spares; raises the soft limit to
 * what is needed (at most the hard limit). */
static int raise_nofile(int agents, char *why, size_t size)
{
    struct rlimit rl;
    rlim_t need = (rlim_t)agents + FDS_SPARE;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return 0;
    if (rl.rlim_cur >= need)
        return 0;
    if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < need) {
        snprintf(why, size, "RLIMIT_NOFILE: %d agents need %llu descriptors, the hard limit "
                 "is %llu", agents, (unsigned long long)need, (unsigned long long)rl.rlim_max);
        return -1;
    }
    rl.rlim_cur = need;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
        snprintf(why, size, "RLIMIT_NOFILE: cannot raise the soft limit to %llu",
                 (unsigned long long)need);
        return -1;
    }
    return 0;
}

static int load_tokens(const char *path, agent *ag, int n, char *why, size_t size)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(why, size, "--tokens %s: cannot open", path);
        return -1;
    }
    char line[512];
    int i = 0;
    while (i < n && fgets(line, sizeof line, f)) {
        char name[64], secret[256], hdr[320];
        if (sscanf(line, "%63s %255s", name, secret) != 2)
            continue;
        snprintf(ag[i].name, sizeof ag[i].name, "%s", name);
        snprintf(hdr, sizeof hdr, "Authorization: Bearer %s", secret);
        ag[i].headers = curl_slist_append(NULL, hdr);
        ag[i].headers = curl_slist_append(ag[i].headers, "Content-Type: application/json");
        ag[i].headers = curl_slist_append(ag[i].headers, "Expect:");
        i++;
    }
    fclose(f);
    if (i < n) {
        snprintf(why, size, "--tokens %s: %d node credentials, %d agents asked", path, i, n);
        return -1;
    }
    return 0;
}

static json_t *figures(agent *ag, int n, double window_s, const counts *k)
{
    long total = 0;
    for (int i = 0; i < n; i++)
        total += ag[i].ngaps;
    double *all = malloc((size_t)(total ? total : 1) * sizeof *all);
    double *maxes = malloc((size_t)n * sizeof *maxes);
    long off = 0;
    int on_time = 0, silent = 0;
    long errors = 0;
    for (int i = 0; all && maxes && i < n; i++) {
        memcpy(all + off, ag[i].gaps, (size_t)ag[i].ngaps * sizeof *all);
        off += ag[i].ngaps;
        maxes[i] = ag[i].max_gap_s;
        silent += ag[i].ngaps == 0;
        on_time += ag[i].ngaps > 0 && ag[i].max_gap_s <= GAP_OK_S && ag[i].errors == 0;
        errors += ag[i].errors;
    }
    if (!all || !maxes) {
        free(all);
        free(maxes);
        return NULL;
    }
    qsort(all, (size_t)total, sizeof *all, cmp_double);
    qsort(maxes, (size_t)n, sizeof *maxes, cmp_double);
    json_t *http = json_object(), *curl = json_object();
    for (int i = 0; i < k->ncode; i++) {
        char key[16];
        snprintf(key, sizeof key, "%ld", k->code[i]);
        json_object_set_new(http, key, json_integer(k->code_n[i]));
    }
    for (int i = 0; i < k->ncurl; i++)
        json_object_set_new(curl, curl_easy_strerror((CURLcode)k->curl[i]),
                            json_integer(k->curl_n[i]));
    json_t *o = json_pack(
        "{s:i,s:f,s:I,s:f,s:{s:I,s:f,s:f,s:f,s:f},s:{s:f,s:f,s:f},s:f,s:i,s:i,s:f,"
        "s:{s:I,s:o,s:o,s:I},s:{s:I,s:I,s:I}}",
        "agents", n, "window_s", window_s, "syncs", (json_int_t)k->in_window, "syncs_per_s",
        k->in_window / window_s, "gap_s", "count", (json_int_t)total, "p50", pct(all, total, 0.50),
        "p99", pct(all, total, 0.99), "p999", pct(all, total, 0.999), "max",
        total ? all[total - 1] : 0.0, "agent_max_gap_s", "p50", pct(maxes, n, 0.50), "p99",
        pct(maxes, n, 0.99), "max", maxes[n - 1], "gap_ok_s", GAP_OK_S, "agents_on_time",
        on_time, "agents_without_sync", silent, "on_time_fraction", (double)on_time / n,
        "errors", "total", (json_int_t)errors, "http", http, "curl", curl, "reregistered",
        (json_int_t)k->reregistered, "tasks", "started", (json_int_t)k->tasks_started,
        "exited", (json_int_t)k->tasks_exited, "stopped", (json_int_t)k->tasks_stopped);
    free(all);
    free(maxes);
    return o;
}

/* libcurl's multi socket interface on epoll: one wake-up per ready socket,
 * not a scan of every connection. */
typedef struct loop {
    int ep;
    double timer_s; /* when libcurl wants its timeout handled; -1 none */
} loop;

static int on_socket(CURL *h, curl_socket_t fd, int what, void *userp, void *socketp)
{
    (void)h;
    (void)socketp;
    loop *lp = userp;
    if (what == CURL_POLL_REMOVE) {
        epoll_ctl(lp->ep, EPOLL_CTL_DEL, fd, NULL);
        return 0;
    }
    struct epoll_event ev = {.data.fd = fd};
    ev.events = (what & CURL_POLL_IN ? EPOLLIN : 0u) | (what & CURL_POLL_OUT ? EPOLLOUT : 0u);
    if (epoll_ctl(lp->ep, EPOLL_CTL_MOD, fd, &ev) != 0)
        epoll_ctl(lp->ep, EPOLL_CTL_ADD, fd, &ev);
    return 0;
}

static int on_timer(CURLM *m, long timeout_ms, void *userp)
{
    (void)m;
    loop *lp = userp;
    lp->timer_s = timeout_ms < 0 ? -1.0 : now_s() + (double)timeout_ms / 1000.0;
    return 0;
}

int main(int argc, char **argv)
{
    const char *url = NULL, *tokens = NULL, *jsonf = NULL;
    int n = 1000;
    double seconds = 60.0, warmup = 15.0, ramp = 5.0, task_s = 3.0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--url") == 0)
            url = argv[i + 1];
        else if (strcmp(argv[i], "--tokens") == 0)
            tokens = argv[i + 1];
        else if (strcmp(argv[i], "--agents") == 0)
            n = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--seconds") == 0)
            seconds = atof(argv[i + 1]);
        else if (strcmp(argv[i], "--warmup") == 0)
            warmup = atof(argv[i + 1]);
        else if (strcmp(argv[i], "--ramp") == 0)
            ramp = atof(argv[i + 1]);
        else if (strcmp(argv[i], "--task-s") == 0)
            task_s = atof(argv[i + 1]);
        else if (strcmp(argv[i], "--json") == 0)
            jsonf = argv[i + 1];
        else {
            fprintf(stderr, "%s: unknown option %s\n", argv[0], argv[i]);
            return 2;
        }
    }
    if (!url || !tokens || n < 1 || n > 100000 || !(seconds > 0.0) || seconds > 86400.0 ||
        warmup < 0.0 || ramp < 0.0 || ramp > warmup || !(task_s > 0.0)) {
        fprintf(stderr, "usage: %s --url URL --tokens FILE [--agents N] [--seconds S] "
                        "[--warmup S] [--ramp S<=warmup] [--task-s S] [--json FILE]\n", argv[0]);
        return 2;
    }
    char why[256];
    if (raise_nofile(n, why, sizeof why) != 0) {
        fprintf(stderr, "%s: %s\n", argv[0], why);
        return 2;
    }
    agent *ag = calloc((size_t)n, sizeof *ag);
    if (!ag || load_tokens(tokens, ag, n, why, sizeof why) != 0) {
        fprintf(stderr, "%s: %s\n", argv[0], ag ? why : "out of memory");
        return 2;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    CURLM *m = curl_multi_init();
    curl_multi_setopt(m, CURLMOPT_MAXCONNECTS, (long)n + FDS_SPARE);
    double t0 = now_s(), w0 = t0 + warmup, w1 = w0 + seconds;
    for (int i = 0; i < n; i++) {
        ag[i].h = curl_easy_init();
        ag[i].discovery = discovery_json(i);
        ag[i].next_s = t0 + ramp * i / n;
        if (!ag[i].h || !ag[i].discovery) {
            fprintf(stderr, "%s: out of memory\n", argv[0]);
            return 2;
        }
    }
    int ep = epoll_create1(0);
    if (ep < 0) {
        fprintf(stderr, "%s: epoll_create1 failed\n", argv[0]);
        return 2;
    }
    loop lp = {.ep = ep, .timer_s = -1.0};
    curl_multi_setopt(m, CURLMOPT_SOCKETFUNCTION, on_socket);
    curl_multi_setopt(m, CURLMOPT_SOCKETDATA, &lp);
    curl_multi_setopt(m, CURLMOPT_TIMERFUNCTION, on_timer);
    curl_multi_setopt(m, CURLMOPT_TIMERDATA, &lp);
    counts k = {0};
    bool window_open = false;
    int failed_starts = 0, running = 0;
    double due_s = t0; /* the earliest next_s of an agent not in flight */
    struct epoll_event ev[EPOLL_BATCH];
    for (;;) {
        double now = now_s();
        if (!window_open && now >= w0) {
            window_open = true;
            printf("window-start\n");
            fflush(stdout);
        }
        if (now >= w1)
            break;
        if (due_s <= now) {
            /* agents whose start (ramp) or retry is due; rare, so a scan */
            due_s = w1;
            for (int i = 0; i < n; i++) {
                agent *a = &ag[i];
                if (a->in_flight)
                    continue;
                if (a->next_s <= now && !start_request(m, a, url, now)) {
                    failed_starts++;
                    a->next_s = now + RETRY_AFTER_ERROR_S;
                }
                if (!a->in_flight && a->next_s < due_s)
                    due_s = a->next_s;
            }
        }
        double wake = due_s < now + POLL_MAX_MS / 1000.0 ? due_s : now + POLL_MAX_MS / 1000.0;
        if (lp.timer_s >= 0.0 && lp.timer_s < wake)
            wake = lp.timer_s;
        int wait_ms = (int)ceil((wake - now) * 1000.0);
        int nev = epoll_wait(ep, ev, EPOLL_BATCH, wait_ms > 0 ? wait_ms : 0);
        for (int e = 0; e < nev; e++) {
            int flags = (ev[e].events & EPOLLIN ? CURL_CSELECT_IN : 0) |
                        (ev[e].events & EPOLLOUT ? CURL_CSELECT_OUT : 0) |
                        (ev[e].events & (EPOLLERR | EPOLLHUP) ? CURL_CSELECT_ERR : 0);
            curl_multi_socket_action(m, ev[e].data.fd, flags, &running);
        }
        if (lp.timer_s >= 0.0 && now_s() >= lp.timer_s) {
            lp.timer_s = -1.0;
            curl_multi_socket_action(m, CURL_SOCKET_TIMEOUT, 0, &running);
        }
        CURLMsg *msg;
        int left;
        while ((msg = curl_multi_info_read(m, &left))) {
            if (msg->msg != CURLMSG_DONE)
                continue;
            agent *a = NULL;
            CURL *h = msg->easy_handle;
            CURLcode rc = msg->data.result;
            curl_easy_getinfo(h, CURLINFO_PRIVATE, (char **)&a);
            curl_multi_remove_handle(m, h);
            if (!a)
                continue;
            double t = now_s();
            finish(a, rc, t, w0, w1, task_s, &k);
            if (a->next_s <= t && t < w1 && !start_request(m, a, url, t)) {
                failed_starts++;
                a->next_s = t + RETRY_AFTER_ERROR_S;
            }
            if (!a->in_flight && a->next_s < due_s)
                due_s = a->next_s;
        }
    }
    printf("window-end\n");
    fflush(stdout);
    json_t *o = figures(ag, n, seconds, &k);
    int rc = 0;
    if (o) {
        json_object_set_new(o, "failed_starts", json_integer(failed_starts));
        json_object_set_new(o, "exchanges_total", json_integer(k.exchanges));
        json_t *late = json_array();
        for (int i = 0; i < k.nlate; i++)
            json_array_append_new(late, json_pack("[f,f]", k.late_at[i], k.late_gap[i]));
        json_object_set_new(o, "late_gaps_at_s", late);
        if (jsonf)
            rc = json_dump_file(o, jsonf, JSON_INDENT(2)) == 0 ? 0 : 2;
        else
            rc = json_dumpf(o, stdout, JSON_INDENT(2)) == 0 ? 0 : 2;
        json_decref(o);
    } else {
        rc = 2;
    }
    for (int i = 0; i < n; i++) {
        if (ag[i].in_flight)
            curl_multi_remove_handle(m, ag[i].h);
        curl_easy_cleanup(ag[i].h);
        curl_slist_free_all(ag[i].headers);
        free(ag[i].discovery);
        free(ag[i].req.p);
        free(ag[i].ans.p);
        free(ag[i].tasks);
        free(ag[i].gaps);
    }
    free(ag);
    curl_multi_cleanup(m);
    close(ep);
    curl_global_cleanup();
    return rc;
}
