#!/usr/bin/env python3
# expect: nodes=1 tasks=1 cpus=1 gpus=0 mem=0 time=5 array=0
# expect-command: /usr/bin/env
#SBATCH --account=research
#SBATCH --time=5
import os
print(os.environ.get("SLURM_PROCID"))
