#!/bin/bash
# expect: nodes=2 tasks=2 gpus=16
# steps-run: both
#SBATCH --account=research
#SBATCH -N 2 --ntasks-per-node=1 --gpus-per-node=8
srun sh -c 'echo "step=$SLURM_STEP_ID task=$SLURM_PROCID of $SLURM_STEP_NUM_TASKS"'
srun -n1 false
echo "rc=$?"
