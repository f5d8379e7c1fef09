#!/bin/bash
# expect: nodes=1 tasks=1 gpus=1
#SBATCH --account=research
#SBATCH -N 1 --gpus=1 --time=30
srun -u bash -c "hostname; nvidia-smi -L"
