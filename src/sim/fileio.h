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

#endif
