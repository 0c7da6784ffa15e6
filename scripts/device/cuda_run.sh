#!/usr/bin/env bash
# One device call for the CUDA kernels (issue 3): build only the CUDA targets, run the GPU
# test suite, compute-sanitizer memcheck + racecheck on a small case, mac-bench over the
# issue's grid and the cuDNN SDPA baseline. Files in $OUT (≤ 8, as the device tool returns):
# env.txt, tests.log, sanitizer.log, mac_bench.csv, sdpa.csv, stderr.log.
# Usage: OUT=dir [MAC_BENCH_ARGS=...] [SDPA_ARGS=...] scripts/device/cuda_run.sh [all|tests|bench]
set -u -o pipefail
OUT=${OUT:-$PWD/out-device}
mkdir -p "$OUT"
what=${1:-all}
{ echo "commit ${MAC_COMMIT:-$(git rev-parse --short=12 HEAD 2>/dev/null)}"; git status --short 2>/dev/null | grep -E "cuda|mac-bench|scripts/device" ;
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.mem --format=csv; nvcc --version | tail -1; } > "$OUT/env.txt" 2>&1
scripts/device/build_cuda.sh || exit 1
rm -f "$OUT/configure.log" "$OUT/build.log"
# Smoke test of the default amend variant before the long runs.
timeout 60 build-dev/tests/test_cuda --run_test=amend/head_dims > "$OUT/smoke.log" 2>&1; rc=$?
echo "smoke (default amend) rc=$rc"; grep -E "\[(OK|FAIL)\]" "$OUT/smoke.log" | cut -c1-160
if [[ $rc != 0 ]]; then tail -5 "$OUT/smoke.log"; fi
rm -f "$OUT/smoke.log"
if [[ $what == all || $what == tests ]]; then
  (cd build-dev && timeout 300 ctest -L gpu --output-on-failure -V) > "$OUT/tests.log" 2>&1
  echo "ctest rc=$?"; grep -E "\[(OK|FAIL)\]|SKIPPED|tests passed|Failed|error" "$OUT/tests.log" | cut -c1-300 | head -40
  # The other amend variant (bulk copies) through the same suite.
  timeout 200 build-dev/tests/test_cuda --report_level=short -- --amend bulk > "$OUT/tests_bulk.log" 2>&1
  echo "test_cuda (--amend bulk) rc=$?"; grep -E "\[(OK|FAIL)\]|failure|No errors" "$OUT/tests_bulk.log" | cut -c1-200
  cat "$OUT/tests_bulk.log" >> "$OUT/tests.log"; rm -f "$OUT/tests_bulk.log"
  : > "$OUT/sanitizer.log"
  # memcheck also on the forced discards of the partials' L2 lines (global memory only, so not
  # racecheck's: shared-memory hazards; under it that case outlasts the 240 s limit) and on
  # the two cuts of a step (its shared-memory schedule is the sinks case's).
  for tool in memcheck racecheck; do
    cases=cache_write/sinks_gen_min_readiness_side_stream:schedule/schedule_kernel_path
    [[ $tool == memcheck ]] && cases=$cases:combine/partial_states_discarded:schedule/eligible_rows_take_their_own_cut
    timeout 240 compute-sanitizer --tool $tool --error-exitcode 9 build-dev/tests/test_cuda \
      --run_test=$cases >> "$OUT/sanitizer.log" 2>&1
    echo "compute-sanitizer $tool rc=$?"
  done
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|\[OK\]|\[FAIL\]" "$OUT/sanitizer.log" | cut -c1-200
  grep -m3 -A2 "Warning: Race" "$OUT/sanitizer.log" | cut -c1-240
fi
if [[ $what == all || $what == bench ]]; then
  timeout 400 build-dev/bin/mac-bench --csv "$OUT/mac_bench.csv" ${MAC_BENCH_ARGS:-} 2>> "$OUT/stderr.log"
  echo "mac-bench rc=$?"; cut -d, -f1-3,5,8-11,14,18-20 "$OUT/mac_bench.csv"
  if [[ ${BULK_COMPARE:-0} == 1 ]]; then
    timeout 120 build-dev/bin/mac-bench --mac 0 --amend bulk --csv "$OUT/mac_bench_bulk.csv" ${MAC_BENCH_ARGS:-} 2>> "$OUT/stderr.log"
    echo "mac-bench bulk rc=$?"; cut -d, -f1-3,5,8-11,14,18-20 "$OUT/mac_bench_bulk.csv"
  fi
  timeout 200 python3 tools/mac-bench/sdpa_baseline.py --csv "$OUT/sdpa.csv" ${SDPA_ARGS:-} 2>> "$OUT/stderr.log"
  echo "sdpa rc=$?"; cut -d, -f3,5-7,11 "$OUT/sdpa.csv"
fi
