#!/bin/bash
# expect: tasks=1
#SBATCH --account=research
#SBATCH --dependency=afternotok:7
srun true
