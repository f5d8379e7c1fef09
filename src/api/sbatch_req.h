/*
 * sbatch_req.h - internal: a Slurm request as the directives wrote it.
 *
 * sbatch.c reads `#SBATCH` lines and command-line options into a
 * sbatch_req (each value as given, checked on its own); sbatch_spec.c turns
 * the request into the interpretation and the job spec. Options that come in
 * groups where only one may be given (the GPU options, the memory options)
 * remember which source set them, so the command line can override the
 * script while two of a group in the same place stay an error, as in sbatch.
 */
#ifndef TS_API_SBATCH_REQ_H
#define TS_API_SBATCH_REQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tessera/sbatch.h"

enum sbatch_gpu_kind { GPU_NONE, GPU_TOTAL, GPU_PER_NODE, GPU_PER_TASK, GPU_GRES };
enum sbatch_mem_kind { MEM_NONE, MEM_PER_NODE, MEM_PER_CPU, MEM_PER_GPU };
enum sbatch_src { SRC_NONE, SRC_SCRIPT, SRC_CLI };

#define SBATCH_NAME_MAX 256
#define GPUS_PER_NODE_MAX 64L

enum opt_id {
    O_NAME, O_NODES, O_NTASKS, O_NTPN, O_CPT, O_CPG, O_GPUS, O_GPN, O_GPT, O_GRES, O_MEM,
    O_MEM_CPU, O_MEM_GPU, O_TIME, O_ARRAY, O_QOS, O_ACCOUNT, O_PARTITION, O_DEPENDENCY,
    O_CONSTRAINT, O_NODELIST, O_EXCLUDE, O_RESERVATION, O_HOLD, O_MAIL_TYPE, O_MAIL_USER, O_NICE,
    O_SIGNAL, O_OUTPUT, O_ERROR, O_EXPORT, O_CHDIR, O_IMAGE, O_WARN, O_REFUSE, O_OPTS
};

struct sbatch_req {
    char *name;                 /* --job-name, NULL: the script's name */
    long nodes, ntasks, ntasks_per_node, cpus_per_task, cpus_per_gpu; /* 0 = not given */
    int gpu_kind, gpu_src;
    long gpu_n;
    char gpu_type[SBATCH_NAME_MAX]; /* "" = any */
    int mem_kind, mem_src;
    int64_t mem_mib;
    int64_t time_min;           /* 0 = not given */
    char *array;                /* canonical list, NULL = not given */
    long array_count, array_throttle;
    char *qos, *account, *partition;
    int signal;                 /* 0 = not given */
    long signal_time_s;
    bool signal_batch;          /* B: (the batch shell alone, in Slurm) */
    char *output, *error, *chdir;
    char *image;                /* --container-image, as a reference; NULL = none */
    char *export_list;          /* NULL = not given (ALL) */
    char *dependency;           /* canonical (tessera/depend.h), NULL = not given */
    char *constraint, *nodelist, *exclude; /* as given (syntax checked), NULL = not given */
    char *reservation;          /* its name, NULL = not given */
    bool hold;                  /* --hold: submitted held */
    unsigned mail_on;           /* --mail-type as TS_NOTIFY_* bits */
    bool mail_type_given;
    char *mail_user;            /* --mail-user, NULL = not given */
    int nice;                   /* --nice, when nice_given */
    bool nice_given;
    /* where each option was last given ("train.sh:4: "; NULL: the command
     * line, or not given), for the errors found once the whole script is
     * read (sbatch_at) */
    char *at[O_OPTS];
};
#define SBATCH_NICE_DEFAULT 100 /* --nice without a value, as Slurm */

void sbatch_req_free(struct sbatch_req *r);
/* The FILE:LINE: prefix of option id's last setting, "" where none. */
const char *sbatch_at(const struct sbatch_req *r, int id);

/* Appends one error / warning (printf-style). */
void sbatch_error(ts_spec_errors *errs, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sbatch_warn(ts_sbatch *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Reads the script's directives and then in->argv into r. Errors go to errs,
 * warnings to sb. Returns 0, or TS_ENOMEM. */
int sbatch_read(const char *script, size_t len, const ts_sbatch_input *in, struct sbatch_req *r,
                ts_sbatch *sb, ts_spec_errors *errs);

/* Whether an environment variable's name looks like a credential
 * (sbatch_creds.c, docs/slurm.md). */
bool sbatch_env_credential(const char *name);

/* The interpretation and the spec's JSON from r (sbatch_spec.c). */
int sbatch_build(const char *script, size_t len, const ts_sbatch_input *in,
                 const struct sbatch_req *r, ts_sbatch *sb, ts_spec_errors *errs);

/* ---- sbatch_value.c: one option's value ---- */

/* The line of buf[0..len) at *pos, which moves past its '\n': its start,
 * and its length without the '\n' in *ll; NULL when *pos is at the end. */
const char *sbatch_next_line(const char *buf, size_t len, size_t *pos, size_t *ll);

/* A plain decimal integer lo..hi. */
bool sbatch_parse_long(const char *s, long lo, long hi, long *out);
/* A digit run at *p (advanced past it), 0..max; false if none or larger. */
bool sbatch_take_num(const char **p, long max, long *out);
/* A size with an optional unit K, M, G or T (any case; default M) as MiB,
 * rounded up; -1 if invalid or above 64 TiB. */
int64_t sbatch_parse_mem(const char *s);
/* --array: the canonical list (malloc'd), its count and %throttle; NULL
 * with *why set on a bad value, NULL with *why NULL when out of memory. */
char *sbatch_parse_array(const char *s, long *count, long *throttle, const char **why);
/* "[TYPE:]N", N 0..max; type "" when none. */
bool sbatch_parse_gpu_count(const char *s, long max, long *n, char type[SBATCH_NAME_MAX]);
/* --gres (gpu only); NULL, or why not. */
const char *sbatch_parse_gres(const char *s, long *n, char type[SBATCH_NAME_MAX]);
/* --signal=[B:|R:]SIG[@SECONDS]; NULL, or why not. */
const char *sbatch_parse_signal(const char *s, int *sig, long *secs);
/* --dependency as Slurm writes it; NULL when well formed, or why not. */
const char *sbatch_check_dependency(const char *s);
/* --export: ALL, NONE or a list of ALL, NIL, NAME, NAME=value; NULL, or why not. */
const char *sbatch_check_export(const char *s);

/* The tier / tenant a name maps to in map, or NULL (sbatch_spec.c). */
const char *sbatch_map_get(const ts_sbatch_map *map, const char *kind, const char *name);

/* Warnings about the script's commands that fail in a Tessera task
 * (`module`, srun options a step cannot honour): sbatch_lint.c. */
void sbatch_lint(const char *script, size_t len, const char *name, ts_sbatch *sb);

/* ---- the options (sbatch.c's table, sbatch_set.c's setters) ---------------- */


enum { ARG_NONE, ARG_REQUIRED, ARG_OPTIONAL };

struct sopt {
    const char *name;
    char short_name;
    int id;
    int arg;
    const char *why; /* for O_WARN / O_REFUSE: what Tessera does instead */
};

/* Sets what option o (value v, NULL when it has none) asks of r, read from
 * src at where ("script:LINE: " or ""): 0, with a bad value an error in errs
 * (an ignored option a warning in sb), or TS_ENOMEM. */
int sbatch_apply(struct sbatch_req *r, const struct sopt *o, const char *v, int src,
                 const char *where, ts_sbatch *sb, ts_spec_errors *errs);

#endif
