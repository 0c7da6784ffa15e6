#!/usr/bin/env bash
# Runs certify.sbatch as a Slurm job array would, without Slurm: N processes at once, each
# with the array variables Slurm sets, then merge.sbatch. CI runs it to check that the
# committed scripts shard and merge exactly what one process certifies.
# Usage: MAC_CERT_DIR=DIR [MAC_MODE=cpu] [MAC_SUBSET=smoke] scripts/slurm/local-array.sh N
set -euo pipefail
n=${1:?usage: local-array.sh N}
[[ $n =~ ^[1-9][0-9]*$ ]] || { echo "local-array.sh: N = '$n' is not a positive whole number" >&2; exit 2; }
: "${MAC_CERT_DIR:?MAC_CERT_DIR is unset}"
here=$(dirname "$0")
pids=()
for ((k = 0; k < n; ++k)); do
  SLURM_ARRAY_JOB_ID=local SLURM_ARRAY_TASK_ID=$k SLURM_ARRAY_TASK_COUNT=$n \
    bash "$here/certify.sbatch" &
  pids+=($!)
done
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=1; done
# Like submit.sh's afterany: merge whatever the tasks left, and let the merge name what is missing.
MAC_SHARDS=$n bash "$here/merge.sbatch" || status=1
exit $status
