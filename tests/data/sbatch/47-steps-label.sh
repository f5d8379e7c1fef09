#!/bin/sh
# expect: nodes=2 tasks=4
#SBATCH --account=research
#SBATCH --nodes=2 --ntasks-per-node=2
srun -l -N 2 hostname
