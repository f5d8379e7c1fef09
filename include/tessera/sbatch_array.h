/*
 * sbatch_array.h - a batch script's array index list, read back.
 *
 * `tessera sbatch --array=1-9:2,15` keeps the indices as a canonical list
 * (ts_sbatch_shape.array, sbatch.h) in the job's env; the node agent turns an
 * element's 0-based number into its Slurm index (SLURM_ARRAY_TASK_ID) with
 * this one function. Apart from sbatch.h so the agent, whose task struct
 * shares a name with the spec's, needs nothing else. Pure, thread-safe.
 */
#ifndef TESSERA_SBATCH_ARRAY_H
#define TESSERA_SBATCH_ARRAY_H

#ifdef __cplusplus
extern "C" {
#endif

/* The k-th (0-based) index of a canonical array list ("1-9:2,15": items
 * N, N-M or N-M:STEP joined by ','); -1 when k is out of range or the list
 * is invalid. */
long ts_sbatch_array_nth(const char *list, long k);

#ifdef __cplusplus
}
#endif
#endif
