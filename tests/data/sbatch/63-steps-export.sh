#!/bin/bash
# expect: tasks=1
#SBATCH --account=research
#SBATCH -n 1
srun --export=ALL,FOO=1 env
