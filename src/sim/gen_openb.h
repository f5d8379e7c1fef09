/*
 * gen_openb.h - tessera-sim gen-openb, the openb-style workload generator
 * (gen_openb.c; options in docs/simulator.md).
 */
#ifndef TS_SIM_GEN_OPENB_H
#define TS_SIM_GEN_OPENB_H

/* argv[1] is "gen-openb". Returns the exit status: 0, 2 for bad input. */
int gen_openb_main(int argc, char **argv);

#endif
