#!/bin/bash
# expect: tasks=1 gpus=1
#SBATCH --account=research
#SBATCH --gpus=1 -C "a100|h100"
srun true
