#!/bin/bash
# expect: tasks=1 array=4
#SBATCH --account=research
#SBATCH --array=0-3 --gpus=1
srun python3 -c "print($SLURM_ARRAY_TASK_ID)"
