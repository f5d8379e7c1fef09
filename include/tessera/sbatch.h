/*
 * sbatch.h - Slurm batch scripts read as Tessera job specs.
 *
 * Users moving from Slurm bring scripts whose `#SBATCH` lines say what the
 * job needs. ts_sbatch_parse reads those lines (and sbatch-style options
 * given on the command line, which override them as in sbatch) into a
 * ts_sbatch: Slurm's request as written, then the interpretation both
 * schedulers would agree on (nodes, tasks, GPUs, CPUs, memory, time, array)
 * and the job spec (docs/job-spec.md) built from it as JSON. What Tessera
 * cannot honour is an error naming the directive; what is safe to ignore is
 * a warning. docs/slurm.md lists every directive and its translation.
 *
 * Ownership: ts_sbatch_parse returns a new ts_sbatch freed with
 * ts_sbatch_free; ts_sbatch_map_parse likewise with ts_sbatch_map_free.
 * Pure: no I/O, no environment access (the caller passes the environment
 * for --export), thread-safe.
 */
#ifndef TESSERA_SBATCH_H
#define TESSERA_SBATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tessera/sbatch_array.h"
#include "tessera/spec.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TS_SBATCH_MAX_BYTES (512 * 1024) /* a larger script is refused */
#define TS_SBATCH_MAX_WARNINGS 16
#define TS_SBATCH_VALUE_MAX 4096         /* one option's value, in bytes */
#define TS_SBATCH_ARRAY_INDEX_MAX 4000000 /* Slurm's own ceiling on an index */
#define TS_SBATCH_MAP_MAX_BYTES 65536
#define TS_SBATCH_MAP_MAX_ENTRIES 1024

/* Names the configuration maps to Tessera's: QOS to tiers, accounts and
 * partitions to tenants. Read from a text file, one mapping a line:
 *   qos NAME TIER            (TIER: guaranteed or opportunistic)
 *   account NAME TENANT
 *   partition NAME TENANT
 * '#' starts a comment; blank lines are skipped. */
typedef struct ts_sbatch_map ts_sbatch_map;

int ts_sbatch_map_parse(const char *buf, size_t len, ts_sbatch_map **out, ts_err *err);
void ts_sbatch_map_free(ts_sbatch_map *map);

/* How the error for a script that names no tenant begins (the CLI then
 * asks for its token's tenant). */
#define TS_SBATCH_NO_TENANT "tenant: give #SBATCH --account"

/* What the script runs with, besides its text. */
typedef struct ts_sbatch_input {
    const char *script_name;          /* the script's path as given (its base name: the
                                       * default job name) */
    const char *const *argv;          /* sbatch options from the command line, argc of them */
    int argc;
    const char *const *script_args;   /* arguments after the script, nargs of them */
    int nargs;
    const char *const *environ;       /* "NAME=value", NULL-terminated: for --export; may be NULL */
    const char *tenant;               /* overrides --account/--partition; NULL: none */
    const char *default_tenant;       /* without tenant, --account and --partition: the
                                       * submitting token's tenant; NULL: none (an error) */
    const char *submit_dir;           /* SLURM_SUBMIT_DIR, and the default workdir; may be NULL */
    const ts_sbatch_map *map;         /* may be NULL: every name maps to itself */
    const char *const *secrets;       /* secrets the job gets as variables of the same */
    int nsecrets;                     /* name (tessera sbatch --secret); may be NULL */
} ts_sbatch_input;

/* The interpretation (what the parity bench compares with Slurm). */
typedef struct ts_sbatch_shape {
    int nodes;                 /* minimum nodes Slurm would allocate */
    bool nodes_given;          /* --nodes was given */
    int ntasks;
    int cpus_per_task;
    int gpus;                  /* over the whole job */
    int gpus_per_task;
    int64_t mem_mib;           /* over the whole job, 0 = not given (site default) */
    int64_t mem_per_task_mib;  /* what the spec asks per task; 0 = the spec's default */
    int64_t time_limit_min;    /* 0 = not given */
    int array_count;           /* 0 = not an array */
    int array_throttle;        /* 0 = none */
    char *array;               /* canonical index list ("1-9:2,15"), NULL = not an array */
} ts_sbatch_shape;

typedef struct ts_sbatch {
    ts_sbatch_shape shape;
    char *spec_json;           /* the job spec (docs/job-spec.md), compact JSON */
    int nwarnings;
    char warnings[TS_SBATCH_MAX_WARNINGS][TS_ERR_MSG_MAX];
} ts_sbatch;

/*
 * Reads script (at most TS_SBATCH_MAX_BYTES; it must start with "#!") and
 * in->argv. On success returns 0 and *out; otherwise TS_EINVAL with every
 * error in errs (each naming its directive, e.g. "--gpus: must be ..."), or
 * TS_ENOMEM, and *out NULL.
 */
int ts_sbatch_parse(const char *script, size_t len, const ts_sbatch_input *in, ts_sbatch **out,
                    ts_spec_errors *errs);
void ts_sbatch_free(ts_sbatch *sb);

/* 1 when word is an sbatch option whose value is the next word ("-N",
 * "--time"), 0 otherwise (a value attached, a flag, not an option): how a
 * command line is split into options and the script. */
int ts_sbatch_option_takes_next(const char *word);

/* Slurm's time formats (minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM,
 * D-HH:MM:SS) as minutes, seconds rounded up as Slurm does; -1 if invalid. */
int64_t ts_sbatch_time_min(const char *s);


#ifdef __cplusplus
}
#endif
#endif
