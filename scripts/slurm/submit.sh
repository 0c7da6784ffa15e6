#!/usr/bin/env bash
# Submits a Slurm job array of N shards plus the merge that waits for it: the certification
# (certify.sbatch, merge.sbatch) or, with `study` first, a mac-study sweep (study.sbatch,
# study-merge.sbatch; the sweep from MAC_STUDY_CONFIG / MAC_STUDY_ARGS, docs/study-format.md).
# Usage: scripts/slurm/submit.sh [study] N [sbatch flags for the array, e.g. --partition=gpu]
# The output lands in certify-<array job id>/ (shard-k-of-N.h5, then report.h5), or for a
# study in study-<array job id>/ (or $MAC_STUDY_DIR: runs/ from the shards, then the tables).
set -euo pipefail
array=certify.sbatch merge=merge.sbatch dir_var=MAC_CERT_DIR result=report.h5
if [[ ${1:-} == study ]]; then
  array=study.sbatch merge=study-merge.sbatch dir_var=MAC_STUDY_DIR result="the tables"
  shift
fi
n=${1:?usage: submit.sh [study] N [sbatch flags]}
[[ $n =~ ^[1-9][0-9]*$ ]] || { echo "submit.sh: N = '$n' is not a positive whole number" >&2; exit 2; }
shift
here=$(dirname "$0")
jid=$(sbatch --parsable --array="0-$((n - 1))" "$@" "$here/$array")
jid=${jid%%;*}
dir=${!dir_var:-${array%.sbatch}-$jid}
sbatch --parsable --dependency="afterany:$jid" \
  --export="ALL,MAC_SHARDS=$n,$dir_var=$dir" "$here/$merge" >/dev/null
echo "submitted array $jid ($n shards) and its merge; $result will be in $dir/"
