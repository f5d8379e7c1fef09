#!/bin/bash
# expect: tasks=1
#SBATCH --account=research
#SBATCH --dependency=singleton
srun true
