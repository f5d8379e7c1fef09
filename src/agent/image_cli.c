/*
 * image_cli.c - `tessera-agent image-pull`: pulls an image into a node's
 * store the way the agent does for a task, and prints what it made as JSON.
 * For an operator who warms a node's store before jobs arrive, and for the
 * tests, which drive the registry client and the store through it against a
 * real registry.
 *
 *   tessera-agent image-pull --store DIR [--budget BYTES] [--plain-http]
 *                 [--auth-file FILE] [--ca FILE] [--rate BYTES_PER_S]
 *                 [--p2p-listen IPV4:PORT --controller URL --node NAME
 *                  --token-file FILE [--linger SECONDS]] REFERENCE
 *
 * With --p2p-listen the layers come piece by piece from peers and the
 * registry as the agent's do (p2p.h), the node credential asking the
 * controller's tracker; --linger keeps serving peers that long after the
 * pull (bench/image-p2p drives one such pull per network namespace). The
 * JSON says how many bytes came from the registry, from peers, and again,
 * when the last blob was verified (blobs_s), the CPU-seconds the pull
 * took (cpu_s, mkfs.erofs included), of them those spent until the last
 * blob was verified (blobs_cpu_s) and those in user space (user_s, its own
 * code and libraries'; the rest is the kernel's, moving the bytes).
 *
 * --auth-file holds "user:password" (a pull secret; never printed). Exit
 * status: 0 pulled, 3 the registry does not know the image, 4 the registry
 * could not be reached or failed (worth a retry), 1 anything else (the
 * message on stderr), 2 usage.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <curl/curl.h>
#include <jansson.h>

#include "image.h"
#include "image_cli.h"
#include "p2p.h"

#define EXIT_NOT_FOUND 3
#define EXIT_RETRY 4
#define EXIT_AUTH 5 /* the registry refused the credentials, or wanted some */
#define SECRET_MAX_BYTES 4096

static int usage(void)
{
    fprintf(stderr, "usage: tessera-agent image-pull --store DIR [--budget BYTES] "
                    "[--plain-http] [--auth-file FILE] [--ca FILE] [--rate BYTES_PER_S]\n"
                    "       [--p2p-listen IPV4:PORT --controller URL --node NAME --token-file "
                    "FILE [--linger SECONDS]] REFERENCE\n");
    return 2;
}

/* CPU seconds of this process and of its waited-for children (mkfs.erofs)
 * so far: what one node's pull costs the machine; user_only: in user space
 * alone. */
static double cpu_s(bool user_only)
{
    struct rusage self, kids;
    getrusage(RUSAGE_SELF, &self);
    getrusage(RUSAGE_CHILDREN, &kids);
    const struct timeval *tv[4] = {&self.ru_utime, &kids.ru_utime, &self.ru_stime,
                                   &kids.ru_stime};
    double s = 0;
    for (int i = 0; i < (user_only ? 2 : 4); i++)
        s += (double)tv[i]->tv_sec + tv[i]->tv_usec / 1e6;
    return s;
}

static int read_secret(const char *path, char *buf, size_t n, char **user, char **pass)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    size_t k = fread(buf, 1, n - 1, f);
    fclose(f);
    buf[k] = 0;
    buf[strcspn(buf, "\r\n")] = 0;
    char *colon = strchr(buf, ':');
    if (!colon)
        return -1;
    *colon = 0;
    *user = buf;
    *pass = colon + 1;
    return 0;
}

int agent_image_cli(int argc, char **argv)
{
    const char *store = NULL, *ref_text = NULL, *auth = NULL, *ca = NULL;
    const char *listen = NULL, *ctl = NULL, *node = NULL, *token_file = NULL;
    double linger = 0;
    long long budget = 0, rate = 0;
    bool plain = false;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "--store") && v)
            store = argv[++i];
        else if (!strcmp(argv[i], "--budget") && v)
            budget = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--auth-file") && v)
            auth = argv[++i];
        else if (!strcmp(argv[i], "--ca") && v)
            ca = argv[++i];
        else if (!strcmp(argv[i], "--rate") && v)
            rate = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--p2p-listen") && v)
            listen = argv[++i];
        else if (!strcmp(argv[i], "--controller") && v)
            ctl = argv[++i];
        else if (!strcmp(argv[i], "--node") && v)
            node = argv[++i];
        else if (!strcmp(argv[i], "--token-file") && v)
            token_file = argv[++i];
        else if (!strcmp(argv[i], "--linger") && v)
            linger = atof(argv[++i]);
        else if (!strcmp(argv[i], "--plain-http"))
            plain = true;
        else if (argv[i][0] != '-' && !ref_text)
            ref_text = argv[i];
        else
            return usage();
    }
    if (!store || !ref_text || (listen && (!ctl || !node || !token_file)))
        return usage();
    ts_err err = {0};
    ts_image_ref ref;
    if (ts_image_ref_parse(ref_text, "image", &ref, &err) != 0) {
        fprintf(stderr, "tessera-agent: %s\n", err.msg);
        return 1;
    }
    static char secret[SECRET_MAX_BYTES];
    char *user = NULL, *pass = NULL;
    if (auth && read_secret(auth, secret, sizeof secret, &user, &pass) != 0) {
        fprintf(stderr, "tessera-agent: --auth-file %s: cannot read \"user:password\"\n", auth);
        return 1;
    }
    ts_image_store st;
    if (agent_image_store_open(&st, store, budget, &err) != 0) {
        fprintf(stderr, "tessera-agent: %s\n", err.msg);
        return 1;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    ts_p2p *p2p = NULL;
    static char token[256];
    if (listen) {
        FILE *tf = fopen(token_file, "re");
        size_t k = tf ? fread(token, 1, sizeof token - 1, tf) : 0;
        if (tf)
            fclose(tf);
        token[k] = 0;
        token[strcspn(token, "\r\n")] = 0;
        const char *faults = getenv("TESSERA_AGENT_P2P_FAULTS");
        ts_p2p_config pc = {.listen = listen, .node = node, .token = token, .ca_file = ca,
                            .store_root = st.root,
                            .fault_corrupt = faults && strstr(faults, "corrupt")};
        if (!token[0] || agent_p2p_start(&pc, &p2p, &err) != 0) {
            fprintf(stderr, "tessera-agent: %s\n", token[0] ? err.msg : "--token-file: empty");
            return 1;
        }
        agent_p2p_set_controller(p2p, ctl);
    }
    long long from_origin = 0, from_peers = 0, refetched = 0;
    double blobs_s = 0, blobs_cpu_s = 0;
    ts_pull_opts o = {.user = user, .password = pass, .plain_http = plain, .ca_file = ca,
                      .p2p = p2p, .rate_bytes_s = rate, .from_origin = &from_origin,
                      .from_peers = &from_peers, .refetched = &refetched, .blobs_s = &blobs_s,
                      .blobs_cpu_s = &blobs_cpu_s};
    ts_image img;
    int rc = agent_image_pull(&st, &ref, &o, &img, &err);
    memset(secret, 0, sizeof secret);
    if (rc) {
        agent_p2p_stop(p2p);
        curl_global_cleanup();
        fprintf(stderr, "tessera-agent: %s\n", err.msg);
        return rc == TS_ENOENT ? EXIT_NOT_FOUND : rc == TS_EIO ? EXIT_RETRY
               : rc == TS_EACCES ? EXIT_AUTH : 1;
    }
    json_t *j = json_pack("{s:s, s:s, s:s, s:I, s:b, s:I, s:I, s:I, s:I, s:f, s:f, s:f, s:f}",
                          "digest", img.digest, "rootfs", img.rootfs, "config", img.config_path,
                          "size_bytes", (json_int_t)img.size_bytes, "cached", img.cached,
                          "store_bytes", (json_int_t)agent_image_store_bytes(&st),
                          "from_registry", (json_int_t)from_origin, "from_peers",
                          (json_int_t)from_peers, "refetched", (json_int_t)refetched,
                          "blobs_s", blobs_s, "cpu_s", cpu_s(false),
                          "blobs_cpu_s", blobs_cpu_s, "user_s", cpu_s(true));
    char *s = json_dumps(j, JSON_COMPACT);
    printf("%s\n", s ? s : "{}");
    fflush(stdout);
    free(s);
    json_decref(j);
    if (p2p && linger > 0) { /* peers still fetching take pieces from this node */
        struct timespec ts = {(time_t)linger, (long)((linger - (double)(time_t)linger) * 1e9)};
        nanosleep(&ts, NULL);
    }
    agent_p2p_stop(p2p);
    curl_global_cleanup();
    return 0;
}
