/*
 * fileio.h - reading a whole input file for the simulator's subcommands (and
 * the node and pod lists, read then parsed), so every subcommand reports an
 * unreadable, oversized or vanished file the same way (the core itself parses from memory and never opens files), and
 * saying that an option is wrong the same way too.
 */
#ifndef TS_SIM_FILEIO_H
#define TS_SIM_FILEIO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "tessera/error.h"
#include "tessera/load.h"

#define SIM_FILE_MAX_BYTES (256L << 20)

/* The file's bytes (caller frees) and their count in *len, or NULL with err
 * naming the path and the reason. */
char *sim_read_file(const char *path, size_t *len, ts_err *err);

/* The node list at path read whole and parsed: a cluster YAML where yaml,
 * else the openb CSV. NULL with err naming the file and the reason. */
ts_cluster *sim_load_cluster(const char *path, bool yaml, ts_err *err);

/* The openb pod list at path read whole and parsed; NULL with err naming
 * the file and the reason. */
ts_workload *sim_load_pods(const char *path, ts_err *err);

/* Says "<who>: " and fmt (with one %s, arg) on stderr; returns the exit
 * status of bad input (2). */
int sim_bad(const char *who, const char *fmt, const char *arg);

/* What a subcommand's option setter returns for an option it does not know;
 * 0 when it took the value, any other value when it refused it (said). */
#define SIM_OPT_UNKNOWN (-2)

/* A subcommand's options, argv[2..]: "--help" alone, else "--name value"
 * pairs, each handed to set(ctx, name, value). Returns 0; -1 once --help
 * put the usage on stdout; or the exit status of bad input (2) once said
 * ("<who>: ..."): a name without a value, a value set refused, or a name it
 * does not know (then with the usage on stderr). */
int sim_opt_pairs(int argc, char **argv, const char *who, void (*usage)(FILE *f),
                  int (*set)(void *ctx, const char *name, const char *value), void *ctx);

/* Says "<who>: <name>: required" and the usage on stderr; returns 2. */
int sim_required(const char *who, const char *name, void (*usage)(FILE *f));

#endif
