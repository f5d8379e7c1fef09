#!/bin/bash
# expect: nodes=1 tasks=1 cpus=1 gpus=0 mem=0 time=0 array=0 mail=alice@example.com
# expect-warning: --requeue: ignored
#SBATCH --account=research
#SBATCH --mail-type=END
#SBATCH --mail-user=alice@example.com
#SBATCH --requeue
echo "$SLURM_JOB_ID $SLURM_PROCID"
