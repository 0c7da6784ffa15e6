#!/bin/bash
# The GPU certification run: configure + build mac-verify, run the full certification matrix in
# GPU mode on every visible device (JOBS processes per device share the CPU cores for the
# expected FP64 values), and leave the report, the logs and any reproducers in OUTDIR.
#
#   verification/certify_gpu.sh OUTDIR [BUDGET_S] [BUILD_DIR]
#
# BUDGET_S (default 0 = none) bounds the whole script: the run gets what the build left,
# minus a margin, as --time-limit (cases not started in time are reported as skipped).
set -u
OUT=${1:?usage: certify_gpu.sh OUTDIR [BUDGET_S] [BUILD_DIR]}
BUDGET=${2:-0}
BUILD=${3:-build-dev}
JOBS=${JOBS:-8}
REPRO=${REPRO:-20}  # reproducer files per process
mkdir -p "$OUT"
T0=$(date +%s)
{ date -u; nvidia-smi -L 2>&1; nproc; } > "$OUT/machine.txt"
if [ -z "${MAC_VERIFY_COMMIT:-}" ] && git rev-parse HEAD > /dev/null 2>&1; then
  MAC_VERIFY_COMMIT=$(git rev-parse --short=12 HEAD)
  git diff --quiet HEAD -- . 2> /dev/null || MAC_VERIFY_COMMIT="$MAC_VERIFY_COMMIT+dirty"
fi
export MAC_VERIFY_COMMIT=${MAC_VERIFY_COMMIT:-unknown}
echo "commit: $MAC_VERIFY_COMMIT" >> "$OUT/machine.txt"
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release > "$OUT/cmake.log" 2>&1 ||
  { echo "configure failed"; tail -30 "$OUT/cmake.log"; exit 2; }
ninja -C "$BUILD" mac-verify > "$OUT/build.log" 2>&1 || { echo "build failed"; tail -40 "$OUT/build.log"; exit 2; }
T1=$(date +%s)
echo "build: $((T1 - T0)) s" | tee -a "$OUT/machine.txt"
LIMIT=()
if [ "$BUDGET" -gt 0 ]; then
  LEFT=$((BUDGET - (T1 - T0) - 45))
  [ "$LEFT" -lt 30 ] && LEFT=30
  LIMIT=(--time-limit "$LEFT")
fi
NDEV=$(nvidia-smi -L 2> /dev/null | wc -l)
[ "$NDEV" -ge 1 ] || NDEV=1
DEVS=$(seq -s, 0 $((NDEV - 1)))
"$BUILD/bin/mac-verify" --mode gpu --devices "$DEVS" --jobs-per-device "$JOBS" "${LIMIT[@]}" \
  --max-repro "$REPRO" --out "$OUT/mac-verify-gpu.h5" --fail-dir "$OUT" > "$OUT/summary.txt" 2> "$OUT/progress.txt"
RC=$?
T2=$(date +%s)
echo "mac-verify exit status $RC, run $((T2 - T1)) s, total $((T2 - T0)) s" | tee -a "$OUT/summary.txt"
tail -5 "$OUT/progress.txt"
grep -v "^\[FAIL\]\|^    " "$OUT/summary.txt" | tail -30
grep -c "^\[FAIL\]\|^\[ERROR\]" "$OUT/summary.txt" | sed 's/^/failing cases printed: /'
exit $RC
