#!/bin/bash
# expect: tasks=2 array=10
#SBATCH --account=research
#SBATCH --array=1-10%2 -n 2
srun -l echo "elem $SLURM_ARRAY_TASK_ID"
