#!/bin/bash
# expect: tasks=1 time=90
# steps-run: both
#SBATCH --account=research
#SBATCH --time=1:30:00
srun -t 10 echo short
