#!/bin/bash
# expect: nodes=1 tasks=2
# steps-run: both
#SBATCH --account=research
#SBATCH -n 2 -N 1
srun -n 1 sh -c "exit 3"
echo "rc=$?"
srun -n 2 sh -c 'echo "after step=$SLURM_STEP_ID task=$SLURM_PROCID"'
exit 4
