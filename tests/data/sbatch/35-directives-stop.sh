#!/bin/bash
# expect: nodes=1 tasks=1 cpus=1 gpus=0 mem=0 time=0 array=0
#SBATCH --account=research
#SBATCH -N 1

# a comment
hostname
#SBATCH -N 8
