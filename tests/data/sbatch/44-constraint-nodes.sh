#!/bin/bash
# expect: nodes=1 tasks=1 gpus=1 constraint=ib&pool=train|H100-80GB nodelist=r-[1-4],s-1 exclude=r-3 reservation=maint-1
#SBATCH --account=research
#SBATCH --gpus=1
#SBATCH --constraint=ib&pool=train|H100-80GB
#SBATCH -w r-[1-4],s-1
#SBATCH --exclude=r-3
#SBATCH --reservation=maint-1
echo "$SLURM_JOB_ID $SLURM_PROCID"
