/*
 * fileio.c - the simulator's input files, read whole by the tools' one
 * reader (io/read_file.h) up to SIM_FILE_MAX_BYTES, and the node and pod
 * lists read then parsed.
 */
#include "sim/fileio.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/read_file.h"

char *sim_read_file(const char *path, size_t *len, ts_err *err)
{
    char *buf;
    return io_read_file(path, SIM_FILE_MAX_BYTES, &buf, len, err) == 0 ? buf : NULL;
}

ts_cluster *sim_load_cluster(const char *path, bool yaml, ts_err *err)
{
    size_t len;
    ts_cluster *c = NULL;
    char *buf = sim_read_file(path, &len, err);
    if (buf && (yaml ? ts_load_cluster_yaml(buf, len, path, &c, err)
                     : ts_load_nodes_csv(buf, len, path, &c, err)) != 0)
        c = NULL;
    free(buf);
    return c;
}

ts_workload *sim_load_pods(const char *path, ts_err *err)
{
    size_t len;
    ts_workload *w = NULL;
    char *buf = sim_read_file(path, &len, err);
    if (buf && ts_load_pods_csv(buf, len, path, &w, err) != 0)
        w = NULL;
    free(buf);
    return w;
}

int sim_bad(const char *who, const char *fmt, const char *arg)
{
    fprintf(stderr, "%s: ", who);
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n");
    return 2;
}

int sim_opt_pairs(int argc, char **argv, const char *who, void (*usage)(FILE *f),
                  int (*set)(void *ctx, const char *name, const char *value), void *ctx)
{
    for (int i = 2; i < argc; i++) {
        const char *k = argv[i];
        if (strcmp(k, "--help") == 0) {
            usage(stdout);
            return -1;
        }
        if (i + 1 >= argc)
            return sim_bad(who, "%s: needs a value", k);
        int rc = set(ctx, k, argv[++i]);
        if (rc == SIM_OPT_UNKNOWN) {
            sim_bad(who, "unknown option \"%s\"", k);
            usage(stderr);
        }
        if (rc != 0)
            return 2;
    }
    return 0;
}

int sim_required(const char *who, const char *name, void (*usage)(FILE *f))
{
    sim_bad(who, "%s: required", name);
    usage(stderr);
    return 2;
}
