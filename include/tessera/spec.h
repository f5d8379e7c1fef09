/*
 * spec.h - the job spec users submit (YAML or JSON, one parser: JSON is
 * read as YAML flow syntax), validated field by field with every error
 * reported at once, and written back as canonical JSON for the store.
 * The format is documented key by key in docs/job-spec.md.
 *
 * Ownership: ts_spec_parse returns a new ts_job_spec freed with
 * ts_spec_free; strings inside are owned by it. ts_spec_to_json returns a
 * malloc'd string. Pure: no I/O, thread-safe.
 */
#ifndef TESSERA_SPEC_H
#define TESSERA_SPEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tessera/error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TS_SPEC_NAME_MAX 64
#define TS_SPEC_PUBLISH_MAX 16
#define TS_SPEC_VXLAN_PORT 4789  /* UDP: every node's overlay, never a task's published port */
#define TS_SPEC_MAX_ERRORS 32
#define TS_SPEC_MAX_BYTES (1 << 20)   /* a spec larger than 1 MiB is refused */
#define TS_SPEC_MAX_TASKS 65536
#define TS_SPEC_MAX_ARRAY 100000
#define TS_SPEC_TTY_MAX 1000       /* interactive.rows, interactive.cols */
#define TS_SPEC_MAX_ARGS 4096
#define TS_SPEC_MAX_ENV 4096
/* A task's environment and command together ("NAME=value" and each argument,
 * a byte more each): every task and step task carries them to its node. Room
 * for the largest batch script (TS_SBATCH_MAX_BYTES) and 128 KiB of env. */
#define TS_SPEC_MAX_TASK_BYTES (640 * 1024)
#define TS_SPEC_MAX_SECRETS 64

/* Every error found, each "field.path: reason" (e.g. "tasks[1].gpus: must be
 * 0..16"); more than TS_SPEC_MAX_ERRORS are counted in `more`. */
typedef struct ts_spec_errors {
    int n;
    int more;
    char msg[TS_SPEC_MAX_ERRORS][TS_ERR_MSG_MAX];
} ts_spec_errors;

/* A host folder bound into the job's image (docs/images.md). */
#define TS_SPEC_MAX_MOUNTS 16
typedef struct ts_spec_mount {
    char host[256], path[256];          /* absolute, clean (ts_mount_path_ok) */
    bool write;                         /* read-write; default read-only */
} ts_spec_mount;

/* Read-only data a job's tasks read (model weights, a data set): an image in
 * a registry, pinned by digest, whose layers hold the files (docs/images.md
 * "Model weights and data sets"). */
#define TS_SPEC_MAX_DATA 8
#define TS_SPEC_DATA_REF_MAX 512
typedef struct ts_spec_data {
    char ref[TS_SPEC_DATA_REF_MAX];     /* host[:port]/repo@sha256:<64 hex> */
    char path[256];                     /* where a container task sees it (clean, absolute) */
} ts_spec_data;

/* One group of identical tasks (ranks in order: group 0's first). */
typedef struct ts_task_spec {
    int count;                          /* >= 1; an elastic gang's minimum */
    int gpus;                           /* whole GPUs per task, 0..16; an elastic task's minimum */
    /* elastic (docs/job-spec.md, "Elastic jobs"): count: {min, max} or
     * gpus: {min, max}; 0 = not a range. One group of a job at most. */
    int count_max, gpus_max;
    int32_t gpu_milli;                  /* 1000, or a share 1..999 with gpus == 1 */
    int64_t gpu_mem_mib;                /* per GPU, 0 = no requirement */
    char gpu_model[TS_SPEC_NAME_MAX];   /* "" = any; else a model of model.h */
    char mig_profile[TS_SPEC_NAME_MAX]; /* "" = none, else e.g. "3g.40gb" (gpus must be 0) */
    int64_t cpu_milli;
    int64_t mem_mib;
} ts_task_spec;

/* A secret of the secret store the task receives (docs/secrets.md): as the
 * environment variable `target`, or as the file `target` in its secrets
 * folder. */
typedef struct ts_secret_ref {
    char name[TS_SPEC_NAME_MAX];        /* the secret's name in the store */
    char target[TS_SPEC_NAME_MAX];      /* variable or file name */
    bool file;
} ts_secret_ref;

typedef struct ts_job_spec {
    char tenant[TS_SPEC_NAME_MAX];      /* required */
    char name[TS_SPEC_NAME_MAX];        /* required */
    int tier;                           /* enum ts_tier; default guaranteed */
    char priority_class[TS_SPEC_NAME_MAX]; /* "" = the default class */
    ts_task_spec *tasks;                /* ntasks groups, >= 1 */
    int ntasks;
    char required_level[TS_SPEC_NAME_MAX];  /* "" = any */
    char preferred_level[TS_SPEC_NAME_MAX]; /* "" = the required one */
    bool rail_aligned;
    double time_limit_s;                /* 0 = the controller's default */
    double duration_s;                  /* virtual nodes only: run this long (0 = the limit) */
    int ckpt_signal;                    /* signal number; 0 = default (SIGUSR1) */
    double ckpt_grace_s;                /* -1 = default */
    double idle_timeout_s;              /* reap when idle this long; 0 = never */
    char **argv;                        /* command, argc entries (may be 0) */
    int argc;
    char **env;                         /* "NAME=value", nenv entries */
    int nenv;
    char *workdir;                      /* NULL = the agent's default */
    int array_size;                     /* 1 = a single job */
    int array_throttle;                 /* 0 = none; at most this many elements run at once */
    char *dependency;                   /* NULL = none; canonical text (tessera/depend.h) */
    ts_secret_ref *secrets;             /* nsecrets entries (names only, never values) */
    int nsecrets;
    bool host_network;                  /* "network: host": the node's network, not a namespace
                                         * on the tenant's overlay (docs/network.md) */
    bool dedicated_nics;                /* "network: {nics: dedicated}": a VF or rail NIC per
                                         * GPU moved into each task's namespace */
    /* "network: {publish: [PORT/tcp|udp, ...]}": ports of each task reachable at its node's
     * underlay address, from where the cluster allows (docs/network.md); npublish entries */
    struct {
        unsigned short port;
        bool udp;
    } publish[TS_SPEC_PUBLISH_MAX];
    int npublish;
    char *image;                        /* NULL = a bare process; else a reference
                                         * (tessera/image_ref.h) its tasks run in */
    char image_secret[TS_SPEC_NAME_MAX]; /* "" = none; else the secret holding the
                                          * registry's "user:password" (a name only) */
    ts_spec_mount *mounts;              /* nmounts host folders bound into the image */
    int nmounts;
    char user[32];                      /* "" = the submitter's identity; with an image,
                                         * "image" (its User) or "uid[:gid]" (docs/images.md) */
    ts_spec_data *data;                 /* ndata read-only data images, with or without image */
    int ndata;
    /* the nodes it may use (tessera/node_select.h); NULL = no limit */
    char *constraint;                   /* node features: "a&b|c" */
    char *nodelist;                     /* only these nodes: "r-[1-4],s-1" */
    char *exclude;                      /* never these nodes */
    char reservation[TS_SPEC_NAME_MAX]; /* "" = none; else the reservation it runs in */
    /* an interactive job (docs/interactive.md): its rank 0 runs with its
     * stdin/stdout/stderr on a stream the agent relays to `tessera attach`,
     * a terminal (a PTY of tty_rows x tty_cols) when interactive_tty */
    bool interactive;
    bool interactive_tty;
    int tty_rows, tty_cols;             /* 0: the PTY's default */
    char *notify_url;                   /* NULL = none: the webhook of its state changes */
    char *notify_mail;                  /* NULL = none: the addresses mailed about them,
                                         * comma-separated (notify.mail) */
    unsigned notify_on;                 /* TS_NOTIFY_* bits (notify.on) */
    bool hold;                          /* submitted held (sbatch --hold): it waits for a
                                         * release */
    int nice;                           /* TS_SPEC_NICE_MIN..MAX: taken from its class's
                                         * priority (Slurm's --nice); 0 = none */
} ts_job_spec;

/* notify.on: when a job's webhook is called (docs/job-spec.md "notify"). */
enum {
    TS_NOTIFY_START = 1u << 0, /* it starts running */
    TS_NOTIFY_END = 1u << 1,   /* it ends, however */
    TS_NOTIFY_FAIL = 1u << 2,  /* it ends failed or timed out */
};
#define TS_NOTIFY_URL_MAX 1024
#define TS_SPEC_NICE_MIN (-10000)
#define TS_SPEC_NICE_MAX 10000
#define TS_NOTIFY_MAIL_MAX 8         /* addresses in notify.mail */
#define TS_NOTIFY_MAIL_ADDR_MAX 254  /* characters of one address (RFC 5321's path) */

/* Parses and validates buf (YAML or JSON, at most TS_SPEC_MAX_BYTES). On
 * success returns 0 and *out; otherwise TS_EINVAL with errs filled (every
 * error, each naming its field path) and *out NULL. */
int ts_spec_parse(const char *buf, size_t len, ts_job_spec **out, ts_spec_errors *errs);
void ts_spec_free(ts_job_spec *spec);
/* Canonical JSON (keys in a fixed order, defaults written out); parsing it
 * gives back an equal spec. NULL on allocation failure. */
char *ts_spec_to_json(const ts_job_spec *spec);
/* Total whole GPUs (MIG instances and shares count 1 each) over all tasks. */
int64_t ts_spec_gpus(const ts_job_spec *spec);
/* An elastic job's range in whole GPUs (its minimum is ts_spec_gpus) and
 * the step it grows by (a gang's GPUs per task; 1 for one task's GPUs):
 * true and the three set, or false for a rigid job. */
bool ts_spec_elastic(const ts_job_spec *spec, int *min_gpus, int *max_gpus, int *step_gpus);
/* All errors joined by "; " into buf (for one-line messages). */
void ts_spec_errors_join(const ts_spec_errors *errs, char *buf, size_t size);

#ifdef __cplusplus
}
#endif
#endif
