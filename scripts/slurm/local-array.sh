#!/usr/bin/env bash
# Runs an array script as a Slurm job array would, without Slurm: N processes at once, each
# with the array variables Slurm sets, then its merge script. CI runs it to check that the
# committed scripts shard and merge exactly what one process computes.
# Usage: MAC_CERT_DIR=DIR [MAC_MODE=cpu] [MAC_SUBSET=smoke] scripts/slurm/local-array.sh N
#        MAC_STUDY_DIR=DIR [MAC_STUDY_CONFIG=FILE] scripts/slurm/local-array.sh N \
#            scripts/slurm/study.sbatch scripts/slurm/study-merge.sbatch
set -euo pipefail
n=${1:?usage: local-array.sh N [ARRAY.sbatch MERGE.sbatch]}
[[ $n =~ ^[1-9][0-9]*$ ]] || { echo "local-array.sh: N = '$n' is not a positive whole number" >&2; exit 2; }
here=$(dirname "$0")
array=${2:-$here/certify.sbatch}
merge=${3:-$here/merge.sbatch}
if [[ $# -lt 2 ]]; then : "${MAC_CERT_DIR:?MAC_CERT_DIR is unset}"; fi
pids=()
for ((k = 0; k < n; ++k)); do
  SLURM_ARRAY_JOB_ID=local SLURM_ARRAY_TASK_ID=$k SLURM_ARRAY_TASK_COUNT=$n \
    bash "$array" &
  pids+=($!)
done
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=1; done
# Like submit.sh's afterany: merge whatever the tasks left, and let the merge name what is missing.
MAC_SHARDS=$n bash "$merge" || status=1
exit $status
