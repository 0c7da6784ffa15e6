#!/usr/bin/env bash
# Submits the certification as a Slurm job array of N shards plus the merge that waits for it.
# Usage: scripts/slurm/submit.sh N [sbatch flags for the array, e.g. --partition=gpu]
# The reports land in certify-<array job id>/ (shard-k-of-N.h5, then report.h5).
set -euo pipefail
n=${1:?usage: submit.sh N [sbatch flags]}
[[ $n =~ ^[1-9][0-9]*$ ]] || { echo "submit.sh: N = '$n' is not a positive whole number" >&2; exit 2; }
shift
here=$(dirname "$0")
jid=$(sbatch --parsable --array="0-$((n - 1))" "$@" "$here/certify.sbatch")
jid=${jid%%;*}
dir=${MAC_CERT_DIR:-certify-$jid}
sbatch --parsable --dependency="afterany:$jid" \
  --export="ALL,MAC_SHARDS=$n,MAC_CERT_DIR=$dir" "$here/merge.sbatch" >/dev/null
echo "submitted array $jid ($n shards) and its merge; the report will be $dir/report.h5"
