#!/bin/bash
# expect: nodes=1 tasks=1 gpus=1
#SBATCH --account=research
#SBATCH --gpus=1 --nodelist=node001
srun hostname
