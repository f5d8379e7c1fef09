/*
 * report.c - summaries over seeds (mean, sample SD), the printed table with
 * the published value beside ours, and the JSON and CSV outputs. JSON goes
 * through jansson so the document is always well formed.
 */
#include "sim/report.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static void mean_sd(const double *v, int n, double *mean, double *sd)
{
    double s = 0, ss = 0;
    for (int i = 0; i < n; i++)
        s += v[i];
    *mean = n ? s / n : NAN;
    for (int i = 0; i < n; i++)
        ss += (v[i] - *mean) * (v[i] - *mean);
    *sd = n > 1 ? sqrt(ss / (n - 1)) : 0.0;
}

#define MAX_SEEDS 1024

void sim_summarise(const sim_run *runs, int nseeds, sim_summary *s)
{
    double a[MAX_SEEDS], f[MAX_SEEDS], r[MAX_SEEDS];
    int n = nseeds < MAX_SEEDS ? nseeds : MAX_SEEDS;
    double pods = 0, secs = 0;
    for (int i = 0; i < n; i++) {
        a[i] = runs[i].alloc_pct[SIM_ARRIVED_REPORT];
        f[i] = runs[i].frag_pct[SIM_ARRIVED_REPORT];
        r[i] = runs[i].frag_ratio[SIM_ARRIVED_REPORT];
        pods += runs[i].npods;
        secs += runs[i].cpu_seconds;
    }
    s->policy = runs[0].policy->name;
    s->nseeds = n;
    s->runs = runs;
    mean_sd(a, n, &s->alloc_mean, &s->alloc_sd);
    mean_sd(f, n, &s->frag_mean, &s->frag_sd);
    mean_sd(r, n, &s->ratio_mean, &s->ratio_sd);
    s->pods_per_s = secs > 0 ? pods / secs : 0;
    s->published = NAN;
    s->published_sd = NAN;
}

static const char *published_name(const char *policy)
{
    static const char *const map[][2] = {
        {"random", "Random"}, {"dotprod", "DotProd"}, {"clustering", "Clustering"},
        {"packing", "Packing"}, {"bestfit", "BestFit"}, {"fgd", "FGD"},
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (strcmp(map[i][0], policy) == 0)
            return map[i][1];
    return NULL;
}

#define LINE_MAX_BYTES 1024

int sim_published_load(const char *path, const char *workload, sim_summary *s, int ns,
                       ts_err *err)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return ts_err_set(err, TS_EIO, "%s: cannot open", path);
    char line[LINE_MAX_BYTES];
    int lineno = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        if (lineno == 1)
            continue;
        char *save, *wl = strtok_r(line, ",", &save), *pol = strtok_r(NULL, ",", &save);
        char *nseeds = strtok_r(NULL, ",", &save), *mean = strtok_r(NULL, ",", &save);
        char *sd = strtok_r(NULL, ",", &save);
        if (!wl || !pol || !nseeds || !mean || !sd) {
            fclose(f);
            return ts_err_set(err, TS_EINVAL, "%s:%d: expected workload,policy,n_seeds,mean,sd",
                              path, lineno);
        }
        if (strcmp(wl, workload) != 0)
            continue;
        for (int i = 0; i < ns; i++) {
            const char *pn = published_name(s[i].policy);
            if (pn && strcmp(pn, pol) == 0) {
                char *end;
                s[i].published = strtod(mean, &end);
                s[i].published_sd = strtod(sd, NULL);
                if (end == mean) {
                    fclose(f);
                    return ts_err_set(err, TS_EINVAL, "%s:%d: alloc mean: not a number", path,
                                      lineno);
                }
            }
        }
    }
    fclose(f);
    return 0;
}

void sim_print_table(FILE *f, const char *workload, int cluster_gpus, const sim_summary *s,
                     int ns)
{
    fprintf(f, "workload %s, %d GPUs; figures at arrived = 100%% of GPU capacity\n", workload,
            cluster_gpus);
    fprintf(f, "%-11s %5s  %-15s %9s %7s  %-13s %-13s %10s\n", "policy", "seeds",
            "GPU alloc %", "published", "diff", "frag % cap", "frag ratio %", "pods/s");
    for (int i = 0; i < ns; i++) {
        char pub[16] = "-", diff[16] = "-";
        if (!isnan(s[i].published)) {
            snprintf(pub, sizeof pub, "%.2f", s[i].published);
            snprintf(diff, sizeof diff, "%+.2f", s[i].alloc_mean - s[i].published);
        }
        if (isnan(s[i].alloc_mean)) { /* no event near arrived 100 */
            fprintf(f, "%-11s %5d  %-15s %9s %7s  %-13s %-13s %10.0f\n", s[i].policy,
                    s[i].nseeds, "n/a", pub, "-", "n/a", "n/a", s[i].pods_per_s);
            continue;
        }
        fprintf(f, "%-11s %5d  %6.2f +- %-5.2f %9s %7s  %5.2f +- %-4.2f %5.2f +- %-4.2f %10.0f\n",
                s[i].policy, s[i].nseeds, s[i].alloc_mean, s[i].alloc_sd, pub, diff,
                s[i].frag_mean, s[i].frag_sd, s[i].ratio_mean, s[i].ratio_sd, s[i].pods_per_s);
    }
}

/* JSON has no NaN: a figure that could not be measured (no event near
 * arrived 100, say, on a cluster too small for the workload) is null. */
static json_t *num(double v) { return isnan(v) || isinf(v) ? json_null() : json_real(v); }

static json_t *stat_obj(double mean, double sd)
{
    return json_pack("{s:o,s:o}", "mean", num(mean), "sd", num(sd));
}

/* mean over seeds of one curve, per bin */
static json_t *curve(const sim_summary *s, int which)
{
    json_t *a = json_array();
    for (int k = 0; k < SIM_BINS; k++) {
        double sum = 0;
        int n = 0;
        for (int i = 0; i < s->nseeds; i++) {
            double v = which ? s->runs[i].frag_pct[k] : s->runs[i].alloc_pct[k];
            if (!isnan(v)) {
                sum += v;
                n++;
            }
        }
        json_array_append_new(a, n ? num(sum / n) : json_null());
    }
    return a;
}

int sim_write_json(const char *path, const char *workload, int cluster_gpus,
                   const sim_summary *s, int ns, ts_err *err)
{
    json_t *results = json_array();
    for (int i = 0; i < ns; i++) {
        json_t *seeds = json_array();
        for (int k = 0; k < s[i].nseeds; k++)
            json_array_append_new(seeds, json_integer((json_int_t)s[i].runs[k].seed));
        json_t *r = json_pack("{s:s,s:o,s:o,s:o,s:o,s:o,s:{s:o,s:o}}", "policy", s[i].policy,
                              "seeds", seeds, "alloc_pct_at_arrived_100",
                              stat_obj(s[i].alloc_mean, s[i].alloc_sd),
                              "frag_pct_at_arrived_100", stat_obj(s[i].frag_mean, s[i].frag_sd),
                              "frag_ratio_at_arrived_100",
                              stat_obj(s[i].ratio_mean, s[i].ratio_sd), "pods_per_s",
                              num(s[i].pods_per_s), "curve", "alloc_pct", curve(&s[i], 0),
                              "frag_pct", curve(&s[i], 1));
        if (!r) {
            json_decref(results);
            return ts_err_set(err, TS_ENOMEM, "%s: cannot build the JSON document", path);
        }
        json_array_append_new(results, r);
    }
    json_t *doc = json_pack("{s:s,s:i,s:o}", "workload", workload, "cluster_gpus", cluster_gpus,
                            "results", results);
    if (!doc)
        return ts_err_set(err, TS_ENOMEM, "%s: cannot build the JSON document", path);
    int rc = json_dump_file(doc, path, JSON_INDENT(1) | JSON_REAL_PRECISION(6));
    json_decref(doc);
    return rc == 0 ? 0 : ts_err_set(err, TS_EIO, "%s: cannot write", path);
}

int sim_write_csv(const char *path, const char *workload, const sim_summary *s, int ns,
                  ts_err *err)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return ts_err_set(err, TS_EIO, "%s: cannot write", path);
    fprintf(f, "workload,policy,seed,arrived_pct,alloc_pct,frag_pct,frag_ratio_pct\n");
    for (int i = 0; i < ns; i++)
        for (int k = 0; k < s[i].nseeds; k++)
            for (int b = 0; b < SIM_BINS; b++) {
                const sim_run *r = &s[i].runs[k];
                fprintf(f, "%s,%s,%llu,%d,%.2f,%.2f,%.2f\n", workload, s[i].policy,
                        (unsigned long long)r->seed, b, r->alloc_pct[b], r->frag_pct[b],
                        r->frag_ratio[b]);
            }
    int bad = ferror(f);
    bad |= fclose(f);
    return bad ? ts_err_set(err, TS_EIO, "%s: write failed", path) : 0;
}
