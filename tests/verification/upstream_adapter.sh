#!/usr/bin/env bash
# The upstream adapter's mapping path on the CPU (docs/upstream-certificate.md): export cases
# for the capabilities the adapter declares (D = 64 and D = 256 cases come out not
# applicable), run verification/adapters/upstream_mac.py --kernel numpy-reference (our numpy
# reference behind upstream's calling convention: token tables, slot-major ring, readiness
# and epoch gates, the threshold argument), grade: PASS. The same run with the current token
# mapped to the previous token's location (--plant-fault) grades FAIL, so the grade sees a
# mapping error; dispute.py recomputes the worst head-step of a case of each run in FP64.
# Usage: upstream_adapter.sh MAC_VERIFY PYTHON SOURCE_DIR WORK_DIR
set -euo pipefail
mv=$1 py=$2 src=$3 work=$4
adapter=$src/verification/adapters/upstream_mac.py
rm -rf "$work"
mkdir -p "$work"
# One or two D = 128 cases of every family that has them (grid F = 64 and page size 16, lag,
# batch, wrap with r = 0 and M = 16, tie with unusable twins, thr_eq, small, gen_min,
# not_ready gated both ways, graph_chain, extreme cancel:40, params τ = 0.8 (no exact threshold
# argument), random G = 6), and cases 0 (D = 64) and 240 (D = 256).
cases=0,128,192,240,284,337,369,379,407,464,489,501,523,552,624,671,704
"$py" "$adapter" caps --kernel numpy-reference > "$work/caps.txt"
"$mv" --export "$work/export" --caps "$work/caps.txt" --case "$cases" | grep -q 'exported 15 case'
"$py" "$adapter" run "$work/export" --kernel numpy-reference > "$work/run.log"
grep -q '^15 case(s) written' "$work/run.log"
# τ = 0.8 (case 671) has no float32 argument giving our threshold: logged as inexact.
log=$work/export/upstream_adapter.tsv
awk -F'\t' '$1 == 671 && $11 == 0 { found = 1 } END { exit !found }' "$log"
awk -F'\t' '$1 == 128 && $11 == 1 { found = 1 } END { exit !found }' "$log"

set +e
"$mv" --grade "$work/export" --out "$work/grade.h5" --quiet --no-summary > "$work/grade.txt" 2>&1
rc=$?
set -e
if [ "$rc" -ne 0 ]; then
  cat "$work/grade.txt"
  echo "upstream_adapter: grading the mapped reference exited $rc" >&2
  exit 1
fi
grep -q '^# mac-verify certificate: PASS' "$work/grade.md"
grep -q '^| d256 | 0 | 0 | 0 | 0 | 1 |' "$work/grade.md"
grep -q 'upstream calling convention, numpy reference numpy |' "$work/grade.md"

"$py" "$adapter" run "$work/export" --kernel numpy-reference --outputs "$work/fault" \
  --log "$work/fault.tsv" --plant-fault stale-current-token > /dev/null
set +e
"$mv" --grade "$work/export" --outputs "$work/fault" --out "$work/fault.h5" --quiet --no-summary \
  --max-repro 0 > "$work/fault.txt" 2>&1
rc=$?
set -e
test "$rc" -eq 1 || { echo "upstream_adapter: the planted fault graded $rc, not 1" >&2; exit 1; }
grep -q 'output rel L2' "$work/fault.md"

# dispute.py: the worst head-step of case 704 sits within the limit of the FP64 value of
# semantics §3's decision for the mapped reference, and outside it with the planted fault.
dispute=$src/verification/adapters/dispute.py
err() {  # the kernel's output's rel L2 to the FP64 output of semantics §3's decision
  "$py" "$dispute" "$work/export" 704 --outputs "$1" |
    sed -n "s/.*FP64 out for semantics §3's decision: kernel's o rel L2 \([0-9.e+-]*\),.*/\1/p"
}
good=$(err "$work/export/outputs") bad=$(err "$work/fault")
awk -v g="$good" -v b="$bad" 'BEGIN { exit !(g != "" && b != "" && g < 0.01 && b > 0.01) }' ||
  { echo "upstream_adapter: dispute.py rel L2 $good (reference), $bad (fault)" >&2; exit 1; }
echo "upstream_adapter: mapped reference PASS (worst rel L2 $good in FP64), D = 64/256 not" \
  "applicable, planted fault FAIL ($bad)"
