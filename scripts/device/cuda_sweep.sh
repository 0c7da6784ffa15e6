#!/usr/bin/env bash
# Tuning sweep of the full-attention kernel (issue 3): chunk size and page layout, plus the
# GPU test suite log. Usage: OUT=dir scripts/device/cuda_sweep.sh
set -u -o pipefail
OUT=${OUT:-$PWD/out-device}
mkdir -p "$OUT"
scripts/device/build_cuda.sh || exit 1
(cd build-dev && timeout 200 ctest -L gpu --output-on-failure -V) > "$OUT/tests.log" 2>&1; echo "ctest rc=$?"
grep -E "\[(OK|FAIL)\]|tests passed|error" "$OUT/tests.log" | cut -c1-400
for c in 256 512 1024 2048; do
  timeout 100 build-dev/bin/mac-bench --mac 0 --batch 1 16 64 --reps 30 --chunk $c --csv "$OUT/sweep_nhd_$c.csv" 2>/dev/null
done
timeout 100 build-dev/bin/mac-bench --mac 0 --batch 1 16 64 --reps 30 --chunk 1024 --layout hnd --csv "$OUT/sweep_hnd_1024.csv" 2>/dev/null
cat "$OUT"/sweep_*.csv | grep -v '^#' | grep -v '^kind' | cut -d, -f3,4,6,8,9,13,17,18 > "$OUT/sweep_all.txt"
cat "$OUT/sweep_all.txt"
