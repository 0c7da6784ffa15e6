#!/usr/bin/env bash
# Submits a mac-study sweep as a Slurm job array of N shards plus the merge that waits for it.
# Usage: MAC_STUDY_CONFIG=sweep.cfg scripts/slurm/submit-study.sh N [sbatch flags for the array]
# The output lands in study-<array job id>/ (or $MAC_STUDY_DIR): runs/ and exact/ from the
# shards, then the tables from the merge. MAC_STUDY, MAC_STUDY_CONFIG and MAC_STUDY_ARGS reach
# both jobs through sbatch's default --export=ALL.
set -euo pipefail
n=${1:?usage: submit-study.sh N [sbatch flags]}
[[ $n =~ ^[1-9][0-9]*$ ]] || { echo "submit-study.sh: N = '$n' is not a positive whole number" >&2; exit 2; }
shift
here=$(dirname "$0")
jid=$(sbatch --parsable --array="0-$((n - 1))" "$@" "$here/study.sbatch")
jid=${jid%%;*}
dir=${MAC_STUDY_DIR:-study-$jid}
sbatch --parsable --dependency="afterany:$jid" \
  --export="ALL,MAC_SHARDS=$n,MAC_STUDY_DIR=$dir" "$here/study-merge.sbatch" >/dev/null
echo "submitted array $jid ($n shards) and its merge; the tables will be in $dir/"
