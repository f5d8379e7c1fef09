#!/bin/bash
# expect: nodes=1 tasks=4 gpus=4
# steps-run: both
#SBATCH --account=research
#SBATCH -N 1 -n 4 --gpus-per-task=1
srun -l sh -c 'echo "prepare step=$SLURM_STEP_ID"'
srun -n 2 sh -c 'echo "train step=$SLURM_STEP_ID task=$SLURM_PROCID"'
srun --ntasks-per-node=1 sh -c 'echo "done step=$SLURM_STEP_ID ntasks=$SLURM_STEP_NUM_TASKS"'
