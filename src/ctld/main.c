/*
 * main.c - tesserad: reads the configuration, opens the store and the
 * controller state, starts the scheduling thread and the HTTP server, and
 * runs until SIGINT or SIGTERM (then stops accepting, finishes the cycle in
 * progress and closes the store). docs/tesserad.md. With an ha: key it
 * stands by first (ha.c, docs/ha.md) and opens the controller once it
 * holds the lease.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctld/ctld.h"
#include "ctld/http.h"
#include "ctld/ha.h"
#include "ctld/secrets.h"
#include "tessera/version.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: tesserad --config FILE [--store URL] [--listen ADDR:PORT]\n"
               "       tesserad --openapi    (print the API description and exit)\n"
               "       tesserad --gen-secrets-key FILE    (a new secrets key file, 0600)\n"
               "       tesserad --config FILE --rotate-secrets-key OLD NEW\n"
               "                 (re-encrypt every stored secret; the controller stopped)\n"
               "The configuration keys are documented in docs/tesserad.md.\n");
}

/* --gen-secrets-key FILE (docs/secrets.md). */
static int gen_key(const char *path)
{
    ts_err e;
    if (ctld_secrets_keygen(path, &e) != 0) {
        fprintf(stderr, "tesserad: %s\n", e.msg);
        return 1;
    }
    fprintf(stderr, "tesserad: wrote a new secrets key to %s (mode 0600)\n", path);
    return 0;
}

/* --rotate-secrets-key: every secret re-encrypted with NEW's key in one
 * transaction (docs/secrets.md "Rotating the key"). */
static int rotate(const ctld_config *cfg, const char *old_file, const char *new_file)
{
    ts_store *st = NULL;
    ts_err err;
    int n = 0;
    int rc = ts_store_open(cfg->store_url, &st, &err);
    if (rc == 0)
        rc = ctld_secrets_rotate(st, old_file, new_file, &n, &err);
    ts_store_close(st);
    if (rc != 0) {
        fprintf(stderr, "tesserad: --rotate-secrets-key: %s (nothing changed)\n", err.msg);
        return 1;
    }
    fprintf(stderr, "tesserad: %d secrets re-encrypted with the key of %s; set "
            "secrets_key_file to it before starting\n", n, new_file);
    return 0;
}

/* The command line. */
typedef struct args {
    const char *config, *store, *listen, *rot_old, *rot_new;
} args;

/* -1: go on with a; else the exit status (an option that does its work and
 * exits, or a usage error). */
static int parse_args(int argc, char **argv, args *a)
{
    *a = (args){0};
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--config") == 0 && i + 1 < argc) {
            a->config = argv[++i];
        } else if (strcmp(argv[i], "--store") == 0 && i + 1 < argc) {
            a->store = argv[++i];
        } else if (strcmp(argv[i], "--listen") == 0 && i + 1 < argc) {
            a->listen = argv[++i];
        } else if (strcmp(argv[i], "--openapi") == 0) {
            json_t *doc = ctld_openapi();
            json_dumpf(doc, stdout, JSON_INDENT(2) | JSON_SORT_KEYS);
            fputc('\n', stdout);
            json_decref(doc);
            return 0;
        } else if (strcmp(argv[i], "--gen-secrets-key") == 0 && i + 1 < argc) {
            return gen_key(argv[i + 1]);
        } else if (strcmp(argv[i], "--rotate-secrets-key") == 0 && i + 2 < argc) {
            a->rot_old = argv[++i];
            a->rot_new = argv[++i];
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(argv[i], "--version") == 0) {
            return puts("tesserad " TS_VERSION) < 0;
        } else {
            fprintf(stderr, "tesserad: unknown argument \"%s\"\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    if (!a->config) {
        fprintf(stderr, "tesserad: --config is required\n");
        usage(stderr);
        return 2;
    }
    return -1;
}

/* --listen ADDRESS:PORT over the configuration's; 0, or 2 (said why). */
static int listen_override(ctld_config *cfg, const char *listen)
{
    const char *colon = strrchr(listen, ':');
    if (!colon || colon == listen || (size_t)(colon - listen) >= sizeof cfg->listen_addr) {
        fprintf(stderr, "tesserad: --listen: expected ADDRESS:PORT, got \"%s\"\n", listen);
        return 2;
    }
    memcpy(cfg->listen_addr, listen, (size_t)(colon - listen));
    cfg->listen_addr[colon - listen] = '\0';
    cfg->listen_port = atoi(colon + 1);
    return 0;
}

#ifdef TS_STORE_FAULTS_ENV
/* Test builds only: injected store failures (docs/store.md), armed once the
 * controller is open so that it starts. 0, or 2 (said why). */
static int arm_faults(ctld *c)
{
    const char *faults = getenv("TESSERAD_STORE_FAULTS");
    ts_err err;
    if (!faults || !*faults)
        return 0;
    if (ts_store_faults_set(c->store, faults, &err) != 0) {
        fprintf(stderr, "tesserad: TESSERAD_STORE_FAULTS: %s\n", err.msg);
        return 2;
    }
    fprintf(stderr, "tesserad: store fault injection on: %s\n", faults);
    return 0;
}
#endif

/* A leader that cannot open (a wrong secrets key, a cluster file its store
 * does not fit): the lease goes back at once, and it waits two leases
 * before it exits, so that a standby that can open takes the lease rather
 * than this one again, restarted by its supervisor. The exit status. */
static int lead_failed(const ctld_config *cfg)
{
    if (!cfg->ha_on)
        return 1;
    ctld_ha_stop();
    fprintf(stderr, "tesserad: ha: gave the lease back; exiting in %.0f s, so that another "
                    "controller leads\n", 2 * cfg->ha_lease_s);
    struct timespec ts = {(time_t)(2 * cfg->ha_lease_s), 0};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
    return 1;
}

/* Opens the controller (after standing by, with ha:), serves until SIGINT
 * or SIGTERM, and stops. The exit status. */
static int serve(ctld_config *cfg)
{
    static ctld c;
    ts_err err;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL); /* threads inherit it; main waits for them */
    signal(SIGPIPE, SIG_IGN);
    if (ctld_ha_check(cfg, &err) != 0) {
        fprintf(stderr, "tesserad: %s\n", err.msg);
        return 1;
    }
    if (cfg->ha_on) {
        /* several controllers (docs/ha.md): stand by until this one leads */
        int hrc = ctld_ha_standby(cfg, &set, &err);
        if (hrc < 0) {
            fprintf(stderr, "tesserad: %s\n", err.msg);
            return 1;
        }
        if (hrc > 0)
            return 0;
    }
    if (ctld_state_secure(cfg, &err) != 0 || ctld_open(&c, cfg, &err) != 0) {
        fprintf(stderr, "tesserad: %s\n", err.msg);
        return lead_failed(cfg);
    }
#ifdef TS_STORE_FAULTS_ENV
    if (arm_faults(&c) != 0)
        return 2;
#endif
    int restored = c.njobs; /* read before the threads start */
    pthread_t loop;
    ctld_ha_front_stop(); /* a leader now: the controller's own server takes the address */
    if (ctld_loop_start(&c, &loop) != 0 || ctld_http_start(&c, &err) != 0) {
        fprintf(stderr, "tesserad: %s\n", err.msg);
        return 1;
    }
    fprintf(stderr, "tesserad: listening on %s:%d (%s), store %s (%s), %d nodes, %d active jobs\n",
            c.cfg.listen_addr, c.cfg.listen_port, c.cfg.tls_cert[0] ? "https" : "http",
            c.cfg.store_url, ts_store_backend(c.store), c.cluster->nnodes, restored);
    int sig = 0;
    sigwait(&set, &sig);
    fprintf(stderr, "tesserad: signal %d, stopping\n", sig);
    /* wake the agents' long-polls first, or stopping the server waits for them */
    pthread_mutex_lock(&c.mu);
    __atomic_store_n(&c.stop, true, __ATOMIC_RELEASE); /* read by agents under their own locks */
    pthread_cond_signal(&c.wake);
    ctld_agents_wake_all(&c);
    pthread_mutex_unlock(&c.mu);
    ctld_http_stop(&c);
    pthread_join(loop, NULL);
    ctld_close(&c);
    ctld_ha_stop(); /* nothing more to write: a standby may take over at once */
    return 0;
}

int main(int argc, char **argv)
{
    args a;
    int rc = parse_args(argc, argv, &a);
    if (rc >= 0)
        return rc;
    ctld_config cfg;
    ts_err err;
    if (ctld_config_load(a.config, &cfg, &err) != 0) {
        fprintf(stderr, "tesserad: %s\n", err.msg);
        return 1;
    }
    if (a.store)
        snprintf(cfg.store_url, sizeof cfg.store_url, "%s", a.store);
    if (a.rot_old) {
        rc = rotate(&cfg, a.rot_old, a.rot_new);
        ctld_config_fini(&cfg);
        return rc;
    }
    if (a.listen && listen_override(&cfg, a.listen) != 0)
        return 2;
    return serve(&cfg);
}
