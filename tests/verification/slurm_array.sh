#!/usr/bin/env bash
# The committed Slurm scripts, run as a job array would run them (scripts/slurm/local-array.sh:
# N processes with Slurm's array variables, then the merge), must certify exactly what one
# process does: the merged report equals the unsharded one in every per-case and per-head
# result (verification/report_diff.py), and its certificate has the same families. A missing shard must stop the merge with its number.
# Usage: slurm_array.sh MAC_VERIFY PYTHON SOURCE_DIR WORK_DIR
set -euo pipefail
verify=$1 python=$2 src=$3 work=$4
rm -rf "$work" && mkdir -p "$work" && cd "$work"
export MAC_VERIFY=$verify MAC_MODE=cpu MAC_SUBSET=smoke
"$verify" --mode cpu --subset smoke --quiet --out single.h5 >/dev/null
MAC_CERT_DIR=array bash "$src/scripts/slurm/local-array.sh" 3 >array.log 2>&1 ||
  { cat array.log; echo "FAIL: the local array did not complete"; exit 1; }
for k in 0 1 2; do
  [[ -f array/shard-$k-of-3.h5 ]] || { echo "FAIL: shard $k wrote no report"; exit 1; }
done
"$python" "$src/verification/report_diff.py" single.h5 array/report.h5
# The merge's certificate is the whole run's: the same verdict and per-family rows as one
# process's (same cases, same seeds).
[[ -f array/report.md ]] || { echo "FAIL: the merge wrote no certificate"; exit 1; }
grep -q '^# mac-verify certificate: PASS' array/report.md ||
  { echo "FAIL: the merged certificate is not PASS"; exit 1; }
families() { awk '/^## Families/ { on = 1 } /^## Failures/ { on = 0 } on' "$1"; }
diff <(families single.md) <(families array/report.md) ||
  { echo "FAIL: the merged certificate's families differ from one process's"; exit 1; }
# The comparison itself must see a difference: a report of one shard is not the whole.
if "$python" "$src/verification/report_diff.py" single.h5 array/shard-1-of-3.h5 >/dev/null; then
  echo "FAIL: report_diff found no difference between the whole and one shard"; exit 1
fi
rm array/shard-1-of-3.h5 array/report.h5 array/report.md
if MAC_SHARDS=3 MAC_CERT_DIR=array bash "$src/scripts/slurm/merge.sbatch" 2>merge.err; then
  echo "FAIL: the merge went ahead with shard 1 missing"; exit 1
fi
grep -q "shard(s) 1 of 3" merge.err || { cat merge.err; echo "FAIL: the merge did not name shard 1"; exit 1; }
[[ ! -e array/report.h5 && ! -e array/report.md ]] || { echo "FAIL: a partial merge left a report"; exit 1; }
echo "OK: 3 array tasks merged equal one process; a missing shard stops the merge"
