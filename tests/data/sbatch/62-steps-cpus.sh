#!/bin/bash
# expect: nodes=1 tasks=2
# steps-run: both
#SBATCH --account=research
#SBATCH -N 1 -n 2 -c 4
srun -c 4 --cpu-bind=cores echo bound
