#!/usr/bin/env bash
# One device call for the CUDA kernels (issue 3): configure + build only the CUDA targets,
# run the GPU test suite, compute-sanitizer memcheck/racecheck on a small case, mac-bench
# over the grid, the SDPA baseline. Logs and CSVs go to $OUT (default ./out-device).
# Usage: scripts/device/cuda_run.sh [all|tests|bench]   (MAC_BENCH_ARGS adds mac-bench flags)
set -u -o pipefail
OUT=${OUT:-$PWD/out-device}
mkdir -p "$OUT"
what=${1:-all}
git rev-parse --short=12 HEAD > "$OUT/commit.txt" 2>/dev/null; git status --short >> "$OUT/commit.txt" 2>/dev/null
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > "$OUT/gpu.txt" 2>&1
scripts/device/build_cuda.sh || exit 1
if [[ $what == all || $what == tests ]]; then
  (cd build-dev && timeout 300 ctest -L gpu --output-on-failure -V) > "$OUT/tests.log" 2>&1
  echo "ctest rc=$?"; grep -E "^\S*\[(OK|FAIL)\]|SKIPPED|error|failure|tests passed|Passed|Failed|\*\*\*" "$OUT/tests.log" | head -40
  for tool in memcheck racecheck; do
    timeout 240 compute-sanitizer --tool $tool --error-exitcode 9 build-dev/tests/test_cuda \
      --run_test=mac_cuda/sinks_gen_min_readiness_side_stream > "$OUT/sanitizer_$tool.log" 2>&1
    echo "compute-sanitizer $tool rc=$?"; tail -3 "$OUT/sanitizer_$tool.log"
  done
fi
if [[ $what == all || $what == bench ]]; then
  timeout 400 build-dev/bin/mac-bench --csv "$OUT/mac_bench.csv" ${MAC_BENCH_ARGS:-} 2> "$OUT/mac_bench.err"
  echo "mac-bench rc=$?"; cat "$OUT/mac_bench.err" | tail -5; column -s, -t < "$OUT/mac_bench.csv" | cut -c1-160
  timeout 200 python3 tools/mac-bench/sdpa_baseline.py --csv "$OUT/sdpa.csv" ${SDPA_ARGS:-} 2> "$OUT/sdpa.err"
  echo "sdpa rc=$?"; tail -3 "$OUT/sdpa.err"; column -s, -t < "$OUT/sdpa.csv"
fi
