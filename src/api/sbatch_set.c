/*
 * sbatch_set.c - what each sbatch option does to a request (sbatch_req.h):
 * one setter per option (or per family: --ntasks and --ntasks-per-node, the
 * GPU options, the memory options...), found by the option's id in OPT_SET.
 *
 * Each setter checks its value on its own and says what is wrong with it
 * ("script:LINE: --opt: why, got \"value\""); an error is collected and the
 * rest still read, so the user sees every mistake at once. How values
 * combine (ntasks against nodes, memory per GPU against GPUs) is
 * sbatch_spec.c's. The table of option names is sbatch.c's, with the words.
 */
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

static int opt_tasks(struct sbatch_req *r, const struct sopt *o, const char *v,
                     const struct opt_at *at)
{
    long l;
    if (!sbatch_parse_long(v, 1, TASKS_MAX, &l)) {
        sbatch_error(at->errs, "%s--%s: must be 1..65536, got \"%s\"", at->where, o->name, v);
        return 0;
    }
    *(o->id == O_NTASKS ? &r->ntasks : &r->ntasks_per_node) = l;
    return 0;
}

static int opt_cpus(struct sbatch_req *r, const struct sopt *o, const char *v,
                    const struct opt_at *at)
{
    long l;
    if (!sbatch_parse_long(v, 1, CPUS_PER_TASK_MAX, &l)) {
        sbatch_error(at->errs, "%s--%s: must be 1..4096, got \"%s\"", at->where, o->name, v);
        return 0;
    }
    *(o->id == O_CPT ? &r->cpus_per_task : &r->cpus_per_gpu) = l;
    return 0;
}

static int opt_gpus(struct sbatch_req *r, const struct sopt *o, const char *v,
                    const struct opt_at *at)
{
    long l;
    char type[SBATCH_NAME_MAX];
    long max = o->id == O_GPUS ? GPUS_TOTAL_MAX
                               : o->id == O_GPN ? GPUS_PER_NODE_MAX : GPUS_PER_TASK_MAX;
    if (!sbatch_parse_gpu_count(v, max, &l, type)) {
        sbatch_error(at->errs, "%s--%s: must be [TYPE:]N with N 0..%ld, got \"%s\"", at->where,
                     o->name, max, v);
        return 0;
    }
    int kind = o->id == O_GPUS ? GPU_TOTAL : o->id == O_GPN ? GPU_PER_NODE : GPU_PER_TASK;
    if (!group_take(&r->gpu_kind, &r->gpu_src, kind, at->src, at->where, o->name, GPU_GROUP,
                    at->errs))
        return 0;
    r->gpu_n = l;
    snprintf(r->gpu_type, sizeof r->gpu_type, "%s", type);
    return 0;
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
    if (!group_take(&r->gpu_kind, &r->gpu_src, GPU_GRES, at->src, at->where, o->name, GPU_GROUP,
                    at->errs))
        return 0;
    r->gpu_n = l;
    snprintf(r->gpu_type, sizeof r->gpu_type, "%s", type);
    return 0;
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

static int opt_label(struct sbatch_req *r, const struct sopt *o, const char *v,
                     const struct opt_at *at)
{
    if (strlen(v) >= TS_SPEC_NAME_MAX) {
        sbatch_error(at->errs, "%s--%s: longer than %d characters", at->where, o->name,
                     TS_SPEC_NAME_MAX - 1);
        return 0;
    }
    char **slot = o->id == O_QOS ? &r->qos : o->id == O_ACCOUNT ? &r->account : &r->partition;
    return set_str(slot, v) ? 0 : TS_ENOMEM;
}

static int opt_dependency(struct sbatch_req *r, const struct sopt *o, const char *v,
                          const struct opt_at *at)
{
    (void)o;
    const char *why;
    /* Slurm's grammar first (its messages), then what Tessera evaluates */
    ts_dependency d;
    char dwhy[TS_ERR_MSG_MAX / 2];
    why = sbatch_check_dependency(v);
    if (why) {
        sbatch_error(at->errs, "%s--dependency: %s, got \"%.256s\"", at->where, why, v);
        return 0;
    }
    if (ts_dep_parse(v, &d, dwhy, sizeof dwhy) != 0) {
        sbatch_error(at->errs, "%s--dependency: %s", at->where, dwhy);
        return 0;
    }
    char text[TS_DEP_MAX_BYTES + 1];
    ts_dep_format(&d, text, sizeof text);
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

static int opt_mail_user(struct sbatch_req *r, const struct sopt *o, const char *v,
                         const struct opt_at *at)
{
    (void)o; (void)at;
    return set_str(&r->mail_user, v) ? 0 : TS_ENOMEM;
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

static int opt_reservation(struct sbatch_req *r, const struct sopt *o, const char *v,
                           const struct opt_at *at)
{
    if (strlen(v) >= TS_SPEC_NAME_MAX) {
        sbatch_error(at->errs, "%s--%s: longer than %d characters", at->where, o->name,
                     TS_SPEC_NAME_MAX - 1);
        return 0;
    }
    return set_str(&r->reservation, v) ? 0 : TS_ENOMEM;
}

static int opt_select(struct sbatch_req *r, const struct sopt *o, const char *v,
                      const struct opt_at *at)
{
    ts_err e;
    if ((o->id == O_CONSTRAINT ? ts_constraint_check(v, &e) : ts_hostlist_check(v, &e)) != 0) {
        sbatch_error(at->errs, "%s--%s: %s", at->where, o->name, e.msg);
        return 0;
    }
    char **slot = o->id == O_CONSTRAINT ? &r->constraint
                  : o->id == O_NODELIST ? &r->nodelist
                                        : &r->exclude;
    return set_str(slot, v) ? 0 : TS_ENOMEM;
}

static int opt_signal(struct sbatch_req *r, const struct sopt *o, const char *v,
                      const struct opt_at *at)
{
    (void)o;
    const char *why = sbatch_parse_signal(v, &r->signal, &r->signal_time_s);
    if (why)
        sbatch_error(at->errs, "%s--signal: %s, got \"%s\"", at->where, why, v);
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

static int opt_path(struct sbatch_req *r, const struct sopt *o, const char *v,
                    const struct opt_at *at)
{
    (void)at;
    return set_str(o->id == O_OUTPUT ? &r->output : o->id == O_ERROR ? &r->error : &r->chdir,
                   v)
               ? 0
               : TS_ENOMEM;
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

/* What each option does to the request, by opt_id; an option not listed
 * (O_REFUSE) is refused with its reason. */
static int (*const OPT_SET[])(struct sbatch_req *r, const struct sopt *o, const char *v,
                              const struct opt_at *at) = {
    [O_NAME] = opt_name,
    [O_NODES] = opt_nodes,
    [O_NTASKS] = opt_tasks,
    [O_NTPN] = opt_tasks,
    [O_CPT] = opt_cpus,
    [O_CPG] = opt_cpus,
    [O_GPUS] = opt_gpus,
    [O_GPN] = opt_gpus,
    [O_GPT] = opt_gpus,
    [O_GRES] = opt_gres,
    [O_MEM] = opt_mem,
    [O_MEM_CPU] = opt_mem,
    [O_MEM_GPU] = opt_mem,
    [O_TIME] = opt_time,
    [O_ARRAY] = opt_array,
    [O_QOS] = opt_label,
    [O_ACCOUNT] = opt_label,
    [O_PARTITION] = opt_label,
    [O_DEPENDENCY] = opt_dependency,
    [O_HOLD] = opt_hold,
    [O_MAIL_TYPE] = opt_mail_type,
    [O_MAIL_USER] = opt_mail_user,
    [O_NICE] = opt_nice,
    [O_RESERVATION] = opt_reservation,
    [O_CONSTRAINT] = opt_select,
    [O_NODELIST] = opt_select,
    [O_EXCLUDE] = opt_select,
    [O_SIGNAL] = opt_signal,
    [O_IMAGE] = opt_image,
    [O_OUTPUT] = opt_path,
    [O_ERROR] = opt_path,
    [O_CHDIR] = opt_path,
    [O_EXPORT] = opt_export,
    [O_WARN] = opt_warn,
};

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
    const struct opt_at at = {.src = src, .where = where, .sb = sb, .errs = errs};
    bool listed = o->id >= 0 && (size_t)o->id < sizeof OPT_SET / sizeof OPT_SET[0] &&
                  OPT_SET[o->id];
    return (listed ? OPT_SET[o->id] : opt_refuse)(r, o, v, &at);
}
