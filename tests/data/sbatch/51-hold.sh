#!/bin/bash
# expect: gpus=1 hold=1
#SBATCH --account=research
#SBATCH --hold --gpus=1
srun nvidia-smi
