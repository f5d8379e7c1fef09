/*
 * gen_cluster.h - tessera-sim gen-cluster, cluster variants of an openb node
 * list (gen_cluster.c; options in docs/simulator.md).
 */
#ifndef TS_SIM_GEN_CLUSTER_H
#define TS_SIM_GEN_CLUSTER_H

/* argv[1] is "gen-cluster". Returns the exit status: 0, 1 when the output
 * cannot be written, 2 for bad input. */
int gen_cluster_main(int argc, char **argv);

#endif
