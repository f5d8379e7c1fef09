/*
 * replay.h - `tessera-sim replay`, the time-based replay's command line.
 *
 * main.c hands argv over when argv[1] is "replay"; replay_main.c parses the
 * options, loads the jobs, runs every (policy, workload) through the engine
 * in the replay library (src/replay/replay_engine.c) and prints the table and JSON.
 * Kept apart from main.c so the fgd experiment's shell stays as it was.
 */
#ifndef TS_SIM_REPLAY_H
#define TS_SIM_REPLAY_H

/* argv[1] is "replay". Returns the process exit status: 0, 1 on a failed
 * run or output, 2 on bad input (message names file:line: field). */
int replay_main(int argc, char **argv);
/* replay_pollux.c: replay_main hands over when --job-model is given. */
int replay_pollux_main(int argc, char **argv);

#endif
