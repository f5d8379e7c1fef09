#!/bin/bash
# expect: tasks=1 gpus=1
#SBATCH --account=research
#SBATCH --gpus=1 --constraint=ib&nvme
srun true
