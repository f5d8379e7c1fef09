/*
 * submit_load.c - durable submissions per second against tesserad.
 *
 *   tessera-bench-submit --url URL --token T [--clients 32] [--jobs 10000]
 *                        [--spec FILE] [--prefix KEY] [--retry SECONDS] [--acked FILE]
 *
 * Each client thread keeps one HTTP connection (libcurl keep-alive) and
 * POSTs the same small spec with its own Idempotency-Key, one after the
 * other; a 201 means the job is committed. Prints jobs per second over the
 * whole run and the p50/p99/max latency of one submission, and the count of
 * answers that were not 201 (which must be 0).
 *
 * For the crash test: --retry S makes a client repeat a submission whose
 * connection failed (same Idempotency-Key) for up to S seconds, as a careful
 * client would while the controller restarts; --acked FILE writes
 * "key id" for every acknowledged submission (201, or 200 for a retry the
 * controller had already committed).
 */
#include <curl/curl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char DEFAULT_SPEC[] =
    "{\"tenant\": \"bench\", \"name\": \"load\", \"tier\": \"opportunistic\", "
    "\"tasks\": [{\"gpus\": 1, \"cpu_milli\": 1000, \"memory_mib\": 1024}], "
    "\"time_limit\": \"1h\", \"duration\": \"10s\", \"command\": [\"true\"]}";

typedef struct client {
    int id, n;
    const char *url, *token, *spec, *prefix;
    double *lat;
    int bad;
    double retry_s;
    FILE *acked;
    pthread_mutex_t *acked_mu;
} client;

typedef struct body {
    char buf[4096];
    size_t len;
} body;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static size_t sink(char *p, size_t sz, size_t n, void *u)
{
    body *b = u;
    size_t k = sz * n;
    if (b && b->len + k < sizeof b->buf) {
        memcpy(b->buf + b->len, p, k);
        b->len += k;
        b->buf[b->len] = '\0';
    }
    return k;
}

/* The first "id" of the answer ({"jobs":[{"id":N,...). */
static long long first_id(const char *s)
{
    const char *p = strstr(s, "\"id\":");
    return p ? atoll(p + 5) : -1;
}

static void *run(void *arg)
{
    client *c = arg;
    CURL *h = curl_easy_init();
    char url[512], auth[512], key[256];
    snprintf(url, sizeof url, "%s/v1/jobs", c->url);
    snprintf(auth, sizeof auth, "Authorization: Bearer %s", c->token);
    for (int i = 0; i < c->n; i++) {
        struct curl_slist *hd = NULL;
        hd = curl_slist_append(hd, auth);
        hd = curl_slist_append(hd, "Content-Type: application/json");
        snprintf(key, sizeof key, "Idempotency-Key: %s-%d-%d", c->prefix, c->id, i);
        hd = curl_slist_append(hd, key);
        curl_easy_setopt(h, CURLOPT_URL, url);
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, c->spec);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, sink);
        curl_easy_setopt(h, CURLOPT_TIMEOUT, 60L);
        double t0 = now_s();
        CURLcode rc;
        long code = 0;
        body b;
        for (;;) {
            b.len = 0;
            b.buf[0] = '\0';
            curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
            rc = curl_easy_perform(h);
            code = 0;
            curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
            bool transient = rc != CURLE_OK || code == 503 || code == 0;
            if (!transient || c->retry_s <= 0.0 || now_s() - t0 > c->retry_s)
                break;
            struct timespec ts = {0, 50 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
        c->lat[i] = now_s() - t0;
        bool ok = rc == CURLE_OK && (code == 201 || (c->retry_s > 0.0 && code == 200));
        if (!ok)
            c->bad++;
        else if (c->acked) {
            pthread_mutex_lock(c->acked_mu);
            fprintf(c->acked, "%s-%d-%d %lld\n", c->prefix, c->id, i, first_id(b.buf));
            pthread_mutex_unlock(c->acked_mu);
        }
        curl_slist_free_all(hd);
    }
    curl_easy_cleanup(h);
    return NULL;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *b = calloc(1, 1 << 16);
    if (b)
        fread(b, 1, (1 << 16) - 1, f);
    fclose(f);
    return b;
}

int main(int argc, char **argv)
{
    const char *url = NULL, *token = NULL, *specf = NULL, *prefix = "load", *ackedf = NULL;
    double retry_s = 0.0;
    int clients = 32, jobs = 10000;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--url") == 0)
            url = argv[i + 1];
        else if (strcmp(argv[i], "--token") == 0)
            token = argv[i + 1];
        else if (strcmp(argv[i], "--clients") == 0)
            clients = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--jobs") == 0)
            jobs = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--spec") == 0)
            specf = argv[i + 1];
        else if (strcmp(argv[i], "--prefix") == 0)
            prefix = argv[i + 1];
        else if (strcmp(argv[i], "--retry") == 0)
            retry_s = atof(argv[i + 1]);
        else if (strcmp(argv[i], "--acked") == 0)
            ackedf = argv[i + 1];
    }
    if (!url || !token || clients < 1 || jobs < clients) {
        fprintf(stderr, "usage: %s --url URL --token T [--clients N] [--jobs N] [--spec FILE] "
                        "[--prefix KEY]\n", argv[0]);
        return 2;
    }
    char *spec = specf ? slurp(specf) : NULL;
    FILE *acked = ackedf ? fopen(ackedf, "w") : NULL;
    pthread_mutex_t acked_mu = PTHREAD_MUTEX_INITIALIZER;
    if (ackedf && !acked) {
        fprintf(stderr, "%s: cannot write %s\n", argv[0], ackedf);
        return 2;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    client *c = calloc((size_t)clients, sizeof *c);
    pthread_t *th = calloc((size_t)clients, sizeof *th);
    double *lat = calloc((size_t)jobs, sizeof *lat);
    int per = jobs / clients, off = 0;
    double t0 = now_s();
    for (int i = 0; i < clients; i++) {
        c[i] = (client){i, per + (i < jobs % clients), url, token, spec ? spec : DEFAULT_SPEC,
                        prefix, lat + off, 0, retry_s, acked, &acked_mu};
        off += c[i].n;
        pthread_create(&th[i], NULL, run, &c[i]);
    }
    int bad = 0;
    for (int i = 0; i < clients; i++) {
        pthread_join(th[i], NULL);
        bad += c[i].bad;
    }
    double wall = now_s() - t0;
    qsort(lat, (size_t)jobs, sizeof *lat, cmp);
    printf("clients %d jobs %d wall %.2f s: %.0f submissions/s; latency p50 %.1f ms p99 %.1f ms "
           "max %.1f ms; not 201: %d\n",
           clients, jobs, wall, jobs / wall, lat[jobs / 2] * 1e3, lat[(int)(jobs * 0.99)] * 1e3,
           lat[jobs - 1] * 1e3, bad);
    free(c);
    free(th);
    free(lat);
    free(spec);
    if (acked)
        fclose(acked);
    curl_global_cleanup();
    return bad == 0 ? 0 : 1;
}
