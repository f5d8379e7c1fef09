/*
 * image_cli.c - `tessera-agent image-pull`: pulls an image into a node's
 * store the way the agent does for a task, and prints what it made as JSON.
 * For an operator who warms a node's store before jobs arrive, and for the
 * tests, which drive the registry client and the store through it against a
 * real registry.
 *
 *   tessera-agent image-pull --store DIR [--budget BYTES] [--plain-http]
 *                 [--auth-file FILE] [--ca FILE] REFERENCE
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

#include <curl/curl.h>
#include <jansson.h>

#include "image.h"
#include "image_cli.h"

#define EXIT_NOT_FOUND 3
#define EXIT_RETRY 4
#define SECRET_MAX_BYTES 4096

static int usage(void)
{
    fprintf(stderr, "usage: tessera-agent image-pull --store DIR [--budget BYTES] "
                    "[--plain-http] [--auth-file FILE] [--ca FILE] REFERENCE\n");
    return 2;
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

int ts_image_cli(int argc, char **argv)
{
    const char *store = NULL, *ref_text = NULL, *auth = NULL, *ca = NULL;
    long long budget = 0;
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
        else if (!strcmp(argv[i], "--plain-http"))
            plain = true;
        else if (argv[i][0] != '-' && !ref_text)
            ref_text = argv[i];
        else
            return usage();
    }
    if (!store || !ref_text)
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
    if (ts_image_store_open(&st, store, budget, &err) != 0) {
        fprintf(stderr, "tessera-agent: %s\n", err.msg);
        return 1;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    ts_pull_opts o = {.user = user, .password = pass, .plain_http = plain, .ca_file = ca};
    ts_image img;
    int rc = ts_image_pull(&st, &ref, &o, &img, &err);
    memset(secret, 0, sizeof secret);
    curl_global_cleanup();
    if (rc) {
        fprintf(stderr, "tessera-agent: %s\n", err.msg);
        return rc == TS_ENOENT ? EXIT_NOT_FOUND : rc == TS_EIO ? EXIT_RETRY : 1;
    }
    json_t *j = json_pack("{s:s, s:s, s:s, s:I, s:b, s:I}", "digest", img.digest, "rootfs",
                          img.rootfs, "config", img.config_path, "size_bytes",
                          (json_int_t)img.size_bytes, "cached", img.cached, "store_bytes",
                          (json_int_t)ts_image_store_bytes(&st));
    char *s = json_dumps(j, JSON_COMPACT);
    printf("%s\n", s ? s : "{}");
    free(s);
    json_decref(j);
    return 0;
}
