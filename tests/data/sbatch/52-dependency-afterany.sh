#!/bin/bash
# expect: tasks=1
#SBATCH --account=research
#SBATCH --dependency=afterany:1
srun true
