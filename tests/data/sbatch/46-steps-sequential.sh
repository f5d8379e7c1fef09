#!/bin/bash
# expect: nodes=1 tasks=4 gpus=4
#SBATCH --account=research
#SBATCH -N 1 -n 4 --gpus-per-task=1
srun -l echo prepare
srun -n 2 echo train
srun --ntasks-per-node=1 echo done
