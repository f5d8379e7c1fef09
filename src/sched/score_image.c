/*
 * score_image.c - the price of a job's image on each node, which placement
 * uses to break its ties (image_place.h).
 *
 * The shell hands the cycle a table: each image's bytes and, per node, how
 * many of them it holds (its layers present or fetched so far). A node's
 * price is the seconds its pull would take: bytes missing over the node's
 * bandwidth. Seconds rather than a clipped sum of megabytes (Kubernetes'
 * ImageLocality caps at 1,000 MB, so a 10 GB image on one node scores like
 * a 1 GB one) keep a gang's wait and a large image's weight in view.
 *
 * The price only orders nodes the policy already finds equal: the placer's
 * equal scores (placer.c, ts_placer_choose_keyed) and, for a gang, nodes
 * with the same free GPUs and the same growth of the fragmentation measure
 * (gang.c). A job without an image, or whose image every node holds alike
 * (all of it, or none), gets NULL here, so its placement is exactly what it
 * was without the table.
 */
#include <stdlib.h>

#include "sched/cycle_internal.h"
#include "tessera/image_place.h"

double ts_image_pull_s(const ts_image_table *t, int nnodes, int image, int node)
{
    if (!t || image < 0 || image >= t->nimages || node < 0 || node >= nnodes)
        return 0.0;
    int64_t have = t->held ? t->held[(size_t)image * (size_t)nnodes + (size_t)node] : 0;
    double bw = t->bw_bytes_s ? t->bw_bytes_s[node] : TS_IMAGE_BW_DEFAULT_BYTES_S;
    int64_t missing = t->bytes[image] - have;
    return missing > 0 ? (double)missing / bw : 0.0;
}

int ts_sched_set_images(ts_sched *s, const ts_image_table *t, ts_err *err)
{
    if (!s)
        return ts_err_set(err, TS_EINVAL, "images: no scheduler");
    if (t) {
        int nn = s->c->nnodes;
        if (t->nimages < 0 || (t->nimages > 0 && !t->bytes))
            return ts_err_set(err, TS_EINVAL, "images: %d images and no sizes", t->nimages);
        for (int i = 0; i < t->nimages; i++) {
            if (t->bytes[i] <= 0)
                return ts_err_set(err, TS_EINVAL, "images[%d].bytes: must be > 0", i);
            for (int n = 0; t->held && n < nn; n++) {
                int64_t h = t->held[(size_t)i * (size_t)nn + (size_t)n];
                if (h < 0 || h > t->bytes[i])
                    return ts_err_set(err, TS_EINVAL,
                                      "images[%d].held[%d]: %lld bytes is outside 0..%lld", i,
                                      n, (long long)h, (long long)t->bytes[i]);
            }
        }
        for (int n = 0; t->bw_bytes_s && n < nn; n++)
            if (!(t->bw_bytes_s[n] > 0.0))
                return ts_err_set(err, TS_EINVAL, "images: bw_bytes_s[%d]: must be > 0", n);
    }
    s->images = t;
    s->image_cost_of = 0; /* the table may have changed in place */
    return 0;
}

const double *cycle_image_costs(ts_sched *s, const ts_job *job)
{
    const ts_image_table *t = s->images;
    int nn = s->c->nnodes, img = job->image - 1;
    if (!t || !t->held || img < 0 || img >= t->nimages || nn == 0)
        return NULL;
    if (s->image_cost_of == job->image) /* the cycle's jobs share few images */
        return s->image_cost_differ ? s->image_cost : NULL;
    if (!s->image_cost && !(s->image_cost = malloc((size_t)nn * sizeof *s->image_cost)))
        return NULL; /* out of memory: no preference, never a wrong placement */
    bool differ = false;
    for (int n = 0; n < nn; n++) {
        s->image_cost[n] = ts_image_pull_s(t, nn, img, n);
        differ = differ || s->image_cost[n] != s->image_cost[0];
    }
    s->image_cost_of = job->image;
    s->image_cost_differ = differ;
    return differ ? s->image_cost : NULL;
}
