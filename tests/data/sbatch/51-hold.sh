#!/bin/bash
# expect-error: --hold: not supported
#SBATCH --account=research
#SBATCH --hold --gpus=1
srun nvidia-smi
