/*
 * sbatch_set.c - what each sbatch option does to a request (sbatch_req.h):
 * one setter per option (or per family: the counts, the GPU options, the
 * memory options, the names...), found by the option's id in OPT_DO with the
 * member of the request it fills, so a family's setter is written once.
 *
 * Each setter checks its value on its own and says what is wrong with it
 * ("script:LINE: --opt: why, got \"value\""); an error is collected and the
 * rest still read, so the user sees every mistake at once. How values
 * combine (ntasks against nodes, memory per GPU against GPUs) is
 * sbatch_spec.c's. The table of option names is sbatch.c's, with the words.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/sbatch_req.h"
#include "api/spec_scalar.h"
#include "tessera/depend.h"
#include "tessera/image_ref.h"
#include "tessera/node_select.h"

#define NODES_MAX 65536L
#define TASKS_MAX 65536L
#define CPUS_PER_TASK_MAX 4096L
#define GPUS_PER_TASK_MAX 16L
#define GPUS_TOTAL_MAX (16L * 65536L)
#define TIME_MAX_MIN (365LL * 24 * 60)   /* the spec's longest duration */

static bool set_str(char **slot, const char *v)
{
    char *s = strdup(v);
    if (!s)
        return false;
    free(*slot);
    *slot = s;
    return true;
}

/* A group (GPUs, memory) takes one option per source; a later source wins. */
static bool group_take(int *kind, int *src, int new_kind, int new_src, const char *where,
                       const char *opt, const char *group, ts_spec_errors *errs)
{
    if (*kind != GPU_NONE && *src == new_src && *kind != new_kind) {
        sbatch_error(errs, "%s--%s: give one of %s", where, opt, group);
        return false;
    }
    *kind = new_kind;
    *src = new_src;
    return true;
}

#define GPU_GROUP "--gpus, --gpus-per-node, --gpus-per-task and --gres"
#define MEM_GROUP "--mem, --mem-per-cpu and --mem-per-gpu"

/* --mail-type=TYPE[,TYPE...]: BEGIN, END, FAIL and ALL map to notify.on;
 * NONE clears; Slurm's other types are said and left out (tessera mails
 * starts, ends and failures only). */
static int mail_type(struct sbatch_req *r, const char *v, const char *where, ts_sbatch *sb,
                     ts_spec_errors *errs)
{
    static const char *const OTHER[] = {"REQUEUE", "INVALID_DEPEND", "STAGE_OUT", "TIME_LIMIT",
                                        "TIME_LIMIT_90", "TIME_LIMIT_80", "TIME_LIMIT_50",
                                        "ARRAY_TASKS"};
    r->mail_type_given = true;
    for (const char *p = v; *p;) {
        size_t l = strcspn(p, ",");
        char w[32];
        snprintf(w, sizeof w, "%.*s", (int)(l < sizeof w - 1 ? l : sizeof w - 1), p);
        bool other = false;
        for (size_t i = 0; i < sizeof OTHER / sizeof *OTHER; i++)
            other = other || strcmp(w, OTHER[i]) == 0;
        if (strcmp(w, "NONE") == 0)
            r->mail_on = 0;
        else if (strcmp(w, "BEGIN") == 0)
            r->mail_on |= TS_NOTIFY_START;
        else if (strcmp(w, "END") == 0)
            r->mail_on |= TS_NOTIFY_END;
        else if (strcmp(w, "FAIL") == 0)
            r->mail_on |= TS_NOTIFY_FAIL;
        else if (strcmp(w, "ALL") == 0)
            r->mail_on |= TS_NOTIFY_START | TS_NOTIFY_END | TS_NOTIFY_FAIL;
        else if (other)
            sbatch_warn(sb, "%s--mail-type: %s ignored (tessera mails BEGIN, END and FAIL)",
                        where, w);
        else {
            sbatch_error(errs, "%s--mail-type: \"%s\" is not NONE, BEGIN, END, FAIL, ALL or "
                         "another Slurm mail type", where, w);
            return 0;
        }
        p += l + (p[l] == ',');
    }
    return 0;
}

/* Where an option was read and where its complaints go. */
struct opt_at {
    int src;           /* SRC_SCRIPT or SRC_CLI: the command line overrides a group */
    const char *where; /* "script:LINE: " or "" */
    ts_sbatch *sb;     /* warnings */
    ts_spec_errors *errs;
    void *slot;        /* the member of the request the option fills (OPT_DO) */
    long max;          /* its number's bound */
};

static int opt_name(struct sbatch_req *r, const struct sopt *o, const char *v,
                    const struct opt_at *at)
{
    (void)o;
    if (strlen(v) >= SBATCH_NAME_MAX) {
        sbatch_error(at->errs, "%s--job-name: longer than %d characters", at->where,
                     SBATCH_NAME_MAX - 1);
        return 0;
    }
    return set_str(&r->name, v) ? 0 : TS_ENOMEM;
}

static int opt_nodes(struct sbatch_req *r, const struct sopt *o, const char *v,
                     const struct opt_at *at)
{
    (void)o;
    long lo, hi;
    const char *dash = strchr(v, '-');
    if (dash) {
        char a[32];
        size_t al = (size_t)(dash - v);
        if (al >= sizeof a)
            al = sizeof a - 1;
        memcpy(a, v, al);
        a[al] = '\0';
        if (!sbatch_parse_long(a, 1, NODES_MAX, &lo) || !sbatch_parse_long(dash + 1, 1, NODES_MAX, &hi) ||
            hi < lo) {
            sbatch_error(at->errs, "%s--nodes: must be N or MIN-MAX, 1..65536, got \"%s\"",
                         at->where, v);
            return 0;
        }
        if (hi != lo) {
            sbatch_error(at->errs, "%s--nodes: a range of node counts (%s) is not supported: "
                         "give one count", at->where, v);
            return 0;
        }
    } else if (!sbatch_parse_long(v, 1, NODES_MAX, &lo)) {
        sbatch_error(at->errs, "%s--nodes: must be 1..65536, got \"%s\"", at->where, v);
        return 0;
    }
    r->nodes = lo;
    return 0;
}

/* A count 1..max (--ntasks, --ntasks-per-node, --cpus-per-task, --cpus-per-gpu). */
static int opt_count(struct sbatch_req *r, const struct sopt *o, const char *v,
                     const struct opt_at *at)
{
    (void)r;
    if (!sbatch_parse_long(v, 1, at->max, at->slot))
        sbatch_error(at->errs, "%s--%s: must be 1..%ld, got \"%s\"", at->where, o->name,
                     at->max, v);
    return 0;
}

/* One option of the GPU group: how many, of which type, read as kind. */
static int gpu_take(struct sbatch_req *r, const struct sopt *o, int kind, long n,
                    const char *type, const struct opt_at *at)
{
    if (!group_take(&r->gpu_kind, &r->gpu_src, kind, at->src, at->where, o->name, GPU_GROUP,
                    at->errs))
        return 0;
    r->gpu_n = n;
    snprintf(r->gpu_type, sizeof r->gpu_type, "%s", type);
    return 0;
}

static int opt_gpus(struct sbatch_req *r, const struct sopt *o, const char *v,
                    const struct opt_at *at)
{
    long l;
    char type[SBATCH_NAME_MAX];
    if (!sbatch_parse_gpu_count(v, at->max, &l, type)) {
        sbatch_error(at->errs, "%s--%s: must be [TYPE:]N with N 0..%ld, got \"%s\"", at->where,
                     o->name, at->max, v);
        return 0;
    }
    int kind = o->id == O_GPUS ? GPU_TOTAL : o->id == O_GPN ? GPU_PER_NODE : GPU_PER_TASK;
    return gpu_take(r, o, kind, l, type, at);
}

static int opt_gres(struct sbatch_req *r, const struct sopt *o, const char *v,
                    const struct opt_at *at)
{
    long l;
    const char *why;
    char type[SBATCH_NAME_MAX];
    why = sbatch_parse_gres(v, &l, type);
    if (why) {
        sbatch_error(at->errs, "%s--gres: %s, got \"%s\"", at->where, why, v);
        return 0;
    }
    return gpu_take(r, o, GPU_GRES, l, type, at);
}

static int opt_mem(struct sbatch_req *r, const struct sopt *o, const char *v,
                   const struct opt_at *at)
{
    int64_t mib = sbatch_parse_mem(v);
    if (mib < 0) {
        sbatch_error(at->errs, "%s--%s: must be a size like 4096, 500M or 16G (K, M, G, T; "
                     "at most 64T), got \"%s\"", at->where, o->name, v);
        return 0;
    }
    if (mib == 0) {
        sbatch_error(at->errs, "%s--%s: 0 (all of a node's memory) is not supported: give "
                     "a size", at->where, o->name);
        return 0;
    }
    int kind = o->id == O_MEM ? MEM_PER_NODE : o->id == O_MEM_CPU ? MEM_PER_CPU : MEM_PER_GPU;
    if (!group_take(&r->mem_kind, &r->mem_src, kind, at->src, at->where, o->name, MEM_GROUP,
                    at->errs))
        return 0;
    r->mem_mib = mib;
    return 0;
}

static int opt_time(struct sbatch_req *r, const struct sopt *o, const char *v,
                    const struct opt_at *at)
{
    (void)o;
    int64_t m = ts_sbatch_time_min(v);
    if (strcmp(v, "UNLIMITED") == 0 || strcmp(v, "INFINITE") == 0 ||
        strcmp(v, "infinite") == 0 || strcmp(v, "unlimited") == 0) {
        sbatch_error(at->errs, "%s--time: %s is not supported: give a limit (at most 365 "
                     "days)", at->where, v);
        return 0;
    }
    if (m < 1 || m > TIME_MAX_MIN) {
        sbatch_error(at->errs, "%s--time: must be MIN, MIN:SEC, H:MIN:SEC, D-H, D-H:MIN or "
                     "D-H:MIN:SEC, 1 minute to 365 days, got \"%s\"", at->where, v);
        return 0;
    }
    r->time_min = m;
    return 0;
}

static int opt_array(struct sbatch_req *r, const struct sopt *o, const char *v,
                     const struct opt_at *at)
{
    (void)o;
    const char *why;
    long count, throttle;
    char *list = sbatch_parse_array(v, &count, &throttle, &why);
    if (!list) {
        if (!why)
            return TS_ENOMEM;
        sbatch_error(at->errs, "%s--array: %s, got \"%s\"", at->where, why, v);
        return 0;
    }
    free(r->array);
    r->array = list;
    r->array_count = count;
    r->array_throttle = throttle;
    return 0;
}

/* A name (--qos, --account, --partition, --reservation). */
static int opt_label(struct sbatch_req *r, const struct sopt *o, const char *v,
                     const struct opt_at *at)
{
    if (strlen(v) >= TS_SPEC_NAME_MAX) {
        sbatch_error(at->errs, "%s--%s: longer than %d characters", at->where, o->name,
                     TS_SPEC_NAME_MAX - 1);
        return 0;
    }
    (void)r;
    return set_str(at->slot, v) ? 0 : TS_ENOMEM;
}

static int opt_dependency(struct sbatch_req *r, const struct sopt *o, const char *v,
                          const struct opt_at *at)
{
    (void)o;
    const char *why;
    /* Slurm's grammar first (its messages), then what Tessera evaluates */
    char dwhy[TS_ERR_MSG_MAX / 2], text[TS_DEP_MAX_BYTES + 1];
    why = sbatch_check_dependency(v);
    if (why) {
        sbatch_error(at->errs, "%s--dependency: %s, got \"%.256s\"", at->where, why, v);
        return 0;
    }
    if (ts_dep_canonical(v, text, dwhy, sizeof dwhy) != 0) {
        sbatch_error(at->errs, "%s--dependency: %s", at->where, dwhy);
        return 0;
    }
    return set_str(&r->dependency, text) ? 0 : TS_ENOMEM;
}

static int opt_hold(struct sbatch_req *r, const struct sopt *o, const char *v,
                    const struct opt_at *at)
{
    (void)o; (void)v; (void)at;
    r->hold = true;
    return 0;
}

static int opt_mail_type(struct sbatch_req *r, const struct sopt *o, const char *v,
                         const struct opt_at *at)
{
    (void)o;
    return mail_type(r, v, at->where, at->sb, at->errs);
}

/* --nice[=N]: without N, Slurm's default adjustment (100). */
static int opt_nice(struct sbatch_req *r, const struct sopt *o, const char *v,
                    const struct opt_at *at)
{
    (void)o;
    long l;
    if (!v) {
        r->nice = SBATCH_NICE_DEFAULT;
        r->nice_given = true;
    } else if (sbatch_parse_long(v + (v[0] == '-'), 0, TS_SPEC_NICE_MAX, &l)) {
        r->nice = v[0] == '-' ? -(int)l : (int)l;
        r->nice_given = true;
    } else {
        sbatch_error(at->errs, "%s--nice: an integer %d..%d, got \"%s\"", at->where,
                     TS_SPEC_NICE_MIN, TS_SPEC_NICE_MAX, v);
    }
    return 0;
}

static int opt_select(struct sbatch_req *r, const struct sopt *o, const char *v,
                      const struct opt_at *at)
{
    ts_err e;
    if ((o->id == O_CONSTRAINT ? ts_constraint_check(v, &e) : ts_hostlist_check(v, &e)) != 0) {
        sbatch_error(at->errs, "%s--%s: %s", at->where, o->name, e.msg);
        return 0;
    }
    (void)r;
    return set_str(at->slot, v) ? 0 : TS_ENOMEM;
}

static int opt_signal(struct sbatch_req *r, const struct sopt *o, const char *v,
                      const struct opt_at *at)
{
    (void)o;
    const char *why = sbatch_parse_signal(v, &r->signal, &r->signal_time_s);
    if (why)
        sbatch_error(at->errs, "%s--signal: %s, got \"%s\"", at->where, why, v);
    r->signal_batch = strncmp(v, "B:", 2) == 0 || strncmp(v, "RB:", 3) == 0;
    return 0;
}

static int opt_image(struct sbatch_req *r, const struct sopt *o, const char *v,
                     const struct opt_at *at)
{
    (void)o;
    /* pyxis's REGISTRY#IMAGE is REGISTRY/IMAGE; the registry is required */
    char ref[TS_IMAGE_REF_MAX];
    snprintf(ref, sizeof ref, "%s", v);
    char *hash = strchr(ref, '#');
    if (hash && !strchr(hash + 1, '#'))
        *hash = '/';
    ts_image_ref parsed;
    ts_err e;
    if (ts_image_ref_parse(ref, "--container-image", &parsed, &e) != 0) {
        sbatch_error(at->errs, "%s%s", at->where, e.msg);
        return 0;
    }
    return set_str(&r->image, ref) ? 0 : TS_ENOMEM;
}

/* A value kept as given (--output, --error, --chdir, --mail-user). */
static int opt_text(struct sbatch_req *r, const struct sopt *o, const char *v,
                    const struct opt_at *at)
{
    (void)r;
    (void)o;
    return set_str(at->slot, v) ? 0 : TS_ENOMEM;
}

static int opt_export(struct sbatch_req *r, const struct sopt *o, const char *v,
                      const struct opt_at *at)
{
    (void)o;
    const char *why = *v ? sbatch_check_export(v) : "empty value";
    if (why) {
        sbatch_error(at->errs, "%s--export: %s, got \"%s\"", at->where, why, v);
        return 0;
    }
    return set_str(&r->export_list, v) ? 0 : TS_ENOMEM;
}

static int opt_warn(struct sbatch_req *r, const struct sopt *o, const char *v,
                    const struct opt_at *at)
{
    (void)r; (void)v;
    sbatch_warn(at->sb, "%s--%s: ignored (%s)", at->where, o->name, o->why);
    return 0;
}

static int opt_refuse(struct sbatch_req *r, const struct sopt *o, const char *v,
                      const struct opt_at *at)
{
    (void)r; (void)v;
    sbatch_error(at->errs, "%s--%s: not supported (%s)", at->where, o->name, o->why);
    return 0;
}

/* What each option does to the request, by opt_id: its setter, the member
 * it fills where the setter serves several options, and a number's bound;
 * an option not listed (O_REFUSE) is refused with its reason. */
#define AT(member) offsetof(struct sbatch_req, member)
static const struct opt_do {
    int (*set)(struct sbatch_req *r, const struct sopt *o, const char *v,
               const struct opt_at *at);
    size_t off;
    long max;
} OPT_DO[] = {
    [O_NAME] = {opt_name, 0, 0},
    [O_NODES] = {opt_nodes, 0, 0},
    [O_NTASKS] = {opt_count, AT(ntasks), TASKS_MAX},
    [O_NTPN] = {opt_count, AT(ntasks_per_node), TASKS_MAX},
    [O_CPT] = {opt_count, AT(cpus_per_task), CPUS_PER_TASK_MAX},
    [O_CPG] = {opt_count, AT(cpus_per_gpu), CPUS_PER_TASK_MAX},
    [O_GPUS] = {opt_gpus, 0, GPUS_TOTAL_MAX},
    [O_GPN] = {opt_gpus, 0, GPUS_PER_NODE_MAX},
    [O_GPT] = {opt_gpus, 0, GPUS_PER_TASK_MAX},
    [O_GRES] = {opt_gres, 0, 0},
    [O_MEM] = {opt_mem, 0, 0},
    [O_MEM_CPU] = {opt_mem, 0, 0},
    [O_MEM_GPU] = {opt_mem, 0, 0},
    [O_TIME] = {opt_time, 0, 0},
    [O_ARRAY] = {opt_array, 0, 0},
    [O_QOS] = {opt_label, AT(qos), 0},
    [O_ACCOUNT] = {opt_label, AT(account), 0},
    [O_PARTITION] = {opt_label, AT(partition), 0},
    [O_DEPENDENCY] = {opt_dependency, 0, 0},
    [O_HOLD] = {opt_hold, 0, 0},
    [O_MAIL_TYPE] = {opt_mail_type, 0, 0},
    [O_MAIL_USER] = {opt_text, AT(mail_user), 0},
    [O_NICE] = {opt_nice, 0, 0},
    [O_RESERVATION] = {opt_label, AT(reservation), 0},
    [O_CONSTRAINT] = {opt_select, AT(constraint), 0},
    [O_NODELIST] = {opt_select, AT(nodelist), 0},
    [O_EXCLUDE] = {opt_select, AT(exclude), 0},
    [O_SIGNAL] = {opt_signal, 0, 0},
    [O_IMAGE] = {opt_image, 0, 0},
    [O_OUTPUT] = {opt_text, AT(output), 0},
    [O_ERROR] = {opt_text, AT(error), 0},
    [O_CHDIR] = {opt_text, AT(chdir), 0},
    [O_EXPORT] = {opt_export, 0, 0},
    [O_WARN] = {opt_warn, 0, 0},
};
#undef AT

int sbatch_apply(struct sbatch_req *r, const struct sopt *o, const char *v, int src,
                 const char *where, ts_sbatch *sb, ts_spec_errors *errs)
{
    const char *n = o->name;
    if (v && strlen(v) > TS_SBATCH_VALUE_MAX) {
        sbatch_error(errs, "%s--%s: longer than %d bytes", where, n, TS_SBATCH_VALUE_MAX);
        return 0;
    }
    if (o->arg == ARG_REQUIRED && v && !*v && o->id != O_EXPORT) {
        sbatch_error(errs, "%s--%s: empty value", where, n);
        return 0;
    }
    bool listed = o->id >= 0 && (size_t)o->id < sizeof OPT_DO / sizeof OPT_DO[0] &&
                  OPT_DO[o->id].set;
    if (!listed) {
        const struct opt_at at = {.src = src, .where = where, .sb = sb, .errs = errs};
        return opt_refuse(r, o, v, &at);
    }
    const struct opt_do *d = &OPT_DO[o->id];
    const struct opt_at at = {.src = src, .where = where, .sb = sb, .errs = errs,
                              .slot = (char *)r + d->off, .max = d->max};
    free(r->at[o->id]); /* its errors once the script is read name this place */
    r->at[o->id] = where && *where ? strdup(where) : NULL;
    return d->set(r, o, v, &at);
}
