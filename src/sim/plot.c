/*
 * plot.c - `tessera-sim replay --plot`: the replay's time series as one
 * self-contained SVG, written by hand (no library, no script, no fonts
 * beyond the viewer's sans-serif).
 *
 * One section per policy, stacked top to bottom on a common time axis so
 * that policies compare by eye: GPU utilisation (%), queue length (jobs
 * waiting), and with tenants the GPUs each tenant holds, stacked, with a
 * dashed line at the cluster's guaranteed total. Every panel of a kind
 * shares its y scale across policies. Each series is first averaged into
 * one value per pixel column (time-weighted), which is all a screen can
 * show and keeps the file small on a 60-day replay. Colours come from a
 * fixed qualitative palette; a legend names the tenants (or the
 * workloads, when a set has several).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/replay_cli.h"

#define WIDTH_PX 1100
#define LEFT_PX 80
#define RIGHT_PX 170
#define PANEL_W_PX (WIDTH_PX - LEFT_PX - RIGHT_PX)
#define TITLE_H_PX 60
#define HEAD_H_PX 34
#define LINE_PANEL_H_PX 110
#define STACK_PANEL_H_PX 190
#define PANEL_GAP_PX 34
#define SECTION_GAP_PX 26
#define AXIS_H_PX 40
#define TICKS_WANTED 5
#define SECONDS_PER_DAY 86400.0
#define SECONDS_PER_HOUR 3600.0

static const char *const palette[] = {
    "#1f6fb4", "#e6791e", "#2f9e44", "#d6336c", "#7048a8", "#8c5a3c",
    "#e064b5", "#6b6b6b", "#a6a61c", "#17a2b8", "#e0b000", "#8b1e1e",
};
#define NCOLOURS ((int)(sizeof palette / sizeof palette[0]))

/* The time axis: where it starts and ends, and its unit. */
typedef struct taxis {
    double t0, t1, unit_s;
    const char *unit;
} taxis;

static double x_of(const taxis *a, double t)
{
    return LEFT_PX + (t - a->t0) / (a->t1 - a->t0) * PANEL_W_PX;
}

/* 1, 2 or 5 x 10^k, so that about `want` steps cover range */
static double nice_step(double range, int want)
{
    if (!(range > 0))
        return 1;
    double raw = range / want, mag = pow(10, floor(log10(raw))), f = raw / mag;
    return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * mag;
}

static double nice_top(double v)
{
    if (!(v > 0))
        return 1;
    double step = nice_step(v, TICKS_WANTED);
    return ceil(v / step - 1e-9) * step;
}

static void esc(FILE *f, const char *s)
{
    for (; *s; s++)
        switch (*s) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(*s, f);
        }
}

/* Time-weighted mean of values[] (stride apart, offset first) over each of
 * ncol equal columns of the axis; a series point holds until the next. */
static void columns(const ts_replay_series *s, const double *values, int stride,
                    const taxis *a, double *col, int ncol)
{
    double w = (a->t1 - a->t0) / ncol;
    double *wt = calloc((size_t)ncol, sizeof *wt);
    memset(col, 0, sizeof *col * (size_t)ncol);
    if (!wt)
        return;
    for (int i = 0; i < s->npoints; i++) {
        double lo = s->t_s[i], hi = i + 1 < s->npoints ? s->t_s[i + 1] : s->end_s;
        double v = values[(size_t)i * (size_t)stride];
        int c = (int)((lo - a->t0) / w);
        for (c = c > 0 ? c - 1 : 0; c < ncol; c++) {
            double clo = a->t0 + c * w, chi = clo + w;
            if (clo >= hi)
                break;
            double ov = fmin(chi, hi) - fmax(clo, lo);
            if (ov > 0) {
                col[c] += v * ov;
                wt[c] += ov;
            }
        }
    }
    for (int c = 0; c < ncol; c++)
        col[c] = wt[c] > 0 ? col[c] / wt[c] : 0;
    free(wt);
}

static void frame(FILE *f, const taxis *a, double y0, double h, double top, const char *ylabel,
                  bool xlabels)
{
    fprintf(f, "<rect x=\"%d\" y=\"%.1f\" width=\"%d\" height=\"%.1f\" class=\"panel\"/>\n",
            LEFT_PX, y0, PANEL_W_PX, h);
    double step = nice_step(top, TICKS_WANTED);
    for (double v = 0; v <= top + step * 1e-6; v += step) {
        double y = y0 + h - v / top * h;
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" class=\"grid\"/>\n", LEFT_PX,
                y, LEFT_PX + PANEL_W_PX, y);
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" class=\"ytick\">%g</text>\n", LEFT_PX - 6, y + 4, v);
    }
    double span = (a->t1 - a->t0) / a->unit_s, tstep = nice_step(span, 10);
    for (double u = 0; u <= span + tstep * 1e-6; u += tstep) {
        double x = x_of(a, a->t0 + u * a->unit_s);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" class=\"grid\"/>\n", x,
                y0, x, y0 + h);
        if (xlabels)
            fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" class=\"xtick\">%g</text>\n", x, y0 + h + 15,
                    u);
    }
    if (xlabels)
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" class=\"label\">time (%s)</text>\n",
                LEFT_PX + PANEL_W_PX / 2.0, y0 + h + 31, a->unit);
    fprintf(f,
            "<text transform=\"translate(%d %.1f) rotate(-90)\" class=\"label\">", 22,
            y0 + h / 2);
    esc(f, ylabel);
    fprintf(f, "</text>\n");
}

static void polyline(FILE *f, const double *col, int ncol, double y0, double h, double top,
                     double scale, const char *colour)
{
    fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.4\" points=\"", colour);
    for (int c = 0; c < ncol; c++)
        fprintf(f, "%.1f,%.1f ", LEFT_PX + (c + 0.5) * PANEL_W_PX / ncol,
                y0 + h - fmin(col[c] * scale, top) / top * h);
    fprintf(f, "\"/>\n");
}

static void legend(FILE *f, double y0, const char *title, const char *const *names, int n,
                   bool guarantee)
{
    double x = LEFT_PX + PANEL_W_PX + 16;
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" class=\"legendtitle\">", x, y0 + 10);
    esc(f, title);
    fprintf(f, "</text>\n");
    for (int i = 0; i < n; i++) {
        double y = y0 + 24 + i * 16;
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"10\" fill=\"%s\"/>\n", x,
                y - 9, palette[i % NCOLOURS]);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" class=\"legend\">", x + 17, y);
        esc(f, names[i]);
        fprintf(f, "</text>\n");
    }
    if (guarantee) {
        double y = y0 + 24 + n * 16 + 4;
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" class=\"guarantee\"/>\n",
                x, y - 4, x + 12, y - 4);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" class=\"legend\">all guarantees</text>\n",
                x + 17, y);
    }
}

/* The tenants' GPUs held, stacked bottom (first tenant) to top. */
static void stacked(FILE *f, const ts_replay_series *s, const taxis *a, double y0, double h,
                    double top, long guaranteed, double *col, double *base, int ncol)
{
    memset(base, 0, sizeof *base * (size_t)ncol);
    for (int k = 0; k < s->ntenants; k++) {
        columns(s, s->held + k, s->ntenants, a, col, ncol);
        fprintf(f, "<polygon fill=\"%s\" fill-opacity=\"0.85\" stroke=\"none\" points=\"",
                palette[k % NCOLOURS]);
        for (int c = 0; c < ncol; c++)
            fprintf(f, "%.1f,%.1f ", LEFT_PX + (c + 0.5) * PANEL_W_PX / ncol,
                    y0 + h - fmin(base[c] + col[c], top) / top * h);
        for (int c = ncol - 1; c >= 0; c--)
            fprintf(f, "%.1f,%.1f ", LEFT_PX + (c + 0.5) * PANEL_W_PX / ncol,
                    y0 + h - fmin(base[c], top) / top * h);
        fprintf(f, "\"/>\n");
        for (int c = 0; c < ncol; c++)
            base[c] += col[c];
    }
    if (guaranteed > 0 && guaranteed <= top) {
        double y = y0 + h - guaranteed / top * h;
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" class=\"guarantee\"/>\n",
                LEFT_PX, y, LEFT_PX + PANEL_W_PX, y);
    }
}

static void choose_axis(const replay_report *r, taxis *a)
{
    a->t0 = 0;
    a->t1 = 0;
    for (int p = 0; p < r->npol; p++)
        for (int w = 0; w < r->t->nwl; w++)
            if (r->pr[p].series && r->pr[p].series[w])
                a->t1 = fmax(a->t1, r->pr[p].series[w]->end_s);
    if (!(a->t1 > a->t0))
        a->t1 = a->t0 + 1;
    double span = a->t1 - a->t0;
    if (span > 3 * SECONDS_PER_DAY)
        a->unit_s = SECONDS_PER_DAY, a->unit = "days";
    else if (span > 3 * SECONDS_PER_HOUR)
        a->unit_s = SECONDS_PER_HOUR, a->unit = "hours";
    else
        a->unit_s = 60, a->unit = "minutes";
}

int sim_plot_replay(const char *path, const replay_report *r)
{
    const ts_replay_trace *t = r->t;
    bool tenants = t->ntenants > 0;
    taxis a;
    choose_axis(r, &a);
    int ncol = PANEL_W_PX;
    double *col = malloc(sizeof *col * (size_t)ncol), *base = malloc(sizeof *base * (size_t)ncol);
    const char **names = calloc((size_t)(t->ntenants > t->nwl ? t->ntenants : t->nwl) + 1,
                                sizeof *names);
    FILE *f = fopen(path, "w");
    if (!col || !base || !names || !f) {
        free(col);
        free(base);
        free(names);
        if (f)
            fclose(f);
        return -1;
    }
    /* common scales: the largest value any policy reaches */
    double util_top = 0, queue_top = 0, held_top = 0;
    long total = (long)r->cfg->nodes * r->cfg->gpus_per_node, guaranteed = 0;
    for (int k = 0; k < t->ntenants; k++)
        guaranteed += t->tenants[k].gpus;
    for (int p = 0; p < r->npol; p++)
        for (int w = 0; w < t->nwl; w++) {
            const ts_replay_series *s = r->pr[p].series ? r->pr[p].series[w] : NULL;
            if (!s)
                continue;
            columns(s, s->busy_gpus, 1, &a, col, ncol);
            for (int c = 0; c < ncol; c++) {
                util_top = fmax(util_top, 100.0 * col[c] / (double)(total > 0 ? total : 1));
                held_top = fmax(held_top, col[c]);
            }
            columns(s, s->queue_jobs, 1, &a, col, ncol);
            for (int c = 0; c < ncol; c++)
                queue_top = fmax(queue_top, col[c]);
        }
    util_top = fmin(nice_top(util_top), 100);
    queue_top = nice_top(queue_top);
    held_top = nice_top(held_top);
    double section_h = HEAD_H_PX + 2 * (LINE_PANEL_H_PX + PANEL_GAP_PX) +
                       (tenants ? STACK_PANEL_H_PX + PANEL_GAP_PX : 0) + AXIS_H_PX - PANEL_GAP_PX;
    double height = TITLE_H_PX + r->npol * (section_h + SECTION_GAP_PX);
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
               "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%.0f\" "
               "viewBox=\"0 0 %d %.0f\" font-family=\"sans-serif\">\n",
            WIDTH_PX, height, WIDTH_PX, height);
    fprintf(f, "<style>\n"
               ".panel{fill:#fbfbfb;stroke:#999;stroke-width:1}\n"
               ".grid{stroke:#e3e3e3;stroke-width:1}\n"
               ".ytick{font-size:11px;text-anchor:end;fill:#444}\n"
               ".xtick{font-size:11px;text-anchor:middle;fill:#444}\n"
               ".label{font-size:12px;text-anchor:middle;fill:#222}\n"
               ".title{font-size:18px;font-weight:bold;fill:#111}\n"
               ".subtitle{font-size:12px;fill:#555}\n"
               ".head{font-size:15px;font-weight:bold;fill:#111}\n"
               ".ptitle{font-size:12px;fill:#333}\n"
               ".legend{font-size:11px;fill:#222}\n"
               ".legendtitle{font-size:12px;font-weight:bold;fill:#222}\n"
               ".guarantee{stroke:#222;stroke-width:1;stroke-dasharray:5 4}\n"
               "</style>\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
    fprintf(f, "<text x=\"%d\" y=\"26\" class=\"title\">tessera-sim replay: ", LEFT_PX);
    esc(f, r->jobs_file);
    fprintf(f, "</text>\n<text x=\"%d\" y=\"46\" class=\"subtitle\">%s; %d nodes x %d GPUs "
               "(%ld GPUs); %d workload(s); each point a time-weighted mean over one pixel "
               "column</text>\n",
            LEFT_PX, r->format, r->cfg->nodes, r->cfg->gpus_per_node, total, t->nwl);
    int nlegend = tenants ? t->ntenants : t->nwl;
    for (int i = 0; i < nlegend; i++)
        names[i] = tenants ? t->tenants[i].name : t->wl[i].name;
    double y = TITLE_H_PX;
    for (int p = 0; p < r->npol; p++) {
        const replay_policy_run *pr = &r->pr[p];
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" class=\"head\">", LEFT_PX, y + 20);
        esc(f, pr->ops->name);
        fprintf(f, " (%s): avg JCT %.0f s, utilisation %.1f %%", pr->mode, pr->mean.avg_jct_s,
                pr->mean.utilization_pct);
        if (tenants)
            fprintf(f, ", Jain %.3f", pr->fair.jain);
        fprintf(f, "</text>\n");
        y += HEAD_H_PX;
        const char *titles[2] = {"GPU utilisation (%)", "queue (jobs waiting)"};
        double tops[2] = {util_top, queue_top};
        for (int panel = 0; panel < 2; panel++) {
            frame(f, &a, y, LINE_PANEL_H_PX, tops[panel], titles[panel],
                  !tenants && panel == 1);
            for (int w = 0; pr->series && w < t->nwl; w++) {
                const ts_replay_series *s = pr->series[w];
                if (!s)
                    continue;
                columns(s, panel == 0 ? s->busy_gpus : s->queue_jobs, 1, &a, col, ncol);
                polyline(f, col, ncol, y, LINE_PANEL_H_PX, tops[panel],
                         panel == 0 ? 100.0 / (double)(total > 0 ? total : 1) : 1.0,
                         palette[(tenants ? 0 : w) % NCOLOURS]);
            }
            y += LINE_PANEL_H_PX + PANEL_GAP_PX;
        }
        if (!tenants && t->nwl > 1)
            legend(f, y - 2 * (LINE_PANEL_H_PX + PANEL_GAP_PX), "workload", names, nlegend,
                   false);
        if (tenants && pr->series && pr->series[0]) {
            frame(f, &a, y, STACK_PANEL_H_PX, held_top, "GPUs held per tenant", true);
            stacked(f, pr->series[0], &a, y, STACK_PANEL_H_PX, held_top, guaranteed, col, base,
                    ncol);
            legend(f, y, "tenant (stacked)", names, nlegend, guaranteed <= held_top);
            y += STACK_PANEL_H_PX + PANEL_GAP_PX;
        }
        y += AXIS_H_PX - PANEL_GAP_PX + SECTION_GAP_PX;
    }
    fprintf(f, "</svg>\n");
    free(col);
    free(base);
    free(names);
    int err = ferror(f);
    return fclose(f) != 0 || err ? -1 : 0;
}
