/*
 * replay_pollux.c - `tessera-sim replay --job-model pollux`: Pollux workloads
 * replayed through the artifact's job model (src/replay/pollux_model.h)
 * instead of fixed durations.
 *
 *   tessera-sim replay --job-model pollux --profiles DIR --workloads DIR
 *       [--policy P[,P...]] [--jobs-kind rigid|elastic|elastic-tuned] [--nodes N]
 *       [--gpus-per-node G] [--jobs-out OUT.csv]
 *
 * DIR of --profiles holds one folder per application (placements.csv,
 * scalability.csv, validation-<batch>.csv); --workloads a folder of
 * workload-*.csv (name,time,application,num_replicas,batch_size). Each
 * workload runs alone on the cluster (default 16 x 4 GPUs, as published); the
 * table prints per workload avg JCT, makespan and GPU utilisation and the mean
 * of the workload means. --policy tiresias (the default) is the artifact's
 * Tiresias(+TunedJobs) as published; any other replay policy (fifo, sjf, srtf,
 * tessera: the production cycle) decides through ts_pm_run_policy, with the
 * workload's rigid jobs or elastic ones (elastic: from 1 GPU;
 * elastic-tuned: from the workload's GPU count; up to the artifact's maximum). Bad input
 * exits 2 naming the file, line and field.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay/pollux_model.h"
#include "replay/replay.h"
#include "sim/replay_cli.h"

#define EXIT_BAD_INPUT 2
#define PATH_BYTES 4096
#define APPS_MAX 16
#define WORKLOADS_MAX 64
#define NODES_DEFAULT 16
#define GPUS_PER_NODE_DEFAULT 4

static const char *const KIND_NAMES[] = {"rigid", "elastic", "elastic-tuned"};

typedef struct popts {
    const char *profiles, *workloads, *policy, *jobs_out;
    int nodes, gpus_per_node;
    ts_pm_jobs_kind kind;
} popts;

static int bad(const char *msg, const char *what)
{
    fprintf(stderr, "tessera-sim replay: %s%s\n", msg, what);
    return EXIT_BAD_INPUT;
}

static int parse(int argc, char **argv, popts *o)
{
    *o = (popts){NULL, NULL, "tiresias", NULL, NODES_DEFAULT, GPUS_PER_NODE_DEFAULT, TS_PM_RIGID};
    for (int i = 2; i < argc; i++) {
        const char *opt = argv[i];
        if (i + 1 >= argc)
            return bad("missing value after ", opt);
        const char *v = argv[++i];
        if (strcmp(opt, "--job-model") == 0) {
            if (strcmp(v, "pollux") != 0)
                return bad("--job-model: must be pollux, got ", v);
        } else if (strcmp(opt, "--jobs-kind") == 0) {
            if (strcmp(v, "rigid") == 0)
                o->kind = TS_PM_RIGID;
            else if (strcmp(v, "elastic") == 0)
                o->kind = TS_PM_ELASTIC_FROM_ONE;
            else if (strcmp(v, "elastic-tuned") == 0)
                o->kind = TS_PM_ELASTIC_FROM_TUNED;
            else
                return bad("--jobs-kind: must be rigid, elastic or elastic-tuned, got ", v);
        } else if (strcmp(opt, "--profiles") == 0) {
            o->profiles = v;
        } else if (strcmp(opt, "--workloads") == 0) {
            o->workloads = v;
        } else if (strcmp(opt, "--policy") == 0) {
            o->policy = v;
        } else if (strcmp(opt, "--jobs-out") == 0) {
            o->jobs_out = v;
        } else if (strcmp(opt, "--nodes") == 0 || strcmp(opt, "--gpus-per-node") == 0) {
            char *end;
            long x = strtol(v, &end, 10);
            if (*end || x < 1 || x > TS_PM_NODES_MAX)
                return bad(opt, ": must be an integer in [1, 64]");
            *(strcmp(opt, "--nodes") == 0 ? &o->nodes : &o->gpus_per_node) = (int)x;
        } else {
            return bad("--job-model pollux: unknown option ", opt);
        }
    }
    char list[256];
    if (strlen(o->policy) >= sizeof list)
        return bad("--policy: list too long", "");
    memcpy(list, o->policy, strlen(o->policy) + 1);
    for (char *save = NULL, *tok = strtok_r(list, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save))
        if (strcmp(tok, "tiresias") != 0 && !ts_replay_policy_find(tok))
            return bad("--policy: unknown policy ", tok);
    if (!o->profiles)
        return bad("--profiles: required with --job-model pollux", "");
    if (!o->workloads)
        return bad("--workloads: required with --job-model pollux", "");
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    const char *x = *(char *const *)a, *y = *(char *const *)b;
    size_t lx = strlen(x), ly = strlen(y); /* workload-2 before workload-10 */
    return lx != ly ? (lx < ly ? -1 : 1) : strcmp(x, y);
}

/* Names in dir ending in suffix and starting with prefix, sorted; *n of them. */
static char **list_dir(const char *dir, const char *prefix, const char *suffix, int max, int *n)
{
    DIR *d = opendir(dir);
    *n = 0;
    if (!d)
        return NULL;
    char **names = calloc((size_t)max, sizeof *names);
    struct dirent *e;
    while (names && (e = readdir(d)) != NULL && *n < max) {
        size_t l = strlen(e->d_name), ls = strlen(suffix), lp = strlen(prefix);
        if (e->d_name[0] == '.' || l < ls + lp || strcmp(e->d_name + l - ls, suffix) != 0 ||
            strncmp(e->d_name, prefix, lp) != 0)
            continue;
        names[(*n)++] = strdup(e->d_name);
    }
    closedir(d);
    if (names)
        qsort(names, (size_t)*n, sizeof *names, cmp_str);
    return names;
}

static void free_names(char **names, int n)
{
    for (int i = 0; i < n && names; i++)
        free(names[i]);
    free(names);
}

/* dir/name into out (PATH_BYTES); -1 when it does not fit. */
static int join(char *out, const char *dir, const char *name)
{
    int w = snprintf(out, PATH_BYTES, "%s/%s", dir, name);
    return w < 0 || w >= PATH_BYTES ? -1 : 0;
}

/* Reads dir/file whole into *buf (*len bytes; the caller frees it), its
 * path into path. Returns 0 or EXIT_BAD_INPUT, said on stderr. */
static int read_in(const char *dir, const char *file, char path[PATH_BYTES], char **buf,
                   size_t *len)
{
    if (join(path, dir, file))
        return bad("path too long: ", file);
    *buf = replay_slurp(path, len);
    return *buf ? 0 : EXIT_BAD_INPUT;
}

typedef int (*add_fn)(ts_pm_app *, const char *, size_t, const char *, ts_err *);

static int add_file(ts_pm_app *a, const char *dir, const char *file, add_fn fn, int bsz)
{
    char path[PATH_BYTES], *buf;
    size_t len;
    int bad_in = read_in(dir, file, path, &buf, &len);
    if (bad_in)
        return bad_in;
    ts_err err = {0};
    int rc = fn ? fn(a, buf, len, path, &err)
                : ts_pm_app_add_validation(a, bsz, buf, len, path, &err);
    free(buf);
    if (rc)
        return bad(err.msg, "");
    return 0;
}

static int load_app(const char *root, const char *name, ts_pm_app **out)
{
    int epochs, max_local;
    if (ts_pm_app_defaults(name, &epochs, &max_local) != 0)
        return 0; /* not one of the artifact's applications: skipped */
    char dir[PATH_BYTES];
    if (join(dir, root, name))
        return bad("path too long: ", name);
    ts_err err = {0};
    if (ts_pm_app_new(name, epochs, max_local, out, &err))
        return bad(err.msg, "");
    int rc = add_file(*out, dir, "placements.csv", ts_pm_app_add_placements, 0);
    if (!rc)
        rc = add_file(*out, dir, "scalability.csv", ts_pm_app_add_scalability, 0);
    int nv = 0;
    char **v = rc ? NULL : list_dir(dir, "validation-", ".csv", 64, &nv);
    for (int i = 0; i < nv && !rc; i++) {
        char *end;
        long b = strtol(v[i] + strlen("validation-"), &end, 10);
        if (strcmp(end, ".csv") != 0 || b < 1)
            rc = bad("validation file name: must be validation-<batch size>.csv, got ", v[i]);
        else
            rc = add_file(*out, dir, v[i], NULL, (int)b);
    }
    free_names(v, nv);
    if (!rc && ts_pm_app_finish(*out, &err))
        rc = bad(err.msg, "");
    if (rc) {
        ts_pm_app_free(*out);
        *out = NULL;
    }
    return rc;
}

static int run_workload(const popts *o, const char *policy, const ts_pm_app *const *apps,
                        int napps, const char *file, FILE *jobs_out, ts_pm_stats *st)
{
    char path[PATH_BYTES], *buf;
    size_t len;
    int bad_in = read_in(o->workloads, file, path, &buf, &len);
    if (bad_in)
        return bad_in;
    ts_err err = {0};
    ts_pm_wjob *jobs = NULL;
    int n = 0;
    int rc = ts_pm_load_workload(buf, len, path, apps, napps, &jobs, &n, &err);
    free(buf);
    if (rc)
        return bad(err.msg, "");
    long *jct = calloc((size_t)n + 1, sizeof *jct);
    if (!jct) {
        free(jobs);
        return bad("out of memory", "");
    }
    if (strcmp(policy, "tiresias") == 0 && o->kind == TS_PM_RIGID)
        rc = ts_pm_run_tiresias(apps, jobs, n, o->nodes, o->gpus_per_node, jct, st, &err);
    else
        rc = ts_pm_run_policy(apps, jobs, n, o->nodes, o->gpus_per_node,
                              ts_replay_policy_find(policy), o->kind, jct, st, &err);
    if (rc)
        rc = bad(err.msg, "");
    for (int j = 0; !rc && jobs_out && j < n; j++)
        fprintf(jobs_out, "%s,%s,%s,%d,%d,%d,%ld\n", policy, file, jobs[j].name,
                jobs[j].submit_s, jobs[j].replicas, jobs[j].batch_size, jct[j]);
    free(jct);
    free(jobs);
    return rc;
}

int replay_pollux_main(int argc, char **argv)
{
    popts o;
    int rc = parse(argc, argv, &o);
    if (rc)
        return rc;
    int napp_dirs = 0, nwl = 0, napps = 0;
    char **app_dirs = list_dir(o.profiles, "", "", APPS_MAX, &napp_dirs);
    if (!app_dirs || napp_dirs == 0)
        return bad("--profiles: no application folders in ", o.profiles);
    ts_pm_app *apps[APPS_MAX] = {0};
    for (int i = 0; i < napp_dirs && !rc; i++) {
        rc = load_app(o.profiles, app_dirs[i], &apps[napps]);
        if (!rc && apps[napps])
            napps++;
    }
    free_names(app_dirs, napp_dirs);
    char **wl = rc ? NULL : list_dir(o.workloads, "", ".csv", WORKLOADS_MAX, &nwl);
    if (!rc && nwl == 0)
        rc = bad("--workloads: no .csv files in ", o.workloads);
    FILE *jobs_out = NULL;
    if (!rc && o.jobs_out) {
        jobs_out = fopen(o.jobs_out, "w");
        if (!jobs_out)
            rc = bad("--jobs-out: cannot write ", o.jobs_out);
        else
            fprintf(jobs_out, "policy,workload,name,submit_s,gpus,batch_size,jct_s\n");
    }
    char list[256];
    memcpy(list, o.policy, strlen(o.policy) + 1); /* parse() checked its length */
    char *save = NULL;
    for (const char *pol = strtok_r(list, ",", &save); pol && !rc;
         pol = strtok_r(NULL, ",", &save)) {
        printf("job model pollux, policy %s, %s jobs, %d x %d GPUs, %d-s rounds, %d s per allocation "
               "change\n%-16s %10s %12s %8s %9s\n",
               pol, KIND_NAMES[o.kind], o.nodes, o.gpus_per_node, TS_PM_ROUND_S, TS_PM_RESCALE_S, "workload",
               "avg_jct_s", "makespan_s", "util_%", "restarts");
        double sum_jct = 0, sum_mk = 0, sum_util = 0;
        for (int w = 0; w < nwl && !rc; w++) {
            ts_pm_stats st;
            rc = run_workload(&o, pol, (const ts_pm_app *const *)apps, napps, wl[w], jobs_out,
                              &st);
            if (rc)
                break;
            printf("%-16s %10.2f %12ld %8.1f %9ld\n", wl[w], st.avg_jct_s, st.makespan_s,
                   st.util_pct, st.restarts);
            sum_jct += st.avg_jct_s;
            sum_mk += (double)st.makespan_s;
            sum_util += st.util_pct;
            fflush(stdout);
        }
        if (!rc)
            printf("%-16s %10.2f %12.0f %8.1f\n\n", "mean", sum_jct / nwl, sum_mk / nwl,
                   sum_util / nwl);
    }
    if (jobs_out && fclose(jobs_out) != 0 && !rc)
        rc = bad("--jobs-out: cannot write ", o.jobs_out);
    free_names(wl, nwl);
    for (int i = 0; i < napps; i++)
        ts_pm_app_free(apps[i]);
    return rc;
}
