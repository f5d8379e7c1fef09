#!/bin/sh
# expect: nodes=2 tasks=4 gpus=16
# steps-run: both
#SBATCH --account=research
#SBATCH --nodes=2 --ntasks-per-node=2 --gpus-per-node=8
srun -l -N 2 sh -c 'echo "nodes=$SLURM_STEP_NUM_NODES"'
srun -N 1 sh -c 'echo "one-node task=$SLURM_PROCID of $SLURM_STEP_NUM_TASKS"'
