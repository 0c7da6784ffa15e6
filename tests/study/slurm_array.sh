#!/usr/bin/env bash
# The committed Slurm scripts for mac-study (scripts/slurm/study.sbatch, study-merge.sbatch),
# run as a job array would run them (scripts/slurm/local-array.sh: N processes with Slurm's
# array variables, then the merge), must give what one process gives: every run file and every
# table equal result for result (tools/mac-study/study_diff.py), each run computed by exactly
# one shard. A missing shard must stop the merge with its number and no table; bad --shard and
# --merge values must be refused with one message naming them.
# Usage: slurm_array.sh MAC_STUDY PYTHON SOURCE_DIR WORK_DIR
set -euo pipefail
study=$1 python=$2 src=$3 work=$4
rm -rf "$work" && mkdir -p "$work" && cd "$work"
fail() { echo "FAIL: $*"; exit 1; }
# A tiny sweep: 2 layers x 2 tau x 2 tails x 2 variants = 16 runs of 192 steps (seconds).
cat >sweep.cfg <<'CFG'
synth-tokens = 384
synth-layers = 2
tau = 0.3,0.45
ring = 64
tail = 16,32
variant = split,downdate
gen-min = 0
threads = 1
CFG
export MAC_STUDY=$study MAC_STUDY_CONFIG=$work/sweep.cfg
"$study" --config sweep.cfg --out single --quiet >single.log
MAC_STUDY_DIR=array bash "$src/scripts/slurm/local-array.sh" 3 "$src/scripts/slurm/study.sbatch" \
  "$src/scripts/slurm/study-merge.sbatch" >array.log 2>&1 || { cat array.log; fail "the local array did not complete"; }
# Every run of the sweep computed by exactly one of the three processes.
computed=$(grep -c '^  computed ' array.log || true)
unique=$(grep '^  computed ' array.log | sort -u | wc -l)
[[ $computed == 16 && $unique == 16 ]] || { cat array.log; fail "the shards computed $computed runs ($unique distinct), not each of the 16 once"; }
for k in 0 1 2; do grep -q "^shard $k/3: " array.log || fail "shard $k/3 did not report"; done
"$python" "$src/tools/mac-study/study_diff.py" single array
# The comparison itself must see a difference: one value of one run changed.
cp -r array tampered
"$python" - tampered <<'PY'
import pathlib, sys, h5py
f = sorted(pathlib.Path(sys.argv[1], "runs").glob("*.h5"))[0]
with h5py.File(f, "r+") as h:
    h["rel_l2"][0, 0] = h["rel_l2"][0, 0] * 2 + 1
PY
if "$python" "$src/tools/mac-study/study_diff.py" single tampered >/dev/null 2>&1; then
  fail "study_diff found no difference after one value of one run was changed"
fi
# A shard that did not run: the merge names it, exits 2 and writes no table.
for k in 0 2; do "$study" --config sweep.cfg --out partial --shard "$k/3" --quiet >/dev/null; done
set +e
"$study" --config sweep.cfg --out partial --merge 3 --quiet >/dev/null 2>merge.err
rc=$?
set -e
[[ $rc == 2 ]] || fail "the merge with shard 1 missing exited $rc, not 2"
grep -q "shard 1/3 (" merge.err || { cat merge.err; fail "the merge did not name shard 1/3"; }
if grep -q "shard [02]/3 (" merge.err; then cat merge.err; fail "the merge named a shard that ran"; fi
[[ ! -e partial/runs.csv && ! -e partial/study.h5 ]] || fail "a refused merge left tables"
# Bad values: one message naming the value, exit 2, nothing written.
for bad in "--shard 1x/2" "--shard 3/2" "--shard 0/0" "--shard 1" "--shard -1/2" "--merge 0" "--merge x"; do
  set +e
  # shellcheck disable=SC2086  # $bad is a flag and its value
  "$study" --config sweep.cfg --out refused $bad --quiet >/dev/null 2>bad.err
  rc=$?
  set -e
  value=${bad#* }
  [[ $rc == 2 ]] || fail "'$bad' exited $rc, not 2"
  grep -qF "'$value'" bad.err || { cat bad.err; fail "the message for '$bad' does not name '$value'"; }
  [[ ! -e refused ]] || fail "'$bad' created the output folder"
done
echo "OK: 3 array tasks merged equal one process in every run and table; a missing shard stops the merge"
