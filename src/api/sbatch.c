/*
 * sbatch.c - reading a Slurm batch script's `#SBATCH` directives and
 * sbatch-style command-line options (include/tessera/sbatch.h).
 *
 * As sbatch does, directives are the `#SBATCH` lines before the first line
 * that is neither blank nor a comment; each line holds one or more options,
 * words split as a shell would (quotes, backslash), and a word starting with
 * '#' ends it. Options take the long form (--mem=4G, --mem 4G) or the short
 * one (-N2, -N 2). Every option Slurm documents for sbatch that Tessera
 * cannot honour is an error naming it; the few whose absence changes nothing
 * about where and how the job runs are warnings; an unknown option is an
 * error. Values are checked here, one by one; how they combine is
 * sbatch_spec.c's. The command line is read after the script, so its
 * options override the script's (sbatch's rule).
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "api/sbatch_req.h"
#include "api/spec_scalar.h"
#include "tessera/depend.h"
#include "tessera/image_ref.h"
#include "tessera/node_select.h"

#define DIRECTIVE "#SBATCH"
#define MAX_WORDS_PER_LINE 64
#define NODES_MAX 65536L
#define TASKS_MAX 65536L
#define CPUS_PER_TASK_MAX 4096L
#define GPUS_PER_TASK_MAX 16L
#define GPUS_TOTAL_MAX (16L * 65536L)
#define TIME_MAX_MIN (365LL * 24 * 60)   /* the spec's longest duration */

enum opt_id {
    O_NAME, O_NODES, O_NTASKS, O_NTPN, O_CPT, O_CPG, O_GPUS, O_GPN, O_GPT, O_GRES, O_MEM,
    O_MEM_CPU, O_MEM_GPU, O_TIME, O_ARRAY, O_QOS, O_ACCOUNT, O_PARTITION, O_DEPENDENCY,
    O_CONSTRAINT, O_NODELIST, O_EXCLUDE, O_RESERVATION, O_HOLD, O_MAIL_TYPE, O_MAIL_USER, O_NICE,
    O_SIGNAL, O_OUTPUT, O_ERROR, O_EXPORT, O_CHDIR, O_IMAGE, O_WARN, O_REFUSE
};
enum { ARG_NONE, ARG_REQUIRED, ARG_OPTIONAL };

struct sopt {
    const char *name;
    char short_name;
    int id;
    int arg;
    const char *why; /* for O_WARN / O_REFUSE: what Tessera does instead */
};

static const struct sopt OPTS[] = {
    {"job-name", 'J', O_NAME, ARG_REQUIRED, NULL},
    {"nodes", 'N', O_NODES, ARG_REQUIRED, NULL},
    {"ntasks", 'n', O_NTASKS, ARG_REQUIRED, NULL},
    {"ntasks-per-node", 0, O_NTPN, ARG_REQUIRED, NULL},
    {"cpus-per-task", 'c', O_CPT, ARG_REQUIRED, NULL},
    {"cpus-per-gpu", 0, O_CPG, ARG_REQUIRED, NULL},
    {"gpus", 'G', O_GPUS, ARG_REQUIRED, NULL},
    {"gpus-per-node", 0, O_GPN, ARG_REQUIRED, NULL},
    {"gpus-per-task", 0, O_GPT, ARG_REQUIRED, NULL},
    {"gres", 0, O_GRES, ARG_REQUIRED, NULL},
    {"mem", 0, O_MEM, ARG_REQUIRED, NULL},
    {"mem-per-cpu", 0, O_MEM_CPU, ARG_REQUIRED, NULL},
    {"mem-per-gpu", 0, O_MEM_GPU, ARG_REQUIRED, NULL},
    {"time", 't', O_TIME, ARG_REQUIRED, NULL},
    {"array", 'a', O_ARRAY, ARG_REQUIRED, NULL},
    {"qos", 'q', O_QOS, ARG_REQUIRED, NULL},
    {"account", 'A', O_ACCOUNT, ARG_REQUIRED, NULL},
    {"partition", 'p', O_PARTITION, ARG_REQUIRED, NULL},
    {"dependency", 'd', O_DEPENDENCY, ARG_REQUIRED, NULL},
    {"constraint", 'C', O_CONSTRAINT, ARG_REQUIRED, NULL},
    {"nodelist", 'w', O_NODELIST, ARG_REQUIRED, NULL},
    {"exclude", 'x', O_EXCLUDE, ARG_REQUIRED, NULL},
    {"reservation", 0, O_RESERVATION, ARG_REQUIRED, NULL},
    {"hold", 'H', O_HOLD, ARG_NONE, NULL},
    {"mail-type", 0, O_MAIL_TYPE, ARG_REQUIRED, NULL},
    {"mail-user", 0, O_MAIL_USER, ARG_REQUIRED, NULL},
    {"nice", 0, O_NICE, ARG_OPTIONAL, NULL},
    {"signal", 0, O_SIGNAL, ARG_REQUIRED, NULL},
    {"output", 'o', O_OUTPUT, ARG_REQUIRED, NULL},
    {"error", 'e', O_ERROR, ARG_REQUIRED, NULL},
    {"export", 0, O_EXPORT, ARG_REQUIRED, NULL},
    {"chdir", 'D', O_CHDIR, ARG_REQUIRED, NULL},
    {"container-image", 0, O_IMAGE, ARG_REQUIRED, NULL}, /* pyxis's spelling */
    /* safe to ignore: where and how the job runs stays the same */
    {"comment", 0, O_WARN, ARG_REQUIRED, "Tessera keeps no comment"},
    {"requeue", 0, O_WARN, ARG_NONE, "Tessera always requeues a preempted job"},
    {"no-requeue", 0, O_WARN, ARG_NONE, "Tessera always requeues a preempted job"},
    {"open-mode", 0, O_WARN, ARG_REQUIRED, "--output/--error are always appended to"},
    {"parsable", 0, O_WARN, ARG_NONE, "tessera prints job ids one a line"},
    {"quiet", 'Q', O_WARN, ARG_NONE, "no effect"},
    {"verbose", 'v', O_WARN, ARG_NONE, "no effect"},
    {"exclusive", 0, O_WARN, ARG_OPTIONAL, "a task gets only its own GPUs, CPUs and memory"},
    {"oversubscribe", 's', O_WARN, ARG_NONE, "a task gets only its own GPUs, CPUs and memory"},
    {"hint", 0, O_WARN, ARG_REQUIRED, "no CPU binding hints"},
    {"distribution", 'm', O_WARN, ARG_REQUIRED, "the scheduler places tasks"},
    {"gpu-bind", 0, O_WARN, ARG_REQUIRED, "a task sees exactly its own GPUs"},
    {"mem-bind", 0, O_WARN, ARG_REQUIRED, "no memory binding"},
    {"threads-per-core", 0, O_WARN, ARG_REQUIRED, "CPUs are counted in cores"},
    {"ntasks-per-core", 0, O_WARN, ARG_REQUIRED, "the scheduler places tasks"},
    {"ntasks-per-socket", 0, O_WARN, ARG_REQUIRED, "the scheduler places tasks"},
    {"sockets-per-node", 0, O_WARN, ARG_REQUIRED, "the scheduler places tasks"},
    {"cores-per-socket", 0, O_WARN, ARG_REQUIRED, "the scheduler places tasks"},
    {"time-min", 0, O_WARN, ARG_REQUIRED, "--time is the limit"},
    {"kill-on-invalid-dep", 0, O_WARN, ARG_REQUIRED,
     "a dependency that can never be met always fails the job"},
    {"get-user-env", 0, O_WARN, ARG_OPTIONAL, "--export decides the environment"},
    {"propagate", 0, O_WARN, ARG_OPTIONAL, "resource limits are the task's cgroup"},
    {"wckey", 0, O_WARN, ARG_REQUIRED, "no workload keys"},
    {"spread-job", 0, O_WARN, ARG_NONE, "the scheduler places tasks"},
    {"no-kill", 'k', O_WARN, ARG_OPTIONAL, "a job loses its node's tasks when the node fails"},
    /* would change where, when or whether the job runs: refused */
    {"licenses", 'L', O_REFUSE, ARG_REQUIRED, "licenses are not supported"},
    {"begin", 'b', O_REFUSE, ARG_REQUIRED, "deferred starts are not supported"},
    {"deadline", 0, O_REFUSE, ARG_REQUIRED, "deadlines are not supported"},
    {"wait", 'W', O_REFUSE, ARG_NONE, "not supported"},
    {"clusters", 'M', O_REFUSE, ARG_REQUIRED, "one controller is one cluster"},
    {"wrap", 0, O_REFUSE, ARG_REQUIRED, "submit a script (or a job spec)"},
    {"tmp", 0, O_REFUSE, ARG_REQUIRED, "local disk is not a resource"},
    {"mincpus", 0, O_REFUSE, ARG_REQUIRED, "use --cpus-per-task"},
    {"switches", 0, O_REFUSE, ARG_REQUIRED, "use a job spec's topology"},
    {"export-file", 0, O_REFUSE, ARG_REQUIRED, "use --export"},
    {"uid", 0, O_REFUSE, ARG_REQUIRED, "jobs run as their owner"},
    {"gid", 0, O_REFUSE, ARG_REQUIRED, "jobs run as their owner"},
    {"priority", 0, O_REFUSE, ARG_REQUIRED, "the tenant's priority classes order its jobs"},
    {"container", 0, O_REFUSE, ARG_REQUIRED, "containers are not supported"},
    {"burst-buffer", 0, O_REFUSE, ARG_REQUIRED, "burst buffers are not supported"},
    {"gpus-per-socket", 0, O_REFUSE, ARG_REQUIRED, "use --gpus-per-node or --gpus-per-task"},
    {"cpus-per-gpu-bind", 0, O_REFUSE, ARG_REQUIRED, "not supported"},
    {"overcommit", 'O', O_REFUSE, ARG_NONE, "a task gets its own CPUs"},
    {"test-only", 0, O_REFUSE, ARG_NONE, "use tessera sbatch --dry-run"},
};
#define NOPTS (sizeof OPTS / sizeof OPTS[0])

/* ---- errors and warnings ------------------------------------------------------------- */

static void add_msg(char (*msgs)[TS_ERR_MSG_MAX], int max, int *n, int *more, const char *fmt,
                    va_list ap)
{
    if (*n >= max) {
        if (more)
            (*more)++;
        return;
    }
    char *m = msgs[(*n)++];
    vsnprintf(m, TS_ERR_MSG_MAX, fmt, ap);
    /* one line of printable text: values are quoted as given */
    for (unsigned char *p = (unsigned char *)m; *p; p++)
        if (*p < 0x20 || *p == 0x7f || *p >= 0x80)
            *p = '?';
}

void sbatch_error(ts_spec_errors *errs, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    add_msg(errs->msg, TS_SPEC_MAX_ERRORS, &errs->n, &errs->more, fmt, ap);
    va_end(ap);
}

void sbatch_warn(ts_sbatch *sb, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    add_msg(sb->warnings, TS_SBATCH_MAX_WARNINGS, &sb->nwarnings, NULL, fmt, ap);
    va_end(ap);
}

void sbatch_req_free(struct sbatch_req *r)
{
    free(r->name);
    free(r->array);
    free(r->qos);
    free(r->account);
    free(r->partition);
    free(r->output);
    free(r->error);
    free(r->chdir);
    free(r->image);
    free(r->export_list);
    free(r->dependency);
    free(r->constraint);
    free(r->nodelist);
    free(r->exclude);
    free(r->reservation);
    free(r->mail_user);
    memset(r, 0, sizeof *r);
}

/* ---- applying one option ------------------------------------------------------------- */

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

static int apply(struct sbatch_req *r, const struct sopt *o, const char *v, int src,
                 const char *where, ts_sbatch *sb, ts_spec_errors *errs)
{
    const char *n = o->name;
    long l;
    const char *why = NULL;
    char type[SBATCH_NAME_MAX];
    if (v && strlen(v) > TS_SBATCH_VALUE_MAX) {
        sbatch_error(errs, "%s--%s: longer than %d bytes", where, n, TS_SBATCH_VALUE_MAX);
        return 0;
    }
    if (o->arg == ARG_REQUIRED && v && !*v && o->id != O_EXPORT) {
        sbatch_error(errs, "%s--%s: empty value", where, n);
        return 0;
    }
    switch (o->id) {
    case O_NAME:
        if (strlen(v) >= SBATCH_NAME_MAX) {
            sbatch_error(errs, "%s--job-name: longer than %d characters", where,
                         SBATCH_NAME_MAX - 1);
            return 0;
        }
        return set_str(&r->name, v) ? 0 : TS_ENOMEM;
    case O_NODES: {
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
                sbatch_error(errs, "%s--nodes: must be N or MIN-MAX, 1..65536, got \"%s\"",
                             where, v);
                return 0;
            }
            if (hi != lo) {
                sbatch_error(errs, "%s--nodes: a range of node counts (%s) is not supported: "
                             "give one count", where, v);
                return 0;
            }
        } else if (!sbatch_parse_long(v, 1, NODES_MAX, &lo)) {
            sbatch_error(errs, "%s--nodes: must be 1..65536, got \"%s\"", where, v);
            return 0;
        }
        r->nodes = lo;
        return 0;
    }
    case O_NTASKS:
    case O_NTPN:
        if (!sbatch_parse_long(v, 1, TASKS_MAX, &l)) {
            sbatch_error(errs, "%s--%s: must be 1..65536, got \"%s\"", where, n, v);
            return 0;
        }
        *(o->id == O_NTASKS ? &r->ntasks : &r->ntasks_per_node) = l;
        return 0;
    case O_CPT:
    case O_CPG:
        if (!sbatch_parse_long(v, 1, CPUS_PER_TASK_MAX, &l)) {
            sbatch_error(errs, "%s--%s: must be 1..4096, got \"%s\"", where, n, v);
            return 0;
        }
        *(o->id == O_CPT ? &r->cpus_per_task : &r->cpus_per_gpu) = l;
        return 0;
    case O_GPUS:
    case O_GPN:
    case O_GPT: {
        long max = o->id == O_GPUS ? GPUS_TOTAL_MAX
                                   : o->id == O_GPN ? GPUS_PER_NODE_MAX : GPUS_PER_TASK_MAX;
        if (!sbatch_parse_gpu_count(v, max, &l, type)) {
            sbatch_error(errs, "%s--%s: must be [TYPE:]N with N 0..%ld, got \"%s\"", where, n,
                         max, v);
            return 0;
        }
        int kind = o->id == O_GPUS ? GPU_TOTAL : o->id == O_GPN ? GPU_PER_NODE : GPU_PER_TASK;
        if (!group_take(&r->gpu_kind, &r->gpu_src, kind, src, where, n, GPU_GROUP, errs))
            return 0;
        r->gpu_n = l;
        snprintf(r->gpu_type, sizeof r->gpu_type, "%s", type);
        return 0;
    }
    case O_GRES:
        why = sbatch_parse_gres(v, &l, type);
        if (why) {
            sbatch_error(errs, "%s--gres: %s, got \"%s\"", where, why, v);
            return 0;
        }
        if (!group_take(&r->gpu_kind, &r->gpu_src, GPU_GRES, src, where, n, GPU_GROUP, errs))
            return 0;
        r->gpu_n = l;
        snprintf(r->gpu_type, sizeof r->gpu_type, "%s", type);
        return 0;
    case O_MEM:
    case O_MEM_CPU:
    case O_MEM_GPU: {
        int64_t mib = sbatch_parse_mem(v);
        if (mib < 0) {
            sbatch_error(errs, "%s--%s: must be a size like 4096, 500M or 16G (K, M, G, T; "
                         "at most 64T), got \"%s\"", where, n, v);
            return 0;
        }
        if (mib == 0) {
            sbatch_error(errs, "%s--%s: 0 (all of a node's memory) is not supported: give "
                         "a size", where, n);
            return 0;
        }
        int kind = o->id == O_MEM ? MEM_PER_NODE : o->id == O_MEM_CPU ? MEM_PER_CPU : MEM_PER_GPU;
        if (!group_take(&r->mem_kind, &r->mem_src, kind, src, where, n, MEM_GROUP, errs))
            return 0;
        r->mem_mib = mib;
        return 0;
    }
    case O_TIME: {
        int64_t m = ts_sbatch_time_min(v);
        if (strcmp(v, "UNLIMITED") == 0 || strcmp(v, "INFINITE") == 0 ||
            strcmp(v, "infinite") == 0 || strcmp(v, "unlimited") == 0) {
            sbatch_error(errs, "%s--time: %s is not supported: give a limit (at most 365 "
                         "days)", where, v);
            return 0;
        }
        if (m < 1 || m > TIME_MAX_MIN) {
            sbatch_error(errs, "%s--time: must be MIN, MIN:SEC, H:MIN:SEC, D-H, D-H:MIN or "
                         "D-H:MIN:SEC, 1 minute to 365 days, got \"%s\"", where, v);
            return 0;
        }
        r->time_min = m;
        return 0;
    }
    case O_ARRAY: {
        long count, throttle;
        char *list = sbatch_parse_array(v, &count, &throttle, &why);
        if (!list) {
            if (!why)
                return TS_ENOMEM;
            sbatch_error(errs, "%s--array: %s, got \"%s\"", where, why, v);
            return 0;
        }
        free(r->array);
        r->array = list;
        r->array_count = count;
        r->array_throttle = throttle;
        return 0;
    }
    case O_QOS:
    case O_ACCOUNT:
    case O_PARTITION: {
        if (strlen(v) >= TS_SPEC_NAME_MAX) {
            sbatch_error(errs, "%s--%s: longer than %d characters", where, n,
                         TS_SPEC_NAME_MAX - 1);
            return 0;
        }
        char **slot = o->id == O_QOS ? &r->qos : o->id == O_ACCOUNT ? &r->account : &r->partition;
        return set_str(slot, v) ? 0 : TS_ENOMEM;
    }
    case O_DEPENDENCY: {
        /* Slurm's grammar first (its messages), then what Tessera evaluates */
        ts_dependency d;
        char dwhy[TS_ERR_MSG_MAX / 2];
        why = sbatch_check_dependency(v);
        if (why) {
            sbatch_error(errs, "%s--dependency: %s, got \"%.256s\"", where, why, v);
            return 0;
        }
        if (ts_dep_parse(v, &d, dwhy, sizeof dwhy) != 0) {
            sbatch_error(errs, "%s--dependency: %s", where, dwhy);
            return 0;
        }
        char text[TS_DEP_MAX_BYTES + 1];
        ts_dep_format(&d, text, sizeof text);
        return set_str(&r->dependency, text) ? 0 : TS_ENOMEM;
    }
    case O_HOLD:
        r->hold = true;
        return 0;
    case O_MAIL_TYPE:
        return mail_type(r, v, where, sb, errs);
    case O_MAIL_USER:
        return set_str(&r->mail_user, v) ? 0 : TS_ENOMEM;
    case O_NICE: /* Slurm's default adjustment is 100 */
        if (!v) {
            r->nice = SBATCH_NICE_DEFAULT;
            r->nice_given = true;
        } else if (sbatch_parse_long(v + (v[0] == '-'), 0, TS_SPEC_NICE_MAX, &l)) {
            r->nice = v[0] == '-' ? -(int)l : (int)l;
            r->nice_given = true;
        } else {
            sbatch_error(errs, "%s--nice: an integer %d..%d, got \"%s\"", where,
                         TS_SPEC_NICE_MIN, TS_SPEC_NICE_MAX, v);
        }
        return 0;
    case O_RESERVATION:
        if (strlen(v) >= TS_SPEC_NAME_MAX) {
            sbatch_error(errs, "%s--%s: longer than %d characters", where, n,
                         TS_SPEC_NAME_MAX - 1);
            return 0;
        }
        return set_str(&r->reservation, v) ? 0 : TS_ENOMEM;
    case O_CONSTRAINT:
    case O_NODELIST:
    case O_EXCLUDE: {
        ts_err e;
        if ((o->id == O_CONSTRAINT ? ts_constraint_check(v, &e) : ts_hostlist_check(v, &e)) != 0) {
            sbatch_error(errs, "%s--%s: %s", where, n, e.msg);
            return 0;
        }
        char **slot = o->id == O_CONSTRAINT ? &r->constraint
                      : o->id == O_NODELIST ? &r->nodelist
                                            : &r->exclude;
        return set_str(slot, v) ? 0 : TS_ENOMEM;
    }
    case O_SIGNAL:
        why = sbatch_parse_signal(v, &r->signal, &r->signal_time_s);
        if (why)
            sbatch_error(errs, "%s--signal: %s, got \"%s\"", where, why, v);
        return 0;
    case O_IMAGE: {
        /* pyxis's REGISTRY#IMAGE is REGISTRY/IMAGE; the registry is required */
        char ref[TS_IMAGE_REF_MAX];
        snprintf(ref, sizeof ref, "%s", v);
        char *hash = strchr(ref, '#');
        if (hash && !strchr(hash + 1, '#'))
            *hash = '/';
        ts_image_ref parsed;
        ts_err e;
        if (ts_image_ref_parse(ref, "--container-image", &parsed, &e) != 0) {
            sbatch_error(errs, "%s%s", where, e.msg);
            return 0;
        }
        return set_str(&r->image, ref) ? 0 : TS_ENOMEM;
    }
    case O_OUTPUT:
    case O_ERROR:
    case O_CHDIR:
        return set_str(o->id == O_OUTPUT ? &r->output : o->id == O_ERROR ? &r->error : &r->chdir,
                       v)
                   ? 0
                   : TS_ENOMEM;
    case O_EXPORT:
        why = *v ? sbatch_check_export(v) : "empty value";
        if (why) {
            sbatch_error(errs, "%s--export: %s, got \"%s\"", where, why, v);
            return 0;
        }
        return set_str(&r->export_list, v) ? 0 : TS_ENOMEM;
    case O_WARN:
        sbatch_warn(sb, "%s--%s: ignored (%s)", where, n, o->why);
        return 0;
    default:
        sbatch_error(errs, "%s--%s: not supported (%s)", where, n, o->why);
        return 0;
    }
}

/* ---- words and options --------------------------------------------------------------- */

static const struct sopt *find_long(const char *name, size_t len)
{
    for (size_t i = 0; i < NOPTS; i++)
        if (strlen(OPTS[i].name) == len && strncmp(OPTS[i].name, name, len) == 0)
            return &OPTS[i];
    return NULL;
}

static const struct sopt *find_short(char c)
{
    for (size_t i = 0; i < NOPTS; i++)
        if (OPTS[i].short_name == c)
            return &OPTS[i];
    return NULL;
}

/* Reads words[0..n) as options; returns 0 or TS_ENOMEM. */
static int read_options(struct sbatch_req *r, char **words, int n, int src, const char *where,
                        ts_sbatch *sb, ts_spec_errors *errs)
{
    for (int i = 0; i < n; i++) {
        const char *w = words[i];
        const struct sopt *o;
        const char *v = NULL;
        char shown[80];
        if (w[0] == '-' && w[1] == '-' && w[2]) {
            const char *eq = strchr(w + 2, '=');
            size_t len = eq ? (size_t)(eq - w - 2) : strlen(w + 2);
            o = find_long(w + 2, len);
            snprintf(shown, sizeof shown, "--%.*s", (int)(len > 60 ? 60 : len), w + 2);
            if (!o) {
                sbatch_error(errs, "%s%s: unknown option", where, shown);
                continue;
            }
            if (eq && o->arg == ARG_NONE) {
                sbatch_error(errs, "%s%s: takes no value", where, shown);
                continue;
            }
            v = eq ? eq + 1 : NULL;
        } else if (w[0] == '-' && w[1] && w[1] != '-') {
            o = find_short(w[1]);
            snprintf(shown, sizeof shown, "-%c", w[1]);
            if (!o) {
                sbatch_error(errs, "%s%s: unknown option", where, shown);
                continue;
            }
            if (w[2] && o->arg == ARG_NONE) {
                sbatch_error(errs, "%s%s: takes no value (got \"%s\")", where, shown, w);
                continue;
            }
            v = w[2] ? w + 2 : NULL;
        } else {
            sbatch_error(errs, "%s\"%.60s\": not an option (options start with - or --)", where,
                         w);
            continue;
        }
        if (o->arg == ARG_REQUIRED && !v) {
            if (i + 1 >= n) {
                sbatch_error(errs, "%s--%s: needs a value", where, o->name);
                continue;
            }
            v = words[++i];
        }
        int rc = apply(r, o, v, src, where, sb, errs);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* Splits a directive's text into words as a shell would: blanks separate,
 * '...' and "..." quote, backslash escapes, an unquoted word starting with
 * '#' ends the line. Returns the count, -1 on an unterminated quote, -2 on
 * too many words, -3 out of memory. The words live in *buf (free it). */
static int split_words(const char *s, size_t len, char **words, int max, char **buf)
{
    char *out = malloc(len + 1);
    if (!out)
        return -3;
    *buf = out;
    int n = 0;
    size_t i = 0, o = 0;
    for (;;) {
        while (i < len && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r'))
            i++;
        if (i >= len || s[i] == '#')
            return n;
        if (n == max)
            return -2;
        words[n++] = out + o;
        char quote = 0;
        while (i < len) {
            char c = s[i];
            if (quote) {
                if (c == quote) {
                    quote = 0;
                } else if (quote == '"' && c == '\\' && i + 1 < len &&
                           (s[i + 1] == '"' || s[i + 1] == '\\')) {
                    out[o++] = s[++i];
                } else {
                    out[o++] = c;
                }
            } else if (c == ' ' || c == '\t' || c == '\r') {
                break;
            } else if (c == '\'' || c == '"') {
                quote = c;
            } else if (c == '\\' && i + 1 < len) {
                out[o++] = s[++i];
            } else {
                out[o++] = c;
            }
            i++;
        }
        if (quote)
            return -1;
        out[o++] = '\0';
    }
}

/* The script's directives (see the top of the file). */
static int read_script(struct sbatch_req *r, const char *script, size_t len, const char *name,
                       ts_sbatch *sb, ts_spec_errors *errs)
{
    size_t pos = 0;
    int line = 0;
    while (pos < len) {
        const char *ls = script + pos;
        const char *nl = memchr(ls, '\n', len - pos);
        size_t ll = nl ? (size_t)(nl - ls) : len - pos;
        pos += ll + (nl ? 1 : 0);
        line++;
        size_t k = 0;
        while (k < ll && (ls[k] == ' ' || ls[k] == '\t' || ls[k] == '\r'))
            k++;
        if (k == ll)
            continue;          /* blank */
        if (ls[k] != '#')
            break;             /* the first command: no directives after it */
        size_t dl = strlen(DIRECTIVE);
        if (k != 0 || ll < dl || strncmp(ls, DIRECTIVE, dl) != 0)
            continue;          /* a comment (sbatch wants #SBATCH at the line's start) */
        if (ll > dl && ls[dl] != ' ' && ls[dl] != '\t')
            continue;          /* "#SBATCHX" is a comment too */
        char where[320];
        snprintf(where, sizeof where, "%.256s:%d: ", name, line);
        char *words[MAX_WORDS_PER_LINE], *buf = NULL;
        int n = split_words(ls + dl, ll - dl, words, MAX_WORDS_PER_LINE, &buf);
        int rc = 0;
        if (n == -3)
            rc = TS_ENOMEM;
        else if (n == -1)
            sbatch_error(errs, "%s#SBATCH: unterminated quote", where);
        else if (n == -2)
            sbatch_error(errs, "%s#SBATCH: more than %d words on one line", where,
                         MAX_WORDS_PER_LINE);
        else
            rc = read_options(r, words, n, SRC_SCRIPT, where, sb, errs);
        free(buf);
        if (rc != 0)
            return rc;
    }
    return 0;
}

int sbatch_read(const char *script, size_t len, const ts_sbatch_input *in, struct sbatch_req *r,
                ts_sbatch *sb, ts_spec_errors *errs)
{
    const char *name = in->script_name && *in->script_name ? in->script_name : "script";
    int rc = read_script(r, script, len, name, sb, errs);
    if (rc == 0)
        sbatch_lint(script, len, name, sb);
    if (rc == 0 && in->argc > 0)
        rc = read_options(r, (char **)in->argv, in->argc, SRC_CLI, "", sb, errs);
    return rc;
}

/* ---- the entry point ----------------------------------------------------------------- */

/* Everything ends up in JSON strings, which must be UTF-8. */
static bool utf8_ok(const char *s, size_t len)
{
    json_t *t = json_stringn(s, len);
    bool ok = t != NULL;
    json_decref(t);
    return ok;
}

void ts_sbatch_free(ts_sbatch *sb)
{
    if (!sb)
        return;
    free(sb->shape.array);
    free(sb->spec_json);
    free(sb);
}

int ts_sbatch_parse(const char *script, size_t len, const ts_sbatch_input *in, ts_sbatch **out,
                    ts_spec_errors *errs)
{
    memset(errs, 0, sizeof *errs);
    *out = NULL;
    const char *name = in->script_name && *in->script_name ? in->script_name : "script";
    if (len > TS_SBATCH_MAX_BYTES) {
        sbatch_error(errs, "%.256s: larger than %d bytes", name, TS_SBATCH_MAX_BYTES);
        return TS_EINVAL;
    }
    if (len < 2 || script[0] != '#' || script[1] != '!') {
        sbatch_error(errs, "%.256s: not a batch script: the first line must be #! and the "
                     "interpreter", name);
        return TS_EINVAL;
    }
    if (memchr(script, '\0', len)) {
        sbatch_error(errs, "%.256s: holds a NUL byte", name);
        return TS_EINVAL;
    }
    if (!utf8_ok(script, len)) {
        sbatch_error(errs, "%.256s: not valid UTF-8", name);
        return TS_EINVAL;
    }
    for (int i = 0; i < in->argc; i++)
        if (!utf8_ok(in->argv[i], strlen(in->argv[i])))
            sbatch_error(errs, "option %d: not valid UTF-8", i + 1);
    for (int i = 0; i < in->nargs; i++)
        if (!utf8_ok(in->script_args[i], strlen(in->script_args[i])))
            sbatch_error(errs, "argument %d: not valid UTF-8", i + 1);
    if ((in->tenant && !utf8_ok(in->tenant, strlen(in->tenant))) ||
        (in->submit_dir && !utf8_ok(in->submit_dir, strlen(in->submit_dir))) ||
        !utf8_ok(name, strlen(name)))
        sbatch_error(errs, "%.256s: the tenant, directory or script name is not valid UTF-8",
                     name);
    if (errs->n > 0)
        return TS_EINVAL;
    ts_sbatch *sb = calloc(1, sizeof *sb);
    if (!sb)
        return TS_ENOMEM;
    struct sbatch_req r = {0};
    int rc = sbatch_read(script, len, in, &r, sb, errs);
    if (rc == 0 && errs->n == 0)
        rc = sbatch_build(script, len, in, &r, sb, errs);
    sbatch_req_free(&r);
    if (rc == 0 && errs->n > 0)
        rc = TS_EINVAL;
    if (rc != 0) {
        if (rc == TS_ENOMEM && errs->n == 0)
            sbatch_error(errs, "out of memory");
        ts_sbatch_free(sb);
        return rc;
    }
    *out = sb;
    return 0;
}

int ts_sbatch_option_takes_next(const char *w)
{
    const struct sopt *o = NULL;
    if (w[0] == '-' && w[1] == '-' && w[2] && !strchr(w, '='))
        o = find_long(w + 2, strlen(w + 2));
    else if (w[0] == '-' && w[1] && w[1] != '-' && !w[2])
        o = find_short(w[1]);
    return o && o->arg == ARG_REQUIRED;
}
